/*
 * tier_api.h -- the tier engine behind the C API: one function per call of
 * ferrite.h that src/api/api.c hands to a tiered pool (the path-only and
 * single-buffer calls go to their *at and vector forms).
 */
#ifndef FERRITE_TIER_API_H
#define FERRITE_TIER_API_H

#include <sys/types.h>
#include <sys/uio.h>

#include "ferrite.h"

int tier_mkfs(const char *pool, const struct ferrite_mkfs_opts *opts);
int tier_mount(const char *pool, const struct ferrite_mount_opts *opts, ferrite_fs **out);
int tier_fsck(const char *pool, int repair, void (*report)(void *arg, const char *line),
	      void *report_arg, void (*progress)(void *arg, uint64_t done, uint64_t total),
	      void *progress_arg);
int tier_get_tier_info(ferrite_fs *fs, struct ferrite_tier_info *info);
int tier_read_stats(const char *pool, struct ferrite_tier_info *info);
/* read/write and their vector and positioned forms: off < 0 uses and
 * advances the descriptor's position. */
ssize_t tier_rw(ferrite_fs *fs, int fd, const struct iovec *iov, int iovcnt, int64_t off,
		int write);
/* Memory mappings: the kernel's of the backing file, once the file's cached
 * chunks are drained (mmap.c). */
int tier_mmap(ferrite_fs *fs, int fd, void *addr, size_t len, int prot, int flags, off_t offset,
	      void **out);
ssize_t tier_munmap(ferrite_fs *fs, void *addr, size_t len);
ssize_t tier_msync(ferrite_fs *fs, void *addr, size_t len, int flags);
ssize_t tier_mprotect(ferrite_fs *fs, void *addr, size_t len, int prot);
int tier_unmount(ferrite_fs *fs);
/* The tier engine's table of calls (ops.c). */
struct vfs_ops;
extern const struct vfs_ops tier_ops;
int tier_close(ferrite_fs *fs, int fd);
int tier_dup(ferrite_fs *fs, int fd);
off_t tier_lseek(ferrite_fs *fs, int fd, off_t offset, int whence);
int tier_ftruncate(ferrite_fs *fs, int fd, off_t length);
int tier_truncate(ferrite_fs *fs, const char *path, off_t length);
int tier_fallocate(ferrite_fs *fs, int fd, int mode, off_t offset, off_t len);
int tier_fsync(ferrite_fs *fs, int fd);
int tier_fstat(ferrite_fs *fs, int fd, struct stat *st);
int tier_statvfs(ferrite_fs *fs, struct statvfs *sv);
int tier_fchmod(ferrite_fs *fs, int fd, mode_t mode);
int tier_fchown(ferrite_fs *fs, int fd, uid_t uid, gid_t gid);
int tier_futimens(ferrite_fs *fs, int fd, const struct timespec times[2]);
int tier_openat(ferrite_fs *fs, int dirfd, const char *path, int flags, mode_t mode);
int tier_reopen(ferrite_fs *fs, int fd, int flags);
int tier_fstatat(ferrite_fs *fs, int dirfd, const char *path, struct stat *st, int flags);
int tier_faccessat(ferrite_fs *fs, int dirfd, const char *path, int mode, int flags);
int tier_fchmodat(ferrite_fs *fs, int dirfd, const char *path, mode_t mode, int flags);
int tier_fchownat(ferrite_fs *fs, int dirfd, const char *path, uid_t uid, gid_t gid, int flags);
int tier_utimensat(ferrite_fs *fs, int dirfd, const char *path, const struct timespec times[2],
		   int flags);
int tier_mkdirat(ferrite_fs *fs, int dirfd, const char *path, mode_t mode);
int tier_unlinkat(ferrite_fs *fs, int dirfd, const char *path, int flags);
int tier_renameat2(ferrite_fs *fs, int olddirfd, const char *oldpath, int newdirfd,
		   const char *newpath, unsigned flags);
int tier_linkat(ferrite_fs *fs, int olddirfd, const char *oldpath, int newdirfd,
		const char *newpath, int flags);
int tier_symlinkat(ferrite_fs *fs, const char *target, int newdirfd, const char *linkpath);
ssize_t tier_readlinkat(ferrite_fs *fs, int dirfd, const char *path, char *buf, size_t size);
int tier_mknodat(ferrite_fs *fs, int dirfd, const char *path, mode_t mode, dev_t rdev);
int tier_fdopendir(ferrite_fs *fs, int fd, ferrite_dir **out);
int tier_getfl(ferrite_fs *fs, int fd);
int tier_setfl(ferrite_fs *fs, int fd, int flags);
int tier_set_link_prefix(ferrite_fs *fs, const char *prefix);
ssize_t tier_copy_file_range(ferrite_fs *fs, int fd_in, off_t *off_in, int fd_out, off_t *off_out,
			     size_t len, unsigned flags);
int tier_opendir(ferrite_fs *fs, const char *path, ferrite_dir **out);
int tier_readdir(ferrite_dir *dir, struct ferrite_dirent *ent);
int64_t tier_telldir(ferrite_dir *dir);
int tier_seekdir(ferrite_dir *dir, int64_t cookie);
int tier_rewinddir(ferrite_dir *dir);
int tier_closedir(ferrite_dir *dir);
int tier_get_info(ferrite_fs *fs, struct ferrite_info *info);
ssize_t tier_getxattrat(ferrite_fs *fs, int dirfd, const char *path, int flags, const char *name,
			void *value, size_t size);
int tier_setxattrat(ferrite_fs *fs, int dirfd, const char *path, int flags, const char *name,
		    const void *value, size_t size, int xattr_flags);
ssize_t tier_listxattrat(ferrite_fs *fs, int dirfd, const char *path, int flags, char *list,
			 size_t size);
int tier_removexattrat(ferrite_fs *fs, int dirfd, const char *path, int flags, const char *name);
#endif
