/*
 * backend_raw.c -- the physical limit: a persisted memcpy into a pre-mapped pool file.
 *
 * The pool is a file of exactly --file-size bytes in the directory of ferrite's pool
 * (by default /dev/shm/ferrite: the same tmpfs, so the same page size), mapped
 * MAP_SHARED and pre-faulted (every page allocated and written once before any
 * timing), registered with libpmem2 through pmem2_map_from_existing() at cache-line
 * granularity. Writes are pmem2's memcpy with non-temporal stores and no drain,
 * followed by one drain (sfence) per call -- the cheapest way to make a call's data
 * durable, and what a PM file system's data path can at best do. Reads are a plain
 * memcpy out. There is no name space, no allocation, no index and no size update:
 * anything ferrite costs beyond this column is file-system overhead.
 *
 * The "file" is the whole pool: open(O_TRUNC) and unlink() only reset its logical
 * size; name-space operations return -ENOTSUP (metadata workloads skip this column).
 */
#ifndef _GNU_SOURCE /* the top-level CMakeLists.txt defines it */
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <libpmem2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bench.h"

#define RAW_FD 3 /* the single "descriptor" handed out */

struct raw_ctx {
	int fd;
	char *base;
	size_t cap;
	size_t size; /* logical size of the file */
	off_t pos;   /* offset used by write() */
	char path[4096];
	struct pmem2_source *src;
	struct pmem2_map *map;
	pmem2_memcpy_fn memcpy_fn;
	pmem2_drain_fn drain_fn;
};

static int raw_open(void *ctx, const char *path, int flags, mode_t mode)
{
	struct raw_ctx *r = ctx;

	(void)path;
	(void)mode;
	if (flags & O_TRUNC)
		r->size = 0;
	r->pos = 0;
	return RAW_FD;
}

static int raw_close(void *ctx, int fd)
{
	(void)ctx;
	return fd == RAW_FD ? 0 : -EBADF;
}

static ssize_t raw_pwrite(void *ctx, int fd, const void *buf, size_t len, off_t off)
{
	struct raw_ctx *r = ctx;

	if (fd != RAW_FD)
		return -EBADF;
	if (off < 0 || (size_t)off > r->cap || len > r->cap - (size_t)off)
		return -ENOSPC;
	r->memcpy_fn(r->base + off, buf, len, PMEM2_F_MEM_NONTEMPORAL | PMEM2_F_MEM_NODRAIN);
	r->drain_fn();
	if ((size_t)off + len > r->size)
		r->size = (size_t)off + len;
	return (ssize_t)len;
}

static ssize_t raw_write(void *ctx, int fd, const void *buf, size_t len)
{
	struct raw_ctx *r = ctx;
	ssize_t n = raw_pwrite(ctx, fd, buf, len, r->pos);

	if (n > 0)
		r->pos += n;
	return n;
}

static ssize_t raw_pread(void *ctx, int fd, void *buf, size_t len, off_t off)
{
	struct raw_ctx *r = ctx;

	if (fd != RAW_FD)
		return -EBADF;
	if (off < 0)
		return -EINVAL;
	if ((size_t)off >= r->size)
		return 0;
	if (len > r->size - (size_t)off)
		len = r->size - (size_t)off;
	memcpy(buf, r->base + off, len);
	return (ssize_t)len;
}

static int raw_fsync(void *ctx, int fd)
{
	(void)ctx;
	return fd == RAW_FD ? 0 : -EBADF;
}

static int raw_unlink(void *ctx, const char *path)
{
	struct raw_ctx *r = ctx;

	(void)path;
	r->size = 0;
	return 0;
}

static int raw_stat(void *ctx, const char *path, struct stat *st)
{
	(void)ctx;
	(void)path;
	(void)st;
	return -ENOTSUP;
}

static int raw_rename(void *ctx, const char *from, const char *to)
{
	(void)ctx;
	(void)from;
	(void)to;
	return -ENOTSUP;
}

static int raw_mkdir(void *ctx, const char *path, mode_t mode)
{
	(void)ctx;
	(void)path;
	(void)mode;
	return -ENOTSUP;
}

static int raw_rmdir(void *ctx, const char *path)
{
	(void)ctx;
	(void)path;
	return -ENOTSUP;
}

/* kB of the mapping at ADDR that is mapped by 2 MiB entries (/proc/self/smaps). */
static long pmd_mapped_kib(const void *addr)
{
	char line[512];
	long kib = -1;
	int inside = 0;
	FILE *f = fopen("/proc/self/smaps", "re");

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f)) {
		unsigned long lo, hi;

		if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2) { /* a mapping's header line */
			if (inside)
				break;
			inside = (unsigned long)addr >= lo && (unsigned long)addr < hi;
			continue;
		}
		if (inside && (strncmp(line, "ShmemPmdMapped:", 15) == 0 ||
			       strncmp(line, "FilePmdMapped:", 14) == 0))
			kib = (kib < 0 ? 0 : kib) + strtol(strchr(line, ':') + 1, NULL, 10);
	}
	fclose(f);
	return kib;
}

static void raw_release(struct raw_ctx *r)
{
	if (r->map)
		pmem2_map_delete(&r->map); /* does not unmap a map_from_existing() mapping */
	if (r->src)
		pmem2_source_delete(&r->src);
	if (r->base)
		munmap(r->base, r->cap);
	if (r->fd >= 0) {
		close(r->fd);
		unlink(r->path);
	}
	free(r);
}

static void raw_fini(void *ctx)
{
	raw_release(ctx);
}

static int raw_fail(struct raw_ctx *r, char *why, size_t whylen, const char *what, int rc,
		    const char *msg)
{
	snprintf(why, whylen, "%s %s: %s", what, r->path, msg ? msg : strerror(-rc));
	raw_release(r);
	return rc < 0 ? rc : -EIO;
}

int raw_backend_init(struct bench_backend *b, const char *dir, uint64_t size, char *why,
		     size_t whylen)
{
	struct raw_ctx *r;
	void *p;
	int rc;
	char sz[32];
	long pmd;

	r = calloc(1, sizeof(*r));
	if (!r)
		return -ENOMEM;
	r->fd = -1;
	r->cap = size;
	snprintf(r->path, sizeof(r->path), "%s/ferrite-bench-raw.pool", dir);
	r->fd = open(r->path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (r->fd < 0)
		return raw_fail(r, why, whylen, "cannot create", -errno, NULL);
	/* Sized, not allocated: the first touch below allocates, after the madvise. */
	if (ftruncate(r->fd, (off_t)size) < 0)
		return raw_fail(r, why, whylen, "cannot size", -errno, NULL);
	p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, r->fd, 0);
	if (p == MAP_FAILED)
		return raw_fail(r, why, whylen, "cannot map", -errno, NULL);
	r->base = p;
	/* Huge pages if the directory's tmpfs offers them (not /dev/shm here): the
	 * same chance ferrite's pool gets. */
	madvise(r->base, size, MADV_HUGEPAGE);
	/* Pre-fault for writing (after the madvise, so huge pages can be used): the
	 * timed copies never take a page fault. */
	for (size_t off = 0; off < size; off += 4096)
		((volatile char *)r->base)[off] = 0;
	rc = pmem2_source_from_fd(&r->src, r->fd);
	if (rc)
		return raw_fail(r, why, whylen, "pmem2_source_from_fd", rc, pmem2_errormsg());
	rc = pmem2_map_from_existing(&r->map, r->src, r->base, size, PMEM2_GRANULARITY_CACHE_LINE);
	if (rc)
		return raw_fail(r, why, whylen, "pmem2_map_from_existing", rc, pmem2_errormsg());
	r->memcpy_fn = pmem2_get_memcpy_fn(r->map);
	r->drain_fn = pmem2_get_drain_fn(r->map);

	pmd = pmd_mapped_kib(r->base);

	memset(b, 0, sizeof(*b));
	b->name = "raw";
	b->caps = 0;
	b->ctx = r;
	snprintf(b->where, sizeof(b->where),
		 "%.100s, %s mapped and pre-faulted, %s; writes: pmem2 memcpy "
		 "(non-temporal, no drain) + drain per call; reads: memcpy",
		 r->path, fmt_size(size, sz, sizeof(sz)),
		 pmd > 0    ? "2 MiB pages"
		 : pmd == 0 ? "4 KiB pages"
			    : "page size unknown");
	b->open = raw_open;
	b->close = raw_close;
	b->write = raw_write;
	b->pread = raw_pread;
	b->pwrite = raw_pwrite;
	b->fsync = raw_fsync;
	b->stat = raw_stat;
	b->rename = raw_rename;
	b->unlink = raw_unlink;
	b->mkdir = raw_mkdir;
	b->rmdir = raw_rmdir;
	b->prepare_random_write = NULL;
	b->fini = raw_fini;
	return 0;
}
