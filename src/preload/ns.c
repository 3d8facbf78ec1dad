/*
 * ns.c -- calls that name a path: stat and statx, access, permissions,
 * owners, times, the namespace (mkdir, unlink, rename, link, symlink,
 * readlink, mknod, remove, mkstemp), and extended attributes.
 *
 * Invariants: N1 a call naming one pool path and one kernel path (rename,
 *               link) fails with EXDEV, as between two Linux file systems;
 *             N2 modes of new objects have the process's umask applied here
 *               (the library applies none).
 */
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/time.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>
#include <utime.h>

#include "preload/shim.h"

/* ---- stat -------------------------------------------------------------------- */

SH_EXPORT int stat(const char *path, struct stat *st)
{
	SH_PATH_OP(int, AT_FDCWD, path, 0, REAL(stat)(path, st),
		   ferrite_fstatat(FS, DFD, TP, st, 0));
}

SH_EXPORT int stat64(const char *path, struct stat64 *st)
{
	SH_PATH_OP(int, AT_FDCWD, path, 0, REAL(stat64)(path, st),
		   ferrite_fstatat(FS, DFD, TP, (struct stat *)st, 0));
}

SH_EXPORT int lstat(const char *path, struct stat *st)
{
	SH_PATH_OP(int, AT_FDCWD, path, 0, REAL(lstat)(path, st),
		   ferrite_fstatat(FS, DFD, TP, st, AT_SYMLINK_NOFOLLOW));
}

SH_EXPORT int lstat64(const char *path, struct stat64 *st)
{
	SH_PATH_OP(int, AT_FDCWD, path, 0, REAL(lstat64)(path, st),
		   ferrite_fstatat(FS, DFD, TP, (struct stat *)st, AT_SYMLINK_NOFOLLOW));
}

#define AT_STAT_FLAGS (AT_SYMLINK_NOFOLLOW | AT_EMPTY_PATH)

SH_EXPORT int fstatat(int dirfd, const char *path, struct stat *st, int flags)
{
	SH_PATH_OP(int, dirfd, path, flags &AT_EMPTY_PATH, REAL(fstatat)(dirfd, path, st, flags),
		   ferrite_fstatat(FS, DFD, TP, st, flags & AT_STAT_FLAGS));
}

SH_EXPORT int fstatat64(int dirfd, const char *path, struct stat64 *st, int flags)
{
	SH_PATH_OP(int, dirfd, path, flags &AT_EMPTY_PATH, REAL(fstatat64)(dirfd, path, st, flags),
		   ferrite_fstatat(FS, DFD, TP, (struct stat *)st, flags & AT_STAT_FLAGS));
}

SH_EXPORT int newfstatat(int dirfd, const char *path, struct stat *st, int flags)
{
	return fstatat(dirfd, path, st, flags);
}

/* The pre-2.33 glibc entry points (binaries built against older headers). */
SH_EXPORT int __xstat(int ver, const char *path, struct stat *st)
{
	return stat(path, st);
}

SH_EXPORT int __xstat64(int ver, const char *path, struct stat64 *st)
{
	return stat64(path, st);
}

SH_EXPORT int __lxstat(int ver, const char *path, struct stat *st)
{
	return lstat(path, st);
}

SH_EXPORT int __lxstat64(int ver, const char *path, struct stat64 *st)
{
	return lstat64(path, st);
}

SH_EXPORT int __fxstatat(int ver, int dirfd, const char *path, struct stat *st, int flags)
{
	return fstatat(dirfd, path, st, flags);
}

SH_EXPORT int __fxstatat64(int ver, int dirfd, const char *path, struct stat64 *st, int flags)
{
	return fstatat64(dirfd, path, st, flags);
}

static int do_statx(int dfd, const char *p, int flags, struct statx *sx)
{
	struct stat st;
	int rc = ferrite_fstatat(FS, dfd, p, &st, flags & AT_STAT_FLAGS);
	if (rc)
		return rc;
	memset(sx, 0, sizeof(*sx));
	sx->stx_mask = STATX_BASIC_STATS;
	sx->stx_blksize = (uint32_t)st.st_blksize;
	sx->stx_nlink = (uint32_t)st.st_nlink;
	sx->stx_uid = st.st_uid;
	sx->stx_gid = st.st_gid;
	sx->stx_mode = (uint16_t)st.st_mode;
	sx->stx_ino = st.st_ino;
	sx->stx_size = (uint64_t)st.st_size;
	sx->stx_blocks = (uint64_t)st.st_blocks;
	sx->stx_atime.tv_sec = st.st_atim.tv_sec;
	sx->stx_atime.tv_nsec = (uint32_t)st.st_atim.tv_nsec;
	sx->stx_mtime.tv_sec = st.st_mtim.tv_sec;
	sx->stx_mtime.tv_nsec = (uint32_t)st.st_mtim.tv_nsec;
	sx->stx_ctime.tv_sec = st.st_ctim.tv_sec;
	sx->stx_ctime.tv_nsec = (uint32_t)st.st_ctim.tv_nsec;
	sx->stx_rdev_major = major(st.st_rdev);
	sx->stx_rdev_minor = minor(st.st_rdev);
	sx->stx_dev_major = major(st.st_dev);
	sx->stx_dev_minor = minor(st.st_dev);
	return 0;
}

SH_EXPORT int statx(int dirfd, const char *path, int flags, unsigned mask, struct statx *sx)
{
	SH_PATH_OP(int, dirfd, path, flags &AT_EMPTY_PATH,
		   REAL(statx)(dirfd, path, flags, mask, sx), do_statx(DFD, TP, flags, sx));
}

/* ---- access, permissions, owners, times ------------------------------------------ */

SH_EXPORT int access(const char *path, int mode)
{
	SH_PATH_OP(int, AT_FDCWD, path, 0, REAL(access)(path, mode),
		   ferrite_faccessat(FS, DFD, TP, mode, 0));
}

SH_EXPORT int faccessat(int dirfd, const char *path, int mode, int flags)
{
	SH_PATH_OP(int, dirfd, path, flags &AT_EMPTY_PATH,
		   REAL(faccessat)(dirfd, path, mode, flags),
		   ferrite_faccessat(FS, DFD, TP, mode, flags));
}

SH_EXPORT int euidaccess(const char *path, int mode)
{
	SH_PATH_OP(int, AT_FDCWD, path, 0, REAL(euidaccess)(path, mode),
		   ferrite_faccessat(FS, DFD, TP, mode, AT_EACCESS));
}

SH_EXPORT int eaccess(const char *path, int mode)
{
	return euidaccess(path, mode);
}

SH_EXPORT int chmod(const char *path, mode_t mode)
{
	SH_PATH_OP(int, AT_FDCWD, path, 0, REAL(chmod)(path, mode),
		   ferrite_fchmodat(FS, DFD, TP, mode, 0));
}

SH_EXPORT int fchmodat(int dirfd, const char *path, mode_t mode, int flags)
{
	SH_PATH_OP(int, dirfd, path, flags &AT_EMPTY_PATH, REAL(fchmodat)(dirfd, path, mode, flags),
		   ferrite_fchmodat(FS, DFD, TP, mode, flags));
}

SH_EXPORT int chown(const char *path, uid_t uid, gid_t gid)
{
	SH_PATH_OP(int, AT_FDCWD, path, 0, REAL(chown)(path, uid, gid),
		   ferrite_fchownat(FS, DFD, TP, uid, gid, 0));
}

SH_EXPORT int lchown(const char *path, uid_t uid, gid_t gid)
{
	SH_PATH_OP(int, AT_FDCWD, path, 0, REAL(lchown)(path, uid, gid),
		   ferrite_fchownat(FS, DFD, TP, uid, gid, AT_SYMLINK_NOFOLLOW));
}

SH_EXPORT int fchownat(int dirfd, const char *path, uid_t uid, gid_t gid, int flags)
{
	SH_PATH_OP(int, dirfd, path, flags &AT_EMPTY_PATH,
		   REAL(fchownat)(dirfd, path, uid, gid, flags),
		   ferrite_fchownat(FS, DFD, TP, uid, gid, flags));
}

SH_EXPORT int utimensat(int dirfd, const char *path, const struct timespec ts[2], int flags)
{
	/* glibc declares path nonnull, so the compiler may drop a test of it */
	const char *p = path;
	__asm__("" : "+r"(p));
	if (!p) /* Linux: utimensat(fd, NULL, ...) is futimens(fd) */
		SH_FD_OP(int, dirfd, REAL(utimensat)(dirfd, path, ts, flags),
			 ferrite_futimens(FS, FFD, ts));
	SH_PATH_OP(int, dirfd, path, flags &AT_EMPTY_PATH, REAL(utimensat)(dirfd, path, ts, flags),
		   ferrite_utimensat(FS, DFD, TP, ts, flags));
}

static const struct timespec *tv2ts(const struct timeval *tv, struct timespec ts[2])
{
	if (!tv)
		return NULL;
	for (int i = 0; i < 2; i++) {
		ts[i].tv_sec = tv[i].tv_sec;
		ts[i].tv_nsec = tv[i].tv_usec * 1000;
	}
	return ts;
}

SH_EXPORT int utimes(const char *path, const struct timeval tv[2])
{
	struct timespec ts[2];
	SH_PATH_OP(int, AT_FDCWD, path, 0, REAL(utimes)(path, tv),
		   ferrite_utimensat(FS, DFD, TP, tv2ts(tv, ts), 0));
}

SH_EXPORT int lutimes(const char *path, const struct timeval tv[2])
{
	struct timespec ts[2];
	SH_PATH_OP(int, AT_FDCWD, path, 0, REAL(lutimes)(path, tv),
		   ferrite_utimensat(FS, DFD, TP, tv2ts(tv, ts), AT_SYMLINK_NOFOLLOW));
}

SH_EXPORT int futimesat(int dirfd, const char *path, const struct timeval tv[2])
{
	struct timespec ts[2];
	SH_PATH_OP(int, dirfd, path, 0, REAL(futimesat)(dirfd, path, tv),
		   ferrite_utimensat(FS, DFD, TP, tv2ts(tv, ts), 0));
}

SH_EXPORT int utime(const char *path, const struct utimbuf *ub)
{
	struct timespec ts[2];
	if (ub) {
		ts[0].tv_sec = ub->actime;
		ts[0].tv_nsec = 0;
		ts[1].tv_sec = ub->modtime;
		ts[1].tv_nsec = 0;
	}
	SH_PATH_OP(int, AT_FDCWD, path, 0, REAL(utime)(path, ub),
		   ferrite_utimensat(FS, DFD, TP, ub ? ts : NULL, 0));
}

/* ---- namespace ------------------------------------------------------------------- */

#define UMASKED(mode) ((mode) & ~sh_cfg.umask)

SH_EXPORT int mkdir(const char *path, mode_t mode)
{
	SH_PATH_OP(int, AT_FDCWD, path, 0, REAL(mkdir)(path, mode),
		   ferrite_mkdirat(FS, DFD, TP, UMASKED(mode)));
}

SH_EXPORT int mkdirat(int dirfd, const char *path, mode_t mode)
{
	SH_PATH_OP(int, dirfd, path, 0, REAL(mkdirat)(dirfd, path, mode),
		   ferrite_mkdirat(FS, DFD, TP, UMASKED(mode)));
}

SH_EXPORT int rmdir(const char *path)
{
	SH_PATH_OP(int, AT_FDCWD, path, 0, REAL(rmdir)(path),
		   ferrite_unlinkat(FS, DFD, TP, AT_REMOVEDIR));
}

SH_EXPORT int unlink(const char *path)
{
	SH_PATH_OP(int, AT_FDCWD, path, 0, REAL(unlink)(path), ferrite_unlinkat(FS, DFD, TP, 0));
}

SH_EXPORT int unlinkat(int dirfd, const char *path, int flags)
{
	SH_PATH_OP(int, dirfd, path, 0, REAL(unlinkat)(dirfd, path, flags),
		   ferrite_unlinkat(FS, DFD, TP, flags));
}

static int do_remove(int dfd, const char *p)
{
	struct stat st;
	int rc = ferrite_fstatat(FS, dfd, p, &st, AT_SYMLINK_NOFOLLOW);
	if (rc)
		return rc;
	return ferrite_unlinkat(FS, dfd, p, S_ISDIR(st.st_mode) ? AT_REMOVEDIR : 0);
}

SH_EXPORT int remove(const char *path)
{
	SH_PATH_OP(int, AT_FDCWD, path, 0, REAL(remove)(path), do_remove(DFD, TP));
}

SH_EXPORT int mknodat(int dirfd, const char *path, mode_t mode, dev_t dev)
{
	SH_PATH_OP(int, dirfd, path, 0, REAL(mknodat)(dirfd, path, mode, dev),
		   ferrite_mknodat(FS, DFD, TP, UMASKED(mode), dev));
}

SH_EXPORT int mknod(const char *path, mode_t mode, dev_t dev)
{
	return mknodat(AT_FDCWD, path, mode, dev);
}

SH_EXPORT int mkfifo(const char *path, mode_t mode)
{
	return mknodat(AT_FDCWD, path, S_IFIFO | (mode & 07777), 0);
}

SH_EXPORT int mkfifoat(int dirfd, const char *path, mode_t mode)
{
	return mknodat(dirfd, path, S_IFIFO | (mode & 07777), 0);
}

SH_EXPORT int symlinkat(const char *target, int dirfd, const char *path)
{
	SH_PATH_OP(int, dirfd, path, 0, REAL(symlinkat)(target, dirfd, path),
		   ferrite_symlinkat(FS, target, DFD, TP));
}

SH_EXPORT int symlink(const char *target, const char *path)
{
	SH_PATH_OP(int, AT_FDCWD, path, 0, REAL(symlink)(target, path),
		   ferrite_symlinkat(FS, target, DFD, TP));
}

SH_EXPORT ssize_t readlinkat(int dirfd, const char *path, char *buf, size_t n)
{
	SH_PATH_OP(ssize_t, dirfd, path, 0, REAL(readlinkat)(dirfd, path, buf, n),
		   ferrite_readlinkat(FS, DFD, TP, buf, n));
}

SH_EXPORT ssize_t readlink(const char *path, char *buf, size_t n)
{
	SH_PATH_OP(ssize_t, AT_FDCWD, path, 0, REAL(readlink)(path, buf, n),
		   ferrite_readlinkat(FS, DFD, TP, buf, n));
}

SH_EXPORT ssize_t __readlink_chk(const char *path, char *buf, size_t n, size_t buflen)
{
	return readlink(path, buf, n);
}

SH_EXPORT ssize_t __readlinkat_chk(int dirfd, const char *path, char *buf, size_t n, size_t buflen)
{
	return readlinkat(dirfd, path, buf, n);
}

/* Two paths (N1): 0 both kernel (paths possibly rewritten), 1 both ours,
 * -errno (EXDEV when mixed). */
static int classify2(int d1, const char **p1, struct sh_target *t1, int d2, const char **p2,
		     struct sh_target *t2, int empty_ok)
{
	int c1 = sh_classify(d1, p1, empty_ok, t1);
	if (c1 < 0)
		return c1;
	int c2 = sh_classify(d2, p2, 0, t2);
	if (c2 < 0 || c1 != c2) {
		if (c1 > 0)
			sh_target_done(t1);
		if (c2 > 0)
			sh_target_done(t2);
		return c2 < 0 ? c2 : -EXDEV;
	}
	return c1;
}

#define TWO_PATH_OP(d1, p1, d2, p2, empty_ok, real_expr, lib_expr)                                 \
	do {                                                                                       \
		struct sh_target t1, t2;                                                           \
		int c_;                                                                            \
		if (sh_depth || (c_ = classify2(d1, &p1, &t1, d2, &p2, &t2, empty_ok)) == 0)       \
			return real_expr;                                                          \
		if (c_ < 0)                                                                        \
			return (int)sh_ret(c_);                                                    \
		int e_ = 0;                                                                        \
		int r_ = sh_fs(&e_) ? SH_CALL(lib_expr) : e_;                                      \
		sh_target_done(&t1);                                                               \
		sh_target_done(&t2);                                                               \
		return (int)sh_ret(r_);                                                            \
	} while (0)

SH_EXPORT int renameat2(int od, const char *op, int nd, const char *np, unsigned flags)
{
	TWO_PATH_OP(od, op, nd, np, 0, REAL(renameat2)(od, op, nd, np, flags),
		    ferrite_renameat2(FS, t1.dirfd, t1.path, t2.dirfd, t2.path, flags));
}

SH_EXPORT int renameat(int od, const char *op, int nd, const char *np)
{
	TWO_PATH_OP(od, op, nd, np, 0, REAL(renameat)(od, op, nd, np),
		    ferrite_renameat2(FS, t1.dirfd, t1.path, t2.dirfd, t2.path, 0));
}

SH_EXPORT int rename(const char *op, const char *np)
{
	int od = AT_FDCWD, nd = AT_FDCWD;
	TWO_PATH_OP(od, op, nd, np, 0, REAL(rename)(op, np),
		    ferrite_renameat2(FS, t1.dirfd, t1.path, t2.dirfd, t2.path, 0));
}

SH_EXPORT int linkat(int od, const char *op, int nd, const char *np, int flags)
{
	TWO_PATH_OP(od, op, nd, np, flags & AT_EMPTY_PATH, REAL(linkat)(od, op, nd, np, flags),
		    ferrite_linkat(FS, t1.dirfd, t1.path, t2.dirfd, t2.path, flags));
}

SH_EXPORT int link(const char *op, const char *np)
{
	int od = AT_FDCWD, nd = AT_FDCWD;
	TWO_PATH_OP(od, op, nd, np, 0, REAL(link)(op, np),
		    ferrite_linkat(FS, t1.dirfd, t1.path, t2.dirfd, t2.path, 0));
}

/* ---- temporary files ---------------------------------------------------------- */

/* mkstemp and friends on a pool path: glibc's own versions open through
 * internal calls the shim cannot see. */
static int make_temp(char *tmpl, int suffixlen, int flags, int dir)
{
	size_t n = strlen(tmpl);
	if (suffixlen < 0 || n < (size_t)suffixlen + 6 ||
	    memcmp(tmpl + n - suffixlen - 6, "XXXXXX", 6)) {
		errno = EINVAL;
		return -1;
	}
	static const char chars[] =
	    "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
	char *x = tmpl + n - suffixlen - 6;
	struct timespec now;
	clock_gettime(CLOCK_REALTIME, &now);
	uint64_t v = (uint64_t)now.tv_nsec ^ ((uint64_t)getpid() << 32) ^ (uintptr_t)tmpl;
	for (int attempt = 0; attempt < 1000; attempt++) {
		v = v * 6364136223846793005ULL + 1442695040888963407ULL;
		uint64_t r = v >> 16;
		for (int i = 0; i < 6; i++, r /= 62)
			x[i] = chars[r % 62];
		int rc = dir ? mkdir(tmpl, 0700)
			     : open(tmpl, O_RDWR | O_CREAT | O_EXCL | (flags & ~O_ACCMODE), 0600);
		if (rc >= 0 || errno != EEXIST)
			return rc;
	}
	errno = EEXIST;
	return -1;
}

static int is_pool_template(const char *tmpl)
{
	struct sh_target t;
	const char *p = tmpl;
	if (sh_depth || !tmpl)
		return 0;
	int c = sh_classify(AT_FDCWD, &p, 0, &t);
	if (c > 0)
		sh_target_done(&t);
	return c > 0;
}

SH_EXPORT int mkstemp(char *tmpl)
{
	return is_pool_template(tmpl) ? make_temp(tmpl, 0, 0, 0) : REAL(mkstemp)(tmpl);
}

SH_EXPORT int mkstemp64(char *tmpl)
{
	return is_pool_template(tmpl) ? make_temp(tmpl, 0, 0, 0) : REAL(mkstemp64)(tmpl);
}

SH_EXPORT int mkostemp(char *tmpl, int flags)
{
	return is_pool_template(tmpl) ? make_temp(tmpl, 0, flags, 0) : REAL(mkostemp)(tmpl, flags);
}

SH_EXPORT int mkstemps(char *tmpl, int suffixlen)
{
	return is_pool_template(tmpl) ? make_temp(tmpl, suffixlen, 0, 0)
				      : REAL(mkstemps)(tmpl, suffixlen);
}

SH_EXPORT int mkostemps(char *tmpl, int suffixlen, int flags)
{
	return is_pool_template(tmpl) ? make_temp(tmpl, suffixlen, flags, 0)
				      : REAL(mkostemps)(tmpl, suffixlen, flags);
}

SH_EXPORT char *mkdtemp(char *tmpl)
{
	if (!is_pool_template(tmpl))
		return REAL(mkdtemp)(tmpl);
	return make_temp(tmpl, 0, 0, 1) == 0 ? tmpl : NULL;
}

/* ---- extended attributes ------------------------------------------------------------ */

SH_EXPORT ssize_t getxattr(const char *path, const char *name, void *value, size_t size)
{
	SH_PATH_OP(ssize_t, AT_FDCWD, path, 0, REAL(getxattr)(path, name, value, size),
		   ferrite_getxattrat(FS, DFD, TP, 0, name, value, size));
}

SH_EXPORT ssize_t lgetxattr(const char *path, const char *name, void *value, size_t size)
{
	SH_PATH_OP(ssize_t, AT_FDCWD, path, 0, REAL(lgetxattr)(path, name, value, size),
		   ferrite_getxattrat(FS, DFD, TP, AT_SYMLINK_NOFOLLOW, name, value, size));
}

SH_EXPORT ssize_t fgetxattr(int fd, const char *name, void *value, size_t size)
{
	SH_FD_OP(ssize_t, fd, REAL(fgetxattr)(fd, name, value, size),
		 ferrite_fgetxattr(FS, FFD, name, value, size));
}

SH_EXPORT int setxattr(const char *path, const char *name, const void *value, size_t size,
		       int flags)
{
	SH_PATH_OP(int, AT_FDCWD, path, 0, REAL(setxattr)(path, name, value, size, flags),
		   ferrite_setxattrat(FS, DFD, TP, 0, name, value, size, flags));
}

SH_EXPORT int lsetxattr(const char *path, const char *name, const void *value, size_t size,
			int flags)
{
	SH_PATH_OP(int, AT_FDCWD, path, 0, REAL(lsetxattr)(path, name, value, size, flags),
		   ferrite_setxattrat(FS, DFD, TP, AT_SYMLINK_NOFOLLOW, name, value, size, flags));
}

SH_EXPORT int fsetxattr(int fd, const char *name, const void *value, size_t size, int flags)
{
	SH_FD_OP(int, fd, REAL(fsetxattr)(fd, name, value, size, flags),
		 ferrite_fsetxattr(FS, FFD, name, value, size, flags));
}

SH_EXPORT ssize_t listxattr(const char *path, char *list, size_t size)
{
	SH_PATH_OP(ssize_t, AT_FDCWD, path, 0, REAL(listxattr)(path, list, size),
		   ferrite_listxattrat(FS, DFD, TP, 0, list, size));
}

SH_EXPORT ssize_t llistxattr(const char *path, char *list, size_t size)
{
	SH_PATH_OP(ssize_t, AT_FDCWD, path, 0, REAL(llistxattr)(path, list, size),
		   ferrite_listxattrat(FS, DFD, TP, AT_SYMLINK_NOFOLLOW, list, size));
}

SH_EXPORT ssize_t flistxattr(int fd, char *list, size_t size)
{
	SH_FD_OP(ssize_t, fd, REAL(flistxattr)(fd, list, size),
		 ferrite_flistxattr(FS, FFD, list, size));
}

SH_EXPORT int removexattr(const char *path, const char *name)
{
	SH_PATH_OP(int, AT_FDCWD, path, 0, REAL(removexattr)(path, name),
		   ferrite_removexattrat(FS, DFD, TP, 0, name));
}

SH_EXPORT int lremovexattr(const char *path, const char *name)
{
	SH_PATH_OP(int, AT_FDCWD, path, 0, REAL(lremovexattr)(path, name),
		   ferrite_removexattrat(FS, DFD, TP, AT_SYMLINK_NOFOLLOW, name));
}

SH_EXPORT int fremovexattr(int fd, const char *name)
{
	SH_FD_OP(int, fd, REAL(fremovexattr)(fd, name), ferrite_fremovexattr(FS, FFD, name));
}
