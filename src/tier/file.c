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
	if (of->f.lock_id) { /* its OFD and flock locks go with it */
		pthread_mutex_lock(&t->lk_mutex);
		vfs_lock_file_gone(t->lk, &of->f);
		pthread_mutex_unlock(&t->lk_mutex);
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
	BEGIN(fs);
	if (flags)
		return TIER_END_SS(-EINVAL);
	struct tier_ofile *a = tfd_get(t, fd_in), *b = tfd_get(t, fd_out);
	ssize_t rc = -EBADF;
	if (a && b) {
		const struct vfs_copy_io io = {t, tier_copy_pread, tier_copy_pwrite};
		rc = vfs_copy_file_range(&io, &a->f, a->type, &b->f, b->type, a->ino == b->ino,
					 off_in, off_out, len, flags);
	}
	if (a)
		tfd_put(t, a);
	if (b)
		tfd_put(t, b);
	return TIER_END_SS(rc);
}

/* ---- advisory locks: one process holds a tiered pool, so they order its
 * own descriptions and threads (vfs/locks.c, space/locks.c) ------------------- */

static int tier_lock_call(ferrite_fs *fs, int fd, int cmd, struct flock *fl, int op,
			  struct vfs_lockwait *w)
{
	int64_t size = 0;
	if (fl && fl->l_whence == SEEK_END) {
		struct stat st;
		int rc = tier_fstat(fs, fd, &st);
		if (rc)
			return rc;
		size = st.st_size;
	}
	BEGIN(fs);
	struct tier_ofile *of = tfd_get(t, fd);
	if (!of)
		return TIER_END(-EBADF);
	struct vfs_lockctx c = {.slot = 0, .ino = of->ino, .f = &of->f, .size = size};
	pthread_mutex_lock(&t->lk_mutex);
	if (!t->lk)
		t->lk = calloc(1, sizeof(*t->lk));
	c.tab = t->lk;
	int rc = !c.tab ? -ENOMEM : fl ? vfs_lock_fcntl(&c, cmd, fl, w) : vfs_lock_flock(&c, op, w);
	pthread_mutex_unlock(&t->lk_mutex);
	tfd_put(t, of);
	return TIER_END(rc);
}

int tier_lock(ferrite_fs *fs, int fd, int cmd, struct flock *fl, struct vfs_lockwait *w)
{
	return tier_lock_call(fs, fd, cmd, fl, 0, w);
}

int tier_flock(ferrite_fs *fs, int fd, int op, struct vfs_lockwait *w)
{
	return tier_lock_call(fs, fd, 0, NULL, op, w);
}
