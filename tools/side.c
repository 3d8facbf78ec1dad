/*
 * side.c -- the two places ls, cat and cp read and write, behind one
 * operation table (struct side_ops): the host through libc, and a mounted
 * pool through ferrite.h. Every operation returns -errno on failure; the
 * table also says how to explain a failure (strerror or ferrite_errmsg).
 * The pool is input: its listings leave out (and report) entries whose
 * names could lead outside the directory being read (util/entname.h).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "util/entname.h"

/* ---- listings ----------------------------------------------------------------- */

static int list_add(struct side_list *l, const char *name, unsigned char type)
{
	struct side_entry *v;

	if (l->n == l->cap) {
		size_t cap = l->cap ? 2 * l->cap : 64;

		v = realloc(l->v, cap * sizeof(*v));
		if (!v)
			return -ENOMEM;
		l->v = v;
		l->cap = cap;
	}
	l->v[l->n].name = strdup(name);
	if (!l->v[l->n].name)
		return -ENOMEM;
	l->v[l->n].type = type;
	l->n++;
	return 0;
}

static int entry_cmp(const void *a, const void *b)
{
	const struct side_entry *x = a, *y = b;

	return strcmp(x->name, y->name);
}

int side_is_dot_name(const char *name)
{
	return strcmp(name, ".") == 0 || strcmp(name, "..") == 0;
}

static int list_add_filtered(struct side_list *l, const char *name, unsigned char type,
			     int with_dots)
{
	if (!with_dots && side_is_dot_name(name))
		return 0;
	return list_add(l, name, type);
}

static void list_sort(struct side_list *l)
{
	if (l->n > 1)
		qsort(l->v, l->n, sizeof(l->v[0]), entry_cmp);
}

void side_list_free(struct side_list *l)
{
	size_t i;

	for (i = 0; i < l->n; i++)
		free(l->v[i].name);
	free(l->v);
	memset(l, 0, sizeof(*l));
}

char *side_path_join(const char *dir, const char *name)
{
	size_t len = strlen(dir);
	int slash = len > 0 && dir[len - 1] == '/';
	char *path = malloc(len + strlen(name) + 2);

	if (path)
		sprintf(path, "%s%s%s", dir, slash ? "" : "/", name);
	return path;
}

int side_readlink_alloc(const struct side *s, const char *path, char **target)
{
	size_t size = 256;
	ssize_t n;
	char *buf;

	for (;;) {
		buf = malloc(size);
		if (!buf)
			return -ENOMEM;
		n = s->ops->readlink(s, path, buf, size);
		if (n < 0) {
			free(buf);
			return (int)n;
		}
		if ((size_t)n < size) {
			buf[n] = '\0';
			*target = buf;
			return 0;
		}
		free(buf); /* may be truncated: try a larger buffer */
		size *= 4;
	}
}

/* ---- host (libc) -------------------------------------------------------------------- */

static int neg_errno(int rc)
{
	return rc < 0 ? -errno : rc;
}

static int host_stat(const struct side *s, const char *path, struct stat *st)
{
	return neg_errno(stat(path, st));
}

static int host_lstat(const struct side *s, const char *path, struct stat *st)
{
	return neg_errno(lstat(path, st));
}

static int host_open(const struct side *s, const char *path, int flags, mode_t mode)
{
	return neg_errno(open(path, flags | O_CLOEXEC, mode));
}

static int host_close(const struct side *s, int fd)
{
	return neg_errno(close(fd));
}

static ssize_t host_pread(const struct side *s, int fd, void *buf, size_t n, off_t off)
{
	ssize_t rc = pread(fd, buf, n, off);

	return rc < 0 ? -errno : rc;
}

static ssize_t host_pwrite(const struct side *s, int fd, const void *buf, size_t n, off_t off)
{
	ssize_t rc = pwrite(fd, buf, n, off);

	return rc < 0 ? -errno : rc;
}

static off_t host_lseek(const struct side *s, int fd, off_t off, int whence)
{
	off_t rc = lseek(fd, off, whence);

	return rc < 0 ? -errno : rc;
}

static int host_ftruncate(const struct side *s, int fd, off_t len)
{
	return neg_errno(ftruncate(fd, len));
}

static int host_fchmod(const struct side *s, int fd, mode_t mode)
{
	return neg_errno(fchmod(fd, mode));
}

static int host_chmod(const struct side *s, const char *path, mode_t mode)
{
	return neg_errno(chmod(path, mode));
}

static int host_mkdir(const struct side *s, const char *path, mode_t mode)
{
	return neg_errno(mkdir(path, mode));
}

static int host_symlink(const struct side *s, const char *target, const char *path)
{
	return neg_errno(symlink(target, path));
}

static ssize_t host_readlink(const struct side *s, const char *path, char *buf, size_t size)
{
	ssize_t rc = readlink(path, buf, size);

	return rc < 0 ? -errno : rc;
}

static int host_unlink(const struct side *s, const char *path)
{
	return neg_errno(unlink(path));
}

static int host_list(const struct side *s, const char *path, int with_dots, struct side_list *out)
{
	DIR *d = opendir(path);
	struct dirent *e;
	int rc = 0;

	if (!d)
		return -errno;
	errno = 0;
	while (rc == 0 && (e = readdir(d)) != NULL)
		rc = list_add_filtered(out, e->d_name, e->d_type, with_dots);
	if (rc == 0 && errno)
		rc = -errno;
	closedir(d);
	list_sort(out);
	return rc;
}

static const char *host_errmsg(int rc)
{
	return strerror(-rc);
}

static const struct side_ops host_ops = {
    .stat = host_stat,
    .lstat = host_lstat,
    .open = host_open,
    .close = host_close,
    .pread = host_pread,
    .pwrite = host_pwrite,
    .lseek = host_lseek,
    .ftruncate = host_ftruncate,
    .fchmod = host_fchmod,
    .chmod = host_chmod,
    .mkdir = host_mkdir,
    .symlink = host_symlink,
    .readlink = host_readlink,
    .unlink = host_unlink,
    .list = host_list,
    .errmsg = host_errmsg,
};

void side_init_host(struct side *s)
{
	s->ops = &host_ops;
	s->fs = NULL;
	s->prefix = "";
	s->cmd = NULL;
}

/* ---- pool (ferrite.h) ---------------------------------------------------------------- */

static int pool_stat(const struct side *s, const char *path, struct stat *st)
{
	return ferrite_stat(s->fs, path, st);
}

static int pool_lstat(const struct side *s, const char *path, struct stat *st)
{
	return ferrite_lstat(s->fs, path, st);
}

static int pool_open(const struct side *s, const char *path, int flags, mode_t mode)
{
	return ferrite_open(s->fs, path, flags, mode);
}

static int pool_close(const struct side *s, int fd)
{
	return ferrite_close(s->fs, fd);
}

static ssize_t pool_pread(const struct side *s, int fd, void *buf, size_t n, off_t off)
{
	return ferrite_pread(s->fs, fd, buf, n, off);
}

static ssize_t pool_pwrite(const struct side *s, int fd, const void *buf, size_t n, off_t off)
{
	return ferrite_pwrite(s->fs, fd, buf, n, off);
}

static off_t pool_lseek(const struct side *s, int fd, off_t off, int whence)
{
	return ferrite_lseek(s->fs, fd, off, whence);
}

static int pool_ftruncate(const struct side *s, int fd, off_t len)
{
	return ferrite_ftruncate(s->fs, fd, len);
}

static int pool_fchmod(const struct side *s, int fd, mode_t mode)
{
	return ferrite_fchmod(s->fs, fd, mode);
}

static int pool_chmod(const struct side *s, const char *path, mode_t mode)
{
	return ferrite_chmod(s->fs, path, mode);
}

static int pool_mkdir(const struct side *s, const char *path, mode_t mode)
{
	return ferrite_mkdir(s->fs, path, mode);
}

static int pool_symlink(const struct side *s, const char *target, const char *path)
{
	return ferrite_symlink(s->fs, target, path);
}

static ssize_t pool_readlink(const struct side *s, const char *path, char *buf, size_t size)
{
	return ferrite_readlink(s->fs, path, buf, size);
}

static int pool_unlink(const struct side *s, const char *path)
{
	return ferrite_unlink(s->fs, path);
}

/* Leaves an entry of directory DIR out of a listing, with a message. */
static void pool_list_refuse(const struct side *s, const char *dir, const char *name,
			     const char *why, struct side_list *out)
{
	char shown[96], msg[256];

	snprintf(msg, sizeof(msg),
		 "entry '%s' refused: %s (the pool is damaged or crafted; `ferrite fsck` "
		 "checks it)",
		 fr_entname_show(name, SIZE_MAX, shown, sizeof(shown)), why);
	cli_fail(s->cmd, s->prefix, dir, msg);
	out->refused++;
}

/* A sorted listing keeps the first of several entries of one name: a
 * second one (a symlink after a directory of the same name, say) would be
 * copied over or through the first. */
static void pool_list_dedup(const struct side *s, const char *dir, struct side_list *l)
{
	size_t i, k = 0;

	for (i = 0; i < l->n; i++) {
		if (k > 0 && strcmp(l->v[k - 1].name, l->v[i].name) == 0) {
			pool_list_refuse(s, dir, l->v[i].name, "a second entry of that name", l);
			free(l->v[i].name);
			continue;
		}
		l->v[k++] = l->v[i];
	}
	l->n = k;
}

static int pool_list(const struct side *s, const char *path, int with_dots, struct side_list *out)
{
	struct fr_entname_state names = {0};
	struct ferrite_dirent e;
	const char *why;
	ferrite_dir *d;
	int rc;

	rc = ferrite_opendir(s->fs, path, &d);
	if (rc < 0)
		return rc;
	for (;;) {
		memset(e.name, 0, sizeof(e.name)); /* entname.h: finds NUL bytes inside */
		rc = ferrite_readdir(d, &e);
		if (rc != 1)
			break;
		why = fr_entname_problem(&names, e.name, sizeof(e.name));
		if (why) {
			e.name[sizeof(e.name) - 1] = '\0'; /* shown up to here */
			pool_list_refuse(s, path, e.name, why, out);
			continue;
		}
		rc = list_add_filtered(out, e.name, e.type, with_dots);
		if (rc < 0)
			break;
	}
	ferrite_closedir(d);
	list_sort(out);
	pool_list_dedup(s, path, out);
	return rc < 0 ? rc : 0;
}

static const struct side_ops pool_ops = {
    .stat = pool_stat,
    .lstat = pool_lstat,
    .open = pool_open,
    .close = pool_close,
    .pread = pool_pread,
    .pwrite = pool_pwrite,
    .lseek = pool_lseek,
    .ftruncate = pool_ftruncate,
    .fchmod = pool_fchmod,
    .chmod = pool_chmod,
    .mkdir = pool_mkdir,
    .symlink = pool_symlink,
    .readlink = pool_readlink,
    .unlink = pool_unlink,
    .list = pool_list,
    .errmsg = cli_api_msg,
};

void side_init_pool(struct side *s, ferrite_fs *fs, const char *cmd)
{
	s->ops = &pool_ops;
	s->fs = fs;
	s->prefix = "pool:";
	s->cmd = cmd;
}
