/*
 * strict_cutover.c -- where strict mode should stop copying overwrites
 * through the redo log and swap pages instead (bench/README.md#strict).
 *
 * For each write size, the same random page-aligned overwrites of one file
 * are timed twice on a strict pool: once with every overwrite that fits a log
 * entry copied through the log ($FERRITE_STRICT_REDO_MAX large), once with
 * every overwrite swapped ($FERRITE_STRICT_REDO_MAX=0). Both mounts see the
 * same file (written sequentially first, so its windows are whole units, and
 * read once so the process's mappings exist, as in the RW micro-benchmark).
 * Each measurement first runs the same overwrites once untimed, so the redo
 * side does not pay first-touch faults of the pool's direct mapping (4 KiB
 * pages) that a long-running process would not pay either.
 *
 *   ferrite-strict-cutover [POOL] [FILE_MIB] [OPS]
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <ferrite.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static uint64_t rnd(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

/* Mean microseconds per overwrite of npages pages, with redo_max. */
static double run(const char *pool, const char *redo_max, uint64_t fsize, unsigned npages,
		  unsigned ops, char *buf)
{
	setenv("FERRITE_STRICT_REDO_MAX", redo_max, 1);
	ferrite_fs *fs;
	if (ferrite_mount(pool, NULL, &fs)) {
		fprintf(stderr, "mount: %s\n", ferrite_errmsg());
		exit(1);
	}
	int fd = ferrite_open(fs, "/f", O_RDWR, 0);
	uint64_t seed = 42 + npages, len = (uint64_t)npages * 4096;
	/* warm-up: the same overwrites once, untimed (faults, allocator state) */
	for (unsigned i = 0; i < ops; i++) {
		uint64_t off = (rnd(&seed) % ((fsize - len) / 4096)) * 4096;
		ferrite_pwrite(fs, fd, buf, len, (off_t)off);
	}
	seed = 4242 + npages;
	double t0 = now();
	for (unsigned i = 0; i < ops; i++) {
		uint64_t off = (rnd(&seed) % ((fsize - len) / 4096)) * 4096;
		if (ferrite_pwrite(fs, fd, buf, len, (off_t)off) != (ssize_t)len) {
			fprintf(stderr, "pwrite: %s\n", ferrite_errmsg());
			exit(1);
		}
	}
	double us = (now() - t0) * 1e6 / ops;
	ferrite_close(fs, fd);
	ferrite_unmount(fs);
	return us;
}

int main(int argc, char **argv)
{
	const char *pool = argc > 1 ? argv[1] : "/dev/shm/ferrite-cutover.pool";
	uint64_t fsize = (argc > 2 ? strtoull(argv[2], NULL, 0) : 256) << 20;
	unsigned ops = argc > 3 ? (unsigned)atoi(argv[3]) : 2000;
	struct ferrite_mkfs_opts mo = {
	    .size = fsize * 2 + (256ULL << 20), .mode = FERRITE_MODE_STRICT, .force = 1};
	if (ferrite_mkfs(pool, &mo)) {
		fprintf(stderr, "mkfs: %s\n", ferrite_errmsg());
		return 1;
	}
	ferrite_fs *fs;
	char *buf = malloc(fsize < (64 << 20) ? fsize : (64 << 20));
	memset(buf, 0x5a, fsize < (64 << 20) ? fsize : (64 << 20));
	if (ferrite_mount(pool, NULL, &fs))
		return 1;
	int fd = ferrite_open(fs, "/f", O_CREAT | O_RDWR, 0644);
	for (uint64_t off = 0; off < fsize; off += 1 << 20)
		ferrite_pwrite(fs, fd, buf, 1 << 20, (off_t)off); /* appends: whole units */
	for (uint64_t off = 0; off < fsize; off += 1 << 20)
		ferrite_pread(fs, fd, buf, 1 << 20, (off_t)off);
	ferrite_close(fs, fd);
	ferrite_unmount(fs);
	printf("%-8s %12s %12s %8s\n", "pages", "redo us", "swap us", "swap/redo");
	static const unsigned sizes[] = {1, 2, 3, 4, 6, 7, 8, 16, 32, 64, 256};
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		double r = run(pool, "1073741824", fsize, sizes[i], ops, buf);
		double s = run(pool, "0", fsize, sizes[i], ops, buf);
		printf("%-8u %12.2f %12.2f %8.2f%s\n", sizes[i], r, s, s / r,
		       sizes[i] * 4096 > 28 * 1024 ? "  (redo: too large for one entry, swapped)"
						   : "");
	}
	free(buf);
	unlink(pool);
	return 0;
}
