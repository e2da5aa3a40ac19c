#!/usr/bin/env bash
# The Python client's tests (clients/python/) against real lockd processes.
#
# A venv under target/venv (made once, then reused), the client installed
# from the tree (setuptools, no build isolation: nothing downloaded for
# it), pytest, then `pytest clients/python/tests -q` (extra arguments go to
# pytest). The tests start target/release/lockd (or LOCKD_BIN).
set -euo pipefail
cd "$(dirname "$0")/.."

. scripts/lib/installs.sh
python_client_deps

# The client as pip installs it, built from a copy under target/ so the
# build leaves nothing in the tree; again only when its sources changed.
stamp=$(find clients/python/pyproject.toml clients/python/README.md clients/python/src \
            -type f -not -path '*/__pycache__/*' -not -path '*.egg-info/*' | LC_ALL=C sort |
        xargs sha256sum | sha256sum | cut -d' ' -f1)
if [ "$(cat "$venv/.lockd-client-stamp" 2>/dev/null)" != "$stamp" ]; then
    rm -rf target/python-client
    mkdir -p target/python-client
    cp -r clients/python/pyproject.toml clients/python/README.md clients/python/src target/python-client/
    find target/python-client -name __pycache__ -prune -exec rm -rf {} +
    venv_install --no-build-isolation --no-deps --force-reinstall ./target/python-client
    echo "$stamp" > "$venv/.lockd-client-stamp"
fi

# Two workers, one test file each at a time (each worker starts its own
# shared clusters, on its own ports): the tests mostly wait on clusters.
exec "$py" -m pytest clients/python/tests -q -p no:cacheprovider -n 2 --dist loadfile "$@"
