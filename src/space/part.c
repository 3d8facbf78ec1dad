/*
 * part.c -- the ctFS partition tree (ctFS 3.2) over the vspace, and the
 * backing of partitions with pool memory.
 *
 * Levels: L0 = 4 KiB ... each level 8x the one below; the root is level
 * sph_top_level at vspace offset 0. A partition is E (empty), A (allocated to
 * one file or directory) or P (divided into 8 children, or for L3 into 512,
 * 64 or 8 children of level 0, 1 or 2). The header of a P partition lives in
 * the first page of its first L3 window -- the page table page of that window
 * (space_format.h), so all headers of partitions starting at one address
 * share one page, and child 0 of a P partition is always P.
 *
 * Availability: ctFS keeps the highest available level in each header; since
 * an L3 is divided homogeneously, Ferrite keeps a mask of allocatable levels
 * instead (bit n: a level-n partition can be allocated below). Allocation
 * walks down following the mask: O(levels).
 *
 * Invariants: H1 a P partition's header page is pte[0] of its first window
 *               and is referenced by that window's PPT_TABLE entry;
 *             H2 the root is P; child 0 of every P partition is P;
 *             H3 every mask equals the OR of its children's masks (E at level
 *               m contributes levels 0..m, an L3 with no allocated child
 *               contributes levels 0..2);
 *             H4 E partitions and free L3 children have no backing;
 *             H5 a small (L0..L2) partition's pages live in its window's page
 *               table, preferably at the same offset of the window's home unit;
 *             H6 a large window is one unit, or a page table of 512 backed
 *               pages (no unit was free, or strict writes swapped some of
 *               its pages; then pt_home is the unit they came from).
 * Validation: a header page is used only if its window entry is a page table
 *   marked PT_F_HEADER that names its own window and an L3 child level of 0-2
 *   (header_ok); window entries and ptes are checked as ppt.c describes, and
 *   pages on their way back to the allocator by buddy.c. A check that fails
 *   where no error can be returned marks the transaction damaged (tx_damaged),
 *   so it never commits.
 * Crash argument: headers, PPT entries and allocator words change only in the
 *   caller's transaction; a new header page is built and fenced before the
 *   PPT entry that makes it reachable commits.
 * Locking: sp->alloc_lock for the tree and the buddy allocator.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "persist/pm.h"
#include "space/space.h"

#define MASK_BELOW(l) ((uint16_t)((1u << (l)) - 1)) /* levels 0..l-1 */
#define L3_EMPTY_MASK ((uint16_t)0x7)

int sp_level_for(uint64_t size)
{
	int l = 0;
	while (sp_level_size(l) < size)
		l++;
	return l;
}

int sp_top_level_for(uint64_t pool_size)
{
	/* Largest file = one child of the root: at least 64 GiB, 8x the pool. */
	int t = 9;
	while (t < SP_MAX_LEVEL - 1 && sp_level_size(t - 1) < 8 * pool_size)
		t++;
	return t > 11 ? 11 : t;
}

static inline uint64_t l3_capacity(int child_level)
{
	return 512ULL >> (3 * child_level);
}

static int header_ok(struct tx *tx, struct sp_ptable *h, uint64_t v)
{
	return tx_get8(tx, &h->pt_magic) == PT_MAGIC && tx_get8(tx, &h->pt_vaddr) == v &&
	       (tx_get4(tx, &h->pt_flags) & PT_F_HEADER) && tx_get1(tx, &h->l3_child_level) <= 2;
}

/* Header page of the window at v (which starts a P partition), or NULL if
 * there is none or it is damaged. */
static struct sp_ptable *hdr_page(struct tx *tx, uint64_t v)
{
	uint64_t went = ppt_window_tx(tx, v);
	if ((went & PPT_TYPE_MASK) != PPT_TABLE)
		return NULL;
	struct sp_ptable *h = ppt_table(tx->sp, went);
	return header_ok(tx, h, v) ? h : NULL;
}

/* hdr_page where the partition tree says a header must be. */
static struct sp_ptable *hdr_needed(struct tx *tx, uint64_t v)
{
	struct sp_ptable *h = hdr_page(tx, v);
	if (!h)
		tx_damaged(tx, "partition header of window %#llx missing or damaged",
			   (unsigned long long)v);
	return h;
}

static unsigned child_state(struct tx *tx, struct sp_ptable *h, int level, int i)
{
	return (tx_get2(tx, &h->ph[level].ph_states) >> (2 * i)) & 3;
}

static uint16_t child_mask(struct tx *tx, struct sp_ptable *h, int level, int i)
{
	return tx_get2(tx, &h->ph[level].ph_cmask[i]);
}

/* Sets child i of the P partition with header h at level to E or A. */
static void set_child_leaf(struct tx *tx, struct sp_ptable *h, int level, int i, unsigned s)
{
	uint16_t st = tx_get2(tx, &h->ph[level].ph_states);
	st = (uint16_t)((st & ~(3u << (2 * i))) | (s << (2 * i)));
	tx_set2(tx, &h->ph[level].ph_states, st);
	tx_set2(tx, &h->ph[level].ph_cmask[i], s == PH_E ? MASK_BELOW(level) : 0);
}

static uint16_t l3_mask_of(struct tx *tx, struct sp_ptable *h)
{
	uint32_t n = tx_get4(tx, &h->l3_nalloc);
	if (n <= 1)
		return L3_EMPTY_MASK;
	int c = tx_get1(tx, &h->l3_child_level);
	return n < l3_capacity(c) ? (uint16_t)(1u << c) : 0;
}

/* The mask a P partition should have, from its own header (H3). */
static uint16_t own_mask(struct tx *tx, struct sp_ptable *h, int level)
{
	if (level == SP_L3)
		return l3_mask_of(tx, h);
	uint16_t m = 0;
	for (int i = 0; i < 8; i++)
		m |= child_mask(tx, h, level, i);
	return m;
}

static uint16_t *mask_slot(struct sp_ptable *h, int level)
{
	return level == SP_L3 ? &h->l3_mask : &h->ph[level].ph_mask;
}

/* A whole unit for the window's home: page 0 becomes the header page, the
 * other 511 pages go back to the allocator but stay the preferred place for
 * the window's pages (H5). Falls back to any page when no unit is free. */
static int64_t alloc_header_page(struct tx *tx, uint64_t *home)
{
	int64_t u = bud_alloc(tx, BUD_TOP_ORDER);
	if (u >= 0) {
		for (int k = 0; k < BUD_TOP_ORDER; k++)
			bud_release_unused(tx, (uint64_t)u + (1ULL << k), k);
		*home = (uint64_t)u << FR_PAGE_SHIFT;
		/* The window's small files will take their pages from this unit:
		 * one call maps it, instead of a fault for each file's first
		 * write (a quarter of a 4 KiB create+write). */
		pool_prefault(sp_ptr(tx->sp, *home), FR_UNIT_SIZE);
		return u;
	}
	*home = 0;
	return bud_alloc(tx, 0);
}

/* Turns the E partition (v, level >= 3) into P with a chain of P first
 * children down to L3, whose children are of child_level. */
static int split(struct tx *tx, uint64_t v, int level, int child_level)
{
	struct space *sp = tx->sp;
	int err = 0;
	uint64_t *slot = ppt_window_slot(tx, v, 1, &err);
	if (!slot)
		return err;
	if (tx_get8(tx, slot) != PPT_NONE)
		return -EUCLEAN; /* an empty partition has no backing (H4) */
	uint64_t home;
	int64_t pg = alloc_header_page(tx, &home);
	if (pg < 0)
		return (int)pg;
	uint64_t off = (uint64_t)pg << FR_PAGE_SHIFT;
	/* Fresh page, unreachable until the PPT entry below commits. */
	struct sp_ptable *img = calloc(1, sizeof(*img));
	if (!img)
		return -ENOMEM;
	img->pt_pte[0] = (uint32_t)pg;
	img->pt_magic = PT_MAGIC;
	img->pt_home = home;
	img->pt_vaddr = v;
	img->pt_npages = 1;
	img->pt_flags = PT_F_HEADER;
	img->l3_child_level = (uint8_t)child_level;
	img->l3_nalloc = 1;
	img->l3_bitmap[0] = 1; /* child 0 holds this header */
	img->l3_mask = L3_EMPTY_MASK;
	for (int l = SP_L3 + 1; l <= level; l++) {
		img->ph[l].ph_states = PH_P; /* child 0 P, children 1..7 E */
		img->ph[l].ph_mask = MASK_BELOW(l);
		img->ph[l].ph_present = 1;
		img->ph[l].ph_cmask[0] = MASK_BELOW(l - 1);
		for (int i = 1; i < 8; i++)
			img->ph[l].ph_cmask[i] = MASK_BELOW(l);
	}
	pm_copy_nt(sp_ptr(sp, off), img, sizeof(*img));
	free(img);
	tx_mark_fresh(tx);
	tx_set8(tx, slot, off | PPT_TABLE);
	tx_defer(tx, vs_window_changed, v, 1, 0); /* was E: any old mapping is stale */
	return 0;
}

int part_format_root(struct tx *tx)
{
	return split(tx, 0, tx->sp->top_level, 0);
}

struct path_ent {
	uint64_t v;
	int level;
};

/* The P partitions from the root down to the one at (v, level). */
static int path_to(struct tx *tx, uint64_t v, int level, struct path_ent *path)
{
	struct space *sp = tx->sp;
	uint64_t a = 0;
	int l = sp->top_level, depth = 0;
	for (;;) {
		path[depth++] = (struct path_ent){a, l};
		if (l == level)
			return depth;
		struct sp_ptable *h = hdr_page(tx, a);
		if (!h || l <= SP_L3)
			return -EUCLEAN;
		int i = (int)((v - a) / sp_level_size(l - 1));
		if (child_state(tx, h, l, i) != PH_P)
			return -EUCLEAN;
		a += (uint64_t)i * sp_level_size(l - 1);
		l--;
	}
}

/* After the node at path[depth-1] changed, brings masks up to date towards
 * the root, stopping as soon as one does not change (H3). */
static void propagate(struct tx *tx, struct path_ent *path, int depth)
{
	for (int d = depth - 1; d >= 0; d--) {
		struct sp_ptable *h = hdr_needed(tx, path[d].v);
		if (!h)
			return;
		uint16_t nm = own_mask(tx, h, path[d].level);
		uint16_t *slot = mask_slot(h, path[d].level);
		if (tx_get2(tx, slot) == nm)
			return;
		tx_set2(tx, slot, nm);
		if (d > 0) {
			struct sp_ptable *ph = hdr_needed(tx, path[d - 1].v);
			if (!ph)
				return;
			int i = (int)((path[d].v - path[d - 1].v) / sp_level_size(path[d].level));
			tx_set2(tx, &ph->ph[path[d - 1].level].ph_cmask[i], nm);
		}
	}
}

/* Takes a free child of the L3 whose header is h (child level n). */
static int l3_take(struct tx *tx, struct sp_ptable *h, uint64_t v, int n, uint64_t *out)
{
	uint32_t nalloc = tx_get4(tx, &h->l3_nalloc);
	if (nalloc <= 1) /* empty: may take any child size */
		tx_set1(tx, &h->l3_child_level, (uint8_t)n);
	else if (tx_get1(tx, &h->l3_child_level) != n)
		return -EAGAIN;
	uint64_t cap = l3_capacity(n);
	for (uint64_t w = 0; w * 64 < cap; w++) {
		uint64_t bits = tx_get8(tx, &h->l3_bitmap[w]);
		uint64_t free = ~bits;
		if (cap - w * 64 < 64)
			free &= (1ULL << (cap - w * 64)) - 1;
		if (!free)
			continue;
		uint64_t i = w * 64 + (uint64_t)__builtin_ctzll(free);
		tx_set8(tx, &h->l3_bitmap[w], bits | (1ULL << (i & 63)));
		tx_set4(tx, &h->l3_nalloc, nalloc + 1);
		*out = v + i * sp_level_size(n);
		return 0;
	}
	return -EAGAIN;
}

/* Fast path for small partitions: the L3 used last for this child level
 * (volatile hint) usually has room; its ancestors only change when it
 * fills up. */
static int alloc_small_hinted(struct tx *tx, int n, uint64_t *out)
{
	struct space *sp = tx->sp;
	uint64_t v = sp->l3_hint[n];
	if (v == ~0ULL)
		return -EAGAIN;
	uint64_t went = ppt_window_tx(tx, v);
	if ((went & PPT_TYPE_MASK) != PPT_TABLE)
		return -EAGAIN;
	struct sp_ptable *h = ppt_table(sp, went);
	if (!(tx_get4(tx, &h->pt_flags) & PT_F_HEADER) || tx_get8(tx, &h->pt_vaddr) != v ||
	    tx_get4(tx, &h->l3_nalloc) <= 1 || tx_get1(tx, &h->l3_child_level) != n)
		return -EAGAIN;
	uint16_t before = tx_get2(tx, &h->l3_mask);
	if (l3_take(tx, h, v, n, out))
		return -EAGAIN;
	if (l3_mask_of(tx, h) != before) {
		struct path_ent path[SP_MAX_LEVEL + 2];
		int depth = path_to(tx, v, SP_L3, path);
		if (depth < 0)
			return depth;
		propagate(tx, path, depth);
	}
	return 0;
}

int part_alloc(struct tx *tx, int n, uint64_t *out)
{
	struct space *sp = tx->sp;
	struct path_ent path[SP_MAX_LEVEL + 2];
	int depth = 0, rc;
	tx_lock_alloc(tx);
	if (n < 0 || n >= sp->top_level)
		return -EFBIG;
	if (n < SP_L3 && alloc_small_hinted(tx, n, out) == 0)
		return 0;
	uint64_t v = 0;
	int level = sp->top_level;
	struct sp_ptable *root = hdr_needed(tx, 0);
	if (!root)
		return -EUCLEAN;
	if (!(tx_get2(tx, mask_slot(root, level)) & (1u << n)))
		return -ENOSPC;
	for (;;) {
		path[depth++] = (struct path_ent){v, level};
		struct sp_ptable *h = hdr_needed(tx, v);
		if (!h)
			return -EUCLEAN;
		if (level == SP_L3) {
			if (l3_take(tx, h, v, n, out))
				return tx_damaged(tx,
						  "partition masks promise a free level-%d "
						  "partition under %#llx that is not there",
						  n, (unsigned long long)v);
			sp->l3_hint[n] = v;
			break;
		}
		int pick = -1;
		for (int i = 0; i < 8 && pick < 0; i++)
			if (child_state(tx, h, level, i) == PH_P &&
			    (child_mask(tx, h, level, i) & (1u << n)))
				pick = i;
		if (pick >= 0) {
			v += (uint64_t)pick * sp_level_size(level - 1);
			level--;
			continue;
		}
		for (int i = 1; i < 8 && pick < 0; i++)
			if (child_state(tx, h, level, i) == PH_E && level - 1 >= n)
				pick = i;
		if (pick < 0)
			return tx_damaged(tx,
					  "partition masks promise a free level-%d partition "
					  "under %#llx that is not there",
					  n, (unsigned long long)v);
		uint64_t cv = v + (uint64_t)pick * sp_level_size(level - 1);
		if (level - 1 == n) {
			set_child_leaf(tx, h, level, pick, PH_A);
			*out = cv;
			break;
		}
		rc = split(tx, cv, level - 1, n <= 2 ? n : 0);
		if (rc)
			return rc;
		uint16_t st = tx_get2(tx, &h->ph[level].ph_states);
		tx_set2(tx, &h->ph[level].ph_states,
			(uint16_t)((st & ~(3u << (2 * pick))) | (PH_P << (2 * pick))));
		tx_set2(tx, &h->ph[level].ph_cmask[pick], MASK_BELOW(level - 1));
		v = cv;
		level--;
	}
	/* The new chain's masks are exact; bring the ancestors up to date. */
	for (int d = depth - 1; d > 0; d--) {
		struct sp_ptable *h = hdr_needed(tx, path[d].v);
		struct sp_ptable *ph = hdr_needed(tx, path[d - 1].v);
		if (!h || !ph)
			return -EUCLEAN;
		uint16_t nm = own_mask(tx, h, path[d].level);
		tx_set2(tx, mask_slot(h, path[d].level), nm);
		int i = (int)((path[d].v - path[d - 1].v) / sp_level_size(path[d].level));
		tx_set2(tx, &ph->ph[path[d - 1].level].ph_cmask[i], nm);
	}
	tx_set2(tx, mask_slot(root, sp->top_level), own_mask(tx, root, sp->top_level));
	return 0;
}

/* Is the P partition (v, level) free of allocations (only its headers)? */
static int p_empty(struct tx *tx, uint64_t v, int level)
{
	struct sp_ptable *h = hdr_page(tx, v);
	if (!h)
		return 0;
	if (level == SP_L3)
		return tx_get4(tx, &h->l3_nalloc) <= 1;
	for (int i = 1; i < 8; i++)
		if (child_state(tx, h, level, i) != PH_E)
			return 0;
	return p_empty(tx, v, level - 1);
}

/* Releases the header page of a P partition that becomes E (H1, H4). */
static void collapse(struct tx *tx, uint64_t v)
{
	tx_xlate_flush(tx);
	int err;
	uint64_t *slot = ppt_window_slot(tx, v, 0, &err);
	uint64_t went = slot ? tx_get8(tx, slot) : PPT_BAD;
	if ((went & PPT_TYPE_MASK) != PPT_TABLE || !ppt_went_ok(tx->sp, went)) {
		tx_damaged(tx, "partition header of window %#llx damaged", (unsigned long long)v);
		return;
	}
	bud_free(tx, (went & ~PPT_TYPE_MASK) >> FR_PAGE_SHIFT, 0);
	tx_set8(tx, slot, PPT_NONE);
	tx_defer(tx, vs_window_changed, v, 1, 0);
	for (int n = 0; n < 3; n++)
		if (tx->sp->l3_hint[n] == v)
			tx->sp->l3_hint[n] = ~0ULL;
}

void part_free(struct tx *tx, uint64_t v, int n)
{
	struct path_ent path[SP_MAX_LEVEL + 2];
	tx_lock_alloc(tx);
	/* Holes of a large partition may be mapped (to the zero page): the next
	 * owner of these windows must find them unmapped (V1). */
	if (n >= SP_L3)
		tx_defer(tx, vs_window_changed, v, sp_level_size(n) >> FR_UNIT_SHIFT, 0);
	/* The parent: the L3 holding a small partition, else the P partition
	 * one level up. */
	int plevel = n < SP_L3 ? SP_L3 : n + 1;
	uint64_t pv = v & ~(sp_level_size(plevel) - 1);
	struct sp_ptable *h = hdr_needed(tx, pv);
	if (!h)
		return;
	int changed;
	if (plevel == SP_L3) {
		uint64_t i = (v - pv) / sp_level_size(n);
		uint16_t before = tx_get2(tx, &h->l3_mask);
		uint64_t *w = &h->l3_bitmap[i >> 6];
		tx_set8(tx, w, tx_get8(tx, w) & ~(1ULL << (i & 63)));
		tx_set4(tx, &h->l3_nalloc, tx_get4(tx, &h->l3_nalloc) - 1);
		changed = l3_mask_of(tx, h) != before;
	} else {
		int i = (int)((v - pv) / sp_level_size(n));
		set_child_leaf(tx, h, plevel, i, PH_E);
		changed = 1;
	}
	if (!changed)
		return; /* ancestors see nothing new */
	int depth = path_to(tx, pv, plevel, path);
	if (depth < 0)
		return;
	/* Collapse emptied P partitions (H2): a first child cannot go alone, but
	 * an emptied parent that is not a first child takes its whole chain. */
	int top = depth - 1;
	for (int d = depth - 1; d > 0 && p_empty(tx, path[d].v, path[d].level); d--) {
		struct path_ent parent = path[d - 1];
		int idx = (int)((path[d].v - parent.v) / sp_level_size(path[d].level));
		if (idx == 0)
			continue;
		struct sp_ptable *ph = hdr_needed(tx, parent.v);
		if (!ph)
			return;
		collapse(tx, path[d].v);
		set_child_leaf(tx, ph, parent.level, idx, PH_E);
		top = d - 1;
	}
	propagate(tx, path, top + 1);
}

int part_small_back(struct tx *tx, uint64_t vp, uint64_t *phys, int *fresh)
{
	struct space *sp = tx->sp;
	*fresh = 0;
	uint64_t went = ppt_window_tx(tx, vp);
	if ((went & PPT_TYPE_MASK) != PPT_TABLE)
		return -EUCLEAN;
	struct sp_ptable *pt = ppt_table(sp, went);
	unsigned o = (unsigned)((vp >> 12) & 511);
	uint32_t cur = tx_get4(tx, &pt->pt_pte[o]);
	if (cur) {
		if (!sp_page_ok(sp, cur))
			return tx_damaged(tx, "page table of %#llx names page %u outside the pool",
					  (unsigned long long)vp, cur);
		*phys = (uint64_t)cur << FR_PAGE_SHIFT;
		return 0;
	}
	tx_lock_alloc(tx);
	uint64_t home = tx_get8(tx, &pt->pt_home);
	uint32_t prev = o ? tx_get4(tx, &pt->pt_pte[o - 1]) : 0;
	int64_t pg = part_alloc_near(tx, home >> FR_PAGE_SHIFT, prev, o, 0);
	if (pg < 0)
		pg = bud_alloc(tx, 0);
	if (pg < 0)
		return (int)pg;
	tx_set4(tx, &pt->pt_pte[o], (uint32_t)pg);
	tx_set4(tx, &pt->pt_npages, tx_get4(tx, &pt->pt_npages) + 1);
	tx_defer(tx, vs_page_changed, vp & ~(FR_PAGE_SIZE - 1), 0, 0);
	*phys = (uint64_t)pg << FR_PAGE_SHIFT;
	*fresh = 1;
	return 0;
}

void part_small_unback(struct tx *tx, uint64_t v, uint64_t len)
{
	tx_xlate_flush(tx);
	struct space *sp = tx->sp;
	for (uint64_t p = v; p < v + len; p += FR_PAGE_SIZE) {
		uint64_t went = ppt_window_tx(tx, p);
		if ((went & PPT_TYPE_MASK) != PPT_TABLE)
			continue;
		struct sp_ptable *pt = ppt_table(sp, went);
		unsigned o = (unsigned)((p >> 12) & 511);
		uint32_t pg = tx_get4(tx, &pt->pt_pte[o]);
		if (!pg || o == 0)
			continue;
		tx_lock_alloc(tx);
		bud_free(tx, pg, 0);
		tx_set4(tx, &pt->pt_pte[o], 0);
		tx_set4(tx, &pt->pt_npages, tx_get4(tx, &pt->pt_npages) - 1);
	}
}
