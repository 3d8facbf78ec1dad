/*
 * inspect.c -- ferrite_inode_info and ferrite_inode_extents: an inode as it
 * is stored, and where its data lives in the pool (`ferrite stat`, `ferrite
 * inode`: debugfs's stat and blocks).
 *
 * Invariants: I1 an inode number from the caller is used only once
 *               ino_valid() says it is a live entry of the inode pool;
 *               a damaged inode's fields are copied out as numbers, never
 *               followed (-EUCLEAN);
 *             I2 the extent walk runs only on an inode that passes
 *               ino_check() (its partition lies inside the partition
 *               space), under the inode's read lock, and every window entry
 *               and pte goes through the page table's own checks
 *               (ppt_window, sp_page_ok) before it becomes an offset.
 * Crash argument: reads only.
 */
#include <errno.h>
#include <string.h>

#include "fs/fs.h"
#include "fs/xattr.h"

static void info_fill(ferrite_fs *fs, uint64_t ino, const struct fr_inode *ip,
		      struct ferrite_inode_info *out)
{
	out->ino = ino;
	out->generation = ip->i_generation;
	out->pool_off = ino << INO_SHIFT;
	out->mode = ip->i_mode;
	out->nlink = ip->i_nlink;
	out->uid = ip->i_uid;
	out->gid = ip->i_gid;
	out->size = ip->i_size;
	out->blocks = ip->i_blocks;
	out->atime = (struct timespec){ip->i_atime_sec, ip->i_atime_nsec};
	out->mtime = (struct timespec){ip->i_mtime_sec, ip->i_mtime_nsec};
	out->ctime = (struct timespec){ip->i_ctime_sec, ip->i_ctime_nsec};
	out->btime = (struct timespec){ip->i_btime_sec, ip->i_btime_nsec};
	if (S_ISCHR(ip->i_mode) || S_ISBLK(ip->i_mode))
		memcpy(&out->rdev, ip->i_inline, sizeof(out->rdev));
	out->level = ip->i_level == I_NO_PART ? -1 : ip->i_level;
	out->part_off = out->level < 0 ? 0 : ip->i_part;
	out->part_bytes =
	    out->level < 0 || ip->i_level > SP_MAX_LEVEL ? 0 : sp_level_size(ip->i_level);
	if (S_ISDIR(ip->i_mode)) {
		out->parent = ip->i_parent;
		out->dir_hashed = ip->i_dkind == I_DIR_LARGE;
		out->dir_entries = ip->i_nentries;
		out->dents_off = out->dir_hashed ? 0 : ip->i_dents;
	}
	out->orphan = (ip->i_flags & I_F_ORPHAN) != 0;
	out->inline_target = S_ISLNK(ip->i_mode) && ip->i_size <= I_INLINE_MAX;
	out->xattr_off = ip->i_xattr;
	uint64_t page;
	int order;
	const char *why;
	if (ip->i_xattr && xattr_check(fs, ip, &page, &order, &why) == 0)
		out->xattr_bytes = (uint64_t)FR_PAGE_SIZE << order;
}

int pmfs_inode_info(ferrite_fs *fs, uint64_t ino, struct ferrite_inode_info *out)
{
	fr_err_clear();
	if (!fs || !out)
		return api_end(-EINVAL);
	memset(out, 0, sizeof(*out));
	if (!ino_valid(fs, ino)) /* I1 */
		return api_end(fr_err(-ENOENT, "inode %llu: no such inode (not a live inode)",
				      (unsigned long long)ino));
	pthread_rwlock_t *lk = ino_lock(fs, ino);
	pthread_rwlock_rdlock(lk);
	struct fr_inode copy = *ino_ptr(fs, ino);
	const char *why;
	int bad = ino_check(fs, &copy, &why);
	info_fill(fs, ino, &copy, out);
	pthread_rwlock_unlock(lk);
	if (bad)
		return api_end(fr_err(-EUCLEAN, "inode %llu damaged: %s (run `ferrite fsck`)",
				      (unsigned long long)ino, why));
	return api_end(0);
}

/* ---- extents ---------------------------------------------------------------------- */

struct ext_walk {
	int (*cb)(void *, const struct ferrite_extent *);
	void *arg;
	struct ferrite_extent cur; /* run being built; len 0 = none */
	int rc;
};

/* Adds [file_off, +len) -> pool_off to the run, or emits the run and starts
 * another. Returns nonzero when the callback stopped the walk. */
static int ext_add(struct ext_walk *w, uint64_t file_off, uint64_t pool_off, uint64_t len, int unit)
{
	struct ferrite_extent *c = &w->cur;
	if (c->len && c->unit == unit && c->file_off + c->len == file_off &&
	    c->pool_off + c->len == pool_off) {
		c->len += len;
		return 0;
	}
	if (c->len && (w->rc = w->cb(w->arg, c)) != 0)
		return 1;
	*c = (struct ferrite_extent){file_off, pool_off, len, unit};
	return 0;
}

/* The pages of a page table window, [first, first + n) of its 512. */
static int ext_table(struct ext_walk *w, struct space *sp, uint64_t went, uint64_t file_off,
		     unsigned first, unsigned n)
{
	const struct sp_ptable *pt = ppt_table(sp, went);
	for (unsigned i = first; i < first + n; i++) {
		uint32_t pte = pt->pt_pte[i];
		if (!pte || !sp_page_ok(sp, pte))
			continue; /* a hole (fsck reports a bad pte) */
		uint64_t fo = file_off + ((uint64_t)(i - first) << FR_PAGE_SHIFT);
		if (ext_add(w, fo, (uint64_t)pte << FR_PAGE_SHIFT, FR_PAGE_SIZE, 0))
			return 1;
	}
	return 0;
}

static int ext_walk_part(struct ext_walk *w, ferrite_fs *fs, uint64_t part, int level)
{
	struct space *sp = &fs->m.sp;
	uint64_t size = sp_level_size(level);
	for (uint64_t off = 0; off < size; off += FR_UNIT_SIZE) {
		uint64_t v = part + off, went = ppt_window(sp, v);
		unsigned first = (unsigned)((v & (FR_UNIT_SIZE - 1)) >> FR_PAGE_SHIFT);
		unsigned n = (unsigned)(FR_MIN(size, (uint64_t)FR_UNIT_SIZE) >> FR_PAGE_SHIFT);
		switch (went & PPT_TYPE_MASK) {
		case PPT_NONE:
			continue;
		case PPT_HUGE:
			if (ext_add(w, off,
				    (went & ~PPT_TYPE_MASK) + ((uint64_t)first << FR_PAGE_SHIFT),
				    (uint64_t)n << FR_PAGE_SHIFT, 1))
				return 1;
			continue;
		case PPT_TABLE:
			if (ext_table(w, sp, went, off, first, n))
				return 1;
			continue;
		default:
			w->rc = fr_err(-EUCLEAN,
				       "page table damaged at vspace offset %#llx (run `ferrite "
				       "fsck`)",
				       (unsigned long long)v);
			return 1;
		}
	}
	return 0;
}

int pmfs_inode_extents(ferrite_fs *fs, uint64_t ino,
		       int (*cb)(void *arg, const struct ferrite_extent *ext), void *arg)
{
	fr_err_clear();
	if (!fs || !cb)
		return api_end(-EINVAL);
	if (!ino_valid(fs, ino))
		return api_end(fr_err(-ENOENT, "inode %llu: no such inode (not a live inode)",
				      (unsigned long long)ino));
	struct ext_walk w = {cb, arg, {0, 0, 0, 0}, 0};
	pthread_rwlock_t *lk = ino_lock(fs, ino);
	pthread_rwlock_rdlock(lk);
	int rc = ino_get_checked(fs, ino); /* I2 */
	const struct fr_inode *ip = ino_ptr(fs, ino);
	if (!rc && ip->i_level != I_NO_PART && !ext_walk_part(&w, fs, ip->i_part, ip->i_level) &&
	    w.cur.len)
		w.rc = cb(arg, &w.cur);
	pthread_rwlock_unlock(lk);
	return api_end(rc ? rc : w.rc);
}
