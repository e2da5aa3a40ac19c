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
# the rest of the workspace not; half the build of `--release` for the
# same test times, docs/testing.md "CI time"). The build's messages name
# the test executables it made.
target_dir=${CARGO_TARGET_DIR:-target}
lint_gate cargo test --profile ci --no-run --message-format=json-render-diagnostics \
    > "$target_dir/ci-build.json"
mapfile -t suites < <(python3 scripts/lib/test_suites.py "$PWD" < "$target_dir/ci-build.json")
if ! printf '%s\n' "${suites[@]}" | grep -q '^tests:cluster'; then
    echo "no test executables found in $target_dir/ci-build.json" >&2
    exit 1
fi

if ! wait "$installs"; then
    echo "the background installs failed (target/install-test-deps.log); the steps retry them:" >&2
    tail -5 target/install-test-deps.log >&2
fi

# The process tests (tests/cluster: real clusters on the real clock) run
# in the foreground, on four threads on any machine: they mostly wait on
# real clusters (about 1.3 cores at four threads), and those that measure
# a time window take the test process alone (tests/src/turns.rs). Every
# other suite runs on simulated time or none (the simulation, the module
# tests, the unit tests, the doc tests) and goes meanwhile, one after the
# other, at idle CPU and I/O priority: it takes only the cycles and the
# disk time the clusters leave and never delays a node's timer.
idle=(nice -n 19)
if command -v chrt >/dev/null 2>&1; then idle=(chrt --idle 0); fi
if command -v ionice >/dev/null 2>&1; then idle+=(ionice -c 3); fi
failed=()
cpu_suites() {
    local name dir exe
    for suite in "${suites[@]}"; do
        IFS=$'\t' read -r name dir exe <<< "$suite"
        if [ "$name" = tests:cluster ]; then continue; fi
        echo "== $name"
        (cd "$dir" && "${idle[@]}" "$exe") || echo "FAILED: $name"
    done
    echo "== doc tests"
    lint_gate "${idle[@]}" cargo test --profile ci --doc || echo "FAILED: doc tests"
}
cpu_suites > "$target_dir/cpu-suites.log" 2>&1 &
cpu=$!
for suite in "${suites[@]}"; do
    IFS=$'\t' read -r name dir exe <<< "$suite"
    if [ "$name" != tests:cluster ]; then continue; fi
    echo "== $name"
    (cd "$dir" && RUST_TEST_THREADS=${RUST_TEST_THREADS:-4} "$exe") || failed+=("$name")
done
wait "$cpu"
cat "$target_dir/cpu-suites.log"
mapfile -t -O "${#failed[@]}" failed < <(sed -n 's/^FAILED: //p' "$target_dir/cpu-suites.log")
if [ "${#failed[@]}" -gt 0 ]; then
    echo "failed: ${failed[*]}" >&2
    exit 1
fi

# The node the steps below start: the one the tests above ran.
case $target_dir in
    /*) export LOCKD_BIN=$target_dir/ci/lockd ;;
    *) export LOCKD_BIN=$PWD/$target_dir/ci/lockd ;;
esac

# Beyond Rust, against the binaries the build above made:
# the Python client against real 3-node clusters, and the offline checks of
# deploy/ (Kubernetes schemas, compose flags, dashboard metric names).
scripts/test-python.sh
scripts/test-deploy.sh
# The web console in a real headless browser (Debian's chromium, installed
# by the script when missing).
scripts/test-console.sh
