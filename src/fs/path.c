/*
 * path.c -- path resolution inside the pool: components, ".", "..",
 * symlinks (at most FS_MAX_SYMLINKS), search permission, ENAMETOOLONG and
 * ENOTDIR rules. "/" is the pool's root; ".." of the root is the root.
 * Relative paths start at a directory the caller holds open (the *at calls),
 * whose vnode keeps the inode alive; a removed one has no entries (ENOENT).
 *
 * Each directory is read under its read lock only while it is searched, so
 * the result is a snapshot: callers lock what they change and re-check it
 * (nd_dir_still_valid, and a fresh lookup under the lock).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fs/fs.h"

static int read_link_target(ferrite_fs *fs, uint64_t ino, char *buf, size_t cap, size_t *len)
{
	struct fr_inode *ip = ino_ptr(fs, ino);
	pthread_rwlock_t *lk = ino_lock(fs, ino);
	pthread_rwlock_rdlock(lk);
	uint64_t n = ip->i_size;
	int rc = 0;
	if (n >= cap) {
		rc = -ENAMETOOLONG;
	} else if (n <= I_INLINE_MAX) {
		memcpy(buf, ip->i_inline, n);
	} else {
		for (uint64_t off = 0; off < n; off += FR_PAGE_SIZE) {
			uint64_t phys = dp_phys(fs, NULL, ip, off);
			if (!phys) {
				rc = -EUCLEAN;
				break;
			}
			memcpy(buf + off, meta_ptr(&fs->m, phys), FR_MIN(FR_PAGE_SIZE, n - off));
		}
	}
	pthread_rwlock_unlock(lk);
	*len = n;
	if (!rc)
		buf[n] = 0;
	return rc;
}

int fs_readlink_ino(ferrite_fs *fs, uint64_t ino, char *buf, size_t cap, size_t *len)
{
	return read_link_target(fs, ino, buf, cap, len);
}

/* Looks name up in dir under dir's read lock, or with keep set, under its
 * write lock, which is then kept (the caller changes the directory next). */
static int lookup_locked(ferrite_fs *fs, uint64_t dir, const char *name, size_t len, uint64_t *out,
			 int keep)
{
	struct fr_inode *dp = ino_ptr(fs, dir);
	pthread_rwlock_t *lk = ino_lock(fs, dir);
	if (keep)
		pthread_rwlock_wrlock(lk);
	else if (len == 1 && name[0] == '.') {
		*out = dir;
		return 0;
	} else
		pthread_rwlock_rdlock(lk);
	int rc;
	if (len == 1 && name[0] == '.') {
		*out = dir;
		rc = 0;
	} else if (len == 2 && name[0] == '.' && name[1] == '.') {
		*out = dir == fs->root_ino ? dir : dp->i_parent;
		rc = ino_get_checked(fs, *out);
	} else if (dp->i_nlink == 0) {
		rc = -ESTALE; /* removed (while we walked, or held open by an *at caller) */
	} else {
		struct fr_dentry *d;
		rc = dir_lookup(fs, NULL, dp, name, len, &d);
		if (!rc) {
			*out = d->d_ino;
			rc = ino_get_checked(fs, *out);
		}
	}
	if (!keep)
		pthread_rwlock_unlock(lk);
	return rc;
}

void nd_unlock(ferrite_fs *fs, struct nameidata *nd)
{
	if (nd->locked) {
		pthread_rwlock_unlock(ino_lock(fs, nd->dir_ino));
		nd->locked = 0;
	}
}

/* An absolute symlink target is a host path when the pool has a place on
 * the host: under the prefix it leads back into the pool (strip it), else out
 * of it (-EXDEV; the front end follows ferrite_escaped_path() on the host). */
static int host_absolute(ferrite_fs *fs, const char **p)
{
	size_t pl = fs->link_prefix_len;
	if (!fs->link_prefix)
		return 0;
	if (strncmp(*p, fs->link_prefix, pl) == 0 && ((*p)[pl] == '/' || (*p)[pl] == 0)) {
		*p += pl;
		return 0;
	}
	return vfs_set_escaped_path(*p);
}

/* The walk's answer: the directory it ended in and the name looked up
 * there (ino 0: missing; len 0: the path named a directory itself). */
static void nd_result(ferrite_fs *fs, struct nameidata *nd, uint64_t dir, const char *name,
		      size_t len, int slash, uint64_t ino)
{
	nd->dir_ino = dir;
	nd->dir_gen = ino_ptr(fs, dir)->i_generation;
	memcpy(nd->name, name, len);
	nd->name[len] = 0;
	nd->len = len;
	nd->trailing_slash = slash;
	nd->ino = ino;
}

/* The walk reached symlink `link` with `rest` of the path after it: the
 * path to go on with becomes the target, then the rest (*buf owns it,
 * *tgt is scratch for the target); an absolute target starts again at the
 * root, or leaves the pool (host_absolute). `final`: the link is the last
 * component, followed without a trailing slash. */
static int splice_link(ferrite_fs *fs, uint64_t link, const char *rest, int final, char **buf,
		       char **tgt, const char **p, uint64_t *cur)
{
	if (!*tgt && !(*tgt = malloc(FS_PATH_MAX + 1)))
		return -ENOMEM;
	size_t tlen;
	int rc = read_link_target(fs, link, *tgt, FS_PATH_MAX, &tlen);
	if (rc)
		return rc;
	/* Like Linux, the only bound on nested links is their number (ELOOP). */
	size_t rlen = strlen(rest);
	char *nbuf = malloc(tlen + 1 + rlen + 1);
	if (!nbuf)
		return -ENOMEM;
	memcpy(nbuf, *tgt, tlen);
	nbuf[tlen] = '/';
	memcpy(nbuf + tlen + 1, rest, rlen + 1);
	if (final)
		nbuf[tlen] = 0;
	free(*buf);
	*buf = nbuf;
	*p = nbuf;
	if ((*tgt)[0] != '/')
		return 0;
	*cur = fs->root_ino;
	return host_absolute(fs, p);
}

/* One component at a time, Linux's order of checks: the directory's type
 * and search permission, the name's length, the lookup; a symlink is
 * spliced in (splice_link) unless it is the last component and not to be
 * followed. LOOKUP_PARENT stops at the last component, found or not, and
 * with LOOKUP_LOCK_PARENT returns holding its directory's lock. */
int path_walk(ferrite_fs *fs, uint64_t at, const char *path, int flags, struct nameidata *nd)
{
	if (!path)
		return -EFAULT;
	size_t plen = strnlen(path, FS_PATH_MAX + 1);
	if (plen == 0)
		return fr_err(-ENOENT, "empty path");
	if (plen >= FS_PATH_MAX)
		return fr_err(-ENAMETOOLONG, "path longer than %d bytes", FS_PATH_MAX - 1);
	const struct vfs_cred *cred = cred_get();
	/* The path is parsed in place; a work buffer is needed only once a
	 * symlink's target must be spliced in front of the rest. */
	char *buf = NULL, *tgt = NULL;
	const char *p = path;
	uint64_t cur = (path[0] == '/' || !at) ? fs->root_ino : at;
	int links = 0, rc = 0;
	memset(nd, 0, sizeof(*nd));
	for (;;) {
		while (*p == '/')
			p++;
		if (!*p) {
			/* The path names a directory itself ("/", "a/" after a link...). */
			nd_result(fs, nd, cur, "", 0, 1, cur);
			break;
		}
		const char *comp = p;
		while (*p && *p != '/')
			p++;
		size_t len = (size_t)(p - comp);
		const char *rest = p;
		while (*rest == '/')
			rest++;
		int last = *rest == 0;
		int slash = last && rest != p;
		struct fr_inode *dp = ino_ptr(fs, cur);
		if (!S_ISDIR(dp->i_mode)) {
			rc = -ENOTDIR;
			break;
		}
		rc = perm_check(cred, NULL, dp, 1);
		if (rc)
			break;
		if (len > FS_NAME_MAX) {
			/* As Linux: only a name looked up in a directory we may
			 * search is too long (ENOTDIR and EACCES come first). */
			rc = fr_err(-ENAMETOOLONG, "path component longer than %d bytes",
				    FS_NAME_MAX);
			break;
		}
		uint64_t child = 0;
		int keep = last && (flags & LOOKUP_PARENT) && (flags & LOOKUP_LOCK_PARENT);
		rc = lookup_locked(fs, cur, comp, len, &child, keep);
		if (rc == -ESTALE)
			rc = -ENOENT; /* nothing can be found or created there */
		else if (rc == -ENOENT)
			rc = -ENODATA; /* just this name is missing */
		if (rc && rc != -ENODATA) {
			if (keep)
				pthread_rwlock_unlock(ino_lock(fs, cur));
			break;
		}
		if (last && (flags & LOOKUP_PARENT)) {
			struct fr_inode *cp = child ? ino_ptr(fs, child) : NULL;
			int follow = (flags & LOOKUP_FOLLOW) && cp && S_ISLNK(cp->i_mode);
			if (!follow) {
				nd_result(fs, nd, cur, comp, len, slash,
					  rc == -ENODATA ? 0 : child);
				nd->locked = keep;
				rc = 0;
				break;
			}
			if (keep)
				pthread_rwlock_unlock(ino_lock(fs, cur));
		}
		if (rc == -ENODATA) {
			rc = -ENOENT;
			break;
		}
		struct fr_inode *cp = ino_ptr(fs, child);
		if (S_ISLNK(cp->i_mode) && (!last || (flags & LOOKUP_FOLLOW) || slash)) {
			if (++links > FS_MAX_SYMLINKS) {
				rc = fr_err(-ELOOP, "too many levels of symbolic links");
				break;
			}
			rc = splice_link(fs, child, rest, last && !slash, &buf, &tgt, &p, &cur);
			if (rc)
				break;
			continue;
		}
		if (last) {
			if (slash && !S_ISDIR(cp->i_mode)) {
				rc = -ENOTDIR;
				break;
			}
			nd_result(fs, nd, cur, comp, len, slash, child);
			break;
		}
		cur = child;
		p = rest;
	}
	free(buf);
	free(tgt);
	return rc;
}

int pmfs_set_link_prefix(ferrite_fs *fs, const char *prefix)
{
	fr_err_clear();
	if (!fs)
		return api_end(-EINVAL);
	char *copy = NULL;
	if (prefix) {
		size_t n = strlen(prefix);
		while (n > 1 && prefix[n - 1] == '/')
			n--;
		if (prefix[0] != '/' || n < 2 || n >= FS_PATH_MAX)
			return api_end(fr_err(-EINVAL, "the link prefix must be an absolute "
						       "path other than /"));
		if (!(copy = strndup(prefix, n)))
			return api_end(-ENOMEM);
	}
	free(fs->link_prefix);
	fs->link_prefix = copy;
	fs->link_prefix_len = copy ? strlen(copy) : 0;
	return 0;
}

int nd_dir_still_valid(ferrite_fs *fs, struct nameidata *nd)
{
	if (!ino_valid(fs, nd->dir_ino))
		return -ENOENT;
	struct fr_inode *dp = ino_ptr(fs, nd->dir_ino);
	if (dp->i_generation != nd->dir_gen || !S_ISDIR(dp->i_mode) || dp->i_nlink == 0)
		return -ENOENT;
	return 0;
}
