/*
 * vfs.h -- what both engines (src/fs, the pm engine; src/tier, the tier
 * engine) share above the persistence layers and below the front ends:
 * for now, what a call knows about its caller -- the credentials it acts
 * with and, after a walk that left the pool, the host path it led to.
 *
 * Layers (README, "Layers"): persist -> space -> meta -> vfs -> engines (fs,
 * tier) -> front ends (api, preload, fuse, tools). A layer includes only
 * the layers below it; scripts/check-layers.sh, run by the build, refuses
 * anything else.
 *
 * Invariants: V1 a thread's credentials are its own (thread-local): those
 * ferrite_set_creds() installed, else the process's, read at the thread's
 * first call; V2 the escaped path is the thread's too, and meaningful only
 * right after a call failed with -EXDEV.
 * Crash argument: none; nothing here is persistent.
 */
#ifndef FERRITE_VFS_H
#define FERRITE_VFS_H

#include <sys/types.h>

#define VFS_PATH_MAX 4096

struct vfs_cred {
	uid_t uid;
	gid_t gid;
	int ngroups;
	gid_t groups[64];
};

/* The calling thread's credentials (V1). */
const struct vfs_cred *cred_get(void);
/* 1 if ferrite_set_creds() installed this thread's credentials. */
int cred_is_explicit(void);
/* Is g the caller's group or one of its supplementary groups? */
int cred_in_group(const struct vfs_cred *c, gid_t g);

/* A walk left the pool through an absolute symlink to host path p: records
 * p for ferrite_escaped_path() and returns -EXDEV with a message (both
 * engines' walkers share the front ends' contract). */
int vfs_set_escaped_path(const char *p);

#endif
