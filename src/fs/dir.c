/*
 * dir.c -- directories. A small directory (up to 64 entries) keeps fixed
 * 64-byte dentries in an array from a dentry pool of 16, 32 or 64 entries
 * (SPFS 4.2). A larger one lives in its own partition, like a file, as an
 * extendible hash: a header page, array pages mapping hash prefixes to
 * bucket pages, and bucket pages of 62 dentries. Lookup and insert are O(1).
 * Format: fs_format.h, docs/format.md#directories. Checks: dir_check.c.
 *
 * Every entry carries a 63-bit keyed hash of its name (different names with
 * the same hash take the next free value, at most DIR_PROBE away). readdir
 * returns entries in hash order and uses the hash as its cookie, so a stream
 * stays correct while entries are added and removed and while buckets split
 * or the directory is converted: splitting never reorders hashes.
 *
 * Invariants: R1 no two entries of a directory share a stored hash;
 *             R2 a large directory's bucket with local depth d and prefix p
 *               holds exactly the entries whose hash has prefix p, and the
 *               2^(g-d) array slots of that prefix point to it;
 *             R3 i_nentries counts the entries;
 *             R4 g <= DH_MAX_DEPTH, so the 2^g slots fit the header's
 *               DH_MAX_ARRAY array pages (double_array stops there).
 * Crash argument: every change to existing dentries, buckets, arrays and the
 *   header is staged in the operation's transaction; new pages (buckets,
 *   array pages, a converted directory) are written before the transaction
 *   that links them commits. Old array pages are left unused, never reused
 *   while reachable. A check that fails returns -EUCLEAN before the failing
 *   step stages anything it depends on; the caller aborts the transaction,
 *   so damage never leads to a partial change being committed.
 *
 * Everything read from the pool is untrusted (issue 12). What is validated
 * where, before any value is used as an offset, index, shift or length:
 *   - i_dkind: dir_kind(), by every entry point;
 *   - a small directory's i_dents, i_dclass, da_used and i_nentries:
 *     darray_check() in small_slots(), before the array is touched;
 *   - a large directory's header (magic, depth, narray, npages vs i_size):
 *     dirhdr_check() in large_open(), once per operation and again after
 *     anything that moves or grows the partition;
 *   - dh_array[] entries and array slots: page indices within dh_npages, in
 *     bucket_for(), which then checks the bucket (bucket_check: magic, local
 *     depth <= g, prefix == the slot's prefix, used mask, count);
 *   - a dentry: dent_check() (hash range, name length against its storage,
 *     name-pool entry live and of the right class, flags, type, d_ino
 *     inside the pool) before its name is read (dent_is, take, dir_remove);
 *     dent_ino_check() (ino_valid: a live inode) before dir_lookup returns
 *     it, since callers then use d_ino. readdir hands numbers out without
 *     using them, so it keeps to the cheap range check (a stat of the name
 *     goes through dir_lookup). A name's bytes are checked (dname_check:
 *     no '/' or NUL, not "." or "..") where they are copied out (readdir);
 *     a lookup compares them with a valid name instead. Name hashes are not
 *     recomputed at run time (fsck does).
 *   - convert and split place entries by d_hash: they check it (against
 *     the hash range, the bucket's range) and the array pages they will
 *     write, before growing anything, so a failure leaves no fresh page
 *     behind; grow_small copies entries unchanged and uses nothing of them.
 * Every loop over PM data is bounded: slots by the used mask, readdir by a
 *   cookie that strictly increases (a bucket serves its slot's hash, so its
 *   range ends above the cookie), prepare_slot by its tries.
 * Locking: the directory's inode lock (read for lookup/readdir, write for
 *   changes); see docs/contracts.md.
 */
#include <emmintrin.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fs/dir_impl.h"
#include "persist/pm.h"

#define DIR_SPLIT_SLACK	  8
#define CONVERT_MAX_DEPTH 6 /* a converted directory starts with at most 64 buckets */

int dir_damaged(ferrite_fs *fs, struct fr_inode *dir, const char *fmt, ...)
{
	char what[200];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	return fr_err(-EUCLEAN, "directory %llu: %s (run `ferrite fsck`)",
		      (unsigned long long)ino_of(fs, dir), what);
}

/* 1: large, 0: small, or -EUCLEAN. */
static int dir_kind(ferrite_fs *fs, struct tx *tx, struct fr_inode *dir)
{
	uint8_t k = rd1(tx, &dir->i_dkind);
	if (k > I_DIR_LARGE)
		return dir_damaged(fs, dir, "unknown directory kind %u", k);
	return k == I_DIR_LARGE;
}

/* ---- names ----------------------------------------------------------------- */

/* The name bytes of a dentry image that passed dent_check. */
static const char *name_src(ferrite_fs *fs, const struct fr_dentry *img)
{
	if (img->d_flags & D_EXTNAME)
		return (const char *)meta_ptr(&fs->m, img->d_name_off) + sizeof(struct mp_oob);
	return img->d_name;
}

static void name_copy(ferrite_fs *fs, struct tx *tx, const struct fr_dentry *img, char *buf)
{
	if (img->d_flags & D_EXTNAME)
		dir_load(tx, name_src(fs, img), buf, img->d_namelen);
	else
		memcpy(buf, img->d_name, img->d_namelen);
	buf[img->d_namelen] = 0;
}

/* ---- slot sets ------------------------------------------------------------- */

static void slots_of_bucket(struct fr_bucket *b, struct slots *s)
{
	s->used = &b->db_used;
	s->fp = b->db_fp;
	s->ent = b->db_ent;
	s->cap = DB_SLOTS;
}

/* The checked array of a small directory: 1 (s filled), 0 (no array yet),
 * or -EUCLEAN. */
static int small_slots(ferrite_fs *fs, struct tx *tx, struct fr_inode *dir, struct slots *s)
{
	uint64_t arr = rd8(tx, &dir->i_dents);
	int cls = rd1(tx, &dir->i_dclass);
	const char *why;
	if (darray_check(fs, tx, cls, arr, rd8(tx, &dir->i_nentries), &why))
		return dir_damaged(fs, dir, "entry array: %s", why);
	if (!arr)
		return 0;
	struct fr_darray *da = meta_ptr(&fs->m, arr);
	s->used = &da->da_used;
	s->fp = da->da_fp;
	s->ent = da->da_ent;
	s->cap = class_cap(cls);
	return 1;
}

/* Used slots whose fingerprint is that of hash a or of hash b. */
static uint64_t slots_match(struct tx *tx, const struct slots *s, uint64_t a, uint64_t b)
{
	uint8_t fp[64];
	dir_load(tx, s->fp, fp, sizeof(fp));
	__m128i va = _mm_set1_epi8((char)dent_fp(a)), vb = _mm_set1_epi8((char)dent_fp(b));
	uint64_t m = 0;
	for (int k = 0; k < 4; k++) {
		__m128i v = _mm_loadu_si128((const __m128i *)(fp + 16 * k));
		__m128i e = _mm_or_si128(_mm_cmpeq_epi8(v, va), _mm_cmpeq_epi8(v, vb));
		m |= (uint64_t)(uint16_t)_mm_movemask_epi8(e) << (16 * k);
	}
	return m & rd8(tx, s->used) & cap_mask(s->cap);
}

/* 1 if dentry d (copied to *img) is name, 0 if not, -EUCLEAN if a
 * candidate (an entry whose stored hash could be name's) is damaged. */
static int dent_is(ferrite_fs *fs, struct tx *tx, struct fr_inode *dir, const struct fr_dentry *d,
		   const char *name, size_t len, uint64_t h, struct fr_dentry *img)
{
	dir_load(tx, d, img, sizeof(*img));
	if (img->d_hash < h || img->d_hash >= h + DIR_PROBE)
		return 0;
	const char *why;
	if (dent_check(fs, tx, img, &why))
		return dir_damaged(fs, dir, "%s", why);
	if (img->d_namelen != len)
		return 0;
	if (tx && (img->d_flags & D_EXTNAME)) {
		char buf[FS_NAME_MAX + 1];
		name_copy(fs, tx, img, buf);
		return memcmp(buf, name, len) == 0;
	}
	return memcmp(name_src(fs, img), name, len) == 0;
}

/* 1 and *out set if name is in s, 0 if not, or -EUCLEAN. */
static int slots_find(ferrite_fs *fs, struct tx *tx, struct fr_inode *dir, const struct slots *s,
		      const char *name, size_t len, uint64_t h, struct fr_dentry **out)
{
	uint64_t m = slots_match(tx, s, h, h + DIR_PROBE - 1);
	while (m) {
		int i = __builtin_ctzll(m);
		m &= m - 1;
		struct fr_dentry img;
		int rc = dent_is(fs, tx, dir, &s->ent[i], name, len, h, &img);
		if (rc < 0)
			return rc;
		if (!rc)
			continue;
		const char *why;
		if (dent_ino_check(fs, &img, &why))
			return dir_damaged(fs, dir, "entry \"%.*s\": %s", (int)len, name, why);
		*out = &s->ent[i];
		return 1;
	}
	return 0;
}

static int slots_has_hash(struct tx *tx, const struct slots *s, uint64_t v)
{
	uint64_t m = slots_match(tx, s, v, v);
	while (m) {
		int i = __builtin_ctzll(m);
		m &= m - 1;
		if (rd8(tx, &s->ent[i].d_hash) == v)
			return 1;
	}
	return 0;
}

/* Stages dentry img into free slot i of s. */
static void slots_put(struct tx *tx, const struct slots *s, int i, const struct fr_dentry *img)
{
	tx_set(tx, &s->ent[i], img, sizeof(*img));
	tx_set1(tx, &s->fp[i], dent_fp(img->d_hash));
	tx_set8(tx, s->used, tx_get8(tx, s->used) | (1ULL << i));
}

/* ---- large directories: page access ------------------------------------ */

/* Page idx of a large directory. Readers (no transaction) go through the
 * partition space, where the MMU translates; a transaction needs the page's
 * pool address, which is what it stages changes against. The inode's
 * partition fields are checked first (a level below the root's, aligned
 * to its size, inside the vspace), as ino_check does when a walk reaches
 * the inode: a few compares that keep this function safe on its own. */
void *dir_page(ferrite_fs *fs, struct tx *tx, struct fr_inode *dir, uint64_t idx)
{
	struct space *sp = &fs->m.sp;
	int level = rd1(tx, &dir->i_level);
	uint64_t part = rd8(tx, &dir->i_part), off = idx << FR_PAGE_SHIFT;
	if (level == I_NO_PART || level >= sp->top_level || idx >= (1ULL << 32))
		return NULL;
	uint64_t psize = sp_level_size(level);
	if (off >= psize || part & (psize - 1) || !sp_vrange_ok(sp, part, psize))
		return NULL;
	if (!tx) {
		uint64_t v = part + off;
		if (off >= dir->i_size)
			return NULL;
		if (!vs_ready(sp, v, FR_PAGE_SIZE) && vs_ensure(sp, v, FR_PAGE_SIZE))
			return NULL;
		return vs_addr(sp, v);
	}
	uint64_t phys = dp_phys(fs, tx, dir, off);
	if (!phys || phys & (FR_PAGE_SIZE - 1) || phys > fs->m.pool.size - FR_PAGE_SIZE)
		return NULL;
	return meta_ptr(&fs->m, phys);
}

/* A large directory's header page, checked. */
struct large {
	struct fr_dirhdr *h;
	struct dir_hdr_head hh;
};

static int large_open(ferrite_fs *fs, struct tx *tx, struct fr_inode *dir, struct large *L)
{
	const char *why;
	L->h = dir_page(fs, tx, dir, 0);
	if (!L->h)
		return dir_damaged(fs, dir, "index header page missing");
	dir_load(tx, L->h, &L->hh, sizeof(L->hh));
	if (dirhdr_check(&L->hh, rd8(tx, &dir->i_size), &why))
		return dir_damaged(fs, dir, "%s", why);
	return 0;
}

/* The array slot of a hash (< 2^63: the mask only keeps the shift sound). */
static uint64_t slot_of(const struct large *L, uint64_t hash)
{
	return L->hh.depth ? (hash & FR_HASH_END) >> (63 - L->hh.depth) : 0;
}

/* The bucket serving hash, checked (bucket_check: it serves that slot). */
static int bucket_for(ferrite_fs *fs, struct tx *tx, struct fr_inode *dir, const struct large *L,
		      uint64_t hash, struct fr_bucket **out, struct dir_bucket_head *bh)
{
	uint64_t slot = slot_of(L, hash);
	uint32_t apg = rd4(tx, &L->h->dh_array[slot / DH_SLOTS_PER_PAGE]);
	uint32_t *arr = dir_page_ok(&L->hh, apg) ? dir_page(fs, tx, dir, apg) : NULL;
	if (!arr)
		return dir_damaged(fs, dir, "index array page %u out of range", apg);
	uint32_t bpg = rd4(tx, &arr[slot % DH_SLOTS_PER_PAGE]);
	struct fr_bucket *b = dir_page_ok(&L->hh, bpg) ? dir_page(fs, tx, dir, bpg) : NULL;
	if (!b)
		return dir_damaged(fs, dir, "index slot %llu names page %u, out of range",
				   (unsigned long long)slot, bpg);
	dir_load(tx, b, bh, sizeof(*bh));
	const char *why;
	if (bucket_check(bh, L->hh.depth, slot, &why))
		return dir_damaged(fs, dir, "bucket page %u damaged: %s", bpg, why);
	*out = b;
	return 0;
}

int dir_lookup(ferrite_fs *fs, struct tx *tx, struct fr_inode *dir, const char *name, size_t len,
	       struct fr_dentry **out)
{
	uint64_t h = fr_name_hash(fs->hash_seed, name, len);
	struct slots s = {0};
	int rc = dir_kind(fs, tx, dir);
	if (rc <= 0) {
		if (!rc && (rc = small_slots(fs, tx, dir, &s)) > 0)
			rc = slots_find(fs, tx, dir, &s, name, len, h, out);
		return rc < 0 ? rc : rc ? 0 : -ENOENT;
	}
	struct large L;
	if ((rc = large_open(fs, tx, dir, &L)))
		return rc;
	/* the stored hash is in [h, h + DIR_PROBE): one bucket, rarely two */
	uint64_t probe[2] = {h, h + DIR_PROBE - 1};
	for (int k = 0; k < 2; k++) {
		if (k && slot_of(&L, probe[1]) == slot_of(&L, probe[0]))
			break;
		struct fr_bucket *b = NULL; /* bucket_for sets it when it succeeds */
		struct dir_bucket_head bh;
		if ((rc = bucket_for(fs, tx, dir, &L, probe[k], &b, &bh)))
			return rc;
		slots_of_bucket(b, &s);
		if ((rc = slots_find(fs, tx, dir, &s, name, len, h, out)))
			return rc < 0 ? rc : 0;
	}
	return -ENOENT;
}

/* ---- growth ------------------------------------------------------------ */

/* Appends n pages to a large directory; returns the index of the first. */
static int grow_pages(ferrite_fs *fs, struct tx *tx, struct fr_inode *dir, uint32_t n,
		      uint32_t *first)
{
	struct large L;
	int rc = large_open(fs, tx, dir, &L);
	if (rc)
		return rc;
	uint32_t np = L.hh.npages;
	if ((uint64_t)np + n > UINT32_MAX)
		return fr_err(-ENOSPC, "directory has reached its maximum size");
	uint64_t off = (uint64_t)np << FR_PAGE_SHIFT;
	rc = dp_prepare(fs, tx, dir, off, (uint64_t)n << FR_PAGE_SHIFT, off);
	if (rc)
		return rc;
	struct fr_dirhdr *h = dir_page(fs, tx, dir, 0); /* the partition may have moved */
	if (!h)
		return dir_damaged(fs, dir, "index header page missing");
	tx_set4(tx, &h->dh_npages, np + n);
	tx_set8(tx, &dir->i_size, (uint64_t)(np + n) << FR_PAGE_SHIFT);
	*first = np;
	return 0;
}

/* Fills page idx, which this transaction backed, with len bytes of src. */
static int write_fresh(ferrite_fs *fs, struct tx *tx, struct fr_inode *dir, uint64_t idx,
		       const void *src, size_t len)
{
	void *dst = dir_page(fs, tx, dir, idx);
	if (!dst)
		return dir_damaged(fs, dir, "page %llu missing after it was backed",
				   (unsigned long long)idx);
	pm_copy_nt(dst, src, len);
	tx_mark_fresh(tx);
	return 0;
}

/* Places an entry in a bucket image being built (fresh page); the caller
 * adds at most DB_SLOTS. */
static void bucket_add(struct fr_bucket *b, const struct fr_dentry *e)
{
	int s = b->db_count++;
	b->db_ent[s] = *e;
	b->db_fp[s] = dent_fp(e->d_hash);
	b->db_used |= 1ULL << s;
}

/* Copies the used entries of s (at most 64) to ents, checking the hash each
 * will be placed by; returns how many, or -EUCLEAN. */
static int copy_entries(ferrite_fs *fs, struct tx *tx, struct fr_inode *dir, const struct slots *s,
			struct fr_dentry *ents)
{
	int n = 0;
	uint64_t used = tx_get8(tx, s->used) & cap_mask(s->cap);
	while (used) {
		int i = __builtin_ctzll(used);
		used &= used - 1;
		tx_get(tx, &s->ent[i], &ents[n], sizeof(*ents));
		if (ents[n].d_hash < FR_HASH_MIN || ents[n].d_hash >= FR_HASH_END)
			return dir_damaged(fs, dir, "entry's stored hash is out of range");
		n++;
	}
	return n;
}

/* The smallest depth (up to CONVERT_MAX_DEPTH) at which no bucket gets more
 * than DB_SLOTS - DIR_SPLIT_SLACK of the n entries; -ENOSPC if even the
 * deepest overfills a bucket (names crafted to share a hash prefix). */
static int convert_depth(const struct fr_dentry *ents, int n)
{
	for (uint32_t g = 1;; g++) {
		uint32_t cnt[1u << CONVERT_MAX_DEPTH] = {0}, most = 0;
		for (int i = 0; i < n; i++) {
			uint32_t c = ++cnt[ents[i].d_hash >> (63 - g)];
			most = c > most ? c : most;
		}
		if (most <= DB_SLOTS - DIR_SPLIT_SLACK)
			return (int)g;
		if (g == CONVERT_MAX_DEPTH)
			return most <= DB_SLOTS
				   ? (int)g
				   : fr_err(-ENOSPC, "too many names with the same hash "
						     "prefix in one directory");
	}
}

/* Builds a large directory from the entries of a full small one (s). */
static int convert_to_large(ferrite_fs *fs, struct tx *tx, struct fr_inode *dir,
			    const struct slots *s)
{
	uint64_t arr = tx_get8(tx, &dir->i_dents);
	int cls = tx_get1(tx, &dir->i_dclass); /* both checked by small_slots */
	struct fr_dentry *ents = malloc(sizeof(*ents) * 64);
	struct fr_bucket *img = malloc(sizeof(*img));
	int rc = -ENOMEM, n, g;
	if (!ents || !img)
		goto out;
	if ((rc = n = copy_entries(fs, tx, dir, s, ents)) < 0 ||
	    (rc = g = convert_depth(ents, n)) < 0)
		goto out;
	uint32_t nb = 1u << g, npages = 2 + nb;
	/* The directory gets a partition; its pages are written before commit. */
	rc = dp_prepare(fs, tx, dir, 0, (uint64_t)npages << FR_PAGE_SHIFT, 0);
	if (rc)
		goto out;
	union {
		struct fr_dirhdr h;
		uint32_t a[DH_SLOTS_PER_PAGE];
	} *page = (void *)img; /* a page-sized scratch buffer */
	memset(page, 0, FR_PAGE_SIZE);
	page->h.dh_magic = DH_MAGIC;
	page->h.dh_depth = (uint32_t)g;
	page->h.dh_npages = npages;
	page->h.dh_narray = 1;
	page->h.dh_array[0] = 1;
	if ((rc = write_fresh(fs, tx, dir, 0, page, FR_PAGE_SIZE)))
		goto out;
	memset(page, 0, FR_PAGE_SIZE);
	for (uint32_t i = 0; i < nb; i++)
		page->a[i] = 2 + i;
	if ((rc = write_fresh(fs, tx, dir, 1, page, FR_PAGE_SIZE)))
		goto out;
	for (uint32_t b = 0; b < nb; b++) {
		memset(img, 0, sizeof(*img));
		img->db_magic = DB_MAGIC;
		img->db_depth = (uint16_t)g;
		img->db_prefix = b;
		for (int i = 0; i < n; i++)
			if ((ents[i].d_hash >> (63 - g)) == b)
				bucket_add(img, &ents[i]); /* at most DB_SLOTS: convert_depth */
		if ((rc = write_fresh(fs, tx, dir, 2 + b, img, FR_PAGE_SIZE)))
			goto out;
	}
	mp_free(&fs->m, tx, (enum mp_id)cls, arr);
	tx_set8(tx, &dir->i_dents, 0);
	tx_set1(tx, &dir->i_dkind, I_DIR_LARGE);
	tx_set8(tx, &dir->i_size, (uint64_t)npages << FR_PAGE_SHIFT);
	rc = 0;
out:
	free(ents);
	free(img);
	return rc;
}

static int grow_small(ferrite_fs *fs, struct tx *tx, struct fr_inode *dir)
{
	struct slots old;
	int have = small_slots(fs, tx, dir, &old);
	if (have < 0)
		return have;
	int cls = have ? tx_get1(tx, &dir->i_dclass) : -1;
	if (cls == MP_DENT64)
		return convert_to_large(fs, tx, dir, &old);
	int ncls = cls < 0 ? MP_DENT16 : cls + 1;
	uint64_t noff;
	int rc = mp_alloc(&fs->m, tx, (enum mp_id)ncls, &noff, NULL);
	if (rc == -ENOSPC && have)
		/* The larger arrays come in blocks of several pages (format 4):
		 * when no such run is free, the hashed form needs single pages. */
		return convert_to_large(fs, tx, dir, &old);
	if (rc)
		return rc;
	/* The new array was free in the committed state (frees are deferred,
	 * tx.h): fill it directly, then link it in the transaction. */
	size_t bytes = mp_entry_size[ncls] - sizeof(struct mp_oob);
	struct fr_darray *img = calloc(1, mp_entry_size[ncls]);
	if (!img)
		return -ENOMEM;
	if (have) {
		/* at most old.cap entries, fewer than the new class holds */
		uint64_t used = tx_get8(tx, old.used) & cap_mask(old.cap);
		int j = 0;
		while (used) {
			int i = __builtin_ctzll(used);
			used &= used - 1;
			tx_get(tx, &old.ent[i], &img->da_ent[j], sizeof(struct fr_dentry));
			img->da_fp[j] = dent_fp(img->da_ent[j].d_hash);
			img->da_used |= 1ULL << j;
			j++;
		}
		mp_free(&fs->m, tx, (enum mp_id)cls, tx_get8(tx, &dir->i_dents));
	}
	struct fr_darray *nd = meta_ptr(&fs->m, noff);
	pm_copy_nt((char *)nd + sizeof(struct mp_oob), (char *)img + sizeof(struct mp_oob), bytes);
	tx_mark_fresh(tx);
	free(img);
	tx_set8(tx, &dir->i_dents, noff);
	tx_set1(tx, &dir->i_dclass, (uint8_t)ncls);
	return 0;
}

/* Are the stored hashes of bucket b's entries within its range? (What a
 * split places them by.) */
static int bucket_entries_ok(ferrite_fs *fs, struct tx *tx, struct fr_inode *dir,
			     struct fr_bucket *b, const struct dir_bucket_head *bh)
{
	uint64_t lo, hi, used = bh->used;
	bucket_range(bh, &lo, &hi);
	while (used) {
		int i = __builtin_ctzll(used);
		used &= used - 1;
		uint64_t h = tx_get8(tx, &b->db_ent[i].d_hash);
		if (h < lo || h >= hi)
			return dir_damaged(fs, dir, "entry outside the range of its bucket");
	}
	return 0;
}

/* Are the array pages holding slots [s0, s0 + n) sound? */
static int array_pages_ok(ferrite_fs *fs, struct tx *tx, struct fr_inode *dir,
			  const struct large *L, uint64_t s0, uint64_t n)
{
	for (uint64_t p = s0 / DH_SLOTS_PER_PAGE; p <= (s0 + n - 1) / DH_SLOTS_PER_PAGE; p++) {
		uint32_t apg = tx_get4(tx, &L->h->dh_array[p]);
		if (!dir_page_ok(&L->hh, apg) || !dir_page(fs, tx, dir, apg))
			return dir_damaged(fs, dir, "index array page %u out of range", apg);
	}
	return 0;
}

/* Doubles the array of a large directory (global depth + 1, R4). */
static int double_array(ferrite_fs *fs, struct tx *tx, struct fr_inode *dir)
{
	struct large L;
	int rc = large_open(fs, tx, dir, &L);
	if (rc)
		return rc;
	uint32_t g = L.hh.depth;
	if (g + 1 > DH_MAX_DEPTH)
		return fr_err(-ENOSPC, "directory has reached its maximum size");
	uint64_t nslots = 1ULL << (g + 1);
	uint32_t npg = (uint32_t)((nslots + DH_SLOTS_PER_PAGE - 1) / DH_SLOTS_PER_PAGE);
	uint32_t opg = (uint32_t)(((nslots >> 1) + DH_SLOTS_PER_PAGE - 1) / DH_SLOTS_PER_PAGE);
	uint32_t first;
	if ((rc = array_pages_ok(fs, tx, dir, &L, 0, nslots >> 1)) ||
	    (rc = grow_pages(fs, tx, dir, npg, &first)) || (rc = large_open(fs, tx, dir, &L)))
		return rc;
	uint32_t *old = malloc((size_t)opg * FR_PAGE_SIZE), *nw = calloc(npg, FR_PAGE_SIZE);
	if (!old || !nw) {
		rc = -ENOMEM;
		goto out;
	}
	/* opg <= dh_narray (dirhdr_check): the pages holding the 2^g slots */
	for (uint32_t i = 0; i < opg; i++) {
		uint32_t apg = tx_get4(tx, &L.h->dh_array[i]);
		void *p = dir_page_ok(&L.hh, apg) ? dir_page(fs, tx, dir, apg) : NULL;
		if (!p) {
			rc = dir_damaged(fs, dir, "index array page %u out of range", apg);
			goto out;
		}
		tx_get(tx, p, old + (size_t)i * DH_SLOTS_PER_PAGE, FR_PAGE_SIZE);
	}
	for (uint64_t s = 0; s < nslots; s++)
		nw[s] = old[s >> 1];
	for (uint32_t i = 0; i < npg; i++) {
		rc = write_fresh(fs, tx, dir, first + i, nw + (size_t)i * DH_SLOTS_PER_PAGE,
				 FR_PAGE_SIZE);
		if (rc)
			goto out;
		tx_set4(tx, &L.h->dh_array[i], first + i);
	}
	tx_set4(tx, &L.h->dh_narray, npg);
	tx_set4(tx, &L.h->dh_depth, g + 1);
out:
	free(old);
	free(nw);
	return rc;
}

/* Splits the bucket serving hash v into two (R2). */
static int split_bucket(ferrite_fs *fs, struct tx *tx, struct fr_inode *dir, uint64_t v)
{
	struct large L;
	struct fr_bucket *b = NULL; /* bucket_for sets it when it succeeds */
	struct dir_bucket_head bh;
	int rc = large_open(fs, tx, dir, &L);
	if (rc || (rc = bucket_for(fs, tx, dir, &L, v, &b, &bh)))
		return rc;
	uint32_t d = bh.depth; /* <= g <= DH_MAX_DEPTH: bucket_check */
	/* Check what the split will use before anything is grown or written. */
	if ((rc = bucket_entries_ok(fs, tx, dir, b, &bh)) ||
	    (d < L.hh.depth && (rc = array_pages_ok(fs, tx, dir, &L, bh.prefix << (L.hh.depth - d),
						    1ULL << (L.hh.depth - d)))))
		return rc;
	if (d == L.hh.depth && (rc = double_array(fs, tx, dir)))
		return rc;
	uint32_t npage;
	if ((rc = grow_pages(fs, tx, dir, 1, &npage)))
		return rc;
	/* Pages may have moved: translate everything again. */
	if ((rc = large_open(fs, tx, dir, &L)) || (rc = bucket_for(fs, tx, dir, &L, v, &b, &bh)))
		return rc;
	uint32_t g = L.hh.depth;
	if (bh.depth != d || d >= g)
		return dir_damaged(fs, dir, "bucket changed depth while splitting");
	uint64_t prefix = bh.prefix;
	struct fr_bucket *nb = calloc(1, sizeof(*nb));
	if (!nb)
		return -ENOMEM;
	nb->db_magic = DB_MAGIC;
	nb->db_depth = (uint16_t)(d + 1);
	nb->db_prefix = (prefix << 1) | 1;
	uint64_t used = bh.used, keep = used;
	while (used) {
		int i = __builtin_ctzll(used);
		used &= used - 1;
		struct fr_dentry e;
		tx_get(tx, &b->db_ent[i], &e, sizeof(e)); /* in [lo, hi): checked above */
		if (((e.d_hash >> (62 - d)) & 1) == 0)
			continue;
		bucket_add(nb, &e);
		keep &= ~(1ULL << i);
	}
	rc = write_fresh(fs, tx, dir, npage, nb, sizeof(*nb));
	free(nb);
	if (rc)
		return rc;
	tx_set8(tx, &b->db_used, keep);
	tx_set2(tx, &b->db_count, (uint16_t)__builtin_popcountll(keep));
	tx_set2(tx, &b->db_depth, (uint16_t)(d + 1));
	tx_set8(tx, &b->db_prefix, prefix << 1);
	/* Slots of the upper half of the old prefix now serve the new bucket:
	 * s0 + span <= 2^g, so every slot is within dh_narray pages. */
	uint64_t span = 1ULL << (g - d - 1);
	uint64_t s0 = ((prefix << 1) | 1) << (g - d - 1);
	for (uint64_t s = s0; s < s0 + span && !tx_status(tx); s++) {
		uint32_t apg = tx_get4(tx, &L.h->dh_array[s / DH_SLOTS_PER_PAGE]);
		uint32_t *arr = dir_page_ok(&L.hh, apg) ? dir_page(fs, tx, dir, apg) : NULL;
		if (!arr)
			return dir_damaged(fs, dir, "index array page %u out of range", apg);
		tx_set4(tx, &arr[s % DH_SLOTS_PER_PAGE], npage);
	}
	return tx_status(tx) ? fr_err(-ENOSPC, "directory split too large") : 0;
}

/* The first free stored hash from h on in a small directory (R1). */
static int pick_hash_small(struct tx *tx, const struct slots *s, uint64_t h, uint64_t *out)
{
	for (uint64_t k = 0; k < DIR_PROBE && h + k < FR_HASH_END; k++)
		if (!slots_has_hash(tx, s, h + k)) {
			*out = h + k;
			return 0;
		}
	return fr_err(-ENOSPC, "too many names with the same hash in one directory");
}

/* -EEXIST if hash v is taken in s by name itself (base hash h), -EUCLEAN,
 * or 0. The caller looked the name up without the transaction; this looks
 * again through it, where the probe meets a stored hash anyway, so that a
 * stale view can never commit a second entry of one name. */
static int name_taken(ferrite_fs *fs, struct tx *tx, struct fr_inode *dir, const struct slots *s,
		      const char *name, size_t len, uint64_t h, uint64_t v)
{
	if (!slots_has_hash(tx, s, v))
		return 0;
	struct fr_dentry *d;
	int rc = slots_find(fs, tx, dir, s, name, len, h, &d);
	if (rc > 0)
		return fr_err(-EEXIST, "directory %llu: \"%.*s\" is there already",
			      (unsigned long long)ino_of(fs, dir), (int)len, name);
	return rc;
}

/* Finds (making room if needed) the slot set that will hold name; returns
 * the stored hash to use (R1). */
static int prepare_slot(ferrite_fs *fs, struct tx *tx, struct fr_inode *dir, const char *name,
			size_t len, uint64_t *hash, struct slots *s)
{
	uint64_t h = fr_name_hash(fs->hash_seed, name, len);
	for (int tries = 0; tries < 64; tries++) {
		int rc = dir_kind(fs, tx, dir);
		if (rc < 0)
			return rc;
		if (!rc) {
			if ((rc = small_slots(fs, tx, dir, s)) < 0)
				return rc;
			if (rc) {
				if ((rc = name_taken(fs, tx, dir, s, name, len, h, h)))
					return rc;
				if ((tx_get8(tx, s->used) & cap_mask(s->cap)) != cap_mask(s->cap))
					return pick_hash_small(tx, s, h, hash);
			}
			if ((rc = grow_small(fs, tx, dir)))
				return rc;
			continue;
		}
		/* The first free hash value from h on, looked up bucket by bucket
		 * (almost always: h itself, in one bucket). */
		struct large L;
		struct fr_bucket *b = NULL; /* bucket_for sets it when it succeeds */
		struct dir_bucket_head bh;
		if ((rc = large_open(fs, tx, dir, &L)) ||
		    (rc = bucket_for(fs, tx, dir, &L, h, &b, &bh)))
			return rc;
		uint64_t v = h, lo, hi;
		for (;; v++) {
			if (v - h >= DIR_PROBE || v >= FR_HASH_END)
				return fr_err(-ENOSPC, "too many names with the same hash in one "
						       "directory");
			bucket_range(&bh, &lo, &hi);
			if (v >= hi && (rc = bucket_for(fs, tx, dir, &L, v, &b, &bh)))
				return rc;
			slots_of_bucket(b, s);
			if (!slots_has_hash(tx, s, v))
				break;
			if ((rc = name_taken(fs, tx, dir, s, name, len, h, v)))
				return rc;
		}
		if ((bh.used & cap_mask(DB_SLOTS)) != cap_mask(DB_SLOTS)) {
			*hash = v;
			return 0;
		}
		if ((rc = split_bucket(fs, tx, dir, v)))
			return rc;
	}
	return fr_err(-ENOSPC, "directory index cannot place this name");
}

int dir_insert(ferrite_fs *fs, struct tx *tx, struct fr_inode *dir, const char *name, size_t len,
	       uint64_t ino, unsigned type)
{
	uint64_t hash = 0;
	struct slots s = {0};
	int rc = prepare_slot(fs, tx, dir, name, len, &hash, &s);
	if (rc)
		return rc; /* the caller aborts (tx_abort fences any fresh pages) */
	uint64_t free_slots = ~tx_get8(tx, s.used) & cap_mask(s.cap);
	if (!free_slots) /* prepare_slot found room: only a bug gets here */
		return dir_damaged(fs, dir, "no free entry slot");
	struct fr_dentry img;
	memset(&img, 0, sizeof(img));
	img.d_ino = ino;
	img.d_hash = hash;
	img.d_namelen = (uint8_t)len;
	img.d_type = (uint8_t)type;
	if (len <= D_INLINE_NAME) {
		memcpy(img.d_name, name, len);
	} else {
		uint64_t noff;
		rc = mp_alloc(&fs->m, tx, dir_name_pool(len), &noff, NULL);
		if (rc)
			return rc;
		struct fr_name *n = meta_ptr(&fs->m, noff);
		tx_set(tx, n->n_bytes, name, len);
		img.d_flags = D_EXTNAME;
		img.d_name_off = noff;
	}
	slots_put(tx, &s, __builtin_ctzll(free_slots), &img);
	if (s.cap == DB_SLOTS) {
		struct fr_bucket *b = (struct fr_bucket *)((uintptr_t)s.used & ~(uintptr_t)4095);
		tx_set2(tx, &b->db_count, (uint16_t)(tx_get2(tx, &b->db_count) + 1));
	}
	tx_set8(tx, &dir->i_nentries, tx_get8(tx, &dir->i_nentries) + 1);
	return tx_status(tx) ? fr_err(-ENOSPC, "operation too large") : 0;
}

/* A caller that goes on after a failed step would commit the rest of its
 * transaction: mark it unfit for the log, so the commit fails and nothing
 * of it is applied (tx_abort or the next tx_begin clears the mark). */
static int poison(struct tx *tx, int rc)
{
	tx->damaged = 1; /* the message was recorded where the damage was found */
	return rc;
}

static int remove_entry(ferrite_fs *fs, struct tx *tx, struct fr_inode *dir, struct fr_dentry *d)
{
	/* d must be a pool address (what a lookup in a transaction returns) */
	uintptr_t doff = (uintptr_t)d - (uintptr_t)fs->m.sp.base;
	if (!d || (uintptr_t)d < (uintptr_t)fs->m.sp.base || doff % sizeof(*d) ||
	    doff > fs->m.pool.size - sizeof(*d))
		return dir_damaged(fs, dir, "entry to remove is missing");
	struct fr_dentry img;
	const char *why;
	tx_get(tx, d, &img, sizeof(img));
	if (dent_check(fs, tx, &img, &why))
		return dir_damaged(fs, dir, "%s", why);
	struct slots s = {0};
	int rc = dir_kind(fs, tx, dir);
	if (rc > 0) {
		/* The dentry lives in a bucket page: the one serving its hash. */
		struct large L;
		struct fr_bucket *b = NULL; /* bucket_for sets it when it succeeds */
		struct dir_bucket_head bh;
		if ((rc = large_open(fs, tx, dir, &L)) ||
		    (rc = bucket_for(fs, tx, dir, &L, img.d_hash, &b, &bh)))
			return rc;
		slots_of_bucket(b, &s);
	} else if (rc == 0 && (rc = small_slots(fs, tx, dir, &s)) == 0) {
		rc = dir_damaged(fs, dir, "entry to remove but no entry array");
	}
	if (rc < 0)
		return rc;
	uintptr_t at = (uintptr_t)d - (uintptr_t)s.ent;
	uint64_t i = at / sizeof(*d);
	if ((uintptr_t)d < (uintptr_t)s.ent || at % sizeof(*d) || i >= s.cap ||
	    !(tx_get8(tx, s.used) & (1ULL << i)) || !tx_get8(tx, &dir->i_nentries))
		return dir_damaged(fs, dir, "entry to remove is not one of its entries");
	if (img.d_flags & D_EXTNAME)
		mp_free(&fs->m, tx, dir_name_pool(img.d_namelen), img.d_name_off);
	if (s.cap == DB_SLOTS) {
		struct fr_bucket *b = (struct fr_bucket *)((uintptr_t)s.used & ~(uintptr_t)4095);
		tx_set2(tx, &b->db_count, (uint16_t)(tx_get2(tx, &b->db_count) - 1));
	}
	tx_set8(tx, s.used, tx_get8(tx, s.used) & ~(1ULL << i));
	tx_set8(tx, &d->d_ino, 0);
	tx_set8(tx, &dir->i_nentries, tx_get8(tx, &dir->i_nentries) - 1);
	return 0;
}

int dir_remove(ferrite_fs *fs, struct tx *tx, struct fr_inode *dir, struct fr_dentry *d)
{
	int rc = remove_entry(fs, tx, dir, d);
	return rc ? poison(tx, rc) : 0;
}

void dir_retarget(struct tx *tx, struct fr_dentry *d, uint64_t ino, unsigned type)
{
	if (!d) { /* the caller's lookup failed (damage, reported there) */
		poison(tx, -EUCLEAN);
		return;
	}
	tx_set8(tx, &d->d_ino, ino);
	tx_set1(tx, &d->d_type, (uint8_t)type);
}

int dir_release(ferrite_fs *fs, struct tx *tx, struct fr_inode *dir)
{
	uint64_t arr = tx_get8(tx, &dir->i_dents);
	if (!arr)
		return 0;
	int cls = tx_get1(tx, &dir->i_dclass);
	if (tx_get1(tx, &dir->i_dkind) != I_DIR_SMALL || !class_ok(cls) ||
	    !dir_pool_entry_ok(fs, tx, (enum mp_id)cls, arr))
		return dir_damaged(fs, dir, "entry array to release is damaged; left in place");
	mp_free(&fs->m, tx, (enum mp_id)cls, arr);
	tx_set8(tx, &dir->i_dents, 0);
	return 0;
}

/* ---- readdir ------------------------------------------------------------- */

/* A used slot and its stored hash: what a batch is sorted by. */
struct key {
	uint64_t hash;
	unsigned slot;
};

/* The used slots of s sorted by stored hash (insertion sort of at most 64
 * small keys); each hash must lie in [lo, hi), the range the array or
 * bucket serves, and no two may be equal (R1: a cookie names one entry).
 * Returns the count or -EUCLEAN. */
static int sorted_keys(ferrite_fs *fs, struct fr_inode *dir, const struct slots *s, uint64_t used,
		       uint64_t lo, uint64_t hi, struct key *k)
{
	int n = 0;
	while (used) {
		unsigned i = (unsigned)__builtin_ctzll(used);
		used &= used - 1;
		uint64_t h = rd8(NULL, &s->ent[i].d_hash);
		if (h < lo || h >= hi)
			return dir_damaged(fs, dir, "entry outside the range of its bucket");
		int j = n++;
		for (; j > 0 && k[j - 1].hash > h; j--)
			k[j] = k[j - 1];
		if (j > 0 && k[j - 1].hash == h)
			return dir_damaged(fs, dir, "two entries share the stored hash %llu",
					   (unsigned long long)h);
		k[j].hash = h;
		k[j].slot = i;
	}
	return n;
}

/* Copies the entry in a used slot (stored hash `hash`) to e, checked. */
static int take(ferrite_fs *fs, struct fr_inode *dir, const struct fr_dentry *d, uint64_t hash,
		struct dir_batch_ent *e)
{
	struct fr_dentry img;
	const char *why;
	memcpy(&img, d, sizeof(img));
	if (img.d_hash != hash)
		return dir_damaged(fs, dir, "entry changed while it was read");
	if (dent_check(fs, NULL, &img, &why))
		return dir_damaged(fs, dir, "%s", why);
	name_copy(fs, NULL, &img, e->name);
	if (dname_check(e->name, img.d_namelen, &why))
		return dir_damaged(fs, dir, "%s", why);
	e->hash = img.d_hash;
	e->ino = img.d_ino;
	e->type = img.d_type;
	e->len = img.d_namelen;
	return 0;
}

/* Emits, checked, the sorted entries of s with hash >= cookie, at most
 * room; *next is the first hash left out, or range_end. Returns the count
 * (*stopped set when it stopped inside the range) or -EUCLEAN. Only what
 * is emitted is read beyond its hash. */
static int emit(ferrite_fs *fs, struct fr_inode *dir, const struct slots *s, const struct key *k,
		int n, uint64_t cookie, struct dir_batch_ent *out, int room, uint64_t *next,
		uint64_t range_end, int *stopped)
{
	int cnt = 0;
	*stopped = 0;
	for (int i = 0; i < n; i++) {
		if (k[i].hash < cookie)
			continue;
		if (cnt == room) {
			*next = k[i].hash;
			*stopped = 1;
			return cnt;
		}
		int rc = take(fs, dir, &s->ent[k[i].slot], k[i].hash, &out[cnt]);
		if (rc)
			return rc;
		cnt++;
	}
	*next = range_end;
	return cnt;
}

int dir_read(ferrite_fs *fs, struct fr_inode *dir, uint64_t cookie, struct dir_batch_ent *out,
	     int cap, uint64_t *next, struct dir_batch_ent *scratch)
{
	(void)scratch; /* batches are sorted by key now: no copy needs it */
	struct key k[64];
	struct slots s = {0};
	int n, stopped, rc = dir_kind(fs, NULL, dir);
	*next = FR_HASH_END;
	if (rc < 0)
		return rc;
	if (!rc) {
		if ((rc = small_slots(fs, NULL, dir, &s)) <= 0)
			return rc;
		n = sorted_keys(fs, dir, &s, *s.used & cap_mask(s.cap), FR_HASH_MIN, FR_HASH_END,
				k);
		if (n < 0)
			return n;
		return emit(fs, dir, &s, k, n, cookie, out, cap, next, FR_HASH_END, &stopped);
	}
	struct large L;
	if ((rc = large_open(fs, NULL, dir, &L)))
		return rc;
	int total = 0;
	while (cookie < FR_HASH_END && total < cap) {
		struct fr_bucket *b = NULL; /* bucket_for sets it when it succeeds */
		struct dir_bucket_head bh;
		uint64_t lo, hi;
		if ((rc = bucket_for(fs, NULL, dir, &L, cookie, &b, &bh)))
			return rc;
		bucket_range(&bh, &lo, &hi); /* lo <= cookie < hi: bucket_check */
		slots_of_bucket(b, &s);
		if ((n = sorted_keys(fs, dir, &s, bh.used, lo, hi, k)) < 0)
			return n;
		rc = emit(fs, dir, &s, k, n, cookie, out + total, cap - total, next, hi, &stopped);
		if (rc < 0)
			return rc;
		total += rc;
		if (stopped)
			return total;
		cookie = hi; /* > the cookie: the loop advances */
		*next = hi;
	}
	return total;
}
