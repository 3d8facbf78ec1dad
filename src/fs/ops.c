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

/* A call that only reads the pool runs without the turn where it can
 * (space/share.c H9), and under it when it cannot or when it finds it must
 * change something after all (FS_NEED_TURN: it has changed nothing yet). */
#define PM_SHARED_CALL(fs, call)                                                                   \
	({                                                                                         \
		ferrite_fs *pm_shared_fs_ = (fs);                                                  \
		__typeof__(call) pm_shared_rc_ = FS_NEED_TURN;                                     \
		if (pmfs_shared_enter(pm_shared_fs_)) {                                            \
			pm_shared_rc_ = (call);                                                    \
			pmfs_shared_leave(pm_shared_fs_);                                          \
		}                                                                                  \
		if ((long long)pm_shared_rc_ == FS_NEED_TURN)                                      \
			pm_shared_rc_ = PM_CALL(pm_shared_fs_, call);                              \
		pm_shared_rc_;                                                                     \
	})

static inline ferrite_fs *dir_fs(ferrite_dir *dir)
{
	return dir ? *(ferrite_fs **)dir : NULL;
}

/* The calls that may run shared, and when: PM_SHARED_name is defined for
 * each, and PM_SHARE_WHEN(name) is its condition (over the call's own
 * parameters), 0 for every other call (the preprocessor's "probe": only a
 * defined name expands to two arguments). rw shares its reads only; lseek
 * and read return FS_NEED_TURN when the description is shared with another
 * process (its offset lives in the coordination file). */
#define PM_SHARED_rw	     PM_PROBE(!write)
#define PM_SHARED_lseek	     PM_PROBE(1)
#define PM_SHARED_fstat	     PM_PROBE(1)
#define PM_SHARED_fstatat    PM_PROBE(1)
#define PM_SHARED_faccessat  PM_PROBE(1)
#define PM_SHARED_readlinkat PM_PROBE(1)
#define PM_PROBE(when)	     ~, (when)
#define PM_SECOND(a, b, ...) b
#define PM_PROBE_WHEN(...)   PM_SECOND(__VA_ARGS__, 0, 0)
#define PM_SHARE_WHEN(name)  PM_PROBE_WHEN(PM_SHARED_##name)

#define PM_FS_CALL(ret, name, params, args)                                                        \
	static ret pm_##name params                                                                \
	{                                                                                          \
		if (PM_SHARE_WHEN(name))                                                           \
			return PM_SHARED_CALL(fs, pmfs_##name args);                               \
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
