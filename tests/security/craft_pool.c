/*
 * craft_pool.c -- edits a pool's directory entries in place, the way a
 * hostile user with write access to the pool file (or a bad DIMM) could, so
 * the tests can check what the tools and front ends do with such a pool:
 *
 *   craft_pool POOL rename DIR OLD NEW       entry OLD of DIR is now named NEW
 *   craft_pool POOL retarget DIR NAME TARGET entry NAME of DIR now leads to
 *                                            TARGET's inode (with its type)
 *
 * NEW may be empty and may hold \xHH escapes (\x00 for a NUL byte); it is
 * stored inline, so it has at most 40 bytes, and DIR must be a small
 * directory (an array, at most 64 entries). The entry's stored hash and
 * fingerprint are made those of NEW (the next free hash value if another
 * entry holds it), so the entry is as consistent as a wrong name allows.
 * The stores go through the pool's mapping; unmounting leaves them in the
 * pool file.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fs/fs.h"

static int usage(void)
{
	fputs("usage: craft_pool POOL rename DIR OLD NEW\n"
	      "       craft_pool POOL retarget DIR NAME TARGET\n",
	      stderr);
	return 2;
}

/* NEW with \xHH escapes decoded; returns its length or -1. */
static int decode(const char *in, char *out, size_t cap)
{
	size_t n = 0;
	while (*in) {
		unsigned v;
		if (n == cap)
			return -1;
		if (in[0] == '\\' && in[1] == 'x' && sscanf(in + 2, "%2x", &v) == 1) {
			out[n++] = (char)v;
			in += 4;
		} else {
			out[n++] = *in++;
		}
	}
	return (int)n;
}

static struct fr_darray *small_array(ferrite_fs *fs, struct fr_inode *dir)
{
	if (dir->i_dkind == I_DIR_LARGE || !dir->i_dents)
		return NULL;
	return meta_ptr(&fs->m, dir->i_dents);
}

/* Is hash h held by an entry of da other than skip? */
static int hash_taken(const struct fr_darray *da, const struct fr_dentry *skip, uint64_t h)
{
	for (int i = 0; i < 64; i++)
		if ((da->da_used >> i & 1) && &da->da_ent[i] != skip && da->da_ent[i].d_hash == h)
			return 1;
	return 0;
}

static int do_rename(ferrite_fs *fs, struct fr_inode *dir, struct fr_dentry *d, const char *arg)
{
	char name[D_INLINE_NAME];
	int len = decode(arg, name, sizeof(name));
	struct fr_darray *da = small_array(fs, dir);
	if (len < 0 || !da || (d->d_flags & D_EXTNAME)) {
		fprintf(stderr,
			"craft_pool: needs an inline name (<= %d bytes) in a small "
			"directory\n",
			D_INLINE_NAME);
		return 1;
	}
	uint64_t h = fr_name_hash(fs->hash_seed, name, (size_t)len);
	while (hash_taken(da, d, h))
		h++;
	memset(d->d_name, 0, sizeof(d->d_name));
	memcpy(d->d_name, name, (size_t)len);
	d->d_namelen = (uint8_t)len;
	d->d_hash = h;
	da->da_fp[d - da->da_ent] = dent_fp(h);
	pm_flush(d, sizeof(*d));
	pm_flush(da->da_fp, sizeof(da->da_fp));
	pm_fence();
	return 0;
}

static int do_retarget(ferrite_fs *fs, struct fr_dentry *d, const char *target)
{
	struct stat st;
	int rc = ferrite_lstat(fs, target, &st);
	if (rc < 0) {
		fprintf(stderr, "craft_pool: %s: %s\n", target, strerror(-rc));
		return 1;
	}
	d->d_ino = st.st_ino;
	d->d_type = (uint8_t)(st.st_mode >> 12);
	pm_flush(d, sizeof(*d));
	pm_fence();
	return 0;
}

int main(int argc, char **argv)
{
	if (argc != 6)
		return usage();
	ferrite_fs *fs;
	int rc = ferrite_mount(argv[1], NULL, &fs);
	if (rc < 0) {
		fprintf(stderr, "craft_pool: %s: %s\n", argv[1], ferrite_errmsg());
		return 1;
	}
	if (fs->h.ops != &pmfs_ops) {
		fprintf(stderr, "craft_pool: %s: not a plain (pm) pool\n", argv[1]);
		ferrite_unmount(fs);
		return 1;
	}
	struct stat st;
	struct fr_dentry *d = NULL;
	rc = ferrite_lstat(fs, argv[3], &st);
	if (rc == 0 && !S_ISDIR(st.st_mode))
		rc = -ENOTDIR;
	struct fr_inode *dir = rc == 0 ? ino_ptr(fs, st.st_ino) : NULL;
	if (rc == 0)
		rc = dir_lookup(fs, NULL, dir, argv[4], strlen(argv[4]), &d);
	if (rc < 0) {
		fprintf(stderr, "craft_pool: %s/%s: %s\n", argv[3], argv[4], strerror(-rc));
		ferrite_unmount(fs);
		return 1;
	}
	if (strcmp(argv[2], "rename") == 0)
		rc = do_rename(fs, dir, d, argv[5]);
	else if (strcmp(argv[2], "retarget") == 0)
		rc = do_retarget(fs, d, argv[5]);
	else
		rc = usage();
	if (ferrite_unmount(fs) < 0 && rc == 0) {
		fprintf(stderr, "craft_pool: unmount: %s\n", ferrite_errmsg());
		rc = 1;
	}
	return rc;
}
