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
 * $FERRITE_PM_GRANULARITY=byte|cacheline|page overrides both (tests use it to
 * exercise every flush variant). Returns 0 or -errno. */
int pm_setup(int fd, void *addr, size_t len, int gran, void **handle);
void pm_teardown(void *handle);
/* Human-readable name of the flush instruction in use. */
const char *pm_describe(void);

#ifdef FERRITE_PM_TRACE
struct pm_trace_ops {
	void (*store)(void *ctx, const void *addr, size_t len);
	void (*flush)(void *ctx, const void *addr, size_t len);
	void (*fence)(void *ctx);
	void *ctx;
};
void pm_trace_set(const struct pm_trace_ops *ops);
extern const struct pm_trace_ops *pm_trace;
#define PM_TRACE_STORE(a, n)                                                                       \
	do {                                                                                       \
		if (pm_trace)                                                                      \
			pm_trace->store(pm_trace->ctx, (a), (n));                                  \
	} while (0)
#define PM_TRACE_FLUSH(a, n)                                                                       \
	do {                                                                                       \
		if (pm_trace)                                                                      \
			pm_trace->flush(pm_trace->ctx, (a), (n));                                  \
	} while (0)
#define PM_TRACE_FENCE()                                                                           \
	do {                                                                                       \
		if (pm_trace)                                                                      \
			pm_trace->fence(pm_trace->ctx);                                            \
	} while (0)
#else
#define PM_TRACE_STORE(a, n) ((void)0)
#define PM_TRACE_FLUSH(a, n) ((void)0)
#define PM_TRACE_FENCE()     ((void)0)
#endif

/* Plain (cached) stores; durable only after pm_flush + pm_fence. */
static inline void pm_store(void *dst, const void *src, size_t len)
{
	PM_TRACE_STORE(dst, len);
	memcpy(dst, src, len);
}

static inline void pm_store8(void *dst, uint64_t v)
{
	PM_TRACE_STORE(dst, 8);
	__atomic_store_n((uint64_t *)dst, v, __ATOMIC_RELAXED);
}

static inline void pm_store4(void *dst, uint32_t v)
{
	PM_TRACE_STORE(dst, 4);
	__atomic_store_n((uint32_t *)dst, v, __ATOMIC_RELAXED);
}

static inline void pm_store1(void *dst, uint8_t v)
{
	PM_TRACE_STORE(dst, 1);
	*(volatile uint8_t *)dst = v;
}

static inline void pm_flush(const void *addr, size_t len)
{
	PM_TRACE_FLUSH(addr, len);
	pm_funcs.flush(addr, len);
}

static inline void pm_fence(void)
{
	PM_TRACE_FENCE();
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
