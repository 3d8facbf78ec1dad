/*
 * epoch.c -- epoch mode (HasFS): writes become durable together at the end
 * of an epoch instead of one by one.
 *
 * The first write of an epoch to a chunk copies its committed version to
 * the slot's other chunk (lazy copy-on-write) and tags the copy with C (a
 * page of the open epoch); later writes of the same epoch change that page
 * in place, with no fence to order them. Ending the epoch writes one journal
 * entry -- the pages, their tags-to-be, the files' new sizes and times -- and
 * a fingerprint over the entry and the pages' contents (HasFS's non-ordering
 * journal): one fence makes it durable, and only then are the tags set (C
 * cleared, old versions invalidated) and the records updated.
 *
 * Invariants: E1 a page of the open epoch (C) is never flushed to the backing
 *               file nor evicted, so its committed version stays intact;
 *             E2 the journal entry of epoch e is applied before any page of
 *               epoch e+1 is written over a page it names (the commit holds
 *               epoch_lock exclusively from the entry to ej_applied).
 * Crash argument: recovery recomputes the fingerprint. A whole entry not yet
 *   marked applied is applied again (idempotent); a torn one is dropped with
 *   every C page, which leaves the committed versions: the state at the end
 *   of the last whole epoch.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "tier/tier.h"

static struct tier_ejournal *journal(struct tier *t)
{
	return (struct tier_ejournal *)(t->base + t->th->th_journal_off);
}

static uint32_t cap_of(struct tier *t)
{
	uint64_t room = (t->th->th_journal_size - sizeof(struct tier_ejournal)) /
			(sizeof(struct ej_page) + sizeof(struct ej_file));
	return (uint32_t)FR_MIN(room, t->nchunks / 4);
}

static uint32_t fingerprint(struct tier *t, const struct tier_ejournal *h, const struct ej_page *pg,
			    const struct ej_file *fl)
{
	return tier_journal_fingerprint(t->data, h, pg, fl);
}

int tier_epoch_init(struct tier *t)
{
	if (t->consistency != TIER_EPOCH)
		return 0;
	t->journal = journal(t);
	t->epoch_cap = cap_of(t);
	t->epoch_pages = calloc(t->epoch_cap ? t->epoch_cap : 1, sizeof(*t->epoch_pages));
	if (!t->epoch_pages || !t->epoch_cap)
		return -ENOMEM;
	uint64_t e = FR_MAX(t->journal->ej_epoch, t->journal->ej_applied);
	t->epoch = e + 1;
	return 0;
}

void tier_epoch_fini(struct tier *t)
{
	free(t->epoch_pages);
	t->epoch_pages = NULL;
}

int tier_epoch_reserve(struct tier *t, uint64_t n)
{
	uint32_t was = __atomic_fetch_add(&t->epoch_reserved, (uint32_t)n, __ATOMIC_RELAXED);
	if ((uint64_t)was + n > t->epoch_cap) {
		__atomic_fetch_sub(&t->epoch_reserved, (uint32_t)n, __ATOMIC_RELAXED);
		return 1;
	}
	return 0;
}

void tier_epoch_add(struct tier *t, uint64_t c, uint64_t tag)
{
	uint32_t i = __atomic_fetch_add(&t->epoch_npages, 1, __ATOMIC_RELAXED);
	if (i < t->epoch_cap)
		t->epoch_pages[i] = (struct ej_page){(uint32_t)c, 0, tag};
}

/* Sets the committed tags of the entry's pages and the files' sizes. */
static void apply(struct tier *t, const struct ej_page *pg, uint32_t np, const struct ej_file *fl,
		  uint32_t nf)
{
	for (uint32_t i = 0; i < np; i++) {
		uint64_t c = pg[i].ep_chunk, s = c / 2, other = c ^ 1;
		pthread_mutex_t *lk = slot_lock(t, s);
		pthread_mutex_lock(lk);
		uint64_t ot = tag_of(t, other);
		if ((ot & TAG_V) && tag_same(ot, pg[i].ep_tag) && !(ot & TAG_C))
			tier_set_tag(t, other, 0); /* the version this epoch replaced */
		tier_set_tag(t, c, pg[i].ep_tag & ~TAG_C);
		pthread_mutex_unlock(lk);
	}
	for (uint32_t i = 0; i < nf; i++) {
		struct tier_file *tf = tier_file_at(t, fl[i].ef_fid);
		if (!tf)
			continue;
		tier_rec_publish(t, tf, fl[i].ef_size, fl[i].ef_mtime);
	}
}

int tier_epoch_commit_locked(struct tier *t)
{
	if (t->consistency != TIER_EPOCH)
		return 0;
	uint32_t n = FR_MIN(t->epoch_npages, t->epoch_cap);
	if (!n) {
		t->epoch_reserved = 0;
		return 0;
	}
	struct tier_ejournal *j = t->journal;
	struct ej_page *pg = malloc(n * sizeof(*pg));
	struct ej_file *fl = malloc(n * sizeof(*fl));
	if (!pg || !fl) {
		free(pg);
		free(fl);
		return -ENOMEM;
	}
	uint32_t np = 0, nf = 0;
	for (uint32_t i = 0; i < n; i++) {
		struct ej_page *p = &t->epoch_pages[i];
		/* A page dropped since (truncation, removal) is not committed;
		 * its N and D bits may have changed. */
		uint64_t now = tag_of(t, p->ep_chunk);
		if ((now & (TAG_V | TAG_C)) != (TAG_V | TAG_C) || !tag_same(now, p->ep_tag))
			continue;
		p->ep_tag = now;
		pg[np++] = *p;
		struct tier_file *tf = tier_file_at(t, tag_fid(p->ep_tag));
		if (tf && tf->epoch_dirty == 1) {
			tf->epoch_dirty = 2; /* listed */
			fl[nf++] = (struct ej_file){tf->fid, 0, (uint64_t)tf->size, tf->mtime};
		}
	}
	/* The entry: lists then header, all covered by the fingerprint, so
	 * their order does not matter. */
	struct tier_ejournal h;
	memset(&h, 0, sizeof h);
	h.ej_magic = EJ_MAGIC;
	h.ej_epoch = t->epoch;
	h.ej_applied = j->ej_applied;
	h.ej_npages = np;
	h.ej_nfiles = nf;
	h.ej_csum = fingerprint(t, &h, pg, fl);
	char *body = (char *)(j + 1);
	if (np)
		pm_copy_nt(body, pg, np * sizeof(*pg));
	if (nf)
		pm_copy_nt(body + np * sizeof(*pg), fl, nf * sizeof(*fl));
	pm_copy_flush(j, &h, sizeof h);
	pm_fence(); /* COMMIT POINT of the epoch */
	apply(t, pg, np, fl, nf);
	for (uint32_t i = 0; i < nf; i++) {
		struct tier_file *tf = tier_file_at(t, fl[i].ef_fid);
		if (tf) {
			tf->epoch_dirty = 0;
			tf_size_changed(t, tf, fl[i].ef_size);
		}
	}
	pm_fence();
	pm_store8(&j->ej_applied, t->epoch);
	pm_persist(&j->ej_applied, 8);
	t->epoch++;
	t->epoch_npages = 0;
	t->epoch_reserved = 0;
	tier_count(t, TS_EPOCHS, 1);
	free(pg);
	free(fl);
	return 0;
}

int tier_epoch_commit(struct tier *t)
{
	if (t->consistency != TIER_EPOCH)
		return 0;
	pthread_rwlock_wrlock(&t->epoch_lock);
	int rc = tier_epoch_commit_locked(t);
	pthread_rwlock_unlock(&t->epoch_lock);
	return rc;
}

int tier_epoch_recover(struct tier *t)
{
	struct tier_ejournal *j = journal(t);
	uint64_t recovered = 0;
	struct tier_geom g;
	tier_geom_init(&g, t->base, t->pool.size);
	char why[256];
	int pending = 0;
	/* K4: bounds, fingerprint and what the entry names (mount checked it
	 * already; a damaged entry is never applied). */
	if (tier_journal_check(&g, &pending, why, sizeof why) != 0)
		return fr_err(-EUCLEAN, "%s", why);
	if (pending) {
		const struct ej_page *pg = (const struct ej_page *)(j + 1);
		const struct ej_file *fl = (const struct ej_file *)(pg + j->ej_npages);
		apply(t, pg, j->ej_npages, fl, j->ej_nfiles);
		recovered += j->ej_npages;
		pm_fence();
		pm_store8(&j->ej_applied, j->ej_epoch);
		pm_persist(&j->ej_applied, 8);
	}
	/* The open epoch is lost: its pages go, the committed versions stay. */
	for (uint64_t c = 0; c < t->nchunks; c++) {
		uint64_t tag = tag_of(t, c);
		if ((tag & TAG_V) && (tag & TAG_C)) {
			tier_set_tag(t, c, 0);
			recovered++;
		}
	}
	pm_fence();
	tier_count(t, TS_RECOVERED, recovered);
	return 0;
}
