#!/bin/bash
# full_mmap_test.sh -- stores through a shared mapping into holes of a full
# pool (full_mmap_test.c), through the FUSE mount in sync and strict mode and
# through the preload shim: the failure is seen (msync, or mmap itself), the
# page cache never shows bytes the pool does not hold, the stores are kept
# once space is back, and fsck is clean afterwards. "slow" is the sync mount
# with the daemon's forgets and releases held back (FERRITE_TEST_SLOW_FREES_MS):
# the store after the unlink must wait for the space the forget gives back,
# not fail with ENOSPC, and statfs right after an rm counts that space as free
# (src/fuse/fuse_frees.c).
# Usage: full_mmap_test.sh FERRITE FULL_MMAP_TEST
set -u
FERRITE=$1
TEST=$2
tmp=$(mktemp -d /dev/shm/ferrite-full-mmap.XXXXXX)
pool=$tmp/pool
mnt=$tmp/mnt
fail=0

cleanup() {
	if grep -q " $mnt " /proc/self/mountinfo 2>/dev/null; then
		"$FERRITE" umount -l "$mnt" >/dev/null 2>&1 || umount -l "$mnt" 2>/dev/null
	fi
	rm -rf "$tmp"
}
trap cleanup EXIT
bad() {
	echo "FAIL: $*"
	fail=1
}
fresh() { "$FERRITE" mkfs --force --size 32M "$pool" >/dev/null 2>&1 || bad "mkfs"; }
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}log_path=$tmp/sanitizer"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:+$UBSAN_OPTIONS:}log_path=$tmp/sanitizer"
mkdir "$mnt"

if [ -e /dev/fuse ] && command -v fusermount3 >/dev/null; then
	for mode in sync strict slow; do
		echo "== FUSE mount, mode=$mode"
		fresh
		slow_ms=0
		[ $mode = slow ] && slow_ms=200
		FERRITE_TEST_SLOW_FREES_MS=$slow_ms "$FERRITE" mount -o mode=${mode/slow/sync} \
			"$pool" "$mnt" || bad "mount ($mode)"
		"$TEST" "$mnt" || bad "through the mount ($mode)"
		if [ $mode = slow ]; then
			# statfs right after rm counts the space the forget gives back
			rm -f "$mnt"/fill-* "$mnt"/holes
			before=$(stat -f -c '%a*%S' "$mnt")
			head -c 8M /dev/zero >"$mnt/eight" || bad "write 8 MiB"
			rm "$mnt/eight"
			after=$(stat -f -c '%a*%S' "$mnt")
			echo "free before the 8 MiB file: $((before)) bytes; right after its rm: $((after))"
			[ $((after)) -ge $((before)) ] || bad "statfs right after rm misses the space"
		fi
		"$FERRITE" umount "$mnt" || bad "umount ($mode)"
		"$FERRITE" fsck "$pool" >/dev/null 2>&1 || bad "fsck after the mount ($mode)"
	done
else
	echo "(no /dev/fuse or fusermount3: the mount is not tried)"
fi

echo "== preload shim"
fresh
"$FERRITE" run --pool "$pool" -- "$TEST" /pm || bad "through the shim"
"$FERRITE" fsck "$pool" >/dev/null 2>&1 || bad "fsck after the shim"

if ls "$tmp"/sanitizer* >/dev/null 2>&1; then
	cat "$tmp"/sanitizer*
	bad "sanitizer reports"
fi
exit $fail
