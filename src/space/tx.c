/*
 * tx.c -- redo transaction staging (see tx.h for the contract).
 * Invariants: T1 every staged word is 8-byte aligned and appears once in
 *               off[] (later stores to the same word overwrite val[]);
 *             T2 nothing in the pool is written by this module.
 * Crash argument: none needed -- staging is volatile; durability and
 *   atomicity come from meta/log.c.
 */
#include "space/tx.h"

#include <assert.h>
#include <string.h>

#include "persist/pm.h"
#include "util/util.h"

void tx_init(struct tx *tx, struct space *sp, char *base, pthread_mutex_t *alloc_lock)
{
	memset(tx->page, 0, sizeof(tx->page));
	tx->npages_used = 0;
	tx->pages_overflow = 0;
	tx->nfrees = 0;
	tx->finalizing = 0;
	memset(tx->slot, 0, sizeof(tx->slot));
	tx->sp = sp;
	tx->base = base;
	tx->alloc_lock = alloc_lock;
	tx->alloc_locked = 0;
	tx->nwords = 0;
	tx->nhash_used = 0;
	tx->ndefer = 0;
	tx->fresh = 0;
	tx->overflow = 0;
}

static void tx_reset(struct tx *tx)
{
	for (uint32_t i = 0; i < tx->npages_used; i++)
		tx->page[tx->page_used[i]] = 0;
	tx->npages_used = 0;
	tx->pages_overflow = 0;
	tx->nfrees = 0;
	tx->finalizing = 0;
	for (uint32_t i = 0; i < tx->nhash_used; i++)
		tx->slot[tx->used_slots[i]] = 0;
	tx->nhash_used = 0;
	tx->nwords = 0;
	tx->ndefer = 0;
	tx->fresh = 0;
	tx->overflow = 0;
}

void tx_begin(struct tx *tx)
{
	assert(tx->nwords == 0 && !tx->alloc_locked);
	tx_reset(tx);
}

void tx_lock_alloc(struct tx *tx)
{
	if (!tx->alloc_locked) {
		pthread_mutex_lock(tx->alloc_lock);
		tx->alloc_locked = 1;
	}
}

static void tx_unlock_alloc(struct tx *tx)
{
	if (tx->alloc_locked) {
		tx->alloc_locked = 0;
		pthread_mutex_unlock(tx->alloc_lock);
	}
}

void tx_abort(struct tx *tx)
{
	tx_reset(tx);
	tx_unlock_alloc(tx);
}

void tx_finish(struct tx *tx)
{
	uint32_t n = tx->ndefer;
	tx_reset(tx);
	/* Deferred actions (mapping updates) run before the allocator lock is
	 * dropped: once it is, a window or unit this transaction released can
	 * be handed to another file, which must not find a stale mapping. */
	for (uint32_t i = 0; i < n; i++)
		tx->defer[i].fn(tx->sp, tx->defer[i].a, tx->defer[i].b, tx->defer[i].c);
	tx_unlock_alloc(tx);
}

void tx_free_later(struct tx *tx, tx_defer_fn fn, uint64_t a, uint64_t b, uint64_t c)
{
	if (tx->finalizing) {
		fn(tx->sp, a, b, c);
		return;
	}
	if (tx->nfrees >= TX_MAX_FREES) {
		tx->overflow = 1;
		return;
	}
	tx->frees[tx->nfrees++] = (struct tx_free){fn, a, b, c};
}

void tx_finalize(struct tx *tx)
{
	tx->finalizing = 1;
	for (uint32_t i = 0; i < tx->nfrees; i++)
		tx->frees[i].fn(tx->sp, tx->frees[i].a, tx->frees[i].b, tx->frees[i].c);
	tx->nfrees = 0;
}

void tx_defer(struct tx *tx, tx_defer_fn fn, uint64_t a, uint64_t b, uint64_t c)
{
	if (tx->ndefer >= TX_MAX_DEFER) {
		tx->overflow = 1;
		return;
	}
	tx->defer[tx->ndefer++] = (struct tx_defer){fn, a, b, c};
}

static inline uint32_t page_hash(uint64_t pg)
{
	return (uint32_t)((pg * 0x9e3779b97f4a7c15ULL) >> 40) & (TX_PAGE_SLOTS - 1);
}

/* Remembers that the page holding off has staged words. */
static void page_note(struct tx *tx, uint64_t off)
{
	uint64_t pg = (off >> 12) + 1;
	if (tx->pages_overflow)
		return;
	for (uint32_t h = page_hash(pg);; h = (h + 1) & (TX_PAGE_SLOTS - 1)) {
		if (tx->page[h] == pg)
			return;
		if (!tx->page[h]) {
			if (tx->npages_used * 2 >= TX_PAGE_SLOTS) {
				tx->pages_overflow = 1;
				return;
			}
			tx->page[h] = pg;
			tx->page_used[tx->npages_used++] = h;
			return;
		}
	}
}

/* Could the page holding off have staged words? */
static int page_staged(const struct tx *tx, uint64_t off)
{
	if (tx->pages_overflow)
		return 1;
	uint64_t pg = (off >> 12) + 1;
	for (uint32_t h = page_hash(pg);; h = (h + 1) & (TX_PAGE_SLOTS - 1)) {
		if (tx->page[h] == pg)
			return 1;
		if (!tx->page[h])
			return 0;
	}
}

static inline uint32_t tx_hash(uint64_t off)
{
	uint64_t h = (off >> 3) * 0x9e3779b97f4a7c15ULL;
	return (uint32_t)(h >> 40) & (TX_HASH_SLOTS - 1);
}

/* Index of the staged word at off, or -1. */
static int tx_find(const struct tx *tx, uint64_t off)
{
	for (uint32_t h = tx_hash(off);; h = (h + 1) & (TX_HASH_SLOTS - 1)) {
		uint32_t s = tx->slot[h];
		if (!s)
			return -1;
		if (tx->off[s - 1] == off)
			return (int)(s - 1);
	}
}

static void tx_put_word(struct tx *tx, uint64_t off, uint64_t v)
{
	assert((off & 7) == 0);
	uint32_t h = tx_hash(off);
	for (;; h = (h + 1) & (TX_HASH_SLOTS - 1)) {
		uint32_t s = tx->slot[h];
		if (!s)
			break;
		if (tx->off[s - 1] == off) {
			tx->val[s - 1] = v;
			return;
		}
	}
	if (tx->nwords >= TX_MAX_WORDS) {
		tx->overflow = 1;
		return;
	}
	page_note(tx, off);
	tx->off[tx->nwords] = off;
	tx->val[tx->nwords] = v;
	tx->slot[h] = ++tx->nwords;
	tx->used_slots[tx->nhash_used++] = h;
}

static uint64_t tx_get_word(struct tx *tx, uint64_t off)
{
	if (!page_staged(tx, off))
		return __atomic_load_n((const uint64_t *)(tx->base + off), __ATOMIC_RELAXED);
	int i = tx_find(tx, off);
	if (i >= 0)
		return tx->val[i];
	return __atomic_load_n((const uint64_t *)(tx->base + off), __ATOMIC_RELAXED);
}

void tx_set8(struct tx *tx, void *pm, uint64_t v)
{
	tx_put_word(tx, tx_off(tx, pm), v);
}

uint64_t tx_get8(struct tx *tx, const void *pm)
{
	return tx_get_word(tx, tx_off(tx, pm));
}

void tx_set(struct tx *tx, void *pm, const void *src, size_t len)
{
	uint64_t off = tx_off(tx, pm);
	const unsigned char *s = src;
	while (len) {
		uint64_t w0 = off & ~7ULL;
		unsigned skip = (unsigned)(off - w0);
		unsigned n = (unsigned)FR_MIN((size_t)(8 - skip), len);
		uint64_t w;
		if (skip == 0 && n == 8)
			memcpy(&w, s, 8);
		else {
			w = tx_get_word(tx, w0);
			memcpy((char *)&w + skip, s, n);
		}
		tx_put_word(tx, w0, w);
		off += n;
		s += n;
		len -= n;
	}
}

void tx_get(struct tx *tx, const void *pm, void *dst, size_t len)
{
	uint64_t off = tx_off(tx, pm);
	unsigned char *d = dst;
	if ((off & 7) + len <= 8) { /* within one word: the common small field */
		uint64_t w = tx_get_word(tx, off & ~7ULL);
		memcpy(d, (char *)&w + (off & 7), len);
		return;
	}
	if (tx->nwords == 0 ||
	    ((off >> 12) == ((off + len - 1) >> 12) && !page_staged(tx, off))) {
		memcpy(dst, pm, len);
		return;
	}
	while (len) {
		uint64_t w0 = off & ~7ULL;
		unsigned skip = (unsigned)(off - w0);
		unsigned n = (unsigned)FR_MIN((size_t)(8 - skip), len);
		uint64_t w = tx_get_word(tx, w0);
		memcpy(d, (char *)&w + skip, n);
		off += n;
		d += n;
		len -= n;
	}
}

void tx_set4(struct tx *tx, void *pm, uint32_t v)
{
	tx_set(tx, pm, &v, 4);
}
void tx_set2(struct tx *tx, void *pm, uint16_t v)
{
	tx_set(tx, pm, &v, 2);
}
void tx_set1(struct tx *tx, void *pm, uint8_t v)
{
	tx_set(tx, pm, &v, 1);
}
uint32_t tx_get4(struct tx *tx, const void *pm)
{
	uint32_t v;
	tx_get(tx, pm, &v, 4);
	return v;
}
uint16_t tx_get2(struct tx *tx, const void *pm)
{
	uint16_t v;
	tx_get(tx, pm, &v, 2);
	return v;
}
uint8_t tx_get1(struct tx *tx, const void *pm)
{
	uint8_t v;
	tx_get(tx, pm, &v, 1);
	return v;
}

void tx_apply_unlogged(struct tx *tx)
{
	tx_finalize(tx);
	if (tx->overflow) {
		tx_abort(tx); /* callers check tx_status() before applying */
		return;
	}
	/* Only for a pool that is not yet published (mkfs): no atomicity is
	 * needed because the superblock that makes the pool valid is written
	 * after everything else. */
	for (uint32_t i = 0; i < tx->nwords; i++) {
		pm_store8(tx->base + tx->off[i], tx->val[i]);
		pm_flush(tx->base + tx->off[i], 8);
	}
	pm_fence();
	tx_finish(tx);
}
