/*
 * micro.c -- a) ctFS's six micro-benchmarks (ctFS paper, sections 2 and 4.1) on one file
 * of --file-size bytes:
 *   Append  4 KiB write() calls to an empty file until it reaches the size;
 *   SWE     sequential write of an empty file in 64 MiB pwrite() calls;
 *   RR, RW  --ops 4 KiB pread()/pwrite() at random 4 KiB-aligned offsets of the full
 *           file (the file SWE wrote: sequentially allocated, as in the paper);
 *   SR, SW  sequential pread()/pwrite() of the full file in 1 MiB calls.
 *
 * Why the comparison is fair: each backend runs the identical call sequence (same
 * sizes, same offsets from the same seed, same source buffer, already faulted in);
 * only the loop of calls is timed -- open, close, unlink and the checks are not. In
 * each run the workloads go one at a time across all backends, in an order that
 * changes every run (bench_order()), so machine noise is spread over the columns
 * rather than landing on one of them; after each measurement a backend settles
 * (ext4 finishes its write-back, untimed) so that it does not steal the other CPU
 * and memory bandwidth from the next backend's turn.
 * Order per run: Append, SWE, SR, RR, RW, SW. SR and RR read a file that was just
 * written (warm page cache for the kernel peers); ext4 gets its untimed write-back
 * and cache drop before RW. After Append, SWE, RW and SW a few blocks are read back
 * and compared, so a backend cannot win by not writing.
 */
#ifndef _GNU_SOURCE /* the top-level CMakeLists.txt defines it */
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench.h"

#define MICRO_FILE "ferrite-bench.dat"
#define SMALL	   4096u
#define SWE_CHUNK  (64u << 20)
#define SEQ_CHUNK  (1u << 20)
#define SMALL_SRCS 256u /* 4 KiB sources cycle through the first 1 MiB of the buffer */
#define CHECKS	   8

enum { M_APPEND, M_SWE, M_RR, M_RW, M_SR, M_SW };

struct micro_ctx {
	uint64_t size;
	unsigned char *src; /* SWE_CHUNK bytes of pseudo-random data */
	unsigned char *dst; /* SEQ_CHUNK bytes */
	uint64_t nrand;
	uint64_t *off_rr;
	uint64_t *off_rw;
	uint64_t seed;
};

void micro_rows_init(struct bench_row rows[MICRO_ROWS])
{
	static const struct {
		const char *name, *unit, *target;
		double min_tmpfs, min_raw;
	} def[MICRO_ROWS] = {
	    [M_APPEND] = {"Append", "4 KiB write", ">=2.5x tmpfs", 2.5, 0},
	    [M_SWE] = {"SWE", "64 MiB pwrite", NULL, 0, 0},
	    [M_RR] = {"RR", "4 KiB pread", ">=2.5x tmpfs", 2.5, 0},
	    [M_RW] = {"RW", "4 KiB pwrite", ">=3x tmpfs, >=1/1.5 raw", 3.0, 1 / 1.5},
	    [M_SR] = {"SR", "1 MiB pread", ">=2x tmpfs", 2.0, 0},
	    [M_SW] = {"SW", "1 MiB pwrite", ">=2x tmpfs", 2.0, 0},
	};

	memset(rows, 0, sizeof(struct bench_row) * MICRO_ROWS);
	for (int i = 0; i < MICRO_ROWS; i++) {
		rows[i].name = def[i].name;
		rows[i].unit = def[i].unit;
		rows[i].target = def[i].target;
		rows[i].min_vs[BK_TMPFS] = def[i].min_tmpfs;
		rows[i].min_vs[BK_RAW] = def[i].min_raw;
	}
}

static const unsigned char *small_src(const struct micro_ctx *m, uint64_t i)
{
	return m->src + (i % SMALL_SRCS) * SMALL;
}

/* Content a sequentially written file holds at OFF (SWE and SW write the same). */
static const unsigned char *seq_src(const struct micro_ctx *m, uint64_t off)
{
	return m->src + off % SWE_CHUNK;
}

static int check_block(struct bench_backend *b, int fd, const struct micro_ctx *m, uint64_t off,
		       const unsigned char *want, struct bench_cell *c)
{
	ssize_t r = b->pread(b->ctx, fd, m->dst, SMALL, (off_t)off);

	if (r != SMALL) {
		cell_fail(c, "read-back", r);
		return -1;
	}
	if (memcmp(m->dst, want, SMALL) != 0) {
		c->failed = 1;
		snprintf(c->err, sizeof(c->err), "read-back at %llu: data differs",
			 (unsigned long long)off);
		return -1;
	}
	return 0;
}

static int check_seq(struct bench_backend *b, int fd, const struct micro_ctx *m,
		     struct bench_cell *c)
{
	uint64_t st = m->seed ^ 0xc0ffee;
	uint64_t nblk = m->size / SMALL;

	for (int i = 0; i < CHECKS; i++) {
		uint64_t off = (i == 0 ? nblk - 1 : rng_next(&st) % nblk) * SMALL;

		if (check_block(b, fd, m, off, seq_src(m, off), c) < 0)
			return -1;
	}
	return 0;
}

static void report_one(const char *name, struct bench_backend *b, int run, int runs,
		       const struct bench_cell *c, double secs)
{
	if (c->failed)
		progress("micro %d/%d %-6s %-7s FAILED: %s", run + 1, runs, name, b->name, c->err);
	else
		progress("micro %d/%d %-6s %-7s %8.3f GB/s %10.0f ops/s (%.2f s)", run + 1, runs,
			 name, b->name, c->bytes / secs / 1e9, c->ops / secs, secs);
}

static void do_append(struct bench_backend *b, const struct micro_ctx *m, struct bench_cell *c)
{
	uint64_t n = m->size / SMALL;
	double t0, t1;
	int fd = b->open(b->ctx, MICRO_FILE, O_CREAT | O_TRUNC | O_RDWR, 0644);

	if (fd < 0) {
		cell_fail(c, "open", fd);
		return;
	}
	t0 = now_sec();
	for (uint64_t i = 0; i < n; i++) {
		ssize_t r = b->write(b->ctx, fd, small_src(m, i), SMALL);

		if (r != SMALL) {
			cell_fail(c, "write", r);
			goto out;
		}
	}
	t1 = now_sec();
	for (uint64_t i = 0; i < n; i += n / 4 + 1)
		if (check_block(b, fd, m, i * SMALL, small_src(m, i), c) < 0)
			goto out;
	cell_add(c, t1 - t0, (double)n, (double)n * SMALL);
out:
	cell_cleanup(b, c, fd, MICRO_FILE);
	if (b->reclaim)
		b->reclaim(b->ctx);
}

/* Leaves the file open in *fdp for the workloads that follow. */
static void do_swe(struct bench_backend *b, const struct micro_ctx *m, struct bench_cell *c,
		   int *fdp)
{
	uint64_t calls = 0;
	double t0, t1;
	int fd = b->open(b->ctx, MICRO_FILE, O_CREAT | O_TRUNC | O_RDWR, 0644);

	*fdp = -1;
	if (fd < 0) {
		cell_fail(c, "open", fd);
		return;
	}
	t0 = now_sec();
	for (uint64_t off = 0; off < m->size; off += SWE_CHUNK, calls++) {
		size_t len = m->size - off < SWE_CHUNK ? m->size - off : SWE_CHUNK;
		ssize_t r = b->pwrite(b->ctx, fd, m->src, len, (off_t)off);

		if (r != (ssize_t)len) {
			cell_fail(c, "pwrite", r);
			goto fail;
		}
	}
	t1 = now_sec();
	if (check_seq(b, fd, m, c) < 0)
		goto fail;
	cell_add(c, t1 - t0, (double)calls, (double)m->size);
	*fdp = fd;
	return;
fail:
	cell_cleanup(b, c, fd, MICRO_FILE);
}

static void do_seq_read(struct bench_backend *b, int fd, const struct micro_ctx *m,
			struct bench_cell *c)
{
	uint64_t calls = 0;
	double t0 = now_sec();

	for (uint64_t off = 0; off < m->size; off += SEQ_CHUNK, calls++) {
		size_t len = m->size - off < SEQ_CHUNK ? m->size - off : SEQ_CHUNK;
		ssize_t r = b->pread(b->ctx, fd, m->dst, len, (off_t)off);

		if (r != (ssize_t)len) {
			cell_fail(c, "pread", r);
			return;
		}
	}
	cell_add(c, now_sec() - t0, (double)calls, (double)m->size);
}

static void do_seq_write(struct bench_backend *b, int fd, const struct micro_ctx *m,
			 struct bench_cell *c)
{
	uint64_t calls = 0;
	double t0, t1;

	t0 = now_sec();
	for (uint64_t off = 0; off < m->size; off += SEQ_CHUNK, calls++) {
		size_t len = m->size - off < SEQ_CHUNK ? m->size - off : SEQ_CHUNK;
		ssize_t r = b->pwrite(b->ctx, fd, seq_src(m, off), len, (off_t)off);

		if (r != (ssize_t)len) {
			cell_fail(c, "pwrite", r);
			return;
		}
	}
	t1 = now_sec();
	if (check_seq(b, fd, m, c) < 0)
		return;
	cell_add(c, t1 - t0, (double)calls, (double)m->size);
}

static void do_rand_read(struct bench_backend *b, int fd, const struct micro_ctx *m,
			 struct bench_cell *c)
{
	double t0 = now_sec();

	for (uint64_t i = 0; i < m->nrand; i++) {
		ssize_t r = b->pread(b->ctx, fd, m->dst, SMALL, (off_t)m->off_rr[i]);

		if (r != SMALL) {
			cell_fail(c, "pread", r);
			return;
		}
	}
	cell_add(c, now_sec() - t0, (double)m->nrand, (double)m->nrand * SMALL);
}

static void do_rand_write(struct bench_backend *b, int fd, const struct micro_ctx *m,
			  struct bench_cell *c)
{
	double t0, t1;
	uint64_t last = m->nrand - 1;
	int rc;

	if (b->prepare_random_write) {
		rc = b->prepare_random_write(b->ctx, fd);
		if (rc < 0) {
			cell_fail(c, "write-back before RW", rc);
			return;
		}
	}
	t0 = now_sec();
	for (uint64_t i = 0; i < m->nrand; i++) {
		ssize_t r = b->pwrite(b->ctx, fd, small_src(m, i), SMALL, (off_t)m->off_rw[i]);

		if (r != SMALL) {
			cell_fail(c, "pwrite", r);
			return;
		}
	}
	t1 = now_sec();
	if (check_block(b, fd, m, m->off_rw[last], small_src(m, last), c) < 0)
		return;
	cell_add(c, t1 - t0, (double)m->nrand, (double)m->nrand * SMALL);
}

static int micro_ctx_init(struct micro_ctx *m, const struct bench_opts *o)
{
	uint64_t st = o->seed;
	uint64_t nblk = o->file_size / SMALL;

	memset(m, 0, sizeof(*m));
	m->size = o->file_size;
	m->nrand = o->rand_ops;
	m->seed = o->seed;
	if (posix_memalign((void **)&m->src, 2u << 20, SWE_CHUNK) ||
	    posix_memalign((void **)&m->dst, 2u << 20, SEQ_CHUNK))
		return -ENOMEM;
	m->off_rr = malloc(m->nrand * sizeof(uint64_t));
	m->off_rw = malloc(m->nrand * sizeof(uint64_t));
	if (!m->off_rr || !m->off_rw)
		return -ENOMEM;
	/* Incompressible, non-zero data; every page touched before timing. */
	for (size_t i = 0; i < SWE_CHUNK / 8; i++)
		((uint64_t *)m->src)[i] = rng_next(&st) | 1;
	memset(m->dst, 0x5a, SEQ_CHUNK);
	for (uint64_t i = 0; i < m->nrand; i++)
		m->off_rr[i] = rng_next(&st) % nblk * SMALL;
	for (uint64_t i = 0; i < m->nrand; i++)
		m->off_rw[i] = rng_next(&st) % nblk * SMALL;
	return 0;
}

static void micro_ctx_free(struct micro_ctx *m)
{
	free(m->src);
	free(m->dst);
	free(m->off_rr);
	free(m->off_rw);
}

void micro_run(struct bench_backend *bk[BK_COUNT], const struct bench_opts *o,
	       struct bench_row rows[MICRO_ROWS])
{
	struct micro_ctx m;
	static const int order[MICRO_ROWS] = {M_APPEND, M_SWE, M_SR, M_RR, M_RW, M_SW};

	if (micro_ctx_init(&m, o) < 0) {
		progress("micro: out of memory for buffers");
		micro_ctx_free(&m);
		return;
	}
	for (int run = 0; run < o->runs; run++) {
		int fd[BK_COUNT];

		for (int k = 0; k < BK_COUNT; k++)
			fd[k] = -1;
		for (int w = 0; w < MICRO_ROWS; w++) {
			int wl = order[w];

			for (int k = 0; k < BK_COUNT; k++) {
				int id = bench_order(run, k);
				struct bench_backend *b = bk[id];
				struct bench_cell *c = &rows[wl].cell[id];
				int n0 = c->n;

				if (!b || !(MICRO_COLS & (1u << id)) || c->failed)
					continue;
				if (wl != M_APPEND && wl != M_SWE && fd[id] < 0) {
					c->failed = 1;
					snprintf(c->err, sizeof(c->err), "no file: SWE failed");
					continue;
				}
				switch (wl) {
				case M_APPEND:
					do_append(b, &m, c);
					break;
				case M_SWE:
					do_swe(b, &m, c, &fd[id]);
					break;
				case M_SR:
					do_seq_read(b, fd[id], &m, c);
					break;
				case M_RR:
					do_rand_read(b, fd[id], &m, c);
					break;
				case M_RW:
					do_rand_write(b, fd[id], &m, c);
					break;
				default:
					do_seq_write(b, fd[id], &m, c);
					break;
				}
				if (b->settle)
					b->settle(b->ctx);
				report_one(rows[wl].name, b, run, o->runs, c,
					   c->n > n0 ? c->secs[c->n - 1] : 0);
			}
		}
		for (int id = 0; id < BK_COUNT; id++) {
			if (fd[id] < 0) /* only MICRO_COLS have one */
				continue;
			cell_cleanup(bk[id], &rows[M_SWE].cell[id], fd[id], MICRO_FILE);
			if (bk[id]->reclaim)
				bk[id]->reclaim(bk[id]->ctx);
		}
	}
	micro_ctx_free(&m);
}
