/*
 * cmd_run.c -- `ferrite run`: starts a program with libferrite-preload.so
 * preloaded, so its file calls under the prefix (default /pm) go to a pool
 * in-process (src/preload). The command checks what it can before the exec
 * -- the prefix, the pool (formatting the built-in default pool on first
 * use), that the pool is free -- so failures are reported here in one line
 * rather than later inside the program.
 */
#include <errno.h>
#include <signal.h>
#include <sys/wait.h>
#include <getopt.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <dirent.h>
#include <unistd.h>

#include "cli.h"

#ifndef FERRITE_LIBDIR
#define FERRITE_LIBDIR "lib"
#endif
#define PRELOAD_NAME	      "libferrite-preload.so"
#define PRELOAD_PROTECT_NAME  "libferrite-preload-protect.so"
#define DEFAULT_POOL_PATH     "/dev/shm/ferrite/default.pool"
#define CLI_EXIT_NOT_FOUND    127
#define CLI_EXIT_NOT_RUNNABLE 126

static const char run_usage[] =
    "Usage: ferrite run [--pool POOL] [--prefix DIR] [--mode strict|sync]\n"
    "                   [--protect] [--] CMD [ARGS...]\n"
    "\nRun CMD with the Ferrite preload shim: every file call on a path under\n"
    "DIR (default /pm) goes to POOL inside the process (\"/pm/a/b\" is \"/a/b\"\n"
    "in the pool); every other path goes to the kernel as usual.\n"
    "\nOptions:\n"
    "  --pool POOL    pool to use (default: $FERRITE_POOL, else\n"
    "                 /dev/shm/ferrite/default.pool, formatted on first use)\n"
    "  --prefix DIR   absolute directory the pool appears under (default /pm);\n"
    "                 not /, no '.' or '..' parts, not a non-empty host directory\n"
    "  --mode MODE    strict (every write atomic) or sync for this run (default:\n"
    "                 the pool's mode, chosen at mkfs)\n"
    "  --protect      debug mode: the pool is mapped read-only and the library\n"
    "                 stores through a view writable only while it stores, so a\n"
    "                 stray store of CMD into pool memory faults and is named\n"
    "                 (slow; files CMD maps itself stay writable)\n"
    "  -h, --help     show this help\n"
    "\nForked children and exec'ed programs go on with the pool (descriptors,\n"
    "working directory); other `ferrite run` programs and C API users may use\n"
    "the same pm pool at the same time.\n"
    "Exit status: CMD's, or 1 when the pool cannot be used, 2 usage error,\n"
    "126 CMD not runnable, 127 CMD not found.\n";

struct run_args {
	const char *pool;
	const char *prefix;
	const char *mode; /* "strict", "sync" or NULL (the pool's) */
	int protect;	  /* the checking shim (--protect) */
	char **cmd;
};

static int run_parse(int argc, char **argv, struct run_args *a)
{
	static const struct option longopts[] = {
	    {"pool", required_argument, NULL, CLI_OPT_POOL},
	    {"prefix", required_argument, NULL, 'p'},
	    {"mode", required_argument, NULL, 'm'},
	    {"protect", no_argument, NULL, 'P'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	int opt;

	cli_getopt_begin();
	/* "+": options end at CMD, whose own options are its business. */
	while ((opt = getopt_long(argc, argv, "+:h", longopts, NULL)) != -1) {
		if (opt == CLI_OPT_POOL) {
			a->pool = optarg;
		} else if (opt == 'p') {
			a->prefix = optarg;
		} else if (opt == 'm') {
			int m;
			if (cli_parse_mode(optarg, &m) < 0)
				return cli_usage_error("run", CLI_EXIT_USAGE,
						       "invalid mode '%s' (sync or strict)",
						       optarg);
			a->mode = optarg;
		} else if (opt == 'P') {
			a->protect = 1;
		} else if (opt == 'h') {
			fputs(run_usage, stdout);
			return CLI_EXIT_OK;
		} else {
			return cli_bad_option("run", opt, argv, CLI_EXIT_USAGE);
		}
	}
	if (optind >= argc)
		return cli_usage_error("run", CLI_EXIT_USAGE, "no command given");
	a->cmd = argv + optind;
	return CLI_CONTINUE;
}

/* Normalises the prefix into buf; returns CLI_CONTINUE or the exit status. */
static int run_check_prefix(const char *prefix, char *buf, size_t cap)
{
	if (prefix[0] != '/')
		return cli_usage_error("run", CLI_EXIT_USAGE, "prefix '%s' is not an absolute path",
				       prefix);
	size_t n = 0;
	for (const char *p = prefix; *p;) {
		while (*p == '/')
			p++;
		const char *e = strchrnul(p, '/');
		size_t len = (size_t)(e - p);
		if ((len == 1 && p[0] == '.') || (len == 2 && p[0] == '.' && p[1] == '.'))
			return cli_usage_error("run", CLI_EXIT_USAGE,
					       "prefix '%s' has a '.' or '..' part", prefix);
		if (len) {
			if (n + len + 2 > cap)
				return cli_usage_error("run", CLI_EXIT_USAGE, "prefix too long");
			buf[n++] = '/';
			memcpy(buf + n, p, len);
			n += len;
		}
		p = e;
	}
	buf[n] = 0;
	if (n == 0)
		return cli_usage_error("run", CLI_EXIT_USAGE,
				       "prefix '/' would take over every path; choose a directory "
				       "such as /pm");
	DIR *d = opendir(buf);
	if (d) {
		struct dirent *e;
		int entries = 0;
		while ((e = readdir(d)))
			if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
				entries++;
		closedir(d);
		if (entries)
			return cli_usage_error(
			    "run", CLI_EXIT_USAGE,
			    "prefix %s is a non-empty directory on the host: its "
			    "files would be hidden from CMD; choose another --prefix",
			    buf);
	}
	return CLI_CONTINUE;
}

/* The pool must exist (only the built-in default is created) and be free. */
static int run_check_pool(const char *pool, int named)
{
	struct stat st;
	if (stat(pool, &st) != 0) {
		if (errno != ENOENT || named) {
			int e = errno;
			if (e == ENOENT)
				cli_no_pool("run", pool);
			else
				cli_fail("run", "", pool, strerror(e));
			return -e;
		}
		fprintf(stderr, "ferrite run: creating the default pool %s\n", pool);
		int rc = ferrite_mkfs(pool, NULL);
		if (rc) {
			cli_error("run", pool, rc);
			return rc;
		}
	}
	ferrite_fs *fs;
	int rc = ferrite_mount(pool, NULL, &fs);
	if (rc) {
		cli_error("run", pool, rc);
		return rc;
	}
	return cli_unmount("run", pool, fs);
}

static pid_t run_child;

static void run_forward(int sig)
{
	if (run_child > 0)
		kill(run_child, sig);
}

/* A tiered pool: the program runs as a child, and once it is gone the pool is
 * mounted and unmounted here, which drains what it wrote to the backing
 * directory (a killed program's pool is recovered the same way). */
static int run_tiered(const struct run_args *a, const char *pool)
{
	run_child = fork();
	if (run_child < 0) {
		cli_fail("run", "", "fork", strerror(errno));
		return CLI_EXIT_FAILURE;
	}
	if (run_child == 0) {
		execvp(a->cmd[0], a->cmd);
		int e = errno;
		cli_fail("run", "", a->cmd[0], strerror(e));
		_exit(e == ENOENT ? CLI_EXIT_NOT_FOUND : CLI_EXIT_NOT_RUNNABLE);
	}
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = run_forward;
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	sigaction(SIGQUIT, &sa, NULL);
	int status = 0;
	while (waitpid(run_child, &status, 0) < 0 && errno == EINTR)
		;
	unsetenv("LD_PRELOAD");
	ferrite_fs *fs;
	if (ferrite_mount(pool, NULL, &fs) == 0) {
		if (ferrite_unmount(fs) < 0)
			cli_fail("run", "", pool, ferrite_errmsg());
	} /* busy: another process holds it now and drains it itself */
	if (WIFSIGNALED(status))
		return 128 + WTERMSIG(status);
	return WEXITSTATUS(status);
}

int cmd_run(int argc, char **argv)
{
	struct run_args a = {.prefix = "/pm"};
	int rc = run_parse(argc, argv, &a);
	if (rc != CLI_CONTINUE)
		return rc;
	char prefix[PATH_MAX];
	rc = run_check_prefix(a.prefix, prefix, sizeof(prefix));
	if (rc != CLI_CONTINUE)
		return rc;
	const char *pool = cli_pool(a.pool);
	int named = a.pool || strcmp(pool, DEFAULT_POOL_PATH) != 0;
	if (run_check_pool(pool, named))
		return CLI_EXIT_FAILURE;
	char shim[PATH_MAX], abspool[PATH_MAX];
	/* Next to this binary (build tree) or in the library directory of its
	 * installation, in ferrite/ (where it is installed) or not. */
	const char *const beside[] = {"", ("/../" FERRITE_LIBDIR "/ferrite"),
				      ("/../" FERRITE_LIBDIR), "/../lib"};
	const char *shim_name = a.protect ? PRELOAD_PROTECT_NAME : PRELOAD_NAME;
	const char *shim_var = a.protect ? "FERRITE_PRELOAD_PROTECT_LIB" : "FERRITE_PRELOAD_LIB";
	rc = cli_find_beside(shim_var, shim_name, beside, 4, R_OK, shim, sizeof(shim));
	if (rc) {
		char why[160];
		snprintf(why, sizeof(why),
			 "not found next to the ferrite binary nor in its library directory "
			 "(set %s)",
			 shim_var);
		cli_fail("run", "", shim_name, why);
		return CLI_EXIT_FAILURE;
	}
	if (!realpath(pool, abspool)) {
		cli_fail("run", "", pool, strerror(errno));
		return CLI_EXIT_FAILURE;
	}
	/* The shim goes first so that it sees calls before other preloads. */
	const char *old = getenv("LD_PRELOAD");
	size_t len = strlen(shim) + (old ? strlen(old) + 2 : 1);
	char *preload = malloc(len);
	if (!preload) {
		cli_fail("run", "", "LD_PRELOAD", strerror(ENOMEM));
		return CLI_EXIT_FAILURE;
	}
	snprintf(preload, len, "%s%s%s", shim, old && *old ? ":" : "", old ? old : "");
	if (setenv("LD_PRELOAD", preload, 1) || setenv("FERRITE_POOL", abspool, 1) ||
	    setenv("FERRITE_PREFIX", prefix, 1) || (a.mode && setenv("FERRITE_MODE", a.mode, 1))) {
		cli_fail("run", "", "environment", strerror(errno));
		return CLI_EXIT_FAILURE;
	}
	free(preload);
	struct ferrite_tier_info ti;
	if (ferrite_tier_stats(abspool, &ti) == 0)
		return run_tiered(&a, abspool);
	execvp(a.cmd[0], a.cmd);
	int e = errno;
	cli_fail("run", "", a.cmd[0], strerror(e));
	return e == ENOENT ? CLI_EXIT_NOT_FOUND : CLI_EXIT_NOT_RUNNABLE;
}
