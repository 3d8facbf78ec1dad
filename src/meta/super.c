/*
 * super.c -- pool lifecycle: mkfs layout, superblock validation, mount
 * (attach + log recovery) and unmount. Format: meta_format.h, docs/format.md.
 *
 * Pool layout: unit 0 holds the superblock (page 0), the space header
 * (page 1), the global state (page 2) and a backup superblock (last page);
 * the log slots follow from 2 MiB; then the buddy bitmaps; then data units.
 *
 * Invariants: U1 the superblock is valid (magic, version, checksum) only
 *               after everything it describes has been written and fenced;
 *             U2 the backup superblock is identical to the primary.
 * Crash argument: mkfs zeroes the superblock first and writes it last, so an
 *   interrupted mkfs leaves a file that is refused as "not a ferrite pool".
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "meta/meta.h"
#include "persist/pm.h"

#define MIN_POOL      (16 * FR_MIB)
#define DEFAULT_POOL  (1 * FR_GIB)
#define MAX_POOL      (16ULL << 40)
#define LOG_SLOT_SIZE (64 * 1024)

static uint32_t super_csum(const struct fr_super *sb)
{
	return fr_crc32c(0, sb, offsetof(struct fr_super, sb_checksum));
}

uint32_t meta_super_csum(const struct fr_super *sb)
{
	return super_csum(sb);
}

void meta_super_init(struct fr_super *sb, uint64_t size, uint32_t incompat)
{
	memset(sb, 0, sizeof(*sb));
	sb->sb_magic = SB_MAGIC;
	sb->sb_version = FR_FORMAT_VERSION;
	sb->sb_size = offsetof(struct fr_super, sb_checksum);
	if (getrandom(sb->sb_uuid, sizeof(sb->sb_uuid), 0) != sizeof(sb->sb_uuid)) {
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		uint64_t x =
		    (uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 20) ^ (uint64_t)getpid();
		memcpy(sb->sb_uuid, &x, 8);
		memcpy(sb->sb_uuid + 8, &sb, sizeof(void *));
	}
	sb->sb_uuid[6] = (uint8_t)((sb->sb_uuid[6] & 0x0f) | 0x40); /* RFC 4122 v4 */
	sb->sb_uuid[8] = (uint8_t)((sb->sb_uuid[8] & 0x3f) | 0x80);
	memcpy(&sb->sb_hash_seed, sb->sb_uuid + 4, 8);
	sb->sb_pool_size = size;
	sb->sb_page_size = FR_PAGE_SIZE;
	sb->sb_unit_size = FR_UNIT_SIZE;
	sb->sb_incompat = incompat;
	sb->sb_mkfs_time = (int64_t)time(NULL);
}

void meta_uuid_str(const uint8_t *u, char out[37])
{
	snprintf(out, 37, "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
		 u[0], u[1], u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12],
		 u[13], u[14], u[15]);
}

int meta_super_check_common(const struct fr_super *sb, uint64_t file_size, const char **why)
{
	static __thread char msg[200];
	*why = msg;
	if (sb->sb_magic != SB_MAGIC) {
		snprintf(msg, sizeof(msg), "not a ferrite pool (no ferrite signature)");
		return -EINVAL;
	}
	if (sb->sb_version > FR_FORMAT_VERSION || (sb->sb_incompat & ~SB_INCOMPAT_SUPPORTED)) {
		snprintf(msg, sizeof(msg),
			 "pool format version %u is newer than this ferrite supports (%u)",
			 sb->sb_version, FR_FORMAT_VERSION);
		return -EPROTONOSUPPORT;
	}
	if (sb->sb_size != offsetof(struct fr_super, sb_checksum) ||
	    sb->sb_checksum != super_csum(sb)) {
		snprintf(msg, sizeof(msg), "superblock checksum mismatch (superblock damaged)");
		return -EUCLEAN;
	}
	if (sb->sb_version == 0 || sb->sb_page_size != FR_PAGE_SIZE ||
	    sb->sb_unit_size != FR_UNIT_SIZE || sb->sb_pool_size % FR_UNIT_SIZE ||
	    sb->sb_pool_size < MIN_POOL) {
		snprintf(msg, sizeof(msg), "superblock geometry is inconsistent (damaged)");
		return -EUCLEAN;
	}
	if (sb->sb_pool_size > file_size) {
		snprintf(
		    msg, sizeof(msg),
		    "pool is truncated: the superblock describes %llu bytes, the file has %llu",
		    (unsigned long long)sb->sb_pool_size, (unsigned long long)file_size);
		return -EUCLEAN;
	}
	return 0;
}

static int is_tier_super(const struct fr_super *sb)
{
	return sb->sb_magic == SB_MAGIC && sb->sb_checksum == super_csum(sb) &&
	       sb->sb_version >= 3 && (sb->sb_incompat & SB_INCOMPAT_TIER);
}

int meta_pool_is_tier(const char *path)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	struct fr_super sb;
	memset(&sb, 0, sizeof sb);
	int tier = pread(fd, &sb, sizeof sb, SB_OFF) == (ssize_t)sizeof sb && is_tier_super(&sb);
	/* A primary torn by an interrupted `ferrite tune` of a tiered pool: the
	 * tier engine's fsck restores it from its backup. */
	if (!tier && !(sb.sb_magic == SB_MAGIC && sb.sb_checksum == super_csum(&sb)))
		tier = pread(fd, &sb, sizeof sb, SB_TIER_BACKUP_OFF) == (ssize_t)sizeof sb &&
		       is_tier_super(&sb);
	close(fd);
	return tier;
}

int meta_super_check(const struct fr_super *sb, uint64_t file_size, const char **why)
{
	static __thread char msg[200];
	if (sb->sb_magic == SB_MAGIC && (sb->sb_incompat & SB_INCOMPAT_TIER)) {
		*why = msg;
		snprintf(msg, sizeof(msg), "a tiered pool, not a pm-engine pool");
		return -EINVAL;
	}
	int rc = meta_super_check_common(sb, file_size, why);
	if (rc)
		return rc;
	/* The pm engine's own layout after page 0. */
	if (sb->sb_space_off != SB_SPACE_OFF || sb->sb_state_off != SB_STATE_OFF ||
	    sb->sb_backup_off != SB_BACKUP_OFF || sb->sb_log_off != FR_UNIT_SIZE ||
	    sb->sb_log_count == 0 || sb->sb_log_count > 1024 || sb->sb_log_size < 16 * 1024 ||
	    sb->sb_log_size > 16 * FR_MIB || sb->sb_log_size % 4096 ||
	    sb->sb_meta_end != sb->sb_log_off + (uint64_t)sb->sb_log_count * sb->sb_log_size ||
	    sb->sb_meta_end >= sb->sb_pool_size || sb->sb_mode > 1) {
		*why = msg;
		snprintf(msg, sizeof(msg), "superblock geometry is inconsistent (damaged)");
		return -EUCLEAN;
	}
	return 0;
}

static int read_super(struct pool *p, uint64_t off, struct fr_super *sb)
{
	memset(sb, 0, sizeof(*sb));
	ssize_t n = pread(p->fd, sb, sizeof(*sb), (off_t)off);
	return n == (ssize_t)sizeof(*sb) ? 0 : -EIO;
}

/* sb: the superblock to use (the pool's own, or the one mkfs is writing). */
static int attach(struct meta *m, struct fr_super *sb)
{
	struct pool *p = &m->pool;
	int rc = sp_header_check(p, SB_SPACE_OFF, sb->sb_meta_end);
	if (rc)
		return rc;
	rc = sp_attach(&m->sp, p, SB_SPACE_OFF);
	if (rc)
		return rc;
	m->sb = sb;
	m->sp.reserve_windows = sb->sb_version >= FR_FORMAT_SMALL_BLOCKS;
	m->st = (struct fr_state *)(p->base + SB_STATE_OFF);
	if (m->st->st_magic != ST_MAGIC)
		return fr_err(-EUCLEAN, "global state page damaged (run `ferrite fsck`)");
	for (int i = 0; i < MP_COUNT; i++)
		if (!mp_head_check(m, (enum mp_id)i))
			return fr_err(-EUCLEAN, "metadata pool %d header damaged", i);
	return log_init(m);
}

static int existing_content(struct pool *p, int *is_pool)
{
	struct fr_super sb;
	*is_pool = 0;
	if (p->file_size == 0)
		return 0;
	if (read_super(p, 0, &sb) == 0 && sb.sb_magic == SB_MAGIC)
		*is_pool = 1;
	return 1;
}

int meta_mkfs_prepare(struct pool *p, const char *path, const struct meta_mkfs_params *prm,
		      uint64_t *size_out)
{
	int rc = pool_open(p, path, POOL_CREATE);
	if (rc)
		return rc;
	uint64_t size = prm->size;
	int is_pool;
	if (existing_content(p, &is_pool) && !prm->force && p->kind != POOL_DEVDAX)
		return fr_err(-EEXIST,
			      is_pool
				  ? "%s: already a ferrite pool (use --force to format it again)"
				  : "%s: file exists and is not empty (use --force to overwrite)",
			      path);
	if (p->kind == POOL_DEVDAX) {
		if (size == 0 || size > p->file_size)
			size = p->file_size;
	} else if (size == 0) {
		size = DEFAULT_POOL;
	}
	size = FR_ALIGN_DOWN(size, FR_UNIT_SIZE);
	if (size < MIN_POOL)
		return fr_err(-EINVAL, "%s: pool size must be at least %llu MiB", path,
			      (unsigned long long)(MIN_POOL >> 20));
	if (size > MAX_POOL)
		return fr_err(-EINVAL, "%s: pool size must be at most 16 TiB", path);
	rc = pool_populate(p, size, prm->progress, prm->progress_arg);
	if (!rc)
		rc = pool_map(p, size);
	*size_out = size;
	return rc;
}

int meta_mkfs_finish(struct pool *p, int rc)
{
	if (rc)
		rc = pool_mkfs_undo(p, rc); /* no pool file left half made */
	pool_close(p);
	return rc;
}

int meta_mkfs(const char *path, const struct meta_mkfs_params *prm,
	      int (*make_root)(struct meta *m, struct tx *tx, void *arg), void *arg)
{
	struct meta *m = calloc(1, sizeof(*m));
	if (!m)
		return -ENOMEM;
	struct pool *p = &m->pool;
	uint64_t size;
	int rc = meta_mkfs_prepare(p, path, prm, &size);
	if (rc)
		goto out;

	char *base = p->base;
	/* U1: no valid superblock until the end. */
	pm_zero_nt(base, FR_UNIT_SIZE);
	pm_fence();
	uint32_t nlogs = size >= 256 * FR_MIB ? 64 : 16;
	uint64_t meta_end = FR_UNIT_SIZE + (uint64_t)nlogs * LOG_SLOT_SIZE;
	log_format(base, FR_UNIT_SIZE, nlogs, LOG_SLOT_SIZE);
	struct fr_state *st = (struct fr_state *)(base + SB_STATE_OFF);
	pm_store8(&st->st_magic, ST_MAGIC);
	pm_flush(st, 64);
	mp_format(st);
	uint64_t data_start;
	rc = sp_format(p, SB_SPACE_OFF, meta_end, &data_start);
	if (rc)
		goto out;

	struct fr_super sb;
	meta_super_init(&sb, size, 0);
	sb.sb_mode = (uint32_t)prm->mode;
	sb.sb_space_off = SB_SPACE_OFF;
	sb.sb_state_off = SB_STATE_OFF;
	sb.sb_log_off = FR_UNIT_SIZE;
	sb.sb_log_count = nlogs;
	sb.sb_log_size = LOG_SLOT_SIZE;
	sb.sb_backup_off = SB_BACKUP_OFF;
	sb.sb_meta_end = meta_end;
	sb.sb_checksum = super_csum(&sb);

	/* Build the root directory through the normal structures, applied
	 * without the log: the pool is not valid yet. */
	rc = attach(m, &sb);
	if (rc)
		goto out_detach;
	struct log_ctx *lc = log_acquire(m);
	if (!lc) {
		rc = -ENOMEM;
		goto out_detach;
	}
	rc = make_root(m, lc->tx, arg);
	if (rc)
		tx_abort(lc->tx);
	else
		tx_apply_unlogged(lc->tx);
	log_release(m, lc);
	if (rc)
		goto out_detach;

	pm_copy_flush(base + SB_BACKUP_OFF, &sb, sizeof(sb));
	pm_fence();
	pm_copy_flush(base + SB_OFF, &sb, sizeof(sb)); /* COMMIT POINT of mkfs */
	pm_fence();
out_detach:
	log_fini(m);
	sp_detach(&m->sp);
out:
	rc = meta_mkfs_finish(p, rc);
	free(m);
	return rc;
}

int meta_open(struct meta *m, const char *path, int flags)
{
	memset(m, 0, sizeof(*m));
	struct pool *p = &m->pool;
	int rc = pool_open(p, path,
			   (flags & META_PRIVATE)  ? POOL_PRIVATE
			   : (flags & META_SHARED) ? POOL_SHARED
						   : 0);
	if (rc)
		return rc;
	struct fr_super sb;
	const char *why;
	if (p->file_size == 0) {
		rc = fr_err(-EINVAL,
			    "%s: empty file, not a ferrite pool (format it with "
			    "`ferrite mkfs %s`)",
			    path, path);
		goto fail;
	}
	if (read_super(p, SB_OFF, &sb)) {
		rc = fr_err(-EINVAL, "%s: too short to be a ferrite pool (%llu bytes)", path,
			    (unsigned long long)p->file_size);
		goto fail;
	}
	rc = meta_super_check(&sb, p->file_size, &why);
	if (rc) {
		struct fr_super bk;
		const char *why2;
		int backup_ok = rc == -EUCLEAN && read_super(p, SB_BACKUP_OFF, &bk) == 0 &&
				meta_super_check(&bk, p->file_size, &why2) == 0;
		rc = fr_err(rc, "%s: %s%s", path, why,
			    backup_ok ? "; the backup superblock is intact: run `ferrite fsck "
					"--repair`"
				      : "");
		goto fail;
	}
	rc = pool_map(p, sb.sb_pool_size);
	if (rc)
		goto fail;
	rc = attach(m, (struct fr_super *)(p->base + SB_OFF));
	if (rc) {
		fr_err(rc, "%s: %s", path, fr_err_get());
		goto fail;
	}
	/* a process that joins others recovers nothing: they are alive, and
	 * one that dies is recovered by whoever takes its turn (share.c H3) */
	rc = (flags & META_PRIVATE)	     ? log_pending(m)
	     : (p->share && !p->share_first) ? 0
					     : log_recover(m);
	if (rc >= 0 && (flags & META_PRIVATE))
		m->pending_entries = (uint64_t)rc;
	if (rc < 0) {
		fr_err(rc, "%s: %s", path, fr_err_get());
		goto fail;
	}
	rc = vs_init(&m->sp);
	if (rc)
		goto fail;
	return 0;
fail:
	meta_close(m);
	return rc;
}

static void drop_windows(void *sp, uint64_t w, uint64_t n)
{
	vs_unmap_windows(sp, w, n);
}

static void drop_all_windows(void *sp)
{
	vs_unmap_all(sp);
}

int meta_turn_enter(struct meta *m)
{
	int why = share_enter(m->pool.share);
	if ((why & SHARE_DEAD) && log_recover(m) < 0)
		fprintf(stderr,
			"ferrite: %s: a process died inside a call, and replaying its log "
			"entry failed: %s (run `ferrite fsck`)\n",
			m->pool.path, fr_err_get());
	/* a replayed entry changed the PPT without the hooks that note it:
	 * every process drops every window, this one below, the others when
	 * they next take the turn (their shared calls wait for that) */
	if (why & SHARE_DEAD)
		share_note_all_windows(m->pool.share);
	if (why & (SHARE_OTHER | SHARE_DEAD)) {
		share_changed_windows(m->pool.share, drop_windows, drop_all_windows, &m->sp,
				      why & SHARE_DEAD);
		share_caught_up(m->pool.share, why);
	}
	return why;
}

void meta_turn_leave(struct meta *m)
{
	share_leave(m->pool.share);
}

int meta_shared_enter(struct meta *m)
{
	return share_enter_shared(m->pool.share);
}

void meta_shared_leave(struct meta *m)
{
	share_leave_shared(m->pool.share);
}

void meta_close(struct meta *m)
{
	log_fini(m);
	if (m->sp.base)
		sp_detach(&m->sp);
	memset(&m->sp, 0, sizeof(m->sp));
	pool_close(&m->pool);
}
