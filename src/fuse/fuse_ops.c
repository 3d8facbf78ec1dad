/*
 * fuse_ops.c -- the low-level operation table: each handler decodes the
 * request, makes the ferrite call (relative to the node's O_PATH descriptor,
 * AT_EMPTY_PATH for the node itself) with the caller's credentials, and
 * sends one reply.
 *
 * Invariants: R1 a reply is sent only after the ferrite call returned, and
 *               ferrite calls are durable on return: an acknowledged write,
 *               create or rename survives a crash of the daemon;
 *             R2 the kernel caches only what every change invalidates: all
 *               changes come through this mount (the daemon holds the pool's
 *               lock), and the kernel updates or drops its copy of what a
 *               request it sent changes, so attributes, names and page cache
 *               may be cached (keep_cache) while writes are written through
 *               (no writeback cache: a write returns when it is durable).
 *               A mount that shares the pool with other processes (-o
 *               shared) lets the kernel cache nothing: names and attributes
 *               time out at once and files are opened direct_io;
 *             R3 every entry reply counts one lookup on its node
 *               (fuse_nodes.c), undone when the reply cannot be delivered;
 *             R4 the kernel never gets a directory entry whose name is not a
 *               name (empty, with '/' or NUL, a second "." or ".."): the pool
 *               is input, and readdir fails with EUCLEAN at such an entry
 *               (util/entname.h, docs/security.md).
 *             R5 the page cache never keeps data the pool refused: a failed
 *               write-back of mapped pages is replaced by the pool's bytes.
 * Crash argument: the daemon keeps nothing persistent of its own.
 * Locking: per directory stream, a mutex (the kernel may read one open
 *   directory from several threads); none otherwise.
 */
#include <errno.h>
#include <fcntl.h>
#include <fuse_lowlevel.h>
#include <limits.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fuse_front.h"
#include "util/entname.h"

static struct ffront *ff_of(fuse_req_t req)
{
	return fuse_req_userdata(req);
}

/* Reply with -rc, or 0 for success. */
static void reply_rc(fuse_req_t req, int rc)
{
	fuse_reply_err(req, rc < 0 ? -rc : 0);
}

/* ---- credentials ------------------------------------------------------------ */

/* The library checks permissions with the requester's ids and groups (the
 * kernel has checked the mode bits already: default_permissions), and gives
 * new files the requester's uid/gid. uid 0 passes every check, so its
 * groups are not looked up (fuse_req_getgroups reads /proc). */
static void cred_enter(fuse_req_t req)
{
	const struct fuse_ctx *c = fuse_req_ctx(req);
	gid_t groups[64];
	int n = 0;
	if (c->uid != 0) {
		n = fuse_req_getgroups(req, 64, groups);
		if (n < 0)
			n = 0;
		if (n > 64)
			n = 64;
	}
	ferrite_set_creds(c->uid, c->gid, (size_t)n, groups);
}

static void cred_leave(void)
{
	ferrite_reset_creds();
}

static mode_t apply_umask(fuse_req_t req, mode_t mode)
{
	return mode & ~fuse_req_ctx(req)->umask;
}

/* ---- entries ------------------------------------------------------------------ */

static int node_fd(fuse_req_t req, fuse_ino_t id)
{
	return fnode_fd(ff_of(req), id);
}

/* Looks name up in directory node dirfd and fills e (R3: counts a lookup). */
static int do_lookup(struct ffront *ff, int dirfd, const char *name, struct fuse_entry_param *e)
{
	memset(e, 0, sizeof(*e));
	e->attr_timeout = ff->attr_timeout;
	e->entry_timeout = ff->entry_timeout;
	int fd = ferrite_openat(ff->fs, dirfd, name, O_PATH | O_NOFOLLOW, 0);
	if (fd < 0)
		return fd;
	int rc = ferrite_fstat(ff->fs, fd, &e->attr);
	if (rc < 0) {
		ferrite_close(ff->fs, fd);
		return rc;
	}
	e->ino = fnode_id(ff, (uint64_t)e->attr.st_ino);
	fnode_ref(ff, (uint64_t)e->attr.st_ino, fd);
	return 0;
}

static void reply_entry(fuse_req_t req, const struct fuse_entry_param *e)
{
	if (fuse_reply_entry(req, e) == -ENOENT && e->ino)
		fnode_unref(ff_of(req), e->ino, 1); /* the request was interrupted */
}

static void ll_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct ffront *ff = ff_of(req);
	struct fuse_entry_param e;
	int dfd = node_fd(req, parent);
	cred_enter(req);
	int rc = dfd < 0 ? dfd : do_lookup(ff, dfd, name, &e);
	cred_leave();
	if (rc == -ENOENT) {
		/* a negative entry: every create goes through the kernel,
		 * which drops it then (R2) */
		memset(&e, 0, sizeof(e));
		e.entry_timeout = ff->entry_timeout;
		fuse_reply_entry(req, &e);
	} else if (rc < 0) {
		reply_rc(req, rc);
	} else {
		reply_entry(req, &e);
	}
}

/* After a call that made name in parent: the entry reply for it. */
static void reply_made(fuse_req_t req, int dfd, const char *name, int rc)
{
	struct fuse_entry_param e;
	if (rc >= 0)
		rc = do_lookup(ff_of(req), dfd, name, &e);
	if (rc < 0)
		reply_rc(req, rc);
	else
		reply_entry(req, &e);
}

/* The last forget of an unlinked file gives its space back (fuse_frees.c). */
static void ll_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup)
{
	struct ffront *ff = ff_of(req);
	frees_slow(ff);
	fnode_unref(ff, ino, nlookup);
	frees_done(ff);
	fuse_reply_none(req);
}

static void ll_forget_multi(fuse_req_t req, size_t count, struct fuse_forget_data *forgets)
{
	struct ffront *ff = ff_of(req);
	frees_slow(ff);
	for (size_t i = 0; i < count; i++)
		fnode_unref(ff, forgets[i].ino, forgets[i].nlookup);
	frees_done(ff);
	fuse_reply_none(req);
}

/* ---- attributes ----------------------------------------------------------------- */

static int stat_node(struct ffront *ff, int fd, struct stat *st)
{
	return ferrite_fstatat(ff->fs, fd, "", st, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW);
}

static void ll_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct ffront *ff = ff_of(req);
	struct stat st;
	int fd = node_fd(req, ino);
	int rc = fd < 0 ? fd : stat_node(ff, fd, &st);
	if (rc < 0)
		reply_rc(req, rc);
	else
		fuse_reply_attr(req, &st, ff->attr_timeout);
}

static int set_size(struct ffront *ff, int fd, struct fuse_file_info *fi, off_t size)
{
	if (fi)
		return ferrite_ftruncate(ff->fs, (int)fi->fh, size);
	/* truncate(2) by name: needs write permission, as opening does */
	int wfd = ferrite_reopen(ff->fs, fd, O_WRONLY);
	if (wfd < 0)
		return wfd;
	int rc = ferrite_ftruncate(ff->fs, wfd, size);
	ferrite_close(ff->fs, wfd);
	return rc;
}

static void ll_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr, int to_set,
		       struct fuse_file_info *fi)
{
	struct ffront *ff = ff_of(req);
	int fd = node_fd(req, ino);
	int rc = fd < 0 ? fd : 0;
	const int here = AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW;
	cred_enter(req);
	if (!rc && (to_set & FUSE_SET_ATTR_MODE))
		rc = ferrite_fchmodat(ff->fs, fd, "", attr->st_mode & 07777, AT_EMPTY_PATH);
	if (!rc && (to_set & (FUSE_SET_ATTR_UID | FUSE_SET_ATTR_GID)))
		rc = ferrite_fchownat(
		    ff->fs, fd, "", (to_set & FUSE_SET_ATTR_UID) ? attr->st_uid : (uid_t)-1,
		    (to_set & FUSE_SET_ATTR_GID) ? attr->st_gid : (gid_t)-1, here);
	if (!rc && (to_set & FUSE_SET_ATTR_SIZE))
		rc = set_size(ff, fd, fi, attr->st_size);
	if (!rc && (to_set & (FUSE_SET_ATTR_ATIME | FUSE_SET_ATTR_MTIME))) {
		struct timespec t[2] = {{0, UTIME_OMIT}, {0, UTIME_OMIT}};
		if (to_set & FUSE_SET_ATTR_ATIME_NOW)
			t[0].tv_nsec = UTIME_NOW;
		else if (to_set & FUSE_SET_ATTR_ATIME)
			t[0] = attr->st_atim;
		if (to_set & FUSE_SET_ATTR_MTIME_NOW)
			t[1].tv_nsec = UTIME_NOW;
		else if (to_set & FUSE_SET_ATTR_MTIME)
			t[1] = attr->st_mtim;
		rc = ferrite_utimensat(ff->fs, fd, "", t, here);
	}
	cred_leave();
	struct stat st;
	if (!rc)
		rc = stat_node(ff, fd, &st);
	if (rc < 0)
		reply_rc(req, rc);
	else
		fuse_reply_attr(req, &st, ff->attr_timeout);
}

static void ll_access(fuse_req_t req, fuse_ino_t ino, int mask)
{
	int fd = node_fd(req, ino);
	cred_enter(req);
	int rc = fd < 0 ? fd : ferrite_faccessat(ff_of(req)->fs, fd, "", mask, AT_EMPTY_PATH);
	cred_leave();
	reply_rc(req, rc);
}

static void ll_statfs(fuse_req_t req, fuse_ino_t ino)
{
	struct statvfs sv;
	struct frees_mark m = {0, 0};
	frees_settle(ff_of(req), &m); /* `rm big; df` shows the space back */
	int rc = ferrite_statvfs(ff_of(req)->fs, &sv);
	if (rc < 0)
		reply_rc(req, rc);
	else
		fuse_reply_statfs(req, &sv);
}

static void ll_readlink(fuse_req_t req, fuse_ino_t ino)
{
	char buf[PATH_MAX + 1];
	int fd = node_fd(req, ino);
	ssize_t n = fd < 0 ? fd : ferrite_readlinkat(ff_of(req)->fs, fd, "", buf, PATH_MAX);
	if (n < 0) {
		reply_rc(req, (int)n);
		return;
	}
	buf[n] = '\0';
	fuse_reply_readlink(req, buf);
}

/* ---- namespace -------------------------------------------------------------------- */

static void ll_mknod(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode, dev_t rdev)
{
	int dfd = node_fd(req, parent);
	cred_enter(req);
	int rc = dfd < 0 ? dfd
			 : FF_UNTIL_FULL(ff_of(req), ferrite_mknodat(ff_of(req)->fs, dfd, name,
								     apply_umask(req, mode), rdev));
	reply_made(req, dfd, name, rc);
	cred_leave();
}

static void ll_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode)
{
	int dfd = node_fd(req, parent);
	cred_enter(req);
	int rc = dfd < 0 ? dfd
			 : FF_UNTIL_FULL(ff_of(req), ferrite_mkdirat(ff_of(req)->fs, dfd, name,
								     apply_umask(req, mode)));
	reply_made(req, dfd, name, rc);
	cred_leave();
}

static void ll_symlink(fuse_req_t req, const char *link, fuse_ino_t parent, const char *name)
{
	int dfd = node_fd(req, parent);
	cred_enter(req);
	int rc =
	    dfd < 0 ? dfd
		    : FF_UNTIL_FULL(ff_of(req), ferrite_symlinkat(ff_of(req)->fs, link, dfd, name));
	reply_made(req, dfd, name, rc);
	cred_leave();
}

static void ll_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent, const char *newname)
{
	int fd = node_fd(req, ino), dfd = node_fd(req, newparent);
	cred_enter(req);
	int rc = fd < 0 ? fd : dfd < 0 ? dfd : 0;
	if (!rc)
		rc = FF_UNTIL_FULL(ff_of(req), ferrite_linkat(ff_of(req)->fs, fd, "", dfd, newname,
							      AT_EMPTY_PATH));
	reply_made(req, dfd, newname, rc);
	cred_leave();
}

static void ll_unlink(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	int dfd = node_fd(req, parent);
	cred_enter(req);
	int rc = dfd < 0 ? dfd : ferrite_unlinkat(ff_of(req)->fs, dfd, name, 0);
	cred_leave();
	reply_rc(req, rc);
}

static void ll_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	int dfd = node_fd(req, parent);
	cred_enter(req);
	int rc = dfd < 0 ? dfd : ferrite_unlinkat(ff_of(req)->fs, dfd, name, AT_REMOVEDIR);
	cred_leave();
	reply_rc(req, rc);
}

static void ll_rename(fuse_req_t req, fuse_ino_t parent, const char *name, fuse_ino_t newparent,
		      const char *newname, unsigned int flags)
{
	int dfd = node_fd(req, parent), ndfd = node_fd(req, newparent);
	int rc = dfd < 0 ? dfd : ndfd < 0 ? ndfd : 0;
	cred_enter(req);
	if (!rc)
		rc = FF_UNTIL_FULL(
		    ff_of(req), ferrite_renameat2(ff_of(req)->fs, dfd, name, ndfd, newname, flags));
	cred_leave();
	reply_rc(req, rc);
}

/* ---- files ------------------------------------------------------------------------- */

/* Flags for the I/O descriptor of an open file. O_APPEND is dropped: the
 * kernel already turned appends into writes at its end of file (it
 * serialises writes per inode), and positioned writes must land where it
 * says. */
static int io_flags(int flags)
{
	return flags & ~(O_APPEND | O_CREAT | O_EXCL | O_NOCTTY);
}

/* R2: a pool held alone lets the kernel keep file data across opens; a
 * shared one goes to the pool for every read and write, since another
 * process may have changed it (the kernel then refuses a shared mmap:
 * ENODEV, rather than show pages another process has overwritten). */
static void cache_policy(const struct ffront *ff, struct fuse_file_info *fi)
{
	fi->keep_cache = !ff->shared;
	fi->direct_io = ff->shared;
}

static void ll_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	int fd = node_fd(req, ino);
	cred_enter(req);
	int iofd = fd < 0 ? fd : ferrite_reopen(ff_of(req)->fs, fd, io_flags(fi->flags));
	cred_leave();
	if (iofd < 0) {
		reply_rc(req, iofd);
		return;
	}
	fi->fh = (uint64_t)iofd;
	cache_policy(ff_of(req), fi);
	fnode_handle_opened(ff_of(req), ino);
	if (fuse_reply_open(req, fi) == -ENOENT) {
		fnode_handle_closed(ff_of(req), ino, 0);
		ferrite_close(ff_of(req)->fs, iofd);
	}
}

static void ll_create(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
		      struct fuse_file_info *fi)
{
	struct ffront *ff = ff_of(req);
	struct fuse_entry_param e;
	int dfd = node_fd(req, parent);
	cred_enter(req);
	int iofd =
	    dfd < 0
		? dfd
		: FF_UNTIL_FULL(ff, ferrite_openat(ff->fs, dfd, name, io_flags(fi->flags) | O_CREAT,
						   apply_umask(req, mode)));
	cred_leave();
	if (iofd < 0) {
		reply_rc(req, iofd);
		return;
	}
	/* the node: the inode just opened, even if the name moved meanwhile */
	memset(&e, 0, sizeof(e));
	e.attr_timeout = ff->attr_timeout;
	e.entry_timeout = ff->entry_timeout;
	int pfd = ferrite_reopen(ff->fs, iofd, O_PATH);
	int rc = pfd < 0 ? pfd : ferrite_fstat(ff->fs, iofd, &e.attr);
	if (rc < 0) {
		if (pfd >= 0)
			ferrite_close(ff->fs, pfd);
		ferrite_close(ff->fs, iofd);
		reply_rc(req, rc);
		return;
	}
	e.ino = fnode_id(ff, (uint64_t)e.attr.st_ino);
	fnode_ref(ff, (uint64_t)e.attr.st_ino, pfd);
	fi->fh = (uint64_t)iofd;
	cache_policy(ff, fi);
	fnode_handle_opened(ff, e.ino);
	if (fuse_reply_create(req, &e, fi) == -ENOENT) {
		fnode_handle_closed(ff, e.ino, 0);
		fnode_unref(ff, e.ino, 1);
		ferrite_close(ff->fs, iofd);
	}
}

/* Per-thread read buffer, grown to the largest read seen (max_read). */
static pthread_key_t rbuf_key;
static pthread_once_t rbuf_once = PTHREAD_ONCE_INIT;

struct rbuf {
	size_t cap;
	char data[];
};

static void rbuf_key_init(void)
{
	pthread_key_create(&rbuf_key, free);
}

static char *rbuf_get(size_t size)
{
	pthread_once(&rbuf_once, rbuf_key_init);
	struct rbuf *b = pthread_getspecific(rbuf_key);
	if (b && b->cap >= size)
		return b->data;
	free(b);
	b = malloc(sizeof(*b) + size);
	if (b)
		b->cap = size;
	pthread_setspecific(rbuf_key, b);
	return b ? b->data : NULL;
}

static void ll_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		    struct fuse_file_info *fi)
{
	char *buf = rbuf_get(size);
	if (!buf) {
		reply_rc(req, -ENOMEM);
		return;
	}
	ssize_t n = ferrite_pread(ff_of(req)->fs, (int)fi->fh, buf, size, off);
	if (n < 0)
		reply_rc(req, (int)n);
	else
		fuse_reply_buf(req, buf, (size_t)n);
}

/* R5: a write-back of the kernel's pages (stores through a shared mapping)
 * that the pool refused, ENOSPC in a hole of a full pool, would leave those
 * pages in the page cache, clean, showing data the pool does not hold. The
 * kernel records the error for msync, fsync and close; the daemon puts what
 * the pool holds into the pages before it replies, so when msync returns
 * every reader and the writer's own mapping see the pool's bytes. That is
 * safe inside the request: storing into the cache waits for no page under
 * write-back, and a store by the program into these pages waits in
 * page_mkwrite until the reply. If the pool's bytes cannot be read, the
 * pages are dropped instead, on a thread of its own after the reply (a drop
 * waits for the write-back that the reply ends). */
struct refused_pages {
	struct fuse_session *se;
	fuse_ino_t ino;
	off_t off, len;
};

static void *drop_refused_thread(void *arg)
{
	struct refused_pages *rp = arg;
	fuse_lowlevel_notify_inval_inode(rp->se, rp->ino, rp->off, rp->len);
	free(rp);
	return NULL;
}

static void drop_pages_after_reply(struct ffront *ff, fuse_ino_t ino, off_t off, size_t len)
{
	struct refused_pages *rp = malloc(sizeof(*rp));
	pthread_t t;
	pthread_attr_t attr;
	if (!rp) /* out of memory: the error still reaches msync and fsync */
		return;
	*rp = (struct refused_pages){ff->se, ino, off, (off_t)len};
	if (pthread_attr_init(&attr) != 0) {
		free(rp);
		return;
	}
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	if (pthread_create(&t, &attr, drop_refused_thread, rp) != 0)
		free(rp);
	pthread_attr_destroy(&attr);
}

/* Before the reply: 0 when the cache now holds the pool's bytes of the range. */
static int restore_refused_pages(struct ffront *ff, fuse_ino_t ino, int fd, off_t off, size_t len)
{
	void *buf = malloc(len);
	if (!buf)
		return -ENOMEM;
	ssize_t n = ferrite_pread(ff->fs, fd, buf, len, off);
	int rc = n == (ssize_t)len ? 0 : -EIO; /* short: the file shrank meanwhile */
	if (rc == 0) {
		struct fuse_bufvec bv = FUSE_BUFVEC_INIT(len);
		bv.buf[0].mem = buf;
		rc = fuse_lowlevel_notify_store(ff->se, ino, off, &bv, 0);
	}
	free(buf);
	return rc;
}

/* A write: the whole of it, unless the pool is full (or refuses it otherwise)
 * with no space coming back (fuse_frees.c); else the bytes written, or the
 * error if none were. */
static ssize_t write_until_full(struct ffront *ff, int fd, const char *buf, size_t size, off_t off)
{
	struct frees_mark m = frees_mark(ff);
	size_t done = 0;
	for (;;) {
		ssize_t n = ferrite_pwrite(ff->fs, fd, buf + done, size - done, off + (off_t)done);
		if (n > 0)
			done += (size_t)n;
		if (done == size || n == 0 || (n < 0 && (n != -ENOSPC || !frees_settle(ff, &m))))
			return done ? (ssize_t)done : n;
	}
}

static void ll_write_buf(fuse_req_t req, fuse_ino_t ino, struct fuse_bufvec *bufv, off_t off,
			 struct fuse_file_info *fi)
{
	struct ffront *ff = ff_of(req);
	size_t size = fuse_buf_size(bufv);
	ssize_t n;
	/* The writer's ids: with FUSE_HANDLE_KILLPRIV_V2 (fuse_wire.c) the
	 * engine takes set-id bits away as the kernel would, for the writer. */
	cred_enter(req);
	if (bufv->count == 1 && !(bufv->buf[0].flags & FUSE_BUF_IS_FD)) {
		n = write_until_full(ff, (int)fi->fh, bufv->buf[0].mem, size, off);
	} else {
		/* spliced or scattered: gather into memory first */
		struct fuse_bufvec dst = FUSE_BUFVEC_INIT(size);
		dst.buf[0].mem = rbuf_get(size);
		if (!dst.buf[0].mem) {
			cred_leave();
			reply_rc(req, -ENOMEM);
			return;
		}
		n = fuse_buf_copy(&dst, bufv, 0);
		if (n >= 0)
			n = write_until_full(ff, (int)fi->fh, dst.buf[0].mem, (size_t)n, off);
	}
	cred_leave();
	/* R1: ferrite_pwrite returned, the data is durable */
	int drop = 0;
	if (fi->writepage && n >= 0 && (size_t)n < size)
		n = -ENOSPC;	    /* the kernel ignores a short count for its pages */
	if (fi->writepage && n < 0) /* R5 */
		drop = restore_refused_pages(ff, ino, (int)fi->fh, off, size) != 0;
	if (n < 0)
		reply_rc(req, (int)n);
	else
		fuse_reply_write(req, (size_t)n);
	if (drop)
		drop_pages_after_reply(ff, ino, off, size);
}

static void ll_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	reply_rc(req, 0); /* writes are durable when acknowledged */
}

static void ll_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct ffront *ff = ff_of(req);
	frees_slow(ff);
	int rc = ferrite_close(ff->fs, (int)fi->fh);
	if (!fnode_handle_closed(ff, ino, 1))
		frees_done(ff); /* else the node's forget ends this count */
	reply_rc(req, rc);
}

static void ll_fsync(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi)
{
	struct ffront *ff = ff_of(req);
	reply_rc(req, datasync ? ferrite_fdatasync(ff->fs, (int)fi->fh)
			       : ferrite_fsync(ff->fs, (int)fi->fh));
}

static void ll_fallocate(fuse_req_t req, fuse_ino_t ino, int mode, off_t offset, off_t length,
			 struct fuse_file_info *fi)
{
	reply_rc(req, FF_UNTIL_FULL(ff_of(req), ferrite_fallocate(ff_of(req)->fs, (int)fi->fh, mode,
								  offset, length)));
}

static void ll_lseek(fuse_req_t req, fuse_ino_t ino, off_t off, int whence,
		     struct fuse_file_info *fi)
{
	off_t r = ferrite_lseek(ff_of(req)->fs, (int)fi->fh, off, whence);
	if (r < 0)
		reply_rc(req, (int)r);
	else
		fuse_reply_lseek(req, r);
}

static void ll_copy_file_range(fuse_req_t req, fuse_ino_t ino_in, off_t off_in,
			       struct fuse_file_info *fi_in, fuse_ino_t ino_out, off_t off_out,
			       struct fuse_file_info *fi_out, size_t len, int flags)
{
	ssize_t n = FF_UNTIL_FULL(
	    ff_of(req), ferrite_copy_file_range(ff_of(req)->fs, (int)fi_in->fh, &off_in,
						(int)fi_out->fh, &off_out, len, (unsigned)flags));
	if (n < 0)
		reply_rc(req, (int)n);
	else
		fuse_reply_write(req, (size_t)n);
}

/* ---- directories --------------------------------------------------------------------- */

struct fdir {
	pthread_mutex_t lock;
	ferrite_dir *dir;
	int fd;
	int64_t pos;	     /* FUSE offset the stream stands at (cookie of the next entry) */
	int pending;	     /* ent was read but did not fit the last reply, or was refused */
	const char *refused; /* why ent's name is not a name (R4), or NULL */
	int told;	     /* the refusal was logged */
	struct fr_entname_state names;
	struct ferrite_dirent ent;
};

static void ll_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct ffront *ff = ff_of(req);
	int fd = node_fd(req, ino);
	struct fdir *d = calloc(1, sizeof(*d));
	if (!d) {
		reply_rc(req, -ENOMEM);
		return;
	}
	cred_enter(req);
	int rc = fd < 0 ? fd : ferrite_reopen(ff->fs, fd, O_RDONLY | O_DIRECTORY);
	cred_leave();
	if (rc >= 0) {
		d->fd = rc;
		rc = ferrite_fdopendir(ff->fs, d->fd, &d->dir);
		if (rc < 0)
			ferrite_close(ff->fs, d->fd);
	}
	if (rc < 0) {
		free(d);
		reply_rc(req, rc);
		return;
	}
	pthread_mutex_init(&d->lock, NULL);
	fi->fh = (uint64_t)(uintptr_t)d;
	if (fuse_reply_open(req, fi) == -ENOENT) {
		ferrite_closedir(d->dir);
		ferrite_close(ff->fs, d->fd);
		free(d);
	}
}

static int is_dot(const char *n)
{
	return n[0] == '.' && (n[1] == '\0' || (n[1] == '.' && n[2] == '\0'));
}

/* R4: an entry the kernel must not see. It stays pending, so every read
 * from here on fails the same way; the entries before it were delivered. */
static int refuse_entry(fuse_ino_t ino, struct fdir *d)
{
	char shown[96];
	if (!d->told)
		fuse_log(FUSE_LOG_ERR,
			 "ferrite mount: directory %llu: entry '%s' refused: %s (the pool is "
			 "damaged or crafted; unmount it and run `ferrite fsck`)\n",
			 (unsigned long long)ino,
			 fr_entname_show(d->ent.name, sizeof(d->ent.name), shown, sizeof(shown)),
			 d->refused);
	d->told = 1;
	d->pending = 1;
	return -EUCLEAN;
}

/* readdir and readdirplus. Offsets are the library's cookies (stable while
 * entries come and go), so a reply cut short resumes exactly. */
static void do_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		       struct fuse_file_info *fi, int plus)
{
	struct ffront *ff = ff_of(req);
	struct fdir *d = (struct fdir *)(uintptr_t)fi->fh;
	char *buf = malloc(size);
	size_t used = 0;
	int rc = buf ? 0 : -ENOMEM, dfd = plus ? node_fd(req, ino) : 0;
	if (plus && dfd < 0)
		rc = dfd;
	pthread_mutex_lock(&d->lock);
	if (!rc && off != d->pos) {
		rc = ferrite_seekdir(d->dir, off);
		d->pos = off;
		d->pending = 0;
		fr_entname_reset(&d->names);
	}
	if (plus)
		cred_enter(req);
	while (!rc) {
		if (!d->pending) {
			memset(d->ent.name, 0, sizeof(d->ent.name)); /* entname.h */
			int r = ferrite_readdir(d->dir, &d->ent);
			if (r <= 0) {
				rc = used ? 0 : r; /* report an error only with nothing to show */
				break;
			}
			d->refused =
			    fr_entname_problem(&d->names, d->ent.name, sizeof(d->ent.name));
		}
		if (d->refused) {
			int r = refuse_entry(ino, d);
			rc = used ? 0 : r;
			break;
		}
		d->pending = 0;
		size_t len;
		const char *name = d->ent.name;
		if (plus) {
			struct fuse_entry_param e;
			int looked = 0;
			if (is_dot(name)) {
				memset(&e, 0, sizeof(e)); /* ino 0: the kernel makes no dentry */
				e.attr.st_ino = (ino_t)d->ent.ino;
				e.attr.st_mode = (mode_t)d->ent.type << 12;
			} else if (do_lookup(ff, dfd, name, &e) < 0) {
				d->pos = d->ent.off; /* gone meanwhile: skip it */
				continue;
			} else {
				looked = 1;
			}
			len = fuse_add_direntry_plus(req, buf + used, size - used, name, &e,
						     d->ent.off);
			if (len > size - used && looked)
				fnode_unref(ff, e.ino, 1);
		} else {
			struct stat st = {.st_ino = (ino_t)d->ent.ino,
					  .st_mode = (mode_t)d->ent.type << 12};
			len =
			    fuse_add_direntry(req, buf + used, size - used, name, &st, d->ent.off);
		}
		if (len > size - used) {
			d->pending = 1;
			break;
		}
		used += len;
		d->pos = d->ent.off;
	}
	if (plus)
		cred_leave();
	pthread_mutex_unlock(&d->lock);
	if (rc < 0)
		reply_rc(req, rc);
	else
		fuse_reply_buf(req, buf, used);
	free(buf);
}

static void ll_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		       struct fuse_file_info *fi)
{
	do_readdir(req, ino, size, off, fi, 0);
}

static void ll_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
			   struct fuse_file_info *fi)
{
	do_readdir(req, ino, size, off, fi, 1);
}

static void ll_releasedir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct ffront *ff = ff_of(req);
	struct fdir *d = (struct fdir *)(uintptr_t)fi->fh;
	frees_slow(ff);
	ferrite_closedir(d->dir);
	ferrite_close(ff->fs, d->fd);
	pthread_mutex_destroy(&d->lock);
	free(d);
	frees_done(ff);
	reply_rc(req, 0);
}

static void ll_fsyncdir(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi)
{
	reply_rc(req, 0); /* namespace changes are durable when acknowledged */
}

/* ---- extended attributes ---------------------------------------------------------------- */

static void ll_setxattr(fuse_req_t req, fuse_ino_t ino, const char *name, const char *value,
			size_t size, int flags)
{
	int fd = node_fd(req, ino);
	cred_enter(req);
	int rc = fd < 0 ? fd
			: FF_UNTIL_FULL(ff_of(req), ferrite_fsetxattr(ff_of(req)->fs, fd, name,
								      value, size, flags));
	cred_leave();
	reply_rc(req, rc);
}

/* getxattr and listxattr: size 0 asks for the size. */
static void reply_sized(fuse_req_t req, ssize_t n, const char *buf, size_t size)
{
	if (n < 0)
		reply_rc(req, (int)n);
	else if (size == 0)
		fuse_reply_xattr(req, (size_t)n);
	else
		fuse_reply_buf(req, buf, (size_t)n);
}

static void ll_getxattr(fuse_req_t req, fuse_ino_t ino, const char *name, size_t size)
{
	int fd = node_fd(req, ino);
	char *buf = size ? malloc(size) : NULL;
	ssize_t n = fd < 0 ? fd : size && !buf ? -ENOMEM : 0;
	cred_enter(req);
	if (!n)
		n = ferrite_fgetxattr(ff_of(req)->fs, fd, name, buf, size);
	cred_leave();
	reply_sized(req, n, buf, size);
	free(buf);
}

static void ll_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size)
{
	int fd = node_fd(req, ino);
	char *buf = size ? malloc(size) : NULL;
	ssize_t n = fd < 0 ? fd : size && !buf ? -ENOMEM : 0;
	cred_enter(req);
	if (!n)
		n = ferrite_flistxattr(ff_of(req)->fs, fd, buf, size);
	cred_leave();
	reply_sized(req, n, buf, size);
	free(buf);
}

static void ll_removexattr(fuse_req_t req, fuse_ino_t ino, const char *name)
{
	int fd = node_fd(req, ino);
	cred_enter(req);
	int rc = fd < 0 ? fd : ferrite_fremovexattr(ff_of(req)->fs, fd, name);
	cred_leave();
	reply_rc(req, rc);
}

/* ---- session ------------------------------------------------------------------------------- */

static void ll_init(void *userdata, struct fuse_conn_info *conn)
{
	/* R2: writes go through to PM before they are acknowledged */
	conn->want &= ~FUSE_CAP_WRITEBACK_CACHE;
	/* splice only pays when data can move between kernel descriptors;
	 * ferrite data is in this process, so it would add a copy */
	conn->want &= ~(FUSE_CAP_SPLICE_READ | FUSE_CAP_SPLICE_WRITE | FUSE_CAP_SPLICE_MOVE);
	const unsigned wanted = FUSE_CAP_DONT_MASK | FUSE_CAP_ASYNC_READ |
				FUSE_CAP_PARALLEL_DIROPS | FUSE_CAP_ATOMIC_O_TRUNC |
				FUSE_CAP_CACHE_SYMLINKS | FUSE_CAP_READDIRPLUS |
				FUSE_CAP_READDIRPLUS_AUTO | FUSE_CAP_ASYNC_DIO;
	conn->want |= conn->capable & wanted;
	conn->max_write = 1u << 20;
	conn->max_readahead = 1u << 20;
	conn->max_background = 64;
	conn->congestion_threshold = 48;
	conn->time_gran = 1;
}

const struct fuse_lowlevel_ops fuse_front_ops = {
    .init = ll_init,
    .lookup = ll_lookup,
    .forget = ll_forget,
    .forget_multi = ll_forget_multi,
    .getattr = ll_getattr,
    .setattr = ll_setattr,
    .readlink = ll_readlink,
    .mknod = ll_mknod,
    .mkdir = ll_mkdir,
    .unlink = ll_unlink,
    .rmdir = ll_rmdir,
    .symlink = ll_symlink,
    .rename = ll_rename,
    .link = ll_link,
    .open = ll_open,
    .read = ll_read,
    .write_buf = ll_write_buf,
    .flush = ll_flush,
    .release = ll_release,
    .fsync = ll_fsync,
    .opendir = ll_opendir,
    .readdir = ll_readdir,
    .readdirplus = ll_readdirplus,
    .releasedir = ll_releasedir,
    .fsyncdir = ll_fsyncdir,
    .statfs = ll_statfs,
    .setxattr = ll_setxattr,
    .getxattr = ll_getxattr,
    .listxattr = ll_listxattr,
    .removexattr = ll_removexattr,
    .access = ll_access,
    .create = ll_create,
    .fallocate = ll_fallocate,
    .lseek = ll_lseek,
    .copy_file_range = ll_copy_file_range,
};
