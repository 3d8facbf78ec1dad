/*
 * fm_ops.c -- the op table, the generator, the executor and the per-op
 * comparator shared by the model and crash tests.
 *
 * The generator is stateless with respect to the file system: it draws every
 * op from a small fixed namespace (three directory names, four file names, two
 * link names, nesting up to three levels, with ".", "..", absolute and dangling
 * symlinks, and NAME_MAX-sized names) so that ops collide often and reach
 * error paths, and offsets/lengths that straddle 4 KiB, 32 KiB, 256 KiB, 2 MiB
 * and 16 MiB boundaries or land far past EOF. The same op is executed on both
 * backends; any difference in return value, errno, bytes, descriptor offset or
 * stat fields is a failure, because the kernel's answer is the POSIX/Linux
 * answer Ferrite promises to give. Checks that have more than one valid
 * answer (SEEK_DATA/SEEK_HOLE, readdir order, directory streams under
 * concurrent change) are checked against their rules on each side instead.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "fm.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#ifndef RENAME_NOREPLACE
#define RENAME_NOREPLACE (1u << 0)
#endif
#ifndef RENAME_EXCHANGE
#define RENAME_EXCHANGE (1u << 1)
#endif

#define KiB 1024LL
#define MiB (1024LL * 1024)

struct kind_info {
	const char *name;
	int mutates;
	unsigned w_model, w_kill;
};

static const struct kind_info kinds[FM_NKINDS] = {
    [FM_OPEN] = {"open", 1, 110, 120},
    [FM_CLOSE] = {"close", 1, 22, 50},
    [FM_DUP] = {"dup", 0, 12, 5},
    [FM_READ] = {"read", 0, 35, 0},
    [FM_WRITE] = {"write", 1, 45, 100},
    [FM_PREAD] = {"pread", 0, 35, 0},
    [FM_PWRITE] = {"pwrite", 1, 60, 90},
    [FM_READV] = {"readv", 0, 12, 0},
    [FM_WRITEV] = {"writev", 1, 15, 20},
    [FM_PREADV] = {"preadv", 0, 12, 0},
    [FM_PWRITEV] = {"pwritev", 1, 15, 20},
    [FM_LSEEK] = {"lseek", 0, 25, 10},
    [FM_LSEEK_DH] = {"lseek_data_hole", 0, 15, 0},
    [FM_FTRUNCATE] = {"ftruncate", 1, 25, 30},
    [FM_TRUNCATE] = {"truncate", 1, 20, 25},
    [FM_FALLOCATE] = {"fallocate", 1, 25, 35},
    [FM_FSYNC] = {"fsync", 0, 6, 4},
    [FM_FDATASYNC] = {"fdatasync", 0, 6, 2},
    [FM_STAT] = {"stat", 0, 25, 0},
    [FM_LSTAT] = {"lstat", 0, 20, 0},
    [FM_FSTAT] = {"fstat", 0, 20, 0},
    [FM_CHMOD] = {"chmod", 1, 12, 15},
    [FM_FCHMOD] = {"fchmod", 1, 6, 5},
    [FM_CHOWN] = {"chown", 1, 8, 8},
    [FM_LCHOWN] = {"lchown", 1, 5, 3},
    [FM_FCHOWN] = {"fchown", 1, 5, 3},
    [FM_UTIMENS] = {"utimens", 1, 12, 6},
    [FM_FUTIMENS] = {"futimens", 1, 6, 3},
    [FM_ACCESS] = {"access", 0, 12, 0},
    [FM_MKDIR] = {"mkdir", 1, 45, 40},
    [FM_RMDIR] = {"rmdir", 1, 25, 25},
    [FM_UNLINK] = {"unlink", 1, 35, 50},
    [FM_RENAME] = {"rename", 1, 55, 60},
    [FM_LINK] = {"link", 1, 25, 30},
    [FM_SYMLINK] = {"symlink", 1, 25, 25},
    [FM_READLINK] = {"readlink", 0, 12, 0},
    [FM_LISTDIR] = {"listdir", 0, 20, 0},
    [FM_DS_OPEN] = {"opendir_stream", 0, 5, 0},
    [FM_DS_READ] = {"readdir_stream", 0, 12, 0},
    [FM_DS_CLOSE] = {"closedir_stream", 0, 4, 0},
    [FM_SETXATTR] = {"setxattr", 1, 10, 0},
    [FM_REMOVEXATTR] = {"removexattr", 1, 5, 0},
};

const char *fm_kind_name(int kind)
{
	return kind >= 0 && kind < FM_NKINDS ? kinds[kind].name : "?";
}

int fm_kind_mutates(int kind)
{
	return kind >= 0 && kind < FM_NKINDS && kinds[kind].mutates;
}

/* ---- generator ------------------------------------------------------------ */

static const char *const dnames[] = {"d0", "d1", "d2"};
static const char *const fnames[] = {"f0", "f1", "f2", "f3"};
static const char *const lnames[] = {"s0", "s1"};

enum { P_DIR, P_FILE, P_LINK, P_ANY };

void fm_gen_init(struct fm_gen *g, uint64_t seed, int profile, const char *base, int dotdot)
{
	memset(g, 0, sizeof *g);
	g->rng.s = fm_mix(seed, 0x5eed);
	g->profile = profile;
	snprintf(g->base, sizeof g->base, "%s", base ? base : "");
	g->dotdot = dotdot;
	g->max_off = profile == FM_PROF_KILL ? 9 * MiB : 24 * MiB;
	for (int k = 0; k < FM_NKINDS; k++) {
		g->weights[k] = profile == FM_PROF_KILL ? kinds[k].w_kill : kinds[k].w_model;
		g->wsum += g->weights[k];
	}
}

static int pct(struct fm_gen *g, unsigned p)
{
	return fm_below(&g->rng, 1000) < p * 10;
}

static void append(char *out, const char *s)
{
	size_t n = strlen(out);
	snprintf(out + n, FM_PATH - n, "%s", s);
}

static void append_name(struct fm_gen *g, char *out, int pref, int final)
{
	struct fm_rng *r = &g->rng;
	if (final && g->profile == FM_PROF_MODEL) {
		uint64_t x = fm_below(r, 1000);
		if (x < 11) { /* NAME_MAX (255) and one too long (256) */
			char nm[300];
			size_t len = x < 8 ? 255 : 256;
			memset(nm, 'x', len);
			nm[0] = 'L';
			nm[len] = 0;
			append(out, nm);
			return;
		}
	}
	int dirs = g->profile == FM_PROF_KILL ? 2 : 3;
	int links = g->profile == FM_PROF_KILL ? 1 : 2;
	uint64_t x = fm_below(r, 100);
	if (pref == P_ANY)
		pref = x < 35 ? P_DIR : x < 80 ? P_FILE : P_LINK;
	else if (final ? x >= 75 : x >= 88)
		pref = x % 3 == 0 ? P_DIR : x % 3 == 1 ? P_FILE : P_LINK;
	if (pref == P_DIR)
		append(out, dnames[fm_below(r, (uint64_t)dirs)]);
	else if (pref == P_FILE)
		append(out, fnames[fm_below(r, 4)]);
	else
		append(out, lnames[fm_below(r, (uint64_t)links)]);
}

static void gen_path(struct fm_gen *g, char *out, int pref)
{
	struct fm_rng *r = &g->rng;
	int maxd = g->profile == FM_PROF_KILL ? 2 : 3;
	uint64_t x = fm_below(r, 100);
	int depth = x < 35 ? 1 : x < 75 ? 2 : 3;
	if (depth > maxd)
		depth = maxd;
	snprintf(out, FM_PATH, "%s", g->base);
	int relative = !g->base[0] && pct(g, 5);
	for (int i = 0; i < depth; i++) {
		if (!(i == 0 && relative))
			append(out, pct(g, 2) ? "//" : "/");
		if (g->profile == FM_PROF_MODEL && i > 0 && pct(g, 3)) {
			append(out, g->dotdot && pct(g, 50) ? "../" : "./");
		}
		append_name(g, out, i == depth - 1 ? pref : P_DIR, i == depth - 1);
	}
}

/* Root of the namespace ("/" or the thread's base directory). */
static void gen_root(struct fm_gen *g, char *out)
{
	snprintf(out, FM_PATH, "%s", g->base[0] ? g->base : "/");
}

static void gen_target(struct fm_gen *g, char *out, const char *linkpath)
{
	struct fm_rng *r = &g->rng;
	uint64_t x = fm_below(r, 100);
	out[0] = 0;
	if (x < 35) {
		append_name(g, out, P_ANY, 0);
	} else if (x < 55) {
		append_name(g, out, P_DIR, 0);
		append(out, "/");
		append_name(g, out, P_ANY, 0);
	} else if (x < 65 && g->dotdot) {
		append(out, "..");
		if (pct(g, 30))
			append(out, "/..");
		append(out, "/");
		append_name(g, out, P_ANY, 0);
	} else if (x < 82 && !g->no_abs) {
		gen_path(g, out, P_ANY); /* absolute */
		if (out[0] != '/') {
			char tmp[FM_PATH];
			snprintf(tmp, sizeof tmp, "/%s", out);
			snprintf(out, FM_PATH, "%s", tmp);
		}
	} else if (x < 86) {
		snprintf(out, FM_PATH, ".");
	} else if (x < 91) {
		const char *b = strrchr(linkpath, '/');
		snprintf(out, FM_PATH, "%s", b ? b + 1 : linkpath); /* itself: ELOOP */
	} else if (x < 96) {
		snprintf(out, FM_PATH, "nowhere/x");
	} else if (x < 99) {
		out[0] = 0;
		for (int i = 0; i < 100; i++)
			append(out, "x/");
		append(out, "end"); /* 303 bytes: past any inline symlink storage */
	} else {
		out[0] = 0; /* empty target */
	}
}

static int64_t gen_off(struct fm_gen *g)
{
	struct fm_rng *r = &g->rng;
	static const int64_t bnd[] = {4 * KiB, 32 * KiB, 256 * KiB};
	uint64_t x = fm_below(r, 1000);
	int64_t v;
	if (x < 450)
		v = fm_range(r, 0, 16 * KiB - 1);
	else if (x < 650)
		v = bnd[fm_below(r, 3)] + fm_range(r, -300, 300);
	else if (x < 770)
		v = fm_range(r, 0, 512 * KiB);
	else if (x < 850)
		v = 2 * MiB + fm_range(r, -4096, 4096);
	else if (x < 940)
		v = fm_range(r, 0, 64 * KiB);
	else if (x < 990)
		v = 1 * MiB + fm_range(r, 0, 3 * MiB);
	else
		v = 16 * MiB + fm_range(r, -8192, 8192);
	if (v < 0)
		v = 0;
	if (v > g->max_off)
		v = g->max_off;
	return v;
}

static int64_t gen_len(struct fm_gen *g, int big)
{
	struct fm_rng *r = &g->rng;
	uint64_t x = fm_below(r, 1000);
	if (big) /* kill profile: more large copies */
		x = x < 300 ? x : 300 + fm_below(r, 700);
	if (x < 400)
		return fm_range(r, 1, 512);
	if (x < 650)
		return fm_range(r, 512, 16 * KiB);
	if (x < 800)
		return 4 * KiB * fm_range(r, 1, 16);
	if (x < 920)
		return fm_range(r, 16 * KiB, 300 * KiB);
	if (x < 975)
		return fm_range(r, 300 * KiB, 2200 * KiB);
	if (x < 990)
		return 0;
	return fm_range(r, 2 * MiB, 4608 * KiB);
}

static void clamp_range(struct fm_gen *g, struct fm_op *op)
{
	if (g->max_write && op->len > g->max_write && fm_is_write(op))
		op->len = g->max_write;
	if (op->off > g->max_off)
		op->off = g->max_off;
	if (op->off >= 0 && op->len > 0 && op->off + op->len > g->max_off)
		op->len = g->max_off - op->off;
}

static int gen_open_flags(struct fm_gen *g)
{
	struct fm_rng *r = &g->rng;
	int fl;
	if (g->profile == FM_PROF_KILL) {
		fl = pct(g, 30) ? O_WRONLY : O_RDWR;
		if (pct(g, 85))
			fl |= O_CREAT;
		if (pct(g, 40))
			fl |= O_APPEND;
		if (pct(g, 10))
			fl |= O_TRUNC;
		if (pct(g, 10))
			fl |= O_EXCL;
		return fl;
	}
	uint64_t a = fm_below(r, 100);
	fl = a < 25 ? O_RDONLY : a < 50 ? O_WRONLY : O_RDWR;
	if (pct(g, 4))
		return O_RDONLY | O_DIRECTORY;
	if (pct(g, 10)) {
		/* every combination of the six flags is reachable */
		static const int six[] = {O_CREAT,  O_EXCL,	 O_TRUNC,
					  O_APPEND, O_DIRECTORY, O_NOFOLLOW};
		uint64_t m = fm_below(r, 64);
		for (int i = 0; i < 6; i++)
			if (m & (1u << i))
				fl |= six[i];
		return fl;
	}
	if (pct(g, 55))
		fl |= O_CREAT;
	if (pct(g, 12))
		fl |= O_EXCL;
	if (pct(g, 15))
		fl |= O_TRUNC;
	if (pct(g, 20))
		fl |= O_APPEND;
	if (pct(g, 6))
		fl |= O_DIRECTORY;
	if (pct(g, 8))
		fl |= O_NOFOLLOW;
	if (pct(g, 10))
		fl |= O_CLOEXEC;
	return fl;
}

static mode_t gen_mode(struct fm_gen *g, int dir)
{
	uint64_t x = fm_below(&g->rng, 100);
	if (x < 60)
		return dir ? 0755 : 0644;
	if (x < 80)
		return dir ? 0700 : 0600;
	return (mode_t)fm_below(&g->rng, 01000);
}

static void gen_ts(struct fm_gen *g, struct fm_op *op)
{
	op->ts_null = pct(g, 8);
	for (int i = 0; i < 2; i++) {
		uint64_t x = fm_below(&g->rng, 100);
		if (x < 15)
			op->ts[i].tv_nsec = UTIME_OMIT;
		else if (x < 25)
			op->ts[i].tv_nsec = UTIME_NOW;
		else if (x < 27)
			op->ts[i].tv_nsec = 1000000000; /* invalid: EINVAL */
		else {
			op->ts[i].tv_sec = (time_t)fm_range(&g->rng, 0, 4000000000LL);
			op->ts[i].tv_nsec = (long)fm_below(&g->rng, 1000000000);
		}
	}
	/* Linux returns 0 for {OMIT, OMIT} without even resolving the path; not
	 * a behaviour worth demanding. */
	if (op->ts[0].tv_nsec == UTIME_OMIT && op->ts[1].tv_nsec == UTIME_OMIT)
		op->ts[1].tv_nsec = UTIME_NOW;
}

static uint32_t gen_uid(struct fm_gen *g)
{
	static const uint32_t u[] = {(uint32_t)-1, 0, 1000, 1001, 65534};
	return u[fm_below(&g->rng, 5)];
}

static uint32_t gen_gid(struct fm_gen *g)
{
	static const uint32_t v[] = {(uint32_t)-1, 0, 100, 1000, 65534};
	return v[fm_below(&g->rng, 5)];
}

void fm_gen_next(struct fm_gen *g, struct fm_op *op)
{
	struct fm_rng *r = &g->rng;
	memset(op, 0, sizeof *op);
	uint64_t x = fm_below(r, g->wsum);
	int k = 0;
	while (x >= g->weights[k]) {
		x -= g->weights[k];
		k++;
	}
	op->kind = k;
	op->slot = (int)fm_below(r, FM_NSLOT);
	op->slot2 = (op->slot + 1 + (int)fm_below(r, FM_NSLOT - 1)) % FM_NSLOT;
	op->dseed = fm_rand(r);
	op->niov = 1 + (int)fm_below(r, 8);
	op->exact = pct(g, 8);
	op->cap = g->max_off + 8 * MiB;
	int kill = g->profile == FM_PROF_KILL;
	switch (k) {
	case FM_OPEN:
		op->flags = gen_open_flags(g);
		if (g->no_creat_dir && (op->flags & O_CREAT))
			op->flags &= ~O_DIRECTORY;
		if ((op->flags & O_DIRECTORY) && pct(g, 70))
			gen_path(g, op->p1, P_DIR);
		else if (!kill && pct(g, 3))
			gen_root(g, op->p1);
		else
			gen_path(g, op->p1, pct(g, 85) ? P_FILE : P_ANY);
		op->mode = gen_mode(g, 0);
		break;
	case FM_READ:
	case FM_READV:
		op->len = gen_len(g, 0);
		break;
	case FM_PREAD:
	case FM_PREADV:
		op->off = pct(g, 1) ? -1 : gen_off(g);
		op->len = gen_len(g, 0);
		break;
	case FM_WRITE:
	case FM_WRITEV:
		op->len = gen_len(g, kill);
		clamp_range(g, op);
		break;
	case FM_PWRITE:
	case FM_PWRITEV:
		op->off = pct(g, 1) ? -1 : gen_off(g);
		op->len = gen_len(g, kill);
		clamp_range(g, op);
		break;
	case FM_LSEEK: {
		uint64_t w = fm_below(r, 100);
		op->flags = w < 40 ? SEEK_SET : w < 70 ? SEEK_CUR : SEEK_END;
		if (op->flags == SEEK_SET)
			op->off = pct(g, 5) ? -fm_range(r, 1, 100) : gen_off(g);
		else
			op->off = fm_range(r, -5000, 5000);
		break;
	}
	case FM_LSEEK_DH:
		op->flags = pct(g, 50) ? SEEK_DATA : SEEK_HOLE;
		op->off = pct(g, 20) ? fm_range(r, 0, 8192) : gen_off(g);
		break;
	case FM_FTRUNCATE:
	case FM_TRUNCATE:
		op->len = pct(g, 2) ? -1 : (pct(g, 20) ? 0 : gen_off(g));
		if (k == FM_TRUNCATE)
			gen_path(g, op->p1, P_FILE);
		break;
	case FM_FALLOCATE: {
		uint64_t m = fm_below(r, 100);
		op->flags = m < 40   ? 0
			    : m < 65 ? FALLOC_FL_KEEP_SIZE
				     : FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE;
		op->off = pct(g, 1) ? -1 : gen_off(g);
		op->len = pct(g, 2) ? 0 : gen_len(g, 0);
		clamp_range(g, op);
		if (op->len == 0 && op->off >= 0 && !pct(g, 30))
			op->len = 1;
		break;
	}
	case FM_SETXATTR:
	case FM_REMOVEXATTR: {
		/* Ferrite keeps user.* and trusted.* (documented); "user." alone
		 * is invalid on Linux. */
		static const char *const names[] = {
		    "user.a",	 "user.b",    "user.long_attribute_name",
		    "trusted.t", "trusted.u", "user."};
		gen_path(g, op->p1, P_ANY);
		uint64_t w = fm_below(r, 100);
		snprintf(op->p2, FM_PATH, "%s",
			 names[w < 40	? 0
			       : w < 70 ? 1
			       : w < 85 ? 2
			       : w < 93 ? 3
			       : w < 98 ? 4
					: 5]);
		w = fm_below(r, 100);
		op->len = w < 10   ? 0
			  : w < 80 ? fm_range(r, 1, 200)
			  : w < 97 ? fm_range(r, 200, 5000)
				   : 70000;
		w = fm_below(r, 100);
		op->flags = w < 70 ? 0 : w < 85 ? 1 /* XATTR_CREATE */ : 2 /* XATTR_REPLACE */;
		break;
	}
	case FM_STAT:
	case FM_LSTAT:
	case FM_ACCESS:
	case FM_CHMOD:
	case FM_CHOWN:
	case FM_LCHOWN:
	case FM_UTIMENS:
		if (!kill && pct(g, 3))
			gen_root(g, op->p1);
		else
			gen_path(g, op->p1, P_ANY);
		op->mode = pct(g, 50) ? (mode_t)fm_below(r, 01000)
				      : (mode_t[]){0644, 0755, 0, 0777, 0600}[fm_below(r, 5)];
		op->uid = gen_uid(g);
		op->gid = gen_gid(g);
		op->flags = (int)fm_below(r, 8); /* access: F_OK or R/W/X bits */
		if (k == FM_UTIMENS) {
			gen_ts(g, op);
			op->flags = pct(g, 30) ? AT_SYMLINK_NOFOLLOW : 0;
		}
		break;
	case FM_FCHMOD:
	case FM_FCHOWN:
	case FM_FUTIMENS:
		op->mode = (mode_t)fm_below(r, 01000);
		op->uid = gen_uid(g);
		op->gid = gen_gid(g);
		gen_ts(g, op);
		break;
	case FM_MKDIR:
		gen_path(g, op->p1, P_DIR);
		op->mode = gen_mode(g, 1);
		break;
	case FM_RMDIR:
		gen_path(g, op->p1, P_DIR);
		break;
	case FM_UNLINK:
		gen_path(g, op->p1, pct(g, 70) ? P_FILE : P_ANY);
		break;
	case FM_RENAME: {
		gen_path(g, op->p1, P_ANY);
		uint64_t w = fm_below(r, 100);
		if (w < 12) { /* into its own subtree: EINVAL */
			snprintf(op->p2, FM_PATH, "%s", op->p1);
			append(op->p2, "/");
			append_name(g, op->p2, P_ANY, 0);
		} else if (w < 16) {
			snprintf(op->p2, FM_PATH, "%s", op->p1);
		} else if (w < 21) { /* onto an ancestor */
			snprintf(op->p2, FM_PATH, "%s", op->p1);
			char *s = strrchr(op->p2, '/');
			if (s)
				*s = 0;
			for (size_t l = strlen(op->p2); l > 0 && op->p2[l - 1] == '/'; l--)
				op->p2[l - 1] = 0; /* no trailing slashes */
			const char *last = strrchr(op->p2, '/');
			last = last ? last + 1 : op->p2;
			if (!op->p2[0] || !strcmp(op->p2, g->base) || !strcmp(last, ".") ||
			    !strcmp(last, ".."))
				gen_path(g, op->p2, P_ANY);
		} else {
			gen_path(g, op->p2, P_ANY);
		}
		uint64_t f = fm_below(r, 100);
		op->flags = f < 68   ? 0
			    : f < 82 ? (int)RENAME_NOREPLACE
			    : f < 98 ? (int)RENAME_EXCHANGE
				     : (int)(RENAME_NOREPLACE | RENAME_EXCHANGE);
		break;
	}
	case FM_LINK:
		gen_path(g, op->p1, pct(g, 80) ? P_FILE : P_ANY);
		gen_path(g, op->p2, P_ANY);
		break;
	case FM_SYMLINK:
		gen_path(g, op->p2, pct(g, 70) ? P_LINK : P_ANY);
		gen_target(g, op->p1, op->p2);
		break;
	case FM_READLINK: {
		gen_path(g, op->p1, pct(g, 80) ? P_LINK : P_ANY);
		uint64_t w = fm_below(r, 100);
		op->len = w < 70 ? 4096 : w < 90 ? fm_range(r, 1, 40) : w < 95 ? 0 : 1;
		break;
	}
	case FM_LISTDIR:
	case FM_DS_OPEN:
		if (pct(g, 10))
			gen_root(g, op->p1);
		else
			gen_path(g, op->p1, pct(g, 85) ? P_DIR : P_ANY);
		op->slot = (int)fm_below(r, FM_NDS);
		break;
	case FM_DS_READ:
		op->slot = (int)fm_below(r, FM_NDS);
		op->len = fm_range(r, 1, 6);
		op->flags = pct(g, 8); /* rewind first */
		break;
	case FM_DS_CLOSE:
		op->slot = (int)fm_below(r, FM_NDS);
		break;
	default:
		break;
	}
}

/* ---- printing ------------------------------------------------------------- */

static const char *whence_name(int w)
{
	switch (w) {
	case SEEK_SET:
		return "SET";
	case SEEK_CUR:
		return "CUR";
	case SEEK_END:
		return "END";
	case SEEK_DATA:
		return "DATA";
	case SEEK_HOLE:
		return "HOLE";
	}
	return "?";
}

static void oflags_str(int fl, char *out, size_t n)
{
	int acc = fl & O_ACCMODE;
	snprintf(out, n, "%s%s%s%s%s%s%s%s",
		 acc == O_RDONLY   ? "O_RDONLY"
		 : acc == O_WRONLY ? "O_WRONLY"
				   : "O_RDWR",
		 fl & O_CREAT ? "|O_CREAT" : "", fl & O_EXCL ? "|O_EXCL" : "",
		 fl & O_TRUNC ? "|O_TRUNC" : "", fl & O_APPEND ? "|O_APPEND" : "",
		 fl & O_DIRECTORY ? "|O_DIRECTORY" : "", fl & O_NOFOLLOW ? "|O_NOFOLLOW" : "",
		 fl & O_CLOEXEC ? "|O_CLOEXEC" : "");
}

static void ts_str(const struct fm_op *op, char *out, size_t n)
{
	if (op->ts_null) {
		snprintf(out, n, "NULL");
		return;
	}
	char a[2][48];
	for (int i = 0; i < 2; i++) {
		if (op->ts[i].tv_nsec == UTIME_OMIT)
			snprintf(a[i], sizeof a[i], "OMIT");
		else if (op->ts[i].tv_nsec == UTIME_NOW)
			snprintf(a[i], sizeof a[i], "NOW");
		else
			snprintf(a[i], sizeof a[i], "%lld.%09ld", (long long)op->ts[i].tv_sec,
				 op->ts[i].tv_nsec);
	}
	snprintf(out, n, "[atime=%s mtime=%s]", a[0], a[1]);
}

static const char *short_path(const char *p, char *buf, size_t n)
{
	size_t len = strlen(p);
	if (len <= 120)
		return p;
	snprintf(buf, n, "%.40s...<%zu bytes>...%.40s", p, len, p + len - 40);
	return buf;
}

void fm_op_str(const struct fm_op *op, char *out, size_t n)
{
	char fl[128], ts[128], b1[160], b2[160];
	const char *p1 = short_path(op->p1, b1, sizeof b1);
	const char *p2 = short_path(op->p2, b2, sizeof b2);
	const char *nm = fm_kind_name(op->kind);
	switch (op->kind) {
	case FM_OPEN:
		oflags_str(op->flags, fl, sizeof fl);
		snprintf(out, n, "open(\"%s\", %s, 0%o) -> slot %d", p1, fl, op->mode, op->slot);
		break;
	case FM_CLOSE:
	case FM_FSYNC:
	case FM_FDATASYNC:
	case FM_FSTAT:
		snprintf(out, n, "%s(slot %d)", nm, op->slot);
		break;
	case FM_DUP:
		snprintf(out, n, "dup(slot %d) -> slot %d", op->slot, op->slot2);
		break;
	case FM_READ:
	case FM_WRITE:
		snprintf(out, n, "%s(slot %d, len %lld, data %llx)", nm, op->slot,
			 (long long)op->len, (unsigned long long)op->dseed);
		break;
	case FM_READV:
	case FM_WRITEV:
		snprintf(out, n, "%s(slot %d, len %lld in %d iovecs, data %llx)", nm, op->slot,
			 (long long)op->len, op->niov, (unsigned long long)op->dseed);
		break;
	case FM_PREAD:
	case FM_PWRITE:
		snprintf(out, n, "%s(slot %d, len %lld, off %lld, data %llx)", nm, op->slot,
			 (long long)op->len, (long long)op->off, (unsigned long long)op->dseed);
		break;
	case FM_PREADV:
	case FM_PWRITEV:
		snprintf(out, n, "%s(slot %d, len %lld in %d iovecs, off %lld, data %llx)", nm,
			 op->slot, (long long)op->len, op->niov, (long long)op->off,
			 (unsigned long long)op->dseed);
		break;
	case FM_LSEEK:
	case FM_LSEEK_DH:
		snprintf(out, n, "lseek(slot %d, %lld, SEEK_%s)", op->slot, (long long)op->off,
			 whence_name(op->flags));
		break;
	case FM_FTRUNCATE:
		snprintf(out, n, "ftruncate(slot %d, %lld)", op->slot, (long long)op->len);
		break;
	case FM_TRUNCATE:
		snprintf(out, n, "truncate(\"%s\", %lld)", p1, (long long)op->len);
		break;
	case FM_FALLOCATE:
		snprintf(out, n, "fallocate(slot %d, %s, off %lld, len %lld)", op->slot,
			 op->flags == 0			    ? "0"
			 : op->flags == FALLOC_FL_KEEP_SIZE ? "KEEP_SIZE"
							    : "PUNCH_HOLE|KEEP_SIZE",
			 (long long)op->off, (long long)op->len);
		break;
	case FM_STAT:
	case FM_LSTAT:
	case FM_RMDIR:
	case FM_UNLINK:
	case FM_LISTDIR:
		snprintf(out, n, "%s(\"%s\")", nm, p1);
		break;
	case FM_CHMOD:
	case FM_MKDIR:
		snprintf(out, n, "%s(\"%s\", 0%o)", nm, p1, op->mode);
		break;
	case FM_SETXATTR:
		snprintf(out, n, "setxattr(\"%s\", \"%s\", len %lld, data %llx, flags %d)", p1,
			 op->p2, (long long)op->len, (unsigned long long)op->dseed, op->flags);
		break;
	case FM_REMOVEXATTR:
		snprintf(out, n, "removexattr(\"%s\", \"%s\")", p1, op->p2);
		break;
	case FM_FCHMOD:
		snprintf(out, n, "fchmod(slot %d, 0%o)", op->slot, op->mode);
		break;
	case FM_CHOWN:
	case FM_LCHOWN:
		snprintf(out, n, "%s(\"%s\", %d, %d)", nm, p1, (int)op->uid, (int)op->gid);
		break;
	case FM_FCHOWN:
		snprintf(out, n, "fchown(slot %d, %d, %d)", op->slot, (int)op->uid, (int)op->gid);
		break;
	case FM_UTIMENS:
		ts_str(op, ts, sizeof ts);
		snprintf(out, n, "utimens(\"%s\", %s, %s)", p1, ts,
			 op->flags ? "AT_SYMLINK_NOFOLLOW" : "0");
		break;
	case FM_FUTIMENS:
		ts_str(op, ts, sizeof ts);
		snprintf(out, n, "futimens(slot %d, %s)", op->slot, ts);
		break;
	case FM_ACCESS:
		snprintf(out, n, "access(\"%s\", %s%s%s%s)", p1, op->flags ? "" : "F_OK",
			 op->flags & R_OK ? "R" : "", op->flags & W_OK ? "W" : "",
			 op->flags & X_OK ? "X" : "");
		break;
	case FM_RENAME:
		snprintf(out, n, "rename(\"%s\", \"%s\", %s)", p1, p2,
			 op->flags == 0			      ? "0"
			 : op->flags == (int)RENAME_NOREPLACE ? "RENAME_NOREPLACE"
			 : op->flags == (int)RENAME_EXCHANGE  ? "RENAME_EXCHANGE"
							      : "RENAME_NOREPLACE|RENAME_EXCHANGE");
		break;
	case FM_LINK:
		snprintf(out, n, "link(\"%s\", \"%s\")", p1, p2);
		break;
	case FM_SYMLINK:
		snprintf(out, n, "symlink(\"%s\", \"%s\")", p1, p2);
		break;
	case FM_READLINK:
		snprintf(out, n, "readlink(\"%s\", bufsize %lld)", p1, (long long)op->len);
		break;
	case FM_DS_OPEN:
		snprintf(out, n, "opendir(\"%s\") -> stream %d", p1, op->slot);
		break;
	case FM_DS_READ:
		snprintf(out, n, "%sreaddir(stream %d) x%lld", op->flags ? "rewinddir+" : "",
			 op->slot, (long long)op->len);
		break;
	case FM_DS_CLOSE:
		snprintf(out, n, "closedir(stream %d)", op->slot);
		break;
	default:
		snprintf(out, n, "%s", nm);
	}
}

void fm_res_str(const struct fm_op *op, const struct fm_res *r, char *out, size_t n)
{
	size_t u = 0;
#define P(...)                                                                                     \
	do {                                                                                       \
		if (u < n) {                                                                       \
			int k_ = snprintf(out + u, n - u, __VA_ARGS__);                            \
			if (k_ > 0)                                                                \
				u += (size_t)k_;                                                   \
		}                                                                                  \
	} while (0)
	P("ret=%s", fm_errname(r->ret));
	if (r->slot != op->slot)
		P(" (slot %d)", r->slot);
	if (op->kind == FM_LSEEK_DH)
		P(" (raw %s)", fm_errname(r->aux));
	else if (r->aux && (op->kind == FM_WRITE || op->kind == FM_WRITEV))
		P(" (skipped: file would pass %lld bytes)", (long long)op->cap);
	else if (r->aux)
		P(" implicit-close=%s", fm_errname(r->aux));
	if (r->has_off)
		P(" offset=%lld", (long long)r->off);
	if (r->has_st) {
		if (r->st_ret < 0)
			P(" stat=%s", fm_errname(r->st_ret));
		else
			P(" stat{mode=0%o nlink=%lu uid=%u gid=%u size=%lld}", r->st.st_mode,
			  (unsigned long)r->st.st_nlink, r->st.st_uid, r->st.st_gid,
			  (long long)r->st.st_size);
	}
	if (r->has_st2) {
		if (r->st2_ret < 0)
			P(" stat2=%s", fm_errname(r->st2_ret));
		else
			P(" stat2{mode=0%o nlink=%lu uid=%u gid=%u size=%lld}", r->st2.st_mode,
			  (unsigned long)r->st2.st_nlink, r->st2.st_uid, r->st2.st_gid,
			  (long long)r->st2.st_size);
	}
	if (op->kind == FM_READLINK && r->ret > 0)
		P(" target=\"%.*s\"", (int)(r->blen > 100 ? 100 : r->blen), (const char *)r->buf);
	if (op->kind == FM_LISTDIR && r->ret == 0) {
		P(" [");
		for (int i = 0; i < r->nents && i < 40; i++)
			P("%s%.20s", i ? " " : "", r->ents[i].name);
		P("]");
	}
	if (r->err[0])
		P(" errmsg=\"%s\"", r->err);
	if (r->bad)
		P(" CHECK FAILED: %s", r->note);
#undef P
}

/* ---- executor --------------------------------------------------------------- */

void fm_side_init(struct fm_side *s, struct fm_backend *be)
{
	memset(s, 0, sizeof *s);
	s->be = be;
	for (int i = 0; i < FM_NSLOT; i++)
		s->fd[i] = -1;
}

static void ds_free(struct fm_ds *d)
{
	free(d->ret);
	free(d->stable);
	free(d->seen);
	memset(d, 0, sizeof *d);
}

void fm_side_close_all(struct fm_side *s)
{
	for (int i = 0; i < FM_NSLOT; i++) {
		if (s->fd[i] >= 0)
			s->be->close(s->be->ctx, s->fd[i]);
		s->fd[i] = -1;
	}
	for (int i = 0; i < FM_NDS; i++) {
		if (s->ds[i].h)
			s->be->dclose(s->ds[i].h);
		ds_free(&s->ds[i]);
	}
}

void fm_res_free(struct fm_res *r)
{
	free(r->buf);
	free(r->ents);
	memset(r, 0, sizeof *r);
}

static void bad(struct fm_res *res, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void bad(struct fm_res *res, const char *fmt, ...)
{
	if (res->bad)
		return;
	res->bad = 1;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(res->note, sizeof res->note, fmt, ap);
	va_end(ap);
}

/* 0: no descriptor; 1: any; 2: prefers a writable file; 3: a readable file */
static int uses_fd(int kind)
{
	switch (kind) {
	case FM_WRITE:
	case FM_PWRITE:
	case FM_WRITEV:
	case FM_PWRITEV:
	case FM_FTRUNCATE:
	case FM_FALLOCATE:
		return 2;
	case FM_READ:
	case FM_PREAD:
	case FM_READV:
	case FM_PREADV:
	case FM_LSEEK_DH:
		return 3;
	case FM_CLOSE:
	case FM_DUP:
	case FM_LSEEK:
	case FM_FSYNC:
	case FM_FDATASYNC:
	case FM_FSTAT:
	case FM_FCHMOD:
	case FM_FCHOWN:
	case FM_FUTIMENS:
		return 1;
	}
	return 0;
}

static int slot_fits(const struct fm_side *s, int slot, int want)
{
	if (s->fd[slot] < 0)
		return 0;
	int acc = s->fdflags[slot] & O_ACCMODE;
	if (want == 2)
		return s->fdtype[slot] == S_IFREG && acc != O_RDONLY;
	if (want == 3)
		return s->fdtype[slot] == S_IFREG && acc != O_WRONLY;
	return 1;
}

/* Descriptor ops go to the next suitable open slot unless op->exact: the
 * choice depends only on which opens succeeded, which both sides agree on. */
int fm_pick_slot(const struct fm_side *s, const struct fm_op *op)
{
	int slot = op->slot;
	int want = uses_fd(op->kind);
	if (want && !op->exact && !slot_fits(s, slot, want)) {
		int k;
		for (k = 1; k < FM_NSLOT; k++)
			if (slot_fits(s, (slot + k) % FM_NSLOT, want))
				break;
		if (k == FM_NSLOT && s->fd[slot] < 0)
			for (k = 1; k < FM_NSLOT; k++)
				if (s->fd[(slot + k) % FM_NSLOT] >= 0)
					break;
		if (k < FM_NSLOT)
			slot = (slot + k) % FM_NSLOT;
	}
	return slot;
}

static int slotfd(const struct fm_side *s, int slot)
{
	return s->fd[slot] >= 0 ? s->fd[slot] : FM_BAD_FD + slot;
}

static int make_iov(uint64_t seed, int niov, uint8_t *buf, size_t len, struct iovec *iov)
{
	struct fm_rng r = {seed ^ 0x10};
	size_t cut[10];
	if (niov < 1)
		niov = 1;
	if (niov > 8)
		niov = 8;
	cut[0] = 0;
	for (int i = 1; i < niov; i++)
		cut[i] = fm_below(&r, len + 1);
	cut[niov] = len;
	for (int i = 1; i < niov; i++) /* insertion sort */
		for (int j = i; j > 1 && cut[j] < cut[j - 1]; j--) {
			size_t t = cut[j];
			cut[j] = cut[j - 1];
			cut[j - 1] = t;
		}
	for (int i = 0; i < niov; i++) {
		iov[i].iov_base = buf + cut[i];
		iov[i].iov_len = cut[i + 1] - cut[i];
	}
	return niov;
}

/* Reads [off, end) through fd and reports whether it is all zeros. */
static int range_is_zero(struct fm_side *s, int fd, int64_t off, int64_t end, int64_t *where)
{
	const size_t chunk = 1 << 20;
	uint8_t *buf = malloc(chunk); /* per call: worker threads come and go */
	int zero = 1;
	while (buf && off < end) {
		size_t n = (size_t)(end - off) < chunk ? (size_t)(end - off) : chunk;
		ssize_t r = s->be->pread(s->be->ctx, fd, buf, n, off);
		if (r <= 0) {
			*where = off;
			zero = r == 0;
			break;
		}
		for (ssize_t i = 0; i < r && zero; i++)
			if (buf[i]) {
				*where = off + i;
				zero = 0;
			}
		if (!zero)
			break;
		off += r;
	}
	free(buf);
	return zero;
}

static void after_fd(struct fm_side *s, int slot, struct fm_res *res)
{
	if (s->fd[slot] < 0)
		return;
	struct fm_backend *be = s->be;
	res->has_st = 1;
	res->st_ret = be->fstat(be->ctx, s->fd[slot], &res->st);
	if (s->fdtype[slot] == S_IFREG) {
		res->has_off = 1;
		res->off = be->lseek(be->ctx, s->fd[slot], 0, SEEK_CUR);
	}
}

static void after_path(struct fm_side *s, const char *p, int follow, struct fm_res *res, int second)
{
	struct fm_backend *be = s->be;
	if (second) {
		res->has_st2 = 1;
		res->st2_ret =
		    follow ? be->stat(be->ctx, p, &res->st2) : be->lstat(be->ctx, p, &res->st2);
	} else {
		res->has_st = 1;
		res->st_ret =
		    follow ? be->stat(be->ctx, p, &res->st) : be->lstat(be->ctx, p, &res->st);
	}
}

static int dent_cmp(const void *a, const void *b)
{
	return strcmp(((const struct fm_dent *)a)->name, ((const struct fm_dent *)b)->name);
}

static int is_dot(const char *n)
{
	return !strcmp(n, ".") || !strcmp(n, "..");
}

/* Reads a stream to its end. Returns count or -errno. */
static int read_all(struct fm_backend *be, void *h, struct fm_dent **out, int64_t **cookies)
{
	int n = 0, cap = 0;
	*out = NULL;
	if (cookies)
		*cookies = NULL;
	for (;;) {
		struct fm_dent e;
		memset(&e, 0, sizeof e);
		int r = be->dread(h, &e);
		if (r < 0) {
			free(*out);
			*out = NULL;
			if (cookies) {
				free(*cookies);
				*cookies = NULL;
			}
			return r;
		}
		if (r == 0)
			return n;
		if (n == cap) {
			cap = cap ? cap * 2 : 16;
			*out = realloc(*out, (size_t)cap * sizeof **out);
			if (cookies)
				*cookies = realloc(*cookies, (size_t)cap * sizeof **cookies);
		}
		(*out)[n] = e;
		if (cookies)
			(*cookies)[n] = be->dtell(h);
		n++;
	}
}

static void exec_listdir(struct fm_side *s, const struct fm_op *op, struct fm_res *res)
{
	struct fm_backend *be = s->be;
	void *h = NULL;
	int r = be->dopen(be->ctx, op->p1, &h);
	res->ret = r;
	if (r < 0)
		return;
	struct fm_dent *e1 = NULL, *e2 = NULL, *e3 = NULL;
	int64_t *ck = NULL;
	int n1 = read_all(be, h, &e1, &ck);
	if (n1 < 0) {
		res->ret = n1;
		be->dclose(h);
		return;
	}
	/* contract: "." and ".." first; cookies agree with telldir */
	if (n1 < 2 || !is_dot(e1[0].name) || !is_dot(e1[1].name) || !strcmp(e1[0].name, e1[1].name))
		bad(res,
		    "\".\" and \"..\" are not the first two entries (%d entries, first \"%s\")", n1,
		    n1 ? e1[0].name : "");
	for (int i = 0; i < n1; i++) {
		if (ck[i] != e1[i].off) {
			bad(res, "telldir after entry %d (\"%s\") = %lld but its d_off = %lld", i,
			    e1[i].name, (long long)ck[i], (long long)e1[i].off);
			break;
		}
		for (int j = i + 1; j < n1; j++)
			if (!strcmp(e1[i].name, e1[j].name))
				bad(res, "entry \"%s\" returned twice", e1[i].name);
	}
	/* seekdir to the cookie after entry i gives the entries after i */
	if (n1 > 0) {
		int i = (int)(op->dseed % (uint64_t)n1);
		int rs = be->dseek(h, ck[i]);
		int n2 = rs < 0 ? rs : read_all(be, h, &e2, NULL);
		if (n2 < 0)
			bad(res,
			    "seekdir(%lld = d_off of entry %d of %d, \"%s\") = %s, then readdir = "
			    "%s",
			    (long long)ck[i], i, n1, e1[i].name, fm_errname(rs),
			    rs < 0 ? "not tried" : fm_errname(n2));
		else if (n2 != n1 - i - 1)
			bad(res,
			    "seekdir(cookie after entry %d of %d) then readdir gave %d entries, "
			    "want %d",
			    i, n1, n2, n1 - i - 1);
		else
			for (int j = 0; j < n2; j++)
				if (strcmp(e2[j].name, e1[i + 1 + j].name)) {
					bad(res, "after seekdir, entry %d is \"%s\", want \"%s\"",
					    j, e2[j].name, e1[i + 1 + j].name);
					break;
				}
	}
	int rr = be->drewind(h);
	int n3 = rr < 0 ? rr : read_all(be, h, &e3, NULL);
	if (n3 != n1)
		bad(res, "after rewinddir %d entries, first pass %d", n3, n1);
	else
		for (int j = 0; j < n3; j++)
			if (strcmp(e3[j].name, e1[j].name)) {
				bad(res, "after rewinddir entry %d is \"%s\", first pass \"%s\"", j,
				    e3[j].name, e1[j].name);
				break;
			}
	int rc = be->dclose(h);
	if (rc < 0)
		bad(res, "closedir = %s", fm_errname(rc));
	/* keep the entries without the dots, sorted */
	res->ents = malloc(sizeof *res->ents * (size_t)(n1 ? n1 : 1));
	for (int i = 0; i < n1; i++)
		if (!is_dot(e1[i].name))
			res->ents[res->nents++] = e1[i];
	qsort(res->ents, (size_t)res->nents, sizeof *res->ents, dent_cmp);
	free(e1);
	free(e2);
	free(e3);
	free(ck);
}

/* Reference side: refresh the stable/seen sets of every open stream. */
static void ds_track(struct fm_side *s, int slot, int init)
{
	struct fm_ds *d = &s->ds[slot];
	struct fm_dent *snap = NULL;
	int n = 0;
	int r = s->be->dsnap(d->h, &snap, &n);
	if (r < 0) {
		n = 0; /* directory gone: nothing is stable any more */
		d->dead = 1;
	}
	if (init) {
		free(d->stable);
		d->stable = malloc(sizeof *snap * (size_t)(n ? n : 1));
		if (n)
			memcpy(d->stable, snap, sizeof *snap * (size_t)n);
		d->nstable = n;
	} else {
		int k = 0;
		for (int i = 0; i < d->nstable; i++) {
			int keep = 0;
			for (int j = 0; j < n; j++)
				if (snap[j].ino == d->stable[i].ino &&
				    !strcmp(snap[j].name, d->stable[i].name)) {
					keep = 1;
					break;
				}
			if (keep)
				d->stable[k++] = d->stable[i];
		}
		d->nstable = k;
	}
	for (int j = 0; j < n; j++) {
		int found = 0;
		for (int i = 0; i < d->nseen && !found; i++)
			found = !strcmp(d->seen[i].name, snap[j].name);
		if (found)
			continue;
		if (d->nseen == d->capseen) {
			d->capseen = d->capseen ? d->capseen * 2 : 16;
			d->seen = realloc(d->seen, sizeof *d->seen * (size_t)d->capseen);
		}
		d->seen[d->nseen++] = snap[j];
	}
	free(snap);
}

static void exec_ds(struct fm_side *s, const struct fm_op *op, struct fm_res *res)
{
	struct fm_backend *be = s->be;
	struct fm_ds *d = &s->ds[op->slot];
	if (op->kind == FM_DS_OPEN) {
		if (d->h)
			res->aux = be->dclose(d->h);
		ds_free(d);
		void *h = NULL;
		res->ret = be->dopen(be->ctx, op->p1, &h);
		if (res->ret >= 0) {
			d->h = h;
			if (be->dsnap)
				ds_track(s, op->slot, 1);
		}
		return;
	}
	if (op->kind == FM_DS_CLOSE) {
		res->ret = d->h ? be->dclose(d->h) : 0;
		ds_free(d);
		return;
	}
	/* FM_DS_READ */
	if (!d->h) {
		res->ret = 0;
		return;
	}
	if (op->flags) {
		int r = be->drewind(d->h);
		if (r < 0) {
			res->ret = r;
			return;
		}
		d->nret = 0;
		d->reached_end = d->checked = d->seeked = d->dead = 0;
		if (be->dsnap) {
			d->nseen = 0;
			ds_track(s, op->slot, 1);
		}
	}
	int got = 0;
	for (int i = 0; i < op->len && !d->reached_end; i++) {
		struct fm_dent e;
		memset(&e, 0, sizeof e);
		int r = be->dread(d->h, &e);
		if (r < 0) {
			res->ret = r;
			return;
		}
		if (r == 0) {
			d->reached_end = 1;
			break;
		}
		if (d->nret == d->capret) {
			d->capret = d->capret ? d->capret * 2 : 16;
			d->ret = realloc(d->ret, sizeof *d->ret * (size_t)d->capret);
		}
		d->ret[d->nret++] = e;
		got++;
	}
	res->ret = got;
}

int fm_is_write(const struct fm_op *op)
{
	return op->kind == FM_WRITE || op->kind == FM_WRITEV || op->kind == FM_PWRITE ||
	       op->kind == FM_PWRITEV;
}

void fm_shrink_short_write(struct fm_op *op, const struct fm_res *res)
{
	if (fm_is_write(op) && res->ret > 0 && res->ret < op->len)
		op->len = res->ret;
}

void fm_exec_refused(struct fm_side *s, const struct fm_op *op, int64_t err, struct fm_res *res)
{
	int slot = fm_pick_slot(s, op);
	int closed = op->kind == FM_OPEN  ? slot
		     : op->kind == FM_DUP ? (op->slot2 == slot ? (slot + 1) % FM_NSLOT : op->slot2)
					  : -1;
	memset(res, 0, sizeof *res);
	res->slot = slot;
	res->ret = err;
	if (closed >= 0 && s->fd[closed] >= 0) {
		res->aux = s->be->close(s->be->ctx, s->fd[closed]);
		s->fd[closed] = -1;
	}
}

void fm_exec(struct fm_side *s, const struct fm_op *op, struct fm_res *res)
{
	struct fm_backend *be = s->be;
	void *c = be->ctx;
	int slot = fm_pick_slot(s, op);
	int slot2 = op->slot2 == slot ? (slot + 1) % FM_NSLOT : op->slot2;
	int fd = slotfd(s, slot);
	int isreg = s->fd[slot] >= 0 && s->fdtype[slot] == S_IFREG;
	size_t len = op->len > 0 ? (size_t)op->len : 0;
	struct iovec iov[8];
	int niov;
	memset(res, 0, sizeof *res);
	res->slot = slot;
	if (be->clearerr)
		be->clearerr(c);

	switch (op->kind) {
	case FM_OPEN: {
		if (s->fd[slot] >= 0) {
			res->aux = be->close(c, s->fd[slot]);
			s->fd[slot] = -1;
		}
		int r = be->open(c, op->p1, op->flags, op->mode);
		res->ret = r < 0 ? r : 0;
		if (r >= 0) {
			s->fd[slot] = r;
			s->fdflags[slot] = op->flags;
			struct stat st;
			s->fdtype[slot] =
			    be->fstat(c, r, &st) == 0 ? (int)(st.st_mode & S_IFMT) : 0;
			after_fd(s, slot, res);
		}
		break;
	}
	case FM_CLOSE:
		res->ret = be->close(c, fd);
		s->fd[slot] = -1;
		break;
	case FM_DUP: {
		if (s->fd[slot2] >= 0) {
			res->aux = be->close(c, s->fd[slot2]);
			s->fd[slot2] = -1;
		}
		int r = be->dup(c, fd);
		res->ret = r < 0 ? r : 0;
		if (r >= 0) {
			s->fd[slot2] = r;
			s->fdflags[slot2] = s->fdflags[slot];
			s->fdtype[slot2] = s->fdtype[slot];
			after_fd(s, slot2, res);
		}
		break;
	}
	case FM_READ:
	case FM_PREAD:
	case FM_READV:
	case FM_PREADV: {
		res->buf = malloc(len ? len : 1);
		ssize_t r;
		if (op->kind == FM_READ)
			r = be->read(c, fd, res->buf, len);
		else if (op->kind == FM_PREAD)
			r = be->pread(c, fd, res->buf, len, op->off);
		else {
			niov = make_iov(op->dseed, op->niov, res->buf, len, iov);
			r = op->kind == FM_READV ? be->readv(c, fd, iov, niov)
						 : be->preadv(c, fd, iov, niov, op->off);
		}
		res->ret = r;
		res->blen = r > 0 ? (size_t)r : 0;
		if (isreg)
			after_fd(s, slot, res);
		break;
	}
	case FM_WRITE:
	case FM_PWRITE:
	case FM_WRITEV:
	case FM_PWRITEV: {
		if (isreg && (op->kind == FM_WRITE || op->kind == FM_WRITEV) && op->cap > 0) {
			/* keep appending streams bounded: skip a write that would take
			 * the file past op->cap (both sides see the same size) */
			struct stat st;
			off_t cur = be->lseek(c, fd, 0, SEEK_CUR);
			if (be->fstat(c, fd, &st) == 0 && cur >= 0 &&
			    ((s->fdflags[slot] & O_APPEND) ? st.st_size : cur) + op->len >
				op->cap) {
				res->ret = 0;
				res->aux = 1; /* skipped */
				break;
			}
		}
		uint8_t *buf = malloc(len ? len : 1);
		fm_fill(buf, len, op->dseed);
		ssize_t r;
		if (op->kind == FM_WRITE)
			r = be->write(c, fd, buf, len);
		else if (op->kind == FM_PWRITE)
			r = be->pwrite(c, fd, buf, len, op->off);
		else {
			niov = make_iov(op->dseed, op->niov, buf, len, iov);
			r = op->kind == FM_WRITEV ? be->writev(c, fd, iov, niov)
						  : be->pwritev(c, fd, iov, niov, op->off);
		}
		free(buf);
		res->ret = r;
		if (isreg)
			after_fd(s, slot, res);
		break;
	}
	case FM_LSEEK:
		if (s->fd[slot] >= 0 && !isreg) { /* directory offsets: not comparable */
			res->ret = 0;
			break;
		}
		res->ret = be->lseek(c, fd, op->off, op->flags);
		break;
	case FM_LSEEK_DH: {
		if (!isreg) {
			res->ret = s->fd[slot] >= 0 ? 0 : be->lseek(c, fd, op->off, op->flags);
			res->aux = res->ret;
			break;
		}
		off_t cur0 = be->lseek(c, fd, 0, SEEK_CUR);
		struct stat st;
		be->fstat(c, fd, &st);
		int64_t size = st.st_size, off = op->off;
		off_t r = be->lseek(c, fd, op->off, op->flags);
		res->aux = r;
		res->ret = (r >= 0 || r == -ENXIO) ? 0 : r;
		int64_t where = 0;
		/* the zero checks need a readable descriptor */
		int rd = (s->fdflags[slot] & O_ACCMODE) != O_WRONLY;
		if (off >= size) {
			if (r != -ENXIO)
				bad(res, "offset %lld >= size %lld must give ENXIO, got %s",
				    (long long)off, (long long)size, fm_errname(r));
		} else if (op->flags == SEEK_DATA) {
			if (r == -ENXIO) {
				if (rd && !range_is_zero(s, fd, off, size, &where))
					bad(res,
					    "SEEK_DATA gave ENXIO but byte %lld (size %lld) is not "
					    "zero",
					    (long long)where, (long long)size);
			} else if (r < off || r >= size) {
				bad(res, "SEEK_DATA from %lld gave %s, outside [%lld, %lld)",
				    (long long)off, fm_errname(r), (long long)off, (long long)size);
			} else if (rd && !range_is_zero(s, fd, off, r, &where)) {
				bad(res,
				    "SEEK_DATA from %lld skipped to %lld over non-zero byte %lld",
				    (long long)off, (long long)r, (long long)where);
			}
		} else {
			if (r < off || r > size)
				bad(res, "SEEK_HOLE from %lld gave %s, outside [%lld, %lld]",
				    (long long)off, fm_errname(r), (long long)off, (long long)size);
			else if (rd && r < size && !range_is_zero(s, fd, r, r + 1, &where))
				bad(res, "SEEK_HOLE gave %lld but that byte is not zero",
				    (long long)r);
		}
		be->lseek(c, fd, cur0, SEEK_SET);
		break;
	}
	case FM_FTRUNCATE:
		res->ret = be->ftruncate(c, fd, op->len);
		after_fd(s, slot, res);
		break;
	case FM_TRUNCATE:
		res->ret = be->truncate(c, op->p1, op->len);
		after_path(s, op->p1, 1, res, 0);
		break;
	case FM_FALLOCATE:
		res->ret = be->fallocate(c, fd, op->flags, op->off, op->len);
		after_fd(s, slot, res);
		break;
	case FM_FSYNC:
		res->ret = be->fsync(c, fd);
		break;
	case FM_FDATASYNC:
		res->ret = be->fdatasync(c, fd);
		break;
	case FM_STAT:
		res->has_st = 1;
		res->ret = res->st_ret = be->stat(c, op->p1, &res->st);
		break;
	case FM_LSTAT:
		res->has_st = 1;
		res->ret = res->st_ret = be->lstat(c, op->p1, &res->st);
		break;
	case FM_FSTAT:
		res->has_st = 1;
		res->ret = res->st_ret = be->fstat(c, fd, &res->st);
		if (res->ret < 0)
			res->has_st = 0;
		break;
	case FM_CHMOD:
		res->ret = be->chmod(c, op->p1, op->mode);
		after_path(s, op->p1, 1, res, 0);
		break;
	case FM_SETXATTR: {
		uint8_t *v = malloc(len ? len : 1);
		fm_fill(v, len, op->dseed);
		res->ret =
		    be->setxattr ? be->setxattr(c, op->p1, op->p2, v, len, op->flags) : -EOPNOTSUPP;
		free(v);
		after_path(s, op->p1, 1, res, 0);
		break;
	}
	case FM_REMOVEXATTR:
		res->ret = be->removexattr ? be->removexattr(c, op->p1, op->p2) : -EOPNOTSUPP;
		after_path(s, op->p1, 1, res, 0);
		break;
	case FM_FCHMOD:
		res->ret = be->fchmod(c, fd, op->mode);
		after_fd(s, slot, res);
		break;
	case FM_CHOWN:
		res->ret = be->chown(c, op->p1, op->uid, op->gid);
		after_path(s, op->p1, 1, res, 0);
		break;
	case FM_LCHOWN:
		res->ret = be->lchown(c, op->p1, op->uid, op->gid);
		after_path(s, op->p1, 0, res, 0);
		break;
	case FM_FCHOWN:
		res->ret = be->fchown(c, fd, op->uid, op->gid);
		after_fd(s, slot, res);
		break;
	case FM_UTIMENS:
	case FM_FUTIMENS: {
		struct stat before;
		int follow = !(op->flags & AT_SYMLINK_NOFOLLOW);
		int rb;
		if (op->kind == FM_UTIMENS)
			rb = follow ? be->stat(c, op->p1, &before) : be->lstat(c, op->p1, &before);
		else
			rb = be->fstat(c, fd, &before);
		const struct timespec *ts = op->ts_null ? NULL : op->ts;
		if (op->kind == FM_UTIMENS) {
			res->ret = be->utimens(c, op->p1, ts, op->flags);
			after_path(s, op->p1, follow, res, 0);
		} else {
			res->ret = be->futimens(c, fd, ts);
			after_fd(s, slot, res);
		}
		if (res->ret == 0 && ts && res->has_st && res->st_ret == 0 && rb == 0) {
			const struct timespec *now[2] = {&res->st.st_atim, &res->st.st_mtim};
			const struct timespec *was[2] = {&before.st_atim, &before.st_mtim};
			/* a symlink's atime moves whenever a path walks through it,
			 * possibly the very stat that observes it: atime of symlinks is
			 * not checked */
			for (int i = S_ISLNK(res->st.st_mode) ? 1 : 0; i < 2; i++) {
				const char *w = i ? "mtime" : "atime";
				if (ts[i].tv_nsec == UTIME_OMIT) {
					if (now[i]->tv_sec != was[i]->tv_sec ||
					    now[i]->tv_nsec != was[i]->tv_nsec)
						bad(res,
						    "%s was UTIME_OMIT but changed from %lld.%09ld "
						    "to %lld.%09ld",
						    w, (long long)was[i]->tv_sec, was[i]->tv_nsec,
						    (long long)now[i]->tv_sec, now[i]->tv_nsec);
				} else if (ts[i].tv_nsec != UTIME_NOW) {
					if (now[i]->tv_sec != ts[i].tv_sec ||
					    now[i]->tv_nsec != ts[i].tv_nsec)
						bad(res,
						    "%s set to %lld.%09ld but reads %lld.%09ld", w,
						    (long long)ts[i].tv_sec, ts[i].tv_nsec,
						    (long long)now[i]->tv_sec, now[i]->tv_nsec);
				}
			}
		}
		break;
	}
	case FM_ACCESS:
		res->ret = be->access(c, op->p1, op->flags);
		break;
	case FM_MKDIR:
		res->ret = be->mkdir(c, op->p1, op->mode);
		after_path(s, op->p1, 0, res, 0);
		break;
	case FM_RMDIR:
		res->ret = be->rmdir(c, op->p1);
		after_path(s, op->p1, 0, res, 0);
		break;
	case FM_UNLINK:
		res->ret = be->unlink(c, op->p1);
		after_path(s, op->p1, 0, res, 0);
		break;
	case FM_RENAME:
		res->ret = be->rename(c, op->p1, op->p2, (unsigned)op->flags);
		after_path(s, op->p1, 0, res, 0);
		after_path(s, op->p2, 0, res, 1);
		break;
	case FM_LINK:
		res->ret = be->link(c, op->p1, op->p2);
		after_path(s, op->p1, 0, res, 0);
		after_path(s, op->p2, 0, res, 1);
		break;
	case FM_SYMLINK:
		res->ret = be->symlink(c, op->p1, op->p2);
		after_path(s, op->p2, 0, res, 0);
		break;
	case FM_READLINK:
		res->buf = malloc(len ? len : 1);
		res->ret = be->readlink(c, op->p1, (char *)res->buf, len);
		res->blen = res->ret > 0 ? (size_t)res->ret : 0;
		break;
	case FM_LISTDIR:
		exec_listdir(s, op, res);
		break;
	case FM_DS_OPEN:
	case FM_DS_READ:
	case FM_DS_CLOSE:
		exec_ds(s, op, res);
		break;
	default:
		res->ret = -ENOSYS;
	}
	if (res->ret < 0 && be->lasterr) {
		const char *m = be->lasterr(c);
		snprintf(res->err, sizeof res->err, "%s", m ? m : "");
		if (!m || !m[0])
			snprintf(res->err, sizeof res->err, "<empty ferrite_errmsg()>");
	}
	/* reference side: directory streams observe every op */
	if (be->dsnap)
		for (int i = 0; i < FM_NDS; i++)
			if (s->ds[i].h && !(op->kind == FM_DS_OPEN && op->slot == i))
				ds_track(s, i, 0);
}

/* ---- comparator --------------------------------------------------------------- */

/* Tolerated divergences: each is a case where POSIX allows Ferrite's answer
 * although Linux gives another. They are counted and reported, not hidden. */
static const char *const alt_text[] = {
    "rmdir/rename onto a non-empty directory: EEXIST where Linux says ENOTEMPTY (POSIX allows "
    "both)",
    "unlink(directory): EPERM where Linux says EISDIR (POSIX says EPERM)",
    "ftruncate (read-only or bad descriptor, or negative length): EBADF/EINVAL swapped (POSIX "
    "allows both)",
    "open(O_CREAT|O_DIRECTORY): another error where Linux >= 6.4 says EINVAL (POSIX: unspecified)",
    "link(directory, path2): EPERM where Linux reports path2's error first (POSIX sets no order)",
    "ENAMETOOLONG for a component > NAME_MAX where Linux reports another path-walk error first",
    "rename(file, its own ancestor directory): EISDIR where Linux says ENOTEMPTY (both apply)",
    "truncate(path, negative): the path's error where Linux says EINVAL first (POSIX sets no "
    "order)",
    "open(symlink, O_NOFOLLOW|O_DIRECTORY): ELOOP where Linux says ENOTDIR (both apply)",
    "zero-length read on a directory descriptor: EISDIR where Linux returns 0",
    /* last: not a POSIX matter but the header's contract; tolerated only without fm_errmsg_strict
     */
    "a failed call left ferrite_errmsg() empty (contract of ferrite.h)",
};
int fm_errmsg_strict = 1;
#define NALT (int)(sizeof alt_text / sizeof alt_text[0])
static long alt_count[NALT];
static char alt_example[NALT][400];

static int alt_hit(int id, const struct fm_op *op, int64_t a, int64_t b)
{
	if (__atomic_fetch_add(&alt_count[id], 1, __ATOMIC_RELAXED) == 0) {
		char s[300];
		fm_op_str(op, s, sizeof s);
		snprintf(alt_example[id], sizeof alt_example[id], "%.300s: %s vs Linux %s", s,
			 fm_errname(a), fm_errname(b));
	}
	return 1;
}

void fm_alt_report(FILE *f)
{
	for (int i = 0; i < NALT; i++)
		if (alt_count[i])
			fprintf(f, "tolerated %ld times: %s\n    first: %s\n", alt_count[i],
				alt_text[i], alt_example[i]);
}

static int long_component(const char *p)
{
	size_t run = 0;
	for (; *p; p++) {
		run = *p == '/' ? 0 : run + 1;
		if (run > 255)
			return 1;
	}
	return 0;
}

static int walk_err(int64_t e)
{
	return e == -ENOENT || e == -ENOTDIR || e == -ELOOP || e == -EACCES;
}

int fm_err_alternative(const struct fm_op *op, const struct fm_side *bside, const struct fm_res *rb,
		       int64_t a)
{
	int64_t b = rb->ret;
	int slot = rb->slot;
	if ((op->kind == FM_RMDIR || op->kind == FM_RENAME) &&
	    ((a == -EEXIST && b == -ENOTEMPTY) || (a == -ENOTEMPTY && b == -EEXIST)))
		return alt_hit(0, op, a, b);
	if (op->kind == FM_UNLINK && b == -EISDIR && a == -EPERM)
		return alt_hit(1, op, a, b);
	if (op->kind == FM_FTRUNCATE &&
	    (op->len < 0 ||
	     (bside->fd[slot] >= 0 && ((bside->fdflags[slot] & O_ACCMODE) == O_RDONLY ||
				       bside->fdtype[slot] == S_IFDIR))) &&
	    ((a == -EBADF && b == -EINVAL) || (a == -EINVAL && b == -EBADF)))
		return alt_hit(2, op, a, b);
	if (op->kind == FM_OPEN && (op->flags & O_CREAT) && (op->flags & O_DIRECTORY) &&
	    b == -EINVAL && a < 0)
		return alt_hit(3, op, a, b);
	/* link(directory, x): EPERM found before an error of the second path */
	if (op->kind == FM_LINK && a == -EPERM && b < 0 && rb->has_st && rb->st_ret == 0 &&
	    S_ISDIR(rb->st.st_mode))
		return alt_hit(4, op, a, b);
	/* a component longer than NAME_MAX seen before another path-walk error */
	if (a == -ENAMETOOLONG && walk_err(b) && (long_component(op->p1) || long_component(op->p2)))
		return alt_hit(5, op, a, b);
	if (op->kind == FM_TRUNCATE && op->len < 0 && b == -EINVAL &&
	    (walk_err(a) || a == -EISDIR || a == -ENAMETOOLONG))
		return alt_hit(7, op, a, b);
	if (op->kind == FM_OPEN && (op->flags & O_NOFOLLOW) && (op->flags & O_DIRECTORY) &&
	    a == -ELOOP && b == -ENOTDIR)
		return alt_hit(8, op, a, b);
	if ((op->kind == FM_READ || op->kind == FM_PREAD || op->kind == FM_READV ||
	     op->kind == FM_PREADV) &&
	    op->len == 0 && a == -EISDIR && b == 0)
		return alt_hit(9, op, a, b);
	/* rename(file, ancestor directory): EISDIR (file over directory) vs Linux ENOTEMPTY */
	if (op->kind == FM_RENAME && a == -EISDIR && b == -ENOTEMPTY && rb->has_st &&
	    rb->st_ret == 0 && !S_ISDIR(rb->st.st_mode))
		return alt_hit(6, op, a, b);
	return 0;
}

static int st_diff(const struct stat *a, const struct stat *b, char *why, size_t n,
		   const char *what)
{
	if (a->st_mode != b->st_mode) {
		snprintf(why, n, "%s: st_mode 0%o vs 0%o", what, a->st_mode, b->st_mode);
		return 1;
	}
	if (a->st_nlink != b->st_nlink) {
		snprintf(why, n, "%s: st_nlink %lu vs %lu", what, (unsigned long)a->st_nlink,
			 (unsigned long)b->st_nlink);
		return 1;
	}
	if (a->st_uid != b->st_uid || a->st_gid != b->st_gid) {
		snprintf(why, n, "%s: owner %u:%u vs %u:%u", what, a->st_uid, a->st_gid, b->st_uid,
			 b->st_gid);
		return 1;
	}
	if (!S_ISDIR(b->st_mode) && a->st_size != b->st_size) {
		snprintf(why, n, "%s: st_size %lld vs %lld", what, (long long)a->st_size,
			 (long long)b->st_size);
		return 1;
	}
	return 0;
}

/* End of a kept-open directory stream: check side x against the reference's tracking. */
static int ds_end_check(const struct fm_ds *x, const struct fm_ds *t, const char *side, char *why,
			size_t n)
{
	if (!x->seeked && !t->dead &&
	    (x->nret < 2 || !is_dot(x->ret[0].name) || !is_dot(x->ret[1].name))) {
		snprintf(why, n, "%s: stream did not start with \".\" and \"..\"", side);
		return 1;
	}
	for (int i = 0; i < t->nstable; i++) {
		int cnt = 0;
		for (int j = 0; j < x->nret; j++)
			if (!strcmp(x->ret[j].name, t->stable[i].name)) {
				cnt++;
				if (x->ret[j].type != t->stable[i].type && x->ret[j].type != 0) {
					snprintf(why, n,
						 "%s: stream entry \"%s\" has d_type %d, want %d",
						 side, t->stable[i].name, x->ret[j].type,
						 t->stable[i].type);
					return 1;
				}
			}
		if (cnt != 1) {
			snprintf(why, n,
				 "%s: entry \"%s\", present for the whole life of the stream, "
				 "returned %d times (want 1)",
				 side, t->stable[i].name, cnt);
			return 1;
		}
	}
	for (int j = 0; j < x->nret; j++) {
		if (is_dot(x->ret[j].name))
			continue;
		int ok = 0;
		for (int i = 0; i < t->nseen && !ok; i++)
			ok = !strcmp(t->seen[i].name, x->ret[j].name);
		if (!ok) {
			snprintf(why, n,
				 "%s: stream returned \"%s\", a name that never existed in that "
				 "directory",
				 side, x->ret[j].name);
			return 1;
		}
	}
	return 0;
}

int fm_compare(const struct fm_op *op, struct fm_side *a, const struct fm_res *ra,
	       struct fm_side *b, const struct fm_res *rb, char *why, size_t whylen)
{
	why[0] = 0;
	if (ra->bad) {
		snprintf(why, whylen, "%s: %s", a->be->name, ra->note);
		return 1;
	}
	if (rb->bad) {
		snprintf(why, whylen, "%s (reference): %s", b->be->name, rb->note);
		return 1;
	}
	if (a->be->is_ferrite && ra->ret < 0 && !strcmp(ra->err, "<empty ferrite_errmsg()>") &&
	    alt_hit(NALT - 1, op, ra->ret, rb->ret) && fm_errmsg_strict) {
		snprintf(
		    why, whylen,
		    "call failed with %s but ferrite_errmsg() is empty (contract: every failure "
		    "leaves an explanation)",
		    fm_errname(ra->ret));
		return 1;
	}
	if (op->kind == FM_DS_READ) {
		/* counts depend on readdir order; errors: a removed directory may end or give
		 * ENOENT */
		int ea = ra->ret < 0, eb = rb->ret < 0;
		if ((ea || eb) && ra->ret != rb->ret &&
		    !(ra->ret == -ENOENT || rb->ret == -ENOENT)) {
			snprintf(why, whylen, "readdir: %s vs %s", fm_errname(ra->ret),
				 fm_errname(rb->ret));
			return 1;
		}
		const struct fm_ds *xa = &a->ds[op->slot], *xb = &b->ds[op->slot];
		if (xa->h && xa->reached_end && !xa->checked) {
			a->ds[op->slot].checked = 1;
			if (ds_end_check(xa, xb, a->be->name, why, whylen))
				return 1;
		}
		if (xb->h && xb->reached_end && !xb->checked) {
			b->ds[op->slot].checked = 1;
			if (ds_end_check(xb, xb, b->be->name, why, whylen))
				return 1;
		}
		return 0;
	}
	if (ra->slot != rb->slot) {
		snprintf(why, whylen, "descriptor tables differ: slot %d vs %d", ra->slot,
			 rb->slot);
		return 1;
	}
	if (ra->ret != rb->ret && !fm_err_alternative(op, b, rb, ra->ret)) {
		snprintf(why, whylen, "return value %s vs %s", fm_errname(ra->ret),
			 fm_errname(rb->ret));
		return 1;
	}
	if (ra->aux != rb->aux && op->kind != FM_LSEEK_DH) {
		snprintf(why, whylen, "implicit close of the reused slot: %s vs %s",
			 fm_errname(ra->aux), fm_errname(rb->aux));
		return 1;
	}
	if (ra->blen != rb->blen || (ra->blen && memcmp(ra->buf, rb->buf, ra->blen))) {
		size_t i = 0;
		while (i < ra->blen && i < rb->blen && ra->buf[i] == rb->buf[i])
			i++;
		snprintf(why, whylen,
			 "data differs: %zu vs %zu bytes, first difference at byte %zu", ra->blen,
			 rb->blen, i);
		return 1;
	}
	if (ra->has_off != rb->has_off || (ra->has_off && ra->off != rb->off)) {
		snprintf(why, whylen, "descriptor offset after the op: %lld vs %lld",
			 (long long)ra->off, (long long)rb->off);
		return 1;
	}
	if (ra->has_st && rb->has_st) {
		if (ra->st_ret != rb->st_ret &&
		    !(ra->st_ret == -ENAMETOOLONG && walk_err(rb->st_ret) &&
		      (long_component(op->p1) || long_component(op->p2)) &&
		      alt_hit(5, op, ra->st_ret, rb->st_ret))) {
			snprintf(why, whylen, "stat after the op: %s vs %s", fm_errname(ra->st_ret),
				 fm_errname(rb->st_ret));
			return 1;
		}
		if (ra->st_ret == 0 && st_diff(&ra->st, &rb->st, why, whylen, "stat after the op"))
			return 1;
	}
	if (ra->has_st2 && rb->has_st2) {
		if (ra->st2_ret != rb->st2_ret &&
		    !(ra->st2_ret == -ENAMETOOLONG && walk_err(rb->st2_ret) &&
		      long_component(op->p2) && alt_hit(5, op, ra->st2_ret, rb->st2_ret))) {
			snprintf(why, whylen, "stat of the second path after the op: %s vs %s",
				 fm_errname(ra->st2_ret), fm_errname(rb->st2_ret));
			return 1;
		}
		if (ra->st2_ret == 0 &&
		    st_diff(&ra->st2, &rb->st2, why, whylen, "stat of the second path"))
			return 1;
	}
	if ((op->kind == FM_UTIMENS || op->kind == FM_FUTIMENS) && ra->ret == 0 && !op->ts_null &&
	    ra->has_st && ra->st_ret == 0) {
		const struct timespec *ta[2] = {&ra->st.st_atim, &ra->st.st_mtim};
		const struct timespec *tb[2] = {&rb->st.st_atim, &rb->st.st_mtim};
		for (int i = S_ISLNK(rb->st.st_mode) ? 1 : 0; i < 2; i++) {
			long ns = op->ts[i].tv_nsec;
			if (ns == UTIME_OMIT || ns == UTIME_NOW)
				continue;
			if (ta[i]->tv_sec != tb[i]->tv_sec || ta[i]->tv_nsec != tb[i]->tv_nsec) {
				snprintf(why, whylen, "%s %lld.%09ld vs %lld.%09ld",
					 i ? "mtime" : "atime", (long long)ta[i]->tv_sec,
					 ta[i]->tv_nsec, (long long)tb[i]->tv_sec, tb[i]->tv_nsec);
				return 1;
			}
		}
	}
	if (op->kind == FM_LISTDIR && ra->ret == 0) {
		int i = 0, j = 0;
		while (i < ra->nents || j < rb->nents) {
			int c = i >= ra->nents	 ? 1
				: j >= rb->nents ? -1
						 : strcmp(ra->ents[i].name, rb->ents[j].name);
			if (c) {
				snprintf(why, whylen, "readdir: \"%s\" only in %s",
					 c < 0 ? ra->ents[i].name : rb->ents[j].name,
					 c < 0 ? a->be->name : b->be->name);
				return 1;
			}
			if (ra->ents[i].type != rb->ents[j].type) {
				snprintf(why, whylen, "readdir: d_type of \"%s\" %d vs %d",
					 ra->ents[i].name, ra->ents[i].type, rb->ents[j].type);
				return 1;
			}
			i++;
			j++;
		}
	}
	return 0;
}
