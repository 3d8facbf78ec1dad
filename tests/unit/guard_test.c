/*
 * guard_test.c -- the tracing build of the persist layer (persist/pm.h):
 * with a guarding tracer installed, a store that bypasses the persist layer
 * faults, through the direct mapping and through the partition space alike;
 * stores made through it arrive at the tracer in pool offsets; and debug
 * builds abort when a public call leaves a store unflushed or unfenced.
 * Linked against ferrite_trace.
 */
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>

#include "ferrite.h"
#include "fs/fs.h"
#include "persist/pm.h"
#include "unit.h"

struct seen {
	const char *path;
	struct pm_pool *pool;
	uint64_t stores, last_off, last_len, flushes, fences;
	uint64_t watch_page; /* a store to this pool page sets hit */
	int hit;
};

static void t_mapped(void *ctx, struct pm_pool *pool)
{
	struct seen *s = ctx;
	if (!strcmp(pool->path, s->path))
		s->pool = pool;
}
static void t_unmapped(void *ctx, struct pm_pool *pool)
{
	struct seen *s = ctx;
	if (pool == s->pool)
		s->pool = NULL;
}
static void t_store(void *ctx, struct pm_pool *pool, uint64_t off, size_t len, uint64_t copy)
{
	struct seen *s = ctx;
	(void)copy;
	if (pool != s->pool)
		return;
	s->stores++;
	s->last_off = off;
	s->last_len = len;
	if (off / 4096 <= s->watch_page && (off + len - 1) / 4096 >= s->watch_page)
		s->hit = 1;
}
static void t_flush(void *ctx, struct pm_pool *pool, uint64_t off, size_t len)
{
	struct seen *s = ctx;
	(void)off, (void)len;
	s->flushes += pool == s->pool;
}
static void t_fence(void *ctx)
{
	((struct seen *)ctx)->fences++;
}

static struct seen seen;
static struct pm_trace_ops ops = {t_mapped, t_unmapped, t_store, t_flush, t_fence, &seen, 1};

/* A formatted, mounted pool with the guarding tracer installed. */
static ferrite_fs *guarded_mount(const char *tag)
{
	const char *path = unit_pool_path(tag);
	memset(&seen, 0, sizeof seen);
	seen.path = path;
	pm_trace_set(&ops);
	struct ferrite_mkfs_opts o = {.size = 32 << 20, .force = 1};
	ferrite_fs *fs = NULL;
	if (ferrite_mkfs(path, &o) < 0 || ferrite_mount(path, NULL, &fs) < 0)
		return NULL;
	return fs;
}

static void guarded_unmount(ferrite_fs *fs, const char *tag)
{
	ferrite_unmount(fs);
	pm_trace_set(NULL);
	unlink(unit_pool_path(tag));
}

/* Runs fn(arg) in a child; returns the signal that ended it, or 0. */
static int dies_of(void (*fn)(void *), void *arg)
{
	fflush(NULL);
	pid_t pid = fork();
	if (pid == 0) {
		signal(SIGSEGV, SIG_DFL);
		fn(arg);
		_exit(0);
	}
	int st;
	waitpid(pid, &st, 0);
	return WIFSIGNALED(st) ? WTERMSIG(st) : 0;
}

static void poke(void *addr)
{
	*(volatile char *)addr = 1;
}

static int case_direct_store_faults(void)
{
	ferrite_fs *fs = guarded_mount("guard-direct");
	CHECK(fs);
	CHECK(fs->m.sp.pool->guarded);
	char *meta = fs->m.sp.base + 3 * 4096;
	CHECK_EQ(dies_of(poke, meta), SIGSEGV);
	/* The same address written through the persist layer is fine, is seen
	 * through the read-only mapping, and reaches the tracer as an offset. */
	uint64_t old;
	memcpy(&old, meta, 8);
	pm_store8(meta, 0x1122334455667788ULL);
	CHECK_EQ(*(volatile uint64_t *)meta, 0x1122334455667788ULL);
	CHECK_EQ(seen.last_off, 3 * 4096);
	CHECK_EQ(seen.last_len, 8);
	pm_store8(meta, old);
	pm_persist(meta, 8);
	guarded_unmount(fs, "guard-direct");
	return 0;
}

static int case_partition_space_store_faults(void)
{
	ferrite_fs *fs = guarded_mount("guard-vspace");
	CHECK(fs);
	int fd = ferrite_open(fs, "/f", O_CREAT | O_RDWR, 0644);
	CHECK(fd >= 0);
	char buf[8192];
	memset(buf, 7, sizeof buf);
	uint64_t before = seen.stores;
	CHECK_EQ(ferrite_pwrite(fs, fd, buf, sizeof buf, 0), sizeof buf);
	CHECK(seen.stores > before);
	struct stat st;
	CHECK_EQ(ferrite_fstat(fs, fd, &st), 0);
	struct fr_inode *ip = ino_ptr(fs, (uint64_t)st.st_ino);
	char *data = vs_addr(&fs->m.sp, ip->i_part);
	CHECK_EQ(data[100], 7); /* readable through the file's mapping */
	CHECK_EQ(dies_of(poke, data + 100), SIGSEGV);
	/* A write's data reaches the tracer at the pool page the PPT names. */
	uint64_t phys = ppt_page(&fs->m.sp, ip->i_part + 4096);
	CHECK(phys != 0);
	seen.watch_page = phys / 4096;
	CHECK_EQ(ferrite_pwrite(fs, fd, buf, 100, 4096 + 50), 100);
	CHECK(seen.hit);
	CHECK(seen.fences > 0);
	CHECK_EQ(ferrite_close(fs, fd), 0);
	guarded_unmount(fs, "guard-vspace");
	return 0;
}

#ifndef NDEBUG
static void leave_unflushed(void *arg)
{
	ferrite_fs *fs = arg;
	pm_store8(fs->m.sp.base + 3 * 4096, 42); /* never flushed */
	pm_op_end_check("guard_test");
}

static void leave_unfenced(void *arg)
{
	ferrite_fs *fs = arg;
	pm_flush(fs->m.sp.base + 3 * 4096, 8); /* flushed, never fenced */
	pm_op_end_check("guard_test");
}
#endif

static int case_debug_check_aborts(void)
{
#ifdef NDEBUG
	printf("  (an optimised build: the check is compiled out)\n");
	return 0;
#else
	ferrite_fs *fs = guarded_mount("guard-debug");
	CHECK(fs);
	CHECK_EQ(dies_of(leave_unflushed, fs), SIGABRT);
	CHECK_EQ(dies_of(leave_unfenced, fs), SIGABRT);
	guarded_unmount(fs, "guard-debug");
	return 0;
#endif
}

static const struct unit_case cases[] = {
    {"direct_store_faults", case_direct_store_faults},
    {"partition_space_store_faults", case_partition_space_store_faults},
    {"debug_check_aborts", case_debug_check_aborts},
};

UNIT_MAIN(cases)
