#!/bin/bash
# security_test.sh -- one named case of what docs/security.md promises
# (issue 12's local attacks): a pool is input, and shared places are not
# trusted.
#
#   cp_dotdot_name, cp_empty_name, cp_dir_cycle, cp_duplicate_symlink,
#   ls_bad_names      ferrite cp -r / ls -R on a pool whose entries were
#                     edited in place (craft_pool): names "../../../x", "",
#                     with NUL, a second "..", a directory that contains
#                     itself, two entries of one name
#   fuse_bad_names    the same pool through `ferrite mount` (root, /dev/fuse)
#   run_bad_names     ... and through `ferrite run` (the preload shim)
#   run_damaged_inode a file's inode overwritten: `ferrite run cat` fails
#                     with EUCLEAN and the library's message on stderr
#   stats_file_symlink  a symlink or a stranger's file planted where a tiered
#                     pool's stats file goes
#   default_dir_foreign_owner  /dev/shm/ferrite made by another user, a
#                     symlink, or writable by all (root, in a private mount
#                     namespace with its own /dev/shm)
#   mkfs_mode_0600    mkfs leaves the pool 0600, also over a 0644 file
#   root_daemon_untrusted_pool  `ferrite mount` as root refuses a pool
#                     another user can write, unless -o allow_untrusted_pool
#
# Usage: security_test.sh FERRITE CRAFT_POOL CASE. Exit 0 passed, 1 failed,
# 77 skipped (a case that needs root, /dev/fuse or unshare without them).
set -u
FERRITE=$1
CRAFT=$2
CASE=$3
ulimit -c 0 # a crash must show as an exit status >= 128
unset FERRITE_POOL

tmp=$(mktemp -d /dev/shm/ferrite-sec-test.XXXXXX)
# In a sanitizer build a daemon in the background has no stderr: every
# report goes to files, which fail the test.
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}log_path=$tmp/sanitizer"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:+$UBSAN_OPTIONS:}log_path=$tmp/sanitizer"
pool=$tmp/pool
mnt=$tmp/mnt
planted=() # files this test put outside $tmp
fail=0

# `ferrite run` leaves the pool's coordination file in /dev/shm for the next
# process (docs/contracts.md); the pool goes, and so does it
share_of() {
	# shellcheck disable=SC2046 # device and inode, two words
	printf '/dev/shm/ferrite-%x-%x-' $(stat -c '%d %i' "$1")
}
cleanup() {
	[ -e "$pool" ] && rm -f "$(share_of "$pool")"*.share
	if grep -q " $mnt " /proc/self/mountinfo 2>/dev/null; then
		"$FERRITE" umount "$mnt" >/dev/null 2>&1 || umount -l "$mnt" 2>/dev/null
	fi
	rm -f "${planted[@]}"
	rm -rf "$tmp"
}
trap cleanup EXIT

bad() {
	echo "FAIL: $*"
	fail=1
}
need() { "$@" || bad "$*"; }
skip() {
	echo "SKIP: $*"
	exit 77
}
need_root() { [ "$(id -u)" -eq 0 ] || skip "needs root"; }
# run CMD...: stdout in $tmp/out, stderr in $tmp/err, status in $rc (30 s at most).
run() {
	timeout 30 "$@" >"$tmp/out" 2>"$tmp/err"
	rc=$?
	sed 's/^/  out: /' "$tmp/out" | head -30
	sed 's/^/  err: /' "$tmp/err" | head -30
}
failed_cleanly() { [ "$rc" -ne 0 ] && [ "$rc" -lt 124 ]; } # not 0, no timeout, no signal
err_has() { grep -qE -- "$1" "$tmp/err"; }
out_has() { grep -qE -- "$1" "$tmp/out"; }

# A pool whose /d holds two good files, a good directory and entries edited
# in place: "../../../x" (a file), "" (a directory: "/d/" is /d again), a
# name with a NUL byte, a second "..", and an escape sequence with '/'.
make_bad_names_pool() {
	local src=$tmp/src
	mkdir -p "$src/d/good" "$src/d/empty"
	echo alpha >"$src/d/a.txt"
	echo beta >"$src/d/b.txt"
	echo gamma >"$src/d/good/c.txt"
	for n in dotdotname nulname twodots escname; do echo "evil $n" >"$src/d/$n"; done
	need "$FERRITE" mkfs --size 64M "$pool" >/dev/null 2>&1
	need "$FERRITE" cp -r --pool "$pool" "$src/d" pool:/
	need "$CRAFT" "$pool" rename /d dotdotname '../../../x'
	need "$CRAFT" "$pool" rename /d empty ''
	need "$CRAFT" "$pool" rename /d nulname 'n\x00/../../../y'
	need "$CRAFT" "$pool" rename /d twodots '..'
	need "$CRAFT" "$pool" rename /d escname '\x1b]0;owned\x07/z'
}

# Nothing named x, y or z appeared anywhere under $tmp but in the pool.
nothing_escaped() {
	local found
	found=$(find "$tmp" -path "$mnt" -prune -o \( -name x -o -name y -o -name z \) -print)
	[ -z "$found" ] || bad "written outside the destination: $found"
}

# The error names the directory and says the entry was refused (or, where
# the library refuses the entry itself, that the structure needs cleaning).
refusal_reported() {
	local dir=$1
	err_has "$dir" || bad "the error does not name $dir"
	err_has "refused|[Ss]tructure needs cleaning|EUCLEAN" || bad "no refusal reported"
	if grep -q $'\x1b' "$tmp/err"; then bad "an escape sequence reached the terminal"; fi
}

case_cp_dotdot_name() {
	make_bad_names_pool
	mkdir -p "$tmp/w/a/b/c"
	cd "$tmp/w/a/b/c" || exit 1
	run "$FERRITE" cp -r --pool "$pool" pool:/d copy
	failed_cleanly || bad "cp -r should fail cleanly (exit $rc)"
	refusal_reported "pool:/d"
	nothing_escaped
	if err_has "refused"; then # the listing went on past the bad entries
		need cmp -s copy/a.txt <(echo alpha)
		need cmp -s copy/good/c.txt <(echo gamma)
		err_has "'\.\./\.\./\.\./x' refused: the name contains '/'" || bad "no message for ../../../x"
		err_has "contains a NUL byte" || bad "no message for the NUL name"
		err_has "second \"\.\.\"" || bad "no message for the second .."
	fi
}

case_cp_empty_name() {
	make_bad_names_pool
	cd "$tmp" || exit 1
	run "$FERRITE" cp -r --pool "$pool" pool:/d copy
	failed_cleanly || bad "cp -r should fail cleanly, not recurse (exit $rc)"
	refusal_reported "pool:/d"
	if err_has "refused"; then
		err_has "'' refused: the name is empty" || bad "no message for the empty name"
	fi
	[ "$( find copy | wc -l)" -lt 20 ] || bad "cp recursed into the empty name"
}

case_cp_dir_cycle() {
	mkdir -p "$tmp/src/d/sub"
	echo one >"$tmp/src/d/sub/f"
	echo two >"$tmp/src/d/sub/loop"
	need "$FERRITE" mkfs --size 64M "$pool" >/dev/null 2>&1
	need "$FERRITE" cp -r --pool "$pool" "$tmp/src/d" pool:/
	need "$CRAFT" "$pool" retarget /d/sub loop /d # /d/sub/loop is /d: a hard-linked loop
	cd "$tmp" || exit 1
	run "$FERRITE" cp -r --pool "$pool" pool:/d copy
	failed_cleanly || bad "cp -r should fail cleanly (exit $rc)"
	err_has "pool:/d/sub/loop" || bad "the error does not name the loop"
	err_has "directory loop|[Ss]tructure needs cleaning" || bad "no loop reported"
	need cmp -s copy/sub/f <(echo one)
	[ ! -e copy/sub/loop/sub ] || bad "cp went round the loop"
	run "$FERRITE" ls -R --pool "$pool" /
	failed_cleanly || bad "ls -R should fail cleanly (exit $rc)"
	err_has "directory loop|[Ss]tructure needs cleaning" || bad "ls -R: no loop reported"
}

case_cp_duplicate_symlink() {
	# Two entries named f: a symlink to a file outside, and a file. Copying
	# the second must not write through the first.
	echo precious >"$tmp/victim"
	mkdir -p "$tmp/src/d"
	ln -s "$tmp/victim" "$tmp/src/d/f"
	echo evil >"$tmp/src/d/g"
	need "$FERRITE" mkfs --size 64M "$pool" >/dev/null 2>&1
	need "$FERRITE" cp -r --pool "$pool" "$tmp/src/d" pool:/
	need "$CRAFT" "$pool" rename /d g f
	cd "$tmp" || exit 1
	run "$FERRITE" cp -r --pool "$pool" pool:/d copy
	failed_cleanly || bad "cp -r should fail cleanly (exit $rc)"
	err_has "second entry of that name|[Ss]tructure needs cleaning" || bad "no duplicate reported"
	need cmp -s "$tmp/victim" <(echo precious)
}

case_ls_bad_names() {
	make_bad_names_pool
	run "$FERRITE" ls -a -R --pool "$pool" /
	failed_cleanly || bad "ls -R should fail cleanly (exit $rc)"
	refusal_reported "/d"
	out_has '^a\.txt$' || err_has "[Ss]tructure needs cleaning" || bad "the good entries are not listed"
	grep -v ':$' "$tmp/out" | grep -q '/' && bad "a name with '/' was listed"
	[ "$(grep -cx '\.\.' "$tmp/out")" -le 3 ] || bad "a second .. was listed" # /, /d, /d/good
	run "$FERRITE" ls -l --pool "$pool" /d
	failed_cleanly || bad "ls -l should fail cleanly (exit $rc)"
	refusal_reported "/d"
}

case_fuse_bad_names() {
	need_root
	[ -e /dev/fuse ] && command -v fusermount3 >/dev/null || skip "no /dev/fuse or fusermount3"
	make_bad_names_pool
	mkdir "$mnt"
	need "$FERRITE" mount "$pool" "$mnt"
	for how in "ls -a -f" "ls -a -l"; do # readdir, and readdirplus with lookups
		run $how "$mnt/d"
		failed_cleanly || bad "$how through the mount should fail (exit $rc)"
		err_has "[Ss]tructure needs cleaning" || bad "$how: not EUCLEAN"
		grep -qE '/|^$' "$tmp/out" && bad "$how: a name with '/' or an empty name was listed"
	done
	cd "$tmp" || exit 1
	run cp -r "$mnt/d" "$tmp/w"
	failed_cleanly || bad "cp -r through the mount should fail (exit $rc)"
	nothing_escaped
	need "$FERRITE" umount "$mnt"
}

case_run_damaged_inode() {
	need "$FERRITE" mkfs --size 64M "$pool" >/dev/null 2>&1
	local ino
	ino=$("$FERRITE" run --pool "$pool" -- sh -c 'echo hi >/pm/f && stat -c %i /pm/f')
	[ -n "$ino" ] || { bad "cannot make /pm/f"; return; }
	# an inode number is its offset in the pool in units of 64 bytes
	# (src/fs/fs.h ino_ptr): its first 48 bytes become 0xff
	head -c 48 /dev/zero | tr '\0' '\377' |
		dd of="$pool" bs=1 seek=$((ino * 64)) conv=notrunc status=none
	run "$FERRITE" run --pool "$pool" -- cat /pm/f
	failed_cleanly || bad "cat of a damaged inode should fail (exit $rc)"
	err_has "[Ss]tructure needs cleaning" || bad "no EUCLEAN"
	err_has "^ferrite: /pm: .*run .ferrite fsck." || bad "the library's message is not shown"
}

case_run_bad_names() {
	make_bad_names_pool
	for how in "ls -a -f" "ls -a -l"; do
		run "$FERRITE" run --pool "$pool" -- $how /pm/d
		failed_cleanly || bad "$how through the shim should fail (exit $rc)"
		err_has "/pm/d: entry '.*' refused|[Ss]tructure needs cleaning" || bad "$how: no refusal"
		grep -qE '/|^$' "$tmp/out" && bad "$how: a name with '/' or an empty name was listed"
		if grep -q $'\x1b' "$tmp/err"; then bad "an escape sequence reached the terminal"; fi
	done
	cd "$tmp" || exit 1
	run "$FERRITE" run --pool "$pool" -- cp -r /pm/d "$tmp/w"
	failed_cleanly || bad "cp -r through the shim should fail (exit $rc)"
	nothing_escaped
}

case_stats_file_symlink() {
	mkdir "$tmp/backing"
	need "$FERRITE" mkfs --tier "$tmp/backing" --size 64M "$pool" >/dev/null 2>&1
	local uuid stats
	uuid=$("$FERRITE" info "$pool" | sed -n 's/^uuid: *//p')
	[ -n "$uuid" ] || bad "no uuid"
	stats=/dev/shm/ferrite-tier-$uuid.stats
	planted+=("$stats")
	echo precious >"$tmp/victim"
	chmod 600 "$tmp/victim"
	ln -s "$tmp/victim" "$stats"
	run "$FERRITE" ls --pool "$pool" /
	[ "$rc" -eq 0 ] || bad "the mount should go on without live statistics (exit $rc)"
	err_has "$stats: .*it is a symlink" || bad "no message about the symlink"
	need cmp -s "$tmp/victim" <(echo precious)
	[ -L "$stats" ] || bad "the planted symlink was replaced"
	rm -f "$stats"
	if [ "$(id -u)" -eq 0 ]; then # a stranger's file: not written, not believed
		head -c 4096 /dev/zero >"$stats"
		chown 65534 "$stats"
		run "$FERRITE" ls --pool "$pool" /
		[ "$rc" -eq 0 ] || bad "the mount should go on (exit $rc)"
		err_has "$stats: .*belongs to another user" || bad "no message about the owner"
		cmp -s "$stats" <(head -c 4096 /dev/zero) || bad "the stranger's file was written"
	fi
	rm -f "$stats"
	run "$FERRITE" ls --pool "$pool" / # and without anything planted, no message
	[ "$rc" -eq 0 ] && [ ! -s "$tmp/err" ] || bad "a clean mount complained"
	[ ! -e "$stats" ] || bad "the stats file was left behind"
}

# Runs the rest of this script's case in a private mount namespace with an
# empty tmpfs on /dev/shm (the real /dev/shm/ferrite is never touched).
case_default_dir_foreign_owner() {
	need_root
	command -v unshare >/dev/null || skip "no unshare"
	unshare -m --propagation private true 2>/dev/null || skip "cannot unshare the mount namespace"
	unshare -m --propagation private bash -s "$FERRITE" <<'EOF'
set -u
F=$1
fail=0
bad() { echo "FAIL: $*"; fail=1; }
mount -t tmpfs -o mode=1777 tmpfs /dev/shm || { echo "SKIP: cannot mount a tmpfs"; exit 77; }
mkdir -m 0700 /dev/shm/san # $tmp is hidden now: sanitizer reports go here
export ASAN_OPTIONS="$ASAN_OPTIONS:log_path=/dev/shm/san/report" # the last one counts
export UBSAN_OPTIONS="$UBSAN_OPTIONS:log_path=/dev/shm/san/report"
d=/dev/shm/ferrite
attempt() { # WHAT EXPECTED-MESSAGE: mkfs and ls of the default pool must both refuse
	local what=$1 want=$2 cmd out
	for cmd in "mkfs --size 64M --no-hugepages" "mkfs --size 64M" "ls /"; do
		out=$(timeout 30 "$F" $cmd 2>&1) && bad "$what: '$cmd' succeeded"
		echo "$out" | sed "s/^/  $what: /"
		echo "$out" | grep -qE -- "$want" || bad "$what: '$cmd' did not say: $want"
	done
	grep -q " $d " /proc/self/mountinfo && bad "$what: a tmpfs was mounted on $d"
}
mkdir "$d" && chown 65534:65534 "$d"
attempt "directory of another user" "$d: owned by uid 65534, another user"
[ -e "$d/default.pool" ] && bad "a pool was created in the other user's directory"
rm -rf "$d"
mkdir /dev/shm/elsewhere && ln -s /dev/shm/elsewhere "$d"
attempt "symlink" "$d: is a symlink"
[ -e /dev/shm/elsewhere/default.pool ] && bad "a pool was created through the symlink"
rm -rf "$d" /dev/shm/elsewhere
mkdir -m 0777 "$d"
attempt "world-writable directory" "$d: writable by other users \(mode 0777\)"
rmdir "$d"
mkdir -m 0755 "$d" && touch "$d/default.pool" && chown 65534 "$d/default.pool"
attempt "pool of another user" "$d/default.pool: owned by uid 65534"
rm -f "$d/default.pool"
ln -s /dev/shm/target "$d/default.pool"
attempt "pool symlink" "$d/default.pool: is a symlink"
[ -e /dev/shm/target ] && bad "a pool was created through the symlink"
rm -rf "$d"
# Nothing there: mkfs makes a root directory and a 0600 pool.
"$F" mkfs --size 64M >/dev/null 2>&1 || bad "mkfs of the default pool failed"
[ "$(stat -c '%u %a' "$d")" = "0 755" ] || bad "default directory: $(stat -c '%u %a' "$d")"
[ "$(stat -c '%u %a' "$d/default.pool")" = "0 600" ] || bad "default pool: $(stat -c '%u %a' "$d/default.pool")"
"$F" ls / >/dev/null || bad "ls of the default pool failed"
for f in /dev/shm/san/*; do [ -e "$f" ] && cat "$f" && bad "sanitizer report $f"; done
exit $fail
EOF
	local r=$?
	[ $r -eq 77 ] && skip "no tmpfs in the namespace"
	[ $r -eq 0 ] || bad "in the private namespace"
}

case_mkfs_mode_0600() {
	(umask 022 && touch "$tmp/p1" && chmod 644 "$tmp/p1")
	need "$FERRITE" mkfs --size 64M "$tmp/p1" >/dev/null 2>&1
	[ "$(stat -c %a "$tmp/p1")" = 600 ] || bad "mkfs over a 0644 file left $(stat -c %a "$tmp/p1")"
	chmod 644 "$tmp/p1"
	run "$FERRITE" mkfs --size 64M "$tmp/p1" # refused (already a pool): mode unchanged
	failed_cleanly || bad "mkfs over a pool without --force should fail"
	[ "$(stat -c %a "$tmp/p1")" = 644 ] || bad "a refused mkfs changed the mode"
	need "$FERRITE" mkfs --force --size 64M "$tmp/p1" >/dev/null 2>&1
	[ "$(stat -c %a "$tmp/p1")" = 600 ] || bad "mkfs --force left $(stat -c %a "$tmp/p1")"
	(umask 0 && "$FERRITE" mkfs --size 64M "$tmp/p2" >/dev/null 2>&1) || bad "mkfs of a new pool"
	[ "$(stat -c %a "$tmp/p2")" = 600 ] || bad "a new pool (umask 0) is $(stat -c %a "$tmp/p2")"
	mkdir "$tmp/backing"
	(umask 0 && touch "$tmp/p3" && chmod 666 "$tmp/p3")
	need "$FERRITE" mkfs --tier "$tmp/backing" --size 64M "$tmp/p3" >/dev/null 2>&1
	[ "$(stat -c %a "$tmp/p3")" = 600 ] || bad "a tiered pool over a 0666 file is $(stat -c %a "$tmp/p3")"
}

case_root_daemon_untrusted_pool() {
	need_root
	[ -e /dev/fuse ] && command -v fusermount3 >/dev/null || skip "no /dev/fuse or fusermount3"
	mkdir "$mnt"
	chmod 755 "$tmp"
	need "$FERRITE" mkfs --size 64M "$pool" >/dev/null 2>&1
	refused() { # WHAT WANT: mount refused with a message, nothing mounted
		run "$FERRITE" mount "$pool" "$mnt"
		failed_cleanly || bad "$1: the mount should be refused (exit $rc)"
		err_has "refusing to serve this pool as root: $2" || bad "$1: no clear message"
		err_has "allow_untrusted_pool" || bad "$1: the message does not name the option"
		grep -q " $mnt " /proc/self/mountinfo && bad "$1: mounted anyway"
		"$FERRITE" umount "$mnt" >/dev/null 2>&1
	}
	chown 65534 "$pool"
	refused "pool of another user" "the pool file belongs to uid 65534, not root"
	chown 0 "$pool" && chmod 666 "$pool"
	refused "world-writable pool" "the pool file is writable by group or others \(mode 0666\)"
	chmod 620 "$pool"
	refused "group-writable pool" "the pool file is writable by group or others \(mode 0620\)"
	chmod 600 "$pool" && chown 65534 "$tmp"
	refused "directory of another user" "its directory $tmp belongs to uid 65534"
	chown 0 "$tmp" && chmod 777 "$tmp"
	refused "world-writable directory" "its directory $tmp is writable by group or others"
	chmod 755 "$tmp"
	run "$FERRITE" mount "$pool" "$mnt" # root's alone: mounted, no warning
	[ "$rc" -eq 0 ] || bad "a pool of root's was refused"
	err_has "warning" && bad "a warning for a pool of root's"
	need "$FERRITE" umount "$mnt"
	chown 65534 "$pool"
	run "$FERRITE" mount -o allow_untrusted_pool "$pool" "$mnt"
	[ "$rc" -eq 0 ] || bad "-o allow_untrusted_pool should mount"
	err_has "warning: $pool: the pool file belongs to uid 65534, not root; serving it as root anyway" ||
		bad "no warning with allow_untrusted_pool"
	need touch "$mnt/works"
	need "$FERRITE" umount "$mnt"
}

declare -F "case_$CASE" >/dev/null || {
	echo "unknown case $CASE"
	exit 2
}
echo "== $CASE"
"case_$CASE"
cd /
for f in "$tmp"/sanitizer*; do
	[ -e "$f" ] || continue
	cat "$f"
	bad "sanitizer report $f"
done
[ $fail -eq 0 ] && echo "PASS: $CASE"
exit $fail
