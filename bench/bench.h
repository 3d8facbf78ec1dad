/*
 * bench.h -- shared declarations of ferrite-bench.
 *
 * Every workload is written once against struct bench_backend, a small table of
 * function pointers (open/close/write/pread/pwrite/fsync/stat/rename/unlink/mkdir/
 * rmdir). Each backend -- ferrite (the library API), tmpfs and ext4 (POSIX system
 * calls relative to a directory descriptor) and raw (a persisted memcpy into a
 * pre-mapped pool) -- fills one in. All operations return a count or 0 on success
 * and -errno on failure, so the workload code pays the same indirect call and the
 * same error check whatever sits underneath.
 */
#ifndef FERRITE_BENCH_H
#define FERRITE_BENCH_H

#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>

/* Column order of every table. */
enum bench_backend_id { BK_FERRITE, BK_TMPFS, BK_EXT4, BK_RAW, BK_STRICT, BK_COUNT };

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
	void (*fini)(void *ctx);
};

/* ---- options ---------------------------------------------------------------- */

#define G_MICRO 1u
#define G_META	2u
#define G_MOUNT 4u

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
	const char *json;
	int drop_caches; /* before ext4 random-write runs */
	int keep;	 /* keep pools and files afterwards */
	uint64_t seed;
	int quick;
	int cpu; /* pin the process (and the probes) to this CPU; -1 = no pinning */
};

/* ---- results ------------------------------------------------------------------ */

/* One measurement series: one workload on one backend. */
struct bench_cell {
	int n; /* samples taken */
	int failed;
	char err[160];
	char cleanup_err[160]; /* closing or removing the file afterwards failed */
	double ops;	       /* operations per sample */
	double bytes;	       /* bytes moved per sample (0 for metadata) */
	double secs[BENCH_MAX_RUNS];
};

struct bench_row {
	const char *name;   /* workload */
	const char *unit;   /* what one operation is, e.g. "4 KiB write" */
	const char *target; /* ratio target text, or NULL */
	double min_tmpfs;   /* target: ferrite/tmpfs >= this (0 = none) */
	double min_raw;	    /* target: ferrite/raw >= this (0 = none) */
	struct bench_cell cell[BK_COUNT];
};

#define MICRO_ROWS 6
#define META_ROWS  7

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

/* c) mount.c (links the ferrite library). Returns 0 or -errno with why filled. */
int mount_group_run(const struct bench_opts *o, struct mount_result *res, int nres, char *why,
		    size_t whylen);
/* The hidden --probe-mount mode run in a fresh child process. */
int mount_probe_main(const char *pool);

/* ---- backends ------------------------------------------------------------------ */

/* strict: the "strict" column, a second pool formatted in strict mode (every
 * write atomic) next to --pool, named like it with "-strict" added. */
int ferrite_backend_init(struct bench_backend *b, const struct bench_opts *o, int strict, char *why,
			 size_t whylen);
int posix_backend_init(struct bench_backend *b, const char *name, const char *dir, int drop_caches,
		       char *why, size_t whylen);
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
int report_json(const char *path, struct bench_backend *bk[BK_COUNT], const char *skip[BK_COUNT],
		const struct bench_opts *o, const struct bench_row *micro,
		const struct bench_row *meta, const struct mount_result *mnt, int nmnt,
		const char *mount_skip);

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

#endif /* FERRITE_BENCH_H */
