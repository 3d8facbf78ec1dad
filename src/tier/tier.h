/*
 * tier.h -- the tier engine: a tiered pool puts persistent memory in front of
 * a directory of an ordinary file system (First Responder, HasFS).
 *
 * The namespace -- directories, names, modes, owners, links, extended
 * attributes -- stays in the backing file system: every namespace call is
 * carried out there, through kernel descriptors kept inside the tier's own
 * descriptors (ns.h). File data goes through the cache (cache.c): a file gets
 * a record (files.c) holding its key, its size and its backing identity, and
 * chunk i of the file lives, if anywhere, in slot (key + i) mod nslots, whose
 * two chunks carry 8-byte tags. A background flusher (flush.c) drains dirty
 * chunks to the backing files. In epoch mode (epoch.c) writes become durable
 * at epoch ends instead of on return.
 *
 * What lives in DRAM is derived from the pool at mount and bounded by the
 * pool's size: per-record file state, the inode-to-record map, the stride
 * table, slot locks and a bitmap of dirty chunks.
 */
#ifndef FERRITE_TIER_H
#define FERRITE_TIER_H

#include <pthread.h>
#include <stdint.h>
#include <sys/types.h>

#include "vfs/vfs.h"
#include "ferrite.h"
#include "meta/meta_format.h"
#include "persist/pm.h"
#include "space/space.h"
#include "tier/tier_format.h"
#include "util/util.h"

#define TIER_SLOT_LOCKS 4096
#define TIER_BUCKETS	40   /* stride table: files by size, 2^b chunks */
#define TIER_WFD_MAX	2048 /* backing descriptors kept open for flushing */
/* The largest file: what ext4 holds with 4 KiB blocks (tags could address
 * 256 TiB). */
#define TIER_MAX_FILE ((16ULL << 40) - 4096)

/* Counters, in the stats file `ferrite stats` reads (and th_stats at unmount). */
enum tier_stat_id {
	TS_READ_HITS,	   /* chunks read from the cache */
	TS_READ_MISSES,	   /* chunks read from the backing file */
	TS_WRITE_HITS,	   /* chunks written that were in the cache */
	TS_WRITE_MISSES,   /* chunks written that were not */
	TS_COLLISIONS,	   /* a slot held another file's chunks that had to go */
	TS_FLUSH_PERIODIC, /* chunks drained by the background flusher */
	TS_FLUSH_FORCED,   /* chunks flushed synchronously to make room */
	TS_WRAPS,	   /* the key counter went round the slots */
	TS_FLUSH_ROUNDS,   /* flusher rounds that wrote something */
	TS_EPOCHS,	   /* epochs committed */
	TS_RECOVERED,	   /* chunks undone or resolved by recovery */
	TS_FLUSH_ERRORS,   /* failed writes to the backing file system */
	TS_NCOUNTERS
};
_Static_assert(TS_NCOUNTERS <= TIER_NSTATS, "counters fit the header");

/* The live statistics of a mounted pool: a small shared file beside nothing
 * persistent (/dev/shm/ferrite-tier-UUID.stats), so `ferrite stats` can read
 * a pool another process holds. */
#define TIER_STATS_MAGIC 0x5354415453524554ULL /* "TERSTATS" */
struct tier_live_stats {
	uint64_t magic;
	int64_t pid;
	uint64_t counters[TIER_NSTATS];
	uint64_t valid_chunks, dirty_chunks, nchunks, files;
	uint64_t backing_errno; /* last error writing the backing file system (0 none) */
};

/* A file that has a record (fid), while the pool is mounted. */
struct tier_file {
	uint32_t fid;
	uint64_t ino;
	pthread_rwlock_t lock;	    /* data: reads shared; writes, truncation exclusive */
	pthread_mutex_t flush_lock; /* writes of its chunks to the backing file */
	int opens;		    /* open files using it (t->files_lock) */
	int refs;		    /* the table's, each open's, the flusher's (t->files_lock) */
	int wfd, dfd;		    /* backing descriptors for flushing (dfd: O_DIRECT); -1 */
	int64_t size;		    /* epoch mode: the size in the open epoch */
	int64_t mtime;		    /* epoch mode: likewise */
	int epoch_dirty;	    /* epoch mode: size/mtime to log at the epoch's end */
	uint64_t setid_seen;	    /* attr_gen + 1 when its mode last had no set-id bit */
	uint64_t nvalid;	    /* valid chunks (atomic) */
	uint64_t ndirty;	    /* valid dirty chunks (atomic) */
	int bucket;		    /* stride table bucket it is counted in, -1 none */
	int mapped;		    /* memory mappings (mmap.c): its I/O bypasses the cache */
	struct tier_file *hnext;    /* ino hash chain */
	struct tier_file *lru_prev, *lru_next;	     /* files holding wfd but not open */
	struct tier_file *closed_prev, *closed_next; /* files not open, least recent first */
};

/* An open file description. */
struct tier_ofile {
	struct vfs_file f; /* first: flags, refs, position (vfs.h) */
	int kfd;	   /* kernel descriptor on the backing object */
	uint64_t ino;
	mode_t type;	      /* S_IFMT of the object */
	struct tier_file *tf; /* regular files opened for I/O: its record's state */
};

struct tier {
	struct vfs_handle h; /* first: names tier_ops (vfs.h) */
	struct pool pool;
	char *base;
	struct fr_super *sb;
	struct tier_header *th;
	struct tier_desc *desc;
	char *data;
	struct tier_rec *recs;
	uint64_t nslots, nchunks;
	uint32_t nrecs;
	int consistency;
	unsigned flush_ms, epoch_ms;
	char uuid[37];

	/* The backing directory. */
	int root_fd; /* O_PATH | O_DIRECTORY */
	char *backing;
	size_t backing_len;
	int backing_has_direct; /* O_DIRECT accepted there */
	int can_handles;	/* open_by_handle_at works (CAP_DAC_READ_SEARCH) */

	pthread_mutex_t slot_locks[TIER_SLOT_LOCKS];
	uint64_t seq; /* write sequence (atomic) */

	/* Files. */
	pthread_mutex_t lk_mutex; /* advisory locks: the pool is held alone, */
	struct lk_table *lk;	  /* so they live here (space/locks.c) */
	pthread_mutex_t files_lock;
	struct tier_file **files; /* by fid */
	struct tier_file **ino_hash;
	uint64_t ino_hash_cap;
	uint32_t *free_recs; /* free record numbers (a stack), so finding one is O(1) */
	uint32_t nfree_recs;
	uint8_t *rec_stacked;	 /* per record: on free_recs */
	struct tier_file closed; /* list head: files with a record and no open, the
				  * least recently closed first; whose record goes when
				  * the table is full */
	uint64_t buckets[TIER_BUCKETS];
	struct tier_file lru; /* list head: files with a wfd and no open */
	int nwfd;

	uint64_t *dirty_bits; /* a bit per chunk: dirty (for the flusher) */
	uint64_t ndirty, nvalid;

	/* Descriptors and streams. */
	struct vfs_fdtable fdt; /* descriptors to struct tier_ofile (their f) */
	char *link_prefix;
	size_t link_prefix_len;
	pthread_mutex_t streams_lock;
	struct tier_dir *streams; /* open directory streams, under streams_lock */

	/* The flusher. */
	pthread_t flusher;
	int flusher_started;
	pthread_mutex_t flush_mx;
	pthread_cond_t flush_cv;
	int stop;
	int flush_now;
	int ns_dirty; /* a name changed since the backing file system was synced */
	char *bounce; /* flusher's aligned buffer */

	/* Epoch mode (epoch.c). */
	pthread_rwlock_t epoch_lock; /* writes shared, the commit exclusive */
	uint64_t epoch;		     /* open epoch */
	struct ej_page *epoch_pages; /* chunks written in the open epoch, with their tags */
	uint32_t epoch_npages, epoch_cap;
	uint32_t epoch_reserved; /* pages promised to writes under way (atomic) */
	struct tier_ejournal *journal;

	/* Memory mappings of backing files (mmap.c). */
	pthread_mutex_t map_lock;
	struct tier_map *maps;

	struct tier_live_stats *live;
	int backing_err;   /* last errno writing back (0: none), as live->backing_errno */
	int no_writeback;  /* mounted with tier_no_writeback */
	uint64_t attr_gen; /* chmods and chowns through this mount (atomic) */
	char live_path[128];
	uint64_t local_stats[TIER_NSTATS]; /* when the stats file could not be made */
};

#define TIER(fs) ((struct tier *)(fs))

static inline uint64_t *tier_counter(struct tier *t, int id)
{
	return t->live ? &t->live->counters[id] : &t->local_stats[id];
}
static inline void tier_count(struct tier *t, int id, uint64_t n)
{
	__atomic_fetch_add(tier_counter(t, id), n, __ATOMIC_RELAXED);
}

static inline struct tier_desc *chunk_desc(struct tier *t, uint64_t c)
{
	return &t->desc[c];
}
static inline char *chunk_data(struct tier *t, uint64_t c)
{
	return t->data + (c << TIER_CHUNK_SHIFT);
}
static inline uint64_t tag_of(struct tier *t, uint64_t c)
{
	return __atomic_load_n(&t->desc[c].d_tag, __ATOMIC_ACQUIRE);
}
static inline uint64_t slot_of(struct tier *t, uint64_t key, uint64_t idx)
{
	return (key + idx) % t->nslots;
}
static inline pthread_mutex_t *slot_lock(struct tier *t, uint64_t slot)
{
	return &t->slot_locks[slot % TIER_SLOT_LOCKS];
}
/* Nanoseconds since the epoch (negative before 1970) as a timespec. */
static inline struct timespec ns_to_ts(int64_t ns)
{
	int64_t sec = ns / 1000000000LL, nsec = ns % 1000000000LL;
	if (nsec < 0) {
		nsec += 1000000000LL;
		sec--;
	}
	return (struct timespec){(time_t)sec, (long)nsec};
}

static inline int64_t tier_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* ---- checks of the persistent structures (check.c) ------------------------------------ */
/* Keys and write sequences stay below these, so key + chunk index and seq + 1
 * never wrap (a pool would need 2^62 file creations or writes to reach them). */
#define TIER_KEY_MAX (1ULL << 62)
#define TIER_SEQ_MAX (1ULL << 62)

/* The geometry of a pool whose header passed tier_header_check(): every
 * region lies inside the mapping at base. */
struct tier_geom {
	uint64_t pool_size, nslots, nchunks;
	uint32_t nrecs;
	int consistency;
	const struct tier_header *th;
	const struct tier_rec *recs;
	const struct tier_desc *desc;
	const char *data;
	const struct tier_ejournal *journal; /* NULL if the pool has none */
	uint64_t journal_size;
};
/* Each returns 0, or -EUCLEAN with a line naming the object in why. */
int tier_header_check(const struct tier_header *th, uint64_t pool_size, char *why, size_t n);
/* The geometry of the mapping at base, whose header passed the check. */
void tier_geom_init(struct tier_geom *g, const char *base, uint64_t pool_size);
/* Every record, descriptor and the journal: the first damage found. */
int tier_image_check(const struct tier_geom *g, int *journal_pending, char *why, size_t n);
int tier_rec_check(const struct tier_geom *g, uint32_t fid, char *why, size_t n);
int tier_desc_check(const struct tier_geom *g, uint64_t c, char *why, size_t n);
/* *pending: an entry whose fingerprint holds waits to be applied. */
int tier_journal_check(const struct tier_geom *g, int *pending, char *why, size_t n);
uint32_t tier_header_csum(const struct tier_header *th);
/* The record's path is whole (its checksum holds) and known. */
int tier_rec_path_ok(const struct tier_rec *r);
uint32_t tier_journal_fingerprint(const char *data, const struct tier_ejournal *h,
				  const struct ej_page *pg, const struct ej_file *fl);
/* openat of a path below root_fd that follows no symbolic link; -errno. */
int tier_open_beneath(int root_fd, const char *path, int flags, mode_t mode);
/* The state of file fid, NULL if it has none or fid is out of range (a tag
 * read from PM names it). */
static inline struct tier_file *tier_file_at(struct tier *t, uint32_t fid)
{
	return fid < t->nrecs ? t->files[fid] : NULL;
}

/* ---- mount (mount.c) ---------------------------------------------------------- */
/* M2: fd (path) is the directory the pool (uuid, header th) was formatted
 * for: 0, or -EUCLEAN with why. */
int tier_backing_identity(int fd, const char *path, const struct tier_header *th, const char *uuid,
			  char *why, size_t n);
/* Scans the tags after a crash: completes or undoes what was in flight. */
int tier_recover_chunks(struct tier *t);

/* ---- records (files.c) ----------------------------------------------------------- */
int tier_files_init(struct tier *t);
void tier_files_fini(struct tier *t);
/* The file state of backing inode ino, NULL if it has no record. */
struct tier_file *tf_lookup(struct tier *t, uint64_t ino);
/* ... or a new record for the open backing file kfd (regular). */
int tf_get_or_create(struct tier *t, int kfd, uint64_t ino, struct tier_file **out);
void tf_open_ref(struct tier *t, struct tier_file *tf);
/* A reference that keeps the state of file fid alive (NULL if none) / its end. */
struct tier_file *tf_ref(struct tier *t, uint32_t fid);
void tf_put(struct tier *t, struct tier_file *tf);
void tf_open_put(struct tier *t, struct tier_file *tf);
/* A descriptor on the backing file for flushing (O_DIRECT if direct). */
int tf_wfd(struct tier *t, struct tier_file *tf, int direct);
/* The file's size changed: the stride table follows it. */
void tf_size_changed(struct tier *t, struct tier_file *tf, uint64_t size);
/* Objects moved by one rename (two for an exchange): the paths of the
 * records they hold follow (relative paths; a directory moves every record
 * below it, a file its own record). */
struct tier_move {
	const char *old, *new_;
	int is_dir;
	uint64_t ino;
};
void tier_rec_moved(struct tier *t, const struct tier_move *moves, int n);
/* Relative path of the object kfd names, "" for the root; -errno if it is not
 * below the backing directory. */
int tier_relpath(struct tier *t, int kfd, const char *name, char *out, size_t len);
void rec_set_state(struct tier *t, uint32_t fid, uint32_t state);
/* A change through the tier touched the status of the file fd names: its
 * record keeps the backing file's ctime of now (later drains change that). */
void tier_note_ctime(struct tier *t, int fd);
/* Releases a record whose chunks are gone (files_lock held); its state
 * lives on while references remain. */
void rec_free(struct tier *t, struct tier_file *tf);
/* Recovery and unmount: make the backing file's size and mtime the record's. */
int tier_sync_meta(struct tier *t, struct tier_file *tf);
/* files.c, for files_recover.c: the inode hash, a record's path, opening
 * a record's backing file (F4). */
void tf_hash_insert(struct tier *t, struct tier_file *tf);
void tf_hash_remove(struct tier *t, struct tier_file *tf);
void tier_rec_store_path(struct tier_rec *r, const char *path);
int tier_rec_open(struct tier *t, uint32_t fid, int flags);
/* Mount: settle records left DYING or ORPHAN by a crash, reopen the others. */
int tier_files_recover(struct tier *t);

/* ---- the cache (cache.c) ----------------------------------------------------------- */
ssize_t tier_cache_read(struct tier *t, struct tier_file *tf, int kfd, const struct iovec *iov,
			int iovcnt, uint64_t off, size_t len);
/* Writes [off, off + len) from iov (whose first byte is file offset iov_off),
 * atomically; a long write may be short (at most a quarter of the cache).
 * Epoch mode: *epoch_full = 1 (and 0 returned, nothing written) when the open
 * epoch has no room for it; the caller commits it, holding no lock, and
 * writes again. */
ssize_t tier_cache_write(struct tier *t, struct tier_file *tf, int kfd, const struct iovec *iov,
			 int iovcnt, uint64_t iov_off, uint64_t off, size_t len, int *epoch_full);
/* ftruncate through the cache. */
int tier_cache_truncate(struct tier *t, struct tier_file *tf, int kfd, uint64_t size);
/* Punches [off, off+len) (fallocate PUNCH_HOLE|KEEP_SIZE). */
int tier_cache_punch(struct tier *t, struct tier_file *tf, int kfd, uint64_t off, uint64_t len);
/* Drops every chunk of the file (it was removed). */
void tier_cache_drop_file(struct tier *t, struct tier_file *tf);
/* Drops the file's clean chunks (their content is in the backing file), so
 * its record can be given to another file. */
void tier_cache_evict_clean(struct tier *t, struct tier_file *tf);
/* Marks every cached chunk of the file dirty: its backing file was made
 * again and holds none of them. */
void tier_cache_redirty_file(struct tier *t, struct tier_file *tf);
/* Stores a chunk's tag (flushed, not fenced), keeping the DRAM counts. */
void tier_set_tag(struct tier *t, uint64_t c, uint64_t tag);
/* Publishes a file's size and write time in its record (flushed, not fenced). */
void tier_rec_publish(struct tier *t, struct tier_file *tf, uint64_t size, int64_t mtime);
/* Marks the chunk's dirty bit in DRAM (flusher's bitmap). */
/* The most chunks one write changes atomically: the chunks of one write must
 * fall in different slots, with room for their old versions. A longer write
 * returns a short count (per-write consistency). */
uint64_t tier_max_write_chunks(uint64_t nslots);
void tier_dirty_mark(struct tier *t, uint64_t c, int dirty);

/* ---- the flusher (flush.c) ------------------------------------------------------------ */
int tier_flusher_start(struct tier *t);
void tier_flusher_stop(struct tier *t);
/* Dirty throttling (no lock held): a writer that finds over a quarter of the
 * cache dirty waits until the flusher brings it under an eighth, so writes
 * find clean chunks to replace instead of paying a forced flush each. */
void tier_throttle(struct tier *t);

/* Mounted with tier_no_writeback (ferrite.h): -EROFS with a message for a
 * call that would write what back; 0 otherwise. */
int tier_writeback_held(struct tier *t, const char *what);
/* Writing back to the backing file system failed with errno e while doing
 * what (e.g. "writing back"): counted, remembered for ferrite_get_tier_info
 * and the next message, and returned as -e with a message. */
int tier_backing_failed(struct tier *t, int e, const char *what);
/* Drains every dirty chunk (all files, or one) and syncs the backing file system. */
int tier_drain(struct tier *t, struct tier_file *only);

/* ---- epoch mode (epoch.c) -------------------------------------------------------------- */
int tier_epoch_init(struct tier *t);
void tier_epoch_fini(struct tier *t);
/* Ends the open epoch: its pages and sizes become durable at once. The
 * _locked form is for a caller holding epoch_lock exclusively. */
int tier_epoch_commit(struct tier *t);
int tier_epoch_commit_locked(struct tier *t);
/* Mount: applies a whole journal entry, drops a torn one and the open epoch. */
int tier_epoch_recover(struct tier *t);
/* Room in the open epoch for n more pages: 0 (reserved), or 1: none, the
 * epoch must be committed first (by a caller holding no lock). */
int tier_epoch_reserve(struct tier *t, uint64_t n);
/* The page chunk c (with tag) joined the open epoch. */
void tier_epoch_add(struct tier *t, uint64_t c, uint64_t tag);

/* ---- the namespace (ns.h: file.c to mmap.c) -------------------------------------------- */
struct tier_ofile *tfd_get(struct tier *t, int fd);
void tfd_put(struct tier *t, struct tier_ofile *of);
void tier_fds_close_all(struct tier *t);
void tier_streams_close_all(struct tier *t);
/* Birth time of the open file fd in ns (0: the file system keeps none). */
int64_t tier_btime(int fd);
/* Ends every memory mapping (unmount). */
void tier_maps_end(struct tier *t);

/* ---- tune (tune.c) ----------------------------------------------------------------- */

struct meta_tune_args;
/* `ferrite tune` of an unmounted tiered pool: the label (t->label) and, if
 * backing is set, a new backing directory (tune.c T2; *forced says it was
 * taken only because of force, *other that it is not the original directory
 * renamed but another one, e.g. a copy). */
int tier_tune(const char *path, const struct meta_tune_args *t, const char *backing, int force,
	      int *forced, int *other);
#define TIER_BACKUP_SUPER  1 /* tier_backups_intact: the superblock's backup passes */
#define TIER_BACKUP_HEADER 2 /* ... and the header's */
int tier_backups_intact(int fd, uint64_t file_size);
/* fsck: restores a primary that fails its check from a backup that passes,
 * or brings a backup that differs up to date (repair), reporting each.
 * Returns the problems left; *fixed counts the repairs. */
int tier_backups_fix(int fd, uint64_t file_size, int repair, fr_report_fn report, void *rarg,
		     int *fixed);

#endif
