/*
 * dir.c -- directories. A small directory (up to 64 entries) keeps fixed
 * 64-byte dentries in an array from a dentry pool of 16, 32 or 64 entries
 * (SPFS 4.2). A larger one lives in its own partition, like a file, as an
 * extendible hash: a header page, array pages mapping hash prefixes to
 * bucket pages, and bucket pages of 63 dentries. Lookup and insert are O(1).
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
 *             R3 i_nentries counts the entries.
 * Crash argument: every change to existing dentries, buckets, arrays and the
 *   header is staged in the operation's transaction; new pages (buckets,
 *   array pages, a converted directory) are written before the transaction
 *   that links them commits. Old array pages are left unused, never reused
 *   while reachable.
 * Locking: the directory's inode lock (read for lookup/readdir, write for
 *   changes); see docs/contracts.md.
 */
#include <emmintrin.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "fs/fs.h"
#include "persist/pm.h"

#define DIR_PROBE	8
#define DIR_SPLIT_SLACK 8

static uint32_t class_cap(int cls)
{
	return cls == MP_DENT16 ? 16 : cls == MP_DENT32 ? 32 : 64;
}

static enum mp_id name_pool_for(size_t len)
{
	if (len + sizeof(struct mp_oob) <= 64)
		return MP_NAME64;
	if (len + sizeof(struct mp_oob) <= 128)
		return MP_NAME128;
	if (len + sizeof(struct mp_oob) <= 192)
		return MP_NAME192;
	return MP_NAME272;
}

size_t dent_name(ferrite_fs *fs, struct tx *tx, const struct fr_dentry *d, char *buf)
{
	struct fr_dentry img;
	if (tx)
		tx_get(tx, d, &img, sizeof(img));
	else
		memcpy(&img, d, sizeof(img));
	size_t len = img.d_namelen;
	if (img.d_flags & D_EXTNAME) {
		const struct fr_name *n = meta_ptr(&fs->m, img.d_name_off);
		if (tx)
			tx_get(tx, n->n_bytes, buf, len);
		else
			memcpy(buf, n->n_bytes, len);
	} else {
		memcpy(buf, img.d_name, FR_MIN(len, (size_t)D_INLINE_NAME));
	}
	buf[len] = 0;
	return len;
}

/* The entries of a small array or of one bucket, with their fingerprints
 * and used mask: every search goes through this view. */
struct slots {
	uint64_t *used;
	uint8_t *fp;
	struct fr_dentry *ent;
	unsigned cap;
};

static void slots_of_bucket(struct fr_bucket *b, struct slots *s)
{
	s->used = &b->db_used;
	s->fp = b->db_fp;
	s->ent = b->db_ent;
	s->cap = DB_SLOTS;
}

static int slots_of_small(ferrite_fs *fs, struct tx *tx, struct fr_inode *dir, struct slots *s)
{
	uint64_t arr = rd8(tx, &dir->i_dents);
	if (!arr)
		return 0;
	struct fr_darray *da = meta_ptr(&fs->m, arr);
	s->used = &da->da_used;
	s->fp = da->da_fp;
	s->ent = da->da_ent;
	s->cap = class_cap(tx ? tx_get1(tx, &dir->i_dclass) : dir->i_dclass);
	return 1;
}

static uint64_t cap_mask(unsigned cap)
{
	return cap >= 64 ? ~0ULL : (1ULL << cap) - 1;
}

/* Used slots whose fingerprint is that of hash a or of hash b. */
static uint64_t slots_match(struct tx *tx, const struct slots *s, uint64_t a, uint64_t b)
{
	uint8_t fp[64];
	if (tx)
		tx_get(tx, s->fp, fp, sizeof(fp));
	else
		memcpy(fp, s->fp, sizeof(fp));
	__m128i va = _mm_set1_epi8((char)dent_fp(a)), vb = _mm_set1_epi8((char)dent_fp(b));
	uint64_t m = 0;
	for (int k = 0; k < 4; k++) {
		__m128i v = _mm_loadu_si128((const __m128i *)(fp + 16 * k));
		__m128i e = _mm_or_si128(_mm_cmpeq_epi8(v, va), _mm_cmpeq_epi8(v, vb));
		m |= (uint64_t)(uint16_t)_mm_movemask_epi8(e) << (16 * k);
	}
	return m & rd8(tx, s->used) & cap_mask(s->cap);
}

static int dent_is(ferrite_fs *fs, struct tx *tx, const struct fr_dentry *d, const char *name,
		   size_t len, uint64_t h)
{
	uint64_t dh = rd8(tx, &d->d_hash);
	if (dh < h || dh >= h + DIR_PROBE)
		return 0;
	uint8_t nl = tx ? tx_get1(tx, &d->d_namelen) : d->d_namelen;
	if (nl != len)
		return 0;
	char buf[FS_NAME_MAX + 1];
	dent_name(fs, tx, d, buf);
	return memcmp(buf, name, len) == 0;
}

static struct fr_dentry *slots_find(ferrite_fs *fs, struct tx *tx, const struct slots *s,
				    const char *name, size_t len, uint64_t h)
{
	uint64_t m = slots_match(tx, s, h, h + DIR_PROBE - 1);
	while (m) {
		int i = __builtin_ctzll(m);
		m &= m - 1;
		if (dent_is(fs, tx, &s->ent[i], name, len, h))
			return &s->ent[i];
	}
	return NULL;
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
 * pool address, which is what it stages changes against. */
static void *dpage(ferrite_fs *fs, struct tx *tx, struct fr_inode *dir, uint64_t idx)
{
	uint64_t off = idx << FR_PAGE_SHIFT;
	if (!tx) {
		struct space *sp = &fs->m.sp;
		if (dir->i_level == I_NO_PART || off >= dir->i_size)
			return NULL;
		uint64_t v = dir->i_part + off;
		if (!vs_ready(sp, v, FR_PAGE_SIZE) && vs_ensure(sp, v, FR_PAGE_SIZE))
			return NULL;
		return vs_addr(sp, v);
	}
	uint64_t phys = dp_phys(fs, tx, dir, off);
	return phys ? meta_ptr(&fs->m, phys) : NULL;
}

static struct fr_dirhdr *dhdr(ferrite_fs *fs, struct tx *tx, struct fr_inode *dir)
{
	return dpage(fs, tx, dir, 0);
}

static struct fr_bucket *bucket_for(ferrite_fs *fs, struct tx *tx, struct fr_inode *dir,
				    struct fr_dirhdr *h, uint64_t hash)
{
	uint32_t g = rd4(tx, &h->dh_depth);
	uint64_t slot = g ? hash >> (63 - g) : 0;
	uint32_t apg = rd4(tx, &h->dh_array[slot / DH_SLOTS_PER_PAGE]);
	uint32_t *arr = dpage(fs, tx, dir, apg);
	if (!arr)
		return NULL;
	uint32_t bpg = rd4(tx, &arr[slot % DH_SLOTS_PER_PAGE]);
	return dpage(fs, tx, dir, bpg);
}

static int is_large(struct tx *tx, struct fr_inode *dir)
{
	return (tx ? tx_get1(tx, &dir->i_dkind) : dir->i_dkind) == I_DIR_LARGE;
}

int dir_lookup(ferrite_fs *fs, struct tx *tx, struct fr_inode *dir, const char *name, size_t len,
	       struct fr_dentry **out)
{
	uint64_t h = fr_name_hash(fs->hash_seed, name, len);
	struct slots s;
	if (!is_large(tx, dir)) {
		if (!slots_of_small(fs, tx, dir, &s))
			return -ENOENT;
		*out = slots_find(fs, tx, &s, name, len, h);
		return *out ? 0 : -ENOENT;
	}
	struct fr_dirhdr *hd = dhdr(fs, tx, dir);
	if (!hd)
		return -EUCLEAN;
	struct fr_bucket *b1 = bucket_for(fs, tx, dir, hd, h);
	struct fr_bucket *b2 = bucket_for(fs, tx, dir, hd, h + DIR_PROBE - 1);
	struct fr_bucket *bs[2] = {b1, b2 == b1 ? NULL : b2};
	for (int k = 0; k < 2; k++) {
		if (!bs[k])
			continue;
		slots_of_bucket(bs[k], &s);
		if ((*out = slots_find(fs, tx, &s, name, len, h)))
			return 0;
	}
	return -ENOENT;
}

/* Is the stored hash value v taken in this directory? */
static int hash_taken(ferrite_fs *fs, struct tx *tx, struct fr_inode *dir, uint64_t v)
{
	struct slots s;
	if (is_large(tx, dir))
		slots_of_bucket(bucket_for(fs, tx, dir, dhdr(fs, tx, dir), v), &s);
	else if (!slots_of_small(fs, tx, dir, &s))
		return 0;
	return slots_has_hash(tx, &s, v);
}

static int pick_hash(ferrite_fs *fs, struct tx *tx, struct fr_inode *dir, const char *name,
		     size_t len, uint64_t *out)
{
	uint64_t h = fr_name_hash(fs->hash_seed, name, len);
	for (uint64_t k = 0; k < DIR_PROBE && h + k < FR_HASH_END; k++)
		if (!hash_taken(fs, tx, dir, h + k)) {
			*out = h + k;
			return 0;
		}
	return fr_err(-ENOSPC, "too many names with the same hash in one directory");
}

/* ---- growth ------------------------------------------------------------ */

/* Appends n pages to a large directory; returns the index of the first. */
static int grow_pages(ferrite_fs *fs, struct tx *tx, struct fr_inode *dir, uint32_t n,
		      uint32_t *first)
{
	struct fr_dirhdr *h = dhdr(fs, tx, dir);
	uint32_t np = tx_get4(tx, &h->dh_npages);
	uint64_t off = (uint64_t)np << FR_PAGE_SHIFT;
	int rc = dp_prepare(fs, tx, dir, off, (uint64_t)n << FR_PAGE_SHIFT, off);
	if (rc)
		return rc;
	h = dhdr(fs, tx, dir); /* the partition may have moved */
	tx_set4(tx, &h->dh_npages, np + n);
	tx_set8(tx, &dir->i_size, (uint64_t)(np + n) << FR_PAGE_SHIFT);
	*first = np;
	return 0;
}

static void write_fresh(struct tx *tx, void *dst, const void *src, size_t len)
{
	pm_copy_nt(dst, src, len);
	tx_mark_fresh(tx);
}

/* Places an entry in a bucket image being built (fresh page). */
static void bucket_add(struct fr_bucket *b, const struct fr_dentry *e)
{
	int s = b->db_count++;
	b->db_ent[s] = *e;
	b->db_fp[s] = dent_fp(e->d_hash);
	b->db_used |= 1ULL << s;
}

/* Builds a large directory from the entries of a full small one. */
static int convert_to_large(ferrite_fs *fs, struct tx *tx, struct fr_inode *dir)
{
	struct slots s;
	if (!slots_of_small(fs, tx, dir, &s))
		return fr_err(-EUCLEAN, "directory to convert has no entry array");
	uint64_t arr = tx_get8(tx, &dir->i_dents);
	struct fr_dentry *ents = malloc(sizeof(*ents) * s.cap);
	struct fr_bucket *img = malloc(sizeof(*img));
	if (!ents || !img) {
		free(ents);
		free(img);
		return -ENOMEM;
	}
	uint32_t n = 0;
	uint64_t used = tx_get8(tx, s.used) & cap_mask(s.cap);
	while (used) {
		int i = __builtin_ctzll(used);
		used &= used - 1;
		tx_get(tx, &s.ent[i], &ents[n++], sizeof(*ents));
	}
	uint32_t g = 1;
	for (;; g++) {
		uint32_t cnt[64] = {0};
		int ok = 1;
		for (uint32_t i = 0; i < n && ok; i++)
			ok = ++cnt[ents[i].d_hash >> (63 - g)] <= DB_SLOTS - DIR_SPLIT_SLACK;
		if (ok || g == 6)
			break;
	}
	uint32_t nb = 1u << g, npages = 2 + nb;
	/* The directory gets a partition; its pages are written before commit. */
	int rc = dp_prepare(fs, tx, dir, 0, (uint64_t)npages << FR_PAGE_SHIFT, 0);
	if (rc)
		goto out;
	union {
		struct fr_dirhdr h;
		uint32_t a[DH_SLOTS_PER_PAGE];
	} *page = (void *)img; /* a page-sized scratch buffer */
	memset(page, 0, FR_PAGE_SIZE);
	page->h.dh_magic = DH_MAGIC;
	page->h.dh_depth = g;
	page->h.dh_npages = npages;
	page->h.dh_narray = 1;
	page->h.dh_array[0] = 1;
	write_fresh(tx, dpage(fs, tx, dir, 0), page, FR_PAGE_SIZE);
	memset(page, 0, FR_PAGE_SIZE);
	for (uint32_t i = 0; i < nb; i++)
		page->a[i] = 2 + i;
	write_fresh(tx, dpage(fs, tx, dir, 1), page, FR_PAGE_SIZE);
	for (uint32_t b = 0; b < nb; b++) {
		memset(img, 0, sizeof(*img));
		img->db_magic = DB_MAGIC;
		img->db_depth = (uint16_t)g;
		img->db_prefix = b;
		for (uint32_t i = 0; i < n; i++)
			if ((ents[i].d_hash >> (63 - g)) == b)
				bucket_add(img, &ents[i]);
		write_fresh(tx, dpage(fs, tx, dir, 2 + b), img, FR_PAGE_SIZE);
	}
	mp_free(&fs->m, tx, (enum mp_id)tx_get1(tx, &dir->i_dclass), arr);
	tx_set8(tx, &dir->i_dents, 0);
	tx_set1(tx, &dir->i_dkind, I_DIR_LARGE);
	tx_set8(tx, &dir->i_size, (uint64_t)npages << FR_PAGE_SHIFT);
out:
	free(ents);
	free(img);
	return rc;
}

static int grow_small(ferrite_fs *fs, struct tx *tx, struct fr_inode *dir)
{
	struct slots old;
	int have = slots_of_small(fs, tx, dir, &old);
	int cls = have ? tx_get1(tx, &dir->i_dclass) : -1;
	if (cls == MP_DENT64)
		return convert_to_large(fs, tx, dir);
	int ncls = cls < 0 ? MP_DENT16 : cls + 1;
	uint64_t noff;
	int rc = mp_alloc(&fs->m, tx, (enum mp_id)ncls, &noff, NULL);
	if (rc)
		return rc;
	/* The new array was free in the committed state (frees are deferred,
	 * tx.h): fill it directly, then link it in the transaction. */
	size_t bytes = mp_entry_size[ncls] - sizeof(struct mp_oob);
	struct fr_darray *img = calloc(1, mp_entry_size[ncls]);
	if (!img)
		return -ENOMEM;
	if (have) {
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
	write_fresh(tx, (char *)nd + sizeof(struct mp_oob), (char *)img + sizeof(struct mp_oob),
		    bytes);
	free(img);
	tx_set8(tx, &dir->i_dents, noff);
	tx_set1(tx, &dir->i_dclass, (uint8_t)ncls);
	return 0;
}

/* Doubles the array of a large directory (global depth + 1). */
static int double_array(ferrite_fs *fs, struct tx *tx, struct fr_inode *dir)
{
	struct fr_dirhdr *h = dhdr(fs, tx, dir);
	uint32_t g = tx_get4(tx, &h->dh_depth);
	uint64_t nslots = 1ULL << (g + 1);
	uint32_t npg = (uint32_t)((nslots + DH_SLOTS_PER_PAGE - 1) / DH_SLOTS_PER_PAGE);
	if (npg > DH_MAX_ARRAY || g + 1 > 62)
		return fr_err(-ENOSPC, "directory has reached its maximum size");
	uint32_t first;
	int rc = grow_pages(fs, tx, dir, npg, &first);
	if (rc)
		return rc;
	h = dhdr(fs, tx, dir);
	uint32_t opg = tx_get4(tx, &h->dh_narray);
	uint32_t *old = malloc((size_t)opg * FR_PAGE_SIZE),
		 *nw = malloc((size_t)npg * FR_PAGE_SIZE);
	if (!old || !nw) {
		free(old);
		free(nw);
		return -ENOMEM;
	}
	for (uint32_t i = 0; i < opg; i++)
		tx_get(tx, dpage(fs, tx, dir, tx_get4(tx, &h->dh_array[i])),
		       old + (size_t)i * DH_SLOTS_PER_PAGE, FR_PAGE_SIZE);
	memset(nw, 0, (size_t)npg * FR_PAGE_SIZE);
	for (uint64_t s = 0; s < nslots; s++)
		nw[s] = old[s >> 1];
	for (uint32_t i = 0; i < npg; i++) {
		write_fresh(tx, dpage(fs, tx, dir, first + i), nw + (size_t)i * DH_SLOTS_PER_PAGE,
			    FR_PAGE_SIZE);
		tx_set4(tx, &h->dh_array[i], first + i);
	}
	free(old);
	free(nw);
	tx_set4(tx, &h->dh_narray, npg);
	tx_set4(tx, &h->dh_depth, g + 1);
	return 0;
}

/* Splits the bucket serving hash v into two (R2). */
static int split_bucket(ferrite_fs *fs, struct tx *tx, struct fr_inode *dir, uint64_t v)
{
	struct fr_dirhdr *h = dhdr(fs, tx, dir);
	struct fr_bucket *b = bucket_for(fs, tx, dir, h, v);
	uint16_t d = tx_get2(tx, &b->db_depth);
	if (d >= 62)
		return fr_err(-ENOSPC, "directory bucket cannot split further");
	if (d == tx_get4(tx, &h->dh_depth)) {
		int rc = double_array(fs, tx, dir);
		if (rc)
			return rc;
	}
	uint32_t npage;
	int rc = grow_pages(fs, tx, dir, 1, &npage);
	if (rc)
		return rc;
	/* Pages may have moved: translate everything again. */
	h = dhdr(fs, tx, dir);
	b = bucket_for(fs, tx, dir, h, v);
	uint32_t g = tx_get4(tx, &h->dh_depth);
	uint64_t prefix = tx_get8(tx, &b->db_prefix);
	struct fr_bucket *nb = calloc(1, sizeof(*nb));
	if (!nb)
		return -ENOMEM;
	nb->db_magic = DB_MAGIC;
	nb->db_depth = (uint16_t)(d + 1);
	nb->db_prefix = (prefix << 1) | 1;
	uint64_t used = tx_get8(tx, &b->db_used), keep = used;
	while (used) {
		int i = __builtin_ctzll(used);
		used &= used - 1;
		struct fr_dentry e;
		tx_get(tx, &b->db_ent[i], &e, sizeof(e));
		if (((e.d_hash >> (62 - d)) & 1) == 0)
			continue;
		bucket_add(nb, &e);
		keep &= ~(1ULL << i);
	}
	write_fresh(tx, dpage(fs, tx, dir, npage), nb, sizeof(*nb));
	free(nb);
	tx_set8(tx, &b->db_used, keep);
	tx_set2(tx, &b->db_count, (uint16_t)__builtin_popcountll(keep));
	tx_set2(tx, &b->db_depth, (uint16_t)(d + 1));
	tx_set8(tx, &b->db_prefix, prefix << 1);
	/* Slots of the upper half of the old prefix now serve the new bucket. */
	uint64_t span = 1ULL << (g - d - 1);
	uint64_t s0 = ((prefix << 1) | 1) << (g - d - 1);
	for (uint64_t s = s0; s < s0 + span; s++) {
		uint32_t *arr =
		    dpage(fs, tx, dir, tx_get4(tx, &h->dh_array[s / DH_SLOTS_PER_PAGE]));
		tx_set4(tx, &arr[s % DH_SLOTS_PER_PAGE], npage);
	}
	return tx_status(tx) ? fr_err(-ENOSPC, "directory split too large") : 0;
}

/* Is bucket b the one serving hash v? */
static int bucket_serves(struct tx *tx, struct fr_bucket *b, uint64_t v)
{
	uint16_t d = tx_get2(tx, &b->db_depth);
	return !d || (v >> (63 - d)) == tx_get8(tx, &b->db_prefix);
}

/* Finds (making room if needed) the slot set that will hold name; returns
 * the stored hash to use (R1). */
static int prepare_slot(ferrite_fs *fs, struct tx *tx, struct fr_inode *dir, const char *name,
			size_t len, uint64_t *hash, struct slots *s)
{
	uint64_t h = fr_name_hash(fs->hash_seed, name, len);
	for (int tries = 0; tries < 64; tries++) {
		if (!is_large(tx, dir)) {
			if (slots_of_small(fs, tx, dir, s) &&
			    tx_get8(tx, &dir->i_nentries) < s->cap)
				return pick_hash(fs, tx, dir, name, len, hash);
			int rc = grow_small(fs, tx, dir);
			if (rc)
				return rc;
			continue;
		}
		/* The first free hash value from h on, looked up bucket by bucket
		 * (almost always: h itself, in one bucket). */
		struct fr_dirhdr *hd = dhdr(fs, tx, dir);
		struct fr_bucket *b = bucket_for(fs, tx, dir, hd, h);
		if (!b)
			return -EUCLEAN;
		uint64_t v = h;
		for (;; v++) {
			if (v - h >= DIR_PROBE || v >= FR_HASH_END)
				return fr_err(-ENOSPC, "too many names with the same hash in one "
						       "directory");
			if (!bucket_serves(tx, b, v))
				b = bucket_for(fs, tx, dir, hd, v);
			slots_of_bucket(b, s);
			if (!slots_has_hash(tx, s, v))
				break;
		}
		if ((tx_get8(tx, &b->db_used) & cap_mask(DB_SLOTS)) != cap_mask(DB_SLOTS)) {
			*hash = v;
			return 0;
		}
		int rc = split_bucket(fs, tx, dir, v);
		if (rc)
			return rc;
	}
	return fr_err(-ENOSPC, "directory index cannot place this name");
}

int dir_insert(ferrite_fs *fs, struct tx *tx, struct fr_inode *dir, const char *name, size_t len,
	       uint64_t ino, unsigned type)
{
	uint64_t hash = 0;
	struct slots s;
	int rc = prepare_slot(fs, tx, dir, name, len, &hash, &s);
	if (rc)
		return rc;
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
		rc = mp_alloc(&fs->m, tx, name_pool_for(len), &noff, NULL);
		if (rc)
			return rc;
		struct fr_name *n = meta_ptr(&fs->m, noff);
		tx_set(tx, n->n_bytes, name, len);
		img.d_flags = D_EXTNAME;
		img.d_name_off = noff;
	}
	int i = __builtin_ctzll(~(tx_get8(tx, s.used) | ~cap_mask(s.cap)));
	slots_put(tx, &s, i, &img);
	if (is_large(tx, dir)) {
		struct fr_bucket *b = (struct fr_bucket *)((uintptr_t)s.used & ~(uintptr_t)4095);
		tx_set2(tx, &b->db_count, (uint16_t)(tx_get2(tx, &b->db_count) + 1));
	}
	tx_set8(tx, &dir->i_nentries, tx_get8(tx, &dir->i_nentries) + 1);
	return tx_status(tx) ? fr_err(-ENOSPC, "operation too large") : 0;
}

void dir_remove(ferrite_fs *fs, struct tx *tx, struct fr_inode *dir, struct fr_dentry *d)
{
	if (tx_get1(tx, &d->d_flags) & D_EXTNAME) {
		uint64_t noff = tx_get8(tx, &d->d_name_off);
		mp_free(&fs->m, tx, name_pool_for(tx_get1(tx, &d->d_namelen)), noff);
	}
	struct slots s;
	if (is_large(tx, dir)) {
		/* The dentry lives in a bucket page: find the page from its address. */
		struct fr_bucket *b = (struct fr_bucket *)((uintptr_t)d & ~(uintptr_t)4095);
		slots_of_bucket(b, &s);
		tx_set2(tx, &b->db_count, (uint16_t)(tx_get2(tx, &b->db_count) - 1));
	} else if (!slots_of_small(fs, tx, dir, &s)) {
		return; /* d came from a lookup in this directory: it has an array */
	}
	int i = (int)(d - s.ent);
	tx_set8(tx, s.used, tx_get8(tx, s.used) & ~(1ULL << i));
	tx_set8(tx, &d->d_ino, 0);
	tx_set8(tx, &dir->i_nentries, tx_get8(tx, &dir->i_nentries) - 1);
}

void dir_retarget(struct tx *tx, struct fr_dentry *d, uint64_t ino, unsigned type)
{
	tx_set8(tx, &d->d_ino, ino);
	tx_set1(tx, &d->d_type, (uint8_t)type);
}

int dir_release(ferrite_fs *fs, struct tx *tx, struct fr_inode *dir)
{
	uint64_t arr = tx_get8(tx, &dir->i_dents);
	if (arr) {
		mp_free(&fs->m, tx, (enum mp_id)tx_get1(tx, &dir->i_dclass), arr);
		tx_set8(tx, &dir->i_dents, 0);
	}
	return 0;
}

/* ---- readdir ------------------------------------------------------------- */

static int cmp_batch(const void *a, const void *b)
{
	uint64_t x = ((const struct dir_batch_ent *)a)->hash,
		 y = ((const struct dir_batch_ent *)b)->hash;
	return x < y ? -1 : x > y;
}

static void take(ferrite_fs *fs, const struct fr_dentry *d, struct dir_batch_ent *e)
{
	e->hash = d->d_hash;
	e->ino = d->d_ino;
	e->type = d->d_type;
	e->len = (uint8_t)dent_name(fs, NULL, d, e->name);
}

/* Emits the sorted candidates with hash >= cookie; returns the count used. */
static int emit(struct dir_batch_ent *tmp, int n, uint64_t cookie, struct dir_batch_ent *out,
		int room, uint64_t *next, uint64_t range_end)
{
	qsort(tmp, (size_t)n, sizeof(*tmp), cmp_batch);
	int k = 0;
	for (int i = 0; i < n; i++) {
		if (tmp[i].hash < cookie)
			continue;
		if (k == room) {
			*next = tmp[i].hash;
			return -k - 1; /* stopped inside the range */
		}
		out[k++] = tmp[i];
	}
	*next = range_end;
	return k;
}

int dir_read(ferrite_fs *fs, struct fr_inode *dir, uint64_t cookie, struct dir_batch_ent *out,
	     int cap, uint64_t *next, struct dir_batch_ent *tmp)
{
	int n = 0;
	*next = FR_HASH_END;
	if (dir->i_dkind != I_DIR_LARGE) {
		struct slots s;
		if (!slots_of_small(fs, NULL, dir, &s))
			return 0;
		uint64_t used = *s.used & cap_mask(s.cap);
		while (used) {
			int i = __builtin_ctzll(used);
			used &= used - 1;
			take(fs, &s.ent[i], &tmp[n++]);
		}
		int k = emit(tmp, n, cookie, out, cap, next, FR_HASH_END);
		return k < 0 ? -k - 1 : k;
	}
	struct fr_dirhdr *h = dhdr(fs, NULL, dir);
	if (!h)
		return -EUCLEAN;
	int total = 0;
	while (cookie < FR_HASH_END && total < cap) {
		struct fr_bucket *b = bucket_for(fs, NULL, dir, h, cookie);
		if (!b)
			return -EUCLEAN;
		uint64_t used = b->db_used;
		n = 0;
		while (used) {
			int i = __builtin_ctzll(used);
			used &= used - 1;
			take(fs, &b->db_ent[i], &tmp[n++]);
		}
		uint16_t d = b->db_depth;
		uint64_t end = d ? ((b->db_prefix + 1) << (63 - d)) : FR_HASH_END;
		if (end > FR_HASH_END)
			end = FR_HASH_END;
		int k = emit(tmp, n, cookie, out + total, cap - total, next, end);
		if (k < 0) {
			total += -k - 1;
			return total;
		}
		total += k;
		cookie = end;
		*next = end;
	}
	return total;
}

/* ---- checking ------------------------------------------------------------ */

static int check_dent(ferrite_fs *fs, const struct fr_dentry *d, uint8_t fp,
		      void (*cb)(void *, uint64_t, const char *, unsigned), void *arg,
		      fr_report_fn report, void *rarg, uint64_t dino)
{
	char name[FS_NAME_MAX + 1];
	if (!d->d_ino || fp != dent_fp(d->d_hash)) {
		fr_report(report, rarg, "directory %llu: entry slot damaged (inode or fingerprint)",
			  (unsigned long long)dino);
		return 1;
	}
	if (d->d_namelen == 0) {
		fr_report(report, rarg, "directory %llu: entry with an empty name",
			  (unsigned long long)dino);
		return 1;
	}
	if (d->d_flags & D_EXTNAME) {
		if (!mp_entry_valid(&fs->m, name_pool_for(d->d_namelen), d->d_name_off)) {
			fr_report(report, rarg, "directory %llu: entry name storage damaged",
				  (unsigned long long)dino);
			return 1;
		}
	} else if (d->d_namelen > D_INLINE_NAME) {
		fr_report(report, rarg, "directory %llu: entry name too long for inline storage",
			  (unsigned long long)dino);
		return 1;
	}
	size_t len = dent_name(fs, NULL, d, name);
	uint64_t h = fr_name_hash(fs->hash_seed, name, len);
	if (d->d_hash < h || d->d_hash >= h + DIR_PROBE || memchr(name, '/', len) ||
	    memchr(name, 0, len)) {
		fr_report(report, rarg, "directory %llu: entry \"%s\" has a wrong hash or name",
			  (unsigned long long)dino, name);
		return 1;
	}
	if (cb)
		cb(arg, d->d_ino, name, d->d_type);
	return 0;
}

int dir_check(ferrite_fs *fs, struct fr_inode *dir,
	      void (*ent_cb)(void *, uint64_t, const char *, unsigned), void *arg,
	      fr_report_fn report, void *rarg)
{
	uint64_t dino = ino_of(fs, dir), count = 0;
	int bad = 0;
	if (dir->i_dkind != I_DIR_LARGE) {
		if (!dir->i_dents) {
			if (dir->i_nentries) {
				fr_report(report, rarg,
					  "directory %llu: entries counted but no array",
					  (unsigned long long)dino);
				bad++;
			}
			return bad;
		}
		if (dir->i_dclass < MP_DENT16 || dir->i_dclass > MP_DENT64 ||
		    !mp_entry_valid(&fs->m, (enum mp_id)dir->i_dclass, dir->i_dents)) {
			fr_report(report, rarg, "directory %llu: entry array damaged",
				  (unsigned long long)dino);
			return bad + 1;
		}
		struct slots s = {0};
		slots_of_small(fs, NULL, dir, &s);
		if (*s.used & ~cap_mask(s.cap)) {
			fr_report(report, rarg, "directory %llu: used mask beyond the array",
				  (unsigned long long)dino);
			bad++;
		}
		uint64_t used = *s.used & cap_mask(s.cap);
		while (used) {
			int i = __builtin_ctzll(used);
			used &= used - 1;
			count++;
			bad += check_dent(fs, &s.ent[i], s.fp[i], ent_cb, arg, report, rarg, dino);
		}
	} else {
		struct fr_dirhdr *h = dhdr(fs, NULL, dir);
		if (!h || h->dh_magic != DH_MAGIC || h->dh_depth > 30 || h->dh_narray == 0 ||
		    h->dh_narray > DH_MAX_ARRAY ||
		    (uint64_t)h->dh_npages << FR_PAGE_SHIFT != dir->i_size) {
			fr_report(report, rarg, "directory %llu: index header damaged",
				  (unsigned long long)dino);
			return bad + 1;
		}
		uint64_t nslots = 1ULL << h->dh_depth;
		if ((nslots + DH_SLOTS_PER_PAGE - 1) / DH_SLOTS_PER_PAGE > h->dh_narray) {
			fr_report(report, rarg, "directory %llu: index array too small",
				  (unsigned long long)dino);
			return bad + 1;
		}
		for (uint64_t s = 0; s < nslots; s++) {
			uint32_t apg = h->dh_array[s / DH_SLOTS_PER_PAGE];
			uint32_t *arr = apg < h->dh_npages ? dpage(fs, NULL, dir, apg) : NULL;
			uint32_t bpg = arr ? arr[s % DH_SLOTS_PER_PAGE] : 0;
			struct fr_bucket *b =
			    bpg && bpg < h->dh_npages ? dpage(fs, NULL, dir, bpg) : NULL;
			if (!b || b->db_magic != DB_MAGIC || b->db_depth > h->dh_depth ||
			    (s >> (h->dh_depth - b->db_depth)) != b->db_prefix) {
				fr_report(report, rarg, "directory %llu: index slot %llu damaged",
					  (unsigned long long)dino, (unsigned long long)s);
				bad++;
				continue;
			}
			/* Visit each bucket once: at the first slot of its prefix. */
			if (s & ((1ULL << (h->dh_depth - b->db_depth)) - 1))
				continue;
			if ((uint64_t)__builtin_popcountll(b->db_used) != b->db_count ||
			    (b->db_used >> DB_SLOTS)) {
				fr_report(report, rarg, "directory %llu: bucket count wrong",
					  (unsigned long long)dino);
				bad++;
			}
			uint64_t used = b->db_used & ((1ULL << DB_SLOTS) - 1);
			while (used) {
				int i = __builtin_ctzll(used);
				used &= used - 1;
				struct fr_dentry *d = &b->db_ent[i];
				count++;
				if (b->db_depth &&
				    (d->d_hash >> (63 - b->db_depth)) != b->db_prefix) {
					fr_report(report, rarg,
						  "directory %llu: entry in the wrong bucket",
						  (unsigned long long)dino);
					bad++;
				}
				bad +=
				    check_dent(fs, d, b->db_fp[i], ent_cb, arg, report, rarg, dino);
			}
		}
	}
	if (count != dir->i_nentries) {
		fr_report(report, rarg, "directory %llu: %llu entries, inode says %llu",
			  (unsigned long long)dino, (unsigned long long)count,
			  (unsigned long long)dir->i_nentries);
		bad++;
	}
	return bad;
}
