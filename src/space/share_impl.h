/*
 * share_impl.h -- the coordination file's layout and a process's attachment
 * to it, for share.c (the turn, slots, inode holders) and share_desc.c (open
 * file descriptions that processes share). Invariants and validation:
 * share.c. Nothing persistent.
 */
#ifndef FERRITE_SHARE_IMPL_H
#define FERRITE_SHARE_IMPL_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "space/space.h"

#define SHARE_MAGIC   0x4552414853524646ULL /* "FFRSHARE" */
#define SHARE_VERSION 10
#define SHARE_INOS    (1u << 16) /* inodes open or mapped at once, all processes */
#define SHARE_WRING   4096	 /* window changes a process may fall behind by */

#define TURN_SHIFT    10
#define TURN_INSIDE   ((1u << TURN_SHIFT) - 1)
#define TURN_PID(v)   ((v) >> TURN_SHIFT)
#define TURN_CALLS(v) ((v)&TURN_INSIDE)

#define SHARE_PROCS	128 /* processes with the pool open at once */
#define SHARE_WAITERS	128 /* threads seen waiting for the turn at once */
#define PROC_WORDS	(SHARE_PROCS / 64)
#define SHARE_DESCS	4096	   /* descriptions shared by processes at once */
#define FORKLING_TAKING UINT32_MAX /* the child is taking its reserved slot over */

struct share_ino {
	uint64_t ino;		   /* 0: empty */
	uint64_t open[PROC_WORDS]; /* bit i: process slot i has a vnode of it */
	uint64_t map[PROC_WORDS];  /* bit i: process slot i maps it */
};

/* A slot is free (pid and forkling 0), reserved by a parent for the child
 * it is forking (forkling: the parent's pid), or a process's. */
struct share_proc {
	uint32_t pid;  /* 0: free or reserved */
	uint32_t held; /* bits this slot has set in the inode table */
	uint64_t start;
	uint32_t descs;	      /* descriptions it holds (share_desc.c) */
	uint32_t forkling;    /* reserved for a child of this pid; cleared by the child */
	uint64_t reserved_at; /* CLOCK_MONOTONIC ns of the reservation */
};

struct share_file {
	uint64_t magic;
	uint64_t version;
	uint64_t pool_dev, pool_ino;
	uint64_t size;
	uint32_t turn;	       /* futex word: holder pid << TURN_SHIFT | calls inside */
	uint32_t waiters;      /* entries set in waiting (H7) */
	uint32_t dead_pending; /* a holder died inside a call; log not replayed yet (H3) */
	uint32_t spare;
	/* who took the turn last: pid << 32 | its start time's low 32 bits,
	 * one word, so that a waiter never reads one holder's pid with
	 * another's start time (H3) */
	uint64_t holder;
	uint64_t holder_since; /* CLOCK_MONOTONIC ns it took the turn (its quantum) */
	uint32_t nino, live;
	uint64_t nmaps;	 /* map bits set in the inode table */
	uint64_t wseq;	 /* window changes noted so far (H2) */
	uint32_t rwait;	 /* exclusive calls waiting for shared ones to end (H9) */
	uint32_t nslots; /* slots ever used: shared calls run only in these */
	/* per slot, that process's threads inside a shared call (H9); a
	 * cache line each, as every shared call changes its own */
	struct {
		uint32_t n;
		uint32_t pad[15];
	} reading[SHARE_PROCS] __attribute__((aligned(64)));
	struct {
		uint64_t w, n;
	} wring[SHARE_WRING];
	/* who waits for the turn: pid << 32 | its start time's low 32 bits */
	uint64_t waiting[SHARE_WAITERS];
	struct share_proc procs[SHARE_PROCS];
	struct share_desc desc[SHARE_DESCS];
	struct share_ino ino[];
};

struct pool_share {
	struct share_file *f;
	size_t len;
	uint32_t pid; /* of the process that attached, or of a forked child */
	uint64_t start;
	uint64_t dev, ino;
	int slot;	   /* in f->procs, -1 until the first call */
	uint32_t prev;	   /* the pid turn_take took the turn from, 0 none */
	uint64_t wseen;	   /* window changes this process has dropped (H2) */
	int catching_up;   /* dropping windows: no shared call may start (H9) */
	int forked;	   /* a forked child that has not entered yet */
	int has_forked;	   /* this process forked while attached (share_detach) */
	int nested;	   /* calls inside the turn's taker's, uncounted (share_turn.c) */
	uint32_t attacher; /* the process that attached (not a forked child) */
	/* the first process's descriptor of the coordination file, flocked
	 * until it has recovered the pool (H5, share_attach_done); else -1 */
	int attach_fd;
	uint64_t file_ino; /* of the coordination file */
	char name[112];	   /* and its path */
	/* the threads of this process change the tables one at a time (the
	 * turn only keeps other processes out); a leaf lock */
	pthread_mutex_t tab_lock;
	int child_slot;	 /* reserved for the child being forked, -1 none */
	int pending_why; /* share_enter results the fork's reservation took */
	void (*fork_hook)(void *arg, int child_slot);
	void *fork_arg;
	struct pool_share *next;
};

/* share.c: the few things the turn (share_turn.c) needs of it */
long share_futex(uint32_t *w, int op, uint32_t val, const struct timespec *ts);
/* Start time of pid in clock ticks, 0 if it is gone or a zombie. */
uint64_t share_proc_start(uint32_t pid);
/* 1: pid runs (*start set), 0: it is gone or a zombie, -1: cannot tell
 * (no descriptor to read /proc with, say) -- never "gone" then, as what
 * follows from it (taking a turn over, giving a slot back) would break a
 * live process. */
int share_proc_state(uint32_t pid, uint64_t *start);
/* Whether the process (pid, start) is surely gone. A start of 0 was not
 * known when it was recorded (no /proc entry readable then): only a pid
 * that is gone says so. */
static inline int share_proc_gone(uint32_t pid, uint64_t start)
{
	uint64_t now;
	int r = share_proc_state(pid, &now);
	return r == 0 || (r > 0 && start && now != start);
}
/* fork: set while a thread of this process prepares one (share.c) */
extern int share_forking;
extern __thread int share_fork_thread;

/* share_turn.c */
uint64_t share_now_ns(void); /* CLOCK_MONOTONIC */
/* Counts the calling thread in the turn, for this process, and waits until
 * no shared call runs (H1-H3, H8, H9); returns why with SHARE_* bits added. */
int share_turn_take(struct pool_share *s, int why);
/* Leaves a turn share_turn_take returned, caught up or not (H2, H3). */
void share_turn_release(struct pool_share *s);

/* share.c, under the turn and tab_lock: gives slot k back if its process is
 * gone (the next call releases what only it held); 1 if it did. */
int slot_reap_if_gone(struct pool_share *s, int k);

/* share_desc.c */
int share_holders(const uint64_t words[PROC_WORDS]);
/* Under tab_lock: slot k is given back, it holds no description any more. */
void desc_reap_slot(struct share_file *f, int k);

#endif
