#!/usr/bin/env bash
# run-programs.sh -- real programs on Ferrite, each with its own correctness check.
#
#   tests/programs/run-programs.sh MODE [--quick] [--only LIST]
#
# MODE: shim (ferrite run), fuse (ferrite mount) or native (a tmpfs directory, no
# ferrite: checks the scripts themselves). A scratch pool /dev/shm/ferrite-prog-PID.pool
# is formatted, used and removed (also on failure or Ctrl-C).
#
# Programs (LIST, comma separated; default all):
#   sqlite    100 000 rows in one transaction, an update/delete transaction and an
#             index, with the rollback journal, WAL (locking_mode=EXCLUSIVE) and WAL
#             with mmap reads: integrity_check = ok and the row count and sum, in the
#             writing process and again after a reopen. Also (not shim on a
#             tiered pool): four sqlite3 processes write one database at once
#   rocksdb   db_bench fillrandom, overwrite, readrandom, verifychecksum (four
#             processes, one database), then `ldb checkconsistency` = OK
#   fio       4 KiB random writes with crc32c verify, then a second process verifies
#             the same files again (verify_only); the same through shared mappings
#             (ioengine=mmap), verified again with pread
#   postmark  small-file transactions (buffered and unbuffered); no error in its
#             output, the transaction summary, the directory empty afterwards
#   coreutils cp -a of a tree into the pool, diff -r and a listing of types, modes,
#             sizes, mtimes and link targets; mv (also to and from the host); find;
#             du; tar in and out; md5sum of every file; dd and truncate compared with
#             the same on the host; rm -rf, then the space is back and fsck is clean.
#             Symlinks: relative, absolute into the pool and out of it. Standard
#             output onto pool files: sort -o, uniq IN OUT, bash builtins
#   archivers zip -r / unzip -t / unzip of the tree, gzip and xz -T2 of a 3 MiB
#             file, all in the pool; compared with the originals
#   git       clone, fsck, commit, gc, fsck; shim on a tiered pool (one process):
#             init, add, commit, fsck (git commands that do not fork); the last
#             commit reads back
#   build     fuse/native, not --quick: cmake + gcc build the ferrite command from a
#             copy of the sources in the pool, then run it from there
# At the end everything is removed: free space must be back near its start (32 MiB:
# the metadata pools the pool grew stay; coreutils checks exactly), the pool
# is unmounted (fuse) and `ferrite fsck` must be clean.
#
# Prints one PASS/FAIL line per check; exit status 1 if any failed, 2 on a usage or
# set-up error, 77 if something needed is missing (skipped). Environment: see lib.sh
# (FERRITE, PROG_POOL_SIZE, PROG_TIMEOUT).
set -euo pipefail
PROG_NAME=run-programs
. "$(dirname "$0")/lib.sh"

usage() {
	sed -n '3,4p' "$0" | sed 's/^# *//' >&2
	exit 2
}
[ $# -ge 1 ] || usage
mode=$1
shift
quick=0
only=sqlite,rocksdb,fio,postmark,coreutils,archivers,git,build
while [ $# -gt 0 ]; do
	case "$1" in
	--quick) quick=1 ;;
	--only) only=${2:?--only needs a list}; shift ;;
	--only=*) only=${1#*=} ;;
	-h | --help) usage ;;
	*) usage ;;
	esac
	shift
done
case "$mode" in shim | fuse | native) ;; -h | --help) usage ;; *) usage ;; esac
for t in sqlite3 db_bench ldb fio postmark tar find timeout; do
	command -v $t >/dev/null || skip_all "$t is not installed (scripts/deps.sh installs it)"
done

if [ $quick = 1 ]; then
	sql_rows=100000 rocks_num=50000 fio_size=16M pm_files=2000 pm_tx=20000
else
	sql_rows=100000 rocks_num=200000 fio_size=64M pm_files=5000 pm_tx=50000
fi

trap mode_cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM HUP
start=$SECONDS
mode_setup "$mode"
free0=$(pool_free)
[ -n "$free0" ] && say "free at start: $free0 bytes"

# try OUT WHAT CMD...: run CMD in the pool, output to OUT; on failure show it and say why.
try() {
	local out=$1 what=$2 rc=0
	shift 2
	inpool "$@" >"$out" 2>&1 || rc=$?
	[ $rc = 0 ] && return 0
	show "$out"
	why="$what exited with status $rc"
	[ $rc = 124 ] || [ $rc = 137 ] && why="$what hung (killed after ${PROG_TIMEOUT} s)"
	return 1
}

# ---- sqlite3 -----------------------------------------------------------------------
# Expected content after the workload: ids 1..rows minus multiples of 7.
sql_expect() {
	local n=$1 m=$(($1 / 7))
	echo "$((n - m))|$((n * (n + 1) / 2 - 7 * m * (m + 1) / 2))"
}

t_sqlite() { # journal_mode [mmap]
	local jm=$1 db=$D/sqlite-$1${2:-}.db out=$WORK/sqlite-$1.out pre="" want got
	[ "$jm" = wal ] && pre="PRAGMA locking_mode=EXCLUSIVE;"
	# reads through a shared mapping of the database file
	[ "${2:-}" = mmap ] && pre+="PRAGMA mmap_size=268435456;"
	want=$(sql_expect $sql_rows)
	cat >"$WORK/sqlite-$jm.sql" <<-EOF
		$pre
		PRAGMA journal_mode=$jm;
		PRAGMA synchronous=FULL;
		CREATE TABLE t(id INTEGER PRIMARY KEY, k TEXT, v BLOB);
		BEGIN;
		WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < $sql_rows)
		  INSERT INTO t SELECT x, hex(randomblob(12)), randomblob(100 + x % 200) FROM c;
		COMMIT;
		CREATE INDEX t_k ON t(k);
		BEGIN;
		UPDATE t SET v = zeroblob(300) WHERE id % 3 = 0;
		DELETE FROM t WHERE id % 7 = 0;
		COMMIT;
		SELECT 'IC', * FROM pragma_integrity_check;
		SELECT 'COUNT', count(*), sum(id) FROM t;
	EOF
	try "$out" "sqlite3" sqlite3 -batch -bail "$db" <"$WORK/sqlite-$jm.sql" || return 1
	if [ "$jm" = wal ] && ! grep -qx wal "$out"; then
		show "$out"
		why="journal_mode=WAL was not accepted"
		return 1
	fi
	got=$(sed -n 's/^IC|//p' "$out" | tr '\n' ' ')
	[ "$got" = "ok " ] || { show "$out"; why="integrity_check said: $got"; return 1; }
	got=$(sed -n 's/^COUNT|//p' "$out")
	[ "$got" = "$want" ] || { why="count|sum = $got, want $want"; return 1; }

	# a second process: reopen, check again, and the journal mode stuck
	printf '%s\nSELECT %s, * FROM pragma_integrity_check;\nSELECT %s, count(*), sum(id) FROM t;\nPRAGMA journal_mode;\n' \
		"$pre" "'IC'" "'COUNT'" >"$WORK/sqlite-$jm-2.sql"
	try "$out" "reopen: sqlite3" sqlite3 -batch -bail "$db" <"$WORK/sqlite-$jm-2.sql" || return 1
	got=$(sed -n 's/^IC|//p' "$out" | tr '\n' ' ')
	[ "$got" = "ok " ] || { show "$out"; why="after reopen integrity_check said: $got"; return 1; }
	got=$(sed -n 's/^COUNT|//p' "$out")
	[ "$got" = "$want" ] || { why="after reopen count|sum = $got, want $want"; return 1; }
	grep -qx "$jm" "$out" || { show "$out"; why="after reopen journal_mode is not $jm"; return 1; }
	return 0
}

# ---- RocksDB -----------------------------------------------------------------------
t_rocksdb() {
	local db=$D/rocksdb out phase found total
	local common=(--db="$db" --wal_dir="$db" --num=$rocks_num --threads=1 --seed=42
		--compression_type=none --write_buffer_size=$((4 << 20)) --target_file_size_base=$((4 << 20))
		--max_bytes_for_level_base=$((16 << 20)) --statistics=0)
	for phase in fillrandom overwrite readrandom verifychecksum; do
		out=$WORK/rocksdb-$phase.out
		local existing=1
		[ $phase = fillrandom ] && existing=0
		try "$out" "db_bench $phase" db_bench --benchmarks=$phase --use_existing_db=$existing "${common[@]}" || return 1
		if grep -qiE 'corrupt|io error|error:|failed' "$out"; then
			show "$out"
			why="db_bench $phase reported: $(grep -iE -m1 'corrupt|io error|error:|failed' "$out")"
			return 1
		fi
		grep -qE "^$phase +:" "$out" || { show "$out"; why="db_bench $phase printed no result line"; return 1; }
	done
	# readrandom: keys were written at random into [0, num) twice (fill + overwrite),
	# so about 1 - e^-2 = 86 % of the probes must find their key
	read -r found total < <(sed -n 's/.*(\([0-9]*\) of \([0-9]*\) found).*/\1 \2/p' "$WORK/rocksdb-readrandom.out")
	if [ -z "${found:-}" ] || [ $((found * 100)) -lt $((total * 75)) ]; then
		why="readrandom found only ${found:-?} of ${total:-?} keys"
		return 1
	fi
	out=$WORK/rocksdb-ldb.out
	try "$out" "ldb checkconsistency" ldb --db="$db" checkconsistency || return 1
	grep -qx OK "$out" || { show "$out"; why="ldb checkconsistency did not say OK"; return 1; }
	return 0
}

# ---- fio ---------------------------------------------------------------------------
t_fio() {
	local dir=$D/fio out
	inpool mkdir -p "$dir" || { why="mkdir $dir failed"; return 1; }
	local job=(--name=progfio --verify_state_save=0 --directory="$dir" --thread --ioengine=psync --bs=4k
		--rw=randwrite --size=$fio_size --nrfiles=4 --numjobs=2 --verify=crc32c
		--verify_fatal=1 --randrepeat=1 --group_reporting)
	out=$WORK/fio-write.out
	try "$out" "fio randwrite+verify" fio "${job[@]}" --do_verify=1 || return 1
	fio_errors "$out" || return 1
	# a new process reads everything back and verifies it
	out=$WORK/fio-verify.out
	try "$out" "fio verify_only" fio "${job[@]}" --verify_only=1 || return 1
	fio_errors "$out" || return 1
	# writes and reads through shared mappings (fio's mmap engine: memcpy + msync),
	# verified by a second process with pread
	local mjob=(--name=progmmap --verify_state_save=0 --directory="$dir" --thread --bs=4k
		--rw=randwrite --size=$fio_size --nrfiles=2 --numjobs=1 --verify=crc32c
		--verify_fatal=1 --randrepeat=1 --group_reporting)
	out=$WORK/fio-mmap.out
	try "$out" "fio mmap randwrite+verify" fio "${mjob[@]}" --ioengine=mmap --do_verify=1 || return 1
	fio_errors "$out" || return 1
	out=$WORK/fio-mmap-verify.out
	try "$out" "fio verify_only (psync) of the mmap-written files" fio "${mjob[@]}" --ioengine=psync --verify_only=1 || return 1
	fio_errors "$out" || return 1
	inpool rm -rf "$dir" || { why="rm -rf $dir failed"; return 1; }
	return 0
}
fio_errors() {
	if grep -qiE 'verify.*(fail|bad)|bad magic|bad header|crc32c: |fio: .*error' "$1" ||
		grep -E 'err= *[0-9]+' "$1" | grep -qvE 'err= *0'; then
		show "$1" 25
		why="fio reported errors: $(grep -iE -m1 'verify|bad|error|err= *[1-9]' "$1")"
		return 1
	fi
	grep -qE 'err= *0' "$1" || { show "$1"; why="fio printed no job summary"; return 1; }
}

# ---- postmark ----------------------------------------------------------------------
t_postmark() {
	local dir=$D/postmark out=$WORK/postmark.out buffering=$1 files=$2 tx=$3 left
	inpool mkdir -p "$dir" || { why="mkdir $dir failed"; return 1; }
	printf 'set location %s\nset number %s\nset transactions %s\nset size 8192 40960\nset buffering %s\nset seed 42\nrun\nquit\n' \
		"$dir" "$files" "$tx" "$buffering" >"$WORK/postmark.cfg"
	try "$out" "postmark" postmark <"$WORK/postmark.cfg" || return 1
	# postmark exits 0 whatever happened: read what it says
	if grep -qiE 'error|fail|cannot|unable' "$out"; then
		show "$out"
		why="postmark: $(grep -ciE 'error|fail|cannot|unable' "$out") error lines, first: $(grep -iE -m1 'error|fail|cannot|unable' "$out")"
		return 1
	fi
	grep -qE "seconds of transactions" "$out" || { show "$out"; why="postmark printed no transaction summary"; return 1; }
	grep -qE "^[[:space:]]+$files files \(" "$out" ||
		grep -qE "Creation alone: $files files" "$out" || { show "$out" 30; why="postmark did not create $files files"; return 1; }
	left=$(inpool ls -A "$dir" | wc -l) || { why="ls $dir failed"; return 1; }
	[ "$left" = 0 ] || { why="$left files left in $dir after postmark deleted them"; return 1; }
	inpool rmdir "$dir" || { why="rmdir $dir failed"; return 1; }
	return 0
}

# ---- coreutils ---------------------------------------------------------------------
# A stable tree: the committed repository (others edit the working tree meanwhile),
# plus what a source tree lacks: a symlink, a hard link, an empty directory, odd
# modes, a 3 MiB binary file and a sparse one.
make_tree() {
	local t=$WORK/tree
	mkdir -p "$t"
	git -C "$prog_repo" archive HEAD src include tools tests docs | tar x -C "$t"
	mkdir -p "$t/empty/dir" "$t/deep/a/b/c/d/e/f/g"
	echo deep >"$t/deep/a/b/c/d/e/f/g/leaf"
	ln -s ../src "$t/deep/link-to-src"
	ln -s dangling-target "$t/deep/dangling"
	head -c $((3 << 20)) /dev/urandom >"$t/big.bin"
	ln "$t/big.bin" "$t/big-hardlink.bin"
	truncate -s 5M "$t/sparse.bin"
	echo tail >>"$t/sparse.bin"
	chmod 0600 "$t/big.bin"
	chmod 0750 "$t/deep"
	touch -d '2001-02-03 04:05:06' "$t/deep/a/b/c/d/e/f/g/leaf"
}
# type, mode, size (files), whole-second mtime (files and links) and link target
listing() { # run with inpool
	inpool find "$1" -mindepth 1 -printf '%P %y %m %s %l %TY%Tm%Td%TH%TM%TS\n' |
		awk '$2 == "d" { $4 = "-"; $NF = "-" } { sub(/\.[0-9]+$/, "", $NF); print }' | sort
}
t_coreutils() {
	local t=$WORK/tree dst=$D/tree n_host n_pool x free_before free_after
	free_before=$(pool_free)
	[ -d "$t" ] || make_tree
	inpool cp -a "$t" "$dst" || { why="cp -a into the pool failed"; return 1; }
	inpool diff -r --no-dereference "$t" "$dst" >"$WORK/diff.out" 2>&1 || { show "$WORK/diff.out"; why="diff -r after cp -a differs"; return 1; }
	listing "$t" >"$WORK/list-host"
	listing "$dst" >"$WORK/list-pool" || { why="find in the pool failed"; return 1; }
	diff "$WORK/list-host" "$WORK/list-pool" >"$WORK/list.diff" ||
		{ show "$WORK/list.diff"; why="types/modes/sizes/mtimes/links differ after cp -a"; return 1; }
	x=$(inpool stat -c %h "$dst/big.bin") || { why="stat failed"; return 1; }
	[ "$x" = 2 ] || { why="hard link not preserved (link count $x)"; return 1; }

	inpool mv "$dst" "$D/moved" || { why="mv failed"; return 1; }
	if inpool stat "$dst" >/dev/null 2>&1; then why="$dst still exists after mv"; return 1; fi
	n_host=$(find "$t" -name '*.c' | wc -l)
	n_pool=$(inpool find "$D/moved" -name '*.c' | wc -l) || { why="find failed"; return 1; }
	[ "$n_host" = "$n_pool" ] || { why="find -name '*.c': $n_pool in the pool, $n_host on the host"; return 1; }
	n_host=$(find "$t" | wc -l)
	n_pool=$(inpool find "$D/moved" | wc -l)
	[ "$n_host" = "$n_pool" ] || { why="find: $n_pool entries in the pool, $n_host on the host"; return 1; }
	x=$(inpool du -s --apparent-size -B1 "$D/moved" | cut -f1) || { why="du failed"; return 1; }
	n_host=$(find "$t" -type f -printf '%i %s\n' | sort -u | awk '{ s += $2 } END { print s }')
	[ "$x" -ge "$n_host" ] || { why="du --apparent-size says $x, the files alone hold $n_host"; return 1; }
	x=$(inpool du -s -B1 "$D/moved" | cut -f1) || { why="du failed"; return 1; }
	[ "$x" -gt 0 ] || { why="du says $x bytes used"; return 1; }

	# tar: host tree -> archive in the pool -> extracted in the pool -> compare;
	# then the pool tree -> archive on stdout -> extracted on the host -> compare
	inpool tar cf "$D/tree.tar" -C "$WORK" tree || { why="tar cf into the pool failed"; return 1; }
	inpool mkdir "$D/untar" || { why="mkdir failed"; return 1; }
	inpool tar xf "$D/tree.tar" -C "$D/untar" || { why="tar xf in the pool failed"; return 1; }
	inpool diff -r --no-dereference "$t" "$D/untar/tree" >"$WORK/diff.out" 2>&1 || { show "$WORK/diff.out"; why="diff -r after tar round trip differs"; return 1; }
	listing "$D/untar/tree" >"$WORK/list-pool"
	diff "$WORK/list-host" "$WORK/list-pool" >"$WORK/list.diff" ||
		{ show "$WORK/list.diff"; why="listing differs after tar x in the pool"; return 1; }
	mkdir "$WORK/out"
	inpool tar cf - -C "$D" moved | tar xf - -C "$WORK/out" || { why="tar cf - from the pool failed"; return 1; }
	diff -r --no-dereference "$t" "$WORK/out/moved" >"$WORK/diff.out" 2>&1 || { show "$WORK/diff.out"; why="tree read back out of the pool differs"; return 1; }

	# between the pool and the rest: mv copies (EXDEV), both ways
	cp "$t/big.bin" "$WORK/mv-in"
	inpool mv "$WORK/mv-in" "$D/mv-in" || { why="mv host -> pool failed"; return 1; }
	[ ! -e "$WORK/mv-in" ] || { why="mv host -> pool left the source"; return 1; }
	inpool cmp "$t/big.bin" "$D/mv-in" || { why="mv host -> pool: content differs"; return 1; }
	inpool mv "$D/mv-in" "$WORK/mv-out" || { why="mv pool -> host failed"; return 1; }
	cmp -s "$t/big.bin" "$WORK/mv-out" || { why="mv pool -> host: content differs"; return 1; }
	if inpool stat "$D/mv-in" >/dev/null 2>&1; then why="mv pool -> host left the source"; return 1; fi
	rm -f "$WORK/mv-out"

	# every file's checksum read in the pool
	local files=() pfiles=()
	mapfile -d '' files < <(cd "$t" && find . -type f -print0 | sort -z)
	pfiles=("${files[@]/#./$D/moved}")
	(cd "$t" && md5sum "${files[@]}") >"$WORK/md5-host"
	inpool md5sum "${pfiles[@]}" | sed "s|  $D/moved|  .|" >"$WORK/md5-pool" ||
		{ why="md5sum in the pool failed"; return 1; }
	[ "$(wc -l <"$WORK/md5-host")" -gt 10 ] || { why="md5sum: too few files"; return 1; }
	diff "$WORK/md5-host" "$WORK/md5-pool" >"$WORK/md5.diff" || { show "$WORK/md5.diff"; why="md5sums differ"; return 1; }

	# dd into the middle and past the end, truncate down and up: same as on the host
	cp "$t/big.bin" "$WORK/edit"
	inpool cp "$t/big.bin" "$D/edit" || { why="cp failed"; return 1; }
	for f in "$WORK/edit" "$D/edit"; do
		inpool dd if="$t/sparse.bin" of="$f" bs=4096 seek=100 count=3 conv=notrunc status=none &&
			inpool dd if="$t/big.bin" of="$f" bs=1000 skip=7 seek=3200 count=500 conv=notrunc status=none &&
			inpool truncate -s 1234567 "$f" && inpool truncate -s 4M "$f" &&
			inpool dd if="$t/big.bin" of="$f" bs=1 count=777 seek=$((5 << 20)) conv=notrunc status=none ||
			{ why="dd/truncate on $f failed"; return 1; }
	done
	inpool cmp "$WORK/edit" "$D/edit" || { why="dd/truncate: the pool file differs from the host's"; return 1; }
	rm -f "$WORK/edit"

	inpool rm -rf "$D/moved" "$D/untar" "$D/tree.tar" "$D/edit" || { why="rm -rf failed"; return 1; }
	for x in "$D/moved" "$D/untar" "$D/tree.tar" "$D/edit"; do
		if inpool stat "$x" >/dev/null 2>&1; then why="$x still exists after rm -rf"; return 1; fi
	done
	rm -rf "$WORK/out"
	pool_check || { why="fsck after rm -rf is not clean"; return 1; }
	free_after=$(pool_free)
	space_back "$free_before" "$free_after" $((16 << 20)) || return 1
	# the pool keeps metadata blocks it grew (inode slots, name and directory pools,
	# 2 MiB at a time); a second round of the same files needs no more of them, so
	# now every byte must come back
	inpool cp -a "$t" "$dst" || { why="second cp -a failed"; return 1; }
	inpool rm -rf "$dst" || { why="second rm -rf failed"; return 1; }
	space_back "$free_after" "$(pool_free)" $((2 << 20)) || return 1
	return 0
}

# ---- symlinks -------------------------------------------------------------------------
# Links in the pool are followed the way the kernel follows them: relative ones from
# their directory, absolute ones from the root of the process (so "$D/x" means the
# pool's x, "/etc/..." the host's file).
t_symlinks() {
	local s=$D/sym x
	inpool mkdir -p "$s/dir/sub" || { why="mkdir failed"; return 1; }
	printf 'through a link\n' >"$WORK/sym-file"
	inpool cp "$WORK/sym-file" "$s/dir/sub/f" || { why="cp failed"; return 1; }
	inpool ln -s dir "$s/rel" || { why="ln -s failed"; return 1; }
	inpool ln -s "$s/dir" "$s/abs" || { why="ln -s failed"; return 1; }
	inpool ln -s "$WORK/sym-file" "$s/to-host" || { why="ln -s failed"; return 1; }
	inpool cmp "$WORK/sym-file" "$s/rel/sub/f" || { why="relative symlink: cannot read $s/rel/sub/f"; return 1; }
	x=$(inpool readlink -f "$s/abs/sub") || { why="readlink -f failed"; return 1; }
	[ "$x" = "$s/dir/sub" ] || { why="readlink -f $s/abs/sub says $x"; return 1; }
	inpool cmp "$WORK/sym-file" "$s/abs/sub/f" ||
		{ why="absolute symlink into the pool ($s/abs -> $s/dir): cannot read $s/abs/sub/f"; return 1; }
	inpool cmp "$WORK/sym-file" "$s/to-host" ||
		{ why="symlink out of the pool ($s/to-host -> $WORK/sym-file): cannot read it"; return 1; }
	inpool rm -rf "$s" || { why="rm -rf failed"; return 1; }
}

# ---- stdio onto files in the pool ------------------------------------------------------
# Programs that point their standard output at a file: sort -o, uniq IN OUT
# (freopen of stdout), and a shell redirection of builtins (open + dup2 onto fd 1,
# then stdio writes), all without forking.
t_stdio() {
	local x
	seq 5000 | shuf --random-source=<(yes) >"$WORK/in.txt"
	sort -n "$WORK/in.txt" >"$WORK/sorted.txt"
	inpool cp "$WORK/in.txt" "$D/in.txt" || { why="cp failed"; return 1; }
	inpool sort -n -o "$D/sorted" "$D/in.txt" >"$WORK/stdio.out" 2>&1 ||
		{ show "$WORK/stdio.out"; why="sort -o $D/sorted failed (repro: ferrite run -- sort -o /pm/out /pm/in)"; return 1; }
	inpool cmp "$WORK/sorted.txt" "$D/sorted" || { why="sort -o: wrong output"; return 1; }
	inpool uniq "$D/in.txt" "$D/uniq" >"$WORK/stdio.out" 2>&1 ||
		{ show "$WORK/stdio.out"; why="uniq IN OUT failed (repro: ferrite run -- uniq /pm/in /pm/out)"; return 1; }
	inpool cmp "$WORK/in.txt" "$D/uniq" || { why="uniq IN OUT: wrong output"; return 1; }
	# shellcheck disable=SC2016
	inpool bash -c 'printf "%s\n" first >"$1" && echo second >>"$1"' redirect "$D/redir" >"$WORK/stdio.out" 2>&1 ||
		{ show "$WORK/stdio.out"; why="bash builtin redirection into the pool failed (repro: ferrite run -- bash -c 'echo x > /pm/f')"; return 1; }
	x=$(inpool cat "$D/redir" | tr '\n' ' ')
	[ "$x" = "first second " ] || { why="bash redirection wrote '$x'"; return 1; }
	inpool rm -f "$D/in.txt" "$D/sorted" "$D/uniq" "$D/redir" || { why="rm failed"; return 1; }
}

# ---- sqlite3, several processes at once (fuse/native) -----------------------------
# four writers in the default (shared) locking mode and rollback journal: the
# kernel's POSIX locks on the mount keep them apart; every row must arrive
t_sqlite_conc() {
	local db=$D/sqlite-conc.db out=$WORK/sqlite-conc.out w pids=() rc=0 got
	printf 'CREATE TABLE t(w INTEGER, i INTEGER, v BLOB, PRIMARY KEY(w, i));\n' >"$WORK/conc0.sql"
	try "$out" "sqlite3 create" sqlite3 -batch -bail "$db" <"$WORK/conc0.sql" || return 1
	for w in 1 2 3 4; do
		awk -v w=$w 'BEGIN { print ".timeout 60000"; print "PRAGMA synchronous=FULL;"
			for (i = 1; i <= 400; i++) {
				print "BEGIN IMMEDIATE;"
				printf "INSERT INTO t VALUES(%d, %d, randomblob(%d));\n", w, i, 100 + i * 13 % 3000
				if (i % 10 == 0) printf "UPDATE t SET v = randomblob(50) WHERE w = %d AND i = %d;\n", w, i - 5
				print "COMMIT;"
				if (i % 50 == 0) print "SELECT count(*) FROM t;"
			} }' >"$WORK/conc$w.sql"
		inpool sqlite3 -batch -bail "$db" <"$WORK/conc$w.sql" >"$WORK/conc$w.out" 2>&1 &
		pids+=($!)
	done
	for w in "${!pids[@]}"; do
		wait "${pids[$w]}" || { rc=$?; show "$WORK/conc$((w + 1)).out"; }
	done
	[ $rc = 0 ] || { why="a concurrent sqlite3 writer failed (status $rc)"; return 1; }
	printf 'SELECT %s, * FROM pragma_integrity_check;\nSELECT %s, count(*), count(DISTINCT w) FROM t;\n' "'IC'" "'N'" >"$WORK/conc-check.sql"
	try "$out" "sqlite3 check" sqlite3 -batch -bail "$db" <"$WORK/conc-check.sql" || return 1
	got=$(sed -n 's/^IC|//p' "$out" | tr '\n' ' ')
	[ "$got" = "ok " ] || { show "$out"; why="integrity_check said: $got"; return 1; }
	got=$(sed -n 's/^N|//p' "$out")
	[ "$got" = "1600|4" ] || { why="rows|writers = $got, want 1600|4"; return 1; }
}

# ---- archivers ----------------------------------------------------------------------
# zip, unzip, gzip and xz (threaded) write and read archives in the pool
t_archivers() {
	local out=$WORK/arch.out
	[ -d "$WORK/tree" ] || make_tree
	inpool mkdir -p "$D/arch" || { why="mkdir failed"; return 1; }
	try "$out" "zip -r" zip -q -r -y "$D/arch/tree.zip" tree -x 'tree/sparse.bin' || return 1
	try "$out" "unzip -t" unzip -tq "$D/arch/tree.zip" || return 1
	try "$out" "unzip" unzip -q "$D/arch/tree.zip" -d "$D/arch/x" || return 1
	inpool diff -r --no-dereference -x sparse.bin "$WORK/tree" "$D/arch/x/tree" >"$out" 2>&1 ||
		{ show "$out"; why="tree unzipped in the pool differs"; return 1; }
	inpool cp "$WORK/tree/big.bin" "$D/arch/big" || { why="cp failed"; return 1; }
	try "$out" "gzip" gzip -k -6 "$D/arch/big" || return 1
	try "$out" "xz -T2" xz -k -1 -T2 "$D/arch/big" || return 1
	try "$out" "gzip -t" gzip -t "$D/arch/big.gz" || return 1
	try "$out" "xz -t" xz -t "$D/arch/big.xz" || return 1
	inpool xz -dc "$D/arch/big.xz" | cmp -s - "$WORK/tree/big.bin" || { why="xz -dc from the pool differs"; return 1; }
	inpool gzip -dc "$D/arch/big.gz" | cmp -s - "$WORK/tree/big.bin" || { why="gzip -dc from the pool differs"; return 1; }
	inpool rm -rf "$D/arch" || { why="rm -rf failed"; return 1; }
}

# ---- git ---------------------------------------------------------------------------
# fuse/native: clone (a local clone copies the object files, then checks out), fsck,
# a commit, gc (repack: pack files written, mapped, renamed, loose objects removed),
# fsck again. shim: only commands that do not fork (init, add, commit, fsck without
# the commit-graph and multi-pack-index checks, status, log).
git_cmd=(git -c gc.auto=0 -c maintenance.auto=false -c core.commitGraph=false
	-c core.multiPackIndex=false -c user.name=ferrite -c user.email=ferrite@example.com
	-c core.fsync=all -c init.defaultBranch=main)
t_git() {
	local repo=$D/repo out=$WORK/git.out x
	if [ "$mode" = shim ] && [ -n "${PROG_TIER:-}" ]; then
		[ -d "$WORK/tree" ] || make_tree
		inpool "${git_cmd[@]}" init -q "$repo" >"$out" 2>&1 || { show "$out"; why="git init failed"; return 1; }
		inpool cp -a "$WORK/tree/." "$repo/" || { why="cp -a into the repository failed"; return 1; }
		try "$out" "git add" "${git_cmd[@]}" -C "$repo" add -A || return 1
		try "$out" "git commit" "${git_cmd[@]}" -C "$repo" commit -q -m "tree from the host" || return 1
	else
		try "$out" "git clone" "${git_cmd[@]}" clone -q --no-hardlinks "$prog_repo" "$repo" || return 1
	fi
	try "$out" "git fsck" "${git_cmd[@]}" -C "$repo" fsck --full --strict --no-progress || return 1
	try "$out" "git status" "${git_cmd[@]}" -C "$repo" status --porcelain || return 1
	[ ! -s "$out" ] || { show "$out"; why="git status: the checkout differs from HEAD"; return 1; }
	printf 'one more line\n' >"$WORK/git-extra"
	inpool cp "$WORK/git-extra" "$repo/extra-file" || { why="cp failed"; return 1; }
	try "$out" "git add" "${git_cmd[@]}" -C "$repo" add extra-file || return 1
	try "$out" "git commit" "${git_cmd[@]}" -C "$repo" commit -q -m "written in the pool" || return 1
	if [ "$mode" != shim ] || [ -z "${PROG_TIER:-}" ]; then
		try "$out" "git gc" "${git_cmd[@]}" -C "$repo" gc -q --prune=now || return 1
		try "$out" "git fsck after gc" "${git_cmd[@]}" -C "$repo" fsck --full --strict --no-progress || return 1
	fi
	try "$out" "git log" "${git_cmd[@]}" -C "$repo" log --format=%s -n 1 || return 1
	x=$(cat "$out")
	[ "$x" = "written in the pool" ] || { why="git log shows '$x' as the last commit"; return 1; }
	try "$out" "git show" "${git_cmd[@]}" -C "$repo" show HEAD:extra-file || return 1
	cmp -s "$out" "$WORK/git-extra" || { why="git show HEAD:extra-file differs"; return 1; }
	inpool rm -rf "$repo" || { why="rm -rf $repo failed"; return 1; }
}

# ---- a build ------------------------------------------------------------------------
# fuse/native, not --quick: configure and compile the ferrite command from a copy of
# the committed sources in the pool (compiler, assembler, archiver and linker write,
# rename and map many files), then run the binary from the mount.
t_build() {
	local src=$D/build-src bld=$D/build out=$WORK/build.out x
	inpool mkdir -p "$src" || { why="mkdir failed"; return 1; }
	git -C "$prog_repo" archive HEAD | inpool tar x -C "$src" || { why="unpacking the sources failed"; return 1; }
	try "$out" "cmake (configure)" cmake -S "$src" -B "$bld" -DCMAKE_BUILD_TYPE=RelWithDebInfo || return 1
	try "$out" "cmake --build" cmake --build "$bld" -j"$(nproc)" --target ferrite_cli || return 1
	x=$(inpool "$bld/tools/ferrite" --version 2>&1) || { why="the ferrite built in the pool does not run: $x"; return 1; }
	say "built in the pool: $x"
	inpool rm -rf "$src" "$bld" || { why="rm -rf failed"; return 1; }
}

# space_back BEFORE AFTER SLACK: free space came back to within SLACK bytes.
space_back() {
	[ -n "$1" ] || return 0
	if [ "$2" -lt $(($1 - $3)) ]; then
		why="free space not back: $1 bytes before, $2 after ($((($1 - $2) >> 10)) KiB lost, $(($3 >> 10)) KiB allowed)"
		return 1
	fi
	say "free space: $1 before, $2 after"
}


# A check that fails for a limitation the front end documents: reported as XFAIL
# (not counted), and as XPASS once it works.
run_known() {
	local name=$1 doc=$2 t0=$SECONDS
	shift 2
	why=""
	say "$name ..."
	if "$@"; then
		pass "$name ($((SECONDS - t0)) s) [XPASS: was a documented limitation, $doc]"
	else
		results+=("XFAIL $name: ${why:-failed} [documented: $doc]")
		echo "XFAIL $name: ${why:-failed} [documented: $doc]"
	fi
}

wants() { case ",$only," in *,$1,*) return 0 ;; esac; return 1; }
wants sqlite && run "sqlite3 rollback journal, $sql_rows rows" t_sqlite delete
wants sqlite && run "sqlite3 WAL exclusive, $sql_rows rows" t_sqlite wal
wants sqlite && run "sqlite3 WAL exclusive + mmap reads, $sql_rows rows" t_sqlite wal mmap
wants rocksdb && run "db_bench fillrandom/overwrite/readrandom $rocks_num + ldb checkconsistency" t_rocksdb
wants fio && run "fio randwrite (psync and mmap) + crc32c verify, 2 threads x $fio_size" t_fio
wants postmark && run "postmark $pm_files files, $pm_tx transactions" t_postmark true $pm_files $pm_tx
wants postmark && run "postmark unbuffered, 500 files, 5000 transactions" t_postmark false 500 5000
wants coreutils && run "coreutils cp -a/diff/mv/find/du/tar/ln/md5sum/dd/truncate/rm -rf" t_coreutils
wants coreutils && run "symlinks: relative, absolute into the pool, out of the pool" t_symlinks
wants coreutils && run "stdout onto pool files: sort -o, uniq IN OUT, shell redirection" t_stdio
if wants archivers && command -v zip >/dev/null && command -v unzip >/dev/null && command -v xz >/dev/null; then
	run "zip/unzip/gzip/xz archives in the pool" t_archivers
fi
if wants sqlite && { [ "$mode" != shim ] || [ -z "${PROG_TIER:-}" ]; }; then
	run "sqlite3 4 concurrent writer processes, shared locking" t_sqlite_conc
fi
if wants git && command -v git >/dev/null; then
	if [ "$mode" = shim ] && [ -n "${PROG_TIER:-}" ]; then
		run "git init/add/commit/fsck/log (no forks: a tiered pool under the shim)" t_git
	else
		run "git clone/fsck/commit/gc/fsck" t_git
	fi
fi
if wants build && [ "$mode" != shim ] && [ $quick = 0 ] && command -v cmake >/dev/null; then
	run "cmake + gcc build of the ferrite command, run it" t_build
fi

# ---- the end: remove everything, space back, fsck clean ----------------------------
t_final() {
	inpool find "$D" -mindepth 1 -delete || { why="removing everything failed"; return 1; }
	local left
	left=$(inpool ls -A "$D" | wc -l)
	[ "$left" = 0 ] || { why="$left entries left in $D after removing everything"; return 1; }
	local free_end
	free_end=$(pool_free)
	# metadata pools grown for the many files of the run stay (see t_coreutils)
	space_back "$free0" "$free_end" $((32 << 20)) || return 1
	case "$mode" in
	native) return 0 ;;
	fuse)
		fuse_umount || { why="ferrite umount $MNT failed"; return 1; }
		pool_wait_free || { why="the FUSE daemon still holds the pool after umount"; return 1; }
		;;
	esac
	ferrite_fsck || { why="ferrite fsck $POOL is not clean"; return 1; }
}
run "remove all, space back, unmount, fsck clean" t_final

summary
say "$mode done in $((SECONDS - start)) s"
[ $failures = 0 ]
