/*
 * tier_damage.c -- damage for tiered pools (tier_damage.h): the populated
 * pool, the damage by field or by region, and the run over a damaged pool.
 * Knows the layout from src/tier/tier_format.h and recomputes checksums the
 * way src/tier does (crc32c over the same bytes).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "tier_damage.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "ferrite.h"
#include "meta/meta_format.h"
#include "tier/tier_format.h"
#include "util/util.h"

#define MIB (1024ULL * 1024)

/* ---- building ------------------------------------------------------------------- */

static int put(ferrite_fs *fs, const char *path, uint64_t off, size_t len, int seed, int trunc)
{
	char *buf = malloc(len ? len : 1);
	if (!buf)
		return -ENOMEM;
	for (size_t i = 0; i < len; i++)
		buf[i] = (char)(i * 13 + (size_t)seed);
	int fd = ferrite_open(fs, path, O_CREAT | O_RDWR | (trunc ? O_TRUNC : 0), 0644);
	ssize_t w = fd < 0 ? fd : 0;
	for (size_t done = 0; fd >= 0 && done < len && w >= 0; done += (size_t)w) {
		w = ferrite_pwrite(fs, fd, buf + done, len - done, (off_t)(off + done));
		if (w == 0)
			w = -EIO;
	}
	if (fd >= 0)
		ferrite_close(fs, fd);
	free(buf);
	return fd < 0 ? fd : w < 0 ? (int)w : 0;
}

/* What stays clean in the cache: a tree written and drained by an unmount. */
static int build_clean(const char *pool)
{
	ferrite_fs *fs;
	int rc = ferrite_mount(pool, NULL, &fs);
	if (rc)
		return rc;
	ferrite_mkdir(fs, "/d", 0755);
	ferrite_mkdir(fs, "/d/e", 0755);
	rc = put(fs, "/a", 0, 5000, 1, 1);
	if (!rc)
		rc = put(fs, "/d/b", 0, 70000, 2, 1);
	if (!rc)
		rc = put(fs, "/d/e/c", 0, 300000, 3, 1);
	if (!rc)
		rc = put(fs, "/sparse", 1 * MIB, 8000, 4, 1);
	if (!rc)
		rc = put(fs, "/empty", 0, 0, 5, 1);
	char longp[400] = "/d/e";
	for (int i = 0; i < 3; i++) { /* a path beyond TIER_PATH_MAX: kept unknown */
		size_t n = strlen(longp);
		snprintf(longp + n, sizeof longp - n, "/%.*s", 120,
			 "llllllllllllllllllllllllllllll"
			 "llllllllllllllllllllllllllllll"
			 "llllllllllllllllllllllllllllll"
			 "llllllllllllllllllllllllllllll");
		if (i < 2)
			ferrite_mkdir(fs, longp, 0755);
	}
	if (!rc)
		rc = put(fs, longp, 0, 9000, 6, 1);
	ferrite_symlink(fs, "a", "/l");
	ferrite_link(fs, "/a", "/d/hl");
	int r2 = ferrite_unmount(fs);
	return rc ? rc : r2;
}

/* What a crash leaves: a process writes and dies without unmounting. */
static int build_crash(const char *pool, int consistency)
{
	pid_t pid = fork();
	if (pid < 0)
		return -errno;
	if (pid == 0) {
		ferrite_fs *fs;
		if (ferrite_mount(pool, NULL, &fs) != 0)
			_exit(2);
		int bad = put(fs, "/a", 100, 3000, 11, 0) || put(fs, "/d/b", 70000, 20000, 12, 0) ||
			  put(fs, "/d/e/c", 4000, 40000, 13, 0) ||
			  put(fs, "/new", 0, 12000, 14, 1) || put(fs, "/lost", 0, 9000, 15, 1);
		int ofd = ferrite_open(fs, "/orphan", O_CREAT | O_RDWR, 0644);
		if (ofd >= 0) {
			ferrite_pwrite(fs, ofd, "orphan data", 11, 0);
			ferrite_unlink(fs, "/orphan"); /* open: its record stays ORPHAN */
		}
		if (consistency == 1) {
			int fd = ferrite_open(fs, "/a", O_RDWR, 0);
			if (fd >= 0)
				ferrite_fsync(fs, fd); /* ends the epoch ... */
			put(fs, "/a", 0, 100, 16, 0);  /* ... and opens another */
		}
		if (bad)
			_exit(3);
		kill(getpid(), SIGKILL);
	}
	int st;
	waitpid(pid, &st, 0);
	if (!WIFSIGNALED(st))
		return -ECHILD;
	return 0;
}

int tier_fuzz_build_mode(const char *pool, const char *backing_dir, int consistency)
{
	struct ferrite_mkfs_opts o = {.size = 16 * MIB,
				      .force = 1,
				      .tier_backing = backing_dir,
				      .tier_consistency = consistency,
				      .tier_flush_ms = 60000};
	int rc = ferrite_mkfs(pool, &o);
	if (!rc)
		rc = build_clean(pool);
	if (!rc)
		rc = build_crash(pool, consistency);
	if (rc)
		return rc;
	/* A file whose creation the backing file system "lost". */
	char p[4200];
	snprintf(p, sizeof p, "%s/lost", backing_dir);
	unlink(p);
	return 0;
}

int tier_fuzz_build(const char *pool, const char *backing_dir)
{
	return tier_fuzz_build_mode(pool, backing_dir, 0);
}

/* ---- damage ------------------------------------------------------------------------ */

static uint64_t rnd(uint64_t *s)
{
	*s += 0x9E3779B97F4A7C15ULL;
	uint64_t z = *s;
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
	return z ^ (z >> 31);
}

struct field {
	const char *name;
	size_t off, size;
};

#define F(type, m)                                                                                 \
	{                                                                                          \
#m, offsetof(struct type, m), sizeof(((struct type *)0)->m)                        \
	}

static const struct field header_fields[] = {
    F(tier_header, th_magic),	    F(tier_header, th_chunk_size),   F(tier_header, th_consistency),
    F(tier_header, th_nslots),	    F(tier_header, th_desc_off),     F(tier_header, th_data_off),
    F(tier_header, th_rec_off),	    F(tier_header, th_nrecs),	     F(tier_header, th_rec_size),
    F(tier_header, th_journal_off), F(tier_header, th_journal_size), F(tier_header, th_flush_ms),
    F(tier_header, th_epoch_ms),    F(tier_header, th_backing_ino),  F(tier_header, th_backing),
    F(tier_header, th_writeback),   F(tier_header, th_csum),	     F(tier_header, th_key_next),
    F(tier_header, th_seq),	    F(tier_header, th_stats),
};
static const struct field rec_fields[] = {
    F(tier_rec, r_state),   F(tier_rec, r_flags), F(tier_rec, r_key),  F(tier_rec, r_stride),
    F(tier_rec, r_size),    F(tier_rec, r_mtime), F(tier_rec, r_ino),  F(tier_rec, r_btime),
    F(tier_rec, r_pathlen), F(tier_rec, r_htype), F(tier_rec, r_hlen), F(tier_rec, r_path_crc),
    F(tier_rec, r_handle),  F(tier_rec, r_ctime), F(tier_rec, r_path),
};
static const struct field desc_fields[] = {
    F(tier_desc, d_tag),      F(tier_desc, d_seq),     F(tier_desc, d_old_size),
    F(tier_desc, d_new_size), F(tier_desc, d_nchunks), F(tier_desc, d_mtime),
    F(tier_desc, d_epoch),
};
static const struct field journal_fields[] = {
    F(tier_ejournal, ej_magic),	 F(tier_ejournal, ej_epoch),  F(tier_ejournal, ej_applied),
    F(tier_ejournal, ej_npages), F(tier_ejournal, ej_nfiles), F(tier_ejournal, ej_csum),
};

/* A value for a field of size sz (1..8 bytes; wider fields get bytes). */
static uint64_t pick_value(uint64_t *s, uint64_t old, size_t sz, uint64_t pool_len,
			   const struct tier_header *th, const char **how)
{
	uint64_t mask = sz >= 8 ? ~0ULL : (1ULL << (8 * sz)) - 1;
	uint64_t v;
	switch (rnd(s) % 16) {
	case 0:
		*how = "zero";
		v = 0;
		break;
	case 1:
		*how = "all-ones";
		v = ~0ULL;
		break;
	case 2:
		*how = "one";
		v = 1;
		break;
	case 3:
		*how = "random";
		v = rnd(s);
		break;
	case 4:
		*how = "bit flip";
		v = old ^ (1ULL << (rnd(s) % (8 * (sz > 8 ? 8 : sz))));
		break;
	case 5:
		*how = "+1";
		v = old + 1;
		break;
	case 6:
		*how = "-1";
		v = old - 1;
		break;
	case 7:
		*how = "pool size";
		v = pool_len;
		break;
	case 8:
		*how = "pool size - 8";
		v = pool_len - 8;
		break;
	case 9:
		*how = "pool size + 4096";
		v = pool_len + 4096;
		break;
	case 10:
		*how = "+2^58";
		v = old + (1ULL << 58);
		break;
	case 11:
		*how = "top bit";
		v = 1ULL << (8 * (sz > 8 ? 8 : sz) - 1);
		break;
	case 12:
		*how = "records";
		v = th->th_nrecs + rnd(s) % 3 - 1;
		break;
	case 13:
		*how = "slots";
		v = th->th_nslots * 2 + rnd(s) % 3 - 1;
		break;
	case 14: {
		static const uint64_t edges[] = {
		    TIER_PATH_MAX,   TIER_PATH_MAX + 1,	  864,
		    TIER_HANDLE_MAX, TIER_HANDLE_MAX + 1, 400,
		    (16ULL << 40),   1ULL << 62,	  0xfffffffffffffff8ULL};
		*how = "edge";
		v = edges[rnd(s) % (sizeof edges / sizeof edges[0])];
		break;
	}
	default:
		*how = "small";
		v = rnd(s) % 4096;
		break;
	}
	return v & mask;
}

static void put_field(uint8_t *p, size_t sz, uint64_t v, uint64_t *s)
{
	if (sz <= 8) {
		memcpy(p, &v, sz); /* little-endian host */
		return;
	}
	/* A wide field (path, handle, name): some of its bytes. */
	size_t at = rnd(s) % sz, n = 1 + rnd(s) % 8;
	for (size_t i = 0; i < n && at + i < sz; i++)
		p[at + i] = (uint8_t)(rnd(s) % 4 == 0 ? '/' : rnd(s) % 4 == 0 ? '.' : rnd(s));
}

static uint64_t get_field(const uint8_t *p, size_t sz)
{
	uint64_t v = 0;
	memcpy(&v, p, sz < 8 ? sz : 8);
	return v;
}

static void header_resum(struct tier_header *th)
{
	th->th_csum = fr_crc32c(0, th, offsetof(struct tier_header, th_csum));
}

static void rec_resum(struct tier_rec *r)
{
	if (r->r_pathlen <= TIER_PATH_MAX + 1024) /* (the checksum as the code computes it) */
		r->r_path_crc = fr_crc32c(0, r->r_path, r->r_pathlen);
}

/* The journal's fingerprint, as src/tier/check.c computes it. */
static void journal_resum(uint8_t *img, size_t len, const struct tier_header *th)
{
	struct tier_ejournal *j = (struct tier_ejournal *)(img + th->th_journal_off);
	struct ej_page *pg = (struct ej_page *)(j + 1);
	uint64_t room =
	    (th->th_journal_size - sizeof(*j)) / (sizeof(struct ej_page) + sizeof(struct ej_file));
	if (j->ej_npages > room || j->ej_nfiles > room)
		return;
	struct ej_file *fl = (struct ej_file *)(pg + j->ej_npages);
	struct {
		uint64_t epoch;
		uint32_t npages, nfiles;
	} head = {j->ej_epoch, j->ej_npages, j->ej_nfiles};
	uint32_t crc = fr_crc32c(0, &head, sizeof head);
	crc = fr_crc32c(crc, pg, j->ej_npages * sizeof(*pg));
	crc = fr_crc32c(crc, fl, j->ej_nfiles * sizeof(*fl));
	for (uint32_t i = 0; i < j->ej_npages; i++) {
		uint64_t at = th->th_data_off + (uint64_t)pg[i].ep_chunk * TIER_CHUNK_SIZE;
		if (at + TIER_CHUNK_SIZE > len)
			return;
		crc = fr_crc32c(crc, img + at, TIER_CHUNK_SIZE);
	}
	j->ej_csum = crc;
}

/* A record in use most of the time. */
static uint32_t pick_rec(uint64_t *s, const uint8_t *img, const struct tier_header *th)
{
	const struct tier_rec *recs = (const struct tier_rec *)(img + TIER_REC_OFF);
	uint32_t used[64], n = 0;
	for (uint32_t f = 1; f < th->th_nrecs && n < 64; f++)
		if (recs[f].r_state != REC_FREE)
			used[n++] = f;
	if (n && rnd(s) % 5)
		return used[rnd(s) % n];
	return 1 + (uint32_t)(rnd(s) % (th->th_nrecs - 1));
}

/* A valid chunk most of the time. */
static uint64_t pick_chunk(uint64_t *s, const uint8_t *img, const struct tier_header *th)
{
	const struct tier_desc *d = (const struct tier_desc *)(img + th->th_desc_off);
	uint64_t n = th->th_nslots * 2, start = rnd(s) % n;
	if (rnd(s) % 5)
		for (uint64_t i = 0; i < n; i++)
			if (d[(start + i) % n].d_tag & TAG_V)
				return (start + i) % n;
	return start;
}

/* A tag changed the way a bad store would: another record, index, slot
 * partner, or flags. */
static uint64_t damage_tag(uint64_t *s, uint64_t tag, uint64_t other, const struct tier_header *th,
			   const char **how)
{
	switch (rnd(s) % 8) {
	case 0:
		*how = "record beyond th_nrecs";
		return tag_make(th->th_nrecs + rnd(s) % 4, tag_idx(tag),
				tag & (TAG_V | TAG_N | TAG_D | TAG_C)) |
		       TAG_V;
	case 1:
		*how = "record 0";
		return tag_make(0, tag_idx(tag), tag) | TAG_V;
	case 2:
		*how = "another record";
		return (tag & ~(TAG_FID_MASK << TAG_IDX_BITS)) |
		       ((uint64_t)(1 + rnd(s) % 8) << TAG_IDX_BITS) | TAG_V;
	case 3:
		*how = "huge index";
		return (tag & ~TAG_IDX_MASK) | (rnd(s) & TAG_IDX_MASK) | TAG_V;
	case 4:
		*how = "index + 1";
		return (tag & ~TAG_IDX_MASK) | ((tag_idx(tag) + 1) & TAG_IDX_MASK);
	case 5:
		*how = "the slot partner's tag";
		return other;
	case 6:
		*how = "flags flipped";
		return tag ^ ((rnd(s) % 16) << 60);
	default:
		*how = "random";
		return rnd(s);
	}
}

void tier_fuzz_damage(uint8_t *img, size_t len, uint64_t seed, char *what, size_t cap)
{
	uint64_t s = seed;
	struct tier_header *th = (struct tier_header *)(img + TIER_HDR_OFF);
	uint64_t nchunks = th->th_nslots * 2;
	int resum = rnd(&s) % 5 != 0; /* mostly past the checksum */
	const char *how = "?";
	unsigned target = (unsigned)(rnd(&s) % 100);
	if (target < 12) { /* the tier header */
		const struct field *f =
		    &header_fields[rnd(&s) % (sizeof header_fields / sizeof header_fields[0])];
		uint8_t *p = (uint8_t *)th + f->off;
		uint64_t v = pick_value(&s, get_field(p, f->size), f->size, len, th, &how);
		put_field(p, f->size, v, &s);
		if (resum && f->off < offsetof(struct tier_header, th_csum))
			header_resum(th);
		snprintf(what, cap, "tier header %s = %s (%#llx)%s", f->name, how,
			 (unsigned long long)v, resum ? ", checksum recomputed" : "");
	} else if (target < 40) { /* a record */
		uint32_t fid = pick_rec(&s, img, th);
		struct tier_rec *r = (struct tier_rec *)(img + TIER_REC_OFF) + fid;
		const struct field *f =
		    &rec_fields[rnd(&s) % (sizeof rec_fields / sizeof rec_fields[0])];
		uint8_t *p = (uint8_t *)r + f->off;
		uint64_t v = pick_value(&s, get_field(p, f->size), f->size, len, th, &how);
		if (!strcmp(f->name, "r_state") && rnd(&s) % 2) {
			static const uint32_t st[] = {REC_FREE, REC_LIVE, REC_DYING, REC_ORPHAN};
			v = st[rnd(&s) % 4];
			how = "another state";
		}
		put_field(p, f->size, v, &s);
		if (resum)
			rec_resum(r);
		snprintf(what, cap, "record %u %s = %s (%#llx)%s", fid, f->name, how,
			 (unsigned long long)v, resum ? ", path checksum recomputed" : "");
	} else if (target < 75) { /* a descriptor or its tag */
		uint64_t c = pick_chunk(&s, img, th);
		struct tier_desc *d = (struct tier_desc *)(img + th->th_desc_off) + c;
		if (rnd(&s) % 2) {
			uint64_t old = d->d_tag;
			d->d_tag = damage_tag(&s, old, d[(c & 1) ? -1 : 1].d_tag, th, &how);
			snprintf(what, cap, "chunk %llu tag %#llx -> %#llx (%s)",
				 (unsigned long long)c, (unsigned long long)old,
				 (unsigned long long)d->d_tag, how);
		} else {
			const struct field *f =
			    &desc_fields[rnd(&s) % (sizeof desc_fields / sizeof desc_fields[0])];
			uint8_t *p = (uint8_t *)d + f->off;
			uint64_t v = pick_value(&s, get_field(p, f->size), f->size, len, th, &how);
			put_field(p, f->size, v, &s);
			snprintf(what, cap, "chunk %llu %s = %s (%#llx)", (unsigned long long)c,
				 f->name, how, (unsigned long long)v);
		}
	} else if (target < 85 && th->th_journal_size >= 4096 &&
		   th->th_journal_off + th->th_journal_size <= len) { /* the epoch journal */
		struct tier_ejournal *j = (struct tier_ejournal *)(img + th->th_journal_off);
		if (rnd(&s) % 2) {
			const struct field *f =
			    &journal_fields[rnd(&s) %
					    (sizeof journal_fields / sizeof journal_fields[0])];
			uint8_t *p = (uint8_t *)j + f->off;
			uint64_t v = pick_value(&s, get_field(p, f->size), f->size, len, th, &how);
			put_field(p, f->size, v, &s);
			snprintf(what, cap, "journal %s = %s (%#llx)", f->name, how,
				 (unsigned long long)v);
		} else {
			/* A whole entry of our making: pages and files chosen badly. */
			j->ej_epoch = j->ej_applied + 1;
			j->ej_npages = (uint32_t)(rnd(&s) % 4);
			j->ej_nfiles = (uint32_t)(rnd(&s) % 3);
			struct ej_page *pg = (struct ej_page *)(j + 1);
			for (uint32_t i = 0; i < j->ej_npages; i++) {
				pg[i].ep_chunk =
				    (uint32_t)(rnd(&s) % 3 ? rnd(&s) % nchunks : rnd(&s));
				pg[i].ep_tag = rnd(&s) % 2 ? tag_make(1 + rnd(&s) % 4, rnd(&s) % 8,
								      TAG_V | TAG_N | TAG_D)
							   : rnd(&s);
			}
			struct ej_file *fl = (struct ej_file *)(pg + j->ej_npages);
			for (uint32_t i = 0; i < j->ej_nfiles; i++)
				fl[i] = (struct ej_file){(uint32_t)(rnd(&s) % 6), 0,
							 rnd(&s) % 2 ? rnd(&s) % 100000 : rnd(&s),
							 (int64_t)rnd(&s)};
			how = "a made-up entry";
			snprintf(what, cap, "journal: a made-up entry of %u pages, %u files",
				 j->ej_npages, j->ej_nfiles);
		}
		if (resum)
			journal_resum(img, len, th);
	} else if (target < 88) { /* the superblock (the tier reads its geometry) */
		struct fr_super *sb = (struct fr_super *)img;
		static const struct field sbf[] = {
		    F(fr_super, sb_pool_size), F(fr_super, sb_incompat), F(fr_super, sb_version)};
		const struct field *f = &sbf[rnd(&s) % 3];
		uint8_t *p = (uint8_t *)sb + f->off;
		uint64_t v = pick_value(&s, get_field(p, f->size), f->size, len, th, &how);
		put_field(p, f->size, v, &s);
		if (resum)
			sb->sb_checksum = fr_crc32c(0, sb, offsetof(struct fr_super, sb_checksum));
		snprintf(what, cap, "superblock %s = %s (%#llx)%s", f->name, how,
			 (unsigned long long)v, resum ? ", checksum recomputed" : "");
	} else { /* bytes flipped in one region */
		static const char *names[] = {"tier header", "records", "descriptors", "journal"};
		int reg = (int)(rnd(&s) % 4);
		uint64_t off = TIER_HDR_OFF, n = 4096;
		if (reg == 1) {
			off = TIER_REC_OFF;
			n = 64 * TIER_REC_SIZE;
		} else if (reg == 2) {
			off = th->th_desc_off;
			n = nchunks * sizeof(struct tier_desc);
		} else if (reg == 3) {
			off = th->th_journal_off;
			n = th->th_journal_size ? th->th_journal_size : 4096;
		}
		if (off >= len || n > len - off)
			n = 0;
		unsigned flips = 1 + (unsigned)(rnd(&s) % 16);
		uint64_t base = n ? rnd(&s) % n : 0;
		for (unsigned i = 0; n && i < flips; i++)
			img[off + (base + rnd(&s) % 512) % n] ^= (uint8_t)(1 + rnd(&s) % 255);
		snprintf(what, cap, "%u bytes flipped in the %s near pool offset %#llx", flips,
			 names[reg], (unsigned long long)(off + base));
	}
}

/* ---- the run over a damaged pool ----------------------------------------------------- */

static uint64_t fnv(uint64_t h, const void *p, size_t n)
{
	const unsigned char *b = p;
	for (size_t i = 0; i < n; i++)
		h = (h ^ b[i]) * 0x100000001b3ULL;
	return h;
}

static uint64_t hash_file(const char *path)
{
	int fd = open(path, O_RDONLY);
	if (fd < 0)
		return 0;
	uint64_t h = 0xcbf29ce484222325ULL;
	static char buf[1 << 16];
	ssize_t n;
	while ((n = read(fd, buf, sizeof buf)) > 0)
		h = fnv(h, buf, (size_t)n);
	close(fd);
	return h;
}

/* Names, modes, sizes, mtimes and contents below d (what fsck -n must not
 * change). */
static uint64_t hash_tree(const char *d, uint64_t h, int depth)
{
	DIR *dd = depth < 16 ? opendir(d) : NULL;
	if (!dd)
		return h;
	struct dirent *e;
	while ((e = readdir(dd))) { /* readdir order is stable on an unchanged tmpfs dir */
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		char p[4200];
		snprintf(p, sizeof p, "%s/%s", d, e->d_name);
		struct stat st;
		if (lstat(p, &st) != 0)
			continue;
		uint64_t f[4] = {st.st_mode, (uint64_t)st.st_size, (uint64_t)st.st_mtim.tv_sec,
				 (uint64_t)st.st_mtim.tv_nsec};
		h = fnv(fnv(h, e->d_name, strlen(e->d_name)), f, sizeof f);
		if (S_ISDIR(st.st_mode))
			h = hash_tree(p, h, depth + 1);
		else if (S_ISREG(st.st_mode))
			h = fnv(h, &(uint64_t){hash_file(p)}, 8);
	}
	closedir(dd);
	return h;
}

/* Every name, every stat, every byte, bounded. */
static void walk(ferrite_fs *fs, const char *dir, int depth, unsigned *budget)
{
	ferrite_dir *d;
	if (depth > 16 || ferrite_opendir(fs, dir, &d) != 0)
		return;
	struct ferrite_dirent e;
	static char buf[65536];
	while (*budget && ferrite_readdir(d, &e) == 1) {
		(*budget)--;
		if (!strcmp(e.name, ".") || !strcmp(e.name, ".."))
			continue;
		char p[4200];
		snprintf(p, sizeof p, "%s%s%s", dir, strcmp(dir, "/") ? "/" : "", e.name);
		struct stat st;
		if (ferrite_lstat(fs, p, &st) != 0)
			continue;
		if (S_ISDIR(st.st_mode)) {
			walk(fs, p, depth + 1, budget);
		} else if (S_ISREG(st.st_mode)) {
			int fd = ferrite_open(fs, p, O_RDWR, 0);
			if (fd < 0)
				continue;
			off_t off = 0;
			ssize_t r;
			while (off < (off_t)(64 * MIB) &&
			       (r = ferrite_pread(fs, fd, buf, sizeof buf, off)) > 0)
				off += r;
			ferrite_pwrite(fs, fd, "x", 1, off / 2); /* a write through the cache */
			ferrite_close(fs, fd);
		} else if (S_ISLNK(st.st_mode)) {
			char t[256];
			ferrite_readlink(fs, p, t, sizeof t);
		}
	}
	ferrite_closedir(d);
}

static void noreport(void *arg, const char *line)
{
	(void)arg;
	(void)line;
}

int tier_fuzz_exercise(const char *pool, const char *backing_dir, char *why, size_t cap)
{
	int broken = 0;
	why[0] = 0;
	uint64_t ph = hash_file(pool), bh = hash_tree(backing_dir, 0, 0);
	int f0 = ferrite_fsck(pool, 0, noreport, NULL, NULL, NULL);
	if (hash_file(pool) != ph || hash_tree(backing_dir, 0, 0) != bh) {
		snprintf(why, cap, "fsck -n changed the %s",
			 hash_file(pool) != ph ? "pool" : "backing directory");
		broken = 1;
	}
	ferrite_fs *fs;
	int m = ferrite_mount(pool, NULL, &fs);
	if (m == 0) {
		unsigned budget = 10000;
		walk(fs, "/", 0, &budget);
		int fd = ferrite_open(fs, "/fuzz-new", O_CREAT | O_RDWR, 0644);
		if (fd >= 0) {
			ferrite_pwrite(fs, fd, "new", 3, 5000);
			ferrite_close(fs, fd);
		}
		ferrite_unmount(fs);
	} else if (f0 == FERRITE_FSCK_CLEAN && !broken) {
		snprintf(why, cap, "fsck -n called the pool clean, but mount says: %s",
			 ferrite_errmsg());
		broken = 2;
	}
	ferrite_fsck(pool, 1, noreport, NULL, NULL, NULL);
	ferrite_fsck(pool, 0, noreport, NULL, NULL, NULL);
	struct ferrite_tier_info ti;
	ferrite_tier_stats(pool, &ti);
	return broken;
}
