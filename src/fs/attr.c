/*
 * attr.c -- permission checks and attribute operations: stat, chmod,
 * chown, utimens, access, statvfs (the caller's credentials: vfs/caller.c).
 *
 * Permission model: POSIX mode bits with owner/group/other classes and
 * supplementary groups; uid 0 passes every check except execute on a file
 * with no execute bit.
 * Crash argument: each attribute change (mode, owner, times) is one
 * transaction of the inode's words (meta/log.c): a crash leaves the old
 * attributes or the new ones, never a mix (a chown that clears set-id bits
 * commits both together).
 */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fs/fs.h"
#include "persist/pm.h"

int perm_check(const struct vfs_cred *c, struct tx *tx, const struct fr_inode *ip, int mask)
{
	uint32_t mode = rd4(tx, &ip->i_mode);
	if (c->uid == 0) {
		if ((mask & 1) && !S_ISDIR(mode) && !(mode & 0111))
			return -EACCES;
		return 0;
	}
	unsigned bits;
	if (c->uid == rd4(tx, &ip->i_uid))
		bits = (mode >> 6) & 7;
	else if (cred_in_group(c, rd4(tx, &ip->i_gid)))
		bits = (mode >> 3) & 7;
	else
		bits = mode & 7;
	return ((unsigned)mask & ~bits) ? -EACCES : 0;
}

static void inode_to_stat(ferrite_fs *fs, const struct fr_inode *ip, struct stat *st)
{
	memset(st, 0, sizeof(*st));
	uint64_t dev;
	memcpy(&dev, fs->m.sb->sb_uuid, sizeof(dev));
	st->st_dev = (dev_t)(dev & 0xffffffffULL);
	st->st_ino = (ino_t)ino_of(fs, ip);
	st->st_mode = ip->i_mode;
	st->st_nlink = ip->i_nlink;
	st->st_uid = ip->i_uid;
	st->st_gid = ip->i_gid;
	st->st_size = (off_t)ip->i_size;
	if (S_ISDIR(ip->i_mode) && ip->i_dkind != I_DIR_LARGE)
		st->st_size = 4096; /* small directories live in a dentry pool entry */
	if (S_ISCHR(ip->i_mode) || S_ISBLK(ip->i_mode)) {
		uint64_t rdev;
		memcpy(&rdev, ip->i_inline, sizeof(rdev));
		st->st_rdev = (dev_t)rdev;
	}
	st->st_blksize = 4096;
	/* An empty file may hold the page of the null file it was made from
	 * (nullfile.c): pre-allocated, unwritten, not counted. */
	st->st_blocks = S_ISREG(ip->i_mode) && !ip->i_size ? 0 : (blkcnt_t)(ip->i_blocks * 8);
	st->st_atim.tv_sec = ip->i_atime_sec;
	st->st_atim.tv_nsec = ip->i_atime_nsec;
	st->st_mtim.tv_sec = ip->i_mtime_sec;
	st->st_mtim.tv_nsec = ip->i_mtime_nsec;
	st->st_ctim.tv_sec = ip->i_ctime_sec;
	st->st_ctim.tv_nsec = ip->i_ctime_nsec;
}

int fs_stat_ino(ferrite_fs *fs, uint64_t ino, struct stat *st)
{
	pthread_rwlock_t *lk = ino_lock(fs, ino);
	pthread_rwlock_rdlock(lk);
	inode_to_stat(fs, ino_ptr(fs, ino), st);
	pthread_rwlock_unlock(lk);
	return 0;
}

/* Runs change(tx, ip, arg) on one inode in its own transaction. */
static int attr_tx(ferrite_fs *fs, uint64_t ino,
		   int (*change)(ferrite_fs *, struct tx *, struct fr_inode *, const void *),
		   const void *arg)
{
	pthread_rwlock_t *lk = ino_lock(fs, ino);
	pthread_rwlock_wrlock(lk);
	struct log_ctx *lc = op_begin(fs);
	int rc = -ENOMEM;
	if (lc) {
		rc = change(fs, lc->tx, ino_ptr(fs, ino), arg);
		if (rc)
			tx_abort(lc->tx);
		else
			rc = op_commit(fs, lc);
		op_end(fs, lc);
	}
	pthread_rwlock_unlock(lk);
	return rc;
}

static int do_chmod(ferrite_fs *fs, struct tx *tx, struct fr_inode *ip, const void *arg)
{
	const struct vfs_cred *c = cred_get();
	mode_t mode = *(const mode_t *)arg & 07777;
	if (c->uid != 0 && c->uid != ip->i_uid)
		return -EPERM;
	if (c->uid != 0 && !S_ISDIR(ip->i_mode) && !cred_in_group(c, ip->i_gid))
		mode &= ~(mode_t)S_ISGID;
	tx_set4(tx, &ip->i_mode, (ip->i_mode & S_IFMT) | mode);
	struct timespec now;
	fs_now(&now);
	ino_set_times(tx, ip, T_CTIME, &now);
	return 0;
}

int fs_chmod_ino(ferrite_fs *fs, uint64_t ino, mode_t mode)
{
	return attr_tx(fs, ino, do_chmod, &mode);
}

struct chown_arg {
	uid_t uid;
	gid_t gid;
};

static int do_chown(ferrite_fs *fs, struct tx *tx, struct fr_inode *ip, const void *arg)
{
	const struct chown_arg *a = arg;
	const struct vfs_cred *c = cred_get();
	uid_t uid = a->uid == (uid_t)-1 ? ip->i_uid : a->uid;
	gid_t gid = a->gid == (gid_t)-1 ? ip->i_gid : a->gid;
	if (c->uid != 0) {
		if (uid != ip->i_uid || c->uid != ip->i_uid)
			return -EPERM;
		if (gid != ip->i_gid && !cred_in_group(c, gid))
			return -EPERM;
	}
	uint32_t mode = ip->i_mode;
	if (!S_ISDIR(mode) && (a->uid != (uid_t)-1 || a->gid != (gid_t)-1)) {
		mode &= ~(uint32_t)S_ISUID;
		if (mode & S_IXGRP)
			mode &= ~(uint32_t)S_ISGID;
	}
	tx_set4(tx, &ip->i_uid, uid);
	tx_set4(tx, &ip->i_gid, gid);
	tx_set4(tx, &ip->i_mode, mode);
	struct timespec now;
	fs_now(&now);
	ino_set_times(tx, ip, T_CTIME, &now);
	return 0;
}

int fs_chown_ino(ferrite_fs *fs, uint64_t ino, uid_t uid, gid_t gid)
{
	struct chown_arg a = {uid, gid};
	return attr_tx(fs, ino, do_chown, &a);
}

static int do_utimens(ferrite_fs *fs, struct tx *tx, struct fr_inode *ip, const void *arg)
{
	const struct timespec *t = arg;
	const struct vfs_cred *c = cred_get();
	struct timespec now;
	fs_now(&now);
	int explicit_time = 0, any = 0;
	for (int i = 0; i < 2; i++) {
		if (t[i].tv_nsec == UTIME_OMIT)
			continue;
		any = 1;
		if (t[i].tv_nsec != UTIME_NOW) {
			if (t[i].tv_nsec < 0 || t[i].tv_nsec >= 1000000000L)
				return -EINVAL;
			explicit_time = 1;
		}
	}
	if (!any)
		return 0;
	if (c->uid != 0 && c->uid != ip->i_uid) {
		if (explicit_time)
			return -EPERM;
		if (perm_check(c, NULL, ip, 2))
			return -EACCES;
	}
	for (int i = 0; i < 2; i++) {
		if (t[i].tv_nsec == UTIME_OMIT)
			continue;
		const struct timespec *v = t[i].tv_nsec == UTIME_NOW ? &now : &t[i];
		ino_set_times(tx, ip, i == 0 ? T_ATIME : T_MTIME, v);
	}
	ino_set_times(tx, ip, T_CTIME, &now);
	return 0;
}

int fs_utimens_ino(ferrite_fs *fs, uint64_t ino, const struct timespec times[2])
{
	struct timespec t[2];
	if (times) {
		t[0] = times[0];
		t[1] = times[1];
	} else {
		t[0].tv_sec = t[1].tv_sec = 0;
		t[0].tv_nsec = t[1].tv_nsec = UTIME_NOW;
	}
	return attr_tx(fs, ino, do_utimens, t);
}

int fs_access_ino(ferrite_fs *fs, uint64_t ino, int mode)
{
	if (mode & ~(R_OK | W_OK | X_OK))
		return -EINVAL;
	if (mode == F_OK)
		return 0;
	int mask = ((mode & R_OK) ? 4 : 0) | ((mode & W_OK) ? 2 : 0) | ((mode & X_OK) ? 1 : 0);
	return perm_check(cred_get(), NULL, ino_ptr(fs, ino), mask);
}

int fs_statvfs(ferrite_fs *fs, struct statvfs *sv)
{
	if (!sv)
		return -EFAULT;
	memset(sv, 0, sizeof(*sv));
	struct space *sp = &fs->m.sp;
	struct mp_head *ih = &fs->m.st->st_pools[MP_INODE];
	int v4 = fs->m.sb->sb_version >= FR_FORMAT_SMALL_BLOCKS;
	/* Pages windows reserved and did not write come back on demand
	 * (window.c W1): they are free space. */
	/* So are null files' pages (nullfile.c N2): the collector frees them,
	 * and their inodes, before any call is refused. */
	uint64_t nulls = null_enabled(fs) ? FR_MIN(fs->m.st->st_null_count, ih->mph_live) : 0;
	uint64_t freep = bud_free_pages(sp) + (v4 ? sp->hdr->sph_prealloc_pages : 0) + nulls;
	sv->f_bsize = 4096;
	sv->f_frsize = 4096;
	sv->f_blocks = sp->data_end_page - sp->data_page;
	sv->f_bfree = freep;
	/* What a user can surely fill with data: one page in sixteen is kept
	 * back for the inodes (256 bytes) of the files that would fill the rest
	 * one page each (README, "Space"). */
	sv->f_bavail = v4 ? freep - freep / 16 : freep;
	/* Inodes come from pool blocks allocated on demand, so every free page
	 * can become inodes. The promise is what a page surely gives once the
	 * file's directory entry is paid for too: 15 inodes of a block page,
	 * and a hashed directory's buckets are at least about two-thirds full,
	 * so 10 files a page. A free inode entry counts a third: the new name may
	 * need a bucket page too, and none may be left. Formats 1-3 take whole 2 MiB units for
	 * inode blocks, so a free page promises nothing there. */
	uint64_t per_page = v4 ? 10 : 0;
	uint64_t free_entries = ih->mph_total > ih->mph_live ? ih->mph_total - ih->mph_live : 0;
	if (v4)
		free_entries /= 3;
	uint64_t used = ih->mph_live > nulls ? ih->mph_live - nulls : 0;
	sv->f_files = used + free_entries + freep * per_page;
	sv->f_ffree = sv->f_files - used;
	sv->f_favail = sv->f_ffree;
	uint64_t id;
	memcpy(&id, fs->m.sb->sb_uuid, sizeof(id));
	sv->f_fsid = (unsigned long)id;
	sv->f_namemax = FS_NAME_MAX;
	return 0;
}
