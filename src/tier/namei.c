/*
 * namei.c -- the tier engine's C API: the calls that change names.
 * Invariants, crash argument and credentials: ns.h.
 */
#include "tier/ns.h"

/* ---- names --------------------------------------------------------------------------------- */

int tier_mkdirat(ferrite_fs *fs, int dirfd, const char *path, mode_t mode)
{
	BEGIN(fs);
	struct parent p;
	int rc = tier_get_parent(t, dirfd, path, &p);
	if (rc)
		return TIER_END(rc);
	rc = tsys_mkdirat(p.pfd, p.name, mode & 07777) ? -errno : 0;
	if (!rc && (rc = tier_exact_mode(p.pfd, p.name, mode)))
		tsys_unlinkat(p.pfd, p.name, AT_REMOVEDIR); /* nothing made but as asked */
	tier_put_parent(t, &p);
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
	int rc = tier_get_parent(t, dirfd, path, &p);
	if (rc)
		return TIER_END(rc);
	rc = tsys_mknodat(p.pfd, p.name, type | (mode & 07777), rdev) ? -errno : 0;
	if (!rc && (rc = tier_exact_mode(p.pfd, p.name, mode)))
		tsys_unlinkat(p.pfd, p.name, 0); /* nothing made but as asked */
	tier_put_parent(t, &p);
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
	int rc = tier_get_parent(t, dirfd, path, &p);
	if (rc)
		return TIER_END(rc);
	rc = tsys_symlinkat(target, p.pfd, p.name) ? -errno : 0;
	tier_put_parent(t, &p);
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
		int own, fd = tier_get_obj(t, dirfd, path, AT_EMPTY_PATH, &own);
		if (fd < 0)
			return TIER_END_SS(fd);
		r = tsys_readlinkat(fd, "", buf, size);
		r = r < 0 ? -errno : r;
		tier_put_obj(fd, own);
	} else {
		struct parent p;
		int rc = tier_get_parent(t, dirfd, path, &p);
		if (rc)
			return TIER_END_SS(rc);
		r = tsys_readlinkat(p.pfd, p.name, buf, size);
		r = r < 0 ? -errno : r;
		tier_put_parent(t, &p);
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
	int rc = tier_get_parent(t, dirfd, path, &p);
	if (rc)
		return TIER_END(rc);
	int keep = -1;
	struct tier_file *tf =
	    (flags & AT_REMOVEDIR) ? NULL : remove_begin(t, p.pfd, p.name, &keep);
	rc = tsys_unlinkat(p.pfd, p.name, flags) ? -errno : 0;
	remove_done(t, tf, rc == 0);
	remove_keep(t, keep, rc == 0);
	tier_put_parent(t, &p);
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
	int rc = tier_get_parent(t, olddirfd, oldpath, &op);
	if (rc)
		return TIER_END(rc);
	rc = tier_get_parent(t, newdirfd, newpath, &np);
	if (rc) {
		tier_put_parent(t, &op);
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
	tier_put_parent(t, &np);
	tier_put_parent(t, &op);
	t->ns_dirty = 1;
	return TIER_END(rc);
}

int tier_linkat(ferrite_fs *fs, int olddirfd, const char *oldpath, int newdirfd,
		const char *newpath, int flags)
{
	BEGIN(fs);
	if (flags & ~(AT_SYMLINK_FOLLOW | AT_EMPTY_PATH))
		return TIER_END(-EINVAL);
	int own, ofd = tier_get_obj(t, olddirfd, oldpath,
				    (flags & AT_EMPTY_PATH) |
					((flags & AT_SYMLINK_FOLLOW) ? 0 : AT_SYMLINK_NOFOLLOW),
				    &own);
	if (ofd < 0)
		return TIER_END(ofd);
	struct parent np;
	int rc = tier_get_parent(t, newdirfd, newpath, &np);
	if (rc) {
		tier_put_obj(ofd, own);
		return TIER_END(rc);
	}
	struct stat st;
	if (fstat(ofd, &st) == 0 && S_ISDIR(st.st_mode)) {
		rc = -EPERM;
	} else {
		char pp[64];
		tier_proc_path(pp, sizeof pp, ofd);
		/* Through the magic link: the inode itself, symlinks too. */
		rc = tsys_linkat(AT_FDCWD, pp, np.pfd, np.name, AT_SYMLINK_FOLLOW) ? -errno : 0;
		if (!rc)
			tier_note_ctime(t, ofd);
	}
	tier_put_parent(t, &np);
	tier_put_obj(ofd, own);
	t->ns_dirty = 1;
	return TIER_END(rc);
}
