/*
 * dir_check.c -- validation of the directory structures: one *_check() per
 * persistent structure (dentry, name, small array, index header, bucket),
 * shared by the library (dir.c, at first use) and fsck (dir_check below,
 * which walks a whole directory and adds the checks too costly at run time:
 * each name's hash, fingerprints, entry counts, R2 for every slot).
 * Format: fs_format.h, docs/format.md#directories.
 *
 * The checks read only the structure they are given (and, for pool
 * entries, the block header the entry sits in); every value they accept is
 * safe to use as the offset, length, shift or index it is (dir_impl.h).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "fs/dir_impl.h"

enum mp_id dir_name_pool(size_t len)
{
	if (len + sizeof(struct mp_oob) <= 64)
		return MP_NAME64;
	if (len + sizeof(struct mp_oob) <= 128)
		return MP_NAME128;
	if (len + sizeof(struct mp_oob) <= 192)
		return MP_NAME192;
	return MP_NAME272;
}

int dir_pool_entry_ok(ferrite_fs *fs, struct tx *tx, enum mp_id id, uint64_t off)
{
	/* a live entry of pool id, as tx sees it: the whole entry lies inside
	 * its block, since its index is below the block's entry count */
	return mp_entry_valid_tx(&fs->m, tx, id, off);
}

static int fail(const char **why, const char *reason)
{
	*why = reason;
	return -EUCLEAN;
}

/* DT_FIFO, DT_CHR, DT_DIR, DT_BLK, DT_REG, DT_LNK, DT_SOCK: the type bits of
 * a mode, which is what the namespace stores (namei.c). */
#define DT_VALID_MASK                                                                              \
	((1u << 1) | (1u << 2) | (1u << 4) | (1u << 6) | (1u << 8) | (1u << 10) | (1u << 12))

int dent_check(ferrite_fs *fs, struct tx *tx, const struct fr_dentry *d, const char **why)
{
	if (d->d_hash < FR_HASH_MIN || d->d_hash >= FR_HASH_END)
		return fail(why, "entry's stored hash is out of range");
	if (d->d_namelen == 0)
		return fail(why, "entry with an empty name");
	if (d->d_flags & ~D_EXTNAME)
		return fail(why, "entry has unknown flags");
	if (d->d_type >= 16 || !(DT_VALID_MASK & (1u << d->d_type)))
		return fail(why, "entry has an unknown file type");
	if (!d->d_ino || d->d_ino >= fs->m.pool.size >> INO_SHIFT)
		return fail(why, "entry's inode number is outside the pool");
	if (!(d->d_flags & D_EXTNAME)) {
		if (d->d_namelen > D_INLINE_NAME)
			return fail(why, "entry name longer than its inline storage");
		return 0;
	}
	if (d->d_namelen <= D_INLINE_NAME)
		return fail(why, "short entry name stored in a name pool");
	if (!dir_pool_entry_ok(fs, tx, dir_name_pool(d->d_namelen), d->d_name_off))
		return fail(why, "entry name storage is not a live name-pool entry");
	return 0;
}

int dent_ino_check(ferrite_fs *fs, const struct fr_dentry *d, const char **why)
{
	return ino_valid(fs, d->d_ino) ? 0 : fail(why, "entry names an inode that is not live");
}

int dname_check(const char *name, size_t len, const char **why)
{
	if (len == 0 || len > FS_NAME_MAX)
		return fail(why, "entry name has a bad length");
	unsigned bad = 0; /* one pass, no early exit: names are short */
	for (size_t i = 0; i < len; i++)
		bad |= (name[i] == '/') | (name[i] == 0);
	if (bad)
		return fail(why, "entry name contains '/' or NUL");
	if (name[0] == '.' && (len == 1 || (len == 2 && name[1] == '.')))
		return fail(why, "entry named \".\" or \"..\"");
	return 0;
}

int darray_check(ferrite_fs *fs, struct tx *tx, int cls, uint64_t arr, uint64_t nentries,
		 const char **why)
{
	if (!arr)
		return nentries ? fail(why, "entries counted but no entry array") : 0;
	if (!class_ok(cls))
		return fail(why, "entry array class out of range");
	if (!dir_pool_entry_ok(fs, tx, (enum mp_id)cls, arr))
		return fail(why, "entry array is not a live dentry-pool entry of its class");
	const struct fr_darray *da = meta_ptr(&fs->m, arr);
	uint64_t used = rd8(tx, &da->da_used);
	if (used & ~cap_mask(class_cap(cls)))
		return fail(why, "used mask beyond the array");
	if ((uint64_t)__builtin_popcountll(used) != nentries)
		return fail(why, "entry count differs from the used mask");
	return 0;
}

int dirhdr_check(const struct dir_hdr_head *h, uint64_t i_size, const char **why)
{
	if (h->magic != DH_MAGIC)
		return fail(why, "index header has a bad magic");
	if (h->depth > DH_MAX_DEPTH)
		return fail(why, "index depth too large");
	if (h->narray == 0 || h->narray > DH_MAX_ARRAY ||
	    ((1ULL << h->depth) + DH_SLOTS_PER_PAGE - 1) / DH_SLOTS_PER_PAGE > h->narray)
		return fail(why, "index array page count does not fit its depth");
	if ((uint64_t)h->narray + 2 > h->npages || (uint64_t)h->npages << FR_PAGE_SHIFT != i_size)
		return fail(why, "index page count does not match the directory size");
	return 0;
}

int bucket_check(const struct dir_bucket_head *b, uint32_t g, uint64_t slot, const char **why)
{
	if (b->magic != DB_MAGIC)
		return fail(why, "bad magic");
	if (b->depth > g)
		return fail(why, "local depth exceeds the index depth");
	if (b->prefix != slot >> (g - b->depth))
		return fail(why, "prefix does not match the slots pointing to it");
	if (b->used & ~cap_mask(DB_SLOTS))
		return fail(why, "used mask beyond the bucket");
	if (b->count != (uint64_t)__builtin_popcountll(b->used))
		return fail(why, "entry count differs from the used mask");
	return 0;
}

/* ---- fsck ------------------------------------------------------------------ */

struct dcheck {
	ferrite_fs *fs;
	uint64_t dino;
	void (*cb)(void *, uint64_t, const char *, unsigned);
	void *arg;
	fr_report_fn report;
	void *rarg;
	int bad;
	uint64_t count;
	int count_reported; /* darray_check already said the count is wrong */
};

#define BAD(c, ...)                                                                                \
	do {                                                                                       \
		fr_report((c)->report, (c)->rarg, __VA_ARGS__);                                    \
		(c)->bad++;                                                                        \
	} while (0)

/* One used slot: everything dent_check does, the inode, the name's bytes and
 * hash (R1: within DIR_PROBE of it), the fingerprint, and for a bucket
 * entry that it lies in the bucket's range [lo, hi). */
static void check_slot(struct dcheck *c, const struct fr_dentry *pd, uint8_t fp, uint64_t lo,
		       uint64_t hi)
{
	unsigned long long dino = (unsigned long long)c->dino;
	struct fr_dentry d;
	memcpy(&d, pd, sizeof(d));
	c->count++;
	const char *why;
	if (dent_check(c->fs, NULL, &d, &why) || dent_ino_check(c->fs, &d, &why)) {
		BAD(c, "directory %llu: %s", dino, why);
		return;
	}
	char name[FS_NAME_MAX + 1];
	const char *src = d.d_flags & D_EXTNAME
			      ? ((const struct fr_name *)meta_ptr(&c->fs->m, d.d_name_off))->n_bytes
			      : d.d_name;
	memcpy(name, src, d.d_namelen);
	name[d.d_namelen] = 0;
	if (dname_check(name, d.d_namelen, &why)) {
		/* print what is safe to print: up to the first NUL */
		BAD(c, "directory %llu: %s (\"%s\")", dino, why, name);
		return;
	}
	uint64_t h = fr_name_hash(c->fs->hash_seed, name, d.d_namelen);
	if (d.d_hash < h || d.d_hash >= h + DIR_PROBE) {
		BAD(c, "directory %llu: entry \"%s\" has a wrong hash", dino, name);
		return;
	}
	if (fp != dent_fp(d.d_hash)) {
		BAD(c, "directory %llu: entry \"%s\" has a wrong fingerprint", dino, name);
		return;
	}
	if (d.d_hash < lo || d.d_hash >= hi) {
		BAD(c, "directory %llu: entry \"%s\" in the wrong bucket", dino, name);
		return;
	}
	if (c->cb)
		c->cb(c->arg, d.d_ino, name, d.d_type);
}

static void check_small(struct dcheck *c, struct fr_inode *dir)
{
	unsigned long long dino = (unsigned long long)c->dino;
	const char *why;
	uint64_t n = dir->i_nentries;
	if (darray_check(c->fs, NULL, dir->i_dclass, dir->i_dents, n, &why)) {
		BAD(c, "directory %llu: %s", dino, why);
		c->count_reported = 1;
		/* with a sound array, the count is what is wrong: check entries */
		if (!dir->i_dents || !class_ok(dir->i_dclass) ||
		    !dir_pool_entry_ok(c->fs, NULL, (enum mp_id)dir->i_dclass, dir->i_dents))
			return;
	}
	if (!dir->i_dents)
		return;
	struct fr_darray *da = meta_ptr(&c->fs->m, dir->i_dents);
	uint64_t used = da->da_used & cap_mask(class_cap(dir->i_dclass));
	while (used) {
		int i = __builtin_ctzll(used);
		used &= used - 1;
		check_slot(c, &da->da_ent[i], da->da_fp[i], FR_HASH_MIN, FR_HASH_END);
	}
}

/* The page array slot s names (0 if its array page is out of range). */
static uint32_t slot_page(struct dcheck *c, struct fr_inode *dir, const struct fr_dirhdr *h,
			  const struct dir_hdr_head *hh, uint64_t s)
{
	uint32_t apg = h->dh_array[s / DH_SLOTS_PER_PAGE];
	uint32_t *arr = dir_page_ok(hh, apg) ? dir_page(c->fs, NULL, dir, apg) : NULL;
	return arr ? arr[s % DH_SLOTS_PER_PAGE] : 0;
}

static void check_large(struct dcheck *c, struct fr_inode *dir)
{
	unsigned long long dino = (unsigned long long)c->dino;
	const char *why;
	if (dir->i_dents)
		BAD(c, "directory %llu: large directory still has an entry array", dino);
	struct fr_dirhdr *h = dir_page(c->fs, NULL, dir, 0);
	if (!h) {
		BAD(c, "directory %llu: index header page missing", dino);
		return;
	}
	struct dir_hdr_head hh;
	memcpy(&hh, h, sizeof(hh));
	if (dirhdr_check(&hh, dir->i_size, &why)) {
		BAD(c, "directory %llu: %s", dino, why);
		return;
	}
	uint32_t g = hh.depth;
	uint64_t nslots = 1ULL << g, reported = 0;
	for (uint64_t s = 0; s < nslots; s++) {
		uint32_t apg = h->dh_array[s / DH_SLOTS_PER_PAGE];
		uint32_t *arr = dir_page_ok(&hh, apg) ? dir_page(c->fs, NULL, dir, apg) : NULL;
		uint32_t bpg = arr ? arr[s % DH_SLOTS_PER_PAGE] : 0;
		struct fr_bucket *b =
		    dir_page_ok(&hh, bpg) ? dir_page(c->fs, NULL, dir, bpg) : NULL;
		struct dir_bucket_head bh;
		if (b)
			memcpy(&bh, b, sizeof(bh));
		why = !arr ? "array page out of range" : !b ? "bucket page out of range" : NULL;
		if (why || bucket_check(&bh, g, s, &why)) {
			c->bad++;
			if (reported++ < 8)
				fr_report(c->report, c->rarg,
					  "directory %llu: index slot %llu (bucket page %u): %s",
					  dino, (unsigned long long)s, bpg, why);
			continue;
		}
		/* Visit each bucket once: at the first slot of its prefix. The
		 * other slots of the prefix must name the same page (R2). */
		uint64_t first = s & ~((1ULL << (g - bh.depth)) - 1);
		if (s != first) {
			if (slot_page(c, dir, h, &hh, first) != bpg) {
				c->bad++;
				if (reported++ < 8)
					fr_report(
					    c->report, c->rarg,
					    "directory %llu: index slot %llu names bucket page "
					    "%u, its prefix's first slot another",
					    dino, (unsigned long long)s, bpg);
			}
			continue;
		}
		uint64_t lo, hi, used = bh.used;
		bucket_range(&bh, &lo, &hi);
		while (used) {
			int i = __builtin_ctzll(used);
			used &= used - 1;
			check_slot(c, &b->db_ent[i], b->db_fp[i], lo, hi);
		}
	}
	if (reported > 8)
		fr_report(c->report, c->rarg, "directory %llu: %llu more damaged index slots", dino,
			  (unsigned long long)(reported - 8));
}

int dir_check(ferrite_fs *fs, struct fr_inode *dir,
	      void (*ent_cb)(void *, uint64_t, const char *, unsigned), void *arg,
	      fr_report_fn report, void *rarg)
{
	struct dcheck c = {fs, ino_of(fs, dir), ent_cb, arg, report, rarg, 0, 0, 0};
	unsigned long long dino = (unsigned long long)c.dino;
	if (dir->i_dkind == I_DIR_SMALL) {
		check_small(&c, dir);
	} else if (dir->i_dkind == I_DIR_LARGE) {
		check_large(&c, dir);
	} else {
		BAD(&c, "directory %llu: unknown directory kind %u", dino, dir->i_dkind);
		return c.bad;
	}
	if (!c.count_reported && c.count != dir->i_nentries)
		BAD(&c, "directory %llu: %llu entries, inode says %llu", dino,
		    (unsigned long long)c.count, (unsigned long long)dir->i_nentries);
	return c.bad;
}
