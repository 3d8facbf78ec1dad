# cli_lib.sh -- helpers the command-line tests share (sourced): run the
# ferrite command into $WORK/out and $WORK/err with its status in RC, count
# and print results, and the predicates the checks are made of.

# run ARGS...: runs ferrite; stdout in $WORK/out, stderr in $WORK/err, status in RC.
run() {
	"$FERRITE" "$@" >"$WORK/out" 2>"$WORK/err"
	RC=$?
}

ok() {
	passed=$((passed + 1))
	echo "ok   $1"
}

not_ok() {
	failed=$((failed + 1))
	echo "FAIL $1 (exit $RC)"
	[ -n "${2:-}" ] && echo "     $2"
	sed 's/^/     stdout: /' "$WORK/out" | head -20
	sed 's/^/     stderr: /' "$WORK/err" | head -20
}

skip() {
	skipped=$((skipped + 1))
	echo "skip $1"
}

check() {
	local name=$1
	shift
	if "$@"; then ok "$name"; else not_ok "$name" "failed: $*"; fi
}

err_one_line() {
	local lines
	lines=$(grep -vE '(formatting|checking): +[0-9]+%' "$WORK/err" | tr '\r' '\n' | grep -c .)
	[ "$lines" -eq 1 ] && grep -qE -- "^$1" "$WORK/err"
}

rc_is() { [ "$RC" -eq "$1" ]; }
rc_failed_cleanly() { [ "$RC" -ne 0 ] && [ "$RC" -lt 128 ]; }
out_has() { grep -qE -- "$1" "$WORK/out"; }
err_has() { grep -qE -- "$1" "$WORK/err"; }
err_lacks() { ! grep -qE -- "$1" "$WORK/err"; }
all() {
	local cmd=()
	for arg in "$@" --; do
		if [ "$arg" = -- ]; then
			"${cmd[@]}" || return 1
			cmd=()
		else
			cmd+=("$arg")
		fi
	done
}

