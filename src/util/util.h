/*
 * util.h -- small helpers shared by every layer: checksums, name hashing,
 * error messages, alignment and bit arithmetic. Nothing here touches the pool.
 */
#ifndef FERRITE_UTIL_H
#define FERRITE_UTIL_H

#include <stddef.h>
#include <stdint.h>

#define FR_KIB (1024ULL)
#define FR_MIB (1024ULL * 1024)
#define FR_GIB (1024ULL * 1024 * 1024)

#define FR_PAGE_SHIFT 12
#define FR_PAGE_SIZE  (1ULL << FR_PAGE_SHIFT)
#define FR_UNIT_SHIFT 21 /* 2 MiB: buddy top order, PPT window, mapping grain */
#define FR_UNIT_SIZE  (1ULL << FR_UNIT_SHIFT)
#define FR_CACHELINE  64

#define FR_ALIGN_UP(x, a)   (((x) + ((a)-1)) & ~((__typeof__(x))(a)-1))
#define FR_ALIGN_DOWN(x, a) ((x) & ~((__typeof__(x))(a)-1))
#define FR_MIN(a, b)	    ((a) < (b) ? (a) : (b))
#define FR_MAX(a, b)	    ((a) > (b) ? (a) : (b))
#define FR_ARRAY_SIZE(a)    (sizeof(a) / sizeof((a)[0]))
#define FR_LIKELY(x)	    __builtin_expect(!!(x), 1)
#define FR_UNLIKELY(x)	    __builtin_expect(!!(x), 0)
#define FR_HIDDEN	    __attribute__((visibility("hidden")))

/* crc32c (Castagnoli), hardware-accelerated when the CPU has SSE4.2. */
uint32_t fr_crc32c(uint32_t crc, const void *buf, size_t len);

/* Keyed hash of a name for directory indexes, in [FR_HASH_MIN, FR_HASH_MAX]:
 * small values stay free for the cookies of "." and "..", and values up to
 * FR_HASH_END - 1 stay free for the few a collision adds, so every cookie,
 * including the end marker FR_HASH_END, is a non-negative int64_t. */
#define FR_HASH_MIN 16ULL
#define FR_HASH_MAX ((1ULL << 63) - 257)
#define FR_HASH_END ((1ULL << 63) - 1) /* readdir cookie after the last entry */
uint64_t fr_name_hash(uint64_t seed, const char *name, size_t len);

/* Thread's last error message. fr_err() records a formatted message and
 * returns rc (a -errno) so callers can write `return fr_err(-EINVAL, ...)`. */
int fr_err(int rc, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void fr_err_clear(void);
int fr_err_isset(void);
const char *fr_err_get(void);
/* At an API boundary: give a failed call a message if it has none. */
int fr_err_finish(int rc);

/* fsck-style problem reporting: formats a line and hands it to report. */
typedef void (*fr_report_fn)(void *arg, const char *line);
void fr_report(fr_report_fn report, void *arg, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static inline unsigned fr_log2_ceil(uint64_t v)
{
	return v <= 1 ? 0 : 64 - (unsigned)__builtin_clzll(v - 1);
}

#endif
