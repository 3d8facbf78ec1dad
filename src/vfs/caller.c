/*
 * caller.c -- what a call knows about its caller: the pool it means when it
 * names none (ferrite_default_pool), the thread's credentials
 * (ferrite_set_creds) and the host path a walk escaped to
 * (ferrite_escaped_path). Invariants V1, V2: vfs.h. Nothing persistent.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ferrite.h"
#include "space/space.h"
#include "util/util.h"
#include "vfs/vfs.h"

const char *ferrite_default_pool(void)
{
	const char *e = getenv("FERRITE_POOL");
	return e && *e ? e : POOL_DEFAULT_PATH;
}

static __thread struct vfs_cred tl_cred;
static __thread int tl_cred_state; /* 0 unset, 1 process creds cached, 2 override */

const struct vfs_cred *cred_get(void)
{
	if (!tl_cred_state) {
		tl_cred.uid = geteuid();
		tl_cred.gid = getegid();
		int n = getgroups((int)FR_ARRAY_SIZE(tl_cred.groups), tl_cred.groups);
		tl_cred.ngroups = n < 0 ? 0 : n;
		tl_cred_state = 1;
	}
	return &tl_cred;
}

int cred_is_explicit(void)
{
	return tl_cred_state == 2;
}

int ferrite_set_creds(uid_t uid, gid_t gid, size_t ngroups, const gid_t *groups)
{
	fr_err_clear();
	if (ngroups > FR_ARRAY_SIZE(tl_cred.groups) || (ngroups && !groups))
		return fr_err_finish(-EINVAL);
	tl_cred.uid = uid;
	tl_cred.gid = gid;
	tl_cred.ngroups = (int)ngroups;
	if (ngroups)
		memcpy(tl_cred.groups, groups, ngroups * sizeof(gid_t));
	tl_cred_state = 2;
	return 0;
}

void ferrite_reset_creds(void)
{
	tl_cred_state = 0;
}

int cred_in_group(const struct vfs_cred *c, gid_t g)
{
	if (c->gid == g)
		return 1;
	for (int i = 0; i < c->ngroups; i++)
		if (c->groups[i] == g)
			return 1;
	return 0;
}

static __thread char escaped_path[VFS_PATH_MAX];

const char *ferrite_escaped_path(void)
{
	return escaped_path;
}

int vfs_set_escaped_path(const char *p)
{
	if (strlen(p) >= sizeof(escaped_path))
		return -ENAMETOOLONG;
	strcpy(escaped_path, p);
	return fr_err(-EXDEV, "a symbolic link leads out of the pool, to %s", escaped_path);
}
