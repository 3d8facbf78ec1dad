/*
 * dir_damage_test.c -- crafted damage to each directory structure (issue
 * 12: everything read from PM is untrusted input). Each case builds a pool
 * with a small directory (/s), a full small one (/full) and a hashed one
 * (/l), breaks one field in place, then checks that
 *   - lookup, readdir, create and unlink of the damaged name fail with
 *     -EUCLEAN and a message naming the directory (where the damage leaves
 *     the name reachable at all -- a name changed to "a/b" is simply gone);
 *   - inserting many new names fails where the damage is on their path;
 *   - dir_check (fsck's directory check) and a whole-pool fsck report it;
 *   - nothing crashes or hangs: run it in the ASan + UBSan build, which
 *     also catches out-of-bounds reads, shifts >= 64 and misaligned access.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>

#include "fs/dir_impl.h"
#include "unit.h"

static const char *pool;
static ferrite_fs *fs;

#define NLARGE 400
#define NFULL  64

static void long_name(char *buf, int i)
{
	sprintf(buf, "a-long-name-that-does-not-fit-in-the-dentry-itself-%03d", i);
}

static int touch(const char *path)
{
	int fd = ferrite_open(fs, path, O_CREAT | O_WRONLY, 0644);
	if (fd < 0)
		return fd;
	ferrite_close(fs, fd);
	return 0;
}

static int setup(void)
{
	pool = unit_pool_path("dirdmg");
	unlink(pool);
	struct ferrite_mkfs_opts o = {.size = 64 * FR_MIB};
	if (ferrite_mkfs(pool, &o) || ferrite_mount(pool, NULL, &fs))
		return 1;
	char p[300], n[200];
	int rc = ferrite_mkdir(fs, "/s", 0755) | ferrite_mkdir(fs, "/l", 0755) |
		 ferrite_mkdir(fs, "/full", 0755) | ferrite_mkdir(fs, "/e", 0755);
	const char *small[] = {"/s/a", "/s/bb", "/s/ccc"};
	for (int i = 0; i < 3; i++)
		rc |= touch(small[i]);
	for (int i = 0; i < 2; i++) {
		long_name(n, i);
		sprintf(p, "/s/%s", n);
		rc |= touch(p);
	}
	for (int i = 0; i < NLARGE; i++) {
		if (i % 10 == 3)
			long_name(n, i);
		else
			sprintf(n, "f%d", i);
		sprintf(p, "/l/%s", n);
		rc |= touch(p);
	}
	for (int i = 0; i < NFULL; i++) {
		sprintf(p, "/full/g%d", i);
		rc |= touch(p);
	}
	rc |= touch("/e/x") | ferrite_unlink(fs, "/e/x");
	return rc;
}

static uint64_t ino_at(const char *path)
{
	struct stat st;
	return ferrite_lstat(fs, path, &st) ? 0 : st.st_ino;
}

static struct fr_inode *dino(const char *dir)
{
	return ino_ptr(fs, ino_at(dir));
}

static struct fr_dentry *dent(const char *dir, const char *name)
{
	struct fr_dentry *d = NULL;
	if (dir_lookup(fs, NULL, dino(dir), name, strlen(name), &d))
		return NULL;
	return d;
}

static struct fr_darray *darr(const char *dir)
{
	return meta_ptr(&fs->m, dino(dir)->i_dents);
}

static struct fr_dirhdr *hdr(void)
{
	return dir_page(fs, NULL, dino("/l"), 0);
}

/* The bucket and the array slot serving name in /l. */
static struct fr_bucket *bucket_of(const char *name)
{
	return (struct fr_bucket *)((uintptr_t)dent("/l", name) & ~(uintptr_t)4095);
}

/* Sets every array slot pointing to name's bucket (so lookups, which use
 * the name's slot, and readdir, which uses the first slot, both see it). */
static void set_slots(const char *name, uint32_t val)
{
	struct fr_dirhdr *h = hdr();
	struct fr_bucket *b = bucket_of(name);
	uint32_t g = h->dh_depth, d = b->db_depth;
	uint64_t s0 = b->db_prefix << (g - d);
	for (uint64_t s = s0; s < s0 + (1ULL << (g - d)); s++) {
		uint32_t *arr = dir_page(fs, NULL, dino("/l"), h->dh_array[s / DH_SLOTS_PER_PAGE]);
		arr[s % DH_SLOTS_PER_PAGE] = val;
	}
}

/* A name of /l whose bucket has an odd prefix (going back one bucket from
 * it is what made readdir loop). */
static char victim_odd[64];
static const char *odd_prefix_name(void)
{
	for (int i = 0; i < NLARGE; i++) {
		if (i % 10 == 3)
			continue;
		sprintf(victim_odd, "f%d", i);
		if (bucket_of(victim_odd)->db_prefix & 1)
			return victim_odd;
	}
	return "f0";
}

static char long0[64], long13[64];

/* ---- the checks every case runs ------------------------------------------ */

enum {
	X_LOOKUP = 1,  /* stat of the victim: -EUCLEAN */
	X_READDIR = 2, /* reading the directory: -EUCLEAN */
	X_CREATE = 4,  /* O_CREAT|O_EXCL of the victim: fails */
	X_UNLINK = 8,  /* unlink of the victim: -EUCLEAN */
	X_INSERT = 16, /* creating 200 new names: some fail */
	X_ALL = X_LOOKUP | X_READDIR | X_CREATE | X_UNLINK,
	X_NOFSCK = 32, /* no whole-pool fsck (see the case) */
};

static char readdir_msg[512];

static int readdir_rc(const char *dir)
{
	ferrite_dir *d;
	int rc = ferrite_opendir(fs, dir, &d);
	if (rc)
		return rc;
	struct ferrite_dirent e;
	long n = 0;
	while ((rc = ferrite_readdir(d, &e)) > 0 && n < 100000)
		n++;
	snprintf(readdir_msg, sizeof(readdir_msg), "%s", ferrite_errmsg());
	ferrite_closedir(d);
	return rc < 0 ? rc : n >= 100000 ? -ELOOP : 0;
}

static int names_directory(const char *m)
{
	if (m && strstr(m, "directory ") && strstr(m, "fsck"))
		return 1;
	fprintf(stderr, "  message: %s\n", m ? m : "(none)");
	return 0;
}

static void count_line(void *arg, const char *line)
{
	(void)line;
	++*(int *)arg;
}

static int run(const char *dir, const char *victim, void (*poke)(void), int expect)
{
	CHECK_EQ(setup(), 0);
	strcpy(long0, "");
	long_name(long0, 0);
	long_name(long13, 13);
	poke();
	char path[512];
	snprintf(path, sizeof(path), "%s/%s", dir, victim);
	struct stat st;
	int rc = ferrite_stat(fs, path, &st);
	if (expect & X_LOOKUP) {
		CHECK_EQ(rc, -EUCLEAN);
		CHECK(names_directory(ferrite_errmsg()));
	}
	rc = readdir_rc(dir);
	CHECK(rc != -ELOOP);
	if (expect & X_READDIR) {
		CHECK_EQ(rc, -EUCLEAN);
		CHECK(names_directory(readdir_msg));
	}
	rc = ferrite_open(fs, path, O_CREAT | O_EXCL | O_WRONLY, 0644);
	if (rc >= 0)
		ferrite_close(fs, rc);
	if (expect & X_CREATE)
		CHECK(rc < 0);
	if (expect & X_INSERT) {
		int failed = 0;
		for (int i = 0; i < 200; i++) {
			char p[300];
			snprintf(p, sizeof(p), "%s/new-%d", dir, i);
			failed += touch(p) < 0;
		}
		CHECK(failed > 0);
	}
	rc = ferrite_unlink(fs, path);
	if (expect & X_UNLINK)
		CHECK_EQ(rc, -EUCLEAN);
	int lines = 0;
	CHECK(dir_check(fs, dino(dir), NULL, NULL, count_line, &lines) > 0);
	CHECK(lines > 0);
	CHECK_EQ(ferrite_unmount(fs), 0);
	if (!(expect & X_NOFSCK)) {
		rc = ferrite_fsck(pool, 0, NULL, NULL, NULL, NULL);
		CHECK(rc > 0 && (rc & FERRITE_FSCK_UNCORRECTED));
	}
	unlink(pool);
	return 0;
}

#define CASE(name, dir, victim, expect)                                                            \
	static void poke_##name(void);                                                             \
	static int name(void)                                                                      \
	{                                                                                          \
		return run(dir, victim, poke_##name, expect);                                      \
	}                                                                                          \
	static void poke_##name(void)

/* ---- buckets ----------------------------------------------------------------- */

CASE(bucket_depth_64, "/l", "f7", X_ALL)
{
	bucket_of("f7")->db_depth = 64;
}
CASE(bucket_depth_200, "/l", "f7", X_ALL)
{
	bucket_of("f7")->db_depth = 200;
}
CASE(bucket_depth_negative, "/l", "f7", X_ALL)
{
	bucket_of("f7")->db_depth = (uint16_t)-1;
}
CASE(bucket_prefix_no_advance, "/l", victim_odd, X_ALL)
{
	bucket_of(odd_prefix_name())->db_prefix ^= 1;
}
CASE(bucket_prefix_huge, "/l", "f7", X_ALL)
{
	bucket_of("f7")->db_prefix = ~0ULL;
}
CASE(bucket_bad_magic, "/l", "f7", X_ALL)
{
	bucket_of("f7")->db_magic = 0;
}
CASE(bucket_used_beyond, "/l", "f7", X_ALL)
{
	struct fr_bucket *b = bucket_of("f7");
	b->db_used |= 1ULL << 63;
	b->db_count++; /* the count agrees: only the mask is wrong */
}
CASE(bucket_count_wrong, "/l", "f7", X_ALL)
{
	bucket_of("f7")->db_count += 5;
}
CASE(bucket_duplicate_hash, "/l", "f7", X_READDIR)
{
	/* a second entry of f7's bucket takes f7's stored hash (R1) */
	struct fr_bucket *b = bucket_of("f7");
	struct fr_dentry *d = dent("/l", "f7");
	uint64_t used = b->db_used & ~(1ULL << (d - b->db_ent));
	int i = __builtin_ctzll(used);
	b->db_ent[i].d_hash = d->d_hash;
	b->db_fp[i] = dent_fp(d->d_hash);
}
CASE(bucket_split_damaged, "/l", "f7", X_READDIR | X_INSERT)
{
	/* the bucket claims every slot: the split copies stale slots. Their
	 * hash must lie outside the bucket's range whatever prefix the pool's
	 * random hash seed gave it: 1 belongs to the bucket of prefix 0. */
	struct fr_bucket *b = bucket_of("f7");
	for (int i = 0; i < NLARGE && b->db_count == DB_SLOTS; i++) {
		char n[16];
		sprintf(n, "f%d", i);
		if (i % 10 != 3)
			b = bucket_of(n);
	}
	uint64_t outside = b->db_prefix ? 1 : (1ULL << 62) | 1;
	b->db_used = cap_mask(DB_SLOTS);
	b->db_count = DB_SLOTS;
	for (int i = 0; i < DB_SLOTS; i++)
		if (!b->db_ent[i].d_ino)
			b->db_ent[i].d_hash = outside;
}

/* ---- the index header and array ---------------------------------------------- */

CASE(dh_depth_63, "/l", "f7", X_ALL | X_INSERT)
{
	hdr()->dh_depth = 63;
}
CASE(dh_depth_beyond_array, "/l", "f7", X_ALL | X_INSERT)
{
	hdr()->dh_depth = DH_MAX_DEPTH + 1;
}
CASE(dh_narray_0, "/l", "f7", X_ALL | X_INSERT)
{
	hdr()->dh_narray = 0;
}
CASE(dh_narray_beyond_max, "/l", "f7", X_ALL | X_INSERT)
{
	hdr()->dh_narray = DH_MAX_ARRAY + 1;
}
CASE(dh_narray_all_ones, "/l", "f7", X_ALL | X_INSERT)
{
	hdr()->dh_narray = ~0u;
}
CASE(dh_npages_wrong, "/l", "f7", X_ALL | X_INSERT)
{
	hdr()->dh_npages += 1000;
}
CASE(dh_bad_magic, "/l", "f7", X_ALL | X_INSERT)
{
	hdr()->dh_magic = 0;
}
CASE(dh_array_beyond_npages, "/l", "f7", X_ALL | X_INSERT)
{
	struct fr_dirhdr *h = hdr();
	h->dh_array[0] = h->dh_npages + 3;
}
CASE(array_slot_beyond_npages, "/l", "f7", X_ALL)
{
	set_slots("f7", hdr()->dh_npages + 100);
}
CASE(array_slot_all_ones, "/l", "f7", X_ALL)
{
	set_slots("f7", ~0u);
}
CASE(array_slot_header, "/l", "f7", X_ALL)
{
	set_slots("f7", 0);
}
CASE(array_slot_array_page, "/l", "f7", X_ALL)
{
	set_slots("f7", hdr()->dh_array[0]);
}

/* ---- small directories --------------------------------------------------------- */

CASE(small_used_beyond, "/s", "a", X_ALL | X_INSERT)
{
	/* /s has 5 entries: a 16-entry array */
	darr("/s")->da_used |= 1ULL << 40;
	dino("/s")->i_nentries++;
}
CASE(small_count_wrong, "/s", "a", X_ALL | X_INSERT)
{
	dino("/s")->i_nentries += 3;
}
/* X_NOFSCK: fsck.c's count_names indexes its per-class table by i_dclass
 * before dir_check has said the class is bad (UBSan: index 200 out of
 * bounds); dir_check itself reports the damage. */
CASE(dclass_out_of_range, "/s", "a", X_ALL | X_INSERT | X_NOFSCK)
{
	dino("/s")->i_dclass = 200;
}
CASE(dclass_name_pool, "/s", "a", X_ALL | X_INSERT)
{
	dino("/s")->i_dclass = MP_NAME64;
}
CASE(dents_not_an_array, "/s", "a", X_ALL | X_INSERT)
{
	dino("/s")->i_dents = ino_at("/s/bb") << INO_SHIFT; /* an inode */
}
CASE(dents_garbage, "/s", "a", X_ALL | X_INSERT)
{
	dino("/s")->i_dents = 0x123457;
}
CASE(dents_outside_pool, "/s", "a", X_ALL | X_INSERT)
{
	dino("/s")->i_dents = ~0ULL - 100;
}
CASE(dkind_unknown, "/s", "a", X_ALL | X_INSERT)
{
	dino("/s")->i_dkind = 7;
}
CASE(convert_bad_hash, "/full", "g5", X_READDIR | X_INSERT)
{
	dent("/full", "g5")->d_hash |= 1ULL << 63;
}
CASE(release_bad_array, "/e", "x", 0)
{
	/* an empty directory whose array is not one: rmdir must not free it */
	struct fr_inode *e = dino("/e");
	e->i_dents = ino_at("/s/a") << INO_SHIFT;
	ferrite_rmdir(fs, "/e");
	/* the directory is gone (its array leaked, fsck's job); recreate one with
	 * the same damage so the checks below have something to report */
	ferrite_mkdir(fs, "/e", 0755);
	dino("/e")->i_dents = ino_at("/s/a") << INO_SHIFT;
}

/* ---- dentries ------------------------------------------------------------------ */

CASE(dent_namelen_0, "/s", "bb", X_ALL)
{
	dent("/s", "bb")->d_namelen = 0;
}
CASE(dent_namelen_0_large, "/l", "f7", X_ALL)
{
	dent("/l", "f7")->d_namelen = 0;
}
CASE(dent_inline_too_long, "/s", "bb", X_ALL)
{
	dent("/s", "bb")->d_namelen = D_INLINE_NAME + 1;
}
CASE(dent_name_slash, "/s", "bb", X_READDIR)
{
	dent("/s", "bb")->d_name[1] = '/'; /* "b/": "bb" is gone */
}
CASE(dent_name_nul, "/s", "bb", X_READDIR)
{
	dent("/s", "bb")->d_name[1] = 0;
}
CASE(dent_name_dot, "/s", "a", X_READDIR)
{
	dent("/s", "a")->d_name[0] = '.';
}
CASE(dent_name_dotdot, "/s", "bb", X_READDIR)
{
	memcpy(dent("/s", "bb")->d_name, "..", 2);
}
CASE(dent_name_off_misaligned, "/s", long0, X_ALL)
{
	dent("/s", long0)->d_name_off += 1;
}
CASE(dent_name_off_outside_pool, "/s", long0, X_ALL)
{
	dent("/s", long0)->d_name_off = fs->m.pool.size + 4096;
}
CASE(dent_name_off_wraps, "/s", long0, X_ALL)
{
	dent("/s", long0)->d_name_off = ~0ULL - 7;
}
CASE(dent_name_off_free_entry, "/s", long0, X_ALL)
{
	/* a name entry of the same class that was freed */
	char p[300], n[200];
	long_name(n, 99);
	sprintf(p, "/s/%s", n);
	touch(p);
	uint64_t off = dent("/s", n)->d_name_off;
	ferrite_unlink(fs, p);
	dent("/s", long0)->d_name_off = off;
}
CASE(dent_name_off_large_dir, "/l", long13, X_ALL)
{
	dent("/l", long13)->d_name_off += 8;
}
CASE(dent_short_name_in_pool, "/s", "bb", X_ALL)
{
	struct fr_dentry *d = dent("/s", "bb");
	d->d_flags = D_EXTNAME;
	d->d_name_off = dent("/s", long0)->d_name_off;
}
CASE(dent_unknown_flags, "/s", "bb", X_ALL)
{
	dent("/s", "bb")->d_flags |= 0x80;
}
CASE(dent_bad_type, "/s", "bb", X_ALL)
{
	dent("/s", "bb")->d_type = 3;
}
CASE(dent_hash_out_of_range, "/l", "f7", X_READDIR)
{
	dent("/l", "f7")->d_hash |= 1ULL << 63;
}
CASE(dent_ino_free, "/s", "bb", X_LOOKUP | X_CREATE | X_UNLINK)
{
	/* readdir hands out numbers only (no lookup by number): it passes */
	touch("/s/gone");
	uint64_t ino = ino_at("/s/gone");
	ferrite_unlink(fs, "/s/gone");
	dent("/s", "bb")->d_ino = ino;
}
CASE(dent_ino_outside_pool, "/s", "bb", X_ALL)
{
	dent("/s", "bb")->d_ino = 1ULL << 40;
}
CASE(dent_ino_zero, "/l", "f7", X_ALL)
{
	dent("/l", "f7")->d_ino = 0;
}

/* ---- write paths given what a failed lookup leaves them ---------------------- */

/* dir_remove of no entry, or of another directory's entry: -EUCLEAN, and
 * the transaction cannot commit the caller's other changes (namei.c goes on
 * after it). */
static int remove_foreign_entry_fails_the_transaction(void)
{
	CHECK_EQ(setup(), 0);
	struct fr_inode *s = dino("/s");
	uint32_t nlink = s->i_nlink;
	const char *dirs[] = {NULL, "/l", "/full", "/s"}, *names[] = {NULL, "f7", "g1", "a"};
	for (int k = 0; k < 4; k++) {
		struct log_ctx *lc = op_begin(fs);
		CHECK(lc != NULL);
		/* a pool address, as a lookup in a transaction returns */
		struct fr_dentry *d = NULL;
		if (dirs[k])
			CHECK_EQ(
			    dir_lookup(fs, lc->tx, dino(dirs[k]), names[k], strlen(names[k]), &d),
			    0);
		if (k == 3)
			d = (struct fr_dentry *)((char *)d + 8); /* inside, misaligned */
		tx_set4(lc->tx, &s->i_nlink, nlink + 5);
		CHECK_EQ(dir_remove(fs, lc->tx, s, d), -EUCLEAN);
		CHECK(op_commit(fs, lc) != 0);
		op_end(fs, lc);
		CHECK_EQ(s->i_nlink, nlink);
	}
	struct log_ctx *lc = op_begin(fs);
	tx_set4(lc->tx, &s->i_nlink, nlink + 5);
	dir_retarget(lc->tx, NULL, 1, DT_REG);
	CHECK(op_commit(fs, lc) != 0);
	op_end(fs, lc);
	CHECK_EQ(s->i_nlink, nlink);
	CHECK_EQ(dir_check(fs, s, NULL, NULL, NULL, NULL), 0);
	CHECK_EQ(ferrite_unmount(fs), 0);
	CHECK_EQ(ferrite_fsck(pool, 0, NULL, NULL, NULL, NULL), 0);
	unlink(pool);
	return 0;
}

static const struct unit_case cases[] = {
#define C(n)                                                                                       \
	{                                                                                          \
#n, n                                                                              \
	}
    C(bucket_depth_64),
    C(bucket_depth_200),
    C(bucket_depth_negative),
    C(bucket_prefix_no_advance),
    C(bucket_prefix_huge),
    C(bucket_bad_magic),
    C(bucket_used_beyond),
    C(bucket_count_wrong),
    C(bucket_duplicate_hash),
    C(bucket_split_damaged),
    C(dh_depth_63),
    C(dh_depth_beyond_array),
    C(dh_narray_0),
    C(dh_narray_beyond_max),
    C(dh_narray_all_ones),
    C(dh_npages_wrong),
    C(dh_bad_magic),
    C(dh_array_beyond_npages),
    C(array_slot_beyond_npages),
    C(array_slot_all_ones),
    C(array_slot_header),
    C(array_slot_array_page),
    C(small_used_beyond),
    C(small_count_wrong),
    C(dclass_out_of_range),
    C(dclass_name_pool),
    C(dents_not_an_array),
    C(dents_garbage),
    C(dents_outside_pool),
    C(dkind_unknown),
    C(convert_bad_hash),
    C(release_bad_array),
    C(dent_namelen_0),
    C(dent_namelen_0_large),
    C(dent_inline_too_long),
    C(dent_name_slash),
    C(dent_name_nul),
    C(dent_name_dot),
    C(dent_name_dotdot),
    C(dent_name_off_misaligned),
    C(dent_name_off_outside_pool),
    C(dent_name_off_wraps),
    C(dent_name_off_free_entry),
    C(dent_name_off_large_dir),
    C(dent_short_name_in_pool),
    C(dent_unknown_flags),
    C(dent_bad_type),
    C(dent_hash_out_of_range),
    C(dent_ino_free),
    C(dent_ino_outside_pool),
    C(dent_ino_zero),
    C(remove_foreign_entry_fails_the_transaction),
#undef C
};

int main(int argc, char **argv)
{
	alarm(600); /* a hang is a failure, not a stuck CI job */
	return unit_run(cases, sizeof(cases) / sizeof(cases[0]), argc, argv);
}
