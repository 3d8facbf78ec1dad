#!/usr/bin/env bash
# kill-sqlite.sh -- SIGKILL sqlite3 in the middle of its commits, again and again.
#
#   tests/programs/kill-sqlite.sh MODE [N]
#
# MODE: shim | fuse | native (see lib.sh); N kills (default 30), alternating between a
# rollback-journal database and a WAL one (locking_mode=EXCLUSIVE). Each round one
# sqlite3 process commits numbered transactions (each inserts row i, rewrites a few
# older rows, deletes one) and prints "ack|i" after each COMMIT; stdout goes to a
# host file, so the last line printed is the last commit sqlite3 acknowledged. At a
# random moment after its first acknowledgement the process gets SIGKILL. Then:
#   shim:  `ferrite fsck POOL` must be clean (the pool is free once the process died)
#   all:   a new sqlite3 opens the database: integrity_check = ok, every row with
#          id <= last ack is there, at most one more (a commit that finished but was
#          not yet acknowledged), and each row's check column matches its id
# At the end (fuse: after unmounting) `ferrite fsck` must be clean.
# Exit status: 0 all rounds passed, 1 a check failed, 2 set-up error.
set -euo pipefail
PROG_NAME=kill-sqlite
. "$(dirname "$0")/lib.sh"

[ $# -ge 1 ] || { sed -n '3,4p' "$0" | sed 's/^# *//' >&2; exit 2; }
mode=$1
rounds=${2:-30}
case "$mode" in shim | fuse | native) ;; *) die "MODE must be shim, fuse or native" ;; esac
[[ "$rounds" =~ ^[0-9]+$ ]] || die "N must be a number"

wpid=""
kill_cleanup() {
	set +e # a failing wait must not skip the unmount
	if [ -n "$wpid" ]; then
		kill -9 "$wpid" $(descendants "$wpid") 2>/dev/null
		wait "$wpid" 2>/dev/null
	fi
	mode_cleanup
}
trap kill_cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM HUP
start=$SECONDS
mode_setup "$mode"

# Both databases use EXCLUSIVE locking (needed for WAL through the shim: no shared
# wal-index across processes; harmless for the rollback journal).
pre="PRAGMA locking_mode=EXCLUSIVE;"
for jm in delete wal; do
	printf '%s\nPRAGMA journal_mode=%s;\nCREATE TABLE t(id INTEGER PRIMARY KEY, chk INTEGER, v BLOB);\n' \
		"$pre" "$jm" >"$WORK/init.sql"
	inpool sqlite3 -batch -bail "$D/kill-$jm.db" <"$WORK/init.sql" >"$WORK/init.out" 2>&1 ||
		{ cat "$WORK/init.out" >&2; die "cannot create $D/kill-$jm.db"; }
done

# The workload for one round: transactions first..first+199999 (never all reached).
workload() {
	awk -v first="$1" -v pre="$pre" 'BEGIN {
		print pre
		print "PRAGMA synchronous=FULL;"
		for (i = first; i < first + 200000; i++) {
			print "BEGIN;"
			printf "INSERT INTO t VALUES(%d, %d, randomblob(%d));\n", i, i * 7 + 3, 512 + (i * 37) % 7000
			if (i > 20) {
				printf "UPDATE t SET v = randomblob(%d) WHERE id IN (%d, %d, %d);\n", 256 + i % 3000, i - 1, int(i / 2), int(i / 3)
			}
			print "COMMIT;"
			printf "SELECT \047ack\047, %d;\n", i
		}
	}'
}

# reopen and check; sets next_id. $1 = db, $2 = last acknowledged id (0 = none)
check_db() {
	local db=$1 acked=$2 out=$WORK/check.out ic n_le mx bad
	printf '%s\nSELECT %s, * FROM pragma_integrity_check;\nSELECT %s, count(*) FROM t WHERE id <= %d;\nSELECT %s, coalesce(max(id), 0) FROM t;\nSELECT %s, count(*) FROM t WHERE chk != id * 7 + 3;\n' \
		"$pre" "'IC'" "'LE'" "$acked" "'MAX'" "'BAD'" >"$WORK/check.sql"
	if ! inpool sqlite3 -batch -bail "$db" <"$WORK/check.sql" >"$out" 2>&1; then
		show "$out"
		why="reopening $db failed"
		return 1
	fi
	ic=$(sed -n 's/^IC|//p' "$out" | tr '\n' ' ')
	n_le=$(sed -n 's/^LE|//p' "$out")
	mx=$(sed -n 's/^MAX|//p' "$out")
	bad=$(sed -n 's/^BAD|//p' "$out")
	if [ "$ic" != "ok " ]; then
		show "$out"
		why="integrity_check: $ic"
		return 1
	fi
	if [ "$n_le" != "$acked" ]; then
		why="only $n_le of the $acked acknowledged rows are there (max id $mx)"
		return 1
	fi
	if [ "$mx" -gt $((acked + 1)) ]; then
		why="max id $mx but only $acked acknowledged: more than one unacknowledged commit"
		return 1
	fi
	if [ "$bad" != 0 ]; then
		why="$bad rows with a wrong check column"
		return 1
	fi
	next_id=$((mx + 1))
	kept=$((mx - acked))
}

declare -A next=([delete]=1 [wal]=1)
for r in $(seq 1 "$rounds"); do
	jm=delete
	[ $((r % 2)) = 0 ] && jm=wal
	db=$D/kill-$jm.db
	acks=$WORK/acks
	: >"$acks"
	why=""
	# Not through `bounded`: the process to kill must be sqlite3 itself.
	if [ "$mode" = shim ]; then
		workload "${next[$jm]}" |
			"$FERRITE" run --pool "$POOL" --prefix "$SHIM_PREFIX" -- sqlite3 -batch -bail "$db" >"$acks" 2>"$WORK/sqlite.err" &
	else
		workload "${next[$jm]}" | sqlite3 -batch -bail "$db" >"$acks" 2>"$WORK/sqlite.err" &
	fi
	wpid=$!
	# wait for the first acknowledgement (the process is really committing), then a
	# random 0-400 ms more
	t0=$SECONDS
	while ! grep -q '^ack|' "$acks"; do
		if ! kill -0 "$wpid" 2>/dev/null; then
			break
		fi
		if [ $((SECONDS - t0)) -gt 60 ]; then
			break
		fi
		sleep 0.02
	done
	sleep "0.$(printf '%03d' $((RANDOM % 400)))"
	victim=$(find_prog "$wpid" sqlite3 || true)
	if [ -z "$victim" ]; then
		wait "$wpid" 2>/dev/null && rc=0 || rc=$?
		wpid=""
		show "$WORK/sqlite.err"
		fail "round $r ($jm)" "sqlite3 was not running (exit status $rc) before the kill"
		break
	fi
	kill -9 "$victim"
	wait "$wpid" 2>/dev/null || true
	wpid=""
	acked=$(sed -n 's/^ack|//p' "$acks" | tail -n 1)
	acked=${acked:-$((next[$jm] - 1))}
	if grep -qv '^ack|\|^exclusive$' "$acks" || [ -s "$WORK/sqlite.err" ]; then
		# anything else sqlite3 said before it died is an error it met
		if grep -qiE 'error|corrupt|malformed|locked|i/o' "$WORK/sqlite.err" "$acks"; then
			show "$WORK/sqlite.err"
			fail "round $r ($jm)" "sqlite3 reported an error before the kill"
			break
		fi
	fi
	if [ "$mode" = shim ] && ! ferrite_fsck; then
		fail "round $r ($jm)" "ferrite fsck not clean after killing sqlite3 (acked $acked)"
		break
	fi
	kept=0
	if ! check_db "$db" "$acked"; then
		fail "round $r ($jm)" "$why"
		break
	fi
	pass "round $r ($jm): killed after commit $acked (+$kept unacknowledged kept), integrity ok, rows present"
	next[$jm]=$next_id
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
