/*
 * kill_test.c -- process-crash test: SIGKILL at random moments, then recovery.
 *
 * What it checks: a child process mounts the pool and runs random mutating
 * operations (create/open, write, append, pwrite(v), truncate, fallocate incl.
 * punch, rename in all flavours, unlink, mkdir, rmdir, link, symlink, chmod,
 * chown, utimens; large writes and appends so kills land inside data copies
 * and partition upgrades, descriptors held across unlinks so orphans exist).
 * With --threads T (default 4) the child runs T threads, thread t only inside
 * its own subtree /t<t> (the generator's base prefix, no ".." so that nothing
 * leaves it); with --threads 1 one thread uses the whole namespace, ".."
 * included. Before an op starts a thread records it ("begin") and after it
 * returns its result ("ack") in its own log in a MAP_SHARED region created
 * before fork, which survives SIGKILL and costs no syscall. The parent kills
 * the child after a random delay (sometimes during mount and recovery), then
 * requires:
 *   - ferrite_fsck(pool, repair=0) == FERRITE_FSCK_CLEAN before any mount;
 *   - the pool mounts; for each thread, its subtree equals the same subtree of
 *     a tmpfs mirror on which that thread's acknowledged ops were replayed
 *     (each replayed op must also return what the child saw). The thread's one
 *     op begun but not acknowledged may have happened or not: the subtree must
 *     equal the mirror without it or with it, except for what the pool's mode
 *     allows an interrupted call to leave (see torn_rule()). Several threads
 *     may be in flight at once; their subtrees are disjoint, so each one is
 *     checked on its own;
 *   - the file/dir/symlink counts of ferrite_get_info match the tree (no orphan
 *     inode of the dead process survives recovery).
 * The next trial starts from the recovered state, so the pool accumulates
 * history (entries renamed deeper than the generator reaches are then removed
 * on both sides, see prune(), so that the tree stays bounded). Why that
 * proves the property: every acknowledged effect is present byte for byte,
 * nothing else is (the mirror is the kernel's execution of the same ops), and
 * the only freedom granted is the one docs/contracts.md ("What a crash can
 * show") grants to the interrupted call in the pool's mode.
 *
 * A full pool: on a small pool (--pool-mib) calls fail with ENOSPC, which the
 * tmpfs mirror would not; an acknowledged ENOSPC is replayed as a call that
 * did nothing (fm_exec_refused), so the check proves a refused call left no
 * trace and took nothing acknowledged with it. --expect-full fails the run
 * unless at least one op was refused or cut short (a rate would depend on the
 * build's speed: the sanitizer build runs fewer ops per kill);
 * --keep-free-mib K first fills the pool with a ballast file until K MiB are
 * free; with --scatter it is instead sparse files whose windows hold every
 * 2 MiB unit (reserved or scattered pages), so large writes need compaction,
 * which then runs while kills land (--expect-compaction fails the run unless
 * the children emptied at least one unit).
 *
 * Modes (--mode): the pool is formatted in sync or strict mode, and the data
 * rule for an interrupted write/pwrite/writev/pwritev follows it:
 *   sync   - each byte old or new, size old or new, and when the new size shows
 *            the bytes past the old size are all new (appends are atomic);
 *   strict - none: the subtree equals the mirror wholly before or wholly after.
 * In both modes truncate, O_TRUNC and fallocate (allocation, size) are
 * metadata-atomic: wholly before or after. A hole punch releases and zeroes
 * in several steps, so each of its bytes may be old or zero (size unchanged).
 *
 * Replay: `kill_test --seed S --trials N --threads T --mode M` re-runs the
 * same op streams and the same kill delays; where the kill lands in time and
 * how threads interleave are not reproducible, so a failure also keeps the
 * pool, the mirror and every thread's op log of the trial.
 * Harness self-tests (no Ferrite): --posix runs the child on a tmpfs
 * directory; --inject-bug plants a bug there (see fm_posix.c), which must be
 * reported (--expect-failure) or, for a tear that the mode allows, must pass
 * with the tear seen (--expect-torn).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "fm.h"

#include <errno.h>
#include <stdarg.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "ferrite.h"

#define CAP  16384 /* ops recorded per thread and trial; a thread stalls when full */
#define MAXT 16

/* One thread's log. The thread stores op i in its records, then begun = i + 1
 * (release); when the op returns, its result, then acked = i + 1 (release).
 * So after a SIGKILL acked <= begun <= acked + 1, and the records below
 * begun are complete ops. */
struct tlog {
	int64_t begun, acked;
	char pad[48]; /* one cache line per thread */
};

struct hdr {
	int state; /* 1 once the child has mounted */
	int mount_ret;
	uint64_t compactions; /* units the child's compaction emptied (--expect-compaction) */
	char pad[48];
	struct tlog t[MAXT];
};

struct rec {
	struct fm_op op;
	int64_t ret;
	int32_t slot;
	int32_t cut; /* a write that wrote less than asked */
};

static struct hdr *H;
static struct rec *R; /* thread t's records start at R + t * CAP */

static struct rec *rec_of(int t, int64_t i)
{
	return &R[(size_t)t * CAP + (size_t)i];
}

static struct {
	uint64_t seed;
	long trials;
	long max_delay_us;
	uint64_t pool_mib;
	uint64_t keep_free_mib;
	int threads;
	int mode;
	int posix;
	int verbose;
	int fsck_every;
	int bug;
	int expect_failure;
	int expect_torn;
	int expect_full;
	int scatter;	       /* the ballast leaves its free space scattered */
	int expect_compaction; /* fail unless compaction ran while kills landed */
	int lenient_results;
	const char *argv0;
	int64_t max_write; /* per-write tiered pools: what one write does atomically */
} O = {1, 200, 30000, 0, 0, 4, FERRITE_MODE_SYNC, 0, 0, 10, 0, 0, 0, 0, 0, 0, 0, "kill_test", 0};

static char dir[256], pool[300], mirror_dir[300], child_dir[300];

/* Subtree of thread t: "/" for a single thread, else "/t<t>" (set in main). */
static char subtrees[MAXT][16];

static const char *subtree(int t)
{
	return subtrees[t];
}

/* Thread t's op stream of a trial; one thread keeps the streams it always had. */
static void gen_init(struct fm_gen *g, long trial, int t)
{
	uint64_t seed = fm_mix(O.seed, (uint64_t)trial);
	if (O.threads > 1)
		seed = fm_mix(seed, (uint64_t)t + 1);
	fm_gen_init(g, seed, FM_PROF_KILL, O.threads > 1 ? subtree(t) : "", O.threads == 1);
	/* A longer write returns a short count: a kill in the middle would
	 * leave one of two states the mirror cannot tell apart from outside. */
	g->max_write = O.max_write;
}

/* ---- child ------------------------------------------------------------------ */

struct worker {
	int t;
	long trial;
	struct fm_backend *be;
};

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	struct tlog *L = &H->t[w->t];
	struct fm_gen g;
	struct fm_side s;
	struct fm_res res;
	gen_init(&g, w->trial, w->t);
	fm_side_init(&s, w->be);
	for (int64_t i = 0;; i++) {
		if (i == CAP)
			for (;;)
				pause();
		struct rec *r = rec_of(w->t, i);
		fm_gen_next(&g, &r->op);
		__atomic_store_n(&L->begun, i + 1, __ATOMIC_RELEASE);
		fm_exec(&s, &r->op, &res);
		r->cut = res.ret >= 0 && res.ret < r->op.len && fm_is_write(&r->op);
		fm_shrink_short_write(&r->op, &res);
		r->ret = res.ret;
		r->slot = res.slot;
		fm_res_free(&res);
		__atomic_store_n(&L->acked, i + 1, __ATOMIC_RELEASE);
	}
	return NULL;
}

static void sleep_us(long us);

/* --expect-compaction: the child's compactions (a per-process count),
 * published every few milliseconds for the parent to add up after the kill. */
static void *compaction_reporter(void *arg)
{
	struct fm_backend *be = arg;
	for (;;) {
		struct ferrite_info in;
		if (ferrite_get_info(fm_ferrite_fs(be), &in) == 0)
			__atomic_store_n(&H->compactions, in.compactions, __ATOMIC_RELEASE);
		sleep_us(5000);
	}
	return NULL;
}

static void child_main(long trial)
{
	static struct worker w[MAXT];
	struct fm_backend *be = O.posix ? fm_posix_new(child_dir, O.bug) : fm_ferrite_new(pool);
	if (!be) {
		H->mount_ret = -1;
		_exit(3);
	}
	__atomic_store_n(&H->state, 1, __ATOMIC_RELEASE);
	for (int t = 0; t < O.threads; t++)
		w[t] = (struct worker){t, trial, be};
	pthread_t rep;
	if (O.expect_compaction && !O.posix &&
	    pthread_create(&rep, NULL, compaction_reporter, be) != 0)
		_exit(4);
	for (int t = 1; t < O.threads; t++) {
		pthread_t th;
		if (pthread_create(&th, NULL, worker_main, &w[t]) != 0)
			_exit(4);
	}
	worker_main(&w[0]); /* never returns: the parent kills the process */
	_exit(5);
}

/* ---- parent ----------------------------------------------------------------- */

static void sleep_us(long us)
{
	struct timespec ts = {us / 1000000, (us % 1000000) * 1000};
	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

/* Each thread's log as the parent saw it when the trial ended. */
static int64_t acked_of[MAXT], begun_of[MAXT];

static void snap_logs(void)
{
	for (int t = 0; t < O.threads; t++) {
		acked_of[t] = __atomic_load_n(&H->t[t].acked, __ATOMIC_ACQUIRE);
		begun_of[t] = __atomic_load_n(&H->t[t].begun, __ATOMIC_ACQUIRE);
	}
}

static void dump_log(int t, FILE *f, int64_t from)
{
	char s[1000];
	for (int64_t j = from; j < begun_of[t]; j++) {
		fm_op_str(&rec_of(t, j)->op, s, sizeof s);
		if (j < acked_of[t])
			fprintf(f, "  begin %lld %s\n  ack %lld %s\n", (long long)j, s,
				(long long)j, fm_errname(rec_of(t, j)->ret));
		else
			fprintf(f, "  begin %lld %s\n  (killed before ack)\n", (long long)j, s);
	}
}

static void replay_line(FILE *f, long trials)
{
	fprintf(f, "  replay: %s --seed %llu --trials %ld --threads %d --mode %s", O.argv0,
		(unsigned long long)O.seed, trials, O.threads, fm_mode_name(O.mode));
	if (O.pool_mib)
		fprintf(f, " --pool-mib %llu", (unsigned long long)O.pool_mib);
	if (O.keep_free_mib)
		fprintf(f, " --keep-free-mib %llu", (unsigned long long)O.keep_free_mib);
	if (O.scatter)
		fprintf(f, " --scatter");
	if (O.max_delay_us != 30000)
		fprintf(f, " --max-delay-us %ld", O.max_delay_us);
	if (O.fsck_every != 10)
		fprintf(f, " --fsck-every %d", O.fsck_every);
	if (O.posix)
		fprintf(f, " --posix");
	if (O.bug)
		fprintf(f, " --inject-bug %d", O.bug);
	fprintf(f, " --verbose\n  (same op streams and delays; kill timing and thread "
		   "interleaving vary)\n");
}

/* Reports a failed trial; t is the thread whose check failed, -1 if none. */
static int fail(long trial, int t, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static int fail(long trial, int t, const char *fmt, ...)
{
	va_list ap;
	fprintf(stderr, "\nKILL TEST FAILURE: seed %llu, trial %ld, %s mode, %d thread%s",
		(unsigned long long)O.seed, trial, fm_mode_name(O.mode), O.threads,
		O.threads > 1 ? "s" : "");
	if (t >= 0 && O.threads > 1)
		fprintf(stderr, "; thread %d (subtree %s)", t, subtree(t));
	fprintf(stderr, "\n  ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\n");
	for (int u = 0; u < O.threads; u++) {
		if (O.threads > 1)
			fprintf(stderr, "  thread %d (%s): %lld ops acknowledged, %lld begun\n", u,
				subtree(u), (long long)acked_of[u], (long long)begun_of[u]);
		else
			fprintf(stderr, "  %lld ops acknowledged, %lld begun\n",
				(long long)acked_of[u], (long long)begun_of[u]);
	}
	for (int u = 0; u < O.threads; u++) {
		if (t >= 0 && u != t)
			continue;
		int64_t from = begun_of[u] > 30 ? begun_of[u] - 30 : 0;
		fprintf(stderr, "  last ops of thread %d in the trial:\n", u);
		dump_log(u, stderr, from);
	}
	for (int u = 0; u < O.threads; u++) {
		char lp[400];
		snprintf(lp, sizeof lp, "%s/trial-%ld-thread-%d.log", dir, trial, u);
		FILE *f = fopen(lp, "w");
		if (f) {
			dump_log(u, f, 0);
			fclose(f);
		}
	}
	fprintf(stderr, "  full op logs of the trial: %s/trial-%ld-thread-*.log\n", dir, trial);
	fprintf(stderr, "  kept: %s (pool) and %s (mirror)\n", O.posix ? child_dir : pool,
		mirror_dir);
	replay_line(stderr, trial + 1);
	return 1;
}

/* What an interrupted op may leave beyond "wholly before or wholly after"
 * (docs/contracts.md, "What a crash can show"). */
enum torn { TORN_NONE, TORN_BYTES };

static enum torn torn_rule(const struct fm_op *x)
{
	switch (x->kind) {
	case FM_WRITE:
	case FM_PWRITE:
	case FM_WRITEV:
	case FM_PWRITEV:
		/* sync: an overwrite may be partly visible; strict and a tiered
		 * pool (per-write consistency): every write atomic */
		return O.mode == FERRITE_MODE_STRICT || O.mode == FM_MODE_TIER ? TORN_NONE
									       : TORN_BYTES;
	case FM_FALLOCATE:
		/* allocation and size are atomic; a punch zeroes in steps */
		return (x->flags & FALLOC_FL_PUNCH_HOLE) ? TORN_BYTES : TORN_NONE;
	default:
		return TORN_NONE; /* metadata ops, truncate, O_TRUNC: atomic */
	}
}

/* Content of the file behind the mirror's descriptor (posix backend fds are
 * kernel fds; /proc gives a readable one even for O_WRONLY). */
static int mirror_file(int fd, uint8_t **data, size_t *len, uint64_t *ino)
{
	char pp[64];
	struct stat st;
	snprintf(pp, sizeof pp, "/proc/self/fd/%d", fd);
	int rfd = open(pp, O_RDONLY | O_CLOEXEC);
	if (rfd < 0 || fstat(rfd, &st) < 0) {
		if (rfd >= 0)
			close(rfd);
		return -1;
	}
	*ino = st.st_ino;
	*len = (size_t)st.st_size;
	*data = malloc(*len ? *len : 1);
	size_t got = 0;
	while (got < *len) {
		ssize_t r = pread(rfd, *data + got, *len - got, (off_t)got);
		if (r <= 0)
			break;
		got += (size_t)r;
	}
	close(rfd);
	return got == *len ? 0 : -1;
}

/* Outcomes over all trials, per thread and trial. */
static long n_early, n_idle, n_not, n_done, n_torn_write, n_torn_punch, n_warn, n_refused, n_cut;

/* Replays thread t's acknowledged ops on its mirror side; each must return
 * what it returned in the child. */
static int replay_acked(long trial, int t, struct fm_side *ms)
{
	struct fm_res res;
	for (int64_t j = 0; j < acked_of[t]; j++) {
		const struct rec *r = rec_of(t, j);
		if (r->ret == -ENOSPC && !O.posix) {
			/* the mirror has room: the op is checked to have left nothing */
			fm_exec_refused(ms, &r->op, r->ret, &res);
			fm_res_free(&res);
			n_refused++;
			continue;
		}
		if (r->cut && O.mode != FM_MODE_TIER)
			n_cut++; /* short only for lack of space (a tiered pool: by design) */
		fm_exec(ms, &r->op, &res);
		int64_t got = res.ret;
		int slot = res.slot;
		int alt = got != r->ret && fm_err_alternative(&r->op, ms, &res, r->ret);
		fm_res_free(&res);
		char s[1000];
		fm_op_str(&r->op, s, sizeof s);
		if (got != r->ret && !alt && slot == r->slot && O.lenient_results) {
			fprintf(stderr,
				"warning: trial %ld thread %d op %lld %s returned %s in the child, "
				"%s on the mirror\n",
				trial, t, (long long)j, s, fm_errname(r->ret), fm_errname(got));
			n_warn++;
		} else if ((got != r->ret && !alt) || slot != r->slot) {
			return fail(
			    trial, t,
			    "acknowledged op %lld %s returned %s (slot %d) in the child, %s "
			    "(slot %d) on the mirror",
			    (long long)j, s, fm_errname(r->ret), r->slot, fm_errname(got), slot);
		}
	}
	return 0;
}

/* Thread t's subtree on the recovered pool against the mirror, which holds
 * its acknowledged ops; the in-flight op, if any, is applied to the mirror
 * when the pool shows it. */
static int check_subtree(long trial, int t, struct fm_backend *sut, struct fm_side *ms)
{
	char why[4096], first[4096];
	const char *root = subtree(t);
	int in_flight = begun_of[t] > acked_of[t];
	if (fm_tree_compare(sut, ms->be, root, NULL, why, sizeof why) == 0) {
		if (in_flight)
			n_not++;
		else
			n_idle++;
		return 0;
	}
	if (!in_flight)
		return fail(trial, t, "the recovered tree differs from the acknowledged ops: %s",
			    why);
	snprintf(first, sizeof first, "%s", why);
	const struct fm_op *x = &rec_of(t, acked_of[t])->op;
	struct fm_lenient len;
	struct fm_res res;
	memset(&len, 0, sizeof len);
	int slot = fm_pick_slot(ms, x);
	if (torn_rule(x) == TORN_BYTES && ms->fd[slot] >= 0 && ms->fdtype[slot] == S_IFREG &&
	    mirror_file(ms->fd[slot], &len.old, &len.oldlen, &len.ino) == 0) {
		len.active = 1;
		/* the kernel (--posix) may leave a short write; Ferrite publishes the
		 * size of an append last */
		len.strict_append = !O.posix;
	}
	fm_exec(ms, x, &res);
	fm_res_free(&res);
	int rc = fm_tree_compare(sut, ms->be, root, len.active ? &len : NULL, why, sizeof why);
	free(len.old);
	if (rc == 0) {
		if (!len.used)
			n_done++;
		else if (x->kind == FM_FALLOCATE)
			n_torn_punch++;
		else
			n_torn_write++;
		return 0;
	}
	char s[1000];
	fm_op_str(x, s, sizeof s);
	return fail(trial, t,
		    "the recovered tree matches neither the state before nor after the "
		    "interrupted op %s (%s)\n  without it: %s\n  with it:    %s",
		    s,
		    torn_rule(x) == TORN_BYTES ? "bytes may be torn: old or new"
					       : "it must be wholly before or wholly after",
		    first, why);
}

static int check_counts(long trial, struct fm_backend *sut, struct fm_backend *mirror)
{
	struct ferrite_info info;
	struct fm_counts c;
	if (O.mode >= FM_MODE_TIER)
		return 0; /* the tree is the backing directory's: compared as a tree */
	int r = ferrite_get_info(fm_ferrite_fs(sut), &info);
	fm_tree_count(mirror, "/", &c);
	if (r < 0 || info.files != c.files || info.symlinks != c.symlinks ||
	    (info.directories != c.dirs && info.directories + 1 != c.dirs))
		return fail(trial, -1,
			    "after recovery ferrite_get_info (= %s) counts files=%llu "
			    "directories=%llu symlinks=%llu, the tree has %llu files, %llu "
			    "directories (with root), %llu symlinks: orphan inodes of the killed "
			    "process not reclaimed, or counters wrong",
			    fm_errname(r), (unsigned long long)info.files,
			    (unsigned long long)info.directories, (unsigned long long)info.symlinks,
			    (unsigned long long)c.files, (unsigned long long)c.dirs,
			    (unsigned long long)c.symlinks);
	return 0;
}

/* Removes path and everything below it on both sides; each removal must
 * give the same result on both. */
static int remove_both(long trial, int t, struct fm_backend *sut, struct fm_backend *mirror,
		       const char *path)
{
	struct stat st;
	if (mirror->lstat(mirror->ctx, path, &st) < 0)
		return 0;
	int ra, rb;
	const char *what = "unlink";
	if (S_ISDIR(st.st_mode)) {
		struct fm_dent *e;
		int n;
		fm_tree_list(mirror, path, &e, &n);
		for (int i = 0; i < n; i++) {
			char child[FM_PATH + 300];
			snprintf(child, sizeof child, "%s/%s", path, e[i].name);
			if (remove_both(trial, t, sut, mirror, child)) {
				free(e);
				return 1;
			}
		}
		free(e);
		what = "rmdir";
		ra = sut->rmdir(sut->ctx, path);
		rb = mirror->rmdir(mirror->ctx, path);
	} else {
		ra = sut->unlink(sut->ctx, path);
		rb = mirror->unlink(mirror->ctx, path);
	}
	if (ra != rb)
		return fail(trial, t, "pruning after the checks: %s(\"%s\") = %s, on the mirror %s",
			    what, path, fm_errname(ra), fm_errname(rb));
	return 0;
}

/* The generator names paths at most PRUNE_DEPTH - 1 levels below a
 * namespace's root, but renaming a directory carries entries deeper, where
 * they stay for good: the tree, and with it each trial's comparison, would
 * grow without bound. So after the checks, entries at depth PRUNE_DEPTH and
 * below are removed on both sides (which also exercises unlink and rmdir of
 * accumulated history). */
#define PRUNE_DEPTH 3

static int prune(long trial, int t, struct fm_backend *sut, struct fm_backend *mirror,
		 const char *path, int depth)
{
	struct fm_dent *e;
	int n, rc = 0;
	fm_tree_list(mirror, path, &e, &n);
	for (int i = 0; i < n && !rc; i++) {
		char child[FM_PATH + 300];
		struct stat st;
		snprintf(child, sizeof child, "%s%s%s", path, strcmp(path, "/") ? "/" : "",
			 e[i].name);
		if (depth + 1 >= PRUNE_DEPTH)
			rc = remove_both(trial, t, sut, mirror, child);
		else if (mirror->lstat(mirror->ctx, child, &st) == 0 && S_ISDIR(st.st_mode))
			rc = prune(trial, t, sut, mirror, child, depth + 1);
	}
	free(e);
	return rc;
}

static int verify(long trial, struct fm_backend *mirror)
{
	char why[4096];
	if (!O.posix) {
		int r = fm_ferrite_fsck(pool, why, sizeof why);
		if (r != FERRITE_FSCK_CLEAN)
			return fail(trial, -1, "fsck of the killed pool is not clean:\n%s", why);
	}
	struct fm_backend *sut = O.posix ? fm_posix_new(child_dir, 0) : fm_ferrite_new(pool);
	if (!sut)
		return fail(trial, -1, "the killed pool does not mount (see above)");
	struct fm_side ms[MAXT];
	for (int t = 0; t < O.threads; t++)
		fm_side_init(&ms[t], mirror);
	int rc = 0;
	for (int t = 0; t < O.threads && !rc; t++)
		rc = replay_acked(trial, t, &ms[t]) || check_subtree(trial, t, sut, &ms[t]);
	if (!rc && !O.posix)
		rc = check_counts(trial, sut, mirror);
	for (int t = 0; t < O.threads; t++)
		fm_side_close_all(&ms[t]);
	for (int t = 0; t < O.threads && !rc; t++)
		rc = prune(trial, t, sut, mirror, subtree(t), 0);
	if (!rc && O.verbose) {
		printf("trial %ld:", trial);
		for (int t = 0; t < O.threads; t++)
			printf(" %s%lld acked%s", t ? ", " : "", (long long)acked_of[t],
			       begun_of[t] > acked_of[t] ? " + 1 in flight" : "");
		printf("\n");
	}
	if (O.posix)
		fm_posix_free(sut);
	else if (fm_ferrite_unmount(sut) < 0 && !rc)
		rc = fail(trial, -1, "ferrite_unmount failed after verification");
	if (!rc && !O.posix && O.fsck_every && trial % O.fsck_every == O.fsck_every - 1) {
		int r = fm_ferrite_fsck(pool, why, sizeof why);
		if (r != FERRITE_FSCK_CLEAN)
			rc = fail(trial, -1, "fsck after a clean unmount is not clean:\n%s", why);
	}
	return rc;
}

static struct fm_backend *kept_mirror;

static void free_kept_mirror(void)
{
	if (kept_mirror)
		fm_posix_free(kept_mirror);
	kept_mirror = NULL;
}

/* Owns the mirror backend until exit, whichever way run() returns. */
static void keep_mirror(struct fm_backend *m)
{
	static int registered;
	if (!registered) {
		atexit(free_kept_mirror);
		registered = 1;
	}
	if (!m)
		free_kept_mirror();
	kept_mirror = m;
}

/* Same root attributes on both sides, and each thread's subtree. */
/* --scatter: the ballast is sparse files, each writing one page in eight of
 * two 2 MiB windows, a third more windows than the pool has units (as the
 * explorer's fragmented tree): the first windows reserve a unit each (SCMFS
 * pre-allocation), the later ones take free pages wherever they are. No unit
 * is free then, so a large write needs compaction to get one. */
static int scatter_ballast(struct fm_backend *sut, struct fm_backend *mirror, const char *chunk)
{
	struct fm_backend *both[2] = {sut, mirror};
	struct statvfs sv;
	if (ferrite_statvfs(fm_ferrite_fs(sut), &sv) < 0)
		return -1;
	long units = (long)((uint64_t)sv.f_blocks * sv.f_frsize >> 21), files = units * 2 / 3 + 4;
	char p[64];
	for (int i = 0; i < 2; i++)
		if (both[i]->mkdir(both[i]->ctx, "/ballast.d", 0755) < 0)
			return -1;
	for (long f = 0; f < files; f++) {
		snprintf(p, sizeof p, "/ballast.d/%04ld", f);
		for (int i = 0; i < 2; i++) {
			struct fm_backend *be = both[i];
			int fd = be->open(be->ctx, p, O_CREAT | O_WRONLY, 0644);
			if (fd < 0)
				return -1;
			for (off_t off = 0; off < (4 << 20); off += 32 << 10)
				if (be->pwrite(be->ctx, fd, chunk, 4096, off) != 4096)
					return -1;
			be->close(be->ctx, fd);
		}
	}
	printf("ballast: %ld sparse files, %ld windows for %ld units\n", files, files * 2, units);
	return 0;
}

/* --keep-free-mib: a file outside every name the generator uses fills the
 * pool until only that much is free, on both sides, so that the trials run on
 * a nearly full pool (refusals, reservations given back under pressure). */
static int add_ballast(struct fm_backend *sut, struct fm_backend *mirror)
{
	struct statvfs sv;
	if (ferrite_statvfs(fm_ferrite_fs(sut), &sv) < 0)
		return -1;
	uint64_t avail = (uint64_t)sv.f_bavail * sv.f_frsize, keep = O.keep_free_mib << 20;
	uint64_t want = avail > keep ? avail - keep : 0;
	static char chunk[1 << 16];
	for (size_t i = 0; i < sizeof chunk; i++)
		chunk[i] = (char)(i * 7 + 3);
	if (O.scatter)
		return scatter_ballast(sut, mirror, chunk);
	int fd[2] = {sut->open(sut->ctx, "/ballast", O_CREAT | O_WRONLY, 0644),
		     mirror->open(mirror->ctx, "/ballast", O_CREAT | O_WRONLY, 0644)};
	if (fd[0] < 0 || fd[1] < 0)
		return -1;
	uint64_t done = 0;
	while (done < want) {
		size_t n = want - done < sizeof chunk ? (size_t)(want - done) : sizeof chunk;
		ssize_t w = sut->write(sut->ctx, fd[0], chunk, n);
		if (w <= 0)
			break; /* ENOSPC: statvfs promised a little too much; full is full */
		if (mirror->write(mirror->ctx, fd[1], chunk, (size_t)w) != w)
			return -1;
		done += (uint64_t)w;
	}
	sut->close(sut->ctx, fd[0]);
	mirror->close(mirror->ctx, fd[1]);
	printf("ballast: %llu MiB of %llu MiB free, %llu MiB left\n",
	       (unsigned long long)(done >> 20), (unsigned long long)(avail >> 20),
	       (unsigned long long)((avail - done) >> 20));
	return 0;
}

static int setup(struct fm_backend *mirror)
{
	char why[1024];
	struct fm_backend *sut = O.posix ? fm_posix_new(child_dir, 0) : fm_ferrite_new(pool);
	if (!sut)
		return -1;
	if (!O.posix && fm_ferrite_check_mode(sut, O.mode, why, sizeof why) < 0) {
		fprintf(stderr, "%s\n", why);
		fm_ferrite_unmount(sut);
		return -1;
	}
	struct fm_backend *both[2] = {sut, mirror};
	for (int i = 0; i < 2; i++) {
		struct fm_backend *be = both[i];
		be->chmod(be->ctx, "/", 0755);
		be->chown(be->ctx, "/", 0, 0);
		for (int t = 0; O.threads > 1 && t < O.threads; t++)
			if (be->mkdir(be->ctx, subtree(t), 0755) < 0)
				return -1;
	}
	if ((O.keep_free_mib || O.scatter) && !O.posix && add_ballast(sut, mirror) < 0)
		return -1;
	if (O.posix)
		fm_posix_free(sut);
	else if (fm_ferrite_unmount(sut) < 0)
		return -1;
	return 0;
}

static int run(void)
{
	char why[1024];
	snprintf(dir, sizeof dir, "/dev/shm/ferrite-kill-%d", (int)getpid());
	snprintf(pool, sizeof pool, "%s.pool", dir);
	snprintf(mirror_dir, sizeof mirror_dir, "%s/mirror", dir);
	snprintf(child_dir, sizeof child_dir, "%s/child", dir);
	fm_rm_rf(dir);
	if (mkdir(dir, 0755) < 0 || mkdir(mirror_dir, 0755) < 0 ||
	    (O.posix && mkdir(child_dir, 0755) < 0)) {
		perror(dir);
		return 2;
	}
	/* files of up to 17 MiB, dozens of them per namespace */
	uint64_t mib = O.pool_mib ? O.pool_mib : O.threads == 1 ? 512 : 256 * (uint64_t)O.threads;
	if (!O.posix && fm_ferrite_mkfs(pool, mib << 20, O.mode, why, sizeof why) < 0) {
		fprintf(stderr, "%s\n", why);
		fm_rm_rf(dir);
		fm_pool_remove(pool);
		return 2;
	}
	struct ferrite_tier_info ti;
	if (!O.posix && O.mode == FM_MODE_TIER && ferrite_tier_stats(pool, &ti) == 0)
		O.max_write = (int64_t)ti.atomic_write_max;
	struct fm_backend *mirror = fm_posix_new(mirror_dir, 0);
	/* the mirror outlives every early return of a failed trial */
	keep_mirror(mirror);
	if (!mirror || setup(mirror) < 0) {
		fprintf(stderr, "kill_test: setting up %s failed\n", O.posix ? child_dir : pool);
		return 2;
	}

	size_t shm_len = sizeof(struct hdr) + sizeof(struct rec) * CAP * (size_t)O.threads;
	void *shm = mmap(NULL, shm_len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (shm == MAP_FAILED) {
		perror("mmap");
		return 2;
	}
	H = shm;
	R = (struct rec *)((char *)shm + sizeof(struct hdr));

	struct fm_rng rng = {fm_mix(O.seed, 0xc0ffee)};
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	int64_t total_acked = 0;
	uint64_t compactions = 0;
	for (long trial = 0; trial < O.trials; trial++) {
		memset(H, 0, sizeof *H);
		int early = fm_below(&rng, 100) < 10;
		long delay = early ? (long)fm_below(&rng, 3000)
				   : (long)fm_below(&rng, 1 + ((uint64_t)1 << fm_below(&rng, 16)));
		if (delay > O.max_delay_us && !early)
			delay = O.max_delay_us;
		fflush(stdout);
		fflush(stderr);
		pid_t pid = fork();
		if (pid < 0) {
			perror("fork");
			return 2;
		}
		if (pid == 0)
			child_main(trial);
		if (!early) {
			/* wait until mounted (bounded only by the child's death) */
			for (;;) {
				if (__atomic_load_n(&H->state, __ATOMIC_ACQUIRE))
					break;
				int st;
				if (waitpid(pid, &st, WNOHANG) == pid) {
					snap_logs();
					return fail(trial, -1,
						    "the child exited (status 0x%x) before "
						    "starting: mount failed? "
						    "(ferrite_mount result and message above)",
						    st);
				}
				sleep_us(20);
			}
		}
		sleep_us(delay);
		kill(pid, SIGKILL);
		int st;
		waitpid(pid, &st, 0);
		snap_logs();
		compactions += __atomic_load_n(&H->compactions, __ATOMIC_ACQUIRE);
		if (!WIFSIGNALED(st) || WTERMSIG(st) != SIGKILL) {
			if (WIFSIGNALED(st))
				return fail(trial, -1, "the child died of signal %d (%s) in an op",
					    WTERMSIG(st), strsignal(WTERMSIG(st)));
			return fail(trial, -1,
				    "the child exited with status %d (3: mount failed, 4: "
				    "pthread_create failed)",
				    WEXITSTATUS(st));
		}
		if (!H->state)
			n_early++;
		for (int t = 0; t < O.threads; t++)
			total_acked += acked_of[t];
		if (verify(trial, mirror))
			return 1;
		if (!O.verbose && (trial + 1) % 25 == 0) {
			struct fm_counts c;
			fm_tree_count(mirror, "/", &c);
			printf("trial %ld/%ld ok: %lld ops acknowledged so far; tree %llu files "
			       "%llu dirs %llu symlinks %llu bytes\n",
			       trial + 1, O.trials, (long long)total_acked,
			       (unsigned long long)c.files, (unsigned long long)c.dirs,
			       (unsigned long long)c.symlinks, (unsigned long long)c.bytes);
		}
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	printf("kill test passed (%s mode, %d thread%s%s): %ld kills, %lld ops acknowledged, "
	       "%.1f s\n"
	       "  kills before the mount finished: %ld\n"
	       "  per thread and kill: no op in flight %ld, in-flight op left no trace %ld, "
	       "completed %ld, torn write (legal in sync mode) %ld, torn hole punch %ld\n"
	       "  acknowledged ops the full pool refused (ENOSPC, checked to leave nothing): "
	       "%ld; writes it cut short: %ld\n",
	       fm_mode_name(O.mode), O.threads, O.threads > 1 ? "s" : "",
	       O.posix ? ", kernel child (--posix)" : "", O.trials, (long long)total_acked,
	       (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9, n_early,
	       n_idle, n_not, n_done, n_torn_write, n_torn_punch, n_refused, n_cut);
	if (O.expect_compaction)
		printf("  units emptied by compaction while kills landed: %llu (counted up to "
		       "each kill, every 5 ms)\n",
		       (unsigned long long)compactions);
	keep_mirror(NULL);
	munmap(shm, shm_len);
	fm_rm_rf(dir);
	fm_pool_remove(pool);
	if (n_warn) {
		printf("but %ld acknowledged ops returned another result than on the mirror "
		       "(--lenient-results): FAILED\n",
		       n_warn);
		return 1;
	}
	if (O.expect_full && n_refused + n_cut == 0) {
		printf("--expect-full: no op was refused or cut short for lack of space in %ld "
		       "kills, so the pool was not kept full: FAILED\n",
		       O.trials);
		return 1;
	}
	if (O.expect_compaction && compactions == 0) {
		printf("--expect-compaction: no unit was compacted in %ld kills: FAILED\n",
		       O.trials);
		return 1;
	}
	if (O.expect_torn && n_torn_write == 0) {
		printf("--expect-torn: no kill left a torn write, so the sync rule was not "
		       "exercised: FAILED\n");
		return 1;
	}
	return 0;
}

static void usage(void)
{
	fprintf(stderr,
		"usage: kill_test [--seed S] [--trials N] [--threads T] [--mode sync|strict|tier]\n"
		"                 [--max-delay-us U] [--pool-mib M] [--fsck-every K] [--verbose]\n"
		"                 [--lenient-results] [--keep-free-mib K [--expect-full]]\n"
		"                 [--scatter [--expect-compaction]]\n"
		"                 [--posix [--inject-bug 1|2|3] [--expect-failure | "
		"--expect-torn]]   (harness self-tests)\n");
	exit(2);
}

int main(int argc, char **argv)
{
	O.argv0 = argv[0];
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		const char *v = i + 1 < argc ? argv[i + 1] : NULL;
		if (!strcmp(a, "--seed") && v) {
			O.seed = strtoull(v, NULL, 0);
			i++;
		} else if (!strcmp(a, "--trials") && v) {
			O.trials = strtol(v, NULL, 0);
			i++;
		} else if (!strcmp(a, "--threads") && v) {
			O.threads = atoi(v);
			i++;
		} else if (!strcmp(a, "--mode") && v) {
			O.mode = fm_mode_parse(v);
			/* Epoch consistency acknowledges at epoch ends, not per call:
			 * the explorer and the API tests check it. */
			if (O.mode == FM_MODE_TIER_EPOCH)
				O.mode = -1;
			if (O.mode < 0)
				usage();
			i++;
		} else if (!strcmp(a, "--max-delay-us") && v) {
			O.max_delay_us = strtol(v, NULL, 0);
			i++;
		} else if (!strcmp(a, "--pool-mib") && v) {
			O.pool_mib = strtoull(v, NULL, 0);
			i++;
		} else if (!strcmp(a, "--fsck-every") && v) {
			O.fsck_every = atoi(v);
			i++;
		} else if (!strcmp(a, "--inject-bug") && v) {
			O.bug = atoi(v);
			i++;
		} else if (!strcmp(a, "--lenient-results")) {
			O.lenient_results = 1;
		} else if (!strcmp(a, "--expect-failure")) {
			O.expect_failure = 1;
		} else if (!strcmp(a, "--keep-free-mib") && v) {
			O.keep_free_mib = strtoull(v, NULL, 0);
			i++;
		} else if (!strcmp(a, "--expect-full")) {
			O.expect_full = 1;
		} else if (!strcmp(a, "--scatter")) {
			O.scatter = 1;
		} else if (!strcmp(a, "--expect-compaction")) {
			O.expect_compaction = 1;
		} else if (!strcmp(a, "--expect-torn")) {
			O.expect_torn = 1;
		} else if (!strcmp(a, "--posix")) {
			O.posix = 1;
		} else if (!strcmp(a, "--verbose")) {
			O.verbose = 1;
		} else {
			usage();
		}
	}
	if (O.threads < 1 || O.threads > MAXT) {
		fprintf(stderr, "--threads must be in 1..%d\n", MAXT);
		return 2;
	}
	if (O.bug && !O.posix) {
		fprintf(stderr, "--inject-bug needs --posix\n");
		return 2;
	}
	for (int t = 0; t < O.threads; t++)
		snprintf(subtrees[t], sizeof subtrees[t], O.threads == 1 ? "/" : "/t%d", t);
	umask(0);
	setvbuf(stdout, NULL, _IOLBF, 0);
	int rc = run();
	if (O.expect_failure) {
		/* harness self-test: the planted bug must be reported as a failure */
		printf("%s\n", rc == 1 ? "planted bug detected: ok" : "planted bug NOT detected");
		if (rc == 1) {
			fm_rm_rf(dir);
			fm_pool_remove(pool);
		}
		return rc == 1 ? 0 : 1;
	}
	return rc;
}
