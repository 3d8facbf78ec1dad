/*
 * log_test.c -- the redo log's crash windows, driven step by step: an entry
 * that reached its commit fence is replayed at the next mount (also when it
 * had been partly or wholly applied: replay is idempotent); a torn entry is
 * ignored and changes nothing; a retired entry is never replayed over later
 * updates; an entry pointing outside the pool is refused with a clear error.
 */
#include <errno.h>

#include "ferrite.h"
#include "meta/meta.h"
#include "persist/pm.h"
#include "unit.h"

static const char *pool;

static int fresh_pool(struct meta *m)
{
	pool = unit_pool_path("log");
	unlink(pool);
	struct ferrite_mkfs_opts o = {.size = 32 * FR_MIB};
	if (ferrite_mkfs(pool, &o))
		return 1;
	return meta_open(m, pool, 0) != 0;
}

/* A page the tests may scribble on: allocated through a committed entry. */
static uint64_t scratch_page(struct meta *m)
{
	struct log_ctx *lc = log_acquire(m);
	int64_t pg = bud_alloc(lc->tx, 0);
	log_commit(m, lc);
	log_release(m, lc);
	return (uint64_t)pg << FR_PAGE_SHIFT;
}

/* Stages words 0..7 of the page = base+i, up to the commit point. */
static struct log_ctx *stage_words(struct meta *m, uint64_t page, uint64_t base)
{
	struct log_ctx *lc = log_acquire(m);
	uint64_t *w = meta_ptr(m, page);
	for (int i = 0; i < 8; i++)
		tx_set8(lc->tx, &w[i], base + (uint64_t)i);
	if (log_stage(m, lc))
		return NULL;
	return lc;
}

/* What a crash leaves: volatile state gone, the pool as it is. */
static int crash_and_remount(struct meta *m, struct log_ctx *lc)
{
	tx_abort(lc->tx);
	log_release(m, lc);
	meta_close(m);
	return meta_open(m, pool, 0);
}

static int committed_entry_replays(void)
{
	struct meta m;
	CHECK(fresh_pool(&m) == 0);
	uint64_t page = scratch_page(&m);
	struct log_ctx *lc = stage_words(&m, page, 100);
	CHECK(lc);
	CHECK(((uint64_t *)meta_ptr(&m, page))[3] != 103); /* not applied yet */
	CHECK_EQ(crash_and_remount(&m, lc), 0);
	CHECK_EQ(m.recovered_entries, 1);
	for (int i = 0; i < 8; i++)
		CHECK_EQ(((uint64_t *)meta_ptr(&m, page))[i], 100 + i);
	CHECK_EQ(log_check(&m, NULL, NULL), 0);
	meta_close(&m);
	unlink(pool);
	return 0;
}

static int torn_entry_is_ignored(void)
{
	struct meta m;
	CHECK(fresh_pool(&m) == 0);
	uint64_t page = scratch_page(&m);
	uint64_t before = ((uint64_t *)meta_ptr(&m, page))[5];
	struct log_ctx *lc = stage_words(&m, page, 200);
	CHECK(lc);
	/* Tear it: one byte of the runs never reached PM. */
	char *entry = (char *)(lc->slot + 1);
	pm_store1(entry + sizeof(struct log_entry) + 20,
		  (uint8_t)(entry[sizeof(struct log_entry) + 20] ^ 0x5a));
	pm_persist(entry, 64);
	uint64_t retired = lc->slot->ls_retired;
	CHECK_EQ(crash_and_remount(&m, lc), 0);
	CHECK_EQ(m.recovered_entries, 0);
	CHECK_EQ(((uint64_t *)meta_ptr(&m, page))[5], before);
	CHECK_EQ(m.logs[0].slot->ls_retired + m.logs[1].slot->ls_retired >= retired, 1);
	meta_close(&m);
	unlink(pool);
	return 0;
}

static int replay_is_idempotent(void)
{
	struct meta m;
	CHECK(fresh_pool(&m) == 0);
	uint64_t page = scratch_page(&m);
	struct log_ctx *lc = stage_words(&m, page, 300);
	CHECK(lc);
	log_apply(&m, lc); /* applied, crash before retiring */
	CHECK_EQ(crash_and_remount(&m, lc), 0);
	CHECK_EQ(m.recovered_entries, 1);
	for (int i = 0; i < 8; i++)
		CHECK_EQ(((uint64_t *)meta_ptr(&m, page))[i], 300 + i);
	meta_close(&m);
	CHECK_EQ(meta_open(&m, pool, 0), 0);
	CHECK_EQ(m.recovered_entries, 0); /* replayed once, then retired */
	meta_close(&m);
	unlink(pool);
	return 0;
}

static int retired_entry_never_replays(void)
{
	struct meta m;
	CHECK(fresh_pool(&m) == 0);
	uint64_t page = scratch_page(&m);
	struct log_ctx *lc = stage_words(&m, page, 400);
	CHECK(lc);
	log_apply(&m, lc);
	log_retire(&m, lc);
	tx_finish(lc->tx);
	log_release(&m, lc);
	uint64_t *w = meta_ptr(&m, page);
	pm_publish8(&w[2], 999); /* a later update made without the log */
	meta_close(&m);
	CHECK_EQ(meta_open(&m, pool, 0), 0);
	CHECK_EQ(m.recovered_entries, 0);
	CHECK_EQ(((uint64_t *)meta_ptr(&m, page))[2], 999);
	meta_close(&m);
	unlink(pool);
	return 0;
}

static int entry_outside_pool_is_refused(void)
{
	struct meta m;
	CHECK(fresh_pool(&m) == 0);
	uint64_t page = scratch_page(&m);
	struct log_ctx *lc = stage_words(&m, page, 500);
	CHECK(lc);
	/* A well-formed, checksummed entry whose run points beyond the pool. */
	struct log_entry *e = (struct log_entry *)(lc->slot + 1);
	struct log_run r;
	memcpy(&r, e + 1, sizeof(r));
	r.lr_off = m.pool.size + 4096;
	pm_store(e + 1, &r, sizeof(r));
	struct log_entry h = *e;
	h.le_csum = 0;
	uint32_t c = fr_crc32c(0, &h, sizeof(h));
	c = fr_crc32c(c, (const char *)(e + 1), e->le_nbytes);
	pm_store4(&e->le_csum, c);
	pm_persist(e, 64);
	tx_abort(lc->tx);
	log_release(&m, lc);
	meta_close(&m);
	CHECK_EQ(meta_open(&m, pool, 0), -EUCLEAN);
	CHECK(strstr(fr_err_get(), "outside the pool") != NULL);
	unlink(pool);
	return 0;
}

static const struct unit_case cases[] = {
    {"committed_entry_replays", committed_entry_replays},
    {"torn_entry_is_ignored", torn_entry_is_ignored},
    {"replay_is_idempotent", replay_is_idempotent},
    {"retired_entry_never_replays", retired_entry_never_replays},
    {"entry_outside_pool_is_refused", entry_outside_pool_is_refused},
};
UNIT_MAIN(cases)
