/*
 * full_mmap_test -- a store through a shared mapping into a hole of a full
 * pool, through the FUSE mount (issue 15): the daemon cannot back it, so
 * msync(MS_SYNC) must fail, and afterwards the page cache must show what the
 * pool holds (a read through the cache equals an O_DIRECT read), never data
 * that was refused.
 *
 * usage: full_mmap_test DIR    (DIR: a small pool, mounted or under `ferrite run`)
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define MiB	  (1024 * 1024)
#define HOLE_LEN  (1 * MiB)
#define STORE_LEN (256 * 1024)

static int fail(const char *what)
{
	fprintf(stderr, "full_mmap_test: %s: %s\n", what, strerror(errno));
	return 1;
}

/* Writes chunk-sized pieces to path until the pool refuses. */
static int fill(const char *path, size_t chunk)
{
	int fd = open(path, O_CREAT | O_WRONLY | O_APPEND, 0644);
	if (fd < 0)
		return fd == -1 && errno == ENOSPC ? 0 : -1;
	char *buf = malloc(chunk);
	if (!buf) {
		close(fd);
		return -1;
	}
	memset(buf, 0x5a, chunk);
	for (;;) {
		ssize_t w = write(fd, buf, chunk);
		if (w < 0 && errno == ENOSPC)
			break;
		if (w < 0) {
			free(buf);
			close(fd);
			return -1;
		}
		if ((size_t)w < chunk)
			break;
	}
	free(buf);
	close(fd);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: full_mmap_test DIR\n");
		return 2;
	}
	char holes[4096], path[4096];
	snprintf(holes, sizeof(holes), "%s/holes", argv[1]);
	int fd = open(holes, O_CREAT | O_TRUNC | O_RDWR, 0644);
	if (fd < 0)
		return fail("create holes");
	if (ftruncate(fd, HOLE_LEN) != 0)
		return fail("ftruncate holes");
	/* fill the pool: big pieces first, then pages, then single bytes */
	snprintf(path, sizeof(path), "%s/fill-big", argv[1]);
	if (fill(path, MiB) != 0)
		return fail("fill big");
	snprintf(path, sizeof(path), "%s/fill-page", argv[1]);
	if (fill(path, 4096) != 0)
		return fail("fill pages");
	/* A front end that backs holes when they are mapped (the shim) refuses
	 * the mmap; one that learns of the stores at write-back (FUSE) must
	 * fail msync. Either way the failure is seen. */
	int bad = 0;
	char *map = mmap(NULL, HOLE_LEN, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (map == MAP_FAILED && errno != ENOSPC)
		return fail("mmap");
	if (map == MAP_FAILED) {
		printf("mmap: %s\n", strerror(errno));
		close(fd);
	} else {
		memset(map, 0xa5, STORE_LEN);
		errno = 0;
		int ms = msync(map, HOLE_LEN, MS_SYNC);
		int ms_errno = errno;
		/* the writer's own mapping shows the pool's bytes as soon as msync
		 * returned (the daemon restores the refused pages before it replies) */
		char *now = aligned_alloc(4096, HOLE_LEN);
		int dfd0 = open(holes, O_RDONLY | O_DIRECT);
		if (!now || dfd0 < 0 || pread(dfd0, now, HOLE_LEN, 0) != HOLE_LEN)
			return fail("O_DIRECT read after msync");
		size_t mapped_differ = 0;
		for (size_t i = 0; i < HOLE_LEN; i++)
			mapped_differ += map[i] != now[i];
		close(dfd0);
		free(now);
		munmap(map, HOLE_LEN);
		int cl = close(fd);
		printf("msync: %s; close: %s; bytes that differ between the mapping and O_DIRECT "
		       "after msync: %zu\n",
		       ms ? strerror(ms_errno) : "ok", cl ? strerror(errno) : "ok", mapped_differ);
		if (ms == 0) {
			fprintf(stderr,
				"full_mmap_test: msync of %d KiB stored into holes of a full pool "
				"succeeded\n",
				STORE_LEN / 1024);
			bad = 1;
		}
		if (mapped_differ) {
			fprintf(stderr,
				"full_mmap_test: the mapping shows %zu bytes the pool "
				"does not hold\n",
				mapped_differ);
			bad = 1;
		}
	}
	/* what the page cache shows must be what the pool holds */
	char *cached = malloc(HOLE_LEN), *direct = aligned_alloc(4096, HOLE_LEN);
	if (!cached || !direct)
		return fail("malloc");
	int rfd = open(holes, O_RDONLY);
	int dfd = open(holes, O_RDONLY | O_DIRECT);
	if (rfd < 0 || dfd < 0)
		return fail("reopen holes");
	if (pread(rfd, cached, HOLE_LEN, 0) != HOLE_LEN ||
	    pread(dfd, direct, HOLE_LEN, 0) != HOLE_LEN)
		return fail("read back");
	size_t differ = 0, stored = 0;
	for (size_t i = 0; i < HOLE_LEN; i++) {
		differ += cached[i] != direct[i];
		stored += direct[i] != 0;
	}
	printf("bytes that differ between the page cache and O_DIRECT: %zu; stored in the pool: "
	       "%zu\n",
	       differ, stored);
	if (differ) {
		fprintf(stderr,
			"full_mmap_test: the page cache shows %zu bytes the pool does not "
			"hold\n",
			differ);
		bad = 1;
	}
	close(rfd);
	close(dfd);
	/* with space given back, the same stores are kept */
	snprintf(path, sizeof(path), "%s/fill-big", argv[1]);
	if (unlink(path) != 0)
		return fail("unlink fill-big");
	fd = open(holes, O_RDWR);
	if (fd < 0)
		return fail("reopen holes for writing");
	map = mmap(NULL, HOLE_LEN, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (map == MAP_FAILED)
		return fail("mmap with space");
	memset(map, 0xa5, STORE_LEN);
	if (msync(map, HOLE_LEN, MS_SYNC) != 0)
		return fail("msync with space");
	munmap(map, HOLE_LEN);
	close(fd);
	dfd = open(holes, O_RDONLY | O_DIRECT);
	if (dfd < 0 || pread(dfd, direct, HOLE_LEN, 0) != HOLE_LEN)
		return fail("O_DIRECT read with space");
	close(dfd);
	for (size_t i = 0; i < HOLE_LEN; i++)
		if (direct[i] != (i < STORE_LEN ? (char)0xa5 : 0)) {
			fprintf(stderr, "full_mmap_test: byte %zu is %#x after msync with space\n",
				i, (unsigned char)direct[i]);
			bad = 1;
			break;
		}
	free(cached);
	free(direct);
	return bad;
}
