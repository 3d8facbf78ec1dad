/*
 * tune.c -- `ferrite tune` for tiered pools: the label, and re-pointing the
 * pool at a backing directory that moved; the backups that make both
 * crash-safe, and their repair by fsck.
 * Format: tier_format.h (TIER_HDR_BACKUP_OFF), meta_format.h
 * (SB_TIER_BACKUP_OFF, sb_label), docs/format.md ("Tiered pools").
 *
 * Invariants: T1 tune runs only under the pool's single-opener lock, on a
 *               pool whose superblock and header pass their checks;
 *             T2 a new backing directory is taken only if it proves it holds
 *               this pool's data -- its user.ferrite.pool attribute names the
 *               pool's UUID, or (no attribute at all) it is the very
 *               directory the pool was made for, renamed: same inode number
 *               and birth time -- or the caller forces it (M2 of mount.c
 *               then holds again: the attribute is set afterwards);
 *             T3 the backups hold a complete superblock and the header's
 *               checksummed bytes; a primary is restored from its backup
 *               only when the primary fails its check and the backup passes.
 * Crash argument: tune writes and fences both backups (the new superblock
 *   and header), then the header's checksummed bytes in place (fence), then
 *   the superblock (fence). A crash leaves each primary wholly old, wholly
 *   new, or torn; a torn one fails its checksum, the mount refuses it and
 *   fsck --repair copies the backup -- the new one -- over it. Valid
 *   primaries that differ from the backups are the state before the
 *   interrupted part; fsck --repair copies them into the backups. So the
 *   label and the backing directory each read old or new, never mixed (a
 *   crash between the two writes may keep one change and not the other).
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "meta/meta.h"
#include "tier/sys.h"
#include "tier/tier.h"
#include "tier/tier_api.h"

#define POOL_XATTR "user.ferrite.pool" /* as mount.c (M2) */

/* ---- backups (T3) ------------------------------------------------------------------ */

static int super_ok(const struct fr_super *sb, uint64_t file_size)
{
	const char *why;
	return meta_super_check_common(sb, file_size, &why) == 0 &&
	       (sb->sb_incompat & SB_INCOMPAT_TIER);
}

static int header_ok(const struct tier_header *th, uint64_t pool_size)
{
	char why[256];
	return tier_header_check(th, pool_size, why, sizeof why) == 0;
}

static int all_zero(const void *p, size_t n)
{
	const unsigned char *b = p;
	for (size_t i = 0; i < n; i++)
		if (b[i])
			return 0;
	return 1;
}

/* Reads len bytes at off into buf (zeroed first: a short read leaves zeros). */
static void read_at(int fd, void *buf, size_t len, uint64_t off)
{
	memset(buf, 0, len);
	if (pread(fd, buf, len, (off_t)off) != (ssize_t)len)
		memset(buf, 0, len);
}

int tier_backups_intact(int fd, uint64_t file_size)
{
	struct fr_super sb;
	struct tier_header *th = calloc(1, sizeof(*th));
	int r = 0;
	read_at(fd, &sb, sizeof sb, SB_TIER_BACKUP_OFF);
	if (super_ok(&sb, file_size))
		r |= TIER_BACKUP_SUPER;
	if (th) {
		read_at(fd, th, TIER_HDR_SUM_BYTES, TIER_HDR_BACKUP_OFF);
		if ((r & TIER_BACKUP_SUPER) && header_ok(th, sb.sb_pool_size))
			r |= TIER_BACKUP_HEADER;
	}
	free(th);
	return r;
}

/* One primary and its backup: restores the primary (invalid, backup valid)
 * or refreshes the backup (valid, differs). Returns 1 if a problem was left. */
static int fix_pair(int fd, int repair, fr_report_fn report, void *rarg, const char *what,
		    const void *prim, int prim_ok, uint64_t prim_off, const void *bk, int bk_ok,
		    uint64_t bk_off, size_t len, int *fixed)
{
	if (all_zero(bk, len) || (prim_ok && memcmp(prim, bk, len) == 0))
		return 0; /* never tuned, or in step */
	if (!prim_ok && !bk_ok)
		return 0; /* damage: the ordinary check reports it */
	const void *src = prim_ok ? prim : bk;
	uint64_t dst = prim_ok ? bk_off : prim_off;
	if (prim_ok)
		fr_report(report, rarg,
			  "%s: its backup differs from it (a `ferrite tune` was interrupted)",
			  what);
	else
		fr_report(
		    report, rarg,
		    "%s: damaged, but its backup is intact (a `ferrite tune` was interrupted)",
		    what);
	if (!repair || pwrite(fd, src, len, (off_t)dst) != (ssize_t)len || fsync(fd) != 0)
		return 1;
	fr_report(report, rarg, "%s: %s", what,
		  prim_ok ? "backup brought up to date" : "restored from its backup");
	(*fixed)++;
	return 0;
}

int tier_backups_fix(int fd, uint64_t file_size, int repair, fr_report_fn report, void *rarg,
		     int *fixed)
{
	struct fr_super sb, bsb;
	struct tier_header *th = calloc(1, sizeof(*th)), *bth = calloc(1, sizeof(*bth));
	if (!th || !bth) {
		free(th);
		free(bth);
		return 0; /* the ordinary check runs without this step */
	}
	read_at(fd, &sb, sizeof sb, SB_OFF);
	read_at(fd, &bsb, sizeof bsb, SB_TIER_BACKUP_OFF);
	int sb_ok = super_ok(&sb, file_size), bsb_ok = super_ok(&bsb, file_size);
	int left = fix_pair(fd, repair, report, rarg, "superblock", &sb, sb_ok, SB_OFF, &bsb,
			    bsb_ok, SB_TIER_BACKUP_OFF, sizeof sb, fixed);
	/* The header's bounds come from whichever superblock is in force now. */
	uint64_t pool_size = sb_ok ? sb.sb_pool_size : bsb_ok ? bsb.sb_pool_size : 0;
	read_at(fd, th, TIER_HDR_SUM_BYTES, TIER_HDR_OFF);
	read_at(fd, bth, TIER_HDR_SUM_BYTES, TIER_HDR_BACKUP_OFF);
	if (pool_size)
		left +=
		    fix_pair(fd, repair, report, rarg, "tier header", th, header_ok(th, pool_size),
			     TIER_HDR_OFF, bth, header_ok(bth, pool_size), TIER_HDR_BACKUP_OFF,
			     TIER_HDR_SUM_BYTES, fixed);
	free(th);
	free(bth);
	return left;
}

/* ---- re-pointing (T2) ----------------------------------------------------------------- */

/* Is the pool file inside dir (the tree it would cache)? */
static int pool_inside(const char *pool, const char *dir)
{
	char tmp[PATH_MAX], pooldir[PATH_MAX];
	snprintf(tmp, sizeof tmp, "%s", pool);
	char *slash = strrchr(tmp, '/');
	if (slash)
		*slash = 0;
	if (!realpath(slash ? (tmp[0] ? tmp : "/") : ".", pooldir))
		return 0;
	size_t n = strlen(dir);
	return !strncmp(pooldir, dir, n) && (pooldir[n] == '/' || !pooldir[n] || n == 1);
}

/* Checks the new directory (T2) and writes its identity into nth. */
static int repoint(const char *pool, const char *uuid, const char *given, int force, int *forced,
		   int *other, struct tier_header *nth)
{
	char dir[PATH_MAX];
	if (!realpath(given, dir))
		return fr_err(-errno, "backing directory %s: %s", given, strerror(errno));
	if (strlen(dir) >= TIER_BACKING_MAX)
		return fr_err(-ENAMETOOLONG, "backing directory path too long (%zu bytes)",
			      strlen(dir));
	if (pool_inside(pool, dir))
		return fr_err(-EINVAL, "the pool %s lies inside the directory %s", pool, dir);
	int fd = tsys_openat(AT_FDCWD, dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC, 0);
	struct stat st;
	if (fd < 0 || fstat(fd, &st) != 0) {
		int e = errno;
		if (fd >= 0)
			close(fd);
		return fr_err(-e, "backing directory %s: %s", dir, strerror(e));
	}
	int64_t btime = tier_btime(fd);
	char owner[64] = "";
	ssize_t on = tsys_fgetxattr(fd, POOL_XATTR, owner, sizeof owner - 1);
	close(fd);
	if (on > 0)
		owner[on] = 0;
	int same_dir = on < 0 && (uint64_t)st.st_ino == nth->th_backing_ino &&
		       nth->th_backing_btime && btime == nth->th_backing_btime;
	int proven = (on > 0 && strcmp(owner, uuid) == 0) || same_dir;
	*forced = 0;
	if (!proven && !force) {
		if (on > 0)
			return fr_err(-EPERM,
				      "%s belongs to another pool (%s), not to this one (%s); "
				      "--force re-points this pool there anyway and binds the "
				      "directory to it",
				      dir, owner, uuid);
		return fr_err(-EPERM,
			      "nothing shows that %s holds this pool's data: it carries no %s "
			      "attribute naming %s, and it is not the directory the pool was "
			      "made for; if it is (moved or copied without extended "
			      "attributes), run again with --force",
			      dir, POOL_XATTR, uuid);
	}
	*forced = !proven;
	/* Not the original directory renamed: its files have other inode
	 * numbers than the records remember (files.c finds them by those). */
	*other = !((uint64_t)st.st_ino == nth->th_backing_ino &&
		   (!nth->th_backing_btime || !btime || btime == nth->th_backing_btime));
	memset(nth->th_backing, 0, sizeof nth->th_backing);
	memcpy(nth->th_backing, dir, strlen(dir) + 1);
	nth->th_backing_ino = (uint64_t)st.st_ino;
	nth->th_backing_btime = btime;
	return 0;
}

/* ---- tune ---------------------------------------------------------------------------------- */

int tier_tune(const char *path, const struct meta_tune_args *t, const char *backing, int force,
	      int *forced, int *other)
{
	*forced = 0;
	*other = 0;
	if (t->mode >= 0)
		return fr_err(-EINVAL,
			      "%s is a tiered pool: it has no sync or strict mode (every write "
			      "is atomic)",
			      path);
	struct pool p;
	int rc = pool_open(&p, path, 0); /* T1 */
	if (rc)
		return rc;
	struct fr_super sb;
	struct tier_header *nth = malloc(sizeof(*nth));
	const char *why;
	read_at(p.fd, &sb, sizeof sb, SB_OFF);
	rc = nth ? meta_super_check_common(&sb, p.file_size, &why) : -ENOMEM;
	if (rc) {
		rc = fr_err(rc, "%s: %s%s", path, nth ? why : "out of memory",
			    rc == -EUCLEAN ? " (run `ferrite fsck --repair` first)" : "");
		goto out;
	}
	rc = pool_map(&p, FR_UNIT_SIZE); /* superblock, header and backups */
	if (rc)
		goto out;
	char *base = p.base, bad[512];
	const struct tier_header *th = (const struct tier_header *)(base + TIER_HDR_OFF);
	if (tier_header_check(th, sb.sb_pool_size, bad, sizeof bad) != 0) {
		rc = fr_err(-EUCLEAN, "%s: %s (run `ferrite fsck --repair` first)", path, bad);
		goto out;
	}
	memcpy(nth, th, sizeof(*nth));
	char uuid[37];
	meta_uuid_str(sb.sb_uuid, uuid);
	if (backing && (rc = repoint(path, uuid, backing, force, forced, other, nth)) != 0)
		goto out;
	nth->th_csum = tier_header_csum(nth);
	struct fr_super nsb = sb;
	if (t->label)
		meta_label_set(&nsb, t->label);
	nsb.sb_backup_off = SB_TIER_BACKUP_OFF;
	nsb.sb_checksum = meta_super_csum(&nsb);
	if (memcmp(&nsb, base + SB_TIER_BACKUP_OFF, sizeof nsb) ||
	    memcmp(nth, base + TIER_HDR_BACKUP_OFF, TIER_HDR_SUM_BYTES) ||
	    memcmp(&nsb, base + SB_OFF, sizeof nsb) ||
	    memcmp(nth, base + TIER_HDR_OFF, TIER_HDR_SUM_BYTES)) {
		pm_copy_flush(base + SB_TIER_BACKUP_OFF, &nsb, sizeof nsb);
		pm_copy_flush(base + TIER_HDR_BACKUP_OFF, nth, TIER_HDR_SUM_BYTES);
		pm_fence(); /* ORDER: backups before primaries */
		pm_copy_flush(base + TIER_HDR_OFF, nth, TIER_HDR_SUM_BYTES);
		pm_fence(); /* the backing directory changed (if it did) */
		pm_copy_flush(base + SB_OFF, &nsb, sizeof nsb);
		pm_fence(); /* COMMIT POINT of tune */
	}
	/* M2 again: the directory now names its pool (a file system without
	 * attributes keeps the inode number and birth time just recorded). */
	if (backing)
		tsys_setxattr(nth->th_backing, POOL_XATTR, uuid, 36, 0);
out:
	free(nth);
	pool_close(&p);
	return rc;
}
