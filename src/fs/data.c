/*
 * data.c -- the data path in sync mode: read, write, append, truncate,
 * fallocate, and the partition upgrades behind them (SEEK_DATA/HOLE:
 * file.c). In
 * strict mode a write that starts below the size goes to strict.c instead
 * (atomic); appends stay here in both modes.
 *
 * A file's bytes live at sp->vbase + i_part + offset; the MMU translates.
 * Writes copy with non-temporal stores straight into that range.
 *
 * Invariants: D1 size > 0 implies the inode has a partition holding [0, size);
 *             D2 in a small partition (levels 0-2) every page below the size
 *               is backed: small files have no holes;
 *             D3 bytes at or beyond the size may hold anything; any range that
 *               enters the file (write past EOF, truncate up, fallocate) is
 *               written or zeroed before the size that exposes it is published;
 *             D4 a newly backed page that lies below the size is zeroed or
 *               fully overwritten before its mapping can commit (holes read 0);
 *             D5 what a mapping can show past the end of file -- the rest of
 *               the last page -- is zero: a write zeroes the part of a new
 *               page it does not cover, and a small file moved into a large
 *               partition (as mmap does, mmap.c M1) gets zeros past its size
 *               in its last page, whatever its page held before (a null
 *               file's page, nullfile.c, holds its last owner's bytes).
 * Crash argument: partition changes and backing are one logged transaction
 *   per call, committed before the data is copied. Data is fenced before the
 *   8-byte size store that publishes an append (ctFS 3.5), so a crash shows
 *   the old size or the new one with its data. An overwrite that does not
 *   change the size is durable but not atomic (sync mode). Truncating down
 *   publishes the smaller size first; pages beyond it are then released in
 *   bounded transactions, and leftovers beyond EOF are harmless (D3).
 * Locking: the inode's write lock for changes, read lock for reads.
 */
#include <errno.h>
#include <string.h>
#include <sys/uio.h>

#include "fs/fs.h"
#include "persist/pm.h"

#define BATCH_WINDOWS 192

static int level_of(struct tx *tx, struct fr_inode *ip)
{
	return tx ? tx_get1(tx, &ip->i_level) : ip->i_level;
}

static uint64_t part_bytes(int level)
{
	return level == I_NO_PART ? 0 : sp_level_size(level);
}

static int is_small(int level)
{
	return level != I_NO_PART && level < SP_L3;
}

static void add_blocks(struct tx *tx, struct fr_inode *ip, int64_t pages)
{
	tx_set8(tx, &ip->i_blocks, tx_get8(tx, &ip->i_blocks) + (uint64_t)pages);
}

uint64_t dp_phys(ferrite_fs *fs, struct tx *tx, struct fr_inode *ip, uint64_t off)
{
	int level = level_of(tx, ip);
	if (level == I_NO_PART || off >= part_bytes(level))
		return 0;
	uint64_t v = rd8(tx, &ip->i_part) + off;
	return tx ? ppt_page_tx(tx, v) : ppt_page(&fs->m.sp, v);
}

/* Format 4: a large partition backed page by page (window.c), the pages
 * zeroed as back_range says. */
static int back_large_pages(ferrite_fs *fs, struct tx *tx, struct fr_inode *ip, uint64_t off,
			    uint64_t len, uint64_t zero_below, uint64_t w0, uint64_t w1)
{
	struct space *sp = &fs->m.sp;
	uint64_t part = tx_get8(tx, &ip->i_part), end = off + len;
	for (uint64_t w = FR_ALIGN_DOWN(off, FR_UNIT_SIZE); w < end; w += FR_UNIT_SIZE) {
		unsigned o0 = (unsigned)((FR_MAX(off, w) - w) >> FR_PAGE_SHIFT);
		unsigned o1 = (unsigned)((FR_MIN(end, w + FR_UNIT_SIZE) - w + FR_PAGE_SIZE - 1) >>
					 FR_PAGE_SHIFT);
		uint64_t fresh[8] = {0};
		int rc = part_large_back_pages(tx, part + w, o0, o1, fresh);
		if (rc)
			return rc;
		int64_t n = 0;
		for (unsigned o = o0; o < o1; o++) {
			if (!(fresh[o >> 6] >> (o & 63) & 1))
				continue;
			n++;
			uint64_t p = w + ((uint64_t)o << FR_PAGE_SHIFT);
			if (p >= zero_below || (p >= w0 && p + FR_PAGE_SIZE <= w1))
				continue;
			uint64_t pg = ppt_page_tx(tx, part + p);
			if (!pg) /* 0 would be the superblock */
				return tx_damaged(tx, "window %#llx lost a fresh page",
						  (unsigned long long)(part + w));
			pm_zero_nt(sp_ptr(sp, pg), FR_PAGE_SIZE);
			tx_mark_fresh(tx);
		}
		add_blocks(tx, ip, n);
	}
	return 0;
}

/* Backs the pages of [off, off+len). Newly backed memory that lies below
 * zero_below and outside [w0, w1) (about to be overwritten) is zeroed before
 * the transaction commits (D4). */
static int back_range(ferrite_fs *fs, struct tx *tx, struct fr_inode *ip, uint64_t off,
		      uint64_t len, uint64_t zero_below, uint64_t w0, uint64_t w1)
{
	struct space *sp = &fs->m.sp;
	int level = level_of(tx, ip);
	uint64_t part = tx_get8(tx, &ip->i_part);
	if (len == 0)
		return 0;
	if (is_small(level)) {
		uint64_t p0 = FR_ALIGN_DOWN(off, FR_PAGE_SIZE);
		for (uint64_t p = p0; p < off + len; p += FR_PAGE_SIZE) {
			uint64_t phys;
			int fresh, rc = part_small_back(tx, part + p, &phys, &fresh);
			if (rc)
				return rc;
			if (!fresh)
				continue;
			add_blocks(tx, ip, 1);
			if (p < zero_below && !(p >= w0 && p + FR_PAGE_SIZE <= w1)) {
				pm_zero_nt(sp_ptr(sp, phys), FR_PAGE_SIZE);
				tx_mark_fresh(tx);
			}
		}
		return 0;
	}
	uint64_t wstart = FR_ALIGN_DOWN(off, FR_UNIT_SIZE);
	if (sp->reserve_windows)
		return back_large_pages(fs, tx, ip, off, len, zero_below, w0, w1);
	for (uint64_t w = wstart; w < off + len; w += FR_UNIT_SIZE) {
		uint64_t phys;
		int rc = part_large_back(tx, part + w, &phys);
		if (rc < 0)
			return rc;
		if (rc == 1)
			continue; /* already backed */
		add_blocks(tx, ip, 512);
		if (w < zero_below && !(w >= w0 && w + FR_UNIT_SIZE <= w1)) {
			if (phys) { /* one unit: one bulk store */
				pm_zero_nt(sp_ptr(sp, phys), FR_UNIT_SIZE);
			} else {
				for (uint64_t p = 0; p < FR_UNIT_SIZE; p += FR_PAGE_SIZE) {
					uint64_t pg = ppt_page_tx(tx, part + w + p);
					if (!pg) /* 0 would be the superblock */
						return tx_damaged(tx,
								  "window %#llx lost a fresh page",
								  (unsigned long long)(part + w));
					pm_zero_nt(sp_ptr(sp, pg), FR_PAGE_SIZE);
				}
			}
			tx_mark_fresh(tx);
		}
	}
	return 0;
}

/* Room left in tx for another window's release? A window backed page by
 * page can cost hundreds of words; stop early and let the caller commit. */
static int tx_has_room(const struct tx *tx)
{
	return tx->nbytes < TX_MAX_BYTES / 2 && tx->nruns < TX_MAX_RUNS / 2 &&
	       tx->nfrees < TX_MAX_FREES / 2;
}

/* Releases backing of whole pages/windows in [from, to) of the partition.
 * Returns the offset it reached (to, unless the transaction filled up). On
 * a full pool, a huge window it would split keeps its pages (they stay
 * counted; a punch zeroes them, a truncate leaves them past the size, D3). */
static uint64_t unback_range(ferrite_fs *fs, struct tx *tx, struct fr_inode *ip, uint64_t from,
			     uint64_t to)
{
	int level = level_of(tx, ip);
	uint64_t part = tx_get8(tx, &ip->i_part);
	if (level == I_NO_PART || from >= to)
		return to;
	if (is_small(level)) {
		from = FR_ALIGN_UP(from, FR_PAGE_SIZE);
		for (uint64_t p = from; p < to; p += FR_PAGE_SIZE)
			if (ppt_page_tx(tx, part + p)) {
				part_small_unback(tx, part + p, FR_PAGE_SIZE);
				add_blocks(tx, ip, -1);
			}
		return to;
	}
	if (fs->m.sp.reserve_windows) {
		/* whole pages: a window loses what lies in [from, to) */
		from = FR_ALIGN_UP(from, FR_PAGE_SIZE);
		for (uint64_t p = from; p < to;) {
			uint64_t w = FR_ALIGN_DOWN(p, FR_UNIT_SIZE),
				 e = FR_MIN(to, w + FR_UNIT_SIZE);
			uint64_t went = ppt_window_tx(tx, part + w);
			if (went != PPT_NONE && !tx_has_room(tx))
				return p;
			if (went != PPT_NONE && p == w && e == w + FR_UNIT_SIZE) {
				int64_t pages = 512;
				if ((went & PPT_TYPE_MASK) == PPT_TABLE)
					pages = ppt_table(&fs->m.sp, went)->pt_npages;
				part_large_unback(tx, part + w);
				add_blocks(tx, ip, -pages);
			} else if (went != PPT_NONE) {
				uint64_t released = 0;
				int rc = part_large_unback_pages(
				    tx, part + w, (unsigned)((p - w) >> FR_PAGE_SHIFT),
				    (unsigned)((e - w) >> FR_PAGE_SHIFT), &released);
				/* -ENOSPC: a whole unit cannot become a table without
				 * a page for the table (a full pool). Its pages stay
				 * and count; the windows after it are released all
				 * the same -- stopping here left them backed in a
				 * partition the caller then freed. */
				if (rc && rc != -ENOSPC)
					return to; /* the transaction is damaged: it fails */
				add_blocks(tx, ip, -(int64_t)released);
			}
			p = e;
		}
		return to;
	}
	from = FR_ALIGN_UP(from, FR_UNIT_SIZE);
	for (uint64_t w = from; w < to; w += FR_UNIT_SIZE) {
		uint64_t went = ppt_window_tx(tx, part + w);
		if (went == PPT_NONE)
			continue;
		if (!tx_has_room(tx))
			return w;
		int64_t pages = 512;
		if ((went & PPT_TYPE_MASK) == PPT_TABLE)
			pages = ppt_table(&fs->m.sp, went)->pt_npages;
		part_large_unback(tx, part + w);
		add_blocks(tx, ip, -pages);
	}
	return to;
}

/* Moves the inode's data into a partition of new_level (ctFS upgrade and
 * downgrade). Whole windows move by remapping (pswap); partitions below
 * 2 MiB are copied, which costs less than remapping a few pages
 * (machine-limits.md: ~14 us per remapped 4 KiB page). keep = bytes that
 * matter; everything beyond must already be released when shrinking. */
static int relocate(ferrite_fs *fs, struct tx *tx, struct fr_inode *ip, int new_level,
		    uint64_t keep)
{
	struct space *sp = &fs->m.sp;
	int old_level = level_of(tx, ip);
	uint64_t old_v = tx_get8(tx, &ip->i_part), nv = 0;
	if (old_level == new_level)
		return 0;
	int rc = 0;
	if (new_level != I_NO_PART) {
		rc = part_alloc(tx, new_level, &nv);
		if (rc)
			return rc == -EUCLEAN ? fr_err(rc, "partition tree damaged") : rc;
	}
	if (old_level != I_NO_PART && new_level != I_NO_PART) {
		if (old_level >= SP_L3 && new_level >= SP_L3) {
			uint64_t bytes = FR_MIN(part_bytes(old_level), part_bytes(new_level));
			rc = ppt_move(tx, old_v, nv, bytes >> FR_PAGE_SHIFT);
			if (rc)
				return rc;
			tx_defer(tx, vs_moved, old_v, nv, bytes >> FR_UNIT_SHIFT);
		} else {
			uint64_t copy = FR_MIN(keep, part_bytes(new_level));
			copy = FR_MIN(copy, part_bytes(old_level));
			tx_set8(tx, &ip->i_part, nv);
			tx_set1(tx, &ip->i_level, (uint8_t)new_level);
			/* Small destinations hold every page below the size (D2). */
			uint64_t need =
			    is_small(new_level) ? FR_ALIGN_UP(copy, FR_PAGE_SIZE) : copy;
			char page[FR_PAGE_SIZE];
			for (uint64_t p = 0; p < need; p += FR_PAGE_SIZE) {
				uint64_t src = ppt_page_tx(tx, old_v + p);
				rc = back_range(fs, tx, ip, p, FR_PAGE_SIZE, 0, 0, 0);
				if (rc)
					return rc;
				uint64_t dst = ppt_page_tx(tx, nv + p);
				if (!dst) /* 0 would be the superblock */
					return tx_damaged(tx, "partition %#llx lost a fresh page",
							  (unsigned long long)nv);
				if (src)
					tx_get(tx, sp_ptr(sp, src), page, FR_PAGE_SIZE);
				else
					memset(page, 0, FR_PAGE_SIZE);
				if (copy < p + FR_PAGE_SIZE) /* D5 */
					memset(page + (copy - p), 0,
					       (size_t)(p + FR_PAGE_SIZE - copy));
				pm_copy_nt(sp_ptr(sp, dst), page, FR_PAGE_SIZE);
				tx_mark_fresh(tx);
			}
			/* Release the old partition's backing. */
			tx_set8(tx, &ip->i_part, old_v);
			tx_set1(tx, &ip->i_level, (uint8_t)old_level);
			if (unback_range(fs, tx, ip, 0, part_bytes(old_level)) <
			    part_bytes(old_level))
				return -E2BIG;
		}
	} else if (old_level != I_NO_PART) {
		if (unback_range(fs, tx, ip, 0, part_bytes(old_level)) < part_bytes(old_level))
			return -E2BIG;
	}
	if (old_level != I_NO_PART) {
		/* The old partition holds no backing any more (H4). */
		if (old_level >= SP_L3 && new_level == I_NO_PART)
			tx_defer(tx, vs_window_changed, old_v,
				 part_bytes(old_level) >> FR_UNIT_SHIFT, 0);
		part_free(tx, old_v, old_level);
	}
	tx_set8(tx, &ip->i_part, nv);
	tx_set1(tx, &ip->i_level, (uint8_t)new_level);
	return 0;
}

int dp_back_range(ferrite_fs *fs, struct tx *tx, struct fr_inode *ip, uint64_t off, uint64_t len,
		  uint64_t zero_below, uint64_t w0, uint64_t w1)
{
	return back_range(fs, tx, ip, off, len, zero_below, w0, w1);
}

uint64_t dp_unback_range(ferrite_fs *fs, struct tx *tx, struct fr_inode *ip, uint64_t from,
			 uint64_t to)
{
	return unback_range(fs, tx, ip, from, to);
}

int dp_grow_partition(ferrite_fs *fs, struct fr_inode *ip, uint64_t end)
{
	int level = ip->i_level, need = sp_level_for(end);
	if (level != I_NO_PART && need <= level)
		return 0;
	struct log_ctx *lc = op_begin(fs);
	if (!lc)
		return -ENOMEM;
	int rc = relocate(fs, lc->tx, ip, need, ip->i_size);
	if (rc) {
		tx_abort(lc->tx);
		pm_fence(); /* copies into the abandoned partition: nothing left unfenced */
		op_end(fs, lc);
		return rc == -EUCLEAN ? rc : fr_err(-ENOSPC, "no space left in the pool");
	}
	rc = op_commit(fs, lc);
	op_end(fs, lc);
	return rc;
}

int dp_prepare(ferrite_fs *fs, struct tx *tx, struct fr_inode *ip, uint64_t off, uint64_t len,
	       uint64_t keep)
{
	int level = level_of(tx, ip);
	uint64_t end = off + len;
	if (end > fs->max_file_size)
		return -EFBIG;
	int need = sp_level_for(end);
	if (level == I_NO_PART || need > level) {
		int rc = relocate(fs, tx, ip, need, keep);
		if (rc)
			return rc;
	}
	return back_range(fs, tx, ip, off, len, 0, 0, 0);
}

/* Does [off, off+len) of the partition need new backing? (no tx: committed) */
static int needs_backing(ferrite_fs *fs, struct fr_inode *ip, uint64_t off, uint64_t len)
{
	struct space *sp = &fs->m.sp;
	int level = ip->i_level;
	if (level == I_NO_PART || off + len > part_bytes(level))
		return 1;
	uint64_t part = ip->i_part;
	if (is_small(level)) {
		for (uint64_t p = FR_ALIGN_DOWN(off, FR_PAGE_SIZE); p < off + len;
		     p += FR_PAGE_SIZE)
			if (!ppt_page(sp, part + p))
				return 1;
		return 0;
	}
	for (uint64_t w = FR_ALIGN_DOWN(off, FR_UNIT_SIZE); w < off + len; w += FR_UNIT_SIZE) {
		uint64_t went = ppt_window(sp, part + w);
		if (went == PPT_NONE || went == PPT_BAD)
			return 1;
		if ((went & PPT_TYPE_MASK) != PPT_TABLE)
			continue;
		uint64_t a = FR_MAX(FR_ALIGN_DOWN(off, FR_PAGE_SIZE), w);
		for (uint64_t p = a; p < FR_MIN(off + len, w + FR_UNIT_SIZE); p += FR_PAGE_SIZE)
			if (!ppt_page(sp, part + p))
				return 1; /* a hole of a window backed page by page */
	}
	return 0;
}

/* Pages past the size that a write names from its window's reservation are
 * zeros the committed state shows through that window's holes (W2); strict.c
 * stores into pages past the size before its entry commits, which would
 * leave them dirty in the reservation should the process die first. So it
 * names them here, in their own transaction: past the size, so the file's
 * contents do not change (D3). Other pages past the size are free in the
 * committed state and need nothing. */
int dp_name_reserved_past_size(ferrite_fs *fs, struct fr_inode *ip, uint64_t end)
{
	struct space *sp = &fs->m.sp;
	uint64_t size = ip->i_size;
	int level = ip->i_level;
	if (end <= size || !sp->reserve_windows || level == I_NO_PART || is_small(level))
		return 0;
	end = FR_MIN(end, part_bytes(level));
	for (uint64_t w = FR_ALIGN_DOWN(size, FR_UNIT_SIZE); w < end; w += FR_UNIT_SIZE) {
		uint64_t a = FR_MAX(w, size), b = FR_MIN(end, w + FR_UNIT_SIZE);
		if ((ppt_window(sp, ip->i_part + w) & PPT_TYPE_MASK) != PPT_TABLE ||
		    !needs_backing(fs, ip, a, b - a))
			continue;
		struct log_ctx *lc = op_begin(fs);
		if (!lc)
			return -ENOMEM;
		int reserved = part_large_reserved(lc->tx, ip->i_part + w);
		int rc = reserved ? back_range(fs, lc->tx, ip, a, b - a, 0, 0, 0) : 0;
		if (rc || !reserved)
			tx_abort(lc->tx);
		else
			rc = op_commit(fs, lc);
		op_end(fs, lc);
		if (rc)
			return rc == -EUCLEAN ? rc : fr_err(-ENOSPC, "no space left in the pool");
	}
	return 0;
}

/* Zeroes [from, to) wherever it is backed (D3), through the partition space. */
static int zero_backed(ferrite_fs *fs, struct fr_inode *ip, uint64_t from, uint64_t to)
{
	struct space *sp = &fs->m.sp;
	int level = ip->i_level;
	if (level == I_NO_PART || from >= to)
		return 0;
	to = FR_MIN(to, part_bytes(level));
	uint64_t part = ip->i_part;
	while (from < to) {
		uint64_t wend = FR_MIN(FR_ALIGN_DOWN(from, FR_UNIT_SIZE) + FR_UNIT_SIZE, to);
		uint64_t went = is_small(level) ? PPT_NONE : ppt_window(sp, part + from);
		if (is_small(level) || went != PPT_NONE) {
			int rc = vs_ensure(sp, part + from, wend - from);
			if (rc) {
				pm_fence(); /* what was zeroed so far is not left in flight */
				return rc;
			}
			if ((went & PPT_TYPE_MASK) != PPT_TABLE) {
				pm_zero_nt(vs_addr(sp, part + from), wend - from);
			} else {
				/* a large window backed page by page: its holes map the
				 * zero page read-only, and read as zeros already */
				for (uint64_t p = from; p < wend;) {
					uint64_t pe = FR_MIN(
					    FR_ALIGN_DOWN(p, FR_PAGE_SIZE) + FR_PAGE_SIZE, wend);
					if (ppt_page(sp, part + p))
						pm_zero_nt(vs_addr(sp, part + p), pe - p);
					p = pe;
				}
			}
		}
		from = wend;
	}
	return 0;
}

/* Bytes [off, end) of a small file that lie in one page it has, at or below
 * its size, through the direct mapping of the pool; NULL otherwise. Small
 * files share 2 MiB windows whose pages lie wherever space was free, so the
 * window path would map each new file's page on its own (a system call and
 * a fault per file, and mappings against the budget, V3); the direct mapping
 * is there already. Same pool pages, so both views stay coherent. The inode
 * lock is held: the page cannot change under the caller. */
static char *direct_page(ferrite_fs *fs, struct fr_inode *ip, uint64_t off, uint64_t end,
			 uint64_t size)
{
	if (!is_small(ip->i_level) || off > size || end <= off ||
	    (off >> FR_PAGE_SHIFT) != ((end - 1) >> FR_PAGE_SHIFT) || end > part_bytes(ip->i_level))
		return NULL;
	uint64_t phys = ppt_page(&fs->m.sp, ip->i_part + FR_ALIGN_DOWN(off, FR_PAGE_SIZE));
	return phys ? (char *)sp_ptr(&fs->m.sp, phys) + (off & (FR_PAGE_SIZE - 1)) : NULL;
}

static void stamp(struct fr_inode *ip, int which)
{
	struct timespec now;
	fs_now(&now);
	if (which & T_MTIME) {
		pm_store8(&ip->i_mtime_sec, (uint64_t)now.tv_sec);
		pm_store4(&ip->i_mtime_nsec, (uint32_t)now.tv_nsec);
	}
	if (which & T_CTIME) {
		pm_store8(&ip->i_ctime_sec, (uint64_t)now.tv_sec);
		pm_store4(&ip->i_ctime_nsec, (uint32_t)now.tv_nsec);
	}
	if (which & T_ATIME) {
		pm_store8(&ip->i_atime_sec, (uint64_t)now.tv_sec);
		pm_store4(&ip->i_atime_nsec, (uint32_t)now.tv_nsec);
	}
}

/* An unprivileged write, truncate or allocation takes away set-user-id,
 * and set-group-id where the group may execute or the caller is not of the
 * file's group (as Linux's file_remove_privs and setattr_should_drop_sgid),
 * durably and before it changes anything: a crash may leave the bits gone
 * and the contents old, never new contents under the old privileges. The
 * inode's write lock is held: no transaction of another thread has this
 * inode's mode in hand. */
static void drop_setid(struct fr_inode *ip)
{
	const struct vfs_cred *c = cred_get();
	uint32_t mode = ip->i_mode, kill = mode & S_ISUID;
	if (!S_ISREG(mode) || c->uid == 0 || !(mode & (S_ISUID | S_ISGID)))
		return;
	if ((mode & S_ISGID) && ((mode & S_IXGRP) || !cred_in_group(c, ip->i_gid)))
		kill |= S_ISGID;
	if (!kill)
		return;
	pm_store4(&ip->i_mode, mode & ~kill);
	stamp(ip, T_CTIME);
	pm_flush(&ip->i_mode, sizeof ip->i_mode);
	pm_flush(&ip->i_size, 64); /* the times' line (publish_size) */
	pm_fence();
}

/* Publishes size and times: one line (bytes 64-127 of the inode). */
static void publish_size(struct fr_inode *ip, uint64_t size, int times)
{
	stamp(ip, times);
	pm_store8(&ip->i_size, size);
	if (!PM_PLANTED(PM_PLANT_SKIP_FLUSH))
		pm_flush(&ip->i_size, 64);
	pm_fence(); /* COMMIT POINT of an append or extension */
}

static size_t iov_total(const struct iovec *iov, int n)
{
	size_t t = 0;
	for (int i = 0; i < n; i++)
		t += iov[i].iov_len;
	return t;
}

/* Where the backing of a write [off, end) to a file of size bytes ends. A
 * sequential append to a large file (1 MiB or more) whose last window holds
 * a reservation backs a few pages more, from that reservation (no
 * allocation, zeros already, window.c W2): up to 64 KiB and a sixty-fourth
 * of the file, inside the window, so the next appends find their pages and
 * make no transaction (one in 16 instead of one per 4 KiB page). Those pages
 * count in st_blocks, as speculative pre-allocation does on XFS. */
static uint64_t append_ahead(ferrite_fs *fs, struct tx *tx, struct fr_inode *ip, int lvl,
			     uint64_t off, uint64_t end, uint64_t size)
{
	if (off != size || size < FR_MIB || is_small(lvl) || lvl == I_NO_PART ||
	    !fs->m.sp.reserve_windows)
		return end;
	uint64_t ahead = FR_MIN(64 * 1024, size / 64) & ~(FR_PAGE_SIZE - 1);
	uint64_t wlast = FR_ALIGN_DOWN(end - 1, FR_UNIT_SIZE);
	uint64_t to = FR_MIN(FR_ALIGN_UP(end, FR_PAGE_SIZE) + ahead, wlast + FR_UNIT_SIZE);
	to = FR_MIN(to, FR_MIN(part_bytes(lvl), fs->max_file_size));
	if (to <= end || !part_large_reserved(tx, tx_get8(tx, &ip->i_part) + wlast))
		return end;
	return to;
}

/* A write of [off, end) into a file of `size` bytes: the pages it needs
 * backed, in a transaction that commits before the copy (a larger
 * partition if the file outgrows its own, pre-allocation for an append). */
static int write_back_range(ferrite_fs *fs, struct fr_inode *ip, uint64_t off, uint64_t end,
			    uint64_t size)
{
	struct log_ctx *lc = op_begin(fs);
	if (!lc)
		return -ENOMEM;
	struct tx *tx = lc->tx;
	int need = sp_level_for(end);
	int lvl = tx_get1(tx, &ip->i_level);
	int r = 0;
	if (lvl == I_NO_PART || need > lvl)
		r = relocate(fs, tx, ip, need, size);
	lvl = tx_get1(tx, &ip->i_level);
	if (!r) {
		uint64_t b0 = is_small(lvl) ? FR_MIN(off, size) : off;
		/* Below the size, no [w0, w1) exemption: the data is copied
		 * after this commit, and a window below the size is exposed
		 * by it, so it must be zeroed now (D4) or a crash before the
		 * copy shows the previous owner's bytes. At and past the size,
		 * only pages the write covers whole are left to it: the rest
		 * of a page it covers in part is zeroed too (D5), since a
		 * mapping shows the page past the end of file. */
		uint64_t w0 = FR_ALIGN_UP(FR_MAX(off, size), FR_PAGE_SIZE);
		uint64_t w1 = FR_ALIGN_DOWN(end, FR_PAGE_SIZE);
		r = back_range(fs, tx, ip, b0, append_ahead(fs, tx, ip, lvl, off, end, size) - b0,
			       FR_ALIGN_UP(end, FR_PAGE_SIZE), w0, w1 > w0 ? w1 : w0);
	}
	if (r) {
		tx_abort(tx);
		op_end(fs, lc);
		if (r == -EUCLEAN || r == -EFBIG)
			return r;
		return fr_err(-ENOSPC, "no space left in the pool");
	}
	r = op_commit(fs, lc);
	op_end(fs, lc);
	return r;
}

/* Where the bytes at off go, the range backed: the file's page, mapped,
 * with a gap between the size and off zeroed first. */
static int write_target(ferrite_fs *fs, struct fr_inode *ip, uint64_t off, uint64_t end,
			uint64_t size, char **dst)
{
	struct space *sp = &fs->m.sp;
	*dst = direct_page(fs, ip, off, end, size);
	if (*dst)
		return 0;
	uint64_t part = ip->i_part;
	uint64_t map_from = FR_MIN(off, size);
	int rc = vs_ensure(sp, part + map_from, end - map_from);
	if (!rc && off > size)
		rc = zero_backed(fs, ip, size, off);
	if (!rc)
		*dst = vs_addr(sp, part + off);
	return rc;
}

/* The copy, then the size (the commit point of an append) or the times. */
static void copy_and_publish(struct fr_inode *ip, const struct iovec *iov, int iovcnt, char *dst,
			     uint64_t off, uint64_t end, uint64_t size)
{
	if (PM_PLANTED(PM_PLANT_SIZE_BEFORE_DATA) && end > size)
		publish_size(ip, end, T_MTIME | T_CTIME);
	for (int i = 0; i < iovcnt; i++) {
		size_t n = FR_MIN(iov[i].iov_len, (size_t)(end - off));
		if (!n)
			continue;
		pm_copy_nt(dst, iov[i].iov_base, n);
		dst += n;
		off += n;
	}
	if (end > size) {
		pm_fence(); /* ORDER: data before the size that exposes it */
		publish_size(ip, end, T_MTIME | T_CTIME);
	} else {
		stamp(ip, T_MTIME | T_CTIME);
		pm_flush(&ip->i_size, 64);
		pm_fence(); /* data and times durable on return */
	}
}

ssize_t dp_write(ferrite_fs *fs, uint64_t ino, const struct iovec *iov, int iovcnt, int64_t off_in,
		 int64_t *newoff)
{
	struct fr_inode *ip = ino_ptr(fs, ino);
	pthread_rwlock_t *lk = ino_lock(fs, ino);
	size_t len = iov_total(iov, iovcnt);
	pthread_rwlock_wrlock(lk);
	uint64_t size = ip->i_size;
	uint64_t off = off_in < 0 ? size : (uint64_t)off_in;
	ssize_t rc = 0;
	if (len == 0)
		goto out;
	drop_setid(ip);
	if (off >= fs->max_file_size) {
		rc = fr_err(-EFBIG, "write beyond the largest file size (%llu bytes)",
			    (unsigned long long)fs->max_file_size);
		goto out;
	}
	if (off + len > fs->max_file_size)
		len = fs->max_file_size - off; /* a short write, as POSIX allows */
	if (fs->strict && off < size) {
		/* Changes bytes already in the file: atomic (strict.c). Pure
		 * appends need nothing more than the sync path below. */
		int in_place = 0;
		rc = dp_strict_write(fs, ino, iov, iovcnt, off, len, &in_place);
		if (!in_place) {
			if (rc > 0 && newoff)
				*newoff = (int64_t)(off + (uint64_t)rc);
			goto out;
		}
	}
	uint64_t end = off + len;
	uint64_t from = is_small(ip->i_level) || ip->i_level == I_NO_PART ? FR_MIN(off, size) : off;
	char *dst = NULL;
	if (needs_backing(fs, ip, from, end - from))
		rc = write_back_range(fs, ip, off, end, size);
	if (!rc)
		rc = write_target(fs, ip, off, end, size, &dst);
	if (rc)
		goto out;
	copy_and_publish(ip, iov, iovcnt, dst, off, end, size);
	rc = (ssize_t)len;
	if (newoff)
		*newoff = (int64_t)end;
out:
	pthread_rwlock_unlock(lk);
	return rc;
}

int dp_atime_due(const struct fr_inode *ip)
{
	/* relatime: keep atime meaningful without a store per read */
	if (ip->i_atime_sec < ip->i_mtime_sec ||
	    (ip->i_atime_sec == ip->i_mtime_sec && ip->i_atime_nsec <= ip->i_mtime_nsec) ||
	    ip->i_atime_sec < ip->i_ctime_sec)
		return 1;
	struct timespec now;
	fs_now(&now);
	return now.tv_sec - ip->i_atime_sec > 24 * 3600;
}

ssize_t dp_read(ferrite_fs *fs, uint64_t ino, void *buf, size_t len, uint64_t off)
{
	struct space *sp = &fs->m.sp;
	struct fr_inode *ip = ino_ptr(fs, ino);
	pthread_rwlock_t *lk = ino_lock(fs, ino);
	pthread_rwlock_rdlock(lk);
	uint64_t size = ip->i_size;
	ssize_t rc = 0;
	if (off < size && len) {
		size_t n = (size_t)FR_MIN((uint64_t)len, size - off);
		uint64_t v = ip->i_part + off;
		const char *src = direct_page(fs, ip, off, off + n, size);
		if (!src && !vs_ready(sp, v, n)) {
			int r = vs_ensure(sp, v, n);
			if (r) {
				rc = r;
				goto out;
			}
		}
		memcpy(buf, src ? src : vs_addr(sp, v), n);
		rc = (ssize_t)n;
		/* a shared call changes nothing (share.c H9): its caller asked
		 * for the turn when the atime was due (dp_atime_due) */
		if (!pmfs_in_shared() && dp_atime_due(ip)) {
			/* Rare (relatime), so it pays for its own fence: a call
			 * returns with nothing of its own left unpersisted. */
			stamp(ip, T_ATIME);
			pm_persist(&ip->i_atime_sec, 8);
		}
	}
out:
	pthread_rwlock_unlock(lk);
	return rc;
}

/* Releases backing beyond keep and shrinks the partition, in bounded
 * transactions. The size must already be <= keep. */
/* mapped: a mapping of the file may show the pages below keep, so they must
 * keep their pool offsets: the partition stays large (mmap.c M1). */
static int shrink_storage(ferrite_fs *fs, struct fr_inode *ip, uint64_t keep, int mapped)
{
	int level = ip->i_level;
	if (level == I_NO_PART)
		return 0;
	uint64_t pbytes = part_bytes(level);
	uint64_t hi = pbytes;
	int rc = 0;
	if (!is_small(level)) {
		/* format 4 gives back the pages past keep; older pools whole windows */
		uint64_t lo =
		    FR_ALIGN_UP(keep, fs->m.sp.reserve_windows ? FR_PAGE_SIZE : FR_UNIT_SIZE);
		while (hi > lo) {
			uint64_t start = hi > lo + BATCH_WINDOWS * FR_UNIT_SIZE
					     ? hi - BATCH_WINDOWS * FR_UNIT_SIZE
					     : lo;
			/* Skip ranges with nothing to release cheaply. */
			int any = 0;
			for (uint64_t w = start; w < hi && !any; w += FR_UNIT_SIZE)
				any = ppt_window(&fs->m.sp, ip->i_part + w) != PPT_NONE;
			for (uint64_t from = start; any && from < hi;) {
				struct log_ctx *lc = op_begin(fs);
				if (!lc)
					return -ENOMEM;
				from = unback_range(fs, lc->tx, ip, from, hi);
				rc = op_commit(fs, lc);
				op_end(fs, lc);
				if (rc)
					return rc;
			}
			hi = start;
		}
	}
	int want = keep == 0 ? I_NO_PART : sp_level_for(keep);
	if (mapped && !is_small(level) && (want == I_NO_PART || want < SP_L3))
		want = SP_L3;
	if (want == I_NO_PART || want < level || is_small(level)) {
		struct log_ctx *lc = op_begin(fs);
		if (!lc)
			return -ENOMEM;
		struct tx *tx = lc->tx;
		if (is_small(level))
			unback_range(fs, tx, ip, FR_ALIGN_UP(keep, FR_PAGE_SIZE), pbytes);
		if (want == I_NO_PART || want < level)
			rc = relocate(fs, tx, ip, want, keep);
		if (rc) {
			tx_abort(tx);
			op_end(fs, lc);
			/* Keeping the larger partition is always correct. */
			return rc == -ENOSPC ? 0 : rc;
		}
		rc = op_commit(fs, lc);
		op_end(fs, lc);
	}
	return rc;
}

int dp_release_tx(ferrite_fs *fs, struct tx *tx, struct fr_inode *ip)
{
	return relocate(fs, tx, ip, I_NO_PART, 0);
}

int dp_release_all(ferrite_fs *fs, struct log_ctx **lcp, uint64_t ino)
{
	(void)lcp;
	return shrink_storage(fs, ino_ptr(fs, ino), 0, 0);
}

static int grow_to(ferrite_fs *fs, struct fr_inode *ip, uint64_t newsize)
{
	uint64_t size = ip->i_size;
	int level = ip->i_level;
	int need = sp_level_for(newsize);
	int small_after = need < SP_L3;
	if (level == I_NO_PART || need > level ||
	    (small_after && needs_backing(fs, ip, size, newsize - size))) {
		struct log_ctx *lc = op_begin(fs);
		if (!lc)
			return -ENOMEM;
		struct tx *tx = lc->tx;
		int rc = 0;
		if (level == I_NO_PART || need > level)
			rc = relocate(fs, tx, ip, need, size);
		if (!rc && is_small(tx_get1(tx, &ip->i_level)))
			rc = back_range(fs, tx, ip, size, newsize - size, 0, 0, 0);
		if (rc) {
			tx_abort(tx);
			op_end(fs, lc);
			return rc == -EUCLEAN ? rc : fr_err(-ENOSPC, "no space left in the pool");
		}
		rc = op_commit(fs, lc);
		op_end(fs, lc);
		if (rc)
			return rc;
	}
	return zero_backed(fs, ip, size, newsize);
}

int dp_truncate(ferrite_fs *fs, uint64_t ino, uint64_t len, int mapped)
{
	struct fr_inode *ip = ino_ptr(fs, ino);
	pthread_rwlock_t *lk = ino_lock(fs, ino);
	if (len > fs->max_file_size)
		return fr_err(-EFBIG, "length beyond the largest file size");
	pthread_rwlock_wrlock(lk);
	drop_setid(ip);
	uint64_t size = ip->i_size;
	int rc = 0;
	if (len > size) {
		rc = grow_to(fs, ip, len);
		if (!rc) {
			pm_fence();
			publish_size(ip, len, T_MTIME | T_CTIME);
		}
	} else if (len < size && (mapped & DP_MAPPED_ELSEWHERE)) {
		/* another process maps it and its mapping cannot be cut from
		 * here: the pages stay, past the size, as zeros (a later growth
		 * shows them so, and the file's release frees them) */
		publish_size(ip, len, T_MTIME | T_CTIME); /* COMMIT POINT: truncation */
		rc = zero_backed(fs, ip, len, size);
		pm_fence();
	} else if (len < size) {
		publish_size(ip, len, T_MTIME | T_CTIME); /* COMMIT POINT: truncation */
		rc = shrink_storage(fs, ip, len, mapped);
		/* A mapping still shows the rest of the last page: zeros, as
		 * POSIX asks (past the size: a crash before this is harmless,
		 * growth zero-fills). */
		if (!rc && mapped) {
			rc = zero_backed(fs, ip, len, FR_MIN(FR_ALIGN_UP(len, FR_PAGE_SIZE), size));
			pm_fence(); /* durable on return, as every call */
		}
	} else {
		publish_size(ip, len, T_MTIME | T_CTIME);
	}
	pthread_rwlock_unlock(lk);
	return rc;
}

static int punch(ferrite_fs *fs, struct fr_inode *ip, uint64_t off, uint64_t end)
{
	uint64_t size = ip->i_size;
	end = FR_MIN(end, size);
	if (off >= end)
		return 0;
	int level = ip->i_level;
	if (!is_small(level)) {
		/* Whole windows (format 4: whole pages) become holes; the edges
		 * are zeroed. */
		uint64_t grain = fs->m.sp.reserve_windows ? FR_PAGE_SIZE : FR_UNIT_SIZE;
		uint64_t w0 = FR_ALIGN_UP(off, grain), w1 = FR_ALIGN_DOWN(end, grain);
		while (w0 < w1) {
			uint64_t to = FR_MIN(w1, w0 + BATCH_WINDOWS * FR_UNIT_SIZE);
			struct log_ctx *lc = op_begin(fs);
			if (!lc)
				return -ENOMEM;
			uint64_t reached = unback_range(fs, lc->tx, ip, w0, to);
			int rc = op_commit(fs, lc);
			op_end(fs, lc);
			if (rc)
				return rc;
			w0 = reached;
		}
		w0 = FR_ALIGN_UP(off, grain);
		if (w0 < w1) /* the edges, and what a full pool kept (unback_range) */
			return zero_backed(fs, ip, off, end);
	}
	return zero_backed(fs, ip, off, end);
}

int dp_fallocate(ferrite_fs *fs, uint64_t ino, int mode, uint64_t off, uint64_t len, int mapped)
{
	struct fr_inode *ip = ino_ptr(fs, ino);
	pthread_rwlock_t *lk = ino_lock(fs, ino);
	uint64_t end = off + len;
	if (end < off || end > fs->max_file_size)
		return fr_err(-EFBIG, "range beyond the largest file size");
	pthread_rwlock_wrlock(lk);
	drop_setid(ip);
	int rc = 0;
	uint64_t size = ip->i_size;
	if (mode & FALLOC_FL_PUNCH_HOLE) {
		/* Strict mode: one entry, so a crash shows all or none of the
		 * punch; too large for one, it goes step by step as in sync.
		 * A mapped range keeps its pages where the mappings show them
		 * (mmap.c M4) and reads zeros, stored in place. */
		if (mapped) {
			rc = off < size ? zero_backed(fs, ip, off, FR_MIN(end, size)) : 0;
		} else {
			rc = fs->strict && off < size
				 ? dp_strict_punch(fs, ip, off, FR_MIN(end, size))
				 : 1;
			if (rc != 1)
				goto out; /* the strict punch's own commit, or its failure */
			rc = punch(fs, ip, off, end);
		}
		if (!rc) {
			stamp(ip, T_MTIME | T_CTIME);
			pm_flush(&ip->i_size, 64);
			pm_fence();
		}
		goto out;
	}
	int keep = mode & FALLOC_FL_KEEP_SIZE;
	uint64_t top = FR_MAX(end, size);
	/* Allocate in bounded transactions: large ranges take several. */
	uint64_t pos = off;
	while (pos < end) {
		int level = ip->i_level;
		int need = sp_level_for(top);
		uint64_t step = end - pos;
		if (!is_small(level) && need >= SP_L3)
			step =
			    FR_MIN(step, BATCH_WINDOWS * FR_UNIT_SIZE - (pos & (FR_UNIT_SIZE - 1)));
		struct log_ctx *lc = op_begin(fs);
		if (!lc) {
			rc = -ENOMEM;
			goto out;
		}
		struct tx *tx = lc->tx;
		if (level == I_NO_PART || need > level)
			rc = relocate(fs, tx, ip, need, size);
		uint64_t b0 = is_small(tx_get1(tx, &ip->i_level)) ? FR_MIN(pos, size) : pos;
		if (!rc)
			rc = back_range(fs, tx, ip, b0, pos + step - b0, size, 0, 0);
		if (rc) {
			tx_abort(tx);
			op_end(fs, lc);
			if (rc != -EUCLEAN)
				rc = fr_err(-ENOSPC, "no space left in the pool");
			goto out;
		}
		rc = op_commit(fs, lc);
		op_end(fs, lc);
		if (rc)
			goto out;
		pos += step;
	}
	if (!keep && end > size) {
		rc = zero_backed(fs, ip, size, end);
		if (!rc) {
			pm_fence();
			publish_size(ip, end, T_MTIME | T_CTIME);
		}
	}
out:
	pthread_rwlock_unlock(lk);
	return rc;
}
