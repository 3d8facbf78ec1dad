/*
 * files.c -- file records: what the cache knows of a backing file.
 *
 * A regular file opened through the tier gets a record (fid) in PM holding
 * its First Responder key and stride, its size and latest write time (the
 * backing file's own lag until its chunks drain), and how to find it again
 * after a crash: inode number and birth time, a file handle, and its path
 * relative to the backing directory.
 *
 * Invariants: F1 a record's fields are persistent before its state makes it
 *               LIVE; a chunk tag names only LIVE, DYING or ORPHAN records;
 *             F2 a record is freed only when none of its chunks is valid and
 *               the backing file's size and mtime equal the record's;
 *             F3 removing a file with a record goes LIVE -> DYING (persisted)
 *               before the backing file system is asked, so recovery can
 *               tell "removed" (the inode is gone: drop the chunks) from
 *               "not removed yet" (back to LIVE).;
 *             F4 a record leads only below the backing directory: its path
 *               (checked by check.c K2) is opened with RESOLVE_BENEATH and
 *               no symbolic link, and a file opened by its handle must be a
 *               regular file with its inode number, on the backing file
 *               system, reachable below the directory;
 *             F5 a tier_file is on the inode hash, the closed list or the
 *               LRU only while it holds its record: whatever frees it
 *               unlinks it (by identity) first.
 * Keys: the next key is th_key_next, advanced by each new file's stride, the
 *   size (in chunks, a power of two) just above the most common file size in
 *   the stride table (First Responder 4.3). A key only spreads files over the
 *   slots; nothing depends on keys being unique.
 * Records: one per 64 KiB of pool. When all are taken, a file being opened
 *   takes the record of a closed file whose chunks are all clean: they are
 *   dropped first (the backing file holds them, C1), then F2 lets it go.
 * Locking: files_lock guards the fid and inode tables, the stride table and
 *   the descriptor LRU; a record's path changes under it too.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tier/sys.h"
#include "tier/tier.h"

#define DEFAULT_STRIDE_CHUNKS 16

static uint64_t ino_slot(struct tier *t, uint64_t ino)
{
	return (ino * 0x9E3779B97F4A7C15ULL) >> 20 & (t->ino_hash_cap - 1);
}

struct tier_file *tf_lookup(struct tier *t, uint64_t ino)
{
	for (struct tier_file *f = t->ino_hash[ino_slot(t, ino)]; f; f = f->hnext)
		if (f->ino == ino)
			return f;
	return NULL;
}

void tf_hash_insert(struct tier *t, struct tier_file *tf)
{
	uint64_t s = ino_slot(t, tf->ino);
	tf->hnext = t->ino_hash[s];
	t->ino_hash[s] = tf;
}

void tf_hash_remove(struct tier *t, struct tier_file *tf)
{
	for (struct tier_file **p = &t->ino_hash[ino_slot(t, tf->ino)]; *p; p = &(*p)->hnext)
		if (*p == tf) {
			*p = tf->hnext;
			return;
		}
}

/* ---- stride table ---------------------------------------------------------------- */

static int bucket_of(uint64_t size)
{
	uint64_t chunks = (size + TIER_CHUNK_SIZE - 1) >> TIER_CHUNK_SHIFT;
	int b = (int)fr_log2_ceil(chunks ? chunks : 1);
	return b < TIER_BUCKETS ? b : TIER_BUCKETS - 1;
}

void tf_size_changed(struct tier *t, struct tier_file *tf, uint64_t size)
{
	int b = bucket_of(size);
	if (b == tf->bucket)
		return;
	pthread_mutex_lock(&t->files_lock);
	if (tf->bucket >= 0)
		t->buckets[tf->bucket]--;
	t->buckets[b]++;
	tf->bucket = b;
	pthread_mutex_unlock(&t->files_lock);
}

/* Chunks to reserve for a new file: the next size above the most common. */
static uint64_t stride_now(struct tier *t)
{
	int best = -1;
	uint64_t most = 0;
	for (int b = 0; b < TIER_BUCKETS; b++)
		if (t->buckets[b] > most) {
			most = t->buckets[b];
			best = b;
		}
	uint64_t s = best < 0 ? DEFAULT_STRIDE_CHUNKS : 1ULL << (best + 1 < 40 ? best + 1 : 39);
	return FR_MIN(s, FR_MAX(t->nslots / 2, (uint64_t)1));
}

/* ---- the table ------------------------------------------------------------------ */

static struct tier_file *tf_new(uint32_t fid, uint64_t ino)
{
	struct tier_file *tf = calloc(1, sizeof(*tf));
	if (!tf)
		return NULL;
	tf->fid = fid;
	tf->ino = ino;
	tf->wfd = tf->dfd = -1;
	tf->bucket = -1;
	tf->refs = 1; /* the table's */
	pthread_rwlock_init(&tf->lock, NULL);
	pthread_mutex_init(&tf->flush_lock, NULL);
	return tf;
}

static void tf_close_fds(struct tier *t, struct tier_file *tf)
{
	if (tf->wfd >= 0) {
		close(tf->wfd);
		t->nwfd--;
	}
	if (tf->dfd >= 0) {
		close(tf->dfd);
		t->nwfd--;
	}
	tf->wfd = tf->dfd = -1;
}

static void lru_remove(struct tier_file *tf)
{
	if (tf->lru_next) {
		tf->lru_next->lru_prev = tf->lru_prev;
		tf->lru_prev->lru_next = tf->lru_next;
		tf->lru_next = tf->lru_prev = NULL;
	}
}

static void lru_add(struct tier *t, struct tier_file *tf)
{
	tf->lru_next = &t->lru;
	tf->lru_prev = t->lru.lru_prev;
	t->lru.lru_prev->lru_next = tf;
	t->lru.lru_prev = tf;
}

static void closed_remove(struct tier_file *tf)
{
	if (tf->closed_next) {
		tf->closed_next->closed_prev = tf->closed_prev;
		tf->closed_prev->closed_next = tf->closed_next;
		tf->closed_next = tf->closed_prev = NULL;
	}
}

/* Appends tf as the most recently closed (files_lock held). */
static void closed_add(struct tier *t, struct tier_file *tf)
{
	closed_remove(tf);
	tf->closed_next = &t->closed;
	tf->closed_prev = t->closed.closed_prev;
	t->closed.closed_prev->closed_next = tf;
	t->closed.closed_prev = tf;
}

/* Offers record fid for reuse (files_lock held). */
static void free_rec_push(struct tier *t, uint32_t fid)
{
	if (!t->rec_stacked[fid]) {
		t->rec_stacked[fid] = 1;
		t->free_recs[t->nfree_recs++] = fid;
	}
}

/* A free record from the stack (files_lock held); -ENOSPC when it is empty. */
static int free_rec_pop(struct tier *t, uint32_t *out)
{
	while (t->nfree_recs) {
		uint32_t fid = t->free_recs[--t->nfree_recs];
		t->rec_stacked[fid] = 0;
		if (t->recs[fid].r_state == REC_FREE && !t->files[fid]) {
			*out = fid;
			return 0;
		}
	}
	return -ENOSPC;
}

static void tf_release(struct tier *t, struct tier_file *tf);

int tier_files_init(struct tier *t)
{
	t->free_recs = malloc((size_t)t->nrecs * sizeof(*t->free_recs));
	t->rec_stacked = calloc((size_t)t->nrecs, 1);
	t->nfree_recs = 0;
	t->closed.closed_next = t->closed.closed_prev = &t->closed;
	if (!t->free_recs || !t->rec_stacked)
		return -ENOMEM;
	t->files = calloc((size_t)t->nrecs, sizeof(*t->files));
	t->ino_hash_cap = 1;
	while (t->ino_hash_cap < (uint64_t)t->nrecs * 2)
		t->ino_hash_cap <<= 1;
	t->ino_hash = calloc(t->ino_hash_cap, sizeof(*t->ino_hash));
	if (!t->files || !t->ino_hash)
		return -ENOMEM;
	pthread_mutex_init(&t->files_lock, NULL);
	pthread_mutex_init(&t->lk_mutex, NULL);
	t->lru.lru_next = t->lru.lru_prev = &t->lru;
	/* Highest first onto the stack: the lowest records are handed out first. */
	for (uint32_t fid = t->nrecs - 1; fid >= 1; fid--)
		if (t->recs[fid].r_state == REC_FREE)
			free_rec_push(t, fid);
	for (uint32_t fid = 1; fid < t->nrecs; fid++) {
		struct tier_rec *r = &t->recs[fid];
		if (r->r_state == REC_FREE)
			continue;
		struct tier_file *tf = tf_new(fid, r->r_ino);
		if (!tf)
			return -ENOMEM;
		tf->size = (int64_t)r->r_size;
		tf->mtime = r->r_mtime;
		t->files[fid] = tf;
		closed_add(t, tf);
		if (r->r_state == REC_LIVE)
			tf_hash_insert(t, tf);
		int b = bucket_of(r->r_size);
		t->buckets[b]++;
		tf->bucket = b;
	}
	return 0;
}

void tier_files_fini(struct tier *t)
{
	if (!t->files)
		return;
	for (uint32_t fid = 0; fid < t->nrecs; fid++) {
		struct tier_file *tf = t->files[fid];
		if (!tf)
			continue;
		tf->refs = 1; /* nothing else runs any more */
		tf_release(t, tf);
	}
	free(t->files);
	free(t->ino_hash);
	free(t->free_recs);
	free(t->rec_stacked);
	t->files = NULL;
	t->ino_hash = NULL;
	t->free_recs = NULL;
	t->rec_stacked = NULL;
}

/* ---- paths and identity ------------------------------------------------------------ */

int tier_relpath(struct tier *t, int kfd, const char *name, char *out, size_t len)
{
	char link[64], abs[4096 + 256];
	if (kfd == t->root_fd) {
		abs[0] = 0;
	} else {
		snprintf(link, sizeof link, "/proc/self/fd/%d", kfd);
		ssize_t n = tsys_readlink(link, abs, sizeof abs - 1);
		if (n < 0)
			return -errno;
		abs[n] = 0;
		if (strncmp(abs, t->backing, t->backing_len) != 0 ||
		    (abs[t->backing_len] != '/' && abs[t->backing_len] != 0))
			return -EXDEV;
		memmove(abs, abs + t->backing_len + (abs[t->backing_len] == '/'),
			strlen(abs + t->backing_len) + 1);
	}
	size_t a = strlen(abs);
	int w = snprintf(out, len, "%s%s%s", abs, a && name && *name ? "/" : "", name ? name : "");
	return w < 0 || (size_t)w >= len ? -ENAMETOOLONG : 0;
}

/* Birth time in ns, 0 where the file system keeps none. */
int64_t tier_btime(int fd)
{
	struct statx sx;
	if (tsys_statx(fd, "", AT_EMPTY_PATH, STATX_BTIME | STATX_INO, &sx) != 0 ||
	    !(sx.stx_mask & STATX_BTIME))
		return 0;
	return (int64_t)sx.stx_btime.tv_sec * 1000000000LL + sx.stx_btime.tv_nsec;
}

/* Stores a record's path (flushed, not fenced). */
void tier_rec_store_path(struct tier_rec *r, const char *path)
{
	size_t n = strlen(path);
	if (n > TIER_PATH_MAX) {
		pm_store4(&r->r_pathlen, 0); /* unknown: recovery uses the handle */
		pm_flush(&r->r_pathlen, 4);
		return;
	}
	pm_store4(&r->r_pathlen, 0);
	pm_flush(&r->r_pathlen, 4);
	pm_fence(); /* a torn path is never taken for a whole one */
	pm_store(r->r_path, path, n);
	pm_flush(r->r_path, n ? n : 1);
	pm_store4(&r->r_path_crc, fr_crc32c(0, path, n));
	pm_store4(&r->r_pathlen, (uint32_t)n);
	pm_flush(&r->r_pathlen, 16);
}

void tier_note_ctime(struct tier *t, int fd)
{
	struct stat st;
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))
		return;
	pthread_mutex_lock(&t->files_lock);
	struct tier_file *tf = tf_lookup(t, (uint64_t)st.st_ino);
	if (tf) {
		struct tier_rec *r = &t->recs[tf->fid];
		int64_t c = (int64_t)st.st_ctim.tv_sec * 1000000000LL + st.st_ctim.tv_nsec;
		if (c > r->r_ctime) {
			pm_store8(&r->r_ctime, (uint64_t)c);
			pm_persist(&r->r_ctime, 8);
		}
	}
	pthread_mutex_unlock(&t->files_lock);
}

void rec_set_state(struct tier *t, uint32_t fid, uint32_t state)
{
	struct tier_rec *r = &t->recs[fid];
	pm_store4(&r->r_state, state);
	pm_flush(&r->r_state, 4);
	pm_fence();
}

/* ---- creating and freeing records ------------------------------------------------- */

/* Closed files looked at, least recently closed first, for each record
 * wanted while the table is full. */
#define RECLAIM_LOOK 64

/* A free record into *out (files_lock held). When none is left, the least
 * recently closed file that has nothing dirty gives its record back: at
 * once if nothing of it is cached, else it is returned in *victim (with a
 * reference) for the caller to evict its clean chunks, unlocked, and look
 * again. -ENOSPC: neither. Each call costs O(RECLAIM_LOOK), whatever the
 * size of the table. */
static int rec_find_free(struct tier *t, uint32_t *out, struct tier_file **victim)
{
	*victim = NULL;
	if (free_rec_pop(t, out) == 0)
		return 0;
	for (int n = 0; n < RECLAIM_LOOK && t->closed.closed_next != &t->closed; n++) {
		struct tier_file *tf = t->closed.closed_next;
		uint32_t fid = tf->fid;
		if (t->files[fid] != tf || t->recs[fid].r_state != REC_LIVE || tf->opens ||
		    tf->mapped || __atomic_load_n(&tf->ndirty, __ATOMIC_RELAXED)) {
			closed_add(t, tf); /* not now: to the back */
			continue;
		}
		if (__atomic_load_n(&tf->nvalid, __ATOMIC_RELAXED)) {
			/* Stays first, so the next look finds it emptied. */
			tf->refs++;
			*victim = tf;
			return -ENOSPC;
		}
		int rc = pthread_mutex_trylock(&tf->flush_lock);
		if (rc == 0) {
			rc = tier_sync_meta(t, tf);
			pthread_mutex_unlock(&tf->flush_lock);
		}
		if (rc) {
			closed_add(t, tf);
			continue;
		}
		rec_free(t, tf); /* offers the record: the stack's only one */
		return free_rec_pop(t, out);
	}
	return -ENOSPC;
}

/* Drops a reference (files_lock held); the last one closes and frees. */
static void tf_release(struct tier *t, struct tier_file *tf)
{
	if (--tf->refs > 0)
		return;
	lru_remove(tf);
	closed_remove(tf);
	tf_close_fds(t, tf);
	pthread_rwlock_destroy(&tf->lock);
	pthread_mutex_destroy(&tf->flush_lock);
	free(tf);
}

struct tier_file *tf_ref(struct tier *t, uint32_t fid)
{
	pthread_mutex_lock(&t->files_lock);
	struct tier_file *tf = fid < t->nrecs ? t->files[fid] : NULL;
	if (tf)
		tf->refs++;
	pthread_mutex_unlock(&t->files_lock);
	return tf;
}

void tf_put(struct tier *t, struct tier_file *tf)
{
	pthread_mutex_lock(&t->files_lock);
	tf_release(t, tf);
	pthread_mutex_unlock(&t->files_lock);
}

/* Called with files_lock held. */
void rec_free(struct tier *t, struct tier_file *tf)
{
	uint32_t fid = tf->fid;
	rec_set_state(t, fid, REC_FREE);
	/* By identity, not by number: two records may name one inode (the
	 * number was taken again), and a freed file left in the chain would
	 * be found by the next lookup. */
	tf_hash_remove(t, tf);
	if (tf->bucket >= 0)
		t->buckets[tf->bucket]--;
	tf->bucket = -1;
	lru_remove(tf);
	closed_remove(tf);
	if (t->files[fid] == tf) {
		t->files[fid] = NULL;
		tf_release(t, tf); /* the table's reference */
		free_rec_push(t, fid);
	}
}

static int tf_get_or_create_at(struct tier *t, int kfd, uint64_t ino, struct tier_file **out,
			       int may_evict);

int tf_get_or_create(struct tier *t, int kfd, uint64_t ino, struct tier_file **out)
{
	return tf_get_or_create_at(t, kfd, ino, out, 1);
}

static int tf_get_or_create_once(struct tier *t, int kfd, uint64_t ino, struct tier_file **out)
{
	return tf_get_or_create_at(t, kfd, ino, out, 0);
}

static int tf_get_or_create_at(struct tier *t, int kfd, uint64_t ino, struct tier_file **out,
			       int may_evict)
{
	pthread_mutex_lock(&t->files_lock);
	struct tier_file *tf = tf_lookup(t, ino);
	if (tf) {
		tf->opens++;
		tf->refs++;
		lru_remove(tf);
		closed_remove(tf);
		pthread_mutex_unlock(&t->files_lock);
		*out = tf;
		return 0;
	}
	uint32_t fid;
	struct tier_file *victim;
	int rc = rec_find_free(t, &fid, &victim);
	if (rc) {
		/* Every record is taken: evict the clean chunks of a closed file
		 * so its record can go, then look again (the table may have
		 * changed while unlocked, the file too). */
		if (victim && !may_evict) {
			tf_release(t, victim);
			victim = NULL;
		}
		pthread_mutex_unlock(&t->files_lock);
		if (victim) {
			tier_cache_evict_clean(t, victim);
			tf_put(t, victim);
			return tf_get_or_create_once(t, kfd, ino, out);
		}
		*out = NULL; /* no record: the file is used uncached */
		return 0;
	}
	struct stat st;
	rc = fstat(kfd, &st) != 0 ? -errno : 0;
	tf = rc ? NULL : tf_new(fid, ino);
	if (!tf) {
		free_rec_push(t, fid); /* not taken after all */
		pthread_mutex_unlock(&t->files_lock);
		return rc ? rc : -ENOMEM;
	}
	struct tier_rec *r = &t->recs[fid];
	uint64_t stride = stride_now(t);
	/* A hint outside the header's checksum: kept in range (K2). */
	uint64_t key = t->th->th_key_next <= TIER_KEY_MAX - t->nslots ? t->th->th_key_next : 0;
	if ((key + stride) / t->nslots != key / t->nslots)
		tier_count(t, TS_WRAPS, 1);
	struct tier_rec img;
	memset(&img, 0, offsetof(struct tier_rec, r_path));
	img.r_state = REC_FREE;
	img.r_key = key;
	img.r_stride = stride;
	img.r_size = (uint64_t)st.st_size;
	img.r_ino = ino;
	img.r_btime = tier_btime(kfd);
	img.r_ctime = (int64_t)st.st_ctim.tv_sec * 1000000000LL + st.st_ctim.tv_nsec;
	struct {
		struct file_handle fh;
		unsigned char bytes[TIER_HANDLE_MAX];
	} h;
	h.fh.handle_bytes = TIER_HANDLE_MAX;
	int mount_id;
	if (name_to_handle_at(kfd, "", &h.fh, &mount_id, AT_EMPTY_PATH) == 0) {
		img.r_htype = (uint32_t)h.fh.handle_type;
		img.r_hlen = h.fh.handle_bytes;
		memcpy(img.r_handle, h.fh.f_handle, h.fh.handle_bytes);
	}
	pm_store(r, &img, offsetof(struct tier_rec, r_path));
	pm_flush(r, offsetof(struct tier_rec, r_path));
	char path[4096];
	if (tier_relpath(t, kfd, NULL, path, sizeof path) == 0)
		tier_rec_store_path(r, path);
	else
		pm_store4(&r->r_pathlen, 0);
	pm_store8(&t->th->th_key_next, key + stride);
	pm_flush(&t->th->th_key_next, 8);
	pm_fence(); /* F1 */
	rec_set_state(t, fid, REC_LIVE);
	tf->size = (int64_t)st.st_size;
	tf->opens = 1;
	tf->refs++; /* the open's */
	t->files[fid] = tf;
	tf_hash_insert(t, tf);
	int b = bucket_of((uint64_t)st.st_size);
	t->buckets[b]++;
	tf->bucket = b;
	pthread_mutex_unlock(&t->files_lock);
	*out = tf;
	return 0;
}

void tf_open_ref(struct tier *t, struct tier_file *tf)
{
	pthread_mutex_lock(&t->files_lock);
	tf->opens++;
	tf->refs++;
	lru_remove(tf);
	closed_remove(tf);
	pthread_mutex_unlock(&t->files_lock);
}

void tf_open_put(struct tier *t, struct tier_file *tf)
{
	pthread_mutex_lock(&t->files_lock);
	if (--tf->opens == 0) {
		uint32_t st = t->recs[tf->fid].r_state;
		if (st == REC_ORPHAN) {
			/* The last user of a removed file: its chunks and record go. */
			pthread_mutex_unlock(&t->files_lock);
			tier_cache_drop_file(t, tf);
			pthread_mutex_lock(&t->files_lock);
			if (t->recs[tf->fid].r_state == REC_ORPHAN && tf->opens == 0)
				rec_free(t, tf);
		} else if (t->files[tf->fid] == tf) {
			/* Only a file that still holds its record: one whose record
			 * was freed under this open (its inode number was taken by
			 * another file) goes with this last reference, and must
			 * not stay linked into the lists. */
			closed_add(t, tf);
			if (tf->wfd >= 0 || tf->dfd >= 0)
				lru_add(t, tf);
			while (t->nwfd > TIER_WFD_MAX && t->lru.lru_next != &t->lru) {
				struct tier_file *old = t->lru.lru_next;
				if (pthread_mutex_trylock(&old->flush_lock) != 0)
					break;
				lru_remove(old);
				tf_close_fds(t, old);
				pthread_mutex_unlock(&old->flush_lock);
			}
		}
	}
	tf_release(t, tf); /* the open's reference */
	pthread_mutex_unlock(&t->files_lock);
}

/* ---- finding a backing file again ------------------------------------------------- */

/* The file fd opened by handle is the record's: a regular file, with the
 * record's inode number, below the backing directory. A handle is a key to
 * any inode of the file system (open_by_handle_at checks no path), so one
 * read from the pool must not open a file outside the tree. */
static int handle_file_ok(struct tier *t, const struct tier_rec *r, int fd)
{
	struct stat st, root;
	char rel[4096 + 256];
	if (fstat(fd, &st) != 0 || fstat(t->root_fd, &root) != 0 || st.st_dev != root.st_dev ||
	    (uint64_t)st.st_ino != r->r_ino || !S_ISREG(st.st_mode))
		return 0;
	int rc = tier_relpath(t, fd, NULL, rel, sizeof rel);
	/* A path longer than a page has no name in /proc (ENAMETOOLONG), and
	 * the tier makes such paths itself: there the device and inode checks
	 * above stand alone (a crafted handle of a file that deep outside the
	 * directory is the one case they do not refuse). */
	if (rc == -ENAMETOOLONG)
		return 1;
	return rc == 0 && rel[0] && !strstr(rel, " (deleted)");
}

/* Opens the record's file by handle or by path, checking its identity.
 * -ENOENT: not there (removed, or never made durable). */
int tier_rec_open(struct tier *t, uint32_t fid, int flags)
{
	const struct tier_rec *r = &t->recs[fid];
	/* Checked at mount (K2); read again here, so bounded again here. */
	if (r->r_hlen > TIER_HANDLE_MAX || r->r_pathlen > TIER_PATH_MAX)
		return fr_err(-EUCLEAN, "record %u: handle length %u, path length %u", fid,
			      r->r_hlen, r->r_pathlen);
	if (t->can_handles && r->r_hlen) {
		struct {
			struct file_handle fh;
			unsigned char bytes[TIER_HANDLE_MAX];
		} h;
		h.fh.handle_bytes = r->r_hlen;
		h.fh.handle_type = (int)r->r_htype;
		memcpy(h.fh.f_handle, r->r_handle, r->r_hlen);
		int fd = open_by_handle_at(t->root_fd, &h.fh, flags | O_CLOEXEC);
		if (fd >= 0) {
			/* O_PATH first: a mode that lets us in says nothing yet. */
			if (handle_file_ok(t, r, fd))
				return fd;
			close(fd);
		} else if (errno == ESTALE && !r->r_btime) {
			/* Gone, and without a birth time a file found by the path
			 * could be another that took its inode number. */
			return -ENOENT;
		}
	}
	if (!tier_rec_path_ok(r))
		return -ENOENT;
	char path[TIER_PATH_MAX + 1];
	memcpy(path, r->r_path, r->r_pathlen);
	path[r->r_pathlen] = 0;
	int fd = tier_open_beneath(t->root_fd, path, flags, 0);
	if (fd < 0)
		return fd == -EXDEV || fd == -ELOOP ? -ENOENT : fd;
	struct stat st;
	if (fstat(fd, &st) != 0 || (uint64_t)st.st_ino != r->r_ino || !S_ISREG(st.st_mode) ||
	    (r->r_btime && tier_btime(fd) != r->r_btime)) {
		close(fd);
		return -ENOENT; /* another file took the name */
	}
	return fd;
}

/* Opens for writing a file whose mode forbids it (its owner wrote it, then
 * made it read-only): chmod u+w for the open, then back. */
static int open_readonly_file(struct tier *t, uint32_t fid, int flags)
{
	int pfd = tier_rec_open(t, fid, O_PATH);
	if (pfd < 0)
		return pfd;
	struct stat st;
	char proc[64];
	snprintf(proc, sizeof proc, "/proc/self/fd/%d", pfd);
	int fd = -EACCES;
	if (fstat(pfd, &st) == 0 && tsys_chmod(proc, st.st_mode | S_IWUSR) == 0) {
		fd = tsys_openat(AT_FDCWD, proc, flags | O_CLOEXEC, 0);
		if (fd < 0)
			fd = -errno;
		if (tsys_chmod(proc, st.st_mode & 07777) != 0 && fd >= 0) {
			close(fd);
			fd = -EPERM;
		}
	}
	close(pfd);
	return fd;
}

int tf_wfd(struct tier *t, struct tier_file *tf, int direct)
{
	int held = tier_writeback_held(t, "writing to a backing file");
	if (held)
		return held;
	int *slot = direct ? &tf->dfd : &tf->wfd;
	int fd = __atomic_load_n(slot, __ATOMIC_ACQUIRE);
	if (fd >= 0)
		return fd;
	pthread_mutex_lock(&t->files_lock);
	fd = *slot;
	if (fd < 0) {
		int flags = O_RDWR | (direct ? O_DIRECT : 0);
		fd = tier_rec_open(t, tf->fid, flags);
		if (fd == -EACCES || fd == -EPERM)
			fd = open_readonly_file(t, tf->fid, flags);
		if (fd >= 0) {
			__atomic_store_n(slot, fd, __ATOMIC_RELEASE);
			t->nwfd++;
		}
	}
	pthread_mutex_unlock(&t->files_lock);
	return fd;
}

/* ---- renames ------------------------------------------------------------------------ */

void tier_rec_moved(struct tier *t, const struct tier_move *mv, int n)
{
	int any = 0;
	pthread_mutex_lock(&t->files_lock);
	for (uint32_t fid = 1; fid < t->nrecs; fid++) {
		struct tier_rec *r = &t->recs[fid];
		if (r->r_state != REC_LIVE || r->r_pathlen > TIER_PATH_MAX)
			continue; /* (a length the mount checked: bounded where used) */
		/* One pass over all moves: an exchange moves each side once. */
		for (int i = 0; i < n; i++) {
			const struct tier_move *m = &mv[i];
			size_t ol = strlen(m->old);
			const char *rest;
			if (m->is_dir) {
				if (r->r_pathlen <= ol || memcmp(r->r_path, m->old, ol) ||
				    (ol && r->r_path[ol] != '/'))
					continue;
				rest = r->r_path + ol; /* "/..." */
			} else {
				/* Its path, or unknown (another name of it went away). */
				if (r->r_ino != m->ino ||
				    (r->r_pathlen &&
				     (r->r_pathlen != ol || memcmp(r->r_path, m->old, ol))))
					continue;
				rest = r->r_path + r->r_pathlen;
			}
			char path[4096 + TIER_PATH_MAX];
			int k = snprintf(path, sizeof path, "%s%.*s", m->new_,
					 (int)(r->r_path + r->r_pathlen - rest), rest);
			if (k < 0 || (size_t)k >= sizeof path)
				path[0] = 0;
			tier_rec_store_path(r, path);
			any = 1;
			break;
		}
	}
	pthread_mutex_unlock(&t->files_lock);
	if (any)
		pm_fence();
}

/* ---- the backing file's own metadata ------------------------------------------------ */

int tier_sync_meta(struct tier *t, struct tier_file *tf)
{
	if (t->no_writeback)
		return 0;
	struct tier_rec *r = &t->recs[tf->fid];
	if (!(r->r_flags & REC_META_STALE))
		return 0;
	int fd = tf_wfd(t, tf, 0);
	if (fd < 0)
		return fd;
	struct stat st;
	if (fstat(fd, &st) != 0)
		return -errno;
	if ((uint64_t)st.st_size != r->r_size && tsys_ftruncate(fd, (off_t)r->r_size) != 0)
		return fr_err(-errno, "setting the size of a backing file: %s", strerror(errno));
	if (r->r_mtime) {
		struct timespec ts[2] = {{0, UTIME_OMIT}, ns_to_ts(r->r_mtime)};
		/* Only the owner may set a time of its choosing (or one time
		 * alone); a writer who is not the owner gets "now" for both, the
		 * time of the write-back, as a write straight to the backing
		 * file would have. */
		int rc = tsys_futimens(fd, ts);
		if (rc != 0 && errno == EPERM)
			rc = tsys_futimens(fd, NULL);
		if (rc != 0)
			return fr_err(-errno, "setting the mtime of a backing file: %s",
				      strerror(errno));
	}
	pm_store4(&r->r_flags, r->r_flags & ~REC_META_STALE);
	pm_persist(&r->r_flags, 4);
	return 0;
}
