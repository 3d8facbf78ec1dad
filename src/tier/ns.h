/*
 * ns.h -- the tier engine's side of the C API, shared by its files (file.c,
 * path.c, attr.c, open.c, io.c, namei.c, dirstream.c, xattr.c, mmap.c):
 * descriptors, the namespace (carried out in the backing file system) and
 * the data calls (through the cache).
 *
 * A tier descriptor holds a kernel descriptor on the backing object. Paths
 * are resolved by the kernel below the backing directory: openat2 with
 * RESOLVE_BENEATH from the starting directory, and when that is refused (an
 * absolute symbolic link, ".." above the start) again from the backing root
 * with RESOLVE_IN_ROOT, so nothing ever leads out of the tree: "/" is the
 * backing directory, as it is the pool's root for the pm engine. Calls that
 * change a name resolve the parent directory that way and hand the last
 * component to the kernel.
 *
 * Invariants: N1 the cache is the only way file data moves: the kernel
 *               descriptors are opened without O_TRUNC and O_APPEND, which
 *               the tier carries out itself;
 *             N2 removing a file with a record goes through DYING (files.c
 *               F3), so a crash between the two never loses or resurrects
 *               data;
 *             N3 every name change sets ns_dirty: the flusher syncs the
 *               backing file system within a flush period, so names become
 *               durable as fast as the data behind them drains.
 * Credentials set with ferrite_set_creds() become the thread's file-system
 * uid, gid and groups for the kernel calls (a root daemon serving others).
 */
#ifndef FERRITE_TIER_NS_H
#define FERRITE_TIER_NS_H

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "meta/meta.h"
#include "vfs/vfs.h"
#include "tier/sys.h"
#include "tier/tier.h"
#include "tier/tier_api.h"

void tier_creds_done(void);
#define TIER_END(rc)	(tier_creds_done(), pm_op_end_check(__func__), fr_err_finish(rc))
#define TIER_END_SS(rc) tier_end_ss((rc), __func__)
static inline ssize_t tier_end_ss(ssize_t rc, const char *fn)
{
	(void)fn;
	tier_creds_done();
	pm_op_end_check(fn);
	if (rc < 0)
		fr_err_finish((int)rc);
	return rc;
}

#define BEGIN(fs)                                                                                  \
	struct tier *t = TIER(fs);                                                                 \
	fr_err_clear();                                                                            \
	tier_creds_apply()

/* A parent directory and the last component of a path (trailing slashes
 * kept, the kernel judges them). *pfd is owned by the caller if != kdir. */
struct parent {
	int pfd;
	int own;
	char name[256 + 64];
	struct tier_ofile *held;
};

/* Credentials (file.c). */
extern __thread int tier_creds_applied;

/* file.c */
void tier_creds_apply(void);
int tfd_install(struct tier *t, struct tier_ofile *of);

/* path.c */
int tier_start_dir(struct tier *t, int dirfd, const char *path, int *kdir, const char **rest,
		   struct tier_ofile **held);
void tier_end_dir(struct tier *t, struct tier_ofile *held);
int tier_kopen(struct tier *t, int kdir, const char *path, int flags, mode_t mode);
int tier_get_parent(struct tier *t, int dirfd, const char *path, struct parent *p);
void tier_put_parent(struct tier *t, struct parent *p);
int tier_get_obj(struct tier *t, int dirfd, const char *path, int flags, int *own);
void tier_put_obj(int fd, int own);
void tier_proc_path(char *buf, size_t n, int fd);

/* attr.c */
void tier_overlay_stat(struct tier *t, struct stat *st);

/* open.c */
int tier_exact_mode(int fd, const char *name, mode_t mode);
int tfd_close(struct tier *t, int fd);

/* io.c */
ssize_t tier_copy_pread(void *ctx, struct vfs_file *f, void *buf, size_t n, int64_t off);
ssize_t tier_copy_pwrite(void *ctx, struct vfs_file *f, const void *buf, size_t n, int64_t off);
void tier_drop_setid(struct tier *t, struct tier_ofile *of);

#endif
