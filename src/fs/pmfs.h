/*
 * pmfs.h -- the pm engine behind the C API: one function per call of
 * ferrite.h, same arguments and results (src/api/api.c dispatches to these
 * or to the tier engine's).
 */
#ifndef FERRITE_PMFS_H
#define FERRITE_PMFS_H

#include "ferrite.h"

/* Every call on a mounted pool runs between these two (src/api/api.c): the
 * windows of the partition space are evicted only between calls
 * (space/vspace.c V3). Calls may nest. */
void pmfs_call_enter(ferrite_fs *fs);
void pmfs_call_leave(void);
/* After a call failed with -ENOSPC: gives back every window's reserved,
 * unwritten pages (SCMFS garbage collection), each round in a transaction of
 * its own; 1 if it gave any back (the call is worth trying again). */
int pmfs_reclaim(ferrite_fs *fs);
/* read, write and their forms (vfs.h rw). */
ssize_t pmfs_rw(ferrite_fs *fs, int fd, const struct iovec *iov, int iovcnt, int64_t off,
		int write);
/* The pm engine's table of calls (ops.c). */
struct vfs_ops;
extern const struct vfs_ops pmfs_ops;

int pmfs_mkfs(const char *pool, const struct ferrite_mkfs_opts *opts);
int pmfs_mount(const char *pool, const struct ferrite_mount_opts *opts, ferrite_fs **out);
int pmfs_unmount(ferrite_fs *fs);
int pmfs_close(ferrite_fs *fs, int fd);
int pmfs_dup(ferrite_fs *fs, int fd);
off_t pmfs_lseek(ferrite_fs *fs, int fd, off_t offset, int whence);
int pmfs_ftruncate(ferrite_fs *fs, int fd, off_t length);
int pmfs_truncate(ferrite_fs *fs, const char *path, off_t length);
int pmfs_fallocate(ferrite_fs *fs, int fd, int mode, off_t offset, off_t len);
int pmfs_fsync(ferrite_fs *fs, int fd);
int pmfs_fstat(ferrite_fs *fs, int fd, struct stat *st);
int pmfs_statvfs(ferrite_fs *fs, struct statvfs *sv);
int pmfs_fchmod(ferrite_fs *fs, int fd, mode_t mode);
int pmfs_fchown(ferrite_fs *fs, int fd, uid_t uid, gid_t gid);
int pmfs_futimens(ferrite_fs *fs, int fd, const struct timespec times[2]);
int pmfs_openat(ferrite_fs *fs, int dirfd, const char *path, int flags, mode_t mode);
int pmfs_reopen(ferrite_fs *fs, int fd, int flags);
int pmfs_fstatat(ferrite_fs *fs, int dirfd, const char *path, struct stat *st, int flags);
int pmfs_faccessat(ferrite_fs *fs, int dirfd, const char *path, int mode, int flags);
int pmfs_fchmodat(ferrite_fs *fs, int dirfd, const char *path, mode_t mode, int flags);
int pmfs_fchownat(ferrite_fs *fs, int dirfd, const char *path, uid_t uid, gid_t gid, int flags);
int pmfs_utimensat(ferrite_fs *fs, int dirfd, const char *path, const struct timespec times[2],
		   int flags);
int pmfs_mkdirat(ferrite_fs *fs, int dirfd, const char *path, mode_t mode);
int pmfs_unlinkat(ferrite_fs *fs, int dirfd, const char *path, int flags);
int pmfs_renameat2(ferrite_fs *fs, int olddirfd, const char *oldpath, int newdirfd,
		   const char *newpath, unsigned flags);
int pmfs_linkat(ferrite_fs *fs, int olddirfd, const char *oldpath, int newdirfd,
		const char *newpath, int flags);
int pmfs_symlinkat(ferrite_fs *fs, const char *target, int newdirfd, const char *linkpath);
ssize_t pmfs_readlinkat(ferrite_fs *fs, int dirfd, const char *path, char *buf, size_t size);
int pmfs_mknodat(ferrite_fs *fs, int dirfd, const char *path, mode_t mode, dev_t rdev);
int pmfs_fdopendir(ferrite_fs *fs, int fd, ferrite_dir **out);
int pmfs_getfl(ferrite_fs *fs, int fd);
int pmfs_setfl(ferrite_fs *fs, int fd, int flags);
int pmfs_set_link_prefix(ferrite_fs *fs, const char *prefix);
ssize_t pmfs_copy_file_range(ferrite_fs *fs, int fd_in, off_t *off_in, int fd_out, off_t *off_out,
			     size_t len, unsigned flags);
int pmfs_opendir(ferrite_fs *fs, const char *path, ferrite_dir **out);
int pmfs_readdir(ferrite_dir *dir, struct ferrite_dirent *ent);
int64_t pmfs_telldir(ferrite_dir *dir);
int pmfs_seekdir(ferrite_dir *dir, int64_t cookie);
int pmfs_rewinddir(ferrite_dir *dir);
int pmfs_closedir(ferrite_dir *dir);
int pmfs_get_info(ferrite_fs *fs, struct ferrite_info *info);
int pmfs_fsck(const char *pool, int repair, void (*report)(void *arg, const char *line),
	      void *report_arg, void (*progress)(void *arg, uint64_t done, uint64_t total),
	      void *progress_arg);
ssize_t pmfs_fgetxattr(ferrite_fs *fs, int fd, const char *name, void *value, size_t size);
int pmfs_fsetxattr(ferrite_fs *fs, int fd, const char *name, const void *value, size_t size,
		   int flags);
ssize_t pmfs_flistxattr(ferrite_fs *fs, int fd, char *list, size_t size);
int pmfs_fremovexattr(ferrite_fs *fs, int fd, const char *name);
ssize_t pmfs_getxattrat(ferrite_fs *fs, int dirfd, const char *path, int flags, const char *name,
			void *value, size_t size);
int pmfs_setxattrat(ferrite_fs *fs, int dirfd, const char *path, int flags, const char *name,
		    const void *value, size_t size, int xattr_flags);
ssize_t pmfs_listxattrat(ferrite_fs *fs, int dirfd, const char *path, int flags, char *list,
			 size_t size);
int pmfs_removexattrat(ferrite_fs *fs, int dirfd, const char *path, int flags, const char *name);
int pmfs_mmap(ferrite_fs *fs, int fd, void *addr, size_t len, int prot, int flags, off_t offset,
	      void **out);
ssize_t pmfs_munmap(ferrite_fs *fs, void *addr, size_t len);
ssize_t pmfs_msync(ferrite_fs *fs, void *addr, size_t len, int flags);
ssize_t pmfs_mprotect(ferrite_fs *fs, void *addr, size_t len, int prot);
int pmfs_mmap_pinned(ferrite_fs *fs, int fd, off_t from, off_t len);
int pmfs_mmap_shrink(ferrite_fs *fs, int fd, off_t newsize);
int pmfs_mmap_refresh(ferrite_fs *fs, int fd);

/* Inspection (inspect.c). */
int pmfs_inode_info(ferrite_fs *fs, uint64_t ino, struct ferrite_inode_info *out);
int pmfs_inode_extents(ferrite_fs *fs, uint64_t ino,
		       int (*cb)(void *arg, const struct ferrite_extent *ext), void *arg);

#endif
