/*
 * tier_test.c -- tiered pools through the public API: what only they have.
 * The POSIX behaviour of their files is checked by the other api tests run
 * with $FERRITE_TEST_TIER (CMakeLists.txt), the protocol by the crash
 * explorer, kill and model tests. Here:
 *   - bad input: a backing directory missing, not a directory, read-only,
 *     full, swapped for another, bound to another pool, or holding the pool
 *     file itself -- a clear error each time, and nothing acknowledged lost;
 *   - a data set many times the cache: bytes right, collisions and
 *     wrap-arounds counted, the backing directory complete after unmount;
 *   - recovery after a process dies: data of a file whose creation the
 *     backing file system lost is made again (at its path, else in
 *     .ferrite-lost+found), including what the cache held clean, and epoch
 *     consistency keeps exactly what fsync acknowledged;
 *   - removed files: an open unlinked file keeps its data until its last
 *     close; a hard link keeps the data after the other name goes;
 *   - a memory mapping (the backing file's, once the cache drained it) and
 *     the calls see each other's bytes; the counters are readable live;
 *   - more files than records: a closed, clean file gives its record up.
 * Needs root for the read-only and full file systems (tmpfs mounts).
 */
#include "ft_test.h"

#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/xattr.h>

#define MIB	       (1024ULL * 1024)
#define FR_MIN_T(a, b) ((a) < (b) ? (a) : (b))

static char tmpdir[256];

/* A scratch directory in /dev/shm for this case, emptied. */
static const char *scratch(const char *tag)
{
	snprintf(tmpdir, sizeof tmpdir, "/dev/shm/ferrite-tiertest-%d-%s", (int)getpid(), tag);
	char cmd[1000];
	snprintf(cmd, sizeof cmd, "umount -l '%s/b' 2>/dev/null; rm -rf '%s' && mkdir -p '%s/b'",
		 tmpdir, tmpdir, tmpdir);
	if (system(cmd) != 0)
		fprintf(stderr, "cannot make %s\n", tmpdir);
	return tmpdir;
}

static void scratch_done(void)
{
	char cmd[1000];
	snprintf(cmd, sizeof cmd, "umount -l '%s/b' 2>/dev/null; rm -rf '%s'", tmpdir, tmpdir);
	if (system(cmd) != 0)
		fprintf(stderr, "cannot remove %s\n", tmpdir);
}

static int mkfs_tier(const char *pool, const char *backing, uint64_t size, int consistency,
		     unsigned flush_ms, unsigned epoch_ms)
{
	struct ferrite_mkfs_opts o = {.size = size,
				      .force = 1,
				      .tier_backing = backing,
				      .tier_consistency = consistency,
				      .tier_flush_ms = flush_ms,
				      .tier_epoch_ms = epoch_ms};
	return ferrite_mkfs(pool, &o);
}

static int write_pattern(ferrite_fs *fs, const char *path, uint64_t len, uint64_t key)
{
	int fd = FT_OK(ferrite_open(fs, path, O_CREAT | O_WRONLY | O_TRUNC, 0644));
	char *buf = malloc(1 * MIB);
	FT_CHECK(buf, "out of memory");
	for (uint64_t off = 0; off < len; off += MIB) {
		size_t n = (size_t)FR_MIN_T(MIB, len - off);
		ft_fill(buf, n, key, off);
		ssize_t w = ferrite_pwrite(fs, fd, buf, n, (off_t)off);
		if (w != (ssize_t)n) {
			free(buf);
			FT_CHECK(0, "pwrite %s at %llu: %s", path, (unsigned long long)off,
				 ft_errname(w));
		}
	}
	free(buf);
	FT_OK(ferrite_close(fs, fd));
	return 0;
}

static int check_pattern_fd(int fd, ferrite_fs *fs, uint64_t len, uint64_t key, int host)
{
	char *buf = malloc(1 * MIB);
	FT_CHECK(buf, "out of memory");
	for (uint64_t off = 0; off < len; off += MIB) {
		size_t n = (size_t)FR_MIN_T(MIB, len - off);
		ssize_t r = host ? pread(fd, buf, n, (off_t)off)
				 : ferrite_pread(fs, fd, buf, n, (off_t)off);
		long long bad = r == (ssize_t)n ? ft_verify(buf, n, key, off) : 0;
		if (r != (ssize_t)n || bad >= 0) {
			free(buf);
			FT_CHECK(0, "%s read at %llu: %zd bytes, first bad byte %lld",
				 host ? "backing" : "pool", (unsigned long long)off, r, bad);
		}
	}
	free(buf);
	return 0;
}

static int check_pattern(ferrite_fs *fs, const char *path, uint64_t len, uint64_t key)
{
	int fd = FT_OK(ferrite_open(fs, path, O_RDONLY, 0));
	struct stat st;
	FT_OK(ferrite_fstat(fs, fd, &st));
	FT_EQ(st.st_size, (off_t)len);
	int rc = check_pattern_fd(fd, fs, len, key, 0);
	ferrite_close(fs, fd);
	return rc;
}

/* The backing file itself, read on the host. */
static int check_backing(const char *file, uint64_t len, uint64_t key)
{
	int fd = open(file, O_RDONLY);
	FT_CHECK(fd >= 0, "open %s: %s", file, strerror(errno));
	struct stat st;
	fstat(fd, &st);
	if ((uint64_t)st.st_size != len) {
		close(fd);
		FT_CHECK(0, "%s has %lld bytes, expected %llu", file, (long long)st.st_size,
			 (unsigned long long)len);
	}
	int rc = check_pattern_fd(fd, NULL, len, key, 1);
	close(fd);
	return rc;
}

/* ---- cases ------------------------------------------------------------------ */

static int bad_backing(void)
{
	const char *d = scratch("bad");
	char pool[300], backing[300], file[300];
	snprintf(pool, sizeof pool, "%s/p.pool", d);
	snprintf(backing, sizeof backing, "%s/b", d);
	snprintf(file, sizeof file, "%s/file", d);
	FT_ERR(mkfs_tier(pool, "/nonexistent/ferrite-backing", 16 * MIB, 0, 0, 0), ENOENT);
	FT_ERRMSG_ONE_LINE();
	FT_CHECK(strstr(ferrite_errmsg(), "/nonexistent"), "message names the directory: %s",
		 ferrite_errmsg());
	FILE *f = fopen(file, "w");
	FT_CHECK(f, "cannot create %s", file);
	fclose(f);
	FT_ERR(mkfs_tier(pool, file, 16 * MIB, 0, 0, 0), ENOTDIR);
	FT_ERRMSG_ONE_LINE();
	/* The pool may not live inside the tree it caches. */
	char inside[320];
	snprintf(inside, sizeof inside, "%s/p.pool", backing);
	FT_ERR(mkfs_tier(inside, backing, 16 * MIB, 0, 0, 0), EINVAL);
	FT_ERRMSG_ONE_LINE();
	FT_ERR(mkfs_tier(pool, backing, 16 * MIB, 7, 0, 0), EINVAL);
	struct ferrite_mkfs_opts strict = {
	    .size = 16 * MIB, .mode = FERRITE_MODE_STRICT, .force = 1, .tier_backing = backing};
	FT_ERR(ferrite_mkfs(pool, &strict), EINVAL);
	/* A directory already bound to a pool is not taken without --force. */
	FT_OK(mkfs_tier(pool, backing, 16 * MIB, 0, 0, 0));
	char pool2[300];
	snprintf(pool2, sizeof pool2, "%s/p2.pool", d);
	struct ferrite_mkfs_opts o2 = {.size = 16 * MIB, .tier_backing = backing};
	FT_ERR(ferrite_mkfs(pool2, &o2), EEXIST);
	FT_ERRMSG_ONE_LINE();
	/* Missing at mount: refused, naming it; the pool is intact. */
	ferrite_fs *fs;
	FT_OK(ferrite_mount(pool, NULL, &fs));
	FT_RUN(write_pattern(fs, "/keep", 3 * MIB + 5, 1));
	FT_OK(ferrite_unmount(fs));
	char moved[320];
	snprintf(moved, sizeof moved, "%s.moved", backing);
	FT_CHECK(rename(backing, moved) == 0, "rename: %s", strerror(errno));
	FT_ERR(ferrite_mount(pool, NULL, &fs), ENOENT);
	FT_ERRMSG_ONE_LINE();
	FT_CHECK(strstr(ferrite_errmsg(), backing), "message names %s: %s", backing,
		 ferrite_errmsg());
	/* Swapped for another directory at the same path: refused. */
	FT_CHECK(mkdir(backing, 0755) == 0, "mkdir: %s", strerror(errno));
	FT_ERR(ferrite_mount(pool, NULL, &fs), EUCLEAN);
	FT_ERRMSG_ONE_LINE();
	/* ... and one that belongs to another pool, too. */
	FT_OK(mkfs_tier(pool2, backing, 16 * MIB, 0, 0, 0));
	FT_ERR(ferrite_mount(pool, NULL, &fs), EUCLEAN);
	FT_CHECK(strstr(ferrite_errmsg(), "another pool"), "says so: %s", ferrite_errmsg());
	/* The right one back: everything there. */
	char cmd[1000];
	snprintf(cmd, sizeof cmd, "rm -rf '%s' && mv '%s' '%s'", backing, moved, backing);
	FT_CHECK(system(cmd) == 0, "cannot restore %s", backing);
	FT_OK(ferrite_mount(pool, NULL, &fs));
	FT_RUN(check_pattern(fs, "/keep", 3 * MIB + 5, 1));
	FT_OK(ferrite_unmount(fs));
	FT_EQ(ferrite_fsck(pool, 0, NULL, NULL, NULL, NULL), FERRITE_FSCK_CLEAN);
	/* A pm-engine call on it would be wrong: the stats say what it is. */
	struct ferrite_tier_info ti;
	FT_OK(ferrite_tier_stats(pool, &ti));
	FT_CHECK(!strcmp(ti.backing, backing), "backing %s", ti.backing);
	unlink(pool);
	unlink(pool2);
	scratch_done();
	return 0;
}

/* A read-only backing file system: mkfs and mount refuse clearly. */
static int readonly_backing(void)
{
	const char *d = scratch("ro");
	char pool[300], backing[300];
	snprintf(pool, sizeof pool, "%s/p.pool", d);
	snprintf(backing, sizeof backing, "%s/b", d);
	FT_CHECK(mount("tmpfs", backing, "tmpfs", 0, "size=8m") == 0, "mount tmpfs: %s",
		 strerror(errno));
	FT_OK(mkfs_tier(pool, backing, 16 * MIB, 0, 0, 0));
	ferrite_fs *fs;
	FT_OK(ferrite_mount(pool, NULL, &fs));
	FT_RUN(write_pattern(fs, "/f", 1 * MIB, 2));
	FT_OK(ferrite_unmount(fs));
	FT_CHECK(mount(NULL, backing, NULL, MS_REMOUNT | MS_RDONLY, NULL) == 0, "remount ro: %s",
		 strerror(errno));
	FT_ERR(ferrite_mount(pool, NULL, &fs), EROFS);
	FT_ERRMSG_ONE_LINE();
	FT_CHECK(strstr(ferrite_errmsg(), "read-only"), "says why: %s", ferrite_errmsg());
	char pool2[300];
	snprintf(pool2, sizeof pool2, "%s/p2.pool", d);
	FT_ERR(mkfs_tier(pool2, backing, 16 * MIB, 0, 0, 0), EROFS);
	FT_CHECK(mount(NULL, backing, NULL, MS_REMOUNT, NULL) == 0, "remount rw: %s",
		 strerror(errno));
	FT_OK(ferrite_mount(pool, NULL, &fs));
	FT_RUN(check_pattern(fs, "/f", 1 * MIB, 2));
	FT_OK(ferrite_unmount(fs));
	unlink(pool);
	scratch_done();
	return 0;
}

/* A full backing file system: writes go on while the cache takes them,
 * draining fails and is retried, a write that needs room the cache cannot
 * free fails with ENOSPC; nothing acknowledged is lost, and once there is
 * room everything drains. */
static int full_backing(void)
{
	const char *d = scratch("full");
	char pool[300], backing[300];
	snprintf(pool, sizeof pool, "%s/p.pool", d);
	snprintf(backing, sizeof backing, "%s/b", d);
	FT_CHECK(mount("tmpfs", backing, "tmpfs", 0, "size=2m") == 0, "mount tmpfs: %s",
		 strerror(errno));
	FT_OK(mkfs_tier(pool, backing, 16 * MIB, 0, 1, 0));
	ferrite_fs *fs;
	FT_OK(ferrite_mount(pool, NULL, &fs));
	/* 6 MiB: more than the file system, less than the cache. */
	FT_RUN(write_pattern(fs, "/big", 6 * MIB, 3));
	usleep(50 * 1000); /* the flusher tries, and fails for lack of room */
	struct ferrite_tier_info ti;
	FT_OK(ferrite_get_tier_info(fs, &ti));
	FT_CHECK(ti.flush_errors > 0 && ti.backing_errno == ENOSPC,
		 "draining into a full file system must fail with ENOSPC (errors %llu, errno %d)",
		 (unsigned long long)ti.flush_errors, ti.backing_errno);
	FT_CHECK(ti.dirty_chunks > 0, "what did not fit stays dirty in the cache");
	FT_RUN(check_pattern(fs, "/big", 6 * MIB, 3));
	/* Far more than the cache: the writes that need a dirty chunk's room
	 * fail with ENOSPC, and say so. */
	int fd = FT_OK(ferrite_open(fs, "/more", O_CREAT | O_WRONLY, 0644));
	char *buf = calloc(1, MIB);
	FT_CHECK(buf, "out of memory");
	ssize_t w = 0;
	for (int i = 0; i < 64 && w >= 0; i++)
		w = ferrite_write(fs, fd, buf, MIB);
	free(buf);
	FT_CHECK(w == -ENOSPC, "a write the cache cannot hold: %s, expected -ENOSPC",
		 ft_errname(w));
	FT_ERRMSG_ONE_LINE();
	FT_OK(ferrite_close(fs, fd));
	FT_OK(ferrite_unlink(fs, "/more"));
	FT_RUN(check_pattern(fs, "/big", 6 * MIB, 3));
	/* Room again: everything drains, at unmount at the latest. */
	FT_CHECK(mount(NULL, backing, NULL, MS_REMOUNT, "size=32m") == 0, "grow tmpfs: %s",
		 strerror(errno));
	FT_OK(ferrite_unmount(fs));
	char file[320];
	snprintf(file, sizeof file, "%s/big", backing);
	FT_RUN(check_backing(file, 6 * MIB, 3));
	FT_EQ(ferrite_fsck(pool, 0, NULL, NULL, NULL, NULL), FERRITE_FSCK_CLEAN);
	unlink(pool);
	scratch_done();
	return 0;
}

/* Many times the cache, in pool (16 MiB) with its backing directory
 * backing and the given write-back: the bytes, the counters, the backing
 * directory. */
static int many_times_the_cache(const char *pool, const char *backing, int writeback)
{
	struct ferrite_mkfs_opts o = {
	    .size = 16 * MIB, .force = 1, .tier_backing = backing, .tier_writeback = writeback};
	FT_OK(ferrite_mkfs(pool, &o));
	ferrite_fs *fs;
	FT_OK(ferrite_mount(pool, NULL, &fs));
	struct ferrite_tier_info ti;
	FT_OK(ferrite_get_tier_info(fs, &ti));
	FT_CHECK(ti.writeback == writeback, "write-back %d, asked for %d", ti.writeback, writeback);
	uint64_t cache = ti.chunks * ti.chunk_size;
	char p[64];
	for (int i = 0; i < 6; i++) {
		snprintf(p, sizeof p, "/f%d", i);
		FT_RUN(write_pattern(fs, p, cache + (uint64_t)i * 777777, 10 + (uint64_t)i));
	}
	/* overwrite pieces of each, read everything back */
	for (int i = 0; i < 6; i++) {
		snprintf(p, sizeof p, "/f%d", i);
		FT_RUN(check_pattern(fs, p, cache + (uint64_t)i * 777777, 10 + (uint64_t)i));
	}
	FT_OK(ferrite_get_tier_info(fs, &ti));
	FT_CHECK(ti.wraparounds > 0 && ti.collisions > 0,
		 "six files each larger than the cache: wrap-arounds %llu, collisions %llu",
		 (unsigned long long)ti.wraparounds, (unsigned long long)ti.collisions);
	FT_CHECK(ti.read_misses > 0, "most reads come from the backing files");
	FT_OK(ferrite_unmount(fs));
	for (int i = 0; i < 6; i++) {
		char file[320];
		snprintf(file, sizeof file, "%s/f%d", backing, i);
		FT_RUN(check_backing(file, cache + (uint64_t)i * 777777, 10 + (uint64_t)i));
	}
	FT_OK(ferrite_tier_stats(pool, &ti));
	FT_CHECK(!ti.live && ti.dirty_chunks == 0, "unmounted: nothing dirty (%llu)",
		 (unsigned long long)ti.dirty_chunks);
	unlink(pool);
	return 0;
}

static int larger_than_cache(void)
{
	const char *d = scratch("large");
	char pool[300], backing[300];
	snprintf(pool, sizeof pool, "%s/p.pool", d);
	snprintf(backing, sizeof backing, "%s/b", d);
	FT_RUN(many_times_the_cache(pool, backing, FERRITE_TIER_WB_CACHED));
	scratch_done();
	return 0;
}

/* A write longer than what the cache changes atomically: per-write
 * consistency returns a short count (each call atomic) and the caller's loop
 * writes the rest; epoch consistency takes it whole. */
static int long_write(void)
{
	const char *d = scratch("long");
	char pool[300], backing[300];
	snprintf(pool, sizeof pool, "%s/p.pool", d);
	snprintf(backing, sizeof backing, "%s/b", d);
	for (int c = FERRITE_TIER_PER_WRITE; c <= FERRITE_TIER_EPOCH; c++) {
		FT_OK(mkfs_tier(pool, backing, 16 * MIB, c, 0, 0));
		ferrite_fs *fs;
		FT_OK(ferrite_mount(pool, NULL, &fs));
		struct ferrite_tier_info ti;
		FT_OK(ferrite_get_tier_info(fs, &ti));
		uint64_t max = ti.atomic_write_max, len = 3 * max + 12345, off = 777;
		FT_CHECK(max >= ti.chunk_size && max < ti.chunks * ti.chunk_size / 2,
			 "atomic_write_max %llu of a cache of %llu chunks", (unsigned long long)max,
			 (unsigned long long)ti.chunks);
		char *buf = malloc(len);
		FT_CHECK(buf, "out of memory");
		ft_fill(buf, len, 99, off);
		int fd = FT_OK(ferrite_open(fs, "/long", O_CREAT | O_RDWR, 0644));
		ssize_t r = ferrite_pwrite(fs, fd, buf, len, (off_t)off);
		if (c == FERRITE_TIER_PER_WRITE)
			FT_CHECK(r >= (ssize_t)max && r < (ssize_t)len,
				 "per-write: a %llu-byte write returned %zd (atomic up to %llu)",
				 (unsigned long long)len, r, (unsigned long long)max);
		else
			FT_CHECK(r == (ssize_t)len, "epoch: a %llu-byte write returned %zd",
				 (unsigned long long)len, r);
		for (uint64_t done = (uint64_t)r; done < len; done += (uint64_t)r) {
			r = ferrite_pwrite(fs, fd, buf + done, len - done, (off_t)(off + done));
			FT_CHECK(r > 0, "the rest of the write: %zd", r);
		}
		char *back = malloc(len);
		FT_CHECK(back, "out of memory");
		FT_EQ(ferrite_pread(fs, fd, back, len, (off_t)off), (ssize_t)len);
		FT_CHECK(!memcmp(back, buf, len), "the long write reads back");
		free(back);
		free(buf);
		ferrite_close(fs, fd);
		FT_OK(ferrite_unmount(fs));
	}
	unlink(pool);
	scratch_done();
	return 0;
}

/* Both write-backs with the backing directory on the machine's disk (where
 * O_DIRECT is taken, unlike tmpfs), and an unknown one refused. */
static int writeback_modes(void)
{
	const char *d = scratch("wb");
	char pool[300], backing[300], cmd[700];
	snprintf(pool, sizeof pool, "%s/p.pool", d);
	snprintf(backing, sizeof backing, "/var/tmp/ferrite-tiertest-%d-wb", (int)getpid());
	for (int wb = FERRITE_TIER_WB_CACHED; wb <= FERRITE_TIER_WB_DIRECT; wb++) {
		snprintf(cmd, sizeof cmd, "rm -rf '%s' && mkdir -p '%s'", backing, backing);
		FT_CHECK(system(cmd) == 0, "cannot make %s", backing);
		FT_RUN(many_times_the_cache(pool, backing, wb));
	}
	struct ferrite_mkfs_opts o = {
	    .size = 16 * MIB, .force = 1, .tier_backing = backing, .tier_writeback = 2};
	FT_CHECK(ferrite_mkfs(pool, &o) == -EINVAL, "write-back 2 accepted");
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", backing);
	FT_CHECK(system(cmd) == 0, "cannot remove %s", backing);
	scratch_done();
	return 0;
}

/* A child writes and dies before anything drains (a long flush period);
 * meanwhile "the backing file system lost the creation" (the file is
 * removed behind the pool's back). The next mount makes it again. */
static int lost_creation(void)
{
	const char *d = scratch("lost");
	char pool[300], backing[300];
	snprintf(pool, sizeof pool, "%s/p.pool", d);
	snprintf(backing, sizeof backing, "%s/b", d);
	FT_OK(mkfs_tier(pool, backing, 16 * MIB, 0, 60000, 0));
	ferrite_fs *fs;
	pid_t pid = fork();
	if (pid == 0) {
		if (ferrite_mount(pool, NULL, &fs) != 0)
			_exit(2);
		ferrite_mkdir(fs, "/dir", 0755);
		if (write_pattern(fs, "/dir/a", 200000, 21) || write_pattern(fs, "/b", 9000, 22))
			_exit(3);
		kill(getpid(), SIGKILL); /* no unmount, no drain */
	}
	int status;
	waitpid(pid, &status, 0);
	FT_CHECK(WIFSIGNALED(status), "the child must die by SIGKILL (status %d)", status);
	char a[320], b[320];
	snprintf(a, sizeof a, "%s/dir/a", backing);
	snprintf(b, sizeof b, "%s/b", backing);
	FT_CHECK(unlink(a) == 0 && unlink(b) == 0, "remove the backing files: %s", strerror(errno));
	/* /b's name is taken by a directory: its data goes to lost+found. */
	FT_CHECK(mkdir(b, 0755) == 0, "mkdir %s", b);
	FT_OK(ferrite_mount(pool, NULL, &fs));
	FT_RUN(check_pattern(fs, "/dir/a", 200000, 21));
	ferrite_dir *dir;
	FT_OK(ferrite_opendir(fs, "/.ferrite-lost+found", &dir));
	struct ferrite_dirent e;
	char found[300] = "";
	while (ferrite_readdir(dir, &e) == 1)
		if (e.name[0] != '.')
			snprintf(found, sizeof found, "/.ferrite-lost+found/%s", e.name);
	ferrite_closedir(dir);
	FT_CHECK(found[0], "the data of /b must be in .ferrite-lost+found");
	FT_RUN(check_pattern(fs, found, 9000, 22));
	FT_OK(ferrite_unmount(fs));
	FT_EQ(ferrite_fsck(pool, 0, NULL, NULL, NULL, NULL), FERRITE_FSCK_CLEAN);
	unlink(pool);
	scratch_done();
	return 0;
}

/* Like lost_creation, but the file's chunks had been drained and were cached
 * clean when the process died: the file made again is empty, so the cache
 * must write them to it -- after an unmount (which drains) the backing file
 * itself holds the data, and fsck (which compares clean chunks with their
 * backing files) is clean. */
static int lost_clean_file(void)
{
	const char *d = scratch("lostclean");
	char pool[300], backing[300];
	snprintf(pool, sizeof pool, "%s/p.pool", d);
	snprintf(backing, sizeof backing, "%s/b", d);
	FT_OK(mkfs_tier(pool, backing, 16 * MIB, 0, 60000, 0));
	pid_t pid = fork();
	if (pid == 0) {
		struct ferrite_mount_opts mo = {.tier_flush_ms = 1};
		ferrite_fs *fs;
		if (ferrite_mount(pool, &mo, &fs) != 0)
			_exit(2);
		if (write_pattern(fs, "/c", 300000, 23))
			_exit(3);
		struct ferrite_tier_info ti = {0};
		for (int i = 0; i < 5000; i++) { /* until the flusher made it clean */
			if (ferrite_tier_stats(pool, &ti) == 0 && !ti.dirty_chunks &&
			    ti.valid_chunks)
				break;
			usleep(1000);
		}
		if (ti.dirty_chunks || !ti.valid_chunks)
			_exit(4);
		kill(getpid(), SIGKILL); /* no unmount */
	}
	int status;
	waitpid(pid, &status, 0);
	FT_CHECK(WIFSIGNALED(status), "the child must die by SIGKILL (status %d)", status);
	char c[320];
	snprintf(c, sizeof c, "%s/c", backing);
	FT_CHECK(unlink(c) == 0, "remove %s: %s", c, strerror(errno));
	ferrite_fs *fs;
	FT_OK(ferrite_mount(pool, NULL, &fs));
	FT_RUN(check_pattern(fs, "/c", 300000, 23));
	FT_OK(ferrite_unmount(fs));
	FT_RUN(check_backing(c, 300000, 23));
	FT_EQ(ferrite_fsck(pool, 0, NULL, NULL, NULL, NULL), FERRITE_FSCK_CLEAN);
	unlink(pool);
	scratch_done();
	return 0;
}

/* Epoch consistency: what fsync acknowledged survives the death of the
 * process; what came after it (in an epoch never ended) does not. */
static int epoch_durability(void)
{
	const char *d = scratch("epoch");
	char pool[300], backing[300];
	snprintf(pool, sizeof pool, "%s/p.pool", d);
	snprintf(backing, sizeof backing, "%s/b", d);
	FT_OK(mkfs_tier(pool, backing, 16 * MIB, FERRITE_TIER_EPOCH, 60000, 60000));
	pid_t pid = fork();
	if (pid == 0) {
		ferrite_fs *fs;
		if (ferrite_mount(pool, NULL, &fs) != 0)
			_exit(2);
		int fd = ferrite_open(fs, "/e", O_CREAT | O_RDWR, 0644);
		char x[5000];
		memset(x, 'a', sizeof x);
		if (ferrite_pwrite(fs, fd, x, sizeof x, 0) != (ssize_t)sizeof x)
			_exit(3);
		ferrite_fsync(fs, fd); /* the epoch ends: durable */
		memset(x, 'b', sizeof x);
		ferrite_pwrite(fs, fd, x, 100, 10);	   /* in the open epoch */
		ferrite_pwrite(fs, fd, x, sizeof x, 5000); /* and growth */
		kill(getpid(), SIGKILL);
	}
	int status;
	waitpid(pid, &status, 0);
	FT_CHECK(WIFSIGNALED(status), "the child must die by SIGKILL (status %d)", status);
	ferrite_fs *fs;
	FT_OK(ferrite_mount(pool, NULL, &fs));
	int fd = FT_OK(ferrite_open(fs, "/e", O_RDONLY, 0));
	struct stat st;
	FT_OK(ferrite_fstat(fs, fd, &st));
	FT_EQ(st.st_size, 5000);
	char y[5000];
	FT_EQ(ferrite_pread(fs, fd, y, sizeof y, 0), 5000);
	for (int i = 0; i < 5000; i++)
		FT_CHECK(y[i] == 'a', "byte %d is %c: the open epoch must be gone", i, y[i]);
	FT_OK(ferrite_close(fs, fd));
	struct ferrite_tier_info ti;
	FT_OK(ferrite_get_tier_info(fs, &ti));
	FT_CHECK(ti.consistency == FERRITE_TIER_EPOCH && ti.recovered > 0,
		 "recovery dropped the open epoch's pages (recovered %llu)",
		 (unsigned long long)ti.recovered);
	FT_OK(ferrite_unmount(fs));
	FT_EQ(ferrite_fsck(pool, 0, NULL, NULL, NULL, NULL), FERRITE_FSCK_CLEAN);
	unlink(pool);
	scratch_done();
	return 0;
}

/* Removal: an open unlinked file keeps its data; a hard link keeps it after
 * the other name goes; the backing directory follows. */
static int removal(void)
{
	const char *d = scratch("rm");
	char pool[300], backing[300];
	snprintf(pool, sizeof pool, "%s/p.pool", d);
	snprintf(backing, sizeof backing, "%s/b", d);
	FT_OK(mkfs_tier(pool, backing, 16 * MIB, 0, 0, 0));
	ferrite_fs *fs;
	FT_OK(ferrite_mount(pool, NULL, &fs));
	FT_RUN(write_pattern(fs, "/o", 300000, 31));
	int fd = FT_OK(ferrite_open(fs, "/o", O_RDWR, 0));
	FT_OK(ferrite_unlink(fs, "/o"));
	FT_RUN(check_pattern_fd(fd, fs, 300000, 31, 0));
	char x[100];
	memset(x, 'x', sizeof x);
	FT_EQ(ferrite_pwrite(fs, fd, x, sizeof x, 300000), 100);
	FT_OK(ferrite_close(fs, fd));
	FT_RUN(write_pattern(fs, "/h1", 70000, 32));
	FT_OK(ferrite_link(fs, "/h1", "/h2"));
	FT_OK(ferrite_unlink(fs, "/h1"));
	FT_RUN(check_pattern(fs, "/h2", 70000, 32));
	FT_OK(ferrite_rename(fs, "/h2", "/h3", 0));
	FT_OK(ferrite_unmount(fs));
	char h3[320], o[320];
	snprintf(h3, sizeof h3, "%s/h3", backing);
	snprintf(o, sizeof o, "%s/o", backing);
	FT_RUN(check_backing(h3, 70000, 32));
	FT_CHECK(access(o, F_OK) != 0, "the unlinked file is gone from the backing directory");
	struct ferrite_tier_info ti;
	FT_OK(ferrite_tier_stats(pool, &ti));
	FT_CHECK(ti.valid_chunks <= 18, "its chunks are gone too: %llu valid",
		 (unsigned long long)ti.valid_chunks);
	FT_EQ(ferrite_fsck(pool, 0, NULL, NULL, NULL, NULL), FERRITE_FSCK_CLEAN);
	unlink(pool);
	scratch_done();
	return 0;
}

/* A mapping sees what the cache held (drained first) and the calls see what
 * is stored through it; after munmap the cache takes over again. */
static int mapping(void)
{
	const char *d = scratch("map");
	char pool[300], backing[300];
	snprintf(pool, sizeof pool, "%s/p.pool", d);
	snprintf(backing, sizeof backing, "%s/b", d);
	FT_OK(mkfs_tier(pool, backing, 16 * MIB, 0, 60000, 0));
	ferrite_fs *fs;
	FT_OK(ferrite_mount(pool, NULL, &fs));
	FT_RUN(write_pattern(fs, "/m", 3 * 65536 + 100, 41));
	int fd = FT_OK(ferrite_open(fs, "/m", O_RDWR, 0));
	void *p = NULL;
	FT_OK(ferrite_mmap(fs, fd, NULL, 4 * 65536, PROT_READ | PROT_WRITE, MAP_SHARED, 0, &p));
	FT_CHECK(ft_verify(p, 3 * 65536 + 100, 41, 0) < 0, "the mapping shows the cached bytes");
	memset((char *)p + 5000, 'm', 3000);
	FT_CHECK(ferrite_msync(fs, (char *)p + 4096, 8192, MS_SYNC) > 0, "msync covers it");
	char b[3000];
	FT_EQ(ferrite_pread(fs, fd, b, sizeof b, 5000), 3000);
	FT_CHECK(b[0] == 'm' && b[2999] == 'm', "pread sees the stores through the mapping");
	FT_EQ(ferrite_pwrite(fs, fd, "WWW", 3, 70000), 3);
	FT_CHECK(!memcmp((char *)p + 70000, "WWW", 3), "the mapping sees the write");
	FT_CHECK(ferrite_munmap(fs, p, 4 * 65536) == 4 * 65536, "munmap ends the mapping");
	munmap(p, 4 * 65536);
	FT_EQ(ferrite_pwrite(fs, fd, "Z", 1, 0), 1); /* through the cache again */
	FT_OK(ferrite_close(fs, fd));
	FT_OK(ferrite_unmount(fs));
	FT_OK(ferrite_mount(pool, NULL, &fs));
	fd = FT_OK(ferrite_open(fs, "/m", O_RDONLY, 0));
	FT_EQ(ferrite_pread(fs, fd, b, 1, 0), 1);
	FT_EQ(b[0], 'Z');
	FT_EQ(ferrite_pread(fs, fd, b, 3, 70000), 3);
	FT_CHECK(!memcmp(b, "WWW", 3), "kept");
	FT_EQ(ferrite_pread(fs, fd, b, 1, 6000), 1);
	FT_EQ(b[0], 'm');
	FT_OK(ferrite_close(fs, fd));
	FT_OK(ferrite_unmount(fs));
	FT_EQ(ferrite_fsck(pool, 0, NULL, NULL, NULL, NULL), FERRITE_FSCK_CLEAN);
	unlink(pool);
	scratch_done();
	return 0;
}

/* More files than the pool has records: once every record is taken, a new
 * file takes the record of a closed file whose chunks are all clean (they
 * are dropped, the backing file holds them), so it is cached too rather
 * than written straight through. With the flusher idle, a cached file's
 * bytes are not in its backing file until unmount drains them. */
static int record_reuse(void)
{
	const char *d = scratch("recs");
	char pool[300], backing[300];
	snprintf(pool, sizeof pool, "%s/p.pool", d);
	snprintf(backing, sizeof backing, "%s/b", d);
	FT_OK(mkfs_tier(pool, backing, 16 * MIB, 0, 60000, 0));
	struct ferrite_tier_info ti;
	FT_OK(ferrite_tier_stats(pool, &ti));
	uint64_t nrecs = ti.records;
	FT_CHECK(nrecs > 16 && nrecs < 1000, "a 16 MiB pool has a few hundred records: %llu",
		 (unsigned long long)nrecs);
	ferrite_fs *fs;
	FT_OK(ferrite_mount(pool, NULL, &fs));
	char path[64];
	uint64_t old = nrecs + 40, fresh = nrecs - 8;
	for (uint64_t i = 0; i < old; i++) {
		snprintf(path, sizeof path, "/old%llu", (unsigned long long)i);
		FT_RUN(write_pattern(fs, path, 8192 + i, 100 + i));
	}
	FT_OK(ferrite_unmount(fs)); /* drained: every cached chunk is clean */
	FT_OK(ferrite_mount(pool, NULL, &fs));
	for (uint64_t i = 0; i < fresh; i++) {
		snprintf(path, sizeof path, "/new%llu", (unsigned long long)i);
		FT_RUN(write_pattern(fs, path, 8192 + i, 5000 + i));
		char host[400];
		snprintf(host, sizeof host, "%s/new%llu", backing, (unsigned long long)i);
		struct stat st;
		FT_CHECK(stat(host, &st) == 0 && st.st_size == 0,
			 "new file %llu is cached (its backing file is still empty): %lld bytes",
			 (unsigned long long)i, (long long)st.st_size);
	}
	for (uint64_t i = 0; i < old; i++) {
		snprintf(path, sizeof path, "/old%llu", (unsigned long long)i);
		FT_RUN(check_pattern(fs, path, 8192 + i, 100 + i));
	}
	for (uint64_t i = 0; i < fresh; i++) {
		snprintf(path, sizeof path, "/new%llu", (unsigned long long)i);
		FT_RUN(check_pattern(fs, path, 8192 + i, 5000 + i));
	}
	FT_OK(ferrite_unmount(fs));
	for (uint64_t i = 0; i < fresh; i++) {
		char host[400];
		snprintf(host, sizeof host, "%s/new%llu", backing, (unsigned long long)i);
		FT_RUN(check_backing(host, 8192 + i, 5000 + i));
	}
	FT_EQ(ferrite_fsck(pool, 0, NULL, NULL, NULL, NULL), FERRITE_FSCK_CLEAN);
	unlink(pool);
	scratch_done();
	return 0;
}

static const struct ft_case cases[] = {
    {"record_reuse", record_reuse, 0},	       {"mapping", mapping, 0},
    {"bad_backing", bad_backing, 0},	       {"readonly_backing", readonly_backing, 0},
    {"full_backing", full_backing, 0},	       {"larger_than_cache", larger_than_cache, 0},
    {"writeback_modes", writeback_modes, 0},   {"long_write", long_write, 0},
    {"lost_creation", lost_creation, 0},       {"lost_clean_file", lost_clean_file, 0},
    {"epoch_durability", epoch_durability, 0}, {"removal", removal, 0},
};

int main(int argc, char **argv)
{
	ft_pool_path("tier", "unused"); /* a private $FERRITE_POOL */
	return ft_run(cases, sizeof(cases) / sizeof(cases[0]), argc, argv, NULL, NULL);
}
