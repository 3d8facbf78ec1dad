/*
 * space.c -- formatting and attaching the space layer: the space header,
 * the buddy bitmaps and the root of the partition tree.
 * Format: space_format.h; layout of the whole pool: docs/format.md.
 *
 * Invariants: S1 the buddy manages [data_page, data_page + data_npages), a
 *               whole number of 2 MiB units starting on a unit boundary;
 *             S2 the space header's geometry never changes after mkfs.
 * Crash argument: sp_format runs before the superblock is written, so a
 *   crash during mkfs leaves a pool that does not mount (and says so).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "persist/pm.h"
#include "space/space.h"

struct bm_layout {
	uint64_t bitmap_off[BUD_ORDERS], summary_off[BUD_ORDERS], nwords[BUD_ORDERS];
	uint64_t end;
};

static void bm_layout(uint64_t start, uint64_t npages, struct bm_layout *l)
{
	uint64_t off = FR_ALIGN_UP(start, 64);
	for (int k = 0; k < BUD_ORDERS; k++) {
		uint64_t nbits = npages >> k;
		l->nwords[k] = (nbits + 63) / 64;
		l->bitmap_off[k] = off;
		off = FR_ALIGN_UP(off + l->nwords[k] * 8, 64);
		l->summary_off[k] = off;
		off = FR_ALIGN_UP(off + (l->nwords[k] + 63) / 64 * 8, 64);
	}
	l->end = off;
}

int sp_format(struct pool *p, uint64_t hdr_off, uint64_t meta_end, uint64_t *reserved_end)
{
	uint64_t total_pages = p->size >> FR_PAGE_SHIFT;
	struct bm_layout l;
	bm_layout(meta_end, total_pages, &l); /* upper bound on bitmap size */
	uint64_t data_start = FR_ALIGN_UP(l.end, FR_UNIT_SIZE);
	if (data_start + 4 * FR_UNIT_SIZE > p->size)
		return fr_err(-ENOSPC, "pool too small: %llu bytes (need at least %llu)",
			      (unsigned long long)p->size,
			      (unsigned long long)(data_start + 4 * FR_UNIT_SIZE));
	uint64_t npages = FR_ALIGN_DOWN((p->size - data_start) >> FR_PAGE_SHIFT, 512ULL);
	bm_layout(meta_end, npages, &l);

	char *base = p->base;
	pm_zero_nt(base + meta_end, data_start - meta_end);
	uint64_t *top = (uint64_t *)(base + l.bitmap_off[BUD_TOP_ORDER]);
	uint64_t *tsum = (uint64_t *)(base + l.summary_off[BUD_TOP_ORDER]);
	for (uint64_t u = 0; u < npages / 512; u++) {
		pm_store8(&top[u >> 6], top[u >> 6] | (1ULL << (u & 63)));
		pm_store8(&tsum[u >> 12], tsum[u >> 12] | (1ULL << ((u >> 6) & 63)));
	}
	pm_flush(top, l.nwords[BUD_TOP_ORDER] * 8);
	pm_flush(tsum, (l.nwords[BUD_TOP_ORDER] + 63) / 64 * 8);

	struct sp_header h;
	memset(&h, 0, sizeof(h));
	h.sph_magic = SPH_MAGIC;
	h.sph_data_page = data_start >> FR_PAGE_SHIFT;
	h.sph_data_npages = npages;
	h.sph_free_pages = npages;
	for (int k = 0; k < BUD_ORDERS; k++) {
		h.sph_bitmap_off[k] = l.bitmap_off[k];
		h.sph_summary_off[k] = l.summary_off[k];
		h.sph_nwords[k] = l.nwords[k];
	}
	h.sph_top_level = (uint32_t)sp_top_level_for(p->size);
	h.sph_vspace_size = sp_level_size((int)h.sph_top_level);
	pm_copy_flush(base + hdr_off, &h, sizeof(h));
	pm_fence();

	/* The PPT root and the root partition, built with a transaction that is
	 * applied without the log (nothing is published yet). */
	struct space *sp = calloc(1, sizeof(*sp));
	struct tx *tx = malloc(sizeof(*tx));
	int rc = -ENOMEM;
	if (!sp || !tx)
		goto out;
	rc = sp_attach(sp, p, hdr_off);
	if (rc)
		goto out;
	tx_init(tx, sp, base, &sp->alloc_lock);
	tx_begin(tx);
	int64_t root = bud_alloc(tx, 0);
	if (root < 0) {
		tx_abort(tx);
		rc = (int)root;
		goto detach;
	}
	pm_zero_nt(base + ((uint64_t)root << FR_PAGE_SHIFT), FR_PAGE_SIZE);
	tx_apply_unlogged(tx);
	pm_publish8(&sp->hdr->sph_ppt_root, (uint64_t)root << FR_PAGE_SHIFT);
	tx_begin(tx);
	rc = part_format_root(tx);
	if (rc)
		tx_abort(tx);
	else
		tx_apply_unlogged(tx);
detach:
	sp_detach(sp);
out:
	free(tx);
	free(sp);
	*reserved_end = data_start;
	return rc;
}

int sp_header_check(struct pool *p, uint64_t hdr_off, uint64_t meta_end)
{
	const struct sp_header *h = (const struct sp_header *)(p->base + hdr_off);
	uint64_t end = (h->sph_data_page + h->sph_data_npages) << FR_PAGE_SHIFT;
	if (h->sph_magic != SPH_MAGIC)
		return fr_err(-EUCLEAN, "space header damaged (bad magic)");
	if (h->sph_data_npages % 512 || h->sph_data_page % 512 || end > p->size ||
	    end < h->sph_data_page || h->sph_data_npages == 0)
		return fr_err(-EUCLEAN, "space header damaged (data area outside the pool)");
	struct bm_layout l;
	uint64_t data_start = h->sph_data_page << FR_PAGE_SHIFT;
	for (int k = 0; k < BUD_ORDERS; k++) {
		bm_layout(h->sph_bitmap_off[0], h->sph_data_npages, &l);
		if (h->sph_bitmap_off[k] != l.bitmap_off[k] ||
		    h->sph_summary_off[k] != l.summary_off[k] || h->sph_nwords[k] != l.nwords[k] ||
		    l.end > data_start || h->sph_bitmap_off[0] < hdr_off + FR_PAGE_SIZE ||
		    h->sph_bitmap_off[0] < meta_end)
			return fr_err(-EUCLEAN, "space header damaged (allocator layout)");
	}
	if (h->sph_top_level < 9 || h->sph_top_level > 11 ||
	    h->sph_vspace_size != sp_level_size((int)h->sph_top_level))
		return fr_err(-EUCLEAN, "space header damaged (partition geometry)");
	if (h->sph_ppt_root < data_start || h->sph_ppt_root >= end || h->sph_ppt_root & 4095)
		return fr_err(-EUCLEAN, "space header damaged (page table root)");
	if (h->sph_free_pages > h->sph_data_npages)
		return fr_err(-EUCLEAN, "space header damaged (free page count)");
	return 0;
}

int sp_attach(struct space *sp, struct pool *p, uint64_t hdr_off)
{
	memset(sp, 0, sizeof(*sp));
	sp->pool = p;
	sp->base = p->base;
	sp->hdr = (struct sp_header *)(p->base + hdr_off);
	sp->data_page = sp->hdr->sph_data_page;
	sp->data_end_page = sp->data_page + sp->hdr->sph_data_npages;
	for (int k = 0; k < BUD_ORDERS; k++) {
		sp->bitmap[k] = (uint64_t *)(p->base + sp->hdr->sph_bitmap_off[k]);
		sp->summary[k] = (uint64_t *)(p->base + sp->hdr->sph_summary_off[k]);
		sp->nwords[k] = sp->hdr->sph_nwords[k];
		sp->nsumwords[k] = (sp->nwords[k] + 63) / 64;
	}
	sp->top_level = (int)sp->hdr->sph_top_level;
	sp->vsize = sp->hdr->sph_vspace_size;
	pthread_mutex_init(&sp->alloc_lock, NULL);
	for (int n = 0; n < 3; n++)
		sp->l3_hint[n] = ~0ULL;
	return 0;
}

void sp_detach(struct space *sp)
{
	if (sp->vreserve)
		vs_fini(sp);
	pthread_mutex_destroy(&sp->alloc_lock);
}
