/*
 * api.c -- the path-based calls of ferrite.h. Each one clears the thread's
 * error message, calls the fs layer, and makes sure a failure carries a
 * message (ferrite_errmsg). No file-system logic lives here.
 */
#include <errno.h>
#include <fcntl.h>

#include "fs/fs.h"

#define CHECK_FS(fs)                                                                               \
	do {                                                                                       \
		fr_err_clear();                                                                    \
		if (!(fs))                                                                         \
			return fr_err_finish(-EINVAL);                                             \
	} while (0)

int ferrite_stat(ferrite_fs *fs, const char *path, struct stat *st)
{
	CHECK_FS(fs);
	return fr_err_finish(fs_stat(fs, path, st, 1));
}

int ferrite_lstat(ferrite_fs *fs, const char *path, struct stat *st)
{
	CHECK_FS(fs);
	return fr_err_finish(fs_stat(fs, path, st, 0));
}

int ferrite_statvfs(ferrite_fs *fs, struct statvfs *sv)
{
	CHECK_FS(fs);
	return fr_err_finish(fs_statvfs(fs, sv));
}

static int resolve(ferrite_fs *fs, const char *path, int follow, uint64_t *ino)
{
	struct nameidata nd;
	int rc = path_walk(fs, path, follow ? LOOKUP_FOLLOW : 0, &nd);
	*ino = nd.ino;
	return rc;
}

int ferrite_chmod(ferrite_fs *fs, const char *path, mode_t mode)
{
	CHECK_FS(fs);
	uint64_t ino;
	int rc = resolve(fs, path, 1, &ino);
	return fr_err_finish(rc ? rc : fs_chmod_ino(fs, ino, mode));
}

static int chown_common(ferrite_fs *fs, const char *path, uid_t uid, gid_t gid, int follow)
{
	uint64_t ino;
	int rc = resolve(fs, path, follow, &ino);
	return rc ? rc : fs_chown_ino(fs, ino, uid, gid);
}

int ferrite_chown(ferrite_fs *fs, const char *path, uid_t uid, gid_t gid)
{
	CHECK_FS(fs);
	return fr_err_finish(chown_common(fs, path, uid, gid, 1));
}

int ferrite_lchown(ferrite_fs *fs, const char *path, uid_t uid, gid_t gid)
{
	CHECK_FS(fs);
	return fr_err_finish(chown_common(fs, path, uid, gid, 0));
}

int ferrite_utimens(ferrite_fs *fs, const char *path, const struct timespec times[2], int flags)
{
	CHECK_FS(fs);
	if (flags & ~AT_SYMLINK_NOFOLLOW)
		return fr_err_finish(-EINVAL);
	uint64_t ino;
	int rc = resolve(fs, path, !(flags & AT_SYMLINK_NOFOLLOW), &ino);
	return fr_err_finish(rc ? rc : fs_utimens_ino(fs, ino, times));
}

int ferrite_access(ferrite_fs *fs, const char *path, int mode)
{
	CHECK_FS(fs);
	return fr_err_finish(fs_access(fs, path, mode));
}

int ferrite_mkdir(ferrite_fs *fs, const char *path, mode_t mode)
{
	CHECK_FS(fs);
	return fr_err_finish(fs_mkdir(fs, path, mode));
}

int ferrite_rmdir(ferrite_fs *fs, const char *path)
{
	CHECK_FS(fs);
	return fr_err_finish(fs_rmdir(fs, path));
}

int ferrite_unlink(ferrite_fs *fs, const char *path)
{
	CHECK_FS(fs);
	return fr_err_finish(fs_unlink(fs, path));
}

int ferrite_rename(ferrite_fs *fs, const char *oldpath, const char *newpath, unsigned flags)
{
	CHECK_FS(fs);
	return fr_err_finish(fs_rename(fs, oldpath, newpath, flags));
}

int ferrite_link(ferrite_fs *fs, const char *oldpath, const char *newpath)
{
	CHECK_FS(fs);
	return fr_err_finish(fs_link(fs, oldpath, newpath));
}

int ferrite_symlink(ferrite_fs *fs, const char *target, const char *linkpath)
{
	CHECK_FS(fs);
	return fr_err_finish(fs_symlink(fs, target, linkpath));
}

ssize_t ferrite_readlink(ferrite_fs *fs, const char *path, char *buf, size_t size)
{
	CHECK_FS(fs);
	if (!buf)
		return fr_err_finish(-EFAULT);
	if (size == 0)
		return fr_err_finish(-EINVAL);
	ssize_t n = fs_readlink(fs, path, buf, size);
	if (n < 0)
		fr_err_finish((int)n);
	return n;
}

const char *ferrite_errmsg(void)
{
	return fr_err_get();
}
