/*
 * tx_test.c -- transaction staging: reads see the transaction's own staged
 * words (whole, partial, across words), nothing reaches the pool before the
 * transaction is applied, an abandoned transaction leaves no trace, and
 * queued releases run only when the transaction is finalised.
 */
#include "space_fixture.h"

static int staged_reads_and_no_early_writes(void)
{
	struct sfix f;
	CHECK(sfix_open(&f, "tx1", 32 * FR_MIB) == 0);
	uint64_t off = (f.sp.data_page << 12) + 8192;
	char *pm = f.p.base + off;
	memset(pm, 0x11, 64);
	struct tx *tx = f.tx;
	tx_set8(tx, pm, 0x2222222222222222ULL);
	CHECK_EQ(tx_get8(tx, pm), 0x2222222222222222ULL);
	CHECK_EQ(*(uint64_t *)pm, 0x1111111111111111ULL); /* not yet in place */
	tx_set1(tx, pm + 9, 0x33);			  /* sub-word */
	CHECK_EQ(tx_get1(tx, pm + 9), 0x33);
	CHECK_EQ(tx_get1(tx, pm + 8), 0x11);
	tx_set4(tx, pm + 6, 0x44444444u); /* straddles two words */
	CHECK_EQ(tx_get4(tx, pm + 6), 0x44444444u);
	CHECK_EQ(tx_get1(tx, pm + 5), 0x22);
	char buf[24];
	tx_get(tx, pm, buf, sizeof(buf));
	CHECK_EQ((unsigned char)buf[9], 0x44);
	CHECK_EQ((unsigned char)buf[16], 0x11);
	sfix_apply(&f);
	CHECK_EQ((unsigned char)pm[9], 0x44);
	CHECK_EQ((unsigned char)pm[10], 0x11);
	uint32_t v32;
	memcpy(&v32, pm + 6, 4);
	CHECK_EQ(v32, 0x44444444u);
	sfix_close(&f);
	return 0;
}

static int abort_leaves_no_trace(void)
{
	struct sfix f;
	CHECK(sfix_open(&f, "tx2", 32 * FR_MIB) == 0);
	uint64_t free0 = bud_free_pages(&f.sp);
	char *pm = f.p.base + (f.sp.data_page << 12) + 4096 * 7;
	uint64_t before = *(uint64_t *)pm;
	tx_set8(f.tx, pm, ~before);
	CHECK(bud_alloc(f.tx, 3) >= 0);
	tx_abort(f.tx);
	tx_begin(f.tx);
	CHECK_EQ(*(uint64_t *)pm, before);
	CHECK_EQ(bud_free_pages(&f.sp), free0);
	CHECK_EQ(bud_check(&f.sp, NULL, NULL), 0);
	sfix_close(&f);
	return 0;
}

static int frees_wait_for_finalize(void)
{
	struct sfix f;
	CHECK(sfix_open(&f, "tx3", 32 * FR_MIB) == 0);
	int64_t a = bud_alloc(f.tx, 0);
	CHECK(a >= 0);
	sfix_apply(&f);
	/* Freed and allocated again in one transaction: must not come back. */
	bud_free(f.tx, (uint64_t)a, 0);
	for (int i = 0; i < 600; i++) {
		int64_t b = bud_alloc(f.tx, 0);
		if (b < 0)
			break;
		CHECK(b != a);
	}
	sfix_apply(&f);
	CHECK(bud_free_order(&f.sp, NULL, (uint64_t)a) >= 0); /* released at the end */
	CHECK_EQ(bud_check(&f.sp, NULL, NULL), 0);
	sfix_close(&f);
	return 0;
}

static int overflow_is_reported(void)
{
	struct sfix f;
	CHECK(sfix_open(&f, "tx4", 64 * FR_MIB) == 0);
	char *pm = f.p.base + (f.sp.data_page << 12);
	for (int i = 0; i < TX_MAX_RUNS + 10; i++)
		tx_set8(f.tx, pm + 8 * (uint64_t)i * 3, (uint64_t)i);
	CHECK(tx_status(f.tx) != 0);
	tx_abort(f.tx);
	tx_begin(f.tx);
	CHECK_EQ(tx_status(f.tx), 0);
	sfix_close(&f);
	return 0;
}

static const struct unit_case cases[] = {
    {"staged_reads_and_no_early_writes", staged_reads_and_no_early_writes},
    {"abort_leaves_no_trace", abort_leaves_no_trace},
    {"frees_wait_for_finalize", frees_wait_for_finalize},
    {"overflow_is_reported", overflow_is_reported},
};
UNIT_MAIN(cases)
