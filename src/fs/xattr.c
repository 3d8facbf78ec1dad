/*
 * xattr.c -- extended attributes: ferrite_{f,}{get,set,list,remove}xattr{,at}.
 * Format: struct fr_xblock / fr_xrec in fs_format.h, docs/format.md.
 *
 * Invariants: X1 i_xattr is 0 or the pool offset of a block of 2^xb_order
 *               pages owned by that inode alone, holding xb_count records in
 *               xb_bytes bytes with checksum xb_csum;
 *             X2 a published block is never written again (copy-on-write);
 *             X3 names are unique within a block, each 1..255 bytes, values
 *               at most 64 KiB.
 * Crash argument: a change builds the whole new block in fresh pages with
 *   non-temporal stores (unreachable until the commit), marks the transaction
 *   fresh so the commit fences them before the log entry can validate, and
 *   swaps i_xattr with one logged 8-byte store in the transaction that also
 *   frees the old block and updates ctime. Before the commit point the inode
 *   names the old block (the new pages are still free in the allocator);
 *   after it, the new one: old or new, never a mix.
 * Locking: readers hold the inode's read lock and writers its write lock
 *   around reading i_xattr and using the block (X2 makes the block itself
 *   safe to read while the lock is held; the lock keeps it from being freed).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fs/fs.h"
#include "fs/xattr.h"
#include "persist/pm.h"

#define XA_USER	   1
#define XA_TRUSTED 2
#define XA_READ	   4 /* perm_check masks */
#define XA_WRITE   2

static size_t xrec_size(size_t nlen, size_t vlen)
{
	return FR_ALIGN_UP(sizeof(struct fr_xrec) + nlen + vlen, 8);
}

/* Namespace of name, or -errno with Linux's choice of error. */
static int xa_namespace(const char *name, size_t *lenp)
{
	if (!name)
		return -EFAULT;
	size_t len = strnlen(name, FERRITE_XATTR_NAME_MAX + 1);
	if (len == 0 || len > FERRITE_XATTR_NAME_MAX)
		return fr_err(-ERANGE, "attribute name must be 1..255 bytes");
	*lenp = len;
	if (strncmp(name, "user.", 5) == 0)
		return len == 5 ? -EINVAL : XA_USER;
	if (strncmp(name, "trusted.", 8) == 0)
		return len == 8 ? -EINVAL : XA_TRUSTED;
	return fr_err(-EOPNOTSUPP, "%.40s: only user.* and trusted.* attributes are supported",
		      name);
}

/* Linux xattr_permission(): may the caller read (or write) attribute space ns
 * of the inode? Called under the inode lock. */
static int xa_permission(const struct fr_inode *ip, int ns, int mask)
{
	const struct vfs_cred *c = cred_get();
	uint32_t mode = ip->i_mode;
	if (ns == XA_TRUSTED)
		return c->uid == 0 ? 0 : mask == XA_WRITE ? -EPERM : -ENODATA;
	if (!S_ISREG(mode) && !S_ISDIR(mode))
		return mask == XA_WRITE ? -EPERM : -ENODATA;
	if (S_ISDIR(mode) && (mode & S_ISVTX) && mask == XA_WRITE && c->uid != 0 &&
	    c->uid != ip->i_uid)
		return -EPERM;
	return perm_check(c, NULL, ip, mask);
}

/* The block at pool offset off (an i_xattr of inode ino), NULL if off is 0;
 * -EUCLEAN (as *err) if it is damaged. */
static const struct fr_xblock *xb_at(ferrite_fs *fs, uint64_t off, uint64_t ino, int *err)
{
	*err = 0;
	if (!off)
		return NULL;
	struct space *sp = &fs->m.sp;
	const struct fr_xblock *xb = NULL;
	if (off % FR_PAGE_SIZE || (off >> FR_PAGE_SHIFT) < sp->data_page ||
	    (off >> FR_PAGE_SHIFT) >= sp->data_end_page ||
	    (xb = meta_ptr(&fs->m, off))->xb_magic != XB_MAGIC || xb->xb_order > XB_MAX_ORDER ||
	    (off >> FR_PAGE_SHIFT) + (1ULL << xb->xb_order) > sp->data_end_page ||
	    (((off >> FR_PAGE_SHIFT) - sp->data_page) & ((1ULL << xb->xb_order) - 1)) ||
	    xb->xb_bytes > (FR_PAGE_SIZE << xb->xb_order) - sizeof(*xb)) {
		*err = fr_err(-EUCLEAN, "inode %llu: extended attribute block damaged (run fsck)",
			      (unsigned long long)ino);
		return NULL;
	}
	return xb;
}

static const struct fr_xblock *xb_get(ferrite_fs *fs, const struct fr_inode *ip, int *err)
{
	return xb_at(fs, ip->i_xattr, ino_of(fs, ip), err);
}

/* Steps through the records: returns the next one or NULL at the end (or
 * when a record would run past xb_bytes, which fsck reports). */
static const struct fr_xrec *xrec_next(const struct fr_xblock *xb, const struct fr_xrec *r)
{
	const char *base = (const char *)(xb + 1);
	size_t pos = r ? (size_t)((const char *)r - base) + xrec_size(r->xr_nlen, r->xr_vlen) : 0;
	if (pos + sizeof(struct fr_xrec) > xb->xb_bytes)
		return NULL;
	const struct fr_xrec *n = (const struct fr_xrec *)(base + pos);
	if (pos + xrec_size(n->xr_nlen, n->xr_vlen) > xb->xb_bytes)
		return NULL;
	return n;
}

static const struct fr_xrec *xrec_find(const struct fr_xblock *xb, const char *name, size_t len)
{
	if (!xb)
		return NULL;
	for (const struct fr_xrec *r = xrec_next(xb, NULL); r; r = xrec_next(xb, r))
		if (r->xr_nlen == len && memcmp(r->xr_data, name, len) == 0)
			return r;
	return NULL;
}

/* ---- reading -------------------------------------------------------------- */

static ssize_t xa_get(ferrite_fs *fs, uint64_t ino, const char *name, void *value, size_t size)
{
	size_t len;
	int ns = xa_namespace(name, &len);
	if (ns < 0)
		return ns;
	if (size && !value)
		return -EFAULT;
	pthread_rwlock_t *lk = ino_lock(fs, ino);
	pthread_rwlock_rdlock(lk);
	struct fr_inode *ip = ino_ptr(fs, ino);
	int err;
	ssize_t rc = xa_permission(ip, ns, XA_READ);
	const struct fr_xblock *xb = rc ? NULL : xb_get(fs, ip, &err);
	if (!rc && err)
		rc = err;
	if (!rc) {
		const struct fr_xrec *r = xrec_find(xb, name, len);
		if (!r)
			rc = -ENODATA;
		else if (size && size < r->xr_vlen)
			rc = -ERANGE;
		else {
			if (size)
				memcpy(value, r->xr_data + r->xr_nlen, r->xr_vlen);
			rc = r->xr_vlen;
		}
	}
	pthread_rwlock_unlock(lk);
	return rc;
}

static ssize_t xa_list(ferrite_fs *fs, uint64_t ino, char *list, size_t size)
{
	if (size && !list)
		return -EFAULT;
	int root = cred_get()->uid == 0;
	pthread_rwlock_t *lk = ino_lock(fs, ino);
	pthread_rwlock_rdlock(lk);
	int err;
	const struct fr_xblock *xb = xb_get(fs, ino_ptr(fs, ino), &err);
	ssize_t rc = err;
	size_t need = 0;
	for (const struct fr_xrec *r = xb ? xrec_next(xb, NULL) : NULL; r; r = xrec_next(xb, r)) {
		if (!root && r->xr_nlen >= 8 && memcmp(r->xr_data, "trusted.", 8) == 0)
			continue; /* as Linux: hidden without CAP_SYS_ADMIN */
		if (size) {
			if (need + r->xr_nlen + 1 > size) {
				rc = -ERANGE;
				break;
			}
			memcpy(list + need, r->xr_data, r->xr_nlen);
			list[need + r->xr_nlen] = '\0';
		}
		need += r->xr_nlen + 1;
	}
	pthread_rwlock_unlock(lk);
	return rc ? rc : (ssize_t)need;
}

/* ---- changing --------------------------------------------------------------- */

/* Publishes img (a block image with header filled but for order/checksum;
 * NULL = no attributes left) as the inode's block in one transaction. Inode
 * write lock held. */
static int xb_replace(ferrite_fs *fs, struct fr_inode *ip, const struct fr_xblock *old,
		      struct fr_xblock *img)
{
	struct log_ctx *lc = op_begin(fs);
	if (!lc)
		return -ENOMEM;
	struct tx *tx = lc->tx;
	uint64_t off = 0;
	if (img) {
		size_t total = sizeof(*img) + img->xb_bytes;
		int order = (int)fr_log2_ceil((total + FR_PAGE_SIZE - 1) >> FR_PAGE_SHIFT);
		if (order > XB_MAX_ORDER) {
			tx_abort(tx);
			op_end(fs, lc);
			return fr_err(-ENOSPC, "extended attributes of one inode exceed 2 MiB");
		}
		int64_t page = bud_alloc(tx, order);
		if (page < 0) {
			tx_abort(tx);
			op_end(fs, lc);
			return fr_err(-ENOSPC, "no space left for extended attributes");
		}
		img->xb_order = (uint32_t)order;
		img->xb_csum = fr_crc32c(0, img + 1, img->xb_bytes);
		off = (uint64_t)page << FR_PAGE_SHIFT;
		pm_copy_nt(meta_ptr(&fs->m, off), img, total); /* fresh: unreachable until commit */
		tx_mark_fresh(tx);
	}
	tx_set8(tx, &ip->i_xattr, off); /* COMMIT POINT of the swap (X2) */
	if (old)
		bud_free(tx, sp_off(&fs->m.sp, old) >> FR_PAGE_SHIFT, (int)old->xb_order);
	struct timespec now;
	fs_now(&now);
	ino_set_times(tx, ip, T_CTIME, &now);
	int rc = op_commit(fs, lc);
	op_end(fs, lc);
	return rc;
}

/* value == NULL && !set: remove. */
static int xa_change(ferrite_fs *fs, uint64_t ino, const char *name, const void *value, size_t size,
		     int flags, int set)
{
	size_t len;
	if (set && (flags & ~(FERRITE_XATTR_CREATE | FERRITE_XATTR_REPLACE)))
		return -EINVAL;
	int ns = xa_namespace(name, &len);
	if (ns < 0)
		return ns;
	if (set && size > FERRITE_XATTR_SIZE_MAX)
		return fr_err(-E2BIG, "attribute values are limited to 64 KiB");
	if (set && size && !value)
		return -EFAULT;
	if (fs->m.sb->sb_version < 2)
		return fr_err(-EOPNOTSUPP, "pool format 1 has no extended attributes");

	pthread_rwlock_t *lk = ino_lock(fs, ino);
	pthread_rwlock_wrlock(lk);
	struct fr_inode *ip = ino_ptr(fs, ino);
	struct fr_xblock *img = NULL;
	int err;
	int rc = xa_permission(ip, ns, XA_WRITE);
	const struct fr_xblock *old = rc ? NULL : xb_get(fs, ip, &err);
	if (!rc && err)
		rc = err;
	const struct fr_xrec *hit = rc ? NULL : xrec_find(old, name, len);
	if (!rc && set && hit && (flags & FERRITE_XATTR_CREATE))
		rc = -EEXIST;
	if (!rc && !hit && (!set || (flags & FERRITE_XATTR_REPLACE)))
		rc = -ENODATA;
	size_t bytes = 0;
	if (!rc) {
		bytes = (old ? old->xb_bytes : 0) + (set ? xrec_size(len, size) : 0);
		img = malloc(sizeof(*img) + bytes);
		if (!img)
			rc = -ENOMEM;
	}
	if (!rc) {
		memset(img, 0, sizeof(*img));
		img->xb_magic = XB_MAGIC;
		img->xb_owner = ino;
		char *p = (char *)(img + 1);
		for (const struct fr_xrec *r = old ? xrec_next(old, NULL) : NULL; r;
		     r = xrec_next(old, r)) {
			if (r == hit)
				continue;
			size_t rs = xrec_size(r->xr_nlen, r->xr_vlen);
			memcpy(p, r, rs);
			p += rs;
			img->xb_count++;
		}
		if (set) {
			struct fr_xrec *r = (struct fr_xrec *)p;
			size_t rs = xrec_size(len, size);
			memset(r, 0, rs);
			r->xr_vlen = (uint32_t)size;
			r->xr_nlen = (uint8_t)len;
			memcpy(r->xr_data, name, len);
			if (size)
				memcpy(r->xr_data + len, value, size);
			p += rs;
			img->xb_count++;
		}
		img->xb_bytes = (uint32_t)(p - (char *)(img + 1));
		rc = xb_replace(fs, ip, old, img->xb_count ? img : NULL);
	}
	pthread_rwlock_unlock(lk);
	free(img);
	return rc;
}

int xattr_release_tx(ferrite_fs *fs, struct tx *tx, struct fr_inode *ip)
{
	uint64_t off = tx_get8(tx, &ip->i_xattr);
	int err;
	const struct fr_xblock *xb = xb_at(fs, off, ino_of(fs, ip), &err);
	if (!xb)
		return err; /* none, or damaged: leave the pages to fsck rather than free a guess */
	bud_free(tx, off >> FR_PAGE_SHIFT, (int)xb->xb_order);
	tx_set8(tx, &ip->i_xattr, 0);
	return 0;
}

int xattr_check(ferrite_fs *fs, const struct fr_inode *ip, uint64_t *page, int *order,
		const char **why)
{
	int err;
	const struct fr_xblock *xb = xb_get(fs, ip, &err);
	*why = NULL;
	*page = 0;
	*order = 0;
	if (!xb) {
		if (err)
			*why = "damaged header";
		return err;
	}
	*page = ip->i_xattr >> FR_PAGE_SHIFT;
	*order = (int)xb->xb_order;
	if (xb->xb_owner != ino_of(fs, ip))
		*why = "owned by another inode";
	else if (fr_crc32c(0, xb + 1, xb->xb_bytes) != xb->xb_csum)
		*why = "checksum mismatch";
	if (*why)
		return -EUCLEAN;
	uint32_t n = 0, used = 0;
	for (const struct fr_xrec *r = xrec_next(xb, NULL); r; r = xrec_next(xb, r)) {
		n++;
		used = (uint32_t)((const char *)r - (const char *)(xb + 1)) +
		       (uint32_t)xrec_size(r->xr_nlen, r->xr_vlen);
		if (r->xr_nlen == 0 || r->xr_vlen > FERRITE_XATTR_SIZE_MAX)
			*why = "bad record";
		else if (!((r->xr_nlen > 5 && memcmp(r->xr_data, "user.", 5) == 0) ||
			   (r->xr_nlen > 8 && memcmp(r->xr_data, "trusted.", 8) == 0)) ||
			 memchr(r->xr_data, 0, r->xr_nlen))
			*why = "a record whose name is not a user.* or trusted.* name";
	}
	if (!*why && (n != xb->xb_count || used != xb->xb_bytes))
		*why = "record count or length mismatch";
	return *why ? -EUCLEAN : 0;
}

/* ---- API ------------------------------------------------------------------------ */

/* The inode an open descriptor (O_PATH included) names. The descriptor keeps
 * the inode alive for the length of the call. */
static int fd_ino(ferrite_fs *fs, int fd, uint64_t *ino)
{
	struct stat st = {0};
	int rc = pmfs_fstat(fs, fd, &st);
	*ino = (uint64_t)st.st_ino;
	return rc;
}

ssize_t pmfs_fgetxattr(ferrite_fs *fs, int fd, const char *name, void *value, size_t size)
{
	fr_err_clear();
	uint64_t ino;
	if (!fs)
		return api_end(-EINVAL);
	ssize_t rc = fd_ino(fs, fd, &ino);
	if (!rc)
		rc = xa_get(fs, ino, name, value, size);
	return api_end_ss(rc);
}

int pmfs_fsetxattr(ferrite_fs *fs, int fd, const char *name, const void *value, size_t size,
		   int flags)
{
	fr_err_clear();
	uint64_t ino;
	if (!fs)
		return api_end(-EINVAL);
	int rc = fd_ino(fs, fd, &ino);
	return api_end(rc ? rc : xa_change(fs, ino, name, value, size, flags, 1));
}

ssize_t pmfs_flistxattr(ferrite_fs *fs, int fd, char *list, size_t size)
{
	fr_err_clear();
	uint64_t ino;
	if (!fs)
		return api_end(-EINVAL);
	ssize_t rc = fd_ino(fs, fd, &ino);
	if (!rc)
		rc = xa_list(fs, ino, list, size);
	return api_end_ss(rc);
}

int pmfs_fremovexattr(ferrite_fs *fs, int fd, const char *name)
{
	fr_err_clear();
	uint64_t ino;
	if (!fs)
		return api_end(-EINVAL);
	int rc = fd_ino(fs, fd, &ino);
	return api_end(rc ? rc : xa_change(fs, ino, name, NULL, 0, 0, 0));
}

/* The *at calls: an O_PATH descriptor for the target, the f* call on it.
 * *tmp says whether the descriptor must be closed afterwards. */
static int at_open(ferrite_fs *fs, int dirfd, const char *path, int flags, int *tmp)
{
	*tmp = 0;
	if (!fs || (flags & ~(AT_SYMLINK_NOFOLLOW | AT_EMPTY_PATH)))
		return api_end(-EINVAL);
	if ((flags & AT_EMPTY_PATH) && (!path || !path[0]))
		return dirfd;
	int fd = pmfs_openat(fs, dirfd, path,
			     O_PATH | ((flags & AT_SYMLINK_NOFOLLOW) ? O_NOFOLLOW : 0), 0);
	*tmp = fd >= 0;
	return fd;
}

/* Closes a temporary descriptor without losing the message of rc. */
static ssize_t at_close(ferrite_fs *fs, int fd, int tmp, ssize_t rc)
{
	if (!tmp)
		return rc;
	char msg[512] = "";
	if (rc < 0)
		snprintf(msg, sizeof(msg), "%s", ferrite_errmsg());
	pmfs_close(fs, fd);
	if (rc < 0)
		fr_err((int)rc, "%s", msg);
	return rc;
}

ssize_t pmfs_getxattrat(ferrite_fs *fs, int dirfd, const char *path, int flags, const char *name,
			void *value, size_t size)
{
	int tmp, fd = at_open(fs, dirfd, path, flags, &tmp);
	if (fd < 0)
		return fd;
	return at_close(fs, fd, tmp, pmfs_fgetxattr(fs, fd, name, value, size));
}

int pmfs_setxattrat(ferrite_fs *fs, int dirfd, const char *path, int flags, const char *name,
		    const void *value, size_t size, int xattr_flags)
{
	/* Linux checks the flags and the value before it walks the path. */
	if (xattr_flags & ~(FERRITE_XATTR_CREATE | FERRITE_XATTR_REPLACE))
		return api_end(-EINVAL);
	if (size > FERRITE_XATTR_SIZE_MAX)
		return api_end(fr_err(-E2BIG, "attribute values are limited to 64 KiB"));
	int tmp, fd = at_open(fs, dirfd, path, flags, &tmp);
	if (fd < 0)
		return fd;
	return (int)at_close(fs, fd, tmp, pmfs_fsetxattr(fs, fd, name, value, size, xattr_flags));
}

ssize_t pmfs_listxattrat(ferrite_fs *fs, int dirfd, const char *path, int flags, char *list,
			 size_t size)
{
	int tmp, fd = at_open(fs, dirfd, path, flags, &tmp);
	if (fd < 0)
		return fd;
	return at_close(fs, fd, tmp, pmfs_flistxattr(fs, fd, list, size));
}

int pmfs_removexattrat(ferrite_fs *fs, int dirfd, const char *path, int flags, const char *name)
{
	int tmp, fd = at_open(fs, dirfd, path, flags, &tmp);
	if (fd < 0)
		return fd;
	return (int)at_close(fs, fd, tmp, pmfs_fremovexattr(fs, fd, name));
}
