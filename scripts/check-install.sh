#!/usr/bin/env bash
# check-install.sh BUILD SOURCE MAN_BUILT [CFLAGS] -- the packaging test (ctest
# packaging.install): installs BUILD into a scratch prefix with
# `cmake --install --prefix` and checks the installation from there alone:
# every file is where it belongs, ferrite.pc names that prefix, ferrite.h
# compiles on its own, the README's C example compiles with pkg-config and
# runs, `ferrite run` finds the installed preload library, the man pages
# render (MAN_BUILT=ON), the completion knows every option --help lists,
# the systemd unit verifies, `ferrite bench` runs the installed benchmark,
# and the mount helper and umount helper mount and unmount a pool as
# mount(8) would call them. CFLAGS: for the programs compiled against the
# library (the sanitizer build's -fsanitize=...).
set -euo pipefail
build=$1 src=$2 man_built=${3:-OFF} extra_cflags=${4:-}
tmp=$(mktemp -d -p /dev/shm ferrite-install.XXXXXX)
mnt=$tmp/mnt
cleanup() {
	mountpoint -q "$mnt" 2>/dev/null && { fusermount3 -uz "$mnt" 2>/dev/null || umount -l "$mnt"; }
	rm -rf "$tmp"
}
trap cleanup EXIT
fail() { echo "check-install: $*" >&2; exit 1; }
step() { echo "-- $*"; }

prefix=$tmp/prefix
cmake --install "$build" --prefix "$prefix" >/dev/null
so=$(find "$prefix" -name libferrite.so.0 | head -n 1)
[ -n "$so" ] || fail "libferrite.so.0 not installed"
libdir=$(dirname "$so")
ferrite=$prefix/bin/ferrite

step "files"
for f in bin/ferrite sbin/umount.fuse.ferrite include/ferrite.h \
	share/bash-completion/completions/ferrite; do
	[ -f "$prefix/$f" ] || fail "$f not installed"
done
for f in libferrite.so libferrite.so.0 ferrite/libferrite-preload.so \
	ferrite/libferrite-preload-protect.so pkgconfig/ferrite.pc; do
	[ -e "$libdir/$f" ] || fail "${libdir#"$prefix"/}/$f not installed"
done
[ -n "$(find "$prefix" -name 'ferrite-mount@.service')" ] || fail "ferrite-mount@.service not installed"
[ -x "$(find "$prefix" -name ferrite-crashtest | head -n 1)" ] || fail "ferrite-crashtest not installed"
[ -x "$(find "$prefix" -path '*/ferrite/ferrite-bench' | head -n 1)" ] ||
	fail "ferrite-bench not installed in libexec/ferrite"
grep -q "^prefix=$prefix\$" "$libdir/pkgconfig/ferrite.pc" || fail "ferrite.pc: prefix is not $prefix"
grep -q "$prefix/bin/ferrite" "$prefix/sbin/umount.fuse.ferrite" || fail "umount helper: wrong ferrite"

step "version"
version=$("$ferrite" --version | awk '{ print $2 }')
changelog=$(sed -n '1s/^ferrite (\([^)-]*\).*/\1/p' "$src/debian/changelog")
[ "$changelog" = "$version" ] ||
	fail "debian/changelog is at $changelog, the project at $version: add a changelog entry"

step "pkg-config and the C API"
export PKG_CONFIG_PATH=$libdir/pkgconfig
flags=$(pkg-config --cflags --libs ferrite)
[[ $flags == *"-I$prefix/include"* && $flags == *"-L$libdir"* && $flags == *-lferrite* ]] ||
	fail "pkg-config --cflags --libs ferrite: $flags"
cc=${CC:-cc}
for std in c11 gnu11; do
	echo '#include <ferrite.h>' | $cc -std=$std -Wall -Wextra -Werror -pedantic -fsyntax-only \
		$(pkg-config --cflags ferrite) -x c - || fail "ferrite.h does not compile alone (-std=$std)"
done
if command -v c++ >/dev/null; then
	echo '#include <ferrite.h>' | c++ -Wall -Wextra -Werror -fsyntax-only \
		$(pkg-config --cflags ferrite) -x c++ - || fail "ferrite.h does not compile as C++"
fi
# The README's example as written, inside main(); run with a small pool.
awk '/^```c$/ { on = 1; next } on && /^```$/ { exit } on' "$src/README.md" >"$tmp/example.body"
{
	grep '^#include' "$tmp/example.body"
	echo 'int main(void)'
	echo '{'
	grep -v '^#include' "$tmp/example.body"
	echo 'return 0;'
	echo '}'
} >"$tmp/example.c"
$cc -std=gnu11 -Wall -Wextra -Werror $extra_cflags -o "$tmp/example" "$tmp/example.c" \
	$(pkg-config --cflags --libs ferrite) ||
	fail "the README's C example does not compile: $tmp/example.c"
sed -e "s|\"/dev/shm/my.pool\", NULL)|\"$tmp/my.pool\", \&(struct ferrite_mkfs_opts){.size = 32 << 20})|" \
	-e "s|/dev/shm/my.pool|$tmp/my.pool|g" "$tmp/example.c" >"$tmp/small.c"
$cc -std=gnu11 -Wall -Werror $extra_cflags -o "$tmp/small" "$tmp/small.c" \
	$(pkg-config --cflags --libs ferrite) \
	-Wl,-rpath,"$libdir"
"$tmp/small"
[ "$("$ferrite" cat --pool "$tmp/my.pool" /hello)" = hi ] || fail "the README example wrote no /hello"

step "ferrite run uses the installed preload library"
[ "$(env -u FERRITE_PRELOAD_LIB "$ferrite" run --pool "$tmp/my.pool" -- cat /pm/hello)" = hi ] ||
	fail "ferrite run: no /pm/hello"
[ "$(env -u FERRITE_PRELOAD_PROTECT_LIB "$ferrite" run --protect --pool "$tmp/my.pool" -- cat /pm/hello)" = hi ] ||
	fail "ferrite run --protect: no /pm/hello"

step "ferrite bench runs the installed ferrite-bench"
# A smoke run in a fraction of a second: two columns, a 64 MiB pool, no
# plot (gnuplot is optional); it proves the program is found and linked.
env -u FERRITE_BENCH "$ferrite" bench --quick --only micro --backends ferrite,tmpfs --no-plot \
	--pool-size 64M --pool "$tmp/bench.pool" --workdir "$tmp/bench" --out "$tmp/bench-out" \
	>"$tmp/bench.log" 2>&1 || fail "ferrite bench --quick: $(tail -n 5 "$tmp/bench.log")"
[ -s "$tmp/bench-out/ferrite-bench.json" ] || fail "ferrite bench --quick wrote no JSON"

step "completion"
# The options each --help lists (read here with grep, not the generator's
# awk) must all be offered after `ferrite CMD -`.
cmds=$("$ferrite" --help | awk '/^Commands:/ { on = 1; next } on && /^$/ { exit } on { print $1 }')
for c in $cmds; do
	[ "$c" = help ] && continue
	offered=$(bash -c 'source "$1"; COMP_WORDS=(ferrite "$2" -); COMP_CWORD=2; _ferrite
		printf "%s\n" "${COMPREPLY[@]}"' _ "$prefix/share/bash-completion/completions/ferrite" "$c")
	for o in $("$ferrite" "$c" --help | grep -E '^ {1,6}-' | grep -oE '(^|[ ,])--?[A-Za-z][-A-Za-z0-9]*' |
		tr -d ' ,'); do
		grep -qx -- "$o" <<<"$offered" || fail "completion of '$c' lacks $o (in '$c --help')"
	done
done

if [ "$man_built" = ON ]; then
	step "man pages"
	export MANPATH=$prefix/share/man
	for c in $cmds; do
		[ "$c" = help ] && continue
		[ -f "$prefix/share/man/man1/ferrite-$c.1" ] || fail "no man page ferrite-$c(1)"
	done
	for page in ferrite ferrite-mount ferrite.h; do
		out=$(MANWIDTH=80 man --warnings -P cat "$page" 2>"$tmp/man.err") || fail "man $page failed"
		[ ! -s "$tmp/man.err" ] || fail "man $page: $(cat "$tmp/man.err")"
		[ "$(wc -l <<<"$out")" -gt 20 ] || fail "man $page: too short"
	done
	# captured first: under pipefail, grep -q quitting early would fail the pipe
	page_text=$(man -P cat ferrite 2>/dev/null) || fail "man ferrite failed"
	grep -q 'fuse\.ferrite' <<<"$page_text" || fail "man ferrite does not tell about fuse.ferrite"
fi

if command -v systemd-analyze >/dev/null; then
	step "systemd unit"
	unit=$(find "$prefix" -name 'ferrite-mount@.service')
	mkdir "$tmp/units"
	cp "$unit" "$tmp/units/ferrite-mount@mnt-pm.service"
	# Not every container lets systemd-analyze run; only its verdict on the unit counts.
	if out=$(SYSTEMD_LOG_LEVEL=warning systemd-analyze verify --man=no \
		"$tmp/units/ferrite-mount@mnt-pm.service" 2>&1); then
		:
	elif grep -q 'ferrite-mount@' <<<"$out"; then
		fail "systemd-analyze verify: $out"
	fi
fi

if [ -e /dev/fuse ] && command -v fusermount3 >/dev/null; then
	step "mount helper (ferrite POOL DIR -o ...) and umount helper"
	mkdir "$mnt"
	"$ferrite" "$tmp/my.pool" "$mnt" -o rw,defaults,noauto,_netdev,x-systemd.automount,nofail
	[ "$(cat "$mnt/hello")" = hi ] || fail "mounted pool: no /hello"
	echo through-mount >"$mnt/new"
	"$prefix/sbin/umount.fuse.ferrite" "$mnt"
	! mountpoint -q "$mnt" || fail "umount.fuse.ferrite left $mnt mounted"
	"$ferrite" fsck "$tmp/my.pool" >/dev/null || fail "fsck after the helpers' mount and umount"
	[ "$("$ferrite" cat --pool "$tmp/my.pool" /new)" = through-mount ] || fail "written file lost"
fi
echo "check-install: ok"
