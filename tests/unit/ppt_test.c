/*
 * ppt_test.c -- the persistent page table and pswap: moving a file's windows
 * to a larger partition (2 MiB entries, and whole 1 GiB directory entries)
 * keeps every byte without copying, leaves the source unmapped, and the
 * process mapping follows (mremap) so the data is readable at the new
 * address; windows backed page by page (no whole unit left) move too.
 */
#include "space_fixture.h"

static void fill(struct sfix *f, uint64_t v, uint64_t len, unsigned seed)
{
	vs_ensure(&f->sp, v, len);
	uint64_t *p = (uint64_t *)vs_addr(&f->sp, v);
	for (uint64_t i = 0; i < len / 8; i += 512)
		p[i] = (uint64_t)seed * 1000003ULL + i;
}

static int same(struct sfix *f, uint64_t v, uint64_t len, unsigned seed)
{
	if (vs_ensure(&f->sp, v, len))
		return 0;
	uint64_t *p = (uint64_t *)vs_addr(&f->sp, v);
	for (uint64_t i = 0; i < len / 8; i += 512)
		if (p[i] != (uint64_t)seed * 1000003ULL + i)
			return 0;
	return 1;
}

static int move_windows_keeps_data(void)
{
	struct sfix f;
	CHECK(sfix_open(&f, "t1", 128 * FR_MIB) == 0);
	uint64_t a, b, phys;
	CHECK_EQ(part_alloc(f.tx, 4, &a), 0); /* 16 MiB */
	for (int w = 0; w < 8; w++)
		CHECK(part_large_back(f.tx, a + (uint64_t)w * FR_UNIT_SIZE, &phys) >= 0);
	sfix_apply(&f);
	fill(&f, a, 16 * FR_MIB, 1);
	uint64_t unit0 = ppt_window(&f.sp, a);
	CHECK_EQ(part_alloc(f.tx, 5, &b), 0); /* 128 MiB */
	CHECK_EQ(ppt_move(f.tx, a, b, (16 * FR_MIB) >> 12), 0);
	tx_defer(f.tx, vs_moved, a, b, 8);
	sfix_apply(&f);
	CHECK_EQ(ppt_window(&f.sp, b), unit0); /* same memory, no copy */
	CHECK_EQ(ppt_window(&f.sp, a), PPT_NONE);
	CHECK(same(&f, b, 16 * FR_MIB, 1));
	CHECK_EQ(part_walk(&f.sp, NULL, NULL, NULL, NULL, NULL, NULL), 0);
	sfix_close(&f);
	return 0;
}

static int move_whole_gib_entries(void)
{
	struct sfix f;
	CHECK(sfix_open(&f, "t2", 64 * FR_MIB) == 0);
	uint64_t a, b, phys;
	CHECK_EQ(part_alloc(f.tx, 7, &a), 0); /* 8 GiB, 1 GiB aligned */
	CHECK(part_large_back(f.tx, a + 3 * FR_GIB, &phys) >= 0);
	CHECK(part_large_back(f.tx, a + 7 * FR_GIB + FR_UNIT_SIZE, &phys) >= 0);
	sfix_apply(&f);
	fill(&f, a + 3 * FR_GIB, FR_UNIT_SIZE, 2);
	fill(&f, a + 7 * FR_GIB + FR_UNIT_SIZE, FR_UNIT_SIZE, 3);
	CHECK_EQ(part_alloc(f.tx, 8, &b), 0);
	CHECK_EQ(ppt_move(f.tx, a, b, (8 * FR_GIB) >> 12), 0);
	tx_defer(f.tx, vs_moved, a, b, (8 * FR_GIB) >> 21);
	sfix_apply(&f);
	CHECK(same(&f, b + 3 * FR_GIB, FR_UNIT_SIZE, 2));
	CHECK(same(&f, b + 7 * FR_GIB + FR_UNIT_SIZE, FR_UNIT_SIZE, 3));
	CHECK_EQ(ppt_window(&f.sp, a + 3 * FR_GIB), PPT_NONE);
	CHECK_EQ(ppt_page(&f.sp, b + 5 * FR_GIB), 0); /* holes stay holes */
	sfix_close(&f);
	return 0;
}

static int page_by_page_windows_move(void)
{
	struct sfix f;
	CHECK(sfix_open(&f, "t3", 32 * FR_MIB) == 0);
	/* Take every whole unit, then give back two units minus one page each:
	 * the next large window must be assembled from smaller blocks. */
	int64_t units[64];
	int n = 0;
	int64_t u;
	while ((u = bud_alloc(f.tx, BUD_TOP_ORDER)) >= 0 && n < 64)
		units[n++] = u;
	sfix_apply(&f);
	CHECK(n >= 4);
	for (int i = 0; i < 2; i++) {
		bud_free(f.tx, (uint64_t)units[i], BUD_TOP_ORDER);
		sfix_apply(&f);
		CHECK_EQ(bud_alloc_at(f.tx, (uint64_t)units[i], 0), 0);
		sfix_apply(&f);
	}
	uint64_t a, b, phys;
	CHECK_EQ(part_alloc(f.tx, 3, &a), 0);
	sfix_apply(&f);
	CHECK_EQ(part_large_back(f.tx, a, &phys), 0);
	sfix_apply(&f);
	CHECK_EQ(ppt_window(&f.sp, a) & PPT_TYPE_MASK, PPT_TABLE);
	fill(&f, a, FR_UNIT_SIZE, 4);
	CHECK_EQ(part_alloc(f.tx, 4, &b), 0);
	CHECK_EQ(ppt_move(f.tx, a, b, 512), 0);
	tx_defer(f.tx, vs_moved, a, b, 1);
	sfix_apply(&f);
	uint64_t went = ppt_window(&f.sp, b);
	CHECK_EQ(went & PPT_TYPE_MASK, PPT_TABLE);
	CHECK_EQ(ppt_table(&f.sp, went)->pt_vaddr, b); /* Q3 */
	CHECK(same(&f, b, FR_UNIT_SIZE, 4));
	part_large_unback(f.tx, b);
	sfix_apply(&f);
	CHECK_EQ(bud_check(&f.sp, NULL, NULL), 0);
	sfix_close(&f);
	return 0;
}

static const struct unit_case cases[] = {
    {"move_windows_keeps_data", move_windows_keeps_data},
    {"move_whole_gib_entries", move_whole_gib_entries},
    {"page_by_page_windows_move", page_by_page_windows_move},
};
UNIT_MAIN(cases)
