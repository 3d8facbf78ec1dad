/*
 * pm.h -- the persist layer: the only code that flushes or fences.
 *
 * Every store that must reach persistent memory is issued through one of the
 * functions below, never by assigning to a pool address directly, so that a
 * tracing build (FERRITE_PM_TRACE) sees the complete stream of stores,
 * flushes and fences. The instruction used (clwb, clflushopt, clflush, or
 * nothing under eADR, or msync for page-granular media) is chosen once per
 * pool by libpmem2 from the CPU and the medium; see pm_setup().
 *
 * Vocabulary: a store is not durable until it is flushed AND a later fence
 * has completed. pm_copy_nt() and pm_zero_nt() flush as they go (non-temporal
 * stores), so they only need the fence.
 */
#ifndef FERRITE_PM_H
#define FERRITE_PM_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "util/util.h"

enum pm_granularity {
	PM_GRAN_BYTE = 0,	/* eADR / battery-backed caches: no flush needed */
	PM_GRAN_CACHE_LINE = 1, /* flush cache lines, then fence */
	PM_GRAN_PAGE = 2,	/* msync: ordinary page-cache files */
};

typedef void (*pm_flush_fn)(const void *addr, size_t len);
typedef void (*pm_drain_fn)(void);
typedef void *(*pm_memcpy_fn)(void *dst, const void *src, size_t len, unsigned flags);
typedef void *(*pm_memset_fn)(void *dst, int c, size_t len, unsigned flags);

struct pm_funcs {
	pm_flush_fn flush;
	pm_drain_fn drain;
	pm_memcpy_fn memcpy;
	pm_memset_fn memset;
	enum pm_granularity gran;
};

extern struct pm_funcs pm_funcs;

/* Chooses the persist functions for a mapping of fd at [addr, addr+len).
 * gran < 0 lets libpmem2 detect it (DAX media); otherwise it is forced.
 * $FERRITE_PM_GRANULARITY=byte|cacheline|page overrides both; libpmem2's
 * $PMEM_NO_CLWB, $PMEM_NO_CLFLUSHOPT and $PMEM_NO_MOVNT pick among the
 * cache-line flavours (tests/flush runs the suites under each). Returns 0 or
 * -errno. */
int pm_setup(int fd, void *addr, size_t len, int gran, void **handle);
void pm_teardown(void *handle);
/* Human-readable name of the flush instruction in use. */
const char *pm_describe(void);
/* Whether a stray store of the program into pool memory is caught, and how
 * (ferrite info): protection keys where the CPU has them, or the checking
 * build's read-only mappings. */
const char *pm_protection(void);

/* ---- tracing build (FERRITE_PM_TRACE) ---------------------------------------
 *
 * The crash-state explorer (tools/crashtest) links a build of the library in
 * which every store, flush and fence below is reported to a tracer, in pool
 * offsets: the space layer registers each range of the address space that
 * maps pool memory (the direct mapping, the partition space) with a function
 * that translates an address to its pool offset. While a tracer with `guard`
 * set is installed when a pool is mapped, every mapping of that pool is made
 * read-only and the functions here store through a separate writable alias,
 * so a store that bypasses the persist layer faults at the instruction that
 * made it. A store through the partition space is also checked to land where
 * the page table says (a stale mapping would be a bug the alias would hide).
 */
#ifdef FERRITE_PM_TRACE
#define PM_NO_OFF (~0ULL)

/* One mapped pool, as the tracer sees it. */
struct pm_pool {
	const char *path;
	char *alias; /* writable mapping of [0, size) when guarded, else NULL */
	int protect; /* PM_GUARD_PROTECT: alias is PROT_NONE between stores */
	char *base;  /* the direct mapping */
	uint64_t size;
	void *tracer; /* the tracer's own state for this pool */
};

struct pm_trace_ops {
	/* A pool was mapped / is about to be unmapped. */
	void (*pool_mapped)(void *ctx, struct pm_pool *pool);
	void (*pool_unmapped)(void *ctx, struct pm_pool *pool);
	/* After the bytes are in place: [off, off+len) of pool holds new data.
	 * copy: nonzero for the pieces of one bulk copy (pm_copy_nt and
	 * friends; the same number for all its pieces), which may tear at
	 * 8-byte granularity; 0 for ordinary stores. */
	void (*store)(void *ctx, struct pm_pool *pool, uint64_t off, size_t len, uint64_t copy);
	void (*flush)(void *ctx, struct pm_pool *pool, uint64_t off, size_t len);
	/* Before the fence takes effect (the crash point of everything pending). */
	void (*fence)(void *ctx);
	void *ctx;
	int guard;
};
void pm_trace_set(const struct pm_trace_ops *ops);
extern const struct pm_trace_ops *pm_trace;

/* Registration by the space layer. xlate returns the pool offset of addr
 * (within one 4 KiB page) or PM_NO_OFF if no pool memory backs it. */
typedef uint64_t (*pm_xlate_fn)(void *xctx, const char *addr);
struct pm_pool *pm_pool_register(const char *path, char *base, uint64_t size, char *alias,
				 int protect);
void pm_pool_unregister(struct pm_pool *pool);
void pm_region_add(struct pm_pool *pool, char *start, uint64_t len, pm_xlate_fn xlate, void *xctx);
void pm_region_del(char *start);
/* Should mappings of a pool mapped now be read-only? PM_GUARD_ALIAS: a
 * guarding tracer (the explorer), stores through a writable alias;
 * PM_GUARD_PROTECT: the protection debug mode (the checking build, or
 * FERRITE_PROTECT=1 in a tracing build), whose alias is writable only
 * while the persist layer stores through it. */
enum { PM_GUARD_NONE, PM_GUARD_ALIAS, PM_GUARD_PROTECT };
int pm_guard_wanted(void);
/* The registered region holding addr, for a fault handler's message. */
int pm_region_describe(const void *addr, char *buf, size_t len);

enum { PM_ST_PLAIN, PM_ST_WORD, PM_ST_COPY };
void pm_trace_store(void *dst, const void *src, size_t len, int kind);
void pm_trace_fill(void *dst, int c, size_t len);
void pm_trace_flush(const void *addr, size_t len);
void pm_trace_fence(void);
extern int pm_trace_active; /* a tracer or a guarded pool exists */
#define PM_TRACED() FR_UNLIKELY(pm_trace_active)
#else
#define PM_TRACED() 0
enum { PM_ST_PLAIN, PM_ST_WORD, PM_ST_COPY };
static inline void pm_trace_store(void *dst, const void *src, size_t len, int kind)
{
	(void)dst, (void)src, (void)len, (void)kind;
}
static inline void pm_trace_fill(void *dst, int c, size_t len)
{
	(void)dst, (void)c, (void)len;
}
static inline void pm_trace_flush(const void *addr, size_t len)
{
	(void)addr, (void)len;
}
static inline void pm_trace_fence(void)
{
}
#endif

/* ---- planted bugs (the explorer's test of itself) ------------------------------
 *
 * The tracing build can plant known crash-consistency bugs, chosen at run
 * time with pm_plant(); the crash explorer must catch every one of them. The
 * shipped library has none of this (PM_PLANTED is 0 there).
 */
#ifdef FERRITE_PLANT_BUGS
enum {
	PM_PLANT_NONE,
	PM_PLANT_SKIP_FLUSH,	       /* the size publish of a write is not flushed */
	PM_PLANT_SKIP_LOG_FENCE,       /* a log entry is not fenced before it is applied */
	PM_PLANT_RENAME_IN_PLACE,      /* rename edits a dentry in place before logging */
	PM_PLANT_SIZE_BEFORE_DATA,     /* an append publishes its size before its data */
	PM_PLANT_TIER_UNDO_MARK_FIRST, /* tier recovery drops an interrupted write's
					* C chunk before its other chunks */
};
extern int pm_planted;
#define PM_PLANTED(b) FR_UNLIKELY(pm_planted == (b))
#else
#define PM_PLANTED(b) 0
#endif
/* Plants the bug called name (NULL: none). -EINVAL for an unknown name,
 * -ENOSYS in a build without planted bugs. */
int pm_plant(const char *name);

/* ---- debug builds: nothing written-but-unpersisted at an operation's end ----
 *
 * Without NDEBUG each thread remembers the ranges it stored but has not
 * flushed, and whether it flushed since its last fence; pm_op_end_check()
 * (called where every public call returns) aborts with the culprit if either
 * is left. pm_op_end_check_enable(0) turns the abort off for tools that
 * detect the same thing themselves (the crash explorer).
 */
#ifndef NDEBUG
void pm_dbg_store(const void *addr, size_t len);
void pm_dbg_flush(const void *addr, size_t len);
void pm_dbg_fence(void);
void pm_op_end_check(const char *where);
#else
#define pm_dbg_store(a, n) ((void)0)
#define pm_dbg_flush(a, n) ((void)0)
#define pm_dbg_fence()	   ((void)0)
#define pm_op_end_check(w) ((void)0)
#endif
void pm_op_end_check_enable(int on);

/* Plain (cached) stores; durable only after pm_flush + pm_fence. */
static inline void pm_store(void *dst, const void *src, size_t len)
{
	pm_dbg_store(dst, len);
	if (PM_TRACED())
		pm_trace_store(dst, src, len, PM_ST_PLAIN);
	else
		memcpy(dst, src, len);
}

static inline void pm_store8(void *dst, uint64_t v)
{
	pm_dbg_store(dst, 8);
	if (PM_TRACED())
		pm_trace_store(dst, &v, 8, PM_ST_WORD);
	else
		__atomic_store_n((uint64_t *)dst, v, __ATOMIC_RELAXED);
}

static inline void pm_store4(void *dst, uint32_t v)
{
	pm_dbg_store(dst, 4);
	if (PM_TRACED())
		pm_trace_store(dst, &v, 4, PM_ST_WORD);
	else
		__atomic_store_n((uint32_t *)dst, v, __ATOMIC_RELAXED);
}

static inline void pm_store1(void *dst, uint8_t v)
{
	pm_dbg_store(dst, 1);
	if (PM_TRACED())
		pm_trace_store(dst, &v, 1, PM_ST_WORD);
	else
		*(volatile uint8_t *)dst = v;
}

static inline void pm_flush(const void *addr, size_t len)
{
	pm_dbg_flush(addr, len);
	if (PM_TRACED())
		pm_trace_flush(addr, len);
	pm_funcs.flush(addr, len);
}

static inline void pm_fence(void)
{
	pm_dbg_fence();
	if (PM_TRACED())
		pm_trace_fence();
	pm_funcs.drain();
}

static inline void pm_persist(const void *addr, size_t len)
{
	pm_flush(addr, len);
	pm_fence();
}

/* COMMIT POINT helper: an aligned 8-byte store made durable before return. */
static inline void pm_publish8(void *dst, uint64_t v)
{
	pm_store8(dst, v);
	pm_flush(dst, 8);
	pm_fence();
}

/* Bulk copy with non-temporal stores, flushed, not fenced. */
void pm_copy_nt(void *dst, const void *src, size_t len);
/* Small copy with cached stores, flushed, not fenced. */
void pm_copy_flush(void *dst, const void *src, size_t len);
/* Bulk zeroing with non-temporal stores, flushed, not fenced. */
void pm_zero_nt(void *dst, size_t len);

#endif
