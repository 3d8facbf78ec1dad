/*
 * pool_fuzz.c -- the structure-aware pool fuzzer's driver.
 *
 *   pool_fuzz [--seed S] [--trials N] [--first T]      in-process trials
 *   pool_fuzz --fork ...                               each trial in a child:
 *                                                      go on after a crash, group
 *                                                      crashes by signature
 *   pool_fuzz --cli FERRITE [--trials N] ...           each image through the
 *                                                      command-line tools
 *   pool_fuzz --corpus FILE...                         replay kept damages
 *   pool_fuzz --replay 'inode 3 @40 ff'                one damage, verbosely
 *
 * A trial damages one structure of the populated pool (fuzz_mutate.c), then
 *   1. fsck -n: must not crash or hang, and must leave the image unchanged;
 *   2. mount, walk and read everything, make a few changes, unmount: no crash
 *      or hang, and if step 1 called the pool clean, the walk must succeed and
 *      show exactly the undamaged pool's tree ("clean but wrong" otherwise);
 *   3. on the damaged image again: fsck --repair, then fsck: if the repair
 *      says it corrected everything, the second fsck must be clean, and a
 *      pool fsck calls clean must mount and walk without an error.
 * Every failure prints the damage as a corpus line and the replay command.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "ferrite.h"
#include "fuzz.h"

#define MAX_EDITS 4

struct opts {
	uint64_t seed, first, trials;
	uint64_t pool_mib;
	int fork_mode, verbose;
	unsigned timeout;
	const char *cli; /* the ferrite command: trials through the tools */
	const char *save;
	char **corpus;
	int ncorpus;
	const char *replay;
};

static struct opts o = {.seed = 1, .trials = 1000, .pool_mib = 32, .timeout = 60};
static char pool[256];
static uint8_t *pristine, *with_orphan, *damaged;
static size_t img_len;
static struct fz_map map;
static uint64_t pristine_digest;

/* What the trial in progress is, for the crash handlers. */
static char cur_desc[4 * (2 * FZ_MAX_EDIT + 80)];
static const char *cur_step = "";
static int cur_verifiable; /* fz_verifiable(): may fsck be expected to see it? */

/* Where the time goes (--profile). */
static double step_time[16];
static const char *step_name[16];
static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}
static double step_t0;
static int step_cur = -1;
static void step(int i, const char *name)
{
	double t = now_s();
	if (step_cur >= 0)
		step_time[step_cur] += t - step_t0;
	step_t0 = t;
	step_cur = i;
	if (i >= 0)
		step_name[i] = name;
}

static void describe(const struct fz_edit *ed, int n, char *buf, size_t cap)
{
	size_t p = 0;
	buf[0] = 0;
	for (int i = 0; i < n && p + 8 < cap; i++) {
		if (i)
			p += (size_t)snprintf(buf + p, cap - p, " | ");
		fz_edit_format(&ed[i], buf + p, cap - p);
		p = strlen(buf);
	}
}

static void report_crash(const char *what)
{
	char msg[sizeof cur_desc + 512];
	int n = snprintf(msg, sizeof msg,
			 "\nFUZZ FAILURE: %s during %s\n  damage: %s\n  replay: pool_fuzz --replay "
			 "'%s'\n",
			 what, cur_step, cur_desc, cur_desc);
	if (n > 0)
		(void)!write(2, msg, (size_t)n < sizeof msg ? (size_t)n : sizeof msg);
}

static void on_signal(int sig)
{
	report_crash(sig == SIGALRM ? "hang (timeout)" : strsignal(sig));
	signal(sig, SIG_DFL);
	if (sig == SIGALRM)
		sig = SIGABRT;
	raise(sig);
}

/* ASan and UBSan call this before they exit. */
void __sanitizer_set_death_callback(void (*cb)(void)) __attribute__((weak));
static void on_sanitizer_death(void)
{
	report_crash("sanitizer report");
}

/* The pool file, mapped: restoring an image copies only the pages that
 * differ, which also tells whether anything wrote to the pool. */
static uint8_t *pool_map_addr;

static int map_pool_file(void)
{
	int fd = open(pool, O_RDWR | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	void *m = mmap(NULL, img_len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	if (m == MAP_FAILED)
		return -errno;
	pool_map_addr = m;
	return 0;
}

/* Makes the pool file hold img; returns how many pages differed. */
static size_t write_image(const uint8_t *img)
{
	size_t changed = 0;
	for (size_t off = 0; off < img_len; off += 4096) {
		size_t n = img_len - off < 4096 ? img_len - off : 4096;
		if (memcmp(pool_map_addr + off, img + off, n)) {
			memcpy(pool_map_addr + off, img + off, n);
			changed++;
		}
	}
	return changed;
}

static void quiet(void *arg, const char *line)
{
	if (o.verbose)
		fprintf(stderr, "    fsck: %s\n", line);
	(void)arg;
}

/* Failures that are not crashes: the trial's verdict. */
static int verdict_fail(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fprintf(stderr, "\nFUZZ FAILURE: ");
	vfprintf(stderr, fmt, ap);
	fprintf(stderr, "\n  damage: %s\n  replay: pool_fuzz --replay '%s'\n", cur_desc,
		cur_desc);
	va_end(ap);
	return 1;
}

static int mount_walk(int scribble, uint64_t seed, struct fz_walk *w, int *mrc)
{
	ferrite_fs *fs;
	char **files = w->files;
	int cap = w->files_cap;
	memset(w, 0, sizeof *w);
	w->files = files;
	w->files_cap = cap;
	cur_step = "mount";
	*mrc = ferrite_mount(pool, NULL, &fs);
	if (*mrc)
		return 0;
	cur_step = "walk";
	fz_walk_tree(fs, w);
	if (scribble) {
		cur_step = "changes";
		fz_scribble(fs, seed);
		struct fz_walk again = {.no_data = 1};
		cur_step = "walk after changes";
		fz_walk_tree(fs, &again);
	}
	cur_step = "unmount";
	ferrite_unmount(fs);
	return 0;
}

/* One trial on the damaged image in `damaged`. 0: passed. */
static int run_trial(uint64_t seed)
{
	int bad = 0;
	step(0, "write image");
	write_image(damaged);
	cur_step = "fsck -n";
	step(1, "fsck -n");
	int a = ferrite_fsck(pool, 0, quiet, NULL, NULL, NULL);
	step(2, "compare image");
	size_t changed = write_image(damaged);
	if (changed)
		bad |= verdict_fail("fsck -n changed %zu pages of the pool image (status %d)",
				    changed, a);
	struct fz_walk w = {0};
	int mrc;
	step(3, "mount+walk+changes");
	mount_walk(1, seed, &w, &mrc);
	step(-1, NULL);
	if (o.verbose)
		fprintf(stderr, "  fsck -n: %d; mount: %d (%s); walk: %llu entries, %d errors%s%s\n",
			a, mrc, mrc ? ferrite_errmsg() : "ok", (unsigned long long)w.entries,
			w.errors, w.first_err[0] ? ": " : "", w.first_err);
	if (a == FERRITE_FSCK_CLEAN) {
		if (mrc)
			bad |= verdict_fail("fsck called the pool clean, mount failed: %s",
					    ferrite_errmsg());
		else if (w.errors)
			bad |= verdict_fail("fsck called the pool clean, the walk failed: %s",
					    w.first_err);
		else if (w.digest != pristine_digest && cur_verifiable)
			bad |= verdict_fail("clean but wrong: fsck called the pool clean, its "
					    "tree differs from the undamaged one");
	}
	if (a == FERRITE_FSCK_CLEAN)
		return bad; /* nothing to repair */
	step(0, "write image");
	write_image(damaged);
	cur_step = "fsck --repair";
	step(4, "fsck --repair");
	int b = ferrite_fsck(pool, 1, quiet, NULL, NULL, NULL);
	cur_step = "fsck after repair";
	step(5, "fsck again");
	int c = ferrite_fsck(pool, 0, quiet, NULL, NULL, NULL);
	step(6, "mount+walk repaired");
	if (o.verbose)
		fprintf(stderr, "  fsck --repair: %d; fsck again: %d\n", b, c);
	if (b >= 0 && !(b & (FERRITE_FSCK_UNCORRECTED | FERRITE_FSCK_OPERROR)) &&
	    c != FERRITE_FSCK_CLEAN)
		bad |= verdict_fail("fsck --repair said it corrected everything (%d), the next "
				    "fsck says %d",
				    b, c);
	if (c == FERRITE_FSCK_CLEAN) {
		mount_walk(1, seed, &w, &mrc);
		if (mrc)
			bad |= verdict_fail("repaired pool called clean does not mount: %s",
					    ferrite_errmsg());
		else if (w.errors)
			bad |= verdict_fail("repaired pool called clean fails the walk: %s",
					    w.first_err);
	}
	step(-1, NULL);
	return bad;
}

/* Regular files of the undamaged pool, for `ferrite cat`. */
static struct fz_walk reference;

static int image_is_damaged(void)
{
	return write_image(damaged) == 0;
}

/* Every 8th trial starts from the image with an orphan to release. */
static int do_trial(const struct fz_edit *ed, int n, uint64_t seed)
{
	describe(ed, n, cur_desc, sizeof cur_desc);
	const uint8_t *base = seed % 8 == 0 ? with_orphan : pristine;
	memcpy(damaged, base, img_len);
	if (fz_apply(&map, damaged, img_len, ed, n)) {
		fprintf(stderr, "damage names no structure of this pool: %s\n", cur_desc);
		return 0;
	}
	cur_verifiable = fz_verifiable(&map, base, damaged, ed, n);
	if (o.verbose)
		fprintf(stderr, "trial: %s\n", cur_desc);
	if (o.cli) {
		char why[300];
		write_image(damaged);
		if (!fz_cli_trial(o.cli, pool, o.timeout, reference.files, reference.nfiles,
				  image_is_damaged, why, sizeof why))
			return 0;
		return verdict_fail("%s", why);
	}
	alarm(o.timeout);
	int rc = run_trial(seed);
	alarm(0);
	return rc;
}

/* Runs fn in a child with a timeout; returns its wait status or -1 on a
 * timeout. The child's stderr goes to errf. */
static int in_child(int (*fn)(void *), void *arg, const char *errf)
{
	pid_t pid = fork();
	if (pid == 0) {
		int fd = open(errf, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
		if (fd >= 0)
			dup2(fd, 2);
		_exit(fn(arg) ? 1 : 0);
	}
	int st;
	for (unsigned waited = 0;; waited++) {
		pid_t r = waitpid(pid, &st, WNOHANG);
		if (r == pid)
			return st;
		if (waited > o.timeout * 100) {
			kill(pid, SIGKILL);
			waitpid(pid, &st, 0);
			return -1;
		}
		usleep(10000);
	}
}

/* Crash signature: the first frames of the report that are ours. */
static void signature(const char *errf, char *sig, size_t cap)
{
	FILE *f = fopen(errf, "r");
	snprintf(sig, cap, "?");
	if (!f)
		return;
	char line[1024], kind[128] = "", frames[512] = "";
	int nframes = 0;
	while (fgets(line, sizeof line, f)) {
		char *p;
		if (!kind[0] && (p = strstr(line, "ERROR: AddressSanitizer: ")))
			sscanf(p + 25, "%127s", kind);
		if (!kind[0] && (p = strstr(line, "runtime error: "))) {
			/* "FILE:LINE:COL: runtime error: what ..." -> "ubsan FILE:LINE what" */
			char *src = strstr(line, "/src/"), *colon;
			char what[40] = "";
			sscanf(p + 15, "%39[a-z ]", what);
			if (src && (colon = strchr(src + 5, ':')) && colon < p)
				snprintf(kind, sizeof kind, "ubsan %.*s%.*s %s", (int)(colon - src),
					 src, (int)strspn(colon, ":0123456789") > 1 ? (int)strcspn(colon + 1, ":") + 1 : 0,
					 colon, what);
			else
				snprintf(kind, sizeof kind, "ubsan %s", what);
		}
		if (!kind[0] && strstr(line, "FUZZ FAILURE: "))
			snprintf(kind, sizeof kind, "%.100s", strstr(line, "FUZZ FAILURE: ") + 14);
		if (nframes < 3 && (p = strstr(line, " in ")) && strstr(line, "/src/")) {
			char fn[128];
			if (sscanf(p + 4, "%127s", fn) == 1) {
				strncat(frames, " < ", sizeof frames - strlen(frames) - 1);
				strncat(frames, fn, sizeof frames - strlen(frames) - 1);
				nframes++;
			}
		}
	}
	fclose(f);
	for (char *q = kind; *q; q++)
		if (*q == '\n')
			*q = 0;
	snprintf(sig, cap, "%.127s%.400s", kind[0] ? kind : "signal", frames);
}

struct forked {
	struct fz_edit *ed;
	int n;
	uint64_t seed;
};
static int forked_trial(void *arg)
{
	struct forked *f = arg;
	return do_trial(f->ed, f->n, f->seed);
}

struct sigcount {
	char sig[600];
	char example[sizeof cur_desc];
	unsigned count;
};

/* The failures of a run, grouped by signature (--fork). */
static struct sigcount *sigs;
static unsigned nsigs, nfailed;
static char errf[300];

/* Runs one damage, in a child with --fork; counts and groups failures. */
static void run_one(const struct fz_edit *ed, int n, uint64_t seed)
{
	if (!o.fork_mode) {
		nfailed += do_trial(ed, n, seed) != 0;
		return;
	}
	struct forked f = {(struct fz_edit *)ed, n, seed};
	int st = in_child(forked_trial, &f, errf);
	if (st == 0)
		return;
	nfailed++;
	char sig[600], d[sizeof cur_desc];
	if (st == -1)
		snprintf(sig, sizeof sig, "hang (killed after the timeout)");
	else
		signature(errf, sig, sizeof sig);
	describe(ed, n, d, sizeof d);
	unsigned i;
	for (i = 0; i < nsigs && strcmp(sigs[i].sig, sig); i++)
		;
	if (i == nsigs && nsigs < 256) {
		nsigs++;
		snprintf(sigs[i].sig, sizeof sigs[i].sig, "%s", sig);
		snprintf(sigs[i].example, sizeof sigs[i].example, "%s", d);
		fprintf(stderr, "new failure: %s\n  damage: %s\n", sig, d);
	}
	if (i < 256)
		sigs[i].count++;
	FILE *sf = o.save ? fopen(o.save, "a") : NULL;
	if (sf) {
		fprintf(sf, "# %s\n%s\n", sig, d);
		fclose(sf);
	}
}

static void progress(uint64_t done, uint64_t total, time_t t0, time_t *last)
{
	time_t now = time(NULL);
	if (now - *last < 10)
		return;
	*last = now;
	fprintf(stderr, "pool_fuzz: %llu/%llu trials, %u failed, %lds\n", (unsigned long long)done,
		(unsigned long long)total, nfailed, (long)(now - t0));
}

static void summary(const char *what, uint64_t n, time_t t0)
{
	if (o.verbose)
		for (int i = 0; i < 16; i++)
			if (step_name[i])
				fprintf(stderr, "  %-22s %8.3f s\n", step_name[i], step_time[i]);
	printf("pool_fuzz: %s: %llu trials, %u failed, %u signatures, %lds\n", what,
	       (unsigned long long)n, nfailed, nsigs, (long)(time(NULL) - t0));
	for (unsigned i = 0; i < nsigs; i++)
		printf("  %5u  %s\n         e.g. %s\n", sigs[i].count, sigs[i].sig, sigs[i].example);
}

static int trials_loop(void)
{
	time_t t0 = time(NULL), last = t0;
	for (uint64_t t = o.first; t < o.first + o.trials; t++) {
		struct fz_edit ed[MAX_EDITS];
		uint64_t seed = o.seed * 1000003ULL + t;
		int n = fz_mutate(&map, pristine, seed, ed, MAX_EDITS);
		if (n > 0)
			run_one(ed, n, seed);
		progress(t - o.first + 1, o.trials, t0, &last);
	}
	char what[80];
	snprintf(what, sizeof what, "seed %llu from %llu", (unsigned long long)o.seed,
		 (unsigned long long)o.first);
	summary(what, o.trials, t0);
	return nfailed ? 1 : 0;
}

static int parse_line(char *line, struct fz_edit *ed, int *n)
{
	*n = 0;
	for (char *tok = strtok(line, "|"); tok && *n < MAX_EDITS; tok = strtok(NULL, "|")) {
		while (*tok == ' ')
			tok++;
		if (fz_edit_parse(tok, &ed[*n]))
			return -1;
		(*n)++;
	}
	return *n ? 0 : -1;
}

static int corpus_loop(void)
{
	unsigned total = 0;
	time_t t0 = time(NULL), last = t0;
	for (int i = 0; i < o.ncorpus; i++) {
		FILE *f = fopen(o.corpus[i], "r");
		if (!f) {
			fprintf(stderr, "pool_fuzz: %s: %s\n", o.corpus[i], strerror(errno));
			return 2;
		}
		char line[8192];
		while (fgets(line, sizeof line, f)) {
			line[strcspn(line, "\n")] = 0;
			if (!line[0] || line[0] == '#')
				continue;
			struct fz_edit ed[MAX_EDITS];
			int n;
			if (parse_line(line, ed, &n)) {
				fprintf(stderr, "pool_fuzz: %s: bad line: %s\n", o.corpus[i], line);
				fclose(f);
				return 2;
			}
			total++;
			run_one(ed, n, total);
			progress(total, total, t0, &last);
		}
		fclose(f);
	}
	summary("corpus", total, t0);
	return nfailed ? 1 : 0;
}

static void usage(void)
{
	fputs("usage: pool_fuzz [--seed S] [--first T] [--trials N] [--pool-mib M] [--fork]\n"
	      "                 [--timeout S] [--save FILE] [--cli FERRITE] [-v]\n"
	      "       pool_fuzz --corpus FILE...\n"
	      "       pool_fuzz --replay 'KIND INDEX @AT [fix] HEX [| ...]'\n",
	      stderr);
}

int main(int argc, char **argv)
{
	static const struct option lo[] = {
	    {"seed", required_argument, NULL, 's'},    {"first", required_argument, NULL, 'f'},
	    {"trials", required_argument, NULL, 'n'},  {"pool-mib", required_argument, NULL, 'm'},
	    {"fork", no_argument, NULL, 'F'},	       {"timeout", required_argument, NULL, 't'},
	    {"save", required_argument, NULL, 'S'},    {"corpus", no_argument, NULL, 'C'},
	    {"replay", required_argument, NULL, 'R'},  {"verbose", no_argument, NULL, 'v'},
	    {"help", no_argument, NULL, 'h'},	       {"cli", required_argument, NULL, 'c'},
	    {NULL, 0, NULL, 0},
	};
	int c, corpus = 0;
	while ((c = getopt_long(argc, argv, "vh", lo, NULL)) != -1) {
		switch (c) {
		case 's': o.seed = strtoull(optarg, NULL, 0); break;
		case 'f': o.first = strtoull(optarg, NULL, 0); break;
		case 'n': o.trials = strtoull(optarg, NULL, 0); break;
		case 'm': o.pool_mib = strtoull(optarg, NULL, 0); break;
		case 'F': o.fork_mode = 1; break;
		case 't': o.timeout = (unsigned)strtoul(optarg, NULL, 0); break;
		case 'S': o.save = optarg; break;
		case 'C': corpus = 1; break;
		case 'R': o.replay = optarg; o.verbose = 1; break;
		case 'v': o.verbose = 1; break;
		case 'c': o.cli = optarg; break;
		default: usage(); return c == 'h' ? 0 : 2;
		}
	}
	if (corpus) {
		o.corpus = argv + optind;
		o.ncorpus = argc - optind;
	}
	snprintf(pool, sizeof pool, "/dev/shm/ferrite-fuzz-%d.pool", (int)getpid());
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (fz_build(pool, o.pool_mib << 20, &pristine, &with_orphan, &img_len)) {
		fprintf(stderr, "pool_fuzz: cannot build the pool: %s\n", ferrite_errmsg());
		return 2;
	}
	damaged = malloc(img_len);
	if (!damaged || fz_map_image(with_orphan, img_len, &map)) {
		fprintf(stderr, "pool_fuzz: cannot list the pool's structures\n");
		return 2;
	}
	/* The undamaged pool: fsck clean, and its tree is the reference. */
	struct fz_walk w = {0};
	int mrc;
	const uint8_t *images[] = {with_orphan, pristine};
	if (map_pool_file()) {
		fprintf(stderr, "pool_fuzz: cannot map %s\n", pool);
		return 2;
	}
	for (int i = 0; i < 2; i++) {
		write_image(images[i]);
		int a = ferrite_fsck(pool, 0, quiet, NULL, NULL, NULL);
		if (write_image(images[i])) {
			fprintf(stderr, "pool_fuzz: fsck -n changed the undamaged pool\n");
			return 1;
		}
		if (i) {
			reference.files_cap = 4096;
			reference.files = calloc(4096, sizeof(char *));
			w = reference;
		}
		mount_walk(0, 0, &w, &mrc);
		if (i)
			reference = w;
		if (a != FERRITE_FSCK_CLEAN || mrc || w.errors ||
		    (i && w.digest != pristine_digest)) {
			fprintf(stderr,
				"pool_fuzz: the undamaged pool is not clean (fsck %d, mount %d, %s)\n",
				a, mrc, w.first_err);
			return 1;
		}
		pristine_digest = w.digest;
	}
	if (o.verbose) {
		fprintf(stderr, "pool: %s, %zu bytes, %zu structures:", pool, img_len, map.n);
		for (int k = 0; k < FZ_NKINDS; k++)
			fprintf(stderr, " %s %zu", fz_kind_name(k), map.count[k]);
		fprintf(stderr, "; %llu entries\n", (unsigned long long)w.entries);
	}
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_signal;
	sa.sa_flags = SA_RESETHAND | SA_NODEFER;
	static const int fatal[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT, SIGALRM};
	for (size_t i = 0; i < sizeof fatal / sizeof fatal[0]; i++)
		sigaction(fatal[i], &sa, NULL);
	if (__sanitizer_set_death_callback)
		__sanitizer_set_death_callback(on_sanitizer_death);
	sigs = calloc(256, sizeof *sigs);
	snprintf(errf, sizeof errf, "%s.stderr", pool);
	int rc;
	if (o.replay) {
		struct fz_edit ed[MAX_EDITS];
		int n;
		char *line = strdup(o.replay);
		if (parse_line(line, ed, &n)) {
			fprintf(stderr, "pool_fuzz: cannot parse the damage\n");
			return 2;
		}
		rc = do_trial(ed, n, 1);
		free(line);
		printf("pool_fuzz: replay %s\n", rc ? "FAILED" : "passed");
	} else if (corpus) {
		rc = corpus_loop();
	} else {
		rc = trials_loop();
	}
	unlink(pool);
	unlink(errf);
	free(sigs);
	for (int i = 0; i < reference.nfiles; i++)
		free(reference.files[i]);
	free(reference.files);
	free(pristine);
	free(with_orphan);
	free(damaged);
	fz_map_free(&map);
	return rc;
}
