/*
 * compact.c -- online compaction (issue 15): empties a 2 MiB unit by moving
 * the file pages it holds elsewhere, so that a pool whose free pages are
 * scattered gives a large window a whole unit again (huge windows: one
 * mapping, no page table walk per page).
 *
 * Files are addressed through the PPT, so a file page can move without the
 * file noticing: the page is copied to a fresh page and its page table entry
 * names the copy (part_swap_pages, the strict-mode write-and-swap step).
 *
 * Invariants: C1 only pages named by a page table entry of a window move
 *               (a large window's table, or a small-partition window's but
 *               not its header page): metadata blocks, tables and directory
 *               pages stay where they are, and a unit holding any of them is
 *               never chosen -- a unit is a candidate only when every page in
 *               use in it is such a page, or an unwritten page of the
 *               reservation whose home it is (dropped first, as the
 *               collector would: W1 then no longer ties the window's pages
 *               to the unit);
 *             C2 while a unit is emptied, its free pages are claimed in the
 *               same transaction, so no copy lands inside it; they are given
 *               back before the commit, which also frees the moved pages:
 *               after the last batch the unit is one free block. The other
 *               picked units' free pages (those emptied already first) are
 *               claimed too while the pool keeps room for the batch's
 *               copies; a copy that lands in a later one anyway spoils it
 *               (skipped: its page list no longer names them all);
 *             C3 compaction runs only where nothing else can touch a file
 *               page: at the start of a library call made while no other
 *               thread is inside one (vspace.c quiet work), with no program
 *               mapping of a file in the process (the caller checks) -- so
 *               no store can land in a page between its copy and its swap.
 *               On a pool shared by processes, the turn makes the moment
 *               every process's, and compaction waits while any process
 *               maps a file (fs/compact.c, share_any_maps).
 * Cost: a pick reads the allocator's bitmaps and every window's page table,
 *   so it is asked for only when a unit is wanted and none is free while the
 *   pool has room (or, buddy.c, when fewer than four are left), and backs
 *   off (fs/compact.c) when it finds nothing. It picks up to
 *   SP_COMPACT_UNITS units at once, and one more walk collects the pages of
 *   all of them: an aged pool's appends once paid a walk per batch of 32
 *   pages, and another pick for every unit they needed.
 * Crash argument: the copies are written to pages unreachable until the
 *   transaction commits and fenced before its log entry (tx_mark_fresh);
 *   entries, allocator words and releases change only in the transaction. A
 *   crash before the commit leaves the old pages named; after it, the
 *   copies. A unit emptied in several transactions is consistent after each.
 * Locking: sp->alloc_lock (taken by the transaction before any table is read).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "persist/pm.h"
#include "space/space.h"

/* First movable entry of a table (a header table's page 0 is the table). */
static unsigned first_movable(struct tx *tx, struct sp_ptable *pt)
{
	return (tx_get4(tx, &pt->pt_flags) & PT_F_HEADER) ? 1 : 0;
}

/* Per unit: pages that can leave it (C1) -- named by a movable entry
 * (moved: the cost), or reserved and unwritten (given back at no cost when
 * the reservation is dropped). */
struct census {
	struct tx *tx;
	uint16_t *cost, *leave;
};

static int count_unit(void *arg, uint64_t vw, struct sp_ptable *pt)
{
	(void)vw;
	struct census *c = arg;
	struct space *sp = c->tx->sp;
	uint64_t home;
	int reserved = part_reserved_home(c->tx, pt, &home);
	unsigned named = 0;
	for (unsigned o = first_movable(c->tx, pt); o < 512; o++) {
		uint64_t pg = tx_get4(c->tx, &pt->pt_pte[o]);
		if (!pg || !sp_page_ok(sp, pg))
			continue;
		uint64_t u = (pg - sp->data_page) >> 9;
		named++;
		if (c->leave[u] < 512) {
			c->cost[u]++;
			c->leave[u]++;
		}
	}
	if (reserved) {
		uint64_t u = (home - sp->data_page) >> 9;
		c->leave[u] = (uint16_t)FR_MIN(512u, c->leave[u] + (512u - FR_MIN(named, 512u)));
	}
	return 0;
}

/* Free pages in each unit, from the allocator's bitmaps (B1), read in
 * place: the pick runs first in its transaction, which has staged nothing,
 * and the allocator lock keeps everyone else's out until they are retired. */
static void free_per_unit(struct tx *tx, uint16_t *free_of)
{
	struct space *sp = tx->sp;
	uint64_t npages = sp->data_end_page - sp->data_page;
	for (int k = 0; k < BUD_ORDERS; k++) {
		uint64_t nblocks = npages >> k;
		for (uint64_t w = 0; w < (nblocks + 63) / 64 && w < sp->nwords[k]; w++) {
			uint64_t bits = sp->bitmap[k][w];
			while (bits) {
				uint64_t b = w * 64 + (uint64_t)__builtin_ctzll(bits);
				bits &= bits - 1;
				if (b < nblocks)
					free_of[(b << k) >> 9] += (uint16_t)(1u << k);
			}
		}
	}
}

/* A unit reserved lately by a window still being written (space.h). */
static int recent_home(const struct space *sp, uint64_t unit)
{
	for (unsigned i = 0; i < SP_RECENT_HOMES; i++)
		if (sp->recent_homes[i] == unit)
			return 1;
	return 0;
}

/* Keeps the n cheapest candidates seen, cheapest first. */
static void keep_cheapest(struct sp_compaction *c, uint16_t *costs, unsigned n, uint64_t unit,
			  uint16_t cost)
{
	unsigned i = c->nunits < n ? c->nunits++ : n;
	if (i == n && cost >= costs[n - 1])
		return;
	if (i == n)
		i = n - 1;
	while (i > 0 && costs[i - 1] > cost) {
		costs[i] = costs[i - 1];
		c->units[i] = c->units[i - 1];
		i--;
	}
	costs[i] = cost;
	c->units[i] = unit;
}

unsigned sp_compact_pick(struct tx *tx, unsigned max_used, struct sp_compaction *out)
{
	struct space *sp = tx->sp;
	memset(out, 0, sizeof(*out));
	tx_lock_alloc(tx);
	if (!tx_empty(tx))
		return 0; /* free_per_unit reads the bitmaps in place */
	uint64_t nunits = (sp->data_end_page - sp->data_page) >> 9;
	uint16_t *free_of = calloc(nunits ? nunits : 1, sizeof(uint16_t));
	struct census c = {tx, calloc(nunits ? nunits : 1, sizeof(uint16_t)),
			   calloc(nunits ? nunits : 1, sizeof(uint16_t))};
	uint16_t costs[SP_COMPACT_UNITS];
	if (free_of && c.cost && c.leave) {
		free_per_unit(tx, free_of);
		ppt_each_table(tx, count_unit, &c);
		for (uint64_t u = 0; u < nunits; u++) {
			unsigned used = 512u - FR_MIN(free_of[u], 512u);
			if (used && c.cost[u] <= max_used && c.leave[u] == used &&
			    !recent_home(sp, sp->data_page + (u << 9)))
				keep_cheapest(out, costs, SP_COMPACT_UNITS,
					      sp->data_page + (u << 9), c.cost[u]);
		}
	}
	free(free_of);
	free(c.cost);
	free(c.leave);
	return out->nunits;
}

/* Collects the pages of the picked units that entries name, in one walk:
 * a reserved window whose home is a picked unit is noted, its reservation
 * dropped when that unit's turn comes (a transaction drops one, so that it
 * fits in a log entry), and its named pages are the unit's to move. */
static int collect(void *arg, uint64_t vw, struct sp_ptable *pt)
{
	struct sp_compaction *c = arg;
	struct space *sp = c->tx->sp;
	uint64_t home;
	int reserved = part_reserved_home(c->tx, pt, &home);
	if (!reserved && (tx_get4(c->tx, &pt->pt_flags) & PT_F_RESERVED))
		return 0; /* damaged: left alone */
	if (reserved) {
		unsigned i = 0;
		while (i < c->nunits && c->units[i] != home)
			i++;
		if (i == c->nunits)
			return 0; /* W1: its pages are its home's, not a picked unit's */
		c->home_vw[i] = vw;
		c->has_home[i] = 1;
	}
	for (unsigned o = first_movable(c->tx, pt); o < 512; o++) {
		uint64_t pg = tx_get4(c->tx, &pt->pt_pte[o]);
		if (!sp_page_ok(sp, pg))
			continue;
		for (unsigned i = 0; i < c->nunits; i++)
			if (pg >= c->units[i] && pg < c->units[i] + 512 && c->n[i] < 512) {
				c->v[i][c->n[i]++] = vw + ((uint64_t)o << FR_PAGE_SHIFT);
				break;
			}
	}
	return 0;
}

/* Claims every free block of the unit (C2); returns how many were claimed. */
static unsigned claim_free(struct tx *tx, uint64_t unit, uint64_t *blk, int *ord)
{
	unsigned n = 0;
	for (uint64_t o = 0; o < 512;) {
		int k = bud_free_order(tx->sp, tx, unit + o);
		if (k < 0) {
			o++;
			continue;
		}
		uint64_t head = (unit + o - tx->sp->data_page) & ~((1ULL << k) - 1);
		head += tx->sp->data_page;
		if (bud_alloc_at(tx, head, k) < 0)
			break;
		blk[n] = head;
		ord[n++] = k;
		o = head + (1ULL << k) - unit;
	}
	return n;
}

/* Whether unit i still has work: not spoiled, and pages or a reservation
 * left (next counts only for the current unit). */
static int unit_left(const struct sp_compaction *c, unsigned i)
{
	if (c->spoiled[i])
		return 0;
	return (i == c->cur ? c->next : 0) < c->n[i] || (c->has_home[i] && !c->dropped[i]);
}

/* Claims the free blocks of the current unit (C2), then those of the units
 * this request emptied already and of the later ones while the pool keeps
 * room for this batch's copies: a copy landing in an emptied unit would fill
 * it again, one landing in a later unit would spoil it (it is then skipped,
 * not emptied). */
static unsigned claim_units(struct tx *tx, struct sp_compaction *c, unsigned max, uint64_t *blk,
			    int *ord)
{
	struct space *sp = tx->sp;
	unsigned n = claim_free(tx, c->units[c->cur], blk, ord);
	for (unsigned i = 0; i < c->nunits; i++) {
		if (i == c->cur || c->spoiled[i])
			continue;
		unsigned got = claim_free(tx, c->units[i], blk + n, ord + n);
		/* room for max copies, each perhaps with a new table page */
		if (tx_get8(tx, &sp->hdr->sph_free_pages) < 2ULL * max + 64) {
			for (unsigned k = n; k < n + got; k++)
				bud_release_unused(tx, blk[k], ord[k]);
			break;
		}
		n += got;
	}
	return n;
}

int sp_compact_move(struct tx *tx, struct sp_compaction *c, unsigned max)
{
	struct space *sp = tx->sp;
	tx_lock_alloc(tx);
	for (unsigned i = c->cur; i < c->nunits; i++) {
		uint64_t u = c->units[i];
		if (u < sp->data_page || u + 512 > sp->data_end_page || ((u - sp->data_page) & 511))
			return -EINVAL;
	}
	if (!c->collected) {
		c->tx = tx;
		ppt_each_table(tx, collect, c);
		c->tx = NULL;
		c->collected = 1;
	}
	while (c->cur < c->nunits && !unit_left(c, c->cur)) {
		c->cur++; /* emptied (its last pages leave at the commit) or spoiled */
		c->next = 0;
	}
	if (c->cur >= c->nunits)
		return 0;
	if (c->has_home[c->cur] && !c->dropped[c->cur]) {
		/* its unwritten pages leave, and its written ones can move (W1) */
		part_drop_reservation(tx, c->home_vw[c->cur]);
		c->dropped[c->cur] = 1;
	}
	max = FR_MIN(max, SP_COMPACT_BATCH);
	uint64_t *blk = calloc(SP_COMPACT_UNITS * 512, sizeof(uint64_t));
	int *ord = calloc(SP_COMPACT_UNITS * 512, sizeof(int));
	int rc = -ENOMEM;
	if (!blk || !ord)
		goto out;
	rc = 0;
	unsigned nclaimed = claim_units(tx, c, max, blk, ord), moved = 0;
	uint64_t unit = c->units[c->cur];
	for (; c->next < c->n[c->cur] && moved < max && !rc; c->next++) {
		uint64_t v = c->v[c->cur][c->next];
		uint64_t old = ppt_page_tx(tx, v) >> FR_PAGE_SHIFT, fresh;
		if (old < unit || old >= unit + 512)
			continue; /* moved already (the moment is quiet: nothing else) */
		rc = part_swap_pages(tx, v, 1, &fresh);
		if (!rc && fresh >= unit && fresh < unit + 512)
			rc = tx_damaged(tx, "compaction: a copy landed in the unit it empties");
		for (unsigned i = c->cur + 1; i < c->nunits && !rc; i++)
			if (fresh >= c->units[i] && fresh < c->units[i] + 512)
				c->spoiled[i] = 1;
		if (!rc) {
			pm_copy_nt(sp_ptr(sp, fresh << FR_PAGE_SHIFT),
				   sp_ptr(sp, old << FR_PAGE_SHIFT), FR_PAGE_SIZE);
			moved++;
		}
	}
	tx_mark_fresh(tx);
	for (unsigned i = 0; i < nclaimed; i++)
		bud_release_unused(tx, blk[i], ord[i]);
	if (!rc)
		rc = (int)moved;
out:
	free(blk);
	free(ord);
	return rc;
}

unsigned sp_compact_done(const struct sp_compaction *c)
{
	if (!c->collected)
		return 0;
	for (unsigned i = c->cur; i < c->nunits; i++)
		if (unit_left(c, i))
			return 0;
	return 1;
}

unsigned sp_compact_emptied(const struct sp_compaction *c)
{
	unsigned n = 0, end = sp_compact_done(c) ? c->nunits : c->cur;
	for (unsigned i = 0; i < end; i++)
		n += !c->spoiled[i];
	return n;
}
