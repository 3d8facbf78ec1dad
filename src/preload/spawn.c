/*
 * spawn.c -- new programs from a process under `ferrite run`: the pool
 * files they are given (descriptors, working directory) and the pool files
 * they are.
 *
 * posix_spawn, system and popen start their child inside glibc, past the
 * shim's execve: their wrappers hand the child the same state an exec
 * passes (exec.c). A program in the pool cannot be executed by the kernel,
 * which cannot see the pool: an ELF file is copied to a sealed memfd that
 * the kernel runs (/proc/self/fd/N, so that posix_spawn can use it too),
 * and a "#!" script is run by its interpreter with its pool path, as the
 * kernel would run it.
 *
 * Invariants: X1 a program runs from the pool only if the caller may
 *               execute it (FERRITE_O_EXEC: checked as the kernel checks an
 *               exec); set-id bits are not honoured (the memfd has none);
 *             X2 a failed exec or spawn changes nothing: the memfd and the
 *               environment built for it are released, errno is the exec's.
 * File actions that name pool files are played by spawn_fa.c.
 * Limits: one level of interpreter.
 */
#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "preload/shim.h"

extern char **environ;

/* Copies the pool file ffd to a sealed memfd; x->path names it. */
static int exe_memfd(ferrite_fs *fs, int ffd, uint64_t size, struct sh_exe *x)
{
	int mfd = (int)syscall(SYS_memfd_create, "ferrite-exec", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (mfd < 0)
		return -errno;
	char *buf = malloc(1 << 20);
	int rc = buf ? 0 : -ENOMEM;
	for (uint64_t off = 0; !rc && off < size;) {
		ssize_t n = SH_CALL(ferrite_pread(fs, ffd, buf, 1 << 20, (off_t)off));
		if (n <= 0) {
			rc = n < 0 ? (int)n : 0;
			break;
		}
		if (REAL(pwrite)(mfd, buf, (size_t)n, (off_t)off) != n)
			rc = -EIO;
		off += (uint64_t)n;
	}
	free(buf);
	if (!rc &&
	    fcntl(mfd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL))
		rc = -errno;
	if (rc) {
		sh_kclose(mfd);
		return rc;
	}
	x->memfd = mfd;
	snprintf(x->buf, sizeof(x->buf), "/proc/self/fd/%d", mfd);
	x->path = x->buf;
	return 0;
}

/* "#!interp [arg]" in head: argv becomes interp [arg] path argv[1..]. */
static int exe_script(const char *head, size_t n, const char *path, char *const argv[],
		      struct sh_exe *x)
{
	char line[256];
	size_t len = 0;
	for (size_t i = 2; i < n && head[i] != '\n' && len + 1 < sizeof(line); i++)
		line[len++] = head[i];
	line[len] = 0;
	char *p = line;
	while (*p == ' ' || *p == '\t')
		p++;
	char *interp = p;
	while (*p && *p != ' ' && *p != '\t')
		p++;
	char *arg = NULL;
	if (*p) {
		*p++ = 0;
		while (*p == ' ' || *p == '\t')
			p++;
		size_t al = strlen(p);
		while (al && (p[al - 1] == ' ' || p[al - 1] == '\t' || p[al - 1] == '\r'))
			p[--al] = 0;
		arg = al ? p : NULL;
	}
	if (!*interp)
		return -ENOEXEC;
	size_t argc = 0;
	while (argv && argv[argc])
		argc++;
	char **v =
	    calloc(argc + 4 + (arg ? strlen(arg) + 1 : 0) + strlen(interp) + 1, sizeof(char *));
	if (!v)
		return -ENOMEM;
	/* the strings live behind the vector */
	char *store = (char *)(v + argc + 4);
	size_t k = 0;
	strcpy(store, interp);
	v[k++] = store;
	if (arg) {
		char *a = store + strlen(interp) + 1;
		strcpy(a, arg);
		v[k++] = a;
	}
	v[k++] = (char *)path;
	for (size_t i = 1; i < argc; i++)
		v[k++] = argv[i];
	v[k] = NULL;
	x->own_argv = v;
	x->argv = v;
	x->path = v[0];
	return 0;
}

int sh_exe_resolve(const char *path, char *const argv[], struct sh_exe *x)
{
	memset(x, 0, sizeof(*x));
	x->path = path;
	x->argv = argv;
	x->memfd = -1;
	if (sh_depth || !path)
		return 0;
	for (int level = 0; level < 2; level++) {
		const char *p = x->path;
		struct sh_target t;
		int c = sh_classify(AT_FDCWD, &p, 0, &t);
		if (c < 0)
			return c;
		if (c == 0) {
			if (p != x->path) { /* rewritten: it may live in t */
				snprintf(x->buf, sizeof(x->buf), "%s", p);
				x->path = x->buf;
			}
			return 0;
		}
		int err = 0;
		ferrite_fs *fs = sh_fs(&err);
		int ffd =
		    fs ? SH_CALL(ferrite_openat(fs, t.dirfd, t.path, O_RDONLY | FERRITE_O_EXEC, 0))
		       : err;
		sh_target_done(&t);
		p = x->path;
		if (ffd == -EXDEV && sh_escaped(&p)) { /* a link out of the pool */
			snprintf(x->buf, sizeof(x->buf), "%s", p);
			x->path = x->buf;
			return 0;
		}
		if (ffd < 0)
			return ffd;
		struct stat st;
		char head[256];
		ssize_t n = 0;
		int rc = SH_CALL(ferrite_fstat(fs, ffd, &st));
		if (!rc && !S_ISREG(st.st_mode))
			rc = -EACCES;
		if (!rc)
			n = SH_CALL(ferrite_pread(fs, ffd, head, sizeof(head), 0));
		if (!rc && n < 0)
			rc = (int)n;
		if (!rc && level == 0 && n > 2 && head[0] == '#' && head[1] == '!') {
			rc = exe_script(head, (size_t)n, path, argv, x);
			SH_CALL(ferrite_close(fs, ffd));
			if (rc)
				return rc;
			continue; /* the interpreter may be in the pool too */
		}
		if (!rc)
			rc = exe_memfd(fs, ffd, (uint64_t)st.st_size, x);
		SH_CALL(ferrite_close(fs, ffd));
		return rc;
	}
	return 0;
}

void sh_exe_done(struct sh_exe *x)
{
	int e = errno;
	if (x->memfd >= 0)
		sh_kclose(x->memfd);
	free(x->own_argv);
	x->memfd = -1;
	x->own_argv = NULL;
	errno = e;
}

/* ---- posix_spawn, system, popen ---------------------------------------------------- */

/* posix_spawn (search 0) or posix_spawnp (1) of what the kernel can run,
 * with the state an exec passes in the child's environment. */
static int spawn_with_state(pid_t *pid, const char *path, int search, int exe_fd,
			    const posix_spawn_file_actions_t *fa, const posix_spawnattr_t *attr,
			    char *const argv[], char *const envp[])
{
	struct sh_spawn_plan plan;
	int planned = sh_spawn_plan(fa, &plan);
	if (planned < 0)
		return -planned; /* F4 in spawn_fa.c */
	struct sh_prep pr;
	sh_exec_prepare_view(envp, &pr, planned ? &plan.view : NULL);
	if (planned) {
		int keep[2] = {pr.memfd, exe_fd}; /* closefrom spares them */
		int rc = sh_spawn_plan_actions(&plan, keep, 2);
		if (rc) {
			sh_exec_abort(&pr);
			sh_spawn_plan_done(&plan);
			return -rc;
		}
		fa = &plan.fa;
	}
	int rc = search ? REAL(posix_spawnp)(pid, path, fa, attr, argv, SH_ENV(pr, envp))
			: REAL(posix_spawn)(pid, path, fa, attr, argv, SH_ENV(pr, envp));
	sh_exec_abort(&pr); /* the child has its copies */
	if (planned)
		sh_spawn_plan_done(&plan);
	return rc;
}

static int spawn_common(pid_t *pid, const char *path, const posix_spawn_file_actions_t *fa,
			const posix_spawnattr_t *attr, char *const argv[], char *const envp[])
{
	struct sh_exe x;
	int rc = sh_exe_resolve(path, argv, &x);
	if (rc)
		return -rc;
	rc = spawn_with_state(pid, x.path, 0, x.memfd, fa, attr, x.argv, envp);
	sh_exe_done(&x);
	return rc;
}

SH_EXPORT int posix_spawn(pid_t *pid, const char *path, const posix_spawn_file_actions_t *fa,
			  const posix_spawnattr_t *attr, char *const argv[], char *const envp[])
{
	if (sh_depth)
		return REAL(posix_spawn)(pid, path, fa, attr, argv, envp);
	return spawn_common(pid, path, fa, attr, argv, envp);
}

int sh_path_has_pool(void)
{
	const char *path = getenv("PATH");
	int cwd_in = sh_cwd_ffd() >= 0; /* relative entries are the pool's then */
	for (const char *d = path ? path : ""; path;) {
		const char *e = strchrnul(d, ':');
		size_t n = (size_t)(e - d);
		if ((n == 0 || d[0] != '/') && cwd_in)
			return 1;
		if (n >= sh_cfg.plen && !memcmp(d, sh_cfg.prefix, sh_cfg.plen) &&
		    (n == sh_cfg.plen || d[sh_cfg.plen] == '/'))
			return 1;
		if (!*e)
			break;
		d = e + 1;
	}
	return 0;
}

int sh_path_search(const char *file, int (*try_one)(const char *path, void *arg), void *arg)
{
	const char *path = getenv("PATH");
	if (!path)
		path = "/usr/local/bin:/bin:/usr/bin";
	int err = ENOENT;
	for (const char *d = path;; d++) {
		const char *e = strchrnul(d, ':');
		char cand[PATH_MAX];
		int n = snprintf(cand, sizeof(cand), "%.*s%s%s", (int)(e - d), d, e > d ? "/" : "",
				 file);
		if (n > 0 && (size_t)n < sizeof(cand) && access(cand, X_OK) == 0) {
			int rc = try_one(cand, arg);
			if (rc != -ENOENT && rc != -ENOTDIR && rc != -EACCES)
				return rc;
		}
		if (errno == EACCES)
			err = EACCES;
		if (!*e)
			break;
		d = e;
	}
	return -err;
}

struct spawn_args {
	pid_t *pid;
	const posix_spawn_file_actions_t *fa;
	const posix_spawnattr_t *attr;
	char *const *argv, *const *envp;
};

static int spawn_one(const char *path, void *arg)
{
	struct spawn_args *a = arg;
	return -spawn_common(a->pid, path, a->fa, a->attr, a->argv, a->envp);
}

/* posix_spawnp: the PATH search, with pool directories in it. */
/* posix_spawnp: the PATH search, with pool directories in it. */
SH_EXPORT int posix_spawnp(pid_t *pid, const char *file, const posix_spawn_file_actions_t *fa,
			   const posix_spawnattr_t *attr, char *const argv[], char *const envp[])
{
	if (sh_depth)
		return REAL(posix_spawnp)(pid, file, fa, attr, argv, envp);
	if (strchr(file, '/'))
		return spawn_common(pid, file, fa, attr, argv, envp);
	if (!sh_path_has_pool()) /* the kernel's search finds it */
		return spawn_with_state(pid, file, 1, -1, fa, attr, argv, envp);
	struct spawn_args a = {pid, fa, attr, argv, envp};
	return -sh_path_search(file, spawn_one, &a);
}

/* Runs fn with the state in environ for the child it starts. */
#define WITH_STATE(call)                                                                           \
	({                                                                                         \
		struct sh_prep pr_;                                                                \
		sh_exec_prepare(environ, &pr_);                                                    \
		char **saved_ = environ;                                                           \
		if (pr_.env)                                                                       \
			environ = pr_.env;                                                         \
		__typeof__(call) r_ = (call);                                                      \
		environ = saved_;                                                                  \
		sh_exec_abort(&pr_);                                                               \
		r_;                                                                                \
	})

SH_EXPORT int system(const char *cmd)
{
	if (!cmd || sh_depth || !sh_fs_if_mounted())
		return REAL(system)(cmd);
	return WITH_STATE(REAL(system)(cmd));
}

SH_EXPORT FILE *popen(const char *cmd, const char *mode)
{
	if (sh_depth || !sh_fs_if_mounted())
		return REAL(popen)(cmd, mode);
	return WITH_STATE(REAL(popen)(cmd, mode));
}
