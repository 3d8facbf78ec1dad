/*
 * backend_ferrite.c -- the ferrite columns: every operation through the public API
 * (include/ferrite.h) on a pool this program formats with ferrite_mkfs(): a pm-engine
 * pool (ferrite, strict, and pm in group d), or a tiered pool whose backing directory
 * is on the machine's disk (tier, group d).
 *
 * Why the comparison is fair: the wrappers below have the same shape as the POSIX
 * ones (one indirect call, pass the -errno through), paths are the same relative
 * names the kernel peers resolve from their root descriptor, and the pool lives in
 * /dev/shm like the peers' data. Ferrite pays for durability on every call (sync
 * mode: data and metadata persistent on return); the peers do not. The tiered pool
 * is drained (unmounted and mounted again) before and after each timed run of group
 * d), so its background flusher never runs into another column's turn.
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
#include <sys/statvfs.h>
#include <unistd.h>

#include "age.h"
#include "bench.h"

struct fer_ctx {
	ferrite_fs *fs; /* NULL once a remount failed */
	int keep;
	char pool[4096];
	char backing[4096]; /* tiered pool: its backing directory, removed at the end */
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

static int fer_fdatasync(void *ctx, int fd)
{
	return ferrite_fdatasync(((struct fer_ctx *)ctx)->fs, fd);
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

static int fer_space(void *ctx, uint64_t *avail)
{
	struct statvfs sv;
	int rc = ferrite_statvfs(((struct fer_ctx *)ctx)->fs, &sv);

	if (rc < 0)
		return rc;
	*avail = (uint64_t)sv.f_bavail * (uint64_t)sv.f_frsize;
	return 0;
}

/* Tiered pool: unmounting drains every dirty chunk to the backing directory and syncs
 * it; the cached chunks stay valid (clean) for the next mount. */
static int fer_tier_quiesce(void *ctx)
{
	struct fer_ctx *f = ctx;
	int rc;

	if (!f->fs)
		return -EIO;
	rc = ferrite_unmount(f->fs);
	f->fs = NULL;
	if (rc < 0)
		progress("tier: ferrite_unmount(%s): %s", f->pool, ferrite_errmsg());
	rc = ferrite_mount(f->pool, NULL, &f->fs);
	if (rc < 0) {
		progress("tier: ferrite_mount(%s): %s", f->pool, ferrite_errmsg());
		f->fs = NULL;
	}
	return rc;
}

static void fer_fini(void *ctx)
{
	struct fer_ctx *f = ctx;

	if (f->fs)
		ferrite_unmount(f->fs);
	if (!f->keep) {
		unlink(f->pool);
		if (f->backing[0])
			rm_tree(f->backing);
	}
	free(f);
}

/* mkfs's progress every 25 %, under the column's name (ferrite, strict, tier). */
struct mkfs_progress {
	const char *name;
	int last;
};

static void fer_mkfs_progress(void *arg, uint64_t done, uint64_t total)
{
	struct mkfs_progress *p = arg;
	int pct = total ? (int)(done * 100 / total) : 100;

	if (pct / 25 != p->last / 25) {
		p->last = pct;
		progress("%s: mkfs %d%%", p->name, pct);
	}
}

/* Enough for the file of a), the files of b) (~4.5 KiB per 4 KiB file) or the largest
 * data set of d) with half again for file overheads and growth (they never coexist),
 * plus room for metadata. The engine allocates the whole pool at mkfs (in
 * /dev/shm/ferrite, a tmpfs shared with other pools), so no more than that. */
static uint64_t fer_pool_size(const struct bench_opts *o)
{
	const uint64_t gib = 1ull << 30;
	uint64_t a = o->file_size + (256ull << 20);
	uint64_t b = o->files * 8192;
	uint64_t d = (o->groups & G_TIER) ? tier_max_data(o) / 2 * 3 : 0;
	uint64_t need = (o->groups & (G_MICRO | G_META)) ? (a > b ? a : b) : 0;

	need = (need > d ? need : d) + (256ull << 20);
	need = (need + gib - 1) / gib * gib;
	return need < gib ? gib : need;
}

/* POOL with SUFFIX before its ".pool" (bench.pool -> bench-strict.pool). */
static void pool_variant(char *out, size_t len, const char *pool, const char *suffix)
{
	size_t n = strlen(pool);
	int dot = n > 5 && strcmp(pool + n - 5, ".pool") == 0;

	snprintf(out, len, "%.*s%s%s", (int)(dot ? n - 5 : n), pool, suffix, dot ? ".pool" : "");
}

/* Formats and mounts f->pool with MO and fills in the operations; frees f on failure. */
static int fer_setup(struct bench_backend *b, struct fer_ctx *f, struct ferrite_mkfs_opts *mo,
		     const char *name, char *why, size_t whylen)
{
	char dir[4096];
	char sz[32];
	struct mkfs_progress prog = {name, -1};
	int rc;

	snprintf(dir, sizeof(dir), "%s", f->pool);
	rc = mkdir_p(dirname(dir));
	if (rc < 0) {
		snprintf(why, whylen, "cannot create the directory of %s: %s", f->pool,
			 strerror(-rc));
		free(f);
		return rc;
	}
	mo->force = 1;
	mo->progress = fer_mkfs_progress;
	mo->progress_arg = &prog;
	progress("%s: mkfs %s (%s)", name, f->pool, fmt_size(mo->size, sz, sizeof(sz)));
	rc = ferrite_mkfs(f->pool, mo);
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
	b->name = name;
	b->ctx = f;
	b->open = fer_open;
	b->close = fer_close;
	b->write = fer_write;
	b->pread = fer_pread;
	b->pwrite = fer_pwrite;
	b->fsync = fer_fsync;
	b->fdatasync = fer_fdatasync;
	b->stat = fer_stat;
	b->rename = fer_rename;
	b->unlink = fer_unlink;
	b->mkdir = fer_mkdir;
	b->rmdir = fer_rmdir;
	b->prepare_random_write = NULL;
	b->space = fer_space;
	b->fini = fer_fini;
	return 0;
}

/* The aged column's pool: churn until age_times its size is written. The
 * churn keeps its files between a quarter and nine twentieths of the pool
 * (age_pool's bounds on half of it), so after half are deleted the
 * workloads still find the room they have on the fresh pool. */
static void age_progress(uint64_t written, uint64_t target)
{
	progress("aged: %llu of %llu MiB written", (unsigned long long)(written >> 20),
		 (unsigned long long)(target >> 20));
}

static int age_backend(struct bench_backend *b, const struct bench_opts *o, uint64_t size,
		       char *why, size_t whylen)
{
	struct fer_ctx *f = b->ctx;
	struct age_stats st;
	uint64_t r = o->seed ^ 0xa9e0;
	int rc = age_pool(f->fs, "/aged", (uint64_t)o->age_times * size, size / 2, &r, age_progress,
			  &st);
	if (rc < 0) {
		snprintf(why, whylen, "aging %s: %s", f->pool, ferrite_errmsg());
		return rc;
	}
	snprintf(b->notes, sizeof(b->notes),
		 "aged: %llu operations wrote %llu MiB (%u times the pool); %llu MiB kept in "
		 "/aged",
		 (unsigned long long)st.ops, (unsigned long long)(st.written >> 20), o->age_times,
		 (unsigned long long)(st.kept >> 20));
	return 0;
}

int ferrite_backend_init(struct bench_backend *b, const struct bench_opts *o, int kind, char *why,
			 size_t whylen)
{
	int strict = kind == BK_STRICT;
	struct ferrite_mkfs_opts mo = {0};
	struct ferrite_info info;
	struct fer_ctx *f;
	char sz[32];
	int rc;

	f = calloc(1, sizeof(*f));
	if (!f)
		return -ENOMEM;
	f->keep = o->keep;
	if (kind != BK_FERRITE)
		pool_variant(f->pool, sizeof(f->pool), o->pool, strict ? "-strict" : "-aged");
	else
		snprintf(f->pool, sizeof(f->pool), "%s", o->pool);
	mo.size = o->pool_size ? o->pool_size : fer_pool_size(o);
	mo.mode = strict ? FERRITE_MODE_STRICT : FERRITE_MODE_SYNC;
	rc = fer_setup(b, f, &mo,
		       strict		 ? "strict"
		       : kind == BK_AGED ? "aged"
					 : "ferrite",
		       why, whylen);
	if (rc < 0)
		return rc;
	if (kind == BK_AGED) {
		rc = age_backend(b, o, mo.size, why, whylen);
		if (rc < 0)
			return rc;
	}
	b->caps = strict ? 0 : BK_CAP_NAMESPACE; /* metadata is the same in both modes */
	if (ferrite_get_info(f->fs, &info) == 0)
		snprintf(b->where, sizeof(b->where),
			 "%.200s, %s, %.160s, huge pages: %s, persistence: %.64s", f->pool,
			 fmt_size(info.pool_bytes, sz, sizeof(sz)), info.backing,
			 info.huge_pages ? "yes" : "no", info.persistence);
	else
		snprintf(b->where, sizeof(b->where), "%.200s, %s", f->pool,
			 fmt_size(mo.size, sz, sizeof(sz)));
	return 0;
}

int ferrite_tier_backend_init(struct bench_backend *b, const struct bench_opts *o, char *why,
			      size_t whylen)
{
	struct ferrite_mkfs_opts mo = {0};
	struct ferrite_tier_info ti;
	struct fer_ctx *f;
	char sz[32], src[256], backing[4096];
	int rc;

	f = calloc(1, sizeof(*f));
	if (!f)
		return -ENOMEM;
	f->keep = o->keep;
	if (o->tier_pool)
		snprintf(f->pool, sizeof(f->pool), "%s", o->tier_pool);
	else
		pool_variant(f->pool, sizeof(f->pool), o->pool, "-tier");
	snprintf(f->backing, sizeof(f->backing), "%s/tier-backing", o->disk_dir);
	rm_tree(f->backing);
	rc = mkdir_p(f->backing);
	if (rc < 0) {
		snprintf(why, whylen, "cannot create %s: %s", f->backing, strerror(-rc));
		free(f);
		return rc;
	}
	mo.size = o->tier_pool_size;
	mo.tier_backing = f->backing;
	mo.tier_consistency = FERRITE_TIER_PER_WRITE;
	mo.tier_flush_ms = o->tier_flush_ms;
	mo.tier_writeback = o->tier_direct ? FERRITE_TIER_WB_DIRECT : FERRITE_TIER_WB_CACHED;
	snprintf(backing, sizeof(backing), "%s", f->backing); /* f goes on failure */
	rc = fer_setup(b, f, &mo, "tier", why, whylen);
	if (rc < 0) {
		rm_tree(backing);
		return rc;
	}
	b->caps = BK_CAP_NAMESPACE;
	b->quiesce = fer_tier_quiesce;
	if (ferrite_get_tier_info(f->fs, &ti) == 0)
		snprintf(b->where, sizeof(b->where),
			 "%.100s, %s: %llu chunks of %llu bytes, %llu file records, flush "
			 "every %u ms (%s), per-write consistency; backing %.100s on %.80s",
			 f->pool, fmt_size(mo.size, sz, sizeof(sz)), (unsigned long long)ti.chunks,
			 (unsigned long long)ti.chunk_size, (unsigned long long)ti.records,
			 ti.flush_ms,
			 ti.writeback == FERRITE_TIER_WB_DIRECT ? "O_DIRECT" : "cached", f->backing,
			 mount_source(f->backing, src, sizeof(src)));
	else
		snprintf(b->where, sizeof(b->where), "%.200s, %s, backing %.200s", f->pool,
			 fmt_size(mo.size, sz, sizeof(sz)), f->backing);
	return 0;
}

int ferrite_backend_tier_sample(struct bench_backend *b, struct tier_cache_sample *s)
{
	struct fer_ctx *f = b->ctx;
	struct ferrite_tier_info ti;
	int rc;

	if (!f->fs)
		return -EIO;
	rc = ferrite_get_tier_info(f->fs, &ti);
	if (rc < 0)
		return rc;
	memset(s, 0, sizeof(*s));
	s->read_hits = ti.read_hits;
	s->read_misses = ti.read_misses;
	s->write_hits = ti.write_hits;
	s->write_misses = ti.write_misses;
	s->collisions = ti.collisions;
	s->forced = ti.flushes_forced;
	s->periodic = ti.flushes_periodic;
	s->wraps = ti.wraparounds;
	s->valid_end = ti.valid_chunks;
	s->dirty_end = ti.dirty_chunks;
	s->chunks = ti.chunks;
	s->records_used = ti.records_used;
	s->records = ti.records;
	return 0;
}
