/*
 * space.h -- the space layer: the pool and its mappings, the physical buddy
 * allocator, the persistent page table (PPT) and the ctFS partition tree.
 *
 * Address kinds used throughout:
 *   pool offset  -- byte offset in the pool file (the "physical" address);
 *   page number  -- pool offset >> 12;
 *   vspace offset -- byte offset in the partition space, the contiguous
 *                    virtual range where every file and directory lives.
 * sp->base + pool offset is the direct mapping of the pool (metadata is used
 * in place through it); sp->vbase + vspace offset is where the MMU translates
 * file offsets, populated from the PPT (vspace.c).
 */
#ifndef FERRITE_SPACE_H
#define FERRITE_SPACE_H

#include <pthread.h>
#include <stdint.h>
#include <sys/types.h>

#include "space/space_format.h"
#include "util/util.h"
#include "space/tx.h"

/* Kind of medium the pool lives on. */
enum pool_kind {
	POOL_TMPFS = 0,	 /* emulated PM in RAM (the default /dev/shm pool) */
	POOL_FILE = 1,	 /* regular file on a non-DAX file system (emulated) */
	POOL_FSDAX = 2,	 /* file on a DAX file system, mapped with MAP_SYNC */
	POOL_DEVDAX = 3, /* device-DAX character device */
};

struct pool {
	int fd;
	char *path;
	enum pool_kind kind;
	uint64_t size;	    /* usable bytes (multiple of 2 MiB) */
	uint64_t file_size; /* bytes in the file or device */
	char *base;	    /* direct mapping of [0, size) */
	void *map_reserve;  /* start of the region reserved for the direct map */
	size_t map_reserve_len;
	int map_flags;	   /* flags for every shared mapping of the pool */
	int huge;	   /* backed by 2 MiB pages */
	char backing[160]; /* human description for `ferrite info` */
	void *pm_handle;
	struct pm_pool *pm; /* tracing builds: the persist layer's record of it */
	char *alias;	    /* tracing builds, guarded: the only writable mapping */
	int guarded;	    /* every mapping of the pool is read-only (pm.h) */
	/* mkfs (pool_mkfs_undo): what a failed format must put back */
	int created;	   /* pool_open made the file (POOL_CREATE) */
	int resized;	   /* pool_populate discarded the file's contents */
	mode_t old_mode;   /* the file's permission bits when opened */
	uint64_t old_size; /* and its size */
	/* POOL_SHARED (share.c): the coordination with other processes */
	struct pool_share *share;
	int share_first; /* no other process had the pool open */
};

/* ---- one pool, many processes (share.c) ----------------------------------- */

struct stat;
/* Joins the processes sharing p (its fd open, not yet locked): takes the
 * pool's flock shared and maps the coordination file, rebuilt if p is the
 * first (p->share_first). -EBUSY if a process holds the pool alone or this
 * process has it mounted already. */
int share_attach(struct pool *p, const struct stat *pst);
/* The first process (p->share_first) has recovered the pool -- replayed
 * the log, released orphans -- and lets the others attach; until then they
 * wait in share_attach, as that recovery runs outside the turn (H5). */
void share_attach_done(struct pool *p);
void share_detach(struct pool *p);
/* The pool is held alone (its flock exclusive): a coordination file left by
 * processes that all died is removed (H5). */
void share_remove_stale(const struct stat *pst);
/* What the process must do on taking the turn (share_enter's result). */
#define SHARE_OTHER  1 /* another process ran calls since: drop every window */
#define SHARE_DEAD   2 /* it died inside a call: recover as mount does */
#define SHARE_FORKED 4 /* first call of a forked child without a slot: count what it inherited */
#define SHARE_REAPED 8 /* a gone process's holds were dropped: release orphans */
/* Brackets each outermost call (H1); s NULL: no-op. */
int share_enter(struct pool_share *s);
/* After share_enter returned SHARE_OTHER or SHARE_DEAD and the caller has
 * caught up (dropped its windows; replayed the log): the turn, taken over
 * for it alone, is opened to the process's other threads (H2, H3). */
void share_caught_up(struct pool_share *s, int why);
void share_leave(struct pool_share *s);
/* A shared call (share.c H9): one that only reads the pool may run in many
 * processes at once, while no exclusive call runs anywhere. 1: entered
 * (leave with share_leave_shared); 0: the caller takes the turn instead
 * (share_enter) -- a call runs inside, this process has windows to drop,
 * or it has not settled after a fork. */
int share_enter_shared(struct pool_share *s);
void share_leave_shared(struct pool_share *s);
#define SHARE_OPENS 0
#define SHARE_MAPS  1
/* Under the turn: this process holds ino open (or maps it), delta 1, or no
 * longer, delta -1. Returns how many processes hold it now; -ENFILE if the
 * table is full, -EUSERS if SHARE_PROCS processes have the pool already. */
int share_ino_add(struct pool_share *s, uint64_t ino, int kind, int delta);
int share_ino_count(struct pool_share *s, uint64_t ino, int kind);
/* 1 if a process other than this one holds ino open (or maps it). */
int share_ino_others(struct pool_share *s, uint64_t ino, int kind);
/* 1 if any process maps any file of the pool (compaction waits). */
int share_any_maps(struct pool_share *s);
/* Under the turn: windows [w, w + n) changed (their PPT entries). */
void share_note_windows(struct pool_share *s, uint64_t w, uint64_t n);
/* Under the turn: any window may have changed (a log replayed after a
 * death): every other process drops all of its windows before its next
 * call. */
void share_note_all_windows(struct pool_share *s);
/* On taking the turn from another process: calls drop(arg, w, n) for each
 * window range changed since this process last looked, or drop_all(arg)
 * if too many changed to tell or all is set; then this process is up to
 * date (its shared calls are possible again, H9). */
void share_changed_windows(struct pool_share *s, void (*drop)(void *arg, uint64_t w, uint64_t n),
			   void (*drop_all)(void *arg), void *arg, int all);
/* The shared lock table, and this process's slot (-1 if it has none). */
struct lk_table *share_locks(struct pool_share *s);
int share_slot(struct pool_share *s);
/* Under the turn: gives back slot if its process is gone (a lock it held
 * blocks someone). SHARE_REAPED if it did. */
int share_reap_slot(struct pool_share *s, int32_t slot);
/* fork: the parent reserves a slot for the child under the turn and calls
 * hook(arg, child_slot) to make the child hold what it inherits
 * (share_ino_hold, share_desc_hold); the child takes the slot over. */
void share_set_fork_hook(struct pool_share *s, void (*hook)(void *arg, int child_slot), void *arg);
/* Under the turn (the fork hook): slot holds ino open (or maps it). */
void share_ino_hold(struct pool_share *s, int slot, uint64_t ino, int kind);

/* An open file description that several processes hold (fork, or passed
 * across exec and spawn): its offset, status flags and lock owner live
 * here, read and written only under the turn (share_desc.c). */
struct share_desc {
	uint32_t gen;	     /* odd while in use: a token names one use */
	int32_t flags;	     /* status flags: O_APPEND, O_NONBLOCK */
	int64_t pos;	     /* the offset */
	uint64_t lock_id;    /* owner of its OFD and flock locks, 0: none yet */
	uint64_t holders[2]; /* bit i: process slot i holds it */
};
/* Under the turn: a new entry with pos, flags and lock_id that this process
 * holds; NULL if the table is full or the process has no slot. */
struct share_desc *share_desc_new(struct pool_share *s, int64_t pos, int flags, uint64_t lock_id);
/* Under the turn: slot holds d too (a child being forked). */
void share_desc_hold(struct pool_share *s, struct share_desc *d, int slot);
/* Under the turn: this process lets go of d; 1 if no process holds it any
 * more (the description is gone: its locks go). */
int share_desc_drop(struct pool_share *s, struct share_desc *d);
/* A token naming d for another process (never 0), and the entry a token
 * names if that use of it is still held by some process, now held by this
 * one too (NULL otherwise: it ended meanwhile). */
uint32_t share_desc_token(struct pool_share *s, const struct share_desc *d);
struct share_desc *share_desc_adopt(struct pool_share *s, uint32_t token);
/* Under the turn: this process lets go of every entry it holds that kept()
 * says no descriptor names (after exec: those of the image before it). */
void share_desc_prune(struct pool_share *s, int (*kept)(void *arg, const struct share_desc *d),
		      void *arg);

/* ---- advisory locks (locks.c) ------------------------------------------------ */

#define LK_MAX	   4096		/* locked ranges at once, all processes */
#define LK_PROCESS (1ULL << 63) /* owner bit: a process's record locks */
#define LK_FCNTL   0		/* name space of fcntl locks (record, OFD) */
#define LK_FLOCK   1		/* name space of flock locks */
#define LK_EOF	   INT64_MAX	/* a range to the end of any file */
struct lk_entry {
	uint64_t ino;
	uint64_t owner;	    /* LK_PROCESS | slot, or an open file description's id */
	int64_t start, end; /* bytes [start, end] */
	uint16_t type;	    /* F_RDLCK or F_WRLCK */
	uint16_t ns;
	int32_t slot; /* the process that set it: its locks go with it */
	int32_t pid;  /* for F_GETLK: the owner's pid, -1 for a description */
	uint32_t pad;
};
struct lk_table {
	uint32_t seq; /* futex: changes whenever a lock goes or weakens (K3) */
	uint32_t n;
	uint64_t next_id; /* ids of open file descriptions */
	struct lk_entry e[LK_MAX];
};
struct lk_req {
	uint64_t ino, owner;
	int64_t start, end;
	int type; /* F_RDLCK, F_WRLCK or F_UNLCK */
	int ns;
	int32_t slot, pid;
};
/* The entry r conflicts with (K1), or NULL. */
const struct lk_entry *lk_conflict(const struct lk_table *t, const struct lk_req *r);
/* Sets (or with F_UNLCK clears) r's range for its owner: 0, -EAGAIN on a
 * conflict, -ENOLCK if the table is full; nothing changes on failure. */
int lk_set(struct lk_table *t, const struct lk_req *r);
/* Drops every lock of owner (on ino, or on any inode if ino is 0). */
void lk_release_owner(struct lk_table *t, uint64_t ino, uint64_t owner);
void lk_release_slot(struct lk_table *t, int32_t slot);
/* Wakes the waiters (K3). */
void lk_changed(struct lk_table *t);
/* Sleeps until seq moves from seen, 100 ms at most; -EINTR on a signal. */
int lk_wait(uint32_t *seq, uint32_t seen);

/* The pool used when none is named (ferrite_default_pool without
 * $FERRITE_POOL). It lies in a directory any user can write, so pool_open
 * checks it and its directory before use (pool.c P3). */
#define POOL_DEFAULT_PATH "/dev/shm/ferrite/default.pool"

/* Opens (POOL_CREATE: creates) the pool file or device and takes the
 * single-opener lock. Does not map it. POOL_PRIVATE: a private view for
 * checking without writing (fsck -n): the file is opened read-only and
 * mapped copy-on-write, so nothing the process stores reaches the pool. */
#define POOL_CREATE  1
#define POOL_PRIVATE 2
/* POOL_SHARED: other processes that open it shared may map it at once
 * (share.c); anyone else (a check, mkfs) still needs it alone. */
#define POOL_SHARED 4
int pool_open(struct pool *p, const char *path, int flags);
/* Makes the file mode 0600, sets its size and allocates all of it (mkfs only).
 * -ENOSPC before anything is changed if its file system has no room for it. */
/* Makes the page table entries for [addr, addr+len) of this process's
 * mapping of the pool at once, so a store to each page does not fault on
 * its own (best effort: nothing happens where the kernel cannot). */
void pool_prefault(void *addr, size_t len);
int pool_populate(struct pool *p, uint64_t size, void (*progress)(void *, uint64_t, uint64_t),
		  void *arg);
/* -ENOENT with the one wording of a missing pool, whoever looks for it
 * (the ferrite command's own checks say the same, tools/cli_util.c). */
int pool_missing(const char *path);
/* After a failed mkfs, before pool_close: removes the file if pool_open created
 * it; an existing file whose contents pool_populate discarded is left empty,
 * with its old mode, and the message (rc's) says so. Returns rc. */
int pool_mkfs_undo(struct pool *p, int rc);
/* Maps [0, size) and chooses the persist functions. */
int pool_map(struct pool *p, uint64_t size);
void pool_close(struct pool *p);
/* The process holding the single-opener lock of the pool open on fd: its pid
 * (and its name in comm, cap bytes), 0 if none is found, -1 if it lives in
 * another pid namespace. From /proc/locks. */
pid_t pool_lock_holder(int fd, char *comm, size_t cap);
/* "process 1234 (ferrite)", or a vaguer phrase when the holder is unknown. */
void pool_holder_describe(int fd, char *buf, size_t cap);
/* Opens the pool read-only WITHOUT the lock (inspection of a pool that may be
 * in use: ferrite_probe). The default pool passes P3 first. Returns the
 * descriptor or -errno with a message. */
int pool_open_peek(const char *path);
/* Creates the default pool's directory if missing and, if it passes pool.c's
 * P3, gives it 2 MiB pages if the machine allows it (a tmpfs mounted with
 * huge=within_size; needs CAP_SYS_ADMIN). */
void pool_prepare_default_dir(const char *pool_path);

/* Window mapping state (vspace.c), one byte per 2 MiB window. */
enum vs_state {
	VS_UNMAPPED = 0,
	VS_MAPPED = 1,
};

struct space {
	struct pool *pool;
	char *base;
	struct sp_header *hdr;
	uint64_t data_page, data_end_page; /* buddy-managed pages [data_page, data_end_page) */
	uint64_t *bitmap[BUD_ORDERS];
	uint64_t *summary[BUD_ORDERS];
	uint64_t nwords[BUD_ORDERS];
	uint64_t nsumwords[BUD_ORDERS];
	uint64_t hint[BUD_ORDERS]; /* volatile search start (word index) */
	int top_level;
	uint64_t vsize;
	int reserve_windows;	    /* format 4: large windows backed page by page (window.c) */
	pthread_mutex_t alloc_lock; /* buddy, partition tree, metadata pools */
	uint64_t l3_hint[3];	    /* volatile: L3 used last per child level */

	/* vspace mapping cache (volatile) */
	char *vbase;
	void *vreserve;
	size_t vreserve_len;
	uint8_t *wstate; /* per-window enum vs_state */
	uint64_t nwindows;
	pthread_mutex_t map_lock;
	struct vs_exc *exc; /* small windows with pages away from their home */
	uint64_t nexc, exc_cap;
	uint64_t stat_mmaps, stat_mremaps;
	/* bounded mappings (vspace.c V3): an upper bound of the kernel mappings
	 * (VMAs) in each window and in all, the budget, and the eviction state */
	uint16_t *wmaps;
	uint64_t live_maps, map_budget, stat_evictions;
	uint64_t evict_at; /* live_maps past which an eviction is wanted */
	int evict;	   /* enum vs_evict, read without map_lock at each call */
	/* quiet work (vspace.c): what the next call made alone does first */
	int want_evict;		       /* every window unmapped (V3) */
	int want_compact;	       /* a 2 MiB unit was asked for and none was free */
	void (*compact_fn)(void *arg); /* set by the engine that can compact */
	void *compact_arg;
	uint64_t compact_skip, compact_backoff; /* requests ignored after a pass found nothing */
	/* Home units this process reserved last (under alloc_lock): the windows
	 * being written now, which compaction leaves alone -- dropping such a
	 * reservation to give its unit to another window would only leave this
	 * one to be backed page by page. A hint: volatile, per process. */
#define SP_RECENT_HOMES 4 /* windows written at once, one each */
	uint64_t recent_homes[SP_RECENT_HOMES];
	unsigned recent_next;
	uint64_t stat_compactions, stat_compacted_pages;
};

/* ---- geometry ------------------------------------------------------------ */

static inline uint64_t sp_level_size(int level)
{
	return 4096ULL << (3 * level);
}
/* Smallest level whose partition holds size bytes. */
int sp_level_for(uint64_t size);
/* Top level for a pool of pool_size bytes. */
int sp_top_level_for(uint64_t pool_size);

static inline void *sp_ptr(const struct space *sp, uint64_t pool_off)
{
	return sp->base + pool_off;
}
static inline uint64_t sp_off(const struct space *sp, const void *p)
{
	return (uint64_t)((const char *)p - sp->base);
}

/* ---- format / attach ---------------------------------------------------- */

/* Lays out the space header, buddy bitmaps and an empty partition tree in a
 * freshly formatted pool. [0, meta_end) is reserved for layers above. */
int sp_format(struct pool *p, uint64_t hdr_off, uint64_t meta_end, uint64_t *reserved_end);
int sp_attach(struct space *sp, struct pool *p, uint64_t hdr_off);
void sp_detach(struct space *sp);
/* Validates the space header against the pool size (mount and fsck): the
 * allocator's bitmaps lie in [meta_end, data area), clear of the layers
 * above (the header has no checksum; a damaged one must not aim the
 * allocator's stores at the logs or the superblock). */
int sp_header_check(struct pool *p, uint64_t hdr_off, uint64_t meta_end);

/* ---- buddy allocator (buddy.c) ----------------------------------------- */

/* Allocates 2^order pages; returns the first page number or -ENOSPC. */
int64_t bud_alloc(struct tx *tx, int order);
/* Allocates the 2^order pages starting at page if they are free. */
int bud_alloc_at(struct tx *tx, uint64_t page, int order);
/* Queues the release of a block; it takes effect when the transaction is
 * finalised (tx.h), so the same transaction cannot reuse it. */
void bud_free(struct tx *tx, uint64_t page, int order);
/* Releases at once a block this same transaction allocated and never made
 * reachable (e.g. the unused part of a fresh unit). */
void bud_release_unused(struct tx *tx, uint64_t page, int order);
/* Order of the free block containing page, or -1 if page is allocated. */
int bud_free_order(struct space *sp, struct tx *tx, uint64_t page);
uint64_t bud_free_pages(struct space *sp);
int bud_check(struct space *sp, void (*report)(void *, const char *), void *arg);

/* ---- validation: every pool offset read from PM is checked --------------- */

/* Is page number pg one of the pages the buddy allocator manages? */
static inline int sp_page_ok(const struct space *sp, uint64_t pg)
{
	return pg >= sp->data_page && pg < sp->data_end_page;
}
/* Is [off, off + len) inside the data area? Overflow-safe. */
static inline int sp_data_range_ok(const struct space *sp, uint64_t off, uint64_t len)
{
	uint64_t lo = sp->data_page << FR_PAGE_SHIFT, hi = sp->data_end_page << FR_PAGE_SHIFT;
	return off >= lo && off <= hi && len <= hi - off;
}
/* Is v a vspace offset of the partition space (with len bytes after it)? */
static inline int sp_vrange_ok(const struct space *sp, uint64_t v, uint64_t len)
{
	return v <= sp->vsize && len <= sp->vsize - v;
}

/* ---- persistent page table (ppt.c) -------------------------------------- */

/* A window entry that failed its check (ppt_went_ok): its type is that of a
 * directory entry, which never appears at window level. */
#define PPT_BAD PPT_DIR
/* Is went a well-formed window entry (0, a unit or a page of the data area)? */
int ppt_went_ok(const struct space *sp, uint64_t went);
/* Entry of the window containing vspace offset v (PPT_NONE if absent,
 * PPT_BAD if the table is damaged on the way). */
uint64_t ppt_window(struct space *sp, uint64_t v);
uint64_t ppt_window_tx(struct tx *tx, uint64_t v);
/* Address of the window entry, creating directory pages when create. NULL
 * when absent (create == 0) or on ENOSPC. */
uint64_t *ppt_window_slot(struct tx *tx, uint64_t v, int create, int *err);
/* Page table page of a PPT_TABLE window entry. */
static inline struct sp_ptable *ppt_table(struct space *sp, uint64_t went)
{
	return (struct sp_ptable *)sp_ptr(sp, went & ~PPT_TYPE_MASK);
}
/* Pool offset of the page backing vspace offset v, or 0. */
uint64_t ppt_page(struct space *sp, uint64_t v);
uint64_t ppt_page_tx(struct tx *tx, uint64_t v);
/* Moves the mappings of npages pages (a multiple of 512, window aligned) from
 * vspace src to dst, leaving src unmapped; dst must be unmapped (pswap with an
 * empty side). Works on whole directory entries when 1 GiB aligned. */
int ppt_move(struct tx *tx, uint64_t src, uint64_t dst, uint64_t npages);
int ppt_check_dirs(struct space *sp, void (*visit)(void *, uint64_t, uint64_t), void *arg);
/* Calls visit(arg, vw, table) for every window mapped by a page table that
 * names its window (damaged entries and tables are skipped: fsck's to
 * report), as the transaction sees them, skipping absent 512 GiB and 1 GiB
 * ranges. Stops (returns 1) when visit returns non-0 or the transaction
 * failed. */
int ppt_each_table(struct tx *tx, int (*visit)(void *, uint64_t, struct sp_ptable *), void *arg);

/* ---- partitions (part.c) -------------------------------------------------- */

/* Allocates a partition of the given level; returns its vspace offset via *v. */
int part_alloc(struct tx *tx, int level, uint64_t *v);
/* mkfs: the root partition in state P with its chain of first children. */
int part_format_root(struct tx *tx);
void part_free(struct tx *tx, uint64_t v, int level);
/* Page of a small file (level 0..2 partition) backed? Allocates it if not:
 * placed at the window's home unit when possible. */
int part_small_back(struct tx *tx, uint64_t v_page, uint64_t *phys, int *fresh);
/* A block of 2^k pages for page o of a window: at its home (home_pg + o) if
 * that is free and aligned, else right after prev_pg; -ENOSPC if neither
 * (the caller then takes any block). 0 means none for either page. */
int64_t part_alloc_near(struct tx *tx, uint64_t home_pg, uint64_t prev_pg, unsigned o, int k);
/* Releases backing of the pages [v, v+len) of a small partition. */
void part_small_unback(struct tx *tx, uint64_t v, uint64_t len);
/* Backs a whole window of a large (level >= 3) partition with a 2 MiB unit. */
int part_large_back(struct tx *tx, uint64_t v_window, uint64_t *phys);
void part_large_unback(struct tx *tx, uint64_t v_window);
/* Format 4 (sp->reserve_windows): backs pages [o0, o1) of a large window
 * page by page, from its reserved home unit when it has one (window.c W1);
 * sets a bit in fresh[8] for each page backed now. A window whose 512 pages
 * are all written becomes its home unit. */
int part_large_back_pages(struct tx *tx, uint64_t v_window, unsigned o0, unsigned o1,
			  uint64_t *fresh);
/* Releases pages [o0, o1) of a large window (a unit becomes a table of the
 * rest, a reservation is given up); *released counts the pages that held
 * data. */
/* 1 if the large window at v_window is a table that reserves its home unit
 * (window.c W1): pages backed there cost no allocation. */
int part_large_reserved(struct tx *tx, uint64_t v_window);
int part_large_unback_pages(struct tx *tx, uint64_t v_window, unsigned o0, unsigned o1,
			    uint64_t *released);
/* Pre-allocation's collector: gives back the unwritten pages windows
 * reserved (W1) until at least want pages came back or none are left. */
uint64_t part_gc_reservations(struct tx *tx, uint64_t want);
/* 1 (and its home unit's first page) if pt is a reservation (W1) whose home
 * is a whole unit of the data area; 0 otherwise. */
int part_reserved_home(struct tx *tx, const struct sp_ptable *pt, uint64_t *home_pg);
/* The same for one window (compaction empties its home unit). */
uint64_t part_drop_reservation(struct tx *tx, uint64_t vw);
/* Write-and-swap (strict mode): gives backed pages fresh ones, unreachable
 * until the transaction commits, which then releases the pages they replace.
 * page_of[i] receives the page number of the i-th fresh page; the caller
 * fills those pages (through the direct mapping) before committing.
 * part_swap_window: the whole window of a large partition gets a new unit
 * (page_of has 512 entries). part_swap_pages: n pages from v (page aligned,
 * within one window); a window that was one unit becomes a page table whose
 * home is that unit, and a large window whose pages form one aligned unit
 * again becomes one. Both update the process's mapping after the commit. */
int part_swap_window(struct tx *tx, uint64_t v_window, uint64_t *page_of, int64_t *added);
int part_swap_pages(struct tx *tx, uint64_t v, unsigned n, uint64_t *page_of);
/* Compaction (compact.c): sp_compact_pick names up to SP_COMPACT_UNITS units
 * (their first pages) with the fewest pages in use, at most max_used each,
 * all of them movable file pages, cheapest first, and returns how many.
 * sp_compact_move moves up to max (<= SP_COMPACT_BATCH) pages out of them in
 * tx, unit after unit (dropping the unit's reservation first), and returns
 * how many it moved; called again in new transactions until sp_compact_done
 * (nonzero: nothing left to move). */
#define SP_COMPACT_BATCH 32
#define SP_COMPACT_UNITS 8
struct sp_compaction {
	uint64_t units[SP_COMPACT_UNITS];
	unsigned nunits, cur;		    /* units[cur] is being emptied */
	int collected;			    /* the walk filled v, n and the homes */
	unsigned n[SP_COMPACT_UNITS], next; /* v[cur][next..n[cur]) still to move */
	uint64_t v[SP_COMPACT_UNITS][512];  /* virtual addresses of the pages */
	uint64_t home_vw[SP_COMPACT_UNITS]; /* the window reserving the unit */
	uint8_t has_home[SP_COMPACT_UNITS], dropped[SP_COMPACT_UNITS];
	uint8_t spoiled[SP_COMPACT_UNITS]; /* a copy landed in it: skipped */
	struct tx *tx;			   /* during the walk that collects them */
};
unsigned sp_compact_pick(struct tx *tx, unsigned max_used, struct sp_compaction *out);
int sp_compact_move(struct tx *tx, struct sp_compaction *c, unsigned max);
unsigned sp_compact_done(const struct sp_compaction *c);
unsigned sp_compact_emptied(const struct sp_compaction *c); /* units emptied so far */
/* Separate mappings a window needs besides its home unit (0 for one unit). */
unsigned part_window_runs(struct tx *tx, uint64_t v_window);
/* Statistics and checking. */
struct part_stats {
	uint64_t allocated[SP_MAX_LEVEL + 1];
	uint64_t huge_windows, table_windows, table_pages, dir_pages;
};
/* Visits every allocated partition (alloc_cb) and every L3 partition in
 * state P (p3_cb: its window holds a header page); checks H1-H5. */
int part_walk(struct space *sp, void (*alloc_cb)(void *, uint64_t v, int level),
	      void (*p3_cb)(void *, uint64_t v), void *arg, struct part_stats *st,
	      fr_report_fn report, void *rarg);
/* Level of the allocated partition at v, or -1 if v is not an allocated partition. */
int part_level_at(struct space *sp, uint64_t v);

/* ---- mapping cache (vspace.c) ------------------------------------------- */

/* A page table page read from PM, for window v: 0 or -EUCLEAN with *why. */
int sp_ptable_check(const struct space *sp, const struct sp_ptable *pt, uint64_t v,
		    const char **why);
int vs_init(struct space *sp);
void vs_fini(struct space *sp);
/* Makes [v, v+len) accessible at sp->vbase + v according to the PPT. */
int vs_ensure(struct space *sp, uint64_t v, uint64_t len);
static inline int vs_ready(struct space *sp, uint64_t v, uint64_t len)
{
	uint64_t w0 = v >> 21, w1 = (v + len - 1) >> 21;
	for (uint64_t w = w0; w <= w1; w++)
		if (__atomic_load_n(&sp->wstate[w], __ATOMIC_ACQUIRE) != VS_MAPPED)
			return 0;
	return 1;
}
static inline void *vs_addr(struct space *sp, uint64_t v)
{
	return sp->vbase + v;
}
/* Library calls bracket their use of the vspace: windows are evicted (the
 * mappings bounded, V3) and units compacted (compact.c C3) only at the start
 * of a call while no other thread is inside one, so no pointer into a window
 * outlives its mapping and no store races a page's move. */
enum vs_evict { VS_EVICT_NONE, VS_EVICT_WANTED, VS_EVICT_RUNNING };
struct vs_slot {
	unsigned long depth; /* library calls this thread is inside */
	unsigned long owned;
} __attribute__((aligned(64)));
extern __thread struct vs_slot *vs_my_slot;
/* The thread is inside a shared call (share.c H9): it must not change the
 * pool, so the quiet work it may find waiting leaves compaction alone. */
extern __thread int vs_read_only;
struct vs_slot *vs_slot_claim(void);
void vs_call_enter_slow(struct space *sp);
/* Asks for quiet work (*what: sp->want_evict or sp->want_compact), done at
 * the start of the next call made while no other thread is inside one. */
void vs_want_quiet(struct space *sp, int *what);
/* Runs fn inside the caller's outermost call while no other thread of the
 * process is inside one, and keeps them out until fn returns (they wait at
 * vs_call_enter). -EBUSY: another thread stayed inside (waiting for a lock
 * or for I/O). */
int vs_run_alone(struct space *sp, int (*fn)(void *arg), void *arg);

/* Unmaps every window (or n from window w); the caller knows no thread is
 * inside a call. */
void vs_unmap_all(struct space *sp);
void vs_unmap_windows(struct space *sp, uint64_t w, uint64_t n);
static inline void vs_call_enter(struct space *sp)
{
	struct vs_slot *s = vs_my_slot ? vs_my_slot : vs_slot_claim();
	/* a full barrier (lock xadd): the depth is visible before evict is read */
	__atomic_add_fetch(&s->depth, 1, __ATOMIC_SEQ_CST);
	if (sp &&
	    __builtin_expect(__atomic_load_n(&sp->evict, __ATOMIC_SEQ_CST) != VS_EVICT_NONE, 0))
		vs_call_enter_slow(sp);
}
static inline void vs_call_leave(void)
{
	__atomic_sub_fetch(&vs_my_slot->depth, 1, __ATOMIC_RELEASE);
}
/* Deferred actions (tx_defer) after the PPT changed. */
void vs_page_changed(struct space *sp, uint64_t v_page, uint64_t unused1, uint64_t unused2);
void vs_window_changed(struct space *sp, uint64_t v_window, uint64_t nwindows, uint64_t unused);
/* A reserved window became its home unit (window.c promotion): its mapping,
 * the home unit whole, stays as it is. */
void vs_window_promoted(struct space *sp, uint64_t v_window, uint64_t unused1, uint64_t unused2);
void vs_moved(struct space *sp, uint64_t src, uint64_t dst, uint64_t nwindows);
void vs_pages_changed(struct space *sp, uint64_t v, uint64_t npages, uint64_t unused);
/* At once, inside the transaction: the pages of window vw set in unnamed
 * (bit o: page o) left its reservation and are no longer the file's. */
void vs_reservation_dropped(struct space *sp, uint64_t vw, const uint64_t unnamed[8]);

#endif
