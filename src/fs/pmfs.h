/*
 * pmfs.h -- the pm engine behind the C API: pmfs_NAME for each call of the
 * list in vfs.h (VFS_FS_CALLS, VFS_DIR_CALLS), same arguments and results,
 * which its table (ops.c) names; src/api/api.c reaches them through it.
 */
#ifndef FERRITE_PMFS_H
#define FERRITE_PMFS_H

#include "ferrite.h"
#include "vfs/vfs.h"

/* Every call on a mounted pool runs between these two (ops.c PM_CALL): the
 * windows of the partition space are evicted only between calls
 * (space/vspace.c V3). Calls may nest. */
void pmfs_call_enter(ferrite_fs *fs);
void pmfs_call_leave(ferrite_fs *fs);
/* A call that only reads (ops.c PM_SHARED_CALL): 1 if it entered without
 * the pool's turn (space/share.c H9; leave with pmfs_shared_leave), 0 if
 * the caller must use pmfs_call_enter. Inside, a call that finds it must
 * change something after all returns FS_NEED_TURN, and runs again under
 * the turn. */
int pmfs_shared_enter(ferrite_fs *fs);
void pmfs_shared_leave(ferrite_fs *fs);
#define FS_NEED_TURN (-4096)
/* Whether the calling thread is inside a shared call. */
int pmfs_in_shared(void);
/* After a call failed with -ENOSPC: gives back every window's reserved,
 * unwritten pages (SCMFS garbage collection), each round in a transaction of
 * its own; 1 if it gave any back (the call is worth trying again). */
int pmfs_reclaim(ferrite_fs *fs);
/* The pm engine's table of calls (ops.c) and what mkfs, mount, fsck and
 * tune do with a pool file that is not a tiered one. */
extern const struct vfs_ops pmfs_ops;
extern const struct vfs_engine pmfs_engine;

#define PMFS_DECLARE(ret, name, params, args) ret pmfs_##name params;
VFS_FS_CALLS(PMFS_DECLARE)
VFS_DIR_CALLS(PMFS_DECLARE)
#undef PMFS_DECLARE

int pmfs_mkfs(const char *pool, const struct ferrite_mkfs_opts *opts);
int pmfs_mount(const char *pool, const struct ferrite_mount_opts *opts, ferrite_fs **out);
int pmfs_unmount(ferrite_fs *fs);
int pmfs_fsck(const char *pool, int repair, void (*report)(void *arg, const char *line),
	      void *report_arg, void (*progress)(void *arg, uint64_t done, uint64_t total),
	      void *progress_arg);

#endif
