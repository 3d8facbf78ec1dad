/*
 * ops.c -- the pm engine's table of calls (vfs.h struct vfs_ops), made from
 * the list of calls in vfs.h: each one
 * bracketed for the partition space's quiet moments (pmfs_call_enter), and
 * one refused for want of space tried again once pre-allocated pages came
 * back (pmfs_reclaim): a pool is full only when it is. A call that fails
 * with -ENOSPC has changed nothing the caller could see twice.
 * Invariants and crash argument: the calls' own (fs.h).
 */
#include <errno.h>
#include <fcntl.h>

#include "fs/fs.h"
#include "meta/meta.h"

#define PM_CALL(fs, call)                                                                          \
	({                                                                                         \
		ferrite_fs *pm_call_fs_ = (fs);                                                    \
		pmfs_call_enter(pm_call_fs_);                                                      \
		__typeof__(call) pm_call_rc_ = (call);                                             \
		while ((long long)pm_call_rc_ == -ENOSPC && pmfs_reclaim(pm_call_fs_))             \
			pm_call_rc_ = (call);                                                      \
		pmfs_call_leave(pm_call_fs_);                                                      \
		pm_call_rc_;                                                                       \
	})

static inline ferrite_fs *dir_fs(ferrite_dir *dir)
{
	return dir ? *(ferrite_fs **)dir : NULL;
}

#define PM_FS_CALL(ret, name, params, args)                                                        \
	static ret pm_##name params                                                                \
	{                                                                                          \
		return PM_CALL(fs, pmfs_##name args);                                              \
	}
#define PM_DIR_CALL(ret, name, params, args)                                                       \
	static ret pm_##name params                                                                \
	{                                                                                          \
		return PM_CALL(dir_fs(dir), pmfs_##name args);                                     \
	}
VFS_FS_CALLS(PM_FS_CALL)
VFS_DIR_CALLS(PM_DIR_CALL)

#define PM_ENTRY(ret, name, params, args) .name = pm_##name,
const struct vfs_ops pmfs_ops = {.unmount = pmfs_unmount,
				 VFS_FS_CALLS(PM_ENTRY) VFS_DIR_CALLS(PM_ENTRY)};

/* ---- the pool file's calls -------------------------------------------------- */

static int pm_tune(const char *pool, const struct meta_tune_args *t, struct ferrite_tune_opts *opts)
{
	if (opts->tier_backing)
		return fr_err(-EINVAL, "%s is not a tiered pool: it has no backing directory",
			      pool);
	return meta_tune(pool, t);
}

const struct vfs_engine pmfs_engine = {
    .name = "pm",
    .mkfs = pmfs_mkfs,
    .mount = pmfs_mount,
    .fsck = pmfs_fsck,
    .tune = pm_tune,
};
