#!/bin/bash
# fuse_test.sh -- `ferrite mount` end to end: system calls through the kernel
# (fuse_ops_test setup), unmount, clean fsck, remount with the same inode
# numbers and contents (verify); then kill -9 of the daemon during a write
# workload, `ferrite umount` of the dead mount, remount, clean fsck and every
# acknowledged write present; and the mount command's error messages.
# Usage: fuse_test.sh FERRITE FUSE_OPS_TEST
set -u
FERRITE=$1
OPS=$2
tmp=$(mktemp -d /dev/shm/ferrite-fuse-test.XXXXXX)
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

step() { echo "== $*"; }
bad() {
	echo "FAIL: $*"
	fail=1
}
need() { "$@" || bad "$*"; }

if [ ! -e /dev/fuse ] || ! command -v fusermount3 >/dev/null; then
	echo "SKIP: no /dev/fuse or fusermount3"
	exit 77
fi

chmod 755 "$tmp" # the unprivileged checks must reach the mount point
mkdir "$mnt"
# In a sanitizer build the daemon's stderr is /dev/null once it runs in the
# background: send every report to files, which fail the test.
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}log_path=$tmp/sanitizer"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:+$UBSAN_OPTIONS:}log_path=$tmp/sanitizer"
need "$FERRITE" mkfs --size 256M "$pool" >/dev/null

step "mount, operations through the kernel"
need "$FERRITE" mount "$pool" "$mnt"
grep -q " $mnt .* fuse.ferrite " /proc/self/mountinfo || bad "not in the mount table"
need "$OPS" setup "$mnt" "$tmp/state"
step "unmount, fsck, remount, verify"
need "$FERRITE" umount "$mnt"
grep -q " $mnt " /proc/self/mountinfo && bad "still mounted after umount"
need "$FERRITE" fsck "$pool" >/dev/null
need "$FERRITE" mount "$pool" "$mnt"
need "$OPS" verify "$mnt" "$tmp/state"
need "$FERRITE" umount "$mnt"
need "$FERRITE" fsck "$pool" >/dev/null

step "kill -9 during writes, umount the dead mount, remount"
need "$FERRITE" mount "$pool" "$mnt"
daemon=$(pgrep -f "ferrite mount $pool $mnt" | head -1)
"$OPS" ackwriter "$mnt" "$tmp/acklog" &
writer=$!
sleep 0.5
kill -9 "$daemon"
wait "$writer"
stat "$mnt" >/dev/null 2>&1 && bad "the mount should be dead"
need "$FERRITE" umount "$mnt"
need "$FERRITE" fsck "$pool" >/dev/null
need "$FERRITE" mount "$pool" "$mnt"
need "$OPS" ackcheck "$mnt" "$tmp/acklog"
need "$FERRITE" umount "$mnt"
need "$FERRITE" fsck "$pool" >/dev/null

step "a dead mount is detached by the next mount"
need "$FERRITE" mount "$pool" "$mnt"
kill -9 "$(pgrep -f "ferrite mount $pool $mnt" | head -1)"
sleep 0.2
out=$("$FERRITE" mount "$pool" "$mnt" 2>&1) || bad "mount over a dead mount: $out"
echo "$out" | grep -q "detached" || bad "no note about the dead mount: $out"
need test -f "$mnt/ack"
need "$FERRITE" umount "$mnt"

step "SIGTERM unmounts cleanly"
need "$FERRITE" mount "$pool" "$mnt"
kill -TERM "$(pgrep -f "ferrite mount $pool $mnt" | head -1)"
for _ in $(seq 100); do grep -q " $mnt " /proc/self/mountinfo || break; sleep 0.05; done
grep -q " $mnt " /proc/self/mountinfo && bad "SIGTERM did not unmount"
for _ in $(seq 100); do "$FERRITE" fsck "$pool" >/dev/null 2>&1 && break; sleep 0.05; done
need "$FERRITE" fsck "$pool" >/dev/null

step "error messages"
expect_err() { # pattern, command...
	local pat=$1
	shift
	local out
	if out=$("$@" 2>&1); then
		bad "$* should fail"
	elif ! echo "$out" | grep -q -- "$pat"; then
		bad "$*: expected '$pat' in: $out"
	fi
}
expect_err "no such pool" "$FERRITE" mount "$tmp/nopool" "$mnt"
expect_err "does not exist" "$FERRITE" mount "$pool" "$tmp/nodir"
touch "$tmp/file"
expect_err "not a directory" "$FERRITE" mount "$pool" "$tmp/file"
mkdir "$tmp/full" && touch "$tmp/full/x"
expect_err "not empty" "$FERRITE" mount "$pool" "$tmp/full"
need "$FERRITE" mount "$pool" "$mnt"
mkdir "$tmp/other"
expect_err "already mounted on" "$FERRITE" mount "$pool" "$tmp/other"
expect_err "already a mount point" "$FERRITE" mount "$pool" "$mnt"
need "$FERRITE" umount "$mnt"
expect_err "not mounted" "$FERRITE" umount "$mnt"
exec 9<"$pool"
flock -x 9
expect_err "in use by process" "$FERRITE" mount "$pool" "$mnt"
exec 9<&-
need "$FERRITE" mount -o nonempty "$pool" "$tmp/full"
need test -f "$tmp/full/ack"
need "$FERRITE" umount "$tmp/full"
need "$FERRITE" fsck "$pool" >/dev/null

for f in "$tmp"/sanitizer*; do
	[ -e "$f" ] || continue
	cat "$f"
	bad "sanitizer report $f"
done
if [ $fail = 0 ]; then echo "fuse_test: all passed"; fi
exit $fail
