/*
 * fuzz_check.c -- what a trial does with a mounted (maybe damaged) pool: a
 * full walk that reads everything a user can read, summarised in a digest
 * of what fsck can vouch for (names, types, link counts, sizes, contents,
 * attributes; not times, owners, modes, link targets or device numbers,
 * which the format keeps no redundancy for -- see fz_verifiable),
 * and a few changes that make the library allocate and free on it.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "ferrite.h"
#include "fuzz.h"
#include "util/util.h"

#define WALK_DEPTH 24
#define READ_CAP   (16u << 20)

static void mix(uint64_t *h, const void *p, size_t n)
{
	/* two CRC-32C lanes: hardware-fast, and good enough to tell trees apart */
	uint32_t lo = (uint32_t)*h, hi = (uint32_t)(*h >> 32);
	lo = fr_crc32c(lo, p, n);
	hi = fr_crc32c(hi ^ 0x9e3779b9u, &lo, sizeof lo);
	*h = (uint64_t)hi << 32 | lo;
}

static void mix64(uint64_t *h, uint64_t v)
{
	mix(h, &v, sizeof v);
}

static void fail(struct fz_walk *w, const char *path, const char *call, long rc)
{
	w->errors++;
	if (rc == -EUCLEAN)
		w->eunclean++;
	if (!w->first_err[0])
		snprintf(w->first_err, sizeof w->first_err, "%s(%.80s): %.40s (%.100s)", call, path,
			 strerror((int)-rc), ferrite_errmsg());
}

static uint64_t read_file(ferrite_fs *fs, const char *path, const struct stat *st,
			  struct fz_walk *w)
{
	if (w->no_data)
		return 0;
	uint64_t h = 0xcbf29ce484222325ULL;
	int fd = ferrite_open(fs, path, O_RDONLY | O_NOFOLLOW, 0);
	if (fd < 0) {
		fail(w, path, "open", fd);
		return h;
	}
	static char buf[1 << 20];
	uint64_t size = (uint64_t)st->st_size, want = size < READ_CAP ? size : READ_CAP;
	for (uint64_t off = 0; off < want;) {
		ssize_t n = ferrite_pread(fs, fd, buf, sizeof buf, (off_t)off);
		if (n < 0) {
			fail(w, path, "pread", n);
			break;
		}
		if (n == 0)
			break;
		mix(&h, buf, (size_t)n);
		off += (uint64_t)n;
	}
	if (size > READ_CAP) {
		/* a huge (perhaps damaged) size: read its far end too */
		ssize_t n = ferrite_pread(fs, fd, buf, 4096, (off_t)(size - 4096));
		if (n < 0)
			fail(w, path, "pread-end", n);
	}
	/* holes and data, for coverage; the answers are not part of the digest */
	off_t o = ferrite_lseek(fs, fd, 0, SEEK_DATA);
	if (o >= 0)
		(void)ferrite_lseek(fs, fd, o, SEEK_HOLE);
	(void)ferrite_lseek(fs, fd, (off_t)(size / 2), SEEK_DATA);
	ferrite_close(fs, fd);
	return h;
}

static void walk_xattrs(ferrite_fs *fs, const char *path, uint64_t *h, struct fz_walk *w)
{
	char list[4096], val[65536];
	ssize_t n = ferrite_listxattrat(fs, AT_FDCWD, path, AT_SYMLINK_NOFOLLOW, list, sizeof list);
	if (n < 0) {
		if (n != -ERANGE)
			fail(w, path, "listxattr", n);
		return;
	}
	for (ssize_t p = 0; p < n;) {
		size_t l = strnlen(list + p, (size_t)(n - p));
		if ((ssize_t)(p + l) >= n)
			break;
		ssize_t v = ferrite_getxattrat(fs, AT_FDCWD, path, AT_SYMLINK_NOFOLLOW, list + p,
					       val, sizeof val);
		if (v < 0) {
			fail(w, path, "getxattr", v);
		} else {
			mix(h, list + p, l);
			mix(h, val, (size_t)v);
		}
		p += (ssize_t)l + 1;
	}
}

struct walker {
	ferrite_fs *fs;
	struct fz_walk *w;
	uint64_t seen[4096]; /* directories on the way down: refuse cycles */
	int depth;
};

static int name_ok(const char *n)
{
	return n[0] && strchr(n, '/') == NULL && strcmp(n, ".") && strcmp(n, "..");
}

static int cmp_names(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static void walk_dir(struct walker *k, const char *dir, uint64_t *h)
{
	ferrite_dir *d;
	int rc = ferrite_opendir(k->fs, dir, &d);
	if (rc) {
		fail(k->w, dir, "opendir", rc);
		return;
	}
	/* names sorted, so the digest does not depend on the order of readdir */
	char **names = NULL;
	size_t n = 0, cap = 0;
	struct ferrite_dirent de;
	while ((rc = ferrite_readdir(d, &de)) == 1) {
		if (!strcmp(de.name, ".") || !strcmp(de.name, ".."))
			continue;
		if (!name_ok(de.name)) {
			fail(k->w, dir, "readdir-bad-name", -EINVAL);
			continue;
		}
		if (n == cap) {
			cap = cap ? cap * 2 : 64;
			names = realloc(names, cap * sizeof *names);
		}
		names[n++] = strdup(de.name);
		if (n > 100000)
			break;
	}
	if (rc < 0)
		fail(k->w, dir, "readdir", rc);
	ferrite_closedir(d);
	if (n)
		qsort(names, n, sizeof *names, cmp_names);
	for (size_t i = 0; i < n; i++) {
		char path[4096];
		if (snprintf(path, sizeof path, "%s/%s", strcmp(dir, "/") ? dir : "", names[i]) >=
		    (int)sizeof path)
			continue;
		struct stat st;
		rc = ferrite_lstat(k->fs, path, &st);
		k->w->entries++;
		mix(h, names[i], strlen(names[i]) + 1);
		if (rc) {
			fail(k->w, path, "lstat", rc);
			continue;
		}
		mix64(h, st.st_mode & S_IFMT);
		mix64(h, st.st_nlink);
		walk_xattrs(k->fs, path, h, k->w);
		if (S_ISREG(st.st_mode)) {
			struct fz_walk *w = k->w;
			if (w->files && w->nfiles < w->files_cap)
				w->files[w->nfiles++] = strdup(path);
			mix64(h, (uint64_t)st.st_size);
			mix64(h, read_file(k->fs, path, &st, k->w));
		} else if (S_ISLNK(st.st_mode)) {
			char t[4200];
			/* read, not digested: inline targets have no check (fz_verifiable) */
			ssize_t l = ferrite_readlink(k->fs, path, t, sizeof t);
			if (l < 0)
				fail(k->w, path, "readlink", l);
		} else if (S_ISDIR(st.st_mode)) {
			int loop = 0;
			for (int j = 0; j < k->depth; j++)
				loop |= k->seen[j] == st.st_ino;
			if (loop) {
				fail(k->w, path, "directory-cycle", -ELOOP);
			} else if (k->depth < WALK_DEPTH) {
				k->seen[k->depth++] = st.st_ino;
				walk_dir(k, path, h);
				k->depth--;
			}
		}
	}
	for (size_t i = 0; i < n; i++)
		free(names[i]);
	free(names);
}

void fz_walk_tree(ferrite_fs *fs, struct fz_walk *w)
{
	struct fz_walk keep = *w;
	memset(w, 0, sizeof *w);
	w->no_data = keep.no_data;
	w->files = keep.files;
	w->files_cap = keep.files_cap;
	struct walker k = {.fs = fs, .w = w};
	uint64_t h = 0xcbf29ce484222325ULL;
	struct stat st;
	int rc = ferrite_stat(fs, "/", &st);
	if (rc) {
		fail(w, "/", "stat", rc);
	} else {
		k.seen[k.depth++] = st.st_ino;
		walk_dir(&k, "/", &h);
	}
	struct statvfs sv;
	rc = ferrite_statvfs(fs, &sv);
	if (rc)
		fail(w, "/", "statvfs", rc);
	struct ferrite_info info;
	rc = ferrite_get_info(fs, &info);
	if (rc)
		fail(w, "/", "get_info", rc);
	w->digest = h;
}

void fz_scribble(ferrite_fs *fs, uint64_t seed)
{
	static char buf[128 * 1024];
	for (size_t i = 0; i < sizeof buf; i++)
		buf[i] = (char)(i + seed);
	int fd = ferrite_open(fs, "/fz-new", O_CREAT | O_RDWR, 0644);
	if (fd >= 0) {
		(void)ferrite_write(fs, fd, buf, 20000);
		(void)ferrite_write(fs, fd, buf, sizeof buf);
		(void)ferrite_fsetxattr(fs, fd, "user.fz", buf, 300, 0);
		ferrite_close(fs, fd);
	}
	fd = ferrite_open(fs, "/data/large", O_RDWR, 0);
	if (fd >= 0) {
		(void)ferrite_pwrite(fs, fd, buf, 9000, 3 << 20);
		(void)ferrite_pwrite(fs, fd, buf, sizeof buf, 6 << 20);
		(void)ferrite_fallocate(fs, fd, 0x03 /* PUNCH_HOLE|KEEP_SIZE */, 1 << 20, 300000);
		ferrite_close(fs, fd);
	}
	(void)ferrite_truncate(fs, "/data/mid", 100000);
	(void)ferrite_truncate(fs, "/data/tiny", 70000);
	(void)ferrite_unlink(fs, "/small/f3");
	(void)ferrite_rename(fs, "/d64/x001", "/big/fz-moved", 0);
	(void)ferrite_rename(fs, "/big/hard-mid", "/d32/e05", 0);
	(void)ferrite_mkdir(fs, "/fz-dir", 0755);
	for (int i = 0; i < 5; i++) {
		char p[64];
		snprintf(p, sizeof p, "/fz-dir/f%d", i);
		fd = ferrite_open(fs, p, O_CREAT | O_WRONLY, 0600);
		if (fd >= 0) {
			(void)ferrite_write(fs, fd, buf, 100 * (size_t)i);
			ferrite_close(fs, fd);
		}
	}
	(void)ferrite_link(fs, "/data/tiny", "/fz-link");
	(void)ferrite_symlink(fs, "/data/tiny", "/fz-sym");
	(void)ferrite_unlink(fs, "/a/b/c/d/deep");
	(void)ferrite_rmdir(fs, "/a/b/c/d");
	(void)ferrite_setxattrat(fs, AT_FDCWD, "/small", 0, "user.s", "v", 1, 0);
	(void)ferrite_removexattrat(fs, AT_FDCWD, "/big", 0, "user.big");
	(void)ferrite_unlink(fs, "/data/sparse");
	(void)ferrite_rename(fs, "/small", "/a/small-moved", 0);
}
