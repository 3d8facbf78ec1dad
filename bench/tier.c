/*
 * tier.c -- d) the tiered pool against ext4 on the machine's disk (First Responder,
 * section 5; the targets: >= 5x ext4 on the synthetic mix, >= 10x on varmail,
 * forced flushes under 2 % of the cache's accesses). Three workloads, each on
 *   tier       the ferrite API on a tiered pool in /dev/shm whose backing directory is
 *              on the disk (--disk-dir), the data set larger than the pool;
 *   ext4-disk  POSIX calls in a plain directory of the same disk;
 *   pm         the ferrite pm engine (the ferrite column's pool), if the data fits.
 * Workloads:
 *   mix      an FIO-like synthetic mix over five files of different sizes and access
 *            patterns (uniform random read/write, a skewed hot set, a normal
 *            distribution, a log appended to, a sequential reader), 4 and 8 KiB calls,
 *            ~66 % reads, fsync after 1-5 % of a file's writes (~2 % of all writes);
 *            ops = reads + writes (fsyncs are part of their write, as fio counts);
 *   varmail  filebench's varmail loop over a set of ~16 KiB files: delete a file;
 *            create one, append, fsync, close; open one, read it whole, append, fsync,
 *            close; open one, read it whole, close (13 operations, filebench's flowops);
 *   oltp     a filebench-oltp-like transaction on a few large data files and a log:
 *            10 random 8 KiB reads, 2 random 8 KiB page writes each followed by
 *            fdatasync (the DB writer's dsync writes), a 4 KiB log append and fdatasync
 *            (the commit); 16 operations.
 * Why the comparison is fair: every column runs the identical call sequence, drawn from
 * --seed before anything is timed, with the same fsync/fdatasync calls; each run fills
 * the files afresh (untimed), then every column settles -- ext4 writes back (syncfs),
 * the tiered pool is drained (unmounted and mounted again: no dirty chunk is left, the
 * cached ones stay valid) -- and the page cache is dropped (root; not with
 * --no-drop-caches), so ext4 and the tier's backing files start cold alike and the
 * fill's write-back never lands in the timed part. Only the loop of calls is timed.
 * After it the columns settle again, untimed, so the tier's flusher or ext4's
 * write-back never runs into the next column's turn; the columns take turns in an
 * order rotated every run (bench_order()). A few written blocks are read back and
 * compared after each run. The tier's fill is paced (it waits while more than a
 * quarter of the cache is dirty) so that it does not spend minutes in forced flushes;
 * its cache counters are read before and after the timed loop only.
 */
#ifndef _GNU_SOURCE /* the top-level CMakeLists.txt defines it */
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"

enum { TW_MIX, TW_VARMAIL, TW_OLTP };

#define SRC_SIZE    (1u << 20) /* pseudo-random source bytes (plus SRC_SLACK) */
#define SRC_SLACK   (64u << 10)
#define READ_CALL   (1u << 20) /* varmail reads whole files in 1 MiB calls, as filebench */
#define FILL_CALL   (1u << 20)
#define CHECKS	    8
#define TICK_SECS   10.0 /* progress line every so often during long phases */
#define MIX_FILES   5
#define OLTP_FILES  4
#define OLTP_READS  10
#define OLTP_WRITES 2
#define OLTP_PAGE   8192u
#define OLTP_LOG    4096u
#define VM_MIN	    1024u
#define VM_SPAN	    (30u << 10) /* varmail sizes 1..31 KiB, mean 16 KiB */

/* ---- the synthetic mix ---------------------------------------------------------- */

enum { D_UNIFORM, D_HOT, D_NORMAL, D_APPEND, D_SEQ };
enum { K_READ, K_WRITE, K_WRITE_FSYNC };

struct mix_file {
	const char *name;
	unsigned share;	 /* percent of --mix-data */
	unsigned io;	 /* bytes per call */
	int dist;	 /* D_*: where its calls go */
	unsigned reads;	 /* percent of its calls that read */
	unsigned fsyncs; /* per mille of its writes followed by fsync */
	unsigned weight; /* percent of all calls that go to it */
};

#define MIX_LOG 3 /* the file appended to: the data set grows by its writes */

static const struct mix_file mix_files[MIX_FILES] = {
    {"mix/rand-rw-4k", 25, 4096, D_UNIFORM, 50, 20, 25},
    {"mix/hot-8k", 30, 8192, D_HOT, 95, 50, 25}, /* 90 % of calls in 10 % of the file */
    {"mix/normal-4k", 20, 4096, D_NORMAL, 50, 30, 20},
    {"mix/log-8k", 5, 8192, D_APPEND, 0, 10, 10},
    {"mix/seq-read-8k", 20, 8192, D_SEQ, 100, 0, 20},
};

struct mix_op {
	uint64_t off;
	uint8_t file, kind;
};

struct vm_loop {
	uint32_t del, create, open1, open2; /* file numbers */
	uint32_t len1, len2;		    /* the two appends */
};

struct oltp_io {
	uint32_t page;
	uint8_t file;
};

struct tier_ctx {
	const struct bench_opts *o;
	unsigned char *src; /* SRC_SIZE + SRC_SLACK */
	unsigned char *buf; /* READ_CALL */
	int drop;	    /* drop the page cache before timed runs */
	char name[64];	    /* scratch for file names */
	/* mix */
	uint64_t mix_size[MIX_FILES];
	struct mix_op *mix;
	/* varmail */
	uint32_t *vm_size;  /* initial sizes of files 0..files-1 */
	uint32_t *vm_final; /* while drawing: the files that exist after each loop */
	struct vm_loop *vm;
	/* oltp */
	uint64_t oltp_pages; /* pages per data file */
	struct oltp_io *oltp;
};

/* Source bytes of the I-th write (at most SRC_SLACK long). */
static const unsigned char *src_of(const struct tier_ctx *x, uint64_t i)
{
	return x->src + (i % 256) * 4096;
}

static uint64_t pct_of(uint64_t v, unsigned pct)
{
	return v / 100 * pct + v % 100 * pct / 100;
}

static uint64_t mix_growth(const struct bench_opts *o)
{
	return o->mix_ops / 100 * mix_files[MIX_LOG].weight * mix_files[MIX_LOG].io;
}

/* Upper bounds of each data set, initial plus growth during the timed run. */
static uint64_t data_bytes(const struct bench_opts *o, int w)
{
	switch (w) {
	case TW_MIX:
		return o->mix_data + mix_growth(o);
	case TW_VARMAIL:
		return o->varmail_files * (VM_MIN + VM_SPAN / 2) +
		       o->varmail_loops * (VM_MIN + VM_SPAN);
	default:
		return o->oltp_data + o->oltp_txns * OLTP_LOG;
	}
}

uint64_t tier_max_data(const struct bench_opts *o)
{
	uint64_t m = 0;

	for (int w = TW_MIX; w <= TW_OLTP; w++)
		if ((o->tier_workloads & (1u << w)) && data_bytes(o, w) > m)
			m = data_bytes(o, w);
	return m;
}

void tier_rows_init(struct tier_group *g, const struct bench_opts *o)
{
	static const struct {
		const char *name, *unit, *target;
		double min_disk;
	} def[TIER_ROWS] = {
	    [TW_MIX] = {"mix", "4/8 KiB read, write", ">=5x ext4-disk", 5.0},
	    [TW_VARMAIL] = {"varmail", "filebench flowop", ">=10x ext4-disk", 10.0},
	    [TW_OLTP] = {"oltp", "8 KiB I/O, 4K log", NULL, 0},
	};
	double pool = (double)o->tier_pool_size;
	char a[32], b[32];

	memset(g, 0, sizeof(*g));
	for (int i = 0; i < TIER_ROWS; i++) {
		g->rows[i].name = def[i].name;
		g->rows[i].unit = def[i].unit;
		g->rows[i].target = def[i].target;
		g->rows[i].subject = BK_TIER;
		g->rows[i].min_vs[BK_DISK] = def[i].min_disk;
	}
	snprintf(g->data[TW_MIX], sizeof(g->data[0]),
		 "%d files, %s (%.1fx the tier pool), %llu calls, ~66%% reads", MIX_FILES,
		 fmt_size(o->mix_data, a, sizeof(a)), (double)o->mix_data / pool,
		 (unsigned long long)o->mix_ops);
	snprintf(g->data[TW_VARMAIL], sizeof(g->data[0]),
		 "%llu files of 1-31 KiB, ~%s (%.1fx the pool), %llu loops",
		 (unsigned long long)o->varmail_files,
		 fmt_size(o->varmail_files * (VM_MIN + VM_SPAN / 2), a, sizeof(a)),
		 (double)(o->varmail_files * (VM_MIN + VM_SPAN / 2)) / pool,
		 (unsigned long long)o->varmail_loops);
	snprintf(g->data[TW_OLTP], sizeof(g->data[0]),
		 "%d data files of %s + a log (%.1fx the pool), %llu transactions", OLTP_FILES,
		 fmt_size(o->oltp_data / OLTP_FILES, b, sizeof(b)), (double)o->oltp_data / pool,
		 (unsigned long long)o->oltp_txns);
	for (int i = 0; i < TIER_ROWS; i++)
		if (!(o->tier_workloads & (1u << i)))
			snprintf(g->data[i], sizeof(g->data[i]), "not run (--workloads)");
}

/* ---- the call sequences (drawn once, before anything is timed) ------------------- */

static double rng_unit(uint64_t *st) /* (0, 1] */
{
	return ((double)(rng_next(st) >> 11) + 1.0) / 9007199254740992.0;
}

static int mix_init(struct tier_ctx *x, uint64_t *st)
{
	const struct bench_opts *o = x->o;
	uint64_t seq[MIX_FILES] = {0};

	x->mix = calloc(o->mix_ops ? o->mix_ops : 1, sizeof(*x->mix));
	if (!x->mix)
		return -ENOMEM;
	for (int f = 0; f < MIX_FILES; f++) {
		uint64_t io = mix_files[f].io;
		uint64_t sz = pct_of(o->mix_data, mix_files[f].share) / io * io;

		x->mix_size[f] = sz < 16 * io ? 16 * io : sz;
	}
	for (uint64_t i = 0; i < o->mix_ops; i++) {
		struct mix_op *op = &x->mix[i];
		unsigned r = (unsigned)(rng_next(st) % 100), f = 0;
		const struct mix_file *m;
		uint64_t nblk, blk;

		while (f + 1 < MIX_FILES && r >= mix_files[f].weight) {
			r -= mix_files[f].weight;
			f++;
		}
		m = &mix_files[f];
		nblk = x->mix_size[f] / m->io;
		op->file = (uint8_t)f;
		op->kind = rng_next(st) % 100 < m->reads ? K_READ : K_WRITE;
		if (op->kind == K_WRITE && rng_next(st) % 1000 < m->fsyncs)
			op->kind = K_WRITE_FSYNC;
		switch (m->dist) {
		case D_HOT:
			blk = rng_next(st) % 10 ? rng_next(st) % (nblk / 10) : rng_next(st) % nblk;
			break;
		case D_NORMAL: {
			double z = sqrt(-2.0 * log(rng_unit(st))) * cos(2.0 * M_PI * rng_unit(st));
			double b = (double)nblk / 2 + z * (double)nblk / 16;

			blk = b < 0 ? 0 : b >= (double)nblk ? nblk - 1 : (uint64_t)b;
			break;
		}
		case D_APPEND:
			blk = nblk + seq[f]++;
			break;
		case D_SEQ:
			blk = seq[f]++ % nblk;
			break;
		default:
			blk = rng_next(st) % nblk;
			break;
		}
		op->off = blk * m->io;
	}
	return 0;
}

static int varmail_init(struct tier_ctx *x, uint64_t *st)
{
	uint64_t n = x->o->varmail_files, loops = x->o->varmail_loops;
	uint32_t next = (uint32_t)n;

	x->vm_size = calloc(n, sizeof(*x->vm_size));
	x->vm_final = calloc(n, sizeof(*x->vm_final));
	x->vm = calloc(loops ? loops : 1, sizeof(*x->vm));
	if (!x->vm_size || !x->vm_final || !x->vm)
		return -ENOMEM;
	for (uint64_t i = 0; i < n; i++) {
		x->vm_size[i] = VM_MIN + (uint32_t)(rng_next(st) % VM_SPAN);
		x->vm_final[i] = (uint32_t)i; /* the live set, as the loops will change it */
	}
	for (uint64_t l = 0; l < loops; l++) {
		struct vm_loop *v = &x->vm[l];
		uint64_t j = rng_next(st) % n;

		v->del = x->vm_final[j];
		v->create = x->vm_final[j] = next++;
		v->len1 = VM_MIN + (uint32_t)(rng_next(st) % VM_SPAN);
		v->open1 = x->vm_final[rng_next(st) % n];
		v->len2 = VM_MIN + (uint32_t)(rng_next(st) % VM_SPAN);
		v->open2 = x->vm_final[rng_next(st) % n];
	}
	return 0;
}

static int oltp_init(struct tier_ctx *x, uint64_t *st)
{
	uint64_t n = x->o->oltp_txns * (OLTP_READS + OLTP_WRITES);

	x->oltp_pages = x->o->oltp_data / OLTP_FILES / OLTP_PAGE;
	if (x->oltp_pages < 16)
		x->oltp_pages = 16;
	x->oltp = calloc(n ? n : 1, sizeof(*x->oltp));
	if (!x->oltp)
		return -ENOMEM;
	for (uint64_t i = 0; i < n; i++) {
		x->oltp[i].file = (uint8_t)(rng_next(st) % OLTP_FILES);
		x->oltp[i].page = (uint32_t)(rng_next(st) % x->oltp_pages);
	}
	return 0;
}

static void tier_ctx_free(struct tier_ctx *x)
{
	free(x->src);
	free(x->buf);
	free(x->mix);
	free(x->vm_size);
	free(x->vm_final);
	free(x->vm);
	free(x->oltp);
}

static int tier_ctx_init(struct tier_ctx *x, const struct bench_opts *o)
{
	uint64_t st = o->seed ^ 0x7e1e5;

	memset(x, 0, sizeof(*x));
	x->o = o;
	x->drop = o->drop_caches && !o->quick && geteuid() == 0;
	x->src = malloc(SRC_SIZE + SRC_SLACK);
	x->buf = malloc(READ_CALL);
	if (!x->src || !x->buf)
		return -ENOMEM;
	for (size_t i = 0; i < SRC_SIZE + SRC_SLACK; i++)
		x->src[i] = (unsigned char)(rng_next(&st) >> 56);
	memset(x->buf, 0, READ_CALL);
	if (mix_init(x, &st) < 0 || varmail_init(x, &st) < 0 || oltp_init(x, &st) < 0)
		return -ENOMEM;
	return 0;
}

/* ---- helpers -------------------------------------------------------------------- */

struct ticker {
	double last;
	const char *what;
	struct bench_backend *b;
};

static void tick(struct ticker *t, uint64_t done, uint64_t total)
{
	double now = now_sec();

	if (now - t->last < TICK_SECS)
		return;
	t->last = now;
	progress("  %s %s: %.0f%%", t->b->name, t->what, 100.0 * (double)done / (double)total);
}

/* The tier's fill waits while more than a quarter of its cache is dirty: a writer that
 * outruns the flusher makes room by forced flushes (write + fdatasync per 4 KiB chunk). */
static void fill_pace(struct bench_backend *b, int id)
{
	struct tier_cache_sample s;

	if (id != BK_TIER)
		return;
	for (int i = 0; i < 20000; i++) { /* at most ~20 s */
		if (ferrite_backend_tier_sample(b, &s) < 0 || s.dirty_end * 4 <= s.chunks)
			return;
		usleep(1000);
	}
}

/* Writes LEN bytes of source data from file offset 0 (byte y is src[y % SRC_SIZE]). */
static int fill_file(struct bench_backend *b, int id, const struct tier_ctx *x, int fd,
		     uint64_t len, struct bench_cell *c)
{
	for (uint64_t off = 0; off < len; off += FILL_CALL) {
		size_t n = len - off < FILL_CALL ? (size_t)(len - off) : FILL_CALL;
		ssize_t w;

		fill_pace(b, id);
		w = b->pwrite(b->ctx, fd, x->src, n, (off_t)off);
		if (w != (ssize_t)n) {
			cell_fail(c, "fill write", w);
			return -1;
		}
	}
	return 0;
}

static int check(struct bench_backend *b, int fd, struct tier_ctx *x, uint64_t off,
		 const unsigned char *want, size_t len, struct bench_cell *c)
{
	ssize_t r = b->pread(b->ctx, fd, x->buf, len, (off_t)off);

	if (r != (ssize_t)len) {
		cell_fail(c, "read-back", r);
		return -1;
	}
	if (memcmp(x->buf, want, len) != 0) {
		c->failed = 1;
		snprintf(c->err, sizeof(c->err), "read-back at %llu: data differs",
			 (unsigned long long)off);
		return -1;
	}
	return 0;
}

static int open_file(struct bench_backend *b, const char *path, int flags, struct bench_cell *c)
{
	int fd = b->open(b->ctx, path, flags, 0644);

	if (fd < 0) {
		char what[96];

		snprintf(what, sizeof(what), "open %.80s", path);
		cell_fail(c, what, fd);
	}
	return fd;
}

/* Removes PATH (a file, or with dir a directory); ENOENT is fine when quiet. */
static void remove_path(struct bench_backend *b, const char *path, int dir, int quiet,
			struct bench_cell *c)
{
	int rc = dir ? b->rmdir(b->ctx, path) : b->unlink(b->ctx, path);

	if (rc < 0 && !(quiet && rc == -ENOENT) && !c->cleanup_err[0])
		snprintf(c->cleanup_err, sizeof(c->cleanup_err), "removing %.60s afterwards: %s",
			 path, strerror(-rc));
}

/* ---- mix --------------------------------------------------------------------------- */

static int mix_fill(struct bench_backend *b, int id, struct tier_ctx *x, struct bench_cell *c)
{
	int rc = b->mkdir(b->ctx, "mix", 0755);

	if (rc < 0) {
		cell_fail(c, "mkdir mix", rc);
		return -1;
	}
	for (int f = 0; f < MIX_FILES; f++) {
		int fd = open_file(b, mix_files[f].name, O_CREAT | O_TRUNC | O_RDWR, c);

		if (fd < 0)
			return -1;
		rc = fill_file(b, id, x, fd, x->mix_size[f], c);
		b->close(b->ctx, fd);
		if (rc < 0)
			return -1;
	}
	return 0;
}

static int mix_timed(struct bench_backend *b, struct tier_ctx *x, struct bench_cell *c,
		     double *secs, double *ops)
{
	struct ticker t = {now_sec(), "mix", b};
	uint64_t n = x->o->mix_ops, seen[CHECKS];
	int fd[MIX_FILES], nseen = 0, rc = 0;
	double t0, t1;

	for (int f = 0; f < MIX_FILES; f++)
		fd[f] = -1;
	for (int f = 0; f < MIX_FILES && rc == 0; f++)
		if ((fd[f] = open_file(b, mix_files[f].name, O_RDWR, c)) < 0)
			rc = -1;
	t0 = now_sec();
	for (uint64_t i = 0; i < n && rc == 0; i++) {
		const struct mix_op *op = &x->mix[i];
		size_t io = mix_files[op->file].io;
		ssize_t r;

		if (op->kind == K_READ)
			r = b->pread(b->ctx, fd[op->file], x->buf, io, (off_t)op->off);
		else
			r = b->pwrite(b->ctx, fd[op->file], src_of(x, i), io, (off_t)op->off);
		if (r != (ssize_t)io) {
			cell_fail(c, op->kind == K_READ ? "pread" : "pwrite", r);
			rc = -1;
		} else if (op->kind == K_WRITE_FSYNC && (r = b->fsync(b->ctx, fd[op->file])) < 0) {
			cell_fail(c, "fsync", r);
			rc = -1;
		}
		if ((i & 1023) == 0)
			tick(&t, i, n);
	}
	t1 = now_sec();
	/* The last writes to distinct blocks hold what they wrote. */
	for (uint64_t i = n; i-- > 0 && rc == 0 && nseen < CHECKS;) {
		const struct mix_op *op = &x->mix[i];
		uint64_t key = op->off * MIX_FILES + op->file;
		int dup = 0;

		if (op->kind == K_READ)
			continue;
		for (int j = 0; j < nseen; j++)
			dup |= seen[j] == key;
		if (dup)
			continue;
		seen[nseen++] = key;
		rc = check(b, fd[op->file], x, op->off, src_of(x, i), mix_files[op->file].io, c);
	}
	for (int f = 0; f < MIX_FILES; f++)
		if (fd[f] >= 0)
			b->close(b->ctx, fd[f]);
	*secs = t1 - t0;
	*ops = (double)n;
	return rc;
}

static void mix_cleanup(struct bench_backend *b, struct tier_ctx *x, struct bench_cell *c)
{
	(void)x;
	for (int f = 0; f < MIX_FILES; f++)
		remove_path(b, mix_files[f].name, 0, 1, c);
	remove_path(b, "mix", 1, 0, c);
}

/* ---- varmail ------------------------------------------------------------------------- */

static const char *vm_name(struct tier_ctx *x, uint32_t id)
{
	snprintf(x->name, sizeof(x->name), "varmail/f%07u", id);
	return x->name;
}

static int varmail_fill(struct bench_backend *b, int id, struct tier_ctx *x, struct bench_cell *c)
{
	struct ticker t = {now_sec(), "varmail fill", b};
	uint64_t n = x->o->varmail_files, bytes = 0;
	int rc = b->mkdir(b->ctx, "varmail", 0755);

	if (rc < 0) {
		cell_fail(c, "mkdir varmail", rc);
		return -1;
	}
	for (uint64_t i = 0; i < n; i++) {
		int fd = open_file(b, vm_name(x, (uint32_t)i), O_CREAT | O_EXCL | O_WRONLY, c);
		ssize_t w;

		if (fd < 0)
			return -1;
		w = b->pwrite(b->ctx, fd, x->src, x->vm_size[i], 0);
		b->close(b->ctx, fd);
		if (w != (ssize_t)x->vm_size[i]) {
			cell_fail(c, "fill write", w);
			return -1;
		}
		bytes += x->vm_size[i];
		if (bytes >= FILL_CALL) {
			fill_pace(b, id);
			bytes = 0;
		}
		tick(&t, i, n);
	}
	return 0;
}

static int read_whole(struct bench_backend *b, int fd, struct tier_ctx *x, struct bench_cell *c)
{
	for (off_t off = 0;;) {
		ssize_t r = b->pread(b->ctx, fd, x->buf, READ_CALL, off);

		if (r < 0) {
			cell_fail(c, "read", r);
			return -1;
		}
		off += r;
		if (r < (ssize_t)READ_CALL)
			return 0;
	}
}

/* Appends LEN bytes of source data, then fsync; 0 or -1. */
static int append_sync(struct bench_backend *b, int fd, const unsigned char *src, size_t len,
		       struct bench_cell *c)
{
	ssize_t w = b->write(b->ctx, fd, src, len);

	if (w != (ssize_t)len) {
		cell_fail(c, "append", w);
		return -1;
	}
	if ((w = b->fsync(b->ctx, fd)) < 0) {
		cell_fail(c, "fsync", w);
		return -1;
	}
	return 0;
}

/* filebench's varmail flowops, in its order. */
static int varmail_loop(struct bench_backend *b, struct tier_ctx *x, uint64_t l,
			struct bench_cell *c)
{
	const struct vm_loop *v = &x->vm[l];
	int rc = b->unlink(b->ctx, vm_name(x, v->del));
	int fd;

	if (rc < 0) {
		cell_fail(c, "unlink", rc);
		return -1;
	}
	fd = open_file(b, vm_name(x, v->create), O_CREAT | O_EXCL | O_RDWR | O_APPEND, c);
	if (fd < 0)
		return -1;
	rc = append_sync(b, fd, src_of(x, 2 * l), v->len1, c);
	b->close(b->ctx, fd);
	if (rc < 0)
		return -1;
	fd = open_file(b, vm_name(x, v->open1), O_RDWR | O_APPEND, c);
	if (fd < 0)
		return -1;
	rc = read_whole(b, fd, x, c);
	if (rc == 0)
		rc = append_sync(b, fd, src_of(x, 2 * l + 1), v->len2, c);
	b->close(b->ctx, fd);
	if (rc < 0)
		return -1;
	fd = open_file(b, vm_name(x, v->open2), O_RDONLY, c);
	if (fd < 0)
		return -1;
	rc = read_whole(b, fd, x, c);
	b->close(b->ctx, fd);
	return rc;
}

static int varmail_timed(struct bench_backend *b, struct tier_ctx *x, struct bench_cell *c,
			 double *secs, double *ops)
{
	struct ticker t = {now_sec(), "varmail", b};
	uint64_t loops = x->o->varmail_loops;
	double t0, t1;
	int rc = 0, fd;

	t0 = now_sec();
	for (uint64_t l = 0; l < loops && rc == 0; l++) {
		rc = varmail_loop(b, x, l, c);
		if ((l & 63) == 0)
			tick(&t, l, loops);
	}
	t1 = now_sec();
	if (rc == 0 && loops > 0) { /* the last file created starts with its first append */
		const struct vm_loop *v = &x->vm[loops - 1];

		fd = open_file(b, vm_name(x, v->create), O_RDONLY, c);
		rc = fd < 0 ? -1 : check(b, fd, x, 0, src_of(x, 2 * (loops - 1)), v->len1, c);
		if (fd >= 0)
			b->close(b->ctx, fd);
	}
	*secs = t1 - t0;
	*ops = 13.0 * (double)loops;
	return rc;
}

static void varmail_cleanup(struct bench_backend *b, struct tier_ctx *x, struct bench_cell *c)
{
	struct ticker t = {now_sec(), "varmail clean-up", b};
	uint64_t n = x->o->varmail_files + x->o->varmail_loops;

	/* every name the run may have left (after a failure: whatever exists) */
	for (uint64_t i = 0; i < n; i++) {
		remove_path(b, vm_name(x, (uint32_t)i), 0, 1, c);
		tick(&t, i, n);
	}
	remove_path(b, "varmail", 1, 0, c);
}

/* ---- oltp -------------------------------------------------------------------------- */

static const char *oltp_name(struct tier_ctx *x, int f)
{
	if (f == OLTP_FILES)
		snprintf(x->name, sizeof(x->name), "oltp/log");
	else
		snprintf(x->name, sizeof(x->name), "oltp/data%d", f);
	return x->name;
}

static int oltp_fill(struct bench_backend *b, int id, struct tier_ctx *x, struct bench_cell *c)
{
	int rc = b->mkdir(b->ctx, "oltp", 0755);

	if (rc < 0) {
		cell_fail(c, "mkdir oltp", rc);
		return -1;
	}
	for (int f = 0; f <= OLTP_FILES; f++) {
		int fd = open_file(b, oltp_name(x, f), O_CREAT | O_TRUNC | O_RDWR, c);

		if (fd < 0)
			return -1;
		rc = f == OLTP_FILES ? 0 : fill_file(b, id, x, fd, x->oltp_pages * OLTP_PAGE, c);
		b->close(b->ctx, fd);
		if (rc < 0)
			return -1;
	}
	return 0;
}

static int oltp_txn(struct bench_backend *b, struct tier_ctx *x, const int *fd, uint64_t t,
		    struct bench_cell *c)
{
	const struct oltp_io *io = &x->oltp[t * (OLTP_READS + OLTP_WRITES)];
	int lfd = fd[OLTP_FILES];
	ssize_t r;

	for (int i = 0; i < OLTP_READS; i++, io++) {
		r = b->pread(b->ctx, fd[io->file], x->buf, OLTP_PAGE, (off_t)io->page * OLTP_PAGE);
		if (r != OLTP_PAGE) {
			cell_fail(c, "pread", r);
			return -1;
		}
	}
	for (int i = 0; i < OLTP_WRITES; i++, io++) {
		r = b->pwrite(b->ctx, fd[io->file], src_of(x, t * OLTP_WRITES + (uint64_t)i),
			      OLTP_PAGE, (off_t)io->page * OLTP_PAGE);
		if (r != OLTP_PAGE || (r = b->fdatasync(b->ctx, fd[io->file])) < 0) {
			cell_fail(c, "page write", r);
			return -1;
		}
	}
	r = b->write(b->ctx, lfd, src_of(x, t), OLTP_LOG);
	if (r != OLTP_LOG || (r = b->fdatasync(b->ctx, lfd)) < 0) {
		cell_fail(c, "log commit", r);
		return -1;
	}
	return 0;
}

static int oltp_timed(struct bench_backend *b, struct tier_ctx *x, struct bench_cell *c,
		      double *secs, double *ops)
{
	struct ticker tk = {now_sec(), "oltp", b};
	uint64_t n = x->o->oltp_txns;
	int fd[OLTP_FILES + 1], rc = 0;
	double t0, t1;

	for (int f = 0; f <= OLTP_FILES; f++)
		fd[f] = -1;
	for (int f = 0; f <= OLTP_FILES && rc == 0; f++)
		if ((fd[f] = open_file(b, oltp_name(x, f),
				       f == OLTP_FILES ? O_RDWR | O_APPEND : O_RDWR, c)) < 0)
			rc = -1;
	t0 = now_sec();
	for (uint64_t t = 0; t < n && rc == 0; t++) {
		rc = oltp_txn(b, x, fd, t, c);
		if ((t & 63) == 0)
			tick(&tk, t, n);
	}
	t1 = now_sec();
	if (rc == 0 && n > 0) { /* the last commit record and the last page written */
		const struct oltp_io *io = &x->oltp[n * (OLTP_READS + OLTP_WRITES) - 1];

		rc = check(b, fd[OLTP_FILES], x, (n - 1) * OLTP_LOG, src_of(x, n - 1), OLTP_LOG, c);
		if (rc == 0)
			rc = check(b, fd[io->file], x, (uint64_t)io->page * OLTP_PAGE,
				   src_of(x, n * OLTP_WRITES - 1), OLTP_PAGE, c);
	}
	for (int f = 0; f <= OLTP_FILES; f++)
		if (fd[f] >= 0)
			b->close(b->ctx, fd[f]);
	*secs = t1 - t0;
	*ops = (double)n * (OLTP_READS + 2 * OLTP_WRITES + 2);
	return rc;
}

static void oltp_cleanup(struct bench_backend *b, struct tier_ctx *x, struct bench_cell *c)
{
	for (int f = 0; f <= OLTP_FILES; f++)
		remove_path(b, oltp_name(x, f), 0, 1, c);
	remove_path(b, "oltp", 1, 0, c);
}

/* ---- the group ---------------------------------------------------------------------- */

struct workload {
	int (*fill)(struct bench_backend *b, int id, struct tier_ctx *x, struct bench_cell *c);
	int (*timed)(struct bench_backend *b, struct tier_ctx *x, struct bench_cell *c,
		     double *secs, double *ops);
	void (*cleanup)(struct bench_backend *b, struct tier_ctx *x, struct bench_cell *c);
};

static const struct workload workloads[TIER_ROWS] = {
    [TW_MIX] = {mix_fill, mix_timed, mix_cleanup},
    [TW_VARMAIL] = {varmail_fill, varmail_timed, varmail_cleanup},
    [TW_OLTP] = {oltp_fill, oltp_timed, oltp_cleanup},
};

/* Untimed: what was written reaches its place (ext4 syncfs, tier drained), then the
 * page cache goes. -1 if the backend is unusable from now on. */
static int settle(struct bench_backend *b, struct tier_ctx *x, int drop, struct bench_cell *c)
{
	int rc = b->quiesce ? b->quiesce(b->ctx) : 0;

	if (rc < 0) {
		cell_fail(c, "settling (tier: unmount and mount)", rc);
		return -1;
	}
	if (drop && x->drop && (rc = drop_page_cache()) < 0) {
		progress("tier: cannot drop the page cache (%s): it stays warm", strerror(-rc));
		x->drop = 0;
	}
	return 0;
}

static void sample_delta(struct tier_cache_sample *d, const struct tier_cache_sample *a,
			 const struct tier_cache_sample *z)
{
	*d = *z; /* end state: valid, dirty, records */
	d->read_hits = z->read_hits - a->read_hits;
	d->read_misses = z->read_misses - a->read_misses;
	d->write_hits = z->write_hits - a->write_hits;
	d->write_misses = z->write_misses - a->write_misses;
	d->collisions = z->collisions - a->collisions;
	d->forced = z->forced - a->forced;
	d->periodic = z->periodic - a->periodic;
	d->wraps = z->wraps - a->wraps;
}

/* One sample: fill, settle, the timed loop, settle, remove. 0, or -1 if the backend
 * cannot be used any more (a settle failed). */
static int tier_one(struct bench_backend *b, int id, struct tier_ctx *x, int w, int run,
		    struct tier_group *g)
{
	const struct workload *wl = &workloads[w];
	struct bench_cell *c = &g->rows[w].cell[id];
	struct tier_cache_sample s0, s1;
	double secs = 0, ops = 0, t0 = now_sec();
	int rc, have0 = 0, runs = x->o->runs;
	const char *name = g->rows[w].name;

	progress("tier %d/%d %-8s %-9s filling", run + 1, runs, name, b->name);
	rc = wl->fill(b, id, x, c);
	if (rc == 0 && settle(b, x, 1, c) < 0)
		return -1;
	if (rc == 0) {
		progress("tier %d/%d %-8s %-9s filled and settled in %.1f s; timed run", run + 1,
			 runs, name, b->name, now_sec() - t0);
		have0 = id == BK_TIER && ferrite_backend_tier_sample(b, &s0) == 0;
		rc = wl->timed(b, x, c, &secs, &ops);
	}
	if (rc == 0) {
		cell_add(c, secs, ops, 0);
		if (have0 && ferrite_backend_tier_sample(b, &s1) == 0 &&
		    g->ncache[w] < BENCH_MAX_RUNS)
			sample_delta(&g->cache[w][g->ncache[w]++], &s0, &s1);
		progress("tier %d/%d %-8s %-9s %10.0f ops/s (%.2f s)", run + 1, runs, name, b->name,
			 ops / secs, secs);
	} else {
		progress("tier %d/%d %-8s %-9s FAILED: %s", run + 1, runs, name, b->name, c->err);
	}
	if (settle(b, x, 0, c) < 0)
		return -1;
	wl->cleanup(b, x, c);
	return settle(b, x, 0, c);
}

/* A cell whose data set would not fit where the backend keeps its data is skipped. */
static int tier_fits(struct bench_backend *b, int id, const struct bench_opts *o, int w,
		     struct bench_cell *c)
{
	uint64_t need = data_bytes(o, w), avail;
	char a[32], f[32];

	if (id == BK_FERRITE)
		need = need / 4 * 5; /* the pm engine's file overheads */
	if (!b->space || b->space(b->ctx, &avail) < 0 || need <= avail)
		return 1;
	snprintf(c->skipped, sizeof(c->skipped),
		 "the data set (up to %s) does not fit in %s free%s", fmt_size(need, a, sizeof(a)),
		 fmt_size(avail, f, sizeof(f)),
		 id == BK_FERRITE ? " in the pm pool (--pool-size)" : "");
	return 0;
}

void tier_run(struct bench_backend *bk[BK_COUNT], const char *skip[BK_COUNT],
	      const struct bench_opts *o, struct tier_group *g)
{
	struct tier_ctx x;
	int broken[BK_COUNT] = {0};

	progress("tier: drawing the call sequences");
	if (tier_ctx_init(&x, o) < 0) {
		progress("tier: out of memory for the call sequences");
		for (int w = 0; w < TIER_ROWS; w++)
			for (int k = 0; k < BK_COUNT; k++)
				cell_fail(&g->rows[w].cell[k], "out of memory", -ENOMEM);
		tier_ctx_free(&x);
		return;
	}
	g->cache_dropped = x.drop;
	for (int run = 0; run < o->runs; run++) {
		for (int w = 0; w < TIER_ROWS; w++) {
			for (int k = 0; k < BK_COUNT && (o->tier_workloads & (1u << w)); k++) {
				int id = bench_order(run, k);
				struct bench_backend *b = bk[id];
				struct bench_cell *c = &g->rows[w].cell[id];

				if (!b || skip[id] || !(TIER_COLS & (1u << id)) || c->failed ||
				    c->skipped[0])
					continue;
				if (broken[id]) {
					c->failed = 1;
					snprintf(c->err, sizeof(c->err),
						 "not run: the backend failed earlier");
					continue;
				}
				if (!tier_fits(b, id, o, w, c))
					continue;
				if (tier_one(b, id, &x, w, run, g) < 0)
					broken[id] = 1;
			}
		}
	}
	g->cache_dropped = x.drop; /* 0 if dropping failed */
	tier_ctx_free(&x);
}
