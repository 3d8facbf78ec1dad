#!/usr/bin/env bash
# kill-fuse.sh -- SIGKILL the FUSE daemon under a write workload, again and again.
#
#   tests/programs/kill-fuse.sh [N] [--native]
#
# Each of N rounds (default 10) starts two writers on the mount and, at a random
# moment after their first acknowledged write, kills the `ferrite mount` daemon with
# SIGKILL. Each writer appends numbered lines to a log file, creates small and 64 KiB
# files and renames a file over another, and after each operation has returned it
# prints an acknowledgement to a host file. Then:
#   `ferrite umount DIR` of the dead mount (fusermount3 -uz if that fails),
#   `ferrite fsck POOL` must be clean, the pool is mounted again, and
#   every acknowledged operation is there: the log holds lines 1..n with n >= the
#   last acknowledged append (at most one more) and no torn line, except an
#   unacknowledged one cut at a 4 KiB boundary (the kernel split it); each acknowledged
#   file exists with its full content; the rename target holds the last
#   acknowledged version or the one after it.
# --native runs the same writer and checks on a tmpfs directory and kills the writer
# instead (tests this script, not ferrite).
# Exit status: 0 all rounds passed, 1 a check failed, 2 set-up error.
set -euo pipefail
PROG_NAME=kill-fuse
. "$(dirname "$0")/lib.sh"

rounds=10
mode=fuse
for a in "$@"; do
	case "$a" in
	--native) mode=native ;;
	-h | --help) sed -n '3,4p' "$0" | sed 's/^# *//' >&2; exit 2 ;;
	*) [[ "$a" =~ ^[0-9]+$ ]] || die "N must be a number"; rounds=$a ;;
	esac
done

wpids=()
cut_at_page=0
kf_cleanup() {
	set +e # a failing wait must not skip the unmount
	if [ ${#wpids[@]} -gt 0 ]; then
		kill -9 "${wpids[@]}" 2>/dev/null
		wait "${wpids[@]}" 2>/dev/null
	fi
	mode_cleanup
}
trap kf_cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM HUP
start=$SECONDS
mode_setup "$mode"

big=$(head -c 49152 /dev/urandom | base64 -w 0) # 65 536 characters
big=${big:0:65535}
pad=$(printf '%0100d' 0)

# writer ROUND W: runs until an operation fails (the mount died); acks on stdout
writer() {
	local r=$1 i=0 dir=$D/r$1$2
	exec 2>/dev/null
	mkdir "$dir" || exit 1
	echo "M"
	while :; do
		i=$((i + 1))
		printf 'r%d-%06d %s\n' "$r" "$i" "$pad" >>"$dir/log" || exit 1
		echo "A $i"
		if ((i % 4 == 0)); then
			printf 'small %d %d %s\n' "$r" "$i" "$pad" >"$dir/f-$i" || exit 1
			echo "F $i"
		fi
		if ((i % 16 == 0)); then
			printf '%s\n' "$big" >"$dir/big-$i" || exit 1
			echo "B $i"
		fi
		if ((i % 8 == 0)); then
			printf 'version %d\n' "$i" >"$dir/tmp-$i" || exit 1
			mv -f "$dir/tmp-$i" "$dir/current" || exit 1
			echo "R $i"
		fi
	done
}

# log_bad_line LOG N: what is wrong with line N of a log, for the failure
# message (check_round's $lines and $a are in scope): its length against a good
# line's, whether it has its newline, the log's size (a multiple of 4096 is a
# page boundary), the last acknowledged append, the line's start and its last
# 32 bytes as od -c shows them (\0 is a zero byte).
log_bad_line() {
	local log=$1 n=$2 size nl=newline
	size=$(stat -c %s "$log")
	[ "$(sed -n "${n}p" "$log" | tail -c 1 | od -An -c | tr -d ' ')" = '\n' ] || nl="no newline"
	printf 'line %d: %d bytes (a good one: %d and a newline), %s; log %d lines, %d bytes (%d mod 4096); last acknowledged append %s; line starts "%s", ends [%s]' \
		"$n" "$(sed -n "${n}p" "$log" | tr -d '\n' | wc -c)" $((${#pad} + 10)) "$nl" \
		"$lines" "$size" $((size % 4096)) "$a" \
		"$(sed -n "${n}p" "$log" | head -c 24 | tr -c '[:print:]' '?')" \
		"$(sed -n "${n}p" "$log" | tail -c 32 | od -An -c -w32 | sed 's/^ *//; s/  */ /g')"
}

check_round() {
	local r=$1 acks=$3 dir=$D/r$1$2 a n lines i last_r cur
	grep -q '^M$' "$acks" || return 0 # not even the directory was acknowledged
	a=$(sed -n 's/^A //p' "$acks" | tail -n 1)
	a=${a:-0}
	[ -d "$dir" ] || { why="acknowledged directory $dir is missing"; return 1; }
	if [ -e "$dir/log" ]; then
		lines=$(wc -l <"$dir/log")
		# no torn line, no gap, nothing out of order
		if ! head -n "$lines" "$dir/log" | awk -v r="$r" -v pad="$pad" '{ want = sprintf("r%d-%06d %s", r, NR, pad); if ($0 != want) { print NR; exit 1 } }' >"$WORK/log.bad"; then
			why="log: $(log_bad_line "$dir/log" "$(<"$WORK/log.bad")")"
			return 1
		fi
		# A torn last line is allowed in one case (docs/contracts.md, "What a
		# crash can show"): the kernel sent the unacknowledged append to the
		# daemon as two requests, split at a page boundary, and the daemon
		# died between them; the log then ends at a multiple of 4096 bytes in
		# a prefix of the next line.
		if [ -n "$(tail -c 1 "$dir/log")" ]; then
			local size partial
			size=$(stat -c %s "$dir/log")
			partial=$(tail -n 1 "$dir/log")
			if [ "$lines" = "$a" ] && [ $((size % 4096)) = 0 ] &&
				[[ "$(printf 'r%d-%06d %s' "$r" $((lines + 1)) "$pad")" == "$partial"* ]]; then
				cut_at_page=$((cut_at_page + 1))
			else
				why="log ends in a torn line: $(log_bad_line "$dir/log" $((lines + 1)))"
				return 1
			fi
		fi
	else
		lines=0
	fi
	[ "$lines" -ge "$a" ] || { why="log has $lines lines, $a appends were acknowledged"; return 1; }
	[ "$lines" -le $((a + 1)) ] || { why="log has $lines lines, only $a appends were acknowledged (+1 allowed)"; return 1; }
	for i in $(sed -n 's/^F //p' "$acks"); do
		[ "$(<"$dir/f-$i")" = "small $r $i $pad" ] 2>/dev/null || { why="acknowledged file f-$i is missing or wrong"; return 1; }
	done
	for i in $(sed -n 's/^B //p' "$acks"); do
		cmp -s "$dir/big-$i" <(printf '%s\n' "$big") || { why="acknowledged 64 KiB file big-$i is missing or wrong ($(stat -c %s "$dir/big-$i" 2>&1) bytes)"; return 1; }
	done
	last_r=$(sed -n 's/^R //p' "$acks" | tail -n 1)
	if [ -n "$last_r" ]; then
		cur=$(<"$dir/current") 2>/dev/null || cur=missing
		[ "$cur" = "version $last_r" ] || [ "$cur" = "version $((last_r + 8))" ] ||
			{ why="rename target holds '$cur', last acknowledged 'version $last_r'"; return 1; }
	fi
	say "round $r$2: $a appends ($lines lines), $(grep -c '^F ' "$acks") files, $(grep -c '^B ' "$acks") big, last rename ${last_r:-none}"
	kept=$((kept + lines - a))
}

daemon_pid() {
	# the process holding the pool: the daemon `ferrite mount` started
	pool_holders | head -n 1 || true
}

for r in $(seq 1 "$rounds"); do
	why=""
	# two writers at once: the daemon serves them on different threads
	wpids=()
	for w in a b; do
		: >"$WORK/acks-$r$w"
		writer "$r" $w >"$WORK/acks-$r$w" &
		wpids+=($!)
	done
	t0=$SECONDS
	while ! grep -q '^A ' "$WORK/acks-${r}a" && kill -0 "${wpids[0]}" 2>/dev/null && [ $((SECONDS - t0)) -lt 30 ]; do
		sleep 0.02
	done
	sleep "0.$(printf '%03d' $((RANDOM % 500)))"
	if [ "$mode" = fuse ]; then
		dpid=$(daemon_pid)
		if [ -z "$dpid" ]; then
			fail "round $r" "no process holds $POOL: where is the daemon?"
			break
		fi
		kill -9 "$dpid"
		# the writers now fail with ENOTCONN and stop
		for i in $(seq 100); do
			alive=0
			for p in "${wpids[@]}"; do kill -0 "$p" 2>/dev/null && alive=1; done
			[ $alive = 0 ] && break
			sleep 0.1
		done
		kill -9 "${wpids[@]}" 2>/dev/null || true
	else
		kill -9 "${wpids[@]}"
	fi
	wait "${wpids[@]}" 2>/dev/null || true
	wpids=()
	if [ "$mode" = fuse ]; then
		if ! bounded "$FERRITE" umount "$MNT" >"$WORK/umount.out" 2>&1; then
			show "$WORK/umount.out"
			fail "round $r" "ferrite umount of the dead mount failed (repro: kill -9 the daemon, then ferrite umount DIR)"
			fusermount3 -uz "$MNT" 2>/dev/null || umount -l "$MNT" 2>/dev/null || true
			break
		fi
		if mountpoint -q "$MNT"; then
			fail "round $r" "$MNT still a mount point after ferrite umount"
			break
		fi
		pool_wait_free || { fail "round $r" "pool still held after the daemon was killed"; break; }
		if ! ferrite_fsck; then
			fail "round $r" "ferrite fsck not clean after killing the daemon"
			break
		fi
		if ! fuse_mount; then
			fail "round $r" "mounting again after the kill failed"
			break
		fi
	fi
	kept=0
	if ! check_round "$r" a "$WORK/acks-${r}a" || ! check_round "$r" b "$WORK/acks-${r}b"; then
		fail "round $r" "$why"
		break
	fi
	pass "round $r: daemon killed, umount, fsck clean, remount, all acknowledged writes there (+$kept unacknowledged)"
done

if [ $failures = 0 ] && [ "$mode" = fuse ]; then
	fuse_umount && pool_wait_free || fail "unmount" "ferrite umount $MNT failed"
	if ferrite_fsck; then pass "final fsck clean"; else fail "final fsck" "not clean"; fi
fi
[ "$cut_at_page" = 0 ] || say "$cut_at_page log(s) ended in an unacknowledged append cut at a page boundary"
summary
say "$mode: $rounds rounds in $((SECONDS - start)) s"
[ $failures = 0 ]
