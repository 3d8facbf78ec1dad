/*
 * io.c -- the tier engine's C API: the data calls: read and write through the cache, truncate,
 * allocate, sync. Invariants, crash argument and credentials: ns.h.
 */
#include "tier/ns.h"

/* ---- data ------------------------------------------------------------------------------ */

/* A file the record table had no room for: the backing file directly,
 * durable on return like everything else. */
static ssize_t uncached_io(struct tier *t, struct tier_ofile *of, const struct iovec *iov,
			   int iovcnt, int64_t off, int write)
{
	ssize_t r;
	if (write) {
		int held = tier_writeback_held(t, "a write to a file without a record");
		if (held)
			return held;
		if (of->f.flags & O_APPEND) {
			struct stat st;
			if (fstat(of->kfd, &st) != 0)
				return -errno;
			off = st.st_size;
		}
		r = tsys_pwritev(of->kfd, iov, iovcnt, off);
		if (r > 0 && tsys_fdatasync(of->kfd) != 0)
			return -errno;
	} else {
		r = tsys_preadv(of->kfd, iov, iovcnt, off);
	}
	return r < 0 ? -errno : r;
}

/* An unprivileged write, truncate or allocation takes away set-user-id, and
 * set-group-id where the group may execute or the writer is not of the
 * file's group, as Linux does. A write through the cache reaches the kernel
 * only later, as the flusher's, and a truncate or allocation the cache
 * settles may not reach it at all, so the kernel cannot; the uncached and
 * mapped paths reach it with the caller's ids, and it does. So it is done
 * here, durably (the backing file system's chmod) and before the call
 * changes anything, with the process's own ids; a writer who does not own
 * the file may not chmod it, and has the kernel drop the bits instead. The
 * mode is looked at again only after a chmod or chown through this mount. */
void tier_drop_setid(struct tier *t, struct tier_ofile *of)
{
	struct tier_file *tf = of->tf;
	uint64_t seen = __atomic_load_n(&t->attr_gen, __ATOMIC_ACQUIRE) + 1;
	struct stat st;
	if (cred_get()->uid == 0 || __atomic_load_n(&tf->setid_seen, __ATOMIC_ACQUIRE) == seen ||
	    fstat(of->kfd, &st) != 0)
		return;
	mode_t kill = st.st_mode & S_ISUID;
	if ((st.st_mode & S_ISGID) &&
	    ((st.st_mode & S_IXGRP) || !cred_in_group(cred_get(), st.st_gid)))
		kill |= S_ISGID; /* as data.c tier_drop_setid */
	if (kill && S_ISREG(st.st_mode)) {
		int applied = tier_creds_applied;
		tier_creds_done();
		int rc = tsys_fchmod(of->kfd, st.st_mode & 07777 & ~kill);
		if (rc != 0 && errno == EPERM) {
			/* Not the owner: a truncate to the size the backing file
			 * has makes the kernel drop the bits by the same rule,
			 * with the ids this process writes with. The file's lock
			 * keeps writers through a mapping, and the flush lock the
			 * flusher, from changing that size meanwhile (truncate's
			 * order: the rwlock, then the flush lock). */
			pthread_rwlock_wrlock(&tf->lock);
			pthread_mutex_lock(&tf->flush_lock);
			rc = fstat(of->kfd, &st) != 0 ? -1 : tsys_ftruncate(of->kfd, st.st_size);
			pthread_mutex_unlock(&tf->flush_lock);
			pthread_rwlock_unlock(&tf->lock);
		}
		if (applied)
			tier_creds_apply();
		if (rc != 0)
			return; /* looked at again by the next write */
		tier_note_ctime(t, of->kfd);
		t->ns_dirty = 1;
	}
	__atomic_store_n(&tf->setid_seen, seen, __ATOMIC_RELEASE);
}

/* A file someone has mapped: its backing file directly (see tier_mmap); the
 * record follows the size. */
static ssize_t mapped_io(struct tier *t, struct tier_ofile *of, const struct iovec *iov, int iovcnt,
			 int64_t off, int write)
{
	struct tier_file *tf = of->tf;
	if (write)
		pthread_rwlock_wrlock(&tf->lock);
	else
		pthread_rwlock_rdlock(&tf->lock);
	ssize_t r = uncached_io(t, of, iov, iovcnt, off, write);
	struct stat st;
	if (write && r > 0 && fstat(of->kfd, &st) == 0) {
		tier_rec_publish(t, tf, (uint64_t)st.st_size, tier_now_ns());
		pm_fence();
		tf->size = st.st_size;
	}
	pthread_rwlock_unlock(&tf->lock);
	return r;
}

/* Reads or writes len bytes of iov at *at through the cache (O_APPEND: *at
 * becomes the size first). A write longer than one atomic piece (a quarter
 * of the cache) returns a short count in per-write consistency, as POSIX
 * allows, so that every call stays atomic; in epoch mode, where atomicity
 * is the epoch's, it goes on in pieces. */
static ssize_t cached_io(struct tier *t, struct tier_ofile *of, const struct iovec *iov, int iovcnt,
			 size_t len, uint64_t *at, int write)
{
	struct tier_file *tf = of->tf;
	int epoch = t->consistency == TIER_EPOCH;
	size_t done = 0;
	int full_again = 0;
	ssize_t r = 0;
	if (write)
		tier_drop_setid(t, of);
	while (done < len) {
		if (write)
			tier_throttle(t);
		if (epoch)
			pthread_rwlock_rdlock(&t->epoch_lock);
		ssize_t k;
		int epoch_full = 0;
		if (write) {
			pthread_rwlock_wrlock(&tf->lock);
			if ((of->f.flags & O_APPEND) && !done)
				*at = epoch ? (uint64_t)tf->size : t->recs[tf->fid].r_size;
			if (*at + done >= TIER_MAX_FILE)
				k = fr_err(-EFBIG, "write beyond the largest file size");
			else if (*at + len > TIER_MAX_FILE && !(len = TIER_MAX_FILE - *at))
				k = 0; /* POSIX: a short write up to the limit */
			else
				k = tier_cache_write(t, tf, of->kfd, iov, iovcnt, *at, *at + done,
						     len - done, &epoch_full);
		} else {
			pthread_rwlock_rdlock(&tf->lock);
			k = tier_cache_read(t, tf, of->kfd, iov, iovcnt, *at, len);
			done = len; /* reads are never cut */
		}
		pthread_rwlock_unlock(&tf->lock);
		if (epoch)
			pthread_rwlock_unlock(&t->epoch_lock);
		if (epoch_full) {
			/* A commit empties the epoch; other writers may fill it
			 * again before this one goes on, but not for ever. */
			k = ++full_again > 1000 ? fr_err(-EIO, "the epoch journal cannot "
							       "take this write")
						: tier_epoch_commit(t);
			if (!k)
				continue;
		}
		full_again = 0;
		if (k < 0) {
			r = done ? (ssize_t)done : k;
			break;
		}
		if (!write) {
			r = k;
			break;
		}
		done += (size_t)k;
		r = (ssize_t)done;
		if (!epoch)
			break;
	}
	return r;
}

/* read/write on an open file description (off < 0: at its position, which
 * advances); the descriptor's checks done, iov's total is len. */
static ssize_t of_rw(struct tier *t, struct tier_ofile *of, const struct iovec *iov, int iovcnt,
		     size_t len, int64_t off, int write)
{
	int acc = of->f.flags & O_ACCMODE;
	ssize_t r;
	if ((of->f.flags & O_PATH) || (write ? acc == O_RDONLY : acc == O_WRONLY))
		return -EBADF;
	if (S_ISDIR(of->type))
		return -EISDIR;
	int use_pos = off < 0;
	if (use_pos)
		pthread_mutex_lock(&of->f.pos_lock);
	uint64_t at = use_pos ? (uint64_t)of->f.pos : (uint64_t)off;
	if (!of->tf) {
		r = S_ISREG(of->type) || !S_ISCHR(of->type)
			? uncached_io(t, of, iov, iovcnt, (int64_t)at, write)
			: -EINVAL;
	} else if (__atomic_load_n(&of->tf->mapped, __ATOMIC_ACQUIRE)) {
		r = mapped_io(t, of, iov, iovcnt, (int64_t)at, write);
	} else if (len == 0) {
		r = 0;
	} else {
		r = cached_io(t, of, iov, iovcnt, len, &at, write);
	}
	if (use_pos) {
		if (r > 0)
			of->f.pos = (int64_t)(at + (uint64_t)r);
		pthread_mutex_unlock(&of->f.pos_lock);
	}
	return r;
}

/* copy_file_range's positioned I/O (vfs.h), the caller inside a call. */
ssize_t tier_copy_pread(void *ctx, struct vfs_file *f, void *buf, size_t n, int64_t off)
{
	struct iovec v = {buf, n};
	return of_rw(ctx, (struct tier_ofile *)f, &v, 1, n, off, 0);
}

ssize_t tier_copy_pwrite(void *ctx, struct vfs_file *f, const void *buf, size_t n, int64_t off)
{
	struct iovec v = {(void *)buf, n};
	return of_rw(ctx, (struct tier_ofile *)f, &v, 1, n, off, 1);
}

ssize_t tier_rw(ferrite_fs *fs, int fd, const struct iovec *iov, int iovcnt, int64_t off, int write)
{
	BEGIN(fs);
	size_t len;
	int rc = vfs_check_iov(iov, iovcnt, &len);
	if (rc)
		return TIER_END_SS(rc);
	if (off < -1)
		return TIER_END_SS(-EINVAL);
	struct tier_ofile *of = tfd_get(t, fd);
	if (!of)
		return TIER_END_SS(-EBADF);
	ssize_t r = of_rw(t, of, iov, iovcnt, len, off, write);
	tfd_put(t, of);
	return TIER_END_SS(r);
}

off_t tier_lseek(ferrite_fs *fs, int fd, off_t offset, int whence)
{
	BEGIN(fs);
	struct tier_ofile *of = tfd_get(t, fd);
	if (!of)
		return TIER_END_SS(-EBADF);
	off_t r;
	if (of->f.flags & O_PATH) {
		r = -EBADF;
	} else if (S_ISDIR(of->type)) {
		r = whence == SEEK_SET && offset == 0 ? 0 : -EINVAL;
	} else {
		pthread_mutex_lock(&of->f.pos_lock);
		struct stat st;
		int64_t size = 0;
		if (fstat(of->kfd, &st) == 0) {
			tier_overlay_stat(t, &st);
			size = st.st_size;
		}
		int64_t base = whence == SEEK_SET   ? 0
			       : whence == SEEK_CUR ? of->f.pos
			       : whence == SEEK_END ? size
						    : offset;
		if (whence == SEEK_DATA || whence == SEEK_HOLE) {
			/* Every byte below the size counts as data. */
			r = offset < 0 || offset >= size ? -ENXIO
			    : whence == SEEK_DATA	 ? offset
							 : size;
		} else if (whence != SEEK_SET && whence != SEEK_CUR && whence != SEEK_END) {
			r = -EINVAL;
		} else if ((offset > 0 && base > INT64_MAX - offset) || base + offset < 0) {
			r = -EINVAL;
		} else {
			r = base + offset;
		}
		if (r >= 0)
			of->f.pos = r;
		pthread_mutex_unlock(&of->f.pos_lock);
	}
	tfd_put(t, of);
	return TIER_END_SS(r);
}

static int truncate_of(struct tier *t, struct tier_ofile *of, uint64_t len, int punch_off_len,
		       uint64_t poff, uint64_t plen)
{
	struct tier_file *tf = of->tf;
	if (tf)
		tier_drop_setid(t, of); /* the cache may not reach the kernel's truncate */
	if (tf && __atomic_load_n(&tf->mapped, __ATOMIC_ACQUIRE)) {
		/* Mapped: the backing file directly (tier_mmap). */
		pthread_rwlock_wrlock(&tf->lock);
		int rc = punch_off_len
			     ? tsys_fallocate(of->kfd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
					      (off_t)poff, (off_t)plen)
			     : tsys_ftruncate(of->kfd, (off_t)len);
		rc = rc ? -errno : tsys_fdatasync(of->kfd) ? -errno : 0;
		struct stat st;
		if (!rc && fstat(of->kfd, &st) == 0) {
			tier_rec_publish(t, tf, (uint64_t)st.st_size, tier_now_ns());
			pm_fence();
			tf->size = st.st_size;
		}
		pthread_rwlock_unlock(&tf->lock);
		return rc;
	}
	if (!tf) {
		if (punch_off_len)
			return tsys_fallocate(of->kfd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
					      (off_t)poff, (off_t)plen)
				   ? -errno
				   : 0;
		return tsys_ftruncate(of->kfd, (off_t)len) ? -errno : 0;
	}
	int epoch = t->consistency == TIER_EPOCH, rc = 0;
	if (epoch) {
		/* The open epoch first, then this change on its own: a crash
		 * shows it only with everything written before it. */
		pthread_rwlock_wrlock(&t->epoch_lock);
		rc = tier_epoch_commit_locked(t);
	}
	pthread_rwlock_wrlock(&tf->lock);
	if (!rc)
		rc = punch_off_len ? tier_cache_punch(t, tf, of->kfd, poff, plen)
				   : tier_cache_truncate(t, tf, of->kfd, len);
	pthread_rwlock_unlock(&tf->lock);
	if (epoch) {
		if (!rc)
			rc = tier_epoch_commit_locked(t);
		pthread_rwlock_unlock(&t->epoch_lock);
	}
	return rc;
}

int tier_ftruncate(ferrite_fs *fs, int fd, off_t length)
{
	BEGIN(fs);
	if (length < 0)
		return TIER_END(-EINVAL);
	struct tier_ofile *of = tfd_get(t, fd);
	if (!of)
		return TIER_END(-EBADF);
	int rc;
	if (of->f.flags & O_PATH)
		rc = -EBADF;
	else if ((of->f.flags & O_ACCMODE) == O_RDONLY)
		rc = -EINVAL; /* as Linux */
	else if (!S_ISREG(of->type))
		rc = -EINVAL;
	else if ((uint64_t)length > TIER_MAX_FILE)
		rc = fr_err(-EFBIG, "beyond the largest file size");
	else
		rc = truncate_of(t, of, (uint64_t)length, 0, 0, 0);
	tfd_put(t, of);
	return TIER_END(rc);
}

int tier_truncate(ferrite_fs *fs, const char *path, off_t length)
{
	int fd = tier_openat(fs, FERRITE_AT_ROOT, path, O_WRONLY, 0);
	if (fd < 0)
		return fd;
	int rc = tier_ftruncate(fs, fd, length);
	tfd_close(TIER(fs), fd);
	return rc;
}

int tier_fallocate(ferrite_fs *fs, int fd, int mode, off_t offset, off_t len)
{
	BEGIN(fs);
	struct tier_ofile *of = tfd_get(t, fd);
	if (!of)
		return TIER_END(-EBADF);
	int rc = 0;
	if (mode & ~(FALLOC_FL_KEEP_SIZE | FALLOC_FL_PUNCH_HOLE) ||
	    ((mode & FALLOC_FL_PUNCH_HOLE) && !(mode & FALLOC_FL_KEEP_SIZE)))
		rc = -EOPNOTSUPP;
	else if (offset < 0 || len <= 0)
		rc = -EINVAL;
	else if (offset > INT64_MAX - len || (uint64_t)(offset + len) > TIER_MAX_FILE)
		rc = fr_err(-EFBIG, "beyond the largest file size");
	else if ((of->f.flags & O_PATH) || (of->f.flags & O_ACCMODE) == O_RDONLY)
		rc = -EBADF;
	else if (S_ISDIR(of->type))
		rc = -EISDIR;
	else if (!S_ISREG(of->type))
		rc = fr_err(-ENODEV, "fallocate works on regular files only");
	else if (mode & FALLOC_FL_PUNCH_HOLE)
		rc = truncate_of(t, of, 0, 1, (uint64_t)offset, (uint64_t)len);
	else {
		if (of->tf)
			tier_drop_setid(t, of); /* the kernel's fallocate may not be reached */
		/* Reserve the space in the backing file system (advisory: not
		 * every file system can), then grow the file through the cache. */
		if (tsys_fallocate(of->kfd, FALLOC_FL_KEEP_SIZE, offset, len) != 0 &&
		    errno == ENOSPC)
			rc = fr_err(-ENOSPC, "no space left in %s", t->backing);
		if (!rc && !(mode & FALLOC_FL_KEEP_SIZE)) {
			struct stat st;
			if (fstat(of->kfd, &st) == 0) {
				tier_overlay_stat(t, &st);
				if (st.st_size < offset + len)
					rc = truncate_of(t, of, (uint64_t)(offset + len), 0, 0, 0);
			}
		}
	}
	tfd_put(t, of);
	return TIER_END(rc);
}

int tier_fsync(ferrite_fs *fs, int fd)
{
	BEGIN(fs);
	struct tier_ofile *of = tfd_get(t, fd);
	if (!of)
		return TIER_END(-EBADF);
	int rc = 0;
	if (of->f.flags & O_PATH)
		rc = -EBADF;
	else if (S_ISDIR(of->type))
		rc = tsys_fsync(of->kfd) ? -errno : 0; /* its names: the backing file system's */
	else if (t->consistency == TIER_EPOCH)
		rc = tier_epoch_commit(t);
	/* per-write mode: everything is durable already */
	tfd_put(t, of);
	return TIER_END(rc);
}
