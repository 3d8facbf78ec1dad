/*
 * vfs.h -- what both engines (src/fs, the pm engine; src/tier, the tier
 * engine) share above the persistence layers and below the front ends:
 * what a call knows about its caller -- the credentials it acts with and,
 * after a walk that left the pool, the host path it led to -- and the
 * descriptor table with the open file descriptions it names.
 *
 * Layers (README, "Layers"): persist -> space -> meta -> vfs -> engines (fs,
 * tier) -> front ends (api, preload, fuse, tools). A layer includes only
 * the layers below it; scripts/check-layers.sh, run by the build, refuses
 * anything else.
 *
 * Invariants: V1 a thread's credentials are its own (thread-local): those
 * ferrite_set_creds() installed, else the process's, read at the thread's
 * first call; V2 the escaped path is the thread's too, and meaningful only
 * right after a call failed with -EXDEV; V3 an open file description lives
 * while a descriptor names it or a call holds it (refs counts both): a close
 * during another thread's call on the same descriptor leaves that call its
 * description; V4 a new descriptor is the lowest free number, as POSIX asks.
 * Crash argument: none; nothing here is persistent.
 */
#ifndef FERRITE_VFS_H
#define FERRITE_VFS_H

#include <pthread.h>
#include <stddef.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/uio.h>
#include <time.h>
#include <stdint.h>
#include <sys/types.h>

#include "ferrite.h"

#define VFS_PATH_MAX 4096

struct vfs_cred {
	uid_t uid;
	gid_t gid;
	int ngroups;
	gid_t groups[64];
};

/* The calling thread's credentials (V1). */
const struct vfs_cred *cred_get(void);
/* 1 if ferrite_set_creds() installed this thread's credentials. */
int cred_is_explicit(void);
/* Is g the caller's group or one of its supplementary groups? */
int cred_in_group(const struct vfs_cred *c, gid_t g);

/* A walk left the pool through an absolute symlink to host path p: records
 * p for ferrite_escaped_path() and returns -EXDEV with a message (both
 * engines' walkers share the front ends' contract). */
int vfs_set_escaped_path(const char *p);

/* ---- descriptors (fdtable.c) ---------------------------------------------- */
struct iovec;

/* An open file description, first member of each engine's own (struct
 * ofile, struct tier_ofile): what POSIX says descriptors made by dup share. */
struct vfs_file {
	int flags;		  /* open flags; O_APPEND/O_NONBLOCK change (setfl) */
	int refs;		  /* descriptors + calls in progress; atomic (V3) */
	pthread_mutex_t pos_lock; /* the position's, for calls that use it */
	int64_t pos;
};

/* Sets flags, one reference (the descriptor about to be installed), pos 0. */
void vfs_file_init(struct vfs_file *f, int flags);
/* Drops a reference; 1 if it was the last (the engine releases its part,
 * then calls vfs_file_fini). */
int vfs_file_unref(struct vfs_file *f);
void vfs_file_fini(struct vfs_file *f);

struct vfs_fdtable {
	pthread_mutex_t lock;
	struct vfs_file **fds;
	int cap, count;
	int free_hint; /* no free descriptor below it: installs stay O(1) with many
			* held (the FUSE daemon holds one per inode) */
};

void vfs_fdt_init(struct vfs_fdtable *t);
/* Frees the table; every descriptor must have been taken first. */
void vfs_fdt_fini(struct vfs_fdtable *t);
/* The lowest free descriptor now names f (V4), which passes one reference
 * to it; the descriptor, or -EMFILE / -ENOMEM (f unchanged). */
int vfs_fd_install(struct vfs_fdtable *t, struct vfs_file *f);
/* The description fd names, with a reference for the caller; NULL: none. */
struct vfs_file *vfs_fd_get(struct vfs_fdtable *t, int fd);
/* Frees descriptor fd; its reference passes to the caller (NULL: none). */
struct vfs_file *vfs_fd_take(struct vfs_fdtable *t, int fd);
/* The highest descriptor in use + 1 (for closing them all). */
int vfs_fd_limit(struct vfs_fdtable *t);

/* ---- calls both engines carry out alike (calls.c) --------------------------- */

/* An iovec as readv/writev take it: at most IOV_MAX entries (-EINVAL), a
 * total that fits ssize_t (-EINVAL), no NULL base under a length (-EFAULT).
 * *total: its bytes. */
int vfs_check_iov(const struct iovec *iov, int iovcnt, size_t *total);

/* An engine's positioned I/O for copy_file_range: neither uses nor moves the
 * description's position; a short count is fine. */
struct vfs_copy_io {
	void *ctx;
	ssize_t (*pread)(void *ctx, struct vfs_file *f, void *buf, size_t n, int64_t off);
	ssize_t (*pwrite)(void *ctx, struct vfs_file *f, const void *buf, size_t n, int64_t off);
};
/* copy_file_range(2) between two open files of an engine, whose types are
 * in_type and out_type (S_IFMT) and which are the same file if same_file:
 * Linux's checks in Linux's order, then the copy, the positions used (off_*
 * NULL) taken under their locks and moved by what was copied. Bytes copied,
 * or -errno when nothing was. */
ssize_t vfs_copy_file_range(const struct vfs_copy_io *io, struct vfs_file *in, mode_t in_type,
			    struct vfs_file *out, mode_t out_type, int same_file, off_t *off_in,
			    off_t *off_out, size_t len, unsigned flags);

/* ---- engines (ops) -------------------------------------------------------- */

/* An engine's calls on a mounted pool: the *at forms and one read/write
 * call for every form of ferrite.h (same names, same arguments otherwise);
 * the C API (src/api) turns the plain forms into them and checks the
 * arguments every engine would check alike. Each
 * engine fills one table (fs/ops.c, tier/ops.c); its handle (ferrite_fs)
 * begins with a struct vfs_handle naming it, and its directory streams
 * (ferrite_dir) with their ferrite_fs pointer. */
struct vfs_ops {
	/* read, write and their vector and positioned forms: off < 0 uses
	 * and moves the description's position */
	ssize_t (*rw)(ferrite_fs *fs, int fd, const struct iovec *iov, int iovcnt, int64_t off,
		      int write);
	int (*get_tier_info)(ferrite_fs *fs, struct ferrite_tier_info *info);
	int (*unmount)(ferrite_fs *fs);
	int (*close)(ferrite_fs *fs, int fd);
	int (*dup)(ferrite_fs *fs, int fd);
	off_t (*lseek)(ferrite_fs *fs, int fd, off_t offset, int whence);
	int (*ftruncate)(ferrite_fs *fs, int fd, off_t length);
	int (*truncate)(ferrite_fs *fs, const char *path, off_t length);
	int (*fallocate)(ferrite_fs *fs, int fd, int mode, off_t offset, off_t len);
	int (*fsync)(ferrite_fs *fs, int fd);
	int (*fstat)(ferrite_fs *fs, int fd, struct stat *st);
	int (*statvfs)(ferrite_fs *fs, struct statvfs *sv);
	int (*fchmod)(ferrite_fs *fs, int fd, mode_t mode);
	int (*fchown)(ferrite_fs *fs, int fd, uid_t uid, gid_t gid);
	int (*futimens)(ferrite_fs *fs, int fd, const struct timespec times[2]);
	int (*openat)(ferrite_fs *fs, int dirfd, const char *path, int flags, mode_t mode);
	int (*reopen)(ferrite_fs *fs, int fd, int flags);
	int (*fstatat)(ferrite_fs *fs, int dirfd, const char *path, struct stat *st, int flags);
	int (*faccessat)(ferrite_fs *fs, int dirfd, const char *path, int mode, int flags);
	int (*fchmodat)(ferrite_fs *fs, int dirfd, const char *path, mode_t mode, int flags);
	int (*fchownat)(ferrite_fs *fs, int dirfd, const char *path, uid_t uid, gid_t gid,
			int flags);
	int (*utimensat)(ferrite_fs *fs, int dirfd, const char *path,
			 const struct timespec times[2], int flags);
	int (*mkdirat)(ferrite_fs *fs, int dirfd, const char *path, mode_t mode);
	int (*unlinkat)(ferrite_fs *fs, int dirfd, const char *path, int flags);
	int (*renameat2)(ferrite_fs *fs, int olddirfd, const char *oldpath, int newdirfd,
			 const char *newpath, unsigned flags);
	int (*linkat)(ferrite_fs *fs, int olddirfd, const char *oldpath, int newdirfd,
		      const char *newpath, int flags);
	int (*symlinkat)(ferrite_fs *fs, const char *target, int newdirfd, const char *linkpath);
	ssize_t (*readlinkat)(ferrite_fs *fs, int dirfd, const char *path, char *buf, size_t size);
	int (*mknodat)(ferrite_fs *fs, int dirfd, const char *path, mode_t mode, dev_t rdev);
	int (*fdopendir)(ferrite_fs *fs, int fd, ferrite_dir **out);
	int (*getfl)(ferrite_fs *fs, int fd);
	int (*setfl)(ferrite_fs *fs, int fd, int flags);
	int (*set_link_prefix)(ferrite_fs *fs, const char *prefix);
	ssize_t (*copy_file_range)(ferrite_fs *fs, int fd_in, off_t *off_in, int fd_out,
				   off_t *off_out, size_t len, unsigned flags);
	int (*opendir)(ferrite_fs *fs, const char *path, ferrite_dir **out);
	int (*readdir)(ferrite_dir *dir, struct ferrite_dirent *ent);
	int64_t (*telldir)(ferrite_dir *dir);
	int (*seekdir)(ferrite_dir *dir, int64_t cookie);
	int (*rewinddir)(ferrite_dir *dir);
	int (*closedir)(ferrite_dir *dir);
	int (*get_info)(ferrite_fs *fs, struct ferrite_info *info);
	int (*inode_info)(ferrite_fs *fs, uint64_t ino, struct ferrite_inode_info *out);
	int (*inode_extents)(ferrite_fs *fs, uint64_t ino,
			     int (*cb)(void *arg, const struct ferrite_extent *ext), void *arg);
	ssize_t (*fgetxattr)(ferrite_fs *fs, int fd, const char *name, void *value, size_t size);
	int (*fsetxattr)(ferrite_fs *fs, int fd, const char *name, const void *value, size_t size,
			 int flags);
	ssize_t (*flistxattr)(ferrite_fs *fs, int fd, char *list, size_t size);
	int (*fremovexattr)(ferrite_fs *fs, int fd, const char *name);
	ssize_t (*getxattrat)(ferrite_fs *fs, int dirfd, const char *path, int flags,
			      const char *name, void *value, size_t size);
	int (*setxattrat)(ferrite_fs *fs, int dirfd, const char *path, int flags, const char *name,
			  const void *value, size_t size, int xattr_flags);
	ssize_t (*listxattrat)(ferrite_fs *fs, int dirfd, const char *path, int flags, char *list,
			       size_t size);
	int (*removexattrat)(ferrite_fs *fs, int dirfd, const char *path, int flags,
			     const char *name);
	int (*mmap)(ferrite_fs *fs, int fd, void *addr, size_t len, int prot, int flags,
		    off_t offset, void **out);
	ssize_t (*munmap)(ferrite_fs *fs, void *addr, size_t len);
	ssize_t (*msync)(ferrite_fs *fs, void *addr, size_t len, int flags);
	ssize_t (*mprotect)(ferrite_fs *fs, void *addr, size_t len, int prot);
	int (*mmap_pinned)(ferrite_fs *fs, int fd, off_t from, off_t len);
	int (*mmap_shrink)(ferrite_fs *fs, int fd, off_t newsize);
	int (*mmap_refresh)(ferrite_fs *fs, int fd);
};

struct vfs_handle {
	const struct vfs_ops *ops;
};

#endif
