# lib.sh -- shared by the real-program scripts in tests/programs/ (sourced, not run).
#
# One MODE decides how a program reaches the file system under test:
#   native  a plain directory on tmpfs, no ferrite at all (develops and debugs the
#           scripts themselves; every check must pass here)
#   shim    `ferrite run --pool POOL --prefix /pm -- CMD`: the program and its
#           children see the pool under /pm (on a tiered pool only the one process:
#           programs are run directly there, and fio uses --thread)
#   fuse    `ferrite mount POOL DIR`: any process uses DIR
#
# After mode_setup, scripts use:
#   $D              the directory the programs work in (inside the pool)
#   inpool CMD...   run CMD so that it sees $D (shim: through `ferrite run`)
#   pool_check      fsck the pool (fuse: unmount, fsck, mount again); 0 = clean
#   pool_free       free bytes of the pool (empty in native mode)
#
# Environment:
#   FERRITE=PATH      the ferrite command (default: build/tools/ferrite of this repo,
#                     then $PATH)
#   PROG_POOL_SIZE    size of the scratch pool (default 2G)
#   PROG_TIER=1       format it as a tiered pool (ferrite mkfs --tier) caching a
#                     directory on the machine's disk ($PROG_TIER_DIR, default
#                     /var/tmp); free-space checks then do not apply (the space
#                     is the backing file system's, shared with everything else)
#   PROG_TIMEOUT      seconds one program may run before it counts as hung (600)
#
# Exit status of the scripts: 0 passed, 1 a check failed, 2 usage or set-up error,
# 77 skipped (a program, /dev/fuse or the front end is missing).

prog_here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
prog_repo=$(cd "$prog_here/../.." && pwd)

say() { echo "$(date +%T) ${PROG_NAME:-programs}: $*" >&2; }
die() {
	say "error: $*"
	exit 2
}
# What this machine lacks (a program, /dev/fuse, a front end): exit 77, which CTest
# reports as skipped.
skip_all() {
	say "skipped: $*"
	exit 77
}

find_ferrite() {
	local c
	for c in "${FERRITE:-}" "$prog_repo/build/tools/ferrite" \
		"$(command -v ferrite 2>/dev/null)"; do
		if [ -n "$c" ] && [ -x "$c" ]; then
			echo "$c"
			return 0
		fi
	done
	return 1
}

# Does this ferrite binary know subcommand $1? (the front ends land separately)
ferrite_has() {
	"$FERRITE" help "$1" >/dev/null 2>&1 || "$FERRITE" "$1" --help >/dev/null 2>&1
}

MODE=""
POOL=""
BACKING=""
MNT=""
D=""
WORK=""
mounted=0
PROG_TIMEOUT=${PROG_TIMEOUT:-600}
PROG_POOL_SIZE=${PROG_POOL_SIZE:-2G}
SHIM_PREFIX=/pm

# Run a command with a time limit; a hung front end must not hang the script.
# (`timeout` forks the command, so it goes outside `ferrite run`, never inside.)
bounded() {
	timeout -k 10 "$PROG_TIMEOUT" "$@"
}

inpool() {
	case "$MODE" in
	shim) bounded "$FERRITE" run --pool "$POOL" --prefix "$SHIM_PREFIX" -- "$@" ;;
	*) bounded "$@" ;;
	esac
}

fuse_mount() {
	mkdir -p "$MNT"
	bounded "$FERRITE" mount "$POOL" "$MNT" || return 1
	# the daemon may return before the mount is live
	local i
	for i in $(seq 50); do
		mountpoint -q "$MNT" && return 0
		sleep 0.1
	done
	say "mount of $MNT did not appear"
	return 1
}

fuse_umount() {
	mountpoint -q "$MNT" 2>/dev/null || return 0
	if bounded "$FERRITE" umount "$MNT"; then
		# wait until the daemon let go of the pool
		local i
		for i in $(seq 100); do
			mountpoint -q "$MNT" || break
			sleep 0.1
		done
	else
		say "ferrite umount $MNT failed; detaching lazily"
		fusermount3 -uz "$MNT" 2>/dev/null || umount -l "$MNT" 2>/dev/null || true
		return 1
	fi
	! mountpoint -q "$MNT"
}

# Processes that have the pool open or mapped (what fuser would say, without psmisc).
pool_holders() {
	# (processes come and go meanwhile: find and grep may fail on some)
	{
		find /proc/[0-9]*/fd -maxdepth 1 -lname "$POOL" 2>/dev/null || true
		grep -lsF " $POOL" /proc/[0-9]*/maps 2>/dev/null || true
	} | cut -d/ -f3 | sort -un
}

# Wait until no process holds the pool (a FUSE daemon exits shortly after the unmount).
pool_wait_free() {
	local i h
	for i in $(seq 100); do
		h=$(pool_holders)
		[ -z "$h" ] && return 0
		sleep 0.1
	done
	say "pool $POOL still in use by: $(for i in $h; do echo "$i $(cat /proc/"$i"/comm 2>/dev/null)"; done | tr '\n' ' ')"
	return 1
}

# fsck; output to $WORK/fsck.out. Returns fsck's status (0 clean).
ferrite_fsck() {
	local rc=0
	bounded "$FERRITE" fsck "$POOL" >"$WORK/fsck.out" 2>&1 || rc=$?
	if [ $rc != 0 ]; then
		say "ferrite fsck $POOL: exit $rc"
		grep -v 'checking: ' "$WORK/fsck.out" | head -20 >&2
	fi
	return $rc
}

pool_check() {
	case "$MODE" in
	native) return 0 ;;
	shim) ferrite_fsck ;;
	fuse)
		local rc=0
		fuse_umount || return 1
		pool_wait_free || return 1
		ferrite_fsck || rc=$?
		fuse_mount || return 1
		return $rc
		;;
	esac
}

# Free bytes of the pool; nothing in native mode (tmpfs is shared, meaningless).
pool_free() {
	[ -n "$BACKING" ] && { echo ""; return; } # a tiered pool: the backing file system's
	case "$MODE" in
	native) echo "" ;;
	shim) "$FERRITE" info --json "$POOL" | sed -n 's/^ *"free_bytes": *\([0-9]*\).*/\1/p' ;;
	fuse) stat -f -c '%a %S' "$MNT" | awk '{ printf "%.0f\n", $1 * $2 }' ;;
	esac
}

mode_cleanup() {
	set +e
	cd /
	if [ "$MODE" = fuse ] && [ -n "$MNT" ]; then
		if mountpoint -q "$MNT" 2>/dev/null; then
			"$FERRITE" umount "$MNT" >/dev/null 2>&1 || fusermount3 -uz "$MNT" 2>/dev/null ||
				umount -l "$MNT" 2>/dev/null
		fi
		rmdir "$MNT" 2>/dev/null
	fi
	[ -n "$POOL" ] && rm -f "$POOL"
	[ -n "$BACKING" ] && rm -rf "$BACKING"
	[ "$MODE" = native ] && [ -n "$D" ] && rm -rf "$D"
	[ -n "$WORK" ] && rm -rf "$WORK"
	return 0
}

# mode_setup MODE: make the pool (and mount), set $D.
mode_setup() {
	MODE=$1
	WORK=$(mktemp -d /tmp/ferrite-prog.XXXXXX)
	cd "$WORK" # programs that drop files in their working directory drop them here
	case "$MODE" in
	native)
		D=$(mktemp -d /dev/shm/ferrite-prog-$$.XXXXXX)
		say "native: working in $D (tmpfs, no ferrite)"
		return 0
		;;
	shim | fuse) ;;
	*) die "unknown mode '$MODE' (shim | fuse | native)" ;;
	esac
	FERRITE=$(find_ferrite) || die "ferrite command not found; build it or set FERRITE=PATH"
	local need=run
	[ "$MODE" = fuse ] && need=mount
	ferrite_has "$need" || skip_all "$FERRITE has no '$need' subcommand (front end not built?)"
	if [ "$MODE" = fuse ]; then
		[ -c /dev/fuse ] || skip_all "no /dev/fuse"
		command -v fusermount3 >/dev/null || skip_all "fusermount3 not installed"
	fi
	POOL=/dev/shm/ferrite-prog-$$.pool
	local tier=()
	if [ "${PROG_TIER:-0}" = 1 ]; then
		BACKING=$(mktemp -d "${PROG_TIER_DIR:-/var/tmp}/ferrite-prog-backing.XXXXXX")
		tier=(--tier "$BACKING")
		say "tiered pool caching $BACKING ($(df -T "$BACKING" | awk 'NR == 2 { print $2 " on " $1 }'))"
	fi
	bounded "$FERRITE" mkfs --size "$PROG_POOL_SIZE" "${tier[@]}" "$POOL" >"$WORK/mkfs.out" 2>&1 ||
		{
			cat "$WORK/mkfs.out" >&2
			die "ferrite mkfs $POOL failed"
		}
	if [ "$MODE" = shim ]; then
		D=$SHIM_PREFIX
		say "shim: $FERRITE run --pool $POOL --prefix $SHIM_PREFIX"
	else
		MNT=/tmp/ferrite-prog-$$.mnt
		fuse_mount || die "ferrite mount $POOL $MNT failed"
		D=$MNT
		say "fuse: $POOL mounted on $MNT"
	fi
}

# Descendants of PID (children first), one per line.
descendants() {
	local c
	for c in $(pgrep -P "$1" 2>/dev/null); do
		echo "$c"
		descendants "$c"
	done
}
# The process running program NAME started as PID: PID itself or one of its
# descendants (`ferrite run` and `timeout` may sit in between).
find_prog() {
	local p
	for p in "$1" $(descendants "$1"); do
		if [ "$(cat /proc/"$p"/comm 2>/dev/null)" = "$2" ]; then
			echo "$p"
			return 0
		fi
	done
	return 1
}

# ---- results ---------------------------------------------------------------------
failures=0
results=()
pass() {
	results+=("PASS $1")
	echo "PASS $1"
}
fail() {
	results+=("FAIL $1: $2")
	echo "FAIL $1: $2"
	failures=$((failures + 1))
}
# run NAME FN ARGS...: one check; FN sets $why when it fails.
run() {
	local name=$1 t0=$SECONDS
	shift
	why=""
	say "$name ..."
	if "$@"; then
		pass "$name ($((SECONDS - t0)) s)"
	else
		fail "$name" "${why:-failed}"
	fi
}
summary() {
	local r xf=0
	for r in "${results[@]}"; do case "$r" in XFAIL*) xf=$((xf + 1)) ;; esac; done
	echo "---- $PROG_NAME $MODE: $((${#results[@]} - failures - xf)) passed, $failures failed$([ $xf = 0 ] || echo ", $xf known limitations (XFAIL)")"
	for r in "${results[@]}"; do
		case "$r" in FAIL* | XFAIL*) echo "  $r" ;; esac
	done
}

# Show the tail of a program's output file after a failure.
show() {
	echo "  --- last lines of $(basename "$1"):" >&2
	tail -n "${2:-15}" "$1" | sed 's/^/  | /' >&2
}
