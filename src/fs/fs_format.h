/*
 * fs_format.h -- on-PM structures of the fs layer: inodes, dentries, small
 * directory arrays (in metadata pools) and large hashed directories (in the
 * directory's own partition). Little-endian, fixed width; docs/format.md.
 *
 * Invariants FF1-FF10 below (cited as "fs_format.h FFn"; inode.c's I, dir.c's
 * R, xattr.c's X and data.c's D are those files' own) say what a valid pool
 * holds and which check refuses anything else: the run-time checks guard
 * every use of a value as an offset, index or length (-EUCLEAN, "run fsck");
 * fsck (fsck.c) adds the relations too costly to test on every call.
 */
#ifndef FERRITE_FS_FORMAT_H
#define FERRITE_FS_FORMAT_H

#include <stddef.h>
#include <stdint.h>

#include "meta/meta_format.h"

#define I_NO_PART    0xff
#define I_INLINE_MAX 96 /* symlink targets up to this length live in the inode */
#define I_DIR_SMALL  0
#define I_DIR_LARGE  1
#define I_F_ORPHAN   1u /* i_flags: on the orphan list */
#define I_F_NULL     2u /* i_flags: a null file, on the null list (format 5) */

/* 256 bytes, an entry of the inode pool. Line 1 (bytes 64-127) holds what a
 * write changes (size and times) so an append flushes one line.
 * FF1 (ino_check, inode.c: at first use through ino_get_checked, the root at
 *     mount, every inode in fsck) a known file type; i_level I_NO_PART or
 *     below sph_top_level, and then i_part aligned to that level's size and
 *     inside the vspace; i_size no larger than the partition; FIFOs, sockets
 *     and devices have neither partition nor size; a regular file with a
 *     size has a partition; a symlink's size is 1..FS_PATH_MAX - 1, beyond
 *     I_INLINE_MAX with a partition; a directory is I_DIR_SMALL without a
 *     partition or I_DIR_LARGE with a partition and a non-zero size in whole
 *     pages. Releasing an orphan needs only the type and partition checks
 *     (ino_check_release): a crash may have left it half released.
 * FF2 (fsck.c) the partition is allocated at i_level and owned by this inode
 *     alone; i_blocks equals the pages the PPT backs in it (check_blocks,
 *     repaired); below L3 no page under i_size is a hole (data.c D2); i_nlink
 *     is its names, 2 + subdirectories for a directory (namei.c N1,
 *     repaired); an inode no name reaches is an orphan with i_nlink 0, or
 *     a null file (fs/nullfile.c N1). */
struct fr_inode {
	struct mp_oob i_oob; /* 0 */
	uint32_t i_mode;     /* 16 */
	uint32_t i_nlink;
	uint32_t i_uid;
	uint32_t i_gid;
	uint64_t i_part;  /* 32: vspace offset of the data partition */
	uint8_t i_level;  /* 40: partition level, I_NO_PART if none */
	uint8_t i_dkind;  /* directories: I_DIR_SMALL / I_DIR_LARGE */
	uint8_t i_dclass; /* small directories: metadata pool of the array */
	uint8_t i_rsvd0;
	uint32_t i_flags;      /* I_F_ORPHAN (inode.c I1), I_F_NULL (nullfile.c N1) */
	uint64_t i_generation; /* 48: unique per allocation of this inode (inode.c I2) */
	uint64_t i_blocks;     /* 56: pages backing the data */
	uint64_t i_size;       /* 64 */
	int64_t i_mtime_sec;   /* 72 */
	int64_t i_ctime_sec;   /* 80 */
	int64_t i_atime_sec;   /* 88 */
	uint32_t i_mtime_nsec; /* 96 */
	uint32_t i_ctime_nsec;
	uint32_t i_atime_nsec;
	uint32_t i_btime_nsec;
	int64_t i_btime_sec; /* 112 */
	/* 120: directories: the directory holding its name (namei.c N2,
	 * checked by fsck); the root names itself, and ".." of the root is
	 * never looked up through it. Not covered by FF1. */
	uint64_t i_parent;
	uint64_t i_dents;	     /* 128: small directories: pool offset of the array (FF8) */
	uint64_t i_nentries;	     /* 136: directories: entries besides . and .. (FF8, fsck) */
	uint64_t i_orphan_next;	     /* 144: next inode on the orphan or null list, 0 = last */
	uint64_t i_xattr;	     /* 152: pool offset of the xattr block, 0 = none (FF3) */
	char i_inline[I_INLINE_MAX]; /* 160: short symlink target; devices: dev_t */
};
_Static_assert(sizeof(struct fr_inode) == 256, "inode size");
_Static_assert(offsetof(struct fr_inode, i_size) == 64 &&
		   offsetof(struct fr_inode, i_parent) == 120,
	       "size and times share a cache line");

/* Extended attributes of an inode (format 2; i_xattr was the always-zero
 * i_replica in format 1): one buddy block of 2^xb_order pages, written before
 * it becomes reachable and never changed afterwards -- a change writes a new
 * block and swaps i_xattr in the same transaction that frees the old one
 * (the commit point). Format 1 pools refuse new attributes (xattr.c).
 * FF3 at every use (xb_at, xattr.c): i_xattr page-aligned in the data area,
 *     xb_magic, xb_order <= XB_MAX_ORDER, the whole block inside the data
 *     area, xb_bytes within it after this header. fsck only (xattr_check):
 *     xb_owner is the inode, xb_csum is the crc32c of the xb_bytes after
 *     the header (the header itself is not covered), the records fill
 *     exactly xb_bytes and number xb_count; fsck counts the block's pages
 *     as owned (xattr.c X1). */
#define XB_MAGIC     0x4b4c425254415846ULL /* "FXATRBLK" */
#define XB_MAX_ORDER 9			   /* 2 MiB, the largest buddy block */
struct fr_xblock {
	uint64_t xb_magic;
	uint64_t xb_owner; /* inode number (fsck) */
	uint32_t xb_order; /* the block is 4 KiB << xb_order */
	uint32_t xb_count; /* records */
	uint32_t xb_bytes; /* bytes of records after this header */
	uint32_t xb_csum;  /* crc32c of those bytes */
	uint64_t xb_rsvd[4];
};
_Static_assert(sizeof(struct fr_xblock) == 64, "xattr block header is one line");

/* A record: the full name ("user.x", no NUL), then the value, padded to 8.
 * FF4 a reader stops at a record that would run past xb_bytes (xrec_next);
 *     fsck (xattr_check) wants xr_nlen > 0, a user.* or trusted.* name with
 *     something after the prefix and no NUL, xr_vlen <= 64 KiB. */
struct fr_xrec {
	uint32_t xr_vlen;
	uint8_t xr_nlen;
	uint8_t xr_rsvd[3];
	char xr_data[];
};
_Static_assert(sizeof(struct fr_xrec) == 8, "xattr record header");

/* Inode numbers are the pool offset of the inode divided by 64.
 * FF5 a valid number is non-zero, inside the pool and names a LIVE entry of
 *     the inode pool (ino_valid, inode.c): tested for d_ino before a lookup
 *     returns it, for st_root_ino and each orphan at mount, and by fsck. */
#define INO_SHIFT 6

/* FF6 a dentry in a used slot (dent_check, dir_check.c, before its name is
 *     read): d_hash in [FR_HASH_MIN, FR_HASH_END); d_namelen > 0; no flag
 *     but D_EXTNAME; d_type a DT_* of a file type; d_ino non-zero and inside
 *     the pool, and a live inode before a lookup returns it (dent_ino_check).
 *     Inline names are at most D_INLINE_NAME bytes; longer ones (and only
 *     they) are a LIVE entry of the name pool for their length
 *     (dir_name_pool). fsck adds: the name's bytes (dname_check: no '/' or
 *     NUL, not "." or ".."), d_hash within DIR_PROBE above the keyed hash of
 *     the name, d_type that of the inode's mode. The slot mask, not d_ino,
 *     says whether a slot is used. */
#define D_INLINE_NAME 40
#define D_EXTNAME     1 /* d_name_off points to a name-pool entry */
struct fr_dentry {
	uint64_t d_ino; /* 0 = free slot (written on removal; da_used/db_used decide) */
	uint64_t d_hash;
	uint8_t d_namelen;
	uint8_t d_type;
	uint8_t d_flags;
	uint8_t d_rsvd[5];
	union {
		char d_name[D_INLINE_NAME];
		uint64_t d_name_off;
	};
};
_Static_assert(sizeof(struct fr_dentry) == 64, "dentry is one line (SPFS)");

/* Name-pool entry: oob, then the bytes of the name.
 * FF7 each LIVE entry is the name of one dentry; fsck checks the balance
 *     only: per name pool, the dentries naming one against its LIVE entries
 *     (count_names, fsck.c). */
struct fr_name {
	struct mp_oob n_oob;
	char n_bytes[];
};

/* A one-byte fingerprint of each entry's stored hash (bits 8-15) sits in
 * the header of its array or bucket, so a lookup reads one or two cache
 * lines to find its few candidates instead of every dentry. */
static inline uint8_t dent_fp(uint64_t hash)
{
	return (uint8_t)(hash >> 8);
}

/* Small directory: a metadata-pool entry of 16, 32 or 64 dentries.
 * FF8 (darray_check, dir_check.c, before the array is touched) i_dents 0
 *     only with i_nentries 0; else i_dclass MP_DENT16..MP_DENT64 and
 *     i_dents a LIVE entry of that pool, da_used within its 16, 32 or 64
 *     slots with popcount i_nentries. fsck adds: da_fp[i] == dent_fp of
 *     slot i's d_hash, and each dentry pool's LIVE entries match the
 *     directories using them. */
struct fr_darray {
	struct mp_oob da_oob;
	uint8_t da_fp[64];
	uint64_t da_used; /* bit i: da_ent[i] holds an entry */
	uint8_t da_pad[40];
	struct fr_dentry da_ent[];
};
_Static_assert(offsetof(struct fr_darray, da_ent) == 128, "array header is two lines");

/* Large directory: extendible hashing inside the directory's partition.
 * Page 0 is the header; array pages map hash prefixes to bucket pages.
 * FF9 (dirhdr_check, dir_check.c, once per operation) dh_magic; dh_depth <=
 *     DH_MAX_DEPTH; 1 <= dh_narray <= DH_MAX_ARRAY, enough array pages for
 *     2^dh_depth slots; dh_narray + 2 <= dh_npages and dh_npages pages ==
 *     i_size. The dh_array[] pages, and the u32 bucket page index in each
 *     array slot, lie in [1, dh_npages) (dir_page_ok, where followed). fsck
 *     wants i_dents 0 (no leftover array). */
#define DH_MAGIC	  0x5249444847524c46ULL /* "FLRGHDIR" */
#define DH_MAX_ARRAY	  1018
#define DH_SLOTS_PER_PAGE 1024
struct fr_dirhdr {
	uint64_t dh_magic;
	uint32_t dh_depth;  /* global depth: slot = hash >> (63 - depth) */
	uint32_t dh_npages; /* pages in use in the partition */
	uint32_t dh_narray; /* array pages in use */
	uint32_t dh_rsvd;
	uint32_t dh_array[DH_MAX_ARRAY]; /* page index of each array page */
};
_Static_assert(sizeof(struct fr_dirhdr) <= 4096, "dir header is a page");

/* FF10 a bucket reached through slot s of an index of depth g (bucket_check,
 *      dir_check.c): db_magic; db_depth <= g; db_prefix == s >> (g -
 *      db_depth), so it serves s's hashes; db_used within DB_SLOTS bits;
 *      db_count its popcount. fsck adds: every slot of the prefix names the
 *      same page (dir.c R2), each entry's d_hash lies in the prefix's range
 *      and db_fp[i] == dent_fp of it. */
#define DB_MAGIC 0x544b4342u /* "BCKT" */
#define DB_SLOTS 62
struct fr_bucket {
	uint32_t db_magic;
	uint16_t db_depth; /* local depth */
	uint16_t db_count;
	uint64_t db_used;   /* bit i: db_ent[i] holds an entry */
	uint64_t db_prefix; /* hash prefix (db_depth bits) served by this bucket */
	uint8_t db_fp[64];  /* fingerprints of the entries (dent_fp) */
	uint8_t db_pad[40];
	struct fr_dentry db_ent[DB_SLOTS];
};
_Static_assert(sizeof(struct fr_bucket) == 4096, "bucket is a page");

#endif
