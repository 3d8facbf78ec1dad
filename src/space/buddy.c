/*
 * buddy.c -- physical page allocator (SPFS 4.1): power-of-two runs of 4 KiB
 * pages up to 2 MiB (order 9); larger needs are met with several 2 MiB units.
 * Format: sp_header bitmaps (space_format.h).
 *
 * Invariants: B1 bit i of order k is set iff a free block of 2^k pages starts
 *               at relative page i << k; free blocks never overlap and two
 *               free buddies of order k < 9 are always merged;
 *             B2 summary bit w of order k is set iff bitmap word w is non-zero;
 *             B3 sph_free_pages equals the pages covered by free blocks.
 * Validation: bitmaps come from PM. A free bit past the end of the data area
 *   fails the allocation (-EUCLEAN); a release of a block outside the data
 *   area, misaligned for its order, or overlapping a free block (a page table
 *   or inode naming pages twice) marks the transaction damaged (tx_damaged),
 *   so a double free never reaches the bitmaps.
 * Crash argument: every bitmap, summary and counter word is changed only
 *   through the caller's transaction (tx_set8), so an allocation or free is
 *   applied together with the PPT or metadata change that uses it, or not at
 *   all. The caller holds the allocator lock until the transaction retires.
 * Locking: sp->alloc_lock (tx_lock_alloc), see docs/contracts.md#lock-order.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "persist/pm.h"
#include "space/space.h"

static inline uint64_t *word_ptr(struct space *sp, int k, uint64_t w)
{
	return &sp->bitmap[k][w];
}

static int test_bit(struct tx *tx, int k, uint64_t idx)
{
	struct space *sp = tx->sp;
	if (idx >= (sp->data_end_page - sp->data_page) >> k)
		return 0;
	return (tx_get8(tx, word_ptr(sp, k, idx >> 6)) >> (idx & 63)) & 1;
}

static void change_bit(struct tx *tx, int k, uint64_t idx, int set)
{
	struct space *sp = tx->sp;
	uint64_t w = idx >> 6;
	uint64_t old = tx_get8(tx, word_ptr(sp, k, w));
	uint64_t nw = set ? old | (1ULL << (idx & 63)) : old & ~(1ULL << (idx & 63));
	tx_set8(tx, word_ptr(sp, k, w), nw);
	if ((old == 0) != (nw == 0)) {
		uint64_t *s = &sp->summary[k][w >> 6];
		uint64_t sv = tx_get8(tx, s);
		sv = nw ? sv | (1ULL << (w & 63)) : sv & ~(1ULL << (w & 63));
		tx_set8(tx, s, sv);
	}
}

static void add_free(struct tx *tx, int64_t delta)
{
	struct sp_header *h = tx->sp->hdr;
	tx_set8(tx, &h->sph_free_pages, tx_get8(tx, &h->sph_free_pages) + (uint64_t)delta);
}

/* First free block head of order k (relative block index) or -1. */
static int64_t bud_alloc_free(struct tx *tx, int order);

static int64_t find_free(struct tx *tx, int k)
{
	struct space *sp = tx->sp;
	uint64_t ns = sp->nsumwords[k];
	uint64_t start = sp->hint[k] < ns ? sp->hint[k] : 0;
	for (uint64_t i = 0; i < ns; i++) {
		uint64_t s = (start + i) % ns;
		uint64_t sv = tx_get8(tx, &sp->summary[k][s]);
		while (sv) {
			uint64_t w = s * 64 + (uint64_t)__builtin_ctzll(sv);
			uint64_t bv = tx_get8(tx, word_ptr(sp, k, w));
			if (bv) {
				sp->hint[k] = s;
				return (int64_t)(w * 64 + (uint64_t)__builtin_ctzll(bv));
			}
			sv &= sv - 1; /* stale summary bit: cannot happen (B2) */
		}
	}
	return -1;
}

/* Free units left, below which compaction is asked for before one is
 * missing (a hint: the bitmap read in place, without the transaction's
 * staged changes). */
#define COMPACT_LOW_UNITS 4

static uint64_t free_units(struct space *sp)
{
	uint64_t n = 0;
	for (uint64_t w = 0; w < sp->nwords[BUD_TOP_ORDER] && n < COMPACT_LOW_UNITS; w++)
		n += (uint64_t)__builtin_popcountll(
		    __atomic_load_n(word_ptr(sp, BUD_TOP_ORDER, w), __ATOMIC_RELAXED));
	return n;
}

int64_t bud_alloc(struct tx *tx, int order)
{
	tx_lock_alloc(tx);
	struct space *sp = tx->sp;
	int64_t b = bud_alloc_free(tx, order);
	/* Pre-allocation never makes a pool full (SCMFS): a call refused here
	 * while windows hold reserved pages gets them back in a transaction of
	 * its own and is tried again (pmfs_reclaim, as ext4 retries after a
	 * journal commit). Not here: this transaction may have stored into
	 * pages it allocated, and a reserved page must not be written before
	 * the commit that releases it (window.c W2). */
	/* No whole unit although the pool has room: compaction can make one
	 * (compact.c), at the next quiet moment; this caller backs its window
	 * page by page meanwhile. Asked for a little early, too (as the
	 * kernel's proactive compaction): when the last few units go while
	 * scattered pages would make more, so that the windows that come next
	 * find one and are not backed page by page in the meantime. */
	if (order == BUD_TOP_ORDER && sp->compact_fn && (b == -ENOSPC || b >= 0)) {
		uint64_t units = b >= 0 ? free_units(sp) : 0;
		uint64_t room = tx_get8(tx, &sp->hdr->sph_free_pages) +
				tx_get8(tx, &sp->hdr->sph_prealloc_pages);
		if (units < COMPACT_LOW_UNITS && room >= (units + 2) * 512) {
			if (sp->compact_skip)
				sp->compact_skip--;
			else
				vs_want_quiet(sp, &sp->want_compact);
		}
	}
	return b;
}

static int64_t bud_alloc_free(struct tx *tx, int order)
{
	struct space *sp = tx->sp;
	for (int j = order; j < BUD_ORDERS; j++) {
		int64_t b = find_free(tx, j);
		if (b < 0)
			continue;
		uint64_t rel = (uint64_t)b << j;
		if (rel + (1ULL << j) > sp->data_end_page - sp->data_page)
			return tx_damaged(tx,
					  "allocator bitmap of order %d damaged: free block %lld "
					  "lies past the end of the pool",
					  j, (long long)b);
		change_bit(tx, j, (uint64_t)b, 0);
		/* A unit split for small blocks (metadata pool blocks, page
		 * tables, small files' pages) will be handed out piece by piece:
		 * one call maps all of it, not a fault for each piece. */
		if (j == BUD_TOP_ORDER && order < j)
			pool_prefault(sp_ptr(sp, (sp->data_page + rel) << FR_PAGE_SHIFT),
				      FR_UNIT_SIZE);
		/* Split: the upper halves become free blocks of lower orders. */
		for (int m = j - 1; m >= order; m--)
			change_bit(tx, m, (rel + (1ULL << m)) >> m, 1);
		add_free(tx, -(int64_t)(1ULL << order));
		return (int64_t)(tx->sp->data_page + rel);
	}
	return -ENOSPC;
}

int bud_alloc_at(struct tx *tx, uint64_t page, int order)
{
	struct space *sp = tx->sp;
	tx_lock_alloc(tx);
	if (page < sp->data_page || page + (1ULL << order) > sp->data_end_page)
		return -EINVAL;
	uint64_t rel = page - sp->data_page;
	if (rel & ((1ULL << order) - 1))
		return -EINVAL;
	for (int j = order; j < BUD_ORDERS; j++) {
		uint64_t head = rel & ~((1ULL << j) - 1);
		if (!test_bit(tx, j, head >> j))
			continue;
		change_bit(tx, j, head >> j, 0);
		while (j > order) {
			j--;
			uint64_t half = 1ULL << j;
			if (rel & half) {
				change_bit(tx, j, head >> j, 1); /* lower half stays free */
				head += half;
			} else {
				change_bit(tx, j, (head + half) >> j, 1);
			}
		}
		add_free(tx, -(int64_t)(1ULL << order));
		return 0;
	}
	return -ENOSPC;
}

static void bud_free_now(struct space *sp_unused, uint64_t txp, uint64_t page, uint64_t order);

/* A block may be released only if it is inside the data area, aligned for
 * its order, and no part of it is free already. */
static int release_ok(struct tx *tx, uint64_t page, int order)
{
	struct space *sp = tx->sp;
	if (order < 0 || order > BUD_TOP_ORDER || page < sp->data_page ||
	    page >= sp->data_end_page || (1ULL << order) > sp->data_end_page - page ||
	    ((page - sp->data_page) & ((1ULL << order) - 1)))
		return tx_damaged(tx, "release of pages %llu+%llu outside the data area",
				  (unsigned long long)page, 1ULL << (order & 15));
	uint64_t rel = page - sp->data_page;
	int overlap = 0;
	/* a free block of this order or larger containing it ... */
	for (int j = order; j < BUD_ORDERS && !overlap; j++)
		overlap = test_bit(tx, j, (rel & ~((1ULL << j) - 1)) >> j);
	/* ... or a smaller one inside it: whole bitmap words at a time */
	for (int j = 0; j < order && !overlap; j++) {
		uint64_t b = rel >> j, end = b + (1ULL << (order - j));
		while (b < end && !overlap) {
			unsigned sh = (unsigned)(b & 63);
			uint64_t take = FR_MIN(64 - sh, end - b);
			uint64_t mask = take == 64 ? ~0ULL : ((1ULL << take) - 1) << sh;
			overlap = (tx_get8(tx, word_ptr(sp, j, b >> 6)) & mask) != 0;
			b += take;
		}
	}
	if (overlap)
		return tx_damaged(tx, "pages %llu+%llu are released twice (free already)",
				  (unsigned long long)page, 1ULL << order);
	return 0;
}

void bud_free(struct tx *tx, uint64_t page, int order)
{
	tx_lock_alloc(tx);
	tx_free_later(tx, bud_free_now, (uint64_t)(uintptr_t)tx, page, (uint64_t)order);
}

static void bud_free_now(struct space *sp_unused, uint64_t txp, uint64_t page, uint64_t order_)
{
	struct tx *tx = (struct tx *)(uintptr_t)txp;
	struct space *sp = tx->sp;
	int order = (int)order_;
	if (tx->damaged || release_ok(tx, page, order))
		return;
	uint64_t rel = page - sp->data_page;
	add_free(tx, (int64_t)(1ULL << order));
	int k = order;
	while (k < BUD_TOP_ORDER) {
		uint64_t buddy = rel ^ (1ULL << k);
		if (!test_bit(tx, k, buddy >> k))
			break;
		change_bit(tx, k, buddy >> k, 0);
		rel &= ~(1ULL << k);
		k++;
	}
	change_bit(tx, k, rel >> k, 1);
}

void bud_release_unused(struct tx *tx, uint64_t page, int order)
{
	bud_free_now(tx->sp, (uint64_t)(uintptr_t)tx, page, (uint64_t)order);
}

int bud_free_order(struct space *sp, struct tx *tx, uint64_t page)
{
	if (page < sp->data_page || page >= sp->data_end_page)
		return -1;
	uint64_t rel = page - sp->data_page;
	for (int j = 0; j < BUD_ORDERS; j++) {
		uint64_t head = rel & ~((1ULL << j) - 1);
		int set;
		if (tx)
			set = test_bit(tx, j, head >> j);
		else
			set = (sp->bitmap[j][(head >> j) >> 6] >> ((head >> j) & 63)) & 1;
		if (set)
			return j;
	}
	return -1;
}

uint64_t bud_free_pages(struct space *sp)
{
	return __atomic_load_n(&sp->hdr->sph_free_pages, __ATOMIC_RELAXED);
}

int bud_check(struct space *sp, void (*report)(void *, const char *), void *arg)
{
	int bad = 0;
	uint64_t n = sp->data_end_page - sp->data_page, total = 0;
	for (int k = 0; k < BUD_ORDERS; k++) {
		uint64_t nb = n >> k;
		for (uint64_t w = 0; w < sp->nwords[k]; w++) {
			uint64_t v = sp->bitmap[k][w];
			int sbit = (sp->summary[k][w >> 6] >> (w & 63)) & 1;
			if ((v != 0) != sbit) {
				fr_report(report, arg,
					  "buddy: order %d summary bit for word %llu is wrong", k,
					  (unsigned long long)w);
				bad++;
			}
			while (v) {
				uint64_t b = w * 64 + (uint64_t)__builtin_ctzll(v);
				v &= v - 1;
				if (b >= nb) {
					fr_report(report, arg,
						  "buddy: order %d block %llu beyond the pool", k,
						  (unsigned long long)b);
					bad++;
					continue;
				}
				total += 1ULL << k;
				uint64_t rel = b << k;
				/* B1: no free block of another order overlaps this one. */
				for (int j = k + 1; j < BUD_ORDERS; j++) {
					uint64_t head = rel & ~((1ULL << j) - 1);
					if ((sp->bitmap[j][(head >> j) >> 6] >>
					     ((head >> j) & 63)) &
					    1) {
						fr_report(report, arg,
							  "buddy: free blocks overlap at page %llu "
							  "(orders %d, %d)",
							  (unsigned long long)(sp->data_page + rel),
							  k, j);
						bad++;
					}
				}
				if (k < BUD_TOP_ORDER) {
					uint64_t bud = (rel ^ (1ULL << k)) >> k;
					if ((sp->bitmap[k][bud >> 6] >> (bud & 63)) & 1) {
						fr_report(report, arg,
							  "buddy: unmerged free buddies at page "
							  "%llu order %d",
							  (unsigned long long)(sp->data_page + rel),
							  k);
						bad++;
					}
				}
			}
		}
	}
	if (total != sp->hdr->sph_free_pages) {
		fr_report(report, arg, "buddy: free page count %llu, bitmaps say %llu",
			  (unsigned long long)sp->hdr->sph_free_pages, (unsigned long long)total);
		bad++;
	}
	return bad;
}
