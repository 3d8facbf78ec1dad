/*
 * stdio.c -- FILE streams on pool files: fopen, fdopen and freopen build
 * them with fopencookie over the shim's own read/write/lseek/close, and
 * fileno reports the descriptor behind them. dprintf/vdprintf format into
 * memory and write through the shim. The standard streams follow
 * descriptors 0, 1 and 2 onto pool files.
 *
 * glibc's fopen opens through internal calls the shim cannot see, hence
 * cookie streams; glibc gives such streams no descriptor (fileno = -1), hence
 * the registry of cookie streams and their descriptors.
 *
 * Standard streams: glibc's stdin/stdout/stderr read and write descriptors
 * 0, 1 and 2 with internal calls, which would reach the placeholder (S1)
 * once a pool file is dup2'ed (or opened, F_DUPFD'ed, restored after exec)
 * there. So while descriptor n (0-2) names a pool file, the program's
 * variable (stdin/stdout/stderr, which glibc lets programs assign and reads
 * itself) points at a std cookie stream over that file, and the program's
 * own stream is kept aside; when n names a kernel file again or is closed,
 * the std cookie is flushed and freed and the variable restored. Output the
 * program's stream still holds when a pool file is dup2'ed over n is flushed
 * to the old target first (flush before the swap); output a std cookie
 * holds goes to its pool file when n is replaced. freopen of a pool path
 * onto a standard stream is open + dup3 onto n + close.
 *
 * Invariants: T1 a cookie stream owns its descriptor: fclose closes it,
 *               except a std cookie: it holds a reference on the file (not
 *               a descriptor), and fclose by the program closes n, as
 *               fclose(stdout) closes 1;
 *             T2 every cookie stream is in the registry from its creation to
 *               its close function; fileno of a std cookie is n;
 *             T3 std[n].cookie != NULL iff the program's variable n was set
 *               to it; then std[n].orig is the stream the variable held
 *               before, and n named the cookie's file when it was set.
 * Limits: freopen of a pool path onto a stream libc opened other than the
 *   standard ones cannot redirect libc's internal writes: it fails with
 *   EOPNOTSUPP. A copy of the stream pointer a program keeps from before a
 *   swap (FILE *out = stdout) still names the stream aside; one kept from
 *   after it dangles once the std cookie is freed (as after fclose).
 * Locking: reg_lock guards the registry; std_lock the std slots and the
 *   variables' swaps; neither is held across a flush or a close.
 */
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdio_ext.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <wchar.h>

#include "preload/shim.h"

struct cookie {
	int fd; /* T1; n for a std cookie */
	FILE *fp;
	struct cookie *next;
	int std;	    /* -1, or n (0-2) for a std cookie */
	struct sh_file *sf; /* std cookie: the file (a reference) */
	int disposing;	    /* std cookie freed by the shim: no close */
};

static pthread_mutex_t reg_lock = PTHREAD_MUTEX_INITIALIZER;
static struct cookie *reg_head;
static int reg_count;

static struct cookie *reg_find(FILE *fp)
{
	if (!__atomic_load_n(&reg_count, __ATOMIC_RELAXED))
		return NULL;
	pthread_mutex_lock(&reg_lock);
	struct cookie *c = reg_head;
	while (c && c->fp != fp)
		c = c->next;
	pthread_mutex_unlock(&reg_lock);
	return c;
}

static void reg_add(struct cookie *c)
{
	pthread_mutex_lock(&reg_lock);
	c->next = reg_head;
	reg_head = c;
	reg_count++;
	pthread_mutex_unlock(&reg_lock);
}

static void reg_remove(struct cookie *c)
{
	pthread_mutex_lock(&reg_lock);
	for (struct cookie **pp = &reg_head; *pp; pp = &(*pp)->next)
		if (*pp == c) {
			*pp = c->next;
			reg_count--;
			break;
		}
	pthread_mutex_unlock(&reg_lock);
}

/* The standard streams' slots (T3). */
static pthread_mutex_t std_lock = PTHREAD_MUTEX_INITIALIZER;
static struct {
	struct cookie *cookie;
	FILE *orig;
} std[3];

static FILE **std_var(int n)
{
	return n == 0 ? &stdin : n == 1 ? &stdout : &stderr;
}

static int std_close(struct cookie *c);

static ssize_t ck_read(void *ck, char *buf, size_t n)
{
	struct cookie *c = ck;
	return c->sf ? sh_f_read(c->sf, buf, n) : read(c->fd, buf, n);
}

static ssize_t ck_write(void *ck, const char *buf, size_t n)
{
	struct cookie *c = ck;
	ssize_t w = c->sf ? sh_f_write(c->sf, buf, n) : write(c->fd, buf, n);
	return w < 0 ? 0 : w; /* fopencookie: 0 reports an error */
}

static int ck_seek(void *ck, off64_t *pos, int whence)
{
	struct cookie *c = ck;
	off_t r = c->sf ? sh_f_lseek(c->sf, *pos, whence) : lseek(c->fd, *pos, whence);
	if (r < 0)
		return -1;
	*pos = r;
	return 0;
}

static int ck_close(void *ck)
{
	struct cookie *c = ck;
	reg_remove(c);
	if (c->std >= 0)
		return std_close(c);
	int rc = close(c->fd);
	free(c);
	return rc;
}

static const cookie_io_functions_t ck_funcs = {ck_read, ck_write, ck_seek, ck_close};

/* Open flags of an fopen mode string, or -1. */
static int mode_flags(const char *mode)
{
	int fl;
	switch (mode[0]) {
	case 'r':
		fl = O_RDONLY;
		break;
	case 'w':
		fl = O_WRONLY | O_CREAT | O_TRUNC;
		break;
	case 'a':
		fl = O_WRONLY | O_CREAT | O_APPEND;
		break;
	default:
		return -1;
	}
	for (const char *p = mode + 1; *p && *p != ','; p++) {
		if (*p == '+')
			fl = (fl & ~O_ACCMODE) | O_RDWR;
		else if (*p == 'x')
			fl |= O_EXCL;
		else if (*p == 'e')
			fl |= O_CLOEXEC;
	}
	return fl;
}

/* A cookie stream over fd (T1, T2); fd is closed on failure if asked. */
static FILE *wrap(int fd, const char *mode, int close_on_fail)
{
	struct cookie *c = calloc(1, sizeof(*c));
	char m[8];
	size_t i = 0;
	for (const char *p = mode; *p && *p != ',' && i < sizeof(m) - 1; p++)
		if (*p == 'r' || *p == 'w' || *p == 'a' || *p == '+')
			m[i++] = *p;
	m[i] = 0;
	FILE *fp = c ? fopencookie(c, m, ck_funcs) : NULL;
	if (!fp) {
		free(c);
		if (close_on_fail)
			close(fd);
		errno = ENOMEM;
		return NULL;
	}
	c->fd = fd;
	c->fp = fp;
	c->std = -1;
	reg_add(c);
	return fp;
}

/* ---- standard streams ---------------------------------------------------------- */

/* glibc's flag of an unbuffered stream (libio.h, part of its ABI since 2.1). */
#define SH_IO_UNBUFFERED 0x0002

/* A std cookie for descriptor n over f (takes over the reference), buffered
 * like the stream it stands in for when that was set (stderr unbuffered,
 * line buffering on a terminal), else fully, as glibc buffers a file. */
static struct cookie *std_cookie(int n, struct sh_file *f, FILE *base)
{
	struct cookie *c = calloc(1, sizeof(*c));
	int acc = f->oflags & O_PATH ? O_RDONLY : f->oflags & O_ACCMODE;
	const char *mode = acc == O_RDONLY ? "r" : acc == O_WRONLY ? "w" : "r+";
	FILE *fp = c ? fopencookie(c, mode, ck_funcs) : NULL;
	if (!fp) {
		free(c);
		return NULL;
	}
	c->fd = n;
	c->fp = fp;
	c->std = n;
	c->sf = f;
	if (base && (base->_flags & SH_IO_UNBUFFERED))
		setvbuf(fp, NULL, _IONBF, 0);
	else if (base && __flbf(base))
		setvbuf(fp, NULL, _IOLBF, BUFSIZ);
	reg_add(c);
	return c;
}

/* Output base still holds, although n no longer names its target (a pool
 * file landed on a closed n: open, dup, F_DUPFD, exec): into the new stream,
 * where glibc would have written it too. */
static void std_move_pending(FILE *base, FILE *to)
{
	size_t n = base && __fwriting(base) && fwide(base, 0) <= 0 ? __fpending(base) : 0;
	if (n && base->_IO_write_base) {
		fwrite(base->_IO_write_base, 1, n, to);
		__fpurge(base);
	}
}

/* Frees a std cookie the shim took out of its slot: its output goes to its
 * file, its input position is given back to the file, no descriptor is
 * closed (T1). */
static void std_dispose(struct cookie *c)
{
	c->disposing = 1;
	fflush(c->fp); /* fclose alone gives no read-ahead back */
	fclose(c->fp);
}

/* Closing a std cookie (ck_close): freed by the shim, or fclose'd by the
 * program, which closes n if n still names the file (T1). */
static int std_close(struct cookie *c)
{
	int n = c->std, rc = 0;
	if (!c->disposing) {
		pthread_mutex_lock(&std_lock);
		if (std[n].cookie == c) {
			*std_var(n) = std[n].orig; /* never a dangling stdout */
			std[n].cookie = NULL;
		}
		pthread_mutex_unlock(&std_lock);
		struct sh_file *cur = sh_file_get(n);
		if (cur) {
			sh_file_put(cur);
			if (cur == c->sf)
				rc = close(n);
		}
	}
	sh_file_put(c->sf);
	free(c);
	return rc;
}

void sh_std_changed(int n)
{
	if (sh_depth || n < 0 || n > 2)
		return;
	struct sh_file *f = sh_file_get(n); /* the std cookie's reference */
	FILE **var = std_var(n);
	pthread_mutex_lock(&std_lock);
	struct cookie *old = std[n].cookie, *nc = NULL;
	if ((!old && !f) || (old && old->sf == f)) { /* no pool file, or the same one */
		pthread_mutex_unlock(&std_lock);
		if (f)
			sh_file_put(f);
		return;
	}
	FILE *base = old ? std[n].orig : *var;
	if (f && (nc = std_cookie(n, f, base))) {
		std[n].cookie = nc;
		std[n].orig = base;
		*var = nc->fp;
	} else {
		std[n].cookie = NULL;
		*var = base;
	}
	pthread_mutex_unlock(&std_lock);
	if (f && !nc) {
		sh_file_put(f);
		fprintf(stderr, "ferrite: out of memory for the stream of descriptor %d\n", n);
	}
	if (nc && !old && n)
		std_move_pending(base, nc->fp);
	if (old)
		std_dispose(old);
}

void sh_std_flush(int n)
{
	if (sh_depth || n < 1 || n > 2)
		return; /* stdin: its read-ahead stays with it (no seek on the new n) */
	FILE *fp = __atomic_load_n(std_var(n), __ATOMIC_RELAXED);
	if (fp && __fwriting(fp))
		fflush(fp);
}

/* The standard slot a stream stands for: the variable's current stream when
 * it reads or writes n (a std cookie, or libc's own on descriptor n), or the
 * stream put aside for a std cookie; else -1. */
static int std_slot(FILE *fp)
{
	struct cookie *c = reg_find(fp);
	if (c)
		return c->std;
	int n = -1;
	pthread_mutex_lock(&std_lock);
	for (int i = 0; i < 3 && n < 0; i++)
		if ((fp == *std_var(i) && REAL(fileno)(fp) == i) ||
		    (std[i].cookie && fp == std[i].orig))
			n = i;
	pthread_mutex_unlock(&std_lock);
	return n;
}

/* freopen onto standard stream n: 1 and *out set when done here, 0 when
 * libc's freopen is to do it (a kernel path and no std cookie). */
static int std_freopen(int n, const char *path, const char *mode, int is64, FILE **out)
{
	pthread_mutex_lock(&std_lock);
	struct cookie *c = std[n].cookie;
	FILE *orig = std[n].orig;
	pthread_mutex_unlock(&std_lock);
	if (!path) {
		if (!c)
			return 0;
		*out = c->fp; /* a mode change: the descriptor stays */
		return 1;
	}
	int fl = mode ? mode_flags(mode) : -1;
	struct sh_target t;
	const char *p = path;
	int k = sh_classify(AT_FDCWD, &p, 0, &t);
	if (k > 0)
		sh_target_done(&t);
	if (k < 0 || (k > 0 && fl < 0)) {
		errno = k < 0 ? -k : EINVAL;
		*out = NULL;
		return 1;
	}
	if (k > 0) {
		p = path; /* dup3 flushes the stream it replaces (io.c) */
		int fd = sh_open_common(AT_FDCWD, &p, fl, 0666);
		if (fd == SH_KERNEL) {
			k = 0; /* a link in the pool led out of it: p is the host path */
		} else if (fd < 0) {
			errno = -fd;
			*out = NULL;
			return 1;
		} else {
			int rc = fd == n ? n : dup3(fd, n, fl & O_CLOEXEC);
			int e = errno;
			if (fd != n)
				close(fd);
			pthread_mutex_lock(&std_lock);
			c = std[n].cookie;
			pthread_mutex_unlock(&std_lock);
			*out = rc == n && c ? c->fp : NULL;
			if (!*out)
				errno = rc < 0 ? e : ENOMEM;
			return 1;
		}
	}
	if (!c)
		return 0;
	/* A host path onto a std cookie: back to libc's stream, n closed. */
	close(n); /* the std cookie is freed, the variable restored */
	FILE *r = is64 ? REAL(freopen64)(p, mode, orig) : REAL(freopen)(p, mode, orig);
	*out = r;
	return 1;
}

static FILE *pool_fopen(const char *path, const char *mode, int *kernel)
{
	*kernel = 0;
	int fl = mode ? mode_flags(mode) : -1;
	if (fl < 0) {
		struct sh_target t;
		int c = sh_classify(AT_FDCWD, &path, 0, &t);
		if (c > 0)
			sh_target_done(&t);
		*kernel = c == 0;
		errno = EINVAL;
		return NULL;
	}
	int fd = sh_open_common(AT_FDCWD, &path, fl, 0666);
	if (fd == SH_KERNEL) {
		*kernel = 1;
		return NULL;
	}
	if (fd < 0) {
		errno = -fd;
		return NULL;
	}
	return wrap(fd, mode, 1);
}

SH_EXPORT FILE *fopen(const char *path, const char *mode)
{
	int kernel;
	if (sh_depth || !path)
		return REAL(fopen)(path, mode);
	FILE *fp = pool_fopen(path, mode, &kernel);
	return kernel ? REAL(fopen)(path, mode) : fp;
}

SH_EXPORT FILE *fopen64(const char *path, const char *mode)
{
	int kernel;
	if (sh_depth || !path)
		return REAL(fopen64)(path, mode);
	FILE *fp = pool_fopen(path, mode, &kernel);
	return kernel ? REAL(fopen64)(path, mode) : fp;
}

SH_EXPORT FILE *fdopen(int fd, const char *mode)
{
	struct sh_file *f;
	if (sh_depth || !(f = sh_file_get(fd)))
		return REAL(fdopen)(fd, mode);
	sh_file_put(f);
	if (!mode || mode_flags(mode) < 0) {
		errno = EINVAL;
		return NULL;
	}
	return wrap(fd, mode, 0);
}

static FILE *do_freopen(const char *path, const char *mode, FILE *fp, int is64)
{
	if (sh_depth)
		return is64 ? REAL(freopen64)(path, mode, fp) : REAL(freopen)(path, mode, fp);
	FILE *out;
	int n = fp ? std_slot(fp) : -1;
	if (n >= 0 && std_freopen(n, path, mode, is64, &out))
		return out;
	struct cookie *c = n < 0 ? reg_find(fp) : NULL;
	if (c) {
		if (!path)
			return fp; /* a mode change: the descriptor stays */
		int fl = mode ? mode_flags(mode) : -1;
		if (fl < 0) {
			errno = EINVAL;
			return NULL;
		}
		fflush(fp);
		int fd = open(path, fl, 0666);
		if (fd < 0)
			return NULL;
		close(c->fd);
		c->fd = fd;
		fseeko(fp, 0, (fl & O_APPEND) ? SEEK_END : SEEK_SET);
		return fp;
	}
	if (path) {
		struct sh_target t;
		const char *p = path;
		int k = sh_classify(AT_FDCWD, &p, 0, &t);
		if (k > 0) {
			sh_target_done(&t);
			fprintf(stderr,
				"ferrite: freopen(\"%s\") onto a stream libc opened is not "
				"supported\n",
				path);
			errno = EOPNOTSUPP;
			return NULL;
		}
	}
	return is64 ? REAL(freopen64)(path, mode, fp) : REAL(freopen)(path, mode, fp);
}

SH_EXPORT FILE *freopen(const char *path, const char *mode, FILE *fp)
{
	return do_freopen(path, mode, fp, 0);
}

SH_EXPORT FILE *freopen64(const char *path, const char *mode, FILE *fp)
{
	return do_freopen(path, mode, fp, 1);
}

SH_EXPORT int fileno(FILE *fp)
{
	struct cookie *c = sh_depth ? NULL : reg_find(fp);
	return c ? c->fd : REAL(fileno)(fp);
}

SH_EXPORT int fileno_unlocked(FILE *fp)
{
	struct cookie *c = sh_depth ? NULL : reg_find(fp);
	return c ? c->fd : REAL(fileno_unlocked)(fp);
}

SH_EXPORT int vdprintf(int fd, const char *fmt, va_list ap)
{
	struct sh_file *f;
	if (sh_depth || !(f = sh_file_get(fd)))
		return REAL(vdprintf)(fd, fmt, ap);
	sh_file_put(f);
	char *s;
	int n = vasprintf(&s, fmt, ap);
	if (n < 0)
		return -1;
	ssize_t done = 0;
	while (done < n) {
		ssize_t w = write(fd, s + done, (size_t)(n - done));
		if (w <= 0) {
			free(s);
			return -1;
		}
		done += w;
	}
	free(s);
	return n;
}

SH_EXPORT int dprintf(int fd, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int n = vdprintf(fd, fmt, ap);
	va_end(ap);
	return n;
}
