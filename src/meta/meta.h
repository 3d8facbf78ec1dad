/*
 * meta.h -- the meta layer: superblock (format, validation), the redo log
 * with fingerprinted entries (HasFS) in per-operation slots, and uniform
 * metadata pools (SPFS).
 */
#ifndef FERRITE_META_H
#define FERRITE_META_H

#include <pthread.h>
#include <stdint.h>

#include "meta/meta_format.h"
#include "space/space.h"

struct log_ctx {
	struct log_slot *slot;
	struct tx *tx; /* staging buffer bound to this slot */
	char *ebuf;    /* entry image built before it is copied to the slot */
	uint32_t index;
	uint32_t next_free; /* free-list link (volatile) */
};

struct meta {
	struct pool pool;
	struct space sp;
	struct fr_super *sb;
	struct fr_state *st;
	uint32_t nlogs;
	struct log_ctx *logs;
	pthread_mutex_t log_lock;
	pthread_cond_t log_cond;
	int64_t log_free_head; /* index of a free slot or -1 */
	int log_waiters;       /* threads waiting for a free slot */
	uint64_t recovered_entries;
	uint64_t pending_entries; /* META_PRIVATE: entries recovery would replay */
};

/* ---- superblock / pool lifecycle (super.c) ------------------------------ */

struct meta_mkfs_params {
	uint64_t size;
	int mode;
	void (*progress)(void *, uint64_t, uint64_t);
	void *progress_arg;
	int force;
};
/* The steps every kind of pool's mkfs begins with: opens the pool file
 * (creating it), refuses one with contents unless prm->force (a DAX device
 * is always formatted), settles the size (a DAX device's own or less, the
 * default, whole units, 16 MiB to 16 TiB) and populates and maps that much.
 * *size: the size settled. Whatever it returns, meta_mkfs_finish ends it. */
int meta_mkfs_prepare(struct pool *p, const char *path, const struct meta_mkfs_params *prm,
		      uint64_t *size);
/* The end of every mkfs: on failure (rc) the pool file is left as it was
 * found (one mkfs created is removed); closes it; returns rc. */
int meta_mkfs_finish(struct pool *p, int rc);
/* Formats the pool: superblock, state, logs, space. Calls back to let the
 * fs layer create the root directory before the superblock is published. */
int meta_mkfs(const char *path, const struct meta_mkfs_params *prm,
	      int (*make_root)(struct meta *m, struct tx *tx, void *arg), void *arg);
/* Opens, validates, maps, attaches and recovers (replays the logs).
 * META_PRIVATE: a private view that writes nothing (pool.h POOL_PRIVATE);
 * recovery is not run, m->pending_entries counts what it would replay. */
#define META_PRIVATE 1
/* META_SHARED: other processes may open the pool shared at once (space.h
 * POOL_SHARED); only the first one recovers. */
#define META_SHARED 2
int meta_open(struct meta *m, const char *path, int flags);
/* The turn around each outermost call on a shared pool (share.c): drops
 * the windows another process may have changed and replays what one that
 * died inside a call left. Returns share_enter's SHARE_* bits. */
int meta_turn_enter(struct meta *m);
void meta_turn_leave(struct meta *m);
/* A call that only reads the pool, without the turn where it can (share.c
 * H9): 1 if it entered so (leave with meta_shared_leave), 0 if the caller
 * must use meta_turn_enter. */
int meta_shared_enter(struct meta *m);
void meta_shared_leave(struct meta *m);
void meta_close(struct meta *m);
/* Superblock validation with a one-line reason (mount and fsck). */
int meta_super_check(const struct fr_super *sb, uint64_t file_size, const char **why);
/* What every pool's superblock must satisfy (the tier engine checks the rest
 * of a tiered pool itself). */
int meta_super_check_common(const struct fr_super *sb, uint64_t file_size, const char **why);
/* A new superblock: magic, version, a fresh UUID, size, incompat bits. */
void meta_super_init(struct fr_super *sb, uint64_t size, uint32_t incompat);
uint32_t meta_super_csum(const struct fr_super *sb);
void meta_uuid_str(const uint8_t *uuid, char out[37]);
/* 1 if path holds a valid superblock of a tiered pool (or, its primary
 * damaged, a valid tiered backup at SB_TIER_BACKUP_OFF). */
int meta_pool_is_tier(const char *path);

/* ---- labels and tune (tune.c), probe (probe.c) --------------------------- */

/* 0 if label fits sb_label (at most SB_LABEL_MAX bytes, no control
 * characters), else -EINVAL with a message. */
int meta_label_check(const char *label);
/* sb's label as a C string, control characters shown as '?'. */
void meta_label_get(const struct fr_super *sb, char out[SB_LABEL_MAX + 1]);
/* Sets sb_label (checked label; "" removes it). Checksum not updated. */
void meta_label_set(struct fr_super *sb, const char *label);
struct meta_tune_args {
	const char *label; /* NULL: unchanged */
	int mode;	   /* enum ferrite_mode, -1: unchanged */
};
/* Changes the superblock of the unmounted pm pool at path (tune.c). */
int meta_tune(const char *path, const struct meta_tune_args *t);
struct ferrite_probe;
/* ferrite_probe (probe.c): the superblock and holder of any pool, unlocked. */
int meta_probe(const char *path, struct ferrite_probe *out);

/* ---- redo log (log.c) ----------------------------------------------------- */

int log_init(struct meta *m);
void log_fini(struct meta *m);
/* Acquires a free log slot with its transaction (blocks if all are busy). */
struct log_ctx *log_acquire(struct meta *m);
void log_release(struct meta *m, struct log_ctx *lc);
/* COMMIT: log_stage + log_apply + log_retire, then finishes the
 * transaction. On failure the transaction is abandoned and nothing changed. */
int log_commit(struct meta *m, struct log_ctx *lc);
/* The steps of a commit, one per crash window (tests drive them singly):
 * stage writes the fingerprinted entry (COMMIT POINT at its fence), apply
 * stores the words in place, retire makes the entry no longer replayable. */
int log_stage(struct meta *m, struct log_ctx *lc);
/* Finalises the transaction (carries out its queued releases: nothing may be
 * allocated in it afterwards) and says whether it fits one log entry. Lets an
 * operation choose another way before it writes any data. */
int log_fits(struct meta *m, struct log_ctx *lc);
void log_apply(struct meta *m, struct log_ctx *lc);
void log_retire(struct meta *m, struct log_ctx *lc);
/* Mount-time recovery: replays every complete, unretired entry. Returns the
 * number replayed or -EUCLEAN. */
int log_recover(struct meta *m);
/* The entries log_recover would replay, without replaying them. */
int log_pending(struct meta *m);
/* fsck: reports slots with a damaged header or a live entry. */
int log_check(struct meta *m, fr_report_fn report, void *arg);
/* mkfs: initialises every slot header. */
void log_format(char *base, uint64_t off, uint32_t count, uint32_t size);

/* ---- metadata pools (mpool.c) ------------------------------------------- */

extern const uint32_t mp_entry_size[MP_COUNT];
void mp_format(struct fr_state *st);
/* Takes an entry; *reused (may be NULL) says it was used before, so the
 * caller may read what the previous owner left in it (e.g. a generation). */
int mp_alloc(struct meta *m, struct tx *tx, enum mp_id id, uint64_t *off, int *reused);
void mp_free(struct meta *m, struct tx *tx, enum mp_id id, uint64_t off);
/* Pool offset -> entry pointer, validating that off is a live entry of pool
 * id (fsck, and lookups of inode numbers that come from outside). */
int mp_entry_valid(struct meta *m, enum mp_id id, uint64_t off);
/* The same as a transaction sees it (entries it handed out are LIVE there). */
int mp_entry_valid_tx(struct meta *m, struct tx *tx, enum mp_id id, uint64_t off);
uint64_t mp_block_bytes(const struct meta *m, enum mp_id id);
/* Does the head of pool id match the pool's format? (attach, fsck) */
int mp_head_check(const struct meta *m, enum mp_id id);
/* Calls fn(arg, off) for each live entry of pool id until fn returns
 * non-zero; the blocks are checked as they are reached (-EUCLEAN). Blocks
 * are never released, so it may run beside allocations: an entry it
 * reports must be checked again under the lock that guards it. */
int mp_each_live(struct meta *m, enum mp_id id, int (*fn)(void *arg, uint64_t off), void *arg);
/* fsck: walks every block, calls visit(arg, id, off, live) for each entry
 * handed out so far, and checks counts and free lists. */
int mp_walk(struct meta *m, void (*visit)(void *, int, uint64_t, int), void *arg,
	    void (*block_cb)(void *, uint64_t off, uint64_t npages), fr_report_fn report,
	    void *rarg);

static inline void *meta_ptr(struct meta *m, uint64_t off)
{
	return m->sp.base + off;
}

#endif
