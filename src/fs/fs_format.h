/*
 * fs_format.h -- on-PM structures of the fs layer: inodes, dentries, small
 * directory arrays (in metadata pools) and large hashed directories (in the
 * directory's own partition). Little-endian, fixed width; docs/format.md.
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

/* 256 bytes, an entry of the inode pool. Line 1 (bytes 64-127) holds what a
 * write changes (size and times) so an append flushes one line. */
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
	uint32_t i_flags;
	uint64_t i_generation; /* 48: unique per allocation of this inode */
	uint64_t i_blocks;     /* 56: pages backing the data */
	uint64_t i_size;       /* 64 */
	int64_t i_mtime_sec;   /* 72 */
	int64_t i_ctime_sec;   /* 80 */
	int64_t i_atime_sec;   /* 88 */
	uint32_t i_mtime_nsec; /* 96 */
	uint32_t i_ctime_nsec;
	uint32_t i_atime_nsec;
	uint32_t i_btime_nsec;
	int64_t i_btime_sec;	     /* 112 */
	uint64_t i_parent;	     /* 120: directories: parent's inode number */
	uint64_t i_dents;	     /* 128: small directories: pool offset of the array */
	uint64_t i_nentries;	     /* 136: directories: entries besides . and .. */
	uint64_t i_orphan_next;	     /* 144: next inode on the orphan list */
	uint64_t i_xattr;	     /* 152: pool offset of the xattr block, 0 = none */
	char i_inline[I_INLINE_MAX]; /* 160: short symlink target */
};
_Static_assert(sizeof(struct fr_inode) == 256, "inode size");
_Static_assert(offsetof(struct fr_inode, i_size) == 64 &&
		   offsetof(struct fr_inode, i_parent) == 120,
	       "size and times share a cache line");

/* Extended attributes of an inode (format 2; i_xattr was the always-zero
 * i_replica in format 1): one buddy block of 2^xb_order pages, written before
 * it becomes reachable and never changed afterwards -- a change writes a new
 * block and swaps i_xattr in the same transaction that frees the old one. */
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

/* A record: the full name ("user.x", no NUL), then the value, padded to 8. */
struct fr_xrec {
	uint32_t xr_vlen;
	uint8_t xr_nlen;
	uint8_t xr_rsvd[3];
	char xr_data[];
};
_Static_assert(sizeof(struct fr_xrec) == 8, "xattr record header");

/* Inode numbers are the pool offset of the inode divided by 64. */
#define INO_SHIFT 6

#define D_INLINE_NAME 40
#define D_EXTNAME     1 /* d_name_off points to a name-pool entry */
struct fr_dentry {
	uint64_t d_ino; /* 0 = free slot */
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

/* Name-pool entry: oob, then the bytes of the name. */
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

/* Small directory: a metadata-pool entry of 16, 32 or 64 dentries. */
struct fr_darray {
	struct mp_oob da_oob;
	uint8_t da_fp[64];
	uint64_t da_used; /* bit i: da_ent[i] holds an entry */
	uint8_t da_pad[40];
	struct fr_dentry da_ent[];
};
_Static_assert(offsetof(struct fr_darray, da_ent) == 128, "array header is two lines");

/* Large directory: extendible hashing inside the directory's partition.
 * Page 0 is the header; array pages map hash prefixes to bucket pages. */
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
