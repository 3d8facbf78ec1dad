#!/usr/bin/env bash
# edges_test.sh -- the rough edges a new user of the `ferrite` command hit
# (issue 14), one case each: a failed mkfs leaves nothing behind (too small,
# too large, ENOSPC on a small tmpfs in a private mount namespace, a file
# size limit after the old contents went); mount -f and the daemon exit 0
# when a signal stops them; mount wants its pool named; a user's umount of
# root's mount says why; one wording for a missing pool, a missing
# directory named, the default pool's permission error points at --pool;
# fsck counts a damaged superblock once; the size hint; the huge-page note;
# ls -l owner names; mkfs progress on a terminal and in a log; the --help
# texts of every command as help2man reads them.
#
# Usage: edges_test.sh PATH/TO/ferrite SOURCE_DIR   (CTest passes both)
# Cases that need root, /dev/fuse, unshare, setpriv, python3, script or
# help2man are skipped (and say so) where those are missing.
set -u

if [ "${1:-}" = --ns ]; then # re-run inside `unshare -m`: see in_namespace
	NS_CASE=$2
	shift 2
fi
FERRITE=${1:?usage: edges_test.sh PATH/TO/ferrite SOURCE_DIR}
SRC=${2:?usage: edges_test.sh PATH/TO/ferrite SOURCE_DIR}
[ -x "$FERRITE" ] || { echo "edges_test.sh: $FERRITE is not executable" >&2; exit 2; }
FERRITE=$(cd "$(dirname "$FERRITE")" && pwd)/$(basename "$FERRITE")
ulimit -c 0
unset FERRITE_POOL

passed=0
failed=0
skipped=0

# ---- helpers (cli_lib.sh, and this test's own) ---------------------------------

. "$(dirname "${BASH_SOURCE[0]}")/cli_lib.sh"

# as_nobody ARGS...: run, as user nobody
as_nobody() {
	setpriv --reuid=nobody --regid=nogroup --clear-groups "$FERRITE" "$@" >"$WORK/out" 2>"$WORK/err"
	RC=$?
}

out_lacks() { ! grep -qE -- "$1" "$WORK/out"; }
err_is() { [ "$(grep -vE '(formatting|checking): +[0-9]+%' "$WORK/err")" = "$1" ]; }
no_file() { [ ! -e "$1" ]; }
same_file() { cmp -s "$1" "$2"; }
mode_is() { [ "$(stat -c %a "$1")" = "$2" ]; }
is_root() { [ "$(id -u)" = 0 ]; }
have() { command -v "$1" >/dev/null 2>&1; }
mounted() { grep -q " $1 " /proc/self/mountinfo; }
wait_mounted() { # wait_mounted DIR [0|1]: until DIR is (1) or is not (0) a mount point
	local want=${2:-1} i
	for i in $(seq 100); do
		if mounted "$1"; then [ "$want" = 1 ] && return 0; else [ "$want" = 0 ] && return 0; fi
		sleep 0.05
	done
	return 1
}
can_fuse() { is_root && [ -e /dev/fuse ] && have fusermount3; }

# in_namespace CASE: runs this script's ns_CASE in a private mount namespace
# (mounts made there vanish with it); its ok/FAIL/skip lines count here.
in_namespace() {
	local out
	if ! is_root || ! have unshare; then
		skip "$1: needs root and unshare(1)"
		return
	fi
	out=$(unshare -m --propagation private bash "$0" --ns "$1" "$FERRITE" "$SRC" 2>&1)
	echo "$out" | grep -vE '^(edges|ns):'
	passed=$((passed + $(echo "$out" | grep -c '^ok ')))
	failed=$((failed + $(echo "$out" | grep -c '^FAIL ')))
	skipped=$((skipped + $(echo "$out" | grep -c '^skip ')))
}

# ---- a failed mkfs leaves nothing behind -------------------------------------------

test_mkfs_failures() {
	local keep=$SHM/keep.dat
	run mkfs --size 100 "$SHM/small.pool"
	check "mkfs --size 100: fails, names the minimum" all rc_is 1 -- err_has "at least 16 MiB"
	check "mkfs --size 100: leaves no file" no_file "$SHM/small.pool"
	run mkfs --size 99T "$SHM/huge.pool"
	check "mkfs --size 99T: fails, names the maximum" all rc_is 1 -- err_has "at most 16 TiB"
	check "mkfs --size 99T: leaves no file" no_file "$SHM/huge.pool"
	mkdir -p "$SHM/backing"
	run mkfs --tier "$SHM/backing" --size 100 "$SHM/tsmall.pool"
	check "mkfs --tier --size 100: fails, leaves no file" all rc_is 1 -- no_file "$SHM/tsmall.pool"
	run mkfs --tier "$SHM/backing" --size 99T "$SHM/thuge.pool"
	check "mkfs --tier --size 99T: fails, names the maximum, leaves no file" \
		all rc_is 1 -- err_has "at most 16 TiB" -- no_file "$SHM/thuge.pool"

	head -c 1048576 /dev/urandom >"$keep"
	chmod 640 "$keep"
	cp -p "$keep" "$WORK/keep.orig"
	run mkfs --force --size 100 "$keep"
	check "mkfs --force --size 100 over a file: the file as it was" \
		all rc_is 1 -- same_file "$keep" "$WORK/keep.orig" -- mode_is "$keep" 640
	run mkfs --force --size 99T "$keep"
	check "mkfs --force --size 99T over a file: the file as it was" \
		all rc_is 1 -- same_file "$keep" "$WORK/keep.orig" -- mode_is "$keep" 640

	run mkfs "$SHM/no-such-dir/x.pool"
	check "mkfs in a missing directory: says the directory does not exist" \
		all rc_is 1 -- err_is "ferrite mkfs: $SHM/no-such-dir/x.pool: cannot create the pool: directory $SHM/no-such-dir does not exist" \
		-- no_file "$SHM/no-such-dir"

	# A failure after the old contents went (the file size limit stops the
	# sizing): a new file goes, an existing one is left empty, and says so.
	(trap '' XFSZ && ulimit -f 8192 && exec "$FERRITE" mkfs --size 32M "$SHM/limited.pool") \
		>"$WORK/out" 2>"$WORK/err"
	RC=$?
	check "mkfs failing while sizing a new file: leaves no file" \
		all rc_is 1 -- err_has "File too large" -- no_file "$SHM/limited.pool"
	(trap '' XFSZ && ulimit -f 8192 && exec "$FERRITE" mkfs --force --size 32M "$keep") \
		>"$WORK/out" 2>"$WORK/err"
	RC=$?
	check "mkfs failing after discarding a file: says it is left empty" \
		all rc_is 1 -- err_has "$keep is left empty: its old contents were discarded" -- \
		test "$(stat -c %s "$keep")" = 0 -- mode_is "$keep" 640
}

# In a private mount namespace: a 64 MiB tmpfs.
ns_enospc() {
	local d=$WORK/small-fs before
	mkdir -p "$d" "$WORK/backing2"
	mount -t tmpfs -o size=64M tmpfs "$d" || { skip "ENOSPC: cannot mount a tmpfs"; return; }
	before=$(df --output=avail -B1 "$d" | tail -1)
	run mkfs --size 128M "$d/x.pool"
	check "ENOSPC: mkfs --size 128M on a 64 MiB tmpfs fails, says there is no room" \
		all rc_is 1 -- err_has "no room for a 128 MiB pool: its file system has 64 MiB free"
	check "ENOSPC: leaves no file, the tmpfs as free as before" \
		all no_file "$d/x.pool" -- test "$(df --output=avail -B1 "$d" | tail -1)" = "$before"
	run mkfs --tier "$WORK/backing2" --size 128M "$d/t.pool"
	check "ENOSPC: mkfs --tier leaves no file either" all rc_is 1 -- no_file "$d/t.pool"
	head -c 1048576 /dev/urandom >"$d/keep.dat"
	cp "$d/keep.dat" "$WORK/keep-ns.orig"
	run mkfs --force --size 128M "$d/keep.dat"
	check "ENOSPC: mkfs --force over a file leaves the file as it was" \
		all rc_is 1 -- same_file "$d/keep.dat" "$WORK/keep-ns.orig"
	run mkfs --size 48M "$d/fits.pool"
	check "ENOSPC: a pool that fits is made" rc_is 0
	umount "$d"
}

# ---- mount and umount ------------------------------------------------------------------

test_mount_stop() {
	local pool=$SHM/m.pool mnt=$SHM/mnt sig pid
	if ! can_fuse; then
		skip "mount -f and the daemon stopped by a signal: needs root, /dev/fuse, fusermount3"
		return
	fi
	mkdir -p "$mnt"
	"$FERRITE" mkfs --size 64M "$pool" >/dev/null 2>&1
	for sig in INT TERM; do
		# job control on: a background job of a script would ignore SIGINT
		set -m
		"$FERRITE" mount -f "$pool" "$mnt" >"$WORK/out" 2>"$WORK/err" &
		pid=$!
		set +m
		if ! wait_mounted "$mnt"; then
			RC=-1
			not_ok "mount -f: mounted" "$mnt is not a mount point"
			kill "$pid" 2>/dev/null
			wait "$pid"
			continue
		fi
		kill -"$sig" "$pid"
		wait "$pid"
		RC=$?
		check "mount -f stopped by SIG$sig: exit 0, no error, unmounted" \
			all rc_is 0 -- err_is "" -- wait_mounted "$mnt" 0
	done

	# The daemon (no -f) reparents to the nearest subreaper, as systemd is for
	# a Type=forking unit: its exit status after SIGTERM is what systemd sees.
	if have python3; then
		python3 - "$FERRITE" "$pool" "$mnt" >"$WORK/out" 2>"$WORK/err" <<'EOF'
import ctypes, os, signal, subprocess, sys, time
ferrite, pool, mnt = sys.argv[1:]
ctypes.CDLL(None).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
if subprocess.run([ferrite, "mount", pool, mnt]).returncode != 0:
    sys.exit("mount failed")
# the daemon is now our child (its parent, ferrite mount, has exited)
kids = []
for d in os.listdir("/proc"):
    try:
        stat = open(f"/proc/{d}/stat").read()
    except (OSError, ValueError):
        continue
    if d.isdigit() and int(stat.rsplit(")", 1)[1].split()[1]) == os.getpid():
        kids.append(int(d))
if len(kids) != 1:
    sys.exit(f"children: {kids}")
os.kill(kids[0], signal.SIGTERM)
_, st = os.waitpid(kids[0], 0)
print("daemon exit", os.waitstatus_to_exitcode(st))
EOF
		RC=$?
		check "the daemon stopped by SIGTERM: exit 0, unmounted (systemd's view)" \
			all rc_is 0 -- out_has "^daemon exit 0$" -- wait_mounted "$mnt" 0
	else
		skip "the daemon's exit status: needs python3 (a child subreaper)"
	fi

	run mount "$mnt"
	check "mount DIR without a pool: usage error naming POOL, nothing mounted" \
		all rc_is 2 -- err_has "missing the POOL to mount: .ferrite mount POOL $mnt." -- \
		wait_mounted "$mnt" 0
	FERRITE_POOL=$pool run mount "$mnt"
	check "mount DIR with \$FERRITE_POOL naming the pool: mounted" all rc_is 0 -- mounted "$mnt"
	if mounted "$mnt" && have setpriv && id nobody >/dev/null 2>&1; then
		chmod 755 "$SHM"
		as_nobody umount "$mnt"
		check "umount of root's mount by another user: says whose it is, not busy" \
			all rc_is 1 -- err_is "ferrite umount: $mnt: mounted by root (uid 0); only that user or root can unmount it" \
			-- mounted "$mnt"
	else
		skip "umount by another user: needs setpriv and user nobody"
	fi
	run umount "$mnt"
	check "umount by root: unmounted" all rc_is 0 -- wait_mounted "$mnt" 0
}

# ---- missing pools, the default pool ---------------------------------------------------

test_no_such_pool() {
	local p=$SHM/missing.pool cmd
	local want="$p: no such pool (create it with \`ferrite mkfs $p\`)"
	mkdir -p "$SHM/mntdir"
	for cmd in "info $p" "fsck $p" "stats $p" "ls --pool $p /" "cat --pool $p /x" \
		"stat --pool $p /x" "rm --pool $p /x" "mkdir --pool $p /x" "mv --pool $p /x /y" \
		"cp --pool $p pool:/x $WORK/x" "tune --label x $p" "mount $p $SHM/mntdir" \
		"run --pool $p -- true"; do
		# shellcheck disable=SC2086 # the words of each command
		run $cmd
		check "no such pool, one wording: ferrite ${cmd%% *}" \
			all test "$RC" -ne 0 -- err_has "^ferrite ${cmd%% *}: $(printf '%s' "$want" | sed 's/[.[\*^$()+?{|]/\\&/g')$"
	done
}

# In a private mount namespace: a tmpfs on /dev/shm holds the default pool.
ns_default_pool() {
	if ! have setpriv || ! id nobody >/dev/null 2>&1; then
		skip "default pool of another user: needs setpriv and user nobody"
		return
	fi
	mount -t tmpfs -o size=128M,mode=1777 tmpfs /dev/shm || { skip "no tmpfs on /dev/shm"; return; }
	run mkfs --size 16M
	check "default pool: root makes it" rc_is 0
	as_nobody info
	check "default pool of root: another user is told to use --pool or FERRITE_POOL" \
		all rc_is 1 -- err_has "Permission denied" -- err_has "with --pool POOL or FERRITE_POOL=POOL"
	as_nobody ls /
	check "default pool of root: ls says the same" err_has "with --pool POOL or FERRITE_POOL=POOL"
	as_nobody mkfs --size 16M --pool /dev/shm/mine.pool
	check "a pool of one's own works" rc_is 0
	umount /dev/shm/ferrite 2>/dev/null
	umount /dev/shm
}

# ---- fsck, sizes, huge pages, ls, progress ---------------------------------------------------

test_fsck_superblock() {
	local p=$SHM/sb.pool
	"$FERRITE" mkfs --size 32M "$p" >/dev/null 2>&1
	dd if=/dev/zero of="$p" bs=512 count=1 conv=notrunc status=none # the primary superblock
	run fsck -n "$p"
	check "fsck -n, primary superblock damaged: 1 problem, on one line" \
		all rc_is 4 -- out_has ": 1 problem found, errors left uncorrected" -- \
		test "$(grep -c superblock "$WORK/out")" = 1
	run fsck --repair "$p"
	check "fsck --repair: 1 problem, corrected from the backup" \
		all rc_is 1 -- out_has ": 1 problem found, all corrected" -- out_has "restored from the backup"
	run fsck "$p"
	check "fsck after the repair: clean" rc_is 0
}

test_size_hint() {
	run mkfs --size 12Q "$SHM/q.pool"
	check "mkfs --size 12Q: the hint names 16M to 16T, not 4096" \
		all rc_is 2 -- err_has "16M to 16T" -- err_lacks "4096"
}

test_hugepage_note() {
	local p=$SHM/hp.pool
	run mkfs --size 32M "$p"
	if ! out_has "^  backing: .*4 KiB pages"; then
		skip "huge-page note: $p has 2 MiB pages here"
		return
	fi
	check "mkfs on 4 KiB pages: one note, saying how to get 2 MiB pages" \
		all test "$(grep -c '^note:' "$WORK/out")" = 1 -- out_has "huge=within_size" -- \
		out_has "no-hugepages leaves this"
	run mkfs --size 32M --force --no-hugepages "$p"
	check "mkfs --no-hugepages: no note" all rc_is 0 -- out_lacks "^note:"
	run info "$p"
	check "info: no note, the huge pages line points at mkfs --help" \
		all out_lacks "^note:" -- out_has "^huge pages: +no \(4 KiB; .ferrite mkfs --help. says how"
	run mkfs --help
	check "mkfs --help says how to get huge pages" out_has "^Huge pages: a pool on a tmpfs"
}

test_ls_owners() {
	local p=$SHM/ls.pool
	"$FERRITE" mkfs --size 32M "$p" >/dev/null 2>&1
	if ! is_root || ! "$FERRITE" run --pool "$p" -- sh -c \
		'touch /pm/a /pm/b /pm/c && chown 0:0 /pm/a && chown 65534:65534 /pm/b && chown 54321:54321 /pm/c' \
		>"$WORK/out" 2>"$WORK/err"; then
		skip "ls -l owner names: needs root and ferrite run ($(head -1 "$WORK/err"))"
		return
	fi
	local root_u root_g nob_u nob_g
	root_u=$(getent passwd 0 | cut -d: -f1)
	root_g=$(getent group 0 | cut -d: -f1)
	nob_u=$(getent passwd 65534 | cut -d: -f1)
	nob_g=$(getent group 65534 | cut -d: -f1)
	if getent passwd 54321 >/dev/null || getent group 54321 >/dev/null; then
		skip "ls -l owner names: uid or gid 54321 exists here"
		return
	fi
	run ls -l --pool "$p" /
	check "ls -l: owner and group names, a number for an unknown id" \
		all rc_is 0 -- out_has "^-[-rwx]{9} 1 $root_u +$root_g +0 .* a$" -- \
		out_has "^-[-rwx]{9} 1 $nob_u +$nob_g +0 .* b$" -- out_has "^-[-rwx]{9} 1 +54321 +54321 0 .* c$"
	run ls -n --pool "$p" /
	check "ls -n: numeric owner and group" \
		all rc_is 0 -- out_has "^-[-rwx]{9} 1 +0 +0 0 .* a$" -- out_has "^-[-rwx]{9} 1 65534 65534 0 .* b$"
}

test_mkfs_progress() {
	local p=$SHM/progress.pool pcts
	run mkfs --size 256M "$p"
	pcts=$(grep -oE 'formatting: [0-9]+%' "$WORK/err" | grep -oE '[0-9]+')
	check "mkfs progress in a log: 5 to 12 lines, rising, to 100 %" \
		all rc_is 0 -- test "$(echo "$pcts" | wc -l)" -ge 5 -- test "$(echo "$pcts" | wc -l)" -le 12 -- \
		test "$(echo "$pcts" | sort -n | tr '\n' ' ')" = "$(echo "$pcts" | tr '\n' ' ')" -- \
		test "$(echo "$pcts" | tail -1)" = 100
	if have script; then
		script -qec "$FERRITE mkfs --force --size 256M $p" /dev/null >"$WORK/out" 2>&1
		RC=$?
		pcts=$(tr '\r' '\n' <"$WORK/out" | grep -oE 'formatting: +[0-9]+%' | grep -oE '[0-9]+' | sort -un)
		check "mkfs progress on a terminal: smooth (50 or more steps), in place" \
			all rc_is 0 -- test "$(echo "$pcts" | wc -l)" -ge 50 -- grep -q $'\r' "$WORK/out"
	else
		skip "mkfs progress on a terminal: needs script(1)"
	fi
}

# ---- --help texts ------------------------------------------------------------------------

# Lines help2man would misread: an option and its description one blank apart.
one_blank_options() {
	grep -E '^ {2,6}-[^ ]+(, --[^ ]+)?( [A-Z][A-Z_]*)? [a-z(]' "$WORK/out"
}

test_help_texts() {
	local cmd cmds
	run crashtest --help
	check "crashtest --help: the house style (Usage:, Options:, Exit status:)" \
		all rc_is 0 -- out_has "^Usage: ferrite crashtest " -- out_has "^Options:$" -- \
		awk '/^Exit status:/ { found = 1; exit prev != "" } { prev = $0 } END { exit !found }' "$WORK/out"
	run crashtest --bogus
	check "crashtest with a bad option: one line and where to look" \
		all rc_is 2 -- err_is "ferrite crashtest: unknown option, or one missing its value: '--bogus'
Try 'ferrite crashtest --help' for more information."

	run --help
	cmds=$(awk '/^Commands:/ { on = 1; next } on && /^$/ { exit } on { print $1 }' "$WORK/out")
	check "ferrite --help: two blanks at least after every command name" \
		test -z "$(awk '/^Commands:/ { on = 1; next } on && /^$/ { exit }
			on && !/^  [a-z]+  +[^ ]/' "$WORK/out")"
	check "ferrite --help: the umount summary reads as a man page's NAME line" \
		out_has "^  umount +unmount a mounted pool and wait until it is released$"
	for cmd in "" $cmds; do
		[ "$cmd" = help ] && continue
		# shellcheck disable=SC2086 # no command: ferrite --help
		run $cmd --help
		check "ferrite${cmd:+ $cmd} --help: Usage: line, 80 columns, two blanks before each description" \
			all rc_is 0 -- out_has "^Usage: ferrite${cmd:+ $cmd}" -- \
			test -z "$(awk 'length($0) > 80' "$WORK/out")" -- test -z "$(one_blank_options)"
	done

	if ! have help2man; then
		skip "man pages: needs help2man"
		return
	fi
	local man=$WORK/man version
	version=$("$FERRITE" --version | awk '{ print $2; exit }')
	if ! bash "$SRC/scripts/gen-man.sh" "$FERRITE" "$version" "$SRC/docs/man" "$man" \
		>"$WORK/out" 2>"$WORK/err"; then
		RC=1
		not_ok "gen-man.sh makes the man pages"
		return
	fi
	RC=0
	check "man ferrite-mkfs: --consistency is an option of its own, --flush-ms kept" \
		all grep -q '^\\fB\\-\\-consistency\\fR C$' "$man/man1/ferrite-mkfs.1" -- \
		test "$(grep -A1 '^\\fB\\-\\-consistency\\fR C$' "$man/man1/ferrite-mkfs.1" | tail -1 | cut -c1-15)" = "write (default)" -- \
		grep -q '^\\fB\\-\\-flush\\-ms\\fR N$' "$man/man1/ferrite-mkfs.1"
	check "man ferrite-mount: allow_untrusted_pool's description is one paragraph" \
		test "$(grep -A3 '^allow_untrusted_pool$' "$man/man1/ferrite-mount.1" | tail -3 | grep -c '^\.')" = 0
	check "man ferrite: every command a tag of its own with its summary" \
		test -z "$(for cmd in $cmds; do grep -B1 -A1 -x "$cmd" "$man/man1/ferrite.1" |
			awk -v c="$cmd" 'NR == 1 && $0 != ".TP" || NR == 3 && /^\./ { print c }'; done)"
	check "man ferrite-umount: its NAME line" \
		grep -qx 'ferrite-umount \\- unmount a mounted pool and wait until it is released' \
		"$man/man1/ferrite-umount.1"
}

# ---- main ----------------------------------------------------------------------------------

TAG="ferrite-edges-$$-$RANDOM"
SHM=/dev/shm/$TAG
WORK=$(mktemp -d "${TMPDIR:-/tmp}/$TAG.XXXXXX")
chmod 755 "$WORK"
if [ -n "${NS_CASE:-}" ]; then # inside the namespace: one case, then report
	trap 'rm -rf "$WORK"' EXIT
	"ns_$NS_CASE"
	echo "ns: $passed passed, $failed failed"
	exit 0
fi
mkdir -p "$SHM"
cleanup() {
	local m
	for m in $(awk -v p="$SHM/" 'index($5, p) == 1 { print $5 }' /proc/self/mountinfo); do
		"$FERRITE" umount -l "$m" >/dev/null 2>&1 || umount -l "$m" 2>/dev/null
	done
	rm -rf "$WORK" "$SHM"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

test_mkfs_failures
in_namespace enospc
test_mount_stop
test_no_such_pool
in_namespace default_pool
test_fsck_superblock
test_size_hint
test_hugepage_note
test_ls_owners
test_mkfs_progress
test_help_texts

echo "edges: $passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ]
