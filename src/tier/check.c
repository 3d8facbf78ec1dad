/*
 * check.c -- one check per persistent structure of a tiered pool (the tier
 * header, a file record, a chunk descriptor and its tag, the epoch journal
 * entry), shared by mount, recovery, the runtime and fsck.
 * Format: tier_format.h, docs/format.md ("Tiered pools").
 *
 * A pool file is input: a crash, a bad DIMM or a hostile user may have
 * written anything. Each check takes the image as it is mapped, tests every
 * field that is later used as an offset, length, count, index or shift --
 * with arithmetic that cannot wrap -- and returns 0 or -EUCLEAN with a line
 * naming the object (record number, chunk number, pool offset).
 *
 * Invariants: K1 tier_header_check() passing means every region it describes
 *               lies inside the pool, without overlap, in order, aligned, so
 *               record fid < nrecs, chunk c < nchunks and journal bytes below
 *               journal_size are inside the mapping;
 *             K2 a record that passes has a path and handle that fit their
 *               arrays, a path that stays below the backing directory (no
 *               "/", ".", ".." or empty component), a size a file can have,
 *               and a key whose slot arithmetic cannot wrap;
 *             K3 a valid tag that passes names a record number below nrecs,
 *               a chunk index a file can have, and, if that record is in
 *               use, lies in the slot its key puts it in;
 *             K4 a journal entry is applied only if its lists are in
 *               bounds, its fingerprint holds and every page and file it
 *               names passes K3 and names a record in use.
 * What a crash leaves (a path being changed, a torn journal entry) is not
 * damage: those are told apart and left to recovery.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <linux/openat2.h>

#include "tier/sys.h"
#include "tier/tier.h"

#define MAX_PERIOD_MS 60000

static int bad(char *why, size_t n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int bad(char *why, size_t n, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	if (why && n)
		vsnprintf(why, n, fmt, ap);
	va_end(ap);
	return -EUCLEAN;
}

uint32_t tier_header_csum(const struct tier_header *th)
{
	return fr_crc32c(0, th, offsetof(struct tier_header, th_csum));
}

/* a + b <= lim, without wrapping (a and b are read from the pool). */
static int fits(uint64_t a, uint64_t b, uint64_t lim)
{
	return a <= lim && b <= lim - a;
}

int tier_header_check(const struct tier_header *th, uint64_t pool_size, char *why, size_t n)
{
	if (pool_size < TIER_REC_OFF)
		return bad(why, n, "tier header: the pool (%llu bytes) is too small",
			   (unsigned long long)pool_size);
	if (th->th_magic != TIER_MAGIC)
		return bad(why, n, "tier header (pool offset %#x): no tier signature",
			   TIER_HDR_OFF);
	if (th->th_csum != tier_header_csum(th))
		return bad(why, n, "tier header (pool offset %#x): checksum mismatch",
			   TIER_HDR_OFF);
	if (th->th_chunk_size != TIER_CHUNK_SIZE || th->th_consistency > TIER_EPOCH ||
	    th->th_writeback > TIER_WB_DIRECT || th->th_rec_off != TIER_REC_OFF ||
	    th->th_rec_size != TIER_REC_SIZE || th->th_flush_ms > MAX_PERIOD_MS ||
	    th->th_epoch_ms > MAX_PERIOD_MS)
		return bad(why, n,
			   "tier header: chunk size %u, consistency %u, write-back %u, records "
			   "at %#llx of %u bytes, periods %u/%u ms: not what this version writes",
			   th->th_chunk_size, th->th_consistency, th->th_writeback,
			   (unsigned long long)th->th_rec_off, th->th_rec_size, th->th_flush_ms,
			   th->th_epoch_ms);
	if (th->th_nrecs < 2 || th->th_nrecs > (1u << TAG_FID_BITS))
		return bad(why, n, "tier header: %u records (2 to %u)", th->th_nrecs,
			   1u << TAG_FID_BITS);
	/* Bounding the slot count by the pool first keeps every product
	 * below small (nslots * 2 * 4160 <= pool size). */
	uint64_t max_slots = pool_size / (2 * (TIER_CHUNK_SIZE + sizeof(struct tier_desc)));
	if (th->th_nslots < 16 || th->th_nslots > max_slots)
		return bad(why, n, "tier header: %llu slots (16 to %llu in a pool of %llu bytes)",
			   (unsigned long long)th->th_nslots, (unsigned long long)max_slots,
			   (unsigned long long)pool_size);
	uint64_t nchunks = th->th_nslots * 2;
	uint64_t rec_end = TIER_REC_OFF + (uint64_t)th->th_nrecs * TIER_REC_SIZE;
	if (th->th_journal_off % 4096 || th->th_journal_off < rec_end ||
	    !fits(th->th_journal_off, th->th_journal_size, pool_size) ||
	    (th->th_consistency == TIER_EPOCH && th->th_journal_size < 4096))
		return bad(why, n,
			   "tier header: the journal (pool offset %#llx, %llu bytes) does not "
			   "lie between the records (up to %#llx) and the end of the pool",
			   (unsigned long long)th->th_journal_off,
			   (unsigned long long)th->th_journal_size, (unsigned long long)rec_end);
	if (th->th_desc_off % 4096 || th->th_desc_off < th->th_journal_off + th->th_journal_size ||
	    !fits(th->th_desc_off, nchunks * sizeof(struct tier_desc), th->th_data_off))
		return bad(why, n,
			   "tier header: the descriptors (pool offset %#llx, %llu chunks) do not "
			   "lie between the journal and the chunks (pool offset %#llx)",
			   (unsigned long long)th->th_desc_off, (unsigned long long)nchunks,
			   (unsigned long long)th->th_data_off);
	if (th->th_data_off % FR_UNIT_SIZE ||
	    !fits(th->th_data_off, nchunks * TIER_CHUNK_SIZE, pool_size))
		return bad(why, n,
			   "tier header: %llu chunks from pool offset %#llx do not fit a pool of "
			   "%llu bytes",
			   (unsigned long long)nchunks, (unsigned long long)th->th_data_off,
			   (unsigned long long)pool_size);
	if (!memchr(th->th_backing, 0, sizeof th->th_backing) || th->th_backing[0] != '/')
		return bad(why, n, "tier header: the backing directory is not an absolute path");
	return 0;
}

void tier_geom_init(struct tier_geom *g, const char *base, uint64_t pool_size)
{
	const struct tier_header *th = (const struct tier_header *)(base + TIER_HDR_OFF);
	memset(g, 0, sizeof(*g));
	g->pool_size = pool_size;
	g->th = th;
	g->nslots = th->th_nslots;
	g->nchunks = th->th_nslots * 2;
	g->nrecs = th->th_nrecs;
	g->consistency = (int)th->th_consistency;
	g->recs = (const struct tier_rec *)(base + TIER_REC_OFF);
	g->desc = (const struct tier_desc *)(base + th->th_desc_off);
	g->data = base + th->th_data_off;
	g->journal = th->th_journal_size >= sizeof(struct tier_ejournal)
			 ? (const struct tier_ejournal *)(base + th->th_journal_off)
			 : NULL;
	g->journal_size = th->th_journal_size;
}

int tier_image_check(const struct tier_geom *g, int *journal_pending, char *why, size_t n)
{
	for (uint32_t fid = 1; fid < g->nrecs; fid++) {
		int rc = tier_rec_check(g, fid, why, n);
		if (rc)
			return rc;
	}
	for (uint64_t c = 0; c < g->nchunks; c++) {
		int rc = tier_desc_check(g, c, why, n);
		if (rc)
			return rc;
	}
	return tier_journal_check(g, journal_pending, why, n);
}

/* ---- records ------------------------------------------------------------------------ */

/* A path the tier itself stores: relative, canonical (tier_relpath reads it
 * from the kernel), so no component may lead anywhere but down. */
static int path_safe(const char *p, size_t len)
{
	if (memchr(p, 0, len))
		return 0;
	size_t i = 0;
	while (i <= len) {
		size_t j = i;
		while (j < len && p[j] != '/')
			j++;
		size_t cl = j - i;
		if (cl == 0 || (cl == 1 && p[i] == '.') ||
		    (cl == 2 && p[i] == '.' && p[i + 1] == '.'))
			return 0;
		i = j + 1;
	}
	return 1;
}

int tier_rec_path_ok(const struct tier_rec *r)
{
	return r->r_pathlen && r->r_pathlen <= TIER_PATH_MAX &&
	       fr_crc32c(0, r->r_path, r->r_pathlen) == r->r_path_crc;
}

int tier_rec_check(const struct tier_geom *g, uint32_t fid, char *why, size_t n)
{
	if (fid == 0 || fid >= g->nrecs)
		return bad(why, n, "record %u: beyond the %u records", fid, g->nrecs);
	const struct tier_rec *r = &g->recs[fid];
	uint64_t off = TIER_REC_OFF + (uint64_t)fid * TIER_REC_SIZE;
	switch (r->r_state) {
	case REC_FREE:
		return 0; /* nothing of it is read until it is written again */
	case REC_LIVE:
	case REC_DYING:
	case REC_ORPHAN:
		break;
	default:
		return bad(why, n, "record %u (pool offset %#llx): unknown state %#x", fid,
			   (unsigned long long)off, r->r_state);
	}
	if (r->r_pathlen > TIER_PATH_MAX)
		return bad(why, n, "record %u (pool offset %#llx): path length %u (at most %u)",
			   fid, (unsigned long long)off, r->r_pathlen, TIER_PATH_MAX);
	if (r->r_hlen > TIER_HANDLE_MAX)
		return bad(why, n,
			   "record %u (pool offset %#llx): file handle length %u (at most %u)", fid,
			   (unsigned long long)off, r->r_hlen, TIER_HANDLE_MAX);
	if (r->r_size > TIER_MAX_FILE)
		return bad(why, n, "record %u (pool offset %#llx): size %llu (at most %llu)", fid,
			   (unsigned long long)off, (unsigned long long)r->r_size,
			   (unsigned long long)TIER_MAX_FILE);
	if (r->r_key > TIER_KEY_MAX || r->r_stride > g->nslots)
		return bad(why, n, "record %u (pool offset %#llx): key %#llx or stride %llu", fid,
			   (unsigned long long)off, (unsigned long long)r->r_key,
			   (unsigned long long)r->r_stride);
	if (r->r_flags & ~(uint32_t)REC_META_STALE)
		return bad(why, n, "record %u (pool offset %#llx): unknown flags %#x", fid,
			   (unsigned long long)off, r->r_flags);
	/* A path whose checksum fails was being changed (unknown, not damage);
	 * one whose checksum holds was written whole, by us. */
	if (tier_rec_path_ok(r) && !path_safe(r->r_path, r->r_pathlen))
		return bad(why, n,
			   "record %u (pool offset %#llx): path \"%.*s\" leads outside the backing "
			   "directory",
			   fid, (unsigned long long)off, (int)r->r_pathlen, r->r_path);
	return 0;
}

/* ---- chunk descriptors -------------------------------------------------------------- */

int tier_desc_check(const struct tier_geom *g, uint64_t c, char *why, size_t n)
{
	if (c >= g->nchunks)
		return bad(why, n, "chunk %llu: beyond the %llu chunks", (unsigned long long)c,
			   (unsigned long long)g->nchunks);
	const struct tier_desc *d = &g->desc[c];
	uint64_t off = g->th->th_desc_off + c * sizeof(*d);
	uint64_t tag = d->d_tag;
	if (!(tag & TAG_V))
		return 0; /* its fields are not read */
	uint32_t fid = tag_fid(tag);
	uint64_t idx = tag_idx(tag);
	if (fid == 0 || fid >= g->nrecs)
		return bad(why, n,
			   "chunk %llu (descriptor at pool offset %#llx): tag %#llx names record "
			   "%u (1 to %u)",
			   (unsigned long long)c, (unsigned long long)off, (unsigned long long)tag,
			   fid, g->nrecs - 1);
	if (idx > (TIER_MAX_FILE >> TIER_CHUNK_SHIFT))
		return bad(why, n,
			   "chunk %llu (descriptor at pool offset %#llx): chunk index %llu of "
			   "record %u is beyond the largest file",
			   (unsigned long long)c, (unsigned long long)off, (unsigned long long)idx,
			   fid);
	if (d->d_seq > TIER_SEQ_MAX || d->d_old_size > TIER_MAX_FILE ||
	    d->d_new_size > TIER_MAX_FILE)
		return bad(why, n,
			   "chunk %llu (descriptor at pool offset %#llx): write %#llx, sizes "
			   "%llu -> %llu",
			   (unsigned long long)c, (unsigned long long)off,
			   (unsigned long long)d->d_seq, (unsigned long long)d->d_old_size,
			   (unsigned long long)d->d_new_size);
	const struct tier_rec *r = &g->recs[fid];
	if (r->r_state != REC_FREE && r->r_key <= TIER_KEY_MAX &&
	    (r->r_key + idx) % g->nslots != c / 2)
		return bad(why, n,
			   "chunk %llu (descriptor at pool offset %#llx): chunk %llu of record %u "
			   "belongs in slot %llu, not %llu",
			   (unsigned long long)c, (unsigned long long)off, (unsigned long long)idx,
			   fid, (unsigned long long)((r->r_key + idx) % g->nslots),
			   (unsigned long long)(c / 2));
	return 0;
}

/* ---- the epoch journal -------------------------------------------------------------- */

static uint32_t tier_journal_cap(const struct tier_geom *g)
{
	if (g->journal_size < sizeof(struct tier_ejournal))
		return 0;
	uint64_t room = (g->journal_size - sizeof(struct tier_ejournal)) /
			(sizeof(struct ej_page) + sizeof(struct ej_file));
	return (uint32_t)FR_MIN(room, g->nchunks / 4);
}

uint32_t tier_journal_fingerprint(const char *data, const struct tier_ejournal *h,
				  const struct ej_page *pg, const struct ej_file *fl)
{
	struct {
		uint64_t epoch;
		uint32_t npages, nfiles;
	} head = {h->ej_epoch, h->ej_npages, h->ej_nfiles};
	uint32_t crc = fr_crc32c(0, &head, sizeof head);
	crc = fr_crc32c(crc, pg, h->ej_npages * sizeof(*pg));
	crc = fr_crc32c(crc, fl, h->ej_nfiles * sizeof(*fl));
	for (uint32_t i = 0; i < h->ej_npages; i++)
		crc = fr_crc32c(crc, data + ((uint64_t)pg[i].ep_chunk << TIER_CHUNK_SHIFT),
				TIER_CHUNK_SIZE);
	return crc;
}

int tier_journal_check(const struct tier_geom *g, int *pending, char *why, size_t n)
{
	*pending = 0;
	if (g->consistency != TIER_EPOCH)
		return 0;
	const struct tier_ejournal *j = g->journal;
	uint64_t off = g->th->th_journal_off;
	if (!j || j->ej_magic != EJ_MAGIC)
		return bad(why, n, "epoch journal (pool offset %#llx): no journal signature",
			   (unsigned long long)off);
	/* Epochs count periods of milliseconds: far below this, and kept
	 * there so the next epoch number cannot wrap below the applied one. */
	if (j->ej_epoch > TIER_SEQ_MAX || j->ej_applied > TIER_SEQ_MAX)
		return bad(why, n, "epoch journal (pool offset %#llx): epoch %llu, applied %llu",
			   (unsigned long long)off, (unsigned long long)j->ej_epoch,
			   (unsigned long long)j->ej_applied);
	if (j->ej_epoch <= j->ej_applied)
		return 0;
	uint32_t cap = tier_journal_cap(g);
	/* A torn header mixes the old and the new entry's counts, both in
	 * bounds: counts beyond them are damage. */
	if (j->ej_npages > cap || j->ej_nfiles > cap)
		return bad(why, n,
			   "epoch journal (pool offset %#llx): %u pages and %u files (at most %u)",
			   (unsigned long long)off, j->ej_npages, j->ej_nfiles, cap);
	const struct ej_page *pg = (const struct ej_page *)(j + 1);
	const struct ej_file *fl = (const struct ej_file *)(pg + j->ej_npages);
	for (uint32_t i = 0; i < j->ej_npages; i++)
		if (pg[i].ep_chunk >= g->nchunks)
			return 0; /* torn lists: the fingerprint cannot hold */
	if (tier_journal_fingerprint(g->data, j, pg, fl) != j->ej_csum)
		return 0; /* torn: recovery drops it with the open epoch */
	/* Whole, so written by us: everything it names must be usable. */
	for (uint32_t i = 0; i < j->ej_npages; i++) {
		uint64_t tag = pg[i].ep_tag, c = pg[i].ep_chunk, idx = tag_idx(tag);
		uint32_t fid = tag_fid(tag);
		const struct tier_rec *r = fid && fid < g->nrecs ? &g->recs[fid] : NULL;
		if (!(tag & TAG_V) || !r || r->r_state == REC_FREE ||
		    idx > (TIER_MAX_FILE >> TIER_CHUNK_SHIFT) || r->r_key > TIER_KEY_MAX ||
		    (r->r_key + idx) % g->nslots != c / 2)
			return bad(
			    why, n,
			    "epoch journal (pool offset %#llx), page %u: chunk %llu with tag "
			    "%#llx names no chunk of a file in use",
			    (unsigned long long)off, i, (unsigned long long)c,
			    (unsigned long long)tag);
	}
	for (uint32_t i = 0; i < j->ej_nfiles; i++) {
		uint32_t fid = fl[i].ef_fid;
		if (!fid || fid >= g->nrecs || g->recs[fid].r_state == REC_FREE ||
		    fl[i].ef_size > TIER_MAX_FILE)
			return bad(
			    why, n,
			    "epoch journal (pool offset %#llx), file %u: record %u, size %llu",
			    (unsigned long long)off, i, fid, (unsigned long long)fl[i].ef_size);
	}
	*pending = 1;
	return 0;
}

/* ---- opening a record's path ---------------------------------------------------------- */

int tier_open_beneath(int root_fd, const char *path, int flags, mode_t mode)
{
	/* The path was checked (K2), but a directory on it may have been
	 * replaced by a symbolic link since: the kernel keeps us below. */
	struct open_how how = {.flags = (uint64_t)(flags | O_NOFOLLOW | O_CLOEXEC),
			       .mode = (flags & (O_CREAT | O_TMPFILE)) ? mode : 0,
			       .resolve =
				   RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS};
	long fd;
	int tries = 0;
	do /* EAGAIN: a rename somewhere raced the lookup */
		fd = tsys_openat2(root_fd, path, &how, sizeof how);
	while (fd < 0 && errno == EAGAIN && ++tries < 64);
	if (fd < 0 && errno == ENOSYS)
		fd = tsys_openat(root_fd, path, flags | O_NOFOLLOW | O_CLOEXEC, mode);
	return fd < 0 ? -errno : (int)fd;
}
