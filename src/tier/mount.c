/*
 * mount.c -- tiered pools: format, mount (with recovery), unmount,
 * inspection and check.
 *
 * Invariants: M1 mkfs writes the superblock last (U1 of meta/super.c), after
 *               the tier header, zeroed records and zeroed descriptors;
 *             M2 a pool is attached only to the directory it was formatted
 *               for: the pool's UUID in the directory's user.ferrite.pool
 *               attribute, or where the file system keeps no attributes, the
 *               directory's inode number and birth time;
 *             M3 mount completes or undoes what a crash interrupted before
 *               anything else runs, then drains every dirty chunk; unmount
 *               drains too, so a clean pool's backing directory holds
 *               everything. A backing directory that refuses the writes
 *               fails neither: the chunks stay dirty in the pool (a message
 *               says so) and the flusher or the next mount tries again;
 *             M4 before M3, every structure of the pool passes its check
 *               (check.c K1-K4), or the mount fails with -EUCLEAN having
 *               changed nothing: recovery and the runtime use the fields as
 *               they are. th_key_next and th_seq, outside the checksum, are
 *               clamped where read.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "meta/meta.h"
#include "tier/sys.h"
#include "tier/tier.h"
#include "tier/tier_api.h"

#define MIN_POOL      (16 * FR_MIB)
#define JOURNAL_SIZE  (1 * FR_MIB)
#define POOL_XATTR    "user.ferrite.pool"
#define MAX_PERIOD_MS 60000

/* ---- geometry ------------------------------------------------------------------ */

struct layout {
	uint32_t nrecs;
	uint64_t journal_off, journal_size, desc_off, data_off, nslots;
};

static int plan(uint64_t size, int consistency, struct layout *l)
{
	uint64_t nrecs = size >> 16;
	nrecs = FR_MAX(nrecs, (uint64_t)256);
	nrecs = FR_MIN(nrecs, (uint64_t)1 << 20);
	l->nrecs = (uint32_t)nrecs;
	uint64_t rec_end = TIER_REC_OFF + nrecs * TIER_REC_SIZE;
	l->journal_off = FR_ALIGN_UP(rec_end, (uint64_t)4096);
	l->journal_size = consistency == TIER_EPOCH ? JOURNAL_SIZE : 0;
	l->desc_off = FR_ALIGN_UP(l->journal_off + l->journal_size, (uint64_t)4096);
	if (size < l->desc_off + 2 * FR_UNIT_SIZE)
		return -EINVAL;
	uint64_t nchunks = (size - l->desc_off - FR_UNIT_SIZE) / (TIER_CHUNK_SIZE + 64);
	nchunks &= ~1ULL;
	for (;;) {
		l->data_off = FR_ALIGN_UP(l->desc_off + nchunks * 64, FR_UNIT_SIZE);
		if (l->data_off + nchunks * TIER_CHUNK_SIZE <= size)
			break;
		nchunks -= 2;
	}
	l->nslots = nchunks / 2;
	return l->nslots >= 16 ? 0 : -EINVAL;
}

/* ---- mkfs ------------------------------------------------------------------------ */

/* The options mkfs takes for a tiered pool, and the backing directory's
 * fitness: a writable directory whose path fits the header, that does not
 * hold the pool and that no other pool names (unless forced). backing:
 * its real path; *bst: its stat. */
static int mkfs_check(const char *path, const struct ferrite_mkfs_opts *o, char backing[PATH_MAX],
		      struct stat *bst)
{
	if (o->tier_consistency != FERRITE_TIER_PER_WRITE &&
	    o->tier_consistency != FERRITE_TIER_EPOCH)
		return fr_err(-EINVAL, "unknown consistency %d", o->tier_consistency);
	if (o->mode != FERRITE_MODE_SYNC)
		return fr_err(-EINVAL, "a tiered pool has no strict mode: every write is atomic in "
				       "per-write consistency");
	if (o->tier_flush_ms > MAX_PERIOD_MS || o->tier_epoch_ms > MAX_PERIOD_MS)
		return fr_err(-EINVAL, "periods are at most %d ms", MAX_PERIOD_MS);
	if (o->tier_writeback != FERRITE_TIER_WB_CACHED &&
	    o->tier_writeback != FERRITE_TIER_WB_DIRECT)
		return fr_err(-EINVAL, "unknown write-back %d", o->tier_writeback);
	if (!realpath(o->tier_backing, backing))
		return fr_err(-errno, "backing directory %s: %s", o->tier_backing, strerror(errno));
	if (tsys_stat(backing, bst) != 0 || !S_ISDIR(bst->st_mode))
		return fr_err(-ENOTDIR, "%s is not a directory", backing);
	if (strlen(backing) >= TIER_BACKING_MAX)
		return fr_err(-ENAMETOOLONG, "backing directory path too long");
	struct statvfs sv;
	if ((tsys_statvfs(backing, &sv) == 0 && (sv.f_flag & ST_RDONLY)) ||
	    tsys_access(backing, W_OK) != 0)
		return fr_err(-EROFS, "backing directory %s is not writable", backing);
	/* The pool must not be inside the tree it caches. */
	char pooldir[PATH_MAX], tmp[PATH_MAX];
	snprintf(tmp, sizeof tmp, "%s", path);
	char *slash = strrchr(tmp, '/');
	if (slash)
		*slash = 0;
	if (realpath(slash ? (tmp[0] ? tmp : "/") : ".", pooldir)) {
		size_t bl = strlen(backing);
		if (!strncmp(pooldir, backing, bl) && (pooldir[bl] == '/' || !pooldir[bl]))
			return fr_err(-EINVAL, "the pool %s lies inside its backing directory %s",
				      path, backing);
	}
	char owner[64] = "";
	ssize_t on = tsys_getxattr(backing, POOL_XATTR, owner, sizeof owner - 1);
	if (on > 0 && !o->force) {
		owner[on] = 0;
		return fr_err(-EEXIST,
			      "%s is already the backing directory of pool %s (use --force to "
			      "bind it to a new pool)",
			      backing, owner);
	}
	return 0;
}

/* The tier header (and the epoch journal's), in a pool whose superblock is
 * not written yet (M1). */
static void mkfs_write_header(char *base, const struct layout *l, const struct ferrite_mkfs_opts *o,
			      const char *backing, const struct stat *bst)
{
	struct tier_header th;
	memset(&th, 0, sizeof th);
	th.th_magic = TIER_MAGIC;
	th.th_chunk_size = TIER_CHUNK_SIZE;
	th.th_consistency = (uint32_t)o->tier_consistency;
	th.th_nslots = l->nslots;
	th.th_desc_off = l->desc_off;
	th.th_data_off = l->data_off;
	th.th_rec_off = TIER_REC_OFF;
	th.th_nrecs = l->nrecs;
	th.th_rec_size = TIER_REC_SIZE;
	th.th_journal_off = l->journal_off;
	th.th_journal_size = l->journal_size;
	th.th_flush_ms = o->tier_flush_ms ? o->tier_flush_ms : 10;
	th.th_epoch_ms = o->tier_epoch_ms ? o->tier_epoch_ms : 10;
	th.th_writeback = (uint32_t)o->tier_writeback;
	th.th_backing_ino = (uint64_t)bst->st_ino;
	int bfd = tsys_openat(AT_FDCWD, backing, O_PATH | O_DIRECTORY | O_CLOEXEC, 0);
	th.th_backing_btime = bfd >= 0 ? tier_btime(bfd) : 0;
	if (bfd >= 0)
		close(bfd);
	memcpy(th.th_backing, backing, strlen(backing) + 1); /* checked: it fits */
	th.th_csum = tier_header_csum(&th);
	pm_copy_flush(base + TIER_HDR_OFF, &th, sizeof th);
	if (l->journal_size) {
		struct tier_ejournal j;
		memset(&j, 0, sizeof j);
		j.ej_magic = EJ_MAGIC;
		pm_copy_flush(base + l->journal_off, &j, sizeof j);
	}
}

/* mkfs of a tiered pool: meta's common steps (meta_mkfs_prepare), then
 * everything zeroed, the tier header, and the superblock last (M1); the
 * backing directory names the pool once it exists (M2). */
int tier_mkfs(const char *path, const struct ferrite_mkfs_opts *o)
{
	fr_err_clear();
	if (!path)
		path = ferrite_default_pool();
	char backing[PATH_MAX];
	struct stat bst;
	int rc = mkfs_check(path, o, backing, &bst);
	if (rc)
		return fr_err_finish(rc);
	struct pool p;
	struct meta_mkfs_params prm = {.size = o->size,
				       .progress = o->progress,
				       .progress_arg = o->progress_arg,
				       .force = o->force};
	uint64_t size;
	struct layout l;
	memset(&l, 0, sizeof l);
	rc = meta_mkfs_prepare(&p, path, &prm, &size);
	if (!rc && plan(size, o->tier_consistency, &l) != 0)
		rc = fr_err(-EINVAL, "%s: pool size must be at least %llu MiB", path,
			    (unsigned long long)(MIN_POOL >> 20));
	if (rc)
		return fr_err_finish(meta_mkfs_finish(&p, rc));
	char *base = p.base;
	pm_zero_nt(base, l.data_off); /* M1: nothing valid until the superblock */
	pm_fence();
	mkfs_write_header(base, &l, o, backing, &bst);
	pm_fence();
	struct fr_super sb;
	meta_super_init(&sb, size, SB_INCOMPAT_TIER);
	sb.sb_checksum = meta_super_csum(&sb);
	pm_copy_flush(base, &sb, sizeof sb); /* COMMIT POINT of mkfs */
	pm_fence();
	meta_mkfs_finish(&p, 0);
	char uuid[37];
	meta_uuid_str(sb.sb_uuid, uuid);
	/* M2: the directory names its pool (where attributes exist). */
	tsys_setxattr(backing, POOL_XATTR, uuid, 36, 0);
	return fr_err_finish(0);
}

/* ---- recovery ---------------------------------------------------------------------- */

struct incomplete {
	uint64_t seq, old_size, new_size;
	uint32_t fid;
};

static int seq_cmp(const void *a, const void *b)
{
	uint64_t x = ((const struct incomplete *)a)->seq, y = ((const struct incomplete *)b)->seq;
	return x < y ? -1 : x > y;
}

/* The sizes incomplete writes changed go back (while their C chunks, which
 * remember them, are still there). */
static void undo_sizes(struct tier *t, const struct incomplete *inc, size_t ninc)
{
	for (size_t i = 0; i < ninc; i++) {
		struct tier_rec *r = inc[i].fid < t->nrecs ? &t->recs[inc[i].fid] : NULL;
		if (r && r->r_state != REC_FREE && r->r_size == inc[i].new_size &&
		    inc[i].new_size != inc[i].old_size) {
			pm_store8(&r->r_size, inc[i].old_size);
			pm_flush(&r->r_size, 8);
			struct tier_file *tf = tier_file_at(t, inc[i].fid);
			if (tf)
				tf->size = (int64_t)inc[i].old_size;
		}
	}
}

int tier_recover_chunks(struct tier *t)
{
	/* th_seq is a hint outside the header's checksum; descriptors of
	 * valid chunks were checked (K3), invalid ones may hold anything. */
	uint64_t maxseq = t->th->th_seq <= TIER_SEQ_MAX ? t->th->th_seq : 0, recovered = 0;
	size_t ninc = 0, capinc = 16;
	struct incomplete *inc = malloc(capinc * sizeof(*inc));
	if (!inc)
		return -ENOMEM;
	/* The DRAM counts of the tags as found. */
	for (uint64_t c = 0; c < t->nchunks; c++) {
		struct tier_desc *d = chunk_desc(t, c);
		uint64_t tag = d->d_tag;
		if (d->d_seq <= TIER_SEQ_MAX)
			maxseq = FR_MAX(maxseq, d->d_seq);
		if (!(tag & TAG_V))
			continue;
		uint32_t fid = tag_fid(tag);
		struct tier_file *tf = tier_file_at(t, fid);
		if (tf)
			tf->nvalid++;
		t->nvalid++;
		if (tag & TAG_D) {
			if (tf)
				tf->ndirty++;
			tier_dirty_mark(t, c, 1);
		}
		if ((tag & TAG_C) && t->consistency == TIER_PER_WRITE) {
			if (ninc == capinc) {
				capinc *= 2;
				struct incomplete *n = realloc(inc, capinc * sizeof(*inc));
				if (!n) {
					free(inc);
					return -ENOMEM;
				}
				inc = n;
			}
			inc[ninc++] =
			    (struct incomplete){d->d_seq, d->d_old_size, d->d_new_size, fid};
		}
	}
	t->seq = maxseq + 1;
	/* Writes of several chunks whose C is still set: every chunk they
	 * wrote goes, the versions they replaced stay; their sizes go back.
	 * The chunk carrying C goes last, after a fence: until then a crash
	 * of this recovery leaves the mark for the next one to finish the
	 * undo (without it, a new chunk left behind would win over the
	 * version it replaced, and the write would show half done). */
	qsort(inc, ninc, sizeof(*inc), seq_cmp);
	if (ninc) {
		for (int marks = 0; marks < 2; marks++) {
			for (uint64_t c = 0; c < t->nchunks; c++) {
				struct tier_desc *d = chunk_desc(t, c);
				int pass =
				    PM_PLANTED(PM_PLANT_TIER_UNDO_MARK_FIRST) ? !marks : marks;
				if (!(d->d_tag & TAG_V) || !!(d->d_tag & TAG_C) != pass)
					continue;
				struct incomplete key = {.seq = d->d_seq};
				if (bsearch(&key, inc, ninc, sizeof(*inc), seq_cmp)) {
					tier_set_tag(t, c, 0);
					recovered++;
				}
			}
			if (!marks) {
				undo_sizes(t, inc, ninc);
				pm_fence();
			}
		}
	}
	free(inc);
	pm_fence();
	for (uint64_t s = 0; s < t->nslots; s++) {
		uint64_t a = 2 * s, b = a + 1;
		uint64_t ta = tag_of(t, a), tb = tag_of(t, b);
		/* Two versions of one chunk: an overwrite was cut short after the
		 * new one was tagged; the newer wins. */
		if ((ta & TAG_V) && (tb & TAG_V) && tag_same(ta, tb)) {
			int keep_a = (ta & TAG_N) && !(tb & TAG_N) ? 1
				     : (tb & TAG_N) && !(ta & TAG_N)
					 ? 0
					 : chunk_desc(t, a)->d_seq > chunk_desc(t, b)->d_seq;
			tier_set_tag(t, keep_a ? b : a, 0);
			uint64_t kt = keep_a ? ta : tb;
			if (!(kt & TAG_N))
				tier_set_tag(t, keep_a ? a : b, kt | TAG_N);
			recovered++;
		}
	}
	/* Chunks of no file, or wholly beyond their file's size (C3). */
	for (uint64_t c = 0; c < t->nchunks; c++) {
		uint64_t tag = tag_of(t, c);
		if (!(tag & TAG_V))
			continue;
		uint32_t fid = tag_fid(tag);
		struct tier_rec *r = fid && fid < t->nrecs ? &t->recs[fid] : NULL;
		if (!r || r->r_state == REC_FREE || !tier_file_at(t, fid) ||
		    (tag_idx(tag) << TIER_CHUNK_SHIFT) >= r->r_size) {
			tier_set_tag(t, c, 0);
			recovered++;
		}
	}
	pm_fence();
	tier_count(t, TS_RECOVERED, recovered);
	return 0;
}

/* ---- live statistics ---------------------------------------------------------------- */

static void stats_path(char *buf, size_t n, const char *uuid)
{
	snprintf(buf, n, "/dev/shm/ferrite-tier-%s.stats", uuid);
}

/* The stats file lives in /dev/shm, where every user can create files: one
 * planted there (a symlink to a file of root's, or a file of another user)
 * must not be written or believed (docs/security.md). It is made with
 * O_EXCL; an existing one (left by a killed mount, or a copy of this pool's)
 * is taken only if it is no symlink, a regular file with one link, ours, and
 * nobody else can write it. Returns the descriptor, or -errno with *why set
 * when a file is there that is refused. */
static int stats_file_open(const char *path, mode_t mode, const char **why)
{
	*why = NULL;
	int fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
	if (fd >= 0)
		return fd;
	if (errno != EEXIST)
		return -errno;
	fd = open(path, O_RDWR | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0) {
		int e = errno;
		*why = e == ELOOP ? "it is a symlink" : strerror(e);
		return -e;
	}
	struct stat st;
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_nlink != 1)
		*why = "it is not a plain file";
	else if (st.st_uid != geteuid())
		*why = "it belongs to another user";
	else if (st.st_mode & (S_IWGRP | S_IWOTH))
		*why = "other users can write it";
	if (*why) {
		close(fd);
		return -EPERM;
	}
	return fd;
}

/* Is the stats file at fd one `ferrite stats` may believe? Its owner is
 * root, the caller or the pool's owner, and nobody else can write it. */
static int stats_file_trusted(int fd, uid_t pool_owner)
{
	struct stat st;
	return fstat(fd, &st) == 0 && S_ISREG(st.st_mode) &&
	       (st.st_uid == 0 || st.st_uid == geteuid() || st.st_uid == pool_owner) &&
	       !(st.st_mode & (S_IWGRP | S_IWOTH));
}

static void stats_open(struct tier *t)
{
	stats_path(t->live_path, sizeof t->live_path, t->uuid);
	/* Never truncated: a copy of this pool (same UUID) mounted by another
	 * process may have it mapped, and shrinking it would kill that one.
	 * Readable by whoever can read the pool. */
	struct stat pst;
	mode_t mode = fstat(t->pool.fd, &pst) == 0 ? (pst.st_mode & 0644) | 0600 : 0600;
	const char *why;
	int fd = stats_file_open(t->live_path, mode, &why);
	if (fd < 0 && why)
		fprintf(stderr,
			"ferrite: %s: not used for this mount's live statistics: %s (remove it; "
			"`ferrite stats` shows the counters once the pool is unmounted)\n",
			t->live_path, why);
	if (fd < 0)
		return;
	struct tier_live_stats *s = MAP_FAILED;
	struct stat st;
	if (fstat(fd, &st) == 0 &&
	    (st.st_size >= (off_t)sizeof(*s) || ftruncate(fd, sizeof(*s)) == 0))
		s = mmap(NULL, sizeof(*s), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	if (s == MAP_FAILED) {
		unlink(t->live_path);
		return;
	}
	memset(s, 0, sizeof(*s));
	memcpy(s->counters, t->th->th_stats, sizeof s->counters);
	s->pid = getpid();
	s->nchunks = t->nchunks;
	s->magic = TIER_STATS_MAGIC;
	t->live = s;
}

static void stats_close(struct tier *t)
{
	const uint64_t *src = t->live ? t->live->counters : t->local_stats;
	uint64_t save[TIER_NSTATS];
	memcpy(save, src, sizeof save);
	if (!t->live)
		for (int i = 0; i < TIER_NSTATS; i++)
			save[i] += t->th->th_stats[i];
	pm_store(t->th->th_stats, save, sizeof save);
	pm_store8(&t->th->th_seq, t->seq);
	pm_flush(&t->th->th_key_next, offsetof(struct tier_header, th_stats) + sizeof save -
					  offsetof(struct tier_header, th_key_next));
	pm_fence();
	if (t->live) {
		munmap(t->live, sizeof(*t->live));
		unlink(t->live_path);
		t->live = NULL;
	}
}

/* ---- mount and unmount ----------------------------------------------------------------- */

static void tier_free(struct tier *t)
{
	tier_files_fini(t);
	tier_epoch_fini(t);
	vfs_fdt_fini(&t->fdt);
	if (t->root_fd >= 0)
		close(t->root_fd);
	free(t->dirty_bits);
	free(t->lk);
	free(t->bounce);
	free(t->backing);
	free(t->link_prefix);
	pool_close(&t->pool);
	free(t);
}

int tier_backing_identity(int fd, const char *path, const struct tier_header *th, const char *uuid,
			  char *why, size_t n)
{
	char owner[64];
	ssize_t on = tsys_getxattr(path, POOL_XATTR, owner, sizeof owner - 1);
	if (on > 0) {
		owner[on] = 0;
		if (strcmp(owner, uuid) != 0) {
			snprintf(
			    why, n,
			    "the directory %s belongs to another pool (%s), not to this one (%s)",
			    path, owner, uuid);
			return -EUCLEAN;
		}
		return 0;
	}
	struct stat st;
	int64_t bt = tier_btime(fd);
	if (fstat(fd, &st) != 0 || (uint64_t)st.st_ino != th->th_backing_ino ||
	    (th->th_backing_btime && bt && bt != th->th_backing_btime)) {
		snprintf(why, n,
			 "%s is not the directory this pool was formatted for (it was replaced or "
			 "moved; `ferrite tune --backing DIR` re-points the pool at the directory "
			 "holding its data)",
			 path);
		return -EUCLEAN;
	}
	return 0;
}

static int attach_backing(struct tier *t, const char *pool)
{
	const struct tier_header *th = t->th;
	t->backing = strdup(th->th_backing);
	if (!t->backing)
		return -ENOMEM;
	t->backing_len = strlen(t->backing);
	t->root_fd = tsys_openat(AT_FDCWD, t->backing, O_RDONLY | O_DIRECTORY | O_CLOEXEC,
				 0); /* syncfs wants a real one */
	if (t->root_fd < 0) {
		int e = errno;
		return fr_err(
		    -e, "%s: its backing directory %s: %s%s", pool, t->backing, strerror(e),
		    e == ENOENT ? " (if it moved: `ferrite tune --backing NEWDIR POOL`)" : "");
	}
	/* M2 */
	char why[600];
	if (tier_backing_identity(t->root_fd, t->backing, th, t->uuid, why, sizeof why) != 0)
		return fr_err(-EUCLEAN, "%s: %s", pool, why);
	struct statvfs sv;
	if ((tsys_fstatvfs(t->root_fd, &sv) == 0 && (sv.f_flag & ST_RDONLY)) ||
	    tsys_faccessat(t->root_fd, ".", W_OK, AT_EACCESS) != 0)
		return fr_err(-EROFS,
			      "%s: the backing directory %s is read-only; the cache drains "
			      "there, so the pool cannot be used until it is writable",
			      pool, t->backing);
	/* Direct write-back where the pool asks for it and the file system
	 * takes O_DIRECT (tmpfs does not). */
	if (t->th->th_writeback == TIER_WB_DIRECT) {
		int probe =
		    tsys_openat(t->root_fd, ".", O_TMPFILE | O_RDWR | O_DIRECT | O_CLOEXEC, 0600);
		t->backing_has_direct = probe >= 0;
		if (probe >= 0)
			close(probe);
	}
	/* File handles find a file again after a rename (needs privilege). */
	struct {
		struct file_handle fh;
		unsigned char b[TIER_HANDLE_MAX];
	} h;
	h.fh.handle_bytes = TIER_HANDLE_MAX;
	int mid;
	if (name_to_handle_at(t->root_fd, "", &h.fh, &mid, AT_EMPTY_PATH) == 0) {
		int fd = open_by_handle_at(t->root_fd, &h.fh, O_PATH | O_CLOEXEC);
		t->can_handles = fd >= 0;
		if (fd >= 0)
			close(fd);
	}
	return 0;
}

static int mount_check_opts(const char *path, const struct ferrite_mount_opts *opts)
{
	if (!opts)
		return 0;
	if (opts->read_only)
		return fr_err(-EOPNOTSUPP, "read-only mounts are not supported yet");
	if ((opts->mode & ~FERRITE_MOUNT_EXCLUSIVE) != FERRITE_MOUNT_POOL_MODE)
		return fr_err(-EINVAL,
			      "%s is a tiered pool: it has no sync or strict mode (every write "
			      "is atomic)",
			      path);
	if (opts->tier_flush_ms > MAX_PERIOD_MS)
		return fr_err(-EINVAL, "the flush period is at most %d ms", MAX_PERIOD_MS);
	return 0;
}

/* Opens and maps the pool, and checks everything in it before anything
 * is used (M4): the superblock, the tier header, the image (check.c K1-K4);
 * a damaged one whose backup is intact is named for fsck --repair. */
static int mount_open_checked(struct tier *t, const char *path)
{
	int rc = pool_open(&t->pool, path, 0);
	if (rc)
		return rc;
	struct fr_super sb;
	const char *why;
	if (pread(t->pool.fd, &sb, sizeof sb, 0) != (ssize_t)sizeof sb)
		return fr_err(-EINVAL, "%s: too short to be a ferrite pool", path);
	rc = meta_super_check_common(&sb, t->pool.file_size, &why);
	if (!rc && !(sb.sb_incompat & SB_INCOMPAT_TIER))
		rc = -EINVAL, why = "not a tiered pool";
	if (rc) {
		int intact = rc == -EUCLEAN && (tier_backups_intact(t->pool.fd, t->pool.file_size) &
						TIER_BACKUP_SUPER);
		return fr_err(
		    rc, "%s: %s%s", path, why,
		    intact ? "; the backup superblock is intact: run `ferrite fsck --repair`" : "");
	}
	rc = pool_map(&t->pool, sb.sb_pool_size);
	if (rc)
		return rc;
	t->base = t->pool.base;
	t->sb = (struct fr_super *)t->base;
	t->th = (struct tier_header *)(t->base + TIER_HDR_OFF);
	char bad[512];
	if (tier_header_check(t->th, sb.sb_pool_size, bad, sizeof bad) != 0) {
		int intact =
		    tier_backups_intact(t->pool.fd, t->pool.file_size) & TIER_BACKUP_HEADER;
		return fr_err(-EUCLEAN, "%s: %s%s", path, bad,
			      intact ? "; its backup is intact: run `ferrite fsck --repair`" : "");
	}
	struct tier_geom g;
	int journal_pending;
	tier_geom_init(&g, t->base, sb.sb_pool_size);
	if (tier_image_check(&g, &journal_pending, bad, sizeof bad) != 0)
		return fr_err(-EUCLEAN, "%s: %s", path, bad);
	meta_uuid_str(sb.sb_uuid, t->uuid);
	return 0;
}

/* The volatile state of a mounted tier: the pool's geometry as checked,
 * the locks, the descriptor table, the dirty map and the bounce buffer. */
static int mount_runtime_init(struct tier *t, const struct ferrite_mount_opts *opts)
{
	t->nslots = t->th->th_nslots;
	t->nchunks = t->nslots * 2;
	t->nrecs = t->th->th_nrecs;
	t->desc = (struct tier_desc *)(t->base + t->th->th_desc_off);
	t->data = t->base + t->th->th_data_off;
	t->recs = (struct tier_rec *)(t->base + t->th->th_rec_off);
	t->consistency = (int)t->th->th_consistency;
	t->flush_ms = opts && opts->tier_flush_ms ? opts->tier_flush_ms : t->th->th_flush_ms;
	t->no_writeback = opts && opts->tier_no_writeback;
	t->epoch_ms = t->th->th_epoch_ms;
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max; /* one backing descriptor per open file */
		setrlimit(RLIMIT_NOFILE, &rl);
	}
	for (int i = 0; i < TIER_SLOT_LOCKS; i++)
		pthread_mutex_init(&t->slot_locks[i], NULL);
	vfs_fdt_init(&t->fdt);
	pthread_mutex_init(&t->streams_lock, NULL);
	pthread_rwlock_init(&t->epoch_lock, NULL);
	pthread_mutex_init(&t->map_lock, NULL);
	t->dirty_bits = calloc((t->nchunks + 63) / 64, sizeof(uint64_t));
	if (!t->dirty_bits || posix_memalign((void **)&t->bounce, 4096, 256 * TIER_CHUNK_SIZE))
		return -ENOMEM;
	return 0;
}

/* M3: what a crash interrupted completed or undone, then everything dirty
 * drained; the flusher started. */
static int mount_recover(struct tier *t, const char *path)
{
	int rc = 0;
	if (t->consistency == TIER_EPOCH)
		rc = tier_epoch_recover(t);
	if (!rc)
		rc = tier_recover_chunks(t);
	if (!rc)
		rc = tier_files_recover(t);
	if (!rc)
		rc = tier_epoch_init(t);
	if (!rc && tier_drain(t, NULL) != 0) {
		/* The backing directory refuses what recovery left dirty: the
		 * data stays in the pool, served from there, and the flusher
		 * tries again (as after a failed unmount). */
		fprintf(stderr,
			"ferrite: %s: %s (the data stays in the pool; the flusher tries again)\n",
			path, fr_err_get());
		fr_err_clear();
	}
	if (!rc)
		rc = tier_flusher_start(t);
	if (rc) {
		char why[512];
		snprintf(why, sizeof why, "%s", fr_err_isset() ? fr_err_get() : strerror(-rc));
		fr_err(rc, "%s: %s", path, why);
	}
	return rc;
}

int tier_mount(const char *path, const struct ferrite_mount_opts *opts, ferrite_fs **out)
{
	fr_err_clear();
	if (!out)
		return fr_err_finish(-EINVAL);
	*out = NULL;
	int rc = mount_check_opts(path, opts);
	if (rc)
		return fr_err_finish(rc);
	struct tier *t = calloc(1, sizeof(*t));
	if (!t)
		return fr_err_finish(-ENOMEM);
	t->h.ops = &tier_ops;
	t->root_fd = -1;
	rc = mount_open_checked(t, path);
	if (!rc)
		rc = mount_runtime_init(t, opts);
	if (!rc)
		rc = attach_backing(t, path);
	if (!rc)
		rc = tier_files_init(t);
	if (!rc) {
		stats_open(t);
		rc = mount_recover(t, path);
		if (rc)
			stats_close(t);
	}
	if (rc) {
		tier_free(t);
		return fr_err_finish(rc);
	}
	*out = (ferrite_fs *)t;
	return fr_err_finish(0);
}

int tier_unmount(ferrite_fs *fs)
{
	struct tier *t = TIER(fs);
	fr_err_clear();
	tier_flusher_stop(t);
	tier_epoch_commit(t);
	tier_maps_end(t);
	tier_fds_close_all(t);
	tier_streams_close_all(t);
	int rc = tier_drain(t, NULL);
	if (rc)
		fprintf(stderr,
			"ferrite: %s: %s (the data stays in the pool; the next mount "
			"drains it)\n",
			t->pool.path, fr_err_get());
	stats_close(t);
	tier_free(t);
	return fr_err_finish(rc);
}

/* ---- inspection ------------------------------------------------------------------------- */

int tier_get_info(ferrite_fs *fs, struct ferrite_info *in)
{
	struct tier *t = TIER(fs);
	fr_err_clear();
	if (!in)
		return fr_err_finish(-EINVAL);
	memset(in, 0, sizeof(*in));
	snprintf(in->uuid, sizeof in->uuid, "%s", t->uuid);
	in->format_version = t->sb->sb_version;
	in->pool_bytes = t->sb->sb_pool_size;
	in->data_bytes = t->nchunks * TIER_CHUNK_SIZE;
	in->free_bytes =
	    (t->nchunks - __atomic_load_n(&t->nvalid, __ATOMIC_RELAXED)) * TIER_CHUNK_SIZE;
	for (uint32_t fid = 1; fid < t->nrecs; fid++)
		in->files += t->recs[fid].r_state == REC_LIVE;
	snprintf(in->backing, sizeof in->backing, "%s", t->pool.backing);
	in->max_file_size = TIER_MAX_FILE;
	in->huge_pages = t->pool.huge;
	snprintf(in->persistence, sizeof in->persistence, "%s", pm_describe());
	snprintf(in->protection, sizeof in->protection, "%s", pm_protection());
	return fr_err_finish(0);
}

static void fill_counters(struct ferrite_tier_info *ti, const uint64_t *c)
{
	ti->read_hits = c[TS_READ_HITS];
	ti->read_misses = c[TS_READ_MISSES];
	ti->write_hits = c[TS_WRITE_HITS];
	ti->write_misses = c[TS_WRITE_MISSES];
	ti->collisions = c[TS_COLLISIONS];
	ti->flushes_periodic = c[TS_FLUSH_PERIODIC];
	ti->flushes_forced = c[TS_FLUSH_FORCED];
	ti->wraparounds = c[TS_WRAPS];
	ti->flush_rounds = c[TS_FLUSH_ROUNDS];
	ti->epochs = c[TS_EPOCHS];
	ti->recovered = c[TS_RECOVERED];
	ti->flush_errors = c[TS_FLUSH_ERRORS];
}

static void fill_geometry(struct ferrite_tier_info *ti, const struct tier_header *th)
{
	snprintf(ti->backing, sizeof ti->backing, "%s", th->th_backing);
	ti->consistency = (int)th->th_consistency;
	ti->flush_ms = th->th_flush_ms;
	ti->epoch_ms = th->th_epoch_ms;
	ti->writeback = (int)th->th_writeback;
	ti->atomic_write_max = (tier_max_write_chunks(th->th_nslots) - 1) * TIER_CHUNK_SIZE + 1;
	ti->chunk_size = th->th_chunk_size;
	ti->slots = th->th_nslots;
	ti->chunks = th->th_nslots * 2;
	ti->records = th->th_nrecs - 1;
}

int tier_get_tier_info(ferrite_fs *fs, struct ferrite_tier_info *ti)
{
	struct tier *t = TIER(fs);
	fr_err_clear();
	if (!ti)
		return fr_err_finish(-EINVAL);
	memset(ti, 0, sizeof(*ti));
	fill_geometry(ti, t->th);
	ti->flush_ms = t->flush_ms;
	uint64_t c[TIER_NSTATS];
	for (int i = 0; i < TIER_NSTATS; i++)
		c[i] = *tier_counter(t, i) + (t->live ? 0 : t->th->th_stats[i]);
	fill_counters(ti, c);
	ti->valid_chunks = __atomic_load_n(&t->nvalid, __ATOMIC_RELAXED);
	ti->dirty_chunks = __atomic_load_n(&t->ndirty, __ATOMIC_RELAXED);
	for (uint32_t fid = 1; fid < t->nrecs; fid++)
		ti->records_used += t->recs[fid].r_state != REC_FREE;
	ti->live = 1;
	ti->pid = getpid();
	ti->backing_errno = __atomic_load_n(&t->backing_err, __ATOMIC_RELAXED);
	return fr_err_finish(0);
}

int tier_read_stats(const char *pool, struct ferrite_tier_info *ti)
{
	fr_err_clear();
	if (!pool)
		pool = ferrite_default_pool();
	if (!ti)
		return fr_err_finish(-EINVAL);
	memset(ti, 0, sizeof(*ti));
	int fd = open(pool, O_RDONLY | O_CLOEXEC);
	if (fd < 0 && errno == ENOENT)
		return fr_err_finish(pool_missing(pool));
	if (fd < 0)
		return fr_err_finish(fr_err(-errno, "%s: %s", pool, strerror(errno)));
	struct fr_super sb;
	struct tier_header *th = malloc(sizeof(*th));
	struct stat st;
	const char *why = "not a tiered pool";
	int rc = 0;
	if (!th || fstat(fd, &st) != 0 || pread(fd, &sb, sizeof sb, 0) != (ssize_t)sizeof sb ||
	    pread(fd, th, sizeof(*th), TIER_HDR_OFF) != (ssize_t)sizeof(*th))
		rc = -EINVAL;
	if (!rc)
		rc = meta_super_check_common(&sb, (uint64_t)st.st_size, &why);
	char hwhy[512];
	if (!rc && !(sb.sb_incompat & SB_INCOMPAT_TIER))
		rc = -EINVAL, why = "not a tiered pool";
	else if (!rc && tier_header_check(th, sb.sb_pool_size, hwhy, sizeof hwhy) != 0)
		rc = -EUCLEAN, why = hwhy;
	if (rc) {
		close(fd);
		free(th);
		return fr_err_finish(fr_err(rc, "%s: %s", pool, why));
	}
	fill_geometry(ti, th);
	char uuid[37], sp[128];
	meta_uuid_str(sb.sb_uuid, uuid);
	stats_path(sp, sizeof sp, uuid);
	struct tier_live_stats ls;
	int sfd = open(sp, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	int live = sfd >= 0 && stats_file_trusted(sfd, st.st_uid) &&
		   read(sfd, &ls, sizeof ls) == (ssize_t)sizeof ls &&
		   ls.magic == TIER_STATS_MAGIC && (kill((pid_t)ls.pid, 0) == 0 || errno == EPERM);
	if (sfd >= 0)
		close(sfd);
	if (live) {
		fill_counters(ti, ls.counters);
		ti->live = 1;
		ti->pid = ls.pid;
		ti->valid_chunks = ls.valid_chunks;
		ti->dirty_chunks = ls.dirty_chunks;
		ti->backing_errno = (int)ls.backing_errno;
	} else {
		fill_counters(ti, th->th_stats);
		/* Count the tags as they are. */
		size_t n = (size_t)th->th_nslots * 2, step = 65536;
		struct tier_desc *d = malloc(step * sizeof(*d));
		for (size_t i = 0; d && i < n; i += step) {
			size_t k = FR_MIN(step, n - i);
			if (pread(fd, d, k * sizeof(*d),
				  (off_t)(th->th_desc_off + i * sizeof(*d))) !=
			    (ssize_t)(k * sizeof(*d)))
				break;
			for (size_t j = 0; j < k; j++) {
				ti->valid_chunks += !!(d[j].d_tag & TAG_V);
				ti->dirty_chunks +=
				    (d[j].d_tag & (TAG_V | TAG_D)) == (TAG_V | TAG_D);
			}
		}
		free(d);
	}
	size_t rstep = 1024;
	struct tier_rec *rb = malloc(rstep * sizeof(*rb));
	for (uint32_t fid = 0; rb && fid < th->th_nrecs; fid += (uint32_t)rstep) {
		size_t k = FR_MIN(rstep, (size_t)(th->th_nrecs - fid));
		if (pread(fd, rb, k * sizeof(*rb),
			  (off_t)(th->th_rec_off + (uint64_t)fid * TIER_REC_SIZE)) !=
		    (ssize_t)(k * sizeof(*rb)))
			break;
		for (size_t j = 0; j < k; j++)
			ti->records_used += fid + j > 0 && rb[j].r_state != REC_FREE;
	}
	free(rb);
	close(fd);
	free(th);
	return fr_err_finish(0);
}
