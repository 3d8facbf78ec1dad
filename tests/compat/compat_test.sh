#!/usr/bin/env bash
# Pools made by earlier formats keep mounting, read back exactly, take new
# files under their own rules, check clean and stay at their version
# (docs/format.md). v3-populated.pool.gz was made by ferrite 0.1.0 at format
# 3 (commit 0582d64): `ferrite mkfs --size 32M` then `ferrite cp -r` of a
# tree (70 small files in a directory that became hashed, a 2.6 MB file, a
# 5000-byte file, a symlink, a nested directory); v3-populated.md5 lists the
# tree's files.
# Usage: compat_test.sh FERRITE
set -euo pipefail
ferrite=$1
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d /dev/shm/ferrite-compat.XXXXXX)
trap 'rm -rf "$work"' EXIT
pool=$work/v3.pool
fail() { echo "compat_test: FAIL: $*" >&2; exit 1; }

gzip -dc "$here/v3-populated.pool.gz" >"$pool"
chmod 600 "$pool"
"$ferrite" info "$pool" | grep -q '^format version: *3$' || fail "info does not say format 3"
"$ferrite" fsck "$pool" >"$work/fsck" 2>&1 || fail "fsck of the format-3 pool: $(cat "$work/fsck")"

# every file reads back as it was written
"$ferrite" cp -r --pool "$pool" pool:/tree "$work/out"
(cd "$work/out" && find . -type f -exec md5sum {} \; | sort -k2) >"$work/md5"
diff -u "$here/v3-populated.md5" "$work/md5" || fail "the files differ"
[ "$(readlink "$work/out/link")" = small.bin ] || fail "the symlink differs"

# new files, directories and names: metadata the format-3 way (2 MiB blocks)
mkdir -p "$work/new/d"
for i in $(seq 1 200); do echo "new $i" >"$work/new/d/n$i"; done
head -c 300000 /dev/zero | tr '\0' 'x' >"$work/new/mid"
"$ferrite" cp -r --pool "$pool" "$work/new" pool:/new
"$ferrite" rm --pool "$pool" /tree/dir/f1 /tree/large.bin
"$ferrite" fsck "$pool" >"$work/fsck" 2>&1 || fail "fsck after changes: $(cat "$work/fsck")"
"$ferrite" info "$pool" | grep -q '^format version: *3$' || fail "the pool changed its version"
"$ferrite" cat --pool "$pool" /new/d/n200 | grep -qx 'new 200' || fail "a new file reads wrong"
[ "$("$ferrite" cat --pool "$pool" /new/mid | wc -c)" = 300000 ] || fail "the 300 KB file reads wrong"
echo "compat_test: format 3 pool mounts, reads back, takes changes, stays format 3, fsck clean"
