#!/bin/bash
# protect_test.sh FERRITE PROTECT_TEST MMAP_EDGES_TEST
# `ferrite run --protect` (the protection debug mode, persist/pm_trace.c R3):
# - no mapping of the pool in the program is writable, yet a file the program
#   maps itself is, and without --protect the same count finds writable ones
#   (so the count can fail);
# - a store of the program into pool memory faults and is named, and the
#   pool stays clean; without --protect the same store goes through;
# - ordinary work runs in the mode (a shell's files and a copied tree on a pm
#   pool, the mapped-file edge cases of mmap_edges_test on a pm and a tiered
#   pool), fsck clean after each;
# - `ferrite info` says what protection there is.
set -u
FERRITE=$1 prog=$2 edges=$3
ferrite=$FERRITE
# shellcheck source=common.sh
. "$(dirname "$0")/common.sh"
scratch_setup protect
mkdir "$tmp/backing"

for kind in pm tier; do
	pool=$tmp/$kind.pool
	tier=()
	[ $kind = tier ] && tier=(--tier "$tmp/backing")
	"$ferrite" mkfs --size 64M "${tier[@]}" "$pool" >/dev/null 2>&1 || bad "mkfs $kind"
	abspool=$(realpath "$pool")

	out=$("$ferrite" run --pool "$pool" --protect -- "$prog" /pm "$abspool" maps) ||
		bad "$kind: the program's own mapping under --protect"
	echo "$kind, --protect: $out"
	[[ $out =~ ^writable\ 0\ readonly\ [1-9] ]] ||
		bad "$kind: under --protect the pool is mapped writable or not at all: $out"
	out=$("$ferrite" run --pool "$pool" -- "$prog" /pm "$abspool" maps) ||
		bad "$kind: the program's own mapping"
	echo "$kind, no --protect: $out"
	[[ $out =~ ^writable\ [1-9] ]] || bad "$kind: the count finds no writable mapping: $out"

	"$ferrite" run --pool "$pool" --protect -- "$prog" /pm "$abspool" stray \
		>"$tmp/out" 2>"$tmp/err"
	st=$?
	[ $st = 139 ] || bad "$kind: a stray store under --protect ended with status $st, not SIGSEGV"
	grep -q "a store outside the library into" "$tmp/err" ||
		bad "$kind: the fault is not explained: $(cat "$tmp/err")"
	grep -q stored "$tmp/out" && bad "$kind: the stray store went through under --protect"
	head -n 1 "$tmp/err"
	"$ferrite" fsck "$pool" >/dev/null 2>&1 || bad "$kind: fsck after the stray store"
	out=$("$ferrite" run --pool "$pool" -- "$prog" /pm "$abspool" stray) ||
		bad "$kind: the same store without --protect"
	[ "$out" = stored ] || bad "$kind: without --protect the store did not go through: $out"

	# (a tiered pool is one process's: no forked helpers there)
	if [ $kind = pm ] && ! "$ferrite" run --pool "$pool" --protect -- bash -c '
		set -e
		mkdir -p /pm/d
		for i in $(seq 40); do echo "line $i" > /pm/d/f$i; done
		cat /pm/d/f* | wc -l | grep -qx 40
		cp -r /usr/include/linux /pm/inc
		diff -r /usr/include/linux /pm/inc
		mv /pm/inc /pm/inc2 && rm -r /pm/inc2 /pm/d'; then
		bad "$kind: shell work under --protect"
	fi
	"$ferrite" run --pool "$pool" --protect -- "$edges" /pm ||
		bad "$kind: mapped-file edges under --protect"
	"$ferrite" fsck "$pool" >/dev/null 2>&1 || bad "$kind: fsck after the work under --protect"
done

"$ferrite" info "$tmp/pm.pool" | grep -q '^protection: .*--protect' ||
	bad "ferrite info does not say what protection there is"
"$ferrite" info "$tmp/pm.pool" | grep '^protection:'
exit $fail
