/*
 * fs.h -- internal interface of the fs layer: inodes, directories, path
 * resolution, the data path, open files and descriptors.
 *
 * Persistent state is used in place through the pool's direct mapping
 * (inodes, dentries, directory pages) or the partition space (file data);
 * the only volatile state is small and bounded: striped inode locks, the
 * table of open inodes (vnodes), descriptors and directory streams.
 */
#ifndef FERRITE_FS_H
#define FERRITE_FS_H

#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

#include "ferrite.h"
#include "fs/fs_format.h"
#include "fs/pmfs.h"
#include "meta/meta.h"
#include "persist/pm.h"
#include "vfs/vfs.h"

#define FS_LOCK_STRIPES 4096
#define FS_MAX_SYMLINKS 40
#define FS_NAME_MAX	255
#define FS_PATH_MAX	4096

/* An inode some descriptor or stream has open. */
struct vnode {
	uint64_t ino;
	uint64_t gen;
	int opens;	    /* under fs->vn_lock */
	int mmaps;	    /* memory mappings of the file (mmap.c); atomic */
	struct vnode *next; /* hash chain */
};

/* An open file description (shared by dup'ed descriptors). */
struct ofile {
	struct vfs_file f; /* first: flags, refs, position (vfs.h) */
	struct vnode *vn;
	struct ofile *late_next; /* on fs->late_puts */
};

struct ferrite_fs {
	struct vfs_handle h; /* first: names pmfs_ops (vfs.h) */
	struct meta m;
	uint64_t root_ino;
	uint64_t hash_seed;
	uint64_t max_file_size;
	int strict;		  /* this mount makes every write atomic (strict.c) */
	uint64_t strict_redo_max; /* strict: overwrites up to this many bytes go through the log */
	pthread_rwlock_t *locks;  /* FS_LOCK_STRIPES inode locks */
	pthread_mutex_t rename_lock; /* serialises directory moves across parents */
	/* advisory locks: the pool's shared table, or lk_private for a pool
	 * held alone; lk_mutex orders this process's threads (taken before
	 * the coordination file's tab_lock, share_impl.h) */
	pthread_mutex_t lk_mutex;
	struct lk_table *lk_private;
	/* open files whose last reference a shared call dropped (another
	 * thread closed the descriptor meanwhile): released by this process's
	 * next call under the turn (of_put_late); under lk_mutex */
	struct ofile *late_puts;
	pid_t late_pid;

	pthread_mutex_t vn_lock;
	struct vnode **vn_hash;
	uint64_t vn_cap;

	struct vfs_fdtable fdt; /* descriptors to struct ofile (their f) */

	pthread_mutex_t dir_lock;
	struct ferrite_dir *streams; /* open directory streams */

	char *link_prefix; /* where the pool appears on the host (ferrite_set_link_prefix) */
	size_t link_prefix_len;
};

/* Every public call returns through api_end (or api_end_ss for byte counts):
 * a failure gets a message (ferrite_errmsg), and debug builds check that the
 * call left nothing it stored unflushed or unfenced (persist/pm.h). The
 * allocators' bare -ENOSPC says where, like the paths that know more
 * ("no space left for inodes"). */
static inline int api_err_finish(int rc)
{
	if (rc == -ENOSPC && !fr_err_isset())
		return fr_err(rc, "no space left in the pool");
	return fr_err_finish(rc);
}
#define api_end(rc) (pm_op_end_check(__func__), api_err_finish(rc))
static inline ssize_t api_end_ss_(ssize_t rc, const char *fn)
{
	(void)fn;
	pm_op_end_check(fn);
	if (rc < 0)
		api_err_finish((int)rc);
	return rc;
}
#define api_end_ss(rc) api_end_ss_((rc), __func__)

/* ---- inodes (inode.c) ---------------------------------------------------- */

static inline struct fr_inode *ino_ptr(ferrite_fs *fs, uint64_t ino)
{
	return (struct fr_inode *)meta_ptr(&fs->m, ino << INO_SHIFT);
}
static inline uint64_t ino_of(ferrite_fs *fs, const struct fr_inode *ip)
{
	return sp_off(&fs->m.sp, ip) >> INO_SHIFT;
}
/* Is ino a live inode of this pool (numbers coming from outside)? */
int ino_valid(ferrite_fs *fs, uint64_t ino);
/* Are the inode's fields consistent (type, partition inside the partition
 * space, size inside the partition, kind of directory)? 0 or -EUCLEAN with
 * *why. Every inode number read from PM passes ino_get_checked before the
 * inode is used; fsck reports the same problems. */
int ino_check(ferrite_fs *fs, const struct fr_inode *ip, const char **why);
int ino_get_checked(ferrite_fs *fs, uint64_t ino);

static inline uint64_t rd8(struct tx *tx, const void *p)
{
	return tx ? tx_get8(tx, p) : __atomic_load_n((const uint64_t *)p, __ATOMIC_RELAXED);
}
static inline uint32_t rd4(struct tx *tx, const void *p)
{
	return tx ? tx_get4(tx, p) : *(const volatile uint32_t *)p;
}

pthread_rwlock_t *ino_lock(ferrite_fs *fs, uint64_t ino);
/* Locks up to 4 inodes for writing in a deadlock-free order. */
void ino_lock_many(ferrite_fs *fs, uint64_t *inos, int n);
void ino_unlock_many(ferrite_fs *fs, uint64_t *inos, int n);

void fs_now(struct timespec *ts);
/* Allocates and initialises an inode in tx; returns its number. A regular
 * file takes a null file when there is one (nullfile.c). */
int ino_alloc(ferrite_fs *fs, struct tx *tx, mode_t mode, uid_t uid, gid_t gid, uint64_t parent,
	      uint64_t *ino);

/* Null files (nullfile.c): does the pool have them (format 5)? */
int null_enabled(const ferrite_fs *fs);
/* In tx, which drops the last name of ino (held, not open): makes the file
 * a null file if it is one backed page and the list has room; 0 done,
 * -ENOENT not (the caller releases it). */
int null_recycle(ferrite_fs *fs, struct tx *tx, uint64_t ino);
/* Takes the first null file as a new regular file in tx: -ENOENT if the
 * list is empty, -EUCLEAN if it is damaged. */
int null_take(ferrite_fs *fs, struct tx *tx, mode_t mode, uid_t uid, gid_t gid, uint64_t *ino);
/* The collector: releases the null files and the pages of empty files;
 * returns the pages it freed. */
uint64_t null_collect(ferrite_fs *fs);
/* fsck: walks the null list, calling listed(arg, ino) for each inode on it
 * (0: not a live inode, or seen before -- the walk stops there), checks N1,
 * reports what is wrong; returns the problems, *len the list's length. */
int null_check(ferrite_fs *fs, int (*listed)(void *arg, uint64_t ino), void *arg,
	       fr_report_fn report, void *rarg, uint64_t *len);
/* Releases an inode and everything it owns (data, directory storage). May
 * need several transactions for a large file: commits as it goes. */
int ino_release(ferrite_fs *fs, struct log_ctx **lc, uint64_t ino);
/* Stages the whole release of an inode in tx; -E2BIG if its data is too
 * large for one transaction (then: orphan_add + ino_release). */
int ino_drop_tx(ferrite_fs *fs, struct tx *tx, uint64_t ino);
void ino_set_times(struct tx *tx, struct fr_inode *ip, int which, const struct timespec *ts);
#define T_ATIME 1
#define T_MTIME 2
#define T_CTIME 4
/* Orphans: unlinked inodes still open (released at last close or mount). */
void orphan_add(ferrite_fs *fs, struct tx *tx, uint64_t ino);
int orphan_release_unheld(ferrite_fs *fs);
int orphan_cleanup(ferrite_fs *fs);

/* ---- credentials and permissions (attr.c) ------------------------------- */

/* mask: 4 read, 2 write, 1 exec/search. 0 or -EACCES. */
int perm_check(const struct vfs_cred *c, struct tx *tx, const struct fr_inode *ip, int mask);

int fs_stat_ino(ferrite_fs *fs, uint64_t ino, struct stat *st);
int fs_chmod_ino(ferrite_fs *fs, uint64_t ino, mode_t mode);
int fs_chown_ino(ferrite_fs *fs, uint64_t ino, uid_t uid, gid_t gid);
int fs_utimens_ino(ferrite_fs *fs, uint64_t ino, const struct timespec times[2]);
int fs_access_ino(ferrite_fs *fs, uint64_t ino, int mode);
int fs_statvfs(ferrite_fs *fs, struct statvfs *sv);

/* ---- directories (dir.c) ------------------------------------------------- */

/* Finds name in dir; *out points into the pool (direct mapping). */
int dir_lookup(ferrite_fs *fs, struct tx *tx, struct fr_inode *dir, const char *name, size_t len,
	       struct fr_dentry **out);
/* Adds an entry; may grow the directory, which can move its pages: dentry
 * pointers obtained before a dir_insert on the same directory are stale. */
int dir_insert(ferrite_fs *fs, struct tx *tx, struct fr_inode *dir, const char *name, size_t len,
	       uint64_t ino, unsigned type);
/* Removes the entry d that dir_lookup returned in the same transaction;
 * -EUCLEAN if it is not a sound entry of dir (d NULL included): nothing is
 * staged and the transaction is marked so that it cannot commit. */
int dir_remove(ferrite_fs *fs, struct tx *tx, struct fr_inode *dir, struct fr_dentry *d);
void dir_retarget(struct tx *tx, struct fr_dentry *d, uint64_t ino, unsigned type);
/* Releases the storage of an empty directory (-EUCLEAN: left in place). */
int dir_release(ferrite_fs *fs, struct tx *tx, struct fr_inode *dir);

struct dir_batch_ent {
	uint64_t hash;
	uint64_t ino;
	uint8_t type;
	uint8_t len;
	char name[256];
};
/* Reads entries with hash >= cookie in hash order; at most cap. *next is the
 * cookie to continue from (FR_HASH_END at the end). Read lock held. */
int dir_read(ferrite_fs *fs, struct fr_inode *dir, uint64_t cookie, struct dir_batch_ent *out,
	     int cap, uint64_t *next, struct dir_batch_ent *scratch64);
int dir_check(ferrite_fs *fs, struct fr_inode *dir,
	      void (*ent_cb)(void *, uint64_t ino, const char *, unsigned), void *arg,
	      fr_report_fn report, void *rarg);

/* ---- path resolution and namespace (namei.c) ---------------------------- */

struct nameidata {
	uint64_t dir_ino; /* parent directory */
	uint64_t dir_gen;
	char name[FS_NAME_MAX + 1];
	size_t len;
	int trailing_slash;
	uint64_t ino; /* final object, 0 if it does not exist */
	int locked;   /* LOOKUP_LOCK_PARENT: dir_ino's write lock is held */
};
#define LOOKUP_FOLLOW 1 /* follow a symlink in the last component */
#define LOOKUP_PARENT 2 /* stop at the parent, last component in nd->name */
#define LOOKUP_LOCK_PARENT                                                                         \
	4 /* with PARENT: look the last component up under the                                     \
	   * parent's write lock and return holding it */
/* at: inode relative paths start from (0: the root). */
int path_walk(ferrite_fs *fs, uint64_t at, const char *path, int flags, struct nameidata *nd);
/* Re-checks after locking that the directory nd names is still what the walk
 * found (a live directory with the same generation). */
int nd_dir_still_valid(ferrite_fs *fs, struct nameidata *nd);
/* Releases the parent lock a LOOKUP_LOCK_PARENT walk returned with. */
void nd_unlock(ferrite_fs *fs, struct nameidata *nd);
/* Reads a symlink's target (NUL-terminated) under its read lock. */
int fs_readlink_ino(ferrite_fs *fs, uint64_t ino, char *buf, size_t cap, size_t *len);

/* Every path comes with the inode it is relative to (0: the root). */
int fs_create(ferrite_fs *fs, uint64_t at, const char *path, int flags, mode_t mode, uint64_t *ino,
	      int *created);
/* mode carries the file type (S_IFDIR, S_IFREG, S_IFIFO, ...). */
int fs_mknod(ferrite_fs *fs, uint64_t at, const char *path, mode_t mode, dev_t rdev);
int fs_unlink(ferrite_fs *fs, uint64_t at, const char *path);
int fs_rmdir(ferrite_fs *fs, uint64_t at, const char *path);
/* oldpath NULL: link the inode oat itself (linkat with AT_EMPTY_PATH). */
int fs_link(ferrite_fs *fs, uint64_t oat, const char *oldpath, int follow, uint64_t nat,
	    const char *newpath);
int fs_symlink(ferrite_fs *fs, const char *target, uint64_t at, const char *linkpath);
ssize_t fs_readlink(ferrite_fs *fs, uint64_t at, const char *path, char *buf, size_t size);
int fs_rename(ferrite_fs *fs, uint64_t oat, const char *oldpath, uint64_t nat, const char *newpath,
	      unsigned flags);

/* ---- data path (data.c) -------------------------------------------------- */

ssize_t dp_read(ferrite_fs *fs, uint64_t ino, void *buf, size_t len, uint64_t off);
/* Would a read store ip's access time now (relatime)? A shared call that
 * would asks for the turn first (share.c H9: it changes nothing). */
int dp_atime_due(const struct fr_inode *ip);
/* off < 0: append at end of file; *newoff receives the end of the write. */
ssize_t dp_write(ferrite_fs *fs, uint64_t ino, const struct iovec *iov, int iovcnt, int64_t off,
		 int64_t *newoff);
/* mapped: the file has mappings (mmap.c), whose pages must stay where they
 * are: its partition stays large, a punch stores zeros in place, and a
 * shrink zeroes the rest of the last page. */
/* mapped: DP_MAPPED if a mapping of this process shows the file (its pages
 * keep their offsets), plus DP_MAPPED_ELSEWHERE if another process's does
 * (nothing is released: the pages past the new size are zeroed). */
#define DP_MAPPED	    1
#define DP_MAPPED_ELSEWHERE 2
int dp_truncate(ferrite_fs *fs, uint64_t ino, uint64_t len, int mapped);
int dp_fallocate(ferrite_fs *fs, uint64_t ino, int mode, uint64_t off, uint64_t len, int mapped);
/* Inside a transaction: makes the partition hold [0, size) and backs pages
 * for [off, off+len) (zeroing those inside the file), used by directories
 * and symlinks. */
int dp_prepare(ferrite_fs *fs, struct tx *tx, struct fr_inode *ip, uint64_t off, uint64_t len,
	       uint64_t keep);
/* Strict mode (strict.c). A write with off < size, under the inode's write
 * lock: atomic, in one log entry. Returns the bytes written (a long write may
 * be short: each call is atomic) or -errno; *in_place set means "not done:
 * write in place with the sync path" (a mapped file, see strict.c). */
ssize_t dp_strict_write(ferrite_fs *fs, uint64_t ino, const struct iovec *iov, int iovcnt,
			uint64_t off, size_t len, int *in_place);
/* Strict mode: punches [off, end) (end <= size) in one log entry, times
 * included. 1: not done, it needs more than one entry or would move mapped
 * pages (the caller punches step by step); 0 or -errno. */
int dp_strict_punch(ferrite_fs *fs, struct fr_inode *ip, uint64_t off, uint64_t end);
/* Tests only: called at each step of a strict write's commit (the test
 * stops the process there and checks recovery). NULL in normal use. */
enum { DP_STRICT_STAGED, DP_STRICT_COMMITTED, DP_STRICT_APPLIED, DP_STRICT_RETIRED };
extern void (*dp_strict_hook)(int step);
/* For strict.c: moves the file into a partition holding [0, end) (its own
 * transaction; the contents stay as they are), and back_range in a tx. */
int dp_grow_partition(ferrite_fs *fs, struct fr_inode *ip, uint64_t end);
int dp_back_range(ferrite_fs *fs, struct tx *tx, struct fr_inode *ip, uint64_t off, uint64_t len,
		  uint64_t zero_below, uint64_t w0, uint64_t w1);
/* For strict.c: names, in their own transactions, the pages of [size, end)
 * that windows' reservations would give the write (see data.c). */
int dp_name_reserved_past_size(ferrite_fs *fs, struct fr_inode *ip, uint64_t end);
/* Releases the backing of whole pages/windows in [from, to) in tx; returns
 * the offset it reached (to, unless the transaction filled up). */
uint64_t dp_unback_range(ferrite_fs *fs, struct tx *tx, struct fr_inode *ip, uint64_t from,
			 uint64_t to);
/* Pool offset of the page holding byte off of the inode's data, 0 if none. */
uint64_t dp_phys(ferrite_fs *fs, struct tx *tx, struct fr_inode *ip, uint64_t off);
/* Stages the release of all data of an inode (must fit one transaction). */
int dp_release_tx(ferrite_fs *fs, struct tx *tx, struct fr_inode *ip);
/* Releases all data of an inode in bounded transactions. */
int dp_release_all(ferrite_fs *fs, struct log_ctx **lc, uint64_t ino);

/* ---- operations ------------------------------------------------------- */

/* Acquire a log slot for a modifying operation. */
struct log_ctx *op_begin(ferrite_fs *fs);
int op_commit(ferrite_fs *fs, struct log_ctx *lc);
/* Commits lc's transaction if rc is 0, else abandons it; returns rc or the
 * commit's result. */
int op_commit_or_abort(ferrite_fs *fs, struct log_ctx *lc, int rc);
void op_end(ferrite_fs *fs, struct log_ctx *lc);

/* vnodes (file.c) */
struct vnode *vn_get(ferrite_fs *fs, uint64_t ino, uint64_t gen);
/* Why the calling thread's last vn_get returned NULL (-ENOMEM, -ENFILE,
 * -EUSERS). */
int vn_get_error(void);
void vn_map_add(ferrite_fs *fs, struct vnode *vn, int delta);
void vn_count_inherited(ferrite_fs *fs);
void vn_put(ferrite_fs *fs, struct vnode *vn);
int vn_is_open(ferrite_fs *fs, uint64_t ino);
/* Has the file memory mappings (ferrite_mmap)? Caller holds the inode lock. */
int vn_mapped(ferrite_fs *fs, uint64_t ino);
void fd_close_all(ferrite_fs *fs);
/* A descriptor's open file, referenced (of_put releases it); NULL: -EBADF. */
struct ofile *fd_get(ferrite_fs *fs, int fd);
void of_put(ferrite_fs *fs, struct ofile *of);
/* Under the turn: releases the open files shared calls left (of_put). */
void of_put_late(ferrite_fs *fs);
/* Resolves the dirfd of an *at call to the inode relative paths start at.
 * Returns 0 (walk path from *at), 1 (the call names *at itself: empty path
 * with AT_EMPTY_PATH) or -errno. *held keeps the directory's open file alive
 * until at_end. */
int at_begin(ferrite_fs *fs, int dirfd, const char *path, int flags, uint64_t *at,
	     struct ofile **held);
void at_end(ferrite_fs *fs, struct ofile *held);
/* Truncate and punch that respect memory mappings (mmap.c): mapped pages are
 * never freed (-EBUSY when they would be). */
int mm_truncate(ferrite_fs *fs, uint64_t ino, uint64_t len);
/* Takes mm_lock and returns 1 if no file of fs is mapped by the program;
 * returns 0 (lock not held) otherwise. mm_unlock releases it. */
int mm_lock_if_unmapped(ferrite_fs *fs);
void mm_unlock(ferrite_fs *fs);
/* compact.c: the space layer's compaction request, run while quiet. */
void fs_compact_quiet(void *arg);
/* procs.c: a forked child holds what the process has (share.c's fork hook). */
void fs_procs_init(ferrite_fs *fs);
/* A forked child that got no slot of its own (SHARE_FORKED): its copies of
 * the parent's descriptions become its own. */
void fs_procs_forked_alone(ferrite_fs *fs);
int mm_punch(ferrite_fs *fs, uint64_t ino, int mode, uint64_t off, uint64_t len);
void dirstream_close_all(ferrite_fs *fs);

/* mount.c: FS_VIEW_PRIVATE, a view of the pool that writes nothing. */
enum { FS_VIEW_SHARED = 0, FS_VIEW_PRIVATE = 1 };
int fs_mount_view(const char *pool, const struct ferrite_mount_opts *opts, int view,
		  ferrite_fs **out);

#endif
