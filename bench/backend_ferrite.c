/*
 * backend_ferrite.c -- the ferrite column: every operation through the public API
 * (include/ferrite.h) on a pool this program formats with ferrite_mkfs().
 *
 * Why the comparison is fair: the wrappers below have the same shape as the POSIX
 * ones (one indirect call, pass the -errno through), paths are the same relative
 * names the kernel peers resolve from their root descriptor, and the pool lives in
 * /dev/shm like the peers' data. Ferrite pays for durability on every call (sync
 * mode: data and metadata persistent on return); the peers do not.
 */
#ifndef _GNU_SOURCE /* the top-level CMakeLists.txt defines it */
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <ferrite.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench.h"

struct fer_ctx {
	ferrite_fs *fs;
	int keep;
	char pool[4096];
};

static int fer_open(void *ctx, const char *path, int flags, mode_t mode)
{
	return ferrite_open(((struct fer_ctx *)ctx)->fs, path, flags, mode);
}

static int fer_close(void *ctx, int fd)
{
	return ferrite_close(((struct fer_ctx *)ctx)->fs, fd);
}

static ssize_t fer_write(void *ctx, int fd, const void *buf, size_t len)
{
	return ferrite_write(((struct fer_ctx *)ctx)->fs, fd, buf, len);
}

static ssize_t fer_pread(void *ctx, int fd, void *buf, size_t len, off_t off)
{
	return ferrite_pread(((struct fer_ctx *)ctx)->fs, fd, buf, len, off);
}

static ssize_t fer_pwrite(void *ctx, int fd, const void *buf, size_t len, off_t off)
{
	return ferrite_pwrite(((struct fer_ctx *)ctx)->fs, fd, buf, len, off);
}

static int fer_fsync(void *ctx, int fd)
{
	return ferrite_fsync(((struct fer_ctx *)ctx)->fs, fd);
}

static int fer_stat(void *ctx, const char *path, struct stat *st)
{
	return ferrite_stat(((struct fer_ctx *)ctx)->fs, path, st);
}

static int fer_rename(void *ctx, const char *from, const char *to)
{
	return ferrite_rename(((struct fer_ctx *)ctx)->fs, from, to, 0);
}

static int fer_unlink(void *ctx, const char *path)
{
	return ferrite_unlink(((struct fer_ctx *)ctx)->fs, path);
}

static int fer_mkdir(void *ctx, const char *path, mode_t mode)
{
	return ferrite_mkdir(((struct fer_ctx *)ctx)->fs, path, mode);
}

static int fer_rmdir(void *ctx, const char *path)
{
	return ferrite_rmdir(((struct fer_ctx *)ctx)->fs, path);
}

static void fer_fini(void *ctx)
{
	struct fer_ctx *f = ctx;

	ferrite_unmount(f->fs);
	if (!f->keep)
		unlink(f->pool);
	free(f);
}

static void fer_mkfs_progress(void *arg, uint64_t done, uint64_t total)
{
	int *last = arg;
	int pct = total ? (int)(done * 100 / total) : 100;

	if (pct / 25 != *last / 25) {
		*last = pct;
		progress("ferrite: mkfs %d%%", pct);
	}
}

/* Enough for the file of a) or the files of b) (they never coexist: ~4.5 KiB per
 * 4 KiB file), plus room for metadata. The engine allocates the whole pool at mkfs
 * (in /dev/shm/ferrite, a tmpfs shared with other pools), so no more than that. */
static uint64_t fer_pool_size(const struct bench_opts *o)
{
	const uint64_t gib = 1ull << 30;
	uint64_t a = o->file_size + (256ull << 20);
	uint64_t b = o->files * 8192;
	uint64_t need = (a > b ? a : b) + (256ull << 20);

	need = (need + gib - 1) / gib * gib;
	return need < gib ? gib : need;
}

int ferrite_backend_init(struct bench_backend *b, const struct bench_opts *o, int strict, char *why,
			 size_t whylen)
{
	struct ferrite_mkfs_opts mo = {0};
	struct ferrite_info info;
	struct fer_ctx *f;
	char dir[4096];
	char sz[32];
	int last = -1;
	int rc;

	f = calloc(1, sizeof(*f));
	if (!f)
		return -ENOMEM;
	f->keep = o->keep;
	snprintf(f->pool, sizeof(f->pool), "%s", o->pool);
	if (strict) { /* bench.pool -> bench-strict.pool */
		size_t n = strlen(o->pool);
		int dot = n > 5 && strcmp(o->pool + n - 5, ".pool") == 0;
		snprintf(f->pool, sizeof(f->pool), "%.*s-strict%s", (int)(dot ? n - 5 : n), o->pool,
			 dot ? ".pool" : "");
	}
	snprintf(dir, sizeof(dir), "%s", o->pool);
	rc = mkdir_p(dirname(dir));
	if (rc < 0) {
		snprintf(why, whylen, "cannot create the directory of %s: %s", o->pool,
			 strerror(-rc));
		free(f);
		return rc;
	}
	mo.size = o->pool_size ? o->pool_size : fer_pool_size(o);
	mo.mode = strict ? FERRITE_MODE_STRICT : FERRITE_MODE_SYNC;
	mo.force = 1;
	mo.progress = fer_mkfs_progress;
	mo.progress_arg = &last;
	progress("ferrite: mkfs %s (%s)", f->pool, fmt_size(mo.size, sz, sizeof(sz)));
	rc = ferrite_mkfs(f->pool, &mo);
	if (rc < 0) {
		snprintf(why, whylen, "ferrite_mkfs(%s): %s", f->pool, ferrite_errmsg());
		free(f);
		return rc;
	}
	rc = ferrite_mount(f->pool, NULL, &f->fs);
	if (rc < 0) {
		snprintf(why, whylen, "ferrite_mount(%s): %s", f->pool, ferrite_errmsg());
		unlink(f->pool);
		free(f);
		return rc;
	}
	memset(b, 0, sizeof(*b));
	b->name = strict ? "strict" : "ferrite";
	b->caps = strict ? 0 : BK_CAP_NAMESPACE; /* metadata is the same in both modes */
	b->ctx = f;
	if (ferrite_get_info(f->fs, &info) == 0)
		snprintf(b->where, sizeof(b->where),
			 "%.200s, %s, %.160s, huge pages: %s, persistence: %.64s", f->pool,
			 fmt_size(info.pool_bytes, sz, sizeof(sz)), info.backing,
			 info.huge_pages ? "yes" : "no", info.persistence);
	else
		snprintf(b->where, sizeof(b->where), "%.200s, %s", f->pool,
			 fmt_size(mo.size, sz, sizeof(sz)));
	b->open = fer_open;
	b->close = fer_close;
	b->write = fer_write;
	b->pread = fer_pread;
	b->pwrite = fer_pwrite;
	b->fsync = fer_fsync;
	b->stat = fer_stat;
	b->rename = fer_rename;
	b->unlink = fer_unlink;
	b->mkdir = fer_mkdir;
	b->rmdir = fer_rmdir;
	b->prepare_random_write = NULL;
	b->fini = fer_fini;
	return 0;
}
