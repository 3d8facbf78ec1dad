/*
 * core.c -- the shim's state: configuration, the lazily mounted pool, the
 * descriptor table (S1, S2 in shim.h), and the fork rule.
 *
 * Invariants: C1 the pool is mounted at most once per process image, on the
 *               first call that names a pool path (or restores descriptors
 *               after exec); a failed mount is reported once and its -errno is
 *               returned to every later pool call;
 *             C2 a forked child goes on with the pool it inherited: the
 *               library lets the processes take turns (space/share.c), and
 *               the child's first call counts what it inherited. A tiered
 *               pool is held by one process: there a forked child never
 *               enters the library (docs/contracts.md#preload-fork);
 *             C3 a placeholder descriptor is created before its table slot is
 *               filled and closed after the slot is emptied, so a number in
 *               the table always names a placeholder of ours;
 *             C4 every change of slot 0, 1 or 2 is told to stdio.c
 *               (sh_std_changed, after the table lock is released), which
 *               keeps stdin/stdout/stderr on a stream over the pool file.
 * Locking: sh_tab_lock (rwlock, table slots), mount_lock (mount). Neither
 *   is held across a call into the library except mount_lock during the
 *   mount itself. Advisory locks are the library's (ferrite_fcntl_lock,
 *   ferrite_flock), shared with every process that has the pool.
 */
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "preload/shim.h"

__thread int sh_depth __attribute__((tls_model("initial-exec")));
int sh_forked;
int sh_record_locks;   /* the process has set a record lock (io.c) */
static int pool_alone; /* the mounted pool cannot be shared (a tiered pool) */
struct sh_config sh_cfg;
ferrite_fs *sh_the_fs;

void *sh_next(const char *name)
{
	void *p = dlsym(RTLD_NEXT, name);
	if (!p) {
		static const char msg[] = "ferrite preload: a libc function is missing\n";
		(void)!write(2, msg, sizeof(msg) - 1);
		abort();
	}
	return p;
}

/* ---- configuration ---------------------------------------------------------- */

static pthread_once_t cfg_once = PTHREAD_ONCE_INIT;

static void cfg_load(void)
{
	const char *pre = getenv("FERRITE_PREFIX");
	char norm[PATH_MAX];
	if (!pre || pre[0] != '/' || sh_normalise(pre, norm, sizeof(norm)) || !strcmp(norm, "/"))
		strcpy(norm, "/pm");
	strcpy(sh_cfg.prefix, norm);
	sh_cfg.plen = strlen(norm);
	const char *pool = getenv("FERRITE_POOL");
	if (pool && strlen(pool) < sizeof(sh_cfg.pool))
		strcpy(sh_cfg.pool, pool);
	/* ferrite run --mode: the mount overrides the pool's mode. */
	const char *mode = getenv("FERRITE_MODE");
	sh_cfg.mode = !mode			? FERRITE_MOUNT_POOL_MODE
		      : !strcmp(mode, "strict") ? FERRITE_MOUNT_STRICT
		      : !strcmp(mode, "sync")	? FERRITE_MOUNT_SYNC
						: FERRITE_MOUNT_POOL_MODE;
	mode_t m = umask(022);
	umask(m);
	sh_cfg.umask = m;
	sh_kcwd_update();
}

void sh_config_init(void)
{
	pthread_once(&cfg_once, cfg_load);
}

SH_EXPORT mode_t umask(mode_t mask)
{
	mode_t old = REAL(umask)(mask);
	sh_cfg.umask = mask & 0777;
	return old;
}

/* ---- the pool ------------------------------------------------------------------ */

static pthread_mutex_t mount_lock = PTHREAD_MUTEX_INITIALIZER;
static int mount_err;

ferrite_fs *sh_fs_if_mounted(void)
{
	return __atomic_load_n(&sh_the_fs, __ATOMIC_ACQUIRE);
}

ferrite_fs *sh_fs(int *err)
{
	ferrite_fs *fs = sh_fs_if_mounted();
	if (fs && !sh_forked)
		return fs;
	if (sh_forked) {
		*err = sh_fork_denied();
		return NULL;
	}
	sh_config_init();
	pthread_mutex_lock(&mount_lock);
	if (!sh_the_fs && !mount_err) {
		const char *pool = sh_cfg.pool[0] ? sh_cfg.pool : NULL;
		struct ferrite_mount_opts mo = {.mode = sh_cfg.mode};
		int rc = SH_CALL(ferrite_mount(pool, &mo, &fs));
		if (rc) {
			mount_err = rc;
			fprintf(stderr, "ferrite: cannot mount the pool for %s: %s\n",
				sh_cfg.prefix, SH_CALL(ferrite_errmsg()));
		} else {
			/* Absolute links to /pm/... lead back in; others out (sh_escaped). */
			SH_CALL(ferrite_set_link_prefix(fs, sh_cfg.prefix));
			struct ferrite_tier_info ti;
			pool_alone = SH_CALL(ferrite_get_tier_info(fs, &ti)) == 0;
			__atomic_store_n(&sh_the_fs, fs, __ATOMIC_RELEASE);
		}
	}
	fs = sh_the_fs;
	if (!fs)
		*err = mount_err;
	pthread_mutex_unlock(&mount_lock);
	return fs;
}

int sh_escaped(const char **path)
{
	static __thread char host[PATH_MAX];
	const char *e = SH_CALL(ferrite_escaped_path());
	if (!e || e[0] != '/' || strlen(e) >= sizeof(host))
		return 0;
	strcpy(host, e);
	*path = host;
	return 1;
}

int sh_fork_denied(void)
{
	static int told;
	if (!__atomic_exchange_n(&told, 1, __ATOMIC_RELAXED))
		fprintf(stderr,
			"ferrite: process %d is a forked child of the process that holds the "
			"tiered pool; it cannot use files under %s (a tiered pool belongs to one "
			"process: use `ferrite mount POOL DIR` to share it)\n",
			(int)getpid(), sh_cfg.prefix);
	return -EIO;
}

/* ---- descriptor table ---------------------------------------------------------- */

#define TAB_SHIFT  10
#define TAB_CHUNK  (1 << TAB_SHIFT)
#define TAB_CHUNKS 1024 /* descriptors below 2^20 */

static pthread_rwlock_t sh_tab_lock = PTHREAD_RWLOCK_INITIALIZER;
static struct sh_file **sh_tab[TAB_CHUNKS];

static struct sh_file **slot(int fd, int create)
{
	if (fd < 0 || fd >= TAB_CHUNKS * TAB_CHUNK)
		return NULL;
	struct sh_file **c = __atomic_load_n(&sh_tab[fd >> TAB_SHIFT], __ATOMIC_ACQUIRE);
	if (!c && create) {
		c = calloc(TAB_CHUNK, sizeof(*c));
		if (!c)
			return NULL;
		__atomic_store_n(&sh_tab[fd >> TAB_SHIFT], c, __ATOMIC_RELEASE); /* wrlock held */
	}
	return c ? &c[fd & (TAB_CHUNK - 1)] : NULL;
}

struct sh_file *sh_file_get(int fd)
{
	struct sh_file **s = slot(fd, 0);
	if (!s || !__atomic_load_n(s, __ATOMIC_RELAXED))
		return NULL; /* the common case: a kernel descriptor, no lock */
	pthread_rwlock_rdlock(&sh_tab_lock);
	struct sh_file *f = *s;
	if (f)
		__atomic_add_fetch(&f->refs, 1, __ATOMIC_RELAXED);
	pthread_rwlock_unlock(&sh_tab_lock);
	return f;
}

void sh_file_put(struct sh_file *f)
{
	if (__atomic_sub_fetch(&f->refs, 1, __ATOMIC_ACQ_REL))
		return;
	ferrite_fs *fs = sh_fs_if_mounted();
	if (fs && !sh_forked) { /* C2 */
		if (f->dir)
			SH_CALL(ferrite_closedir(f->dir));
		SH_CALL(ferrite_close(fs, f->ffd));
	}
	free(f->path);
	free(f);
}

struct sh_file *sh_file_new(int ffd, int oflags, const char *path)
{
	struct sh_file *f = calloc(1, sizeof(*f));
	if (!f)
		return NULL;
	f->ffd = ffd;
	f->refs = 1;
	f->oflags = oflags;
	f->path = path ? strdup(path) : NULL;
	struct stat st;
	if (SH_CALL(ferrite_fstat(sh_fs_if_mounted(), ffd, &st)) == 0)
		f->ino = st.st_ino;
	return f;
}

void sh_report_damage(void)
{
	static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
	static char last[256];
	char msg[256];
	const char *m = SH_CALL(ferrite_errmsg());
	size_t n = 0;
	/* the message may quote what the pool holds: nothing reaches the
	 * terminal that is not printable */
	for (; m && m[n] && n < sizeof(msg) - 1; n++)
		msg[n] = (unsigned char)m[n] < 0x20 || m[n] == 0x7f ? '?' : m[n];
	msg[n] = 0;
	if (!n)
		return;
	pthread_mutex_lock(&lock);
	int seen = strcmp(last, msg) == 0;
	if (!seen)
		memcpy(last, msg, sizeof(msg));
	pthread_mutex_unlock(&lock);
	if (!seen)
		fprintf(stderr, "ferrite: %s: %s\n", sh_cfg.prefix, msg);
}

/* A placeholder descriptor (S1): >= minfd, or exactly `at`; a parked one
 * if it may be (S4). */
static int placeholder(int minfd, int cloexec, int at)
{
	if (at >= 0 && sh_park_claim(at)) { /* the number is a placeholder already */
		int rc = sh_park_set_cloexec(at, cloexec);
		if (rc)
			sh_kclose(at);
		return rc ? rc : at;
	}
	if (at < 0) {
		int p = sh_park_take(minfd, cloexec);
		if (p >= 0)
			return p;
	}
	int t = REAL(openat)(AT_FDCWD, "/dev/null", O_PATH | O_CLOEXEC);
	if (t < 0 && errno == EMFILE && sh_park_release())
		t = REAL(openat)(AT_FDCWD, "/dev/null", O_PATH | O_CLOEXEC);
	if (t < 0)
		return -errno;
	sh_park_opened(t); /* the lowest free number (P2) */
	int fd;
	if (at >= 0)
		fd = at == t ? t : REAL(dup3)(t, at, O_CLOEXEC);
	else if (t >= minfd)
		fd = t;
	else
		fd = REAL(fcntl)(t, F_DUPFD_CLOEXEC, minfd);
	int e = errno;
	if (fd != t)
		sh_kclose(t);
	if (fd < 0)
		return -e;
	if (!cloexec)
		REAL(fcntl)(fd, F_SETFD, 0);
	sh_park_cloexec(fd, cloexec);
	return fd;
}

static int table_put(int fd, struct sh_file *f)
{
	pthread_rwlock_wrlock(&sh_tab_lock);
	struct sh_file **s = slot(fd, 1);
	struct sh_file *old = NULL;
	if (s) {
		old = *s;
		__atomic_store_n(s, f, __ATOMIC_RELEASE);
	}
	pthread_rwlock_unlock(&sh_tab_lock);
	if (old)
		sh_file_put(old);
	return s ? 0 : -EMFILE;
}

int sh_dup_to(struct sh_file *f, int minfd, int cloexec, int at)
{
	int fd = placeholder(minfd, cloexec, at);
	if (fd < 0)
		return fd;
	__atomic_add_fetch(&f->refs, 1, __ATOMIC_RELAXED);
	int rc = table_put(fd, f);
	if (rc) {
		sh_file_put(f);
		sh_kclose(fd);
		return rc;
	}
	if (fd < 3)
		sh_std_changed(fd); /* C4 */
	return fd;
}

int sh_adopt(int fd, struct sh_file *f)
{
	__atomic_add_fetch(&f->refs, 1, __ATOMIC_RELAXED);
	int rc = table_put(fd, f);
	if (rc)
		sh_file_put(f);
	else if (fd < 3)
		sh_std_changed(fd); /* C4 */
	return rc;
}

int sh_install(int ffd, int oflags, const char *path, int minfd, int cloexec)
{
	struct sh_file *f = sh_file_new(ffd, oflags, path);
	if (!f) {
		SH_CALL(ferrite_close(sh_fs_if_mounted(), ffd));
		return -ENOMEM;
	}
	int fd = sh_dup_to(f, minfd, cloexec, -1);
	sh_file_put(f); /* the table holds it now, or nothing does */
	return fd;
}

int sh_forget(int fd)
{
	struct sh_file **s = slot(fd, 0);
	if (!s || !__atomic_load_n(s, __ATOMIC_RELAXED))
		return 0;
	pthread_rwlock_wrlock(&sh_tab_lock);
	struct sh_file *f = *s;
	__atomic_store_n(s, NULL, __ATOMIC_RELEASE);
	pthread_rwlock_unlock(&sh_tab_lock);
	/* POSIX: closing any descriptor of a file drops the process's record
	 * locks on it; the last one's close does it in the library */
	if (f && sh_record_locks && !sh_forked && __atomic_load_n(&f->refs, __ATOMIC_ACQUIRE) > 1) {
		struct flock all = {.l_type = F_UNLCK, .l_whence = SEEK_SET};
		SH_CALL(ferrite_fcntl_lock(sh_fs_if_mounted(), f->ffd, F_SETLK, &all));
	}
	if (f)
		sh_file_put(f);
	if (f && fd < 3)
		sh_std_changed(fd); /* C4 */
	return f != NULL;
}

void sh_for_each(void (*fn)(int fd, struct sh_file *f, void *arg), void *arg)
{
	pthread_rwlock_rdlock(&sh_tab_lock);
	for (int c = 0; c < TAB_CHUNKS; c++) {
		struct sh_file **ch = sh_tab[c];
		if (!ch)
			continue;
		for (int i = 0; i < TAB_CHUNK; i++)
			if (ch[i])
				fn(c * TAB_CHUNK + i, ch[i], arg);
	}
	pthread_rwlock_unlock(&sh_tab_lock);
}

/* ---- fork and start-up ---------------------------------------------------------- */

static void fork_prepare(void)
{
	pthread_rwlock_wrlock(&sh_tab_lock);
	sh_park_fork_prepare();
}

static void fork_parent(void)
{
	sh_park_fork_parent();
	pthread_rwlock_unlock(&sh_tab_lock);
}

static void fork_child(void)
{
	/* glibc lets only the thread that write-locked an rwlock unlock it, and
	 * the child's one thread has another id: start the lock afresh. */
	pthread_rwlock_t fresh = PTHREAD_RWLOCK_INITIALIZER;
	memcpy(&sh_tab_lock, &fresh, sizeof(fresh));
	sh_park_fork_child();
	if (sh_fs_if_mounted() && pool_alone)
		sh_forked = 1; /* C2 */
}

__attribute__((constructor)) static void sh_start(void)
{
	sh_config_init();
	sh_park_start();
	pthread_atfork(fork_prepare, fork_parent, fork_child);
	sh_exec_restore();
}
