#!/usr/bin/env bash
# run-bench.sh -- prepare the kernel peers for ferrite-bench, run it, tear them down.
#
# tmpfs needs nothing (/dev/shm). ext4 needs root: a sparse image file in /dev/shm,
# mkfs.ext4, a loop device and a mount, all removed again on exit -- also when the
# bench fails or is interrupted. Without root, or when a step fails, the bench runs
# without the ext4 column and prints why. Every argument goes to ferrite-bench.
#
#   bench/run-bench.sh                      full run (several minutes)
#   bench/run-bench.sh --quick              smoke run (seconds)
#   bench/run-bench.sh --runs 5 --json out.json --only micro,meta
#
# Environment:
#   FERRITE_BENCH=PATH     the ferrite-bench binary (default: searched in build dirs)
#   EXT4_IMAGE_SIZE=SIZE   size of the sparse ext4 image (default: from the options)
set -u

here=$(cd "$(dirname "$0")" && pwd)

say() { echo "run-bench: $*" >&2; }

find_bin() {
	local c
	for c in "${FERRITE_BENCH:-}" "$here/../build/bench/ferrite-bench" \
		"$here/../build-release/bench/ferrite-bench" "/tmp/bench-build/bench/ferrite-bench" \
		"$(command -v ferrite-bench 2>/dev/null)"; do
		if [ -n "$c" ] && [ -x "$c" ]; then
			echo "$c"
			return 0
		fi
	done
	return 1
}

# "1G" / "64M" / "1.5G" / "100000" / "1e6" -> bytes or a count (binary suffixes).
to_num() {
	awk -v s="$1" 'BEGIN {
		n = s + 0; u = toupper(substr(s, length(n "") + 1, 1)); m = 1
		if (u == "K") m = 1024; else if (u == "M") m = 1048576
		else if (u == "G") m = 1073741824; else if (u == "T") m = 1099511627776
		printf "%.0f\n", n * m }'
}

# ---- what the bench will be asked to do -------------------------------------------
file_size=$((1 << 30))
files=100000
quick=0
workdir=/dev/shm/ferrite-bench # keep in step with the defaults in main.c
pool=/dev/shm/ferrite/bench.pool
rawdir=""
want_ext4=1
user_ext4=0
args=("$@")
i=0
while [ $i -lt ${#args[@]} ]; do
	a=${args[$i]}
	v=""
	case "$a" in
	--*=*) v=${a#*=}; a=${a%%=*} ;;
	--file-size | --files | --only | --backends | --workdir | --pool | --raw-dir)
		i=$((i + 1))
		v=${args[$i]:-}
		;;
	esac
	case "$a" in
	--quick) quick=1 ;;
	--file-size) file_size=$(to_num "$v") ;;
	--files) files=$(to_num "$v") ;;
	--only) case ",$v," in *,micro,* | *,meta,* | *,a,* | *,b,*) ;; *) want_ext4=0 ;; esac ;;
	--backends) case ",$v," in *,ext4,*) ;; *) want_ext4=0 ;; esac ;;
	--ext4-dir | --ext4-skip) user_ext4=1 ;;
	--workdir) workdir=$v ;;
	--pool) pool=$v ;;
	--raw-dir) rawdir=$v ;;
	esac
	i=$((i + 1))
done
if [ $quick = 1 ]; then
	# keep in step with the --quick defaults in main.c unless given explicitly
	case " $* " in *" --file-size"*) ;; *) file_size=$((16 << 20)) ;; esac
	case " $* " in *" --files"*) ;; *) files=500 ;; esac
fi

bin=$(find_bin) || {
	say "ferrite-bench not found; build it (cmake --build BUILD --target ferrite-bench)"
	say "or point FERRITE_BENCH at it"
	exit 2
}

# ---- ext4 on a loop device over a file in /dev/shm ----------------------------------
img=""
mnt=""
loop=""
mounted=0

cleanup() {
	if [ $mounted = 1 ]; then
		umount "$mnt" 2>/dev/null || umount -l "$mnt" 2>/dev/null || say "cannot unmount $mnt"
	fi
	if [ -n "$loop" ]; then
		losetup -d "$loop" 2>/dev/null || say "cannot detach $loop"
	fi
	[ -n "$img" ] && rm -f "$img"
	[ -n "$mnt" ] && rmdir "$mnt" 2>/dev/null
	return 0
}
child=""
# What a killed bench leaves behind (the next run would reuse or overwrite it; it can
# hold several GiB of memory until then).
leftovers() {
	rm -rf "$workdir/tmpfs"
	rm -f "${rawdir:-$(dirname "$pool")}/ferrite-bench-raw.pool" "$pool" "${pool%.pool}-strict.pool" \
		"$(dirname "$pool")"/ferrite-bench-mount-*.pool
	rmdir "$workdir" 2>/dev/null
}
# On a signal: stop the bench (a background job of a script ignores SIGINT), clean up.
stop() {
	if [ -n "$child" ]; then
		kill -TERM "$child" 2>/dev/null && wait "$child" 2>/dev/null
		leftovers
	fi
	exit "$1"
}
trap cleanup EXIT
trap 'stop 130' INT
trap 'stop 143' TERM HUP

ext4_args=()
setup_ext4() {
	local gib=$((1 << 30)) size out inodes
	if [ "$(id -u)" != 0 ]; then
		ext4_args=(--ext4-skip "not root (loop devices and mounts need root)")
		return
	fi
	for t in mkfs.ext4 losetup mount umount; do
		if ! command -v $t >/dev/null 2>&1; then
			ext4_args=(--ext4-skip "$t not installed")
			return
		fi
	done
	if [ -n "${EXT4_IMAGE_SIZE:-}" ]; then
		size=$(to_num "$EXT4_IMAGE_SIZE")
	else
		# the a) file twice (Append and SWE files never coexist, but allow slack),
		# 16 KiB per b) file, and room for the journal and inode tables
		size=$((2 * file_size + files * 16384 + (quick ? 256 << 20 : gib)))
		size=$(((size + gib - 1) / gib * gib))
	fi
	img=$(mktemp /dev/shm/ferrite-bench-ext4.XXXXXX.img) || {
		ext4_args=(--ext4-skip "cannot create an image file in /dev/shm")
		return
	}
	mnt=$(mktemp -d /tmp/ferrite-bench-ext4.XXXXXX) || {
		ext4_args=(--ext4-skip "cannot create a mount point")
		return
	}
	inodes=()
	if [ $((files + 65536)) -gt $((size / 16384)) ]; then
		inodes=(-N $((files + 65536)))
	fi
	say "ext4: $((size >> 20)) MiB image $img"
	if ! out=$(truncate -s "$size" "$img" 2>&1); then
		ext4_args=(--ext4-skip "truncate failed: $out")
		return
	fi
	# inode tables and journal initialised now, so no lazy-init thread runs during the bench
	if ! out=$(mkfs.ext4 -q -F -b 4096 "${inodes[@]}" \
		-E lazy_itable_init=0,lazy_journal_init=0 "$img" 2>&1); then
		ext4_args=(--ext4-skip "mkfs.ext4 failed: $out")
		return
	fi
	if ! loop=$(losetup --find --show "$img" 2>&1); then
		ext4_args=(--ext4-skip "losetup failed: $loop")
		loop=""
		return
	fi
	if ! out=$(mount -t ext4 "$loop" "$mnt" 2>&1); then
		ext4_args=(--ext4-skip "mount failed: $out")
		return
	fi
	mounted=1
	say "ext4: $loop mounted on $mnt"
	sync
	echo 3 >/proc/sys/vm/drop_caches 2>/dev/null || true
	ext4_args=(--ext4-dir "$mnt")
}

if [ $user_ext4 = 1 ]; then
	say "ext4 given on the command line; not preparing one"
elif [ $want_ext4 = 1 ]; then
	setup_ext4
fi

say "running $bin ${ext4_args[*]} $*"
"$bin" "${ext4_args[@]}" "$@" &
child=$!
wait "$child"
rc=$?
child=""
if [ $rc -ge 128 ]; then
	say "ferrite-bench was killed (status $rc; out of memory? see dmesg); removing its files"
	leftovers
fi
exit $rc
