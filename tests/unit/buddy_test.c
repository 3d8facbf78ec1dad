/*
 * buddy_test.c -- the physical allocator against a model: random
 * allocations and frees of every order never overlap, always merge back,
 * keep the free count exact (bud_check), allocate at a chosen page only when
 * it is free, and report ENOSPC when exhausted.
 */
#include "space_fixture.h"

static int fresh_pool_is_all_free(void)
{
	struct sfix f;
	CHECK(sfix_open(&f, "b1", 64 * FR_MIB) == 0);
	/* mkfs used the PPT root, a PUD and a PMD page, and the root's header */
	CHECK_EQ(bud_free_pages(&f.sp), f.sp.data_end_page - f.sp.data_page - 4);
	CHECK_EQ(bud_check(&f.sp, NULL, NULL), 0);
	sfix_close(&f);
	return 0;
}

static int every_order_allocates_aligned_and_merges_back(void)
{
	struct sfix f;
	CHECK(sfix_open(&f, "b2", 64 * FR_MIB) == 0);
	uint64_t free0 = bud_free_pages(&f.sp);
	int64_t got[BUD_ORDERS];
	for (int k = 0; k < BUD_ORDERS; k++) {
		got[k] = bud_alloc(f.tx, k);
		CHECK(got[k] >= 0);
		CHECK_EQ(((uint64_t)got[k] - f.sp.data_page) % (1ULL << k), 0);
	}
	sfix_apply(&f);
	CHECK_EQ(bud_check(&f.sp, NULL, NULL), 0);
	for (int k = 0; k < BUD_ORDERS; k++)
		bud_free(f.tx, (uint64_t)got[k], k);
	sfix_apply(&f);
	CHECK_EQ(bud_free_pages(&f.sp), free0);
	CHECK_EQ(bud_check(&f.sp, NULL, NULL), 0);
	sfix_close(&f);
	return 0;
}

static int alloc_at_only_when_free(void)
{
	struct sfix f;
	CHECK(sfix_open(&f, "b3", 64 * FR_MIB) == 0);
	uint64_t p = f.sp.data_page + 3 * 512 + 17;
	CHECK_EQ(bud_alloc_at(f.tx, p, 0), 0);
	sfix_apply(&f);
	CHECK_EQ(bud_alloc_at(f.tx, p, 0), -ENOSPC);
	CHECK_EQ(bud_alloc_at(f.tx, p - 1, 1), -ENOSPC); /* its buddy pair is not whole */
	CHECK_EQ(bud_alloc_at(f.tx, p + 1, 0), 0);
	CHECK_EQ(bud_alloc_at(f.tx, p + 2, 1), -EINVAL); /* misaligned for order 1? 19 is odd */
	sfix_apply(&f);
	CHECK_EQ(bud_free_order(&f.sp, NULL, p), -1);
	bud_free(f.tx, p, 0);
	bud_free(f.tx, p + 1, 0);
	sfix_apply(&f);
	CHECK_EQ(bud_check(&f.sp, NULL, NULL), 0);
	CHECK(bud_free_order(&f.sp, NULL, p) >= 0);
	sfix_close(&f);
	return 0;
}

static int exhaustion_reports_enospc(void)
{
	struct sfix f;
	CHECK(sfix_open(&f, "b4", 32 * FR_MIB) == 0);
	uint64_t units = 0;
	for (;;) {
		int64_t u = bud_alloc(f.tx, BUD_TOP_ORDER);
		if (u < 0) {
			CHECK_EQ(u, -ENOSPC);
			break;
		}
		units++;
		sfix_apply(&f);
	}
	CHECK(units >= 8);
	/* Smaller blocks remain in the partly used units (PPT root, headers). */
	uint64_t pages = 0;
	while (bud_alloc(f.tx, 0) >= 0)
		pages++, sfix_apply(&f);
	CHECK_EQ(bud_free_pages(&f.sp), 0);
	CHECK_EQ(bud_check(&f.sp, NULL, NULL), 0);
	sfix_close(&f);
	return 0;
}

struct blk {
	uint64_t page;
	int order;
};

static int random_against_model(void)
{
	struct sfix f;
	CHECK(sfix_open(&f, "b5", 128 * FR_MIB) == 0);
	uint64_t n = f.sp.data_end_page - f.sp.data_page;
	unsigned char *owner = calloc(n, 1);
	struct blk *live = calloc(20000, sizeof(*live));
	size_t nlive = 0;
	uint64_t free0 = bud_free_pages(&f.sp);
	srand(12345);
	for (int op = 0; op < 20000; op++) {
		if (nlive && (rand() % 3 == 0 || nlive == 20000)) {
			size_t i = (size_t)rand() % nlive;
			bud_free(f.tx, live[i].page, live[i].order);
			for (uint64_t p = 0; p < (1ULL << live[i].order); p++)
				owner[live[i].page - f.sp.data_page + p] = 0;
			live[i] = live[--nlive];
		} else {
			int k = rand() % 10 == 0 ? 9 : rand() % 5;
			int64_t b = bud_alloc(f.tx, k);
			if (b < 0)
				continue;
			for (uint64_t p = 0; p < (1ULL << k); p++) {
				CHECK(owner[(uint64_t)b - f.sp.data_page + p] ==
				      0); /* no overlap */
				owner[(uint64_t)b - f.sp.data_page + p] = 1;
			}
			live[nlive++] = (struct blk){(uint64_t)b, k};
		}
		if (op % 7 == 0)
			sfix_apply(&f);
		if (op % 2000 == 0) {
			sfix_apply(&f);
			CHECK_EQ(bud_check(&f.sp, NULL, NULL), 0);
		}
	}
	for (size_t i = 0; i < nlive; i++) {
		bud_free(f.tx, live[i].page, live[i].order);
		if (i % 100 == 99)
			sfix_apply(&f);
	}
	sfix_apply(&f);
	CHECK_EQ(bud_free_pages(&f.sp), free0);
	CHECK_EQ(bud_check(&f.sp, NULL, NULL), 0);
	free(owner);
	free(live);
	sfix_close(&f);
	return 0;
}

static const struct unit_case cases[] = {
    {"fresh_pool_is_all_free", fresh_pool_is_all_free},
    {"every_order_allocates_aligned_and_merges_back",
     every_order_allocates_aligned_and_merges_back},
    {"alloc_at_only_when_free", alloc_at_only_when_free},
    {"exhaustion_reports_enospc", exhaustion_reports_enospc},
    {"random_against_model", random_against_model},
};
UNIT_MAIN(cases)
