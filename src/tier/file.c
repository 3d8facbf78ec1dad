/*
 * file.c -- the tier engine's C API: credentials, the descriptor table and the calls on descriptors
 * alone. Invariants, crash argument and credentials: ns.h.
 */
#include "tier/ns.h"

/* ---- credentials ------------------------------------------------------------------ */

__thread int tier_creds_applied; /* this call switched the thread's fs ids */

/* Thread credentials (ferrite_set_creds) applied to the kernel calls. */
void tier_creds_apply(void)
{
	if (!cred_is_explicit())
		return;
	const struct vfs_cred *c = cred_get();
	/* Per thread: the raw calls, not glibc's (which apply to every thread). */
	syscall(SYS_setgroups, c->ngroups, c->groups);
	syscall(SYS_setfsgid, c->gid);
	syscall(SYS_setfsuid, c->uid);
	tier_creds_applied = 1;
}

/* Back to the process's own ids at the end of every call: nothing else the
 * thread does (another pool, the host) may run with the caller's. */
void tier_creds_done(void)
{
	if (!tier_creds_applied)
		return;
	tier_creds_applied = 0;
	syscall(SYS_setfsuid, geteuid());
	syscall(SYS_setfsgid, getegid());
	gid_t g[64];
	int n = getgroups(64, g);
	syscall(SYS_setgroups, n < 0 ? 0 : n, g);
}

/* ---- descriptors --------------------------------------------------------------------- */

int tfd_install(struct tier *t, struct tier_ofile *of)
{
	return vfs_fd_install(&t->fdt, &of->f);
}

struct tier_ofile *tfd_get(struct tier *t, int fd)
{
	return (struct tier_ofile *)vfs_fd_get(&t->fdt, fd); /* f is its first member */
}

static void of_release(struct tier *t, struct tier_ofile *of)
{
	if (of->tf) {
		struct tier_file *tf = of->tf;
		if (!(of->f.flags & O_PATH) && (of->f.flags & O_ACCMODE) != O_RDONLY &&
		    !__atomic_load_n(&tf->ndirty, __ATOMIC_RELAXED) &&
		    pthread_mutex_trylock(&tf->flush_lock) == 0) {
			/* Close of a written file: the backing file's size and
			 * mtime catch up now if its chunks are drained already. */
			tier_sync_meta(t, tf);
			pthread_mutex_unlock(&tf->flush_lock);
		}
		tf_open_put(t, tf);
	}
	close(of->kfd);
	vfs_file_fini(&of->f);
	free(of);
}

void tfd_put(struct tier *t, struct tier_ofile *of)
{
	if (vfs_file_unref(&of->f))
		of_release(t, of);
}

void tier_fds_close_all(struct tier *t)
{
	for (int i = vfs_fd_limit(&t->fdt) - 1; i >= 0; i--) {
		struct tier_ofile *of = (struct tier_ofile *)vfs_fd_take(&t->fdt, i);
		if (of)
			tfd_put(t, of);
	}
}

/* ---- the rest -------------------------------------------------------------------------------- */

int tier_set_link_prefix(ferrite_fs *fs, const char *prefix)
{
	BEGIN(fs);
	char *p = NULL;
	if (prefix) {
		size_t n = strlen(prefix);
		while (n > 1 && prefix[n - 1] == '/')
			n--;
		if (prefix[0] != '/' || n < 2)
			return TIER_END(-EINVAL);
		p = strndup(prefix, n);
		if (!p)
			return TIER_END(-ENOMEM);
	}
	free(t->link_prefix);
	t->link_prefix = p;
	t->link_prefix_len = p ? strlen(p) : 0;
	return TIER_END(0);
}

ssize_t tier_copy_file_range(ferrite_fs *fs, int fd_in, off_t *off_in, int fd_out, off_t *off_out,
			     size_t len, unsigned flags)
{
	struct tier *t = TIER(fs);
	fr_err_clear();
	if (flags)
		return fr_err_finish(-EINVAL);
	struct tier_ofile *a = tfd_get(t, fd_in), *b = tfd_get(t, fd_out);
	int rc = !a || !b ? -EBADF : 0;
	if (!rc && (S_ISDIR(a->type) || S_ISDIR(b->type)))
		rc = -EISDIR;
	else if (!rc && (!S_ISREG(a->type) || !S_ISREG(b->type)))
		rc = -EINVAL;
	else if (!rc && (b->f.flags & O_APPEND))
		rc = -EBADF;
	else if (!rc && a->ino == b->ino) {
		/* Linux: the same file with overlapping ranges is EINVAL. */
		int64_t i = off_in ? *off_in : a->f.pos, o = off_out ? *off_out : b->f.pos;
		if (i < o + (int64_t)len && o < i + (int64_t)len)
			rc = -EINVAL;
	}
	if (a)
		tfd_put(t, a);
	if (b)
		tfd_put(t, b);
	if (rc)
		return fr_err_finish(rc);
	size_t bufsz = 256 * 1024;
	char *buf = malloc(bufsz);
	if (!buf)
		return -ENOMEM;
	ssize_t total = 0;
	while ((size_t)total < len) {
		size_t want = FR_MIN(bufsz, len - (size_t)total);
		struct iovec v = {buf, want};
		ssize_t r = tier_rw(fs, fd_in, &v, 1, off_in ? *off_in : -1, 0);
		if (r <= 0) {
			if (r < 0 && !total)
				total = r;
			break;
		}
		v.iov_len = (size_t)r;
		ssize_t w = tier_rw(fs, fd_out, &v, 1, off_out ? *off_out : -1, 1);
		if (w < 0) {
			if (!total)
				total = w;
			break;
		}
		if (off_in)
			*off_in += w;
		if (off_out)
			*off_out += w;
		total += w;
		if (w < r)
			break;
	}
	free(buf);
	return total;
}
