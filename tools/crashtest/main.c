/*
 * main.c -- `ferrite crashtest`: the explorer's command line and its run.
 *
 * For each mode and workload: the expected states are made first by running
 * the same operations on tmpfs (state i = the tree after operations 0..i-1,
 * descriptors closed, as a crash closes them); then the pool is formatted
 * and the starting tree built with the tracing model installed but not
 * recording; recording starts; each operation runs, and every instant the
 * model reports is turned into its images, deduplicated by hash, and sent to
 * the worker (worker.c), which has them checked (check.c).
 */
#include "ct.h"

#include <errno.h>
#include <execinfo.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "ferrite.h"
#include "fs/fs.h"
#include "tier/tier.h"

struct opts {
	int modes[2], nmodes;
	const char *specs[64];
	int nspecs;
	uint64_t seed;
	int random_len;
	int jobs;
	int timeout_s;
	uint64_t pool_mib;
	long long point, variant;
	const char *plant;
	int expect_violation;
	double budget;
	const char *json;
	int keep, verbose, quiet, dry;
	int sample; /* at most this many images per instant (0: all) */
	int nested;
	const char *workdir;
	const char *self;
};

static struct opts O;

static double now_s(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* ---- one explored run -------------------------------------------------------------- */

struct explore {
	struct ct_run run;
	struct ct_model m;
	struct ct_worker *w;
	struct ct_stats *st;
	uint64_t *seen;
	uint64_t seen_cap, seen_n;
	uint64_t instants, named, sent, pre_dups, own_violations, sampled_out;
	uint32_t *vids;
	uint64_t *hashes;
	size_t cap;
	uint8_t *take;
	uint64_t *delta; /* per unit of the instant: ct_unit_deltas */
	size_t take_cap;
	int failed; /* the worker pipe broke */
};

static int seen_insert(struct explore *x, uint64_t h)
{
	if (!h)
		h = 1;
	if ((x->seen_n + 1) * 2 > x->seen_cap) {
		uint64_t oc = x->seen_cap, *old = x->seen;
		x->seen_cap = oc ? 2 * oc : 1 << 16;
		x->seen = calloc(x->seen_cap, sizeof(uint64_t));
		x->seen_n = 0;
		for (uint64_t i = 0; i < oc; i++)
			if (old[i])
				seen_insert(x, old[i]);
		free(old);
	}
	for (uint64_t i = h % x->seen_cap;; i = (i + 1) % x->seen_cap) {
		if (x->seen[i] == h)
			return 0;
		if (!x->seen[i]) {
			x->seen[i] = h;
			x->seen_n++;
			return 1;
		}
	}
}

void ct_replay_cmd(const struct ct_run *run, const struct ct_point *pt, uint64_t vid, char *buf,
		   size_t len)
{
	int k = snprintf(buf, len, "%s --mode %s --workload %s --point %llu --variant %llu",
			 run->argv0, run->mode_name, run->w->name, (unsigned long long)pt->index,
			 (unsigned long long)vid);
	if (k > 0 && (size_t)k < len && O.pool_mib)
		k += snprintf(buf + k, len - (size_t)k, " --pool-mib %llu",
			      (unsigned long long)O.pool_mib);
	if (k > 0 && (size_t)k < len && run->plant)
		snprintf(buf + k, len - (size_t)k, " --plant %s", run->plant);
}

static void on_point(struct ct_model *m, const struct ct_point *pt, void *arg)
{
	struct explore *x = arg;
	x->instants++;
	if (pt->after && pt->nlines) {
		/* The explorer's own rule: a call returns with nothing pending. */
		x->own_violations++;
		char op[1000], cmd[1500];
		fm_op_str(&x->run.w->ops[pt->op], op, sizeof op);
		ct_replay_cmd(&x->run, pt, 0, cmd, sizeof cmd);
		fprintf(stderr,
			"CRASH-STATE VIOLATION (%s mode, workload %s)\n"
			"  operation %d (%s) returned with %u cache lines written but not "
			"persisted (first at pool offset 0x%llx)\n  replay: %s\n",
			x->run.mode_name, x->run.w->name, pt->op, op, pt->nlines,
			(unsigned long long)(pt->lines[0] * CT_LINE), cmd);
	}
	if (x->failed)
		return;
	uint64_t n = ct_variant_count(pt);
	if (n > x->cap) {
		x->cap = n;
		x->vids = realloc(x->vids, n * sizeof(uint32_t));
		x->hashes = realloc(x->hashes, n * sizeof(uint64_t));
	}
	if (pt->nunits + 1 > x->take_cap) {
		x->take_cap = pt->nunits + 1;
		x->take = realloc(x->take, x->take_cap);
		x->delta = realloc(x->delta, x->take_cap * sizeof(uint64_t));
	}
	ct_unit_deltas(pt, m->persisted, x->delta);
	uint32_t k = 0;
	int replay = O.point >= 0;
	if (replay && (long long)pt->index != O.point)
		return;
	for (uint64_t vid = 0; vid < n; vid++) {
		if (replay && (long long)vid != O.variant)
			continue;
		struct ct_variant v = {x->take, -1, 0};
		ct_variant_get(pt, vid, x->run.seed, &v);
		uint64_t h = ct_variant_hash(pt, &v, m->persisted, x->delta);
		uint64_t key = h + (uint64_t)(2 * (pt->op + 1) + pt->after) * 0x9E3779B97F4A7C15ULL;
		x->named++;
		if (!replay && !seen_insert(x, key)) {
			x->pre_dups++;
			continue;
		}
		x->vids[k] = (uint32_t)vid;
		x->hashes[k++] = h;
	}
	if (O.sample > 0 && k > (uint32_t)O.sample) {
		/* Evenly spaced, keeping the first two (nothing and everything
		 * pending reached PM). */
		uint32_t keep = (uint32_t)O.sample, out = 0;
		for (uint32_t i = 0; i < keep; i++) {
			uint32_t from =
			    i < 2 ? i : 2 + (uint32_t)((uint64_t)(i - 2) * (k - 2) / (keep - 2));
			x->vids[out] = x->vids[from];
			x->hashes[out++] = x->hashes[from];
		}
		x->sampled_out += k - out;
		k = out;
	}
	if (O.verbose)
		printf("  instant %llu (%s op %d): %u units, %u lines, %llu images, %u new\n",
		       (unsigned long long)pt->index, pt->after ? "after" : "in", pt->op,
		       pt->nunits, pt->nlines, (unsigned long long)n, k);
	if (O.verbose > 1) /* where the pending stores went, to find their writer */
		for (uint32_t u = 0; u < pt->nunits; u++)
			printf("    unit %u: %u line(s) from pool offset 0x%llx%s\n", u,
			       pt->units[u].nlines,
			       (unsigned long long)pt->lines[pt->units[u].first] * CT_LINE,
			       pt->units[u].bulk ? " (one copy)" : "");
	if (!k || O.dry)
		return;
	x->sent += k;
	if (ct_worker_point(x->w, pt, x->vids, x->hashes, k) < 0)
		x->failed = 1;
}

static void on_persist(struct ct_model *m, uint64_t line, const uint8_t *old, const uint8_t *nw,
		       void *arg)
{
	(void)m;
	(void)old;
	struct explore *x = arg;
	if (!x->failed && ct_worker_persist(x->w, line, nw) < 0)
		x->failed = 1;
}

static int mkdir_p(const char *p)
{
	return mkdir(p, 0755) == 0 || errno == EEXIST ? 0 : -1;
}

/* The trees after 0, 1, ..., n operations, on tmpfs; results of the ops. */
static int prepare_states(struct explore *x, const struct fm_op *setup, int nsetup,
			  int64_t *ref_ret, int64_t *setup_ret)
{
	const struct ct_workload *w = x->run.w;
	for (int i = 0; i <= w->nops; i++) {
		char *dir = x->run.state_dir[i];
		snprintf(dir, 512, "%s/state-%d", x->run.workdir, i);
		if (mkdir_p(dir) < 0)
			return -1;
		struct fm_backend *be = fm_posix_new(dir, 0);
		if (!be)
			return -1;
		be->chmod(be->ctx, "/", 0755);
		be->chown(be->ctx, "/", 0, 0);
		struct fm_side s;
		struct fm_res res;
		fm_side_init(&s, be);
		for (int j = 0; j < nsetup; j++) {
			fm_exec(&s, &setup[j], &res);
			setup_ret[j] = res.ret;
			fm_res_free(&res);
		}
		for (int j = 0; j < i; j++) {
			fm_exec(&s, &w->ops[j], &res);
			ref_ret[j] = res.ret;
			fm_res_free(&res);
		}
		x->run.lenient[i][0] = 0;
		if (i < w->nops && ct_op_is_data(&w->ops[i])) {
			int slot = fm_pick_slot(&s, &w->ops[i]);
			char pp[64], target[PATH_MAX];
			snprintf(pp, sizeof pp, "/proc/self/fd/%d", s.fd[slot]);
			ssize_t l = s.fd[slot] >= 0 ? readlink(pp, target, sizeof target - 1) : -1;
			size_t dl = strlen(dir);
			if (l > 0) {
				target[l] = 0;
				if (!strncmp(target, dir, dl) && target[dl] == '/' &&
				    !strstr(target, " (deleted)"))
					snprintf(x->run.lenient[i], 512, "%s", target + dl);
			}
		}
		fm_side_close_all(&s);
		fm_posix_free(be);
	}
	return 0;
}

static int write_base(const char *path, const struct ct_model *m)
{
	int fd = open(path, O_CREAT | O_TRUNC | O_WRONLY | O_CLOEXEC, 0600);
	if (fd < 0)
		return -1;
	int rc = ftruncate(fd, (off_t)m->size) < 0 ||
			 ct_write_pages(fd, m->persisted, m->size, m->nonzero, NULL) < 0
		     ? -1
		     : 0;
	return close(fd) < 0 ? -1 : rc;
}

struct result {
	char mode[8];
	char name[96];
	int nops;
	uint64_t instants, named, pre_dups, sampled_out, checked, post_dups, nested, violations;
	double seconds;
};

static int rm_rf(const char *p)
{
	return fm_rm_rf(p);
}

/* Free pages and metadata-pool pages of a fresh, empty pool. */
int ct_space_after_rm(struct fm_backend *be, uint64_t *free_pages, uint64_t *meta);

static int fresh_space(const char *workdir, int mode, uint64_t size, uint64_t *freep,
		       uint64_t *meta)
{
	/* The same for every workload of a mode: measured once. */
	static struct {
		int valid, mode;
		uint64_t size, freep, meta;
	} cache[2];
	for (int i = 0; i < 2; i++)
		if (cache[i].valid && cache[i].mode == mode && cache[i].size == size) {
			*freep = cache[i].freep;
			*meta = cache[i].meta;
			return 0;
		}
	char pool[600];
	snprintf(pool, sizeof pool, "%s/fresh.pool", workdir);
	struct ferrite_mkfs_opts mo = {.size = size, .mode = mode, .force = 1};
	int rc = ferrite_mkfs(pool, &mo);
	if (rc < 0) {
		fprintf(stderr, "crashtest: mkfs %s: %s\n", pool, ferrite_errmsg());
		return rc;
	}
	struct fm_backend *be = fm_ferrite_new(pool);
	if (!be)
		return -1;
	rc = ct_space_after_rm(be, freep, meta);
	fm_ferrite_unmount(be);
	unlink(pool);
	if (rc == 0) {
		int i = cache[0].valid ? 1 : 0;
		cache[i].valid = 1;
		cache[i].mode = mode;
		cache[i].size = size;
		cache[i].freep = *freep;
		cache[i].meta = *meta;
	}
	return rc;
}

/* Fills every free page with a pattern no operation writes: a crash image
 * that exposes memory nobody initialised then shows it, where zeros would
 * pass for a hole. (Free memory holds anything on real PM: what a deleted
 * file left, for one.) */
static void poison_free_space(ferrite_fs *fs)
{
	static uint64_t pattern[FR_PAGE_SIZE / 8];
	for (size_t i = 0; i < FR_PAGE_SIZE / 8; i++)
		pattern[i] = 0xF7EEBAD0F7EEBAD0ULL ^ (i * 0x0101010101010101ULL);
	struct space *sp = &fs->m.sp;
	for (uint64_t pg = sp->data_page; pg < sp->data_end_page; pg++)
		if (bud_free_order(sp, NULL, pg) >= 0)
			pm_copy_nt(sp_ptr(sp, pg << FR_PAGE_SHIFT), pattern, FR_PAGE_SIZE);
	pm_fence();
}

/* Before recording on a tiered pool: what the tree's building left in the
 * cache goes to the backing directory, and closed files leave the cache, so
 * the explored writes meet clean chunks, missing chunks and free slots. */
static void tier_settle(ferrite_fs *fs)
{
	struct tier *t = TIER(fs);
	if (tier_drain(t, NULL) < 0)
		fprintf(stderr, "crashtest: draining the tiered pool: %s\n", ferrite_errmsg());
	for (uint32_t fid = 1; fid < t->nrecs; fid++) {
		struct tier_file *tf = tf_ref(t, fid);
		if (!tf)
			continue;
		if (!tf->opens)
			tier_cache_evict_clean(t, tf);
		tf_put(t, tf);
	}
}

static int explore_one(const struct ct_workload *w, int mode, const char *mode_name, int index,
		       int total, struct result *res)
{
	double t0 = now_s();
	struct explore *x = calloc(1, sizeof(*x));
	char wd[512];
	snprintf(wd, sizeof wd, "%s/w%d-%s", O.workdir, index, mode_name);
	rm_rf(wd);
	if (mkdir_p(wd) < 0) {
		perror(wd);
		return -1;
	}
	struct ct_run *run = &x->run;
	run->workdir = wd;
	run->mode = mode;
	run->mode_name = mode_name;
	/* Smaller pools cost less to format and record: the small tree fits 32 MiB. */
	run->pool_size = O.pool_mib			? O.pool_mib << 20
			 : w->tree == CT_TREE_POPULATED ? 64ULL << 20
							: 32ULL << 20;
	run->w = w;
	run->nested_max = O.nested;
	run->timeout_s = O.timeout_s;
	run->verbose = O.verbose || O.point >= 0;
	run->keep = O.point >= 0;
	run->plant = O.plant;
	run->argv0 = O.self;
	run->seed = O.seed;
	run->state_dir = calloc((size_t)w->nops + 1, sizeof(*run->state_dir));
	run->lenient = calloc((size_t)w->nops + 1, sizeof(*run->lenient));
	int64_t *ref_ret = calloc((size_t)w->nops + 1, sizeof(int64_t));
	struct fm_op *setup;
	int nsetup = ct_setup_ops(w->tree, &setup);
	int64_t *setup_ret = calloc((size_t)nsetup + 1, sizeof(int64_t));
	int rc = -1;
	int tier = mode == CT_MODE_TIER;
	char backing[600];
	snprintf(backing, sizeof backing, "%s/backing", wd);
	if (tier ? mkdir_p(backing) < 0
		 : fresh_space(wd, mode, run->pool_size, &run->fresh_free, &run->fresh_meta) < 0)
		goto out;
	if (prepare_states(x, setup, nsetup, ref_ret, setup_ret) < 0) {
		fprintf(stderr, "crashtest: cannot prepare the expected states in %s\n", wd);
		goto out;
	}
	ct_zero_page_hashes(run->pool_size / FR_PAGE_SIZE); /* computed once, inherited */
	x->st = ct_stats_new(1 << 20);
	x->w = ct_worker_start(run, O.jobs, x->st);
	if (!x->st || !x->w) {
		fprintf(stderr, "crashtest: cannot start the worker\n");
		goto out;
	}

	/* The pool, traced from its first mapping (read-only, behind an alias). */
	char pool[600];
	snprintf(pool, sizeof pool, "%s/pool", wd);
	ct_model_init(&x->m, pool);
	x->m.on_point = on_point;
	x->m.on_persist = on_persist;
	x->m.arg = x;
	ct_model_install(&x->m);
	pm_op_end_check_enable(0); /* the model reports the same, with images */
	struct ferrite_mkfs_opts mo = {.size = run->pool_size, .mode = mode, .force = 1};
	if (tier) {
		/* Per-write consistency; the flusher never wakes during the run. */
		mo.mode = FERRITE_MODE_SYNC;
		mo.tier_backing = backing;
		mo.tier_flush_ms = 60000;
	}
	if (ferrite_mkfs(pool, &mo) < 0) {
		fprintf(stderr, "crashtest: mkfs %s (%s mode): %s\n", pool, mode_name,
			ferrite_errmsg());
		ct_worker_finish(x->w);
		goto out_model;
	}
	struct fm_backend *be = fm_ferrite_new(pool);
	if (!be) {
		ct_worker_finish(x->w);
		goto out_model;
	}
	be->chmod(be->ctx, "/", 0755);
	be->chown(be->ctx, "/", 0, 0);
	struct fm_side s;
	struct fm_res r;
	fm_side_init(&s, be);
	for (int j = 0; j < nsetup; j++) {
		fm_exec(&s, &setup[j], &r);
		int64_t got = r.ret;
		fm_res_free(&r);
		if (got != setup_ret[j]) {
			char op[1000];
			fm_op_str(&setup[j], op, sizeof op);
			fprintf(stderr, "crashtest: building the tree: %s returned %s, tmpfs %s\n",
				op, fm_errname(got), fm_errname(setup_ret[j]));
			goto out_fs;
		}
	}
	if (tier)
		tier_settle(fm_ferrite_fs(be));
	else
		poison_free_space(fm_ferrite_fs(be));
	char base[600];
	snprintf(base, sizeof base, "%s/base.pool", wd);
	if (ct_model_record(&x->m, NULL, 0) < 0 || write_base(base, &x->m) < 0 ||
	    ct_worker_base(x->w, base, x->m.hash) < 0) {
		fprintf(stderr, "crashtest: cannot start recording\n");
		goto out_fs;
	}
	if (O.plant && pm_plant(O.plant) < 0) {
		fprintf(stderr, "crashtest: no planted bug named %s\n", O.plant);
		goto out_fs;
	}
	if (tier) /* from here on the backing directory stays as it is (ct.h) */
		__atomic_store_n(&TIER(fm_ferrite_fs(be))->no_writeback, 1, __ATOMIC_RELEASE);
	int mismatch = 0;
	for (int k = 0; k < w->nops && !x->failed; k++) {
		ct_model_op_begin(&x->m, k);
		fm_exec(&s, &w->ops[k], &r);
		int64_t got = r.ret;
		int alt = got != ref_ret[k] && fm_err_alternative(&w->ops[k], &s, &r, ref_ret[k]);
		fm_res_free(&r);
		ct_model_op_end(&x->m, k);
		if (got != ref_ret[k] && !alt && !mismatch) {
			char op[1000];
			fm_op_str(&w->ops[k], op, sizeof op);
			fprintf(
			    stderr,
			    "crashtest: %s: operation %d %s returned %s on ferrite, %s on tmpfs "
			    "(the states after it are not comparable)\n",
			    w->name, k, op, fm_errname(got), fm_errname(ref_ret[k]));
			mismatch = 1;
		}
		if (O.plant && x->st->violations)
			break;
	}
	pm_plant(NULL);
	ct_model_stop(&x->m);
	rc = ct_worker_finish(x->w) == 0 && !x->failed && !mismatch ? 0 : -1;
	x->w = NULL;
out_fs:
	if (x->w) {
		ct_model_stop(&x->m);
		ct_worker_finish(x->w);
	}
	fm_side_close_all(&s);
	fm_ferrite_unmount(be);
out_model:
	ct_model_uninstall(&x->m);
	ct_model_free(&x->m);
out:
	snprintf(res->mode, sizeof res->mode, "%s", mode_name);
	snprintf(res->name, sizeof res->name, "%s", w->name);
	res->nops = w->nops;
	res->instants = x->instants;
	res->named = x->named;
	res->pre_dups = x->pre_dups;
	res->sampled_out = x->sampled_out;
	if (x->st) {
		res->checked = x->st->images;
		res->post_dups = x->st->post_dups;
		res->nested = x->st->nested;
		res->violations = x->st->violations + x->own_violations;
	}
	res->seconds = now_s() - t0;
	if (!O.quiet)
		printf("[%d/%d] %-6s %-42s instants %5llu  images %6llu (%llu dup)  checked %6llu "
		       "(%llu recovered alike)  nested %4llu  violations %llu  %.1f s\n",
		       index + 1, total, mode_name, w->name, (unsigned long long)res->instants,
		       (unsigned long long)res->named, (unsigned long long)res->pre_dups,
		       (unsigned long long)res->checked, (unsigned long long)res->post_dups,
		       (unsigned long long)res->nested, (unsigned long long)res->violations,
		       res->seconds);
	/* Scratch is kept for a few failing workloads only: each holds several
	 * pools in /dev/shm, and a run where everything fails must not fill
	 * memory (the replay command recreates any of them). */
	static int kept;
	if (O.point < 0 && ((rc == 0 && !res->violations) || kept >= 3))
		rm_rf(wd);
	else if (O.point < 0)
		kept++;
	free(x->seen);
	free(x->vids);
	free(x->hashes);
	free(x->take);
	free(x->delta);
	free(run->state_dir);
	free(run->lenient);
	free(ref_ret);
	free(setup_ret);
	free(setup);
	free(x);
	return rc;
}

/* ---- command line ---------------------------------------------------------------- */

static void usage(FILE *f)
{
	fputs("Usage: ferrite crashtest [-m MODE] [-w SPEC]... [-j N] [--budget S]\n"
	      "                         [--json FILE] [OPTIONS]\n"
	      "\nExplore the crash states of workloads: at every fence and after every\n"
	      "operation, the images persistent memory may hold are recovered and\n"
	      "checked against the states the same operations produce on tmpfs.\n"
	      "\nOptions:\n"
	      "  -w, --workload SPEC  single | pairs | tier | random[:COUNT] |\n"
	      "                       single:NAME/TREE | pair:A+B | random:SEED/LEN\n"
	      "                       (repeatable; default: single and pairs)\n"
	      "  -m, --mode MODE      sync, strict or both (default both); tier: a\n"
	      "                       tiered pool (per-write consistency), with -w tier\n"
	      "  -j, --jobs N         checkers at once (default: the number of CPUs)\n"
	      "  --budget S           stop starting workloads after S seconds\n"
	      "  --seed S             random workloads and sampled images (default 1)\n"
	      "  --random-len N       operations per random workload (default 25)\n"
	      "  --pool-mib N         pool size in MiB, even, >= 16 (default 64 for the\n"
	      "                       populated tree, 32 for the others)\n"
	      "  --nested N           images per fence of a crash during recovery\n"
	      "                       (default 3)\n"
	      "  --timeout S          seconds per image (default 60)\n"
	      "  --sample N           check at most N images per instant, evenly spaced\n"
	      "                       (for slow builds such as the sanitizer one;\n"
	      "                       default: all)\n"
	      "  --point P            replay the image of instant P (with --variant V, as\n"
	      "                       a violation prints them) verbosely, keeping it\n"
	      "  --variant V          the variant of that image (with --point P)\n"
	      "  --plant BUG          plant a known bug: skip-flush, skip-log-fence,\n"
	      "                       rename-in-place, size-before-data; with -m tier:\n"
	      "                       tier-undo-mark-first\n"
	      "  --expect-violation   succeed only if a violation is found\n"
	      "  --json FILE          write the results as JSON\n"
	      "  --dry-run            name and count the images, check none\n"
	      "  --workdir DIR        scratch space (default /dev/shm)\n"
	      "  --list               list the workloads' names and exit\n"
	      "  -v, --verbose        more detail; twice: where each instant's pending\n"
	      "                       stores lie\n"
	      "  -q, --quiet          only violations and the summary\n"
	      "  -h, --help           show this help\n"
	      "\nExit status: 0 no violation, 1 violations, 2 usage or set-up error.\n",
	      f);
}

/* A bad command line: one line and where to look, like the other commands. */
static int usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int usage_error(const char *fmt, ...)
{
	va_list ap;
	fputs("ferrite crashtest: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputs("\nTry 'ferrite crashtest --help' for more information.\n", stderr);
	return 2;
}

static int parse_mode(const char *s)
{
	if (!strcmp(s, "sync")) {
		O.modes[0] = FERRITE_MODE_SYNC;
		O.nmodes = 1;
	} else if (!strcmp(s, "strict")) {
		O.modes[0] = FERRITE_MODE_STRICT;
		O.nmodes = 1;
	} else if (!strcmp(s, "tier")) {
		O.modes[0] = CT_MODE_TIER;
		O.nmodes = 1;
	} else if (!strcmp(s, "both")) {
		O.modes[0] = FERRITE_MODE_SYNC;
		O.modes[1] = FERRITE_MODE_STRICT;
		O.nmodes = 2;
	} else {
		return -1;
	}
	return 0;
}

static void write_json(struct result *res, int n, double secs)
{
	FILE *f = fopen(O.json, "w");
	if (!f) {
		perror(O.json);
		return;
	}
	fprintf(f, "{\n  \"seconds\": %.1f,\n  \"workloads\": [\n", secs);
	for (int i = 0; i < n; i++)
		fprintf(f,
			"    {\"mode\": \"%s\", \"workload\": \"%s\", \"ops\": %d, \"instants\": "
			"%llu, \"images\": %llu, \"duplicates\": %llu, \"sampled_out\": %llu, "
			"\"checked\": %llu, "
			"\"recovered_alike\": %llu, \"nested\": %llu, \"violations\": %llu, "
			"\"seconds\": %.2f}%s\n",
			res[i].mode, res[i].name, res[i].nops, (unsigned long long)res[i].instants,
			(unsigned long long)res[i].named, (unsigned long long)res[i].pre_dups,
			(unsigned long long)res[i].sampled_out, (unsigned long long)res[i].checked,
			(unsigned long long)res[i].post_dups, (unsigned long long)res[i].nested,
			(unsigned long long)res[i].violations, res[i].seconds,
			i + 1 < n ? "," : "");
	fprintf(f, "  ]\n}\n");
	fclose(f);
}

/* A fault on a guarded pool is a store that bypassed the persist layer: say
 * so, with where it came from, then die of the signal as before. Checkers
 * inherit this, so it covers recovery too. */
static void on_fault(int sig, siginfo_t *si, void *uc)
{
	(void)uc;
	char where[512];
	if (pm_region_describe(si->si_addr, where, sizeof where)) {
		dprintf(2, "crashtest: a store bypassed the persist layer: address %p, in the %s\n",
			si->si_addr, where);
		void *bt[64];
		int n = backtrace(bt, 64);
		backtrace_symbols_fd(bt, n, 2);
	}
	signal(sig, SIG_DFL);
	raise(sig);
}

static int is_opt(const char *a, const char *long_, const char *short_)
{
	return !strcmp(a, long_) || (short_ && !strcmp(a, short_));
}

int main(int argc, char **argv)
{
	O.seed = 1;
	O.random_len = 25;
	O.jobs = (int)sysconf(_SC_NPROCESSORS_ONLN);
	O.timeout_s = 60;
	O.pool_mib = 0; /* by tree */
	O.point = O.variant = -1;
	O.nested = 3;
	O.workdir = "/dev/shm";
	const char *via = getenv("FERRITE_CRASHTEST_AS");
	O.self = via && *via ? via : argv[0];
	parse_mode("both");
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
#define ARG(long_, short_) (is_opt(a, long_, short_) && v && ++i)
		if (ARG("--workload", "-w")) {
			if (O.nspecs < 64)
				O.specs[O.nspecs++] = v;
		} else if (ARG("--mode", "-m")) {
			if (parse_mode(v) < 0)
				return usage_error("invalid mode '%s' (sync, strict, both or tier)",
						   v);
		} else if (ARG("--jobs", "-j")) {
			O.jobs = atoi(v) > 0 ? atoi(v) : 1;
		} else if (ARG("--budget", NULL)) {
			O.budget = atof(v);
		} else if (ARG("--seed", NULL)) {
			O.seed = strtoull(v, NULL, 0);
		} else if (ARG("--random-len", NULL)) {
			O.random_len = atoi(v);
		} else if (ARG("--pool-mib", NULL)) {
			O.pool_mib = strtoull(v, NULL, 0);
		} else if (ARG("--nested", NULL)) {
			O.nested = atoi(v);
		} else if (ARG("--sample", NULL)) {
			O.sample = atoi(v) < 3 ? 3 : atoi(v);
		} else if (ARG("--timeout", NULL)) {
			O.timeout_s = atoi(v);
		} else if (ARG("--point", NULL)) {
			O.point = strtoll(v, NULL, 0);
		} else if (ARG("--variant", NULL)) {
			O.variant = strtoll(v, NULL, 0);
		} else if (ARG("--plant", NULL)) {
			O.plant = v;
		} else if (ARG("--json", NULL)) {
			O.json = v;
		} else if (ARG("--workdir", NULL)) {
			O.workdir = v;
		} else if (!strcmp(a, "--expect-violation")) {
			O.expect_violation = 1;
		} else if (!strcmp(a, "--dry-run")) {
			O.dry = 1;
		} else if (!strcmp(a, "--verbose") || !strcmp(a, "-v")) {
			O.verbose++;
		} else if (!strcmp(a, "--quiet") || !strcmp(a, "-q")) {
			O.quiet = 1;
		} else if (!strcmp(a, "--list")) {
			ct_workloads_list(stdout);
			return 0;
		} else if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
			usage(stdout);
			return 0;
		} else {
			return usage_error("unknown option, or one missing its value: '%s'", a);
		}
	}
	if ((O.point >= 0) != (O.variant >= 0)) {
		fprintf(stderr, "crashtest: --point and --variant go together\n");
		return 2;
	}
	if (O.plant && pm_plant(O.plant) < 0) {
		fprintf(stderr, "crashtest: no planted bug named %s (this build: %s)\n", O.plant,
			pm_plant(NULL) < 0 ? "none"
					   : "skip-flush, skip-log-fence, rename-in-place, "
					     "size-before-data, tier-undo-mark-first");
		return 2;
	}
	pm_plant(NULL);
	if (O.pool_mib && (O.pool_mib < 16 || O.pool_mib % 2)) {
		fprintf(stderr, "crashtest: --pool-mib must be an even number >= 16\n");
		return 2;
	}
	if (!O.nspecs) {
		O.specs[O.nspecs++] = "single";
		O.specs[O.nspecs++] = "pairs";
	}
	struct ct_workload *ws = NULL;
	int nw = 0;
	for (int i = 0; i < O.nspecs; i++)
		if (ct_workloads(O.specs[i], O.seed, O.random_len, &ws, &nw) < 0) {
			fprintf(stderr, "crashtest: no workload %s (see --list)\n", O.specs[i]);
			return 2;
		}
	umask(0);
	setvbuf(stdout, NULL, _IOLBF, 0);
	signal(SIGPIPE, SIG_IGN);
	struct sigaction sa = {.sa_sigaction = on_fault, .sa_flags = SA_SIGINFO};
	sigaction(SIGSEGV, &sa, NULL);
	sigaction(SIGBUS, &sa, NULL);
	/* A fresh directory of our own: /dev/shm is shared, and a name another
	 * user can guess (the pid) may already be theirs, or a symlink. */
	char wd[600];
	snprintf(wd, sizeof wd, "%s/ferrite-crashtest-%d-XXXXXX", O.workdir, (int)getpid());
	if (mkdir_p(O.workdir) < 0 || !mkdtemp(wd)) {
		perror(wd);
		return 2;
	}
	O.workdir = wd;
	int total = nw * O.nmodes;
	struct result *res = calloc((size_t)total + 1, sizeof(*res));
	double t0 = now_s();
	int done = 0, errors = 0;
	uint64_t viol = 0;
	for (int mi = 0; mi < O.nmodes; mi++)
		for (int i = 0; i < nw; i++) {
			if (O.budget > 0 && now_s() - t0 > O.budget)
				goto stop;
			int mode = O.modes[mi];
			const char *mn = mode == FERRITE_MODE_STRICT ? "strict"
					 : mode == CT_MODE_TIER	     ? "tier"
								     : "sync";
			if (explore_one(&ws[i], mode, mn, done, total, &res[done]) < 0)
				errors++;
			viol += res[done].violations;
			done++;
			if (O.expect_violation && viol)
				goto stop;
		}
stop:;
	double secs = now_s() - t0;
	uint64_t inst = 0, named = 0, dups = 0, sampled = 0, checked = 0, alike = 0, nested = 0;
	for (int i = 0; i < done; i++) {
		inst += res[i].instants;
		named += res[i].named;
		dups += res[i].pre_dups;
		sampled += res[i].sampled_out;
		checked += res[i].checked;
		alike += res[i].post_dups;
		nested += res[i].nested;
	}
	char sample_note[64] = "";
	if (sampled)
		snprintf(sample_note, sizeof sample_note, ", %llu left out by --sample",
			 (unsigned long long)sampled);
	printf("\ncrashtest: %d of %d workload runs in %.1f s: %llu crash instants, %llu images "
	       "(%llu duplicates by hash%s), %llu checked in a child (%llu recovered to a state "
	       "already judged), %llu crash-during-recovery images; %llu violations%s\n",
	       done, total, secs, (unsigned long long)inst, (unsigned long long)named,
	       (unsigned long long)dups, sample_note, (unsigned long long)checked,
	       (unsigned long long)alike, (unsigned long long)nested, (unsigned long long)viol,
	       errors ? " (and set-up errors, see above)" : "");
	if (O.json)
		write_json(res, done, secs);
	free(res);
	for (int i = 0; i < nw; i++)
		free(ws[i].ops);
	free(ws);
	if (O.expect_violation) {
		printf("crashtest: %s\n",
		       viol ? "the planted bug was caught" : "expected a violation and found none");
		rm_rf(wd);
		return viol ? 0 : 1;
	}
	if (done == total && !errors && !viol && O.point < 0)
		rm_rf(wd);
	else if (viol || errors)
		printf("crashtest: scratch files kept in %s\n", wd);
	return viol ? 1 : errors ? 2 : 0;
}
