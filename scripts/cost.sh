#!/usr/bin/env bash
# Where an acquire's time goes, stage by stage, and what a lock cycle
# costs in CPU time and context switches, counted on the three processes
# (docs/performance.md, "Stages and cost"). Builds the release binaries
# and runs `stage-bench` against a fresh 3-node cluster; arguments go to
# it (`--seconds S`, `--clients 1|64`, `--python PYTHON` for rows from the
# Python client too).
#
#   scripts/cost.sh [--seconds 4] [--clients N]
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -p lockd -p lockctl -p lockd-bench --bins
target_dir=${CARGO_TARGET_DIR:-target}
case $target_dir in
    /*) ;;
    *) target_dir=$PWD/$target_dir ;;
esac
LOCKD_BIN=$target_dir/release/lockd exec "$target_dir/release/stage-bench" "$@"
