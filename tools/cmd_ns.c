/*
 * cmd_ns.c -- `ferrite rm`, `ferrite mkdir` and `ferrite mv`: change the
 * namespace of an unmounted pool the way rm(1), mkdir(1) and mv(1) do,
 * through the public API (each call is atomic and durable on return). A
 * recursive rm walks with the side table's listing, which leaves out names
 * that are not names, and refuses directory loops and excessive depth
 * (cli_walk_enter), so a damaged pool cannot make it run without end.
 */
#include <errno.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"

static const char rm_usage[] =
    "Usage: ferrite rm [-r] [-d] [-f] [--pool POOL] PATH...\n"
    "\nRemove files (and with -r, directories and everything below them) from\n"
    "an unmounted pool, like rm(1). Each removal is atomic and durable.\n"
    "\nOptions:\n"
    "  -r, -R        remove directories and their contents recursively\n"
    "  -d            remove empty directories\n"
    "  -f            ignore paths that do not exist\n"
    "  --pool POOL   pool to use (default: $FERRITE_POOL, else\n"
    "                /dev/shm/ferrite/default.pool)\n"
    "  -h, --help    show this help\n"
    "\nPATH is a path inside the pool; a leading \"pool:\" is accepted. The root\n"
    "directory is never removed.\n"
    "Exit status: 0 removed, 1 some path failed, 2 usage error.\n";

static const char mkdir_usage[] =
    "Usage: ferrite mkdir [-p] [-m MODE] [--pool POOL] PATH...\n"
    "\nCreate directories in an unmounted pool, like mkdir(1).\n"
    "\nOptions:\n"
    "  -p            make parent directories as needed; no error if a\n"
    "                directory exists\n"
    "  -m MODE       permission bits in octal (default 0777 less the umask)\n"
    "  --pool POOL   pool to use (default: $FERRITE_POOL, else\n"
    "                /dev/shm/ferrite/default.pool)\n"
    "  -h, --help    show this help\n"
    "\nPATH is a path inside the pool; a leading \"pool:\" is accepted.\n"
    "Exit status: 0 created, 1 some path failed, 2 usage error.\n";

static const char mv_usage[] =
    "Usage: ferrite mv [-n] [--pool POOL] SRC DST\n"
    "       ferrite mv [-n] [--pool POOL] SRC... DIR\n"
    "\nRename or move files and directories inside an unmounted pool, like\n"
    "mv(1): into DIR when the last operand is an existing directory, else SRC\n"
    "becomes DST (replacing a file there). Each move is one atomic rename.\n"
    "\nOptions:\n"
    "  -n            never replace an existing name (fail instead)\n"
    "  --pool POOL   pool to use (default: $FERRITE_POOL, else\n"
    "                /dev/shm/ferrite/default.pool)\n"
    "  -h, --help    show this help\n"
    "\nPaths are inside the pool; a leading \"pool:\" is accepted.\n"
    "Exit status: 0 moved, 1 some move failed, 2 usage error.\n";

struct ns_args {
	const char *cmd;
	const char *pool;
	int recursive, dirs, force; /* rm -r, -d, -f */
	int parents;		    /* mkdir -p */
	mode_t mode;		    /* mkdir -m */
	int noclobber;		    /* mv -n */
	int n;
	char **args;
	int failed;
};

/* Returns CLI_CONTINUE or the exit status. */
static int ns_parse(int argc, char **argv, struct ns_args *a, const char *shortopts,
		    const char *usage)
{
	static const struct option longopts[] = {
	    {"pool", required_argument, NULL, CLI_OPT_POOL},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	int opt;
	char *end;
	unsigned long m;

	cli_getopt_begin();
	while ((opt = getopt_long(argc, argv, shortopts, longopts, NULL)) != -1) {
		switch (opt) {
		case 'r':
		case 'R':
			a->recursive = 1;
			break;
		case 'd':
			a->dirs = 1;
			break;
		case 'f':
			a->force = 1;
			break;
		case 'p':
			a->parents = 1;
			break;
		case 'n':
			a->noclobber = 1;
			break;
		case 'm':
			m = strtoul(optarg, &end, 8);
			if (!*optarg || *end || m > 07777)
				return cli_usage_error(a->cmd, CLI_EXIT_USAGE,
						       "invalid mode '%s' (octal, e.g. 755)",
						       optarg);
			a->mode = (mode_t)m;
			break;
		case CLI_OPT_POOL:
			a->pool = optarg;
			break;
		case 'h':
			fputs(usage, stdout);
			return CLI_EXIT_OK;
		default:
			return cli_bad_option(a->cmd, opt, argv, CLI_EXIT_USAGE);
		}
	}
	a->pool = cli_pool(a->pool);
	a->n = argc - optind;
	a->args = argv + optind;
	if (a->n == 0)
		return cli_usage_error(a->cmd, CLI_EXIT_USAGE, "missing PATH");
	return CLI_CONTINUE;
}

static void ns_fail(struct ns_args *a, const char *path, int rc)
{
	cli_error(a->cmd, path, rc);
	a->failed = 1;
}

/* ---- rm ---------------------------------------------------------------------------------- */

static int is_root(const char *path)
{
	while (*path == '/')
		path++;
	return *path == '\0' || strcmp(path, ".") == 0;
}

static void rm_path(struct ns_args *a, const struct side *s, const char *path,
		    const struct cli_walk *up);

/* Empties directory path (attributes st) and removes it. */
static void rm_tree(struct ns_args *a, const struct side *s, const char *path,
		    const struct stat *st, const struct cli_walk *up)
{
	struct cli_walk w;
	struct side_list l;
	char why[256];
	size_t i;
	int rc;

	if (cli_walk_enter(&w, up, "", path, st, why, sizeof(why)) < 0) {
		cli_fail(a->cmd, "", path, why);
		a->failed = 1;
		return;
	}
	memset(&l, 0, sizeof(l));
	rc = s->ops->list(s, path, 0, &l);
	if (rc < 0) {
		ns_fail(a, path, rc);
		side_list_free(&l);
		return;
	}
	if (l.refused)
		a->failed = 1; /* reported by the listing; the rmdir below fails */
	for (i = 0; i < l.n; i++) {
		char *child = side_path_join(path, l.v[i].name);

		if (!child) {
			ns_fail(a, path, -ENOMEM);
			break;
		}
		rm_path(a, s, child, &w);
		free(child);
	}
	side_list_free(&l);
	rc = ferrite_rmdir(s->fs, path);
	if (rc < 0)
		ns_fail(a, path, rc);
}

static void rm_path(struct ns_args *a, const struct side *s, const char *path,
		    const struct cli_walk *up)
{
	struct stat st;
	int rc = s->ops->lstat(s, path, &st);

	if (rc < 0) {
		if (!(a->force && rc == -ENOENT && !up))
			ns_fail(a, path, rc);
		return;
	}
	if (!S_ISDIR(st.st_mode)) {
		rc = ferrite_unlink(s->fs, path);
	} else if (a->recursive) {
		rm_tree(a, s, path, &st, up);
		return;
	} else if (a->dirs) {
		rc = ferrite_rmdir(s->fs, path);
	} else {
		cli_fail(a->cmd, "", path, "is a directory (use -r, or -d if it is empty)");
		a->failed = 1;
		return;
	}
	if (rc < 0)
		ns_fail(a, path, rc);
}

static int rm_run(const struct side *s, void *arg)
{
	struct ns_args *a = arg;
	int i;

	for (i = 0; i < a->n; i++) {
		const char *path = cli_pool_path(a->args[i]);

		if (is_root(path)) {
			cli_fail(a->cmd, "", path, "refusing to remove the root directory");
			a->failed = 1;
			continue;
		}
		rm_path(a, s, path, NULL);
	}
	return a->failed;
}

int cmd_rm(int argc, char **argv)
{
	struct ns_args a = {.cmd = "rm"};
	int rc = ns_parse(argc, argv, &a, ":rRdfh", rm_usage);

	return rc != CLI_CONTINUE ? rc : files_run("rm", a.pool, rm_run, &a);
}

/* ---- mkdir ----------------------------------------------------------------------------- */

/* mkdir -p: each missing ancestor, then path; an existing directory is fine. */
static int mkdir_parents(struct ns_args *a, const struct side *s, char *path)
{
	struct stat st;
	char *p = path;
	int rc;

	for (;;) {
		while (*p == '/')
			p++;
		p = strchr(p, '/');
		if (p)
			*p = '\0';
		rc = ferrite_mkdir(s->fs, path, a->mode);
		if (rc == -EEXIST && s->ops->stat(s, path, &st) == 0 && S_ISDIR(st.st_mode))
			rc = 0;
		else if (rc == -EEXIST)
			rc = -ENOTDIR;
		if (!p || rc < 0)
			return rc;
		*p = '/';
	}
}

static int mkdir_run(const struct side *s, void *arg)
{
	struct ns_args *a = arg;
	int i, rc;

	for (i = 0; i < a->n; i++) {
		const char *path = cli_pool_path(a->args[i]);

		if (a->parents) {
			char *copy = strdup(path);

			rc = copy ? mkdir_parents(a, s, copy) : -ENOMEM;
			free(copy);
		} else {
			rc = ferrite_mkdir(s->fs, path, a->mode);
		}
		if (rc < 0)
			ns_fail(a, path, rc);
	}
	return a->failed;
}

int cmd_mkdir(int argc, char **argv)
{
	struct ns_args a = {.cmd = "mkdir"};
	mode_t mask = umask(0);
	int rc;

	umask(mask);
	a.mode = 0777 & ~mask; /* the library applies no umask: front ends do */
	rc = ns_parse(argc, argv, &a, ":pm:h", mkdir_usage);
	return rc != CLI_CONTINUE ? rc : files_run("mkdir", a.pool, mkdir_run, &a);
}

/* ---- mv ---------------------------------------------------------------------------------- */

/* The last component of path ("" for the root). */
static const char *base_name(const char *path, size_t *len)
{
	size_t n = strlen(path);
	const char *b;

	while (n > 1 && path[n - 1] == '/')
		n--;
	b = path + n;
	while (b > path && b[-1] != '/')
		b--;
	*len = (size_t)(path + n - b);
	return b;
}

static void mv_one(struct ns_args *a, const struct side *s, const char *src, const char *dst,
		   int into)
{
	char *target = NULL;
	int rc;

	if (into) {
		size_t n;
		const char *b = base_name(src, &n);
		char name[256];

		if (n == 0 || n >= sizeof(name)) {
			cli_fail(a->cmd, "", src, "cannot move the root directory");
			a->failed = 1;
			return;
		}
		memcpy(name, b, n);
		name[n] = '\0';
		target = side_path_join(dst, name);
		if (!target) {
			ns_fail(a, src, -ENOMEM);
			return;
		}
	}
	rc = ferrite_rename(s->fs, src, target ? target : dst, a->noclobber ? RENAME_NOREPLACE : 0);
	if (rc < 0)
		ns_fail(a, rc == -EEXIST || rc == -ENOTEMPTY ? (target ? target : dst) : src, rc);
	free(target);
}

static int mv_run(const struct side *s, void *arg)
{
	struct ns_args *a = arg;
	const char *dst = cli_pool_path(a->args[a->n - 1]);
	struct stat st;
	int into = s->ops->stat(s, dst, &st) == 0 && S_ISDIR(st.st_mode);
	int i;

	if (!into && a->n > 2) {
		cli_fail(a->cmd, "", dst, "not a directory (moving several files needs one)");
		return 1;
	}
	for (i = 0; i + 1 < a->n; i++)
		mv_one(a, s, cli_pool_path(a->args[i]), dst, into);
	return a->failed;
}

int cmd_mv(int argc, char **argv)
{
	struct ns_args a = {.cmd = "mv"};
	int rc = ns_parse(argc, argv, &a, ":nh", mv_usage);

	if (rc != CLI_CONTINUE)
		return rc;
	if (a.n < 2)
		return cli_usage_error("mv", CLI_EXIT_USAGE, "missing destination after '%s'",
				       a.args[0]);
	return files_run("mv", a.pool, mv_run, &a);
}
