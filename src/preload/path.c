/*
 * path.c -- which calls are the pool's: prefix classification, the working
 * directory, getcwd/chdir/fchdir and realpath.
 *
 * A path is the pool's when, made absolute and normalised lexically, it is
 * the prefix or lies below it: "/pm", "/pm/", "//pm/x" are, "/pm/../x" and
 * "/pmx" are not. Relative paths are resolved against the shim's working
 * directory when that is inside the prefix, else against the kernel's; one
 * relative to a kernel directory descriptor is the pool's when it leads
 * into the prefix from there (a descriptor of "/" and "pm/x").
 *
 * Invariants: W1 when the working directory is inside the prefix, cwd_file
 *               holds a ferrite O_PATH descriptor of it and the kernel's own
 *               working directory is left where it was (relative kernel paths
 *               are then made absolute by the shim);
 *             W2 kcwd caches the kernel's working directory; it is refreshed
 *               by every chdir/fchdir that goes to the kernel;
 *             W3 while the working directory is inside the prefix, the
 *               kernel's is a removed directory (park_kernel_cwd); kcwd still
 *               names the one it left, for relative paths after leaving.
 * Locking: cwd_lock guards cwd_file and kcwd.
 * Limits: ".." is resolved lexically (a symlink followed by ".." is not what
 *   the kernel would do); kernel symlinks that point into the prefix are not
 *   followed into the pool; ".." from a ferrite directory descriptor stops at
 *   the pool root.
 */
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "preload/shim.h"

static pthread_mutex_t cwd_lock = PTHREAD_MUTEX_INITIALIZER;
static struct sh_file *cwd_file; /* W1; f->path is the pool path */
static char kcwd[PATH_MAX] = "/";
static int kcwd_reaches; /* the kernel cwd is an ancestor of the prefix */

int sh_normalise(const char *in, char *out, size_t cap)
{
	size_t len = 1;
	out[0] = '/';
	out[1] = 0;
	const char *p = in;
	while (*p) {
		while (*p == '/')
			p++;
		const char *e = p;
		while (*e && *e != '/')
			e++;
		size_t n = (size_t)(e - p);
		if (n == 0 || (n == 1 && p[0] == '.')) {
			/* nothing */
		} else if (n == 2 && p[0] == '.' && p[1] == '.') {
			while (len > 1 && out[len - 1] != '/')
				len--;
			if (len > 1)
				len--;
			out[len] = 0;
		} else {
			if (len + n + 2 > cap)
				return -ENAMETOOLONG;
			if (len > 1)
				out[len++] = '/';
			memcpy(out + len, p, n);
			len += n;
			out[len] = 0;
		}
		p = e;
	}
	return 0;
}

const char *sh_strip(const char *norm)
{
	size_t n = sh_cfg.plen;
	if (strncmp(norm, sh_cfg.prefix, n) != 0)
		return NULL;
	if (norm[n] == 0)
		return "/";
	return norm[n] == '/' ? norm + n : NULL;
}

int sh_visible(const char *pool_path, char *out, size_t cap)
{
	int n = snprintf(out, cap, "%s%s", sh_cfg.prefix, strcmp(pool_path, "/") ? pool_path : "");
	return n < 0 || (size_t)n >= cap ? -ENAMETOOLONG : 0;
}

static int has_dotdot(const char *p)
{
	for (const char *s = p; (s = strstr(s, "..")); s += 2)
		if ((s == p || s[-1] == '/') && (s[2] == 0 || s[2] == '/'))
			return 1;
	return 0;
}

/* Classifies the absolute path abs (the caller's buffer or ours). */
static int classify_abs(const char *abs, const char **path, struct sh_target *t, int rewrite)
{
	char norm[PATH_MAX];
	if (strncmp(abs, sh_cfg.prefix, sh_cfg.plen) != 0 && !strstr(abs, "//") &&
	    !strstr(abs, "/.") && !rewrite)
		return 0; /* the fast path: cannot normalise into the prefix */
	if (sh_normalise(abs, norm, sizeof(norm)))
		return -ENAMETOOLONG;
	const char *s = sh_strip(norm);
	if (!s) {
		/* The kernel gets a path it can resolve without our prefix. */
		if (rewrite || strncmp(abs, sh_cfg.prefix, sh_cfg.plen) == 0) {
			strcpy(t->path, norm);
			*path = t->path;
		}
		return 0;
	}
	t->dirfd = FERRITE_AT_ROOT;
	t->held = NULL;
	strcpy(t->path, s);
	return 1;
}

static struct sh_file *cwd_get(char *kbuf)
{
	pthread_mutex_lock(&cwd_lock);
	struct sh_file *f = cwd_file;
	if (f)
		__atomic_add_fetch(&f->refs, 1, __ATOMIC_RELAXED);
	else if (kbuf)
		strcpy(kbuf, kcwd);
	pthread_mutex_unlock(&cwd_lock);
	return f;
}

static int join(char *out, size_t cap, const char *dir, const char *rel)
{
	int n = snprintf(out, cap, "%s/%s", dir, rel);
	return n < 0 || (size_t)n >= cap ? -ENAMETOOLONG : 0;
}

/* Could path, relative to a directory above the prefix, lead into it? Only
 * through the prefix's last name, or through "..". */
static int may_reach_prefix(const char *path)
{
	if (has_dotdot(path))
		return 1;
	const char *base = strrchr(sh_cfg.prefix, '/') + 1;
	size_t blen = strlen(base);
	for (const char *c = path; *c;) {
		const char *e = strchrnul(c, '/');
		if ((size_t)(e - c) == blen && !memcmp(c, base, blen))
			return 1;
		c = *e ? e + 1 : e;
	}
	return 0;
}

/* A path relative to a kernel directory descriptor: the pool's if the
 * directory lies above the prefix and the path leads into it ("pm/x" from a
 * descriptor of "/", as rsync and find walk); else the kernel's, unchanged. */
static int kernel_dirfd(int dirfd, const char **pathp, struct sh_target *t)
{
	const char *path = *pathp;
	if (!*path || !may_reach_prefix(path))
		return 0;
	char link[64], dir[PATH_MAX], abs[PATH_MAX];
	snprintf(link, sizeof(link), "/proc/self/fd/%d", dirfd);
	ssize_t n = REAL(readlink)(link, dir, sizeof(dir) - 1);
	if (n <= 0 || dir[0] != '/')
		return 0;
	dir[n] = 0;
	if (join(abs, sizeof(abs), dir, path))
		return 0;
	int rc = classify_abs(abs, pathp, t, 1);
	if (rc == 0)
		*pathp = path; /* the kernel resolves it from the descriptor */
	return rc;
}

int sh_classify(int dirfd, const char **pathp, int empty_ok, struct sh_target *t)
{
	const char *path = *pathp;
	t->held = NULL;
	if (!path)
		return 0;
	sh_config_init();
	if (path[0] == '/')
		return classify_abs(path, pathp, t, 0);
	if (strlen(path) >= PATH_MAX)
		return 0; /* the kernel says ENAMETOOLONG */
	if (dirfd != AT_FDCWD) {
		struct sh_file *f = sh_file_get(dirfd);
		if (f) {
			t->dirfd = f->ffd;
			t->held = f;
			strcpy(t->path, path);
			return 1;
		}
		return kernel_dirfd(dirfd, pathp, t);
	}
	char buf[PATH_MAX], abs[PATH_MAX];
	struct sh_file *cwd = cwd_get(buf);
	if (cwd) {
		if (!has_dotdot(path)) {
			t->dirfd = cwd->ffd;
			t->held = cwd;
			strcpy(t->path, path);
			return 1;
		}
		char vis[PATH_MAX];
		int rc = sh_visible(cwd->path ? cwd->path : "/", vis, sizeof(vis));
		sh_file_put(cwd);
		if (!rc)
			rc = join(abs, sizeof(abs), vis, path);
		return rc ? rc : classify_abs(abs, pathp, t, 1);
	}
	if (!*path || (!kcwd_reaches && !has_dotdot(path)))
		return 0;
	int rc = join(abs, sizeof(abs), buf, path);
	if (rc)
		return rc;
	const char *orig = path;
	rc = classify_abs(abs, pathp, t, 1);
	if (rc == 0)
		*pathp = orig; /* the kernel resolves it from its own cwd */
	(void)empty_ok;
	return rc;
}

void sh_target_done(struct sh_target *t)
{
	if (t->held)
		sh_file_put(t->held);
	t->held = NULL;
}

/* ---- working directory ------------------------------------------------------ */

void sh_kcwd_update(void)
{
	char b[PATH_MAX];
	if (!REAL(getcwd)(b, sizeof(b)))
		return;
	pthread_mutex_lock(&cwd_lock);
	strcpy(kcwd, b);
	size_t n = strlen(b);
	kcwd_reaches =
	    !strcmp(b, "/") || (strncmp(sh_cfg.prefix, b, n) == 0 && sh_cfg.prefix[n] == '/');
	pthread_mutex_unlock(&cwd_lock);
}

int sh_cwd_ffd(void)
{
	return cwd_file ? cwd_file->ffd : -1;
}

int sh_cwd_path(char *buf, size_t cap)
{
	int in = 0;
	pthread_mutex_lock(&cwd_lock);
	if (cwd_file && cwd_file->path && strlen(cwd_file->path) < cap) {
		strcpy(buf, cwd_file->path);
		in = 1;
	}
	pthread_mutex_unlock(&cwd_lock);
	return in;
}

/* W3: the kernel's working directory while the shim's is in the pool: a
 * directory that no longer exists, so a program that bypasses the shim
 * (static, raw system calls, started without it) finds nothing relative
 * there and cannot create anything, instead of acting on the host directory
 * the process started in. Best effort: where /tmp is not writable the
 * kernel's stays where it was. */
static void park_kernel_cwd(void)
{
	char dir[] = "/tmp/ferrite-cwd-XXXXXX";
	if (!mkdtemp(dir))
		return;
	(void)!REAL(chdir)(dir);
	REAL(rmdir)(dir);
}

/* Takes over ffd (>= 0) as the working directory; ffd < 0 leaves the prefix. */
int sh_cwd_set(int ffd, const char *pool_path)
{
	struct sh_file *f = NULL;
	if (ffd >= 0) {
		f = sh_file_new(ffd, O_PATH | O_DIRECTORY, pool_path);
		if (!f) {
			SH_CALL(ferrite_close(sh_fs_if_mounted(), ffd));
			return -ENOMEM;
		}
	}
	pthread_mutex_lock(&cwd_lock);
	struct sh_file *old = cwd_file;
	cwd_file = f;
	pthread_mutex_unlock(&cwd_lock);
	if (f && !old)
		park_kernel_cwd();
	if (old)
		sh_file_put(old);
	return 0;
}

/* The pool path a target names, for the records (getcwd, exec). */
static void target_pool_path(const struct sh_target *t, char *out, size_t cap)
{
	char tmp[PATH_MAX];
	if (t->path[0] == '/' || !t->held || !t->held->path) {
		if (sh_normalise(t->path[0] == '/' ? t->path : "/", out, cap))
			out[0] = 0;
		return;
	}
	if (join(tmp, sizeof(tmp), t->held->path, t->path) || sh_normalise(tmp, out, cap))
		out[0] = 0;
}

void sh_pool_path_of(const struct sh_target *t, char *out, size_t cap)
{
	target_pool_path(t, out, cap);
}

int sh_dir_open(const char **path, char *pp, size_t cap, int *ffd)
{
	struct sh_target t;
	int c = sh_classify(AT_FDCWD, path, 0, &t);
	if (c <= 0)
		return c;
	int err = 0;
	ferrite_fs *fs = sh_fs(&err);
	int rc = err;
	if (fs) {
		target_pool_path(&t, pp, cap);
		rc = SH_CALL(ferrite_openat(fs, t.dirfd, t.path, O_PATH | O_DIRECTORY, 0));
		if (rc >= 0) {
			*ffd = rc;
			rc = SH_CALL(ferrite_faccessat(fs, *ffd, "", X_OK, AT_EMPTY_PATH));
			if (rc)
				SH_CALL(ferrite_close(fs, *ffd));
		}
	}
	sh_target_done(&t);
	return rc ? rc : 1;
}

SH_EXPORT int chdir(const char *path)
{
	char pp[PATH_MAX];
	int ffd, c;
	if (sh_depth || (c = sh_dir_open(&path, pp, sizeof(pp), &ffd)) == 0) {
		int rc = REAL(chdir)(path);
		if (!rc && !sh_depth) {
			sh_cwd_set(-1, NULL);
			sh_kcwd_update();
		}
		return rc;
	}
	return (int)sh_ret(c < 0 ? c : sh_cwd_set(ffd, pp));
}

SH_EXPORT int fchdir(int fd)
{
	struct sh_file *f;
	if (sh_depth || !(f = sh_file_get(fd))) {
		int rc = REAL(fchdir)(fd);
		if (!rc && !sh_depth) {
			sh_cwd_set(-1, NULL);
			sh_kcwd_update();
		}
		return rc;
	}
	int err = 0;
	ferrite_fs *fs = sh_fs(&err);
	int rc = err;
	if (fs) {
		rc = SH_CALL(ferrite_openat(fs, f->ffd, ".", O_PATH | O_DIRECTORY, 0));
		if (rc >= 0) {
			int ffd = rc;
			rc = SH_CALL(ferrite_faccessat(fs, ffd, "", X_OK, AT_EMPTY_PATH));
			if (rc)
				SH_CALL(ferrite_close(fs, ffd));
			else
				rc = sh_cwd_set(ffd, f->path ? f->path : "/");
		}
	}
	sh_file_put(f);
	return (int)sh_ret(rc);
}

static char *cwd_visible(char *buf, size_t size)
{
	char pp[PATH_MAX], vis[PATH_MAX];
	if (!sh_cwd_path(pp, sizeof(pp)))
		return (char *)-1;
	sh_visible(pp, vis, sizeof(vis));
	size_t n = strlen(vis) + 1;
	if (!buf) {
		buf = malloc(size > n ? size : n);
		if (!buf) {
			errno = ENOMEM;
			return NULL;
		}
		size = size > n ? size : n;
	}
	if (size == 0) {
		errno = EINVAL;
		return NULL;
	}
	if (n > size) {
		errno = ERANGE;
		return NULL;
	}
	memcpy(buf, vis, n);
	return buf;
}

SH_EXPORT char *getcwd(char *buf, size_t size)
{
	if (!sh_depth && cwd_file) {
		char *r = cwd_visible(buf, size);
		if (r != (char *)-1)
			return r;
	}
	return REAL(getcwd)(buf, size);
}

SH_EXPORT char *__getcwd_chk(char *buf, size_t size, size_t buflen)
{
	return getcwd(buf, size);
}

SH_EXPORT char *get_current_dir_name(void)
{
	if (!sh_depth && cwd_file) {
		char *r = cwd_visible(NULL, 0);
		if (r != (char *)-1)
			return r;
	}
	return REAL(get_current_dir_name)();
}

/* ---- realpath ---------------------------------------------------------------- */

/* Resolves the pool path pp (absolute) into a visible canonical path. */
static int pool_realpath(ferrite_fs *fs, const char *pp, char *out)
{
	char rest[PATH_MAX * 2], done[PATH_MAX] = "";
	size_t dlen = 0;
	int links = 0;
	if (strlen(pp) >= sizeof(rest))
		return -ENAMETOOLONG;
	strcpy(rest, pp);
	char *p = rest;
	while (*p) {
		while (*p == '/')
			p++;
		if (!*p)
			break;
		char *e = p;
		while (*e && *e != '/')
			e++;
		size_t n = (size_t)(e - p);
		if (n == 1 && p[0] == '.') {
			p = e;
			continue;
		}
		if (n == 2 && p[0] == '.' && p[1] == '.') {
			while (dlen > 0 && done[dlen - 1] != '/')
				dlen--;
			if (dlen > 0)
				dlen--;
			done[dlen] = 0;
			p = e;
			continue;
		}
		if (dlen + n + 2 > sizeof(done))
			return -ENAMETOOLONG;
		done[dlen] = '/';
		memcpy(done + dlen + 1, p, n);
		done[dlen + 1 + n] = 0;
		struct stat st;
		int rc =
		    SH_CALL(ferrite_fstatat(fs, FERRITE_AT_ROOT, done, &st, AT_SYMLINK_NOFOLLOW));
		if (rc)
			return rc;
		if (!S_ISLNK(st.st_mode)) {
			dlen += n + 1;
			p = e;
			continue;
		}
		if (++links > 40)
			return -ELOOP;
		char target[PATH_MAX];
		ssize_t tl = SH_CALL(
		    ferrite_readlinkat(fs, FERRITE_AT_ROOT, done, target, sizeof(target) - 1));
		if (tl < 0)
			return (int)tl;
		target[tl] = 0;
		done[dlen] = 0;
		char nrest[PATH_MAX * 2];
		int m = snprintf(nrest, sizeof(nrest), "%s%s", target, e);
		if (m < 0 || (size_t)m >= sizeof(nrest))
			return -ENAMETOOLONG;
		if (target[0] == '/') {
			/* An absolute target is a visible path: it may leave the pool. */
			char norm[PATH_MAX];
			if (sh_normalise(nrest, norm, sizeof(norm)))
				return -ENAMETOOLONG;
			const char *s = sh_strip(norm);
			if (!s) {
				if (!REAL(realpath)(norm, out))
					return -errno;
				return 1;
			}
			strcpy(rest, s);
			dlen = 0;
			done[0] = 0;
		} else {
			strcpy(rest, nrest);
		}
		p = rest;
	}
	return sh_visible(dlen ? done : "/", out, PATH_MAX);
}

SH_EXPORT char *realpath(const char *path, char *resolved)
{
	struct sh_target t;
	const char *orig = path;
	int c;
	if (sh_depth || !path || (c = sh_classify(AT_FDCWD, &path, 0, &t)) == 0)
		return REAL(realpath)(path, resolved);
	(void)orig;
	if (c < 0) {
		errno = -c;
		return NULL;
	}
	char pp[PATH_MAX], out[PATH_MAX];
	target_pool_path(&t, pp, sizeof(pp));
	sh_target_done(&t);
	int err = 0;
	ferrite_fs *fs = sh_fs(&err);
	int rc = fs ? pool_realpath(fs, pp[0] ? pp : "/", out) : err;
	if (rc < 0) {
		errno = -rc;
		return NULL;
	}
	if (!resolved) {
		resolved = strdup(out);
		if (!resolved)
			errno = ENOMEM;
		return resolved;
	}
	strcpy(resolved, out);
	return resolved;
}

SH_EXPORT char *__realpath_chk(const char *path, char *resolved, size_t resolvedlen)
{
	return realpath(path, resolved);
}

SH_EXPORT char *canonicalize_file_name(const char *path)
{
	return realpath(path, NULL);
}
