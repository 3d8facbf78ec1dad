/*
 * api.c -- the path-based calls of ferrite.h, each a (dirfd, path) pair: the
 * plain calls are the *at calls relative to the root. Each one clears the
 * thread's error message, calls the fs layer, and makes sure a failure
 * carries a message (ferrite_errmsg). No file-system logic lives here. The
 * directory descriptor stays referenced for the whole call (at_begin/at_end),
 * so a concurrent close cannot release the inode a walk starts from.
 */
#include <errno.h>
#include <fcntl.h>

#include "fs/fs.h"

#define CHECK_FS(fs)                                                                               \
	do {                                                                                       \
		fr_err_clear();                                                                    \
		if (!(fs))                                                                         \
			return api_end(-EINVAL);                                                   \
	} while (0)

/* The thread's shared calls (vs_read_only counts them) and the calls under
 * the turn it makes inside one (a signal handler's): a call inside a
 * shared call of the same pool is shared too, being counted already; once
 * one is under the turn, every call inside it is. */
static __thread ferrite_fs *shared_fs;
static __thread int turn_depth;

void pmfs_call_enter(ferrite_fs *fs)
{
	/* the pool's turn first (space/share.c H1): a quiet moment of this
	 * process's threads is one only while no other process runs a call */
	int why = fs ? meta_turn_enter(&fs->m) : 0;
	turn_depth++;
	if (why & SHARE_FORKED) {
		vn_count_inherited(fs);
		fs_procs_forked_alone(fs);
	}
	vs_call_enter(fs ? &fs->m.sp : NULL); /* NULL: the call fails, the bracket still pairs */
	if (why & SHARE_REAPED)
		orphan_release_unheld(fs); /* a failure leaves them to the next mount */
	if (fs && __atomic_load_n(&fs->late_puts, __ATOMIC_ACQUIRE))
		of_put_late(fs);
}

void pmfs_call_leave(ferrite_fs *fs)
{
	vs_call_leave();
	turn_depth--;
	if (fs)
		meta_turn_leave(&fs->m);
}

int pmfs_shared_enter(ferrite_fs *fs)
{
	if (!fs || turn_depth)
		return 0;
	if (vs_read_only) {
		if (fs != shared_fs)
			return 0;
	} else if (__atomic_load_n(&fs->m.sp.evict, __ATOMIC_SEQ_CST) != VS_EVICT_NONE ||
		   !meta_shared_enter(&fs->m)) {
		/* quiet work waits for this process (an eviction or a
		 * compaction): under the turn, as every call was before H9 */
		return 0;
	}
	if (!vs_read_only++)
		shared_fs = fs;
	vs_call_enter(&fs->m.sp);
	return 1;
}

void pmfs_shared_leave(ferrite_fs *fs)
{
	vs_call_leave();
	if (!--vs_read_only)
		meta_shared_leave(&fs->m);
}

int pmfs_in_shared(void)
{
	return vs_read_only && !turn_depth;
}

int pmfs_get_tier_info(ferrite_fs *fs, struct ferrite_tier_info *info)
{
	CHECK_FS(fs);
	(void)info;
	return api_end(fr_err(-EINVAL, "not a tiered pool"));
}

int pmfs_statvfs(ferrite_fs *fs, struct statvfs *sv)
{
	CHECK_FS(fs);
	return api_end(fs_statvfs(fs, sv));
}

/* Resolves (dirfd, path) to an inode for the calls that act on one. */
static int resolve_at(ferrite_fs *fs, int dirfd, const char *path, int flags, int follow,
		      uint64_t *ino, struct ofile **held)
{
	uint64_t at;
	int rc = at_begin(fs, dirfd, path, flags, &at, held);
	if (rc == 1) {
		*ino = at;
		return 0;
	}
	if (rc)
		return rc;
	struct nameidata nd;
	rc = path_walk(fs, at, path, follow ? LOOKUP_FOLLOW : 0, &nd);
	*ino = nd.ino;
	if (rc) {
		at_end(fs, *held);
		*held = NULL;
	}
	return rc;
}

#define AT_FLAGS_KNOWN (AT_SYMLINK_NOFOLLOW | AT_EMPTY_PATH | AT_NO_AUTOMOUNT)

int pmfs_fstatat(ferrite_fs *fs, int dirfd, const char *path, struct stat *st, int flags)
{
	CHECK_FS(fs);
	if (!st)
		return api_end(-EFAULT);
	if (flags & ~(AT_FLAGS_KNOWN | AT_STATX_SYNC_TYPE))
		return api_end(-EINVAL);
	uint64_t ino;
	struct ofile *held;
	int rc = resolve_at(fs, dirfd, path, flags, !(flags & AT_SYMLINK_NOFOLLOW), &ino, &held);
	if (!rc) {
		rc = fs_stat_ino(fs, ino, st);
		at_end(fs, held);
	}
	return api_end(rc);
}

int pmfs_faccessat(ferrite_fs *fs, int dirfd, const char *path, int mode, int flags)
{
	CHECK_FS(fs);
	if (flags & ~(AT_FLAGS_KNOWN | AT_EACCESS))
		return api_end(-EINVAL);
	uint64_t ino;
	struct ofile *held;
	int rc = resolve_at(fs, dirfd, path, flags, !(flags & AT_SYMLINK_NOFOLLOW), &ino, &held);
	if (!rc) {
		rc = fs_access_ino(fs, ino, mode);
		at_end(fs, held);
	}
	return api_end(rc);
}

int pmfs_fchmodat(ferrite_fs *fs, int dirfd, const char *path, mode_t mode, int flags)
{
	CHECK_FS(fs);
	if (flags & ~AT_FLAGS_KNOWN)
		return api_end(-EINVAL);
	uint64_t ino;
	struct ofile *held;
	int rc = resolve_at(fs, dirfd, path, flags, !(flags & AT_SYMLINK_NOFOLLOW), &ino, &held);
	if (!rc) {
		/* Linux has no mode on symbolic links to change. */
		rc = S_ISLNK(ino_ptr(fs, ino)->i_mode) ? -EOPNOTSUPP : fs_chmod_ino(fs, ino, mode);
		at_end(fs, held);
	}
	return api_end(rc);
}

int pmfs_fchownat(ferrite_fs *fs, int dirfd, const char *path, uid_t uid, gid_t gid, int flags)
{
	CHECK_FS(fs);
	if (flags & ~AT_FLAGS_KNOWN)
		return api_end(-EINVAL);
	uint64_t ino;
	struct ofile *held;
	int rc = resolve_at(fs, dirfd, path, flags, !(flags & AT_SYMLINK_NOFOLLOW), &ino, &held);
	if (!rc) {
		rc = fs_chown_ino(fs, ino, uid, gid);
		at_end(fs, held);
	}
	return api_end(rc);
}

int pmfs_utimensat(ferrite_fs *fs, int dirfd, const char *path, const struct timespec times[2],
		   int flags)
{
	CHECK_FS(fs);
	if (flags & ~AT_FLAGS_KNOWN)
		return api_end(-EINVAL);
	if (!path)
		return api_end(-EINVAL); /* as glibc's utimensat; futimens is the fd call */
	uint64_t ino;
	struct ofile *held;
	int rc = resolve_at(fs, dirfd, path, flags, !(flags & AT_SYMLINK_NOFOLLOW), &ino, &held);
	if (!rc) {
		rc = fs_utimens_ino(fs, ino, times);
		at_end(fs, held);
	}
	return api_end(rc);
}

int pmfs_mknodat(ferrite_fs *fs, int dirfd, const char *path, mode_t mode, dev_t rdev)
{
	CHECK_FS(fs);
	if (!(mode & S_IFMT))
		mode |= S_IFREG;
	uint64_t at;
	struct ofile *held;
	int rc = at_begin(fs, dirfd, path, 0, &at, &held);
	if (!rc)
		rc = fs_mknod(fs, at, path, mode, rdev);
	at_end(fs, held);
	return api_end(rc);
}

int pmfs_mkdirat(ferrite_fs *fs, int dirfd, const char *path, mode_t mode)
{
	return pmfs_mknodat(fs, dirfd, path, S_IFDIR | (mode & 07777), 0);
}

int pmfs_unlinkat(ferrite_fs *fs, int dirfd, const char *path, int flags)
{
	CHECK_FS(fs);
	if (flags & ~AT_REMOVEDIR)
		return api_end(-EINVAL);
	uint64_t at;
	struct ofile *held;
	int rc = at_begin(fs, dirfd, path, 0, &at, &held);
	if (!rc)
		rc = (flags & AT_REMOVEDIR) ? fs_rmdir(fs, at, path) : fs_unlink(fs, at, path);
	at_end(fs, held);
	return api_end(rc);
}

int pmfs_renameat2(ferrite_fs *fs, int olddirfd, const char *oldpath, int newdirfd,
		   const char *newpath, unsigned flags)
{
	CHECK_FS(fs);
	uint64_t oat, nat;
	struct ofile *oheld, *nheld = NULL;
	int rc = at_begin(fs, olddirfd, oldpath, 0, &oat, &oheld);
	if (!rc)
		rc = at_begin(fs, newdirfd, newpath, 0, &nat, &nheld);
	if (!rc)
		rc = fs_rename(fs, oat, oldpath, nat, newpath, flags);
	at_end(fs, nheld);
	at_end(fs, oheld);
	return api_end(rc);
}

int pmfs_linkat(ferrite_fs *fs, int olddirfd, const char *oldpath, int newdirfd,
		const char *newpath, int flags)
{
	CHECK_FS(fs);
	if (flags & ~(AT_SYMLINK_FOLLOW | AT_EMPTY_PATH))
		return api_end(-EINVAL);
	uint64_t oat, nat;
	struct ofile *oheld, *nheld = NULL;
	int rc = at_begin(fs, olddirfd, oldpath, flags & AT_EMPTY_PATH, &oat, &oheld);
	int self = rc == 1;
	if (rc >= 0)
		rc = at_begin(fs, newdirfd, newpath, 0, &nat, &nheld);
	if (!rc)
		rc = fs_link(fs, oat, self ? NULL : oldpath, flags & AT_SYMLINK_FOLLOW, nat,
			     newpath);
	at_end(fs, nheld);
	at_end(fs, oheld);
	return api_end(rc);
}

int pmfs_symlinkat(ferrite_fs *fs, const char *target, int newdirfd, const char *linkpath)
{
	CHECK_FS(fs);
	uint64_t at;
	struct ofile *held;
	int rc = at_begin(fs, newdirfd, linkpath, 0, &at, &held);
	if (!rc)
		rc = fs_symlink(fs, target, at, linkpath);
	at_end(fs, held);
	return api_end(rc);
}

ssize_t pmfs_readlinkat(ferrite_fs *fs, int dirfd, const char *path, char *buf, size_t size)
{
	CHECK_FS(fs);
	if (!buf)
		return api_end(-EFAULT);
	if (size == 0)
		return api_end(-EINVAL);
	uint64_t at;
	struct ofile *held;
	/* An empty path reads the link dirfd names (O_PATH|O_NOFOLLOW). */
	int empty_ok = dirfd != FERRITE_AT_ROOT && (!path || !*path);
	ssize_t n = at_begin(fs, dirfd, path ? path : "", empty_ok ? AT_EMPTY_PATH : 0, &at, &held);
	if (n >= 0)
		n = fs_readlink(fs, at, n == 1 ? NULL : path, buf, size);
	at_end(fs, held);
	return api_end_ss(n);
}
