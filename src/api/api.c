/*
 * api.c -- the C API (ferrite.h): each call goes to the engine that mounted
 * the pool it names, the pm engine (src/fs) or the tier engine (src/tier).
 * Nothing else happens here; the engines check their arguments themselves.
 */
#include <errno.h>
#include <fcntl.h>

#include "ferrite.h"
#include "fs/pmfs.h"
#include "meta/meta.h"
#include "tier/tier.h"
#include "tier/tier_api.h"
#include "util/util.h"

/* A call into the pm engine, bracketed (fs/pmfs.h: pmfs_call_enter). One
 * refused for want of space is tried again once pre-allocated pages came
 * back (pmfs_reclaim): a pool is full only when it is. A call that fails
 * with -ENOSPC has changed nothing the caller could see twice. */
#define PM_CALL(fs, call)                                                                          \
	({                                                                                         \
		pmfs_call_enter(fs);                                                               \
		__typeof__(call) pm_call_rc_ = (call);                                             \
		while ((long long)pm_call_rc_ == -ENOSPC && pmfs_reclaim(fs))                      \
			pm_call_rc_ = (call);                                                      \
		pmfs_call_leave();                                                                 \
		pm_call_rc_;                                                                       \
	})

static inline int is_tier(ferrite_fs *fs)
{
	return fs && ((const struct fr_handle *)fs)->engine == FR_ENGINE_TIER;
}

static inline ferrite_fs *dir_fs(ferrite_dir *dir)
{
	return dir ? *(ferrite_fs **)dir : NULL;
}

static inline int dir_is_tier(ferrite_dir *dir)
{
	return is_tier(dir_fs(dir));
}

int ferrite_mkfs(const char *pool, const struct ferrite_mkfs_opts *opts)
{
	if (opts && opts->tier_backing)
		return tier_mkfs(pool, opts);
	return pmfs_mkfs(pool, opts);
}

int ferrite_mount(const char *pool, const struct ferrite_mount_opts *opts, ferrite_fs **out)
{
	if (meta_pool_is_tier(pool ? pool : ferrite_default_pool()))
		return tier_mount(pool ? pool : ferrite_default_pool(), opts, out);
	return pmfs_mount(pool, opts, out);
}

int ferrite_fsck(const char *pool, int repair, void (*report)(void *arg, const char *line),
		 void *report_arg, void (*progress)(void *arg, uint64_t done, uint64_t total),
		 void *progress_arg)
{
	if (meta_pool_is_tier(pool ? pool : ferrite_default_pool()))
		return tier_fsck(pool, repair, report, report_arg, progress, progress_arg);
	return pmfs_fsck(pool, repair, report, report_arg, progress, progress_arg);
}

int ferrite_get_tier_info(ferrite_fs *fs, struct ferrite_tier_info *info)
{
	if (!is_tier(fs))
		return -EINVAL;
	return tier_get_tier_info(fs, info);
}

int ferrite_tier_stats(const char *pool, struct ferrite_tier_info *info)
{
	return tier_read_stats(pool, info);
}

int ferrite_unmount(ferrite_fs *fs)
{
	if (is_tier(fs))
		return tier_unmount(fs);
	return pmfs_unmount(fs);
}

int ferrite_open(ferrite_fs *fs, const char *path, int flags, mode_t mode)
{
	if (is_tier(fs))
		return tier_openat(fs, FERRITE_AT_ROOT, path, flags, mode);
	return PM_CALL(fs, pmfs_open(fs, path, flags, mode));
}

int ferrite_close(ferrite_fs *fs, int fd)
{
	if (is_tier(fs))
		return tier_close(fs, fd);
	return PM_CALL(fs, pmfs_close(fs, fd));
}

int ferrite_dup(ferrite_fs *fs, int fd)
{
	if (is_tier(fs))
		return tier_dup(fs, fd);
	return PM_CALL(fs, pmfs_dup(fs, fd));
}

ssize_t ferrite_read(ferrite_fs *fs, int fd, void *buf, size_t count)
{
	if (is_tier(fs))
		return tier_rw(fs, fd, &(struct iovec){buf, count}, 1, -1, 0);
	return PM_CALL(fs, pmfs_read(fs, fd, buf, count));
}

ssize_t ferrite_write(ferrite_fs *fs, int fd, const void *buf, size_t count)
{
	if (is_tier(fs))
		return tier_rw(fs, fd, &(struct iovec){(void *)buf, count}, 1, -1, 1);
	return PM_CALL(fs, pmfs_write(fs, fd, buf, count));
}

ssize_t ferrite_pread(ferrite_fs *fs, int fd, void *buf, size_t count, off_t offset)
{
	if (is_tier(fs))
		return offset < 0 ? fr_err_finish(fr_err(-EINVAL, "negative offset"))
				  : tier_rw(fs, fd, &(struct iovec){buf, count}, 1, offset, 0);
	return PM_CALL(fs, pmfs_pread(fs, fd, buf, count, offset));
}

ssize_t ferrite_pwrite(ferrite_fs *fs, int fd, const void *buf, size_t count, off_t offset)
{
	if (is_tier(fs))
		return offset < 0
			   ? fr_err_finish(fr_err(-EINVAL, "negative offset"))
			   : tier_rw(fs, fd, &(struct iovec){(void *)buf, count}, 1, offset, 1);
	return PM_CALL(fs, pmfs_pwrite(fs, fd, buf, count, offset));
}

ssize_t ferrite_readv(ferrite_fs *fs, int fd, const struct iovec *iov, int iovcnt)
{
	if (is_tier(fs))
		return tier_rw(fs, fd, iov, iovcnt, -1, 0);
	return PM_CALL(fs, pmfs_readv(fs, fd, iov, iovcnt));
}

ssize_t ferrite_writev(ferrite_fs *fs, int fd, const struct iovec *iov, int iovcnt)
{
	if (is_tier(fs))
		return tier_rw(fs, fd, iov, iovcnt, -1, 1);
	return PM_CALL(fs, pmfs_writev(fs, fd, iov, iovcnt));
}

ssize_t ferrite_preadv(ferrite_fs *fs, int fd, const struct iovec *iov, int iovcnt, off_t offset)
{
	if (is_tier(fs))
		return offset < 0 ? fr_err_finish(fr_err(-EINVAL, "negative offset"))
				  : tier_rw(fs, fd, iov, iovcnt, offset, 0);
	return PM_CALL(fs, pmfs_preadv(fs, fd, iov, iovcnt, offset));
}

ssize_t ferrite_pwritev(ferrite_fs *fs, int fd, const struct iovec *iov, int iovcnt, off_t offset)
{
	if (is_tier(fs))
		return offset < 0 ? fr_err_finish(fr_err(-EINVAL, "negative offset"))
				  : tier_rw(fs, fd, iov, iovcnt, offset, 1);
	return PM_CALL(fs, pmfs_pwritev(fs, fd, iov, iovcnt, offset));
}

off_t ferrite_lseek(ferrite_fs *fs, int fd, off_t offset, int whence)
{
	if (is_tier(fs))
		return tier_lseek(fs, fd, offset, whence);
	return PM_CALL(fs, pmfs_lseek(fs, fd, offset, whence));
}

int ferrite_ftruncate(ferrite_fs *fs, int fd, off_t length)
{
	if (is_tier(fs))
		return tier_ftruncate(fs, fd, length);
	return PM_CALL(fs, pmfs_ftruncate(fs, fd, length));
}

int ferrite_truncate(ferrite_fs *fs, const char *path, off_t length)
{
	if (is_tier(fs))
		return tier_truncate(fs, path, length);
	return PM_CALL(fs, pmfs_truncate(fs, path, length));
}

int ferrite_fallocate(ferrite_fs *fs, int fd, int mode, off_t offset, off_t len)
{
	if (is_tier(fs))
		return tier_fallocate(fs, fd, mode, offset, len);
	return PM_CALL(fs, pmfs_fallocate(fs, fd, mode, offset, len));
}

int ferrite_fsync(ferrite_fs *fs, int fd)
{
	if (is_tier(fs))
		return tier_fsync(fs, fd);
	return PM_CALL(fs, pmfs_fsync(fs, fd));
}

int ferrite_fdatasync(ferrite_fs *fs, int fd)
{
	if (is_tier(fs))
		return tier_fsync(fs, fd);
	return PM_CALL(fs, pmfs_fdatasync(fs, fd));
}

int ferrite_stat(ferrite_fs *fs, const char *path, struct stat *st)
{
	if (is_tier(fs))
		return tier_fstatat(fs, FERRITE_AT_ROOT, path, st, 0);
	return PM_CALL(fs, pmfs_stat(fs, path, st));
}

int ferrite_lstat(ferrite_fs *fs, const char *path, struct stat *st)
{
	if (is_tier(fs))
		return tier_fstatat(fs, FERRITE_AT_ROOT, path, st, AT_SYMLINK_NOFOLLOW);
	return PM_CALL(fs, pmfs_lstat(fs, path, st));
}

int ferrite_fstat(ferrite_fs *fs, int fd, struct stat *st)
{
	if (is_tier(fs))
		return tier_fstat(fs, fd, st);
	return PM_CALL(fs, pmfs_fstat(fs, fd, st));
}

int ferrite_statvfs(ferrite_fs *fs, struct statvfs *sv)
{
	if (is_tier(fs))
		return tier_statvfs(fs, sv);
	return PM_CALL(fs, pmfs_statvfs(fs, sv));
}

int ferrite_chmod(ferrite_fs *fs, const char *path, mode_t mode)
{
	if (is_tier(fs))
		return tier_fchmodat(fs, FERRITE_AT_ROOT, path, mode, 0);
	return PM_CALL(fs, pmfs_chmod(fs, path, mode));
}

int ferrite_fchmod(ferrite_fs *fs, int fd, mode_t mode)
{
	if (is_tier(fs))
		return tier_fchmod(fs, fd, mode);
	return PM_CALL(fs, pmfs_fchmod(fs, fd, mode));
}

int ferrite_chown(ferrite_fs *fs, const char *path, uid_t uid, gid_t gid)
{
	if (is_tier(fs))
		return tier_fchownat(fs, FERRITE_AT_ROOT, path, uid, gid, 0);
	return PM_CALL(fs, pmfs_chown(fs, path, uid, gid));
}

int ferrite_lchown(ferrite_fs *fs, const char *path, uid_t uid, gid_t gid)
{
	if (is_tier(fs))
		return tier_fchownat(fs, FERRITE_AT_ROOT, path, uid, gid, AT_SYMLINK_NOFOLLOW);
	return PM_CALL(fs, pmfs_lchown(fs, path, uid, gid));
}

int ferrite_fchown(ferrite_fs *fs, int fd, uid_t uid, gid_t gid)
{
	if (is_tier(fs))
		return tier_fchown(fs, fd, uid, gid);
	return PM_CALL(fs, pmfs_fchown(fs, fd, uid, gid));
}

int ferrite_utimens(ferrite_fs *fs, const char *path, const struct timespec times[2], int flags)
{
	if (is_tier(fs))
		return tier_utimensat(fs, FERRITE_AT_ROOT, path, times, flags);
	return PM_CALL(fs, pmfs_utimens(fs, path, times, flags));
}

int ferrite_futimens(ferrite_fs *fs, int fd, const struct timespec times[2])
{
	if (is_tier(fs))
		return tier_futimens(fs, fd, times);
	return PM_CALL(fs, pmfs_futimens(fs, fd, times));
}

int ferrite_access(ferrite_fs *fs, const char *path, int mode)
{
	if (is_tier(fs))
		return tier_faccessat(fs, FERRITE_AT_ROOT, path, mode, 0);
	return PM_CALL(fs, pmfs_access(fs, path, mode));
}

int ferrite_mkdir(ferrite_fs *fs, const char *path, mode_t mode)
{
	if (is_tier(fs))
		return tier_mkdirat(fs, FERRITE_AT_ROOT, path, mode);
	return PM_CALL(fs, pmfs_mkdir(fs, path, mode));
}

int ferrite_rmdir(ferrite_fs *fs, const char *path)
{
	if (is_tier(fs))
		return tier_unlinkat(fs, FERRITE_AT_ROOT, path, AT_REMOVEDIR);
	return PM_CALL(fs, pmfs_rmdir(fs, path));
}

int ferrite_unlink(ferrite_fs *fs, const char *path)
{
	if (is_tier(fs))
		return tier_unlinkat(fs, FERRITE_AT_ROOT, path, 0);
	return PM_CALL(fs, pmfs_unlink(fs, path));
}

int ferrite_rename(ferrite_fs *fs, const char *oldpath, const char *newpath, unsigned flags)
{
	if (is_tier(fs))
		return tier_renameat2(fs, FERRITE_AT_ROOT, oldpath, FERRITE_AT_ROOT, newpath,
				      flags);
	return PM_CALL(fs, pmfs_rename(fs, oldpath, newpath, flags));
}

int ferrite_link(ferrite_fs *fs, const char *oldpath, const char *newpath)
{
	if (is_tier(fs))
		return tier_linkat(fs, FERRITE_AT_ROOT, oldpath, FERRITE_AT_ROOT, newpath, 0);
	return PM_CALL(fs, pmfs_link(fs, oldpath, newpath));
}

int ferrite_symlink(ferrite_fs *fs, const char *target, const char *linkpath)
{
	if (is_tier(fs))
		return tier_symlinkat(fs, target, FERRITE_AT_ROOT, linkpath);
	return PM_CALL(fs, pmfs_symlink(fs, target, linkpath));
}

ssize_t ferrite_readlink(ferrite_fs *fs, const char *path, char *buf, size_t size)
{
	if (is_tier(fs))
		return tier_readlinkat(fs, FERRITE_AT_ROOT, path, buf, size);
	return PM_CALL(fs, pmfs_readlink(fs, path, buf, size));
}

int ferrite_openat(ferrite_fs *fs, int dirfd, const char *path, int flags, mode_t mode)
{
	if (is_tier(fs))
		return tier_openat(fs, dirfd, path, flags, mode);
	return PM_CALL(fs, pmfs_openat(fs, dirfd, path, flags, mode));
}

int ferrite_reopen(ferrite_fs *fs, int fd, int flags)
{
	if (is_tier(fs))
		return tier_reopen(fs, fd, flags);
	return PM_CALL(fs, pmfs_reopen(fs, fd, flags));
}

int ferrite_fstatat(ferrite_fs *fs, int dirfd, const char *path, struct stat *st, int flags)
{
	if (is_tier(fs))
		return tier_fstatat(fs, dirfd, path, st, flags);
	return PM_CALL(fs, pmfs_fstatat(fs, dirfd, path, st, flags));
}

int ferrite_faccessat(ferrite_fs *fs, int dirfd, const char *path, int mode, int flags)
{
	if (is_tier(fs))
		return tier_faccessat(fs, dirfd, path, mode, flags);
	return PM_CALL(fs, pmfs_faccessat(fs, dirfd, path, mode, flags));
}

int ferrite_fchmodat(ferrite_fs *fs, int dirfd, const char *path, mode_t mode, int flags)
{
	if (is_tier(fs))
		return tier_fchmodat(fs, dirfd, path, mode, flags);
	return PM_CALL(fs, pmfs_fchmodat(fs, dirfd, path, mode, flags));
}

int ferrite_fchownat(ferrite_fs *fs, int dirfd, const char *path, uid_t uid, gid_t gid, int flags)
{
	if (is_tier(fs))
		return tier_fchownat(fs, dirfd, path, uid, gid, flags);
	return PM_CALL(fs, pmfs_fchownat(fs, dirfd, path, uid, gid, flags));
}

int ferrite_utimensat(ferrite_fs *fs, int dirfd, const char *path, const struct timespec times[2],
		      int flags)
{
	if (is_tier(fs))
		return tier_utimensat(fs, dirfd, path, times, flags);
	return PM_CALL(fs, pmfs_utimensat(fs, dirfd, path, times, flags));
}

int ferrite_mkdirat(ferrite_fs *fs, int dirfd, const char *path, mode_t mode)
{
	if (is_tier(fs))
		return tier_mkdirat(fs, dirfd, path, mode);
	return PM_CALL(fs, pmfs_mkdirat(fs, dirfd, path, mode));
}

int ferrite_unlinkat(ferrite_fs *fs, int dirfd, const char *path, int flags)
{
	if (is_tier(fs))
		return tier_unlinkat(fs, dirfd, path, flags);
	return PM_CALL(fs, pmfs_unlinkat(fs, dirfd, path, flags));
}

int ferrite_renameat2(ferrite_fs *fs, int olddirfd, const char *oldpath, int newdirfd,
		      const char *newpath, unsigned flags)
{
	if (is_tier(fs))
		return tier_renameat2(fs, olddirfd, oldpath, newdirfd, newpath, flags);
	return PM_CALL(fs, pmfs_renameat2(fs, olddirfd, oldpath, newdirfd, newpath, flags));
}

int ferrite_linkat(ferrite_fs *fs, int olddirfd, const char *oldpath, int newdirfd,
		   const char *newpath, int flags)
{
	if (is_tier(fs))
		return tier_linkat(fs, olddirfd, oldpath, newdirfd, newpath, flags);
	return PM_CALL(fs, pmfs_linkat(fs, olddirfd, oldpath, newdirfd, newpath, flags));
}

int ferrite_symlinkat(ferrite_fs *fs, const char *target, int newdirfd, const char *linkpath)
{
	if (is_tier(fs))
		return tier_symlinkat(fs, target, newdirfd, linkpath);
	return PM_CALL(fs, pmfs_symlinkat(fs, target, newdirfd, linkpath));
}

ssize_t ferrite_readlinkat(ferrite_fs *fs, int dirfd, const char *path, char *buf, size_t size)
{
	if (is_tier(fs))
		return tier_readlinkat(fs, dirfd, path, buf, size);
	return PM_CALL(fs, pmfs_readlinkat(fs, dirfd, path, buf, size));
}

int ferrite_mknodat(ferrite_fs *fs, int dirfd, const char *path, mode_t mode, dev_t rdev)
{
	if (is_tier(fs))
		return tier_mknodat(fs, dirfd, path, mode, rdev);
	return PM_CALL(fs, pmfs_mknodat(fs, dirfd, path, mode, rdev));
}

int ferrite_fdopendir(ferrite_fs *fs, int fd, ferrite_dir **out)
{
	if (is_tier(fs))
		return tier_fdopendir(fs, fd, out);
	return PM_CALL(fs, pmfs_fdopendir(fs, fd, out));
}

int ferrite_getfl(ferrite_fs *fs, int fd)
{
	if (is_tier(fs))
		return tier_getfl(fs, fd);
	return PM_CALL(fs, pmfs_getfl(fs, fd));
}

int ferrite_setfl(ferrite_fs *fs, int fd, int flags)
{
	if (is_tier(fs))
		return tier_setfl(fs, fd, flags);
	return PM_CALL(fs, pmfs_setfl(fs, fd, flags));
}

int ferrite_set_link_prefix(ferrite_fs *fs, const char *prefix)
{
	if (is_tier(fs))
		return tier_set_link_prefix(fs, prefix);
	return PM_CALL(fs, pmfs_set_link_prefix(fs, prefix));
}

ssize_t ferrite_copy_file_range(ferrite_fs *fs, int fd_in, off_t *off_in, int fd_out,
				off_t *off_out, size_t len, unsigned flags)
{
	if (is_tier(fs))
		return tier_copy_file_range(fs, fd_in, off_in, fd_out, off_out, len, flags);
	return PM_CALL(fs, pmfs_copy_file_range(fs, fd_in, off_in, fd_out, off_out, len, flags));
}

int ferrite_opendir(ferrite_fs *fs, const char *path, ferrite_dir **out)
{
	if (is_tier(fs))
		return tier_opendir(fs, path, out);
	return PM_CALL(fs, pmfs_opendir(fs, path, out));
}

int ferrite_readdir(ferrite_dir *dir, struct ferrite_dirent *ent)
{
	if (dir_is_tier(dir))
		return tier_readdir(dir, ent);
	return PM_CALL(dir_fs(dir), pmfs_readdir(dir, ent));
}

int64_t ferrite_telldir(ferrite_dir *dir)
{
	if (dir_is_tier(dir))
		return tier_telldir(dir);
	return PM_CALL(dir_fs(dir), pmfs_telldir(dir));
}

int ferrite_seekdir(ferrite_dir *dir, int64_t cookie)
{
	if (dir_is_tier(dir))
		return tier_seekdir(dir, cookie);
	return PM_CALL(dir_fs(dir), pmfs_seekdir(dir, cookie));
}

int ferrite_rewinddir(ferrite_dir *dir)
{
	if (dir_is_tier(dir))
		return tier_rewinddir(dir);
	return PM_CALL(dir_fs(dir), pmfs_rewinddir(dir));
}

int ferrite_closedir(ferrite_dir *dir)
{
	if (dir_is_tier(dir))
		return tier_closedir(dir);
	return PM_CALL(dir_fs(dir), pmfs_closedir(dir));
}

int ferrite_get_info(ferrite_fs *fs, struct ferrite_info *info)
{
	if (is_tier(fs))
		return tier_get_info(fs, info);
	return PM_CALL(fs, pmfs_get_info(fs, info));
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
	if (meta_pool_is_tier(pool))
		return fr_err_finish(tier_tune(pool, &t, opts->tier_backing, opts->force,
					       &opts->forced, &opts->other_dir));
	if (opts->tier_backing)
		return fr_err_finish(fr_err(-EINVAL,
					    "%s is not a tiered pool: it has no backing "
					    "directory",
					    pool));
	return fr_err_finish(meta_tune(pool, &t));
}

int ferrite_inode_info(ferrite_fs *fs, uint64_t ino, struct ferrite_inode_info *out)
{
	if (is_tier(fs))
		return fr_err_finish(
		    fr_err(-EOPNOTSUPP, "a tiered pool's inodes are its backing directory's"));
	return PM_CALL(fs, pmfs_inode_info(fs, ino, out));
}

int ferrite_inode_extents(ferrite_fs *fs, uint64_t ino,
			  int (*cb)(void *arg, const struct ferrite_extent *ext), void *arg)
{
	if (is_tier(fs))
		return fr_err_finish(
		    fr_err(-EOPNOTSUPP, "a tiered pool's data lies in its backing directory"));
	return PM_CALL(fs, pmfs_inode_extents(fs, ino, cb, arg));
}

ssize_t ferrite_fgetxattr(ferrite_fs *fs, int fd, const char *name, void *value, size_t size)
{
	if (is_tier(fs))
		return tier_getxattrat(fs, fd, "", AT_EMPTY_PATH, name, value, size);
	return PM_CALL(fs, pmfs_fgetxattr(fs, fd, name, value, size));
}

int ferrite_fsetxattr(ferrite_fs *fs, int fd, const char *name, const void *value, size_t size,
		      int flags)
{
	if (is_tier(fs))
		return tier_setxattrat(fs, fd, "", AT_EMPTY_PATH, name, value, size, flags);
	return PM_CALL(fs, pmfs_fsetxattr(fs, fd, name, value, size, flags));
}

ssize_t ferrite_flistxattr(ferrite_fs *fs, int fd, char *list, size_t size)
{
	if (is_tier(fs))
		return tier_listxattrat(fs, fd, "", AT_EMPTY_PATH, list, size);
	return PM_CALL(fs, pmfs_flistxattr(fs, fd, list, size));
}

int ferrite_fremovexattr(ferrite_fs *fs, int fd, const char *name)
{
	if (is_tier(fs))
		return tier_removexattrat(fs, fd, "", AT_EMPTY_PATH, name);
	return PM_CALL(fs, pmfs_fremovexattr(fs, fd, name));
}

ssize_t ferrite_getxattrat(ferrite_fs *fs, int dirfd, const char *path, int flags, const char *name,
			   void *value, size_t size)
{
	if (is_tier(fs))
		return tier_getxattrat(fs, dirfd, path, flags, name, value, size);
	return PM_CALL(fs, pmfs_getxattrat(fs, dirfd, path, flags, name, value, size));
}

int ferrite_setxattrat(ferrite_fs *fs, int dirfd, const char *path, int flags, const char *name,
		       const void *value, size_t size, int xattr_flags)
{
	if (is_tier(fs))
		return tier_setxattrat(fs, dirfd, path, flags, name, value, size, xattr_flags);
	return PM_CALL(fs, pmfs_setxattrat(fs, dirfd, path, flags, name, value, size, xattr_flags));
}

ssize_t ferrite_listxattrat(ferrite_fs *fs, int dirfd, const char *path, int flags, char *list,
			    size_t size)
{
	if (is_tier(fs))
		return tier_listxattrat(fs, dirfd, path, flags, list, size);
	return PM_CALL(fs, pmfs_listxattrat(fs, dirfd, path, flags, list, size));
}

int ferrite_removexattrat(ferrite_fs *fs, int dirfd, const char *path, int flags, const char *name)
{
	if (is_tier(fs))
		return tier_removexattrat(fs, dirfd, path, flags, name);
	return PM_CALL(fs, pmfs_removexattrat(fs, dirfd, path, flags, name));
}

int ferrite_mmap(ferrite_fs *fs, int fd, void *addr, size_t len, int prot, int flags, off_t offset,
		 void **out)
{
	if (is_tier(fs))
		return tier_mmap(fs, fd, addr, len, prot, flags, offset, out);
	return PM_CALL(fs, pmfs_mmap(fs, fd, addr, len, prot, flags, offset, out));
}

ssize_t ferrite_munmap(ferrite_fs *fs, void *addr, size_t len)
{
	return is_tier(fs) ? tier_munmap(fs, addr, len) : PM_CALL(fs, pmfs_munmap(fs, addr, len));
}

ssize_t ferrite_msync(ferrite_fs *fs, void *addr, size_t len, int flags)
{
	return is_tier(fs) ? tier_msync(fs, addr, len, flags)
			   : PM_CALL(fs, pmfs_msync(fs, addr, len, flags));
}

ssize_t ferrite_mprotect(ferrite_fs *fs, void *addr, size_t len, int prot)
{
	return is_tier(fs) ? tier_mprotect(fs, addr, len, prot)
			   : PM_CALL(fs, pmfs_mprotect(fs, addr, len, prot));
}

int ferrite_mmap_pinned(ferrite_fs *fs, int fd, off_t from, off_t len)
{
	return is_tier(fs) ? 0 : PM_CALL(fs, pmfs_mmap_pinned(fs, fd, from, len));
}

int ferrite_mmap_shrink(ferrite_fs *fs, int fd, off_t newsize)
{
	return is_tier(fs) ? 0 : PM_CALL(fs, pmfs_mmap_shrink(fs, fd, newsize));
}

int ferrite_mmap_refresh(ferrite_fs *fs, int fd)
{
	return is_tier(fs) ? 0 : PM_CALL(fs, pmfs_mmap_refresh(fs, fd));
}
