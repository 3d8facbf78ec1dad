/*
 * fuse_frees.c -- space that requests in flight are giving back: a call the
 * pool refuses for want of space waits for them and is tried again, so a
 * mount reports ENOSPC only when the pool is full.
 *
 * Why: the kernel tells the daemon that a file is gone after the fact. An
 * unlinked file keeps its space while the kernel still holds its node (the
 * node's O_PATH descriptor, fuse_nodes.c F2) or an open handle; the FORGET
 * or RELEASE that lets go is queued by the kernel before the unlink or close
 * returns to the program, but another daemon thread may serve the program's
 * next write before that request has been carried out. `rm big; cp new .`
 * on a full mount then failed with ENOSPC.
 *
 * Invariants: G1 pending counts the FORGET, BATCH_FORGET, RELEASE and
 *               RELEASEDIR requests read from /dev/fuse (fuse_wire.c, at the
 *               read itself, so no window is left between the kernel handing
 *               one over and the daemon counting it) whose handler has not
 *               finished, and the releases whose space comes back only at
 *               their node's forget (fuse_nodes.c F3: between the release's
 *               reply and the kernel's forget nothing would be counted);
 *               finished counts those done;
 *             G2 a call that failed with -ENOSPC is tried again only if a
 *               count was finished since it last started (its space may be
 *               back), and at most FREES_MAX_TRIES times (a mount busy with
 *               closes cannot keep a call on a full pool going round); it
 *               waits for the pending ones first, at most FREES_WAIT_MS at a
 *               time, so a request libfuse read but never handed to a
 *               handler costs a refused call that long, never a hang.
 * Crash argument: nothing here is persistent.
 * Locking: one mutex and condition variable; a waiter holds no library
 *   lock (its call has returned), so the handler it waits for can finish.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "fuse/fuse_front.h"

#define FREES_WAIT_MS	2000
#define FREES_MAX_TRIES 8

int frees_init(struct ffront *ff)
{
	pthread_condattr_t ca;
	if (pthread_condattr_init(&ca) != 0)
		return -ENOMEM;
	int rc = pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	if (!rc)
		rc = pthread_cond_init(&ff->frees_cv, &ca);
	pthread_condattr_destroy(&ca);
	if (rc)
		return -rc;
	rc = pthread_mutex_init(&ff->frees_lock, NULL);
	if (rc) {
		pthread_cond_destroy(&ff->frees_cv);
		return -rc;
	}
	/* a test knob: handlers take this long before they let go, so a test
	 * can show that a refused call waits for them */
	const char *e = getenv("FERRITE_TEST_SLOW_FREES_MS");
	ff->frees_slow_ms = e ? atoi(e) : 0;
	return 0;
}

void frees_fini(struct ffront *ff)
{
	pthread_cond_destroy(&ff->frees_cv);
	pthread_mutex_destroy(&ff->frees_lock);
}

void frees_started(struct ffront *ff)
{
	pthread_mutex_lock(&ff->frees_lock);
	ff->frees_pending++;
	pthread_mutex_unlock(&ff->frees_lock);
}

void frees_slow(const struct ffront *ff)
{
	if (ff->frees_slow_ms > 0)
		usleep((useconds_t)ff->frees_slow_ms * 1000);
}

void frees_done(struct ffront *ff)
{
	pthread_mutex_lock(&ff->frees_lock);
	if (ff->frees_pending) /* G2: a count lost on the way is never negative */
		ff->frees_pending--;
	ff->frees_finished++;
	pthread_cond_broadcast(&ff->frees_cv);
	pthread_mutex_unlock(&ff->frees_lock);
}

struct frees_mark frees_mark(struct ffront *ff)
{
	pthread_mutex_lock(&ff->frees_lock);
	struct frees_mark m = {ff->frees_finished, 0};
	pthread_mutex_unlock(&ff->frees_lock);
	return m;
}

int frees_settle(struct ffront *ff, struct frees_mark *m)
{
	struct timespec until;
	clock_gettime(CLOCK_MONOTONIC, &until);
	until.tv_sec += FREES_WAIT_MS / 1000;
	until.tv_nsec += (long)(FREES_WAIT_MS % 1000) * 1000000L;
	if (until.tv_nsec >= 1000000000L) {
		until.tv_sec++;
		until.tv_nsec -= 1000000000L;
	}
	pthread_mutex_lock(&ff->frees_lock);
	while (ff->frees_pending &&
	       pthread_cond_timedwait(&ff->frees_cv, &ff->frees_lock, &until) != ETIMEDOUT)
		;
	int again = ff->frees_finished != m->seen && m->tries < FREES_MAX_TRIES;
	m->seen = ff->frees_finished;
	m->tries++;
	pthread_mutex_unlock(&ff->frees_lock);
	return again;
}
