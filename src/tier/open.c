/*
 * open.c -- the tier engine's C API: opening and creating files.
 * Invariants, crash argument and credentials: ns.h.
 */
#include "tier/ns.h"

/* ---- opening -------------------------------------------------------------------------- */

/* The mode the caller asked for, whatever the process umask took away.
 * 0, or -errno when the node just made does not have that mode. */
int tier_exact_mode(int fd, const char *name, mode_t mode)
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
	vfs_file_init(&of->f, flags & (O_ACCMODE | O_APPEND | O_NONBLOCK | O_PATH | O_DIRECTORY |
				       O_NOFOLLOW | O_CLOEXEC | O_DIRECT | O_SYNC | O_DSYNC));
	of->ino = (uint64_t)st.st_ino;
	of->type = st.st_mode & S_IFMT;
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
		vfs_file_fini(&of->f);
		free(of);
		return rc;
	}
	int fd = tfd_install(t, of);
	if (fd < 0) {
		if (of->tf)
			tf_open_put(t, of->tf);
		close(kfd);
		vfs_file_fini(&of->f);
		free(of);
	}
	return fd;
}

/* Flags for the kernel descriptor (N1). An open to execute (FERRITE_O_EXEC)
 * first only names the file (exec_reopen). */
static int kernel_flags(int flags)
{
	if (flags & FERRITE_O_EXEC)
		return O_PATH | O_CLOEXEC | (flags & O_NOFOLLOW);
	int k = flags & ~(O_TRUNC | O_APPEND | O_DIRECT | O_SYNC | O_DSYNC | O_ASYNC);
	return k | O_CLOEXEC;
}

/* An open to execute, of the file kfd names (O_PATH, closed here): a
 * regular file the caller's ids may execute, as the kernel's exec checks;
 * then it is opened for reading with the process's own ids, since the
 * caller's may not read it (mode 0711). The new descriptor or -errno. */
static int exec_reopen(int kfd)
{
	struct stat st;
	int rc = 0;
	if (fstat(kfd, &st) != 0)
		rc = -errno;
	else if (!S_ISREG(st.st_mode) ||
		 tsys_faccessat(kfd, "", X_OK, AT_EMPTY_PATH | AT_EACCESS) != 0)
		rc = -EACCES;
	if (!rc) {
		char pp[64];
		tier_proc_path(pp, sizeof pp, kfd);
		int applied = tier_creds_applied;
		tier_creds_done();
		rc = tsys_openat(AT_FDCWD, pp, O_RDONLY | O_CLOEXEC, 0);
		if (rc < 0)
			rc = -errno;
		if (applied)
			tier_creds_apply();
	}
	close(kfd);
	return rc;
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
	int rc = tier_start_dir(t, dirfd, path, &kdir, &rest, &held);
	if (rc)
		return TIER_END(rc);
	if (!*rest) {
		tier_end_dir(t, held);
		return TIER_END(-ENOENT);
	}
	int kf = kernel_flags(flags), created = 0, kfd;
	size_t rl = strlen(rest);
	if ((flags & O_CREAT) && !(flags & O_EXCL) && rest[rl - 1] != '/') {
		/* Was it made here? Then its mode is set exactly (umask aside). */
		kfd = tier_kopen(t, kdir, rest, kf & ~O_CREAT, 0);
		struct stat st;
		if (kfd >= 0 && fstat(kfd, &st) == 0 && S_ISDIR(st.st_mode)) {
			close(kfd); /* O_CREAT never opens a directory */
			kfd = -EISDIR;
		}
		if (kfd == -ENOENT) {
			kfd = tier_kopen(t, kdir, rest, kf | O_EXCL, mode);
			if (kfd == -EEXIST) /* a dangling symlink: its target is made */
				kfd = tier_kopen(t, kdir, rest, kf, mode);
			created = kfd >= 0;
		}
	} else {
		kfd = tier_kopen(t, kdir, rest, kf, mode);
		created = kfd >= 0 && (flags & O_CREAT);
	}
	tier_end_dir(t, held);
	if (kfd >= 0 && (flags & FERRITE_O_EXEC))
		kfd = exec_reopen(kfd);
	if (kfd < 0)
		return TIER_END(kfd);
	if (created) {
		t->ns_dirty = 1;
		rc = tier_exact_mode(kfd, NULL, mode);
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
	tier_proc_path(pp, sizeof pp, of->kfd);
	int kfd = tsys_openat(AT_FDCWD, pp, kernel_flags(flags) & ~O_NOFOLLOW, 0);
	tfd_put(t, of);
	if (kfd < 0)
		return TIER_END(-errno);
	if (flags & FERRITE_O_EXEC) {
		kfd = exec_reopen(kfd);
		if (kfd < 0)
			return TIER_END(kfd);
	}
	int trunc = (flags & O_TRUNC) && (flags & O_ACCMODE) != O_RDONLY;
	return TIER_END(install(t, kfd, flags, trunc));
}

/* Closes a descriptor; keeps the thread's error message. */
int tfd_close(struct tier *t, int fd)
{
	struct tier_ofile *of = (struct tier_ofile *)vfs_fd_take(&t->fdt, fd);
	if (!of)
		return -EBADF;
	/* POSIX: closing any descriptor of a file drops the process's record
	 * locks on it */
	pthread_mutex_lock(&t->lk_mutex);
	vfs_lock_closed(t->lk, 0, of->ino);
	pthread_mutex_unlock(&t->lk_mutex);
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
	int fl = of->f.flags & (O_ACCMODE | O_APPEND | O_NONBLOCK | O_PATH | O_DIRECTORY);
	tfd_put(t, of);
	return TIER_END(fl);
}

int tier_fd_share(ferrite_fs *fs, int fd, int op, uint32_t *token)
{
	BEGIN(fs);
	(void)t, (void)fd, (void)op, (void)token;
	return TIER_END(fr_err(-EOPNOTSUPP, "a tiered pool is held by one process"));
}

int tier_setfl(ferrite_fs *fs, int fd, int flags)
{
	BEGIN(fs);
	struct tier_ofile *of = tfd_get(t, fd);
	if (!of)
		return TIER_END(-EBADF);
	int rc = 0;
	if (of->f.flags & O_PATH)
		rc = -EBADF;
	else
		__atomic_store_n(&of->f.flags, (of->f.flags & ~O_APPEND) | (flags & O_APPEND),
				 __ATOMIC_RELAXED);
	tfd_put(t, of);
	return TIER_END(rc);
}
