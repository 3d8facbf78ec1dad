#!/usr/bin/env bash
# gen-man3.sh HEADER README TEMPLATE VERSION OUT -- writes ferrite.h(3) from
# the header itself, so the page cannot drift from the API: the header's
# opening comment (its conventions), each "---- section ----" of declarations
# with their comments as a listing, and the C example of the README (the one
# tests compile). TEMPLATE (docs/man/ferrite.h.3.in) holds the prose around
# them.
set -euo pipefail
header=$1 readme=$2 template=$3 version=$4 out=$5
date=$(LC_ALL=C date -u -d "@${SOURCE_DATE_EPOCH:-$(date +%s)}" '+%B %Y')
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# Text for a no-fill block: tabs expanded, backslashes and leading dots or
# quotes made literal.
roff_literal() { expand -t 8 | sed -e 's/\\/\\e/g' -e "s/^\([.']\)/\\\\\&\1/"; }

# The opening comment, without its frame and its title line.
awk 'NR == 1 { next } /^ \*\// { exit } { sub(/^ \* ?/, "") } body { print } /^$/ { body = 1 }' \
	"$header" | roff_literal >"$tmp/conventions"

# From the first declaration after the FERRITE_API macro to the closing
# extern "C": ".SS" per "---- title ----" comment, the rest as a listing
# (FERRITE_API dropped, it only exports the symbol; the lines that continue
# such a declaration move left with it).
expand -t 8 "$header" | awk '
	function flush() { if (open) { print ".fi"; open = 0 } }
	/^#define FERRITE_API/ { on = 1; print ".SS \"Versions, flags and types\""; next }
	!on { next }
	/^#ifdef __cplusplus/ { flush(); exit }
	/^\/\* ---- .* -+ \*/ {
		t = $0; sub(/^\/\* ---- /, "", t); sub(/ -+ \*\/?.*$/, "", t)
		flush(); print ".SS \"" toupper(substr(t, 1, 1)) substr(t, 2) "\""
		if ($0 !~ /\*\/$/) {   # the title opens a longer comment: keep its text
			print ".nf"; open = 1; print "\001/*"; skip = 1
		}
		next
	}
	skip && /^ \*$/ { skip = 0; next }
	{ skip = 0 }
	!open && /^$/ { next }
	!open { print ".nf"; open = 1 }
	cont && /^            / { $0 = substr($0, 13) }
	/^FERRITE_API / { $0 = substr($0, 13); cont = 1 }
	cont && /;$/ { cont = 0 }
	{ print "\001" $0 }
	END { flush() }' >"$tmp/api.raw"
# literal lines carry a \001 mark so that only they are escaped
while IFS= read -r l; do
	if [[ $l == $'\001'* ]]; then printf '%s\n' "${l#?}" | roff_literal; else printf '%s\n' "$l"; fi
done <"$tmp/api.raw" >"$tmp/api"

awk '/^```c$/ { on = 1; next } on && /^```$/ { exit } on' "$readme" | roff_literal >"$tmp/example"
[ -s "$tmp/example" ] || { echo "gen-man3.sh: no \`\`\`c block in $readme" >&2; exit 1; }

awk -v version="$version" -v date="$date" -v dir="$tmp" '
	function cat(f,   l) { while ((getline l < f) > 0) print l; close(f) }
	/^\.\\"/ { next }
	/^@CONVENTIONS@$/ { cat(dir "/conventions"); next }
	/^@API@$/ { cat(dir "/api"); next }
	/^@EXAMPLE@$/ { cat(dir "/example"); next }
	{ gsub(/@VERSION@/, version); gsub(/@DATE@/, date); print }' "$template" >"$out"
