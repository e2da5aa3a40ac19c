#!/usr/bin/env bash
# The project's test command (the README's; .ci/run runs exactly this):
# the format and lint gates, then every test.
#
# Lints: clippy runs as the workspace's compiler during the release build
# (RUSTC_WORKSPACE_WRAPPER), so the lint pass costs no second build of the
# dependency tree; `-D warnings` makes any warning fail the run.
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
cargo clippy --workspace --all-targets --exclude etcd-bench -- -D warnings
cargo test --release
