#!/usr/bin/env bash
# Build the lockd image from binaries already built on this host:
#
#   deploy/docker/build-image.sh [--tag TAG] [--bin-dir DIR]
#
# TAG defaults to lockd:local, DIR to target/release (run
# `cargo build --release -p lockd -p lockctl` first). The build context is
# target/docker-context, laid out by deploy/docker/rootfs.sh; no image is
# pulled (both stages are FROM scratch).
set -euo pipefail
cd "$(dirname "$0")/../.."

die() { echo "build-image.sh: $*" >&2; exit 1; }

tag=lockd:local
bin_dir=target/release
while [ $# -gt 0 ]; do
    case "$1" in
        --tag) [ $# -ge 2 ] || die "--tag needs a value"; tag=$2; shift 2 ;;
        --bin-dir) [ $# -ge 2 ] || die "--bin-dir needs a value"; bin_dir=$2; shift 2 ;;
        -h|--help) sed -n '2,9p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) die "unknown argument $1 (try --help)" ;;
    esac
done
command -v docker >/dev/null || die "docker not found"

ctx=target/docker-context
deploy/docker/rootfs.sh "$bin_dir" "$ctx"
# The CLI's BuildKit front end needs the buildx plugin; the classic builder
# does all this Dockerfile needs and is there without it.
if ! docker buildx version >/dev/null 2>&1; then
    export DOCKER_BUILDKIT=0
fi
docker build -q -f deploy/docker/Dockerfile -t "$tag" "$ctx" >/dev/null
size=$(docker image inspect -f '{{.Size}}' "$tag")
echo "build-image.sh: built $tag ($((size / 1024 / 1024)) MiB)"
