/*
 * bench.h -- shared declarations of ferrite-bench.
 *
 * Every workload is written once against struct bench_backend, a small table of
 * function pointers (open/close/write/pread/pwrite/fsync/fdatasync/stat/rename/unlink/
 * mkdir/rmdir). Each backend -- ferrite (the library API; a pm-engine pool, or a tiered
 * pool for the tier column), tmpfs, ext4 and ext4-disk (POSIX system calls relative to
 * a directory descriptor) and raw (a persisted memcpy into a pre-mapped pool) -- fills
 * one in. All operations return a count or 0 on success
 * and -errno on failure, so the workload code pays the same indirect call and the
 * same error check whatever sits underneath.
 */
#ifndef FERRITE_BENCH_H
#define FERRITE_BENCH_H

#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>

/* Every backend. BK_TIER (a tiered pool) and BK_DISK (ext4 on the machine's disk) only
 * take part in group d), where BK_FERRITE is the "pm" column. */
enum bench_backend_id {
	BK_FERRITE,
	BK_TMPFS,
	BK_EXT4,
	BK_RAW,
	BK_STRICT,
	BK_TIER,
	BK_DISK,
	BK_AGED, /* ferrite on a pool aged first (age.c), a) and b) */
	BK_COUNT
};

/* The backends each group measures. */
#define MICRO_COLS                                                                                 \
	((1u << BK_FERRITE) | (1u << BK_TMPFS) | (1u << BK_EXT4) | (1u << BK_RAW) |                \
	 (1u << BK_STRICT) | (1u << BK_AGED))
#define META_COLS ((1u << BK_FERRITE) | (1u << BK_TMPFS) | (1u << BK_EXT4) | (1u << BK_AGED))
#define TIER_COLS ((1u << BK_TIER) | (1u << BK_DISK) | (1u << BK_FERRITE))

#define BK_CAP_NAMESPACE 1u /* has named files and directories: metadata workloads apply */

struct bench_backend {
	const char *name;
	unsigned caps;
	void *ctx;
	char where[512]; /* what it runs on, printed in the header */
	char notes[256]; /* anything that bears on fairness (e.g. caches not dropped) */
	int (*open)(void *ctx, const char *path, int flags, mode_t mode);
	int (*close)(void *ctx, int fd);
	ssize_t (*write)(void *ctx, int fd, const void *buf, size_t len);
	ssize_t (*pread)(void *ctx, int fd, void *buf, size_t len, off_t off);
	ssize_t (*pwrite)(void *ctx, int fd, const void *buf, size_t len, off_t off);
	int (*fsync)(void *ctx, int fd);
	int (*fdatasync)(void *ctx, int fd);
	int (*stat)(void *ctx, const char *path, struct stat *st);
	int (*rename)(void *ctx, const char *from, const char *to);
	int (*unlink)(void *ctx, const char *path);
	int (*mkdir)(void *ctx, const char *path, mode_t mode);
	int (*rmdir)(void *ctx, const char *path);
	/* Untimed, before each random-overwrite run on an existing file; may be NULL.
	 * ext4 writes the file back and drops the page cache here (machine-limits.md). */
	int (*prepare_random_write)(void *ctx, int fd);
	/* Untimed, after files were removed; may be NULL. ext4 gives the freed blocks
	 * back to the image file in /dev/shm (FITRIM), so memory use stays bounded. */
	void (*reclaim)(void *ctx);
	/* Untimed, after every measurement; may be NULL. ext4 finishes its write-back
	 * (syncfs) so it does not run on the other CPU during the next backend's turn. */
	void (*settle)(void *ctx);
	/* Untimed, group d), after a fill and after each timed run, with no file open: what
	 * was written reaches its final place (ext4: syncfs; tier: the pool is drained, by
	 * an unmount and a mount); may be NULL. 0 or -errno. */
	int (*quiesce)(void *ctx);
	/* Bytes the backend can still store (free space of its file system or pool); may
	 * be NULL. Group d) skips a cell whose data set would not fit. */
	int (*space)(void *ctx, uint64_t *avail);
	void (*fini)(void *ctx);
};

/* ---- options ---------------------------------------------------------------- */

#define G_MICRO 1u
#define G_META	2u
#define G_MOUNT 4u
#define G_TIER	8u

#define BENCH_MAX_RUNS	      64
#define BENCH_MAX_MOUNT_SIZES 8

struct bench_opts {
	uint64_t file_size; /* a) size of the one file */
	uint64_t rand_ops;  /* a) RR / RW operation count */
	uint64_t files;	    /* b) files in the directory */
	uint64_t mount_files[BENCH_MAX_MOUNT_SIZES];
	int n_mount_files;	  /* c) pool populations */
	int runs;		  /* repetitions; tables show the median */
	unsigned groups;	  /* G_* */
	unsigned backends;	  /* 1u << BK_* */
	const char *pool;	  /* ferrite pool for a) and b) */
	uint64_t pool_size;	  /* 0 = derived from file_size and files */
	uint64_t mount_pool_size; /* 0 = derived from the file count */
	const char *workdir;	  /* the tmpfs column lives under it */
	const char *raw_dir;	  /* directory of the raw pool file (default: the pool's) */
	const char *ext4_dir;	  /* mounted ext4 (prepared by run-bench.sh) */
	const char *ext4_skip;	  /* why ext4 is not available (from run-bench.sh) */
	const char *json;	  /* the results (default: out_dir/ferrite-bench.json) */
	const char *out_dir;	  /* --out: where the JSON and the plot go by default */
	const char *svg;	  /* the plot (NULL: none) */
	int no_plot;		  /* --no-plot, or no gnuplot */
	int no_gnuplot;		  /* a plot was wanted, but gnuplot is not installed */
	int no_ext4;		  /* --no-ext4: no loop device set up for the ext4 column */
	const char *command;	  /* the command line, for the plot */
	char load[32];		  /* /proc/loadavg's 1, 5 and 15 minutes before the run */
	int drop_caches;	  /* before ext4 random-write runs */
	int keep;		  /* keep pools and files afterwards */
	uint64_t seed;
	int quick;
	unsigned age_times; /* the aged column: bytes written by aging, in pool sizes */
	int cpu;	    /* pin the process (and the probes) to this CPU; -1 = no pinning */
	/* d) tier */
	const char *disk_dir;	 /* on the machine's disk: ext4-disk and the tier's backing */
	const char *tier_pool;	 /* the tiered pool (default: --pool with -tier added) */
	uint64_t tier_pool_size; /* its size (256 MiB) */
	unsigned tier_flush_ms;	 /* its flush period (0: the library's default) */
	int tier_direct;	 /* its write-back uses O_DIRECT (default: cached) */
	uint64_t mix_data;	 /* synthetic mix: bytes in its files */
	uint64_t mix_ops;	 /* synthetic mix: timed operations */
	uint64_t varmail_files;	 /* varmail: files in the set */
	uint64_t varmail_loops;	 /* varmail: timed loops (13 operations each) */
	uint64_t oltp_data;	 /* oltp: bytes in the data files */
	uint64_t oltp_txns;	 /* oltp: timed transactions */
	unsigned tier_workloads; /* 1u << row of d): the workloads to run (default all) */
};

/* ---- results ------------------------------------------------------------------ */

/* One measurement series: one workload on one backend. */
struct bench_cell {
	int n; /* samples taken */
	int failed;
	char err[160];
	char skipped[160];     /* why this one cell was not measured (backend up) */
	char cleanup_err[160]; /* closing or removing the file afterwards failed */
	double ops;	       /* operations per sample */
	double bytes;	       /* bytes moved per sample (0 for metadata) */
	double secs[BENCH_MAX_RUNS];
};

struct bench_row {
	const char *name;	 /* workload */
	const char *unit;	 /* what one operation is, e.g. "4 KiB write" */
	const char *target;	 /* ratio target text, or NULL */
	int subject;		 /* the column the ratios are about (BK_FERRITE = 0 unless set) */
	double min_vs[BK_COUNT]; /* target: subject/column >= this (0 = none) */
	struct bench_cell cell[BK_COUNT];
};

#define MICRO_ROWS 6
#define META_ROWS  8
#define TIER_ROWS  3

/* d) what the tiered pool's cache did during one timed run (counter deltas), and its
 * state at the end of it (ferrite_get_tier_info). */
struct tier_cache_sample {
	uint64_t read_hits, read_misses, write_hits, write_misses;
	uint64_t collisions, forced, periodic, wraps;
	uint64_t valid_end, dirty_end, chunks;
	uint64_t records_used, records;
};

struct tier_group {
	struct bench_row rows[TIER_ROWS];
	struct tier_cache_sample cache[TIER_ROWS][BENCH_MAX_RUNS];
	int ncache[TIER_ROWS];
	char data[TIER_ROWS][96]; /* the data set, e.g. "40000 files, 625 MiB" */
	int cache_dropped;	  /* the page cache was dropped before each timed run */
};

struct mount_result {
	uint64_t files;
	uint64_t pool_size;
	int n;
	int failed;
	char err[200];
	double mount_ms[BENCH_MAX_RUNS];
	double stat_us[BENCH_MAX_RUNS];	  /* first stat after mount */
	double rss_kib[BENCH_MAX_RUNS];	  /* VmRSS after mount minus before */
	double anon_kib[BENCH_MAX_RUNS];  /* RssAnon delta */
	double shmem_kib[BENCH_MAX_RUNS]; /* RssShmem + RssFile delta (pool pages touched) */
};

/* ---- workloads ----------------------------------------------------------------- */

void micro_rows_init(struct bench_row rows[MICRO_ROWS]);
void micro_run(struct bench_backend *bk[BK_COUNT], const struct bench_opts *o,
	       struct bench_row rows[MICRO_ROWS]);
void meta_rows_init(struct bench_row rows[META_ROWS]);
void meta_run(struct bench_backend *bk[BK_COUNT], const struct bench_opts *o,
	      struct bench_row rows[META_ROWS]);

void tier_rows_init(struct tier_group *g, const struct bench_opts *o);
void tier_run(struct bench_backend *bk[BK_COUNT], const char *skip[BK_COUNT],
	      const struct bench_opts *o, struct tier_group *g);
/* The largest data set of group d) (sizes the pm pool so that it fits). */
uint64_t tier_max_data(const struct bench_opts *o);

/* c) mount.c (links the ferrite library). Returns 0 or -errno with why filled. */
int mount_group_run(const struct bench_opts *o, struct mount_result *res, int nres, char *why,
		    size_t whylen);
/* The hidden --probe-mount mode run in a fresh child process. */
int mount_probe_main(const char *pool);

/* ---- backends ------------------------------------------------------------------ */

/* kind BK_FERRITE: the pool --pool; BK_STRICT: the "strict" column, a second
 * pool formatted in strict mode (every write atomic) next to --pool, named
 * like it with "-strict" added; BK_AGED: a third ("-aged"), aged first by
 * --age times its size of Geriatrix-style churn (age.c). */
int ferrite_backend_init(struct bench_backend *b, const struct bench_opts *o, int kind, char *why,
			 size_t whylen);
/* tier: the tier column, a tiered pool (--tier-pool) caching DIR/tier-backing of
 * --disk-dir. Its settle() unmounts and mounts the pool again, which drains it. */
int ferrite_tier_backend_init(struct bench_backend *b, const struct bench_opts *o, char *why,
			      size_t whylen);
/* The tier column's cache counters (ferrite_get_tier_info), as a sample with absolute
 * counts; -errno if B is not a tiered pool. */
int ferrite_backend_tier_sample(struct bench_backend *b, struct tier_cache_sample *s);

#define PX_DROP_CACHES 1u /* drop the page cache before random overwrites (ext4) */
#define PX_TRIM	       2u /* FITRIM after removals (ext4 on a loop device in /dev/shm) */
/* fstype: the file system DIR must be on ("ext4" or "tmpfs"); name: the column. */
int posix_backend_init(struct bench_backend *b, const char *name, const char *fstype,
		       const char *dir, unsigned flags, char *why, size_t whylen);
int raw_backend_init(struct bench_backend *b, const char *dir, uint64_t size, char *why,
		     size_t whylen);

/* ---- report.c -------------------------------------------------------------------- */

double stat_median(const double *v, int n);
double stat_min(const double *v, int n);
double stat_max(const double *v, int n);
void report_header(struct bench_backend *bk[BK_COUNT], const char *skip[BK_COUNT],
		   const struct bench_opts *o);
void report_micro(const struct bench_row rows[MICRO_ROWS], const char *skip[BK_COUNT],
		  const struct bench_opts *o);
void report_meta(const struct bench_row rows[META_ROWS], const char *skip[BK_COUNT],
		 const struct bench_opts *o);
void report_mount(const struct mount_result *res, int nres, const char *skip,
		  const struct bench_opts *o);
void report_tier(const struct tier_group *g, const char *skip[BK_COUNT],
		 const struct bench_opts *o);
int report_json(const char *path, struct bench_backend *bk[BK_COUNT], const char *skip[BK_COUNT],
		const struct bench_opts *o, const struct bench_row *micro,
		const struct bench_row *meta, const struct mount_result *mnt, int nmnt,
		const char *mount_skip, const struct tier_group *tier);

/* ---- plot.c: the SVG, drawn by gnuplot --------------------------------------------- */

/* gnuplot's path from PATH; -ENOENT if there is none. */
int plot_find_gnuplot(char *path, size_t len);
/* Draws Ferrite's throughput over each peer's, per workload of the given groups
 * (NULL: not run), into svg. 0 drawn, 1 nothing to draw, -1 failed; why says. */
int report_plot(const char *svg, const char *gnuplot, const char *skip[BK_COUNT],
		const struct bench_opts *o, const struct bench_row *micro,
		const struct bench_row *meta, const struct tier_group *tier, char *why,
		size_t whylen);

/* ---- ext4.c: ext4 on a loop device in /dev/shm (root) ------------------------------ */

struct ext4_loop {
	char img[64]; /* the image file, unlinked once the loop device holds it */
	char dev[32]; /* /dev/loopN */
	char mnt[64]; /* where it is mounted */
	int loop_fd;  /* -1: none (the device goes when unmounted and closed) */
	int mounted;
};

/* Makes, attaches and mounts it; 0, or -1 with why filled. */
int ext4_loop_setup(struct ext4_loop *e, const struct bench_opts *o, char *why, size_t len);
/* Unmounts it and lets the loop device go (nothing happens for a zeroed e). */
void ext4_loop_teardown(struct ext4_loop *e);

/* ---- util.c ---------------------------------------------------------------------- */

double now_sec(void);
void progress(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
int parse_size(const char *s, uint64_t *out);
const char *fmt_size(uint64_t bytes, char *buf, size_t len);
void cell_fail(struct bench_cell *c, const char *what, long rc);
/* Closes and/or removes (fd < 0: only removes) a workload's file; a failure is kept
 * in c->cleanup_err (reported as an error: space would leak into later workloads). */
void cell_cleanup(struct bench_backend *b, struct bench_cell *c, int fd, const char *path);
void cell_add(struct bench_cell *c, double secs, double ops, double bytes);
int rm_tree(const char *path);
int mkdir_p(const char *path);
uint64_t rng_next(uint64_t *state);
/* Backend to measure K-th in run RUN: rotated every run and reversed every other run,
 * so that no backend always goes first or always follows the same neighbour. */
int bench_order(int run, int k);
/* Reads one "Key:  N kB" field of /proc/self/status; -1 if absent. */
long proc_status_kib(const char *key);
/* Drops the clean pages of the page cache and the dentry and inode caches (write back
 * first what should go too); 0 or -errno (root only). */
int drop_page_cache(void);
/* "SOURCE (FSTYPE) on MOUNTPOINT" of the file system holding PATH, from
 * /proc/self/mountinfo; "?" if not found. */
const char *mount_source(const char *path, char *buf, size_t len);

#endif /* FERRITE_BENCH_H */
