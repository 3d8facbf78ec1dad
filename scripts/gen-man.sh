#!/usr/bin/env bash
# gen-man.sh FERRITE VERSION MANDIR OUTDIR -- writes the man pages of the
# `ferrite` command: OUTDIR/man1/ferrite.1 and one ferrite-CMD.1 for every
# command `FERRITE --help` lists (but `help`), so a new subcommand gets its
# page with no change here.
#
# Why help2man: the text of a page is the command's own --help, read from the
# binary just built, so a page cannot drift from --help: there is one source,
# the usage text in tools/. What --help does not say (a longer description,
# examples, files, exit status, see also) comes from MANDIR/ferrite[-CMD].h2m,
# help2man's include files (`man help2man`: [SECTION] blocks of roff; a
# section --help also fills is appended to with [>SECTION]). A command
# without an .h2m file still gets a page. (pandoc would need a second,
# hand-kept copy of every option list in markdown.)
set -euo pipefail
ferrite=$1 version=$2 mandir=$3 out=$4
command -v help2man >/dev/null || { echo "gen-man.sh: help2man is not installed" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$out/man1"

# "  NAME   summary" lines of the Commands: list in `ferrite --help`.
"$ferrite" --help | awk '/^Commands:/ { on = 1; next } on && /^$/ { exit }
	on && /^  [a-z]/ { name = $1; sub(/^  [^ ]+ +/, ""); print name "\t" $0 }' >"$tmp/commands"
[ -s "$tmp/commands" ] || { echo "gen-man.sh: no commands in '$ferrite --help'" >&2; exit 1; }

# help2man runs a wrapper per page: --version names the page, --help is the
# command's own, with the usage lines help2man cannot read as a synopsis
# rewritten: a further "ferrite ..." line becomes "or: ferrite ...", and a
# line that continues a long usage line is joined to it.
wrapper() { # wrapper NAME ARGS...
	local w="$tmp/$1"
	shift
	{
		echo '#!/bin/sh'
		echo "[ \"\$1\" = --version ] && { echo '${w##*/} $version'; exit 0; }"
		printf '%q ' "$ferrite" "$@"
		cat <<'AWK'
--help | awk '
	NR == 1 && /^[Uu]sage: / { line = "Usage: " substr($0, 8); usage = 1; next }
	usage && /^[ \t]+ferrite( |$)/ { print line; line = $0; sub(/^[ \t]+/, "  or: ", line); next }
	usage && /^[ \t]+[^ \t]/ { l = $0; sub(/^[ \t]+/, " ", l); line = line l; next }
	usage { print line; usage = 0 }
	{ print }
	END { if (usage) print line }'
AWK
	} >"$w"
	chmod +x "$w"
	echo "$w"
}

page() { # page NAME SUMMARY SEE-ALSO-ROFF WRAPPER
	local name=$1 summary=$2 see=$3 w=$4 inc=()
	local h2m="$mandir/$name.h2m"
	if [ -f "$h2m" ]; then
		inc=(--include "$h2m")
		# the hand-written [SEE ALSO] follows ours: separate them
		grep -qi '^\[see also\]' "$h2m" && see="${see%$'\n'}",$'\n'
	fi
	printf '[SEE ALSO]\n%s' "$see" >"$tmp/$name.see"
	help2man --no-info --section 1 --source "Ferrite $version" --manual "Ferrite manual" \
		--name "$summary" --include "$tmp/$name.see" "${inc[@]}" \
		--output "$out/man1/$name.1" "$w"
	# help2man reports a command whose --help printed nothing only as a warning
	grep -q '^\.SH DESCRIPTION' "$out/man1/$name.1" ||
		{ echo "gen-man.sh: $name: no --help text" >&2; exit 1; }
}

all_see=
while IFS=$'\t' read -r cmd summary; do
	[ "$cmd" = help ] && continue
	all_see+=".BR ferrite-$cmd (1),"$'\n'
	page "ferrite-$cmd" "$summary" $'.BR ferrite (1)\n' "$(wrapper "ferrite-$cmd" "$cmd")"
done <"$tmp/commands"
page ferrite "a persistent-memory file system in user space" \
	"$all_see"$'.BR ferrite.h (3)\n' "$(wrapper ferrite)"
