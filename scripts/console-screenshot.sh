#!/usr/bin/env bash
# docs/console.png: the web console of the leader of a 3-node cluster of
# target/release/lockd under some lock traffic, in headless Chromium
# (tests/browser/screenshot.py). Same setup as scripts/test-console.sh.
#
#   scripts/console-screenshot.sh [--from-file] [--seconds N] [--out FILE]
set -euo pipefail
cd "$(dirname "$0")/.."

. scripts/lib/browser.sh
browser_setup

exec "$venv/bin/python" tests/browser/screenshot.py "$@"
