/*
 * strict.c -- strict mode: a write that changes bytes already in the file is
 * atomic (ctFS 3.4.2 write-and-swap, and 3.5's copy for small writes, here
 * through the redo log). Pure appends (off >= size) stay on the sync path
 * (data.c): the data is invisible until the 8-byte size store publishes it.
 *
 * A strict write of [off, end) into a file of size S (off < S) is ONE log
 * entry holding
 *   - backing for holes inside [off, end) and for pages beyond S (fresh,
 *     zeroed where the write does not cover them and S exposes them, D4),
 *   - the bytes it overwrites on "old pages" (pages that hold file data),
 *     either as words of the entry itself (redo copy: small writes), or
 *     written into fresh pages that the entry swaps into the PPT in place of
 *     the old ones, which it releases (write-and-swap: large writes),
 *   - i_size if the write extends the file, i_mtime, i_ctime, i_blocks.
 * Every byte that lands on a fresh page or beyond S is written before the
 * commit with non-temporal stores through the pool's direct mapping.
 *
 * Invariants: S1 until the entry commits, nothing the committed state can
 *               reach has changed: fresh pages are free in the committed
 *               allocator and referenced by nothing, bytes beyond S are not
 *               file data (D3) and lie on pages named before the write (a
 *               reservation's unnamed pages are holes reading zeros, W2:
 *               dp_name_reserved_past_size names those first), old pages are
 *               only read;
 *             S2 the pages a swap replaces are released by the same entry
 *               (queued until finalisation, so the entry cannot reuse them);
 *             S3 a large window needs at most STRICT_MAX_RUNS mappings besides
 *               its home unit: past that it is rewritten whole into a new unit
 *               (the process may hold only ~65 000 mappings).
 * Crash argument: log_stage fences the fresh data before the entry
 *   (tx_mark_fresh); the entry's fence is the commit point. Before it,
 *   recovery ignores the entry and the file shows the old bytes and size;
 *   the fresh pages are still free, so nothing leaks. After it, recovery
 *   replays the whole entry -- the staged bytes, the PPT entries, the
 *   allocator words, the size -- so the file shows the new bytes and size.
 * Cut-over (bench/README.md#strict): an overwrite of up to strict_redo_max
 *   bytes (28 KiB by default; $FERRITE_STRICT_REDO_MAX) is copied through the
 *   log, larger ones are swapped: remapping a page costs far more than
 *   copying it twice, and an entry holds at most TX_MAX_BYTES.
 * Mapped files: pages under a live ferrite_mmap mapping must not move, so
 *   such a file is never swapped: overwrites the log can carry are atomic,
 *   larger ones are written in place as in sync mode (durable, not atomic).
 * Locking: the inode's write lock throughout; alloc_lock from the first
 *   allocation until the entry is retired (tx.h); map_lock in the deferred
 *   mapping updates (vs_pages_changed).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>

#include "fs/fs.h"
#include "persist/pm.h"

#define STRICT_MAX_RUNS	   4   /* S3 */
#define STRICT_MAX_WINDOWS 128 /* windows one call may touch: 256 MiB; longer ones are short */

enum { HOW_REDO, HOW_SWAP };

void (*dp_strict_hook)(int step);

static inline void strict_step(int step)
{
	if (FR_UNLIKELY(dp_strict_hook != NULL))
		dp_strict_hook(step);
}

/* The bytes of the write, addressed by file offset (no iov: zeros, a punch). */
struct wsrc {
	const struct iovec *iov;
	int iovcnt;
	uint64_t off; /* file offset of the first byte */
};

static const char zero_page[FR_PAGE_SIZE];

/* Where the byte at file offset x comes from, and how many follow it. */
static const char *src_at(const struct wsrc *s, uint64_t x, size_t *avail)
{
	uint64_t q = x - s->off;
	for (int i = 0; i < s->iovcnt; i++) {
		if (q < s->iov[i].iov_len) {
			*avail = s->iov[i].iov_len - q;
			return (const char *)s->iov[i].iov_base + q;
		}
		q -= s->iov[i].iov_len;
	}
	*avail = 0;
	return NULL;
}

enum { TO_PM, TO_DRAM, TO_TX };

/* Copies the write's bytes [x, x + n) to dst: persistent memory (fresh or
 * beyond EOF, non-temporal), a DRAM buffer, or staged in tx (redo copy). */
static void src_copy(const struct wsrc *s, int to, struct tx *tx, char *dst, uint64_t x, uint64_t n)
{
	while (n) {
		size_t avail = FR_PAGE_SIZE;
		const char *p = s->iov ? src_at(s, x, &avail) : zero_page;
		if (!p)
			return;
		size_t k = (size_t)FR_MIN((uint64_t)avail, n);
		if (to == TO_PM)
			pm_copy_nt(dst, p, k);
		else if (to == TO_DRAM)
			memcpy(dst, p, k);
		else
			tx_set(tx, dst, p, k);
		dst += k;
		x += k;
		n -= k;
	}
}

struct sw {
	ferrite_fs *fs;
	struct tx *tx;
	struct fr_inode *ip;
	const struct wsrc *src;
	uint64_t part, off, end, size;
	int small;
	int punch; /* zeros: whole windows of a large file become holes */
	uint64_t page_of[512];
	uint64_t old_of[512];
	char buf[FR_PAGE_SIZE];
};

/* Writes [a, b) of the write where nothing committed can see it (S1): fresh
 * pages and pages beyond EOF, at the backing the transaction gives them. */
static int direct_write(struct sw *w, uint64_t a, uint64_t b)
{
	struct space *sp = &w->fs->m.sp;
	while (a < b) {
		uint64_t went = ppt_window_tx(w->tx, w->part + a), n;
		if ((went & PPT_TYPE_MASK) == PPT_HUGE) {
			n = FR_MIN(b, FR_ALIGN_DOWN(a, FR_UNIT_SIZE) + FR_UNIT_SIZE) - a;
			char *dst = sp_ptr(sp, went & ~PPT_TYPE_MASK) + (a & (FR_UNIT_SIZE - 1));
			src_copy(w->src, TO_PM, NULL, dst, a, n);
		} else {
			n = FR_MIN(b, FR_ALIGN_DOWN(a, FR_PAGE_SIZE) + FR_PAGE_SIZE) - a;
			uint64_t phys = ppt_page_tx(w->tx, w->part + a);
			if (!phys)
				return fr_err(-EUCLEAN, "strict write: page at %llu not backed",
					      (unsigned long long)a);
			char *dst = sp_ptr(sp, phys) + (a & (FR_PAGE_SIZE - 1));
			src_copy(w->src, TO_PM, NULL, dst, a, n);
		}
		a += n;
	}
	tx_mark_fresh(w->tx); /* the entry must not reach PM before these bytes */
	return 0;
}

/* Fills the fresh page that replaces the page at file offset p: the write's
 * bytes where it covers the page, the old bytes (old page number, 0 if none)
 * elsewhere inside the file. */
static void fill_fresh(struct sw *w, uint64_t p, uint64_t fresh_pg, uint64_t old_pg)
{
	struct space *sp = &w->fs->m.sp;
	char *dst = sp_ptr(sp, fresh_pg << FR_PAGE_SHIFT);
	uint64_t a = FR_MAX(w->off, p), b = FR_MIN(w->end, p + FR_PAGE_SIZE);
	if (a == p && b == p + FR_PAGE_SIZE) {
		src_copy(w->src, TO_PM, NULL, dst, p, FR_PAGE_SIZE);
		return;
	}
	if (a >= b) { /* not written: keep the old bytes if they are file data */
		if (old_pg && p < w->size)
			pm_copy_nt(dst, sp_ptr(sp, old_pg << FR_PAGE_SHIFT), FR_PAGE_SIZE);
		else if (p < w->size)
			pm_zero_nt(dst, FR_PAGE_SIZE); /* a hole of the file (D4) */
		return;
	}
	if (old_pg)
		memcpy(w->buf, sp_ptr(sp, old_pg << FR_PAGE_SHIFT), FR_PAGE_SIZE);
	else
		memset(w->buf, 0, FR_PAGE_SIZE);
	src_copy(w->src, TO_DRAM, NULL, w->buf + (a - p), a, b - a);
	pm_copy_nt(dst, w->buf, FR_PAGE_SIZE);
}

/* Swaps the whole window at file offset ws (fully written, or S3). */
static int swap_window(struct sw *w, uint64_t ws)
{
	struct space *sp = &w->fs->m.sp;
	for (unsigned o = 0; o < 512; o++)
		w->old_of[o] =
		    ppt_page(sp, w->part + ws + ((uint64_t)o << FR_PAGE_SHIFT)) >> FR_PAGE_SHIFT;
	int64_t added;
	int rc = part_swap_window(w->tx, w->part + ws, w->page_of, &added);
	if (rc)
		return rc;
	if (added) /* the window's holes got pages too */
		tx_set8(w->tx, &w->ip->i_blocks,
			tx_get8(w->tx, &w->ip->i_blocks) + (uint64_t)added);
	for (unsigned o = 0; o < 512; o++)
		fill_fresh(w, ws + ((uint64_t)o << FR_PAGE_SHIFT), w->page_of[o], w->old_of[o]);
	tx_mark_fresh(w->tx);
	return 0;
}

/* Swaps the old pages [r0, r1) (file offsets, one window). */
static int swap_run(struct sw *w, uint64_t r0, uint64_t r1)
{
	struct space *sp = &w->fs->m.sp;
	unsigned n = (unsigned)((r1 - r0) >> FR_PAGE_SHIFT);
	for (unsigned i = 0; i < n; i++)
		w->old_of[i] =
		    ppt_page(sp, w->part + r0 + ((uint64_t)i << FR_PAGE_SHIFT)) >> FR_PAGE_SHIFT;
	int rc = part_swap_pages(w->tx, w->part + r0, n, w->page_of);
	if (rc)
		return rc;
	for (unsigned i = 0; i < n; i++)
		fill_fresh(w, r0 + ((uint64_t)i << FR_PAGE_SHIFT), w->page_of[i], w->old_of[i]);
	tx_mark_fresh(w->tx);
	return 0;
}

/* Swaps the old pages of [r0, r1): run by run of backed pages, since a
 * punch may cross holes of a large window backed page by page (a write's
 * range was backed whole before). */
static int swap_pages(struct sw *w, uint64_t r0, uint64_t r1)
{
	for (uint64_t p = r0; p < r1;) {
		if (!ppt_page_tx(w->tx, w->part + p)) {
			if (!w->punch)
				return -EUCLEAN;
			p += FR_PAGE_SIZE;
			continue;
		}
		uint64_t q = p + FR_PAGE_SIZE;
		while (q < r1 && ppt_page_tx(w->tx, w->part + q))
			q += FR_PAGE_SIZE;
		int rc = swap_run(w, p, q);
		if (rc)
			return rc;
		p = q;
	}
	return 0;
}

/* Stages the write's bytes on the old pages [r0, r1) in the entry. */
static int redo_pages(struct sw *w, uint64_t r0, uint64_t r1)
{
	struct space *sp = &w->fs->m.sp;
	for (uint64_t p = r0; p < r1; p += FR_PAGE_SIZE) {
		uint64_t phys = ppt_page_tx(w->tx, w->part + p);
		if (!phys && w->punch)
			continue; /* a hole of a large window: it reads zeros already */
		if (!phys)
			return -EUCLEAN;
		uint64_t a = FR_MAX(w->off, p), b = FR_MIN(w->end, p + FR_PAGE_SIZE);
		src_copy(w->src, TO_TX, w->tx, sp_ptr(sp, phys) + (a - p), a, b - a);
	}
	return 0;
}

/* The old pages of window ws that the write touches: [*r0, *r1), file
 * offsets (empty if none). Committed state: holes of a large file are whole
 * windows, and a small file has every page below its size (D2). */
static void old_run(struct sw *w, uint64_t ws, uint64_t *r0, uint64_t *r1)
{
	uint64_t a = FR_MAX(w->off, ws), b = FR_MIN(w->end, w->size);
	b = FR_MIN(b, ws + FR_UNIT_SIZE);
	*r0 = *r1 = FR_ALIGN_DOWN(a, FR_PAGE_SIZE);
	if (a >= b)
		return;
	if (!w->small && ppt_window(&w->fs->m.sp, w->part + ws) == PPT_NONE)
		return;
	*r1 = FR_ALIGN_UP(b, FR_PAGE_SIZE);
}

/* One attempt in one transaction. -E2BIG: it does not fit one log entry
 * (nothing changed; try another way or a shorter write). */
static ssize_t strict_try(ferrite_fs *fs, struct sw *w, int how)
{
	struct log_ctx *lc = op_begin(fs);
	if (!lc)
		return -ENOMEM;
	struct tx *tx = w->tx = lc->tx;
	struct fr_inode *ip = w->ip;
	int rc = w->punch
		     ? 0
		     : dp_back_range(fs, tx, ip, w->off, w->end - w->off, w->size, w->off, w->end);
	for (uint64_t ws = FR_ALIGN_DOWN(w->off, FR_UNIT_SIZE); !rc && ws < w->end;
	     ws += FR_UNIT_SIZE) {
		uint64_t r0, r1, wend = FR_MIN(w->end, ws + FR_UNIT_SIZE);
		uint64_t a = FR_MAX(w->off, ws);
		if (w->punch && !w->small) {
			if (ppt_window_tx(tx, w->part + ws) == PPT_NONE)
				continue; /* a hole already */
			if (a == ws && wend == ws + FR_UNIT_SIZE) {
				if (dp_unback_range(fs, tx, ip, ws, wend) < wend)
					rc = -E2BIG;
				continue;
			}
		}
		old_run(w, ws, &r0, &r1);
		if (r0 == r1) {
			rc = direct_write(w, a, wend);
		} else if (how == HOW_REDO) {
			rc = redo_pages(w, r0, r1);
			if (!rc && r1 < wend)
				rc = direct_write(w, r1, wend);
		} else if (!w->small && ((a == ws && wend == ws + FR_UNIT_SIZE) ||
					 part_window_runs(tx, w->part + ws) >= STRICT_MAX_RUNS)) {
			rc = swap_window(w, ws);
		} else {
			rc = swap_pages(w, r0, r1);
			if (!rc && r1 < wend)
				rc = direct_write(w, r1, wend);
		}
	}
	if (!rc) {
		struct timespec now;
		fs_now(&now);
		if (w->end > w->size)
			tx_set8(tx, &ip->i_size, w->end);
		ino_set_times(tx, ip, T_MTIME | T_CTIME, &now);
		rc = log_fits(&fs->m, lc) ? 0 : -E2BIG;
	}
	if (rc) {
		tx_abort(tx);
		pm_fence(); /* fresh pages written for nothing: leave nothing unfenced */
		op_end(fs, lc);
		if (rc == -ENOSPC)
			fr_err(rc, "no space left in the pool");
		return rc;
	}
	/* log_commit, one step at a time so that tests can stop the process
	 * between the steps (dp_strict_hook) and check what recovery makes of it. */
	strict_step(DP_STRICT_STAGED);
	rc = log_stage(&fs->m, lc); /* COMMIT POINT: the entry's fence */
	if (rc) {
		tx_abort(tx);
		pm_fence(); /* the fresh pages, written for nothing */
		op_end(fs, lc);
		return rc;
	}
	strict_step(DP_STRICT_COMMITTED);
	log_apply(&fs->m, lc);
	strict_step(DP_STRICT_APPLIED);
	log_retire(&fs->m, lc);
	strict_step(DP_STRICT_RETIRED);
	tx_finish(tx); /* the process's mappings follow the PPT (vs_pages_changed) */
	op_end(fs, lc);
	return (ssize_t)(w->end - w->off);
}

/* Bytes of [off, end) that lie on old pages (the cost of a redo copy). */
static uint64_t old_bytes(struct sw *w)
{
	uint64_t total = 0;
	for (uint64_t ws = FR_ALIGN_DOWN(w->off, FR_UNIT_SIZE); ws < w->end; ws += FR_UNIT_SIZE) {
		uint64_t r0, r1;
		if (w->punch && !w->small && w->off <= ws && ws + FR_UNIT_SIZE <= w->end)
			continue; /* released, not copied */
		old_run(w, ws, &r0, &r1);
		if (r0 < r1)
			total += FR_MIN(r1, w->end) - FR_MAX(r0, w->off);
	}
	return total;
}

ssize_t dp_strict_write(ferrite_fs *fs, uint64_t ino, const struct iovec *iov, int iovcnt,
			uint64_t off, size_t len, int *in_place)
{
	struct fr_inode *ip = ino_ptr(fs, ino);
	*in_place = 0;
	uint64_t wmax = FR_ALIGN_DOWN(off, FR_UNIT_SIZE) + STRICT_MAX_WINDOWS * FR_UNIT_SIZE;
	if (off + len > wmax)
		len = (size_t)(wmax - off); /* a short write: each call is atomic */
	int rc = dp_grow_partition(fs, ip, off + len);
	if (!rc)
		rc = dp_name_reserved_past_size(fs, ip, off + len); /* S1 */
	if (rc)
		return rc;
	struct wsrc src = {iov, iovcnt, off};
	struct sw *w = malloc(sizeof(*w));
	if (!w)
		return -ENOMEM;
	*w = (struct sw){.fs = fs,
			 .ip = ip,
			 .src = &src,
			 .part = ip->i_part,
			 .off = off,
			 .end = off + len,
			 .size = ip->i_size};
	w->small = ip->i_level < SP_L3;
	int mapped = vn_mapped(fs, ino);
	int how = old_bytes(w) <= fs->strict_redo_max ? HOW_REDO : HOW_SWAP;
	ssize_t n;
	for (;;) {
		if (how == HOW_SWAP && mapped) {
			*in_place = 1; /* pages under a mapping never move */
			n = 0;
			break;
		}
		n = strict_try(fs, w, how);
		if (n != -E2BIG)
			break;
		if (how == HOW_REDO) {
			how = HOW_SWAP;
			continue;
		}
		uint64_t half = FR_ALIGN_UP((w->end - w->off) / 2, FR_PAGE_SIZE);
		if (half >= w->end - w->off) {
			n = fr_err(-ENOSPC, "write too large for one log entry");
			break;
		}
		w->end = w->off + half; /* shorter, still atomic */
	}
	free(w);
	return n;
}

int dp_strict_punch(ferrite_fs *fs, struct fr_inode *ip, uint64_t off, uint64_t end)
{
	struct wsrc zeros = {NULL, 0, off};
	struct sw *w = malloc(sizeof(*w));
	if (!w)
		return -ENOMEM;
	*w = (struct sw){.fs = fs,
			 .ip = ip,
			 .src = &zeros,
			 .part = ip->i_part,
			 .off = off,
			 .end = end,
			 .size = ip->i_size,
			 .punch = 1};
	w->small = ip->i_level < SP_L3;
	uint64_t ino = ino_of(fs, ip);
	int how = old_bytes(w) <= fs->strict_redo_max ? HOW_REDO : HOW_SWAP;
	ssize_t n = -E2BIG;
	if (how == HOW_REDO)
		n = strict_try(fs, w, HOW_REDO);
	if (n == -E2BIG && !vn_mapped(fs, ino)) /* pages under a mapping never move */
		n = strict_try(fs, w, HOW_SWAP);
	free(w);
	return n == -E2BIG ? 1 : n < 0 ? (int)n : 0;
}
