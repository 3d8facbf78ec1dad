/*
 * mount.c -- ferrite_mkfs, ferrite_mount, ferrite_unmount.
 *
 * Mount does no scan: it validates the superblock, maps the pool, replays at
 * most one log entry per slot, and releases the orphan list (inodes unlinked
 * while open when the previous user stopped). Nothing is loaded into DRAM;
 * metadata is used in place.
 * Crash argument: mkfs builds the root directory unlogged in a pool whose
 * superblock is written last (meta/super.c U1), so a crash leaves no pool
 * or a whole one; mount's only writes are the replay of committed log
 * entries and the orphan release, each idempotent or a transaction of its
 * own (a crash during mount is recovered by the next mount).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fs/fs.h"

#define DEFAULT_POOL_PATH POOL_DEFAULT_PATH /* space.h */

/* mkfs: the root directory, through the ordinary inode code. */
static int make_root(struct meta *m, struct tx *tx, void *arg)
{
	(void)arg;
	ferrite_fs shell;
	memset(&shell, 0, sizeof(shell));
	shell.m = *m; /* ino_alloc only uses the pool mapping and state */
	uint64_t ino;
	int rc = ino_alloc(&shell, tx, S_IFDIR | 0755, geteuid(), getegid(), 0, &ino);
	if (rc)
		return rc;
	tx_set8(tx, &ino_ptr(&shell, ino)->i_parent, ino);
	tx_set8(tx, &m->st->st_root_ino, ino);
	return 0;
}

int pmfs_mkfs(const char *pool, const struct ferrite_mkfs_opts *opts)
{
	fr_err_clear();
	struct ferrite_mkfs_opts def = {0};
	if (!opts)
		opts = &def;
	if (!pool)
		pool = ferrite_default_pool();
	if (opts->mode != FERRITE_MODE_SYNC && opts->mode != FERRITE_MODE_STRICT)
		return api_end(fr_err(-EINVAL, "unknown mode %d", opts->mode));
	if (!opts->no_hugepages && strcmp(pool, DEFAULT_POOL_PATH) == 0)
		pool_prepare_default_dir(pool);
	struct meta_mkfs_params p = {
	    .size = opts->size,
	    .mode = opts->mode,
	    .progress = opts->progress,
	    .progress_arg = opts->progress_arg,
	    .force = opts->force,
	};
	return api_end(meta_mkfs(pool, &p, make_root, NULL));
}

/* Cut-over of strict writes between the redo copy and write-and-swap
 * (strict.c, measured in bench/README.md#strict). $FERRITE_STRICT_REDO_MAX
 * (bytes) overrides it: tests force either path, benchmarks sweep it. */
#define STRICT_REDO_MAX_DEFAULT (28 * 1024)

static uint64_t strict_redo_max(void)
{
	const char *e = getenv("FERRITE_STRICT_REDO_MAX");
	if (!e || !*e)
		return STRICT_REDO_MAX_DEFAULT;
	char *end;
	unsigned long long v = strtoull(e, &end, 0);
	return *end ? STRICT_REDO_MAX_DEFAULT : (uint64_t)v;
}

static int fs_init_volatile(ferrite_fs *fs)
{
	fs->locks = calloc(FS_LOCK_STRIPES, sizeof(*fs->locks));
	fs->vn_cap = 1024;
	fs->vn_hash = calloc(fs->vn_cap, sizeof(*fs->vn_hash));
	if (!fs->locks || !fs->vn_hash)
		return -ENOMEM;
	for (int i = 0; i < FS_LOCK_STRIPES; i++)
		pthread_rwlock_init(&fs->locks[i], NULL);
	pthread_mutex_init(&fs->rename_lock, NULL);
	pthread_mutex_init(&fs->lk_mutex, NULL);
	pthread_mutex_init(&fs->vn_lock, NULL);
	vfs_fdt_init(&fs->fdt);
	pthread_mutex_init(&fs->dir_lock, NULL);
	return 0;
}

static void fs_free(ferrite_fs *fs)
{
	free(fs->locks);
	free(fs->lk_private);
	free(fs->vn_hash);
	vfs_fdt_fini(&fs->fdt);
	free(fs->link_prefix);
	free(fs);
}

/* view: FS_VIEW_PRIVATE mounts a private view that writes nothing (fsck -n):
 * -EAGAIN if that view would not show the pool as a mount leaves it (log
 * entries to replay, orphans to release), or -EOPNOTSUPP where the pool
 * cannot be mapped copy-on-write. */
int fs_mount_view(const char *pool, const struct ferrite_mount_opts *opts, int view,
		  ferrite_fs **out)
{
	fr_err_clear();
	if (!out)
		return api_end(-EINVAL);
	*out = NULL;
	if (opts && opts->read_only)
		return api_end(fr_err(-EOPNOTSUPP, "read-only mounts are not supported yet"));
	int mode = opts ? opts->mode & ~FERRITE_MOUNT_EXCLUSIVE : FERRITE_MOUNT_POOL_MODE;
	int alone = opts && (opts->mode & FERRITE_MOUNT_EXCLUSIVE);
	if (mode < FERRITE_MOUNT_POOL_MODE || mode > FERRITE_MOUNT_STRICT)
		return api_end(fr_err(-EINVAL, "unknown mount mode %d", opts->mode));
	if (!pool)
		pool = ferrite_default_pool();
	ferrite_fs *fs = calloc(1, sizeof(*fs));
	if (!fs)
		return api_end(-ENOMEM);
	fs->h.ops = &pmfs_ops;
	int rc = fs_init_volatile(fs);
	if (!rc)
		rc = meta_open(&fs->m, pool,
			       view == FS_VIEW_PRIVATE ? META_PRIVATE
			       : alone		       ? 0
						       : META_SHARED);
	if (rc) {
		fs_free(fs);
		return api_end(rc);
	}
	fs->root_ino = fs->m.st->st_root_ino;
	fs->hash_seed = fs->m.sb->sb_hash_seed;
	fs->max_file_size = sp_level_size(fs->m.sp.top_level - 1);
	fs->strict = mode == FERRITE_MOUNT_STRICT ||
		     (mode == FERRITE_MOUNT_POOL_MODE && fs->m.sb->sb_mode == FERRITE_MODE_STRICT);
	fs->strict_redo_max = strict_redo_max();
	if (ino_get_checked(fs, fs->root_ino) || !S_ISDIR(ino_ptr(fs, fs->root_ino)->i_mode)) {
		rc = fr_err(-EUCLEAN, "%s: root directory damaged (run `ferrite fsck`)", pool);
		goto fail;
	}
	if (view == FS_VIEW_PRIVATE) {
		if (fs->m.pending_entries || fs->m.st->st_orphan_head) {
			rc = -EAGAIN;
			goto fail;
		}
	} else {
		/* inodes unlinked while open are released by the first process
		 * only: a later one cannot know who still holds them */
		rc = fs->m.pool.share && !fs->m.pool.share_first ? 0 : orphan_cleanup(fs);
		if (rc < 0)
			goto fail;
		fs->m.sp.compact_arg = fs;
		fs->m.sp.compact_fn = fs_compact_quiet;
		fs_procs_init(fs);
		share_attach_done(&fs->m.pool); /* recovered: others may join */
	}
	*out = fs;
	return 0;
fail:
	meta_close(&fs->m);
	fs_free(fs);
	return api_end(rc);
}

int pmfs_mount(const char *pool, const struct ferrite_mount_opts *opts, ferrite_fs **out)
{
	return fs_mount_view(pool, opts, FS_VIEW_SHARED, out);
}

int pmfs_unmount(ferrite_fs *fs)
{
	fr_err_clear();
	if (!fs)
		return api_end(-EINVAL);
	pmfs_call_enter(fs); /* closing may release inodes: the pool's turn */
	dirstream_close_all(fs);
	fd_close_all(fs);
	pmfs_call_leave(fs);
	meta_close(&fs->m);
	fs_free(fs);
	return 0;
}
