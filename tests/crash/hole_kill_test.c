/*
 * hole_kill_test.c -- a write that fills a hole below EOF, killed while it
 * copies: the hole must read as zeros or as the new bytes, never as what the
 * newly backed memory held before (another file's freed data).
 *
 * What it checks: each round, a child mounts the pool, writes a 2 MiB unit
 * of 0xAB into /junk and unlinks it (the unit is freed with its data),
 * creates /hole with ftruncate to 3 MiB (a hole), and then pwrites 2 MiB of
 * 0x11 at offset 0, covering the first 2 MiB window of the hole. The parent
 * kills the child at a random moment of that pwrite, then requires fsck to be
 * clean, the pool to mount, /hole to be 3 MiB, and every byte of it to be 0
 * (the hole) or 0x11 (the write).
 * Why: docs/contracts.md, "What a crash can show": bytes read are never
 * garbage, new space is zeroed or fully written before the size or mapping
 * that exposes it is published. Here the size already exposes the window, so
 * its new backing must be zeroed before the mapping commits (or filled
 * before). The threaded kill test saw a file show another thread's freed
 * data this way; this test makes that interleaving likely within a few
 * hundred rounds.
 * Replay: `hole_kill_test --rounds N --seed S` (kill timing varies); a failure
 * keeps the pool.
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
#include <unistd.h>

#include "ferrite.h"

#define UNIT ((size_t)2 << 20)

static void die(const char *what, int64_t r)
{
	fprintf(stderr, "child: %s = %s: %s\n", what, fm_errname(r), ferrite_errmsg());
	_exit(3);
}

static void child(const char *pool, volatile int *flag)
{
	ferrite_fs *fs;
	int r = ferrite_mount(pool, NULL, &fs);
	if (r < 0)
		die("ferrite_mount", r);
	char *buf = malloc(UNIT);
	ferrite_unlink(fs, "/hole");
	int fd = ferrite_open(fs, "/junk", O_CREAT | O_TRUNC | O_RDWR, 0644);
	if (fd < 0)
		die("open /junk", fd);
	memset(buf, 0xab, UNIT);
	ssize_t w = ferrite_pwrite(fs, fd, buf, UNIT, 0);
	if (w != (ssize_t)UNIT)
		die("pwrite /junk", w);
	ferrite_close(fs, fd);
	ferrite_unlink(fs, "/junk"); /* its unit is free, 0xAB inside */
	fd = ferrite_open(fs, "/hole", O_CREAT | O_EXCL | O_RDWR, 0644);
	if (fd < 0)
		die("open /hole", fd);
	if ((r = ferrite_ftruncate(fs, fd, (off_t)(UNIT + UNIT / 2))) < 0)
		die("ftruncate /hole", r);
	memset(buf, 0x11, UNIT);
	__atomic_store_n(flag, 1, __ATOMIC_RELEASE);
	w = ferrite_pwrite(fs, fd, buf, UNIT, 0);
	if (w != (ssize_t)UNIT)
		die("pwrite /hole", w);
	for (;;)
		pause();
}

/* The recovered /hole: 0 if every byte is 0 or 0x11, else 1 with a message. */
static int check(const char *pool, int round, long delay)
{
	ferrite_fs *fs;
	if (fm_kill_fsck_mount(pool, round, delay, (void **)&fs))
		return 1;
	int rc = 0;
	struct stat st;
	int fd = ferrite_open(fs, "/hole", O_RDONLY, 0);
	if (fd == -ENOENT)
		goto out; /* killed before the create */
	if (fd < 0 || ferrite_fstat(fs, fd, &st) < 0) {
		fprintf(stderr, "round %d: /hole: open = %s\n", round, fm_errname(fd));
		rc = 1;
		goto out;
	}
	if (st.st_size == 0)
		goto close; /* killed before the ftruncate */
	if (st.st_size != (off_t)(UNIT + UNIT / 2)) {
		fprintf(stderr, "round %d: /hole has size %lld, want 0 or %zu\n", round,
			(long long)st.st_size, UNIT + UNIT / 2);
		rc = 1;
		goto close;
	}
	size_t n = UNIT + UNIT / 2;
	unsigned char *b = malloc(n);
	ssize_t got = ferrite_pread(fs, fd, b, n, 0);
	size_t zeros = 0, news = 0, bad = 0, first = 0;
	for (ssize_t i = 0; i < got; i++) {
		if (b[i] == 0)
			zeros++;
		else if (b[i] == 0x11 && (size_t)i < UNIT)
			news++;
		else if (!bad++)
			first = (size_t)i;
	}
	if (got != (ssize_t)n || bad) {
		fprintf(stderr,
			"round %d (kill after %ld us): /hole reads %zd bytes: %zu zero, %zu new "
			"(0x11), %zu neither; first bad byte at %zu is 0x%02x (0xab: the freed "
			"/junk's data)\n",
			round, delay, got, zeros, news, bad, first, got > 0 ? b[first] : 0);
		rc = 1;
	}
	free(b);
close:
	ferrite_close(fs, fd);
out:
	ferrite_unmount(fs);
	return rc;
}

int main(int argc, char **argv)
{
	static const struct fm_kill_test kt = {
	    .name = "hole_kill_test",
	    .mode = FERRITE_MODE_SYNC,
	    .pool_mib = 64,
	    .rounds = 300,
	    .max_delay_us = 400,
	    .child = child,
	    .check = check,
	    .passed = "kills during a write into a hole below EOF",
	};
	return fm_kill_main(argc, argv, &kt);
}
