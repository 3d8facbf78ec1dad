/*
 * model.c -- what persistent memory holds after each store, flush and fence
 * of the tracing build, and the crash images of each instant.
 *
 * The model follows one pool. `persisted` is what PM is known to hold; a
 * line written since it last reached PM is dirty; a flush remembers the
 * line's content at that moment, and the next fence makes that content
 * persisted (a store after the flush keeps the line dirty: it may or may not
 * have been written back). Before each fence takes effect, and right after
 * each operation returns, the instant is reported as a crash point: the
 * dirty lines whose content differs from PM, grouped into units that reach
 * PM independently (a cache line of small stores; all lines of one bulk copy,
 * whose non-temporal stores may also land in any 8-byte subset).
 *
 * Images are identified by a hash that is a sum over all lines of a per-line
 * hash, so changing a few lines updates it in O(lines).
 */
#include "ct.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define LF_DIRTY   1
#define LF_FLUSHED 2
#define LF_LISTED  4

/* Large, mostly untouched arrays: anonymous memory costs only where used
 * (a checker forked from the worker must not pay for all of it). */
static void *zalloc(uint64_t len)
{
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	return p == MAP_FAILED ? NULL : p;
}

static void zfree(void *p, uint64_t len)
{
	if (p)
		munmap(p, len);
}

static inline uint64_t rotl(uint64_t x, int r)
{
	return (x << r) | (x >> (64 - r));
}

uint64_t ct_line_hash(uint64_t line, const uint8_t *p)
{
	uint64_t h = line * 0x9E3779B97F4A7C15ULL ^ 0x243F6A8885A308D3ULL;
	for (int i = 0; i < 8; i++) {
		uint64_t w;
		memcpy(&w, p + 8 * i, 8);
		h ^= w * 0xff51afd7ed558ccdULL;
		h = rotl(h, 31) * 0xc4ceb9fe1a85ec53ULL;
	}
	h ^= h >> 33;
	h *= 0xff51afd7ed558ccdULL;
	h ^= h >> 29;
	return h;
}

uint64_t ct_page_hash(const uint8_t *img, uint64_t pg)
{
	uint64_t h = 0;
	for (uint64_t l = pg * (FR_PAGE_SIZE / CT_LINE); l < (pg + 1) * (FR_PAGE_SIZE / CT_LINE);
	     l++)
		h += ct_line_hash(l, img + l * CT_LINE);
	return h;
}

const uint64_t *ct_zero_page_hashes(uint64_t npages)
{
	static uint64_t *cached, cached_pages;
	static const uint8_t zero[CT_LINE];
	if (cached_pages != npages) {
		free(cached);
		cached = malloc(npages * sizeof(uint64_t));
		if (!cached)
			abort();
		for (uint64_t pg = 0; pg < npages; pg++) {
			uint64_t h = 0;
			for (uint64_t l = pg * (FR_PAGE_SIZE / CT_LINE);
			     l < (pg + 1) * (FR_PAGE_SIZE / CT_LINE); l++)
				h += ct_line_hash(l, zero);
			cached[pg] = h;
		}
		cached_pages = npages;
	}
	return cached;
}

/* Hash of an all-zero image of nlines lines. */
static uint64_t zero_image_hash(uint64_t nlines)
{
	const uint64_t *z = ct_zero_page_hashes(nlines / (FR_PAGE_SIZE / CT_LINE));
	uint64_t h = 0;
	for (uint64_t pg = 0; pg < nlines / (FR_PAGE_SIZE / CT_LINE); pg++)
		h += z[pg];
	return h;
}

uint64_t ct_image_hash(const uint8_t *img, uint64_t size)
{
	uint64_t h = 0;
	for (uint64_t l = 0; l < size / CT_LINE; l++)
		h += ct_line_hash(l, img + l * CT_LINE);
	return h;
}

static const uint8_t *live(struct ct_model *m)
{
	return (const uint8_t *)(m->pool->alias ? m->pool->alias : m->pool->base);
}

/* ---- trace hooks -------------------------------------------------------------- */

static void on_mapped(void *ctx, struct pm_pool *pool)
{
	struct ct_model *m = ctx;
	if (!m->pool && strcmp(pool->path, m->path) == 0) {
		m->pool = pool;
		pool->tracer = m;
		if (m->auto_image && !m->auto_done) {
			m->auto_done = 1;
			if (ct_model_record(m, m->auto_image, m->auto_hash) < 0)
				abort();
		}
	}
}

static void on_unmapped(void *ctx, struct pm_pool *pool)
{
	struct ct_model *m = ctx;
	if (pool == m->pool) {
		m->pool = NULL;
		m->recording = 0;
	}
}

static void list_dirty(struct ct_model *m, uint64_t l)
{
	if (m->flags[l] & LF_LISTED)
		return;
	if (m->ndirty == m->capdirty) {
		m->capdirty = m->capdirty ? 2 * m->capdirty : 4096;
		m->dirty = realloc(m->dirty, m->capdirty * sizeof(*m->dirty));
		if (!m->dirty)
			abort();
	}
	m->dirty[m->ndirty++] = l;
	m->flags[l] |= LF_LISTED;
}

static void on_store(void *ctx, struct pm_pool *pool, uint64_t off, size_t len, uint64_t copy)
{
	struct ct_model *m = ctx;
	if (pool != m->pool || !len)
		return;
	if (m->touched)
		for (uint64_t pg = off / FR_PAGE_SIZE; pg <= (off + len - 1) / FR_PAGE_SIZE; pg++)
			__atomic_or_fetch(&m->touched[pg / 64], 1ULL << (pg % 64),
					  __ATOMIC_RELAXED);
	if (!m->recording)
		return;
	m->stores++;
	for (uint64_t l = off / CT_LINE; l <= (off + len - 1) / CT_LINE; l++) {
		m->flags[l] |= LF_DIRTY;
		m->copy[l] = copy;
		list_dirty(m, l);
	}
}

static void on_flush(void *ctx, struct pm_pool *pool, uint64_t off, size_t len)
{
	struct ct_model *m = ctx;
	if (!m->recording || pool != m->pool || !len)
		return;
	m->flushes++;
	const uint8_t *lv = live(m);
	for (uint64_t l = off / CT_LINE; l <= (off + len - 1) / CT_LINE; l++) {
		if (!(m->flags[l] & LF_DIRTY))
			continue;
		memcpy(m->snap + l * CT_LINE, lv + l * CT_LINE, CT_LINE);
		m->flags[l] |= LF_FLUSHED;
	}
}

/* ---- crash points ------------------------------------------------------------- */

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

struct point_buf {
	struct ct_point pt;
	uint64_t cap_lines, cap_units;
	uint64_t *sorted;
	uint64_t *ucopy; /* per unit: its copy id */
};

static struct point_buf pb;

/* Copies of 8 lines (512 bytes) or more may tear; of those, only the
 * CT_TEAR_UNITS largest of an instant are torn (an instant that zeroes
 * hundreds of pages one by one would otherwise drown in near-identical
 * tears). */
static void mark_tears(struct ct_unit *units, uint32_t n)
{
	uint32_t marked = 0;
	for (uint32_t u = 0; u < n; u++)
		units[u].tear = 0;
	while (marked < CT_TEAR_UNITS) {
		int best = -1;
		for (uint32_t u = 0; u < n; u++)
			if (units[u].bulk && !units[u].tear && units[u].nlines >= 8 &&
			    (best < 0 || units[u].nlines > units[best].nlines))
				best = (int)u;
		if (best < 0)
			break;
		units[best].tear = 1;
		marked++;
	}
}

static void emit_point(struct ct_model *m, int after)
{
	const uint8_t *lv = live(m);
	uint64_t n = 0;
	if (pb.cap_lines < m->ndirty + 1) {
		pb.cap_lines = m->ndirty + 1024;
		pb.sorted = realloc(pb.sorted, pb.cap_lines * sizeof(uint64_t));
		pb.pt.lines = realloc(pb.pt.lines, pb.cap_lines * sizeof(uint64_t));
		pb.pt.content = realloc(pb.pt.content, pb.cap_lines * CT_LINE);
		pb.pt.units = realloc(pb.pt.units, pb.cap_lines * sizeof(struct ct_unit));
		pb.ucopy = realloc(pb.ucopy, pb.cap_lines * sizeof(uint64_t));
		if (!pb.sorted || !pb.pt.lines || !pb.pt.content || !pb.pt.units || !pb.ucopy)
			abort();
	}
	for (uint64_t i = 0; i < m->ndirty; i++) {
		uint64_t l = m->dirty[i];
		if (memcmp(lv + l * CT_LINE, m->persisted + l * CT_LINE, CT_LINE))
			pb.sorted[n++] = l;
	}
	qsort(pb.sorted, n, sizeof(uint64_t), cmp_u64);
	/* Units in order of their first line; lines of a copy stay together. */
	uint32_t nunits = 0;
	uint32_t *unit_of = calloc(n ? n : 1, sizeof(uint32_t));
	for (uint64_t i = 0; i < n; i++) {
		uint64_t c = m->copy[pb.sorted[i]];
		uint32_t u = nunits;
		if (c)
			for (uint32_t k = 0; k < nunits; k++)
				if (pb.ucopy[k] == c) {
					u = k;
					break;
				}
		if (u == nunits) {
			pb.ucopy[nunits] = c;
			pb.pt.units[nunits] = (struct ct_unit){0, 0, c != 0, 0};
			nunits++;
		}
		unit_of[i] = u;
		pb.pt.units[u].nlines++;
	}
	uint32_t pos = 0;
	for (uint32_t u = 0; u < nunits; u++) {
		pb.pt.units[u].first = pos;
		pos += pb.pt.units[u].nlines;
		pb.pt.units[u].nlines = 0;
	}
	for (uint64_t i = 0; i < n; i++) {
		struct ct_unit *u = &pb.pt.units[unit_of[i]];
		uint32_t at = u->first + u->nlines++;
		pb.pt.lines[at] = pb.sorted[i];
		memcpy(pb.pt.content + (uint64_t)at * CT_LINE, lv + pb.sorted[i] * CT_LINE,
		       CT_LINE);
	}
	free(unit_of);
	mark_tears(pb.pt.units, nunits);
	pb.pt.nunits = nunits;
	pb.pt.nlines = (uint32_t)n;
	pb.pt.op = m->op;
	pb.pt.after = after;
	pb.pt.index = m->npoints++;
	pb.pt.hash = m->hash;
	if (m->on_point)
		m->on_point(m, &pb.pt, m->arg);
}

static void persist_line(struct ct_model *m, uint64_t l, const uint8_t *content)
{
	uint8_t *p = m->persisted + l * CT_LINE;
	if (!memcmp(p, content, CT_LINE))
		return;
	uint8_t old[CT_LINE];
	memcpy(old, p, CT_LINE);
	m->hash -= ct_line_hash(l, p);
	memcpy(p, content, CT_LINE);
	m->hash += ct_line_hash(l, p);
	if (m->on_persist)
		m->on_persist(m, l, old, p, m->arg);
}

static void on_fence(void *ctx)
{
	struct ct_model *m = ctx;
	if (!m->recording || !m->pool)
		return;
	m->fences++;
	emit_point(m, 0);
	const uint8_t *lv = live(m);
	uint64_t keep = 0;
	for (uint64_t i = 0; i < m->ndirty; i++) {
		uint64_t l = m->dirty[i];
		if (m->flags[l] & LF_FLUSHED)
			persist_line(m, l, m->snap + l * CT_LINE);
		m->flags[l] &= (uint8_t)~LF_FLUSHED;
		if (!memcmp(lv + l * CT_LINE, m->persisted + l * CT_LINE, CT_LINE)) {
			m->flags[l] &= (uint8_t) ~(LF_DIRTY | LF_LISTED);
			continue;
		}
		m->dirty[keep++] = l;
	}
	m->ndirty = keep;
}

/* ---- life cycle ---------------------------------------------------------------- */

int ct_model_init(struct ct_model *m, const char *path)
{
	memset(m, 0, sizeof(*m));
	snprintf(m->path, sizeof(m->path), "%s", path);
	m->op = -1;
	m->ops.pool_mapped = on_mapped;
	m->ops.pool_unmapped = on_unmapped;
	m->ops.store = on_store;
	m->ops.flush = on_flush;
	m->ops.fence = on_fence;
	m->ops.ctx = m;
	m->ops.guard = 1;
	return 0;
}

void ct_model_free(struct ct_model *m)
{
	if (m->own_persisted)
		zfree(m->persisted, m->size);
	zfree(m->snap, m->size);
	zfree(m->flags, m->nlines);
	zfree(m->copy, m->nlines * sizeof(uint64_t));
	free(m->nonzero);
	free(m->dirty);
	memset(m, 0, sizeof(*m));
}

void ct_model_install(struct ct_model *m)
{
	pm_trace_set(&m->ops);
}

void ct_model_uninstall(struct ct_model *m)
{
	(void)m;
	pm_trace_set(NULL);
}

int ct_model_record(struct ct_model *m, uint8_t *image, uint64_t hash)
{
	if (!m->pool)
		return -ENOENT;
	if (m->size != m->pool->size) {
		if (m->own_persisted)
			zfree(m->persisted, m->size);
		zfree(m->snap, m->size);
		zfree(m->flags, m->nlines);
		zfree(m->copy, m->nlines * sizeof(uint64_t));
		m->size = m->pool->size;
		m->nlines = m->size / CT_LINE;
		m->persisted = NULL;
		m->own_persisted = 0;
		m->snap = zalloc(m->size);
		m->flags = zalloc(m->nlines);
		m->copy = zalloc(m->nlines * sizeof(uint64_t));
		if (!m->snap || !m->flags || !m->copy)
			return -ENOMEM;
	}
	if (image) {
		if (m->own_persisted)
			zfree(m->persisted, m->size);
		m->persisted = image;
		m->own_persisted = 0;
		m->hash = hash;
	} else {
		/* Copy and hash only the pages that hold anything: a pool is
		 * mostly zeros, and a zero page costs nothing to map. */
		if (m->own_persisted)
			zfree(m->persisted, m->size);
		free(m->nonzero);
		m->persisted = zalloc(m->size);
		m->nonzero = calloc(m->size / FR_PAGE_SIZE / 64 + 1, sizeof(uint64_t));
		if (!m->persisted || !m->nonzero)
			return -ENOMEM;
		m->own_persisted = 1;
		static const uint8_t zero[FR_PAGE_SIZE];
		const uint8_t *lv = live(m);
		m->hash = zero_image_hash(m->nlines);
		for (uint64_t pg = 0; pg < m->size / FR_PAGE_SIZE; pg++) {
			const uint8_t *src = lv + pg * FR_PAGE_SIZE;
			if (!memcmp(src, zero, FR_PAGE_SIZE))
				continue;
			memcpy(m->persisted + pg * FR_PAGE_SIZE, src, FR_PAGE_SIZE);
			m->nonzero[pg / 64] |= 1ULL << (pg % 64);
			for (uint64_t l = pg * (FR_PAGE_SIZE / CT_LINE);
			     l < (pg + 1) * (FR_PAGE_SIZE / CT_LINE); l++)
				m->hash +=
				    ct_line_hash(l, lv + l * CT_LINE) - ct_line_hash(l, zero);
		}
	}
	/* Only listed lines carry flags: clearing them beats touching every page. */
	for (uint64_t i = 0; i < m->ndirty; i++)
		m->flags[m->dirty[i]] = 0;
	m->ndirty = 0;
	m->recording = 1;
	return 0;
}

void ct_model_stop(struct ct_model *m)
{
	m->recording = 0;
}

void ct_model_op_begin(struct ct_model *m, int op)
{
	m->op = op;
}

void ct_model_op_end(struct ct_model *m, int op)
{
	m->op = op;
	if (m->recording && m->pool)
		emit_point(m, 1);
}

uint64_t ct_model_pending(struct ct_model *m)
{
	if (!m->pool)
		return 0;
	const uint8_t *lv = live(m);
	uint64_t n = 0;
	for (uint64_t i = 0; i < m->ndirty; i++) {
		uint64_t l = m->dirty[i];
		n += memcmp(lv + l * CT_LINE, m->persisted + l * CT_LINE, CT_LINE) != 0;
	}
	return n;
}

/* ---- variants ----------------------------------------------------------------- */

static uint64_t mix(uint64_t a, uint64_t b)
{
	uint64_t z = a + 0x9E3779B97F4A7C15ULL * (b + 1);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

static int tearable(const struct ct_point *pt, uint32_t u)
{
	return pt->units[u].tear;
}

static uint64_t pairs_of(uint64_t p)
{
	uint64_t n = p * (p - 1) / 2;
	return n < CT_PAIRS_MAX ? n : CT_PAIRS_MAX;
}

static uint64_t base_count(const struct ct_point *pt)
{
	uint64_t p = pt->nunits;
	if (p <= CT_ALL_SUBSETS_MAX)
		return 1ULL << p;
	return 2 + p + pairs_of(p) + CT_RANDOM_SUBSETS;
}

static uint32_t ntearable(const struct ct_point *pt)
{
	uint32_t n = 0;
	for (uint32_t u = 0; u < pt->nunits; u++)
		n += tearable(pt, u);
	return n;
}

uint64_t ct_variant_count(const struct ct_point *pt)
{
	return base_count(pt) + (uint64_t)ntearable(pt) * CT_TEARS;
}

void ct_variant_get(const struct ct_point *pt, uint64_t vid, uint64_t seed, struct ct_variant *v)
{
	uint64_t p = pt->nunits, nb = base_count(pt);
	v->tear_unit = -1;
	v->tear_pattern = 0;
	if (vid >= nb) {
		uint64_t t = vid - nb, which = t / CT_TEARS;
		v->tear_pattern = (int)(t % CT_TEARS);
		for (uint32_t u = 0; u < p; u++)
			if (tearable(pt, u) && which-- == 0) {
				v->tear_unit = (int)u;
				break;
			}
		for (uint32_t u = 0; u < p; u++)
			v->take[u] = v->tear_pattern != CT_TEARS - 1;
		return;
	}
	if (vid == 0 || vid == 1) {
		memset(v->take, vid == 1, p);
		return;
	}
	if (p <= CT_ALL_SUBSETS_MAX) {
		uint64_t mask = vid - 1;
		for (uint32_t u = 0; u < p; u++)
			v->take[u] = (mask >> u) & 1;
		return;
	}
	memset(v->take, 1, p);
	uint64_t k = vid - 2;
	if (k < p) { /* one unit omitted */
		v->take[k] = 0;
		return;
	}
	k -= p;
	if (k < pairs_of(p)) { /* two units omitted */
		uint64_t a, b;
		if (p * (p - 1) / 2 <= CT_PAIRS_MAX) {
			a = 0;
			while (k >= p - 1 - a) {
				k -= p - 1 - a;
				a++;
			}
			b = a + 1 + k;
		} else {
			uint64_t r = mix(seed ^ pt->index, k);
			a = r % p;
			b = (a + 1 + (r >> 32) % (p - 1)) % p;
		}
		v->take[a] = 0;
		v->take[b] = 0;
		return;
	}
	k -= pairs_of(p);
	for (uint32_t u = 0; u < p; u++)
		v->take[u] = mix(mix(seed, pt->index * 131 + k), u) & 1;
}

/* Is 8-byte word w of a torn unit of nw words new? */
static int word_new(const struct ct_point *pt, const struct ct_variant *v, uint64_t w, uint64_t nw)
{
	switch (v->tear_pattern) {
	case 0:
		return w < 1;
	case 1:
	case CT_TEARS - 1:
		return w < nw / 2;
	case 2:
		return w + 1 < nw;
	case 3:
		return w >= nw / 2;
	default:
		return mix(pt->index * 7 + (uint64_t)v->tear_pattern, w) & 1;
	}
}

/* The content line i of unit u takes in variant v, into out. */
static void line_content(const struct ct_point *pt, const struct ct_variant *v, uint32_t u,
			 uint32_t i, const uint8_t *old, uint8_t *out)
{
	const struct ct_unit *un = &pt->units[u];
	const uint8_t *nw = pt->content + (uint64_t)(un->first + i) * CT_LINE;
	if ((int)u != v->tear_unit) {
		memcpy(out, v->take[u] ? nw : old, CT_LINE);
		return;
	}
	uint64_t nwords = (uint64_t)un->nlines * (CT_LINE / 8);
	for (uint64_t w = 0; w < CT_LINE / 8; w++) {
		uint64_t at = (uint64_t)i * (CT_LINE / 8) + w;
		memcpy(out + 8 * w, (word_new(pt, v, at, nwords) ? nw : old) + 8 * w, 8);
	}
}

static int line_changes(const struct ct_point *pt, const struct ct_variant *v, uint32_t u)
{
	return v->take[u] || (int)u == v->tear_unit;
}

void ct_unit_deltas(const struct ct_point *pt, const uint8_t *persisted, uint64_t *delta)
{
	for (uint32_t u = 0; u < pt->nunits; u++) {
		uint64_t d = 0;
		for (uint32_t i = 0; i < pt->units[u].nlines; i++) {
			uint32_t at = pt->units[u].first + i;
			uint64_t l = pt->lines[at];
			d += ct_line_hash(l, pt->content + (uint64_t)at * CT_LINE) -
			     ct_line_hash(l, persisted + l * CT_LINE);
		}
		delta[u] = d;
	}
}

uint64_t ct_variant_hash(const struct ct_point *pt, const struct ct_variant *v,
			 const uint8_t *persisted, const uint64_t *delta)
{
	uint64_t h = pt->hash;
	uint8_t buf[CT_LINE];
	for (uint32_t u = 0; u < pt->nunits; u++) {
		if (!line_changes(pt, v, u))
			continue;
		if (delta && (int)u != v->tear_unit) {
			h += delta[u];
			continue;
		}
		for (uint32_t i = 0; i < pt->units[u].nlines; i++) {
			uint64_t l = pt->lines[pt->units[u].first + i];
			const uint8_t *old = persisted + l * CT_LINE;
			line_content(pt, v, u, i, old, buf);
			h += ct_line_hash(l, buf) - ct_line_hash(l, old);
		}
	}
	return h;
}

void ct_variant_apply(const struct ct_point *pt, const struct ct_variant *v, uint8_t *img,
		      void (*mark)(void *, uint64_t), void *arg)
{
	uint8_t buf[CT_LINE];
	for (uint32_t u = 0; u < pt->nunits; u++) {
		if (!line_changes(pt, v, u))
			continue;
		for (uint32_t i = 0; i < pt->units[u].nlines; i++) {
			uint64_t l = pt->lines[pt->units[u].first + i];
			uint8_t *dst = img + l * CT_LINE;
			line_content(pt, v, u, i, dst, buf);
			memcpy(dst, buf, CT_LINE);
			if (mark)
				mark(arg, l * CT_LINE / FR_PAGE_SIZE);
		}
	}
}

void ct_variant_mark(const struct ct_point *pt, const struct ct_variant *v,
		     void (*mark)(void *, uint64_t), void *arg)
{
	for (uint32_t u = 0; u < pt->nunits; u++)
		if (line_changes(pt, v, u))
			for (uint32_t i = 0; i < pt->units[u].nlines; i++)
				mark(arg,
				     pt->lines[pt->units[u].first + i] * CT_LINE / FR_PAGE_SIZE);
}

const char *ct_variant_describe(const struct ct_point *pt, const struct ct_variant *v, char *buf,
				size_t len)
{
	uint32_t taken = 0;
	for (uint32_t u = 0; u < pt->nunits; u++)
		taken += v->take[u] != 0;
	int k = snprintf(buf, len, "%u of %u pending units reached PM", taken, pt->nunits);
	if (v->tear_unit >= 0 && k > 0 && (size_t)k < len) {
		const struct ct_unit *u = &pt->units[v->tear_unit];
		snprintf(buf + k, len - (size_t)k,
			 "; the copy at pool offset 0x%llx (%u lines) torn by pattern %d",
			 (unsigned long long)(pt->lines[u->first] * CT_LINE), u->nlines,
			 v->tear_pattern);
	}
	return buf;
}
