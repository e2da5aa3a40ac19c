#!/usr/bin/env bash
# Lay out what the lockd image runs, for the Dockerfile's first stage:
#
#   deploy/docker/rootfs.sh BIN_DIR OUT_DIR
#
# OUT_DIR/rootfs/  usr/local/bin/lockd and lockctl (from BIN_DIR), every
#                  shared library `ldd` lists for them at the path it lists
#                  (libc, libm, libgcc_s, the loader under /lib64), and
#                  etc/passwd, group, nsswitch.conf (user lockd, uid 10001)
# OUT_DIR/data/    an empty directory: the image's /data, owned by 10001
#
# OUT_DIR is replaced. Runs on the build host (deploy/docker/build-image.sh)
# or inside a build stage that has ldd (see the Dockerfile).
set -euo pipefail

die() { echo "rootfs.sh: $*" >&2; exit 1; }

[ $# -eq 2 ] || die "usage: deploy/docker/rootfs.sh BIN_DIR OUT_DIR"
command -v ldd >/dev/null || die "ldd not found (Debian: apt-get install libc-bin)"
bin_dir=$(cd "$1" 2>/dev/null && pwd) || die "$1: no such directory"
out=$2
here=$(cd "$(dirname "$0")" && pwd)

for b in lockd lockctl; do
    [ -x "$bin_dir/$b" ] || die "$bin_dir/$b: missing or not executable (cargo build --release -p lockd -p lockctl)"
done

rm -rf "$out"
mkdir -p "$out/rootfs/usr/local/bin" "$out/rootfs/etc" "$out/data"
for b in lockd lockctl; do
    cp "$bin_dir/$b" "$out/rootfs/usr/local/bin/$b"
done
cp "$here/etc/passwd" "$here/etc/group" "$here/etc/nsswitch.conf" "$out/rootfs/etc/"

# The libraries each binary loads, at the paths the loader finds them.
libs=()
for b in lockd lockctl; do
    listing=$(ldd "$bin_dir/$b" 2>&1) || {
        # A static binary (e.g. a musl build) needs nothing else.
        case "$listing" in
            *"not a dynamic executable"*|*"statically linked"*) continue ;;
            *) die "ldd $bin_dir/$b failed: $listing" ;;
        esac
    }
    if grep -q "not found" <<<"$listing"; then
        die "$b needs a library this host does not have: $(grep 'not found' <<<"$listing")"
    fi
    while read -r path; do
        libs+=("$path")
    done < <(awk '
        $2 == "=>" && $3 ~ /^\// { print $3; next }   # libc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x…)
        $1 ~ /^\// { print $1 }                        # /lib64/ld-linux-x86-64.so.2 (0x…)
    ' <<<"$listing")
done

mapfile -t libs < <(printf '%s\n' "${libs[@]}" | sed '/^$/d' | sort -u)
for lib in "${libs[@]}"; do
    mkdir -p "$out/rootfs$(dirname "$lib")"
    cp -L "$lib" "$out/rootfs$lib"    # the file itself, not the symlink
done

echo "rootfs.sh: $out/rootfs: lockd, lockctl and ${#libs[@]} libraries: ${libs[*]}"
