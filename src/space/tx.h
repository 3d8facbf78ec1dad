/*
 * tx.h -- staging of one atomic update (a redo transaction).
 *
 * An operation that changes several persistent objects records every change
 * here as runs of 8-byte aligned words (pool offset, bytes) instead of
 * storing it in place; reads of mutable metadata during the operation go
 * through tx_get*(), which see the staged values first. meta/log.c turns the staged words into one
 * fingerprinted log entry, commits it with one fence, applies it in place and
 * retires it. Until then nothing in the pool has changed, so abandoning a
 * transaction (tx_abort) needs no undo.
 *
 * Objects that are unreachable until the transaction commits (a freshly
 * allocated page, pool block or array) may be initialised directly with
 * pm_* stores; the caller then marks the transaction with tx_mark_fresh() so
 * the commit fences that data before the log entry can become valid.
 *
 * The allocator lock (tx_lock_alloc) is held from the first allocator access
 * until the transaction is retired or abandoned, so no other transaction can
 * read allocator words this one has staged (see docs/contracts.md).
 */
#ifndef FERRITE_TX_H
#define FERRITE_TX_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#define TX_MAX_RUNS   1536	  /* staged ranges per transaction */
#define TX_MAX_BYTES  (32 * 1024) /* staged bytes per transaction (fits a log slot) */
#define TX_PAGE_SLOTS 4096	  /* pages holding staged bytes: more than runs can fill */
#define TX_MAX_DEFER  1024
#define TX_MAX_FREES  1024
#define TX_XLATE      8 /* cached page translations (vspace page -> pool page) */

struct space;
typedef void (*tx_defer_fn)(struct space *sp, uint64_t a, uint64_t b, uint64_t c);

struct tx_defer {
	tx_defer_fn fn;
	uint64_t a, b, c;
};

/* A release of space staged by the transaction. Releases are carried out
 * when the transaction is finalised, just before it is logged, so nothing an
 * operation frees can be handed out again by the same operation while it is
 * still reachable in the committed state. */
struct tx_free {
	tx_defer_fn fn;
	uint64_t a, b, c;
};

/* A staged range: 8-byte aligned, within one page, never overlapping
 * another run. Runs of one page are chained from that page's slot. */
struct tx_run {
	uint64_t off;
	uint32_t len;
	uint32_t pos; /* where its bytes start in tx->data */
	int32_t next; /* next run of the same page, -1 at the end */
	uint32_t pad;
};

struct tx {
	char *base; /* start of the pool's direct mapping */
	struct space *sp;
	uint32_t nruns;
	uint32_t nbytes;
	int fresh;    /* unreachable objects were written: fence first */
	int overflow; /* more than a log entry can hold was staged */
	int damaged;  /* a check failed on the way (tx_damaged): never commit */
	pthread_mutex_t *alloc_lock;
	int alloc_locked;
	uint32_t ndefer;
	uint32_t nfrees;
	int finalizing;
	uint32_t npages_used;
	int pages_overflow;			 /* unused: the page table is sized for the runs */
	uint64_t xl_v[TX_XLATE], xl_p[TX_XLATE]; /* see ppt_page_tx */
	uint32_t xl_next;
	struct tx_run runs[TX_MAX_RUNS];
	uint64_t page[TX_PAGE_SLOTS];	  /* page number + 1 of pages with staged bytes */
	int32_t page_runs[TX_PAGE_SLOTS]; /* first run of that page */
	uint32_t page_used[TX_PAGE_SLOTS];
	struct tx_defer defer[TX_MAX_DEFER];
	struct tx_free frees[TX_MAX_FREES];
	char data[TX_MAX_BYTES];
};

void tx_init(struct tx *tx, struct space *sp, char *base, pthread_mutex_t *alloc_lock);
void tx_begin(struct tx *tx);
/* Drops everything staged and releases the allocator lock. */
void tx_abort(struct tx *tx);
/* Called by the log after the entry is retired: run deferred actions, unlock. */
void tx_finish(struct tx *tx);

/* Stores the staged words in place without a log (mkfs of an unpublished
 * pool only), then finishes the transaction. */
void tx_apply_unlogged(struct tx *tx);

void tx_lock_alloc(struct tx *tx);
static inline void tx_mark_fresh(struct tx *tx)
{
	tx->fresh = 1;
}
static inline int tx_empty(const struct tx *tx)
{
	return tx->nruns == 0;
}
/* -EUCLEAN if it met damaged metadata, -E2BIG if it outgrew a log entry. */
static inline int tx_status(const struct tx *tx)
{
	return tx->damaged ? -117 /* -EUCLEAN */ : tx->overflow ? -7 /* -E2BIG */ : 0;
}
/* Marks the transaction as built on damaged metadata (a check failed where
 * no error can be returned, e.g. in a queued release): it will not commit.
 * Records the message (fr_err) and returns -EUCLEAN. */
int tx_damaged(struct tx *tx, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static inline uint64_t tx_off(const struct tx *tx, const void *p)
{
	return (uint64_t)((const char *)p - tx->base);
}

void tx_set8(struct tx *tx, void *pm, uint64_t v);
void tx_set(struct tx *tx, void *pm, const void *src, size_t len);
void tx_set4(struct tx *tx, void *pm, uint32_t v);
void tx_set2(struct tx *tx, void *pm, uint16_t v);
void tx_set1(struct tx *tx, void *pm, uint8_t v);
uint64_t tx_get8(struct tx *tx, const void *pm);
void tx_get(struct tx *tx, const void *pm, void *dst, size_t len);
uint32_t tx_get4(struct tx *tx, const void *pm);
uint16_t tx_get2(struct tx *tx, const void *pm);
uint8_t tx_get1(struct tx *tx, const void *pm);

/* Forgets cached page translations: called by every change that can move
 * or drop a backed page (swaps, releases). */
static inline void tx_xlate_flush(struct tx *tx)
{
	for (int i = 0; i < TX_XLATE; i++)
		tx->xl_v[i] = ~0ULL;
}

/* Queues a release (see struct tx_free); runs it at once while finalising. */
void tx_free_later(struct tx *tx, tx_defer_fn fn, uint64_t a, uint64_t b, uint64_t c);
/* Carries out the queued releases (meta/log.c calls it before logging). */
void tx_finalize(struct tx *tx);

/* Runs fn(sp, a, b, c) after the transaction is applied (volatile follow-up
 * such as updating the process's mappings). */
void tx_defer(struct tx *tx, tx_defer_fn fn, uint64_t a, uint64_t b, uint64_t c);

#endif
