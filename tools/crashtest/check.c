/*
 * check.c -- judging one crash image (runs in a checker process of its own).
 *
 * The image is mounted, which recovers it; the recovery is itself traced.
 * Then, in order:
 *   1. the mount succeeded and left nothing written-but-unpersisted;
 *   2. (a recovered state already judged for the same instant is not judged
 *      again: equal pool contents give equal answers below);
 *   3. the tree equals the state before the operation in flight or after
 *      it (right after an operation returned: after it); in sync mode an
 *      interrupted data write may show each byte old or new, with the size
 *      old or new and appended bytes all new once the new size shows;
 *   4. fsck finds nothing;
 *   5. mounting again (recovering twice) gives the same tree;
 *   6. the pool is usable: a file can be created, written, read and removed,
 *      and removing everything returns the free space a fresh pool has once
 *      metadata-pool blocks (kept for reuse, never released) are counted;
 *      fsck is clean afterwards;
 *   7. a crash at any fence of the recovery (some images per fence) recovers
 *      to the same pool contents, free pages aside, or at least the same
 *      tree, fsck-clean.
 */
#include "ct.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "ferrite.h"
#include "fs/fs.h"
#include "tier/tier.h"

#define VIOLATION 3

/* ---- shared statistics ------------------------------------------------------ */

struct ct_stats *ct_stats_new(uint64_t cap)
{
	size_t len = sizeof(struct ct_stats) + cap * sizeof(uint64_t);
	struct ct_stats *s =
	    mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (s == MAP_FAILED)
		return NULL;
	s->set_cap = cap;
	return s;
}

int ct_stats_insert(struct ct_stats *s, uint64_t h)
{
	if (!h)
		h = 1;
	for (uint64_t i = h % s->set_cap, n = 0; n < s->set_cap; i = (i + 1) % s->set_cap, n++) {
		uint64_t cur = __atomic_load_n(&s->set[i], __ATOMIC_ACQUIRE);
		if (cur == h)
			return 0;
		if (cur == 0) {
			uint64_t zero = 0;
			if (__atomic_compare_exchange_n(&s->set[i], &zero, h, 0, __ATOMIC_ACQ_REL,
							__ATOMIC_ACQUIRE))
				return 1;
			if (zero == h)
				return 0;
		}
	}
	return 1; /* full: judge it again rather than skip it */
}

/* ---- tree digest -------------------------------------------------------------- */

static uint64_t mixin(uint64_t h, uint64_t v)
{
	h ^= v + 0x9E3779B97F4A7C15ULL + (h << 6) + (h >> 2);
	h *= 0xff51afd7ed558ccdULL;
	return h ^ (h >> 32);
}

static uint64_t mix_bytes(uint64_t h, const void *p, size_t n)
{
	const uint8_t *b = p;
	size_t i = 0;
	for (; i + 8 <= n; i += 8) {
		uint64_t w;
		memcpy(&w, b + i, 8);
		h = mixin(h, w);
	}
	uint64_t w = 0;
	memcpy(&w, b + i, n - i);
	return mixin(mixin(h, w), n);
}

static int dent_cmp(const void *a, const void *b)
{
	return strcmp(((const struct fm_dent *)a)->name, ((const struct fm_dent *)b)->name);
}

struct digest {
	struct fm_backend *be;
	uint64_t h;
	uint64_t *ino;
	char (*first)[64];
	int n, cap;
};

static void digest_entry(struct digest *d, const char *path);

static void digest_dir(struct digest *d, const char *path)
{
	void *h;
	if (d->be->dopen(d->be->ctx, path, &h) < 0) {
		d->h = mixin(d->h, 0xbad);
		return;
	}
	struct fm_dent *e = NULL;
	int n = 0, cap = 0;
	struct fm_dent x;
	while (memset(&x, 0, sizeof x), d->be->dread(h, &x) > 0) {
		if (!strcmp(x.name, ".") || !strcmp(x.name, ".."))
			continue;
		if (n == cap) {
			cap = cap ? 2 * cap : 64;
			e = realloc(e, sizeof(*e) * (size_t)cap);
		}
		e[n++] = x;
	}
	d->be->dclose(h);
	if (n)
		qsort(e, (size_t)n, sizeof(*e), dent_cmp);
	for (int i = 0; i < n; i++) {
		char child[4096];
		snprintf(child, sizeof child, "%s%s%s", path, strcmp(path, "/") ? "/" : "",
			 e[i].name);
		d->h = mix_bytes(d->h, e[i].name, strlen(e[i].name));
		digest_entry(d, child);
	}
	free(e);
}

static void digest_entry(struct digest *d, const char *path)
{
	struct stat st;
	if (d->be->lstat(d->be->ctx, path, &st) < 0) {
		d->h = mixin(d->h, 0xdead);
		return;
	}
	d->h = mixin(d->h, st.st_mode);
	d->h = mixin(d->h, ((uint64_t)st.st_uid << 32) | st.st_gid);
	d->h = mixin(d->h, st.st_nlink);
	for (int i = 0; i < d->n; i++)
		if (d->ino[i] == (uint64_t)st.st_ino) { /* another name of a known inode */
			d->h = mix_bytes(d->h, d->first[i], strlen(d->first[i]));
			return;
		}
	if (d->n == d->cap) {
		d->cap = d->cap ? 2 * d->cap : 256;
		d->ino = realloc(d->ino, sizeof(*d->ino) * (size_t)d->cap);
		d->first = realloc(d->first, sizeof(*d->first) * (size_t)d->cap);
	}
	d->ino[d->n] = (uint64_t)st.st_ino;
	snprintf(d->first[d->n++], 64, "%s", path);
	if (S_ISDIR(st.st_mode)) {
		digest_dir(d, path);
	} else if (S_ISLNK(st.st_mode)) {
		char t[4200];
		ssize_t l = d->be->readlink(d->be->ctx, path, t, sizeof t);
		d->h = mix_bytes(d->h, t, l > 0 ? (size_t)l : 0);
	} else if (S_ISREG(st.st_mode)) {
		d->h = mixin(d->h, (uint64_t)st.st_size);
		int fd = d->be->open(d->be->ctx, path, O_RDONLY | O_NOFOLLOW, 0);
		static uint8_t buf[1 << 20];
		for (off_t o = 0; fd >= 0 && o < st.st_size;) {
			ssize_t r = d->be->pread(d->be->ctx, fd, buf, sizeof buf, o);
			if (r <= 0) {
				d->h = mixin(d->h, 0xe0f);
				break;
			}
			d->h = mix_bytes(d->h, buf, (size_t)r);
			o += r;
		}
		if (fd >= 0)
			d->be->close(d->be->ctx, fd);
	}
}

uint64_t ct_tree_digest(struct fm_backend *be)
{
	struct digest d = {be, 1, NULL, NULL, 0, 0};
	digest_entry(&d, "/");
	free(d.ino);
	free(d.first);
	return d.h;
}

/* ---- helpers ---------------------------------------------------------------------- */

static int wait_child(pid_t pid, int timeout_s)
{
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		int st;
		pid_t r = waitpid(pid, &st, WNOHANG);
		if (r == pid)
			return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
		clock_gettime(CLOCK_MONOTONIC, &t1);
		if (t1.tv_sec - t0.tv_sec > timeout_s) {
			kill(pid, SIGKILL);
			waitpid(pid, &st, 0);
			return -1;
		}
		struct timespec ts = {0, 200000};
		nanosleep(&ts, NULL);
	}
}

/* Pages the metadata pools hold (their blocks are kept once allocated). */
static uint64_t meta_pages(ferrite_fs *fs)
{
	uint64_t pages = 0;
	for (int i = 0; i < MP_COUNT; i++) {
		uint64_t b = fs->m.st->st_pools[i].mph_block_head;
		for (int guard = 0; b && guard < 100000; guard++) {
			pages += mp_block_bytes(&fs->m, (enum mp_id)i) / FR_PAGE_SIZE;
			b = ((struct mp_block *)meta_ptr(&fs->m, b))->mpb_next;
		}
	}
	return pages;
}

static int rm_tree(struct fm_backend *be, const char *path)
{
	void *h;
	int rc = be->dopen(be->ctx, path, &h);
	if (rc < 0)
		return rc;
	struct fm_dent *e = NULL;
	int n = 0, cap = 0;
	struct fm_dent x;
	while (memset(&x, 0, sizeof x), be->dread(h, &x) > 0) {
		if (!strcmp(x.name, ".") || !strcmp(x.name, ".."))
			continue;
		if (n == cap) {
			cap = cap ? 2 * cap : 64;
			e = realloc(e, sizeof(*e) * (size_t)cap);
		}
		e[n++] = x;
	}
	be->dclose(h);
	for (int i = 0; i < n && rc >= 0; i++) {
		char child[4096];
		snprintf(child, sizeof child, "%s%s%s", path, strcmp(path, "/") ? "/" : "",
			 e[i].name);
		struct stat st;
		rc = be->lstat(be->ctx, child, &st);
		if (rc >= 0 && S_ISDIR(st.st_mode)) {
			rc = rm_tree(be, child);
			if (rc >= 0)
				rc = be->rmdir(be->ctx, child);
		} else if (rc >= 0) {
			rc = be->unlink(be->ctx, child);
		}
	}
	free(e);
	return rc;
}

/* Free pages plus metadata-pool pages of a mounted, emptied pool. */
int ct_space_after_rm(struct fm_backend *be, uint64_t *free_pages, uint64_t *meta);
int ct_space_after_rm(struct fm_backend *be, uint64_t *free_pages, uint64_t *meta)
{
	int rc = rm_tree(be, "/");
	if (rc < 0)
		return rc;
	ferrite_fs *fs = fm_ferrite_fs(be);
	struct statvfs sv;
	rc = ferrite_statvfs(fs, &sv);
	if (rc < 0)
		return rc;
	*free_pages = sv.f_bfree * sv.f_frsize / FR_PAGE_SIZE;
	*meta = meta_pages(fs);
	return 0;
}

/* A small create/write/read/remove cycle. */
static int probe(struct fm_backend *be, char *why, size_t len)
{
	static uint8_t out[10000], in[10000];
	fm_fill(out, sizeof out, 77);
	int fd = be->open(be->ctx, "/.ct-probe", O_CREAT | O_EXCL | O_RDWR, 0644);
	if (fd < 0) {
		snprintf(why, len, "creating a file fails: %s", fm_errname(fd));
		return -1;
	}
	ssize_t w = be->pwrite(be->ctx, fd, out, sizeof out, 123);
	ssize_t r = be->pread(be->ctx, fd, in, sizeof in, 123);
	be->close(be->ctx, fd);
	if (w != (ssize_t)sizeof out || r != (ssize_t)sizeof in || memcmp(in, out, sizeof in)) {
		snprintf(why, len, "a new file does not read back what was written (%zd, %zd)", w,
			 r);
		return -1;
	}
	int rc = be->mkdir(be->ctx, "/.ct-probe-d", 0755);
	if (rc >= 0)
		rc = be->rmdir(be->ctx, "/.ct-probe-d");
	if (rc >= 0)
		rc = be->unlink(be->ctx, "/.ct-probe");
	if (rc < 0) {
		snprintf(why, len, "mkdir/rmdir/unlink fail: %s", fm_errname(rc));
		return -1;
	}
	return 0;
}

/* ---- the recovery's own trace ------------------------------------------------------ */

struct rec_point {
	struct ct_point pt;
	uint64_t persist_mark; /* persist records before this instant */
};

struct rec_persist {
	uint64_t line;
	uint8_t old[CT_LINE];
};

struct rec_trace {
	struct rec_point *pts;
	int npts, cappts;
	struct rec_persist *ps;
	uint64_t nps, capps;
	int truncated;
};

static void rec_on_point(struct ct_model *m, const struct ct_point *pt, void *arg)
{
	(void)m;
	struct rec_trace *t = arg;
	if (pt->after)
		return;
	if (t->npts == 64) {
		t->truncated = 1;
		return;
	}
	if (t->npts == t->cappts) {
		t->cappts = t->cappts ? 2 * t->cappts : 8;
		t->pts = realloc(t->pts, sizeof(*t->pts) * (size_t)t->cappts);
	}
	struct rec_point *rp = &t->pts[t->npts++];
	rp->pt = *pt;
	rp->pt.units = malloc(sizeof(struct ct_unit) * (pt->nunits + 1));
	rp->pt.lines = malloc(sizeof(uint64_t) * (pt->nlines + 1));
	rp->pt.content = malloc((uint64_t)CT_LINE * (pt->nlines + 1));
	memcpy(rp->pt.units, pt->units, sizeof(struct ct_unit) * pt->nunits);
	memcpy(rp->pt.lines, pt->lines, sizeof(uint64_t) * pt->nlines);
	memcpy(rp->pt.content, pt->content, (uint64_t)CT_LINE * pt->nlines);
	rp->persist_mark = t->nps;
}

static void rec_on_persist(struct ct_model *m, uint64_t line, const uint8_t *old,
			   const uint8_t *new_, void *arg)
{
	(void)m;
	(void)new_;
	struct rec_trace *t = arg;
	if (t->nps == t->capps) {
		t->capps = t->capps ? 2 * t->capps : 256;
		t->ps = realloc(t->ps, sizeof(*t->ps) * t->capps);
	}
	t->ps[t->nps].line = line;
	memcpy(t->ps[t->nps].old, old, CT_LINE);
	t->nps++;
}

/* ---- judging ------------------------------------------------------------------------ */

struct judge {
	const struct ct_run *run;
	const struct ct_point *pt;
	uint64_t vid;
	FILE *report;
	char vdesc[400];
	int printed;
};

static void header(struct judge *j)
{
	if (j->printed++)
		return;
	const struct ct_run *run = j->run;
	char op[1000] = "(none)", cmd[1500];
	if (j->pt->op >= 0 && j->pt->op < run->w->nops)
		fm_op_str(&run->w->ops[j->pt->op], op, sizeof op);
	ct_replay_cmd(run, j->pt, j->vid, cmd, sizeof cmd);
	fprintf(j->report,
		"CRASH-STATE VIOLATION (%s mode, workload %s)\n"
		"  crash instant %llu: %s operation %d: %s\n"
		"  image %llu: %s\n"
		"  replay: %s\n",
		run->mode_name, run->w->name, (unsigned long long)j->pt->index,
		j->pt->after ? "right after" : "inside", j->pt->op, op, (unsigned long long)j->vid,
		j->vdesc, cmd);
}

static int violation(struct judge *j, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int violation(struct judge *j, const char *fmt, ...)
{
	header(j);
	va_list ap;
	va_start(ap, fmt);
	fprintf(j->report, "  ");
	vfprintf(j->report, fmt, ap);
	fprintf(j->report, "\n");
	va_end(ap);
	fflush(j->report);
	return VIOLATION;
}

static int read_file(const char *path, uint8_t **data, size_t *len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	struct stat st;
	if (fd < 0 || fstat(fd, &st) < 0)
		return -1;
	*len = (size_t)st.st_size;
	*data = malloc(*len ? *len : 1);
	size_t got = 0;
	while (got < *len) {
		ssize_t r = pread(fd, *data + got, *len - got, (off_t)got);
		if (r <= 0)
			break;
		got += (size_t)r;
	}
	close(fd);
	return got == *len ? 0 : -1;
}

/* Compares the recovered tree with the expected states; returns the state
 * index it equals or -1 (why filled). */
static int match_state(struct judge *j, struct fm_backend *sut, char *why, size_t whylen)
{
	const struct ct_run *run = j->run;
	int k = j->pt->op;
	char w1[2048] = "", w2[2048] = "";
	if (!j->pt->after) {
		struct fm_backend *before = fm_posix_new(run->state_dir[k], 0);
		int r = fm_tree_compare(sut, before, "/", NULL, w1, sizeof w1);
		fm_posix_free(before);
		if (r == 0)
			return k;
	}
	int lenient = !j->pt->after && run->mode == FERRITE_MODE_SYNC &&
		      ct_op_is_data(&run->w->ops[k]) && run->lenient[k][0];
	const char *after_dir = run->state_dir[k + 1];
	char copy[600];
	struct fm_lenient len;
	memset(&len, 0, sizeof len);
	if (lenient) {
		/* The comparison adopts torn bytes into the reference: use a copy. */
		snprintf(copy, sizeof copy, "%s/ref-%d", run->workdir, (int)getpid());
		char cmd[1400];
		snprintf(cmd, sizeof cmd, "rm -rf '%s' && cp -a '%s' '%s'", copy, after_dir, copy);
		if (system(cmd) != 0) {
			snprintf(why, whylen, "cannot copy the reference state %s", after_dir);
			return -1;
		}
		after_dir = copy;
		char oldp[1200], newp[1200];
		snprintf(oldp, sizeof oldp, "%s%s", run->state_dir[k], run->lenient[k]);
		snprintf(newp, sizeof newp, "%s%s", copy, run->lenient[k]);
		struct stat st;
		if (read_file(oldp, &len.old, &len.oldlen) == 0 && stat(newp, &st) == 0) {
			len.active = 1;
			len.ino = (uint64_t)st.st_ino;
			len.strict_append = 1;
		}
	}
	struct fm_backend *after = fm_posix_new(after_dir, 0);
	int r = fm_tree_compare(sut, after, "/", len.active ? &len : NULL, w2, sizeof w2);
	fm_posix_free(after);
	free(len.old);
	if (lenient) {
		char cmd[700];
		snprintf(cmd, sizeof cmd, "rm -rf '%s'", copy);
		if (system(cmd) != 0)
			fprintf(stderr, "crashtest: cannot remove %s\n", copy);
	}
	if (r == 0)
		return k + 1;
	if (j->pt->after)
		snprintf(why, whylen,
			 "the recovered tree lacks the completed operation %d (it must equal the "
			 "state after it): %s",
			 k, w2);
	else
		snprintf(why, whylen,
			 "the recovered tree is neither the state before operation %d nor after "
			 "it\n    vs before: %s\n    vs after:  %s",
			 k, w1, w2);
	return -1;
}

static int fsck_clean(struct judge *j, const char *img, const char *when)
{
	char why[4096];
	int r = fm_ferrite_fsck(img, why, sizeof why);
	if (r != FERRITE_FSCK_CLEAN)
		return violation(j, "fsck %s is not clean (%d):\n%s", when, r, why);
	return 0;
}

static uint64_t key_without_free(struct ct_model *m, ferrite_fs *fs, const struct ct_pages *pages);

/* A tiered pool has no free pages to leave out: its whole image is the key. */
static uint64_t recovered_key(const struct ct_run *run, struct ct_model *m, ferrite_fs *fs,
			      const struct ct_pages *pages)
{
	return run->mode == CT_MODE_TIER ? m->hash : key_without_free(m, fs, pages);
}

static void mark_touched(void *arg, uint64_t page)
{
	uint64_t *touched = arg;
	__atomic_or_fetch(&touched[page / 64], 1ULL << (page % 64), __ATOMIC_RELAXED);
}

/* One image of a crash during recovery, in a child of the checker. img is
 * that image; the checker's file differs from it at most in the pages stores
 * reached since it was written (touched, which then include this image's own
 * changes). It must recover to what the uninterrupted recovery gave: the same
 * pool contents, free pages aside (key), or at least the same tree (digest). */
static int check_nested(struct judge *j, struct ct_model *m, const char *path, uint8_t *img,
			uint64_t img_hash, const struct ct_pages *pages, uint64_t key,
			uint64_t digest)
{
	uint64_t *touched = pages->touched;
	int fd = open(path, O_RDWR | O_CLOEXEC);
	if (fd < 0 || ct_write_pages(fd, img, m->size, touched, NULL) < 0 || close(fd) < 0)
		return violation(j, "cannot write %s: %s", path, strerror(errno));
	m->auto_image = img;
	m->auto_hash = img_hash;
	m->auto_done = 0;
	m->on_point = NULL;
	m->on_persist = NULL;
	struct fm_backend *be = fm_ferrite_new(path);
	if (!be)
		return violation(j, "a crash during recovery leaves a pool that does not mount: %s",
				 ferrite_errmsg());
	ct_model_stop(m);
	uint64_t k = recovered_key(j->run, m, fm_ferrite_fs(be), pages);
	if (k == key) {
		/* The same contents as the uninterrupted recovery, which fsck
		 * already found clean. */
		fm_ferrite_unmount(be);
		return 0;
	}
	if (ct_tree_digest(be) != digest) {
		fm_ferrite_unmount(be);
		return violation(j, "a crash during recovery, then recovery, gives another tree "
				    "than one uninterrupted recovery");
	}
	fm_ferrite_unmount(be);
	return fsck_clean(j, path, "after a crash during recovery and a second recovery");
}

static int nested(struct judge *j, struct ct_model *m, struct rec_trace *t, uint8_t *post,
		  const char *img_path, const struct ct_pages *pages, uint64_t key, uint64_t digest,
		  struct ct_stats *st)
{
	uint64_t *touched = pages->touched;
	const struct ct_run *run = j->run;
	for (int p = t->npts - 1; p >= 0; p--) {
		/* Roll the persisted image back to this instant of the recovery. */
		struct rec_point *rp = &t->pts[p];
		uint64_t nmark = p + 1 < t->npts ? t->pts[p + 1].persist_mark : t->nps;
		for (uint64_t i = nmark; i-- > rp->persist_mark;) {
			memcpy(post + t->ps[i].line * CT_LINE, t->ps[i].old, CT_LINE);
			mark_touched(touched, t->ps[i].line * CT_LINE / FR_PAGE_SIZE);
		}
		uint64_t n = ct_variant_count(&rp->pt);
		if (n > (uint64_t)run->nested_max)
			n = (uint64_t)run->nested_max;
		uint8_t *take = malloc(rp->pt.nunits + 1);
		for (uint64_t vid = 0; vid < n; vid++) {
			struct ct_variant v = {take, -1, 0};
			ct_variant_get(&rp->pt, vid, run->seed, &v);
			/* The child writes these pages; the next image must too. */
			ct_variant_mark(&rp->pt, &v, mark_touched, touched);
			fflush(NULL);
			pid_t pid = fork();
			if (pid == 0) {
				uint64_t h = ct_variant_hash(&rp->pt, &v, post, NULL);
				ct_variant_apply(&rp->pt, &v, post, NULL, NULL);
				snprintf(j->vdesc + strlen(j->vdesc),
					 sizeof j->vdesc - strlen(j->vdesc),
					 "; then a crash at fence %d of its recovery (image %llu)",
					 p, (unsigned long long)vid);
				_exit(check_nested(j, m, img_path, post, h, pages, key, digest));
			}
			int rc = wait_child(pid, run->timeout_s);
			__atomic_add_fetch(&st->nested, 1, __ATOMIC_RELAXED);
			if (rc == VIOLATION) {
				free(take);
				return VIOLATION;
			}
			if (rc != 0) {
				free(take);
				return violation(
				    j,
				    rc < 0 ? "recovery of a crash during recovery hangs"
					   : "recovery of a crash during recovery crashes "
					     "(status %d)",
				    rc);
			}
		}
		free(take);
	}
	return 0;
}

/* The recovered state's hash over its allocated pages only: what a free page
 * holds never matters (every page is initialised before it is made
 * reachable), and images that differ only there recover alike. A free page
 * unchanged since recording began still has its base hash. */
static uint64_t key_without_free(struct ct_model *m, ferrite_fs *fs, const struct ct_pages *pages)
{
	struct space *sp = &fs->m.sp;
	uint64_t key = m->hash;
	for (uint64_t pg = sp->data_page; pg < sp->data_end_page; pg++) {
		if (bud_free_order(sp, NULL, pg) < 0)
			continue;
		int changed =
		    ((pages->changed[pg / 64] >> (pg % 64)) & 1) ||
		    ((__atomic_load_n(&pages->touched[pg / 64], __ATOMIC_RELAXED) >> (pg % 64)) &
		     1);
		key -= changed ? ct_page_hash(m->persisted, pg) : pages->base_hash[pg];
	}
	return key;
}

/* Step 6 of ct_check_image; unmounts sut. */
static int usable_and_empties(struct judge *j, struct fm_backend *sut, const char *img_path)
{
	const struct ct_run *run = j->run;
	char why[8192];
	if (probe(sut, why, sizeof why) < 0) {
		fm_ferrite_unmount(sut);
		return violation(j, "the recovered pool is not usable: %s", why);
	}
	uint64_t freep = 0, meta = 0;
	int rc = ct_space_after_rm(sut, &freep, &meta);
	fm_ferrite_unmount(sut);
	if (rc < 0)
		return violation(j, "removing everything from the recovered pool fails: %s",
				 fm_errname(rc));
	if (freep + meta != run->fresh_free + run->fresh_meta)
		return violation(
		    j,
		    "after removing everything, %llu pages are free and metadata "
		    "pools hold %llu; a fresh pool has %llu and %llu: %lld pages "
		    "leaked",
		    (unsigned long long)freep, (unsigned long long)meta,
		    (unsigned long long)run->fresh_free, (unsigned long long)run->fresh_meta,
		    (long long)(run->fresh_free + run->fresh_meta) - (long long)(freep + meta));
	return fsck_clean(j, img_path, "after removing everything");
}

int ct_check_image(const struct ct_run *run, uint8_t *image, uint64_t image_size,
		   uint64_t image_hash, const struct ct_point *pt, const struct ct_variant *v,
		   uint64_t vid, const char *img_path, const struct ct_pages *pages,
		   struct ct_stats *st, FILE *report)
{
	struct judge j = {run, pt, vid, report, "", 0};
	int tier = run->mode == CT_MODE_TIER;
	/* Recovery, fsck and the checks read the one backing directory every
	 * checker shares: none of them may write it. */
	struct ferrite_mount_opts held = {.tier_no_writeback = 1};
	fm_ferrite_set_mount_opts(tier ? &held : NULL);
	/* A bug planted in recovery lives in the checker, which recovers. */
	if (run->plant && !strcmp(run->plant, "tier-undo-mark-first"))
		pm_plant(run->plant);
	ct_variant_describe(pt, v, j.vdesc, sizeof j.vdesc);
	if (run->verbose)
		header(&j);
	char why[8192];

	/* 1. Recover, tracing the recovery. */
	struct rec_trace trace;
	memset(&trace, 0, sizeof trace);
	struct ct_model m;
	ct_model_init(&m, img_path);
	m.on_point = rec_on_point;
	m.on_persist = rec_on_persist;
	m.arg = &trace;
	m.auto_image = image;
	m.auto_hash = image_hash;
	m.touched = pages->touched;
	ct_model_install(&m); /* stays installed: every later store is counted */
	struct fm_backend *sut = fm_ferrite_new(img_path);
	if (!sut)
		return violation(&j, "the image does not mount: %s", ferrite_errmsg());
	uint64_t pending = ct_model_pending(&m);
	ct_model_stop(&m);
	if (pending)
		return violation(&j, "mount returned with %llu lines written but not persisted",
				 (unsigned long long)pending);
	uint64_t post = recovered_key(run, &m, fm_ferrite_fs(sut), pages);

	/* 2. A recovered state already judged for this instant. */
	uint64_t key = post + (uint64_t)(2 * (pt->op + 1) + pt->after) * 0x9E3779B97F4A7C15ULL;
	if (!run->keep && !ct_stats_insert(st, key)) {
		__atomic_add_fetch(&st->post_dups, 1, __ATOMIC_RELAXED);
		fm_ferrite_unmount(sut);
		return 0;
	}

	/* 3. Before or after the operation in flight. */
	int state = match_state(&j, sut, why, sizeof why);
	if (state < 0) {
		fm_ferrite_unmount(sut);
		return violation(&j, "%s", why);
	}
	uint64_t digest = ct_tree_digest(sut);
	if (fm_ferrite_unmount(sut) < 0)
		return violation(&j, "unmount after recovery fails: %s", ferrite_errmsg());

	/* 4. fsck. */
	int rc = fsck_clean(&j, img_path, "after recovery");
	if (rc)
		return rc;

	/* 5. Recovering twice. */
	sut = fm_ferrite_new(img_path);
	if (!sut)
		return violation(&j, "the recovered pool does not mount again: %s",
				 ferrite_errmsg());
	if (ct_tree_digest(sut) != digest) {
		fm_ferrite_unmount(sut);
		return violation(&j, "mounting the recovered pool again changes its tree");
	}

	/* 6. Usable, and removing everything gives the space back (a tiered
	 * pool's names live in the backing directory, which stays as it is). */
	if (tier) {
		fm_ferrite_unmount(sut);
	} else {
		rc = usable_and_empties(&j, sut, img_path);
		if (rc)
			return rc;
	}

	/* 7. Crashes during the recovery (they reuse the image file). */
	if (trace.npts && run->nested_max > 0) {
		rc = nested(&j, &m, &trace, image, img_path, pages, post, digest, st);
		if (rc)
			return rc;
	}
	if (run->verbose)
		fprintf(report, "  sound: recovered to the state %s operation %d\n",
			state == pt->op ? "before" : "after", pt->op);
	return 0;
}
