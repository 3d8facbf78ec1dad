/*
 * age.c -- Geriatrix-style aging (see age.h): what a pool looks like after
 * years of use, made in seconds -- free space in pieces all over it, files
 * whose pages were written at different times, reservations given back.
 * The churn keeps the pool between half and nine tenths full, so it runs
 * near the allocator's hard cases without being refused.
 */
#include "age.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#define KiB 1024ULL
#define MiB (1024 * KiB)

uint64_t age_rnd(uint64_t *r)
{
	uint64_t z = (*r += 0x9e3779b97f4a7c15ULL);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

uint64_t age_tree_size(uint64_t *r)
{
	uint64_t u = age_rnd(r) % 1000;
	if (u < 350)
		return 200 + age_rnd(r) % (8 * KiB);
	if (u < 650)
		return 2 * KiB + age_rnd(r) % (58 * KiB);
	if (u < 900)
		return 8 * KiB + age_rnd(r) % (120 * KiB);
	if (u < 985)
		return 128 * KiB + age_rnd(r) % (896 * KiB);
	return 1 * MiB + age_rnd(r) % (4 * MiB);
}

enum { NAGE = 4096 };

static void name_of(char *p, size_t n, const char *dir, long i)
{
	snprintf(p, n, "%s/g%05ld", dir, i);
}

/* Appends a tree-sized run to file i (creating it); returns bytes written. */
static uint64_t append_some(ferrite_fs *fs, const char *p, uint64_t *r)
{
	static char buf[64 * 1024];
	memset(buf, 'a', sizeof buf);
	int fd = ferrite_open(fs, p, O_CREAT | O_WRONLY | O_APPEND, 0644);
	if (fd < 0)
		return 0;
	uint64_t n = age_tree_size(r), done = 0;
	while (done < n) {
		size_t k = (size_t)(n - done < sizeof buf ? n - done : sizeof buf);
		ssize_t w = ferrite_write(fs, fd, buf, k);
		if (w <= 0)
			break;
		done += (uint64_t)w;
	}
	ferrite_close(fs, fd);
	return done;
}

int age_pool(ferrite_fs *fs, const char *dir, uint64_t target, uint64_t pool_bytes, uint64_t *r,
	     void (*progress)(uint64_t written, uint64_t target), struct age_stats *st)
{
	static uint64_t sz[NAGE];
	memset(sz, 0, sizeof sz);
	memset(st, 0, sizeof *st);
	int rc = ferrite_mkdir(fs, dir, 0755);
	if (rc < 0 && rc != -EEXIST)
		return rc;
	uint64_t used = 0, next_report = target / 20;
	while (st->written < target) {
		long i = (long)(age_rnd(r) % NAGE), j;
		char p[256], q[256];
		name_of(p, sizeof p, dir, i);
		unsigned op = (unsigned)(age_rnd(r) % 100);
		int full = used > pool_bytes / 10 * 9, low = used < pool_bytes / 2;
		st->ops++;
		if (sz[i] && (full || op < 25)) { /* delete */
			if (ferrite_unlink(fs, p) == 0) {
				used -= sz[i];
				sz[i] = 0;
			}
		} else if (sz[i] && op < 40) { /* truncate to a part of it */
			uint64_t n = age_rnd(r) % sz[i];
			if (ferrite_truncate(fs, p, (off_t)n) == 0) {
				used -= sz[i] - n;
				sz[i] = n;
			}
		} else if (sz[i] && op < 50) { /* rename over another slot */
			j = (long)(age_rnd(r) % NAGE);
			name_of(q, sizeof q, dir, j);
			if (j != i && ferrite_rename(fs, p, q, 0) == 0) {
				used -= sz[j];
				sz[j] = sz[i];
				sz[i] = 0;
			}
		} else if (!full || low) { /* create or append */
			uint64_t w = append_some(fs, p, r);
			sz[i] += w;
			used += w;
			st->written += w;
			if (progress && st->written >= next_report) {
				progress(st->written, target);
				next_report += target / 20;
			}
		}
	}
	/* half of what is left goes, leaving holes all over the pool */
	for (long i = 0; i < NAGE; i++) {
		char p[256];
		name_of(p, sizeof p, dir, i);
		if (sz[i] && age_rnd(r) % 2 && ferrite_unlink(fs, p) == 0) {
			used -= sz[i];
			sz[i] = 0;
		}
	}
	st->kept = used;
	return 0;
}
