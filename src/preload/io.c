/*
 * io.c -- descriptor calls: open, close, read/write and their vectored and
 * positioned forms, lseek, fstat, truncate, allocate, sync, dup, fcntl,
 * flock, ioctl, statfs, copy_file_range and sendfile.
 *
 * Each call on a descriptor of ours (S2) becomes one library call on its
 * ferrite descriptor; any other descriptor goes to libc untouched.
 *
 * Invariants: I1 record, open file description and flock locks are the
 *               library's, seen by every process that has the pool; closing
 *               any descriptor of a file drops the process's record locks on
 *               it (core.c sh_forget, and the library at the last one);
 *             I2 the library keeps mapped pages where they are through a
 *               truncate or a punch (M3, M4 in src/fs/mmap.c); a call that
 *               grows a mapped file maps the new pages (ferrite_mmap_refresh).
 */
#include <fcntl.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/sendfile.h>
#include <sys/time.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <sys/uio.h>
#include <unistd.h>

#include "preload/shim.h"

#define FERRITE_FS_MAGIC 0x46525445 /* "ETRF": f_type of statfs on a pool path */

/* ---- open ------------------------------------------------------------------- */

int sh_open_common(int dirfd, const char **pathp, int flags, mode_t mode)
{
	struct sh_target t;
	int c = sh_classify(dirfd, pathp, 0, &t);
	if (c == 0)
		return SH_KERNEL;
	if (c < 0)
		return c;
	int err = 0, rc;
	ferrite_fs *fs = sh_fs(&err);
	if (!fs) {
		rc = err;
	} else if ((flags & O_TMPFILE) == O_TMPFILE) {
		rc = -EOPNOTSUPP;
	} else {
		char pp[PATH_MAX];
		sh_pool_path_of(&t, pp, sizeof(pp));
		rc = SH_CALL(ferrite_openat(fs, t.dirfd, t.path, flags, mode & ~sh_cfg.umask));
		if (rc == -EXDEV && sh_escaped(pathp)) {
			sh_target_done(&t);
			return SH_KERNEL;
		}
		if (rc >= 0)
			rc = sh_install(rc, flags, pp[0] ? pp : NULL, 0, flags & O_CLOEXEC);
	}
	sh_target_done(&t);
	return rc;
}

static mode_t open_mode(int flags, va_list ap)
{
	return (flags & O_CREAT) || (flags & O_TMPFILE) == O_TMPFILE ? (mode_t)va_arg(ap, int) : 0;
}

#define OPEN_BODY(dirfd, real_call)                                                                \
	do {                                                                                       \
		if (sh_depth)                                                                      \
			return real_call;                                                          \
		int rc_ = sh_open_common(dirfd, &path, flags, mode);                               \
		if (rc_ != SH_KERNEL)                                                              \
			return (int)sh_ret(rc_);                                                   \
		/* the kernel's lowest free number (park.c P2); parked ones                        \
		 * given back if they are what it lacks */                                         \
		int fd_ = real_call;                                                               \
		if (fd_ < 0 && errno == EMFILE && sh_park_release())                               \
			fd_ = real_call;                                                           \
		if (fd_ >= 0)                                                                      \
			sh_park_opened(fd_);                                                       \
		return fd_;                                                                        \
	} while (0)

SH_EXPORT int open(const char *path, int flags, ...)
{
	va_list ap;
	va_start(ap, flags);
	mode_t mode = open_mode(flags, ap);
	va_end(ap);
	OPEN_BODY(AT_FDCWD, REAL(open)(path, flags, mode));
}

SH_EXPORT int open64(const char *path, int flags, ...)
{
	va_list ap;
	va_start(ap, flags);
	mode_t mode = open_mode(flags, ap);
	va_end(ap);
	OPEN_BODY(AT_FDCWD, REAL(open64)(path, flags, mode));
}

SH_EXPORT int openat(int dirfd, const char *path, int flags, ...)
{
	va_list ap;
	va_start(ap, flags);
	mode_t mode = open_mode(flags, ap);
	va_end(ap);
	OPEN_BODY(dirfd, REAL(openat)(dirfd, path, flags, mode));
}

SH_EXPORT int openat64(int dirfd, const char *path, int flags, ...)
{
	va_list ap;
	va_start(ap, flags);
	mode_t mode = open_mode(flags, ap);
	va_end(ap);
	OPEN_BODY(dirfd, REAL(openat64)(dirfd, path, flags, mode));
}

SH_EXPORT int creat(const char *path, mode_t mode)
{
	int flags = O_CREAT | O_WRONLY | O_TRUNC;
	OPEN_BODY(AT_FDCWD, REAL(creat)(path, mode));
}

SH_EXPORT int creat64(const char *path, mode_t mode)
{
	int flags = O_CREAT | O_WRONLY | O_TRUNC;
	OPEN_BODY(AT_FDCWD, REAL(creat64)(path, mode));
}

/* _FORTIFY_SOURCE entry points (checked open without a mode). */
SH_EXPORT int __open_2(const char *path, int flags)
{
	mode_t mode = 0;
	OPEN_BODY(AT_FDCWD, REAL(open)(path, flags));
}

SH_EXPORT int __open64_2(const char *path, int flags)
{
	mode_t mode = 0;
	OPEN_BODY(AT_FDCWD, REAL(open64)(path, flags));
}

SH_EXPORT int __openat_2(int dirfd, const char *path, int flags)
{
	mode_t mode = 0;
	OPEN_BODY(dirfd, REAL(openat)(dirfd, path, flags));
}

SH_EXPORT int __openat64_2(int dirfd, const char *path, int flags)
{
	mode_t mode = 0;
	OPEN_BODY(dirfd, REAL(openat64)(dirfd, path, flags));
}

/* ---- close ------------------------------------------------------------------- */

SH_EXPORT int close(int fd)
{
	if (!sh_depth && sh_forget(fd)) {
		/* C3: the slot is empty before the number is freed (or
		 * parked for the next open: S4) */
		if (!sh_park_put(fd))
			sh_kclose(fd);
		return 0;
	}
	if (!sh_depth && sh_park_close(fd)) {
		errno = EBADF; /* not the program's: a parked placeholder */
		return -1;
	}
	int rc = REAL(close)(fd);
	if (rc == 0)
		sh_park_freed(fd);
	return rc;
}

struct range_arg {
	unsigned lo, hi;
	int *fds;
	size_t n, cap;
};

static void collect(int fd, struct sh_file *f, void *arg)
{
	struct range_arg *r = arg;
	if ((unsigned)fd < r->lo || (unsigned)fd > r->hi)
		return;
	if (r->n == r->cap) {
		size_t nc = r->cap ? r->cap * 2 : 32;
		int *n = realloc(r->fds, nc * sizeof(int));
		if (!n)
			return;
		r->fds = n;
		r->cap = nc;
	}
	r->fds[r->n++] = fd;
}

static void forget_range(unsigned lo, unsigned hi)
{
	struct range_arg r = {lo, hi, NULL, 0, 0};
	sh_for_each(collect, &r);
	for (size_t i = 0; i < r.n; i++)
		sh_forget(r.fds[i]);
	free(r.fds);
}

SH_EXPORT int close_range(unsigned first, unsigned last, int flags)
{
	int rc = REAL(close_range)(first, last, flags);
	if (!rc && !(flags & CLOSE_RANGE_CLOEXEC)) {
		if (!sh_depth)
			forget_range(first, last);
		sh_park_closed_range(first, last);
	}
	return rc;
}

SH_EXPORT void closefrom(int lowfd)
{
	if (!sh_depth && lowfd >= 0)
		forget_range((unsigned)lowfd, ~0u);
	REAL(closefrom)(lowfd);
	if (lowfd >= 0)
		sh_park_closed_range((unsigned)lowfd, ~0u);
}

/* ---- read and write ----------------------------------------------------------- */

/* After a write that may have grown a mapped file (I2). */
static void grown(int ffd)
{
	if (sh_mm_active())
		SH_CALL(ferrite_mmap_refresh(FS, ffd));
}

static ssize_t wr_done(ssize_t n, int ffd)
{
	if (n > 0)
		grown(ffd);
	return n;
}

SH_EXPORT ssize_t read(int fd, void *buf, size_t n)
{
	SH_FD_OP(ssize_t, fd, REAL(read)(fd, buf, n), ferrite_read(FS, FFD, buf, n));
}

SH_EXPORT ssize_t __read_chk(int fd, void *buf, size_t n, size_t buflen)
{
	return read(fd, buf, n);
}

SH_EXPORT ssize_t write(int fd, const void *buf, size_t n)
{
	SH_FD_OP(ssize_t, fd, REAL(write)(fd, buf, n),
		 wr_done(ferrite_write(FS, FFD, buf, n), FFD));
}

/* read/write/lseek on a file rather than a descriptor number (stdio.c's
 * standard streams, which must reach their file after fd 0-2 changed). */
ssize_t sh_f_read(struct sh_file *f, void *buf, size_t n)
{
	return sh_ret(sh_forked ? sh_fork_denied() : SH_CALL(ferrite_read(FS, f->ffd, buf, n)));
}

ssize_t sh_f_write(struct sh_file *f, const void *buf, size_t n)
{
	return sh_ret(sh_forked ? sh_fork_denied()
				: wr_done(SH_CALL(ferrite_write(FS, f->ffd, buf, n)), f->ffd));
}

SH_EXPORT ssize_t pread(int fd, void *buf, size_t n, off_t off)
{
	SH_FD_OP(ssize_t, fd, REAL(pread)(fd, buf, n, off), ferrite_pread(FS, FFD, buf, n, off));
}

SH_EXPORT ssize_t pread64(int fd, void *buf, size_t n, off_t off)
{
	SH_FD_OP(ssize_t, fd, REAL(pread64)(fd, buf, n, off), ferrite_pread(FS, FFD, buf, n, off));
}

SH_EXPORT ssize_t __pread_chk(int fd, void *buf, size_t n, off_t off, size_t buflen)
{
	return pread(fd, buf, n, off);
}

SH_EXPORT ssize_t __pread64_chk(int fd, void *buf, size_t n, off_t off, size_t buflen)
{
	return pread(fd, buf, n, off);
}

SH_EXPORT ssize_t pwrite(int fd, const void *buf, size_t n, off_t off)
{
	SH_FD_OP(ssize_t, fd, REAL(pwrite)(fd, buf, n, off),
		 wr_done(ferrite_pwrite(FS, FFD, buf, n, off), FFD));
}

SH_EXPORT ssize_t pwrite64(int fd, const void *buf, size_t n, off_t off)
{
	SH_FD_OP(ssize_t, fd, REAL(pwrite64)(fd, buf, n, off),
		 wr_done(ferrite_pwrite(FS, FFD, buf, n, off), FFD));
}

SH_EXPORT ssize_t readv(int fd, const struct iovec *iov, int cnt)
{
	SH_FD_OP(ssize_t, fd, REAL(readv)(fd, iov, cnt), ferrite_readv(FS, FFD, iov, cnt));
}

SH_EXPORT ssize_t writev(int fd, const struct iovec *iov, int cnt)
{
	SH_FD_OP(ssize_t, fd, REAL(writev)(fd, iov, cnt),
		 wr_done(ferrite_writev(FS, FFD, iov, cnt), FFD));
}

SH_EXPORT ssize_t preadv(int fd, const struct iovec *iov, int cnt, off_t off)
{
	SH_FD_OP(ssize_t, fd, REAL(preadv)(fd, iov, cnt, off),
		 ferrite_preadv(FS, FFD, iov, cnt, off));
}

SH_EXPORT ssize_t preadv64(int fd, const struct iovec *iov, int cnt, off_t off)
{
	SH_FD_OP(ssize_t, fd, REAL(preadv64)(fd, iov, cnt, off),
		 ferrite_preadv(FS, FFD, iov, cnt, off));
}

SH_EXPORT ssize_t pwritev(int fd, const struct iovec *iov, int cnt, off_t off)
{
	SH_FD_OP(ssize_t, fd, REAL(pwritev)(fd, iov, cnt, off),
		 wr_done(ferrite_pwritev(FS, FFD, iov, cnt, off), FFD));
}

SH_EXPORT ssize_t pwritev64(int fd, const struct iovec *iov, int cnt, off_t off)
{
	SH_FD_OP(ssize_t, fd, REAL(pwritev64)(fd, iov, cnt, off),
		 wr_done(ferrite_pwritev(FS, FFD, iov, cnt, off), FFD));
}

/* preadv2/pwritev2: offset -1 uses the file position; RWF_* hints ignored. */
SH_EXPORT ssize_t preadv2(int fd, const struct iovec *iov, int cnt, off_t off, int fl)
{
	SH_FD_OP(ssize_t, fd, REAL(preadv2)(fd, iov, cnt, off, fl),
		 off == -1 ? ferrite_readv(FS, FFD, iov, cnt)
			   : ferrite_preadv(FS, FFD, iov, cnt, off));
}

SH_EXPORT ssize_t preadv64v2(int fd, const struct iovec *iov, int cnt, off_t off, int fl)
{
	SH_FD_OP(ssize_t, fd, REAL(preadv64v2)(fd, iov, cnt, off, fl),
		 off == -1 ? ferrite_readv(FS, FFD, iov, cnt)
			   : ferrite_preadv(FS, FFD, iov, cnt, off));
}

SH_EXPORT ssize_t pwritev2(int fd, const struct iovec *iov, int cnt, off_t off, int fl)
{
	SH_FD_OP(ssize_t, fd, REAL(pwritev2)(fd, iov, cnt, off, fl),
		 wr_done(off == -1 ? ferrite_writev(FS, FFD, iov, cnt)
				   : ferrite_pwritev(FS, FFD, iov, cnt, off),
			 FFD));
}

SH_EXPORT ssize_t pwritev64v2(int fd, const struct iovec *iov, int cnt, off_t off, int fl)
{
	SH_FD_OP(ssize_t, fd, REAL(pwritev64v2)(fd, iov, cnt, off, fl),
		 wr_done(off == -1 ? ferrite_writev(FS, FFD, iov, cnt)
				   : ferrite_pwritev(FS, FFD, iov, cnt, off),
			 FFD));
}

/* A directory descriptor read by getdents64 seeks its stream (dir.c). */
static off_t do_lseek(struct sh_file *f, off_t off, int whence)
{
	if (f->dir) {
		if (whence != SEEK_SET || off < 0)
			return -EINVAL;
		__atomic_store_n(&f->dir_dots, 0, __ATOMIC_RELAXED); /* dir.c R3 */
		int rc = SH_CALL(ferrite_seekdir(f->dir, off));
		return rc < 0 ? rc : off;
	}
	return SH_CALL(ferrite_lseek(FS, f->ffd, off, whence));
}

SH_EXPORT off_t lseek(int fd, off_t off, int whence)
{
	struct sh_file *f;
	if (sh_depth || !(f = sh_file_get(fd)))
		return REAL(lseek)(fd, off, whence);
	off_t r = sh_forked ? sh_fork_denied() : do_lseek(f, off, whence);
	sh_file_put(f);
	return (off_t)sh_ret(r);
}

off_t sh_f_lseek(struct sh_file *f, off_t off, int whence)
{
	return (off_t)sh_ret(sh_forked ? sh_fork_denied() : do_lseek(f, off, whence));
}

SH_EXPORT off_t lseek64(int fd, off_t off, int whence)
{
	return lseek(fd, off, whence);
}

/* ---- size, space, sync ------------------------------------------------------- */

static int do_ftruncate(int ffd, off_t len)
{
	int rc = SH_CALL(ferrite_ftruncate(FS, ffd, len));
	if (!rc)
		grown(ffd);
	return rc;
}

SH_EXPORT int ftruncate(int fd, off_t len)
{
	SH_FD_OP(int, fd, REAL(ftruncate)(fd, len), do_ftruncate(FFD, len));
}

SH_EXPORT int ftruncate64(int fd, off_t len)
{
	SH_FD_OP(int, fd, REAL(ftruncate64)(fd, len), do_ftruncate(FFD, len));
}

static int path_truncate(int dirfd, const char *path, off_t len)
{
	if (len < 0)
		return -EINVAL;
	int ffd = SH_CALL(ferrite_openat(FS, dirfd, path, O_WRONLY, 0));
	if (ffd < 0)
		return ffd;
	int rc = do_ftruncate(ffd, len);
	SH_CALL(ferrite_close(FS, ffd));
	return rc;
}

SH_EXPORT int truncate(const char *path, off_t len)
{
	SH_PATH_OP(int, AT_FDCWD, path, 0, REAL(truncate)(path, len), path_truncate(DFD, TP, len));
}

SH_EXPORT int truncate64(const char *path, off_t len)
{
	SH_PATH_OP(int, AT_FDCWD, path, 0, REAL(truncate64)(path, len),
		   path_truncate(DFD, TP, len));
}

static int do_fallocate(int ffd, int mode, off_t off, off_t len)
{
	int rc = SH_CALL(ferrite_fallocate(FS, ffd, mode, off, len));
	if (!rc)
		grown(ffd);
	return rc;
}

SH_EXPORT int fallocate(int fd, int mode, off_t off, off_t len)
{
	SH_FD_OP(int, fd, REAL(fallocate)(fd, mode, off, len), do_fallocate(FFD, mode, off, len));
}

SH_EXPORT int fallocate64(int fd, int mode, off_t off, off_t len)
{
	SH_FD_OP(int, fd, REAL(fallocate64)(fd, mode, off, len), do_fallocate(FFD, mode, off, len));
}

/* posix_fallocate returns the error number instead of setting errno. */
static int posix_falloc(int fd, off_t off, off_t len, int is64)
{
	struct sh_file *f;
	if (sh_depth || !(f = sh_file_get(fd)))
		return is64 ? REAL(posix_fallocate64)(fd, off, len)
			    : REAL(posix_fallocate)(fd, off, len);
	int rc = sh_forked ? sh_fork_denied() : do_fallocate(f->ffd, 0, off, len);
	sh_file_put(f);
	return -rc;
}

SH_EXPORT int posix_fallocate(int fd, off_t off, off_t len)
{
	return posix_falloc(fd, off, len, 0);
}

SH_EXPORT int posix_fallocate64(int fd, off_t off, off_t len)
{
	return posix_falloc(fd, off, len, 1);
}

static int fadvise(int fd, off_t off, off_t len, int advice, int is64)
{
	struct sh_file *f;
	if (sh_depth || !(f = sh_file_get(fd)))
		return is64 ? REAL(posix_fadvise64)(fd, off, len, advice)
			    : REAL(posix_fadvise)(fd, off, len, advice);
	sh_file_put(f);
	return advice < 0 || advice > POSIX_FADV_NOREUSE ? EINVAL : 0; /* no page cache */
}

SH_EXPORT int posix_fadvise(int fd, off_t off, off_t len, int advice)
{
	return fadvise(fd, off, len, advice, 0);
}

SH_EXPORT int posix_fadvise64(int fd, off_t off, off_t len, int advice)
{
	return fadvise(fd, off, len, advice, 1);
}

SH_EXPORT ssize_t readahead(int fd, off64_t off, size_t n)
{
	SH_FD_OP(ssize_t, fd, REAL(readahead)(fd, off, n), ferrite_fsync(FS, FFD));
}

SH_EXPORT int fsync(int fd)
{
	SH_FD_OP(int, fd, REAL(fsync)(fd), ferrite_fsync(FS, FFD));
}

SH_EXPORT int fdatasync(int fd)
{
	SH_FD_OP(int, fd, REAL(fdatasync)(fd), ferrite_fdatasync(FS, FFD));
}

SH_EXPORT int syncfs(int fd)
{
	SH_FD_OP(int, fd, REAL(syncfs)(fd), ferrite_fsync(FS, FFD));
}

SH_EXPORT int sync_file_range(int fd, off64_t off, off64_t n, unsigned int flags)
{
	SH_FD_OP(int, fd, REAL(sync_file_range)(fd, off, n, flags), ferrite_fsync(FS, FFD));
}

/* ---- attributes by descriptor -------------------------------------------------- */

SH_EXPORT int fstat(int fd, struct stat *st)
{
	SH_FD_OP(int, fd, REAL(fstat)(fd, st), ferrite_fstat(FS, FFD, st));
}

SH_EXPORT int fstat64(int fd, struct stat64 *st)
{
	SH_FD_OP(int, fd, REAL(fstat64)(fd, st), ferrite_fstat(FS, FFD, (struct stat *)st));
}

SH_EXPORT int __fxstat(int ver, int fd, struct stat *st)
{
	return fstat(fd, st);
}

SH_EXPORT int __fxstat64(int ver, int fd, struct stat64 *st)
{
	return fstat64(fd, st);
}

SH_EXPORT int fchmod(int fd, mode_t mode)
{
	SH_FD_OP(int, fd, REAL(fchmod)(fd, mode), ferrite_fchmod(FS, FFD, mode));
}

SH_EXPORT int fchown(int fd, uid_t uid, gid_t gid)
{
	SH_FD_OP(int, fd, REAL(fchown)(fd, uid, gid), ferrite_fchown(FS, FFD, uid, gid));
}

SH_EXPORT int futimens(int fd, const struct timespec ts[2])
{
	SH_FD_OP(int, fd, REAL(futimens)(fd, ts), ferrite_futimens(FS, FFD, ts));
}

static const struct timespec *tv_to_ts(const struct timeval *tv, struct timespec ts[2])
{
	if (!tv)
		return NULL;
	for (int i = 0; i < 2; i++) {
		ts[i].tv_sec = tv[i].tv_sec;
		ts[i].tv_nsec = tv[i].tv_usec * 1000;
	}
	return ts;
}

SH_EXPORT int futimes(int fd, const struct timeval tv[2])
{
	struct timespec ts[2];
	SH_FD_OP(int, fd, REAL(futimes)(fd, tv), ferrite_futimens(FS, FFD, tv_to_ts(tv, ts)));
}

static void to_statfs(const struct statvfs *v, struct statfs *s)
{
	memset(s, 0, sizeof(*s));
	s->f_type = FERRITE_FS_MAGIC;
	s->f_bsize = (long)v->f_bsize;
	s->f_frsize = (long)v->f_frsize;
	s->f_blocks = v->f_blocks;
	s->f_bfree = v->f_bfree;
	s->f_bavail = v->f_bavail;
	s->f_files = v->f_files;
	s->f_ffree = v->f_ffree;
	memcpy(&s->f_fsid, &v->f_fsid,
	       sizeof(s->f_fsid) < sizeof(v->f_fsid) ? sizeof(s->f_fsid) : sizeof(v->f_fsid));
	s->f_namelen = (long)v->f_namemax;
	s->f_flags = (long)v->f_flag;
}

static int do_fstatfs(struct statfs *s)
{
	struct statvfs v;
	int rc = SH_CALL(ferrite_statvfs(FS, &v));
	if (!rc)
		to_statfs(&v, s);
	return rc;
}

SH_EXPORT int fstatfs(int fd, struct statfs *s)
{
	SH_FD_OP(int, fd, REAL(fstatfs)(fd, s), do_fstatfs(s));
}

SH_EXPORT int fstatfs64(int fd, struct statfs64 *s)
{
	SH_FD_OP(int, fd, REAL(fstatfs64)(fd, s), do_fstatfs((struct statfs *)s));
}

SH_EXPORT int fstatvfs(int fd, struct statvfs *v)
{
	SH_FD_OP(int, fd, REAL(fstatvfs)(fd, v), ferrite_statvfs(FS, v));
}

SH_EXPORT int fstatvfs64(int fd, struct statvfs64 *v)
{
	SH_FD_OP(int, fd, REAL(fstatvfs64)(fd, v), ferrite_statvfs(FS, (struct statvfs *)v));
}

SH_EXPORT int statfs(const char *path, struct statfs *s)
{
	SH_PATH_OP(int, AT_FDCWD, path, 0, REAL(statfs)(path, s),
		   ferrite_faccessat(FS, DFD, TP, F_OK, 0) ?: do_fstatfs(s));
}

SH_EXPORT int statfs64(const char *path, struct statfs64 *s)
{
	SH_PATH_OP(int, AT_FDCWD, path, 0, REAL(statfs64)(path, s),
		   ferrite_faccessat(FS, DFD, TP, F_OK, 0) ?: do_fstatfs((struct statfs *)s));
}

SH_EXPORT int statvfs(const char *path, struct statvfs *v)
{
	SH_PATH_OP(int, AT_FDCWD, path, 0, REAL(statvfs)(path, v),
		   ferrite_faccessat(FS, DFD, TP, F_OK, 0) ?: ferrite_statvfs(FS, v));
}

SH_EXPORT int statvfs64(const char *path, struct statvfs64 *v)
{
	SH_PATH_OP(int, AT_FDCWD, path, 0, REAL(statvfs64)(path, v),
		   ferrite_faccessat(FS, DFD, TP, F_OK, 0)
		       ?: ferrite_statvfs(FS, (struct statvfs *)v));
}

/* ---- dup, fcntl, flock, ioctl ------------------------------------------------- */

SH_EXPORT int dup(int fd)
{
	struct sh_file *f;
	if (!sh_depth && sh_park_is(fd)) {
		errno = EBADF; /* S4: not the program's */
		return -1;
	}
	if (sh_depth || !(f = sh_file_get(fd)))
		return REAL(dup)(fd);
	int rc = sh_dup_to(f, 0, 0, -1);
	sh_file_put(f);
	return (int)sh_ret(rc);
}

static int do_dup3(int oldfd, int newfd, int flags, int is_dup2)
{
	struct sh_file *f;
	if (sh_depth)
		return is_dup2 ? REAL(dup2)(oldfd, newfd) : REAL(dup3)(oldfd, newfd, flags);
	if (sh_park_is(oldfd)) {
		errno = EBADF; /* S4: not the program's */
		return -1;
	}
	if (!(f = sh_file_get(oldfd))) {
		int rc = is_dup2 ? REAL(dup2)(oldfd, newfd) : REAL(dup3)(oldfd, newfd, flags);
		if (rc >= 0 && oldfd != newfd) {
			sh_forget(newfd); /* a kernel file replaced one of ours */
			sh_park_claim(newfd);
		}
		return rc;
	}
	int rc;
	if (oldfd == newfd)
		rc = is_dup2 ? newfd : -EINVAL;
	else if (flags & ~O_CLOEXEC)
		rc = -EINVAL;
	else if (newfd < 0)
		rc = -EBADF;
	else {
		if (newfd < 3)
			sh_std_flush(newfd); /* stdio.c: flush before the swap */
		rc = sh_dup_to(f, 0, flags & O_CLOEXEC, newfd);
	}
	sh_file_put(f);
	return (int)sh_ret(rc);
}

SH_EXPORT int dup2(int oldfd, int newfd)
{
	return do_dup3(oldfd, newfd, 0, 1);
}

SH_EXPORT int dup3(int oldfd, int newfd, int flags)
{
	return do_dup3(oldfd, newfd, flags, 0);
}

static int lock_call(struct sh_file *f, int cmd, struct flock *fl)
{
	if (cmd == F_SETLK || cmd == F_SETLKW)
		__atomic_store_n(&sh_record_locks, 1, __ATOMIC_RELAXED);
	return SH_CALL(ferrite_fcntl_lock(FS, f->ffd, cmd, fl));
}

static int do_fcntl(int fd, struct sh_file *f, int cmd, void *arg)
{
	long iarg = (long)arg;
	switch (cmd) {
	case F_DUPFD:
	case F_DUPFD_CLOEXEC:
		if (iarg < 0)
			return -EINVAL;
		return sh_dup_to(f, (int)iarg, cmd == F_DUPFD_CLOEXEC, -1);
	case F_GETFD:
	case F_SETFD: {
		int rc = REAL(fcntl)(fd, cmd, (int)iarg); /* S1: the placeholder's flag */
		if (rc >= 0 && cmd == F_SETFD)
			sh_park_cloexec(fd, (int)iarg & FD_CLOEXEC);
		return rc < 0 ? -errno : rc;
	}
	case F_GETFL: {
		int rc = SH_CALL(ferrite_getfl(FS, f->ffd));
		return rc < 0 ? rc : rc | O_LARGEFILE;
	}
	case F_SETFL:
		return SH_CALL(ferrite_setfl(FS, f->ffd, (int)iarg));
	case F_GETLK:
	case F_SETLK:
	case F_SETLKW:
	case F_OFD_GETLK:
	case F_OFD_SETLK:
	case F_OFD_SETLKW:
		return lock_call(f, cmd, arg);
	case F_GETOWN:
	case F_SETOWN:
	case F_GETSIG:
	case F_SETSIG:
		return 0;
	case F_GETLEASE:
		return F_UNLCK;
	default:
		return -EINVAL;
	}
}

static int fcntl_any(int fd, int cmd, void *arg, int is64)
{
	struct sh_file *f;
	if (!sh_depth && sh_park_is(fd)) {
		errno = EBADF; /* S4: not the program's */
		return -1;
	}
	if (sh_depth || !(f = sh_file_get(fd)))
		return is64 ? REAL(fcntl64)(fd, cmd, arg) : REAL(fcntl)(fd, cmd, arg);
	int rc = sh_forked && cmd != F_GETFD && cmd != F_SETFD ? sh_fork_denied()
							       : do_fcntl(fd, f, cmd, arg);
	sh_file_put(f);
	return (int)sh_ret(rc);
}

SH_EXPORT int fcntl(int fd, int cmd, ...)
{
	va_list ap;
	va_start(ap, cmd);
	void *arg = va_arg(ap, void *);
	va_end(ap);
	return fcntl_any(fd, cmd, arg, 0);
}

SH_EXPORT int fcntl64(int fd, int cmd, ...)
{
	va_list ap;
	va_start(ap, cmd);
	void *arg = va_arg(ap, void *);
	va_end(ap);
	return fcntl_any(fd, cmd, arg, 1);
}

static int do_flock(struct sh_file *f, int op)
{
	int fl = SH_CALL(ferrite_getfl(FS, f->ffd));
	if (fl < 0)
		return fl;
	return fl & O_PATH ? -EBADF : SH_CALL(ferrite_flock(FS, f->ffd, op));
}

SH_EXPORT int flock(int fd, int op)
{
	struct sh_file *f;
	if (sh_depth || !(f = sh_file_get(fd)))
		return REAL(flock)(fd, op);
	int rc = sh_forked ? sh_fork_denied() : do_flock(f, op);
	sh_file_put(f);
	return (int)sh_ret(rc);
}

SH_EXPORT int ioctl(int fd, unsigned long req, ...)
{
	va_list ap;
	va_start(ap, req);
	void *arg = va_arg(ap, void *);
	va_end(ap);
	struct sh_file *f;
	if (sh_depth || !(f = sh_file_get(fd)))
		return REAL(ioctl)(fd, req, arg);
	int rc = -ENOTTY; /* no terminal, no FIONREAD, no reflink: callers fall back */
	if (req == FIOCLEX || req == FIONCLEX)
		rc = REAL(fcntl)(fd, F_SETFD, req == FIOCLEX ? FD_CLOEXEC : 0) ? -errno : 0;
	if (rc == 0 && (req == FIOCLEX || req == FIONCLEX))
		sh_park_cloexec(fd, req == FIOCLEX);
	else if (req == FIONBIO)
		rc = 0;
	sh_file_put(f);
	return (int)sh_ret(rc);
}

/* ---- copying between descriptors ---------------------------------------------- */

/* Copies through a buffer with the interposed read/write (either side ours). */
static ssize_t copy_loop(int in, off_t *off_in, int out, off_t *off_out, size_t len)
{
	size_t bufsz = len < (1 << 20) ? len : (1 << 20);
	char *buf = malloc(bufsz ? bufsz : 1);
	if (!buf)
		return -ENOMEM;
	ssize_t done = 0;
	while ((size_t)done < len) {
		size_t want = len - (size_t)done < bufsz ? len - (size_t)done : bufsz;
		ssize_t n = off_in ? pread(in, buf, want, *off_in) : read(in, buf, want);
		if (n <= 0) {
			if (n < 0 && !done)
				done = -errno;
			break;
		}
		ssize_t w = 0;
		while (w < n) {
			ssize_t m = off_out ? pwrite(out, buf + w, (size_t)(n - w), *off_out)
					    : write(out, buf + w, (size_t)(n - w));
			if (m <= 0) {
				free(buf);
				if (done + w > 0)
					return done + w;
				return m < 0 ? -errno : -EIO;
			}
			w += m;
			if (off_out)
				*off_out += m;
		}
		if (off_in)
			*off_in += n;
		done += n;
		if ((size_t)n < want)
			break;
	}
	free(buf);
	return done;
}

SH_EXPORT ssize_t copy_file_range(int in, off64_t *off_in, int out, off64_t *off_out, size_t len,
				  unsigned flags)
{
	if (sh_depth)
		return REAL(copy_file_range)(in, off_in, out, off_out, len, flags);
	struct sh_file *fi = sh_file_get(in), *fo = sh_file_get(out);
	ssize_t rc;
	if (!fi && !fo)
		return REAL(copy_file_range)(in, off_in, out, off_out, len, flags);
	if (sh_forked)
		rc = sh_fork_denied();
	else if (flags)
		rc = -EINVAL;
	else if (fi && fo)
		rc = SH_CALL(
		    ferrite_copy_file_range(FS, fi->ffd, off_in, fo->ffd, off_out, len, flags));
	else
		rc = copy_loop(in, off_in, out, off_out, len);
	if (rc > 0 && fo)
		grown(fo->ffd);
	if (fi)
		sh_file_put(fi);
	if (fo)
		sh_file_put(fo);
	return sh_ret(rc);
}

SH_EXPORT ssize_t sendfile(int out, int in, off_t *off, size_t count)
{
	if (sh_depth)
		return REAL(sendfile)(out, in, off, count);
	struct sh_file *fi = sh_file_get(in), *fo = sh_file_get(out);
	if (!fi && !fo)
		return REAL(sendfile)(out, in, off, count);
	ssize_t rc = sh_forked ? sh_fork_denied() : copy_loop(in, off, out, NULL, count);
	if (fi)
		sh_file_put(fi);
	if (fo)
		sh_file_put(fo);
	return sh_ret(rc);
}

SH_EXPORT ssize_t sendfile64(int out, int in, off_t *off, size_t count)
{
	return sendfile(out, in, off, count);
}
