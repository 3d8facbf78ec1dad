#!/usr/bin/env bash
# run.sh -- real programs on Ferrite vs the kernel, side by side in one run.
#
#   bench/programs/run.sh [--quick] [--runs N] [--json FILE] [--only LIST] [--configs LIST]
#                         [--rocksdb-workloads LIST]
#
# LIST (comma separated, default all): rocksdb, sqlite, fio, postmark, pgbench, make,
# procmeta.
#   rocksdb   db_bench fillrandom sync=1 and sync=0, overwrite, readrandom:
#             ferrite via the shim (`ferrite run`) vs tmpfs vs ext4 (loop over /dev/shm),
#             and a tiered pool (`ferrite run` on a pool made with `mkfs --tier`, its
#             backing directory on the machine's disk) vs ext4-disk (a directory on the
#             same disk); --rocksdb-workloads picks among fillrandom-sync1,
#             fillrandom-sync0, overwrite, readrandom
#   sqlite    autocommit inserts, synchronous=FULL, WAL and rollback journal
#             (locking_mode=EXCLUSIVE everywhere): shim vs tmpfs vs ext4
#   fio       4 KiB randread, randwrite, append (psync, 1 and 2 jobs): ferrite's FUSE
#             mount vs a libfuse passthrough of tmpfs (passthrough_ll.c, the floor
#             cost of FUSE) vs tmpfs directly
#   postmark  small files: shim vs FUSE mount vs passthrough vs tmpfs vs ext4
#   pgbench   PostgreSQL (as the postgres user; root only): pgbench -c 4 on a database
#             in the shim (the server and its backends on one pool), the FUSE mount,
#             tmpfs, ext4
#   make      make -j2 of a generated C project (80 files): shim, fuse, tmpfs, ext4;
#             builds per minute of wall time
#   procmeta  create, open+close and stat by 1 and 2 forked processes in one
#             directory of 1 000 and of 50 000 files (bench/programs/metaproc.c):
#             shim vs tmpfs
# --configs LIST keeps only those columns (shim, fuse, tmpfs, ext4, passthrough, tier,
# ext4-disk); the others say "skipped". Every cell is the median of --runs samples (3;
# --quick: 1 and small sizes); the
# configurations of a workload take turns in an order that rotates every run. Ratios
# divide ferrite's throughput by the peer's (> 1: ferrite is faster); the target
# column only annotates, nothing fails on a number. Progress goes to stderr, tables
# to stdout, every sample to --json FILE.
#
# Environment: FERRITE=PATH (the ferrite command), PT_OPTS (extra options for the
# passthrough, to match ferrite's FUSE settings), BENCH_POOL_SIZE (default 4G, quick 2G),
# BENCH_POOL (default /dev/shm/ferrite-progbench-PID.pool; formatted and removed),
# BENCH_DISK_DIR (default /var/tmp/ferrite-progbench-PID: on the machine's disk, ext4; the
# ext4-disk column and the tier's backing directory; removed), BENCH_TIER_POOL_SIZE
# (default 256M, quick 64M; the tiered pool /dev/shm/ferrite-progbench-PID-tier.pool).
# ext4 needs root; without it (or without `ferrite run` / `ferrite mount`) the
# affected columns say "skipped" and why.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)

say() { echo "$(date +%T) bench-programs: $*" >&2; }
die() {
	say "error: $*"
	exit 2
}
usage() {
	sed -n '3,4p' "$0" | sed 's/^# *//' >&2
	exit 2
}

quick=0
runs=""
json=""
only=rocksdb,sqlite,fio,postmark,pgbench,make,procmeta
configs=shim,fuse,tmpfs,ext4,passthrough,tier,ext4-disk
rocks_wl=fillrandom-sync1,fillrandom-sync0,overwrite,readrandom
while [ $# -gt 0 ]; do
	case "$1" in
	--configs) configs=${2:?}; shift ;;
	--configs=*) configs=${1#*=} ;;
	--rocksdb-workloads) rocks_wl=${2:?}; shift ;;
	--rocksdb-workloads=*) rocks_wl=${1#*=} ;;
	--quick) quick=1 ;;
	--runs) runs=${2:?}; shift ;;
	--runs=*) runs=${1#*=} ;;
	--json) json=${2:?}; shift ;;
	--json=*) json=${1#*=} ;;
	--only) only=${2:?}; shift ;;
	--only=*) only=${1#*=} ;;
	*) usage ;;
	esac
	shift
done
wants() { case ",$only," in *,$1,*) return 0 ;; esac; return 1; }
selected() { case ",$configs," in *,$1,*) return 0 ;; esac; return 1; }
[ -n "$json" ] && json=$(realpath -m "$json")

if [ $quick = 1 ]; then
	runs=${runs:-1}
	rocks_sync_num=2000 rocks_num=50000 sql_n=2000 fio_size=32M fio_time=1 pm_files=2000 pm_tx=20000
	pg_secs=5 meta_sizes="1000 5000"
	pool_size=${BENCH_POOL_SIZE:-2G}
	tier_size=${BENCH_TIER_POOL_SIZE:-64M}
else
	runs=${runs:-3}
	rocks_sync_num=20000 rocks_num=500000 sql_n=20000 fio_size=256M fio_time=3 pm_files=20000 pm_tx=200000
	pg_secs=20 meta_sizes="1000 50000"
	pool_size=${BENCH_POOL_SIZE:-4G}
	tier_size=${BENCH_TIER_POOL_SIZE:-256M}
fi
[[ "$runs" =~ ^[1-9][0-9]*$ ]] || die "--runs needs a positive number"

for c in "${FERRITE:-}" "$repo/build/tools/ferrite" "$(command -v ferrite 2>/dev/null)"; do
	if [ -n "$c" ] && [ -x "$c" ]; then FERRITE=$(realpath "$c"); break; fi
done # absolute: the script changes directory before it runs ferrite
FERRITE=${FERRITE:-}
for t in db_bench sqlite3 fio postmark gcc pkg-config; do
	command -v $t >/dev/null || die "$t is not installed (scripts/deps.sh installs it)"
done

# ---- set-up and the cleanup that undoes it ------------------------------------------
WORK=$(mktemp -d /tmp/ferrite-progbench.XXXXXX)
cd "$WORK"
TMPD=/dev/shm/ferrite-progbench-$$        # tmpfs column, and the passthrough's source
POOL=${BENCH_POOL:-/dev/shm/ferrite-progbench-$$.pool} # formatted, and removed at the end
FMNT=/tmp/ferrite-progbench-$$.fuse       # ferrite mount
PMNT=/tmp/ferrite-progbench-$$.pt         # passthrough mount
EMNT=/tmp/ferrite-progbench-$$.ext4
EIMG=""
ELOOP=""
emounted=0
DISKD=${BENCH_DISK_DIR:-/var/tmp/ferrite-progbench-$$} # ext4-disk and the tier's backing
TPOOL=/dev/shm/ferrite-progbench-$$-tier.pool
made_diskd=0

unmount_fuse() { # DIR
	mountpoint -q "$1" 2>/dev/null || return 0
	if [ "$1" = "$FMNT" ]; then
		"$FERRITE" umount "$1" >/dev/null 2>&1 || fusermount3 -u "$1" 2>/dev/null || fusermount3 -uz "$1"
	else
		fusermount3 -u "$1" 2>/dev/null || fusermount3 -uz "$1"
	fi
	# (ferrite umount returns once its daemon has closed the pool, so the shim
	# can open it right after)
	local i
	for i in $(seq 100); do
		mountpoint -q "$1" || break
		sleep 0.05
	done
}
cleanup() {
	set +e
	cd /
	unmount_fuse "$FMNT"
	unmount_fuse "$PMNT"
	rmdir "$FMNT" "$PMNT" 2>/dev/null
	if [ $emounted = 1 ]; then umount "$EMNT" 2>/dev/null || umount -l "$EMNT"; fi
	[ -n "$ELOOP" ] && losetup -d "$ELOOP"
	[ -n "$EIMG" ] && rm -f "$EIMG"
	rmdir "$EMNT" 2>/dev/null
	rm -rf "$TMPD" "$WORK"
	rm -f "$POOL" "$TPOOL"
	[ $made_diskd = 1 ] && rm -rf "$DISKD"
	return 0
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM HUP

declare -A skip=() # config -> why it is skipped
have_shim=0
have_fuse=0
if [ -z "$FERRITE" ]; then
	skip[shim]="ferrite command not found (set FERRITE=PATH)"
	skip[fuse]=${skip[shim]}
else
	if "$FERRITE" help run >/dev/null 2>&1 || "$FERRITE" run --help >/dev/null 2>&1; then have_shim=1; else skip[shim]="$FERRITE has no 'run'"; fi
	if "$FERRITE" help mount >/dev/null 2>&1 || "$FERRITE" mount --help >/dev/null 2>&1; then have_fuse=1; else skip[fuse]="$FERRITE has no 'mount'"; fi
fi
mkdir -p "$TMPD/bench"
if { [ $have_shim = 1 ] && selected shim; } || { [ $have_fuse = 1 ] && selected fuse; }; then
	say "ferrite: $FERRITE, pool $POOL ($pool_size)"
	if ! "$FERRITE" mkfs --size "$pool_size" "$POOL" >"$WORK/mkfs.out" 2>&1; then
		cat "$WORK/mkfs.out" >&2
		die "ferrite mkfs failed"
	fi
	"$FERRITE" info "$POOL" 2>/dev/null | sed -n 's/^backing: *//p' | sed 's/^/  pool backing: /' >&2 || true
fi
for c in shim fuse tmpfs ext4 passthrough tier ext4-disk; do
	selected "$c" || skip[$c]="not selected (--configs)"
done

setup_ext4() {
	local out
	if [ "$(id -u)" != 0 ]; then skip[ext4]="not root (loop devices and mounts need root)"; return; fi
	for t in mkfs.ext4 losetup mount umount fstrim; do
		command -v $t >/dev/null || { skip[ext4]="$t not installed"; return; }
	done
	EIMG=$(mktemp /dev/shm/ferrite-progbench-ext4.XXXXXX.img)
	mkdir -p "$EMNT"
	truncate -s $((quick ? 2 << 30 : 4 << 30)) "$EIMG"
	# inode tables and journal initialised now: no lazy-init thread during the bench
	if ! out=$(mkfs.ext4 -q -F -b 4096 -E lazy_itable_init=0,lazy_journal_init=0 "$EIMG" 2>&1); then
		skip[ext4]="mkfs.ext4 failed: $out"; return
	fi
	if ! ELOOP=$(losetup --find --show "$EIMG" 2>&1); then
		skip[ext4]="losetup failed: $ELOOP"; ELOOP=""; return
	fi
	if ! out=$(mount -t ext4 "$ELOOP" "$EMNT" 2>&1); then
		skip[ext4]="mount failed: $out"; return
	fi
	emounted=1
	mkdir -p "$EMNT/bench"
	say "ext4: $ELOOP on $EMNT"
}
if selected ext4 && { wants rocksdb || wants sqlite || wants postmark || wants pgbench || wants make; }; then setup_ext4; fi

# The machine's disk: ext4-disk works in a plain directory of it, the tiered pool (in
# /dev/shm) caches another one.
setup_disk() {
	local out fstype
	if [ -e "$DISKD" ]; then
		skip[ext4-disk]="$DISKD exists already (set BENCH_DISK_DIR)"
		skip[tier]=${skip[ext4-disk]}
		return
	fi
	mkdir -p "$DISKD/ext4/bench" "$DISKD/tier-backing" && made_diskd=1
	fstype=$(stat -f -c %T "$DISKD" 2>/dev/null)
	if [ "$fstype" != ext2/ext3 ]; then # what stat calls ext4
		skip[ext4-disk]="$DISKD is on ${fstype:-?}, not ext4 (set BENCH_DISK_DIR)"
		skip[tier]=${skip[ext4-disk]}
		return
	fi
	say "disk: $DISKD on $(df --output=source "$DISKD" | tail -n 1) ($(findmnt -n -o FSTYPE,OPTIONS -T "$DISKD" 2>/dev/null | cut -c1-80))"
	if [ -n "${skip[tier]:-}" ]; then return; fi
	if [ $have_shim = 0 ]; then skip[tier]=${skip[shim]}; return; fi
	if ! out=$("$FERRITE" mkfs --tier "$DISKD/tier-backing" --size "$tier_size" --force "$TPOOL" 2>&1); then
		skip[tier]="ferrite mkfs --tier failed: $(echo "$out" | tail -n 1)"
		return
	fi
	say "tier: $TPOOL ($tier_size) caching $DISKD/tier-backing"
}
if wants rocksdb && { selected tier || selected ext4-disk; }; then setup_disk; fi

PT=""
setup_passthrough() {
	local src=$here/passthrough_ll.c
	PT=$WORK/passthrough_ll
	# shellcheck disable=SC2046
	if ! gcc -std=gnu11 -O2 -Wall -Werror "$src" $(pkg-config --cflags --libs fuse3) -o "$PT" 2>"$WORK/pt-build.out"; then
		cat "$WORK/pt-build.out" >&2
		skip[passthrough]="passthrough_ll.c does not build"; return
	fi
	mkdir -p "$TMPD/pt-src" "$PMNT"
	if ! "$PT" ${PT_OPTS:-} "$TMPD/pt-src" "$PMNT" 2>"$WORK/pt.out"; then
		skip[passthrough]="passthrough mount failed: $(head -c 200 "$WORK/pt.out")"; return
	fi
	say "passthrough: $TMPD/pt-src on $PMNT ${PT_OPTS:-}"
}
if selected passthrough && { wants fio || wants postmark; }; then setup_passthrough; fi

# ---- configurations: where each works and how a program is started --------------
# Shim and FUSE share the pool, which one process at a time may open: the FUSE mount
# only exists while a fuse sample runs.
cfg_dir() {
	case "$1" in
	shim) echo /pm/bench ;;
	fuse) echo "$FMNT/bench" ;;
	tmpfs) echo "$TMPD/bench" ;;
	ext4) echo "$EMNT/bench" ;;
	passthrough) echo "$PMNT/bench" ;;
	tier) echo /pm/bench ;;
	ext4-disk) echo "$DISKD/ext4/bench" ;;
	esac
}
cfg_run() {
	local c=$1
	shift
	if [ "$c" = shim ]; then
		timeout -k 10 1800 "$FERRITE" run --pool "$POOL" --prefix /pm -- "$@"
	elif [ "$c" = tier ]; then
		# the program runs as a child; `ferrite run` drains the pool after it exits
		timeout -k 10 1800 "$FERRITE" run --pool "$TPOOL" --prefix /pm -- "$@"
	else
		timeout -k 10 1800 "$@"
	fi
}
cfg_enter() { # make the configuration usable; 1 = skipped
	local c=$1
	[ -n "${skip[$c]:-}" ] && return 1
	if [ "$c" = fuse ]; then
		if ! mountpoint -q "$FMNT"; then
			mkdir -p "$FMNT"
			if ! "$FERRITE" mount "$POOL" "$FMNT" >"$WORK/mount.out" 2>&1; then
				skip[fuse]="ferrite mount failed: $(head -c 200 "$WORK/mount.out")"
				return 1
			fi
			local i
			for i in $(seq 50); do mountpoint -q "$FMNT" && break; sleep 0.1; done
		fi
	else
		unmount_fuse "$FMNT"
	fi
	cfg_run "$c" mkdir -p "$(cfg_dir "$c")"
}
cfg_settle() { # untimed, after each sample: ext4 writes back and trims
	if [ "$1" = ext4 ]; then
		sync -f "$EMNT" 2>/dev/null || sync
		fstrim "$EMNT" 2>/dev/null || true
	elif [ "$1" = ext4-disk ] || [ "$1" = tier ]; then
		# (the tier is drained by `ferrite run` already; no fstrim on the real disk)
		sync -f "$DISKD" 2>/dev/null || sync
	fi
}

# ---- samples ------------------------------------------------------------------------
# $WORK/samples: group<TAB>workload<TAB>config<TAB>value (throughput, higher = better)
errors=()
record() { printf '%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$4" >>"$WORK/samples"; }
failed() { # group workload config why
	errors+=("$1/$2/$3: $4")
	say "FAILED $1/$2/$3: $4"
	printf '%s\t%s\t%s\tFAILED\n' "$1" "$2" "$3" >>"$WORK/samples"
}
# configs in turn, rotated by run number, reversed on odd runs
rotate() { # run configs...
	local r=$1 n i
	shift
	local a=("$@")
	n=${#a[@]}
	local out=()
	for ((i = 0; i < n; i++)); do out+=("${a[$(((i + r) % n))]}"); done
	if ((r % 2)); then
		for ((i = n - 1; i >= 0; i--)); do echo "${out[$i]}"; done
	else
		printf '%s\n' "${out[@]}"
	fi
}
now_ns() { date +%s%N; }

# ---- rocksdb ------------------------------------------------------------------------
# db_bench's own figure (ops/sec of the benchmark loop, not process start-up)
rocks_one() { # config workload
	local c=$1 w=$2 dir out v
	dir=$(cfg_dir "$c")/rocksdb
	local common=(--db="$dir" --wal_dir="$dir" --threads=1 --seed=42 --compression_type=none
		--value_size=100 --key_size=16 --statistics=0 --histogram=0)
	local args
	case "$w" in
	fillrandom-sync1) args=(--benchmarks=fillrandom --sync=1 --num=$rocks_sync_num --use_existing_db=0) ;;
	fillrandom-sync0) args=(--benchmarks=fillrandom --sync=0 --num=$rocks_num --use_existing_db=0) ;;
	overwrite) args=(--benchmarks=overwrite --num=$rocks_num --use_existing_db=1) ;;
	readrandom) args=(--benchmarks=readrandom --num=$rocks_num --use_existing_db=1) ;;
	esac
	out=$WORK/rocks-$c-$w.out
	local rc=0
	cfg_run "$c" db_bench "${common[@]}" "${args[@]}" >"$out" 2>&1 || rc=$?
	if [ $rc != 0 ]; then
		failed rocksdb "$w" "$c" "db_bench exited with status $rc ($(tail -n 1 "$out"))"
		return
	fi
	v=$(awk '$2 == ":" && $4 == "micros/op" { print $5 }' "$out" | tail -n 1)
	if [ -z "$v" ] || grep -qiE 'corrupt|io error' "$out"; then
		failed rocksdb "$w" "$c" "no result ($(grep -iE -m1 'corrupt|error' "$out" || tail -n 1 "$out"))"
		return
	fi
	record rocksdb "$w" "$c" "$v"
	say "  rocksdb $w $c: $v ops/s"
}
bench_rocksdb() {
	local r c w
	for r in $(seq 1 "$runs"); do
		say "rocksdb run $r/$runs"
		for c in $(rotate "$r" shim tmpfs ext4 tier ext4-disk); do
			cfg_enter "$c" || continue
			for w in fillrandom-sync1 fillrandom-sync0 overwrite readrandom; do
				case ",$rocks_wl," in *,$w,*) ;; *) continue ;; esac
				rocks_one "$c" "$w"
				cfg_settle "$c"
			done
			cfg_run "$c" rm -rf "$(cfg_dir "$c")/rocksdb"
			cfg_settle "$c"
		done
	done
}

# ---- sqlite -------------------------------------------------------------------------
# inserts/s between two timestamps taken inside the sqlite3 process
make_sql() { # journal_mode
	awk -v n="$sql_n" -v jm="$1" 'BEGIN {
		print "PRAGMA locking_mode=EXCLUSIVE;"
		print "PRAGMA journal_mode=" jm ";"
		print "PRAGMA synchronous=FULL;"
		print "CREATE TABLE t(id INTEGER PRIMARY KEY, k INTEGER, v TEXT);"
		print "SELECT \047T0\047, (julianday(\047now\047) - 2440587.5) * 86400.0;"
		for (i = 1; i <= n; i++)
			printf "INSERT INTO t(k, v) VALUES(%d, \047%s-%08d\047);\n", (i * 7919) % 100003, "value-of-about-one-hundred-bytes-value-of-about-one-hundred-bytes-value-of-about-one-hun", i
		print "SELECT \047T1\047, (julianday(\047now\047) - 2440587.5) * 86400.0;"
		print "SELECT \047N\047, count(*) FROM t;"
	}' >"$WORK/sql-$1.sql"
}
sqlite_one() { # config journal_mode
	local c=$1 jm=$2 db out v
	db=$(cfg_dir "$c")/bench.db
	out=$WORK/sqlite-$c-$jm.out
	cfg_run "$c" rm -f "$db" "$db-wal" "$db-journal" "$db-shm" || true
	local rc=0
	cfg_run "$c" sqlite3 -batch -bail "$db" <"$WORK/sql-$jm.sql" >"$out" 2>&1 || rc=$?
	if [ $rc != 0 ]; then
		failed sqlite "insert-$jm" "$c" "sqlite3 exited with status $rc ($(tail -n 1 "$out"))"
		return
	fi
	if ! grep -qx "N|$sql_n" "$out"; then
		failed sqlite "insert-$jm" "$c" "row count wrong: $(grep '^N|' "$out")"
		return
	fi
	v=$(awk -F'|' -v n="$sql_n" '$1 == "T0" { t0 = $2 } $1 == "T1" { t1 = $2 } END { if (t1 > t0) printf "%.0f\n", n / (t1 - t0) }' "$out")
	[ -n "$v" ] || { failed sqlite "insert-$jm" "$c" "no timestamps"; return; }
	record sqlite "insert-$jm" "$c" "$v"
	say "  sqlite insert-$jm $c: $v inserts/s"
	cfg_run "$c" rm -f "$db" "$db-wal" "$db-journal" || true
}
bench_sqlite() {
	local r c jm
	make_sql wal
	make_sql delete
	for r in $(seq 1 "$runs"); do
		say "sqlite run $r/$runs"
		for jm in wal delete; do
			for c in $(rotate "$r" shim tmpfs ext4); do
				cfg_enter "$c" || continue
				sqlite_one "$c" "$jm"
				cfg_settle "$c"
			done
		done
	done
}

# ---- fio ----------------------------------------------------------------------------
# IOPS from fio's terse output (field 8 read, 49 write; one group)
fio_one() { # config workload jobs
	local c=$1 w=$2 j=$3 dir out v rc=0 f
	dir=$(cfg_dir "$c")/fio
	cfg_run "$c" mkdir -p "$dir"
	local base=(--directory="$dir" --thread --ioengine=psync --bs=4k --numjobs="$j"
		--group_reporting --minimal --randrepeat=1)
	local args
	case "$w" in
	randread) args=(--name=rnd --rw=randread --size=$fio_size --time_based --runtime=$fio_time --ramp_time=1) ;;
	randwrite) args=(--name=rnd --rw=randwrite --size=$fio_size --time_based --runtime=$fio_time --ramp_time=1) ;;
	append)
		# a new file per job that grows by 4 KiB writes (no preallocation)
		for f in $(seq 0 $((j - 1))); do cfg_run "$c" rm -f "$dir/app.$f.0"; done
		args=(--name=app --rw=write --size=$fio_size --fallocate=none --file_append=1)
		;;
	esac
	out=$WORK/fio-$c-$w-$j.out
	cfg_run "$c" fio "${base[@]}" "${args[@]}" >"$out" 2>&1 || rc=$?
	if [ $rc != 0 ]; then
		failed fio "$w-j$j" "$c" "fio exited with status $rc ($(grep -v '^3;' "$out" | tail -n 1))"
		return
	fi
	case "$w" in
	randread) v=$(awk -F';' '$1 == 3 { printf "%.0f\n", $8 }' "$out") ;;
	*) v=$(awk -F';' '$1 == 3 { printf "%.0f\n", $49 }' "$out") ;;
	esac
	[ -n "$v" ] && [ "$v" != 0 ] || { failed fio "$w-j$j" "$c" "no IOPS in fio's output"; return; }
	record fio "$w-j$j" "$c" "$v"
	say "  fio $w j$j $c: $v IOPS"
}
bench_fio() {
	local r c w j
	for r in $(seq 1 "$runs"); do
		say "fio run $r/$runs"
		for w in randread randwrite append; do
			for j in 1 2; do
				for c in $(rotate "$r" fuse passthrough tmpfs); do
					cfg_enter "$c" || continue
					fio_one "$c" "$w" "$j"
				done
			done
		done
	done
	for c in fuse passthrough tmpfs; do
		cfg_enter "$c" 2>/dev/null && cfg_run "$c" rm -rf "$(cfg_dir "$c")/fio"
	done
	unmount_fuse "$FMNT"
}

# ---- postmark -----------------------------------------------------------------------
# transactions per second of wall time for the whole run (create, transactions,
# delete); postmark's own times have a resolution of one second
postmark_one() { # config
	local c=$1 dir out t0 t1 v
	dir=$(cfg_dir "$c")/postmark
	cfg_run "$c" mkdir -p "$dir"
	printf 'set location %s\nset number %s\nset transactions %s\nset size 8192 40960\nset seed 42\nrun\nquit\n' \
		"$dir" "$pm_files" "$pm_tx" >"$WORK/postmark.cfg"
	out=$WORK/postmark-$c.out
	t0=$(now_ns)
	local rc=0
	cfg_run "$c" postmark <"$WORK/postmark.cfg" >"$out" 2>&1 || rc=$?
	if [ $rc != 0 ]; then
		failed postmark tx/s-wall "$c" "postmark exited with status $rc"
		return
	fi
	t1=$(now_ns)
	if grep -qiE 'error|cannot|fail' "$out"; then
		failed postmark tx/s-wall "$c" "$(grep -iE -m1 'error|cannot|fail' "$out")"
		return
	fi
	v=$(awk -v n="$pm_tx" -v t="$((t1 - t0))" 'BEGIN { printf "%.0f\n", n / (t / 1e9) }')
	record postmark "tx/s-wall" "$c" "$v"
	say "  postmark $c: $v transactions/s ($(((t1 - t0) / 1000000)) ms)"
	cfg_run "$c" rm -rf "$dir"
}
bench_postmark() {
	local r c
	for r in $(seq 1 "$runs"); do
		say "postmark run $r/$runs"
		for c in $(rotate "$r" shim fuse passthrough tmpfs ext4); do
			cfg_enter "$c" || continue
			postmark_one "$c"
			cfg_settle "$c"
		done
	done
	unmount_fuse "$FMNT"
}

# ---- PostgreSQL -------------------------------------------------------------------------
# pgbench -c 4 -j 2 -T pg_secs on a scale-5 database; tps as pgbench reports it. The
# server (and, for the shim, `ferrite run`) runs as the postgres user.
PGBIN=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
as_pg() { timeout -k 10 600 su postgres -s /bin/bash -c "cd /tmp && $*"; }
pg_run() { # config command: the server's commands run in the pool for the shim
	if [ "$1" = shim ]; then as_pg "'$FERRITE' run --pool '$POOL' --prefix /pm -- $2"; else as_pg "$2"; fi
}
pg_one() { # config
	local c=$1 dir sock out v rc=0
	dir=$(cfg_dir "$c")/pg
	# through the shim the server maps the pool, so it must be the postgres
	# user's; the FUSE daemon (root) refuses a pool another user owns
	case "$c" in shim) chown postgres "$POOL" ;; fuse) chown root "$POOL" ;; esac
	sock=$(mktemp -d /tmp/ferrite-progbench-pg.XXXXXX)
	chown postgres "$sock"
	cfg_run "$c" bash -c "rm -rf '$dir' && mkdir -p '$dir' && chown postgres '$dir' && chmod 700 '$dir'"
	out=$WORK/pg-$c.out
	local port=$((20000 + RANDOM % 20000))
	if pg_run "$c" "'$PGBIN/initdb' -D '$dir' -N -A trust" >"$out" 2>&1 &&
		pg_run "$c" "'$PGBIN/pg_ctl' -D '$dir' -l '$sock/log' -w -t 120 -o \"-k $sock -p $port -c listen_addresses=''\" start" >>"$out" 2>&1 &&
		as_pg "'$PGBIN/pgbench' -h '$sock' -p $port -i -s 5 -q postgres" >>"$out" 2>&1 &&
		as_pg "'$PGBIN/pgbench' -h '$sock' -p $port -c 4 -j 2 -T $pg_secs postgres" >"$out.run" 2>&1; then
		v=$(sed -n 's/^tps = \([0-9.]*\).*/\1/p' "$out.run" | head -n 1)
		if [ -n "$v" ] && grep -q "number of failed transactions: 0 " "$out.run"; then
			record pgbench tps "$c" "${v%.*}"
			say "  pgbench $c: $v tps"
		else
			failed pgbench tps "$c" "pgbench: $(tail -n 1 "$out.run")"
		fi
	else
		rc=1
		failed pgbench tps "$c" "$(tail -n 1 "$out")"
	fi
	pg_run "$c" "'$PGBIN/pg_ctl' -D '$dir' -m fast -w stop" >/dev/null 2>&1 || true
	[ $rc = 0 ] || cat "$sock/log" >>"$out" 2>/dev/null
	rm -rf "$sock"
	cfg_run "$c" rm -rf "$dir"
}
bench_pgbench() {
	local r c
	if [ "$(id -u)" != 0 ] || ! id postgres >/dev/null 2>&1 || [ -z "$PGBIN" ]; then
		say "pgbench: skipped (needs root, the postgres user and PostgreSQL)"
		return
	fi
	for r in $(seq 1 "$runs"); do
		say "pgbench run $r/$runs"
		for c in $(rotate "$r" shim fuse tmpfs ext4); do
			[ "$c" = fuse ] && chown root "$POOL"
			cfg_enter "$c" || continue
			cfg_run "$c" chmod 755 "$(cfg_dir "$c")"
			pg_one "$c"
			cfg_settle "$c"
		done
	done
	unmount_fuse "$FMNT"
	chown root "$POOL" 2>/dev/null || true
}

# ---- make -j2 ------------------------------------------------------------------------------
make_project() { # DIR: 80 C files and a Makefile, made on the host, copied in
	local d=$1 i
	mkdir -p "$d"
	for i in $(seq 1 80); do
		printf '#include <string.h>\nint f%d(const char *s) { int n = 0; for (int i = 0; s[i]; i++) n += s[i] * %d; return n + (int)strlen(s); }\n' "$i" "$i" >"$d/f$i.c"
	done
	{
		printf 'int main(void) { return 0; }\n'
	} >"$d/main.c"
	printf 'OBJS = main.o %s\nprog: $(OBJS)\n\t$(CC) -o $@ $(OBJS)\n%%.o: %%.c\n\t$(CC) -O1 -c $< -o $@\nclean:\n\trm -f *.o prog\n' \
		"$(seq -f 'f%g.o' -s ' ' 1 80)" >"$d/Makefile"
}
make_one() { # config
	local c=$1 dir t0 t1 v
	dir=$(cfg_dir "$c")/make
	cfg_run "$c" bash -c "rm -rf '$dir' && cp -r '$WORK/make-src' '$dir'" || { failed make builds/min "$c" "copy failed"; return; }
	t0=$(now_ns)
	if ! cfg_run "$c" make -s -j2 -C "$dir" >"$WORK/make-$c.out" 2>&1; then
		failed make builds/min "$c" "make: $(tail -n 1 "$WORK/make-$c.out")"
		return
	fi
	t1=$(now_ns)
	v=$(awk -v t="$((t1 - t0))" 'BEGIN { printf "%.2f\n", 60 / (t / 1e9) }')
	record make "make-j2" "$c" "$v"
	say "  make -j2 $c: $(((t1 - t0) / 1000000)) ms"
	cfg_run "$c" rm -rf "$dir"
}
bench_make() {
	local r c
	make_project "$WORK/make-src"
	for r in $(seq 1 "$runs"); do
		say "make run $r/$runs"
		for c in $(rotate "$r" shim fuse tmpfs ext4); do
			cfg_enter "$c" || continue
			make_one "$c"
			cfg_settle "$c"
		done
	done
	unmount_fuse "$FMNT"
}

# ---- metadata from 1 and 2 processes ---------------------------------------------------
MP=""
bench_procmeta() {
	local r c n p dir line
	MP=$WORK/metaproc
	gcc -std=gnu11 -O2 -Wall -Werror "$here/metaproc.c" -o "$MP" || { say "metaproc.c does not build"; return; }
	for r in $(seq 1 "$runs"); do
		say "procmeta run $r/$runs"
		for c in $(rotate "$r" shim tmpfs); do
			cfg_enter "$c" || continue
			for n in $meta_sizes; do
				for p in 1 2; do
					dir=$(cfg_dir "$c")/meta
					cfg_run "$c" mkdir -p "$dir"
					if ! cfg_run "$c" "$MP" "$dir" "$n" "$p" >"$WORK/meta.out" 2>&1; then
						failed procmeta "create-$n" "$c-${p}p" "metaproc: $(tail -n 1 "$WORK/meta.out")"
						continue
					fi
					while read -r op v; do
						record procmeta "$op-$n" "$c-${p}p" "$v"
					done <"$WORK/meta.out"
					cfg_run "$c" rm -rf "$dir"
				done
			done
		done
	done
}

: >"$WORK/samples"
t_start=$SECONDS
wants rocksdb && bench_rocksdb
wants sqlite && bench_sqlite
wants fio && bench_fio
wants postmark && bench_postmark
wants pgbench && bench_pgbench
wants make && bench_make
wants procmeta && bench_procmeta
unmount_fuse "$FMNT"

# ---- report -------------------------------------------------------------------------
# medians per group/workload/config -> $WORK/medians (group workload config median min max n)
awk -F'\t' '$4 != "FAILED" { k = $1 "\t" $2 "\t" $3; v[k] = v[k] " " $4 }
	$4 == "FAILED" { bad[$1 "\t" $2 "\t" $3] = 1 }
	END {
		for (k in v) {
			n = split(substr(v[k], 2), a, " ")
			for (i = 2; i <= n; i++) { x = a[i]; j = i - 1; while (j > 0 && a[j] + 0 > x + 0) { a[j + 1] = a[j]; j-- } a[j + 1] = x }
			med = (n % 2) ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
			printf "%s\t%.0f\t%s\t%s\t%d\n", k, med, a[1], a[n], n
		}
		for (k in bad) if (!(k in v)) printf "%s\tFAILED\t-\t-\t0\n", k
	}' "$WORK/samples" | sort >"$WORK/medians"

med() { awk -F'\t' -v g="$1" -v w="$2" -v c="$3" '$1 == g && $2 == w && $3 == c { print $4 }' "$WORK/medians"; }
fmt() { # a number -> 123.4k / 1.23M, or the state
	case "$1" in
	"") echo "${skip[$2]:+skipped}" ;;
	FAILED) echo FAILED ;;
	*) awk -v x="$1" 'BEGIN { if (x >= 1e6) printf "%.2fM", x / 1e6; else if (x >= 1e4) printf "%.1fk", x / 1e3; else printf "%.0f", x }' ;;
	esac
}
ratio() { # a b -> a/b
	case "$1$2" in *FAILED* | "") echo "-"; return ;; esac
	[ -n "$1" ] && [ -n "$2" ] || { echo "-"; return; }
	awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f\n", a / b; else print "-" }'
}
verdict() { # ratio target
	[ "$1" = - ] && { echo ""; return; }
	awk -v r="$1" -v t="$2" 'BEGIN { print (r >= t) ? "ok" : "BELOW" }'
}

table() { # group unit targets ratios configs...
	# targets: "workload-glob=num/den>=value ..."; ratios: "num/den ..." (throughputs)
	local g=$1 unit=$2 targets=$3 ratios=$4
	shift 4
	local cfgs=("$@") w c line t rp
	local workloads
	workloads=$(awk -F'\t' -v g="$g" '$1 == g { print $2 }' "$WORK/samples" | awk '!s[$0]++')
	[ -n "$workloads" ] || return 0
	echo
	echo "== $g: $unit; median of $runs; a/b = a's throughput / b's, > 1 = a faster"
	line=$(printf '%-17s' workload)
	for c in "${cfgs[@]}"; do line+=$(printf ' %11s' "$c"); done
	for rp in $ratios; do line+=$(printf ' %16s' "$rp"); done
	echo "$line  target"
	for w in $workloads; do
		line=$(printf '%-17s' "$w")
		for c in "${cfgs[@]}"; do line+=$(printf ' %11s' "$(fmt "$(med "$g" "$w" "$c")" "$c")"); done
		for rp in $ratios; do
			line+=$(printf ' %16s' "$(ratio "$(med "$g" "$w" "${rp%/*}")" "$(med "$g" "$w" "${rp#*/}")")")
		done
		local note=""
		for t in $targets; do
			local pat=${t%%=*} rest=${t#*=}
			local pair=${rest%%>=*} tv=${rest#*>=} r
			# shellcheck disable=SC2053
			if [[ "$w" == $pat ]]; then
				r=$(ratio "$(med "$g" "$w" "${pair%/*}")" "$(med "$g" "$w" "${pair#*/}")")
				note+="$pair >= $tv $(verdict "$r" "$tv")  "
			fi
		done
		echo "$line  $note"
	done
}

{
	echo "bench/programs/run.sh: $(date -u +%FT%TZ), $(nproc) CPUs, kernel $(uname -r), runs $runs$([ $quick = 1 ] && echo ', --quick: numbers mean little')"
	for c in shim fuse ext4 passthrough tier ext4-disk; do
		[ -n "${skip[$c]:-}" ] && echo "  $c skipped: ${skip[$c]}"
	done
	if wants rocksdb && [ -z "${skip[tier]:-}" ]; then
		echo "  tier: $TPOOL ($tier_size, in /dev/shm) caching $DISKD/tier-backing; ext4-disk: $DISKD/ext4"
	fi
	table rocksdb "db_bench ops/s (sync1: $rocks_sync_num keys, others $rocks_num)" \
		"fillrandom-sync1=shim/tmpfs>=3 readrandom=shim/tmpfs>=1.2" "shim/tmpfs shim/ext4 tier/ext4-disk" \
		shim tmpfs ext4 tier ext4-disk
	table sqlite "inserts/s ($sql_n autocommit inserts, synchronous=FULL)" \
		"insert-*=shim/tmpfs>=2" "shim/tmpfs shim/ext4" shim tmpfs ext4
	table fio "IOPS (4 KiB, psync, $fio_size file per job; -jN = N jobs)" \
		"*=fuse/passthrough>=0.77" "fuse/passthrough fuse/tmpfs" fuse passthrough tmpfs
	table postmark "transactions/s of wall time ($pm_files files, $pm_tx transactions)" \
		"" "shim/tmpfs shim/ext4 fuse/passthrough" shim fuse passthrough tmpfs ext4
	table pgbench "transactions/s (pgbench -c 4 -j 2 -T $pg_secs, scale 5)" \
		"tps=shim/fuse>=3 tps=shim/tmpfs>=1" "shim/fuse shim/tmpfs shim/ext4" shim fuse tmpfs ext4
	table make "builds per minute of wall time (make -j2, 81 C files)" \
		"" "shim/fuse shim/tmpfs shim/ext4" shim fuse tmpfs ext4
	table procmeta "ops/s of wall time, N files in one directory, 1 or 2 processes" \
		"create-*=shim-1p/tmpfs-1p>=1.5 openclose-*=shim-1p/tmpfs-1p>=1.5 stat-*=shim-2p/shim-1p>=1.6 create-*=shim-2p/shim-1p>=1.3" \
		"shim-1p/tmpfs-1p shim-2p/shim-1p" shim-1p shim-2p tmpfs-1p tmpfs-2p
	if [ ${#errors[@]} -gt 0 ]; then
		echo
		echo "errors:"
		printf '  %s\n' "${errors[@]}"
	fi
} | tee "$WORK/report.txt"

if [ -n "$json" ]; then
	skipped=""
	for c in "${!skip[@]}"; do
		skipped+="${skipped:+, }\"$c\": \"$(printf '%s' "${skip[$c]}" | tr '"\\' "''")\""
	done
	awk -F'\t' -v skipped="$skipped" -v runs="$runs" -v quick="$quick" -v date="$(date -u +%FT%TZ)" -v kernel="$(uname -r)" -v cpus="$(nproc)" \
		-v medf="$WORK/medians" '
		BEGIN { while ((getline l < medf) > 0) { split(l, m, "\t"); med[m[1] "\t" m[2] "\t" m[3]] = m[4] } }
		{ k = $1 "\t" $2 "\t" $3; if (!(k in seen)) { seen[k] = 1; keys[++nk] = k } s[k] = s[k] (s[k] == "" ? "" : ", ") ($4 == "FAILED" ? "null" : $4) }
		END {
			printf "{\n  \"date\": \"%s\", \"kernel\": \"%s\", \"cpus\": %s, \"runs\": %s, \"quick\": %s,\n", date, kernel, cpus, runs, quick ? "true" : "false"
			printf "  \"skipped\": {%s},\n  \"results\": [\n", skipped
			for (i = 1; i <= nk; i++) {
				split(keys[i], p, "\t"); mv = med[keys[i]]
				printf "    {\"group\": \"%s\", \"workload\": \"%s\", \"config\": \"%s\", \"median\": %s, \"samples\": [%s]}%s\n",
					p[1], p[2], p[3], (mv == "" || mv == "FAILED") ? "null" : mv, s[keys[i]], i < nk ? "," : ""
			}
			printf "  ]\n}\n"
		}' "$WORK/samples" >"$json"
	say "wrote $json"
fi
say "done in $((SECONDS - t_start)) s"
[ ${#errors[@]} = 0 ]
