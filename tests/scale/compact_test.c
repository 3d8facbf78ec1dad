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
 * Case threads: two threads write large files while a third rewrites and
 * reads the sparse files' pages, the pages compaction moves; no rewrite is
 * lost, nothing reads back wrong.
 * Case full: a pool without a free page still releases the windows of a
 * punch or truncate after one it cannot split, and a punch reads zeros.
 * Usage: compact_test [sync|strict|threads|full]
 */
#include "../api/ft_test.h"

#include <pthread.h>

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
static int64_t write_large_as(ferrite_fs *fs, const char *name, uint64_t id, int64_t max)
{
	uint8_t *buf = malloc(256 * KiB);
	FT_CHECK(buf, "out of memory");
	int fd = ferrite_open(fs, name, O_CREAT | O_RDWR | O_TRUNC, 0644);
	FT_CHECK(fd >= 0, "create %s: %s", name, ft_errname(fd));
	int64_t off = 0;
	while (off < max) {
		fill_page(buf, id, (uint64_t)off, 256 * KiB);
		ssize_t w = ferrite_pwrite(fs, fd, buf, 256 * KiB, off);
		if (w == -ENOSPC)
			break;
		FT_CHECK(w == (ssize_t)(256 * KiB), "pwrite %s at %lld: %s", name, (long long)off,
			 ft_errname(w));
		off += w;
	}
	free(buf);
	FT_OK(ferrite_close(fs, fd));
	return off;
}

static int64_t write_large(ferrite_fs *fs, int64_t max)
{
	return write_large_as(fs, "/large", 999999, max);
}

static int check_large_as(ferrite_fs *fs, const char *name, uint64_t id, int64_t size)
{
	static uint8_t buf[256 * KiB], want[256 * KiB];
	int fd = ferrite_open(fs, name, O_RDONLY, 0);
	FT_CHECK(fd >= 0, "open %s: %s", name, ft_errname(fd));
	for (int64_t off = 0; off < size; off += (int64_t)sizeof buf) {
		fill_page(want, id, (uint64_t)off, sizeof want);
		ssize_t r = ferrite_pread(fs, fd, buf, sizeof buf, off);
		FT_CHECK(r == (ssize_t)sizeof buf && !memcmp(buf, want, sizeof buf),
			 "%s at %lld: %s", name, (long long)off,
			 r == (ssize_t)sizeof buf ? "wrong bytes" : ft_errname(r));
	}
	FT_OK(ferrite_close(fs, fd));
	return 0;
}

static int check_large(ferrite_fs *fs, int64_t size)
{
	return check_large_as(fs, "/large", 999999, size);
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

/* ---- compaction while other threads write and read ------------------------ */

/* The page generation each sparse page was last written with (0: the first
 * pattern), kept by the rewriter; a rewrite lost to a move would show. */
static uint8_t gen_of[NSPARSE][SPARSE_WINDOWS * 64];

static uint8_t gen_byte(int f, unsigned pg, unsigned gen, size_t i)
{
	return (uint8_t)ft_mix64(((uint64_t)f << 32) ^ ((uint64_t)pg << 16) ^ (gen << 8) ^ i);
}

struct worker {
	ferrite_fs *fs;
	int id, nsparse;
	int64_t size;
	volatile int *stop;
};

static void *large_writer(void *arg)
{
	struct worker *w = arg;
	char name[32];
	snprintf(name, sizeof name, "/large%d", w->id);
	w->size = write_large_as(w->fs, name, 500000 + (uint64_t)w->id, 24 * MiB);
	return NULL;
}

/* Rewrites sparse pages with new generations and reads others back until
 * the writers are done. */
static int rewrite_loop(struct worker *w)
{
	uint64_t r = 12345;
	uint8_t buf[4096], want[4096];
	while (!*w->stop) {
		int f = (int)(ft_mix64(++r) % (uint64_t)w->nsparse);
		unsigned pg = (unsigned)(ft_mix64(++r) % (SPARSE_WINDOWS * 64));
		char p[64];
		snprintf(p, sizeof p, "/s%d", f);
		int fd = ferrite_open(w->fs, p, O_RDWR, 0);
		FT_CHECK(fd >= 0, "open %s: %s", p, ft_errname(fd));
		off_t off = (off_t)pg * 8 * 4096;
		if (ft_mix64(++r) % 2) {
			unsigned g = gen_of[f][pg] + 1u;
			for (size_t i = 0; i < sizeof buf; i++)
				buf[i] = gen_byte(f, pg, g, i);
			ssize_t n = ferrite_pwrite(w->fs, fd, buf, sizeof buf, off);
			if (n == (ssize_t)sizeof buf)
				gen_of[f][pg] = (uint8_t)g;
			else
				FT_CHECK(n == -ENOSPC, "rewrite %s at %lld: %s", p, (long long)off,
					 ft_errname(n));
		} else {
			for (size_t i = 0; i < sizeof want; i++)
				want[i] = gen_of[f][pg] ? gen_byte(f, pg, gen_of[f][pg], i)
							: pattern((uint64_t)f, (uint64_t)off + i);
			ssize_t n = ferrite_pread(w->fs, fd, buf, sizeof buf, off);
			FT_CHECK(n == (ssize_t)sizeof buf && !memcmp(buf, want, sizeof buf),
				 "%s page %u (generation %u) read back wrong while compacting", p,
				 pg, gen_of[f][pg]);
		}
		ferrite_close(w->fs, fd);
	}
	return 0;
}

static void *rewriter(void *arg)
{
	rewrite_loop(arg);
	return NULL;
}

static int check_generations(ferrite_fs *fs, int nsparse)
{
	uint8_t buf[4096];
	for (int f = 0; f < nsparse; f++) {
		char p[64];
		snprintf(p, sizeof p, "/s%d", f);
		int fd = ferrite_open(fs, p, O_RDONLY, 0);
		FT_CHECK(fd >= 0, "open %s: %s", p, ft_errname(fd));
		for (unsigned pg = 0; pg < SPARSE_WINDOWS * 64; pg++) {
			off_t off = (off_t)pg * 8 * 4096;
			FT_CHECK(ferrite_pread(fs, fd, buf, sizeof buf, off) == (ssize_t)sizeof buf,
				 "read %s page %u", p, pg);
			for (size_t i = 0; i < sizeof buf; i++) {
				uint8_t want = gen_of[f][pg]
						   ? gen_byte(f, pg, gen_of[f][pg], i)
						   : pattern((uint64_t)f, (uint64_t)off + i);
				FT_CHECK(buf[i] == want, "%s page %u byte %zu: generation %u lost",
					 p, pg, i, gen_of[f][pg]);
			}
		}
		FT_OK(ferrite_close(fs, fd));
	}
	return 0;
}

/* Two threads write large files while a third rewrites and reads the sparse
 * files' pages -- the very pages compaction moves, at quiet moments that
 * must not let a store race a page's copy. */
static int t_threads(void)
{
	ferrite_fs *fs;
	struct ferrite_mkfs_opts o = {.size = 128 * MiB, .mode = FERRITE_MODE_SYNC, .force = 1};
	FT_OK(ferrite_mkfs(pool, &o));
	FT_OK(ferrite_mount(pool, NULL, &fs));
	memset(gen_of, 0, sizeof gen_of);
	int nsparse = write_sparse(fs, NSPARSE);
	FT_CHECK(nsparse == NSPARSE, "only %d sparse files fit", nsparse);
	volatile int stop = 0;
	struct worker w[3] = {
	    {fs, 1, nsparse, 0, &stop}, {fs, 2, nsparse, 0, &stop}, {fs, 3, nsparse, 0, &stop}};
	pthread_t th[3];
	FT_CHECK(pthread_create(&th[2], NULL, rewriter, &w[2]) == 0, "pthread_create");
	for (int i = 0; i < 2; i++)
		FT_CHECK(pthread_create(&th[i], NULL, large_writer, &w[i]) == 0, "pthread_create");
	for (int i = 0; i < 2; i++)
		pthread_join(th[i], NULL);
	stop = 1;
	pthread_join(th[2], NULL);
	struct ferrite_info in;
	FT_OK(ferrite_get_info(fs, &in));
	printf("threads: large files of %lld and %lld KiB; %llu compactions moved %llu pages\n",
	       (long long)(w[0].size >> 10), (long long)(w[1].size >> 10),
	       (unsigned long long)in.compactions, (unsigned long long)in.compacted_pages);
	FT_CHECK(in.compactions > 0, "no compaction happened");
	FT_RUN(check_generations(fs, nsparse));
	FT_RUN(check_large_as(fs, "/large1", 500001, w[0].size));
	FT_RUN(check_large_as(fs, "/large2", 500002, w[1].size));
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

/* ---- a full pool still releases what it can ------------------------------------- */

/* Fills the pool to its last page: files of 1 MiB, then of one page, until
 * even those are refused. */
static int fill_to_the_brim(ferrite_fs *fs)
{
	static uint8_t buf[1 << 20];
	memset(buf, 0x5a, sizeof buf);
	char name[64];
	for (int size = 1 << 20, refused = 0, i = 0; size >= 4096; i++) {
		snprintf(name, sizeof name, "/brim-%d", i);
		int fd = ferrite_open(fs, name, O_WRONLY | O_CREAT | O_EXCL, 0644);
		ssize_t w = fd >= 0 ? ferrite_write(fs, fd, buf, (size_t)size) : fd;
		if (fd >= 0)
			ferrite_close(fs, fd);
		if (w == size) {
			refused = 0;
			continue;
		}
		FT_CHECK(w == -ENOSPC || (w >= 0 && w < size) || fd == -ENOSPC, "filling: %s",
			 ft_errname((int)w));
		if (++refused == 8) {
			size /= 16; /* 64 KiB, then 4 KiB */
			refused = 0;
		}
	}
	return 0;
}

/* A file whose windows are whole units (huge), on a pool with no page free:
 * releasing part of a huge window needs a page for its page table, which a
 * full pool does not have. Punch and truncate must still release the
 * windows after it, and punched bytes must read as zeros. Before: the
 * release stopped at the first window, the punch left old bytes in the hole,
 * and the truncate freed a partition that still had a window backed (fsck:
 * pages that belong to no partition; later files counted wrong blocks). */
static int t_full(void)
{
	ferrite_fs *fs;
	struct ferrite_mkfs_opts o = {.size = 64 * MiB, .force = 1};
	FT_OK(ferrite_mkfs(pool, &o));
	FT_OK(ferrite_mount(pool, NULL, &fs));
	const int64_t big = 6 * MiB;
	FT_EQ(write_large_as(fs, "/big", 7, big), big);
	FT_RUN(fill_to_the_brim(fs));
	struct statvfs a, b;
	FT_OK(ferrite_statvfs(fs, &a));
	int fd = FT_OK(ferrite_open(fs, "/big", O_RDWR, 0));
	/* [1 MiB + 4 KiB, 5 MiB): parts of windows 0 and 2, all of window 1 */
	FT_OK(ferrite_fallocate(fs, fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, MiB + 4096,
				4 * MiB - 4096));
	FT_OK(ferrite_statvfs(fs, &b));
	FT_CHECK((int64_t)(b.f_bfree - a.f_bfree) * 4096 >= 2 * MiB,
		 "the punch freed %lld bytes of a whole window",
		 (long long)(b.f_bfree - a.f_bfree) * 4096);
	static uint8_t got[6 * MiB], want[6 * MiB];
	FT_EQ(ferrite_pread(fs, fd, got, big, 0), big);
	fill_page(want, 7, 0, (size_t)big);
	memset(want + MiB + 4096, 0, 4 * MiB - 4096);
	FT_CHECK(memcmp(got, want, (size_t)big) == 0, "the punched file reads back wrong");
	/* to 1 MiB: window 0 is split no more than before, window 2 goes */
	FT_OK(ferrite_ftruncate(fs, fd, MiB));
	FT_OK(ferrite_statvfs(fs, &a));
	FT_CHECK((int64_t)(a.f_bfree - b.f_bfree) * 4096 >= MiB, "the truncate freed %lld bytes",
		 (long long)(a.f_bfree - b.f_bfree) * 4096);
	FT_EQ(ferrite_pread(fs, fd, got, big, 0), MiB);
	FT_CHECK(memcmp(got, want, MiB) == 0, "the truncated file reads back wrong");
	FT_OK(ferrite_close(fs, fd));
	FT_UNMOUNT_CLEAN(&fs, pool);
	return 0;
}

static const struct ft_case cases[] = {
    {"sync", t_sync, FT_TIER_SKIP},
    {"strict", t_strict, FT_TIER_SKIP},
    {"threads", t_threads, FT_TIER_SKIP},
    {"full", t_full, FT_TIER_SKIP},
};

int main(int argc, char **argv)
{
	pool = ft_pool_path("compact", "main");
	return ft_run(cases, sizeof cases / sizeof cases[0], argc, argv, NULL, NULL);
}
