#!/bin/bash
# run_shim_test.sh FERRITE SHIM_TEST CASE...
# Formats a fresh pool in /dev/shm and runs each CASE of shim_test under
# `ferrite run` in its own process, in order, on that pool (so a later case,
# e.g. mmap_check, sees what an earlier one left in the pool).
set -u
ferrite=$1 test=$2
shift 2
pool=$(mktemp /dev/shm/ferrite-test-XXXXXX.pool)
trap 'rm -f "$pool"' EXIT
"$ferrite" mkfs --force --size 64M "$pool" >/dev/null 2>&1 || { echo "mkfs failed"; exit 1; }
rc=0
for c in "$@"; do
	"$ferrite" run --pool "$pool" -- "$test" "$c" || rc=1
done
"$ferrite" fsck "$pool" >/dev/null 2>&1 || { echo "fsck found problems"; rc=1; }
exit $rc
