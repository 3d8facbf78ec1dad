/*
 * tier_damage_test.c -- crafted tiered pools (issue 12): a pool file is
 * input, and a damaged or hostile one must make each call fail cleanly
 * (-EUCLEAN, fsck "uncorrected"), never crash, hang or write outside the
 * pool and its backing directory. Each case builds a pool the normal way
 * (mkfs, mount, write, unmount or a killed process), edits one structure in
 * the file and recomputes its checksum the way src/tier does
 * (tier_format.h, crc32c), then mounts, checks and repairs it. Run under
 * ASan (FERRITE_SANITIZE) these are the regression tests of the findings:
 *   path_len_864, handle_len_400  lengths copied into fixed arrays;
 *   path_escape, handle_outside   a record leading outside the directory;
 *   slot_count_overflow           th_nslots + 2^58 wrapping the size check;
 *   tag_beyond_records            a tag naming record >= th_nrecs;
 *   btime_mismatch_uaf            a record freed under an open;
 *   fsck_n_changes_nothing_*      fsck -n on a crashed pool writes nothing.
 * The fuzz loop (tests/fuzz/tier_damage.c) covers the rest at random.
 */
#include "ft_test.h"

#include <sys/mman.h>
#include <sys/xattr.h>

#include "tier/tier_format.h"
#include "util/util.h"

#define MIB (1024ULL * 1024)

static char dir[256], pool[320], backing[320];
/* the live statistics file a killed mount leaves in /dev/shm (build_crashed):
 * a mount that is refused afterwards never takes it over and removes it */
static char crashed_stats[128];

static int setup(const char *tag)
{
	snprintf(dir, sizeof dir, "/dev/shm/ferrite-tierdmg-%d-%s", (int)getpid(), tag);
	snprintf(pool, sizeof pool, "%s/p.pool", dir);
	snprintf(backing, sizeof backing, "%s/b", dir);
	char cmd[800];
	snprintf(cmd, sizeof cmd, "rm -rf '%s' && mkdir -p '%s'", dir, backing);
	FT_CHECK(system(cmd) == 0, "cannot make %s", dir);
	return 0;
}

static void teardown(void)
{
	char cmd[400];
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
	if (system(cmd) != 0)
		fprintf(stderr, "cannot remove %s\n", dir);
	if (crashed_stats[0])
		unlink(crashed_stats);
	crashed_stats[0] = 0;
}

static int mkfs_tier(int consistency)
{
	struct ferrite_mkfs_opts o = {.size = 16 * MIB,
				      .force = 1,
				      .tier_backing = backing,
				      .tier_consistency = consistency,
				      .tier_flush_ms = 60000};
	FT_OK(ferrite_mkfs(pool, &o));
	return 0;
}

static int put_file(ferrite_fs *fs, const char *path, size_t len, int seed)
{
	char *buf = malloc(len);
	FT_CHECK(buf, "out of memory");
	for (size_t i = 0; i < len; i++)
		buf[i] = (char)(i * 7 + (size_t)seed);
	int fd = FT_OK(ferrite_open(fs, path, O_CREAT | O_RDWR | O_TRUNC, 0644));
	ssize_t w = ferrite_pwrite(fs, fd, buf, len, 0);
	free(buf);
	FT_EQ(w, (ssize_t)len);
	FT_OK(ferrite_close(fs, fd));
	return 0;
}

/* A pool holding /f (and /g) with records, cleanly unmounted. */
static int build(int consistency)
{
	FT_RUN(mkfs_tier(consistency));
	ferrite_fs *fs;
	FT_OK(ferrite_mount(pool, NULL, &fs));
	FT_RUN(put_file(fs, "/f", 20000, 1));
	FT_RUN(put_file(fs, "/g", 9000, 2));
	FT_OK(ferrite_unmount(fs));
	return 0;
}

/* The same, but the process dies with /f's chunks dirty in the cache. */
static int build_crashed(int consistency)
{
	FT_RUN(mkfs_tier(consistency));
	int uuid_pipe[2];
	FT_CHECK(pipe(uuid_pipe) == 0, "pipe: %s", strerror(errno));
	pid_t pid = fork();
	if (pid == 0) {
		ferrite_fs *fs;
		struct ferrite_info in;
		if (ferrite_mount(pool, NULL, &fs) != 0 || ferrite_get_info(fs, &in) != 0 ||
		    write(uuid_pipe[1], in.uuid, sizeof(in.uuid)) != (ssize_t)sizeof(in.uuid) ||
		    put_file(fs, "/f", 20000, 1) || put_file(fs, "/g", 9000, 2))
			_exit(2);
		int fd = ferrite_open(fs, "/f", O_RDWR, 0);
		if (fd < 0 || ferrite_fsync(fs, fd) != 0)
			_exit(3);
		kill(getpid(), SIGKILL); /* no unmount, no drain */
	}
	close(uuid_pipe[1]);
	struct ferrite_info in;
	if (read(uuid_pipe[0], in.uuid, sizeof(in.uuid)) == (ssize_t)sizeof(in.uuid)) {
		in.uuid[sizeof(in.uuid) - 1] = 0;
		snprintf(crashed_stats, sizeof crashed_stats, "/dev/shm/ferrite-tier-%s.stats",
			 in.uuid);
	}
	close(uuid_pipe[0]);
	int status;
	waitpid(pid, &status, 0);
	FT_CHECK(WIFSIGNALED(status), "the child must die by SIGKILL (status %d)", status);
	return 0;
}

/* ---- the pool file ------------------------------------------------------------- */

struct img {
	int fd;
	char *p;
	size_t len;
	struct tier_header *th;
	struct tier_rec *recs;
	struct tier_desc *desc;
};

static int img_open(struct img *m)
{
	m->fd = open(pool, O_RDWR);
	FT_CHECK(m->fd >= 0, "open %s: %s", pool, strerror(errno));
	struct stat st;
	FT_CHECK(fstat(m->fd, &st) == 0, "fstat");
	m->len = (size_t)st.st_size;
	m->p = mmap(NULL, m->len, PROT_READ | PROT_WRITE, MAP_SHARED, m->fd, 0);
	FT_CHECK(m->p != MAP_FAILED, "mmap: %s", strerror(errno));
	m->th = (struct tier_header *)(m->p + TIER_HDR_OFF);
	m->recs = (struct tier_rec *)(m->p + TIER_REC_OFF);
	m->desc = (struct tier_desc *)(m->p + m->th->th_desc_off);
	return 0;
}

static void img_close(struct img *m)
{
	msync(m->p, m->len, MS_SYNC);
	munmap(m->p, m->len);
	close(m->fd);
}

static void header_resum(struct tier_header *th)
{
	th->th_csum = fr_crc32c(0, th, offsetof(struct tier_header, th_csum));
}

/* The record of the file at path in the backing directory. */
static struct tier_rec *rec_of(struct img *m, const char *name)
{
	char p[400];
	snprintf(p, sizeof p, "%s/%s", backing, name);
	struct stat st;
	if (stat(p, &st) != 0)
		return NULL;
	for (uint32_t fid = 1; fid < m->th->th_nrecs; fid++)
		if (m->recs[fid].r_state == REC_LIVE && m->recs[fid].r_ino == (uint64_t)st.st_ino)
			return &m->recs[fid];
	return NULL;
}

/* ---- what every damaged pool must give ------------------------------------------- */

static uint64_t hash_bytes(uint64_t h, const void *p, size_t n)
{
	const unsigned char *b = p;
	for (size_t i = 0; i < n; i++)
		h = (h ^ b[i]) * 0x100000001b3ULL;
	return h;
}

static uint64_t hash_file(const char *path)
{
	uint64_t h = 0xcbf29ce484222325ULL;
	int fd = open(path, O_RDONLY);
	if (fd < 0)
		return 0;
	char buf[65536];
	ssize_t n;
	while ((n = read(fd, buf, sizeof buf)) > 0)
		h = hash_bytes(h, buf, (size_t)n);
	close(fd);
	return h;
}

/* Names, types, modes, sizes, mtimes, contents and the pool attribute of
 * every object below d. */
static uint64_t hash_tree(const char *d, uint64_t h)
{
	DIR *dd = opendir(d);
	if (!dd)
		return h;
	struct dirent *e;
	char names[64][256];
	int n = 0;
	while ((e = readdir(dd)) && n < 64)
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
			snprintf(names[n++], 256, "%s", e->d_name);
	closedir(dd);
	qsort(names, (size_t)n, 256, (int (*)(const void *, const void *))strcmp);
	for (int i = 0; i < n; i++) {
		char p[4096 + 256 + 2];
		snprintf(p, sizeof p, "%.4096s/%.255s", d, names[i]);
		struct stat st;
		if (lstat(p, &st) != 0)
			continue;
		h = hash_bytes(h, names[i], strlen(names[i]) + 1);
		uint64_t f[4] = {st.st_mode, (uint64_t)st.st_size, (uint64_t)st.st_mtim.tv_sec,
				 (uint64_t)st.st_mtim.tv_nsec};
		h = hash_bytes(h, f, sizeof f);
		if (S_ISDIR(st.st_mode))
			h = hash_tree(p, h);
		else if (S_ISREG(st.st_mode))
			h = hash_bytes(h, &(uint64_t){hash_file(p)}, 8);
	}
	char x[64];
	ssize_t xn = getxattr(d, "user.ferrite.pool", x, sizeof x);
	if (xn > 0)
		h = hash_bytes(h, x, (size_t)xn);
	return h;
}

/* Mount fails with -EUCLEAN naming what; fsck without and with repair
 * reports it uncorrected; neither crashes nor changes the pool or the backing
 * directory, and stats reads without crashing. */
static int refused(const char *what)
{
	uint64_t pool_h = hash_file(pool), tree_h = hash_tree(backing, 0);
	ferrite_fs *fs = NULL;
	int rc = ferrite_mount(pool, NULL, &fs);
	if (rc == 0)
		ferrite_unmount(fs);
	FT_EQ(rc, -EUCLEAN);
	FT_CHECK(strstr(ferrite_errmsg(), what), "the message must name %s: \"%s\"", what,
		 ferrite_errmsg());
	FT_EQ(ferrite_fsck(pool, 0, NULL, NULL, NULL, NULL), FERRITE_FSCK_UNCORRECTED);
	FT_EQ(ferrite_fsck(pool, 1, NULL, NULL, NULL, NULL), FERRITE_FSCK_UNCORRECTED);
	struct ferrite_tier_info ti;
	ferrite_tier_stats(pool, &ti);
	FT_CHECK(hash_file(pool) == pool_h, "the pool changed");
	FT_CHECK(hash_tree(backing, 0) == tree_h, "the backing directory changed");
	return 0;
}

/* ---- cases ------------------------------------------------------------------------- */

/* A record path length of 864 (with a checksum that holds over those 864
 * bytes) went into a 353-byte stack buffer in rec_open. */
static int path_len_864(void)
{
	FT_RUN(setup("path864"));
	FT_RUN(build(0));
	struct img m;
	FT_RUN(img_open(&m));
	struct tier_rec *r = rec_of(&m, "f");
	FT_CHECK(r, "no record for /f");
	r->r_hlen = 0; /* so recovery goes by the path */
	r->r_pathlen = 864;
	r->r_path_crc = fr_crc32c(0, r->r_path, 864);
	img_close(&m);
	FT_RUN(refused("path length 864"));
	teardown();
	return 0;
}

/* A handle length of 400 went into a 40-byte handle buffer. */
static int handle_len_400(void)
{
	FT_RUN(setup("handle400"));
	FT_RUN(build(0));
	struct img m;
	FT_RUN(img_open(&m));
	struct tier_rec *r = rec_of(&m, "f");
	FT_CHECK(r, "no record for /f");
	r->r_hlen = 400;
	img_close(&m);
	FT_RUN(refused("handle length 400"));
	teardown();
	return 0;
}

/* A whole path (its checksum holds) that climbs out of the directory. */
static int path_escape(void)
{
	FT_RUN(setup("escape"));
	FT_RUN(build(0));
	struct img m;
	FT_RUN(img_open(&m));
	struct tier_rec *r = rec_of(&m, "f");
	FT_CHECK(r, "no record for /f");
	const char *evil = "../outside";
	r->r_hlen = 0;
	memcpy(r->r_path, evil, strlen(evil));
	r->r_pathlen = (uint32_t)strlen(evil);
	r->r_path_crc = fr_crc32c(0, evil, strlen(evil));
	img_close(&m);
	FT_RUN(refused("outside the backing directory"));
	char out[400];
	snprintf(out, sizeof out, "%s/outside", dir);
	FT_CHECK(access(out, F_OK) != 0, "%s was made", out);
	teardown();
	return 0;
}

/* A handle of a file outside the backing directory (same file system) in
 * the record of a file with dirty chunks: open_by_handle_at would open it,
 * and the drain would write the cache's bytes into it. */
static int handle_outside(void)
{
	FT_RUN(setup("handleout"));
	char victim[400];
	snprintf(victim, sizeof victim, "%s/victim", dir);
	int vfd = open(victim, O_CREAT | O_RDWR | O_TRUNC, 0600);
	FT_CHECK(vfd >= 0, "create %s", victim);
	FT_CHECK(write(vfd, "precious", 8) == 8, "write %s", victim);
	close(vfd);
	struct {
		struct file_handle fh;
		unsigned char b[TIER_HANDLE_MAX];
	} h;
	h.fh.handle_bytes = TIER_HANDLE_MAX;
	int mid;
	FT_CHECK(name_to_handle_at(AT_FDCWD, victim, &h.fh, &mid, 0) == 0, "name_to_handle_at: %s",
		 strerror(errno));
	struct stat vst;
	FT_CHECK(stat(victim, &vst) == 0, "stat %s", victim);
	uint64_t victim_h = hash_file(victim);
	FT_RUN(build_crashed(0));
	struct img m;
	FT_RUN(img_open(&m));
	struct tier_rec *r = rec_of(&m, "f");
	FT_CHECK(r, "no record for /f");
	r->r_htype = (uint32_t)h.fh.handle_type;
	r->r_hlen = h.fh.handle_bytes;
	memcpy(r->r_handle, h.fh.f_handle, h.fh.handle_bytes);
	r->r_ino = (uint64_t)vst.st_ino;
	r->r_btime = 0;
	r->r_pathlen = 0;
	img_close(&m);
	ferrite_fs *fs;
	if (ferrite_mount(pool, NULL, &fs) == 0)
		FT_OK(ferrite_unmount(fs));
	FT_CHECK(hash_file(victim) == victim_h, "the file outside the directory was written");
	teardown();
	return 0;
}

/* th_nslots + 2^58: nslots * 2 * 4096 wraps to the old product, so the
 * size check passed and every scan ran 2^59 chunks past the pool. */
static int slot_count_overflow(void)
{
	FT_RUN(setup("slots"));
	FT_RUN(build(0));
	struct img m;
	FT_RUN(img_open(&m));
	m.th->th_nslots += 1ULL << 58;
	header_resum(m.th);
	img_close(&m);
	FT_RUN(refused("slots"));
	teardown();
	return 0;
}

/* A valid tag naming a record number beyond th_nrecs: tier_set_tag indexed
 * past the files table while recovery dropped it. */
static int tag_beyond_records(void)
{
	FT_RUN(setup("tagfid"));
	FT_RUN(build_crashed(0));
	struct img m;
	FT_RUN(img_open(&m));
	uint64_t n = m.th->th_nslots * 2, c;
	for (c = 0; c < n && !(m.desc[c].d_tag & TAG_V); c++)
		;
	FT_CHECK(c < n, "no valid chunk");
	m.desc[c].d_tag = tag_make(TAG_FID_MASK, 0, TAG_V | TAG_D);
	img_close(&m);
	char what[64];
	snprintf(what, sizeof what, "chunk %llu", (unsigned long long)c);
	FT_RUN(refused(what));
	teardown();
	return 0;
}

/* Opening a file whose record's birth time differs (its inode number was
 * taken by another file) frees the record under the open; the open then put
 * the freed file on the closed list (use-after-free in closed_add). */
static int btime_mismatch_uaf(void)
{
	FT_RUN(setup("btime"));
	FT_RUN(mkfs_tier(0));
	ferrite_fs *fs;
	FT_OK(ferrite_mount(pool, NULL, &fs));
	FT_RUN(put_file(fs, "/f", 5000, 1));
	FT_RUN(put_file(fs, "/g", 5000, 2));
	struct img m;
	FT_RUN(img_open(&m));
	struct tier_rec *r = rec_of(&m, "f");
	FT_CHECK(r, "no record for /f");
	if (!r->r_btime) {
		img_close(&m);
		FT_OK(ferrite_unmount(fs));
		teardown();
		fprintf(stderr, "skip: no birth times on %s\n", backing);
		return 0;
	}
	r->r_btime += 1; /* what a new file with the same number shows */
	img_close(&m);
	for (int i = 0; i < 3; i++) {
		int fd = FT_OK(ferrite_open(fs, "/f", O_RDWR, 0));
		FT_OK(ferrite_close(fs, fd));
		fd = FT_OK(ferrite_open(fs, "/g", O_RDWR, 0));
		FT_OK(ferrite_close(fs, fd));
	}
	FT_RUN(put_file(fs, "/h", 5000, 3));
	FT_OK(ferrite_unmount(fs));
	FT_EQ(ferrite_fsck(pool, 0, NULL, NULL, NULL, NULL), FERRITE_FSCK_CLEAN);
	teardown();
	return 0;
}

/* fsck -n on a pool left by a killed process (dirty chunks, a file whose
 * backing file is gone, in epoch mode a pending epoch): clean, and the pool
 * and the backing directory are byte-identical afterwards. Then repair
 * recovers as a mount would. */
static int fsck_n_unchanged(int consistency)
{
	FT_RUN(build_crashed(consistency));
	char g[400];
	snprintf(g, sizeof g, "%s/g", backing);
	FT_CHECK(unlink(g) == 0, "unlink %s", g); /* recovery would make it again */
	uint64_t pool_h = hash_file(pool), tree_h = hash_tree(backing, 0);
	int rc = ferrite_fsck(pool, 0, NULL, NULL, NULL, NULL);
	FT_EQ(rc, FERRITE_FSCK_CLEAN);
	FT_CHECK(hash_file(pool) == pool_h, "fsck -n changed the pool");
	FT_CHECK(hash_tree(backing, 0) == tree_h, "fsck -n changed the backing directory");
	FT_CHECK(access(g, F_OK) != 0, "fsck -n made %s again", g);
	FT_EQ(ferrite_fsck(pool, 1, NULL, NULL, NULL, NULL), FERRITE_FSCK_CLEAN);
	FT_CHECK(access(g, F_OK) == 0, "fsck --repair did not make %s again", g);
	FT_EQ(ferrite_fsck(pool, 0, NULL, NULL, NULL, NULL), FERRITE_FSCK_CLEAN);
	return 0;
}

static int fsck_n_changes_nothing_write(void)
{
	FT_RUN(setup("fsckn-w"));
	FT_RUN(fsck_n_unchanged(0));
	teardown();
	return 0;
}

static int fsck_n_changes_nothing_epoch(void)
{
	FT_RUN(setup("fsckn-e"));
	FT_RUN(fsck_n_unchanged(1));
	teardown();
	return 0;
}

static const struct ft_case cases[] = {
    {"path_len_864", path_len_864, 0},
    {"handle_len_400", handle_len_400, 0},
    {"path_escape", path_escape, 0},
    {"handle_outside", handle_outside, 0},
    {"slot_count_overflow", slot_count_overflow, 0},
    {"tag_beyond_records", tag_beyond_records, 0},
    {"btime_mismatch_uaf", btime_mismatch_uaf, 0},
    {"fsck_n_changes_nothing_write", fsck_n_changes_nothing_write, 0},
    {"fsck_n_changes_nothing_epoch", fsck_n_changes_nothing_epoch, 0},
};

int main(int argc, char **argv)
{
	ft_pool_path("tierdmg", "unused");
	return ft_run(cases, sizeof(cases) / sizeof(cases[0]), argc, argv, NULL, NULL);
}
