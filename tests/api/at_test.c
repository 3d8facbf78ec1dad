/*
 * at_test.c -- the calls relative to an open directory (the *at family),
 * O_PATH descriptors, ferrite_reopen, status flags and copy_file_range: what
 * the preload shim and the FUSE daemon translate to. Built a second time
 * against the Linux reference, which shows each expectation is what Linux
 * does.
 */
#include "ft_test.h"

#include <sys/sysmacros.h>

#define MiB (1024ull * 1024)

static ferrite_fs *fs;

static int mkfile(int dirfd, const char *path, size_t len, uint64_t key)
{
	int fd = ferrite_openat(fs, dirfd, path, O_CREAT | O_RDWR | O_TRUNC, 0644);
	if (fd < 0)
		return fd;
	char *buf = malloc(len ? len : 1);
	ft_fill(buf, len, key, 0);
	ssize_t n = ferrite_pwrite(fs, fd, buf, len, 0);
	free(buf);
	ferrite_close(fs, fd);
	return n == (ssize_t)len ? 0 : -EIO;
}

static int case_openat_relative(void)
{
	FT_OK(ferrite_mkdir(fs, "/a", 0755));
	FT_OK(ferrite_mkdir(fs, "/a/b", 0755));
	int dfd = ferrite_openat(fs, FERRITE_AT_ROOT, "a", O_RDONLY | O_DIRECTORY, 0);
	FT_CHECK(dfd >= 0, "openat(ROOT, \"a\") -> %d", dfd);
	FT_OK(mkfile(dfd, "b/f", 5000, 1));
	struct stat st;
	FT_OK(ferrite_stat(fs, "/a/b/f", &st));
	FT_EQ(st.st_size, 5000);
	FT_OK(ferrite_fstatat(fs, dfd, "../a/b/f", &st, 0));
	FT_EQ(st.st_size, 5000);
	/* Absolute paths ignore dirfd, even a bad one. */
	FT_OK(ferrite_fstatat(fs, 9999, "/a/b/f", &st, 0));
	FT_ERR(ferrite_fstatat(fs, 9999, "b/f", &st, 0), EBADF);
	int ffd = ferrite_openat(fs, dfd, "b/f", O_RDONLY, 0);
	FT_CHECK(ffd >= 0, "openat(dfd, b/f) -> %d", ffd);
	FT_ERR(ferrite_fstatat(fs, ffd, "x", &st, 0), ENOTDIR);
	FT_ERR(ferrite_openat(fs, dfd, "b/f/", O_RDONLY, 0), ENOTDIR);
	FT_ERR(ferrite_fstatat(fs, dfd, "", &st, 0), ENOENT);
	FT_OK(ferrite_fstatat(fs, dfd, "", &st, AT_EMPTY_PATH));
	FT_CHECK(S_ISDIR(st.st_mode), "AT_EMPTY_PATH names the directory itself");
	FT_OK(ferrite_close(fs, ffd));
	FT_OK(ferrite_close(fs, dfd));
	return 0;
}

/* A directory descriptor names the inode, not the path it was opened by. */
static int case_dirfd_follows_renames(void)
{
	FT_OK(ferrite_mkdir(fs, "/m", 0755));
	int dfd = ferrite_openat(fs, FERRITE_AT_ROOT, "/m", O_RDONLY | O_DIRECTORY, 0);
	FT_CHECK(dfd >= 0, "open /m -> %d", dfd);
	FT_OK(ferrite_rename(fs, "/m", "/n", 0));
	FT_OK(mkfile(dfd, "inside", 10, 2));
	struct stat st;
	FT_OK(ferrite_stat(fs, "/n/inside", &st));
	FT_OK(ferrite_unlinkat(fs, dfd, "inside", 0));
	FT_OK(ferrite_rmdir(fs, "/n"));
	/* Removed: nothing can be created in it any more. */
	FT_ERR(ferrite_openat(fs, dfd, "x", O_CREAT | O_RDWR, 0644), ENOENT);
	FT_ERR(ferrite_mkdirat(fs, dfd, "x", 0755), ENOENT);
	FT_OK(ferrite_fstatat(fs, dfd, "", &st, AT_EMPTY_PATH));
	FT_EQ(st.st_nlink, 0);
	FT_OK(ferrite_close(fs, dfd));
	return 0;
}

static int case_o_path(void)
{
	FT_OK(ferrite_mkdir(fs, "/p", 0755));
	FT_OK(mkfile(FERRITE_AT_ROOT, "/p/f", 100, 3));
	FT_OK(ferrite_symlink(fs, "f", "/p/l"));
	int fd = ferrite_openat(fs, FERRITE_AT_ROOT, "/p/f", O_PATH, 0);
	FT_CHECK(fd >= 0, "O_PATH open -> %d", fd);
	char buf[64];
	FT_ERR(ferrite_read(fs, fd, buf, sizeof(buf)), EBADF);
	FT_ERR(ferrite_pwrite(fs, fd, buf, 1, 0), EBADF);
	FT_ERR(ferrite_lseek(fs, fd, 0, SEEK_END), EBADF);
	struct stat st;
	FT_OK(ferrite_fstat(fs, fd, &st));
	FT_EQ(st.st_size, 100);
	FT_OK(ferrite_close(fs, fd));
	/* O_PATH|O_NOFOLLOW names the link itself. */
	int lfd = ferrite_openat(fs, FERRITE_AT_ROOT, "/p/l", O_PATH | O_NOFOLLOW, 0);
	FT_CHECK(lfd >= 0, "O_PATH|O_NOFOLLOW on a link -> %d", lfd);
	FT_OK(ferrite_fstatat(fs, lfd, "", &st, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW));
	FT_CHECK(S_ISLNK(st.st_mode), "the descriptor is the link");
	FT_EQ(ferrite_readlinkat(fs, lfd, "", buf, sizeof(buf)), 1);
	FT_CHECK(buf[0] == 'f', "link target");
	FT_OK(ferrite_close(fs, lfd));
	FT_ERR(ferrite_openat(fs, FERRITE_AT_ROOT, "/p/l", O_RDONLY | O_NOFOLLOW, 0), ELOOP);
	/* An O_PATH directory works as a dirfd. */
	int dfd = ferrite_openat(fs, FERRITE_AT_ROOT, "/p", O_PATH | O_DIRECTORY, 0);
	FT_CHECK(dfd >= 0, "O_PATH dir -> %d", dfd);
	FT_OK(ferrite_fstatat(fs, dfd, "l", &st, 0));
	FT_EQ(st.st_size, 100);
	FT_OK(ferrite_close(fs, dfd));
	return 0;
}

static int case_reopen(void)
{
	FT_OK(mkfile(FERRITE_AT_ROOT, "/r", 4096, 4));
	int pfd = ferrite_openat(fs, FERRITE_AT_ROOT, "/r", O_PATH, 0);
	FT_CHECK(pfd >= 0, "O_PATH -> %d", pfd);
	int rfd = ferrite_reopen(fs, pfd, O_RDONLY);
	FT_CHECK(rfd >= 0, "reopen O_RDONLY -> %d", rfd);
	char buf[4096];
	FT_EQ(ferrite_pread(fs, rfd, buf, sizeof(buf), 0), 4096);
	FT_EQ(ft_verify(buf, sizeof(buf), 4, 0), -1);
	/* Still reachable after the last name is gone. */
	FT_OK(ferrite_unlink(fs, "/r"));
	int wfd = ferrite_reopen(fs, pfd, O_WRONLY | O_TRUNC);
	FT_CHECK(wfd >= 0, "reopen O_WRONLY|O_TRUNC of an unlinked file -> %d", wfd);
	struct stat st;
	FT_OK(ferrite_fstat(fs, rfd, &st));
	FT_EQ(st.st_size, 0);
	FT_EQ(st.st_nlink, 0);
	FT_OK(ferrite_close(fs, wfd));
	FT_OK(ferrite_close(fs, rfd));
	FT_OK(ferrite_close(fs, pfd));
	return 0;
}

static int case_attrs_at(void)
{
	FT_OK(ferrite_mkdir(fs, "/t", 0755));
	int dfd = ferrite_openat(fs, FERRITE_AT_ROOT, "/t", O_RDONLY | O_DIRECTORY, 0);
	FT_OK(mkfile(dfd, "f", 1, 5));
	FT_OK(ferrite_symlinkat(fs, "f", dfd, "l"));
	FT_OK(ferrite_fchmodat(fs, dfd, "l", 0600, 0)); /* follows to f */
	struct stat st;
	FT_OK(ferrite_fstatat(fs, dfd, "f", &st, 0));
	FT_EQ(st.st_mode & 07777, 0600);
	FT_ERR(ferrite_fchmodat(fs, dfd, "l", 0600, AT_SYMLINK_NOFOLLOW), EOPNOTSUPP);
	FT_OK(ferrite_fchownat(fs, dfd, "l", 42, 43, AT_SYMLINK_NOFOLLOW));
	FT_OK(ferrite_fstatat(fs, dfd, "l", &st, AT_SYMLINK_NOFOLLOW));
	FT_EQ(st.st_uid, 42);
	FT_OK(ferrite_fstatat(fs, dfd, "f", &st, 0));
	FT_EQ(st.st_uid, 0);
	struct timespec ts[2] = {{1000, 5}, {2000, 7}};
	FT_OK(ferrite_utimensat(fs, dfd, "l", ts, AT_SYMLINK_NOFOLLOW));
	FT_ERR(ferrite_utimensat(fs, FERRITE_AT_ROOT, NULL, ts, 0), EINVAL);
	FT_OK(ferrite_fstatat(fs, dfd, "l", &st, AT_SYMLINK_NOFOLLOW));
	FT_EQ(st.st_mtim.tv_sec, 2000);
	FT_OK(ferrite_fstatat(fs, dfd, "f", &st, 0));
	FT_CHECK(st.st_mtim.tv_sec != 2000, "the target keeps its times");
	FT_OK(ferrite_faccessat(fs, dfd, "l", R_OK | W_OK, 0));
	FT_ERR(ferrite_faccessat(fs, dfd, "nope", F_OK, 0), ENOENT);
	FT_ERR(ferrite_fstatat(fs, dfd, "f", &st, 0x40000000), EINVAL);
	FT_OK(ferrite_close(fs, dfd));
	return 0;
}

static int case_namespace_at(void)
{
	FT_OK(ferrite_mkdir(fs, "/u", 0755));
	FT_OK(ferrite_mkdir(fs, "/v", 0755));
	int u = ferrite_openat(fs, FERRITE_AT_ROOT, "/u", O_RDONLY | O_DIRECTORY, 0);
	int v = ferrite_openat(fs, FERRITE_AT_ROOT, "/v", O_PATH | O_DIRECTORY, 0);
	FT_CHECK(u >= 0 && v >= 0, "open dirs %d %d", u, v);
	FT_OK(ferrite_mkdirat(fs, u, "d", 0700));
	FT_OK(mkfile(u, "d/f", 10, 6));
	FT_OK(ferrite_renameat2(fs, u, "d/f", v, "g", 0));
	FT_OK(mkfile(u, "h", 11, 7));
	FT_ERR(ferrite_renameat2(fs, u, "h", v, "g", RENAME_NOREPLACE), EEXIST);
	FT_OK(ferrite_renameat2(fs, u, "h", v, "g", RENAME_EXCHANGE));
	struct stat st;
	FT_OK(ferrite_fstatat(fs, v, "g", &st, 0));
	FT_EQ(st.st_size, 11);
	FT_OK(ferrite_linkat(fs, v, "g", u, "d/g2", 0));
	FT_OK(ferrite_fstatat(fs, u, "d/g2", &st, 0));
	FT_EQ(st.st_nlink, 2);
	/* linkat with AT_EMPTY_PATH links the inode a descriptor names. */
	int g = ferrite_openat(fs, v, "g", O_RDONLY, 0);
	FT_OK(ferrite_linkat(fs, g, "", u, "d/g3", AT_EMPTY_PATH));
	FT_ERR(ferrite_linkat(fs, g, "", u, "d/g4", 0), ENOENT);
	FT_OK(ferrite_close(fs, g));
	FT_OK(ferrite_fstatat(fs, u, "d/g3", &st, 0));
	FT_EQ(st.st_nlink, 3);
	FT_OK(ferrite_symlinkat(fs, "g", v, "s"));
	FT_OK(ferrite_linkat(fs, v, "s", u, "d/s_follow", AT_SYMLINK_FOLLOW));
	FT_OK(ferrite_fstatat(fs, u, "d/s_follow", &st, AT_SYMLINK_NOFOLLOW));
	FT_CHECK(S_ISREG(st.st_mode), "AT_SYMLINK_FOLLOW links the target");
	FT_OK(ferrite_linkat(fs, v, "s", u, "d/s_nofollow", 0));
	FT_OK(ferrite_fstatat(fs, u, "d/s_nofollow", &st, AT_SYMLINK_NOFOLLOW));
	FT_CHECK(S_ISLNK(st.st_mode), "without AT_SYMLINK_FOLLOW the link itself");
	FT_OK(ferrite_mknodat(fs, u, "fifo", S_IFIFO | 0644, 0));
	FT_OK(ferrite_fstatat(fs, u, "fifo", &st, 0));
	FT_CHECK(S_ISFIFO(st.st_mode), "mknod made a FIFO");
	FT_OK(ferrite_mknodat(fs, u, "reg", 0640, 0));
	FT_OK(ferrite_fstatat(fs, u, "reg", &st, 0));
	FT_CHECK(S_ISREG(st.st_mode) && (st.st_mode & 07777) == 0640, "mknod made a file");
	FT_OK(ferrite_mknodat(fs, u, "chr", S_IFCHR | 0600, makedev(1, 3)));
	FT_OK(ferrite_fstatat(fs, u, "chr", &st, 0));
	FT_CHECK(S_ISCHR(st.st_mode) && st.st_rdev == (dev_t)makedev(1, 3), "char device 1:3");
	FT_ERR(ferrite_mknodat(fs, u, "reg", S_IFIFO | 0644, 0), EEXIST);
	FT_ERR(ferrite_unlinkat(fs, u, "d", 0), EISDIR);
	FT_ERR(ferrite_unlinkat(fs, u, "d", AT_REMOVEDIR), ENOTEMPTY);
	FT_ERR(ferrite_unlinkat(fs, u, "reg", AT_REMOVEDIR), ENOTDIR);
	FT_ERR(ferrite_unlinkat(fs, u, "reg", 0x1), EINVAL);
	const char *names[] = {"d/g2", "d/g3", "d/s_follow", "d/s_nofollow", "fifo", "reg", "chr"};
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		FT_OK(ferrite_unlinkat(fs, u, names[i], 0));
	FT_OK(ferrite_unlinkat(fs, u, "d", AT_REMOVEDIR));
	/* Left in place: fsck at the end must accept special files. */
	FT_OK(ferrite_mknodat(fs, u, "keep_fifo", S_IFIFO | 0600, 0));
	FT_OK(ferrite_mknodat(fs, u, "keep_blk", S_IFBLK | 0600, makedev(8, 1)));
	FT_OK(ferrite_mknodat(fs, u, "keep_sock", S_IFSOCK | 0600, 0));
	char buf[8];
	FT_EQ(ferrite_readlinkat(fs, v, "s", buf, sizeof(buf)), 1);
	FT_OK(ferrite_close(fs, u));
	FT_OK(ferrite_close(fs, v));
	return 0;
}

static int case_fdopendir(void)
{
	FT_OK(ferrite_mkdir(fs, "/w", 0755));
	for (int i = 0; i < 20; i++) {
		char name[16];
		snprintf(name, sizeof(name), "/w/e%d", i);
		FT_OK(mkfile(FERRITE_AT_ROOT, name, 0, 0));
	}
	int dfd = ferrite_openat(fs, FERRITE_AT_ROOT, "/w", O_RDONLY | O_DIRECTORY, 0);
	ferrite_dir *d;
	FT_OK(ferrite_fdopendir(fs, dfd, &d));
	struct ferrite_dirent ent;
	int n = 0, rc;
	while ((rc = ferrite_readdir(d, &ent)) == 1)
		n++;
	FT_EQ(rc, 0);
	FT_EQ(n, 22);
	FT_OK(ferrite_closedir(d));
	FT_OK(ferrite_close(fs, dfd));
	int ffd = ferrite_openat(fs, FERRITE_AT_ROOT, "/w/e0", O_RDONLY, 0);
	FT_ERR(ferrite_fdopendir(fs, ffd, &d), ENOTDIR);
	FT_OK(ferrite_close(fs, ffd));
	return 0;
}

static int case_status_flags(void)
{
	int fd = ferrite_openat(fs, FERRITE_AT_ROOT, "/fl", O_CREAT | O_WRONLY | O_APPEND, 0644);
	FT_CHECK(fd >= 0, "open -> %d", fd);
	int fl = ferrite_getfl(fs, fd);
	FT_EQ(fl & (O_ACCMODE | O_APPEND), O_WRONLY | O_APPEND);
	FT_EQ(ferrite_write(fs, fd, "abc", 3), 3);
	FT_OK(ferrite_setfl(fs, fd, 0));
	FT_EQ(ferrite_getfl(fs, fd) & (O_ACCMODE | O_APPEND), O_WRONLY);
	FT_EQ(ferrite_lseek(fs, fd, 0, SEEK_SET), 0);
	FT_EQ(ferrite_write(fs, fd, "X", 1), 1); /* no longer appends */
	FT_OK(ferrite_setfl(fs, fd, O_APPEND));
	FT_EQ(ferrite_write(fs, fd, "Z", 1), 1);
	char buf[8] = {0};
	int rfd = ferrite_openat(fs, FERRITE_AT_ROOT, "/fl", O_RDONLY, 0);
	FT_EQ(ferrite_read(fs, rfd, buf, sizeof(buf)), 4);
	FT_CHECK(memcmp(buf, "XbcZ", 4) == 0, "content %.4s", buf);
	FT_OK(ferrite_close(fs, rfd));
	FT_OK(ferrite_close(fs, fd));
	FT_ERR(ferrite_getfl(fs, fd), EBADF);
	return 0;
}

static int case_copy_file_range(void)
{
	const size_t len = 3 * MiB + 123;
	FT_OK(mkfile(FERRITE_AT_ROOT, "/src", len, 8));
	int in = ferrite_openat(fs, FERRITE_AT_ROOT, "/src", O_RDONLY, 0);
	int out = ferrite_openat(fs, FERRITE_AT_ROOT, "/dst", O_CREAT | O_RDWR, 0644);
	off_t oi = 100, oo = 4096;
	FT_EQ(ferrite_copy_file_range(fs, in, &oi, out, &oo, len, 0), (long long)(len - 100));
	FT_EQ(oi, (long long)len);
	FT_EQ(oo, (long long)(4096 + len - 100));
	char *buf = malloc(len);
	FT_EQ(ferrite_pread(fs, out, buf, len - 100, 4096), (long long)(len - 100));
	FT_EQ(ft_verify(buf, len - 100, 8, 100), -1);
	/* NULL offsets use and advance the descriptors' positions. */
	FT_EQ(ferrite_lseek(fs, in, 10, SEEK_SET), 10);
	FT_EQ(ferrite_lseek(fs, out, 0, SEEK_SET), 0);
	FT_EQ(ferrite_copy_file_range(fs, in, NULL, out, NULL, 1000, 0), 1000);
	FT_EQ(ferrite_lseek(fs, in, 0, SEEK_CUR), 1010);
	FT_EQ(ferrite_lseek(fs, out, 0, SEEK_CUR), 1000);
	FT_EQ(ferrite_pread(fs, out, buf, 1000, 0), 1000);
	FT_EQ(ft_verify(buf, 1000, 8, 10), -1);
	oi = (off_t)len;
	FT_EQ(ferrite_copy_file_range(fs, in, &oi, out, NULL, 10, 0), 0); /* at EOF */
	oi = 0;
	oo = 10;
	FT_ERR(ferrite_copy_file_range(fs, out, &oi, out, &oo, 100, 0), EINVAL);
	FT_ERR(ferrite_copy_file_range(fs, in, NULL, out, NULL, 1, 1), EINVAL);
	FT_ERR(ferrite_copy_file_range(fs, out, NULL, in, NULL, 1, 0), EBADF);
	int app = ferrite_openat(fs, FERRITE_AT_ROOT, "/dst", O_WRONLY | O_APPEND, 0);
	FT_ERR(ferrite_copy_file_range(fs, in, NULL, app, NULL, 1, 0), EBADF);
	free(buf);
	FT_OK(ferrite_close(fs, app));
	FT_OK(ferrite_close(fs, in));
	FT_OK(ferrite_close(fs, out));
	return 0;
}

/* With the pool placed at a host prefix, absolute links under it lead back
 * into the pool and others leave it (-EXDEV and the host path to follow). */
static int case_link_prefix(void)
{
	FT_OK(ferrite_mkdir(fs, "/lp", 0755));
	FT_OK(mkfile(FERRITE_AT_ROOT, "/lp/f", 7, 9));
	FT_OK(ferrite_symlink(fs, "/pm/lp", "/lp/in"));
	FT_OK(ferrite_symlink(fs, "/pm", "/lp/root"));
	FT_OK(ferrite_symlink(fs, "/etc", "/lp/out"));
	FT_OK(ferrite_set_link_prefix(fs, "/pm/"));
	struct stat st;
	FT_OK(ferrite_stat(fs, "/lp/in/f", &st));
	FT_EQ(st.st_size, 7);
	FT_OK(ferrite_stat(fs, "/lp/root/lp/f", &st));
	FT_EQ(st.st_size, 7);
	FT_ERR(ferrite_stat(fs, "/lp/out/passwd", &st), EXDEV);
	FT_CHECK(strcmp(ferrite_escaped_path(), "/etc/passwd") == 0, "escaped to %s",
		 ferrite_escaped_path());
	FT_OK(ferrite_lstat(fs, "/lp/out", &st)); /* the link itself is in the pool */
	FT_ERR(ferrite_set_link_prefix(fs, "relative"), EINVAL);
	FT_ERR(ferrite_set_link_prefix(fs, "/"), EINVAL);
	FT_OK(ferrite_set_link_prefix(fs, NULL));
	FT_ERR(ferrite_stat(fs, "/lp/in/f", &st), ENOENT); /* /pm/lp inside the pool */
	const char *names[] = {"/lp/in", "/lp/root", "/lp/out", "/lp/f"};
	for (int i = 0; i < 4; i++)
		FT_OK(ferrite_unlink(fs, names[i]));
	FT_OK(ferrite_rmdir(fs, "/lp"));
	return 0;
}

static const struct ft_case cases[] = {
    {"openat_relative", case_openat_relative, 0},
    {"dirfd_follows_renames", case_dirfd_follows_renames, 0},
    {"o_path", case_o_path, 0},
    {"reopen", case_reopen, 0},
    {"attrs_at", case_attrs_at, 0},
    {"namespace_at", case_namespace_at, 0},
    {"fdopendir", case_fdopendir, 0},
    {"status_flags", case_status_flags, 0},
    {"copy_file_range", case_copy_file_range, 0},
    {"link_prefix", case_link_prefix, FT_ORACLE_SKIP},
};

int main(int argc, char **argv)
{
	umask(0);
	const char *pool = ft_pool_path("at", "main");
	if (ft_pool_create(pool, 256ull * MiB, &fs) != 0)
		return 1;
	int rc = ft_run(cases, sizeof(cases) / sizeof(cases[0]), argc, argv, NULL, NULL);
	ft_case_name = "(unmount)";
	FT_UNMOUNT_CLEAN(&fs, pool);
	return rc;
}
