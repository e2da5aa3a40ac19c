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

. scripts/lib/installs.sh
deploy_deps

exec "$py" deploy/tests/check.py
