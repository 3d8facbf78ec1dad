/*
 * log.c -- redo log: commit, apply, retire, replay. Format: meta_format.h.
 *
 * Each operation that changes several objects takes a log slot, stages its
 * words in the slot's transaction (space/tx.h), and commits them here:
 *
 *   fresh data fenced (only if the tx initialised unreachable objects)
 *   entry = header + runs, fingerprinted with crc32c (HasFS: the entry
 *           validates itself, so it needs no separate commit record)
 *   flush + FENCE                        <- COMMIT POINT
 *   apply words in place, flush + FENCE
 *   ls_retired = seq (8-byte publish)    <- entry can no longer be replayed
 *
 * Invariants: L1 a slot holds at most one live entry: le_seq == ls_retired+1
 *               with a matching checksum;
 *             L2 two live entries (in different slots) never stage the same
 *               word: the words of an operation are covered by locks held
 *               until its entry is retired (docs/contracts.md), so replay
 *               order across slots does not matter;
 *             L3 redo is idempotent: entries hold final values, not deltas.
 * Crash argument: before the commit fence the checksum cannot match a torn
 *   entry (except with probability 2^-32), so recovery ignores it and the
 *   pool is unchanged (nothing was applied). After it, recovery replays the
 *   entry -- again if it was partly or wholly applied -- and retires it.
 *   Retiring before the locks are dropped keeps a stale replay from
 *   overwriting later unlogged updates (sizes, times) of the same objects.
 * Locking: log_lock protects only the free-slot list.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "meta/meta.h"
#include "persist/pm.h"

static struct log_entry *slot_entry(struct log_slot *s)
{
	return (struct log_entry *)(s + 1);
}

static uint64_t slot_capacity(struct meta *m)
{
	return m->sb->sb_log_size - sizeof(struct log_slot) - sizeof(struct log_entry);
}

void log_format(char *base, uint64_t off, uint32_t count, uint32_t size)
{
	for (uint32_t i = 0; i < count; i++) {
		struct log_slot *s = (struct log_slot *)(base + off + (uint64_t)i * size);
		struct log_slot img = {.ls_magic = LOG_MAGIC, .ls_retired = 0};
		pm_copy_flush(s, &img, sizeof(img));
		struct log_entry none = {0};
		pm_copy_flush(slot_entry(s), &none, sizeof(none));
	}
	pm_fence();
}

int log_init(struct meta *m)
{
	m->nlogs = m->sb->sb_log_count;
	m->logs = calloc(m->nlogs, sizeof(*m->logs));
	if (!m->logs)
		return -ENOMEM;
	for (uint32_t i = 0; i < m->nlogs; i++) {
		m->logs[i].slot = (struct log_slot *)meta_ptr(
		    m, m->sb->sb_log_off + (uint64_t)i * m->sb->sb_log_size);
		m->logs[i].index = i;
		m->logs[i].next_free = i + 1;
	}
	m->log_free_head = 0;
	pthread_mutex_init(&m->log_lock, NULL);
	pthread_cond_init(&m->log_cond, NULL);
	return 0;
}

void log_fini(struct meta *m)
{
	if (!m->logs)
		return;
	for (uint32_t i = 0; i < m->nlogs; i++) {
		free(m->logs[i].tx);
		free(m->logs[i].ebuf);
	}
	free(m->logs);
	m->logs = NULL;
	pthread_mutex_destroy(&m->log_lock);
	pthread_cond_destroy(&m->log_cond);
}

struct log_ctx *log_acquire(struct meta *m)
{
	pthread_mutex_lock(&m->log_lock);
	while (m->log_free_head < 0 || (uint32_t)m->log_free_head >= m->nlogs) {
		m->log_free_head = -1;
		m->log_waiters++;
		pthread_cond_wait(&m->log_cond, &m->log_lock);
		m->log_waiters--;
	}
	struct log_ctx *lc = &m->logs[m->log_free_head];
	m->log_free_head = lc->next_free < m->nlogs ? (int64_t)lc->next_free : -1;
	pthread_mutex_unlock(&m->log_lock);
	if (!lc->tx) {
		lc->tx = malloc(sizeof(*lc->tx));
		lc->ebuf = malloc(m->sb->sb_log_size);
		if (!lc->tx || !lc->ebuf) {
			free(lc->tx);
			free(lc->ebuf);
			lc->tx = NULL;
			lc->ebuf = NULL;
			log_release(m, lc);
			return NULL;
		}
		tx_init(lc->tx, &m->sp, m->sp.base, &m->sp.alloc_lock);
	}
	tx_begin(lc->tx);
	return lc;
}

void log_release(struct meta *m, struct log_ctx *lc)
{
	pthread_mutex_lock(&m->log_lock);
	lc->next_free = m->log_free_head < 0 ? m->nlogs : (uint32_t)m->log_free_head;
	m->log_free_head = lc->index;
	if (m->log_waiters)
		pthread_cond_signal(&m->log_cond);
	pthread_mutex_unlock(&m->log_lock);
}

/* Serialises the staged runs; returns bytes, or ~0 if they do not fit. */
static uint64_t build_runs(struct tx *tx, char *out, uint64_t cap, uint32_t *nruns)
{
	uint64_t len = 0;
	*nruns = tx->nruns;
	for (uint32_t i = 0; i < tx->nruns; i++) {
		const struct tx_run *t = &tx->runs[i];
		if (len + sizeof(struct log_run) + t->len > cap)
			return ~0ULL;
		struct log_run r = {.lr_off = t->off, .lr_nwords = t->len / 8};
		memcpy(out + len, &r, sizeof(r));
		len += sizeof(r);
		memcpy(out + len, tx->data + t->pos, t->len);
		len += t->len;
	}
	return len;
}

/* Runs at least this long are applied with non-temporal stores: file data
 * copied through the log (strict-mode overwrites) is written back without
 * passing through the cache, about 3x cheaper than store + clwb
 * (machine-limits.md). Shorter runs are metadata words, stored one by one.
 * Either way every word that changes belongs to an object whose locks the
 * applying thread holds, so no reader can see a half-written word. */
#define APPLY_NT_MIN 256

static void apply_runs(struct meta *m, const char *runs, uint64_t len)
{
	for (uint64_t p = 0; p < len;) {
		struct log_run r;
		memcpy(&r, runs + p, sizeof(r));
		p += sizeof(r);
		uint64_t *dst = (uint64_t *)meta_ptr(m, r.lr_off);
		uint64_t bytes = 8ULL * r.lr_nwords;
		if (bytes >= APPLY_NT_MIN) {
			pm_copy_nt(dst, runs + p, bytes);
			p += bytes;
			continue;
		}
		for (uint32_t j = 0; j < r.lr_nwords; j++, p += 8) {
			uint64_t v;
			memcpy(&v, runs + p, 8);
			pm_store8(&dst[j], v);
		}
		pm_flush(dst, bytes);
	}
}

static uint32_t entry_csum(const struct log_entry *e, const char *runs)
{
	struct log_entry h = *e;
	h.le_csum = 0;
	uint32_t c = fr_crc32c(0, &h, sizeof(h));
	return fr_crc32c(c, runs, e->le_nbytes);
}

int log_fits(struct meta *m, struct log_ctx *lc)
{
	struct tx *tx = lc->tx;
	tx_finalize(tx);
	if (tx->damaged)
		return 1; /* log_stage refuses it: no other way around damage */
	if (tx->overflow)
		return 0;
	uint64_t len = 0;
	for (uint32_t i = 0; i < tx->nruns; i++)
		len += sizeof(struct log_run) + tx->runs[i].len;
	return len <= slot_capacity(m);
}

int log_stage(struct meta *m, struct log_ctx *lc)
{
	struct tx *tx = lc->tx;
	tx_finalize(tx);
	if (tx->damaged)
		return -EUCLEAN; /* the message was recorded by tx_damaged */
	if (tx->overflow)
		return fr_err(-ENOSPC, "operation too large for one log entry");
	char *buf = lc->ebuf;
	struct log_entry *e = (struct log_entry *)buf;
	char *runs = buf + sizeof(*e);
	uint32_t nruns;
	uint64_t len = build_runs(tx, runs, slot_capacity(m), &nruns);
	if (len == ~0ULL)
		return fr_err(-ENOSPC, "operation too large for one log entry");
	struct log_slot *s = lc->slot;
	e->le_seq = s->ls_retired + 1;
	e->le_magic = LE_MAGIC;
	e->le_nruns = nruns;
	e->le_nbytes = (uint32_t)len;
	e->le_csum = 0;
	e->le_csum = entry_csum(e, runs);
	if (tx->fresh)
		pm_fence(); /* ORDER: unreachable new objects before the entry */
	pm_copy_nt(slot_entry(s), buf, sizeof(*e) + len);
	if (!PM_PLANTED(PM_PLANT_SKIP_LOG_FENCE))
		pm_fence(); /* COMMIT POINT: the entry is complete and valid */
	return 0;
}

void log_apply(struct meta *m, struct log_ctx *lc)
{
	const struct log_entry *e = (const struct log_entry *)lc->ebuf;
	apply_runs(m, (const char *)(e + 1), e->le_nbytes);
	pm_fence(); /* ORDER: in-place state before retiring the entry */
}

void log_retire(struct meta *m, struct log_ctx *lc)
{
	(void)m;
	const struct log_entry *e = (const struct log_entry *)lc->ebuf;
	pm_publish8(&lc->slot->ls_retired, e->le_seq);
}

int log_commit(struct meta *m, struct log_ctx *lc)
{
	struct tx *tx = lc->tx;
	if (tx_empty(tx) && !tx->nfrees) {
		tx_finish(tx);
		return 0;
	}
	int rc = log_stage(m, lc);
	if (rc) {
		tx_abort(tx);
		return rc;
	}
	log_apply(m, lc);
	log_retire(m, lc);
	tx_finish(tx);
	return 0;
}

/* A live, intact entry in slot s, or NULL. Never trusts lengths blindly. */
static const struct log_entry *live_entry(struct meta *m, struct log_slot *s)
{
	const struct log_entry *e = slot_entry(s);
	if (e->le_magic != LE_MAGIC || e->le_seq != s->ls_retired + 1 ||
	    e->le_nbytes > slot_capacity(m))
		return NULL;
	if (entry_csum(e, (const char *)(e + 1)) != e->le_csum)
		return NULL;
	return e;
}

/* A copy of slot s's live entry, or NULL (none; -ENOMEM in *err): recovery
 * checks and applies bytes it read once, whatever the slot holds later. */
static struct log_entry *live_entry_copy(struct meta *m, struct log_slot *s, int *err)
{
	struct log_entry h;
	memcpy(&h, slot_entry(s), sizeof(h));
	if (h.le_magic != LE_MAGIC || h.le_seq != s->ls_retired + 1 ||
	    h.le_nbytes > slot_capacity(m))
		return NULL;
	struct log_entry *e = malloc(sizeof(h) + h.le_nbytes);
	if (!e) {
		*err = -ENOMEM;
		return NULL;
	}
	*e = h;
	memcpy(e + 1, slot_entry(s) + 1, h.le_nbytes);
	if (entry_csum(e, (const char *)(e + 1)) != e->le_csum) {
		free(e);
		return NULL;
	}
	return e;
}

/* Is [off, off + bytes) a range transactions may write? Unit 0 holds the
 * superblock (page 0), the space header (page 1: of it, transactions change
 * only the free page count; its geometry was checked before recovery and
 * must stay as checked), the state (page 2) and the backup superblock; the
 * log slots follow; every other byte up to the pool's end is allocator
 * bitmaps or data. Overflow-safe: off and bytes come from PM. */
static int run_target_ok(struct meta *m, uint64_t off, uint64_t bytes)
{
	uint64_t size = m->sp.pool->size;
	uint64_t free_word = SB_SPACE_OFF + offsetof(struct sp_header, sph_free_pages);
	uint64_t prealloc_word = SB_SPACE_OFF + offsetof(struct sp_header, sph_prealloc_pages);
	if (off & 7 || off > size || bytes > size - off)
		return 0;
	if ((off == free_word || off == prealloc_word) && bytes <= 8)
		return 1;
	if (off >= SB_STATE_OFF && off + bytes <= SB_STATE_OFF + FR_PAGE_SIZE)
		return 1;
	return off >= m->sb->sb_meta_end;
}

/* Runs must stay inside the pool and out of the superblocks and log area. */
static int runs_sane(struct meta *m, const struct log_entry *e)
{
	const char *runs = (const char *)(e + 1);
	uint32_t n = 0;
	for (uint64_t p = 0; p < e->le_nbytes; n++) {
		struct log_run r;
		if (e->le_nbytes - p < sizeof(r))
			return 0;
		memcpy(&r, runs + p, sizeof(r));
		uint64_t bytes = 8ULL * r.lr_nwords;
		if (!run_target_ok(m, r.lr_off, bytes) || e->le_nbytes - p - sizeof(r) < bytes)
			return 0;
		p += sizeof(r) + bytes;
	}
	return n == e->le_nruns;
}

/* apply 0: only counts the entries a recovery would replay (fsck -n). */
static int recover(struct meta *m, int apply)
{
	int replayed = 0;
	for (uint32_t i = 0; i < m->nlogs; i++) {
		struct log_slot *s = m->logs[i].slot;
		if (s->ls_magic != LOG_MAGIC)
			return fr_err(-EUCLEAN, "log slot %u is damaged (run `ferrite fsck`)", i);
		int err = 0;
		struct log_entry *e = live_entry_copy(m, s, &err);
		if (!e) {
			if (err)
				return err;
			continue;
		}
		if (!runs_sane(m, e)) {
			free(e);
			return fr_err(-EUCLEAN,
				      "log slot %u holds an entry that points outside the "
				      "pool (run `ferrite fsck`)",
				      i);
		}
		if (apply) {
			apply_runs(m, (const char *)(e + 1), e->le_nbytes);
			pm_fence();
			pm_publish8(&s->ls_retired, e->le_seq);
		}
		free(e);
		replayed++;
	}
	return replayed;
}

int log_recover(struct meta *m)
{
	int n = recover(m, 1);
	if (n >= 0)
		m->recovered_entries = (uint64_t)n;
	return n;
}

int log_pending(struct meta *m)
{
	return recover(m, 0);
}

int log_check(struct meta *m, fr_report_fn report, void *arg)
{
	int bad = 0;
	for (uint32_t i = 0; i < m->nlogs; i++) {
		struct log_slot *s = m->logs[i].slot;
		if (s->ls_magic != LOG_MAGIC) {
			fr_report(report, arg, "log slot %u: header damaged", i);
			bad++;
		} else if (live_entry(m, s)) {
			fr_report(report, arg, "log slot %u: entry %llu not yet replayed", i,
				  (unsigned long long)s->ls_retired + 1);
			bad++;
		}
	}
	return bad;
}
