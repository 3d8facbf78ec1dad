/*
 * sparse_test.c -- proves that a file larger than 4 GiB lives in a 128 MiB
 * pool as long as it is sparse: data written at the start, across the 2 GiB
 * and 4 GiB boundaries, deep inside and at the very end reads back (also after
 * a remount); every hole reads zeros; the pool's used space grows only by
 * about the data written; SEEK_DATA / SEEK_HOLE find each data region (holes
 * may be reported at up to 2 MiB granularity, never inside written data);
 * truncating down cuts the data exactly, re-extending reads zeros, and the
 * space comes back; fsck is clean at the end.
 * Usage: sparse_test
 */
#include "../api/ft_test.h"

#define KiB  1024LL
#define MiB  (1024 * KiB)
#define GiB  (1024 * MiB)
#define GRAN (2 * MiB) /* coarsest hole granularity allowed */

static ferrite_fs *fs;
static const char *pool;

struct region {
	off_t off, len;
	uint64_t key;
};

/* sorted, far apart (> 2 * GRAN) */
static const struct region regions[] = {
    {0, 4096, 1},
    {2 * GiB - 10, 20, 2}, /* across the signed 32-bit boundary */
    {3 * GiB + 1 * MiB + 7, 1 * MiB, 3},
    {4 * GiB - 4196, 8392, 4}, /* across 4 GiB */
    {5 * GiB + 3 * MiB, 2 * MiB + 1, 5},
    {6 * GiB + 12345 - 5000, 5000, 6}, /* the end of the file */
};
#define NREG  ((int)(sizeof(regions) / sizeof(regions[0])))
#define FSIZE (6 * GiB + 12345)

static off_t rdown(off_t x)
{
	return x / GRAN * GRAN;
}

static off_t rup(off_t x)
{
	return (x + GRAN - 1) / GRAN * GRAN;
}

static uint64_t used_bytes(void)
{
	struct statvfs sv;
	if (ferrite_statvfs(fs, &sv) != 0)
		return UINT64_MAX;
	return (uint64_t)(sv.f_blocks - sv.f_bfree) * sv.f_frsize;
}

/* expected content of [off, off+len) when the file is cut at size `cut` */
static void expect(char *buf, off_t off, size_t len, off_t cut)
{
	memset(buf, 0, len);
	for (int r = 0; r < NREG; r++) {
		off_t a = regions[r].off > off ? regions[r].off : off;
		off_t b = regions[r].off + regions[r].len;
		if (b > cut)
			b = cut;
		if (b > off + (off_t)len)
			b = off + (off_t)len;
		if (a < b)
			ft_fill(buf + (a - off), (size_t)(b - a), regions[r].key, (uint64_t)a);
	}
}

static int check_range(int fd, off_t off, size_t len, off_t cut, off_t size)
{
	static char got[4 * MiB], want[4 * MiB];
	if (off >= size)
		return 0;
	if (off + (off_t)len > size)
		len = (size_t)(size - off);
	ssize_t r = ferrite_pread(fs, fd, got, len, off);
	FT_CHECK(r == (ssize_t)len, "pread %zu bytes at %lld: %s", len, (long long)off,
		 ft_errname(r));
	expect(want, off, len, cut);
	if (memcmp(got, want, len) != 0) {
		size_t k = 0;
		while (got[k] == want[k])
			k++;
		FT_CHECK(0, "byte at %lld is 0x%02x, expected 0x%02x", (long long)(off + (off_t)k),
			 (unsigned char)got[k], (unsigned char)want[k]);
	}
	return 0;
}

/* Reads each region with 1 MiB of surroundings, and probes deep in holes. */
static int check_file(const char *path, off_t cut, off_t size)
{
	int fd = FT_OK(ferrite_open(fs, path, O_RDONLY, 0));
	struct stat st;
	FT_OK(ferrite_fstat(fs, fd, &st));
	FT_EQ(st.st_size, size);
	for (int r = 0; r < NREG; r++) {
		off_t a = regions[r].off > MiB ? regions[r].off - MiB : 0;
		off_t b = regions[r].off + regions[r].len + MiB;
		for (off_t o = a; o < b; o += 4 * MiB)
			if (check_range(fd, o, (size_t)(b - o < 4 * MiB ? b - o : 4 * MiB), cut,
					size) != 0)
				return -1;
	}
	static const off_t probes[] = {1 * MiB + 1,	  1 * GiB, 4 * GiB,
				       4 * GiB + 8 * MiB, 5 * GiB, 6 * GiB - 1};
	for (size_t i = 0; i < sizeof(probes) / sizeof(probes[0]); i++)
		if (check_range(fd, probes[i], 64 * KiB, cut, size) != 0)
			return -1;
	char c;
	FT_EQ(ferrite_pread(fs, fd, &c, 1, size), 0);
	FT_EQ(ferrite_pread(fs, fd, &c, 1, size + 5 * GiB), 0);
	FT_OK(ferrite_close(fs, fd));
	return 0;
}

static int check_seek(const char *path)
{
	int fd = FT_OK(ferrite_open(fs, path, O_RDONLY, 0));
	for (int r = 0; r < NREG; r++) {
		off_t start = regions[r].off, end = regions[r].off + regions[r].len;
		/* from the middle of the preceding hole */
		off_t from = r == 0 ? 0 : (regions[r - 1].off + regions[r - 1].len + start) / 2;
		off_t d = ferrite_lseek(fs, fd, from, SEEK_DATA);
		FT_CHECK(d >= 0 && d <= start && d >= (rdown(start) > from ? rdown(start) : from),
			 "SEEK_DATA(%lld) = %s, expected in [%lld, %lld] (region %d)",
			 (long long)from, ft_errname(d),
			 (long long)(rdown(start) > from ? rdown(start) : from), (long long)start,
			 r);
		off_t h = ferrite_lseek(fs, fd, start, SEEK_HOLE);
		off_t hmax = rup(end) < FSIZE ? rup(end) : FSIZE;
		FT_CHECK(h >= end && h <= hmax,
			 "SEEK_HOLE(%lld) = %s, expected in [%lld, %lld] (region %d)",
			 (long long)start, ft_errname(h), (long long)end, (long long)hmax, r);
		/* inside the region: data is where we are */
		off_t mid = start + regions[r].len / 2;
		FT_EQ(ferrite_lseek(fs, fd, mid, SEEK_DATA), mid);
	}
	FT_ERR(ferrite_lseek(fs, fd, FSIZE, SEEK_DATA), ENXIO);
	FT_ERR(ferrite_lseek(fs, fd, FSIZE, SEEK_HOLE), ENXIO);
	FT_EQ(ferrite_lseek(fs, fd, FSIZE - 1, SEEK_HOLE), FSIZE);
	FT_OK(ferrite_close(fs, fd));
	return 0;
}

static int c_sparse(void)
{
	struct ferrite_info info;
	static char buf[4 * MiB];
	FT_OK(ft_pool_create(pool, 128 * MiB, &fs));
	FT_OK(ferrite_get_info(fs, &info));
	FT_CHECK(info.max_file_size >= (uint64_t)FSIZE,
		 "max_file_size %" PRIu64 " is below the %lld bytes this test needs",
		 info.max_file_size, (long long)FSIZE);
	uint64_t used0 = used_bytes();
	int fd = FT_OK(ferrite_open(fs, "/sparse", O_CREAT | O_RDWR, 0644));
	/* write the regions in a scrambled order, the last one first */
	static const int order[] = {5, 3, 0, 4, 1, 2};
	for (int i = 0; i < NREG; i++) {
		const struct region *g = &regions[order[i]];
		FT_CHECK(g->len <= (off_t)sizeof(buf), "region too large");
		ft_fill(buf, (size_t)g->len, g->key, (uint64_t)g->off);
		FT_EQ(ferrite_pwrite(fs, fd, buf, (size_t)g->len, g->off), g->len);
	}
	struct stat st;
	FT_OK(ferrite_fstat(fs, fd, &st));
	FT_EQ(st.st_size, FSIZE);
	FT_OK(ferrite_close(fs, fd));
	uint64_t used1 = used_bytes();
	off_t data = 0;
	for (int r = 0; r < NREG; r++)
		data += regions[r].len;
	/* (the Linux reference shares its tmpfs with other processes: no statvfs checks) */
	FT_CHECK(ft_is_oracle || used1 - used0 <= 32 * MiB,
		 "a %lld-byte file holding %lld bytes of data uses %" PRIu64 " bytes of the pool",
		 (long long)FSIZE, (long long)data, used1 - used0);
	FT_CHECK(st.st_blocks * 512 <= 32 * MiB, "st_blocks %lld for %lld bytes of data",
		 (long long)st.st_blocks, (long long)data);
	FT_CHECK(st.st_blocks * 512 >= data, "st_blocks %lld is below the data written (%lld)",
		 (long long)st.st_blocks, (long long)data);
	if (check_file("/sparse", FSIZE, FSIZE) != 0 || check_seek("/sparse") != 0)
		return -1;

	/* it all survives a remount */
	FT_UNMOUNT_CLEAN(&fs, pool);
	FT_OK(ferrite_mount(pool, NULL, &fs));
	if (check_file("/sparse", FSIZE, FSIZE) != 0 || check_seek("/sparse") != 0)
		return -1;

	/* a write into a deep hole after the fact */
	fd = FT_OK(ferrite_open(fs, "/sparse", O_RDWR, 0));
	FT_EQ(ferrite_pwrite(fs, fd, "", 1, 4 * GiB + 64 * MiB), 1); /* a zero byte */
	FT_OK(ferrite_fstat(fs, fd, &st));
	FT_EQ(st.st_size, FSIZE);

	/* cut inside the 4 GiB region, then grow back: the cut data reads zeros */
	off_t cut = 4 * GiB + 100;
	uint64_t used_before_cut = used_bytes();
	FT_OK(ferrite_ftruncate(fs, fd, cut));
	FT_OK(ferrite_close(fs, fd));
	if (check_file("/sparse", cut, cut) != 0)
		return -1;
	FT_CHECK(ft_is_oracle || used_bytes() <= used_before_cut,
		 "truncating down used more space: %" PRIu64 " -> %" PRIu64, used_before_cut,
		 used_bytes());
	FT_OK(ferrite_truncate(fs, "/sparse", FSIZE));
	if (check_file("/sparse", cut, FSIZE) != 0)
		return -1;
	fd = FT_OK(ferrite_open(fs, "/sparse", O_RDONLY, 0));
	FT_ERR(ferrite_lseek(fs, fd, rup(cut) + GRAN, SEEK_DATA), ENXIO);
	FT_OK(ferrite_close(fs, fd));

	/* down to a small size and to zero: the space comes back */
	FT_OK(ferrite_truncate(fs, "/sparse", 1000));
	if (check_file("/sparse", 1000, 1000) != 0)
		return -1;
	FT_OK(ferrite_truncate(fs, "/sparse", 0));
	fd = FT_OK(ferrite_open(fs, "/sparse", O_RDONLY, 0));
	FT_ERR(ferrite_lseek(fs, fd, 0, SEEK_DATA), ENXIO);
	FT_OK(ferrite_close(fs, fd));
	FT_CHECK(ft_is_oracle || used_bytes() <= used0 + 4 * MiB,
		 "after truncating to 0 the pool still uses %" PRIu64 " bytes more than at start",
		 used_bytes() - used0);
	FT_OK(ferrite_unlink(fs, "/sparse"));
	FT_UNMOUNT_CLEAN(&fs, pool);
	return 0;
}

static const struct ft_case cases[] = {
    {"sparse_over_4g", c_sparse, 0},
};

int main(int argc, char **argv)
{
	pool = ft_pool_path("sparse", "main");
	return ft_run(cases, 1, argc, argv, NULL, NULL);
}
