/*
 * workloads.c -- what the explorer runs: two starting trees and the
 * operations explored on them.
 *
 * The small tree has a few files and directories; the populated tree adds a
 * large (hashed) directory, files of every partition size up to one about to
 * be upgraded by copying (L2 -> L3) and one about to be upgraded by remapping
 * (L3 -> L4), a 5 MiB file spanning several 2 MiB windows, a sparse file with
 * holes below its end, a symlink, a hard link, and an unlinked file still
 * held open (an orphan). The fragmented tree is sparse files whose windows
 * hold every unit of the pool (only pair:write+compact uses it). Before recording, every free page
 * is filled with a pattern (main.c), so an image that exposes uninitialised memory shows it.
 * Descriptor slots stay open across the explored operations:
 *   0 /f0 O_RDWR   1 /f1 O_RDWR   2 /f2 O_APPEND   3 /f3 O_APPEND
 *   4 /f4 O_RDWR   5 /h O_RDWR    6 the orphan     7 free (creates)
 * The one-operation set runs every template alone on each tree it applies
 * to; the pair set runs every ordered pair of the interesting templates
 * (first instance 0, then instance 1, which touches other names) plus pairs
 * that work on the same object; random workloads come from the model tests'
 * generator.
 */
#include "ct.h"

#include <fcntl.h>
#include <stdlib.h>
#include <string.h>

#include "ferrite.h"

#define KiB	      1024LL
#define MiB	      (1024LL * 1024)
#define CT_FRAG_FILES 6

/* ---- building operations ------------------------------------------------------ */

static struct fm_op *add(struct fm_op **ops, int *n, int kind)
{
	*ops = realloc(*ops, sizeof(**ops) * (size_t)(*n + 1));
	if (!*ops)
		abort();
	struct fm_op *op = &(*ops)[(*n)++];
	memset(op, 0, sizeof(*op));
	op->kind = kind;
	op->exact = 1;
	op->niov = 1;
	op->dseed = 0x5eed0001ULL + (uint64_t)*n * 7919; /* never a multiple of 10: not zeros */
	if (op->dseed % 10 == 0)
		op->dseed++;
	return op;
}

static void o_open(struct fm_op **o, int *n, int slot, const char *p, int flags, mode_t mode)
{
	struct fm_op *op = add(o, n, FM_OPEN);
	op->slot = slot;
	op->flags = flags;
	op->mode = mode;
	snprintf(op->p1, FM_PATH, "%s", p);
}

static void o_close(struct fm_op **o, int *n, int slot)
{
	add(o, n, FM_CLOSE)->slot = slot;
}

static void o_write(struct fm_op **o, int *n, int slot, int64_t len, uint64_t seed)
{
	struct fm_op *op = add(o, n, FM_WRITE);
	op->slot = slot;
	op->len = len;
	if (seed)
		op->dseed = seed;
}

static void o_pwrite(struct fm_op **o, int *n, int slot, int64_t off, int64_t len, uint64_t seed)
{
	struct fm_op *op = add(o, n, FM_PWRITE);
	op->slot = slot;
	op->off = off;
	op->len = len;
	if (seed)
		op->dseed = seed;
}

static void o_path(struct fm_op **o, int *n, int kind, const char *p1, const char *p2)
{
	struct fm_op *op = add(o, n, kind);
	snprintf(op->p1, FM_PATH, "%s", p1);
	if (p2)
		snprintf(op->p2, FM_PATH, "%s", p2);
	op->mode = 0755;
}

static void o_rename(struct fm_op **o, int *n, const char *a, const char *b, int flags)
{
	o_path(o, n, FM_RENAME, a, b);
	(*o)[*n - 1].flags = flags;
}

static void o_truncate(struct fm_op **o, int *n, const char *p, int64_t len)
{
	o_path(o, n, FM_TRUNCATE, p, NULL);
	(*o)[*n - 1].len = len;
}

static void o_ftruncate(struct fm_op **o, int *n, int slot, int64_t len)
{
	struct fm_op *op = add(o, n, FM_FTRUNCATE);
	op->slot = slot;
	op->len = len;
}

static void o_fallocate(struct fm_op **o, int *n, int slot, int mode, int64_t off, int64_t len)
{
	struct fm_op *op = add(o, n, FM_FALLOCATE);
	op->slot = slot;
	op->flags = mode;
	op->off = off;
	op->len = len;
}

/* A file of len bytes at p, written in one go and closed (slot 7). */
static void o_file(struct fm_op **o, int *n, const char *p, int64_t len)
{
	o_open(o, n, 7, p, O_CREAT | O_WRONLY | O_TRUNC, 0644);
	if (len)
		o_write(o, n, 7, len, 0);
	o_close(o, n, 7);
}

/* ---- the two trees ---------------------------------------------------------------- */

/* Sparse files writing one page in eight of two windows each: each window
 * reserves a unit (SCMFS pre-allocation) until none is left, and the windows
 * after that take pages wherever they are free. */
static int fragmented_setup(struct fm_op **ops)
{
	int n = 0;
	char p[64];
	for (int f = 0; f < CT_FRAG_FILES; f++) {
		snprintf(p, sizeof p, "/s%d", f);
		o_open(ops, &n, 7, p, O_CREAT | O_RDWR, 0644);
		for (int64_t off = 0; off < 4 * MiB; off += 32 * KiB)
			o_pwrite(ops, &n, 7, off, 4 * KiB, (uint64_t)f);
		o_close(ops, &n, 7);
	}
	return n;
}

int ct_setup_ops(int tree, struct fm_op **ops)
{
	int n = 0;
	*ops = NULL;
	if (tree == CT_TREE_FRAGMENTED)
		return fragmented_setup(ops);
	int pop = tree == CT_TREE_POPULATED;
	char p[64];
	o_path(ops, &n, FM_MKDIR, "/a", NULL);
	static const int64_t asz[] = {0, 1, 100, 4096, 5000, 9000};
	for (int i = 0; i < 6; i++) {
		snprintf(p, sizeof p, "/a/a%d", i);
		o_file(ops, &n, p, asz[i]);
	}
	for (int i = 0; i < 2; i++) {
		snprintf(p, sizeof p, "/a/r%d", i);
		o_file(ops, &n, p, 700 + i);
		snprintf(p, sizeof p, "/a/t%d", i);
		o_file(ops, &n, p, 1300 + i);
		snprintf(p, sizeof p, "/a/u%d", i);
		o_file(ops, &n, p, i && pop ? 300 * KiB : 2000 + i);
		snprintf(p, sizeof p, "/a/s%d", i);
		o_file(ops, &n, p, i && pop ? 3 * MiB : 40 * KiB);
	}
	o_path(ops, &n, FM_MKDIR, "/e", NULL);
	o_path(ops, &n, FM_MKDIR, "/d2", NULL);
	o_path(ops, &n, FM_MKDIR, "/d2/sub", NULL);
	o_file(ops, &n, "/d2/sub/z", 333);
	o_open(ops, &n, 0, "/f0", O_CREAT | O_RDWR, 0644);
	o_write(ops, &n, 0, 100, 0);
	o_open(ops, &n, 1, "/f1", O_CREAT | O_RDWR, 0644);
	o_write(ops, &n, 1, 5000, 0);
	o_open(ops, &n, 2, "/f2", O_CREAT | O_WRONLY | O_APPEND, 0644);
	o_write(ops, &n, 2, pop ? 256 * KiB - 1000 : 3000, 0);
	o_open(ops, &n, 6, "/o", O_CREAT | O_RDWR, 0644);
	o_write(ops, &n, 6, 2000, 0);
	o_path(ops, &n, FM_UNLINK, "/o", NULL);
	if (pop) {
		o_path(ops, &n, FM_MKDIR, "/big", NULL);
		for (int i = 0; i < 150; i++) {
			snprintf(p, sizeof p, "/big/e%d", i);
			o_file(ops, &n, p, 50);
		}
		o_open(ops, &n, 3, "/f3", O_CREAT | O_WRONLY | O_APPEND, 0644);
		o_write(ops, &n, 3, 2 * MiB - 4 * KiB, 0);
		o_open(ops, &n, 4, "/f4", O_CREAT | O_RDWR, 0644);
		o_write(ops, &n, 4, 5 * MiB, 0);
		/* Sparse: its first two 2 MiB windows are holes below EOF. */
		o_open(ops, &n, 5, "/h", O_CREAT | O_RDWR, 0644);
		o_pwrite(ops, &n, 5, 5 * MiB, 124 * KiB, 0);
		o_path(ops, &n, FM_SYMLINK, "f0", "/l");
		o_path(ops, &n, FM_LINK, "/f1", "/hl");
	}
	return n;
}

/* ---- templates ---------------------------------------------------------------------- */

struct tmpl {
	const char *name;
	int pop_only;
	int interesting; /* in the pair set */
	void (*build)(struct fm_op **o, int *n, int i);
	int tier; /* 1: also in the tier set (data writes only: the backing
		   * directory stays as it is); 2: only there */
};

#define T(fn) static void fn(struct fm_op **o, int *n, int i)

static const char *fmt(char *buf, const char *f, int i)
{
	snprintf(buf, 64, f, i);
	return buf;
}

T(t_create)
{
	char b[64];
	o_open(o, n, 7, fmt(b, "/c%d", i), O_CREAT | O_EXCL | O_WRONLY, 0644);
}
T(t_create_bigdir)
{
	char b[64];
	o_open(o, n, 7, fmt(b, "/big/c%d", i), O_CREAT | O_EXCL | O_WRONLY, 0644);
}
T(t_mkdir)
{
	char b[64];
	o_path(o, n, FM_MKDIR, fmt(b, "/m%d", i), NULL);
}
T(t_mkdir_bigdir)
{
	char b[64];
	o_path(o, n, FM_MKDIR, fmt(b, "/big/md%d", i), NULL);
}
T(t_symlink)
{
	char b[64];
	o_path(o, n, FM_SYMLINK, "f1", fmt(b, "/y%d", i));
}
T(t_link)
{
	char b[64];
	o_path(o, n, FM_LINK, "/f1", fmt(b, "/k%d", i));
}
T(t_unlink)
{
	char b[64];
	o_path(o, n, FM_UNLINK, fmt(b, "/a/u%d", i), NULL);
}
T(t_unlink_large)
{
	(void)i;
	o_path(o, n, FM_UNLINK, "/a/s1", NULL);
}
T(t_unlink_open)
{
	(void)i;
	o_path(o, n, FM_UNLINK, "/f0", NULL);
}
T(t_unlink_bigdir)
{
	char b[64];
	o_path(o, n, FM_UNLINK, fmt(b, "/big/e%d", 17 + i), NULL);
}
T(t_rmdir)
{
	(void)i;
	o_path(o, n, FM_RMDIR, "/e", NULL);
}
T(t_close_orphan)
{
	(void)i;
	o_close(o, n, 6);
}
T(t_rename)
{
	char b[64];
	o_rename(o, n, "/a/a1", fmt(b, "/a/n%d", i), 0);
}
T(t_rename_cross)
{
	char b[64];
	o_rename(o, n, "/a/a2", fmt(b, "/d2/x%d", i), 0);
}
T(t_rename_over)
{
	char a[64], b[64];
	o_rename(o, n, fmt(a, "/a/r%d", i), fmt(b, "/a/t%d", i), 0);
}
T(t_rename_dir)
{
	(void)i;
	o_rename(o, n, "/d2", "/a/d2m", 0);
}
T(t_rename_exchange)
{
	(void)i;
	o_rename(o, n, "/a/a3", "/f1", RENAME_EXCHANGE);
}
T(t_rename_noreplace)
{
	char b[64];
	o_rename(o, n, "/a/a4", fmt(b, "/nr%d", i), RENAME_NOREPLACE);
}
T(t_rename_bigdir)
{
	char a[64], b[64];
	o_rename(o, n, fmt(a, "/big/e%d", 3 + i), fmt(b, "/big/x%d", i), 0);
}
T(t_truncate_shrink)
{
	char b[64];
	o_truncate(o, n, fmt(b, "/a/s%d", i), 1000);
}
T(t_truncate_grow)
{
	(void)i;
	o_truncate(o, n, "/f1", 300 * KiB);
}
T(t_ftruncate_zero)
{
	(void)i;
	o_ftruncate(o, n, 1, 0);
}
T(t_overwrite_small)
{
	o_pwrite(o, n, 1, 1000 + 64 * i, 300, 0);
}
T(t_overwrite_pages)
{
	o_pwrite(o, n, 1, 3000 + 1500 * i, 2000, 0);
}
T(t_overwrite_extend)
{
	o_pwrite(o, n, 1, 4000 + 100 * i, 4000, 0);
}
T(t_overwrite_large)
{
	o_pwrite(o, n, 4, 100000 + 4096 * i, MiB + 5000, 0);
}
T(t_overwrite_window)
{
	(void)i;
	o_pwrite(o, n, 4, 2 * MiB, 2 * MiB, 0);
}
/* Several chunks of a tiered pool's cache, and an unaligned start and end. */
T(t_overwrite_multi)
{
	o_open(o, n, 7, i ? "/a/s1" : "/a/s0", O_RDWR, 0);
	o_pwrite(o, n, 7, 1000, 20000, 0);
}
/* Old bytes and a new size in one write, across chunks. */
T(t_overwrite_grow_multi)
{
	o_open(o, n, 7, i ? "/a/s1" : "/a/s0", O_RDWR, 0);
	o_pwrite(o, n, 7, 38000, 9000, 0);
}
/* A partial chunk of a file the cache does not hold: its old bytes are read
 * in from the backing file (First Responder case 3). */
T(t_overwrite_miss)
{
	o_open(o, n, 7, i ? "/a/t1" : "/a/t0", O_RDWR, 0);
	o_pwrite(o, n, 7, 50, 100, 0);
}
T(t_append_multi)
{
	o_write(o, n, 2, 10000 + 7 * i, 0);
}
T(t_append)
{
	o_write(o, n, 2, 300 + 7 * i, 0);
}
T(t_append_upgrade)
{
	(void)i;
	o_write(o, n, 2, 4000, 0);
}
T(t_append_swap)
{
	(void)i;
	o_write(o, n, 3, 8192, 0);
}
T(t_pwrite_hole)
{
	/* Into a hole below EOF: a new window backs it. */
	o_pwrite(o, n, 5, 1 * MiB + 100 + 4096 * i, 8192, 0);
}
T(t_pwrite_hole_window)
{
	(void)i;
	o_pwrite(o, n, 5, 2 * MiB, 2 * MiB, 0);
}
T(t_pwrite_past_eof)
{
	(void)i;
	o_pwrite(o, n, 5, 6 * MiB + 300, 4096, 0);
}
T(t_fallocate)
{
	(void)i;
	o_fallocate(o, n, 1, 0, 0, 200000);
}
T(t_fallocate_keep)
{
	(void)i;
	o_fallocate(o, n, 1, FALLOC_FL_KEEP_SIZE, 5000, 100000);
}
T(t_punch)
{
	(void)i;
	o_fallocate(o, n, 4, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 2 * MiB, 2 * MiB);
}
T(t_punch_edges)
{
	/* A partial window on each side of a whole one: zeroed (by swap and
	 * by redo copy in strict mode) and released in the same call. */
	(void)i;
	o_fallocate(o, n, 4, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 1 * MiB + 100,
		    3 * MiB + 10 * KiB);
}
T(t_punch_small)
{
	(void)i;
	o_fallocate(o, n, 1, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 100, 3000);
}
T(t_chmod)
{
	(void)i;
	o_path(o, n, FM_CHMOD, "/f0", NULL);
	(*o)[*n - 1].mode = 0600;
}
T(t_chown)
{
	(void)i;
	o_path(o, n, FM_CHOWN, "/f0", NULL);
	(*o)[*n - 1].uid = 1000;
	(*o)[*n - 1].gid = 1000;
}
T(t_utimens)
{
	(void)i;
	o_path(o, n, FM_UTIMENS, "/f0", NULL);
	(*o)[*n - 1].ts[0] = (struct timespec){1000, 5};
	(*o)[*n - 1].ts[1] = (struct timespec){2000, 7};
}

static const struct tmpl tmpls[] = {
    {"create", 0, 1, t_create, 0},
    {"create-bigdir", 1, 0, t_create_bigdir, 0},
    {"mkdir", 0, 1, t_mkdir, 0},
    {"mkdir-bigdir", 1, 0, t_mkdir_bigdir, 0},
    {"symlink", 0, 0, t_symlink, 0},
    {"link", 0, 1, t_link, 0},
    {"unlink", 0, 1, t_unlink, 0},
    {"unlink-large", 1, 0, t_unlink_large, 0},
    {"unlink-open", 0, 0, t_unlink_open, 0},
    {"unlink-bigdir", 1, 0, t_unlink_bigdir, 0},
    {"rmdir", 0, 0, t_rmdir, 0},
    {"close-orphan", 0, 0, t_close_orphan, 0},
    {"rename", 0, 0, t_rename, 0},
    {"rename-cross", 0, 0, t_rename_cross, 0},
    {"rename-over", 0, 1, t_rename_over, 0},
    {"rename-dir", 0, 0, t_rename_dir, 0},
    {"rename-exchange", 0, 0, t_rename_exchange, 0},
    {"rename-noreplace", 0, 0, t_rename_noreplace, 0},
    {"rename-bigdir", 1, 0, t_rename_bigdir, 0},
    {"truncate-shrink", 0, 1, t_truncate_shrink, 0},
    {"truncate-grow", 0, 0, t_truncate_grow, 0},
    {"ftruncate-zero", 0, 0, t_ftruncate_zero, 0},
    {"overwrite-small", 0, 0, t_overwrite_small, 1},
    {"overwrite-pages", 0, 1, t_overwrite_pages, 1},
    {"overwrite-extend", 0, 0, t_overwrite_extend, 1},
    {"overwrite-large", 1, 0, t_overwrite_large, 0},
    {"overwrite-window", 1, 0, t_overwrite_window, 0},
    {"append", 0, 1, t_append, 1},
    {"append-multi", 0, 0, t_append_multi, 2},
    {"overwrite-multi", 0, 0, t_overwrite_multi, 2},
    {"overwrite-grow-multi", 0, 0, t_overwrite_grow_multi, 2},
    {"overwrite-miss", 0, 0, t_overwrite_miss, 2},
    {"append-upgrade", 1, 0, t_append_upgrade, 0},
    {"append-swap", 1, 0, t_append_swap, 0},
    {"pwrite-hole", 1, 0, t_pwrite_hole, 0},
    {"pwrite-hole-window", 1, 0, t_pwrite_hole_window, 0},
    {"pwrite-past-eof", 1, 0, t_pwrite_past_eof, 0},
    {"fallocate", 0, 0, t_fallocate, 0},
    {"fallocate-keep", 0, 0, t_fallocate_keep, 0},
    {"punch", 1, 0, t_punch, 0},
    {"punch-edges", 1, 0, t_punch_edges, 0},
    {"punch-small", 0, 0, t_punch_small, 0},
    {"chmod", 0, 0, t_chmod, 0},
    {"chown", 0, 0, t_chown, 0},
    {"utimens", 0, 0, t_utimens, 0},
};
#define NTMPL ((int)(sizeof(tmpls) / sizeof(tmpls[0])))

/* Pairs on one object: the second operation depends on the first. */
struct dep {
	const char *name;
	void (*build)(struct fm_op **o, int *n);
	int fragmented; /* on the fragmented tree (else the populated one) */
};

static void d_create_write(struct fm_op **o, int *n)
{
	o_open(o, n, 7, "/c0", O_CREAT | O_EXCL | O_WRONLY, 0644);
	o_write(o, n, 7, 5000, 0);
}
static void d_append_truncate(struct fm_op **o, int *n)
{
	o_write(o, n, 2, 300, 0);
	o_ftruncate(o, n, 2, 1000);
}
static void d_rename_unlink(struct fm_op **o, int *n)
{
	o_rename(o, n, "/a/a1", "/a/n0", 0);
	o_path(o, n, FM_UNLINK, "/a/n0", NULL);
}
static void d_link_unlink(struct fm_op **o, int *n)
{
	o_path(o, n, FM_LINK, "/a/a5", "/k0");
	o_path(o, n, FM_UNLINK, "/a/a5", NULL);
}
static void d_mkdir_rename(struct fm_op **o, int *n)
{
	o_path(o, n, FM_MKDIR, "/m0", NULL);
	o_rename(o, n, "/m0", "/a/m0", 0);
}
static void d_overwrite_twice(struct fm_op **o, int *n)
{
	o_pwrite(o, n, 1, 3000, 2000, 0);
	o_pwrite(o, n, 1, 3500, 2000, 0);
}
static void d_unlink_create(struct fm_op **o, int *n)
{
	o_path(o, n, FM_UNLINK, "/a/u0", NULL);
	o_open(o, n, 7, "/a/u0", O_CREAT | O_EXCL | O_WRONLY, 0644);
}
static void d_rename_back(struct fm_op **o, int *n)
{
	o_rename(o, n, "/a/r0", "/a/t0", 0);
	o_rename(o, n, "/a/t0", "/a/r0", 0);
}
static void d_unlink_open_close(struct fm_op **o, int *n)
{
	o_path(o, n, FM_UNLINK, "/f1", NULL);
	o_close(o, n, 1);
}
/* /f3 ends a page short of its reserved first window: the append writes the
 * last page (promotion: the home unit becomes the window), the punch makes the
 * unit a table again (demotion). */
static void d_promote_demote(struct fm_op **o, int *n)
{
	o_write(o, n, 3, 8192, 0);
	o_fallocate(o, n, 3, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 1 * MiB, 64 * KiB);
}
/* A whole window of /f4 demoted by a punch, then the hole written again:
 * pages come back one by one into the demoted window's table. */
static void d_punch_refill(struct fm_op **o, int *n)
{
	o_fallocate(o, n, 4, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 2 * MiB + 8 * KiB,
		    40 * KiB);
	o_pwrite(o, n, 4, 2 * MiB + 12 * KiB, 8 * KiB, 1);
}
/* On the fragmented tree: no unit is free, so the large write's windows are
 * backed page by page and ask for compaction, which the next call does
 * (moving the written pages of a unit elsewhere, dropping its reservation). */
static void d_write_compact(struct fm_op **o, int *n)
{
	o_open(o, n, 7, "/big", O_CREAT | O_RDWR, 0644);
	o_write(o, n, 7, 2 * MiB, 2);
	o_write(o, n, 7, 8 * KiB, 3);
}

static const struct dep deps[] = {
    {"create+write", d_create_write, 0},	   {"append+truncate", d_append_truncate, 0},
    {"rename+unlink", d_rename_unlink, 0},	   {"link+unlink", d_link_unlink, 0},
    {"mkdir+rename", d_mkdir_rename, 0},	   {"overwrite+overwrite", d_overwrite_twice, 0},
    {"unlink+create", d_unlink_create, 0},	   {"rename+rename-back", d_rename_back, 0},
    {"unlink-open+close", d_unlink_open_close, 0}, {"promote+demote", d_promote_demote, 0},
    {"punch+refill", d_punch_refill, 0},	   {"write+compact", d_write_compact, 1},
};
#define NDEPS ((int)(sizeof(deps) / sizeof(deps[0])))

/* ---- catalogue ----------------------------------------------------------------------- */

static struct ct_workload *grow(struct ct_workload **out, int *n)
{
	*out = realloc(*out, sizeof(**out) * (size_t)(*n + 1));
	if (!*out)
		abort();
	struct ct_workload *w = &(*out)[(*n)++];
	memset(w, 0, sizeof(*w));
	return w;
}

static const struct tmpl *tmpl_named(const char *name, size_t len)
{
	for (int t = 0; t < NTMPL; t++)
		if (strlen(tmpls[t].name) == len && !strncmp(tmpls[t].name, name, len))
			return &tmpls[t];
	return NULL;
}

static void add_single(const struct tmpl *t, int tree, struct ct_workload **out, int *n)
{
	struct ct_workload *w = grow(out, n);
	snprintf(w->name, sizeof(w->name), "single:%s/%s", t->name,
		 tree == CT_TREE_POPULATED ? "populated" : "small");
	w->tree = tree;
	t->build(&w->ops, &w->nops, 0);
}

static void add_pair(const struct tmpl *a, const struct tmpl *b, struct ct_workload **out, int *n)
{
	struct ct_workload *w = grow(out, n);
	snprintf(w->name, sizeof(w->name), "pair:%s+%s", a->name, b->name);
	w->tree = CT_TREE_POPULATED;
	a->build(&w->ops, &w->nops, 0);
	b->build(&w->ops, &w->nops, 1);
}

static void add_dep(const struct dep *d, struct ct_workload **out, int *n)
{
	struct ct_workload *w = grow(out, n);
	snprintf(w->name, sizeof(w->name), "pair:%s", d->name);
	w->tree = d->fragmented ? CT_TREE_FRAGMENTED : CT_TREE_POPULATED;
	d->build(&w->ops, &w->nops);
}

static void add_random(uint64_t seed, int len, struct ct_workload **out, int *n)
{
	struct ct_workload *w = grow(out, n);
	snprintf(w->name, sizeof(w->name), "random:%llu/%d", (unsigned long long)seed, len);
	w->tree = CT_TREE_SMALL;
	w->seed = seed;
	struct fm_gen g;
	fm_gen_init(&g, seed, FM_PROF_KILL, "", 0);
	g.max_off = 1 * MiB; /* the pool is small; the crash states are what matter */
	w->ops = calloc((size_t)len, sizeof(struct fm_op));
	for (int i = 0; i < len; i++)
		fm_gen_next(&g, &w->ops[i]);
	w->nops = len;
}

int ct_workloads(const char *spec, uint64_t seed, int random_len, struct ct_workload **out, int *n)
{
	int before = *n;
	if (!strcmp(spec, "single")) {
		for (int tree = CT_TREE_SMALL; tree <= CT_TREE_POPULATED; tree++)
			for (int t = 0; t < NTMPL; t++)
				if ((!tmpls[t].pop_only || tree == CT_TREE_POPULATED) &&
				    tmpls[t].tier != 2)
					add_single(&tmpls[t], tree, out, n);
	} else if (!strcmp(spec, "tier")) {
		/* Tiered pools: each data write alone, on the small tree. */
		for (int t = 0; t < NTMPL; t++)
			if (tmpls[t].tier)
				add_single(&tmpls[t], CT_TREE_SMALL, out, n);
	} else if (!strcmp(spec, "pairs")) {
		for (int a = 0; a < NTMPL; a++)
			for (int b = 0; b < NTMPL; b++)
				if (tmpls[a].interesting && tmpls[b].interesting)
					add_pair(&tmpls[a], &tmpls[b], out, n);
		for (int d = 0; d < NDEPS; d++)
			add_dep(&deps[d], out, n);
	} else if (!strncmp(spec, "random", 6)) {
		/* "random" or "random:COUNT" (seeds seed..seed+COUNT-1), or one
		 * "random:SEED/LEN" as printed by a failure. */
		const char *arg = spec[6] == ':' ? spec + 7 : NULL;
		const char *slash = arg ? strchr(arg, '/') : NULL;
		if (slash) {
			add_random(strtoull(arg, NULL, 0), atoi(slash + 1), out, n);
		} else {
			int count = arg ? atoi(arg) : 4;
			for (int i = 0; i < count; i++)
				add_random(seed + (uint64_t)i, random_len, out, n);
		}
	} else if (!strncmp(spec, "single:", 7)) {
		const char *name = spec + 7, *slash = strchr(name, '/');
		size_t len = slash ? (size_t)(slash - name) : strlen(name);
		const struct tmpl *t = tmpl_named(name, len);
		if (!t)
			return -1;
		int tree = slash && !strcmp(slash + 1, "small") ? CT_TREE_SMALL : CT_TREE_POPULATED;
		if (slash && strcmp(slash + 1, "small") && strcmp(slash + 1, "populated"))
			return -1;
		if (t->pop_only && tree == CT_TREE_SMALL)
			return -1;
		add_single(t, tree, out, n);
	} else if (!strncmp(spec, "pair:", 5)) {
		const char *name = spec + 5;
		for (int d = 0; d < NDEPS; d++)
			if (!strcmp(deps[d].name, name)) {
				add_dep(&deps[d], out, n);
				return *n - before;
			}
		const char *plus = strchr(name, '+');
		if (!plus)
			return -1;
		const struct tmpl *a = tmpl_named(name, (size_t)(plus - name));
		const struct tmpl *b = tmpl_named(plus + 1, strlen(plus + 1));
		if (!a || !b)
			return -1;
		add_pair(a, b, out, n);
	} else {
		return -1;
	}
	return *n - before;
}

void ct_workloads_list(FILE *f)
{
	fprintf(f, "one-operation templates (single:NAME/small|populated):\n");
	for (int t = 0; t < NTMPL; t++) {
		char s[1000];
		struct fm_op *ops = NULL;
		int n = 0;
		tmpls[t].build(&ops, &n, 0);
		fm_op_str(&ops[0], s, sizeof s);
		fprintf(f, "  %-20s %s%s%s%s\n", tmpls[t].name, s,
			tmpls[t].pop_only ? "  [populated only]" : "",
			tmpls[t].interesting ? "  [in pairs]" : "",
			tmpls[t].tier == 2 ? "  [tier only]"
			: tmpls[t].tier	   ? "  [in tier]"
					   : "");
		free(ops);
	}
	fprintf(f, "pairs on one object (pair:NAME):\n");
	for (int d = 0; d < NDEPS; d++)
		fprintf(f, "  %s\n", deps[d].name);
	fprintf(f, "sets: single, pairs (every ordered pair of the [in pairs] templates, then the\n"
		   "pairs on one object), random[:COUNT] or random:SEED/LEN; tier (with -m tier:\n"
		   "the [in tier] and [tier only] templates on the small tree)\n");
}

int ct_op_is_data(const struct fm_op *op)
{
	return op->kind == FM_WRITE || op->kind == FM_PWRITE || op->kind == FM_WRITEV ||
	       op->kind == FM_PWRITEV || op->kind == FM_FALLOCATE;
}
