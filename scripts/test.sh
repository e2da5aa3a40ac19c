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

# The steps after the Rust tests need a venv, Python packages and Chromium:
# fetched during the build, at the lowest CPU and I/O priority, so that
# they wait on the network while the build has the cores (docs/testing.md,
# "CI time"). A failure here is not fatal: each step installs what it
# still lacks and says why it cannot.
# They are waited for before any test runs, so no test shares the machine
# with them.
mkdir -p target
low=(nice -n 19)
command -v ionice >/dev/null 2>&1 && low+=(ionice -c 3)
"${low[@]}" scripts/install-test-deps.sh > target/install-test-deps.log 2>&1 &
installs=$!

lint_gate() {
    RUSTC_WORKSPACE_WRAPPER="$(rustup which clippy-driver)" \
    CLIPPY_ARGS="-D__CLIPPY_HACKERY__warnings__CLIPPY_HACKERY__" \
        "$@"
}

# One build of every test target and of the binaries the tests start, in
# the `ci` profile (Cargo.toml: the node and every dependency optimised,
# the rest of the workspace not; 29 % less build than `--release` for
# the same test times, docs/testing.md "CI time").
lint_gate cargo test --profile ci --no-run

if ! wait "$installs"; then
    echo "the background installs failed (target/install-test-deps.log); the steps retry them:" >&2
    tail -5 target/install-test-deps.log >&2
fi

# Four test threads on any machine: the process tests mostly wait on
# real clusters (about 1.3 cores at four threads), and those that
# measure a time window take the machine alone (tests/src/turns.rs).
# Nothing else runs beside them: a CPU-bound suite even at idle priority
# slowed them by half here (docs/testing.md, "CI time").
RUST_TEST_THREADS=${RUST_TEST_THREADS:-4} lint_gate cargo test --profile ci

# The node the steps below start: the one the tests above ran.
target_dir=${CARGO_TARGET_DIR:-target}
case $target_dir in
    /*) export LOCKD_BIN=$target_dir/ci/lockd ;;
    *) export LOCKD_BIN=$PWD/$target_dir/ci/lockd ;;
esac

# Beyond Rust, against the binaries the build above made:
# the Python client against real 3-node clusters, and the offline checks of
# deploy/ (Kubernetes schemas, compose flags, dashboard metric names).
scripts/test-python.sh
# The Go client against real 3-node clusters of the same binary.
scripts/test-go.sh
scripts/test-deploy.sh
# The web console in a real headless browser (Debian's chromium, installed
# by the script when missing).
scripts/test-console.sh
