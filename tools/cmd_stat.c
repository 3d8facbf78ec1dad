/*
 * cmd_stat.c -- `ferrite stat` and `ferrite inode`: debugfs's stat of an
 * unmounted pool -- an inode as it is stored (number, generation, type,
 * mode, links, owner, size, blocks, times, partition, directory kind,
 * attribute block) and the runs of the pool that hold its data -- through
 * ferrite_inode_info() and ferrite_inode_extents(). Everything shown comes
 * from an untrusted pool: numbers are printed as numbers, and a damaged
 * inode gives its fields and a one-line error (exit 1), never a crash.
 */
#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"

static const char stat_usage[] =
    "Usage: ferrite stat [--pool POOL] PATH...\n"
    "       ferrite stat [--pool POOL] --inode N...\n"
    "\nShow how files of an unmounted pool are stored, like debugfs's stat: the\n"
    "inode number and generation, type, mode, links, owner, size, pages, the\n"
    "four times, where the inode lies in the pool, the partition (level and\n"
    "vspace offset) and the runs of pool memory backing the data, a\n"
    "directory's kind and entries, and the extended attribute block. A\n"
    "symbolic link is shown itself, not followed. In a tiered pool only the\n"
    "attributes exist (the files live in the backing directory).\n"
    "\nOptions:\n"
    "  -i, --inode   the operands are inode numbers (st_ino, as `ls -i` or\n"
    "                `ferrite stat` show them), not paths\n"
    "  --pool POOL   pool to use (default: $FERRITE_POOL, else\n"
    "                /dev/shm/ferrite/default.pool)\n"
    "  -h, --help    show this help\n"
    "\nPATH is a path inside the pool; a leading \"pool:\" is accepted.\n"
    "Exit status: 0 shown, 1 some operand failed (or its inode is damaged),\n"
    "2 usage error.\n";

static const char inode_usage[] =
    "Usage: ferrite inode [--pool POOL] N...\n"
    "\nShow inode N of an unmounted pool as it is stored: the same view as\n"
    "`ferrite stat --inode N` (see `ferrite stat --help`).\n"
    "\nOptions:\n"
    "  --pool POOL   pool to use (default: $FERRITE_POOL, else\n"
    "                /dev/shm/ferrite/default.pool)\n"
    "  -h, --help    show this help\n"
    "\nExit status: 0 shown, 1 some inode failed (or is damaged), 2 usage error.\n";

struct stat_args {
	const char *cmd;
	const char *pool;
	int by_inode;
	int n;
	char **args;
	uint64_t *inos; /* by_inode: the parsed numbers */
};

struct stat_ctx {
	const struct stat_args *a;
	int failed;
	int shown;
};

/* ---- the command line ------------------------------------------------------------ */

static int parse_ino(const char *s, uint64_t *ino)
{
	char *end;

	if (*s < '0' || *s > '9')
		return -EINVAL;
	errno = 0;
	*ino = strtoull(s, &end, 0);
	return errno || *end || !*ino ? -EINVAL : 0;
}

/* Returns CLI_CONTINUE or the exit status. */
static int stat_parse(int argc, char **argv, struct stat_args *a, const char *usage)
{
	static const struct option longopts[] = {
	    {"inode", no_argument, NULL, 'i'},
	    {"pool", required_argument, NULL, CLI_OPT_POOL},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	int opt, i;

	cli_getopt_begin();
	while ((opt = getopt_long(argc, argv, a->by_inode ? ":h" : ":ih", longopts, NULL)) != -1) {
		if (opt == 'i' && !a->by_inode) {
			a->by_inode = 1;
		} else if (opt == CLI_OPT_POOL) {
			a->pool = optarg;
		} else if (opt == 'h') {
			fputs(usage, stdout);
			return CLI_EXIT_OK;
		} else {
			return cli_bad_option(a->cmd, opt, argv, CLI_EXIT_USAGE);
		}
	}
	a->pool = cli_pool(a->pool);
	a->n = argc - optind;
	a->args = argv + optind;
	if (a->n == 0)
		return cli_usage_error(a->cmd, CLI_EXIT_USAGE, "missing %s",
				       a->by_inode ? "inode number" : "PATH");
	if (!a->by_inode)
		return CLI_CONTINUE;
	a->inos = calloc((size_t)a->n, sizeof(*a->inos));
	if (!a->inos)
		return cli_usage_error(a->cmd, CLI_EXIT_FAILURE, "out of memory");
	for (i = 0; i < a->n; i++)
		if (parse_ino(a->args[i], &a->inos[i]) < 0)
			return cli_usage_error(a->cmd, CLI_EXIT_USAGE, "invalid inode number '%s'",
					       a->args[i]);
	return CLI_CONTINUE;
}

/* ---- the view ---------------------------------------------------------------------- */

static const char *type_name(uint32_t mode)
{
	switch (mode & S_IFMT) {
	case S_IFREG:
		return "regular file";
	case S_IFDIR:
		return "directory";
	case S_IFLNK:
		return "symbolic link";
	case S_IFCHR:
		return "character device";
	case S_IFBLK:
		return "block device";
	case S_IFIFO:
		return "fifo";
	case S_IFSOCK:
		return "socket";
	default:
		return "unknown type";
	}
}

static void line(const char *label, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void line(const char *label, const char *fmt, ...)
{
	va_list ap;

	printf("%-13s", label);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	putchar('\n');
}

/* A path from the command line or the pool: control characters as '?'. */
static void path_line(const char *path)
{
	fputs("path:        ", stdout);
	for (; *path; path++) {
		unsigned char ch = (unsigned char)*path;

		putchar(ch < 0x20 || ch == 0x7f ? '?' : ch);
	}
	putchar('\n');
}

static void time_line(const char *label, const struct timespec *ts)
{
	char buf[64];
	struct tm tm;
	time_t t = ts->tv_sec;

	if (!localtime_r(&t, &tm) || !strftime(buf, sizeof(buf), "%Y-%m-%d %H:%M:%S", &tm))
		snprintf(buf, sizeof(buf), "%lld s", (long long)ts->tv_sec);
	line(label, "%s.%09ld (%lld)", buf, (long)ts->tv_nsec, (long long)ts->tv_sec);
}

static int print_extent(void *arg, const struct ferrite_extent *e)
{
	char h[32];

	(void)arg;
	printf("  file 0x%llx-0x%llx -> pool 0x%llx-0x%llx (%s, %s)\n",
	       (unsigned long long)e->file_off, (unsigned long long)(e->file_off + e->len - 1),
	       (unsigned long long)e->pool_off, (unsigned long long)(e->pool_off + e->len - 1),
	       cli_format_size(e->len, h, sizeof(h)), e->unit ? "2 MiB units" : "pages");
	return 0;
}

static void print_inode(const struct ferrite_inode_info *in)
{
	char h[32];

	line("inode:", "%llu  generation %llu  (at pool offset %#llx)", (unsigned long long)in->ino,
	     (unsigned long long)in->generation, (unsigned long long)in->pool_off);
	line("type:", "%s%s", type_name(in->mode),
	     in->orphan ? "  (unlinked while open: released at the next mount)" : "");
	line("mode:", "%04o", in->mode & 07777);
	line("links:", "%u", in->nlink);
	line("owner:", "uid %u  gid %u", in->uid, in->gid);
	line("size:", "%llu", (unsigned long long)in->size);
	line("blocks:", "%llu (4 KiB pages backing the data)", (unsigned long long)in->blocks);
	if (S_ISCHR(in->mode) || S_ISBLK(in->mode))
		line("device:", "%#llx", (unsigned long long)in->rdev);
	time_line("access:", &in->atime);
	time_line("modify:", &in->mtime);
	time_line("change:", &in->ctime);
	time_line("birth:", &in->btime);
	if (in->level < 0)
		line("partition:", "none");
	else
		line("partition:", "L%d (%s) at vspace offset %#llx", in->level,
		     cli_format_size(in->part_bytes, h, sizeof(h)),
		     (unsigned long long)in->part_off);
	if (S_ISDIR(in->mode)) {
		if (in->dir_hashed)
			line("directory:", "hashed, in its partition; %llu entries",
			     (unsigned long long)in->dir_entries);
		else
			line("directory:", "small array at pool offset %#llx; %llu entries",
			     (unsigned long long)in->dents_off,
			     (unsigned long long)in->dir_entries);
		line("parent:", "%llu", (unsigned long long)in->parent);
	}
	if (S_ISLNK(in->mode))
		line("target:", "%s", in->inline_target ? "in the inode" : "in its partition");
	if (in->xattr_off)
		line("xattr block:", "pool offset %#llx (%s)", (unsigned long long)in->xattr_off,
		     in->xattr_bytes ? cli_format_size(in->xattr_bytes, h, sizeof(h)) : "damaged");
	else
		line("xattr block:", "none");
}

/* The inode view of one inode; path names it in messages (NULL: by number). */
static void stat_show(struct stat_ctx *c, ferrite_fs *fs, uint64_t ino, const char *path)
{
	struct ferrite_inode_info in;
	char subject[64];
	int rc;

	snprintf(subject, sizeof(subject), "inode %llu", (unsigned long long)ino);
	rc = ferrite_inode_info(fs, ino, &in);
	if (rc < 0 && rc != -EUCLEAN) {
		c->failed = 1;
		cli_error(c->a->cmd, path ? path : subject, rc);
		return;
	}
	if (c->shown++)
		putchar('\n');
	if (path)
		path_line(path);
	print_inode(&in);
	if (rc == -EUCLEAN) { /* the fields as stored; nothing followed */
		c->failed = 1;
		cli_error(c->a->cmd, path ? path : subject, rc);
		return;
	}
	puts("storage:");
	if (in.level < 0)
		puts("  (none)");
	rc = ferrite_inode_extents(fs, ino, print_extent, NULL);
	if (rc < 0) {
		c->failed = 1;
		cli_error(c->a->cmd, path ? path : subject, rc);
	}
}

/* A tiered pool: the attributes the backing file shows through the pool. */
static void stat_show_tier(struct stat_ctx *c, ferrite_fs *fs, const char *path)
{
	struct stat st;
	int rc = ferrite_lstat(fs, path, &st);

	if (rc < 0) {
		c->failed = 1;
		cli_error(c->a->cmd, path, rc);
		return;
	}
	if (c->shown++)
		putchar('\n');
	path_line(path);
	line("inode:", "%llu  (the backing file system's)", (unsigned long long)st.st_ino);
	line("type:", "%s", type_name(st.st_mode));
	line("mode:", "%04o", (unsigned)(st.st_mode & 07777));
	line("links:", "%llu", (unsigned long long)st.st_nlink);
	line("owner:", "uid %u  gid %u", (unsigned)st.st_uid, (unsigned)st.st_gid);
	line("size:", "%llu", (unsigned long long)st.st_size);
	time_line("access:", &st.st_atim);
	time_line("modify:", &st.st_mtim);
	time_line("change:", &st.st_ctim);
	line("storage:", "a tiered pool: the file lives in its backing directory; its data "
			 "passes through the cache (`ferrite stats`)");
}

/* The inode number the entry PATH names in its parent's listing (when its
 * inode is too damaged to stat, the listing still names it). 0 if none. */
static uint64_t stat_ino_from_parent(ferrite_fs *fs, const char *path)
{
	const char *slash = strrchr(path, '/');
	struct ferrite_dirent ent;
	ferrite_dir *dir;
	uint64_t ino = 0;
	char *parent;

	if (!slash || !slash[1])
		return 0;
	parent = strndup(path, (size_t)(slash - path));
	if (!parent)
		return 0;
	if (ferrite_opendir(fs, parent[0] ? parent : "/", &dir) == 0) {
		while (!ino && ferrite_readdir(dir, &ent) == 1)
			if (strcmp(ent.name, slash + 1) == 0)
				ino = ent.ino;
		ferrite_closedir(dir);
	}
	free(parent);
	return ino;
}

static int stat_run(const struct side *side, void *arg)
{
	struct stat_ctx *c = arg;
	const struct stat_args *a = c->a;
	struct ferrite_tier_info ti;
	int tier = ferrite_get_tier_info(side->fs, &ti) == 0;
	int i;

	for (i = 0; i < a->n; i++) {
		if (a->by_inode) {
			stat_show(c, side->fs, a->inos[i], NULL);
			continue;
		}
		const char *path = cli_pool_path(a->args[i]);
		struct stat st;
		int rc;

		if (tier) {
			stat_show_tier(c, side->fs, path);
			continue;
		}
		rc = ferrite_lstat(side->fs, path, &st);
		if (rc == -EUCLEAN && (st.st_ino = (ino_t)stat_ino_from_parent(side->fs, path)))
			rc = 0; /* shown as stored, with the error */
		if (rc < 0) {
			c->failed = 1;
			cli_error(a->cmd, path, rc);
			continue;
		}
		stat_show(c, side->fs, (uint64_t)st.st_ino, path);
	}
	return c->failed;
}

static int stat_main(struct stat_args *a, int argc, char **argv, const char *usage)
{
	struct stat_ctx c;
	int rc = stat_parse(argc, argv, a, usage);

	if (rc == CLI_CONTINUE) {
		memset(&c, 0, sizeof(c));
		c.a = a;
		rc = files_run(a->cmd, a->pool, stat_run, &c);
	}
	free(a->inos);
	return rc;
}

int cmd_stat(int argc, char **argv)
{
	struct stat_args a = {.cmd = "stat"};

	return stat_main(&a, argc, argv, stat_usage);
}

int cmd_inode(int argc, char **argv)
{
	struct stat_args a = {.cmd = "inode", .by_inode = 1};

	return stat_main(&a, argc, argv, inode_usage);
}
