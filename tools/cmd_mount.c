/*
 * cmd_mount.c -- `ferrite mount POOL DIR` and `ferrite umount DIR`: checks
 * the pool and the mount point so mistakes get a clear message, runs the
 * FUSE daemon (src/fuse) in the background (or the foreground with -f), and
 * unmounts, waiting until the daemon has released the pool.
 *
 * The daemon tells the waiting parent through a pipe whether the mount
 * worked, so `ferrite mount` returns only once the directory is usable (or
 * with the daemon's error). `ferrite umount` knows the daemon has finished
 * when it can take the pool's lock, which the daemon holds until the pool
 * is cleanly unmounted.
 *
 * As root, the daemon serves every user from the pool, so it refuses a pool
 * that someone other than root can write (pool_untrusted): whoever writes
 * the pool file chooses every byte the daemon reads from it. The pool file
 * and every directory above it must belong to root and be writable by no
 * one else (a directory: unless sticky, like /dev/shm); -o
 * allow_untrusted_pool overrides this with a warning (docs/security.md).
 */
#include <dirent.h>
#include <stdarg.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <pwd.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "fuse/fuse_front.h"

#define FUSE_TYPE "fuse.ferrite"

static const char mount_usage[] =
    "Usage: ferrite mount [-f] [-d] [-o OPTIONS] POOL DIR\n"
    "       ferrite [--pool POOL] mount [-f] [-d] [-o OPTIONS] DIR\n"
    "\nMount a pool on directory DIR with FUSE, so any program can use it.\n"
    "Every write is durable when it returns (no write-back caching).\n"
    "\nOptions:\n"
    "  -f            stay in the foreground (default: run as a daemon)\n"
    "  -d            foreground with libfuse's request trace on stderr\n"
    "  -o OPTIONS    comma-separated mount options:\n"
    "                  nonempty          mount over a non-empty directory\n"
    "                  attr_timeout=S    seconds the kernel caches attributes (1)\n"
    "                  entry_timeout=S   seconds the kernel caches names (1)\n"
    "                  threads=N         most worker threads (default 2 per\n"
    "                                    CPU, at least 8)\n"
    "                  shared            share the pool with `ferrite run`\n"
    "                                    programs and C API users at once: the\n"
    "                                    kernel caches nothing (direct I/O, no\n"
    "                                    shared mmap); without it the mount\n"
    "                                    needs the pool alone\n"
    "                  mode=strict|sync  consistency mode for this mount\n"
    "                                    (default: the pool's, from mkfs);\n"
    "                                    strict: every write atomic\n"
    "                  allow_untrusted_pool\n"
    "                                    as root, serve a pool that another\n"
    "                                    user can write (refused otherwise;\n"
    "                                    see docs/security.md)\n"
    "                  ro, and other FUSE/kernel options, are passed on\n"
    "  --pool POOL   same as the POOL argument\n"
    "  -h, --help    show this help\n"
    "\nLike mount(8) and sshfs, mount needs both: name the pool as POOL, with\n"
    "--pool, or in $FERRITE_POOL (the default pool is\n"
    "/dev/shm/ferrite/default.pool; it is not mounted unless named).\n"
    "When run as root the mount is open to all users (allow_other); the kernel\n"
    "checks permissions (default_permissions), and the pool file and the\n"
    "directories above it must be writable by root alone. Unmount with\n"
    "`ferrite umount DIR`; SIGINT or SIGTERM to the daemon (Ctrl-C with -f)\n"
    "unmounts too.\n"
    "\nExit status: 0 mounted (with -f or -d: unmounted cleanly), 1 failed,\n"
    "2 usage error.\n";

static const char umount_usage[] =
    "Usage: ferrite umount [-l] DIR\n"
    "\nUnmount a ferrite file system and wait until its daemon has closed the\n"
    "pool. A mount whose daemon died (\"Transport endpoint is not connected\")\n"
    "is detached; the next mount of its pool recovers it.\n"
    "\nOptions:\n"
    "  -l, --lazy    detach now even if files are open; the daemon finishes when\n"
    "                they are closed (does not wait for it)\n"
    "  -h, --help    show this help\n"
    "\nA user other than root can unmount only the mounts they made\n"
    "(fusermount3's rule).\n"
    "\nExit status: 0 unmounted, 1 failed, 2 usage error.\n";

/* ---- paths and the mount table --------------------------------------------------- */

/* DIR made absolute and normalised without touching it (a dead mount
 * point cannot be resolved). */
static int abs_path(const char *in, char *out, size_t cap)
{
	char tmp[PATH_MAX * 2];
	if (in[0] == '/') {
		snprintf(tmp, sizeof(tmp), "%s", in);
	} else {
		char cwd[PATH_MAX];
		if (!getcwd(cwd, sizeof(cwd)))
			return -errno;
		snprintf(tmp, sizeof(tmp), "%s/%s", cwd, in);
	}
	size_t n = 0;
	char *save = NULL;
	for (char *c = strtok_r(tmp, "/", &save); c; c = strtok_r(NULL, "/", &save)) {
		if (strcmp(c, ".") == 0)
			continue;
		if (strcmp(c, "..") == 0) {
			while (n > 0 && out[--n] != '/')
				;
			continue;
		}
		size_t l = strlen(c);
		if (n + l + 2 > cap)
			return -ENAMETOOLONG;
		out[n++] = '/';
		memcpy(out + n, c, l);
		n += l;
	}
	if (n == 0)
		out[n++] = '/';
	out[n] = '\0';
	return 0;
}

struct mnt {
	char point[PATH_MAX];
	char type[64];
	char source[PATH_MAX];
	long user_id; /* FUSE: the uid that mounted it (user_id=); -1 unknown */
};

/* mountinfo escapes blanks and backslashes as \ooo. */
static void unescape(char *s)
{
	char *o = s;
	for (; *s; s++) {
		if (s[0] == '\\' && s[1] >= '0' && s[1] <= '7' && s[2] && s[3]) {
			*o++ = (char)(((s[1] - '0') << 6) | ((s[2] - '0') << 3) | (s[3] - '0'));
			s += 3;
		} else {
			*o++ = *s;
		}
	}
	*o = '\0';
}

/* The last (topmost) mount whose point (point != NULL) or ferrite pool
 * (source != NULL) matches. 1 found, 0 not. */
static int find_mount(const char *point, const char *source, struct mnt *m)
{
	FILE *f = fopen("/proc/self/mountinfo", "r");
	char line[3 * PATH_MAX];
	int found = 0;
	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f)) {
		char mp[PATH_MAX], type[64], src[PATH_MAX], sopts[1024] = "";
		char *dash = strstr(line, " - ");
		if (!dash || sscanf(line, "%*s %*s %*s %*s %4095s", mp) != 1 ||
		    sscanf(dash + 3, "%63s %4095s %1023s", type, src, sopts) < 2)
			continue;
		unescape(mp);
		unescape(src);
		if (point && strcmp(mp, point) != 0)
			continue;
		if (source && (strcmp(type, FUSE_TYPE) != 0 || strcmp(src, source) != 0))
			continue;
		snprintf(m->point, sizeof(m->point), "%s", mp);
		snprintf(m->type, sizeof(m->type), "%s", type);
		snprintf(m->source, sizeof(m->source), "%s", src);
		const char *uid = strstr(sopts, "user_id=");
		m->user_id = uid && (uid == sopts || uid[-1] == ',') ? atol(uid + 8) : -1;
		found = 1;
	}
	fclose(f);
	return found;
}

/* Unmounts point: umount2 as root, fusermount3 otherwise. -EBUSY when files
 * are open there; any other failure of fusermount3 is -EPERM with its own
 * message in why. */
static int do_umount(const char *point, int lazy, char *why, size_t cap)
{
	why[0] = '\0';
	if (geteuid() == 0)
		return umount2(point, lazy ? MNT_DETACH : 0) ? -errno : 0;
	int p[2];
	if (pipe(p))
		return -errno;
	pid_t pid = fork();
	if (pid < 0) {
		close(p[0]);
		close(p[1]);
		return -errno;
	}
	if (pid == 0) {
		close(p[0]);
		dup2(p[1], 2);
		execlp("fusermount3", "fusermount3", lazy ? "-uz" : "-u", "--", point,
		       (char *)NULL);
		fprintf(stderr, "cannot run fusermount3: %s", strerror(errno));
		_exit(127);
	}
	close(p[1]);
	size_t got = 0;
	ssize_t n;
	while (got < cap - 1 &&
	       ((n = read(p[0], why + got, cap - 1 - got)) > 0 || (n < 0 && errno == EINTR)))
		got += n > 0 ? (size_t)n : 0;
	close(p[0]);
	why[got] = '\0';
	why[strcspn(why, "\n")] = '\0';
	int st;
	if (waitpid(pid, &st, 0) < 0)
		return -errno;
	if (WIFEXITED(st) && WEXITSTATUS(st) == 0)
		return 0;
	return strstr(why, "busy") ? -EBUSY : -EPERM;
}

/* ---- mount -------------------------------------------------------------------------- */

struct mount_args {
	const char *pool;
	const char *dir;
	int foreground, debug, nonempty, allow_untrusted;
	struct fuse_front_opts fo;
	char passed[4096]; /* -o options for libfuse */
};

static int parse_seconds(const char *v, double *out)
{
	char *end;
	double d = strtod(v, &end);
	if (*v == '\0' || *end != '\0' || d < 0)
		return -1;
	*out = d;
	return 0;
}

/* Takes our options out of an -o list; the others are passed on. */
static int take_options(struct mount_args *a, char *list)
{
	char *save = NULL;
	for (char *o = strtok_r(list, ",", &save); o; o = strtok_r(NULL, ",", &save)) {
		int bad = 0;
		if (strcmp(o, "nonempty") == 0)
			a->nonempty = 1;
		else if (strcmp(o, "shared") == 0)
			a->fo.shared = 1;
		else if (strcmp(o, "allow_untrusted_pool") == 0)
			a->allow_untrusted = 1;
		else if (strncmp(o, "attr_timeout=", 13) == 0)
			bad = parse_seconds(o + 13, &a->fo.attr_timeout);
		else if (strncmp(o, "entry_timeout=", 14) == 0)
			bad = parse_seconds(o + 14, &a->fo.entry_timeout);
		else if (strncmp(o, "threads=", 8) == 0)
			bad = (a->fo.threads = atoi(o + 8)) < 1;
		else if (strncmp(o, "mode=", 5) == 0) {
			int m;
			bad = cli_parse_mode(o + 5, &m) < 0;
			a->fo.mode =
			    m == FERRITE_MODE_STRICT ? FERRITE_MOUNT_STRICT : FERRITE_MOUNT_SYNC;
		} else if (strncmp(o, "fsname=", 7) == 0 || strncmp(o, "subtype=", 8) == 0)
			return cli_usage_error("mount", CLI_EXIT_USAGE,
					       "-o %s: set by ferrite itself", o);
		else {
			size_t l = strlen(a->passed);
			if (l + strlen(o) + 2 > sizeof(a->passed))
				return cli_usage_error("mount", CLI_EXIT_USAGE,
						       "too many -o options");
			snprintf(a->passed + l, sizeof(a->passed) - l, "%s%s", l ? "," : "", o);
		}
		if (bad)
			return cli_usage_error("mount", CLI_EXIT_USAGE, "-o %s: bad value", o);
	}
	return CLI_CONTINUE;
}

static int mount_parse(int argc, char **argv, struct mount_args *a)
{
	static const struct option longopts[] = {
	    {"pool", required_argument, NULL, CLI_OPT_POOL},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	int opt, rc;
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);

	a->fo.attr_timeout = a->fo.entry_timeout = 1.0;
	a->fo.threads = ncpu > 4 ? (int)ncpu * 2 : 8;
	cli_getopt_begin();
	while ((opt = getopt_long(argc, argv, ":fdo:h", longopts, NULL)) != -1) {
		if (opt == 'f') {
			a->foreground = 1;
		} else if (opt == 'd') {
			a->foreground = a->debug = 1;
		} else if (opt == 'o') {
			char list[4096];
			snprintf(list, sizeof(list), "%s", optarg);
			if ((rc = take_options(a, list)) != CLI_CONTINUE)
				return rc;
		} else if (opt == CLI_OPT_POOL) {
			a->pool = optarg;
		} else if (opt == 'h') {
			fputs(mount_usage, stdout);
			return CLI_EXIT_OK;
		} else {
			return cli_bad_option("mount", opt, argv, CLI_EXIT_USAGE);
		}
	}
	int n = argc - optind;
	if (n < 1)
		return cli_usage_error("mount", CLI_EXIT_USAGE, "missing the mount point DIR");
	a->dir = argv[argc - 1];
	/* Like mount(8) and sshfs: no pool named, nothing mounted (a
	 * forgotten POOL must not put the shared default pool on DIR). */
	const char *env = getenv("FERRITE_POOL");
	if (n == 1 && !a->pool && !cli_global_pool() && !(env && *env))
		return cli_usage_error("mount", CLI_EXIT_USAGE,
				       "missing the POOL to mount: `ferrite mount POOL %s` (the "
				       "default pool is %s)",
				       a->dir, ferrite_default_pool());
	return cli_take_pool_operand("mount", n - 1, argv + optind, &a->pool, CLI_EXIT_USAGE);
}

static int mount_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int mount_fail(const char *fmt, ...)
{
	va_list ap;
	fputs("ferrite mount: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	return CLI_EXIT_FAILURE;
}

/* The mount point: absolute, an existing empty directory that is not
 * already a mount point. A ferrite mount whose daemon died is detached. */
static int check_dir(struct mount_args *a, char *canon)
{
	char abs[PATH_MAX];
	struct stat st;
	struct mnt m;
	int rc = abs_path(a->dir, abs, sizeof(abs));
	if (rc < 0)
		return mount_fail("%s: %s", a->dir, strerror(-rc));
	if (stat(abs, &st) && errno == ENOTCONN) {
		if (!find_mount(abs, NULL, &m) || strcmp(m.type, FUSE_TYPE) != 0)
			return mount_fail("%s: %s: a FUSE daemon died; unmount it with "
					  "`fusermount3 -u %s`",
					  a->dir, strerror(ENOTCONN), abs);
		char why[512];
		rc = do_umount(abs, 1, why, sizeof(why));
		if (rc < 0)
			return mount_fail("%s: the ferrite daemon of this mount died and "
					  "detaching it failed: %s",
					  a->dir, why[0] ? why : strerror(-rc));
		fprintf(stderr,
			"ferrite mount: %s: detached the mount of a ferrite daemon that had "
			"died\n",
			a->dir);
	}
	if (stat(abs, &st))
		return mount_fail("%s: %s", a->dir,
				  errno == ENOENT ? "mount point does not exist" : strerror(errno));
	if (!S_ISDIR(st.st_mode))
		return mount_fail("%s: mount point is not a directory", a->dir);
	if (!realpath(abs, canon))
		return mount_fail("%s: %s", a->dir, strerror(errno));
	if (find_mount(canon, NULL, &m))
		return mount_fail("%s: already a mount point (%s %s); unmount it first", a->dir,
				  m.type, m.source);
	if (!a->nonempty) {
		DIR *d = opendir(canon);
		struct dirent *e;
		int used = 0;
		if (!d)
			return mount_fail("%s: %s", a->dir, strerror(errno));
		while (!used && (e = readdir(d)))
			used = strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
		closedir(d);
		if (used)
			return mount_fail("%s: mount point is not empty (-o nonempty mounts over "
					  "its contents)",
					  a->dir);
	}
	return 0;
}

/* Can a user other than root write the file or directory at path (st)?
 * A sticky directory counts as root's alone: others may add entries but not
 * replace root's (the entry below it was checked to be root's). */
static int others_can_write(const struct stat *st, const char *path, char *why, size_t cap)
{
	const char *what = S_ISDIR(st->st_mode) ? "its directory " : "the pool file";
	if (!S_ISDIR(st->st_mode))
		path = "";
	if (st->st_uid != 0) {
		snprintf(why, cap, "%s%s belongs to uid %u, not root", what, path,
			 (unsigned)st->st_uid);
		return 1;
	}
	if ((st->st_mode & (S_IWGRP | S_IWOTH)) &&
	    !(S_ISDIR(st->st_mode) && (st->st_mode & S_ISVTX))) {
		snprintf(why, cap, "%s%s is writable by group or others (mode %04o)", what, path,
			 (unsigned)(st->st_mode & 07777));
		return 1;
	}
	return 0;
}

/* Is the pool at canon (no symlinks in it) writable by a user other than
 * root, through its file or a directory above it? 1 with why, 0, or -errno. */
static int pool_untrusted(const char *canon, char *why, size_t cap)
{
	char path[PATH_MAX];
	struct stat st;
	snprintf(path, sizeof(path), "%s", canon);
	for (;;) {
		if (lstat(path, &st))
			return -errno;
		if (others_can_write(&st, path, why, cap))
			return 1;
		char *slash = strrchr(path, '/');
		if (!slash || (slash == path && path[1] == '\0'))
			return 0;
		slash[slash == path] = '\0'; /* the parent; "/" after "/x" */
	}
}

static int check_pool(struct mount_args *a, char *canon)
{
	struct mnt m;
	if (!realpath(a->pool, canon)) {
		if (errno == ENOENT) {
			cli_no_pool("mount", a->pool);
			return CLI_EXIT_FAILURE;
		}
		return mount_fail("%s: %s", a->pool, strerror(errno));
	}
	if (find_mount(NULL, canon, &m))
		return mount_fail("%s: pool is already mounted on %s", a->pool, m.point);
	if (geteuid() != 0)
		return 0;
	char why[PATH_MAX + 128];
	int rc = pool_untrusted(canon, why, sizeof(why));
	if (rc < 0)
		return mount_fail("%s: %s", a->pool, strerror(-rc));
	if (rc && !a->allow_untrusted)
		return mount_fail("%s: refusing to serve this pool as root: %s, so another user "
				  "can change what the daemon reads (make the pool and its "
				  "directories root's alone, or mount it as its owner; "
				  "-o allow_untrusted_pool overrides this)",
				  a->pool, why);
	if (rc)
		fprintf(stderr,
			"ferrite mount: warning: %s: %s; serving it as root anyway "
			"(allow_untrusted_pool): whoever can write the pool can make the daemon "
			"misbehave\n",
			a->pool, why);
	return 0;
}

/* The daemon's report to the waiting parent: "rc message". */
struct ready_ctx {
	int fd; /* pipe to the parent, -1 in the foreground */
	int debug;
	int rc;
	char msg[1024];
};

static void on_ready(void *arg, int rc, const char *msg)
{
	struct ready_ctx *r = arg;
	r->rc = rc;
	snprintf(r->msg, sizeof(r->msg), "%s", msg);
	if (r->fd < 0)
		return;
	char buf[1100];
	int n = snprintf(buf, sizeof(buf), "%d %s", rc, msg);
	if (write(r->fd, buf, (size_t)n) < 0) {
		/* the parent is gone: nobody to tell */
	}
	close(r->fd);
	r->fd = -1;
	if (rc == 0 && !r->debug) {
		/* detach from the terminal now the parent can report success */
		int nul = open("/dev/null", O_RDWR);
		if (nul >= 0) {
			dup2(nul, 0);
			dup2(nul, 1);
			dup2(nul, 2);
			if (nul > 2)
				close(nul);
		}
	}
}

/* The line shown for a failed mount: the daemon's message, and who holds a
 * busy pool. */
static int report_failure(const struct mount_args *a, int rc, const char *msg)
{
	struct ferrite_probe pr;
	if (rc == -EBUSY && ferrite_probe(a->fo.pool, &pr) == 0 && pr.holder_pid > 0)
		return mount_fail("%s: pool is in use by process %lld (%s)", a->pool,
				  (long long)pr.holder_pid,
				  pr.holder_comm[0] ? pr.holder_comm : "?");
	return mount_fail("%s", msg[0] ? msg : strerror(-rc));
}

static int run_background(struct mount_args *a)
{
	int p[2];
	if (pipe(p))
		return mount_fail("pipe: %s", strerror(errno));
	fflush(NULL);
	pid_t pid = fork();
	if (pid < 0)
		return mount_fail("fork: %s", strerror(errno));
	if (pid == 0) {
		close(p[0]);
		setsid();
		if (chdir("/")) {
			/* stays in the old directory: harmless */
		}
		struct ready_ctx r = {.fd = p[1]};
		a->fo.ready = on_ready;
		a->fo.ready_arg = &r;
		int rc = fuse_front_run(&a->fo);
		_exit(rc < 0 ? CLI_EXIT_FAILURE : CLI_EXIT_OK);
	}
	close(p[1]);
	char buf[1100];
	size_t got = 0;
	ssize_t n;
	while (got < sizeof(buf) - 1 && ((n = read(p[0], buf + got, sizeof(buf) - 1 - got)) > 0 ||
					 (n < 0 && errno == EINTR)))
		got += n > 0 ? (size_t)n : 0;
	close(p[0]);
	buf[got] = '\0';
	if (got == 0) {
		int st = 0;
		waitpid(pid, &st, 0);
		return mount_fail("the daemon ended before mounting (%s)",
				  WIFSIGNALED(st) ? strsignal(WTERMSIG(st)) : "no report");
	}
	char *msg;
	int rc = (int)strtol(buf, &msg, 10);
	if (*msg == ' ')
		msg++;
	if (rc < 0) {
		waitpid(pid, NULL, 0);
		return report_failure(a, rc, msg);
	}
	return CLI_EXIT_OK;
}

int cmd_mount(int argc, char **argv)
{
	struct mount_args a;
	char dir[PATH_MAX], pool[PATH_MAX];
	memset(&a, 0, sizeof(a));
	int rc = mount_parse(argc, argv, &a);
	if (rc != CLI_CONTINUE)
		return rc;
	if ((rc = check_dir(&a, dir)) || (rc = check_pool(&a, pool)))
		return rc;
	a.fo.pool = pool;
	a.fo.mountpoint = dir;
	a.fo.fuse_opts = a.passed;
	a.fo.debug = a.debug;
	if (!a.foreground)
		return run_background(&a);
	struct ready_ctx r = {.fd = -1, .debug = 1};
	a.fo.ready = on_ready;
	a.fo.ready_arg = &r;
	rc = fuse_front_run(&a.fo);
	if (r.rc < 0)
		return report_failure(&a, r.rc, r.msg);
	if (rc < 0)
		return mount_fail("%s: %s", a.dir, strerror(-rc));
	return CLI_EXIT_OK;
}

/* ---- umount ---------------------------------------------------------------------------- */

/* Waits until the daemon has unmounted the pool: its lock on the directory
 * under the mount is free (the daemon takes it before mounting; a daemon of
 * a pool shared with other processes has no flock of the pool to itself),
 * and then the pool's exclusive flock. */
static int wait_for_daemon(const char *dir, const char *pool)
{
	int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	int fd = open(pool, O_RDONLY | O_CLOEXEC);
	if (fd < 0 && dfd < 0)
		return 0; /* pool gone: nothing to wait for */
	struct timespec t0, now, nap = {0, 10 * 1000 * 1000};
	int told = 0;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		if (dfd >= 0 && flock(dfd, LOCK_SH | LOCK_NB) == 0) {
			close(dfd);
			dfd = -1;
		}
		if (dfd < 0 && (fd < 0 || flock(fd, LOCK_SH | LOCK_NB) == 0))
			break;
		clock_gettime(CLOCK_MONOTONIC, &now);
		double waited = (double)(now.tv_sec - t0.tv_sec) + (now.tv_nsec - t0.tv_nsec) / 1e9;
		if (waited > 2 && !told) {
			fprintf(stderr, "ferrite umount: %s: waiting for the daemon to close %s\n",
				dir, pool);
			told = 1;
		}
		if (waited > 120) {
			if (fd >= 0)
				close(fd);
			if (dfd >= 0)
				close(dfd);
			fprintf(stderr,
				"ferrite umount: %s: unmounted, but the daemon still holds %s\n",
				dir, pool);
			return CLI_EXIT_FAILURE;
		}
		nanosleep(&nap, NULL);
	}
	if (fd >= 0)
		close(fd);
	return CLI_EXIT_OK;
}

int cmd_umount(int argc, char **argv)
{
	static const struct option longopts[] = {
	    {"lazy", no_argument, NULL, 'l'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	int opt, lazy = 0;
	cli_getopt_begin();
	while ((opt = getopt_long(argc, argv, ":lh", longopts, NULL)) != -1) {
		if (opt == 'l') {
			lazy = 1;
		} else if (opt == 'h') {
			fputs(umount_usage, stdout);
			return CLI_EXIT_OK;
		} else {
			return cli_bad_option("umount", opt, argv, CLI_EXIT_USAGE);
		}
	}
	if (argc - optind != 1)
		return cli_usage_error("umount", CLI_EXIT_USAGE, "expected one DIR");
	const char *dir = argv[optind];
	char abs[PATH_MAX], canon[PATH_MAX];
	struct mnt m;
	struct stat st;
	int rc = abs_path(dir, abs, sizeof(abs));
	if (rc < 0)
		return cli_usage_error("umount", CLI_EXIT_FAILURE, "%s: %s", dir, strerror(-rc));
	int dead = stat(abs, &st) != 0 && errno == ENOTCONN;
	if (!dead && realpath(abs, canon))
		snprintf(abs, sizeof(abs), "%s", canon);
	if (!find_mount(abs, NULL, &m)) {
		fprintf(stderr, "ferrite umount: %s: not mounted\n", dir);
		return CLI_EXIT_FAILURE;
	}
	if (strcmp(m.type, FUSE_TYPE) != 0) {
		fprintf(stderr, "ferrite umount: %s: not a ferrite mount (%s)\n", dir, m.type);
		return CLI_EXIT_FAILURE;
	}
	uid_t me = geteuid();
	if (me != 0 && m.user_id >= 0 && (uid_t)m.user_id != me) {
		char who[64];
		struct passwd *pw = getpwuid((uid_t)m.user_id);
		snprintf(who, sizeof(who), "%s%s(uid %ld)", pw ? pw->pw_name : "", pw ? " " : "",
			 m.user_id);
		fprintf(stderr,
			"ferrite umount: %s: mounted by %s; only that user or root can "
			"unmount it\n",
			dir, who);
		return CLI_EXIT_FAILURE;
	}
	char why[512];
	rc = do_umount(abs, dead || lazy, why, sizeof(why));
	if (rc == -EPERM && why[0]) {
		fprintf(stderr, "ferrite umount: %s: %s\n", dir, why);
		return CLI_EXIT_FAILURE;
	}
	if (rc == -EBUSY) {
		fprintf(stderr,
			"ferrite umount: %s: busy (a process has a file or its working directory "
			"there); close them, or use -l to detach now\n",
			dir);
		return CLI_EXIT_FAILURE;
	}
	if (rc < 0) {
		fprintf(stderr, "ferrite umount: %s: %s\n", dir, strerror(-rc));
		return CLI_EXIT_FAILURE;
	}
	if (dead) {
		fprintf(stderr,
			"ferrite umount: %s: detached a mount whose daemon had died; the next "
			"mount of %s recovers the pool\n",
			dir, m.source);
		return CLI_EXIT_OK;
	}
	return lazy ? CLI_EXIT_OK : wait_for_daemon(dir, m.source);
}
