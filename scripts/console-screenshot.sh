#!/usr/bin/env bash
# docs/console.png: the web console of the leader of a 3-node cluster of
# target/release/lockd under some lock traffic, in headless Chromium
# (tests/browser/screenshot.py). Same setup as scripts/test-console.sh.
#
#   scripts/console-screenshot.sh [--from-file] [--seconds N] [--out FILE]
set -euo pipefail
cd "$(dirname "$0")/.."

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
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
fi
export PYTHONDONTWRITEBYTECODE=1
venv=target/venv
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
if "$venv/bin/python" -m pip --version >/dev/null 2>&1; then
    pip=("$venv/bin/python" -m pip)
else
    # A venv made --without-pip (by another script): pip from outside installs into it.
    pip=(python3 -m pip --python "$venv/bin/python")
fi
"${pip[@]}" install -q --disable-pip-version-check "selenium>=4.11,<5"

exec "$venv/bin/python" tests/browser/screenshot.py "$@"
