#!/usr/bin/env bash
# The main job of Ferrite on the default emulated-PM pool
# (/dev/shm/ferrite/default.pool): format it (first run only), copy a tree
# of files into it, read them back, and show the pool's state and check.
set -euo pipefail
cd "$(dirname "$0")"
scripts/deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j"$(nproc)" --target ferrite_cli >/dev/null
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
echo "== ferrite info"
$F info
echo "== ferrite fsck"
$F fsck
