/*
 * xattr_test.c -- extended attributes through include/ferrite.h: the calls
 * on descriptors (O_PATH included) and relative to a directory, Linux's
 * errors and limits, namespaces and permissions, blocks larger than a page,
 * persistence across unmount + mount with a clean fsck, and release of the
 * attribute storage with the inode.
 * Usage: xattr_test [-l] [case ...]
 */
#include "ft_test.h"

#define MiB (1024 * 1024)

static ferrite_fs *fs;
static const char *pool;

static int before(const struct ft_case *c)
{
	(void)c;
	return ft_pool_create(pool, 64 * MiB, &fs);
}

static void after(const struct ft_case *c)
{
	(void)c;
	ferrite_reset_creds();
	if (fs)
		ferrite_unmount(fs);
	fs = NULL;
}

static int remount_clean(void)
{
	FT_UNMOUNT_CLEAN(&fs, pool);
	FT_OK(ferrite_mount(pool, NULL, &fs));
	return 0;
}

static int mkfile(const char *path, mode_t mode)
{
	int fd = (int)FT_OK(ferrite_open(fs, path, O_CREAT | O_RDWR, mode));
	FT_OK(ferrite_close(fs, fd));
	return 0;
}

static int c_basic(void)
{
	char buf[64];
	FT_RUN(mkfile("/f", 0644));
	int fd = (int)FT_OK(ferrite_open(fs, "/f", O_RDWR, 0));
	FT_ERR(ferrite_fgetxattr(fs, fd, "user.a", buf, sizeof(buf)), ENODATA);
	FT_EQ(ferrite_flistxattr(fs, fd, NULL, 0), 0);
	struct stat st0, st1;
	FT_OK(ferrite_fstat(fs, fd, &st0));
	struct timespec ts = {0, 20 * 1000 * 1000};
	nanosleep(&ts, NULL);
	FT_OK(ferrite_fsetxattr(fs, fd, "user.a", "hello", 5, 0));
	FT_OK(ferrite_fstat(fs, fd, &st1));
	FT_CHECK(st1.st_ctim.tv_sec != st0.st_ctim.tv_sec ||
		     st1.st_ctim.tv_nsec != st0.st_ctim.tv_nsec,
		 "setxattr must change ctime");
	FT_EQ(ferrite_fgetxattr(fs, fd, "user.a", NULL, 0), 5);
	FT_EQ(ferrite_fgetxattr(fs, fd, "user.a", buf, sizeof(buf)), 5);
	FT_CHECK(memcmp(buf, "hello", 5) == 0, "value");
	FT_ERR(ferrite_fgetxattr(fs, fd, "user.a", buf, 4), ERANGE);
	FT_ERR(ferrite_fsetxattr(fs, fd, "user.a", "x", 1, FERRITE_XATTR_CREATE), EEXIST);
	FT_ERR(ferrite_fsetxattr(fs, fd, "user.b", "x", 1, FERRITE_XATTR_REPLACE), ENODATA);
	FT_ERR(ferrite_fsetxattr(fs, fd, "user.b", "x", 1, 4), EINVAL);
	FT_OK(ferrite_fsetxattr(fs, fd, "user.a", "hi", 2, FERRITE_XATTR_REPLACE));
	FT_OK(ferrite_fsetxattr(fs, fd, "user.b", "", 0, FERRITE_XATTR_CREATE));
	FT_EQ(ferrite_fgetxattr(fs, fd, "user.b", buf, sizeof(buf)), 0);
	FT_EQ(ferrite_fgetxattr(fs, fd, "user.a", buf, sizeof(buf)), 2);
	FT_CHECK(memcmp(buf, "hi", 2) == 0, "replaced value");
	FT_EQ(ferrite_flistxattr(fs, fd, NULL, 0), 14);
	FT_ERR(ferrite_flistxattr(fs, fd, buf, 13), ERANGE);
	FT_EQ(ferrite_flistxattr(fs, fd, buf, sizeof(buf)), 14);
	FT_CHECK(memcmp(buf, "user.a\0user.b\0", 14) == 0, "list");
	FT_OK(ferrite_fremovexattr(fs, fd, "user.a"));
	FT_ERR(ferrite_fremovexattr(fs, fd, "user.a"), ENODATA);
	FT_OK(ferrite_fremovexattr(fs, fd, "user.b"));
	FT_EQ(ferrite_flistxattr(fs, fd, buf, sizeof(buf)), 0);
	FT_OK(ferrite_close(fs, fd));
	FT_UNMOUNT_CLEAN(&fs, pool);
	return 0;
}

static int c_limits(void)
{
	char name[300], *big = malloc(FERRITE_XATTR_SIZE_MAX + 1);
	FT_CHECK(big != NULL, "malloc");
	FT_RUN(mkfile("/f", 0644));
	int fd = (int)FT_OK(ferrite_open(fs, "/f", O_RDONLY, 0));
	memset(name, 'n', sizeof(name));
	memcpy(name, "user.", 5);
	name[255] = '\0';
	FT_OK(ferrite_fsetxattr(fs, fd, name, "v", 1, 0));
	name[255] = 'n';
	name[256] = '\0';
	FT_ERR(ferrite_fsetxattr(fs, fd, name, "v", 1, 0), ERANGE);
	FT_ERR(ferrite_fgetxattr(fs, fd, name, NULL, 0), ERANGE);
	FT_ERR(ferrite_fsetxattr(fs, fd, "", "v", 1, 0), ERANGE);
	FT_ERR(ferrite_fsetxattr(fs, fd, "user.", "v", 1, 0), EINVAL);
	FT_ERR(ferrite_fsetxattr(fs, fd, "security.selinux", "v", 1, 0), EOPNOTSUPP);
	FT_ERR(ferrite_fsetxattr(fs, fd, "system.posix_acl_access", "v", 1, 0), EOPNOTSUPP);
	FT_ERR(ferrite_fgetxattr(fs, fd, "security.capability", NULL, 0), EOPNOTSUPP);
	FT_ERR(ferrite_fsetxattr(fs, fd, "nonamespace", "v", 1, 0), EOPNOTSUPP);
	ft_fill(big, FERRITE_XATTR_SIZE_MAX + 1, 7, 0);
	FT_ERR(ferrite_fsetxattr(fs, fd, "user.big", big, FERRITE_XATTR_SIZE_MAX + 1, 0), E2BIG);
	FT_ERRMSG_ONE_LINE();
	FT_OK(ferrite_fsetxattr(fs, fd, "user.big", big, FERRITE_XATTR_SIZE_MAX, 0));
	memset(big, 0, FERRITE_XATTR_SIZE_MAX);
	FT_EQ(ferrite_fgetxattr(fs, fd, "user.big", big, FERRITE_XATTR_SIZE_MAX),
	      FERRITE_XATTR_SIZE_MAX);
	FT_EQ(ft_verify(big, FERRITE_XATTR_SIZE_MAX, 7, 0), -1);
	free(big);
	FT_OK(ferrite_close(fs, fd));
	FT_UNMOUNT_CLEAN(&fs, pool);
	return 0;
}

static int c_permissions(void)
{
	char buf[16];
	FT_RUN(mkfile("/ro", 0644));
	FT_RUN(mkfile("/priv", 0600));
	FT_OK(ferrite_mkdir(fs, "/sticky", 01777));
	FT_OK(ferrite_symlink(fs, "/ro", "/link"));
	FT_OK(ferrite_setxattrat(fs, FERRITE_AT_ROOT, "/ro", 0, "trusted.t", "T", 1, 0));
	FT_OK(ferrite_setxattrat(fs, FERRITE_AT_ROOT, "/ro", 0, "user.u", "U", 1, 0));
	FT_OK(ferrite_setxattrat(fs, FERRITE_AT_ROOT, "/priv", 0, "user.u", "U", 1, 0));
	FT_OK(ferrite_setxattrat(fs, FERRITE_AT_ROOT, "/sticky", 0, "user.u", "U", 1, 0));
	/* root may put trusted.* on a symlink, nobody user.* (Linux) */
	FT_OK(ferrite_setxattrat(fs, FERRITE_AT_ROOT, "/link", AT_SYMLINK_NOFOLLOW, "trusted.l",
				 "L", 1, 0));
	FT_ERR(ferrite_setxattrat(fs, FERRITE_AT_ROOT, "/link", AT_SYMLINK_NOFOLLOW, "user.l", "L",
				  1, 0),
	       EPERM);
	FT_ERR(ferrite_getxattrat(fs, FERRITE_AT_ROOT, "/link", AT_SYMLINK_NOFOLLOW, "user.l", buf,
				  sizeof(buf)),
	       ENODATA);
	/* following the link reaches /ro */
	FT_EQ(ferrite_getxattrat(fs, FERRITE_AT_ROOT, "/link", 0, "user.u", buf, sizeof(buf)), 1);

	gid_t g = 1000;
	FT_OK(ferrite_set_creds(1000, 1000, 1, &g));
	FT_ERR(ferrite_setxattrat(fs, FERRITE_AT_ROOT, "/ro", 0, "trusted.x", "x", 1, 0), EPERM);
	FT_ERR(ferrite_getxattrat(fs, FERRITE_AT_ROOT, "/ro", 0, "trusted.t", buf, sizeof(buf)),
	       ENODATA);
	FT_EQ(ferrite_listxattrat(fs, FERRITE_AT_ROOT, "/ro", 0, buf, sizeof(buf)), 7);
	FT_CHECK(strcmp(buf, "user.u") == 0, "trusted.* must be hidden from others");
	FT_EQ(ferrite_getxattrat(fs, FERRITE_AT_ROOT, "/ro", 0, "user.u", buf, sizeof(buf)), 1);
	FT_ERR(ferrite_setxattrat(fs, FERRITE_AT_ROOT, "/ro", 0, "user.x", "x", 1, 0), EACCES);
	FT_ERR(ferrite_removexattrat(fs, FERRITE_AT_ROOT, "/ro", 0, "user.u"), EACCES);
	FT_ERR(ferrite_getxattrat(fs, FERRITE_AT_ROOT, "/priv", 0, "user.u", buf, sizeof(buf)),
	       EACCES);
	FT_ERR(ferrite_setxattrat(fs, FERRITE_AT_ROOT, "/sticky", 0, "user.x", "x", 1, 0), EPERM);
	ferrite_reset_creds();
	FT_UNMOUNT_CLEAN(&fs, pool);
	return 0;
}

/* O_PATH descriptors, directories, AT_EMPTY_PATH and dirfd-relative paths. */
static int c_opath_at(void)
{
	char buf[16];
	FT_OK(ferrite_mkdir(fs, "/d", 0755));
	FT_RUN(mkfile("/d/f", 0644));
	int dfd = (int)FT_OK(ferrite_openat(fs, FERRITE_AT_ROOT, "/d", O_PATH, 0));
	int pfd = (int)FT_OK(ferrite_openat(fs, dfd, "f", O_PATH, 0));
	FT_OK(ferrite_fsetxattr(fs, pfd, "user.p", "P", 1, 0));
	FT_OK(ferrite_fsetxattr(fs, dfd, "user.dir", "D", 1, 0));
	FT_EQ(ferrite_getxattrat(fs, dfd, "f", 0, "user.p", buf, sizeof(buf)), 1);
	FT_EQ(ferrite_getxattrat(fs, dfd, "", AT_EMPTY_PATH, "user.dir", buf, sizeof(buf)), 1);
	FT_ERR(ferrite_getxattrat(fs, dfd, "missing", 0, "user.p", buf, sizeof(buf)), ENOENT);
	FT_ERR(ferrite_getxattrat(fs, dfd, "f", 0x4000000, "user.p", buf, sizeof(buf)), EINVAL);
	FT_OK(ferrite_removexattrat(fs, dfd, "f", 0, "user.p"));
	FT_ERR(ferrite_fgetxattr(fs, 9999, "user.p", buf, sizeof(buf)), EBADF);
	FT_OK(ferrite_close(fs, pfd));
	FT_OK(ferrite_close(fs, dfd));
	FT_UNMOUNT_CLEAN(&fs, pool);
	return 0;
}

/* Enough attributes to need a multi-page block; replaced, then removed. */
static int c_many(void)
{
	char name[64], *val = malloc(3000), *got = malloc(3000);
	FT_CHECK(val && got, "malloc");
	FT_RUN(mkfile("/f", 0644));
	int fd = (int)FT_OK(ferrite_open(fs, "/f", O_RDONLY, 0));
	for (int i = 0; i < 200; i++) {
		snprintf(name, sizeof(name), "user.attr-%03d", i);
		ft_fill(val, 3000, (uint64_t)i, 0);
		FT_OK(ferrite_fsetxattr(fs, fd, name, val, (size_t)(i * 13) % 3000, 0));
	}
	for (int i = 0; i < 200; i += 3) {
		snprintf(name, sizeof(name), "user.attr-%03d", i);
		ft_fill(val, 3000, (uint64_t)i + 1000, 0);
		FT_OK(ferrite_fsetxattr(fs, fd, name, val, 100, FERRITE_XATTR_REPLACE));
	}
	FT_RUN(remount_clean());
	fd = (int)FT_OK(ferrite_open(fs, "/f", O_RDONLY, 0));
	FT_EQ(ferrite_flistxattr(fs, fd, NULL, 0), 200 * 14);
	for (int i = 0; i < 200; i++) {
		snprintf(name, sizeof(name), "user.attr-%03d", i);
		size_t want = i % 3 == 0 ? 100 : (size_t)(i * 13) % 3000;
		FT_EQ(ferrite_fgetxattr(fs, fd, name, got, 3000), want);
		FT_EQ(ft_verify(got, want, i % 3 == 0 ? (uint64_t)i + 1000 : (uint64_t)i, 0), -1);
	}
	for (int i = 0; i < 200; i++) {
		snprintf(name, sizeof(name), "user.attr-%03d", i);
		FT_OK(ferrite_fremovexattr(fs, fd, name));
	}
	FT_EQ(ferrite_flistxattr(fs, fd, NULL, 0), 0);
	FT_OK(ferrite_close(fs, fd));
	free(val);
	free(got);
	FT_UNMOUNT_CLEAN(&fs, pool);
	return 0;
}

/* Attributes survive unmount + mount with a clean fsck. */
static int c_persist(void)
{
	char buf[16];
	FT_RUN(mkfile("/a", 0644));
	FT_OK(ferrite_mkdir(fs, "/dir", 0755));
	FT_OK(ferrite_symlink(fs, "/a", "/l"));
	FT_OK(ferrite_setxattrat(fs, FERRITE_AT_ROOT, "/a", 0, "user.k", "va", 2, 0));
	FT_OK(ferrite_setxattrat(fs, FERRITE_AT_ROOT, "/a", 0, "trusted.k", "ta", 2, 0));
	FT_OK(ferrite_setxattrat(fs, FERRITE_AT_ROOT, "/dir", 0, "user.k", "vd", 2, 0));
	FT_OK(ferrite_setxattrat(fs, FERRITE_AT_ROOT, "/l", AT_SYMLINK_NOFOLLOW, "trusted.k", "tl",
				 2, 0));
	for (int cycle = 0; cycle < 2; cycle++) {
		FT_RUN(remount_clean());
		FT_EQ(ferrite_getxattrat(fs, FERRITE_AT_ROOT, "/a", 0, "user.k", buf, sizeof(buf)),
		      2);
		FT_CHECK(memcmp(buf, "va", 2) == 0, "value of /a after remount");
		FT_EQ(
		    ferrite_getxattrat(fs, FERRITE_AT_ROOT, "/a", 0, "trusted.k", buf, sizeof(buf)),
		    2);
		FT_CHECK(memcmp(buf, "ta", 2) == 0, "trusted value of /a after remount");
		FT_EQ(
		    ferrite_getxattrat(fs, FERRITE_AT_ROOT, "/dir", 0, "user.k", buf, sizeof(buf)),
		    2);
		FT_EQ(ferrite_getxattrat(fs, FERRITE_AT_ROOT, "/l", AT_SYMLINK_NOFOLLOW,
					 "trusted.k", buf, sizeof(buf)),
		      2);
		FT_CHECK(memcmp(buf, "tl", 2) == 0, "value of the link after remount");
	}
	FT_UNMOUNT_CLEAN(&fs, pool);
	return 0;
}

/* The space comes back when the inode goes: unlinked while closed, unlinked
 * while still open, a directory removed. Needs ino_drop_tx to call
 * xattr_release_tx (see tests/api/CMakeLists.txt). */
static int c_release(void)
{
	struct ferrite_info i0, i1;
	char buf[16];
	FT_RUN(mkfile("/a", 0644));
	FT_RUN(mkfile("/b", 0644));
	FT_OK(ferrite_mkdir(fs, "/dir", 0755));
	FT_OK(ferrite_get_info(fs, &i0)); /* metadata blocks the inodes took stay */
	FT_OK(ferrite_setxattrat(fs, FERRITE_AT_ROOT, "/a", 0, "user.k", "va", 2, 0));
	FT_OK(ferrite_setxattrat(fs, FERRITE_AT_ROOT, "/b", 0, "trusted.k", "vb", 2, 0));
	FT_OK(ferrite_setxattrat(fs, FERRITE_AT_ROOT, "/dir", 0, "user.k", "vd", 2, 0));
	int fd = (int)FT_OK(ferrite_open(fs, "/b", O_RDONLY, 0));
	FT_OK(ferrite_unlink(fs, "/a"));
	FT_OK(ferrite_unlink(fs, "/b"));
	FT_OK(ferrite_rmdir(fs, "/dir"));
	FT_EQ(ferrite_fgetxattr(fs, fd, "trusted.k", buf, sizeof(buf)), 2);
	FT_OK(ferrite_close(fs, fd));
	FT_OK(ferrite_get_info(fs, &i1));
	FT_EQ(i1.free_bytes, i0.free_bytes);
	FT_UNMOUNT_CLEAN(&fs, pool);
	return 0;
}

static const struct ft_case cases[] = {
    {"basic", c_basic, 0},	 {"limits", c_limits, 0}, {"permissions", c_permissions, 0},
    {"opath_at", c_opath_at, 0}, {"many", c_many, 0},	  {"persist", c_persist, 0},
    {"release", c_release, 0},
};

int main(int argc, char **argv)
{
	umask(0);
	pool = ft_pool_path("xattr", "main");
	return ft_run(cases, sizeof(cases) / sizeof(cases[0]), argc, argv, before, after);
}
