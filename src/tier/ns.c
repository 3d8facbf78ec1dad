/*
 * ns.c -- the tier engine's side of the C API: descriptors, the namespace
 * (carried out in the backing file system) and the data calls (through the
 * cache).
 *
 * A tier descriptor holds a kernel descriptor on the backing object. Paths
 * are resolved by the kernel below the backing directory: openat2 with
 * RESOLVE_BENEATH from the starting directory, and when that is refused (an
 * absolute symbolic link, ".." above the start) again from the backing root
 * with RESOLVE_IN_ROOT, so nothing ever leads out of the tree: "/" is the
 * backing directory, as it is the pool's root for the pm engine. Calls that
 * change a name resolve the parent directory that way and hand the last
 * component to the kernel.
 *
 * Invariants: N1 the cache is the only way file data moves: the kernel
 *               descriptors are opened without O_TRUNC and O_APPEND, which
 *               the tier carries out itself;
 *             N2 removing a file with a record goes through DYING (files.c
 *               F3), so a crash between the two never loses or resurrects
 *               data;
 *             N3 every name change sets ns_dirty: the flusher syncs the
 *               backing file system within a flush period, so names become
 *               durable as fast as the data behind them drains.
 * Credentials set with ferrite_set_creds() become the thread's file-system
 * uid, gid and groups for the kernel calls (a root daemon serving others).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "fs/fs.h"
#include "tier/sys.h"
#include "tier/tier.h"
#include "tier/tier_api.h"

void tier_creds_done(void);
#define TIER_END(rc)	(tier_creds_done(), pm_op_end_check(__func__), fr_err_finish(rc))
#define TIER_END_SS(rc) tier_end_ss((rc), __func__)
static inline ssize_t tier_end_ss(ssize_t rc, const char *fn)
{
	(void)fn;
	tier_creds_done();
	pm_op_end_check(fn);
	if (rc < 0)
		fr_err_finish((int)rc);
	return rc;
}

#define BEGIN(fs)                                                                                  \
	struct tier *t = TIER(fs);                                                                 \
	fr_err_clear();                                                                            \
	tier_creds_apply()

static const char *const POOL_XATTRS[] = {"user.ferrite.pool", "trusted.ferrite.pool"};

/* ---- credentials ------------------------------------------------------------------ */

static __thread int creds_applied; /* this call switched the thread's fs ids */

/* Thread credentials (ferrite_set_creds) applied to the kernel calls. */
static void tier_creds_apply(void)
{
	if (!cred_is_explicit())
		return;
	const struct fs_cred *c = cred_get();
	/* Per thread: the raw calls, not glibc's (which apply to every thread). */
	syscall(SYS_setgroups, c->ngroups, c->groups);
	syscall(SYS_setfsgid, c->gid);
	syscall(SYS_setfsuid, c->uid);
	creds_applied = 1;
}

/* Back to the process's own ids at the end of every call: nothing else the
 * thread does (another pool, the host) may run with the caller's. */
void tier_creds_done(void)
{
	if (!creds_applied)
		return;
	creds_applied = 0;
	syscall(SYS_setfsuid, geteuid());
	syscall(SYS_setfsgid, getegid());
	gid_t g[64];
	int n = getgroups(64, g);
	syscall(SYS_setgroups, n < 0 ? 0 : n, g);
}

/* ---- descriptors --------------------------------------------------------------------- */

static int tfd_install(struct tier *t, struct tier_ofile *of)
{
	pthread_mutex_lock(&t->fd_lock);
	int fd = -1;
	for (int i = t->fd_free_hint; i < t->fd_cap; i++)
		if (!t->fds[i]) {
			fd = i;
			break;
		}
	if (fd < 0) {
		int ncap = t->fd_cap ? t->fd_cap * 2 : 64;
		if (ncap > (1 << 20)) {
			pthread_mutex_unlock(&t->fd_lock);
			return fr_err(-EMFILE, "too many open ferrite descriptors");
		}
		struct tier_ofile **n = realloc(t->fds, (size_t)ncap * sizeof(*n));
		if (!n) {
			pthread_mutex_unlock(&t->fd_lock);
			return -ENOMEM;
		}
		memset(n + t->fd_cap, 0, (size_t)(ncap - t->fd_cap) * sizeof(*n));
		fd = t->fd_cap;
		t->fds = n;
		t->fd_cap = ncap;
	}
	t->fds[fd] = of;
	t->fd_free_hint = fd + 1;
	pthread_mutex_unlock(&t->fd_lock);
	return fd;
}

struct tier_ofile *tfd_get(struct tier *t, int fd)
{
	pthread_mutex_lock(&t->fd_lock);
	struct tier_ofile *of = fd >= 0 && fd < t->fd_cap ? t->fds[fd] : NULL;
	if (of)
		__atomic_fetch_add(&of->refs, 1, __ATOMIC_RELAXED);
	pthread_mutex_unlock(&t->fd_lock);
	return of;
}

static void of_release(struct tier *t, struct tier_ofile *of)
{
	if (of->tf) {
		struct tier_file *tf = of->tf;
		if (!(of->flags & O_PATH) && (of->flags & O_ACCMODE) != O_RDONLY &&
		    !__atomic_load_n(&tf->ndirty, __ATOMIC_RELAXED) &&
		    pthread_mutex_trylock(&tf->flush_lock) == 0) {
			/* Close of a written file: the backing file's size and
			 * mtime catch up now if its chunks are drained already. */
			tier_sync_meta(t, tf);
			pthread_mutex_unlock(&tf->flush_lock);
		}
		tf_open_put(t, tf);
	}
	close(of->kfd);
	pthread_mutex_destroy(&of->pos_lock);
	free(of);
}

void tfd_put(struct tier *t, struct tier_ofile *of)
{
	if (__atomic_sub_fetch(&of->refs, 1, __ATOMIC_ACQ_REL) == 0)
		of_release(t, of);
}

void tier_fds_close_all(struct tier *t)
{
	for (int i = 0; i < t->fd_cap; i++)
		if (t->fds[i]) {
			tfd_put(t, t->fds[i]);
			t->fds[i] = NULL;
		}
	free(t->fds);
	t->fds = NULL;
	t->fd_cap = 0;
}

/* ---- path resolution ---------------------------------------------------------------- */

/* The kernel directory a (dirfd, path) starts from; *held keeps a tier
 * descriptor referenced for the call. Absolute paths start at the root. */
static int start_dir(struct tier *t, int dirfd, const char *path, int *kdir, const char **rest,
		     struct tier_ofile **held)
{
	*held = NULL;
	*kdir = -1;
	*rest = NULL;
	if (path && strnlen(path, 4096) >= 4096)
		return fr_err(-ENAMETOOLONG, "path longer than 4095 bytes");
	if (path && path[0] == '/') {
		while (*path == '/')
			path++;
		*kdir = t->root_fd;
		*rest = *path ? path : ".";
		return 0;
	}
	*rest = path;
	if (dirfd == FERRITE_AT_ROOT) {
		*kdir = t->root_fd;
		return 0;
	}
	struct tier_ofile *of = tfd_get(t, dirfd);
	if (!of)
		return -EBADF;
	if (path && *path && !S_ISDIR(of->type)) {
		tfd_put(t, of);
		return -ENOTDIR;
	}
	*kdir = of->kfd;
	*held = of;
	return 0;
}

static void end_dir(struct tier *t, struct tier_ofile *held)
{
	if (held)
		tfd_put(t, held);
}

/* RESOLVE_IN_ROOT refuses with EAGAIN when a rename anywhere on the system
 * raced a ".." step; nothing was opened, so the walk simply runs again. */
static long sys_openat2(int dirfd, const char *path, struct open_how *how)
{
	long fd;
	do
		fd = tsys_openat2(dirfd, path, how, sizeof(*how));
	while (fd < 0 && errno == EAGAIN && (how->resolve & (RESOLVE_IN_ROOT | RESOLVE_BENEATH)));
	return fd;
}

/* The walk for a pool placed at a host prefix (ferrite_set_link_prefix), taken
 * when the kernel refuses an escape: component by component from kdir, ".."
 * stops at the root, an absolute symlink under the prefix goes on from the
 * root, one elsewhere leaves the pool (-EXDEV, ferrite_escaped_path). */
static int walk_prefixed(struct tier *t, int kdir, const char *path, int flags, mode_t mode)
{
	char *buf = malloc(2 * 4096 + 2), *tgt = malloc(4096 + 1);
	int cur = dup(kdir), rc = 0, links = 0;
	if (!buf || !tgt || cur < 0) {
		rc = -ENOMEM;
		goto out;
	}
	snprintf(buf, 2 * 4096 + 2, "%s", path);
	char *p = buf;
	for (;;) {
		while (*p == '/')
			p++;
		char *comp = p;
		while (*p && *p != '/')
			p++;
		char save = *p;
		char *rest = p;
		while (*rest == '/')
			rest++;
		int last = !*rest;
		int slash = last && rest != p;
		*p = 0;
		if (!*comp) { /* the path names cur itself */
			rc = tsys_openat(cur, ".",
					 (flags & ~(O_CREAT | O_EXCL | O_NOFOLLOW)) | O_CLOEXEC, 0);
			rc = rc < 0 ? -errno : rc;
			break;
		}
		struct stat root, here;
		if (!strcmp(comp, "..") && fstat(cur, &here) == 0 &&
		    fstat(t->root_fd, &root) == 0 && here.st_ino == root.st_ino &&
		    here.st_dev == root.st_dev)
			comp[1] = 0; /* ".." of the root is the root */
		int follow = !last || slash || !(flags & O_NOFOLLOW);
		int fd = tsys_openat(cur, comp, O_PATH | O_NOFOLLOW | O_CLOEXEC, 0);
		struct stat st = {0};
		if (fd >= 0 && fstat(fd, &st) == 0 && S_ISLNK(st.st_mode) && follow &&
		    !(last && (flags & O_PATH) && (flags & O_NOFOLLOW))) {
			ssize_t n = tsys_readlinkat(fd, "", tgt, 4096);
			close(fd);
			if (n < 0 || ++links > 40) {
				rc = n < 0 ? -errno : -ELOOP;
				break;
			}
			tgt[n] = 0;
			char *nb = malloc(2 * 4096 + 2);
			if (!nb) {
				rc = -ENOMEM;
				break;
			}
			*p = save;
			int w = snprintf(nb, 2 * 4096 + 2, "%s%s%s", tgt, *rest || slash ? "/" : "",
					 rest);
			free(buf);
			buf = p = nb;
			if (w < 0 || w >= 4096) {
				rc = -ENAMETOOLONG;
				break;
			}
			if (tgt[0] == '/') {
				size_t pl = t->link_prefix_len;
				if (strncmp(p, t->link_prefix, pl) || (p[pl] && p[pl] != '/')) {
					rc = fs_set_escaped_path(p);
					break;
				}
				p += pl;
				close(cur);
				cur = dup(t->root_fd);
			}
			continue;
		}
		if (last) {
			if (fd >= 0)
				close(fd);
			/* The last component, no link to follow: the kernel opens it. */
			rc = tsys_openat(cur, comp,
					 flags | (S_ISLNK(st.st_mode) ? O_NOFOLLOW : 0) | O_CLOEXEC,
					 mode & 07777);
			rc = rc < 0 ? -errno : rc;
			break;
		}
		if (fd < 0) {
			rc = -errno;
			break;
		}
		close(cur);
		cur = fd;
		*p = save;
		p = rest;
	}
out:
	if (cur >= 0)
		close(cur);
	free(buf);
	free(tgt);
	return rc;
}

/* openat2 below kdir; refused escapes are resolved again from the root of
 * the tree (where ".." stops and absolute links start), or by the walk for
 * a prefixed pool. */
static int t_open(struct tier *t, int kdir, const char *path, int flags, mode_t mode)
{
	struct open_how how = {.flags = (uint64_t)(flags | O_CLOEXEC),
			       .mode = (flags & O_CREAT) ? (mode & 07777) : 0,
			       .resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS};
	long fd = sys_openat2(kdir, path, &how);
	if (fd >= 0)
		return (int)fd;
	if (errno != EXDEV)
		return -errno;
	if (t->link_prefix)
		return walk_prefixed(t, kdir, path, flags, mode);
	char rel[4096 + 256];
	int rc = tier_relpath(t, kdir, path, rel, sizeof rel);
	if (rc)
		return rc == -EXDEV ? -ENOENT : rc;
	how.resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS;
	fd = sys_openat2(t->root_fd, rel[0] ? rel : ".", &how);
	return fd >= 0 ? (int)fd : -errno;
}

/* A parent directory and the last component of a path (trailing slashes
 * kept, the kernel judges them). *pfd is owned by the caller if != kdir. */
struct parent {
	int pfd;
	int own;
	char name[256 + 64];
	struct tier_ofile *held;
};

static int get_parent(struct tier *t, int dirfd, const char *path, struct parent *p)
{
	memset(p, 0, sizeof(*p));
	p->pfd = -1;
	if (!path)
		return -EFAULT;
	if (!*path)
		return -ENOENT;
	if (strlen(path) >= 4096)
		return -ENAMETOOLONG;
	int kdir;
	const char *rest;
	int rc = start_dir(t, dirfd, path, &kdir, &rest, &p->held);
	if (rc)
		return rc;
	/* Split off the last component (with its trailing slashes). */
	size_t n = strlen(rest);
	size_t e = n;
	while (e > 0 && rest[e - 1] == '/')
		e--;
	size_t b = e;
	while (b > 0 && rest[b - 1] != '/')
		b--;
	if (n - b >= sizeof p->name) {
		end_dir(t, p->held);
		return fr_err(-ENAMETOOLONG, "path component longer than 255 bytes");
	}
	memcpy(p->name, rest + b, n - b);
	p->name[n - b] = 0;
	if (e == 0) { /* "/" itself */
		snprintf(p->name, sizeof p->name, ".");
		p->pfd = kdir;
		return 0;
	}
	if (b == 0) {
		p->pfd = kdir;
	} else {
		char dir[4096];
		memcpy(dir, rest, b);
		dir[b] = 0;
		int fd = t_open(t, kdir, dir, O_PATH | O_DIRECTORY, 0);
		if (fd < 0) {
			end_dir(t, p->held);
			return fd;
		}
		p->pfd = fd;
		p->own = 1;
	}
	/* ".." of the root is the root. */
	if (p->pfd == t->root_fd && !strncmp(p->name, "..", 2) &&
	    (p->name[2] == 0 || p->name[2] == '/'))
		p->name[1] = 0;
	return 0;
}

static void put_parent(struct tier *t, struct parent *p)
{
	if (p->own)
		close(p->pfd);
	end_dir(t, p->held);
}

/* An O_PATH descriptor on the object (dirfd, path) names; AT_EMPTY_PATH:
 * dirfd's own. *own: the caller closes it. */
static int get_obj(struct tier *t, int dirfd, const char *path, int flags, int *own)
{
	*own = 0;
	if ((!path || !*path)) {
		if (!(flags & AT_EMPTY_PATH))
			return path ? -ENOENT : -EFAULT;
		if (dirfd == FERRITE_AT_ROOT)
			return t->root_fd;
		struct tier_ofile *of = tfd_get(t, dirfd);
		if (!of)
			return -EBADF;
		int fd = dup(of->kfd);
		tfd_put(t, of);
		if (fd < 0)
			return -errno;
		*own = 1;
		return fd;
	}
	int kdir;
	const char *rest;
	struct tier_ofile *held;
	int rc = start_dir(t, dirfd, path, &kdir, &rest, &held);
	if (rc)
		return rc;
	int fd =
	    t_open(t, kdir, rest, O_PATH | ((flags & AT_SYMLINK_NOFOLLOW) ? O_NOFOLLOW : 0), 0);
	end_dir(t, held);
	if (fd >= 0)
		*own = 1;
	return fd;
}

static void put_obj(int fd, int own)
{
	if (own)
		close(fd);
}

static void proc_path(char *buf, size_t n, int fd)
{
	snprintf(buf, n, "/proc/self/fd/%d", fd);
}

/* ---- stat with the cache's view ----------------------------------------------------- */

static void overlay_stat(struct tier *t, struct stat *st)
{
	if (!S_ISREG(st->st_mode))
		return;
	pthread_mutex_lock(&t->files_lock);
	struct tier_file *tf = tf_lookup(t, (uint64_t)st->st_ino);
	if (tf && t->recs[tf->fid].r_state != REC_FREE) {
		struct tier_rec *r = &t->recs[tf->fid];
		int epoch = t->consistency == TIER_EPOCH;
		st->st_size = epoch ? (off_t)tf->size : (off_t)r->r_size;
		int64_t m = epoch && tf->epoch_dirty ? tf->mtime : r->r_mtime;
		if (m)
			st->st_mtim = ns_to_ts(m);
		/* Status changes the tier made; draining does not count. */
		int64_t c = FR_MAX(r->r_ctime, m);
		if (c)
			st->st_ctim = ns_to_ts(c);
		blkcnt_t cached = (blkcnt_t)(__atomic_load_n(&tf->nvalid, __ATOMIC_RELAXED) *
					     (TIER_CHUNK_SIZE / 512));
		if (st->st_blocks < cached)
			st->st_blocks = cached;
	}
	pthread_mutex_unlock(&t->files_lock);
}

int tier_fstatat(ferrite_fs *fs, int dirfd, const char *path, struct stat *st, int flags)
{
	BEGIN(fs);
	if (!st)
		return TIER_END(-EFAULT);
	if (flags & ~(AT_SYMLINK_NOFOLLOW | AT_EMPTY_PATH | AT_NO_AUTOMOUNT | AT_STATX_SYNC_TYPE))
		return TIER_END(-EINVAL);
	int own, fd = get_obj(t, dirfd, path, flags, &own);
	if (fd < 0)
		return TIER_END(fd);
	int rc = fstat(fd, st) ? -errno : 0;
	put_obj(fd, own);
	if (!rc)
		overlay_stat(t, st);
	return TIER_END(rc);
}

int tier_fstat(ferrite_fs *fs, int fd, struct stat *st)
{
	BEGIN(fs);
	if (!st)
		return TIER_END(-EFAULT);
	struct tier_ofile *of = tfd_get(t, fd);
	if (!of)
		return TIER_END(-EBADF);
	int rc = fstat(of->kfd, st) ? -errno : 0;
	tfd_put(t, of);
	if (!rc)
		overlay_stat(t, st);
	return TIER_END(rc);
}

int tier_statvfs(ferrite_fs *fs, struct statvfs *sv)
{
	BEGIN(fs);
	if (!sv)
		return TIER_END(-EFAULT);
	if (tsys_fstatvfs(t->root_fd, sv) != 0)
		return TIER_END(-errno);
	/* Data still only in the cache will take room there. */
	uint64_t pending = __atomic_load_n(&t->ndirty, __ATOMIC_RELAXED) * TIER_CHUNK_SIZE /
			   (sv->f_frsize ? sv->f_frsize : 4096);
	sv->f_bfree = sv->f_bfree > pending ? sv->f_bfree - pending : 0;
	sv->f_bavail = sv->f_bavail > pending ? sv->f_bavail - pending : 0;
	return TIER_END(0);
}

int tier_faccessat(ferrite_fs *fs, int dirfd, const char *path, int mode, int flags)
{
	BEGIN(fs);
	if (flags & ~(AT_SYMLINK_NOFOLLOW | AT_EMPTY_PATH | AT_EACCESS))
		return TIER_END(-EINVAL);
	if (mode & ~(F_OK | R_OK | W_OK | X_OK))
		return TIER_END(-EINVAL);
	int own, fd = get_obj(t, dirfd, path, flags, &own);
	if (fd < 0)
		return TIER_END(fd);
	int rc = tsys_faccessat(fd, "", mode, AT_EMPTY_PATH | AT_EACCESS) ? -errno : 0;
	put_obj(fd, own);
	return TIER_END(rc);
}

/* ---- attributes ------------------------------------------------------------------------ */

int tier_fchmodat(ferrite_fs *fs, int dirfd, const char *path, mode_t mode, int flags)
{
	BEGIN(fs);
	if (flags & ~(AT_SYMLINK_NOFOLLOW | AT_EMPTY_PATH))
		return TIER_END(-EINVAL);
	int own, fd = get_obj(t, dirfd, path, flags, &own);
	if (fd < 0)
		return TIER_END(fd);
	struct stat st;
	int rc = fstat(fd, &st) ? -errno : 0;
	if (!rc && S_ISLNK(st.st_mode))
		rc = -EOPNOTSUPP;
	char pp[64];
	proc_path(pp, sizeof pp, fd);
	if (!rc && tsys_chmod(pp, mode & 07777) != 0)
		rc = -errno;
	if (!rc)
		tier_note_ctime(t, fd);
	__atomic_add_fetch(&t->attr_gen, 1, __ATOMIC_RELEASE); /* set-id bits: drop_setid */
	put_obj(fd, own);
	t->ns_dirty = 1;
	return TIER_END(rc);
}

int tier_fchmod(ferrite_fs *fs, int fd, mode_t mode)
{
	return tier_fchmodat(fs, fd, "", mode, AT_EMPTY_PATH);
}

int tier_fchownat(ferrite_fs *fs, int dirfd, const char *path, uid_t uid, gid_t gid, int flags)
{
	BEGIN(fs);
	if (flags & ~(AT_SYMLINK_NOFOLLOW | AT_EMPTY_PATH))
		return TIER_END(-EINVAL);
	int own, fd = get_obj(t, dirfd, path, flags, &own);
	if (fd < 0)
		return TIER_END(fd);
	int rc = tsys_fchownat(fd, "", uid, gid, AT_EMPTY_PATH) ? -errno : 0;
	if (!rc)
		tier_note_ctime(t, fd);
	__atomic_add_fetch(&t->attr_gen, 1, __ATOMIC_RELEASE); /* set-id bits: drop_setid */
	put_obj(fd, own);
	t->ns_dirty = 1;
	return TIER_END(rc);
}

int tier_fchown(ferrite_fs *fs, int fd, uid_t uid, gid_t gid)
{
	return tier_fchownat(fs, fd, "", uid, gid, AT_EMPTY_PATH);
}

/* A file with a record keeps its mtime there: a time set by hand replaces
 * the last write's (and reaches the backing file when it drains). */
static void note_utimes(struct tier *t, int fd, const struct timespec ts[2])
{
	struct stat st;
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))
		return;
	/* Not while an epoch commits: it publishes the epoch's times. */
	pthread_rwlock_rdlock(&t->epoch_lock);
	pthread_mutex_lock(&t->files_lock);
	struct tier_file *tf = tf_lookup(t, (uint64_t)st.st_ino);
	if (tf) {
		struct tier_rec *r = &t->recs[tf->fid];
		/* From the request, not the file: the flusher may set the
		 * backing file's mtime meanwhile. */
		int64_t m = !ts || ts[1].tv_nsec == UTIME_NOW
				? tier_now_ns()
				: (int64_t)ts[1].tv_sec * 1000000000LL + ts[1].tv_nsec;
		if (!ts || ts[1].tv_nsec != UTIME_OMIT) {
			pm_store8(&r->r_mtime, (uint64_t)m);
			pm_store4(&r->r_flags, r->r_flags | REC_META_STALE);
			pm_flush(&r->r_size, 16);
			pm_flush(&r->r_flags, 4);
			tf->mtime = m;
		}
		int64_t c = (int64_t)st.st_ctim.tv_sec * 1000000000LL + st.st_ctim.tv_nsec;
		if (c > r->r_ctime) {
			pm_store8(&r->r_ctime, (uint64_t)c);
			pm_flush(&r->r_ctime, 8);
		}
		pm_fence();
	}
	pthread_mutex_unlock(&t->files_lock);
	pthread_rwlock_unlock(&t->epoch_lock);
}

int tier_utimensat(ferrite_fs *fs, int dirfd, const char *path, const struct timespec times[2],
		   int flags)
{
	BEGIN(fs);
	if (flags & ~(AT_SYMLINK_NOFOLLOW | AT_EMPTY_PATH))
		return TIER_END(-EINVAL);
	if (!path && dirfd == FERRITE_AT_ROOT)
		return TIER_END(-EINVAL);
	int rc;
	if (flags & AT_SYMLINK_NOFOLLOW && path && *path) {
		struct parent p;
		rc = get_parent(t, dirfd, path, &p);
		if (rc)
			return TIER_END(rc);
		rc = tsys_utimensat(p.pfd, p.name, times, AT_SYMLINK_NOFOLLOW) ? -errno : 0;
		if (!rc) {
			int fd = tsys_openat(p.pfd, p.name, O_PATH | O_NOFOLLOW | O_CLOEXEC, 0);
			if (fd >= 0) {
				note_utimes(t, fd, times);
				close(fd);
			}
		}
		put_parent(t, &p);
	} else {
		int own, fd = get_obj(t, dirfd, path ? path : "",
				      flags | (path ? 0 : AT_EMPTY_PATH), &own);
		if (fd < 0)
			return TIER_END(fd);
		char pp[64];
		proc_path(pp, sizeof pp, fd);
		rc = tsys_utimensat(AT_FDCWD, pp, times, 0) ? -errno : 0;
		if (!rc)
			note_utimes(t, fd, times);
		put_obj(fd, own);
	}
	t->ns_dirty = 1;
	return TIER_END(rc);
}

int tier_futimens(ferrite_fs *fs, int fd, const struct timespec times[2])
{
	return tier_utimensat(fs, fd, NULL, times, AT_EMPTY_PATH);
}

/* ---- opening -------------------------------------------------------------------------- */

/* The mode the caller asked for, whatever the process umask took away.
 * 0, or -errno when the node just made does not have that mode. */
static int exact_mode(int fd, const char *name, mode_t mode)
{
	struct stat st;
	if (tsys_fstatat(fd, name ? name : "", &st, name ? AT_SYMLINK_NOFOLLOW : AT_EMPTY_PATH))
		return -errno;
	if ((st.st_mode & 07777) == (mode & 07777))
		return 0;
	if (name ? tsys_fchmodat(fd, name, mode & 07777, 0) : tsys_fchmod(fd, mode & 07777))
		return -errno;
	return 0;
}

/* Wraps a kernel descriptor; regular files opened for I/O join the cache.
 * trunc: O_TRUNC, carried out through the cache (N1). */
static int install(struct tier *t, int kfd, int flags, int trunc)
{
	struct stat st;
	if (fstat(kfd, &st) != 0) {
		int e = errno;
		close(kfd);
		return -e;
	}
	struct tier_ofile *of = calloc(1, sizeof(*of));
	if (!of) {
		close(kfd);
		return -ENOMEM;
	}
	of->kfd = kfd;
	of->flags = flags & (O_ACCMODE | O_APPEND | O_NONBLOCK | O_PATH | O_DIRECTORY | O_NOFOLLOW |
			     O_CLOEXEC | O_DIRECT | O_SYNC | O_DSYNC);
	of->refs = 1;
	of->ino = (uint64_t)st.st_ino;
	of->type = st.st_mode & S_IFMT;
	pthread_mutex_init(&of->pos_lock, NULL);
	int rc = 0;
	if (S_ISREG(st.st_mode) && !(flags & O_PATH)) {
		rc = tf_get_or_create(t, kfd, (uint64_t)st.st_ino, &of->tf);
		if (!rc && of->tf && t->recs[of->tf->fid].r_btime) {
			/* An inode number taken again by a new file (the old one went
			 * outside the tier): the old record is stale. */
			struct statx sx;
			if (tsys_statx(kfd, "", AT_EMPTY_PATH, STATX_BTIME, &sx) == 0 &&
			    (sx.stx_mask & STATX_BTIME) &&
			    (int64_t)sx.stx_btime.tv_sec * 1000000000LL + sx.stx_btime.tv_nsec !=
				t->recs[of->tf->fid].r_btime) {
				struct tier_file *old = of->tf;
				of->tf = NULL;
				tier_cache_drop_file(t, old);
				pthread_mutex_lock(&t->files_lock);
				rec_free(t, old);
				pthread_mutex_unlock(&t->files_lock);
				tf_open_put(t, old);
				rc = tf_get_or_create(t, kfd, (uint64_t)st.st_ino, &of->tf);
			}
		}
	}
	if (!rc && trunc && of->tf) {
		struct tier_file *tf = of->tf;
		if (t->consistency == TIER_EPOCH) {
			pthread_rwlock_wrlock(&t->epoch_lock);
			rc = tier_epoch_commit_locked(t);
		}
		pthread_rwlock_wrlock(&tf->lock);
		if (!rc)
			rc = tier_cache_truncate(t, tf, kfd, 0);
		pthread_rwlock_unlock(&tf->lock);
		if (t->consistency == TIER_EPOCH) {
			if (!rc)
				rc = tier_epoch_commit_locked(t);
			pthread_rwlock_unlock(&t->epoch_lock);
		}
	} else if (!rc && trunc && tsys_ftruncate(kfd, 0) != 0) {
		rc = -errno;
	}
	if (rc) {
		if (of->tf)
			tf_open_put(t, of->tf);
		close(kfd);
		free(of);
		return rc;
	}
	int fd = tfd_install(t, of);
	if (fd < 0) {
		if (of->tf)
			tf_open_put(t, of->tf);
		close(kfd);
		free(of);
	}
	return fd;
}

/* Flags for the kernel descriptor (N1). */
static int kernel_flags(int flags)
{
	int k = flags & ~(O_TRUNC | O_APPEND | O_DIRECT | O_SYNC | O_DSYNC | O_ASYNC);
	return k | O_CLOEXEC;
}

int tier_openat(ferrite_fs *fs, int dirfd, const char *path, int flags, mode_t mode)
{
	BEGIN(fs);
	if (!path)
		return TIER_END(-EFAULT);
	if ((flags & O_CREAT) && (flags & O_DIRECTORY))
		return TIER_END(-EINVAL);
	if ((flags & __O_TMPFILE) == __O_TMPFILE)
		return TIER_END(fr_err(-EOPNOTSUPP, "O_TMPFILE is not supported in tiered pools"));
	if (flags & O_PATH)
		flags &= O_PATH | O_NOFOLLOW | O_DIRECTORY | O_CLOEXEC;
	int kdir;
	const char *rest;
	struct tier_ofile *held;
	int rc = start_dir(t, dirfd, path, &kdir, &rest, &held);
	if (rc)
		return TIER_END(rc);
	if (!*rest) {
		end_dir(t, held);
		return TIER_END(-ENOENT);
	}
	int kf = kernel_flags(flags), created = 0, kfd;
	size_t rl = strlen(rest);
	if ((flags & O_CREAT) && !(flags & O_EXCL) && rest[rl - 1] != '/') {
		/* Was it made here? Then its mode is set exactly (umask aside). */
		kfd = t_open(t, kdir, rest, kf & ~O_CREAT, 0);
		struct stat st;
		if (kfd >= 0 && fstat(kfd, &st) == 0 && S_ISDIR(st.st_mode)) {
			close(kfd); /* O_CREAT never opens a directory */
			kfd = -EISDIR;
		}
		if (kfd == -ENOENT) {
			kfd = t_open(t, kdir, rest, kf | O_EXCL, mode);
			if (kfd == -EEXIST) /* a dangling symlink: its target is made */
				kfd = t_open(t, kdir, rest, kf, mode);
			created = kfd >= 0;
		}
	} else {
		kfd = t_open(t, kdir, rest, kf, mode);
		created = kfd >= 0 && (flags & O_CREAT);
	}
	end_dir(t, held);
	if (kfd < 0)
		return TIER_END(kfd);
	if (created) {
		t->ns_dirty = 1;
		rc = exact_mode(kfd, NULL, mode);
		if (rc) { /* the new, empty file stays: rest may reach it through a symlink */
			close(kfd);
			return TIER_END(rc);
		}
	}
	int trunc = (flags & O_TRUNC) && !created;
	if (trunc) {
		struct stat st;
		if (fstat(kfd, &st) == 0 && S_ISDIR(st.st_mode)) {
			close(kfd);
			return TIER_END(-EISDIR);
		} else if (!S_ISREG(st.st_mode)) {
			trunc = 0;
		} else if ((flags & O_ACCMODE) == O_RDONLY &&
			   tsys_faccessat(kfd, "", W_OK, AT_EMPTY_PATH | AT_EACCESS) != 0) {
			/* Linux truncates with O_RDONLY too, given write permission. */
			int e = errno;
			close(kfd);
			return TIER_END(-e);
		}
	}
	return TIER_END(install(t, kfd, flags, trunc));
}

int tier_reopen(ferrite_fs *fs, int fd, int flags)
{
	BEGIN(fs);
	if (flags & (O_CREAT | O_EXCL))
		return TIER_END(-EINVAL);
	struct tier_ofile *of = tfd_get(t, fd);
	if (!of)
		return TIER_END(-EBADF);
	char pp[64];
	proc_path(pp, sizeof pp, of->kfd);
	int kfd = tsys_openat(AT_FDCWD, pp, kernel_flags(flags) & ~O_NOFOLLOW, 0);
	tfd_put(t, of);
	if (kfd < 0)
		return TIER_END(-errno);
	int trunc = (flags & O_TRUNC) && (flags & O_ACCMODE) != O_RDONLY;
	return TIER_END(install(t, kfd, flags, trunc));
}

/* Closes a descriptor; keeps the thread's error message. */
static int tfd_close(struct tier *t, int fd)
{
	pthread_mutex_lock(&t->fd_lock);
	struct tier_ofile *of = fd >= 0 && fd < t->fd_cap ? t->fds[fd] : NULL;
	if (of) {
		t->fds[fd] = NULL;
		if (fd < t->fd_free_hint)
			t->fd_free_hint = fd;
	}
	pthread_mutex_unlock(&t->fd_lock);
	if (!of)
		return -EBADF;
	tfd_put(t, of);
	return 0;
}

int tier_close(ferrite_fs *fs, int fd)
{
	BEGIN(fs);
	return TIER_END(tfd_close(t, fd));
}

int tier_dup(ferrite_fs *fs, int fd)
{
	BEGIN(fs);
	struct tier_ofile *of = tfd_get(t, fd);
	if (!of)
		return TIER_END(-EBADF);
	int nfd = tfd_install(t, of); /* keeps the reference tfd_get took */
	if (nfd < 0)
		tfd_put(t, of);
	return TIER_END(nfd);
}

int tier_getfl(ferrite_fs *fs, int fd)
{
	BEGIN(fs);
	struct tier_ofile *of = tfd_get(t, fd);
	if (!of)
		return TIER_END(-EBADF);
	int fl = of->flags & (O_ACCMODE | O_APPEND | O_NONBLOCK | O_PATH | O_DIRECTORY);
	tfd_put(t, of);
	return TIER_END(fl);
}

int tier_setfl(ferrite_fs *fs, int fd, int flags)
{
	BEGIN(fs);
	struct tier_ofile *of = tfd_get(t, fd);
	if (!of)
		return TIER_END(-EBADF);
	int rc = 0;
	if (of->flags & O_PATH)
		rc = -EBADF;
	else
		__atomic_store_n(&of->flags, (of->flags & ~O_APPEND) | (flags & O_APPEND),
				 __ATOMIC_RELAXED);
	tfd_put(t, of);
	return TIER_END(rc);
}

/* ---- data ------------------------------------------------------------------------------ */

static int check_iov(const struct iovec *iov, int iovcnt, size_t *total)
{
	if (iovcnt < 0 || iovcnt > 1024)
		return -EINVAL;
	if (iovcnt && !iov)
		return -EFAULT;
	size_t sum = 0;
	for (int i = 0; i < iovcnt; i++) {
		if (iov[i].iov_len && !iov[i].iov_base)
			return -EFAULT;
		if (iov[i].iov_len > SSIZE_MAX - sum)
			return -EINVAL;
		sum += iov[i].iov_len;
	}
	*total = sum;
	return 0;
}

/* A file the record table had no room for: the backing file directly,
 * durable on return like everything else. */
static ssize_t uncached_io(struct tier *t, struct tier_ofile *of, const struct iovec *iov,
			   int iovcnt, int64_t off, int write)
{
	ssize_t r;
	if (write) {
		int held = tier_writeback_held(t, "a write to a file without a record");
		if (held)
			return held;
		if (of->flags & O_APPEND) {
			struct stat st;
			if (fstat(of->kfd, &st) != 0)
				return -errno;
			off = st.st_size;
		}
		r = tsys_pwritev(of->kfd, iov, iovcnt, off);
		if (r > 0 && tsys_fdatasync(of->kfd) != 0)
			return -errno;
	} else {
		r = tsys_preadv(of->kfd, iov, iovcnt, off);
	}
	return r < 0 ? -errno : r;
}

/* An unprivileged write, truncate or allocation takes away set-user-id, and
 * set-group-id where the group may execute or the writer is not of the
 * file's group, as Linux does. A write through the cache reaches the kernel
 * only later, as the flusher's, and a truncate or allocation the cache
 * settles may not reach it at all, so the kernel cannot; the uncached and
 * mapped paths reach it with the caller's ids, and it does. So it is done
 * here, durably (the backing file system's chmod) and before the call
 * changes anything, with the process's own ids (the writer need not own the
 * file). The mode is looked at again only after a chmod or chown through
 * this mount. */
static void drop_setid(struct tier *t, struct tier_ofile *of)
{
	struct tier_file *tf = of->tf;
	uint64_t seen = __atomic_load_n(&t->attr_gen, __ATOMIC_ACQUIRE) + 1;
	struct stat st;
	if (cred_get()->uid == 0 || __atomic_load_n(&tf->setid_seen, __ATOMIC_ACQUIRE) == seen ||
	    fstat(of->kfd, &st) != 0)
		return;
	mode_t kill = st.st_mode & S_ISUID;
	if ((st.st_mode & S_ISGID) &&
	    ((st.st_mode & S_IXGRP) || !cred_in_group(cred_get(), st.st_gid)))
		kill |= S_ISGID; /* as data.c drop_setid */
	if (kill && S_ISREG(st.st_mode)) {
		int applied = creds_applied;
		tier_creds_done();
		int rc = tsys_fchmod(of->kfd, st.st_mode & 07777 & ~kill);
		if (applied)
			tier_creds_apply();
		if (rc != 0)
			return; /* looked at again by the next write */
		tier_note_ctime(t, of->kfd);
		t->ns_dirty = 1;
	}
	__atomic_store_n(&tf->setid_seen, seen, __ATOMIC_RELEASE);
}

/* A file someone has mapped: its backing file directly (see tier_mmap); the
 * record follows the size. */
static ssize_t mapped_io(struct tier *t, struct tier_ofile *of, const struct iovec *iov, int iovcnt,
			 int64_t off, int write)
{
	struct tier_file *tf = of->tf;
	if (write)
		pthread_rwlock_wrlock(&tf->lock);
	else
		pthread_rwlock_rdlock(&tf->lock);
	ssize_t r = uncached_io(t, of, iov, iovcnt, off, write);
	struct stat st;
	if (write && r > 0 && fstat(of->kfd, &st) == 0) {
		tier_rec_publish(t, tf, (uint64_t)st.st_size, tier_now_ns());
		pm_fence();
		tf->size = st.st_size;
	}
	pthread_rwlock_unlock(&tf->lock);
	return r;
}

ssize_t tier_rw(ferrite_fs *fs, int fd, const struct iovec *iov, int iovcnt, int64_t off, int write)
{
	BEGIN(fs);
	size_t len;
	int rc = check_iov(iov, iovcnt, &len);
	if (rc)
		return TIER_END_SS(rc);
	if (off < -1)
		return TIER_END_SS(-EINVAL);
	struct tier_ofile *of = tfd_get(t, fd);
	if (!of)
		return TIER_END_SS(-EBADF);
	int acc = of->flags & O_ACCMODE;
	ssize_t r;
	if ((of->flags & O_PATH) || (write ? acc == O_RDONLY : acc == O_WRONLY)) {
		r = -EBADF;
		goto out;
	}
	if (S_ISDIR(of->type)) {
		r = -EISDIR;
		goto out;
	}
	int use_pos = off < 0;
	if (use_pos)
		pthread_mutex_lock(&of->pos_lock);
	uint64_t at = use_pos ? (uint64_t)of->pos : (uint64_t)off;
	if (!of->tf) {
		r = S_ISREG(of->type) || !S_ISCHR(of->type)
			? uncached_io(t, of, iov, iovcnt, (int64_t)at, write)
			: -EINVAL;
	} else if (__atomic_load_n(&of->tf->mapped, __ATOMIC_ACQUIRE)) {
		r = mapped_io(t, of, iov, iovcnt, (int64_t)at, write);
	} else if (len == 0) {
		r = 0;
	} else {
		struct tier_file *tf = of->tf;
		int epoch = t->consistency == TIER_EPOCH;
		size_t done = 0;
		int full_again = 0;
		r = 0;
		if (write)
			drop_setid(t, of);
		/* A write longer than one atomic piece (a quarter of the cache)
		 * returns a short count in per-write consistency, as POSIX
		 * allows, so that every call stays atomic; in epoch mode, where
		 * atomicity is the epoch's, it goes on in pieces. */
		while (done < len) {
			if (write)
				tier_throttle(t);
			if (epoch)
				pthread_rwlock_rdlock(&t->epoch_lock);
			ssize_t k;
			int epoch_full = 0;
			if (write) {
				pthread_rwlock_wrlock(&tf->lock);
				if ((of->flags & O_APPEND) && !done)
					at = epoch ? (uint64_t)tf->size : t->recs[tf->fid].r_size;
				if (at + done >= TIER_MAX_FILE)
					k = fr_err(-EFBIG, "write beyond the largest file size");
				else if (at + len > TIER_MAX_FILE && !(len = TIER_MAX_FILE - at))
					k = 0; /* POSIX: a short write up to the limit */
				else
					k = tier_cache_write(t, tf, of->kfd, iov, iovcnt, at,
							     at + done, len - done, &epoch_full);
			} else {
				pthread_rwlock_rdlock(&tf->lock);
				k = tier_cache_read(t, tf, of->kfd, iov, iovcnt, at, len);
				done = len; /* reads are never cut */
			}
			pthread_rwlock_unlock(&tf->lock);
			if (epoch)
				pthread_rwlock_unlock(&t->epoch_lock);
			if (epoch_full) {
				/* A commit empties the epoch; other writers may fill it
				 * again before this one goes on, but not for ever. */
				k = ++full_again > 1000 ? fr_err(-EIO, "the epoch journal cannot "
								       "take this write")
							: tier_epoch_commit(t);
				if (!k)
					continue;
			}
			full_again = 0;
			if (k < 0) {
				r = done ? (ssize_t)done : k;
				break;
			}
			if (!write) {
				r = k;
				break;
			}
			done += (size_t)k;
			r = (ssize_t)done;
			if (!epoch)
				break;
		}
	}
	if (use_pos) {
		if (r > 0)
			of->pos = (int64_t)(at + (uint64_t)r);
		pthread_mutex_unlock(&of->pos_lock);
	}
out:
	tfd_put(t, of);
	return TIER_END_SS(r);
}

off_t tier_lseek(ferrite_fs *fs, int fd, off_t offset, int whence)
{
	BEGIN(fs);
	struct tier_ofile *of = tfd_get(t, fd);
	if (!of)
		return TIER_END_SS(-EBADF);
	off_t r;
	if (of->flags & O_PATH) {
		r = -EBADF;
	} else if (S_ISDIR(of->type)) {
		r = whence == SEEK_SET && offset == 0 ? 0 : -EINVAL;
	} else {
		pthread_mutex_lock(&of->pos_lock);
		struct stat st;
		int64_t size = 0;
		if (fstat(of->kfd, &st) == 0) {
			overlay_stat(t, &st);
			size = st.st_size;
		}
		int64_t base = whence == SEEK_SET   ? 0
			       : whence == SEEK_CUR ? of->pos
			       : whence == SEEK_END ? size
						    : offset;
		if (whence == SEEK_DATA || whence == SEEK_HOLE) {
			/* Every byte below the size counts as data. */
			r = offset < 0 || offset >= size ? -ENXIO
			    : whence == SEEK_DATA	 ? offset
							 : size;
		} else if (whence != SEEK_SET && whence != SEEK_CUR && whence != SEEK_END) {
			r = -EINVAL;
		} else if ((offset > 0 && base > INT64_MAX - offset) || base + offset < 0) {
			r = -EINVAL;
		} else {
			r = base + offset;
		}
		if (r >= 0)
			of->pos = r;
		pthread_mutex_unlock(&of->pos_lock);
	}
	tfd_put(t, of);
	return TIER_END_SS(r);
}

static int truncate_of(struct tier *t, struct tier_ofile *of, uint64_t len, int punch_off_len,
		       uint64_t poff, uint64_t plen)
{
	struct tier_file *tf = of->tf;
	if (tf)
		drop_setid(t, of); /* the cache may not reach the kernel's truncate */
	if (tf && __atomic_load_n(&tf->mapped, __ATOMIC_ACQUIRE)) {
		/* Mapped: the backing file directly (tier_mmap). */
		pthread_rwlock_wrlock(&tf->lock);
		int rc = punch_off_len
			     ? tsys_fallocate(of->kfd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
					      (off_t)poff, (off_t)plen)
			     : tsys_ftruncate(of->kfd, (off_t)len);
		rc = rc ? -errno : tsys_fdatasync(of->kfd) ? -errno : 0;
		struct stat st;
		if (!rc && fstat(of->kfd, &st) == 0) {
			tier_rec_publish(t, tf, (uint64_t)st.st_size, tier_now_ns());
			pm_fence();
			tf->size = st.st_size;
		}
		pthread_rwlock_unlock(&tf->lock);
		return rc;
	}
	if (!tf) {
		if (punch_off_len)
			return tsys_fallocate(of->kfd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
					      (off_t)poff, (off_t)plen)
				   ? -errno
				   : 0;
		return tsys_ftruncate(of->kfd, (off_t)len) ? -errno : 0;
	}
	int epoch = t->consistency == TIER_EPOCH, rc = 0;
	if (epoch) {
		/* The open epoch first, then this change on its own: a crash
		 * shows it only with everything written before it. */
		pthread_rwlock_wrlock(&t->epoch_lock);
		rc = tier_epoch_commit_locked(t);
	}
	pthread_rwlock_wrlock(&tf->lock);
	if (!rc)
		rc = punch_off_len ? tier_cache_punch(t, tf, of->kfd, poff, plen)
				   : tier_cache_truncate(t, tf, of->kfd, len);
	pthread_rwlock_unlock(&tf->lock);
	if (epoch) {
		if (!rc)
			rc = tier_epoch_commit_locked(t);
		pthread_rwlock_unlock(&t->epoch_lock);
	}
	return rc;
}

int tier_ftruncate(ferrite_fs *fs, int fd, off_t length)
{
	BEGIN(fs);
	if (length < 0)
		return TIER_END(-EINVAL);
	struct tier_ofile *of = tfd_get(t, fd);
	if (!of)
		return TIER_END(-EBADF);
	int rc;
	if (of->flags & O_PATH)
		rc = -EBADF;
	else if ((of->flags & O_ACCMODE) == O_RDONLY)
		rc = -EINVAL; /* as Linux */
	else if (!S_ISREG(of->type))
		rc = -EINVAL;
	else if ((uint64_t)length > TIER_MAX_FILE)
		rc = fr_err(-EFBIG, "beyond the largest file size");
	else
		rc = truncate_of(t, of, (uint64_t)length, 0, 0, 0);
	tfd_put(t, of);
	return TIER_END(rc);
}

int tier_truncate(ferrite_fs *fs, const char *path, off_t length)
{
	int fd = tier_openat(fs, FERRITE_AT_ROOT, path, O_WRONLY, 0);
	if (fd < 0)
		return fd;
	int rc = tier_ftruncate(fs, fd, length);
	tfd_close(TIER(fs), fd);
	return rc;
}

int tier_fallocate(ferrite_fs *fs, int fd, int mode, off_t offset, off_t len)
{
	BEGIN(fs);
	struct tier_ofile *of = tfd_get(t, fd);
	if (!of)
		return TIER_END(-EBADF);
	int rc = 0;
	if (mode & ~(FALLOC_FL_KEEP_SIZE | FALLOC_FL_PUNCH_HOLE) ||
	    ((mode & FALLOC_FL_PUNCH_HOLE) && !(mode & FALLOC_FL_KEEP_SIZE)))
		rc = -EOPNOTSUPP;
	else if (offset < 0 || len <= 0)
		rc = -EINVAL;
	else if (offset > INT64_MAX - len || (uint64_t)(offset + len) > TIER_MAX_FILE)
		rc = fr_err(-EFBIG, "beyond the largest file size");
	else if ((of->flags & O_PATH) || (of->flags & O_ACCMODE) == O_RDONLY)
		rc = -EBADF;
	else if (S_ISDIR(of->type))
		rc = -EISDIR;
	else if (!S_ISREG(of->type))
		rc = fr_err(-ENODEV, "fallocate works on regular files only");
	else if (mode & FALLOC_FL_PUNCH_HOLE)
		rc = truncate_of(t, of, 0, 1, (uint64_t)offset, (uint64_t)len);
	else {
		if (of->tf)
			drop_setid(t, of); /* the kernel's fallocate may not be reached */
		/* Reserve the space in the backing file system (advisory: not
		 * every file system can), then grow the file through the cache. */
		if (tsys_fallocate(of->kfd, FALLOC_FL_KEEP_SIZE, offset, len) != 0 &&
		    errno == ENOSPC)
			rc = fr_err(-ENOSPC, "no space left in %s", t->backing);
		if (!rc && !(mode & FALLOC_FL_KEEP_SIZE)) {
			struct stat st;
			if (fstat(of->kfd, &st) == 0) {
				overlay_stat(t, &st);
				if (st.st_size < offset + len)
					rc = truncate_of(t, of, (uint64_t)(offset + len), 0, 0, 0);
			}
		}
	}
	tfd_put(t, of);
	return TIER_END(rc);
}

int tier_fsync(ferrite_fs *fs, int fd)
{
	BEGIN(fs);
	struct tier_ofile *of = tfd_get(t, fd);
	if (!of)
		return TIER_END(-EBADF);
	int rc = 0;
	if (of->flags & O_PATH)
		rc = -EBADF;
	else if (S_ISDIR(of->type))
		rc = tsys_fsync(of->kfd) ? -errno : 0; /* its names: the backing file system's */
	else if (t->consistency == TIER_EPOCH)
		rc = tier_epoch_commit(t);
	/* per-write mode: everything is durable already */
	tfd_put(t, of);
	return TIER_END(rc);
}

/* ---- names --------------------------------------------------------------------------------- */

int tier_mkdirat(ferrite_fs *fs, int dirfd, const char *path, mode_t mode)
{
	BEGIN(fs);
	struct parent p;
	int rc = get_parent(t, dirfd, path, &p);
	if (rc)
		return TIER_END(rc);
	rc = tsys_mkdirat(p.pfd, p.name, mode & 07777) ? -errno : 0;
	if (!rc && (rc = exact_mode(p.pfd, p.name, mode)))
		tsys_unlinkat(p.pfd, p.name, AT_REMOVEDIR); /* nothing made but as asked */
	put_parent(t, &p);
	t->ns_dirty = 1;
	return TIER_END(rc);
}

int tier_mknodat(ferrite_fs *fs, int dirfd, const char *path, mode_t mode, dev_t rdev)
{
	BEGIN(fs);
	mode_t type = mode & S_IFMT;
	if (type == 0)
		type = S_IFREG;
	if (type == S_IFDIR)
		return TIER_END(-EPERM);
	if (type != S_IFREG && type != S_IFIFO && type != S_IFSOCK && type != S_IFCHR &&
	    type != S_IFBLK)
		return TIER_END(-EINVAL);
	struct parent p;
	int rc = get_parent(t, dirfd, path, &p);
	if (rc)
		return TIER_END(rc);
	rc = tsys_mknodat(p.pfd, p.name, type | (mode & 07777), rdev) ? -errno : 0;
	if (!rc && (rc = exact_mode(p.pfd, p.name, mode)))
		tsys_unlinkat(p.pfd, p.name, 0); /* nothing made but as asked */
	put_parent(t, &p);
	t->ns_dirty = 1;
	return TIER_END(rc);
}

int tier_symlinkat(ferrite_fs *fs, const char *target, int dirfd, const char *path)
{
	BEGIN(fs);
	if (!target)
		return TIER_END(-EFAULT);
	if (!*target)
		return TIER_END(-ENOENT);
	struct parent p;
	int rc = get_parent(t, dirfd, path, &p);
	if (rc)
		return TIER_END(rc);
	rc = tsys_symlinkat(target, p.pfd, p.name) ? -errno : 0;
	put_parent(t, &p);
	t->ns_dirty = 1;
	return TIER_END(rc);
}

ssize_t tier_readlinkat(ferrite_fs *fs, int dirfd, const char *path, char *buf, size_t size)
{
	BEGIN(fs);
	if (!buf && size)
		return TIER_END_SS(-EFAULT);
	if ((ssize_t)size <= 0)
		return TIER_END_SS(-EINVAL);
	ssize_t r;
	if (!path || !*path) {
		int own, fd = get_obj(t, dirfd, path, AT_EMPTY_PATH, &own);
		if (fd < 0)
			return TIER_END_SS(fd);
		r = tsys_readlinkat(fd, "", buf, size);
		r = r < 0 ? -errno : r;
		put_obj(fd, own);
	} else {
		struct parent p;
		int rc = get_parent(t, dirfd, path, &p);
		if (rc)
			return TIER_END_SS(rc);
		r = tsys_readlinkat(p.pfd, p.name, buf, size);
		r = r < 0 ? -errno : r;
		put_parent(t, &p);
	}
	return TIER_END_SS(r);
}

/* The file (pfd, name) is about to lose a name: if that is its last name
 * and it has a record, the record goes DYING first (N2). Returns the file
 * state to finish with remove_done, or NULL. */
static struct tier_file *remove_begin(struct tier *t, int pfd, const char *name, int *keep)
{
	struct stat st;
	*keep = -1;
	if (tsys_fstatat(pfd, name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode))
		return NULL;
	pthread_mutex_lock(&t->files_lock);
	struct tier_file *tf = tf_lookup(t, (uint64_t)st.st_ino);
	if (tf && st.st_nlink > 1) {
		/* Another name stays; this one may be the record's path; the
		 * file's status changes (its ctime: see remove_keep). */
		struct tier_rec *r = &t->recs[tf->fid];
		pm_store4(&r->r_pathlen, 0);
		pm_persist(&r->r_pathlen, 4);
		tf = NULL;
		*keep = openat(pfd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
	}
	if (tf)
		rec_set_state(t, tf->fid, REC_DYING);
	pthread_mutex_unlock(&t->files_lock);
	/* Until its chunks are gone (or for ever, if it stays open as an
	 * orphan), an eviction may have to write one back, and a removed file
	 * cannot be found again by name or handle: open its descriptor now. */
	if (tf)
		tf_wfd(t, tf, 0);
	return tf;
}

/* A file that lost one of several names: its record keeps the ctime. */
static void remove_keep(struct tier *t, int keep, int removed)
{
	if (keep < 0)
		return;
	if (removed)
		tier_note_ctime(t, keep);
	close(keep);
}

static void remove_done(struct tier *t, struct tier_file *tf, int removed)
{
	if (!tf)
		return;
	pthread_mutex_lock(&t->files_lock);
	if (!removed) {
		rec_set_state(t, tf->fid, REC_LIVE);
		pthread_mutex_unlock(&t->files_lock);
		return;
	}
	if (tf->opens > 0) {
		/* Still open: an orphan until its last close (files.c). */
		rec_set_state(t, tf->fid, REC_ORPHAN);
		pthread_mutex_unlock(&t->files_lock);
		return;
	}
	tf->refs++; /* alive while its chunks go */
	pthread_mutex_unlock(&t->files_lock);
	tier_cache_drop_file(t, tf);
	pthread_mutex_lock(&t->files_lock);
	rec_free(t, tf);
	pthread_mutex_unlock(&t->files_lock);
	tf_put(t, tf);
}

int tier_unlinkat(ferrite_fs *fs, int dirfd, const char *path, int flags)
{
	BEGIN(fs);
	if (flags & ~AT_REMOVEDIR)
		return TIER_END(-EINVAL);
	struct parent p;
	int rc = get_parent(t, dirfd, path, &p);
	if (rc)
		return TIER_END(rc);
	int keep = -1;
	struct tier_file *tf =
	    (flags & AT_REMOVEDIR) ? NULL : remove_begin(t, p.pfd, p.name, &keep);
	rc = tsys_unlinkat(p.pfd, p.name, flags) ? -errno : 0;
	remove_done(t, tf, rc == 0);
	remove_keep(t, keep, rc == 0);
	put_parent(t, &p);
	t->ns_dirty = 1;
	return TIER_END(rc);
}

static void strip_slashes(char *p)
{
	size_t n = strlen(p);
	while (n > 0 && p[n - 1] == '/')
		p[--n] = 0;
}

static int tf_known(struct tier *t, uint64_t ino)
{
	pthread_mutex_lock(&t->files_lock);
	int k = tf_lookup(t, ino) != NULL;
	pthread_mutex_unlock(&t->files_lock);
	return k;
}

int tier_renameat2(ferrite_fs *fs, int olddirfd, const char *oldpath, int newdirfd,
		   const char *newpath, unsigned flags)
{
	BEGIN(fs);
	if (flags & ~(RENAME_NOREPLACE | RENAME_EXCHANGE) ||
	    (flags & RENAME_NOREPLACE && flags & RENAME_EXCHANGE))
		return TIER_END(-EINVAL);
	struct parent op, np;
	int rc = get_parent(t, olddirfd, oldpath, &op);
	if (rc)
		return TIER_END(rc);
	rc = get_parent(t, newdirfd, newpath, &np);
	if (rc) {
		put_parent(t, &op);
		return TIER_END(rc);
	}
	struct stat ost, nst;
	int have_old = tsys_fstatat(op.pfd, op.name, &ost, AT_SYMLINK_NOFOLLOW) == 0;
	int have_new = tsys_fstatat(np.pfd, np.name, &nst, AT_SYMLINK_NOFOLLOW) == 0;
	char oldrel[4096 + 256], newrel_before[4096 + 256];
	if (tier_relpath(t, op.pfd, op.name, oldrel, sizeof oldrel) != 0)
		oldrel[0] = 0;
	if (tier_relpath(t, np.pfd, np.name, newrel_before, sizeof newrel_before) != 0)
		newrel_before[0] = 0;
	struct tier_file *victim = NULL;
	int keep = -1;
	if (have_old && have_new && !(flags & RENAME_EXCHANGE) && ost.st_ino != nst.st_ino)
		victim = remove_begin(t, np.pfd, np.name, &keep);
	rc = tsys_renameat2(op.pfd, op.name, np.pfd, np.name, flags) ? -errno : 0;
	remove_done(t, victim, rc == 0);
	remove_keep(t, keep, rc == 0);
	if (!rc && have_old && !(have_new && ost.st_ino == nst.st_ino)) {
		/* The record paths follow (N2 keeps recovery able to find them). */
		strip_slashes(oldrel);
		strip_slashes(newrel_before);
		struct tier_move mv[2] = {
		    {oldrel, newrel_before, S_ISDIR(ost.st_mode), (uint64_t)ost.st_ino},
		    {newrel_before, oldrel, have_new && S_ISDIR(nst.st_mode),
		     have_new ? (uint64_t)nst.st_ino : 0}};
		int any = S_ISDIR(ost.st_mode) || tf_known(t, (uint64_t)ost.st_ino);
		int anyx = (flags & RENAME_EXCHANGE) && have_new &&
			   (S_ISDIR(nst.st_mode) || tf_known(t, (uint64_t)nst.st_ino));
		if (any || anyx)
			tier_rec_moved(t, mv, (flags & RENAME_EXCHANGE) && have_new ? 2 : 1);
		/* A moved file's status changed (its ctime). */
		for (int side = 0; side < 1 + anyx; side++) {
			if (side == 0 && (S_ISDIR(ost.st_mode) || !any))
				continue;
			int fd = tsys_openat(side ? op.pfd : np.pfd, side ? op.name : np.name,
					     O_PATH | O_NOFOLLOW | O_CLOEXEC, 0);
			if (fd >= 0) {
				tier_note_ctime(t, fd);
				close(fd);
			}
		}
	}
	put_parent(t, &np);
	put_parent(t, &op);
	t->ns_dirty = 1;
	return TIER_END(rc);
}

int tier_linkat(ferrite_fs *fs, int olddirfd, const char *oldpath, int newdirfd,
		const char *newpath, int flags)
{
	BEGIN(fs);
	if (flags & ~(AT_SYMLINK_FOLLOW | AT_EMPTY_PATH))
		return TIER_END(-EINVAL);
	int own, ofd = get_obj(t, olddirfd, oldpath,
			       (flags & AT_EMPTY_PATH) |
				   ((flags & AT_SYMLINK_FOLLOW) ? 0 : AT_SYMLINK_NOFOLLOW),
			       &own);
	if (ofd < 0)
		return TIER_END(ofd);
	struct parent np;
	int rc = get_parent(t, newdirfd, newpath, &np);
	if (rc) {
		put_obj(ofd, own);
		return TIER_END(rc);
	}
	struct stat st;
	if (fstat(ofd, &st) == 0 && S_ISDIR(st.st_mode)) {
		rc = -EPERM;
	} else {
		char pp[64];
		proc_path(pp, sizeof pp, ofd);
		/* Through the magic link: the inode itself, symlinks too. */
		rc = tsys_linkat(AT_FDCWD, pp, np.pfd, np.name, AT_SYMLINK_FOLLOW) ? -errno : 0;
		if (!rc)
			tier_note_ctime(t, ofd);
	}
	put_parent(t, &np);
	put_obj(ofd, own);
	t->ns_dirty = 1;
	return TIER_END(rc);
}

/* ---- directory streams ---------------------------------------------------------------- */

struct tier_dir {
	ferrite_fs *fs; /* first (util.h) */
	DIR *d;
	int is_root;
	uint64_t root_ino;
	struct tier_dir *next; /* in tier.streams, so unmount can close it */
};

int tier_fdopendir(ferrite_fs *fs, int fd, ferrite_dir **out)
{
	BEGIN(fs);
	if (!out)
		return TIER_END(-EINVAL);
	struct tier_ofile *of = tfd_get(t, fd);
	if (!of)
		return TIER_END(-EBADF);
	int rc = 0;
	int kfd = -1;
	if (!S_ISDIR(of->type)) {
		rc = -ENOTDIR;
	} else {
		char pp[64];
		proc_path(pp, sizeof pp, of->kfd);
		kfd = tsys_openat(AT_FDCWD, pp, O_RDONLY | O_DIRECTORY | O_CLOEXEC, 0);
		if (kfd < 0)
			rc = -errno;
	}
	tfd_put(t, of);
	if (rc)
		return TIER_END(rc);
	struct tier_dir *d = calloc(1, sizeof(*d));
	DIR *dir = d ? tsys_fdopendir(kfd) : NULL;
	if (!dir) {
		close(kfd);
		free(d);
		return TIER_END(-ENOMEM);
	}
	d->fs = fs;
	d->d = dir;
	struct stat a, b;
	if (fstat(kfd, &a) == 0 && fstat(t->root_fd, &b) == 0 && a.st_ino == b.st_ino &&
	    a.st_dev == b.st_dev) {
		d->is_root = 1;
		d->root_ino = (uint64_t)b.st_ino;
	}
	pthread_mutex_lock(&t->fd_lock);
	d->next = t->streams;
	t->streams = d;
	pthread_mutex_unlock(&t->fd_lock);
	*out = (ferrite_dir *)d;
	return TIER_END(0);
}

int tier_opendir(ferrite_fs *fs, const char *path, ferrite_dir **out)
{
	int fd = tier_openat(fs, FERRITE_AT_ROOT, path, O_RDONLY | O_DIRECTORY, 0);
	if (fd < 0)
		return fd;
	int rc = tier_fdopendir(fs, fd, out);
	tfd_close(TIER(fs), fd);
	return rc;
}

int tier_readdir(ferrite_dir *dir, struct ferrite_dirent *ent)
{
	struct tier_dir *d = (struct tier_dir *)dir;
	fr_err_clear();
	if (!d || !ent)
		return TIER_END(-EINVAL);
	for (;;) {
		errno = 0;
		struct dirent *e = tsys_readdir(d->d);
		if (!e)
			return TIER_END(errno ? -errno : 0);
		ent->ino = e->d_ino;
		ent->off = e->d_off;
		ent->type = e->d_type;
		snprintf(ent->name, sizeof ent->name, "%s", e->d_name);
		if (d->is_root && !strcmp(e->d_name, ".."))
			ent->ino = d->root_ino; /* the tree's root is its own parent */
		return TIER_END(1);
	}
}

int64_t tier_telldir(ferrite_dir *dir)
{
	struct tier_dir *d = (struct tier_dir *)dir;
	if (!d)
		return -EINVAL;
	long p = telldir(d->d);
	return p < 0 ? -errno : p;
}

int tier_seekdir(ferrite_dir *dir, int64_t cookie)
{
	struct tier_dir *d = (struct tier_dir *)dir;
	if (!d || cookie < 0)
		return -EINVAL;
	seekdir(d->d, (long)cookie);
	return 0;
}

int tier_rewinddir(ferrite_dir *dir)
{
	struct tier_dir *d = (struct tier_dir *)dir;
	if (!d)
		return -EINVAL;
	rewinddir(d->d);
	return 0;
}

int tier_closedir(ferrite_dir *dir)
{
	struct tier_dir *d = (struct tier_dir *)dir;
	if (!d)
		return -EINVAL;
	struct tier *t = TIER(d->fs);
	pthread_mutex_lock(&t->fd_lock);
	struct tier_dir **pp = &t->streams;
	while (*pp && *pp != d)
		pp = &(*pp)->next;
	if (*pp)
		*pp = d->next;
	pthread_mutex_unlock(&t->fd_lock);
	tsys_closedir(d->d);
	free(d);
	return 0;
}

void tier_streams_close_all(struct tier *t)
{
	while (t->streams)
		tier_closedir((ferrite_dir *)t->streams);
}

/* ---- extended attributes --------------------------------------------------------------------- */

static int pool_xattr(const char *name)
{
	for (size_t i = 0; i < FR_ARRAY_SIZE(POOL_XATTRS); i++)
		if (name && !strcmp(name, POOL_XATTRS[i]))
			return 1;
	return 0;
}

enum { XA_GET, XA_SET, XA_LIST, XA_REMOVE };

/* One xattr call on the object (dirfd, path) or the descriptor fd. */
static ssize_t xattr_call(struct tier *t, int dirfd, const char *path, int flags, int op,
			  const char *name, void *value, size_t size, int xflags)
{
	if (op != XA_LIST && !name)
		return -EFAULT;
	ssize_t r;
	char pp[64 + 512];
	int own = 0;
	struct parent p;
	int fd = get_obj(t, dirfd, path, flags, &own);
	if (fd < 0)
		return fd;
	struct stat a, b;
	int have = fstat(fd, &a) == 0;
	int is_root =
	    have && fstat(t->root_fd, &b) == 0 && a.st_ino == b.st_ino && a.st_dev == b.st_dev;
	/* A symbolic link itself: through its parent (a magic link would be
	 * followed to the target, or taken for the link in /proc). */
	int use_parent = have && S_ISLNK(a.st_mode) && path && *path;
	if (use_parent) {
		int rc = get_parent(t, dirfd, path, &p);
		if (rc) {
			put_obj(fd, own);
			return rc;
		}
		snprintf(pp, sizeof pp, "/proc/self/fd/%d/%s", p.pfd, p.name);
	} else {
		proc_path(pp, sizeof pp, fd);
	}
	if (is_root && op != XA_LIST && pool_xattr(name)) {
		r = op == XA_SET ? -EPERM : -ENODATA; /* the tier's own mark */
	} else {
		switch (op) {
		case XA_GET:
			r = use_parent ? tsys_lgetxattr(pp, name, value, size)
				       : tsys_getxattr(pp, name, value, size);
			break;
		case XA_SET:
			r = use_parent ? tsys_lsetxattr(pp, name, value, size, xflags)
				       : tsys_setxattr(pp, name, value, size, xflags);
			break;
		case XA_REMOVE:
			r = use_parent ? tsys_lremovexattr(pp, name) : tsys_removexattr(pp, name);
			break;
		default:
			r = use_parent ? tsys_llistxattr(pp, value, size)
				       : tsys_listxattr(pp, value, size);
			break;
		}
		r = r < 0 ? -errno : r;
	}
	if ((op == XA_SET || op == XA_REMOVE) && r >= 0 && !use_parent)
		tier_note_ctime(t, fd);
	if (op == XA_LIST && r > 0 && is_root && value && size) {
		/* Hide the tier's own mark from the listing. */
		char *l = value;
		ssize_t out = 0;
		for (ssize_t i = 0; i < r;) {
			size_t n = strlen(l + i) + 1;
			if (!pool_xattr(l + i)) {
				memmove(l + out, l + i, n);
				out += (ssize_t)n;
			}
			i += (ssize_t)n;
		}
		r = out;
	}
	if (use_parent)
		put_parent(t, &p);
	put_obj(fd, own);
	if (op == XA_SET || op == XA_REMOVE)
		t->ns_dirty = 1;
	return r;
}

ssize_t tier_getxattrat(ferrite_fs *fs, int dirfd, const char *path, int flags, const char *name,
			void *value, size_t size)
{
	BEGIN(fs);
	return TIER_END_SS(xattr_call(t, dirfd, path, flags, XA_GET, name, value, size, 0));
}

int tier_setxattrat(ferrite_fs *fs, int dirfd, const char *path, int flags, const char *name,
		    const void *value, size_t size, int xattr_flags)
{
	BEGIN(fs);
	if (xattr_flags & ~(FERRITE_XATTR_CREATE | FERRITE_XATTR_REPLACE))
		return TIER_END(-EINVAL);
	if (size > FERRITE_XATTR_SIZE_MAX)
		return TIER_END(fr_err(-E2BIG, "attribute values are limited to 64 KiB"));
	return TIER_END(
	    (int)xattr_call(t, dirfd, path, flags, XA_SET, name, (void *)value, size, xattr_flags));
}

ssize_t tier_listxattrat(ferrite_fs *fs, int dirfd, const char *path, int flags, char *list,
			 size_t size)
{
	BEGIN(fs);
	return TIER_END_SS(xattr_call(t, dirfd, path, flags, XA_LIST, NULL, list, size, 0));
}

int tier_removexattrat(ferrite_fs *fs, int dirfd, const char *path, int flags, const char *name)
{
	BEGIN(fs);
	return TIER_END((int)xattr_call(t, dirfd, path, flags, XA_REMOVE, name, NULL, 0, 0));
}

/* ---- the rest -------------------------------------------------------------------------------- */

int tier_set_link_prefix(ferrite_fs *fs, const char *prefix)
{
	BEGIN(fs);
	char *p = NULL;
	if (prefix) {
		size_t n = strlen(prefix);
		while (n > 1 && prefix[n - 1] == '/')
			n--;
		if (prefix[0] != '/' || n < 2)
			return TIER_END(-EINVAL);
		p = strndup(prefix, n);
		if (!p)
			return TIER_END(-ENOMEM);
	}
	free(t->link_prefix);
	t->link_prefix = p;
	t->link_prefix_len = p ? strlen(p) : 0;
	return TIER_END(0);
}

ssize_t tier_copy_file_range(ferrite_fs *fs, int fd_in, off_t *off_in, int fd_out, off_t *off_out,
			     size_t len, unsigned flags)
{
	struct tier *t = TIER(fs);
	fr_err_clear();
	if (flags)
		return fr_err_finish(-EINVAL);
	struct tier_ofile *a = tfd_get(t, fd_in), *b = tfd_get(t, fd_out);
	int rc = !a || !b ? -EBADF : 0;
	if (!rc && (S_ISDIR(a->type) || S_ISDIR(b->type)))
		rc = -EISDIR;
	else if (!rc && (!S_ISREG(a->type) || !S_ISREG(b->type)))
		rc = -EINVAL;
	else if (!rc && (b->flags & O_APPEND))
		rc = -EBADF;
	else if (!rc && a->ino == b->ino) {
		/* Linux: the same file with overlapping ranges is EINVAL. */
		int64_t i = off_in ? *off_in : a->pos, o = off_out ? *off_out : b->pos;
		if (i < o + (int64_t)len && o < i + (int64_t)len)
			rc = -EINVAL;
	}
	if (a)
		tfd_put(t, a);
	if (b)
		tfd_put(t, b);
	if (rc)
		return fr_err_finish(rc);
	size_t bufsz = 256 * 1024;
	char *buf = malloc(bufsz);
	if (!buf)
		return -ENOMEM;
	ssize_t total = 0;
	while ((size_t)total < len) {
		size_t want = FR_MIN(bufsz, len - (size_t)total);
		struct iovec v = {buf, want};
		ssize_t r = tier_rw(fs, fd_in, &v, 1, off_in ? *off_in : -1, 0);
		if (r <= 0) {
			if (r < 0 && !total)
				total = r;
			break;
		}
		v.iov_len = (size_t)r;
		ssize_t w = tier_rw(fs, fd_out, &v, 1, off_out ? *off_out : -1, 1);
		if (w < 0) {
			if (!total)
				total = w;
			break;
		}
		if (off_in)
			*off_in += w;
		if (off_out)
			*off_out += w;
		total += w;
		if (w < r)
			break;
	}
	free(buf);
	return total;
}

/* ---- memory mappings ------------------------------------------------------------------ *
 *
 * A mapping is the kernel's mapping of the backing file, made after the
 * file's cached chunks are drained and dropped. While a file has one, its
 * reads and writes go straight to the backing file (a write is synced
 * before it returns), so the mapping and the calls see the same bytes;
 * stores through the mapping are durable after msync or munmap, as the
 * contract of ferrite_mmap says. */

struct tier_map {
	char *addr;
	size_t len;
	int shared;
	struct tier_file *tf;
	struct tier_map *next;
};

int tier_mmap(ferrite_fs *fs, int fd, void *addr, size_t len, int prot, int flags, off_t offset,
	      void **out)
{
	BEGIN(fs);
	if (!out)
		return TIER_END(-EFAULT);
	if (len == 0 || (offset & 4095))
		return TIER_END(-EINVAL);
	struct tier_ofile *of = tfd_get(t, fd);
	if (!of)
		return TIER_END(-EBADF);
	int rc = 0;
	struct tier_file *tf = of->tf;
	if ((of->flags & O_PATH) || S_ISDIR(of->type))
		rc = -EBADF;
	else if (!S_ISREG(of->type))
		rc = -ENODEV;
	struct tier_map *m = rc ? NULL : calloc(1, sizeof(*m));
	if (!rc && !m)
		rc = -ENOMEM;
	if (!rc && tf) {
		/* Everything of the file in the backing file first. */
		int epoch = t->consistency == TIER_EPOCH;
		if (epoch) {
			pthread_rwlock_wrlock(&t->epoch_lock);
			rc = tier_epoch_commit_locked(t);
		}
		pthread_rwlock_wrlock(&tf->lock);
		if (!rc && !tf->mapped) {
			rc = tier_drain(t, tf);
			if (!rc)
				tier_cache_drop_file(t, tf);
		}
		if (!rc)
			__atomic_fetch_add(&tf->mapped, 1, __ATOMIC_ACQ_REL);
		pthread_rwlock_unlock(&tf->lock);
		if (epoch)
			pthread_rwlock_unlock(&t->epoch_lock);
	}
	if (!rc) {
		void *p = mmap(addr, len, prot, flags, of->kfd, offset);
		if (p == MAP_FAILED) {
			rc = -errno;
			if (tf)
				__atomic_fetch_sub(&tf->mapped, 1, __ATOMIC_ACQ_REL);
		} else {
			m->addr = p;
			m->len = len;
			m->shared = (flags & MAP_SHARED) != 0;
			m->tf = tf;
			if (tf)
				tf_open_ref(t, tf); /* the mapping keeps it */
			pthread_mutex_lock(&t->map_lock);
			m->next = t->maps;
			t->maps = m;
			pthread_mutex_unlock(&t->map_lock);
			*out = p;
			m = NULL;
		}
	}
	free(m);
	tfd_put(t, of);
	return TIER_END(rc);
}

/* Calls fn on the parts of [addr, addr + len) that are mappings; returns the
 * bytes covered. remove: the mappings covered are forgotten (a partial cover
 * keeps the rest). */
static ssize_t maps_in(struct tier *t, char *addr, size_t len, int remove,
		       void (*fn)(struct tier *t, struct tier_map *m, char *a, size_t n, int arg),
		       int arg)
{
	ssize_t covered = 0;
	pthread_mutex_lock(&t->map_lock);
	for (struct tier_map **pp = &t->maps; *pp;) {
		struct tier_map *m = *pp;
		char *a = FR_MAX(addr, m->addr), *b = FR_MIN(addr + len, m->addr + m->len);
		if (a >= b) {
			pp = &m->next;
			continue;
		}
		covered += b - a;
		if (fn)
			fn(t, m, a, (size_t)(b - a), arg);
		if (remove && a == m->addr && b == m->addr + m->len) {
			*pp = m->next;
			if (m->tf) {
				__atomic_fetch_sub(&m->tf->mapped, 1, __ATOMIC_ACQ_REL);
				tf_open_put(t, m->tf);
			}
			free(m);
			continue;
		}
		if (remove && a == m->addr) { /* the front goes */
			m->len -= (size_t)(b - a);
			m->addr = b;
		} else if (remove && b == m->addr + m->len) {
			m->len -= (size_t)(b - a);
		}
		pp = &m->next;
	}
	pthread_mutex_unlock(&t->map_lock);
	return covered;
}

static void sync_part(struct tier *t, struct tier_map *m, char *a, size_t n, int flags)
{
	(void)t;
	if (!m->shared)
		return;
	char *pa = (char *)FR_ALIGN_DOWN((uintptr_t)a, (uintptr_t)4096);
	msync(pa, n + (size_t)(a - pa), flags);
}

static void end_part(struct tier *t, struct tier_map *m, char *a, size_t n, int arg)
{
	(void)arg;
	sync_part(t, m, a, n, MS_SYNC);
	/* An inaccessible reservation until the caller unmaps (ferrite.h). */
	mmap(a, n, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE, -1, 0);
}

ssize_t tier_munmap(ferrite_fs *fs, void *addr, size_t len)
{
	struct tier *t = TIER(fs);
	if (!t->maps)
		return 0;
	return maps_in(t, addr, len, 1, end_part, 0);
}

ssize_t tier_msync(ferrite_fs *fs, void *addr, size_t len, int flags)
{
	struct tier *t = TIER(fs);
	if (!t->maps)
		return 0;
	return maps_in(t, addr, len, 0, sync_part, (flags & MS_ASYNC) ? MS_ASYNC : MS_SYNC);
}

ssize_t tier_mprotect(ferrite_fs *fs, void *addr, size_t len, int prot)
{
	struct tier *t = TIER(fs);
	(void)prot; /* the kernel's mapping: mprotect(2) did it all */
	if (!t->maps)
		return 0;
	return maps_in(t, addr, len, 0, NULL, 0);
}

void tier_maps_end(struct tier *t)
{
	while (t->maps)
		maps_in(t, t->maps->addr, t->maps->len, 1, end_part, 0);
}
