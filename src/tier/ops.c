/*
 * ops.c -- the tier engine's table of calls (vfs.h struct vfs_ops), made
 * from the list of calls in vfs.h, and the few calls the tier carries out as
 * another one or not at all; and the tier engine as the pool-file calls see
 * it (struct vfs_engine). Invariants and crash argument: the calls' own
 * (ns.h, tier.h).
 */
#include "tier/ns.h"

/* The fd forms of the xattr calls are the *at forms on the descriptor. */
ssize_t tier_fgetxattr(ferrite_fs *fs, int fd, const char *name, void *value, size_t size)
{
	return tier_getxattrat(fs, fd, "", AT_EMPTY_PATH, name, value, size);
}

int tier_fsetxattr(ferrite_fs *fs, int fd, const char *name, const void *value, size_t size,
		   int flags)
{
	return tier_setxattrat(fs, fd, "", AT_EMPTY_PATH, name, value, size, flags);
}

ssize_t tier_flistxattr(ferrite_fs *fs, int fd, char *list, size_t size)
{
	return tier_listxattrat(fs, fd, "", AT_EMPTY_PATH, list, size);
}

int tier_fremovexattr(ferrite_fs *fs, int fd, const char *name)
{
	return tier_removexattrat(fs, fd, "", AT_EMPTY_PATH, name);
}

int tier_inode_info(ferrite_fs *fs, uint64_t ino, struct ferrite_inode_info *out)
{
	(void)fs, (void)ino, (void)out;
	return fr_err_finish(
	    fr_err(-EOPNOTSUPP, "a tiered pool's inodes are its backing directory's"));
}

int tier_inode_extents(ferrite_fs *fs, uint64_t ino,
		       int (*cb)(void *arg, const struct ferrite_extent *ext), void *arg)
{
	(void)fs, (void)ino, (void)cb, (void)arg;
	return fr_err_finish(
	    fr_err(-EOPNOTSUPP, "a tiered pool's data lies in its backing directory"));
}

int tier_check(ferrite_fs *fs, void (*report)(void *arg, const char *line), void *arg)
{
	(void)fs, (void)report, (void)arg;
	return fr_err_finish(fr_err(-EOPNOTSUPP, "a tiered pool is checked unmounted "
						 "(ferrite fsck), as only one process holds it"));
}

/* An application's mapping of a tiered file is the kernel's mapping of the
 * backing file (mmap.c): nothing of the pool to pin, shrink or refresh. */
int tier_mmap_pinned(ferrite_fs *fs, int fd, off_t from, off_t len)
{
	(void)fs, (void)fd, (void)from, (void)len;
	return 0;
}

int tier_mmap_shrink(ferrite_fs *fs, int fd, off_t newsize)
{
	(void)fs, (void)fd, (void)newsize;
	return 0;
}

int tier_mmap_refresh(ferrite_fs *fs, int fd)
{
	(void)fs, (void)fd;
	return 0;
}

#define TIER_ENTRY(ret, name, params, args) .name = tier_##name,
const struct vfs_ops tier_ops = {.unmount = tier_unmount,
				 VFS_FS_CALLS(TIER_ENTRY) VFS_DIR_CALLS(TIER_ENTRY)};

/* ---- the pool file's calls -------------------------------------------------- */

static int makes(const struct ferrite_mkfs_opts *opts)
{
	return opts->tier_backing != NULL;
}

static int tune(const char *pool, const struct meta_tune_args *t, struct ferrite_tune_opts *opts)
{
	return tier_tune(pool, t, opts->tier_backing, opts->force, &opts->forced, &opts->other_dir);
}

const struct vfs_engine tier_engine = {
    .name = "tier",
    .makes = makes,
    .owns = meta_pool_is_tier,
    .mkfs = tier_mkfs,
    .mount = tier_mount,
    .fsck = tier_fsck,
    .tune = tune,
};
