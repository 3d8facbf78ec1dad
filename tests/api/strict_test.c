/*
 * strict_test.c -- strict mode through the public API: the mode is chosen at
 * mkfs and per mount; writes keep POSIX results (sizes, holes, overwrite +
 * extend, unaligned edges, vectors, writes spanning many 2 MiB windows)
 * whichever way they are committed (redo copy or write-and-swap, forced with
 * $FERRITE_STRICT_REDO_MAX); mapped files keep their pages; a full pool gives
 * ENOSPC and changes nothing; fsck stays clean, no space leaks and data
 * survives a remount. Every result is compared with an in-memory model of
 * the file. The crash windows of the mechanism are in
 * tests/unit/strict_crash_test.c.
 */
#include "ft_test.h"

#include <sys/mman.h>

#define MIB (1024ULL * 1024)

/* A file and the bytes it should hold. */
struct mfile {
	ferrite_fs *fs;
	int fd;
	unsigned char *want;
	uint64_t cap, size;
};

static int mf_open(struct mfile *f, ferrite_fs *fs, const char *path, uint64_t cap)
{
	f->fs = fs;
	f->fd = FT_OK(ferrite_open(fs, path, O_CREAT | O_RDWR | O_TRUNC, 0644));
	f->want = calloc(1, cap);
	FT_CHECK(f->want, "out of memory");
	f->cap = cap;
	f->size = 0;
	return 0;
}

static void mf_close(struct mfile *f)
{
	if (f->fs)
		ferrite_close(f->fs, f->fd);
	free(f->want);
	f->want = NULL;
}

/* pwrite of len bytes of pattern key at off, in nvec pieces. */
static int mf_write(struct mfile *f, uint64_t off, uint64_t len, uint64_t key, int nvec)
{
	unsigned char *buf = malloc(len ? len : 1);
	FT_CHECK(buf, "out of memory");
	ft_fill(buf, len, key, off);
	struct iovec v[8];
	if (nvec < 1 || nvec > 8)
		nvec = 1;
	uint64_t at = 0;
	for (int i = 0; i < nvec; i++) {
		uint64_t n = i == nvec - 1 ? len - at : (len / nvec) + (uint64_t)i * 3 % 7;
		if (n > len - at)
			n = len - at;
		v[i].iov_base = buf + at;
		v[i].iov_len = n;
		at += n;
	}
	ssize_t r = ferrite_pwritev(f->fs, f->fd, v, nvec, (off_t)off);
	if (r != (ssize_t)len) {
		free(buf);
		FT_CHECK(0, "pwritev(%llu, %llu) returned %s", (unsigned long long)off,
			 (unsigned long long)len, ft_errname(r));
	}
	memcpy(f->want + off, buf, len);
	if (off + len > f->size)
		f->size = off + len;
	free(buf);
	return 0;
}

static int mf_check(struct mfile *f)
{
	struct stat st;
	FT_OK(ferrite_fstat(f->fs, f->fd, &st));
	FT_EQ(st.st_size, f->size);
	unsigned char *got = malloc(f->size ? f->size : 1);
	FT_CHECK(got, "out of memory");
	ssize_t r = ferrite_pread(f->fs, f->fd, got, f->size, 0);
	if (r != (ssize_t)f->size) {
		free(got);
		FT_CHECK(0, "pread returned %s", ft_errname(r));
	}
	for (uint64_t i = 0; i < f->size; i++)
		if (got[i] != f->want[i]) {
			unsigned g = got[i];
			free(got);
			FT_CHECK(0, "byte %llu: got %u, want %u", (unsigned long long)i, g,
				 f->want[i]);
		}
	free(got);
	return 0;
}

static int mkpool(const char *tag, uint64_t size, int mode, ferrite_fs **fs, const char **pathp)
{
	const char *p = ft_pool_path("strict", tag);
	struct ferrite_mkfs_opts o = {.size = size, .mode = mode, .force = 1};
	FT_OK(ferrite_mkfs(p, &o));
	FT_OK(ferrite_mount(p, NULL, fs));
	*pathp = p;
	return 0;
}

static int mode_of(ferrite_fs *fs, int *pool_mode)
{
	struct ferrite_info in;
	if (ferrite_get_info(fs, &in))
		return -1;
	if (pool_mode)
		*pool_mode = in.mode;
	return in.mount_mode;
}

/* ---- cases ---------------------------------------------------------------- */

static int modes(void)
{
	ferrite_fs *fs;
	const char *p;
	int pm = -1;
	FT_RUN(mkpool("modes", 32 * MIB, FERRITE_MODE_STRICT, &fs, &p));
	FT_EQ(mode_of(fs, &pm), FERRITE_MODE_STRICT);
	FT_EQ(pm, FERRITE_MODE_STRICT);
	FT_OK(ferrite_unmount(fs));
	struct ferrite_mount_opts mo = {.mode = FERRITE_MOUNT_SYNC};
	FT_OK(ferrite_mount(p, &mo, &fs));
	FT_EQ(mode_of(fs, &pm), FERRITE_MODE_SYNC);
	FT_EQ(pm, FERRITE_MODE_STRICT); /* the override does not change the pool */
	FT_OK(ferrite_unmount(fs));
	mo.mode = 7;
	FT_ERR(ferrite_mount(p, &mo, &fs), EINVAL);
	FT_ERRMSG_ONE_LINE();
	struct ferrite_mkfs_opts ko = {.size = 32 * MIB, .mode = 5, .force = 1};
	FT_ERR(ferrite_mkfs(p, &ko), EINVAL);
	FT_ERRMSG_ONE_LINE();
	ko.mode = FERRITE_MODE_SYNC;
	FT_OK(ferrite_mkfs(p, &ko));
	mo.mode = FERRITE_MOUNT_STRICT;
	FT_OK(ferrite_mount(p, &mo, &fs));
	FT_EQ(mode_of(fs, &pm), FERRITE_MODE_STRICT);
	FT_EQ(pm, FERRITE_MODE_SYNC);
	FT_UNMOUNT_CLEAN(&fs, p);
	return 0;
}

/* Small overwrites (redo copy), unaligned, in a small and in a large file,
 * with overwrite + extend and vectors. */
static int small_overwrites(void)
{
	ferrite_fs *fs;
	const char *p;
	FT_RUN(mkpool("small", 64 * MIB, FERRITE_MODE_STRICT, &fs, &p));
	struct mfile s = {0}, l = {0};
	FT_RUN(mf_open(&s, fs, "/small", 1 * MIB));
	FT_RUN(mf_write(&s, 0, 10000, 1, 1));
	FT_RUN(mf_write(&s, 17, 100, 2, 1));
	FT_RUN(mf_write(&s, 4090, 12, 3, 2));	  /* across a page edge */
	FT_RUN(mf_write(&s, 9000, 3000, 4, 3));	  /* overwrite + extend */
	FT_RUN(mf_write(&s, 11999, 60000, 5, 4)); /* + extend into a larger partition */
	FT_RUN(mf_check(&s));
	FT_RUN(mf_open(&l, fs, "/large", 8 * MIB));
	FT_RUN(mf_write(&l, 0, 5 * MIB + 5, 6, 1));
	uint64_t seed = 7;
	for (int i = 0; i < 300; i++) {
		uint64_t off = ft_rand(&seed) % (5 * MIB), len = 1 + ft_rand(&seed) % 9000;
		FT_RUN(mf_write(&l, off, len, 100 + (uint64_t)i, 1 + i % 3));
	}
	FT_RUN(mf_write(&l, 5 * MIB - 3, 20, 9, 1)); /* extends by a few bytes */
	FT_RUN(mf_check(&l));
	FT_RUN(mf_check(&s));
	mf_close(&s);
	mf_close(&l);
	FT_UNMOUNT_CLEAN(&fs, p);
	return 0;
}

/* The same workload with every overwrite swapped (redo copy off): exercises
 * page swaps in small partitions, one-unit windows turning into page tables
 * and back, and whole-window rewrites. */
static int random_writes(uint64_t redo_max, const char *tag)
{
	char v[32];
	snprintf(v, sizeof(v), "%llu", (unsigned long long)redo_max);
	setenv("FERRITE_STRICT_REDO_MAX", v, 1);
	ferrite_fs *fs;
	const char *p;
	int rc = mkpool(tag, 128 * MIB, FERRITE_MODE_STRICT, &fs, &p);
	unsetenv("FERRITE_STRICT_REDO_MAX");
	FT_RUN(rc);
	struct mfile s = {0}, l = {0};
	FT_RUN(mf_open(&s, fs, "/s", 512 * 1024));
	FT_RUN(mf_open(&l, fs, "/l", 16 * MIB));
	FT_OK(ferrite_mkdir(fs, "/d", 0755)); /* the inode block exists: space now is */
	uint64_t free0 = ft_free_bytes(fs);   /* what the two files give back at the end */
	FT_RUN(mf_write(&s, 0, 200000, 1, 1));
	FT_RUN(mf_write(&l, 0, 9 * MIB + 100, 2, 1));
	uint64_t seed = 11;
	for (int i = 0; i < 200; i++) {
		uint64_t off = ft_rand(&seed) % 200000, len = 1 + ft_rand(&seed) % 70000;
		if (off + len > 256 * 1024)
			len = 256 * 1024 - off;
		FT_RUN(mf_write(&s, off, len, 10 + (uint64_t)i, 1 + i % 2));
		int big = i % 5 == 0;
		off = ft_rand(&seed) % (9 * MIB);
		len = 1 + ft_rand(&seed) % (big ? 3 * MIB : 200000);
		if (i % 17 == 0) { /* page aligned, so whole pages are swapped */
			off &= ~4095ULL;
			len = (len + 4095) & ~4095ULL;
		}
		FT_RUN(mf_write(&l, off, len, 1000 + (uint64_t)i, 1 + i % 3));
		if (i % 50 == 0) {
			FT_RUN(mf_check(&s));
			FT_RUN(mf_check(&l));
		}
	}
	/* sequential rewrites in 1 MiB pieces: windows become one unit again */
	for (uint64_t off = 0; off < 8 * MIB; off += MIB)
		FT_RUN(mf_write(&l, off, MIB, 77, 1));
	FT_RUN(mf_check(&s));
	FT_RUN(mf_check(&l));
	struct mfile q = {0}; /* a file of whole units, rewritten in halves */
	FT_RUN(mf_open(&q, fs, "/q", 4 * MIB));
	FT_RUN(mf_write(&q, 0, 4 * MIB, 5, 1));
	for (uint64_t off = 0; off < 4 * MIB; off += MIB)
		FT_RUN(mf_write(&q, off, MIB, 6, 1));
	FT_RUN(mf_check(&q));
	mf_close(&q);
	FT_OK(ferrite_unlink(fs, "/q"));
	ferrite_close(fs, s.fd);
	ferrite_close(fs, l.fd);
	s.fs = l.fs = NULL;
	FT_OK(ferrite_unmount(fs));
	FT_EQ(ferrite_fsck(p, 0, NULL, NULL, NULL, NULL), FERRITE_FSCK_CLEAN);
	FT_OK(ferrite_mount(p, NULL, &fs)); /* remount: the data persisted */
	s.fs = l.fs = fs;
	s.fd = FT_OK(ferrite_open(fs, "/s", O_RDWR, 0));
	l.fd = FT_OK(ferrite_open(fs, "/l", O_RDWR, 0));
	FT_RUN(mf_check(&s));
	FT_RUN(mf_check(&l));
	mf_close(&s);
	mf_close(&l);
	FT_OK(ferrite_unlink(fs, "/s"));
	FT_OK(ferrite_unlink(fs, "/l"));
	FT_EQ(ft_free_bytes(fs), free0); /* nothing leaked */
	FT_UNMOUNT_CLEAN(&fs, p);
	return 0;
}

static int swapped_writes(void)
{
	return random_writes(0, "swap");
}

static int default_cutover(void)
{
	return random_writes(16384, "mixed");
}

/* Holes of a large file: a write across holes and data, then sizes. */
static int holes(void)
{
	ferrite_fs *fs;
	const char *p;
	FT_RUN(mkpool("holes", 64 * MIB, FERRITE_MODE_STRICT, &fs, &p));
	struct mfile f = {0};
	FT_RUN(mf_open(&f, fs, "/h", 16 * MIB));
	FT_OK(ferrite_ftruncate(fs, f.fd, 13 * MIB));
	f.size = 13 * MIB;
	FT_RUN(mf_write(&f, 100, 5000, 1, 1));
	FT_RUN(mf_write(&f, 6 * MIB + 3, 3 * MIB, 2, 1));
	FT_RUN(mf_write(&f, 1 * MIB + 77, 7 * MIB, 3, 2)); /* hole, data, hole */
	FT_RUN(mf_write(&f, 12 * MIB + 5, 2 * MIB, 4, 1)); /* hole + extend */
	FT_RUN(mf_check(&f));
	/* data runs to 9 MiB + 3 (the second write): the hole starts at the
	 * next page (format 4 backs large files page by page) */
	FT_EQ(ferrite_lseek(fs, f.fd, 8 * MIB + 4096, SEEK_HOLE), 9 * MIB + 4096);
	mf_close(&f);
	FT_UNMOUNT_CLEAN(&fs, p);
	return 0;
}

static int mf_punch(struct mfile *f, uint64_t off, uint64_t len)
{
	FT_OK(ferrite_fallocate(f->fs, f->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
				(off_t)off, (off_t)len));
	if (off < f->size)
		memset(f->want + off, 0, (off + len < f->size ? off + len : f->size) - off);
	return 0;
}

/* Punches in one entry (redo copy and swap of the edges, whole windows
 * released) and the step-by-step fallback: the bytes, the holes and the
 * blocks come out as in sync mode. */
static int punch(void)
{
	ferrite_fs *fs;
	const char *p;
	struct stat st;
	FT_RUN(mkpool("punch", 256 * MIB, FERRITE_MODE_STRICT, &fs, &p));
	struct mfile s = {0}, f = {0};
	FT_RUN(mf_open(&s, fs, "/small", 256 * 1024));
	FT_RUN(mf_write(&s, 0, 200 * 1024, 1, 1));
	FT_RUN(mf_punch(&s, 100, 3000));		/* redo copy */
	FT_RUN(mf_punch(&s, 10 * 1024 + 7, 90 * 1024)); /* swapped pages */
	FT_RUN(mf_punch(&s, 190 * 1024, 1 * MIB));	/* past EOF: clipped */
	FT_RUN(mf_check(&s));
	FT_OK(ferrite_fstat(fs, s.fd, &st));
	FT_EQ(st.st_blocks, 200 * 1024 / 512); /* small files keep their pages */

	FT_RUN(mf_open(&f, fs, "/large", 120 * MIB));
	FT_RUN(mf_write(&f, 0, 120 * MIB, 2, 1));
	FT_RUN(mf_punch(&f, 1 * MIB + 100, 3 * MIB + 10 * 1024)); /* edges + a window */
	FT_RUN(mf_punch(&f, 9 * MIB, 12 * 1024));		  /* inside a window */
	FT_RUN(mf_punch(&f, 10 * MIB + 1, 100 * MIB));		  /* 49 whole windows */
	FT_RUN(mf_check(&f));
	FT_EQ(ferrite_lseek(fs, f.fd, 0, SEEK_HOLE), 2 * MIB);
	FT_EQ(ferrite_lseek(fs, f.fd, 2 * MIB, SEEK_DATA), 4 * MIB);
	FT_EQ(ferrite_lseek(fs, f.fd, 11 * MIB, SEEK_DATA), 11 * MIB); /* a zeroed edge */
	FT_EQ(ferrite_lseek(fs, f.fd, 12 * MIB, SEEK_DATA), 110 * MIB);
	FT_OK(ferrite_fstat(fs, f.fd, &st));
	FT_EQ(st.st_blocks, (120 - 2 - 98) * MIB / 512);
	mf_close(&s);
	mf_close(&f);
	FT_UNMOUNT_CLEAN(&fs, p);
	/* What was punched stays punched. */
	FT_OK(ferrite_mount(p, NULL, &fs));
	int fd = FT_OK(ferrite_open(fs, "/large", O_RDONLY, 0));
	char b[16];
	FT_EQ(ferrite_pread(fs, fd, b, sizeof b, 50 * MIB), (ssize_t)sizeof b);
	for (size_t i = 0; i < sizeof b; i++)
		FT_EQ(b[i], 0);
	ferrite_close(fs, fd);
	FT_UNMOUNT_CLEAN(&fs, p);
	return 0;
}

/* A write larger than the log could ever carry, across many windows. */
static int long_write(void)
{
	ferrite_fs *fs;
	const char *p;
	FT_RUN(mkpool("long", 256 * MIB, FERRITE_MODE_STRICT, &fs, &p));
	struct mfile f = {0};
	FT_RUN(mf_open(&f, fs, "/big", 80 * MIB));
	FT_RUN(mf_write(&f, 0, 60 * MIB, 1, 1));
	FT_RUN(mf_write(&f, 3 * MIB + 5, 70 * MIB, 2, 3)); /* overwrite + extend */
	FT_RUN(mf_check(&f));
	mf_close(&f);
	FT_UNMOUNT_CLEAN(&fs, p);
	return 0;
}

/* Writes into a mapped file: the mapping keeps seeing the file. */
static int mapped(void)
{
	ferrite_fs *fs;
	const char *p;
	FT_RUN(mkpool("mapped", 64 * MIB, FERRITE_MODE_STRICT, &fs, &p));
	struct mfile f = {0};
	FT_RUN(mf_open(&f, fs, "/m", 8 * MIB));
	FT_RUN(mf_write(&f, 0, 4 * MIB, 1, 1));
	void *m;
	FT_OK(ferrite_mmap(fs, f.fd, NULL, 4 * MIB, PROT_READ | PROT_WRITE, MAP_SHARED, 0, &m));
	FT_RUN(mf_write(&f, 5000, 3000, 2, 1));	     /* through the log: atomic */
	FT_RUN(mf_write(&f, 100000, 3 * MIB, 3, 1)); /* in place (documented) */
	FT_RUN(mf_write(&f, 4 * MIB - 10, 5000, 4, 1));
	FT_RUN(mf_check(&f));
	FT_CHECK(memcmp(m, f.want, 4 * MIB) == 0, "the mapping does not show the file");
	memset((char *)m + 8192, 0x5a, 100); /* and stores reach the file */
	memset(f.want + 8192, 0x5a, 100);
	FT_OK(ferrite_msync(fs, m, 4 * MIB, MS_SYNC));
	FT_RUN(mf_check(&f));
	FT_OK(ferrite_munmap(fs, m, 4 * MIB));
	FT_RUN(mf_write(&f, 100000, 3 * MIB, 5, 1)); /* unmapped again: swapped */
	FT_RUN(mf_check(&f));
	mf_close(&f);
	FT_UNMOUNT_CLEAN(&fs, p);
	return 0;
}

/* A full pool: a large overwrite fails with ENOSPC and changes nothing. */
static int enospc(void)
{
	ferrite_fs *fs;
	const char *p;
	FT_RUN(mkpool("enospc", 32 * MIB, FERRITE_MODE_STRICT, &fs, &p));
	struct mfile f = {0};
	FT_RUN(mf_open(&f, fs, "/f", 16 * MIB));
	FT_RUN(mf_write(&f, 0, 6 * MIB, 1, 1));
	int fill = FT_OK(ferrite_open(fs, "/fill", O_CREAT | O_RDWR, 0644));
	char *buf = calloc(1, MIB);
	FT_CHECK(buf, "out of memory");
	for (;;) { /* fill the pool up */
		ssize_t r = ferrite_write(fs, fill, buf, MIB);
		if (r < (ssize_t)MIB)
			break;
	}
	for (;;) {
		ssize_t r = ferrite_write(fs, fill, buf, 4096);
		if (r < 4096)
			break;
	}
	free(buf);
	uint64_t free0 = ft_free_bytes(fs);
	unsigned char *nb = malloc(5 * MIB);
	FT_CHECK(nb, "out of memory");
	ft_fill(nb, 5 * MIB, 9, 0);
	FT_ERR(ferrite_pwrite(fs, f.fd, nb, 5 * MIB, 1000), ENOSPC);
	FT_ERRMSG_ONE_LINE();
	free(nb);
	FT_EQ(ft_free_bytes(fs), free0);
	FT_RUN(mf_check(&f));
	FT_RUN(mf_write(&f, 77, 3000, 3, 1)); /* the log still carries small ones */
	FT_RUN(mf_check(&f));
	FT_OK(ferrite_close(fs, fill));
	mf_close(&f);
	FT_UNMOUNT_CLEAN(&fs, p);
	return 0;
}

/* The sync override of a strict pool and vice versa write the same bytes. */
static int override(void)
{
	ferrite_fs *fs;
	const char *p;
	FT_RUN(mkpool("override", 64 * MIB, FERRITE_MODE_SYNC, &fs, &p));
	FT_OK(ferrite_unmount(fs));
	struct ferrite_mount_opts mo = {.mode = FERRITE_MOUNT_STRICT};
	FT_OK(ferrite_mount(p, &mo, &fs));
	struct mfile f = {0};
	FT_RUN(mf_open(&f, fs, "/o", 8 * MIB));
	FT_RUN(mf_write(&f, 0, 3 * MIB, 1, 1));
	FT_RUN(mf_write(&f, 1234, 3 * MIB, 2, 1));
	ferrite_close(fs, f.fd);
	f.fs = NULL;
	FT_OK(ferrite_unmount(fs));
	FT_OK(ferrite_mount(p, NULL, &fs)); /* the pool's own mode: sync */
	FT_EQ(mode_of(fs, NULL), FERRITE_MODE_SYNC);
	f.fs = fs;
	f.fd = FT_OK(ferrite_open(fs, "/o", O_RDWR, 0));
	FT_RUN(mf_check(&f));
	FT_RUN(mf_write(&f, 99, 2 * MIB, 3, 1));
	FT_RUN(mf_check(&f));
	mf_close(&f);
	FT_UNMOUNT_CLEAN(&fs, p);
	return 0;
}

static const struct ft_case cases[] = {
    {"modes", modes, 0},
    {"small_overwrites", small_overwrites, 0},
    {"swapped_writes", swapped_writes, 0},
    {"default_cutover", default_cutover, 0},
    {"holes", holes, 0},
    {"long_write", long_write, 0},
    {"punch", punch, 0},
    {"mapped", mapped, 0},
    {"enospc", enospc, 0},
    {"override", override, 0},
};

int main(int argc, char **argv)
{
	return ft_run(cases, sizeof(cases) / sizeof(cases[0]), argc, argv, NULL, NULL);
}
