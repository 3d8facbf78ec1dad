/*
 * backend_posix.c -- the kernel peers: tmpfs (/dev/shm), ext4 (on a loop device over a
 * file in /dev/shm, prepared by run-bench.sh) and ext4-disk (a directory on the
 * machine's own disk, group d), driven through POSIX system calls.
 *
 * Why the comparison is fair: every path is resolved relative to a directory
 * descriptor of the backend's root (openat, fstatat, renameat, unlinkat, mkdirat),
 * so the kernel walks the same relative name ("meta/f0000042") that ferrite
 * resolves from its root -- no string concatenation on either side. The peers are
 * measured without fsync in groups a) and b): their writes are not durable when the
 * call returns, whereas every ferrite call is; any bias favours the peers. Group d)
 * issues the same fsync/fdatasync calls on every column. For ext4 the file is
 * written back and the page cache dropped before random overwrites, because on this
 * kernel a 4 KiB pwrite into a file cached in 1 MiB folios costs ~6x more than in a
 * cold file (machine-limits.md); the write-back itself is not timed.
 */
#ifndef _GNU_SOURCE /* the top-level CMakeLists.txt defines it */
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/fs.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include "bench.h"

#define TMPFS_MAGIC_NR 0x01021994
#define EXT4_MAGIC_NR  0xEF53

struct posix_ctx {
	int rootfd;
	int drop_caches; /* before random overwrites */
	int drop_failed; /* reported once in notes */
	int trim;	 /* FITRIM after files are removed (ext4 on a loop device) */
	char root[4096];
	struct bench_backend *b;
};

static int px_open(void *ctx, const char *path, int flags, mode_t mode)
{
	struct posix_ctx *p = ctx;
	int fd = openat(p->rootfd, path, flags | O_CLOEXEC, mode);

	return fd < 0 ? -errno : fd;
}

static int px_close(void *ctx, int fd)
{
	(void)ctx;
	return close(fd) < 0 ? -errno : 0;
}

static ssize_t px_write(void *ctx, int fd, const void *buf, size_t len)
{
	ssize_t r;

	(void)ctx;
	r = write(fd, buf, len);
	return r < 0 ? -errno : r;
}

static ssize_t px_pread(void *ctx, int fd, void *buf, size_t len, off_t off)
{
	ssize_t r;

	(void)ctx;
	r = pread(fd, buf, len, off);
	return r < 0 ? -errno : r;
}

static ssize_t px_pwrite(void *ctx, int fd, const void *buf, size_t len, off_t off)
{
	ssize_t r;

	(void)ctx;
	r = pwrite(fd, buf, len, off);
	return r < 0 ? -errno : r;
}

static int px_fsync(void *ctx, int fd)
{
	(void)ctx;
	return fsync(fd) < 0 ? -errno : 0;
}

static int px_fdatasync(void *ctx, int fd)
{
	(void)ctx;
	return fdatasync(fd) < 0 ? -errno : 0;
}

static int px_stat(void *ctx, const char *path, struct stat *st)
{
	struct posix_ctx *p = ctx;

	return fstatat(p->rootfd, path, st, 0) < 0 ? -errno : 0;
}

static int px_rename(void *ctx, const char *from, const char *to)
{
	struct posix_ctx *p = ctx;

	return renameat(p->rootfd, from, p->rootfd, to) < 0 ? -errno : 0;
}

static int px_unlink(void *ctx, const char *path)
{
	struct posix_ctx *p = ctx;

	return unlinkat(p->rootfd, path, 0) < 0 ? -errno : 0;
}

static int px_mkdir(void *ctx, const char *path, mode_t mode)
{
	struct posix_ctx *p = ctx;

	return mkdirat(p->rootfd, path, mode) < 0 ? -errno : 0;
}

static int px_rmdir(void *ctx, const char *path)
{
	struct posix_ctx *p = ctx;

	return unlinkat(p->rootfd, path, AT_REMOVEDIR) < 0 ? -errno : 0;
}

/* Write the file back (so the pages are clean), then drop the page cache so the
 * random overwrites start from 4 KiB folios. Untimed. */
static int px_prepare_random_write(void *ctx, int fd)
{
	struct posix_ctx *p = ctx;
	int rc;

	if (!p->drop_caches)
		return 0;
	if (fsync(fd) < 0 || syncfs(p->rootfd) < 0)
		return -errno;
	rc = drop_page_cache();
	if (rc < 0 && !p->drop_failed) {
		p->drop_failed = 1;
		snprintf(p->b->notes, sizeof(p->b->notes),
			 "page cache NOT dropped before RW (%s): ext4 RW is pessimistic",
			 strerror(-rc));
	}
	return 0;
}

static void px_reclaim(void *ctx)
{
	struct posix_ctx *p = ctx;
	struct fstrim_range range = {.start = 0, .len = UINT64_MAX, .minlen = 0};

	if (!p->trim)
		return;
	syncfs(p->rootfd);
	if (ioctl(p->rootfd, FITRIM, &range) < 0)
		p->trim = 0; /* not supported here: nothing to give back */
}

static void px_settle(void *ctx)
{
	struct posix_ctx *p = ctx;

	syncfs(p->rootfd); /* no-op on tmpfs */
}

static int px_quiesce(void *ctx)
{
	struct posix_ctx *p = ctx;

	return syncfs(p->rootfd) < 0 ? -errno : 0;
}

static int px_space(void *ctx, uint64_t *avail)
{
	struct posix_ctx *p = ctx;
	struct statfs sf;

	if (fstatfs(p->rootfd, &sf) < 0)
		return -errno;
	*avail = (uint64_t)sf.f_bavail * (uint64_t)sf.f_bsize;
	return 0;
}

static void px_fini(void *ctx)
{
	struct posix_ctx *p = ctx;

	close(p->rootfd);
	rm_tree(p->root);
	free(p);
}

/* DIR is created (and emptied) as the backend's root. It must be on FSTYPE ("ext4" or
 * "tmpfs"): a misplaced directory would make the column meaningless. */
int posix_backend_init(struct bench_backend *b, const char *name, const char *fstype,
		       const char *dir, unsigned flags, char *why, size_t whylen)
{
	struct posix_ctx *p;
	struct statfs sf;
	long want = strcmp(fstype, "ext4") == 0 ? EXT4_MAGIC_NR : TMPFS_MAGIC_NR;
	int rc;

	p = calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	p->b = b;
	p->drop_caches = !!(flags & PX_DROP_CACHES);
	snprintf(p->root, sizeof(p->root), "%s", dir);
	rm_tree(p->root);
	rc = mkdir_p(p->root);
	if (rc < 0) {
		snprintf(why, whylen, "cannot create %s: %s", dir, strerror(-rc));
		free(p);
		return rc;
	}
	if (statfs(p->root, &sf) < 0 || (long)sf.f_type != want) {
		snprintf(why, whylen, "%s is not on %s", dir, fstype);
		rm_tree(p->root);
		free(p);
		return -EINVAL;
	}
	p->rootfd = open(p->root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (p->rootfd < 0) {
		rc = -errno;
		snprintf(why, whylen, "cannot open %s: %s", dir, strerror(-rc));
		free(p);
		return rc;
	}
	memset(b, 0, sizeof(*b));
	b->name = name;
	b->caps = BK_CAP_NAMESPACE;
	b->ctx = p;
	snprintf(b->where, sizeof(b->where), "%s (POSIX system calls%s)", dir,
		 p->drop_caches ? "; caches dropped before RW" : "");
	b->open = px_open;
	b->close = px_close;
	b->write = px_write;
	b->pread = px_pread;
	b->pwrite = px_pwrite;
	b->fsync = px_fsync;
	b->fdatasync = px_fdatasync;
	b->stat = px_stat;
	b->rename = px_rename;
	b->unlink = px_unlink;
	b->mkdir = px_mkdir;
	b->rmdir = px_rmdir;
	b->prepare_random_write = px_prepare_random_write;
	b->reclaim = px_reclaim;
	b->settle = px_settle;
	b->quiesce = px_quiesce;
	b->space = px_space;
	p->trim = !!(flags & PX_TRIM);
	b->fini = px_fini;
	return 0;
}
