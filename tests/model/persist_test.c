/*
 * persist_test.c -- persistence across unmount/mount and across processes.
 *
 * What it checks:
 *   1. Random op sequences (the model test's generator, each op compared with
 *      the kernel) are interleaved with unmount + mount cycles (every other one
 *      with fsck in between); after every mount the whole tree must equal the
 *      kernel's mirror: unmounting must keep everything.
 *   2. While the pool is mounted, another process may mount it too (a pm
 *      pool is shared, docs/contracts.md#processes) and sees the tree; one
 *      asking to hold it alone (FERRITE_MOUNT_EXCLUSIVE) gets -EBUSY. Under
 *      the tier engine (one process) the second mount gets -EBUSY.
 *   3. Every entry gets explicit, distinct atime/mtime; a manifest of every
 *      entry (type, mode, owner, nlink, size, inode number, atime, mtime,
 *      ctime, content hash, symlink target) is taken; the pool is unmounted and
 *      a freshly exec'ed process (`persist_test --verify POOL MANIFEST`) mounts
 *      it and must find exactly the manifest (stat before any read, so even the
 *      times are exact), then adds a marker file and a directory; back in the
 *      first process, fsck is clean and the marker is there, byte for byte.
 * Why that proves the property: nothing but the pool file carries state from
 * one process to the other, so equality with the manifest and the mirror shows
 * the state is persistent and complete, not cached in a process.
 * --mode strict formats the pool in strict mode; the checks are the same.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "fm.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ferrite.h"

static const char *argv0;

struct ent {
	char path[1024];
	struct stat st;
	uint64_t hash;
	char target[4200];
	int tlen;
};

struct ents {
	struct ent *v;
	int n, cap;
};

static uint64_t fnv(const uint8_t *p, size_t n, uint64_t h)
{
	for (size_t i = 0; i < n; i++)
		h = (h ^ p[i]) * 0x100000001b3ull;
	return h;
}

static int dcmp(const void *a, const void *b)
{
	return strcmp(((const struct fm_dent *)a)->name, ((const struct fm_dent *)b)->name);
}

static int list(struct fm_backend *be, const char *path, struct fm_dent **out, int *n)
{
	void *h;
	int cap = 0, r = be->dopen(be->ctx, path, &h);
	*out = NULL;
	*n = 0;
	if (r < 0)
		return r;
	for (;;) {
		struct fm_dent e;
		memset(&e, 0, sizeof e);
		if ((r = be->dread(h, &e)) <= 0)
			break;
		if (!strcmp(e.name, ".") || !strcmp(e.name, ".."))
			continue;
		if (*n == cap) {
			cap = cap ? 2 * cap : 16;
			*out = realloc(*out, sizeof **out * (size_t)cap);
		}
		(*out)[(*n)++] = e;
	}
	be->dclose(h);
	if (*n)
		qsort(*out, (size_t)*n, sizeof **out, dcmp);
	return r;
}

static void join(char *out, size_t n, const char *dir, const char *name)
{
	snprintf(out, n, "%s%s%s", dir, strcmp(dir, "/") ? "/" : "", name);
}

static void walk(struct fm_backend *be, const char *path, struct ents *es)
{
	if (es->n == es->cap) {
		es->cap = es->cap ? 2 * es->cap : 64;
		es->v = realloc(es->v, sizeof *es->v * (size_t)es->cap);
	}
	struct ent *e = &es->v[es->n++];
	memset(e, 0, sizeof *e);
	snprintf(e->path, sizeof e->path, "%s", path);
	if (be->lstat(be->ctx, path, &e->st) < 0)
		return;
	if (S_ISDIR(e->st.st_mode)) {
		struct fm_dent *d;
		int n;
		list(be, path, &d, &n);
		for (int i = 0; i < n; i++) {
			char c[1024];
			join(c, sizeof c, path, d[i].name);
			walk(be, c, es);
		}
		free(d);
	}
}

/* Hashes of contents and symlink targets (reads; done before times are set). */
static int fill_content(struct fm_backend *be, struct ent *e)
{
	e->hash = 0xcbf29ce484222325ull;
	if (S_ISLNK(e->st.st_mode)) {
		ssize_t r = be->readlink(be->ctx, e->path, e->target, sizeof e->target);
		if (r < 0)
			return (int)r;
		e->tlen = (int)r;
		e->hash = fnv((uint8_t *)e->target, (size_t)r, e->hash);
	} else if (S_ISREG(e->st.st_mode)) {
		int fd = be->open(be->ctx, e->path, O_RDONLY | O_NOFOLLOW, 0);
		if (fd < 0)
			return fd;
		static uint8_t buf[1 << 20];
		off_t off = 0;
		for (;;) {
			ssize_t r = be->pread(be->ctx, fd, buf, sizeof buf, off);
			if (r < 0) {
				be->close(be->ctx, fd);
				return (int)r;
			}
			if (r == 0)
				break;
			e->hash = fnv(buf, (size_t)r, e->hash);
			off += r;
		}
		be->close(be->ctx, fd);
		if (off != e->st.st_size)
			return -EIO;
	}
	return 0;
}

static int write_manifest(const char *file, struct ents *es)
{
	FILE *f = fopen(file, "w");
	if (!f)
		return -errno;
	for (int i = 0; i < es->n; i++) {
		struct ent *e = &es->v[i];
		struct stat *s = &e->st;
		fprintf(
		    f, "%o %u %u %lu %lld %llu %lld %ld %lld %ld %lld %ld %016llx %s\n", s->st_mode,
		    s->st_uid, s->st_gid, (unsigned long)s->st_nlink, (long long)s->st_size,
		    (unsigned long long)s->st_ino, (long long)s->st_atim.tv_sec, s->st_atim.tv_nsec,
		    (long long)s->st_mtim.tv_sec, s->st_mtim.tv_nsec, (long long)s->st_ctim.tv_sec,
		    s->st_ctim.tv_nsec, (unsigned long long)e->hash, e->path);
	}
	return fclose(f) == 0 ? 0 : -errno;
}

static int read_manifest(const char *file, struct ents *es)
{
	FILE *f = fopen(file, "r");
	if (!f)
		return -errno;
	char line[2048];
	while (fgets(line, sizeof line, f)) {
		if (es->n == es->cap) {
			es->cap = es->cap ? 2 * es->cap : 64;
			es->v = realloc(es->v, sizeof *es->v * (size_t)es->cap);
		}
		struct ent *e = &es->v[es->n];
		memset(e, 0, sizeof *e);
		unsigned mode, uid, gid;
		unsigned long nlink;
		long long size, as, ms, cs;
		unsigned long long ino, hash;
		long an, mn, cn;
		if (sscanf(line, "%o %u %u %lu %lld %llu %lld %ld %lld %ld %lld %ld %llx %1023s",
			   &mode, &uid, &gid, &nlink, &size, &ino, &as, &an, &ms, &mn, &cs, &cn,
			   &hash, e->path) != 14) {
			fclose(f);
			return -EINVAL;
		}
		e->st.st_mode = mode;
		e->st.st_uid = uid;
		e->st.st_gid = gid;
		e->st.st_nlink = nlink;
		e->st.st_size = size;
		e->st.st_ino = ino;
		e->st.st_atim.tv_sec = as;
		e->st.st_atim.tv_nsec = an;
		e->st.st_mtim.tv_sec = ms;
		e->st.st_mtim.tv_nsec = mn;
		e->st.st_ctim.tv_sec = cs;
		e->st.st_ctim.tv_nsec = cn;
		e->hash = hash;
		es->n++;
	}
	fclose(f);
	return 0;
}

#define TS_EQ(a, b) ((a).tv_sec == (b).tv_sec && (a).tv_nsec == (b).tv_nsec)

/* Child: mount, compare with the manifest, add the marker, unmount. */
static int verify_main(const char *pool, const char *manifest)
{
	struct ents want = {0}, got = {0};
	if (read_manifest(manifest, &want) < 0) {
		fprintf(stderr, "verify: cannot read %s\n", manifest);
		return 2;
	}
	struct fm_backend *be = fm_ferrite_new(pool);
	if (!be)
		return 1;
	walk(be, "/", &got); /* lstat only: nothing read yet */
	int bad = 0;
	if (got.n != want.n) {
		fprintf(stderr, "verify: %d entries in the pool, %d in the manifest\n", got.n,
			want.n);
		bad = 1;
	}
	for (int i = 0; i < want.n && i < got.n && !bad; i++) {
		struct ent *w = &want.v[i], *g = &got.v[i];
		struct stat *a = &g->st, *b = &w->st;
		if (strcmp(w->path, g->path)) {
			fprintf(stderr, "verify: entry %d is %s, manifest says %s\n", i, g->path,
				w->path);
			bad = 1;
		} else if (a->st_mode != b->st_mode || a->st_uid != b->st_uid ||
			   a->st_gid != b->st_gid || a->st_nlink != b->st_nlink ||
			   (!S_ISDIR(b->st_mode) && a->st_size != b->st_size)) {
			fprintf(stderr,
				"verify: %s: mode 0%o uid %u gid %u nlink %lu size %lld, manifest "
				"0%o %u %u %lu %lld\n",
				w->path, a->st_mode, a->st_uid, a->st_gid,
				(unsigned long)a->st_nlink, (long long)a->st_size, b->st_mode,
				b->st_uid, b->st_gid, (unsigned long)b->st_nlink,
				(long long)b->st_size);
			bad = 1;
		} else if (a->st_ino != b->st_ino) {
			fprintf(stderr, "verify: %s: st_ino %llu, was %llu before unmount\n",
				w->path, (unsigned long long)a->st_ino,
				(unsigned long long)b->st_ino);
			bad = 1;
		} else if (!TS_EQ(a->st_atim, b->st_atim) || !TS_EQ(a->st_mtim, b->st_mtim) ||
			   !TS_EQ(a->st_ctim, b->st_ctim)) {
			fprintf(stderr,
				"verify: %s: times a=%lld.%09ld m=%lld.%09ld c=%lld.%09ld, before "
				"unmount a=%lld.%09ld "
				"m=%lld.%09ld c=%lld.%09ld\n",
				w->path, (long long)a->st_atim.tv_sec, a->st_atim.tv_nsec,
				(long long)a->st_mtim.tv_sec, a->st_mtim.tv_nsec,
				(long long)a->st_ctim.tv_sec, a->st_ctim.tv_nsec,
				(long long)b->st_atim.tv_sec, b->st_atim.tv_nsec,
				(long long)b->st_mtim.tv_sec, b->st_mtim.tv_nsec,
				(long long)b->st_ctim.tv_sec, b->st_ctim.tv_nsec);
			bad = 1;
		}
	}
	for (int i = 0; i < got.n && !bad; i++) {
		int r = fill_content(be, &got.v[i]);
		if (r < 0 || got.v[i].hash != want.v[i].hash) {
			fprintf(stderr, "verify: %s: content %s (hash %016llx, manifest %016llx)\n",
				got.v[i].path, r < 0 ? fm_errname(r) : "differs",
				(unsigned long long)got.v[i].hash,
				(unsigned long long)want.v[i].hash);
			bad = 1;
		}
	}
	if (!bad) {
		/* leave something for the first process to find */
		uint8_t buf[10000];
		fm_fill(buf, sizeof buf, 0xfeed);
		int fd = be->open(be->ctx, "/persist-marker", O_WRONLY | O_CREAT | O_EXCL, 0640);
		if (fd < 0 || be->write(be->ctx, fd, buf, sizeof buf) != (ssize_t)sizeof buf ||
		    be->close(be->ctx, fd) < 0 || be->mkdir(be->ctx, "/persist-dir", 0711) < 0) {
			fprintf(stderr, "verify: cannot write the marker: %s\n", ferrite_errmsg());
			bad = 1;
		}
	}
	if (fm_ferrite_unmount(be) < 0)
		bad = 1;
	free(want.v);
	free(got.v);
	printf("verify process %d: %s\n", (int)getpid(),
	       bad ? "FAILED" : "pool matches the manifest");
	return bad;
}

static int spawn(const char *a1, const char *a2, const char *a3)
{
	fflush(stdout);
	fflush(stderr);
	pid_t pid = fork();
	if (pid == 0) {
		execl("/proc/self/exe", argv0, a1, a2, a3, (char *)NULL);
		_exit(127);
	}
	int st;
	if (pid < 0 || waitpid(pid, &st, 0) < 0)
		return -1;
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static int busy_main(const char *pool)
{
	ferrite_fs *fs;
	struct ferrite_mount_opts alone = {.mode = FERRITE_MOUNT_EXCLUSIVE};
	int ra = ferrite_mount(pool, &alone, &fs);
	if (ra == 0)
		ferrite_unmount(fs);
	printf("second process, alone: ferrite_mount = %s (want EBUSY) %s\n", fm_errname(ra),
	       ferrite_errmsg());
	int rs = ferrite_mount(pool, NULL, &fs);
	struct ferrite_probe pr;
	int tier = ferrite_probe(pool, &pr) == 0 && pr.tiered;
	struct stat st;
	int sees = rs == 0 && ferrite_stat(fs, "/", &st) == 0 && S_ISDIR(st.st_mode);
	if (rs == 0)
		ferrite_unmount(fs);
	printf("second process, shared: ferrite_mount = %s (want %s) %s\n", fm_errname(rs),
	       tier ? "EBUSY" : "0", rs ? ferrite_errmsg() : "");
	return ra == -EBUSY && (tier ? rs == -EBUSY : sees) ? 0 : 1;
}

int main(int argc, char **argv)
{
	argv0 = argv[0];
	uint64_t seed = 1;
	long ops = 1500, cycles = 8, op_mismatches = 0;
	int keep_going = 0, no_creat_dir = 0, mode = FERRITE_MODE_SYNC;
	umask(0);
	setvbuf(stdout, NULL, _IOLBF, 0);
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--verify") && i + 2 < argc)
			return verify_main(argv[i + 1], argv[i + 2]);
		if (!strcmp(argv[i], "--expect-busy") && i + 1 < argc)
			return busy_main(argv[i + 1]);
		if (!strcmp(argv[i], "--seed") && i + 1 < argc)
			seed = strtoull(argv[++i], NULL, 0);
		else if (!strcmp(argv[i], "--ops") && i + 1 < argc)
			ops = strtol(argv[++i], NULL, 0);
		else if (!strcmp(argv[i], "--cycles") && i + 1 < argc)
			cycles = strtol(argv[++i], NULL, 0);
		else if (!strcmp(argv[i], "--mode") && i + 1 < argc &&
			 fm_mode_parse(argv[i + 1]) >= 0)
			mode = fm_mode_parse(argv[++i]);
		else if (!strcmp(argv[i], "--lenient-errmsg"))
			fm_errmsg_strict = 0;
		else if (!strcmp(argv[i], "--no-creat-directory"))
			no_creat_dir = 1;
		else if (!strcmp(argv[i], "--keep-going"))
			keep_going = 1; /* per-op mismatches are reported, the test goes on */
		else {
			fprintf(stderr, "usage: persist_test [--seed S] [--ops N] [--cycles C] "
					"[--mode sync|strict|tier|tier-epoch] [--lenient-errmsg] "
					"[--keep-going] [--no-creat-directory]\n"
					"       persist_test --verify POOL MANIFEST | "
					"--expect-busy POOL (used internally)\n");
			return 2;
		}
	}
	char dir[256], ref[300], pool[300], manifest[300], why[4096];
	snprintf(dir, sizeof dir, "/dev/shm/ferrite-persist-%d", (int)getpid());
	snprintf(ref, sizeof ref, "%s/ref", dir);
	snprintf(pool, sizeof pool, "%s.pool", dir);
	snprintf(manifest, sizeof manifest, "%s/manifest", dir);
	fm_rm_rf(dir);
	if (mkdir(dir, 0755) < 0 || mkdir(ref, 0755) < 0 ||
	    fm_ferrite_mkfs(pool, 256ull << 20, mode, why, sizeof why) < 0) {
		fprintf(stderr, "setup: %s\n", why);
		fm_rm_rf(dir);
		fm_pool_remove(pool);
		return 2;
	}
	struct fm_backend *a = fm_ferrite_new(pool), *b = fm_posix_new(ref, 0);
	if (!a || !b)
		return 2;
	if (fm_ferrite_check_mode(a, mode, why, sizeof why) < 0) {
		fprintf(stderr, "setup: %s\n", why);
		return 2;
	}
	a->chmod(a->ctx, "/", 0755);
	b->chmod(b->ctx, "/", 0755);
	a->chown(a->ctx, "/", 0, 0);
	b->chown(b->ctx, "/", 0, 0);
	int rc = 1;
	struct fm_gen g;
	fm_gen_init(&g, seed, FM_PROF_MODEL, "", 1);
	g.no_creat_dir = no_creat_dir;
	struct fm_side sa, sb;
	for (long c = 0; c < cycles; c++) {
		fm_side_init(&sa, a);
		fm_side_init(&sb, b);
		for (long i = 0; i < ops; i++) {
			struct fm_op op;
			struct fm_res ra, rb;
			fm_gen_next(&g, &op);
			fm_exec(&sa, &op, &ra);
			fm_shrink_short_write(&op, &ra);
			fm_exec(&sb, &op, &rb);
			int bad = fm_compare(&op, &sa, &ra, &sb, &rb, why, sizeof why);
			if (bad) {
				char s[1000], r1[1200], r2[1200];
				fm_op_str(&op, s, sizeof s);
				fm_res_str(&op, &ra, r1, sizeof r1);
				fm_res_str(&op, &rb, r2, sizeof r2);
				fprintf(stderr,
					"MISMATCH cycle %ld op %ld: %s\n  ferrite %s\n  posix   "
					"%s\n  why: %s\n"
					"  (the same seed and op sequence as `model_test --seed "
					"%llu --ops %ld --remount %ld --mode %s`)\n",
					c, i, s, r1, r2, why, (unsigned long long)seed,
					c * ops + i + 1, ops, fm_mode_name(mode));
			}
			fm_res_free(&ra);
			fm_res_free(&rb);
			if (bad && !keep_going)
				goto out;
			op_mismatches += bad;
		}
		fm_side_close_all(&sa);
		fm_side_close_all(&sb);
		if (fm_ferrite_remount(a, c % 2, why, sizeof why) < 0) {
			fprintf(stderr, "cycle %ld: remount: %s\n", c, why);
			goto out;
		}
		if (fm_tree_compare(a, b, "/", NULL, why, sizeof why)) {
			fprintf(stderr, "cycle %ld: after unmount%s + mount the tree differs: %s\n",
				c, c % 2 ? " + fsck" : "", why);
			goto out;
		}
		printf("cycle %ld: %ld ops, unmount%s + mount: tree intact\n", c, ops,
		       c % 2 ? " + fsck" : "");
	}

	/* one process at a time */
	int r = spawn("--expect-busy", pool, NULL);
	if (r != 0) {
		fprintf(stderr,
			"a second process mounting the mounted pool: not as the contract says "
			"(exit %d)\n",
			r);
		goto out;
	}

	/* explicit distinct times, then the manifest */
	struct ents es = {0};
	walk(b, "/", &es);
	for (int i = 0; i < es.n; i++) {
		if (fill_content(a, &es.v[i]) < 0) {
			fprintf(stderr, "reading %s failed\n", es.v[i].path);
			goto out;
		}
	}
	for (int i = 0; i < es.n; i++) {
		struct timespec ts[2] = {{1000000000 + i * 1000, (i * 7919L) % 1000000000},
					 {1500000000 + i * 1000, (i * 104729L) % 1000000000}};
		int ra = a->utimens(a->ctx, es.v[i].path, ts, AT_SYMLINK_NOFOLLOW);
		int rb = b->utimens(b->ctx, es.v[i].path, ts, AT_SYMLINK_NOFOLLOW);
		if (ra != rb) {
			fprintf(stderr, "utimens(%s): %s vs %s\n", es.v[i].path, fm_errname(ra),
				fm_errname(rb));
			goto out;
		}
	}
	for (int i = 0; i < es.n; i++)
		if (a->lstat(a->ctx, es.v[i].path, &es.v[i].st) < 0) {
			fprintf(stderr, "lstat(%s) failed\n", es.v[i].path);
			goto out;
		}
	if (write_manifest(manifest, &es) < 0) {
		perror(manifest);
		goto out;
	}
	printf("manifest: %d entries\n", es.n);
	free(es.v);
	if (fm_ferrite_unmount(a) < 0) {
		a = NULL;
		goto out;
	}
	a = NULL;
	if (fm_ferrite_fsck(pool, why, sizeof why) != FERRITE_FSCK_CLEAN) {
		fprintf(stderr, "%s\n", why);
		goto out;
	}
	r = spawn("--verify", pool, manifest);
	if (r != 0) {
		fprintf(stderr, "the verifying process failed (exit %d)\n", r);
		goto out;
	}
	if (fm_ferrite_fsck(pool, why, sizeof why) != FERRITE_FSCK_CLEAN) {
		fprintf(stderr, "after the second process: %s\n", why);
		goto out;
	}
	/* the same change on the mirror; then everything must match */
	uint8_t buf[10000];
	fm_fill(buf, sizeof buf, 0xfeed);
	int fd = b->open(b->ctx, "/persist-marker", O_WRONLY | O_CREAT | O_EXCL, 0640);
	b->write(b->ctx, fd, buf, sizeof buf);
	b->close(b->ctx, fd);
	b->mkdir(b->ctx, "/persist-dir", 0711);
	a = fm_ferrite_new(pool);
	if (!a)
		goto out;
	if (fm_tree_compare(a, b, "/", NULL, why, sizeof why)) {
		fprintf(stderr, "after the second process wrote to the pool: %s\n", why);
		goto out;
	}
	if (op_mismatches) {
		fprintf(stderr,
			"persistence held, but %ld ops disagreed with the kernel (see above)\n",
			op_mismatches);
		goto out;
	}
	printf("persist test passed (%s mode): %ld remount cycles, cross-process manifest and "
	       "marker verified\n",
	       fm_mode_name(mode), cycles);
	rc = 0;
out:
	if (a)
		fm_ferrite_unmount(a);
	fm_posix_free(b);
	if (rc)
		fprintf(stderr, "kept for inspection: %s and %s\n", pool, dir);
	else {
		fm_rm_rf(dir);
		fm_pool_remove(pool);
	}
	return rc;
}
