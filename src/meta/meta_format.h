/*
 * meta_format.h -- on-PM structures of the meta layer: superblock, global
 * state page, redo log slots and uniform metadata pools (SPFS 4.2).
 * Little-endian, fixed width; documented in docs/format.md.
 */
#ifndef FERRITE_META_FORMAT_H
#define FERRITE_META_FORMAT_H

#include <stddef.h>
#include <stdint.h>

/* 2: inodes carry extended attributes (i_xattr). Format 1 pools, where the
 * field was always 0, are still mounted; they refuse new attributes.
 * 3: tiered pools (SB_INCOMPAT_TIER, src/tier/tier_format.h); the pm
 * engine's layout is that of version 2.
 * 4: metadata pool blocks are a page or a few (mph_block_order) instead of
 * 2 MiB units, so any free page serves metadata; formats 1-3 keep 2 MiB
 * blocks. */
#define FR_FORMAT_VERSION 4
#define FR_FORMAT_SMALL_BLOCKS 4 /* first version with small metadata blocks */
#define SB_MAGIC	  0x0045544952524546ULL /* "FERRITE\0" */
#define SB_OFF		  0
#define SB_SPACE_OFF	  4096
#define SB_STATE_OFF	  8192
#define SB_BACKUP_OFF	  (2 * 1024 * 1024 - 4096)

/* Features a reader must understand to mount. */
#define SB_INCOMPAT_TIER      0x1u /* a tiered pool: the tier engine's layout after page 0 */
#define SB_INCOMPAT_SUPPORTED SB_INCOMPAT_TIER

struct fr_super {
	uint64_t sb_magic;
	uint32_t sb_version;
	uint32_t sb_size; /* bytes covered by the checksum: offsetof(sb_checksum) */
	uint8_t sb_uuid[16];
	uint64_t sb_pool_size; /* bytes in use (multiple of 2 MiB) */
	uint32_t sb_page_size; /* 4096 */
	uint32_t sb_unit_size; /* 2 MiB */
	uint32_t sb_mode;      /* enum ferrite_mode */
	uint32_t sb_incompat;
	uint64_t sb_hash_seed; /* keys the directory name hash */
	int64_t sb_mkfs_time;
	uint64_t sb_space_off; /* space header (space_format.h) */
	uint64_t sb_state_off; /* struct fr_state */
	uint64_t sb_log_off;   /* first log slot */
	uint32_t sb_log_count;
	uint32_t sb_log_size;
	uint64_t sb_backup_off; /* copy of this superblock */
	uint64_t sb_meta_end;	/* end of the meta area; space bitmaps follow */
	/* The pool's label (ferrite tune --label, mkfs --label): up to
	 * SB_LABEL_MAX bytes, no control characters, NUL-padded; all zero =
	 * none. A compatible addition in format 3 (docs/format.md): these bytes
	 * were the always-zero sb_rsvd[0..7], covered by the checksum, which
	 * readers without the field ignore. */
	char sb_label[64];
	uint64_t sb_rsvd[8];
	uint32_t sb_checksum; /* crc32c of the bytes before this field */
	uint32_t sb_pad;
};
_Static_assert(sizeof(struct fr_super) <= 4096, "superblock fits a page");
_Static_assert(offsetof(struct fr_super, sb_label) == 120 &&
		   offsetof(struct fr_super, sb_checksum) == 248,
	       "the label took the place of sb_rsvd[0..7]: the checksummed bytes are unchanged");
#define SB_LABEL_MAX 63

/* Tiered pools have no space header or state page: ferrite tune keeps a
 * copy of their superblock in page 2 (written before the primary; fsck
 * --repair restores the primary from it), as pm pools keep theirs at
 * SB_BACKUP_OFF. All zero in pools never tuned. */
#define SB_TIER_BACKUP_OFF 8192

/* Metadata pools: every entry begins with this out-of-band header (SPFS
 * "entry head" and "entry status"). */
#define MP_FREE 0x45455246u /* "FREE" */
#define MP_LIVE 0x4556494cu /* "LIVE" */
struct mp_oob {
	uint32_t oob_status;
	uint32_t oob_pool; /* pool id, for fsck */
	uint64_t oob_next; /* free entries: next free entry (pool offset) */
};

enum mp_id {
	MP_INODE = 0,
	MP_NAME64,
	MP_NAME128,
	MP_NAME192,
	MP_NAME272,
	MP_DENT16,
	MP_DENT32,
	MP_DENT64,
	MP_COUNT
};

struct mp_head {
	uint32_t mph_entry_size;
	uint32_t mph_id;
	uint64_t mph_free_head;	 /* pool offset of the first free entry, 0 = none */
	uint64_t mph_total;	 /* entries in all blocks */
	uint64_t mph_live;	 /* entries in use */
	uint64_t mph_block_head; /* first block of the pool's block list */
	uint64_t mph_active;	 /* block still handing out never-used entries */
	uint64_t mph_replica;	 /* reserved for a replica pool (dual copy) */
	uint32_t mph_block_order; /* format 4: blocks are 4 KiB << this (mp_block_order_v4);
				   * 0 in formats 1-3, whose blocks are 2 MiB */
	uint32_t mph_rsvd;
};
_Static_assert(sizeof(struct mp_head) == 64, "pool head is one line");

#define MPB_MAGIC 0x4b434f4c4250464dULL /* "MFPBLOCK" */
#define MPB_HDR	  64
struct mp_block {
	uint64_t mpb_magic;
	uint32_t mpb_id;
	uint32_t mpb_entry_size;
	uint32_t mpb_nentries;
	uint32_t mpb_bump;    /* entries [0, bump) have been handed out at least once */
	uint64_t mpb_next;    /* next block of the same pool */
	uint64_t mpb_replica; /* reserved for a replica block */
	uint64_t mpb_rsvd[3];
};
_Static_assert(sizeof(struct mp_block) == MPB_HDR, "block header is one line");

#define ST_MAGIC 0x4554415453524546ULL /* "FERSTATE" */
struct fr_state {
	uint64_t st_magic;
	uint64_t st_root_ino;
	uint64_t st_orphan_head; /* first inode on the orphan list (unlinked, still open) */
	uint64_t st_rsvd[13];
	struct mp_head st_pools[MP_COUNT];
};
_Static_assert(sizeof(struct fr_state) <= 4096, "state fits a page");

/* Redo log slot: header line, then one entry. */
#define LOG_MAGIC 0x474f4c4f44455246ULL /* "FREDOLOG" */
#define LE_MAGIC  0x52544e45u		/* "ENTR" */
struct log_slot {
	uint64_t ls_magic;
	uint64_t ls_retired; /* sequence number of the last entry applied and retired */
	uint64_t ls_rsvd[6];
};
struct log_entry {
	uint64_t le_seq; /* ls_retired + 1 while the entry is live */
	uint32_t le_magic;
	uint32_t le_nruns;
	uint32_t le_nbytes; /* bytes of runs that follow */
	uint32_t le_csum;   /* crc32c over this header (le_csum = 0) and the runs */
};
struct log_run {
	uint64_t lr_off; /* pool offset of the first word */
	uint32_t lr_nwords;
	uint32_t lr_pad;
	/* uint64_t words[lr_nwords] follow */
};
_Static_assert(sizeof(struct log_slot) == 64 && sizeof(struct log_entry) == 24 &&
		   sizeof(struct log_run) == 16,
	       "log layout");

#endif
