/*
 * punch_kill_test.c -- a hole punched through clean cached chunks of a tiered
 * pool, killed while it runs: the cache must never keep bytes the backing
 * file no longer holds.
 *
 * What it checks: each round, a child mounts the tiered pool, writes a 4 MiB
 * pattern into /f, waits until the flusher has drained it (its chunks are now
 * cached and clean), then punches a hole from an unaligned offset to an
 * unaligned end (whole chunks in the backing file, zeros written through the
 * cache at the edges). The parent kills the child at a random moment of the
 * punch, then requires fsck to be clean (it compares every clean chunk with
 * its backing file), the pool to mount, /f to keep its size, every byte in
 * the hole to be the pattern's or zero and every byte outside it the
 * pattern's; and, after an unmount has drained the cache, the backing file to
 * hold exactly what was read through the pool.
 * Why: cache.c C1 -- a clean chunk may be dropped at any moment, so one
 * whose backing bytes changed underneath it shows old bytes until it is
 * evicted and zeros after: data that changes by itself. The threaded kill
 * test saw this once in about 30 runs, trials after the punch; here the
 * window is hit within a few hundred rounds.
 * Replay: `punch_kill_test --rounds N --seed S` (kill timing varies); a
 * failure keeps the pool and its backing directory.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "fm.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ferrite.h"

#define FILE_LEN   ((size_t)4 << 20)
#define HOLE_START ((size_t)65536 + 100)
#define HOLE_END   (FILE_LEN - 5000)

static unsigned char pattern_at(size_t i)
{
	return (unsigned char)(1 + (i * 7 + i / 4096) % 251); /* never 0 */
}

static void die(const char *what, int64_t r)
{
	fprintf(stderr, "child: %s = %s: %s\n", what, fm_errname(r), ferrite_errmsg());
	_exit(3);
}

static void child(const char *pool, volatile int *flag)
{
	struct ferrite_mount_opts mo = {.tier_flush_ms = 1};
	ferrite_fs *fs;
	int r = ferrite_mount(pool, &mo, &fs);
	if (r < 0)
		die("ferrite_mount", r);
	unsigned char *buf = malloc(FILE_LEN);
	if (!buf)
		die("malloc", -ENOMEM);
	for (size_t i = 0; i < FILE_LEN; i++)
		buf[i] = pattern_at(i);
	int fd = ferrite_open(fs, "/f", O_CREAT | O_TRUNC | O_RDWR, 0644);
	if (fd < 0)
		die("open /f", fd);
	for (size_t done = 0; done < FILE_LEN;) {
		ssize_t w = ferrite_pwrite(fs, fd, buf + done, FILE_LEN - done, (off_t)done);
		if (w <= 0)
			die("pwrite /f", w);
		done += (size_t)w;
	}
	/* Until the flusher has made every chunk clean. */
	struct ferrite_tier_info ti;
	for (int i = 0; i < 5000; i++) {
		if (ferrite_tier_stats(pool, &ti) == 0 && ti.dirty_chunks == 0)
			break;
		struct timespec ms = {0, 1000000};
		nanosleep(&ms, NULL);
	}
	if (ti.dirty_chunks)
		die("draining /f", -ETIMEDOUT);
	__atomic_store_n(flag, 1, __ATOMIC_RELEASE);
	r = ferrite_fallocate(fs, fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)HOLE_START,
			      (off_t)(HOLE_END - HOLE_START));
	if (r < 0)
		die("punch /f", r);
	for (;;)
		pause();
}

/* What the pool shows of /f: 0 if it is the pattern with the hole's bytes
 * each the pattern's or zero, else 1 with a message; *out gets the bytes. */
static int check_file(ferrite_fs *fs, int round, long delay, unsigned char **out)
{
	*out = NULL;
	int fd = ferrite_open(fs, "/f", O_RDONLY, 0);
	if (fd == -ENOENT)
		return 0; /* killed before the create */
	struct stat st;
	if (fd < 0 || ferrite_fstat(fs, fd, &st) < 0) {
		fprintf(stderr, "round %d: /f: open = %s\n", round, fm_errname(fd));
		return 1;
	}
	if (st.st_size != (off_t)FILE_LEN) {
		ferrite_close(fs, fd);
		return 0; /* killed while it was being written: not this test's case */
	}
	unsigned char *b = malloc(FILE_LEN);
	ssize_t got = ferrite_pread(fs, fd, b, FILE_LEN, 0);
	ferrite_close(fs, fd);
	size_t bad = 0, first = 0, zeros = 0;
	for (ssize_t i = 0; i < got; i++) {
		size_t k = (size_t)i;
		int in_hole = k >= HOLE_START && k < HOLE_END;
		if (b[k] == pattern_at(k))
			continue;
		if (in_hole && b[k] == 0) {
			zeros++;
			continue;
		}
		if (!bad++)
			first = k;
	}
	if (got != (ssize_t)FILE_LEN || bad) {
		fprintf(stderr,
			"round %d (kill after %ld us): /f reads %zd bytes, %zu zero in the hole, "
			"%zu neither the pattern nor zero in the hole; first bad byte at %zu\n",
			round, delay, got, zeros, bad, first);
		free(b);
		return 1;
	}
	*out = b;
	return 0;
}

static int check(const char *pool, int round, long delay)
{
	ferrite_fs *fs;
	if (fm_kill_fsck_mount(pool, round, delay, (void **)&fs))
		return 1;
	unsigned char *seen;
	int rc = check_file(fs, round, delay, &seen);
	int r = ferrite_unmount(fs); /* drains: the backing file is the whole truth now */
	if (r < 0) {
		fprintf(stderr, "round %d: ferrite_unmount = %s: %s\n", round, fm_errname(r),
			ferrite_errmsg());
		rc = 1;
	}
	if (rc || !seen)
		return rc;
	char path[600];
	snprintf(path, sizeof path, "%s/f", fm_tier_backing(pool));
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	unsigned char *b = malloc(FILE_LEN);
	ssize_t got = fd >= 0 ? pread(fd, b, FILE_LEN, 0) : -1;
	if (fd >= 0)
		close(fd);
	if (got != (ssize_t)FILE_LEN || memcmp(b, seen, FILE_LEN) != 0) {
		size_t first = 0;
		while (got == (ssize_t)FILE_LEN && b[first] == seen[first])
			first++;
		fprintf(stderr,
			"round %d (kill after %ld us): after the drain the backing file %s "
			"(%zd bytes) differs from what the pool showed, first at byte %zu "
			"(0x%02x there, 0x%02x shown)\n",
			round, delay, path, got, first, got > 0 ? b[first] : 0, seen[first]);
		rc = 1;
	}
	free(b);
	free(seen);
	return rc;
}

int main(int argc, char **argv)
{
	static const struct fm_kill_test kt = {
	    .name = "punch_kill_test",
	    .mode = FM_MODE_TIER,
	    .pool_mib = 32,
	    .rounds = 200,
	    .max_delay_us = 1500,
	    .child = child,
	    .check = check,
	    .passed = "kills during a punch through clean cached chunks",
	};
	return fm_kill_main(argc, argv, &kt);
}
