#!/usr/bin/env bash
# plot_test.sh -- `ferrite bench --quick` as an installed user runs it: first
# without gnuplot in PATH (said at the start and at the end, the JSON still
# written; exit 1 only when --svg asked for the plot), then with gnuplot:
# groups a) and b) with progress on stderr, the ext4 column on a loop device
# when root (skipped with a reason otherwise), the JSON results and the SVG
# plot in --out. Exits 77 (skipped) after the first part when gnuplot is not
# installed. Never looks at a figure: timings decide nothing here.
# Usage: plot_test.sh PATH/TO/ferrite
set -u
FERRITE=${1:?usage: plot_test.sh PATH/TO/ferrite}
tag=ferrite-bench-plot-$$
out=$(mktemp -d "${TMPDIR:-/tmp}/$tag.XXXXXX")
fail=0
trap 'rm -rf "$out" /dev/shm/$tag /dev/shm/$tag*.pool' EXIT
bad() {
	echo "FAIL: $*"
	fail=1
}

# No gnuplot in PATH: said before measuring and again at the end; the run
# goes on and writes the JSON, and only a plot asked for with --svg fails it.
nogp() { # nogp NAME [ARGS...]
	local name=$1
	shift
	PATH=/nonexistent "$FERRITE" bench --quick --only micro --backends ferrite,tmpfs --no-ext4 \
		--workdir "/dev/shm/$tag" --pool "/dev/shm/$tag.pool" --out "$out/$name" "$@" \
		>"$out/stdout" 2>"$out/stderr"
}
nogp nogp
rc=$?
[ $rc -eq 0 ] || bad "without gnuplot: exit $rc, not 0: $(tail -3 "$out/stderr")"
head -1 "$out/stderr" | grep -q "gnuplot is not installed.*apt-get install gnuplot-nox.*--no-plot" ||
	bad "without gnuplot: not said first: $(head -1 "$out/stderr")"
awk '/results written to/ { w = 1 } w && /no plot: gnuplot is not installed \(apt-get install gnuplot-nox/ { f = 1 }
	END { exit !f }' "$out/stderr" || bad "without gnuplot: not said at the end: $(tail -3 "$out/stderr")"
[ -s "$out/nogp/ferrite-bench.json" ] || bad "without gnuplot: no JSON"
[ ! -e "$out/nogp/ferrite-bench.svg" ] || bad "without gnuplot: an SVG appeared"
nogp nogp-svg --svg "$out/nogp-svg/asked.svg"
rc=$?
[ $rc -eq 1 ] || bad "without gnuplot, --svg: exit $rc, not 1"
[ -s "$out/nogp-svg/ferrite-bench.json" ] || bad "without gnuplot, --svg: no JSON"
PATH=/nonexistent "$FERRITE" bench --quick --no-plot --svg x.svg >"$out/stdout" 2>"$out/stderr"
rc=$?
[ $rc -eq 2 ] && grep -q "^ferrite bench: --svg and --no-plot together" "$out/stderr" ||
	bad "--svg with --no-plot: exit $rc: $(cat "$out/stderr")"

if ! command -v gnuplot >/dev/null; then
	[ $fail = 0 ] || exit 1
	echo "SKIP: gnuplot is not installed (scripts/deps.sh installs gnuplot-nox)"
	exit 77
fi

"$FERRITE" bench --quick --only micro,meta --workdir "/dev/shm/$tag" --pool "/dev/shm/$tag.pool" \
	--out "$out/res" >"$out/stdout" 2>"$out/stderr"
rc=$?
[ $rc -eq 0 ] || bad "ferrite bench --quick: exit $rc"
grep -q "group 1 of 2: a) micro" "$out/stderr" || bad "no progress line for group a)"
grep -q "group 2 of 2: b) metadata" "$out/stderr" || bad "no progress line for group b)"
grep -q "^a) ctFS micro-benchmarks" "$out/stdout" || bad "no table of group a)"
if [ "$(id -u)" = 0 ]; then
	grep -qE "^  ext4 +(.* on /dev/loop|SKIPPED: .+)" "$out/stdout" || bad "ext4: neither a loop device nor a reason"
else
	grep -q "^  ext4 .*SKIPPED: not root" "$out/stdout" || bad "ext4 not skipped for a user"
fi
json=$out/res/ferrite-bench.json svg=$out/res/ferrite-bench.svg
[ -s "$json" ] || bad "no $json"
[ -s "$svg" ] || bad "no $svg"
if command -v python3 >/dev/null && [ -s "$json" ]; then
	python3 - "$json" <<'PY' || bad "the JSON is not what it should be"
import json, sys
d = json.load(open(sys.argv[1]))
groups = {r["group"] for r in d["results"]}
assert groups == {"micro", "meta"}, groups
backends = {r["backend"] for r in d["results"]}
assert {"ferrite", "tmpfs", "raw"} <= backends, backends
assert any("ferrite_ratio" in r for r in d["results"])
PY
fi
if [ -s "$svg" ]; then
	grep -q "<svg" "$svg" && grep -q "</svg>" "$svg" || bad "$svg is not a whole SVG"
	grep -q "ferrite / tmpfs" "$svg" || bad "$svg has no ferrite / tmpfs series"
	grep -q "Append" "$svg" || bad "$svg names no workload"
	if command -v xmllint >/dev/null; then
		xmllint --noout "$svg" || bad "$svg is not well-formed XML"
	fi
fi

[ $fail = 0 ] && echo "plot_test: all passed"
exit $fail
