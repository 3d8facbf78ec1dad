/*
 * mmap.c -- the tier engine's C API: memory mappings of backing files.
 * Invariants, crash argument and credentials: ns.h.
 */
#include "tier/ns.h"

/* ---- memory mappings ------------------------------------------------------------------ *
 *
 * A mapping is the kernel's mapping of the backing file, made after the
 * file's cached chunks are drained and dropped. While a file has one, its
 * reads and writes go straight to the backing file (a write is synced
 * before it returns), so the mapping and the calls see the same bytes;
 * stores through the mapping are durable after msync or munmap, as the
 * contract of ferrite_mmap says. */

struct tier_map {
	char *addr;
	size_t len;
	int shared;
	struct tier_file *tf;
	struct tier_map *next;
};

int tier_mmap(ferrite_fs *fs, int fd, void *addr, size_t len, int prot, int flags, off_t offset,
	      void **out)
{
	BEGIN(fs);
	if (!out)
		return TIER_END(-EFAULT);
	if (len == 0 || (offset & 4095))
		return TIER_END(-EINVAL);
	struct tier_ofile *of = tfd_get(t, fd);
	if (!of)
		return TIER_END(-EBADF);
	int rc = 0;
	struct tier_file *tf = of->tf;
	if ((of->f.flags & O_PATH) || S_ISDIR(of->type))
		rc = -EBADF;
	else if (!S_ISREG(of->type))
		rc = -ENODEV;
	struct tier_map *m = rc ? NULL : calloc(1, sizeof(*m));
	if (!rc && !m)
		rc = -ENOMEM;
	if (!rc && tf) {
		/* Everything of the file in the backing file first. */
		int epoch = t->consistency == TIER_EPOCH;
		if (epoch) {
			pthread_rwlock_wrlock(&t->epoch_lock);
			rc = tier_epoch_commit_locked(t);
		}
		pthread_rwlock_wrlock(&tf->lock);
		if (!rc && !tf->mapped) {
			rc = tier_drain(t, tf);
			if (!rc)
				tier_cache_drop_file(t, tf);
		}
		if (!rc)
			__atomic_fetch_add(&tf->mapped, 1, __ATOMIC_ACQ_REL);
		pthread_rwlock_unlock(&tf->lock);
		if (epoch)
			pthread_rwlock_unlock(&t->epoch_lock);
	}
	if (!rc) {
		void *p = mmap(addr, len, prot, flags, of->kfd, offset);
		if (p == MAP_FAILED) {
			rc = -errno;
			if (tf)
				__atomic_fetch_sub(&tf->mapped, 1, __ATOMIC_ACQ_REL);
		} else {
			m->addr = p;
			m->len = len;
			m->shared = (flags & MAP_SHARED) != 0;
			m->tf = tf;
			if (tf)
				tf_open_ref(t, tf); /* the mapping keeps it */
			pthread_mutex_lock(&t->map_lock);
			m->next = t->maps;
			t->maps = m;
			pthread_mutex_unlock(&t->map_lock);
			*out = p;
			m = NULL;
		}
	}
	free(m);
	tfd_put(t, of);
	return TIER_END(rc);
}

/* Calls fn on the parts of [addr, addr + len) that are mappings; returns the
 * bytes covered. remove: the mappings covered are forgotten (a partial cover
 * keeps the rest). */
static ssize_t maps_in(struct tier *t, char *addr, size_t len, int remove,
		       void (*fn)(struct tier *t, struct tier_map *m, char *a, size_t n, int arg),
		       int arg)
{
	ssize_t covered = 0;
	pthread_mutex_lock(&t->map_lock);
	for (struct tier_map **pp = &t->maps; *pp;) {
		struct tier_map *m = *pp;
		char *a = FR_MAX(addr, m->addr), *b = FR_MIN(addr + len, m->addr + m->len);
		if (a >= b) {
			pp = &m->next;
			continue;
		}
		covered += b - a;
		if (fn)
			fn(t, m, a, (size_t)(b - a), arg);
		if (remove && a == m->addr && b == m->addr + m->len) {
			*pp = m->next;
			if (m->tf) {
				__atomic_fetch_sub(&m->tf->mapped, 1, __ATOMIC_ACQ_REL);
				tf_open_put(t, m->tf);
			}
			free(m);
			continue;
		}
		if (remove && a == m->addr) { /* the front goes */
			m->len -= (size_t)(b - a);
			m->addr = b;
		} else if (remove && b == m->addr + m->len) {
			m->len -= (size_t)(b - a);
		}
		pp = &m->next;
	}
	pthread_mutex_unlock(&t->map_lock);
	return covered;
}

static void sync_part(struct tier *t, struct tier_map *m, char *a, size_t n, int flags)
{
	(void)t;
	if (!m->shared)
		return;
	char *pa = (char *)FR_ALIGN_DOWN((uintptr_t)a, (uintptr_t)4096);
	msync(pa, n + (size_t)(a - pa), flags);
}

static void end_part(struct tier *t, struct tier_map *m, char *a, size_t n, int arg)
{
	(void)arg;
	sync_part(t, m, a, n, MS_SYNC);
	/* An inaccessible reservation until the caller unmaps (ferrite.h). */
	mmap(a, n, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE, -1, 0);
}

ssize_t tier_munmap(ferrite_fs *fs, void *addr, size_t len)
{
	struct tier *t = TIER(fs);
	if (!t->maps)
		return 0;
	return maps_in(t, addr, len, 1, end_part, 0);
}

ssize_t tier_msync(ferrite_fs *fs, void *addr, size_t len, int flags)
{
	struct tier *t = TIER(fs);
	if (!t->maps)
		return 0;
	return maps_in(t, addr, len, 0, sync_part, (flags & MS_ASYNC) ? MS_ASYNC : MS_SYNC);
}

ssize_t tier_mprotect(ferrite_fs *fs, void *addr, size_t len, int prot)
{
	struct tier *t = TIER(fs);
	(void)prot; /* the kernel's mapping: mprotect(2) did it all */
	if (!t->maps)
		return 0;
	return maps_in(t, addr, len, 0, NULL, 0);
}

void tier_maps_end(struct tier *t)
{
	while (t->maps)
		maps_in(t, t->maps->addr, t->maps->len, 1, end_part, 0);
}
