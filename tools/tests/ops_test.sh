#!/usr/bin/env bash
# ops_test.sh -- end-to-end test of the operator commands of `ferrite` on real
# pools in /dev/shm: tune (label, mode, re-pointing a tiered pool whose
# backing directory moved) and its crash-safe superblock copies, mkfs
# --label, the debugfs-like stat/inode, rm/mkdir/mv, fsck -p/-a/-f/-C/-V and
# the fsck.ferrite helper of fsck(8), info on a pool another process holds,
# and the holder named in the busy errors of every command.
# Usage: ops_test.sh PATH/TO/ferrite      (CTest passes the built binary)
set -u

FERRITE=${1:?usage: ops_test.sh PATH/TO/ferrite}
[ -x "$FERRITE" ] || { echo "ops_test.sh: $FERRITE is not executable" >&2; exit 2; }
FERRITE=$(cd "$(dirname "$FERRITE")" && pwd)/$(basename "$FERRITE")
BINDIR=$(dirname "$FERRITE")
ulimit -c 0 # a crash must show as an exit status >= 128, not leave a core file
unset FERRITE_POOL

TAG="ferrite-ops-test-$$-$RANDOM"
SHM=/dev/shm/$TAG # every pool and directory of this run starts with this prefix
POOL=$SHM.pool
WORK=$(mktemp -d "${TMPDIR:-/tmp}/$TAG.XXXXXX")
HOLDER=
MNT=
cleanup() {
	[ -n "$HOLDER" ] && kill "$HOLDER" 2>/dev/null && wait "$HOLDER" 2>/dev/null
	[ -n "$MNT" ] && "$FERRITE" umount "$MNT" >/dev/null 2>&1
	rm -rf "$WORK"
	rm -rf "$SHM"*
}
trap cleanup EXIT
trap 'exit 130' INT TERM

passed=0
failed=0
skipped=0

# ---- helpers (cli_lib.sh, and this test's own) ---------------------------------

. "$(dirname "${BASH_SOURCE[0]}")/cli_lib.sh"

# run_prog PROG ARGS...: the same for another program.
run_prog() {
	"$@" >"$WORK/out" 2>"$WORK/err"
	RC=$?
}

out_lacks() { ! grep -qE -- "$1" "$WORK/out"; }

# poke FILE OFFSET HEXBYTES: overwrites bytes of a pool file in place.
poke() {
	printf "$(echo "$3" | sed 's/../\\x&/g')" |
		dd of="$1" bs=1 seek="$(($2))" conv=notrunc status=none
}

# The pool offset of a path's inode, from `ferrite stat`.
inode_off() {
	"$FERRITE" stat --pool "$1" "$2" | sed -n 's/.*at pool offset \(0x[0-9a-f]*\)).*/\1/p'
}
inode_no() {
	"$FERRITE" stat --pool "$1" "$2" | sed -n 's/^inode: *\([0-9]*\) .*/\1/p'
}

# hold POOL: a process (python3) that holds the pool's lock as a mount does.
hold() {
	python3 -c '
import fcntl, os, sys, time
fd = os.open(sys.argv[1], os.O_RDWR)
fcntl.flock(fd, fcntl.LOCK_EX)
print("locked", flush=True)
time.sleep(120)
' "$1" >"$WORK/holder" &
	HOLDER=$!
	for _ in $(seq 100); do
		grep -q locked "$WORK/holder" 2>/dev/null && return 0
		sleep 0.05
	done
	return 1
}
release() {
	kill "$HOLDER" 2>/dev/null
	wait "$HOLDER" 2>/dev/null
	HOLDER=
}

# ---- cases ------------------------------------------------------------------------

test_help() {
	local cmd
	run --help
	for cmd in tune stat inode rm mkdir mv; do
		check "ferrite --help lists $cmd" out_has "^  $cmd "
		run "$cmd" --help
		check "$cmd --help" all rc_is 0 -- out_has "^Usage: ferrite $cmd"
		run help "$cmd"
		check "help $cmd" all rc_is 0 -- out_has "^Usage: ferrite $cmd"
		run --help
	done
	run fsck --help
	check "fsck --help names -p, -f and fsck.ferrite" \
		all out_has "^  -p, -a" -- out_has "^  -f " -- out_has "fsck.ferrite"
}

test_mkfs_label() {
	run mkfs --size 64M --label "data pool" "$POOL"
	check "mkfs --label: formatted, summary shows the label" \
		all rc_is 0 -- out_has "^  label: +data pool$"
	run info "$POOL"
	check "info: shows the label" out_has "^label: +data pool$"
	run info --json "$POOL"
	check "info --json: the label" out_has '"label": "data pool"'
	run mkfs --size 64M --force --label "$(printf 'a\tb')" "$SHM-x.pool"
	check "mkfs --label with a control character: usage error, no pool" \
		all rc_is 2 -- test ! -e "$SHM-x.pool"
	run mkfs --size 64M --label "$(printf '%064d' 0)" "$SHM-x.pool"
	check "mkfs --label of 64 bytes: usage error" all rc_is 2 -- test ! -e "$SHM-x.pool"
}

test_tune_pm() {
	run tune --label "$(printf '%063d' 7)" "$POOL"
	check "tune --label: 63 bytes taken" all rc_is 0 -- out_has "^  label: +0{62}7$"
	run tune --label renamed --mode strict "$POOL"
	check "tune --label --mode: exit 0" rc_is 0
	run info "$POOL"
	check "info: new label and mode" all out_has "^label: +renamed$" -- out_has "^mode: +strict"
	run fsck "$POOL"
	check "fsck after tune: clean (primary and backup agree)" rc_is 0
	run tune -L "" --mode sync "$POOL"
	run info "$POOL"
	check "tune -L '': label removed, mode back to sync" \
		all out_lacks "^label:" -- out_has "^mode: +sync"
	run tune "$POOL"
	check "tune with nothing to change: usage error" rc_is 2
	run tune --mode fast "$POOL"
	check "tune --mode fast: usage error" rc_is 2
	run tune --force -L x "$POOL"
	check "tune --force without --backing: usage error" rc_is 2
	run tune --backing "$WORK" "$POOL"
	check "tune --backing on a pm pool: refused in one line" \
		all rc_is 1 -- err_one_line "ferrite tune: $POOL: .*not a tiered pool"
	run tune -L "$(printf '%064d' 0)" "$POOL"
	check "tune --label too long: refused" all rc_failed_cleanly -- err_has "at most 63"
	run tune -L x "$SHM-missing.pool"
	check "tune on a missing pool: one line" \
		all rc_is 1 -- err_one_line "ferrite tune: $SHM-missing.pool: "
	run tune -L keep "$POOL"
}

# The crash windows of tune: the backup is written and fenced first, then
# the primary (the commit point). Both states are made by copying pages.
test_tune_crash_pm() {
	local p=$SHM-crash.pool old=$SHM-old.pool sb=0 bk=$((2 * 1024 * 1024 - 4096))
	run mkfs --size 32M --label before "$p"
	cp "$p" "$old"
	run tune --label after "$p"
	# 1. interrupted after the backup: primary old, backup new
	dd if="$p" of="$old" bs=4096 skip=$((bk / 4096)) seek=$((bk / 4096)) count=1 \
		conv=notrunc status=none
	run info "$old"
	check "tune cut after the backup: the pool mounts with the old label" \
		all rc_is 0 -- out_has "^label: +before$"
	run fsck -n "$old"
	check "... fsck -n: the backup differs (exit 4)" \
		all rc_is 4 -- out_has "backup superblock differs"
	run fsck -p "$old"
	check "... fsck -p: fixed (exit 1), lines prefixed with the pool" \
		all rc_is 1 -- out_has "^$old: backup superblock differs"
	run fsck "$old"
	check "... then clean" rc_is 0
	# 2. interrupted inside the primary: primary torn, backup new
	poke "$p" $((sb + 130)) ffffffff
	run info "$p"
	check "primary torn: refused in one line pointing at fsck --repair" \
		all rc_is 1 -- err_one_line "ferrite info: $p: .*backup superblock is intact"
	run fsck -a "$p"
	check "... fsck -a: restored from the backup (exit 1)" rc_is 1
	run info "$p"
	check "... the new label is there" all rc_is 0 -- out_has "^label: +after$"
}

# Does the file system under /dev/shm keep user.* attributes (tmpfs: Linux 6.6)?
xattrs_work() {
	mkdir -p "$SHM-xattr" &&
		python3 -c 'import os, sys; os.setxattr(sys.argv[1], "user.t", b"1")' "$SHM-xattr" \
			2>/dev/null
}

test_tune_tier() {
	local t=$SHM-tier.pool b=$SHM-back force=
	if ! xattrs_work; then
		force=--force # nothing but the inode number and birth time could prove it
		skip "tune --backing verified by user.ferrite.pool: no user.* attributes here"
	fi
	mkdir -p "$b/one"
	run mkfs --size 32M --tier "$b/one" --label cache "$t"
	check "mkfs --tier --label" all rc_is 0 -- out_has "^  label: +cache$"
	echo "tiered data" >"$WORK/f"
	run cp --pool "$t" "$WORK/f" pool:/f
	mv "$b/one" "$b/two"
	run ls --pool "$t" /
	check "backing moved: the error points at tune --backing" \
		all rc_is 1 -- err_has "ferrite tune --backing"
	run fsck "$t"
	check "backing moved: fsck exit 4 and the hint" \
		all rc_is 4 -- out_has "ferrite tune --backing"
	run tune --backing "$b/two" --label cache2 $force "$t"
	check "tune --backing to the moved directory: verified" \
		all rc_is 0 -- out_has "^  backing: +$b/two \((it holds this pool's data|forced)"
	run cat --pool "$t" /f
	check "... the pool works there" all rc_is 0 -- out_has "^tiered data$"
	run fsck "$t"
	check "... fsck clean" rc_is 0
	run info "$t"
	check "... info: label and backing" all out_has "^label: +cache2$" -- \
		out_has "^tiered cache of: +$b/two$"
	mkdir -p "$b/stranger"
	run tune --backing "$b/stranger" "$t"
	check "tune --backing to an unrelated directory: refused (exit 1)" \
		all rc_is 1 -- err_has "nothing shows that .* holds this pool's data"
	run tune --backing "$WORK/no-such-dir" "$t"
	check "tune --backing to a missing directory: refused" rc_is 1
	run tune --backing "$(dirname "$t")" "$t"
	check "tune --backing to a directory holding the pool: refused" \
		all rc_is 1 -- err_has "lies inside"
	cp -r "$b/two" "$b/copy" # no attributes: nothing proves it
	run tune --backing "$b/copy" "$t"
	check "tune --backing to a copy without the attribute: refused" rc_is 1
	run tune --backing "$b/copy" --force "$t"
	check "tune --backing --force: taken with a warning and a note about the copy" \
		all rc_is 0 -- err_has "warning: .*without proof" -- out_has "lost\+found"
	[ -z "$force" ] && check "... the directory is bound to the pool" python3 -c '
import os, sys
assert os.getxattr(sys.argv[1], "user.ferrite.pool").decode() == sys.argv[2]
' "$b/copy" "$("$FERRITE" info --json "$t" 2>/dev/null | sed -n 's/.*"uuid": "\(.*\)".*/\1/p')"
	run tune --mode strict "$t"
	check "tune --mode on a tiered pool: refused" all rc_is 1 -- err_has "no sync or strict"
	# An interrupted tune of a tiered pool: a torn header, then a torn superblock.
	run tune --backing "$b/two" --force "$t"
	poke "$t" $((4096 + 100)) deadbeef
	run ls --pool "$t" /
	check "tier header torn: refused, its backup named" \
		all rc_is 1 -- err_has "its backup is intact"
	run fsck -n "$t"
	check "... fsck -n: exit 4" rc_is 4
	run fsck -p "$t"
	check "... fsck -p: restored (exit 1)" rc_is 1
	poke "$t" 130 ffffffff
	run info "$t"
	check "tier superblock torn: refused, its backup named" \
		all rc_is 1 -- err_has "backup superblock is intact"
	run fsck -y "$t"
	check "... fsck -y: restored (exit 1)" rc_is 1
	run cat --pool "$t" /f
	check "... the pool works again" all rc_is 0 -- out_has "^tiered data$"
	run stat --pool "$t" /f
	check "stat in a tiered pool: the backing file's attributes" \
		all rc_is 0 -- out_has "^size: +12$" -- out_has "backing directory"
	run inode --pool "$t" 5
	check "inode in a tiered pool: refused in one line" \
		all rc_is 1 -- err_one_line "ferrite inode: inode 5: .*tiered"
}

test_namespace() {
	run mkdir --pool "$POOL" -p /a/b/c pool:/d
	check "mkdir -p: exit 0" rc_is 0
	run ls -R --pool "$POOL" /a
	check "mkdir -p: the tree" all out_has "^/a/b:$" -- out_has "^c$"
	run mkdir --pool "$POOL" /a
	check "mkdir of an existing directory: one error line" \
		all rc_is 1 -- err_one_line "ferrite mkdir: /a: "
	run mkdir --pool "$POOL" -p /a/b
	check "mkdir -p of an existing directory: fine" rc_is 0
	run mkdir --pool "$POOL" -m 700 /private
	run ls -l --pool "$POOL" /
	check "mkdir -m 700" out_has "^drwx------ .* private$"
	run mkdir --pool "$POOL" -m 9 /x
	check "mkdir -m 9: usage error" rc_is 2
	printf 'one\n' >"$WORK/one"
	printf 'two\n' >"$WORK/two"
	run cp --pool "$POOL" "$WORK/one" "$WORK/two" pool:/d
	run mv --pool "$POOL" /d/one /a/b/c
	check "mv into a directory" all rc_is 0 -- test "$("$FERRITE" cat --pool "$POOL" /a/b/c/one)" = one
	run mv --pool "$POOL" /a/b /renamed
	check "mv renames a directory" all rc_is 0 -- \
		test "$("$FERRITE" cat --pool "$POOL" /renamed/c/one)" = one
	run mv --pool "$POOL" -n /d/two /renamed/c/one
	check "mv -n onto an existing name: refused, nothing moved" \
		all rc_is 1 -- test "$("$FERRITE" cat --pool "$POOL" /renamed/c/one)" = one
	run mv --pool "$POOL" /d/two /renamed/c/one
	check "mv replaces a file" all rc_is 0 -- \
		test "$("$FERRITE" cat --pool "$POOL" /renamed/c/one)" = two
	run mv --pool "$POOL" /renamed /renamed/c
	check "mv a directory into itself: refused" rc_is 1
	run mv --pool "$POOL" /no-such /renamed
	check "mv of a missing file: one error line" \
		all rc_is 1 -- err_one_line "ferrite mv: /no-such: "
	run mv --pool "$POOL" /d
	check "mv with one operand: usage error" rc_is 2
	run rm --pool "$POOL" /renamed
	check "rm of a directory without -r: refused" \
		all rc_is 1 -- err_has "is a directory"
	run rm --pool "$POOL" -d /private
	check "rm -d of an empty directory" rc_is 0
	run rm --pool "$POOL" /renamed/c/one
	check "rm of a file" all rc_is 0 -- rc_is 0
	run rm --pool "$POOL" -r /renamed /a
	check "rm -r of trees" rc_is 0
	run ls --pool "$POOL" /
	check "rm -r: gone" all out_lacks "^renamed$" -- out_lacks "^a$" -- out_lacks "^private$"
	run rm --pool "$POOL" /no-such
	check "rm of a missing path: one error line" \
		all rc_is 1 -- err_one_line "ferrite rm: /no-such: "
	run rm --pool "$POOL" -f /no-such
	check "rm -f of a missing path: fine" rc_is 0
	run rm --pool "$POOL" -r /
	check "rm -r /: refused" all rc_is 1 -- err_has "root directory"
	run fsck "$POOL"
	check "fsck after the namespace changes: clean" rc_is 0
}

test_stat() {
	mkdir -p "$WORK/tree/sub"
	echo small >"$WORK/tree/small"
	head -c $((5 * 1024 * 1024)) /dev/urandom >"$WORK/tree/big"
	ln -s small "$WORK/tree/link"
	run cp -r --pool "$POOL" "$WORK/tree" pool:/st
	run stat --pool "$POOL" /st/small
	check "stat of a small file: inode, type, partition, pages" \
		all rc_is 0 -- out_has "^path: +/st/small$" -- out_has "^inode: +[0-9]+ +generation" -- \
		out_has "^type: +regular file" -- out_has "^size: +6$" -- \
		out_has "^partition: +L0 \(4.0 KiB\) at vspace offset 0x" -- \
		out_has "^  file 0x0-0xfff -> pool 0x[0-9a-f]+-0x[0-9a-f]+ \(4.0 KiB, pages\)$"
	run stat --pool "$POOL" /st/big
	check "stat of a 5 MiB file: whole 2 MiB units" \
		all rc_is 0 -- out_has "units\)$" -- out_has "^blocks: +[0-9]+"
	run stat --pool "$POOL" /st /st/link
	check "stat of a directory and a symlink (not followed)" \
		all rc_is 0 -- out_has "^directory: +small array" -- out_has "^parent: " -- \
		out_has "^type: +symbolic link" -- out_has "^target: +in the inode"
	local n
	n=$(inode_no "$POOL" /st/small)
	run stat --pool "$POOL" /st/small
	sed 1d "$WORK/out" >"$WORK/by-path"
	run inode --pool "$POOL" "$n"
	check "inode N: the same view as stat PATH" all rc_is 0 -- cmp -s "$WORK/out" "$WORK/by-path"
	run stat --pool "$POOL" --inode "$n"
	check "stat --inode N: the same" cmp -s "$WORK/out" "$WORK/by-path"
	run inode --pool "$POOL" 12x
	check "inode 12x: usage error" rc_is 2
	run inode --pool "$POOL" 3
	check "inode of no live inode: one error line" \
		all rc_is 1 -- err_one_line "ferrite inode: inode 3: "
	run inode --pool "$POOL" 18446744073709551615
	check "inode of a huge number: one error line" all rc_is 1 -- err_one_line "ferrite inode: "
	run stat --pool "$POOL" /st/none
	check "stat of a missing path: one error line" \
		all rc_is 1 -- err_one_line "ferrite stat: /st/none: "
}

# Damaged inodes: the view shows the stored numbers and fails cleanly.
test_stat_damaged() {
	local p=$SHM-damaged.pool off
	run mkfs --size 32M "$p"
	echo x >"$WORK/x"
	run cp --pool "$p" "$WORK/x" pool:/x
	run cp --pool "$p" "$WORK/x" pool:/y
	local n
	n=$(inode_no "$p" /x)
	off=$(inode_off "$p" /x)
	poke "$p" $((off + 16)) 00000000 # i_mode: no type
	run stat --pool "$p" /x
	check "stat of an inode with no type: fields shown, one error, exit 1" \
		all rc_is 1 -- out_has "^type: +unknown type" -- err_has "damaged"
	off=$(inode_off "$p" /y)
	poke "$p" $((off + 32)) 00f0ffffffff0000 # i_part far outside the vspace
	poke "$p" $((off + 40)) 05               # i_level L5
	run stat --pool "$p" /y
	check "stat of an inode whose partition lies outside: no crash, exit 1" \
		all rc_is 1 -- err_has "damaged"
	run inode --pool "$p" 1 "$n" 2
	check "inode of several numbers, one damaged: fails cleanly" \
		all rc_is 1 -- out_has "^inode: +$n "
	run rm --pool "$p" /x /y
	check "rm of damaged inodes: fails cleanly" rc_failed_cleanly
	run fsck "$p"
	check "fsck of the damaged pool: exit 4" rc_is 4
}

test_fsck_options() {
	local helper=$BINDIR/fsck.ferrite
	run fsck -f -v "$POOL"
	check "fsck -f -v: accepted, clean" rc_is 0
	run fsck -p "$POOL"
	check "fsck -p on a clean pool: exit 0, no progress" \
		all rc_is 0 -- out_has "clean" -- out_lacks "%"
	run fsck -V
	check "fsck -V: version" all rc_is 0 -- out_has "^ferrite fsck [0-9]"
	run fsck -p -n "$POOL"
	check "fsck -p -n: usage error 16" rc_is 16
	run fsck -a -y "$POOL"
	check "fsck -a -y: usage error 16" rc_is 16
	run fsck -C x "$POOL"
	check "fsck -C x: usage error 16" rc_is 16
	run fsck -C 1 "$POOL"
	check "fsck -C 1: e2fsck completion lines" all rc_is 0 -- out_has "^1 [0-9]+ [0-9]+ $POOL$"
	run fsck -c "$POOL"
	check "fsck -c (an e2fsck option with no meaning here): usage error 16" rc_is 16
	check "fsck.ferrite is built beside ferrite" test -L "$helper"
	run_prog "$helper" -p "$POOL"
	check "fsck.ferrite -p: ferrite fsck" all rc_is 0 -- out_has "$POOL: clean"
	if command -v fsck >/dev/null; then
		PATH=$BINDIR:$PATH run_prog fsck -t ferrite -a -f "$POOL"
		check "fsck -t ferrite (util-linux): runs fsck.ferrite, exit 0" \
			all rc_is 0 -- out_has "clean"
	else
		skip "fsck -t ferrite: no fsck(8)"
	fi
	# damage nothing can repair: preen says it needs a human
	local p=$SHM-needs-human.pool
	run mkfs --size 32M "$p"
	poke "$p" $((8192)) 0000000000000000 # the state page's magic
	run fsck -p "$p"
	check "fsck -p on damage: exit 4, asks for a human" \
		all rc_is 4 -- out_has "UNEXPECTED INCONSISTENCY"
}

test_held_pool() {
	if ! command -v python3 >/dev/null; then
		skip "a held pool: no python3"
		return
	fi
	hold "$POOL" || { skip "a held pool: the holder did not start"; return; }
	local pid=$HOLDER cmd
	run info "$POOL"
	check "info on a held pool: the holder, the superblock, counts as a snapshot" \
		all rc_is 0 -- out_has "^in use by: +process $pid \(python3\)" -- \
		out_has "^label: +keep$" -- out_has "^free: " -- out_has "^inodes: +[0-9]+ in use" -- \
		out_has "^note: the pool is in use"
	run info --json "$POOL"
	check "info --json on a held pool" all rc_is 0 -- out_has "\"holder_pid\": $pid" -- \
		out_has '"in_use": true'
	for cmd in "fsck $POOL" "ls --pool $POOL /" "cat --pool $POOL /x" \
		"cp --pool $POOL $WORK/one pool:/x" "mkfs --force --size 32M $POOL" \
		"stat --pool $POOL /" "rm --pool $POOL /x" "tune -L y $POOL" \
		"run --pool $POOL -- true"; do
		# shellcheck disable=SC2086
		run $cmd
		check "ferrite ${cmd%% *} on a held pool: names process $pid" \
			all rc_failed_cleanly -- err_has "in use by process $pid \(python3\)"
	done
	release
	run info "$POOL"
	check "info after release: the full view" all rc_is 0 -- out_has "^files: "
	hold "$SHM-tier.pool" || return
	run info "$SHM-tier.pool"
	check "info on a held tiered pool: the holder and the cache" \
		all rc_is 0 -- out_has "^in use by: +process $HOLDER " -- out_has "^kind: +tiered" -- \
		out_has "^tiered cache of: " -- out_has "^label: +cache2$"
	release
}

test_mounted_pool() {
	local p=$SHM-mounted.pool
	MNT=$WORK/mnt
	mkdir -p "$MNT"
	run mkfs --size 64M "$p"
	run mount "$p" "$MNT"
	if [ "$RC" -ne 0 ]; then
		skip "info on a FUSE mount: ferrite mount failed here ($(head -1 "$WORK/err"))"
		MNT=
		return
	fi
	mkdir "$MNT/d" && echo hi >"$MNT/d/f"
	run info "$p"
	check "info on a mounted pool: the daemon and the mount point" \
		all rc_is 0 -- out_has "^in use by: +process [0-9]+ \(ferrite\), mounted on $MNT$" -- \
		out_has "^inodes: +3 in use"
	run fsck -p "$p"
	check "fsck -p on a mounted pool: exit 8, names the daemon" \
		all rc_is 8 -- err_has "in use by process [0-9]+ \(ferrite\)"
	"$FERRITE" umount "$MNT" >/dev/null 2>&1
	MNT=
}

test_help
test_mkfs_label
test_tune_pm
test_tune_crash_pm
test_tune_tier
test_namespace
test_stat
test_stat_damaged
test_fsck_options
test_held_pool
test_mounted_pool

echo "cli_ops: $passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ]
