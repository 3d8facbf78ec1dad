#!/usr/bin/env bash
# multiproc.sh -- programs that fork, exec and run side by side, through `ferrite run`
# on one pm pool (docs/contracts.md#processes), each with its own check:
#
#   tests/programs/multiproc.sh [--only LIST]
#
#   shell     bash with pipes, subshells, $(...), here-strings and redirections into
#             the pool; a forked child's writes seen by the parent; children
#             writing through the parent's descriptor share its offset
#   make      make -j2 of a small C project in /pm (its output to a log in /pm),
#             the program run from the pool, a #! script run by path, through
#             `sh -c` and found by execvp in a PATH directory of the pool, then
#             make clean; the host
#             directory the command started in (which holds files of the same
#             names) is byte for byte unchanged
#   git       git clone of a local repository into /pm, a commit, gc, fsck --full
#   tar       tar czf and tar xzf (the gzip child) in the pool, compared
#   venv      python3 -m venv in the pool and pip install of a wheel from a local
#             directory; the package imports from the venv's python
#   rsync     rsync -a into the pool and back out, compared (skipped without rsync)
#   fuse      `ferrite mount -o shared` of the same pool while `ferrite run` programs
#             use it: two writers, one through each, take turns on one file, each
#             waiting for the other's line; new files and sizes show at once
#   together  four sqlite3 processes (separate `ferrite run`s) write one database
#             at once under fcntl locks: every row arrives, integrity_check = ok
# Then `ferrite fsck` must be clean. Exit status as run-programs.sh (77: skipped).
set -euo pipefail
PROG_NAME=multiproc
. "$(dirname "$0")/lib.sh"

only=shell,make,git,tar,venv,rsync,fuse,together
while [ $# -gt 0 ]; do
	case "$1" in
	--only) only=${2:?--only needs a list}; shift ;;
	*) sed -n '3,4p' "$0" >&2; exit 2 ;;
	esac
	shift
done
for t in bash make cc git tar gzip sqlite3 timeout; do
	command -v $t >/dev/null || skip_all "$t is not installed (scripts/deps.sh installs it)"
done
[ -n "${PROG_TIER:-}" ] && skip_all "tiered pools are held by one process"

trap mode_cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM HUP
start=$SECONDS
mode_setup shim

wants() { case ",$only," in *,$1,*) return 0 ;; esac; return 1; }

# A host directory with files named like the project's, hashed before and after.
host_state() { (cd "$1" && find . -printf '%p %y %m %s\n' | sort && find . -type f -exec md5sum {} + | sort); }

# ---- bash -----------------------------------------------------------------------------
t_shell() {
	local out=$WORK/shell.out
	cat >"$WORK/shell.sh" <<'EOF'
set -e
mkdir -p /pm/sh && cd /pm/sh
seq 1 2000 | sort -rn | head -5 > top            # a pipeline into the pool
[ "$(head -1 top)" = 2000 ]
(cd /pm/sh && echo sub > from-subshell)          # a subshell
[ "$(cat from-subshell)" = sub ]
n=$(wc -l < top); [ "$n" = 5 ]                   # $(...) reading the pool
{ echo a; echo b; } >> log; echo c >> log         # appends
[ "$(tr -d '\n' < log)" = abc ]
x=$(cat <<< "here" | tr a-z A-Z); [ "$x" = HERE ] # here-string, pipe, command substitution
ls /pm/sh | grep -c . > count; [ "$(cat count)" = 4 ]   # top from-subshell log count
bash -c 'echo child > /pm/sh/by-child'           # a forked and exec'ed bash
[ "$(cat by-child)" = child ]
for i in 1 2 3; do ( echo "$i" > "f$i" ) & done; wait   # background jobs
echo $(( $(cat f1) + $(cat f2) + $(cat f3) )) > sum; [ "$(cat sum)" = 6 ]
# one description, one offset: children write through the group's descriptor
{ echo one; sh -c 'echo two; bash -c "echo three"'; echo four; ( echo five ); } > shared
[ "$(tr '\n' ' ' < shared)" = "one two three four five " ]
exec 3> shared3; echo x >&3; sh -c 'echo y >&3; exec 3>&-'; echo z >&3; exec 3>&-
[ "$(tr -d '\n' < shared3)" = xyz ]
# a child's copy of a close-on-exec description goes at its exec: the
# parent's close then releases the flock while the child still runs
python3 - <<'PY'
import fcntl, os, signal, time
f = open("/pm/sh/lk", "w")  # close-on-exec, as Python opens files
fcntl.flock(f, fcntl.LOCK_EX)
pid = os.fork()
if pid == 0:
    os.execv("/bin/sh", ["sh", "-c", "echo > /pm/sh/ready; exec sleep 30"])
while not os.path.exists("/pm/sh/ready"):  # the child's new image runs
    time.sleep(0.01)
f.close()
g = open("/pm/sh/lk", "w")
fcntl.flock(g, fcntl.LOCK_EX | fcntl.LOCK_NB)
os.kill(pid, signal.SIGTERM)
os.waitpid(pid, 0)
PY
echo ok
EOF
	inpool bash "$WORK/shell.sh" >"$out" 2>&1 || { show "$out"; why="the script failed"; return 1; }
	grep -qx ok "$out" || { show "$out"; why="the script did not finish"; return 1; }
}

# ---- make -j2 -------------------------------------------------------------------------
t_make() {
	local host=$WORK/make-host out=$WORK/make.out before after
	mkdir -p "$host"
	# decoys: what a recipe run in the wrong directory would build over or delete
	echo "host m.c" >"$host/m.c"
	echo "host object" >"$host/m.o"
	echo "host prog" >"$host/prog"
	before=$(host_state "$host")
	cat >"$WORK/make.sh" <<'EOF'
set -e
mkdir -p /pm/proj && cd /pm/proj
printf '#include <stdio.h>\nint f(void);\nint main(void) { printf("%%d\\n", f()); return 0; }\n' > m.c
printf 'int f(void) { return 42; }\n' > f.c
printf 'all: prog\nprog: m.o f.o\n\t$(CC) -o $@ m.o f.o\n%%.o: %%.c\n\t$(CC) -c $< -o $@\nclean:\n\trm -f *.o prog\n' > Makefile
make -j2 > build.log 2>&1                     # the recipes' output, one offset
grep -q -- '-o prog' build.log && [ "$(grep -c -- '-c ' build.log)" = 2 ]
[ "$(./prog)" = 42 ]
printf '#!/bin/sh\necho "script $1"\n' > s.sh && chmod +x s.sh
[ "$(./s.sh one)" = "script one" ]
[ "$(sh -c './s.sh two')" = "script two" ]
mkdir -p bin && cp s.sh bin/s && [ "$(env PATH=/pm/proj/bin:/usr/bin s three)" = "script three" ] # execvp
make clean
[ ! -e prog ] && [ ! -e m.o ] && [ -e m.c ]
echo ok
EOF
	(cd "$host" && inpool bash "$WORK/make.sh") >"$out" 2>&1 || { show "$out"; why="make in the pool failed"; return 1; }
	grep -qx ok "$out" || { show "$out"; why="the build did not finish"; return 1; }
	after=$(host_state "$host")
	[ "$before" = "$after" ] || { why="the host directory changed: $(diff <(echo "$before") <(echo "$after") | head -3 | tr '\n' ' ')"; return 1; }
}

# ---- git --------------------------------------------------------------------------------
t_git() {
	local src=$WORK/git-src out=$WORK/git.out
	rm -rf "$src"
	git init -q "$src"
	(cd "$src" && seq 1 500 >numbers && mkdir d && echo x >d/x && git add -A &&
		git -c user.name=t -c user.email=t@example.com commit -qm one)
	cat >"$WORK/git.sh" <<EOF
set -e
g() { git -c user.name=t -c user.email=t@example.com -c init.defaultBranch=main "\$@"; }
cd /pm
g clone -q --no-hardlinks "$src" repo
cd repo
echo more >> numbers && g commit -qam two
g gc -q --prune=now
g fsck --full --strict --no-progress
[ "\$(g log --format=%s | tr '\n' ' ')" = "two one " ]
g status --porcelain | wc -l
EOF
	inpool bash "$WORK/git.sh" >"$out" 2>&1 || { show "$out"; why="git in the pool failed"; return 1; }
	[ "$(tail -1 "$out")" = 0 ] || { show "$out"; why="git status: the checkout differs"; return 1; }
}

# ---- tar with gzip ------------------------------------------------------------------
t_tar() {
	local out=$WORK/tar.out
	mkdir -p "$WORK/tartree/a/b" && seq 1 20000 >"$WORK/tartree/a/b/n" && echo hi >"$WORK/tartree/h"
	inpool bash -c "set -e; mkdir -p /pm/tar; tar czf /pm/tar/t.tgz -C '$WORK' tartree;
		mkdir /pm/tar/x; tar xzf /pm/tar/t.tgz -C /pm/tar/x; diff -r '$WORK/tartree' /pm/tar/x/tartree" \
		>"$out" 2>&1 || { show "$out"; why="tar czf/xzf in the pool failed or differs"; return 1; }
}

# ---- python venv and pip ------------------------------------------------------------
t_venv() {
	local out=$WORK/venv.out wheels=$WORK/wheels
	command -v python3 >/dev/null || { why="python3 is missing"; return 1; }
	mkdir -p "$wheels"
	# a minimal wheel, made by hand: no network, no build backend
	python3 - "$wheels" <<'EOF'
import base64, hashlib, sys, zipfile
files = {"ferritedemo/__init__.py": "ANSWER = 42\n",
         "ferritedemo-1.0.dist-info/METADATA": "Metadata-Version: 2.1\nName: ferritedemo\nVersion: 1.0\n",
         "ferritedemo-1.0.dist-info/WHEEL": "Wheel-Version: 1.0\nGenerator: hand\nRoot-Is-Purelib: true\nTag: py3-none-any\n"}
rec = []
for n, c in files.items():
    d = base64.urlsafe_b64encode(hashlib.sha256(c.encode()).digest()).rstrip(b"=").decode()
    rec.append(f"{n},sha256={d},{len(c)}")
rec.append("ferritedemo-1.0.dist-info/RECORD,,")
with zipfile.ZipFile(sys.argv[1] + "/ferritedemo-1.0-py3-none-any.whl", "w") as z:
    for n, c in files.items():
        z.writestr(n, c)
    z.writestr("ferritedemo-1.0.dist-info/RECORD", "\n".join(rec) + "\n")
EOF
	inpool bash -c "set -e; cd /pm; python3 -m venv venv;
		./venv/bin/pip install -q --no-index --find-links '$wheels' ferritedemo;
		./venv/bin/python -c 'import ferritedemo, sys; print(ferritedemo.ANSWER, sys.prefix)'" \
		>"$out" 2>&1 || { show "$out"; why="venv or pip in the pool failed"; return 1; }
	grep -qx "42 /pm/venv" "$out" || { show "$out"; why="the package did not import from the venv"; return 1; }
}

# ---- rsync ------------------------------------------------------------------------------
t_rsync() {
	local out=$WORK/rsync.out
	mkdir -p "$WORK/rs/d" && seq 1 3000 >"$WORK/rs/d/n" && ln -sf d/n "$WORK/rs/link" && chmod 640 "$WORK/rs/d/n"
	inpool bash -c "set -e; rsync -a '$WORK/rs/' /pm/rs/; rsync -a /pm/rs/ '$WORK/rs-back/'" \
		>"$out" 2>&1 || { show "$out"; why="rsync failed"; return 1; }
	diff -r --no-dereference "$WORK/rs" "$WORK/rs-back" >"$out" 2>&1 || { show "$out"; why="rsync round trip differs"; return 1; }
	[ "$(stat -c %a "$WORK/rs-back/d/n")" = 640 ] || { why="rsync -a lost the mode"; return 1; }
}

# ---- the FUSE mount and `ferrite run` on one pool at once ----------------------------
# Two writers take turns on one file, each through its own front end, each
# waiting to see the other's line before writing the next: a cache on either
# side shows up as a wait that never ends (timeout) or a line out of turn.
t_fuse() {
	local mnt=$WORK/shared-mnt out=$WORK/fuse.out rc=0 pa want got seen size
	mkdir -p "$mnt"
	inpool bash -c 'mkdir -p /pm/fs && : > /pm/fs/turns'
	"$FERRITE" mount -o shared "$POOL" "$mnt" >"$out" 2>&1 || { show "$out"; why="ferrite mount -o shared failed"; return 1; }
	# turns.sh FILE ME OTHER N: write "ME i" once "OTHER i-1" (b: "OTHER i") is there
	printf '%s\n' 'f=$1 me=$2 other=$3 n=$4' \
		'for i in $(seq 1 "$n"); do' \
		'	if [ "$me" = b ]; then want="$other $i"; else want="$other $((i - 1))"; fi' \
		'	[ "$want" = "$other 0" ] && want=' \
		'	while [ -n "$want" ] && ! grep -qx "$want" "$f"; do sleep 0.01; done' \
		'	echo "$me $i" >> "$f"' \
		'done' >"$WORK/turns.sh"
	timeout 60 bash "$WORK/turns.sh" "$mnt/fs/turns" a b 40 >"$WORK/fuse-a.out" 2>&1 &
	pa=$!
	inpool timeout 60 bash "$WORK/turns.sh" /pm/fs/turns b a 40 >"$WORK/fuse-b.out" 2>&1 || rc=$?
	wait $pa || rc=$?
	want=$(for i in $(seq 1 40); do echo "a $i"; echo "b $i"; done)
	got=$(cat "$mnt/fs/turns")
	# names and sizes: nothing cached on the mount either
	inpool bash -c 'echo made-by-run > /pm/fs/new && echo 0123456789 >> /pm/fs/turns'
	seen=$(cat "$mnt/fs/new" 2>&1) || true
	size=$(stat -c %s "$mnt/fs/turns")
	"$FERRITE" umount "$mnt" >>"$out" 2>&1 || { show "$out"; why="ferrite umount failed"; return 1; }
	[ $rc = 0 ] || { show "$WORK/fuse-a.out"; show "$WORK/fuse-b.out"; why="the writers did not see each other's lines (status $rc)"; return 1; }
	[ "$got" = "$want" ] || { why="lines out of turn: $(diff <(echo "$want") <(echo "$got") | head -3 | tr '\n' ' ')"; return 1; }
	[ "$seen" = made-by-run ] || { why="the mount did not see a file ferrite run made: $seen"; return 1; }
	[ "$size" = $((${#want} + 1 + 11)) ] || { why="the mount shows size $size, the file has $((${#want} + 1 + 11))"; return 1; }
}

# ---- four sqlite3 processes at once -------------------------------------------------
t_together() {
	local db=/pm/conc.db w pids=() rc=0 got
	printf 'CREATE TABLE t(w INTEGER, i INTEGER, v BLOB, PRIMARY KEY(w, i));\n' |
		inpool sqlite3 -batch -bail "$db" || { why="create failed"; return 1; }
	for w in 1 2 3 4; do
		awk -v w=$w 'BEGIN { print ".timeout 60000"; print "PRAGMA synchronous=FULL;"
			for (i = 1; i <= 300; i++) { print "BEGIN IMMEDIATE;"
				printf "INSERT INTO t VALUES(%d, %d, randomblob(%d));\n", w, i, 100 + i * 13 % 3000
				print "COMMIT;" } }' >"$WORK/conc$w.sql"
		inpool sqlite3 -batch -bail "$db" <"$WORK/conc$w.sql" >"$WORK/conc$w.out" 2>&1 &
		pids+=($!)
	done
	for w in "${!pids[@]}"; do wait "${pids[$w]}" || { rc=$?; show "$WORK/conc$((w + 1)).out"; }; done
	[ $rc = 0 ] || { why="a sqlite3 writer failed (status $rc)"; return 1; }
	got=$(printf 'SELECT count(*), count(DISTINCT w) FROM t;\nPRAGMA integrity_check;\n' |
		inpool sqlite3 -batch "$db" | tr '\n' ' ')
	[ "$got" = "1200|4 ok " ] || { why="rows|writers and integrity: $got, want 1200|4 ok"; return 1; }
}

wants shell && run "bash: pipes, subshells, \$(...), redirections, background jobs" t_shell
wants make && run "make -j2, run from the pool, #! scripts, make clean; host untouched" t_make
wants git && run "git clone, commit, gc, fsck --full" t_git
wants tar && run "tar czf / tar xzf in the pool" t_tar
wants venv && run "python3 -m venv and pip install of a local wheel" t_venv
if wants fuse; then
	if [ -c /dev/fuse ] && command -v fusermount3 >/dev/null; then
		run "a shared FUSE mount and ferrite run take turns on one file" t_fuse
	else
		say "shared FUSE mount: skipped (no /dev/fuse or fusermount3)"
	fi
fi
if wants rsync; then
	if command -v rsync >/dev/null; then run "rsync -a in and out" t_rsync; else say "rsync: not installed, skipped"; fi
fi
wants together && run "four sqlite3 processes on one database" t_together

t_final() {
	# a program's last children may still be exiting
	pool_wait_free || { why="processes still hold the pool"; return 1; }
	ferrite_fsck || { show "$WORK/fsck.out"; why="ferrite fsck $POOL is not clean"; return 1; }
}
run "fsck clean" t_final
summary
say "done in $((SECONDS - start)) s"
[ $failures = 0 ]
