/*
 * path.c -- the tier engine's C API: path resolution below the backing directory.
 * Invariants, crash argument and credentials: ns.h.
 */
#include "tier/ns.h"

/* ---- path resolution ---------------------------------------------------------------- */

/* The kernel directory a (dirfd, path) starts from; *held keeps a tier
 * descriptor referenced for the call. Absolute paths start at the root. */
int tier_start_dir(struct tier *t, int dirfd, const char *path, int *kdir, const char **rest,
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

void tier_end_dir(struct tier *t, struct tier_ofile *held)
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
					rc = vfs_set_escaped_path(p);
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
int tier_kopen(struct tier *t, int kdir, const char *path, int flags, mode_t mode)
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

int tier_get_parent(struct tier *t, int dirfd, const char *path, struct parent *p)
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
	int rc = tier_start_dir(t, dirfd, path, &kdir, &rest, &p->held);
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
		tier_end_dir(t, p->held);
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
		int fd = tier_kopen(t, kdir, dir, O_PATH | O_DIRECTORY, 0);
		if (fd < 0) {
			tier_end_dir(t, p->held);
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

void tier_put_parent(struct tier *t, struct parent *p)
{
	if (p->own)
		close(p->pfd);
	tier_end_dir(t, p->held);
}

/* An O_PATH descriptor on the object (dirfd, path) names; AT_EMPTY_PATH:
 * dirfd's own. *own: the caller closes it. */
int tier_get_obj(struct tier *t, int dirfd, const char *path, int flags, int *own)
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
	int rc = tier_start_dir(t, dirfd, path, &kdir, &rest, &held);
	if (rc)
		return rc;
	int fd =
	    tier_kopen(t, kdir, rest, O_PATH | ((flags & AT_SYMLINK_NOFOLLOW) ? O_NOFOLLOW : 0), 0);
	tier_end_dir(t, held);
	if (fd >= 0)
		*own = 1;
	return fd;
}

void tier_put_obj(int fd, int own)
{
	if (own)
		close(fd);
}

void tier_proc_path(char *buf, size_t n, int fd)
{
	snprintf(buf, n, "/proc/self/fd/%d", fd);
}
