#!/usr/bin/env bash
# The web console's browser test: tests/browser/test_console.py in Debian's
# headless Chromium (chromium + chromium-driver, installed with apt when
# missing), driven by Selenium from a venv under target/venv (reused when
# present; other scripts install into it too), against real
# target/release/lockd processes (build them first: cargo build --release).
#
#   scripts/test-console.sh              # the page compiled into lockd (GET /ui)
#   scripts/test-console.sh --from-file  # host/ui/console.html from disk, through
#                                        # tests/browser/devserver.py (no rebuild)
#   scripts/test-console.sh -- -k token  # anything after -- goes to pytest
set -euo pipefail
cd "$(dirname "$0")/.."

while [ $# -gt 0 ]; do
    case "$1" in
        --from-file) export LOCKD_CONSOLE_FILE=host/ui/console.html; shift ;;
        --) shift; break ;;
        *) echo "unknown argument $1 (expected --from-file, or -- then pytest's arguments)" >&2; exit 2 ;;
    esac
done

. scripts/lib/browser.sh
browser_setup

exec "$venv/bin/python" -m pytest -q -p no:cacheprovider tests/browser "$@"
