/*
 * procmodel_test.c -- a model test of one pool shared by several processes
 * (docs/contracts.md#processes): N processes, each with a mount of its own
 * or one inherited by fork, make random changes to one small tree -- create,
 * overwrite, append, truncate, unlink, rename, link, mkdir, rmdir, writes and
 * reads through descriptors held across steps (also of unlinked files) --
 * and apply each to a reference kept in shared memory. A process-shared
 * mutex puts the steps in one order; after each, the process that made it
 * compares the whole tree, and its own descriptors, with the reference. So
 * every process sees what every other did as soon as the call returned.
 *
 *   ./procmodel_test [-p PROCS] [-n STEPS_EACH] [-s SEED]
 */
#include "ft_test.h"

#include <pthread.h>
#include <sys/mman.h>

#define NAMES	16 /* d0/f0..f7, d1/f0..f7 */
#define OBJS	64
#define MAXLEN	(12 * 1024)
#define MAXPROC 8

struct obj {
	int used;
	int nlink;
	int opens; /* descriptors of the processes on it */
	uint64_t ino;
	uint32_t len;
	unsigned char data[MAXLEN];
};

struct model {
	pthread_mutex_t mu;
	int dir[2];	 /* directory d0, d1 exists */
	int name[NAMES]; /* object a name leads to, -1 none */
	struct obj o[OBJS];
	long steps, failed; /* failed: a process found a difference */
	long done[11];	    /* steps of each kind that changed something */
	char why[256];
};

static struct model *m;
static const char *pool;

struct held {
	int fd, obj; /* fd -1: none */
};

static void name_path(int n, char *buf, size_t len)
{
	snprintf(buf, len, "/d%d/f%d", n / 8, n % 8);
}

static int new_obj(void)
{
	for (int i = 0; i < OBJS; i++)
		if (!m->o[i].used) {
			memset(&m->o[i], 0, sizeof(m->o[i]));
			m->o[i].used = 1;
			return i;
		}
	return -1;
}

static void obj_unref(int i)
{
	if (m->o[i].nlink == 0 && m->o[i].opens == 0)
		m->o[i].used = 0;
}

static void drop_name(int n)
{
	int i = m->name[n];
	if (i < 0)
		return;
	m->name[n] = -1;
	m->o[i].nlink--;
	obj_unref(i);
}

static int fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int fail(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(m->why, sizeof(m->why), fmt, ap);
	va_end(ap);
	m->failed++;
	return -1;
}

/* Bytes [off, off + len) of the object become pseudo-random ones. */
static void obj_write(struct obj *o, const unsigned char *buf, uint32_t off, uint32_t len)
{
	if (off > o->len)
		memset(o->data + o->len, 0, off - o->len);
	memcpy(o->data + off, buf, len);
	if (off + len > o->len)
		o->len = off + len;
}

static int check_file(ferrite_fs *fs, int fd, const struct obj *o, const char *what)
{
	static unsigned char buf[MAXLEN + 1];
	ssize_t n = ferrite_pread(fs, fd, buf, sizeof(buf), 0);
	if (n != (ssize_t)o->len)
		return fail("%s: %zd bytes read, the reference has %u", what, n, o->len);
	if (memcmp(buf, o->data, o->len))
		return fail("%s: the contents differ from the reference", what);
	return 0;
}

/* The tree and this process's descriptors against the reference. */
static int verify(ferrite_fs *fs, struct held *h)
{
	char path[32];
	for (int d = 0; d < 2; d++) {
		struct stat st;
		snprintf(path, sizeof(path), "/d%d", d);
		int rc = ferrite_stat(fs, path, &st);
		if ((rc == 0) != m->dir[d])
			return fail("%s: stat gives %s, the reference says %s", path,
				    ft_errname(rc), m->dir[d] ? "there" : "gone");
	}
	for (int n = 0; n < NAMES; n++) {
		name_path(n, path, sizeof(path));
		struct stat st;
		int rc = ferrite_stat(fs, path, &st);
		int i = m->name[n];
		if (i < 0) {
			if (rc != -ENOENT)
				return fail("%s: stat gives %s, the reference has no such name",
					    path, ft_errname(rc));
			continue;
		}
		if (rc)
			return fail("%s: stat gives %s", path, ft_errname(rc));
		if (st.st_ino != m->o[i].ino || (int)st.st_nlink != m->o[i].nlink ||
		    st.st_size != m->o[i].len)
			return fail("%s: ino %llu nlink %d size %lld, the reference: %llu %d %u",
				    path, (unsigned long long)st.st_ino, (int)st.st_nlink,
				    (long long)st.st_size, (unsigned long long)m->o[i].ino,
				    m->o[i].nlink, m->o[i].len);
		int fd = ferrite_open(fs, path, O_RDONLY, 0);
		if (fd < 0)
			return fail("%s: open gives %s", path, ft_errname(fd));
		rc = check_file(fs, fd, &m->o[i], path);
		ferrite_close(fs, fd);
		if (rc)
			return rc;
	}
	for (int k = 0; k < NAMES; k++)
		if (h[k].fd >= 0 && check_file(fs, h[k].fd, &m->o[h[k].obj], "a held descriptor"))
			return -1;
	return 0;
}

static int noop(int kind)
{
	m->done[kind]--;
	return 0;
}

/* One random step on the pool and on the reference; 0, or -1 on a
 * difference (the reference is then not changed). */
static int step(ferrite_fs *fs, struct held *h, uint64_t *r)
{
	char a[32], b[32];
	int n = (int)(ft_rand(r) % NAMES), n2 = (int)(ft_rand(r) % NAMES), d = n / 8;
	name_path(n, a, sizeof(a));
	name_path(n2, b, sizeof(b));
	unsigned char buf[MAXLEN];
	uint32_t len = (uint32_t)(ft_rand(r) % (MAXLEN / 2)) + 1;
	for (uint32_t k = 0; k < len; k++)
		buf[k] = (unsigned char)ft_rand(r);
	int i = m->name[n], rc, kind = (int)(ft_rand(r) % 11);
	m->done[kind]++; /* taken back below by a step that does nothing */
	switch (kind) {
	case 0: /* mkdir, or rmdir when empty */
		snprintf(a, sizeof(a), "/d%d", d);
		if (!m->dir[d]) {
			if ((rc = ferrite_mkdir(fs, a, 0755)))
				return fail("mkdir %s: %s", a, ft_errname(rc));
			m->dir[d] = 1;
			return 0;
		}
		for (int k = d * 8; k < d * 8 + 8; k++)
			if (m->name[k] >= 0)
				return noop(kind);
		if ((rc = ferrite_rmdir(fs, a)))
			return fail("rmdir %s: %s", a, ft_errname(rc));
		m->dir[d] = 0;
		return 0;
	case 1:
	case 2: { /* create or overwrite from the start */
		if (!m->dir[d])
			return noop(kind);
		int fd = ferrite_open(fs, a, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		if (fd < 0)
			return fail("open %s O_CREAT|O_TRUNC: %s", a, ft_errname(fd));
		ssize_t w = ferrite_write(fs, fd, buf, len);
		struct stat st;
		ferrite_fstat(fs, fd, &st);
		ferrite_close(fs, fd);
		if (w != (ssize_t)len)
			return fail("write %s: %zd", a, w);
		if (i < 0) {
			if ((i = new_obj()) < 0)
				return noop(
				    kind); /* the reference is full: it stays so until unlinks */
			m->name[n] = i;
			m->o[i].nlink = 1;
			m->o[i].ino = (uint64_t)st.st_ino;
		}
		m->o[i].len = 0;
		obj_write(&m->o[i], buf, 0, len);
		return 0;
	}
	case 3: /* append */
		if (i < 0 || m->o[i].len + len > MAXLEN)
			return noop(kind);
		{
			int fd = ferrite_open(fs, a, O_WRONLY | O_APPEND, 0);
			ssize_t w = fd < 0 ? fd : ferrite_write(fs, fd, buf, len);
			if (fd >= 0)
				ferrite_close(fs, fd);
			if (w != (ssize_t)len)
				return fail("append %s: %zd", a, w);
			obj_write(&m->o[i], buf, m->o[i].len, len);
		}
		return 0;
	case 4: /* truncate, down or up */
		if (i < 0)
			return noop(kind);
		len %= MAXLEN;
		if ((rc = ferrite_truncate(fs, a, len)))
			return fail("truncate %s: %s", a, ft_errname(rc));
		if (len > m->o[i].len)
			memset(m->o[i].data + m->o[i].len, 0, len - m->o[i].len);
		m->o[i].len = len;
		return 0;
	case 5: /* unlink */
		if (i < 0)
			return noop(kind);
		if ((rc = ferrite_unlink(fs, a)))
			return fail("unlink %s: %s", a, ft_errname(rc));
		drop_name(n);
		return 0;
	case 6: /* rename over whatever is there */
		if (i < 0 || !m->dir[n2 / 8] || n == n2 || m->name[n2] == i)
			return noop(kind);
		if ((rc = ferrite_rename(fs, a, b, 0)))
			return fail("rename %s %s: %s", a, b, ft_errname(rc));
		drop_name(n2);
		m->name[n2] = i;
		m->name[n] = -1;
		return 0;
	case 7: /* link to a free name */
		if (i < 0 || !m->dir[n2 / 8] || m->name[n2] >= 0)
			return noop(kind);
		if ((rc = ferrite_link(fs, a, b)))
			return fail("link %s %s: %s", a, b, ft_errname(rc));
		m->name[n2] = i;
		m->o[i].nlink++;
		return 0;
	case 8: /* hold a descriptor across steps */
		if (i < 0 || h[n].fd >= 0)
			return noop(kind);
		if ((h[n].fd = ferrite_open(fs, a, O_RDWR, 0)) < 0)
			return fail("open %s: %s", a, ft_errname(h[n].fd));
		h[n].obj = i;
		m->o[i].opens++;
		return 0;
	case 9: /* write through a held one: the file may be unlinked, renamed */
		if (h[n].fd < 0)
			return noop(kind);
		{
			struct obj *o = &m->o[h[n].obj];
			uint32_t off = (uint32_t)(ft_rand(r) % (o->len + 1));
			len = len < MAXLEN - off ? len : MAXLEN - off;
			ssize_t w = ferrite_pwrite(fs, h[n].fd, buf, len, off);
			if (w != (ssize_t)len)
				return fail("pwrite through a held descriptor: %zd", w);
			obj_write(o, buf, off, len);
		}
		return 0;
	default: /* close a held one: an unlinked file goes */
		if (h[n].fd < 0)
			return noop(kind);
		ferrite_close(fs, h[n].fd);
		h[n].fd = -1;
		m->o[h[n].obj].opens--;
		obj_unref(h[n].obj);
		return 0;
	}
}

static int proc_main(int id, int nsteps, uint64_t seed, int inherited, ferrite_fs *fs)
{
	if (!inherited && ferrite_mount(pool, NULL, &fs)) {
		fprintf(stderr, "process %d: mount: %s\n", id, ferrite_errmsg());
		return 1;
	}
	struct held h[NAMES];
	for (int k = 0; k < NAMES; k++)
		h[k].fd = -1;
	uint64_t r = seed * 1000003 + (uint64_t)id;
	int bad = 0;
	for (int s = 0; s < nsteps && !bad; s++) {
		pthread_mutex_lock(&m->mu);
		if (m->failed) {
			pthread_mutex_unlock(&m->mu);
			break;
		}
		bad = step(fs, h, &r) || verify(fs, h);
		if (bad)
			fprintf(stderr, "process %d, step %ld: %s\n", id, m->steps, m->why);
		m->steps++;
		pthread_mutex_unlock(&m->mu);
	}
	pthread_mutex_lock(&m->mu);
	for (int k = 0; k < NAMES; k++)
		if (h[k].fd >= 0) {
			ferrite_close(fs, h[k].fd);
			m->o[h[k].obj].opens--;
			obj_unref(h[k].obj);
		}
	pthread_mutex_unlock(&m->mu);
	if (!inherited && ferrite_unmount(fs))
		bad = 1;
	return bad;
}

int main(int argc, char **argv)
{
	int procs = 4, nsteps = 400, opt;
	uint64_t seed = 1;
	while ((opt = getopt(argc, argv, "p:n:s:")) != -1) {
		if (opt == 'p')
			procs = atoi(optarg);
		else if (opt == 'n')
			nsteps = atoi(optarg);
		else if (opt == 's')
			seed = strtoull(optarg, NULL, 0);
		else
			return 2;
	}
	if (procs < 2 || procs > MAXPROC)
		procs = 4;
	pool = ft_pool_path("procmodel", "main");
	struct ferrite_mkfs_opts mo = {.size = 128ull << 20, .force = 1};
	if (ferrite_mkfs(pool, &mo)) {
		fprintf(stderr, "mkfs: %s\n", ferrite_errmsg());
		return 1;
	}
	m = mmap(NULL, sizeof(*m), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (m == MAP_FAILED)
		return 1;
	pthread_mutexattr_t ma;
	pthread_mutexattr_init(&ma);
	pthread_mutexattr_setpshared(&ma, PTHREAD_PROCESS_SHARED);
	pthread_mutex_init(&m->mu, &ma);
	for (int n = 0; n < NAMES; n++)
		m->name[n] = -1;
	/* half the processes mount the pool themselves (forked before the
	 * parent mounts it); the others are forked by the parent with the pool
	 * mounted and go on with that mount */
	pid_t pids[MAXPROC];
	ferrite_fs *fs = NULL;
	fflush(NULL);
	for (int p = 0; p < procs; p += 2)
		if ((pids[p] = fork()) == 0) {
			ft_npools = 0; /* the parent removes the pool */
			_exit(proc_main(p, nsteps, seed, 0, NULL));
		}
	if (ferrite_mount(pool, NULL, &fs)) {
		fprintf(stderr, "mount: %s\n", ferrite_errmsg());
		return 1;
	}
	for (int p = 1; p < procs; p += 2)
		if ((pids[p] = fork()) == 0) {
			ft_npools = 0;
			_exit(proc_main(p, nsteps, seed, 1, fs));
		}
	int bad = 0;
	for (int p = 0; p < procs; p++) {
		int st;
		waitpid(pids[p], &st, 0);
		if (!WIFEXITED(st) || WEXITSTATUS(st)) {
			fprintf(stderr, "process %d ended with status %#x\n", p, st);
			bad = 1;
		}
	}
	struct held none[NAMES];
	for (int k = 0; k < NAMES; k++)
		none[k].fd = -1;
	if (!bad && verify(fs, none)) {
		fprintf(stderr, "after all: %s\n", m->why);
		bad = 1;
	}
	if (ferrite_unmount(fs))
		bad = 1;
	int fsck = ferrite_fsck(pool, 0, NULL, NULL, NULL, NULL);
	if (fsck != FERRITE_FSCK_CLEAN) {
		fprintf(stderr, "fsck: status %d\n", fsck);
		bad = 1;
	}
	static const char *kinds[11] = {"mkdir/rmdir", "create",     "overwrite", "append",
					"truncate",    "unlink",     "rename",	  "link",
					"hold",	       "write held", "close held"};
	for (int k = 0; k < 11; k++)
		printf("%s %ld%s", kinds[k], m->done[k], k < 10 ? ", " : "\n");
	printf("%d processes, %ld steps: %s\n", procs, m->steps,
	       bad ? "FAILED" : "every step as the reference");
	return bad;
}
