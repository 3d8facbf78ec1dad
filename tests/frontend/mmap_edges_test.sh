#!/bin/bash
# mmap_edges_test.sh FERRITE MMAP_EDGES_TEST
# The same mapped-file program (mmap_edges_test.c) in a tmpfs directory,
# which proves its expectations, then in a pool through `ferrite run` (a pm
# and a tiered pool) and through `ferrite mount` (skipped without /dev/fuse
# or root); fsck clean after each.
set -u
FERRITE=$1 prog=$2
ferrite=$FERRITE
# shellcheck source=common.sh
. "$(dirname "$0")/common.sh"
scratch_setup edges
mkdir "$tmp/tmpfs" "$tmp/backing"
"$prog" "$tmp/tmpfs" || bad "on tmpfs: the expectations are wrong"
for kind in pm tier; do
	pool=$tmp/$kind.pool
	tier=()
	[ $kind = tier ] && tier=(--tier "$tmp/backing")
	"$ferrite" mkfs --size 64M "${tier[@]}" "$pool" >/dev/null 2>&1 || bad "mkfs $kind"
	"$ferrite" run --pool "$pool" -- "$prog" /pm || bad "through the shim ($kind pool)"
	"$ferrite" fsck "$pool" >/dev/null 2>&1 || bad "fsck after the shim ($kind pool)"
done
if [ "$(id -u)" = 0 ] && [ -e /dev/fuse ] && command -v fusermount3 >/dev/null; then
	"$ferrite" mount "$tmp/pm.pool" "$mnt" || bad "mount"
	"$prog" "$mnt" || bad "through the mount"
	"$ferrite" umount "$mnt" || bad "umount"
	"$ferrite" fsck "$tmp/pm.pool" >/dev/null 2>&1 || bad "fsck after the mount"
else
	echo "(no FUSE here: the mount's run is skipped)"
fi
exit $fail
