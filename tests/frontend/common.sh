# common.sh -- sourced by the front ends' test scripts: a scratch directory
# in /dev/shm, removed at exit with any mount left on $mnt detached first,
# and bad() to record a failure. Uses $FERRITE; sets tmp, mnt and fail.
fail=0
bad() {
	echo "FAIL: $*"
	fail=1
}

scratch_cleanup() {
	if grep -q " $mnt " /proc/self/mountinfo 2>/dev/null; then
		"$FERRITE" umount -l "$mnt" >/dev/null 2>&1 || umount -l "$mnt" 2>/dev/null
	fi
	rm -rf "$tmp"
}

# scratch_setup NAME: $tmp (searchable by every user) and an empty $mnt in it.
scratch_setup() {
	tmp=$(mktemp -d "/dev/shm/ferrite-$1.XXXXXX")
	mnt=$tmp/mnt
	chmod 755 "$tmp"
	mkdir "$mnt"
	trap scratch_cleanup EXIT
}
