/*
 * info.c -- ferrite_get_info: what `ferrite info` shows. Counts come from
 * the state page; partition and page-table statistics from a read-only walk.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "fs/fs.h"
#include "persist/pm.h"

struct type_count {
	ferrite_fs *fs;
	struct ferrite_info *info;
};

/* Counts live inodes by type: the pool keeps no counters, so that a create
 * or an unlink touches one cache line less. */
static void count_inode(void *arg, int id, uint64_t off, int live)
{
	struct type_count *c = arg;
	if (id != MP_INODE || !live)
		return;
	const struct fr_inode *ip = meta_ptr(&c->fs->m, off);
	uint32_t mode = ip->i_mode;
	/* Null files, and the page of a file made from one and never written
	 * (nullfile.c), are pre-allocation, not files or data. */
	if (S_ISREG(mode) && ((ip->i_flags & I_F_NULL) || ip->i_size == 0)) {
		c->info->prealloc_bytes += FR_MIN(ip->i_blocks, 1024) << FR_PAGE_SHIFT;
		if (ip->i_flags & I_F_NULL)
			return;
	}
	if (S_ISDIR(mode))
		c->info->directories++;
	else if (S_ISLNK(mode))
		c->info->symlinks++;
	else
		c->info->files++;
}

struct ppt_count {
	struct space *sp;
	uint64_t huge, table, pages;
};

static void count_window(void *arg, uint64_t v, uint64_t ent)
{
	struct ppt_count *c = arg;
	if (v == ~0ULL) {
		c->pages++;
		return;
	}
	if ((ent & PPT_TYPE_MASK) == PPT_HUGE)
		c->huge++;
	else if ((ent & PPT_TYPE_MASK) == PPT_TABLE)
		c->table++, c->pages++;
}

int pmfs_get_info(ferrite_fs *fs, struct ferrite_info *info)
{
	fr_err_clear();
	if (!fs || !info)
		return api_end(-EINVAL);
	memset(info, 0, sizeof(*info));
	struct meta *m = &fs->m;
	const uint8_t *u = m->sb->sb_uuid;
	snprintf(info->uuid, sizeof(info->uuid),
		 "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", u[0], u[1],
		 u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13], u[14],
		 u[15]);
	info->format_version = m->sb->sb_version;
	info->mode = (int)m->sb->sb_mode;
	info->mount_mode = fs->strict ? FERRITE_MODE_STRICT : FERRITE_MODE_SYNC;
	info->pool_bytes = m->sb->sb_pool_size;
	info->data_bytes = (m->sp.data_end_page - m->sp.data_page) << FR_PAGE_SHIFT;
	info->free_bytes = bud_free_pages(&m->sp) << FR_PAGE_SHIFT;
	info->prealloc_bytes =
	    m->sp.reserve_windows ? m->sp.hdr->sph_prealloc_pages << FR_PAGE_SHIFT : 0;
	info->inode_block_bytes = mp_block_bytes(m, MP_INODE);
	pthread_mutex_lock(&m->sp.map_lock);
	info->window_mappings = m->sp.live_maps;
	info->window_mapping_budget = m->sp.map_budget;
	info->window_evictions = m->sp.stat_evictions;
	info->compactions = m->sp.stat_compactions;
	info->compacted_pages = m->sp.stat_compacted_pages;
	pthread_mutex_unlock(&m->sp.map_lock);
	info->inode_capacity = m->st->st_pools[MP_INODE].mph_total;
	info->vspace_bytes = m->sp.vsize;
	info->top_level = m->sp.top_level;
	info->max_file_size = fs->max_file_size;
	info->log_slots = m->nlogs;
	snprintf(info->backing, sizeof(info->backing), "%s", m->pool.backing);
	info->huge_pages = m->pool.huge;
	snprintf(info->persistence, sizeof(info->persistence), "%s", pm_describe());
	snprintf(info->protection, sizeof(info->protection), "%s", pm_protection());

	struct part_stats ps;
	pthread_mutex_lock(&m->sp.alloc_lock); /* a stable tree while we walk it */
	struct type_count tc = {fs, info};
	mp_walk(m, count_inode, &tc, NULL, NULL, NULL);
	part_walk(&m->sp, NULL, NULL, NULL, &ps, NULL, NULL);
	struct ppt_count c = {&m->sp, 0, 0, 0};
	ppt_check_dirs(&m->sp, count_window, &c);
	pthread_mutex_unlock(&m->sp.alloc_lock);
	for (int l = 0; l < 16 && l <= SP_MAX_LEVEL; l++)
		info->partitions_allocated[l] = ps.allocated[l];
	info->ppt_huge_windows = c.huge;
	info->ppt_table_windows = c.table;
	info->ppt_pages = c.pages;
	return 0;
}
