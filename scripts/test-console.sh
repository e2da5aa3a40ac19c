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

if [ ! -x target/release/lockd ]; then
    echo "target/release/lockd is missing: run cargo build --release first" >&2
    exit 1
fi

missing=()
command -v chromium >/dev/null 2>&1 || missing+=(chromium)
command -v chromedriver >/dev/null 2>&1 || missing+=(chromium-driver)
if [ ${#missing[@]} -gt 0 ]; then
    sudo=""
    [ "$(id -u)" -eq 0 ] || sudo=sudo
    echo "installing ${missing[*]} with apt"
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
fi

export PYTHONDONTWRITEBYTECODE=1   # no __pycache__ in the work tree
venv=target/venv
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
if "$venv/bin/python" -m pip --version >/dev/null 2>&1; then
    pip=("$venv/bin/python" -m pip)
else
    # A venv made --without-pip (by another script): pip from outside installs into it.
    pip=(python3 -m pip --python "$venv/bin/python")
fi
"${pip[@]}" install -q --disable-pip-version-check "selenium>=4.11,<5" "pytest>=7"

exec "$venv/bin/python" -m pytest -q -p no:cacheprovider tests/browser "$@"
