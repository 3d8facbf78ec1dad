#!/usr/bin/env bash
# package-smoke.sh DEB... -- installs the Debian packages built by
# scripts/build-packages.sh and checks them from the installed files alone
# (nothing of the source or build tree is used): mkfs a pool, mount it
# through a line of an fstab (a scratch one, `mount -T`), write and read a
# file through the mount, umount(8), fsck clean, `man ferrite` renders,
# pkg-config and the README's C example, bash completion, `ferrite run`,
# `ferrite bench` (a smoke run, with its plot when gnuplot is installed), and
# the systemd unit's command line with its stop by SIGTERM. Then it purges
# the packages again (FERRITE_KEEP_PACKAGES=1 keeps them). Run as root.
set -euo pipefail
[ $# -gt 0 ] || { echo "usage: package-smoke.sh DEB..." >&2; exit 2; }
debs=()
for d in "$@"; do debs+=("$(realpath "$d")"); done
readme=$(realpath "$(dirname "$0")/../README.md") # only the example is taken from it

tmp=$(mktemp -d -p /dev/shm ferrite-smoke.XXXXXX)
pool=$tmp/smoke.pool
cleanup() {
	local m
	for m in "$tmp/mnt" "$tmp/unit-mnt"; do
		mountpoint -q "$m" 2>/dev/null && umount -l "$m"
	done
	rm -rf "$tmp"
	if [ "${FERRITE_KEEP_PACKAGES:-0}" != 1 ]; then
		dpkg --purge ferrite libferrite-dev libferrite0 >/dev/null 2>&1 || true
	fi
}
trap cleanup EXIT
fail() { echo "package-smoke: FAILED: $*" >&2; exit 1; }
step() { echo "-- $*"; }
cd "$tmp" # nothing relative resolves into the source tree
export PATH=/usr/sbin:/usr/bin:/sbin:/bin

step "install ${debs[*]##*/}"
# dpkg -i installs even the version already there (apt-get would skip it).
DEBIAN_FRONTEND=noninteractive dpkg -i "${debs[@]}" >/dev/null ||
	DEBIAN_FRONTEND=noninteractive apt-get install -f -y -qq >/dev/null ||
	fail "the packages do not install"
[ "$(command -v ferrite)" = /usr/bin/ferrite ] || fail "ferrite is not /usr/bin/ferrite"
for p in ferrite libferrite0 libferrite-dev; do
	# captured first: under pipefail, grep -q quitting early would fail the pipe
	status=$(dpkg-query -W -f='${Status}\n' "$p" 2>/dev/null || true)
	grep -q "install ok installed" <<<"$status" || fail "$p not installed"
done
version=$(ferrite --version | awk '{ print $2 }')
[ "$version" = "$(dpkg-query -W -f='${Version}' ferrite)" ] ||
	fail "ferrite --version says $version, the package $(dpkg-query -W -f='${Version}' ferrite)"

step "mkfs"
ferrite mkfs --size 64M "$pool" >/dev/null 2>&1 || fail "ferrite mkfs"

step "fstab mount (mount -T)"
mkdir "$tmp/mnt"
line="$pool $tmp/mnt fuse.ferrite defaults,noauto,_netdev,x-systemd.automount,mode=strict 0 0"
echo "$line" >"$tmp/fstab"
mount -T "$tmp/fstab" "$tmp/mnt" || fail "mount -T fstab: $line"
grep -q " $tmp/mnt fuse.ferrite " /proc/mounts || fail "no fuse.ferrite mount on $tmp/mnt"

step "write through the mount"
printf 'hello from the package\n' >"$tmp/mnt/hello"
mkdir "$tmp/mnt/doc"
cp -r /usr/share/doc/ferrite/. "$tmp/mnt/doc/"
diff -r /usr/share/doc/ferrite "$tmp/mnt/doc" || fail "copy through the mount differs"

step "umount (umount.fuse.ferrite waits for the pool)"
umount "$tmp/mnt" || fail "umount"
! mountpoint -q "$tmp/mnt" || fail "still mounted"
ferrite fsck "$pool" >"$tmp/fsck.out" 2>&1 || fail "fsck right after umount: $(cat "$tmp/fsck.out")"
[ "$(ferrite cat --pool "$pool" /hello)" = "hello from the package" ] || fail "/hello lost"

step "man pages"
MANPAGER=cat MANWIDTH=80 man ferrite >"$tmp/man.txt" 2>&1 || fail "man ferrite"
grep -q 'fuse\.ferrite' "$tmp/man.txt" || fail "man ferrite: $(head -5 "$tmp/man.txt")"
for page in ferrite-mkfs ferrite-mount ferrite-bench "3 ferrite.h" "8 umount.fuse.ferrite"; do
	# shellcheck disable=SC2086 # "3 ferrite.h" is two words
	man -P cat $page >/dev/null 2>&1 || fail "man $page"
done

step "pkg-config and the README's C example"
flags=$(pkg-config --cflags --libs ferrite) || fail "pkg-config ferrite"
[[ $flags == *-lferrite* ]] || fail "pkg-config --libs ferrite: $flags"
awk '/^```c$/ { on = 1; next } on && /^```$/ { exit } on' "$readme" >body.c
{
	grep '^#include' body.c
	printf 'int main(void)\n{\n'
	grep -v '^#include' body.c
	printf 'return 0;\n}\n'
} >example.c
# shellcheck disable=SC2086 # flags are words
cc -Wall -Werror -o example example.c $flags || fail "the README example does not compile"
sed -e "s|\"/dev/shm/my.pool\", NULL)|\"$tmp/my.pool\", \&(struct ferrite_mkfs_opts){.size = 32 << 20})|" \
	-e "s|/dev/shm/my.pool|$tmp/my.pool|g" example.c >small.c
# shellcheck disable=SC2086
cc -Wall -Werror -o small small.c $flags && ./small || fail "the README example (small pool)"
[ "$(ferrite cat --pool "$tmp/my.pool" /hello)" = hi ] || fail "the README example wrote no /hello"

step "ferrite run"
[ "$(ferrite run --pool "$pool" -- cat /pm/hello)" = "hello from the package" ] ||
	fail "ferrite run did not read /pm/hello"

step "ferrite bench (/usr/libexec/ferrite/ferrite-bench)"
[ -x /usr/libexec/ferrite/ferrite-bench ] || fail "no /usr/libexec/ferrite/ferrite-bench"
# captured first: under pipefail, grep -q quitting at the first line would
# end the long --help with SIGPIPE and fail the pipe
bench_help=$(ferrite bench --help) || fail "ferrite bench --help failed"
grep -q "^Usage: ferrite bench" <<<"$bench_help" || fail "ferrite bench --help"
# two columns and a 64 MiB pool: a fraction of a second; gnuplot is only suggested
ferrite bench --quick --only micro --backends ferrite,tmpfs --pool-size 64M --pool "$tmp/bench.pool" \
	--workdir "$tmp/bench" --out "$tmp/bench-out" >"$tmp/bench.log" 2>&1 ||
	fail "ferrite bench --quick: $(tail -n 5 "$tmp/bench.log")"
[ -s "$tmp/bench-out/ferrite-bench.json" ] || fail "ferrite bench --quick wrote no JSON"
if command -v gnuplot >/dev/null; then
	grep -q "</svg>" "$tmp/bench-out/ferrite-bench.svg" || fail "ferrite bench --quick drew no plot"
else
	grep -q "gnuplot is not installed" "$tmp/bench.log" || fail "ferrite bench: no word of gnuplot"
fi

step "bash completion"
got=$(bash -c 'source /usr/share/bash-completion/completions/ferrite
	COMP_WORDS=(ferrite mkfs --mo); COMP_CWORD=2; _ferrite; echo "${COMPREPLY[*]}"')
[ "$got" = --mode ] || fail "completion of 'ferrite mkfs --mo': '$got'"

step "systemd unit: verify, and its ExecStart and stop by SIGTERM"
unit=/lib/systemd/system/ferrite-mount@.service
[ -f "$unit" ] || unit=/usr/lib/systemd/system/ferrite-mount@.service
[ -f "$unit" ] || fail "ferrite-mount@.service not installed"
if command -v systemd-analyze >/dev/null; then
	mkdir units && cp "$unit" "units/ferrite-mount@$(systemd-escape --path "$tmp/unit-mnt").service"
	out=$(systemd-analyze verify --man=no units/*.service 2>&1) ||
		! grep -q ferrite-mount <<<"$out" || fail "systemd-analyze verify: $out"
fi
exec_start=$(sed -n 's/^ExecStart=//p' "$unit")
exec_start=${exec_start//%f/$tmp/unit-mnt}
exec_start=${exec_start//\$FERRITE_MOUNT_OPTIONS/-o mode=sync}
mkdir "$tmp/unit-mnt"
# shellcheck disable=SC2086 # the unit's command line, split as systemd does
FERRITE_POOL=$pool $exec_start || fail "the unit's ExecStart: $exec_start"
mountpoint -q "$tmp/unit-mnt" || fail "the unit's ExecStart mounted nothing"
[ "$(cat "$tmp/unit-mnt/hello")" = "hello from the package" ] || fail "unit mount: no /hello"
daemon=
for p in /proc/[0-9]*; do
	[ "$({ tr '\0' ' ' <"$p/cmdline"; } 2>/dev/null)" = \
		"/usr/bin/ferrite mount -o mode=sync $tmp/unit-mnt " ] && daemon=${p#/proc/}
done
[ -n "$daemon" ] || fail "no daemon for $tmp/unit-mnt"
kill -TERM "$daemon" # what systemctl stop does
for _ in $(seq 100); do kill -0 "$daemon" 2>/dev/null || break; sleep 0.1; done
! kill -0 "$daemon" 2>/dev/null || fail "the daemon did not end on SIGTERM"
! mountpoint -q "$tmp/unit-mnt" || fail "SIGTERM left $tmp/unit-mnt mounted"
ferrite fsck "$pool" >"$tmp/fsck.out" 2>&1 || fail "fsck after SIGTERM: $(cat "$tmp/fsck.out")"

echo "package-smoke: all passed"
