#!/bin/bash
# exec_only_test.sh FERRITE [tier]
# Execute-only files through the mount: another user may run a program whose
# mode grants them execute alone (0711), as on any kernel file system, and
# still may not read it -- not even by asking open(2) for the kernel's
# exec flag, which the kernel strips from a program's open. The daemon sees
# the exec as an open with FERRITE_O_EXEC and checks execute permission.
# A script of mode 0711 fails for them as on Linux (the shell must read it).
# With `tier` the pool caches a backing directory. Needs root, /dev/fuse,
# fusermount3 and setpriv (77 = skipped).
set -u
FERRITE=$1 kind=${2:-pm}
# shellcheck source=common.sh
. "$(dirname "$0")/common.sh"
[ "$(id -u)" = 0 ] || { echo "SKIP: needs root"; exit 77; }
if [ ! -e /dev/fuse ] || ! command -v fusermount3 >/dev/null || ! command -v setpriv >/dev/null; then
	echo "SKIP: no /dev/fuse, fusermount3 or setpriv"
	exit 77
fi
scratch_setup exec-test
pool=$tmp/pool backing=$tmp/backing
mkdir "$backing"
tier=()
[ "$kind" = tier ] && tier=(--tier "$backing")
"$FERRITE" mkfs --size 64M "${tier[@]}" "$pool" >/dev/null 2>&1 || { echo "mkfs failed"; exit 1; }
"$FERRITE" mount "$pool" "$mnt" || { echo "mount failed"; exit 1; }
chmod 755 "$mnt"
as_user() { setpriv --reuid=65534 --regid=65534 --clear-groups "$@"; }

cp /bin/true "$mnt/prog" && chmod 0711 "$mnt/prog" || bad "cannot install the program"
printf '#!/bin/sh\nexit 0\n' >"$mnt/script" && chmod 0711 "$mnt/script"
as_user "$mnt/prog" || bad "a 0711 program does not run for another user (exit $?)"
as_user cat "$mnt/prog" >/dev/null 2>&1 && bad "another user read a 0711 program"
as_user perl -e 'sysopen(F, $ARGV[0], 040) or exit 1; exit(sysread(F, $b, 16) > 0 ? 0 : 1)' \
	"$mnt/prog" && bad "open(2) with the exec flag read a 0711 program"
as_user "$mnt/script" 2>/dev/null && bad "a 0711 script ran for another user (Linux refuses)"
chmod 0700 "$mnt/prog"
as_user "$mnt/prog" 2>/dev/null && bad "a 0700 program ran for another user"
chmod 0644 "$mnt/prog"
"$mnt/prog" 2>/dev/null && bad "root ran a program with no execute bit"
chmod 0755 "$mnt/prog"
"$mnt/prog" || bad "root cannot run a 0755 program"
"$FERRITE" umount "$mnt" || bad "umount"
"$FERRITE" fsck "$pool" >/dev/null 2>&1 || bad "fsck found problems"
[ $fail = 0 ] && echo "exec_only_test ($kind): all passed"
exit $fail
