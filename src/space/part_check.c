/*
 * part_check.c -- read-only walks of the partition tree for fsck and
 * `ferrite info`: verifies invariants H1-H5 of part.c and reports every
 * allocated partition so the caller can match partitions with inodes.
 */
#include <errno.h>
#include <string.h>

#include "space/space.h"

#define MASK_BELOW(l) ((uint16_t)((1u << (l)) - 1))

struct walk {
	struct space *sp;
	void (*alloc_cb)(void *, uint64_t, int);
	void (*p3_cb)(void *, uint64_t);
	void *arg;
	struct part_stats *st;
	fr_report_fn report;
	void *rarg;
	int bad;
};

static struct sp_ptable *header_of(struct walk *w, uint64_t v)
{
	uint64_t went = ppt_window(w->sp, v);
	if ((went & PPT_TYPE_MASK) != PPT_TABLE) {
		fr_report(w->report, w->rarg, "partition at %#llx: header page missing",
			  (unsigned long long)v);
		w->bad++;
		return NULL;
	}
	struct sp_ptable *h = ppt_table(w->sp, went);
	uint64_t self = (went & ~PPT_TYPE_MASK) >> 12;
	if (h->pt_magic != PT_MAGIC || !(h->pt_flags & PT_F_HEADER) || h->pt_vaddr != v ||
	    h->pt_pte[0] != self) {
		fr_report(w->report, w->rarg, "partition at %#llx: header page damaged",
			  (unsigned long long)v);
		w->bad++;
		return NULL;
	}
	return h;
}

/* Returns the mask the P partition (v, level) should have, checking it. */
static uint16_t walk_p(struct walk *w, uint64_t v, int level)
{
	struct sp_ptable *h = header_of(w, v);
	if (!h)
		return 0;
	if (level == SP_L3) {
		int c = h->l3_child_level;
		if (w->p3_cb)
			w->p3_cb(w->arg, v);
		if (c > 2) {
			fr_report(w->report, w->rarg, "L3 partition at %#llx: bad child level %d",
				  (unsigned long long)v, c);
			w->bad++;
			return 0;
		}
		uint64_t cap = 512ULL >> (3 * c), csize = sp_level_size(c), n = 0;
		if (!(h->l3_bitmap[0] & 1)) {
			fr_report(w->report, w->rarg, "L3 partition at %#llx: header child free",
				  (unsigned long long)v);
			w->bad++;
		}
		for (uint64_t i = 0; i < 512; i++) {
			int set = (h->l3_bitmap[i >> 6] >> (i & 63)) & 1;
			if (set && i >= cap) {
				fr_report(w->report, w->rarg,
					  "L3 partition at %#llx: child %llu beyond capacity",
					  (unsigned long long)v, (unsigned long long)i);
				w->bad++;
				continue;
			}
			n += (uint64_t)set;
			if (i == 0 || i >= cap)
				continue;
			uint64_t cv = v + i * csize;
			if (set) {
				w->st->allocated[c]++;
				if (w->alloc_cb)
					w->alloc_cb(w->arg, cv, c);
				continue;
			}
			for (uint64_t p = 0; p < csize; p += 4096)
				if (h->pt_pte[((cv + p) >> 12) & 511]) {
					fr_report(w->report, w->rarg,
						  "free partition at %#llx has pages",
						  (unsigned long long)cv);
					w->bad++;
					break;
				}
		}
		if (n != h->l3_nalloc) {
			fr_report(w->report, w->rarg,
				  "L3 partition at %#llx: count %u, bitmap says %llu",
				  (unsigned long long)v, h->l3_nalloc, (unsigned long long)n);
			w->bad++;
		}
		uint16_t m = n <= 1 ? 0x7 : (n < cap ? (uint16_t)(1u << c) : 0);
		if (m != h->l3_mask) {
			fr_report(w->report, w->rarg, "L3 partition at %#llx: availability wrong",
				  (unsigned long long)v);
			w->bad++;
		}
		return m;
	}
	if (!h->ph[level].ph_present || ((h->ph[level].ph_states & 3) != PH_P)) {
		fr_report(w->report, w->rarg, "partition at %#llx level %d: header not present",
			  (unsigned long long)v, level);
		w->bad++;
		return 0;
	}
	uint16_t m = 0, states = h->ph[level].ph_states;
	for (int i = 0; i < 8; i++) {
		uint64_t cv = v + (uint64_t)i * sp_level_size(level - 1);
		uint16_t cm = 0;
		switch ((states >> (2 * i)) & 3) {
		case PH_E:
			cm = MASK_BELOW(level);
			break;
		case PH_A:
			w->st->allocated[level - 1]++;
			if (w->alloc_cb)
				w->alloc_cb(w->arg, cv, level - 1);
			break;
		case PH_P:
			cm = walk_p(w, cv, level - 1);
			break;
		default:
			fr_report(w->report, w->rarg, "partition at %#llx: invalid child state",
				  (unsigned long long)cv);
			w->bad++;
		}
		if (cm != h->ph[level].ph_cmask[i]) {
			fr_report(w->report, w->rarg,
				  "partition at %#llx level %d: child %d availability wrong",
				  (unsigned long long)v, level, i);
			w->bad++;
		}
		m |= cm;
	}
	if (m != h->ph[level].ph_mask) {
		fr_report(w->report, w->rarg, "partition at %#llx level %d: availability wrong",
			  (unsigned long long)v, level);
		w->bad++;
	}
	return m;
}

int part_walk(struct space *sp, void (*alloc_cb)(void *, uint64_t v, int level),
	      void (*p3_cb)(void *, uint64_t v), void *arg, struct part_stats *st,
	      fr_report_fn report, void *rarg)
{
	struct part_stats local;
	struct walk w = {sp, alloc_cb, p3_cb, arg, st ? st : &local, report, rarg, 0};
	memset(w.st, 0, sizeof(*w.st));
	walk_p(&w, 0, sp->top_level);
	return w.bad;
}

int part_level_at(struct space *sp, uint64_t v)
{
	uint64_t a = 0;
	int level = sp->top_level;
	if (v >= sp->vsize)
		return -1;
	for (;;) {
		uint64_t went = ppt_window(sp, a);
		if ((went & PPT_TYPE_MASK) != PPT_TABLE)
			return -1;
		struct sp_ptable *h = ppt_table(sp, went);
		if (level == SP_L3) {
			int c = h->l3_child_level;
			if (c > 2)
				return -1;
			uint64_t cs = sp_level_size(c), i = (v - a) / cs;
			if ((v - a) % cs || i == 0 || i >= (512ULL >> (3 * c)))
				return -1;
			return (h->l3_bitmap[i >> 6] >> (i & 63)) & 1 ? c : -1;
		}
		uint64_t cs = sp_level_size(level - 1);
		int i = (int)((v - a) / cs);
		switch ((h->ph[level].ph_states >> (2 * i)) & 3) {
		case PH_A:
			return v == a + (uint64_t)i * cs ? level - 1 : -1;
		case PH_P:
			a += (uint64_t)i * cs;
			level--;
			continue;
		default:
			return -1;
		}
	}
}
