/*
 * namei.c -- namespace operations: create, mkdir, rmdir, unlink, rename
 * (plain, over a target, across directories, NOREPLACE, EXCHANGE), link,
 * symlink, readlink.
 *
 * Each operation resolves its paths, locks every inode it changes (parents
 * and children, in stripe order), re-checks under the locks what the walk
 * found, stages all changes in one transaction and commits it: the operation
 * is atomic (all of it or none after a crash) and durable on return.
 *
 * Invariants: N1 a directory's i_nlink is 2 + its subdirectories;
 *             N2 a directory's i_parent names the directory holding it;
 *             N3 no directory is its own ancestor (rename checks under
 *               rename_lock, which every cross-directory rename holds).
 * Locking: see docs/contracts.md#operations.
 */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>

#include "fs/fs.h"
#include "persist/pm.h"

static unsigned dtype_of(uint32_t mode)
{
	return (mode & S_IFMT) >> 12; /* DT_* values are the type bits of the mode */
}

static int is_dot(const struct nameidata *nd)
{
	return (nd->len == 1 && nd->name[0] == '.') ||
	       (nd->len == 2 && nd->name[0] == '.' && nd->name[1] == '.');
}

/* May the caller remove or replace child in dir? (write+search, sticky) */
static int may_delete(const struct vfs_cred *c, struct fr_inode *dir, struct fr_inode *child)
{
	int rc = perm_check(c, NULL, dir, 3);
	if (rc)
		return rc;
	if ((dir->i_mode & S_ISVTX) && c->uid != 0 && c->uid != child->i_uid &&
	    c->uid != dir->i_uid)
		return -EPERM;
	return 0;
}

/* Re-finds the walk's last component under the parent's lock. */
static uint64_t relookup(ferrite_fs *fs, struct tx *tx, struct nameidata *nd, struct fr_dentry **dp)
{
	struct fr_dentry *d = NULL;
	if (dir_lookup(fs, tx, ino_ptr(fs, nd->dir_ino), nd->name, nd->len, &d))
		return 0;
	if (dp)
		*dp = d;
	return rd8(tx, &d->d_ino);
}

static void touch_dir(struct tx *tx, struct fr_inode *dir)
{
	struct timespec now;
	fs_now(&now);
	ino_set_times(tx, dir, T_MTIME | T_CTIME, &now);
}

static void touch_ctime(struct tx *tx, struct fr_inode *ip)
{
	struct timespec now;
	fs_now(&now);
	ino_set_times(tx, ip, T_CTIME, &now);
}

/* Creates name in the locked parent; the caller commits. */
static int create_locked(ferrite_fs *fs, struct tx *tx, struct nameidata *nd, mode_t mode,
			 uint64_t *ino)
{
	const struct vfs_cred *c = cred_get();
	struct fr_inode *dir = ino_ptr(fs, nd->dir_ino);
	int rc = perm_check(c, NULL, dir, 3);
	if (rc)
		return rc;
	gid_t gid = c->gid;
	if (dir->i_mode & S_ISGID) {
		gid = dir->i_gid;
		if (S_ISDIR(mode))
			mode |= S_ISGID;
	}
	rc = ino_alloc(fs, tx, mode, c->uid, gid, S_ISDIR(mode) ? nd->dir_ino : 0, ino);
	if (rc)
		return rc;
	rc = dir_insert(fs, tx, dir, nd->name, nd->len, *ino, dtype_of(mode));
	if (rc)
		return rc;
	if (S_ISDIR(mode))
		tx_set4(tx, &dir->i_nlink, tx_get4(tx, &dir->i_nlink) + 1);
	touch_dir(tx, dir);
	return 0;
}

/* Creates the walk's last component under the parent lock the walk kept.
 * Device numbers live in the inline area, unused by anything but symlinks. */
static int create_in(ferrite_fs *fs, struct nameidata *nd, mode_t mode, dev_t rdev, uint64_t *ino)
{
	struct log_ctx *lc = op_begin(fs);
	if (!lc)
		return -ENOMEM;
	int rc = create_locked(fs, lc->tx, nd, mode, ino);
	if (!rc && (S_ISCHR(mode) || S_ISBLK(mode)))
		tx_set8(lc->tx, ino_ptr(fs, *ino)->i_inline, (uint64_t)rdev);
	rc = op_commit_or_abort(fs, lc, rc);
	op_end(fs, lc);
	return rc;
}

int fs_create(ferrite_fs *fs, uint64_t at, const char *path, int flags, mode_t mode, uint64_t *ino,
	      int *created)
{
	struct nameidata nd;
	int follow = (flags & (O_EXCL | O_NOFOLLOW)) ? 0 : LOOKUP_FOLLOW;
	*created = 0;
	int rc = path_walk(fs, at, path, LOOKUP_PARENT | LOOKUP_LOCK_PARENT | follow, &nd);
	if (rc)
		return rc;
	if (nd.len == 0 || is_dot(&nd))
		rc = (flags & O_EXCL) ? -EEXIST : -EISDIR;
	else if (nd.ino && (flags & O_EXCL))
		rc = -EEXIST;
	else if (nd.trailing_slash)
		rc = -EISDIR; /* O_CREAT names a regular file, never "name/" */
	else if (nd.ino)
		*ino = nd.ino; /* exists: the caller opens it */
	else if (!(rc = create_in(fs, &nd, S_IFREG | (mode & 07777), 0, ino)))
		*created = 1;
	nd_unlock(fs, &nd);
	return rc;
}

int fs_mknod(ferrite_fs *fs, uint64_t at, const char *path, mode_t mode, dev_t rdev)
{
	switch (mode & S_IFMT) {
	case S_IFREG:
	case S_IFDIR:
	case S_IFIFO:
	case S_IFSOCK:
		break;
	case S_IFCHR:
	case S_IFBLK:
		if (cred_get()->uid != 0)
			return -EPERM; /* CAP_MKNOD */
		break;
	default:
		return -EINVAL;
	}
	struct nameidata nd;
	int rc = path_walk(fs, at, path, LOOKUP_PARENT | LOOKUP_LOCK_PARENT, &nd);
	if (rc)
		return rc;
	uint64_t ino;
	if (nd.len == 0 || is_dot(&nd) || nd.ino)
		rc = -EEXIST;
	else if (nd.trailing_slash && !S_ISDIR(mode))
		rc = -ENOENT;
	else
		rc = create_in(fs, &nd, (mode & S_IFMT) | (mode & 07777), rdev, &ino);
	nd_unlock(fs, &nd);
	return rc;
}

/* Drops the last link of ino inside tx: kept as a null file, released now,
 * or parked on the orphan list if open or too large (*later set: release
 * after commit). */
static int drop_inode(ferrite_fs *fs, struct tx *tx, uint64_t ino, int *later)
{
	*later = 0;
	if (vn_is_open(fs, ino)) {
		orphan_add(fs, tx, ino);
		return 0;
	}
	if (!null_recycle(fs, tx, ino))
		return 0; /* a null file now, for the next create (nullfile.c) */
	int rc = ino_drop_tx(fs, tx, ino);
	if (rc == -E2BIG) {
		orphan_add(fs, tx, ino);
		*later = 1;
		return 0;
	}
	return rc;
}

static int remove_common(ferrite_fs *fs, uint64_t at, const char *path, int is_rmdir)
{
	struct nameidata nd;
	const struct vfs_cred *c = cred_get();
	int rc = path_walk(fs, at, path, LOOKUP_PARENT, &nd);
	if (rc)
		return rc;
	if (nd.len == 0)
		return is_rmdir ? -EBUSY : -EISDIR;
	if (is_dot(&nd))
		return is_rmdir ? (nd.len == 1 ? -EINVAL : -ENOTEMPTY) : -EISDIR;
	if (!nd.ino)
		return -ENOENT;
	for (;;) {
		uint64_t locks[2] = {nd.dir_ino, nd.ino};
		ino_lock_many(fs, locks, 2);
		rc = nd_dir_still_valid(fs, &nd);
		struct fr_dentry *d = NULL;
		uint64_t child = rc ? 0 : relookup(fs, NULL, &nd, &d);
		if (!rc && !child)
			rc = -ENOENT;
		if (!rc && child != nd.ino) {
			ino_unlock_many(fs, locks, 2);
			nd.ino = child; /* changed under us: lock the new one */
			continue;
		}
		int later = 0;
		if (!rc) {
			struct fr_inode *dir = ino_ptr(fs, nd.dir_ino), *cp = ino_ptr(fs, child);
			int isdir = S_ISDIR(cp->i_mode);
			if (is_rmdir && !isdir)
				rc = -ENOTDIR;
			else if (!is_rmdir && isdir)
				rc = -EISDIR;
			else if (!is_rmdir && nd.trailing_slash)
				rc = -ENOTDIR;
			else if (is_rmdir && cp->i_nentries)
				rc = -ENOTEMPTY;
			else if (child == fs->root_ino)
				rc = -EBUSY;
			else
				rc = may_delete(c, dir, cp);
			if (!rc) {
				struct log_ctx *lc = op_begin(fs);
				if (!lc) {
					rc = -ENOMEM;
				} else {
					struct tx *tx = lc->tx;
					/* The dentry's pool address, which the transaction stages
					 * against (a lookup without one may return the mapping). */
					if (relookup(fs, tx, &nd, &d) != child)
						rc = tx_damaged(tx,
								"directory %llu changed under its "
								"lock",
								(unsigned long long)nd.dir_ino);
					if (!rc)
						rc = dir_remove(fs, tx, dir, d);
					touch_dir(tx, dir);
					if (isdir) {
						tx_set4(tx, &dir->i_nlink,
							tx_get4(tx, &dir->i_nlink) - 1);
						tx_set4(tx, &cp->i_nlink, 0);
					} else {
						tx_set4(tx, &cp->i_nlink,
							tx_get4(tx, &cp->i_nlink) - 1);
						touch_ctime(tx, cp);
					}
					if (!rc && tx_get4(tx, &cp->i_nlink) == 0)
						rc = drop_inode(fs, tx, child, &later);
					rc = op_commit_or_abort(fs, lc, rc);
					op_end(fs, lc);
				}
			}
		}
		ino_unlock_many(fs, locks, 2);
		if (!rc && later)
			rc = ino_release(fs, NULL, nd.ino);
		return rc;
	}
}

int fs_unlink(ferrite_fs *fs, uint64_t at, const char *path)
{
	return remove_common(fs, at, path, 0);
}

int fs_rmdir(ferrite_fs *fs, uint64_t at, const char *path)
{
	return remove_common(fs, at, path, 1);
}

int fs_link(ferrite_fs *fs, uint64_t oat, const char *oldpath, int follow, uint64_t nat,
	    const char *newpath)
{
	struct nameidata on, nn;
	int rc = 0;
	if (oldpath) {
		rc = path_walk(fs, oat, oldpath, follow ? LOOKUP_FOLLOW : 0, &on);
	} else {
		memset(&on, 0, sizeof(on));
		on.ino = oat;
	}
	if (rc)
		return rc;
	if (S_ISDIR(ino_ptr(fs, on.ino)->i_mode))
		return -EPERM;
	rc = path_walk(fs, nat, newpath, LOOKUP_PARENT, &nn);
	if (rc)
		return rc;
	if (nn.len == 0 || is_dot(&nn) || nn.ino)
		return -EEXIST;
	if (nn.trailing_slash)
		return -ENOENT;
	uint64_t locks[2] = {nn.dir_ino, on.ino};
	ino_lock_many(fs, locks, 2);
	rc = nd_dir_still_valid(fs, &nn);
	struct fr_inode *ip = ino_ptr(fs, on.ino);
	if (!rc && (!ino_valid(fs, on.ino) || ip->i_nlink == 0))
		rc = -ENOENT;
	if (!rc && relookup(fs, NULL, &nn, NULL))
		rc = -EEXIST;
	if (!rc && ip->i_nlink >= 65000)
		rc = -EMLINK;
	if (!rc)
		rc = perm_check(cred_get(), NULL, ino_ptr(fs, nn.dir_ino), 3);
	if (!rc) {
		struct log_ctx *lc = op_begin(fs);
		if (!lc) {
			rc = -ENOMEM;
		} else {
			struct tx *tx = lc->tx;
			struct fr_inode *dir = ino_ptr(fs, nn.dir_ino);
			rc = dir_insert(fs, tx, dir, nn.name, nn.len, on.ino, dtype_of(ip->i_mode));
			if (!rc) {
				tx_set4(tx, &ip->i_nlink, tx_get4(tx, &ip->i_nlink) + 1);
				touch_ctime(tx, ip);
				touch_dir(tx, dir);
			}
			rc = op_commit_or_abort(fs, lc, rc);
			op_end(fs, lc);
		}
	}
	ino_unlock_many(fs, locks, 2);
	return rc;
}

int fs_symlink(ferrite_fs *fs, const char *target, uint64_t at, const char *linkpath)
{
	if (!target)
		return -EFAULT;
	size_t tlen = strnlen(target, FS_PATH_MAX);
	if (tlen == 0)
		return -ENOENT;
	if (tlen >= FS_PATH_MAX)
		return -ENAMETOOLONG;
	struct nameidata nd;
	int rc = path_walk(fs, at, linkpath, LOOKUP_PARENT | LOOKUP_LOCK_PARENT, &nd);
	if (rc)
		return rc;
	struct log_ctx *lc = NULL;
	if (nd.len == 0 || is_dot(&nd) || nd.ino)
		rc = -EEXIST;
	else if (nd.trailing_slash)
		rc = -ENOENT;
	else if (!(lc = op_begin(fs)))
		rc = -ENOMEM;
	if (lc) {
		struct tx *tx = lc->tx;
		uint64_t ino = 0;
		rc = create_locked(fs, tx, &nd, S_IFLNK | 0777, &ino);
		struct fr_inode *ip = rc ? NULL : ino_ptr(fs, ino);
		if (!rc && tlen <= I_INLINE_MAX) {
			tx_set(tx, ip->i_inline, target, tlen);
		} else if (!rc) {
			/* Long targets live in the link's partition, written into
			 * pages that are new in this transaction. */
			rc = dp_prepare(fs, tx, ip, 0, tlen, 0);
			for (uint64_t off = 0; !rc && off < tlen; off += FR_PAGE_SIZE) {
				uint64_t phys = dp_phys(fs, tx, ip, off);
				if (!phys) { /* 0 would be the superblock */
					rc = tx_damaged(tx, "symlink %llu lost a fresh page",
							(unsigned long long)ino);
					break;
				}
				pm_copy_nt(meta_ptr(&fs->m, phys), target + off,
					   FR_MIN(FR_PAGE_SIZE, tlen - off));
				tx_mark_fresh(tx);
			}
		}
		if (!rc)
			tx_set8(tx, &ip->i_size, tlen);
		rc = op_commit_or_abort(fs, lc, rc);
		op_end(fs, lc);
	}
	nd_unlock(fs, &nd);
	return rc;
}

ssize_t fs_readlink(ferrite_fs *fs, uint64_t at, const char *path, char *buf, size_t size)
{
	struct nameidata nd;
	int rc = 0;
	if (path) {
		rc = path_walk(fs, at, path, 0, &nd);
	} else {
		nd.ino = at; /* readlinkat(fd, "") of an O_PATH|O_NOFOLLOW link */
	}
	if (rc)
		return rc;
	if (!S_ISLNK(ino_ptr(fs, nd.ino)->i_mode))
		return -EINVAL;
	char tgt[FS_PATH_MAX + 1];
	size_t len;
	rc = fs_readlink_ino(fs, nd.ino, tgt, sizeof(tgt), &len);
	if (rc)
		return rc;
	size_t n = FR_MIN(len, size);
	memcpy(buf, tgt, n);
	return (ssize_t)n;
}

/* Is anc an ancestor of (or equal to) dir? Directory parentage only changes
 * under rename_lock, which the caller holds. */
/* 1 if anc is dir or above it, 0 if not; -EUCLEAN if the way up is
 * damaged: a parent that is no live inode (i_parent is read from the pool)
 * or no way up to the root at all. */
static int is_ancestor(ferrite_fs *fs, uint64_t anc, uint64_t dir)
{
	for (int depth = 0; depth < 1 << 20; depth++) {
		if (dir == anc)
			return 1;
		if (dir == fs->root_ino)
			return 0;
		uint64_t up = ino_ptr(fs, dir)->i_parent;
		if (!ino_valid(fs, up))
			return fr_err(-EUCLEAN,
				      "directory %llu names no live parent (run `ferrite fsck`)",
				      (unsigned long long)dir);
		dir = up;
	}
	return fr_err(-EUCLEAN, "directory %llu has no way up to the root (run `ferrite fsck`)",
		      (unsigned long long)dir);
}

static int rename_checks(ferrite_fs *fs, struct nameidata *on, struct nameidata *nn, uint64_t src,
			 uint64_t dst, unsigned flags)
{
	const struct vfs_cred *c = cred_get();
	struct fr_inode *sp = ino_ptr(fs, src), *dp = dst ? ino_ptr(fs, dst) : NULL;
	struct fr_inode *odir = ino_ptr(fs, on->dir_ino), *ndir = ino_ptr(fs, nn->dir_ino);
	int sdir = S_ISDIR(sp->i_mode);
	if (flags & RENAME_EXCHANGE) {
		if ((on->trailing_slash && !sdir) ||
		    (nn->trailing_slash && dp && !S_ISDIR(dp->i_mode)))
			return -ENOTDIR;
	} else if ((on->trailing_slash || nn->trailing_slash) && !sdir) {
		return -ENOTDIR;
	}
	if (flags & RENAME_EXCHANGE) {
		if (!dst)
			return -ENOENT;
	} else if (dst && (flags & RENAME_NOREPLACE)) {
		return -EEXIST;
	}
	int rc = may_delete(c, odir, sp);
	if (!rc)
		rc = dst ? may_delete(c, ndir, dp) : perm_check(c, NULL, ndir, 3);
	if (rc)
		return rc;
	if (sdir && (rc = is_ancestor(fs, src, nn->dir_ino)) != 0)
		return rc < 0 ? rc : -EINVAL;
	/* Moving a directory rewrites its "..": needs write permission on it. */
	if (sdir && on->dir_ino != nn->dir_ino && (rc = perm_check(c, NULL, sp, 2)))
		return rc;
	if ((flags & RENAME_EXCHANGE) && S_ISDIR(dp->i_mode) &&
	    (rc = is_ancestor(fs, dst, on->dir_ino)) != 0)
		return rc < 0 ? rc : -EINVAL;
	if (dst && !(flags & RENAME_EXCHANGE)) {
		if (sdir && !S_ISDIR(dp->i_mode))
			return -ENOTDIR;
		if (!sdir && S_ISDIR(dp->i_mode))
			return -EISDIR;
		if (S_ISDIR(dp->i_mode) && dp->i_nentries)
			return -ENOTEMPTY;
	}
	if (src == fs->root_ino || dst == fs->root_ino)
		return -EBUSY;
	return 0;
}

/* Moves a directory's ".." from one parent to another (N1, N2). */
static void reparent(struct tx *tx, struct fr_inode *child, struct fr_inode *from,
		     struct fr_inode *to, uint64_t to_ino)
{
	if (from == to)
		return;
	tx_set8(tx, &child->i_parent, to_ino);
	tx_set4(tx, &from->i_nlink, tx_get4(tx, &from->i_nlink) - 1);
	tx_set4(tx, &to->i_nlink, tx_get4(tx, &to->i_nlink) + 1);
}

static int rename_tx(ferrite_fs *fs, struct tx *tx, struct nameidata *on, struct nameidata *nn,
		     uint64_t src, uint64_t dst, unsigned flags, int *later)
{
	struct fr_inode *sp = ino_ptr(fs, src), *dp = dst ? ino_ptr(fs, dst) : NULL;
	struct fr_inode *odir = ino_ptr(fs, on->dir_ino), *ndir = ino_ptr(fs, nn->dir_ino);
	struct fr_dentry *sd = NULL, *dd = NULL;
	*later = 0;
	/* The walk found both under the same locks: a miss now is damage. */
	if (relookup(fs, tx, on, &sd) != src || (dst && relookup(fs, tx, nn, &dd) != dst))
		return tx_damaged(tx, "directory entry changed under its lock");
	int sdir = S_ISDIR(sp->i_mode);
	int rc = 0;
	if (flags & RENAME_EXCHANGE) {
		dir_retarget(tx, sd, dst, dtype_of(dp->i_mode));
		dir_retarget(tx, dd, src, dtype_of(sp->i_mode));
		if (sdir)
			reparent(tx, sp, odir, ndir, nn->dir_ino);
		if (S_ISDIR(dp->i_mode))
			reparent(tx, dp, ndir, odir, on->dir_ino);
		touch_ctime(tx, dp);
	} else if (dst) {
		if (PM_PLANTED(PM_PLANT_RENAME_IN_PLACE)) {
			/* Planted bug: the target's entry changes before the log. */
			pm_store8(&dd->d_ino, src);
			pm_persist(&dd->d_ino, 8);
		}
		dir_retarget(tx, dd, src, dtype_of(sp->i_mode));
		rc = dir_remove(fs, tx, odir, sd);
		if (rc)
			return rc;
		if (S_ISDIR(dp->i_mode)) {
			tx_set4(tx, &ndir->i_nlink, tx_get4(tx, &ndir->i_nlink) - 1);
			tx_set4(tx, &dp->i_nlink, 0);
		} else {
			tx_set4(tx, &dp->i_nlink, tx_get4(tx, &dp->i_nlink) - 1);
			touch_ctime(tx, dp);
		}
		if (sdir)
			reparent(tx, sp, odir, ndir, nn->dir_ino);
		if (tx_get4(tx, &dp->i_nlink) == 0)
			rc = drop_inode(fs, tx, dst, later);
	} else {
		/* Remove first: an insert may move the directory's pages. */
		if (PM_PLANTED(PM_PLANT_RENAME_IN_PLACE)) {
			/* Planted bug: the old entry goes before the log. */
			pm_store8(&sd->d_ino, 0);
			pm_persist(&sd->d_ino, 8);
		}
		rc = dir_remove(fs, tx, odir, sd);
		if (!rc)
			rc = dir_insert(fs, tx, ndir, nn->name, nn->len, src, dtype_of(sp->i_mode));
		if (!rc && sdir)
			reparent(tx, sp, odir, ndir, nn->dir_ino);
	}
	touch_ctime(tx, sp);
	touch_dir(tx, odir);
	touch_dir(tx, ndir);
	return rc;
}

int fs_rename(ferrite_fs *fs, uint64_t oat, const char *oldpath, uint64_t nat, const char *newpath,
	      unsigned flags)
{
	if (flags & ~(RENAME_NOREPLACE | RENAME_EXCHANGE) ||
	    (flags & RENAME_NOREPLACE && flags & RENAME_EXCHANGE))
		return -EINVAL;
	struct nameidata on, nn;
	int rc = path_walk(fs, oat, oldpath, LOOKUP_PARENT, &on);
	if (rc)
		return rc;
	rc = path_walk(fs, nat, newpath, LOOKUP_PARENT, &nn);
	if (rc)
		return rc;
	if (on.len == 0 || nn.len == 0 || is_dot(&on) || is_dot(&nn))
		return -EBUSY;
	if (!on.ino)
		return -ENOENT;
	int cross = on.dir_ino != nn.dir_ino;
	if (cross)
		pthread_mutex_lock(&fs->rename_lock);
	for (int attempt = 0;; attempt++) {
		uint64_t locks[4] = {on.dir_ino, nn.dir_ino, on.ino, nn.ino};
		ino_lock_many(fs, locks, 4);
		rc = nd_dir_still_valid(fs, &on);
		if (!rc)
			rc = nd_dir_still_valid(fs, &nn);
		uint64_t src = rc ? 0 : relookup(fs, NULL, &on, NULL);
		uint64_t dst = rc ? 0 : relookup(fs, NULL, &nn, NULL);
		if (!rc && !src)
			rc = -ENOENT;
		if (!rc && (src != on.ino || dst != nn.ino) && attempt < 100) {
			ino_unlock_many(fs, locks, 4);
			on.ino = src;
			nn.ino = dst;
			if (!src) {
				rc = -ENOENT;
				break;
			}
			continue;
		}
		int later = 0;
		if (!rc && src == dst && (flags & RENAME_NOREPLACE)) {
			rc = -EEXIST;
		} else if (!rc && src == dst) {
			rc = 0; /* same file: nothing to do (POSIX) */
		} else if (!rc) {
			rc = rename_checks(fs, &on, &nn, src, dst, flags);
			if (!rc) {
				struct log_ctx *lc = op_begin(fs);
				if (!lc) {
					rc = -ENOMEM;
				} else {
					rc = rename_tx(fs, lc->tx, &on, &nn, src, dst, flags,
						       &later);
					rc = op_commit_or_abort(fs, lc, rc);
					op_end(fs, lc);
				}
			}
		}
		ino_unlock_many(fs, locks, 4);
		if (!rc && later)
			rc = ino_release(fs, NULL, dst);
		break;
	}
	if (cross)
		pthread_mutex_unlock(&fs->rename_lock);
	return rc;
}
