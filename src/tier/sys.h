/*
 * sys.h -- the tier engine's only way to its backing file system: every call
 * that looks up, reads, writes, syncs or changes something there goes
 * through this table of system calls, as SQLite's os_unix.c goes through its
 * aSyscall[]. The table starts as the C library's functions; a program (a
 * test, or an embedder running the cache over something of its own) may put
 * a function of its own in place of any entry before it mounts a tiered pool,
 * and so make the backing file system fail (EIO, ENOSPC, EROFS), interrupt
 * (EINTR) or come up short, without root or a real failing disk.
 *
 * Calls on the pool file itself (the cache) and on the process's own
 * descriptors (close, dup, fstat) are not the backing file system's and do
 * not go through it.
 *
 * Invariants: entries are never NULL; they are replaced only while no tiered
 * pool is mounted (a mounted pool's threads read them without a lock).
 */
#ifndef FERRITE_TIER_SYS_H
#define FERRITE_TIER_SYS_H

#include <dirent.h>
#include <errno.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <time.h>

/* X(return type, name, parameters, arguments) */
#define TIER_SYSCALLS(X)                                                                           \
	X(int, openat, (int dirfd, const char *path, int flags, mode_t mode),                      \
	  (dirfd, path, flags, mode))                                                              \
	X(long, openat2, (int dirfd, const char *path, struct open_how *how, size_t size),         \
	  (dirfd, path, how, size))                                                                \
	X(ssize_t, pread, (int fd, void *buf, size_t n, off_t off), (fd, buf, n, off))             \
	X(ssize_t, pwrite, (int fd, const void *buf, size_t n, off_t off), (fd, buf, n, off))      \
	X(ssize_t, preadv, (int fd, const struct iovec *iov, int n, off_t off), (fd, iov, n, off)) \
	X(ssize_t, pwritev, (int fd, const struct iovec *iov, int n, off_t off),                   \
	  (fd, iov, n, off))                                                                       \
	X(int, fsync, (int fd), (fd))                                                              \
	X(int, fdatasync, (int fd), (fd))                                                          \
	X(int, syncfs, (int fd), (fd))                                                             \
	X(int, ftruncate, (int fd, off_t len), (fd, len))                                          \
	X(int, fallocate, (int fd, int mode, off_t off, off_t len), (fd, mode, off, len))          \
	X(int, fstatat, (int dirfd, const char *path, struct stat *st, int flags),                 \
	  (dirfd, path, st, flags))                                                                \
	X(int, statx, (int dirfd, const char *path, int flags, unsigned mask, struct statx *sx),   \
	  (dirfd, path, flags, mask, sx))                                                          \
	X(int, stat, (const char *path, struct stat *st), (path, st))                              \
	X(int, statvfs, (const char *path, struct statvfs *sv), (path, sv))                        \
	X(int, fstatvfs, (int fd, struct statvfs *sv), (fd, sv))                                   \
	X(int, access, (const char *path, int mode), (path, mode))                                 \
	X(int, faccessat, (int dirfd, const char *path, int mode, int flags),                      \
	  (dirfd, path, mode, flags))                                                              \
	X(int, mkdirat, (int dirfd, const char *path, mode_t mode), (dirfd, path, mode))           \
	X(int, mknodat, (int dirfd, const char *path, mode_t mode, dev_t dev),                     \
	  (dirfd, path, mode, dev))                                                                \
	X(int, symlinkat, (const char *target, int dirfd, const char *path),                       \
	  (target, dirfd, path))                                                                   \
	X(ssize_t, readlinkat, (int dirfd, const char *path, char *buf, size_t n),                 \
	  (dirfd, path, buf, n))                                                                   \
	X(ssize_t, readlink, (const char *path, char *buf, size_t n), (path, buf, n))              \
	X(int, linkat, (int olddirfd, const char *old, int newdirfd, const char *new, int flags),  \
	  (olddirfd, old, newdirfd, new, flags))                                                   \
	X(int, unlinkat, (int dirfd, const char *path, int flags), (dirfd, path, flags))           \
	X(int, renameat2,                                                                          \
	  (int olddirfd, const char *old, int newdirfd, const char *new, unsigned flags),          \
	  (olddirfd, old, newdirfd, new, flags))                                                   \
	X(int, chmod, (const char *path, mode_t mode), (path, mode))                               \
	X(int, fchmod, (int fd, mode_t mode), (fd, mode))                                          \
	X(int, fchmodat, (int dirfd, const char *path, mode_t mode, int flags),                    \
	  (dirfd, path, mode, flags))                                                              \
	X(int, fchownat, (int dirfd, const char *path, uid_t uid, gid_t gid, int flags),           \
	  (dirfd, path, uid, gid, flags))                                                          \
	X(int, futimens, (int fd, const struct timespec *ts), (fd, ts))                            \
	X(int, utimensat, (int dirfd, const char *path, const struct timespec *ts, int flags),     \
	  (dirfd, path, ts, flags))                                                                \
	X(ssize_t, getxattr, (const char *path, const char *name, void *value, size_t n),          \
	  (path, name, value, n))                                                                  \
	X(ssize_t, lgetxattr, (const char *path, const char *name, void *value, size_t n),         \
	  (path, name, value, n))                                                                  \
	X(ssize_t, fgetxattr, (int fd, const char *name, void *value, size_t n),                   \
	  (fd, name, value, n))                                                                    \
	X(int, setxattr,                                                                           \
	  (const char *path, const char *name, const void *value, size_t n, int flags),            \
	  (path, name, value, n, flags))                                                           \
	X(int, lsetxattr,                                                                          \
	  (const char *path, const char *name, const void *value, size_t n, int flags),            \
	  (path, name, value, n, flags))                                                           \
	X(int, removexattr, (const char *path, const char *name), (path, name))                    \
	X(int, lremovexattr, (const char *path, const char *name), (path, name))                   \
	X(ssize_t, listxattr, (const char *path, char *list, size_t n), (path, list, n))           \
	X(ssize_t, llistxattr, (const char *path, char *list, size_t n), (path, list, n))

/* Directory streams: no EINTR to retry (readdir's end leaves errno as is). */
#define TIER_SYSCALLS_DIR(X)                                                                       \
	X(DIR *, fdopendir, (int fd), (fd))                                                        \
	X(struct dirent *, readdir, (DIR * d), (d))                                                \
	X(int, closedir, (DIR * d), (d))

struct tier_sys {
#define TIER_SYS_ENTRY(ret, name, params, args) ret(*name) params;
	TIER_SYSCALLS(TIER_SYS_ENTRY)
	TIER_SYSCALLS_DIR(TIER_SYS_ENTRY)
#undef TIER_SYS_ENTRY
};

/* The table in use, and the C library's (to restore an entry from). */
extern struct tier_sys tier_sys;
extern const struct tier_sys tier_sys_libc;

/* How the engine calls them: tsys_NAME(...), which calls the entry again
 * when it was interrupted before it did anything (EINTR: a network file
 * system's calls can be), so no caller has to. */
#define TIER_SYS_RETRY(ret, name, params, args)                                                    \
	static inline ret tsys_##name params                                                       \
	{                                                                                          \
		ret r;                                                                             \
		do                                                                                 \
			r = tier_sys.name args;                                                    \
		while (r == -1 && errno == EINTR);                                                 \
		return r;                                                                          \
	}
TIER_SYSCALLS(TIER_SYS_RETRY)
#undef TIER_SYS_RETRY
#define TIER_SYS_PLAIN(ret, name, params, args)                                                    \
	static inline ret tsys_##name params                                                       \
	{                                                                                          \
		return tier_sys.name args;                                                         \
	}
TIER_SYSCALLS_DIR(TIER_SYS_PLAIN)
#undef TIER_SYS_PLAIN

#endif
