/*
 * shim.h -- internal interface of libferrite-preload.so, the LD_PRELOAD front
 * end: interposed libc calls on paths under the prefix (default /pm) and on
 * the descriptors they return go into the library in-process; every other call
 * goes to the next definition (libc) untouched. The shim translates; it holds
 * no file-system logic.
 *
 * Files: core.c (configuration, lazy mount, the descriptor table, errno,
 * fork), path.c (prefix classification, working directory, realpath),
 * io.c (descriptor calls), ns.c (path calls: stat, namespace, attributes),
 * dir.c (DIR streams, getdents64), stdio.c (FILE streams over fopencookie),
 * exec.c (exec carries open files over), spawn.c (posix_spawn, system,
 * popen, programs in the pool), spawn_fa.c (spawn file actions on pool
 * files), mmap.c (memory mappings), park.c (placeholders kept for reuse).
 *
 * Invariants: S1 every descriptor the program sees for a ferrite file is a
 *               real kernel descriptor (an O_PATH handle of /dev/null) that
 *               the shim owns, so ferrite and kernel descriptors never share
 *               a number; its close-on-exec flag is the ferrite descriptor's;
 *             S2 sh_fd_table[n] != NULL iff kernel descriptor n is such a
 *               placeholder; it points to the open file description
 *               (struct sh_file) all descriptors dup'ed from it share;
 *             S4 a placeholder whose pool descriptor the program closed may
 *               be parked (park.c) and given to the next pool open;
 *             S3 calls the library makes (sh_depth > 0 on that thread), and
 *               calls in a forked child of a tiered pool's holder, never
 *               enter the library through the shim again.
 * Locking: sh_tab_lock (rwlock) guards the table; an sh_file is reference
 *   counted (table slots + calls in flight) and closes its ferrite descriptor
 *   at the last reference.
 */
#ifndef FERRITE_SHIM_H
#define FERRITE_SHIM_H

#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <spawn.h>
#include <stdint.h>
#include <sys/types.h>

#include "ferrite.h"

#define SH_EXPORT __attribute__((visibility("default")))

/* The next definition of a libc function (dlsym(RTLD_NEXT)), cached. */
void *sh_next(const char *name);
#define REAL(fn)                                                                                   \
	({                                                                                         \
		static __typeof__(&fn) real_##fn##_p;                                              \
		__typeof__(&fn) p_ = __atomic_load_n(&real_##fn##_p, __ATOMIC_RELAXED);            \
		if (!p_) {                                                                         \
			p_ = (__typeof__(&fn))sh_next(#fn);                                        \
			__atomic_store_n(&real_##fn##_p, p_, __ATOMIC_RELAXED);                    \
		}                                                                                  \
		p_;                                                                                \
	})

/* ---- exec and spawn (exec.c, spawn.c) ----------------------------------- */

/* The environment a new program gets: the caller's plus the state of open
 * pool descriptors and the working directory (exec.c). */
struct sh_prep {
	char **env; /* NULL: use the caller's */
	int memfd;
};
void sh_exec_prepare(char *const envp[], struct sh_prep *pr);
void sh_exec_abort(struct sh_prep *pr);
/* What a spawned child will have once its file actions ran (spawn_fa.c):
 * the pool descriptors by number and its working directory. */
enum { SH_CWD_SAME, SH_CWD_POOL, SH_CWD_HOST };
struct sh_view {
	struct sh_view_fd {
		int fd;
		struct sh_file *f; /* a reference of the view's own */
		int inherit;	   /* survives the exec (no close-on-exec) */
	} * fds;
	int n, cap;
	int cwd;		 /* SH_CWD_*: the spawner's, a pool or a host directory */
	char cwd_path[PATH_MAX]; /* SH_CWD_POOL: its pool path */
};
void sh_exec_prepare_view(char *const envp[], struct sh_prep *pr, const struct sh_view *view);
/* posix_spawn file actions that name pool files or directories (spawn_fa.c):
 * sh_spawn_plan plays them: 0 there are none to play (use the caller's
 * actions), 1 plan->view says what the child gets, -errno an action on the
 * pool failed (the spawn fails with it, as the child's action would have).
 * Then sh_spawn_plan_actions builds plan->fa, what the kernel still does in
 * the child, whose closefrom spares the numbers in keep (the exec state's
 * memfd, a program's memfd); 0 or -errno. */
struct sh_spawn_plan {
	posix_spawn_file_actions_t fa;
	int fa_ready;
	struct sh_view view;
	int *opened; /* placeholders opened here for the child, closed after */
	int nopened;
	struct fa_act *kops; /* the kernel's part, in order */
	int nk, kcap;
	struct fa_record *rec; /* the program's actions, copied */
};
int sh_spawn_plan(const posix_spawn_file_actions_t *fa, struct sh_spawn_plan *plan);
int sh_spawn_plan_actions(struct sh_spawn_plan *plan, const int *keep, int nkeep);
void sh_spawn_plan_done(struct sh_spawn_plan *plan);
#define SH_ENV(pr, envp) ((pr).env ? (char *const *)(pr).env : (envp))

/* What the kernel can execute for path (spawn.c): a pool file is copied to
 * a sealed memfd (ELF) or run by its #! interpreter; anything else is left
 * as it is. */
struct sh_exe {
	const char *path;  /* for the kernel */
	char *const *argv; /* argv, or a new one for a script */
	char **own_argv;   /* allocated here */
	char buf[PATH_MAX + 32];
	int memfd;
};
/* 0, or -errno (the exec fails with it). */
int sh_exe_resolve(const char *path, char *const argv[], struct sh_exe *x);
void sh_exe_done(struct sh_exe *x);
/* 1 if an entry of $PATH lies in the pool (or is relative while the working
 * directory is in it): execvp must search it itself. */
int sh_path_has_pool(void);
/* execvp's search: try_one(candidate, arg) for each executable PATH entry
 * until it returns other than -ENOENT, -ENOTDIR or -EACCES; returns that,
 * or -ENOENT / -EACCES when none would do. */
int sh_path_search(const char *file, int (*try_one)(const char *path, void *arg), void *arg);

/* ---- state (core.c) ------------------------------------------------------ */

extern __thread int sh_depth; /* S3: > 0 while inside the library */
extern int sh_forked;	      /* a forked child of a tiered pool's holder (C2) */
extern int sh_record_locks;   /* the process has set a record lock */

/* Configuration from the environment (FERRITE_PREFIX, FERRITE_POOL). */
struct sh_config {
	char prefix[PATH_MAX]; /* normalised, no trailing slash, never "/" */
	size_t plen;
	char pool[PATH_MAX]; /* "" = ferrite_default_pool() */
	int mode;	     /* enum ferrite_mount_mode, from $FERRITE_MODE */
	mode_t umask;
};
extern struct sh_config sh_cfg;
void sh_config_init(void);

/* The mounted pool, mounting on first use; NULL with *err = -errno when it
 * cannot be had (the reason is printed once on stderr). */
ferrite_fs *sh_fs(int *err);
/* The pool if already mounted (no mount attempt). */
ferrite_fs *sh_fs_if_mounted(void);

/* The library found the pool damaged (-EUCLEAN): its message, which says
 * what and where, goes to stderr (once while it repeats), as errno alone
 * says only "Structure needs cleaning". */
void sh_report_damage(void);

/* Sets errno from a -errno result and returns -1; passes results >= 0. */
static inline long sh_ret(long rc)
{
	if (rc < 0) {
		if (rc == -EUCLEAN)
			sh_report_damage();
		errno = (int)-rc;
		return -1;
	}
	return rc;
}

/* Brackets a library call (S3). */
#define SH_CALL(expr)                                                                              \
	({                                                                                         \
		sh_depth++;                                                                        \
		__typeof__(expr) sh_r_ = (expr);                                                   \
		sh_depth--;                                                                        \
		sh_r_;                                                                             \
	})

/* ---- descriptors (core.c) ---------------------------------------------------- */

struct sh_file {
	int ffd;	   /* ferrite descriptor */
	int refs;	   /* table slots + calls in flight (atomic) */
	uint64_t ino;	   /* for exec */
	int oflags;	   /* flags it was opened with */
	char *path;	   /* pool path at open (exec, fchdir, getcwd); may be NULL */
	void *dir;	   /* ferrite_dir for getdents64, lazily */
	unsigned dir_dots; /* getdents64: "." and ".." seen (util/entname.h) */
	uint64_t exec_id;  /* exec.c: groups descriptors of one description */
};

/* Is kernel descriptor fd ours? Takes a reference (sh_file_put). */
struct sh_file *sh_file_get(int fd);
void sh_file_put(struct sh_file *f);
/* Wraps ferrite descriptor ffd in a new sh_file and a placeholder kernel
 * descriptor >= minfd (close-on-exec as asked); returns the descriptor or
 * -errno (ffd is closed then). */
int sh_install(int ffd, int oflags, const char *path, int minfd, int cloexec);
/* A new placeholder >= minfd (or exactly at `at` when at >= 0) for f. */
int sh_dup_to(struct sh_file *f, int minfd, int cloexec, int at);
/* Drops our side of kernel descriptor fd if it is ours (it was closed or
 * replaced); returns 1 if it was. */
int sh_forget(int fd);

/* park.c: placeholders kept for the next open (S4). */
#define PARK_FDS 65536 /* numbers the shim can park */
extern uint64_t sh_parked_bits[PARK_FDS / 64];
/* Is fd parked: a number the program does not have (EBADF)? */
static inline int sh_park_is(int fd)
{
	return fd >= 0 && fd < PARK_FDS &&
	       (__atomic_load_n(&sh_parked_bits[fd / 64], __ATOMIC_ACQUIRE) >> (fd % 64) & 1);
}
void sh_park_start(void);
void sh_park_fork_prepare(void);
void sh_park_fork_parent(void);
void sh_park_fork_child(void);
/* A parked number >= minfd that open may return now (its close-on-exec
 * flag set as asked), or -1. */
int sh_park_take(int minfd, int cloexec);
/* Parks fd, a placeholder whose slot was just emptied; 0: close it. */
int sh_park_put(int fd);
/* fd is parked: it is the caller's now (dup2 replaced it); 1 if it was. */
int sh_park_claim(int fd);
/* The program closed fd, a number it does not have: closed if parked. */
int sh_park_close(int fd);
/* close_range or closefrom closed [first, last]. */
void sh_park_closed_range(unsigned first, unsigned last);
/* Closes every parked number (the process ran out of descriptors). */
int sh_park_release(void);
/* What the shim learns of descriptor numbers: placeholder fd's
 * close-on-exec flag, the kernel's lowest free number, a number freed. */
void sh_park_cloexec(int fd, int on);
/* Gives placeholder fd the close-on-exec flag asked for: a system call only
 * if it has another (P1); -errno. */
int sh_park_set_cloexec(int fd, int on);
/* Before any exec: every parked number gets FD_CLOEXEC (P1). */
void sh_park_before_exec(void);
void sh_park_opened(int fd);
void sh_park_freed(int fd);
/* close(2) of a number the shim opened (sh_park_freed) */
void sh_kclose(int fd);
/* Every descriptor of ours: calls fn(fd, file, arg) under the table lock. */
void sh_for_each(void (*fn)(int fd, struct sh_file *f, void *arg), void *arg);
/* Restores an entry at an existing placeholder fd (exec.c). */
int sh_adopt(int fd, struct sh_file *f);
struct sh_file *sh_file_new(int ffd, int oflags, const char *path);

/* The one-time stderr message for a forked child; returns -EIO. */
int sh_fork_denied(void);

/* ---- paths (path.c) ------------------------------------------------------ */

/* Where a (dirfd, path) pair leads. */
struct sh_target {
	int dirfd;	      /* ferrite dirfd or FERRITE_AT_ROOT */
	struct sh_file *held; /* reference on the dirfd's file, or NULL */
	char path[PATH_MAX];  /* path inside the pool */
};
/* 1: ferrite (fill t, release with sh_target_done), 0: the kernel's (then
 * *path may have been rewritten to an absolute path the kernel can resolve,
 * pointing into t), -errno: an error to report. */
int sh_classify(int dirfd, const char **path, int empty_ok, struct sh_target *t);
/* The pool path a target names ("" if unknown), for records (exec, getcwd). */
void sh_pool_path_of(const struct sh_target *t, char *out, size_t cap);
void sh_target_done(struct sh_target *t);
/* Normalises an absolute path lexically ("//", ".", ".."); 0 or -ENAMETOOLONG. */
int sh_normalise(const char *in, char *out, size_t cap);
/* Pool path of a prefixed absolute path, or NULL if outside the prefix. */
const char *sh_strip(const char *norm);
/* The program-visible absolute path of a pool path (prefix + path). */
int sh_visible(const char *pool_path, char *out, size_t cap);

/* Working directory inside the prefix: a ferrite O_PATH descriptor. */
int sh_cwd_ffd(void); /* -1 when the cwd is the kernel's */
int sh_cwd_set(int ffd, const char *pool_path);
/* chdir's test of path: 0 the kernel's (*path as sh_classify leaves it), 1
 * a pool directory the caller may enter (*ffd an O_PATH descriptor of it,
 * pp its pool path), or -errno. */
int sh_dir_open(const char **path, char *pp, size_t cap, int *ffd);
/* Returns the pool path of the cwd into buf (exec.c), 0 if outside. */
int sh_cwd_path(char *buf, size_t cap);
void sh_kcwd_update(void);

/* ---- other modules ------------------------------------------------------------ */

/* read/write/lseek on f itself (errno convention), whatever descriptors
 * name it now (io.c). */
ssize_t sh_f_read(struct sh_file *f, void *buf, size_t n);
ssize_t sh_f_write(struct sh_file *f, const void *buf, size_t n);
off_t sh_f_lseek(struct sh_file *f, off_t off, int whence);
/* Standard streams (stdio.c). Descriptor fd (0, 1 or 2) now names another
 * file, or none: stdin/stdout/stderr become a stream over the pool file, or
 * the program's own stream again (C4 in core.c). */
void sh_std_changed(int fd);
/* Flushes the stream fd's standard stream writes to, before fd is replaced. */
void sh_std_flush(int fd);

int sh_is_our_dir(void *dirp);
void sh_exec_restore(void);
int sh_mm_active(void);
/* Opens (dirfd, path) as a ferrite descriptor if it is a pool path: >= 0
 * placeholder fd, -errno, or SH_KERNEL (not ours). */
#define SH_KERNEL (-100000)
int sh_open_common(int dirfd, const char **path, int flags, mode_t mode);
/* After -EXDEV from the library: a symlink in the pool led out of it. Points
 * *path at the host path to go on with (thread-local) and returns 1. */
int sh_escaped(const char **path);
extern ferrite_fs *sh_the_fs;

/* Descriptor call on fd: the kernel's unless fd is ours. In lib_expr, FS is
 * the pool and FFD the ferrite descriptor. */
#define SH_FD_OP(type, fd, real_expr, lib_expr)                                                    \
	do {                                                                                       \
		struct sh_file *f_;                                                                \
		if (sh_depth || !(f_ = sh_file_get(fd))) {                                         \
			if (!sh_depth && sh_park_is(fd)) {                                         \
				errno = EBADF; /* S4: not the program's */                         \
				return (type)-1;                                                   \
			}                                                                          \
			return real_expr;                                                          \
		}                                                                                  \
		long r_ = sh_forked ? sh_fork_denied() : (long)SH_CALL(lib_expr);                  \
		sh_file_put(f_);                                                                   \
		return (type)sh_ret(r_);                                                           \
	} while (0)
#define FS  sh_the_fs
#define FFD (f_->ffd)

/* Path call on (dirfd, path): in lib_expr, FS is the pool, DFD and TP the
 * ferrite dirfd and path. */
#define SH_PATH_OP(type, dirfd, path, empty_ok, real_expr, lib_expr)                               \
	do {                                                                                       \
		struct sh_target t_;                                                               \
		int c_;                                                                            \
		if (sh_depth || (c_ = sh_classify(dirfd, &path, empty_ok, &t_)) == 0)              \
			return real_expr;                                                          \
		if (c_ < 0)                                                                        \
			return (type)sh_ret(c_);                                                   \
		int e_ = 0;                                                                        \
		long r_ = sh_fs(&e_) ? (long)SH_CALL(lib_expr) : e_;                               \
		sh_target_done(&t_);                                                               \
		if (r_ == -EXDEV && sh_escaped(&path))                                             \
			return real_expr;                                                          \
		return (type)sh_ret(r_);                                                           \
	} while (0)
#define DFD (t_.dirfd)
#define TP  (t_.path)

/* Entry points libc exports without declaring them in its headers (the
 * _FORTIFY_SOURCE checks and the pre-2.33 stat family). */
struct stat;
struct stat64;
char *__getcwd_chk(char *buf, size_t size, size_t buflen);
char *__realpath_chk(const char *path, char *resolved, size_t resolvedlen);
ssize_t __read_chk(int fd, void *buf, size_t n, size_t buflen);
ssize_t __pread_chk(int fd, void *buf, size_t n, off_t off, size_t buflen);
ssize_t __pread64_chk(int fd, void *buf, size_t n, off_t off, size_t buflen);
ssize_t __readlink_chk(const char *path, char *buf, size_t n, size_t buflen);
ssize_t __readlinkat_chk(int dirfd, const char *path, char *buf, size_t n, size_t buflen);
int __open_2(const char *path, int flags);
int __open64_2(const char *path, int flags);
int __openat_2(int dirfd, const char *path, int flags);
int __openat64_2(int dirfd, const char *path, int flags);
int __xstat(int ver, const char *path, struct stat *st);
int __xstat64(int ver, const char *path, struct stat64 *st);
int __lxstat(int ver, const char *path, struct stat *st);
int __lxstat64(int ver, const char *path, struct stat64 *st);
int __fxstat(int ver, int fd, struct stat *st);
int __fxstat64(int ver, int fd, struct stat64 *st);
int __fxstatat(int ver, int dirfd, const char *path, struct stat *st, int flags);
int __fxstatat64(int ver, int dirfd, const char *path, struct stat64 *st, int flags);
int newfstatat(int dirfd, const char *path, struct stat *st, int flags);
int fcntl64(int fd, int cmd, ...);
ssize_t getdents64(int fd, void *buf, size_t n);

#endif
