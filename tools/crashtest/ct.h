/*
 * ct.h -- the crash-state explorer (`ferrite crashtest`).
 *
 * Three kinds of process cooperate:
 *   the explorer runs a workload on a pool through the tracing build of the
 *     library (persist/pm.h) and keeps a model of what persistent memory
 *     holds (model.c). At every fence and at the end of every operation it
 *     names the crash images of that instant: the persisted contents plus
 *     some subset of the cache lines still pending, some with a large copy
 *     torn at 8-byte granularity; duplicates are dropped by hash;
 *   the worker (worker.c) mirrors the persisted contents from the
 *     explorer's messages and forks one checker per image, with a timeout;
 *   a checker (check.c) writes its image to a file, mounts it (recovery,
 *     itself traced), and judges the result against the states the same
 *     workload produced on tmpfs before and after the operation in flight.
 * Expected states, the workload catalogue and the command line are in
 * workloads.c and main.c.
 */
#ifndef FERRITE_CT_H
#define FERRITE_CT_H

#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include "fm.h"
#include "persist/pm.h"

#define CT_LINE 64

/* The explorer's mode for tiered pools (beside enum ferrite_mode's sync and
 * strict): data writes on a per-write tiered pool whose backing directory
 * stays as it was, so every crash image pairs with that one directory: the
 * workload runs with no write-back once the tree is built (a forced flush
 * fails its call, and the run says so), and the checkers mount with
 * tier_no_writeback (ferrite.h). */
#define CT_MODE_TIER 100

/* ---- the model of persistent memory (model.c) ------------------------------ */

/* A group of pending lines that reach PM independently of other groups: one
 * cache line of small stores, or all lines of one large copy (which may also
 * tear at 8-byte granularity). */
struct ct_unit {
	uint32_t first; /* index into ct_point.lines */
	uint32_t nlines;
	int32_t bulk;
	int32_t tear; /* a large copy, one of the CT_TEAR_UNITS largest: torn too */
};

/* One crash instant. */
struct ct_point {
	int op;		/* operation in flight (-1: before the first) */
	int after;	/* 1: the instant right after op returned */
	uint64_t index; /* numbering of the instants of one run */
	uint32_t nunits, nlines;
	struct ct_unit *units;
	uint64_t *lines;  /* line numbers (pool offset / 64), grouped by unit */
	uint8_t *content; /* the pending (newest) content of each line */
	uint64_t hash;	  /* hash of the persisted image at this instant */
};

struct ct_model;
typedef void (*ct_point_fn)(struct ct_model *m, const struct ct_point *pt, void *arg);
/* A line reached PM: its content was old, is new now. */
typedef void (*ct_persist_fn)(struct ct_model *m, uint64_t line, const uint8_t *old,
			      const uint8_t *new_, void *arg);

struct ct_model {
	char path[4096]; /* the pool this model follows */
	struct pm_pool *pool;
	uint64_t size, nlines;
	uint8_t *persisted; /* what PM holds */
	int own_persisted;
	uint64_t *nonzero; /* pages of persisted that were not zero at recording */
	uint8_t *snap;	   /* content at the last flush of each flushed line */
	uint8_t *flags;	   /* per line: LF_* */
	uint64_t *copy;	   /* per line: id of the large copy that last wrote it (0: none) */
	uint64_t *dirty;   /* lines written since they last reached PM */
	uint64_t ndirty, capdirty;
	uint64_t hash;
	int recording;
	int op, after_pending;
	uint64_t npoints;
	uint64_t stores, flushes, fences;
	ct_point_fn on_point;
	ct_persist_fn on_persist;
	void *arg;
	uint8_t *auto_image; /* if set, recording starts when the pool is first */
	uint64_t auto_hash;  /* mapped, with PM holding this image (a checker) */
	int auto_done;
	uint64_t *touched; /* if set: a bit per 4 KiB page any store reached */
	struct pm_trace_ops ops;
};

/* Follows the pool at path (mapped later); persisted may be given (the
 * checker's image, with its hash) or NULL (read from the mapping at
 * ct_model_record). */
int ct_model_init(struct ct_model *m, const char *path);
void ct_model_free(struct ct_model *m);
/* Installs the model as the process's tracer (guarding: pools it maps are
 * read-only behind an alias). */
void ct_model_install(struct ct_model *m);
void ct_model_uninstall(struct ct_model *m);
/* Starts recording: PM is taken to hold exactly what is mapped now (or,
 * when image is given, image with hash). */
int ct_model_record(struct ct_model *m, uint8_t *image, uint64_t hash);
void ct_model_stop(struct ct_model *m);
/* Marks the end of operation op: the instant right after it returned. */
void ct_model_op_end(struct ct_model *m, int op);
void ct_model_op_begin(struct ct_model *m, int op);
/* Lines still written but not persisted (0 at every operation's end). */
uint64_t ct_model_pending(struct ct_model *m);

uint64_t ct_line_hash(uint64_t line, const uint8_t *p);
uint64_t ct_image_hash(const uint8_t *img, uint64_t size);
/* Hash of the lines of 4 KiB page pg of img. */
uint64_t ct_page_hash(const uint8_t *img, uint64_t pg);
/* Per page, the hash of an all-zero page there (computed once per size). */
const uint64_t *ct_zero_page_hashes(uint64_t npages);

/* ---- crash images of an instant (model.c) ---------------------------------- */

#define CT_ALL_SUBSETS_MAX 12 /* up to 2^12 = 4096 subsets: all of them */
#define CT_RANDOM_SUBSETS  20
#define CT_PAIRS_MAX	   4096
#define CT_TEARS	   7  /* torn variants per large copy */
#define CT_TEAR_UNITS	   16 /* copies torn per instant at most (the largest) */

struct ct_variant {
	uint8_t *take; /* per unit: 1 = its new content reached PM */
	int tear_unit; /* -1: no tearing */
	int tear_pattern;
};

uint64_t ct_variant_count(const struct ct_point *pt);
/* Fills v (take sized nunits) for variant vid, deterministically. */
void ct_variant_get(const struct ct_point *pt, uint64_t vid, uint64_t seed, struct ct_variant *v);
/* Per unit, what its new content adds to the image hash. */
void ct_unit_deltas(const struct ct_point *pt, const uint8_t *persisted, uint64_t *delta);
/* Hash of the image persisted + variant, from the hash of persisted (delta:
 * from ct_unit_deltas, or NULL to work it out line by line). */
uint64_t ct_variant_hash(const struct ct_point *pt, const struct ct_variant *v,
			 const uint8_t *persisted, const uint64_t *delta);
/* Applies the variant to img (a copy of persisted); calls mark(page) for
 * each 4 KiB page it changed. */
void ct_variant_apply(const struct ct_point *pt, const struct ct_variant *v, uint8_t *img,
		      void (*mark)(void *, uint64_t), void *arg);
/* Calls mark(arg, page) for each 4 KiB page the variant changes. */
void ct_variant_mark(const struct ct_point *pt, const struct ct_variant *v,
		     void (*mark)(void *, uint64_t), void *arg);
const char *ct_variant_describe(const struct ct_point *pt, const struct ct_variant *v, char *buf,
				size_t len);

/* ---- workloads (workloads.c) ----------------------------------------------- */

struct ct_workload {
	char name[96];
	int tree; /* CT_TREE_* */
	int nops;
	struct fm_op *ops; /* the operations explored, in order */
	uint64_t seed;	   /* random workloads */
};

/* SMALL and POPULATED: see workloads.c; FRAGMENTED: sparse files whose
 * windows hold every unit of the pool, so a large write needs compaction. */
enum { CT_TREE_SMALL, CT_TREE_POPULATED, CT_TREE_FRAGMENTED };

/* The operations that build a tree (not explored). */
int ct_setup_ops(int tree, struct fm_op **ops);
/* Workloads by set: "single", "pairs", "random" (count, seed, length), or
 * one name ("single:rename-over/populated", "pair:create+unlink",
 * "random:7/25"). Returns the number added to *out (grown). */
int ct_workloads(const char *spec, uint64_t seed, int random_len, struct ct_workload **out, int *n);
void ct_workloads_list(FILE *f);
int ct_op_is_data(const struct fm_op *op);

/* ---- the run ----------------------------------------------------------------- */

/* Everything a checker needs, set up by the explorer before the worker forks. */
struct ct_run {
	const char *workdir;
	int mode; /* enum ferrite_mode, or CT_MODE_TIER */
	uint64_t pool_size;
	const struct ct_workload *w;
	char (*state_dir)[512]; /* state_dir[i]: the tree after ops 0..i-1 */
	char (*lenient)[512];	/* per op: path of the file a data op writes, or "" */
	uint64_t fresh_free;	/* free pages of a fresh pool after removing everything */
	uint64_t fresh_meta;	/* pages held by metadata pools then */
	int nested_max;		/* images per instant of a crash during recovery */
	int timeout_s;
	int verbose;
	int keep;	   /* keep the image of a replayed variant */
	const char *plant; /* planted bug, or NULL */
	const char *argv0;
	uint64_t seed;
	const char *mode_name;
};

/* Shared between worker and checkers (MAP_SHARED). */
struct ct_stats {
	uint64_t images;    /* checked by a checker */
	uint64_t post_dups; /* recovered to a state already judged */
	uint64_t nested;    /* crash-during-recovery images checked */
	uint64_t violations;
	uint64_t hangs;
	uint64_t set_cap;
	uint64_t set[]; /* recovered-state hashes (open addressing) */
};

struct ct_stats *ct_stats_new(uint64_t cap);
/* 1 if h was new (inserted), 0 if already there. */
int ct_stats_insert(struct ct_stats *s, uint64_t h);

/* Checks one image (in a fresh child). Exit status: 0 sound, 3 violation
 * (explained in report), anything else a crash of the checker itself. */
/* What a checker knows of its image's 4 KiB pages. */
struct ct_pages {
	const uint64_t *base_hash; /* per page: hash of its lines when recording began */
	uint64_t *changed;	   /* bit per page that may differ from then */
	uint64_t *touched;	   /* bit per page this checker's stores reached (shared
				    * with the worker, which reuses the image file) */
};

/* image: the bytes of img_path (the checker's own copy, which it may change). */
int ct_check_image(const struct ct_run *run, uint8_t *image, uint64_t image_size,
		   uint64_t image_hash, const struct ct_point *pt, const struct ct_variant *v,
		   uint64_t vid, const char *img_path, const struct ct_pages *pages,
		   struct ct_stats *st, FILE *report);
/* Writes the pages of img set in any of the bitmaps (NULL ends the list is
 * not used: pass b2 = NULL for one). */
int ct_write_pages(int fd, const uint8_t *img, uint64_t size, const uint64_t *b1,
		   const uint64_t *b2);

/* Digest of a whole tree (names, types, modes, owners, links, sizes, bytes,
 * link targets, hard-link structure). */
uint64_t ct_tree_digest(struct fm_backend *be);

/* ---- worker (worker.c) ------------------------------------------------------ */

struct ct_worker;
struct ct_worker *ct_worker_start(const struct ct_run *run, int jobs, struct ct_stats *st);
/* Messages from the explorer, in order. */
int ct_worker_base(struct ct_worker *w, const char *path, uint64_t hash);
int ct_worker_point(struct ct_worker *w, const struct ct_point *pt, const uint32_t *vids,
		    const uint64_t *hashes, uint32_t n);
int ct_worker_persist(struct ct_worker *w, uint64_t line, const uint8_t *content);
/* Waits for every check; returns the worker's exit status. */
int ct_worker_finish(struct ct_worker *w);

/* Replay: the command line that checks one variant alone. */
void ct_replay_cmd(const struct ct_run *run, const struct ct_point *pt, uint64_t vid, char *buf,
		   size_t len);

#endif
