/*
 * fuse_wire.c -- the daemon's own reads and writes of /dev/fuse, to ask the
 * kernel for FUSE_HANDLE_KILLPRIV_V2, which libfuse 3.14 cannot request.
 *
 * Why: without it the kernel asks the daemon for security.capability before
 * every write (to know whether privileges must be dropped), a whole extra
 * round trip per write. With it the kernel marks inodes S_NOSEC after the
 * first check and leaves clearing set-id bits to the file system, which the
 * daemon does on write and truncate (ll_write_buf, ll_setattr).
 *
 * Invariant: only the INIT reply is changed, and only by one flag the kernel
 * offered (so an older kernel never sees a flag it did not offer). INIT is
 * the first request the kernel sends and nothing else is in flight until it
 * is answered, so the first reply of the session is the INIT reply.
 */
#include <errno.h>
#include <fuse_lowlevel.h>
#include <linux/fuse.h>
#include <stddef.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include "fuse/fuse_front.h"

static ssize_t wire_read(int fd, void *buf, size_t len, void *userdata)
{
	ssize_t n = read(fd, buf, len);
	struct ffront *ff = userdata;
	const struct fuse_in_header *in = buf;
	if (n >= (ssize_t)(sizeof(*in) + offsetof(struct fuse_init_in, flags) + 4) &&
	    in->opcode == FUSE_INIT) {
		const struct fuse_init_in *init = (const void *)(in + 1);
		__atomic_store_n(&ff->kernel_killpriv_v2,
				 (init->flags & FUSE_HANDLE_KILLPRIV_V2) != 0, __ATOMIC_RELEASE);
	}
	if (n >= (ssize_t)sizeof(*in) &&
	    (in->opcode == FUSE_FORGET || in->opcode == FUSE_BATCH_FORGET ||
	     in->opcode == FUSE_RELEASE || in->opcode == FUSE_RELEASEDIR))
		frees_started(ff);
	return n;
}

static ssize_t wire_writev(int fd, struct iovec *iov, int count, void *userdata)
{
	struct ffront *ff = userdata;
	if (!__atomic_exchange_n(&ff->init_replied, 1, __ATOMIC_ACQ_REL) && count == 2 &&
	    iov[0].iov_len == sizeof(struct fuse_out_header) &&
	    ((struct fuse_out_header *)iov[0].iov_base)->error == 0 &&
	    iov[1].iov_len >= offsetof(struct fuse_init_out, flags) + 4 &&
	    __atomic_load_n(&ff->kernel_killpriv_v2, __ATOMIC_ACQUIRE)) {
		struct fuse_init_out *out = iov[1].iov_base;
		out->flags |= FUSE_HANDLE_KILLPRIV_V2;
		ff->killpriv_v2 = 1;
	}
	return writev(fd, iov, count);
}

int fuse_wire_install(struct fuse_session *se, struct ffront *ff)
{
	static const struct fuse_custom_io io = {
	    .read = wire_read,
	    .writev = wire_writev,
	};
	int fd = fuse_session_fd(se);
	return fuse_session_custom_io(se, &io, fd);
}
