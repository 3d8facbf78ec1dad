/*
 * cmd_files.c -- `ferrite ls` and `ferrite cat`: list and print the files of a
 * pool the way ls(1) and cat(1) do, through the side table of side.c; also
 * the option parsing and mount/unmount wrapper that cmd_cp.c shares.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <grp.h>
#include <limits.h>
#include <pwd.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"

static const char ls_usage[] =
    "Usage: ferrite ls [-l] [-n] [-a] [-R] [--pool POOL] [PATH...]\n"
    "\nList directories of a pool (default \"/\"), names sorted, like ls(1).\n"
    "\nOptions:\n"
    "  -l           long format: mode, links, owner, group, size, mtime, name\n"
    "               (owner and group by name, numeric when this host has none)\n"
    "  -n           like -l, with numeric owner and group\n"
    "  -a           include names starting with '.', and . and ..\n"
    "  -R           list subdirectories recursively\n"
    "  --pool POOL  pool to use (default: $FERRITE_POOL, else\n"
    "               /dev/shm/ferrite/default.pool)\n"
    "  -h, --help   show this help\n"
    "\nPATH is a path inside the pool; a leading \"pool:\" is accepted.\n"
    "Exit status: 0 listed, 1 some path failed, 2 usage error.\n";

static const char cat_usage[] =
    "Usage: ferrite cat [--pool POOL] PATH...\n"
    "\nWrite files of a pool to standard output.\n"
    "\nOptions:\n"
    "  --pool POOL  pool to use (default: $FERRITE_POOL, else\n"
    "               /dev/shm/ferrite/default.pool)\n"
    "  -h, --help   show this help\n"
    "\nPATH is a path inside the pool; a leading \"pool:\" is accepted.\n"
    "Exit status: 0 written, 1 some path failed, 2 usage error.\n";

/* ---- shared ------------------------------------------------------------------------ */

int files_parse(const char *cmd, const char *shortopts, const char *usage, int argc, char **argv,
		struct files_args *a)
{
	static const struct option longopts[] = {
	    {"pool", required_argument, NULL, CLI_OPT_POOL},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	int opt;

	cli_getopt_begin();
	while ((opt = getopt_long(argc, argv, shortopts, longopts, NULL)) != -1) {
		switch (opt) {
		case 'l':
			a->longfmt = 1;
			break;
		case 'n':
			a->longfmt = a->numeric = 1;
			break;
		case 'a':
			a->all = 1;
			break;
		case 'r':
		case 'R':
			a->recursive = 1;
			break;
		case CLI_OPT_POOL:
			a->pool = optarg;
			break;
		case 'h':
			fputs(usage, stdout);
			return CLI_EXIT_OK;
		default:
			return cli_bad_option(cmd, opt, argv, CLI_EXIT_USAGE);
		}
	}
	a->pool = cli_pool(a->pool);
	a->n = argc - optind;
	a->args = argv + optind;
	return CLI_CONTINUE;
}

int files_run(const char *cmd, const char *pool, int (*fn)(const struct side *, void *), void *arg)
{
	struct side side;
	ferrite_fs *fs;
	int failed;

	if (cli_mount(cmd, pool, &fs) < 0)
		return CLI_EXIT_FAILURE;
	side_init_pool(&side, fs, cmd);
	failed = fn(&side, arg);
	if (cli_unmount(cmd, pool, fs) < 0)
		failed = 1;
	return failed ? CLI_EXIT_FAILURE : CLI_EXIT_OK;
}

/* ---- ls ----------------------------------------------------------------------------- */

struct ls_ctx {
	const struct side *side;
	const struct files_args *args;
	int failed;
	int printed; /* something was listed: separate sections by a blank line */
	int tty;     /* stdout is a terminal: control characters in names shown as '?' */
};

/* One name to list, with its attributes (long format or recursion). */
struct ls_item {
	const char *name; /* as shown */
	char *path;	  /* in the pool; malloc'ed */
	struct stat st;
	int is_dir;
};

struct ls_widths {
	int nlink, uid, gid, size;
};

/* ---- owner and group names (ls -l) ------------------------------------------------ */

#define LS_NAME_CACHE 64 /* ids remembered per kind: a listing repeats a few */

struct ls_name {
	unsigned id;
	int named; /* this host has a name for id (else name is the number) */
	char name[64];
};

struct ls_names {
	struct ls_name v[LS_NAME_CACHE];
	int n, next; /* entries used; the one replaced next when full */
};

static struct ls_names ls_users, ls_groups;

/* The user (group) name of id, as ls(1) shows it: the number when this host
 * has no name for it (the pool may come from another machine), or with -n.
 * *named says which; the string lives until the next call. */
static const char *ls_id_name(unsigned id, int group, int numeric, int *named)
{
	static char num[16];
	struct ls_names *c = group ? &ls_groups : &ls_users;
	char buf[4096];

	*named = 0;
	snprintf(num, sizeof(num), "%u", id);
	if (numeric)
		return num;
	for (int i = 0; i < c->n; i++)
		if (c->v[i].id == id) {
			*named = c->v[i].named;
			return c->v[i].name;
		}
	const char *name = NULL;
	if (group) {
		struct group gr, *g = NULL;
		if (getgrgid_r((gid_t)id, &gr, buf, sizeof(buf), &g) == 0 && g)
			name = g->gr_name;
	} else {
		struct passwd pw, *u = NULL;
		if (getpwuid_r((uid_t)id, &pw, buf, sizeof(buf), &u) == 0 && u)
			name = u->pw_name;
	}
	struct ls_name *e = &c->v[c->n < LS_NAME_CACHE ? c->n++ : c->next++ % LS_NAME_CACHE];
	e->id = id;
	e->named = name && strlen(name) < sizeof(e->name);
	snprintf(e->name, sizeof(e->name), "%s", e->named ? name : num);
	*named = e->named;
	return e->name;
}

/* An owner or group column: a name left-aligned, a number right-aligned
 * (as ls(1) pads them). */
static void ls_print_id(unsigned id, int group, int numeric, int width)
{
	int named;
	const char *s = ls_id_name(id, group, numeric, &named);

	printf(named ? "%-*s " : "%*s ", width, s);
}

static int ls_id_width(unsigned id, int group, int numeric)
{
	int named;

	return (int)strlen(ls_id_name(id, group, numeric, &named));
}

/* Reports a failure of the command itself (not of a pool call). */
static void ls_fail_local(struct ls_ctx *c, const char *path, int err)
{
	cli_fail("ls", "", path, strerror(err));
	c->failed = 1;
}

/* Writes a name (or path) to stdout; on a terminal, control characters are
 * shown as '?' like ls(1) does, so a name cannot drive the terminal. */
static void ls_show(const struct ls_ctx *c, const char *s)
{
	for (; *s; s++) {
		unsigned char ch = (unsigned char)*s;

		putchar(c->tty && (ch < 0x20 || ch == 0x7f) ? '?' : ch);
	}
}

static char ls_type_char(mode_t m)
{
	if (S_ISDIR(m))
		return 'd';
	if (S_ISLNK(m))
		return 'l';
	if (S_ISCHR(m))
		return 'c';
	if (S_ISBLK(m))
		return 'b';
	if (S_ISFIFO(m))
		return 'p';
	if (S_ISSOCK(m))
		return 's';
	return '-';
}

/* "drwxr-xr-x" with s/S/t/T for the set-id and sticky bits. */
static void ls_mode_string(mode_t m, char s[11])
{
	static const char rwx[] = "rwxrwxrwx";
	int i;

	s[0] = ls_type_char(m);
	for (i = 0; i < 9; i++)
		s[1 + i] = (m & (0400u >> i)) ? rwx[i] : '-';
	if (m & S_ISUID)
		s[3] = s[3] == 'x' ? 's' : 'S';
	if (m & S_ISGID)
		s[6] = s[6] == 'x' ? 's' : 'S';
	if (m & S_ISVTX)
		s[9] = s[9] == 'x' ? 't' : 'T';
	s[10] = '\0';
}

static int digits(unsigned long long v)
{
	return snprintf(NULL, 0, "%llu", v);
}

static int max_int(int a, int b)
{
	return a > b ? a : b;
}

static void ls_measure(const struct ls_item *items, size_t n, int numeric, struct ls_widths *w)
{
	size_t i;

	memset(w, 0, sizeof(*w));
	for (i = 0; i < n; i++) {
		const struct stat *st = &items[i].st;

		w->nlink = max_int(w->nlink, digits(st->st_nlink));
		w->uid = max_int(w->uid, ls_id_width(st->st_uid, 0, numeric));
		w->gid = max_int(w->gid, ls_id_width(st->st_gid, 1, numeric));
		w->size = max_int(w->size, digits((unsigned long long)st->st_size));
	}
}

static void ls_print_long(struct ls_ctx *c, const struct ls_item *it, const struct ls_widths *w)
{
	char mode[11], when[32], *target = NULL;
	struct tm tm;
	time_t t = it->st.st_mtim.tv_sec;
	int rc = 0;

	ls_mode_string(it->st.st_mode, mode);
	if (!localtime_r(&t, &tm) || !strftime(when, sizeof(when), "%Y-%m-%d %H:%M", &tm))
		strcpy(when, "?");
	if (S_ISLNK(it->st.st_mode))
		rc = side_readlink_alloc(c->side, it->path, &target);
	if (rc < 0) {
		cli_error("ls", it->path, rc);
		c->failed = 1;
	}
	int numeric = c->args->numeric;
	printf("%s %*llu ", mode, w->nlink, (unsigned long long)it->st.st_nlink);
	ls_print_id(it->st.st_uid, 0, numeric, w->uid);
	ls_print_id(it->st.st_gid, 1, numeric, w->gid);
	printf("%*lld %s ", w->size, (long long)it->st.st_size, when);
	ls_show(c, it->name);
	if (target) {
		fputs(" -> ", stdout);
		ls_show(c, target);
	}
	putchar('\n');
	free(target);
}

static void ls_print_items(struct ls_ctx *c, const struct ls_item *items, size_t n)
{
	struct ls_widths w;
	size_t i;

	if (!c->args->longfmt) {
		for (i = 0; i < n; i++) {
			ls_show(c, items[i].name);
			putchar('\n');
		}
		return;
	}
	ls_measure(items, n, c->args->numeric, &w);
	for (i = 0; i < n; i++)
		ls_print_long(c, &items[i], &w);
}

static void ls_items_free(struct ls_item *items, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		free(items[i].path);
	free(items);
}

/* Fills an item for NAME in DIR; returns -errno (reported) to skip it. */
static int ls_item_fill(struct ls_ctx *c, const char *dir, const struct side_entry *e,
			struct ls_item *it)
{
	int need_stat = c->args->longfmt || (c->args->recursive && e->type == DT_UNKNOWN);
	int rc;

	memset(it, 0, sizeof(*it));
	it->name = e->name;
	it->path = side_path_join(dir, e->name);
	if (!it->path) {
		ls_fail_local(c, dir, ENOMEM);
		return -ENOMEM;
	}
	it->is_dir = e->type == DT_DIR;
	if (!need_stat)
		return 0;
	rc = c->side->ops->lstat(c->side, it->path, &it->st);
	if (rc < 0) {
		cli_error("ls", it->path, rc);
		c->failed = 1;
		free(it->path);
		return rc;
	}
	it->is_dir = S_ISDIR(it->st.st_mode);
	return 0;
}

static int ls_is_listed(const struct ls_ctx *c, const char *name)
{
	return c->args->all || name[0] != '.';
}

/* Items of a listing, hidden names dropped unless -a. */
static struct ls_item *ls_items_of(struct ls_ctx *c, const char *dir, const struct side_list *l,
				   size_t *n)
{
	struct ls_item *items = calloc(l->n ? l->n : 1, sizeof(*items));
	size_t i;

	*n = 0;
	if (!items)
		ls_fail_local(c, dir, ENOMEM);
	for (i = 0; items && i < l->n; i++)
		if (ls_is_listed(c, l->v[i].name) &&
		    ls_item_fill(c, dir, &l->v[i], &items[*n]) == 0)
			(*n)++;
	return items;
}

/* With -R: may directory PATH be entered below up? (cli_walk_enter) */
static int ls_enter(struct ls_ctx *c, const char *path, const struct cli_walk *up,
		    struct cli_walk *w)
{
	const struct side *s = c->side;
	char why[PATH_MAX + 128];
	struct stat st;
	int rc;

	/* The operand's symlink is followed (ls_operand_stat); below it, not. */
	rc = up ? s->ops->lstat(s, path, &st) : s->ops->stat(s, path, &st);
	if (rc < 0) {
		cli_error("ls", path, rc);
		c->failed = 1;
		return rc;
	}
	rc = cli_walk_enter(w, up, "", path, &st, why, sizeof(why));
	if (rc < 0) {
		cli_fail("ls", "", path, why);
		c->failed = 1;
	}
	return rc;
}

static void ls_dir(struct ls_ctx *c, const char *path, int header, const struct cli_walk *up)
{
	struct side_list l = {0};
	struct ls_item *items;
	struct cli_walk w = {0};
	size_t n, i;
	int rc;

	if (c->args->recursive && ls_enter(c, path, up, &w) < 0)
		return;
	rc = c->side->ops->list(c->side, path, c->args->all, &l);
	if (l.refused)
		c->failed = 1; /* names that are not names: reported, left out */
	if (rc < 0) {
		cli_error("ls", path, rc);
		c->failed = 1;
		side_list_free(&l);
		return;
	}
	if (header) {
		fputs(c->printed ? "\n" : "", stdout);
		ls_show(c, path);
		fputs(":\n", stdout);
	}
	c->printed = 1;
	items = ls_items_of(c, path, &l, &n);
	ls_print_items(c, items, n);
	for (i = 0; c->args->recursive && i < n; i++)
		if (items[i].is_dir && !side_is_dot_name(items[i].name))
			ls_dir(c, items[i].path, 1, &w);
	ls_items_free(items, n);
	side_list_free(&l);
}

/* Attributes of an operand: symlinks followed unless -l (like ls). */
static int ls_operand_stat(struct ls_ctx *c, const char *path, struct stat *st)
{
	int rc = -ENOENT;

	if (!c->args->longfmt)
		rc = c->side->ops->stat(c->side, path, st);
	if (rc < 0)
		rc = c->side->ops->lstat(c->side, path, st);
	return rc;
}

static int ls_item_cmp(const void *a, const void *b)
{
	const struct ls_item *x = a, *y = b;

	return strcmp(x->name, y->name);
}

/* Fills an item for a command-line PATH; returns -errno (reported) to skip it. */
static int ls_operand_item(struct ls_ctx *c, const char *arg, struct ls_item *it)
{
	int rc;

	memset(it, 0, sizeof(*it));
	it->name = arg;
	it->path = strdup(cli_pool_path(arg));
	if (!it->path) {
		ls_fail_local(c, arg, ENOMEM);
		return -ENOMEM;
	}
	rc = ls_operand_stat(c, it->path, &it->st);
	if (rc < 0) {
		cli_error("ls", arg, rc);
		c->failed = 1;
		free(it->path);
		return rc;
	}
	it->is_dir = S_ISDIR(it->st.st_mode);
	return 0;
}

/* Lists the operands like ls: the files together first, then each directory. */
static void ls_operands(struct ls_ctx *c, char **args, size_t n)
{
	struct ls_item *files = calloc(n, sizeof(*files));
	struct ls_item *dirs = calloc(n, sizeof(*dirs));
	size_t nfiles = 0, ndirs = 0, i;
	struct ls_item it;

	for (i = 0; files && dirs && i < n; i++) {
		if (ls_operand_item(c, args[i], &it) < 0)
			continue;
		if (it.is_dir)
			dirs[ndirs++] = it;
		else
			files[nfiles++] = it;
	}
	if (!files || !dirs)
		ls_fail_local(c, "/", ENOMEM);
	qsort(files, nfiles, sizeof(it), ls_item_cmp);
	qsort(dirs, ndirs, sizeof(it), ls_item_cmp);
	ls_print_items(c, files, nfiles);
	c->printed = nfiles > 0;
	for (i = 0; i < ndirs; i++)
		ls_dir(c, dirs[i].path, n > 1 || c->args->recursive, NULL);
	ls_items_free(files, nfiles);
	ls_items_free(dirs, ndirs);
}

static int ls_on_pool(const struct side *side, void *arg)
{
	const struct files_args *a = arg;
	struct ls_ctx c = {.side = side, .args = a, .tty = isatty(STDOUT_FILENO)};
	char root[] = "/";
	char *def[] = {root};

	if (a->n == 0)
		ls_operands(&c, def, 1);
	else
		ls_operands(&c, a->args, (size_t)a->n);
	return c.failed;
}

int cmd_ls(int argc, char **argv)
{
	struct files_args a = {0};
	int rc = files_parse("ls", ":lnaRh", ls_usage, argc, argv, &a);

	if (rc != CLI_CONTINUE)
		return rc;
	return files_run("ls", a.pool, ls_on_pool, &a);
}

/* ---- cat ---------------------------------------------------------------------------- */

struct cat_ctx {
	const struct files_args *args;
	char *buf;
	int failed;
	int stdout_broken;
};

static int write_all_stdout(const char *buf, size_t n)
{
	ssize_t w;

	while (n > 0) {
		w = write(STDOUT_FILENO, buf, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return w < 0 ? -errno : -EIO;
		buf += w;
		n -= (size_t)w;
	}
	return 0;
}

/* Streams one open pool file to stdout; reports and returns -errno on failure. */
static int cat_stream(struct cat_ctx *c, const struct side *s, const char *arg, int fd)
{
	off_t off = 0;
	ssize_t n;
	int rc;

	while ((n = s->ops->pread(s, fd, c->buf, CLI_CHUNK, off)) > 0) {
		rc = write_all_stdout(c->buf, (size_t)n);
		if (rc < 0) {
			cli_fail("cat", "", "standard output", strerror(-rc));
			c->stdout_broken = 1;
			return rc;
		}
		off += n;
	}
	if (n < 0)
		cli_error("cat", arg, (int)n);
	return (int)n;
}

static void cat_one(struct cat_ctx *c, const struct side *s, const char *arg)
{
	int fd = s->ops->open(s, cli_pool_path(arg), O_RDONLY, 0);

	if (fd < 0) {
		cli_error("cat", arg, fd);
		c->failed = 1;
		return;
	}
	if (cat_stream(c, s, arg, fd) < 0)
		c->failed = 1;
	s->ops->close(s, fd);
}

static int cat_on_pool(const struct side *side, void *arg)
{
	struct cat_ctx c = {.args = arg};
	int i;

	c.buf = malloc(CLI_CHUNK);
	if (!c.buf) {
		cli_fail("cat", "", "buffer", strerror(ENOMEM));
		return 1;
	}
	for (i = 0; i < c.args->n && !c.stdout_broken; i++)
		cat_one(&c, side, c.args->args[i]);
	free(c.buf);
	return c.failed;
}

int cmd_cat(int argc, char **argv)
{
	struct files_args a = {0};
	int rc = files_parse("cat", ":h", cat_usage, argc, argv, &a);

	if (rc != CLI_CONTINUE)
		return rc;
	if (a.n == 0)
		return cli_usage_error("cat", CLI_EXIT_USAGE, "missing PATH");
	return files_run("cat", a.pool, cat_on_pool, &a);
}
