#!/usr/bin/env bash
# postgres.sh -- PostgreSQL on a pm pool through `ferrite run`: the postmaster forks a
# process per connection and a few of its own, all on one pool.
#
#   tests/programs/postgres.sh [SECONDS]     (pgbench run time, default 20)
#
# As the postgres user: initdb in /pm, start (socket in a private directory), pgbench
# -i -s 5, pgbench -c 4 -T SECONDS with no failed transaction, amcheck over every
# btree index (heapallindexed), stop; then `ferrite fsck` must be clean. Prints the
# tps. Needs root (to become postgres) and PostgreSQL with contrib; 77 otherwise.
set -euo pipefail
PROG_NAME=postgres
. "$(dirname "$0")/lib.sh"

secs=${1:-20}
[ "$(id -u)" = 0 ] || skip_all "needs root (runs the server as the postgres user)"
id postgres >/dev/null 2>&1 || skip_all "no postgres user (scripts/deps.sh installs postgresql)"
pgbin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)
[ -n "$pgbin" ] && [ -x "$pgbin/initdb" ] && [ -x "$pgbin/pgbench" ] ||
	skip_all "PostgreSQL is not installed (scripts/deps.sh installs it)"
[ -n "${PROG_TIER:-}" ] && skip_all "tiered pools are held by one process"

sock=""
stop_server() {
	[ -n "$sock" ] || return 0
	su postgres -s /bin/bash -c "cd /tmp && '$FERRITE' run --pool '$POOL' -- '$pgbin/pg_ctl' -D /pm/data -m fast -w stop" \
		>/dev/null 2>&1 || true
}
cleanup() {
	stop_server
	[ -n "$sock" ] && rm -rf "$sock"
	mode_cleanup
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM HUP
start=$SECONDS
mode_setup shim
chmod 755 "$WORK"

# the pool is the postgres user's; /pm/data is made for it
inpool bash -c 'mkdir /pm/data && chown postgres:postgres /pm/data && chmod 700 /pm/data' ||
	die "cannot make /pm/data"
chown postgres "$POOL"
sock=$(mktemp -d /tmp/ferrite-pg.XXXXXX)
chown postgres "$sock"
port=$((20000 + $$ % 20000))
as_pg() { # CMD: a shell command run by postgres, in /tmp, with a time limit
	bounded su postgres -s /bin/bash -c "cd /tmp && $*"
}
in_pool_pg() { # the same through ferrite run
	as_pg "'$FERRITE' run --pool '$POOL' -- $*"
}
psql_q() {
	as_pg "'$pgbin/psql' -h '$sock' -p $port -X -q -At -v ON_ERROR_STOP=1 postgres $*"
}


t_initdb() {
	in_pool_pg "'$pgbin/initdb' -D /pm/data -N -A trust" >"$WORK/initdb.out" 2>&1 ||
		{ show "$WORK/initdb.out"; why="initdb failed"; return 1; }
	in_pool_pg "'$pgbin/pg_ctl' -D /pm/data -l '$sock/log' -w -t 120 \
		-o \"-k $sock -p $port -c listen_addresses='' -c fsync=on\" start" >"$WORK/start.out" 2>&1 ||
		{ show "$WORK/start.out"; show "$sock/log"; why="pg_ctl start failed"; return 1; }
}

t_pgbench() {
	as_pg "'$pgbin/pgbench' -h '$sock' -p $port -i -s 5 -q postgres" >"$WORK/init.out" 2>&1 ||
		{ show "$WORK/init.out"; why="pgbench -i failed"; return 1; }
	as_pg "'$pgbin/pgbench' -h '$sock' -p $port -c 4 -j 2 -T $secs postgres" >"$WORK/bench.out" 2>&1 ||
		{ show "$WORK/bench.out"; why="pgbench failed"; return 1; }
	grep -q "number of failed transactions: 0 " "$WORK/bench.out" ||
		{ show "$WORK/bench.out"; why="pgbench reports failed transactions"; return 1; }
	say "pgbench: $(grep -E '^tps' "$WORK/bench.out")"
	local n
	n=$(psql_q "-c 'SELECT count(*) FROM pgbench_accounts'") || { why="count failed"; return 1; }
	[ "$n" = 500000 ] || { why="pgbench_accounts has $n rows, want 500000"; return 1; }
}

t_amcheck() {
	local out
	out=$(psql_q "-c 'CREATE EXTENSION IF NOT EXISTS amcheck' -c \"SELECT count(*) FROM (SELECT bt_index_check(c.oid, true) FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid JOIN pg_am a ON a.oid = c.relam WHERE a.amname = 'btree' AND c.relpersistence <> 't') s\"" 2>&1) ||
		{ echo "$out" >"$WORK/amcheck.out"; show "$WORK/amcheck.out"; why="amcheck found corruption"; return 1; }
	say "amcheck: $out btree indexes checked"
}

t_stop() {
	in_pool_pg "'$pgbin/pg_ctl' -D /pm/data -m fast -w stop" >"$WORK/stop.out" 2>&1 ||
		{ show "$WORK/stop.out"; why="pg_ctl stop failed"; return 1; }
	sock_keep=$sock
	sock="" # stopped
	rm -rf "$sock_keep"
	pool_wait_free || { why="processes still hold the pool"; return 1; }
	ferrite_fsck || { show "$WORK/fsck.out"; why="ferrite fsck $POOL is not clean"; return 1; }
}

run "initdb and start in /pm" t_initdb
run "pgbench -i -s 5, pgbench -c 4 -T $secs" t_pgbench
run "amcheck of every btree index" t_amcheck
run "stop, fsck clean" t_stop
summary
say "done in $((SECONDS - start)) s"
[ $failures = 0 ]
