/*
 * vspace.c -- the process's view of the partition space: one reserved
 * virtual range in which each 2 MiB window is mapped, on first access, to
 * the pool memory the PPT names (ctFS populates the DRAM page table from the
 * PPT on a fault; Ferrite does it on the first access through the file
 * system, since it runs in user space).
 *
 * A window backed by one unit is one mmap of that unit; a small-file window
 * maps its home unit whole and then maps the few pages that live elsewhere
 * one by one (exceptions); a hole maps the zero page read-only. Adjacent
 * mappings of consecutive pool offsets merge into one kernel VMA.
 *
 * Invariants: V1 a window marked VS_MAPPED maps every backed page of the
 *               PPT's current entry to the right pool offset;
 *             V0 the reserved range never has a hole: every change replaces a
 *               mapping in place (MAP_FIXED, MREMAP_DONTUNMAP), because another
 *               thread's mmap could otherwise land in the hole and be
 *               overwritten by the next MAP_FIXED;
 *             V2 the state of a window changes only under map_lock, and a
 *               window is re-mapped only by a thread that holds the write
 *               lock of the file owning the pages involved, or by compaction
 *               while no other thread is inside a call (compact.c C3);
 *             V3 the process's mappings stay bounded: wmaps counts an upper
 *               bound of each window's kernel mappings, and once they pass
 *               map_budget (an eighth of vm.max_map_count) every window is
 *               unmapped at the start of the next library call made while
 *               no other thread is inside one (vs_call_enter), so no thread
 *               holds a pointer into a window taken away. Windows are mapped
 *               again lazily, as after mount.
 * Validation: a window is mapped only from a well-formed PPT entry
 *   (ppt_went_ok) and a page table that names its own window, a home unit of
 *   the data area and pages of the data area (sp_ptable_check); anything else
 *   fails the access with -EUCLEAN, so no file ever maps memory outside the
 *   pool (a mapping past the end of the pool file would raise SIGBUS).
 * Crash argument: volatile only; rebuilt lazily from the PPT after mount.
 * Locking: map_lock (leaf lock), see docs/contracts.md#vspace.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <sys/mman.h>
#include <time.h>

#include "persist/pm.h"
#include "space/space.h"

#ifndef MREMAP_DONTUNMAP
#define MREMAP_DONTUNMAP 4
#endif

struct vs_exc {
	uint64_t w; /* window index + 1; 0 = empty slot */
	uint64_t bits[8];
};

static void *reserve_at(char *addr, size_t len)
{
	return mmap(addr, len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED,
		    -1, 0);
}

#ifdef FERRITE_PM_TRACE
/* Tracing builds: the pool offset a partition-space address stores to. */
static uint64_t vs_xlate(void *xctx, const char *addr)
{
	struct space *sp = xctx;
	uint64_t v = (uint64_t)(addr - sp->vbase);
	uint64_t phys = ppt_page(sp, v & ~(FR_PAGE_SIZE - 1));
	return phys ? phys + (v & (FR_PAGE_SIZE - 1)) : PM_NO_OFF;
}
#endif

/* ---- call slots: which threads are inside a library call (V3) ---------- */

#define VS_SLOTS 256
static struct vs_slot vs_slots[VS_SLOTS];
/* Threads beyond VS_SLOTS share this one: its depth is a sum, still exact. */
static struct vs_slot vs_shared_slot;
__thread struct vs_slot *vs_my_slot;
__thread int vs_read_only;
static pthread_key_t vs_slot_key;
static pthread_once_t vs_slot_once = PTHREAD_ONCE_INIT;

static void vs_slot_release(void *slot)
{
	struct vs_slot *s = slot;
	__atomic_store_n(&s->owned, 0, __ATOMIC_RELEASE);
}

/* A forked child has only the thread that forked: the other threads' slots
 * would count calls that never end there, and block every eviction. */
static void vs_slots_after_fork(void)
{
	for (int i = 0; i < VS_SLOTS; i++)
		if (&vs_slots[i] != vs_my_slot) {
			vs_slots[i].depth = 0;
			vs_slots[i].owned = 0;
		}
	if (vs_my_slot != &vs_shared_slot)
		vs_shared_slot.depth = 0;
}

static void vs_slot_key_init(void)
{
	if (pthread_key_create(&vs_slot_key, vs_slot_release) != 0)
		vs_slot_key = (pthread_key_t)-1;
	pthread_atfork(NULL, NULL, vs_slots_after_fork);
}

struct vs_slot *vs_slot_claim(void)
{
	pthread_once(&vs_slot_once, vs_slot_key_init);
	struct vs_slot *mine = &vs_shared_slot;
	if (vs_slot_key != (pthread_key_t)-1)
		for (int i = 0; i < VS_SLOTS; i++) {
			unsigned long free_slot = 0;
			if (__atomic_compare_exchange_n(&vs_slots[i].owned, &free_slot, 1, 0,
							__ATOMIC_ACQ_REL, __ATOMIC_RELAXED)) {
				if (pthread_setspecific(vs_slot_key, &vs_slots[i]) != 0) {
					vs_slot_release(&vs_slots[i]);
					break;
				}
				/* a thread that ended inside a call left its depth */
				__atomic_store_n(&vs_slots[i].depth, 0, __ATOMIC_RELAXED);
				mine = &vs_slots[i];
				break;
			}
		}
	vs_my_slot = mine;
	return mine;
}

/* After evict became RUNNING (sequentially consistent, as each call's depth
 * increment is): 1 once no other thread is inside a library call, 0 if one
 * stays inside for longer than the bound (it may be waiting for a lock or
 * for I/O; eviction is tried again at a later call). A thread that enters
 * meanwhile sees RUNNING and steps out again before it touches a window. */
static int others_left(void)
{
	struct vs_slot *me = vs_my_slot;
	for (int tries = 0; tries < 200; tries++) { /* ~1-2 ms at most */
		int inside = __atomic_load_n(&vs_shared_slot.depth, __ATOMIC_SEQ_CST) != 0;
		for (int i = 0; i < VS_SLOTS && !inside; i++)
			inside = &vs_slots[i] != me &&
				 __atomic_load_n(&vs_slots[i].depth, __ATOMIC_SEQ_CST) != 0;
		if (!inside)
			return 1;
		if (tries < 100)
			sched_yield();
		else
			nanosleep(&(struct timespec){0, 10000}, NULL);
	}
	return 0;
}

static void unmap_window(struct space *sp, uint64_t w);

void vs_unmap_all(struct space *sp)
{
	if (!sp->wstate)
		return;
	pthread_mutex_lock(&sp->map_lock);
	for (uint64_t w = 0; w < sp->nwindows; w++)
		if (sp->wstate[w] != VS_UNMAPPED)
			unmap_window(sp, w);
	sp->live_maps = 0;
	sp->evict_at = sp->map_budget;
	sp->stat_evictions++;
	pthread_mutex_unlock(&sp->map_lock);
}

void vs_unmap_windows(struct space *sp, uint64_t w, uint64_t n)
{
	if (!sp->wstate)
		return;
	pthread_mutex_lock(&sp->map_lock);
	for (uint64_t end = FR_MIN(w + n, sp->nwindows); w < end; w++)
		if (sp->wstate[w] != VS_UNMAPPED)
			unmap_window(sp, w);
	pthread_mutex_unlock(&sp->map_lock);
}

void vs_want_quiet(struct space *sp, int *what)
{
	__atomic_store_n(what, 1, __ATOMIC_SEQ_CST);
	int none = VS_EVICT_NONE;
	__atomic_compare_exchange_n(&sp->evict, &none, VS_EVICT_WANTED, 0, __ATOMIC_SEQ_CST,
				    __ATOMIC_SEQ_CST);
}

void vs_call_enter_slow(struct space *sp)
{
	struct vs_slot *me = vs_my_slot;
	for (;;) {
		int st = __atomic_load_n(&sp->evict, __ATOMIC_SEQ_CST);
		if (st == VS_EVICT_NONE)
			return;
		/* A nested call is already counted inside: an eviction waits for it. */
		if (__atomic_load_n(&me->depth, __ATOMIC_RELAXED) > 1 || me == &vs_shared_slot)
			return;
		if (st == VS_EVICT_RUNNING) {
			/* step out until the eviction is over, then enter again */
			__atomic_sub_fetch(&me->depth, 1, __ATOMIC_SEQ_CST);
			while (__atomic_load_n(&sp->evict, __ATOMIC_SEQ_CST) == VS_EVICT_RUNNING)
				sched_yield();
			__atomic_add_fetch(&me->depth, 1, __ATOMIC_SEQ_CST);
			continue;
		}
		int want = VS_EVICT_WANTED;
		if (!__atomic_compare_exchange_n(&sp->evict, &want, VS_EVICT_RUNNING, 0,
						 __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST))
			continue;
		/* this is the thread's outermost call, just begun: it holds no
		 * pointer into a window and no lock (V3) */
		if (!others_left()) {
			/* a thread stays inside a call: try again only after another
			 * quarter of the budget, so calls are not held up each time */
			if (__atomic_load_n(&sp->want_evict, __ATOMIC_SEQ_CST)) {
				pthread_mutex_lock(&sp->map_lock);
				sp->evict_at = sp->live_maps + sp->map_budget / 4;
				pthread_mutex_unlock(&sp->map_lock);
			}
			__atomic_store_n(&sp->evict, VS_EVICT_NONE, __ATOMIC_SEQ_CST);
			return;
		}
		/* compaction first: the pages it moves are remapped in place,
		 * and an eviction after it finds fewer mappings to drop */
		if (!vs_read_only && __atomic_exchange_n(&sp->want_compact, 0, __ATOMIC_SEQ_CST) &&
		    sp->compact_fn)
			sp->compact_fn(sp->compact_arg);
		if (__atomic_exchange_n(&sp->want_evict, 0, __ATOMIC_SEQ_CST))
			vs_unmap_all(sp);
		__atomic_store_n(&sp->evict, VS_EVICT_NONE, __ATOMIC_SEQ_CST);
		return;
	}
}

int vs_run_alone(struct space *sp, int (*fn)(void *arg), void *arg)
{
	/* the quiet moment an eviction uses, held for fn: an eviction already
	 * running waits for this thread to leave, gives up within ~2 ms and
	 * lets go, so the wait is bounded too */
	for (int tries = 0;; tries++) {
		int st = __atomic_load_n(&sp->evict, __ATOMIC_SEQ_CST);
		if (st != VS_EVICT_RUNNING &&
		    __atomic_compare_exchange_n(&sp->evict, &st, VS_EVICT_RUNNING, 0,
						__ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST))
			break;
		if (tries > 100000)
			return -EBUSY;
		sched_yield();
	}
	int rc = others_left() ? fn(arg) : -EBUSY;
	/* a wish for a quiet moment made meanwhile is served at a later call */
	int wanted = __atomic_load_n(&sp->want_evict, __ATOMIC_SEQ_CST) ||
		     __atomic_load_n(&sp->want_compact, __ATOMIC_SEQ_CST);
	__atomic_store_n(&sp->evict, wanted ? VS_EVICT_WANTED : VS_EVICT_NONE, __ATOMIC_SEQ_CST);
	return rc;
}

/* Kernel mappings (VMAs) a process may have, from /proc/sys/vm/max_map_count. */
static uint64_t max_map_count(void)
{
	uint64_t v = 65530; /* the kernel's default */
	FILE *f = fopen("/proc/sys/vm/max_map_count", "re");
	if (f) {
		unsigned long long n;
		if (fscanf(f, "%llu", &n) == 1 && n > 0)
			v = n;
		fclose(f);
	}
	return v;
}

/* Under map_lock: window w got a mapping of len bytes. One of a whole window
 * replaces all it had; a smaller one may split an existing mapping in two
 * around it, so it counts two. */
static void count_mapping(struct space *sp, uint64_t v, uint64_t len)
{
	if (!sp->wmaps)
		return;
	uint64_t w = v >> FR_UNIT_SHIFT;
	if (len >= FR_UNIT_SIZE) {
		sp->live_maps -= sp->wmaps[w];
		sp->wmaps[w] = 1;
		sp->live_maps += 1;
	} else if (sp->wmaps[w] < UINT16_MAX - 2) {
		sp->wmaps[w] += 2;
		sp->live_maps += 2;
	}
	if (sp->live_maps > sp->evict_at)
		vs_want_quiet(sp, &sp->want_evict);
}

int vs_init(struct space *sp)
{
	size_t len = sp->vsize + FR_GIB;
	void *r = mmap(NULL, len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (r == MAP_FAILED)
		return fr_err(-ENOMEM, "cannot reserve %zu bytes of address space for the files",
			      len);
	sp->vreserve = r;
	sp->vreserve_len = len;
	sp->vbase = (char *)FR_ALIGN_UP((uintptr_t)r, FR_GIB);
	sp->nwindows = sp->vsize >> FR_UNIT_SHIFT;
	void *ws = mmap(NULL, sp->nwindows, PROT_READ | PROT_WRITE,
			MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (ws == MAP_FAILED) {
		munmap(r, len);
		return fr_err(-ENOMEM, "cannot allocate the window table");
	}
	sp->wstate = ws;
	void *wm = mmap(NULL, sp->nwindows * sizeof(*sp->wmaps), PROT_READ | PROT_WRITE,
			MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (wm == MAP_FAILED) {
		munmap(ws, sp->nwindows);
		munmap(r, len);
		sp->wstate = NULL;
		return fr_err(-ENOMEM, "cannot allocate the window table");
	}
	sp->wmaps = wm;
	sp->live_maps = 0;
	sp->map_budget = max_map_count() / 8;
	sp->evict_at = sp->map_budget;
	sp->evict = VS_EVICT_NONE;
	pthread_mutex_init(&sp->map_lock, NULL);
#ifdef FERRITE_PM_TRACE
	pm_region_add(sp->pool->pm, sp->vbase, sp->vsize, vs_xlate, sp);
#endif
	sp->exc = NULL;
	sp->nexc = sp->exc_cap = 0;
	return 0;
}

void vs_fini(struct space *sp)
{
#ifdef FERRITE_PM_TRACE
	if (sp->vbase)
		pm_region_del(sp->vbase);
#endif
	if (sp->vreserve)
		munmap(sp->vreserve, sp->vreserve_len);
	if (sp->wstate)
		munmap(sp->wstate, sp->nwindows);
	if (sp->wmaps)
		munmap(sp->wmaps, sp->nwindows * sizeof(*sp->wmaps));
	sp->wmaps = NULL;
	free(sp->exc);
	sp->vreserve = NULL;
	sp->wstate = NULL;
	sp->exc = NULL;
	pthread_mutex_destroy(&sp->map_lock);
}

/* ---- exception bitmaps (pages of a small window away from its home) ---- */

static struct vs_exc *exc_find(struct space *sp, uint64_t w, int create)
{
	if (!sp->exc_cap) {
		if (!create)
			return NULL;
		sp->exc_cap = 64;
		sp->exc = calloc(sp->exc_cap, sizeof(*sp->exc));
		if (!sp->exc)
			return sp->exc_cap = 0, NULL;
	}
	uint64_t mask = sp->exc_cap - 1;
	for (uint64_t i = (w * 0x9e3779b97f4a7c15ULL >> 20) & mask;; i = (i + 1) & mask) {
		if (sp->exc[i].w == w + 1)
			return &sp->exc[i];
		if (sp->exc[i].w == 0) {
			if (!create)
				return NULL;
			if ((sp->nexc + 1) * 2 > sp->exc_cap) {
				struct vs_exc *old = sp->exc;
				uint64_t oc = sp->exc_cap;
				sp->exc = calloc(oc * 2, sizeof(*sp->exc));
				if (!sp->exc) {
					sp->exc = old;
					return NULL;
				}
				sp->exc_cap = oc * 2;
				sp->nexc = 0;
				for (uint64_t j = 0; j < oc; j++)
					if (old[j].w) {
						struct vs_exc *e = exc_find(sp, old[j].w - 1, 1);
						memcpy(e->bits, old[j].bits, sizeof(e->bits));
					}
				free(old);
				return exc_find(sp, w, 1);
			}
			sp->exc[i].w = w + 1;
			memset(sp->exc[i].bits, 0, sizeof(sp->exc[i].bits));
			sp->nexc++;
			return &sp->exc[i];
		}
	}
}

static int exc_any(struct space *sp, uint64_t w)
{
	struct vs_exc *e = exc_find(sp, w, 0);
	if (!e)
		return 0;
	for (int i = 0; i < 8; i++)
		if (e->bits[i])
			return 1;
	return 0;
}

static void exc_drop(struct space *sp, uint64_t w)
{
	struct vs_exc *e = exc_find(sp, w, 0);
	if (e)
		memset(e->bits, 0, sizeof(e->bits)); /* slot stays, cheaper than deletion */
}

/* ---- mapping primitives -------------------------------------------------- */

/* Out of kernel mappings (or memory) mid-call: this call fails, and the
 * next one starts by evicting (V3). */
static int map_failed(struct space *sp, const char *what)
{
	int e = errno;
	vs_want_quiet(sp, &sp->want_evict);
	return fr_err(-ENOMEM, "%s: %s", what, strerror(e));
}

static int map_pool(struct space *sp, uint64_t v, uint64_t len, uint64_t pool_off, int populate)
{
	struct pool *p = sp->pool;
	int flags = p->map_flags | MAP_FIXED | (populate ? MAP_POPULATE : 0);
	int prot = p->guarded ? PROT_READ : PROT_READ | PROT_WRITE;
	void *m = mmap(sp->vbase + v, len, prot, flags, p->fd, (off_t)pool_off);
	if (m == MAP_FAILED)
		return map_failed(sp, "cannot map file pages");
	if (p->kind == POOL_TMPFS && len >= FR_UNIT_SIZE)
		madvise(m, len, MADV_HUGEPAGE);
	sp->stat_mmaps++;
	count_mapping(sp, v, len);
	return 0;
}

static int map_zero(struct space *sp, uint64_t v, uint64_t len)
{
	void *m =
	    mmap(sp->vbase + v, len, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
	if (m == MAP_FAILED)
		return map_failed(sp, "cannot map a hole");
	sp->stat_mmaps++;
	count_mapping(sp, v, len);
	return 0;
}

static void unmap_window(struct space *sp, uint64_t w)
{
	reserve_at(sp->vbase + (w << FR_UNIT_SHIFT), FR_UNIT_SIZE);
	if (sp->wmaps) { /* the reservation merges with its neighbours */
		sp->live_maps -= sp->wmaps[w];
		sp->wmaps[w] = 0;
	}
	exc_drop(sp, w);
	__atomic_store_n(&sp->wstate[w], VS_UNMAPPED, __ATOMIC_RELEASE);
}

int sp_ptable_check(const struct space *sp, const struct sp_ptable *pt, uint64_t v,
		    const char **why)
{
	*why = NULL;
	if (pt->pt_magic != PT_MAGIC)
		*why = "bad magic";
	else if (pt->pt_vaddr != v)
		*why = "it names another window";
	else if (pt->pt_home && ((pt->pt_home & (FR_UNIT_SIZE - 1)) ||
				 !sp_data_range_ok(sp, pt->pt_home, FR_UNIT_SIZE)))
		*why = "home unit outside the data area";
	int reserved = (pt->pt_flags & PT_F_RESERVED) != 0;
	if (!*why && reserved && ((pt->pt_flags & PT_F_HEADER) || !pt->pt_home))
		*why = "a reservation without a home unit";
	uint64_t home_pg = pt->pt_home >> FR_PAGE_SHIFT;
	for (unsigned o = 0; !*why && o < 512; o++)
		if (pt->pt_pte[o] && !sp_page_ok(sp, pt->pt_pte[o]))
			*why = "a page outside the data area";
		else if (pt->pt_pte[o] && reserved && pt->pt_pte[o] != home_pg + o)
			*why = "a reserved window naming a page outside its home unit";
	return *why ? -EUCLEAN : 0;
}

/* Windows whose home unit is mapped whole under their pages. */
static int home_mapped(const struct sp_ptable *pt)
{
	return (pt->pt_flags & (PT_F_HEADER | PT_F_RESERVED)) != 0;
}

static int map_table_window(struct space *sp, uint64_t w, struct sp_ptable *pt)
{
	uint64_t v = w << FR_UNIT_SHIFT;
	const char *why;
	if (sp_ptable_check(sp, pt, v, &why))
		return fr_err(-EUCLEAN,
			      "page table of window %#llx damaged: %s (run `ferrite fsck`)",
			      (unsigned long long)v, why);
	/* A small-file window maps its home unit under the pages mapped one by
	 * one (most of them sit there), and so does a reserved large window
	 * (its unnamed home pages hold zeros, window.c W2: they read as the
	 * holes they are); another large window maps the zero page, which is
	 * what its holes read. A page no file owns (never read by a consistent
	 * pool, D2) so reads as something instead of faulting. */
	uint64_t home = home_mapped(pt) ? pt->pt_home : 0;
	/* a reserved window is a file being written page after page: its page
	 * table entries are made now, as for a unit, not by a fault per page */
	int populate = (pt->pt_flags & PT_F_RESERVED) && !sp->pool->huge;
	int rc =
	    home ? map_pool(sp, v, FR_UNIT_SIZE, home, populate) : map_zero(sp, v, FR_UNIT_SIZE);
	if (rc)
		return rc;
	struct vs_exc *e = NULL;
	for (unsigned o = 0; o < 512;) {
		uint64_t pg = pt->pt_pte[o];
		if (!pg || (home && pg == (home >> FR_PAGE_SHIFT) + o)) {
			o++;
			continue;
		}
		unsigned n = 1;
		while (o + n < 512 && pt->pt_pte[o + n] == pg + n &&
		       !(home && pt->pt_pte[o + n] == (home >> FR_PAGE_SHIFT) + o + n))
			n++;
		rc = map_pool(sp, v + ((uint64_t)o << FR_PAGE_SHIFT), (uint64_t)n << FR_PAGE_SHIFT,
			      pg << FR_PAGE_SHIFT, 0);
		if (rc)
			return rc;
		if (home) {
			if (!e)
				e = exc_find(sp, w, 1);
			if (!e)
				return -ENOMEM;
			for (unsigned j = o; j < o + n; j++)
				e->bits[j >> 6] |= 1ULL << (j & 63);
		}
		o += n;
	}
	return 0;
}

static int map_window(struct space *sp, uint64_t w)
{
	uint64_t v = w << FR_UNIT_SHIFT;
	uint64_t went = ppt_window(sp, v);
	int rc;
	switch (went & PPT_TYPE_MASK) {
	case PPT_HUGE:
		rc = map_pool(sp, v, FR_UNIT_SIZE, went & ~PPT_TYPE_MASK, !sp->pool->huge);
		break;
	case PPT_TABLE:
		rc = map_table_window(sp, w, ppt_table(sp, went));
		break;
	case PPT_NONE:
		rc = map_zero(sp, v, FR_UNIT_SIZE);
		break;
	default:
		rc = fr_err(-EUCLEAN, "page table damaged at window %#llx (run `ferrite fsck`)",
			    (unsigned long long)v);
		break;
	}
	if (rc == 0)
		__atomic_store_n(&sp->wstate[w], VS_MAPPED, __ATOMIC_RELEASE);
	return rc;
}

int vs_ensure(struct space *sp, uint64_t v, uint64_t len)
{
	if (len == 0)
		return 0;
	if (!sp_vrange_ok(sp, v, len))
		return fr_err(-EUCLEAN, "access past the partition space (%#llx + %llu)",
			      (unsigned long long)v, (unsigned long long)len);
	uint64_t w0 = v >> FR_UNIT_SHIFT, w1 = (v + len - 1) >> FR_UNIT_SHIFT;
	for (uint64_t w = w0; w <= w1; w++) {
		if (__atomic_load_n(&sp->wstate[w], __ATOMIC_ACQUIRE) == VS_MAPPED)
			continue;
		pthread_mutex_lock(&sp->map_lock);
		int rc = 0;
		if (sp->wstate[w] != VS_MAPPED)
			rc = map_window(sp, w);
		pthread_mutex_unlock(&sp->map_lock);
		if (rc)
			return rc;
	}
	return 0;
}

/* ---- follow-ups after a PPT change (run from tx_finish) ---------------- */

/* Every change of the PPT reaches the mappings through the hooks below; on
 * a pool shared with other processes each also goes into the coordination
 * file, so that the next process to take the turn drops exactly those
 * windows (share.c H2). */
static void note_shared(struct space *sp, uint64_t v, uint64_t len)
{
	struct pool_share *s = sp->pool ? sp->pool->share : NULL;
	if (s && len)
		share_note_windows(s, v >> FR_UNIT_SHIFT,
				   ((v + len - 1) >> FR_UNIT_SHIFT) - (v >> FR_UNIT_SHIFT) + 1);
}

void vs_page_changed(struct space *sp, uint64_t vp, uint64_t u1, uint64_t u2)
{
	note_shared(sp, vp, FR_PAGE_SIZE);
	if (!sp->wstate)
		return; /* mkfs: nothing is mapped yet */
	uint64_t w = vp >> FR_UNIT_SHIFT;
	pthread_mutex_lock(&sp->map_lock);
	if (sp->wstate[w] != VS_MAPPED)
		goto out;
	uint64_t went = ppt_window(sp, vp);
	if ((went & PPT_TYPE_MASK) != PPT_TABLE) {
		unmap_window(sp, w);
		goto out;
	}
	struct sp_ptable *pt = ppt_table(sp, went);
	unsigned o = (unsigned)((vp >> FR_PAGE_SHIFT) & 511);
	uint64_t pg = pt->pt_pte[o];
	uint64_t home = home_mapped(pt) ? pt->pt_home : 0; /* see map_table_window */
	if (!pg)
		goto out;
	if (home && pg == (home >> FR_PAGE_SHIFT) + o) {
		struct vs_exc *e = exc_find(sp, w, 0);
		if (e && (e->bits[o >> 6] >> (o & 63)) & 1) {
			if (map_pool(sp, vp, FR_PAGE_SIZE, pg << FR_PAGE_SHIFT, 0))
				unmap_window(sp, w);
			else
				e->bits[o >> 6] &= ~(1ULL << (o & 63));
		}
		goto out;
	}
	if (map_pool(sp, vp, FR_PAGE_SIZE, pg << FR_PAGE_SHIFT, 0)) {
		unmap_window(sp, w); /* fall back to a lazy full re-map */
		goto out;
	}
	if (home) {
		struct vs_exc *e = exc_find(sp, w, 1);
		if (e)
			e->bits[o >> 6] |= 1ULL << (o & 63);
		else
			unmap_window(sp, w);
	}
out:
	pthread_mutex_unlock(&sp->map_lock);
}

/* After a write-and-swap changed pages [v, v + n pages) of one window:
 * maps just those pages again, in place, to their new pool offsets. The
 * other pages of the window keep their mappings (a mapping of page o to pool
 * page P is right as long as the PPT says P), so threads using them -- other
 * small files of a shared window -- are not disturbed, and nothing else has
 * to fault again. Mapped lazily: a strict write goes through the direct
 * mapping, so only a later read touches these pages. */
void vs_pages_changed(struct space *sp, uint64_t v, uint64_t n, uint64_t unused)
{
	(void)unused;
	note_shared(sp, v, n << FR_PAGE_SHIFT);
	if (!sp->wstate)
		return;
	uint64_t w = v >> FR_UNIT_SHIFT, vw = w << FR_UNIT_SHIFT;
	unsigned o0 = (unsigned)((v >> FR_PAGE_SHIFT) & 511), o1 = o0 + (unsigned)n;
	pthread_mutex_lock(&sp->map_lock);
	if (sp->wstate[w] != VS_MAPPED)
		goto out;
	uint64_t went = ppt_window(sp, vw), home = 0;
	struct sp_ptable *pt = NULL;
	switch (went & PPT_TYPE_MASK) {
	case PPT_HUGE:
		home = (went & ~PPT_TYPE_MASK) >> FR_PAGE_SHIFT;
		break;
	case PPT_TABLE:
		pt = ppt_table(sp, went);
		/* small-file and reserved windows have their home mapped under
		 * their pages */
		home = home_mapped(pt) ? pt->pt_home >> FR_PAGE_SHIFT : 0;
		break;
	default:
		unmap_window(sp, w);
		goto out;
	}
#define PG_OF(o) (pt ? (uint64_t)pt->pt_pte[(o)] : home + (o))
	/* a page now at its home offset whose home mapping is intact (no
	 * exception recorded) needs no new mapping: an append to a reserved
	 * window makes no system call */
	struct vs_exc *was = pt && home ? exc_find(sp, w, 0) : NULL;
#define AT_HOME(o)                                                                                 \
	(pt && home && PG_OF(o) == home + (o) && !(was && (was->bits[(o) >> 6] >> ((o)&63)) & 1))
	for (unsigned o = o0; o < o1;) {
		uint64_t pg = PG_OF(o);
		if (AT_HOME(o)) {
			o++;
			continue;
		}
		unsigned run = 1;
		while (o + run < o1 && pg && PG_OF(o + run) == pg + run && !AT_HOME(o + run))
			run++;
		if (pg && map_pool(sp, vw + ((uint64_t)o << FR_PAGE_SHIFT),
				   (uint64_t)run << FR_PAGE_SHIFT, pg << FR_PAGE_SHIFT, 0)) {
			unmap_window(sp, w); /* mapped again from the PPT on next use */
			goto out;
		}
		o += run;
	}
	if (!pt || !home) {
		exc_drop(sp, w); /* one unit, or a table mapped run by run */
	} else {
		struct vs_exc *e = exc_find(sp, w, 1);
		if (!e) {
			unmap_window(sp, w);
			goto out;
		}
		for (unsigned o = o0; o < o1; o++) {
			if (PG_OF(o) && PG_OF(o) != home + o)
				e->bits[o >> 6] |= 1ULL << (o & 63);
			else
				e->bits[o >> 6] &= ~(1ULL << (o & 63));
		}
	}
#undef AT_HOME
#undef PG_OF
out:
	pthread_mutex_unlock(&sp->map_lock);
}

/* A reserved window gave its unnamed home pages back (window.c W2): they
 * are free from the commit of the transaction that dropped the reservation
 * on, and another file's transaction may take them before this one's
 * follow-ups run, so they are mapped to the zero page now, not after it. Holes read zeros before
 * and after, and no page of the range is written meanwhile (backing one takes the allocator lock
 * this transaction holds), so the window's file needs no lock. Should the transaction be abandoned,
 * the window is reserved again with those pages recorded as exceptions, mapped home again when
 * backed. */
void vs_reservation_dropped(struct space *sp, uint64_t vw, const uint64_t unnamed[8])
{
	note_shared(sp, vw, FR_UNIT_SIZE);
	if (!sp->wstate)
		return;
	uint64_t w = vw >> FR_UNIT_SHIFT;
	pthread_mutex_lock(&sp->map_lock);
	if (sp->wstate[w] == VS_MAPPED) {
		struct vs_exc *e = exc_find(sp, w, 1);
		for (unsigned o = 0; o < 512;) {
			if (!((unnamed[o >> 6] >> (o & 63)) & 1)) {
				o++;
				continue;
			}
			unsigned n = 1;
			while (o + n < 512 && ((unnamed[(o + n) >> 6] >> ((o + n) & 63)) & 1))
				n++;
			/* in place (V0); on failure the old mapping stays and the
			 * window is marked stale below */
			if (map_zero(sp, vw + ((uint64_t)o << FR_PAGE_SHIFT),
				     (uint64_t)n << FR_PAGE_SHIFT) != 0)
				e = NULL;
			for (unsigned j = o; e && j < o + n; j++)
				e->bits[j >> 6] |= 1ULL << (j & 63);
			o += n;
		}
		if (!e) /* mapped again from the PPT, in place, at its next use */
			__atomic_store_n(&sp->wstate[w], VS_UNMAPPED, __ATOMIC_RELEASE);
	}
	pthread_mutex_unlock(&sp->map_lock);
}

void vs_window_changed(struct space *sp, uint64_t vw, uint64_t n, uint64_t u)
{
	note_shared(sp, vw, n << FR_UNIT_SHIFT);
	if (!sp->wstate)
		return; /* mkfs: nothing is mapped yet */
	pthread_mutex_lock(&sp->map_lock);
	for (uint64_t w = vw >> FR_UNIT_SHIFT, end = w + n; w < end; w++)
		if (sp->wstate[w] != VS_UNMAPPED)
			unmap_window(sp, w);
	pthread_mutex_unlock(&sp->map_lock);
}

void vs_window_promoted(struct space *sp, uint64_t vw, uint64_t unused1, uint64_t unused2)
{
	(void)unused1;
	(void)unused2;
	note_shared(sp, vw, FR_UNIT_SIZE);
	if (!sp->wstate)
		return;
	pthread_mutex_lock(&sp->map_lock);
	uint64_t w = vw >> FR_UNIT_SHIFT;
	/* A reserved window is mapped as its home unit whole, every page at
	 * home + its index (W1), with no exception: exactly the mapping of the
	 * unit it now is. Anything else is mapped again on next use. */
	if (sp->wstate[w] != VS_UNMAPPED && (sp->wstate[w] != VS_MAPPED || exc_any(sp, w)))
		unmap_window(sp, w);
	pthread_mutex_unlock(&sp->map_lock);
}

/* Moves established mappings along with a ppt_move (ctFS pswap): mremap keeps
 * the page-table entries, so the moved data is not faulted in again. */
void vs_moved(struct space *sp, uint64_t src, uint64_t dst, uint64_t n)
{
	note_shared(sp, src, n << FR_UNIT_SHIFT);
	note_shared(sp, dst, n << FR_UNIT_SHIFT);
	if (!sp->wstate)
		return; /* mkfs: nothing is mapped yet */
	pthread_mutex_lock(&sp->map_lock);
	uint64_t ws = src >> FR_UNIT_SHIFT, wd = dst >> FR_UNIT_SHIFT;
	for (uint64_t i = 0; i < n; i++) {
		if (sp->wstate[wd + i] != VS_UNMAPPED)
			unmap_window(sp, wd + i);
	}
	for (uint64_t i = 0; i < n;) {
		if (sp->wstate[ws + i] != VS_MAPPED || exc_any(sp, ws + i)) {
			if (sp->wstate[ws + i] != VS_UNMAPPED)
				unmap_window(sp, ws + i);
			i++;
			continue;
		}
		uint64_t run = 1;
		while (i + run < n && sp->wstate[ws + i + run] == VS_MAPPED &&
		       !exc_any(sp, ws + i + run))
			run++;
		char *from = sp->vbase + ((ws + i) << FR_UNIT_SHIFT);
		char *to = sp->vbase + ((wd + i) << FR_UNIT_SHIFT);
		size_t len = run << FR_UNIT_SHIFT;
		/* MREMAP_DONTUNMAP keeps the source range mapped (empty), so no
		 * other thread's mmap can land in it before it is reserved again. */
		int fl = MREMAP_MAYMOVE | MREMAP_FIXED | MREMAP_DONTUNMAP;
		void *m = mremap(from, len, len, fl, to);
		if (m == MAP_FAILED && run > 1) {
			run = 1; /* spans several VMAs: move window by window */
			len = FR_UNIT_SIZE;
			m = mremap(from, len, len, fl, to);
		}
		if (m == MAP_FAILED) {
			unmap_window(sp, ws + i); /* mapped again from the PPT on next use */
			i++;
			continue;
		}
		sp->stat_mremaps++;
		reserve_at(from, len); /* replaces the emptied source in place */
		for (uint64_t j = 0; j < run; j++) {
			__atomic_store_n(&sp->wstate[ws + i + j], VS_UNMAPPED, __ATOMIC_RELEASE);
			__atomic_store_n(&sp->wstate[wd + i + j], VS_MAPPED, __ATOMIC_RELEASE);
			sp->wmaps[wd + i + j] = sp->wmaps[ws + i + j];
			sp->wmaps[ws + i + j] = 0;
		}
		i += run;
	}
	pthread_mutex_unlock(&sp->map_lock);
}
