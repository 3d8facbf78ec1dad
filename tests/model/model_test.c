/*
 * model_test.c -- model-based test of the whole public API (include/ferrite.h).
 *
 * What it checks: seeded random sequences of every operation in ferrite.h are
 * run on a fresh Ferrite pool and, as the reference model, by the Linux kernel
 * on a tmpfs directory (paths resolved inside it as Ferrite resolves them inside
 * its pool). After every op the return value or errno, the bytes read, the
 * descriptor offset and the stat fields that POSIX fixes (type and permission
 * bits, size, nlink, uid, gid, explicitly set atime/mtime) must agree; every
 * --check-every ops, at the end of a sequence, after every remount and after a
 * final unmount + fsck + mount, the whole trees must agree (names, types,
 * modes, owners, sizes, bytes, symlink targets, hard-link structure).
 *
 * Why that proves the property: the kernel's tmpfs is a correct POSIX file
 * system, so any divergence is a Ferrite bug (or a documented POSIX
 * alternative, see fm_err_alternative); the namespace is small so that
 * operations collide and reach error paths, and sizes cross every partition
 * boundary (4K/32K/256K/2M/16M) so that upgrades are exercised. Variants:
 * --remount K unmounts, fscks and remounts every K ops (state must survive);
 * --threads T runs T threads on disjoint subtrees of one mounted pool (each
 * thread's results are deterministic, so any divergence is a thread-safety bug);
 * --mode strict formats the pool in strict mode (every write atomic): without a
 * crash both modes must behave exactly like POSIX, so the checks are the same,
 * and the mounted pool must report the mode asked for.
 *
 * Replay: a failure prints `model_test --seed S --ops N ... --verbose`.
 * Harness self-test (no Ferrite): --posix-vs-posix [--inject-bug 1|2].
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "fm.h"

#include <errno.h>
#include <execinfo.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "ferrite.h"

struct opts {
	uint64_t seed_lo, seed_hi;
	long ops;
	long remount;
	int threads;
	long check_every;
	int verbose;
	int stats;
	long keep_going;
	int expect_mismatch;
	int no_creat_dir;
	int pvp;   /* posix vs posix */
	int plain; /* posix vs plain-path kernel calls */
	int bug;
	uint64_t pool_mib;
	int mode; /* FERRITE_MODE_SYNC or FERRITE_MODE_STRICT: how the pool is formatted */
	const char *argv0;
};

static struct opts O = {.seed_lo = 1,
			.seed_hi = 1,
			.ops = 15000,
			.check_every = 1000,
			.pool_mib = 256,
			.argv0 = "model_test"};

/* --stats: how often each kind ran, succeeded, and its commonest errors */
static long st_total[FM_NKINDS], st_ok[FM_NKINDS], st_err[FM_NKINDS][140];

static void stats_add(const struct fm_op *op, const struct fm_res *r)
{
	__atomic_add_fetch(&st_total[op->kind], 1, __ATOMIC_RELAXED);
	if (r->ret >= 0)
		__atomic_add_fetch(&st_ok[op->kind], 1, __ATOMIC_RELAXED);
	else if (-r->ret < 140)
		__atomic_add_fetch(&st_err[op->kind][-r->ret], 1, __ATOMIC_RELAXED);
}

static void stats_print(void)
{
	printf("%-18s %8s %8s  errors\n", "op", "count", "ok");
	for (int k = 0; k < FM_NKINDS; k++) {
		printf("%-18s %8ld %8ld ", fm_kind_name(k), st_total[k], st_ok[k]);
		for (int e = 1; e < 140; e++)
			if (st_err[k][e])
				printf(" %s:%ld", fm_errname(-e), st_err[k][e]);
		printf("\n");
	}
}

static pthread_mutex_t out_lock = PTHREAD_MUTEX_INITIALIZER;
static volatile int failed;

#define HIST 24

struct seq {
	int tid;
	uint64_t seed;
	char base[64];
	struct fm_gen gen;
	struct fm_side sa, sb;
	struct fm_backend *a, *b;
	const char *pool; /* NULL unless ferrite */
	char hist[HIST][400];
	long nhist;
	long nmis;
	int rc;
};

static void replay_line(FILE *f, uint64_t seed, long ops)
{
	fprintf(f, "  replay: %s --seed %llu --ops %ld", O.argv0, (unsigned long long)seed, ops);
	if (O.remount)
		fprintf(f, " --remount %ld", O.remount);
	if (O.threads)
		fprintf(f, " --threads %d", O.threads);
	if (O.check_every != 1000)
		fprintf(f, " --check-every %ld", O.check_every);
	if (!fm_errmsg_strict)
		fprintf(f, " --lenient-errmsg");
	if (O.no_creat_dir)
		fprintf(f, " --no-creat-directory");
	if (O.pool_mib != 256)
		fprintf(f, " --pool-mib %llu", (unsigned long long)O.pool_mib);
	if (O.mode != FERRITE_MODE_SYNC)
		fprintf(f, " --mode %s", fm_mode_name(O.mode));
	if (O.plain)
		fprintf(f, " --posix-vs-plain");
	else if (O.pvp)
		fprintf(f, " --posix-vs-posix");
	if (O.bug)
		fprintf(f, " --inject-bug %d", O.bug);
	fprintf(f, " --verbose\n");
}

static void report(struct seq *q, long i, const char *what, const struct fm_op *op,
		   const struct fm_res *ra, const struct fm_res *rb, const char *why)
{
	pthread_mutex_lock(&out_lock);
	failed = 1;
	q->rc = 1;
	char s[1200];
	fprintf(stderr, "\nMISMATCH seed=%llu %s #%ld", (unsigned long long)q->seed, what, i);
	if (O.threads)
		fprintf(stderr, " thread %d (subtree %s)", q->tid, q->base);
	fprintf(stderr, "\n");
	if (op) {
		fm_op_str(op, s, sizeof s);
		fprintf(stderr, "  op:      %s\n", s);
		fm_res_str(op, ra, s, sizeof s);
		fprintf(stderr, "  %-8s %s\n", q->a->name, s);
		fm_res_str(op, rb, s, sizeof s);
		fprintf(stderr, "  %-8s %s\n", q->b->name, s);
	}
	fprintf(stderr, "  why:     %s\n", why);
	if (!O.pvp &&
	    ((ra && (ra->ret == -ENOSPC || ra->st_ret == -ENOSPC)) || strstr(why, "ENOSPC"))) {
		struct ferrite_info in;
		if (ferrite_get_info(fm_ferrite_fs(q->a), &in) == 0) {
			fprintf(
			    stderr,
			    "  pool:    %llu bytes, data %llu, free %llu; %llu files, %llu dirs; "
			    "partitions by level:",
			    (unsigned long long)in.pool_bytes, (unsigned long long)in.data_bytes,
			    (unsigned long long)in.free_bytes, (unsigned long long)in.files,
			    (unsigned long long)in.directories);
			for (int l = 0; l <= in.top_level && l < 16; l++)
				fprintf(stderr, " %llu",
					(unsigned long long)in.partitions_allocated[l]);
			fprintf(stderr, "\n");
			struct fm_counts c;
			fm_tree_count(q->b, q->base[0] ? q->base : "/", &c);
			fprintf(stderr,
				"  tree:    %llu bytes of file data (logical, holes included)\n",
				(unsigned long long)c.bytes);
		}
	}
	fprintf(stderr, "  last ops before it:\n");
	long from = q->nhist > HIST ? q->nhist - HIST : 0;
	for (long k = from; k < q->nhist; k++)
		fprintf(stderr, "    %s\n", q->hist[k % HIST]);
	replay_line(stderr, O.threads ? q->seed : q->seed, i + 1);
	pthread_mutex_unlock(&out_lock);
}

static int tree_check(struct seq *q, long i, const char *when)
{
	char why[2048];
	const char *root = q->base[0] ? q->base : "/";
	if (fm_tree_compare(q->a, q->b, root, NULL, why, sizeof why)) {
		char w[2200];
		snprintf(w, sizeof w, "whole-tree comparison %s: %s", when, why);
		report(q, i, "after op", NULL, NULL, NULL, w);
		return 1;
	}
	return 0;
}

static void run_seq(struct seq *q)
{
	struct fm_op op;
	struct fm_res ra, rb;
	char why[2048];
	fm_side_init(&q->sa, q->a);
	fm_side_init(&q->sb, q->b);
	for (long i = 0; i < O.ops && !failed; i++) {
		fm_gen_next(&q->gen, &op);
		fm_exec(&q->sa, &op, &ra);
		fm_shrink_short_write(&op, &ra);
		fm_exec(&q->sb, &op, &rb);
		char s[400];
		fm_op_str(&op, s, sizeof s);
		snprintf(q->hist[q->nhist % HIST], sizeof q->hist[0], "#%ld %.370s", i % 100000000,
			 s);
		q->nhist++;
		if (O.verbose) {
			char r1[1200], r2[1200];
			fm_res_str(&op, &ra, r1, sizeof r1);
			fm_res_str(&op, &rb, r2, sizeof r2);
			pthread_mutex_lock(&out_lock);
			printf("[%d] #%ld %s\n      %-8s %s\n      %-8s %s\n", q->tid, i, s,
			       q->a->name, r1, q->b->name, r2);
			pthread_mutex_unlock(&out_lock);
		}
		if (O.stats)
			stats_add(&op, &rb);
		int bad = fm_compare(&op, &q->sa, &ra, &q->sb, &rb, why, sizeof why);
		if (bad)
			report(q, i, "op", &op, &ra, &rb, why);
		fm_res_free(&ra);
		fm_res_free(&rb);
		if (bad && ++q->nmis >= O.keep_going)
			return;
		if (bad) {
			failed = 0; /* --keep-going: go on while the trees still agree */
			if (tree_check(q, i, "(after a mismatch, --keep-going)"))
				return;
			failed = 0;
		}
		if (O.check_every && (i + 1) % O.check_every == 0 && tree_check(q, i, "(periodic)"))
			return;
		if (O.remount && q->pool && (i + 1) % O.remount == 0) {
			fm_side_close_all(&q->sa);
			fm_side_close_all(&q->sb);
			if (fm_ferrite_remount(q->a, 1, why, sizeof why) < 0) {
				report(q, i, "remount after op", NULL, NULL, NULL, why);
				return;
			}
			if (tree_check(q, i, "after unmount + fsck + mount"))
				return;
		}
	}
	fm_side_close_all(&q->sa);
	fm_side_close_all(&q->sb);
	if (!failed)
		tree_check(q, O.ops - 1, "at the end of the sequence");
}

static void *thread_main(void *arg)
{
	struct seq *q = arg;
	run_seq(q);
	return NULL;
}

static int check_info(struct seq *q, struct fm_backend *a)
{
	struct ferrite_info info;
	char why[512];
	int r = ferrite_get_info(fm_ferrite_fs(a), &info);
	if (r < 0) {
		snprintf(why, sizeof why, "ferrite_get_info = %s", fm_errname(r));
		report(q, O.ops - 1, "end", NULL, NULL, NULL, why);
		return 1;
	}
	struct fm_counts c;
	fm_tree_count(q->b, "/", &c);
	/* A tiered pool counts only the files it caches; the tree is the
	 * backing directory's. */
	if (O.mode < FM_MODE_TIER &&
	    (info.files != c.files || info.symlinks != c.symlinks ||
	     (info.directories != c.dirs && info.directories + 1 != c.dirs))) {
		snprintf(why, sizeof why,
			 "ferrite_get_info counts files=%llu directories=%llu symlinks=%llu, tree "
			 "has %llu files, %llu "
			 "directories (with root), %llu symlinks (no descriptor is open: orphans "
			 "must be gone)",
			 (unsigned long long)info.files, (unsigned long long)info.directories,
			 (unsigned long long)info.symlinks, (unsigned long long)c.files,
			 (unsigned long long)c.dirs, (unsigned long long)c.symlinks);
		report(q, O.ops - 1, "end", NULL, NULL, NULL, why);
		return 1;
	}
	struct statvfs sv;
	r = ferrite_statvfs(fm_ferrite_fs(a), &sv);
	if (r < 0 || sv.f_bsize == 0 || sv.f_bfree > sv.f_blocks || sv.f_bavail > sv.f_bfree ||
	    sv.f_ffree > sv.f_files) {
		snprintf(why, sizeof why,
			 "ferrite_statvfs = %s: bsize %lu blocks %llu bfree %llu bavail %llu files "
			 "%llu ffree %llu",
			 fm_errname(r), sv.f_bsize, (unsigned long long)sv.f_blocks,
			 (unsigned long long)sv.f_bfree, (unsigned long long)sv.f_bavail,
			 (unsigned long long)sv.f_files, (unsigned long long)sv.f_ffree);
		report(q, O.ops - 1, "end", NULL, NULL, NULL, why);
		return 1;
	}
	return 0;
}

static int run_seed(uint64_t seed)
{
	char dir[256], ref[300], sut[300], pool[300], why[2048];
	snprintf(dir, sizeof dir, "/dev/shm/ferrite-model-%d-%llu", (int)getpid(),
		 (unsigned long long)seed);
	snprintf(ref, sizeof ref, "%s/ref", dir);
	snprintf(sut, sizeof sut, "%s/sut", dir);
	snprintf(pool, sizeof pool, "%s.pool", dir);
	fm_rm_rf(dir);
	if (mkdir(dir, 0755) < 0 || mkdir(ref, 0755) < 0) {
		perror(dir);
		return 2;
	}
	struct fm_backend *a, *b = fm_posix_new(ref, 0);
	if (O.pvp) {
		mkdir(sut, 0755);
		a = O.plain ? fm_posix_plain_new(sut) : fm_posix_new(sut, O.bug);
	} else {
		if (fm_ferrite_mkfs(pool, O.pool_mib << 20, O.mode, why, sizeof why) < 0) {
			fprintf(stderr, "%s\n", why);
			fm_posix_free(b);
			fm_rm_rf(dir);
			unlink(pool);
			return 2;
		}
		a = fm_ferrite_new(pool);
		if (a && fm_ferrite_check_mode(a, O.mode, why, sizeof why) < 0) {
			fprintf(stderr, "%s (kept: %s)\n", why, pool);
			return 2;
		}
	}
	if (!a || !b)
		return 2;
	/* same starting root on both sides */
	a->chmod(a->ctx, "/", 0755);
	b->chmod(b->ctx, "/", 0755);
	a->chown(a->ctx, "/", 0, 0);
	b->chown(b->ctx, "/", 0, 0);

	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	int nthr = O.threads ? O.threads : 1;
	struct seq *qs = calloc((size_t)nthr, sizeof *qs);
	for (int t = 0; t < nthr; t++) {
		struct seq *q = &qs[t];
		q->tid = t;
		q->seed = seed;
		q->a = a;
		q->b = b;
		q->pool = O.pvp ? NULL : pool;
		if (O.threads) {
			snprintf(q->base, sizeof q->base, "/t%d", t);
			a->mkdir(a->ctx, q->base, 0755);
			b->mkdir(b->ctx, q->base, 0755);
		}
		fm_gen_init(&q->gen, O.threads ? fm_mix(seed, (uint64_t)t + 1) : seed,
			    FM_PROF_MODEL, q->base, !O.threads && !O.plain);
		q->gen.no_abs = O.plain;
		q->gen.no_creat_dir = O.no_creat_dir;
	}
	if (O.threads) {
		pthread_t *th = calloc((size_t)nthr, sizeof *th);
		for (int t = 0; t < nthr; t++)
			pthread_create(&th[t], NULL, thread_main, &qs[t]);
		for (int t = 0; t < nthr; t++)
			pthread_join(th[t], NULL);
		free(th);
	} else {
		run_seq(&qs[0]);
	}
	int rc = 0;
	for (int t = 0; t < nthr; t++)
		rc |= qs[t].rc;
	struct seq *q = &qs[0];
	if (!rc && !O.pvp && check_info(q, a))
		rc = 1;
	if (!rc && !O.pvp) {
		/* persistence: unmount, fsck, mount, compare everything again */
		if (fm_ferrite_remount(a, 1, why, sizeof why) < 0) {
			report(q, O.ops - 1, "final remount after op", NULL, NULL, NULL, why);
			rc = 1;
		} else if (fm_tree_compare(a, b, "/", NULL, why, sizeof why)) {
			char w[2200];
			snprintf(w, sizeof w, "after unmount + fsck + mount: %s", why);
			report(q, O.ops - 1, "after the final remount, op", NULL, NULL, NULL, w);
			rc = 1;
		}
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	if (!O.pvp && O.mode >= FM_MODE_TIER) {
		fm_ferrite_unmount(a); /* the counters are saved at unmount */
		a = NULL;
		char line[512];
		fm_tier_stats_line(pool, line, sizeof line);
		printf("seed %llu: %s\n", (unsigned long long)seed, line);
	}
	struct fm_counts c;
	fm_tree_count(b, "/", &c);
	printf("seed %llu: %ld ops%s%s%s, %s (%.1f s; final tree %llu files, %llu dirs, %llu "
	       "symlinks, %llu bytes)\n",
	       (unsigned long long)seed, O.ops * nthr, O.threads ? " over threads" : "",
	       O.remount ? " with remounts" : "",
	       O.pvp			       ? ""
	       : O.mode == FERRITE_MODE_SYNC   ? ", sync mode"
	       : O.mode == FERRITE_MODE_STRICT ? ", strict mode"
	       : O.mode == FM_MODE_TIER	       ? ", tiered (per-write)"
					       : ", tiered (epoch)",
	       rc ? "FAILED" : "ok",
	       (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9,
	       (unsigned long long)c.files, (unsigned long long)c.dirs,
	       (unsigned long long)c.symlinks, (unsigned long long)c.bytes);
	fflush(stdout);
	free(qs);
	if (O.pvp)
		fm_posix_free(a);
	else if (a)
		fm_ferrite_unmount(a);
	fm_posix_free(b);
	if (rc && !O.expect_mismatch) {
		fprintf(stderr, "  kept for inspection: %s%s%s\n", O.pvp ? "" : pool,
			O.pvp ? "" : " and ", dir);
	} else {
		fm_rm_rf(dir);
		fm_pool_remove(pool);
	}
	return rc;
}

/* A crash inside the engine: print where, then die of the same signal. */
static void on_fatal(int sig)
{
	void *bt[64];
	static const char msg[] =
	    "\nmodel_test: fatal signal; backtrace (use addr2line on the binary):\n";
	if (write(2, msg, sizeof msg - 1) < 0) {
	}
	int n = backtrace(bt, 64);
	backtrace_symbols_fd(bt, n, 2);
	signal(sig, SIG_DFL);
	raise(sig);
}

static void usage(void)
{
	fprintf(stderr,
		"usage: model_test [--seed S | --seeds A-B] [--ops N] [--remount K] [--threads T]\n"
		"                  [--check-every N] [--pool-mib M] [--mode "
		"sync|strict|tier|tier-epoch]\n"
		"                  [--verbose] [--stats]\n"
		"                  [--lenient-errmsg]  (count empty ferrite_errmsg() instead of "
		"failing)\n"
		"                  [--keep-going N]  (report up to N op mismatches per seed while "
		"the trees agree)\n"
		"                  [--no-creat-directory]  (never generate O_CREAT|O_DIRECTORY)\n"
		"                  [--posix-vs-posix [--inject-bug 1|2] [--expect-mismatch]]   "
		"(harness self-test)\n"
		"                  [--posix-vs-plain]   (checks the reference's path emulation)\n");
	exit(2);
}

int main(int argc, char **argv)
{
	O.argv0 = argv[0];
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		const char *v = i + 1 < argc ? argv[i + 1] : NULL;
		if (!strcmp(a, "--seed") && v) {
			O.seed_lo = O.seed_hi = strtoull(v, NULL, 0);
			i++;
		} else if (!strcmp(a, "--seeds") && v) {
			char *e;
			O.seed_lo = strtoull(v, &e, 0);
			O.seed_hi = *e == '-' ? strtoull(e + 1, NULL, 0) : O.seed_lo;
			i++;
		} else if (!strcmp(a, "--ops") && v) {
			O.ops = strtol(v, NULL, 0);
			i++;
		} else if (!strcmp(a, "--remount") && v) {
			O.remount = strtol(v, NULL, 0);
			i++;
		} else if (!strcmp(a, "--threads") && v) {
			O.threads = atoi(v);
			i++;
		} else if (!strcmp(a, "--check-every") && v) {
			O.check_every = strtol(v, NULL, 0);
			i++;
		} else if (!strcmp(a, "--pool-mib") && v) {
			O.pool_mib = strtoull(v, NULL, 0);
			i++;
		} else if (!strcmp(a, "--inject-bug") && v) {
			O.bug = atoi(v);
			i++;
		} else if (!strcmp(a, "--mode") && v) {
			O.mode = fm_mode_parse(v);
			if (O.mode < 0)
				usage();
			i++;
		} else if (!strcmp(a, "--verbose")) {
			O.verbose = 1;
		} else if (!strcmp(a, "--expect-mismatch")) {
			O.expect_mismatch = 1;
		} else if (!strcmp(a, "--keep-going") && v) {
			O.keep_going = strtol(v, NULL, 0);
			i++;
		} else if (!strcmp(a, "--no-creat-directory")) {
			O.no_creat_dir = 1;
		} else if (!strcmp(a, "--lenient-errmsg")) {
			fm_errmsg_strict = 0;
		} else if (!strcmp(a, "--stats")) {
			O.stats = 1;
		} else if (!strcmp(a, "--posix-vs-plain")) {
			O.pvp = O.plain = 1;
		} else if (!strcmp(a, "--posix-vs-posix")) {
			O.pvp = 1;
		} else {
			usage();
		}
	}
	if (O.threads == 1)
		O.threads = 0;
	if (O.threads && O.remount) {
		fprintf(stderr, "--threads and --remount do not combine\n");
		return 2;
	}
	if (O.bug && !O.pvp) {
		fprintf(stderr, "--inject-bug needs --posix-vs-posix\n");
		return 2;
	}
	umask(0);
	setvbuf(stdout, NULL, _IOLBF, 0);
	signal(SIGSEGV, on_fatal);
	signal(SIGBUS, on_fatal);
	signal(SIGABRT, on_fatal);
	int final_rc = 0;
	for (uint64_t s = O.seed_lo; s <= O.seed_hi; s++) {
		failed = 0;
		int rc = run_seed(s);
		if (O.expect_mismatch) {
			/* harness self-test: the planted bug must be reported as a mismatch */
			printf("%s\n",
			       rc == 1 ? "planted bug detected: ok" : "planted bug NOT detected");
			return rc == 1 ? 0 : 1;
		}
		if (rc && O.keep_going <= 1) {
			fm_alt_report(stderr);
			return rc;
		}
		final_rc |= rc;
	}
	if (O.stats)
		stats_print();
	fm_alt_report(stdout);
	if (final_rc)
		return final_rc;
	printf("all seeds passed\n");
	return 0;
}
