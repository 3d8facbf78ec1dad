/*
 * procs.c -- what another process holds of this one's files: a forked child
 * (its vnodes and open file descriptions, from before it runs), and a new
 * image after exec or a spawned child (descriptions passed by token).
 *
 * Invariants: P1 a description held by another process names its entry in
 *               the coordination file (vfs_file.sd) until this process lets
 *               go of it (of_put); its offset, status flags and lock owner
 *               are read and written there, under the turn (share_desc.c);
 *             P2 the fork hook runs in the forking thread with every other
 *               thread of the process outside the library (share.c), so the
 *               vnode and descriptor tables it walks are still.
 * Crash argument: nothing persistent; see share.c.
 */
#include <errno.h>

#include "fs/fs.h"

/* P2: the child holds every vnode and description the parent has. */
static void fork_hook(void *arg, int child)
{
	ferrite_fs *fs = arg;
	struct pool_share *share = fs->m.pool.share;
	pthread_mutex_lock(&fs->vn_lock);
	for (uint64_t s = 0; s < fs->vn_cap; s++)
		for (struct vnode *v = fs->vn_hash[s]; v; v = v->next)
			share_ino_hold(share, child, v->ino, SHARE_OPENS);
	pthread_mutex_unlock(&fs->vn_lock);
	struct vfs_fdtable *t = &fs->fdt;
	pthread_mutex_lock(&t->lock);
	for (int i = 0; i < t->cap; i++) {
		struct vfs_file *f = t->fds[i];
		if (!f)
			continue;
		if (!f->sd)
			f->sd = share_desc_new(share, f->pos, f->flags, f->lock_id);
		if (f->sd) /* else the table is full: the child's copy is its own */
			share_desc_hold(share, f->sd, child);
	}
	pthread_mutex_unlock(&t->lock);
}

void fs_procs_forked_alone(ferrite_fs *fs)
{
	/* a child forked without a slot of its own holds no description: its
	 * copies become its own, from where the shared ones stood */
	struct vfs_fdtable *t = &fs->fdt;
	pthread_mutex_lock(&t->lock);
	for (int i = 0; i < t->cap; i++) {
		struct vfs_file *f = t->fds[i];
		if (f && f->sd) {
			f->pos = f->sd->pos;
			f->flags = vfs_file_flags(f);
			f->sd = NULL;
		}
	}
	pthread_mutex_unlock(&t->lock);
}

void fs_procs_init(ferrite_fs *fs)
{
	share_set_fork_hook(fs->m.pool.share, fork_hook, fs);
}

static int export_fd(ferrite_fs *fs, struct ofile *of, uint32_t *token)
{
	struct pool_share *share = fs->m.pool.share;
	pthread_mutex_lock(&of->f.pos_lock);
	if (!of->f.sd)
		of->f.sd = share_desc_new(share, of->f.pos, of->f.flags, of->f.lock_id);
	if (of->f.sd)
		*token = share_desc_token(share, of->f.sd);
	pthread_mutex_unlock(&of->f.pos_lock);
	return of->f.sd ? 0 : fr_err(-ENFILE, "too many open files shared between processes");
}

static int import_fd(ferrite_fs *fs, struct ofile *of, uint32_t token)
{
	struct pool_share *share = fs->m.pool.share;
	pthread_mutex_lock(&of->f.pos_lock);
	int rc = -EBUSY; /* it is shared already */
	if (!of->f.sd) {
		struct share_desc *d = share_desc_adopt(share, token);
		if (d) {
			of->f.sd = d;
			of->f.lock_id = d->lock_id;
			/* the access mode is this open's; the rest is the description's */
			of->f.flags = (of->f.flags & ~(O_APPEND | O_NONBLOCK)) |
				      (d->flags & (O_APPEND | O_NONBLOCK));
			of->f.pos = d->pos;
			rc = 0;
		} else {
			rc = -ESTALE;
		}
	}
	pthread_mutex_unlock(&of->f.pos_lock);
	return rc;
}

/* Does a descriptor of fs name d? (FERRITE_FD_PRUNE) */
static int named(void *arg, const struct share_desc *d)
{
	struct vfs_fdtable *t = arg;
	for (int i = 0; i < t->cap; i++)
		if (t->fds[i] && t->fds[i]->sd == d)
			return 1;
	return 0;
}

int pmfs_fd_share(ferrite_fs *fs, int fd, int op, uint32_t *token)
{
	fr_err_clear();
	if (!fs)
		return api_end(-EINVAL);
	struct pool_share *share = fs->m.pool.share;
	if (!share)
		return api_end(fr_err(-EOPNOTSUPP, "the pool is mounted alone: nothing is shared"));
	if (op == FERRITE_FD_PRUNE) {
		pthread_mutex_lock(&fs->fdt.lock);
		share_desc_prune(share, named, &fs->fdt);
		pthread_mutex_unlock(&fs->fdt.lock);
		return api_end(0);
	}
	struct ofile *of = fd_get(fs, fd);
	if (!of)
		return api_end(-EBADF);
	int rc = op == FERRITE_FD_EXPORT ? export_fd(fs, of, token) : import_fd(fs, of, *token);
	of_put(fs, of);
	return api_end(rc);
}
