/*
 * locks.c -- the lock calls of both engines: a struct flock or a flock(2)
 * operation becomes a range request on the lock table the engine names
 * (space/locks.c, where the invariants are). Nothing persistent.
 */
#include <errno.h>
#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include "space/space.h"
#include "vfs/vfs.h"

static uint64_t ofd_owner(struct vfs_lockctx *c)
{
	return vfs_file_lock_id(c->f, &c->tab->next_id); /* under the engine's exclusion */
}

/* [start, end] of fl, as the kernel computes it (fs/locks.c flock_to_posix_lock). */
static int fl_range(struct vfs_lockctx *c, const struct flock *fl, int64_t *start, int64_t *end)
{
	int64_t base;
	switch (fl->l_whence) {
	case SEEK_SET:
		base = 0;
		break;
	case SEEK_CUR:
		base = vfs_file_pos(c->f);
		break;
	case SEEK_END:
		base = c->size;
		break;
	default:
		return -EINVAL;
	}
	int64_t s;
	if (__builtin_add_overflow(base, (int64_t)fl->l_start, &s))
		return -EOVERFLOW;
	if (s < 0)
		return -EINVAL;
	int64_t e;
	if (fl->l_len > 0) {
		if (__builtin_add_overflow(s, (int64_t)fl->l_len - 1, &e))
			return -EOVERFLOW;
	} else if (fl->l_len < 0) {
		e = s - 1;
		s += fl->l_len;
		if (s < 0)
			return -EINVAL;
	} else {
		e = LK_EOF;
	}
	*start = s;
	*end = e;
	return 0;
}

static int blocked(struct vfs_lockctx *c, const struct lk_req *r, struct vfs_lockwait *w)
{
	const struct lk_entry *e = lk_conflict(c->tab, r);
	w->seq = &c->tab->seq;
	w->seen = __atomic_load_n(&c->tab->seq, __ATOMIC_SEQ_CST);
	w->holder_slot = e ? e->slot : -1;
	return -EAGAIN;
}

int vfs_lock_fcntl(struct vfs_lockctx *c, int cmd, struct flock *fl, struct vfs_lockwait *w)
{
	if (!fl)
		return -EFAULT;
	int ofd = cmd == F_OFD_GETLK || cmd == F_OFD_SETLK || cmd == F_OFD_SETLKW;
	int get = cmd == F_GETLK || cmd == F_OFD_GETLK;
	if (fl->l_type != F_RDLCK && fl->l_type != F_WRLCK && fl->l_type != F_UNLCK)
		return -EINVAL;
	if (ofd && fl->l_pid != 0)
		return -EINVAL;
	int fl_acc = __atomic_load_n(&c->f->flags, __ATOMIC_RELAXED);
	if (fl_acc & O_PATH)
		return -EBADF;
	int acc = fl_acc & O_ACCMODE;
	if (!get && ((fl->l_type == F_RDLCK && acc == O_WRONLY) ||
		     (fl->l_type == F_WRLCK && acc == O_RDONLY)))
		return -EBADF;
	struct lk_req r = {.ino = c->ino, .type = fl->l_type, .ns = LK_FCNTL, .slot = c->slot};
	int rc = fl_range(c, fl, &r.start, &r.end);
	if (rc)
		return rc;
	r.owner = ofd ? ofd_owner(c) : LK_PROCESS | (uint64_t)c->slot;
	r.pid = ofd ? -1 : (int32_t)getpid();
	if (get) {
		if (fl->l_type == F_UNLCK)
			return -EINVAL;
		const struct lk_entry *e = lk_conflict(c->tab, &r);
		if (!e) {
			fl->l_type = F_UNLCK;
			return 0;
		}
		fl->l_type = (short)e->type;
		fl->l_whence = SEEK_SET;
		fl->l_start = e->start;
		fl->l_len = e->end == LK_EOF ? 0 : e->end - e->start + 1;
		fl->l_pid = e->pid;
		return 0;
	}
	rc = lk_set(c->tab, &r);
	return rc == -EAGAIN ? blocked(c, &r, w) : rc;
}

int vfs_lock_flock(struct vfs_lockctx *c, int op, struct vfs_lockwait *w)
{
	int type = op & ~LOCK_NB;
	if (type != LOCK_SH && type != LOCK_EX && type != LOCK_UN)
		return -EINVAL;
	if (__atomic_load_n(&c->f->flags, __ATOMIC_RELAXED) & O_PATH)
		return -EBADF;
	struct lk_req r = {
	    .ino = c->ino,
	    .owner = ofd_owner(c),
	    .start = 0,
	    .end = LK_EOF,
	    .type = type == LOCK_SH   ? F_RDLCK
		    : type == LOCK_EX ? F_WRLCK
				      : F_UNLCK,
	    .ns = LK_FLOCK,
	    .slot = c->slot,
	    .pid = -1,
	};
	int rc = lk_set(c->tab, &r);
	return rc == -EAGAIN ? blocked(c, &r, w) : rc;
}

void vfs_lock_closed(struct lk_table *t, int32_t slot, uint64_t ino)
{
	if (t)
		lk_release_owner(t, ino, LK_PROCESS | (uint64_t)slot);
}

void vfs_lock_file_gone(struct lk_table *t, struct vfs_file *f)
{
	if (t && f->lock_id)
		lk_release_owner(t, 0, f->lock_id);
}

int vfs_lock_sleep(const struct vfs_lockwait *w)
{
	return lk_wait(w->seq, w->seen);
}
