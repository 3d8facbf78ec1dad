/*
 * compact_test.c -- online compaction (space/compact.c): a pool whose free
 * pages are scattered over every 2 MiB unit gives a large file whole units
 * again, and no file notices its pages moved.
 *
 * How the pool gets there: sparse files write one page in eight of two
 * windows each, more windows than the pool has units. The first windows
 * reserve a unit each (SCMFS pre-allocation: 64 pages written, 448 reserved);
 * the later ones find none and take free pages wherever they are, so no unit
 * is free although a third of the pool is. A large file written then finds no
 * unit either; compaction (at the next quiet call) drops the reservation of
 * the emptiest unit and moves its written pages elsewhere, so many of the
 * large file's windows are whole units (huge windows) again -- none are
 * without compaction.
 * Checks: compactions happened (ferrite_get_info), the large file's windows
 * are mostly huge, every byte of every file reads back (before and after a
 * remount), fsck is clean; in sync and strict mode.
 * Usage: compact_test [sync|strict]
 */
#include "../api/ft_test.h"

#define KiB 1024LL
#define MiB (1024 * KiB)

static const char *pool;

static uint8_t pattern(uint64_t file, uint64_t off)
{
	return (uint8_t)ft_mix64(file * 0x10000 + (off >> 12) * 131 + (off & 4095));
}

static int fill_page(uint8_t *buf, uint64_t file, uint64_t off, size_t len)
{
	for (size_t i = 0; i < len; i++)
		buf[i] = pattern(file, off + i);
	return 0;
}

/* Sparse files: 64 pages in each 2 MiB window, one in eight. */
#define SPARSE_WINDOWS 2
#define NSPARSE	       40 /* 80 windows: more than the pool has units */
static int write_sparse(ferrite_fs *fs, int n)
{
	uint8_t buf[4096];
	for (int f = 0; f < n; f++) {
		char p[64];
		snprintf(p, sizeof p, "/s%d", f);
		int fd = ferrite_open(fs, p, O_CREAT | O_RDWR, 0644);
		FT_CHECK(fd >= 0, "create %s: %s", p, ft_errname(fd));
		for (uint64_t off = 0; off < SPARSE_WINDOWS * 2 * MiB; off += 8 * 4096) {
			fill_page(buf, (uint64_t)f, off, sizeof buf);
			ssize_t w = ferrite_pwrite(fs, fd, buf, sizeof buf, (off_t)off);
			if (w == -ENOSPC) {
				ferrite_close(fs, fd);
				return f; /* the files before this one are whole */
			}
			FT_CHECK(w == (ssize_t)sizeof buf, "pwrite %s at %llu: %s", p,
				 (unsigned long long)off, ft_errname(w));
		}
		FT_OK(ferrite_close(fs, fd));
	}
	return n;
}

static int check_sparse(ferrite_fs *fs, int n)
{
	uint8_t buf[4096], want[4096];
	for (int f = 0; f < n; f++) {
		char p[64];
		snprintf(p, sizeof p, "/s%d", f);
		int fd = ferrite_open(fs, p, O_RDONLY, 0);
		FT_CHECK(fd >= 0, "open %s: %s", p, ft_errname(fd));
		for (uint64_t off = 0; off < SPARSE_WINDOWS * 2 * MiB; off += 4096) {
			ssize_t r = ferrite_pread(fs, fd, buf, sizeof buf, (off_t)off);
			if ((off / 4096) % 8) {
				memset(want, 0, sizeof want);
				if (r == 0 && off >= SPARSE_WINDOWS * 2 * MiB - 7 * 4096)
					continue; /* past the last page written: EOF */
			} else {
				fill_page(want, (uint64_t)f, off, sizeof want);
			}
			FT_CHECK(r == (ssize_t)sizeof buf && !memcmp(buf, want, sizeof buf),
				 "%s at %llu: read %s, %s", p, (unsigned long long)off,
				 ft_errname(r), r == 4096 ? "wrong bytes" : "short");
		}
		FT_OK(ferrite_close(fs, fd));
	}
	return 0;
}

/* The large file, written 256 KiB at a time (the write after a refused unit
 * is the quiet call that compacts). Returns its size. */
static int64_t write_large(ferrite_fs *fs, int64_t max)
{
	static uint8_t buf[256 * KiB];
	int fd = ferrite_open(fs, "/large", O_CREAT | O_RDWR | O_TRUNC, 0644);
	FT_CHECK(fd >= 0, "create /large: %s", ft_errname(fd));
	int64_t off = 0;
	while (off < max) {
		fill_page(buf, 999999, (uint64_t)off, sizeof buf);
		ssize_t w = ferrite_pwrite(fs, fd, buf, sizeof buf, off);
		if (w == -ENOSPC)
			break;
		FT_CHECK(w == (ssize_t)sizeof buf, "pwrite /large at %lld: %s", (long long)off,
			 ft_errname(w));
		off += w;
	}
	FT_OK(ferrite_close(fs, fd));
	return off;
}

static int check_large(ferrite_fs *fs, int64_t size)
{
	static uint8_t buf[256 * KiB], want[256 * KiB];
	int fd = ferrite_open(fs, "/large", O_RDONLY, 0);
	FT_CHECK(fd >= 0, "open /large: %s", ft_errname(fd));
	for (int64_t off = 0; off < size; off += (int64_t)sizeof buf) {
		fill_page(want, 999999, (uint64_t)off, sizeof want);
		ssize_t r = ferrite_pread(fs, fd, buf, sizeof buf, off);
		FT_CHECK(r == (ssize_t)sizeof buf && !memcmp(buf, want, sizeof buf),
			 "/large at %lld: %s", (long long)off,
			 r == (ssize_t)sizeof buf ? "wrong bytes" : ft_errname(r));
	}
	FT_OK(ferrite_close(fs, fd));
	return 0;
}

static int run_mode(int mode)
{
	ferrite_fs *fs;
	struct ferrite_mkfs_opts o = {.size = 128 * MiB, .mode = mode, .force = 1};
	FT_OK(ferrite_mkfs(pool, &o));
	FT_OK(ferrite_mount(pool, NULL, &fs));
	struct ferrite_info in0, in1;
	int nsparse = write_sparse(fs, NSPARSE);
	FT_CHECK(nsparse > 0, "no sparse file fits");
	FT_OK(ferrite_get_info(fs, &in0));
	printf("%d sparse files (%d windows of 64 pages each); free %llu KiB, "
	       "pre-allocated %llu KiB, huge windows %llu\n",
	       nsparse, nsparse * SPARSE_WINDOWS, (unsigned long long)(in0.free_bytes >> 10),
	       (unsigned long long)(in0.prealloc_bytes >> 10),
	       (unsigned long long)in0.ppt_huge_windows);
	int64_t size = write_large(fs, 64 * MiB);
	FT_OK(ferrite_get_info(fs, &in1));
	uint64_t huge = in1.ppt_huge_windows - in0.ppt_huge_windows;
	printf("large file: %lld KiB; %llu compactions moved %llu pages; %llu of its %lld "
	       "windows are huge; free %llu KiB\n",
	       (long long)(size >> 10), (unsigned long long)in1.compactions,
	       (unsigned long long)in1.compacted_pages, (unsigned long long)huge,
	       (long long)(size / (2 * MiB)), (unsigned long long)(in1.free_bytes >> 10));
	FT_CHECK(size >= 16 * MiB, "the large file got only %lld KiB", (long long)(size >> 10));
	FT_CHECK(in1.compactions > 0 && in1.compacted_pages > 0, "no compaction happened");
	/* without compaction none is (the pool has no free unit); as the pool
	 * fills, fewer units can be emptied, so a quarter is asked for */
	FT_CHECK(huge * 4 >= (uint64_t)(size / (2 * MiB)),
		 "only %llu of the large file's %lld windows are whole units",
		 (unsigned long long)huge, (long long)(size / (2 * MiB)));
	FT_RUN(check_sparse(fs, nsparse));
	FT_RUN(check_large(fs, size));
	FT_OK(ferrite_unmount(fs));
	FT_EQ(ferrite_fsck(pool, 0, NULL, NULL, NULL, NULL), FERRITE_FSCK_CLEAN);
	FT_OK(ferrite_mount(pool, NULL, &fs));
	FT_RUN(check_sparse(fs, nsparse));
	FT_RUN(check_large(fs, size));
	FT_OK(ferrite_unmount(fs));
	FT_EQ(ferrite_fsck(pool, 0, NULL, NULL, NULL, NULL), FERRITE_FSCK_CLEAN);
	return 0;
}

static int t_sync(void)
{
	return run_mode(FERRITE_MODE_SYNC);
}

static int t_strict(void)
{
	return run_mode(FERRITE_MODE_STRICT);
}

static const struct ft_case cases[] = {
    {"sync", t_sync, FT_TIER_SKIP},
    {"strict", t_strict, FT_TIER_SKIP},
};

int main(int argc, char **argv)
{
	pool = ft_pool_path("compact", "main");
	return ft_run(cases, sizeof cases / sizeof cases[0], argc, argv, NULL, NULL);
}
