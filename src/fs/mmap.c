/*
 * mmap.c -- memory mappings of files onto their own pool pages (the library
 * side of mmap(2) in the preload shim).
 *
 * A mapping is a range of the process's address space whose pages map, one
 * run at a time, the pool offsets the PPT gives for the file's pages: stores
 * land in persistent memory with no copy, and a page stays valid while the
 * PPT keeps naming it.
 *
 * Invariants: M1 a mapped file lives in a large partition (level >= L3):
 *               large partitions grow by remapping (ppt_move), which keeps
 *               every page's pool offset, whereas small ones are copied; so a
 *               mapping never goes stale when its file grows;
 *             M2 every mapping holds a vnode reference, so its inode (and its
 *               pages) outlive an unlink until the last munmap;
 *             M3 [addr, addr + filled) maps file pages; [addr + filled,
 *               addr + len) lies beyond EOF and is an inaccessible (PROT_NONE)
 *               reservation; the whole range is never a hole in the address
 *               space, so no other mmap can land inside it;
 *             M4 pages are released only by shrinking (truncate, punch),
 *               which the library does under mm_lock (mm_truncate,
 *               mm_punch): a shrink cuts the mappings at the new end first
 *               and keeps the partition large; a punch of a mapped range
 *               stores zeros and frees nothing. Mapped pages are never
 *               handed to another file, and nothing a program may do to a
 *               mapped file is refused for it.
 * Crash argument: nothing here is persistent except the data stores the
 *   program makes; backing holes goes through dp_fallocate (zeroed, logged).
 * Locking: mm_lock (global) orders before inode locks; see
 *   docs/contracts.md#mmap.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "fs/fs.h"
#include "persist/pm.h"

#ifndef MAP_FIXED_NOREPLACE
#define MAP_FIXED_NOREPLACE 0x100000
#endif

/* Largest small-partition file (level 2): beyond it a file is large (M1). */
#define MM_SMALL_MAX (FR_UNIT_SIZE / 8)

struct mm_map {
	ferrite_fs *fs;
	struct vnode *vn; /* M2 */
	uint64_t ino;
	char *addr;
	size_t len;    /* page multiple */
	uint64_t off;  /* file offset of addr */
	size_t filled; /* M3 */
	int prot;
	int shared;
	struct mm_map *next;
};

static pthread_mutex_t mm_lock = PTHREAD_MUTEX_INITIALIZER;
static struct mm_map *mm_head;

int mm_lock_if_unmapped(ferrite_fs *fs)
{
	if (share_any_maps(fs->m.pool.share)) /* another process's pages stay put */
		return 0;
	pthread_mutex_lock(&mm_lock);
	for (struct mm_map *m = mm_head; m; m = m->next)
		if (m->fs == fs) {
			pthread_mutex_unlock(&mm_lock);
			return 0;
		}
	return 1;
}

void mm_unlock(ferrite_fs *fs)
{
	(void)fs;
	pthread_mutex_unlock(&mm_lock);
}

/* An inaccessible, unbacked reservation of [addr, addr+len) (M3). */
static void *mm_reserve(void *addr, size_t len, int extra)
{
	return mmap(addr, len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | extra, -1,
		    0);
}

/* Maps [from, to) of the mapping (file pages) under the inode's read lock. */
static int mm_fill(struct mm_map *m, size_t from, size_t to)
{
	ferrite_fs *fs = m->fs;
	struct pool *p = fs->m.sp.pool;
	struct fr_inode *ip = ino_ptr(fs, m->ino);
	int fl = MAP_FIXED | (m->shared ? p->map_flags : MAP_PRIVATE);
	for (size_t i = from; i < to;) {
		uint64_t phys = dp_phys(fs, NULL, ip, m->off + i);
		if (!phys)
			return -EAGAIN; /* a hole appeared meanwhile: back it again */
		size_t run = FR_PAGE_SIZE;
		while (i + run < to && dp_phys(fs, NULL, ip, m->off + i + run) == phys + run)
			run += FR_PAGE_SIZE;
		void *r = mmap(m->addr + i, run, m->prot, fl, p->fd, (off_t)phys);
		if (r == MAP_FAILED)
			return fr_err(-errno, "cannot map file pages: %s", strerror(errno));
		i += run;
	}
	return 0;
}

/* Backs the holes of [off, off+len) inside EOF and makes the file large (M1). */
static int mm_back(ferrite_fs *fs, uint64_t ino, uint64_t off, uint64_t len)
{
	struct fr_inode *ip = ino_ptr(fs, ino);
	int level = ip->i_level;
	if (level == I_NO_PART || level < SP_L3) {
		uint64_t end = FR_MAX(off + len, MM_SMALL_MAX + 1);
		return dp_fallocate(fs, ino, FALLOC_FL_KEEP_SIZE, 0, end, 0);
	}
	return len ? dp_fallocate(fs, ino, FALLOC_FL_KEEP_SIZE, off, len, 0) : 0;
}

/* Bytes of the mapping that lie inside EOF (page multiple, <= len). */
static size_t mm_in_eof(const struct mm_map *m, uint64_t size)
{
	if (size <= m->off)
		return 0;
	return (size_t)FR_MIN((uint64_t)m->len, FR_ALIGN_UP(size - m->off, FR_PAGE_SIZE));
}

/* Maps whatever of m lies inside EOF and is not mapped yet. mm_lock held. */
static int mm_grow(struct mm_map *m)
{
	ferrite_fs *fs = m->fs;
	pthread_rwlock_t *lk = ino_lock(fs, m->ino);
	for (int attempt = 0; attempt < 4; attempt++) {
		size_t want = mm_in_eof(m, ino_ptr(fs, m->ino)->i_size);
		if (want <= m->filled)
			return 0;
		int rc = mm_back(fs, m->ino, m->off + m->filled, want - m->filled);
		if (rc)
			return rc;
		pthread_rwlock_rdlock(lk);
		want = mm_in_eof(m, ino_ptr(fs, m->ino)->i_size);
		rc = -EAGAIN;
		if (ino_ptr(fs, m->ino)->i_level >= SP_L3 &&
		    ino_ptr(fs, m->ino)->i_level != I_NO_PART)
			rc = want > m->filled ? mm_fill(m, m->filled, want) : 0;
		if (!rc && want > m->filled)
			m->filled = want;
		pthread_rwlock_unlock(lk);
		if (rc != -EAGAIN)
			return rc;
	}
	return fr_err(-EBUSY, "the file kept changing while it was being mapped");
}

/* Removes [a, b) from mapping *pp (it overlaps); may split it. mm_lock held. */
static int mm_cut(struct mm_map **pp, char *a, char *b)
{
	struct mm_map *m = *pp;
	char *s = FR_MAX(a, m->addr), *e = FR_MIN(b, m->addr + m->len);
	size_t head = (size_t)(s - m->addr), tail = (size_t)(m->addr + m->len - e);
	if (m->shared && m->prot != PROT_NONE && head < m->filled) {
		pm_flush(s, FR_MIN((size_t)(e - s), m->filled - head));
		pm_fence();
	}
	mm_reserve(s, (size_t)(e - s), MAP_FIXED); /* M3: no hole */
	if (!head && !tail) {
		*pp = m->next;
		vn_map_add(m->fs, m->vn, -1);
		vn_put(m->fs, m->vn);
		free(m);
		return 0;
	}
	if (head && tail) {
		struct mm_map *t = malloc(sizeof(*t));
		pthread_rwlock_t *lk = ino_lock(m->fs, m->ino);
		pthread_rwlock_rdlock(lk);
		struct vnode *vn = t ? vn_get(m->fs, m->ino, m->vn->gen) : NULL;
		pthread_rwlock_unlock(lk);
		if (!vn) {
			free(t);
			return -ENOMEM; /* the tail stays a mapping without its record */
		}
		vn_map_add(m->fs, vn, 1);
		*t = *m;
		t->vn = vn;
		t->addr = e;
		t->len = tail;
		t->off = m->off + (uint64_t)(e - m->addr);
		t->filled =
		    m->filled > (size_t)(e - m->addr) ? m->filled - (size_t)(e - m->addr) : 0;
		m->next = t;
	}
	if (head) {
		m->len = head;
		m->filled = FR_MIN(m->filled, head);
	} else {
		size_t cut = (size_t)(e - m->addr);
		m->addr = e;
		m->off += cut;
		m->len = tail;
		m->filled = m->filled > cut ? m->filled - cut : 0;
	}
	return 0;
}

/* Ends every mapping overlapping [a, b); returns the bytes that were ours. */
static ssize_t mm_cut_range(ferrite_fs *fs, char *a, char *b)
{
	ssize_t covered = 0;
	for (struct mm_map **pp = &mm_head; *pp;) {
		struct mm_map *m = *pp;
		if (m->fs != fs || m->addr >= b || m->addr + m->len <= a) {
			pp = &m->next;
			continue;
		}
		covered += FR_MIN(b, m->addr + m->len) - FR_MAX(a, m->addr);
		int rc = mm_cut(pp, a, b);
		if (rc)
			return rc;
		if (*pp == m)
			pp = &m->next;
	}
	return covered;
}

int pmfs_mmap(ferrite_fs *fs, int fd, void *addr, size_t len, int prot, int flags, off_t offset,
	      void **out)
{
	fr_err_clear();
	if (!fs || !out)
		return api_end(-EINVAL);
	int type = flags & MAP_TYPE;
	int fixed = flags & (MAP_FIXED | MAP_FIXED_NOREPLACE);
	if (!len || offset < 0 || (offset & (off_t)(FR_PAGE_SIZE - 1)) ||
	    (type != MAP_SHARED && type != MAP_PRIVATE && type != MAP_SHARED_VALIDATE) ||
	    (flags & MAP_HUGETLB) || (fixed && ((uintptr_t)addr & (FR_PAGE_SIZE - 1))))
		return api_end(-EINVAL);
	size_t plen = FR_ALIGN_UP(len, FR_PAGE_SIZE);
	if (plen < len || (uint64_t)offset + plen > fs->max_file_size)
		return api_end(fr_err(-EOVERFLOW, "mapping beyond the largest file size"));
	struct ofile *of = fd_get(fs, fd);
	if (!of)
		return api_end(-EBADF);
	int shared = type != MAP_PRIVATE;
	int acc = of->f.flags & O_ACCMODE, rc = 0;
	uint64_t ino = of->vn->ino;
	if (of->f.flags & O_PATH)
		rc = -EBADF;
	else if (acc == O_WRONLY || (shared && (prot & PROT_WRITE) && acc != O_RDWR))
		rc = -EACCES;
	else if (!S_ISREG(ino_ptr(fs, ino)->i_mode))
		rc = -ENODEV;
	if (rc) {
		of_put(fs, of);
		return api_end(rc);
	}
	struct mm_map *m = calloc(1, sizeof(*m));
	if (!m) {
		of_put(fs, of);
		return api_end(-ENOMEM);
	}
	pthread_mutex_lock(&mm_lock);
	if (fixed & MAP_FIXED)
		mm_cut_range(fs, addr, (char *)addr + plen); /* MAP_FIXED replaces them */
	void *base = mm_reserve(
	    addr, plen, (fixed & MAP_FIXED) ? MAP_FIXED : (fixed ? MAP_FIXED_NOREPLACE : 0));
	if (base == MAP_FAILED) {
		rc = -errno;
		goto fail;
	}
	pthread_rwlock_t *lk = ino_lock(fs, ino);
	pthread_rwlock_rdlock(lk);
	m->vn = vn_get(fs, ino, of->vn->gen);
	pthread_rwlock_unlock(lk);
	if (!m->vn) {
		munmap(base, plen);
		rc = -ENOMEM;
		goto fail;
	}
	/* Strict writes never swap the pages of a mapped file (strict.c): count
	 * the mapping before its pages are first mapped (mm_fill, under the
	 * inode's read lock), so a write either sees it or finishes first. */
	m->fs = fs;
	vn_map_add(fs, m->vn, 1);
	m->ino = ino;
	m->addr = base;
	m->len = plen;
	m->off = (uint64_t)offset;
	m->prot = prot;
	m->shared = shared;
	/* M1 first, even for a range wholly beyond EOF, so that later growth
	 * (ferrite_mmap_refresh) never needs a copy. */
	rc = mm_back(fs, ino, m->off, 0);
	if (!rc)
		rc = mm_grow(m);
	if (rc) {
		vn_map_add(m->fs, m->vn, -1);
		vn_put(fs, m->vn);
		munmap(base, plen);
		goto fail;
	}
	/* A forked child must not keep stores into pages it cannot pin. */
	madvise(base, plen, MADV_DONTFORK);
	m->next = mm_head;
	mm_head = m;
	pthread_mutex_unlock(&mm_lock);
	of_put(fs, of);
	*out = base;
	return 0;
fail:
	pthread_mutex_unlock(&mm_lock);
	of_put(fs, of);
	free(m);
	return api_end(rc);
}

ssize_t pmfs_munmap(ferrite_fs *fs, void *addr, size_t len)
{
	fr_err_clear();
	if (!fs || ((uintptr_t)addr & (FR_PAGE_SIZE - 1)) || !len)
		return api_end(-EINVAL);
	char *a = addr, *b = a + FR_ALIGN_UP(len, FR_PAGE_SIZE);
	pthread_mutex_lock(&mm_lock);
	ssize_t rc = mm_cut_range(fs, a, b);
	pthread_mutex_unlock(&mm_lock);
	return api_end_ss(rc);
}

ssize_t pmfs_msync(ferrite_fs *fs, void *addr, size_t len, int flags)
{
	fr_err_clear();
	if (!fs || ((uintptr_t)addr & (FR_PAGE_SIZE - 1)) ||
	    (flags & ~(MS_ASYNC | MS_SYNC | MS_INVALIDATE)) ||
	    (flags & (MS_ASYNC | MS_SYNC)) == (MS_ASYNC | MS_SYNC))
		return api_end(-EINVAL);
	char *a = addr, *b = a + FR_ALIGN_UP(len, FR_PAGE_SIZE);
	ssize_t covered = 0;
	pthread_mutex_lock(&mm_lock);
	for (struct mm_map *m = mm_head; m; m = m->next) {
		if (m->fs != fs || m->addr >= b || m->addr + m->len <= a)
			continue;
		char *s = FR_MAX(a, m->addr), *e = FR_MIN(b, m->addr + m->len);
		covered += e - s;
		e = FR_MIN(e, m->addr + m->filled);
		if (m->shared && m->prot != PROT_NONE && s < e)
			pm_flush(s, (size_t)(e - s));
	}
	pm_fence(); /* stores flushed above are durable */
	pthread_mutex_unlock(&mm_lock);
	return covered;
}

ssize_t pmfs_mprotect(ferrite_fs *fs, void *addr, size_t len, int prot)
{
	fr_err_clear();
	if (!fs)
		return api_end(-EINVAL);
	char *a = addr, *b = a + FR_ALIGN_UP(len, FR_PAGE_SIZE);
	ssize_t covered = 0;
	pthread_mutex_lock(&mm_lock);
	for (struct mm_map *m = mm_head; m; m = m->next) {
		if (m->fs != fs || m->addr >= b || m->addr + m->len <= a)
			continue;
		char *s = FR_MAX(a, m->addr), *e = FR_MIN(b, m->addr + m->len);
		covered += e - s;
		m->prot = prot; /* approximate for a partial range: used by refresh */
		char *eof = m->addr + m->filled;
		if (e > eof)
			mprotect(FR_MAX(s, eof), (size_t)(e - FR_MAX(s, eof)), PROT_NONE); /* M3 */
	}
	pthread_mutex_unlock(&mm_lock);
	return covered;
}

/* The inode fd names, or -EBADF. */
static int64_t mm_fd_ino(ferrite_fs *fs, int fd)
{
	struct ofile *of = fd_get(fs, fd);
	if (!of)
		return -EBADF;
	int64_t ino = (int64_t)of->vn->ino;
	of_put(fs, of);
	return ino;
}

/* Is any page of [lo, hi) of ino mapped? mm_lock held. */
static int mm_pinned_ino(ferrite_fs *fs, uint64_t ino, uint64_t lo, uint64_t hi)
{
	for (struct mm_map *m = mm_head; m; m = m->next)
		if (m->fs == fs && m->ino == ino && m->off < hi && m->off + m->len > lo)
			return 1;
	return 0;
}

int pmfs_mmap_pinned(ferrite_fs *fs, int fd, off_t from, off_t len)
{
	fr_err_clear();
	if (!fs || from < 0 || len < 0)
		return api_end(-EINVAL);
	int64_t ino = mm_fd_ino(fs, fd);
	if (ino < 0)
		return api_end((int)ino);
	uint64_t lo = (uint64_t)from, hi = len ? (uint64_t)from + (uint64_t)len : UINT64_MAX;
	pthread_mutex_lock(&mm_lock);
	int pinned = mm_pinned_ino(fs, (uint64_t)ino, lo, hi);
	pthread_mutex_unlock(&mm_lock);
	return pinned;
}

/* Cuts the mappings of ino at newsize (M3): what lies beyond becomes the
 * inaccessible reservation, so the pages the shrink releases are mapped
 * nowhere. The pages below stay where they are (dp_truncate's `mapped`).
 * mm_lock held. */
static void mm_shrink_ino(ferrite_fs *fs, uint64_t ino, uint64_t newsize)
{
	for (struct mm_map *m = mm_head; m; m = m->next) {
		if (m->fs != fs || m->ino != ino)
			continue;
		size_t keep = newsize <= m->off
				  ? 0
				  : (size_t)FR_MIN((uint64_t)m->filled,
						   FR_ALIGN_UP(newsize - m->off, FR_PAGE_SIZE));
		if (keep < m->filled) {
			if (m->shared && m->prot != PROT_NONE) {
				pm_flush(m->addr + keep, m->filled - keep);
				pm_fence();
			}
			mm_reserve(m->addr + keep, m->filled - keep, MAP_FIXED);
			m->filled = keep;
		}
	}
}

int pmfs_mmap_shrink(ferrite_fs *fs, int fd, off_t newsize)
{
	fr_err_clear();
	if (!fs || newsize < 0)
		return api_end(-EINVAL);
	int64_t ino = mm_fd_ino(fs, fd);
	if (ino < 0)
		return api_end((int)ino);
	pthread_mutex_lock(&mm_lock);
	mm_shrink_ino(fs, (uint64_t)ino, (uint64_t)newsize);
	pthread_mutex_unlock(&mm_lock);
	return api_end(0);
}

/* The library's own truncate and punch go through these, under mm_lock, so
 * no caller of the C API (nor a thread racing a front end) can free pages a
 * mapping still shows (M4): a shrink cuts the mappings first and keeps the
 * pages below the new size where they are; a punch of a mapped range
 * stores zeros instead of freeing pages. */
int mm_truncate(ferrite_fs *fs, uint64_t ino, uint64_t len)
{
	pthread_mutex_lock(&mm_lock);
	int mapped = mm_pinned_ino(fs, ino, 0, UINT64_MAX) ? DP_MAPPED : 0;
	if (mapped && len < __atomic_load_n(&ino_ptr(fs, ino)->i_size, __ATOMIC_ACQUIRE))
		mm_shrink_ino(fs, ino, len);
	/* another process's mappings cannot be cut from here: their pages stay */
	if (share_ino_others(fs->m.pool.share, ino, SHARE_MAPS))
		mapped |= DP_MAPPED | DP_MAPPED_ELSEWHERE;
	int rc = dp_truncate(fs, ino, len, mapped);
	pthread_mutex_unlock(&mm_lock);
	return rc;
}

int mm_punch(ferrite_fs *fs, uint64_t ino, int mode, uint64_t off, uint64_t len)
{
	pthread_mutex_lock(&mm_lock);
	int rc = dp_fallocate(fs, ino, mode, off, len,
			      mm_pinned_ino(fs, ino, off, off + len) ||
				  share_ino_others(fs->m.pool.share, ino, SHARE_MAPS));
	pthread_mutex_unlock(&mm_lock);
	return rc;
}

int pmfs_mmap_refresh(ferrite_fs *fs, int fd)
{
	fr_err_clear();
	if (!fs)
		return api_end(-EINVAL);
	int64_t ino = mm_fd_ino(fs, fd);
	if (ino < 0)
		return api_end((int)ino);
	int rc = 0;
	pthread_mutex_lock(&mm_lock);
	for (struct mm_map *m = mm_head; m && !rc; m = m->next)
		if (m->fs == fs && m->ino == (uint64_t)ino && m->filled < m->len)
			rc = mm_grow(m);
	pthread_mutex_unlock(&mm_lock);
	return api_end(rc);
}
