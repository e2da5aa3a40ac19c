#!/usr/bin/env bash
# What the test steps install for themselves, fetched ahead of them:
# scripts/test.sh runs this beside the Rust build (it waits on the network
# and the disk, not on the build's two cores), so the steps after the
# build find everything in place. Ahead of time only, never required: each
# step still installs what is missing itself, so a failure here is printed
# and the step that needs the thing tries again (and fails with its reason).
set -uo pipefail
cd "$(dirname "$0")/.."
mkdir -p target
failed=()
# The Python client's venv and pytest, then the deploy checks' packages.
scripts/test-python.sh --install-only || failed+=(python)
scripts/test-deploy.sh --install-only || failed+=(deploy)
# Chromium, its driver, Selenium and pytest for the console test.
( . scripts/lib/browser.sh && browser_install "pytest>=7" ) || failed+=(browser)
# libfaketime for the cluster test clock_jump (tests/cluster/clock_jump.rs).
if [ ! -e /usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1 ] && command -v apt-get >/dev/null 2>&1; then
    sudo=""
    [ "$(id -u)" -eq 0 ] || sudo=sudo
    { DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq libfaketime >/dev/null 2>&1 ||
      { $sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq libfaketime >/dev/null; }
    } || failed+=(libfaketime)
fi
if [ ${#failed[@]} -gt 0 ]; then
    echo "test-prepare: could not install ahead: ${failed[*]} (the steps that need them will try again)" >&2
    exit 1
fi
