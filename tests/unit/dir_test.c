/*
 * dir_test.c -- the directory index: small arrays, the conversion to a
 * hashed directory at 65 entries, bucket splits and array doubling. At each
 * size every name is found, readdir returns each name exactly once and
 * resumes from any cookie, removals leave a consistent index (dir_check),
 * and entries present throughout an iteration are returned exactly once
 * while others are added and removed.
 */
#include <errno.h>
#include <dirent.h>
#include <fcntl.h>

#include "fs/fs.h"
#include "fs/pmfs.h"
#include "unit.h"

static const char *pool;
static ferrite_fs *fs;

static int setup(void)
{
	pool = unit_pool_path("dir");
	unlink(pool);
	struct ferrite_mkfs_opts o = {.size = 512 * FR_MIB};
	return ferrite_mkfs(pool, &o) || ferrite_mount(pool, NULL, &fs);
}

static void teardown(void)
{
	ferrite_unmount(fs);
	unlink(pool);
}

static void name_of(char *buf, const char *dir, int i)
{
	/* names of every length up to 255 bytes: inline and pooled names */
	int d = sprintf(buf, "%s/", dir);
	int n = sprintf(buf + d, "%d-", i);
	int len = n + (i * 37) % (256 - n);
	for (int k = n; k < len; k++)
		buf[d + k] = (char)('a' + (i + k) % 26);
	buf[d + len] = 0;
}

static uint64_t ino_at(const char *path)
{
	struct stat st;
	return ferrite_lstat(fs, path, &st) ? 0 : st.st_ino;
}

static int index_ok(const char *dir)
{
	return dir_check(fs, ino_ptr(fs, ino_at(dir)), NULL, NULL, NULL, NULL) == 0;
}

/* Reads the directory; counts each entry index seen (names end in -digits). */
static int read_all(const char *dir, unsigned char *seen, int n, int64_t from)
{
	ferrite_dir *d;
	if (ferrite_opendir(fs, dir, &d))
		return -1;
	if (from)
		ferrite_seekdir(d, from);
	struct ferrite_dirent e;
	int count = 0;
	while (ferrite_readdir(d, &e) > 0) {
		if (!strcmp(e.name, ".") || !strcmp(e.name, ".."))
			continue;
		int i = atoi(e.name);
		if (i >= 0 && i < n)
			seen[i]++;
		count++;
	}
	ferrite_closedir(d);
	return count;
}

static int sizes_across_every_transition(void)
{
	CHECK(setup() == 0);
	const int sizes[] = {0, 1, 16, 17, 32, 33, 64, 65, 200, 3000, 40000};
	char path[512];
	for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
		int n = sizes[s];
		char dir[32];
		sprintf(dir, "/d%d", n);
		CHECK_EQ(ferrite_mkdir(fs, dir, 0755), 0);
		for (int i = 0; i < n; i++) {
			name_of(path, dir, i);
			int fd = ferrite_open(fs, path, O_CREAT | O_EXCL | O_WRONLY, 0644);
			if (fd < 0)
				fprintf(stderr, "  create %s: %s\n", path, ferrite_errmsg());
			CHECK(fd >= 0);
			ferrite_close(fs, fd);
		}
		CHECK(index_ok(dir));
		for (int i = 0; i < n; i++) {
			name_of(path, dir, i);
			CHECK(ino_at(path) != 0);
		}
		unsigned char *seen = calloc((size_t)n + 1, 1);
		CHECK_EQ(read_all(dir, seen, n, 0), n);
		for (int i = 0; i < n; i++)
			CHECK_EQ(seen[i], 1);
		/* remove every other entry */
		for (int i = 0; i < n; i += 2) {
			name_of(path, dir, i);
			CHECK_EQ(ferrite_unlink(fs, path), 0);
		}
		CHECK(index_ok(dir));
		memset(seen, 0, (size_t)n + 1);
		CHECK_EQ(read_all(dir, seen, n, 0), n / 2);
		for (int i = 0; i < n; i++)
			CHECK_EQ(seen[i], i % 2);
		free(seen);
	}
	teardown();
	return 0;
}

static int resume_from_any_cookie(void)
{
	CHECK(setup() == 0);
	const int n = 1000;
	char path[512];
	CHECK_EQ(ferrite_mkdir(fs, "/r", 0755), 0);
	for (int i = 0; i < n; i++) {
		name_of(path, "/r", i);
		int fd = ferrite_open(fs, path, O_CREAT | O_WRONLY, 0644);
		CHECK(fd >= 0);
		ferrite_close(fs, fd);
	}
	ferrite_dir *d;
	CHECK_EQ(ferrite_opendir(fs, "/r", &d), 0);
	struct ferrite_dirent e;
	int k = 0;
	while (ferrite_readdir(d, &e) > 0) {
		if (++k % 97)
			continue;
		/* everything after this cookie, read by a new stream, plus
		 * everything before it, is the whole directory exactly once */
		int64_t cookie = ferrite_telldir(d);
		unsigned char *seen = calloc(n, 1);
		ferrite_dir *d2;
		CHECK_EQ(ferrite_opendir(fs, "/r", &d2), 0);
		struct ferrite_dirent e2;
		while (ferrite_readdir(d2, &e2) > 0 && ferrite_telldir(d2) <= cookie)
			if (strcmp(e2.name, ".") && strcmp(e2.name, ".."))
				seen[atoi(e2.name)]++;
		ferrite_closedir(d2);
		read_all("/r", seen, n, cookie);
		for (int i = 0; i < n; i++)
			CHECK_EQ(seen[i], 1);
		free(seen);
	}
	ferrite_closedir(d);
	teardown();
	return 0;
}

static int stable_entries_seen_once_while_changing(void)
{
	CHECK(setup() == 0);
	const int n = 3000;
	char path[512];
	CHECK_EQ(ferrite_mkdir(fs, "/c", 0755), 0);
	for (int i = 0; i < n; i++) {
		name_of(path, "/c", i);
		int fd = ferrite_open(fs, path, O_CREAT | O_WRONLY, 0644);
		CHECK(fd >= 0);
		ferrite_close(fs, fd);
	}
	/* entries i % 3 == 0 stay; others are removed during the walk, and new
	 * ones (indices >= n) are added, forcing splits */
	unsigned char *seen = calloc(5 * n, 1);
	ferrite_dir *d;
	CHECK_EQ(ferrite_opendir(fs, "/c", &d), 0);
	struct ferrite_dirent e;
	int step = 0, next_new = n;
	while (ferrite_readdir(d, &e) > 0) {
		if (!strcmp(e.name, ".") || !strcmp(e.name, ".."))
			continue;
		seen[atoi(e.name)]++;
		if (++step % 2 == 0 && step / 2 < n) {
			int victim = (step / 2);
			if (victim % 3) {
				name_of(path, "/c", victim);
				ferrite_unlink(fs, path);
			}
			for (int k = 0; k < 3; k++) {
				name_of(path, "/c", next_new++);
				int fd = ferrite_open(fs, path, O_CREAT | O_WRONLY, 0644);
				CHECK(fd >= 0);
				ferrite_close(fs, fd);
			}
		}
	}
	ferrite_closedir(d);
	for (int i = 0; i < n; i += 3)
		CHECK_EQ(seen[i], 1);
	for (int i = 0; i < 5 * n; i++)
		CHECK(seen[i] <= 1);
	CHECK(index_ok("/c"));
	free(seen);
	teardown();
	return 0;
}

/* An insert of a name the directory holds already -- as a create whose
 * lookup went through a stale view would ask for -- is refused (EEXIST)
 * under the transaction, in a small directory and in a hashed one. */
static int insert_refuses_a_second_entry(void)
{
	CHECK_EQ(setup(), 0);
	char path[300];
	for (int sizes = 0; sizes < 2; sizes++) {
		const char *dir = sizes ? "/big" : "/small";
		CHECK_EQ(ferrite_mkdir(fs, dir, 0755), 0);
		int n = sizes ? 500 : 10;
		for (int i = 0; i < n; i++) {
			name_of(path, dir, i);
			int fd = ferrite_open(fs, path, O_CREAT | O_EXCL | O_WRONLY, 0644);
			CHECK(fd >= 0);
			ferrite_close(fs, fd);
		}
		uint64_t dino = ino_at(dir);
		for (int i = 0; i < n; i += 7) {
			name_of(path, dir, i);
			const char *name = path + strlen(dir) + 1;
			uint64_t file = ino_at(path);
			pmfs_call_enter(fs);
			struct log_ctx *lc = op_begin(fs);
			CHECK(lc != NULL);
			int rc = dir_insert(fs, lc->tx, ino_ptr(fs, dino), name, strlen(name), file,
					    DT_REG);
			op_commit_or_abort(fs, lc, rc ? rc : -ECANCELED); /* abandoned */
			op_end(fs, lc);
			pmfs_call_leave(fs);
			CHECK_EQ(rc, -EEXIST);
		}
		CHECK(index_ok(dir));
	}
	teardown();
	return 0;
}

static const struct unit_case cases[] = {
    {"sizes_across_every_transition", sizes_across_every_transition},
    {"resume_from_any_cookie", resume_from_any_cookie},
    {"stable_entries_seen_once_while_changing", stable_entries_seen_once_while_changing},
    {"insert_refuses_a_second_entry", insert_refuses_a_second_entry},
};
UNIT_MAIN(cases)
