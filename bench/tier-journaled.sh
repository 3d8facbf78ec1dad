#!/usr/bin/env bash
# tier-journaled.sh -- group d) (the tiered pool against ext4 on the disk) with
# both columns on an ext4 made with mkfs.ext4's defaults, journal included.
#
# The machine's own ext4 may be set up unlike most: on the VM this bench was
# written on, / has no journal, so an fsync there is one write and one cache
# flush. This script makes a sparse image file on the disk (in DIR, default
# /var/tmp), formats it with plain `mkfs.ext4`, attaches it to a loop device
# with direct I/O (so the image's blocks are not cached twice) and mounts it;
# ext4-disk then works there and the tiered pool caches a directory of it.
# Everything is removed on exit, also when the bench fails or is interrupted.
# Needs root. Every argument goes to ferrite-bench.
#
#   sudo bench/tier-journaled.sh --runs 3 --json tier-journaled.json
#
# Environment: FERRITE_BENCH (the binary), TIER_IMAGE_DIR (DIR), TIER_IMAGE_SIZE
# (default 8G: the largest data set with room to spare).
set -u

here=$(cd "$(dirname "$0")" && pwd)
say() { echo "tier-journaled: $*" >&2; }

bin=${FERRITE_BENCH:-$here/../build/bench/ferrite-bench}
[ -x "$bin" ] || { say "no ferrite-bench at $bin (build first, or set FERRITE_BENCH)"; exit 2; }
[ "$(id -u)" -eq 0 ] || { say "needs root (mkfs, losetup, mount)"; exit 2; }

dir=${TIER_IMAGE_DIR:-/var/tmp}
image=$dir/ferrite-tier-journaled.$$.img
mnt=$(mktemp -d /tmp/ferrite-tier-journaled.XXXXXX)
loop=""
cleanup() {
	mountpoint -q "$mnt" && umount "$mnt"
	[ -n "$loop" ] && losetup -d "$loop"
	rm -f "$image"
	rmdir "$mnt" 2>/dev/null
}
trap cleanup EXIT
trap 'exit 130' INT TERM

truncate -s "${TIER_IMAGE_SIZE:-8G}" "$image" || exit 2
mkfs.ext4 -q -F "$image" || { say "mkfs.ext4 failed"; exit 2; }
loop=$(losetup --direct-io=on -f --show "$image") || { say "losetup failed"; exit 2; }
mount "$loop" "$mnt" || { say "mount failed"; exit 2; }
say "ext4 with its journal on $loop (image $image on $(df --output=source "$dir" | tail -1))"
"$bin" --only tier --disk-dir "$mnt" "$@"
