/*
 * fuzz_map.c -- lists every persistent structure of a pool image by reading
 * the image itself (format headers only, no library code), so the list shows
 * what is on PM, orphan and all, not what a mount would make of it.
 */
#include <stdlib.h>
#include <string.h>

#include "fs/fs_format.h"
#include "fuzz.h"
#include "meta/meta_format.h"
#include "space/space_format.h"

#define PG 4096ULL

struct mapper {
	const uint8_t *img;
	size_t len;
	struct fz_map *map;
	uint64_t root; /* PPT root page offset */
};

static void add(struct fz_map *m, int kind, uint64_t off, uint32_t len)
{
	if (m->n == m->cap) {
		m->cap = m->cap ? m->cap * 2 : 1024;
		m->objs = realloc(m->objs, m->cap * sizeof(*m->objs));
	}
	m->objs[m->n++] = (struct fz_obj){kind, off, len};
}

static const void *at(const struct mapper *mp, uint64_t off, uint64_t len)
{
	if (off > mp->len || len > mp->len - off)
		return NULL;
	return mp->img + off;
}

static uint64_t rd64(const struct mapper *mp, uint64_t off)
{
	const void *p = at(mp, off, 8);
	uint64_t v = 0;
	if (p)
		memcpy(&v, p, 8);
	return v;
}

/* Pool offset of the window entry of vspace offset v, or 0. */
static uint64_t went_at(const struct mapper *mp, uint64_t v)
{
	uint64_t e = rd64(mp, mp->root + ((v >> 39) & 511) * 8);
	if ((e & 3) != 3)
		return 0;
	e = rd64(mp, (e & ~3ULL) + ((v >> 30) & 511) * 8);
	if ((e & 3) != 3)
		return 0;
	return (e & ~3ULL) + ((v >> 21) & 511) * 8;
}

/* Pool offset of vspace offset v, or 0 (the image's own PPT). */
static uint64_t xlate(const struct mapper *mp, uint64_t v)
{
	uint64_t slot = went_at(mp, v);
	if (!slot)
		return 0;
	uint64_t e = rd64(mp, slot);
	if ((e & 3) == 1)
		return (e & ~3ULL) + (v & ((2ULL << 20) - 1) & ~(PG - 1));
	if ((e & 3) == 2) {
		const struct sp_ptable *pt = at(mp, e & ~3ULL, sizeof *pt);
		return pt ? (uint64_t)pt->pt_pte[(v >> 12) & 511] * PG : 0;
	}
	return 0;
}

static void map_ppt(struct mapper *mp)
{
	add(mp->map, FZ_PPT_DIR, mp->root, PG);
	for (int i = 0; i < 512; i++) {
		uint64_t e0 = rd64(mp, mp->root + (uint64_t)i * 8);
		if ((e0 & 3) != 3)
			continue;
		add(mp->map, FZ_PPT_DIR, e0 & ~3ULL, PG);
		for (int j = 0; j < 512; j++) {
			uint64_t e1 = rd64(mp, (e0 & ~3ULL) + (uint64_t)j * 8);
			if ((e1 & 3) != 3)
				continue;
			add(mp->map, FZ_PPT_DIR, e1 & ~3ULL, PG);
			for (int k = 0; k < 512; k++) {
				uint64_t w = rd64(mp, (e1 & ~3ULL) + (uint64_t)k * 8);
				if ((w & 3) == 2)
					add(mp->map, FZ_PTABLE, w & ~3ULL, PG);
			}
		}
	}
}

static void map_dentries(struct mapper *mp, uint64_t first, uint64_t used, int n)
{
	for (int i = 0; i < n; i++) {
		if (!(used >> i & 1))
			continue;
		uint64_t off = first + (uint64_t)i * sizeof(struct fr_dentry);
		add(mp->map, FZ_DENTRY, off, sizeof(struct fr_dentry));
	}
}

static void map_large_dir(struct mapper *mp, const struct fr_inode *ip)
{
	uint64_t hoff = xlate(mp, ip->i_part);
	const struct fr_dirhdr *h = at(mp, hoff, sizeof *h);
	if (!hoff || !h || h->dh_magic != DH_MAGIC)
		return;
	add(mp->map, FZ_DIRHDR, hoff, PG);
	uint64_t nslots = 1ULL << h->dh_depth;
	uint64_t last = ~0ULL;
	for (uint32_t a = 0; a < h->dh_narray && a < DH_MAX_ARRAY; a++) {
		uint64_t aoff = xlate(mp, ip->i_part + (uint64_t)h->dh_array[a] * PG);
		const uint32_t *slots = at(mp, aoff, PG);
		if (!aoff || !slots)
			continue;
		add(mp->map, FZ_DARRPAGE, aoff, PG);
		for (uint64_t s = 0; s < DH_SLOTS_PER_PAGE && a * DH_SLOTS_PER_PAGE + s < nslots;
		     s++) {
			if (slots[s] == last)
				continue;
			last = slots[s];
			uint64_t boff = xlate(mp, ip->i_part + (uint64_t)slots[s] * PG);
			const struct fr_bucket *b = at(mp, boff, sizeof *b);
			if (!boff || !b || b->db_magic != DB_MAGIC)
				continue;
			int dup = 0;
			for (size_t k = mp->map->n; k-- > 0 && k + 64 > mp->map->n;)
				if (mp->map->objs[k].kind == FZ_BUCKET && mp->map->objs[k].off == boff)
					dup = 1;
			if (dup)
				continue;
			add(mp->map, FZ_BUCKET, boff, 128);
			map_dentries(mp, boff + offsetof(struct fr_bucket, db_ent), b->db_used,
				     DB_SLOTS);
		}
	}
}

static void map_inode(struct mapper *mp, uint64_t off)
{
	const struct fr_inode *ip = at(mp, off, sizeof *ip);
	if (!ip)
		return;
	add(mp->map, FZ_INODE, off, sizeof *ip);
	if (ip->i_xattr && at(mp, ip->i_xattr, 64))
		add(mp->map, FZ_XBLOCK, ip->i_xattr, 64 + 256);
	if ((ip->i_mode & 0170000) == 0040000 && ip->i_dkind == I_DIR_LARGE)
		map_large_dir(mp, ip);
}

static void map_pools(struct mapper *mp, const struct fr_state *st)
{
	static const uint32_t esz[MP_COUNT] = {256, 64, 128, 192, 272, 1152, 2176, 4224};
	for (int id = 0; id < MP_COUNT; id++) {
		add(mp->map, FZ_MP_HEAD, 8192 + offsetof(struct fr_state, st_pools) + 64ULL * id,
		    64);
		int nfree = 0;
		for (uint64_t b = st->st_pools[id].mph_block_head, guard = 0; b && guard < 64;
		     guard++) {
			const struct mp_block *blk = at(mp, b, sizeof *blk);
			if (!blk || blk->mpb_magic != MPB_MAGIC)
				break;
			add(mp->map, FZ_MP_BLOCK, b, 64);
			for (uint32_t i = 0; i < blk->mpb_bump && i < blk->mpb_nentries; i++) {
				uint64_t e = b + MPB_HDR + (uint64_t)i * esz[id];
				const struct mp_oob *o = at(mp, e, esz[id]);
				if (!o)
					break;
				if (o->oob_status == MP_FREE) {
					if (nfree++ < 16)
						add(mp->map, FZ_FREE_ENTRY, e, 16);
					continue;
				}
				if (o->oob_status != MP_LIVE)
					continue;
				if (id == MP_INODE) {
					map_inode(mp, e);
				} else if (id <= MP_NAME272) {
					add(mp->map, FZ_NAME, e, esz[id]);
				} else {
					const struct fr_darray *da = (const void *)o;
					add(mp->map, FZ_DARRAY, e, 128);
					map_dentries(mp, e + offsetof(struct fr_darray, da_ent),
						     da->da_used, (int)((esz[id] - 128) / 64));
				}
			}
			b = blk->mpb_next;
		}
	}
}

static int cmp_obj(const void *a, const void *b)
{
	const struct fz_obj *x = a, *y = b;
	if (x->kind != y->kind)
		return x->kind - y->kind;
	return x->off < y->off ? -1 : x->off > y->off;
}

int fz_map_image(const uint8_t *img, size_t len, struct fz_map *map)
{
	memset(map, 0, sizeof *map);
	struct mapper mp = {img, len, map, 0};
	const struct fr_super *sb = at(&mp, 0, sizeof *sb);
	const struct sp_header *sh = at(&mp, 4096, sizeof *sh);
	const struct fr_state *st = at(&mp, 8192, sizeof *st);
	if (!sb || !sh || !st)
		return -1;
	map->pool_size = sb->sb_pool_size;
	map->data_lo = sh->sph_data_page * PG;
	map->data_hi = (sh->sph_data_page + sh->sph_data_npages) * PG;
	mp.root = sh->sph_ppt_root;
	add(map, FZ_SUPER, 0, sizeof *sb);
	add(map, FZ_BACKUP_SUPER, SB_BACKUP_OFF, sizeof *sb);
	add(map, FZ_SPACE_HDR, 4096, sizeof *sh);
	add(map, FZ_STATE, 8192, offsetof(struct fr_state, st_pools));
	for (uint32_t i = 0; i < sb->sb_log_count; i++) {
		uint64_t off = sb->sb_log_off + (uint64_t)i * sb->sb_log_size;
		add(map, FZ_LOG_SLOT, off, sizeof(struct log_slot));
		add(map, FZ_LOG_ENTRY, off + sizeof(struct log_slot), 1024);
	}
	for (int k = 0; k < BUD_ORDERS; k++) {
		uint64_t words = sh->sph_nwords[k];
		for (uint64_t w = 0; w < words; w += 8)
			add(map, FZ_BITMAP, sh->sph_bitmap_off[k] + w * 8,
			    (uint32_t)(words - w < 8 ? words - w : 8) * 8);
		add(map, FZ_BITMAP, sh->sph_summary_off[k], 8);
	}
	map_ppt(&mp);
	map_pools(&mp, st);
	qsort(map->objs, map->n, sizeof *map->objs, cmp_obj);
	for (size_t i = map->n; i-- > 0;) {
		map->first[map->objs[i].kind] = i;
		map->count[map->objs[i].kind]++;
	}
	return 0;
}

void fz_map_free(struct fz_map *map)
{
	free(map->objs);
	memset(map, 0, sizeof *map);
}

const struct fz_obj *fz_obj_get(const struct fz_map *map, int kind, uint32_t index)
{
	if (kind < 0 || kind >= FZ_NKINDS || index >= map->count[kind])
		return NULL;
	return &map->objs[map->first[kind] + index];
}

uint64_t fz_window_entry_off(const uint8_t *img, size_t len, uint64_t v)
{
	const struct sp_header *sh = (const struct sp_header *)(img + 4096);
	struct mapper mp = {img, len, NULL, sh->sph_ppt_root};
	return went_at(&mp, v);
}
