/*
 * part_test.c -- the ctFS partition tree: partitions of every level come out
 * aligned to their size and never overlap; headers and availability masks
 * stay consistent (part_walk); the virtual space runs out with ENOSPC;
 * freeing everything collapses the tree and returns every header page.
 */
#include "space_fixture.h"

struct range {
	uint64_t v;
	int level;
};

static int overlaps(const struct range *r, size_t n, uint64_t v, int level)
{
	uint64_t end = v + sp_level_size(level);
	for (size_t i = 0; i < n; i++) {
		uint64_t e = r[i].v + sp_level_size(r[i].level);
		if (v < e && r[i].v < end)
			return 1;
	}
	return 0;
}

static int every_level_aligned_and_disjoint(void)
{
	struct sfix f;
	CHECK(sfix_open(&f, "p1", 64 * FR_MIB) == 0);
	struct range r[200];
	size_t n = 0;
	for (int level = 0; level < f.sp.top_level - 1; level++)
		for (int k = 0; k < 5; k++) {
			uint64_t v;
			CHECK_EQ(part_alloc(f.tx, level, &v), 0);
			sfix_apply(&f);
			CHECK_EQ(v % sp_level_size(level), 0);
			CHECK(v + sp_level_size(level) <= f.sp.vsize);
			CHECK(!overlaps(r, n, v, level));
			CHECK_EQ(part_level_at(&f.sp, v), level);
			r[n++] = (struct range){v, level};
		}
	struct part_stats st;
	CHECK_EQ(part_walk(&f.sp, NULL, NULL, NULL, &st, NULL, NULL), 0);
	for (int level = 0; level < f.sp.top_level - 1; level++)
		CHECK_EQ(st.allocated[level], 5);
	sfix_close(&f);
	return 0;
}

static int top_children_run_out(void)
{
	struct sfix f;
	CHECK(sfix_open(&f, "p2", 32 * FR_MIB) == 0);
	int top = f.sp.top_level;
	uint64_t v;
	/* Child 0 of the root holds the headers: 7 children of the top-1 level. */
	for (int i = 0; i < 7; i++) {
		CHECK_EQ(part_alloc(f.tx, top - 1, &v), 0);
		sfix_apply(&f);
	}
	CHECK_EQ(part_alloc(f.tx, top - 1, &v), -ENOSPC);
	tx_abort(f.tx);
	tx_begin(f.tx);
	CHECK_EQ(part_alloc(f.tx, top, &v), -EFBIG);
	tx_abort(f.tx);
	tx_begin(f.tx);
	CHECK_EQ(part_walk(&f.sp, NULL, NULL, NULL, NULL, NULL, NULL), 0);
	sfix_close(&f);
	return 0;
}

static void count_dir_pages(void *arg, uint64_t v, uint64_t ent)
{
	if (v == ~0ULL)
		++*(uint64_t *)arg;
}

static int free_all_collapses(void)
{
	struct sfix f;
	CHECK(sfix_open(&f, "p3", 128 * FR_MIB) == 0);
	uint64_t free0 = bud_free_pages(&f.sp);
	enum { N = 3000 };
	struct range *r = calloc(N, sizeof(*r));
	srand(7);
	for (int i = 0; i < N; i++) {
		int level = rand() % 4 == 0 ? 3 + rand() % 3 : rand() % 3;
		CHECK_EQ(part_alloc(f.tx, level, &r[i].v), 0);
		r[i].level = level;
		if (i % 3 == 0)
			sfix_apply(&f);
	}
	sfix_apply(&f);
	CHECK_EQ(part_walk(&f.sp, NULL, NULL, NULL, NULL, NULL, NULL), 0);
	/* free in a shuffled order */
	for (int i = N - 1; i > 0; i--) {
		int j = rand() % (i + 1);
		struct range t = r[i];
		r[i] = r[j];
		r[j] = t;
	}
	for (int i = 0; i < N; i++) {
		part_free(f.tx, r[i].v, r[i].level);
		if (i % 5 == 0)
			sfix_apply(&f);
		if (i % 500 == 0) {
			sfix_apply(&f);
			CHECK_EQ(part_walk(&f.sp, NULL, NULL, NULL, NULL, NULL, NULL), 0);
		}
	}
	sfix_apply(&f);
	struct part_stats st;
	CHECK_EQ(part_walk(&f.sp, NULL, NULL, NULL, &st, NULL, NULL), 0);
	for (int l = 0; l <= SP_MAX_LEVEL; l++)
		CHECK_EQ(st.allocated[l], 0);
	/* Every header page went back; page-table directory pages stay. */
	uint64_t dirs = 0;
	ppt_check_dirs(&f.sp, count_dir_pages, &dirs);
	CHECK_EQ(bud_free_pages(&f.sp) + dirs, free0 + 3 /* mkfs's root, PUD, PMD */);
	CHECK_EQ(bud_check(&f.sp, NULL, NULL), 0);
	free(r);
	sfix_close(&f);
	return 0;
}

static int small_partitions_pack_into_windows(void)
{
	struct sfix f;
	CHECK(sfix_open(&f, "p4", 64 * FR_MIB) == 0);
	/* 2 * 511 L0 partitions fill exactly two L3 windows (child 0 is the header). */
	uint64_t first = ~0ULL, last = 0;
	for (int i = 0; i < 2 * 511; i++) {
		uint64_t v;
		CHECK_EQ(part_alloc(f.tx, 0, &v), 0);
		sfix_apply(&f);
		CHECK(v % FR_UNIT_SIZE != 0); /* never page 0 of a window */
		first = v < first ? v : first;
		last = v > last ? v : last;
	}
	CHECK(last - first < 2 * FR_UNIT_SIZE);
	CHECK_EQ(part_walk(&f.sp, NULL, NULL, NULL, NULL, NULL, NULL), 0);
	sfix_close(&f);
	return 0;
}

static int small_pages_prefer_the_home_unit(void)
{
	struct sfix f;
	CHECK(sfix_open(&f, "p5", 64 * FR_MIB) == 0);
	uint64_t v;
	CHECK_EQ(part_alloc(f.tx, 1, &v), 0); /* 32 KiB partition */
	sfix_apply(&f);
	uint64_t went = ppt_window(&f.sp, v);
	CHECK_EQ(went & PPT_TYPE_MASK, PPT_TABLE);
	uint64_t home = ppt_table(&f.sp, went)->pt_home;
	CHECK(home != 0);
	for (uint64_t p = 0; p < 8; p++) {
		uint64_t phys;
		int fresh;
		CHECK_EQ(part_small_back(f.tx, v + p * 4096, &phys, &fresh), 0);
		CHECK(fresh);
		CHECK_EQ(phys, home + ((v + p * 4096) & (FR_UNIT_SIZE - 1)));
	}
	sfix_apply(&f);
	CHECK_EQ(ppt_page(&f.sp, v + 4096), home + ((v + 4096) & (FR_UNIT_SIZE - 1)));
	part_small_unback(f.tx, v, 8 * 4096);
	part_free(f.tx, v, 1);
	sfix_apply(&f);
	CHECK_EQ(part_walk(&f.sp, NULL, NULL, NULL, NULL, NULL, NULL), 0);
	CHECK_EQ(bud_check(&f.sp, NULL, NULL), 0);
	sfix_close(&f);
	return 0;
}

static const struct unit_case cases[] = {
    {"every_level_aligned_and_disjoint", every_level_aligned_and_disjoint},
    {"top_children_run_out", top_children_run_out},
    {"free_all_collapses", free_all_collapses},
    {"small_partitions_pack_into_windows", small_partitions_pack_into_windows},
    {"small_pages_prefer_the_home_unit", small_pages_prefer_the_home_unit},
};
UNIT_MAIN(cases)
