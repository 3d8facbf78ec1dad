/*
 * posix_semantics_test.c -- proves that every operation of ferrite.h gives the
 * result and the exact errno Linux gives for the same call: one named case per
 * error class or behaviour (ENOENT ... EFBIG, permissions, O_APPEND/O_TRUNC,
 * rename flags, links, timestamps, SEEK_DATA/SEEK_HOLE, fallocate, vectored
 * I/O, dup, readdir under concurrent change, statvfs accounting).
 *
 * The same source is also linked against tests/api/linuxref (the kernel on
 * tmpfs); that build, "api.posix_semantics.linux_oracle", shows the expected
 * values are Linux's. Each case runs in its own directory "/<case>" of one pool.
 * Usage: posix_semantics_test [-l] [case ...]
 */
#include "ft_test.h"

static ferrite_fs *fs;

/* "/<case>/<fmt...>", from a ring of buffers so several can be live at once. */
__attribute__((format(printf, 1, 2))) static const char *P(const char *fmt, ...)
{
	static char ring[8][8192];
	static int next;
	char *b = ring[next++ % 8];
	int n = snprintf(b, sizeof(ring[0]), "/%s/", ft_case_name);
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(b + n, sizeof(ring[0]) - (size_t)n, fmt, ap);
	va_end(ap);
	return b;
}

/* Create or replace path with len bytes of data. 0 or -errno. */
static int put(const char *path, const void *data, size_t len, mode_t mode)
{
	int fd = ferrite_open(fs, path, O_CREAT | O_WRONLY | O_TRUNC, mode);
	if (fd < 0)
		return fd;
	ssize_t w = len ? ferrite_write(fs, fd, data, len) : 0;
	int c = ferrite_close(fs, fd);
	if (w < 0)
		return (int)w;
	if ((size_t)w != len)
		return -EIO;
	return c;
}

static int puts_(const char *path, const char *s)
{
	return put(path, s, strlen(s), 0644);
}

/* Whole content of path into buf (cap bytes), NUL-terminated; length or -errno. */
static ssize_t get(const char *path, char *buf, size_t cap)
{
	int fd = ferrite_open(fs, path, O_RDONLY, 0);
	if (fd < 0)
		return fd;
	size_t n = 0;
	for (;;) {
		ssize_t r = ferrite_read(fs, fd, buf + n, cap - 1 - n);
		if (r < 0) {
			ferrite_close(fs, fd);
			return r;
		}
		if (r == 0)
			break;
		n += (size_t)r;
	}
	buf[n] = 0;
	ferrite_close(fs, fd);
	return (ssize_t)n;
}

#define EXPECT_CONTENT(path, str)                                                                  \
	do {                                                                                       \
		char ec_b_[4096];                                                                  \
		ssize_t ec_n_ = get(path, ec_b_, sizeof(ec_b_));                                   \
		FT_CHECK(ec_n_ >= 0 && (size_t)ec_n_ == strlen(str) &&                             \
			     memcmp(ec_b_, str, strlen(str)) == 0,                                 \
			 "content of %s: expected \"%s\", got %s \"%s\"", path, str,               \
			 ft_errname(ec_n_), ec_n_ >= 0 ? ec_b_ : "");                              \
	} while (0)

static int ts_cmp(struct timespec a, struct timespec b)
{
	if (a.tv_sec != b.tv_sec)
		return a.tv_sec < b.tv_sec ? -1 : 1;
	if (a.tv_nsec != b.tv_nsec)
		return a.tv_nsec < b.tv_nsec ? -1 : 1;
	return 0;
}

/* Sleeps until the coarse and the fine real-time clocks are both past t, so a
 * timestamp taken afterwards must differ from t (not a timing threshold: it
 * only waits for the clock to move). */
static void wait_clock_past(struct timespec t)
{
	for (;;) {
		struct timespec c, f;
		clock_gettime(CLOCK_REALTIME_COARSE, &c);
		clock_gettime(CLOCK_REALTIME, &f);
		if (ts_cmp(c, t) > 0 && ts_cmp(f, t) > 0)
			return;
		struct timespec d = {0, 2000000};
		nanosleep(&d, NULL);
	}
}

static int st_of(const char *path, struct stat *st)
{
	return ferrite_lstat(fs, path, st);
}

/* ---- ENOENT ---------------------------------------------------------------- */

static int c_enoent(void)
{
	struct stat st;
	char buf[64];
	ferrite_dir *d;
	FT_ERR(ferrite_stat(fs, P("nope"), &st), ENOENT);
	FT_ERR(ferrite_lstat(fs, P("nope"), &st), ENOENT);
	FT_ERR(ferrite_open(fs, P("nope"), O_RDONLY, 0), ENOENT);
	FT_ERR(ferrite_open(fs, P("nope"), O_RDWR, 0), ENOENT);
	FT_ERR(ferrite_unlink(fs, P("nope")), ENOENT);
	FT_ERR(ferrite_rmdir(fs, P("nope")), ENOENT);
	FT_ERR(ferrite_rename(fs, P("nope"), P("x"), 0), ENOENT);
	FT_ERR(ferrite_link(fs, P("nope"), P("x")), ENOENT);
	FT_ERR(ferrite_readlink(fs, P("nope"), buf, sizeof(buf)), ENOENT);
	FT_ERR(ferrite_chmod(fs, P("nope"), 0644), ENOENT);
	FT_ERR(ferrite_chown(fs, P("nope"), 1, 1), ENOENT);
	FT_ERR(ferrite_lchown(fs, P("nope"), 1, 1), ENOENT);
	FT_ERR(ferrite_utimens(fs, P("nope"), NULL, 0), ENOENT);
	FT_ERR(ferrite_truncate(fs, P("nope"), 0), ENOENT);
	FT_ERR(ferrite_access(fs, P("nope"), F_OK), ENOENT);
	FT_ERR(ferrite_opendir(fs, P("nope"), &d), ENOENT);
	/* missing parent */
	FT_ERR(ferrite_mkdir(fs, P("nodir/sub"), 0755), ENOENT);
	FT_ERR(ferrite_open(fs, P("nodir/f"), O_CREAT | O_WRONLY, 0644), ENOENT);
	FT_ERR(ferrite_symlink(fs, "t", P("nodir/l")), ENOENT);
	FT_ERR(puts_(P("nodir/f"), "x"), ENOENT);
	FT_OK(puts_(P("f"), "x"));
	FT_ERR(ferrite_link(fs, P("f"), P("nodir/f")), ENOENT);
	FT_ERR(ferrite_rename(fs, P("f"), P("nodir/f"), 0), ENOENT);
	/* empty path */
	FT_ERR(ferrite_stat(fs, "", &st), ENOENT);
	FT_ERR(ferrite_open(fs, "", O_RDONLY, 0), ENOENT);
	FT_ERR(ferrite_open(fs, "", O_CREAT | O_WRONLY, 0644), ENOENT);
	FT_ERR(ferrite_mkdir(fs, "", 0755), ENOENT);
	FT_ERR(ferrite_unlink(fs, ""), ENOENT);
	FT_ERR(ferrite_rmdir(fs, ""), ENOENT);
	FT_ERR(ferrite_symlink(fs, "t", ""), ENOENT);
	FT_ERR(ferrite_rename(fs, P("f"), "", 0), ENOENT);
	/* an empty symlink target is refused */
	FT_ERR(ferrite_symlink(fs, "", P("emptylink")), ENOENT);
	/* dangling symlink: lstat works, stat/open do not, O_CREAT makes the target */
	FT_OK(ferrite_symlink(fs, "target", P("dangling")));
	FT_OK(ferrite_lstat(fs, P("dangling"), &st));
	FT_ERR(ferrite_stat(fs, P("dangling"), &st), ENOENT);
	FT_ERR(ferrite_open(fs, P("dangling"), O_RDONLY, 0), ENOENT);
	FT_ERR(ferrite_open(fs, P("dangling"), O_CREAT | O_EXCL | O_WRONLY, 0644), EEXIST);
	int fd = FT_OK(ferrite_open(fs, P("dangling"), O_CREAT | O_WRONLY, 0600));
	FT_OK(ferrite_close(fs, fd));
	FT_OK(ferrite_stat(fs, P("target"), &st));
	FT_CHECK(S_ISREG(st.st_mode),
		 "O_CREAT through a dangling symlink must create a regular target");
	return 0;
}

/* ---- EEXIST ---------------------------------------------------------------- */

static int c_eexist(void)
{
	FT_OK(ferrite_mkdir(fs, P("d"), 0755));
	FT_OK(puts_(P("f"), "data"));
	FT_OK(ferrite_symlink(fs, "nowhere", P("l")));
	FT_ERR(ferrite_mkdir(fs, P("d"), 0755), EEXIST);
	FT_ERR(ferrite_mkdir(fs, P("f"), 0755), EEXIST);
	FT_ERR(ferrite_mkdir(fs, P("l"), 0755), EEXIST);
	FT_ERR(ferrite_mkdir(fs, "/", 0755), EEXIST);
	FT_ERR(ferrite_open(fs, P("f"), O_CREAT | O_EXCL | O_WRONLY, 0644), EEXIST);
	FT_ERR(ferrite_open(fs, P("d"), O_CREAT | O_EXCL | O_RDONLY, 0644), EEXIST);
	FT_ERR(ferrite_link(fs, P("f"), P("d")), EEXIST);
	FT_ERR(ferrite_link(fs, P("f"), P("l")), EEXIST);
	FT_ERR(ferrite_symlink(fs, "x", P("f")), EEXIST);
	FT_ERR(ferrite_symlink(fs, "x", P("d")), EEXIST);
	FT_OK(puts_(P("g"), "other"));
	FT_ERR(ferrite_rename(fs, P("g"), P("f"), RENAME_NOREPLACE), EEXIST);
	EXPECT_CONTENT(P("f"), "data");
	EXPECT_CONTENT(P("g"), "other");
	/* O_CREAT without O_EXCL opens the existing file and keeps its data */
	int fd = FT_OK(ferrite_open(fs, P("f"), O_CREAT | O_RDWR, 0600));
	FT_OK(ferrite_close(fs, fd));
	EXPECT_CONTENT(P("f"), "data");
	return 0;
}

/* ---- ENOTDIR --------------------------------------------------------------- */

static int c_enotdir_component(void)
{
	struct stat st;
	ferrite_dir *d;
	FT_OK(puts_(P("f"), "x"));
	FT_OK(ferrite_mkdir(fs, P("d"), 0755));
	FT_OK(ferrite_symlink(fs, "f", P("lf")));
	FT_ERR(ferrite_stat(fs, P("f/x"), &st), ENOTDIR);
	FT_ERR(ferrite_stat(fs, P("lf/x"), &st), ENOTDIR);
	FT_ERR(ferrite_open(fs, P("f/x"), O_RDONLY, 0), ENOTDIR);
	FT_ERR(ferrite_open(fs, P("f/x"), O_CREAT | O_WRONLY, 0644), ENOTDIR);
	FT_ERR(ferrite_mkdir(fs, P("f/d"), 0755), ENOTDIR);
	FT_ERR(ferrite_unlink(fs, P("f/x")), ENOTDIR);
	FT_ERR(ferrite_symlink(fs, "t", P("f/l")), ENOTDIR);
	FT_ERR(ferrite_rmdir(fs, P("f")), ENOTDIR);
	FT_ERR(ferrite_opendir(fs, P("f"), &d), ENOTDIR);
	FT_ERR(ferrite_opendir(fs, P("lf"), &d), ENOTDIR);
	FT_ERR(ferrite_open(fs, P("f"), O_RDONLY | O_DIRECTORY, 0), ENOTDIR);
	FT_ERR(ferrite_rename(fs, P("d"), P("f"), 0), ENOTDIR);
	FT_ERR(ferrite_rename(fs, P("f"), P("f/x"), 0), ENOTDIR);
	FT_ERR(ferrite_link(fs, P("f"), P("f/x")), ENOTDIR);
	/* the failed calls changed nothing */
	FT_OK(ferrite_stat(fs, P("d"), &st));
	FT_CHECK(S_ISDIR(st.st_mode), "d must still be a directory");
	EXPECT_CONTENT(P("f"), "x");
	return 0;
}

static int c_enotdir_trailing_slash(void)
{
	struct stat st;
	FT_OK(puts_(P("f"), "x"));
	FT_OK(ferrite_symlink(fs, "f", P("lf")));
	FT_ERR(ferrite_stat(fs, P("f/"), &st), ENOTDIR);
	FT_ERR(ferrite_lstat(fs, P("f/"), &st), ENOTDIR);
	FT_ERR(ferrite_stat(fs, P("lf/"), &st), ENOTDIR);
	FT_ERR(ferrite_open(fs, P("f/"), O_RDONLY, 0), ENOTDIR);
	FT_ERR(ferrite_open(fs, P("f/"), O_CREAT | O_WRONLY, 0644), EISDIR);
	FT_ERR(ferrite_unlink(fs, P("f/")), ENOTDIR);
	FT_ERR(ferrite_rename(fs, P("f/"), P("g"), 0), ENOTDIR);
	FT_ERR(ferrite_rename(fs, P("f"), P("g/"), 0), ENOTDIR);
	FT_ERR(ferrite_link(fs, P("f/"), P("g")), ENOTDIR);
	FT_ERR(ferrite_truncate(fs, P("f/"), 0), ENOTDIR);
	/* a new regular file cannot be named with a trailing slash */
	FT_ERR(ferrite_open(fs, P("new/"), O_CREAT | O_WRONLY, 0644), EISDIR);
	FT_ERR(ferrite_stat(fs, P("new"), &st), ENOENT);
	/* directories accept trailing slashes */
	FT_OK(ferrite_mkdir(fs, P("d/"), 0755));
	FT_OK(ferrite_stat(fs, P("d/"), &st));
	FT_OK(ferrite_stat(fs, P("d//"), &st));
	FT_OK(ferrite_stat(fs, P("d/."), &st));
	FT_OK(ferrite_rename(fs, P("d/"), P("e/"), 0));
	FT_OK(ferrite_rmdir(fs, P("e/")));
	/* a symlink to a directory is followed when a slash trails it */
	FT_OK(ferrite_mkdir(fs, P("dir"), 0755));
	FT_OK(ferrite_symlink(fs, "dir", P("ld")));
	FT_OK(ferrite_lstat(fs, P("ld/"), &st));
	FT_CHECK(S_ISDIR(st.st_mode), "lstat(\"ld/\") must follow the link to the directory");
	FT_OK(ferrite_lstat(fs, P("ld"), &st));
	FT_CHECK(S_ISLNK(st.st_mode), "lstat(\"ld\") must return the link itself");
	return 0;
}

/* ---- EISDIR ---------------------------------------------------------------- */

static int c_eisdir(void)
{
	char buf[16];
	FT_OK(ferrite_mkdir(fs, P("d"), 0755));
	FT_OK(ferrite_mkdir(fs, P("empty"), 0755));
	FT_OK(puts_(P("f"), "x"));
	FT_ERR(ferrite_open(fs, P("d"), O_WRONLY, 0), EISDIR);
	FT_ERR(ferrite_open(fs, P("d"), O_RDWR, 0), EISDIR);
	FT_ERR(ferrite_open(fs, P("d"), O_WRONLY | O_CREAT, 0644), EISDIR);
	FT_ERR(ferrite_open(fs, P("d"), O_RDONLY | O_TRUNC, 0), EISDIR);
	FT_ERR(ferrite_open(fs, "/", O_RDWR, 0), EISDIR);
	FT_ERR(ferrite_unlink(fs, P("d")), EISDIR);
	FT_ERR(ferrite_rename(fs, P("f"), P("d"), 0), EISDIR);
	FT_ERR(ferrite_rename(fs, P("f"), P("empty"), 0), EISDIR);
	FT_ERR(ferrite_truncate(fs, P("d"), 0), EISDIR);
	int fd = FT_OK(ferrite_open(fs, P("d"), O_RDONLY | O_DIRECTORY, 0));
	FT_ERR(ferrite_read(fs, fd, buf, sizeof(buf)), EISDIR);
	FT_ERR(ferrite_pread(fs, fd, buf, sizeof(buf), 0), EISDIR);
	FT_ERR(ferrite_write(fs, fd, "x", 1), EBADF);
	FT_ERR(ferrite_ftruncate(fs, fd, 0), EINVAL);
	FT_OK(ferrite_close(fs, fd));
	EXPECT_CONTENT(P("f"), "x");
	return 0;
}

/* ---- ENOTEMPTY ------------------------------------------------------------- */

static int c_enotempty(void)
{
	struct stat st;
	FT_OK(ferrite_mkdir(fs, P("d"), 0755));
	FT_OK(puts_(P("d/f"), "x"));
	FT_OK(ferrite_mkdir(fs, P("e"), 0755));
	FT_OK(ferrite_mkdir(fs, P("e/sub"), 0755));
	FT_OK(ferrite_mkdir(fs, P("src"), 0755));
	FT_OK(puts_(P("src/inner"), "in"));
	FT_ERR(ferrite_rmdir(fs, P("d")), ENOTEMPTY);
	FT_ERR(ferrite_rmdir(fs, P("e")), ENOTEMPTY);
	FT_ERR(ferrite_rmdir(fs, P("d/..")), ENOTEMPTY);
	FT_ERR(ferrite_rename(fs, P("src"), P("d"), 0), ENOTEMPTY);
	FT_ERR(ferrite_rename(fs, P("src"), P("e"), 0), ENOTEMPTY);
	EXPECT_CONTENT(P("d/f"), "x");
	EXPECT_CONTENT(P("src/inner"), "in");
	/* a directory may replace an empty one */
	FT_OK(ferrite_rmdir(fs, P("e/sub")));
	FT_OK(ferrite_rename(fs, P("src"), P("e"), 0));
	EXPECT_CONTENT(P("e/inner"), "in");
	FT_ERR(ferrite_stat(fs, P("src"), &st), ENOENT);
	/* emptied directories can be removed */
	FT_OK(ferrite_unlink(fs, P("d/f")));
	FT_OK(ferrite_rmdir(fs, P("d")));
	return 0;
}

/* ---- ENAMETOOLONG ---------------------------------------------------------- */

static int c_enametoolong_component(void)
{
	char n255[256], n256[257];
	struct stat st;
	memset(n255, 'a', 255);
	n255[255] = 0;
	memset(n256, 'b', 256);
	n256[256] = 0;
	FT_ERR(ferrite_open(fs, P("%s", n256), O_CREAT | O_WRONLY, 0644), ENAMETOOLONG);
	FT_ERR(ferrite_open(fs, P("%s", n256), O_RDONLY, 0), ENAMETOOLONG);
	FT_ERR(ferrite_mkdir(fs, P("%s", n256), 0755), ENAMETOOLONG);
	FT_ERR(ferrite_stat(fs, P("%s", n256), &st), ENAMETOOLONG);
	FT_ERR(ferrite_stat(fs, P("%s/x", n256), &st), ENAMETOOLONG);
	FT_ERR(ferrite_unlink(fs, P("%s", n256)), ENAMETOOLONG);
	FT_ERR(ferrite_symlink(fs, "t", P("%s", n256)), ENAMETOOLONG);
	FT_OK(puts_(P("f"), "x"));
	FT_ERR(ferrite_rename(fs, P("f"), P("%s", n256), 0), ENAMETOOLONG);
	FT_ERR(ferrite_link(fs, P("f"), P("%s", n256)), ENAMETOOLONG);
	/* exactly 255 bytes work for every kind of entry */
	FT_OK(puts_(P("%s", n255), "255"));
	EXPECT_CONTENT(P("%s", n255), "255");
	n255[0] = 'd';
	FT_OK(ferrite_mkdir(fs, P("%s", n255), 0755));
	FT_OK(puts_(P("%s/inner", n255), "in"));
	n255[0] = 'l';
	FT_OK(ferrite_symlink(fs, "f", P("%s", n255)));
	EXPECT_CONTENT(P("%s", n255), "x");
	n255[0] = 'h';
	FT_OK(ferrite_link(fs, P("f"), P("%s", n255)));
	n255[0] = 'r';
	FT_OK(ferrite_rename(fs, P("f"), P("%s", n255), 0));
	/* readdir returns the full names */
	ferrite_dir *d;
	struct ferrite_dirent e;
	int seen = 0, r;
	FT_OK(ferrite_opendir(fs, P("."), &d));
	while ((r = ferrite_readdir(d, &e)) == 1)
		if (strlen(e.name) == 255 && strspn(e.name + 1, "a") == 254)
			seen++;
	ferrite_closedir(d);
	FT_EQ(r, 0);
	FT_EQ(seen, 5);
	return 0;
}

static int c_enametoolong_path(void)
{
	/* a path of PATH_MAX (4096) bytes is refused before lookup; 4095 works */
	static char p[8192];
	char comp[201];
	struct stat st;
	memset(comp, 'c', 200);
	comp[200] = 0;
	int n = snprintf(p, sizeof(p), "%s", P("%s", comp));
	FT_OK(ferrite_mkdir(fs, p, 0755));
	while (n + 201 < 4095 - 40) {
		n += snprintf(p + n, sizeof(p) - (size_t)n, "/%s", comp);
		FT_OK(ferrite_mkdir(fs, p, 0755));
	}
	/* leaf name chosen so the full path is exactly 4095 bytes */
	int leaf = 4095 - n - 1;
	p[n] = '/';
	memset(p + n + 1, 'z', (size_t)leaf);
	p[n + 1 + leaf] = 0;
	FT_EQ(strlen(p), 4095);
	FT_OK(put(p, "ok", 2, 0644));
	FT_OK(ferrite_stat(fs, p, &st));
	FT_EQ(st.st_size, 2);
	p[n + 1 + leaf] = 'z';
	p[n + 2 + leaf] = 0;
	FT_EQ(strlen(p), 4096);
	FT_ERR(ferrite_stat(fs, p, &st), ENAMETOOLONG);
	FT_ERR(ferrite_open(fs, p, O_CREAT | O_WRONLY, 0644), ENAMETOOLONG);
	FT_ERR(ferrite_mkdir(fs, p, 0755), ENAMETOOLONG);
	FT_ERR(ferrite_unlink(fs, p), ENAMETOOLONG);
	/* the same through an existing directory prefix padded with "./" */
	static char q[8192];
	int m = snprintf(q, sizeof(q), "%s", P("."));
	while (m < 4096)
		q[m++] = '/';
	q[m] = 0;
	FT_ERR(ferrite_stat(fs, q, &st), ENAMETOOLONG);
	/* symlink targets: 4095 bytes are kept, 4096 refused */
	static char t[4097];
	memset(t, 't', 4096);
	t[4096] = 0;
	FT_ERR(ferrite_symlink(fs, t, P("long")), ENAMETOOLONG);
	t[4095] = 0;
	FT_OK(ferrite_symlink(fs, t, P("long")));
	static char back[4200];
	FT_EQ(ferrite_readlink(fs, P("long"), back, sizeof(back)), 4095);
	FT_CHECK(memcmp(back, t, 4095) == 0, "readlink of a 4095-byte target differs");
	return 0;
}

/* ---- ELOOP ----------------------------------------------------------------- */

static int c_eloop(void)
{
	struct stat st;
	char buf[64];
	FT_OK(ferrite_symlink(fs, "b", P("a")));
	FT_OK(ferrite_symlink(fs, "a", P("b")));
	FT_OK(ferrite_symlink(fs, "self", P("self")));
	FT_ERR(ferrite_stat(fs, P("a"), &st), ELOOP);
	FT_ERR(ferrite_stat(fs, P("self"), &st), ELOOP);
	FT_ERR(ferrite_stat(fs, P("a/x"), &st), ELOOP);
	FT_ERR(ferrite_open(fs, P("a"), O_RDONLY, 0), ELOOP);
	FT_ERR(ferrite_open(fs, P("a"), O_CREAT | O_WRONLY, 0644), ELOOP);
	FT_ERR(ferrite_mkdir(fs, P("a/x"), 0755), ELOOP);
	FT_ERR(ferrite_chmod(fs, P("a"), 0644), ELOOP);
	FT_ERR(ferrite_truncate(fs, P("self"), 0), ELOOP);
	FT_ERR(ferrite_access(fs, P("self"), F_OK), ELOOP);
	FT_OK(ferrite_lstat(fs, P("a"), &st));
	FT_EQ(ferrite_readlink(fs, P("a"), buf, sizeof(buf)), 1);
	/* O_NOFOLLOW: ELOOP on a final symlink, fine on a file or through a
	 * symlink that is not the last component */
	FT_OK(puts_(P("f"), "x"));
	FT_OK(ferrite_mkdir(fs, P("d"), 0755));
	FT_OK(puts_(P("d/g"), "g"));
	FT_OK(ferrite_symlink(fs, "f", P("lf")));
	FT_OK(ferrite_symlink(fs, "d", P("ld")));
	FT_ERR(ferrite_open(fs, P("lf"), O_RDONLY | O_NOFOLLOW, 0), ELOOP);
	FT_ERR(ferrite_open(fs, P("lf"), O_WRONLY | O_CREAT | O_NOFOLLOW, 0644), ELOOP);
	/* Linux: O_DIRECTORY is checked on the unfollowed link first */
	FT_ERR(ferrite_open(fs, P("ld"), O_RDONLY | O_DIRECTORY | O_NOFOLLOW, 0), ENOTDIR);
	int fd = FT_OK(ferrite_open(fs, P("f"), O_RDONLY | O_NOFOLLOW, 0));
	FT_OK(ferrite_close(fs, fd));
	fd = FT_OK(ferrite_open(fs, P("ld/g"), O_RDONLY | O_NOFOLLOW, 0));
	FT_OK(ferrite_close(fs, fd));
	/* a chain of 40 links resolves, 41 is a loop (Linux MAXSYMLINKS) */
	FT_OK(ferrite_symlink(fs, "f", P("c0")));
	for (int i = 1; i <= 40; i++) {
		char prev[16];
		snprintf(prev, sizeof(prev), "c%d", i - 1);
		FT_OK(ferrite_symlink(fs, prev, P("c%d", i)));
	}
	FT_OK(ferrite_stat(fs, P("c39"), &st));
	FT_ERR(ferrite_stat(fs, P("c40"), &st), ELOOP);
	/* loops can be removed */
	FT_OK(ferrite_unlink(fs, P("a")));
	FT_OK(ferrite_unlink(fs, P("self")));
	return 0;
}

/* ---- EBADF ----------------------------------------------------------------- */

static int c_ebadf(void)
{
	char buf[8];
	struct stat st;
	struct iovec iov = {buf, sizeof(buf)};
	FT_OK(puts_(P("f"), "content"));
	int fd = FT_OK(ferrite_open(fs, P("f"), O_RDONLY, 0));
	FT_OK(ferrite_close(fs, fd));
	FT_ERR(ferrite_close(fs, fd), EBADF);
	FT_ERR(ferrite_read(fs, fd, buf, 1), EBADF);
	FT_ERR(ferrite_write(fs, fd, "x", 1), EBADF);
	FT_ERR(ferrite_pread(fs, fd, buf, 1, 0), EBADF);
	FT_ERR(ferrite_pwrite(fs, fd, "x", 1, 0), EBADF);
	FT_ERR(ferrite_readv(fs, fd, &iov, 1), EBADF);
	FT_ERR(ferrite_fstat(fs, fd, &st), EBADF);
	FT_ERR(ferrite_lseek(fs, fd, 0, SEEK_SET), EBADF);
	FT_ERR(ferrite_ftruncate(fs, fd, 0), EBADF);
	FT_ERR(ferrite_fallocate(fs, fd, 0, 0, 4096), EBADF);
	FT_ERR(ferrite_fsync(fs, fd), EBADF);
	FT_ERR(ferrite_fdatasync(fs, fd), EBADF);
	FT_ERR(ferrite_fchmod(fs, fd, 0644), EBADF);
	FT_ERR(ferrite_fchown(fs, fd, 0, 0), EBADF);
	FT_ERR(ferrite_futimens(fs, fd, NULL), EBADF);
	FT_ERR(ferrite_dup(fs, fd), EBADF);
	FT_ERR(ferrite_read(fs, -1, buf, 1), EBADF);
	FT_ERR(ferrite_close(fs, -1), EBADF);
	FT_ERR(ferrite_read(fs, 1 << 20, buf, 1), EBADF);
	FT_ERR(ferrite_close(fs, INT_MAX), EBADF);
	/* access mode of the descriptor */
	int ro = FT_OK(ferrite_open(fs, P("f"), O_RDONLY, 0));
	int wo = FT_OK(ferrite_open(fs, P("f"), O_WRONLY, 0));
	FT_ERR(ferrite_write(fs, ro, "x", 1), EBADF);
	FT_ERR(ferrite_pwrite(fs, ro, "x", 1, 0), EBADF);
	FT_ERR(ferrite_writev(fs, ro, &iov, 1), EBADF);
	FT_ERR(ferrite_pwritev(fs, ro, &iov, 1, 0), EBADF);
	FT_ERR(ferrite_fallocate(fs, ro, 0, 0, 4096), EBADF);
	FT_ERR(ferrite_ftruncate(fs, ro, 0), EINVAL);
	FT_ERR(ferrite_read(fs, wo, buf, 1), EBADF);
	FT_ERR(ferrite_pread(fs, wo, buf, 1, 0), EBADF);
	FT_ERR(ferrite_readv(fs, wo, &iov, 1), EBADF);
	FT_ERR(ferrite_preadv(fs, wo, &iov, 1, 0), EBADF);
	/* metadata calls need no access mode */
	FT_OK(ferrite_fstat(fs, ro, &st));
	FT_OK(ferrite_fchmod(fs, ro, 0640));
	FT_OK(ferrite_futimens(fs, ro, NULL));
	FT_OK(ferrite_close(fs, ro));
	FT_OK(ferrite_close(fs, wo));
	EXPECT_CONTENT(P("f"), "content");
	return 0;
}

/* ---- EINVAL ---------------------------------------------------------------- */

static int c_einval(void)
{
	char buf[8];
	struct iovec iov = {buf, sizeof(buf)};
	FT_OK(puts_(P("f"), "0123456789"));
	FT_OK(ferrite_mkdir(fs, P("d"), 0755));
	FT_OK(ferrite_mkdir(fs, P("d/sub"), 0755));
	int fd = FT_OK(ferrite_open(fs, P("f"), O_RDWR, 0));
	FT_ERR(ferrite_lseek(fs, fd, 0, 17), EINVAL);
	FT_ERR(ferrite_lseek(fs, fd, 0, -1), EINVAL);
	FT_ERR(ferrite_lseek(fs, fd, -1, SEEK_SET), EINVAL);
	FT_EQ(ferrite_lseek(fs, fd, 4, SEEK_SET), 4);
	FT_ERR(ferrite_lseek(fs, fd, -5, SEEK_CUR), EINVAL);
	FT_ERR(ferrite_lseek(fs, fd, -11, SEEK_END), EINVAL);
	FT_EQ(ferrite_lseek(fs, fd, 0, SEEK_CUR), 4); /* a failed seek keeps the offset */
	FT_ERR(ferrite_pread(fs, fd, buf, 1, -1), EINVAL);
	FT_ERR(ferrite_pwrite(fs, fd, "x", 1, -1), EINVAL);
	FT_ERR(ferrite_preadv(fs, fd, &iov, 1, -1), EINVAL);
	FT_ERR(ferrite_pwritev(fs, fd, &iov, 1, -1), EINVAL);
	FT_ERR(ferrite_readv(fs, fd, &iov, -1), EINVAL);
	FT_ERR(ferrite_writev(fs, fd, &iov, -1), EINVAL);
	FT_ERR(ferrite_readv(fs, fd, &iov, 1025), EINVAL); /* > IOV_MAX */
	FT_ERR(ferrite_ftruncate(fs, fd, -1), EINVAL);
	FT_ERR(ferrite_truncate(fs, P("f"), -1), EINVAL);
	FT_ERR(ferrite_fallocate(fs, fd, 0, 0, 0), EINVAL);
	FT_ERR(ferrite_fallocate(fs, fd, 0, -1, 4096), EINVAL);
	FT_ERR(ferrite_fallocate(fs, fd, 0, 0, -4096), EINVAL);
	FT_ERR(ferrite_fallocate(fs, fd, FALLOC_FL_KEEP_SIZE, 0, 0), EINVAL);
	FT_OK(ferrite_close(fs, fd));
	/* rename a directory into its own subtree */
	FT_ERR(ferrite_rename(fs, P("d"), P("d/sub/x"), 0), EINVAL);
	FT_ERR(ferrite_rename(fs, P("d"), P("d/x"), 0), EINVAL);
	FT_ERR(ferrite_rename(fs, P("d"), P("d/sub"), RENAME_EXCHANGE), EINVAL);
	/* rename flags */
	FT_ERR(ferrite_rename(fs, P("f"), P("g"), RENAME_NOREPLACE | RENAME_EXCHANGE), EINVAL);
	FT_ERR(ferrite_rename(fs, P("f"), P("g"), 0x80), EINVAL);
	/* rmdir of "." */
	FT_ERR(ferrite_rmdir(fs, P("d/.")), EINVAL);
	/* readlink on a non-link; zero-sized buffer */
	FT_ERR(ferrite_readlink(fs, P("f"), buf, sizeof(buf)), EINVAL);
	FT_OK(ferrite_symlink(fs, "f", P("l")));
	FT_ERR(ferrite_readlink(fs, P("l"), buf, 0), EINVAL);
	/* access mode and utimens flags / nanoseconds */
	FT_ERR(ferrite_access(fs, P("f"), 0x100), EINVAL);
	FT_ERR(ferrite_utimens(fs, P("f"), NULL, 0x1234), EINVAL);
	struct timespec bad[2] = {{1, 1000000000L}, {1, 0}};
	FT_ERR(ferrite_utimens(fs, P("f"), bad, 0), EINVAL);
	bad[0].tv_nsec = -5;
	FT_ERR(ferrite_utimens(fs, P("f"), bad, 0), EINVAL);
	/* O_CREAT | O_DIRECTORY is invalid (Linux >= 6.4) */
	FT_ERR(ferrite_open(fs, P("newdir"), O_CREAT | O_DIRECTORY | O_RDONLY, 0755), EINVAL);
	FT_ERR(ferrite_open(fs, P("f"), O_CREAT | O_DIRECTORY | O_RDONLY, 0755), EINVAL);
	struct stat st;
	FT_ERR(ferrite_stat(fs, P("newdir"), &st), ENOENT);
	/* link to a directory is not allowed (EPERM) */
	FT_ERR(ferrite_link(fs, P("d"), P("dlink")), EPERM);
	EXPECT_CONTENT(P("f"), "0123456789");
	return 0;
}

/* ---- EFBIG ----------------------------------------------------------------- */

static int c_efbig(void)
{
	struct ferrite_info info;
	struct stat st;
	FT_OK(ferrite_get_info(fs, &info));
	FT_CHECK(info.max_file_size > 0 && info.max_file_size < (uint64_t)LLONG_MAX,
		 "max_file_size %" PRIu64 " is not a usable limit", info.max_file_size);
	off_t max = (off_t)info.max_file_size;
	int fd = FT_OK(ferrite_open(fs, P("f"), O_CREAT | O_RDWR, 0644));
	FT_ERR(ferrite_pwrite(fs, fd, "x", 1, max), EFBIG);
	FT_ERR(ferrite_pwrite(fs, fd, "xy", 2, max + 4096), EFBIG);
	FT_EQ(ferrite_lseek(fs, fd, max, SEEK_SET), max);
	FT_ERR(ferrite_write(fs, fd, "x", 1), EFBIG);
	FT_ERR(ferrite_ftruncate(fs, fd, max + 1), EFBIG);
	FT_ERR(ferrite_truncate(fs, P("f"), max + 1), EFBIG);
	FT_ERR(ferrite_fallocate(fs, fd, 0, max, 1), EFBIG);
	FT_ERR(ferrite_fallocate(fs, fd, FALLOC_FL_KEEP_SIZE, max - 4096, 8192), EFBIG);
	FT_OK(ferrite_fstat(fs, fd, &st));
	FT_EQ(st.st_size, 0);
	/* the limit itself is reachable: a write ending exactly at it is short */
	FT_EQ(ferrite_pwrite(fs, fd, "ab", 2, max - 1), 1);
	FT_OK(ferrite_fstat(fs, fd, &st));
	FT_EQ(st.st_size, max);
	char c = 0;
	FT_EQ(ferrite_pread(fs, fd, &c, 1, max - 1), 1);
	FT_EQ(c, 'a');
	FT_OK(ferrite_ftruncate(fs, fd, 0));
	FT_OK(ferrite_close(fs, fd));
	return 0;
}

/* ---- permissions ----------------------------------------------------------- */

static int c_eacces(void)
{
	struct stat st;
	ferrite_dir *d;
	struct timespec t[2] = {{1000, 0}, {1000, 0}};
	FT_OK(ferrite_chmod(fs, P("."), 0777));
	FT_OK(puts_(P("secret"), "s"));
	FT_OK(ferrite_chmod(fs, P("secret"), 0600));
	FT_OK(puts_(P("public"), "p"));
	FT_OK(ferrite_chmod(fs, P("public"), 0644));
	FT_OK(ferrite_mkdir(fs, P("ro"), 0555));
	FT_OK(ferrite_chmod(fs, P("ro"), 0555)); /* in case of a umask */
	FT_OK(ferrite_mkdir(fs, P("rw"), 0777));
	FT_OK(ferrite_chmod(fs, P("rw"), 0777));
	FT_OK(ferrite_mkdir(fs, P("nosearch"), 0755));
	FT_OK(puts_(P("nosearch/x"), "x"));
	FT_OK(ferrite_chmod(fs, P("nosearch"), 0666));
	FT_OK(ferrite_mkdir(fs, P("noread"), 0755));
	FT_OK(ferrite_chmod(fs, P("noread"), 0311));
	FT_OK(ferrite_mkdir(fs, P("wr"), 0755));
	FT_OK(puts_(P("wr/existing"), "e"));
	FT_OK(ferrite_chmod(fs, P("wr"), 0555));

	FT_OK(ferrite_set_creds(1000, 1000, 0, NULL));
	FT_ERR(ferrite_open(fs, P("secret"), O_RDONLY, 0), EACCES);
	FT_ERR(ferrite_open(fs, P("secret"), O_WRONLY, 0), EACCES);
	FT_ERR(ferrite_open(fs, P("secret"), O_CREAT | O_RDWR, 0644), EACCES);
	FT_ERR(ferrite_open(fs, P("public"), O_WRONLY, 0), EACCES);
	FT_ERR(ferrite_open(fs, P("public"), O_RDONLY | O_TRUNC, 0), EACCES);
	FT_ERR(ferrite_truncate(fs, P("secret"), 0), EACCES);
	FT_ERR(ferrite_access(fs, P("secret"), R_OK), EACCES);
	FT_ERR(ferrite_access(fs, P("public"), W_OK), EACCES);
	FT_ERR(ferrite_access(fs, P("public"), X_OK), EACCES);
	FT_OK(ferrite_access(fs, P("public"), R_OK));
	FT_OK(ferrite_access(fs, P("secret"), F_OK));
	int fd = FT_OK(ferrite_open(fs, P("public"), O_RDONLY, 0));
	FT_OK(ferrite_close(fs, fd));
	/* write permission on the directory */
	FT_ERR(ferrite_open(fs, P("ro/new"), O_CREAT | O_WRONLY, 0644), EACCES);
	FT_ERR(ferrite_mkdir(fs, P("ro/d"), 0755), EACCES);
	FT_ERR(ferrite_symlink(fs, "t", P("ro/l")), EACCES);
	/* (a file of the caller's own: linking another's file depends on the
	 * host's fs.protected_hardlinks) */
	FT_OK(puts_(P("rw/mine"), "m"));
	FT_ERR(ferrite_link(fs, P("rw/mine"), P("ro/h")), EACCES);
	FT_ERR(ferrite_rename(fs, P("rw"), P("ro/rw"), 0), EACCES);
	FT_ERR(ferrite_unlink(fs, P("wr/existing")), EACCES);
	FT_ERR(ferrite_rename(fs, P("wr/existing"), P("rw/x"), 0), EACCES);
	/* search permission on a path component */
	FT_ERR(ferrite_stat(fs, P("nosearch/x"), &st), EACCES);
	FT_ERR(ferrite_open(fs, P("nosearch/x"), O_RDONLY, 0), EACCES);
	FT_ERR(ferrite_open(fs, P("nosearch/new"), O_CREAT | O_WRONLY, 0644), EACCES);
	FT_ERR(ferrite_unlink(fs, P("nosearch/x")), EACCES);
	FT_ERR(ferrite_opendir(fs, P("noread"), &d), EACCES);
	/* owner-only operations on someone else's file */
	FT_ERR(ferrite_chmod(fs, P("public"), 0666), EPERM);
	FT_ERR(ferrite_chown(fs, P("public"), 1000, 1000), EPERM);
	FT_ERR(ferrite_utimens(fs, P("public"), t, 0), EPERM);
	FT_ERR(ferrite_utimens(fs, P("secret"), NULL, 0), EACCES);
	/* nothing was changed by the refused calls */
	ferrite_reset_creds();
	FT_OK(ferrite_stat(fs, P("public"), &st));
	FT_EQ(st.st_mode & 07777, 0644);
	FT_EQ(st.st_uid, 0);
	EXPECT_CONTENT(P("public"), "p");
	EXPECT_CONTENT(P("secret"), "s");
	EXPECT_CONTENT(P("wr/existing"), "e");
	FT_ERR(ferrite_stat(fs, P("ro/new"), &st), ENOENT);
	return 0;
}

static int c_owner_rights(void)
{
	struct stat st;
	FT_OK(ferrite_chmod(fs, P("."), 0777));
	FT_OK(ferrite_set_creds(1000, 1000, 1, (gid_t[]){2000}));
	/* new entries belong to the caller */
	FT_OK(puts_(P("mine"), "m"));
	FT_OK(ferrite_mkdir(fs, P("mydir"), 0700));
	FT_OK(ferrite_symlink(fs, "mine", P("mylink")));
	FT_OK(ferrite_stat(fs, P("mine"), &st));
	FT_EQ(st.st_uid, 1000);
	FT_EQ(st.st_gid, 1000);
	FT_OK(ferrite_lstat(fs, P("mylink"), &st));
	FT_EQ(st.st_uid, 1000);
	FT_OK(ferrite_stat(fs, P("mydir"), &st));
	FT_EQ(st.st_uid, 1000);
	/* the owner may chmod, set times, and give the file to a group he is in */
	FT_OK(ferrite_chmod(fs, P("mine"), 0600));
	struct timespec t[2] = {{100, 1}, {200, 2}};
	FT_OK(ferrite_utimens(fs, P("mine"), t, 0));
	FT_OK(ferrite_chown(fs, P("mine"), (uid_t)-1, 2000));
	FT_ERR(ferrite_chown(fs, P("mine"), (uid_t)-1, 3000), EPERM);
	FT_ERR(ferrite_chown(fs, P("mine"), 1001, (gid_t)-1), EPERM);
	FT_OK(ferrite_stat(fs, P("mine"), &st));
	FT_EQ(st.st_gid, 2000);
	FT_EQ(st.st_uid, 1000);
	/* group permissions: a file of group 2000, mode 0640 */
	ferrite_reset_creds();
	FT_OK(puts_(P("grp"), "g"));
	FT_OK(ferrite_chown(fs, P("grp"), 0, 2000));
	FT_OK(ferrite_chmod(fs, P("grp"), 0640));
	FT_OK(ferrite_set_creds(1000, 2000, 0, NULL));
	int fd = FT_OK(ferrite_open(fs, P("grp"), O_RDONLY, 0));
	FT_OK(ferrite_close(fs, fd));
	FT_ERR(ferrite_open(fs, P("grp"), O_WRONLY, 0), EACCES);
	FT_OK(ferrite_set_creds(1000, 1000, 1, (gid_t[]){2000}));
	fd = FT_OK(ferrite_open(fs, P("grp"), O_RDONLY, 0));
	FT_OK(ferrite_close(fs, fd));
	FT_OK(ferrite_set_creds(1000, 1000, 0, NULL));
	FT_ERR(ferrite_open(fs, P("grp"), O_RDONLY, 0), EACCES);
	/* the owner's bits apply to the owner even if "other" has more */
	ferrite_reset_creds();
	FT_OK(puts_(P("odd"), "o"));
	FT_OK(ferrite_chown(fs, P("odd"), 1000, 1000));
	FT_OK(ferrite_chmod(fs, P("odd"), 0066));
	FT_OK(ferrite_set_creds(1000, 1000, 0, NULL));
	FT_ERR(ferrite_open(fs, P("odd"), O_RDONLY, 0), EACCES);
	/* sticky directory: only the owner of an entry may remove it */
	ferrite_reset_creds();
	FT_OK(ferrite_mkdir(fs, P("tmp"), 0777));
	FT_OK(ferrite_chmod(fs, P("tmp"), 01777));
	FT_OK(puts_(P("tmp/roots"), "r"));
	FT_OK(ferrite_chmod(fs, P("tmp/roots"), 0666));
	FT_OK(ferrite_set_creds(1000, 1000, 0, NULL));
	FT_ERR(ferrite_unlink(fs, P("tmp/roots")), EPERM);
	FT_ERR(ferrite_rename(fs, P("tmp/roots"), P("tmp/x"), 0), EPERM);
	FT_OK(puts_(P("tmp/users"), "u"));
	FT_OK(ferrite_unlink(fs, P("tmp/users")));
	/* writing is allowed by mode, and utimens(NULL) with write permission */
	fd = FT_OK(ferrite_open(fs, P("tmp/roots"), O_WRONLY | O_APPEND, 0));
	FT_EQ(ferrite_write(fs, fd, "w", 1), 1);
	FT_OK(ferrite_close(fs, fd));
	FT_OK(ferrite_utimens(fs, P("tmp/roots"), NULL, 0));
	ferrite_reset_creds();
	EXPECT_CONTENT(P("tmp/roots"), "rw");
	/* root overrides permission bits */
	FT_OK(ferrite_chmod(fs, P("tmp/roots"), 0));
	EXPECT_CONTENT(P("tmp/roots"), "rw");
	return 0;
}

/* Set-user-id and set-group-id: an unprivileged write, truncate or
 * allocation takes set-user-id away, and set-group-id when the group may
 * execute or the writer is not of the file's group; root's do not; chown
 * takes them away from everyone's files. */
static mode_t mode_of(const char *path)
{
	struct stat st;
	return ferrite_stat(fs, path, &st) ? (mode_t)-1 : st.st_mode & 07777;
}

static int write_as_user(const char *path, int how)
{
	FT_OK(ferrite_set_creds(1000, 1000, 0, NULL));
	int fd = FT_OK(ferrite_open(fs, path, O_WRONLY, 0));
	if (how == 0)
		FT_EQ(ferrite_pwrite(fs, fd, "x", 1, 3), 1);
	else if (how == 1)
		FT_OK(ferrite_ftruncate(fs, fd, 2));
	else
		FT_OK(ferrite_fallocate(fs, fd, 0, 0, 8192));
	FT_OK(ferrite_close(fs, fd));
	ferrite_reset_creds();
	return 0;
}

static int c_setid(void)
{
	const char *f = P("f");
	for (int how = 0; how < 3; how++) {
		FT_OK(puts_(f, "exec"));
		FT_OK(ferrite_chmod(fs, f, 06777)); /* group may execute: both go */
		FT_OK(write_as_user(f, how));
		FT_EQ(mode_of(f), 0777);
		FT_OK(ferrite_chmod(fs, f, 06767)); /* the writer is not of group 0 */
		FT_OK(write_as_user(f, how));
		FT_EQ(mode_of(f), 0767);
		FT_OK(ferrite_chown(fs, f, 0, 1000)); /* the writer's group, no execute: */
		FT_OK(ferrite_chmod(fs, f, 06767));   /* set-group-id stays */
		FT_OK(write_as_user(f, how));
		FT_EQ(mode_of(f), 02767);
		FT_OK(ferrite_chown(fs, f, 0, 0));
	}
	/* the owner writing is unprivileged too */
	FT_OK(ferrite_chown(fs, f, 1000, 1000));
	FT_OK(ferrite_chmod(fs, f, 04755));
	FT_OK(write_as_user(f, 0));
	FT_EQ(mode_of(f), 0755);
	/* root writes and truncates: the bits stay */
	FT_OK(ferrite_chmod(fs, f, 06777));
	int fd = FT_OK(ferrite_open(fs, f, O_WRONLY, 0));
	FT_EQ(ferrite_pwrite(fs, fd, "y", 1, 0), 1);
	FT_OK(ferrite_ftruncate(fs, fd, 1));
	FT_OK(ferrite_close(fs, fd));
	FT_EQ(mode_of(f), 06777);
	/* chown, even root's, takes them from a file */
	FT_OK(ferrite_chown(fs, f, 0, 0));
	FT_EQ(mode_of(f), 0777);
	/* a write after a chmod that gave them back is looked at again */
	FT_OK(ferrite_chmod(fs, f, 04777));
	FT_OK(write_as_user(f, 0));
	FT_EQ(mode_of(f), 0777);
	return 0;
}

/* ---- open flags ------------------------------------------------------------ */

static int c_append(void)
{
	struct stat st;
	FT_OK(puts_(P("f"), "abc"));
	int fd = FT_OK(ferrite_open(fs, P("f"), O_WRONLY | O_APPEND, 0));
	FT_EQ(ferrite_lseek(fs, fd, 0, SEEK_SET), 0);
	FT_EQ(ferrite_write(fs, fd, "de", 2), 2);
	FT_EQ(ferrite_lseek(fs, fd, 0, SEEK_CUR), 5);
	/* another writer extends the file: the next append still goes to the end */
	int other = FT_OK(ferrite_open(fs, P("f"), O_WRONLY, 0));
	FT_EQ(ferrite_pwrite(fs, other, "XYZ", 3, 5), 3);
	FT_OK(ferrite_close(fs, other));
	FT_EQ(ferrite_write(fs, fd, "f", 1), 1);
	FT_EQ(ferrite_lseek(fs, fd, 0, SEEK_CUR), 9);
	/* Linux: pwrite on an O_APPEND descriptor appends, ignoring the offset */
	FT_EQ(ferrite_pwrite(fs, fd, "g", 1, 0), 1);
	FT_OK(ferrite_close(fs, fd));
	EXPECT_CONTENT(P("f"), "abcdeXYZfg");
	FT_OK(ferrite_stat(fs, P("f"), &st));
	FT_EQ(st.st_size, 10);
	/* O_APPEND through dup shares the flag */
	fd = FT_OK(ferrite_open(fs, P("f"), O_RDWR | O_APPEND, 0));
	int fd2 = FT_OK(ferrite_dup(fs, fd));
	FT_EQ(ferrite_lseek(fs, fd2, 0, SEEK_SET), 0);
	FT_EQ(ferrite_write(fs, fd2, "h", 1), 1);
	FT_OK(ferrite_close(fs, fd));
	FT_OK(ferrite_close(fs, fd2));
	EXPECT_CONTENT(P("f"), "abcdeXYZfgh");
	return 0;
}

static int c_otrunc(void)
{
	struct stat st;
	FT_OK(puts_(P("f"), "0123456789"));
	int fd = FT_OK(ferrite_open(fs, P("f"), O_WRONLY | O_TRUNC, 0));
	FT_OK(ferrite_fstat(fs, fd, &st));
	FT_EQ(st.st_size, 0);
	FT_EQ(ferrite_write(fs, fd, "ab", 2), 2);
	FT_OK(ferrite_close(fs, fd));
	EXPECT_CONTENT(P("f"), "ab");
	/* Linux truncates even with O_RDONLY | O_TRUNC */
	fd = FT_OK(ferrite_open(fs, P("f"), O_RDONLY | O_TRUNC, 0));
	FT_OK(ferrite_fstat(fs, fd, &st));
	FT_EQ(st.st_size, 0);
	FT_OK(ferrite_close(fs, fd));
	/* a truncated then re-extended file reads zeros, not old data */
	FT_OK(puts_(P("g"), "XXXXXXXXXXXXXXXX"));
	fd = FT_OK(ferrite_open(fs, P("g"), O_RDWR | O_TRUNC, 0));
	FT_OK(ferrite_ftruncate(fs, fd, 16));
	char buf[16];
	FT_EQ(ferrite_pread(fs, fd, buf, 16, 0), 16);
	FT_CHECK(ft_all_zero(buf, 16), "re-extended file must read zeros");
	FT_OK(ferrite_close(fs, fd));
	/* O_CREAT | O_TRUNC on a new file; the mode is applied */
	fd = FT_OK(ferrite_open(fs, P("new"), O_CREAT | O_TRUNC | O_WRONLY, 0640));
	FT_OK(ferrite_close(fs, fd));
	FT_OK(ferrite_stat(fs, P("new"), &st));
	FT_EQ(st.st_mode, S_IFREG | 0640);
	FT_EQ(st.st_size, 0);
	/* O_CREAT on an existing file ignores the mode */
	fd = FT_OK(ferrite_open(fs, P("new"), O_CREAT | O_WRONLY, 0777));
	FT_OK(ferrite_close(fs, fd));
	FT_OK(ferrite_stat(fs, P("new"), &st));
	FT_EQ(st.st_mode, S_IFREG | 0640);
	/* O_CLOEXEC is accepted */
	fd = FT_OK(ferrite_open(fs, P("new"), O_RDONLY | O_CLOEXEC, 0));
	FT_OK(ferrite_close(fs, fd));
	return 0;
}

static int c_odirectory(void)
{
	FT_OK(puts_(P("f"), "x"));
	FT_OK(ferrite_mkdir(fs, P("d"), 0755));
	FT_ERR(ferrite_open(fs, P("f"), O_RDONLY | O_DIRECTORY, 0), ENOTDIR);
	int fd = FT_OK(ferrite_open(fs, P("d"), O_RDONLY | O_DIRECTORY, 0));
	FT_OK(ferrite_close(fs, fd));
	fd = FT_OK(ferrite_open(fs, P("d"), O_RDONLY, 0)); /* a directory opens read-only */
	struct stat st;
	FT_OK(ferrite_fstat(fs, fd, &st));
	FT_CHECK(S_ISDIR(st.st_mode), "fstat of a directory descriptor must say S_IFDIR");
	FT_OK(ferrite_close(fs, fd));
	return 0;
}

/* ---- rename ---------------------------------------------------------------- */

static int c_rename(void)
{
	struct stat a, b, st;
	FT_OK(puts_(P("f"), "F"));
	FT_OK(puts_(P("g"), "G"));
	FT_OK(st_of(P("f"), &a));
	/* replace an existing file; the source inode moves */
	FT_OK(ferrite_rename(fs, P("f"), P("g"), 0));
	FT_ERR(ferrite_stat(fs, P("f"), &st), ENOENT);
	FT_OK(st_of(P("g"), &b));
	FT_EQ(b.st_ino, a.st_ino);
	EXPECT_CONTENT(P("g"), "F");
	/* rename onto itself, and onto another link of the same inode: no-op */
	FT_OK(ferrite_rename(fs, P("g"), P("g"), 0));
	FT_OK(ferrite_link(fs, P("g"), P("h")));
	FT_OK(ferrite_rename(fs, P("g"), P("h"), 0));
	FT_OK(st_of(P("g"), &st));
	FT_OK(st_of(P("h"), &st));
	FT_EQ(st.st_nlink, 2);
	/* across directories: parents' link counts and ".." follow */
	FT_OK(ferrite_mkdir(fs, P("p1"), 0755));
	FT_OK(ferrite_mkdir(fs, P("p2"), 0755));
	FT_OK(ferrite_mkdir(fs, P("p1/d"), 0755));
	FT_OK(puts_(P("p1/d/inner"), "I"));
	FT_OK(ferrite_rename(fs, P("p1/d"), P("p2/d"), 0));
	FT_OK(st_of(P("p1"), &a));
	FT_OK(st_of(P("p2"), &b));
	FT_EQ(a.st_nlink, 2);
	FT_EQ(b.st_nlink, 3);
	FT_OK(ferrite_stat(fs, P("p2/d/.."), &st));
	FT_EQ(st.st_ino, b.st_ino);
	EXPECT_CONTENT(P("p2/d/inner"), "I");
	/* a file across directories */
	FT_OK(ferrite_rename(fs, P("h"), P("p1/h"), 0));
	EXPECT_CONTENT(P("p1/h"), "F");
	/* a symlink is renamed, not its target */
	FT_OK(ferrite_symlink(fs, "g", P("l")));
	FT_OK(ferrite_rename(fs, P("l"), P("l2"), 0));
	FT_OK(st_of(P("l2"), &st));
	FT_CHECK(S_ISLNK(st.st_mode), "renamed symlink must stay a symlink");
	EXPECT_CONTENT(P("g"), "F");
	return 0;
}

static int c_rename_noreplace(void)
{
	struct stat st;
	FT_OK(puts_(P("a"), "A"));
	FT_OK(puts_(P("b"), "B"));
	FT_ERR(ferrite_rename(fs, P("a"), P("b"), RENAME_NOREPLACE), EEXIST);
	EXPECT_CONTENT(P("a"), "A");
	EXPECT_CONTENT(P("b"), "B");
	FT_OK(ferrite_rename(fs, P("a"), P("c"), RENAME_NOREPLACE));
	FT_ERR(ferrite_stat(fs, P("a"), &st), ENOENT);
	EXPECT_CONTENT(P("c"), "A");
	FT_OK(ferrite_mkdir(fs, P("d"), 0755));
	FT_ERR(ferrite_rename(fs, P("c"), P("d"), RENAME_NOREPLACE), EEXIST);
	FT_ERR(ferrite_rename(fs, P("nope"), P("z"), RENAME_NOREPLACE), ENOENT);
	return 0;
}

static int c_rename_exchange(void)
{
	struct stat a, b, st;
	FT_OK(puts_(P("a"), "A"));
	FT_OK(puts_(P("b"), "BB"));
	FT_OK(st_of(P("a"), &a));
	FT_OK(st_of(P("b"), &b));
	FT_OK(ferrite_rename(fs, P("a"), P("b"), RENAME_EXCHANGE));
	EXPECT_CONTENT(P("a"), "BB");
	EXPECT_CONTENT(P("b"), "A");
	FT_OK(st_of(P("a"), &st));
	FT_EQ(st.st_ino, b.st_ino);
	FT_ERR(ferrite_rename(fs, P("a"), P("missing"), RENAME_EXCHANGE), ENOENT);
	FT_ERR(ferrite_rename(fs, P("missing"), P("a"), RENAME_EXCHANGE), ENOENT);
	/* a file and a directory in different parents swap; link counts follow */
	FT_OK(ferrite_mkdir(fs, P("p1"), 0755));
	FT_OK(ferrite_mkdir(fs, P("p2"), 0755));
	FT_OK(ferrite_mkdir(fs, P("p1/dir"), 0755));
	FT_OK(puts_(P("p1/dir/x"), "X"));
	FT_OK(puts_(P("p2/file"), "file"));
	FT_OK(ferrite_rename(fs, P("p1/dir"), P("p2/file"), RENAME_EXCHANGE));
	FT_OK(st_of(P("p1/dir"), &st));
	FT_CHECK(S_ISREG(st.st_mode), "p1/dir must now be the file");
	EXPECT_CONTENT(P("p1/dir"), "file");
	EXPECT_CONTENT(P("p2/file/x"), "X");
	FT_OK(st_of(P("p1"), &a));
	FT_OK(st_of(P("p2"), &b));
	FT_EQ(a.st_nlink, 2);
	FT_EQ(b.st_nlink, 3);
	FT_OK(ferrite_stat(fs, P("p2/file/.."), &st));
	FT_EQ(st.st_ino, b.st_ino);
	/* exchanging with a non-empty directory is allowed */
	FT_OK(ferrite_mkdir(fs, P("full"), 0755));
	FT_OK(puts_(P("full/y"), "Y"));
	FT_OK(ferrite_rename(fs, P("full"), P("p2/file"), RENAME_EXCHANGE));
	EXPECT_CONTENT(P("full/x"), "X");
	EXPECT_CONTENT(P("p2/file/y"), "Y");
	return 0;
}

/* ---- links ----------------------------------------------------------------- */

static int c_hardlink(void)
{
	struct stat a, b;
	FT_OK(puts_(P("f"), "one"));
	FT_OK(ferrite_mkdir(fs, P("d"), 0755));
	FT_OK(ferrite_link(fs, P("f"), P("g")));
	FT_OK(ferrite_link(fs, P("g"), P("d/h")));
	FT_OK(st_of(P("f"), &a));
	FT_OK(st_of(P("d/h"), &b));
	FT_EQ(a.st_nlink, 3);
	FT_EQ(b.st_ino, a.st_ino);
	/* data written through one name is read through the others */
	int fd = FT_OK(ferrite_open(fs, P("g"), O_WRONLY | O_APPEND, 0));
	FT_EQ(ferrite_write(fs, fd, "+two", 4), 4);
	FT_OK(ferrite_close(fs, fd));
	EXPECT_CONTENT(P("f"), "one+two");
	EXPECT_CONTENT(P("d/h"), "one+two");
	/* attributes are shared */
	FT_OK(ferrite_chmod(fs, P("d/h"), 0600));
	FT_OK(st_of(P("f"), &a));
	FT_EQ(a.st_mode & 07777, 0600);
	/* unlinking names lowers the count; the data lives while a name does */
	FT_OK(ferrite_unlink(fs, P("f")));
	FT_OK(st_of(P("g"), &a));
	FT_EQ(a.st_nlink, 2);
	FT_OK(ferrite_unlink(fs, P("g")));
	FT_OK(st_of(P("d/h"), &a));
	FT_EQ(a.st_nlink, 1);
	EXPECT_CONTENT(P("d/h"), "one+two");
	/* a hard link to a symlink links the symlink itself */
	FT_OK(ferrite_symlink(fs, "d/h", P("sl")));
	FT_OK(ferrite_link(fs, P("sl"), P("sl2")));
	FT_OK(st_of(P("sl2"), &a));
	FT_CHECK(S_ISLNK(a.st_mode), "link(2) to a symlink must not follow it");
	FT_EQ(a.st_nlink, 2);
	/* directory link counts: 2 + one per subdirectory */
	FT_OK(ferrite_mkdir(fs, P("n"), 0755));
	FT_OK(st_of(P("n"), &a));
	FT_EQ(a.st_nlink, 2);
	FT_OK(ferrite_mkdir(fs, P("n/s1"), 0755));
	FT_OK(ferrite_mkdir(fs, P("n/s2"), 0755));
	FT_OK(puts_(P("n/file"), "x"));
	FT_OK(st_of(P("n"), &a));
	FT_EQ(a.st_nlink, 4);
	FT_OK(ferrite_rmdir(fs, P("n/s1")));
	FT_OK(st_of(P("n"), &a));
	FT_EQ(a.st_nlink, 3);
	return 0;
}

static int c_unlink_open(void)
{
	struct stat st;
	static char big[4 << 20];
	ft_fill(big, sizeof(big), 7, 0);
	FT_OK(put(P("f"), big, sizeof(big), 0644));
	int fd = FT_OK(ferrite_open(fs, P("f"), O_RDWR, 0));
	uint64_t free_open = ft_free_bytes(fs);
	FT_OK(ferrite_unlink(fs, P("f")));
	FT_ERR(ferrite_stat(fs, P("f"), &st), ENOENT);
	FT_OK(ferrite_fstat(fs, fd, &st));
	FT_EQ(st.st_nlink, 0);
	FT_EQ(st.st_size, (off_t)sizeof(big));
	static char back[4 << 20];
	FT_EQ(ferrite_pread(fs, fd, back, sizeof(back), 0), (ssize_t)sizeof(back));
	FT_CHECK(memcmp(back, big, sizeof(big)) == 0, "unlinked open file must keep its data");
	FT_EQ(ferrite_pwrite(fs, fd, "tail", 4, sizeof(big)), 4);
	FT_EQ(ferrite_pread(fs, fd, back, 4, sizeof(big)), 4);
	FT_CHECK(memcmp(back, "tail", 4) == 0, "write to an unlinked open file must read back");
	/* a new file may take the name meanwhile */
	FT_OK(puts_(P("f"), "new"));
	EXPECT_CONTENT(P("f"), "new");
	FT_OK(ferrite_close(fs, fd));
	uint64_t free_closed = ft_free_bytes(fs);
	/* (the Linux reference shares its tmpfs with other processes) */
	FT_CHECK(ft_is_oracle || ft_is_tier || free_closed >= free_open + sizeof(big) / 2,
		 "closing the last descriptor of an unlinked 4 MiB file must free its space: "
		 "free %" PRIu64 " -> %" PRIu64,
		 free_open, free_closed);
	return 0;
}

static int c_symlink(void)
{
	struct stat st;
	char buf[64];
	FT_OK(ferrite_mkdir(fs, P("d"), 0755));
	FT_OK(puts_(P("d/f"), "target"));
	FT_OK(ferrite_symlink(fs, "d/f", P("l")));
	FT_OK(ferrite_symlink(fs, "../d/f", P("d/up")));
	FT_OK(ferrite_symlink(fs, "d", P("ld")));
	FT_EQ(ferrite_readlink(fs, P("l"), buf, sizeof(buf)), 3);
	FT_CHECK(memcmp(buf, "d/f", 3) == 0, "readlink must return the target");
	/* truncated into a small buffer, no NUL added */
	memset(buf, '#', sizeof(buf));
	FT_EQ(ferrite_readlink(fs, P("l"), buf, 2), 2);
	FT_CHECK(buf[0] == 'd' && buf[1] == '/' && buf[2] == '#',
		 "readlink must fill 2 bytes only");
	FT_OK(ferrite_lstat(fs, P("l"), &st));
	FT_CHECK(S_ISLNK(st.st_mode), "lstat must see a link");
	FT_EQ(st.st_size, 3);
	FT_OK(ferrite_stat(fs, P("l"), &st));
	FT_CHECK(S_ISREG(st.st_mode), "stat must follow the link");
	EXPECT_CONTENT(P("l"), "target");
	EXPECT_CONTENT(P("d/up"), "target"); /* relative to the link's directory */
	EXPECT_CONTENT(P("ld/f"), "target");
	EXPECT_CONTENT(P("ld/up"), "target");
	/* operations that follow, and lchown that does not */
	FT_OK(ferrite_chmod(fs, P("l"), 0600));
	FT_OK(ferrite_stat(fs, P("d/f"), &st));
	FT_EQ(st.st_mode & 07777, 0600);
	FT_OK(ferrite_lchown(fs, P("l"), 42, 43));
	FT_OK(ferrite_lstat(fs, P("l"), &st));
	FT_EQ(st.st_uid, 42);
	FT_OK(ferrite_stat(fs, P("l"), &st));
	FT_EQ(st.st_uid, 0);
	FT_OK(ferrite_chown(fs, P("l"), 44, 45));
	FT_OK(ferrite_stat(fs, P("d/f"), &st));
	FT_EQ(st.st_uid, 44);
	FT_EQ(st.st_gid, 45);
	FT_OK(ferrite_truncate(fs, P("l"), 3));
	EXPECT_CONTENT(P("d/f"), "tar");
	/* unlink removes the link, not the target */
	FT_OK(ferrite_unlink(fs, P("l")));
	EXPECT_CONTENT(P("d/f"), "tar");
	return 0;
}

static int c_root_boundary(void)
{
	/* the root's ".." is the root itself */
	ferrite_dir *d;
	struct ferrite_dirent e;
	struct stat root;
	FT_OK(ferrite_stat(fs, "/", &root));
	FT_OK(ferrite_opendir(fs, "/", &d));
	FT_EQ(ferrite_readdir(d, &e), 1);
	FT_EQ(ferrite_readdir(d, &e), 1);
	FT_CHECK(strcmp(e.name, "..") == 0, "second root entry must be \"..\"");
	FT_EQ(e.ino, root.st_ino);
	FT_OK(ferrite_closedir(d));
	/* an absolute target resolves from the pool root */
	FT_OK(ferrite_mkdir(fs, P("d"), 0755));
	FT_OK(puts_(P("d/f"), "abs"));
	FT_OK(ferrite_symlink(fs, P("d/f"), P("abs")));
	EXPECT_CONTENT(P("abs"), "abs");
	struct stat a, b;
	FT_OK(ferrite_stat(fs, "/..", &a));
	FT_OK(ferrite_stat(fs, "/", &b));
	FT_EQ(a.st_ino, b.st_ino);
	FT_OK(ferrite_stat(fs, "/../..", &a));
	FT_EQ(a.st_ino, b.st_ino);
	/* relative paths are resolved from the root as well */
	FT_OK(ferrite_stat(fs, P("d/f") + 1, &a));
	FT_OK(ferrite_stat(fs, P("d/f"), &b));
	FT_EQ(a.st_ino, b.st_ino);
	return 0;
}

/* ---- data ------------------------------------------------------------------ */

static int c_read_write(void)
{
	char buf[64];
	struct stat st;
	int fd = FT_OK(ferrite_open(fs, P("f"), O_CREAT | O_RDWR, 0644));
	FT_EQ(ferrite_write(fs, fd, "hello", 5), 5);
	FT_EQ(ferrite_read(fs, fd, buf, sizeof(buf)), 0); /* at EOF */
	FT_EQ(ferrite_lseek(fs, fd, 0, SEEK_SET), 0);
	FT_EQ(ferrite_read(fs, fd, buf, 3), 3);
	FT_EQ(ferrite_read(fs, fd, buf + 3, sizeof(buf)), 2); /* short at EOF */
	FT_CHECK(memcmp(buf, "hello", 5) == 0, "read back differs");
	FT_EQ(ferrite_pread(fs, fd, buf, 10, 100), 0); /* beyond EOF */
	/* write past EOF leaves a zero-filled gap */
	FT_EQ(ferrite_pwrite(fs, fd, "end", 3, 10000), 3);
	FT_OK(ferrite_fstat(fs, fd, &st));
	FT_EQ(st.st_size, 10003);
	static char gap[10003];
	FT_EQ(ferrite_pread(fs, fd, gap, sizeof(gap), 0), 10003);
	FT_CHECK(ft_all_zero(gap + 5, 10000 - 5), "gap must read zeros");
	FT_CHECK(memcmp(gap + 10000, "end", 3) == 0, "data after gap differs");
	/* pread/pwrite leave the offset alone */
	FT_EQ(ferrite_lseek(fs, fd, 2, SEEK_SET), 2);
	FT_EQ(ferrite_pwrite(fs, fd, "ZZ", 2, 0), 2);
	FT_EQ(ferrite_lseek(fs, fd, 0, SEEK_CUR), 2);
	FT_EQ(ferrite_lseek(fs, fd, -3, SEEK_END), 10000);
	FT_EQ(ferrite_lseek(fs, fd, 5, SEEK_END), 10008);
	FT_EQ(ferrite_write(fs, fd, "", 0), 0);
	FT_OK(ferrite_fstat(fs, fd, &st));
	FT_EQ(st.st_size, 10003); /* a zero-length write does not extend */
	/* overwrite in the middle of a page boundary */
	static char pat[8192];
	ft_fill(pat, sizeof(pat), 3, 0);
	FT_EQ(ferrite_pwrite(fs, fd, pat, sizeof(pat), 4000), (ssize_t)sizeof(pat));
	static char back[8192];
	FT_EQ(ferrite_pread(fs, fd, back, sizeof(back), 4000), (ssize_t)sizeof(back));
	FT_CHECK(memcmp(back, pat, sizeof(pat)) == 0, "overwrite across pages differs");
	FT_OK(ferrite_fsync(fs, fd));
	FT_OK(ferrite_fdatasync(fs, fd));
	FT_OK(ferrite_close(fs, fd));
	return 0;
}

static int c_truncate(void)
{
	struct stat st;
	char buf[32];
	FT_OK(puts_(P("f"), "0123456789"));
	FT_OK(ferrite_truncate(fs, P("f"), 4));
	EXPECT_CONTENT(P("f"), "0123");
	FT_OK(ferrite_truncate(fs, P("f"), 8));
	FT_OK(ferrite_stat(fs, P("f"), &st));
	FT_EQ(st.st_size, 8);
	FT_EQ(get(P("f"), buf, sizeof(buf)), 8);
	FT_CHECK(memcmp(buf, "0123\0\0\0\0", 8) == 0, "extension must read zeros, not old bytes");
	/* shrink across pages and grow back: the cut pages come back as zeros */
	static char big[3 * 4096];
	ft_fill(big, sizeof(big), 11, 0);
	FT_OK(put(P("g"), big, sizeof(big), 0644));
	int fd = FT_OK(ferrite_open(fs, P("g"), O_RDWR, 0));
	FT_OK(ferrite_ftruncate(fs, fd, 5000));
	FT_OK(ferrite_ftruncate(fs, fd, sizeof(big)));
	static char back[3 * 4096];
	FT_EQ(ferrite_pread(fs, fd, back, sizeof(back), 0), (ssize_t)sizeof(back));
	FT_CHECK(memcmp(back, big, 5000) == 0, "bytes below the cut must survive");
	FT_CHECK(ft_all_zero(back + 5000, sizeof(back) - 5000), "bytes above the cut must be zero");
	/* truncate does not move the offset */
	FT_EQ(ferrite_lseek(fs, fd, 100, SEEK_SET), 100);
	FT_OK(ferrite_ftruncate(fs, fd, 10));
	FT_EQ(ferrite_lseek(fs, fd, 0, SEEK_CUR), 100);
	FT_EQ(ferrite_write(fs, fd, "x", 1), 1);
	FT_OK(ferrite_fstat(fs, fd, &st));
	FT_EQ(st.st_size, 101);
	FT_OK(ferrite_ftruncate(fs, fd, 0));
	FT_OK(ferrite_fstat(fs, fd, &st));
	FT_EQ(st.st_size, 0);
	FT_OK(ferrite_close(fs, fd));
	return 0;
}

static int c_iovec(void)
{
	char a[3] = "abc", b[5] = "defgh", c[1] = "i";
	struct iovec w[4] = {{a, 3}, {NULL, 0}, {b, 5}, {c, 1}};
	int fd = FT_OK(ferrite_open(fs, P("f"), O_CREAT | O_RDWR, 0644));
	FT_EQ(ferrite_writev(fs, fd, w, 4), 9);
	FT_EQ(ferrite_lseek(fs, fd, 0, SEEK_CUR), 9);
	FT_EQ(ferrite_writev(fs, fd, w, 0), 0);
	char x[2], y[4], z[10];
	struct iovec r[3] = {{x, 2}, {y, 4}, {z, 10}};
	FT_EQ(ferrite_lseek(fs, fd, 0, SEEK_SET), 0);
	FT_EQ(ferrite_readv(fs, fd, r, 3), 9);
	FT_CHECK(memcmp(x, "ab", 2) == 0 && memcmp(y, "cdef", 4) == 0 && memcmp(z, "ghi", 3) == 0,
		 "readv scattered wrongly");
	FT_EQ(ferrite_lseek(fs, fd, 0, SEEK_CUR), 9);
	/* positioned variants do not move the offset */
	struct iovec pw[2] = {{"XY", 2}, {"Z", 1}};
	FT_EQ(ferrite_pwritev(fs, fd, pw, 2, 1), 3);
	FT_EQ(ferrite_lseek(fs, fd, 0, SEEK_CUR), 9);
	memset(x, 0, 2);
	memset(y, 0, 4);
	FT_EQ(ferrite_preadv(fs, fd, r, 2, 0), 6);
	FT_CHECK(memcmp(x, "aX", 2) == 0 && memcmp(y, "YZef", 4) == 0, "preadv result wrong");
	FT_EQ(ferrite_preadv(fs, fd, r, 3, 7), 2);
	FT_CHECK(memcmp(x, "hi", 2) == 0, "preadv near EOF wrong");
	/* pwritev past EOF extends with a zero gap */
	FT_EQ(ferrite_pwritev(fs, fd, pw, 2, 20), 3);
	struct stat st;
	FT_OK(ferrite_fstat(fs, fd, &st));
	FT_EQ(st.st_size, 23);
	FT_OK(ferrite_close(fs, fd));
	char buf[64];
	FT_EQ(get(P("f"), buf, sizeof(buf)), 23);
	FT_CHECK(memcmp(buf, "aXYZefghi\0\0\0\0\0\0\0\0\0\0\0XYZ", 23) == 0, "file content wrong");
	return 0;
}

static int c_dup(void)
{
	char buf[8];
	FT_OK(puts_(P("f"), "0123456789"));
	int fd = FT_OK(ferrite_open(fs, P("f"), O_RDWR, 0));
	int fd2 = FT_OK(ferrite_dup(fs, fd));
	FT_CHECK(fd2 != fd, "dup must return a new descriptor");
	FT_EQ(ferrite_read(fs, fd, buf, 3), 3);
	FT_EQ(ferrite_lseek(fs, fd2, 0, SEEK_CUR), 3);
	FT_EQ(ferrite_read(fs, fd2, buf, 2), 2);
	FT_CHECK(memcmp(buf, "34", 2) == 0, "dup must share the offset");
	FT_EQ(ferrite_write(fs, fd, "ab", 2), 2);
	FT_EQ(ferrite_lseek(fs, fd2, 0, SEEK_CUR), 7);
	FT_OK(ferrite_close(fs, fd));
	FT_EQ(ferrite_read(fs, fd2, buf, 8), 3);
	FT_CHECK(memcmp(buf, "789", 3) == 0, "the dup must outlive the original");
	FT_OK(ferrite_close(fs, fd2));
	EXPECT_CONTENT(P("f"), "01234ab789");
	/* two independent opens do not share the offset */
	fd = FT_OK(ferrite_open(fs, P("f"), O_RDONLY, 0));
	fd2 = FT_OK(ferrite_open(fs, P("f"), O_RDONLY, 0));
	FT_EQ(ferrite_read(fs, fd, buf, 4), 4);
	FT_EQ(ferrite_lseek(fs, fd2, 0, SEEK_CUR), 0);
	FT_OK(ferrite_close(fs, fd));
	FT_OK(ferrite_close(fs, fd2));
	return 0;
}

#define MiB (1024 * 1024)

static int c_seek_data_hole(void)
{
	/* data at [0, 4K) and [8M, 8M+4K), size 16M; the engine may report data at
	 * up to 2 MiB granularity, never less than what was written */
	static char page[4096];
	ft_fill(page, sizeof(page), 5, 0);
	int fd = FT_OK(ferrite_open(fs, P("sparse"), O_CREAT | O_RDWR, 0644));
	FT_EQ(ferrite_pwrite(fs, fd, page, 4096, 0), 4096);
	FT_EQ(ferrite_pwrite(fs, fd, page, 4096, 8 * MiB), 4096);
	FT_OK(ferrite_ftruncate(fs, fd, 16 * MiB));
	FT_EQ(ferrite_lseek(fs, fd, 0, SEEK_DATA), 0);
	FT_EQ(ferrite_lseek(fs, fd, 100, SEEK_DATA), 100);
	off_t h = FT_OK(ferrite_lseek(fs, fd, 0, SEEK_HOLE));
	FT_CHECK(h >= 4096 && h <= 2 * MiB, "SEEK_HOLE(0) = %lld, expected in [4096, 2 MiB]",
		 (long long)h);
	off_t d = FT_OK(ferrite_lseek(fs, fd, 4 * MiB, SEEK_DATA));
	FT_CHECK(d >= 6 * MiB && d <= 8 * MiB, "SEEK_DATA(4M) = %lld, expected in [6M, 8M]",
		 (long long)d);
	h = FT_OK(ferrite_lseek(fs, fd, 8 * MiB, SEEK_HOLE));
	FT_CHECK(h >= 8 * MiB + 4096 && h <= 10 * MiB,
		 "SEEK_HOLE(8M) = %lld, expected in [8M+4K, 10M]", (long long)h);
	FT_ERR(ferrite_lseek(fs, fd, 12 * MiB, SEEK_DATA), ENXIO); /* only a hole to EOF */
	FT_EQ(ferrite_lseek(fs, fd, 12 * MiB, SEEK_HOLE), 12 * MiB);
	FT_ERR(ferrite_lseek(fs, fd, 16 * MiB, SEEK_DATA), ENXIO); /* at and beyond EOF */
	FT_ERR(ferrite_lseek(fs, fd, 16 * MiB, SEEK_HOLE), ENXIO);
	FT_ERR(ferrite_lseek(fs, fd, 20 * MiB, SEEK_DATA), ENXIO);
	FT_ERR(ferrite_lseek(fs, fd, 20 * MiB, SEEK_HOLE), ENXIO);
	FT_EQ(ferrite_lseek(fs, fd, 16 * MiB - 1, SEEK_HOLE), 16 * MiB - 1);
	FT_OK(ferrite_close(fs, fd));
	/* a dense file is one data region; the virtual hole is at EOF */
	FT_OK(put(P("dense"), page, 3000, 0644));
	fd = FT_OK(ferrite_open(fs, P("dense"), O_RDONLY, 0));
	FT_EQ(ferrite_lseek(fs, fd, 0, SEEK_DATA), 0);
	FT_EQ(ferrite_lseek(fs, fd, 0, SEEK_HOLE), 3000);
	FT_EQ(ferrite_lseek(fs, fd, 1000, SEEK_HOLE), 3000);
	FT_EQ(ferrite_lseek(fs, fd, 2999, SEEK_DATA), 2999);
	FT_ERR(ferrite_lseek(fs, fd, 3000, SEEK_DATA), ENXIO);
	FT_ERR(ferrite_lseek(fs, fd, 3000, SEEK_HOLE), ENXIO);
	FT_OK(ferrite_close(fs, fd));
	/* an empty file has neither */
	fd = FT_OK(ferrite_open(fs, P("empty"), O_CREAT | O_RDONLY, 0644));
	FT_ERR(ferrite_lseek(fs, fd, 0, SEEK_DATA), ENXIO);
	FT_ERR(ferrite_lseek(fs, fd, 0, SEEK_HOLE), ENXIO);
	FT_OK(ferrite_close(fs, fd));
	return 0;
}

static int c_fallocate(void)
{
	struct stat st;
	static char buf[3 * 4096], back[3 * 4096];
	int fd = FT_OK(ferrite_open(fs, P("f"), O_CREAT | O_RDWR, 0644));
	/* mode 0 extends the size and reads zeros */
	FT_OK(ferrite_fallocate(fs, fd, 0, 0, 1 * MiB));
	FT_OK(ferrite_fstat(fs, fd, &st));
	FT_EQ(st.st_size, 1 * MiB);
	FT_EQ(ferrite_pread(fs, fd, back, sizeof(back), 1 * MiB - sizeof(back)),
	      (ssize_t)sizeof(back));
	FT_CHECK(ft_all_zero(back, sizeof(back)), "fallocated range must read zeros");
	/* KEEP_SIZE reserves past EOF without changing the size */
	FT_OK(ferrite_fallocate(fs, fd, FALLOC_FL_KEEP_SIZE, 1 * MiB, 1 * MiB));
	FT_OK(ferrite_fstat(fs, fd, &st));
	FT_EQ(st.st_size, 1 * MiB);
	/* mode 0 inside the file changes nothing; past EOF grows to offset+len */
	FT_OK(ferrite_fallocate(fs, fd, 0, 4096, 4096));
	FT_OK(ferrite_fstat(fs, fd, &st));
	FT_EQ(st.st_size, 1 * MiB);
	FT_OK(ferrite_fallocate(fs, fd, 0, 1 * MiB + 10, 100));
	FT_OK(ferrite_fstat(fs, fd, &st));
	FT_EQ(st.st_size, 1 * MiB + 110);
	FT_OK(ferrite_ftruncate(fs, fd, 0));
	/* PUNCH_HOLE|KEEP_SIZE zeroes the range (also a partial page) and keeps the size */
	ft_fill(buf, sizeof(buf), 9, 0);
	FT_EQ(ferrite_pwrite(fs, fd, buf, sizeof(buf), 0), (ssize_t)sizeof(buf));
	FT_OK(ferrite_fallocate(fs, fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 4096, 4096));
	FT_OK(ferrite_fallocate(fs, fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 100, 50));
	FT_OK(ferrite_fstat(fs, fd, &st));
	FT_EQ(st.st_size, (off_t)sizeof(buf));
	memcpy(back, buf, sizeof(buf));
	memset(back + 4096, 0, 4096);
	memset(back + 100, 0, 50);
	static char got[3 * 4096];
	FT_EQ(ferrite_pread(fs, fd, got, sizeof(got), 0), (ssize_t)sizeof(got));
	for (size_t i = 0; i < sizeof(got); i++)
		FT_CHECK(got[i] == back[i], "after punch: byte %zu is %d, expected %d", i, got[i],
			 back[i]);
	/* punching past EOF does not grow the file */
	FT_OK(ferrite_fallocate(fs, fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 8192, 1 * MiB));
	FT_OK(ferrite_fstat(fs, fd, &st));
	FT_EQ(st.st_size, (off_t)sizeof(buf));
	FT_EQ(ferrite_pread(fs, fd, got, 4096, 8192), 4096);
	FT_CHECK(ft_all_zero(got, 4096), "punched tail must read zeros");
	/* modes outside the contract */
	FT_ERR(ferrite_fallocate(fs, fd, FALLOC_FL_PUNCH_HOLE, 0, 4096), EOPNOTSUPP);
	FT_ERR(ferrite_fallocate(fs, fd, 0x100, 0, 4096), EOPNOTSUPP);
	FT_OK(ferrite_close(fs, fd));
	return 0;
}

/* ---- timestamps ------------------------------------------------------------ */

static int c_timestamps(void)
{
	struct stat st, st2;
	FT_OK(puts_(P("f"), "x"));
	struct timespec t[2] = {{1234567890, 123456789}, {1500000000, 987654321}};
	FT_OK(ferrite_utimens(fs, P("f"), t, 0));
	FT_OK(ferrite_stat(fs, P("f"), &st));
	FT_EQ(st.st_atim.tv_sec, 1234567890);
	FT_EQ(st.st_atim.tv_nsec, 123456789);
	FT_EQ(st.st_mtim.tv_sec, 1500000000);
	FT_EQ(st.st_mtim.tv_nsec, 987654321);
	/* UTIME_OMIT keeps a field, UTIME_NOW sets it to now */
	struct timespec t2[2] = {{0, UTIME_OMIT}, {7, 1}};
	FT_OK(ferrite_utimens(fs, P("f"), t2, 0));
	FT_OK(ferrite_stat(fs, P("f"), &st));
	FT_EQ(st.st_atim.tv_nsec, 123456789);
	FT_EQ(st.st_mtim.tv_sec, 7);
	FT_EQ(st.st_mtim.tv_nsec, 1);
	struct timespec t3[2] = {{0, UTIME_NOW}, {0, UTIME_OMIT}};
	FT_OK(ferrite_utimens(fs, P("f"), t3, 0));
	FT_OK(ferrite_stat(fs, P("f"), &st));
	FT_CHECK(st.st_atim.tv_sec > 1600000000, "UTIME_NOW must set the current time, got %lld",
		 (long long)st.st_atim.tv_sec);
	FT_EQ(st.st_mtim.tv_sec, 7);
	/* futimens, and AT_SYMLINK_NOFOLLOW sets the link's own times */
	int fd = FT_OK(ferrite_open(fs, P("f"), O_RDONLY, 0));
	struct timespec t4[2] = {{11, 999999999}, {12, 0}};
	FT_OK(ferrite_futimens(fs, fd, t4));
	FT_OK(ferrite_close(fs, fd));
	FT_OK(ferrite_stat(fs, P("f"), &st));
	FT_EQ(st.st_atim.tv_nsec, 999999999);
	FT_EQ(st.st_mtim.tv_sec, 12);
	FT_OK(ferrite_symlink(fs, "f", P("l")));
	struct timespec t5[2] = {{21, 5}, {22, 6}};
	FT_OK(ferrite_utimens(fs, P("l"), t5, AT_SYMLINK_NOFOLLOW));
	FT_OK(ferrite_lstat(fs, P("l"), &st));
	FT_EQ(st.st_mtim.tv_sec, 22);
	FT_EQ(st.st_mtim.tv_nsec, 6);
	FT_OK(ferrite_stat(fs, P("l"), &st));
	FT_EQ(st.st_mtim.tv_sec, 12);
	/* negative (pre-1970) times are kept too */
	struct timespec t6[2] = {{-100, 5}, {-1, 999999999}};
	FT_OK(ferrite_utimens(fs, P("f"), t6, 0));
	FT_OK(ferrite_stat(fs, P("f"), &st2));
	FT_EQ(st2.st_atim.tv_sec, -100);
	FT_EQ(st2.st_mtim.tv_sec, -1);
	FT_EQ(st2.st_mtim.tv_nsec, 999999999);
	return 0;
}

static int c_times_change(void)
{
	struct stat s0, s1;
	struct timespec old[2] = {{1000000000, 5}, {1000000000, 5}};
	FT_OK(puts_(P("f"), "x"));
	FT_OK(ferrite_mkdir(fs, P("d"), 0755));
	/* write: mtime and ctime move */
	FT_OK(ferrite_utimens(fs, P("f"), old, 0));
	FT_OK(ferrite_stat(fs, P("f"), &s0));
	wait_clock_past(s0.st_ctim);
	int fd = FT_OK(ferrite_open(fs, P("f"), O_WRONLY, 0));
	FT_EQ(ferrite_write(fs, fd, "y", 1), 1);
	FT_OK(ferrite_fstat(fs, fd, &s1));
	FT_CHECK(ts_cmp(s1.st_mtim, s0.st_mtim) > 0, "write must advance mtime");
	FT_CHECK(ts_cmp(s1.st_ctim, s0.st_ctim) > 0, "write must advance ctime");
	/* truncate: mtime and ctime move */
	s0 = s1;
	wait_clock_past(s0.st_ctim);
	FT_OK(ferrite_ftruncate(fs, fd, 0));
	FT_OK(ferrite_fstat(fs, fd, &s1));
	FT_CHECK(ts_cmp(s1.st_mtim, s0.st_mtim) > 0, "truncate must advance mtime");
	FT_CHECK(ts_cmp(s1.st_ctim, s0.st_ctim) > 0, "truncate must advance ctime");
	FT_OK(ferrite_close(fs, fd));
	/* chmod / chown: ctime moves, mtime does not */
	s0 = s1;
	wait_clock_past(s0.st_ctim);
	FT_OK(ferrite_chmod(fs, P("f"), 0600));
	FT_OK(ferrite_stat(fs, P("f"), &s1));
	FT_CHECK(ts_cmp(s1.st_ctim, s0.st_ctim) > 0, "chmod must advance ctime");
	FT_CHECK(ts_cmp(s1.st_mtim, s0.st_mtim) == 0, "chmod must not change mtime");
	s0 = s1;
	wait_clock_past(s0.st_ctim);
	FT_OK(ferrite_chown(fs, P("f"), 5, 5));
	FT_OK(ferrite_stat(fs, P("f"), &s1));
	FT_CHECK(ts_cmp(s1.st_ctim, s0.st_ctim) > 0, "chown must advance ctime");
	/* link: the inode's ctime moves */
	s0 = s1;
	wait_clock_past(s0.st_ctim);
	FT_OK(ferrite_link(fs, P("f"), P("f2")));
	FT_OK(ferrite_stat(fs, P("f"), &s1));
	FT_CHECK(ts_cmp(s1.st_ctim, s0.st_ctim) > 0, "link must advance ctime");
	/* reading does not change mtime or ctime */
	s0 = s1;
	wait_clock_past(s0.st_ctim);
	char b[4];
	FT_OK(get(P("f"), b, sizeof(b)));
	FT_OK(ferrite_stat(fs, P("f"), &s1));
	FT_CHECK(ts_cmp(s1.st_mtim, s0.st_mtim) == 0 && ts_cmp(s1.st_ctim, s0.st_ctim) == 0,
		 "read must not change mtime/ctime");
	/* creating and removing entries moves the directory's mtime and ctime */
	FT_OK(ferrite_utimens(fs, P("d"), old, 0));
	FT_OK(ferrite_stat(fs, P("d"), &s0));
	wait_clock_past(s0.st_ctim);
	FT_OK(puts_(P("d/new"), "n"));
	FT_OK(ferrite_stat(fs, P("d"), &s1));
	FT_CHECK(ts_cmp(s1.st_mtim, s0.st_mtim) > 0, "create must advance the dir mtime");
	FT_CHECK(ts_cmp(s1.st_ctim, s0.st_ctim) > 0, "create must advance the dir ctime");
	FT_OK(ferrite_utimens(fs, P("d"), old, 0));
	FT_OK(ferrite_stat(fs, P("d"), &s0));
	wait_clock_past(s0.st_ctim);
	FT_OK(ferrite_unlink(fs, P("d/new")));
	FT_OK(ferrite_stat(fs, P("d"), &s1));
	FT_CHECK(ts_cmp(s1.st_mtim, s0.st_mtim) > 0, "unlink must advance the dir mtime");
	FT_OK(ferrite_utimens(fs, P("d"), old, 0));
	FT_OK(ferrite_stat(fs, P("d"), &s0));
	wait_clock_past(s0.st_ctim);
	FT_OK(ferrite_rename(fs, P("f2"), P("d/moved"), 0));
	FT_OK(ferrite_stat(fs, P("d"), &s1));
	FT_CHECK(ts_cmp(s1.st_mtim, s0.st_mtim) > 0, "rename must advance the target dir mtime");
	return 0;
}

/* ---- directories ----------------------------------------------------------- */

#define RD_MAX 4096

struct rd_seen {
	char name[RD_MAX][64];
	int count[RD_MAX];
	int n;
};

static int rd_note(struct rd_seen *s, const char *name)
{
	for (int i = 0; i < s->n; i++)
		if (strcmp(s->name[i], name) == 0)
			return ++s->count[i];
	if (s->n == RD_MAX)
		return -1;
	snprintf(s->name[s->n], sizeof(s->name[0]), "%.63s",
		 name); /* the names of this test are short */
	s->count[s->n++] = 1;
	return 1;
}

static int rd_count(const struct rd_seen *s, const char *name)
{
	for (int i = 0; i < s->n; i++)
		if (strcmp(s->name[i], name) == 0)
			return s->count[i];
	return 0;
}

static int c_readdir(void)
{
	static struct rd_seen seen;
	struct ferrite_dirent e;
	struct stat st, self, parent;
	ferrite_dir *d;
	int r;
	memset(&seen, 0, sizeof(seen));
	for (int i = 0; i < 100; i++)
		FT_OK(puts_(P("file%03d", i), "x"));
	for (int i = 0; i < 20; i++)
		FT_OK(ferrite_mkdir(fs, P("dir%02d", i), 0755));
	for (int i = 0; i < 10; i++)
		FT_OK(ferrite_symlink(fs, "file000", P("link%d", i)));
	FT_OK(ferrite_stat(fs, P("."), &self));
	FT_OK(ferrite_stat(fs, "/", &parent));
	FT_OK(ferrite_opendir(fs, P("."), &d));
	int idx = 0;
	while ((r = ferrite_readdir(d, &e)) == 1) {
		if (idx == 0)
			FT_CHECK(strcmp(e.name, ".") == 0, "first entry must be \".\", got \"%s\"",
				 e.name);
		if (idx == 1)
			FT_CHECK(strcmp(e.name, "..") == 0,
				 "second entry must be \"..\", got \"%s\"", e.name);
		idx++;
		FT_CHECK(rd_note(&seen, e.name) == 1, "entry \"%s\" returned twice", e.name);
		if (strcmp(e.name, ".") == 0) {
			FT_EQ(e.ino, self.st_ino);
			FT_EQ(e.type, DT_DIR);
		} else if (strcmp(e.name, "..") == 0) {
			FT_EQ(e.ino, parent.st_ino);
			FT_EQ(e.type, DT_DIR);
		} else {
			FT_OK(ferrite_lstat(fs, P("%s", e.name), &st));
			FT_EQ(e.ino, st.st_ino);
			unsigned char want = S_ISREG(st.st_mode)   ? DT_REG
					     : S_ISDIR(st.st_mode) ? DT_DIR
					     : S_ISLNK(st.st_mode) ? DT_LNK
								   : DT_UNKNOWN;
			FT_CHECK(e.type == want, "d_type of %s is %d, expected %d", e.name, e.type,
				 want);
		}
	}
	FT_EQ(r, 0);
	FT_EQ(ferrite_readdir(d, &e), 0); /* stays at the end */
	FT_OK(ferrite_closedir(d));
	FT_EQ(seen.n, 2 + 100 + 20 + 10);
	/* an empty directory has exactly "." and ".." */
	FT_OK(ferrite_mkdir(fs, P("empty"), 0755));
	FT_EQ(ft_count_entries(fs, P("empty")), 2);
	return 0;
}

static int c_readdir_seek(void)
{
	enum { N = 300 };
	static char names[N + 2][256];
	static int64_t offs[N + 2];
	struct ferrite_dirent e;
	ferrite_dir *d;
	int r, n = 0;
	for (int i = 0; i < N; i++)
		FT_OK(puts_(P("entry-%d", i), ""));
	FT_OK(ferrite_opendir(fs, P("."), &d));
	while ((r = ferrite_readdir(d, &e)) == 1 && n < N + 2) {
		snprintf(names[n], sizeof(names[0]), "%s", e.name);
		offs[n++] = e.off;
	}
	FT_EQ(r, 0);
	FT_EQ(n, N + 2);
	/* telldir after k entries, then seekdir resumes at entry k */
	for (int k = 0; k <= n; k += 37) {
		FT_OK(ferrite_rewinddir(d));
		for (int i = 0; i < k; i++)
			FT_EQ(ferrite_readdir(d, &e), 1);
		int64_t cookie = ferrite_telldir(d);
		FT_CHECK(cookie >= 0, "telldir failed: %s", ft_errname(cookie));
		while (ferrite_readdir(d, &e) == 1)
			;
		FT_OK(ferrite_seekdir(d, cookie));
		r = ferrite_readdir(d, &e);
		if (k == n) {
			FT_EQ(r, 0);
		} else {
			FT_EQ(r, 1);
			FT_CHECK(strcmp(e.name, names[k]) == 0,
				 "seekdir(telldir after %d) gave \"%s\", expected \"%s\"", k,
				 e.name, names[k]);
		}
	}
	/* the off field of entry k is the cookie of entry k+1 */
	for (int k = 0; k + 1 < n; k += 29) {
		FT_OK(ferrite_seekdir(d, offs[k]));
		FT_EQ(ferrite_readdir(d, &e), 1);
		FT_CHECK(strcmp(e.name, names[k + 1]) == 0,
			 "seekdir(off of entry %d) gave \"%s\", expected \"%s\"", k, e.name,
			 names[k + 1]);
	}
	/* rewinddir starts over with "." */
	FT_OK(ferrite_rewinddir(d));
	FT_EQ(ferrite_readdir(d, &e), 1);
	FT_CHECK(strcmp(e.name, ".") == 0, "after rewinddir: \"%s\"", e.name);
	FT_OK(ferrite_closedir(d));
	return 0;
}

static int c_readdir_mutation(void)
{
	/* 600 entries stay for the whole iteration; 600 others are removed and
	 * 900 new ones are added while reading. Every stable entry must be seen
	 * exactly once, no entry twice. */
	static struct rd_seen seen;
	struct ferrite_dirent e;
	ferrite_dir *d;
	int r;
	memset(&seen, 0, sizeof(seen));
	for (int i = 0; i < 600; i++) {
		FT_OK(puts_(P("keep%04d", i), ""));
		FT_OK(puts_(P("churn%04d", i), ""));
	}
	FT_OK(ferrite_opendir(fs, P("."), &d));
	int read = 0, removed = 0, added = 0;
	while ((r = ferrite_readdir(d, &e)) == 1) {
		FT_CHECK(rd_note(&seen, e.name) == 1, "entry \"%s\" returned twice", e.name);
		if (++read % 3 == 0) {
			if (removed < 600) {
				/* remove from both ends of the churn set */
				int v = removed % 2 ? 599 - removed / 2 : removed / 2;
				FT_OK(ferrite_unlink(fs, P("churn%04d", v)));
				removed++;
			}
			for (int k = 0; k < 2 && added < 900; k++, added++)
				FT_OK(puts_(P("add%04d", added), ""));
		}
	}
	FT_EQ(r, 0);
	FT_OK(ferrite_closedir(d));
	for (int i = 0; i < 600; i++) {
		char k[16];
		snprintf(k, sizeof(k), "keep%04d", i);
		FT_CHECK(rd_count(&seen, k) == 1, "stable entry %s seen %d times, expected once", k,
			 rd_count(&seen, k));
	}
	FT_EQ(rd_count(&seen, "."), 1);
	FT_EQ(rd_count(&seen, ".."), 1);
	/* and a fresh listing is exact */
	memset(&seen, 0, sizeof(seen));
	FT_OK(ferrite_opendir(fs, P("."), &d));
	while ((r = ferrite_readdir(d, &e)) == 1)
		FT_CHECK(rd_note(&seen, e.name) == 1, "entry \"%s\" returned twice", e.name);
	FT_EQ(r, 0);
	FT_OK(ferrite_closedir(d));
	FT_EQ(seen.n, 2 + 600 + (600 - removed) + added);
	return 0;
}

/* ---- statvfs --------------------------------------------------------------- */

static int c_statvfs(void)
{
	struct statvfs sv;
	FT_OK(ferrite_statvfs(fs, &sv));
	FT_CHECK(sv.f_bsize > 0 && sv.f_frsize > 0, "f_bsize %lu, f_frsize %lu", sv.f_bsize,
		 sv.f_frsize);
	FT_CHECK(sv.f_blocks > 0 && sv.f_bfree <= sv.f_blocks && sv.f_bavail <= sv.f_bfree,
		 "blocks %lu, bfree %lu, bavail %lu", (unsigned long)sv.f_blocks,
		 (unsigned long)sv.f_bfree, (unsigned long)sv.f_bavail);
	FT_CHECK(sv.f_ffree <= sv.f_files, "f_files %lu f_ffree %lu", (unsigned long)sv.f_files,
		 (unsigned long)sv.f_ffree);
	FT_EQ(sv.f_namemax, 255);
	/* 16 MiB of data lowers free space by about that much, deleting returns it */
	enum { SZ = 16 * MiB };
	uint64_t before = ft_free_bytes(fs);
	static char chunk[1 * MiB];
	ft_fill(chunk, sizeof(chunk), 1, 0);
	int fd = FT_OK(ferrite_open(fs, P("big"), O_CREAT | O_WRONLY, 0644));
	for (int i = 0; i < SZ / MiB; i++)
		FT_EQ(ferrite_write(fs, fd, chunk, sizeof(chunk)), (ssize_t)sizeof(chunk));
	FT_OK(ferrite_close(fs, fd));
	uint64_t during = ft_free_bytes(fs);
	/* (the Linux reference shares its tmpfs with other processes) */
	FT_CHECK(ft_is_oracle || ft_is_tier || during + SZ <= before + 1 * MiB,
		 "free space must drop by >= 15 MiB after writing 16 MiB: %" PRIu64 " -> %" PRIu64,
		 before, during);
	FT_OK(ferrite_unlink(fs, P("big")));
	uint64_t after = ft_free_bytes(fs);
	FT_CHECK(ft_is_oracle || ft_is_tier || after + 1 * MiB >= before,
		 "free space must come back after delete: before %" PRIu64 ", after %" PRIu64,
		 before, after);
	/* inode counts move with creates */
	FT_OK(ferrite_statvfs(fs, &sv));
	uint64_t ffree = sv.f_ffree;
	for (int i = 0; i < 10; i++)
		FT_OK(puts_(P("n%d", i), ""));
	FT_OK(ferrite_statvfs(fs, &sv));
	FT_CHECK(ft_is_oracle || ft_is_tier || sv.f_ffree < ffree,
		 "f_ffree must drop after creating 10 files (%" PRIu64 " -> %lu)", ffree,
		 (unsigned long)sv.f_ffree);
	return 0;
}

static int c_root(void)
{
	struct stat st;
	FT_OK(ferrite_stat(fs, "/", &st));
	FT_CHECK(S_ISDIR(st.st_mode), "root must be a directory");
	struct stat a;
	FT_OK(ferrite_stat(fs, "//", &a));
	FT_EQ(a.st_ino, st.st_ino);
	FT_OK(ferrite_stat(fs, "/./.", &a));
	FT_EQ(a.st_ino, st.st_ino);
	FT_OK(puts_(P("f"), "x"));
	char p[512];
	snprintf(p, sizeof(p), "//%s///f", ft_case_name);
	EXPECT_CONTENT(p, "x");
	snprintf(p, sizeof(p), "/%s/./f", ft_case_name);
	EXPECT_CONTENT(p, "x");
	FT_OK(ferrite_mkdir(fs, P("sub"), 0755));
	snprintf(p, sizeof(p), "/%s/sub/../f", ft_case_name);
	EXPECT_CONTENT(p, "x");
	FT_ERR(ferrite_unlink(fs, "/"), EISDIR);
	FT_ERR(ferrite_rmdir(fs, P("sub/..")), ENOTEMPTY);
	return 0;
}

static const struct ft_case cases[] = {
    {"enoent", c_enoent, 0},
    {"eexist", c_eexist, 0},
    {"enotdir_component", c_enotdir_component, 0},
    {"enotdir_trailing_slash", c_enotdir_trailing_slash, 0},
    {"eisdir", c_eisdir, 0},
    {"enotempty", c_enotempty, 0},
    {"enametoolong_component", c_enametoolong_component, 0},
    {"enametoolong_path", c_enametoolong_path, 0},
    {"eloop", c_eloop, 0},
    {"ebadf", c_ebadf, 0},
    {"einval", c_einval, 0},
    {"efbig", c_efbig, FT_ORACLE_SKIP},
    {"eacces", c_eacces, 0},
    {"owner_rights", c_owner_rights, 0},
    {"append", c_append, 0},
    {"otrunc", c_otrunc, 0},
    {"odirectory", c_odirectory, 0},
    {"rename", c_rename, 0},
    {"rename_noreplace", c_rename_noreplace, 0},
    {"rename_exchange", c_rename_exchange, 0},
    {"hardlink", c_hardlink, 0},
    {"unlink_open", c_unlink_open, 0},
    {"symlink", c_symlink, 0},
    {"root_boundary", c_root_boundary, FT_ORACLE_SKIP},
    {"read_write", c_read_write, 0},
    {"truncate", c_truncate, 0},
    {"iovec", c_iovec, 0},
    {"dup", c_dup, 0},
    {"seek_data_hole", c_seek_data_hole, FT_TIER_SKIP}, /* 2 MiB hole granularity */
    {"fallocate", c_fallocate, 0},
    {"timestamps", c_timestamps, 0},
    {"times_change", c_times_change, 0},
    {"readdir", c_readdir, 0},
    {"readdir_seek", c_readdir_seek, 0},
    {"readdir_mutation", c_readdir_mutation, 0},
    {"statvfs", c_statvfs, 0},
    {"root", c_root, 0},
    {"setid", c_setid, 0},
};

static int before_case(const struct ft_case *c)
{
	char dir[300];
	ferrite_reset_creds();
	snprintf(dir, sizeof(dir), "/%s", c->name);
	FT_OK(ferrite_mkdir(fs, dir, 0755));
	return 0;
}

static void after_case(const struct ft_case *c)
{
	ferrite_reset_creds();
}

int main(int argc, char **argv)
{
	umask(0); /* the Linux reference applies the process umask; Ferrite has none */
	const char *pool = ft_pool_path("posix", "main");
	if (ft_pool_create(pool, 256ull * MiB, &fs) != 0)
		return 1;
	int rc =
	    ft_run(cases, sizeof(cases) / sizeof(cases[0]), argc, argv, before_case, after_case);
	ft_case_name = "(unmount)";
	int u = ferrite_unmount(fs);
	if (u != 0) {
		fprintf(stderr, "FAIL ferrite_unmount: %s (%s)\n", ft_errname(u), ferrite_errmsg());
		rc = 1;
	}
	if (!ft_is_oracle) {
		int f = ferrite_fsck(pool, 0, NULL, NULL, NULL, NULL);
		if (f != FERRITE_FSCK_CLEAN) {
			fprintf(stderr,
				"FAIL ferrite_fsck after all cases: expected 0 (clean), got %d\n",
				f);
			rc = 1;
		}
	}
	return rc;
}
