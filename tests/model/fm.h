/*
 * fm.h -- shared harness of the model-based and crash tests ("fm" = file-system model).
 *
 * One op description (struct fm_op) is produced by one generator and executed,
 * unchanged, on two backends behind the same table of function pointers
 * (struct fm_backend): Ferrite, and the Linux kernel on a tmpfs directory.
 * The kernel is the reference model: every observable result of Ferrite must
 * equal the kernel's. The comparator checks per-op results; fm_tree_compare()
 * checks whole trees.
 */
#ifndef FM_H
#define FM_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <time.h>

/* ---- random numbers (splitmix64: fast, deterministic, good enough) ------ */

struct fm_rng {
	uint64_t s;
};

uint64_t fm_rand(struct fm_rng *r);
uint64_t fm_below(struct fm_rng *r, uint64_t n);	    /* [0, n) */
int64_t fm_range(struct fm_rng *r, int64_t lo, int64_t hi); /* [lo, hi] */
uint64_t fm_mix(uint64_t a, uint64_t b);
/* Fills buf deterministically from seed (a tenth of the seeds give zeros). */
void fm_fill(void *buf, size_t len, uint64_t seed);

/* ---- backends ------------------------------------------------------------ */

struct fm_dent {
	char name[256];
	unsigned char type;
	uint64_t ino;
	int64_t off;
};

/* Every function returns >= 0 on success and -errno on failure. */
struct fm_backend {
	const char *name;
	void *ctx;
	int is_ferrite;
	int (*open)(void *c, const char *p, int flags, mode_t mode);
	int (*close)(void *c, int fd);
	int (*dup)(void *c, int fd);
	ssize_t (*read)(void *c, int fd, void *b, size_t n);
	ssize_t (*write)(void *c, int fd, const void *b, size_t n);
	ssize_t (*pread)(void *c, int fd, void *b, size_t n, off_t o);
	ssize_t (*pwrite)(void *c, int fd, const void *b, size_t n, off_t o);
	ssize_t (*readv)(void *c, int fd, const struct iovec *iov, int cnt);
	ssize_t (*writev)(void *c, int fd, const struct iovec *iov, int cnt);
	ssize_t (*preadv)(void *c, int fd, const struct iovec *iov, int cnt, off_t o);
	ssize_t (*pwritev)(void *c, int fd, const struct iovec *iov, int cnt, off_t o);
	off_t (*lseek)(void *c, int fd, off_t o, int whence);
	int (*ftruncate)(void *c, int fd, off_t len);
	int (*truncate)(void *c, const char *p, off_t len);
	int (*fallocate)(void *c, int fd, int mode, off_t o, off_t len);
	int (*fsync)(void *c, int fd);
	int (*fdatasync)(void *c, int fd);
	int (*stat)(void *c, const char *p, struct stat *st);
	int (*lstat)(void *c, const char *p, struct stat *st);
	int (*fstat)(void *c, int fd, struct stat *st);
	int (*chmod)(void *c, const char *p, mode_t m);
	int (*fchmod)(void *c, int fd, mode_t m);
	int (*chown)(void *c, const char *p, uid_t u, gid_t g);
	int (*lchown)(void *c, const char *p, uid_t u, gid_t g);
	int (*fchown)(void *c, int fd, uid_t u, gid_t g);
	int (*utimens)(void *c, const char *p, const struct timespec *ts, int flags);
	int (*futimens)(void *c, int fd, const struct timespec *ts);
	int (*access)(void *c, const char *p, int mode);
	int (*mkdir)(void *c, const char *p, mode_t m);
	int (*rmdir)(void *c, const char *p);
	int (*unlink)(void *c, const char *p);
	int (*rename)(void *c, const char *a, const char *b, unsigned flags);
	int (*link)(void *c, const char *a, const char *b);
	int (*symlink)(void *c, const char *target, const char *p);
	ssize_t (*readlink)(void *c, const char *p, char *buf, size_t n);
	/* directory streams */
	int (*dopen)(void *c, const char *p, void **h);
	int (*dread)(void *h, struct fm_dent *e); /* 1 entry, 0 end, -errno */
	int64_t (*dtell)(void *h);
	int (*dseek)(void *h, int64_t cookie);
	int (*drewind)(void *h);
	int (*dclose)(void *h);
	/* Lists the directory of an open stream without disturbing it (reference
	 * backend only; NULL elsewhere). *n entries without "." and "..". */
	int (*dsnap)(void *h, struct fm_dent **e, int *n);
	/* Extended attributes. set/remove follow a final symlink (setxattr,
	 * removexattr); get/list act on it (lgetxattr, llistxattr), for the tree
	 * comparison. NULL: the backend has none (-EOPNOTSUPP). */
	int (*setxattr)(void *c, const char *p, const char *name, const void *v, size_t n,
			int flags);
	int (*removexattr)(void *c, const char *p, const char *name);
	ssize_t (*lgetxattr)(void *c, const char *p, const char *name, void *v, size_t n);
	ssize_t (*llistxattr)(void *c, const char *p, char *list, size_t n);
	/* Explanation of this thread's last failure, or NULL if the backend has none. */
	const char *(*lasterr)(void *c);
	/* Forgets the last message; fm_exec calls it before each op so that the
	 * message kept is the op's own, not one of the queries that follow it. */
	void (*clearerr)(void *c);
};

/* Kernel backend: every path is resolved inside ROOT as if ROOT were "/"
 * (openat2 RESOLVE_IN_ROOT), which is Ferrite's rule for its pool. */
struct fm_backend *fm_posix_new(const char *root, int inject_bug);
void fm_posix_free(struct fm_backend *be);
/* Harness validation only: the same kernel with ordinary path syscalls. */
struct fm_backend *fm_posix_plain_new(const char *root);

/* Ferrite backend on a mounted pool. */
struct fm_backend *fm_ferrite_new(const char *pool); /* mounts; NULL + message on failure */
/* The options fm_ferrite_new and fm_ferrite_remount mount with from now on
 * (copied; NULL: none). */
struct ferrite_mount_opts;
void fm_ferrite_set_mount_opts(const struct ferrite_mount_opts *opts);
int fm_ferrite_remount(struct fm_backend *be, int run_fsck, char *why, size_t whylen);
int fm_ferrite_unmount(struct fm_backend *be); /* and frees be */
void *fm_ferrite_fs(struct fm_backend *be);
/* Harness modes beyond enum ferrite_mode: a tiered pool (per-write or epoch
 * consistency) caching the directory fm_tier_backing(pool). */
enum { FM_MODE_TIER = 2, FM_MODE_TIER_EPOCH = 3 };
/* Formats pool in mode (FERRITE_MODE_SYNC, FERRITE_MODE_STRICT, FM_MODE_TIER*):
 * a tiered pool gets a fresh, empty backing directory. */
int fm_ferrite_mkfs(const char *pool, uint64_t bytes, int mode, char *why, size_t whylen);
/* The backing directory of a tiered pool made by fm_ferrite_mkfs (static buffer). */
const char *fm_tier_backing(const char *pool);
/* Removes pool, and its backing directory if it has one. */
void fm_pool_remove(const char *pool);
/* A tiered pool's cache statistics, one line ("" for other pools). */
void fm_tier_stats_line(const char *pool, char *out, size_t n);
/* 0 if the mounted pool reports mode (ferrite_get_info), else -1 and why: a
 * test that asked for strict mode must not silently run in sync mode. */
int fm_ferrite_check_mode(struct fm_backend *be, int mode, char *why, size_t whylen);
/* "sync" / "strict" / "tier" / "tier-epoch" -> the mode, else -1. */
int fm_mode_parse(const char *name);
const char *fm_mode_name(int mode);
/* ferrite_fsck(pool, 0): returns its result; the problem lines go to why. */
int fm_ferrite_fsck(const char *pool, char *why, size_t whylen);

/* ---- operations ---------------------------------------------------------- */

enum fm_kind {
	FM_OPEN,
	FM_CLOSE,
	FM_DUP,
	FM_READ,
	FM_WRITE,
	FM_PREAD,
	FM_PWRITE,
	FM_READV,
	FM_WRITEV,
	FM_PREADV,
	FM_PWRITEV,
	FM_LSEEK,
	FM_LSEEK_DH, /* SEEK_DATA / SEEK_HOLE */
	FM_FTRUNCATE,
	FM_TRUNCATE,
	FM_FALLOCATE,
	FM_FSYNC,
	FM_FDATASYNC,
	FM_STAT,
	FM_LSTAT,
	FM_FSTAT,
	FM_CHMOD,
	FM_FCHMOD,
	FM_CHOWN,
	FM_LCHOWN,
	FM_FCHOWN,
	FM_UTIMENS,
	FM_FUTIMENS,
	FM_ACCESS,
	FM_MKDIR,
	FM_RMDIR,
	FM_UNLINK,
	FM_RENAME,
	FM_LINK,
	FM_SYMLINK,
	FM_READLINK,
	FM_LISTDIR, /* opendir + readdir to the end + telldir/seekdir/rewinddir + closedir */
	FM_DS_OPEN, /* a directory stream kept open across other operations */
	FM_DS_READ,
	FM_DS_CLOSE,
	FM_SETXATTR,	/* p1 path, p2 name, len/dseed the value, flags XATTR_CREATE/REPLACE */
	FM_REMOVEXATTR, /* p1 path, p2 name */
	FM_NKINDS
};

#define FM_PATH	  600
#define FM_NSLOT  8   /* descriptor slots */
#define FM_NDS	  2   /* directory stream slots */
#define FM_BAD_FD 900 /* descriptor used for an empty slot: never open */

struct fm_op {
	int32_t kind;
	int32_t slot, slot2;
	int32_t flags; /* open flags, rename flags, fallocate mode, whence, access mode, utimens
			  flags */
	uint32_t mode;
	uint32_t uid, gid;
	int32_t niov;
	int32_t ts_null;
	int32_t exact; /* use slot even if empty (EBADF); else the next open slot */
	int64_t cap;   /* write/writev that would grow a file past cap are skipped */
	int64_t off, len;
	uint64_t dseed;
	struct timespec ts[2];
	char p1[FM_PATH];
	char p2[FM_PATH];
};

const char *fm_kind_name(int kind);
int fm_kind_mutates(int kind); /* may change the file system */
/* Writes a one-line description of op (no newline). */
void fm_op_str(const struct fm_op *op, char *out, size_t n);

/* Generator profiles. */
enum fm_profile { FM_PROF_MODEL, FM_PROF_KILL };

struct fm_gen {
	struct fm_rng rng;
	int profile;
	char base[64];	   /* prefix of every path: "" or "/t0" */
	int dotdot;	   /* may use ".." in paths and symlink targets */
	int no_abs;	   /* no absolute symlink targets */
	int no_creat_dir;  /* never O_CREAT together with O_DIRECTORY */
	int64_t max_off;   /* offsets/lengths stay below this */
	int64_t max_write; /* writes are no longer than this (0: no limit) */
	uint64_t weights[FM_NKINDS];
	uint64_t wsum;
};

void fm_gen_init(struct fm_gen *g, uint64_t seed, int profile, const char *base, int dotdot);
void fm_gen_next(struct fm_gen *g, struct fm_op *op);

/* Per-backend state of one sequence: descriptor table and directory streams.
 * A directory stream kept open records what it returned; the reference side
 * (the one with dsnap) also tracks, after every op, which entries were present
 * for the whole life of the stream (stable) and which names ever existed
 * (seen), so that "entries present for the whole life of the stream are
 * returned exactly once" can be checked at the end of the stream. */
struct fm_ds {
	void *h;
	int reached_end, checked, seeked, dead;
	int nret, capret;
	struct fm_dent *ret; /* entries returned so far */
	int nstable, nseen, capseen;
	struct fm_dent *stable;
	struct fm_dent *seen;
};

struct fm_side {
	struct fm_backend *be;
	int fd[FM_NSLOT];
	int fdtype[FM_NSLOT]; /* S_IFMT of what the slot refers to */
	int fdflags[FM_NSLOT];
	struct fm_ds ds[FM_NDS];
};

struct fm_res {
	int slot; /* descriptor slot actually used */
	int64_t ret;
	int64_t aux; /* result of an implicit close of the slot being reused */
	int has_st, has_st2;
	int64_t st_ret, st2_ret; /* results of the stats taken after the op */
	struct stat st, st2;
	uint8_t *buf;
	size_t blen;
	struct fm_dent *ents;
	int nents;
	int has_off;
	int64_t off; /* descriptor offset after the op */
	int bad;     /* a check local to this side failed: see note */
	char note[512];
	char err[256]; /* backend's explanation of a failure */
};

void fm_side_init(struct fm_side *s, struct fm_backend *be);
/* Closes every descriptor and stream (results ignored). */
void fm_side_close_all(struct fm_side *s);
void fm_exec(struct fm_side *s, const struct fm_op *op, struct fm_res *res);
/* A write that returned a short count (POSIX allows it; a tiered pool does it
 * past the size it writes atomically) becomes the write of what it wrote, so
 * the other side writes the same prefix. */
void fm_shrink_short_write(struct fm_op *op, const struct fm_res *res);
/* write, writev, pwrite or pwritev. */
int fm_is_write(const struct fm_op *op);
/* Applies to s what op does when it fails with err and nothing else: an open
 * or dup still closes the descriptor its slot held. The kill test replays a
 * call the pool refused (ENOSPC) this way, since the mirror has room for it:
 * a refused call must leave no trace. */
void fm_exec_refused(struct fm_side *s, const struct fm_op *op, int64_t err, struct fm_res *res);
/* The descriptor slot fm_exec will use for op. */
int fm_pick_slot(const struct fm_side *s, const struct fm_op *op);
void fm_res_free(struct fm_res *r);
void fm_res_str(const struct fm_op *op, const struct fm_res *r, char *out, size_t n);

/* Compares the results of one op on two sides (a = system under test,
 * b = reference). Returns 0 if they agree, else 1 with a reason in why. */
int fm_compare(const struct fm_op *op, struct fm_side *a, const struct fm_res *ra,
	       struct fm_side *b, const struct fm_res *rb, char *why, size_t whylen);
/* Returns 1 if ret a may stand for the reference's rb->ret by a documented
 * POSIX alternative (rb: the reference's result of the same op). */
int fm_err_alternative(const struct fm_op *op, const struct fm_side *bside, const struct fm_res *rb,
		       int64_t a);
/* 1 (default): a Ferrite failure with an empty ferrite_errmsg() fails the test;
 * 0: it is only counted and reported. */
extern int fm_errmsg_strict;
/* Prints how often each tolerated divergence occurred, with a first example. */
void fm_alt_report(FILE *f);

/* ---- trees ---------------------------------------------------------------- */

/* Leniency for one file of b (the reference) whose data may be torn: the
 * content of a must be, byte for byte, old or new (b's current content), with
 * size old or new; if strict_append, bytes past the old size are all new when
 * the size is the new one. On success b's file is overwritten with a's content
 * so the two trees become equal. */
struct fm_lenient {
	int active;
	uint64_t ino; /* b's inode number */
	uint8_t *old;
	size_t oldlen;
	int strict_append;
	int used; /* set when the leniency was needed */
};

int fm_tree_compare(struct fm_backend *a, struct fm_backend *b, const char *root,
		    struct fm_lenient *len, char *why, size_t whylen);

/* Entries of directory path without "." and "..", sorted by name; *out is
 * malloc'ed (free it). Returns 0 or -errno. */
int fm_tree_list(struct fm_backend *be, const char *path, struct fm_dent **out, int *n);

struct fm_counts {
	uint64_t files, dirs, symlinks; /* distinct inodes; dirs include root */
	uint64_t bytes;
};
int fm_tree_count(struct fm_backend *be, const char *root, struct fm_counts *c);

/* ---- misc ---------------------------------------------------------------- */

int fm_rm_rf(const char *path);
const char *fm_errname(int64_t ret); /* "ENOENT" for -ENOENT, the number otherwise */

/* ---- targeted kill tests ---------------------------------------------------- */

struct fm_kill_test {
	const char *name; /* the program's, for messages and the pool's file name */
	int mode;	  /* of the pool: FERRITE_MODE_SYNC, FM_MODE_TIER, ... */
	uint64_t pool_mib;
	int rounds; /* default of --rounds */
	long max_delay_us;
	/* Sets *flag (release) as the moment of interest begins; never returns. */
	void (*child)(const char *pool, volatile int *flag);
	/* After the kill: 0 when the pool shows what it must. */
	int (*check)(const char *pool, int round, long delay);
	const char *passed; /* "kills during ...", printed with the count */
};
/* The main of a targeted kill test, `NAME [--rounds N] [--seed S]`: formats a
 * pool, then each round forks the child, waits until it sets its flag,
 * sleeps a random delay below max_delay_us (from the seed), SIGKILLs it and
 * runs the check. Returns 0 when every round passed (the pool is removed),
 * 1 on a failure (reported on stderr, the pool kept), 2 on a usage or
 * harness error. */
int fm_kill_main(int argc, char **argv, const struct fm_kill_test *kt);
/* The first steps of a check: fsck must be clean, then the pool mounts into
 * *fs (void *: a ferrite_fs). 0, or 1 after a message on stderr. */
int fm_kill_fsck_mount(const char *pool, int round, long delay, void **fs);

#endif
