#!/usr/bin/env bash
# cli_test.sh -- end-to-end test of the `ferrite` command on real pools in
# /dev/shm: mkfs, info (text and JSON), cp -r in and out with diff -r, cat,
# ls, fsck, --help of every subcommand, usage errors, refusal to format a
# non-pool file, and clean one-line failures on garbage pools.
# Usage: cli_test.sh PATH/TO/ferrite      (CTest passes the built binary)
set -u

FERRITE=${1:?usage: cli_test.sh PATH/TO/ferrite}
[ -x "$FERRITE" ] || { echo "cli_test.sh: $FERRITE is not executable" >&2; exit 2; }
ulimit -c 0 # a crash must show as an exit status >= 128, not leave a core file
unset FERRITE_POOL

TAG="ferrite-cli-test-$$-$RANDOM"
SHM=/dev/shm/$TAG # every pool of this run starts with this prefix
POOL=$SHM.pool
WORK=$(mktemp -d "${TMPDIR:-/tmp}/$TAG.XXXXXX")
cleanup() {
	rm -rf "$WORK"
	rm -rf "$SHM"*
}
trap cleanup EXIT
trap 'exit 130' INT TERM

passed=0
failed=0

# ---- helpers ------------------------------------------------------------------

. "$(dirname "${BASH_SOURCE[0]}")/cli_lib.sh"

out_lacks() { ! grep -qxE -- "$1" "$WORK/out"; }

# ---- a host tree to copy --------------------------------------------------------

make_host_tree() {
	local src=$WORK/src
	mkdir -p "$src/sub/deep" "$src/empty dir"
	chmod 750 "$src/empty dir"
	echo "hello ferrite" >"$src/a.txt"
	chmod 600 "$src/a.txt"
	printf '#!/bin/sh\necho run\n' >"$src/run.sh"
	chmod 755 "$src/run.sh"
	head -c $((5 * 1024 * 1024 + 123)) /dev/urandom >"$src/sub/big.bin" # > 1 MiB chunks
	echo "deep file" >"$src/sub/deep/c.txt"
	: >"$src/empty"
	echo "hidden" >"$src/.hidden"
	echo "spaced" >"$src/name with space"
	ln -s a.txt "$src/link"
	ln -s sub/deep "$src/dirlink"
	truncate -s 3M "$src/sparse"
	echo "middle" | dd of="$src/sparse" bs=1 seek=1500000 conv=notrunc status=none
}

# ---- cases ----------------------------------------------------------------------

test_mkfs() {
	run mkfs --size 128M "$POOL"
	check "mkfs: exit 0" rc_is 0
	check "mkfs: summary names the pool and mode" all out_has "$POOL" -- out_has "sync"
	check "mkfs: summary shows the size" out_has "134217728"
	check "mkfs: progress on stderr" err_has "[0-9]+%"
	run mkfs "$POOL"
	check "mkfs: existing pool refused without --force" rc_failed_cleanly
	run info "$POOL"
	check "mkfs: refused mkfs left the pool usable" rc_is 0
}

test_mkfs_strict() {
	run mkfs --size 64M --mode strict "$SHM-strict.pool"
	check "mkfs --mode strict: accepted, summary says strict" all rc_is 0 -- out_has "strict"
	run info "$SHM-strict.pool"
	check "info: a strict pool says strict" out_has "mode: +strict"
	run mkfs --size 64M --mode bogus "$SHM-strict.pool"
	check "mkfs --mode bogus: usage error" rc_is 2
}

test_mkfs_tier() {
	local dir=$SHM-backing
	mkdir -p "$dir"
	run mkfs --size 32M --tier "$dir" --writeback direct "$SHM-tier.pool"
	check "mkfs --tier --writeback direct: accepted, summary says so" all rc_is 0 -- \
		out_has "tiered: +cache in front of $dir" -- out_has "O_DIRECT"
	run stats "$SHM-tier.pool"
	check "stats: a direct pool says direct" out_has "^write-back: +direct"
	run mkfs --size 32M --tier "$dir" --force "$SHM-tier.pool"
	check "mkfs --tier: cached write-back by default" all rc_is 0 -- out_has "page cache"
	run stats "$SHM-tier.pool"
	check "stats: a default pool says cached" out_has "^write-back: +cached"
	run mkfs --size 32M --tier "$dir" --writeback bogus --force "$SHM-tier.pool"
	check "mkfs --writeback bogus: usage error" all rc_is 2 -- err_has "cached or direct"
	run mkfs --size 32M --writeback direct --force "$SHM-tier.pool"
	check "mkfs --writeback without --tier: usage error" all rc_is 2 -- err_has "need --tier"
}

test_info() {
	run info "$POOL"
	check "info: exit 0" rc_is 0
	check "info: format version" out_has "^format version: +[0-9]+"
	check "info: uuid" out_has "^uuid: +[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
	check "info: mode" out_has "^mode: +sync"
	check "info: pool size" out_has "^pool size: .*134217728 bytes"
	check "info: used and free with %" all out_has "^used: .*%" -- out_has "^free: .*%"
	check "info: counts" all out_has "^files: +[0-9]+" -- out_has "^directories: +[0-9]+" -- \
		out_has "^symlinks: +[0-9]+"
	check "info: partitions, page table, log, persistence" all out_has "^partitions:" -- \
		out_has "^  L0 " -- out_has "^page table:" -- out_has "^log slots:" -- \
		out_has "^persistence:"
	if grep -qE '^huge pages: +no' "$WORK/out"; then
		check "info: 4 KiB pages point at mkfs --help, no repeated note" all \
			out_has "^huge pages: +no \(4 KiB; .ferrite mkfs --help. says how" -- \
			out_lacks "^note:.*"
	fi

	FERRITE_POOL=$POOL run info
	check "info: pool from \$FERRITE_POOL" all rc_is 0 -- out_has "$POOL"
	run --pool "$POOL" info
	check "info: global --pool before the command" all rc_is 0 -- out_has "$POOL"
}

test_info_json() {
	run info --json --pool "$POOL"
	check "info --json: exit 0" rc_is 0
	if command -v python3 >/dev/null; then
		check "info --json: valid JSON with the right fields" python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
assert d["pool"] == sys.argv[2], d["pool"]
assert d["pool_bytes"] == 134217728, d["pool_bytes"]
assert d["mode"] == "sync"
assert len(d["uuid"]) == 36
for k in ("format_version", "used_bytes", "free_bytes", "files", "directories",
          "symlinks", "partitions", "ppt", "log_slots", "backing", "huge_pages",
          "persistence"):
    assert k in d, k
' "$WORK/out" "$POOL"
	else
		check "info --json: fields" all out_has '"pool_bytes": 134217728' -- out_has '"mode": "sync"'
	fi
}

test_cp_tree() {
	make_host_tree
	run cp -r --pool "$POOL" "$WORK/src" pool:/tree
	check "cp -r host -> pool: exit 0" rc_is 0
	run cp -r --pool "$POOL" pool:/tree "$WORK/out-tree"
	check "cp -r pool -> host: exit 0" rc_is 0
	check "cp -r: round trip is identical (diff -r)" diff -r "$WORK/src" "$WORK/out-tree"
	check "cp -r: symlinks stay symlinks" \
		all test -L "$WORK/out-tree/link" -- test -L "$WORK/out-tree/dirlink"
	check "cp -r: symlink targets" test "$(readlink "$WORK/out-tree/link")" = a.txt
	check "cp -r: mode bits preserved" test "$(cd "$WORK/out-tree" &&
		stat -c %a a.txt run.sh "empty dir" | tr '\n' ' ')" = "600 755 750 "
	check "cp -r: sparse file size kept" test "$(stat -c %s "$WORK/out-tree/sparse")" = 3145728
}

test_cp_forms() {
	run cp --pool "$POOL" "$WORK/src/a.txt" pool:/tree/sub/
	check "cp file into existing pool dir" rc_is 0
	run cat --pool "$POOL" /tree/sub/a.txt
	check "cp file into dir: content" cmp -s "$WORK/out" "$WORK/src/a.txt"

	run cp --pool "$POOL" "$WORK/src/a.txt" "$WORK/src/empty" pool:/tree/sub/deep
	check "cp several files into a pool dir" rc_is 0
	run ls --pool "$POOL" /tree/sub/deep
	check "cp several files: all there" all out_has "^a.txt$" -- out_has "^empty$" -- \
		out_has "^c.txt$"

	run cp --pool "$POOL" pool:/tree/sub/big.bin pool:/copy.bin
	check "cp pool -> pool" rc_is 0
	run cat --pool "$POOL" /copy.bin
	check "cp pool -> pool: content" cmp -s "$WORK/out" "$WORK/src/sub/big.bin"

	mkdir -p "$WORK/into"
	run cp --pool "$POOL" pool:/tree/a.txt "$WORK/into"
	check "cp pool file into existing host dir" cmp -s "$WORK/into/a.txt" "$WORK/src/a.txt"

	run cp --pool "$POOL" "$WORK/src/a.txt" pool:/no-such-dir/
	check "cp file to a missing dir/ refused" all rc_is 1 -- err_one_line "ferrite cp: pool:/no-such-dir/: "
	run cp --pool "$POOL" "$WORK/src/sub" pool:/nodir
	check "cp dir without -r refused" all rc_is 1 -- err_one_line "ferrite cp: $WORK/src/sub: "
	run cp -r --pool "$POOL" pool:/tree pool:/tree/sub
	check "cp -r dir into itself refused" all rc_is 1 -- err_one_line "ferrite cp: "
	run cp --pool "$POOL" "$WORK/src/a.txt" "$WORK/src/empty" pool:/tree/a.txt
	check "cp several sources to a non-dir refused" all rc_is 1 -- err_one_line "ferrite cp: "
}

test_cat() {
	run cat --pool "$POOL" /tree/sub/big.bin
	check "cat: exit 0" rc_is 0
	check "cat: big file identical" cmp -s "$WORK/out" "$WORK/src/sub/big.bin"
	run cat --pool "$POOL" pool:/tree/a.txt /tree/sub/deep/c.txt
	check "cat: several files in order" \
		cmp -s "$WORK/out" <(cat "$WORK/src/a.txt" "$WORK/src/sub/deep/c.txt")
	run cat --pool "$POOL" /tree/no-such-file
	check "cat: missing file gives one error line" \
		all rc_is 1 -- err_one_line "ferrite cat: /tree/no-such-file: "
}

test_ls() {
	run ls --pool "$POOL"
	check "ls: root lists tree and copy.bin" all rc_is 0 -- out_has "^tree$" -- out_has "^copy.bin$"
	run ls --pool "$POOL" /tree
	check "ls: names" all rc_is 0 -- out_has "^a.txt$" -- out_has "^sub$" -- out_has "^link$" \
		-- out_has "^name with space$" -- out_has "^empty dir$"
	check "ls: names sorted" cmp -s "$WORK/out" <(LC_ALL=C sort "$WORK/out")
	check "ls: hidden names need -a" out_lacks "\.hidden"
	run ls -a --pool "$POOL" /tree
	check "ls -a: . .. and hidden" all out_has "^\.$" -- out_has "^\.\.$" -- out_has "^\.hidden$"
	run ls -l --pool "$POOL" /tree
	check "ls -l: modes, symlink target" all rc_is 0 -- out_has "^-rw------- .* a.txt$" -- \
		out_has "^-rwxr-xr-x .* run.sh$" -- out_has "^d[-rwx]{9} .* sub$" -- \
		out_has "^l[-rwx]{9} .* link -> a.txt$"
	check "ls -l: size of a file" out_has " $(stat -c %s "$WORK/src/a.txt") [0-9-]+ [0-9:]+ a.txt$"
	run ls -R --pool "$POOL" /tree
	check "ls -R: subdirectories" all rc_is 0 -- out_has "^/tree/sub:$" -- \
		out_has "^/tree/sub/deep:$" -- out_has "^c.txt$"
	run ls --pool "$POOL" /tree/no-such-dir
	check "ls: missing path gives one error line" \
		all rc_is 1 -- err_one_line "ferrite ls: /tree/no-such-dir: "
}

test_fsck() {
	run fsck --pool "$POOL"
	check "fsck: clean pool exits 0" rc_is 0
	check "fsck: summary says clean" out_has "clean"
	run fsck -n "$POOL"
	check "fsck -n: exits 0" rc_is 0
	run fsck --online "$POOL"
	check "fsck --online of a pool nobody holds: clean" all rc_is 0 -- out_has "clean"
	# a `ferrite run` shell holds the pool (a descriptor in it) until told
	local ready="$WORK/online-ready" stop="$WORK/online-stop"
	rm -f "$ready" "$stop"
	"$FERRITE" run --pool "$POOL" -- sh -c "exec 3>/pm/online-held; echo held >&3;
		touch '$ready'; while [ ! -e '$stop' ]; do sleep 0.05; done" &
	local holder=$!
	local i
	for i in $(seq 200); do
		[ -e "$ready" ] && break
		sleep 0.05
	done
	run fsck "$POOL"
	check "fsck of a pool in use: refused (8), pointing at --online" \
		all rc_is 8 -- err_has "in use by" -- err_has "--online checks a pool that programs share"
	run fsck --online "$POOL"
	check "fsck --online of a pool in use: clean" all rc_is 0 -- out_has "clean"
	run fsck --online -y "$POOL"
	check "fsck --online -y: usage error (16)" rc_is 16
	touch "$stop"
	wait "$holder"
	check "the holder ran to its end" test $? -eq 0
}

test_help() {
	local cmd
	run --help
	check "ferrite --help" all rc_is 0 -- out_has "^Usage: ferrite"
	for cmd in mkfs info fsck ls cat cp; do
		check "ferrite --help lists $cmd" out_has "^  $cmd "
	done
	run --version
	check "ferrite --version" all rc_is 0 -- out_has "^ferrite [0-9]"
	for cmd in mkfs info fsck ls cat cp; do
		run "$cmd" --help
		check "$cmd --help" all rc_is 0 -- out_has "^Usage: ferrite $cmd"
		run help "$cmd"
		check "help $cmd" all rc_is 0 -- out_has "^Usage: ferrite $cmd"
	done
	run help
	check "help" all rc_is 0 -- out_has "^Usage: ferrite"
}

# usage_error WANT_RC ARGS...: bad command line gives WANT_RC and a message.
usage_error() {
	local want=$1
	shift
	run "$@"
	check "bad usage: ferrite $* -> exit $want" all rc_is "$want" -- err_has "ferrite"
}

test_usage_errors() {
	local p=$SHM-never-made.pool
	usage_error 2
	usage_error 2 no-such-command
	usage_error 2 mkfs --size 12Q "$p"
	usage_error 2 mkfs --size -5 "$p"
	usage_error 2 mkfs --mode fast "$p"
	usage_error 2 mkfs --size
	usage_error 2 mkfs "$p" "$p-2"
	usage_error 2 info --no-such-option "$POOL"
	usage_error 16 fsck --no-such-option "$POOL"
	usage_error 16 fsck -y -n "$POOL"
	usage_error 2 ls -Z --pool "$POOL"
	usage_error 2 cat --pool "$POOL"
	usage_error 2 cp --pool "$POOL" pool:/a
	usage_error 2 cp --pool "$POOL" "$WORK/a" "$WORK/b"
	check "bad usage: no pool was created" test ! -e "$p"
}

test_refuse_non_pool() {
	local f=$SHM-precious.dat
	echo "precious data, not a pool" >"$f"
	cp "$f" "$WORK/precious.orig"
	run mkfs --size 64M "$f"
	check "mkfs: non-empty non-pool file refused" rc_failed_cleanly
	check "mkfs: refusal is one line" err_one_line "ferrite mkfs: $f: "
	check "mkfs: refused file untouched" cmp -s "$f" "$WORK/precious.orig"
	run mkfs --size 64M --force "$f"
	check "mkfs --force: formats it" rc_is 0
}

# garbage_pool NAME FILE: every command fails cleanly on FILE.
garbage_pool() {
	local name=$1 f=$2
	run info "$f"
	check "info on $name: fails, no crash" rc_failed_cleanly
	check "info on $name: one-line message" err_one_line "ferrite info: $f: "
	run ls --pool "$f" /
	check "ls on $name: fails cleanly with one line" \
		all rc_failed_cleanly -- err_one_line "ferrite ls: $f: "
	run fsck "$f"
	check "fsck on $name: exit 4 or 8, no crash" test "$RC" -eq 4 -o "$RC" -eq 8 -o "$RC" -eq 12
}

test_garbage_pools() {
	head -c $((4 * 1024 * 1024)) /dev/urandom >"$SHM-random.pool"
	garbage_pool "random bytes" "$SHM-random.pool"
	head -c 65536 "$POOL" >"$SHM-truncated.pool"
	garbage_pool "a truncated pool" "$SHM-truncated.pool"
	: >"$SHM-empty.pool"
	garbage_pool "an empty file" "$SHM-empty.pool"
	run info "$SHM-does-not-exist.pool"
	check "info on a missing pool: one line" \
		all rc_failed_cleanly -- err_one_line "ferrite info: $SHM-does-not-exist.pool: "
	check "no core file left" test -z "$(ls core* "$WORK"/core* 2>/dev/null)"
}

test_final_fsck() {
	run fsck "$POOL"
	check "fsck after all the copies: clean" rc_is 0
}

test_help
test_usage_errors
test_mkfs
test_mkfs_strict
test_mkfs_tier
test_info
test_info_json
test_cp_tree
test_cp_forms
test_cat
test_ls
test_fsck
test_refuse_non_pool
test_garbage_pools
test_final_fsck

echo "cli: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
