/*
 * ferrite_linux.c -- the Linux reference: ferrite.h implemented by the kernel
 * on a directory of the host (tmpfs under /dev/shm). The api tests are built a
 * second time against it ("*.linux_oracle" in CTest), which proves that every
 * errno and every behaviour they expect from Ferrite is what Linux does.
 *
 * Mapping: a "pool" is a directory; paths are resolved relative to it with the
 * *at() calls (so tests that follow absolute symlinks or ".." out of "/" are
 * marked FT_ORACLE_SKIP). ferrite_set_creds() uses setfsuid/setfsgid, which
 * drop the file-system capabilities of root like a real non-root caller.
 * Nothing here is part of Ferrite.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <grp.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/fsuid.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "ferrite.h"

#define LR_MAXFD 65536
struct ferrite_dir {
	DIR *d;
	struct ferrite_dir *next;
};

struct ferrite_fs {
	int rootfd;
	char root[PATH_MAX];
	unsigned char open[LR_MAXFD]; /* descriptors to close at unmount */
	struct ferrite_dir *dirs;
};

static ferrite_fs *lr_fs; /* the dir streams know no fs: one mount at a time */

static int lr_track(ferrite_fs *fs, int fd)
{
	if (fd >= 0 && fd < LR_MAXFD)
		fs->open[fd] = 1;
	return fd;
}

static __thread char lr_msg[256];

static int lr_fail(const char *op, int err)
{
	snprintf(lr_msg, sizeof(lr_msg), "linuxref: %s: %s", op, strerror(err));
	return -err;
}

#define LR_RET(op, call)                                                                           \
	do {                                                                                       \
		long lr_r_ = (long)(call);                                                         \
		return lr_r_ < 0 ? lr_fail(op, errno) : (int)lr_r_;                                \
	} while (0)
#define LR_RETSZ(op, call)                                                                         \
	do {                                                                                       \
		ssize_t lr_r_ = (ssize_t)(call);                                                   \
		return lr_r_ < 0 ? lr_fail(op, errno) : lr_r_;                                     \
	} while (0)

/* Pool-relative path; NULL path -> EFAULT like the kernel, length checked
 * like getname() (a name of PATH_MAX bytes or more is too long). */
static int lr_rel(const char *path, const char **out)
{
	if (!path)
		return lr_fail("path", EFAULT);
	if (strlen(path) >= PATH_MAX)
		return lr_fail("path", ENAMETOOLONG);
	if (path[0] == '\0') {
		*out = path;
		return 0;
	}
	while (*path == '/')
		path++;
	*out = *path ? path : ".";
	return 0;
}

#define LR_PATH(p, rel)                                                                            \
	const char *rel;                                                                           \
	do {                                                                                       \
		int lr_e_ = lr_rel(p, &rel);                                                       \
		if (lr_e_)                                                                         \
			return lr_e_;                                                              \
	} while (0)

const char *ferrite_default_pool(void)
{
	const char *p = getenv("FERRITE_POOL");
	return p ? p : "/dev/shm/ferrite/default.pool";
}

static int lr_rm(const char *p, const struct stat *st, int flag, struct FTW *f)
{
	(void)st, (void)flag;
	if (f->level > 0)
		remove(p);
	return 0;
}

int ferrite_mkfs(const char *pool, const struct ferrite_mkfs_opts *opts)
{
	if (!pool)
		return lr_fail("mkfs", EFAULT);
	if (mkdir(pool, 0755) == 0)
		return 0;
	if (errno != EEXIST || !opts || !opts->force)
		return lr_fail("mkfs", errno);
	nftw(pool, lr_rm, 16, FTW_DEPTH | FTW_PHYS);
	return chmod(pool, 0755) < 0 ? lr_fail("mkfs", errno) : 0;
}

int ferrite_mount(const char *pool, const struct ferrite_mount_opts *opts, ferrite_fs **out)
{
	if (!pool || !out)
		return lr_fail("mount", EFAULT);
	int fd = open(pool, O_RDONLY | O_DIRECTORY);
	if (fd < 0)
		return lr_fail("mount", errno);
	ferrite_fs *fs = calloc(1, sizeof(*fs));
	fs->rootfd = fd;
	snprintf(fs->root, sizeof(fs->root), "%s", pool);
	lr_fs = fs;
	*out = fs;
	return 0;
}

int ferrite_unmount(ferrite_fs *fs)
{
	if (!fs)
		return lr_fail("unmount", EINVAL);
	for (int fd = 0; fd < LR_MAXFD; fd++)
		if (fs->open[fd])
			close(fd);
	while (fs->dirs) {
		struct ferrite_dir *d = fs->dirs;
		fs->dirs = d->next;
		closedir(d->d);
		free(d);
	}
	close(fs->rootfd);
	if (lr_fs == fs)
		lr_fs = NULL;
	free(fs);
	return 0;
}

const char *ferrite_errmsg(void)
{
	return lr_msg;
}

static gid_t lr_groups[NGROUPS_MAX];
static int lr_ngroups = -1;

int ferrite_set_creds(uid_t uid, gid_t gid, size_t ngroups, const gid_t *groups)
{
	if (lr_ngroups < 0)
		lr_ngroups = getgroups(NGROUPS_MAX, lr_groups);
	if (setgroups(ngroups, groups) < 0)
		return lr_fail("setgroups", errno);
	setfsgid(gid);
	setfsuid(uid);
	return 0;
}

void ferrite_reset_creds(void)
{
	setfsuid(geteuid());
	setfsgid(getegid());
	if (lr_ngroups >= 0)
		setgroups((size_t)lr_ngroups, lr_groups);
}

int ferrite_open(ferrite_fs *fs, const char *path, int flags, mode_t mode)
{
	LR_PATH(path, rel);
	int fd = openat(fs->rootfd, rel, flags, mode);
	return fd < 0 ? lr_fail("open", errno) : lr_track(fs, fd);
}

int ferrite_close(ferrite_fs *fs, int fd)
{
	if (fd >= 0 && fd < LR_MAXFD && fd != fs->rootfd)
		fs->open[fd] = 0;
	LR_RET("close", close(fd));
}

int ferrite_dup(ferrite_fs *fs, int fd)
{
	int nfd = dup(fd);
	return nfd < 0 ? lr_fail("dup", errno) : lr_track(fs, nfd);
}

ssize_t ferrite_read(ferrite_fs *fs, int fd, void *buf, size_t count)
{
	LR_RETSZ("read", read(fd, buf, count));
}

ssize_t ferrite_write(ferrite_fs *fs, int fd, const void *buf, size_t count)
{
	LR_RETSZ("write", write(fd, buf, count));
}

ssize_t ferrite_pread(ferrite_fs *fs, int fd, void *buf, size_t count, off_t offset)
{
	LR_RETSZ("pread", pread(fd, buf, count, offset));
}

ssize_t ferrite_pwrite(ferrite_fs *fs, int fd, const void *buf, size_t count, off_t offset)
{
	LR_RETSZ("pwrite", pwrite(fd, buf, count, offset));
}

ssize_t ferrite_readv(ferrite_fs *fs, int fd, const struct iovec *iov, int iovcnt)
{
	LR_RETSZ("readv", readv(fd, iov, iovcnt));
}

ssize_t ferrite_writev(ferrite_fs *fs, int fd, const struct iovec *iov, int iovcnt)
{
	LR_RETSZ("writev", writev(fd, iov, iovcnt));
}

ssize_t ferrite_preadv(ferrite_fs *fs, int fd, const struct iovec *iov, int iovcnt, off_t offset)
{
	LR_RETSZ("preadv", preadv(fd, iov, iovcnt, offset));
}

ssize_t ferrite_pwritev(ferrite_fs *fs, int fd, const struct iovec *iov, int iovcnt, off_t offset)
{
	LR_RETSZ("pwritev", pwritev(fd, iov, iovcnt, offset));
}

off_t ferrite_lseek(ferrite_fs *fs, int fd, off_t offset, int whence)
{
	off_t r = lseek(fd, offset, whence);
	return r < 0 ? lr_fail("lseek", errno) : r;
}

int ferrite_ftruncate(ferrite_fs *fs, int fd, off_t length)
{
	LR_RET("ftruncate", ftruncate(fd, length));
}

int ferrite_truncate(ferrite_fs *fs, const char *path, off_t length)
{
	LR_PATH(path, rel);
	int fd = openat(fs->rootfd, rel, O_WRONLY);
	if (fd < 0)
		return lr_fail("truncate", errno);
	int r = ftruncate(fd, length);
	int e = errno;
	close(fd);
	return r < 0 ? lr_fail("truncate", e) : 0;
}

int ferrite_fallocate(ferrite_fs *fs, int fd, int mode, off_t offset, off_t len)
{
	LR_RET("fallocate", fallocate(fd, mode, offset, len));
}

int ferrite_fsync(ferrite_fs *fs, int fd)
{
	LR_RET("fsync", fsync(fd));
}

int ferrite_fdatasync(ferrite_fs *fs, int fd)
{
	LR_RET("fdatasync", fdatasync(fd));
}

int ferrite_stat(ferrite_fs *fs, const char *path, struct stat *st)
{
	LR_PATH(path, rel);
	LR_RET("stat", fstatat(fs->rootfd, rel, st, 0));
}

int ferrite_lstat(ferrite_fs *fs, const char *path, struct stat *st)
{
	LR_PATH(path, rel);
	LR_RET("lstat", fstatat(fs->rootfd, rel, st, AT_SYMLINK_NOFOLLOW));
}

int ferrite_fstat(ferrite_fs *fs, int fd, struct stat *st)
{
	LR_RET("fstat", fstat(fd, st));
}

int ferrite_statvfs(ferrite_fs *fs, struct statvfs *sv)
{
	LR_RET("statvfs", fstatvfs(fs->rootfd, sv));
}

int ferrite_chmod(ferrite_fs *fs, const char *path, mode_t mode)
{
	LR_PATH(path, rel);
	LR_RET("chmod", fchmodat(fs->rootfd, rel, mode, 0));
}

int ferrite_fchmod(ferrite_fs *fs, int fd, mode_t mode)
{
	LR_RET("fchmod", fchmod(fd, mode));
}

int ferrite_chown(ferrite_fs *fs, const char *path, uid_t uid, gid_t gid)
{
	LR_PATH(path, rel);
	LR_RET("chown", fchownat(fs->rootfd, rel, uid, gid, 0));
}

int ferrite_lchown(ferrite_fs *fs, const char *path, uid_t uid, gid_t gid)
{
	LR_PATH(path, rel);
	LR_RET("lchown", fchownat(fs->rootfd, rel, uid, gid, AT_SYMLINK_NOFOLLOW));
}

int ferrite_fchown(ferrite_fs *fs, int fd, uid_t uid, gid_t gid)
{
	LR_RET("fchown", fchown(fd, uid, gid));
}

int ferrite_utimens(ferrite_fs *fs, const char *path, const struct timespec times[2], int flags)
{
	LR_PATH(path, rel);
	LR_RET("utimens", utimensat(fs->rootfd, rel, times, flags));
}

int ferrite_futimens(ferrite_fs *fs, int fd, const struct timespec times[2])
{
	LR_RET("futimens", futimens(fd, times));
}

int ferrite_access(ferrite_fs *fs, const char *path, int mode)
{
	LR_PATH(path, rel);
	LR_RET("access", faccessat(fs->rootfd, rel, mode, AT_EACCESS));
}

int ferrite_mkdir(ferrite_fs *fs, const char *path, mode_t mode)
{
	LR_PATH(path, rel);
	LR_RET("mkdir", mkdirat(fs->rootfd, rel, mode));
}

int ferrite_rmdir(ferrite_fs *fs, const char *path)
{
	LR_PATH(path, rel);
	LR_RET("rmdir", unlinkat(fs->rootfd, rel, AT_REMOVEDIR));
}

int ferrite_unlink(ferrite_fs *fs, const char *path)
{
	LR_PATH(path, rel);
	LR_RET("unlink", unlinkat(fs->rootfd, rel, 0));
}

int ferrite_rename(ferrite_fs *fs, const char *oldpath, const char *newpath, unsigned flags)
{
	LR_PATH(oldpath, o);
	LR_PATH(newpath, n);
	LR_RET("rename", renameat2(fs->rootfd, o, fs->rootfd, n, flags));
}

int ferrite_link(ferrite_fs *fs, const char *oldpath, const char *newpath)
{
	LR_PATH(oldpath, o);
	LR_PATH(newpath, n);
	LR_RET("link", linkat(fs->rootfd, o, fs->rootfd, n, 0));
}

int ferrite_symlink(ferrite_fs *fs, const char *target, const char *linkpath)
{
	LR_PATH(linkpath, rel);
	LR_RET("symlink", symlinkat(target, fs->rootfd, rel));
}

ssize_t ferrite_readlink(ferrite_fs *fs, const char *path, char *buf, size_t size)
{
	LR_PATH(path, rel);
	LR_RETSZ("readlink", readlinkat(fs->rootfd, rel, buf, size));
}

int ferrite_opendir(ferrite_fs *fs, const char *path, ferrite_dir **out)
{
	LR_PATH(path, rel);
	int fd = openat(fs->rootfd, rel, O_RDONLY | O_DIRECTORY);
	if (fd < 0)
		return lr_fail("opendir", errno);
	DIR *d = fdopendir(fd);
	if (!d) {
		int e = errno;
		close(fd);
		return lr_fail("opendir", e);
	}
	*out = calloc(1, sizeof(**out));
	(*out)->d = d;
	(*out)->next = fs->dirs;
	fs->dirs = *out;
	return 0;
}

int ferrite_readdir(ferrite_dir *dir, struct ferrite_dirent *ent)
{
	if (!dir)
		return lr_fail("readdir", EINVAL);
	errno = 0;
	struct dirent *de = readdir(dir->d);
	if (!de)
		return errno ? lr_fail("readdir", errno) : 0;
	ent->ino = de->d_ino;
	ent->off = de->d_off;
	ent->type = de->d_type;
	snprintf(ent->name, sizeof(ent->name), "%s", de->d_name);
	return 1;
}

int64_t ferrite_telldir(ferrite_dir *dir)
{
	return telldir(dir->d);
}

int ferrite_seekdir(ferrite_dir *dir, int64_t cookie)
{
	seekdir(dir->d, (long)cookie);
	return 0;
}

int ferrite_rewinddir(ferrite_dir *dir)
{
	rewinddir(dir->d);
	return 0;
}

int ferrite_closedir(ferrite_dir *dir)
{
	if (!dir)
		return lr_fail("closedir", EINVAL);
	for (struct ferrite_dir **p = lr_fs ? &lr_fs->dirs : NULL; p && *p; p = &(*p)->next) {
		if (*p == dir) {
			*p = dir->next;
			break;
		}
	}
	closedir(dir->d);
	free(dir);
	return 0;
}

int ferrite_get_info(ferrite_fs *fs, struct ferrite_info *info)
{
	memset(info, 0, sizeof(*info));
	struct statvfs sv;
	if (fstatvfs(fs->rootfd, &sv) < 0)
		return lr_fail("info", errno);
	info->pool_bytes = info->data_bytes = (uint64_t)sv.f_blocks * sv.f_frsize;
	info->free_bytes = (uint64_t)sv.f_bfree * sv.f_frsize;
	info->max_file_size = (uint64_t)LLONG_MAX; /* MAX_LFS_FILESIZE of tmpfs */
	snprintf(info->backing, sizeof(info->backing), "linuxref:%.140s", fs->root);
	return 0;
}

int ferrite_fsck(const char *pool, int repair, void (*report)(void *arg, const char *line),
		 void *report_arg, void (*progress)(void *arg, uint64_t done, uint64_t total),
		 void *progress_arg)
{
	struct stat st;
	if (!pool)
		return lr_fail("fsck", EFAULT);
	if (stat(pool, &st) < 0)
		return lr_fail("fsck", errno);
	return FERRITE_FSCK_CLEAN;
}

/* ---- the *at family: FERRITE_AT_ROOT and absolute paths start at the pool */

static int lr_at(ferrite_fs *fs, int dirfd, const char **path)
{
	if (*path && (*path)[0] == '/') {
		while ((*path)[0] == '/')
			(*path)++;
		if (!**path)
			*path = ".";
		return fs->rootfd;
	}
	return dirfd == FERRITE_AT_ROOT ? fs->rootfd : dirfd;
}

int ferrite_openat(ferrite_fs *fs, int dirfd, const char *path, int flags, mode_t mode)
{
	int d = lr_at(fs, dirfd, &path);
	int fd = openat(d, path, flags, mode);
	return fd < 0 ? lr_fail("openat", errno) : lr_track(fs, fd);
}

int ferrite_reopen(ferrite_fs *fs, int fd, int flags)
{
	char p[64];
	if (flags & (O_CREAT | O_EXCL))
		return lr_fail("reopen", EINVAL);
	snprintf(p, sizeof(p), "/proc/self/fd/%d", fd);
	int nfd = open(p, flags);
	return nfd < 0 ? lr_fail("reopen", errno) : lr_track(fs, nfd);
}

int ferrite_fstatat(ferrite_fs *fs, int dirfd, const char *path, struct stat *st, int flags)
{
	int d = lr_at(fs, dirfd, &path);
	LR_RET("fstatat", fstatat(d, path, st, flags));
}

int ferrite_faccessat(ferrite_fs *fs, int dirfd, const char *path, int mode, int flags)
{
	int d = lr_at(fs, dirfd, &path);
	LR_RET("faccessat", faccessat(d, path, mode, flags));
}

int ferrite_fchmodat(ferrite_fs *fs, int dirfd, const char *path, mode_t mode, int flags)
{
	int d = lr_at(fs, dirfd, &path);
	LR_RET("fchmodat", fchmodat(d, path, mode, flags));
}

int ferrite_fchownat(ferrite_fs *fs, int dirfd, const char *path, uid_t uid, gid_t gid, int flags)
{
	int d = lr_at(fs, dirfd, &path);
	LR_RET("fchownat", fchownat(d, path, uid, gid, flags));
}

int ferrite_utimensat(ferrite_fs *fs, int dirfd, const char *path, const struct timespec times[2],
		      int flags)
{
	int d = lr_at(fs, dirfd, &path);
	if (!path) /* glibc's utimensat refuses NULL (it declares path nonnull) */
		return lr_fail("utimensat", EINVAL);
	LR_RET("utimensat", utimensat(d, path, times, flags));
}

int ferrite_mkdirat(ferrite_fs *fs, int dirfd, const char *path, mode_t mode)
{
	int d = lr_at(fs, dirfd, &path);
	LR_RET("mkdirat", mkdirat(d, path, mode));
}

int ferrite_mknodat(ferrite_fs *fs, int dirfd, const char *path, mode_t mode, dev_t rdev)
{
	int d = lr_at(fs, dirfd, &path);
	LR_RET("mknodat", mknodat(d, path, mode, rdev));
}

int ferrite_unlinkat(ferrite_fs *fs, int dirfd, const char *path, int flags)
{
	int d = lr_at(fs, dirfd, &path);
	LR_RET("unlinkat", unlinkat(d, path, flags));
}

int ferrite_renameat2(ferrite_fs *fs, int olddirfd, const char *oldpath, int newdirfd,
		      const char *newpath, unsigned flags)
{
	int od = lr_at(fs, olddirfd, &oldpath);
	int nd = lr_at(fs, newdirfd, &newpath);
	LR_RET("renameat2", renameat2(od, oldpath, nd, newpath, flags));
}

int ferrite_linkat(ferrite_fs *fs, int olddirfd, const char *oldpath, int newdirfd,
		   const char *newpath, int flags)
{
	int od = lr_at(fs, olddirfd, &oldpath);
	int nd = lr_at(fs, newdirfd, &newpath);
	LR_RET("linkat", linkat(od, oldpath, nd, newpath, flags));
}

int ferrite_symlinkat(ferrite_fs *fs, const char *target, int newdirfd, const char *linkpath)
{
	int d = lr_at(fs, newdirfd, &linkpath);
	LR_RET("symlinkat", symlinkat(target, d, linkpath));
}

ssize_t ferrite_readlinkat(ferrite_fs *fs, int dirfd, const char *path, char *buf, size_t size)
{
	int d = lr_at(fs, dirfd, &path);
	LR_RETSZ("readlinkat", readlinkat(d, path, buf, size));
}

int ferrite_fdopendir(ferrite_fs *fs, int fd, ferrite_dir **out)
{
	/* fdopendir consumes its descriptor; ferrite's stream does not. */
	int d = fcntl(fd, F_DUPFD_CLOEXEC, 0);
	if (d < 0)
		return lr_fail("fdopendir", errno);
	DIR *dir = fdopendir(d);
	if (!dir) {
		int e = errno;
		close(d);
		return lr_fail("fdopendir", e);
	}
	struct ferrite_dir *fd_ = calloc(1, sizeof(*fd_));
	fd_->d = dir;
	fd_->next = fs->dirs;
	fs->dirs = fd_;
	*out = fd_;
	return 0;
}

int ferrite_getfl(ferrite_fs *fs, int fd)
{
	LR_RET("getfl", fcntl(fd, F_GETFL));
}

int ferrite_setfl(ferrite_fs *fs, int fd, int flags)
{
	LR_RET("setfl", fcntl(fd, F_SETFL, flags));
}

ssize_t ferrite_copy_file_range(ferrite_fs *fs, int fd_in, off_t *off_in, int fd_out,
				off_t *off_out, size_t len, unsigned flags)
{
	LR_RETSZ("copy_file_range", copy_file_range(fd_in, off_in, fd_out, off_out, len, flags));
}

/* The host namespace has no prefix to strip: the cases using it are skipped. */
int ferrite_set_link_prefix(ferrite_fs *fs, const char *prefix)
{
	return lr_fail("set_link_prefix", EOPNOTSUPP);
}

const char *ferrite_escaped_path(void)
{
	return "";
}
