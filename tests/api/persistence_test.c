/*
 * persistence_test.c -- proves that everything a mounted pool holds survives
 * unmount + mount unchanged: a varied tree (files of many sizes and holes,
 * modes incl. setuid/sticky, owners, nanosecond times, hard links, relative /
 * absolute / dangling / long symlinks, odd and 255-byte names, renames,
 * deletions) is checked against an in-test model and against a full lstat
 * snapshot (inode numbers, link counts, all three times) after each of several
 * mount cycles, each cycle changing the tree further; fsck is clean after every
 * unmount. Also: unmount with open descriptors/streams, an unlinked-but-open
 * file at unmount, and an empty pool.
 * Usage: persistence_test [-l] [case ...]
 */
#include "ft_test.h"

#define MiB    (1024 * 1024)
#define CYCLES 5

static ferrite_fs *fs;
static const char *pool;

/* ---- model ----------------------------------------------------------------- */

struct ext {
	off_t off, len;
	uint64_t key; /* content ft_fill(key, file offset) */
};

#define MAX_EXT	 24
#define MAX_OBJ	 256
#define MAX_NAME 512

struct obj {
	int used;
	mode_t type; /* S_IFREG / S_IFDIR / S_IFLNK */
	mode_t mode;
	uid_t uid;
	gid_t gid;
	int times_cycle; /* cycle in which times were set, -1 = not tracked */
	int atime_fresh; /* times set and the object not read since */
	struct timespec at, mt;
	off_t size;
	int next;
	struct ext ext[MAX_EXT];
	char target[4100];
};

struct name {
	int used;
	char path[1024];
	int obj;
};

static struct obj objs[MAX_OBJ];
static struct name names[MAX_NAME];
static int cycle;

static int obj_new(mode_t type, mode_t mode, uid_t uid, gid_t gid)
{
	for (int i = 0; i < MAX_OBJ; i++) {
		if (!objs[i].used) {
			memset(&objs[i], 0, sizeof(objs[i]));
			objs[i].used = 1;
			objs[i].type = type;
			objs[i].mode = mode;
			objs[i].uid = uid;
			objs[i].gid = gid;
			objs[i].times_cycle = -1;
			return i;
		}
	}
	fprintf(stderr, "model: too many objects\n");
	exit(2);
}

static void name_add(const char *path, int o)
{
	for (int i = 0; i < MAX_NAME; i++) {
		if (!names[i].used) {
			names[i].used = 1;
			names[i].obj = o;
			snprintf(names[i].path, sizeof(names[i].path), "%s", path);
			return;
		}
	}
	fprintf(stderr, "model: too many names\n");
	exit(2);
}

static int name_find(const char *path)
{
	for (int i = 0; i < MAX_NAME; i++)
		if (names[i].used && strcmp(names[i].path, path) == 0)
			return i;
	return -1;
}

static int obj_nlink(int o)
{
	int n = 0;
	for (int i = 0; i < MAX_NAME; i++)
		if (names[i].used && names[i].obj == o)
			n++;
	if (objs[o].type == S_IFDIR) {
		/* 2 + subdirectories: names whose parent is one of o's paths */
		int self = -1;
		for (int i = 0; i < MAX_NAME; i++)
			if (names[i].used && names[i].obj == o)
				self = i;
		n = 2;
		size_t l = strlen(names[self].path);
		for (int i = 0; i < MAX_NAME; i++) {
			const char *p = names[i].path;
			if (names[i].used && objs[names[i].obj].type == S_IFDIR &&
			    strncmp(p, names[self].path, l) == 0 && p[l] == '/' &&
			    strchr(p + l + 1, '/') == NULL)
				n++;
		}
	}
	return n;
}

/* expected bytes [off, off+len) of object o */
static void obj_expect(const struct obj *ob, void *buf, off_t off, size_t len)
{
	memset(buf, 0, len);
	for (int e = 0; e < ob->next; e++) {
		off_t a = ob->ext[e].off > off ? ob->ext[e].off : off;
		off_t b = ob->ext[e].off + ob->ext[e].len;
		if (b > off + (off_t)len)
			b = off + (off_t)len;
		if (a < b)
			ft_fill((char *)buf + (a - off), (size_t)(b - a), ob->ext[e].key,
				(uint64_t)a);
	}
}

/* ---- operations (act on the pool and on the model) ------------------------- */

static int do_write(const char *path, off_t off, off_t len, uint64_t key)
{
	int n = name_find(path);
	FT_CHECK(n >= 0, "model has no %s", path);
	struct obj *ob = &objs[names[n].obj];
	int fd = FT_OK(ferrite_open(fs, path, O_WRONLY, 0));
	static char buf[1 * MiB];
	for (off_t done = 0; done < len;) {
		size_t c =
		    (size_t)(len - done < (off_t)sizeof(buf) ? len - done : (off_t)sizeof(buf));
		ft_fill(buf, c, key, (uint64_t)(off + done));
		FT_EQ(ferrite_pwrite(fs, fd, buf, c, off + done), (ssize_t)c);
		done += (off_t)c;
	}
	FT_OK(ferrite_close(fs, fd));
	FT_CHECK(ob->next < MAX_EXT, "model: too many extents");
	ob->ext[ob->next++] = (struct ext){off, len, key};
	if (off + len > ob->size)
		ob->size = off + len;
	ob->times_cycle = -1;
	return 0;
}

static int do_truncate(const char *path, off_t size)
{
	struct obj *ob = &objs[names[name_find(path)].obj];
	FT_OK(ferrite_truncate(fs, path, size));
	for (int e = 0; e < ob->next; e++)
		if (ob->ext[e].off + ob->ext[e].len > size)
			ob->ext[e].len = size > ob->ext[e].off ? size - ob->ext[e].off : 0;
	ob->size = size;
	ob->times_cycle = -1;
	return 0;
}

static int do_file(const char *path, mode_t mode, uid_t uid, gid_t gid, off_t size, uint64_t key)
{
	int fd = FT_OK(ferrite_open(fs, path, O_CREAT | O_EXCL | O_WRONLY, 0600));
	FT_OK(ferrite_close(fs, fd));
	int o = obj_new(S_IFREG, 0600, 0, 0);
	name_add(path, o);
	if (size > 0 && do_write(path, 0, size, key) != 0)
		return -1;
	FT_OK(ferrite_chown(fs, path, uid, gid)); /* before chmod: chown may clear set-id bits */
	FT_OK(ferrite_chmod(fs, path, mode));
	objs[o].uid = uid;
	objs[o].gid = gid;
	objs[o].mode = mode;
	return 0;
}

static int do_dir(const char *path, mode_t mode, uid_t uid, gid_t gid)
{
	FT_OK(ferrite_mkdir(fs, path, 0700));
	FT_OK(ferrite_chown(fs, path, uid, gid));
	FT_OK(ferrite_chmod(fs, path, mode));
	name_add(path, obj_new(S_IFDIR, mode, uid, gid));
	return 0;
}

static int do_symlink(const char *target, const char *path, uid_t uid, gid_t gid)
{
	FT_OK(ferrite_symlink(fs, target, path));
	FT_OK(ferrite_lchown(fs, path, uid, gid));
	int o = obj_new(S_IFLNK, 0777, uid, gid);
	snprintf(objs[o].target, sizeof(objs[o].target), "%s", target);
	objs[o].size = (off_t)strlen(target);
	name_add(path, o);
	return 0;
}

static int do_link(const char *from, const char *to)
{
	FT_OK(ferrite_link(fs, from, to));
	name_add(to, names[name_find(from)].obj);
	return 0;
}

static int do_unlink(const char *path)
{
	int n = name_find(path);
	int o = names[n].obj;
	FT_OK(objs[o].type == S_IFDIR ? ferrite_rmdir(fs, path) : ferrite_unlink(fs, path));
	names[n].used = 0;
	int still = 0;
	for (int i = 0; i < MAX_NAME; i++)
		still |= names[i].used && names[i].obj == o;
	if (!still)
		objs[o].used = 0;
	return 0;
}

static int do_rename(const char *from, const char *to)
{
	FT_OK(ferrite_rename(fs, from, to, 0));
	int t = name_find(to);
	if (t >= 0) { /* replaced */
		int o = names[t].obj;
		names[t].used = 0;
		int still = 0;
		for (int i = 0; i < MAX_NAME; i++)
			still |= names[i].used && names[i].obj == o;
		if (!still)
			objs[o].used = 0;
	}
	size_t l = strlen(from);
	for (int i = 0; i < MAX_NAME; i++) {
		if (!names[i].used)
			continue;
		char *p = names[i].path;
		if (strcmp(p, from) == 0 || (strncmp(p, from, l) == 0 && p[l] == '/')) {
			char tmp[1024];
			snprintf(tmp, sizeof(tmp), "%s%s", to, p + l);
			snprintf(p, sizeof(names[i].path), "%s", tmp);
		}
	}
	return 0;
}

static int do_chmod(const char *path, mode_t mode)
{
	FT_OK(ferrite_chmod(fs, path, mode));
	objs[names[name_find(path)].obj].mode = mode;
	return 0;
}

static int do_times(const char *path, long long sec, long nsec)
{
	struct timespec t[2] = {{sec, nsec}, {sec + 1000, 999999999 - nsec}};
	FT_OK(ferrite_utimens(fs, path, t, AT_SYMLINK_NOFOLLOW));
	struct obj *ob = &objs[names[name_find(path)].obj];
	ob->times_cycle = cycle;
	ob->atime_fresh = 1;
	ob->at = t[0];
	ob->mt = t[1];
	return 0;
}

/* ---- checks ---------------------------------------------------------------- */

/* Compares the pool with the model: types, modes, owners, sizes, link counts,
 * shared inodes, times set in the previous step, symlink targets, contents. */
static int verify_model(void)
{
	static ino_t ino_of[MAX_OBJ];
	memset(ino_of, 0, sizeof(ino_of));
	/* stat everything before reading anything (reads may move atime) */
	for (int i = 0; i < MAX_NAME; i++) {
		if (!names[i].used)
			continue;
		struct stat st;
		const char *p = names[i].path;
		int o = names[i].obj;
		struct obj *ob = &objs[o];
		FT_OK(ferrite_lstat(fs, p, &st));
		FT_CHECK((st.st_mode & S_IFMT) == ob->type, "%s: type %o, expected %o", p,
			 st.st_mode & S_IFMT, ob->type);
		if (ob->type != S_IFLNK)
			FT_CHECK((st.st_mode & 07777) == ob->mode, "%s: mode %o, expected %o", p,
				 st.st_mode & 07777, ob->mode);
		FT_CHECK(st.st_uid == ob->uid && st.st_gid == ob->gid,
			 "%s: owner %d:%d, expected %d:%d", p, st.st_uid, st.st_gid, ob->uid,
			 ob->gid);
		if (ob->type != S_IFDIR)
			FT_CHECK(st.st_size == ob->size, "%s: size %lld, expected %lld", p,
				 (long long)st.st_size, (long long)ob->size);
		FT_CHECK((int)st.st_nlink == obj_nlink(o), "%s: nlink %d, expected %d", p,
			 (int)st.st_nlink, obj_nlink(o));
		if (ino_of[o] == 0)
			ino_of[o] = st.st_ino;
		FT_CHECK(ino_of[o] == st.st_ino, "%s: inode %llu, expected the shared inode %llu",
			 p, (unsigned long long)st.st_ino, (unsigned long long)ino_of[o]);
		if (ob->times_cycle >= 0) {
			FT_CHECK(st.st_mtim.tv_sec == ob->mt.tv_sec &&
				     st.st_mtim.tv_nsec == ob->mt.tv_nsec,
				 "%s: mtime %lld.%09ld, expected %lld.%09ld", p,
				 (long long)st.st_mtim.tv_sec, st.st_mtim.tv_nsec,
				 (long long)ob->mt.tv_sec, ob->mt.tv_nsec);
			if (ob->atime_fresh && ob->type != S_IFDIR)
				FT_CHECK(st.st_atim.tv_sec == ob->at.tv_sec &&
					     st.st_atim.tv_nsec == ob->at.tv_nsec,
					 "%s: atime %lld.%09ld, expected %lld.%09ld", p,
					 (long long)st.st_atim.tv_sec, st.st_atim.tv_nsec,
					 (long long)ob->at.tv_sec, ob->at.tv_nsec);
		}
	}
	/* contents and targets */
	static char got[1 * MiB], want[1 * MiB];
	for (int i = 0; i < MAX_NAME; i++) {
		if (!names[i].used)
			continue;
		const char *p = names[i].path;
		struct obj *ob = &objs[names[i].obj];
		ob->atime_fresh = 0; /* reading may move atime from here on */
		if (ob->type == S_IFLNK) {
			ssize_t n = FT_OK(ferrite_readlink(fs, p, got, sizeof(got)));
			FT_CHECK(n == (ssize_t)strlen(ob->target) &&
				     memcmp(got, ob->target, (size_t)n) == 0,
				 "%s: symlink target differs (len %zd, expected %zu)", p, n,
				 strlen(ob->target));
		} else if (ob->type == S_IFREG) {
			int fd = FT_OK(ferrite_open(fs, p, O_RDONLY, 0));
			for (off_t off = 0; off < ob->size; off += (off_t)sizeof(got)) {
				size_t c = (size_t)(ob->size - off < (off_t)sizeof(got)
							? ob->size - off
							: (off_t)sizeof(got));
				ssize_t r = ferrite_pread(fs, fd, got, c, off);
				FT_CHECK(r == (ssize_t)c, "%s: pread at %lld: %s", p,
					 (long long)off, ft_errname(r));
				obj_expect(ob, want, off, c);
				if (memcmp(got, want, c) != 0) {
					size_t k = 0;
					while (got[k] == want[k])
						k++;
					ferrite_close(fs, fd);
					FT_CHECK(0,
						 "%s: content differs at offset %lld: 0x%02x, "
						 "expected 0x%02x",
						 p, (long long)(off + (off_t)k),
						 (unsigned char)got[k], (unsigned char)want[k]);
				}
			}
			char extra;
			FT_EQ(ferrite_pread(fs, fd, &extra, 1, ob->size), 0);
			FT_OK(ferrite_close(fs, fd));
		}
	}
	return 0;
}

/* Full snapshot of the tree by readdir + lstat. */
struct snap_ent {
	char path[1024];
	struct stat st;
	uint64_t target_hash;
};

struct snap {
	struct snap_ent *e;
	int n, cap;
};

static int snap_walk(struct snap *s, const char *dir)
{
	ferrite_dir *d;
	struct ferrite_dirent de;
	int r;
	FT_OK(ferrite_opendir(fs, dir, &d));
	int first = s->n;
	while ((r = ferrite_readdir(d, &de)) == 1) {
		if (strcmp(de.name, ".") == 0 || strcmp(de.name, "..") == 0)
			continue;
		if (s->n == s->cap) {
			s->cap = s->cap ? 2 * s->cap : 256;
			s->e = realloc(s->e, (size_t)s->cap * sizeof(*s->e));
		}
		snprintf(s->e[s->n].path, sizeof(s->e[0].path), "%s/%s",
			 strcmp(dir, "/") ? dir : "", de.name);
		s->n++;
	}
	FT_OK(ferrite_closedir(d));
	FT_EQ(r, 0);
	int last = s->n;
	for (int i = first; i < last; i++) {
		struct stat st;
		FT_OK(ferrite_lstat(fs, s->e[i].path, &st));
		if (S_ISDIR(st.st_mode)) {
			char sub[1024];
			snprintf(sub, sizeof(sub), "%s", s->e[i].path);
			if (snap_walk(s, sub) != 0)
				return -1;
		}
	}
	return 0;
}

static int snap_cmp(const void *a, const void *b)
{
	return strcmp(((const struct snap_ent *)a)->path, ((const struct snap_ent *)b)->path);
}

static uint64_t hash_bytes(const char *p, size_t n)
{
	uint64_t h = 1469598103934665603ULL;
	for (size_t i = 0; i < n; i++)
		h = (h ^ (unsigned char)p[i]) * 1099511628211ULL;
	return h;
}

/* Walk first, then lstat everything: directory reads cannot move the times
 * recorded. */
static int snap_take(struct snap *s)
{
	s->n = 0;
	if (snap_walk(s, "/") != 0)
		return -1;
	qsort(s->e, (size_t)s->n, sizeof(*s->e), snap_cmp);
	for (int i = 0; i < s->n; i++) {
		FT_OK(ferrite_lstat(fs, s->e[i].path, &s->e[i].st));
		s->e[i].target_hash = 0;
		if (S_ISLNK(s->e[i].st.st_mode)) {
			static char t[8192];
			ssize_t n = FT_OK(ferrite_readlink(fs, s->e[i].path, t, sizeof(t)));
			s->e[i].target_hash = hash_bytes(t, (size_t)n);
		}
	}
	return 0;
}

#define SNAP_FIELD(f)                                                                              \
	FT_CHECK(x->st.f == y->st.f, "%s: " #f " was %lld before unmount, %lld after mount",       \
		 x->path, (long long)x->st.f, (long long)y->st.f)

static int snap_same(const struct snap *a, const struct snap *b)
{
	for (int i = 0, j = 0; i < a->n || j < b->n;) {
		int c = i == a->n ? 1 : j == b->n ? -1 : strcmp(a->e[i].path, b->e[j].path);
		FT_CHECK(c >= 0, "%s existed before unmount but not after mount", a->e[i].path);
		FT_CHECK(c <= 0, "%s appeared after mount", b->e[j].path);
		const struct snap_ent *x = &a->e[i++], *y = &b->e[j++];
		SNAP_FIELD(st_ino);
		SNAP_FIELD(st_mode);
		SNAP_FIELD(st_uid);
		SNAP_FIELD(st_gid);
		SNAP_FIELD(st_nlink);
		SNAP_FIELD(st_size);
		SNAP_FIELD(st_mtim.tv_sec);
		SNAP_FIELD(st_mtim.tv_nsec);
		SNAP_FIELD(st_ctim.tv_sec);
		SNAP_FIELD(st_ctim.tv_nsec);
		if (!S_ISDIR(x->st.st_mode)) {
			SNAP_FIELD(st_atim.tv_sec);
			SNAP_FIELD(st_atim.tv_nsec);
		}
		FT_CHECK(x->target_hash == y->target_hash, "%s: symlink target changed", x->path);
	}
	return 0;
}

static int remount(void)
{
	FT_OK(ferrite_unmount(fs));
	fs = NULL;
	if (!ft_is_oracle) {
		int f = ferrite_fsck(pool, 0, NULL, NULL, NULL, NULL);
		FT_CHECK(f == FERRITE_FSCK_CLEAN, "fsck after unmount: %d, expected 0 (clean)", f);
	}
	FT_OK(ferrite_mount(pool, NULL, &fs));
	return 0;
}

/* ---- the tree -------------------------------------------------------------- */

static int build_tree(void)
{
	static const off_t sizes[] = {0, 1, 100, 4095, 4096, 4097, 65539, 1 * MiB + 7, 3 * MiB};
	static const mode_t modes[] = {0600, 0644, 0755, 04755, 02755, 0, 0444, 0640, 06711};
	static const uid_t uids[] = {0, 1000, 1234, 65534, 7};
	char p[1024], q[256];
	FT_RUN(do_dir("/t", 0755, 0, 0));
	FT_RUN(do_dir("/t/d0", 0755, 0, 0));
	FT_RUN(do_dir("/t/d0/s0", 0700, 1000, 1000));
	FT_RUN(do_dir("/t/d0/s0/deep", 0750, 1000, 100));
	FT_RUN(do_dir("/t/d1", 01777, 0, 0));
	FT_RUN(do_dir("/t/d2", 02775, 5, 6));
	FT_RUN(do_dir("/t/empty", 0555, 0, 0));
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		snprintf(p, sizeof(p), "/t/d%zu/f%zu", i % 3, i);
		FT_RUN(do_file(p, modes[i], uids[i % 5], uids[(i + 2) % 5] + 1, sizes[i], 100 + i));
	}
	/* sparse file: holes before, between and after data; set-id bits */
	FT_RUN(do_file("/t/sparse", 0644, 0, 0, 0, 0));
	FT_RUN(do_write("/t/sparse", 5 * MiB + 123, 10000, 201));
	FT_RUN(do_write("/t/sparse", 19 * MiB, 4096, 202));
	FT_RUN(do_truncate("/t/sparse", 24 * MiB + 1));
	/* a file built by many small writes and an overwrite */
	FT_RUN(do_file("/t/d0/pieces", 0644, 0, 0, 0, 0));
	for (int i = 0; i < 10; i++)
		FT_RUN(do_write("/t/d0/pieces", i * 777, 777, 300 + (uint64_t)i));
	FT_RUN(do_write("/t/d0/pieces", 1000, 3000, 399));
	/* hard links across directories */
	FT_RUN(do_link("/t/d0/f0", "/t/d1/link0"));
	FT_RUN(do_link("/t/d0/f0", "/t/d0/s0/link0"));
	FT_RUN(do_link("/t/d1/f1", "/t/d2/link1"));
	/* symlinks */
	FT_RUN(do_symlink("../d1/f1", "/t/d0/rel", 0, 0));
	FT_RUN(do_symlink("/t/d2/f2", "/t/d0/abs", 1000, 1000));
	FT_RUN(do_symlink("nowhere/at/all", "/t/dangling", 0, 0));
	FT_RUN(do_symlink("d0/s0", "/t/todir", 0, 0));
	static char longt[4001];
	for (int i = 0; i < 4000; i++)
		longt[i] = (char)('a' + i % 26);
	longt[4000] = 0;
	FT_RUN(do_symlink(longt, "/t/longlink", 42, 43));
	/* odd names */
	memset(q, 'n', 255);
	q[255] = 0;
	snprintf(p, sizeof(p), "/t/%s", q);
	FT_RUN(do_file(p, 0644, 0, 0, 333, 400));
	FT_RUN(do_file("/t/h\xc3\xa9llo w\xc3\xb6rld \xe2\x98\x83", 0644, 0, 0, 12, 401));
	FT_RUN(do_file("/t/new\nline", 0644, 0, 0, 13, 402));
	FT_RUN(do_file("/t/-dash", 0644, 0, 0, 14, 403));
	FT_RUN(do_file("/t/.hidden", 0644, 0, 0, 15, 404));
	FT_RUN(do_dir("/t/.hdir", 0755, 0, 0));
	/* renamed and deleted entries */
	FT_RUN(do_file("/t/before", 0644, 0, 0, 5000, 405));
	FT_RUN(do_rename("/t/before", "/t/d2/after"));
	FT_RUN(do_file("/t/gone", 0644, 0, 0, 5000, 406));
	FT_RUN(do_unlink("/t/gone"));
	FT_RUN(do_dir("/t/mv0", 0755, 0, 0));
	FT_RUN(do_file("/t/mv0/inside", 0644, 0, 0, 10, 407));
	FT_RUN(do_file("/t/d2/victim", 0644, 0, 0, 10, 408));
	FT_RUN(do_file("/t/d2/replacer", 0644, 0, 0, 20, 409));
	FT_RUN(do_rename("/t/d2/replacer", "/t/d2/victim"));
	FT_RUN(do_file("/t/log", 0644, 0, 0, 0, 0));
	/* explicit times, set last */
	FT_RUN(do_times("/t/d0/f3", 1234567890, 123456789));
	FT_RUN(do_times("/t/longlink", 1000000001, 1));
	FT_RUN(do_times("/t/empty", 999999999, 999999999));
	FT_RUN(do_times("/t/sparse", -12345, 500000000));
	return 0;
}

/* changes made in cycle c */
static int mutate(int c)
{
	char p[256], q[256];
	/* appends continue one stream */
	off_t logsz = objs[names[name_find("/t/log")].obj].size;
	FT_RUN(do_write("/t/log", logsz, 1000 + c * 4096, 500));
	snprintf(p, sizeof(p), "/t/c%d", c);
	FT_RUN(do_file(p, 0600 + (mode_t)c, (uid_t)c, (gid_t)c, c * 100000, 600 + (uint64_t)c));
	if (c >= 3) {
		snprintf(p, sizeof(p), "/t/c%d", c - 2);
		FT_RUN(do_unlink(p));
	}
	snprintf(p, sizeof(p), "/t/mv%d", c - 1);
	snprintf(q, sizeof(q), "/t/mv%d", c);
	FT_RUN(do_rename(p, q));
	FT_RUN(do_chmod("/t/d1/f4", (mode_t)(0600 | (c & 7))));
	FT_RUN(do_write("/t/d1/f7", 4096 * c + 1, 5000, 700 + (uint64_t)c));
	FT_RUN(do_write("/t/sparse", (off_t)c * 3 * MiB + 77, 3000, 800 + (uint64_t)c));
	FT_RUN(do_truncate("/t/d2/f8", 3 * MiB - c * 300000));
	snprintf(p, sizeof(p), "/t/d0/s0/deep/n%d", c);
	FT_RUN(do_dir(p, 0755, 0, 0));
	snprintf(p, sizeof(p), "/t/d1/hl%d", c);
	FT_RUN(do_link("/t/d0/pieces", p));
	FT_RUN(do_times("/t/d0/f3", 1234567890 + c, 100000000 * c + 7));
	FT_RUN(do_times("/t/log", 1600000000 + c, 999999999 - c));
	return 0;
}

/* ---- cases ----------------------------------------------------------------- */

static int c_tree_cycles(void)
{
	static struct snap before, after;
	memset(objs, 0, sizeof(objs));
	memset(names, 0, sizeof(names));
	cycle = 0;
	FT_OK(ft_pool_create(pool, 512ull * MiB, &fs));
	int root = obj_new(S_IFDIR, 0755, 0, 0);
	(void)root; /* "/" is not in the model's name list: it is checked by the snapshot */
	if (build_tree() != 0 || verify_model() != 0)
		return -1;
	struct ferrite_info i0, i1;
	struct statvfs v0, v1;
	for (cycle = 1; cycle <= CYCLES; cycle++) {
		if (snap_take(&before) != 0)
			return -1;
		FT_OK(ferrite_get_info(fs, &i0));
		FT_OK(ferrite_statvfs(fs, &v0));
		if (remount() != 0)
			return -1;
		if (snap_take(&after) != 0 || snap_same(&before, &after) != 0)
			return -1;
		FT_OK(ferrite_get_info(fs, &i1));
		FT_OK(ferrite_statvfs(fs, &v1));
		FT_EQ(i1.files, i0.files);
		FT_EQ(i1.directories, i0.directories);
		FT_EQ(i1.symlinks, i0.symlinks);
		FT_CHECK(ft_is_oracle || ft_is_tier ||
			     (v1.f_bfree == v0.f_bfree && v1.f_ffree == v0.f_ffree),
			 "statvfs changed across remount: bfree %lu -> %lu, ffree %lu -> %lu",
			 (unsigned long)v0.f_bfree, (unsigned long)v1.f_bfree,
			 (unsigned long)v0.f_ffree, (unsigned long)v1.f_ffree);
		if (verify_model() != 0)
			return -1;
		/* a mount that changes nothing, then the cycle's changes */
		if (remount() != 0 || verify_model() != 0)
			return -1;
		if (mutate(cycle) != 0 || verify_model() != 0)
			return -1;
	}
	FT_UNMOUNT_CLEAN(&fs, pool);
	free(before.e);
	free(after.e);
	return 0;
}

static int c_open_at_unmount(void)
{
	/* unmount closes descriptors and streams left open; an unlinked file
	 * that was still open is gone after mount and its space is back */
	static char buf[4 * MiB];
	FT_OK(ft_pool_create(pool, 128ull * MiB, &fs));
	/* the baseline comes after a file was created and removed, so that
	 * metadata blocks that stay allocated are already counted */
	int w = FT_OK(ferrite_open(fs, "/warm", O_CREAT | O_RDWR, 0644));
	FT_EQ(ferrite_write(fs, w, "warm", 4), 4);
	FT_OK(ferrite_close(fs, w));
	FT_OK(ferrite_unlink(fs, "/warm"));
	uint64_t free0 = ft_free_bytes(fs);
	int a = FT_OK(ferrite_open(fs, "/kept", O_CREAT | O_RDWR, 0644));
	ft_fill(buf, sizeof(buf), 1, 0);
	FT_EQ(ferrite_write(fs, a, buf, sizeof(buf)), (ssize_t)sizeof(buf));
	int b = FT_OK(ferrite_open(fs, "/orphan", O_CREAT | O_RDWR, 0644));
	FT_EQ(ferrite_write(fs, b, buf, sizeof(buf)), (ssize_t)sizeof(buf));
	FT_OK(ferrite_unlink(fs, "/orphan"));
	FT_OK(ferrite_dup(fs, b));
	ferrite_dir *d;
	FT_OK(ferrite_opendir(fs, "/", &d));
	struct ferrite_dirent e;
	FT_EQ(ferrite_readdir(d, &e), 1);
	if (remount() != 0)
		return -1;
	struct stat st;
	FT_ERR(ferrite_stat(fs, "/orphan", &st), ENOENT);
	FT_OK(ferrite_stat(fs, "/kept", &st));
	FT_EQ(st.st_size, (off_t)sizeof(buf));
	int fd = FT_OK(ferrite_open(fs, "/kept", O_RDONLY, 0));
	static char back[4 * MiB];
	FT_EQ(ferrite_read(fs, fd, back, sizeof(back)), (ssize_t)sizeof(back));
	FT_CHECK(memcmp(back, buf, sizeof(buf)) == 0, "/kept differs after remount");
	FT_OK(ferrite_close(fs, fd));
	FT_OK(ferrite_unlink(fs, "/kept"));
	uint64_t free1 = ft_free_bytes(fs);
	FT_CHECK(ft_is_oracle || ft_is_tier || free1 + 1 * MiB >= free0,
		 "space of the orphan and of the deleted file must be free after remount: "
		 "%" PRIu64 " at start, %" PRIu64 " now",
		 free0, free1);
	FT_UNMOUNT_CLEAN(&fs, pool);
	return 0;
}

static int c_empty_pool(void)
{
	FT_OK(ft_pool_create(pool, 64ull * MiB, &fs));
	for (int i = 0; i < 3; i++)
		if (remount() != 0)
			return -1;
	struct stat st;
	FT_OK(ferrite_stat(fs, "/", &st));
	FT_CHECK(S_ISDIR(st.st_mode), "root must be a directory");
	FT_EQ(st.st_nlink, 2);
	FT_EQ(ft_count_entries(fs, "/"), 2);
	FT_UNMOUNT_CLEAN(&fs, pool);
	return 0;
}

static const struct ft_case cases[] = {
    {"tree_cycles", c_tree_cycles, 0},
    {"open_at_unmount", c_open_at_unmount, 0},
    {"empty_pool", c_empty_pool, 0},
};

static void after_case(const struct ft_case *c)
{
	if (fs)
		ferrite_unmount(fs);
	fs = NULL;
}

int main(int argc, char **argv)
{
	umask(0);
	pool = ft_pool_path("persist", "main");
	return ft_run(cases, sizeof(cases) / sizeof(cases[0]), argc, argv, NULL, after_case);
}
