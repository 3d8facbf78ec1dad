/*
 * calls.c -- what both engines carry out alike, written once: the checks of
 * an iovec, and copy_file_range over an engine's positioned reads and
 * writes. Nothing persistent: each engine's writes carry their own crash
 * argument.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/uio.h>

#include "util/util.h"
#include "vfs/vfs.h"

int vfs_check_iov(const struct iovec *iov, int iovcnt, size_t *total)
{
	if (iovcnt < 0 || iovcnt > IOV_MAX)
		return -EINVAL;
	if (iovcnt && !iov)
		return -EFAULT;
	size_t t = 0;
	for (int i = 0; i < iovcnt; i++) {
		if (iov[i].iov_len > (size_t)SSIZE_MAX - t)
			return -EINVAL;
		if (iov[i].iov_len && !iov[i].iov_base)
			return -EFAULT;
		t += iov[i].iov_len;
	}
	*total = t;
	return 0;
}

static int copy_check(struct vfs_file *in, mode_t in_type, struct vfs_file *out, mode_t out_type,
		      off_t *off_in, off_t *off_out, unsigned flags)
{
	if (flags)
		return -EINVAL;
	if ((in->flags & O_ACCMODE) == O_WRONLY || (in->flags & O_PATH) ||
	    (out->flags & O_ACCMODE) == O_RDONLY || (out->flags & O_PATH) ||
	    (out->flags & O_APPEND))
		return -EBADF;
	if (S_ISDIR(in_type) || S_ISDIR(out_type))
		return -EISDIR;
	if (!S_ISREG(in_type) || !S_ISREG(out_type))
		return -EINVAL;
	if ((off_in && *off_in < 0) || (off_out && *off_out < 0))
		return -EINVAL;
	return 0;
}

/* The copy itself, positions fixed: bytes copied, or -errno if none. */
static ssize_t copy_loop(const struct vfs_copy_io *io, struct vfs_file *in, int64_t ipos,
			 struct vfs_file *out, int64_t opos, size_t len)
{
	size_t chunk = FR_MIN(len, (size_t)1 << 20);
	char *buf = chunk ? malloc(chunk) : NULL;
	if (chunk && !buf)
		return -ENOMEM;
	ssize_t done = 0, rc = 0;
	while ((size_t)done < len) {
		ssize_t n =
		    io->pread(io->ctx, in, buf, FR_MIN(chunk, len - (size_t)done), ipos + done);
		if (n <= 0) {
			if (n < 0 && !done)
				rc = n;
			break;
		}
		ssize_t w = io->pwrite(io->ctx, out, buf, (size_t)n, opos + done);
		if (w < 0) {
			if (!done)
				rc = w;
			break;
		}
		done += w;
		if (w < n)
			break;
	}
	free(buf);
	return rc ? rc : done;
}

ssize_t vfs_copy_file_range(const struct vfs_copy_io *io, struct vfs_file *in, mode_t in_type,
			    struct vfs_file *out, mode_t out_type, int same_file, off_t *off_in,
			    off_t *off_out, size_t len, unsigned flags)
{
	int rc = copy_check(in, in_type, out, out_type, off_in, off_out, flags);
	if (rc)
		return rc;
	int lock_in = !off_in, lock_out = !off_out && !(lock_in && out == in);
	if (lock_in)
		pthread_mutex_lock(&in->pos_lock);
	if (lock_out)
		pthread_mutex_lock(&out->pos_lock);
	int64_t ipos = off_in ? *off_in : vfs_file_pos(in),
		opos = off_out ? *off_out : vfs_file_pos(out);
	ssize_t done;
	if (same_file && (uint64_t)ipos < (uint64_t)opos + len &&
	    (uint64_t)opos < (uint64_t)ipos + len)
		done = -EINVAL; /* overlapping ranges of one file, as Linux refuses */
	else
		done = copy_loop(io, in, ipos, out, opos, len);
	if (done >= 0) {
		if (off_in)
			*off_in = ipos + done;
		else
			vfs_file_set_pos(in, ipos + done);
		if (off_out)
			*off_out = opos + done;
		else
			vfs_file_set_pos(out, opos + done);
	}
	if (lock_out)
		pthread_mutex_unlock(&out->pos_lock);
	if (lock_in)
		pthread_mutex_unlock(&in->pos_lock);
	return done;
}
