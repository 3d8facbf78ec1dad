/*
 * strict_crash_test.c -- the crash windows of a strict write, driven step by
 * step as log_test drives log_stage/log_apply/log_retire: a child process
 * mounts the pool and makes one strict write that stops dead (_exit, no
 * cleanup) at a chosen step of its commit (dp_strict_hook); the parent then
 * mounts the pool (recovery) and checks that the file holds wholly the old
 * bytes and size (stopped before the commit point) or wholly the new ones
 * (after it), that fsck is clean and that the free space is exactly what it
 * is without a crash (nothing leaked, nothing freed twice) -- before the
 * commit point, free space plus the file's blocks does not shrink: pages of
 * a window's reservation past the size may be named first (strict.c S1),
 * which may promote the window and free its table. Each case is run
 * for the redo copy and for write-and-swap (whole windows, pages of a large
 * window, pages of a small file, overwrite + extend).
 */
#include <errno.h>
#include <fcntl.h>
#include <sys/wait.h>

#include "ferrite.h"
#include "fs/fs.h"
#include "unit.h"

#define MIB (1024ULL * 1024)

static const char *pool;
static int stop_at = -1;

static void stop_hook(int step)
{
	if (step == stop_at)
		_exit(0); /* the crash: nothing after this step happens */
}

static void fill(unsigned char *b, uint64_t n, unsigned key)
{
	for (uint64_t i = 0; i < n; i++)
		b[i] = (unsigned char)((i * 131 + key * 7 + (i >> 12)) ^ key);
}

struct wcase {
	uint64_t size0;	   /* file written first (sync path) */
	uint64_t off, len; /* then the strict write */
	uint64_t redo_max; /* $FERRITE_STRICT_REDO_MAX */
};

static uint64_t free_bytes(ferrite_fs *fs)
{
	struct statvfs sv;
	if (ferrite_statvfs(fs, &sv))
		return 0;
	return (uint64_t)sv.f_bfree * sv.f_frsize;
}

/* Formats the pool with the file's first contents. */
static int prepare(const struct wcase *c, unsigned char *old)
{
	struct ferrite_mkfs_opts o = {.size = 64 * MIB, .mode = FERRITE_MODE_STRICT, .force = 1};
	ferrite_fs *fs;
	CHECK_EQ(ferrite_mkfs(pool, &o), 0);
	CHECK_EQ(ferrite_mount(pool, NULL, &fs), 0);
	int fd = ferrite_open(fs, "/f", O_CREAT | O_RDWR, 0644);
	CHECK(fd >= 0);
	fill(old, c->size0, 1);
	CHECK_EQ(ferrite_write(fs, fd, old, c->size0), (long long)c->size0);
	CHECK_EQ(ferrite_close(fs, fd), 0);
	CHECK_EQ(ferrite_unmount(fs), 0);
	return 0;
}

/* The strict write, in a child; stop < 0: no crash. */
static int child_write(const struct wcase *c, const unsigned char *data, int stop)
{
	fflush(NULL);
	pid_t pid = fork();
	if (pid == 0) {
		char v[32];
		snprintf(v, sizeof(v), "%llu", (unsigned long long)c->redo_max);
		setenv("FERRITE_STRICT_REDO_MAX", v, 1);
		ferrite_fs *fs;
		if (ferrite_mount(pool, NULL, &fs))
			_exit(2);
		int fd = ferrite_open(fs, "/f", O_RDWR, 0);
		stop_at = stop;
		dp_strict_hook = stop_hook;
		ssize_t r = ferrite_pwrite(fs, fd, data, c->len, (off_t)c->off);
		dp_strict_hook = NULL;
		if (r != (ssize_t)c->len)
			_exit(3);
		ferrite_close(fs, fd);
		ferrite_unmount(fs);
		_exit(stop < 0 ? 0 : 4); /* the hook should have stopped it */
	}
	int st;
	CHECK(pid > 0 && waitpid(pid, &st, 0) == pid);
	CHECK(WIFEXITED(st));
	CHECK_EQ(WEXITSTATUS(st), 0);
	return 0;
}

/* After recovery: the file is exactly want (size bytes); fsck clean. *freep
 * is the free space, *blocksp the file's st_blocks in bytes. */
static int check_file(const unsigned char *want, uint64_t size, uint64_t *freep, uint64_t *blocksp)
{
	ferrite_fs *fs;
	CHECK_EQ(ferrite_mount(pool, NULL, &fs), 0);
	int fd = ferrite_open(fs, "/f", O_RDONLY, 0);
	CHECK(fd >= 0);
	struct stat st;
	CHECK_EQ(ferrite_fstat(fs, fd, &st), 0);
	CHECK_EQ(st.st_size, (long long)size);
	unsigned char *got = malloc(size);
	CHECK(got);
	CHECK_EQ(ferrite_pread(fs, fd, got, size, 0), (long long)size);
	int same = memcmp(got, want, size) == 0;
	free(got);
	CHECK(same);
	*freep = free_bytes(fs);
	*blocksp = (uint64_t)st.st_blocks * 512;
	CHECK_EQ(ferrite_close(fs, fd), 0);
	CHECK_EQ(ferrite_unmount(fs), 0);
	CHECK_EQ(ferrite_fsck(pool, 0, NULL, NULL, NULL, NULL), FERRITE_FSCK_CLEAN);
	return 0;
}

/* After a crash before the commit point: what the write stored past the
 * old size must not show when the file grows over it (holes read zeros). */
static int check_grown_zero(uint64_t size0, uint64_t size1)
{
	ferrite_fs *fs;
	CHECK_EQ(ferrite_mount(pool, NULL, &fs), 0);
	int fd = ferrite_open(fs, "/f", O_RDWR, 0);
	CHECK(fd >= 0);
	CHECK_EQ(ferrite_ftruncate(fs, fd, (off_t)size1), 0);
	unsigned char *got = malloc(size1 - size0);
	CHECK(got);
	CHECK_EQ(ferrite_pread(fs, fd, got, size1 - size0, (off_t)size0),
		 (long long)(size1 - size0));
	uint64_t i = 0;
	while (i < size1 - size0 && !got[i])
		i++;
	free(got);
	if (i < size1 - size0)
		fprintf(stderr, "  byte %llu reads non-zero after the file grew over it\n",
			(unsigned long long)(size0 + i));
	CHECK_EQ(i, size1 - size0);
	CHECK_EQ(ferrite_close(fs, fd), 0);
	CHECK_EQ(ferrite_unmount(fs), 0);
	return 0;
}

static int run_case(const struct wcase *c)
{
	pool = unit_pool_path("strictcrash");
	uint64_t size1 = c->off + c->len > c->size0 ? c->off + c->len : c->size0;
	unsigned char *old = malloc(c->size0), *data = malloc(c->len), *new = malloc(size1);
	CHECK(old && data && new);
	fill(data, c->len, 2);
	int rc = 1;
	/* The reference: old contents, new contents, free space of each. */
	uint64_t free_old, free_new, f, blocks_old, blocks_new, b;
	if (prepare(c, old) || check_file(old, c->size0, &free_old, &blocks_old))
		goto out;
	memcpy(new, old, c->size0);
	memcpy(new + c->off, data, c->len);
	if (child_write(c, data, -1) || check_file(new, size1, &free_new, &blocks_new))
		goto out;
	static const char *names[] = {"staged", "committed", "applied", "retired"};
	for (int step = DP_STRICT_STAGED; step <= DP_STRICT_RETIRED; step++) {
		int after = step >= DP_STRICT_COMMITTED;
		if (prepare(c, old) || child_write(c, data, step)) {
			fprintf(stderr, "  crash at %s\n", names[step]);
			goto out;
		}
		if (check_file(after ? new : old, after ? size1 : c->size0, &f, &b) ||
		    (after ? f != free_new || b != blocks_new
			   : f > free_old || f + b < free_old + blocks_old)) {
			fprintf(stderr,
				"  crash at %s: wrong state after recovery (free %llu blocks %llu; "
				"before %llu %llu, after %llu %llu)\n",
				names[step], (unsigned long long)f, (unsigned long long)b,
				(unsigned long long)free_old, (unsigned long long)blocks_old,
				(unsigned long long)free_new, (unsigned long long)blocks_new);
			goto out;
		}
		if (!after && size1 > c->size0 && check_grown_zero(c->size0, size1)) {
			fprintf(stderr, "  crash at %s: the write shows past the old size\n",
				names[step]);
			goto out;
		}
	}
	rc = 0;
out:
	free(old);
	free(data);
	free(new);
	unlink(pool);
	return rc;
}

/* A small overwrite through the log, unaligned. */
static int redo_small(void)
{
	struct wcase c = {.size0 = 3 * MIB, .off = 5000, .len = 6000, .redo_max = 16384};
	return run_case(&c);
}

/* Overwrite + extend of a small file through the log. */
static int redo_extend(void)
{
	struct wcase c = {.size0 = 10000, .off = 9000, .len = 5000, .redo_max = 16384};
	return run_case(&c);
}

/* Overwrite + extend of a large file through the log: the bytes past the
 * size go straight into pages of the last window's reservation. */
static int redo_extend_large(void)
{
	struct wcase c = {
	    .size0 = 2 * MIB + 100000, .off = 2 * MIB + 97000, .len = 20000, .redo_max = 16384};
	return run_case(&c);
}

/* Whole windows swapped, with unaligned edges in partly written windows. */
static int swap_windows(void)
{
	struct wcase c = {.size0 = 9 * MIB, .off = MIB + 123, .len = 5 * MIB, .redo_max = 0};
	return run_case(&c);
}

/* Pages of one-unit windows swapped (the windows become page tables). */
static int swap_pages_large(void)
{
	struct wcase c = {.size0 = 4 * MIB, .off = 300000, .len = 100000, .redo_max = 0};
	return run_case(&c);
}

/* Pages of a small file (a shared window) swapped. */
static int swap_pages_small(void)
{
	struct wcase c = {.size0 = 200000, .off = 4097, .len = 50000, .redo_max = 0};
	return run_case(&c);
}

/* Swapped overwrite that extends the file into new windows. */
static int swap_extend(void)
{
	struct wcase c = {.size0 = 3 * MIB + 5, .off = 2 * MIB + 7, .len = 4 * MIB, .redo_max = 0};
	return run_case(&c);
}

static const struct unit_case cases[] = {
    {"redo_small", redo_small},
    {"redo_extend", redo_extend},
    {"redo_extend_large", redo_extend_large},
    {"swap_windows", swap_windows},
    {"swap_pages_large", swap_pages_large},
    {"swap_pages_small", swap_pages_small},
    {"swap_extend", swap_extend},
};

UNIT_MAIN(cases)
