/*
 * pm_trace.c -- the tracing build of the persist layer (FERRITE_PM_TRACE):
 * pool regions, the write-through-alias guard, and the calls into a tracer.
 *
 * Invariants: R1 every address range the library maps pool memory at is a
 *               registered region whose xlate gives the pool offset of any
 *               address in it (space/pool.c: the direct mapping; vspace.c:
 *               the partition space, translated through the PPT);
 *             R2 while a pool is guarded, all of its mappings are read-only
 *               and the only writable view is pool->alias, used only here;
 *             R3 in the protection debug mode (FERRITE_PM_PROTECT build, or
 *               FERRITE_PROTECT=1) the alias too is PROT_NONE except for the
 *               pages of the one store being made, under protect_lock: a
 *               store of the program into pool memory faults wherever it
 *               lands (files it maps itself stay writable: fs/mmap.c).
 * Crash argument: none: this is instrumentation; what persists is decided
 *   by the tracer's model (tools/crashtest), not by this file.
 * Locking: regions change only while no operation runs on their pool
 *   (mount, unmount, vspace set-up); lookups read the table without a lock.
 */
#include "persist/pm.h"

#ifdef FERRITE_PM_TRACE
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define MAX_REGIONS 32

struct region {
	char *start;
	uint64_t len;
	pm_xlate_fn xlate; /* NULL: the identity (start = pool offset 0) */
	void *xctx;
	struct pm_pool *pool;
};

static struct region regions[MAX_REGIONS];
static int nregions;
static pthread_mutex_t reg_lock = PTHREAD_MUTEX_INITIALIZER;

const struct pm_trace_ops *pm_trace;
int pm_trace_active;
static int nguarded;

static void update_active(void)
{
	__atomic_store_n(&pm_trace_active, pm_trace != NULL || nguarded > 0, __ATOMIC_RELEASE);
}

void pm_trace_set(const struct pm_trace_ops *ops)
{
	pthread_mutex_lock(&reg_lock);
	pm_trace = ops;
	update_active();
	pthread_mutex_unlock(&reg_lock);
}

int pm_guard_wanted(void)
{
	if (pm_trace && pm_trace->guard)
		return PM_GUARD_ALIAS;
#ifdef FERRITE_PM_PROTECT
	return PM_GUARD_PROTECT;
#else
	const char *e = getenv("FERRITE_PROTECT");
	return e && *e && strcmp(e, "0") != 0 ? PM_GUARD_PROTECT : PM_GUARD_NONE;
#endif
}

/* R3: a fault in pool memory is the program's stray store: say where. */
static struct sigaction protect_old_segv;

static void protect_on_segv(int sig, siginfo_t *si, void *uc)
{
	char where[256];
	if (pm_region_describe(si->si_addr, where, sizeof(where))) {
		static const char head[] = "ferrite: a store outside the library into ";
		(void)!write(2, head, sizeof(head) - 1);
		(void)!write(2, where, strlen(where));
		static const char tail[] = " (ferrite run --protect): the program wrote to memory "
					   "that is not its own\n";
		(void)!write(2, tail, sizeof(tail) - 1);
	}
	/* whoever handled SIGSEGV before (or the default) takes it from here:
	 * the faulting store runs again */
	sigaction(sig, &protect_old_segv, NULL);
	(void)uc;
}

static void protect_install(void)
{
	struct sigaction sa = {.sa_sigaction = protect_on_segv, .sa_flags = SA_SIGINFO};
	sigemptyset(&sa.sa_mask);
	struct sigaction old;
	if (sigaction(SIGSEGV, NULL, &old) == 0 && old.sa_handler == SIG_DFL &&
	    !(old.sa_flags & SA_SIGINFO))
		sigaction(SIGSEGV, &sa, &protect_old_segv);
}

struct pm_pool *pm_pool_register(const char *path, char *base, uint64_t size, char *alias,
				 int protect)
{
	struct pm_pool *pool = calloc(1, sizeof(*pool));
	if (!pool)
		return NULL;
	pool->path = strdup(path ? path : "");
	pool->base = base;
	pool->size = size;
	pool->alias = alias;
	pool->protect = alias && protect;
	if (pool->protect) {
		static pthread_once_t once = PTHREAD_ONCE_INIT;
		pthread_once(&once, protect_install);
	}
	pthread_mutex_lock(&reg_lock);
	if (alias)
		nguarded++;
	update_active();
	pthread_mutex_unlock(&reg_lock);
	pm_region_add(pool, base, size, NULL, NULL);
	if (pm_trace && pm_trace->pool_mapped)
		pm_trace->pool_mapped(pm_trace->ctx, pool);
	return pool;
}

void pm_pool_unregister(struct pm_pool *pool)
{
	if (!pool)
		return;
	if (pm_trace && pm_trace->pool_unmapped)
		pm_trace->pool_unmapped(pm_trace->ctx, pool);
	pthread_mutex_lock(&reg_lock);
	for (int i = 0; i < nregions;) {
		if (regions[i].pool == pool) {
			regions[i] = regions[--nregions];
			continue;
		}
		i++;
	}
	if (pool->alias)
		nguarded--;
	update_active();
	pthread_mutex_unlock(&reg_lock);
	free((char *)pool->path);
	free(pool);
}

void pm_region_add(struct pm_pool *pool, char *start, uint64_t len, pm_xlate_fn xlate, void *xctx)
{
	if (!pool)
		return;
	pthread_mutex_lock(&reg_lock);
	if (nregions < MAX_REGIONS)
		regions[nregions++] = (struct region){start, len, xlate, xctx, pool};
	else
		fprintf(stderr, "ferrite: pm trace: too many pool regions\n");
	pthread_mutex_unlock(&reg_lock);
}

void pm_region_del(char *start)
{
	pthread_mutex_lock(&reg_lock);
	for (int i = 0; i < nregions; i++)
		if (regions[i].start == start) {
			regions[i] = regions[--nregions];
			break;
		}
	pthread_mutex_unlock(&reg_lock);
}

static struct region *region_of(const void *addr)
{
	const char *a = addr;
	for (int i = 0; i < nregions; i++)
		if (a >= regions[i].start && a < regions[i].start + regions[i].len)
			return &regions[i];
	return NULL;
}

int pm_region_describe(const void *addr, char *buf, size_t len)
{
	struct region *r = region_of(addr);
	if (!r)
		return 0;
	snprintf(buf, len, "%s of pool %s (%s)", r->xlate ? "partition space" : "direct mapping",
		 r->pool->path, r->pool->alias ? "mapped read-only" : "writable");
	return 1;
}

static void die(const char *what, const void *addr)
{
	fprintf(stderr, "ferrite: pm trace: %s at %p\n", what, addr);
	abort();
}

/* Pool offset of addr, which lies in r; never crosses a page (xlate). */
static uint64_t offset_in(struct region *r, const char *addr)
{
	if (!r->xlate)
		return (uint64_t)(addr - r->start);
	return r->xlate(r->xctx, addr);
}

/* Calls fn for each piece of [addr, addr+len) that maps contiguously. */
#define FOR_EACH_PIECE(r, addr, len, piece, n, off, BODY)                                          \
	do {                                                                                       \
		const char *piece = (const char *)(addr);                                          \
		size_t left_ = (len);                                                              \
		while (left_) {                                                                    \
			size_t n = left_;                                                          \
			if ((r)->xlate) {                                                          \
				size_t in_page =                                                   \
				    FR_PAGE_SIZE - ((uintptr_t)piece & (FR_PAGE_SIZE - 1));        \
				n = FR_MIN(n, in_page);                                            \
			}                                                                          \
			uint64_t off = offset_in((r), piece);                                      \
			if (off == PM_NO_OFF || off + n > (r)->pool->size)                         \
				die("store or flush to an address no pool page backs", piece);     \
			BODY;                                                                      \
			piece += n;                                                                \
			left_ -= n;                                                                \
		}                                                                                  \
	} while (0)

static void put(char *dst, const char *src, size_t n, int kind)
{
	int atomic = kind == PM_ST_WORD;
	if (atomic && n == 8)
		__atomic_store_n((uint64_t *)dst, *(const uint64_t *)src, __ATOMIC_RELAXED);
	else if (atomic && n == 4)
		__atomic_store_n((uint32_t *)dst, *(const uint32_t *)src, __ATOMIC_RELAXED);
	else
		memcpy(dst, src, n);
}

static uint64_t copy_seq;
static pthread_mutex_t protect_lock = PTHREAD_MUTEX_INITIALIZER;

/* R3: the alias pages of [off, off+n) writable (open) or not again. */
static void protect_alias(struct pm_pool *pool, uint64_t off, size_t n, int open)
{
	uint64_t from = off & ~(uint64_t)(FR_PAGE_SIZE - 1);
	uint64_t to = FR_ALIGN_UP(off + n, FR_PAGE_SIZE);
	if (mprotect(pool->alias + from, to - from, open ? PROT_READ | PROT_WRITE : PROT_NONE))
		die("mprotect of the pool's alias failed", pool->alias + from);
}

static void store(void *dst, const void *src, int c, size_t len, int kind)
{
	struct region *r = region_of(dst);
	if (!r) {
		/* Not pool memory (a DRAM image being prepared): nothing to trace. */
		if (src)
			memcpy(dst, src, len);
		else
			memset(dst, c, len);
		return;
	}
	const char *s = src;
	uint64_t copy = kind == PM_ST_COPY ? __atomic_add_fetch(&copy_seq, 1, __ATOMIC_RELAXED) : 0;
	FOR_EACH_PIECE(r, dst, len, piece, n, off, {
		char *target = r->pool->alias ? r->pool->alias + off : (char *)piece;
		if (r->pool->protect) {
			pthread_mutex_lock(&protect_lock);
			protect_alias(r->pool, off, n, 1);
		}
		if (s)
			put(target, s, n, kind);
		else
			memset(target, c, n);
		/* Through the partition space the store must land on the page
		 * the PPT names: a stale mapping would otherwise go unseen. */
		if (r->xlate && r->pool->alias && memcmp(piece, r->pool->alias + off, n) != 0)
			die("partition-space mapping disagrees with the page table", piece);
		if (r->pool->protect) {
			protect_alias(r->pool, off, n, 0);
			pthread_mutex_unlock(&protect_lock);
		}
		if (pm_trace)
			pm_trace->store(pm_trace->ctx, r->pool, off, n, copy);
		if (s)
			s += n;
	});
}

void pm_trace_store(void *dst, const void *src, size_t len, int kind)
{
	store(dst, src, 0, len, kind);
}

void pm_trace_fill(void *dst, int c, size_t len)
{
	store(dst, NULL, c, len, PM_ST_COPY);
}

void pm_trace_flush(const void *addr, size_t len)
{
	if (!pm_trace)
		return;
	struct region *r = region_of(addr);
	if (!r)
		return;
	FOR_EACH_PIECE(r, addr, len, piece, n, off,
		       pm_trace->flush(pm_trace->ctx, r->pool, off, n));
}

void pm_trace_fence(void)
{
	if (pm_trace)
		pm_trace->fence(pm_trace->ctx);
}
#endif /* FERRITE_PM_TRACE */

/* ---- planted bugs ------------------------------------------------------------ */

#ifdef FERRITE_PLANT_BUGS
#include <errno.h>
#include <string.h>

int pm_planted;

int pm_plant(const char *name)
{
	static const char *const names[] = {"",
					    "skip-flush",
					    "skip-log-fence",
					    "rename-in-place",
					    "size-before-data",
					    "tier-undo-mark-first"};
	if (!name) {
		pm_planted = PM_PLANT_NONE;
		return 0;
	}
	for (int i = 1; i < (int)(sizeof(names) / sizeof(names[0])); i++)
		if (!strcmp(name, names[i])) {
			pm_planted = i;
			return 0;
		}
	return -EINVAL;
}
#else
#include <errno.h>

int pm_plant(const char *name)
{
	(void)name;
	return -ENOSYS;
}
#endif

/* ---- debug builds --------------------------------------------------------- */

#ifndef NDEBUG
#include <stdio.h>
#include <stdlib.h>

#define DBG_RANGES 256

struct dbg_state {
	uintptr_t lo[DBG_RANGES], hi[DBG_RANGES]; /* stored, not flushed (cache lines) */
	int n;
	int overflow; /* too many to track: the next check is skipped */
	int unfenced; /* flushed since the last fence */
	const void *last_unfenced;
};

static __thread struct dbg_state dbg;
static int check_on = 1;

void pm_op_end_check_enable(int on)
{
	__atomic_store_n(&check_on, on, __ATOMIC_RELAXED);
}

void pm_dbg_store(const void *addr, size_t len)
{
	if (!len)
		return;
	uintptr_t lo = (uintptr_t)addr & ~(uintptr_t)(FR_CACHELINE - 1);
	uintptr_t hi = FR_ALIGN_UP((uintptr_t)addr + len, (uintptr_t)FR_CACHELINE);
	for (int i = 0; i < dbg.n; i++)
		if (lo <= dbg.hi[i] && hi >= dbg.lo[i]) { /* overlaps or touches: merge */
			dbg.lo[i] = FR_MIN(lo, dbg.lo[i]);
			dbg.hi[i] = FR_MAX(hi, dbg.hi[i]);
			return;
		}
	if (dbg.n == DBG_RANGES) {
		dbg.overflow = 1;
		return;
	}
	dbg.lo[dbg.n] = lo;
	dbg.hi[dbg.n++] = hi;
}

void pm_dbg_flush(const void *addr, size_t len)
{
	uintptr_t lo = (uintptr_t)addr & ~(uintptr_t)(FR_CACHELINE - 1);
	uintptr_t hi = FR_ALIGN_UP((uintptr_t)addr + len, (uintptr_t)FR_CACHELINE);
	dbg.unfenced = 1;
	dbg.last_unfenced = addr;
	for (int i = 0; i < dbg.n;) {
		if (hi <= dbg.lo[i] || lo >= dbg.hi[i]) {
			i++;
			continue;
		}
		/* Keep what sticks out on either side of the flushed lines. */
		uintptr_t a = dbg.lo[i], b = dbg.hi[i];
		if (a < lo && b > hi && dbg.n < DBG_RANGES) {
			dbg.hi[i] = lo;
			dbg.lo[dbg.n] = hi;
			dbg.hi[dbg.n++] = b;
			i++;
		} else if (a < lo) {
			dbg.hi[i] = lo;
			i++;
		} else if (b > hi) {
			dbg.lo[i] = hi;
			i++;
		} else {
			dbg.lo[i] = dbg.lo[dbg.n - 1];
			dbg.hi[i] = dbg.hi[--dbg.n];
		}
	}
}

void pm_dbg_fence(void)
{
	dbg.unfenced = 0;
}

void pm_op_end_check(const char *where)
{
	if (dbg.overflow) {
		dbg.overflow = 0;
		dbg.n = 0;
		dbg.unfenced = 0;
		return;
	}
	if (!dbg.n && !dbg.unfenced)
		return;
	int n = dbg.n, unfenced = dbg.unfenced;
	const void *lu = dbg.last_unfenced;
	dbg.n = 0;
	dbg.unfenced = 0;
	if (!__atomic_load_n(&check_on, __ATOMIC_RELAXED))
		return;
	if (n)
		fprintf(stderr,
			"ferrite: %s returned with %d range(s) written but never flushed, "
			"the first at %p (%zu bytes)\n",
			where, n, (void *)dbg.lo[0], (size_t)(dbg.hi[0] - dbg.lo[0]));
	if (unfenced)
		fprintf(stderr, "ferrite: %s returned with a flush (of %p) not fenced\n", where,
			lu);
	abort();
}
#else
void pm_op_end_check_enable(int on)
{
	(void)on;
}
#endif
