/*
 * inode.c -- inodes: allocation and release, striped inode locks, the
 * orphan list, timestamps, and the per-operation log slot.
 *
 * Inodes are entries of the inode pool, used in place; an inode number is
 * the inode's pool offset / 64, so translating one costs an add.
 *
 * Invariants: I1 a LIVE inode with i_nlink == 0 is on the orphan list (it is
 *               still open somewhere, or its release was interrupted) or is
 *               a null file, on the null list (nullfile.c N1);
 *             I2 (ino, i_generation) is unique among all inodes ever
 *               allocated in the pool: it names one object forever;
 * Crash argument: allocation and release are staged in the operation's
 *   transaction together with the directory change that makes the inode
 *   reachable or unreachable. A release too large for one transaction first
 *   puts the inode on the orphan list in the same transaction that unlinks
 *   it; mount finishes what a crash interrupted (orphan_cleanup).
 * Locking: FS_LOCK_STRIPES reader-writer locks, striped by inode number;
 *   several are always taken in stripe order (ino_lock_many).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fs/fs.h"
#include "fs/xattr.h"
#include "persist/pm.h"

/* File times come from the coarse clock, as in the Linux VFS (current_time):
 * a tick's resolution, stored to the nanosecond, at a fifth of the cost. */
void fs_now(struct timespec *ts)
{
	clock_gettime(CLOCK_REALTIME_COARSE, ts);
}

static unsigned stripe_of(uint64_t ino)
{
	return (unsigned)((ino * 0x9e3779b97f4a7c15ULL) >> 52) & (FS_LOCK_STRIPES - 1);
}

pthread_rwlock_t *ino_lock(ferrite_fs *fs, uint64_t ino)
{
	return &fs->locks[stripe_of(ino)];
}

static int stripes_sorted(ferrite_fs *fs, const uint64_t *inos, int n, unsigned *out)
{
	int k = 0;
	for (int i = 0; i < n; i++) {
		if (!inos[i])
			continue;
		unsigned s = stripe_of(inos[i]);
		int dup = 0;
		for (int j = 0; j < k; j++)
			dup |= out[j] == s;
		if (!dup)
			out[k++] = s;
	}
	for (int i = 1; i < k; i++)
		for (int j = i; j > 0 && out[j - 1] > out[j]; j--) {
			unsigned t = out[j];
			out[j] = out[j - 1];
			out[j - 1] = t;
		}
	return k;
}

void ino_lock_many(ferrite_fs *fs, uint64_t *inos, int n)
{
	unsigned s[8];
	int k = stripes_sorted(fs, inos, n, s);
	for (int i = 0; i < k; i++)
		pthread_rwlock_wrlock(&fs->locks[s[i]]);
}

void ino_unlock_many(ferrite_fs *fs, uint64_t *inos, int n)
{
	unsigned s[8];
	int k = stripes_sorted(fs, inos, n, s);
	for (int i = k - 1; i >= 0; i--)
		pthread_rwlock_unlock(&fs->locks[s[i]]);
}

int ino_valid(ferrite_fs *fs, uint64_t ino)
{
	if (ino == 0 || ino > (fs->m.pool.size >> INO_SHIFT))
		return 0;
	return mp_entry_valid(&fs->m, MP_INODE, ino << INO_SHIFT);
}

static int is_special(uint32_t m)
{
	return S_ISFIFO(m) || S_ISCHR(m) || S_ISBLK(m) || S_ISSOCK(m);
}

static const char *part_problem(ferrite_fs *fs, const struct fr_inode *ip)
{
	struct space *sp = &fs->m.sp;
	if (ip->i_level == I_NO_PART)
		return NULL;
	if (ip->i_level >= sp->top_level)
		return "partition level beyond the root's children";
	uint64_t psize = sp_level_size(ip->i_level);
	if ((ip->i_part & (psize - 1)) || !sp_vrange_ok(sp, ip->i_part, psize))
		return "partition outside the partition space";
	return NULL;
}

/* What releasing an inode relies on: a known type and a partition inside the
 * partition space. An orphan whose release a crash interrupted has its
 * storage partly released (no partition, the size still set), which is
 * fine for finishing the release and nothing else. */
static int ino_check_release(ferrite_fs *fs, const struct fr_inode *ip)
{
	uint32_t m = ip->i_mode;
	return (S_ISREG(m) || S_ISDIR(m) || S_ISLNK(m) || is_special(m)) && !part_problem(fs, ip);
}

int ino_check(ferrite_fs *fs, const struct fr_inode *ip, const char **why)
{
	uint32_t m = ip->i_mode;
	int part = ip->i_level != I_NO_PART;
	const char *w = NULL;
	if (!S_ISREG(m) && !S_ISDIR(m) && !S_ISLNK(m) && !is_special(m))
		w = "unknown file type";
	else if ((w = part_problem(fs, ip)))
		;
	else if (part && ip->i_size > sp_level_size(ip->i_level))
		w = "size beyond its partition";
	else if (is_special(m) && (part || ip->i_size))
		w = "special file with data";
	else if (S_ISREG(m) && !part && ip->i_size)
		w = "size but no partition";
	else if (S_ISLNK(m) && (ip->i_size == 0 || ip->i_size >= FS_PATH_MAX))
		w = "symbolic link of a bad length";
	else if (S_ISLNK(m) && ip->i_size > I_INLINE_MAX && !part)
		w = "long symbolic link without a partition";
	else if (S_ISDIR(m) && ip->i_dkind > I_DIR_LARGE)
		w = "unknown directory kind";
	else if (S_ISDIR(m) && ip->i_dkind == I_DIR_LARGE &&
		 (!part || !ip->i_size || ip->i_size & (FR_PAGE_SIZE - 1)))
		w = "hashed directory without pages";
	else if (S_ISDIR(m) && ip->i_dkind == I_DIR_SMALL && part)
		w = "small directory with a partition";
	*why = w;
	return w ? -EUCLEAN : 0;
}

int ino_get_checked(ferrite_fs *fs, uint64_t ino)
{
	const char *why;
	if (!ino_valid(fs, ino))
		return fr_err(-EUCLEAN, "inode %llu is not a live inode (run `ferrite fsck`)",
			      (unsigned long long)ino);
	if (ino_check(fs, ino_ptr(fs, ino), &why))
		return fr_err(-EUCLEAN, "inode %llu damaged: %s (run `ferrite fsck`)",
			      (unsigned long long)ino, why);
	return 0;
}

struct log_ctx *op_begin(ferrite_fs *fs)
{
	return log_acquire(&fs->m);
}

int op_commit(ferrite_fs *fs, struct log_ctx *lc)
{
	return log_commit(&fs->m, lc);
}

int op_commit_or_abort(ferrite_fs *fs, struct log_ctx *lc, int rc)
{
	if (rc) {
		tx_abort(lc->tx);
		return rc;
	}
	return op_commit(fs, lc);
}

void op_end(ferrite_fs *fs, struct log_ctx *lc)
{
	log_release(&fs->m, lc);
}

void ino_set_times(struct tx *tx, struct fr_inode *ip, int which, const struct timespec *ts)
{
	if (which & T_ATIME) {
		tx_set8(tx, &ip->i_atime_sec, (uint64_t)ts->tv_sec);
		tx_set4(tx, &ip->i_atime_nsec, (uint32_t)ts->tv_nsec);
	}
	if (which & T_MTIME) {
		tx_set8(tx, &ip->i_mtime_sec, (uint64_t)ts->tv_sec);
		tx_set4(tx, &ip->i_mtime_nsec, (uint32_t)ts->tv_nsec);
	}
	if (which & T_CTIME) {
		tx_set8(tx, &ip->i_ctime_sec, (uint64_t)ts->tv_sec);
		tx_set4(tx, &ip->i_ctime_nsec, (uint32_t)ts->tv_nsec);
	}
}

/* A new inode from the inode pool. */
static int ino_build(ferrite_fs *fs, struct tx *tx, mode_t mode, uid_t uid, gid_t gid,
		     uint64_t parent, uint64_t *ino)
{
	uint64_t off;
	int reused;
	int rc = mp_alloc(&fs->m, tx, MP_INODE, &off, &reused);
	if (rc)
		return rc == -ENOSPC ? fr_err(-ENOSPC, "no space left for inodes") : rc;
	/* I2: (ino, generation) is unique -- a reused entry counts on from its
	 * previous owner's generation; an entry never used before starts at 1. */
	struct fr_inode *old = meta_ptr(&fs->m, off);
	uint64_t gen = reused ? tx_get8(tx, &old->i_generation) + 1 : 1;

	struct timespec now;
	fs_now(&now);
	struct fr_inode img;
	memset(&img, 0, sizeof(img));
	img.i_oob.oob_status = MP_LIVE;
	img.i_oob.oob_pool = MP_INODE;
	img.i_mode = mode;
	img.i_nlink = S_ISDIR(mode) ? 2 : 1;
	img.i_uid = uid;
	img.i_gid = gid;
	img.i_level = I_NO_PART;
	img.i_generation = gen;
	img.i_mtime_sec = img.i_ctime_sec = img.i_atime_sec = img.i_btime_sec = now.tv_sec;
	img.i_mtime_nsec = img.i_ctime_nsec = img.i_atime_nsec = img.i_btime_nsec =
	    (uint32_t)now.tv_nsec;
	img.i_parent = parent;
	tx_set(tx, meta_ptr(&fs->m, off), &img, sizeof(img));
	*ino = off >> INO_SHIFT;
	return 0;
}

int ino_alloc(ferrite_fs *fs, struct tx *tx, mode_t mode, uid_t uid, gid_t gid, uint64_t parent,
	      uint64_t *ino)
{
	if (S_ISREG(mode) && null_enabled(fs)) {
		int rc = null_take(fs, tx, mode, uid, gid, ino); /* nullfile.c */
		if (rc != -ENOENT)
			return rc;
	}
	return ino_build(fs, tx, mode, uid, gid, parent, ino);
}

void orphan_add(ferrite_fs *fs, struct tx *tx, uint64_t ino)
{
	struct fr_inode *ip = ino_ptr(fs, ino);
	struct fr_state *st = fs->m.st;
	tx_lock_alloc(tx); /* the list head is shared: covered by the allocator lock */
	if (tx_get4(tx, &ip->i_flags) & I_F_ORPHAN)
		return;
	tx_set8(tx, &ip->i_orphan_next, tx_get8(tx, &st->st_orphan_head));
	tx_set8(tx, &st->st_orphan_head, ino);
	tx_set4(tx, &ip->i_flags, tx_get4(tx, &ip->i_flags) | I_F_ORPHAN);
}

static void orphan_remove(ferrite_fs *fs, struct tx *tx, uint64_t ino)
{
	struct fr_inode *ip = ino_ptr(fs, ino);
	struct fr_state *st = fs->m.st;
	tx_lock_alloc(tx);
	if (!(tx_get4(tx, &ip->i_flags) & I_F_ORPHAN))
		return;
	uint64_t *link = &st->st_orphan_head;
	for (uint64_t cur = tx_get8(tx, link); cur; cur = tx_get8(tx, link)) {
		if (cur == ino) {
			tx_set8(tx, link, tx_get8(tx, &ip->i_orphan_next));
			break;
		}
		link = &ino_ptr(fs, cur)->i_orphan_next;
	}
	tx_set8(tx, &ip->i_orphan_next, 0);
	tx_set4(tx, &ip->i_flags, tx_get4(tx, &ip->i_flags) & ~I_F_ORPHAN);
}

/* Stages the release of an inode whose storage fits in one transaction. */
int ino_drop_tx(ferrite_fs *fs, struct tx *tx, uint64_t ino)
{
	struct fr_inode *ip = ino_ptr(fs, ino);
	int level = tx_get1(tx, &ip->i_level);
	if (level != I_NO_PART && level >= SP_L3 && tx_get8(tx, &ip->i_blocks) > 64 * 512ULL)
		return -E2BIG;
	if (level != I_NO_PART && level > 6)
		return -E2BIG;
	uint32_t mode = tx_get4(tx, &ip->i_mode);
	int rc = S_ISDIR(mode) ? dir_release(fs, tx, ip) : 0;
	if (rc)
		return rc; /* a damaged array: leave it to fsck rather than free a guess */
	rc = dp_release_tx(fs, tx, ip);
	if (!rc)
		rc = xattr_release_tx(fs, tx, ip);
	if (rc)
		return rc;
	orphan_remove(fs, tx, ino);
	mp_free(&fs->m, tx, MP_INODE, ino << INO_SHIFT);
	return 0;
}

int ino_release(ferrite_fs *fs, struct log_ctx **lcp, uint64_t ino)
{
	(void)lcp;
	struct fr_inode *ip = ino_ptr(fs, ino);
	/* Large data first, in bounded transactions; the inode stays on the
	 * orphan list until the last one, so a crash resumes here at mount. */
	int rc = dp_release_all(fs, NULL, ino);
	if (rc)
		return rc;
	struct log_ctx *lc = op_begin(fs);
	if (!lc)
		return -ENOMEM;
	rc = ino_drop_tx(fs, lc->tx, ino);
	if (rc) {
		tx_abort(lc->tx);
		op_end(fs, lc);
		return rc;
	}
	rc = op_commit(fs, lc);
	op_end(fs, lc);
	(void)ip;
	return rc;
}

/* On a shared pool, once a process that is gone was found to hold
 * inodes: releases the unlinked ones that no process holds now. */
int orphan_release_unheld(ferrite_fs *fs)
{
	int n = 0;
	uint64_t ino = fs->m.st->st_orphan_head;
	for (uint64_t steps = 0; ino && steps < (1ULL << 24); steps++) {
		if (!ino_valid(fs, ino))
			return fr_err(-EUCLEAN,
				      "orphan list damaged at inode %llu (run `ferrite fsck`)",
				      (unsigned long long)ino);
		uint64_t next = ino_ptr(fs, ino)->i_orphan_next;
		pthread_rwlock_t *lk = ino_lock(fs, ino);
		pthread_rwlock_wrlock(lk);
		int rc = 0;
		if (!vn_is_open(fs, ino) && !vn_mapped(fs, ino) && ino_ptr(fs, ino)->i_nlink == 0 &&
		    ino_check_release(fs, ino_ptr(fs, ino))) {
			rc = ino_release(fs, NULL, ino);
			n += rc == 0;
		}
		pthread_rwlock_unlock(lk);
		if (rc)
			return rc;
		ino = next;
	}
	return n;
}

int orphan_cleanup(ferrite_fs *fs)
{
	int n = 0;
	while (fs->m.st->st_orphan_head) {
		uint64_t ino = fs->m.st->st_orphan_head;
		if (!ino_valid(fs, ino) || !ino_check_release(fs, ino_ptr(fs, ino)))
			return fr_err(-EUCLEAN,
				      "orphan list damaged at inode %llu (run `ferrite fsck`)",
				      (unsigned long long)ino);
		int rc = ino_release(fs, NULL, ino);
		if (rc)
			return rc;
		n++;
	}
	return n;
}
