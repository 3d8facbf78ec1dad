/*
 * crafted_test.c -- pools crafted by a hostile user or damaged in one known
 * way, each a named case with its expected outcome: the call fails with
 * -EUCLEAN (never a crash, a hang or a store outside the pool), fsck says
 * so, and fsck -n leaves the image byte-identical.
 *
 *   crafted_test [CASE...]     (-l lists the cases)
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ferrite.h"
#include "fs/fs_format.h"
#include "fuzz.h"
#include "meta/meta_format.h"
#include "space/space_format.h"
#include "util/util.h"

static char pool[256];
static uint8_t *pristine, *with_orphan, *img;
static size_t len;
static int failures;

#define CHECK(c)                                                                                   \
	do {                                                                                       \
		if (!(c)) {                                                                        \
			fprintf(stderr, "  FAILED %s:%d: %s (%s)\n", __FILE__, __LINE__, #c,       \
				ferrite_errmsg());                                                 \
			return 1;                                                                  \
		}                                                                                  \
	} while (0)

static void put(void)
{
	int fd = open(pool, O_WRONLY | O_CLOEXEC);
	if (fd < 0 || pwrite(fd, img, len, 0) != (ssize_t)len)
		abort();
	close(fd);
}

static int unchanged(void)
{
	int fd = open(pool, O_RDONLY | O_CLOEXEC);
	void *m = mmap(NULL, len, PROT_READ, MAP_SHARED, fd, 0);
	close(fd);
	int same = m != MAP_FAILED && memcmp(m, img, len) == 0;
	if (m != MAP_FAILED)
		munmap(m, len);
	return same;
}

static void count_line(void *arg, const char *line)
{
	(void)line;
	++*(int *)arg;
}

/* fsck -n: returns its status; the image must not change. */
static int fsck_n(int *lines)
{
	*lines = 0;
	alarm(60); /* a hang is a failure, not a stuck CI */
	int rc = ferrite_fsck(pool, 0, count_line, lines, NULL, NULL);
	alarm(0);
	return unchanged() ? rc : -1000;
}

/* The inode of path in the undamaged pool. */
static struct fr_inode *inode_of(const char *path)
{
	memcpy(img, pristine, len);
	put();
	ferrite_fs *fs;
	struct stat st;
	if (ferrite_mount(pool, NULL, &fs))
		return NULL;
	int rc = ferrite_lstat(fs, path, &st);
	ferrite_unmount(fs);
	return rc ? NULL : (struct fr_inode *)(img + (st.st_ino << INO_SHIFT));
}

static struct log_entry *entry_of_slot(unsigned i, struct log_slot **slot)
{
	const struct fr_super *sb = (const struct fr_super *)img;
	*slot = (struct log_slot *)(img + sb->sb_log_off + (uint64_t)i * sb->sb_log_size);
	return (struct log_entry *)(*slot + 1);
}

/* A live entry (seq = retired + 1, valid fingerprint) of one run. */
static void craft_entry(unsigned slot_no, uint64_t off, uint32_t nwords, uint64_t word)
{
	struct log_slot *s;
	struct log_entry *e = entry_of_slot(slot_no, &s);
	struct log_run *r = (struct log_run *)(e + 1);
	memset(e, 0, 256);
	r->lr_off = off;
	r->lr_nwords = nwords;
	memcpy(r + 1, &word, 8);
	e->le_seq = s->ls_retired + 1;
	e->le_magic = LE_MAGIC;
	e->le_nruns = 1;
	e->le_nbytes = sizeof *r + 8;
	e->le_csum = 0;
	uint32_t c = fr_crc32c(0, e, sizeof *e);
	e->le_csum = fr_crc32c(c, r, e->le_nbytes);
}

/* ---- cases ---------------------------------------------------------------- */

static int log_wraparound(void)
{
	memcpy(img, pristine, len);
	craft_entry(0, 0xfffffffffffffff8ULL, 1, 0x4141414141414141ULL);
	put();
	ferrite_fs *fs;
	CHECK(ferrite_mount(pool, NULL, &fs) == -EUCLEAN);
	CHECK(strstr(ferrite_errmsg(), "log slot 0"));
	int lines;
	CHECK(fsck_n(&lines) == FERRITE_FSCK_UNCORRECTED && lines > 0);
	/* and the same run ending exactly at the pool's end + 8 */
	memcpy(img, pristine, len);
	craft_entry(1, ((const struct fr_super *)img)->sb_pool_size - 8, 2, 7);
	put();
	CHECK(ferrite_mount(pool, NULL, &fs) == -EUCLEAN);
	CHECK(unchanged());
	return 0;
}

static int log_entry_into_superblock(void)
{
	memcpy(img, pristine, len);
	craft_entry(2, SB_BACKUP_OFF, 1, 0); /* the backup superblock is no target */
	put();
	ferrite_fs *fs;
	CHECK(ferrite_mount(pool, NULL, &fs) == -EUCLEAN);
	memcpy(img, pristine, len);
	craft_entry(2, SB_SPACE_OFF + offsetof(struct sp_header, sph_ppt_root), 1, 0);
	put();
	CHECK(ferrite_mount(pool, NULL, &fs) == -EUCLEAN);
	CHECK(unchanged());
	return 0;
}

static int inode_live_count_huge(void)
{
	memcpy(img, pristine, len);
	struct fr_state *st = (struct fr_state *)(img + SB_STATE_OFF);
	st->st_pools[MP_INODE].mph_live = (1ULL << 62) + 1;
	put();
	int lines;
	CHECK(fsck_n(&lines) == FERRITE_FSCK_UNCORRECTED && lines > 0);
	return 0;
}

static int fsck_n_leaves_image_identical(void)
{
	/* an orphan to release and a (harmless) committed entry to replay:
	 * a mount would write both; fsck -n must not */
	memcpy(img, with_orphan, len);
	craft_entry(3, SB_STATE_OFF + offsetof(struct fr_state, st_rsvd), 1, 0);
	put();
	int lines;
	CHECK(fsck_n(&lines) == FERRITE_FSCK_CLEAN);
	CHECK(lines >= 1); /* "recovery is pending" */
	/* the undamaged pool too */
	memcpy(img, pristine, len);
	put();
	CHECK(fsck_n(&lines) == FERRITE_FSCK_CLEAN && lines == 0);
	/* a read-only pool file: -n needs no write permission */
	memcpy(img, with_orphan, len);
	put();
	CHECK(chmod(pool, 0400) == 0);
	int rc = fsck_n(&lines);
	chmod(pool, 0600);
	CHECK(rc == FERRITE_FSCK_CLEAN);
	return 0;
}

static int size_beyond_partition(void)
{
	struct fr_inode *ip = inode_of("/data/tiny");
	CHECK(ip);
	ip->i_size = 9ULL << 30; /* one flipped byte: a 9 GB file */
	put();
	ferrite_fs *fs;
	CHECK(ferrite_mount(pool, NULL, &fs) == 0);
	struct stat st;
	CHECK(ferrite_stat(fs, "/data/tiny", &st) == -EUCLEAN);
	CHECK(strstr(ferrite_errmsg(), "size beyond its partition"));
	CHECK(ferrite_stat(fs, "/data/mid", &st) == 0); /* the rest is usable */
	ferrite_unmount(fs);
	memcpy(img, pristine, len);
	ip->i_size = 9ULL << 30;
	put();
	int lines;
	CHECK(fsck_n(&lines) == FERRITE_FSCK_UNCORRECTED);
	return 0;
}

/* A window of /data/large pointing just past the end of the pool: reading it
 * once raised SIGBUS. */
static int window_outside_pool(void)
{
	struct fr_inode *ip = inode_of("/data/large");
	CHECK(ip && ip->i_level >= 3);
	uint64_t slot = fz_window_entry_off(img, len, ip->i_part);
	CHECK(slot);
	uint64_t e = ((const struct fr_super *)img)->sb_pool_size | 1; /* PPT_HUGE */
	memcpy(img + slot, &e, 8);
	put();
	ferrite_fs *fs;
	CHECK(ferrite_mount(pool, NULL, &fs) == 0);
	int fd = ferrite_open(fs, "/data/large", O_RDONLY, 0);
	CHECK(fd >= 0);
	char buf[4096];
	CHECK(ferrite_pread(fs, fd, buf, sizeof buf, 0) == -EUCLEAN);
	ferrite_close(fs, fd);
	CHECK(ferrite_truncate(fs, "/data/large", 0) == -EUCLEAN); /* no release of a guess */
	ferrite_unmount(fs);
	return 0;
}

/* A page of a small file's table pointing past the pool. */
static int pte_outside_pool(void)
{
	struct fr_inode *ip = inode_of("/small/f5");
	CHECK(ip && ip->i_level < 3 && ip->i_level != I_NO_PART);
	uint64_t slot = fz_window_entry_off(img, len, ip->i_part);
	uint64_t went;
	memcpy(&went, img + slot, 8);
	CHECK((went & 3) == 2);
	struct sp_ptable *pt = (struct sp_ptable *)(img + (went & ~3ULL));
	pt->pt_pte[(ip->i_part >> 12) & 511] = 0xfffffff0u;
	put();
	ferrite_fs *fs;
	CHECK(ferrite_mount(pool, NULL, &fs) == 0);
	int fd = ferrite_open(fs, "/small/f5", O_RDWR, 0);
	CHECK(fd >= 0);
	char buf[64];
	CHECK(ferrite_pread(fs, fd, buf, sizeof buf, 0) == -EUCLEAN);
	ferrite_close(fs, fd);
	ferrite_unmount(fs);
	int lines;
	CHECK(fsck_n(&lines) == FERRITE_FSCK_UNCORRECTED);
	return 0;
}

/* A page of a file pointing at a free page: releasing it would free it
 * twice and corrupt the allocator. */
static int double_release(void)
{
	struct fr_inode *ip = inode_of("/small/f5");
	CHECK(ip);
	uint64_t slot = fz_window_entry_off(img, len, ip->i_part);
	uint64_t went;
	memcpy(&went, img + slot, 8);
	struct sp_ptable *pt = (struct sp_ptable *)(img + (went & ~3ULL));
	const struct sp_header *sh = (const struct sp_header *)(img + SB_SPACE_OFF);
	/* the first page of some free block, of any order */
	uint64_t free_pg = 0;
	for (int k = 0; k < BUD_ORDERS && !free_pg; k++) {
		const uint64_t *bm = (const uint64_t *)(img + sh->sph_bitmap_off[k]);
		for (uint64_t b = 0; b < sh->sph_nwords[k] * 64 && !free_pg; b++)
			if (bm[b >> 6] >> (b & 63) & 1)
				free_pg = sh->sph_data_page + (b << k);
	}
	CHECK(free_pg);
	pt->pt_pte[(ip->i_part >> 12) & 511] = (uint32_t)free_pg;
	put();
	ferrite_fs *fs;
	CHECK(ferrite_mount(pool, NULL, &fs) == 0);
	int rc = ferrite_unlink(fs, "/small/f5");
	if (rc != -EUCLEAN)
		fprintf(stderr, "  unlink: %d\n", rc);
	CHECK(rc == -EUCLEAN);
	CHECK(strstr(ferrite_errmsg(), "released twice"));
	ferrite_unmount(fs);
	CHECK(unchanged()); /* the failed unlink committed nothing */
	return 0;
}

static int free_list_garbage(void)
{
	memcpy(img, pristine, len);
	struct fr_state *st = (struct fr_state *)(img + SB_STATE_OFF);
	st->st_pools[MP_INODE].mph_free_head = 0xdeadbeef000ULL;
	put();
	ferrite_fs *fs;
	CHECK(ferrite_mount(pool, NULL, &fs) == 0);
	CHECK(ferrite_open(fs, "/new", O_CREAT | O_WRONLY, 0644) == -EUCLEAN);
	CHECK(strstr(ferrite_errmsg(), "free list damaged"));
	ferrite_unmount(fs);
	CHECK(unchanged());
	int lines;
	CHECK(fsck_n(&lines) == FERRITE_FSCK_UNCORRECTED);
	return 0;
}

/* A null list (nullfile.c N1) that names no inode: a create refuses it,
 * names nothing, and fsck reports it; so does a count that lies. */
static int null_list_garbage(void)
{
	memcpy(img, pristine, len);
	struct fr_state *st = (struct fr_state *)(img + SB_STATE_OFF);
	st->st_null_head = 0xdeadbeef000ULL;
	st->st_null_count = 1ULL << 62;
	put();
	ferrite_fs *fs;
	CHECK(ferrite_mount(pool, NULL, &fs) == 0);
	struct statvfs sv;
	CHECK(ferrite_statvfs(fs, &sv) == 0 && sv.f_bfree <= sv.f_blocks);
	CHECK(ferrite_open(fs, "/new", O_CREAT | O_WRONLY, 0644) == -EUCLEAN);
	CHECK(strstr(ferrite_errmsg(), "null file list damaged"));
	ferrite_unmount(fs);
	CHECK(unchanged());
	int lines;
	CHECK(fsck_n(&lines) == FERRITE_FSCK_UNCORRECTED && lines > 0);
	return 0;
}

static int dentry_to_free_inode(void)
{
	struct fr_inode *ip = inode_of("/data/tiny");
	CHECK(ip);
	ip->i_oob.oob_status = MP_FREE; /* its names now point to a free inode */
	put();
	ferrite_fs *fs;
	CHECK(ferrite_mount(pool, NULL, &fs) == 0);
	struct stat st;
	CHECK(ferrite_stat(fs, "/small/hard", &st) == -EUCLEAN);
	ferrite_unmount(fs);
	return 0;
}

/* The allocator's bitmaps moved down over the state page and the log slots,
 * the layout otherwise consistent: the space header has no checksum, and
 * the allocator would have stored its bits over the logs. */
static int bitmaps_over_logs(void)
{
	memcpy(img, pristine, len);
	struct sp_header *sh = (struct sp_header *)(img + SB_SPACE_OFF);
	uint64_t delta = sh->sph_bitmap_off[0] - (SB_SPACE_OFF + 4096);
	CHECK(delta > 0 && delta % 64 == 0);
	for (int k = 0; k < BUD_ORDERS; k++) {
		sh->sph_bitmap_off[k] -= delta;
		sh->sph_summary_off[k] -= delta;
	}
	put();
	ferrite_fs *fs;
	CHECK(ferrite_mount(pool, NULL, &fs) == -EUCLEAN);
	CHECK(strstr(ferrite_errmsg(), "allocator layout"));
	CHECK(unchanged());
	int lines;
	CHECK(fsck_n(&lines) == FERRITE_FSCK_UNCORRECTED && lines > 0);
	return 0;
}

/* A directory whose ".." names no inode: rename's check that a directory
 * does not move below itself walks up through it. */
static int parent_outside_pool(void)
{
	struct fr_inode *ip = inode_of("/data");
	CHECK(ip && S_ISDIR(ip->i_mode));
	ip->i_parent = 0xdeadbeefULL << 20;
	put();
	ferrite_fs *fs;
	CHECK(ferrite_mount(pool, NULL, &fs) == 0);
	CHECK(ferrite_rename(fs, "/small", "/data/small", 0) == -EUCLEAN);
	CHECK(strstr(ferrite_errmsg(), "no live parent"));
	struct stat st;
	CHECK(ferrite_stat(fs, "/small/f5", &st) == 0); /* nothing moved */
	ferrite_unmount(fs);
	int lines;
	CHECK(fsck_n(&lines) == FERRITE_FSCK_UNCORRECTED);
	return 0;
}

/* An attribute block moved off its buddy alignment, intact otherwise: it
 * could be read but not released (nor its inode unlinked), so it is damage
 * at first sight and fsck says so. */
static int xattr_block_misaligned(void)
{
	struct fr_inode *ip = inode_of("/big");
	CHECK(ip && ip->i_xattr);
	const struct fr_xblock *xb = (const struct fr_xblock *)(img + ip->i_xattr);
	CHECK(xb->xb_order >= 1);
	size_t bytes = sizeof *xb + xb->xb_bytes;
	memmove(img + ip->i_xattr + 4096, img + ip->i_xattr, bytes);
	ip->i_xattr += 4096;
	put();
	ferrite_fs *fs;
	CHECK(ferrite_mount(pool, NULL, &fs) == 0);
	char v[8];
	CHECK(ferrite_getxattrat(fs, AT_FDCWD, "/big", 0, "user.big", v, sizeof v) == -EUCLEAN);
	ferrite_unmount(fs);
	int lines;
	CHECK(fsck_n(&lines) == FERRITE_FSCK_UNCORRECTED && lines > 0);
	return 0;
}

static const struct {
	const char *name;
	int (*fn)(void);
} cases[] = {
    {"log_wraparound", log_wraparound},
    {"log_entry_into_superblock", log_entry_into_superblock},
    {"inode_live_count_huge", inode_live_count_huge},
    {"fsck_n_leaves_image_identical", fsck_n_leaves_image_identical},
    {"size_beyond_partition", size_beyond_partition},
    {"window_outside_pool", window_outside_pool},
    {"pte_outside_pool", pte_outside_pool},
    {"double_release", double_release},
    {"free_list_garbage", free_list_garbage},
    {"null_list_garbage", null_list_garbage},
    {"dentry_to_free_inode", dentry_to_free_inode},
    {"bitmaps_over_logs", bitmaps_over_logs},
    {"parent_outside_pool", parent_outside_pool},
    {"xattr_block_misaligned", xattr_block_misaligned},
};

int main(int argc, char **argv)
{
	size_t n = sizeof cases / sizeof cases[0];
	if (argc > 1 && !strcmp(argv[1], "-l")) {
		for (size_t i = 0; i < n; i++)
			puts(cases[i].name);
		return 0;
	}
	snprintf(pool, sizeof pool, "/dev/shm/ferrite-crafted-%d.pool", (int)getpid());
	if (fz_build(pool, 32ULL << 20, &pristine, &with_orphan, &len)) {
		fprintf(stderr, "crafted_test: cannot build the pool: %s\n", ferrite_errmsg());
		return 2;
	}
	img = malloc(len);
	for (size_t i = 0; i < n; i++) {
		int want = argc == 1;
		for (int a = 1; a < argc; a++)
			want |= !strcmp(argv[a], cases[i].name);
		if (!want)
			continue;
		/* each case in a child: a failed check leaves no mount behind */
		fflush(stdout);
		pid_t pid = fork();
		if (pid == 0)
			_exit(cases[i].fn());
		int st, rc;
		rc = waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st);
		printf("%-32s %s\n", cases[i].name, rc ? "FAILED" : "ok");
		failures += rc != 0;
	}
	unlink(pool);
	free(img);
	free(pristine);
	free(with_orphan);
	return failures ? 1 : 0;
}
