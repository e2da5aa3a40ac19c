#!/usr/bin/env bash
# The project's test command (the README's; .ci/run runs exactly this):
# the format gate, then every test, built with the lint gate on.
#
# Lints: clippy runs as the compiler of the workspace's own crates during
# the release build the tests need (RUSTC_WORKSPACE_WRAPPER=clippy-driver;
# dependencies are compiled by plain rustc, as always), so the lint pass
# costs no second, check-only build of the dependency tree. CLIPPY_ARGS
# makes every warning, rustc's or clippy's, an error. It lints what `cargo
# test` builds: every library, binary and test target of the default
# members (the etcd benchmark, which needs protoc, is not one).
set -euo pipefail
cd "$(dirname "$0")/.."

# rustfmt and clippy ship with rustup's default profile; add them when a
# minimal toolchain lacks them.
for component in rustfmt clippy; do
    if ! rustup component list --installed 2>/dev/null | grep -q "^$component"; then
        rustup component add "$component"
    fi
done

cargo fmt --all --check

RUSTC_WORKSPACE_WRAPPER="$(rustup which clippy-driver)" \
CLIPPY_ARGS="-D__CLIPPY_HACKERY__warnings__CLIPPY_HACKERY__" \
    cargo test --release

# Beyond Rust, against the binaries the build above left in target/release:
# the Python client against real 3-node clusters, and the offline checks of
# deploy/ (Kubernetes schemas, compose flags, dashboard metric names).
scripts/test-python.sh
scripts/test-deploy.sh
# The web console in a real headless browser (Debian's chromium, installed
# by the script when missing).
scripts/test-console.sh
