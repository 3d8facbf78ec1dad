/*
 * bigdir_test.c -- proves that one directory holds a million entries
 * correctly: every create succeeds, every name is found by stat (also after a
 * remount) with a distinct inode, readdir returns every name exactly once with
 * its inode, absent names stay absent, every unlink succeeds, and at the end
 * the directory is empty, the inode count is back where it started and fsck is
 * clean. No timing is checked; phase times are printed for information.
 * Usage: bigdir_test [-n COUNT] [-p POOL_MIB]   (default 1000000 entries, 2048 MiB)
 */
#include "../api/ft_test.h"

#include <sys/time.h>

static ferrite_fs *fs;
static long count = 1000000;
static uint64_t pool_mib = 2048;
static const char *pool;
static uint64_t *inos;

static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static void phase(const char *what, double t0)
{
	printf("  %-28s %8.2f s\n", what, now() - t0);
	fflush(stdout);
}

static void name_of(char *buf, size_t n, long i)
{
	snprintf(buf, n, "/big/f%07ld", i);
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

static uint64_t used_inodes(void)
{
	struct statvfs sv;
	if (ferrite_statvfs(fs, &sv) != 0)
		return UINT64_MAX;
	return (uint64_t)(sv.f_files - sv.f_ffree);
}

static int lookup_all(const char *label)
{
	char p[64];
	struct stat st;
	double t0 = now();
	for (long i = 0; i < count; i++) {
		name_of(p, sizeof(p), i);
		int rc = ferrite_stat(fs, p, &st);
		FT_CHECK(rc == 0, "%s: stat %s: %s", label, p, ft_errname(rc));
		FT_CHECK(S_ISREG(st.st_mode) && st.st_size == 0, "%s: %s: mode %o size %lld", label,
			 p, st.st_mode, (long long)st.st_size);
		if (inos[i] == 0)
			inos[i] = st.st_ino;
		FT_CHECK(inos[i] == st.st_ino, "%s: %s: inode %llu, earlier %llu", label, p,
			 (unsigned long long)st.st_ino, (unsigned long long)inos[i]);
	}
	/* names that were never created */
	for (long i = 0; i < 1000; i++) {
		snprintf(p, sizeof(p), "/big/f%07ld", count + i);
		FT_ERR(ferrite_stat(fs, p, &st), ENOENT);
		snprintf(p, sizeof(p), "/big/g%07ld", i * (count / 1000 + 1));
		FT_ERR(ferrite_stat(fs, p, &st), ENOENT);
	}
	phase(label, t0);
	return 0;
}

static int c_million(void)
{
	char p[64];
	FT_OK(ft_pool_create(pool, pool_mib << 20, &fs));
	inos = calloc((size_t)count, sizeof(*inos));
	unsigned char *seen = calloc((size_t)count, 1);
	FT_CHECK(inos && seen, "out of memory");
	FT_OK(ferrite_mkdir(fs, "/big", 0755));
	uint64_t used0 = used_inodes();

	double t0 = now();
	for (long i = 0; i < count; i++) {
		name_of(p, sizeof(p), i);
		int fd = ferrite_open(fs, p, O_CREAT | O_EXCL | O_WRONLY, 0644);
		FT_CHECK(fd >= 0, "create %s (entry %ld of %ld): %s", p, i, count, ft_errname(fd));
		FT_OK(ferrite_close(fs, fd));
	}
	phase("create", t0);
	if (!ft_is_oracle) /* the host tmpfs is shared with other processes */
		FT_EQ(used_inodes() - used0, count);
	/* an existing name cannot be created again */
	name_of(p, sizeof(p), count / 2);
	FT_ERR(ferrite_open(fs, p, O_CREAT | O_EXCL | O_WRONLY, 0644), EEXIST);
	FT_ERR(ferrite_mkdir(fs, p, 0755), EEXIST);

	if (lookup_all("stat every name") != 0)
		return -1;
	/* all inode numbers are distinct */
	uint64_t *sorted = malloc((size_t)count * sizeof(*sorted));
	memcpy(sorted, inos, (size_t)count * sizeof(*sorted));
	qsort(sorted, (size_t)count, sizeof(*sorted), cmp_u64);
	for (long i = 1; i < count; i++)
		FT_CHECK(sorted[i] != sorted[i - 1], "inode %llu is used by two names",
			 (unsigned long long)sorted[i]);
	free(sorted);

	t0 = now();
	FT_OK(ferrite_unmount(fs));
	fs = NULL;
	FT_OK(ferrite_mount(pool, NULL, &fs));
	phase("unmount + mount", t0);
	if (lookup_all("stat every name after mount") != 0)
		return -1;

	t0 = now();
	ferrite_dir *d;
	struct ferrite_dirent e;
	int r;
	long n = 0, dots = 0;
	FT_OK(ferrite_opendir(fs, "/big", &d));
	while ((r = ferrite_readdir(d, &e)) == 1) {
		if (strcmp(e.name, ".") == 0 || strcmp(e.name, "..") == 0) {
			dots++;
			continue;
		}
		char *end;
		long i = e.name[0] == 'f' ? strtol(e.name + 1, &end, 10) : -1;
		FT_CHECK(i >= 0 && i < count && *end == 0 && strlen(e.name) == 8,
			 "readdir returned an unknown name \"%s\"", e.name);
		FT_CHECK(!seen[i], "readdir returned \"%s\" twice", e.name);
		seen[i] = 1;
		FT_CHECK(e.ino == inos[i], "readdir: %s has inode %llu, stat said %llu", e.name,
			 (unsigned long long)e.ino, (unsigned long long)inos[i]);
		FT_CHECK(e.type == DT_REG, "readdir: %s has type %d", e.name, e.type);
		n++;
	}
	FT_EQ(r, 0);
	FT_OK(ferrite_closedir(d));
	FT_EQ(dots, 2);
	for (long i = 0; i < count; i++)
		FT_CHECK(seen[i], "readdir did not return f%07ld", i);
	FT_EQ(n, count);
	phase("readdir", t0);

	t0 = now();
	for (long i = 0; i < count; i++) {
		/* in an order unlike the creation order */
		long k = (long)(((uint64_t)i * 7919u) % (uint64_t)count);
		if (count % 7919 == 0)
			k = i;
		name_of(p, sizeof(p), k);
		int rc = ferrite_unlink(fs, p);
		FT_CHECK(rc == 0, "unlink %s: %s", p, ft_errname(rc));
	}
	phase("unlink", t0);
	name_of(p, sizeof(p), 0);
	struct stat st;
	FT_ERR(ferrite_stat(fs, p, &st), ENOENT);
	FT_EQ(ft_count_entries(fs, "/big"), 2);
	FT_OK(ferrite_stat(fs, "/big", &st));
	FT_EQ(st.st_nlink, 2);
	if (!ft_is_oracle)
		FT_EQ(used_inodes(), used0);
	FT_OK(ferrite_rmdir(fs, "/big"));
	FT_UNMOUNT_CLEAN(&fs, pool);
	free(seen);
	free(inos);
	return 0;
}

static const struct ft_case cases[] = {
    {"million", c_million, 0},
};

int main(int argc, char **argv)
{
	int opt;
	while ((opt = getopt(argc, argv, "n:p:")) != -1) {
		if (opt == 'n')
			count = atol(optarg);
		else if (opt == 'p')
			pool_mib = strtoull(optarg, NULL, 10);
		else {
			fprintf(stderr, "usage: %s [-n COUNT] [-p POOL_MIB]\n", argv[0]);
			return 2;
		}
	}
	if (count < 1) {
		fprintf(stderr, "COUNT must be positive\n");
		return 2;
	}
	printf("bigdir: %ld entries, %" PRIu64 " MiB pool\n", count, pool_mib);
	pool = ft_pool_path("bigdir", "main");
	char *args[] = {argv[0], NULL};
	return ft_run(cases, 1, 1, args, NULL, NULL);
}
