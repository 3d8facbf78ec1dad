/*
 * file.c -- open files: the vnode table (inodes held open), open file
 * descriptions, descriptors, and the descriptor-based calls of ferrite.h.
 *
 * Invariants: F1 a vnode exists while at least one descriptor or directory
 *               stream has its inode open; vnode.opens changes only under
 *               vn_lock AND the inode's lock, so unlink (which holds the
 *               inode's write lock) sees a stable answer to "is it open?";
 *             F2 the last close of an unlinked inode releases it (it was on
 *               the orphan list until then);
 *             F3 on a pool shared with other processes, the coordination
 *               file counts the processes that have a vnode of an inode (and
 *               those that map it): "open" and "last close" mean in any
 *               process (space/share.c H4).
 * Locking: fd_lock guards the descriptor array; vn_lock the vnode table;
 *   pos_lock an open file description's offset.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fs/fs.h"

#define API_BEGIN()    fr_err_clear()
#define API_RETURN(rc) return api_end(rc)

#define finish_ss(rc) api_end_ss(rc)

/* ---- vnodes -------------------------------------------------------------- */

static uint64_t vn_slot(ferrite_fs *fs, uint64_t ino)
{
	return (ino * 0x9e3779b97f4a7c15ULL >> 20) & (fs->vn_cap - 1);
}

static struct vnode *vn_find(ferrite_fs *fs, uint64_t ino)
{
	for (struct vnode *v = fs->vn_hash[vn_slot(fs, ino)]; v; v = v->next)
		if (v->ino == ino)
			return v;
	return NULL;
}

/* Open or mapped here, or in another process sharing the pool (F3). */
int vn_is_open(ferrite_fs *fs, uint64_t ino)
{
	pthread_mutex_lock(&fs->vn_lock);
	struct vnode *v = vn_find(fs, ino);
	int open = (v && v->opens > 0) || share_ino_count(fs->m.pool.share, ino, SHARE_OPENS) > 0;
	pthread_mutex_unlock(&fs->vn_lock);
	return open;
}

int vn_mapped(ferrite_fs *fs, uint64_t ino)
{
	pthread_mutex_lock(&fs->vn_lock);
	struct vnode *v = vn_find(fs, ino);
	int mapped = (v && __atomic_load_n(&v->mmaps, __ATOMIC_ACQUIRE) > 0) ||
		     share_ino_count(fs->m.pool.share, ino, SHARE_MAPS) > 0;
	pthread_mutex_unlock(&fs->vn_lock);
	return mapped;
}

/* A mapping of vn begins (+1) or ends (-1); the first and the last tell the
 * other processes (F3). */
void vn_map_add(ferrite_fs *fs, struct vnode *vn, int delta)
{
	pthread_mutex_lock(&fs->vn_lock);
	int now = __atomic_add_fetch(&vn->mmaps, delta, __ATOMIC_ACQ_REL);
	if ((delta > 0 && now == 1) || (delta < 0 && now == 0))
		share_ino_add(fs->m.pool.share, vn->ino, SHARE_MAPS, delta);
	pthread_mutex_unlock(&fs->vn_lock);
}

/* A forked child's first call: what it inherited is held by one process
 * more (its vnodes; mappings are MADV_DONTFORK, so it has none of those). */
void vn_count_inherited(ferrite_fs *fs)
{
	pthread_mutex_lock(&fs->vn_lock);
	for (uint64_t s = 0; s < fs->vn_cap; s++)
		for (struct vnode *v = fs->vn_hash[s]; v; v = v->next)
			share_ino_add(fs->m.pool.share, v->ino, SHARE_OPENS, 1);
	pthread_mutex_unlock(&fs->vn_lock);
}

static __thread int vn_failed; /* why the thread's last vn_get gave NULL */

int vn_get_error(void)
{
	return vn_failed;
}

/* Takes a reference on ino; the caller holds the inode's lock (F1). */
struct vnode *vn_get(ferrite_fs *fs, uint64_t ino, uint64_t gen)
{
	pthread_mutex_lock(&fs->vn_lock);
	struct vnode *v = vn_find(fs, ino);
	if (!v) {
		int held = share_ino_add(fs->m.pool.share, ino, SHARE_OPENS, 1);
		v = held < 0 ? NULL : calloc(1, sizeof(*v));
		vn_failed = held < 0 ? held : -ENOMEM;
		if (!v && held >= 0)
			share_ino_add(fs->m.pool.share, ino, SHARE_OPENS, -1);
		if (v) {
			v->ino = ino;
			v->gen = gen;
			uint64_t s = vn_slot(fs, ino);
			v->next = fs->vn_hash[s];
			fs->vn_hash[s] = v;
		}
	}
	if (v)
		v->opens++;
	pthread_mutex_unlock(&fs->vn_lock);
	return v;
}

/* Drops a reference; releases an unlinked inode at its last close (F2). */
void vn_put(ferrite_fs *fs, struct vnode *vn)
{
	uint64_t ino = vn->ino;
	pthread_rwlock_t *lk = ino_lock(fs, ino);
	pthread_rwlock_wrlock(lk);
	pthread_mutex_lock(&fs->vn_lock);
	int last = --vn->opens == 0;
	if (last) {
		/* released below only if no other process holds it (F3) */
		if (share_ino_add(fs->m.pool.share, ino, SHARE_OPENS, -1) > 0)
			last = 0;
		struct vnode **pp = &fs->vn_hash[vn_slot(fs, ino)];
		while (*pp != vn)
			pp = &(*pp)->next;
		*pp = vn->next;
		free(vn);
	}
	pthread_mutex_unlock(&fs->vn_lock);
	if (last && ino_valid(fs, ino) && ino_ptr(fs, ino)->i_nlink == 0)
		ino_release(fs, NULL, ino);
	pthread_rwlock_unlock(lk);
}

/* ---- descriptors ---------------------------------------------------------- */

static int fd_install(ferrite_fs *fs, struct ofile *of)
{
	return vfs_fd_install(&fs->fdt, &of->f);
}

struct ofile *fd_get(ferrite_fs *fs, int fd)
{
	struct vfs_file *f = fs ? vfs_fd_get(&fs->fdt, fd) : NULL;
	return f ? (struct ofile *)f : NULL; /* f is its first member */
}

/* The table advisory locks live in: the pool's, shared with the other
 * processes, or this mount's own. Under lk_mutex. */
static struct lk_table *lock_table(ferrite_fs *fs)
{
	if (fs->m.pool.share)
		return share_locks(fs->m.pool.share);
	if (!fs->lk_private)
		fs->lk_private = calloc(1, sizeof(*fs->lk_private));
	return fs->lk_private;
}

/* The owner of this process's record locks: its slot, or 0 alone. */
static int32_t lock_slot(ferrite_fs *fs)
{
	int32_t slot = share_slot(fs->m.pool.share);
	return slot < 0 ? 0 : slot;
}

static void of_release(ferrite_fs *fs, struct ofile *of)
{
	/* held by other processes too: the description lives on there
	 * (a holder found gone is reaped: its locks go, under lk_mutex) */
	pthread_mutex_lock(&fs->lk_mutex);
	int gone = !of->f.sd || share_desc_drop(fs->m.pool.share, of->f.sd);
	if (gone && of->f.lock_id) /* its OFD and flock locks go with it */
		vfs_lock_file_gone(lock_table(fs), &of->f);
	pthread_mutex_unlock(&fs->lk_mutex);
	vn_put(fs, of->vn);
	vfs_file_fini(&of->f);
	free(of);
}

void of_put(ferrite_fs *fs, struct ofile *of)
{
	if (!vfs_file_unref(&of->f))
		return;
	if (pmfs_in_shared()) {
		/* a shared call changes neither the pool nor the coordination
		 * file (share.c H9), and this may do both: later, under the turn */
		pthread_mutex_lock(&fs->lk_mutex);
		if (fs->late_pid != getpid()) /* a forked child's list is not its own */
			fs->late_puts = NULL;
		fs->late_pid = getpid();
		of->late_next = fs->late_puts;
		__atomic_store_n(&fs->late_puts, of, __ATOMIC_RELEASE);
		pthread_mutex_unlock(&fs->lk_mutex);
		return;
	}
	of_release(fs, of);
}

void of_put_late(ferrite_fs *fs)
{
	pthread_mutex_lock(&fs->lk_mutex);
	struct ofile *list = fs->late_pid == getpid() ? fs->late_puts : NULL;
	fs->late_puts = NULL;
	pthread_mutex_unlock(&fs->lk_mutex);
	while (list) {
		struct ofile *next = list->late_next;
		of_release(fs, list);
		list = next;
	}
}

static int fs_open_ino(ferrite_fs *fs, uint64_t ino, int flags)
{
	pthread_rwlock_t *lk = ino_lock(fs, ino);
	pthread_rwlock_rdlock(lk);
	struct fr_inode *ip = ino_ptr(fs, ino);
	struct vnode *vn = NULL;
	int live = ino_valid(fs, ino) && ip->i_nlink > 0;
	if (live)
		vn = vn_get(fs, ino, ip->i_generation);
	pthread_rwlock_unlock(lk);
	if (!vn) /* -ENFILE, -EUSERS: too many for the processes' table */
		return live ? vn_get_error() : -ENOENT;
	struct ofile *of = calloc(1, sizeof(*of));
	if (!of) {
		vn_put(fs, vn);
		return -ENOMEM;
	}
	of->vn = vn;
	vfs_file_init(&of->f, flags);
	int fd = fd_install(fs, of);
	if (fd < 0)
		of_put(fs, of);
	return fd;
}

int at_begin(ferrite_fs *fs, int dirfd, const char *path, int flags, uint64_t *at,
	     struct ofile **held)
{
	*held = NULL;
	*at = 0;
	int self = !path || !*path;
	if (self && !(flags & AT_EMPTY_PATH))
		return path ? -ENOENT : -EFAULT;
	if (!self && path[0] == '/')
		return 0; /* like Linux: dirfd is not even looked at */
	if (dirfd == FERRITE_AT_ROOT) {
		*at = fs->root_ino;
		return self;
	}
	struct ofile *of = fd_get(fs, dirfd);
	if (!of)
		return -EBADF;
	*held = of;
	*at = of->vn->ino;
	return self;
}

void at_end(ferrite_fs *fs, struct ofile *held)
{
	if (held)
		of_put(fs, held);
}

/* Checks flags against the inode an open resolved to, truncates if asked. */
static int open_checks(ferrite_fs *fs, uint64_t ino, int flags, int created)
{
	struct fr_inode *ip = ino_ptr(fs, ino);
	uint32_t m = ip->i_mode;
	int acc = flags & O_ACCMODE;
	if ((flags & O_DIRECTORY) && !S_ISDIR(m))
		return -ENOTDIR;
	if (flags & O_PATH)
		return 0; /* names the inode; nothing is opened for I/O */
	if (S_ISLNK(m))
		return fr_err(-ELOOP, "a symbolic link cannot be opened (O_NOFOLLOW)");
	if (S_ISDIR(m) && (acc != O_RDONLY || (flags & (O_TRUNC | O_CREAT))))
		return -EISDIR;
	if (!S_ISREG(m) && !S_ISDIR(m))
		return fr_err(-ENXIO, "special files stored in a pool cannot be opened");
	if (created)
		return 0;
	int mask = (acc != O_WRONLY ? 4 : 0) | (acc != O_RDONLY ? 2 : 0);
	if ((flags & O_TRUNC) && S_ISREG(m))
		mask |= 2;
	if (flags & FERRITE_O_EXEC) {
		/* The kernel's exec of a file through the mount: a file whose
		 * mode lets the caller execute but not read (0711) runs. */
		if (!S_ISREG(m) || acc != O_RDONLY || (flags & O_TRUNC))
			return -EACCES;
		mask = 1;
	}
	int rc = perm_check(cred_get(), NULL, ip, mask);
	if (!rc && (flags & O_TRUNC) && S_ISREG(m))
		rc = mm_truncate(fs, ino, 0);
	return rc;
}

/* O_PATH keeps only the flags Linux keeps for it. */
static int path_flags(int flags)
{
	return (flags & O_PATH) ? (flags & (O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) : flags;
}

int pmfs_openat(ferrite_fs *fs, int dirfd, const char *path, int flags, mode_t mode)
{
	API_BEGIN();
	if (!fs)
		API_RETURN(-EINVAL);
	flags = path_flags(flags);
	int acc = flags & O_ACCMODE;
	if (acc == O_ACCMODE)
		API_RETURN(-EINVAL);
	if ((flags & (O_CREAT | O_DIRECTORY)) == (O_CREAT | O_DIRECTORY))
		API_RETURN(fr_err(-EINVAL, "O_CREAT with O_DIRECTORY is not allowed"));
	uint64_t at, ino;
	struct ofile *held;
	int rc = at_begin(fs, dirfd, path, 0, &at, &held);
	if (rc < 0)
		API_RETURN(rc);
	int created = 0;
	if (flags & O_CREAT) {
		rc = fs_create(fs, at, path, flags, mode, &ino, &created);
	} else {
		struct nameidata nd;
		rc = path_walk(fs, at, path, (flags & O_NOFOLLOW) ? 0 : LOOKUP_FOLLOW, &nd);
		ino = nd.ino;
		if (!rc && nd.trailing_slash && !S_ISDIR(ino_ptr(fs, ino)->i_mode))
			rc = -ENOTDIR;
	}
	at_end(fs, held);
	if (!rc)
		rc = open_checks(fs, ino, flags, created);
	API_RETURN(rc ? rc : fs_open_ino(fs, ino, flags & ~FERRITE_O_EXEC));
}

int pmfs_reopen(ferrite_fs *fs, int fd, int flags)
{
	API_BEGIN();
	if ((flags & (O_CREAT | O_EXCL)) || (flags & O_ACCMODE) == O_ACCMODE)
		API_RETURN(-EINVAL);
	flags = path_flags(flags);
	struct ofile *of = fd_get(fs, fd);
	if (!of)
		API_RETURN(-EBADF);
	uint64_t ino = of->vn->ino;
	int rc = open_checks(fs, ino, flags, 0);
	if (!rc) {
		/* The vnode we hold keeps even an unlinked inode openable. */
		struct ofile *nof = calloc(1, sizeof(*nof));
		if (!nof) {
			rc = -ENOMEM;
		} else {
			pthread_rwlock_t *lk = ino_lock(fs, ino);
			pthread_rwlock_rdlock(lk);
			nof->vn = vn_get(fs, ino, of->vn->gen);
			pthread_rwlock_unlock(lk);
			vfs_file_init(&nof->f, flags & ~FERRITE_O_EXEC);
			if (!nof->vn) {
				vfs_file_fini(&nof->f);
				free(nof);
				rc = -ENOMEM;
			} else {
				rc = fd_install(fs, nof);
				if (rc < 0)
					of_put(fs, nof);
			}
		}
	}
	of_put(fs, of);
	API_RETURN(rc);
}

int pmfs_getfl(ferrite_fs *fs, int fd)
{
	API_BEGIN();
	struct ofile *of = fd_get(fs, fd);
	if (!of)
		API_RETURN(-EBADF);
	pthread_mutex_lock(&of->f.pos_lock);
	int fl = vfs_file_flags(&of->f) & ~O_CLOEXEC;
	pthread_mutex_unlock(&of->f.pos_lock);
	of_put(fs, of);
	API_RETURN(fl);
}

int pmfs_setfl(ferrite_fs *fs, int fd, int flags)
{
	API_BEGIN();
	struct ofile *of = fd_get(fs, fd);
	if (!of)
		API_RETURN(-EBADF);
	int rc = 0;
	if (of->f.flags & O_PATH) {
		rc = -EBADF;
	} else {
		/* Writers read the flag once per call; pos_lock orders it with
		 * position updates. */
		pthread_mutex_lock(&of->f.pos_lock);
		int fl =
		    (of->f.flags & ~(O_APPEND | O_NONBLOCK)) | (flags & (O_APPEND | O_NONBLOCK));
		vfs_file_set_flags(&of->f, fl);
		pthread_mutex_unlock(&of->f.pos_lock);
	}
	of_put(fs, of);
	API_RETURN(rc);
}

int pmfs_close(ferrite_fs *fs, int fd)
{
	API_BEGIN();
	if (!fs)
		API_RETURN(-EBADF);
	struct ofile *of = (struct ofile *)vfs_fd_take(&fs->fdt, fd);
	if (!of)
		API_RETURN(-EBADF);
	/* POSIX: closing any descriptor of a file drops the process's record
	 * locks on it */
	pthread_mutex_lock(&fs->lk_mutex);
	vfs_lock_closed(lock_table(fs), lock_slot(fs), of->vn->ino);
	pthread_mutex_unlock(&fs->lk_mutex);
	of_put(fs, of);
	API_RETURN(0);
}

/* fcntl record and OFD locks (fl) or flock (op), in the pool's table. */
static int lock_call(ferrite_fs *fs, int fd, int cmd, struct flock *fl, int op,
		     struct vfs_lockwait *w)
{
	struct ofile *of = fd_get(fs, fd);
	if (!of)
		return -EBADF;
	struct pool_share *sh = fs->m.pool.share;
	uint64_t ino = of->vn->ino;
	struct vfs_lockctx c = {
	    .slot = sh ? share_slot(sh) : 0,
	    .ino = ino,
	    .f = &of->f,
	    .size = (int64_t)__atomic_load_n(&ino_ptr(fs, ino)->i_size, __ATOMIC_RELAXED),
	};
	int rc = -ENOLCK, reaped = 0; /* no slot: more processes than the pool takes */
	pthread_mutex_lock(&fs->lk_mutex);
	c.tab = lock_table(fs);
	for (int tries = 0; c.tab && c.slot >= 0; tries++) {
		rc = fl ? vfs_lock_fcntl(&c, cmd, fl, w) : vfs_lock_flock(&c, op, w);
		/* a holder that is gone gives its locks back now */
		if (rc != -EAGAIN || tries || !share_reap_slot(sh, w->holder_slot))
			break;
		reaped = 1;
	}
	pthread_mutex_unlock(&fs->lk_mutex);
	if (reaped)
		orphan_release_unheld(fs);
	of_put(fs, of);
	return rc;
}

int pmfs_lock(ferrite_fs *fs, int fd, int cmd, struct flock *fl, struct vfs_lockwait *w)
{
	API_BEGIN();
	API_RETURN(fs ? lock_call(fs, fd, cmd, fl, 0, w) : -EBADF);
}

int pmfs_flock(ferrite_fs *fs, int fd, int op, struct vfs_lockwait *w)
{
	API_BEGIN();
	API_RETURN(fs ? lock_call(fs, fd, 0, NULL, op, w) : -EBADF);
}

int pmfs_dup(ferrite_fs *fs, int fd)
{
	API_BEGIN();
	struct ofile *of = fd_get(fs, fd);
	if (!of)
		API_RETURN(-EBADF);
	int nfd = fd_install(fs, of); /* the reference taken by fd_get moves to nfd */
	if (nfd < 0)
		of_put(fs, of);
	API_RETURN(nfd);
}

void fd_close_all(ferrite_fs *fs)
{
	for (int i = vfs_fd_limit(&fs->fdt) - 1; i >= 0; i--) {
		struct ofile *of = (struct ofile *)vfs_fd_take(&fs->fdt, i);
		if (of)
			of_put(fs, of);
	}
}

/* Reads into an iovec at off (< 0: at the file offset, which advances). */
static ssize_t do_read(ferrite_fs *fs, int fd, const struct iovec *iov, int iovcnt, int64_t off)
{
	size_t total;
	struct ofile *of = fd_get(fs, fd);
	if (!of)
		return -EBADF;
	int rc = vfs_check_iov(iov, iovcnt, &total);
	if (rc) {
		of_put(fs, of);
		return rc;
	}
	ssize_t done = 0;
	if (pmfs_in_shared() && ((off < 0 && of->f.sd) || dp_atime_due(ino_ptr(fs, of->vn->ino)))) {
		/* the offset is shared with other processes, or the read
		 * stores the access time */
		done = FS_NEED_TURN;
	} else if ((of->f.flags & O_ACCMODE) == O_WRONLY || (of->f.flags & O_PATH)) {
		done = -EBADF;
	} else if (S_ISDIR(ino_ptr(fs, of->vn->ino)->i_mode)) {
		done = -EISDIR;
	} else {
		int use_pos = off < 0;
		if (use_pos) {
			pthread_mutex_lock(&of->f.pos_lock);
			off = vfs_file_pos(&of->f);
		}
		for (int i = 0; i < iovcnt; i++) {
			if (!iov[i].iov_len)
				continue;
			ssize_t n = dp_read(fs, of->vn->ino, iov[i].iov_base, iov[i].iov_len,
					    (uint64_t)off + (uint64_t)done);
			if (n < 0) {
				if (!done)
					done = n;
				break;
			}
			done += n;
			if ((size_t)n < iov[i].iov_len)
				break;
		}
		if (use_pos) {
			if (done > 0)
				vfs_file_set_pos(&of->f, off + done);
			pthread_mutex_unlock(&of->f.pos_lock);
		}
	}
	of_put(fs, of);
	return done;
}

static ssize_t do_write(ferrite_fs *fs, int fd, const struct iovec *iov, int iovcnt, int64_t off)
{
	size_t total;
	struct ofile *of = fd_get(fs, fd);
	if (!of)
		return -EBADF;
	int rc = vfs_check_iov(iov, iovcnt, &total);
	if (rc) {
		of_put(fs, of);
		return rc;
	}
	ssize_t n;
	if ((of->f.flags & O_ACCMODE) == O_RDONLY) {
		n = -EBADF;
	} else {
		int use_pos = off < 0;
		if (use_pos)
			pthread_mutex_lock(&of->f.pos_lock);
		int append = vfs_file_flags(&of->f) & O_APPEND;
		int64_t at = append ? -1 : (use_pos ? vfs_file_pos(&of->f) : off);
		int64_t end = 0;
		n = dp_write(fs, of->vn->ino, iov, iovcnt, at, &end);
		if (use_pos) {
			if (n > 0)
				vfs_file_set_pos(&of->f, end);
			pthread_mutex_unlock(&of->f.pos_lock);
		}
	}
	of_put(fs, of);
	return n;
}

ssize_t pmfs_rw(ferrite_fs *fs, int fd, const struct iovec *iov, int iovcnt, int64_t off, int write)
{
	if (write && pmfs_in_shared())
		return FS_NEED_TURN; /* before anything: it has changed nothing */
	API_BEGIN();
	if (off < -1)
		return finish_ss(-EINVAL);
	return finish_ss(write ? do_write(fs, fd, iov, iovcnt, off)
			       : do_read(fs, fd, iov, iovcnt, off));
}

/* SEEK_DATA (hole 0) and SEEK_HOLE (hole 1) from off: small files have no
 * holes (data.c D2); large ones are read from the PPT, to the page where a
 * window is backed page by page. */
static int64_t seek_data(ferrite_fs *fs, uint64_t ino, int64_t off, int hole)
{
	struct fr_inode *ip = ino_ptr(fs, ino);
	pthread_rwlock_t *lk = ino_lock(fs, ino);
	pthread_rwlock_rdlock(lk);
	uint64_t size = ip->i_size;
	int64_t rc;
	if (off < 0 || (uint64_t)off >= size) {
		rc = -ENXIO;
		goto out;
	}
	if (ip->i_level != I_NO_PART && ip->i_level < SP_L3) {
		rc = hole ? (int64_t)size : off;
		goto out;
	}
	uint64_t pos = (uint64_t)off;
	while (pos < size) {
		uint64_t went = ppt_window(&fs->m.sp, ip->i_part + pos);
		uint64_t next = FR_ALIGN_DOWN(pos, FR_UNIT_SIZE) + FR_UNIT_SIZE;
		int backed = went != PPT_NONE;
		if ((went & PPT_TYPE_MASK) == PPT_TABLE) {
			/* backed page by page: data and holes to the page */
			backed = ppt_page(&fs->m.sp, ip->i_part + pos) != 0;
			next = FR_ALIGN_DOWN(pos, FR_PAGE_SIZE) + FR_PAGE_SIZE;
		}
		if (backed != hole) {
			rc = (int64_t)pos;
			goto out;
		}
		pos = next;
	}
	rc = hole ? (int64_t)size : -ENXIO;
out:
	pthread_rwlock_unlock(lk);
	return rc;
}

off_t pmfs_lseek(ferrite_fs *fs, int fd, off_t offset, int whence)
{
	API_BEGIN();
	struct ofile *of = fd_get(fs, fd);
	if (!of)
		return finish_ss(-EBADF);
	uint64_t ino = of->vn->ino;
	if (of->f.flags & O_PATH) {
		of_put(fs, of);
		return finish_ss(-EBADF);
	}
	if (of->f.sd && pmfs_in_shared()) {
		of_put(fs, of); /* the offset is shared with other processes */
		return FS_NEED_TURN;
	}
	pthread_mutex_lock(&of->f.pos_lock);
	int64_t base, res;
	switch (whence) {
	case SEEK_SET:
		base = 0;
		break;
	case SEEK_CUR:
		base = vfs_file_pos(&of->f);
		break;
	case SEEK_END:
		base = (int64_t)ino_ptr(fs, ino)->i_size;
		break;
	case SEEK_DATA:
	case SEEK_HOLE:
		base = -1;
		break;
	default:
		pthread_mutex_unlock(&of->f.pos_lock);
		of_put(fs, of);
		return finish_ss(-EINVAL);
	}
	if (base < 0) {
		res = S_ISREG(ino_ptr(fs, ino)->i_mode)
			  ? seek_data(fs, ino, offset, whence == SEEK_HOLE)
			  : -EINVAL;
	} else if ((offset > 0 && base > INT64_MAX - offset) || base + offset < 0) {
		res = -EINVAL;
	} else {
		res = base + offset;
	}
	if (res >= 0)
		vfs_file_set_pos(&of->f, res);
	pthread_mutex_unlock(&of->f.pos_lock);
	of_put(fs, of);
	return finish_ss(res);
}

int pmfs_ftruncate(ferrite_fs *fs, int fd, off_t length)
{
	API_BEGIN();
	struct ofile *of = fd_get(fs, fd);
	if (!of)
		API_RETURN(-EBADF);
	int rc;
	if (of->f.flags & O_PATH)
		rc = -EBADF;
	else if (length < 0 || (of->f.flags & O_ACCMODE) == O_RDONLY ||
		 !S_ISREG(ino_ptr(fs, of->vn->ino)->i_mode))
		rc = -EINVAL;
	else
		rc = mm_truncate(fs, of->vn->ino, (uint64_t)length);
	of_put(fs, of);
	API_RETURN(rc);
}

int pmfs_truncate(ferrite_fs *fs, const char *path, off_t length)
{
	API_BEGIN();
	if (!fs || length < 0)
		API_RETURN(-EINVAL); /* Linux checks the length before the path */
	struct nameidata nd;
	int rc = path_walk(fs, 0, path, LOOKUP_FOLLOW, &nd);
	if (rc)
		API_RETURN(rc);
	struct fr_inode *ip = ino_ptr(fs, nd.ino);
	if (S_ISDIR(ip->i_mode))
		API_RETURN(-EISDIR);
	if (!S_ISREG(ip->i_mode))
		API_RETURN(-EINVAL);
	rc = perm_check(cred_get(), NULL, ip, 2);
	if (rc)
		API_RETURN(rc);
	API_RETURN(mm_truncate(fs, nd.ino, (uint64_t)length));
}

int pmfs_fallocate(ferrite_fs *fs, int fd, int mode, off_t offset, off_t len)
{
	API_BEGIN();
	struct ofile *of = fd_get(fs, fd);
	if (!of)
		API_RETURN(-EBADF);
	int rc = 0;
	uint32_t m = ino_ptr(fs, of->vn->ino)->i_mode;
	if (mode & ~(FALLOC_FL_KEEP_SIZE | FALLOC_FL_PUNCH_HOLE) ||
	    ((mode & FALLOC_FL_PUNCH_HOLE) && !(mode & FALLOC_FL_KEEP_SIZE)))
		rc = -EOPNOTSUPP;
	else if (offset < 0 || len <= 0)
		rc = -EINVAL;
	else if ((of->f.flags & O_ACCMODE) == O_RDONLY)
		rc = -EBADF;
	else if (S_ISDIR(m))
		rc = -EISDIR;
	else if (!S_ISREG(m))
		rc = -ENODEV;
	else if (offset > INT64_MAX - len)
		rc = -EFBIG;
	else
		rc = (mode & FALLOC_FL_PUNCH_HOLE)
			 ? mm_punch(fs, of->vn->ino, mode, (uint64_t)offset, (uint64_t)len)
			 : dp_fallocate(fs, of->vn->ino, mode, (uint64_t)offset, (uint64_t)len, 0);
	of_put(fs, of);
	API_RETURN(rc);
}

/* Every call is durable when it returns: there is nothing left to sync. */
int pmfs_fsync(ferrite_fs *fs, int fd)
{
	API_BEGIN();
	struct ofile *of = fd_get(fs, fd);
	if (!of)
		API_RETURN(-EBADF);
	int rc = (of->f.flags & O_PATH) ? -EBADF : 0;
	of_put(fs, of);
	API_RETURN(rc);
}

int pmfs_fstat(ferrite_fs *fs, int fd, struct stat *st)
{
	API_BEGIN();
	if (!st)
		API_RETURN(-EFAULT);
	struct ofile *of = fd_get(fs, fd);
	if (!of)
		API_RETURN(-EBADF);
	int rc = fs_stat_ino(fs, of->vn->ino, st);
	of_put(fs, of);
	API_RETURN(rc);
}

int pmfs_fchmod(ferrite_fs *fs, int fd, mode_t mode)
{
	API_BEGIN();
	struct ofile *of = fd_get(fs, fd);
	if (!of)
		API_RETURN(-EBADF);
	int rc = fs_chmod_ino(fs, of->vn->ino, mode);
	of_put(fs, of);
	API_RETURN(rc);
}

int pmfs_fchown(ferrite_fs *fs, int fd, uid_t uid, gid_t gid)
{
	API_BEGIN();
	struct ofile *of = fd_get(fs, fd);
	if (!of)
		API_RETURN(-EBADF);
	int rc = fs_chown_ino(fs, of->vn->ino, uid, gid);
	of_put(fs, of);
	API_RETURN(rc);
}

int pmfs_futimens(ferrite_fs *fs, int fd, const struct timespec times[2])
{
	API_BEGIN();
	struct ofile *of = fd_get(fs, fd);
	if (!of)
		API_RETURN(-EBADF);
	int rc = fs_utimens_ino(fs, of->vn->ino, times);
	of_put(fs, of);
	API_RETURN(rc);
}

/* Copies through a bounce buffer: both ends are files of this pool, so the
 * data never leaves the library, and each chunk is written (durably) by the
 * ordinary data path, which keeps its atomicity and crash rules. */
static ssize_t copy_pread(void *ctx, struct vfs_file *f, void *buf, size_t n, int64_t off)
{
	return dp_read(ctx, ((struct ofile *)f)->vn->ino, buf, n, (uint64_t)off);
}

static ssize_t copy_pwrite(void *ctx, struct vfs_file *f, const void *buf, size_t n, int64_t off)
{
	struct iovec v = {(void *)buf, n};
	int64_t end;
	return dp_write(ctx, ((struct ofile *)f)->vn->ino, &v, 1, off, &end);
}

ssize_t pmfs_copy_file_range(ferrite_fs *fs, int fd_in, off_t *off_in, int fd_out, off_t *off_out,
			     size_t len, unsigned flags)
{
	API_BEGIN();
	if (flags)
		return finish_ss(-EINVAL);
	struct ofile *in = fd_get(fs, fd_in);
	if (!in)
		return finish_ss(-EBADF);
	struct ofile *out = fd_get(fs, fd_out);
	if (!out) {
		of_put(fs, in);
		return finish_ss(-EBADF);
	}
	uint64_t iino = in->vn->ino, oino = out->vn->ino;
	const struct vfs_copy_io io = {fs, copy_pread, copy_pwrite};
	ssize_t rc = vfs_copy_file_range(&io, &in->f, ino_ptr(fs, iino)->i_mode & S_IFMT, &out->f,
					 ino_ptr(fs, oino)->i_mode & S_IFMT, iino == oino, off_in,
					 off_out, len, flags);
	of_put(fs, in);
	of_put(fs, out);
	return finish_ss(rc);
}
