/*
 * share.c -- one pool open in many processes: the coordination file beside
 * the pool (as LMDB's lock file), the pool's turn, and the per-inode counts
 * every process must see.
 *
 * Every process maps the pool directly and keeps only small volatile state
 * of its own (its descriptors, the windows it has mapped). The pool's locks
 * are the threads' own (pthread, in each process), so processes take turns:
 * the threads of one process run calls at once, those of two processes do
 * not. The turn is one 32-bit word in the coordination file, the holder's
 * pid and the number of its threads inside a call. It stays with the last
 * holder while that one is idle (a single process pays one atomic add per
 * call), and another process takes it over as soon as no call of the holder
 * is running.
 *
 * Invariants: H1 a thread runs a call on the pool only while the turn names
 *               its process (share_enter ... share_leave) and counts it;
 *             H2 a process that takes the turn from another drops every
 *               window whose PPT entry changed since it last held the turn:
 *               each change is noted in wring by the process that made it
 *               (vspace.c's hooks); one that fell more than SHARE_WRING
 *               changes behind, or takes over from a process that died
 *               inside a call, drops every window; the taker holds the
 *               turn at TURN_INSIDE until it has (share_caught_up), so no
 *               other thread of its process runs a call meanwhile (one
 *               from inside its own, a signal handler's, runs in its turn);
 *             H3 the turn word changes only by compare-and-swap; it is taken
 *               from a process that is inside a call only once that process
 *               is gone (no /proc entry, a zombie, or another start time
 *               than the one the holder word names; one that cannot be
 *               checked, as with no descriptor free, counts as alive);
 *               the taker replays the log first (on_turn SHARE_DEAD), as a
 *               mount after a crash would; dead_pending says that replay
 *               is still owed (a taker that stepped out for a fork before
 *               replaying leaves it to the next taker);
 *             H4 sc_ino counts, per inode, the processes that hold it open
 *               and those that map it; it changes only under the turn, and
 *               an unlinked inode is released only when no process holds
 *               it (a process that dies leaves its counts: the inode is
 *               released when the last process lets go of the pool, by the
 *               next mount's orphan release);
 *             H5 the coordination file is rebuilt from nothing by the first
 *               process to open the pool (it holds the pool's flock alone),
 *               which keeps the file's own flock until it has recovered the
 *               pool (log replay, orphan release: share_attach_done), so no
 *               other process attaches, let alone runs a call, beside that
 *               recovery, which runs without the turn;
 *               later ones only check it, and the last one out removes it
 *               unless it forked (its children share its flock, which so
 *               cannot tell whether they are gone); a file left (all died,
 *               a forking process, a program under `ferrite run`, which
 *               exits without unmounting) goes when the pool is next held
 *               alone: fsck, mkfs, an exclusive mount.
 *               Attach and that removal are serialised by an exclusive
 *               flock on the coordination file itself; an attacher that
 *               finds its file removed meanwhile opens the name again;
 *             H6 a slot is a process's (pid, start time), free, or
 *               reserved by a share_forking parent for its child (forkling), which
 *               the child takes over inside fork; what the child inherits is
 *               marked as held by that slot before the fork, so nothing it
 *               holds can go before it runs. A new image after exec takes
 *               its old image's slot (same pid and start time), keeping its
 *               record locks and descriptions (share_desc.c) but not its
 *               inode holds;
 *             H7 waiters counts the set entries of waiting, each a thread
 *               waiting for the turn: the holder waits a moment for them
 *               and wakes them when it goes idle. A waiter that dies leaves
 *               its entry; a holder that waited and saw no one come gives
 *               back the entries of processes that are gone, so a killed
 *               waiter never slows the others for longer than that;
 *             H8 while others wait, a holder keeps the turn for a quantum
 *               (TURN_QUANTUM_NS from holder_since) and then steps aside at
 *               its next call; a process that finds the turn idle inside
 *               someone's quantum waits TURN_GRACE_NS for the holder to come
 *               back, and takes the turn if it does not; if it does (a burst
 *               of calls), it waits for the quantum's end uncounted, so the
 *               burst's calls cost no wake-ups.
 *             H9 a shared call (one that only reads the pool: stat, lseek,
 *               read) runs without the turn, in any number of processes at
 *               once, but never beside an exclusive call of another
 *               process: a shared call counts itself in its slot's
 *               reading[] and then finds no call inside the turn (or only
 *               its own process's, which its own locks order, as before);
 *               an exclusive call counts itself in the turn and then waits
 *               until every other slot's reading[] is 0. Both orders are a
 *               store then a load with a full barrier between (Dekker), so
 *               one of the two always sees the other; the shared call is
 *               the one that steps back (to the turn), so exclusive calls
 *               are never starved. A shared call sees only committed state,
 *               as a call under the turn does. It runs only in a process
 *               whose windows are up to date (wseen == wseq, H2; wseen
 *               moves on only once the drops are done, and a process that
 *               drops windows first lets its own shared calls end,
 *               catching_up), that holds a slot and is not forking; it
 *               never changes the pool, the coordination file's tables or
 *               a description shared with other processes. A process
 *               killed inside one leaves its count, which a waiting
 *               exclusive call clears once the slot's process is gone.
 * Validation: the coordination file is untrusted: it must be a regular
 *   file of ours or of the pool's owner, no more writable than the pool,
 *   name the pool's device and inode, and have the expected size; a turn
 *   word naming no live process is taken over, never trusted to wake us.
 * Crash argument: volatile only; nothing here is persistent. A process that
 *   dies holding the turn inside a call is one crash of the pool: the next
 *   holder recovers as mount does (log replay), except that unlinked inodes
 *   wait for the last process (H4).
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "space/share_impl.h"

/* this process's attachments: one per pool (a second mount is refused) */
static pthread_mutex_t reg_lock = PTHREAD_MUTEX_INITIALIZER;
static struct pool_share *reg;
static pthread_once_t fork_once = PTHREAD_ONCE_INIT;

long share_futex(uint32_t *w, int op, uint32_t val, const struct timespec *ts)
{
	return syscall(SYS_futex, w, op, val, ts, NULL, 0);
}

/* fork: no thread of this process is inside a call while fork copies the
 * process (its locks would stay locked in the child): a thread that enters
 * meanwhile steps out again until fork is over (turn_take). The thread that
 * forks then takes the turn itself, reserves a slot for the child and lets
 * the fork hook make the child hold what it inherits (vnodes, descriptions:
 * share_desc.c), so that nothing the child holds can go before it runs. */
int share_forking;
__thread int share_fork_thread; /* this thread prepares a fork: it may enter */

static int slot_reserve(struct pool_share *s);
static void take_reserved(struct pool_share *s, uint32_t me);

static void fork_reserve(struct pool_share *s)
{
	s->child_slot = -1;
	if (s->slot < 0 || !s->fork_hook)
		return; /* it holds nothing yet: neither does the child */
	share_fork_thread = 1;
	int why = share_turn_take(s, 0);
	share_fork_thread = 0;
	/* for the next call of parent and child alike: both map what the
	 * parent mapped */
	__atomic_or_fetch(&s->pending_why, why, __ATOMIC_SEQ_CST);
	pthread_mutex_lock(&s->tab_lock);
	s->child_slot = slot_reserve(s);
	pthread_mutex_unlock(&s->tab_lock);
	if (s->child_slot >= 0)
		s->fork_hook(s->fork_arg, s->child_slot);
	share_turn_release(s);
}

static void before_fork(void)
{
	__atomic_store_n(&share_forking, 1, __ATOMIC_SEQ_CST);
	pthread_mutex_lock(&reg_lock);
	for (struct pool_share *s = reg; s; s = s->next) {
		for (;;) {
			uint32_t v = __atomic_load_n(&s->f->turn, __ATOMIC_SEQ_CST);
			if ((TURN_PID(v) != s->pid || TURN_CALLS(v) == 0) &&
			    (s->slot < 0 ||
			     !__atomic_load_n(&s->f->reading[s->slot].n, __ATOMIC_SEQ_CST)))
				break;
			sched_yield();
		}
		s->has_forked = 1;
		fork_reserve(s);
	}
}

static void after_fork_parent(void)
{
	for (struct pool_share *s = reg; s; s = s->next)
		s->child_slot = -1; /* a fork that failed leaves it to expire */
	pthread_mutex_unlock(&reg_lock);
	__atomic_store_n(&share_forking, 0, __ATOMIC_SEQ_CST);
}

static void after_fork_child(void)
{
	__atomic_store_n(&share_forking, 0, __ATOMIC_SEQ_CST);
	uint32_t me = (uint32_t)getpid();
	for (struct pool_share *s = reg; s; s = s->next) {
		pthread_mutex_init(&s->tab_lock, NULL);
		/* the parent's to let go of (no unlock: the lock is its too) */
		if (s->attach_fd >= 0) {
			close(s->attach_fd);
			s->attach_fd = -1;
		}
		take_reserved(s, me);
	}
	pthread_mutex_init(&reg_lock, NULL);
}

static void fork_init(void)
{
	pthread_atfork(before_fork, after_fork_parent, after_fork_child);
}

/* ---- the coordination file ------------------------------------------------------- */

/* the lock table follows the inode table */
static size_t locks_off(void)
{
	size_t off = sizeof(struct share_file) + SHARE_INOS * sizeof(struct share_ino);
	return (off + 63) & ~(size_t)63;
}

static size_t share_len(void)
{
	return locks_off() + sizeof(struct lk_table);
}

struct lk_table *share_locks(struct pool_share *s)
{
	return (struct lk_table *)((char *)s->f + locks_off());
}

int share_slot(struct pool_share *s)
{
	return s ? s->slot : -1;
}

/* O_NOFOLLOW|O_EXCL create, or open one that is there and may be trusted
 * (see Validation): ours, the pool owner's or root's, no more writable than
 * the pool. */
/* Every process that may open the pool computes the same name; the owner is
 * in it so that a pool given to another user gets a file the new owner can
 * use (a file of the old one cannot be removed by them). */
static void share_file_name(const struct stat *pst, char *name, size_t cap)
{
	snprintf(name, cap, "/dev/shm/ferrite-%llx-%llx-%u.share", (unsigned long long)pst->st_dev,
		 (unsigned long long)pst->st_ino, (unsigned)pst->st_uid);
}

static int open_share_file(const char *pool_path, const struct stat *pst, char *name, size_t cap)
{
	share_file_name(pst, name, cap);
	mode_t mode = (pst->st_mode & 0666) | 0600;
	int fd, existing = 0;
	for (int tries = 0;; tries++) {
		fd = open(name, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
		if (fd >= 0 || errno != EEXIST)
			break;
		fd = open(name, O_RDWR | O_NOFOLLOW | O_CLOEXEC);
		existing = fd >= 0 || errno != ENOENT || tries == 1000;
		if (existing)
			break;
		/* there, then gone before we opened it (the last process out
		 * removed it): make it again */
	}
	if (!existing && fd >= 0) {
		/* the pool's readers and writers may join; made by root for
		 * another's pool, it is the pool owner's */
		if (fchmod(fd, mode) ||
		    (geteuid() == 0 && pst->st_uid != 0 && fchown(fd, pst->st_uid, pst->st_gid))) {
			int e = errno;
			close(fd);
			unlink(name);
			return fr_err(-e, "%s: cannot set the mode of %s: %s", pool_path, name,
				      strerror(e));
		}
		return fd;
	}
	if (!existing)
		return fr_err(-errno, "%s: cannot create %s: %s", pool_path, name, strerror(errno));
	struct stat st;
	if (fd < 0 || fstat(fd, &st)) {
		int e = errno;
		if (fd >= 0)
			close(fd);
		return fr_err(-e,
			      "%s: cannot open %s: %s (the pool's mode allows more than the "
			      "file's: its owner or root can fix it once no process uses the pool)",
			      pool_path, name, strerror(e));
	}
	/* the pool's mode widened since the file was made: follow it */
	if ((st.st_mode & 0666) != mode && (st.st_uid == geteuid() || geteuid() == 0))
		(void)!fchmod(fd, mode);
	int owner_ok = st.st_uid == geteuid() || st.st_uid == pst->st_uid || st.st_uid == 0;
	if (!S_ISREG(st.st_mode) || !owner_ok || (st.st_mode & 0022 & ~pst->st_mode)) {
		close(fd);
		return fr_err(-EPERM,
			      "%s: %s is not a coordination file this pool can trust (owner "
			      "%u, mode %o); remove it once no process uses the pool",
			      pool_path, name, (unsigned)st.st_uid, (unsigned)(st.st_mode & 07777));
	}
	return fd;
}

static int map_share(struct pool_share *s, int fd, int fresh, const char *pool_path,
		     const char *name)
{
	size_t len = share_len();
	if (fresh && (ftruncate(fd, 0) != 0 || ftruncate(fd, (off_t)len) != 0))
		return fr_err(-errno, "%s: cannot size %s: %s", pool_path, name, strerror(errno));
	struct stat st;
	if (fstat(fd, &st) || (uint64_t)st.st_size != len)
		return fr_err(-EUCLEAN,
			      "%s: %s has the wrong size; remove it once no process uses "
			      "the pool",
			      pool_path, name);
	void *m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (m == MAP_FAILED)
		return fr_err(-errno, "%s: cannot map %s: %s", pool_path, name, strerror(errno));
	struct share_file *f = m;
	if (fresh) {
		f->version = SHARE_VERSION;
		f->pool_dev = s->dev;
		f->pool_ino = s->ino;
		f->size = len;
		f->nino = SHARE_INOS;
		__atomic_store_n(&f->magic, SHARE_MAGIC, __ATOMIC_RELEASE);
	} else if (f->magic != SHARE_MAGIC || f->version != SHARE_VERSION || f->size != len ||
		   f->pool_dev != s->dev || f->pool_ino != s->ino || f->nino != SHARE_INOS) {
		munmap(m, len);
		return fr_err(-EUCLEAN,
			      "%s: %s does not describe this pool; remove it once no "
			      "process uses the pool",
			      pool_path, name);
	}
	s->f = f;
	s->len = len;
	return 0;
}

/* The turn in our own pid, before this process has run a call, is our
 * image's before an exec, or a dead process's whose pid we got: idle, it
 * is free; with calls inside, those died, and the turn is left to a holder
 * no process is (pid 0), which the next taker takes over as from one that
 * died inside a call (H3). */
static void turn_disown(struct pool_share *s)
{
	uint32_t v = __atomic_load_n(&s->f->turn, __ATOMIC_SEQ_CST);
	if (TURN_PID(v) == s->pid)
		__atomic_compare_exchange_n(&s->f->turn, &v, TURN_CALLS(v) ? 1 : 0, 0,
					    __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
}

int share_attach(struct pool *p, const struct stat *pst)
{
	pthread_once(&fork_once, fork_init);
	pthread_mutex_lock(&reg_lock);
	for (struct pool_share *o = reg; o; o = o->next)
		if (o->dev == (uint64_t)pst->st_dev && o->ino == (uint64_t)pst->st_ino) {
			pthread_mutex_unlock(&reg_lock);
			return fr_err(-EBUSY, "%s: pool is already mounted in this process",
				      p->path);
		}
	pthread_mutex_unlock(&reg_lock);
	struct pool_share *s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->attach_fd = -1;
	s->dev = pst->st_dev;
	s->ino = pst->st_ino;
	s->pid = (uint32_t)getpid();
	s->slot = -1;
	s->child_slot = -1;
	pthread_mutex_init(&s->tab_lock, NULL);
	s->attacher = s->pid;
	char *name = s->name;
	int fd, rc = 0;
	for (;;) {
		fd = open_share_file(p->path, pst, name, sizeof(s->name));
		if (fd < 0) {
			free(s);
			return fd;
		}
		flock(fd, LOCK_EX); /* H5: one process attaches at a time */
		/* the last one out removes the file (share_detach): attach
		 * to the one the name leads to now */
		struct stat a, b;
		if (!fstat(fd, &a) && !stat(name, &b) && a.st_ino == b.st_ino &&
		    a.st_dev == b.st_dev) {
			s->file_ino = a.st_ino;
			break;
		}
		close(fd);
	}
	for (int tries = 0;; tries++) {
		if (flock(p->fd, LOCK_EX | LOCK_NB) == 0) {
			/* alone: build the file afresh, then share the pool (the
			 * conversion is not atomic; whoever slips in is refused
			 * below) */
			rc = map_share(s, fd, 1, p->path, name);
			p->share_first = 1;
			if (flock(p->fd, LOCK_SH | LOCK_NB))
				rc = rc ? rc : -EWOULDBLOCK;
			break;
		}
		if (flock(p->fd, LOCK_SH | LOCK_NB) == 0) {
			rc = map_share(s, fd, 0, p->path, name);
			break;
		}
		/* held alone: by a check, which refuses us, or by the last
		 * process out, which removed the file we have just made anew
		 * and lets go of the pool in a moment */
		if (tries == 100) {
			rc = -EWOULDBLOCK;
			break;
		}
		usleep(1000);
	}
	if (rc && !p->share_first) {
		/* never built: an empty file must not outlive this attempt */
		struct stat st;
		if (!fstat(fd, &st) && st.st_size == 0)
			unlink(name);
	}
	s->attach_fd = -1;
	if (!rc && p->share_first) {
		s->attach_fd = fd; /* others attach once we have recovered */
	} else {
		flock(fd, LOCK_UN);
		close(fd);
	}
	if (rc == -EWOULDBLOCK) {
		char who[96];
		pool_holder_describe(p->fd, who, sizeof(who));
		rc = fr_err(-EBUSY,
			    "%s: pool is in use by %s, which does not share it (a check, a "
			    "tiered pool or a FUSE mount)",
			    p->path, who);
	}
	if (rc) {
		if (s->f)
			munmap(s->f, s->len);
		free(s);
		return rc;
	}
	s->start = share_proc_start(s->pid);
	s->wseen = __atomic_load_n(&s->f->wseq, __ATOMIC_ACQUIRE); /* it has no window yet */
	/* shared calls of our image before an exec ended with its threads:
	 * their count must not hold up writers until this image's first call
	 * claims the slot (H9) */
	for (int k = 0; k < SHARE_PROCS; k++)
		if (__atomic_load_n(&s->f->procs[k].pid, __ATOMIC_ACQUIRE) == s->pid &&
		    s->f->procs[k].start == s->start)
			__atomic_store_n(&s->f->reading[k].n, 0, __ATOMIC_SEQ_CST);
	turn_disown(s);
	pthread_mutex_lock(&reg_lock);
	s->next = reg;
	reg = s;
	pthread_mutex_unlock(&reg_lock);
	p->share = s;
	return 0;
}

static void slot_reap(struct share_file *f, int k);

void share_attach_done(struct pool *p)
{
	struct pool_share *s = p->share;
	if (!s || s->attach_fd < 0)
		return;
	flock(s->attach_fd, LOCK_UN);
	close(s->attach_fd);
	s->attach_fd = -1;
}

void share_detach(struct pool *p)
{
	struct pool_share *s = p->share;
	if (!s)
		return;
	share_attach_done(p); /* a mount that failed in its recovery */
	pthread_mutex_lock(&reg_lock);
	for (struct pool_share **pp = &reg; *pp; pp = &(*pp)->next)
		if (*pp == s) {
			*pp = s->next;
			break;
		}
	pthread_mutex_unlock(&reg_lock);
	if (s->slot >= 0) { /* our slot back, under the turn */
		share_turn_take(s, 0);
		pthread_mutex_lock(&s->tab_lock);
		slot_reap(s->f, s->slot);
		pthread_mutex_unlock(&s->tab_lock);
		share_turn_release(s);
	}
	munmap(s->f, s->len);
	/* the last process out removes the coordination file. Not a process
	 * that forked: its children share the pool descriptor, flock and all
	 * (one open file description), so the flock cannot say whether they
	 * still hold the pool, and taking it exclusive would take it for them
	 * too, shutting every later process out; their file stays for them and
	 * is removed by whoever next holds the pool alone (H5) */
	int fd = s->pid == s->attacher && !s->has_forked
		     ? open(s->name, O_RDWR | O_NOFOLLOW | O_CLOEXEC)
		     : -1;
	struct stat st;
	if (fd >= 0 && !flock(fd, LOCK_EX) && !fstat(fd, &st) && st.st_ino == s->file_ino &&
	    !flock(p->fd, LOCK_EX | LOCK_NB))
		unlink(s->name); /* held alone: no file of another can go by name */
	if (fd >= 0)
		close(fd);
	free(s);
	p->share = NULL;
}

void share_remove_stale(const struct stat *pst)
{
	char name[sizeof(((struct pool_share *)0)->name)];
	share_file_name(pst, name, sizeof(name));
	int fd = open(name, O_RDWR | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0)
		return;
	/* H5: after any attach under way (which fails: the pool is ours);
	 * only a file of ours, the pool owner's or root's, still at the name */
	struct stat st, at;
	if (!flock(fd, LOCK_EX) && !fstat(fd, &st) && S_ISREG(st.st_mode) &&
	    (st.st_uid == geteuid() || st.st_uid == pst->st_uid || st.st_uid == 0) &&
	    !stat(name, &at) && at.st_ino == st.st_ino && at.st_dev == st.st_dev)
		unlink(name);
	close(fd);
}

/* ---- process slots and per-inode holders (H4) ----------------------------------------- */

/* Inode numbers close together (a directory's files, made one after the
 * other) land close together: a block of INO_RUN numbers has one hashed
 * home and keeps its order in it, so opening a thousand new files touches
 * a few pages of the table, not one each -- each first touch of a page of
 * the coordination file costs a fault and a cleared page. */
#define INO_RUN 64
static uint32_t ino_slot(uint64_t ino)
{
	uint32_t home = (uint32_t)(((ino / INO_RUN) * 0x9e3779b97f4a7c15ULL) >> 40);
	return (home * INO_RUN + (uint32_t)(ino % INO_RUN)) & (SHARE_INOS - 1);
}

static struct share_ino *ino_find(struct share_file *f, uint64_t ino, int add)
{
	for (uint32_t i = ino_slot(ino), n = 0; n < SHARE_INOS;
	     n++, i = (i + 1) & (SHARE_INOS - 1)) {
		struct share_ino *e = &f->ino[i];
		if (e->ino == ino)
			return e;
		if (e->ino == 0) {
			if (!add || f->live >= SHARE_INOS - SHARE_INOS / 8)
				return NULL;
			memset(e, 0, sizeof(*e));
			e->ino = ino;
			f->live++;
			return e;
		}
	}
	return NULL;
}

static int ino_unheld(const struct share_ino *e)
{
	uint64_t any = 0;
	for (int w = 0; w < PROC_WORDS; w++)
		any |= e->open[w] | e->map[w];
	return !any;
}

/* Linear probing without tombstones: close the gap an entry leaves. */
static void ino_remove(struct share_file *f, struct share_ino *e)
{
	uint32_t i = (uint32_t)(e - f->ino);
	f->ino[i].ino = 0;
	f->live--;
	for (uint32_t j = (i + 1) & (SHARE_INOS - 1); f->ino[j].ino;
	     j = (j + 1) & (SHARE_INOS - 1)) {
		uint32_t home = ino_slot(f->ino[j].ino);
		/* j's entry may move to i if i lies cyclically in [home, j) */
		int movable = i <= j ? (home <= i || home > j) : (home <= i && home > j);
		if (movable) {
			f->ino[i] = f->ino[j];
			f->ino[j].ino = 0;
			i = j;
		}
	}
}

/* Slot k's inode holds go: what it held is held by one process less. */
static void slot_drop_inodes(struct share_file *f, int k)
{
	uint64_t bit = 1ULL << (k % 64);
	int w = k / 64;
	/* (a process that closed what it opened holds nothing: no scan) */
	for (uint32_t i = 0; i < SHARE_INOS && f->procs[k].held;) {
		struct share_ino *e = &f->ino[i];
		if (e->ino && ((e->open[w] | e->map[w]) & bit)) {
			f->procs[k].held -= ((e->open[w] & bit) != 0) + ((e->map[w] & bit) != 0);
			f->nmaps -= (e->map[w] & bit) != 0;
			e->open[w] &= ~bit;
			e->map[w] &= ~bit;
			if (ino_unheld(e)) {
				ino_remove(f, e); /* may move a later entry here: look again */
				continue;
			}
		}
		i++;
	}
	f->procs[k].held = 0;
}

/* Gives slot k back: its process is gone, or never came (a fork that
 * failed). What it held is held by one process less. */
static void slot_reap(struct share_file *f, int k)
{
	slot_drop_inodes(f, k);
	desc_reap_slot(f, k);
	f->procs[k].start = 0;
	__atomic_store_n(&f->reading[k].n, 0, __ATOMIC_SEQ_CST); /* it is gone (H9) */
	__atomic_store_n(&f->procs[k].pid, 0, __ATOMIC_RELEASE);
	__atomic_store_n(&f->procs[k].forkling, 0, __ATOMIC_RELEASE);
	lk_release_slot((struct lk_table *)((char *)f + locks_off()), k);
}

/* A slot reserved for a child being forked: the child takes it over at
 * once, in fork itself, so a reservation still there after ten seconds is a
 * fork that failed (or a child killed or stopped before it ran a line; it
 * finds its slot gone and holds nothing, take_reserved). */
static int reserved(struct share_file *f, int k)
{
	uint32_t who = __atomic_load_n(&f->procs[k].forkling, __ATOMIC_ACQUIRE);
	if (!who)
		return 0;
	return who == FORKLING_TAKING || share_now_ns() - f->procs[k].reserved_at < 10000000000u;
}

int slot_reap_if_gone(struct pool_share *s, int k)
{
	struct share_file *f = s->f;
	if (k == s->slot || reserved(f, k))
		return 0;
	uint32_t pid = __atomic_load_n(&f->procs[k].pid, __ATOMIC_ACQUIRE);
	if (pid && !share_proc_gone(pid, f->procs[k].start))
		return 0;
	slot_reap(f, k);
	__atomic_or_fetch(&s->pending_why, SHARE_REAPED, __ATOMIC_SEQ_CST);
	return 1;
}

int share_reap_slot(struct pool_share *s, int32_t slot)
{
	if (!s || slot < 0 || slot >= SHARE_PROCS || slot == s->slot)
		return 0;
	pthread_mutex_lock(&s->tab_lock);
	uint32_t pid = s->f->procs[slot].pid;
	int reaped = pid && share_proc_gone(pid, s->f->procs[slot].start);
	if (reaped)
		slot_reap(s->f, slot);
	pthread_mutex_unlock(&s->tab_lock);
	return reaped ? SHARE_REAPED : 0;
}

/* Slot k is in use: readers_drain looks at it from now on. */
static void slots_used(struct share_file *f, int k)
{
	uint32_t n = __atomic_load_n(&f->nslots, __ATOMIC_ACQUIRE);
	while (k >= 0 && (uint32_t)k >= n &&
	       !__atomic_compare_exchange_n(&f->nslots, &n, (uint32_t)k + 1, 0, __ATOMIC_SEQ_CST,
					    __ATOMIC_SEQ_CST))
		;
}

/* Under the turn, at a process's first call: a slot of its own. Slots of
 * processes that are gone, and one left by this process's image before an
 * exec (the same pid and start time), are given back first. Returns
 * SHARE_REAPED if any was, so that the caller releases the unlinked inodes
 * nobody holds any more. */
static int slot_claim(struct pool_share *s)
{
	struct share_file *f = s->f;
	int why = 0, mine = -1, image = -1;
	for (int k = 0; k < SHARE_PROCS; k++) {
		if (reserved(f, k))
			continue;
		uint32_t pid = __atomic_load_n(&f->procs[k].pid, __ATOMIC_ACQUIRE);
		if (!pid && !f->procs[k].forkling) {
			if (mine < 0)
				mine = k;
			continue;
		}
		uint64_t start = 0;
		int state = pid ? share_proc_state(pid, &start) : 0;
		if (pid == s->pid && state > 0 && start == f->procs[k].start && image < 0) {
			/* our image before exec: its descriptions may be passed
			 * on (share_desc_adopt) and its record locks stay, as
			 * exec keeps them; its vnodes are gone */
			if (f->procs[k].held)
				why |= SHARE_REAPED;
			slot_drop_inodes(f, k);
			/* exec ended its shared calls with its threads */
			__atomic_store_n(&f->reading[k].n, 0, __ATOMIC_SEQ_CST);
			image = k;
		} else if (!state ||
			   (state > 0 && f->procs[k].start && start != f->procs[k].start) ||
			   pid == s->pid) {
			slot_reap(f, k);
			why |= SHARE_REAPED;
			if (mine < 0)
				mine = k;
		}
	}
	if (image >= 0) {
		mine = image;
	} else if (mine >= 0) {
		f->procs[mine].start = s->start;
		f->procs[mine].descs = 0;
		__atomic_store_n(&f->procs[mine].pid, s->pid, __ATOMIC_RELEASE);
	}
	s->slot = mine;
	slots_used(f, mine);
	return why;
}

/* ---- fork: the child holds what it inherits from the start ------------------------- */

/* Under the turn, in the parent: a slot for the child, which holds what the
 * parent's fork hook gives it. The child fills in its pid (take_reserved). */
static int slot_reserve(struct pool_share *s)
{
	struct share_file *f = s->f;
	/* a free slot first: a fork reads no /proc entry of other processes */
	int k = 0;
	while (k < SHARE_PROCS && (f->procs[k].pid || f->procs[k].forkling))
		k++;
	for (k = k < SHARE_PROCS ? k : 0; k < SHARE_PROCS; k++) {
		if (reserved(f, k))
			continue;
		uint32_t pid = __atomic_load_n(&f->procs[k].pid, __ATOMIC_ACQUIRE);
		if (pid && !share_proc_gone(pid, f->procs[k].start))
			continue;
		if (pid || f->procs[k].forkling) {
			slot_reap(f, k);
			s->pending_why |= SHARE_REAPED;
		}
		f->procs[k].held = 0;
		f->procs[k].descs = 0;
		f->procs[k].start = 0;
		f->procs[k].reserved_at = share_now_ns();
		__atomic_store_n(&f->procs[k].forkling, s->pid, __ATOMIC_RELEASE);
		slots_used(f, k);
		return k;
	}
	return -1;
}

/* In the child, before it runs a line of its own: the reserved slot is its. */
static void take_reserved(struct pool_share *s, uint32_t me)
{
	struct share_file *f = s->f;
	int k = s->child_slot;
	uint32_t parent = s->pid;
	s->child_slot = -1;
	s->pid = me;
	s->start = share_proc_start(me);
	turn_disown(s);
	/* still ours? (a reservation that expired may have been given back) */
	if (k >= 0 && !__atomic_compare_exchange_n(&f->procs[k].forkling, &parent, FORKLING_TAKING,
						   0, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST))
		k = -1;
	if (k < 0) { /* a slot at the first call, holding nothing (SHARE_FORKED) */
		s->slot = -1;
		s->forked = 1;
		return;
	}
	f->procs[k].start = s->start;
	__atomic_store_n(&f->procs[k].pid, me, __ATOMIC_RELEASE);
	__atomic_store_n(&f->procs[k].forkling, 0, __ATOMIC_RELEASE);
	s->slot = k;
	s->forked = 0;
}

void share_set_fork_hook(struct pool_share *s, void (*hook)(void *arg, int child_slot), void *arg)
{
	if (!s)
		return;
	s->fork_hook = hook;
	s->fork_arg = arg;
}

void share_ino_hold(struct pool_share *s, int slot, uint64_t ino, int kind)
{
	if (!s || slot < 0 || slot >= SHARE_PROCS)
		return;
	pthread_mutex_lock(&s->tab_lock);
	struct share_ino *e = ino_find(s->f, ino, 1);
	uint64_t bit = 1ULL << (slot % 64);
	uint64_t *words = !e ? NULL : kind == SHARE_MAPS ? e->map : e->open;
	/* (full: the child counts as not holding it) */
	if (words && !(words[slot / 64] & bit)) {
		words[slot / 64] |= bit;
		s->f->procs[slot].held++;
		if (kind == SHARE_MAPS)
			s->f->nmaps++;
	}
	pthread_mutex_unlock(&s->tab_lock);
}

/* Whether pid may still run: kill(pid, 0) costs a fraction of reading
 * /proc/pid/stat, and says "gone" only when it is. It cannot tell a zombie
 * or a reused pid from a live holder; every REAP_FULL_EVERY-th check reads
 * the start time (proc_start), so those are reaped a little later. */
#define REAP_FULL_EVERY 64
static int maybe_alive(uint32_t pid)
{
	static __thread unsigned checks;
	if (++checks % REAP_FULL_EVERY == 0)
		return 0;
	return kill((pid_t)pid, 0) == 0 || errno == EPERM;
}

/* Gives back the slots of pid if it is gone (H4). Runs each time the turn
 * comes from another process, so the common case -- the last holder lives
 * -- must not read /proc. */
static int reap_if_gone(struct share_file *f, uint32_t pid)
{
	int why = 0, alive = -1;
	for (int k = 0; k < SHARE_PROCS; k++) {
		if (f->procs[k].pid != pid)
			continue;
		if (alive < 0)
			alive = maybe_alive(pid);
		if (!alive && share_proc_gone(pid, f->procs[k].start)) {
			slot_reap(f, k);
			why = SHARE_REAPED;
		}
	}
	return why;
}

int share_enter(struct pool_share *s)
{
	if (!s)
		return 0;
	int why = 0;
	if (s->forked) {
		s->forked = 0;
		s->start = share_proc_start(s->pid);
		why |= SHARE_FORKED;
	}
	why = share_turn_take(s, why);
	/* every call passes here: a plain load first, the exchange only after
	 * a fork or a reap left something to do */
	if (__atomic_load_n(&s->pending_why, __ATOMIC_ACQUIRE))
		why |= __atomic_exchange_n(&s->pending_why, 0, __ATOMIC_SEQ_CST);
	if (s->slot < 0 || (s->prev && s->prev != s->pid)) {
		pthread_mutex_lock(&s->tab_lock);
		if (s->slot < 0)
			why |= slot_claim(s);
		else /* the last holder may have exited */
			why |= reap_if_gone(s->f, s->prev);
		pthread_mutex_unlock(&s->tab_lock);
	}
	return why;
}

static int ino_add(struct pool_share *s, uint64_t ino, int kind, int delta)
{
	if (!s)
		return 0;
	if (s->slot < 0)
		return delta > 0 ? -EUSERS : 0;
	struct share_ino *e = ino_find(s->f, ino, delta > 0);
	if (!e)
		return delta > 0 ? -ENFILE : 0;
	uint64_t *words = kind == SHARE_MAPS ? e->map : e->open;
	uint64_t bit = 1ULL << (s->slot % 64);
	int had = (words[s->slot / 64] & bit) != 0, has = delta > 0;
	if (has)
		words[s->slot / 64] |= bit;
	else
		words[s->slot / 64] &= ~bit;
	s->f->procs[s->slot].held += (uint32_t)(has - had); /* what slot_reap must scan for */
	if (kind == SHARE_MAPS)
		s->f->nmaps += (uint64_t)(has - had);
	int n = share_holders(words);
	if (ino_unheld(e))
		ino_remove(s->f, e);
	return n;
}

int share_ino_add(struct pool_share *s, uint64_t ino, int kind, int delta)
{
	if (!s)
		return 0;
	pthread_mutex_lock(&s->tab_lock);
	int rc = ino_add(s, ino, kind, delta);
	pthread_mutex_unlock(&s->tab_lock);
	return rc;
}

int share_ino_count(struct pool_share *s, uint64_t ino, int kind)
{
	if (!s)
		return 0;
	pthread_mutex_lock(&s->tab_lock);
	struct share_ino *e = ino_find(s->f, ino, 0);
	int n = e ? share_holders(kind == SHARE_MAPS ? e->map : e->open) : 0;
	pthread_mutex_unlock(&s->tab_lock);
	return n;
}

void share_note_windows(struct pool_share *s, uint64_t w, uint64_t n)
{
	struct share_file *f = s->f;
	/* read back only by a process taking the turn from this one, once
	 * no call of this one is inside: every entry is written by then */
	uint64_t q = __atomic_fetch_add(&f->wseq, 1, __ATOMIC_SEQ_CST);
	f->wring[q % SHARE_WRING].w = w;
	f->wring[q % SHARE_WRING].n = n;
	/* this process's own windows follow the change already (vspace.c's
	 * hooks), so it stays up to date and its shared calls stay possible:
	 * wseen moves past q once it has moved past the notes before q, all
	 * of them this process's (it has held the turn since it last caught
	 * up). A note that finds it held back gives up after a while; wseen
	 * stays behind, and the process's calls take the turn until it next
	 * takes the turn from another and catches up. */
	for (int spins = 0; spins < 256; spins++) {
		uint64_t want = q;
		if (__atomic_compare_exchange_n(&s->wseen, &want, q + 1, 0, __ATOMIC_SEQ_CST,
						__ATOMIC_SEQ_CST) ||
		    want > q)
			break;
		__builtin_ia32_pause();
	}
}

void share_note_all_windows(struct pool_share *s)
{
	if (s) /* more than the ring holds: whoever is behind drops them all */
		__atomic_add_fetch(&s->f->wseq, SHARE_WRING + 1, __ATOMIC_SEQ_CST);
}

void share_changed_windows(struct pool_share *s, void (*drop)(void *arg, uint64_t w, uint64_t n),
			   void (*drop_all)(void *arg), void *arg, int all)
{
	struct share_file *f = s->f;
	/* this process's shared calls first: none starts from here on, and
	 * those running end (short calls; a bound, in case this thread is
	 * inside one itself, from a signal handler) */
	__atomic_store_n(&s->catching_up, 1, __ATOMIC_SEQ_CST);
	for (int i = 0; i < 100000 && s->slot >= 0 &&
			__atomic_load_n(&f->reading[s->slot].n, __ATOMIC_SEQ_CST);
	     i++)
		sched_yield();
	uint64_t now = __atomic_load_n(&f->wseq, __ATOMIC_ACQUIRE);
	uint64_t from = __atomic_load_n(&s->wseen, __ATOMIC_ACQUIRE);
	if (all || now - from > SHARE_WRING || now < from)
		drop_all(arg);
	else
		for (uint64_t q = from; q < now; q++)
			drop(arg, f->wring[q % SHARE_WRING].w, f->wring[q % SHARE_WRING].n);
	/* only now: a shared call of this process that starts meanwhile finds
	 * wseen behind and takes the turn instead of a window being dropped */
	__atomic_store_n(&s->wseen, now, __ATOMIC_SEQ_CST);
	__atomic_store_n(&s->catching_up, 0, __ATOMIC_SEQ_CST);
}

int share_ino_others(struct pool_share *s, uint64_t ino, int kind)
{
	if (!s)
		return 0;
	pthread_mutex_lock(&s->tab_lock);
	struct share_ino *e = ino_find(s->f, ino, 0);
	int others = 0;
	for (int w = 0; e && w < PROC_WORDS && !others; w++) {
		const uint64_t *words = kind == SHARE_MAPS ? e->map : e->open;
		uint64_t mine = s->slot >= 0 && s->slot / 64 == w ? 1ULL << (s->slot % 64) : 0;
		others = (words[w] & ~mine) != 0;
	}
	pthread_mutex_unlock(&s->tab_lock);
	return others;
}

int share_any_maps(struct pool_share *s)
{
	return s && __atomic_load_n(&s->f->nmaps, __ATOMIC_RELAXED) != 0;
}
