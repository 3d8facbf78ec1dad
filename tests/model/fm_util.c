/*
 * fm_util.c -- deterministic random numbers and data, recursive removal and
 * errno names for the model and crash tests. Determinism here is what makes a
 * failing seed replayable: the same seed yields the same ops and the same bytes.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "fm.h"

#include <errno.h>
#include <ftw.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

uint64_t fm_rand(struct fm_rng *r)
{
	uint64_t z = (r->s += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

uint64_t fm_below(struct fm_rng *r, uint64_t n)
{
	if (n == 0)
		return 0;
	return fm_rand(r) % n;
}

int64_t fm_range(struct fm_rng *r, int64_t lo, int64_t hi)
{
	if (hi <= lo)
		return lo;
	return lo + (int64_t)fm_below(r, (uint64_t)(hi - lo) + 1);
}

uint64_t fm_mix(uint64_t a, uint64_t b)
{
	struct fm_rng r = {a * 0x2545f4914f6cdd1dull ^ b};
	fm_rand(&r);
	return fm_rand(&r);
}

void fm_fill(void *buf, size_t len, uint64_t seed)
{
	uint8_t *p = buf;
	if (seed % 10 == 0) {
		memset(buf, 0, len);
		return;
	}
	struct fm_rng r = {seed};
	size_t i = 0;
	for (; i + 8 <= len; i += 8) {
		uint64_t v = fm_rand(&r);
		memcpy(p + i, &v, 8);
	}
	if (i < len) {
		uint64_t v = fm_rand(&r);
		memcpy(p + i, &v, len - i);
	}
}

static int rm_one(const char *p, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)ftw;
	if (flag == FTW_DP || flag == FTW_D)
		return rmdir(p) < 0 && errno != ENOENT ? -1 : 0;
	return unlink(p) < 0 && errno != ENOENT ? -1 : 0;
}

int fm_rm_rf(const char *path)
{
	if (access(path, F_OK) != 0)
		return 0;
	return nftw(path, rm_one, 32, FTW_DEPTH | FTW_PHYS);
}

const char *fm_errname(int64_t ret)
{
	static __thread char buf[32];
	if (ret >= 0) {
		snprintf(buf, sizeof buf, "%lld", (long long)ret);
		return buf;
	}
	const char *n = strerrorname_np((int)-ret);
	if (n)
		return n;
	snprintf(buf, sizeof buf, "-%lld", (long long)-ret);
	return buf;
}
