/*
 * meta_format.h -- on-PM structures of the meta layer: superblock, global
 * state page, redo log slots and uniform metadata pools (SPFS 4.2).
 * Little-endian, fixed width; documented in docs/format.md.
 *
 * Invariants MF1-MF7 below (cited as "meta_format.h MFn"; super.c's U, log.c's
 * L and mpool.c's M are those files' own) say what a valid pool holds and
 * which function refuses anything else. The pool is untrusted input: a value
 * is used as an offset, length or index only after that check passes.
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
 * blocks.
 * 5: null files (SCMFS): ready inodes, each with one backed page, on a list
 * in the state page (st_null_head), which a version-4 reader would take
 * for unreachable inodes; version-4 pools are mounted and get none. */
#define FR_FORMAT_VERSION      5
#define FR_FORMAT_SMALL_BLOCKS 4		     /* first version with small metadata blocks */
#define FR_FORMAT_NULL_FILES   5		     /* first version with null files */
#define SB_MAGIC	       0x0045544952524546ULL /* "FERRITE\0" */
#define SB_OFF		       0
#define SB_SPACE_OFF	       4096
#define SB_STATE_OFF	       8192
#define SB_BACKUP_OFF	       (2 * 1024 * 1024 - 4096)

/* Features a reader must understand to mount. */
#define SB_INCOMPAT_TIER      0x1u /* a tiered pool: the tier engine's layout after page 0 */
#define SB_INCOMPAT_SUPPORTED SB_INCOMPAT_TIER

/* MF1 every engine (meta_super_check_common, super.c): sb_magic; sb_version
 *     1..FR_FORMAT_VERSION and no sb_incompat bit outside
 *     SB_INCOMPAT_SUPPORTED (-EPROTONOSUPPORT, not damage); sb_size ==
 *     offsetof(sb_checksum) and sb_checksum right; 4 KiB pages, 2 MiB units;
 *     sb_pool_size a whole number of units, >= 16 MiB and <= the file's size
 *     (a larger pool is "truncated"). The pm engine (meta_super_check) also
 *     refuses SB_INCOMPAT_TIER and wants its fixed layout: space header,
 *     state and backup at SB_SPACE_OFF, SB_STATE_OFF, SB_BACKUP_OFF, log at
 *     2 MiB, 1..1024 slots of 16 KiB..16 MiB in whole pages, sb_meta_end ==
 *     the log's end and below sb_pool_size, sb_mode 0 or 1. The tier engine
 *     owns a pool only with SB_INCOMPAT_TIER and version >= 3
 *     (meta_pool_is_tier; tier/mount.c and tier/tune.c test the bit again)
 *     and reads none of the pm layout fields: they are 0 there (sb_backup_off
 *     SB_TIER_BACKUP_OFF once tuned), as is sb_mode.
 * MF2 the superblock is the commit point of mkfs and tune: written last,
 *     backup first, then primary (super.c U1, U2; meta/tune.c T2; tiered
 *     pools: tier/tune.c T3). fsck --repair (fs/fsck.c fix_superblock)
 *     copies the backup over a primary that fails meta_super_check, and the
 *     primary over a backup that differs. */
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
	uint64_t sb_hash_seed; /* keys the directory name hash (any value; fsck rehashes) */
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
	 * readers without the field ignore. Not checked on reading: whatever
	 * it holds, meta_label_get (meta/tune.c) copies at most SB_LABEL_MAX
	 * bytes, stops at a NUL and shows control characters as '?'. */
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
 * "entry head" and "entry status").
 * MF3 an entry below its block's mpb_bump is LIVE (with oob_pool its pool's
 *     id) or FREE, and the FREE ones are exactly the pool's free list (mpool.c
 *     M1; mp_walk, run by fsck). An entry is used only if it is a slot below
 *     the bump of a block of the right pool and LIVE with the right
 *     oob_pool (mp_entry_valid); the entries above the bump were never
 *     handed out and are never read (the block is not zeroed). */
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

/* MF4 st_pools[id]: mph_entry_size, mph_id and mph_block_order match the
 *     pool and the format (mp_head_check, at attach and so every mount).
 *     The links are checked where followed: mph_free_head and each oob_next
 *     is 0 or a FREE slot of this pool (mp_alloc; mp_walk), mph_active 0 or
 *     a block of it (mp_alloc) on its block list (mp_walk). The counts are
 *     checked only by fsck (mp_walk, mpool.c M2): they are never used as
 *     an address or bound (statvfs, ferrite info; fsck clamps the hint it
 *     sizes a table by), so a wrong one misreports and no more. */
struct mp_head {
	uint32_t mph_entry_size;
	uint32_t mph_id;
	uint64_t mph_free_head;	  /* pool offset of the first free entry, 0 = none */
	uint64_t mph_total;	  /* entries in all blocks */
	uint64_t mph_live;	  /* entries in use */
	uint64_t mph_block_head;  /* first block of the pool's block list, 0 = none */
	uint64_t mph_active;	  /* block still handing out never-used entries, 0 = none */
	uint64_t mph_replica;	  /* reserved for a replica pool (dual copy) */
	uint32_t mph_block_order; /* format 4: blocks are 4 KiB << this (mp_block_order_v4);
				   * 0 in formats 1-3, whose blocks are 2 MiB */
	uint32_t mph_rsvd;
};
_Static_assert(sizeof(struct mp_head) == 64, "pool head is one line");

/* MF5 a block of pool id (mp_block_ok, mpool.c, before any use): aligned to
 *     its size (mp_block_bytes: 4 KiB << mph_block_order in format 4, 2 MiB
 *     before) and inside the data area; magic, id and entry size its pool's;
 *     mpb_nentries the entries that size fits after the header; mpb_bump <=
 *     mpb_nentries. fsck (mp_walk) bounds each block list by the blocks the
 *     data area can hold and counts its blocks as owned pages. A new block's
 *     header is written before the transaction that links it commits. */
#define MPB_MAGIC 0x4b434f4c4250464dULL /* "MFPBLOCK" */
#define MPB_HDR	  64
struct mp_block {
	uint64_t mpb_magic;
	uint32_t mpb_id;
	uint32_t mpb_entry_size;
	uint32_t mpb_nentries;
	uint32_t mpb_bump;    /* entries [0, bump) have been handed out at least once */
	uint64_t mpb_next;    /* next block of the same pool, 0 = last */
	uint64_t mpb_replica; /* reserved for a replica block */
	uint64_t mpb_rsvd[3];
};
_Static_assert(sizeof(struct mp_block) == MPB_HDR, "block header is one line");

/* MF6 page 2 of a pm pool: st_magic (attach, super.c) and every st_pools[]
 *     head (MF4) are checked at mount before the log is replayed; the root
 *     must be a live, sound directory (ino_get_checked, fs/mount.c). After
 *     mkfs only transactions change the page (run_target_ok, log.c, lets
 *     runs into it). */
#define ST_MAGIC 0x4554415453524546ULL /* "FERSTATE" */
struct fr_state {
	uint64_t st_magic;
	uint64_t st_root_ino;
	/* First inode on the orphan list (unlinked, still open), 0 = empty;
	 * linked by i_orphan_next, each with I_F_ORPHAN. Mount releases the
	 * list, refusing an entry that is not a live inode of a known type
	 * with a sound partition (orphan_cleanup, fs/inode.c). */
	uint64_t st_orphan_head;
	/* Format 5: the first null file (SCMFS), 0 = none; linked by
	 * i_orphan_next, each with I_F_NULL (fs/nullfile.c N1), and how many
	 * there are. A list that is not sound is refused (-EUCLEAN) where it
	 * is used and reported by fsck; formats 1-4 have zeros here. */
	uint64_t st_null_head;
	uint64_t st_null_count;
	uint64_t st_rsvd[11];
	struct mp_head st_pools[MP_COUNT];
};
_Static_assert(sizeof(struct fr_state) <= 4096, "state fits a page");

/* Redo log slot: header line, then one entry.
 * MF7 ls_magic in every slot, else the mount fails (log.c recover; fsck:
 *     log_check). The entry is live -- committed, not retired -- iff le_seq ==
 *     ls_retired + 1, le_magic matches, le_nbytes fits the slot and le_csum
 *     holds (live_entry): the checksum is the commit point (log.c L1), so a
 *     torn entry is no entry. A live entry is replayed only if its runs parse
 *     to exactly le_nruns and each lies, 8-byte aligned, inside the pool and
 *     in bytes a transaction may write: the state page, sph_free_pages,
 *     sph_prealloc_pages, or from sb_meta_end on (runs_sane, run_target_ok);
 *     otherwise the mount fails before anything is applied. Replay then
 *     publishes ls_retired = le_seq (8-byte store, after a fence). */
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
