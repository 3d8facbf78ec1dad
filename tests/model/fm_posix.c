/*
 * fm_posix.c -- the reference backend: the Linux kernel on a tmpfs directory.
 *
 * Every path is resolved with openat2(RESOLVE_IN_ROOT) relative to the test's
 * root directory, so "/", "..", and absolute symlink targets stay inside it
 * exactly as Ferrite resolves them inside its pool. Operations that act on the
 * final name (mkdir, unlink, rename, link, symlink) resolve the parent that way
 * and call the *at syscall on the last component; operations that follow the
 * final symlink open an O_PATH descriptor with RESOLVE_IN_ROOT and act on it.
 * Thus the kernel's own semantics, not a re-implementation, are the model.
 *
 * inject_bug (harness self-test only) plants a known bug so a test can show
 * that the comparator notices it: 1 = some large pwrites lose their last
 * byte, 2 = RENAME_NOREPLACE is ignored, 3 = some large pwrites write their
 * second half and then kill the process before the first: a crash inside a
 * non-atomic overwrite, legal in sync mode and a violation in strict mode
 * (kill_test's self-tests; it would kill model_test).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "fm.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <signal.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/xattr.h>
#include <unistd.h>

struct pctx {
	int rootfd;
	int bug;
	char root[PATH_MAX];
};

static inline long neg(long x)
{
	return x < 0 ? -errno : x;
}
#define NEG(x) neg((long)(x))

static int rslv(struct pctx *c, const char *path, int flags)
{
	struct open_how how;
	memset(&how, 0, sizeof how);
	how.flags = (uint64_t)(flags | O_CLOEXEC);
	how.resolve = RESOLVE_IN_ROOT;
	for (;;) {
		long fd = syscall(SYS_openat2, c->rootfd, path, &how, sizeof how);
		if (fd >= 0)
			return (int)fd;
		if (errno == EAGAIN)
			continue;
		return -errno;
	}
}

/* Resolves the parent of path; *base points into path at the last component. */
static int parent(struct pctx *c, const char *path, const char **base)
{
	char dir[FM_PATH + 2];
	const char *slash = strrchr(path, '/');
	if (!slash) {
		*base = path;
		return rslv(c, "/", O_PATH | O_DIRECTORY);
	}
	size_t n = (size_t)(slash - path) + 1;
	if (n >= sizeof dir)
		return -ENAMETOOLONG;
	memcpy(dir, path, n);
	dir[n] = 0;
	*base = slash + 1;
	if (**base == 0)
		return -EINVAL; /* trailing slash: not generated */
	return rslv(c, dir, O_PATH | O_DIRECTORY);
}

static void procpath(char *buf, size_t n, int fd)
{
	snprintf(buf, n, "/proc/self/fd/%d", fd);
}

static int p_open(void *cv, const char *p, int flags, mode_t mode)
{
	struct pctx *c = cv;
	struct open_how how;
	memset(&how, 0, sizeof how);
	how.flags = (uint64_t)(flags | O_CLOEXEC);
	how.mode = (flags & O_CREAT) ? (mode & 07777) : 0;
	how.resolve = RESOLVE_IN_ROOT;
	for (;;) {
		long fd = syscall(SYS_openat2, c->rootfd, p, &how, sizeof how);
		if (fd >= 0)
			return (int)fd;
		if (errno == EAGAIN)
			continue;
		return -errno;
	}
}

static int p_close(void *c, int fd)
{
	(void)c;
	return NEG(close(fd));
}

static int p_dup(void *c, int fd)
{
	(void)c;
	return NEG(fcntl(fd, F_DUPFD_CLOEXEC, 3));
}

static ssize_t p_read(void *c, int fd, void *b, size_t n)
{
	(void)c;
	return NEG(read(fd, b, n));
}

static ssize_t p_write(void *c, int fd, const void *b, size_t n)
{
	(void)c;
	return NEG(write(fd, b, n));
}

static ssize_t p_pread(void *c, int fd, void *b, size_t n, off_t o)
{
	(void)c;
	return NEG(pread(fd, b, n, o));
}

static ssize_t p_pwrite(void *cv, int fd, const void *b, size_t n, off_t o)
{
	struct pctx *c = cv;
	if (c->bug == 1 && n > 3000 && o % 7 == 3) {
		ssize_t r = pwrite(fd, b, n - 1, o);
		return r < 0 ? -errno : (ssize_t)n;
	}
	if (c->bug == 3 && n > 3000 && o % 5 == 1 && !(fcntl(fd, F_GETFL) & O_APPEND)) {
		size_t h = n / 2;
		if (pwrite(fd, (const char *)b + h, n - h, o + (off_t)h) < 0)
			return -errno;
		raise(SIGKILL);
	}
	return NEG(pwrite(fd, b, n, o));
}

static ssize_t p_readv(void *c, int fd, const struct iovec *iov, int cnt)
{
	(void)c;
	return NEG(readv(fd, iov, cnt));
}

static ssize_t p_writev(void *c, int fd, const struct iovec *iov, int cnt)
{
	(void)c;
	return NEG(writev(fd, iov, cnt));
}

static ssize_t p_preadv(void *c, int fd, const struct iovec *iov, int cnt, off_t o)
{
	(void)c;
	return NEG(preadv(fd, iov, cnt, o));
}

static ssize_t p_pwritev(void *c, int fd, const struct iovec *iov, int cnt, off_t o)
{
	(void)c;
	return NEG(pwritev(fd, iov, cnt, o));
}

static off_t p_lseek(void *c, int fd, off_t o, int whence)
{
	(void)c;
	return NEG(lseek(fd, o, whence));
}

static int p_ftruncate(void *c, int fd, off_t len)
{
	(void)c;
	return NEG(ftruncate(fd, len));
}

/* Argument checks the kernel makes before it resolves any path. */
static int p_truncate(void *cv, const char *p, off_t len)
{
	char pp[64];
	if (len < 0)
		return -EINVAL;
	int fd = rslv(cv, p, O_PATH);
	if (fd < 0)
		return fd;
	procpath(pp, sizeof pp, fd);
	int r = NEG(truncate(pp, len));
	close(fd);
	return r;
}

static int p_fallocate(void *c, int fd, int mode, off_t o, off_t len)
{
	(void)c;
	return NEG(fallocate(fd, mode, o, len));
}

static int p_fsync(void *c, int fd)
{
	(void)c;
	return NEG(fsync(fd));
}

static int p_fdatasync(void *c, int fd)
{
	(void)c;
	return NEG(fdatasync(fd));
}

static int p_stat_common(void *cv, const char *p, struct stat *st, int extra)
{
	int fd = rslv(cv, p, O_PATH | extra);
	if (fd < 0)
		return fd;
	int r = NEG(fstat(fd, st));
	close(fd);
	return r;
}

static int p_stat(void *c, const char *p, struct stat *st)
{
	return p_stat_common(c, p, st, 0);
}

static int p_lstat(void *c, const char *p, struct stat *st)
{
	return p_stat_common(c, p, st, O_NOFOLLOW);
}

static int p_fstat(void *c, int fd, struct stat *st)
{
	(void)c;
	return NEG(fstat(fd, st));
}

static int p_chmod(void *cv, const char *p, mode_t m)
{
	char pp[64];
	int fd = rslv(cv, p, O_PATH);
	if (fd < 0)
		return fd;
	procpath(pp, sizeof pp, fd);
	int r = NEG(chmod(pp, m));
	close(fd);
	return r;
}

/* xattrs by the descriptor's /proc path: a magic link resolves to the file
 * itself, so a final symlink is followed only if the walk followed it. */
static int p_setxattr(void *cv, const char *p, const char *name, const void *v, size_t n, int flags)
{
	char pp[64];
	if (n > 65536)
		return -E2BIG; /* Linux copies the value in before it walks the path */
	int fd = rslv(cv, p, O_PATH);
	if (fd < 0)
		return fd;
	procpath(pp, sizeof pp, fd);
	int r = NEG(setxattr(pp, name, v, n, flags));
	close(fd);
	return r;
}

static int p_removexattr(void *cv, const char *p, const char *name)
{
	char pp[64];
	int fd = rslv(cv, p, O_PATH);
	if (fd < 0)
		return fd;
	procpath(pp, sizeof pp, fd);
	int r = NEG(removexattr(pp, name));
	close(fd);
	return r;
}

static ssize_t p_lgetxattr(void *cv, const char *p, const char *name, void *v, size_t n)
{
	char pp[64];
	int fd = rslv(cv, p, O_PATH | O_NOFOLLOW);
	if (fd < 0)
		return fd;
	procpath(pp, sizeof pp, fd);
	ssize_t r = NEG(getxattr(pp, name, v, n));
	close(fd);
	return r;
}

static ssize_t p_llistxattr(void *cv, const char *p, char *list, size_t n)
{
	char pp[64];
	int fd = rslv(cv, p, O_PATH | O_NOFOLLOW);
	if (fd < 0)
		return fd;
	procpath(pp, sizeof pp, fd);
	ssize_t r = NEG(listxattr(pp, list, n));
	close(fd);
	return r;
}

static int p_fchmod(void *c, int fd, mode_t m)
{
	(void)c;
	return NEG(fchmod(fd, m));
}

static int p_chown_common(void *cv, const char *p, uid_t u, gid_t g, int extra)
{
	int fd = rslv(cv, p, O_PATH | extra);
	if (fd < 0)
		return fd;
	int r = NEG(fchownat(fd, "", u, g, AT_EMPTY_PATH));
	close(fd);
	return r;
}

static int p_chown(void *c, const char *p, uid_t u, gid_t g)
{
	return p_chown_common(c, p, u, g, 0);
}

static int p_lchown(void *c, const char *p, uid_t u, gid_t g)
{
	return p_chown_common(c, p, u, g, O_NOFOLLOW);
}

static int p_fchown(void *c, int fd, uid_t u, gid_t g)
{
	(void)c;
	return NEG(fchown(fd, u, g));
}

static int p_utimens(void *cv, const char *p, const struct timespec *ts, int flags)
{
	int fd = rslv(cv, p, O_PATH | ((flags & AT_SYMLINK_NOFOLLOW) ? O_NOFOLLOW : 0));
	if (fd < 0)
		return fd;
	int r = NEG(utimensat(fd, "", ts, AT_EMPTY_PATH));
	close(fd);
	return r;
}

static int p_futimens(void *c, int fd, const struct timespec *ts)
{
	(void)c;
	return NEG(futimens(fd, ts));
}

static int p_access(void *cv, const char *p, int mode)
{
	int fd = rslv(cv, p, O_PATH);
	if (fd < 0)
		return fd;
	int r = (int)NEG(syscall(SYS_faccessat2, fd, "", mode, AT_EMPTY_PATH | AT_EACCESS));
	close(fd);
	return r;
}

static int p_mkdir(void *cv, const char *p, mode_t m)
{
	const char *b;
	int pfd = parent(cv, p, &b);
	if (pfd < 0)
		return pfd;
	int r = NEG(mkdirat(pfd, b, m));
	close(pfd);
	return r;
}

static int p_rmdir(void *cv, const char *p)
{
	const char *b;
	int pfd = parent(cv, p, &b);
	if (pfd < 0)
		return pfd;
	int r = NEG(unlinkat(pfd, b, AT_REMOVEDIR));
	close(pfd);
	return r;
}

static int p_unlink(void *cv, const char *p)
{
	const char *b;
	int pfd = parent(cv, p, &b);
	if (pfd < 0)
		return pfd;
	int r = NEG(unlinkat(pfd, b, 0));
	close(pfd);
	return r;
}

static int p_rename(void *cv, const char *a, const char *bp, unsigned flags)
{
	struct pctx *c = cv;
	const char *ba, *bb;
	if ((flags & RENAME_NOREPLACE) && (flags & RENAME_EXCHANGE))
		return -EINVAL;
	int fa = parent(cv, a, &ba);
	if (fa < 0)
		return fa;
	int fb = parent(cv, bp, &bb);
	if (fb < 0) {
		close(fa);
		return fb;
	}
	if (c->bug == 2 && flags == RENAME_NOREPLACE)
		flags = 0;
	int r = (int)NEG(syscall(SYS_renameat2, fa, ba, fb, bb, flags));
	close(fa);
	close(fb);
	return r;
}

static int p_link(void *cv, const char *a, const char *bp)
{
	const char *ba, *bb;
	struct stat st;
	int fa = parent(cv, a, &ba);
	if (fa < 0)
		return fa;
	if (fstatat(fa, ba, &st, AT_SYMLINK_NOFOLLOW) < 0) { /* link(2) looks old up first */
		int e = -errno;
		close(fa);
		return e;
	}
	int fb = parent(cv, bp, &bb);
	if (fb < 0) {
		close(fa);
		return fb;
	}
	int r = NEG(linkat(fa, ba, fb, bb, 0));
	close(fa);
	close(fb);
	return r;
}

static int p_symlink(void *cv, const char *target, const char *p)
{
	const char *b;
	if (!target[0])
		return -ENOENT;
	int pfd = parent(cv, p, &b);
	if (pfd < 0)
		return pfd;
	int r = NEG(symlinkat(target, pfd, b));
	close(pfd);
	return r;
}

static ssize_t p_readlink(void *cv, const char *p, char *buf, size_t n)
{
	if ((ssize_t)n <= 0)
		return -EINVAL;
	int fd = rslv(cv, p, O_PATH | O_NOFOLLOW);
	if (fd < 0)
		return fd;
	ssize_t r = NEG(readlinkat(fd, "", buf, n));
	struct stat st;
	if (r == -ENOENT && fstat(fd, &st) == 0 && !S_ISLNK(st.st_mode))
		r = -EINVAL; /* what readlink(2) says for a non-symlink */
	close(fd);
	return r;
}

struct pdir {
	DIR *d;
};

static int p_dopen(void *cv, const char *p, void **h)
{
	int fd = rslv(cv, p, O_RDONLY | O_DIRECTORY);
	if (fd < 0)
		return fd;
	DIR *d = fdopendir(fd);
	if (!d) {
		int e = -errno;
		close(fd);
		return e;
	}
	struct pdir *pd = malloc(sizeof *pd);
	pd->d = d;
	*h = pd;
	return 0;
}

static int p_dread(void *h, struct fm_dent *e)
{
	struct pdir *pd = h;
	errno = 0;
	struct dirent *de = readdir(pd->d);
	if (!de)
		return errno ? -errno : 0;
	snprintf(e->name, sizeof e->name, "%s", de->d_name);
	e->type = de->d_type;
	e->ino = de->d_ino;
	e->off = de->d_off;
	return 1;
}

static int64_t p_dtell(void *h)
{
	struct pdir *pd = h;
	long r = telldir(pd->d);
	return r < 0 ? -errno : r;
}

static int p_dseek(void *h, int64_t cookie)
{
	struct pdir *pd = h;
	seekdir(pd->d, (long)cookie);
	return 0;
}

static int p_drewind(void *h)
{
	struct pdir *pd = h;
	rewinddir(pd->d);
	return 0;
}

static int p_dclose(void *h)
{
	struct pdir *pd = h;
	int r = NEG(closedir(pd->d));
	free(pd);
	return r;
}

static int p_dsnap(void *h, struct fm_dent **out, int *n)
{
	struct pdir *pd = h;
	*out = NULL;
	*n = 0;
	struct stat st;
	if (fstat(dirfd(pd->d), &st) < 0 || st.st_nlink == 0)
		return -ENOENT; /* removed (glibc reports a dead directory as empty) */
	int fd = openat(dirfd(pd->d), ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	DIR *d = fdopendir(fd);
	if (!d) {
		close(fd);
		return -ENOMEM;
	}
	int cap = 0;
	struct dirent *de;
	errno = 0;
	while ((de = readdir(d))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		if (*n == cap) {
			cap = cap ? cap * 2 : 16;
			*out = realloc(*out, (size_t)cap * sizeof **out);
		}
		struct fm_dent *e = &(*out)[(*n)++];
		snprintf(e->name, sizeof e->name, "%s", de->d_name);
		e->type = de->d_type;
		e->ino = de->d_ino;
		e->off = de->d_off;
	}
	int r = errno ? -errno : 0;
	closedir(d);
	return r;
}

struct fm_backend *fm_posix_new(const char *root, int inject_bug)
{
	struct pctx *c = calloc(1, sizeof *c);
	snprintf(c->root, sizeof c->root, "%s", root);
	c->rootfd = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (c->rootfd < 0) {
		fprintf(stderr, "cannot open %s: %s\n", root, strerror(errno));
		free(c);
		return NULL;
	}
	c->bug = inject_bug;
	struct fm_backend *be = calloc(1, sizeof *be);
	be->name = inject_bug ? "posix-buggy" : "posix";
	be->ctx = c;
	be->open = p_open;
	be->close = p_close;
	be->dup = p_dup;
	be->read = p_read;
	be->write = p_write;
	be->pread = p_pread;
	be->pwrite = p_pwrite;
	be->readv = p_readv;
	be->writev = p_writev;
	be->preadv = p_preadv;
	be->pwritev = p_pwritev;
	be->lseek = p_lseek;
	be->ftruncate = p_ftruncate;
	be->truncate = p_truncate;
	be->fallocate = p_fallocate;
	be->fsync = p_fsync;
	be->fdatasync = p_fdatasync;
	be->stat = p_stat;
	be->lstat = p_lstat;
	be->fstat = p_fstat;
	be->chmod = p_chmod;
	be->setxattr = p_setxattr;
	be->removexattr = p_removexattr;
	be->lgetxattr = p_lgetxattr;
	be->llistxattr = p_llistxattr;
	be->fchmod = p_fchmod;
	be->chown = p_chown;
	be->lchown = p_lchown;
	be->fchown = p_fchown;
	be->utimens = p_utimens;
	be->futimens = p_futimens;
	be->access = p_access;
	be->mkdir = p_mkdir;
	be->rmdir = p_rmdir;
	be->unlink = p_unlink;
	be->rename = p_rename;
	be->link = p_link;
	be->symlink = p_symlink;
	be->readlink = p_readlink;
	be->dopen = p_dopen;
	be->dread = p_dread;
	be->dtell = p_dtell;
	be->dseek = p_dseek;
	be->drewind = p_drewind;
	be->dclose = p_dclose;
	be->dsnap = p_dsnap;
	be->lasterr = NULL;
	be->clearerr = NULL;
	return be;
}

void fm_posix_free(struct fm_backend *be)
{
	if (!be)
		return;
	struct pctx *c = be->ctx;
	close(c->rootfd);
	free(c);
	free(be);
}

/* ---- plain mode: the same operations with ordinary path syscalls ----------
 * Used only to validate the RESOLVE_IN_ROOT emulation above: on a namespace
 * without ".." and absolute symlinks both must give identical results. */

static void full(struct pctx *c, const char *p, char *out, size_t n)
{
	if (strspn(p, "/") == strlen(p) && p[0])
		p = ""; /* "/" is the root itself, not "<root>/" */
	snprintf(out, n, "%s%s%s", c->root, p[0] == '/' || !p[0] ? "" : "/", p);
}

#define FULL(var, p)                                                                               \
	char var[PATH_MAX + FM_PATH];                                                              \
	full(cv, p, var, sizeof var)

static int k_open(void *cv, const char *p, int flags, mode_t mode)
{
	FULL(f, p);
	return (int)NEG(open(f, flags | O_CLOEXEC, mode));
}

static int k_truncate(void *cv, const char *p, off_t len)
{
	FULL(f, p);
	return (int)NEG(truncate(f, len));
}

static int k_stat(void *cv, const char *p, struct stat *st)
{
	FULL(f, p);
	return (int)NEG(stat(f, st));
}

static int k_lstat(void *cv, const char *p, struct stat *st)
{
	FULL(f, p);
	return (int)NEG(lstat(f, st));
}

static int k_chmod(void *cv, const char *p, mode_t m)
{
	FULL(f, p);
	return (int)NEG(chmod(f, m));
}

static int k_setxattr(void *cv, const char *p, const char *name, const void *v, size_t n, int flags)
{
	FULL(f, p);
	return (int)NEG(setxattr(f, name, v, n, flags));
}

static int k_removexattr(void *cv, const char *p, const char *name)
{
	FULL(f, p);
	return (int)NEG(removexattr(f, name));
}

static ssize_t k_lgetxattr(void *cv, const char *p, const char *name, void *v, size_t n)
{
	FULL(f, p);
	return NEG(lgetxattr(f, name, v, n));
}

static ssize_t k_llistxattr(void *cv, const char *p, char *list, size_t n)
{
	FULL(f, p);
	return NEG(llistxattr(f, list, n));
}

static int k_chown(void *cv, const char *p, uid_t u, gid_t g)
{
	FULL(f, p);
	return (int)NEG(chown(f, u, g));
}

static int k_lchown(void *cv, const char *p, uid_t u, gid_t g)
{
	FULL(f, p);
	return (int)NEG(lchown(f, u, g));
}

static int k_utimens(void *cv, const char *p, const struct timespec *ts, int flags)
{
	FULL(f, p);
	return (int)NEG(utimensat(AT_FDCWD, f, ts, flags));
}

static int k_access(void *cv, const char *p, int mode)
{
	FULL(f, p);
	return (int)NEG(faccessat(AT_FDCWD, f, mode, AT_EACCESS));
}

static int k_mkdir(void *cv, const char *p, mode_t m)
{
	FULL(f, p);
	return (int)NEG(mkdir(f, m));
}

static int k_rmdir(void *cv, const char *p)
{
	FULL(f, p);
	return (int)NEG(rmdir(f));
}

static int k_unlink(void *cv, const char *p)
{
	FULL(f, p);
	return (int)NEG(unlink(f));
}

static int k_rename(void *cv, const char *a, const char *b, unsigned flags)
{
	FULL(fa, a);
	FULL(fb, b);
	return (int)NEG(syscall(SYS_renameat2, AT_FDCWD, fa, AT_FDCWD, fb, flags));
}

static int k_link(void *cv, const char *a, const char *b)
{
	FULL(fa, a);
	FULL(fb, b);
	return (int)NEG(link(fa, fb));
}

static int k_symlink(void *cv, const char *t, const char *p)
{
	FULL(f, p);
	return (int)NEG(symlink(t, f));
}

static ssize_t k_readlink(void *cv, const char *p, char *buf, size_t n)
{
	FULL(f, p);
	return NEG(readlink(f, buf, n));
}

static int k_dopen(void *cv, const char *p, void **h)
{
	FULL(f, p);
	DIR *d = opendir(f);
	if (!d)
		return -errno;
	struct pdir *pd = malloc(sizeof *pd);
	pd->d = d;
	*h = pd;
	return 0;
}

struct fm_backend *fm_posix_plain_new(const char *root)
{
	struct fm_backend *be = fm_posix_new(root, 0);
	if (!be)
		return NULL;
	be->name = "kernel-plain";
	be->open = k_open;
	be->truncate = k_truncate;
	be->stat = k_stat;
	be->lstat = k_lstat;
	be->chmod = k_chmod;
	be->setxattr = k_setxattr;
	be->removexattr = k_removexattr;
	be->lgetxattr = k_lgetxattr;
	be->llistxattr = k_llistxattr;
	be->chown = k_chown;
	be->lchown = k_lchown;
	be->utimens = k_utimens;
	be->access = k_access;
	be->mkdir = k_mkdir;
	be->rmdir = k_rmdir;
	be->unlink = k_unlink;
	be->rename = k_rename;
	be->link = k_link;
	be->symlink = k_symlink;
	be->readlink = k_readlink;
	be->dopen = k_dopen;
	return be;
}
