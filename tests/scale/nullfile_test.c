/*
 * nullfile_test.c -- null files (fs/nullfile.c): a file of one page whose
 * last name goes becomes a null file, a create takes it, and its first write
 * of a page allocates nothing; the pages they hold count as free, and a pool
 * filled to its end gets them back, with the pages of files made from them
 * and never written.
 * Case recycle: delete, create, write; free space and pre-allocation as
 *   ferrite_get_info and statvfs show them; contents, generation, names
 *   after a remount; fsck clean.
 * Case full: empty files made from null files hold a page each; writing
 *   until ENOSPC fills at least what statvfs said was free before those
 *   files were made, every byte reads back, the empty files hold nothing
 *   any more, fsck clean. In sync and strict mode.
 * Usage: nullfile_test [recycle|full|full_strict]
 */
#include "../api/ft_test.h"

#define KiB    1024LL
#define MiB    (1024 * KiB)
#define NFILES 64

static const char *pool;

static uint64_t prealloc_pages(ferrite_fs *fs)
{
	struct ferrite_info in;
	return ferrite_get_info(fs, &in) ? ~0ULL : in.prealloc_bytes / 4096;
}

static uint64_t free_pages(ferrite_fs *fs)
{
	struct ferrite_info in;
	return ferrite_get_info(fs, &in) ? 0 : in.free_bytes / 4096;
}

/* path holds len bytes of ft_fill(key). */
static int read_back(ferrite_fs *fs, const char *path, uint64_t key, size_t len)
{
	static char buf[64 * KiB];
	int fd = ferrite_open(fs, path, O_RDONLY, 0);
	FT_CHECK(fd >= 0, "open %s: %s", path, ft_errname(fd));
	FT_EQ(ferrite_read(fs, fd, buf, sizeof buf), (ssize_t)len);
	FT_CHECK(ft_verify(buf, len, key, 0) < 0, "%s reads back wrong", path);
	FT_OK(ferrite_close(fs, fd));
	return 0;
}

static int t_recycle(void)
{
	ferrite_fs *fs;
	FT_RUN(ft_pool_create(pool, 64 * MiB, &fs));
	FT_OK(ferrite_mkdir(fs, "/d", 0755));
	char p[64];
	for (int i = 0; i < NFILES; i++) {
		snprintf(p, sizeof p, "/d/old%d", i);
		FT_OK(ft_write_file(fs, p, 100 + (uint64_t)i, i % 2 ? 4096 : 100, 0));
	}
	FT_EQ(prealloc_pages(fs), 0);
	struct statvfs before, after;
	FT_OK(ferrite_statvfs(fs, &before));
	for (int i = 0; i < NFILES; i++) {
		snprintf(p, sizeof p, "/d/old%d", i);
		FT_OK(ferrite_unlink(fs, p));
	}
	/* the pages stayed with the null files, and count as free */
	FT_EQ(prealloc_pages(fs), NFILES);
	FT_OK(ferrite_statvfs(fs, &after));
	FT_CHECK(after.f_bfree >= before.f_bfree + NFILES && after.f_ffree > before.f_ffree,
		 "statvfs after the unlinks: %llu pages and %llu inodes free, before %llu and %llu",
		 (unsigned long long)after.f_bfree, (unsigned long long)after.f_ffree,
		 (unsigned long long)before.f_bfree, (unsigned long long)before.f_ffree);
	FT_OK(ferrite_unmount(fs));
	FT_EQ(ferrite_fsck(pool, 0, NULL, NULL, NULL, NULL), FERRITE_FSCK_CLEAN);
	FT_OK(ferrite_mount(pool, NULL, &fs));
	FT_EQ(prealloc_pages(fs), NFILES);

	/* A create takes a null file, and its first page-sized write takes
	 * nothing from the allocator. */
	uint64_t inos[NFILES];
	for (int i = 0; i < NFILES; i++) {
		snprintf(p, sizeof p, "/d/new%d", i);
		int fd = ferrite_open(fs, p, O_CREAT | O_EXCL | O_RDWR, 0640);
		FT_CHECK(fd >= 0, "create %s: %s", p, ft_errname(fd));
		struct stat st;
		FT_OK(ferrite_fstat(fs, fd, &st));
		FT_CHECK(st.st_size == 0 && st.st_blocks == 0 && st.st_nlink == 1 &&
			     (st.st_mode & 07777) == 0640 && S_ISREG(st.st_mode),
			 "new file %s: size %lld, blocks %lld, nlink %lu, mode %o", p,
			 (long long)st.st_size, (long long)st.st_blocks, (unsigned long)st.st_nlink,
			 st.st_mode);
		inos[i] = (uint64_t)st.st_ino;
		uint64_t free0 = free_pages(fs);
		char buf[4096];
		ft_fill(buf, sizeof buf, 500 + (uint64_t)i, 0);
		FT_EQ(ferrite_write(fs, fd, buf, sizeof buf), (ssize_t)sizeof buf);
		FT_CHECK(free_pages(fs) == free0, "the first write of %s took %lld pages", p,
			 (long long)(free0 - free_pages(fs)));
		FT_OK(ferrite_close(fs, fd));
	}
	FT_EQ(prealloc_pages(fs), 0);
	/* each is a new object: no two share an inode, none is an old name */
	for (int i = 0; i < NFILES; i++)
		for (int j = i + 1; j < NFILES; j++)
			FT_CHECK(inos[i] != inos[j], "files %d and %d share inode %llu", i, j,
				 (unsigned long long)inos[i]);
	FT_EQ(ft_count_entries(fs, "/d"), NFILES + 2); /* and . and .. */
	FT_OK(ferrite_unmount(fs));
	FT_EQ(ferrite_fsck(pool, 0, NULL, NULL, NULL, NULL), FERRITE_FSCK_CLEAN);
	FT_OK(ferrite_mount(pool, NULL, &fs));
	for (int i = 0; i < NFILES; i++) {
		snprintf(p, sizeof p, "/d/new%d", i);
		FT_RUN(read_back(fs, p, 500 + (uint64_t)i, 4096));
	}
	FT_UNMOUNT_CLEAN(&fs, pool);
	return 0;
}

static int full_in(int mode)
{
	ferrite_fs *fs;
	struct ferrite_mkfs_opts o = {.size = 64 * MiB, .mode = mode, .force = 1};
	FT_OK(ferrite_mkfs(pool, &o));
	FT_OK(ferrite_mount(pool, NULL, &fs));
	char p[64];
	for (int i = 0; i < NFILES; i++) {
		snprintf(p, sizeof p, "/old%d", i);
		FT_OK(ft_write_file(fs, p, (uint64_t)i, 4096, 0));
	}
	struct statvfs sv;
	FT_OK(ferrite_statvfs(fs, &sv));
	uint64_t promised = sv.f_bfree;
	for (int i = 0; i < NFILES; i++) {
		snprintf(p, sizeof p, "/old%d", i);
		FT_OK(ferrite_unlink(fs, p));
		snprintf(p, sizeof p, "/empty%d", i);
		int fd = ferrite_open(fs, p, O_CREAT | O_WRONLY, 0644);
		FT_CHECK(fd >= 0, "create %s: %s", p, ft_errname(fd));
		FT_OK(ferrite_close(fs, fd));
	}
	FT_EQ(prealloc_pages(fs), NFILES); /* the empty files hold them now */
	/* Fill to the end with 64 KiB files. */
	static char buf[64 * KiB];
	uint64_t written = 0;
	int n = 0;
	for (;; n++) {
		snprintf(p, sizeof p, "/fill%d", n);
		int fd = ferrite_open(fs, p, O_CREAT | O_WRONLY, 0644);
		if (fd == -ENOSPC) {
			FT_EQ(prealloc_pages(fs), 0); /* the collector ran */
			break;
		}
		FT_CHECK(fd >= 0, "create %s: %s", p, ft_errname(fd));
		ft_fill(buf, sizeof buf, 1000 + (uint64_t)n, 0);
		ssize_t w = ferrite_write(fs, fd, buf, sizeof buf);
		FT_OK(ferrite_close(fs, fd));
		if (w == -ENOSPC || (w >= 0 && w < (ssize_t)sizeof buf)) {
			/* the collector ran: nothing is pre-allocated now (the
			 * last file, not whole, could become a null file) */
			FT_EQ(prealloc_pages(fs), 0);
			FT_OK(ferrite_unlink(fs, p));
			break;
		}
		FT_EQ(w, (ssize_t)sizeof buf);
		written += sizeof buf / 4096;
	}
	/* N2: what statvfs promised before the empty files took their pages */
	FT_CHECK(written * 100 >= promised * 97, "filled %llu pages of the %llu promised",
		 (unsigned long long)written, (unsigned long long)promised);
	for (int i = 0; i < NFILES; i++) {
		struct stat st;
		snprintf(p, sizeof p, "/empty%d", i);
		FT_OK(ferrite_stat(fs, p, &st));
		FT_CHECK(st.st_size == 0, "%s has %lld bytes", p, (long long)st.st_size);
	}
	for (int i = 0; i < n; i++) {
		snprintf(p, sizeof p, "/fill%d", i);
		FT_RUN(read_back(fs, p, 1000 + (uint64_t)i, sizeof buf));
	}
	FT_UNMOUNT_CLEAN(&fs, pool);
	return 0;
}

static int t_full(void)
{
	return full_in(FERRITE_MODE_SYNC);
}

static int t_full_strict(void)
{
	return full_in(FERRITE_MODE_STRICT);
}

static const struct ft_case cases[] = {
    {"recycle", t_recycle, FT_TIER_SKIP},
    {"full", t_full, FT_TIER_SKIP},
    {"full_strict", t_full_strict, FT_TIER_SKIP},
};

int main(int argc, char **argv)
{
	pool = ft_pool_path("nullfile", "main");
	return ft_run(cases, sizeof cases / sizeof cases[0], argc, argv, NULL, NULL);
}
