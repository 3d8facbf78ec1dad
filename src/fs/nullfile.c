/*
 * nullfile.c -- null files (SCMFS pre-allocation: "null files", "garbage
 * collection"): ready regular files, each an inode with a level-0
 * partition and one backed page, which a create takes (ino_alloc) instead
 * of building an inode; the file's first write of up to 4 KiB then finds its
 * page backed and mapped -- no allocation, no transaction, only the copy and
 * the size.
 *
 * They come from deletion, as SCMFS's garbage collection makes them: when
 * the last name of a file that is one backed page goes (drop_inode,
 * namei.c), the file is reset and put on the list, in the unlink's own
 * transaction, instead of giving back its inode, partition and page only
 * for the next create to take them again. Building them ahead of time
 * instead was measured and dropped: a batch costs per file what the first
 * write saves (about 2 us each, partition walk and inode included), and
 * makes every create of an empty file pay for a page.
 *
 * Invariants: N1 (format 5) the null list -- st_null_head, linked by
 *               i_orphan_next -- holds exactly the live inodes with
 *               I_F_NULL: regular files with no name, mode S_IFREG, i_nlink
 *               0, size 0, no xattr block, a level-0 partition whose one
 *               page is backed (its bytes are anything, data.c D3);
 *               st_null_count is its length, at most null_keep();
 *             N2 null files never make a pool full: statvfs counts their
 *               pages free, and the collector (null_collect) gives them back
 *               -- with the page of every file still empty and unmapped --
 *               when a call fails for want of space, before it is tried
 *               again (ops.c);
 *             N3 its generation moves on when a file becomes a null file and
 *               again when a create takes it (inode.c I2), so no handle of
 *               the deleted file reaches it; owner, mode and times are the
 *               new file's.
 * Validation: the inode at the head of the list is taken only if it is a
 *   live inode that N1 describes; anything else is -EUCLEAN, "null file list
 *   damaged", and fsck reports it.
 * Crash argument: a file becomes a null file in the transaction that removes
 *   its last name, and stops being one in the transaction that gives it a
 *   name; the collector's releases are transactions of their own.
 * Locking: the list is covered by the allocator lock (tx_lock_alloc), as the
 *   orphan list; a file is put on it under its own inode lock (unlink), and
 *   the collector takes each empty file's inode lock.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fs/fs.h"
#include "persist/pm.h"

#define COLLECT_MAX_FILES 4096 /* empty files a collector round looks at */

int null_enabled(const ferrite_fs *fs)
{
	return fs->m.sb->sb_version >= FR_FORMAT_NULL_FILES;
}

/* Is the page at pool offset pg in the data area and in no free block, as
 * tx sees it? A page a file names is checked so before it is handed on. */
static int page_in_use(ferrite_fs *fs, struct tx *tx, uint64_t pg)
{
	struct space *sp = &fs->m.sp;
	uint64_t page = pg >> FR_PAGE_SHIFT;
	return page >= sp->data_page && page < sp->data_end_page &&
	       bud_free_order(sp, tx, page) < 0;
}

/* Is inode ino, as tx sees it (committed if tx is NULL), what N1 says a
 * null file is? */
static int null_sound(ferrite_fs *fs, struct tx *tx, uint64_t ino)
{
	const char *why;
	if (!ino_valid(fs, ino) || ino_check(fs, ino_ptr(fs, ino), &why))
		return 0;
	struct fr_inode *ip = ino_ptr(fs, ino);
	uint8_t level = tx ? tx_get1(tx, &ip->i_level) : *(volatile uint8_t *)&ip->i_level;
	uint64_t pg = level == 0 ? dp_phys(fs, tx, ip, 0) : 0;
	return (rd4(tx, &ip->i_flags) & I_F_NULL) && rd4(tx, &ip->i_mode) == S_IFREG &&
	       rd4(tx, &ip->i_nlink) == 0 && rd8(tx, &ip->i_size) == 0 && level == 0 &&
	       rd8(tx, &ip->i_xattr) == 0 && pg && (!tx || page_in_use(fs, tx, pg));
}

static int list_damaged(uint64_t ino)
{
	return fr_err(-EUCLEAN, "null file list damaged at inode %llu (run `ferrite fsck`)",
		      (unsigned long long)ino);
}

/* N1's cap: a sixty-fourth of the pool, at least 64 files. */
static uint64_t null_keep(ferrite_fs *fs)
{
	struct space *sp = &fs->m.sp;
	return FR_MAX((sp->data_end_page - sp->data_page) / 64, 64);
}

int null_recycle(ferrite_fs *fs, struct tx *tx, uint64_t ino)
{
	struct fr_state *st = fs->m.st;
	struct fr_inode *ip = ino_ptr(fs, ino);
	if (!null_enabled(fs) || !S_ISREG(tx_get4(tx, &ip->i_mode)) ||
	    tx_get1(tx, &ip->i_level) != 0 || tx_get8(tx, &ip->i_blocks) != 1 ||
	    tx_get8(tx, &ip->i_xattr) || (tx_get4(tx, &ip->i_flags) & (I_F_ORPHAN | I_F_NULL)) ||
	    vn_mapped(fs, ino))
		return -ENOENT;
	tx_lock_alloc(tx);
	/* A page the allocator has as free is damage: the release the caller
	 * falls back to refuses it (buddy.c), where keeping it would hand it
	 * out twice. */
	uint64_t pg = dp_phys(fs, tx, ip, 0);
	if (!pg || !page_in_use(fs, tx, pg))
		return -ENOENT;
	uint64_t count = tx_get8(tx, &st->st_null_count);
	if (count >= null_keep(fs))
		return -ENOENT;
	/* The deleted file's (inode, generation) names nothing from now on,
	 * as if its entry had been freed (inode.c I2). */
	tx_set8(tx, &ip->i_generation, tx_get8(tx, &ip->i_generation) + 1);
	tx_set4(tx, &ip->i_mode, S_IFREG);
	tx_set4(tx, &ip->i_nlink, 0);
	tx_set8(tx, &ip->i_size, 0);
	tx_set4(tx, &ip->i_flags, I_F_NULL);
	tx_set8(tx, &ip->i_orphan_next, tx_get8(tx, &st->st_null_head));
	tx_set8(tx, &st->st_null_head, ino);
	tx_set8(tx, &st->st_null_count, count + 1);
	return 0;
}

int null_take(ferrite_fs *fs, struct tx *tx, mode_t mode, uid_t uid, gid_t gid, uint64_t *ino)
{
	struct fr_state *st = fs->m.st;
	tx_lock_alloc(tx);
	uint64_t head = tx_get8(tx, &st->st_null_head);
	if (!head)
		return -ENOENT;
	if (!null_sound(fs, tx, head))
		return list_damaged(head);
	struct fr_inode *ip = ino_ptr(fs, head);
	uint64_t count = tx_get8(tx, &st->st_null_count);
	tx_set8(tx, &st->st_null_head, tx_get8(tx, &ip->i_orphan_next));
	tx_set8(tx, &st->st_null_count, count ? count - 1 : 0);
	struct fr_inode img;
	tx_get(tx, ip, &img, sizeof(img));
	struct timespec now;
	fs_now(&now);
	img.i_generation++; /* N3 */
	img.i_mode = mode;
	img.i_nlink = 1;
	img.i_uid = uid;
	img.i_gid = gid;
	img.i_flags = 0;
	img.i_orphan_next = 0;
	img.i_mtime_sec = img.i_ctime_sec = img.i_atime_sec = img.i_btime_sec = now.tv_sec;
	img.i_mtime_nsec = img.i_ctime_nsec = img.i_atime_nsec = img.i_btime_nsec =
	    (uint32_t)now.tv_nsec;
	tx_set(tx, ip, &img, sizeof(img));
	*ino = head;
	return 0;
}

/* Releases the null list, a few files a transaction; returns pages freed. */
static uint64_t release_list(ferrite_fs *fs)
{
	struct fr_state *st = fs->m.st;
	uint64_t got = 0;
	while (__atomic_load_n(&st->st_null_head, __ATOMIC_RELAXED)) {
		struct log_ctx *lc = op_begin(fs);
		if (!lc)
			break;
		struct tx *tx = lc->tx;
		tx_lock_alloc(tx);
		uint64_t head = tx_get8(tx, &st->st_null_head), n = 0;
		int rc = 0;
		for (; head && n < 8 && !rc; n++) {
			if (!null_sound(fs, tx, head)) {
				rc = list_damaged(head);
				break;
			}
			uint64_t next = tx_get8(tx, &ino_ptr(fs, head)->i_orphan_next);
			rc = ino_drop_tx(fs, tx, head);
			head = next;
		}
		if (!rc) {
			uint64_t count = tx_get8(tx, &st->st_null_count);
			tx_set8(tx, &st->st_null_head, head);
			tx_set8(tx, &st->st_null_count, count > n ? count - n : 0);
		}
		rc = op_commit_or_abort(fs, lc, rc);
		op_end(fs, lc);
		if (rc)
			break;
		got += n;
	}
	return got;
}

struct empties {
	ferrite_fs *fs;
	uint64_t *inos;
	size_t n;
};

static int is_empty_holder(const struct fr_inode *ip)
{
	return S_ISREG(ip->i_mode) && !(ip->i_flags & I_F_NULL) && ip->i_size == 0 &&
	       ip->i_level != I_NO_PART && ip->i_blocks != 0;
}

static int note_empty(void *arg, uint64_t off)
{
	struct empties *e = arg;
	if (is_empty_holder(meta_ptr(&e->fs->m, off)))
		e->inos[e->n++] = off >> INO_SHIFT;
	return e->n == COLLECT_MAX_FILES;
}

/* Gives back the pages of created files that are still empty (a null
 * file's page nobody wrote) and not mapped; returns pages freed. */
static uint64_t strip_empty(ferrite_fs *fs)
{
	struct empties e = {fs, malloc(COLLECT_MAX_FILES * sizeof(uint64_t)), 0};
	if (!e.inos)
		return 0;
	mp_each_live(&fs->m, MP_INODE, note_empty, &e);
	uint64_t got = 0;
	for (size_t i = 0; i < e.n; i++) {
		uint64_t ino = e.inos[i];
		pthread_rwlock_t *lk = ino_lock(fs, ino);
		pthread_rwlock_wrlock(lk);
		struct fr_inode *ip = ino_ptr(fs, ino);
		if (!ino_get_checked(fs, ino) && is_empty_holder(ip) && !vn_mapped(fs, ino)) {
			uint64_t pages = ip->i_blocks;
			struct log_ctx *lc = op_begin(fs);
			int rc = lc ? dp_release_tx(fs, lc->tx, ip) : -ENOMEM;
			if (lc) {
				rc = op_commit_or_abort(fs, lc, rc);
				op_end(fs, lc);
			}
			got += rc ? 0 : pages;
		}
		pthread_rwlock_unlock(lk);
	}
	free(e.inos);
	return got;
}

uint64_t null_collect(ferrite_fs *fs)
{
	if (!null_enabled(fs))
		return 0;
	uint64_t got = release_list(fs);
	return got + strip_empty(fs);
}

int null_check(ferrite_fs *fs, int (*listed)(void *arg, uint64_t ino), void *arg,
	       fr_report_fn report, void *rarg, uint64_t *len)
{
	struct fr_state *st = fs->m.st;
	uint64_t ino = st->st_null_head, n = 0;
	int bad = 0;
	*len = 0;
	if (!null_enabled(fs)) {
		if (!ino && !st->st_null_count)
			return 0;
		fr_report(report, rarg, "null file list in a pool of format %u (they came in 5)",
			  fs->m.sb->sb_version);
		return 1;
	}
	for (; ino; n++) {
		if (!ino_valid(fs, ino) || !listed(arg, ino)) {
			/* not an inode, or one the list reached before: a loop */
			fr_report(report, rarg, "null file list damaged at inode %llu",
				  (unsigned long long)ino);
			return bad + 1;
		}
		struct fr_inode *ip = ino_ptr(fs, ino);
		if (!null_sound(fs, NULL, ino)) {
			fr_report(report, rarg,
				  "null file %llu: not an empty file without a name (N1)",
				  (unsigned long long)ino);
			bad++;
		}
		ino = ip->i_orphan_next;
	}
	*len = n;
	return bad;
}
