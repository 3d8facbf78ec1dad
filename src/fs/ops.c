/*
 * ops.c -- the pm engine's table of calls (vfs.h struct vfs_ops): each one
 * bracketed for the partition space's quiet moments (pmfs_call_enter), and
 * one refused for want of space tried again once pre-allocated pages came
 * back (pmfs_reclaim): a pool is full only when it is. A call that fails
 * with -ENOSPC has changed nothing the caller could see twice.
 * Invariants and crash argument: the calls' own (fs.h).
 */
#include <errno.h>
#include <fcntl.h>

#include "fs/fs.h"

#define PM_CALL(fs, call)                                                                          \
	({                                                                                         \
		pmfs_call_enter(fs);                                                               \
		__typeof__(call) pm_call_rc_ = (call);                                             \
		while ((long long)pm_call_rc_ == -ENOSPC && pmfs_reclaim(fs))                      \
			pm_call_rc_ = (call);                                                      \
		pmfs_call_leave();                                                                 \
		pm_call_rc_;                                                                       \
	})

static inline ferrite_fs *dir_fs(ferrite_dir *dir)
{
	return dir ? *(ferrite_fs **)dir : NULL;
}

static int pm_get_tier_info(ferrite_fs *fs, struct ferrite_tier_info *info)
{
	(void)fs;
	(void)info;
	return -EINVAL; /* not a tiered pool */
}

static int pm_unmount(ferrite_fs *fs)
{
	return pmfs_unmount(fs);
}

static int pm_close(ferrite_fs *fs, int fd)
{
	return PM_CALL(fs, pmfs_close(fs, fd));
}

static int pm_dup(ferrite_fs *fs, int fd)
{
	return PM_CALL(fs, pmfs_dup(fs, fd));
}

static off_t pm_lseek(ferrite_fs *fs, int fd, off_t offset, int whence)
{
	return PM_CALL(fs, pmfs_lseek(fs, fd, offset, whence));
}

static int pm_ftruncate(ferrite_fs *fs, int fd, off_t length)
{
	return PM_CALL(fs, pmfs_ftruncate(fs, fd, length));
}

static int pm_truncate(ferrite_fs *fs, const char *path, off_t length)
{
	return PM_CALL(fs, pmfs_truncate(fs, path, length));
}

static int pm_fallocate(ferrite_fs *fs, int fd, int mode, off_t offset, off_t len)
{
	return PM_CALL(fs, pmfs_fallocate(fs, fd, mode, offset, len));
}

static int pm_fsync(ferrite_fs *fs, int fd)
{
	return PM_CALL(fs, pmfs_fsync(fs, fd));
}

static int pm_fstat(ferrite_fs *fs, int fd, struct stat *st)
{
	return PM_CALL(fs, pmfs_fstat(fs, fd, st));
}

static int pm_statvfs(ferrite_fs *fs, struct statvfs *sv)
{
	return PM_CALL(fs, pmfs_statvfs(fs, sv));
}

static int pm_fchmod(ferrite_fs *fs, int fd, mode_t mode)
{
	return PM_CALL(fs, pmfs_fchmod(fs, fd, mode));
}

static int pm_fchown(ferrite_fs *fs, int fd, uid_t uid, gid_t gid)
{
	return PM_CALL(fs, pmfs_fchown(fs, fd, uid, gid));
}

static int pm_futimens(ferrite_fs *fs, int fd, const struct timespec times[2])
{
	return PM_CALL(fs, pmfs_futimens(fs, fd, times));
}

static int pm_openat(ferrite_fs *fs, int dirfd, const char *path, int flags, mode_t mode)
{
	return PM_CALL(fs, pmfs_openat(fs, dirfd, path, flags, mode));
}

static int pm_reopen(ferrite_fs *fs, int fd, int flags)
{
	return PM_CALL(fs, pmfs_reopen(fs, fd, flags));
}

static int pm_fstatat(ferrite_fs *fs, int dirfd, const char *path, struct stat *st, int flags)
{
	return PM_CALL(fs, pmfs_fstatat(fs, dirfd, path, st, flags));
}

static int pm_faccessat(ferrite_fs *fs, int dirfd, const char *path, int mode, int flags)
{
	return PM_CALL(fs, pmfs_faccessat(fs, dirfd, path, mode, flags));
}

static int pm_fchmodat(ferrite_fs *fs, int dirfd, const char *path, mode_t mode, int flags)
{
	return PM_CALL(fs, pmfs_fchmodat(fs, dirfd, path, mode, flags));
}

static int pm_fchownat(ferrite_fs *fs, int dirfd, const char *path, uid_t uid, gid_t gid, int flags)
{
	return PM_CALL(fs, pmfs_fchownat(fs, dirfd, path, uid, gid, flags));
}

static int pm_utimensat(ferrite_fs *fs, int dirfd, const char *path, const struct timespec times[2],
			int flags)
{
	return PM_CALL(fs, pmfs_utimensat(fs, dirfd, path, times, flags));
}

static int pm_mkdirat(ferrite_fs *fs, int dirfd, const char *path, mode_t mode)
{
	return PM_CALL(fs, pmfs_mkdirat(fs, dirfd, path, mode));
}

static int pm_unlinkat(ferrite_fs *fs, int dirfd, const char *path, int flags)
{
	return PM_CALL(fs, pmfs_unlinkat(fs, dirfd, path, flags));
}

static int pm_renameat2(ferrite_fs *fs, int olddirfd, const char *oldpath, int newdirfd,
			const char *newpath, unsigned flags)
{
	return PM_CALL(fs, pmfs_renameat2(fs, olddirfd, oldpath, newdirfd, newpath, flags));
}

static int pm_linkat(ferrite_fs *fs, int olddirfd, const char *oldpath, int newdirfd,
		     const char *newpath, int flags)
{
	return PM_CALL(fs, pmfs_linkat(fs, olddirfd, oldpath, newdirfd, newpath, flags));
}

static int pm_symlinkat(ferrite_fs *fs, const char *target, int newdirfd, const char *linkpath)
{
	return PM_CALL(fs, pmfs_symlinkat(fs, target, newdirfd, linkpath));
}

static ssize_t pm_readlinkat(ferrite_fs *fs, int dirfd, const char *path, char *buf, size_t size)
{
	return PM_CALL(fs, pmfs_readlinkat(fs, dirfd, path, buf, size));
}

static int pm_mknodat(ferrite_fs *fs, int dirfd, const char *path, mode_t mode, dev_t rdev)
{
	return PM_CALL(fs, pmfs_mknodat(fs, dirfd, path, mode, rdev));
}

static int pm_fdopendir(ferrite_fs *fs, int fd, ferrite_dir **out)
{
	return PM_CALL(fs, pmfs_fdopendir(fs, fd, out));
}

static int pm_getfl(ferrite_fs *fs, int fd)
{
	return PM_CALL(fs, pmfs_getfl(fs, fd));
}

static int pm_setfl(ferrite_fs *fs, int fd, int flags)
{
	return PM_CALL(fs, pmfs_setfl(fs, fd, flags));
}

static int pm_set_link_prefix(ferrite_fs *fs, const char *prefix)
{
	return PM_CALL(fs, pmfs_set_link_prefix(fs, prefix));
}

static ssize_t pm_copy_file_range(ferrite_fs *fs, int fd_in, off_t *off_in, int fd_out,
				  off_t *off_out, size_t len, unsigned flags)
{
	return PM_CALL(fs, pmfs_copy_file_range(fs, fd_in, off_in, fd_out, off_out, len, flags));
}

static int pm_opendir(ferrite_fs *fs, const char *path, ferrite_dir **out)
{
	return PM_CALL(fs, pmfs_opendir(fs, path, out));
}

static int pm_readdir(ferrite_dir *dir, struct ferrite_dirent *ent)
{
	return PM_CALL(dir_fs(dir), pmfs_readdir(dir, ent));
}

static int64_t pm_telldir(ferrite_dir *dir)
{
	return PM_CALL(dir_fs(dir), pmfs_telldir(dir));
}

static int pm_seekdir(ferrite_dir *dir, int64_t cookie)
{
	return PM_CALL(dir_fs(dir), pmfs_seekdir(dir, cookie));
}

static int pm_rewinddir(ferrite_dir *dir)
{
	return PM_CALL(dir_fs(dir), pmfs_rewinddir(dir));
}

static int pm_closedir(ferrite_dir *dir)
{
	return PM_CALL(dir_fs(dir), pmfs_closedir(dir));
}

static int pm_get_info(ferrite_fs *fs, struct ferrite_info *info)
{
	return PM_CALL(fs, pmfs_get_info(fs, info));
}

static int pm_inode_info(ferrite_fs *fs, uint64_t ino, struct ferrite_inode_info *out)
{
	return PM_CALL(fs, pmfs_inode_info(fs, ino, out));
}

static int pm_inode_extents(ferrite_fs *fs, uint64_t ino,
			    int (*cb)(void *arg, const struct ferrite_extent *ext), void *arg)
{
	return PM_CALL(fs, pmfs_inode_extents(fs, ino, cb, arg));
}

static ssize_t pm_fgetxattr(ferrite_fs *fs, int fd, const char *name, void *value, size_t size)
{
	return PM_CALL(fs, pmfs_fgetxattr(fs, fd, name, value, size));
}

static int pm_fsetxattr(ferrite_fs *fs, int fd, const char *name, const void *value, size_t size,
			int flags)
{
	return PM_CALL(fs, pmfs_fsetxattr(fs, fd, name, value, size, flags));
}

static ssize_t pm_flistxattr(ferrite_fs *fs, int fd, char *list, size_t size)
{
	return PM_CALL(fs, pmfs_flistxattr(fs, fd, list, size));
}

static int pm_fremovexattr(ferrite_fs *fs, int fd, const char *name)
{
	return PM_CALL(fs, pmfs_fremovexattr(fs, fd, name));
}

static ssize_t pm_getxattrat(ferrite_fs *fs, int dirfd, const char *path, int flags,
			     const char *name, void *value, size_t size)
{
	return PM_CALL(fs, pmfs_getxattrat(fs, dirfd, path, flags, name, value, size));
}

static int pm_setxattrat(ferrite_fs *fs, int dirfd, const char *path, int flags, const char *name,
			 const void *value, size_t size, int xattr_flags)
{
	return PM_CALL(fs, pmfs_setxattrat(fs, dirfd, path, flags, name, value, size, xattr_flags));
}

static ssize_t pm_listxattrat(ferrite_fs *fs, int dirfd, const char *path, int flags, char *list,
			      size_t size)
{
	return PM_CALL(fs, pmfs_listxattrat(fs, dirfd, path, flags, list, size));
}

static int pm_removexattrat(ferrite_fs *fs, int dirfd, const char *path, int flags,
			    const char *name)
{
	return PM_CALL(fs, pmfs_removexattrat(fs, dirfd, path, flags, name));
}

static int pm_mmap(ferrite_fs *fs, int fd, void *addr, size_t len, int prot, int flags,
		   off_t offset, void **out)
{
	return PM_CALL(fs, pmfs_mmap(fs, fd, addr, len, prot, flags, offset, out));
}

static ssize_t pm_munmap(ferrite_fs *fs, void *addr, size_t len)
{
	return PM_CALL(fs, pmfs_munmap(fs, addr, len));
}

static ssize_t pm_msync(ferrite_fs *fs, void *addr, size_t len, int flags)
{
	return PM_CALL(fs, pmfs_msync(fs, addr, len, flags));
}

static ssize_t pm_mprotect(ferrite_fs *fs, void *addr, size_t len, int prot)
{
	return PM_CALL(fs, pmfs_mprotect(fs, addr, len, prot));
}

static int pm_mmap_pinned(ferrite_fs *fs, int fd, off_t from, off_t len)
{
	return PM_CALL(fs, pmfs_mmap_pinned(fs, fd, from, len));
}

static int pm_mmap_shrink(ferrite_fs *fs, int fd, off_t newsize)
{
	return PM_CALL(fs, pmfs_mmap_shrink(fs, fd, newsize));
}

static int pm_mmap_refresh(ferrite_fs *fs, int fd)
{
	return PM_CALL(fs, pmfs_mmap_refresh(fs, fd));
}

static ssize_t pm_rw(ferrite_fs *fs, int fd, const struct iovec *iov, int iovcnt, int64_t off,
		     int write)
{
	return PM_CALL(fs, pmfs_rw(fs, fd, iov, iovcnt, off, write));
}

const struct vfs_ops pmfs_ops = {
    .rw = pm_rw,
    .get_tier_info = pm_get_tier_info,
    .unmount = pm_unmount,
    .close = pm_close,
    .dup = pm_dup,
    .lseek = pm_lseek,
    .ftruncate = pm_ftruncate,
    .truncate = pm_truncate,
    .fallocate = pm_fallocate,
    .fsync = pm_fsync,
    .fstat = pm_fstat,
    .statvfs = pm_statvfs,
    .fchmod = pm_fchmod,
    .fchown = pm_fchown,
    .futimens = pm_futimens,
    .openat = pm_openat,
    .reopen = pm_reopen,
    .fstatat = pm_fstatat,
    .faccessat = pm_faccessat,
    .fchmodat = pm_fchmodat,
    .fchownat = pm_fchownat,
    .utimensat = pm_utimensat,
    .mkdirat = pm_mkdirat,
    .unlinkat = pm_unlinkat,
    .renameat2 = pm_renameat2,
    .linkat = pm_linkat,
    .symlinkat = pm_symlinkat,
    .readlinkat = pm_readlinkat,
    .mknodat = pm_mknodat,
    .fdopendir = pm_fdopendir,
    .getfl = pm_getfl,
    .setfl = pm_setfl,
    .set_link_prefix = pm_set_link_prefix,
    .copy_file_range = pm_copy_file_range,
    .opendir = pm_opendir,
    .readdir = pm_readdir,
    .telldir = pm_telldir,
    .seekdir = pm_seekdir,
    .rewinddir = pm_rewinddir,
    .closedir = pm_closedir,
    .get_info = pm_get_info,
    .inode_info = pm_inode_info,
    .inode_extents = pm_inode_extents,
    .fgetxattr = pm_fgetxattr,
    .fsetxattr = pm_fsetxattr,
    .flistxattr = pm_flistxattr,
    .fremovexattr = pm_fremovexattr,
    .getxattrat = pm_getxattrat,
    .setxattrat = pm_setxattrat,
    .listxattrat = pm_listxattrat,
    .removexattrat = pm_removexattrat,
    .mmap = pm_mmap,
    .munmap = pm_munmap,
    .msync = pm_msync,
    .mprotect = pm_mprotect,
    .mmap_pinned = pm_mmap_pinned,
    .mmap_shrink = pm_mmap_shrink,
    .mmap_refresh = pm_mmap_refresh,
};
