#!/usr/bin/env bash
# Checks that the hardening CMakeLists.txt asks for is really in the shipped
# binaries: full RELRO (a GNU_RELRO segment and BIND_NOW), position-independent
# executables, the stack protector, and _FORTIFY_SOURCE's checked calls.
#
#   check-hardening.sh [--stack-protector] [--fortify N] FILE...
#
# --stack-protector: each FILE must call __stack_chk_fail.
# --fortify N (N > 0): each FILE must call some fortified __*_chk function.
# The CTest `hardening` (top-level CMakeLists.txt) passes what the build was
# configured with. Needs readelf (binutils).
set -euo pipefail
stack=0 fortify=0
while [ $# -gt 0 ]; do
	case "$1" in
	--stack-protector) stack=1; shift ;;
	--fortify) fortify=$2; shift 2 ;;
	--) shift; break ;;
	-*) echo "check-hardening: unknown option $1" >&2; exit 2 ;;
	*) break ;;
	esac
done
[ $# -gt 0 ] || { echo "usage: check-hardening.sh [--stack-protector] [--fortify N] FILE..." >&2; exit 2; }
command -v readelf >/dev/null || { echo "check-hardening: readelf not found (binutils)" >&2; exit 2; }

bad=0
fail() { echo "FAIL $1: $2"; bad=1; this=1; }
for f in "$@"; do
	this=0
	[ -f "$f" ] || { fail "$f" "missing"; continue; }
	hdr=$(readelf -hW "$f")
	seg=$(readelf -lW "$f")
	dyn=$(readelf -dW "$f")
	syms=$(readelf --dyn-syms -W "$f" | awk '$7 == "UND" { sub(/@.*/, "", $8); print $8 }')
	grep -Eq 'Type:[[:space:]]+DYN' <<<"$hdr" ||
		fail "$f" "not position-independent (ELF type $(awk '/Type:/ {print $2}' <<<"$hdr"))"
	what=shared-object
	if grep -q 'INTERP' <<<"$seg"; then # an executable: PIE must be flagged
		what=PIE
		grep -Eq 'FLAGS_1.*PIE' <<<"$dyn" || fail "$f" "an executable without the PIE flag"
	fi
	what+=", full RELRO"
	grep -q 'GNU_RELRO' <<<"$seg" || fail "$f" "no GNU_RELRO segment (link with -z relro)"
	grep -Eq 'BIND_NOW|FLAGS.*[[:space:]]NOW' <<<"$dyn" || fail "$f" "no BIND_NOW (link with -z now)"
	if [ "$stack" = 1 ]; then
		grep -qx '__stack_chk_fail' <<<"$syms" || fail "$f" "no stack protector (__stack_chk_fail)"
		what+=", stack protector"
	fi
	if [ "$fortify" -gt 0 ]; then
		n=$(grep -E '^__[a-z0-9_]+_chk$' <<<"$syms" | grep -vc '^__stack_chk_fail$' || true)
		[ "$n" -gt 0 ] || fail "$f" "no fortified calls (__*_chk) with _FORTIFY_SOURCE=$fortify"
		what+=", $n fortified functions"
	fi
	[ $this = 1 ] || echo "ok   $f: $what"
done
exit $bad
