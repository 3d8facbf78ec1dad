/*
 * space_format.h -- on-PM structures of the space layer (format version in
 * meta/meta_format.h; documented in docs/format.md). All fields are
 * little-endian, fixed width; pool offsets are byte offsets from the start of
 * the pool; page numbers are pool offsets >> 12; vspace offsets are byte
 * offsets inside the partition space.
 *
 * Invariants SF1-SF6 below (cited as "space_format.h SFn"; space.c's S,
 * buddy.c's B, ppt.c's Q, part.c's H, window.c's W and vspace.c's V are
 * those files' own) say what a valid pool holds and which check refuses
 * anything else, before a value from the pool is used as an address.
 */
#ifndef FERRITE_SPACE_FORMAT_H
#define FERRITE_SPACE_FORMAT_H

#include <stdint.h>

#define BUD_ORDERS    10 /* 4 KiB (order 0) ... 2 MiB (order 9) */
#define BUD_TOP_ORDER 9
#define SP_MAX_LEVEL  15
#define SP_L3	      3

/* Space header: page 1 of the pool. Not checksummed.
 * SF1 at every mount (sp_header_check, space.c, from attach): sph_magic; the
 *     data area a non-empty whole number of units from a unit boundary,
 *     inside the pool (space.c S1); the bitmap offsets, summaries and word
 *     counts exactly the layout bm_layout derives from sph_bitmap_off[0] and
 *     sph_data_npages, starting after this page and ending by the data area;
 *     sph_top_level 9..11 with sph_vspace_size its level's size;
 *     sph_ppt_root a page of the data area; sph_free_pages <=
 *     sph_data_npages. The geometry never changes after mkfs (space.c S2).
 * SF2 a transaction changes only sph_free_pages and sph_prealloc_pages of
 *     this page (run_target_ok, meta/log.c, refuses a log run elsewhere).
 *     Both are counts, never addresses: fsck recounts them from the bitmaps
 *     (bud_check, buddy.c B3) and from the reserving windows (fsck.c, which
 *     repairs the latter). */
#define SPH_MAGIC 0x5350414345465231ULL /* "1RFECAPS" */
struct sp_header {
	uint64_t sph_magic;
	uint64_t sph_ppt_root;	  /* pool offset of the PPT root directory page */
	uint64_t sph_data_page;	  /* first page managed by the buddy allocator */
	uint64_t sph_data_npages; /* number of pages it manages (multiple of 512) */
	uint64_t sph_free_pages;  /* pages currently free */
	/* per order: bit set = free block head; free blocks never overlap and
	 * free buddies below order 9 are merged (buddy.c B1-B2, bud_check) */
	uint64_t sph_bitmap_off[BUD_ORDERS];
	uint64_t sph_summary_off[BUD_ORDERS]; /* per order: bit set = bitmap word non-zero */
	uint64_t sph_nwords[BUD_ORDERS];      /* 64-bit words in each order's bitmap */
	uint64_t sph_vspace_size; /* bytes of partition space = size of the root level */
	uint32_t sph_top_level;	  /* level of the root partition */
	uint32_t sph_rsvd0;
	uint64_t sph_prealloc_pages; /* format 4: pages reserved by windows, unwritten (W1) */
	uint64_t sph_rsvd[15];
};
_Static_assert(sizeof(struct sp_header) <= 4096, "space header fits a page");

/* PPT directory pages (root: 512 GiB per entry, PUD: 1 GiB, PMD: 2 MiB window).
 * SF3 an entry becomes an address only after its check (ppt.c): a root or PUD
 *     entry is 0 or PPT_DIR with a page of the data area (dir_ent_ok); a
 *     window entry is exactly 0, PPT_HUGE with a unit-aligned unit of the
 *     data area, or PPT_TABLE with a page of it (ppt_went_ok); anything else
 *     reads as PPT_BAD and fails with -EUCLEAN. fsck (ppt_check_dirs) wants
 *     the root's entries beyond sph_vspace_size zero, and every directory,
 *     table and backed page owned once (ppt.c Q1-Q2, fs/fsck.c own). */
#define PPT_ENTRIES   512
#define PPT_TYPE_MASK 3ULL
#define PPT_NONE      0ULL
#define PPT_HUGE      1ULL /* window -> one 2 MiB unit: pool offset | PPT_HUGE */
#define PPT_TABLE     2ULL /* window -> page table page: pool offset | PPT_TABLE */
#define PPT_DIR	      3ULL /* root/PUD entry -> next directory page: pool offset | PPT_DIR */

/* Page table page of a window mapped page by page. For a window that is an L3
 * partition in state P, this page is also page 0 of the window (pte[0] points
 * to itself) and carries the partition headers of every P partition that
 * starts at the window's address (ctFS: headers on the first page).
 * SF4 before a window is mapped (sp_ptable_check, vspace.c; fsck): pt_magic;
 *     pt_vaddr the window pointing at it (ppt.c Q3); pt_home 0 or a
 *     unit-aligned unit of the data area; each pte 0 or a page of the data
 *     area. fsck adds: pt_npages counts the non-zero ptes, every backed page
 *     lies in an allocated partition, and a header page belongs to a P
 *     partition.
 * SF5 PT_F_RESERVED (format 4, window.c W1-W2): never with PT_F_HEADER,
 *     pt_home set, every non-zero pte == home page + its index
 *     (sp_ptable_check); fsck counts the home pages no pte names as the
 *     window's and their sum as sph_prealloc_pages, and wants the window in
 *     a large partition. Those pages hold zeros (W2; nothing checks it).
 * SF6 a header page: before the tree uses it, header_ok (part.c) wants
 *     pt_magic, pt_vaddr, PT_F_HEADER and l3_child_level <= 2 (so an L3 has
 *     512 >> (3 * level) children); fsck (part_walk, part_check.c) the rest:
 *     pt_pte[0] is the page itself; l3_bitmap has bit 0 (the header's child)
 *     and no bit beyond the children, l3_nalloc is its popcount; free
 *     children have no pages (part.c H4); for each level L >= 4 of a P
 *     partition starting here, ph[L] is present with child 0 P (H2) and no
 *     child in state 3; every mask is what the children give (H3). ph[0..3]
 *     are unused. */
#define PT_MAGIC      0x454c424154545046ULL /* "FPTTABLE" */
#define PT_F_HEADER   1u		    /* page is a partition header page */
#define PT_F_RESERVED 2u /* format 4: a large window owning its home unit whole (window.c W1) */
#define PH_E	      0u
#define PH_A	      1u
#define PH_P	      2u
struct sp_part_hdr {
	uint16_t ph_states; /* 2 bits per child: PH_E / PH_A / PH_P */
	uint16_t ph_mask;   /* bit n set: a level-n partition can be allocated below */
	uint32_t ph_present;
	uint16_t ph_cmask[8]; /* each child's mask, so ph_mask = OR of them */
};
struct sp_ptable {
	uint32_t pt_pte[PPT_ENTRIES]; /* page numbers; 0 = not backed */
	uint64_t pt_magic;
	uint64_t pt_home;   /* pool offset of the window's home unit, 0 = none */
	uint64_t pt_vaddr;  /* vspace offset of the window */
	uint32_t pt_npages; /* backed pages in this window (pte != 0), a header page included */
	uint32_t pt_flags;
	/* L3 header (PT_F_HEADER): children of size 4 KiB << (3 * child_level) */
	uint16_t l3_mask;
	uint8_t l3_child_level;
	uint8_t l3_rsvd;
	uint32_t l3_nalloc;    /* allocated children */
	uint64_t l3_bitmap[8]; /* bit i: child i allocated; child 0 is this header */
	struct sp_part_hdr ph[SP_MAX_LEVEL + 1]; /* headers of P partitions, by level */
	uint8_t pt_pad[4096 - 2048 - 32 - 8 - 64 - 24 * (SP_MAX_LEVEL + 1) - 8];
	uint64_t pt_replica; /* reserved for a second copy (dual-copy repair) */
};
_Static_assert(sizeof(struct sp_ptable) == 4096, "page table page is one page");

#endif
