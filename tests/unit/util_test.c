/*
 * util_test.c -- checksums and the name hash. The hardware and table
 * crc32c must agree (pools move between machines); known vectors pin the
 * polynomial; the name hash must stay in its cookie range and depend on the
 * seed and every byte.
 */
#include "unit.h"
#include "util/util.h"

uint32_t fr_crc32c_sw(uint32_t crc, const void *buf, size_t len);

static int crc_known_vectors(void)
{
	CHECK_EQ(fr_crc32c(0, "123456789", 9), 0xE3069283u);
	CHECK_EQ(fr_crc32c(0, "", 0), 0);
	char zeros[32] = {0};
	CHECK_EQ(fr_crc32c(0, zeros, 32), 0x8A9136AAu);
	return 0;
}

static int crc_hw_matches_table(void)
{
	unsigned char buf[4099];
	for (size_t i = 0; i < sizeof(buf); i++)
		buf[i] = (unsigned char)(i * 131 + 7);
	for (size_t off = 0; off < 9; off++)
		for (size_t len = 0; len + off <= sizeof(buf); len += 97)
			CHECK_EQ(fr_crc32c(5, buf + off, len), fr_crc32c_sw(5, buf + off, len));
	/* chaining equals one pass */
	CHECK_EQ(fr_crc32c(fr_crc32c(0, buf, 1000), buf + 1000, 3099), fr_crc32c(0, buf, 4099));
	return 0;
}

static int hash_range_and_sensitivity(void)
{
	char name[256];
	for (int len = 1; len <= 255; len++) {
		memset(name, 'a', (size_t)len);
		uint64_t h = fr_name_hash(42, name, (size_t)len);
		CHECK(h >= FR_HASH_MIN && h <= FR_HASH_MAX);
		name[len - 1] = 'b';
		CHECK(fr_name_hash(42, name, (size_t)len) != h);
		CHECK(fr_name_hash(43, name, (size_t)len) != fr_name_hash(42, name, (size_t)len));
	}
	/* names differing only in length */
	CHECK(fr_name_hash(1, "ab", 1) != fr_name_hash(1, "ab", 2));
	return 0;
}

static int hash_spreads_over_prefixes(void)
{
	/* The directory index uses the top bits: 64 prefixes should all be hit
	 * by a few thousand sequential names. */
	int seen[64] = {0};
	char name[32];
	for (int i = 0; i < 4096; i++) {
		int n = snprintf(name, sizeof(name), "file%06d", i);
		seen[fr_name_hash(7, name, (size_t)n) >> 57]++;
	}
	for (int i = 0; i < 64; i++)
		CHECK(seen[i] > 20 && seen[i] < 120);
	return 0;
}

static const struct unit_case cases[] = {
    {"crc_known_vectors", crc_known_vectors},
    {"crc_hw_matches_table", crc_hw_matches_table},
    {"hash_range_and_sensitivity", hash_range_and_sensitivity},
    {"hash_spreads_over_prefixes", hash_spreads_over_prefixes},
};
UNIT_MAIN(cases)
