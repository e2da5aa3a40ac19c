#!/usr/bin/env bash
# Show that the fault-injection checkers can fail: build lockd with the
# test-only `fault-early-expiry` feature (leases end after a quarter of
# their time), run the nemesis workload against it, and expect violations.
# Exit 0 when the checkers catch the broken build, 1 when they do not.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -p lockd --bin lockd --features fault-early-expiry
mkdir -p target/broken
cp target/release/lockd target/broken/lockd
cargo build --release -p lockd --bins            # put the normal binary back
cargo build --release -p lock-tests --bin nemesis
if LOCKD_BIN=target/broken/lockd target/release/nemesis --seconds "${SECONDS_TO_RUN:-20}" --nodes 3 --clients 6 --keys 2 --no-faults; then
    echo "broken-variant: the checkers did NOT catch leases ending early" >&2
    exit 1
fi
echo "broken-variant: the checkers caught the broken build (violations above)"
