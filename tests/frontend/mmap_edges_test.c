/*
 * mmap_edges_test.c -- a mapped file at its edges, as a program sees it:
 * stores through a shared mapping mixed with shrinking and growing
 * truncates, a punched hole, O_TRUNC and writes, each followed by what the
 * mapping and read(2) must show (POSIX, and Linux for the punch). Run in a
 * directory of tmpfs (which proves the expectations), of a pool through
 * `ferrite run`, and of a pool mounted with `ferrite mount`; pages beyond
 * the end of file are never touched (Linux raises SIGBUS there, the shim
 * SIGSEGV).
 *
 *   mmap_edges_test DIR
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define PG    4096
#define PAGES 8

static int failures;

#define CHECK(c)                                                                                   \
	do {                                                                                       \
		if (!(c)) {                                                                        \
			fprintf(stderr, "FAILED %s:%d: %s (errno %d)\n", __FILE__, __LINE__, #c,   \
				errno);                                                            \
			failures++;                                                                \
		}                                                                                  \
	} while (0)

/* Every byte of [from, to) of the mapping and of the file reads c. */
static int both_read(int fd, const char *m, size_t from, size_t to, char c)
{
	static char buf[PAGES * PG];
	for (size_t i = from; i < to; i++)
		if (m[i] != c) {
			fprintf(stderr, "  mapping byte %zu: 0x%02x, want 0x%02x\n", i,
				(unsigned char)m[i], (unsigned char)c);
			return 0;
		}
	if (pread(fd, buf, to - from, (off_t)from) != (ssize_t)(to - from))
		return 0;
	for (size_t i = 0; i < to - from; i++)
		if (buf[i] != c) {
			fprintf(stderr, "  read byte %zu: 0x%02x, want 0x%02x\n", from + i,
				(unsigned char)buf[i], (unsigned char)c);
			return 0;
		}
	return 1;
}

static off_t size_of(int fd)
{
	struct stat st;
	return fstat(fd, &st) == 0 ? st.st_size : -1;
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fputs("usage: mmap_edges_test DIR\n", stderr);
		return 2;
	}
	char path[4096];
	snprintf(path, sizeof path, "%s/mmap-edges", argv[1]);
	int fd = open(path, O_CREAT | O_RDWR | O_TRUNC, 0644);
	CHECK(fd >= 0);
	if (fd < 0)
		return 1;
	CHECK(ftruncate(fd, 5 * PG) == 0);
	char *m = mmap(NULL, PAGES * PG, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	CHECK(m != MAP_FAILED);
	if (m == MAP_FAILED)
		return 1;
	memset(m, 'A', 5 * PG);
	CHECK(msync(m, 5 * PG, MS_SYNC) == 0);
	CHECK(both_read(fd, m, 0, 5 * PG, 'A'));

	/* shrink into the second page: the rest of it reads zeros */
	CHECK(ftruncate(fd, PG + 100) == 0);
	CHECK(size_of(fd) == PG + 100);
	CHECK(both_read(fd, m, 0, PG + 100, 'A'));
	for (size_t i = PG + 100; i < 2 * PG; i++)
		if (m[i]) {
			CHECK(!"the tail of the last page reads zeros through the mapping");
			break;
		}

	/* grow again: everything past the old end reads zeros */
	CHECK(ftruncate(fd, 5 * PG) == 0);
	CHECK(both_read(fd, m, PG + 100, 5 * PG, 0));

	/* stores and writes meet */
	memset(m + 2 * PG, 'B', PG);
	char c[PG];
	memset(c, 'C', PG);
	CHECK(pwrite(fd, c, PG, 3 * PG) == PG);
	CHECK(both_read(fd, m, 2 * PG, 3 * PG, 'B'));
	CHECK(both_read(fd, m, 3 * PG, 4 * PG, 'C'));

	/* a hole punched in the mapped range reads zeros; the size stays */
	CHECK(fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 2 * PG, PG) == 0);
	CHECK(both_read(fd, m, 2 * PG, 3 * PG, 0));
	CHECK(both_read(fd, m, 3 * PG, 4 * PG, 'C'));
	CHECK(size_of(fd) == 5 * PG);

	/* shrink to a small file: the mapping keeps working */
	CHECK(ftruncate(fd, 100) == 0);
	CHECK(both_read(fd, m, 0, 100, 'A'));
	for (size_t i = 100; i < PG; i++)
		if (m[i]) {
			CHECK(!"the tail of a small file's page reads zeros");
			break;
		}
	memset(m, 'D', 100);
	CHECK(msync(m, PG, MS_SYNC) == 0);
	CHECK(both_read(fd, m, 0, 100, 'D'));

	/* O_TRUNC of the mapped file, then a write: the mapping shows it */
	int fd2 = open(path, O_RDWR | O_TRUNC);
	CHECK(fd2 >= 0);
	CHECK(size_of(fd) == 0);
	char e[200];
	memset(e, 'E', sizeof e);
	CHECK(pwrite(fd2, e, sizeof e, 0) == (ssize_t)sizeof e);
	CHECK(both_read(fd, m, 0, sizeof e, 'E'));
	for (size_t i = sizeof e; i < PG; i++)
		if (m[i]) {
			CHECK(!"the page after O_TRUNC and a write reads zeros past it");
			break;
		}
	close(fd2);

	CHECK(munmap(m, PAGES * PG) == 0);
	CHECK(close(fd) == 0);
	CHECK(unlink(path) == 0);
	printf("mmap_edges_test %s: %s\n", argv[1], failures ? "FAILED" : "all passed");
	return failures ? 1 : 0;
}
