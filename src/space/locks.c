/*
 * locks.c -- advisory file locks (fcntl record locks, open file description
 * locks, flock) in a table that every process sharing a pool sees: it lives
 * in the coordination file (share.c), or in memory for a pool held alone.
 *
 * An entry is one locked byte range of one inode, of one owner: a process
 * (LK_PROCESS | its slot: POSIX record locks, which a process does not
 * inherit) or an open file description (its lock id: OFD and flock locks,
 * which a forked child shares). fcntl locks and flock locks live in separate
 * name spaces (ns), as on Linux.
 *
 * Invariants: K1 two entries of different owners in one name space that
 *               overlap are both read locks;
 *             K2 the entries of one owner never overlap: setting a range
 *               first cuts the owner's own entries out of it (split, trim,
 *               drop), so a lock converts in one step;
 *             K3 the caller excludes every other user of the table (the
 *               pool's turn and a process mutex, or a mutex alone); seq
 *               changes whenever a lock goes away or weakens, and waiters
 *               sleep on it (lk_wait).
 * Crash argument: volatile only. A process that dies loses its locks when
 *   its slot is given back (share.c slot_reap -> lk_release_slot).
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/futex.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "space/space.h"

static int overlaps(const struct lk_entry *e, int64_t start, int64_t end)
{
	return e->start <= end && start <= e->end;
}

static void drop(struct lk_table *t, uint32_t i)
{
	t->e[i] = t->e[--t->n];
}

const struct lk_entry *lk_conflict(const struct lk_table *t, const struct lk_req *r)
{
	for (uint32_t i = 0; i < t->n && i < LK_MAX; i++) {
		const struct lk_entry *e = &t->e[i];
		if (e->ino == r->ino && e->ns == r->ns && e->owner != r->owner &&
		    overlaps(e, r->start, r->end) && (r->type == F_WRLCK || e->type == F_WRLCK))
			return e;
	}
	return NULL;
}

int lk_set(struct lk_table *t, const struct lk_req *r)
{
	if (t->n > LK_MAX)
		t->n = LK_MAX; /* a damaged count: never index past the table */
	if (r->type != F_UNLCK && lk_conflict(t, r))
		return -EAGAIN;
	/* room first, so that a failure changes nothing: at most one entry is
	 * split (K2), and one is added */
	if (t->n + (r->type != F_UNLCK ? 2 : 1) > LK_MAX)
		return -ENOLCK;
	int weaker = 0;
	for (uint32_t i = 0; i < t->n;) {
		struct lk_entry *e = &t->e[i];
		if (e->ino != r->ino || e->ns != r->ns || e->owner != r->owner ||
		    !overlaps(e, r->start, r->end)) {
			i++;
			continue;
		}
		weaker |= e->type == F_WRLCK || r->type == F_UNLCK;
		if (e->start < r->start && e->end > r->end) { /* split around the range */
			struct lk_entry right = *e;
			right.start = r->end + 1;
			e->end = r->start - 1;
			t->e[t->n++] = right;
			i++;
		} else if (e->start < r->start) {
			e->end = r->start - 1;
			i++;
		} else if (e->end > r->end) {
			e->start = r->end + 1;
			i++;
		} else {
			drop(t, i); /* the last entry moved to i: look at it */
		}
	}
	if (r->type != F_UNLCK) {
		struct lk_entry *e = &t->e[t->n++];
		memset(e, 0, sizeof(*e));
		e->ino = r->ino;
		e->owner = r->owner;
		e->start = r->start;
		e->end = r->end;
		e->type = (uint16_t)r->type;
		e->ns = (uint16_t)r->ns;
		e->slot = r->slot;
		e->pid = r->pid;
	}
	if (weaker)
		lk_changed(t);
	return 0;
}

/* Drops the entries that match (owner, ino) or, with by_slot, slot. */
static void release_where(struct lk_table *t, int by_slot, uint64_t ino, uint64_t owner,
			  int32_t slot)
{
	int any = 0;
	if (t->n > LK_MAX)
		t->n = LK_MAX;
	for (uint32_t i = 0; i < t->n;) {
		const struct lk_entry *e = &t->e[i];
		if (by_slot ? e->slot == slot : e->owner == owner && (!ino || e->ino == ino)) {
			drop(t, i);
			any = 1;
		} else {
			i++;
		}
	}
	if (any)
		lk_changed(t);
}

void lk_release_owner(struct lk_table *t, uint64_t ino, uint64_t owner)
{
	release_where(t, 0, ino, owner, 0);
}

void lk_release_slot(struct lk_table *t, int32_t slot)
{
	release_where(t, 1, 0, 0, slot);
}

void lk_changed(struct lk_table *t)
{
	__atomic_add_fetch(&t->seq, 1, __ATOMIC_SEQ_CST);
	syscall(SYS_futex, &t->seq, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}

int lk_wait(uint32_t *seq, uint32_t seen)
{
	/* bounded: a waker that died before its wake, or a holder that died
	 * and is given back only at someone's next call, is seen at the next
	 * try */
	struct timespec ts = {0, 100000000};
	long r = syscall(SYS_futex, seq, FUTEX_WAIT, seen, &ts, NULL, 0);
	return r == -1 && errno == EINTR ? -EINTR : 0;
}
