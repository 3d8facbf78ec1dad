/*
 * fsck.c -- consistency check of a pool (ferrite_fsck) against every
 * invariant the layers state: superblock and backup; log (replayed as a
 * mount would); buddy bitmaps; metadata pools; partition tree; PPT; that
 * every data page is owned exactly once or free (file pages, metadata
 * blocks, extended attribute blocks); inode <-> partition
 * ownership, sizes and block counts; directory indexes; link counts;
 * reachability from the root; state counters.
 *
 * Repairs only what needs no guessing: the superblock from its backup (and
 * the backup from the primary), leaked pages back to the allocator, link
 * counts and block counts recounted from the pool.
 * Everything else is reported and left alone.
 * Crash argument: a repair of a counter or a leak is a transaction of its
 * own, applied only when no other damage was found, so a crash leaves each
 * repaired or not; a superblock is restored by one pwrite and fsync of a
 * copy that passed its checksum, and a torn restore fails its checksum, so
 * the next fsck restores it again from the intact copy. -n writes nothing.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fs/fs.h"
#include "fs/xattr.h"
#include "persist/pm.h"

struct iref {
	uint64_t ino; /* 0 = empty slot */
	uint32_t refs;
	uint32_t subdirs;
	uint8_t live, reached, is_dir, orphan, damaged, null_listed;
	uint64_t parent_seen;
};

struct pending_fix {
	void *word;
	size_t width;
	uint64_t val;
	char what[96];
};

struct partref {
	uint64_t v;
	int level;
	uint64_t owner;
	uint64_t pages; /* backed pages counted from the PPT */
};

struct fsck {
	ferrite_fs *fs;
	fr_report_fn report;
	void *rarg;
	int repair;
	int errors, fixed;
	uint64_t *owned; /* bitmap over data pages */
	uint64_t npages;
	struct iref *inodes;
	uint64_t icap, iused;
	struct partref *parts;
	uint64_t nparts, pcap;
	uint64_t *p3; /* windows that hold partition headers */
	uint64_t np3, p3cap;
	uint64_t name_refs[MP_COUNT];
	uint64_t small_dirs[MP_COUNT];
	uint64_t prealloc;	  /* unwritten pages reserved by windows (window.c W1) */
	struct pending_fix *pend; /* counter repairs, applied at the end */
	size_t npend, pcap_pend;
};

#define BAD(f, ...)                                                                                \
	do {                                                                                       \
		(f)->errors++;                                                                     \
		fr_report((f)->report, (f)->rarg, __VA_ARGS__);                                    \
	} while (0)

static struct iref *iref(struct fsck *f, uint64_t ino, int create);

/* Doubles the inode table (the live count in the pool is only a hint). */
static int iref_grow(struct fsck *f)
{
	struct iref *old = f->inodes;
	uint64_t ocap = f->icap;
	struct iref *nw = calloc(ocap * 2, sizeof(*nw));
	if (!nw)
		return -ENOMEM;
	f->inodes = nw;
	f->icap = ocap * 2;
	f->iused = 0;
	for (uint64_t i = 0; i < ocap; i++)
		if (old[i].ino)
			*iref(f, old[i].ino, 1) = old[i];
	free(old);
	return 0;
}

static struct iref *iref(struct fsck *f, uint64_t ino, int create)
{
	if (create && (f->iused + 1) * 2 > f->icap && iref_grow(f))
		return NULL;
	uint64_t mask = f->icap - 1;
	for (uint64_t i = (ino * 0x9e3779b97f4a7c15ULL >> 17) & mask;; i = (i + 1) & mask) {
		if (f->inodes[i].ino == ino)
			return &f->inodes[i];
		if (!f->inodes[i].ino) {
			if (!create)
				return NULL;
			f->inodes[i].ino = ino;
			f->iused++;
			return &f->inodes[i];
		}
	}
}

/* ---- page ownership ------------------------------------------------------ */

static void own(struct fsck *f, uint64_t page, uint64_t n, const char *what)
{
	struct space *sp = &f->fs->m.sp;
	for (uint64_t p = page; p < page + n; p++) {
		if (p < sp->data_page || p >= sp->data_end_page) {
			BAD(f, "%s: page %llu lies outside the data area", what,
			    (unsigned long long)p);
			return;
		}
		uint64_t r = p - sp->data_page;
		if (f->owned[r >> 6] & (1ULL << (r & 63))) {
			BAD(f, "%s: page %llu is used twice", what, (unsigned long long)p);
			continue;
		}
		f->owned[r >> 6] |= 1ULL << (r & 63);
	}
}

static void on_block(void *arg, uint64_t off, uint64_t npages)
{
	own(arg, off >> FR_PAGE_SHIFT, npages, "metadata block");
}

static void on_part(void *arg, uint64_t v, int level)
{
	struct fsck *f = arg;
	if (f->nparts == f->pcap) {
		f->pcap = f->pcap ? f->pcap * 2 : 1024;
		f->parts = realloc(f->parts, f->pcap * sizeof(*f->parts));
	}
	f->parts[f->nparts++] = (struct partref){v, level, 0, 0};
}

static void on_p3(void *arg, uint64_t v)
{
	struct fsck *f = arg;
	if (f->np3 == f->p3cap) {
		f->p3cap = f->p3cap ? f->p3cap * 2 : 256;
		f->p3 = realloc(f->p3, f->p3cap * sizeof(*f->p3));
	}
	f->p3[f->np3++] = v;
}

static int cmp_part(const void *a, const void *b)
{
	uint64_t x = ((const struct partref *)a)->v, y = ((const struct partref *)b)->v;
	return x < y ? -1 : x > y;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

/* Allocated partition containing v, or NULL. */
static struct partref *part_containing(struct fsck *f, uint64_t v)
{
	uint64_t lo = 0, hi = f->nparts;
	while (lo < hi) {
		uint64_t mid = (lo + hi) / 2;
		if (f->parts[mid].v <= v)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo == 0)
		return NULL;
	struct partref *p = &f->parts[lo - 1];
	return v < p->v + sp_level_size(p->level) ? p : NULL;
}

static int is_p3(struct fsck *f, uint64_t v)
{
	return f->np3 && bsearch(&v, f->p3, f->np3, sizeof(uint64_t), cmp_u64) != NULL;
}

static void on_window(void *arg, uint64_t v, uint64_t ent)
{
	struct fsck *f = arg;
	struct space *sp = &f->fs->m.sp;
	if (v == ~0ULL) {
		own(f, ent >> FR_PAGE_SHIFT, 1, "page-table directory");
		return;
	}
	uint64_t off = ent & ~PPT_TYPE_MASK;
	if (!ppt_went_ok(sp, ent)) {
		BAD(f, "window %#llx: page-table entry %#llx is invalid", (unsigned long long)v,
		    (unsigned long long)ent);
		return;
	}
	if ((ent & PPT_TYPE_MASK) == PPT_HUGE) {
		struct partref *p = part_containing(f, v);
		if (!p || p->level < SP_L3)
			BAD(f, "window %#llx is backed but belongs to no large partition",
			    (unsigned long long)v);
		else
			p->pages += 512;
		own(f, off >> FR_PAGE_SHIFT, 512, "file unit");
		return;
	}
	if ((ent & PPT_TYPE_MASK) != PPT_TABLE) {
		BAD(f, "window %#llx: invalid page-table entry", (unsigned long long)v);
		return;
	}
	struct sp_ptable *pt = ppt_table(sp, ent);
	uint64_t self = off >> FR_PAGE_SHIFT;
	own(f, self, 1, "page table");
	const char *why;
	if (sp_ptable_check(sp, pt, v, &why)) {
		BAD(f, "window %#llx: page table damaged: %s", (unsigned long long)v, why);
		return;
	}
	int header = pt->pt_flags & PT_F_HEADER;
	if (header && !is_p3(f, v))
		BAD(f, "window %#llx: header page of no partition", (unsigned long long)v);
	uint32_t n = 0;
	for (unsigned o = 0; o < 512; o++) {
		uint64_t pg = pt->pt_pte[o];
		if (!pg)
			continue;
		n++;
		if (pg == self)
			continue;
		own(f, pg, 1, "file page");
		struct partref *p = part_containing(f, v + ((uint64_t)o << FR_PAGE_SHIFT));
		if (!p)
			BAD(f, "page %u of window %#llx belongs to no partition", o,
			    (unsigned long long)v);
		else
			p->pages++;
	}
	if (n != pt->pt_npages)
		BAD(f, "window %#llx: %u pages mapped, table says %u", (unsigned long long)v, n,
		    pt->pt_npages);
	if (pt->pt_flags & PT_F_RESERVED) {
		/* W1: the home pages no pte names are this window's, unwritten */
		uint64_t home = pt->pt_home >> FR_PAGE_SHIFT;
		for (unsigned o = 0; o < 512; o++)
			if (!pt->pt_pte[o]) {
				own(f, home + o, 1, "pre-allocated page");
				f->prealloc++;
			}
		if (!part_containing(f, v) || part_containing(f, v)->level < SP_L3)
			BAD(f, "window %#llx reserves pages but belongs to no large partition",
			    (unsigned long long)v);
	}
}

static void check_pages_vs_allocator(struct fsck *f, int repair)
{
	struct space *sp = &f->fs->m.sp;
	uint64_t leaked = 0;
	struct log_ctx *lc = NULL;
	for (uint64_t r = 0; r < f->npages; r++) {
		uint64_t page = sp->data_page + r;
		int owned = (f->owned[r >> 6] >> (r & 63)) & 1;
		int fo = bud_free_order(sp, NULL, page);
		if (owned && fo >= 0) {
			BAD(f, "page %llu is in use but marked free", (unsigned long long)page);
		} else if (!owned && fo < 0) {
			leaked++;
			if (repair) {
				if (!lc)
					lc = op_begin(f->fs);
				if (lc) {
					bud_free(lc->tx, page, 0);
					if (lc->tx->nfrees >= TX_MAX_FREES / 2) {
						op_commit(f->fs, lc);
						tx_begin(lc->tx);
					}
				}
			}
		} else if (fo >= 0) {
			/* skip the rest of a free block */
			uint64_t end = ((r >> fo) + 1) << fo;
			r = end - 1;
		}
	}
	if (lc) {
		op_commit(f->fs, lc);
		op_end(f->fs, lc);
	}
	if (leaked) {
		if (repair) {
			f->fixed++;
			fr_report(f->report, f->rarg, "%llu leaked pages returned to the allocator",
				  (unsigned long long)leaked);
		} else {
			BAD(f, "%llu pages are allocated but used by nothing",
			    (unsigned long long)leaked);
		}
	}
}

/* ---- inodes and directories ----------------------------------------------- */

static void on_inode_entry(void *arg, int id, uint64_t off, int live)
{
	struct fsck *f = arg;
	if (!live)
		return;
	if (id == MP_INODE) {
		struct iref *r = iref(f, off >> INO_SHIFT, 1);
		if (r)
			r->live = 1;
	} else if (id >= MP_NAME64 && id <= MP_NAME272) {
		f->name_refs[id]--; /* balanced by references from dentries */
	} else if (id >= MP_DENT16 && id <= MP_DENT64) {
		f->small_dirs[id]--;
	}
}

/* null_check's walk: a live inode seen for the first time */
static int null_listed(void *arg, uint64_t ino)
{
	struct iref *r = iref(arg, ino, 0);
	if (!r || !r->live || r->null_listed)
		return 0;
	r->null_listed = 1;
	return 1;
}

static int fix_counter(struct fsck *f, void *word, size_t width, uint64_t val, const char *what);

static void check_null_list(struct fsck *f)
{
	uint64_t len;
	struct fr_state *st = f->fs->m.st;
	f->errors += null_check(f->fs, null_listed, f, f->report, f->rarg, &len);
	if (null_enabled(f->fs) && st->st_null_count != len &&
	    !fix_counter(f, &st->st_null_count, 8, len, "null file count"))
		BAD(f, "null file count %llu, the list holds %llu",
		    (unsigned long long)st->st_null_count, (unsigned long long)len);
}

struct dctx {
	struct fsck *f;
	uint64_t dir;
	uint64_t *queue;
	uint64_t *qlen, *qcap;
};

static unsigned type_of_mode(uint32_t m)
{
	return (m & S_IFMT) >> 12; /* the DT_* value directory entries carry */
}

static void on_dentry(void *arg, uint64_t ino, const char *name, unsigned type)
{
	struct dctx *d = arg;
	struct fsck *f = d->f;
	ferrite_fs *fs = f->fs;
	struct iref *r = iref(f, ino, 0);
	if (!r || !r->live || !ino_valid(fs, ino)) {
		BAD(f, "directory %llu: entry \"%s\" points to a free inode %llu",
		    (unsigned long long)d->dir, name, (unsigned long long)ino);
		return;
	}
	struct fr_inode *ip = ino_ptr(fs, ino);
	if (!r->damaged && type_of_mode(ip->i_mode) != type)
		BAD(f, "directory %llu: entry \"%s\" has the wrong type",
		    (unsigned long long)d->dir, name);
	r->refs++;
	if (S_ISDIR(ip->i_mode)) {
		iref(f, d->dir, 0)->subdirs++;
		if (ip->i_parent != d->dir)
			BAD(f, "directory %llu (\"%s\"): parent link points to %llu, not %llu",
			    (unsigned long long)ino, name, (unsigned long long)ip->i_parent,
			    (unsigned long long)d->dir);
	}
	if (!r->reached) {
		r->reached = 1;
		if (S_ISDIR(ip->i_mode) && !r->damaged) {
			if (*d->qlen == *d->qcap) {
				*d->qcap *= 2;
				d->queue = realloc(d->queue, *d->qcap * sizeof(uint64_t));
			}
			d->queue[(*d->qlen)++] = ino;
		}
	}
}

static void count_names(struct fsck *f, struct fr_inode *dir)
{
	/* Dentries with external names, and dentry arrays, by pool. */
	struct dir_batch_ent *out = malloc(64 * sizeof(*out)), *tmp = malloc(64 * sizeof(*tmp));
	uint64_t cookie = FR_HASH_MIN, next;
	if (dir->i_dkind != I_DIR_LARGE && dir->i_dents && dir->i_dclass >= MP_DENT16 &&
	    dir->i_dclass <= MP_DENT64)
		f->small_dirs[dir->i_dclass]++; /* a bad class is dir_check's report */
	for (int guard = 0; out && tmp && guard < (1 << 26); guard++) {
		int n = dir_read(f->fs, dir, cookie, out, 64, &next, tmp);
		if (n < 0)
			break;
		for (int i = 0; i < n; i++)
			if (out[i].len > D_INLINE_NAME) {
				size_t l = out[i].len + sizeof(struct mp_oob);
				int id = l <= 64    ? MP_NAME64
					 : l <= 128 ? MP_NAME128
					 : l <= 192 ? MP_NAME192
						    : MP_NAME272;
				f->name_refs[id]++;
			}
		if (next >= FR_HASH_END)
			break;
		cookie = next;
	}
	free(out);
	free(tmp);
}

static void check_inode(struct fsck *f, uint64_t ino)
{
	ferrite_fs *fs = f->fs;
	struct fr_inode *ip = ino_ptr(fs, ino);
	uint32_t m = ip->i_mode;
	struct iref *r = iref(f, ino, 0);
	r->is_dir = S_ISDIR(m) != 0;
	r->orphan = (ip->i_flags & I_F_ORPHAN) != 0;
	const char *why;
	if (ino_check(fs, ip, &why)) {
		/* the same check every lookup makes: the inode is not used */
		BAD(f, "inode %llu: %s", (unsigned long long)ino, why);
		r->damaged = 1;
		return;
	}
	uint64_t psize = 0;
	struct partref *p = NULL;
	if (ip->i_level != I_NO_PART) {
		p = part_containing(f, ip->i_part);
		if (!p || p->v != ip->i_part || p->level != ip->i_level) {
			BAD(f, "inode %llu: its partition %#llx (level %u) is not allocated",
			    (unsigned long long)ino, (unsigned long long)ip->i_part, ip->i_level);
			p = NULL;
		} else if (p->owner) {
			BAD(f, "inode %llu: partition %#llx is also used by inode %llu",
			    (unsigned long long)ino, (unsigned long long)p->v,
			    (unsigned long long)p->owner);
			p = NULL;
		} else {
			p->owner = ino;
			psize = sp_level_size(p->level);
		}
	}
	uint64_t size = ip->i_size;
	(void)psize; /* ino_check: the size is inside the partition */
	if (p && p->level < SP_L3) {
		for (uint64_t off = 0; off < size; off += FR_PAGE_SIZE)
			if (!ppt_page(&fs->m.sp, ip->i_part + off)) {
				BAD(f, "inode %llu: small file with a hole at %llu (D2)",
				    (unsigned long long)ino, (unsigned long long)off);
				break;
			}
	}
	uint64_t xpage;
	int xorder;
	if (xattr_check(fs, ip, &xpage, &xorder, &why))
		BAD(f, "inode %llu: extended attribute block: %s", (unsigned long long)ino, why);
	else if (xpage)
		own(f, xpage, 1ULL << xorder, "extended attribute block");
	if (S_ISDIR(m)) {
		f->errors += dir_check(fs, ip, NULL, NULL, f->report, f->rarg);
		count_names(f, ip);
	}
}

/* Repairs that need no guessing: a counter (of 4 or 8 bytes) recomputed from
 * what the pool holds. Returns 1 if it was fixed (and reported), 0 if left as
 * an error. */
static int fix_counter(struct fsck *f, void *word, size_t width, uint64_t val, const char *what)
{
	if (!f->repair)
		return 0;
	/* Queued: a count recomputed from a pool with other damage (a
	 * directory fsck could not read) may be too low, and "repairing" it
	 * would make the pool worse. Applied only if nothing else is wrong. */
	if (f->npend == f->pcap_pend) {
		size_t cap = f->pcap_pend ? f->pcap_pend * 2 : 64;
		struct pending_fix *p = realloc(f->pend, cap * sizeof(*p));
		if (!p)
			return 0;
		f->pend = p;
		f->pcap_pend = cap;
	}
	struct pending_fix *pf = &f->pend[f->npend++];
	pf->word = word;
	pf->width = width;
	pf->val = val;
	snprintf(pf->what, sizeof(pf->what), "%s", what);
	return 1;
}

static void apply_counter_fixes(struct fsck *f)
{
	for (size_t i = 0; i < f->npend; i++) {
		struct pending_fix *pf = &f->pend[i];
		if (f->errors) {
			BAD(f, "%s: not corrected (other damage found first)", pf->what);
			continue;
		}
		struct log_ctx *lc = op_begin(f->fs);
		int rc = lc ? 0 : -ENOMEM;
		if (lc) {
			if (pf->width == sizeof(uint64_t))
				tx_set8(lc->tx, pf->word, pf->val);
			else
				tx_set4(lc->tx, pf->word, (uint32_t)pf->val);
			rc = op_commit(f->fs, lc);
			op_end(f->fs, lc);
		}
		if (rc) {
			BAD(f, "%s: could not be corrected", pf->what);
			continue;
		}
		f->fixed++;
		fr_report(f->report, f->rarg, "%s corrected", pf->what);
	}
}

static void check_blocks(struct fsck *f)
{
	for (uint64_t i = 0; i < f->nparts; i++) {
		struct partref *p = &f->parts[i];
		if (!p->owner) {
			BAD(f, "partition %#llx (level %d) is allocated but used by no inode",
			    (unsigned long long)p->v, p->level);
			continue;
		}
		struct fr_inode *ip = ino_ptr(f->fs, p->owner);
		if (ip->i_blocks != p->pages) {
			char what[96];
			snprintf(what, sizeof(what), "inode %llu: block count",
				 (unsigned long long)p->owner);
			if (!fix_counter(f, &ip->i_blocks, sizeof(ip->i_blocks), p->pages, what))
				BAD(f, "inode %llu: block count %llu, %llu pages are mapped",
				    (unsigned long long)p->owner, (unsigned long long)ip->i_blocks,
				    (unsigned long long)p->pages);
		}
	}
}

/* Walks the tree from the root: references, link counts, reachability. */
static void check_tree(struct fsck *f, int repair)
{
	ferrite_fs *fs = f->fs;
	uint64_t qcap = 1024, qlen = 0;
	uint64_t *queue = malloc(qcap * sizeof(uint64_t));
	struct iref *root = iref(f, fs->root_ino, 0);
	if (!root || !root->live) {
		BAD(f, "root directory inode %llu is not live", (unsigned long long)fs->root_ino);
		free(queue);
		return;
	}
	root->reached = 1;
	queue[qlen++] = fs->root_ino;
	struct dctx d = {f, 0, queue, &qlen, &qcap};
	for (uint64_t i = 0; i < qlen; i++) {
		d.dir = d.queue[i];
		dir_check(fs, ino_ptr(fs, d.dir), on_dentry, &d, NULL, NULL);
	}
	free(d.queue);
	for (uint64_t i = 0; i < f->icap; i++) {
		struct iref *r = &f->inodes[i];
		if (!r->ino || !r->live)
			continue;
		struct fr_inode *ip = ino_ptr(fs, r->ino);
		if (r->null_listed != !!(ip->i_flags & I_F_NULL)) {
			BAD(f, "inode %llu: %s", (unsigned long long)r->ino,
			    r->null_listed ? "on the null list without I_F_NULL"
					   : "a null file not on the null list");
			continue;
		}
		if (r->null_listed) {
			if (r->reached)
				BAD(f, "null file %llu has a name", (unsigned long long)r->ino);
			continue; /* ready for a create (nullfile.c N1) */
		}
		if (!r->reached) {
			if (r->orphan && ip->i_nlink == 0)
				continue; /* open when the pool was closed; mount releases it */
			BAD(f, "inode %llu is not reachable from the root (nlink %u)",
			    (unsigned long long)r->ino, ip->i_nlink);
			continue;
		}
		uint32_t want = r->is_dir ? 2 + r->subdirs : r->refs;
		if (ip->i_nlink != want) {
			char what[96];
			snprintf(what, sizeof(what), "inode %llu: link count %u -> %u",
				 (unsigned long long)r->ino, ip->i_nlink, want);
			if (!fix_counter(f, &ip->i_nlink, sizeof(ip->i_nlink), want, what))
				BAD(f, "inode %llu: link count %u, should be %u",
				    (unsigned long long)r->ino, ip->i_nlink, want);
		}
		if (r->is_dir && r->ino != fs->root_ino && r->refs != 1)
			BAD(f, "directory %llu has %u names", (unsigned long long)r->ino, r->refs);
	}
}

static int fs_fsck(ferrite_fs *fs, int repair, fr_report_fn report, void *rarg,
		   void (*progress)(void *, uint64_t, uint64_t), void *parg)
{
	struct fsck f;
	memset(&f, 0, sizeof(f));
	f.fs = fs;
	f.report = report;
	f.rarg = rarg;
	f.repair = repair;
	struct meta *m = &fs->m;
	struct space *sp = &m->sp;
	f.npages = sp->data_end_page - sp->data_page;
	f.owned = calloc((f.npages + 63) / 64, 8);
	/* The live count is only a hint (it comes from PM): never more inodes
	 * than the data area can hold. */
	uint64_t most = (f.npages << FR_PAGE_SHIFT) / sizeof(struct fr_inode);
	uint64_t live = FR_MIN(m->st->st_pools[MP_INODE].mph_live, most) + 16;
	f.icap = 1024;
	while (f.icap < live * 2)
		f.icap *= 2;
	f.inodes = calloc(f.icap, sizeof(*f.inodes));
	if (!f.owned || !f.inodes) {
		free(f.owned);
		free(f.inodes);
		return -ENOMEM;
	}
	const uint64_t phases = 7;
#define PROGRESS(n)                                                                                \
	do {                                                                                       \
		if (progress)                                                                      \
			progress(parg, (n), phases);                                               \
	} while (0)
	PROGRESS(0);
	f.errors += log_check(m, report, rarg);
	f.errors += bud_check(sp, report, rarg);
	PROGRESS(1);
	f.errors += mp_walk(m, on_inode_entry, &f, on_block, report, rarg);
	PROGRESS(2);
	f.errors += part_walk(sp, on_part, on_p3, &f, NULL, report, rarg);
	if (f.nparts)
		qsort(f.parts, f.nparts, sizeof(*f.parts), cmp_part);
	if (f.np3)
		qsort(f.p3, f.np3, sizeof(uint64_t), cmp_u64);
	PROGRESS(3);
	if (ppt_check_dirs(sp, on_window, &f))
		BAD(&f, "page-table directories damaged");
	PROGRESS(4);
	for (uint64_t i = 0; i < f.icap; i++)
		if (f.inodes[i].ino && f.inodes[i].live)
			check_inode(&f, f.inodes[i].ino);
	check_blocks(&f);
	if (sp->hdr->sph_prealloc_pages != f.prealloc &&
	    !fix_counter(&f, &sp->hdr->sph_prealloc_pages, 8, f.prealloc,
			 "pre-allocated page count"))
		BAD(&f, "pre-allocated page count %llu, the windows reserve %llu",
		    (unsigned long long)sp->hdr->sph_prealloc_pages,
		    (unsigned long long)f.prealloc);
	for (int id = MP_NAME64; id <= MP_DENT64; id++) {
		if (id <= MP_NAME272 && f.name_refs[id])
			BAD(&f, "name pool %d: %lld names referenced vs live entries", id,
			    (long long)f.name_refs[id]);
		if (id >= MP_DENT16 && f.small_dirs[id])
			BAD(&f, "dentry pool %d: arrays referenced vs live entries differ", id);
	}
	PROGRESS(5);
	check_null_list(&f);
	check_tree(&f, repair);
	PROGRESS(6);
	if (!f.errors)
		check_pages_vs_allocator(&f, repair);
	apply_counter_fixes(&f);
	PROGRESS(7);
	free(f.owned);
	free(f.inodes);
	free(f.parts);
	free(f.p3);
	free(f.pend);
	if (f.errors)
		return FERRITE_FSCK_UNCORRECTED | (f.fixed ? FERRITE_FSCK_CORRECTED : 0);
	return f.fixed ? FERRITE_FSCK_CORRECTED : FERRITE_FSCK_CLEAN;
}

struct online_check {
	ferrite_fs *fs;
	fr_report_fn report;
	void *rarg;
};

static int check_alone(void *arg)
{
	struct online_check *c = arg;
	return fs_fsck(c->fs, 0, c->report, c->rarg, NULL, NULL);
}

/* The check of a pool in use (ferrite_check). The call holds the pool's
 * turn, so no other process is inside a call and the pool is as one left it:
 * every transaction committed or replayed (taking the turn replays a dead
 * holder's entry), and files that are unlinked but open are orphans, which
 * the check accepts. The other threads of this process are kept out too. */
int pmfs_check(ferrite_fs *fs, fr_report_fn report, void *rarg)
{
	fr_err_clear();
	if (!fs)
		return api_end(-EINVAL);
	struct online_check c = {fs, report, rarg};
	int rc = vs_run_alone(&fs->m.sp, check_alone, &c);
	if (rc == -EBUSY)
		return api_end(fr_err(-EBUSY, "another thread of this process stays inside a "
					      "call; check when it has returned"));
	return rc < 0 ? api_end(rc) : rc;
}

/* Superblock repair before anything can be mounted. */
#define FIX_SB_LEFT 2 /* fix_superblock: primary damaged, reported, not restored */

static int fix_superblock(const char *pool, int repair, fr_report_fn report, void *rarg, int *fixed)
{
	struct pool p;
	int rc = pool_open(&p, pool, repair ? 0 : POOL_PRIVATE);
	if (rc)
		return rc;
	struct fr_super a, b;
	const char *wa, *wb;
	memset(&a, 0, sizeof(a));
	memset(&b, 0, sizeof(b));
	int ra = pread(p.fd, &a, sizeof(a), SB_OFF) == (ssize_t)sizeof(a)
		     ? meta_super_check(&a, p.file_size, &wa)
		     : (wa = "pool too short", -EINVAL);
	int rb = pread(p.fd, &b, sizeof(b), SB_BACKUP_OFF) == (ssize_t)sizeof(b)
		     ? meta_super_check(&b, p.file_size, &wb)
		     : (wb = "missing", -EINVAL);
	rc = 0;
	if (ra && !rb) {
		/* One problem, one line: what is wrong and what became of it. */
		if (!repair) {
			fr_report(report, rarg, "superblock: %s; the backup is intact", wa);
			rc = FIX_SB_LEFT;
		} else if (pwrite(p.fd, &b, sizeof(b), SB_OFF) == (ssize_t)sizeof(b)) {
			fsync(p.fd);
			fr_report(report, rarg, "superblock: %s; restored from the backup", wa);
			(*fixed)++;
		} else {
			fr_report(report, rarg,
				  "superblock: %s; restoring it from the backup failed: %s", wa,
				  strerror(errno));
			rc = FIX_SB_LEFT;
		}
	} else if (ra) {
		rc = fr_err(ra, "%s: %s", pool, wa);
	} else if (rb || memcmp(&a, &b, sizeof(a))) {
		fr_report(report, rarg, "backup superblock differs from the primary");
		if (repair && pwrite(p.fd, &a, sizeof(a), SB_BACKUP_OFF) == (ssize_t)sizeof(a)) {
			fsync(p.fd);
			(*fixed)++;
		} else {
			rc = 1;
		}
	}
	pool_close(&p);
	return rc;
}

/* MemAvailable in bytes, or 0 if unknown. */
static uint64_t mem_available(void)
{
	FILE *f = fopen("/proc/meminfo", "re");
	unsigned long long kb = 0;
	char line[128];
	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "MemAvailable: %llu kB", &kb) == 1)
			break;
	if (f)
		fclose(f);
	return (uint64_t)kb * 1024;
}

static int copy_fd(int from, int to, uint64_t size)
{
	static const size_t chunk = 1 << 20;
	char *buf = NULL;
	for (uint64_t off = 0; off < size;) {
		loff_t a = (loff_t)off, b = (loff_t)off;
		ssize_t n = buf ? -1 : copy_file_range(from, &a, to, &b, size - off, 0);
		if (n < 0) {
			if (!buf && !(buf = malloc(chunk)))
				return -ENOMEM;
			n = pread(from, buf, FR_MIN(chunk, size - off), (off_t)off);
			if (n > 0 && pwrite(to, buf, (size_t)n, (off_t)off) != n)
				n = -1;
		}
		if (n <= 0) {
			free(buf);
			return -EIO;
		}
		off += (uint64_t)n;
	}
	free(buf);
	return 0;
}

static const struct ferrite_mount_opts alone = {.mode = FERRITE_MOUNT_EXCLUSIVE};

/* fsck -n on a pool that a mount would change first (log entries to replay,
 * orphans to release): the check runs on a private copy in memory, recovered
 * there, while *lock_fd keeps others from opening the pool. */
static int mount_copy(const char *pool, int *lock_fd, int *copy_fd_out, ferrite_fs **out)
{
	int fd = open(pool, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return fr_err(-errno, "%s: cannot open: %s", pool, strerror(errno));
	*lock_fd = fd;
	if (flock(fd, LOCK_EX | LOCK_NB)) {
		char who[96];
		pool_holder_describe(fd, who, sizeof(who));
		return fr_err(-EBUSY, "%s: pool is in use by %s", pool, who);
	}
	struct fr_super sb;
	struct stat st;
	const char *why;
	if (fstat(fd, &st) || pread(fd, &sb, sizeof(sb), SB_OFF) != (ssize_t)sizeof(sb) ||
	    meta_super_check(&sb, (uint64_t)st.st_size, &why))
		return fr_err(-EUCLEAN, "%s: superblock damaged", pool);
	uint64_t avail = mem_available();
	if (avail && sb.sb_pool_size > avail / 2)
		return fr_err(-ENOMEM,
			      "%s: recovery is pending and a private copy of the pool (%llu MiB) "
			      "does not fit in memory; check without -n, or mount the pool once",
			      pool, (unsigned long long)(sb.sb_pool_size >> 20));
	int mfd = memfd_create("ferrite-fsck-n", MFD_CLOEXEC);
	if (mfd < 0)
		return fr_err(-errno, "cannot make a private copy: %s", strerror(errno));
	*copy_fd_out = mfd;
	if (ftruncate(mfd, (off_t)sb.sb_pool_size) || copy_fd(fd, mfd, sb.sb_pool_size))
		return fr_err(-EIO, "%s: cannot make a private copy of the pool", pool);
	char path[64];
	snprintf(path, sizeof(path), "/proc/self/fd/%d", mfd);
	return pmfs_mount(path, &alone, out);
}

int pmfs_fsck(const char *pool, int repair, void (*report)(void *arg, const char *line),
	      void *report_arg, void (*progress)(void *arg, uint64_t done, uint64_t total),
	      void *progress_arg)
{
	fr_err_clear();
	if (!pool)
		pool = ferrite_default_pool();
	int fixed = 0;
	int rc = fix_superblock(pool, repair, report, report_arg, &fixed);
	if (rc == FIX_SB_LEFT)
		return FERRITE_FSCK_UNCORRECTED;
	if (rc < 0) {
		if (rc == -EUCLEAN) {
			fr_report(report, report_arg, "%s", fr_err_get());
			return FERRITE_FSCK_UNCORRECTED;
		}
		return api_end(rc);
	}
	int sb_bad = rc == 1;
	ferrite_fs *fs = NULL;
	int lock_fd = -1, copy_fd = -1;
	if (repair) {
		rc = pmfs_mount(pool, &alone, &fs); /* nobody else while it repairs */
	} else {
		/* -n writes nothing: a private view, or a private copy when a
		 * mount would have to recover the pool first. */
		rc = fs_mount_view(pool, NULL, FS_VIEW_PRIVATE, &fs);
		if (rc == -EAGAIN || rc == -EOPNOTSUPP) {
			fr_report(report, report_arg,
				  "info: recovery is pending; checking a private copy of the "
				  "pool recovered in memory (-n changes nothing)");
			rc = mount_copy(pool, &lock_fd, &copy_fd, &fs);
		}
	}
	if (rc) {
		if (copy_fd >= 0)
			close(copy_fd);
		if (lock_fd >= 0)
			close(lock_fd);
		if (rc == -EUCLEAN) {
			fr_report(report, report_arg, "%s", ferrite_errmsg());
			return FERRITE_FSCK_UNCORRECTED;
		}
		return rc;
	}
	if (fs->m.recovered_entries)
		fr_report(report, report_arg,
			  "info: replayed %llu log entries (normal after a crash)",
			  (unsigned long long)fs->m.recovered_entries);
	rc = fs_fsck(fs, repair, report, report_arg, progress, progress_arg);
	pmfs_unmount(fs);
	if (copy_fd >= 0)
		close(copy_fd);
	if (lock_fd >= 0)
		close(lock_fd);
	if (rc < 0)
		return api_end(rc);
	if (sb_bad)
		rc |= FERRITE_FSCK_UNCORRECTED;
	if (fixed)
		rc |= FERRITE_FSCK_CORRECTED;
	return rc;
}
