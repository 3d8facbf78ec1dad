/*
 * tune.c -- `ferrite tune` for pm pools: the label and the default mode in
 * the superblock of an unmounted pool; the label helpers every engine uses.
 * Format: meta_format.h (sb_label, a compatible addition to format 3), docs/format.md.
 *
 * Invariants: T1 tune runs only under the pool's single-opener lock (pool.c
 *               P1) and only on a pool whose primary superblock passes
 *               meta_super_check(): a damaged one is fsck's to repair;
 *             T2 a superblock is written whole with a fresh checksum, the
 *               backup copy before the primary (U2 of super.c holds again
 *               once both are written).
 * Crash argument: meta_super_publish() writes and fences the backup, then
 *   the primary (the COMMIT POINT). A crash before the primary's fence leaves
 *   the primary old and valid, or torn: a mount refuses a torn primary and
 *   points at fsck --repair, which copies the backup (the new superblock)
 *   over it; an old primary with a new backup is the old state, and fsck
 *   --repair copies the primary into the backup. Either way each changed
 *   field reads wholly old or wholly new, never mixed.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "meta/meta.h"
#include "persist/pm.h"

int meta_label_check(const char *label)
{
	size_t n = strlen(label);
	if (n > SB_LABEL_MAX)
		return fr_err(-EINVAL, "label '%s' is %zu bytes long; at most %d fit", label, n,
			      SB_LABEL_MAX);
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)label[i];
		if (c < 0x20 || c == 0x7f)
			return fr_err(-EINVAL, "a label may not hold control characters");
	}
	return 0;
}

void meta_label_get(const struct fr_super *sb, char out[SB_LABEL_MAX + 1])
{
	/* The pool is untrusted: no terminator is assumed, and a control
	 * character never reaches a terminal. */
	size_t i;
	for (i = 0; i < SB_LABEL_MAX && sb->sb_label[i]; i++) {
		unsigned char c = (unsigned char)sb->sb_label[i];
		out[i] = (char)(c < 0x20 || c == 0x7f ? '?' : c);
	}
	out[i] = '\0';
}

void meta_label_set(struct fr_super *sb, const char *label)
{
	memset(sb->sb_label, 0, sizeof(sb->sb_label));
	memcpy(sb->sb_label, label, strnlen(label, SB_LABEL_MAX));
}

/* Writes sb (checksum set) at base + backup_off, fences, then at base +
 * SB_OFF and fences: the crash order of mkfs (tune.c). */
static void meta_super_publish(char *base, uint64_t backup_off, const struct fr_super *sb)
{
	pm_copy_flush(base + backup_off, sb, sizeof(*sb));
	pm_fence();				       /* ORDER: backup before primary */
	pm_copy_flush(base + SB_OFF, sb, sizeof(*sb)); /* COMMIT POINT of tune */
	pm_fence();
}

int meta_tune(const char *path, const struct meta_tune_args *t)
{
	struct pool p;
	int rc = pool_open(&p, path, 0); /* T1 */
	if (rc)
		return rc;
	struct fr_super sb, bk;
	const char *why;
	if (pread(p.fd, &sb, sizeof(sb), SB_OFF) != (ssize_t)sizeof(sb)) {
		rc = fr_err(-EINVAL, "%s: too short to be a ferrite pool", path);
		goto out;
	}
	rc = meta_super_check(&sb, p.file_size, &why);
	if (rc) {
		rc = fr_err(rc, "%s: %s%s", path, why,
			    rc == -EUCLEAN ? " (run `ferrite fsck --repair` first)" : "");
		goto out;
	}
	struct fr_super nsb = sb;
	if (t->label)
		meta_label_set(&nsb, t->label);
	if (t->mode >= 0)
		nsb.sb_mode = (uint32_t)t->mode;
	nsb.sb_checksum = meta_super_csum(&nsb);
	int same_backup = pread(p.fd, &bk, sizeof(bk), SB_BACKUP_OFF) == (ssize_t)sizeof(bk) &&
			  memcmp(&bk, &nsb, sizeof(bk)) == 0;
	if (memcmp(&sb, &nsb, sizeof(sb)) == 0 && same_backup)
		goto out;		 /* nothing to change */
	rc = pool_map(&p, FR_UNIT_SIZE); /* unit 0 holds both copies */
	if (rc)
		goto out;
	meta_super_publish(p.base, SB_BACKUP_OFF, &nsb); /* T2 */
out:
	pool_close(&p);
	return rc;
}
