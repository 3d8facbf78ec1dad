/*
 * fuzz_build.c -- the populated pool every trial starts from: every kind of
 * structure the pm engine writes (small directories of each dentry class, a
 * hashed directory, names in each name pool, large, mid-sized, sparse and
 * empty files, short and long symlinks, attributes, hard links, special
 * files, nested directories) plus an orphan: the image is copied while an
 * unlinked file is still open, as a crash would leave it.
 *
 * The layout is the same on every run: the superblock's UUID (which keys the
 * name hash) and mkfs time are fixed after mkfs, so a damage described by
 * structure index lands on the same object each time.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "ferrite.h"
#include "fuzz.h"
#include "meta/meta.h"

static int fix_identity(const char *pool)
{
	int fd = open(pool, O_RDWR | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	struct fr_super sb;
	int rc = -EIO;
	if (pread(fd, &sb, sizeof sb, SB_OFF) != (ssize_t)sizeof sb)
		goto out;
	for (int i = 0; i < 16; i++)
		sb.sb_uuid[i] = (uint8_t)(0x5a + 7 * i);
	sb.sb_uuid[6] = (uint8_t)((sb.sb_uuid[6] & 0x0f) | 0x40);
	sb.sb_uuid[8] = (uint8_t)((sb.sb_uuid[8] & 0x3f) | 0x80);
	memcpy(&sb.sb_hash_seed, sb.sb_uuid + 4, 8);
	sb.sb_mkfs_time = 1700000000;
	sb.sb_checksum = meta_super_csum(&sb);
	if (pwrite(fd, &sb, sizeof sb, SB_OFF) != (ssize_t)sizeof sb ||
	    pwrite(fd, &sb, sizeof sb, SB_BACKUP_OFF) != (ssize_t)sizeof sb)
		goto out;
	rc = 0;
out:
	close(fd);
	return rc;
}

static int put_file(ferrite_fs *fs, const char *path, size_t len, unsigned seed)
{
	int fd = ferrite_open(fs, path, O_CREAT | O_WRONLY | O_TRUNC, 0644);
	if (fd < 0)
		return fd;
	char buf[8192];
	size_t done = 0;
	while (done < len) {
		size_t n = len - done < sizeof buf ? len - done : sizeof buf;
		for (size_t i = 0; i < n; i++)
			buf[i] = (char)((done + i) * 31 + seed);
		ssize_t w = ferrite_write(fs, fd, buf, n);
		if (w <= 0) {
			ferrite_close(fs, fd);
			return w < 0 ? (int)w : -EIO;
		}
		done += (size_t)w;
	}
	return ferrite_close(fs, fd);
}

static int put_at(ferrite_fs *fs, const char *path, off_t off, size_t len, unsigned seed)
{
	int fd = ferrite_open(fs, path, O_CREAT | O_WRONLY, 0644);
	if (fd < 0)
		return fd;
	char buf[4096];
	for (size_t i = 0; i < sizeof buf; i++)
		buf[i] = (char)(i * 7 + seed);
	int rc = 0;
	for (size_t done = 0; done < len && !rc; done += sizeof buf) {
		size_t n = len - done < sizeof buf ? len - done : sizeof buf;
		ssize_t w = ferrite_pwrite(fs, fd, buf, n, off + (off_t)done);
		if (w != (ssize_t)n)
			rc = w < 0 ? (int)w : -EIO;
	}
	ferrite_close(fs, fd);
	return rc;
}

/* Names of length len, made unique by i. */
static void long_name(char *buf, size_t len, int i)
{
	snprintf(buf, len + 1, "%04d", i);
	for (size_t k = 4; k < len; k++)
		buf[k] = (char)('a' + (k + (size_t)i) % 26);
	buf[len] = 0;
}

#define TRY(x)                                                                                     \
	do {                                                                                       \
		int rc_ = (x);                                                                     \
		if (rc_ < 0) {                                                                     \
			fprintf(stderr, "fuzz build: %s: %s (%s)\n", #x, strerror(-rc_),          \
				ferrite_errmsg());                                                 \
			return rc_;                                                                \
		}                                                                                  \
	} while (0)

static int populate(ferrite_fs *fs)
{
	char path[600], name[300];
	TRY(ferrite_mkdir(fs, "/small", 0755));
	for (int i = 0; i < 10; i++) {
		snprintf(path, sizeof path, "/small/f%d", i);
		TRY(put_file(fs, path, (size_t)i * 700, (unsigned)i));
	}
	TRY(ferrite_mkdir(fs, "/d32", 0755));
	for (int i = 0; i < 20; i++) {
		snprintf(path, sizeof path, "/d32/e%02d", i);
		TRY(put_file(fs, path, 10, (unsigned)i));
	}
	TRY(ferrite_mkdir(fs, "/d64", 0700));
	for (int i = 0; i < 40; i++) {
		snprintf(path, sizeof path, "/d64/x%03d", i);
		TRY(put_file(fs, path, (size_t)(i % 3) * 50, (unsigned)i));
	}
	/* A hashed directory: more than 64 entries, names in every name pool. */
	TRY(ferrite_mkdir(fs, "/big", 0755));
	static const size_t lens[] = {8, 30, 41, 60, 100, 150, 200, 255};
	for (int i = 0; i < 150; i++) {
		long_name(name, lens[i % 8], i);
		snprintf(path, sizeof path, "/big/%s", name);
		if (i % 10 == 3)
			TRY(ferrite_mkdir(fs, path, 0755));
		else
			TRY(put_file(fs, path, (size_t)(i % 5) * 300, (unsigned)i));
	}
	TRY(ferrite_mkdir(fs, "/data", 0755));
	TRY(put_file(fs, "/data/large", 3 * 1024 * 1024 + 1234, 1));
	TRY(put_file(fs, "/data/mid", 300 * 1024, 2));
	TRY(put_file(fs, "/data/tiny", 100, 3));
	TRY(put_file(fs, "/data/empty", 0, 4));
	TRY(put_at(fs, "/data/sparse", 4096, 4096, 5));
	TRY(put_at(fs, "/data/sparse", 4 * 1024 * 1024 + 50 * 1024, 8192, 6));
	int fd = ferrite_open(fs, "/data/prealloc", O_CREAT | O_RDWR, 0600);
	TRY(fd);
	TRY(ferrite_write(fs, fd, "head", 4));
	TRY(ferrite_fallocate(fs, fd, 0x01 /* KEEP_SIZE */, 0, 64 * 1024));
	TRY(ferrite_close(fs, fd));
	TRY(ferrite_symlink(fs, "tiny", "/data/short-link"));
	memset(name, 'L', 200);
	name[0] = '/';
	name[200] = 0;
	TRY(ferrite_symlink(fs, name, "/data/long-link"));
	TRY(ferrite_link(fs, "/data/tiny", "/small/hard"));
	TRY(ferrite_link(fs, "/data/mid", "/big/hard-mid"));
	TRY(ferrite_setxattrat(fs, AT_FDCWD, "/data/tiny", 0, "user.small", "value", 5, 0));
	char big[10000];
	memset(big, 'x', sizeof big);
	TRY(ferrite_setxattrat(fs, AT_FDCWD, "/big", 0, "user.big", big, sizeof big, 0));
	TRY(ferrite_setxattrat(fs, AT_FDCWD, "/data/large", 0, "trusted.t", "t", 1, 0));
	TRY(ferrite_mknodat(fs, AT_FDCWD, "/data/fifo", S_IFIFO | 0644, 0));
	TRY(ferrite_mknodat(fs, AT_FDCWD, "/data/null", S_IFCHR | 0666, makedev(1, 3)));
	TRY(ferrite_mknodat(fs, AT_FDCWD, "/data/sock", S_IFSOCK | 0644, 0));
	TRY(ferrite_mkdir(fs, "/a", 0755));
	TRY(ferrite_mkdir(fs, "/a/b", 0755));
	TRY(ferrite_mkdir(fs, "/a/b/c", 0755));
	TRY(ferrite_mkdir(fs, "/a/b/c/d", 0755));
	TRY(put_file(fs, "/a/b/c/d/deep", 5000, 9));
	/* Freed entries, so free lists are not empty. */
	for (int i = 0; i < 6; i++) {
		snprintf(path, sizeof path, "/small/gone%d", i);
		TRY(put_file(fs, path, 5000, (unsigned)i));
	}
	for (int i = 0; i < 6; i += 2) {
		snprintf(path, sizeof path, "/small/gone%d", i);
		TRY(ferrite_unlink(fs, path));
	}
	TRY(ferrite_rename(fs, "/d32/e03", "/big/renamed-from-d32", 0));
	return 0;
}

static int slurp(const char *pool, uint8_t **img, size_t *len)
{
	int fd = open(pool, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	struct stat st;
	fstat(fd, &st);
	*len = (size_t)st.st_size;
	*img = malloc(*len);
	if (!*img) {
		close(fd);
		return -ENOMEM;
	}
	size_t done = 0;
	while (done < *len) {
		ssize_t n = pread(fd, *img + done, *len - done, (off_t)done);
		if (n <= 0)
			break;
		done += (size_t)n;
	}
	close(fd);
	return done == *len ? 0 : -EIO;
}

int fz_build(const char *pool, uint64_t size, uint8_t **img, uint8_t **orphan, size_t *len)
{
	unlink(pool);
	struct ferrite_mkfs_opts mo = {0};
	mo.size = size;
	mo.force = 1;
	mo.no_hugepages = 1;
	TRY(ferrite_mkfs(pool, &mo));
	TRY(fix_identity(pool));
	ferrite_fs *fs;
	TRY(ferrite_mount(pool, NULL, &fs));
	int rc = populate(fs);
	int ofd = -1;
	if (!rc) {
		rc = ofd = put_file(fs, "/data/orphan", 9000, 7);
		if (!rc)
			rc = ofd = ferrite_open(fs, "/data/orphan", O_RDWR, 0);
		if (ofd >= 0)
			rc = ferrite_unlink(fs, "/data/orphan");
	}
	if (!rc)
		rc = slurp(pool, orphan, len); /* the orphan is still open here */
	ferrite_unmount(fs);
	if (!rc)
		rc = slurp(pool, img, len);
	return rc;
}
