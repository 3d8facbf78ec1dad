/*
 * dir_impl.h -- what the directory index (dir.c) and its validation
 * (dir_check.c) share: the checks of each persistent directory structure,
 * the view of a slot set, and page access. Not for other modules: they use
 * the dir_* calls of fs.h.
 *
 * Every *_check() is a pure test of one structure (plus the few values it
 * needs from outside: the directory's i_size, the global depth, the slot
 * being served) returning 0 or -EUCLEAN with a static reason in *why. The
 * library calls them where it first uses a structure; fsck's dir_check()
 * calls the same ones and adds what costs too much at run time (name
 * hashes, fingerprints, counts). dir.c's header says what is checked where.
 */
#ifndef FERRITE_DIR_IMPL_H
#define FERRITE_DIR_IMPL_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "fs/fs.h"

#define DIR_PROBE 8 /* a stored hash is at most this far above the name's hash */

/* The deepest index whose 2^depth slots fit in DH_MAX_ARRAY array pages;
 * double_array stops there (a directory of at most 2^19 buckets). */
#define DH_MAX_DEPTH 19
_Static_assert((1ULL << DH_MAX_DEPTH) <= (uint64_t)DH_MAX_ARRAY * DH_SLOTS_PER_PAGE &&
		   (1ULL << (DH_MAX_DEPTH + 1)) > (uint64_t)DH_MAX_ARRAY * DH_SLOTS_PER_PAGE,
	       "DH_MAX_DEPTH is the largest depth the header's array pages can hold");

/* The fixed fields at the start of a header page and of a bucket page,
 * copied out of PM (or the transaction) once and checked before use. */
struct dir_hdr_head {
	uint64_t magic;
	uint32_t depth, npages, narray, rsvd;
};
_Static_assert(offsetof(struct fr_dirhdr, dh_depth) == 8 &&
		   offsetof(struct fr_dirhdr, dh_npages) == 12 &&
		   offsetof(struct fr_dirhdr, dh_narray) == 16 &&
		   offsetof(struct fr_dirhdr, dh_array) == sizeof(struct dir_hdr_head),
	       "dir_hdr_head mirrors the start of struct fr_dirhdr");

struct dir_bucket_head {
	uint32_t magic;
	uint16_t depth, count;
	uint64_t used, prefix;
};
_Static_assert(offsetof(struct fr_bucket, db_depth) == 4 &&
		   offsetof(struct fr_bucket, db_count) == 6 &&
		   offsetof(struct fr_bucket, db_used) == 8 &&
		   offsetof(struct fr_bucket, db_prefix) == 16 &&
		   offsetof(struct fr_bucket, db_fp) == sizeof(struct dir_bucket_head),
	       "dir_bucket_head mirrors the start of struct fr_bucket");

/* The entries of a small array or of one bucket, with their fingerprints
 * and used mask: every search goes through this view. */
struct slots {
	uint64_t *used;
	uint8_t *fp;
	struct fr_dentry *ent;
	unsigned cap;
};

static inline uint64_t cap_mask(unsigned cap)
{
	return cap >= 64 ? ~0ULL : (1ULL << cap) - 1;
}

static inline unsigned class_cap(int cls)
{
	return cls == MP_DENT16 ? 16 : cls == MP_DENT32 ? 32 : 64;
}

static inline int class_ok(int cls)
{
	return cls >= MP_DENT16 && cls <= MP_DENT64;
}

static inline uint8_t rd1(struct tx *tx, const void *p)
{
	return tx ? tx_get1(tx, p) : *(const volatile uint8_t *)p;
}

/* Copies a PM structure of len bytes (through tx if there is one). */
static inline void dir_load(struct tx *tx, const void *pm, void *dst, size_t len)
{
	if (tx)
		tx_get(tx, pm, dst, len);
	else
		memcpy(dst, pm, len);
}

/* [lo, hi): the hashes a bucket of local depth d and prefix p serves;
 * the caller has checked p < 2^d and d <= DH_MAX_DEPTH, so nothing wraps. */
static inline void bucket_range(const struct dir_bucket_head *b, uint64_t *lo, uint64_t *hi)
{
	unsigned sh = 63u - b->depth;
	*lo = b->prefix << sh;
	*hi = (b->prefix + 1) << sh;
	if (*hi > FR_HASH_END)
		*hi = FR_HASH_END;
}

/* The name pool holding a name of len bytes. */
enum mp_id dir_name_pool(size_t len);

/* ---- checks (dir_check.c) ------------------------------------------------ */

/* Is off a live entry of metadata pool id, wholly inside its block? Reads
 * through tx, so an entry this transaction allocated counts as live. */
int dir_pool_entry_ok(ferrite_fs *fs, struct tx *tx, enum mp_id id, uint64_t off);
/* A dentry in a used slot: stored hash, name length and storage (a live
 * name-pool entry of the right class), flags, type, an inode number inside
 * the pool; not that the inode is live (dent_ino_check) nor the bytes of
 * the name (dname_check). */
int dent_check(ferrite_fs *fs, struct tx *tx, const struct fr_dentry *d, const char **why);
/* d_ino names a live inode (ino_valid). */
int dent_ino_check(ferrite_fs *fs, const struct fr_dentry *d, const char **why);
/* A name as stored: 1..255 bytes, no '/' or NUL, not "." or "..". */
int dname_check(const char *name, size_t len, const char **why);
/* A small directory's array: class, a live entry of that class, the used
 * mask within the class and agreeing with nentries. arr == 0: no array. */
int darray_check(ferrite_fs *fs, struct tx *tx, int cls, uint64_t arr, uint64_t nentries,
		 const char **why);
/* A large directory's header: magic, depth <= DH_MAX_DEPTH, array pages for
 * 2^depth slots, page count agreeing with the directory's size. */
int dirhdr_check(const struct dir_hdr_head *h, uint64_t i_size, const char **why);
/* Is page index idx one a header h can point to (not the header itself)? */
static inline int dir_page_ok(const struct dir_hdr_head *h, uint32_t idx)
{
	return idx >= 1 && idx < h->npages;
}
/* A bucket reached through slot `slot` of an index of global depth g: magic,
 * local depth <= g, its prefix the one of that slot (so it serves the slot's
 * hashes: readdir always advances), used mask and count. */
int bucket_check(const struct dir_bucket_head *b, uint32_t g, uint64_t slot, const char **why);

/* ---- access (dir.c) ------------------------------------------------------ */

/* Records "directory N: <what> (run `ferrite fsck`)" and returns -EUCLEAN. */
int dir_damaged(ferrite_fs *fs, struct fr_inode *dir, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Page idx of a large directory (NULL if not backed). */
void *dir_page(ferrite_fs *fs, struct tx *tx, struct fr_inode *dir, uint64_t idx);

#endif
