/*
 * hash.c -- name hash for directory indexes. A per-pool random seed (in the
 * superblock) keys it, so crafted names cannot pile into one bucket. The mix
 * is a multiply-xorshift over 8-byte words; the result is folded into
 * [FR_HASH_MIN, FR_HASH_MAX] so it can serve as a readdir cookie.
 */
#include "util.h"

#include <string.h>

static inline uint64_t mix64(uint64_t x)
{
	x ^= x >> 30;
	x *= 0xbf58476d1ce4e5b9ULL;
	x ^= x >> 27;
	x *= 0x94d049bb133111ebULL;
	x ^= x >> 31;
	return x;
}

uint64_t fr_name_hash(uint64_t seed, const char *name, size_t len)
{
	uint64_t h = mix64(seed ^ (len * 0x9e3779b97f4a7c15ULL));
	const unsigned char *p = (const unsigned char *)name;
	while (len >= 8) {
		uint64_t w;
		memcpy(&w, p, 8);
		h = mix64(h ^ w) + 0x9e3779b97f4a7c15ULL;
		p += 8;
		len -= 8;
	}
	uint64_t tail = 0;
	memcpy(&tail, p, len);
	h = mix64(h ^ tail ^ ((uint64_t)len << 56));
	h &= (1ULL << 63) - 1;
	if (h > FR_HASH_MAX)
		h -= 512;
	if (h < FR_HASH_MIN)
		h += FR_HASH_MIN;
	return h;
}
