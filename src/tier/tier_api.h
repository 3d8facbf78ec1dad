/*
 * tier_api.h -- the tier engine behind the C API: tier_NAME for each call
 * of the list in vfs.h (VFS_FS_CALLS, VFS_DIR_CALLS), same arguments and
 * results, which its table (ops.c) names; src/api/api.c reaches them
 * through it. Memory mappings are the kernel's of the backing file, once
 * the file's cached chunks are drained (mmap.c).
 */
#ifndef FERRITE_TIER_API_H
#define FERRITE_TIER_API_H

#include <sys/types.h>
#include <sys/uio.h>

#include "ferrite.h"
#include "vfs/vfs.h"

#define TIER_DECLARE(ret, name, params, args) ret tier_##name params;
VFS_FS_CALLS(TIER_DECLARE)
VFS_DIR_CALLS(TIER_DECLARE)
#undef TIER_DECLARE

/* The tier engine's table of calls (ops.c) and what mkfs, mount, fsck and
 * tune do with a tiered pool's file. */
extern const struct vfs_ops tier_ops;
extern const struct vfs_engine tier_engine;

int tier_mkfs(const char *pool, const struct ferrite_mkfs_opts *opts);
int tier_mount(const char *pool, const struct ferrite_mount_opts *opts, ferrite_fs **out);
int tier_unmount(ferrite_fs *fs);
int tier_fsck(const char *pool, int repair, void (*report)(void *arg, const char *line),
	      void *report_arg, void (*progress)(void *arg, uint64_t done, uint64_t total),
	      void *progress_arg);
int tier_read_stats(const char *pool, struct ferrite_tier_info *info);

#endif
