/*
 * manyfiles_test.c -- proves that 10 000 files of random sizes (0 .. 3 MiB,
 * mostly small, seeded) in a dozen directories are stored exactly whatever
 * way they are written (one write, many small writes, back to front, writev,
 * O_APPEND, truncate-then-scattered pwrite, overwrite of stale data), read
 * back exactly before and after a remount, that deleting half of them leaves
 * the other half intact and listed exactly by readdir, gives the space back,
 * and that fsck is clean throughout.
 * Usage: manyfiles_test [-n FILES] [-s SEED]
 */
#include "../api/ft_test.h"

#define KiB	  1024ull
#define MiB	  (1024 * KiB)
#define NDIRS	  12
#define NPATTERNS 7

static ferrite_fs *fs;
static const char *pool;
static long nfiles = 10000;
static uint64_t seed = 1;

struct file {
	uint64_t size;
	uint64_t key;
	int pattern;
	int deleted;
};
static struct file *files;

static const char *dirs[NDIRS] = {"/a",	      "/b", "/c", "/c/c1", "/c/c2", "/d",
				  "/d/x/y/z", "/e", "/f", "/g",	   "/h",    "/i"};

static void path_of(char *buf, size_t n, long i)
{
	snprintf(buf, n, "%s/file-%06ld", dirs[i % NDIRS], i);
}

static uint64_t pick_size(uint64_t *rng, long i)
{
	static const uint64_t edge[] = {0,	 1,	      4095,	     4096,
					4097,	 2 * MiB - 1, 2 * MiB,	     2 * MiB + 1,
					3 * MiB, 64 * KiB,    256 * KiB + 1, 3 * MiB - 1};
	if (i < (long)(sizeof(edge) / sizeof(edge[0])))
		return edge[i];
	uint64_t u = ft_rand(rng) % 1000;
	if (u < 700)
		return ft_rand(rng) % (16 * KiB + 1);
	if (u < 900)
		return 16 * KiB + ft_rand(rng) % (240 * KiB);
	if (u < 980)
		return 256 * KiB + ft_rand(rng) % (768 * KiB);
	return 1 * MiB + ft_rand(rng) % (2 * MiB + 1);
}

static char wbuf[4 * MiB];

static size_t gcd(size_t a, size_t b)
{
	while (b) {
		size_t t = a % b;
		a = b;
		b = t;
	}
	return a;
}

static int write_file(long i, uint64_t *rng)
{
	char p[128];
	struct file *f = &files[i];
	path_of(p, sizeof(p), i);
	size_t size = (size_t)f->size;
	int flags = O_CREAT | O_EXCL | O_WRONLY | (f->pattern == 4 ? O_APPEND : 0);
	int fd = ferrite_open(fs, p, flags, 0644);
	FT_CHECK(fd >= 0, "create %s: %s", p, ft_errname(fd));
	ft_fill(wbuf, size, f->key, 0);
	switch (f->pattern) {
	case 0: /* one write */
		FT_EQ(ferrite_write(fs, fd, wbuf, size), (ssize_t)size);
		break;
	case 1: /* sequential writes of random sizes */
	case 4: /* appends of random sizes */
		for (size_t off = 0; off < size;) {
			size_t n = 1 + (size_t)(ft_rand(rng) % (64 * KiB));
			if (n > size - off)
				n = size - off;
			FT_EQ(ferrite_write(fs, fd, wbuf + off, n), (ssize_t)n);
			off += n;
		}
		break;
	case 2: /* back to front, unaligned chunks */
		for (size_t end = size; end > 0;) {
			size_t n = 1 + (size_t)(ft_rand(rng) % (37 * KiB));
			if (n > end)
				n = end;
			FT_EQ(ferrite_pwrite(fs, fd, wbuf + end - n, n, (off_t)(end - n)),
			      (ssize_t)n);
			end -= n;
		}
		break;
	case 3: { /* writev with up to 8 pieces per call */
		for (size_t off = 0; off < size;) {
			struct iovec iov[8];
			int cnt = 1 + (int)(ft_rand(rng) % 8);
			size_t tot = 0;
			for (int k = 0; k < cnt; k++) {
				size_t n = (size_t)(ft_rand(rng) % (20 * KiB));
				if (n > size - off - tot)
					n = size - off - tot;
				iov[k].iov_base = wbuf + off + tot;
				iov[k].iov_len = n;
				tot += n;
			}
			FT_EQ(ferrite_writev(fs, fd, iov, cnt), (ssize_t)tot);
			off += tot;
		}
		break;
	}
	case 5: { /* truncate to size, then pwrite 4 KiB blocks in a shuffled order */
		FT_OK(ferrite_ftruncate(fs, fd, (off_t)size));
		size_t nb = (size + 4095) / 4096;
		size_t step = nb > 1 ? 1 + (size_t)(ft_rand(rng) % (nb - 1)) : 1;
		while (gcd(step, nb) != 1) /* so that b visits every block once */
			step++;
		for (size_t k = 0, b = 0; k < nb; k++, b = (b + step) % nb) {
			size_t off = b * 4096, n = size - off < 4096 ? size - off : 4096;
			FT_EQ(ferrite_pwrite(fs, fd, wbuf + off, n, (off_t)off), (ssize_t)n);
		}
		break;
	}
	case 6: { /* stale data first, longer than the file, then the real data and a cut */
		static char junk[4 * MiB];
		size_t jl = size + 5000;
		ft_fill(junk, jl, f->key ^ 0xdeadbeef, 0);
		FT_EQ(ferrite_write(fs, fd, junk, jl), (ssize_t)jl);
		FT_EQ(ferrite_pwrite(fs, fd, wbuf, size, 0), (ssize_t)size);
		FT_OK(ferrite_ftruncate(fs, fd, (off_t)size));
		break;
	}
	}
	FT_OK(ferrite_close(fs, fd));
	return 0;
}

static int verify_file(long i, uint64_t *rng)
{
	static char rbuf[4 * MiB];
	char p[128];
	struct stat st;
	struct file *f = &files[i];
	path_of(p, sizeof(p), i);
	if (f->deleted) {
		FT_ERR(ferrite_lstat(fs, p, &st), ENOENT);
		return 0;
	}
	int fd = ferrite_open(fs, p, O_RDONLY, 0);
	FT_CHECK(fd >= 0, "open %s: %s", p, ft_errname(fd));
	FT_OK(ferrite_fstat(fs, fd, &st));
	FT_CHECK(st.st_size == (off_t)f->size, "%s (pattern %d): size %lld, expected %llu", p,
		 f->pattern, (long long)st.st_size, (unsigned long long)f->size);
	/* read in random-sized pieces */
	size_t off = 0;
	for (;;) {
		size_t n = 1 + (size_t)(ft_rand(rng) % (1 * MiB));
		ssize_t r = ferrite_read(fs, fd, rbuf + off, n);
		FT_CHECK(r >= 0, "read %s at %zu: %s", p, off, ft_errname(r));
		if (r == 0)
			break;
		off += (size_t)r;
		FT_CHECK(off <= f->size, "%s: read past the size", p);
	}
	FT_OK(ferrite_close(fs, fd));
	FT_CHECK(off == f->size, "%s: read %zu bytes, expected %llu", p, off,
		 (unsigned long long)f->size);
	long long bad = ft_verify(rbuf, off, f->key, 0);
	FT_CHECK(bad < 0, "%s (pattern %d, size %llu): wrong byte at offset %lld", p, f->pattern,
		 (unsigned long long)f->size, bad);
	return 0;
}

static int verify_all(const char *label)
{
	uint64_t rng = seed * 31 + 7;
	for (long i = 0; i < nfiles; i++)
		if (verify_file(i, &rng) != 0) {
			fprintf(stderr, "  (during: %s)\n", label);
			return -1;
		}
	printf("  verified: %s\n", label);
	fflush(stdout);
	return 0;
}

static int check_listing(void)
{
	/* each directory lists exactly its live files (and its subdirectories) */
	unsigned char *seen = calloc((size_t)nfiles, 1);
	for (int d = 0; d < NDIRS; d++) {
		ferrite_dir *dir;
		struct ferrite_dirent e;
		int r;
		FT_OK(ferrite_opendir(fs, dirs[d], &dir));
		while ((r = ferrite_readdir(dir, &e)) == 1) {
			if (strncmp(e.name, "file-", 5) != 0)
				continue;
			long i = atol(e.name + 5);
			FT_CHECK(i >= 0 && i < nfiles && i % NDIRS == d,
				 "%s lists unexpected \"%s\"", dirs[d], e.name);
			FT_CHECK(!files[i].deleted, "%s lists deleted \"%s\"", dirs[d], e.name);
			FT_CHECK(!seen[i], "%s lists \"%s\" twice", dirs[d], e.name);
			seen[i] = 1;
		}
		FT_EQ(r, 0);
		FT_OK(ferrite_closedir(dir));
	}
	for (long i = 0; i < nfiles; i++)
		FT_CHECK(seen[i] || files[i].deleted, "file-%06ld is missing from its directory",
			 i);
	free(seen);
	return 0;
}

static int remount(void)
{
	FT_UNMOUNT_CLEAN(&fs, pool);
	FT_OK(ferrite_mount(pool, NULL, &fs));
	return 0;
}

static int c_manyfiles(void)
{
	uint64_t rng = seed;
	uint64_t total = 0;
	files = calloc((size_t)nfiles, sizeof(*files));
	for (long i = 0; i < nfiles; i++) {
		files[i].size = pick_size(&rng, i);
		files[i].key = seed * 1000003u + (uint64_t)i;
		files[i].pattern = (int)(ft_rand(&rng) % NPATTERNS);
		total += files[i].size;
	}
	/* room for the data twice over plus metadata, in 2 MiB units */
	uint64_t psize = ((2 * total + 256 * MiB) + 2 * MiB - 1) / (2 * MiB) * (2 * MiB);
	printf("  %ld files, %llu bytes of data, %llu MiB pool, seed %llu\n", nfiles,
	       (unsigned long long)total, (unsigned long long)(psize / MiB),
	       (unsigned long long)seed);
	FT_OK(ft_pool_create(pool, psize, &fs));
	for (int d = 0; d < NDIRS; d++) {
		char p[64];
		snprintf(p, sizeof(p), "%s", dirs[d]);
		for (char *s = p + 1; (s = strchr(s, '/')) != NULL; s++) { /* parents */
			*s = 0;
			int rc = ferrite_mkdir(fs, p, 0755);
			FT_CHECK(rc == 0 || rc == -EEXIST, "mkdir %s: %s", p, ft_errname(rc));
			*s = '/';
		}
		int rc = ferrite_mkdir(fs, p, 0755);
		FT_CHECK(rc == 0 || rc == -EEXIST, "mkdir %s: %s", p, ft_errname(rc));
	}
	uint64_t free0 = ft_free_bytes(fs);
	rng = seed ^ 0x5555;
	for (long i = 0; i < nfiles; i++) {
		if (write_file(i, &rng) != 0) {
			char p[128];
			path_of(p, sizeof(p), i);
			fprintf(stderr, "  (while writing %s: pattern %d, size %llu)\n", p,
				files[i].pattern, (unsigned long long)files[i].size);
			return -1;
		}
	}
	uint64_t free1 = ft_free_bytes(fs);
	/* (the Linux reference shares its tmpfs with other processes: no space checks) */
	FT_CHECK(ft_is_oracle || free0 - free1 >= total,
		 "writing %llu bytes lowered free space by only %llu", (unsigned long long)total,
		 (unsigned long long)(free0 - free1));
	if (verify_all("after writing") != 0 || check_listing() != 0)
		return -1;
	if (remount() != 0 || verify_all("after remount") != 0 || check_listing() != 0)
		return -1;
	/* delete every other file */
	uint64_t freed = 0;
	for (long i = 1; i < nfiles; i += 2) {
		char p[128];
		path_of(p, sizeof(p), i);
		int rc = ferrite_unlink(fs, p);
		FT_CHECK(rc == 0, "unlink %s (pattern %d, size %llu): %s", p, files[i].pattern,
			 (unsigned long long)files[i].size, ft_errname(rc));
		files[i].deleted = 1;
		freed += files[i].size;
	}
	uint64_t free2 = ft_free_bytes(fs);
	FT_CHECK(ft_is_oracle || free2 >= free1 + freed,
		 "deleting %llu bytes raised free space by only %lld", (unsigned long long)freed,
		 (long long)(free2 - free1));
	if (verify_all("after deleting half") != 0 || check_listing() != 0)
		return -1;
	if (remount() != 0 || verify_all("after deleting half and remount") != 0 ||
	    check_listing() != 0)
		return -1;
	FT_UNMOUNT_CLEAN(&fs, pool);
	free(files);
	return 0;
}

static const struct ft_case cases[] = {
    {"manyfiles", c_manyfiles, 0},
};

int main(int argc, char **argv)
{
	int opt;
	while ((opt = getopt(argc, argv, "n:s:")) != -1) {
		if (opt == 'n')
			nfiles = atol(optarg);
		else if (opt == 's')
			seed = strtoull(optarg, NULL, 10);
		else {
			fprintf(stderr, "usage: %s [-n FILES] [-s SEED]\n", argv[0]);
			return 2;
		}
	}
	if (nfiles < 1) {
		fprintf(stderr, "FILES must be positive\n");
		return 2;
	}
	pool = ft_pool_path("manyfiles", "main");
	char *args[] = {argv[0], NULL};
	return ft_run(cases, 1, 1, args, NULL, NULL);
}
