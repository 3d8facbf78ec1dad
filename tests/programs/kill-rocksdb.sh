#!/usr/bin/env bash
# kill-rocksdb.sh -- SIGKILL db_bench (many threads: writers, flush, compaction)
# while it writes, again and again.
#
#   tests/programs/kill-rocksdb.sh MODE [N]
#
# MODE: shim | fuse | native (see lib.sh); N kills (default 10). Each round one
# db_bench process overwrites random keys of the same database (sync=1 on odd rounds,
# small memtables so flushes and compactions run all the time) and gets SIGKILL at a
# random moment 0.5-2.5 s after it started. Then:
#   shim:  `ferrite fsck POOL` must be clean (the process died inside the library)
#   all:   `ldb checkconsistency` says OK, db_bench opens the database and verifies
#          every block checksum (verifychecksum) and reads (readrandom)
# At the end (fuse: after unmounting) `ferrite fsck` must be clean.
# Exit status: 0 all rounds passed, 1 a check failed, 2 set-up error, 77 skipped.
set -euo pipefail
PROG_NAME=kill-rocksdb
. "$(dirname "$0")/lib.sh"

[ $# -ge 1 ] || { sed -n '4,5p' "$0" | sed 's/^# *//' >&2; exit 2; }
mode=$1
rounds=${2:-10}
case "$mode" in shim | fuse | native) ;; *) die "MODE must be shim, fuse or native" ;; esac
[[ "$rounds" =~ ^[0-9]+$ ]] || die "N must be a number"
for t in db_bench ldb; do command -v $t >/dev/null || skip_all "$t is not installed"; done

wpid=""
kr_cleanup() {
	set +e # a failing wait must not skip the unmount
	if [ -n "$wpid" ]; then
		kill -9 "$wpid" $(descendants "$wpid") 2>/dev/null
		wait "$wpid" 2>/dev/null
	fi
	mode_cleanup
}
trap kr_cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM HUP
start=$SECONDS
mode_setup "$mode"

db=$D/rocks-kill
num=100000
common=(--db="$db" --wal_dir="$db" --num=$num --threads=1 --compression_type=none
	--write_buffer_size=$((1 << 20)) --target_file_size_base=$((1 << 20))
	--max_bytes_for_level_base=$((4 << 20)) --level0_file_num_compaction_trigger=2
	--max_background_jobs=4 --statistics=0)

out=$WORK/fill.out
inpool db_bench --benchmarks=fillrandom --use_existing_db=0 "${common[@]}" >"$out" 2>&1 ||
	{ show "$out"; die "the first fillrandom failed"; }

check() {
	local out=$WORK/check.out
	if ! inpool ldb --db="$db" checkconsistency >"$out" 2>&1 || ! grep -qx OK "$out"; then
		show "$out"
		why="ldb checkconsistency did not say OK"
		return 1
	fi
	if ! inpool db_bench --benchmarks=verifychecksum,readrandom --use_existing_db=1 \
		--reads=20000 "${common[@]}" >"$out" 2>&1 || grep -qiE 'corrupt|io error|error:' "$out"; then
		show "$out"
		why="reopening with db_bench (verifychecksum, readrandom) failed"
		return 1
	fi
}

for r in $(seq 1 "$rounds"); do
	why=""
	sync=$((r % 2))
	if [ "$mode" = shim ]; then
		"$FERRITE" run --pool "$POOL" --prefix "$SHIM_PREFIX" -- db_bench --benchmarks=overwrite \
			--use_existing_db=1 --sync=$sync --seed=$r "${common[@]}" --num=$((num * 50)) >"$WORK/run.out" 2>&1 &
	else
		db_bench --benchmarks=overwrite --use_existing_db=1 --sync=$sync --seed=$r "${common[@]}" \
			--num=$((num * 50)) >"$WORK/run.out" 2>&1 &
	fi
	wpid=$!
	sleep "$((RANDOM % 3)).$(printf '%03d' $((RANDOM % 1000)))"
	sleep 0.5
	victim=$(find_prog "$wpid" db_bench || true)
	if [ -z "$victim" ]; then
		wait "$wpid" 2>/dev/null && rc=0 || rc=$?
		wpid=""
		show "$WORK/run.out"
		fail "round $r" "db_bench was not running any more (exit status $rc) when it was to be killed"
		break
	fi
	kill -9 "$victim"
	wait "$wpid" 2>/dev/null || true
	wpid=""
	if grep -qiE 'corrupt|io error|error:' "$WORK/run.out"; then
		show "$WORK/run.out"
		fail "round $r" "db_bench reported an error before the kill"
		break
	fi
	if [ "$mode" = shim ] && ! ferrite_fsck; then
		fail "round $r" "ferrite fsck not clean after killing db_bench"
		break
	fi
	if ! check; then
		fail "round $r" "$why"
		break
	fi
	pass "round $r (sync=$sync): db_bench killed, fsck clean, database consistent and readable"
done

if [ $failures = 0 ] && [ "$mode" != native ]; then
	if [ "$mode" = fuse ]; then
		fuse_umount && pool_wait_free || fail "unmount" "ferrite umount $MNT failed"
	fi
	if ferrite_fsck; then pass "final fsck clean"; else fail "final fsck" "not clean"; fi
fi
summary
say "$mode: $rounds rounds in $((SECONDS - start)) s"
[ $failures = 0 ]
