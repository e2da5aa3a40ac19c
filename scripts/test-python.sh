#!/usr/bin/env bash
# The Python client's tests (clients/python/) against real lockd processes.
#
# A venv under target/venv (made once, then reused), the client installed
# from the tree (setuptools, no build isolation: nothing downloaded for
# it), pytest, then `pytest clients/python/tests -q` (extra arguments go to
# pytest). The tests start target/release/lockd (or LOCKD_BIN).
set -euo pipefail
cd "$(dirname "$0")/.."
export PYTHONDONTWRITEBYTECODE=1  # nothing written into the tree

PYTHON=${PYTHON:-python3}
VENV=target/venv

if [ ! -x "$VENV/bin/python" ]; then
    # No pip of its own (ensurepip alone takes ~12 s here): the outer pip
    # installs into it (pip 22.3 and later: --python), else ensurepip below.
    if ! "$PYTHON" -m venv --without-pip "$VENV"; then
        rm -rf "$VENV"
        # Debian's own python3 keeps venv in a package of its own.
        if command -v apt-get >/dev/null 2>&1; then
            apt-get update -qq && apt-get install -y -qq python3-venv
        fi
        "$PYTHON" -m venv --without-pip "$VENV"
    fi
fi
PY="$VENV/bin/python"
pip_install() {
    if ! "$PY" -m pip --version >/dev/null 2>&1; then
        if "$PYTHON" -m pip --python "$PY" install --quiet --disable-pip-version-check "$@"; then
            return 0
        fi
        "$PY" -m ensurepip --default-pip >/dev/null
    fi
    "$PY" -m pip install --quiet --disable-pip-version-check "$@"
}
# pytest, and the build backend: setuptools that can build a wheel by
# itself (70.1 and later; a venv of Python 3.11 has an older one, 3.12's
# none). One pip run for both, only for what is missing.
missing=()
"$PY" -c 'import pytest' 2>/dev/null || missing+=(pytest)
"$PY" -c 'import setuptools.command.bdist_wheel' 2>/dev/null || missing+=('setuptools>=70.1')
if [ ${#missing[@]} -gt 0 ]; then
    pip_install "${missing[@]}"
fi
# The client as pip installs it, built from a copy under target/ so the
# build leaves nothing in the tree; again only when its sources changed.
stamp=$(find clients/python/pyproject.toml clients/python/README.md clients/python/src \
            -type f -not -path '*/__pycache__/*' -not -path '*.egg-info/*' | LC_ALL=C sort |
        xargs sha256sum | sha256sum | cut -d' ' -f1)
if [ "$(cat "$VENV/.lockd-client-stamp" 2>/dev/null)" != "$stamp" ]; then
    rm -rf target/python-client
    mkdir -p target/python-client
    cp -r clients/python/pyproject.toml clients/python/README.md clients/python/src target/python-client/
    find target/python-client -name __pycache__ -prune -exec rm -rf {} +
    pip_install --no-build-isolation --no-deps --force-reinstall ./target/python-client
    echo "$stamp" > "$VENV/.lockd-client-stamp"
fi

exec "$PY" -m pytest clients/python/tests -q -p no:cacheprovider "$@"
