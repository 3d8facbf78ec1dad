/*
 * crc32c.c -- CRC-32C used for the superblock checksum and log entry
 * fingerprints. Uses the SSE4.2 crc32 instruction when present and a table
 * otherwise; both give identical results (tested in tests/unit/util).
 */
#include "util.h"

#include <cpuid.h>
#include <nmmintrin.h>
#include <string.h>

static uint32_t crc_table[256];
static int crc_hw = -1;

static void crc_init(void)
{
	for (uint32_t i = 0; i < 256; i++) {
		uint32_t c = i;
		for (int k = 0; k < 8; k++)
			c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
		crc_table[i] = c;
	}
	unsigned a, b, c, d;
	crc_hw = __get_cpuid(1, &a, &b, &c, &d) && (c & bit_SSE4_2);
}

static uint32_t crc_sw(uint32_t crc, const unsigned char *p, size_t len)
{
	while (len--)
		crc = crc_table[(crc ^ *p++) & 0xff] ^ (crc >> 8);
	return crc;
}

__attribute__((target("sse4.2"))) static uint32_t crc_hw_run(uint32_t crc, const unsigned char *p,
							     size_t len)
{
	uint64_t c = crc;
	while (len >= 8) {
		uint64_t w;
		memcpy(&w, p, 8);
		c = _mm_crc32_u64(c, w);
		p += 8;
		len -= 8;
	}
	uint32_t c32 = (uint32_t)c;
	while (len--)
		c32 = _mm_crc32_u8(c32, *p++);
	return c32;
}

uint32_t fr_crc32c(uint32_t crc, const void *buf, size_t len)
{
	if (FR_UNLIKELY(crc_hw < 0))
		crc_init();
	crc = ~crc;
	crc = crc_hw ? crc_hw_run(crc, buf, len) : crc_sw(crc, buf, len);
	return ~crc;
}

/* Exposed for the unit test that compares both paths. */
uint32_t fr_crc32c_sw(uint32_t crc, const void *buf, size_t len);
uint32_t fr_crc32c_sw(uint32_t crc, const void *buf, size_t len)
{
	if (FR_UNLIKELY(crc_hw < 0))
		crc_init();
	return ~crc_sw(~crc, buf, len);
}
