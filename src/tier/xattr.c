/*
 * xattr.c -- the tier engine's C API: extended attributes.
 * Invariants, crash argument and credentials: ns.h.
 */
#include "tier/ns.h"

static const char *const POOL_XATTRS[] = {"user.ferrite.pool", "trusted.ferrite.pool"};

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
	int fd = tier_get_obj(t, dirfd, path, flags, &own);
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
		int rc = tier_get_parent(t, dirfd, path, &p);
		if (rc) {
			tier_put_obj(fd, own);
			return rc;
		}
		snprintf(pp, sizeof pp, "/proc/self/fd/%d/%s", p.pfd, p.name);
	} else {
		tier_proc_path(pp, sizeof pp, fd);
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
		tier_put_parent(t, &p);
	tier_put_obj(fd, own);
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
