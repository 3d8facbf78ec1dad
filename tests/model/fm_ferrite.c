/*
 * fm_ferrite.c -- the backend under test: thin wrappers over include/ferrite.h.
 *
 * Nothing is translated: the API already returns -errno, so what the
 * comparator sees is exactly what an application would see. The only extra is
 * a check of the header's contract that every failure leaves a readable
 * explanation in ferrite_errmsg() for the calling thread.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "fm.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ferrite.h"

struct fctx {
	ferrite_fs *fs;
	char pool[4096];
};

static __thread char last_err[256];

/* Keeps the message of the first failure since f_clearerr: the op's own call
 * comes first, the stat/offset queries that describe its result follow. */
static __thread int err_noted;

static int64_t note(int64_t r)
{
	if (r < 0 && !err_noted) {
		const char *m = ferrite_errmsg();
		snprintf(last_err, sizeof last_err, "%s", m ? m : "");
		err_noted = 1;
	}
	return r;
}

#define FS(c) (((struct fctx *)(c))->fs)

static int f_open(void *c, const char *p, int flags, mode_t mode)
{
	return (int)note(ferrite_open(FS(c), p, flags, mode));
}

static int f_close(void *c, int fd)
{
	return (int)note(ferrite_close(FS(c), fd));
}

static int f_dup(void *c, int fd)
{
	return (int)note(ferrite_dup(FS(c), fd));
}

static ssize_t f_read(void *c, int fd, void *b, size_t n)
{
	return note(ferrite_read(FS(c), fd, b, n));
}

static ssize_t f_write(void *c, int fd, const void *b, size_t n)
{
	return note(ferrite_write(FS(c), fd, b, n));
}

static ssize_t f_pread(void *c, int fd, void *b, size_t n, off_t o)
{
	return note(ferrite_pread(FS(c), fd, b, n, o));
}

static ssize_t f_pwrite(void *c, int fd, const void *b, size_t n, off_t o)
{
	return note(ferrite_pwrite(FS(c), fd, b, n, o));
}

static ssize_t f_readv(void *c, int fd, const struct iovec *iov, int cnt)
{
	return note(ferrite_readv(FS(c), fd, iov, cnt));
}

static ssize_t f_writev(void *c, int fd, const struct iovec *iov, int cnt)
{
	return note(ferrite_writev(FS(c), fd, iov, cnt));
}

static ssize_t f_preadv(void *c, int fd, const struct iovec *iov, int cnt, off_t o)
{
	return note(ferrite_preadv(FS(c), fd, iov, cnt, o));
}

static ssize_t f_pwritev(void *c, int fd, const struct iovec *iov, int cnt, off_t o)
{
	return note(ferrite_pwritev(FS(c), fd, iov, cnt, o));
}

static off_t f_lseek(void *c, int fd, off_t o, int whence)
{
	return note(ferrite_lseek(FS(c), fd, o, whence));
}

static int f_ftruncate(void *c, int fd, off_t len)
{
	return (int)note(ferrite_ftruncate(FS(c), fd, len));
}

static int f_truncate(void *c, const char *p, off_t len)
{
	return (int)note(ferrite_truncate(FS(c), p, len));
}

static int f_fallocate(void *c, int fd, int mode, off_t o, off_t len)
{
	return (int)note(ferrite_fallocate(FS(c), fd, mode, o, len));
}

static int f_fsync(void *c, int fd)
{
	return (int)note(ferrite_fsync(FS(c), fd));
}

static int f_fdatasync(void *c, int fd)
{
	return (int)note(ferrite_fdatasync(FS(c), fd));
}

static int f_stat(void *c, const char *p, struct stat *st)
{
	return (int)note(ferrite_stat(FS(c), p, st));
}

static int f_lstat(void *c, const char *p, struct stat *st)
{
	return (int)note(ferrite_lstat(FS(c), p, st));
}

static int f_fstat(void *c, int fd, struct stat *st)
{
	return (int)note(ferrite_fstat(FS(c), fd, st));
}

static int f_chmod(void *c, const char *p, mode_t m)
{
	return (int)note(ferrite_chmod(FS(c), p, m));
}

static int f_fchmod(void *c, int fd, mode_t m)
{
	return (int)note(ferrite_fchmod(FS(c), fd, m));
}

static int f_chown(void *c, const char *p, uid_t u, gid_t g)
{
	return (int)note(ferrite_chown(FS(c), p, u, g));
}

static int f_lchown(void *c, const char *p, uid_t u, gid_t g)
{
	return (int)note(ferrite_lchown(FS(c), p, u, g));
}

static int f_fchown(void *c, int fd, uid_t u, gid_t g)
{
	return (int)note(ferrite_fchown(FS(c), fd, u, g));
}

static int f_utimens(void *c, const char *p, const struct timespec *ts, int flags)
{
	return (int)note(ferrite_utimens(FS(c), p, ts, flags));
}

static int f_futimens(void *c, int fd, const struct timespec *ts)
{
	return (int)note(ferrite_futimens(FS(c), fd, ts));
}

static int f_setxattr(void *c, const char *p, const char *name, const void *v, size_t n, int flags)
{
	return (int)note(ferrite_setxattrat(FS(c), FERRITE_AT_ROOT, p, 0, name, v, n, flags));
}

static int f_removexattr(void *c, const char *p, const char *name)
{
	return (int)note(ferrite_removexattrat(FS(c), FERRITE_AT_ROOT, p, 0, name));
}

static ssize_t f_lgetxattr(void *c, const char *p, const char *name, void *v, size_t n)
{
	return note(ferrite_getxattrat(FS(c), FERRITE_AT_ROOT, p, AT_SYMLINK_NOFOLLOW, name, v, n));
}

static ssize_t f_llistxattr(void *c, const char *p, char *list, size_t n)
{
	return note(ferrite_listxattrat(FS(c), FERRITE_AT_ROOT, p, AT_SYMLINK_NOFOLLOW, list, n));
}

static int f_access(void *c, const char *p, int mode)
{
	return (int)note(ferrite_access(FS(c), p, mode));
}

static int f_mkdir(void *c, const char *p, mode_t m)
{
	return (int)note(ferrite_mkdir(FS(c), p, m));
}

static int f_rmdir(void *c, const char *p)
{
	return (int)note(ferrite_rmdir(FS(c), p));
}

static int f_unlink(void *c, const char *p)
{
	return (int)note(ferrite_unlink(FS(c), p));
}

static int f_rename(void *c, const char *a, const char *b, unsigned flags)
{
	return (int)note(ferrite_rename(FS(c), a, b, flags));
}

static int f_link(void *c, const char *a, const char *b)
{
	return (int)note(ferrite_link(FS(c), a, b));
}

static int f_symlink(void *c, const char *t, const char *p)
{
	return (int)note(ferrite_symlink(FS(c), t, p));
}

static ssize_t f_readlink(void *c, const char *p, char *buf, size_t n)
{
	return note(ferrite_readlink(FS(c), p, buf, n));
}

static int f_dopen(void *c, const char *p, void **h)
{
	ferrite_dir *d = NULL;
	int r = (int)note(ferrite_opendir(FS(c), p, &d));
	if (r >= 0)
		*h = d;
	return r;
}

static int f_dread(void *h, struct fm_dent *e)
{
	struct ferrite_dirent de;
	memset(&de, 0, sizeof de);
	int r = (int)note(ferrite_readdir(h, &de));
	if (r == 1) {
		memcpy(e->name, de.name, sizeof e->name);
		e->name[sizeof e->name - 1] = 0;
		e->type = de.type;
		e->ino = de.ino;
		e->off = de.off;
	}
	return r;
}

static int64_t f_dtell(void *h)
{
	return note(ferrite_telldir(h));
}

static int f_dseek(void *h, int64_t cookie)
{
	return (int)note(ferrite_seekdir(h, cookie));
}

static int f_drewind(void *h)
{
	return (int)note(ferrite_rewinddir(h));
}

static int f_dclose(void *h)
{
	return (int)note(ferrite_closedir(h));
}

static const char *f_lasterr(void *c)
{
	(void)c;
	return last_err;
}

static void f_clearerr(void *c)
{
	(void)c;
	last_err[0] = 0;
	err_noted = 0;
}

static struct ferrite_mount_opts mount_opts;
static int have_mount_opts;

void fm_ferrite_set_mount_opts(const struct ferrite_mount_opts *opts)
{
	have_mount_opts = opts != NULL;
	if (opts)
		mount_opts = *opts;
}

struct fm_backend *fm_ferrite_new(const char *pool)
{
	struct fctx *c = calloc(1, sizeof *c);
	snprintf(c->pool, sizeof c->pool, "%s", pool);
	int r = ferrite_mount(pool, have_mount_opts ? &mount_opts : NULL, &c->fs);
	if (r < 0) {
		fprintf(stderr, "ferrite_mount(%s) = %s: %s\n", pool, fm_errname(r),
			ferrite_errmsg());
		free(c);
		return NULL;
	}
	struct fm_backend *be = calloc(1, sizeof *be);
	be->name = "ferrite";
	be->ctx = c;
	be->is_ferrite = 1;
	be->open = f_open;
	be->close = f_close;
	be->dup = f_dup;
	be->read = f_read;
	be->write = f_write;
	be->pread = f_pread;
	be->pwrite = f_pwrite;
	be->readv = f_readv;
	be->writev = f_writev;
	be->preadv = f_preadv;
	be->pwritev = f_pwritev;
	be->lseek = f_lseek;
	be->ftruncate = f_ftruncate;
	be->truncate = f_truncate;
	be->fallocate = f_fallocate;
	be->fsync = f_fsync;
	be->fdatasync = f_fdatasync;
	be->stat = f_stat;
	be->lstat = f_lstat;
	be->fstat = f_fstat;
	be->chmod = f_chmod;
	be->setxattr = f_setxattr;
	be->removexattr = f_removexattr;
	be->lgetxattr = f_lgetxattr;
	be->llistxattr = f_llistxattr;
	be->fchmod = f_fchmod;
	be->chown = f_chown;
	be->lchown = f_lchown;
	be->fchown = f_fchown;
	be->utimens = f_utimens;
	be->futimens = f_futimens;
	be->access = f_access;
	be->mkdir = f_mkdir;
	be->rmdir = f_rmdir;
	be->unlink = f_unlink;
	be->rename = f_rename;
	be->link = f_link;
	be->symlink = f_symlink;
	be->readlink = f_readlink;
	be->dopen = f_dopen;
	be->dread = f_dread;
	be->dtell = f_dtell;
	be->dseek = f_dseek;
	be->drewind = f_drewind;
	be->dclose = f_dclose;
	be->dsnap = NULL;
	be->lasterr = f_lasterr;
	be->clearerr = f_clearerr;
	return be;
}

void *fm_ferrite_fs(struct fm_backend *be)
{
	return FS(be->ctx);
}

int fm_ferrite_remount(struct fm_backend *be, int run_fsck, char *why, size_t whylen)
{
	struct fctx *c = be->ctx;
	int r = ferrite_unmount(c->fs);
	c->fs = NULL;
	if (r < 0) {
		snprintf(why, whylen, "ferrite_unmount = %s: %s", fm_errname(r), ferrite_errmsg());
		return -1;
	}
	if (run_fsck) {
		r = fm_ferrite_fsck(c->pool, why, whylen);
		if (r != FERRITE_FSCK_CLEAN)
			return -1;
	}
	r = ferrite_mount(c->pool, have_mount_opts ? &mount_opts : NULL, &c->fs);
	if (r < 0) {
		snprintf(why, whylen, "ferrite_mount = %s: %s", fm_errname(r), ferrite_errmsg());
		return -1;
	}
	return 0;
}

int fm_ferrite_unmount(struct fm_backend *be)
{
	struct fctx *c = be->ctx;
	int r = c->fs ? ferrite_unmount(c->fs) : 0;
	if (r < 0)
		fprintf(stderr, "ferrite_unmount = %s: %s\n", fm_errname(r), ferrite_errmsg());
	free(c);
	free(be);
	return r;
}

const char *fm_tier_backing(const char *pool)
{
	static __thread char b[4200];
	snprintf(b, sizeof b, "%s.backing", pool);
	return b;
}

void fm_pool_remove(const char *pool)
{
	unlink(pool);
	fm_rm_rf(fm_tier_backing(pool));
}

void fm_tier_stats_line(const char *pool, char *out, size_t n)
{
	struct ferrite_tier_info ti;
	if (ferrite_tier_stats(pool, &ti) < 0) {
		out[0] = 0;
		return;
	}
	uint64_t acc = ti.read_hits + ti.read_misses + ti.write_hits + ti.write_misses;
	snprintf(out, n,
		 "cache of %llu chunks: %llu chunk accesses, hits %llu/%llu read %llu/%llu "
		 "written, collisions %llu, flushes %llu periodic %llu forced, wrap-arounds %llu, "
		 "epochs %llu",
		 (unsigned long long)ti.chunks, (unsigned long long)acc,
		 (unsigned long long)ti.read_hits,
		 (unsigned long long)(ti.read_hits + ti.read_misses),
		 (unsigned long long)ti.write_hits,
		 (unsigned long long)(ti.write_hits + ti.write_misses),
		 (unsigned long long)ti.collisions, (unsigned long long)ti.flushes_periodic,
		 (unsigned long long)ti.flushes_forced, (unsigned long long)ti.wraparounds,
		 (unsigned long long)ti.epochs);
}

int fm_ferrite_mkfs(const char *pool, uint64_t bytes, int mode, char *why, size_t whylen)
{
	struct ferrite_mkfs_opts o;
	memset(&o, 0, sizeof o);
	o.size = bytes;
	o.mode = mode >= FM_MODE_TIER ? FERRITE_MODE_SYNC : mode;
	o.force = 1;
	if (mode >= FM_MODE_TIER) {
		const char *b = fm_tier_backing(pool);
		fm_rm_rf(b);
		if (mkdir(b, 0755) != 0) {
			snprintf(why, whylen, "mkdir %s: %s", b, strerror(errno));
			return -errno;
		}
		o.tier_backing = b;
		o.tier_consistency =
		    mode == FM_MODE_TIER_EPOCH ? FERRITE_TIER_EPOCH : FERRITE_TIER_PER_WRITE;
		/* A short flush period, so drained and cached data mix. */
		o.tier_flush_ms = 2;
		o.tier_epoch_ms = 2;
	}
	int r = ferrite_mkfs(pool, &o);
	if (r < 0)
		snprintf(why, whylen, "ferrite_mkfs(%s, mode %s) = %s: %s", pool,
			 fm_mode_name(mode), fm_errname(r), ferrite_errmsg());
	return r;
}

int fm_ferrite_check_mode(struct fm_backend *be, int mode, char *why, size_t whylen)
{
	struct ferrite_info info;
	int r = ferrite_get_info(FS(be->ctx), &info);
	if (r < 0) {
		snprintf(why, whylen, "ferrite_get_info = %s: %s", fm_errname(r), ferrite_errmsg());
		return -1;
	}
	if (mode >= FM_MODE_TIER) {
		struct ferrite_tier_info ti;
		r = ferrite_get_tier_info(FS(be->ctx), &ti);
		int want = mode == FM_MODE_TIER_EPOCH ? FERRITE_TIER_EPOCH : FERRITE_TIER_PER_WRITE;
		if (r < 0 || ti.consistency != want) {
			snprintf(why, whylen, "the pool is not a tiered pool in %s consistency",
				 fm_mode_name(mode));
			return -1;
		}
		return 0;
	}
	if (info.mode != mode) {
		snprintf(why, whylen, "the pool was formatted in %s mode but mounts in %s mode",
			 fm_mode_name(mode), fm_mode_name(info.mode));
		return -1;
	}
	return 0;
}

int fm_mode_parse(const char *name)
{
	if (!strcmp(name, "sync"))
		return FERRITE_MODE_SYNC;
	if (!strcmp(name, "strict"))
		return FERRITE_MODE_STRICT;
	if (!strcmp(name, "tier"))
		return FM_MODE_TIER;
	if (!strcmp(name, "tier-epoch"))
		return FM_MODE_TIER_EPOCH;
	return -1;
}

const char *fm_mode_name(int mode)
{
	return mode == FERRITE_MODE_SYNC     ? "sync"
	       : mode == FERRITE_MODE_STRICT ? "strict"
	       : mode == FM_MODE_TIER	     ? "tier"
	       : mode == FM_MODE_TIER_EPOCH  ? "tier-epoch"
					     : "unknown";
}

struct fsck_buf {
	char *p;
	size_t n, used;
};

static void fsck_line(void *arg, const char *line)
{
	struct fsck_buf *b = arg;
	if (b->used + 2 >= b->n)
		return;
	int k = snprintf(b->p + b->used, b->n - b->used, "  fsck: %s\n", line);
	if (k > 0)
		b->used += (size_t)k;
	if (b->used >= b->n)
		b->used = b->n - 1;
}

int fm_ferrite_fsck(const char *pool, char *why, size_t whylen)
{
	struct fsck_buf b = {why, whylen, 0};
	if (whylen)
		why[0] = 0;
	int r = ferrite_fsck(pool, 0, fsck_line, &b, NULL, NULL);
	if (r != FERRITE_FSCK_CLEAN && b.used + 64 < whylen)
		snprintf(why + b.used, whylen - b.used,
			 "ferrite_fsck(%s, repair=0) = %d (want 0 = clean)", pool, r);
	return r;
}
