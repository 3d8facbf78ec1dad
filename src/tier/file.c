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
	pthread_mutex_lock(&t->fd_lock);
	int fd = -1;
	for (int i = t->fd_free_hint; i < t->fd_cap; i++)
		if (!t->fds[i]) {
			fd = i;
			break;
		}
	if (fd < 0) {
		int ncap = t->fd_cap ? t->fd_cap * 2 : 64;
		if (ncap > (1 << 20)) {
			pthread_mutex_unlock(&t->fd_lock);
			return fr_err(-EMFILE, "too many open ferrite descriptors");
		}
		struct tier_ofile **n = realloc(t->fds, (size_t)ncap * sizeof(*n));
		if (!n) {
			pthread_mutex_unlock(&t->fd_lock);
			return -ENOMEM;
		}
		memset(n + t->fd_cap, 0, (size_t)(ncap - t->fd_cap) * sizeof(*n));
		fd = t->fd_cap;
		t->fds = n;
		t->fd_cap = ncap;
	}
	t->fds[fd] = of;
	t->fd_free_hint = fd + 1;
	pthread_mutex_unlock(&t->fd_lock);
	return fd;
}

struct tier_ofile *tfd_get(struct tier *t, int fd)
{
	pthread_mutex_lock(&t->fd_lock);
	struct tier_ofile *of = fd >= 0 && fd < t->fd_cap ? t->fds[fd] : NULL;
	if (of)
		__atomic_fetch_add(&of->refs, 1, __ATOMIC_RELAXED);
	pthread_mutex_unlock(&t->fd_lock);
	return of;
}

static void of_release(struct tier *t, struct tier_ofile *of)
{
	if (of->tf) {
		struct tier_file *tf = of->tf;
		if (!(of->flags & O_PATH) && (of->flags & O_ACCMODE) != O_RDONLY &&
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
	pthread_mutex_destroy(&of->pos_lock);
	free(of);
}

void tfd_put(struct tier *t, struct tier_ofile *of)
{
	if (__atomic_sub_fetch(&of->refs, 1, __ATOMIC_ACQ_REL) == 0)
		of_release(t, of);
}

void tier_fds_close_all(struct tier *t)
{
	for (int i = 0; i < t->fd_cap; i++)
		if (t->fds[i]) {
			tfd_put(t, t->fds[i]);
			t->fds[i] = NULL;
		}
	free(t->fds);
	t->fds = NULL;
	t->fd_cap = 0;
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
	else if (!rc && (b->flags & O_APPEND))
		rc = -EBADF;
	else if (!rc && a->ino == b->ino) {
		/* Linux: the same file with overlapping ranges is EINVAL. */
		int64_t i = off_in ? *off_in : a->pos, o = off_out ? *off_out : b->pos;
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
