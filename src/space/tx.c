/*
 * tx.c -- redo transaction staging (see tx.h for the contract).
 * Invariants: T1 every run is 8-byte aligned and no byte is staged in two
 *               runs, so replaying the runs in any order gives one result;
 *             T2 every page holding staged bytes is in the page set (unless
 *               it overflowed), so a read of an untouched page goes straight
 *               to the pool;
 *             T3 nothing in the pool is written by this module (except
 *               tx_apply_unlogged, for mkfs).
 * Crash argument: none needed -- staging is volatile; durability and
 *   atomicity come from meta/log.c.
 */
#include "space/tx.h"

#include <assert.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "persist/pm.h"
#include "space/space.h"
#include "util/util.h"

/* Every staged or staged-aware access names pool memory through the direct
 * mapping; a pointer into the partition space here would be a bug. */
static inline uint64_t checked_off(const struct tx *tx, const void *pm)
{
	uint64_t off = tx_off(tx, pm);
	assert(!tx->sp || !tx->sp->pool || off < tx->sp->pool->size);
	return off;
}

static void tx_reset(struct tx *tx)
{
	for (uint32_t i = 0; i < tx->npages_used; i++)
		tx->page[tx->page_used[i]] = 0;
	tx->npages_used = 0;
	tx->nfrees = 0;
	tx->finalizing = 0;
	tx->nruns = 0;
	tx->nbytes = 0;
	tx->ndefer = 0;
	tx->fresh = 0;
	tx->overflow = 0;
	tx->damaged = 0;
	tx_xlate_flush(tx);
}

int tx_damaged(struct tx *tx, const char *fmt, ...)
{
	char msg[256];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (!tx->damaged) /* keep the first cause: later ones follow from it */
		fr_err(-EUCLEAN, "%s (run `ferrite fsck`)", msg);
	tx->damaged = 1;
	return -EUCLEAN;
}

void tx_init(struct tx *tx, struct space *sp, char *base, pthread_mutex_t *alloc_lock)
{
	memset(tx->page, 0, sizeof(tx->page));
	tx->npages_used = 0;
	tx->sp = sp;
	tx->base = base;
	tx->alloc_lock = alloc_lock;
	tx->alloc_locked = 0;
	tx_reset(tx);
}

void tx_begin(struct tx *tx)
{
	assert(tx->nruns == 0 && !tx->alloc_locked);
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
	/* Fresh objects were written for nothing: they stay unreachable, but
	 * the stores must not be left in flight past the call (pm.h check). */
	if (tx->fresh)
		pm_fence();
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

/* ---- the page set (T2) ---------------------------------------------------- */

static inline uint32_t page_hash(uint64_t pg)
{
	return (uint32_t)((pg * 0x9e3779b97f4a7c15ULL) >> 40) & (TX_PAGE_SLOTS - 1);
}

/* Slot of page pg (page number), or -1 if nothing of it is staged. */
static int page_slot(const struct tx *tx, uint64_t pg)
{
	pg++;
	for (uint32_t h = page_hash(pg);; h = (h + 1) & (TX_PAGE_SLOTS - 1)) {
		if (tx->page[h] == pg)
			return (int)h;
		if (!tx->page[h])
			return -1;
	}
}

static int page_slot_make(struct tx *tx, uint64_t pg)
{
	pg++;
	for (uint32_t h = page_hash(pg);; h = (h + 1) & (TX_PAGE_SLOTS - 1)) {
		if (tx->page[h] == pg)
			return (int)h;
		if (!tx->page[h]) {
			tx->page[h] = pg;
			tx->page_runs[h] = -1;
			tx->page_used[tx->npages_used++] = h;
			return (int)h;
		}
	}
}

/* ---- runs ------------------------------------------------------------------ */

/* Overlays the staged bytes of [off, off+len) (one page) onto dst. */
static void overlay_page(const struct tx *tx, int slot, uint64_t off, uint64_t len,
			 unsigned char *dst)
{
	for (int32_t i = tx->page_runs[slot]; i >= 0; i = tx->runs[i].next) {
		const struct tx_run *r = &tx->runs[i];
		uint64_t a = FR_MAX(off, r->off), b = FR_MIN(off + len, r->off + r->len);
		if (a < b)
			memcpy(dst + (a - off), tx->data + r->pos + (a - r->off), b - a);
	}
}

static void overlay(const struct tx *tx, uint64_t off, uint64_t len, unsigned char *dst)
{
	while (len) {
		uint64_t n = FR_MIN(len, FR_PAGE_SIZE - (off & (FR_PAGE_SIZE - 1)));
		int slot = page_slot(tx, off >> 12);
		if (slot >= 0)
			overlay_page(tx, slot, off, n, dst);
		off += n;
		dst += n;
		len -= n;
	}
}

/* Appends [off, off+len) (aligned, within one page, not staged yet). */
static void append(struct tx *tx, int slot, uint64_t off, const void *src, uint32_t len)
{
	if (tx->nbytes + len > TX_MAX_BYTES) {
		tx->overflow = 1;
		return;
	}
	struct tx_run *last = tx->nruns ? &tx->runs[tx->nruns - 1] : NULL;
	if (last && last->off + last->len == off && last->pos + last->len == tx->nbytes &&
	    (last->off >> 12) == (off >> 12)) {
		last->len += len; /* extends the last run, same page */
	} else {
		if (tx->nruns >= TX_MAX_RUNS) {
			tx->overflow = 1;
			return;
		}
		struct tx_run *r = &tx->runs[tx->nruns];
		*r = (struct tx_run){off, len, tx->nbytes, tx->page_runs[slot], 0};
		tx->page_runs[slot] = (int32_t)tx->nruns++;
	}
	if (len == 8)
		memcpy(tx->data + tx->nbytes, src, 8);
	else
		memcpy(tx->data + tx->nbytes, src, len);
	tx->nbytes += len;
}

/* The current view of the aligned word at pool offset a0 (no variable-size
 * copies: this is the hot path of every small field read and write). */
static uint64_t tx_word(const struct tx *tx, uint64_t a0)
{
	uint64_t w = __atomic_load_n((const uint64_t *)(tx->base + a0), __ATOMIC_RELAXED);
	if (!tx->nruns)
		return w;
	int slot = page_slot(tx, a0 >> 12);
	if (slot < 0)
		return w;
	for (int32_t i = tx->page_runs[slot]; i >= 0; i = tx->runs[i].next) {
		const struct tx_run *r = &tx->runs[i];
		if (a0 >= r->off && a0 < r->off + r->len) {
			memcpy(&w, tx->data + r->pos + (a0 - r->off), 8);
			break;
		}
	}
	return w;
}

/* Stages one aligned word. */
static void tx_put_word(struct tx *tx, uint64_t a0, uint64_t w)
{
	int slot = page_slot_make(tx, a0 >> 12);
	for (int32_t i = tx->page_runs[slot]; i >= 0; i = tx->runs[i].next) {
		struct tx_run *r = &tx->runs[i];
		if (a0 >= r->off && a0 < r->off + r->len) {
			memcpy(tx->data + r->pos + (a0 - r->off), &w, 8);
			return;
		}
	}
	append(tx, slot, a0, &w, 8);
}

/* Reads len <= 8 bytes at off that lie within one word. */
static inline uint64_t tx_small_get(struct tx *tx, const void *pm, unsigned len)
{
	uint64_t off = checked_off(tx, pm);
	if (FR_UNLIKELY((off & 7) + len > 8)) { /* straddles two words */
		uint64_t v = 0;
		tx_get(tx, pm, &v, len);
		return v;
	}
	uint64_t w = tx_word(tx, off & ~7ULL) >> (8 * (off & 7));
	return len == 8 ? w : w & ((1ULL << (8 * len)) - 1);
}

/* Writes the low len <= 8 bytes of v at off, within one word. */
static inline void tx_small_set(struct tx *tx, void *pm, uint64_t v, unsigned len)
{
	uint64_t off = checked_off(tx, pm), a0 = off & ~7ULL;
	if (FR_UNLIKELY((off & 7) + len > 8)) { /* straddles two words */
		tx_set(tx, pm, &v, len);
		return;
	}
	unsigned sh = 8 * (unsigned)(off & 7);
	uint64_t w;
	if (len == 8) {
		w = v;
	} else {
		uint64_t mask = ((1ULL << (8 * len)) - 1) << sh;
		w = (tx_word(tx, a0) & ~mask) | ((v << sh) & mask);
	}
	tx_put_word(tx, a0, w);
}

void tx_get(struct tx *tx, const void *pm, void *dst, size_t len)
{
	memcpy(dst, pm, len);
	if (len && tx->nruns)
		overlay(tx, checked_off(tx, pm), len, dst);
}

/* Stages the aligned image of [a0, a1) within one page. */
static void set_page(struct tx *tx, uint64_t a0, uint64_t a1, const unsigned char *img)
{
	int slot = page_slot_make(tx, a0 >> 12);
	uint64_t covered = 0; /* bit i: word a0 + 8i is held by a run */
	for (int32_t i = tx->page_runs[slot]; i >= 0; i = tx->runs[i].next) {
		struct tx_run *r = &tx->runs[i];
		uint64_t a = FR_MAX(a0, r->off), b = FR_MIN(a1, r->off + r->len);
		if (a >= b)
			continue;
		memcpy(tx->data + r->pos + (a - r->off), img + (a - a0), b - a);
		for (uint64_t w = a; w < b; w += 8)
			covered |= 1ULL << ((w - a0) / 8);
	}
	for (uint64_t w = a0; w < a1;) {
		if (covered & (1ULL << ((w - a0) / 8))) {
			w += 8;
			continue;
		}
		uint64_t e = w;
		while (e < a1 && !(covered & (1ULL << ((e - a0) / 8))))
			e += 8;
		append(tx, slot, w, img + (w - a0), (uint32_t)(e - w));
		w = e;
	}
}

void tx_set(struct tx *tx, void *pm, const void *src, size_t len)
{
	uint64_t off = checked_off(tx, pm);
	const unsigned char *s = src;
	while (len) {
		/* At most 64 words, within one page (see set_page's mask). */
		uint64_t n = FR_MIN(len, FR_PAGE_SIZE - (off & (FR_PAGE_SIZE - 1)));
		n = FR_MIN(n, 512 - (off & 7));
		uint64_t a0 = off & ~7ULL, a1 = FR_ALIGN_UP(off + n, 8ULL);
		unsigned char img[512];
		if (a0 != off || a1 != off + n) {
			memcpy(img, tx->base + a0, a1 - a0);
			if (tx->nruns)
				overlay(tx, a0, a1 - a0, img);
		}
		memcpy(img + (off - a0), s, n);
		set_page(tx, a0, a1, img);
		off += n;
		s += n;
		len -= n;
	}
}

/* On-PM fields are naturally aligned, so they take the one-word paths. */
void tx_set8(struct tx *tx, void *pm, uint64_t v)
{
	tx_small_set(tx, pm, v, 8);
}
void tx_set4(struct tx *tx, void *pm, uint32_t v)
{
	tx_small_set(tx, pm, v, 4);
}
void tx_set2(struct tx *tx, void *pm, uint16_t v)
{
	tx_small_set(tx, pm, v, 2);
}
void tx_set1(struct tx *tx, void *pm, uint8_t v)
{
	tx_small_set(tx, pm, v, 1);
}

uint64_t tx_get8(struct tx *tx, const void *pm)
{
	return tx_small_get(tx, pm, 8);
}
uint32_t tx_get4(struct tx *tx, const void *pm)
{
	return (uint32_t)tx_small_get(tx, pm, 4);
}
uint16_t tx_get2(struct tx *tx, const void *pm)
{
	return (uint16_t)tx_small_get(tx, pm, 2);
}
uint8_t tx_get1(struct tx *tx, const void *pm)
{
	return (uint8_t)tx_small_get(tx, pm, 1);
}

void tx_apply_unlogged(struct tx *tx)
{
	/* Only for a pool that is not yet published (mkfs): no atomicity is
	 * needed because the superblock that makes the pool valid is written
	 * after everything else. */
	tx_finalize(tx);
	if (tx->overflow) {
		tx_abort(tx); /* callers check tx_status() before applying */
		return;
	}
	for (uint32_t i = 0; i < tx->nruns; i++) {
		const struct tx_run *r = &tx->runs[i];
		pm_store(tx->base + r->off, tx->data + r->pos, r->len);
		pm_flush(tx->base + r->off, r->len);
	}
	pm_fence();
	tx_finish(tx);
}
