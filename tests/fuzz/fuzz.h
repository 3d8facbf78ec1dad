/*
 * fuzz.h -- the structure-aware pool fuzzer (tests/fuzz): builds a populated
 * pool the same way every time, lists every persistent structure in it, and
 * damages one structure per trial (by field, by byte flips or by a torn
 * 8-byte store), then checks that the library, fsck and the tools neither
 * crash, hang nor call a damaged pool clean while it shows wrong data.
 *
 * A damage is described by structure, not by byte offset ("field i_level of
 * the 3rd inode"), so a regression corpus entry keeps meaning the same thing
 * when the pool's layout shifts a little.
 */
#ifndef FERRITE_FUZZ_H
#define FERRITE_FUZZ_H

#include <stddef.h>
#include <stdint.h>

/* Kinds of persistent structure the fuzzer knows. */
enum fz_kind {
	FZ_SUPER,
	FZ_BACKUP_SUPER,
	FZ_SPACE_HDR,
	FZ_STATE,
	FZ_MP_HEAD,
	FZ_LOG_SLOT,
	FZ_LOG_ENTRY, /* a synthetic live entry, checksum made valid */
	FZ_BITMAP,    /* a word range of a buddy bitmap or summary */
	FZ_PPT_DIR,   /* a PPT directory page (root, PUD or PMD) */
	FZ_PTABLE,    /* a page table page (pte array, header fields) */
	FZ_MP_BLOCK,
	FZ_INODE,
	FZ_DARRAY,  /* small directory array header */
	FZ_DENTRY,  /* one dentry (small or large directory) */
	FZ_NAME,    /* a name-pool entry */
	FZ_DIRHDR,  /* large directory header page */
	FZ_DARRPAGE, /* large directory array page */
	FZ_BUCKET,  /* large directory bucket header */
	FZ_XBLOCK,  /* extended attribute block */
	FZ_FREE_ENTRY, /* a free metadata-pool entry (free list link) */
	FZ_NKINDS
};

struct fz_obj {
	int kind;
	uint64_t off; /* pool offset */
	uint32_t len;
};

struct fz_field {
	const char *name;
	uint32_t off, size;
};

/* One damage: bytes written at obj.off + at. fix: recompute the checksum the
 * structure carries (superblock, xattr block, log entry) afterwards. */
#define FZ_MAX_EDIT 512
struct fz_edit {
	int kind;
	uint32_t index; /* which structure of that kind */
	uint32_t at, len;
	int fix;
	uint8_t bytes[FZ_MAX_EDIT];
};

struct fz_map {
	struct fz_obj *objs;
	size_t n, cap;
	size_t first[FZ_NKINDS], count[FZ_NKINDS]; /* objs sorted by kind */
	uint64_t pool_size, data_lo, data_hi;
};

const char *fz_kind_name(int kind);
int fz_kind_by_name(const char *name);
const struct fz_field *fz_fields(int kind, size_t *n);

/* fuzz_build.c: formats and populates pool (deterministic layout); leaves a
 * copy of the image taken while a file was open and unlinked (as a crash
 * leaves it: mount must release the orphan) in *orphan, and one taken after
 * unmount in *img. */
int fz_build(const char *pool, uint64_t size, uint8_t **img, uint8_t **orphan, size_t *len);
/* fuzz_map.c: lists the structures of an image (read from the image). */
int fz_map_image(const uint8_t *img, size_t len, struct fz_map *map);
void fz_map_free(struct fz_map *map);
const struct fz_obj *fz_obj_get(const struct fz_map *map, int kind, uint32_t index);
/* Pool offset of the PPT window entry that maps vspace offset v (0: none). */
uint64_t fz_window_entry_off(const uint8_t *img, size_t len, uint64_t v);

/* fuzz_mutate.c */
struct fz_rng {
	uint64_t s;
};
uint64_t fz_rand(struct fz_rng *r);
/* Chooses a damage; returns the number of edits (1..4). */
int fz_mutate(const struct fz_map *map, const uint8_t *img, uint64_t seed, struct fz_edit *ed,
	      int cap);
/* Applies edits to a copy of the image; -1 if an edit names no structure. */
int fz_apply(const struct fz_map *map, uint8_t *img, size_t len, const struct fz_edit *ed, int n);
void fz_edit_format(const struct fz_edit *e, char *buf, size_t cap);
/* Can fsck be expected to see this damage? No for changes to fields the
 * format keeps no redundancy for (times, owners, permission bits, sizes,
 * inline link targets), a crafted log entry (a valid transaction) and a
 * crafted attribute block with a valid checksum: those make a consistent pool
 * that differs from the original, which is not "clean but wrong". */
int fz_verifiable(const struct fz_map *map, const uint8_t *before, const uint8_t *after,
		  const struct fz_edit *ed, int n);
int fz_edit_parse(const char *line, struct fz_edit *e);

/* fuzz_check.c: walks a mounted pool and summarises what fsck can vouch for. */
struct fz_walk {
	int no_data; /* set by the caller: list, stat and read links only */
	char **files; /* set by the caller: collect regular files' paths */
	int nfiles, files_cap;
	uint64_t digest;
	uint64_t entries;
	int errors;	   /* calls that failed */
	int eunclean;	   /* of them, -EUCLEAN */
	char first_err[256];
};
struct ferrite_fs;
void fz_walk_tree(struct ferrite_fs *fs, struct fz_walk *w);
/* A few changes that make the library allocate and free on the damaged pool. */
void fz_scribble(struct ferrite_fs *fs, uint64_t seed);

/* fuzz_cli.c: the damaged pool through the ferrite command; 0 if it held.
 * unchanged() says whether the pool file still holds the damaged image. */
int fz_cli_trial(const char *ferrite, const char *pool, unsigned timeout, char **files, int nfiles,
		 int (*unchanged)(void), char *why, size_t cap);

#endif
