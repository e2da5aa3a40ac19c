#!/usr/bin/env bash
# The 3-node compose cluster, end to end (deploy/README.md):
#
#   scripts/compose-demo.sh [--no-build]
#
# 1. builds lockd and lockctl (cargo build --release; --no-build uses the
#    binaries already in target/release) and the image (deploy/docker/build-image.sh)
# 2. makes a CA, node and client certificates and an auth file with a token,
#    in the image, as its user (so the containers can read the keys)
# 3. starts deploy/compose/compose.yaml and waits for GET /readyz on every node
# 4. a lock cycle with lockctl over TLS with the token: acquire, a second
#    acquire refused as held (exit 2), get, release
# 5. kills the leader's container (SIGKILL), waits for the other two to elect a
#    new leader, and takes and releases a lock again (a larger fencing token)
# 6. starts the killed node again and waits until it is ready (caught up)
# 7. tears everything down (also on failure), and exits non-zero on any failure
#
# Needs docker with docker-compose (or the compose plugin), curl and python3.
# Takes about a minute after the build; it is not part of .ci/run.
set -euo pipefail
cd "$(dirname "$0")/.."

build=1
case "${1:-}" in
    "") ;;
    --no-build) build=0 ;;
    -h|--help) sed -n '2,19p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "compose-demo: unknown argument $1 (try --help)" >&2; exit 2 ;;
esac

say() { printf '\n== %s\n' "$*"; }
die() { echo "compose-demo: FAILED: $*" >&2; exit 1; }

for tool in docker curl python3; do
    command -v "$tool" >/dev/null || die "$tool not found"
done
if docker compose version >/dev/null 2>&1; then
    compose_cmd=(docker compose)
elif command -v docker-compose >/dev/null; then
    compose_cmd=(docker-compose)
else
    die "neither 'docker compose' nor docker-compose found"
fi
docker info >/dev/null 2>&1 || die "the docker daemon does not answer (docker info)"

image=lockd:local
project="lockd-demo-$$"
work=$(mktemp -d target/compose-demo.XXXXXX 2>/dev/null) || { mkdir -p target; work=$(mktemp -d target/compose-demo.XXXXXX); }
secrets="$PWD/$work/secrets"
started=0

compose() {
    LOCKD_IMAGE=$image LOCKD_SECRETS=$secrets \
        "${compose_cmd[@]}" -p "$project" -f deploy/compose/compose.yaml "$@"
}

cleanup() {
    status=$?
    if [ "$started" = 1 ]; then
        if [ "$status" != 0 ]; then
            echo "--- last log lines of each node"
            compose logs --no-color --tail 30 node1 node2 node3 2>&1 || true
        fi
        say "tearing down"
        compose --profile tools down -v --remove-orphans >/dev/null 2>&1 \
            || compose down -v --remove-orphans >/dev/null 2>&1 || true
    fi
    rm -rf "$work"
    if [ "$status" = 0 ]; then echo "compose-demo: all steps passed"; fi
    exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# --- 1. binaries and image ---------------------------------------------------
if [ "$build" = 1 ]; then
    say "cargo build --release -p lockd -p lockctl"
    cargo build --release -p lockd -p lockctl
fi
target/release/lockd serve --help | grep -q -- --advertise-addr \
    || die "target/release/lockd has no --advertise-addr: rebuild it"
say "building the image $image"
deploy/docker/build-image.sh --tag "$image"

# --- 2. certificates and the auth file --------------------------------------
say "certificates and auth file in $work/secrets"
mkdir -p "$secrets/certs"
# Written by the image's user (uid 10001) into a directory this user owns:
# the containers can read the keys, and this script can delete them.
chmod 0777 "$secrets/certs"
docker run --rm --network none -v "$secrets/certs:/out" "$image" \
    certs init /out --node 1=node1 --node 2=node2 --node 3=node3 --client admin >/dev/null
chmod 0755 "$secrets/certs"
token=$(docker run --rm --network none "$image" auth token demo 2>"$work/token.txt")
hash=$(grep -o 'sha256:[0-9a-f]\{64\}' "$work/token.txt") || die "lockd auth token printed no hash"
cat >"$secrets/auth.toml" <<TOML
[roles.demo]
lock = ["demo/"]

[principals.demo]
roles = ["demo", "read"]
tokens = ["$hash"]

[principals.admin]
roles = ["admin"]
TOML
docker run --rm --network none -v "$secrets/auth.toml:/auth.toml:ro" "$image" auth check /auth.toml

# --- 3. the cluster ---------------------------------------------------------
# Free ports on the host's loopback for the nodes' published port.
read -r p1 p2 p3 < <(python3 -c '
import socket
ss = [socket.socket() for _ in range(3)]
for s in ss: s.bind(("127.0.0.1", 0))
print(*[s.getsockname()[1] for s in ss])')
declare -A port=([1]=$p1 [2]=$p2 [3]=$p3)
export LOCKD_PORT_1=$p1 LOCKD_PORT_2=$p2 LOCKD_PORT_3=$p3

say "starting node1..node3 (host ports $p1 $p2 $p3)"
started=1
compose up -d node1 node2 node3

# readyz N: prints "CODE BODY" of node N's GET /readyz ("000" when it does
# not answer). Checks the node's certificate against the CA.
readyz() {
    local n=$1 out
    out=$(curl -s -m 3 -o - -w ' %{http_code}' --cacert "$secrets/certs/ca.pem" \
        --resolve "node$n:${port[$n]}:127.0.0.1" "https://node$n:${port[$n]}/readyz" 2>/dev/null) || true
    echo "${out##* } ${out% *}"
}

# wait_ready TIMEOUT N...: until every node N answers 200; prints the leader
# they agree on.
wait_ready() {
    local timeout=$1; shift
    local deadline=$((SECONDS + timeout)) n r leader leaders
    while :; do
        leaders=()
        for n in "$@"; do
            r=$(readyz "$n")
            [ "${r%% *}" = 200 ] || break
            leader=$(grep -o '"leader":[0-9]*' <<<"$r" | cut -d: -f2)
            leaders+=("$leader")
        done
        if [ "${#leaders[@]}" = "$#" ] && [ "$(printf '%s\n' "${leaders[@]}" | sort -u | wc -l)" = 1 ]; then
            echo "${leaders[0]}"
            return 0
        fi
        if [ "$SECONDS" -ge "$deadline" ]; then
            for n in "$@"; do echo "node$n /readyz: $(readyz "$n")" >&2; done
            return 1
        fi
        sleep 0.5
    done
}

t0=$SECONDS
leader=$(wait_ready 120 1 2 3) || die "the nodes were not all ready within 120 s"
echo "all three nodes ready after $((SECONDS - t0)) s; leader node$leader"
for n in 1 2 3; do
    uid=$(docker top "$(compose ps -q "node$n")" -o pid,uid | awk 'NR > 1 { print $2 }' | sort -u)
    [ "$uid" = 10001 ] || die "node$n runs as uid $uid, not 10001"
done
echo "every node runs as uid 10001"

# --- 4. a lock cycle ----------------------------------------------------------
export LOCKD_TOKEN=$token
# lockctl in the client container (compose's "Creating …" lines dropped).
lockctl() { compose run --rm -T client "$@" 2> >(grep -v '^Creating .*_run' >&2); }

# cycle KEY: acquire, refused second acquire, get, release; prints the token.
cycle() {
    local key=$1 out tok rc
    out=$(lockctl acquire "$key" --lease 30s) || die "acquire $key failed: $out"
    echo "$out" >&2
    tok=$(grep -o 'token [0-9]*' <<<"$out" | head -n 1 | cut -d' ' -f2)
    [ -n "$tok" ] || die "no fencing token in: $out"
    rc=0
    out=$(lockctl acquire "$key" --lease 30s --wait 1s 2>&1) || rc=$?
    [ "$rc" = 2 ] || die "a second acquire of $key should be refused as held (exit 2), got exit $rc: $out"
    echo "second acquire refused as held (exit 2): $out" >&2
    out=$(lockctl get "$key") || die "get $key failed: $out"
    grep -q "token $tok" <<<"$out" || die "get $key does not show token $tok: $out"
    echo "$out" >&2
    out=$(lockctl release "$key" --token "$tok") || die "release $key failed: $out"
    echo "$out" >&2
    echo "$tok"
}

say "lock cycle over TLS with the token"
tok1=$(cycle demo/job)
rc=0
out=$(LOCKD_TOKEN= lockctl acquire demo/job --lease 5s 2>&1) || rc=$?
[ "$rc" = 4 ] || die "an acquire without credentials should be refused (exit 4), got exit $rc: $out"
echo "without a token: refused (exit 4): $out"

# --- 5. lose the leader -------------------------------------------------------
say "killing node$leader (the leader)"
rest=()
for n in 1 2 3; do [ "$n" = "$leader" ] || rest+=("$n"); done
t0=$SECONDS
compose kill "node$leader" >/dev/null
new=$(wait_ready 60 "${rest[@]}") || die "node${rest[0]} and node${rest[1]} did not elect a new leader within 60 s"
[ "$new" != "$leader" ] || die "the survivors still name node$leader as the leader"
echo "node$new leads after $((SECONDS - t0)) s"
tok2=$(cycle demo/job)
running=$(docker inspect -f '{{.State.Running}}' "$(compose ps -q "node$leader")")
[ "$running" = false ] || die "node$leader was restarted while it should be down"
[ "$tok2" -gt "$tok1" ] || die "the fencing token went from $tok1 to $tok2 across the failover"
echo "with node$leader down: served, fencing token $tok1 -> $tok2"

# --- 6. the killed node comes back ------------------------------------------
say "starting node$leader again"
t0=$SECONDS
compose start "node$leader" >/dev/null
wait_ready 120 1 2 3 >/dev/null || die "node$leader did not rejoin and catch up within 120 s"
echo "node$leader ready again after $((SECONDS - t0)) s"
lockctl status
