/*
 * multiproc_kill_test.c -- many processes on one pm pool, one of them
 * SIGKILLed at random moments (docs/contracts.md#processes): four workers
 * run random operations on a shared tree, each acknowledging what it did
 * in memory the parent reads; the parent kills one at a time, now and then
 * aimed at a worker holding a given lock class (the pool's turn, a shared
 * call, an inode, directory or allocator lock, the log, a record lock), and
 * after each kill the others go on, the pool checks clean while they run,
 * and every acknowledged operation is there.
 *
 *   ./multiproc_kill_test [CASE...]     FT_KILLS=N: kills (300)
 */
#include "ft_test.h"

#include <pthread.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/prctl.h>

#include "fs/fs.h"
#include "space/share_impl.h"

#define MiB (1024ull * 1024)

static const char *pool;

#define WORKERS 4
#define SLOTS	64

/* Where a worker was when it died: which of the locks that guard the pool
 * it held. The turn and the shared calls' counts (share.c H9) are the
 * locks between processes; the others are its own threads' locks, which
 * order the changes it makes under the turn, so a kill while one is held is
 * a kill in the middle of that kind of change. */
enum lock_class {
	LC_OUTSIDE,   /* no call running and no lock held */
	LC_TURN,      /* inside a call: the pool's turn */
	LC_TURN_WAIT, /* inside a call, another process has the turn */
	LC_INODE,     /* an inode's lock (fs->locks) */
	LC_RENAME,    /* a move across directories */
	LC_VNODE,     /* open counts (vn_lock) */
	LC_ALLOC,     /* the allocator */
	LC_MAP,	      /* the window map (remaps) */
	LC_LOG_SLOT,  /* a log slot: a transaction under way */
	LC_LOG,	      /* the log slots' free list */
	LC_ADVISORY,  /* the advisory lock table */
	LC_TABLES,    /* the coordination tables (holders, descriptions) */
	LC_RECORD,    /* a record or flock lock of its own */
	LC_SHARED,    /* inside a shared call (share.c H9): counted in reading[] */
	LC_N
};

static const char *const lc_name[LC_N] = {
    "outside a call",
    "the turn",
    "waiting for the turn",
    "an inode lock",
    "the rename lock",
    "the open counts",
    "the allocator",
    "the window map",
    "a log slot",
    "the log's free list",
    "the advisory lock table",
    "the coordination tables",
    "a record/flock lock",
    "a shared call",
};

/* What a worker acknowledged, in memory the parent reads after a kill:
 * for each of its slots, the key of the file that must be there (0 none). */
struct ack {
	volatile uint64_t key[WORKERS][SLOTS];
	volatile uint64_t pending[WORKERS][SLOTS]; /* a call on the slot is running */
	volatile uint64_t started[WORKERS][SLOTS]; /* calls on the slot begun so far */
	volatile uint64_t ops[WORKERS];
	volatile uint32_t want;		 /* classes a SIGUSR1 kills in (0: any) */
	volatile uint32_t died[WORKERS]; /* classes held when it killed itself */
};

static struct ack *acks;
static ferrite_fs *worker_fs; /* a worker's mount, for held_classes */
static int worker_id;
static volatile sig_atomic_t worker_in_op;

/* The lock words as glibc keeps them: a worker has one thread, so a lock
 * held is a lock it holds. */
static int mutex_held(pthread_mutex_t *m)
{
	return __atomic_load_n(&m->__data.__lock, __ATOMIC_RELAXED) != 0;
}

static int rwlock_held(pthread_rwlock_t *l)
{
	unsigned r = __atomic_load_n(&l->__data.__readers, __ATOMIC_RELAXED);
	return (r >> 3) != 0 || (r & 2) != 0; /* readers, or the write-locked bit */
}

static uint32_t held_classes(void)
{
	ferrite_fs *fs = worker_fs;
	if (!fs)
		return 1u << LC_OUTSIDE;
	struct pool_share *s = fs->m.pool.share;
	uint32_t m = 0;
	uint32_t turn = __atomic_load_n(&s->f->turn, __ATOMIC_RELAXED);
	if (TURN_PID(turn) == (uint32_t)getpid() && TURN_CALLS(turn))
		m |= 1u << LC_TURN;
	if (s->slot >= 0 && __atomic_load_n(&s->f->reading[s->slot].n, __ATOMIC_RELAXED))
		m |= 1u << LC_SHARED;
	else if (worker_in_op && __atomic_load_n(&s->f->waiters, __ATOMIC_RELAXED))
		m |= 1u << LC_TURN_WAIT;
	for (int i = 0; i < FS_LOCK_STRIPES; i++)
		if (rwlock_held(&fs->locks[i])) {
			m |= 1u << LC_INODE;
			break;
		}
	m |= (uint32_t)mutex_held(&fs->rename_lock) << LC_RENAME;
	m |= (uint32_t)mutex_held(&fs->vn_lock) << LC_VNODE;
	m |= (uint32_t)mutex_held(&fs->m.sp.alloc_lock) << LC_ALLOC;
	m |= (uint32_t)mutex_held(&fs->m.sp.map_lock) << LC_MAP;
	m |= (uint32_t)mutex_held(&fs->m.log_lock) << LC_LOG;
	m |= (uint32_t)mutex_held(&fs->lk_mutex) << LC_ADVISORY;
	m |= (uint32_t)mutex_held(&s->tab_lock) << LC_TABLES;
	uint32_t nfree = 0; /* fewer free log slots than slots: one is in use */
	for (int64_t i = fs->m.log_free_head; i >= 0 && i < fs->m.nlogs && nfree <= fs->m.nlogs;
	     nfree++)
		i = fs->m.logs[i].next_free < fs->m.nlogs ? (int64_t)fs->m.logs[i].next_free : -1;
	if (nfree < fs->m.nlogs)
		m |= 1u << LC_LOG_SLOT;
	const struct lk_table *t = share_locks(s);
	for (uint32_t i = 0; i < t->n && i < LK_MAX && s->slot >= 0; i++)
		if (t->e[i].slot == s->slot) {
			m |= 1u << LC_RECORD;
			break;
		}
	if (!(m & ~(1u << LC_RECORD)))
		m |= 1u << LC_OUTSIDE;
	return m;
}

/* SIGUSR1: die here if the worker holds a class the parent wants, noting
 * which it held (the parent then knows where the kill landed). */
static void on_kill_request(int sig)
{
	(void)sig;
	uint32_t m = held_classes();
	uint32_t want = acks->want;
	if (want && !(m & want))
		return;
	acks->died[worker_id] = m;
	kill(getpid(), SIGKILL);
}

static size_t slot_len(uint64_t key)
{
	return 1 + (size_t)(ft_mix64(key) % (3 * 65536));
}

/* A lock to hold across a few steps: a record lock on a range others want
 * too, or a flock; one at a time, so the workers cannot deadlock. */
struct held_lock {
	int rec_fd, flock_fd;
	int kind; /* 0 none, 1 record, 2 flock */
	int steps;
};

static int advisory_step(ferrite_fs *fs, struct held_lock *h, uint64_t *seed)
{
	int rc;
	if (h->kind) {
		if (--h->steps > 0)
			return 0;
		struct flock fl = {.l_type = F_UNLCK, .l_whence = SEEK_SET};
		rc = h->kind == 1 ? ferrite_fcntl_lock(fs, h->rec_fd, F_SETLK, &fl)
				  : ferrite_flock(fs, h->flock_fd, LOCK_UN);
		h->kind = 0;
		return rc;
	}
	int kind = 1 + (int)(ft_rand(seed) % 2);
	do { /* F_SETLKW and flock wait: a SIGUSR1 that did not kill ends the wait */
		if (kind == 1) {
			int64_t at = (int64_t)(ft_rand(seed) % 16) * 64;
			struct flock fl = {
			    .l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = at, .l_len = 128};
			rc = ferrite_fcntl_lock(fs, h->rec_fd, F_SETLKW, &fl);
		} else {
			rc = ferrite_flock(fs, h->flock_fd, LOCK_EX);
		}
	} while (rc == -EINTR);
	if (!rc) {
		h->kind = kind;
		h->steps = 1 + (int)(ft_rand(seed) % 8);
	}
	return rc;
}

/* A directory moved between two parents, back and forth (the rename lock) */
static int move_step(ferrite_fs *fs, int w)
{
	char a[64], b[64];
	snprintf(a, sizeof(a), "/w/a-%d/d", w);
	snprintf(b, sizeof(b), "/w/b-%d/d", w);
	int rc = ferrite_rename(fs, a, b, 0);
	return rc == -ENOENT ? ferrite_rename(fs, b, a, 0) : rc;
}

static int list_step(ferrite_fs *fs)
{
	ferrite_dir *d;
	int rc = ferrite_opendir(fs, "/w", &d);
	if (rc)
		return rc;
	struct ferrite_dirent ent;
	while ((rc = ferrite_readdir(d, &ent)) > 0)
		;
	ferrite_closedir(d);
	return rc;
}

static int worker(void *arg)
{
	int w = (int)(intptr_t)arg;
	if (prctl(PR_SET_PDEATHSIG, SIGKILL) || getppid() == 1)
		return -1; /* never outlive a test that failed */
	ferrite_fs *fs;
	if (ferrite_mount(pool, NULL, &fs)) {
		fprintf(stderr, "worker %d: mount: %s\n", w, ferrite_errmsg());
		return -1;
	}
	struct held_lock h = {.rec_fd = ferrite_open(fs, "/w/locks", O_RDWR | O_CREAT, 0644),
			      .flock_fd = ferrite_open(fs, "/w/locks", O_RDONLY, 0)};
	if (h.rec_fd < 0 || h.flock_fd < 0) {
		fprintf(stderr, "worker %d: open /w/locks: %s\n", w, ferrite_errmsg());
		return -1;
	}
	worker_id = w;
	worker_fs = fs;
	uint64_t seed = (uint64_t)getpid() * 7919 + (uint64_t)w;
	for (;;) {
		int s = (int)(ft_rand(&seed) % SLOTS);
		char path[64], tmp[64];
		snprintf(path, sizeof(path), "/w/%d-%d", w, s);
		snprintf(tmp, sizeof(tmp), "/w/tmp-%d", w);
		uint64_t key = ft_rand(&seed) | 1;
		int op = (int)(ft_rand(&seed) % 7);
		int rc = 0;
		int changes = op == 0 || (op == 1 && acks->key[w][s]);
		if (changes) { /* pending first: see verify_slot */
			acks->pending[w][s] = key;
			acks->started[w][s]++;
		}
		worker_in_op = 1;
		if (op == 0) { /* replace through a rename: old or new after a kill */
			rc = ft_write_file(fs, tmp, key, slot_len(key), O_TRUNC);
			if (!rc)
				rc = ferrite_rename(fs, tmp, path, 0);
		} else if (op == 1 && acks->key[w][s]) {
			rc = ferrite_unlink(fs, path);
			key = 0;
		} else if (op == 2 && acks->key[w][s] && !acks->pending[w][s]) {
			rc = ft_read_check(fs, path, acks->key[w][s], slot_len(acks->key[w][s]));
		} else if (op == 4) {
			rc = advisory_step(fs, &h, &seed);
		} else if (op == 5) {
			rc = move_step(fs, w);
		} else if (op == 6) {
			rc = list_step(fs);
		} else { /* a file of another worker's slot: read whatever is there */
			char other[64];
			snprintf(other, sizeof(other), "/w/%d-%d", (w + 1) % WORKERS, s);
			struct stat st;
			rc = ferrite_stat(fs, other, &st);
			rc = rc == -ENOENT ? 0 : rc;
		}
		worker_in_op = 0;
		if (rc) {
			fprintf(stderr, "worker %d: op %d on %s: %s (%s)\n", w, op, path,
				ft_errname(rc), ferrite_errmsg());
			return -1;
		}
		if (changes) {
			acks->key[w][s] = key;
			acks->pending[w][s] = 0;
		}
		acks->ops[w]++;
	}
}

/* Whether slot s of worker w holds what its last acknowledged operation
 * left. With the workers running (live), a mismatch counts only if no
 * operation on the slot began while it was read (started unchanged; the
 * acknowledgement alone could change and change back: a create then an
 * unlink). Read started, then pending: a worker sets pending, then started. */
static int verify_slot(ferrite_fs *fs, int w, int s, int live)
{
	char path[64];
	snprintf(path, sizeof(path), "/w/%d-%d", w, s);
	uint64_t seq = acks->started[w][s];
	uint64_t p = acks->pending[w][s], k = acks->key[w][s];
	if (p) /* killed inside, or running: the old state or the new one */
		return 0;
	struct stat st;
	int rc = ferrite_stat(fs, path, &st);
	char *buf = NULL;
	long long n = rc;
	int ok = k ? rc == 0 : rc == -ENOENT;
	if (ok && k) {
		size_t len = slot_len(k);
		buf = malloc(len + 1);
		int fd = buf ? ferrite_open(fs, path, O_RDONLY, 0) : -ENOMEM;
		n = fd;
		if (fd >= 0) {
			n = ferrite_pread(fs, fd, buf, len + 1, 0);
			ferrite_close(fs, fd);
		}
		ok = n == (long long)len && ft_verify(buf, len, k, 0) < 0;
	}
	free(buf);
	if (ok || (live && acks->started[w][s] != seq))
		return 0;
	if (!k)
		fprintf(stderr, "  %s: present, but its unlink was acknowledged\n", path);
	else
		fprintf(stderr, "  %s: read %lld, want %zu bytes of key %llu\n", path, n,
			slot_len(k), (unsigned long long)k);
	return -1;
}

static int verify_tree(ferrite_fs *fs, int live)
{
	int bad = 0;
	for (int w = 0; w < WORKERS; w++) {
		for (int s = 0; s < SLOTS; s++)
			bad |= verify_slot(fs, w, s, live);
		if (live) /* a worker may move it between the two looks */
			continue;
		char a[64], b[64];
		struct stat st;
		snprintf(a, sizeof(a), "/w/a-%d/d", w);
		snprintf(b, sizeof(b), "/w/b-%d/d", w);
		if ((ferrite_stat(fs, a, &st) == 0) == (ferrite_stat(fs, b, &st) == 0)) {
			fprintf(stderr, "  %s and %s: the moved directory is not in one place\n", a,
				b);
			bad = 1;
		}
	}
	return bad ? -1 : 0;
}

static void print_problem(void *arg, const char *line)
{
	fprintf(stderr, "  check after kill %d: %s\n", *(int *)arg, line);
}

/* After a kill, with the other workers running: the pool checks clean
 * between their calls (ferrite_check), and every acknowledged operation is
 * there. A mount of this process's own, gone before the next fork. */
static int check_live(int k)
{
	ferrite_fs *fs;
	FT_OK(ferrite_mount(pool, NULL, &fs));
	int rc = ferrite_check(fs, print_problem, &k);
	int tree = verify_tree(fs, 1);
	FT_OK(ferrite_unmount(fs));
	FT_CHECK(rc == FERRITE_FSCK_CLEAN, "after kill %d: the check returned %d (%s)", k, rc,
		 rc < 0 ? ferrite_errmsg() : "problems above");
	FT_CHECK(tree == 0, "after kill %d: acknowledged operations missing (above)", k);
	return 0;
}

/* After worker w died: what it was doing is over, the old state or the new
 * one (unknown until written again); its lock classes are counted. */
static void worker_died(int w, uint64_t kills[LC_N])
{
	for (int s = 0; s < SLOTS; s++)
		if (acks->pending[w][s]) {
			acks->key[w][s] = 0;
			acks->pending[w][s] = 1;
		}
	for (int c = 0; c < LC_N; c++)
		if (acks->died[w] & (1u << c))
			kills[c]++;
	acks->died[w] = 0;
}

static int others_running(const pid_t pids[WORKERS], int k)
{
	for (int v = 0; v < WORKERS; v++) {
		int st;
		if (waitpid(pids[v], &st, WNOHANG) == pids[v])
			FT_CHECK(0, "worker %d stopped by itself (status %#x) after %d kills", v,
				 st, k);
	}
	return 0;
}

/* The kills, random then aimed; the workers run until the caller stops them. */
static int kill_rounds(pid_t pids[WORKERS], int kills, uint64_t in_class[LC_N],
		       uint64_t aimed[LC_N])
{
	uint64_t seed = 12345;
	/* at random moments: wherever the worker is */
	for (int k = 0; k < kills; k++) {
		/* 1-20 ms of work, then one worker dies wherever it is */
		struct timespec ts = {0, 1000000 + (long)(ft_rand(&seed) % 19000000)};
		nanosleep(&ts, NULL);
		int w = (int)(ft_rand(&seed) % WORKERS);
		FT_RUN(others_running(pids, k));
		kill(pids[w], SIGUSR1);
		FT_EQ(ft_reap(pids[w]), 128 + SIGKILL);
		pids[w] = 0;
		worker_died(w, in_class);
		FT_RUN(check_live(k));
		pids[w] = ft_spawn(worker, (void *)(intptr_t)w);
	}
	/* then inside each class the random ones missed: one worker alone (the
	 * others killed, so it does not just wait for the turn) gets requests
	 * every 0.3 ms until it takes one holding that class */
	for (int c = LC_TURN; c < LC_N; c++) {
		if (in_class[c] || aimed[c])
			continue;
		int w = c % WORKERS, died = 0;
		for (int v = 0; v < WORKERS; v++)
			if (v != w) {
				kill(pids[v], SIGUSR1);
				FT_EQ(ft_reap(pids[v]), 128 + SIGKILL);
				pids[v] = 0;
				worker_died(v, in_class);
			}
		acks->want = 1u << c;
		for (int tries = 0; tries < 20000 && !died; tries++) {
			kill(pids[w], SIGUSR1);
			struct timespec ts = {0, 300000};
			nanosleep(&ts, NULL);
			int st = 0;
			pid_t r = waitpid(pids[w], &st, WNOHANG);
			FT_CHECK(r == 0 ||
				     (r == pids[w] && WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL),
				 "worker %d ended with status %#x", w, st);
			died = r == pids[w];
		}
		FT_CHECK(died, "no kill inside %s after 20 000 requests", lc_name[c]);
		pids[w] = 0;
		worker_died(w, aimed);
		FT_RUN(check_live(kills + c));
		acks->want = 0;
		for (int v = 0; v < WORKERS; v++)
			pids[v] = ft_spawn(worker, (void *)(intptr_t)v);
		nanosleep(&(struct timespec){0, 5000000}, NULL);
		FT_RUN(others_running(pids, kills));
	}
	return 0;
}

static int c_kill_workers(void)
{
	int kills = getenv("FT_KILLS") ? atoi(getenv("FT_KILLS")) : 300;
	acks = mmap(NULL, sizeof(*acks), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	FT_CHECK(acks != MAP_FAILED, "mmap");
	memset((void *)acks, 0, sizeof(*acks));
	ferrite_fs *fs;
	FT_OK(ferrite_mount(pool, NULL, &fs));
	FT_OK(ferrite_mkdir(fs, "/w", 0755));
	for (int w = 0; w < WORKERS; w++) {
		char d[64];
		snprintf(d, sizeof(d), "/w/a-%d", w);
		FT_OK(ferrite_mkdir(fs, d, 0755));
		snprintf(d, sizeof(d), "/w/a-%d/d", w);
		FT_OK(ferrite_mkdir(fs, d, 0755));
		snprintf(d, sizeof(d), "/w/b-%d", w);
		FT_OK(ferrite_mkdir(fs, d, 0755));
	}
	FT_OK(ferrite_unmount(fs));
	/* the workers inherit it: a request never finds one without it */
	struct sigaction sa = {.sa_handler = on_kill_request, .sa_flags = SA_RESTART};
	sigemptyset(&sa.sa_mask);
	FT_CHECK(sigaction(SIGUSR1, &sa, NULL) == 0, "sigaction");
	pid_t pids[WORKERS];
	for (int w = 0; w < WORKERS; w++)
		pids[w] = ft_spawn(worker, (void *)(intptr_t)w);
	uint64_t in_class[LC_N] = {0}, aimed[LC_N] = {0};
	int rc = kill_rounds(pids, kills, in_class, aimed);
	for (int w = 0; w < WORKERS; w++)
		if (pids[w] > 0) {
			kill(pids[w], SIGKILL);
			ft_reap(pids[w]);
		}
	uint64_t ops = 0;
	for (int w = 0; w < WORKERS; w++)
		ops += acks->ops[w];
	printf("  %d random kills, %llu operations acknowledged; kills by what the worker held:\n"
	       "    %-26s %6s %6s\n",
	       kills, (unsigned long long)ops, "", "random", "aimed");
	for (int c = 0; c < LC_N; c++)
		printf("    %-26s %6llu %6llu\n", lc_name[c], (unsigned long long)in_class[c],
		       (unsigned long long)aimed[c]);
	FT_RUN(rc);
	FT_CHECK(ops > (uint64_t)kills, "the workers made little progress: %llu operations",
		 (unsigned long long)ops);
	FT_OK(ferrite_mount(pool, NULL, &fs));
	FT_RUN(verify_tree(fs, 0));
	FT_UNMOUNT_CLEAN(&fs, pool);
	munmap((void *)acks, sizeof(*acks));
	return 0;
}

static const struct ft_case cases[] = {
    {"kill_workers", c_kill_workers, 0},
};

int main(int argc, char **argv)
{
	pool = ft_pool_path("multiproc_kill", "main");
	return ft_run_fresh(cases, sizeof(cases) / sizeof(cases[0]), argc, argv, pool, 256 * MiB);
}
