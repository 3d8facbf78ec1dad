/*
 * kill_test.c -- process-crash test: SIGKILL at random moments, then recovery.
 *
 * What it checks: a child process mounts the pool and runs random mutating
 * operations (create/open, write, append, pwrite(v), truncate, fallocate incl.
 * punch, rename in all flavours, unlink, mkdir, rmdir, link, symlink, chmod,
 * chown, utimens; large writes and appends so kills land inside data copies
 * and partition upgrades, descriptors held across unlinks so orphans exist).
 * Before an op starts the child records it ("begin") and after it returns its
 * result ("ack") in a MAP_SHARED region created before fork, which survives
 * SIGKILL and costs no syscall. The parent kills the child after a random
 * delay (sometimes during mount and recovery), then requires:
 *   - ferrite_fsck(pool, repair=0) == FERRITE_FSCK_CLEAN before any mount;
 *   - the pool mounts, and its tree equals a tmpfs mirror on which the
 *     acknowledged ops were replayed (each replayed op must also return what
 *     the child saw). The one op begun but not acknowledged may have happened
 *     or not: the tree must equal the mirror without it or with it; for a data
 *     op, each byte of the file may be old or new (sync mode does not promise
 *     atomic overwrites) but its size must be old or new and appended bytes,
 *     when the new size shows, must all be new (appends are atomic);
 *   - the file/dir/symlink counts of ferrite_get_info match the tree (no orphan
 *     inode of the dead process survives recovery).
 * The next trial starts from the recovered state, so the pool accumulates
 * history. Why that proves the property: every acknowledged effect is present
 * byte for byte, nothing else is (the mirror is the kernel's execution of the
 * same ops), and the only freedom granted is the one the header grants to the
 * interrupted call.
 *
 * Replay: `kill_test --seed S --trials N` re-runs the same op streams and the
 * same kill delays; where the kill lands in time is not reproducible, so a
 * failure also keeps the pool, the mirror and the trial's op log.
 * Harness self-test (no Ferrite): --posix runs the child on a tmpfs directory.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "fm.h"

#include <errno.h>
#include <stdarg.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "ferrite.h"

#define CAP 16384 /* ops recorded per trial; the child stalls when full */

struct hdr {
	int state; /* 1 once the child has mounted */
	int mount_ret;
	int64_t begun, acked;
};

struct rec {
	struct fm_op op;
	int64_t ret;
	int32_t slot;
};

static struct hdr *H;
static struct rec *R;

static struct {
	uint64_t seed;
	long trials;
	long max_delay_us;
	uint64_t pool_mib;
	int posix;
	int verbose;
	int fsck_every;
	int bug;
	int expect_failure;
	int lenient_results;
	const char *argv0;
} O = {1, 200, 30000, 512, 0, 0, 10, 0, 0, 0, "kill_test"};

static char dir[256], pool[300], mirror_dir[300], child_dir[300];

/* ---- child ------------------------------------------------------------------ */

static void child_main(long trial)
{
	struct fm_backend *be = O.posix ? fm_posix_new(child_dir, O.bug) : fm_ferrite_new(pool);
	if (!be) {
		H->mount_ret = -1;
		_exit(3);
	}
	__atomic_store_n(&H->state, 1, __ATOMIC_RELEASE);
	struct fm_gen g;
	struct fm_side s;
	struct fm_res res;
	fm_gen_init(&g, fm_mix(O.seed, (uint64_t)trial), FM_PROF_KILL, "", 1);
	fm_side_init(&s, be);
	for (int64_t i = 0;; i++) {
		if (i == CAP)
			for (;;)
				pause();
		fm_gen_next(&g, &R[i].op);
		__atomic_store_n(&H->begun, i + 1, __ATOMIC_RELEASE);
		fm_exec(&s, &R[i].op, &res);
		R[i].ret = res.ret;
		R[i].slot = res.slot;
		fm_res_free(&res);
		__atomic_store_n(&H->acked, i + 1, __ATOMIC_RELEASE);
	}
}

/* ---- parent ----------------------------------------------------------------- */

static void sleep_us(long us)
{
	struct timespec ts = {us / 1000000, (us % 1000000) * 1000};
	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

static void dump_log(long trial, int64_t acked, int64_t begun, FILE *f, int64_t from)
{
	char s[1000];
	for (int64_t j = from; j < begun; j++) {
		fm_op_str(&R[j].op, s, sizeof s);
		if (j < acked)
			fprintf(f, "  begin %lld %s\n  ack %lld %s\n", (long long)j, s,
				(long long)j, fm_errname(R[j].ret));
		else
			fprintf(f, "  begin %lld %s\n  (killed before ack)\n", (long long)j, s);
	}
	(void)trial;
}

static int fail(long trial, int64_t acked, int64_t begun, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static int fail(long trial, int64_t acked, int64_t begun, const char *fmt, ...)
{
	va_list ap;
	fprintf(stderr,
		"\nKILL TEST FAILURE: seed %llu, trial %ld (%lld ops acknowledged, %lld begun)\n  ",
		(unsigned long long)O.seed, trial, (long long)acked, (long long)begun);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\n  last ops of the trial:\n");
	dump_log(trial, acked, begun, stderr, begun > 30 ? begun - 30 : 0);
	char lp[400];
	snprintf(lp, sizeof lp, "%s/trial-%ld.log", dir, trial);
	FILE *f = fopen(lp, "w");
	if (f) {
		dump_log(trial, acked, begun, f, 0);
		fclose(f);
	}
	fprintf(stderr, "  full op log of the trial: %s\n", lp);
	fprintf(stderr, "  kept: %s (pool) and %s (mirror)\n", O.posix ? child_dir : pool,
		mirror_dir);
	fprintf(stderr,
		"  replay: %s --seed %llu --trials %ld%s --verbose   (same ops and delays; kill "
		"timing varies)\n",
		O.argv0, (unsigned long long)O.seed, trial + 1, O.posix ? " --posix" : "");
	return 1;
}

static int is_data_op(int kind)
{
	return kind == FM_WRITE || kind == FM_PWRITE || kind == FM_WRITEV || kind == FM_PWRITEV ||
	       kind == FM_FALLOCATE;
}

/* Content of the file behind the mirror's descriptor (posix backend fds are
 * kernel fds; /proc gives a readable one even for O_WRONLY). */
static int mirror_file(int fd, uint8_t **data, size_t *len, uint64_t *ino)
{
	char pp[64];
	struct stat st;
	snprintf(pp, sizeof pp, "/proc/self/fd/%d", fd);
	int rfd = open(pp, O_RDONLY | O_CLOEXEC);
	if (rfd < 0 || fstat(rfd, &st) < 0)
		return -1;
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

static long n_none, n_not, n_done, n_torn, n_early, n_warn;

static int verify(long trial, struct fm_backend *mirror)
{
	int64_t acked = __atomic_load_n(&H->acked, __ATOMIC_ACQUIRE);
	int64_t begun = __atomic_load_n(&H->begun, __ATOMIC_ACQUIRE);
	char why[4096];
	if (!O.posix) {
		int r = fm_ferrite_fsck(pool, why, sizeof why);
		if (r != FERRITE_FSCK_CLEAN)
			return fail(trial, acked, begun,
				    "fsck of the killed pool is not clean:\n%s", why);
	}
	struct fm_backend *sut = O.posix ? fm_posix_new(child_dir, 0) : fm_ferrite_new(pool);
	if (!sut)
		return fail(trial, acked, begun, "the killed pool does not mount (see above)");
	struct fm_side ms;
	fm_side_init(&ms, mirror);
	int rc = 0;
	struct fm_res res;
	for (int64_t j = 0; j < acked; j++) {
		fm_exec(&ms, &R[j].op, &res);
		int64_t got = res.ret;
		int slot = res.slot;
		int alt = got != R[j].ret && fm_err_alternative(&R[j].op, &ms, &res, R[j].ret);
		fm_res_free(&res);
		if (got != R[j].ret && !alt && slot == R[j].slot && O.lenient_results) {
			char s[1000];
			fm_op_str(&R[j].op, s, sizeof s);
			fprintf(stderr,
				"warning: trial %ld op %lld %s returned %s in the child, %s on the "
				"mirror\n",
				trial, (long long)j, s, fm_errname(R[j].ret), fm_errname(got));
			n_warn++;
		} else if ((got != R[j].ret && !alt) || slot != R[j].slot) {
			char s[1000];
			fm_op_str(&R[j].op, s, sizeof s);
			rc = fail(trial, acked, begun,
				  "op %lld %s returned %s (slot %d) in the child, %s (slot %d) on "
				  "the mirror",
				  (long long)j, s, fm_errname(R[j].ret), R[j].slot, fm_errname(got),
				  slot);
			goto out;
		}
	}
	const char *outcome = "none in flight";
	if (fm_tree_compare(sut, mirror, "/", NULL, why, sizeof why) == 0) {
		if (begun > acked) {
			outcome = "in-flight op not visible";
			n_not++;
		} else {
			n_none++;
		}
	} else if (begun > acked) {
		char first[4096];
		snprintf(first, sizeof first, "%s", why);
		const struct fm_op *x = &R[acked].op;
		struct fm_lenient len;
		memset(&len, 0, sizeof len);
		int slot = fm_pick_slot(&ms, x);
		if (is_data_op(x->kind) && ms.fd[slot] >= 0 && ms.fdtype[slot] == S_IFREG) {
			if (mirror_file(ms.fd[slot], &len.old, &len.oldlen, &len.ino) == 0) {
				len.active = 1;
				len.strict_append = !O.posix;
			}
		}
		fm_exec(&ms, x, &res);
		fm_res_free(&res);
		if (fm_tree_compare(sut, mirror, "/", len.active ? &len : NULL, why, sizeof why) ==
		    0) {
			outcome = len.used ? "in-flight op torn (legal)" : "in-flight op complete";
			if (len.used)
				n_torn++;
			else
				n_done++;
		} else {
			char s[1000];
			fm_op_str(x, s, sizeof s);
			rc = fail(trial, acked, begun,
				  "the recovered tree matches neither the state before nor after "
				  "the interrupted op %s\n"
				  "  without it: %s\n  with it:    %s",
				  s, first, why);
		}
		free(len.old);
		if (rc)
			goto out;
	} else {
		rc = fail(trial, acked, begun,
			  "the recovered tree differs from the acknowledged ops: %s", why);
		goto out;
	}
	if (!O.posix) {
		struct ferrite_info info;
		struct fm_counts c;
		int r = ferrite_get_info(fm_ferrite_fs(sut), &info);
		fm_tree_count(mirror, "/", &c);
		if (r < 0 || info.files != c.files || info.symlinks != c.symlinks ||
		    (info.directories != c.dirs && info.directories + 1 != c.dirs)) {
			rc = fail(trial, acked, begun,
				  "after recovery ferrite_get_info (= %s) counts files=%llu "
				  "directories=%llu symlinks=%llu, "
				  "the tree has %llu files, %llu directories (with root), %llu "
				  "symlinks: orphan inodes of "
				  "the killed process not reclaimed, or counters wrong",
				  fm_errname(r), (unsigned long long)info.files,
				  (unsigned long long)info.directories,
				  (unsigned long long)info.symlinks, (unsigned long long)c.files,
				  (unsigned long long)c.dirs, (unsigned long long)c.symlinks);
			goto out;
		}
	}
	if (O.verbose)
		printf("trial %ld: %lld ops acknowledged, %s\n", trial, (long long)acked, outcome);
out:
	fm_side_close_all(&ms);
	if (O.posix)
		fm_posix_free(sut);
	else if (fm_ferrite_unmount(sut) < 0 && !rc)
		rc = fail(trial, acked, begun, "ferrite_unmount failed after verification");
	if (!rc && !O.posix && O.fsck_every && trial % O.fsck_every == O.fsck_every - 1) {
		int r = fm_ferrite_fsck(pool, why, sizeof why);
		if (r != FERRITE_FSCK_CLEAN)
			rc = fail(trial, acked, begun,
				  "fsck after a clean unmount is not clean:\n%s", why);
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
	if (!O.posix &&
	    fm_ferrite_mkfs(pool, O.pool_mib << 20, FERRITE_MODE_SYNC, why, sizeof why) < 0) {
		fprintf(stderr, "%s\n", why);
		return 2;
	}
	struct fm_backend *mirror = fm_posix_new(mirror_dir, 0);
	/* the mirror outlives every early return of a failed trial */
	keep_mirror(mirror);
	/* same root attributes on both sides */
	struct fm_backend *sut = O.posix ? fm_posix_new(child_dir, 0) : fm_ferrite_new(pool);
	if (!sut || !mirror)
		return 2;
	sut->chmod(sut->ctx, "/", 0755);
	sut->chown(sut->ctx, "/", 0, 0);
	mirror->chmod(mirror->ctx, "/", 0755);
	mirror->chown(mirror->ctx, "/", 0, 0);
	if (O.posix)
		fm_posix_free(sut);
	else
		fm_ferrite_unmount(sut);

	size_t shm_len = sizeof(struct hdr) + 64 + sizeof(struct rec) * CAP;
	void *shm = mmap(NULL, shm_len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (shm == MAP_FAILED) {
		perror("mmap");
		return 2;
	}
	H = shm;
	R = (struct rec *)((char *)shm + ((sizeof(struct hdr) + 63) & ~(size_t)63));

	struct fm_rng rng = {fm_mix(O.seed, 0xc0ffee)};
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	int64_t total_acked = 0;
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
					return fail(trial, 0, 0,
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
		if (!WIFSIGNALED(st) || WTERMSIG(st) != SIGKILL) {
			int64_t a = H->acked, b = H->begun;
			if (WIFSIGNALED(st))
				return fail(
				    trial, a, b, "the child died of signal %d (%s) inside op %lld",
				    WTERMSIG(st), strsignal(WTERMSIG(st)), (long long)b - 1);
			return fail(trial, a, b, "the child exited with status %d (mount failed?)",
				    WEXITSTATUS(st));
		}
		if (!H->state)
			n_early++;
		total_acked += H->acked;
		if (verify(trial, mirror))
			return 1;
		if (!O.verbose && (trial + 1) % 25 == 0) {
			struct fm_counts c;
			fm_tree_count(mirror, "/", &c);
			printf("trial %ld/%ld ok: %lld ops acknowledged so far; tree %llu files "
			       "%llu dirs %llu "
			       "symlinks %llu bytes\n",
			       trial + 1, O.trials, (long long)total_acked,
			       (unsigned long long)c.files, (unsigned long long)c.dirs,
			       (unsigned long long)c.symlinks, (unsigned long long)c.bytes);
		}
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	printf("kill test passed: %ld trials, %lld ops acknowledged, %.1f s; kill landed before "
	       "the mount finished "
	       "%ld times, between ops %ld, in an op that left no trace %ld, in an op that "
	       "completed %ld, in a "
	       "data op with a torn (legal) result %ld\n",
	       O.trials, (long long)total_acked,
	       (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9, n_early,
	       n_none - n_early, n_not, n_done, n_torn);
	keep_mirror(NULL);
	munmap(shm, shm_len);
	fm_rm_rf(dir);
	unlink(pool);
	if (n_warn) {
		printf("but %ld acknowledged ops returned another result than on the mirror "
		       "(--lenient-results): FAILED\n",
		       n_warn);
		return 1;
	}
	return 0;
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
		} else if (!strcmp(a, "--posix")) {
			O.posix = 1;
		} else if (!strcmp(a, "--verbose")) {
			O.verbose = 1;
		} else {
			fprintf(
			    stderr,
			    "usage: kill_test [--seed S] [--trials N] [--max-delay-us "
			    "U] [--pool-mib M]\n"
			    "                 [--fsck-every K] [--verbose] [--lenient-results]\n"
			    "                 [--posix [--inject-bug 1|2] "
			    "[--expect-failure]]   (harness self-test)\n");
			return 2;
		}
	}
	if (O.bug && !O.posix) {
		fprintf(stderr, "--inject-bug needs --posix\n");
		return 2;
	}
	umask(0);
	setvbuf(stdout, NULL, _IOLBF, 0);
	int rc = run();
	if (O.expect_failure) {
		/* harness self-test: the planted bug must be reported as a failure */
		printf("%s\n", rc == 1 ? "planted bug detected: ok" : "planted bug NOT detected");
		if (rc == 1) {
			fm_rm_rf(dir);
			unlink(pool);
		}
		return rc == 1 ? 0 : 1;
	}
	return rc;
}
