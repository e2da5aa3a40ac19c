#!/usr/bin/env bash
# Offline checks of deploy/: the Kubernetes manifests against the
# Kubernetes schemas (kubernetes-validate, strict, at the oldest and the
# newest version they are meant for), the StatefulSet, Services and budget
# against each other, the compose cluster's flags, the Grafana dashboard's
# metric names against deploy/grafana/metrics.txt, and the systemd example
# config's keys against the config file's settings. See deploy/tests/check.py.
#
# Installs what it needs into a venv under target/venv (once; later runs
# reuse it and need no network). Set PYTHON to choose the interpreter
# (default python3, 3.11 or later).
set -euo pipefail
cd "$(dirname "$0")/.."

venv=target/venv
python=${PYTHON:-python3}
# Pinned: the schemas the manifests are checked against come with the
# package.
reqs=(kubernetes-validate==1.37.0 PyYAML==6.0.4)

export PYTHONDONTWRITEBYTECODE=1   # no __pycache__ in the work tree
# The venv is shared with the project's other Python checks, which may
# have made it without pip of its own: then the outer pip installs into it
# (pip 22.3 and later: --python), else ensurepip.
if [ ! -x "$venv/bin/python" ]; then
    "$python" -m venv --without-pip "$venv" || {
        echo "test-deploy: '$python -m venv' failed (on Debian: apt-get install python3-venv)" >&2
        exit 1
    }
fi
py="$venv/bin/python"
if ! "$py" -c 'import yaml, kubernetes_validate.version as v; assert v.__version__ == "1.37.0"' 2>/dev/null; then
    echo "test-deploy: installing ${reqs[*]} into $venv"
    if "$py" -m pip --version >/dev/null 2>&1; then
        "$py" -m pip install --quiet --disable-pip-version-check "${reqs[@]}"
    elif ! "$python" -m pip --python "$py" install --quiet --disable-pip-version-check "${reqs[@]}"; then
        "$py" -m ensurepip --default-pip >/dev/null
        "$py" -m pip install --quiet --disable-pip-version-check "${reqs[@]}"
    fi
fi

exec "$py" deploy/tests/check.py
