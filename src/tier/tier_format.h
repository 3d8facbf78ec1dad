/*
 * tier_format.h -- on-PM structures of a tiered pool (First Responder cache
 * in front of a backing directory). Little-endian, fixed width; documented in
 * docs/format.md ("Tiered pools").
 *
 * Layout: page 0 the superblock (struct fr_super, sb_incompat has
 * SB_INCOMPAT_TIER), page 1 the tier header, from TIER_REC_OFF the file
 * records, then the epoch journal, then one 64-byte descriptor per chunk
 * (two per slot), then the chunks themselves from a 2 MiB boundary.
 *
 * Invariants TF1-TF6 below (cited as "tier_format.h TFn"; the K of
 * check.c, M of mount.c, F of files.c and T of tune.c are those files'
 * own). Mount checks the whole image (tier_image_check, check.c; mount.c
 * M4) before recovery or anything else uses a field, and fails with
 * -EUCLEAN having changed nothing; fsck (tier/fsck.c) runs the same checks.
 * What a crash leaves (a path being rewritten, a torn journal entry, C
 * chunks) is told apart from damage and settled by recovery.
 */
#ifndef FERRITE_TIER_FORMAT_H
#define FERRITE_TIER_FORMAT_H

#include <stddef.h>
#include <stdint.h>

#define TIER_MAGIC	 0x5245495452454646ULL /* "FFERTIER" */
#define TIER_HDR_OFF	 4096
#define TIER_REC_OFF	 (64 * 1024)
#define TIER_CHUNK_SIZE	 4096
#define TIER_CHUNK_SHIFT 12

enum tier_consistency {
	TIER_PER_WRITE = 0, /* First Responder: every write durable and atomic on return */
	TIER_EPOCH = 1,	    /* HasFS: writes durable at epoch ends (fsync or the period) */
};

/* How the flusher writes chunks back to the backing files. */
enum tier_writeback {
	TIER_WB_CACHED = 0, /* through the page cache, then syncfs: misses that the
			     * cache evicted are read back from DRAM, not the disk */
	TIER_WB_DIRECT = 1, /* O_DIRECT where the file system takes it: the backing
			     * data never takes page cache (First Responder) */
};

/* ---- chunk tags: one 8-byte word, changed only by atomic 8-byte stores ---- */
#define TAG_IDX_BITS 36 /* chunk index in the file: 256 TiB of 4 KiB chunks */
#define TAG_FID_BITS 24 /* file record number; 0 is never used */
#define TAG_IDX_MASK ((1ULL << TAG_IDX_BITS) - 1)
#define TAG_FID_MASK ((1ULL << TAG_FID_BITS) - 1)
#define TAG_C                                                                                      \
	(1ULL << 60)	   /* not complete: a multi-chunk write (or, in epoch                      \
			    * mode, a page of the open epoch) in progress */
#define TAG_D (1ULL << 61) /* dirty: newer than the backing file */
#define TAG_N (1ULL << 62) /* the newer of the slot's two chunks */
#define TAG_V (1ULL << 63) /* valid */

static inline uint64_t tag_make(uint64_t fid, uint64_t idx, uint64_t flags)
{
	return flags | ((fid & TAG_FID_MASK) << TAG_IDX_BITS) | (idx & TAG_IDX_MASK);
}
static inline uint32_t tag_fid(uint64_t tag)
{
	return (uint32_t)((tag >> TAG_IDX_BITS) & TAG_FID_MASK);
}
static inline uint64_t tag_idx(uint64_t tag)
{
	return tag & TAG_IDX_MASK;
}
/* Same file and chunk, whatever the flags. */
static inline int tag_same(uint64_t a, uint64_t b)
{
	return ((a ^ b) & ((TAG_FID_MASK << TAG_IDX_BITS) | TAG_IDX_MASK)) == 0;
}

/* Per chunk, one cache line: the tag and what recovery needs besides. Every
 * field but the tag is written (and fenced) before the tag makes the chunk
 * valid: the tag store is the chunk's commit point.
 * TF1 a descriptor without TAG_V is not read (but d_seq, bounded, for the
 *     sequence floor). With it (tier_desc_check, check.c K3): record number 1
 *     to th_nrecs - 1; chunk index at most TIER_MAX_FILE >> 12 (below 2^32);
 *     d_seq <= TIER_SEQ_MAX; d_old_size, d_new_size <= TIER_MAX_FILE; if the
 *     record is in use, the chunk sits in slot (r_key + index) mod th_nslots.
 *     A valid tag of a free record, or wholly beyond r_size, is dropped by
 *     recovery (mount.c) and reported by fsck; two valid versions of one
 *     chunk in a slot are a cut-short overwrite, settled by TAG_N, else
 *     d_seq. */
struct tier_desc {
	uint64_t d_tag;
	uint64_t d_seq;	     /* write that produced the content (all chunks of a
			      * multi-chunk write carry the first chunk's) */
	uint64_t d_old_size; /* first chunk of a multi-chunk write: file size before */
	uint64_t d_new_size; /* ... and after it (undone together with the chunks) */
	/* Written, read by nothing: not checked. */
	uint64_t d_nchunks; /* ... chunks in that write */
	int64_t d_mtime;    /* ns since the epoch: time of the write */
	uint64_t d_epoch;   /* epoch mode: the epoch that wrote the page */
	uint64_t d_rsvd;
};
_Static_assert(sizeof(struct tier_desc) == 64, "descriptor is one line");

/* ---- file records ------------------------------------------------------------ */

enum tier_rec_state {
	REC_FREE = 0,
	REC_LIVE = 0x4556494c,	 /* "LIVE": a backing file with a key */
	REC_DYING = 0x474e5944,	 /* "DYNG": unlink/rename-over under way (intent) */
	REC_ORPHAN = 0x4e414850, /* "PHAN": unlinked while open */
};

#define TIER_REC_SIZE	512
#define TIER_PATH_MAX	352 /* longer paths are not kept: see r_pathlen */
#define TIER_HANDLE_MAX 40

#define REC_META_STALE 0x1 /* backing size or mtime not yet made equal to r_size/r_mtime */

/* TF2 record 0 is never used. A free record is not read until written again;
 *     its fields are persistent before the state makes it LIVE (files.c F1),
 *     the commit point of a new record. One in use (tier_rec_check, check.c
 *     K2): a known state; no flag but REC_META_STALE; r_pathlen <=
 *     TIER_PATH_MAX; r_hlen <= TIER_HANDLE_MAX; r_size <= TIER_MAX_FILE;
 *     r_key <= TIER_KEY_MAX, so key + chunk index cannot wrap; r_stride <=
 *     th_nslots. A path is used only if r_path_crc holds (tier_rec_path_ok):
 *     one that fails was being rewritten (not damage), one that holds must
 *     have no empty, "." or ".." component and no NUL. */
struct tier_rec {
	uint32_t r_state; /* enum tier_rec_state */
	uint32_t r_flags; /* REC_* */
	uint64_t r_key;	  /* slot of chunk 0 = r_key mod nslots (First Responder key) */
	uint64_t r_stride;
	uint64_t r_size;    /* the file's size (authoritative while the record lives) */
	int64_t r_mtime;    /* ns: last write through the cache; 0: the backing file's */
	uint64_t r_ino;	    /* backing identity: inode number ... */
	int64_t r_btime;    /* ... and birth time in ns (0 if the file system has none) */
	uint32_t r_pathlen; /* bytes of r_path; 0: unknown (too long, or a link was removed) */
	uint32_t r_htype;   /* file handle (name_to_handle_at) type, and its bytes */
	uint32_t r_hlen;
	uint32_t r_path_crc; /* crc32c of r_path[0, r_pathlen): a torn path is no path */
	uint8_t r_handle[TIER_HANDLE_MAX];
	int64_t r_ctime; /* ns: status change time as the tier last made it (draining to
			  * the backing file changes the backing file's own) */
	uint64_t r_rsvd[5];
	char r_path[TIER_PATH_MAX]; /* relative to the backing directory, no NUL */
};
_Static_assert(sizeof(struct tier_rec) == TIER_REC_SIZE, "record size");
_Static_assert(offsetof(struct tier_rec, r_size) % 64 + 16 <= 64, "size and mtime share a line");

/* ---- epoch journal (HasFS) ----------------------------------------------------- */

#define EJ_MAGIC 0x4c4e524a48434f50ULL /* "POCHJRNL" */

/* One entry: the pages the epoch wrote and the files whose size or time it
 * changed, with a fingerprint over the header, the lists and the pages'
 * contents. Recovery recomputes it: whole entries are applied, torn ones
 * dropped, so writing an entry needs no ordering fence.
 * TF3 epoch mode only (tier_journal_check, check.c K4): ej_magic; ej_epoch,
 *     ej_applied <= TIER_SEQ_MAX. The entry is pending iff ej_epoch >
 *     ej_applied; then ej_npages and ej_nfiles are within the journal's
 *     capacity and a quarter of the chunks (beyond: damage). If every
 *     ep_chunk is a chunk and the fingerprint holds -- the epoch's commit
 *     point -- every page's tag is valid and names a record in use, a chunk
 *     index it can have and the slot of its key, and every file a record in
 *     use with a size <= TIER_MAX_FILE; otherwise the entry is torn, and
 *     dropped with the C chunks. Applying it ends with ej_applied =
 *     ej_epoch. */
struct tier_ejournal {
	uint64_t ej_magic;
	uint64_t ej_epoch;   /* epoch this entry commits */
	uint64_t ej_applied; /* last epoch whose entry was applied (tags set) */
	uint32_t ej_npages;
	uint32_t ej_nfiles;
	/* crc32c of ej_epoch, ej_npages, ej_nfiles (not the magic, nor
	 * ej_applied, written after), the lists and the listed chunks'
	 * contents (tier_journal_fingerprint, check.c) */
	uint32_t ej_csum;
	uint32_t ej_pad;
	uint64_t ej_rsvd[3];
	/* then ej_npages struct ej_page, ej_nfiles struct ej_file */
};
_Static_assert(sizeof(struct tier_ejournal) == 64, "journal header is one line");
struct ej_page {
	uint32_t ep_chunk; /* chunk number */
	uint32_t ep_pad;
	uint64_t ep_tag; /* its tag once the epoch is committed */
};
struct ej_file {
	uint32_t ef_fid;
	uint32_t ef_pad;
	uint64_t ef_size;
	int64_t ef_mtime;
};

/* ---- the tier header (page 1) --------------------------------------------------- */

#define TIER_BACKING_MAX 1020
#define TIER_NSTATS	 16

/* TF4 (tier_header_check, check.c K1, before any region is used; mount, fsck,
 *     tune) th_magic; th_csum over the bytes before it; th_chunk_size 4096,
 *     th_consistency and th_writeback known values, th_rec_off TIER_REC_OFF,
 *     th_rec_size TIER_REC_SIZE, both periods <= 60 s; 2 <= th_nrecs <=
 *     2^TAG_FID_BITS; 16 <= th_nslots <= pool size / (2 * (4096 + 64)),
 *     bounded before any product is formed; then in order, without overlap,
 *     inside sb_pool_size: records, the journal (4 KiB aligned, at least
 *     4 KiB in epoch mode), the descriptors (4 KiB aligned), the chunks
 *     (2 MiB aligned); th_backing NUL-terminated and absolute. mkfs writes
 *     this page before the superblock (mount.c M1).
 * TF5 the mutable tail, outside th_csum, holds hints: th_key_next above
 *     TIER_KEY_MAX - th_nslots is taken as 0 (files.c), th_seq above
 *     TIER_SEQ_MAX as 0 (tier_recover_chunks, mount.c); th_stats are counts,
 *     never used as bounds. */
struct tier_header {
	uint64_t th_magic;
	uint32_t th_chunk_size;
	uint32_t th_consistency; /* enum tier_consistency */
	uint64_t th_nslots;	 /* two chunks each */
	uint64_t th_desc_off;	 /* 2 * nslots descriptors */
	uint64_t th_data_off;	 /* 2 * nslots chunks, 2 MiB aligned */
	uint64_t th_rec_off;
	uint32_t th_nrecs;
	uint32_t th_rec_size;
	uint64_t th_journal_off;
	uint64_t th_journal_size;
	uint32_t th_flush_ms; /* background flush period */
	uint32_t th_epoch_ms; /* epoch mode: period of an epoch */
	/* The directory's identity, compared where it has no user.ferrite.pool
	 * attribute (mount.c M2). */
	uint64_t th_backing_ino;
	int64_t th_backing_btime;
	char th_backing[TIER_BACKING_MAX]; /* absolute path, NUL-terminated */
	uint32_t th_writeback;		   /* enum tier_writeback */
	uint32_t th_csum;		   /* crc32c of the fields above */
	uint32_t th_pad;
	/* Mutable from here on (not covered by th_csum). */
	uint64_t th_key_next;		/* next file key (a hint: keys only spread files) */
	uint64_t th_seq;		/* write sequence floor for the next mount */
	uint64_t th_stats[TIER_NSTATS]; /* counters kept across mounts (tier_stat_id) */
};
_Static_assert(sizeof(struct tier_header) <= 4096, "tier header fits a page");

/* Bytes of the header th_csum covers, th_csum included: what `ferrite tune`
 * changes and what its backup copy holds. */
#define TIER_HDR_SUM_BYTES (offsetof(struct tier_header, th_csum) + sizeof(uint32_t))
/* Backups written by `ferrite tune` before it changes a primary (all zero in
 * a pool never tuned): the superblock in page 2 (SB_TIER_BACKUP_OFF,
 * meta_format.h) and the header's checksummed bytes in page 3.
 * TF6 a backup is used only if it passes the primary's check, and only when
 *     the primary fails it (tier/tune.c T3; tier_backups_fix at fsck
 *     --repair). The header's mutable tail is never copied either way. */
#define TIER_HDR_BACKUP_OFF 12288
_Static_assert(TIER_HDR_BACKUP_OFF + 4096 <= TIER_REC_OFF, "backups lie below the records");

#endif
