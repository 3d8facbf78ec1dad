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

#include <fcntl.h>
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

/* ---- advisory locks (locks.c) ---------------------------------------------- */

struct lk_table;
/* A lock call that must wait: the word to sleep on and the value seen
 * (space.h lk_wait), and the process slot of the holder in the way. */
struct vfs_lockwait {
	uint32_t *seq;
	uint32_t seen;
	int32_t holder_slot;
};
/* What an engine knows for a lock call; it excludes every other user of
 * tab around the call (space/locks.c K3). */
struct vfs_lockctx {
	struct lk_table *tab;
	int32_t slot; /* this process's (0 for a pool held alone) */
	uint64_t ino;
	struct vfs_file *f;
	int64_t size; /* the file's, for SEEK_END */
};
/* fcntl F_GETLK, F_SETLK, F_SETLKW and their F_OFD_ forms: 0 or -errno;
 * -EAGAIN with *w set when the lock is held by another owner (F_SETLKW:
 * the caller sleeps on w and tries again, outside its exclusion). */
int vfs_lock_fcntl(struct vfs_lockctx *c, int cmd, struct flock *fl, struct vfs_lockwait *w);
int vfs_lock_flock(struct vfs_lockctx *c, int op, struct vfs_lockwait *w);
/* A descriptor of ino was closed: the process's record locks on it go
 * (POSIX); the last reference to f: its description's locks go. */
void vfs_lock_closed(struct lk_table *t, int32_t slot, uint64_t ino);
void vfs_lock_file_gone(struct lk_table *t, struct vfs_file *f);
/* The C API's wait loop for F_SETLKW and blocking flock. */
int vfs_lock_sleep(const struct vfs_lockwait *w);

/* ---- descriptors (fdtable.c) ---------------------------------------------- */
struct iovec;

/* An open file description, first member of each engine's own (struct
 * ofile, struct tier_ofile): what POSIX says descriptors made by dup share. */
struct share_desc;
struct vfs_file {
	int flags;		  /* open flags; O_APPEND/O_NONBLOCK change (setfl) */
	int refs;		  /* descriptors + calls in progress; atomic (V3) */
	pthread_mutex_t pos_lock; /* the position's, for calls that use it */
	int64_t pos;
	uint64_t lock_id; /* owner of its OFD and flock locks (locks.c), 0: none yet */
	/* held by other processes too (fork, exec): the position, the status
	 * flags and the lock owner are there, under the pool's turn */
	struct share_desc *sd;
};

/* Sets flags, one reference (the descriptor about to be installed), pos 0. */
void vfs_file_init(struct vfs_file *f, int flags);
/* The position and the flags (status flags from sd when shared); callers
 * hold pos_lock for the position. */
int64_t vfs_file_pos(const struct vfs_file *f);
void vfs_file_set_pos(struct vfs_file *f, int64_t pos);
int vfs_file_flags(const struct vfs_file *f);
void vfs_file_set_flags(struct vfs_file *f, int flags);
/* The owner of f's OFD and flock locks, made on first use (shared: one for
 * every process); next_id counts them. */
uint64_t vfs_file_lock_id(struct vfs_file *f, uint64_t *next_id);
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

/* An engine's calls on a mounted pool, listed once: the *at forms and one
 * read/write call for every form of ferrite.h (same names, same arguments
 * otherwise); the C API (src/api) turns the plain forms into them and checks
 * the arguments every engine would check alike. Each entry is
 * X(result, name, (parameters), (arguments)): the list declares the table
 * below and each engine's functions (fs/pmfs.h pmfs_NAME, tier/tier_api.h
 * tier_NAME) and fills each engine's table (fs/ops.c, tier/ops.c), so the
 * two cannot drift. `rw` is read, write and their vector and positioned
 * forms: off < 0 uses and moves the description's position. An engine's
 * handle (ferrite_fs) begins with a struct vfs_handle naming its table, and
 * its directory streams (ferrite_dir) with their ferrite_fs pointer. */
#define VFS_FS_CALLS(X)                                                                            \
	X(ssize_t, rw,                                                                             \
	  (ferrite_fs * fs, int fd, const struct iovec *iov, int iovcnt, int64_t off, int write),  \
	  (fs, fd, iov, iovcnt, off, write))                                                       \
	X(int, get_tier_info, (ferrite_fs * fs, struct ferrite_tier_info * info), (fs, info))      \
	X(int, close, (ferrite_fs * fs, int fd), (fs, fd))                                         \
	X(int, dup, (ferrite_fs * fs, int fd), (fs, fd))                                           \
	X(off_t, lseek, (ferrite_fs * fs, int fd, off_t offset, int whence),                       \
	  (fs, fd, offset, whence))                                                                \
	X(int, ftruncate, (ferrite_fs * fs, int fd, off_t length), (fs, fd, length))               \
	X(int, truncate, (ferrite_fs * fs, const char *path, off_t length), (fs, path, length))    \
	X(int, fallocate, (ferrite_fs * fs, int fd, int mode, off_t offset, off_t len),            \
	  (fs, fd, mode, offset, len))                                                             \
	X(int, fsync, (ferrite_fs * fs, int fd), (fs, fd))                                         \
	X(int, fstat, (ferrite_fs * fs, int fd, struct stat *st), (fs, fd, st))                    \
	X(int, statvfs, (ferrite_fs * fs, struct statvfs * sv), (fs, sv))                          \
	X(int, fchmod, (ferrite_fs * fs, int fd, mode_t mode), (fs, fd, mode))                     \
	X(int, fchown, (ferrite_fs * fs, int fd, uid_t uid, gid_t gid), (fs, fd, uid, gid))        \
	X(int, futimens, (ferrite_fs * fs, int fd, const struct timespec times[2]),                \
	  (fs, fd, times))                                                                         \
	X(int, openat, (ferrite_fs * fs, int dirfd, const char *path, int flags, mode_t mode),     \
	  (fs, dirfd, path, flags, mode))                                                          \
	X(int, reopen, (ferrite_fs * fs, int fd, int flags), (fs, fd, flags))                      \
	X(int, fstatat,                                                                            \
	  (ferrite_fs * fs, int dirfd, const char *path, struct stat *st, int flags),              \
	  (fs, dirfd, path, st, flags))                                                            \
	X(int, faccessat, (ferrite_fs * fs, int dirfd, const char *path, int mode, int flags),     \
	  (fs, dirfd, path, mode, flags))                                                          \
	X(int, fchmodat, (ferrite_fs * fs, int dirfd, const char *path, mode_t mode, int flags),   \
	  (fs, dirfd, path, mode, flags))                                                          \
	X(int, fchownat,                                                                           \
	  (ferrite_fs * fs, int dirfd, const char *path, uid_t uid, gid_t gid, int flags),         \
	  (fs, dirfd, path, uid, gid, flags))                                                      \
	X(int, utimensat,                                                                          \
	  (ferrite_fs * fs, int dirfd, const char *path, const struct timespec times[2],           \
	   int flags),                                                                             \
	  (fs, dirfd, path, times, flags))                                                         \
	X(int, mkdirat, (ferrite_fs * fs, int dirfd, const char *path, mode_t mode),               \
	  (fs, dirfd, path, mode))                                                                 \
	X(int, unlinkat, (ferrite_fs * fs, int dirfd, const char *path, int flags),                \
	  (fs, dirfd, path, flags))                                                                \
	X(int, renameat2,                                                                          \
	  (ferrite_fs * fs, int olddirfd, const char *oldpath, int newdirfd, const char *newpath,  \
	   unsigned flags),                                                                        \
	  (fs, olddirfd, oldpath, newdirfd, newpath, flags))                                       \
	X(int, linkat,                                                                             \
	  (ferrite_fs * fs, int olddirfd, const char *oldpath, int newdirfd, const char *newpath,  \
	   int flags),                                                                             \
	  (fs, olddirfd, oldpath, newdirfd, newpath, flags))                                       \
	X(int, symlinkat,                                                                          \
	  (ferrite_fs * fs, const char *target, int newdirfd, const char *linkpath),               \
	  (fs, target, newdirfd, linkpath))                                                        \
	X(ssize_t, readlinkat,                                                                     \
	  (ferrite_fs * fs, int dirfd, const char *path, char *buf, size_t size),                  \
	  (fs, dirfd, path, buf, size))                                                            \
	X(int, mknodat, (ferrite_fs * fs, int dirfd, const char *path, mode_t mode, dev_t rdev),   \
	  (fs, dirfd, path, mode, rdev))                                                           \
	X(int, fdopendir, (ferrite_fs * fs, int fd, ferrite_dir **out), (fs, fd, out))             \
	X(int, getfl, (ferrite_fs * fs, int fd), (fs, fd))                                         \
	X(int, fd_share, (ferrite_fs * fs, int fd, int op, uint32_t *token), (fs, fd, op, token))  \
	X(int, setfl, (ferrite_fs * fs, int fd, int flags), (fs, fd, flags))                       \
	X(int, set_link_prefix, (ferrite_fs * fs, const char *prefix), (fs, prefix))               \
	X(ssize_t, copy_file_range,                                                                \
	  (ferrite_fs * fs, int fd_in, off_t *off_in, int fd_out, off_t *off_out, size_t len,      \
	   unsigned flags),                                                                        \
	  (fs, fd_in, off_in, fd_out, off_out, len, flags))                                        \
	X(int, opendir, (ferrite_fs * fs, const char *path, ferrite_dir **out), (fs, path, out))   \
	X(int, get_info, (ferrite_fs * fs, struct ferrite_info * info), (fs, info))                \
	X(int, check, (ferrite_fs * fs, void (*report)(void *arg, const char *line), void *arg),   \
	  (fs, report, arg))                                                                       \
	X(int, inode_info, (ferrite_fs * fs, uint64_t ino, struct ferrite_inode_info * out),       \
	  (fs, ino, out))                                                                          \
	X(int, inode_extents,                                                                      \
	  (ferrite_fs * fs, uint64_t ino, int (*cb)(void *arg, const struct ferrite_extent *ext),  \
	   void *arg),                                                                             \
	  (fs, ino, cb, arg))                                                                      \
	X(ssize_t, fgetxattr,                                                                      \
	  (ferrite_fs * fs, int fd, const char *name, void *value, size_t size),                   \
	  (fs, fd, name, value, size))                                                             \
	X(int, fsetxattr,                                                                          \
	  (ferrite_fs * fs, int fd, const char *name, const void *value, size_t size, int flags),  \
	  (fs, fd, name, value, size, flags))                                                      \
	X(ssize_t, flistxattr, (ferrite_fs * fs, int fd, char *list, size_t size),                 \
	  (fs, fd, list, size))                                                                    \
	X(int, fremovexattr, (ferrite_fs * fs, int fd, const char *name), (fs, fd, name))          \
	X(ssize_t, getxattrat,                                                                     \
	  (ferrite_fs * fs, int dirfd, const char *path, int flags, const char *name, void *value, \
	   size_t size),                                                                           \
	  (fs, dirfd, path, flags, name, value, size))                                             \
	X(int, setxattrat,                                                                         \
	  (ferrite_fs * fs, int dirfd, const char *path, int flags, const char *name,              \
	   const void *value, size_t size, int xattr_flags),                                       \
	  (fs, dirfd, path, flags, name, value, size, xattr_flags))                                \
	X(ssize_t, listxattrat,                                                                    \
	  (ferrite_fs * fs, int dirfd, const char *path, int flags, char *list, size_t size),      \
	  (fs, dirfd, path, flags, list, size))                                                    \
	X(int, removexattrat,                                                                      \
	  (ferrite_fs * fs, int dirfd, const char *path, int flags, const char *name),             \
	  (fs, dirfd, path, flags, name))                                                          \
	X(int, mmap,                                                                               \
	  (ferrite_fs * fs, int fd, void *addr, size_t len, int prot, int flags, off_t offset,     \
	   void **out),                                                                            \
	  (fs, fd, addr, len, prot, flags, offset, out))                                           \
	X(ssize_t, munmap, (ferrite_fs * fs, void *addr, size_t len), (fs, addr, len))             \
	X(ssize_t, msync, (ferrite_fs * fs, void *addr, size_t len, int flags),                    \
	  (fs, addr, len, flags))                                                                  \
	X(ssize_t, mprotect, (ferrite_fs * fs, void *addr, size_t len, int prot),                  \
	  (fs, addr, len, prot))                                                                   \
	X(int, mmap_pinned, (ferrite_fs * fs, int fd, off_t from, off_t len), (fs, fd, from, len)) \
	X(int, mmap_shrink, (ferrite_fs * fs, int fd, off_t newsize), (fs, fd, newsize))           \
	X(int, mmap_refresh, (ferrite_fs * fs, int fd), (fs, fd))                                  \
	X(int, lock, (ferrite_fs * fs, int fd, int cmd, struct flock *fl, struct vfs_lockwait *w), \
	  (fs, fd, cmd, fl, w))                                                                    \
	X(int, flock, (ferrite_fs * fs, int fd, int op, struct vfs_lockwait *w), (fs, fd, op, w))

/* The calls on a directory stream: its ferrite_fs is *(ferrite_fs **)dir. */
#define VFS_DIR_CALLS(X)                                                                           \
	X(int, readdir, (ferrite_dir * dir, struct ferrite_dirent * ent), (dir, ent))              \
	X(int64_t, telldir, (ferrite_dir * dir), (dir))                                            \
	X(int, seekdir, (ferrite_dir * dir, int64_t cookie), (dir, cookie))                        \
	X(int, rewinddir, (ferrite_dir * dir), (dir))                                              \
	X(int, closedir, (ferrite_dir * dir), (dir))

#define VFS_OPS_MEMBER(ret, name, params, args) ret(*name) params;
struct vfs_ops {
	/* not a call like the others: the handle is gone when it returns */
	int (*unmount)(ferrite_fs *fs);
	VFS_FS_CALLS(VFS_OPS_MEMBER)
	VFS_DIR_CALLS(VFS_OPS_MEMBER)
};

/* An engine as the calls on a pool file (ferrite_mkfs, _mount, _fsck,
 * _tune) see it. The C API asks each engine in turn whether a pool is its
 * kind and hands the call to the first that says yes, or to the last, which
 * need not answer (NULL makes and owns): it takes every other file, and its
 * mount and fsck say what is wrong with one that is no pool at all. pool is
 * never NULL here (the C API puts the default pool in its place). */
struct meta_tune_args;
struct vfs_engine {
	const char *name;
	/* 1 if mkfs with these options (never NULL) makes this kind of pool */
	int (*makes)(const struct ferrite_mkfs_opts *opts);
	/* 1 if the pool file is this kind of pool */
	int (*owns)(const char *pool);
	int (*mkfs)(const char *pool, const struct ferrite_mkfs_opts *opts);
	int (*mount)(const char *pool, const struct ferrite_mount_opts *opts, ferrite_fs **out);
	int (*fsck)(const char *pool, int repair, void (*report)(void *arg, const char *line),
		    void *report_arg, void (*progress)(void *arg, uint64_t done, uint64_t total),
		    void *progress_arg);
	/* t: the superblock's part, checked; opts: the engine's own part
	 * (the backing directory) and the results it reports */
	int (*tune)(const char *pool, const struct meta_tune_args *t,
		    struct ferrite_tune_opts *opts);
};

struct vfs_handle {
	const struct vfs_ops *ops;
};

#endif
