#!/usr/bin/env bash
# Installs what the test steps after the Rust tests need (the venv and its
# packages, Chromium): scripts/lib/installs.sh. scripts/test.sh runs it in
# the background during the build; each step still checks for (and
# installs) what it needs, so this is only ever a head start.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib/installs.sh
python_client_deps
deploy_deps
browser_deps
go_deps
