/*
 * cache.c -- the First Responder cache: static indexing, two-chunk slots
 * with 8-byte tags, and the write protocol of its section 4.2.
 *
 * Chunk i of a file with key k lives, if anywhere, in slot (k + i) mod
 * nslots, whose chunks 2s and 2s+1 carry tags {V valid, N newer of the two,
 * D dirty, C not complete, fid, i}. Every tag change is one atomic 8-byte
 * store, flushed and fenced before anything that depends on it.
 *
 * Invariants: C1 a valid chunk holds, for the bytes of its file below the
 *               record's r_size, the newest content; a chunk that is not
 *               cached is wholly in the backing file (flushed and synced);
 *             C2 a chunk's data and descriptor are persistent before its tag
 *               makes it valid; a chunk is invalid (persistently) before its
 *               data is overwritten;
 *             C3 bytes at or beyond r_size -- in chunks and in the backing
 *               file -- may hold anything: what exposes them zeroes them
 *               first; no valid chunk lies wholly at or beyond r_size once a
 *               call returns, and the backing file is never longer than
 *               r_size for long (truncation cuts it, flushes stop at r_size);
 *             C4 a dirty chunk is dropped only after its content is durable
 *               in the backing file (forced flush: write + fdatasync).
 * Crash argument (per-write mode): an overwrite goes to the slot's other
 *   chunk Y; the old version X is first marked older (N=0), Y is written and
 *   fenced, then tagged valid and newer, then X is invalidated. Whatever of
 *   this reached PM, recovery keeps one version per (file, chunk): the N=1
 *   one if both are valid. A write of several chunks, or one that changes
 *   old bytes and the size, tags its first new chunk with C; the others and
 *   the size follow; C is cleared last. Recovery undoes every chunk of a
 *   write whose C is still set (its seq names them) and restores the size
 *   kept in the first chunk's descriptor. Appends need none of this: the
 *   bytes are beyond r_size until the size store, the commit point.
 * Locking: the file's rwlock (reads shared, writes exclusive), then the slot
 *   locks of the chunks in ascending stripe order, then (trylock only) the
 *   flush lock of a file whose chunk must be flushed to make room; the
 *   flusher, truncation and punching take a file's flush lock before slot
 *   locks, so a writer that cannot get it backs off and retries.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include "tier/sys.h"
#include "tier/tier.h"

#define SMALL_WRITE 16 /* chunks handled with arrays on the stack */

enum { NEED_FENCE = 1 };

void tier_dirty_mark(struct tier *t, uint64_t c, int dirty)
{
	uint64_t bit = 1ULL << (c & 63);
	uint64_t *w = &t->dirty_bits[c >> 6];
	if (dirty) {
		if (!(__atomic_fetch_or(w, bit, __ATOMIC_RELAXED) & bit))
			__atomic_fetch_add(&t->ndirty, 1, __ATOMIC_RELAXED);
	} else {
		if (__atomic_fetch_and(w, ~bit, __ATOMIC_RELAXED) & bit)
			__atomic_fetch_sub(&t->ndirty, 1, __ATOMIC_RELAXED);
	}
}

/* Stores a chunk's tag (flushed, not fenced) and keeps the DRAM counts. */
void tier_set_tag(struct tier *t, uint64_t c, uint64_t tag)
{
	struct tier_desc *d = chunk_desc(t, c);
	uint64_t old = d->d_tag;
	pm_store8(&d->d_tag, tag);
	pm_flush(&d->d_tag, 8);
	int was_dirty = (old & (TAG_V | TAG_D)) == (TAG_V | TAG_D);
	int is_dirty = (tag & (TAG_V | TAG_D)) == (TAG_V | TAG_D);
	if (was_dirty && (!is_dirty || (old ^ tag) & ~(TAG_C | TAG_D | TAG_N))) {
		struct tier_file *f = tier_file_at(t, tag_fid(old));
		if (f)
			__atomic_fetch_sub(&f->ndirty, 1, __ATOMIC_RELAXED);
	}
	if (is_dirty && (!was_dirty || (old ^ tag) & ~(TAG_C | TAG_D | TAG_N))) {
		struct tier_file *f = tier_file_at(t, tag_fid(tag));
		if (f)
			__atomic_fetch_add(&f->ndirty, 1, __ATOMIC_RELAXED);
	}
	if ((old & TAG_V) != (tag & TAG_V) || ((old ^ tag) & ~(TAG_C | TAG_D | TAG_N))) {
		if (old & TAG_V) {
			struct tier_file *f = tier_file_at(t, tag_fid(old));
			if (f)
				__atomic_fetch_sub(&f->nvalid, 1, __ATOMIC_RELAXED);
			__atomic_fetch_sub(&t->nvalid, 1, __ATOMIC_RELAXED);
		}
		if (tag & TAG_V) {
			struct tier_file *f = tier_file_at(t, tag_fid(tag));
			if (f)
				__atomic_fetch_add(&f->nvalid, 1, __ATOMIC_RELAXED);
			__atomic_fetch_add(&t->nvalid, 1, __ATOMIC_RELAXED);
		}
	}
	tier_dirty_mark(t, c, is_dirty);
}

/* The valid chunk holding (fid, idx) in slot s, or -1. */
static int64_t find_chunk(struct tier *t, uint64_t s, uint64_t want)
{
	int64_t hit = -1;
	for (uint64_t c = 2 * s; c < 2 * s + 2; c++) {
		uint64_t tag = tag_of(t, c);
		if ((tag & TAG_V) && tag_same(tag, want)) {
			if (hit < 0 || (tag & TAG_N))
				hit = (int64_t)c; /* two versions (epoch mode): the newer */
		}
	}
	return hit;
}

/* ---- flushing one chunk ---------------------------------------------------------- */

/* Writes the chunk's bytes below the file's size to the backing file. The
 * caller holds the slot lock and the file's flush lock. */
static int write_back(struct tier *t, struct tier_file *tf, uint64_t c, int sync)
{
	uint64_t tag = tag_of(t, c);
	uint64_t idx = tag_idx(tag);
	uint64_t size = t->recs[tf->fid].r_size; /* committed bytes only */
	uint64_t at = idx << TIER_CHUNK_SHIFT;
	if (at >= size)
		return 0; /* nothing of it is in the file (C3) */
	uint64_t n = FR_MIN((uint64_t)TIER_CHUNK_SIZE, size - at);
	int direct = n == TIER_CHUNK_SIZE && t->backing_has_direct;
	int fd = tf_wfd(t, tf, direct);
	if (fd < 0 && direct) {
		direct = 0;
		fd = tf_wfd(t, tf, 0);
	}
	if (fd < 0)
		return fd;
	const char *src = chunk_data(t, c);
	char bounce[TIER_CHUNK_SIZE] __attribute__((aligned(4096)));
	if (direct) { /* O_DIRECT wants an aligned buffer of our own */
		memcpy(bounce, src, TIER_CHUNK_SIZE);
		src = bounce;
	}
	uint64_t done = 0;
	ssize_t w = 1;
	while (done < n && w > 0) { /* a short write goes on where it stopped */
		w = tsys_pwrite(fd, src + done, n - done, (off_t)(at + done));
		done += w > 0 ? (uint64_t)w : 0;
	}
	if (done < n)
		return tier_backing_failed(t, w < 0 ? errno : ENOSPC, "writing back to");
	if (sync && tsys_fdatasync(fd) != 0)
		return tier_backing_failed(t, errno, "syncing");
	return 0;
}

/* ---- making room in a slot --------------------------------------------------------- */

struct room_retry {
	/* the file (number + 1) whose flush lock was busy: wait, then retry. Its
	 * number, not a pointer: once the slot locks are dropped, the file may
	 * be unlinked and freed by the thread that holds that lock */
	uint32_t wait_fid1;
	int epoch_full; /* epoch mode: a page of the open epoch is in the way */
};

/* Frees one chunk of slot s other than keep for new content and returns it,
 * or -errno. may_flush: a dirty chunk may be flushed synchronously (a read
 * never does that: it just does not cache). *fence is set when an
 * invalidation must be fenced before the chunk is overwritten (C2). */
static int64_t make_room(struct tier *t, uint64_t s, int64_t keep, int may_flush, int *fence,
			 struct room_retry *retry)
{
	int64_t cand[2];
	int nc = 0;
	for (uint64_t c = 2 * s; c < 2 * s + 2; c++)
		if ((int64_t)c != keep)
			cand[nc++] = (int64_t)c;
	for (int i = 0; i < nc; i++)
		if (!(tag_of(t, (uint64_t)cand[i]) & TAG_V))
			return cand[i];
	for (int i = 0; i < nc; i++) {
		uint64_t tag = tag_of(t, (uint64_t)cand[i]);
		if (!(tag & (TAG_D | TAG_C))) {
			tier_set_tag(t, (uint64_t)cand[i], 0); /* clean: the backing file has it */
			*fence = NEED_FENCE;
			tier_count(t, TS_COLLISIONS, 1);
			return cand[i];
		}
	}
	if (!may_flush)
		return -EAGAIN;
	/* Both dirty: flush the older (First Responder case 3). */
	int64_t v = cand[0];
	if (nc == 2 && (tag_of(t, (uint64_t)cand[0]) & TAG_N))
		v = cand[1];
	uint64_t vtag = tag_of(t, (uint64_t)v);
	if (vtag & TAG_C) { /* epoch mode: the open epoch's page cannot go yet */
		retry->epoch_full = 1;
		return -EAGAIN;
	}
	struct tier_file *vf = tier_file_at(t, tag_fid(vtag));
	if (!vf)
		return fr_err(-EUCLEAN, "chunk %lld belongs to no file", (long long)v);
	if (pthread_mutex_trylock(&vf->flush_lock) != 0) {
		retry->wait_fid1 = vf->fid + 1;
		return -EAGAIN;
	}
	int rc = write_back(t, vf, (uint64_t)v, 1);
	pthread_mutex_unlock(&vf->flush_lock);
	if (rc)
		return rc;
	tier_count(t, TS_FLUSH_FORCED, 1);
	tier_count(t, TS_COLLISIONS, 1);
	tier_set_tag(t, (uint64_t)v, 0);
	*fence = NEED_FENCE;
	return v;
}

/* ---- slot locks of a range --------------------------------------------------------- */

struct lockset {
	uint64_t bits[TIER_SLOT_LOCKS / 64];
};

static void lockset_add(struct lockset *ls, uint64_t slot)
{
	unsigned s = (unsigned)(slot % TIER_SLOT_LOCKS);
	ls->bits[s / 64] |= 1ULL << (s % 64);
}

static void lockset_lock(struct tier *t, const struct lockset *ls)
{
	for (unsigned w = 0; w < TIER_SLOT_LOCKS / 64; w++)
		for (uint64_t b = ls->bits[w]; b; b &= b - 1)
			pthread_mutex_lock(&t->slot_locks[w * 64 + (unsigned)__builtin_ctzll(b)]);
}

static void lockset_unlock(struct tier *t, const struct lockset *ls)
{
	for (unsigned w = 0; w < TIER_SLOT_LOCKS / 64; w++)
		for (uint64_t b = ls->bits[w]; b; b &= b - 1)
			pthread_mutex_unlock(&t->slot_locks[w * 64 + (unsigned)__builtin_ctzll(b)]);
}

/* ---- the source of a write, addressed by file offset -------------------------------- */

struct src {
	const struct iovec *iov;
	int iovcnt;
	uint64_t off;
};

static void src_copy(const struct src *s, char *dst, uint64_t x, uint64_t n)
{
	uint64_t q = x - s->off;
	for (int i = 0; i < s->iovcnt && n; i++) {
		if (q >= s->iov[i].iov_len) {
			q -= s->iov[i].iov_len;
			continue;
		}
		uint64_t k = FR_MIN(n, s->iov[i].iov_len - q);
		memcpy(dst, (const char *)s->iov[i].iov_base + q, k);
		dst += k;
		n -= k;
		q = 0;
	}
}

/* Reads [at, at + n) of the backing file into buf, zero past its end. */
static int backing_read(struct tier *t, struct tier_file *tf, int kfd, char *buf, uint64_t at,
			uint64_t n)
{
	int fd = kfd >= 0 ? kfd : tf_wfd(t, tf, 0);
	if (fd < 0)
		return fd;
	uint64_t got = 0;
	while (got < n) {
		ssize_t r = tsys_pread(fd, buf + got, n - got, (off_t)(at + got));
		if (r < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EBADF && kfd >= 0) { /* a write-only descriptor */
				fd = tf_wfd(t, tf, 0);
				if (fd < 0)
					return fd;
				kfd = -1;
				continue;
			}
			return fr_err(-errno, "reading %s: %s", t->backing, strerror(errno));
		}
		if (r == 0)
			break;
		got += (uint64_t)r;
	}
	memset(buf + got, 0, n - got);
	return 0;
}

/* ---- writes ------------------------------------------------------------------------- */

struct wchunk {
	uint64_t idx, slot;
	int64_t x; /* the current version, or -1 */
	int64_t y; /* the chunk the new version goes to, or -1 (written in place into x) */
};

static uint64_t next_seq(struct tier *t)
{
	return __atomic_add_fetch(&t->seq, 1, __ATOMIC_RELAXED);
}

/* Writes the descriptor fields of a new version (its tag still 0). */
/* Zeroes chunk c from byte at on (bytes that are about to enter the file,
 * C3) and marks it dirty as a new version; the slot lock is held, the
 * caller fences. */
static void zero_tail(struct tier *t, uint64_t c, uint64_t at)
{
	pm_zero_nt(chunk_data(t, c) + at, TIER_CHUNK_SIZE - at);
	struct tier_desc *d = chunk_desc(t, c);
	pm_store8(&d->d_seq, next_seq(t));
	pm_flush(d, sizeof(*d));
	tier_set_tag(t, c, tag_of(t, c) | TAG_D);
}

static void desc_fill(struct tier *t, uint64_t c, uint64_t seq, uint64_t old_size,
		      uint64_t new_size, uint64_t nchunks, int64_t now)
{
	struct tier_desc *d = chunk_desc(t, c);
	pm_store8(&d->d_seq, seq);
	pm_store8(&d->d_old_size, old_size);
	pm_store8(&d->d_new_size, new_size);
	pm_store8(&d->d_nchunks, nchunks);
	pm_store8(&d->d_mtime, (uint64_t)now);
	pm_store8(&d->d_epoch, t->epoch);
	pm_flush(d, sizeof(*d));
}

/* Publishes size and time of a file in its record (flushed, not fenced). */
void tier_rec_publish(struct tier *t, struct tier_file *tf, uint64_t size, int64_t mtime)
{
	struct tier_rec *r = &t->recs[tf->fid];
	if (r->r_size != size)
		pm_store8(&r->r_size, size);
	pm_store8(&r->r_mtime, (uint64_t)mtime);
	if (r->r_ctime < mtime) {
		pm_store8(&r->r_ctime, (uint64_t)mtime);
		pm_flush(&r->r_ctime, 8);
	}
	if (!(r->r_flags & REC_META_STALE))
		pm_store4(&r->r_flags, r->r_flags | REC_META_STALE);
	pm_flush(&r->r_size, 16);
	pm_flush(&r->r_flags, 4);
}

uint64_t tier_max_write_chunks(uint64_t nslots)
{
	return nslots / 4 ? nslots / 4 : 1;
}

/* One attempt; -EAGAIN with retry filled: nothing visible changed, go again. */
static ssize_t write_try(struct tier *t, struct tier_file *tf, int kfd, const struct src *src,
			 uint64_t off, uint64_t len, struct wchunk *wc, struct room_retry *retry)
{
	struct tier_rec *r = &t->recs[tf->fid];
	uint64_t key = r->r_key, fid = tf->fid;
	int epoch = t->consistency == TIER_EPOCH;
	uint64_t size = epoch ? (uint64_t)tf->size : r->r_size;
	uint64_t end = off + len;
	uint64_t c0 = off >> TIER_CHUNK_SHIFT, c1 = (end - 1) >> TIER_CHUNK_SHIFT;
	uint64_t n = c1 - c0 + 1;
	struct lockset ls;
	memset(&ls, 0, sizeof ls);
	for (uint64_t i = 0; i < n; i++) {
		wc[i].idx = c0 + i;
		wc[i].slot = slot_of(t, key, c0 + i);
		lockset_add(&ls, wc[i].slot);
	}
	/* A write past the end leaves a gap: the tail of the old last chunk
	 * enters the file and must read as zeros (C3). */
	uint64_t last = size >> TIER_CHUNK_SHIFT;
	int gap_tail = (size & (TIER_CHUNK_SIZE - 1)) && off > size && last < c0;
	if (gap_tail)
		lockset_add(&ls, slot_of(t, key, last));
	lockset_lock(t, &ls);
	if (gap_tail) {
		int64_t g = find_chunk(t, slot_of(t, key, last), tag_make(fid, last, 0));
		if (g >= 0)
			zero_tail(t, (uint64_t)g, size & (TIER_CHUNK_SIZE - 1));
	}
	int fence = 0;
	ssize_t rc = 0;
	int has_old = 0; /* a new chunk replaces bytes below the old size */
	uint64_t ny = 0;
	/* A: find each chunk's version and a chunk for the new one. */
	for (uint64_t i = 0; i < n && !rc; i++) {
		struct wchunk *w = &wc[i];
		uint64_t cstart = w->idx << TIER_CHUNK_SHIFT;
		uint64_t wa = FR_MAX(off, cstart);
		w->x = find_chunk(t, w->slot, tag_make(fid, w->idx, 0));
		w->y = -1;
		if (epoch && w->x >= 0 && (tag_of(t, (uint64_t)w->x) & TAG_C))
			continue; /* a page of the open epoch: written in place */
		if (!epoch && w->x >= 0 && wa >= size)
			continue; /* only bytes beyond the size: in place (C3) */
		int64_t y = make_room(t, w->slot, w->x, 1, &fence, retry);
		if (y < 0) {
			rc = y;
			break;
		}
		w->y = y;
		ny++;
		if (cstart < size)
			has_old = 1;
	}
	if (rc) {
		if (fence)
			pm_fence();
		lockset_unlock(t, &ls);
		return rc;
	}
	if (fence)
		pm_fence(); /* C2: invalidated victims before their data is reused */
	uint64_t seq = next_seq(t);
	int64_t now = tier_now_ns();
	uint64_t new_size = FR_MAX(size, end);
	int nc_write = !epoch && has_old && (ny > 1 || new_size != size);
	/* B: the data. */
	char buf[TIER_CHUNK_SIZE] __attribute__((aligned(64)));
	int first = 1;
	for (uint64_t i = 0; i < n; i++) {
		struct wchunk *w = &wc[i];
		uint64_t cstart = w->idx << TIER_CHUNK_SHIFT, cend = cstart + TIER_CHUNK_SIZE;
		uint64_t wa = FR_MAX(off, cstart), wb = FR_MIN(end, cend);
		/* Bytes between the old size and the write become file bytes: zero (C3). */
		uint64_t za = FR_MAX(size, cstart), zb = FR_MIN(wa, cend);
		if (w->y < 0) { /* in place into x */
			char *dst = chunk_data(t, (uint64_t)w->x);
			if (za < zb)
				pm_zero_nt(dst + (za - cstart), zb - za);
			src_copy(src, buf, wa, wb - wa);
			pm_copy_nt(dst + (wa - cstart), buf, wb - wa);
			struct tier_desc *d = chunk_desc(t, (uint64_t)w->x);
			pm_store8(&d->d_seq, seq);
			pm_store8(&d->d_mtime, (uint64_t)now);
			pm_flush(d, sizeof(*d));
			tier_count(t, TS_WRITE_HITS, 1);
			continue;
		}
		if (wa == cstart && wb == cend) {
			src_copy(src, buf, wa, TIER_CHUNK_SIZE);
		} else {
			if (w->x >= 0) {
				memcpy(buf, chunk_data(t, (uint64_t)w->x), TIER_CHUNK_SIZE);
			} else if (cstart < size) { /* First Responder: read the old chunk in */
				int e =
				    backing_read(t, tf, kfd, buf, cstart,
						 FR_MIN((uint64_t)TIER_CHUNK_SIZE, size - cstart));
				if (e) {
					rc = e;
					break;
				}
				if (size - cstart < TIER_CHUNK_SIZE)
					memset(buf + (size - cstart), 0,
					       TIER_CHUNK_SIZE - (size - cstart));
			} else {
				memset(buf, 0, TIER_CHUNK_SIZE);
			}
			if (za < zb)
				memset(buf + (za - cstart), 0, zb - za);
			src_copy(src, buf + (wa - cstart), wa, wb - wa);
		}
		pm_copy_nt(chunk_data(t, (uint64_t)w->y), buf, TIER_CHUNK_SIZE);
		desc_fill(t, (uint64_t)w->y, seq, first && nc_write ? size : 0,
			  first && nc_write ? new_size : 0, first ? n : 0, now);
		first = 0;
		tier_count(t, w->x >= 0 ? TS_WRITE_HITS : TS_WRITE_MISSES, 1);
		if (w->x >= 0) { /* the old version is the older one from now on */
			uint64_t xt = tag_of(t, (uint64_t)w->x);
			if (xt & TAG_N)
				tier_set_tag(t, (uint64_t)w->x, xt & ~TAG_N);
		}
		int64_t other = (int64_t)(2 * w->slot + (2 * w->slot == (uint64_t)w->y ? 1 : 0));
		if (other != w->x) {
			uint64_t ot = tag_of(t, (uint64_t)other);
			if ((ot & (TAG_V | TAG_N)) == (TAG_V | TAG_N))
				tier_set_tag(t, (uint64_t)other, ot & ~TAG_N);
		}
	}
	if (rc) {
		/* Nothing is tagged yet: the new chunks stay invalid. */
		pm_fence();
		lockset_unlock(t, &ls);
		return rc;
	}
	if (!epoch)
		pm_fence(); /* C2: data and descriptors before the tags */
	/* C: the tags, the size, the time. */
	uint64_t flags = TAG_V | TAG_N | TAG_D;
	int64_t first_y = -1;
	for (uint64_t i = 0; i < n; i++)
		if (wc[i].y >= 0) {
			first_y = wc[i].y;
			break;
		}
	if (epoch) {
		/* Pages of the open epoch: tags with C, no ordering needed; the
		 * epoch's journal entry makes them durable at once (epoch.c). */
		for (uint64_t i = 0; i < n; i++) {
			if (wc[i].y >= 0) {
				uint64_t c = (uint64_t)wc[i].y,
					 tag = tag_make(fid, wc[i].idx, flags | TAG_C);
				tier_set_tag(t, c, tag);
				tier_epoch_add(t, c, tag); /* room was reserved */
			} else {
				tier_set_tag(t, (uint64_t)wc[i].x,
					     tag_of(t, (uint64_t)wc[i].x) | TAG_D);
			}
		}
		tf->size = (int64_t)new_size;
		tf->mtime = now;
		tf->epoch_dirty = 1;
		pm_fence();
	} else if (nc_write) {
		for (uint64_t i = 0; i < n; i++)
			if (wc[i].y == first_y) {
				tier_set_tag(t, (uint64_t)first_y,
					     tag_make(fid, wc[i].idx, flags | TAG_C));
				break;
			}
		pm_fence();
		for (uint64_t i = 0; i < n; i++)
			if (wc[i].y >= 0 && wc[i].y != first_y)
				tier_set_tag(t, (uint64_t)wc[i].y, tag_make(fid, wc[i].idx, flags));
			else if (wc[i].y < 0)
				tier_set_tag(t, (uint64_t)wc[i].x,
					     tag_of(t, (uint64_t)wc[i].x) | TAG_D);
		tier_rec_publish(t, tf, new_size, now);
		pm_fence();
		tier_set_tag(t, (uint64_t)first_y,
			     tag_of(t, (uint64_t)first_y) & ~TAG_C); /* COMMIT */
		pm_fence();
	} else {
		for (uint64_t i = 0; i < n; i++)
			if (wc[i].y >= 0)
				tier_set_tag(t, (uint64_t)wc[i].y, tag_make(fid, wc[i].idx, flags));
			else
				tier_set_tag(t, (uint64_t)wc[i].x,
					     tag_of(t, (uint64_t)wc[i].x) | TAG_D);
		if (new_size != size) {
			pm_fence(); /* the chunks before the size that exposes them */
			tier_rec_publish(t, tf, new_size, now); /* COMMIT of an append */
		} else {
			tier_rec_publish(t, tf, new_size, now); /* COMMIT (one chunk): its tag */
		}
		pm_fence();
	}
	/* D: the old versions go. */
	if (!epoch) {
		int any = 0;
		for (uint64_t i = 0; i < n; i++)
			if (wc[i].y >= 0 && wc[i].x >= 0) {
				tier_set_tag(t, (uint64_t)wc[i].x, 0);
				any = 1;
			}
		if (any)
			pm_fence();
	}
	lockset_unlock(t, &ls);
	if (new_size != size && !epoch)
		tf_size_changed(t, tf, new_size);
	return rc ? rc : (ssize_t)len;
}

ssize_t tier_cache_write(struct tier *t, struct tier_file *tf, int kfd, const struct iovec *iov,
			 int iovcnt, uint64_t iov_off, uint64_t off, size_t len, int *epoch_full)
{
	*epoch_full = 0;
	if (len == 0)
		return 0;
	uint64_t maxc = tier_max_write_chunks(t->nslots);
	uint64_t c0 = off >> TIER_CHUNK_SHIFT;
	uint64_t lim = ((c0 + maxc) << TIER_CHUNK_SHIFT) - off;
	if (len > lim)
		len = (size_t)lim; /* a short write: each call is atomic */
	uint64_t n = ((off + len - 1) >> TIER_CHUNK_SHIFT) - c0 + 1;
	struct wchunk small[SMALL_WRITE];
	struct wchunk *wc = n <= SMALL_WRITE ? small : malloc(n * sizeof(*wc));
	if (!wc)
		return -ENOMEM;
	struct src s = {iov, iovcnt, iov_off};
	ssize_t rc;
	if (t->consistency == TIER_EPOCH && tier_epoch_reserve(t, n)) {
		if (wc != small)
			free(wc);
		*epoch_full = 1;
		return 0;
	}
	for (;;) {
		struct room_retry retry = {0};
		rc = write_try(t, tf, kfd, &s, off, len, wc, &retry);
		if (rc != -EAGAIN)
			break;
		/* Back off with no slot lock held, then go again. */
		if (retry.wait_fid1) {
			/* under a reference (none: it is gone, go again at once) */
			struct tier_file *w = tf_ref(t, retry.wait_fid1 - 1);
			if (w) {
				pthread_mutex_lock(&w->flush_lock);
				pthread_mutex_unlock(&w->flush_lock);
				tf_put(t, w);
			}
		} else if (retry.epoch_full) {
			*epoch_full = 1; /* the caller commits, with no lock held */
			rc = 0;
			break;
		} else {
			rc = fr_err(-EIO, "no room in the cache");
			break;
		}
	}
	if (wc != small)
		free(wc);
	return rc;
}

/* ---- reads -------------------------------------------------------------------------- */

/* Caches a chunk just read from the backing file (clean), if a chunk of its
 * slot is free or clean; never flushes for it. */
static void read_allocate(struct tier *t, struct tier_file *tf, uint64_t idx, const char *buf)
{
	struct tier_rec *r = &t->recs[tf->fid];
	uint64_t s = slot_of(t, r->r_key, idx);
	pthread_mutex_t *lk = slot_lock(t, s);
	if (pthread_mutex_trylock(lk) != 0)
		return; /* busy: caching this one is not worth the wait */
	uint64_t want = tag_make(tf->fid, idx, 0);
	int fence = 0;
	struct room_retry retry = {0};
	int64_t y = find_chunk(t, s, want) >= 0 ? -1 : make_room(t, s, -1, 0, &fence, &retry);
	if (y >= 0) {
		if (fence)
			pm_fence();
		pm_copy_nt(chunk_data(t, (uint64_t)y), buf, TIER_CHUNK_SIZE);
		desc_fill(t, (uint64_t)y, next_seq(t), 0, 0, 1, 0);
		int64_t other = (int64_t)(2 * s + (2 * s == (uint64_t)y ? 1 : 0));
		uint64_t ot = tag_of(t, (uint64_t)other);
		if ((ot & (TAG_V | TAG_N)) == (TAG_V | TAG_N))
			tier_set_tag(t, (uint64_t)other, ot & ~TAG_N);
		pm_fence();
		tier_set_tag(t, (uint64_t)y, tag_make(tf->fid, idx, TAG_V | TAG_N));
		pm_fence();
	} else if (fence) {
		pm_fence();
	}
	pthread_mutex_unlock(lk);
}

ssize_t tier_cache_read(struct tier *t, struct tier_file *tf, int kfd, const struct iovec *iov,
			int iovcnt, uint64_t off, size_t len)
{
	struct tier_rec *r = &t->recs[tf->fid];
	uint64_t size = t->consistency == TIER_EPOCH ? (uint64_t)tf->size : r->r_size;
	if (off >= size || len == 0)
		return 0;
	len = (size_t)FR_MIN((uint64_t)len, size - off);
	uint64_t key = r->r_key, end = off + len, pos = off;
	char buf[TIER_CHUNK_SIZE] __attribute__((aligned(64)));
	int vi = 0;
	size_t vq = 0; /* position in iov */
	while (pos < end) {
		uint64_t idx = pos >> TIER_CHUNK_SHIFT;
		uint64_t cstart = idx << TIER_CHUNK_SHIFT;
		uint64_t b = FR_MIN(end, cstart + TIER_CHUNK_SIZE);
		uint64_t s = slot_of(t, key, idx);
		pthread_mutex_t *lk = slot_lock(t, s);
		pthread_mutex_lock(lk);
		int64_t c = find_chunk(t, s, tag_make(tf->fid, idx, 0));
		const char *from;
		if (c >= 0) {
			memcpy(buf + (pos - cstart), chunk_data(t, (uint64_t)c) + (pos - cstart),
			       b - pos);
			pthread_mutex_unlock(lk);
			tier_count(t, TS_READ_HITS, 1);
		} else {
			pthread_mutex_unlock(lk);
			/* The whole chunk, so it can be cached. */
			uint64_t avail = FR_MIN((uint64_t)TIER_CHUNK_SIZE, size - cstart);
			int e = backing_read(t, tf, kfd, buf, cstart, avail);
			if (e)
				return pos > off ? (ssize_t)(pos - off) : e;
			if (avail < TIER_CHUNK_SIZE)
				memset(buf + avail, 0, TIER_CHUNK_SIZE - avail);
			tier_count(t, TS_READ_MISSES, 1);
			read_allocate(t, tf, idx, buf);
		}
		from = buf + (pos - cstart);
		/* Scatter [pos, b) into the iovecs. */
		uint64_t k = b - pos;
		while (k) {
			size_t room = iov[vi].iov_len - vq;
			size_t m = (size_t)FR_MIN((uint64_t)room, k);
			memcpy((char *)iov[vi].iov_base + vq, from, m);
			from += m;
			k -= m;
			vq += m;
			if (vq == iov[vi].iov_len) {
				vi++;
				vq = 0;
			}
		}
		pos = b;
	}
	return (ssize_t)len;
}

/* ---- truncation, punching, removal --------------------------------------------------- */

/* What sweep_chunks does to each valid chunk of a file in a range. */
enum sweep {
	SWEEP_DROP,	  /* invalidate it */
	SWEEP_DROP_CLEAN, /* invalidate it if the backing file holds its content
			   * (neither D nor C), which C1 allows at any time */
	SWEEP_REDIRTY,	  /* mark it dirty: the backing file no longer holds it */
};

/* Applies what to the file's valid chunks with index in [from, to) (the
 * flush lock held), both versions in epoch mode (the committed and the
 * open one). */
static void sweep_chunks(struct tier *t, struct tier_file *tf, uint64_t from, uint64_t to,
			 enum sweep what)
{
	if (from >= to)
		return;
	uint64_t key = t->recs[tf->fid].r_key;
	uint64_t skip = what == SWEEP_DROP_CLEAN ? TAG_D | TAG_C
			: what == SWEEP_REDIRTY	 ? TAG_D
						 : 0;
	int whole = to - from >= t->nslots; /* every slot may hold some */
	uint64_t nslots = whole ? t->nslots : to - from;
	int any = 0;
	for (uint64_t i = 0; i < nslots; i++) {
		uint64_t s = whole ? i : slot_of(t, key, from + i);
		pthread_mutex_t *lk = slot_lock(t, s);
		pthread_mutex_lock(lk);
		for (uint64_t c = 2 * s; c < 2 * s + 2; c++) {
			uint64_t tag = tag_of(t, c);
			if (!(tag & TAG_V) || (tag & skip) || tag_fid(tag) != tf->fid)
				continue;
			if (whole ? tag_idx(tag) < from || tag_idx(tag) >= to
				  : tag_idx(tag) != from + i)
				continue;
			tier_set_tag(t, c, what == SWEEP_REDIRTY ? tag | TAG_D : 0);
			any = 1;
		}
		pthread_mutex_unlock(lk);
	}
	if (any)
		pm_fence();
}

static void drop_chunks(struct tier *t, struct tier_file *tf, uint64_t from, uint64_t to)
{
	sweep_chunks(t, tf, from, to, SWEEP_DROP);
}

void tier_cache_redirty_file(struct tier *t, struct tier_file *tf)
{
	pthread_mutex_lock(&tf->flush_lock);
	sweep_chunks(t, tf, 0, TAG_IDX_MASK, SWEEP_REDIRTY);
	pthread_mutex_unlock(&tf->flush_lock);
}

int tier_cache_truncate(struct tier *t, struct tier_file *tf, int kfd, uint64_t size)
{
	(void)kfd;
	struct tier_rec *r = &t->recs[tf->fid];
	int epoch = t->consistency == TIER_EPOCH;
	uint64_t old = epoch ? (uint64_t)tf->size : r->r_size;
	int64_t now = tier_now_ns();
	(void)epoch; /* epoch mode: the caller committed the open epoch and holds it closed */
	if (size < old) {
		tier_rec_publish(t, tf, size, now);
		pm_fence(); /* COMMIT of the truncation */
		tf->size = (int64_t)size;
		pthread_mutex_lock(&tf->flush_lock);
		drop_chunks(t, tf, (size + TIER_CHUNK_SIZE - 1) >> TIER_CHUNK_SHIFT,
			    (old + TIER_CHUNK_SIZE - 1) >> TIER_CHUNK_SHIFT);
		int fd = tf_wfd(t, tf, 0);
		int rc = fd < 0 ? fd : tsys_ftruncate(fd, (off_t)size) ? -errno : 0;
		pthread_mutex_unlock(&tf->flush_lock);
		tf_size_changed(t, tf, size);
		if (rc)
			return fr_err(rc, "truncating the backing file: %s", strerror(-rc));
		return 0;
	}
	if (size > old) {
		/* The tail of the last chunk enters the file: zero it (C3). */
		uint64_t idx = old >> TIER_CHUNK_SHIFT;
		if (old & (TIER_CHUNK_SIZE - 1)) {
			uint64_t s = slot_of(t, r->r_key, idx);
			pthread_mutex_t *lk = slot_lock(t, s);
			pthread_mutex_lock(lk);
			int64_t c = find_chunk(t, s, tag_make(tf->fid, idx, 0));
			if (c >= 0) {
				zero_tail(t, (uint64_t)c, old & (TIER_CHUNK_SIZE - 1));
				pm_fence();
			}
			pthread_mutex_unlock(lk);
		}
		tier_rec_publish(t, tf, size, now);
		pm_fence(); /* COMMIT */
		tf->size = (int64_t)size;
		pthread_mutex_lock(&tf->flush_lock);
		int fd = tf_wfd(t, tf, 0);
		struct stat st;
		int rc = 0;
		if (fd < 0)
			rc = fd;
		else if (fstat(fd, &st) == 0 && (uint64_t)st.st_size < size &&
			 tsys_ftruncate(fd, (off_t)size) != 0)
			rc = -errno;
		pthread_mutex_unlock(&tf->flush_lock);
		tf_size_changed(t, tf, size);
		if (rc == -ENOSPC || rc == -EFBIG)
			return fr_err(rc, "the backing file system cannot hold %llu bytes",
				      (unsigned long long)size);
		return 0; /* the record holds the size; the backing file follows at drain */
	}
	tier_rec_publish(t, tf, size, now);
	pm_fence();
	return 0;
}

int tier_cache_punch(struct tier *t, struct tier_file *tf, int kfd, uint64_t off, uint64_t len)
{
	uint64_t size = t->consistency == TIER_EPOCH ? (uint64_t)tf->size : t->recs[tf->fid].r_size;
	uint64_t end = FR_MIN(off + len, size);
	if (off >= end)
		return 0;
	uint64_t a = FR_ALIGN_UP(off, (uint64_t)TIER_CHUNK_SIZE);
	uint64_t b = FR_ALIGN_DOWN(end, (uint64_t)TIER_CHUNK_SIZE);
	if (a < b) {
		/* Whole chunks: punched in the backing file and synced, then the
		 * cached versions go (C4: the backing file now holds the zeros).
		 * The clean ones go first: once the hole is made they no longer
		 * hold what the backing file does (C1), and a crash before they
		 * went would let them show old bytes until evicted, then zeros.
		 * A dirty one left by a crash is drained: its bytes read old. */
		pthread_mutex_lock(&tf->flush_lock);
		sweep_chunks(t, tf, a >> TIER_CHUNK_SHIFT, b >> TIER_CHUNK_SHIFT, SWEEP_DROP_CLEAN);
		int fd = tf_wfd(t, tf, 0);
		int rc = fd < 0 ? fd : 0;
		if (!rc && tsys_fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)a,
					  (off_t)(b - a)) != 0) {
			/* No punching there: write zeros instead. */
			static const char zeros[65536];
			for (uint64_t p = a; p < b && !rc;) {
				size_t k = (size_t)FR_MIN((uint64_t)sizeof zeros, b - p);
				ssize_t w = tsys_pwrite(fd, zeros, k, (off_t)p);
				if (w <= 0)
					rc = w < 0 ? -errno : -ENOSPC;
				else
					p += (uint64_t)w;
			}
		}
		if (!rc && tsys_fdatasync(fd) != 0)
			rc = -errno;
		if (!rc)
			drop_chunks(t, tf, a >> TIER_CHUNK_SHIFT, b >> TIER_CHUNK_SHIFT);
		pthread_mutex_unlock(&tf->flush_lock);
		if (rc)
			return fr_err(rc, "punching the backing file: %s", strerror(-rc));
	}
	/* The partial chunks at the edges: zeros written through the cache. */
	static const char zpage[TIER_CHUNK_SIZE];
	uint64_t edges[2][2] = {{off, FR_MIN(a, end)}, {FR_MAX(b, off), end}};
	if (a >= b) {
		edges[0][1] = end;
		edges[1][0] = edges[1][1] = end;
	}
	for (int e = 0; e < 2; e++) {
		uint64_t p = edges[e][0], q = edges[e][1];
		while (p < q) {
			struct iovec v = {(void *)zpage,
					  (size_t)FR_MIN(q - p, (uint64_t)TIER_CHUNK_SIZE)};
			int full;
			ssize_t w = tier_cache_write(t, tf, kfd, &v, 1, p, p, v.iov_len, &full);
			if (full) /* the caller committed the epoch and holds it: empty */
				return fr_err(-EIO, "the epoch journal cannot take a punch's edge");
			if (w < 0)
				return (int)w;
			p += (uint64_t)w;
		}
	}
	return 0;
}

void tier_cache_drop_file(struct tier *t, struct tier_file *tf)
{
	struct tier_rec *r = &t->recs[tf->fid];
	uint64_t size = FR_MAX(r->r_size, (uint64_t)FR_MAX(tf->size, 0));
	uint64_t nchunks = (size + TIER_CHUNK_SIZE - 1) >> TIER_CHUNK_SHIFT;
	/* Not while an epoch commits: it would tag pages dropped here again. */
	pthread_rwlock_rdlock(&t->epoch_lock);
	pthread_mutex_lock(&tf->flush_lock);
	if (__atomic_load_n(&tf->nvalid, __ATOMIC_RELAXED))
		drop_chunks(t, tf, 0, nchunks);
	/* Chunks wholly beyond the size cannot exist (C3) unless a crash left
	 * some behind a size that shrank: sweep every slot if any remain. */
	if (__atomic_load_n(&tf->nvalid, __ATOMIC_RELAXED))
		drop_chunks(t, tf, 0, TAG_IDX_MASK);
	pthread_mutex_unlock(&tf->flush_lock);
	pthread_rwlock_unlock(&t->epoch_lock);
}

void tier_cache_evict_clean(struct tier *t, struct tier_file *tf)
{
	/* The file's lock keeps writers (and readers installing chunks) out;
	 * the flush lock the flusher; epoch_lock a commit that would tag pages
	 * again. What is dirty or part of an unfinished write stays. */
	pthread_rwlock_rdlock(&t->epoch_lock);
	pthread_rwlock_wrlock(&tf->lock);
	pthread_mutex_lock(&tf->flush_lock);
	struct tier_rec *r = &t->recs[tf->fid];
	uint64_t size = FR_MAX(r->r_size, (uint64_t)FR_MAX(tf->size, 0));
	uint64_t nchunks = (size + TIER_CHUNK_SIZE - 1) >> TIER_CHUNK_SHIFT;
	if (__atomic_load_n(&tf->nvalid, __ATOMIC_RELAXED))
		sweep_chunks(t, tf, 0, nchunks, SWEEP_DROP_CLEAN);
	pthread_mutex_unlock(&tf->flush_lock);
	pthread_rwlock_unlock(&tf->lock);
	pthread_rwlock_unlock(&t->epoch_lock);
}
