/*
 * attr.c -- the tier engine's C API: stat with the cache's view, and the attribute calls.
 * Invariants, crash argument and credentials: ns.h.
 */
#include "tier/ns.h"

/* ---- stat with the cache's view ----------------------------------------------------- */

void tier_overlay_stat(struct tier *t, struct stat *st)
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
	int own, fd = tier_get_obj(t, dirfd, path, flags, &own);
	if (fd < 0)
		return TIER_END(fd);
	int rc = fstat(fd, st) ? -errno : 0;
	tier_put_obj(fd, own);
	if (!rc)
		tier_overlay_stat(t, st);
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
		tier_overlay_stat(t, st);
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
	int own, fd = tier_get_obj(t, dirfd, path, flags, &own);
	if (fd < 0)
		return TIER_END(fd);
	int rc = tsys_faccessat(fd, "", mode, AT_EMPTY_PATH | AT_EACCESS) ? -errno : 0;
	tier_put_obj(fd, own);
	return TIER_END(rc);
}

/* ---- attributes ------------------------------------------------------------------------ */

int tier_fchmodat(ferrite_fs *fs, int dirfd, const char *path, mode_t mode, int flags)
{
	BEGIN(fs);
	if (flags & ~(AT_SYMLINK_NOFOLLOW | AT_EMPTY_PATH))
		return TIER_END(-EINVAL);
	int own, fd = tier_get_obj(t, dirfd, path, flags, &own);
	if (fd < 0)
		return TIER_END(fd);
	struct stat st;
	int rc = fstat(fd, &st) ? -errno : 0;
	if (!rc && S_ISLNK(st.st_mode))
		rc = -EOPNOTSUPP;
	char pp[64];
	tier_proc_path(pp, sizeof pp, fd);
	if (!rc && tsys_chmod(pp, mode & 07777) != 0)
		rc = -errno;
	if (!rc)
		tier_note_ctime(t, fd);
	__atomic_add_fetch(&t->attr_gen, 1, __ATOMIC_RELEASE); /* set-id bits: tier_drop_setid */
	tier_put_obj(fd, own);
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
	int own, fd = tier_get_obj(t, dirfd, path, flags, &own);
	if (fd < 0)
		return TIER_END(fd);
	int rc = tsys_fchownat(fd, "", uid, gid, AT_EMPTY_PATH) ? -errno : 0;
	if (!rc)
		tier_note_ctime(t, fd);
	__atomic_add_fetch(&t->attr_gen, 1, __ATOMIC_RELEASE); /* set-id bits: tier_drop_setid */
	tier_put_obj(fd, own);
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
		rc = tier_get_parent(t, dirfd, path, &p);
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
		tier_put_parent(t, &p);
	} else {
		int own, fd = tier_get_obj(t, dirfd, path ? path : "",
					   flags | (path ? 0 : AT_EMPTY_PATH), &own);
		if (fd < 0)
			return TIER_END(fd);
		char pp[64];
		tier_proc_path(pp, sizeof pp, fd);
		rc = tsys_utimensat(AT_FDCWD, pp, times, 0) ? -errno : 0;
		if (!rc)
			note_utimes(t, fd, times);
		tier_put_obj(fd, own);
	}
	t->ns_dirty = 1;
	return TIER_END(rc);
}

int tier_futimens(ferrite_fs *fs, int fd, const struct timespec times[2])
{
	return tier_utimensat(fs, fd, NULL, times, AT_EMPTY_PATH);
}
