/*
 * exec.c -- open pool files survive exec: the exec family writes the table
 * of inheritable descriptors into a memfd named by $FERRITE_PRELOAD_STATE;
 * the new image's shim mounts the pool again and reopens each one at the
 * same number (its placeholder survived the exec, S1), with the same flags
 * and offset; descriptors dup'ed from one open file share one again.
 *
 * Invariants: E1 the pool's own descriptor is close-on-exec, so a successful
 *               exec releases the pool's lock for the new image; a failed
 *               exec changes nothing (the memfd is closed, the environment
 *               the program passed is left as it was);
 *             E2 a descriptor the new image cannot reopen (its file was
 *               unlinked or renamed meanwhile, or the pool is not available)
 *               is closed there with a warning on stderr, never left to name
 *               another file;
 *             E3 a forked child passes its descriptors and working
 *               directory as any process does; only one of a tiered pool's
 *               holder (C2 in core.c) passes nothing: its inheritable pool
 *               descriptors are marked close-on-exec with a warning;
 *             E4 a description another process still holds (the parent of
 *               a forked child that execs, a spawner) is the same one after
 *               exec: offset, status flags and flock locks are shared
 *               (ferrite_fd_share), as the kernel's are.
 */
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "preload/shim.h"

#define STATE_ENV   "FERRITE_PRELOAD_STATE"
#define STATE_MAGIC 0x5845455246525446ULL

extern char **environ;

struct rec {
	int32_t fd;
	int32_t flags;
	int64_t off;
	uint64_t ino;
	uint64_t id;
	uint32_t pathlen;
	uint32_t share; /* ferrite_fd_share token: the description itself, 0 none */
};

struct hdr {
	uint64_t magic;
	uint32_t count;
	uint32_t cwdlen;
};

struct buf {
	char *p;
	size_t n, cap;
	int err;
	int skipped; /* descriptors we could not describe */
	int count;
	int any; /* pool descriptors, inheritable or not */
};

static void put(struct buf *b, const void *d, size_t n)
{
	if (b->err)
		return;
	if (b->n + n > b->cap) {
		size_t nc = (b->cap + n) * 2;
		char *np = realloc(b->p, nc);
		if (!np) {
			b->err = 1;
			return;
		}
		b->p = np;
		b->cap = nc;
	}
	memcpy(b->p + b->n, d, n);
	b->n += n;
}

static int inheritable(int fd)
{
	int fl = REAL(fcntl)(fd, F_GETFD);
	return fl >= 0 && !(fl & FD_CLOEXEC);
}

static void describe_one(struct buf *b, int fd, struct sh_file *f)
{
	struct rec r = {0};
	r.fd = fd;
	r.flags = SH_CALL(ferrite_getfl(FS, f->ffd));
	if (r.flags < 0)
		r.flags = f->oflags;
	off_t off = SH_CALL(ferrite_lseek(FS, f->ffd, 0, SEEK_CUR));
	r.off = off < 0 ? 0 : off;
	r.ino = f->ino;
	r.id = (uint64_t)(uintptr_t)f;
	r.pathlen = f->path ? (uint32_t)strlen(f->path) : 0;
	uint32_t token = 0; /* a pool held alone shares nothing: offset only */
	if (SH_CALL(ferrite_fd_share(FS, f->ffd, FERRITE_FD_EXPORT, &token)) == 0)
		r.share = token;
	put(b, &r, sizeof(r));
	put(b, f->path ? f->path : "", r.pathlen);
	b->count++;
}

static void describe(int fd, struct sh_file *f, void *arg)
{
	struct buf *b = arg;
	b->any++;
	if (inheritable(fd))
		describe_one(b, fd, f);
}

static void mark_cloexec(int fd, struct sh_file *f, void *arg)
{
	if (inheritable(fd)) {
		REAL(fcntl)(fd, F_SETFD, FD_CLOEXEC);
		(*(int *)arg)++;
	}
}

static int env_has_shim(char *const envp[])
{
	for (char *const *e = envp; e && *e; e++)
		if (!strncmp(*e, "LD_PRELOAD=", 11) && strstr(*e, "ferrite-preload"))
			return 1;
	return 0;
}

void sh_exec_prepare(char *const envp[], struct sh_prep *pr)
{
	sh_exec_prepare_view(envp, pr, NULL);
}

/* Builds the environment for the new image (E1, E3): of this process's
 * descriptors and working directory, or of what spawn file actions leave
 * the child (view). */
void sh_exec_prepare_view(char *const envp[], struct sh_prep *pr, const struct sh_view *view)
{
	pr->env = NULL;
	pr->memfd = -1;
	sh_park_before_exec();
	if (sh_depth || !sh_fs_if_mounted())
		return;
	if (sh_forked || !env_has_shim(envp)) {
		int n = 0;
		sh_for_each(mark_cloexec, &n);
		if (n)
			fprintf(stderr,
				"ferrite: %d open file(s) under %s are not passed to the new "
				"program (%s)\n",
				n, sh_cfg.prefix,
				sh_forked ? "this forked child does not own the tiered pool"
					  : "it runs without the ferrite shim");
		return;
	}
	struct buf b = {0};
	struct hdr h = {STATE_MAGIC, 0, 0};
	char cwd[PATH_MAX];
	int has_cwd;
	if (view && view->cwd != SH_CWD_SAME)
		has_cwd = view->cwd == SH_CWD_POOL &&
			  snprintf(cwd, sizeof(cwd), "%s", view->cwd_path) < (int)sizeof(cwd);
	else
		has_cwd = sh_cwd_path(cwd, sizeof(cwd));
	h.cwdlen = has_cwd ? (uint32_t)strlen(cwd) : 0;
	put(&b, &h, sizeof(h));
	put(&b, cwd, h.cwdlen);
	if (!view)
		sh_for_each(describe, &b);
	for (int i = 0; view && i < view->n; i++) {
		b.any++;
		if (view->fds[i].inherit)
			describe_one(&b, view->fds[i].fd, view->fds[i].f);
	}
	/* with pool descriptors that are all close-on-exec, the new image
	 * still mounts: it lets go of their descriptions (FERRITE_FD_PRUNE),
	 * which this image, or a parent for it, may have shared */
	if (b.err || (!b.count && !has_cwd && !b.any)) {
		free(b.p);
		return;
	}
	((struct hdr *)b.p)->count = (uint32_t)b.count;
	int fd = (int)syscall(SYS_memfd_create, "ferrite-exec-state", 0);
	if (fd < 0 || REAL(write)(fd, b.p, b.n) != (ssize_t)b.n) {
		if (fd >= 0)
			sh_kclose(fd);
		free(b.p);
		fprintf(stderr, "ferrite: cannot pass open pool files across exec\n");
		return;
	}
	free(b.p);
	size_t n = 0;
	for (char *const *e = envp; e && *e; e++)
		n++;
	char **env = calloc(n + 4, sizeof(char *));
	char *state = malloc(64), *pre = malloc(PATH_MAX + 32), *pool = malloc(PATH_MAX + 32);
	if (!env || !state || !pre || !pool) {
		free(env);
		free(state);
		free(pre);
		free(pool);
		sh_kclose(fd);
		return;
	}
	size_t k = 0;
	for (size_t i = 0; i < n; i++)
		if (strncmp(envp[i], STATE_ENV "=", sizeof(STATE_ENV)) &&
		    strncmp(envp[i], "FERRITE_PREFIX=", 15) &&
		    strncmp(envp[i], "FERRITE_POOL=", 13))
			env[k++] = envp[i];
	snprintf(state, 64, STATE_ENV "=%d", fd);
	snprintf(pre, PATH_MAX + 32, "FERRITE_PREFIX=%s", sh_cfg.prefix);
	env[k++] = state;
	env[k++] = pre;
	if (sh_cfg.pool[0]) {
		snprintf(pool, PATH_MAX + 32, "FERRITE_POOL=%s", sh_cfg.pool);
		env[k++] = pool;
	} else {
		free(pool);
	}
	env[k] = NULL;
	pr->env = env;
	pr->memfd = fd;
}

/* The exec failed, or the spawned child has its own copy: nothing changes
 * here (E1). */
void sh_exec_abort(struct sh_prep *pr)
{
	int e = errno;
	if (pr->memfd >= 0)
		sh_kclose(pr->memfd);
	if (pr->env) {
		for (char **p = pr->env; *p; p++)
			if (!strncmp(*p, STATE_ENV "=", sizeof(STATE_ENV)) ||
			    !strncmp(*p, "FERRITE_PREFIX=", 15) ||
			    !strncmp(*p, "FERRITE_POOL=", 13))
				free(*p);
		free(pr->env);
	}
	errno = e;
}

SH_EXPORT int execve(const char *path, char *const argv[], char *const envp[])
{
	struct sh_exe x;
	int rc = sh_exe_resolve(path, argv, &x); /* a program in the pool (spawn.c) */
	if (rc) {
		errno = -rc;
		return -1;
	}
	struct sh_prep pr;
	sh_exec_prepare(envp, &pr);
	rc = REAL(execve)(x.path, x.argv, SH_ENV(pr, envp));
	sh_exec_abort(&pr);
	sh_exe_done(&x);
	return rc;
}

struct exec_args {
	char *const *argv, *const *envp;
};

/* One candidate of the PATH search: returns only if the exec failed. */
static int exec_one(const char *path, void *arg)
{
	struct exec_args *a = arg;
	execve(path, a->argv, a->envp);
	return -errno;
}

/* The PATH search of execvp, with pool directories in it. */
SH_EXPORT int execvpe(const char *file, char *const argv[], char *const envp[])
{
	if (strchr(file, '/') && !sh_depth)
		return execve(file, argv, envp);
	if (sh_depth || !*file || !sh_path_has_pool()) { /* the kernel's search finds it */
		struct sh_prep pr;
		sh_exec_prepare(envp, &pr);
		int rc = REAL(execvpe)(file, argv, SH_ENV(pr, envp));
		sh_exec_abort(&pr);
		return rc;
	}
	struct exec_args a = {argv, envp};
	errno = -sh_path_search(file, exec_one, &a);
	return -1;
}

SH_EXPORT int fexecve(int fd, char *const argv[], char *const envp[])
{
	struct sh_prep pr;
	sh_exec_prepare(envp, &pr);
	int rc = REAL(fexecve)(fd, argv, SH_ENV(pr, envp));
	sh_exec_abort(&pr);
	return rc;
}

SH_EXPORT int execv(const char *path, char *const argv[])
{
	return execve(path, argv, environ);
}

SH_EXPORT int execvp(const char *file, char *const argv[])
{
	return execvpe(file, argv, environ);
}

/* Collects the NULL-terminated variadic arguments of execl*; *envp gets the
 * one after the NULL when want_env. */
static char **arg_vector(const char *arg0, va_list ap, int want_env, char *const **envp)
{
	size_t n = 1, cap = 16;
	char **v = malloc(cap * sizeof(char *));
	if (!v)
		return NULL;
	v[0] = (char *)arg0;
	for (;;) {
		char *a = va_arg(ap, char *);
		if (n + 1 >= cap) {
			cap *= 2;
			char **nv = realloc(v, cap * sizeof(char *));
			if (!nv) {
				free(v);
				return NULL;
			}
			v = nv;
		}
		v[n++] = a;
		if (!a)
			break;
	}
	if (want_env)
		*envp = va_arg(ap, char *const *);
	return v;
}

SH_EXPORT int execl(const char *path, const char *arg, ...)
{
	va_list ap;
	va_start(ap, arg);
	char **v = arg_vector(arg, ap, 0, NULL);
	va_end(ap);
	if (!v) {
		errno = ENOMEM;
		return -1;
	}
	int rc = execve(path, v, environ);
	free(v);
	return rc;
}

SH_EXPORT int execlp(const char *file, const char *arg, ...)
{
	va_list ap;
	va_start(ap, arg);
	char **v = arg_vector(arg, ap, 0, NULL);
	va_end(ap);
	if (!v) {
		errno = ENOMEM;
		return -1;
	}
	int rc = execvpe(file, v, environ);
	free(v);
	return rc;
}

SH_EXPORT int execle(const char *path, const char *arg, ...)
{
	va_list ap;
	char *const *envp = NULL;
	va_start(ap, arg);
	char **v = arg_vector(arg, ap, 1, &envp);
	va_end(ap);
	if (!v) {
		errno = ENOMEM;
		return -1;
	}
	int rc = execve(path, v, envp);
	free(v);
	return rc;
}

/* ---- the new image ---------------------------------------------------------------- */

static void restore_one(ferrite_fs *fs, const struct rec *r, const char *path,
			struct sh_file **seen_f, uint64_t *seen_id, size_t i)
{
	for (size_t j = 0; j < i; j++)
		if (seen_f[j] && seen_id[j] == r->id) {
			sh_adopt(r->fd, seen_f[j]);
			seen_f[i] = seen_f[j];
			seen_id[i] = r->id;
			return;
		}
	const char *why = "its path was not recorded";
	int ffd = -1;
	if (*path) {
		int fl = r->flags & ~(O_CREAT | O_EXCL | O_TRUNC);
		ffd = SH_CALL(ferrite_openat(fs, FERRITE_AT_ROOT, path, fl, 0));
		why = ffd < 0 ? strerror(-ffd) : NULL;
	}
	struct stat st;
	if (ffd >= 0 && (SH_CALL(ferrite_fstat(fs, ffd, &st)) || st.st_ino != r->ino)) {
		SH_CALL(ferrite_close(fs, ffd));
		ffd = -1;
		why = "the file was unlinked or replaced";
	}
	/* the description itself if a process still holds it (E4), else one
	 * with the offset it had */
	uint32_t token = r->share;
	int joined =
	    ffd >= 0 && token && SH_CALL(ferrite_fd_share(fs, ffd, FERRITE_FD_IMPORT, &token)) == 0;
	struct sh_file *f = ffd >= 0 ? sh_file_new(ffd, r->flags, path) : NULL;
	if (f && !joined && (r->off && S_ISREG(st.st_mode)))
		SH_CALL(ferrite_lseek(fs, ffd, r->off, SEEK_SET));
	if (!f || sh_adopt(r->fd, f)) {
		if (f)
			sh_file_put(f);
		else if (ffd >= 0)
			SH_CALL(ferrite_close(fs, ffd));
		fprintf(stderr, "ferrite: descriptor %d (%s%s) is closed after exec: %s\n", r->fd,
			sh_cfg.prefix, path, why ? why : "out of memory");
		sh_kclose(r->fd); /* E2 */
		return;
	}
	sh_file_put(f); /* the table holds it */
	seen_f[i] = f;
	seen_id[i] = r->id;
}

void sh_exec_restore(void)
{
	const char *v = getenv(STATE_ENV);
	if (!v)
		return;
	int mfd = atoi(v);
	unsetenv(STATE_ENV);
	struct stat st;
	if (mfd < 0 || REAL(fstat)(mfd, &st) || st.st_size < (off_t)sizeof(struct hdr))
		return;
	char *b = malloc((size_t)st.st_size);
	if (!b || REAL(pread)(mfd, b, (size_t)st.st_size, 0) != st.st_size) {
		free(b);
		sh_kclose(mfd);
		return;
	}
	sh_kclose(mfd);
	struct hdr *h = (struct hdr *)b;
	size_t pos = sizeof(*h) + h->cwdlen;
	if (h->magic != STATE_MAGIC || pos > (size_t)st.st_size) {
		free(b);
		return;
	}
	int err = 0;
	ferrite_fs *fs = sh_fs(&err);
	struct sh_file **seen_f = calloc(h->count + 1, sizeof(*seen_f));
	uint64_t *seen_id = calloc(h->count + 1, sizeof(*seen_id));
	for (uint32_t i = 0; i < h->count && pos + sizeof(struct rec) <= (size_t)st.st_size; i++) {
		struct rec r;
		memcpy(&r, b + pos, sizeof(r));
		pos += sizeof(r);
		char path[PATH_MAX] = "";
		if (r.pathlen < sizeof(path) && pos + r.pathlen <= (size_t)st.st_size) {
			memcpy(path, b + pos, r.pathlen);
			path[r.pathlen] = 0;
		}
		pos += r.pathlen;
		if (!fs || !seen_f || !seen_id) {
			fprintf(stderr, "ferrite: descriptor %d (%s%s) is closed after exec: %s\n",
				r.fd, sh_cfg.prefix, path, fs ? "out of memory" : strerror(-err));
			sh_kclose(r.fd); /* E2 */
			continue;
		}
		restore_one(fs, &r, path, seen_f, seen_id, i);
	}
	if (fs && h->cwdlen && h->cwdlen < PATH_MAX) {
		char cwd[PATH_MAX];
		memcpy(cwd, b + sizeof(*h), h->cwdlen);
		cwd[h->cwdlen] = 0;
		int ffd =
		    SH_CALL(ferrite_openat(fs, FERRITE_AT_ROOT, cwd, O_PATH | O_DIRECTORY, 0));
		if (ffd >= 0)
			sh_cwd_set(ffd, cwd);
		else
			fprintf(stderr, "ferrite: the working directory %s%s is gone after exec\n",
				sh_cfg.prefix, cwd);
	}
	if (fs) /* what the image before held and passed on to no descriptor */
		SH_CALL(ferrite_fd_share(fs, -1, FERRITE_FD_PRUNE, NULL));
	free(seen_f);
	free(seen_id);
	free(b);
}
