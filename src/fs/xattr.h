/*
 * xattr.h -- what the rest of the fs layer needs from xattr.c: releasing an
 * inode's attribute block with the inode, and checking it in fsck.
 */
#ifndef FERRITE_FS_XATTR_H
#define FERRITE_FS_XATTR_H

#include "fs/fs.h"

/* Stages the release of the inode's attribute block in tx (nothing if it has
 * none). Call with the inode's release (ino_drop_tx). -EUCLEAN if the block
 * is damaged: nothing is staged then, and fsck reports the pages. */
int xattr_release_tx(ferrite_fs *fs, struct tx *tx, struct fr_inode *ip);

/* fsck: validates the inode's block (X1, X3 in xattr.c). Returns 0 with
 * *page / *order set when it has a sound block (*page = 0 when none), or
 * -EUCLEAN with *why. */
int xattr_check(ferrite_fs *fs, const struct fr_inode *ip, uint64_t *page, int *order,
		const char **why);

#endif
