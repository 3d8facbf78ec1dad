/*
 * mpool.c -- uniform metadata pools (SPFS 4.2): inodes, names by length
 * class, and dentry arrays of small directories. Each pool is a list of
 * 2 MiB blocks from the buddy allocator; entries are handed out from a free
 * list (O(1)) or, when it is empty, from the never-used tail of the active
 * block, so entries created together sit together in one block.
 * Format: meta_format.h.
 *
 * Invariants: M1 an entry handed out at least once (index < mpb_bump) is
 *               either LIVE or FREE (oob_status), and FREE entries form the
 *               pool's free list exactly;
 *             M2 mph_live counts LIVE entries, mph_total entries in blocks.
 * Validation: a pool offset read from PM (a free-list link, the active block)
 *   is used only if it is an entry slot of a block of the right pool
 *   (mp_slot_ok: block magic, id, entry size, alignment, index below the
 *   bump); fsck's walks bound every list by the entries the blocks can hold.
 * Crash argument: all words (heads, links, status, counters, block header of
 *   an existing block) change through the caller's transaction; a new block's
 *   header is written before the transaction that links it commits
 *   (tx_mark_fresh).
 * Locking: sp->alloc_lock (tx_lock_alloc).
 */
#include <errno.h>
#include <string.h>

#include "meta/meta.h"
#include "persist/pm.h"

const uint32_t mp_entry_size[MP_COUNT] = {
    [MP_INODE] = 256,	[MP_NAME64] = 64,   [MP_NAME128] = 128, [MP_NAME192] = 192,
    [MP_NAME272] = 272, [MP_DENT16] = 1152, [MP_DENT32] = 2176, [MP_DENT64] = 4224,
};

/* Format 4: the smallest buddy block that wastes little of itself (the
 * dentry arrays are larger than a page); formats 1-3: a 2 MiB unit. */
static const uint8_t block_order_v4[MP_COUNT] = {
    [MP_INODE] = 0,   [MP_NAME64] = 0, [MP_NAME128] = 0, [MP_NAME192] = 0,
    [MP_NAME272] = 0, [MP_DENT16] = 1, [MP_DENT32] = 3,	 [MP_DENT64] = 4,
};

/* Blocks of pool id are buddy blocks of this order (0 = a page): format 4
 * sizes them to the entries (mpool.c); formats 1-3 use 2 MiB units. */
static int mp_block_order(const struct meta *m, enum mp_id id)
{
	return m->sb->sb_version >= FR_FORMAT_SMALL_BLOCKS ? block_order_v4[id] : BUD_TOP_ORDER;
}

uint64_t mp_block_bytes(const struct meta *m, enum mp_id id)
{
	return FR_PAGE_SIZE << mp_block_order(m, id);
}

static uint32_t entries_per_block(const struct meta *m, enum mp_id id)
{
	return (uint32_t)((mp_block_bytes(m, id) - MPB_HDR) / mp_entry_size[id]);
}

void mp_format(struct fr_state *st)
{
	for (int i = 0; i < MP_COUNT; i++) {
		struct mp_head h = {.mph_entry_size = mp_entry_size[i],
				    .mph_id = (uint32_t)i,
				    .mph_block_order = block_order_v4[i]};
		pm_copy_flush(&st->st_pools[i], &h, sizeof(h));
	}
}

int mp_head_check(const struct meta *m, enum mp_id id)
{
	const struct mp_head *h = &m->st->st_pools[id];
	uint32_t want = m->sb->sb_version >= FR_FORMAT_SMALL_BLOCKS ? block_order_v4[id] : 0;
	return h->mph_entry_size == mp_entry_size[id] && h->mph_id == (uint32_t)id &&
	       h->mph_block_order == want;
}

/* Is b the offset of a block of pool id (aligned to the pool's block size,
 * in the data area, with a header that matches)? */
static int mp_block_ok(struct meta *m, enum mp_id id, uint64_t b)
{
	uint64_t bytes = mp_block_bytes(m, id);
	if (b & (bytes - 1) || !sp_data_range_ok(&m->sp, b, bytes))
		return 0;
	const struct mp_block *blk = meta_ptr(m, b);
	return blk->mpb_magic == MPB_MAGIC && blk->mpb_id == (uint32_t)id &&
	       blk->mpb_entry_size == mp_entry_size[id] &&
	       blk->mpb_nentries == entries_per_block(m, id) && blk->mpb_bump <= blk->mpb_nentries;
}

/* Is off an entry slot of a block of pool id that was handed out (index below
 * the block's bump, as tx sees it if tx is not NULL)? Says nothing of its
 * status. */
static int mp_slot_ok_tx(struct meta *m, struct tx *tx, enum mp_id id, uint64_t off)
{
	uint64_t block = off & ~(mp_block_bytes(m, id) - 1);
	if (!mp_block_ok(m, id, block))
		return 0;
	const struct mp_block *b = meta_ptr(m, block);
	uint64_t rel = off - block;
	uint32_t bump = tx ? tx_get4(tx, &b->mpb_bump) : b->mpb_bump;
	return rel >= MPB_HDR && (rel - MPB_HDR) % mp_entry_size[id] == 0 &&
	       (rel - MPB_HDR) / mp_entry_size[id] < bump;
}

static int mp_slot_ok(struct meta *m, enum mp_id id, uint64_t off)
{
	return mp_slot_ok_tx(m, NULL, id, off);
}

static int new_block(struct meta *m, struct tx *tx, struct mp_head *h, enum mp_id id)
{
	int64_t u = bud_alloc(tx, mp_block_order(m, id));
	if (u < 0)
		return u == -EUCLEAN ? (int)u : fr_err(-ENOSPC, "no space left for metadata");
	uint64_t off = (uint64_t)u << FR_PAGE_SHIFT;
	struct mp_block img = {
	    .mpb_magic = MPB_MAGIC,
	    .mpb_id = id,
	    .mpb_entry_size = mp_entry_size[id],
	    .mpb_nentries = entries_per_block(m, id),
	    .mpb_bump = 0,
	    .mpb_next = tx_get8(tx, &h->mph_block_head),
	};
	pm_copy_flush(meta_ptr(m, off), &img, sizeof(img));
	tx_mark_fresh(tx);
	tx_set8(tx, &h->mph_block_head, off);
	tx_set8(tx, &h->mph_active, off);
	tx_set8(tx, &h->mph_total, tx_get8(tx, &h->mph_total) + img.mpb_nentries);
	return 0;
}

int mp_alloc(struct meta *m, struct tx *tx, enum mp_id id, uint64_t *out, int *reused)
{
	struct mp_head *h = &m->st->st_pools[id];
	tx_lock_alloc(tx);
	uint64_t off = tx_get8(tx, &h->mph_free_head);
	if (reused)
		*reused = off != 0;
	if (off) {
		if (!mp_slot_ok(m, id, off) ||
		    tx_get4(tx, &((struct mp_oob *)meta_ptr(m, off))->oob_status) != MP_FREE)
			return tx_damaged(tx, "metadata pool %d: free list damaged at %#llx", id,
					  (unsigned long long)off);
		struct mp_oob *o = meta_ptr(m, off);
		tx_set8(tx, &h->mph_free_head, tx_get8(tx, &o->oob_next));
	} else {
		uint64_t b = tx_get8(tx, &h->mph_active);
		if (b && !mp_block_ok(m, id, b))
			return tx_damaged(tx, "metadata pool %d: active block %#llx damaged", id,
					  (unsigned long long)b);
		struct mp_block *blk = b ? meta_ptr(m, b) : NULL;
		if (!blk || tx_get4(tx, &blk->mpb_bump) >= blk->mpb_nentries) {
			int rc = new_block(m, tx, h, id);
			if (rc)
				return rc;
			b = tx_get8(tx, &h->mph_active);
			blk = meta_ptr(m, b);
		}
		uint32_t i = tx_get4(tx, &blk->mpb_bump);
		tx_set4(tx, &blk->mpb_bump, i + 1);
		off = b + MPB_HDR + (uint64_t)i * mp_entry_size[id];
	}
	struct mp_oob *o = meta_ptr(m, off);
	struct mp_oob live = {.oob_status = MP_LIVE, .oob_pool = id, .oob_next = 0};
	tx_set(tx, o, &live, sizeof(live));
	tx_set8(tx, &h->mph_live, tx_get8(tx, &h->mph_live) + 1);
	*out = off;
	return 0;
}

static void mp_free_now(struct space *sp, uint64_t mp, uint64_t txp, uint64_t packed)
{
	struct meta *m = (struct meta *)(uintptr_t)mp;
	struct tx *tx = (struct tx *)(uintptr_t)txp;
	enum mp_id id = (enum mp_id)(packed >> 58);
	uint64_t off = packed & ((1ULL << 58) - 1);
	struct mp_head *h = &m->st->st_pools[id];
	struct mp_oob *o = meta_ptr(m, off);
	struct mp_oob dead = {
	    .oob_status = MP_FREE, .oob_pool = id, .oob_next = tx_get8(tx, &h->mph_free_head)};
	tx_set(tx, o, &dead, sizeof(dead));
	tx_set8(tx, &h->mph_free_head, off);
	tx_set8(tx, &h->mph_live, tx_get8(tx, &h->mph_live) - 1);
}

void mp_free(struct meta *m, struct tx *tx, enum mp_id id, uint64_t off)
{
	tx_lock_alloc(tx);
	tx_free_later(tx, mp_free_now, (uint64_t)(uintptr_t)m, (uint64_t)(uintptr_t)tx,
		      off | ((uint64_t)id << 58));
}

int mp_entry_valid(struct meta *m, enum mp_id id, uint64_t off)
{
	return mp_entry_valid_tx(m, NULL, id, off);
}

int mp_entry_valid_tx(struct meta *m, struct tx *tx, enum mp_id id, uint64_t off)
{
	if ((unsigned)id >= MP_COUNT || !mp_slot_ok_tx(m, tx, id, off))
		return 0;
	const struct mp_oob *o = meta_ptr(m, off);
	if (!tx)
		return o->oob_status == MP_LIVE && o->oob_pool == (uint32_t)id;
	return tx_get4(tx, &o->oob_status) == MP_LIVE && tx_get4(tx, &o->oob_pool) == (uint32_t)id;
}

int mp_each_live(struct meta *m, enum mp_id id, int (*fn)(void *arg, uint64_t off), void *arg)
{
	uint64_t most = (m->sp.data_end_page - m->sp.data_page) >> mp_block_order(m, id);
	uint64_t nblocks = 0;
	for (uint64_t b = m->st->st_pools[id].mph_block_head; b; nblocks++) {
		if (nblocks >= most || !mp_block_ok(m, id, b))
			return -EUCLEAN;
		const struct mp_block *blk = meta_ptr(m, b);
		for (uint32_t i = 0; i < blk->mpb_bump; i++) {
			uint64_t off = b + MPB_HDR + (uint64_t)i * mp_entry_size[id];
			const struct mp_oob *o = meta_ptr(m, off);
			if (o->oob_status == MP_LIVE && o->oob_pool == (uint32_t)id && fn(arg, off))
				return 0;
		}
		b = blk->mpb_next;
	}
	return 0;
}

int mp_walk(struct meta *m, void (*visit)(void *, int, uint64_t, int), void *arg,
	    void (*block_cb)(void *, uint64_t, uint64_t), fr_report_fn report, void *rarg)
{
	int bad = 0;
	uint64_t data_lo = m->sp.data_page << FR_PAGE_SHIFT,
		 data_hi = m->sp.data_end_page << FR_PAGE_SHIFT;
	for (int id = 0; id < MP_COUNT; id++) {
		struct mp_head *h = &m->st->st_pools[id];
		uint64_t total = 0, live = 0, nfree = 0, nblocks = 0;
		int active_seen = h->mph_active == 0;
		for (uint64_t b = h->mph_block_head; b; nblocks++) {
			if (b < data_lo || b >= data_hi ||
			    nblocks > (data_hi >> (FR_PAGE_SHIFT + mp_block_order(m, id)))) {
				fr_report(report, rarg, "metadata pool %d: block list damaged", id);
				bad++;
				break;
			}
			const struct mp_block *blk = meta_ptr(m, b);
			if (!mp_block_ok(m, (enum mp_id)id, b)) {
				fr_report(report, rarg, "metadata pool %d: block at %#llx damaged",
					  id, (unsigned long long)b);
				bad++;
				break;
			}
			if (block_cb)
				block_cb(arg, b, 1ULL << mp_block_order(m, id));
			if (b == h->mph_active)
				active_seen = 1;
			total += blk->mpb_nentries;
			for (uint32_t i = 0; i < blk->mpb_bump; i++) {
				uint64_t off = b + MPB_HDR + (uint64_t)i * mp_entry_size[id];
				const struct mp_oob *o = meta_ptr(m, off);
				if (o->oob_status == MP_LIVE && o->oob_pool == (uint32_t)id) {
					live++;
					if (visit)
						visit(arg, id, off, 1);
				} else if (o->oob_status == MP_FREE) {
					nfree++;
					if (visit)
						visit(arg, id, off, 0);
				} else {
					fr_report(
					    report, rarg,
					    "metadata pool %d: entry at %#llx has a bad status", id,
					    (unsigned long long)off);
					bad++;
				}
			}
			b = blk->mpb_next;
		}
		if (!active_seen) {
			fr_report(report, rarg, "metadata pool %d: active block not in its list",
				  id);
			bad++;
		}
		if (total != h->mph_total || live != h->mph_live) {
			fr_report(report, rarg,
				  "metadata pool %d: counts (total %llu, live %llu) do not match "
				  "its blocks (%llu, %llu)",
				  id, (unsigned long long)h->mph_total,
				  (unsigned long long)h->mph_live, (unsigned long long)total,
				  (unsigned long long)live);
			bad++;
		}
		/* The free list must hold exactly the FREE entries. */
		uint64_t n = 0;
		for (uint64_t f = h->mph_free_head; f; n++) {
			if (n > nfree || !mp_slot_ok(m, (enum mp_id)id, f) ||
			    ((const struct mp_oob *)meta_ptr(m, f))->oob_status != MP_FREE) {
				fr_report(report, rarg, "metadata pool %d: free list damaged", id);
				bad++;
				n = nfree;
				break;
			}
			f = ((const struct mp_oob *)meta_ptr(m, f))->oob_next;
		}
		if (n != nfree) {
			fr_report(report, rarg,
				  "metadata pool %d: %llu free entries but %llu on the free list",
				  id, (unsigned long long)nfree, (unsigned long long)n);
			bad++;
		}
	}
	return bad;
}
