/*
 * stdio.c -- FILE streams on pool files: fopen, fdopen and freopen build
 * them with fopencookie over the shim's own read/write/lseek/close, and
 * fileno reports the descriptor behind them. dprintf/vdprintf format into
 * memory and write through the shim.
 *
 * glibc's fopen opens through internal calls the shim cannot see, hence
 * cookie streams; glibc gives such streams no descriptor (fileno = -1), hence
 * the registry of cookie streams and their descriptors.
 *
 * Invariants: T1 a cookie stream owns its descriptor: fclose closes it;
 *             T2 every cookie stream is in the registry from its creation to
 *               its close function.
 * Limits: freopen of a pool path onto a stream libc opened (e.g. stdout)
 *   cannot redirect libc's internal writes: it fails with EOPNOTSUPP.
 * Locking: reg_lock guards the registry.
 */
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "preload/shim.h"

struct cookie {
	int fd; /* T1 */
	FILE *fp;
	struct cookie *next;
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

static ssize_t ck_read(void *ck, char *buf, size_t n)
{
	return read(((struct cookie *)ck)->fd, buf, n);
}

static ssize_t ck_write(void *ck, const char *buf, size_t n)
{
	ssize_t w = write(((struct cookie *)ck)->fd, buf, n);
	return w < 0 ? 0 : w; /* fopencookie: 0 reports an error */
}

static int ck_seek(void *ck, off64_t *pos, int whence)
{
	off_t r = lseek(((struct cookie *)ck)->fd, *pos, whence);
	if (r < 0)
		return -1;
	*pos = r;
	return 0;
}

static int ck_close(void *ck)
{
	struct cookie *c = ck;
	pthread_mutex_lock(&reg_lock);
	for (struct cookie **pp = &reg_head; *pp; pp = &(*pp)->next)
		if (*pp == c) {
			*pp = c->next;
			reg_count--;
			break;
		}
	pthread_mutex_unlock(&reg_lock);
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
	pthread_mutex_lock(&reg_lock);
	c->next = reg_head;
	reg_head = c;
	reg_count++;
	pthread_mutex_unlock(&reg_lock);
	return fp;
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
	struct cookie *c = reg_find(fp);
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
