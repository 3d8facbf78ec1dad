/*
 * dir.c -- directory streams of pool directories: opendir, fdopendir,
 * readdir(_r)(64), telldir, seekdir, rewinddir, dirfd, closedir, scandir(at),
 * and getdents64 on a directory descriptor.
 *
 * glibc's own opendir and scandir read through internal calls the shim cannot
 * see, so pool directories get streams of ours; libc's DIR is opaque, and a
 * stream of ours is told apart by the magic word it starts with (a glibc DIR
 * starts with its descriptor and a lock word, never this value).
 *
 * Invariants: R1 a stream owns its descriptor (closedir closes it, as
 *               POSIX says of fdopendir) and holds a reference on its file;
 *             R2 getdents64 reads through one stream per open file
 *               description (sh_file.dir), so its position is shared by
 *               dup'ed descriptors as the kernel's is;
 *             R3 the program never gets an entry whose name is not a name
 *               (empty, with '/' or NUL, a second "." or ".."): the pool is
 *               input, so the read fails with EUCLEAN at such an entry, and
 *               the stream stays before it (util/entname.h, docs/security.md).
 * Locking: a stream's mutex serialises its readers (readdir on one DIR from
 *   several threads is allowed by glibc).
 */
#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "preload/shim.h"
#include "util/entname.h"

#define DIR_MAGIC 0xfe22173d1e5a11edULL

struct sh_dir {
	uint64_t magic;
	int fd; /* R1 */
	struct sh_file *f;
	ferrite_dir *d;
	pthread_mutex_t lock;
	struct fr_entname_state names; /* R3 */
	struct dirent ent;
	struct dirent64 ent64;
};

int sh_is_our_dir(void *p)
{
	return p && ((struct sh_dir *)p)->magic == DIR_MAGIC;
}

static DIR *dir_wrap(int fd, struct sh_file *f)
{
	struct sh_dir *sd = calloc(1, sizeof(*sd));
	if (!sd) {
		errno = ENOMEM;
		return NULL;
	}
	int rc = SH_CALL(ferrite_fdopendir(FS, f->ffd, &sd->d));
	if (rc) {
		free(sd);
		errno = -rc;
		return NULL;
	}
	sd->magic = DIR_MAGIC;
	sd->fd = fd;
	sd->f = f; /* the caller's reference moves here */
	pthread_mutex_init(&sd->lock, NULL);
	return (DIR *)sd;
}

SH_EXPORT DIR *fdopendir(int fd)
{
	struct sh_file *f;
	if (sh_depth || !(f = sh_file_get(fd)))
		return REAL(fdopendir)(fd);
	if (sh_forked) {
		sh_file_put(f);
		errno = -sh_fork_denied();
		return NULL;
	}
	DIR *d = dir_wrap(fd, f);
	if (!d)
		sh_file_put(f);
	return d;
}

SH_EXPORT DIR *opendir(const char *path)
{
	if (sh_depth) /* a NULL path goes to the kernel's opendir too (sh_classify) */
		return REAL(opendir)(path);
	int fd = sh_open_common(AT_FDCWD, &path, O_RDONLY | O_DIRECTORY | O_CLOEXEC, 0);
	if (fd == SH_KERNEL)
		return REAL(opendir)(path);
	if (fd < 0) {
		errno = -fd;
		return NULL;
	}
	DIR *d = fdopendir(fd);
	if (!d) {
		int e = errno;
		close(fd);
		errno = e;
	}
	return d;
}

/* Reads the next entry of d into fe: 1, 0 at the end, or -errno. An entry
 * whose name is not a name (R3) is reported on stderr and gives -EUCLEAN,
 * with the stream left before it. */
static int read_checked(const struct sh_file *f, ferrite_dir *d, struct fr_entname_state *names,
			struct ferrite_dirent *fe)
{
	int64_t at = SH_CALL(ferrite_telldir(d));
	memset(fe->name, 0, sizeof(fe->name)); /* entname.h: finds NUL bytes inside */
	int rc = SH_CALL(ferrite_readdir(d, fe));
	const char *why = rc == 1 ? fr_entname_problem(names, fe->name, sizeof(fe->name)) : NULL;
	if (!why)
		return rc;
	char shown[96];
	fprintf(stderr,
		"ferrite: %s%s: entry '%s' refused: %s (the pool is damaged or crafted; "
		"`ferrite fsck` checks it)\n",
		sh_cfg.prefix, f->path ? f->path : "",
		fr_entname_show(fe->name, sizeof(fe->name), shown, sizeof(shown)), why);
	if (at >= 0)
		SH_CALL(ferrite_seekdir(d, at));
	return -EUCLEAN;
}

/* 1 with fe filled, 0 at the end, -errno. */
static int next_ent(struct sh_dir *sd, struct ferrite_dirent *fe)
{
	return read_checked(sd->f, sd->d, &sd->names, fe);
}

static void fill(struct dirent64 *e, const struct ferrite_dirent *fe)
{
	e->d_ino = fe->ino;
	e->d_off = fe->off;
	e->d_type = fe->type;
	e->d_reclen = sizeof(*e);
	strncpy(e->d_name, fe->name, sizeof(e->d_name) - 1);
	e->d_name[sizeof(e->d_name) - 1] = 0;
}

_Static_assert(sizeof(struct dirent) == sizeof(struct dirent64), "LP64 dirent layout");

static struct dirent64 *read64(struct sh_dir *sd, struct dirent64 *into)
{
	struct ferrite_dirent fe;
	int rc = next_ent(sd, &fe);
	if (rc <= 0) {
		if (rc < 0)
			errno = -rc;
		return NULL;
	}
	fill(into, &fe);
	return into;
}

SH_EXPORT struct dirent *readdir(DIR *d)
{
	if (!sh_is_our_dir(d))
		return REAL(readdir)(d);
	struct sh_dir *sd = (struct sh_dir *)d;
	pthread_mutex_lock(&sd->lock);
	struct dirent64 *e = read64(sd, (struct dirent64 *)&sd->ent);
	pthread_mutex_unlock(&sd->lock);
	return (struct dirent *)e;
}

SH_EXPORT struct dirent64 *readdir64(DIR *d)
{
	if (!sh_is_our_dir(d))
		return REAL(readdir64)(d);
	struct sh_dir *sd = (struct sh_dir *)d;
	pthread_mutex_lock(&sd->lock);
	struct dirent64 *e = read64(sd, &sd->ent64);
	pthread_mutex_unlock(&sd->lock);
	return e;
}

/* readdir_r is deprecated but still exported; programs built long ago call it. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
SH_EXPORT int readdir_r(DIR *d, struct dirent *entry, struct dirent **result)
{
	if (!sh_is_our_dir(d))
		return REAL(readdir_r)(d, entry, result);
	struct sh_dir *sd = (struct sh_dir *)d;
	int saved = errno;
	errno = 0;
	pthread_mutex_lock(&sd->lock);
	struct dirent64 *e = read64(sd, (struct dirent64 *)entry);
	pthread_mutex_unlock(&sd->lock);
	*result = (struct dirent *)e;
	int rc = e ? 0 : errno;
	errno = saved;
	return rc;
}

SH_EXPORT int readdir64_r(DIR *d, struct dirent64 *entry, struct dirent64 **result)
{
	return readdir_r(d, (struct dirent *)entry, (struct dirent **)result);
}
#pragma GCC diagnostic pop

SH_EXPORT int closedir(DIR *d)
{
	if (!sh_is_our_dir(d))
		return REAL(closedir)(d);
	struct sh_dir *sd = (struct sh_dir *)d;
	if (!sh_forked)
		SH_CALL(ferrite_closedir(sd->d));
	sd->magic = 0;
	int fd = sd->fd;
	sh_file_put(sd->f);
	pthread_mutex_destroy(&sd->lock);
	free(sd);
	return close(fd);
}

SH_EXPORT void rewinddir(DIR *d)
{
	if (!sh_is_our_dir(d)) {
		REAL(rewinddir)(d);
		return;
	}
	struct sh_dir *sd = (struct sh_dir *)d;
	pthread_mutex_lock(&sd->lock);
	fr_entname_reset(&sd->names);
	SH_CALL(ferrite_rewinddir(sd->d));
	pthread_mutex_unlock(&sd->lock);
}

SH_EXPORT long telldir(DIR *d)
{
	if (!sh_is_our_dir(d))
		return REAL(telldir)(d);
	return (long)SH_CALL(ferrite_telldir(((struct sh_dir *)d)->d));
}

SH_EXPORT void seekdir(DIR *d, long pos)
{
	if (!sh_is_our_dir(d)) {
		REAL(seekdir)(d, pos);
		return;
	}
	struct sh_dir *sd = (struct sh_dir *)d;
	pthread_mutex_lock(&sd->lock);
	fr_entname_reset(&sd->names);
	SH_CALL(ferrite_seekdir(sd->d, pos));
	pthread_mutex_unlock(&sd->lock);
}

SH_EXPORT int dirfd(DIR *d)
{
	if (!sh_is_our_dir(d))
		return REAL(dirfd)(d);
	return ((struct sh_dir *)d)->fd;
}

/* scandir over our readdir (works for kernel directories too). */
static int scan(DIR *d, struct dirent ***list, int (*filter)(const struct dirent *),
		int (*cmp)(const struct dirent **, const struct dirent **))
{
	struct dirent **v = NULL, *e;
	size_t n = 0, cap = 0;
	int saved = errno;
	errno = 0;
	while ((e = readdir(d))) {
		if (filter && !filter(e))
			continue;
		if (n == cap) {
			cap = cap ? cap * 2 : 32;
			struct dirent **nv = realloc(v, cap * sizeof(*nv));
			if (!nv)
				goto oom;
			v = nv;
		}
		size_t sz = offsetof(struct dirent, d_name) + strlen(e->d_name) + 1;
		if (!(v[n] = malloc(sz > sizeof(*e) ? sz : sizeof(*e))))
			goto oom;
		memcpy(v[n], e, sz);
		n++;
	}
	if (errno) {
		int er = errno;
		for (size_t i = 0; i < n; i++)
			free(v[i]);
		free(v);
		closedir(d);
		errno = er;
		return -1;
	}
	closedir(d);
	if (cmp && n > 1)
		qsort(v, n, sizeof(*v), (int (*)(const void *, const void *))cmp);
	*list = v;
	errno = saved;
	return (int)n;
oom:
	for (size_t i = 0; i < n; i++)
		free(v[i]);
	free(v);
	closedir(d);
	errno = ENOMEM;
	return -1;
}

static int is_pool_dir(int dirfd, const char *path)
{
	struct sh_target t;
	if (sh_depth || !path)
		return 0;
	int c = sh_classify(dirfd, &path, 0, &t);
	if (c > 0)
		sh_target_done(&t);
	return c != 0;
}

SH_EXPORT int scandir(const char *path, struct dirent ***list, int (*filter)(const struct dirent *),
		      int (*cmp)(const struct dirent **, const struct dirent **))
{
	if (!is_pool_dir(AT_FDCWD, path))
		return REAL(scandir)(path, list, filter, cmp);
	DIR *d = opendir(path);
	return d ? scan(d, list, filter, cmp) : -1;
}

SH_EXPORT int scandir64(const char *path, struct dirent64 ***list,
			int (*filter)(const struct dirent64 *),
			int (*cmp)(const struct dirent64 **, const struct dirent64 **))
{
	if (!is_pool_dir(AT_FDCWD, path))
		return REAL(scandir64)(path, list, filter, cmp);
	DIR *d = opendir(path);
	return d ? scan(d, (struct dirent ***)list, (int (*)(const struct dirent *))filter,
			(int (*)(const struct dirent **, const struct dirent **))cmp)
		 : -1;
}

SH_EXPORT int scandirat(int dirfd, const char *path, struct dirent ***list,
			int (*filter)(const struct dirent *),
			int (*cmp)(const struct dirent **, const struct dirent **))
{
	if (!is_pool_dir(dirfd, path))
		return REAL(scandirat)(dirfd, path, list, filter, cmp);
	int fd = openat(dirfd, path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	DIR *d = fdopendir(fd);
	if (!d) {
		close(fd);
		return -1;
	}
	return scan(d, list, filter, cmp);
}

/* ---- getdents64 ------------------------------------------------------------------ */

struct linux_dirent64 {
	uint64_t d_ino;
	int64_t d_off;
	unsigned short d_reclen;
	unsigned char d_type;
	char d_name[];
};

static ssize_t do_getdents(struct sh_file *f, char *buf, size_t n)
{
	if (!f->dir) {
		ferrite_dir *d;
		int rc = SH_CALL(ferrite_fdopendir(FS, f->ffd, &d));
		if (rc)
			return rc;
		if (!__atomic_compare_exchange_n(&f->dir, &(void *){NULL}, d, 0, __ATOMIC_ACQ_REL,
						 __ATOMIC_ACQUIRE))
			SH_CALL(ferrite_closedir(d));
	}
	ferrite_dir *d = f->dir;
	size_t used = 0;
	struct fr_entname_state names = {__atomic_load_n(&f->dir_dots, __ATOMIC_RELAXED)};
	for (;;) {
		int64_t at = SH_CALL(ferrite_telldir(d));
		struct ferrite_dirent fe;
		int rc = read_checked(f, d, &names, &fe);
		__atomic_store_n(&f->dir_dots, names.dots, __ATOMIC_RELAXED);
		if (rc < 0)
			return used ? (ssize_t)used : rc;
		if (rc == 0)
			break;
		size_t nl = strlen(fe.name);
		size_t rl = (offsetof(struct linux_dirent64, d_name) + nl + 1 + 7) & ~(size_t)7;
		if (used + rl > n) {
			SH_CALL(ferrite_seekdir(d, at)); /* not consumed */
			if (!used)
				return -EINVAL;
			break;
		}
		struct linux_dirent64 *e = (struct linux_dirent64 *)(buf + used);
		e->d_ino = fe.ino;
		e->d_off = fe.off;
		e->d_reclen = (unsigned short)rl;
		e->d_type = fe.type;
		memcpy(e->d_name, fe.name, nl + 1);
		used += rl;
	}
	return (ssize_t)used;
}

SH_EXPORT ssize_t getdents64(int fd, void *buf, size_t n)
{
	SH_FD_OP(ssize_t, fd, REAL(getdents64)(fd, buf, n), do_getdents(f_, buf, n));
}
