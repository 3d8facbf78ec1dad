/*
 * api.c -- the C API (ferrite.h): each call on a mounted pool goes to the
 * table of calls of the engine that mounted it (vfs.h struct vfs_ops: the
 * pm engine's fs/ops.c, the tier engine's tier/ops.c). The calls on a pool
 * file (mkfs, mount, fsck, tune) go to the engine that says the pool is its
 * kind (struct vfs_engine), the pm engine last.
 * The plain forms become the *at forms and one read/write call here, with
 * the few argument checks every engine would make alike; the engines check
 * the rest themselves.
 */
#include <errno.h>
#include <fcntl.h>
#include <sys/file.h>

#include "ferrite.h"
#include "fs/pmfs.h"
#include "meta/meta.h"
#include "tier/tier_api.h"
#include "util/util.h"
#include "vfs/vfs.h"

/* The engine a pool's handle names (vfs.h); calls with no pool (NULL) get
 * the pm engine's answer for that case, as they always have. */
static inline const struct vfs_ops *OPS(ferrite_fs *fs)
{
	return fs ? ((const struct vfs_handle *)fs)->ops : &pmfs_ops;
}

/* The argument checks every engine would make alike. */
static int api_fail(int rc)
{
	fr_err_clear();
	return fr_err_finish(rc);
}

static ssize_t negative_offset(void)
{
	fr_err_clear();
	return fr_err_finish(fr_err(-EINVAL, "negative offset"));
}

/* A directory stream begins with its ferrite_fs pointer. */
static inline const struct vfs_ops *DIR_OPS(ferrite_dir *dir)
{
	return OPS(dir ? *(ferrite_fs **)dir : NULL);
}

/* The engines, asked in turn which of them a pool file is for; the last
 * (the pm engine) takes what no other claims. */
static const struct vfs_engine *const engines[] = {&tier_engine, &pmfs_engine};
#define N_ENGINES (sizeof engines / sizeof engines[0])

static const struct vfs_engine *engine_of(const char *pool, const struct ferrite_mkfs_opts *mkfs)
{
	for (size_t i = 0; i < N_ENGINES - 1; i++)
		if (mkfs ? engines[i]->makes(mkfs) : engines[i]->owns(pool))
			return engines[i];
	return engines[N_ENGINES - 1];
}

int ferrite_mkfs(const char *pool, const struct ferrite_mkfs_opts *opts)
{
	static const struct ferrite_mkfs_opts defaults;
	if (!pool)
		pool = ferrite_default_pool();
	return engine_of(pool, opts ? opts : &defaults)->mkfs(pool, opts);
}

int ferrite_mount(const char *pool, const struct ferrite_mount_opts *opts, ferrite_fs **out)
{
	if (!pool)
		pool = ferrite_default_pool();
	return engine_of(pool, NULL)->mount(pool, opts, out);
}

int ferrite_fsck(const char *pool, int repair, void (*report)(void *arg, const char *line),
		 void *report_arg, void (*progress)(void *arg, uint64_t done, uint64_t total),
		 void *progress_arg)
{
	if (!pool)
		pool = ferrite_default_pool();
	return engine_of(pool, NULL)
	    ->fsck(pool, repair, report, report_arg, progress, progress_arg);
}

int ferrite_check(ferrite_fs *fs, void (*report)(void *arg, const char *line), void *report_arg)
{
	return OPS(fs)->check(fs, report, report_arg);
}

int ferrite_get_tier_info(ferrite_fs *fs, struct ferrite_tier_info *info)
{
	return OPS(fs)->get_tier_info(fs, info);
}

int ferrite_tier_stats(const char *pool, struct ferrite_tier_info *info)
{
	return tier_read_stats(pool, info);
}

int ferrite_unmount(ferrite_fs *fs)
{
	return OPS(fs)->unmount(fs);
}

int ferrite_open(ferrite_fs *fs, const char *path, int flags, mode_t mode)
{
	return OPS(fs)->openat(fs, FERRITE_AT_ROOT, path, flags, mode);
}

int ferrite_close(ferrite_fs *fs, int fd)
{
	return OPS(fs)->close(fs, fd);
}

int ferrite_dup(ferrite_fs *fs, int fd)
{
	return OPS(fs)->dup(fs, fd);
}

ssize_t ferrite_read(ferrite_fs *fs, int fd, void *buf, size_t count)
{
	return OPS(fs)->rw(fs, fd, &(struct iovec){buf, count}, 1, -1, 0);
}

ssize_t ferrite_write(ferrite_fs *fs, int fd, const void *buf, size_t count)
{
	return OPS(fs)->rw(fs, fd, &(struct iovec){(void *)buf, count}, 1, -1, 1);
}

ssize_t ferrite_pread(ferrite_fs *fs, int fd, void *buf, size_t count, off_t offset)
{
	return offset < 0 ? negative_offset()
			  : OPS(fs)->rw(fs, fd, &(struct iovec){buf, count}, 1, offset, 0);
}

ssize_t ferrite_pwrite(ferrite_fs *fs, int fd, const void *buf, size_t count, off_t offset)
{
	return offset < 0 ? negative_offset()
			  : OPS(fs)->rw(fs, fd, &(struct iovec){(void *)buf, count}, 1, offset, 1);
}

ssize_t ferrite_readv(ferrite_fs *fs, int fd, const struct iovec *iov, int iovcnt)
{
	return OPS(fs)->rw(fs, fd, iov, iovcnt, -1, 0);
}

ssize_t ferrite_writev(ferrite_fs *fs, int fd, const struct iovec *iov, int iovcnt)
{
	return OPS(fs)->rw(fs, fd, iov, iovcnt, -1, 1);
}

ssize_t ferrite_preadv(ferrite_fs *fs, int fd, const struct iovec *iov, int iovcnt, off_t offset)
{
	return offset < 0 ? negative_offset() : OPS(fs)->rw(fs, fd, iov, iovcnt, offset, 0);
}

ssize_t ferrite_pwritev(ferrite_fs *fs, int fd, const struct iovec *iov, int iovcnt, off_t offset)
{
	return offset < 0 ? negative_offset() : OPS(fs)->rw(fs, fd, iov, iovcnt, offset, 1);
}

off_t ferrite_lseek(ferrite_fs *fs, int fd, off_t offset, int whence)
{
	return OPS(fs)->lseek(fs, fd, offset, whence);
}

int ferrite_ftruncate(ferrite_fs *fs, int fd, off_t length)
{
	return OPS(fs)->ftruncate(fs, fd, length);
}

int ferrite_truncate(ferrite_fs *fs, const char *path, off_t length)
{
	return OPS(fs)->truncate(fs, path, length);
}

int ferrite_fallocate(ferrite_fs *fs, int fd, int mode, off_t offset, off_t len)
{
	return OPS(fs)->fallocate(fs, fd, mode, offset, len);
}

int ferrite_fsync(ferrite_fs *fs, int fd)
{
	return OPS(fs)->fsync(fs, fd);
}

int ferrite_fdatasync(ferrite_fs *fs, int fd)
{
	return OPS(fs)->fsync(fs, fd); /* the data is the metadata's too */
}

int ferrite_stat(ferrite_fs *fs, const char *path, struct stat *st)
{
	return OPS(fs)->fstatat(fs, FERRITE_AT_ROOT, path, st, 0);
}

int ferrite_lstat(ferrite_fs *fs, const char *path, struct stat *st)
{
	return OPS(fs)->fstatat(fs, FERRITE_AT_ROOT, path, st, AT_SYMLINK_NOFOLLOW);
}

int ferrite_fstat(ferrite_fs *fs, int fd, struct stat *st)
{
	return OPS(fs)->fstat(fs, fd, st);
}

int ferrite_statvfs(ferrite_fs *fs, struct statvfs *sv)
{
	return OPS(fs)->statvfs(fs, sv);
}

int ferrite_chmod(ferrite_fs *fs, const char *path, mode_t mode)
{
	return OPS(fs)->fchmodat(fs, FERRITE_AT_ROOT, path, mode, 0);
}

int ferrite_fchmod(ferrite_fs *fs, int fd, mode_t mode)
{
	return OPS(fs)->fchmod(fs, fd, mode);
}

int ferrite_chown(ferrite_fs *fs, const char *path, uid_t uid, gid_t gid)
{
	return OPS(fs)->fchownat(fs, FERRITE_AT_ROOT, path, uid, gid, 0);
}

int ferrite_lchown(ferrite_fs *fs, const char *path, uid_t uid, gid_t gid)
{
	return OPS(fs)->fchownat(fs, FERRITE_AT_ROOT, path, uid, gid, AT_SYMLINK_NOFOLLOW);
}

int ferrite_fchown(ferrite_fs *fs, int fd, uid_t uid, gid_t gid)
{
	return OPS(fs)->fchown(fs, fd, uid, gid);
}

int ferrite_utimens(ferrite_fs *fs, const char *path, const struct timespec times[2], int flags)
{
	if (flags & ~AT_SYMLINK_NOFOLLOW)
		return api_fail(-EINVAL);
	if (!path)
		return api_fail(-EFAULT);
	return OPS(fs)->utimensat(fs, FERRITE_AT_ROOT, path, times, flags);
}

int ferrite_futimens(ferrite_fs *fs, int fd, const struct timespec times[2])
{
	return OPS(fs)->futimens(fs, fd, times);
}

int ferrite_access(ferrite_fs *fs, const char *path, int mode)
{
	return OPS(fs)->faccessat(fs, FERRITE_AT_ROOT, path, mode, 0);
}

int ferrite_mkdir(ferrite_fs *fs, const char *path, mode_t mode)
{
	return OPS(fs)->mkdirat(fs, FERRITE_AT_ROOT, path, mode);
}

int ferrite_rmdir(ferrite_fs *fs, const char *path)
{
	return OPS(fs)->unlinkat(fs, FERRITE_AT_ROOT, path, AT_REMOVEDIR);
}

int ferrite_unlink(ferrite_fs *fs, const char *path)
{
	return OPS(fs)->unlinkat(fs, FERRITE_AT_ROOT, path, 0);
}

int ferrite_rename(ferrite_fs *fs, const char *oldpath, const char *newpath, unsigned flags)
{
	return OPS(fs)->renameat2(fs, FERRITE_AT_ROOT, oldpath, FERRITE_AT_ROOT, newpath, flags);
}

int ferrite_link(ferrite_fs *fs, const char *oldpath, const char *newpath)
{
	return OPS(fs)->linkat(fs, FERRITE_AT_ROOT, oldpath, FERRITE_AT_ROOT, newpath, 0);
}

int ferrite_symlink(ferrite_fs *fs, const char *target, const char *linkpath)
{
	return OPS(fs)->symlinkat(fs, target, FERRITE_AT_ROOT, linkpath);
}

ssize_t ferrite_readlink(ferrite_fs *fs, const char *path, char *buf, size_t size)
{
	if (!path)
		return api_fail(-EFAULT);
	return OPS(fs)->readlinkat(fs, FERRITE_AT_ROOT, path, buf, size);
}

int ferrite_openat(ferrite_fs *fs, int dirfd, const char *path, int flags, mode_t mode)
{
	return OPS(fs)->openat(fs, dirfd, path, flags, mode);
}

int ferrite_reopen(ferrite_fs *fs, int fd, int flags)
{
	return OPS(fs)->reopen(fs, fd, flags);
}

int ferrite_fstatat(ferrite_fs *fs, int dirfd, const char *path, struct stat *st, int flags)
{
	return OPS(fs)->fstatat(fs, dirfd, path, st, flags);
}

int ferrite_faccessat(ferrite_fs *fs, int dirfd, const char *path, int mode, int flags)
{
	return OPS(fs)->faccessat(fs, dirfd, path, mode, flags);
}

int ferrite_fchmodat(ferrite_fs *fs, int dirfd, const char *path, mode_t mode, int flags)
{
	return OPS(fs)->fchmodat(fs, dirfd, path, mode, flags);
}

int ferrite_fchownat(ferrite_fs *fs, int dirfd, const char *path, uid_t uid, gid_t gid, int flags)
{
	return OPS(fs)->fchownat(fs, dirfd, path, uid, gid, flags);
}

int ferrite_utimensat(ferrite_fs *fs, int dirfd, const char *path, const struct timespec times[2],
		      int flags)
{
	return OPS(fs)->utimensat(fs, dirfd, path, times, flags);
}

int ferrite_mkdirat(ferrite_fs *fs, int dirfd, const char *path, mode_t mode)
{
	return OPS(fs)->mkdirat(fs, dirfd, path, mode);
}

int ferrite_unlinkat(ferrite_fs *fs, int dirfd, const char *path, int flags)
{
	return OPS(fs)->unlinkat(fs, dirfd, path, flags);
}

int ferrite_renameat2(ferrite_fs *fs, int olddirfd, const char *oldpath, int newdirfd,
		      const char *newpath, unsigned flags)
{
	return OPS(fs)->renameat2(fs, olddirfd, oldpath, newdirfd, newpath, flags);
}

int ferrite_linkat(ferrite_fs *fs, int olddirfd, const char *oldpath, int newdirfd,
		   const char *newpath, int flags)
{
	return OPS(fs)->linkat(fs, olddirfd, oldpath, newdirfd, newpath, flags);
}

int ferrite_symlinkat(ferrite_fs *fs, const char *target, int newdirfd, const char *linkpath)
{
	return OPS(fs)->symlinkat(fs, target, newdirfd, linkpath);
}

ssize_t ferrite_readlinkat(ferrite_fs *fs, int dirfd, const char *path, char *buf, size_t size)
{
	return OPS(fs)->readlinkat(fs, dirfd, path, buf, size);
}

int ferrite_mknodat(ferrite_fs *fs, int dirfd, const char *path, mode_t mode, dev_t rdev)
{
	return OPS(fs)->mknodat(fs, dirfd, path, mode, rdev);
}

int ferrite_fdopendir(ferrite_fs *fs, int fd, ferrite_dir **out)
{
	return OPS(fs)->fdopendir(fs, fd, out);
}

int ferrite_getfl(ferrite_fs *fs, int fd)
{
	return OPS(fs)->getfl(fs, fd);
}

int ferrite_fd_share(ferrite_fs *fs, int fd, int op, uint32_t *token)
{
	if (op < FERRITE_FD_EXPORT || op > FERRITE_FD_PRUNE || (op != FERRITE_FD_PRUNE && !token))
		return fr_err_finish(fr_err(-EINVAL, "unknown operation or no token"));
	return OPS(fs)->fd_share(fs, fd, op, token);
}

int ferrite_setfl(ferrite_fs *fs, int fd, int flags)
{
	return OPS(fs)->setfl(fs, fd, flags);
}

/* A lock held by another owner: sleep until a lock goes, then try again
 * (not inside the engine's call, so that the holder can run). */
int ferrite_fcntl_lock(ferrite_fs *fs, int fd, int cmd, struct flock *fl)
{
	int wait = cmd == F_SETLKW || cmd == F_OFD_SETLKW;
	int try_cmd = cmd == F_SETLKW ? F_SETLK : cmd == F_OFD_SETLKW ? F_OFD_SETLK : cmd;
	if (!fs)
		return api_fail(-EBADF);
	if (try_cmd != F_GETLK && try_cmd != F_SETLK && try_cmd != F_OFD_GETLK &&
	    try_cmd != F_OFD_SETLK)
		return api_fail(-EINVAL);
	for (;;) {
		struct vfs_lockwait w = {0};
		int rc = OPS(fs)->lock(fs, fd, try_cmd, fl, &w);
		if (rc != -EAGAIN || !wait)
			return rc;
		rc = vfs_lock_sleep(&w);
		if (rc)
			return api_fail(rc);
	}
}

int ferrite_flock(ferrite_fs *fs, int fd, int op)
{
	if (!fs)
		return api_fail(-EBADF);
	for (;;) {
		struct vfs_lockwait w = {0};
		int rc = OPS(fs)->flock(fs, fd, op | LOCK_NB, &w);
		if (rc != -EAGAIN || (op & LOCK_NB))
			return rc == -EAGAIN ? -EWOULDBLOCK : rc;
		rc = vfs_lock_sleep(&w);
		if (rc)
			return api_fail(rc);
	}
}

int ferrite_set_link_prefix(ferrite_fs *fs, const char *prefix)
{
	return OPS(fs)->set_link_prefix(fs, prefix);
}

ssize_t ferrite_copy_file_range(ferrite_fs *fs, int fd_in, off_t *off_in, int fd_out,
				off_t *off_out, size_t len, unsigned flags)
{
	return OPS(fs)->copy_file_range(fs, fd_in, off_in, fd_out, off_out, len, flags);
}

int ferrite_opendir(ferrite_fs *fs, const char *path, ferrite_dir **out)
{
	return OPS(fs)->opendir(fs, path, out);
}

int ferrite_readdir(ferrite_dir *dir, struct ferrite_dirent *ent)
{
	return DIR_OPS(dir)->readdir(dir, ent);
}

int64_t ferrite_telldir(ferrite_dir *dir)
{
	return DIR_OPS(dir)->telldir(dir);
}

int ferrite_seekdir(ferrite_dir *dir, int64_t cookie)
{
	return DIR_OPS(dir)->seekdir(dir, cookie);
}

int ferrite_rewinddir(ferrite_dir *dir)
{
	return DIR_OPS(dir)->rewinddir(dir);
}

int ferrite_closedir(ferrite_dir *dir)
{
	return DIR_OPS(dir)->closedir(dir);
}

int ferrite_get_info(ferrite_fs *fs, struct ferrite_info *info)
{
	return OPS(fs)->get_info(fs, info);
}

int ferrite_probe(const char *pool, struct ferrite_probe *out)
{
	fr_err_clear();
	if (!out)
		return fr_err_finish(-EINVAL);
	return fr_err_finish(meta_probe(pool ? pool : ferrite_default_pool(), out));
}

/* ferrite_tune: the label and the mode are the superblock's (meta), the
 * backing directory the tier header's. */
int ferrite_tune(const char *pool, struct ferrite_tune_opts *opts)
{
	fr_err_clear();
	if (!opts)
		return fr_err_finish(-EINVAL);
	if (!pool)
		pool = ferrite_default_pool();
	opts->forced = 0;
	opts->other_dir = 0;
	if (opts->mode < FERRITE_MOUNT_POOL_MODE || opts->mode > FERRITE_MOUNT_STRICT)
		return fr_err_finish(fr_err(-EINVAL, "unknown mode %d", opts->mode));
	if (opts->label) {
		int rc = meta_label_check(opts->label);
		if (rc)
			return fr_err_finish(rc);
	}
	struct meta_tune_args t = {
	    .label = opts->label,
	    .mode = opts->mode == FERRITE_MOUNT_STRICT ? FERRITE_MODE_STRICT
		    : opts->mode == FERRITE_MOUNT_SYNC ? FERRITE_MODE_SYNC
						       : -1,
	};
	return fr_err_finish(engine_of(pool, NULL)->tune(pool, &t, opts));
}

const char *ferrite_errmsg(void)
{
	return fr_err_get();
}

int ferrite_inode_info(ferrite_fs *fs, uint64_t ino, struct ferrite_inode_info *out)
{
	return OPS(fs)->inode_info(fs, ino, out);
}

int ferrite_inode_extents(ferrite_fs *fs, uint64_t ino,
			  int (*cb)(void *arg, const struct ferrite_extent *ext), void *arg)
{
	return OPS(fs)->inode_extents(fs, ino, cb, arg);
}

ssize_t ferrite_fgetxattr(ferrite_fs *fs, int fd, const char *name, void *value, size_t size)
{
	return OPS(fs)->fgetxattr(fs, fd, name, value, size);
}

int ferrite_fsetxattr(ferrite_fs *fs, int fd, const char *name, const void *value, size_t size,
		      int flags)
{
	return OPS(fs)->fsetxattr(fs, fd, name, value, size, flags);
}

ssize_t ferrite_flistxattr(ferrite_fs *fs, int fd, char *list, size_t size)
{
	return OPS(fs)->flistxattr(fs, fd, list, size);
}

int ferrite_fremovexattr(ferrite_fs *fs, int fd, const char *name)
{
	return OPS(fs)->fremovexattr(fs, fd, name);
}

ssize_t ferrite_getxattrat(ferrite_fs *fs, int dirfd, const char *path, int flags, const char *name,
			   void *value, size_t size)
{
	return OPS(fs)->getxattrat(fs, dirfd, path, flags, name, value, size);
}

int ferrite_setxattrat(ferrite_fs *fs, int dirfd, const char *path, int flags, const char *name,
		       const void *value, size_t size, int xattr_flags)
{
	return OPS(fs)->setxattrat(fs, dirfd, path, flags, name, value, size, xattr_flags);
}

ssize_t ferrite_listxattrat(ferrite_fs *fs, int dirfd, const char *path, int flags, char *list,
			    size_t size)
{
	return OPS(fs)->listxattrat(fs, dirfd, path, flags, list, size);
}

int ferrite_removexattrat(ferrite_fs *fs, int dirfd, const char *path, int flags, const char *name)
{
	return OPS(fs)->removexattrat(fs, dirfd, path, flags, name);
}

int ferrite_mmap(ferrite_fs *fs, int fd, void *addr, size_t len, int prot, int flags, off_t offset,
		 void **out)
{
	return OPS(fs)->mmap(fs, fd, addr, len, prot, flags, offset, out);
}

ssize_t ferrite_munmap(ferrite_fs *fs, void *addr, size_t len)
{
	return OPS(fs)->munmap(fs, addr, len);
}

ssize_t ferrite_msync(ferrite_fs *fs, void *addr, size_t len, int flags)
{
	return OPS(fs)->msync(fs, addr, len, flags);
}

ssize_t ferrite_mprotect(ferrite_fs *fs, void *addr, size_t len, int prot)
{
	return OPS(fs)->mprotect(fs, addr, len, prot);
}

int ferrite_mmap_pinned(ferrite_fs *fs, int fd, off_t from, off_t len)
{
	return OPS(fs)->mmap_pinned(fs, fd, from, len);
}

int ferrite_mmap_shrink(ferrite_fs *fs, int fd, off_t newsize)
{
	return OPS(fs)->mmap_shrink(fs, fd, newsize);
}

int ferrite_mmap_refresh(ferrite_fs *fs, int fd)
{
	return OPS(fs)->mmap_refresh(fs, fd);
}
