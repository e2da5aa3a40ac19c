#!/usr/bin/env bash
# lockd against etcd and ZooKeeper, side by side in one run (the name is
# from when it compared two).
#
#   scripts/bench-vs-etcd.sh [--seconds 5] [--rounds 2] [--out docs]
#                            [--systems lockd,etcd,zookeeper] [--warmup 5]
#
# Installs what it needs from Debian when missing (etcd-server; zookeeper
# and a Java runtime for it; protoc for etcd's gRPC client; a font for the
# chart), builds lockd, the lockd benchmarks and the comparison, and writes
# docs/benchmarks.md, docs/benchmarks.png and docs/benchmarks.json. See
# bench/rivals/src/main.rs.
set -euo pipefail
cd "$(dirname "$0")/.."

need=()
command -v etcd >/dev/null || need+=(etcd-server)
# Debian's zookeeper: the server's jars (/usr/share/java/zookeeper.jar and
# what its manifest names); it depends on default-jre, which brings `java`.
[ -f /usr/share/java/zookeeper.jar ] || need+=(zookeeper)
command -v java >/dev/null || need+=(default-jre-headless)
command -v protoc >/dev/null || need+=(protobuf-compiler)
[ -f /usr/share/fonts/truetype/dejavu/DejaVuSans.ttf ] || need+=(fonts-dejavu-core)
if [ ${#need[@]} -gt 0 ]; then
    sudo=""
    [ "$(id -u)" -ne 0 ] && sudo=sudo
    echo "installing ${need[*]}" >&2
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${need[@]}" >&2
fi

cargo build --release -p lockd -p lockd-bench -p lockd-bench-rivals --bins
exec "${CARGO_TARGET_DIR:-target}/release/vs-etcd" "$@"
