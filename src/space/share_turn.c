/*
 * share_turn.c -- the pool's turn (share.c H1-H3, H7, H8) and the shared
 * calls beside it (H9): which process's threads may run calls on a pool
 * that several processes have open, and when calls that only read may run
 * in several at once. The invariants, the validation of the coordination
 * file and the crash argument are share.c's; this file holds the code that
 * runs on every call, and the reading of /proc that tells whether a
 * process is still there.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/futex.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "space/share_impl.h"

/* ---- processes: alive, and which one (H3, H6) ---------------------------------------- */

int share_proc_state(uint32_t pid, uint64_t *start)
{
	char path[64], buf[512];
	if (!pid)
		return 0;
	snprintf(path, sizeof(path), "/proc/%u/stat", pid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		if (errno == ENOENT || errno == ESRCH)
			return 0;
		/* out of descriptors, say: ask the kernel whether pid is there */
		return kill((pid_t)pid, 0) && errno == ESRCH ? 0 : -1;
	}
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	int e = errno;
	close(fd);
	if (n <= 0)
		return n < 0 && e == ESRCH ? 0 : -1;
	buf[n] = '\0';
	char *p = strrchr(buf, ')');
	if (!p || p[1] != ' ')
		return -1;
	char state = p[2];
	if (state == 'X' || state == 'x')
		return 0;
	/* fields after the name: 3 state ... 20 num_threads ... 22 starttime */
	p += 2;
	long threads = 0;
	for (int field = 3; field < 22 && p; field++) {
		p = strchr(p, ' ');
		if (p)
			p++;
		if (p && field + 1 == 20)
			threads = strtol(p, NULL, 10);
	}
	if (!p)
		return -1;
	/* a zombie, unless only its main thread ended (pthread_exit) and the
	 * others still run calls */
	if (state == 'Z' && threads <= 1)
		return 0;
	*start = strtoull(p, NULL, 10);
	return 1;
}

uint64_t share_proc_start(uint32_t pid)
{
	uint64_t start;
	return share_proc_state(pid, &start) > 0 ? start : 0;
}

/* ---- the turn (H1-H3) -------------------------------------------------------------- */

/* Whether the holder of turn value v is gone (H3): its pid runs no more,
 * or runs another process than the one that took the turn. A holder that
 * is alive, or that cannot be told, is not gone: taking the turn from a
 * live process inside a call would run two calls at once. */
static int holder_gone(struct share_file *f, uint32_t v)
{
	uint32_t pid = TURN_PID(v);
	uint64_t start;
	int state = share_proc_state(pid, &start);
	if (state <= 0)
		return state == 0;
	uint64_t h = __atomic_load_n(&f->holder, __ATOMIC_SEQ_CST);
	/* the turn moved on since: h may be a newer holder's */
	if (__atomic_load_n(&f->turn, __ATOMIC_SEQ_CST) != v)
		return 0;
	return (uint32_t)(h >> 32) == pid && (uint32_t)h && (uint32_t)h != (uint32_t)start;
}

uint64_t share_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* H8: how long a process keeps the turn while others wait -- long enough
 * that handing it over (a wake-up and a context switch, some microseconds)
 * costs little next to the calls it runs, short enough that a waiting call
 * is not held up for long. */
#define TURN_QUANTUM_NS 1000000
#define TURN_GRACE_NS	5000 /* a holder's gap between two calls of a burst */

/* The thread that took the turn over and has not caught up yet. The calls
 * it makes meanwhile from inside (a signal handler's write to a pool file)
 * run in its turn, uncounted, as the turn is at TURN_INSIDE: s->nested
 * counts them, the taker's alone, as no other thread of the process is
 * inside a call until the turn opens. */
static __thread struct pool_share *inside_taker;

/* Takes the turn over from its last holder: at TURN_INSIDE, so that no
 * other thread of this process joins before the taker has caught up (H2,
 * H3; share_caught_up opens it). */
static int take(struct pool_share *s, uint32_t *v)
{
	uint32_t nv = s->pid << TURN_SHIFT | TURN_INSIDE;
	if (!__atomic_compare_exchange_n(&s->f->turn, v, nv, 0, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST))
		return 0;
	inside_taker = s;
	__atomic_store_n(&s->f->holder_since, share_now_ns(), __ATOMIC_RELEASE);
	__atomic_store_n(&s->f->holder, (uint64_t)s->pid << 32 | (uint32_t)s->start,
			 __ATOMIC_SEQ_CST);
	return 1;
}

void share_turn_release(struct pool_share *s)
{
	uint32_t inside = s->pid << TURN_SHIFT | TURN_INSIDE;
	/* taken over but not caught up: free, so that whoever takes it next
	 * (this process too) catches up as from another (H2); a death it
	 * took over from stays in dead_pending (H3) */
	if (inside_taker != s || !__atomic_compare_exchange_n(&s->f->turn, &inside, 0, 0,
							      __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST)) {
		share_leave(s);
		return;
	}
	inside_taker = NULL;
	if (__atomic_load_n(&s->f->waiters, __ATOMIC_SEQ_CST))
		share_futex(&s->f->turn, FUTEX_WAKE, INT_MAX, NULL);
}

void share_caught_up(struct pool_share *s, int why)
{
	uint32_t inside = s->pid << TURN_SHIFT | TURN_INSIDE;
	if (why & SHARE_DEAD)
		__atomic_store_n(&s->f->dead_pending, 0, __ATOMIC_SEQ_CST);
	if (inside_taker != s)
		return; /* it joined: the taker opened the turn */
	inside_taker = NULL;
	__atomic_compare_exchange_n(&s->f->turn, &inside, s->pid << TURN_SHIFT | 1, 0,
				    __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
}

/* After counting itself in: if a fork is being prepared, steps out again
 * and waits for it (returns 1: try again). */
static int fork_wait(struct pool_share *s)
{
	if (share_fork_thread || !__atomic_load_n(&share_forking, __ATOMIC_SEQ_CST))
		return 0;
	share_turn_release(s);
	while (__atomic_load_n(&share_forking, __ATOMIC_SEQ_CST))
		sched_yield();
	return 1;
}

/* H7: a thread about to wait for the turn is seen only once it has an
 * entry; with every entry taken it waits unseen, woken by its timeout. */
static int waiter_in(struct pool_share *s, uint64_t me)
{
	for (int i = 0; i < SHARE_WAITERS; i++) {
		uint64_t none = 0;
		if (!__atomic_load_n(&s->f->waiting[i], __ATOMIC_RELAXED) &&
		    __atomic_compare_exchange_n(&s->f->waiting[i], &none, me, 0, __ATOMIC_SEQ_CST,
						__ATOMIC_SEQ_CST)) {
			__atomic_add_fetch(&s->f->waiters, 1, __ATOMIC_SEQ_CST);
			return i;
		}
	}
	return -1;
}

static void waiter_out(struct pool_share *s, int i, uint64_t me)
{
	if (i >= 0 && __atomic_compare_exchange_n(&s->f->waiting[i], &me, 0, 0, __ATOMIC_SEQ_CST,
						  __ATOMIC_SEQ_CST))
		__atomic_sub_fetch(&s->f->waiters, 1, __ATOMIC_SEQ_CST);
}

/* Gives back the entries of waiters whose process is gone. */
static void waiters_prune(struct pool_share *s)
{
	for (int i = 0; i < SHARE_WAITERS; i++) {
		uint64_t e = __atomic_load_n(&s->f->waiting[i], __ATOMIC_SEQ_CST);
		uint64_t start;
		int state = e ? share_proc_state((uint32_t)(e >> 32), &start) : -1;
		if ((state == 0 || (state > 0 && (uint32_t)start != (uint32_t)e)) &&
		    __atomic_compare_exchange_n(&s->f->waiting[i], &e, 0, 0, __ATOMIC_SEQ_CST,
						__ATOMIC_SEQ_CST))
			__atomic_sub_fetch(&s->f->waiters, 1, __ATOMIC_SEQ_CST);
	}
}

/* Whether a thread of another process waits for the turn: the holder's
 * own threads never make it step aside (they would pass it to each other,
 * a call at a time, for good). */
static int other_waits(struct pool_share *s)
{
	for (int i = 0; i < SHARE_WAITERS; i++) {
		uint64_t e = __atomic_load_n(&s->f->waiting[i], __ATOMIC_RELAXED);
		if (e && (uint32_t)(e >> 32) != s->pid)
			return 1;
	}
	return 0;
}

/* What is left of the holder's quantum (H8), in ns. */
static uint64_t quantum_left(struct share_file *f)
{
	uint64_t since = __atomic_load_n(&f->holder_since, __ATOMIC_ACQUIRE), now = share_now_ns();
	return now - since < TURN_QUANTUM_NS ? TURN_QUANTUM_NS - (now - since) : 0;
}

static int turn_count_in(struct pool_share *s, int why)
{
	struct share_file *f = s->f;
	s->prev = 0;
	int spun = 0, burst = 0;
	for (int round = 0;; round++) {
		uint32_t v = __atomic_load_n(&f->turn, __ATOMIC_SEQ_CST);
		if (TURN_PID(v) == s->pid) {
			/* ours: join the calls inside, or resume an idle turn --
			 * after a short pause if another process asked for it */
			if (TURN_CALLS(v) == TURN_INSIDE) {
				if (inside_taker == s) { /* a call from inside the taker's */
					__atomic_add_fetch(&s->nested, 1, __ATOMIC_RELAXED);
					return why;
				}
				sched_yield();
				continue;
			}
			if (TURN_CALLS(v) == 0 && round == 0 &&
			    __atomic_load_n(&f->waiters, __ATOMIC_SEQ_CST) &&
			    quantum_left(f) == 0 && other_waits(s)) {
				/* its quantum is over (H8): step aside, counted as
				 * a waiter so that the taker's leave wakes it */
				uint64_t me = (uint64_t)s->pid << 32 | (uint32_t)s->start;
				share_futex(&f->turn, FUTEX_WAKE, INT_MAX, NULL);
				int seen = waiter_in(s, me);
				share_futex(&f->turn, FUTEX_WAIT, v,
					    &(struct timespec){0, 1000000}); /* 1 ms */
				waiter_out(s, seen, me);
				if (__atomic_load_n(&f->turn, __ATOMIC_SEQ_CST) == v)
					waiters_prune(s); /* no one came: are they alive? */
				continue;
			}
			if (__atomic_compare_exchange_n(&f->turn, &v, v + 1, 0, __ATOMIC_SEQ_CST,
							__ATOMIC_SEQ_CST)) {
				if (!fork_wait(s))
					return why;
			}
			continue;
		}
		if (TURN_CALLS(v) == 0) { /* free or idle: take it over (H2) */
			if (v && !spun && quantum_left(f)) {
				/* inside its quantum (H8): a holder running calls
				 * back to back is in again within microseconds; one
				 * that is not has gone quiet, and loses the turn */
				spun = 1;
				uint64_t until = share_now_ns() + TURN_GRACE_NS;
				while (__atomic_load_n(&f->turn, __ATOMIC_SEQ_CST) == v &&
				       share_now_ns() < until)
					__builtin_ia32_pause();
				burst = __atomic_load_n(&f->turn, __ATOMIC_SEQ_CST) != v;
				continue;
			}
			if (take(s, &v)) {
				s->prev = TURN_PID(v);
				/* from anyone, even from no one (a turn reset by an
				 * exec): this process catches up on the windows (H2),
				 * and replays the log of a death no one recovered yet
				 * (a taker that stepped out for a fork, H3). One that
				 * steps out again owes neither: it freed the turn, and
				 * whoever takes it next does both */
				int owed = SHARE_OTHER;
				if (__atomic_load_n(&f->dead_pending, __ATOMIC_SEQ_CST))
					owed |= SHARE_DEAD;
				if (!fork_wait(s))
					return why | owed;
			}
			continue;
		}
		uint64_t left = burst ? quantum_left(f) : 0;
		if (left) {
			/* a burst of calls: wait for its quantum's end, uncounted,
			 * so that its calls make no wake-ups */
			burst = 0;
			share_futex(&f->turn, FUTEX_WAIT, v, &(struct timespec){0, (long)left});
			continue;
		}
		spun = 0;
		/* busy: wait for its last call to end; check now and then that
		 * the holder still lives (H3) -- also when a signal ends the
		 * wait, or a program whose timer fires more often than the wait
		 * times out would never take over from a holder that died */
		uint64_t me = (uint64_t)s->pid << 32 | (uint32_t)s->start;
		int seen = waiter_in(s, me);
		long r = share_futex(&f->turn, FUTEX_WAIT, v, &(struct timespec){0, 50000000});
		int woken_by = r == -1 ? errno : 0;
		waiter_out(s, seen, me);
		if ((woken_by == ETIMEDOUT || woken_by == EINTR) && holder_gone(f, v) &&
		    take(s, &v)) {
			s->prev = TURN_PID(v);
			__atomic_store_n(&f->dead_pending, 1, __ATOMIC_SEQ_CST);
			if (!fork_wait(s))
				return why | SHARE_OTHER | SHARE_DEAD;
		}
	}
}

/* Whether slot k's process is gone (a waiting exclusive call clears its
 * count then, H9). */
static int reader_gone(struct share_file *f, int k)
{
	uint32_t pid = __atomic_load_n(&f->procs[k].pid, __ATOMIC_ACQUIRE);
	return !pid || share_proc_gone(pid, f->procs[k].start);
}

/* H9: waits until no shared call of another process runs (those of this
 * process are ordered by its own locks, as its calls under the turn are).
 * Shared calls are short (a stat, an lseek, a read), so a few pauses
 * usually do; then it sleeps on the count, which the last one out wakes. */
static void readers_drain(struct pool_share *s)
{
	struct share_file *f = s->f;
	/* no fence needed: the turn's compare-and-swap and these loads are
	 * all seq_cst, so they are ordered against the readers' add-then-load */
	uint32_t n = __atomic_load_n(&f->nslots, __ATOMIC_ACQUIRE);
	for (uint32_t k = 0; k < n && k < SHARE_PROCS; k++) {
		uint32_t *r = &f->reading[k].n;
		for (unsigned waits = 0;; waits++) {
			uint32_t c = __atomic_load_n(r, __ATOMIC_SEQ_CST);
			if (!c || (int)k == s->slot)
				break;
			if (waits < 100) {
				__builtin_ia32_pause();
				continue;
			}
			__atomic_add_fetch(&f->rwait, 1, __ATOMIC_SEQ_CST);
			long rc = share_futex(r, FUTEX_WAIT, c, &(struct timespec){0, 2000000});
			int timed_out = rc == -1 && errno == ETIMEDOUT;
			__atomic_sub_fetch(&f->rwait, 1, __ATOMIC_SEQ_CST);
			if (timed_out && reader_gone(f, (int)k))
				__atomic_compare_exchange_n(r, &c, 0, 0, __ATOMIC_SEQ_CST,
							    __ATOMIC_SEQ_CST);
		}
	}
}

int share_turn_take(struct pool_share *s, int why)
{
	why = turn_count_in(s, why);
	readers_drain(s);
	return why;
}

static void reading_out(struct pool_share *s)
{
	uint32_t *r = &s->f->reading[s->slot].n;
	if (__atomic_sub_fetch(r, 1, __ATOMIC_SEQ_CST) == 0 &&
	    __atomic_load_n(&s->f->rwait, __ATOMIC_SEQ_CST))
		share_futex(r, FUTEX_WAKE, INT_MAX, NULL);
}

int share_enter_shared(struct pool_share *s)
{
	if (!s || s->slot < 0 || s->forked || __atomic_load_n(&s->pending_why, __ATOMIC_ACQUIRE) ||
	    __atomic_load_n(&share_forking, __ATOMIC_ACQUIRE))
		return 0;
	struct share_file *f = s->f;
	__atomic_add_fetch(&f->reading[s->slot].n, 1, __ATOMIC_SEQ_CST);
	uint32_t v = __atomic_load_n(&f->turn, __ATOMIC_SEQ_CST);
	/* not while this process's taker catches up (TURN_INSIDE), nor while
	 * a dead holder's log waits for its replay: the pool is half changed */
	if ((TURN_CALLS(v) == 0 || TURN_PID(v) == s->pid) && TURN_CALLS(v) != TURN_INSIDE &&
	    !__atomic_load_n(&f->dead_pending, __ATOMIC_SEQ_CST) &&
	    !__atomic_load_n(&share_forking, __ATOMIC_SEQ_CST) &&
	    !__atomic_load_n(&s->catching_up, __ATOMIC_SEQ_CST) &&
	    __atomic_load_n(&s->wseen, __ATOMIC_ACQUIRE) ==
		__atomic_load_n(&f->wseq, __ATOMIC_ACQUIRE))
		return 1;
	reading_out(s);
	return 0;
}

void share_leave_shared(struct pool_share *s)
{
	reading_out(s);
}

void share_leave(struct pool_share *s)
{
	if (!s)
		return;
	if (__atomic_load_n(&s->nested, __ATOMIC_RELAXED)) { /* uncounted (inside_taker) */
		__atomic_sub_fetch(&s->nested, 1, __ATOMIC_RELAXED);
		return;
	}
	uint32_t v = __atomic_sub_fetch(&s->f->turn, 1, __ATOMIC_SEQ_CST);
	if (TURN_CALLS(v) == 0 && __atomic_load_n(&s->f->waiters, __ATOMIC_SEQ_CST))
		share_futex(&s->f->turn, FUTEX_WAKE, INT_MAX, NULL);
}
