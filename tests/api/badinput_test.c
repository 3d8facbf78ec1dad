/*
 * badinput_test.c -- proves that bad input never crashes the process or loses
 * data and always gives a clear error (the errno of ferrite.h and a one-line
 * ferrite_errmsg()): missing / empty / random / truncated / bit-flipped /
 * newer-format pools and directories are refused; a pool in use is refused to
 * a second mount (same process and another process), to mkfs and to fsck;
 * NULL and empty paths, invalid flags, modes and negative lengths give their
 * errno; a full pool gives ENOSPC, keeps everything already written, leaves no
 * partial entries, gives its space back on delete and checks clean afterwards.
 *
 * The superblock layout used to patch the version and to aim the bit flips
 * comes from src/meta/meta_format.h (docs/format.md).
 * Usage: badinput_test [-l] [case ...]
 */
#include "ft_test.h"

#include "meta/meta_format.h"

#define MiB	  (1024 * 1024)
#define GOLD_SIZE (64ull * MiB)

static const char *gold;    /* a small valid pool, never modified after setup */
static const char *scratch; /* copies of it, damaged on purpose */

/* ---- helpers --------------------------------------------------------------- */

static uint32_t crc32c(const void *buf, size_t len)
{
	const unsigned char *p = buf;
	uint32_t crc = ~0u;
	while (len--) {
		crc ^= *p++;
		for (int k = 0; k < 8; k++)
			crc = (crc & 1) ? (crc >> 1) ^ 0x82F63B78u : crc >> 1;
	}
	return ~crc;
}

/* Copies the first len bytes of src to dst (len = -1: all). 0 or -1. */
static int copy_file(const char *src, const char *dst, off_t len)
{
	int in = open(src, O_RDONLY);
	int out = open(dst, O_CREAT | O_TRUNC | O_WRONLY, 0644);
	FT_CHECK(in >= 0 && out >= 0, "copy %s -> %s: %s", src, dst, strerror(errno));
	static char buf[1 * MiB];
	off_t done = 0;
	for (;;) {
		size_t want = sizeof(buf);
		if (len >= 0 && len - done < (off_t)want)
			want = (size_t)(len - done);
		if (want == 0)
			break;
		ssize_t n = read(in, buf, want);
		FT_CHECK(n >= 0, "read %s: %s", src, strerror(errno));
		if (n == 0)
			break;
		FT_CHECK(write(out, buf, (size_t)n) == n, "write %s: %s", dst, strerror(errno));
		done += n;
	}
	close(in);
	close(out);
	return 0;
}

static int patch_bytes(const char *path, off_t off, const void *bytes, size_t n)
{
	int fd = open(path, O_RDWR);
	FT_CHECK(fd >= 0 && pwrite(fd, bytes, n, off) == (ssize_t)n, "patch %s at %lld: %s", path,
		 (long long)off, strerror(errno));
	close(fd);
	return 0;
}

static int xor_byte(const char *path, off_t off, unsigned char mask)
{
	unsigned char b;
	int fd = open(path, O_RDWR);
	FT_CHECK(fd >= 0 && pread(fd, &b, 1, off) == 1, "read %s at %lld", path, (long long)off);
	b ^= mask;
	FT_CHECK(pwrite(fd, &b, 1, off) == 1, "write %s at %lld", path, (long long)off);
	close(fd);
	return 0;
}

static int write_random_file(const char *path, size_t len, uint64_t seed)
{
	int fd = open(path, O_CREAT | O_TRUNC | O_WRONLY, 0644);
	FT_CHECK(fd >= 0, "create %s: %s", path, strerror(errno));
	static char buf[1 * MiB];
	for (size_t done = 0; done < len;) {
		size_t n = len - done < sizeof(buf) ? len - done : sizeof(buf);
		ft_fill(buf, n, seed, done);
		FT_CHECK(write(fd, buf, n) == (ssize_t)n, "write %s", path);
		done += n;
	}
	close(fd);
	return 0;
}

static int expect_file(ferrite_fs *fs, const char *path, size_t len, uint64_t key)
{
	static char buf[1 * MiB];
	struct stat st;
	FT_OK(ferrite_stat(fs, path, &st));
	FT_CHECK(st.st_size == (off_t)len, "%s: size %lld, expected %zu", path,
		 (long long)st.st_size, len);
	int fd = FT_OK(ferrite_open(fs, path, O_RDONLY, 0));
	for (size_t off = 0; off < len; off += sizeof(buf)) {
		size_t n = len - off < sizeof(buf) ? len - off : sizeof(buf);
		ssize_t r = ferrite_pread(fs, fd, buf, n, (off_t)off);
		FT_CHECK(r == (ssize_t)n, "%s: pread at %zu: %s", path, off, ft_errname(r));
		long long bad = ft_verify(buf, n, key, off);
		FT_CHECK(bad < 0, "%s: wrong byte at offset %lld", path, (long long)off + bad);
	}
	FT_OK(ferrite_close(fs, fd));
	return 0;
}

/* The gold content: /a (1 MiB + 3), /d/b (100000 bytes), /d/l -> b. */
static int write_gold(ferrite_fs *fs)
{
	static char buf[1 * MiB + 3];
	ft_fill(buf, sizeof(buf), 1, 0);
	int fd = FT_OK(ferrite_open(fs, "/a", O_CREAT | O_WRONLY, 0644));
	FT_EQ(ferrite_write(fs, fd, buf, sizeof(buf)), (ssize_t)sizeof(buf));
	FT_OK(ferrite_close(fs, fd));
	FT_OK(ferrite_mkdir(fs, "/d", 0755));
	ft_fill(buf, 100000, 2, 0);
	fd = FT_OK(ferrite_open(fs, "/d/b", O_CREAT | O_WRONLY, 0600));
	FT_EQ(ferrite_write(fs, fd, buf, 100000), 100000);
	FT_OK(ferrite_close(fs, fd));
	FT_OK(ferrite_symlink(fs, "b", "/d/l"));
	return 0;
}

static int check_gold_content(ferrite_fs *fs)
{
	if (expect_file(fs, "/a", 1 * MiB + 3, 1) != 0 || expect_file(fs, "/d/b", 100000, 2) != 0)
		return -1;
	char t[8];
	FT_EQ(ferrite_readlink(fs, "/d/l", t, sizeof(t)), 1);
	return 0;
}

/* Mounts path and checks the gold content; unmounts. */
static int check_gold(const char *path)
{
	ferrite_fs *fs;
	FT_OK(ferrite_mount(path, NULL, &fs));
	int rc = check_gold_content(fs);
	FT_OK(ferrite_unmount(fs));
	return rc;
}

/* Mount must fail with one of the errnos in want[] (0-terminated) and a
 * one-line message; a pool that mounts anyway is unmounted and reported. */
static int expect_refused(const char *path, const int *want, const char *what)
{
	ferrite_fs *fs = NULL;
	int rc = ferrite_mount(path, NULL, &fs);
	if (rc == 0) {
		ferrite_unmount(fs);
		FT_CHECK(0, "%s: mount succeeded, expected a refusal", what);
	}
	int ok = 0;
	char list[128] = "";
	for (int i = 0; want[i]; i++) {
		ok |= rc == -want[i];
		snprintf(list + strlen(list), sizeof(list) - strlen(list), "%s-%s", i ? " or " : "",
			 strerrorname_np(want[i]));
	}
	FT_CHECK(ok, "%s: mount returned %s, expected %s", what, ft_errname(rc), list);
	FT_ERRMSG_ONE_LINE();
	return 0;
}

/* a NULL argument: -EFAULT or -EINVAL, a one-line message, no crash */
#define NULLOK(expr) FT_ERR2_NOCRASH(expr, EFAULT, EINVAL)

static const int REFUSE_DAMAGED[] = {EINVAL, EUCLEAN, 0};
static const int REFUSE_ANY[] = {EINVAL, EUCLEAN, EPROTONOSUPPORT, 0};

/* ferrite.h does not say what a NULL pool path means. Accepted: -EFAULT /
 * -EINVAL, or the default pool ($FERRITE_POOL, set to a private file by
 * ft_pool_path): mkfs(NULL) must then have formatted that file, and mount /
 * fsck of it must give the result they give for that path. */
static int null_pool_call(const char *what, int rc, int made)
{
	const char *def = getenv("FERRITE_POOL");
	if (rc == -EFAULT || rc == -EINVAL) {
		FT_ERRMSG_ONE_LINE();
		return 0;
	}
	FT_CHECK(def && strcmp(ferrite_default_pool(), def) == 0,
		 "ferrite_default_pool() is \"%s\", expected $FERRITE_POOL \"%s\"",
		 ferrite_default_pool(), def ? def : "(unset)");
	struct stat st;
	if (made)
		FT_CHECK(rc == 0 && stat(def, &st) == 0 && st.st_size == (off_t)GOLD_SIZE,
			 "%s(NULL) returned %s but did not format the default pool %s", what,
			 ft_errname(rc), def);
	else
		FT_CHECK(rc >= 0 || rc == -ENOENT, "%s(NULL) on the default pool %s: %s", what, def,
			 ft_errname(rc));
	return 0;
}

/* ---- pools that are not (whole) pools ----------------------------------------- */

static int c_mount_missing(void)
{
	char p[128];
	ferrite_fs *fs;
	snprintf(p, sizeof(p), "/dev/shm/ferrite-badinput-missing-%d.pool", (int)getpid());
	FT_ERR(ferrite_mount(p, NULL, &fs), ENOENT);
	FT_ERRMSG_ONE_LINE();
	FT_ERR(ferrite_mount("", NULL, &fs), ENOENT);
	FT_ERRMSG_ONE_LINE();
	FT_ERR(ferrite_mount("/dev/shm/no/such/dir/x.pool", NULL, &fs), ENOENT);
	return 0;
}

static int c_mount_directory(void)
{
	static const int want[] = {EISDIR, EINVAL, 0};
	return expect_refused("/dev/shm", want, "a directory");
}

static int c_mount_empty_file(void)
{
	FT_RUN(write_random_file(scratch, 0, 0));
	return expect_refused(scratch, REFUSE_DAMAGED, "a zero-length file");
}

static int c_mount_random(void)
{
	static const size_t lens[] = {1, 4096, 3 * MiB, 64 * MiB};
	for (size_t i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
		char what[64];
		snprintf(what, sizeof(what), "%zu random bytes", lens[i]);
		FT_RUN(write_random_file(scratch, lens[i], 77 + i));
		if (expect_refused(scratch, REFUSE_DAMAGED, what) != 0)
			return -1;
		int f = ferrite_fsck(scratch, 0, NULL, NULL, NULL, NULL);
		FT_CHECK(f != FERRITE_FSCK_CLEAN, "fsck of %s says clean", what);
	}
	/* random bytes after a valid magic: still refused */
	uint64_t magic = SB_MAGIC;
	FT_RUN(write_random_file(scratch, 64 * MiB, 99));
	FT_RUN(patch_bytes(scratch, 0, &magic, sizeof(magic)));
	return expect_refused(scratch, REFUSE_ANY, "random bytes behind the magic");
}

static int c_mount_truncated(void)
{
	static const off_t cuts[] = {1,		  8,	    100,
				     4095,	  4096,	    4097,
				     8192,	  12288,    1 * MiB,
				     2 * MiB - 1, 2 * MiB,  2 * MiB + 4096,
				     4 * MiB,	  32 * MiB, 64 * MiB - 4096,
				     64 * MiB - 1};
	for (size_t i = 0; i < sizeof(cuts) / sizeof(cuts[0]); i++) {
		char what[64];
		snprintf(what, sizeof(what), "pool cut to %lld bytes", (long long)cuts[i]);
		FT_RUN(copy_file(gold, scratch, cuts[i]));
		if (expect_refused(scratch, REFUSE_DAMAGED, what) != 0)
			return -1;
		int f = ferrite_fsck(scratch, 0, NULL, NULL, NULL, NULL);
		FT_CHECK(f != FERRITE_FSCK_CLEAN, "fsck of a %s says clean", what);
	}
	return check_gold(gold); /* the original was not touched */
}

static int c_mount_flipped_superblock(void)
{
	/* every byte up to the checksum is covered by it: a flip anywhere there
	 * must be refused (magic: EINVAL, version: EPROTONOSUPPORT allowed) */
	static const int want[] = {EINVAL, EUCLEAN, EPROTONOSUPPORT, 0};
	const size_t covered = offsetof(struct fr_super, sb_checksum) + 4;
	static const size_t pos[] = {0,	 3,  7,	 8,   9,   11,	12,  15,  16,  31,
				     32, 33, 40, 47,  48,  52,	56,  60,  64,  72,
				     80, 88, 96, 104, 112, 120, 128, 136, 160, 200};
	for (size_t i = 0; i < sizeof(pos) / sizeof(pos[0]) + 4; i++) {
		size_t at = i < sizeof(pos) / sizeof(pos[0])
				? pos[i]
				: covered - 4 + (i - sizeof(pos) / sizeof(pos[0]));
		if (at >= covered)
			continue;
		char what[64];
		snprintf(what, sizeof(what), "superblock byte %zu flipped", at);
		FT_RUN(copy_file(gold, scratch, -1));
		FT_RUN(xor_byte(scratch, (off_t)at, 0x5a));
		if (expect_refused(scratch, want, what) != 0)
			return -1;
	}
	/* flips in unused space after the superblock do not matter */
	FT_RUN(copy_file(gold, scratch, -1));
	FT_RUN(xor_byte(scratch, 3000, 0xff));
	return check_gold(scratch);
}

struct lines {
	int n, bad;
	char first[256];
};

static void collect(void *arg, const char *line)
{
	struct lines *l = arg;
	size_t len = strlen(line);
	if (len && line[len - 1] == '\n')
		len--;
	if (len == 0 || memchr(line, '\n', len))
		l->bad++;
	if (l->n++ == 0)
		snprintf(l->first, sizeof(l->first), "%.*s", (int)len, line);
}

static int c_superblock_repair(void)
{
	/* a damaged primary superblock (not its magic: that makes a foreign
	 * file) is repairable from the backup: fsck reports it in one-line
	 * messages, repairs it, and the pool mounts with its data */
	static const size_t pos[] = {8, 16, 33, 64, 200, offsetof(struct fr_super, sb_checksum)};
	for (size_t i = 0; i < sizeof(pos) / sizeof(pos[0]); i++) {
		struct lines l = {0};
		FT_RUN(copy_file(gold, scratch, -1));
		FT_RUN(xor_byte(scratch, (off_t)pos[i], 0x01));
		int f = ferrite_fsck(scratch, 0, collect, &l, NULL, NULL);
		FT_CHECK(f != FERRITE_FSCK_CLEAN,
			 "byte %zu flipped: fsck without repair says clean", pos[i]);
		FT_CHECK(l.n > 0 && l.bad == 0,
			 "byte %zu flipped: fsck reported %d line(s), %d empty or multi-line",
			 pos[i], l.n, l.bad);
		f = ferrite_fsck(scratch, 1, NULL, NULL, NULL, NULL);
		FT_CHECK(f == FERRITE_FSCK_CORRECTED,
			 "byte %zu flipped: fsck -repair returned %d, expected %d (corrected); "
			 "it had said \"%s\"",
			 pos[i], f, FERRITE_FSCK_CORRECTED, l.first);
		FT_EQ(ferrite_fsck(scratch, 0, NULL, NULL, NULL, NULL), FERRITE_FSCK_CLEAN);
		FT_RUN(check_gold(scratch));
	}
	return 0;
}

static int set_version(const char *path, uint32_t version, uint32_t incompat)
{
	/* patch primary and backup and recompute their checksums, so that the
	 * version is the only thing wrong */
	static const off_t offs[] = {SB_OFF, SB_BACKUP_OFF};
	for (int i = 0; i < 2; i++) {
		struct fr_super sb;
		int fd = open(path, O_RDWR);
		FT_CHECK(fd >= 0 && pread(fd, &sb, sizeof(sb), offs[i]) == (ssize_t)sizeof(sb),
			 "read superblock at %lld", (long long)offs[i]);
		FT_EQ(sb.sb_magic, SB_MAGIC);
		sb.sb_version = version;
		sb.sb_incompat = incompat;
		sb.sb_checksum = crc32c(&sb, offsetof(struct fr_super, sb_checksum));
		FT_CHECK(pwrite(fd, &sb, sizeof(sb), offs[i]) == (ssize_t)sizeof(sb),
			 "write superblock");
		close(fd);
	}
	return 0;
}

static int c_mount_newer_version(void)
{
	static const int want[] = {EPROTONOSUPPORT, 0};
	FT_RUN(copy_file(gold, scratch, -1));
	/* first prove the patcher: the same version with a recomputed checksum mounts */
	FT_RUN(set_version(scratch, FR_FORMAT_VERSION, 0));
	if (check_gold(scratch) != 0)
		return -1;
	FT_RUN(set_version(scratch, FR_FORMAT_VERSION + 1, 0));
	if (expect_refused(scratch, want, "format version + 1") != 0)
		return -1;
	FT_CHECK(strstr(ferrite_errmsg(), "version") != NULL,
		 "the message should name the version problem: \"%s\"", ferrite_errmsg());
	FT_RUN(set_version(scratch, 0xffffffffu, 0));
	if (expect_refused(scratch, want, "format version 0xffffffff") != 0)
		return -1;
	FT_RUN(set_version(scratch, FR_FORMAT_VERSION, 1u << 31));
	if (expect_refused(scratch, want, "an unknown incompatible feature") != 0)
		return -1;
	/* fsck refuses to touch it */
	int f = ferrite_fsck(scratch, 1, NULL, NULL, NULL, NULL);
	FT_CHECK(f != FERRITE_FSCK_CLEAN && f != FERRITE_FSCK_CORRECTED,
		 "fsck -repair of a newer-format pool returned %d", f);
	FT_RUN(set_version(scratch, FR_FORMAT_VERSION, 0));
	return check_gold(scratch);
}

/* A pool of the previous format (4) keeps mounting as it is: a one-page
 * file deleted there is released, not kept as a null file (format 5), and
 * the pool stays version 4, fsck clean. */
static int c_mount_version4(void)
{
	struct ferrite_mkfs_opts o = {.size = 64 << 20, .force = 1};
	FT_OK(ferrite_mkfs(scratch, &o));
	FT_RUN(set_version(scratch, FR_FORMAT_NULL_FILES - 1, 0));
	ferrite_fs *fs;
	FT_OK(ferrite_mount(scratch, NULL, &fs));
	struct ferrite_info in;
	FT_OK(ferrite_get_info(fs, &in));
	FT_EQ(in.format_version, FR_FORMAT_NULL_FILES - 1);
	struct statvfs before, after;
	FT_OK(ferrite_statvfs(fs, &before));
	for (int round = 0; round < 2; round++) {
		FT_OK(ft_write_file(fs, "/one", 7, 4096, 0));
		FT_OK(ferrite_unlink(fs, "/one"));
	}
	FT_OK(ferrite_statvfs(fs, &after));
	FT_OK(ferrite_get_info(fs, &in));
	FT_CHECK(in.prealloc_bytes == 0, "a version-4 pool holds %llu pre-allocated bytes",
		 (unsigned long long)in.prealloc_bytes);
	FT_CHECK(after.f_bfree >= before.f_bfree - 4, "a deleted file kept its pages: %llu -> %llu",
		 (unsigned long long)before.f_bfree, (unsigned long long)after.f_bfree);
	FT_OK(ferrite_unmount(fs));
	FT_EQ(ferrite_fsck(scratch, 0, NULL, NULL, NULL, NULL), FERRITE_FSCK_CLEAN);
	FT_OK(ferrite_mount(scratch, NULL, &fs));
	FT_OK(ferrite_get_info(fs, &in));
	FT_EQ(in.format_version, FR_FORMAT_NULL_FILES - 1);
	FT_OK(ferrite_unmount(fs));
	return 0;
}

/* ---- a pool in use ------------------------------------------------------------ */

static int c_mount_busy(void)
{
	ferrite_fs *fs, *fs2 = NULL;
	FT_RUN(copy_file(gold, scratch, -1));
	FT_OK(ferrite_mount(scratch, NULL, &fs));
	int rc = ferrite_mount(scratch, NULL, &fs2);
	if (rc == 0)
		ferrite_unmount(fs2);
	FT_CHECK(rc == -EBUSY, "second mount in the same process: %s, expected -EBUSY",
		 ft_errname(rc));
	FT_ERRMSG_ONE_LINE();
	/* a second path to the same file */
	char alias[160];
	snprintf(alias, sizeof(alias), "%s.alias", scratch);
	FT_CHECK(link(scratch, alias) == 0, "link: %s", strerror(errno));
	rc = ferrite_mount(alias, NULL, &fs2);
	unlink(alias);
	if (rc == 0)
		ferrite_unmount(fs2);
	FT_CHECK(rc == -EBUSY, "mount through a hard link: %s, expected -EBUSY", ft_errname(rc));
	/* another process */
	fflush(NULL);
	pid_t pid = fork();
	FT_CHECK(pid >= 0, "fork: %s", strerror(errno));
	if (pid == 0) {
		ft_npools = 0; /* a crash here must not remove the parent's pools */
		ferrite_fs *c;
		int r = ferrite_mount(scratch, NULL, &c);
		const char *m = ferrite_errmsg();
		int oneline = m[0] && !strchr(m, '\n');
		_exit(r == 0 ? 100 : r == -EBUSY ? (oneline ? 0 : 101) : 102);
	}
	int status;
	waitpid(pid, &status, 0);
	FT_CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0,
		 "mount from a child process: exit %d (100 = mounted, 101 = no one-line message, "
		 "102 = not EBUSY), expected -EBUSY",
		 WIFEXITED(status) ? WEXITSTATUS(status) : -1);
	/* mkfs and fsck must not touch a mounted pool */
	struct ferrite_mkfs_opts o = {.size = GOLD_SIZE, .force = 1};
	FT_ERR(ferrite_mkfs(scratch, &o), EBUSY);
	FT_ERRMSG_ONE_LINE();
	FT_ERR(ferrite_fsck(scratch, 1, NULL, NULL, NULL, NULL), EBUSY);
	if (check_gold_content(fs) != 0)
		return -1;
	FT_OK(ferrite_unmount(fs));
	/* released: mount again, in this process and in a child */
	if (check_gold(scratch) != 0)
		return -1;
	pid = fork();
	if (pid == 0) {
		ft_npools = 0; /* a crash here must not remove the parent's pools */
		ferrite_fs *c;
		int r = ferrite_mount(scratch, NULL, &c);
		if (r == 0)
			r = ferrite_unmount(c);
		_exit(r == 0 ? 0 : 1);
	}
	waitpid(pid, &status, 0);
	FT_CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0,
		 "a child could not mount the pool after unmount");
	return 0;
}

static int c_mkfs_refusals(void)
{
	struct ferrite_mkfs_opts o = {.size = GOLD_SIZE};
	/* an existing pool is not overwritten without force */
	FT_RUN(copy_file(gold, scratch, -1));
	int rc = ferrite_mkfs(scratch, &o);
	FT_CHECK(rc < 0, "mkfs without force over a pool: %s, expected a refusal", ft_errname(rc));
	FT_ERRMSG_ONE_LINE();
	if (check_gold(scratch) != 0)
		return -1;
	FT_ERR(ferrite_mkfs(scratch, NULL), EEXIST);
	if (check_gold(scratch) != 0)
		return -1;
	/* nor a non-empty foreign file */
	FT_RUN(write_random_file(scratch, 10000, 5));
	rc = ferrite_mkfs(scratch, &o);
	FT_CHECK(rc < 0, "mkfs without force over a data file: %s", ft_errname(rc));
	struct stat st;
	FT_CHECK(stat(scratch, &st) == 0 && st.st_size == 10000, "the data file was changed");
	/* bad parameters */
	o.force = 1;
	o.size = 1 * MiB;
	FT_ERR(ferrite_mkfs(scratch, &o), EINVAL);
	FT_ERRMSG_ONE_LINE();
	o.size = GOLD_SIZE;
	o.mode = 7;
	FT_ERR(ferrite_mkfs(scratch, &o), EINVAL);
	o.mode = -1;
	FT_ERR(ferrite_mkfs(scratch, &o), EINVAL);
	o.mode = 0;
	FT_RUN(null_pool_call("mkfs", ferrite_mkfs(NULL, &o), 1));
	FT_ERR(ferrite_mkfs("", &o), ENOENT);
	rc = ferrite_mkfs("/dev/shm", &o);
	FT_CHECK(rc == -EISDIR || rc == -EINVAL, "mkfs on a directory: %s", ft_errname(rc));
	FT_ERR(ferrite_mkfs("/dev/shm/no/such/dir/x.pool", &o), ENOENT);
	return 0;
}

/* ---- arguments -------------------------------------------------------------- */

static int c_mount_bad_args(void)
{
	ferrite_fs *fs;
	/* a NULL pool path is either refused or means the default pool
	 * ($FERRITE_POOL, a private file here): then it must be that pool */
	int rc = ferrite_mount(NULL, NULL, &fs);
	if (rc == 0)
		FT_OK(ferrite_unmount(fs));
	FT_RUN(null_pool_call("mount", rc, 0));
	FT_RUN(null_pool_call("fsck", ferrite_fsck(NULL, 0, NULL, NULL, NULL, NULL), 0));
	NULLOK(ferrite_mount(gold, NULL, NULL));
	/* read_only is reserved and must be 0 */
	struct ferrite_mount_opts ro = {.read_only = 1};
	FT_ERR2(ferrite_mount(gold, &ro, &fs), EINVAL, EOPNOTSUPP);
	FT_ERRMSG_ONE_LINE();
	NULLOK(ferrite_unmount(NULL));
	char p[128];
	snprintf(p, sizeof(p), "/dev/shm/ferrite-badinput-missing-%d.pool", (int)getpid());
	FT_ERR(ferrite_fsck(p, 0, NULL, NULL, NULL, NULL), ENOENT);
	/* the pool is still usable */
	return check_gold(gold);
}

static ferrite_fs *mfs; /* mounted scratch pool for the argument cases */

static int mount_scratch(void)
{
	FT_RUN(copy_file(gold, scratch, -1));
	FT_OK(ferrite_mount(scratch, NULL, &mfs));
	return 0;
}

static int unmount_scratch(void)
{
	if (check_gold_content(mfs) != 0)
		return -1;
	FT_OK(ferrite_unmount(mfs));
	mfs = NULL;
	FT_EQ(ferrite_fsck(scratch, 0, NULL, NULL, NULL, NULL), FERRITE_FSCK_CLEAN);
	return 0;
}

static int c_null_and_empty(void)
{
	ferrite_fs *fs;
	struct stat st;
	struct statvfs sv;
	ferrite_dir *d;
	struct ferrite_dirent e;
	char buf[16];
	if (mount_scratch() != 0)
		return -1;
	fs = mfs;
	NULLOK(ferrite_open(fs, NULL, O_RDONLY, 0));
	NULLOK(ferrite_open(fs, NULL, O_CREAT | O_WRONLY, 0644));
	NULLOK(ferrite_stat(fs, NULL, &st));
	NULLOK(ferrite_lstat(fs, NULL, &st));
	NULLOK(ferrite_mkdir(fs, NULL, 0755));
	NULLOK(ferrite_rmdir(fs, NULL));
	NULLOK(ferrite_unlink(fs, NULL));
	NULLOK(ferrite_rename(fs, NULL, "/x", 0));
	NULLOK(ferrite_rename(fs, "/a", NULL, 0));
	NULLOK(ferrite_link(fs, NULL, "/x"));
	NULLOK(ferrite_link(fs, "/a", NULL));
	NULLOK(ferrite_symlink(fs, NULL, "/x"));
	NULLOK(ferrite_symlink(fs, "a", NULL));
	NULLOK(ferrite_readlink(fs, NULL, buf, sizeof(buf)));
	NULLOK(ferrite_chmod(fs, NULL, 0644));
	NULLOK(ferrite_chown(fs, NULL, 0, 0));
	NULLOK(ferrite_lchown(fs, NULL, 0, 0));
	NULLOK(ferrite_utimens(fs, NULL, NULL, 0));
	NULLOK(ferrite_access(fs, NULL, F_OK));
	NULLOK(ferrite_truncate(fs, NULL, 0));
	NULLOK(ferrite_opendir(fs, NULL, &d));
	/* NULL result pointers */
	NULLOK(ferrite_stat(fs, "/a", NULL));
	NULLOK(ferrite_lstat(fs, "/a", NULL));
	NULLOK(ferrite_statvfs(fs, NULL));
	NULLOK(ferrite_get_info(fs, NULL));
	NULLOK(ferrite_opendir(fs, "/", NULL));
	NULLOK(ferrite_readlink(fs, "/d/l", NULL, 10));
	int fd = FT_OK(ferrite_open(fs, "/a", O_RDWR, 0));
	NULLOK(ferrite_fstat(fs, fd, NULL));
	NULLOK(ferrite_read(fs, fd, NULL, 10));
	NULLOK(ferrite_write(fs, fd, NULL, 10));
	NULLOK(ferrite_pread(fs, fd, NULL, 10, 0));
	NULLOK(ferrite_pwrite(fs, fd, NULL, 10, 0));
	NULLOK(ferrite_readv(fs, fd, NULL, 1));
	NULLOK(ferrite_writev(fs, fd, NULL, 1));
	struct iovec bad = {NULL, 10};
	NULLOK(ferrite_writev(fs, fd, &bad, 1));
	NULLOK(ferrite_preadv(fs, fd, &bad, 1, 0));
	FT_EQ(ferrite_read(fs, fd, NULL, 0), 0);
	FT_EQ(ferrite_write(fs, fd, NULL, 0), 0);
	FT_OK(ferrite_close(fs, fd));
	FT_OK(ferrite_opendir(fs, "/", &d));
	NULLOK(ferrite_readdir(d, NULL));
	FT_OK(ferrite_closedir(d));
	NULLOK(ferrite_readdir(NULL, &e));
	NULLOK(ferrite_closedir(NULL));
	/* NULL file system */
	NULLOK(ferrite_open(NULL, "/a", O_RDONLY, 0));
	NULLOK(ferrite_stat(NULL, "/a", &st));
	NULLOK(ferrite_mkdir(NULL, "/x", 0755));
	NULLOK(ferrite_statvfs(NULL, &sv));
	FT_ERR2_NOCRASH(ferrite_read(NULL, 0, buf, 1), EBADF, EINVAL);
	/* empty paths */
	FT_ERR(ferrite_open(fs, "", O_RDONLY, 0), ENOENT);
	FT_ERR(ferrite_open(fs, "", O_CREAT | O_WRONLY, 0644), ENOENT);
	FT_ERR(ferrite_stat(fs, "", &st), ENOENT);
	FT_ERR(ferrite_lstat(fs, "", &st), ENOENT);
	FT_ERR(ferrite_mkdir(fs, "", 0755), ENOENT);
	FT_ERR(ferrite_rmdir(fs, ""), ENOENT);
	FT_ERR(ferrite_unlink(fs, ""), ENOENT);
	FT_ERR(ferrite_rename(fs, "", "/x", 0), ENOENT);
	FT_ERR(ferrite_rename(fs, "/a", "", 0), ENOENT);
	FT_ERR(ferrite_link(fs, "", "/x"), ENOENT);
	FT_ERR(ferrite_link(fs, "/a", ""), ENOENT);
	FT_ERR(ferrite_symlink(fs, "", "/x"), ENOENT);
	FT_ERR(ferrite_symlink(fs, "a", ""), ENOENT);
	FT_ERR(ferrite_readlink(fs, "", buf, sizeof(buf)), ENOENT);
	FT_ERR(ferrite_chmod(fs, "", 0644), ENOENT);
	FT_ERR(ferrite_chown(fs, "", 0, 0), ENOENT);
	FT_ERR(ferrite_utimens(fs, "", NULL, 0), ENOENT);
	FT_ERR(ferrite_access(fs, "", F_OK), ENOENT);
	FT_ERR(ferrite_truncate(fs, "", 0), ENOENT);
	FT_ERR(ferrite_opendir(fs, "", &d), ENOENT);
	FT_ERRMSG_ONE_LINE();
	/* nothing named "x" was made by any of the calls above */
	FT_ERR(ferrite_lstat(fs, "/x", &st), ENOENT);
	return unmount_scratch();
}

static int c_invalid_flags(void)
{
	struct stat st;
	if (mount_scratch() != 0)
		return -1;
	ferrite_fs *fs = mfs;
	FT_ERR(ferrite_open(fs, "/new", O_CREAT | O_DIRECTORY | O_RDWR, 0644), EINVAL);
	FT_ERRMSG_ONE_LINE();
	FT_ERR(ferrite_lstat(fs, "/new", &st), ENOENT);
	/* rename: only 0, RENAME_NOREPLACE, RENAME_EXCHANGE */
	FT_ERR(ferrite_rename(fs, "/a", "/z", RENAME_NOREPLACE | RENAME_EXCHANGE), EINVAL);
	FT_ERRMSG_ONE_LINE();
	/* RENAME_WHITEOUT exists in Linux (for overlayfs); ferrite.h excludes it */
	FT_ERR(ferrite_rename(fs, "/a", "/z", 1u << 2), EINVAL);
	FT_ERR(ferrite_rename(fs, "/a", "/z", 0x80000000u), EINVAL);
	FT_ERR(ferrite_lstat(fs, "/z", &st), ENOENT);
	/* fallocate: only 0, KEEP_SIZE, PUNCH_HOLE|KEEP_SIZE */
	int fd = FT_OK(ferrite_open(fs, "/a", O_RDWR, 0));
	FT_ERR(ferrite_fallocate(fs, fd, FALLOC_FL_PUNCH_HOLE, 0, 4096), EOPNOTSUPP);
	FT_ERRMSG_ONE_LINE();
	FT_ERR(ferrite_fallocate(fs, fd, 0x08 /* COLLAPSE_RANGE */, 0, 4096), EOPNOTSUPP);
	FT_ERR(ferrite_fallocate(fs, fd, 0x10 /* ZERO_RANGE */, 0, 4096), EOPNOTSUPP);
	FT_ERR(ferrite_fallocate(fs, fd, 0x20 /* INSERT_RANGE */, 0, 4096), EOPNOTSUPP);
	FT_ERR(ferrite_fallocate(fs, fd, 0x100, 0, 4096), EOPNOTSUPP);
	FT_ERR(ferrite_fallocate(fs, fd, -1, 0, 4096), EOPNOTSUPP);
	/* whence, access modes, utimens flags */
	FT_ERR(ferrite_lseek(fs, fd, 0, 5), EINVAL);
	FT_ERR(ferrite_lseek(fs, fd, 0, INT_MAX), EINVAL);
	FT_OK(ferrite_close(fs, fd));
	FT_ERR(ferrite_access(fs, "/a", 8), EINVAL);
	FT_ERR(ferrite_access(fs, "/a", -1), EINVAL);
	FT_ERR(ferrite_utimens(fs, "/a", NULL, ~AT_SYMLINK_NOFOLLOW), EINVAL);
	struct timespec t[2] = {{0, 1000000000}, {0, 0}};
	FT_ERR(ferrite_utimens(fs, "/a", t, 0), EINVAL);
	/* mode bits outside 07777 are ignored, the type comes from the call */
	FT_OK(ferrite_mkdir(fs, "/m", S_IFREG | 0755));
	FT_OK(ferrite_stat(fs, "/m", &st));
	FT_EQ(st.st_mode, S_IFDIR | 0755);
	fd = FT_OK(ferrite_open(fs, "/m/f", O_CREAT | O_WRONLY, S_IFDIR | 0640));
	FT_OK(ferrite_close(fs, fd));
	FT_OK(ferrite_stat(fs, "/m/f", &st));
	FT_EQ(st.st_mode, S_IFREG | 0640);
	FT_OK(ferrite_chmod(fs, "/m/f", S_IFDIR | 0600));
	FT_OK(ferrite_stat(fs, "/m/f", &st));
	FT_EQ(st.st_mode, S_IFREG | 0600);
	/* credentials */
	FT_ERR(ferrite_set_creds(1000, 1000, 1u << 20, (gid_t[]){1}), EINVAL);
	NULLOK(ferrite_set_creds(1000, 1000, 4, NULL));
	ferrite_reset_creds();
	FT_OK(ferrite_unlink(fs, "/m/f"));
	FT_OK(ferrite_rmdir(fs, "/m"));
	return unmount_scratch();
}

static int c_negative_lengths(void)
{
	if (mount_scratch() != 0)
		return -1;
	ferrite_fs *fs = mfs;
	char buf[8];
	int fd = FT_OK(ferrite_open(fs, "/d/b", O_RDWR, 0));
	FT_ERR(ferrite_ftruncate(fs, fd, -1), EINVAL);
	FT_ERRMSG_ONE_LINE();
	FT_ERR(ferrite_ftruncate(fs, fd, LLONG_MIN), EINVAL);
	FT_ERR(ferrite_truncate(fs, "/d/b", -4096), EINVAL);
	FT_ERR(ferrite_fallocate(fs, fd, 0, 0, -1), EINVAL);
	FT_ERR(ferrite_fallocate(fs, fd, 0, -1, 1), EINVAL);
	FT_ERR(ferrite_fallocate(fs, fd, 0, 0, 0), EINVAL);
	FT_ERR(ferrite_fallocate(fs, fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0, -1),
	       EINVAL);
	FT_ERR(ferrite_fallocate(fs, fd, 0, LLONG_MAX, LLONG_MAX), EFBIG);
	FT_ERR(ferrite_pread(fs, fd, buf, 1, -1), EINVAL);
	FT_ERR(ferrite_pwrite(fs, fd, "x", 1, LLONG_MIN), EINVAL);
	FT_ERR(ferrite_lseek(fs, fd, -1, SEEK_SET), EINVAL);
	FT_ERR(ferrite_lseek(fs, fd, LLONG_MIN, SEEK_END), EINVAL);
	struct iovec iov[2] = {{buf, 8}, {buf, (size_t)SSIZE_MAX + 1}};
	FT_ERR(ferrite_readv(fs, fd, iov, -1), EINVAL);
	FT_ERR(ferrite_writev(fs, fd, iov, 2), EINVAL); /* an iov_len above SSIZE_MAX */
	FT_ERR(ferrite_preadv(fs, fd, iov, 2, 0), EINVAL);
	FT_ERR(ferrite_readlink(fs, "/d/l", buf, 0), EINVAL);
	FT_OK(ferrite_close(fs, fd));
	return unmount_scratch();
}

static int c_fsck_bad_input(void)
{
	static const size_t lens[] = {0, 100, 5 * MiB};
	for (size_t i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
		FT_RUN(write_random_file(scratch, lens[i], 3 + i));
		int f = ferrite_fsck(scratch, 1, NULL, NULL, NULL, NULL);
		FT_CHECK(f < 0 || (f & (FERRITE_FSCK_OPERROR | FERRITE_FSCK_UNCORRECTED)),
			 "fsck -repair of %zu random bytes returned %d, expected a failure",
			 lens[i], f);
		struct stat st;
		FT_CHECK(stat(scratch, &st) == 0 && st.st_size == (off_t)lens[i],
			 "fsck changed the size of a foreign file");
	}
	int f = ferrite_fsck("/dev/shm", 0, NULL, NULL, NULL, NULL);
	FT_CHECK(f < 0 || f == FERRITE_FSCK_OPERROR, "fsck of a directory returned %d", f);
	return 0;
}

/* ---- ENOSPC ----------------------------------------------------------------- */

#define FILL_MAX 4096

static int c_enospc(void)
{
	static off_t written[FILL_MAX];
	static char chunk[1 * MiB];
	ferrite_fs *fs;
	struct stat st;
	const char *pool = scratch;
	struct ferrite_mkfs_opts o = {.size = 64ull * MiB, .force = 1};
	FT_OK(ferrite_mkfs(pool, &o));
	FT_OK(ferrite_mount(pool, NULL, &fs));
	FT_OK(ferrite_mkdir(fs, "/fill", 0755));
	uint64_t free_empty = ft_free_bytes(fs);
	/* fill with 1 MiB files until ENOSPC */
	int nfiles = 0, full = 0;
	char p[64];
	for (int i = 0; i < FILL_MAX && !full; i++) {
		snprintf(p, sizeof(p), "/fill/f%04d", i);
		int fd = ferrite_open(fs, p, O_CREAT | O_EXCL | O_WRONLY, 0644);
		if (fd == -ENOSPC) {
			FT_ERRMSG_ONE_LINE();
			FT_ERR(ferrite_lstat(fs, p, &st), ENOENT);
			break;
		}
		FT_CHECK(fd >= 0, "create %s: %s", p, ft_errname(fd));
		nfiles++;
		written[i] = 0;
		for (int k = 0; k < 4; k++) {
			size_t len = 256 * 1024;
			ft_fill(chunk, len, 1000 + (uint64_t)i, (uint64_t)written[i]);
			ssize_t w = ferrite_write(fs, fd, chunk, len);
			if (w == -ENOSPC) {
				FT_ERRMSG_ONE_LINE();
				full = 1;
				break;
			}
			FT_CHECK(w > 0, "write %s at %lld: %s", p, (long long)written[i],
				 ft_errname(w));
			written[i] += w;
			if ((size_t)w < len) { /* short: the pool is full */
				full = 1;
				break;
			}
		}
		FT_OK(ferrite_close(fs, fd));
	}
	FT_CHECK(full, "no ENOSPC after writing %d MiB to a 64 MiB pool", nfiles);
	/* at ENOSPC the size reflects exactly what was acknowledged */
	for (int i = 0; i < nfiles; i++) {
		snprintf(p, sizeof(p), "/fill/f%04d", i);
		if (expect_file(fs, p, (size_t)written[i], 1000 + (uint64_t)i) != 0)
			return -1;
	}
	/* a further write and a fallocate fail cleanly */
	snprintf(p, sizeof(p), "/fill/f%04d", nfiles - 1);
	int fd = FT_OK(ferrite_open(fs, p, O_WRONLY | O_APPEND, 0));
	ft_fill(chunk, sizeof(chunk), 1000 + (uint64_t)(nfiles - 1), (uint64_t)written[nfiles - 1]);
	ssize_t w = ferrite_write(fs, fd, chunk, sizeof(chunk));
	FT_CHECK(w == -ENOSPC || (w >= 0 && w < (ssize_t)sizeof(chunk)),
		 "write to a full pool: %s, expected -ENOSPC or a short count", ft_errname(w));
	if (w > 0)
		written[nfiles - 1] += w;
	FT_ERR(ferrite_fallocate(fs, fd, 0, written[nfiles - 1], 8 * MiB), ENOSPC);
	FT_ERR(ferrite_fallocate(fs, fd, FALLOC_FL_KEEP_SIZE, written[nfiles - 1], 8 * MiB),
	       ENOSPC);
	FT_OK(ferrite_fstat(fs, fd, &st));
	FT_EQ(st.st_size, written[nfiles - 1]);
	FT_OK(ferrite_close(fs, fd));
	if (expect_file(fs, p, (size_t)written[nfiles - 1], 1000 + (uint64_t)(nfiles - 1)) != 0)
		return -1;
	/* exhaust the inodes too: empty files until ENOSPC. Which resource runs
	 * out first (an inode, or the root's bucket for that name) depends on
	 * the name's hash, so go on until 64 names in a row are refused. */
	int ninodes = 0, tries = 0, refused = 0;
	unsigned char *made = calloc(4000000, 1); /* which /iNNNNNNN exist */
	FT_CHECK(made != NULL, "out of memory");
	for (; refused < 64; tries++) {
		FT_CHECK(tries < 4000000, "no ENOSPC after creating %d empty files", ninodes);
		snprintf(p, sizeof(p), "/i%07d", tries);
		int r = ferrite_open(fs, p, O_CREAT | O_EXCL | O_WRONLY, 0644);
		if (r == -ENOSPC) {
			FT_ERRMSG_ONE_LINE();
			FT_ERR(ferrite_lstat(fs, p, &st), ENOENT);
			refused++;
			continue;
		}
		FT_CHECK(r >= 0, "create %s: %s", p, ft_errname(r));
		FT_OK(ferrite_close(fs, r));
		made[tries] = 1;
		ninodes++;
	}
	/* a refused mkdir or symlink leaves nothing behind; one whose bucket
	 * still had room may succeed and is taken away again */
	int r = ferrite_mkdir(fs, "/newdir", 0755);
	FT_CHECK(r == 0 || r == -ENOSPC, "mkdir on a full pool: %s", ft_errname(r));
	if (r == 0)
		FT_OK(ferrite_rmdir(fs, "/newdir"));
	FT_ERR(ferrite_lstat(fs, "/newdir", &st), ENOENT);
	r = ferrite_symlink(fs, "target", "/newlink");
	FT_CHECK(r == 0 || r == -ENOSPC, "symlink on a full pool: %s", ft_errname(r));
	if (r == 0)
		FT_OK(ferrite_unlink(fs, "/newlink"));
	FT_ERR(ferrite_lstat(fs, "/newlink", &st), ENOENT);
	/* the root lists exactly what was created */
	FT_EQ(ft_count_entries(fs, "/"), 2 + 1 + ninodes);
	/* delete every other fill file and the empty files: space comes back */
	uint64_t free_full = ft_free_bytes(fs);
	uint64_t freed = 0;
	for (int i = 0; i < nfiles; i += 2) {
		snprintf(p, sizeof(p), "/fill/f%04d", i);
		FT_OK(ferrite_unlink(fs, p));
		freed += (uint64_t)written[i];
		written[i] = -1;
	}
	for (int i = 0; i < tries; i++) {
		if (!made[i])
			continue;
		snprintf(p, sizeof(p), "/i%07d", i);
		FT_OK(ferrite_unlink(fs, p));
	}
	free(made);
	uint64_t free_after = ft_free_bytes(fs);
	FT_CHECK(free_after + 2 * MiB >= free_full + freed,
		 "deleting %" PRIu64 " bytes must free them: free %" PRIu64 " at ENOSPC, %" PRIu64
		 " after",
		 freed, free_full, free_after);
	/* creating and writing work again */
	FT_OK(ferrite_mkdir(fs, "/newdir", 0755));
	fd = FT_OK(ferrite_open(fs, "/newdir/again", O_CREAT | O_WRONLY, 0644));
	size_t again = (size_t)(freed / 2) & ~(size_t)4095;
	for (size_t off = 0; off < again; off += sizeof(chunk)) {
		size_t len = again - off < sizeof(chunk) ? again - off : sizeof(chunk);
		ft_fill(chunk, len, 4242, off);
		FT_EQ(ferrite_write(fs, fd, chunk, len), (ssize_t)len);
	}
	FT_OK(ferrite_close(fs, fd));
	if (expect_file(fs, "/newdir/again", again, 4242) != 0)
		return -1;
	/* remount: everything is intact and fsck is clean */
	FT_OK(ferrite_unmount(fs));
	FT_EQ(ferrite_fsck(pool, 0, NULL, NULL, NULL, NULL), FERRITE_FSCK_CLEAN);
	FT_OK(ferrite_mount(pool, NULL, &fs));
	for (int i = 0; i < nfiles; i++) {
		snprintf(p, sizeof(p), "/fill/f%04d", i);
		if (written[i] < 0)
			FT_ERR(ferrite_lstat(fs, p, &st), ENOENT);
		else if (expect_file(fs, p, (size_t)written[i], 1000 + (uint64_t)i) != 0)
			return -1;
	}
	if (expect_file(fs, "/newdir/again", again, 4242) != 0)
		return -1;
	/* after deleting everything the free space is what it was */
	for (int i = 0; i < nfiles; i++) {
		snprintf(p, sizeof(p), "/fill/f%04d", i);
		if (written[i] >= 0)
			FT_OK(ferrite_unlink(fs, p));
	}
	FT_OK(ferrite_unlink(fs, "/newdir/again"));
	uint64_t free_end = ft_free_bytes(fs);
	FT_CHECK(free_end + 2 * MiB >= free_empty,
		 "free space after deleting everything: %" PRIu64 ", at start %" PRIu64, free_end,
		 free_empty);
	FT_OK(ferrite_unmount(fs));
	FT_EQ(ferrite_fsck(pool, 0, NULL, NULL, NULL, NULL), FERRITE_FSCK_CLEAN);
	return 0;
}

static const struct ft_case cases[] = {
    {"mount_missing", c_mount_missing, 0},
    {"mount_directory", c_mount_directory, 0},
    {"mount_empty_file", c_mount_empty_file, 0},
    {"mount_random", c_mount_random, 0},
    {"mount_truncated", c_mount_truncated, 0},
    {"mount_flipped_superblock", c_mount_flipped_superblock, 0},
    {"superblock_repair", c_superblock_repair, 0},
    {"mount_newer_version", c_mount_newer_version, 0},
    {"mount_version4", c_mount_version4, FT_TIER_SKIP},
    {"mount_busy", c_mount_busy, 0},
    {"mkfs_refusals", c_mkfs_refusals, 0},
    {"mount_bad_args", c_mount_bad_args, 0},
    {"null_and_empty", c_null_and_empty, 0},
    {"invalid_flags", c_invalid_flags, 0},
    {"negative_lengths", c_negative_lengths, 0},
    {"fsck_bad_input", c_fsck_bad_input, 0},
    {"enospc", c_enospc, 0},
};

static void after_case(const struct ft_case *c)
{
	ferrite_reset_creds();
	if (mfs)
		ferrite_unmount(mfs);
	mfs = NULL;
	unlink(scratch);
}

int main(int argc, char **argv)
{
	ferrite_fs *fs;
	gold = ft_pool_path("badinput", "gold");
	scratch = ft_pool_path("badinput", "scratch");
	struct ferrite_mkfs_opts o = {.size = GOLD_SIZE, .force = 1};
	int rc = ferrite_mkfs(gold, &o);
	if (rc == 0)
		rc = ferrite_mount(gold, NULL, &fs);
	if (rc != 0) {
		fprintf(stderr, "FAIL setup: mkfs/mount of %s: %s (%s)\n", gold, ft_errname(rc),
			ferrite_errmsg());
		return 1;
	}
	if (write_gold(fs) != 0 || check_gold_content(fs) != 0)
		return 1;
	rc = ferrite_unmount(fs);
	if (rc != 0 || ferrite_fsck(gold, 0, NULL, NULL, NULL, NULL) != FERRITE_FSCK_CLEAN) {
		fprintf(stderr, "FAIL setup: unmount %s / fsck of the gold pool not clean\n",
			ft_errname(rc));
		return 1;
	}
	return ft_run(cases, sizeof(cases) / sizeof(cases[0]), argc, argv, NULL, after_case);
}
