/*
 * fsck.c -- consistency check of an unmounted tiered pool.
 *
 * Checked: the superblock and tier header, the backing directory and its
 * identity, every record (state, key, path), every tag (names a record, at
 * most one version of a chunk, not beyond its file's size, no write left
 * incomplete), that every clean chunk holds what its backing file holds
 * below the file's size (cache.c C1: a clean chunk may be dropped at any
 * time, so a difference is data that changes by itself) and the epoch
 * journal. What a crash legitimately leaves
 * (interrupted writes, a pending journal entry, records of files removed or
 * never made durable) is settled first by recovery, as a mount would (like
 * the pm engine's log replay); whatever is left after that, and damage no
 * crash explains, is reported and left alone.
 *
 * Invariants: K1 every structure is checked by check.c (the checks mount
 *               uses) before any of its fields is used, and damage stops
 *               the run before recovery: nothing read from the pool sizes
 *               a buffer, indexes an array or bounds a loop unchecked;
 *             K2 without repair nothing is written -- not the pool, not the
 *               backing directory: recovery of the cache's own structures
 *               runs on a private copy-on-write view of the pool, and what
 *               only a mount settles in the backing directory (files made
 *               again, sizes set, removals finished) is reported, not done;
 *               backing files are read with O_NOATIME, through paths that
 *               cannot leave the backing directory.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "meta/meta.h"
#include "tier/sys.h"
#include "tier/tier.h"
#include "tier/tier_api.h"

struct check {
	fr_report_fn report;
	void *arg;
	uint64_t damaged;     /* not explained by a crash */
	uint64_t recoverable; /* a mount's recovery settles it */
};

/* A private, writable view of the pool: recovery runs there (K2). */
struct view {
	char *img;
	uint64_t size;
};

#define DAMAGE(k, ...)                                                                             \
	do {                                                                                       \
		(k)->damaged++;                                                                    \
		fr_report((k)->report, (k)->arg, __VA_ARGS__);                                     \
	} while (0)
#define PENDING(k, ...)                                                                            \
	do {                                                                                       \
		(k)->recoverable++;                                                                \
		fr_report((k)->report, (k)->arg, __VA_ARGS__);                                     \
	} while (0)

/* A clean chunk of a live record, for comparing with its backing file. */
struct clean_chunk {
	uint32_t fid;
	uint64_t c;
};

static int clean_chunk_cmp(const void *a, const void *b)
{
	const struct clean_chunk *x = a, *y = b;
	if (x->fid != y->fid)
		return x->fid < y->fid ? -1 : 1;
	return x->c < y->c ? -1 : x->c > y->c;
}

/* Opens the record's backing file by its path, if it is the record's file
 * (the same inode); -1 otherwise: what is not found is reported elsewhere.
 * O_NOATIME: checking must not change what the files show. */
static int open_rec_file(int bfd, const struct tier_rec *r, uint32_t fid, struct check *k)
{
	if (bfd < 0 || !tier_rec_path_ok(r))
		return -1;
	char path[TIER_PATH_MAX + 1];
	memcpy(path, r->r_path, r->r_pathlen);
	path[r->r_pathlen] = 0;
	int fd = tier_open_beneath(bfd, path, O_RDONLY | O_NOATIME, 0);
	if (fd == -EPERM) /* not its owner: no O_NOATIME */
		fr_report(k->report, k->arg,
			  "info: record %u: %s not compared with the cache (reading it would "
			  "change its access time; run as its owner or root)",
			  fid, path);
	struct stat st;
	if (fd >= 0 && (fstat(fd, &st) != 0 || (uint64_t)st.st_ino != r->r_ino)) {
		close(fd);
		fd = -1;
	}
	return fd;
}

/* Compares every clean chunk of a live record with its backing file below
 * the record's size (bytes past the backing file's end count as zeros). */
static void check_clean_chunks(const char *img, const struct tier_header *th, int bfd,
			       struct check *k, void (*progress)(void *, uint64_t, uint64_t),
			       void *parg)
{
	const struct tier_rec *recs = (const struct tier_rec *)(img + th->th_rec_off);
	const struct tier_desc *desc = (const struct tier_desc *)(img + th->th_desc_off);
	uint64_t nchunks = th->th_nslots * 2, n = 0;
	struct clean_chunk *cc = malloc(nchunks * sizeof(*cc));
	if (!cc) {
		DAMAGE(k, "out of memory comparing chunks with the backing files");
		return;
	}
	for (uint64_t c = 0; c < nchunks; c++) {
		uint64_t tag = desc[c].d_tag;
		uint32_t fid = tag_fid(tag);
		if ((tag & (TAG_V | TAG_D | TAG_C)) != TAG_V || !fid || fid >= th->th_nrecs ||
		    recs[fid].r_state != REC_LIVE ||
		    (tag_idx(tag) << TIER_CHUNK_SHIFT) >= recs[fid].r_size)
			continue;
		cc[n++] = (struct clean_chunk){fid, c};
	}
	qsort(cc, n, sizeof(*cc), clean_chunk_cmp);
	char buf[TIER_CHUNK_SIZE];
	int fd = -1;
	for (uint64_t i = 0; i < n; i++) {
		/* The second half of the progress: the first was the tags. */
		if (progress && i % 16384 == 0)
			progress(parg, nchunks + i * nchunks / n, 2 * nchunks);
		const struct tier_rec *r = &recs[cc[i].fid];
		if (!i || cc[i].fid != cc[i - 1].fid) {
			if (fd >= 0)
				close(fd);
			fd = open_rec_file(bfd, r, cc[i].fid, k);
		}
		if (fd < 0)
			continue;
		uint64_t idx = tag_idx(desc[cc[i].c].d_tag), at = idx << TIER_CHUNK_SHIFT;
		uint64_t len = FR_MIN((uint64_t)TIER_CHUNK_SIZE, r->r_size - at), got = 0;
		ssize_t m = 1;
		while (got < len && m > 0) {
			m = tsys_pread(fd, buf + got, len - got, (off_t)(at + got));
			if (m < 0 && errno == EINTR)
				m = 1;
			else if (m > 0)
				got += (uint64_t)m;
		}
		if (m < 0) {
			DAMAGE(k, "record %u: reading its backing file %.*s: %s", cc[i].fid,
			       (int)r->r_pathlen, r->r_path, strerror(errno));
			close(fd);
			fd = -1;
			continue;
		}
		memset(buf + got, 0, len - got);
		const char *chunk = img + th->th_data_off + cc[i].c * TIER_CHUNK_SIZE;
		if (memcmp(chunk, buf, len) != 0) {
			uint64_t b = 0;
			while (chunk[b] == buf[b])
				b++;
			DAMAGE(k,
			       "chunk %llu: clean, but record %u's backing file %.*s holds other "
			       "bytes from offset %llu",
			       (unsigned long long)cc[i].c, cc[i].fid, (int)r->r_pathlen, r->r_path,
			       (unsigned long long)(at + b));
		}
	}
	if (fd >= 0)
		close(fd);
	free(cc);
}

/* Maps the pool read-only (shared: nothing is written through it). */
static char *map_pool(const char *pool, uint64_t *size, struct check *k)
{
	int fd = open(pool, O_RDONLY | O_CLOEXEC);
	struct stat st;
	if (fd < 0 || fstat(fd, &st) != 0) {
		DAMAGE(k, "%s: cannot open: %s", pool, strerror(errno));
		if (fd >= 0)
			close(fd);
		return NULL;
	}
	struct fr_super sb;
	const char *why = "too short to be a ferrite pool";
	if (pread(fd, &sb, sizeof sb, 0) != (ssize_t)sizeof sb ||
	    meta_super_check_common(&sb, (uint64_t)st.st_size, &why) != 0) {
		DAMAGE(k, "superblock: %s", why);
		close(fd);
		return NULL;
	}
	*size = sb.sb_pool_size;
	char *img = mmap(NULL, *size, PROT_READ, MAP_SHARED, fd, 0);
	close(fd);
	if (img == MAP_FAILED) {
		DAMAGE(k, "cannot map the pool: %s", strerror(errno));
		return NULL;
	}
	return img;
}

/* The records: damage (check.c), and what a mount's recovery settles. */
static void check_records(const struct tier_geom *g, int bfd, struct check *k)
{
	const struct tier_header *th = g->th;
	char why[512];
	for (uint32_t fid = 1; fid < g->nrecs; fid++) {
		const struct tier_rec *r = &g->recs[fid];
		if (tier_rec_check(g, fid, why, sizeof why) != 0) {
			DAMAGE(k, "%s", why);
			continue;
		}
		if (r->r_state == REC_FREE)
			continue;
		if (r->r_state == REC_DYING)
			PENDING(k, "record %u: a removal was interrupted", fid);
		else if (r->r_state == REC_ORPHAN)
			PENDING(k, "record %u: a removed file was still open at a crash", fid);
		if (r->r_pathlen && !tier_rec_path_ok(r))
			PENDING(k, "record %u: its path was being changed", fid);
		if (r->r_state != REC_LIVE || bfd < 0 || !tier_rec_path_ok(r))
			continue;
		char path[TIER_PATH_MAX + 1];
		memcpy(path, r->r_path, r->r_pathlen);
		path[r->r_pathlen] = 0;
		struct stat fst;
		int fd = tier_open_beneath(bfd, path, O_PATH, 0);
		int found = fd >= 0 && fstat(fd, &fst) == 0 && (uint64_t)fst.st_ino == r->r_ino;
		if (fd >= 0)
			close(fd);
		if (!found)
			PENDING(k, "record %u: %s/%s is not in the backing directory", fid,
				th->th_backing, path);
		else if ((uint64_t)fst.st_size > r->r_size)
			PENDING(k, "record %u: %s/%s is longer than the file (%llu > %llu)", fid,
				th->th_backing, path, (unsigned long long)fst.st_size,
				(unsigned long long)r->r_size);
	}
}

/* Checks the image img (size bytes). settled: recovery has run, so what a
 * crash leaves in flight (a chunk beside its interrupted replacement) no
 * longer is: clean chunks are compared with the backing files too. */
static void check_image(const char *img, uint64_t size, struct check *k, int settled,
			void (*progress)(void *, uint64_t, uint64_t), void *parg)
{
	const struct tier_header *th = (const struct tier_header *)(img + TIER_HDR_OFF);
	char why[512];
	if (tier_header_check(th, size, why, sizeof why) != 0) {
		DAMAGE(k, "%s", why);
		return;
	}
	struct tier_geom g;
	tier_geom_init(&g, img, size);
	int bfd = tsys_openat(AT_FDCWD, th->th_backing, O_PATH | O_DIRECTORY | O_CLOEXEC, 0);
	char uuid[37];
	meta_uuid_str(((const struct fr_super *)img)->sb_uuid, uuid);
	if (bfd < 0) {
		int e = errno;
		DAMAGE(k, "backing directory %s: %s%s", th->th_backing, strerror(e),
		       e == ENOENT ? " (if it moved: `ferrite tune --backing NEWDIR POOL`)" : "");
	} else if (tier_backing_identity(bfd, th->th_backing, th, uuid, why, sizeof why) != 0) {
		DAMAGE(k, "%s", why); /* nothing in it is this pool's */
		close(bfd);
		bfd = -1;
	}
	check_records(&g, bfd, k);
	const struct tier_rec *recs = g.recs;
	const struct tier_desc *desc = g.desc;
	uint64_t nchunks = g.nchunks;
	for (uint64_t c = 0; c < nchunks; c++) {
		if (progress && c % 65536 == 0)
			progress(parg, c, settled ? 2 * nchunks : nchunks);
		uint64_t tag = desc[c].d_tag;
		if (!(tag & TAG_V))
			continue;
		if (tier_desc_check(&g, c, why, sizeof why) != 0) {
			DAMAGE(k, "%s", why);
			continue;
		}
		uint32_t fid = tag_fid(tag);
		if (recs[fid].r_state == REC_FREE) {
			DAMAGE(k, "chunk %llu: belongs to no file (record %u)",
			       (unsigned long long)c, fid);
			continue;
		}
		if (tag & TAG_C)
			PENDING(k, "chunk %llu: %s", (unsigned long long)c,
				th->th_consistency == TIER_EPOCH ? "a page of an unfinished epoch"
								 : "a write was interrupted");
		else if ((tag_idx(tag) << TIER_CHUNK_SHIFT) >= recs[fid].r_size)
			PENDING(k, "chunk %llu: beyond the end of its file", (unsigned long long)c);
		if ((c & 1) && (desc[c - 1].d_tag & TAG_V) && tag_same(desc[c - 1].d_tag, tag))
			PENDING(k,
				"slot %llu: two versions of one chunk (an overwrite was cut short)",
				(unsigned long long)(c / 2));
	}
	int pending = 0;
	if (tier_journal_check(&g, &pending, why, sizeof why) != 0)
		DAMAGE(k, "%s", why);
	else if (pending)
		PENDING(k, "epoch %llu: its journal entry is not applied yet",
			(unsigned long long)g.journal->ej_epoch);
	if (settled && !k->damaged)
		check_clean_chunks(img, th, bfd, k, progress, parg);
	if (progress)
		progress(parg, nchunks, nchunks);
	if (bfd >= 0)
		close(bfd);
}

static void check_pool(const char *pool, struct check *k, int settled,
		       void (*progress)(void *, uint64_t, uint64_t), void *parg)
{
	uint64_t size;
	char *img = map_pool(pool, &size, k);
	if (!img)
		return;
	check_image(img, size, k, settled, progress, parg);
	munmap(img, size);
}

/* Recovery of the cache's own structures -- the epoch journal, interrupted
 * writes, two versions of a chunk, chunks beyond their file -- as a mount
 * does it, on a private copy-on-write mapping of the pool (K2), in v.
 * Returns 0 or -errno. What recovery does in the backing directory is left
 * out: check_records() reports it. */
static int recover_view(const char *pool, struct view *v)
{
	struct check quiet = {NULL, NULL, 0, 0};
	char *shared = map_pool(pool, &v->size, &quiet);
	if (!shared)
		return -EIO;
	munmap(shared, v->size);
	int fd = open(pool, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	v->img = mmap(NULL, v->size, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
	if (v->img == MAP_FAILED) {
		/* A device (devdax) maps shared only: a copy in DRAM. */
		v->img = mmap(NULL, v->size, PROT_READ | PROT_WRITE,
			      MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
		for (uint64_t got = 0; v->img != MAP_FAILED && got < v->size;) {
			ssize_t m = pread(fd, v->img + got, v->size - got, (off_t)got);
			if (m <= 0) {
				munmap(v->img, v->size);
				v->img = MAP_FAILED;
			} else {
				got += (uint64_t)m;
			}
		}
	}
	close(fd);
	if (v->img == MAP_FAILED) {
		v->img = NULL;
		return -ENOMEM;
	}
	struct tier *t = calloc(1, sizeof(*t));
	if (!t)
		return -ENOMEM;
	t->h.ops = &tier_ops;
	t->root_fd = -1;
	t->pool.fd = -1;
	t->pool.size = v->size;
	t->base = v->img;
	t->sb = (struct fr_super *)v->img;
	t->th = (struct tier_header *)(v->img + TIER_HDR_OFF);
	t->nslots = t->th->th_nslots;
	t->nchunks = t->nslots * 2;
	t->nrecs = t->th->th_nrecs;
	t->desc = (struct tier_desc *)(v->img + t->th->th_desc_off);
	t->data = v->img + t->th->th_data_off;
	t->recs = (struct tier_rec *)(v->img + TIER_REC_OFF);
	t->consistency = (int)t->th->th_consistency;
	for (int i = 0; i < TIER_SLOT_LOCKS; i++)
		pthread_mutex_init(&t->slot_locks[i], NULL);
	pthread_rwlock_init(&t->epoch_lock, NULL);
	t->dirty_bits = calloc((t->nchunks + 63) / 64, sizeof(uint64_t));
	int rc = t->dirty_bits ? tier_files_init(t) : -ENOMEM;
	if (!rc && t->consistency == TIER_EPOCH)
		rc = tier_epoch_recover(t);
	if (!rc)
		rc = tier_recover_chunks(t);
	tier_files_fini(t);
	free(t->dirty_bits);
	free(t);
	return rc;
}

static int tier_fsck_locked(const char *pool, int repair, fr_report_fn report, void *report_arg,
			    void (*progress)(void *arg, uint64_t done, uint64_t total),
			    void *progress_arg, struct pool *p);

int tier_fsck(const char *pool, int repair, void (*report)(void *arg, const char *line),
	      void *report_arg, void (*progress)(void *arg, uint64_t done, uint64_t total),
	      void *progress_arg)
{
	fr_err_clear();
	if (!pool)
		pool = ferrite_default_pool();
	/* Nobody may use the pool meanwhile: held to the end without repair,
	 * until the mount that recovers with it. */
	struct pool p;
	int rc = pool_open(&p, pool, repair ? 0 : POOL_PRIVATE); /* -n: read-only (K2) */
	if (rc)
		return fr_err_finish(rc);
	/* An interrupted `ferrite tune` first (tune.c T3): the checks below
	 * read the primaries. */
	int fixed = 0;
	int left = tier_backups_fix(p.fd, p.file_size, repair, report, report_arg, &fixed);
	rc = tier_fsck_locked(pool, repair, report, report_arg, progress, progress_arg, &p);
	if (p.fd >= 0)
		pool_close(&p);
	if (rc >= 0 && fixed)
		rc |= FERRITE_FSCK_CORRECTED;
	if (rc >= 0 && left)
		rc |= FERRITE_FSCK_UNCORRECTED;
	return rc;
}

static int tier_fsck_locked(const char *pool, int repair, fr_report_fn report, void *report_arg,
			    void (*progress)(void *arg, uint64_t done, uint64_t total),
			    void *progress_arg, struct pool *p)
{
	int rc;
	/* Damage first: recovery must not run on a pool it cannot explain. */
	struct check k = {NULL, NULL, 0, 0};
	check_pool(pool, &k, 0, NULL, NULL);
	if (k.damaged) {
		struct check again = {report, report_arg, 0, 0};
		check_pool(pool, &again, 0, progress, progress_arg);
		return FERRITE_FSCK_UNCORRECTED;
	}
	/* Then recovery, as a mount does it (it is normal after a crash). */
	if (k.recoverable)
		fr_report(report, report_arg,
			  "info: %llu item(s) left by an interruption; %s (normal after a crash)",
			  (unsigned long long)k.recoverable,
			  repair ? "recovering them as a mount would"
				 : "checking as a mount's recovery would leave them, changing "
				   "nothing");
	if (!repair) {
		struct view v = {NULL, 0};
		rc = recover_view(pool, &v);
		if (rc) {
			if (v.img)
				munmap(v.img, v.size);
			fr_report(report, report_arg, "recovery (on a private view) failed: %s",
				  fr_err_isset() ? fr_err_get() : strerror(-rc));
			return FERRITE_FSCK_UNCORRECTED;
		}
		struct check after = {report, report_arg, 0, 0};
		check_image(v.img, v.size, &after, 1, progress, progress_arg);
		munmap(v.img, v.size);
		/* What is left pending, only a mount settles (in the backing
		 * directory): reported above, and not an error. */
		return after.damaged ? FERRITE_FSCK_UNCORRECTED : FERRITE_FSCK_CLEAN;
	}
	pool_close(p); /* the mount takes it */
	p->fd = -1;
	ferrite_fs *fs;
	rc = tier_mount(pool, NULL, &fs);
	if (rc) {
		fr_report(report, report_arg, "recovery failed: %s", fr_err_get());
		return FERRITE_FSCK_UNCORRECTED;
	}
	tier_unmount(fs);
	struct check after = {report, report_arg, 0, 0};
	check_pool(pool, &after, 1, progress, progress_arg);
	return after.damaged || after.recoverable ? FERRITE_FSCK_UNCORRECTED : FERRITE_FSCK_CLEAN;
}
