/*
 * cli_util.c -- helpers every subcommand of `ferrite` shares: pool selection,
 * option and usage errors, one-line error messages built from ferrite_errmsg(),
 * mounting, size parsing and formatting, and the progress display.
 */
#include <errno.h>
#include <limits.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"

#define CLI_PROG "ferrite"

static const char *global_pool;

/* ---- command line ---------------------------------------------------------- */

void cli_set_global_pool(const char *pool)
{
	global_pool = pool;
}

const char *cli_global_pool(void)
{
	return global_pool;
}

const char *cli_pool(const char *given)
{
	if (given)
		return given;
	if (global_pool)
		return global_pool;
	return ferrite_default_pool();
}

const char *cli_pool_path(const char *arg)
{
	if (strncmp(arg, "pool:", 5) == 0)
		arg += 5;
	return arg[0] ? arg : "/";
}

void cli_getopt_begin(void)
{
	optind = 0; /* glibc: full re-initialisation */
	opterr = 0;
}

int cli_usage_error(const char *cmd, int exit_code, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "%s %s: ", CLI_PROG, cmd);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\nTry '%s %s --help' for more information.\n", CLI_PROG, cmd);
	return exit_code;
}

int cli_bad_option(const char *cmd, int got, char **argv, int exit_code)
{
	const char *arg = argv[optind - 1];
	int is_long = strncmp(arg, "--", 2) == 0;

	if (got == ':' && is_long)
		return cli_usage_error(cmd, exit_code, "option '%s' requires an argument", arg);
	if (got == ':')
		return cli_usage_error(cmd, exit_code, "option requires an argument -- '%c'",
				       optopt);
	if (is_long && optopt)
		return cli_usage_error(cmd, exit_code, "option '%s' takes no argument", arg);
	if (is_long)
		return cli_usage_error(cmd, exit_code, "unrecognized option '%s'", arg);
	return cli_usage_error(cmd, exit_code, "invalid option -- '%c'", optopt);
}

int cli_take_pool_operand(const char *cmd, int n, char **args, const char **pool, int exit_code)
{
	if (n > 1)
		return cli_usage_error(cmd, exit_code, "too many arguments (one POOL at most)");
	if (n == 1 && *pool && strcmp(*pool, args[0]) != 0)
		return cli_usage_error(cmd, exit_code, "two different pools given: '%s' and '%s'",
				       *pool, args[0]);
	*pool = cli_pool(n == 1 ? args[0] : *pool);
	return CLI_CONTINUE;
}

/* ---- errors ---------------------------------------------------------------- */

const char *cli_api_msg(int rc)
{
	const char *msg = ferrite_errmsg();

	if (msg && msg[0])
		return msg;
	return strerror(rc < 0 ? -rc : rc);
}

/* Prints text on one line: newlines become spaces and other control
 * characters '?', so a name from a crafted pool cannot drive the terminal. */
static void print_one_line(FILE *out, const char *text)
{
	for (; *text; text++) {
		unsigned char c = (unsigned char)*text;

		if (c == '\n' || c == '\r')
			c = ' ';
		else if (c < 0x20 || c == 0x7f)
			c = '?';
		fputc(c, out);
	}
}

/* MSG without a leading "SUBJECT: " (the library names the pool or path
 * itself; the line already starts with it). */
static const char *strip_subject(const char *msg, const char *subject)
{
	size_t n = strlen(subject);

	if (n && strncmp(msg, subject, n) == 0 && msg[n] == ':' && msg[n + 1] == ' ')
		return msg + n + 2;
	return msg;
}

void cli_fail(const char *cmd, const char *prefix, const char *subject, const char *msg)
{
	msg = strip_subject(msg, subject);
	fflush(stdout); /* keep the order of output and error lines */
	fprintf(stderr, "%s %s: %s", CLI_PROG, cmd, prefix);
	print_one_line(stderr, subject);
	fputs(": ", stderr);
	print_one_line(stderr, msg);
	fputc('\n', stderr);
}

void cli_error(const char *cmd, const char *subject, int rc)
{
	cli_fail(cmd, "", subject, cli_api_msg(rc));
}

void cli_no_pool(const char *cmd, const char *pool)
{
	char msg[PATH_MAX + 64];

	/* the library's wording too (src/space/pool.c, pool_missing) */
	snprintf(msg, sizeof(msg), "no such pool (create it with `ferrite mkfs %s`)", pool);
	cli_fail(cmd, "", pool, msg);
}

int cli_mount(const char *cmd, const char *pool, ferrite_fs **fs)
{
	int rc = ferrite_mount(pool, NULL, fs);

	if (rc < 0)
		cli_error(cmd, pool, rc);
	return rc;
}

int cli_unmount(const char *cmd, const char *pool, ferrite_fs *fs)
{
	int rc = ferrite_unmount(fs);

	if (rc < 0)
		cli_error(cmd, pool, rc);
	return rc;
}

/* ---- walking trees ---------------------------------------------------------- */

int cli_walk_enter(struct cli_walk *w, const struct cli_walk *up, const char *prefix,
		   const char *path, const struct stat *st, char *why, size_t cap)
{
	const struct cli_walk *a;

	w->dev = st->st_dev;
	w->ino = st->st_ino;
	w->prefix = prefix;
	w->path = path;
	w->up = up;
	w->depth = up ? up->depth + 1 : 0;
	if (w->depth > CLI_MAX_DEPTH) {
		snprintf(why, cap, "more than %d directories deep; not entered", CLI_MAX_DEPTH);
		return -ELOOP;
	}
	for (a = up; a; a = a->up) {
		if (a->dev == w->dev && a->ino == w->ino) {
			snprintf(why, cap,
				 "is the directory %s%s again (a directory loop); not entered",
				 a->prefix, a->path);
			return -ELOOP;
		}
	}
	return 0;
}

/* ---- sizes and modes -------------------------------------------------------- */

/* Power of 1024 named by a suffix: "", "K", "KB", "KiB" (any case) ... "T". */
static int size_suffix_shift(const char *s, unsigned *shift)
{
	static const char units[] = "KMGT";
	const char *u;

	if (s[0] == '\0') {
		*shift = 0;
		return 0;
	}
	if ((s[0] == 'b' || s[0] == 'B') && s[1] == '\0') {
		*shift = 0;
		return 0;
	}
	u = strchr(units, s[0] & ~0x20);
	if (!u)
		return -EINVAL;
	s++;
	if (strcmp(s, "") != 0 && strcasecmp(s, "b") != 0 && strcasecmp(s, "ib") != 0)
		return -EINVAL;
	*shift = 10 * (unsigned)(u - units + 1);
	return 0;
}

int cli_parse_size(const char *text, uint64_t *bytes)
{
	uint64_t value = 0;
	unsigned shift;
	const char *p = text;

	if (*p < '0' || *p > '9')
		return -EINVAL;
	for (; *p >= '0' && *p <= '9'; p++) {
		if (value > (UINT64_MAX - 9) / 10)
			return -ERANGE;
		value = value * 10 + (uint64_t)(*p - '0');
	}
	if (size_suffix_shift(p, &shift) < 0)
		return -EINVAL;
	if (shift && value > (UINT64_MAX >> shift))
		return -ERANGE;
	*bytes = value << shift;
	return 0;
}

const char *cli_format_size(uint64_t bytes, char *buf, size_t len)
{
	static const char *const units[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
	double v = (double)bytes;
	int u = -1;

	if (bytes < 1024) {
		snprintf(buf, len, "%llu B", (unsigned long long)bytes);
		return buf;
	}
	while (v >= 1024.0 && u < 5) {
		v /= 1024.0;
		u++;
	}
	snprintf(buf, len, "%.1f %s", v, units[u]);
	return buf;
}

int cli_parse_mode(const char *text, int *mode)
{
	if (strcmp(text, "sync") == 0)
		*mode = FERRITE_MODE_SYNC;
	else if (strcmp(text, "strict") == 0)
		*mode = FERRITE_MODE_STRICT;
	else
		return -EINVAL;
	return 0;
}

const char *cli_mode_name(int mode)
{
	switch (mode) {
	case FERRITE_MODE_SYNC:
		return "sync";
	case FERRITE_MODE_STRICT:
		return "strict";
	default:
		return "unknown";
	}
}

/* ---- progress --------------------------------------------------------------- */

/* Not a terminal (a log): a line per 10 %; between them, a line for a new
 * percentage once PROGRESS_LOG_SECS passed since the last, so a slow large
 * pool still shows it moves. Never more. */
#define PROGRESS_LOG_STEP 10
#define PROGRESS_LOG_SECS 30.0

static double progress_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void cli_progress_begin(struct cli_progress *p, const char *label)
{
	p->label = label;
	p->tty = isatty(STDERR_FILENO);
	p->shown = -1;
	p->last_line = 0;
}

static int progress_percent(uint64_t done, uint64_t total)
{
	if (total == 0 || done >= total)
		return 100;
	return (int)((double)done * 100.0 / (double)total);
}

void cli_progress_update(void *arg, uint64_t done, uint64_t total)
{
	struct cli_progress *p = arg;
	int pct = progress_percent(done, total);

	if (pct == p->shown)
		return;
	if (p->tty) {
		fprintf(stderr, "\r%s: %3d%%", p->label, pct);
		fflush(stderr);
		p->shown = pct;
		return;
	}
	double now = progress_now();
	int step = p->shown < 0 || pct / PROGRESS_LOG_STEP > p->shown / PROGRESS_LOG_STEP;
	if (!step && now - p->last_line < PROGRESS_LOG_SECS)
		return;
	p->shown = pct;
	p->last_line = now;
	fprintf(stderr, "%s: %d%%\n", p->label, pct);
}

void cli_progress_clear(struct cli_progress *p)
{
	if (!p->tty || p->shown < 0)
		return;
	fputs("\r\033[K", stderr);
	p->shown = -1;
}

void cli_progress_end(struct cli_progress *p)
{
	if (p->tty && p->shown >= 0)
		fputc('\n', stderr);
	p->shown = -1;
}

/* ---- huge pages ------------------------------------------------------------- */

void cli_hugepage_hint(FILE *out, const struct ferrite_info *info)
{
	if (info->huge_pages)
		return;
	fputs("note: the pool has 4 KiB pages, not 2 MiB ones: a page fault costs 1.6 us\n"
	      "      instead of 0.04 us. For 2 MiB pages, make the pool on a tmpfs mounted\n"
	      "      with huge=within_size",
	      out);
	if (geteuid() == 0)
		fputs(":\n"
		      "        mount -t tmpfs -o huge=within_size,size=SIZE tmpfs DIR\n"
		      "      (mkfs of the default pool mounts one on /dev/shm/ferrite itself\n"
		      "      when that directory is empty).\n",
		      out);
	else
		fputs(" (root can mount one: `ferrite mkfs --help`\n"
		      "      says how).\n",
		      out);
	if (strstr(info->backing, "shmem_enabled=deny"))
		fputs("      The kernel denies huge pages to every tmpfs (shmem_enabled=deny): as\n"
		      "      root, `echo advise > /sys/kernel/mm/transparent_hugepage/"
		      "shmem_enabled`.\n",
		      out);
	fputs("      Everything works the same on 4 KiB pages; --no-hugepages leaves this\n"
	      "      note out.\n",
	      out);
}

void json_print_string(const char *s)
{
	putchar('"');
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;
		if (c == '"' || c == '\\')
			printf("\\%c", c);
		else if (c < 0x20)
			printf("\\u%04x", c);
		else
			putchar(c);
	}
	putchar('"');
}

int cli_find_beside(const char *env, const char *name, const char *const rel[], int nrel, int mode,
		    char *out, size_t cap)
{
	const char *given = getenv(env);
	if (given && *given) {
		if (access(given, mode) != 0 || !realpath(given, out))
			return -errno;
		return 0;
	}
	char exe[PATH_MAX - 64];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (n < 0)
		return -errno;
	exe[n] = 0;
	char *slash = strrchr(exe, '/');
	if (slash)
		*slash = 0;
	for (int i = 0; i < nrel; i++) {
		char cand[PATH_MAX + 64];
		int m = snprintf(cand, sizeof(cand), "%s%s/%s", exe, rel[i], name);
		if (m > 0 && (size_t)m < sizeof(cand) && access(cand, mode) == 0 &&
		    realpath(cand, out) && strlen(out) < cap)
			return 0;
	}
	return -ENOENT;
}

int cli_exec_beside(const char *cmd, const char *env, const char *name, const char *const rel[],
		    int nrel, const char *where, char **argv)
{
	char path[PATH_MAX], as[64], as_value[64];
	int rc = cli_find_beside(env, name, rel, nrel, X_OK, path, sizeof(path));
	if (rc) {
		fprintf(stderr, "ferrite %s: cannot find %s %s: %s\n", cmd, name, where,
			strerror(-rc));
		return 1;
	}
	/* it names itself `ferrite CMD` in its messages and replay lines */
	snprintf(as, sizeof(as), "%s_AS", env);
	snprintf(as_value, sizeof(as_value), "ferrite %s", cmd);
	setenv(as, as_value, 1);
	argv[0] = path;
	execv(path, argv);
	fprintf(stderr, "ferrite %s: cannot run %s: %s\n", cmd, path, strerror(errno));
	return 1;
}
