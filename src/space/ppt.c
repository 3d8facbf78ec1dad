/*
 * ppt.c -- the persistent page table (ctFS 3.3): maps vspace windows to pool
 * memory. Three directory levels (512 GiB, 1 GiB, 2 MiB per entry) end in a
 * window entry that is either a whole 2 MiB unit (PPT_HUGE) or a page table
 * page with 512 page numbers (PPT_TABLE). Format: space_format.h.
 *
 * Invariants: Q1 a directory entry is 0 or points to a directory page owned
 *               by exactly this entry;
 *             Q2 every unit or page referenced by a window entry or pte is
 *               allocated in the buddy allocator and referenced once;
 *             Q3 pt_vaddr of a table page names the window that points to it.
 * Validation (the pool is untrusted input): an entry read from PM becomes an
 *   address only after its check -- a directory entry is PPT_DIR and names a
 *   page of the data area, a window entry is 0, a unit-aligned unit of the
 *   data area (PPT_HUGE) or a page of it (PPT_TABLE), a pte is 0 or a data
 *   page. ppt_window() returns PPT_BAD for anything else and the page
 *   lookups return 0 (not backed) for a bad pte; the callers that map or
 *   change a window report -EUCLEAN.
 * Crash argument: entries change only inside the caller's transaction; a
 *   directory page is zeroed and fenced (tx_mark_fresh) before the entry that
 *   makes it reachable can commit. ppt_move/ppt_swap rewrite whole entries,
 *   so the redo log replays them idempotently (ctFS pswap with the redo log).
 */
#include <errno.h>
#include <string.h>

#include "persist/pm.h"
#include "space/space.h"

#define IDX0(v) (((v) >> 39) & 511)
#define IDX1(v) (((v) >> 30) & 511)
#define IDX2(v) (((v) >> 21) & 511)

static inline uint64_t *dir_page(struct space *sp, uint64_t ent)
{
	return (uint64_t *)sp_ptr(sp, ent & ~PPT_TYPE_MASK);
}

static int dir_ent_ok(const struct space *sp, uint64_t e)
{
	uint64_t off = e & ~PPT_TYPE_MASK;
	return (e & PPT_TYPE_MASK) == PPT_DIR && !(off & (FR_PAGE_SIZE - 1)) &&
	       sp_data_range_ok(sp, off, FR_PAGE_SIZE);
}

int ppt_went_ok(const struct space *sp, uint64_t went)
{
	uint64_t off = went & ~PPT_TYPE_MASK;
	switch (went & PPT_TYPE_MASK) {
	case PPT_NONE:
		return went == 0;
	case PPT_HUGE:
		return !(off & (FR_UNIT_SIZE - 1)) && sp_data_range_ok(sp, off, FR_UNIT_SIZE);
	case PPT_TABLE:
		return !(off & (FR_PAGE_SIZE - 1)) && sp_data_range_ok(sp, off, FR_PAGE_SIZE);
	default:
		return 0;
	}
}

uint64_t ppt_window(struct space *sp, uint64_t v)
{
	uint64_t *root = (uint64_t *)sp_ptr(sp, sp->hdr->sph_ppt_root);
	uint64_t e = __atomic_load_n(&root[IDX0(v)], __ATOMIC_ACQUIRE);
	if (!e)
		return PPT_NONE;
	if (!dir_ent_ok(sp, e))
		return PPT_BAD;
	e = __atomic_load_n(&dir_page(sp, e)[IDX1(v)], __ATOMIC_ACQUIRE);
	if (!e)
		return PPT_NONE;
	if (!dir_ent_ok(sp, e))
		return PPT_BAD;
	e = __atomic_load_n(&dir_page(sp, e)[IDX2(v)], __ATOMIC_ACQUIRE);
	return ppt_went_ok(sp, e) ? e : PPT_BAD;
}

uint64_t ppt_window_tx(struct tx *tx, uint64_t v)
{
	int err;
	uint64_t *slot = ppt_window_slot(tx, v, 0, &err);
	if (!slot)
		return err ? PPT_BAD : PPT_NONE;
	uint64_t e = tx_get8(tx, slot);
	return ppt_went_ok(tx->sp, e) ? e : PPT_BAD;
}

static uint64_t *next_level(struct tx *tx, uint64_t *ent, int create, int *err)
{
	struct space *sp = tx->sp;
	uint64_t e = tx_get8(tx, ent);
	if (e) {
		if (dir_ent_ok(sp, e))
			return dir_page(sp, e);
		*err = fr_err(-EUCLEAN,
			      "page table damaged: directory entry %#llx at pool "
			      "offset %#llx",
			      (unsigned long long)e, (unsigned long long)sp_off(sp, ent));
		return NULL;
	}
	if (!create)
		return NULL;
	int64_t pg = bud_alloc(tx, 0);
	if (pg < 0) {
		*err = (int)pg;
		return NULL;
	}
	uint64_t off = (uint64_t)pg << FR_PAGE_SHIFT;
	pm_zero_nt(sp_ptr(sp, off), FR_PAGE_SIZE);
	tx_mark_fresh(tx);
	tx_set8(tx, ent, off | PPT_DIR);
	return (uint64_t *)sp_ptr(sp, off);
}

uint64_t *ppt_window_slot(struct tx *tx, uint64_t v, int create, int *err)
{
	struct space *sp = tx->sp;
	*err = 0;
	uint64_t *root = (uint64_t *)sp_ptr(sp, sp->hdr->sph_ppt_root);
	uint64_t *pud = next_level(tx, &root[IDX0(v)], create, err);
	if (!pud)
		return NULL;
	uint64_t *pmd = next_level(tx, &pud[IDX1(v)], create, err);
	if (!pmd)
		return NULL;
	return &pmd[IDX2(v)];
}

static uint64_t page_in_window(struct space *sp, uint64_t went, uint64_t v)
{
	switch (went & PPT_TYPE_MASK) {
	case PPT_HUGE:
		return (went & ~PPT_TYPE_MASK) + (v & (FR_UNIT_SIZE - 1) & ~(FR_PAGE_SIZE - 1));
	case PPT_TABLE: {
		uint32_t pte = ppt_table(sp, went)->pt_pte[(v >> 12) & 511];
		return sp_page_ok(sp, pte) ? (uint64_t)pte << FR_PAGE_SHIFT : 0;
	}
	default:
		return 0;
	}
}

uint64_t ppt_page(struct space *sp, uint64_t v)
{
	return page_in_window(sp, ppt_window(sp, v), v);
}

/* Translations are cached per transaction: a directory operation resolves
 * the same few pages again and again. Only backed pages are cached, and any
 * change that could move or drop one flushes the cache (tx_xlate_flush). */
uint64_t ppt_page_tx(struct tx *tx, uint64_t v)
{
	uint64_t vp = v >> FR_PAGE_SHIFT;
	for (int i = 0; i < TX_XLATE; i++)
		if (tx->xl_v[i] == vp)
			return tx->xl_p[i];
	uint64_t went = ppt_window_tx(tx, v), phys;
	if ((went & PPT_TYPE_MASK) == PPT_TABLE) {
		struct sp_ptable *pt = ppt_table(tx->sp, went);
		uint32_t pte = tx_get4(tx, &pt->pt_pte[(v >> 12) & 511]);
		phys = sp_page_ok(tx->sp, pte) ? (uint64_t)pte << FR_PAGE_SHIFT : 0;
	} else {
		phys = page_in_window(tx->sp, went, v);
	}
	if (phys) {
		uint32_t i = tx->xl_next++ % TX_XLATE;
		tx->xl_v[i] = vp;
		tx->xl_p[i] = phys;
	}
	return phys;
}

/* Table pages remember their window (Q3); keep that true when moving. */
static void retarget_table(struct tx *tx, uint64_t went, uint64_t v)
{
	if ((went & PPT_TYPE_MASK) == PPT_TABLE)
		tx_set8(tx, &ppt_table(tx->sp, went)->pt_vaddr, v);
}

static int whole_gib(uint64_t a, uint64_t b, uint64_t bytes)
{
	return ((a | b | bytes) & (FR_GIB - 1)) == 0;
}

/* Exchanges the PUD entries of two 1 GiB-aligned ranges. */
static int swap_gib(struct tx *tx, uint64_t a, uint64_t b, uint64_t bytes)
{
	struct space *sp = tx->sp;
	uint64_t *root = (uint64_t *)sp_ptr(sp, sp->hdr->sph_ppt_root);
	for (uint64_t d = 0; d < bytes; d += FR_GIB) {
		int err = 0;
		uint64_t *pa = next_level(tx, &root[IDX0(a + d)], 1, &err);
		if (!pa)
			return err;
		uint64_t *pb = next_level(tx, &root[IDX0(b + d)], 1, &err);
		if (!pb)
			return err;
		uint64_t *ea = &pa[IDX1(a + d)], *eb = &pb[IDX1(b + d)];
		uint64_t va = tx_get8(tx, ea), vb = tx_get8(tx, eb);
		tx_set8(tx, ea, vb);
		tx_set8(tx, eb, va);
		for (int i = 0; i < PPT_ENTRIES; i++) {
			uint64_t w = FR_UNIT_SIZE * (uint64_t)i;
			if (vb)
				retarget_table(tx, tx_get8(tx, &dir_page(sp, vb)[i]), a + d + w);
			if (va)
				retarget_table(tx, tx_get8(tx, &dir_page(sp, va)[i]), b + d + w);
		}
	}
	return 0;
}

/* Exchanges the mappings of two equally sized, window-aligned ranges. */
static int ppt_swap(struct tx *tx, uint64_t a, uint64_t b, uint64_t npages)
{
	tx_xlate_flush(tx);
	uint64_t bytes = npages << FR_PAGE_SHIFT;
	if (((a | b | bytes) & (FR_UNIT_SIZE - 1)) != 0)
		return -EINVAL;
	if (whole_gib(a, b, bytes))
		return swap_gib(tx, a, b, bytes);
	for (uint64_t d = 0; d < bytes; d += FR_UNIT_SIZE) {
		int err = 0;
		uint64_t *ea = ppt_window_slot(tx, a + d, 1, &err);
		if (!ea)
			return err;
		uint64_t *eb = ppt_window_slot(tx, b + d, 1, &err);
		if (!eb)
			return err;
		uint64_t va = tx_get8(tx, ea), vb = tx_get8(tx, eb);
		tx_set8(tx, ea, vb);
		tx_set8(tx, eb, va);
		retarget_table(tx, vb, a + d);
		retarget_table(tx, va, b + d);
	}
	return 0;
}

int ppt_move(struct tx *tx, uint64_t src, uint64_t dst, uint64_t npages)
{
	/* pswap with an empty destination: the source ends up unmapped. */
	return ppt_swap(tx, src, dst, npages);
}

int ppt_check_dirs(struct space *sp, void (*visit)(void *, uint64_t, uint64_t), void *arg)
{
	/* visit(arg, v, entry): v = vspace offset of a window or, for a
	 * directory page, ~0 and entry = its pool offset. */
	uint64_t *root = (uint64_t *)sp_ptr(sp, sp->hdr->sph_ppt_root);
	visit(arg, ~0ULL, sp->hdr->sph_ppt_root);
	uint64_t n0 = (sp->vsize + (1ULL << 39) - 1) >> 39;
	for (uint64_t i = 0; i < 512; i++) {
		uint64_t e0 = root[i];
		if (!e0)
			continue;
		if (i >= n0 || !dir_ent_ok(sp, e0))
			return -EUCLEAN;
		visit(arg, ~0ULL, e0 & ~PPT_TYPE_MASK);
		uint64_t *pud = dir_page(sp, e0);
		for (uint64_t j = 0; j < 512; j++) {
			uint64_t e1 = pud[j];
			if (!e1)
				continue;
			if (!dir_ent_ok(sp, e1))
				return -EUCLEAN;
			visit(arg, ~0ULL, e1 & ~PPT_TYPE_MASK);
			uint64_t *pmd = dir_page(sp, e1);
			for (uint64_t k = 0; k < 512; k++)
				if (pmd[k])
					visit(arg, (i << 39) | (j << 30) | (k << 21), pmd[k]);
		}
	}
	return 0;
}

/* Directory entry idx of a PPT directory page as the transaction sees it, if
 * it names a well-formed directory page; NULL otherwise (absent, or damaged:
 * fsck's to report). */
static uint64_t *tx_dir_at(struct tx *tx, uint64_t *dir, uint64_t idx)
{
	uint64_t e = tx_get8(tx, &dir[idx]);
	return dir_ent_ok(tx->sp, e) ? dir_page(tx->sp, e) : NULL;
}

int ppt_each_table(struct tx *tx, int (*visit)(void *, uint64_t, struct sp_ptable *), void *arg)
{
	struct space *sp = tx->sp;
	uint64_t n0 = (sp->vsize + (1ULL << 39) - 1) >> 39;
	uint64_t *root = (uint64_t *)sp_ptr(sp, sp->hdr->sph_ppt_root);
	for (uint64_t i = 0; i < n0 && i < 512; i++) {
		uint64_t *pud = tx_dir_at(tx, root, i);
		for (uint64_t j = 0; pud && j < 512; j++) {
			uint64_t *pmd = tx_dir_at(tx, pud, j);
			for (uint64_t k = 0; pmd && k < 512; k++) {
				uint64_t went = tx_get8(tx, &pmd[k]);
				uint64_t vw = (i << 39) | (j << 30) | (k << 21);
				if ((went & PPT_TYPE_MASK) != PPT_TABLE || !ppt_went_ok(sp, went))
					continue;
				struct sp_ptable *pt = ppt_table(sp, went);
				if (tx_get8(tx, &pt->pt_magic) != PT_MAGIC ||
				    tx_get8(tx, &pt->pt_vaddr) != vw)
					continue;
				if (visit(arg, vw, pt) || tx_status(tx))
					return 1;
			}
		}
	}
	return 0;
}
