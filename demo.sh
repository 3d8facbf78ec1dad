#!/usr/bin/env bash
# The main job of Ferrite on the default emulated-PM pool
# (/dev/shm/ferrite/default.pool): format it (first run only), copy a tree
# of files into it, read them back, use it from unmodified programs (sqlite3
# through the preload shim, coreutils through a FUSE mount), and show the
# pool's state and check.
set -euo pipefail
cd "$(dirname "$0")"
scripts/deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j"$(nproc)" --target ferrite_cli ferrite_preload >/dev/null
F=./build/tools/ferrite
POOL=${FERRITE_POOL:-/dev/shm/ferrite/default.pool}

if [ -e "$POOL" ]; then
	echo "== using the existing pool $POOL"
else
	echo "== ferrite mkfs (1 GiB pool at $POOL)"
	$F mkfs
fi
dest="/demo-$(date +%s)"
echo "== ferrite cp -r docs pool:$dest; ferrite cp -r src pool:$dest/"
$F cp -r docs "pool:$dest"
$F cp -r src "pool:$dest/"
echo "== ferrite ls -l $dest"
$F ls -l "$dest"
echo "== ferrite cat $dest/contracts.md | head -5"
$F cat "$dest/contracts.md" | head -n 5
echo "== copy back and compare"
out=$(mktemp -d)
$F cp -r "pool:$dest/src" "$out/"
diff -r src "$out/src" && echo "identical"
rm -rf "$out"
echo "== ferrite run -- sqlite3 /pm$dest/demo.db (in-process, through the preload shim)"
$F run -- sqlite3 "/pm$dest/demo.db" \
	"create table t(id integer primary key, v text);
	 insert into t(v) select 'row ' || value from generate_series(1, 10000);
	 select count(*) || ' rows, integrity ' || (select * from pragma_integrity_check) from t;"
mnt=$(mktemp -d)
echo "== ferrite mount $POOL $mnt; ls, du and grep through the kernel; ferrite umount"
$F mount "$POOL" "$mnt"
ls -l "$mnt$dest" | head -n 5
du -sh "$mnt$dest"
grep -c ferrite_ "$mnt$dest/src/fs/api.c"
$F umount "$mnt"
rmdir "$mnt"
echo "== ferrite info"
$F info
echo "== ferrite fsck"
$F fsck
