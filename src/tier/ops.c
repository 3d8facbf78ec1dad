/*
 * ops.c -- the tier engine's table of calls (vfs.h struct vfs_ops): the
 * plain forms of the C API as the tier's *at and vector calls. Invariants
 * and crash argument: the calls' own (ns.h, tier.h).
 */
#include "tier/ns.h"

static int t_get_tier_info(ferrite_fs *fs, struct ferrite_tier_info *info)
{
	return tier_get_tier_info(fs, info);
}

static int t_unmount(ferrite_fs *fs)
{
	return tier_unmount(fs);
}

static int t_close(ferrite_fs *fs, int fd)
{
	return tier_close(fs, fd);
}

static int t_dup(ferrite_fs *fs, int fd)
{
	return tier_dup(fs, fd);
}

static off_t t_lseek(ferrite_fs *fs, int fd, off_t offset, int whence)
{
	return tier_lseek(fs, fd, offset, whence);
}

static int t_ftruncate(ferrite_fs *fs, int fd, off_t length)
{
	return tier_ftruncate(fs, fd, length);
}

static int t_truncate(ferrite_fs *fs, const char *path, off_t length)
{
	return tier_truncate(fs, path, length);
}

static int t_fallocate(ferrite_fs *fs, int fd, int mode, off_t offset, off_t len)
{
	return tier_fallocate(fs, fd, mode, offset, len);
}

static int t_fsync(ferrite_fs *fs, int fd)
{
	return tier_fsync(fs, fd);
}

static int t_fstat(ferrite_fs *fs, int fd, struct stat *st)
{
	return tier_fstat(fs, fd, st);
}

static int t_statvfs(ferrite_fs *fs, struct statvfs *sv)
{
	return tier_statvfs(fs, sv);
}

static int t_fchmod(ferrite_fs *fs, int fd, mode_t mode)
{
	return tier_fchmod(fs, fd, mode);
}

static int t_fchown(ferrite_fs *fs, int fd, uid_t uid, gid_t gid)
{
	return tier_fchown(fs, fd, uid, gid);
}

static int t_futimens(ferrite_fs *fs, int fd, const struct timespec times[2])
{
	return tier_futimens(fs, fd, times);
}

static int t_openat(ferrite_fs *fs, int dirfd, const char *path, int flags, mode_t mode)
{
	return tier_openat(fs, dirfd, path, flags, mode);
}

static int t_reopen(ferrite_fs *fs, int fd, int flags)
{
	return tier_reopen(fs, fd, flags);
}

static int t_fstatat(ferrite_fs *fs, int dirfd, const char *path, struct stat *st, int flags)
{
	return tier_fstatat(fs, dirfd, path, st, flags);
}

static int t_faccessat(ferrite_fs *fs, int dirfd, const char *path, int mode, int flags)
{
	return tier_faccessat(fs, dirfd, path, mode, flags);
}

static int t_fchmodat(ferrite_fs *fs, int dirfd, const char *path, mode_t mode, int flags)
{
	return tier_fchmodat(fs, dirfd, path, mode, flags);
}

static int t_fchownat(ferrite_fs *fs, int dirfd, const char *path, uid_t uid, gid_t gid, int flags)
{
	return tier_fchownat(fs, dirfd, path, uid, gid, flags);
}

static int t_utimensat(ferrite_fs *fs, int dirfd, const char *path, const struct timespec times[2],
		       int flags)
{
	return tier_utimensat(fs, dirfd, path, times, flags);
}

static int t_mkdirat(ferrite_fs *fs, int dirfd, const char *path, mode_t mode)
{
	return tier_mkdirat(fs, dirfd, path, mode);
}

static int t_unlinkat(ferrite_fs *fs, int dirfd, const char *path, int flags)
{
	return tier_unlinkat(fs, dirfd, path, flags);
}

static int t_renameat2(ferrite_fs *fs, int olddirfd, const char *oldpath, int newdirfd,
		       const char *newpath, unsigned flags)
{
	return tier_renameat2(fs, olddirfd, oldpath, newdirfd, newpath, flags);
}

static int t_linkat(ferrite_fs *fs, int olddirfd, const char *oldpath, int newdirfd,
		    const char *newpath, int flags)
{
	return tier_linkat(fs, olddirfd, oldpath, newdirfd, newpath, flags);
}

static int t_symlinkat(ferrite_fs *fs, const char *target, int newdirfd, const char *linkpath)
{
	return tier_symlinkat(fs, target, newdirfd, linkpath);
}

static ssize_t t_readlinkat(ferrite_fs *fs, int dirfd, const char *path, char *buf, size_t size)
{
	return tier_readlinkat(fs, dirfd, path, buf, size);
}

static int t_mknodat(ferrite_fs *fs, int dirfd, const char *path, mode_t mode, dev_t rdev)
{
	return tier_mknodat(fs, dirfd, path, mode, rdev);
}

static int t_fdopendir(ferrite_fs *fs, int fd, ferrite_dir **out)
{
	return tier_fdopendir(fs, fd, out);
}

static int t_getfl(ferrite_fs *fs, int fd)
{
	return tier_getfl(fs, fd);
}

static int t_setfl(ferrite_fs *fs, int fd, int flags)
{
	return tier_setfl(fs, fd, flags);
}

static int t_set_link_prefix(ferrite_fs *fs, const char *prefix)
{
	return tier_set_link_prefix(fs, prefix);
}

static ssize_t t_copy_file_range(ferrite_fs *fs, int fd_in, off_t *off_in, int fd_out,
				 off_t *off_out, size_t len, unsigned flags)
{
	return tier_copy_file_range(fs, fd_in, off_in, fd_out, off_out, len, flags);
}

static int t_opendir(ferrite_fs *fs, const char *path, ferrite_dir **out)
{
	return tier_opendir(fs, path, out);
}

static int t_readdir(ferrite_dir *dir, struct ferrite_dirent *ent)
{
	return tier_readdir(dir, ent);
}

static int64_t t_telldir(ferrite_dir *dir)
{
	return tier_telldir(dir);
}

static int t_seekdir(ferrite_dir *dir, int64_t cookie)
{
	return tier_seekdir(dir, cookie);
}

static int t_rewinddir(ferrite_dir *dir)
{
	return tier_rewinddir(dir);
}

static int t_closedir(ferrite_dir *dir)
{
	return tier_closedir(dir);
}

static int t_get_info(ferrite_fs *fs, struct ferrite_info *info)
{
	return tier_get_info(fs, info);
}

static int t_inode_info(ferrite_fs *fs, uint64_t ino, struct ferrite_inode_info *out)
{
	return fr_err_finish(
	    fr_err(-EOPNOTSUPP, "a tiered pool's inodes are its backing directory's"));
}

static int t_inode_extents(ferrite_fs *fs, uint64_t ino,
			   int (*cb)(void *arg, const struct ferrite_extent *ext), void *arg)
{
	return fr_err_finish(
	    fr_err(-EOPNOTSUPP, "a tiered pool's data lies in its backing directory"));
}

static ssize_t t_fgetxattr(ferrite_fs *fs, int fd, const char *name, void *value, size_t size)
{
	return tier_getxattrat(fs, fd, "", AT_EMPTY_PATH, name, value, size);
}

static int t_fsetxattr(ferrite_fs *fs, int fd, const char *name, const void *value, size_t size,
		       int flags)
{
	return tier_setxattrat(fs, fd, "", AT_EMPTY_PATH, name, value, size, flags);
}

static ssize_t t_flistxattr(ferrite_fs *fs, int fd, char *list, size_t size)
{
	return tier_listxattrat(fs, fd, "", AT_EMPTY_PATH, list, size);
}

static int t_fremovexattr(ferrite_fs *fs, int fd, const char *name)
{
	return tier_removexattrat(fs, fd, "", AT_EMPTY_PATH, name);
}

static ssize_t t_getxattrat(ferrite_fs *fs, int dirfd, const char *path, int flags,
			    const char *name, void *value, size_t size)
{
	return tier_getxattrat(fs, dirfd, path, flags, name, value, size);
}

static int t_setxattrat(ferrite_fs *fs, int dirfd, const char *path, int flags, const char *name,
			const void *value, size_t size, int xattr_flags)
{
	return tier_setxattrat(fs, dirfd, path, flags, name, value, size, xattr_flags);
}

static ssize_t t_listxattrat(ferrite_fs *fs, int dirfd, const char *path, int flags, char *list,
			     size_t size)
{
	return tier_listxattrat(fs, dirfd, path, flags, list, size);
}

static int t_removexattrat(ferrite_fs *fs, int dirfd, const char *path, int flags, const char *name)
{
	return tier_removexattrat(fs, dirfd, path, flags, name);
}

static int t_mmap(ferrite_fs *fs, int fd, void *addr, size_t len, int prot, int flags, off_t offset,
		  void **out)
{
	return tier_mmap(fs, fd, addr, len, prot, flags, offset, out);
}

static ssize_t t_munmap(ferrite_fs *fs, void *addr, size_t len)
{
	return tier_munmap(fs, addr, len);
}

static ssize_t t_msync(ferrite_fs *fs, void *addr, size_t len, int flags)
{
	return tier_msync(fs, addr, len, flags);
}

static ssize_t t_mprotect(ferrite_fs *fs, void *addr, size_t len, int prot)
{
	return tier_mprotect(fs, addr, len, prot);
}

static int t_mmap_pinned(ferrite_fs *fs, int fd, off_t from, off_t len)
{
	return 0;
}

static int t_mmap_shrink(ferrite_fs *fs, int fd, off_t newsize)
{
	return 0;
}

static int t_mmap_refresh(ferrite_fs *fs, int fd)
{
	return 0;
}

const struct vfs_ops tier_ops = {
    .rw = tier_rw,
    .get_tier_info = t_get_tier_info,
    .unmount = t_unmount,
    .close = t_close,
    .dup = t_dup,
    .lseek = t_lseek,
    .ftruncate = t_ftruncate,
    .truncate = t_truncate,
    .fallocate = t_fallocate,
    .fsync = t_fsync,
    .fstat = t_fstat,
    .statvfs = t_statvfs,
    .fchmod = t_fchmod,
    .fchown = t_fchown,
    .futimens = t_futimens,
    .openat = t_openat,
    .reopen = t_reopen,
    .fstatat = t_fstatat,
    .faccessat = t_faccessat,
    .fchmodat = t_fchmodat,
    .fchownat = t_fchownat,
    .utimensat = t_utimensat,
    .mkdirat = t_mkdirat,
    .unlinkat = t_unlinkat,
    .renameat2 = t_renameat2,
    .linkat = t_linkat,
    .symlinkat = t_symlinkat,
    .readlinkat = t_readlinkat,
    .mknodat = t_mknodat,
    .fdopendir = t_fdopendir,
    .getfl = t_getfl,
    .setfl = t_setfl,
    .set_link_prefix = t_set_link_prefix,
    .copy_file_range = t_copy_file_range,
    .opendir = t_opendir,
    .readdir = t_readdir,
    .telldir = t_telldir,
    .seekdir = t_seekdir,
    .rewinddir = t_rewinddir,
    .closedir = t_closedir,
    .get_info = t_get_info,
    .inode_info = t_inode_info,
    .inode_extents = t_inode_extents,
    .fgetxattr = t_fgetxattr,
    .fsetxattr = t_fsetxattr,
    .flistxattr = t_flistxattr,
    .fremovexattr = t_fremovexattr,
    .getxattrat = t_getxattrat,
    .setxattrat = t_setxattrat,
    .listxattrat = t_listxattrat,
    .removexattrat = t_removexattrat,
    .mmap = t_mmap,
    .munmap = t_munmap,
    .msync = t_msync,
    .mprotect = t_mprotect,
    .mmap_pinned = t_mmap_pinned,
    .mmap_shrink = t_mmap_shrink,
    .mmap_refresh = t_mmap_refresh,
};
