/*
 * share_desc.c -- open file descriptions that processes share. POSIX gives
 * a forked child its parent's descriptions, not copies: one offset, one set
 * of status flags, one owner of flock and OFD locks. Each process keeps its
 * own struct for a description (vfs.h); once a second process holds it,
 * those parts live in an entry of the coordination file instead, which every
 * holder reads and writes under the turn.
 *
 * An entry is made when a process forks (for every description it has; the
 * parent marks the child as a holder before the child exists, share.c) or
 * passes a description across exec or spawn (a token in the exec state,
 * adopted by the new image).
 *
 * Invariants: D1 an entry is in use while gen is odd, and then held by the
 *               processes whose bits are set (at least one); it is freed
 *               (gen made even) when the last bit goes, so a token (index
 *               and gen) names one use only and a stale one is refused;
 *             D2 procs[k].descs counts the bits slot k has set, so a slot
 *               that holds none is given back without a scan;
 *             D3 entries change only under the turn, and under the
 *               process's tab_lock (its threads run calls at once).
 * Validation: a token is an index and a generation; the index is masked, the
 *   generation compared, and an entry is adopted only while in use.
 * Crash argument: volatile only; a process that dies lets go when its slot
 *   is given back (desc_reap_slot).
 */
#include "space/share_impl.h"

_Static_assert(PROC_WORDS == sizeof(((struct share_desc *)0)->holders) / sizeof(uint64_t),
	       "a description's holders have a bit per process slot");

#define DESC_BITS 12 /* SHARE_DESCS == 1 << DESC_BITS */
_Static_assert(SHARE_DESCS == 1u << DESC_BITS, "token layout");

int share_holders(const uint64_t words[PROC_WORDS])
{
	int n = 0;
	for (int w = 0; w < PROC_WORDS; w++)
		n += __builtin_popcountll(words[w]);
	return n;
}

static int holds(const struct share_desc *d, int slot)
{
	return (d->holders[slot / 64] >> (slot % 64)) & 1;
}

static void set_hold(struct share_file *f, struct share_desc *d, int slot, int on)
{
	uint64_t bit = 1ULL << (slot % 64);
	if (holds(d, slot) == on)
		return;
	if (on) {
		d->holders[slot / 64] |= bit;
		f->procs[slot].descs++;
	} else {
		d->holders[slot / 64] &= ~bit;
		f->procs[slot].descs--;
	}
}

/* Frees d if no slot holds it (D1); 1 if it did. */
static int free_if_unheld(struct share_desc *d)
{
	if (share_holders(d->holders))
		return 0;
	d->gen++; /* even: free; the next use gets a new odd generation */
	d->lock_id = 0;
	return 1;
}

static struct share_desc *desc_of(struct pool_share *s, const struct share_desc *d)
{
	size_t i = (size_t)(d - s->f->desc);
	return i < SHARE_DESCS ? &s->f->desc[i] : NULL;
}

struct share_desc *share_desc_new(struct pool_share *s, int64_t pos, int flags, uint64_t lock_id)
{
	if (!s || s->slot < 0)
		return NULL;
	struct share_file *f = s->f;
	struct share_desc *found = NULL;
	pthread_mutex_lock(&s->tab_lock);
	for (uint32_t i = 0; i < SHARE_DESCS && !found; i++) {
		struct share_desc *d = &f->desc[i];
		if (d->gen & 1)
			continue;
		d->gen++;
		d->flags = flags;
		d->pos = pos;
		d->lock_id = lock_id;
		d->holders[0] = d->holders[1] = 0;
		set_hold(f, d, s->slot, 1);
		found = d;
	}
	pthread_mutex_unlock(&s->tab_lock);
	return found;
}

void share_desc_hold(struct pool_share *s, struct share_desc *d, int slot)
{
	if (!s || !desc_of(s, d) || slot < 0 || slot >= SHARE_PROCS)
		return;
	pthread_mutex_lock(&s->tab_lock);
	if (d->gen & 1)
		set_hold(s->f, d, slot, 1);
	pthread_mutex_unlock(&s->tab_lock);
}

int share_desc_drop(struct pool_share *s, struct share_desc *d)
{
	if (!s || !desc_of(s, d) || s->slot < 0)
		return 1;
	pthread_mutex_lock(&s->tab_lock);
	uint32_t gen = d->gen;
	int gone = 1;
	if (gen & 1) {
		set_hold(s->f, d, s->slot, 0);
		/* holders that are gone (a child that exited) must not keep the
		 * description, and its locks, alive: they are given back now */
		for (int k = 0; k < SHARE_PROCS && d->gen == gen && share_holders(d->holders); k++)
			if (holds(d, k))
				slot_reap_if_gone(s, k);
		gone = d->gen != gen || free_if_unheld(d);
	}
	pthread_mutex_unlock(&s->tab_lock);
	return gone;
}

uint32_t share_desc_token(struct pool_share *s, const struct share_desc *d)
{
	size_t i = (size_t)(d - s->f->desc);
	return d->gen << DESC_BITS | (uint32_t)i; /* gen is odd: never 0 */
}

struct share_desc *share_desc_adopt(struct pool_share *s, uint32_t token)
{
	if (!s || s->slot < 0 || !token)
		return NULL;
	struct share_desc *d = &s->f->desc[token & (SHARE_DESCS - 1)];
	uint32_t gen = token >> DESC_BITS;
	pthread_mutex_lock(&s->tab_lock);
	int live = (d->gen & 1) && (d->gen & (UINT32_MAX >> DESC_BITS)) == gen &&
		   share_holders(d->holders);
	if (live)
		set_hold(s->f, d, s->slot, 1);
	pthread_mutex_unlock(&s->tab_lock);
	return live ? d : NULL;
}

void share_desc_prune(struct pool_share *s, int (*kept)(void *arg, const struct share_desc *d),
		      void *arg)
{
	if (!s || s->slot < 0)
		return;
	struct share_file *f = s->f;
	pthread_mutex_lock(&s->tab_lock);
	for (uint32_t i = 0; i < SHARE_DESCS && f->procs[s->slot].descs; i++) {
		struct share_desc *d = &f->desc[i];
		if (!(d->gen & 1) || !holds(d, s->slot) || kept(arg, d))
			continue;
		uint64_t lock_id = d->lock_id;
		set_hold(f, d, s->slot, 0);
		if (free_if_unheld(d) && lock_id)
			lk_release_owner(share_locks(s), 0, lock_id);
	}
	pthread_mutex_unlock(&s->tab_lock);
}

void desc_reap_slot(struct share_file *f, int k)
{
	for (uint32_t i = 0; i < SHARE_DESCS && f->procs[k].descs; i++) {
		struct share_desc *d = &f->desc[i];
		if ((d->gen & 1) && holds(d, k)) {
			set_hold(f, d, k, 0);
			free_if_unheld(d); /* its locks went with their setters' slots */
		}
	}
	f->procs[k].descs = 0;
}
