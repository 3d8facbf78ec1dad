/*
 * fuzz_mutate.c -- chooses one damage per trial: a field of one structure
 * set to a telling value (zero, all ones, a boundary, a pool offset just
 * outside the pool, a pointer to another structure, the same field of a
 * sibling), a few flipped bytes, a torn 8-byte store, or a synthetic log
 * entry with a valid fingerprint whose runs point where they should not.
 * Checksummed structures are damaged both ways: with the checksum left
 * stale (detected by it) and recomputed (a crafted pool).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fs/fs_format.h"
#include "fuzz.h"
#include "meta/meta_format.h"
#include "space/space_format.h"
#include "util/util.h"

#define F(type, field)                                                                             \
	{                                                                                          \
#field, (uint32_t)offsetof(struct type, field), (uint32_t)sizeof(((struct type *)0)->field) \
	}
#define ARR(type, field, elem)                                                                     \
	{                                                                                          \
#field "[]", (uint32_t)offsetof(struct type, field),                                       \
		    (uint32_t)(sizeof(((struct type *)0)->field) | ((uint32_t)(elem) << 24))   \
	}
/* A field of size | elem << 24 is an array of elem-byte elements: one is hit. */

static const struct fz_field f_super[] = {
    F(fr_super, sb_magic),	F(fr_super, sb_version),     F(fr_super, sb_size),
    F(fr_super, sb_pool_size),	F(fr_super, sb_page_size),   F(fr_super, sb_unit_size),
    F(fr_super, sb_mode),	F(fr_super, sb_incompat),    F(fr_super, sb_hash_seed),
    F(fr_super, sb_space_off),	F(fr_super, sb_state_off),   F(fr_super, sb_log_off),
    F(fr_super, sb_log_count),	F(fr_super, sb_log_size),    F(fr_super, sb_backup_off),
    F(fr_super, sb_meta_end),	F(fr_super, sb_checksum),
};
static const struct fz_field f_space[] = {
    F(sp_header, sph_magic),	      F(sp_header, sph_ppt_root),
    F(sp_header, sph_data_page),      F(sp_header, sph_data_npages),
    F(sp_header, sph_free_pages),     ARR(sp_header, sph_bitmap_off, 8),
    ARR(sp_header, sph_summary_off, 8), ARR(sp_header, sph_nwords, 8),
    F(sp_header, sph_vspace_size),    F(sp_header, sph_top_level),
};
static const struct fz_field f_state[] = {
    F(fr_state, st_magic),
    F(fr_state, st_root_ino),
    F(fr_state, st_orphan_head),
};
static const struct fz_field f_mphead[] = {
    F(mp_head, mph_entry_size), F(mp_head, mph_id),	    F(mp_head, mph_free_head),
    F(mp_head, mph_total),	F(mp_head, mph_live),	    F(mp_head, mph_block_head),
    F(mp_head, mph_active),
};
static const struct fz_field f_logslot[] = {F(log_slot, ls_magic), F(log_slot, ls_retired)};
static const struct fz_field f_words[] = {{"word[]", 0, 64 | (8u << 24)}};
static const struct fz_field f_pptdir[] = {{"entry[]", 0, 4096 | (8u << 24)}};
static const struct fz_field f_ptable[] = {
    ARR(sp_ptable, pt_pte, 4),	 F(sp_ptable, pt_magic),       F(sp_ptable, pt_home),
    F(sp_ptable, pt_vaddr),	 F(sp_ptable, pt_npages),      F(sp_ptable, pt_flags),
    F(sp_ptable, l3_mask),	 F(sp_ptable, l3_child_level), F(sp_ptable, l3_nalloc),
    ARR(sp_ptable, l3_bitmap, 8), ARR(sp_ptable, ph, 2),
};
static const struct fz_field f_mpblock[] = {
    F(mp_block, mpb_magic),    F(mp_block, mpb_id),   F(mp_block, mpb_entry_size),
    F(mp_block, mpb_nentries), F(mp_block, mpb_bump), F(mp_block, mpb_next),
};
static const struct fz_field f_inode[] = {
    F(fr_inode, i_oob.oob_status), F(fr_inode, i_oob.oob_pool), F(fr_inode, i_oob.oob_next),
    F(fr_inode, i_mode),	   F(fr_inode, i_nlink),	F(fr_inode, i_uid),
    F(fr_inode, i_part),	   F(fr_inode, i_level),	F(fr_inode, i_dkind),
    F(fr_inode, i_dclass),	   F(fr_inode, i_flags),	F(fr_inode, i_generation),
    F(fr_inode, i_blocks),	   F(fr_inode, i_size),		F(fr_inode, i_mtime_sec),
    F(fr_inode, i_mtime_nsec),	   F(fr_inode, i_parent),	F(fr_inode, i_dents),
    F(fr_inode, i_nentries),	   F(fr_inode, i_orphan_next),	F(fr_inode, i_xattr),
    ARR(fr_inode, i_inline, 1),
};
static const struct fz_field f_darray[] = {
    F(fr_darray, da_oob.oob_status),
    F(fr_darray, da_oob.oob_pool),
    ARR(fr_darray, da_fp, 1),
    F(fr_darray, da_used),
};
static const struct fz_field f_dentry[] = {
    F(fr_dentry, d_ino),   F(fr_dentry, d_hash),	 F(fr_dentry, d_namelen),
    F(fr_dentry, d_type),  F(fr_dentry, d_flags),	 ARR(fr_dentry, d_name, 1),
    F(fr_dentry, d_name_off),
};
static const struct fz_field f_name[] = {
    F(fr_name, n_oob.oob_status),
    F(fr_name, n_oob.oob_pool),
    {"n_bytes[]", 16, 48 | (1u << 24)},
};
static const struct fz_field f_dirhdr[] = {
    F(fr_dirhdr, dh_magic),  F(fr_dirhdr, dh_depth),	   F(fr_dirhdr, dh_npages),
    F(fr_dirhdr, dh_narray), ARR(fr_dirhdr, dh_array, 4),
};
static const struct fz_field f_arrpage[] = {{"slot[]", 0, 4096 | (4u << 24)}};
static const struct fz_field f_bucket[] = {
    F(fr_bucket, db_magic), F(fr_bucket, db_depth),  F(fr_bucket, db_count),
    F(fr_bucket, db_used),  F(fr_bucket, db_prefix), ARR(fr_bucket, db_fp, 1),
};
static const struct fz_field f_xblock[] = {
    F(fr_xblock, xb_magic), F(fr_xblock, xb_owner), F(fr_xblock, xb_order),
    F(fr_xblock, xb_count), F(fr_xblock, xb_bytes), F(fr_xblock, xb_csum),
    {"records[]", 64, 256 | (1u << 24)},
};
static const struct fz_field f_oob[] = {
    F(mp_oob, oob_status),
    F(mp_oob, oob_pool),
    F(mp_oob, oob_next),
};

static const struct {
	const char *name;
	const struct fz_field *f;
	size_t n;
} kinds[FZ_NKINDS] = {
#define K(k, nm, tab) [k] = {nm, tab, sizeof(tab) / sizeof(tab[0])}
    K(FZ_SUPER, "super", f_super),
    K(FZ_BACKUP_SUPER, "backup-super", f_super),
    K(FZ_SPACE_HDR, "space-header", f_space),
    K(FZ_STATE, "state", f_state),
    K(FZ_MP_HEAD, "pool-head", f_mphead),
    K(FZ_LOG_SLOT, "log-slot", f_logslot),
    [FZ_LOG_ENTRY] = {"log-entry", NULL, 0},
    K(FZ_BITMAP, "bitmap", f_words),
    K(FZ_PPT_DIR, "ppt-dir", f_pptdir),
    K(FZ_PTABLE, "page-table", f_ptable),
    K(FZ_MP_BLOCK, "pool-block", f_mpblock),
    K(FZ_INODE, "inode", f_inode),
    K(FZ_DARRAY, "dentry-array", f_darray),
    K(FZ_DENTRY, "dentry", f_dentry),
    K(FZ_NAME, "name", f_name),
    K(FZ_DIRHDR, "dir-header", f_dirhdr),
    K(FZ_DARRPAGE, "dir-array-page", f_arrpage),
    K(FZ_BUCKET, "bucket", f_bucket),
    K(FZ_XBLOCK, "xattr-block", f_xblock),
    K(FZ_FREE_ENTRY, "free-entry", f_oob),
#undef K
};

const char *fz_kind_name(int kind)
{
	return kind >= 0 && kind < FZ_NKINDS ? kinds[kind].name : "?";
}

int fz_kind_by_name(const char *name)
{
	for (int k = 0; k < FZ_NKINDS; k++)
		if (strcmp(kinds[k].name, name) == 0)
			return k;
	return -1;
}

const struct fz_field *fz_fields(int kind, size_t *n)
{
	*n = kinds[kind].n;
	return kinds[kind].f;
}

uint64_t fz_rand(struct fz_rng *r)
{
	/* splitmix64: every seed gives a good stream */
	uint64_t z = (r->s += 0x9e3779b97f4a7c15ULL);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

static uint64_t below(struct fz_rng *r, uint64_t n)
{
	return n ? fz_rand(r) % n : 0;
}

static const struct fz_obj *pick_any(const struct fz_map *map, struct fz_rng *r)
{
	return &map->objs[below(r, map->n)];
}

/* A value of width bytes meant to break a field that holds old. */
static uint64_t telling_value(const struct fz_map *map, struct fz_rng *r, unsigned width,
			      uint64_t old, const uint8_t *img, const struct fz_obj *o,
			      uint32_t at)
{
	unsigned bits = width * 8;
	uint64_t mask = bits >= 64 ? ~0ULL : (1ULL << bits) - 1;
	uint64_t ps = map->pool_size;
	switch (below(r, 10)) {
	case 0:
		return 0;
	case 1:
		return mask;
	case 2:
		return old ^ (1ULL << below(r, bits));
	case 3:
		return old + (below(r, 2) ? 1 : -1) * (1 + below(r, 16));
	case 4: {
		unsigned k = (unsigned)below(r, bits);
		static const int64_t d[] = {0, -1, 1};
		return (1ULL << k) + (uint64_t)d[below(r, 3)];
	}
	case 5: {
		static const uint64_t outside[] = {0, 8, 4096, 2 << 20, 1ULL << 63, 0x1000000};
		uint64_t v = below(r, 2) ? ps : map->data_hi;
		switch (below(r, 5)) {
		case 0:
			return v - outside[below(r, 6)];
		case 1:
			return v + outside[below(r, 6)];
		case 2:
			return 0xfffffffffffffff8ULL;
		case 3:
			return (v >> 12) + below(r, 3) - 1; /* as a page number */
		default:
			return -(uint64_t)(8 << below(r, 20));
		}
	}
	case 6: {
		/* a pointer to another structure, keeping the type bits */
		const struct fz_obj *p = pick_any(map, r);
		return p->off | (old & 3);
	}
	case 7: {
		/* the same field of a sibling */
		uint32_t n = (uint32_t)map->count[o->kind];
		const struct fz_obj *s = fz_obj_get(map, o->kind, (uint32_t)below(r, n));
		uint64_t v = 0;
		if (s && s->off + at + width <= map->pool_size)
			memcpy(&v, img + s->off + at, width);
		return v;
	}
	case 8:
		return old + (below(r, 2) ? 4096 : (2 << 20)) * (below(r, 2) ? 1 : -1);
	default:
		return fz_rand(r);
	}
}

static void put_le(uint8_t *p, uint64_t v, unsigned width)
{
	for (unsigned i = 0; i < width; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static uint64_t get_le(const uint8_t *p, unsigned width)
{
	uint64_t v = 0;
	for (unsigned i = 0; i < width; i++)
		v |= (uint64_t)p[i] << (8 * i);
	return v;
}

/* A live log entry (seq = retired + 1, valid checksum) whose runs point at
 * structures, at the edges of the pool or past them. */
static int synth_log_entry(const struct fz_map *map, const uint8_t *img, struct fz_rng *r,
			   uint32_t index, struct fz_edit *e)
{
	const struct fz_obj *slot = fz_obj_get(map, FZ_LOG_SLOT, index);
	if (!slot)
		return 0;
	struct log_slot ls;
	memcpy(&ls, img + slot->off, sizeof ls);
	uint8_t buf[FZ_MAX_EDIT];
	memset(buf, 0, sizeof buf);
	struct log_entry *le = (struct log_entry *)buf;
	uint32_t nruns = 1 + (uint32_t)below(r, 3), p = sizeof *le;
	for (uint32_t i = 0; i < nruns; i++) {
		struct log_run run = {0};
		uint32_t nw = 1 + (uint32_t)below(r, 4);
		switch (below(r, 6)) {
		case 0:
			run.lr_off = 0xfffffffffffffff8ULL - 8 * below(r, 4);
			break;
		case 1:
			run.lr_off = map->pool_size - 8 * below(r, 3);
			break;
		case 2:
			run.lr_off = slot->off - 64 + 8 * below(r, 16); /* the log itself */
			break;
		default: {
			const struct fz_obj *t = pick_any(map, r);
			run.lr_off = (t->off + below(r, t->len)) & ~7ULL;
		}
		}
		if (p + sizeof run + 8 * nw > sizeof buf)
			break;
		memcpy(buf + p, &run, sizeof run);
		uint32_t wpos = p + (uint32_t)sizeof run;
		for (uint32_t w = 0; w < nw; w++) {
			uint64_t old = 0;
			if (run.lr_off < map->pool_size && map->pool_size - run.lr_off >= 8 * w + 8)
				memcpy(&old, img + run.lr_off + 8 * w, 8);
			uint64_t v = telling_value(map, r, 8, old, img, slot, 0);
			memcpy(buf + wpos + 8 * w, &v, 8);
		}
		p = wpos + 8 * nw;
		le->le_nruns = i + 1;
		struct log_run *rp = (struct log_run *)(buf + wpos - sizeof run);
		rp->lr_nwords = below(r, 8) ? nw : (uint32_t)fz_rand(r);
	}
	le->le_seq = ls.ls_retired + 1;
	le->le_magic = LE_MAGIC;
	le->le_nbytes = p - (uint32_t)sizeof *le;
	if (!below(r, 8))
		le->le_nruns += (uint32_t)below(r, 3);
	e->kind = FZ_LOG_ENTRY;
	e->index = index;
	e->at = 0;
	e->len = p;
	e->fix = 1; /* fz_apply computes le_csum */
	memcpy(e->bytes, buf, p);
	return 1;
}

int fz_mutate(const struct fz_map *map, const uint8_t *img, uint64_t seed, struct fz_edit *ed,
	      int cap)
{
	struct fz_rng r = {seed * 0x2545f4914f6cdd1dULL + 1};
	int kind;
	do
		kind = (int)below(&r, FZ_NKINDS);
	while (!map->count[kind]);
	uint32_t index = (uint32_t)below(&r, map->count[kind]);
	const struct fz_obj *o = fz_obj_get(map, kind, index);
	struct fz_edit *e = &ed[0];
	memset(e, 0, sizeof *e);
	e->kind = kind;
	e->index = index;
	(void)cap;
	if (kind == FZ_LOG_ENTRY)
		return synth_log_entry(map, img, &r, index, e);
	int checksummed = kind == FZ_SUPER || kind == FZ_BACKUP_SUPER || kind == FZ_XBLOCK;
	e->fix = checksummed && below(&r, 4) != 0;
	unsigned how = (unsigned)below(&r, 10);
	if (how < 7) {
		size_t nf;
		const struct fz_field *fs = fz_fields(kind, &nf);
		const struct fz_field *f = &fs[below(&r, nf)];
		uint32_t size = f->size & 0xffffff, elem = f->size >> 24, at = f->off;
		if (elem) {
			at += elem * (uint32_t)below(&r, size / elem);
			size = elem;
		}
		if (at + size > o->len)
			return 0;
		uint64_t old = get_le(img + o->off + at, size);
		e->at = at;
		e->len = size;
		put_le(e->bytes, telling_value(map, &r, size, old, img, o, at), size);
	} else if (how < 9) {
		/* a few flipped bytes anywhere in the structure */
		e->at = (uint32_t)below(&r, o->len);
		e->len = (uint32_t)FR_MIN(o->len - e->at, 1 + below(&r, 8));
		memcpy(e->bytes, img + o->off + e->at, e->len);
		for (uint32_t i = 0; i < e->len; i++)
			if (below(&r, 2))
				e->bytes[i] ^= (uint8_t)(1 + below(&r, 255));
	} else {
		/* a torn 8-byte store: a word of the structure replaced whole */
		e->at = (uint32_t)(below(&r, o->len / 8) * 8);
		e->len = 8;
		uint64_t v = below(&r, 2) ? fz_rand(&r) : 0;
		memcpy(e->bytes, &v, 8);
	}
	return 1;
}

static void fix_checksum(const struct fz_map *map, uint8_t *img, size_t len, int kind,
			 const struct fz_obj *o)
{
	if (kind == FZ_SUPER || kind == FZ_BACKUP_SUPER) {
		struct fr_super *sb = (struct fr_super *)(img + o->off);
		sb->sb_checksum = fr_crc32c(0, sb, offsetof(struct fr_super, sb_checksum));
	} else if (kind == FZ_XBLOCK) {
		struct fr_xblock *xb = (struct fr_xblock *)(img + o->off);
		uint64_t room = len - o->off - sizeof *xb;
		xb->xb_csum = fr_crc32c(0, xb + 1, FR_MIN(xb->xb_bytes, room));
	} else if (kind == FZ_LOG_ENTRY) {
		struct log_entry *le = (struct log_entry *)(img + o->off);
		uint32_t csum = 0;
		le->le_csum = 0;
		uint64_t room = len - o->off - sizeof *le;
		csum = fr_crc32c(0, le, sizeof *le);
		le->le_csum = fr_crc32c(csum, le + 1, FR_MIN(le->le_nbytes, room));
	}
	(void)map;
}

int fz_apply(const struct fz_map *map, uint8_t *img, size_t len, const struct fz_edit *ed, int n)
{
	for (int i = 0; i < n; i++) {
		const struct fz_edit *e = &ed[i];
		const struct fz_obj *o = fz_obj_get(map, e->kind, e->index);
		if (!o || e->len > FZ_MAX_EDIT || o->off + e->at + e->len > len)
			return -1;
		memcpy(img + o->off + e->at, e->bytes, e->len);
		if (e->fix)
			fix_checksum(map, img, len, e->kind, o);
	}
	return 0;
}

void fz_edit_format(const struct fz_edit *e, char *buf, size_t cap)
{
	int n = snprintf(buf, cap, "%s %u @%u%s ", fz_kind_name(e->kind), e->index, e->at,
			 e->fix ? " fix" : "");
	for (uint32_t i = 0; i < e->len && n + 3 < (int)cap; i++)
		n += snprintf(buf + n, cap - (size_t)n, "%02x", e->bytes[i]);
}

int fz_edit_parse(const char *line, struct fz_edit *e)
{
	char kind[64], hex[2 * FZ_MAX_EDIT + 1];
	memset(e, 0, sizeof *e);
	const char *fixp = strstr(line, " fix ");
	if (sscanf(line, "%63s %u @%u", kind, &e->index, &e->at) != 3)
		return -1;
	const char *h = strrchr(line, ' ');
	if (!h || sscanf(h + 1, "%1024s", hex) != 1)
		return -1;
	e->kind = fz_kind_by_name(kind);
	e->fix = fixp != NULL;
	size_t hl = strlen(hex);
	if (e->kind < 0 || hl % 2 || hl / 2 > FZ_MAX_EDIT)
		return -1;
	e->len = (uint32_t)(hl / 2);
	for (uint32_t i = 0; i < e->len; i++) {
		unsigned b;
		if (sscanf(hex + 2 * i, "%2x", &b) != 1)
			return -1;
		e->bytes[i] = (uint8_t)b;
	}
	return 0;
}

/* Inode fields the format keeps no second copy or cross-check of: a changed
 * value is a different but consistent file (fsck cannot tell it from a
 * legitimate change). The size is among them: bytes past it may be backed
 * (pre-allocation, or a crash between backing and publishing the size), and
 * large files may be sparse. The SPFS dual copy reserved in the format would
 * make these verifiable. */
static int inode_byte_unverifiable(uint32_t at, uint8_t old, uint8_t new)
{
#define IN(f) (at >= offsetof(struct fr_inode, f) && at < offsetof(struct fr_inode, f) + sizeof(((struct fr_inode *)0)->f))
	if (IN(i_mode))
		/* permission bits are free; the type is checked against the entry */
		return at != offsetof(struct fr_inode, i_mode) + 1 || ((old ^ new) & 0xf0) == 0;
	return IN(i_size) || IN(i_uid) || IN(i_gid) || IN(i_generation) || IN(i_flags) ||
	       IN(i_mtime_sec) || IN(i_ctime_sec) || IN(i_atime_sec) || IN(i_mtime_nsec) ||
	       IN(i_ctime_nsec) || IN(i_atime_nsec) || IN(i_btime_nsec) || IN(i_btime_sec) ||
	       IN(i_inline) || IN(i_rsvd0);
#undef IN
}

int fz_verifiable(const struct fz_map *map, const uint8_t *before, const uint8_t *after,
		  const struct fz_edit *ed, int n)
{
	for (int i = 0; i < n; i++) {
		const struct fz_obj *o = fz_obj_get(map, ed[i].kind, ed[i].index);
		if (!o)
			continue;
		switch (ed[i].kind) {
		case FZ_LOG_ENTRY:
			return 0; /* a committed transaction: any consistent change */
		case FZ_XBLOCK:
			if (ed[i].fix)
				return 0; /* attribute values are as good as their checksum */
			break;
		case FZ_INODE: {
			int only_free = 1;
			for (uint32_t b = 0; b < o->len && only_free; b++)
				if (before[o->off + b] != after[o->off + b])
					only_free = inode_byte_unverifiable(b, before[o->off + b],
									    after[o->off + b]);
			if (only_free)
				return 0;
			break;
		}
		default:
			break;
		}
	}
	return 1;
}
