/*
 * compact.c -- when compaction runs for a mounted pool (the moves themselves
 * are the space layer's, space/compact.c).
 *
 * The space layer asks for it when a 2 MiB unit was wanted and none was free
 * although the pool has room; it runs at the start of the next library call
 * made while no other thread is inside one (space C3). This file adds the
 * other half of C3: no program mapping of a file in this process (the
 * shim's mmap maps pool pages themselves, which must not move), checked and
 * kept so under mm_lock. A request empties the few cheapest units (one walk
 * of the tables picks them all, one more collects the pages of all), in
 * batches of one transaction each: a pool that has run out of free units
 * then has some for the windows that come next, not one at a time, each
 * costing a walk. A pass that finds no unit backs off exponentially.
 * The collector of pre-allocated pages lives here too (pmfs_reclaim): a call
 * refused for want of space while windows hold reserved, unwritten pages,
 * or null files and empty files hold theirs (nullfile.c N2), gets them back
 * in transactions of their own and is tried again.
 * Crash argument: each batch is one logged transaction (space/compact.c);
 * so is each round of the collector, whose pages are released at its commit
 * (window.c W2), before any call can write them.
 */
#include <errno.h>
#include <stdlib.h>

#include "fs/fs.h"

/* A unit holding more file pages than this is not worth emptying at once:
 * the copy would cost more than the page-by-page window it saves. */
#define COMPACT_MAX_USED 384

static void backoff(struct space *sp, int found)
{
	if (found) {
		sp->compact_backoff = 0;
		return;
	}
	sp->compact_backoff = sp->compact_backoff ? FR_MIN(sp->compact_backoff * 2, 4096) : 8;
	sp->compact_skip = sp->compact_backoff;
}

void fs_compact_quiet(void *arg)
{
	ferrite_fs *fs = arg;
	struct space *sp = &fs->m.sp;
	struct sp_compaction *c = calloc(1, sizeof(*c));
	if (!c || !mm_lock_if_unmapped(fs)) {
		/* a program maps a file: asked for again only after a while */
		backoff(sp, 0);
		free(c);
		return;
	}
	uint64_t moved = 0;
	unsigned done = 0;
	int picked = 0;
	for (int batch = 0; batch < SP_COMPACT_UNITS * (512 / SP_COMPACT_BATCH + 1); batch++) {
		struct log_ctx *lc = op_begin(fs);
		if (!lc)
			break;
		if (!picked) {
			picked = 1;
			backoff(sp, sp_compact_pick(lc->tx, COMPACT_MAX_USED, c) != 0);
		}
		/* 0 moved may still have dropped a unit's reservation: committed */
		int rc = c->nunits ? sp_compact_move(lc->tx, c, SP_COMPACT_BATCH) : 0;
		if (rc < 0)
			tx_abort(lc->tx);
		else if (op_commit(fs, lc) < 0)
			rc = -1;
		op_end(fs, lc);
		if (rc < 0)
			break;
		moved += (uint64_t)rc;
		done = sp_compact_done(c);
		if (done || !c->nunits)
			break;
	}
	sp->stat_compactions += sp_compact_emptied(c);
	sp->stat_compacted_pages += moved;
	mm_unlock(fs);
	free(c);
	fr_err_clear(); /* a refused batch is not the caller's error */
}

/* Pages one round of the collector gives back at most: a round is one
 * transaction and walks every table. */
#define RECLAIM_ROUND_PAGES 16384

int pmfs_reclaim(ferrite_fs *fs)
{
	if (!fs)
		return 0;
	uint64_t got = null_collect(fs); /* nullfile.c N2 */
	for (; fs->m.sp.reserve_windows;) {
		struct log_ctx *lc = op_begin(fs);
		if (!lc)
			break;
		uint64_t n = part_gc_reservations(lc->tx, RECLAIM_ROUND_PAGES);
		if (!n) {
			tx_abort(lc->tx);
			op_end(fs, lc);
			break;
		}
		int rc = op_commit(fs, lc);
		op_end(fs, lc);
		if (rc)
			break;
		got += n;
	}
	if (got)
		fr_err_clear(); /* the call is tried again: its message is stale */
	return got != 0;
}
