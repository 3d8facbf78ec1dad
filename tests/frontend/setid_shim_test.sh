#!/bin/bash
# setid_shim_test.sh FERRITE [tier]
# Set-id bits through the preload shim, as an unprivileged program sees them:
# a write, truncate or fallocate by a user who is not root drops set-user-id,
# and set-group-id where the group may execute or the writer is not of the
# file's group (the engines do it, so the shim needs nothing of its own; the
# C API and the mount have their own cases: api.posix_semantics `setid`,
# frontend.fuse). Root prepares the file and reads the mode back; uid/gid
# 65534 writes. Each step is one process: `ferrite run` gives the pool to one
# process (a later issue shares it). With `tier` the pool caches a backing
# directory, whose file's mode the tier engine changes as the writer (the
# writer may not chmod another's file: the bits drop nonetheless, as in the
# kernel). Needs root for setpriv (77 = skipped).
set -u
ferrite=$1 kind=${2:-pm}
[ "$(id -u)" = 0 ] || { echo "SKIP: needs root to run as another user"; exit 77; }
command -v setpriv >/dev/null || { echo "SKIP: no setpriv"; exit 77; }
pool=$(mktemp /dev/shm/ferrite-test-XXXXXX.pool)
backing=$(mktemp -d /tmp/ferrite-setid-XXXXXX)
# `ferrite run` leaves the pool's coordination file in /dev/shm for the next
# process (docs/contracts.md); the pool goes, and so does it
share_of() {
	# shellcheck disable=SC2046 # device and inode, two words
	printf '/dev/shm/ferrite-%x-%x-' $(stat -c '%d %i' "$1")
}
trap 'rm -f "$(share_of "$pool")"*.share; rm -rf "$pool" "$backing"' EXIT
tier=()
[ "$kind" = tier ] && tier=(--tier "$backing")
"$ferrite" mkfs --force --size 64M "${tier[@]}" "$pool" >/dev/null 2>&1 || {
	echo "mkfs failed"
	exit 1
}
as_root() { "$ferrite" run --pool "$pool" -- "$@"; }
as_user() {
	chown 65534:65534 "$pool" "$backing"
	setpriv --reuid=65534 --regid=65534 --clear-groups "$ferrite" run --pool "$pool" -- "$@"
	local rc=$?
	chown 0:0 "$pool" "$backing"
	return $rc
}
as_root cp /etc/hostname /pm/f || { echo "cannot create /pm/f"; exit 1; }
fail=0
# check OWNER MODE-BEFORE MODE-AFTER USER|ROOT COMMAND...
check() {
	local owner=$1 before=$2 want=$3 who=$4
	shift 4
	as_root chown "$owner" /pm/f && as_root chmod "$before" /pm/f || { fail=1; return; }
	if [ "$who" = USER ]; then as_user "$@"; else as_root "$@"; fi || {
		echo "FAIL: $who $*: exit $?"
		fail=1
		return
	}
	local got
	got=$(as_root stat -c %a /pm/f)
	if [ "$got" = "$want" ]; then
		echo "ok: $owner $before, $who $1 -> $got"
	else
		echo "FAIL: $owner $before, $who $*: mode $got, want $want"
		fail=1
	fi
}
for how in "dd if=/dev/zero of=/pm/f bs=1 count=1 seek=3 conv=notrunc status=none" \
	"truncate -s 2 /pm/f" "fallocate -l 8192 /pm/f"; do
	# shellcheck disable=SC2086 # each command's words
	{
		check 0:0 6777 777 USER $how         # group may execute: both go
		check 0:0 6767 767 USER $how         # the writer is not of group 0
		check 0:65534 6767 2767 USER $how    # its group, no execute: set-group-id stays
		check 65534:65534 4755 755 USER $how # the owner writing is unprivileged too
		check 0:0 6777 6777 ROOT $how        # root: the bits stay
	}
done
as_root chown 0:0 /pm/f
"$ferrite" fsck "$pool" >/dev/null 2>&1 || { echo "fsck found problems"; fail=1; }
exit $fail
