/*
 * pm.c -- persist layer set-up on top of libpmem2.
 *
 * libpmem2 decides which flush instruction a mapping needs (it reads the CPU
 * features and, for DAX media, the platform's persistence domain). Ferrite
 * maps the pool itself (the partition space needs many fixed-address
 * mappings), so it wraps its own direct mapping with pmem2_map_from_existing()
 * and takes the function pointers from there. Flush instructions act on
 * addresses, not mappings, so the same functions serve every alias of the
 * pool. The choice is global: if pools of different granularity are mounted
 * in one process, the strictest one wins.
 *
 * Invariant: pm_funcs always holds a working set of functions (before any
 * pool is mapped, the cache-line variant built from CPU instructions).
 * Crash argument: the layer's contract (pm.h): a store is durable once a
 * flush of its line and then a fence have returned; every flavour chosen
 * here keeps it (a weaker granularity only makes flushes cheaper or no-ops
 * where the platform persists caches), so the layers above reason about
 * flush and fence alone.
 */
#include "persist/pm.h"

#include <cpuid.h>
#include <errno.h>
#include <libpmem2.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/mman.h>
#include <unistd.h>

static void fallback_flush(const void *addr, size_t len)
{
	uintptr_t p = (uintptr_t)addr & ~(uintptr_t)(FR_CACHELINE - 1);
	for (; p < (uintptr_t)addr + len; p += FR_CACHELINE)
		__builtin_ia32_clflush((const void *)p);
}

static void fallback_drain(void)
{
	__builtin_ia32_sfence();
}

static void *fallback_memcpy(void *dst, const void *src, size_t len, unsigned flags)
{
	memcpy(dst, src, len);
	fallback_flush(dst, len);
	if (!(flags & PMEM2_F_MEM_NODRAIN))
		fallback_drain();
	return dst;
}

static void *fallback_memset(void *dst, int c, size_t len, unsigned flags)
{
	memset(dst, c, len);
	fallback_flush(dst, len);
	if (!(flags & PMEM2_F_MEM_NODRAIN))
		fallback_drain();
	return dst;
}

struct pm_funcs pm_funcs = {
    .flush = fallback_flush,
    .drain = fallback_drain,
    .memcpy = fallback_memcpy,
    .memset = fallback_memset,
    .gran = PM_GRAN_CACHE_LINE,
};

static int pm_configured;

static int gran_from_env(void)
{
	const char *e = getenv("FERRITE_PM_GRANULARITY");
	if (!e || !*e)
		return -1;
	if (!strcasecmp(e, "byte"))
		return PM_GRAN_BYTE;
	if (!strcasecmp(e, "cacheline") || !strcasecmp(e, "cache_line"))
		return PM_GRAN_CACHE_LINE;
	if (!strcasecmp(e, "page"))
		return PM_GRAN_PAGE;
	return -1;
}

static enum pmem2_granularity to_pmem2(int g)
{
	switch (g) {
	case PM_GRAN_BYTE:
		return PMEM2_GRANULARITY_BYTE;
	case PM_GRAN_PAGE:
		return PMEM2_GRANULARITY_PAGE;
	default:
		return PMEM2_GRANULARITY_CACHE_LINE;
	}
}

/* Asks libpmem2 what a real mapping of this DAX source can guarantee. */
static int detect_granularity(struct pmem2_source *src)
{
	struct pmem2_config *cfg;
	struct pmem2_map *map;
	int g = PM_GRAN_PAGE;
	if (pmem2_config_new(&cfg))
		return PM_GRAN_PAGE;
	pmem2_config_set_required_store_granularity(cfg, PMEM2_GRANULARITY_PAGE);
	size_t align = 0;
	if (pmem2_source_alignment(src, &align) == 0 && align)
		pmem2_config_set_length(cfg, FR_MAX(align, (size_t)FR_UNIT_SIZE));
	if (pmem2_map_new(&map, cfg, src) == 0) {
		switch (pmem2_map_get_store_granularity(map)) {
		case PMEM2_GRANULARITY_BYTE:
			g = PM_GRAN_BYTE;
			break;
		case PMEM2_GRANULARITY_CACHE_LINE:
			g = PM_GRAN_CACHE_LINE;
			break;
		default:
			g = PM_GRAN_PAGE;
		}
		pmem2_map_delete(&map);
	}
	pmem2_config_delete(&cfg);
	return g;
}

/* libpmem2 hands out its persist functions through a map object. One small
 * mapping per granularity is wrapped once and kept for the life of the
 * process: the functions depend only on the CPU and the granularity, and
 * libpmem2 1.12 does not free everything a wrapped map allocates, so
 * wrapping each mount's mapping would leak a little per mount. */
static struct {
	void *page;
	struct pmem2_map *map;
} keep[3];
static pthread_mutex_t keep_lock = PTHREAD_MUTEX_INITIALIZER;

static struct pmem2_map *map_for(int gran)
{
	if (keep[gran].map)
		return keep[gran].map;
	/* A page of its own, not of the pool: a mapping of the pool would keep
	 * the pool's open file, and with it the single-opener lock, alive. */
	int fd = memfd_create("ferrite-persist", MFD_CLOEXEC);
	if (fd < 0)
		return NULL;
	struct pmem2_source *src;
	if (ftruncate(fd, FR_PAGE_SIZE) || pmem2_source_from_fd(&src, fd)) {
		close(fd);
		return NULL;
	}
	void *page = mmap(NULL, FR_PAGE_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	struct pmem2_map *map = NULL;
	if (page != MAP_FAILED &&
	    pmem2_map_from_existing(&map, src, page, FR_PAGE_SIZE, to_pmem2(gran)) == 0) {
		keep[gran].page = page;
		keep[gran].map = map;
	} else if (page != MAP_FAILED) {
		munmap(page, FR_PAGE_SIZE);
	}
	pmem2_source_delete(&src);
	close(fd);
	return map;
}

int pm_setup(int fd, void *addr, size_t len, int gran, void **handle)
{
	(void)addr;
	(void)len;
	*handle = NULL;
	int forced = gran_from_env();
	if (forced >= 0) {
		gran = forced;
	} else if (gran < 0) {
		struct pmem2_source *src;
		if (pmem2_source_from_fd(&src, fd))
			return fr_err(-EINVAL, "libpmem2 cannot use this pool: %s",
				      pmem2_errormsg());
		gran = detect_granularity(src);
		pmem2_source_delete(&src);
	}
	pthread_mutex_lock(&keep_lock);
	struct pmem2_map *map = map_for(gran);
	if (map && (!pm_configured || gran > (int)pm_funcs.gran)) {
		/* The strictest granularity mounted so far decides the functions. */
		pm_funcs.flush = pmem2_get_flush_fn(map);
		pm_funcs.drain = pmem2_get_drain_fn(map);
		pm_funcs.memcpy = pmem2_get_memcpy_fn(map);
		pm_funcs.memset = pmem2_get_memset_fn(map);
		pm_funcs.gran = gran;
		pm_configured = 1;
	}
	pthread_mutex_unlock(&keep_lock);
	if (!map)
		return fr_err(-EINVAL, "libpmem2 cannot wrap the pool mapping: %s",
			      pmem2_errormsg());
	return 0;
}

void pm_teardown(void *handle)
{
	(void)handle; /* the wrapped maps live as long as the process */
}

const char *pm_protection(void)
{
	unsigned a, b, c = 0, d;
	/* CPUID.7.0:ECX bit 3 PKU (the CPU has keys), bit 4 OSPKE (the kernel
	 * enabled them) */
	int pku = __get_cpuid_count(7, 0, &a, &b, &c, &d) && (c & (1u << 3)) && (c & (1u << 4));
#ifdef FERRITE_PM_TRACE
	if (pm_guard_wanted() == PM_GUARD_PROTECT)
		return "on: pool mappings read-only, stores only through the persist layer "
		       "(mprotect debug mode, slow)";
#endif
	return pku ? "off: the CPU has protection keys, not used yet; ferrite run --protect "
		     "checks with read-only mappings (slow)"
		   : "off: this CPU has no protection keys; ferrite run --protect checks "
		     "with read-only mappings (slow)";
}

const char *pm_describe(void)
{
	unsigned a, b, c, d;
	switch (pm_funcs.gran) {
	case PM_GRAN_BYTE:
		return "none needed (eADR: caches are persistent)";
	case PM_GRAN_PAGE:
		return "msync (page-granular medium)";
	default:
		break;
	}
	int clwb = 0, clflushopt = 0;
	if (__get_cpuid_count(7, 0, &a, &b, &c, &d)) {
		clwb = !!(b & (1u << 24));
		clflushopt = !!(b & (1u << 23));
	}
	const char *no_clwb = getenv("PMEM_NO_CLWB");
	const char *no_opt = getenv("PMEM_NO_CLFLUSHOPT");
	const char *no_movnt = getenv("PMEM_NO_MOVNT"); /* libpmem2 reads these too */
	int nt = !(no_movnt && *no_movnt == '1');
	if (clwb && !(no_clwb && *no_clwb == '1'))
		return nt ? "clwb + sfence; non-temporal stores for bulk data"
			  : "clwb + sfence; cached stores for bulk data";
	if (clflushopt && !(no_opt && *no_opt == '1'))
		return nt ? "clflushopt + sfence; non-temporal stores for bulk data"
			  : "clflushopt + sfence; cached stores for bulk data";
	return nt ? "clflush; non-temporal stores for bulk data"
		  : "clflush; cached stores for bulk data";
}

void pm_copy_nt(void *dst, const void *src, size_t len)
{
	pm_dbg_store(dst, len);
	pm_dbg_flush(dst, len);
	if (PM_TRACED()) {
		pm_trace_store(dst, src, len, PM_ST_COPY);
		pm_trace_flush(dst, len);
		return;
	}
	pm_funcs.memcpy(dst, src, len, PMEM2_F_MEM_NONTEMPORAL | PMEM2_F_MEM_NODRAIN);
}

void pm_copy_flush(void *dst, const void *src, size_t len)
{
	pm_dbg_store(dst, len);
	pm_dbg_flush(dst, len);
	if (PM_TRACED()) {
		pm_trace_store(dst, src, len, PM_ST_COPY);
		pm_trace_flush(dst, len);
		return;
	}
	pm_funcs.memcpy(dst, src, len, PMEM2_F_MEM_TEMPORAL | PMEM2_F_MEM_NODRAIN);
}

void pm_zero_nt(void *dst, size_t len)
{
	pm_dbg_store(dst, len);
	pm_dbg_flush(dst, len);
	if (PM_TRACED()) {
		pm_trace_fill(dst, 0, len);
		pm_trace_flush(dst, len);
		return;
	}
	pm_funcs.memset(dst, 0, len, PMEM2_F_MEM_NONTEMPORAL | PMEM2_F_MEM_NODRAIN);
}
