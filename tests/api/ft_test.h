/*
 * ft_test.h -- shared harness of the api/ and scale/ tests: a table of named
 * cases, checks that print the case, the expression, the expected and the
 * actual value and ferrite_errmsg(), and pools in /dev/shm that are removed at
 * exit and on a fatal signal.
 *
 * Include it first in a test: it defines _GNU_SOURCE (for renameat2 flags,
 * strerrorname_np, ...) before any system header is seen.
 */
#ifndef FT_TEST_H
#define FT_TEST_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "ferrite.h"

/* ---- cases ---------------------------------------------------------------- */

#define FT_ORACLE_SKIP 1u /* the Linux reference cannot express this case */
#define FT_TIER_SKIP   2u /* a pm-engine property tiered pools do not have */

struct ft_case {
	const char *name;
	int (*fn)(void); /* 0 pass, -1 fail (already reported) */
	unsigned flags;
};

static const char *ft_case_name = "(setup)";
static int ft_case_failed; /* a check of the current case failed */
/* FT_KEEP_GOING=1 in the environment: a failed FT_ERR / FT_ERR2 / FT_EQ is
 * reported and the case goes on, to list every deviation in one run. */
static int ft_keep_going;
static int ft_is_oracle; /* set when linked against tests/api/linuxref */
/* Set when $FERRITE_TEST_TIER makes the pools tiered: space (statvfs) is the
 * backing file system's, shared with everything else on it. */
static int ft_is_tier;

static inline const char *ft_errname(long long v)
{
	static __thread char buf[64];
	if (v < 0 && v > -4096) {
		const char *n = strerrorname_np((int)-v);
		snprintf(buf, sizeof(buf), "-%s (%lld)", n ? n : "E?", v);
	} else {
		snprintf(buf, sizeof(buf), "%lld", v);
	}
	return buf;
}

static inline void ft_vreport(const char *file, int line, const char *fmt, va_list ap)
{
	ft_case_failed = 1;
	fprintf(stderr, "FAIL [%s] %s:%d: ", ft_case_name, file, line);
	vfprintf(stderr, fmt, ap);
	fprintf(stderr, " (ferrite_errmsg: \"%s\")\n", ferrite_errmsg());
	fflush(stderr);
}

__attribute__((format(printf, 3, 4))) static inline void ft_report(const char *file, int line,
								   const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	ft_vreport(file, line, fmt, ap);
	va_end(ap);
}

/* expr must return exactly -E. */
#define FT_ERR(expr, E)                                                                            \
	do {                                                                                       \
		long long ft_g_ = (long long)(expr);                                               \
		if (ft_g_ != -(long long)(E)) {                                                    \
			char ft_w_[64];                                                            \
			snprintf(ft_w_, sizeof(ft_w_), "%s", ft_errname(-(long long)(E)));         \
			ft_report(__FILE__, __LINE__, "%s: expected %s, got %s", #expr, ft_w_,     \
				  ft_errname(ft_g_));                                              \
			if (!ft_keep_going)                                                        \
				return -1;                                                         \
		}                                                                                  \
	} while (0)

/* expr must return -E1 or -E2 (for the few places where POSIX allows both). */
#define FT_ERR2(expr, E1, E2)                                                                      \
	do {                                                                                       \
		long long ft_g_ = (long long)(expr);                                               \
		if (ft_g_ != -(long long)(E1) && ft_g_ != -(long long)(E2)) {                      \
			ft_report(__FILE__, __LINE__, "%s: expected -%s or -%s, got %s", #expr,    \
				  strerrorname_np(E1), strerrorname_np(E2), ft_errname(ft_g_));    \
			if (!ft_keep_going)                                                        \
				return -1;                                                         \
		}                                                                                  \
	} while (0)

/* Like FT_ERR2 followed by FT_ERRMSG_ONE_LINE, but expr runs in a forked
 * child so that a crash is reported as a failure of this check instead of
 * ending the test. The child sees the
 * pool as the parent does (the mapping is shared), so use it for calls that
 * must fail without changing anything. */
#define FT_ERR2_NOCRASH(expr, E1, E2)                                                              \
	do {                                                                                       \
		fflush(NULL);                                                                      \
		pid_t ft_p_ = fork();                                                              \
		if (ft_p_ == 0) {                                                                  \
			ft_npools = 0; /* a crash must not remove the parent's pools */            \
			long long ft_g_ = (long long)(expr);                                       \
			if (ft_g_ != -(long long)(E1) && ft_g_ != -(long long)(E2)) {              \
				ft_report(__FILE__, __LINE__, "%s: expected -%s or -%s, got %s",   \
					  #expr, strerrorname_np(E1), strerrorname_np(E2),         \
					  ft_errname(ft_g_));                                      \
				fflush(NULL);                                                      \
				_exit(1);                                                          \
			}                                                                          \
			const char *ft_m_ = ferrite_errmsg();                                      \
			if (!ft_m_ || !ft_m_[0] || strchr(ft_m_, '\n')) {                          \
				ft_report(__FILE__, __LINE__,                                      \
					  "%s: ferrite_errmsg() must be one non-empty line",       \
					  #expr);                                                  \
				fflush(NULL);                                                      \
				_exit(1);                                                          \
			}                                                                          \
			_exit(0);                                                                  \
		}                                                                                  \
		int ft_st_ = 0;                                                                    \
		if (ft_p_ < 0 || waitpid(ft_p_, &ft_st_, 0) != ft_p_) {                            \
			ft_report(__FILE__, __LINE__, "%s: fork/wait failed", #expr);              \
			return -1;                                                                 \
		}                                                                                  \
		if (WIFSIGNALED(ft_st_)) {                                                         \
			ft_report(__FILE__, __LINE__,                                              \
				  "%s: crashed (signal %s), expected -%s or -%s", #expr,           \
				  strsignal(WTERMSIG(ft_st_)), strerrorname_np(E1),                \
				  strerrorname_np(E2));                                            \
			if (!ft_keep_going)                                                        \
				return -1;                                                         \
		} else if (WEXITSTATUS(ft_st_) != 0) {                                             \
			ft_case_failed = 1;                                                        \
			if (!ft_keep_going)                                                        \
				return -1;                                                         \
		}                                                                                  \
	} while (0)

/* expr must succeed (>= 0); evaluates to its value. */
#define FT_OK(expr)                                                                                \
	({                                                                                         \
		long long ft_g_ = (long long)(expr);                                               \
		if (ft_g_ < 0) {                                                                   \
			ft_report(__FILE__, __LINE__, "%s: expected success, got %s", #expr,       \
				  ft_errname(ft_g_));                                              \
			return -1;                                                                 \
		}                                                                                  \
		ft_g_;                                                                             \
	})

/* expr must equal want (integers). */
#define FT_EQ(expr, want)                                                                          \
	do {                                                                                       \
		long long ft_g_ = (long long)(expr), ft_w_ = (long long)(want);                    \
		if (ft_g_ != ft_w_) {                                                              \
			char ft_ws_[64];                                                           \
			snprintf(ft_ws_, sizeof(ft_ws_), "%s", ft_errname(ft_w_));                 \
			ft_report(__FILE__, __LINE__, "%s: expected %s, got %s", #expr, ft_ws_,    \
				  ft_errname(ft_g_));                                              \
			if (!ft_keep_going)                                                        \
				return -1;                                                         \
		}                                                                                  \
	} while (0)

/* A condition with a free-form explanation. */
#define FT_CHECK(cond, ...)                                                                        \
	do {                                                                                       \
		if (!(cond)) {                                                                     \
			ft_report(__FILE__, __LINE__, __VA_ARGS__);                                \
			return -1;                                                                 \
		}                                                                                  \
	} while (0)

/* A helper (returning 0 or -1) that has already reported its own failure. */
#define FT_RUN(call)                                                                               \
	do {                                                                                       \
		if ((call) != 0)                                                                   \
			return -1;                                                                 \
	} while (0)

/* ferrite_errmsg() must be non-empty and a single line. */
#define FT_ERRMSG_ONE_LINE()                                                                       \
	do {                                                                                       \
		const char *ft_m_ = ferrite_errmsg();                                              \
		FT_CHECK(ft_m_ &&ft_m_[0] != '\0' && strchr(ft_m_, '\n') == NULL,                  \
			 "ferrite_errmsg() must be one non-empty line, got \"%s\"",                \
			 ft_m_ ? ft_m_ : "(null)");                                                \
	} while (0)

/* Unmounts *fsp (and forgets it), then requires a clean fsck of pool; the
 * Linux reference has no pool to check. */
#define FT_UNMOUNT_CLEAN(fsp, pool)                                                                \
	do {                                                                                       \
		FT_OK(ferrite_unmount(*(fsp)));                                                    \
		*(fsp) = NULL;                                                                     \
		if (!ft_is_oracle)                                                                 \
			FT_EQ(ferrite_fsck(pool, 0, NULL, NULL, NULL, NULL), FERRITE_FSCK_CLEAN);  \
	} while (0)

/* ---- pools ---------------------------------------------------------------- */

#define FT_MAX_POOLS 32
static char ft_pools[FT_MAX_POOLS][128];
static int ft_npools;

static inline void ft_pools_remove(void)
{
	for (int i = 0; i < ft_npools; i++) {
		struct stat st;
		if (lstat(ft_pools[i], &st) == 0 && S_ISDIR(st.st_mode)) {
			/* the Linux reference keeps a "pool" as a directory tree,
			 * deeper than nftw can walk */
			char cmd[200];
			snprintf(cmd, sizeof(cmd), "rm -rf '%.150s'", ft_pools[i]);
			if (system(cmd) != 0)
				fprintf(stderr, "could not remove %s\n", ft_pools[i]);
		} else
			unlink(ft_pools[i]);
		/* a tiered pool's backing directory (ft_pool_create) */
		char cmd[220];
		snprintf(cmd, sizeof(cmd), "rm -rf '%.150s.backing'", ft_pools[i]);
		if (system(cmd) != 0)
			fprintf(stderr, "could not remove %s.backing\n", ft_pools[i]);
	}
}

static inline void ft_on_signal(int sig)
{
	for (int i = 0; i < ft_npools; i++)
		unlink(ft_pools[i]); /* async-signal-safe */
	signal(sig, SIG_DFL);
	raise(sig);
}

/* Present in sanitizer builds: called when a sanitizer ends the process. */
extern void __sanitizer_set_death_callback(void (*cb)(void)) __attribute__((weak));

/* A unique pool path "/dev/shm/ferrite-<test>-<tag>-<pid>.pool", removed at
 * exit and on a fatal signal. The file itself is not created. */
static inline const char *ft_pool_path(const char *test, const char *tag)
{
	static int installed;
	if (!installed) {
		installed = 1;
		/* calls that fall back to the default pool (a NULL path) must
		 * never touch the user's: point $FERRITE_POOL at a private file */
		snprintf(ft_pools[ft_npools], sizeof(ft_pools[0]),
			 "/dev/shm/ferrite-%s-default-%d.pool", test, (int)getpid());
		setenv("FERRITE_POOL", ft_pools[ft_npools++], 1);
		atexit(ft_pools_remove);
		if (__sanitizer_set_death_callback)
			__sanitizer_set_death_callback(ft_pools_remove);
		int sigs[] = {SIGSEGV, SIGBUS, SIGABRT, SIGFPE, SIGILL, SIGTERM, SIGINT, SIGHUP};
		for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
			signal(sigs[i], ft_on_signal);
	}
	if (ft_npools == FT_MAX_POOLS) {
		fprintf(stderr, "ft_pool_path: too many pools\n");
		exit(2);
	}
	char *p = ft_pools[ft_npools++];
	snprintf(p, sizeof(ft_pools[0]), "/dev/shm/ferrite-%s-%s-%d.pool", test, tag,
		 (int)getpid());
	return p;
}

/* $FERRITE_TEST_TIER=write|epoch: ft_pool_create makes tiered pools (a
 * cache in front of PATH.backing), so a suite written for the pm engine
 * checks the tier engine too. */
static inline int ft_tier_mode(void)
{
	const char *e = getenv("FERRITE_TEST_TIER");
	if (!e || !*e)
		return -1;
	return strcmp(e, "epoch") == 0 ? FERRITE_TIER_EPOCH : FERRITE_TIER_PER_WRITE;
}

/* mkfs + mount a fresh pool of size bytes. Returns 0 or -1 (reported). */
static inline int ft_pool_create(const char *path, uint64_t size, ferrite_fs **fs)
{
	struct ferrite_mkfs_opts o = {.size = size, .mode = FERRITE_MODE_SYNC, .force = 1};
	char backing[200];
	if (ft_tier_mode() >= 0) {
		snprintf(backing, sizeof backing, "%s.backing", path);
		char cmd[440];
		snprintf(cmd, sizeof cmd, "rm -rf '%s' && mkdir '%s'", backing, backing);
		FT_CHECK(system(cmd) == 0, "cannot make %s", backing);
		o.tier_backing = backing;
		o.tier_consistency = ft_tier_mode();
		ft_is_tier = 1;
	}
	FT_OK(ferrite_mkfs(path, &o));
	FT_OK(ferrite_mount(path, NULL, fs));
	struct ferrite_info info;
	if (ferrite_get_info(*fs, &info) == 0 && strncmp(info.backing, "linuxref", 8) == 0)
		ft_is_oracle = 1;
	return 0;
}

/* ---- runner --------------------------------------------------------------- */

/* Runs the cases named on the command line (all when none is named; "-l"
 * lists them). before/after run around each case (may be NULL). Returns the
 * exit status. */
static inline int ft_run(const struct ft_case *cases, size_t n, int argc, char **argv,
			 int (*before)(const struct ft_case *),
			 void (*after)(const struct ft_case *))
{
	int failed = 0, run = 0, skipped = 0;
	ft_keep_going = getenv("FT_KEEP_GOING") && atoi(getenv("FT_KEEP_GOING")) != 0;
	for (int a = 1; a < argc; a++) {
		if (strcmp(argv[a], "-l") == 0) {
			for (size_t i = 0; i < n; i++)
				printf("%s\n", cases[i].name);
			return 0;
		}
	}
	for (size_t i = 0; i < n; i++) {
		int wanted = 1;
		for (int a = 1; a < argc; a++) {
			if (argv[a][0] == '-')
				continue;
			wanted = 0;
			if (strcmp(argv[a], cases[i].name) == 0) {
				wanted = 1;
				break;
			}
		}
		if (!wanted)
			continue;
		ft_case_name = cases[i].name;
		if (ft_is_oracle && (cases[i].flags & FT_ORACLE_SKIP)) {
			printf("skip %s (not expressible on the Linux reference)\n", cases[i].name);
			skipped++;
			continue;
		}
		if (getenv("FERRITE_TEST_TIER") && (cases[i].flags & FT_TIER_SKIP)) {
			printf("skip %s (a property of pm-engine pools)\n", cases[i].name);
			skipped++;
			continue;
		}
		run++;
		ft_case_failed = 0;
		int rc = before ? before(&cases[i]) : 0;
		if (rc == 0)
			rc = cases[i].fn();
		if (after)
			after(&cases[i]);
		if (ft_case_failed)
			rc = -1;
		printf("%s %s\n", rc == 0 ? "ok  " : "FAIL", cases[i].name);
		fflush(stdout);
		if (rc != 0)
			failed++;
	}
	ft_case_name = "(teardown)";
	printf("%d case(s) run, %d failed, %d skipped\n", run, failed, skipped);
	if (run == 0) {
		fprintf(stderr, "no case matched\n");
		return 2;
	}
	return failed ? 1 : 0;
}

/* For tests whose every case starts on a fresh pool: ft_run with a before
 * that formats path (size bytes, over what a case left). */
struct ft_fresh {
	const char *path;
	uint64_t size;
};

static inline struct ft_fresh *ft_fresh_cfg(void)
{
	static struct ft_fresh cfg;
	return &cfg;
}

static inline int ft_fresh_before(const struct ft_case *c)
{
	(void)c;
	struct ferrite_mkfs_opts o = {.size = ft_fresh_cfg()->size, .force = 1};
	FT_OK(ferrite_mkfs(ft_fresh_cfg()->path, &o));
	return 0;
}

static inline int ft_run_fresh(const struct ft_case *cases, size_t n, int argc, char **argv,
			       const char *path, uint64_t size)
{
	ft_fresh_cfg()->path = path;
	ft_fresh_cfg()->size = size;
	return ft_run(cases, n, argc, argv, ft_fresh_before, NULL);
}

/* ---- data ----------------------------------------------------------------- */

static inline uint64_t ft_mix64(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdULL;
	x ^= x >> 33;
	x *= 0xc4ceb9fe1a85ec53ULL;
	x ^= x >> 33;
	return x;
}

/* A child process running fn(arg): its exit status is fn's result (0 or
 * 1); the parent removes the pools. The child's pid, or -1. */
static inline pid_t ft_spawn(int (*fn)(void *), void *arg)
{
	fflush(NULL);
	pid_t pid = fork();
	if (pid == 0) {
		ft_npools = 0;
		_exit(fn(arg) ? 1 : 0);
	}
	return pid;
}

/* Waits for pid: its exit status, 128 + the signal that ended it, or -1. */
static inline int ft_reap(pid_t pid)
{
	int st;
	if (waitpid(pid, &st, 0) != pid)
		return -1;
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* Deterministic content: byte at absolute file offset off of stream key. */
static inline void ft_fill(void *buf, size_t len, uint64_t key, uint64_t off)
{
	unsigned char *b = buf;
	size_t i = 0;
	while (i < len) {
		uint64_t word = (off + i) / 8;
		uint64_t v = ft_mix64(word * 0x9e3779b97f4a7c15ULL ^ key);
		unsigned sh = (unsigned)((off + i) % 8);
		for (; sh < 8 && i < len; sh++, i++)
			b[i] = (unsigned char)(v >> (8 * sh));
	}
}

/* Writes len bytes of ft_fill(key, 0) to path, opened O_WRONLY|O_CREAT|flags,
 * from its start (or its end with O_APPEND): 0, or -errno (-EIO if short). */
static inline int ft_write_file(ferrite_fs *fs, const char *path, uint64_t key, size_t len,
				int flags)
{
	char *buf = malloc(len);
	if (!buf)
		return -ENOMEM;
	ft_fill(buf, len, key, 0);
	int fd = ferrite_open(fs, path, O_WRONLY | O_CREAT | flags, 0644);
	long long n = fd;
	if (fd >= 0) {
		n = ferrite_write(fs, fd, buf, len);
		ferrite_close(fs, fd);
	}
	free(buf);
	return n == (long long)len ? 0 : n < 0 ? (int)n : -EIO;
}

/* Offset of the first byte of buf that differs from ft_fill(key, off), or -1. */
static inline long long ft_verify(const void *buf, size_t len, uint64_t key, uint64_t off)
{
	unsigned char tmp[4096];
	const unsigned char *b = buf;
	for (size_t done = 0; done < len;) {
		size_t n = len - done < sizeof(tmp) ? len - done : sizeof(tmp);
		ft_fill(tmp, n, key, off + done);
		if (memcmp(tmp, b + done, n) != 0) {
			for (size_t i = 0; i < n; i++)
				if (tmp[i] != b[done + i])
					return (long long)(done + i);
		}
		done += n;
	}
	return -1;
}

/* Whether path holds exactly len bytes of ft_fill(key) (says what it read if not). */
static inline int ft_read_check(ferrite_fs *fs, const char *path, uint64_t key, size_t len)
{
	char *buf = malloc(len + 1);
	int fd = buf ? ferrite_open(fs, path, O_RDONLY, 0) : -ENOMEM;
	long long n = fd;
	if (fd >= 0) {
		n = ferrite_pread(fs, fd, buf, len + 1, 0);
		ferrite_close(fs, fd);
	}
	int ok = n == (long long)len && ft_verify(buf, len, key, 0) < 0;
	if (!ok)
		fprintf(stderr, "  %s: read %lld bytes, want %zu of key %llu\n", path, n, len,
			(unsigned long long)key);
	free(buf);
	return ok ? 0 : -1;
}

static inline int ft_all_zero(const void *buf, size_t len)
{
	const unsigned char *b = buf;
	for (size_t i = 0; i < len; i++)
		if (b[i])
			return 0;
	return 1;
}

/* xorshift64* PRNG for seeded workloads. */
static inline uint64_t ft_rand(uint64_t *s)
{
	uint64_t x = *s;
	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	*s = x;
	return x * 2685821657736338717ULL;
}

static inline uint64_t ft_free_bytes(ferrite_fs *fs)
{
	struct statvfs sv;
	if (ferrite_statvfs(fs, &sv) != 0)
		return 0;
	/* f_bfree: the pages free now (f_bavail keeps a share back for inodes,
	 * README "Space", so it does not fall page for page) */
	return (uint64_t)sv.f_bfree * sv.f_frsize;
}

/* Entries a full listing of path returns ("." and ".." included), or -errno. */
static inline long long ft_count_entries(ferrite_fs *fs, const char *path)
{
	ferrite_dir *d;
	struct ferrite_dirent e;
	long long n = 0;
	int r = ferrite_opendir(fs, path, &d);
	if (r < 0)
		return r;
	while ((r = ferrite_readdir(d, &e)) == 1)
		n++;
	int c = ferrite_closedir(d);
	return r < 0 ? r : c < 0 ? c : n;
}

#endif /* FT_TEST_H */
