/*
 * window.c -- the windows of large partitions (level >= 3): backing them,
 * releasing them, and write-and-swap (strict mode, ctFS 3.4.2). Small
 * partitions live page by page in the windows of part.c's L3 headers.
 *
 * A large window is PPT_NONE (a hole), one 2 MiB unit (PPT_HUGE), or a page
 * table of the pages it has (PPT_TABLE without PT_F_HEADER).
 *
 * Invariants: H6 a large window's pages are named by its entry alone: the
 *               unit of a PPT_HUGE entry, or the ptes of its table;
 *             W1 a table with PT_F_RESERVED owns its home unit whole (format
 *               4): every pte is 0 or home + its index, and the home pages no
 *               pte names are allocated, unwritten and counted in
 *               sph_prealloc_pages (SCMFS pre-allocation); they come back by
 *               part_gc_reservations, or become the window's unit when all
 *               512 are written (promotion, no copy);
 *             W2 those unnamed home pages hold zeros: they are zeroed when
 *               the unit is reserved, a page leaves the reservation only by
 *               being named or by the reservation's end, and nothing stores
 *               into it before the transaction that does either commits
 *               (drop_reservation releases at finalisation; strict.c names
 *               pages past the size first). So the
 *               process maps the home unit whole under a reserved window
 *               (vspace.c), its holes read zeros, and an append needs no
 *               new mapping; when the reservation ends, the unnamed pages
 *               are mapped to the zero page before anyone can reuse them.
 * Crash argument: as part.c -- entries, tables, allocator words and the
 *   pre-allocation counter change only in the caller's transaction; a new
 *   table page is written and fenced before the entry that links it.
 * Locking: sp->alloc_lock, taken before a table is read for a change.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "persist/pm.h"
#include "space/space.h"

static void free_pte_runs(struct tx *tx, const uint32_t *pte, unsigned o0, unsigned o1);
static int alloc_window(struct tx *tx, uint64_t vw, uint64_t *went, uint64_t *page_of);

static void add_prealloc(struct tx *tx, int64_t delta)
{
	struct sp_header *h = tx->sp->hdr;
	tx_set8(tx, &h->sph_prealloc_pages, tx_get8(tx, &h->sph_prealloc_pages) + (uint64_t)delta);
}

/* The table of a large window, as the transaction sees it, if it is one (not
 * a partition header) and names its own window; NULL otherwise. */
static struct sp_ptable *large_table(struct tx *tx, uint64_t went, uint64_t vw)
{
	if ((went & PPT_TYPE_MASK) != PPT_TABLE)
		return NULL;
	struct sp_ptable *pt = ppt_table(tx->sp, went);
	if (tx_get8(tx, &pt->pt_magic) != PT_MAGIC || tx_get8(tx, &pt->pt_vaddr) != vw ||
	    (tx_get4(tx, &pt->pt_flags) & PT_F_HEADER))
		return NULL;
	return pt;
}

int part_reserved_home(struct tx *tx, const struct sp_ptable *pt, uint64_t *home_pg)
{
	if (!(tx_get4(tx, &pt->pt_flags) & PT_F_RESERVED))
		return 0;
	uint64_t home = tx_get8(tx, &pt->pt_home);
	*home_pg = home >> FR_PAGE_SHIFT;
	/* W1 needs a whole unit of the data area (checked: pt_home is PM) */
	return !(home & (FR_UNIT_SIZE - 1)) && sp_data_range_ok(tx->sp, home, FR_UNIT_SIZE);
}

/* Releases the home pages of a reserved table that no pte names
 * (unreachable: W1), and drops the reservation. Returns the pages released.
 * They stay allocated in the committed state until this transaction commits,
 * and W2 has them read as zeros through the window's holes until then; a
 * store into one before the commit would show through a hole should the
 * process die first. So they are released at finalisation (bud_free), as
 * swapped pages are (S2): the transaction that drops a reservation never
 * hands its pages out. */
static uint64_t drop_reservation(struct tx *tx, struct sp_ptable *pt)
{
	uint64_t home_pg;
	if (!part_reserved_home(tx, pt, &home_pg)) {
		if (tx_get4(tx, &pt->pt_flags) & PT_F_RESERVED)
			tx_damaged(tx, "reserved window without a home unit");
		return 0;
	}
	uint64_t released = 0, unnamed[8] = {0};
	for (unsigned o = 0; o < 512; o++)
		if (!tx_get4(tx, &pt->pt_pte[o]))
			unnamed[o >> 6] |= 1ULL << (o & 63);
	/* W2: unmapped from the window before the allocator can hand them out */
	vs_reservation_dropped(tx->sp, tx_get8(tx, &pt->pt_vaddr), unnamed);
	for (unsigned o = 0; o < 512;) {
		if (tx_get4(tx, &pt->pt_pte[o])) {
			o++;
			continue;
		}
		/* the largest aligned block of unnamed pages starting here */
		int k = 0;
		while (k < BUD_TOP_ORDER && !(o & ((2u << k) - 1)) && o + (2u << k) <= 512) {
			unsigned j;
			for (j = 1u << k; j < (2u << k); j++)
				if (tx_get4(tx, &pt->pt_pte[o + j]))
					break;
			if (j < (2u << k))
				break;
			k++;
		}
		bud_free(tx, home_pg + o, k);
		released += 1u << k;
		o += 1u << k;
	}
	tx_set4(tx, &pt->pt_flags, tx_get4(tx, &pt->pt_flags) & ~PT_F_RESERVED);
	add_prealloc(tx, -(int64_t)released);
	return released;
}

uint64_t part_drop_reservation(struct tx *tx, uint64_t vw)
{
	tx_lock_alloc(tx);
	int err = 0;
	uint64_t *slot = ppt_window_slot(tx, vw, 0, &err);
	uint64_t went = slot ? tx_get8(tx, slot) : PPT_NONE;
	struct sp_ptable *pt = ppt_went_ok(tx->sp, went) ? large_table(tx, went, vw) : NULL;
	return pt ? drop_reservation(tx, pt) : 0;
}

struct gc {
	struct tx *tx;
	uint64_t want, got;
};

static int gc_window(void *arg, uint64_t vw, struct sp_ptable *pt)
{
	(void)vw;
	struct gc *g = arg;
	/* only unwritten pages change hands, and they are mapped to the zero
	 * page in place (W2, vs_reservation_dropped): the window's file needs
	 * no lock */
	uint32_t flags = tx_get4(g->tx, &pt->pt_flags);
	if ((flags & PT_F_RESERVED) && !(flags & PT_F_HEADER))
		g->got += drop_reservation(g->tx, pt);
	/* a window of scattered pages costs up to 256 releases */
	return g->got >= g->want || g->tx->nfrees >= TX_MAX_FREES / 2;
}

uint64_t part_gc_reservations(struct tx *tx, uint64_t want)
{
	struct gc g = {tx, want, 0};
	tx_lock_alloc(tx);
	if (tx_get8(tx, &tx->sp->hdr->sph_prealloc_pages))
		ppt_each_table(tx, gc_window, &g);
	return g.got;
}

/* A page table for a window of a large partition that is about to get its
 * first pages. Format 4: it reserves a whole unit as its home when one is
 * free (W1), so the pages a file writes over time end up as one unit. */
static int new_large_table(struct tx *tx, uint64_t vw, unsigned o0, unsigned o1, uint64_t *went)
{
	struct space *sp = tx->sp;
	int64_t u = bud_alloc(tx, BUD_TOP_ORDER);
	if (u < 0 && u != -ENOSPC)
		return (int)u;
	int64_t tp = bud_alloc(tx, 0);
	if (tp < 0)
		return (int)tp;
	struct sp_ptable *img = calloc(1, sizeof(*img));
	if (!img)
		return -ENOMEM;
	img->pt_magic = PT_MAGIC;
	img->pt_vaddr = vw;
	if (u >= 0) {
		img->pt_home = (uint64_t)u << FR_PAGE_SHIFT;
		img->pt_flags = PT_F_RESERVED;
		sp->recent_homes[sp->recent_next++ % SP_RECENT_HOMES] = (uint64_t)u;
		add_prealloc(tx, 512);
		/* W2: zeros where the caller does not write now (it zeroes what
		 * it leaves of the pages it backs); fenced by the commit, as the
		 * unit is unreachable until then */
		char *home = sp_ptr(sp, (uint64_t)u << FR_PAGE_SHIFT);
		pool_prefault(home, FR_UNIT_SIZE); /* one call, not a fault per page */
		if (o0 > 0)
			pm_zero_nt(home, (size_t)o0 << FR_PAGE_SHIFT);
		if (o1 < 512)
			pm_zero_nt(home + ((size_t)o1 << FR_PAGE_SHIFT), (size_t)(512 - o1)
									     << FR_PAGE_SHIFT);
	}
	uint64_t toff = (uint64_t)tp << FR_PAGE_SHIFT;
	pm_copy_nt(sp_ptr(sp, toff), img, sizeof(*img));
	free(img);
	tx_mark_fresh(tx);
	*went = toff | PPT_TABLE;
	return 0;
}

int part_large_reserved(struct tx *tx, uint64_t vw)
{
	uint64_t went = ppt_window_tx(tx, vw), home_pg;
	if (!ppt_went_ok(tx->sp, went))
		return 0;
	struct sp_ptable *pt = large_table(tx, went, vw);
	return pt && part_reserved_home(tx, pt, &home_pg);
}

int part_large_back_pages(struct tx *tx, uint64_t vw, unsigned o0, unsigned o1, uint64_t *fresh)
{
	struct space *sp = tx->sp;
	int err = 0;
	tx_lock_alloc(tx); /* before the table is read: part_gc_reservations */
	uint64_t *slot = ppt_window_slot(tx, vw, 1, &err);
	if (!slot)
		return err;
	uint64_t went = tx_get8(tx, slot);
	if (went != PPT_NONE && !ppt_went_ok(sp, went))
		return tx_damaged(tx, "page table entry of window %#llx damaged",
				  (unsigned long long)vw);
	if ((went & PPT_TYPE_MASK) == PPT_HUGE)
		return 0;
	if (went == PPT_NONE && o0 == 0 && o1 == 512) {
		/* all of it at once: a unit (or the largest blocks there are) */
		int rc = alloc_window(tx, vw, &went, NULL);
		if (rc)
			return rc;
		tx_set8(tx, slot, went);
		tx_defer(tx, vs_window_changed, vw, 1, 0);
		memset(fresh, 0xff, 8 * sizeof(*fresh));
		return 0;
	}
	if (went == PPT_NONE) {
		int rc = new_large_table(tx, vw, o0, o1, &went);
		if (rc)
			return rc;
		tx_set8(tx, slot, went);
		tx_defer(tx, vs_window_changed, vw, 1, 0); /* was a hole */
	}
	struct sp_ptable *pt = large_table(tx, went, vw);
	if (!pt)
		return tx_damaged(tx, "page table of window %#llx damaged", (unsigned long long)vw);
	uint64_t home_pg = 0;
	int reserved = part_reserved_home(tx, pt, &home_pg);
	if (!reserved && (tx_get4(tx, &pt->pt_flags) & PT_F_RESERVED))
		return tx_damaged(tx, "reserved window %#llx without a home unit",
				  (unsigned long long)vw);
	uint32_t npages = tx_get4(tx, &pt->pt_npages), from_home = 0;
	for (unsigned o = o0; o < o1; o++) {
		uint32_t cur = tx_get4(tx, &pt->pt_pte[o]);
		if (cur) {
			if (!sp_page_ok(sp, cur) || (reserved && cur != home_pg + o))
				return tx_damaged(tx, "page table of window %#llx damaged",
						  (unsigned long long)vw);
			continue;
		}
		int64_t pg;
		if (reserved) {
			pg = (int64_t)(home_pg + o);
			from_home++;
		} else {
			uint32_t prev = o ? tx_get4(tx, &pt->pt_pte[o - 1]) : 0;
			pg = part_alloc_near(tx, 0, prev, o, 0);
			if (pg < 0)
				pg = bud_alloc(tx, 0);
			if (pg < 0)
				return (int)pg;
		}
		tx_set4(tx, &pt->pt_pte[o], (uint32_t)pg);
		fresh[o >> 6] |= 1ULL << (o & 63);
		npages++;
	}
	tx_set4(tx, &pt->pt_npages, npages);
	if (from_home)
		add_prealloc(tx, -(int64_t)from_home);
	if (reserved && npages == 512) {
		/* every page written: the home unit is the window (no copy) */
		uint64_t toff = went & ~PPT_TYPE_MASK;
		tx_set8(tx, slot, (home_pg << FR_PAGE_SHIFT) | PPT_HUGE);
		bud_free(tx, toff >> FR_PAGE_SHIFT, 0);
		tx_defer(tx, vs_window_promoted, vw, 0, 0);
	} else if (o1 > o0) {
		tx_defer(tx, vs_pages_changed, vw + ((uint64_t)o0 << FR_PAGE_SHIFT), o1 - o0, 0);
	}
	return 0;
}

int part_large_unback_pages(struct tx *tx, uint64_t vw, unsigned o0, unsigned o1,
			    uint64_t *released)
{
	struct space *sp = tx->sp;
	int err = 0;
	*released = 0;
	tx_lock_alloc(tx);
	tx_xlate_flush(tx);
	uint64_t *slot = ppt_window_slot(tx, vw, 0, &err);
	if (!slot)
		return err;
	uint64_t went = tx_get8(tx, slot);
	if (went == PPT_NONE || o0 >= o1)
		return 0;
	if (!ppt_went_ok(sp, went))
		return tx_damaged(tx, "page table entry of window %#llx damaged",
				  (unsigned long long)vw);
	struct sp_ptable *pt;
	if ((went & PPT_TYPE_MASK) == PPT_HUGE) {
		/* demoted: a table of the unit's pages, less those released */
		int64_t tp = bud_alloc(tx, 0);
		if (tp < 0)
			return (int)tp;
		uint64_t u = (went & ~PPT_TYPE_MASK) >> FR_PAGE_SHIFT;
		struct sp_ptable *img = calloc(1, sizeof(*img));
		if (!img)
			return -ENOMEM;
		img->pt_magic = PT_MAGIC;
		img->pt_vaddr = vw;
		img->pt_home = u << FR_PAGE_SHIFT;
		for (unsigned o = 0; o < 512; o++)
			img->pt_pte[o] = (o >= o0 && o < o1) ? 0 : (uint32_t)(u + o);
		img->pt_npages = 512 - (o1 - o0);
		pm_copy_nt(sp_ptr(sp, (uint64_t)tp << FR_PAGE_SHIFT), img, sizeof(*img));
		free(img);
		tx_mark_fresh(tx);
		for (unsigned o = o0; o < o1;) {
			int k = __builtin_ctz(o | 512);
			while (o + (1u << k) > o1)
				k--;
			bud_free(tx, u + o, k);
			o += 1u << k;
		}
		tx_set8(tx, slot, ((uint64_t)tp << FR_PAGE_SHIFT) | PPT_TABLE);
		tx_defer(tx, vs_window_changed, vw, 1, 0);
		*released = o1 - o0;
		return 0;
	}
	pt = large_table(tx, went, vw);
	if (!pt)
		return tx_damaged(tx, "page table of window %#llx damaged", (unsigned long long)vw);
	if (tx_get4(tx, &pt->pt_flags) & PT_F_RESERVED) {
		/* punched or truncated: the reservation goes too (demotion) */
		for (unsigned o = o0; o < o1; o++)
			if (tx_get4(tx, &pt->pt_pte[o])) {
				tx_set4(tx, &pt->pt_pte[o], 0);
				add_prealloc(tx, 1); /* unnamed home page, released below */
				++*released;
			}
		tx_set4(tx, &pt->pt_npages, tx_get4(tx, &pt->pt_npages) - (uint32_t)*released);
		drop_reservation(tx, pt);
	} else {
		uint32_t pte[512];
		for (unsigned o = 0; o < 512; o++)
			pte[o] = tx_get4(tx, &pt->pt_pte[o]);
		free_pte_runs(tx, pte, o0, o1);
		for (unsigned o = o0; o < o1; o++)
			if (pte[o]) {
				tx_set4(tx, &pt->pt_pte[o], 0);
				++*released;
			}
		tx_set4(tx, &pt->pt_npages, tx_get4(tx, &pt->pt_npages) - (uint32_t)*released);
	}
	if (!tx_get4(tx, &pt->pt_npages)) {
		/* nothing left: a hole again */
		bud_free(tx, (went & ~PPT_TYPE_MASK) >> FR_PAGE_SHIFT, 0);
		tx_set8(tx, slot, PPT_NONE);
	}
	tx_defer(tx, vs_window_changed, vw, 1, 0);
	return 0;
}

/* Backing for a whole window: one 2 MiB unit, or -- when no unit is free -- a
 * fresh page table page of the largest blocks available (mapped run by run;
 * slower but no false ENOSPC). Returns the window entry; page_of (may be
 * NULL) receives the pool page number of each of the 512 pages. Nothing is
 * reachable until the caller stages the entry. */
static int alloc_window(struct tx *tx, uint64_t vw, uint64_t *went, uint64_t *page_of)
{
	struct space *sp = tx->sp;
	int64_t u = bud_alloc(tx, BUD_TOP_ORDER);
	if (u >= 0) {
		*went = ((uint64_t)u << FR_PAGE_SHIFT) | PPT_HUGE;
		for (unsigned o = 0; page_of && o < 512; o++)
			page_of[o] = (uint64_t)u + o;
		return 0;
	}
	int64_t tp = bud_alloc(tx, 0);
	if (tp < 0)
		return (int)tp;
	struct sp_ptable img;
	memset(&img, 0, sizeof(img));
	img.pt_magic = PT_MAGIC;
	img.pt_vaddr = vw;
	for (unsigned o = 0; o < 512;) {
		int k = __builtin_ctz(o | 512);
		if (k > BUD_TOP_ORDER - 1)
			k = BUD_TOP_ORDER - 1;
		int64_t b = -ENOSPC;
		for (; k >= 0; k--)
			if ((b = bud_alloc(tx, k)) >= 0)
				break;
		if (b < 0)
			return (int)b; /* the caller abandons the transaction */
		for (unsigned j = 0; j < (1u << k); j++) {
			img.pt_pte[o + j] = (uint32_t)(b + j);
			if (page_of)
				page_of[o + j] = (uint64_t)b + j;
		}
		o += 1u << k;
	}
	img.pt_npages = 512;
	uint64_t toff = (uint64_t)tp << FR_PAGE_SHIFT;
	pm_copy_nt(sp_ptr(sp, toff), &img, sizeof(img));
	tx_mark_fresh(tx);
	*went = toff | PPT_TABLE;
	return 0;
}

int part_large_back(struct tx *tx, uint64_t vw, uint64_t *phys)
{
	int err = 0;
	uint64_t *slot = ppt_window_slot(tx, vw, 1, &err);
	if (!slot)
		return err;
	uint64_t went = tx_get8(tx, slot);
	if (went != PPT_NONE) {
		if (!ppt_went_ok(tx->sp, went))
			return tx_damaged(tx, "page table entry of window %#llx damaged",
					  (unsigned long long)vw);
		*phys = went & ~PPT_TYPE_MASK;
		return 1; /* already backed */
	}
	int rc = alloc_window(tx, vw, &went, NULL);
	if (rc)
		return rc;
	tx_set8(tx, slot, went);
	tx_defer(tx, vs_window_changed, vw, 1, 0);
	*phys = (went & PPT_TYPE_MASK) == PPT_HUGE ? went & ~PPT_TYPE_MASK : 0;
	return 0;
}

/* Queues the release of pages [o0, o1) of a table window as the aligned
 * blocks they came from, so a window assembled from a few blocks costs a few
 * releases. pte[] holds the window's page numbers (0 = not backed). */
static void free_pte_runs(struct tx *tx, const uint32_t *pte, unsigned o0, unsigned o1)
{
	struct space *sp = tx->sp;
	for (unsigned o = o0; o < o1;) {
		uint64_t pg = pte[o];
		if (!pg) {
			o++;
			continue;
		}
		int k = 0;
		while (k < BUD_TOP_ORDER - 1 && !(o & ((2u << k) - 1)) &&
		       !((pg - sp->data_page) & ((2ULL << k) - 1)) && o + (2u << k) <= o1) {
			unsigned n = 2u << k, j;
			for (j = 1; j < n; j++)
				if (pte[o + j] != pg + j)
					break;
			if (j < n)
				break;
			k++;
		}
		bud_free(tx, pg, k);
		o += 1u << k;
	}
}

/* The 512 page numbers of a window entry as the transaction sees them. */
static void window_ptes(struct tx *tx, uint64_t went, uint32_t *pte)
{
	if ((went & PPT_TYPE_MASK) == PPT_HUGE) {
		uint64_t u = (went & ~PPT_TYPE_MASK) >> FR_PAGE_SHIFT;
		for (unsigned o = 0; o < 512; o++)
			pte[o] = (uint32_t)(u + o);
		return;
	}
	struct sp_ptable *pt = ppt_table(tx->sp, went);
	for (unsigned o = 0; o < 512; o++)
		pte[o] = tx_get4(tx, &pt->pt_pte[o]);
}

/* Queues the release of everything a large window entry backs. */
static void release_window(struct tx *tx, uint64_t went)
{
	if ((went & PPT_TYPE_MASK) == PPT_HUGE) {
		bud_free(tx, (went & ~PPT_TYPE_MASK) >> FR_PAGE_SHIFT, BUD_TOP_ORDER);
		return;
	}
	struct sp_ptable *pt = ppt_table(tx->sp, went);
	uint64_t home_pg;
	if (part_reserved_home(tx, pt, &home_pg)) {
		/* W1: the home unit is the window's, written or not */
		add_prealloc(tx, -(int64_t)(512 - tx_get4(tx, &pt->pt_npages)));
		bud_free(tx, home_pg, BUD_TOP_ORDER);
		bud_free(tx, (went & ~PPT_TYPE_MASK) >> FR_PAGE_SHIFT, 0);
		return;
	}
	uint32_t pte[512];
	window_ptes(tx, went, pte);
	free_pte_runs(tx, pte, 0, 512);
	bud_free(tx, (went & ~PPT_TYPE_MASK) >> FR_PAGE_SHIFT, 0);
}

void part_large_unback(struct tx *tx, uint64_t vw)
{
	tx_xlate_flush(tx);
	int err;
	uint64_t *slot = ppt_window_slot(tx, vw, 0, &err);
	if (!slot)
		return;
	uint64_t went = tx_get8(tx, slot);
	if (went == PPT_NONE)
		return;
	if (!ppt_went_ok(tx->sp, went)) {
		tx_damaged(tx, "page table entry of window %#llx damaged", (unsigned long long)vw);
		return;
	}
	tx_lock_alloc(tx);
	release_window(tx, went);
	tx_set8(tx, slot, PPT_NONE);
	tx_defer(tx, vs_window_changed, vw, 1, 0);
}

/* ---- write-and-swap (strict mode, ctFS 3.4.2) ---------------------------- *
 *
 * The new contents of a range go into fresh pages that nothing references
 * (S1); one transaction then points the PPT at them and queues the release
 * of the pages they replace (S2: released at finalisation, so the same
 * transaction cannot hand them out again). Before the entry commits the
 * fresh pages are unreachable and still free in the committed allocator, so
 * a crash loses nothing and leaks nothing; after it, replay installs the
 * whole swap. */

int part_swap_window(struct tx *tx, uint64_t vw, uint64_t *page_of, int64_t *added)
{
	*added = 0;
	tx_xlate_flush(tx);
	int err = 0;
	uint64_t *slot = ppt_window_slot(tx, vw, 0, &err);
	uint64_t old = slot ? tx_get8(tx, slot) : PPT_NONE;
	if (old == PPT_NONE || !ppt_went_ok(tx->sp, old))
		return -EUCLEAN; /* callers swap backed windows only */
	if ((old & PPT_TYPE_MASK) == PPT_TABLE &&
	    (tx_get4(tx, &ppt_table(tx->sp, old)->pt_flags) & PT_F_HEADER))
		return -EUCLEAN; /* a window of small partitions is never swapped whole */
	tx_lock_alloc(tx);
	uint64_t went;
	int rc = alloc_window(tx, vw, &went, page_of);
	if (rc)
		return rc;
	/* a window backed page by page may have had holes: it has none now */
	if ((old & PPT_TYPE_MASK) == PPT_TABLE)
		*added = 512 - (int64_t)tx_get4(tx, &ppt_table(tx->sp, old)->pt_npages);
	release_window(tx, old);
	tx_set8(tx, slot, went);
	tx_defer(tx, vs_pages_changed, vw, 512, 0);
	return 0;
}

/* Mappings map_table_window would need beyond the home unit: runs of
 * contiguous pages that are not at their home offset. */
static unsigned count_runs(const uint32_t *pte, uint64_t home_pg)
{
	unsigned runs = 0;
	for (unsigned o = 0; o < 512; o++) {
		if (!pte[o] || (home_pg && pte[o] == home_pg + o))
			continue;
		if (o == 0 || pte[o] != pte[o - 1] + 1 || !pte[o - 1] ||
		    (home_pg && pte[o - 1] == home_pg + o - 1))
			runs++;
	}
	return runs;
}

unsigned part_window_runs(struct tx *tx, uint64_t vw)
{
	uint64_t went = ppt_window_tx(tx, vw);
	if ((went & PPT_TYPE_MASK) != PPT_TABLE)
		return 0;
	uint32_t pte[512];
	window_ptes(tx, went, pte);
	/* only a small-file window has its home mapped under it (vspace.c) */
	struct sp_ptable *pt = ppt_table(tx->sp, went);
	uint64_t home = (tx_get4(tx, &pt->pt_flags) & PT_F_HEADER) ? tx_get8(tx, &pt->pt_home) : 0;
	return count_runs(pte, home >> FR_PAGE_SHIFT);
}

/* A fresh block of 2^k pages for window offset o where it maps best: at the
 * page's home offset (so a range swapped twice goes back home, ctFS's
 * ping-pong), else right after the previous page (one mapping for the run).
 * -ENOSPC if neither is free (the caller then takes any block). */
int64_t part_alloc_near(struct tx *tx, uint64_t home_pg, uint64_t prev_pg, unsigned o, int k)
{
	uint64_t rel_mask = (1ULL << k) - 1;
	uint64_t dp = tx->sp->data_page;
	if (home_pg && !((home_pg + o - dp) & rel_mask) && bud_alloc_at(tx, home_pg + o, k) == 0)
		return (int64_t)(home_pg + o);
	if (prev_pg && !((prev_pg + 1 - dp) & rel_mask) && bud_alloc_at(tx, prev_pg + 1, k) == 0)
		return (int64_t)(prev_pg + 1);
	return -ENOSPC;
}

/* Gives pages [a, b) of the unit at page u, which this transaction
 * allocated and did not use, back at once as aligned blocks. */
static void release_unused_range(struct tx *tx, uint64_t u, unsigned a, unsigned b)
{
	for (unsigned o = a; o < b;) {
		int k = __builtin_ctz(o | 512);
		while (o + (1u << k) > b)
			k--;
		bud_release_unused(tx, u + o, k);
		o += 1u << k;
	}
}

int part_swap_pages(struct tx *tx, uint64_t v, unsigned n, uint64_t *page_of)
{
	struct space *sp = tx->sp;
	tx_xlate_flush(tx);
	uint64_t vw = v & ~(FR_UNIT_SIZE - 1);
	unsigned o0 = (unsigned)((v >> FR_PAGE_SHIFT) & 511), o1 = o0 + n;
	if (!n || o1 > 512)
		return -EINVAL;
	int err = 0;
	uint64_t *slot = ppt_window_slot(tx, vw, 0, &err);
	uint64_t went = slot ? tx_get8(tx, slot) : PPT_NONE;
	if (went == PPT_NONE || !ppt_went_ok(tx->sp, went))
		return -EUCLEAN;
	tx_lock_alloc(tx);
	uint32_t old[512], pte[512];
	window_ptes(tx, went, old);
	memcpy(pte, old, sizeof(pte));
	struct sp_ptable *pt = NULL;
	uint64_t home_pg, tp = 0;
	int header = 0;
	if ((went & PPT_TYPE_MASK) == PPT_HUGE) {
		/* The window becomes a page table whose home is the old unit:
		 * the pages left in place keep their mapping. */
		home_pg = (went & ~PPT_TYPE_MASK) >> FR_PAGE_SHIFT;
		int64_t t = bud_alloc(tx, 0);
		if (t < 0)
			return (int)t;
		tp = (uint64_t)t;
	} else {
		pt = ppt_table(sp, went);
		if (tx_get4(tx, &pt->pt_flags) & PT_F_RESERVED)
			drop_reservation(tx, pt); /* W1 allows no page but its home's */
		home_pg = tx_get8(tx, &pt->pt_home) >> FR_PAGE_SHIFT;
		header = (tx_get4(tx, &pt->pt_flags) & PT_F_HEADER) != 0;
	}
	for (unsigned o = o0; o < o1; o++)
		if (!old[o] || (header && o == 0))
			return -EUCLEAN; /* only backed file pages are swapped */
	for (unsigned o = o0; o < o1;) {
		int k = __builtin_ctz(o | 512);
		while (o + (1u << k) > o1)
			k--;
		uint64_t prev = o > 0 ? pte[o - 1] : 0;
		int64_t b = part_alloc_near(tx, home_pg, prev, o, k);
		if (b < 0 && !header && o == o0 && n >= 64) {
			/* A long run of a large window gets a unit of its own at
			 * the window's offsets; the rest goes back to the
			 * allocator but is where the neighbouring pages go next
			 * (part_alloc_near: right after the previous page), so a
			 * window rewritten piece by piece ends as one unit. */
			int64_t u = bud_alloc(tx, BUD_TOP_ORDER);
			if (u >= 0) {
				release_unused_range(tx, (uint64_t)u, 0, o0);
				release_unused_range(tx, (uint64_t)u, o1, 512);
				for (unsigned j = o0; j < o1; j++) {
					pte[j] = (uint32_t)((uint64_t)u + j);
					page_of[j - o0] = (uint64_t)u + j;
				}
				break;
			}
		}
		for (int j = k; b < 0 && j >= 0; j--)
			if ((b = part_alloc_near(tx, home_pg, prev, o, j)) >= 0 ||
			    (b = bud_alloc(tx, j)) >= 0)
				k = j;
		if (b < 0)
			return (int)b;
		for (unsigned j = 0; j < (1u << k); j++) {
			pte[o + j] = (uint32_t)(b + j);
			page_of[o - o0 + j] = (uint64_t)b + j;
		}
		o += 1u << k;
	}
	free_pte_runs(tx, old, o0, o1);
	/* A large window whose pages are one aligned unit again maps as one
	 * (sequential rewrites end up here). */
	uint64_t base = pte[0];
	int whole = !header && base && !((base - sp->data_page) & 511);
	for (unsigned o = 1; whole && o < 512; o++)
		whole = pte[o] == base + o;
	if (whole) {
		if (tp)
			bud_release_unused(tx, tp, 0);
		else
			bud_free(tx, (went & ~PPT_TYPE_MASK) >> FR_PAGE_SHIFT, 0);
		tx_set8(tx, slot, (base << FR_PAGE_SHIFT) | PPT_HUGE);
	} else if (tp) {
		struct sp_ptable *img = calloc(1, sizeof(*img));
		if (!img)
			return -ENOMEM;
		memcpy(img->pt_pte, pte, sizeof(pte));
		img->pt_magic = PT_MAGIC;
		img->pt_home = home_pg << FR_PAGE_SHIFT;
		img->pt_vaddr = vw;
		img->pt_npages = 512;
		pm_copy_nt(sp_ptr(sp, tp << FR_PAGE_SHIFT), img, sizeof(*img));
		free(img);
		tx_mark_fresh(tx);
		tx_set8(tx, slot, (tp << FR_PAGE_SHIFT) | PPT_TABLE);
	} else {
		for (unsigned o = o0; o < o1; o++)
			tx_set4(tx, &pt->pt_pte[o], pte[o]);
	}
	tx_defer(tx, vs_pages_changed, v, n, 0);
	return 0;
}
