/*
 * tier_fault_test.c -- a tiered pool whose backing file system fails: the
 * tier engine reaches it only through its table of system calls
 * (src/tier/sys.h), and this test puts functions of its own there that fail
 * a chosen call with a chosen errno, interrupt it (EINTR) or cut it short,
 * a given number of times. No root and no failing disk needed.
 *
 * What a user must see: an interrupted or short call is gone through again
 * (nothing fails); a namespace call the backing refuses fails with its errno
 * and changes nothing; a write-back that fails (EIO, ENOSPC) loses nothing
 * -- the data stays in the pool, is counted and reported, and reaches the
 * backing directory once it works again, also when the failure met recovery.
 * And a pool mounted with tier_no_writeback writes none of it back.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ferrite.h"
#include "tier/sys.h"
#include "unit.h"

#define KIB 1024ULL
#define MIB (1024ULL * 1024)

/* ---- the injected faults ------------------------------------------------- */

enum { F_PWRITE, F_PREAD, F_FDATASYNC, F_SYNCFS, F_OPENAT, F_MKDIRAT, F_UNLINKAT, F_RENAME, F_N };

static struct {
	int left[F_N]; /* calls still to fail */
	int err[F_N];  /* errno they fail with; 0: cut short instead */
	int hits[F_N]; /* calls failed so far */
} inj;

/* Fail this call? (the flusher thread calls too: atomics) */
static int hit(int f)
{
	int left = __atomic_load_n(&inj.left[f], __ATOMIC_ACQUIRE);
	while (left > 0)
		if (__atomic_compare_exchange_n(&inj.left[f], &left, left - 1, 0, __ATOMIC_ACQ_REL,
						__ATOMIC_ACQUIRE)) {
			__atomic_add_fetch(&inj.hits[f], 1, __ATOMIC_RELAXED);
			return 1;
		}
	return 0;
}

static void arm(int f, int err, int times)
{
	__atomic_store_n(&inj.err[f], err, __ATOMIC_RELEASE);
	__atomic_store_n(&inj.hits[f], 0, __ATOMIC_RELEASE);
	__atomic_store_n(&inj.left[f], times, __ATOMIC_RELEASE);
}

static void disarm_all(void)
{
	for (int f = 0; f < F_N; f++)
		__atomic_store_n(&inj.left[f], 0, __ATOMIC_RELEASE);
}

#define FAIL_OR(f, shortened, call)                                                                \
	do {                                                                                       \
		if (hit(f)) {                                                                      \
			if (!inj.err[f])                                                           \
				return shortened;                                                  \
			errno = inj.err[f];                                                        \
			return -1;                                                                 \
		}                                                                                  \
		return call;                                                                       \
	} while (0)

static ssize_t t_pwrite(int fd, const void *buf, size_t n, off_t off)
{
	FAIL_OR(F_PWRITE, tier_sys_libc.pwrite(fd, buf, n > 1 ? n / 2 : n, off),
		tier_sys_libc.pwrite(fd, buf, n, off));
}

static ssize_t t_pread(int fd, void *buf, size_t n, off_t off)
{
	FAIL_OR(F_PREAD, tier_sys_libc.pread(fd, buf, n > 1 ? n / 2 : n, off),
		tier_sys_libc.pread(fd, buf, n, off));
}

static int t_fdatasync(int fd)
{
	FAIL_OR(F_FDATASYNC, tier_sys_libc.fdatasync(fd), tier_sys_libc.fdatasync(fd));
}

static int t_syncfs(int fd)
{
	FAIL_OR(F_SYNCFS, tier_sys_libc.syncfs(fd), tier_sys_libc.syncfs(fd));
}

static int t_openat(int dirfd, const char *path, int flags, mode_t mode)
{
	/* only creations: lookups of the walk stay as they are */
	if (!(flags & O_CREAT))
		return tier_sys_libc.openat(dirfd, path, flags, mode);
	FAIL_OR(F_OPENAT, tier_sys_libc.openat(dirfd, path, flags, mode),
		tier_sys_libc.openat(dirfd, path, flags, mode));
}

static long t_openat2(int dirfd, const char *path, struct open_how *how, size_t size)
{
	if (!(how->flags & O_CREAT))
		return tier_sys_libc.openat2(dirfd, path, how, size);
	FAIL_OR(F_OPENAT, tier_sys_libc.openat2(dirfd, path, how, size),
		tier_sys_libc.openat2(dirfd, path, how, size));
}

static int t_mkdirat(int dirfd, const char *path, mode_t mode)
{
	FAIL_OR(F_MKDIRAT, tier_sys_libc.mkdirat(dirfd, path, mode),
		tier_sys_libc.mkdirat(dirfd, path, mode));
}

static int t_unlinkat(int dirfd, const char *path, int flags)
{
	FAIL_OR(F_UNLINKAT, tier_sys_libc.unlinkat(dirfd, path, flags),
		tier_sys_libc.unlinkat(dirfd, path, flags));
}

static int t_renameat2(int od, const char *o, int nd, const char *n, unsigned flags)
{
	FAIL_OR(F_RENAME, tier_sys_libc.renameat2(od, o, nd, n, flags),
		tier_sys_libc.renameat2(od, o, nd, n, flags));
}

/* ---- pools --------------------------------------------------------------- */

static char dir[256], pool[300], backing[300];

static int setup(const char *tag)
{
	disarm_all();
	snprintf(dir, sizeof dir, "/dev/shm/ferrite-tierfault-%d-%s", (int)getpid(), tag);
	snprintf(pool, sizeof pool, "%s/pool", dir);
	snprintf(backing, sizeof backing, "%s/b", dir);
	char cmd[700];
	snprintf(cmd, sizeof cmd, "rm -rf '%s' && mkdir -p '%s'", dir, backing);
	CHECK_EQ(system(cmd), 0);
	struct ferrite_mkfs_opts o = {.size = 64 * MIB,
				      .force = 1,
				      .tier_backing = backing,
				      .tier_consistency = FERRITE_TIER_PER_WRITE,
				      .tier_flush_ms = 60000};
	CHECK_EQ(ferrite_mkfs(pool, &o), 0);
	return 0;
}

static void teardown(void)
{
	disarm_all();
	char cmd[700];
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
	if (system(cmd) != 0)
		fprintf(stderr, "cannot remove %s\n", dir);
}

static unsigned char pat(uint64_t off, unsigned key)
{
	return (unsigned char)((off * 2654435761u >> 13) ^ key);
}

static int write_file(ferrite_fs *fs, const char *path, uint64_t len, unsigned key)
{
	int fd = ferrite_open(fs, path, O_CREAT | O_WRONLY | O_TRUNC, 0644);
	CHECK(fd >= 0);
	unsigned char *b = malloc(len);
	CHECK(b);
	for (uint64_t i = 0; i < len; i++)
		b[i] = pat(i, key);
	CHECK_EQ(ferrite_pwrite(fs, fd, b, len, 0), (long long)len);
	free(b);
	CHECK_EQ(ferrite_close(fs, fd), 0);
	return 0;
}

/* The file holds the pattern: through the pool (fs) or on the host. */
static int check_file(ferrite_fs *fs, const char *path, uint64_t len, unsigned key)
{
	unsigned char *b = malloc(len + 1);
	CHECK(b);
	long long got;
	if (fs) {
		int fd = ferrite_open(fs, path, O_RDONLY, 0);
		CHECK(fd >= 0);
		got = ferrite_pread(fs, fd, b, len + 1, 0);
		CHECK_EQ(ferrite_close(fs, fd), 0);
	} else {
		int fd = open(path, O_RDONLY);
		CHECK(fd >= 0);
		got = pread(fd, b, len + 1, 0);
		close(fd);
	}
	CHECK_EQ(got, (long long)len);
	uint64_t i = 0;
	while (i < len && b[i] == pat(i, key))
		i++;
	free(b);
	if (i < len)
		fprintf(stderr, "  %s: byte %llu differs\n", path, (unsigned long long)i);
	CHECK_EQ(i, len);
	return 0;
}

static int in_backing(const char *name, char *out, size_t n)
{
	snprintf(out, n, "%s/%s", backing, name);
	return 0;
}

/* ---- cases ---------------------------------------------------------------- */

/* Every call interrupted once or more goes through: nothing fails. */
static int interrupted(void)
{
	CHECK_EQ(setup("eintr"), 0);
	ferrite_fs *fs;
	CHECK_EQ(ferrite_mount(pool, NULL, &fs), 0);
	arm(F_MKDIRAT, EINTR, 2);
	CHECK_EQ(ferrite_mkdir(fs, "/d", 0755), 0);
	arm(F_OPENAT, EINTR, 2);
	CHECK_EQ(write_file(fs, "/d/f", 3 * MIB + 100, 1), 0);
	arm(F_RENAME, EINTR, 1);
	CHECK_EQ(ferrite_rename(fs, "/d/f", "/d/g", 0), 0);
	arm(F_PWRITE, EINTR, 5);
	arm(F_SYNCFS, EINTR, 1);
	arm(F_FDATASYNC, EINTR, 1);
	CHECK_EQ(ferrite_unmount(fs), 0); /* drains through pwrite */
	CHECK(inj.hits[F_MKDIRAT] == 2 && inj.hits[F_OPENAT] == 2 && inj.hits[F_RENAME] == 1);
	CHECK_EQ(inj.hits[F_PWRITE], 5);
	char p[400];
	in_backing("d/g", p, sizeof p);
	CHECK_EQ(check_file(NULL, p, 3 * MIB + 100, 1), 0);
	teardown();
	return 0;
}

/* Reads and writes that come back short are gone on with. */
static int short_io(void)
{
	CHECK_EQ(setup("short"), 0);
	char p[400];
	in_backing("host", p, sizeof p);
	{ /* a file the backing directory has before the mount: read on a miss */
		int fd = open(p, O_CREAT | O_WRONLY | O_TRUNC, 0644);
		CHECK(fd >= 0);
		for (uint64_t i = 0; i < 2 * MIB + 7; i++) {
			unsigned char c = pat(i, 2);
			CHECK_EQ(pwrite(fd, &c, 1, (off_t)i), 1);
		}
		close(fd);
	}
	ferrite_fs *fs;
	CHECK_EQ(ferrite_mount(pool, NULL, &fs), 0);
	arm(F_PREAD, 0, 1000);
	CHECK_EQ(check_file(fs, "/host", 2 * MIB + 7, 2), 0);
	CHECK(inj.hits[F_PREAD] > 0);
	CHECK_EQ(write_file(fs, "/new", 5 * MIB + 3, 3), 0);
	arm(F_PWRITE, 0, 1000);
	CHECK_EQ(ferrite_unmount(fs), 0);
	CHECK(inj.hits[F_PWRITE] > 0);
	in_backing("new", p, sizeof p);
	CHECK_EQ(check_file(NULL, p, 5 * MIB + 3, 3), 0);
	teardown();
	return 0;
}

/* A namespace call the backing file system refuses fails with its errno and
 * leaves the tree as it was. */
static int refused_names(void)
{
	CHECK_EQ(setup("erofs"), 0);
	ferrite_fs *fs;
	struct stat st;
	CHECK_EQ(ferrite_mount(pool, NULL, &fs), 0);
	CHECK_EQ(write_file(fs, "/keep", 10000, 4), 0);
	arm(F_MKDIRAT, EROFS, 1);
	CHECK_EQ(ferrite_mkdir(fs, "/d", 0755), -EROFS);
	CHECK_EQ(ferrite_stat(fs, "/d", &st), -ENOENT);
	arm(F_OPENAT, EROFS, 1);
	CHECK_EQ(ferrite_open(fs, "/new", O_CREAT | O_WRONLY, 0644), -EROFS);
	CHECK_EQ(ferrite_stat(fs, "/new", &st), -ENOENT);
	arm(F_UNLINKAT, EIO, 1);
	CHECK_EQ(ferrite_unlink(fs, "/keep"), -EIO);
	arm(F_RENAME, ENOSPC, 1);
	CHECK_EQ(ferrite_rename(fs, "/keep", "/moved", 0), -ENOSPC);
	CHECK_EQ(ferrite_stat(fs, "/moved", &st), -ENOENT);
	CHECK_EQ(check_file(fs, "/keep", 10000, 4), 0);
	CHECK_EQ(ferrite_unmount(fs), 0);
	char p[400];
	in_backing("keep", p, sizeof p);
	CHECK_EQ(check_file(NULL, p, 10000, 4), 0);
	teardown();
	return 0;
}

/* Write-back fails (EIO or ENOSPC, for good): the data stays in the pool,
 * readable; the failure is counted and reported; once the backing works
 * again the data reaches it. */
static int failed_writeback(int err)
{
	CHECK_EQ(setup(err == EIO ? "eio" : "enospc"), 0);
	ferrite_fs *fs;
	struct ferrite_mount_opts mo = {.tier_flush_ms = 20};
	CHECK_EQ(ferrite_mount(pool, &mo, &fs), 0);
	arm(F_PWRITE, err, 1 << 30);
	CHECK_EQ(write_file(fs, "/f", 1 * MIB + 5, 5), 0);
	struct ferrite_tier_info ti;
	for (int ms = 0; ms < 10000; ms += 10) { /* the flusher's next rounds */
		CHECK_EQ(ferrite_get_tier_info(fs, &ti), 0);
		if (ti.flush_errors)
			break;
		usleep(10000);
	}
	CHECK(ti.flush_errors > 0);
	CHECK_EQ(ti.backing_errno, err);
	CHECK_EQ(check_file(fs, "/f", 1 * MIB + 5, 5), 0); /* still readable */
	int rc = ferrite_unmount(fs);
	CHECK(inj.hits[F_PWRITE] > 0);
	CHECK_EQ(rc, -err); /* the unmount could not drain: said so, with the cause */
	CHECK_EQ(ferrite_tier_stats(pool, &ti), 0);
	CHECK(ti.flush_errors > 0);
	CHECK(ti.dirty_chunks > 0);
	disarm_all();
	CHECK_EQ(ferrite_mount(pool, NULL, &fs), 0);
	CHECK_EQ(check_file(fs, "/f", 1 * MIB + 5, 5), 0);
	CHECK_EQ(ferrite_unmount(fs), 0);
	char p[400];
	in_backing("f", p, sizeof p);
	CHECK_EQ(check_file(NULL, p, 1 * MIB + 5, 5), 0);
	teardown();
	return 0;
}

static int failed_writeback_eio(void)
{
	return failed_writeback(EIO);
}

static int failed_writeback_enospc(void)
{
	return failed_writeback(ENOSPC);
}

/* A process dies with dirty data; the next mount's recovery cannot write
 * back (EIO): the pool still mounts and serves the data, and a later
 * unmount with the backing working delivers it. */
static int failed_recovery(void)
{
	CHECK_EQ(setup("recovery"), 0);
	fflush(NULL);
	pid_t pid = fork();
	if (pid == 0) {
		ferrite_fs *fs;
		if (ferrite_mount(pool, NULL, &fs) || write_file(fs, "/f", 2 * MIB + 9, 6))
			_exit(1);
		_exit(0); /* no unmount: the chunks stay dirty in the pool */
	}
	int st;
	CHECK(pid > 0 && waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0);
	arm(F_PWRITE, EIO, 1 << 30);
	ferrite_fs *fs;
	CHECK_EQ(ferrite_mount(pool, NULL, &fs), 0);
	CHECK(inj.hits[F_PWRITE] > 0);
	CHECK_EQ(check_file(fs, "/f", 2 * MIB + 9, 6), 0);
	struct ferrite_tier_info ti;
	CHECK_EQ(ferrite_get_tier_info(fs, &ti), 0);
	CHECK_EQ(ti.backing_errno, EIO);
	disarm_all();
	CHECK_EQ(ferrite_unmount(fs), 0);
	char p[400];
	in_backing("f", p, sizeof p);
	CHECK_EQ(check_file(NULL, p, 2 * MIB + 9, 6), 0);
	teardown();
	return 0;
}

/* tier_no_writeback: nothing reaches the backing files, not even at
 * unmount, and a system call that would write them is never made; the next
 * ordinary mount delivers the data. */
static int no_writeback(void)
{
	CHECK_EQ(setup("nowb"), 0);
	ferrite_fs *fs;
	struct ferrite_mount_opts held = {.tier_no_writeback = 1, .tier_flush_ms = 10};
	CHECK_EQ(ferrite_mount(pool, &held, &fs), 0);
	CHECK_EQ(write_file(fs, "/f", 300 * KIB, 7), 0);
	usleep(50000);		     /* five flush periods, had there been a flusher */
	arm(F_PWRITE, EIO, 1 << 30); /* counts the write-backs tried: none */
	arm(F_FDATASYNC, EIO, 1 << 30);
	CHECK_EQ(check_file(fs, "/f", 300 * KIB, 7), 0);
	CHECK_EQ(ferrite_unmount(fs), 0);
	CHECK_EQ(inj.hits[F_PWRITE] + inj.hits[F_FDATASYNC], 0);
	char p[400];
	struct stat st;
	in_backing("f", p, sizeof p);
	CHECK(stat(p, &st) == 0 && st.st_size == 0); /* the name is made, no data */
	disarm_all();
	CHECK_EQ(ferrite_mount(pool, NULL, &fs), 0);
	CHECK_EQ(ferrite_unmount(fs), 0);
	CHECK_EQ(check_file(NULL, p, 300 * KIB, 7), 0);
	teardown();
	return 0;
}

static const struct unit_case cases[] = {
    {"interrupted", interrupted},
    {"short_io", short_io},
    {"refused_names", refused_names},
    {"failed_writeback_eio", failed_writeback_eio},
    {"failed_writeback_enospc", failed_writeback_enospc},
    {"failed_recovery", failed_recovery},
    {"no_writeback", no_writeback},
};

static void install(void) __attribute__((constructor));
static void install(void)
{
	/* before any pool is mounted (sys.h) */
	tier_sys.pwrite = t_pwrite;
	tier_sys.pread = t_pread;
	tier_sys.fdatasync = t_fdatasync;
	tier_sys.syncfs = t_syncfs;
	tier_sys.openat = t_openat;
	tier_sys.openat2 = t_openat2;
	tier_sys.mkdirat = t_mkdirat;
	tier_sys.unlinkat = t_unlinkat;
	tier_sys.renameat2 = t_renameat2;
}

UNIT_MAIN(cases)
