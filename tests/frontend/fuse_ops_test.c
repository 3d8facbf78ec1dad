/*
 * fuse_ops_test.c -- system calls through a `ferrite mount`, driven by
 * fuse_test.sh:
 *   fuse_ops_test setup DIR STATE   every operation the front end translates,
 *                                   with Linux's results; records what must
 *                                   survive in STATE
 *   fuse_ops_test verify DIR STATE  after unmount + mount: the same names,
 *                                   inode numbers, contents and attributes
 *   fuse_ops_test ackwriter DIR LOG writes numbered records and files until
 *                                   a call fails, logging each one the file
 *                                   system acknowledged (for the kill test)
 *   fuse_ops_test ackcheck DIR LOG  every acknowledged record is intact
 * Each check prints what failed and exits 1.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <grp.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>

static const char *dir;

static void die(int line, const char *fmt, ...) __attribute__((format(printf, 2, 3), noreturn));
static void die(int line, const char *fmt, ...)
{
	va_list ap;
	fprintf(stderr, "FAIL fuse_ops_test.c:%d: ", line);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, " (errno %d %s)\n", errno, strerror(errno));
	exit(1);
}

/* expr must be >= 0 */
#define OK(expr)                                                                                   \
	({                                                                                         \
		long long ok_ = (long long)(expr);                                                 \
		if (ok_ < 0)                                                                       \
			die(__LINE__, "%s failed", #expr);                                         \
		ok_;                                                                               \
	})
/* expr must fail with errno E */
#define ERR(expr, E)                                                                               \
	do {                                                                                       \
		errno = 0;                                                                         \
		long long err_ = (long long)(expr);                                                \
		if (err_ != -1 || errno != (E))                                                    \
			die(__LINE__, "%s: expected %s, got %lld", #expr, strerrorname_np(E),      \
			    err_);                                                                 \
	} while (0)
#define CHECK(cond, ...)                                                                           \
	do {                                                                                       \
		if (!(cond))                                                                       \
			die(__LINE__, __VA_ARGS__);                                                \
	} while (0)

static char *P(const char *rel)
{
	static char bufs[8][4096];
	static int i;
	char *b = bufs[i++ & 7];
	snprintf(b, 4096, "%s/%s", dir, rel);
	return b;
}

static void fill(unsigned char *b, size_t n, uint64_t key, uint64_t off)
{
	for (size_t i = 0; i < n; i++) {
		uint64_t x = (off + i) * 0x9e3779b97f4a7c15ULL ^ key;
		x ^= x >> 29;
		b[i] = (unsigned char)(x * 0xbf58476d1ce4e5b9ULL >> 56);
	}
}

static void write_pattern(const char *path, size_t n, uint64_t key)
{
	unsigned char *b = malloc(n);
	fill(b, n, key, 0);
	int fd = (int)OK(open(path, O_CREAT | O_TRUNC | O_WRONLY, 0644));
	CHECK(write(fd, b, n) == (ssize_t)n, "write %s", path);
	OK(close(fd));
	free(b);
}

static void check_pattern(const char *path, size_t n, uint64_t key)
{
	unsigned char *b = malloc(n + 1), *w = malloc(n);
	fill(w, n, key, 0);
	int fd = (int)OK(open(path, O_RDONLY));
	ssize_t got = 0, r;
	while ((r = read(fd, b + got, n + 1 - (size_t)got)) > 0)
		got += r;
	OK(close(fd));
	CHECK(got == (ssize_t)n, "%s: %zd bytes, expected %zu", path, got, n);
	CHECK(memcmp(b, w, n) == 0, "%s: content differs", path);
	free(b);
	free(w);
}

static ino_t ino_of(const char *path)
{
	struct stat st;
	OK(lstat(path, &st));
	return st.st_ino;
}

/* ---- setup ------------------------------------------------------------------------ */

static void t_data(FILE *state)
{
	write_pattern(P("data1M"), 1 << 20, 1);
	check_pattern(P("data1M"), 1 << 20, 1);
	/* positioned writes, appends from two descriptors */
	int a = (int)OK(open(P("appends"), O_CREAT | O_WRONLY | O_APPEND, 0644));
	int b = (int)OK(open(P("appends"), O_WRONLY | O_APPEND));
	for (int i = 0; i < 100; i++) {
		CHECK(write(i & 1 ? a : b, "0123456789", 10) == 10, "append");
	}
	struct stat st;
	OK(fstat(a, &st));
	CHECK(st.st_size == 1000, "appends: size %lld", (long long)st.st_size);
	OK(close(a));
	OK(close(b));
	/* truncate shrink and grow (reads zeros) */
	OK(truncate(P("appends"), 10));
	OK(truncate(P("appends"), 5000));
	char z[4990];
	int fd = (int)OK(open(P("appends"), O_RDWR));
	CHECK(pread(fd, z, sizeof(z), 10) == (ssize_t)sizeof(z), "pread");
	for (size_t i = 0; i < sizeof(z); i++)
		CHECK(z[i] == 0, "grown part not zero at %zu", i);
	OK(ftruncate(fd, 10));
	OK(close(fd));
	fprintf(state, "file data1M %lu %d 1\n", (unsigned long)ino_of(P("data1M")), 1 << 20);
	/* mmap writes reach the file */
	fd = (int)OK(open(P("mapped"), O_CREAT | O_RDWR, 0644));
	OK(ftruncate(fd, 8192));
	char *m = mmap(NULL, 8192, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	CHECK(m != MAP_FAILED, "mmap");
	memcpy(m + 4096, "mapped!", 7);
	OK(msync(m, 8192, MS_SYNC));
	munmap(m, 8192);
	char buf[8];
	CHECK(pread(fd, buf, 7, 4096) == 7 && memcmp(buf, "mapped!", 7) == 0, "mmap write");
	OK(close(fd));
	/* an unlinked file stays usable through its descriptor */
	fd = (int)OK(open(P("ghost"), O_CREAT | O_RDWR, 0644));
	OK(unlink(P("ghost")));
	CHECK(pwrite(fd, "boo", 3, 0) == 3, "write to unlinked");
	CHECK(pread(fd, buf, 3, 0) == 3 && memcmp(buf, "boo", 3) == 0, "read unlinked");
	OK(fstat(fd, &st));
	CHECK(st.st_nlink == 0, "unlinked nlink %lu", (unsigned long)st.st_nlink);
	OK(close(fd));
}

static void t_names(FILE *state)
{
	write_pattern(P("r1"), 100, 11);
	write_pattern(P("r2"), 200, 12);
	ino_t i1 = ino_of(P("r1")), i2 = ino_of(P("r2"));
	ERR(syscall(SYS_renameat2, AT_FDCWD, P("r1"), AT_FDCWD, P("r2"), RENAME_NOREPLACE), EEXIST);
	OK(syscall(SYS_renameat2, AT_FDCWD, P("r1"), AT_FDCWD, P("r2"), RENAME_EXCHANGE));
	CHECK(ino_of(P("r1")) == i2 && ino_of(P("r2")) == i1, "exchange swapped inodes");
	check_pattern(P("r1"), 200, 12);
	OK(rename(P("r1"), P("r2"))); /* over an existing file */
	ERR(access(P("r1"), F_OK), ENOENT);
	CHECK(ino_of(P("r2")) == i2, "rename over");
	OK(mkdir(P("sub"), 0755));
	OK(syscall(SYS_renameat2, AT_FDCWD, P("r2"), AT_FDCWD, P("sub/r3"), RENAME_NOREPLACE));
	fprintf(state, "file sub/r3 %lu 200 12\n", (unsigned long)i2);
	/* hard and symbolic links */
	OK(link(P("sub/r3"), P("hard")));
	struct stat st;
	OK(stat(P("hard"), &st));
	CHECK(st.st_nlink == 2 && st.st_ino == i2, "link count %lu", (unsigned long)st.st_nlink);
	OK(symlink("sub/r3", P("sym")));
	char t[64];
	ssize_t n = OK(readlink(P("sym"), t, sizeof(t)));
	CHECK(n == 6 && memcmp(t, "sub/r3", 6) == 0, "readlink");
	check_pattern(P("sym"), 200, 12);
	fprintf(state, "link sym %lu sub/r3\n", (unsigned long)ino_of(P("sym")));
	fprintf(state, "file hard %lu 200 12\n", (unsigned long)i2);
	/* directories */
	ERR(rmdir(P("sub")), ENOTEMPTY);
	OK(mkdir(P("empty"), 0700));
	OK(rmdir(P("empty")));
	ERR(mkdir(P("sub"), 0755), EEXIST);
	OK(mkdir(P("many"), 0755));
	for (int i = 0; i < 300; i++) {
		char nm[64];
		snprintf(nm, sizeof(nm), "many/entry-with-a-longish-name-%04d", i);
		close((int)OK(open(P(nm), O_CREAT | O_WRONLY, 0600)));
	}
	/* readdir sees every entry exactly once while others are removed */
	DIR *d = opendir(P("many"));
	CHECK(d, "opendir");
	static unsigned char seen[300];
	struct dirent *e;
	int k = 0;
	while ((e = readdir(d))) {
		int i;
		if (sscanf(e->d_name, "entry-with-a-longish-name-%d", &i) == 1) {
			CHECK(i >= 0 && i < 300 && !seen[i]++, "entry %d twice", i);
			CHECK(e->d_type == DT_REG, "d_type %d", e->d_type);
		}
		if (k++ == 50) /* remove some the stream has not reached or has */
			for (int j = 0; j < 300; j += 7) {
				char nm[64];
				snprintf(nm, sizeof(nm), "many/entry-with-a-longish-name-%04d", j);
				OK(unlink(P(nm)));
			}
	}
	closedir(d);
	for (int i = 0; i < 300; i++)
		CHECK(i % 7 == 0 || seen[i], "entry %d never seen", i);
}

static void t_attrs(FILE *state)
{
	write_pattern(P("attr"), 10, 3);
	OK(chmod(P("attr"), 04751));
	OK(chown(P("attr"), 1000, 1001));
	struct stat st;
	OK(stat(P("attr"), &st));
	CHECK((st.st_mode & 07777) == 0751 && st.st_uid == 1000 && st.st_gid == 1001,
	      "chmod/chown: %o %u %u (chown must clear setuid)", st.st_mode & 07777, st.st_uid,
	      st.st_gid);
	struct timespec ts[2] = {{1000000000, 123456789}, {1100000000, 987654321}};
	OK(utimensat(AT_FDCWD, P("attr"), ts, 0));
	OK(stat(P("attr"), &st));
	CHECK(st.st_atim.tv_sec == ts[0].tv_sec && st.st_mtim.tv_nsec == ts[1].tv_nsec,
	      "utimensat");
	fprintf(state, "attr attr %lu %o %u %u %lld %ld\n", (unsigned long)st.st_ino,
		st.st_mode & 07777, st.st_uid, st.st_gid, (long long)st.st_mtim.tv_sec,
		st.st_mtim.tv_nsec);
	struct timespec now[2] = {{0, UTIME_NOW}, {0, UTIME_OMIT}};
	write_pattern(P("touched"), 1, 4);
	OK(utimensat(AT_FDCWD, P("touched"), now, 0));
	/* umask applies to creation */
	mode_t old = umask(027);
	close((int)OK(open(P("masked"), O_CREAT | O_WRONLY, 0666)));
	OK(mkdir(P("maskeddir"), 0777));
	umask(old);
	OK(stat(P("masked"), &st));
	CHECK((st.st_mode & 0777) == 0640, "umask file: %o", st.st_mode & 0777);
	OK(stat(P("maskeddir"), &st));
	CHECK((st.st_mode & 0777) == 0750, "umask dir: %o", st.st_mode & 0777);
	/* statfs */
	struct statvfs sv;
	OK(statvfs(dir, &sv));
	CHECK(sv.f_bsize > 0 && sv.f_blocks > 0 && sv.f_bfree <= sv.f_blocks, "statvfs");
	/* extended attributes */
	write_pattern(P("xa"), 10, 5);
	OK(setxattr(P("xa"), "user.one", "1", 1, 0));
	OK(setxattr(P("xa"), "user.two", "22", 2, XATTR_CREATE));
	ERR(setxattr(P("xa"), "user.two", "x", 1, XATTR_CREATE), EEXIST);
	ERR(setxattr(P("xa"), "user.three", "x", 1, XATTR_REPLACE), ENODATA);
	ERR(setxattr(P("xa"), "security.x", "x", 1, 0), EOPNOTSUPP);
	OK(setxattr(P("xa"), "trusted.t", "ttt", 3, 0));
	char v[64];
	CHECK(getxattr(P("xa"), "user.two", v, sizeof(v)) == 2 && memcmp(v, "22", 2) == 0,
	      "getxattr");
	CHECK(getxattr(P("xa"), "user.two", NULL, 0) == 2, "getxattr size");
	ERR(getxattr(P("xa"), "user.two", v, 1), ERANGE);
	ERR(getxattr(P("xa"), "user.none", v, sizeof(v)), ENODATA);
	CHECK(listxattr(P("xa"), v, sizeof(v)) == 28, "listxattr");
	OK(removexattr(P("xa"), "user.one"));
	ERR(removexattr(P("xa"), "user.one"), ENODATA);
	ERR(lgetxattr(P("sym"), "user.x", v, sizeof(v)), ENODATA);
	fprintf(state, "xattr xa user.two 22\nxattr xa trusted.t ttt\n");
}

static void t_space(FILE *state)
{
	int fd = (int)OK(open(P("falloc"), O_CREAT | O_RDWR, 0644));
	OK(fallocate(fd, 0, 0, 100000));
	struct stat st;
	OK(fstat(fd, &st));
	CHECK(st.st_size == 100000, "fallocate size %lld", (long long)st.st_size);
	OK(fallocate(fd, FALLOC_FL_KEEP_SIZE, 100000, 100000));
	OK(fstat(fd, &st));
	CHECK(st.st_size == 100000, "KEEP_SIZE changed the size");
	char ones[8192];
	memset(ones, 1, sizeof(ones));
	CHECK(pwrite(fd, ones, sizeof(ones), 0) == (ssize_t)sizeof(ones), "pwrite");
	OK(fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0, 4096));
	CHECK(pread(fd, ones, sizeof(ones), 0) == (ssize_t)sizeof(ones), "pread");
	CHECK(ones[0] == 0 && ones[4095] == 0 && ones[4096] == 1, "punched range");
	ERR(fallocate(fd, FALLOC_FL_COLLAPSE_RANGE, 0, 4096), EOPNOTSUPP);
	OK(close(fd));
	/* SEEK_DATA / SEEK_HOLE: large files have holes in whole 2 MiB windows */
	fd = (int)OK(open(P("sparse"), O_CREAT | O_RDWR, 0644));
	OK(ftruncate(fd, 16 << 20));
	CHECK(pwrite(fd, "x", 1, 0) == 1 && pwrite(fd, "y", 1, 8 << 20) == 1, "sparse writes");
	off_t hole = lseek(fd, 0, SEEK_HOLE), data = lseek(fd, 2 << 20, SEEK_DATA);
	CHECK(hole > 0 && hole <= 8 << 20, "SEEK_HOLE %lld", (long long)hole);
	CHECK(data > 2 << 20 && data <= 8 << 20, "SEEK_DATA %lld", (long long)data);
	ERR(lseek(fd, 17 << 20, SEEK_DATA), ENXIO);
	OK(close(fd));
	/* copy_file_range */
	int in = (int)OK(open(P("data1M"), O_RDONLY));
	int out = (int)OK(open(P("copy"), O_CREAT | O_WRONLY, 0644));
	loff_t oi = 0, oo = 0;
	size_t left = 1 << 20;
	while (left) {
		ssize_t n = OK(copy_file_range(in, &oi, out, &oo, left, 0));
		CHECK(n > 0, "copy_file_range made no progress");
		left -= (size_t)n;
	}
	OK(close(in));
	OK(close(out));
	check_pattern(P("copy"), 1 << 20, 1);
	fprintf(state, "file copy %lu %d 1\n", (unsigned long)ino_of(P("copy")), 1 << 20);
}

/* As an unprivileged user: ownership of new files and permission checks. */
static void t_user(void)
{
	OK(mkdir(P("shared"), 01777));
	OK(chmod(P("shared"), 01777));
	write_pattern(P("rootonly"), 10, 6);
	OK(chmod(P("rootonly"), 0644));
	write_pattern(P("setid"), 10, 7);
	OK(chmod(P("setid"), 06777));
	write_pattern(P("setid_trunc"), 10, 7);
	OK(chmod(P("setid_trunc"), 06777));
	write_pattern(P("setid_otrunc"), 10, 7);
	OK(chmod(P("setid_otrunc"), 06777));
	pid_t pid = fork();
	if (pid == 0) {
		gid_t g = 1000;
		OK(setgroups(1, &g));
		OK(setgid(1000));
		OK(setuid(1000));
		umask(022);
		int fd = (int)OK(open(P("shared/mine"), O_CREAT | O_WRONLY, 0666));
		OK(close(fd));
		struct stat st;
		OK(stat(P("shared/mine"), &st));
		CHECK(st.st_uid == 1000 && st.st_gid == 1000 && (st.st_mode & 0777) == 0644,
		      "new file as user: %u:%u %o", st.st_uid, st.st_gid, st.st_mode & 0777);
		ERR(open(P("rootonly"), O_WRONLY), EACCES);
		ERR(unlink(P("rootonly")), EACCES);
		ERR(setxattr(P("rootonly"), "user.x", "x", 1, 0), EACCES);
		ERR(chmod(P("rootonly"), 0777), EPERM);
		/* Writing or truncating someone's set-id file drops the bits. */
		fd = (int)OK(open(P("setid"), O_WRONLY));
		CHECK(pwrite(fd, "x", 1, 0) == 1, "write to the set-id file");
		OK(close(fd));
		OK(stat(P("setid"), &st));
		CHECK((st.st_mode & 07777) == 0777, "after a write: %o", st.st_mode & 07777);
		OK(truncate(P("setid_trunc"), 1));
		OK(stat(P("setid_trunc"), &st));
		CHECK((st.st_mode & 07777) == 0777, "after truncate: %o", st.st_mode & 07777);
		fd = (int)OK(open(P("setid_otrunc"), O_WRONLY | O_TRUNC));
		OK(close(fd));
		OK(stat(P("setid_otrunc"), &st));
		CHECK((st.st_mode & 07777) == 0777, "after O_TRUNC: %o", st.st_mode & 07777);
		_exit(0);
	}
	int st;
	OK(waitpid(pid, &st, 0));
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "unprivileged checks failed");
}

/* Two processes at once: each writes its files and reads the other's. */
static void t_concurrent(void)
{
	OK(mkdir(P("conc"), 0755));
	pid_t kids[2];
	for (int k = 0; k < 2; k++) {
		kids[k] = fork();
		if (kids[k] == 0) {
			for (int i = 0; i < 100; i++) {
				char nm[64];
				snprintf(nm, sizeof(nm), "conc/p%d-%d", k, i);
				write_pattern(P(nm), 4096 + (size_t)i * 37,
					      (uint64_t)(k * 1000 + i));
			}
			for (int i = 0; i < 100; i++) {
				char nm[64];
				snprintf(nm, sizeof(nm), "conc/p%d-%d", 1 - k, i);
				for (int tries = 0; access(P(nm), F_OK) && tries < 1000; tries++)
					usleep(1000);
				/* the other may still be writing it: only size-stable
				 * files are compared */
			}
			int fd = (int)OK(
			    open(P("conc/shared-log"), O_CREAT | O_WRONLY | O_APPEND, 0644));
			for (int i = 0; i < 500; i++)
				CHECK(write(fd, k ? "bbbbbbbb" : "aaaaaaaa", 8) == 8, "append");
			OK(close(fd));
			_exit(0);
		}
	}
	for (int k = 0; k < 2; k++) {
		int st;
		OK(waitpid(kids[k], &st, 0));
		CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "writer %d failed", k);
	}
	for (int k = 0; k < 2; k++)
		for (int i = 0; i < 100; i++) {
			char nm[64];
			snprintf(nm, sizeof(nm), "conc/p%d-%d", k, i);
			check_pattern(P(nm), 4096 + (size_t)i * 37, (uint64_t)(k * 1000 + i));
		}
	struct stat st;
	OK(stat(P("conc/shared-log"), &st));
	CHECK(st.st_size == 2 * 500 * 8, "concurrent appends: %lld bytes", (long long)st.st_size);
}

static int setup(const char *statefile)
{
	FILE *state = fopen(statefile, "w");
	CHECK(state, "open %s", statefile);
	t_data(state);
	t_names(state);
	t_attrs(state);
	t_space(state);
	t_user();
	t_concurrent();
	fclose(state);
	printf("setup: all checks passed\n");
	return 0;
}

static int verify(const char *statefile)
{
	FILE *state = fopen(statefile, "r");
	char kind[16], a[256], b[256], c[256];
	unsigned long ino;
	int n = 0;
	CHECK(state, "open %s", statefile);
	char line[1024];
	while (fgets(line, sizeof(line), state)) {
		n++;
		if (sscanf(line, "file %255s %lu %255s %255s", a, &ino, b, c) == 4) {
			CHECK(ino_of(P(a)) == ino, "%s: inode %lu, was %lu", a,
			      (unsigned long)ino_of(P(a)), ino);
			check_pattern(P(a), strtoul(b, NULL, 10), strtoull(c, NULL, 10));
		} else if (sscanf(line, "link %255s %lu %255s", a, &ino, b) == 3) {
			char t[256];
			ssize_t l = OK(readlink(P(a), t, sizeof(t) - 1));
			t[l] = '\0';
			CHECK(ino_of(P(a)) == ino && strcmp(t, b) == 0, "symlink %s", a);
		} else if (sscanf(line, "xattr %255s %255s %255s", a, b, c) == 3) {
			char v[256];
			ssize_t l = OK(getxattr(P(a), b, v, sizeof(v)));
			CHECK((size_t)l == strlen(c) && memcmp(v, c, (size_t)l) == 0, "xattr %s %s",
			      a, b);
		} else if (sscanf(line, "attr %255s %lu", a, &ino) == 2) {
			struct stat st;
			unsigned mode, uid, gid;
			long long sec;
			long nsec;
			sscanf(line, "%15s %*s %*u %o %u %u %lld %ld", kind, &mode, &uid, &gid,
			       &sec, &nsec);
			OK(stat(P(a), &st));
			CHECK(st.st_ino == ino && (st.st_mode & 07777) == mode &&
				  st.st_uid == uid && st.st_gid == gid &&
				  st.st_mtim.tv_sec == sec && st.st_mtim.tv_nsec == nsec,
			      "attributes of %s changed", a);
		} else {
			die(__LINE__, "bad state line: %s", line);
		}
	}
	fclose(state);
	printf("verify: %d records intact\n", n);
	return 0;
}

/* ---- kill test ------------------------------------------------------------------------ */

#define REC 4096

/* Writes record i at i*REC of DIR/ack and creates DIR/ackfiles/i every 16
 * records; logs "i" after each acknowledged step. Stops at the first error
 * (the daemon was killed). */
static int ackwriter(const char *logfile)
{
	FILE *log = fopen(logfile, "w");
	CHECK(log, "open %s", logfile);
	setvbuf(log, NULL, _IOLBF, 0);
	mkdir(P("ackfiles"), 0755);
	int fd = open(P("ack"), O_CREAT | O_WRONLY, 0644);
	if (fd < 0)
		return 0;
	unsigned char rec[REC];
	for (long i = 0;; i++) {
		fill(rec, REC, (uint64_t)i, 0);
		if (pwrite(fd, rec, REC, i * REC) != REC)
			break;
		fprintf(log, "w %ld\n", i);
		if (i % 16 == 0) {
			char nm[64];
			snprintf(nm, sizeof(nm), "ackfiles/%ld", i);
			int f = open(P(nm), O_CREAT | O_WRONLY, 0644);
			if (f < 0)
				break;
			close(f);
			fprintf(log, "f %ld\n", i);
		}
	}
	return 0;
}

static int ackcheck(const char *logfile)
{
	FILE *log = fopen(logfile, "r");
	char k;
	long i, nw = 0, nf = 0;
	unsigned char rec[REC], want[REC];
	CHECK(log, "open %s", logfile);
	int fd = (int)OK(open(P("ack"), O_RDONLY));
	while (fscanf(log, " %c %ld", &k, &i) == 2) {
		if (k == 'w') {
			fill(want, REC, (uint64_t)i, 0);
			CHECK(pread(fd, rec, REC, i * REC) == REC && memcmp(rec, want, REC) == 0,
			      "acknowledged record %ld lost", i);
			nw++;
		} else {
			char nm[64];
			snprintf(nm, sizeof(nm), "ackfiles/%ld", i);
			OK(access(P(nm), F_OK));
			nf++;
		}
	}
	CHECK(nw > 0, "the workload got nothing acknowledged");
	printf("ackcheck: %ld records and %ld files acknowledged, all present\n", nw, nf);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc != 4) {
		fprintf(stderr, "usage: %s setup|verify|ackwriter|ackcheck DIR FILE\n", argv[0]);
		return 2;
	}
	dir = argv[2];
	if (strcmp(argv[1], "setup") == 0)
		return setup(argv[3]);
	if (strcmp(argv[1], "verify") == 0)
		return verify(argv[3]);
	if (strcmp(argv[1], "ackwriter") == 0)
		return ackwriter(argv[3]);
	if (strcmp(argv[1], "ackcheck") == 0)
		return ackcheck(argv[3]);
	return 2;
}
