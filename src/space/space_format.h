/*
 * space_format.h -- on-PM structures of the space layer (format version in
 * meta/meta_format.h; documented in docs/format.md). All fields are
 * little-endian, fixed width; pool offsets are byte offsets from the start of
 * the pool; page numbers are pool offsets >> 12; vspace offsets are byte
 * offsets inside the partition space.
 */
#ifndef FERRITE_SPACE_FORMAT_H
#define FERRITE_SPACE_FORMAT_H

#include <stdint.h>

#define BUD_ORDERS    10 /* 4 KiB (order 0) ... 2 MiB (order 9) */
#define BUD_TOP_ORDER 9
#define SP_MAX_LEVEL  15
#define SP_L3	      3

/* Space header: page 1 of the pool. */
#define SPH_MAGIC 0x5350414345465231ULL /* "1RFECAPS" */
struct sp_header {
	uint64_t sph_magic;
	uint64_t sph_ppt_root;		      /* pool offset of the PPT root directory page */
	uint64_t sph_data_page;		      /* first page managed by the buddy allocator */
	uint64_t sph_data_npages;	      /* number of pages it manages (multiple of 512) */
	uint64_t sph_free_pages;	      /* pages currently free */
	uint64_t sph_bitmap_off[BUD_ORDERS];  /* per order: bit set = free block head */
	uint64_t sph_summary_off[BUD_ORDERS]; /* per order: bit set = bitmap word non-zero */
	uint64_t sph_nwords[BUD_ORDERS];      /* 64-bit words in each order's bitmap */
	uint64_t sph_vspace_size; /* bytes of partition space = size of the root level */
	uint32_t sph_top_level;	  /* level of the root partition */
	uint32_t sph_rsvd0;
	uint64_t sph_prealloc_pages; /* format 4: pages reserved by windows, unwritten (W1) */
	uint64_t sph_rsvd[15];
};
_Static_assert(sizeof(struct sp_header) <= 4096, "space header fits a page");

/* PPT directory pages (root: 512 GiB per entry, PUD: 1 GiB, PMD: 2 MiB window). */
#define PPT_ENTRIES   512
#define PPT_TYPE_MASK 3ULL
#define PPT_NONE      0ULL
#define PPT_HUGE      1ULL /* window -> one 2 MiB unit: pool offset | PPT_HUGE */
#define PPT_TABLE     2ULL /* window -> page table page: pool offset | PPT_TABLE */
#define PPT_DIR	      3ULL /* root/PUD entry -> next directory page: pool offset | PPT_DIR */

/* Page table page of a window mapped page by page. For a window that is an L3
 * partition in state P, this page is also page 0 of the window (pte[0] points
 * to itself) and carries the partition headers of every P partition that
 * starts at the window's address (ctFS: headers on the first page). */
#define PT_MAGIC    0x454c424154545046ULL /* "FPTTABLE" */
#define PT_F_HEADER 1u			  /* page is a partition header page */
#define PT_F_RESERVED 2u /* format 4: a large window owning its home unit whole (window.c W1) */
#define PH_E	    0u
#define PH_A	    1u
#define PH_P	    2u
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
	uint32_t pt_npages; /* backed pages in this window (pte != 0) */
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
