/*
 * flush.c -- draining dirty chunks to the backing files (First Responder's
 * periodic flush, HasFS's checkpoint).
 *
 * Every flush_ms the flusher takes the dirty chunks (a DRAM bitmap mirrors
 * the D bits), writes them to their files in runs of contiguous chunks
 * (through the page cache, or with O_DIRECT where the pool asks for it and the
 * backing file system takes it), syncs the backing file
 * system once, and then clears the D bit of each chunk that still holds the
 * content it wrote. In epoch mode it also ends the open epoch every epoch_ms.
 *
 * Invariants: L1 a D bit is cleared only after the very content it marks is
 *               durable in the backing file (same tag, same seq, checked
 *               under the slot lock after the sync);
 *             L2 a chunk's content is written while its file's flush lock is
 *               held, after it was copied under its slot lock: a newer
 *               version is written later, by a flush that takes the same
 *               lock, so the backing file never goes back to older bytes;
 *             L3 in epoch mode a chunk is copied with the size of the same
 *               committed state (no commit is half applied meanwhile);
 *             L4 D bits are cleared under the file's flush lock, which
 *               whatever changes a backing file (write-back, truncation,
 *               punching) holds: between the write and the clearing the
 *               backing bytes cannot change, and a punch that follows
 *               finds the chunks clean and drops them before it punches.
 * Crash argument: clearing D is the only PM change; if it is lost the chunk
 *   is written again after recovery, which is harmless.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "tier/sys.h"
#include "tier/tier.h"

/* A throttled writer stops waiting after this long without the flusher
 * making progress (the backing file system is failing, or epoch pages that
 * only a commit can release fill the cache). */
#define THROTTLE_STALL_MS 20
#define ROUND_MAX	  16384 /* chunks per round */
#define RUN_CHUNKS	  256	/* chunks per write (1 MiB) */

struct fchunk {
	uint32_t fid;
	uint64_t idx;
	uint64_t c;
	uint64_t tag, seq; /* as copied */
	int written;
};

static int fchunk_cmp(const void *a, const void *b)
{
	const struct fchunk *x = a, *y = b;
	if (x->fid != y->fid)
		return x->fid < y->fid ? -1 : 1;
	return x->idx < y->idx ? -1 : x->idx > y->idx;
}

/* Writes n bytes of buf at off, full chunks through O_DIRECT in direct
 * write-back. */
static int put_run(struct tier *t, struct tier_file *tf, const char *buf, uint64_t off, uint64_t n)
{
	uint64_t full = n & ~(uint64_t)(TIER_CHUNK_SIZE - 1);
	uint64_t done = 0;
	if (full && t->backing_has_direct) {
		int dfd = tf_wfd(t, tf, 1);
		if (dfd >= 0) {
			while (done < full) {
				ssize_t w =
				    tsys_pwrite(dfd, buf + done, full - done, (off_t)(off + done));
				if (w <= 0) {
					if (w < 0 && errno == EINTR)
						continue;
					break; /* fall back to the buffered descriptor */
				}
				done += (uint64_t)w;
			}
		}
	}
	int fd = tf_wfd(t, tf, 0);
	if (fd < 0)
		return fd;
	while (done < n) {
		ssize_t w = tsys_pwrite(fd, buf + done, n - done, (off_t)(off + done));
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return tier_backing_failed(t, w < 0 ? errno : ENOSPC, "writing back to");
		done += (uint64_t)w;
	}
	return 0;
}

/* Copies and writes the chunks of one file, fc[0..n), sorted by index.
 * shared_epoch: under epoch_lock shared (L3), taken first as everywhere. */
static void flush_file(struct tier *t, struct tier_file *tf, struct fchunk *fc, size_t n,
		       char *bounce, int shared_epoch)
{
	/* L3: a commit makes pages committed dirty chunks before it publishes
	 * the sizes that cover their new bytes; a chunk copied in between would
	 * be cut at the old size and yet counted clean. */
	if (shared_epoch)
		pthread_rwlock_rdlock(&t->epoch_lock);
	pthread_mutex_lock(&tf->flush_lock);
	struct tier_rec *r = &t->recs[tf->fid];
	size_t i = 0;
	while (i < n) {
		/* A run of contiguous chunks. */
		uint64_t start = fc[i].idx, len = 0;
		size_t j = i;
		while (j < n && fc[j].idx == start + (j - i) && j - i < RUN_CHUNKS) {
			struct fchunk *f = &fc[j];
			uint64_t s = f->c / 2;
			pthread_mutex_t *lk = slot_lock(t, s);
			pthread_mutex_lock(lk);
			uint64_t tag = tag_of(t, f->c);
			/* Still this file's (the record may have been freed and its
			 * number given to another file since the round began). */
			int ok = (tag & (TAG_V | TAG_D)) == (TAG_V | TAG_D) && !(tag & TAG_C) &&
				 tag_fid(tag) == f->fid && tag_idx(tag) == f->idx &&
				 f->fid < t->nrecs &&
				 __atomic_load_n(&t->files[f->fid], __ATOMIC_ACQUIRE) == tf;
			uint64_t size = r->r_size, at = f->idx << TIER_CHUNK_SHIFT;
			if (ok) {
				f->tag = tag;
				f->seq = chunk_desc(t, f->c)->d_seq;
				if (at < size) {
					memcpy(bounce + (j - i) * TIER_CHUNK_SIZE,
					       chunk_data(t, f->c), TIER_CHUNK_SIZE);
					len = FR_MIN((j - i + 1) * (uint64_t)TIER_CHUNK_SIZE,
						     size - (start << TIER_CHUNK_SHIFT));
				}
				f->written = 1;
			}
			pthread_mutex_unlock(lk);
			j++;
			/* The run ends at a chunk that changed, and at one beyond the
			 * size (nothing of it is in the file, and it left its place
			 * in the buffer uncopied: a later chunk must not be written
			 * over that place). */
			if (!ok || at >= size)
				break;
		}
		/* The chunks whose bytes are beyond the size need no write. */
		if (len && put_run(t, tf, bounce, start << TIER_CHUNK_SHIFT, len) != 0)
			for (size_t k = i; k < j; k++)
				fc[k].written = 0; /* stays dirty: try again next round */
		i = j;
	}
	pthread_mutex_unlock(&tf->flush_lock);
	if (shared_epoch)
		pthread_rwlock_unlock(&t->epoch_lock);
}

/* The chunks to write this round: valid, dirty, not part of an unfinished
 * write (C), of `only` if given; at most ROUND_MAX (*left: more remain). */
static size_t collect_dirty(struct tier *t, struct tier_file *only, struct fchunk *fc, int *left)
{
	size_t n = 0;
	uint64_t words = (t->nchunks + 63) / 64;
	*left = 0;
	for (uint64_t w = 0; w < words; w++) {
		for (uint64_t b = __atomic_load_n(&t->dirty_bits[w], __ATOMIC_RELAXED); b;
		     b &= b - 1) {
			uint64_t c = w * 64 + (uint64_t)__builtin_ctzll(b);
			uint64_t tag = tag_of(t, c);
			if ((tag & (TAG_V | TAG_D)) != (TAG_V | TAG_D) || (tag & TAG_C))
				continue;
			if (only && tag_fid(tag) != only->fid)
				continue;
			if (n == ROUND_MAX) {
				*left = 1;
				return n;
			}
			fc[n++] = (struct fchunk){tag_fid(tag), tag_idx(tag), c, 0, 0, 0};
		}
	}
	return n;
}

/* The end of the run of fc (sorted by file) that starts at i: [i, end) are
 * one file's chunks. */
static size_t file_run_end(const struct fchunk *fc, size_t n, size_t i)
{
	size_t j = i;
	while (j < n && fc[j].fid == fc[i].fid)
		j++;
	return j;
}

/* After syncfs: each chunk written that still holds what was written is
 * clean (L1). L4: under the file's flush lock, so that nothing changed the
 * backing file between the write and here (a punch, say) while the D bit
 * is cleared: a chunk must never be clean unless the backing file holds
 * its bytes (cache.c C1). Returns the chunks made clean. */
static int64_t mark_clean(struct tier *t, struct fchunk *fc, size_t n)
{
	int64_t cleaned = 0;
	for (size_t i = 0, j; i < n; i = j) {
		j = file_run_end(fc, n, i);
		struct tier_file *tf = tf_ref(t, fc[i].fid);
		if (!tf)
			continue;
		pthread_mutex_lock(&tf->flush_lock);
		for (size_t k = i; k < j; k++) {
			struct fchunk *f = &fc[k];
			if (!f->written)
				continue;
			pthread_mutex_t *lk = slot_lock(t, f->c / 2);
			pthread_mutex_lock(lk);
			if (tag_of(t, f->c) == f->tag && chunk_desc(t, f->c)->d_seq == f->seq &&
			    tier_file_at(t, f->fid) == tf) {
				struct tier_desc *d = chunk_desc(t, f->c);
				pm_store8(&d->d_tag, f->tag & ~TAG_D);
				pm_flush(&d->d_tag, 8);
				tier_dirty_mark(t, f->c, 0);
				__atomic_fetch_sub(&tf->ndirty, 1, __ATOMIC_RELAXED);
				cleaned++;
			}
			pthread_mutex_unlock(lk);
		}
		pm_fence();
		pthread_mutex_unlock(&tf->flush_lock);
		tf_put(t, tf);
	}
	return cleaned;
}

/* Closed files now clean: their backing size and mtime catch up. */
static void sync_closed_meta(struct tier *t, const struct fchunk *fc, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		if (i && fc[i].fid == fc[i - 1].fid)
			continue;
		struct tier_file *tf = tf_ref(t, fc[i].fid);
		if (!tf)
			continue;
		pthread_mutex_lock(&t->files_lock);
		int closed = tf->opens == 0 && t->recs[tf->fid].r_state == REC_LIVE &&
			     t->files[tf->fid] == tf;
		pthread_mutex_unlock(&t->files_lock);
		if (closed && !__atomic_load_n(&tf->ndirty, __ATOMIC_RELAXED) &&
		    pthread_mutex_trylock(&tf->flush_lock) == 0) {
			tier_sync_meta(t, tf);
			pthread_mutex_unlock(&tf->flush_lock);
		}
		tf_put(t, tf);
	}
}

/* One round: collect, write each file's chunks, make it all durable, mark
 * clean what still holds what was written, catch up closed files' size and
 * mtime. Returns the chunks made clean, or -errno. shared_epoch: take
 * epoch_lock shared while chunks are copied (the background flusher; a
 * drain runs where no commit can, or holds it itself). */
static int64_t flush_round(struct tier *t, struct tier_file *only, int *left, char *bounce,
			   int shared_epoch)
{
	struct fchunk *fc = malloc(ROUND_MAX * sizeof(*fc));
	if (!fc)
		return -ENOMEM;
	shared_epoch = shared_epoch && t->consistency == TIER_EPOCH;
	size_t n = collect_dirty(t, only, fc, left);
	if (!n) {
		free(fc);
		return 0;
	}
	qsort(fc, n, sizeof(*fc), fchunk_cmp);
	for (size_t i = 0, j; i < n; i = j) {
		j = file_run_end(fc, n, i);
		struct tier_file *tf = tf_ref(t, fc[i].fid);
		if (tf) {
			flush_file(t, tf, fc + i, j - i, bounce, shared_epoch);
			tf_put(t, tf);
		}
	}
	/* Make everything written durable: data and the namespace around it. */
	if (tsys_syncfs(t->root_fd) != 0) {
		int e = errno;
		free(fc);
		return tier_backing_failed(t, e, "syncing");
	}
	int64_t cleaned = mark_clean(t, fc, n);
	sync_closed_meta(t, fc, n);
	free(fc);
	return cleaned;
}

static int drain_with(struct tier *t, struct tier_file *only, char *bounce);

/* Everything dirty reached the backing directory: no error stands. */
static void backing_recovered(struct tier *t)
{
	__atomic_store_n(&t->backing_err, 0, __ATOMIC_RELAXED);
	if (t->live)
		__atomic_store_n(&t->live->backing_errno, 0, __ATOMIC_RELAXED);
}

int tier_drain(struct tier *t, struct tier_file *only)
{
	if (t->no_writeback)
		return 0;
	/* Its own buffer: the flusher may be running too. */
	char *bounce;
	if (posix_memalign((void **)&bounce, 4096, RUN_CHUNKS * TIER_CHUNK_SIZE))
		return -ENOMEM;
	int rc = drain_with(t, only, bounce);
	free(bounce);
	return rc;
}

static int drain_with(struct tier *t, struct tier_file *only, char *bounce)
{
	for (int tries = 0;; tries++) {
		int left;
		int64_t r = flush_round(t, only, &left, bounce, 0);
		if (r < 0)
			return (int)r;
		if (r > 0)
			tier_count(t, TS_FLUSH_ROUNDS, 1);
		uint64_t dirty = only ? __atomic_load_n(&only->ndirty, __ATOMIC_RELAXED)
				      : __atomic_load_n(&t->ndirty, __ATOMIC_RELAXED);
		if (!dirty)
			break;
		if (r == 0 && !left && tries > 3) {
			int e = __atomic_load_n(&t->backing_err, __ATOMIC_RELAXED);
			e = e ? e : EIO;
			return fr_err(-e, "%llu dirty chunks could not be written back to %s: %s",
				      (unsigned long long)dirty, t->backing, strerror(e));
		}
	}
	/* Every record's backing file takes its size and time. */
	for (uint32_t fid = 1; fid < t->nrecs; fid++) {
		struct tier_file *tf = t->files[fid];
		if (!tf || (only && tf != only) || t->recs[fid].r_state != REC_LIVE)
			continue;
		pthread_mutex_lock(&tf->flush_lock);
		int rc = tier_sync_meta(t, tf);
		pthread_mutex_unlock(&tf->flush_lock);
		if (rc)
			return rc;
	}
	if (tsys_syncfs(t->root_fd) != 0)
		return tier_backing_failed(t, errno, "syncing");
	if (!__atomic_load_n(&t->ndirty, __ATOMIC_RELAXED))
		backing_recovered(t);
	return 0;
}

int tier_backing_failed(struct tier *t, int e, const char *what)
{
	__atomic_store_n(&t->backing_err, e, __ATOMIC_RELAXED);
	if (t->live)
		__atomic_store_n(&t->live->backing_errno, (uint64_t)e, __ATOMIC_RELAXED);
	tier_count(t, TS_FLUSH_ERRORS, 1);
	return fr_err(-e, "%s %s: %s", what, t->backing, strerror(e));
}

static void *flusher_main(void *arg)
{
	struct tier *t = arg;
	struct timespec last_epoch;
	clock_gettime(CLOCK_MONOTONIC, &last_epoch);
	pthread_mutex_lock(&t->flush_mx);
	while (!t->stop) {
		struct timespec until;
		clock_gettime(CLOCK_REALTIME, &until);
		unsigned period = t->flush_ms ? t->flush_ms : 10;
		if (t->consistency == TIER_EPOCH && t->epoch_ms < period)
			period = t->epoch_ms ? t->epoch_ms : period;
		until.tv_nsec += (long)period * 1000000L;
		until.tv_sec += until.tv_nsec / 1000000000L;
		until.tv_nsec %= 1000000000L;
		if (!t->flush_now)
			pthread_cond_timedwait(&t->flush_cv, &t->flush_mx, &until);
		t->flush_now = 0;
		if (t->stop)
			break;
		pthread_mutex_unlock(&t->flush_mx);
		if (t->consistency == TIER_EPOCH) {
			struct timespec now;
			clock_gettime(CLOCK_MONOTONIC, &now);
			int64_t ms = (now.tv_sec - last_epoch.tv_sec) * 1000 +
				     (now.tv_nsec - last_epoch.tv_nsec) / 1000000;
			if (ms >= (int64_t)t->epoch_ms) {
				/* a failed commit leaves the epoch open: counted, and
				 * tried again next period */
				if (tier_epoch_commit(t) < 0)
					tier_count(t, TS_FLUSH_ERRORS, 1);
				else
					last_epoch = now;
			}
		}
		/* N3 (ns.h): names changed since the last sync become durable. */
		if (__atomic_exchange_n(&t->ns_dirty, 0, __ATOMIC_ACQ_REL) &&
		    !__atomic_load_n(&t->ndirty, __ATOMIC_RELAXED) &&
		    tsys_syncfs(t->root_fd) != 0) {
			/* not durable yet: counted, and synced again next period */
			tier_count(t, TS_FLUSH_ERRORS, 1);
			__atomic_store_n(&t->ns_dirty, 1, __ATOMIC_RELEASE);
		}
		int left = 1;
		while (left && !t->stop && __atomic_load_n(&t->ndirty, __ATOMIC_RELAXED)) {
			int64_t r = flush_round(t, NULL, &left, t->bounce, 1);
			if (r > 0) {
				tier_count(t, TS_FLUSH_ROUNDS, 1);
				tier_count(t, TS_FLUSH_PERIODIC, (uint64_t)r);
			}
			if (r <= 0)
				break;
		}
		if (!__atomic_load_n(&t->ndirty, __ATOMIC_RELAXED))
			backing_recovered(t);
		if (t->live) {
			t->live->valid_chunks = __atomic_load_n(&t->nvalid, __ATOMIC_RELAXED);
			t->live->dirty_chunks = __atomic_load_n(&t->ndirty, __ATOMIC_RELAXED);
		}
		pthread_mutex_lock(&t->flush_mx);
	}
	pthread_mutex_unlock(&t->flush_mx);
	return NULL;
}

int tier_flusher_start(struct tier *t)
{
	if (t->no_writeback)
		return 0;
	pthread_mutex_init(&t->flush_mx, NULL);
	pthread_cond_init(&t->flush_cv, NULL);
	t->stop = 0;
	int rc = pthread_create(&t->flusher, NULL, flusher_main, t);
	if (rc)
		return -rc;
	t->flusher_started = 1;
	return 0;
}

int tier_writeback_held(struct tier *t, const char *what)
{
	if (!t->no_writeback)
		return 0;
	return fr_err(-EROFS, "%s: mounted without write-back to %s", what, t->backing);
}

void tier_throttle(struct tier *t)
{
	uint64_t high = t->nchunks / 4, low = t->nchunks / 8;
	uint64_t dirty = __atomic_load_n(&t->ndirty, __ATOMIC_RELAXED);
	if (dirty <= high || !t->flusher_started ||
	    (t->live && __atomic_load_n(&t->live->backing_errno, __ATOMIC_RELAXED)))
		return;
	uint64_t best = dirty;
	for (int stalls = 0; dirty > low && stalls < THROTTLE_STALL_MS;) {
		pthread_mutex_lock(&t->flush_mx);
		t->flush_now = 1;
		pthread_cond_signal(&t->flush_cv);
		pthread_mutex_unlock(&t->flush_mx);
		struct timespec ms = {0, 1000000};
		nanosleep(&ms, NULL);
		dirty = __atomic_load_n(&t->ndirty, __ATOMIC_RELAXED);
		if (dirty < best) {
			best = dirty;
			stalls = 0;
		} else {
			stalls++;
		}
	}
}

void tier_flusher_stop(struct tier *t)
{
	if (!t->flusher_started)
		return;
	pthread_mutex_lock(&t->flush_mx);
	t->stop = 1;
	pthread_cond_signal(&t->flush_cv);
	pthread_mutex_unlock(&t->flush_mx);
	pthread_join(t->flusher, NULL);
	t->flusher_started = 0;
}
