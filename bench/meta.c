/*
 * meta.c -- b) metadata operations on --files files in one directory:
 *   create     open(O_CREAT | O_WRONLY) + close of a new, empty file;
 *   create+4K  open(O_CREAT | O_WRONLY) + write 4 KiB + close;
 *   open       open(O_RDONLY) + close of an existing file;
 *   stat       stat of an existing file;
 *   rename     each file to a new name in the same directory;
 *   unlink     of the (empty, renamed) files; unlink+4K of the 4 KiB files;
 *   recreate   create+4K again of the names unlink+4K just removed: churn,
 *              where a file system can reuse what it freed (Ferrite's null
 *              files, src/fs/nullfile.c, up to a sixty-fourth of the pool).
 *
 * Why the comparison is fair: names are formatted before timing and are identical
 * for every backend ("meta/f00000042", resolved from the backend's root, one
 * directory deep); open, stat, rename and unlink visit the files in the same
 * pseudo-random order (not creation order, which would flatter any structure that
 * keeps entries in insertion order). Each phase is timed as a whole over all files.
 * Phases go one at a time across all backends, in an order that changes every run;
 * after each phase ext4 commits (syncfs, untimed) so its journal thread does not run
 * during the next backend's phase. The raw column has no name space and is not shown.
 */
#ifndef _GNU_SOURCE /* the top-level CMakeLists.txt defines it */
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

#define META_DIR  "meta"
#define NAME_LEN  32
#define DATA_SIZE 4096

enum { T_CREATE, T_CREATE4K, T_OPEN, T_STAT, T_RENAME, T_UNLINK, T_UNLINK4K, T_RECREATE4K };

struct meta_ctx {
	uint64_t n;
	char (*name)[NAME_LEN];
	char (*renamed)[NAME_LEN];
	uint64_t *perm;
	unsigned char data[DATA_SIZE];
};

void meta_rows_init(struct bench_row rows[META_ROWS])
{
	static const struct {
		const char *name, *unit, *target;
		double min_tmpfs;
	} def[META_ROWS] = {
	    [T_CREATE] = {"create", "open(O_CREAT)+close", ">=1.5x tmpfs", 1.5},
	    [T_CREATE4K] = {"create+4K", "open+write 4K+close", ">=1.5x tmpfs", 1.5},
	    [T_OPEN] = {"open", "open+close", NULL, 0},
	    [T_STAT] = {"stat", "stat", ">=2x tmpfs", 2.0},
	    [T_RENAME] = {"rename", "rename, same dir", NULL, 0},
	    [T_UNLINK] = {"unlink", "unlink (empty)", ">=1.5x tmpfs", 1.5},
	    [T_UNLINK4K] = {"unlink+4K", "unlink (4 KiB file)", NULL, 0},
	    [T_RECREATE4K] = {"recreate", "create+4K, names unlinked", NULL, 0},
	};

	memset(rows, 0, sizeof(struct bench_row) * META_ROWS);
	for (int i = 0; i < META_ROWS; i++) {
		rows[i].name = def[i].name;
		rows[i].unit = def[i].unit;
		rows[i].target = def[i].target;
		rows[i].min_vs[BK_TMPFS] = def[i].min_tmpfs;
	}
}

static int phase(struct bench_backend *b, const struct meta_ctx *x, int t, struct bench_cell *c)
{
	struct stat st;
	double t0 = now_sec();
	long r = 0;
	uint64_t i;

	for (i = 0; i < x->n; i++) {
		uint64_t j = x->perm[i];
		ssize_t w;
		int fd;

		switch (t) {
		case T_CREATE:
			fd = b->open(b->ctx, x->name[i], O_CREAT | O_WRONLY, 0644);
			r = fd < 0 ? fd : b->close(b->ctx, fd);
			break;
		case T_CREATE4K:
		case T_RECREATE4K:
			fd = b->open(b->ctx, x->name[i], O_CREAT | O_WRONLY, 0644);
			if (fd < 0) {
				r = fd;
				break;
			}
			w = b->write(b->ctx, fd, x->data, DATA_SIZE);
			r = b->close(b->ctx, fd);
			if (w != DATA_SIZE)
				r = w < 0 ? w : -EIO;
			break;
		case T_OPEN:
			fd = b->open(b->ctx, x->name[j], O_RDONLY, 0);
			r = fd < 0 ? fd : b->close(b->ctx, fd);
			break;
		case T_STAT:
			r = b->stat(b->ctx, x->name[j], &st);
			break;
		case T_RENAME:
			r = b->rename(b->ctx, x->name[j], x->renamed[j]);
			break;
		case T_UNLINK:
			r = b->unlink(b->ctx, x->renamed[j]);
			break;
		default: /* T_UNLINK4K */
			r = b->unlink(b->ctx, x->name[j]);
			break;
		}
		if (r != 0)
			break;
	}
	if (r != 0) {
		char what[64];

		snprintf(what, sizeof(what), "file %llu", (unsigned long long)i);
		cell_fail(c, what, r < 0 ? r : -EIO);
		return -1;
	}
	cell_add(c, now_sec() - t0, (double)x->n, 0);
	return 0;
}

/* Best effort after a failure: whatever state the phases left behind goes. */
static void meta_cleanup(struct bench_backend *b, const struct meta_ctx *x)
{
	for (uint64_t i = 0; i < x->n; i++) {
		b->unlink(b->ctx, x->name[i]);
		b->unlink(b->ctx, x->renamed[i]);
	}
	b->rmdir(b->ctx, META_DIR);
}

static int meta_ctx_init(struct meta_ctx *x, const struct bench_opts *o)
{
	uint64_t st = o->seed ^ 0x5eed;

	memset(x, 0, sizeof(*x));
	x->n = o->files;
	x->name = malloc(x->n * NAME_LEN);
	x->renamed = malloc(x->n * NAME_LEN);
	x->perm = malloc(x->n * sizeof(uint64_t));
	if (!x->name || !x->renamed || !x->perm)
		return -ENOMEM;
	for (uint64_t i = 0; i < x->n; i++) {
		snprintf(x->name[i], NAME_LEN, META_DIR "/f%08llu", (unsigned long long)i);
		snprintf(x->renamed[i], NAME_LEN, META_DIR "/r%08llu", (unsigned long long)i);
		x->perm[i] = i;
	}
	for (uint64_t i = x->n; i > 1; i--) { /* Fisher-Yates */
		uint64_t k = rng_next(&st) % i;
		uint64_t t = x->perm[i - 1];

		x->perm[i - 1] = x->perm[k];
		x->perm[k] = t;
	}
	for (size_t i = 0; i < DATA_SIZE; i++)
		x->data[i] = (unsigned char)(rng_next(&st) | 1);
	return 0;
}

void meta_run(struct bench_backend *bk[BK_COUNT], const struct bench_opts *o,
	      struct bench_row rows[META_ROWS])
{
	static const int order[META_ROWS] = {T_CREATE, T_OPEN,	   T_STAT,     T_RENAME,
					     T_UNLINK, T_CREATE4K, T_UNLINK4K, T_RECREATE4K};
	struct meta_ctx x;

	if (meta_ctx_init(&x, o) < 0) {
		progress("meta: out of memory for names");
		goto out;
	}
	for (int run = 0; run < o->runs; run++) {
		int broken[BK_COUNT] = {0};

		for (int id = 0; id < BK_COUNT; id++) {
			struct bench_backend *b = bk[id];
			int rc;

			if (!b || !(META_COLS & (1u << id)) || !(b->caps & BK_CAP_NAMESPACE))
				continue;
			rc = b->mkdir(b->ctx, META_DIR, 0755);
			if (rc < 0) {
				cell_fail(&rows[T_CREATE].cell[id], "mkdir " META_DIR, rc);
				broken[id] = 1;
			}
		}
		for (int p = 0; p < META_ROWS; p++) {
			int t = order[p];

			for (int k = 0; k < BK_COUNT; k++) {
				int id = bench_order(run, k);
				struct bench_backend *b = bk[id];
				struct bench_cell *c = &rows[t].cell[id];
				int rc;

				if (!b || !(META_COLS & (1u << id)) ||
				    !(b->caps & BK_CAP_NAMESPACE))
					continue;
				if (broken[id] || c->failed) {
					if (!c->failed) {
						c->failed = 1;
						snprintf(c->err, sizeof(c->err),
							 "not run: an earlier phase failed");
					}
					broken[id] = 1;
					continue;
				}
				rc = phase(b, &x, t, c);
				if (b->settle)
					b->settle(b->ctx);
				if (rc < 0) {
					broken[id] = 1;
					progress("meta %d/%d %-9s %-7s FAILED: %s", run + 1,
						 o->runs, rows[t].name, b->name, c->err);
					continue;
				}
				progress("meta %d/%d %-9s %-7s %10.0f ops/s (%.2f s)", run + 1,
					 o->runs, rows[t].name, b->name, c->ops / c->secs[c->n - 1],
					 c->secs[c->n - 1]);
			}
		}
		for (int id = 0; id < BK_COUNT; id++) {
			struct bench_backend *b = bk[id];

			if (!b || !(META_COLS & (1u << id)) || !(b->caps & BK_CAP_NAMESPACE))
				continue;
			if (broken[id]) {
				meta_cleanup(b, &x);
			} else {
				/* the files recreate made, untimed */
				for (uint64_t i = 0; i < x.n; i++)
					b->unlink(b->ctx, x.name[i]);
				if (b->rmdir(b->ctx, META_DIR) < 0)
					snprintf(rows[T_RECREATE4K].cell[id].cleanup_err,
						 sizeof(rows[T_RECREATE4K].cell[id].cleanup_err),
						 "rmdir " META_DIR " afterwards failed");
			}
			if (b->reclaim)
				b->reclaim(b->ctx);
		}
	}
out:
	free(x.name);
	free(x.renamed);
	free(x.perm);
}
