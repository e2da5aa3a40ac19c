#!/usr/bin/env bash
# The Go client's tests (clients/go/): `go vet`, then `go test` against
# real 3-node lockd clusters of LOCKD_BIN (default target/release/lockd).
# Debian's Go is installed when missing (standard library only: no module
# proxy is needed). A cluster test that skips fails this script: a skip
# here would mean the clusters never ran.
set -euo pipefail
cd "$(dirname "$0")/.."

. scripts/lib/installs.sh
go_deps

LOCKD_BIN=${LOCKD_BIN:-$PWD/target/release/lockd}
if [ ! -x "$LOCKD_BIN" ]; then
    echo "$LOCKD_BIN is missing: build it (cargo build --release) or set LOCKD_BIN" >&2
    exit 1
fi
export LOCKD_BIN

cd clients/go
# Go's caches under target/ (a fresh machine has no home to spare them).
export GOCACHE=${GOCACHE:-$PWD/../../target/go-cache} GOTOOLCHAIN=local
unformatted=$(gofmt -l .)
if [ -n "$unformatted" ]; then
    echo "gofmt would change: $unformatted" >&2
    exit 1
fi
go vet ./...
out=$(mktemp)
trap 'rm -f "$out"' EXIT
if ! go test -count=1 -race -v ./... "$@" > "$out" 2>&1; then
    cat "$out"
    exit 1
fi
grep -E '^(ok|---|PASS|FAIL)' "$out" | grep -v -- '--- PASS' || true
if grep -q -- '--- SKIP' "$out"; then
    grep -- '--- SKIP' -A2 "$out" >&2
    echo "a Go test skipped: the cluster tests did not run" >&2
    exit 1
fi
