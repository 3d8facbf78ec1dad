/*
 * passthrough_ll.c -- a minimal low-level libfuse3 file system that forwards every
 * request to a directory of the host: the floor cost of going through FUSE.
 *
 * bench/programs/run.sh mounts it over a tmpfs directory and runs the same fio jobs
 * on it as on `ferrite mount`, so the ratio ferrite-FUSE / passthrough shows what
 * ferrite adds on top of the kernel round trip. To be a fair floor it runs with the
 * same FUSE settings as ferrite's daemon: no writeback cache, the same max_write,
 * multithreaded, the same entry/attribute timeouts and caching flags (options below).
 *
 *   passthrough_ll [options] SOURCE MOUNTPOINT
 *     -f                 stay in the foreground
 *     --single           one thread (default: multithreaded, one queue per thread)
 *     --threads=N        at most N worker threads (default 2 per CPU, at least 8)
 *     --max-write=BYTES  largest write request and readahead (default 1 MiB)
 *     --timeout=SEC      entry and attribute timeout (default 1.0)
 *     --direct-io        open files with direct_io (no page cache)
 *     --no-keep-cache    drop the page cache when a file is opened
 *     --xattr            forward extended attributes (default: ENOSYS, see below)
 *     -o OPTS            passed to FUSE (e.g. allow_other)
 * Defaults: what ferrite's daemon asks for (src/fuse): no writeback cache, no splice,
 * keep_cache, 1 MiB writes and readahead, cloned queue descriptors.
 *
 * Inodes: the kernel's node id is the address of a struct pt_node that holds an
 * O_PATH descriptor of the host object (or, past half the descriptor limit, a file
 * handle: see pt_fd_of) and the kernel's lookup count; nodes are found by
 * (st_dev, st_ino) so hard links share one, and are freed when the count drops to
 * zero (forget). Handles of open files and directories are host descriptors / DIR *.
 * Locking: pt_fs.lock guards the node table and lookup counts; nothing else is shared.
 * Error convention: each handler makes its call and replies errno, nothing more.
 */
#define _GNU_SOURCE
#define FUSE_USE_VERSION 312
#include <fuse_lowlevel.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/xattr.h>
#include <unistd.h>

struct pt_node {
	int fd; /* O_PATH descriptor of the host object, or -1: reopened from fh */
	struct file_handle *fh; /* when fd is -1 */
	dev_t dev;
	ino_t ino;
	uint64_t nlookup;
	struct pt_node *next; /* hash chain */
};

struct pt_fs {
	pthread_mutex_t lock;
	struct pt_node root;
	struct pt_node **tab;
	size_t nbuckets;
	double timeout;
	int direct_io;
	int keep_cache;
	int xattr; /* forward extended attributes (else ENOSYS: the kernel stops asking) */
	unsigned max_write;
	long nfds, maxfds; /* node descriptors held, and how many may be */
	int mount_fd;      /* for open_by_handle_at (an O_PATH one will not do) */
};

static struct pt_fs g_fs;

struct pt_dir {
	DIR *dp;
	off_t offset; /* where dp stands, as handed out in readdir */
	struct dirent *entry; /* read but not yet handed out */
};

static struct pt_node *pt_node_of(fuse_ino_t ino)
{
	return ino == FUSE_ROOT_ID ? &g_fs.root : (struct pt_node *)(uintptr_t)ino;
}

/*
 * Descriptors: a node keeps its O_PATH descriptor while fewer than maxfds are held
 * (half the descriptor limit); beyond that (postmark's 20 000 files) it keeps a file
 * handle and each use reopens it into a per-thread ring of PT_RING descriptors, each
 * closed when the ring comes round again. A request uses at most two nodes, so its
 * descriptors stay open until it has replied.
 */
#define PT_RING 4
struct pt_ring {
	int fd[PT_RING];
	unsigned next;
};
static pthread_key_t pt_ring_key;

static void pt_ring_free(void *p)
{
	struct pt_ring *r = p;
	for (int i = 0; i < PT_RING; i++)
		if (r->fd[i] >= 0)
			close(r->fd[i]);
	free(r);
}

static int pt_fd_of(fuse_ino_t ino)
{
	struct pt_node *n = pt_node_of(ino);
	if (n->fd >= 0)
		return n->fd;
	struct pt_ring *r = pthread_getspecific(pt_ring_key);
	if (!r) {
		if (!(r = malloc(sizeof(*r))))
			return -1;
		for (int i = 0; i < PT_RING; i++)
			r->fd[i] = -1;
		r->next = 0;
		pthread_setspecific(pt_ring_key, r);
	}
	int fd = open_by_handle_at(g_fs.mount_fd, n->fh, O_PATH);
	if (fd < 0)
		return -1; /* the call it is passed to fails with EBADF */
	unsigned i = r->next++ % PT_RING;
	if (r->fd[i] >= 0)
		close(r->fd[i]);
	r->fd[i] = fd;
	return fd;
}

/* Node N gets descriptor FD (called with g_fs.lock): kept, or traded for a handle. */
static void pt_node_set_fd(struct pt_node *n, int fd)
{
	if (g_fs.nfds < g_fs.maxfds) {
		n->fd = fd;
		g_fs.nfds++;
		return;
	}
	struct file_handle *fh = malloc(sizeof(*fh) + MAX_HANDLE_SZ);
	int mount_id;
	if (fh) {
		fh->handle_bytes = MAX_HANDLE_SZ;
		if (name_to_handle_at(fd, "", fh, &mount_id, AT_EMPTY_PATH) == 0) {
			n->fh = fh;
			n->fd = -1;
			close(fd);
			return;
		}
		free(fh);
	}
	n->fd = fd; /* no handles here: keep the descriptor after all */
	g_fs.nfds++;
}

static size_t pt_bucket(dev_t dev, ino_t ino)
{
	return (size_t)((ino * 0x9E3779B97F4A7C15ull) ^ dev) % g_fs.nbuckets;
}

/* Path of an O_PATH descriptor, for calls that take no descriptor of that kind. */
static void pt_proc_path(char *buf, size_t len, int fd)
{
	snprintf(buf, len, "/proc/self/fd/%d", fd);
}

/* Look NAME up in PARENT, count one kernel reference. 0 or errno. */
static int pt_lookup_entry(fuse_ino_t parent, const char *name, struct fuse_entry_param *e)
{
	int fd = openat(pt_fd_of(parent), name, O_PATH | O_NOFOLLOW);
	if (fd < 0)
		return errno;
	memset(e, 0, sizeof(*e));
	if (fstatat(fd, "", &e->attr, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) < 0) {
		int err = errno;
		close(fd);
		return err;
	}
	pthread_mutex_lock(&g_fs.lock);
	size_t b = pt_bucket(e->attr.st_dev, e->attr.st_ino);
	struct pt_node *n = g_fs.tab[b];
	while (n && !(n->dev == e->attr.st_dev && n->ino == e->attr.st_ino))
		n = n->next;
	if (n) {
		n->nlookup++;
		close(fd);
	} else {
		n = calloc(1, sizeof(*n));
		if (!n) {
			pthread_mutex_unlock(&g_fs.lock);
			close(fd);
			return ENOMEM;
		}
		pt_node_set_fd(n, fd);
		n->dev = e->attr.st_dev;
		n->ino = e->attr.st_ino;
		n->nlookup = 1;
		n->next = g_fs.tab[b];
		g_fs.tab[b] = n;
	}
	pthread_mutex_unlock(&g_fs.lock);
	e->ino = (fuse_ino_t)(uintptr_t)n;
	e->attr_timeout = g_fs.timeout;
	e->entry_timeout = g_fs.timeout;
	return 0;
}

static void pt_forget_one(fuse_ino_t ino, uint64_t count)
{
	struct pt_node *n = pt_node_of(ino);
	if (n == &g_fs.root)
		return;
	pthread_mutex_lock(&g_fs.lock);
	n->nlookup -= count;
	if (n->nlookup == 0) {
		struct pt_node **pp = &g_fs.tab[pt_bucket(n->dev, n->ino)];
		while (*pp != n)
			pp = &(*pp)->next;
		*pp = n->next;
		if (n->fd >= 0) {
			close(n->fd);
			g_fs.nfds--;
		}
		free(n->fh);
		free(n);
	}
	pthread_mutex_unlock(&g_fs.lock);
}

static void pt_reply_entry(fuse_req_t req, fuse_ino_t parent, const char *name, int err)
{
	struct fuse_entry_param e;
	if (err == 0)
		err = pt_lookup_entry(parent, name, &e);
	if (err)
		fuse_reply_err(req, err);
	else
		fuse_reply_entry(req, &e);
}

/* The same connection settings as ferrite's daemon (src/fuse/fuse_ops.c, ll_init). */
static void pt_init(void *userdata, struct fuse_conn_info *conn)
{
	(void)userdata;
	conn->want &= ~FUSE_CAP_WRITEBACK_CACHE;
	conn->want &= ~(FUSE_CAP_SPLICE_READ | FUSE_CAP_SPLICE_WRITE | FUSE_CAP_SPLICE_MOVE);
	const unsigned wanted = FUSE_CAP_ASYNC_READ | FUSE_CAP_PARALLEL_DIROPS |
				FUSE_CAP_ATOMIC_O_TRUNC | FUSE_CAP_ASYNC_DIO;
	conn->want |= conn->capable & wanted;
	conn->max_write = g_fs.max_write;
	conn->max_readahead = g_fs.max_write;
	conn->max_background = 64;
	conn->congestion_threshold = 48;
}

static void pt_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	pt_reply_entry(req, parent, name, 0);
}

static void pt_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup)
{
	pt_forget_one(ino, nlookup);
	fuse_reply_none(req);
}

static void pt_forget_multi(fuse_req_t req, size_t count, struct fuse_forget_data *f)
{
	for (size_t i = 0; i < count; i++)
		pt_forget_one(f[i].ino, f[i].nlookup);
	fuse_reply_none(req);
}

static void pt_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct stat st;
	(void)fi;
	if (fstatat(pt_fd_of(ino), "", &st, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) < 0)
		fuse_reply_err(req, errno);
	else
		fuse_reply_attr(req, &st, g_fs.timeout);
}

static int pt_setattr_do(fuse_ino_t ino, struct stat *attr, int valid, struct fuse_file_info *fi)
{
	int fd = pt_fd_of(ino);
	char path[64];
	pt_proc_path(path, sizeof(path), fd);
	if (valid & FUSE_SET_ATTR_MODE) {
		if ((fi ? fchmod((int)fi->fh, attr->st_mode) : chmod(path, attr->st_mode)) < 0)
			return errno;
	}
	if (valid & (FUSE_SET_ATTR_UID | FUSE_SET_ATTR_GID)) {
		uid_t u = (valid & FUSE_SET_ATTR_UID) ? attr->st_uid : (uid_t)-1;
		gid_t g = (valid & FUSE_SET_ATTR_GID) ? attr->st_gid : (gid_t)-1;
		if (fchownat(fd, "", u, g, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) < 0)
			return errno;
	}
	if (valid & FUSE_SET_ATTR_SIZE) {
		if ((fi ? ftruncate((int)fi->fh, attr->st_size) : truncate(path, attr->st_size)) < 0)
			return errno;
	}
	if (valid & (FUSE_SET_ATTR_ATIME | FUSE_SET_ATTR_MTIME)) {
		struct timespec tv[2] = {{0, UTIME_OMIT}, {0, UTIME_OMIT}};
		if (valid & FUSE_SET_ATTR_ATIME_NOW)
			tv[0].tv_nsec = UTIME_NOW;
		else if (valid & FUSE_SET_ATTR_ATIME)
			tv[0] = attr->st_atim;
		if (valid & FUSE_SET_ATTR_MTIME_NOW)
			tv[1].tv_nsec = UTIME_NOW;
		else if (valid & FUSE_SET_ATTR_MTIME)
			tv[1] = attr->st_mtim;
		if ((fi ? futimens((int)fi->fh, tv) : utimensat(AT_FDCWD, path, tv, 0)) < 0)
			return errno;
	}
	return 0;
}

static void pt_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr, int valid,
		       struct fuse_file_info *fi)
{
	int err = pt_setattr_do(ino, attr, valid, fi);
	if (err)
		fuse_reply_err(req, err);
	else
		pt_getattr(req, ino, fi);
}

static void pt_readlink(fuse_req_t req, fuse_ino_t ino)
{
	char buf[PATH_MAX + 1];
	ssize_t n = readlinkat(pt_fd_of(ino), "", buf, sizeof(buf));
	if (n < 0)
		fuse_reply_err(req, errno);
	else if (n >= (ssize_t)sizeof(buf))
		fuse_reply_err(req, ENAMETOOLONG);
	else {
		buf[n] = '\0';
		fuse_reply_readlink(req, buf);
	}
}

static void pt_mknod(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode, dev_t rdev)
{
	int rc = mknodat(pt_fd_of(parent), name, mode, rdev);
	pt_reply_entry(req, parent, name, rc < 0 ? errno : 0);
}

static void pt_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode)
{
	int rc = mkdirat(pt_fd_of(parent), name, mode);
	pt_reply_entry(req, parent, name, rc < 0 ? errno : 0);
}

static void pt_symlink(fuse_req_t req, const char *link, fuse_ino_t parent, const char *name)
{
	int rc = symlinkat(link, pt_fd_of(parent), name);
	pt_reply_entry(req, parent, name, rc < 0 ? errno : 0);
}

static void pt_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent, const char *newname)
{
	char path[64];
	pt_proc_path(path, sizeof(path), pt_fd_of(ino));
	int rc = linkat(AT_FDCWD, path, pt_fd_of(newparent), newname, AT_SYMLINK_FOLLOW);
	pt_reply_entry(req, newparent, newname, rc < 0 ? errno : 0);
}

static void pt_unlink(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	fuse_reply_err(req, unlinkat(pt_fd_of(parent), name, 0) < 0 ? errno : 0);
}

static void pt_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	fuse_reply_err(req, unlinkat(pt_fd_of(parent), name, AT_REMOVEDIR) < 0 ? errno : 0);
}

static void pt_rename(fuse_req_t req, fuse_ino_t parent, const char *name, fuse_ino_t newparent,
		      const char *newname, unsigned int flags)
{
	int rc = renameat2(pt_fd_of(parent), name, pt_fd_of(newparent), newname, flags);
	fuse_reply_err(req, rc < 0 ? errno : 0);
}

static void pt_set_file_flags(struct fuse_file_info *fi)
{
	fi->direct_io = g_fs.direct_io;
	fi->keep_cache = g_fs.keep_cache;
}

static void pt_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	char path[64];
	pt_proc_path(path, sizeof(path), pt_fd_of(ino));
	int fd = open(path, fi->flags & ~O_NOFOLLOW);
	if (fd < 0) {
		fuse_reply_err(req, errno);
		return;
	}
	fi->fh = (uint64_t)fd;
	pt_set_file_flags(fi);
	fuse_reply_open(req, fi);
}

static void pt_create(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
		      struct fuse_file_info *fi)
{
	struct fuse_entry_param e;
	int fd = openat(pt_fd_of(parent), name, (fi->flags | O_CREAT) & ~O_NOFOLLOW, mode);
	if (fd < 0) {
		fuse_reply_err(req, errno);
		return;
	}
	int err = pt_lookup_entry(parent, name, &e);
	if (err) {
		close(fd);
		fuse_reply_err(req, err);
		return;
	}
	fi->fh = (uint64_t)fd;
	pt_set_file_flags(fi);
	fuse_reply_create(req, &e, fi);
}

static void pt_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info *fi)
{
	struct fuse_bufvec buf = FUSE_BUFVEC_INIT(size);
	(void)ino;
	buf.buf[0].flags = FUSE_BUF_IS_FD | FUSE_BUF_FD_SEEK;
	buf.buf[0].fd = (int)fi->fh;
	buf.buf[0].pos = off;
	fuse_reply_data(req, &buf, FUSE_BUF_SPLICE_MOVE);
}

static void pt_write_buf(fuse_req_t req, fuse_ino_t ino, struct fuse_bufvec *in, off_t off,
			 struct fuse_file_info *fi)
{
	struct fuse_bufvec out = FUSE_BUFVEC_INIT(fuse_buf_size(in));
	(void)ino;
	out.buf[0].flags = FUSE_BUF_IS_FD | FUSE_BUF_FD_SEEK;
	out.buf[0].fd = (int)fi->fh;
	out.buf[0].pos = off;
	ssize_t n = fuse_buf_copy(&out, in, 0);
	if (n < 0)
		fuse_reply_err(req, (int)-n);
	else
		fuse_reply_write(req, (size_t)n);
}

static void pt_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	(void)ino;
	/* what close() would report, without closing the handle */
	int fd = dup((int)fi->fh);
	fuse_reply_err(req, fd < 0 ? errno : (close(fd) < 0 ? errno : 0));
}

static void pt_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	(void)ino;
	close((int)fi->fh);
	fuse_reply_err(req, 0);
}

static void pt_fsync(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi)
{
	(void)ino;
	int rc = datasync ? fdatasync((int)fi->fh) : fsync((int)fi->fh);
	fuse_reply_err(req, rc < 0 ? errno : 0);
}

static void pt_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct pt_dir *d = calloc(1, sizeof(*d));
	if (!d) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	int fd = openat(pt_fd_of(ino), ".", O_RDONLY | O_DIRECTORY);
	if (fd < 0 || !(d->dp = fdopendir(fd))) {
		int err = errno;
		if (fd >= 0)
			close(fd);
		free(d);
		fuse_reply_err(req, err);
		return;
	}
	fi->fh = (uint64_t)(uintptr_t)d;
	fuse_reply_open(req, fi);
}

static void pt_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info *fi)
{
	struct pt_dir *d = (struct pt_dir *)(uintptr_t)fi->fh;
	char *buf = malloc(size);
	size_t used = 0;
	(void)ino;
	if (!buf) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	if (off != d->offset) {
		seekdir(d->dp, off);
		d->entry = NULL;
		d->offset = off;
	}
	for (;;) {
		if (!d->entry) {
			errno = 0;
			d->entry = readdir(d->dp);
			if (!d->entry) {
				if (errno && used == 0) {
					free(buf);
					fuse_reply_err(req, errno);
					return;
				}
				break;
			}
		}
		struct stat st = {.st_ino = d->entry->d_ino, .st_mode = (mode_t)d->entry->d_type << 12};
		size_t n = fuse_add_direntry(req, buf + used, size - used, d->entry->d_name, &st,
					     d->entry->d_off);
		if (n > size - used)
			break; /* keep d->entry for the next call */
		used += n;
		d->offset = d->entry->d_off;
		d->entry = NULL;
	}
	fuse_reply_buf(req, buf, used);
	free(buf);
}

static void pt_releasedir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct pt_dir *d = (struct pt_dir *)(uintptr_t)fi->fh;
	(void)ino;
	closedir(d->dp);
	free(d);
	fuse_reply_err(req, 0);
}

static void pt_fsyncdir(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi)
{
	struct pt_dir *d = (struct pt_dir *)(uintptr_t)fi->fh;
	int fd = dirfd(d->dp);
	(void)ino;
	int rc = datasync ? fdatasync(fd) : fsync(fd);
	fuse_reply_err(req, rc < 0 ? errno : 0);
}

static void pt_statfs(fuse_req_t req, fuse_ino_t ino)
{
	struct statvfs sv;
	if (fstatvfs(pt_fd_of(ino), &sv) < 0)
		fuse_reply_err(req, errno);
	else
		fuse_reply_statfs(req, &sv);
}

static void pt_fallocate(fuse_req_t req, fuse_ino_t ino, int mode, off_t off, off_t len,
			 struct fuse_file_info *fi)
{
	(void)ino;
	fuse_reply_err(req, fallocate((int)fi->fh, mode, off, len) < 0 ? errno : 0);
}

/*
 * Extended attributes, only with --xattr. Without them the first GETXATTR gets
 * ENOSYS and the kernel never asks again; with them the kernel asks for
 * security.capability before every write (to drop privileges), as it does for
 * any file system that has xattrs and does not take FUSE_HANDLE_KILLPRIV_V2.
 */
static void pt_getxattr(fuse_req_t req, fuse_ino_t ino, const char *name, size_t size)
{
	char path[64], *buf = NULL;
	if (!g_fs.xattr) {
		fuse_reply_err(req, ENOSYS);
		return;
	}
	pt_proc_path(path, sizeof(path), pt_fd_of(ino));
	if (size && !(buf = malloc(size))) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	ssize_t n = getxattr(path, name, buf, size);
	if (n < 0)
		fuse_reply_err(req, errno);
	else if (size == 0)
		fuse_reply_xattr(req, (size_t)n);
	else
		fuse_reply_buf(req, buf, (size_t)n);
	free(buf);
}

static void pt_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size)
{
	char path[64], *buf = NULL;
	if (!g_fs.xattr) {
		fuse_reply_err(req, ENOSYS);
		return;
	}
	pt_proc_path(path, sizeof(path), pt_fd_of(ino));
	if (size && !(buf = malloc(size))) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	ssize_t n = listxattr(path, buf, size);
	if (n < 0)
		fuse_reply_err(req, errno);
	else if (size == 0)
		fuse_reply_xattr(req, (size_t)n);
	else
		fuse_reply_buf(req, buf, (size_t)n);
	free(buf);
}

static void pt_setxattr(fuse_req_t req, fuse_ino_t ino, const char *name, const char *value,
			size_t size, int flags)
{
	char path[64];
	if (!g_fs.xattr) {
		fuse_reply_err(req, ENOSYS);
		return;
	}
	pt_proc_path(path, sizeof(path), pt_fd_of(ino));
	fuse_reply_err(req, setxattr(path, name, value, size, flags) < 0 ? errno : 0);
}

static void pt_removexattr(fuse_req_t req, fuse_ino_t ino, const char *name)
{
	char path[64];
	if (!g_fs.xattr) {
		fuse_reply_err(req, ENOSYS);
		return;
	}
	pt_proc_path(path, sizeof(path), pt_fd_of(ino));
	fuse_reply_err(req, removexattr(path, name) < 0 ? errno : 0);
}

static const struct fuse_lowlevel_ops pt_ops = {
	.init = pt_init,
	.lookup = pt_lookup,
	.forget = pt_forget,
	.forget_multi = pt_forget_multi,
	.getattr = pt_getattr,
	.setattr = pt_setattr,
	.readlink = pt_readlink,
	.mknod = pt_mknod,
	.mkdir = pt_mkdir,
	.symlink = pt_symlink,
	.link = pt_link,
	.unlink = pt_unlink,
	.rmdir = pt_rmdir,
	.rename = pt_rename,
	.open = pt_open,
	.create = pt_create,
	.read = pt_read,
	.write_buf = pt_write_buf,
	.flush = pt_flush,
	.release = pt_release,
	.fsync = pt_fsync,
	.opendir = pt_opendir,
	.readdir = pt_readdir,
	.releasedir = pt_releasedir,
	.fsyncdir = pt_fsyncdir,
	.statfs = pt_statfs,
	.fallocate = pt_fallocate,
	.getxattr = pt_getxattr,
	.listxattr = pt_listxattr,
	.setxattr = pt_setxattr,
	.removexattr = pt_removexattr,
};

static void usage(const char *prog)
{
	fprintf(stderr,
		"usage: %s [-f] [--single] [--threads=N] [--max-write=BYTES] [--timeout=SEC]\n"
		"       [--direct-io] [--no-keep-cache] [--xattr] [-o OPTS] SOURCE MOUNTPOINT\n",
		prog);
	exit(2);
}

int main(int argc, char **argv)
{
	int foreground = 0, single = 0;
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	unsigned threads = ncpu * 2 > 8 ? (unsigned)ncpu * 2 : 8; /* as ferrite mount */
	const char *src = NULL, *mnt = NULL;
	char *fargv[10];
	int fargc = 0;

	g_fs.timeout = 1.0;
	g_fs.keep_cache = 1;
	g_fs.max_write = 1u << 20;
	fargv[fargc++] = argv[0];
	fargv[fargc++] = "-o"; /* the kernel checks permissions, as for ferrite's mount */
	fargv[fargc++] = "default_permissions";
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		if (!strcmp(a, "-f"))
			foreground = 1;
		else if (!strcmp(a, "--single"))
			single = 1;
		else if (!strncmp(a, "--threads=", 10))
			threads = (unsigned)strtoul(a + 10, NULL, 0);
		else if (!strncmp(a, "--max-write=", 12))
			g_fs.max_write = (unsigned)strtoul(a + 12, NULL, 0);
		else if (!strncmp(a, "--timeout=", 10))
			g_fs.timeout = strtod(a + 10, NULL);
		else if (!strcmp(a, "--direct-io"))
			g_fs.direct_io = 1;
		else if (!strcmp(a, "--no-keep-cache"))
			g_fs.keep_cache = 0;
		else if (!strcmp(a, "--xattr"))
			g_fs.xattr = 1;
		else if (!strcmp(a, "-o") && i + 1 < argc && fargc < 8) {
			fargv[fargc++] = argv[i++];
			fargv[fargc++] = argv[i];
		} else if (a[0] == '-')
			usage(argv[0]);
		else if (!src)
			src = a;
		else if (!mnt)
			mnt = a;
		else
			usage(argv[0]);
	}
	if (!src || !mnt)
		usage(argv[0]);

	/* one O_PATH descriptor per inode the kernel knows, as far as the limit
	 * allows (see pt_fd_of); root with CAP_SYS_RESOURCE may raise it */
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
		FILE *f = fopen("/proc/sys/fs/nr_open", "r");
		unsigned long nr_open = 0;
		if (f) {
			if (fscanf(f, "%lu", &nr_open) != 1)
				nr_open = 0;
			fclose(f);
		}
		struct rlimit want = {.rlim_cur = nr_open, .rlim_max = nr_open};
		if (!nr_open || setrlimit(RLIMIT_NOFILE, &want) != 0) {
			rl.rlim_cur = rl.rlim_max;
			setrlimit(RLIMIT_NOFILE, &rl);
		}
	}
	g_fs.maxfds = getrlimit(RLIMIT_NOFILE, &rl) == 0 ? (long)rl.rlim_cur / 2 : 512;
	pthread_key_create(&pt_ring_key, pt_ring_free);

	pthread_mutex_init(&g_fs.lock, NULL);
	g_fs.nbuckets = 65521;
	g_fs.tab = calloc(g_fs.nbuckets, sizeof(*g_fs.tab));
	g_fs.root.fd = open(src, O_PATH | O_DIRECTORY);
	g_fs.mount_fd = open(src, O_RDONLY | O_DIRECTORY);
	if (!g_fs.tab || g_fs.root.fd < 0 || g_fs.mount_fd < 0) {
		perror(src);
		return 1;
	}
	g_fs.root.nlookup = 2;

	struct fuse_args args = FUSE_ARGS_INIT(fargc, fargv);
	struct fuse_session *se = fuse_session_new(&args, &pt_ops, sizeof(pt_ops), NULL);
	if (!se)
		return 1;
	int rc = 1;
	if (fuse_set_signal_handlers(se) == 0) {
		if (fuse_session_mount(se, mnt) == 0) {
			fuse_daemonize(foreground);
			if (single) {
				rc = fuse_session_loop(se);
			} else {
				struct fuse_loop_config *cfg = fuse_loop_cfg_create();
				fuse_loop_cfg_set_clone_fd(cfg, 1);
				fuse_loop_cfg_set_max_threads(cfg, threads);
				rc = fuse_session_loop_mt(se, cfg);
				fuse_loop_cfg_destroy(cfg);
			}
			fuse_session_unmount(se);
		}
		fuse_remove_signal_handlers(se);
	}
	fuse_session_destroy(se);
	fuse_opt_free_args(&args);
	return rc ? 1 : 0;
}
