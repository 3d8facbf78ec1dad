/*
 * cmd_cp.c -- `ferrite cp`: copies files and trees between the host and a
 * pool, or within a pool, like cp(1). Pool paths are written "pool:/path";
 * both ends are reached through the side table of side.c, so one copy loop
 * serves every direction. Data is streamed in 1 MiB chunks and the holes
 * the source reports (SEEK_DATA/SEEK_HOLE) are not written.
 *
 * The pool is input (docs/security.md): a damaged or crafted pool may hold
 * entries named "../x" or "", two entries of one name, or a directory that
 * contains itself. Listings leave out names that are not names (side.c);
 * a tree walk refuses directory loops and depths beyond CLI_MAX_DEPTH
 * (cli_walk_enter); and below the operand, cp never writes through a
 * symlink at the destination, not even one it has just made.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"

#define CP_TO_EOF ((off_t)INT64_MAX) /* copy range end meaning "until EOF" */

_Static_assert(sizeof(off_t) == 8, "64-bit file offsets");

static const char cp_usage[] =
    "Usage: ferrite cp [-r] [--pool POOL] SRC... DST\n"
    "\nCopy files between the host and a pool, like cp(1). Pool paths are\n"
    "written with a leading \"pool:\", e.g.\n"
    "  ferrite cp ./data.bin pool:/dir/\n"
    "  ferrite cp -r pool:/dir ./out\n"
    "Either side, or both, may be in the pool. Copying into an existing\n"
    "directory puts SRC inside it; with several SRCs, DST must be a directory.\n"
    "Mode bits are preserved; holes of sparse files are kept where the source\n"
    "reports them.\n"
    "\nOptions:\n"
    "  -r, -R       copy directories recursively (symlinks copied as symlinks)\n"
    "  --pool POOL  pool to use (default: $FERRITE_POOL, else\n"
    "               /dev/shm/ferrite/default.pool)\n"
    "  -h, --help   show this help\n"
    "\nExit status: 0 copied, 1 something failed, 2 usage error.\n";

struct cp_ctx {
	const struct files_args *args;
	struct side host;
	const struct side *pool;
	char *buf;
	int failed;
	const struct cli_walk *walk; /* directory being copied; NULL at an operand */
};

/* One end of a copy: a side and a path on it. */
struct cp_loc {
	const struct side *side;
	const char *path;
};

static void cp_fail_msg(struct cp_ctx *c, const struct cp_loc *l, const char *msg)
{
	cli_fail("cp", l->side->prefix, l->path, msg);
	c->failed = 1;
}

/* Reports a failed call of l's side (message from that side). */
static void cp_fail(struct cp_ctx *c, const struct cp_loc *l, int rc)
{
	cp_fail_msg(c, l, l->side->ops->errmsg(rc));
}

static int is_pool_arg(const char *arg)
{
	return strncmp(arg, "pool:", 5) == 0;
}

static struct cp_loc cp_loc_of(const struct cp_ctx *c, const char *arg)
{
	struct cp_loc l = {&c->host, arg};

	if (is_pool_arg(arg)) {
		l.side = c->pool;
		l.path = cli_pool_path(arg);
	}
	return l;
}

static int cp_write_all(const struct cp_loc *dst, int fd, const char *buf, size_t n, off_t off)
{
	ssize_t w;

	while (n > 0) {
		w = dst->side->ops->pwrite(dst->side, fd, buf, n, off);
		if (w <= 0)
			return w < 0 ? (int)w : -EIO;
		buf += w;
		n -= (size_t)w;
		off += w;
	}
	return 0;
}

/* Copies bytes [from, to) (or up to EOF); *end = the offset reached. */
static int cp_range(struct cp_ctx *c, const struct cp_loc *src, int sfd, const struct cp_loc *dst,
		    int dfd, off_t from, off_t to, off_t *end)
{
	off_t pos = from;
	ssize_t n;
	int rc;

	while (pos < to) {
		size_t want = to - pos < CLI_CHUNK ? (size_t)(to - pos) : CLI_CHUNK;

		n = src->side->ops->pread(src->side, sfd, c->buf, want, pos);
		if (n < 0) {
			cp_fail(c, src, (int)n);
			return (int)n;
		}
		if (n == 0)
			break; /* the source got shorter */
		rc = cp_write_all(dst, dfd, c->buf, (size_t)n, pos);
		if (rc < 0) {
			cp_fail(c, dst, rc);
			return rc;
		}
		pos += n;
		*end = pos;
	}
	return 0;
}

/* End of the data run starting at or after pos: [*data, *hole). Returns 0,
 * or 1 when only a hole is left. Sources without SEEK_DATA are one run. */
static int cp_next_run(const struct cp_loc *src, int sfd, off_t pos, off_t size, off_t *data,
		       off_t *hole)
{
	const struct side *s = src->side;

	*data = s->ops->lseek(s, sfd, pos, SEEK_DATA);
	if (*data == -ENXIO || (*data >= 0 && *data >= size))
		return 1;
	if (*data < 0) {
		*data = pos;
		*hole = size;
		return 0;
	}
	*hole = s->ops->lseek(s, sfd, *data, SEEK_HOLE);
	if (*hole <= *data || *hole > size)
		*hole = size;
	return 0;
}

/* Copies the contents, skipping the holes the source reports. */
static int cp_data(struct cp_ctx *c, const struct cp_loc *src, int sfd, const struct cp_loc *dst,
		   int dfd, off_t size)
{
	off_t pos = 0, end = 0, data, hole;
	int rc;

	if (size == 0) /* maybe a file that does not know its size: read to EOF */
		return cp_range(c, src, sfd, dst, dfd, 0, CP_TO_EOF, &end);
	while (pos < size && cp_next_run(src, sfd, pos, size, &data, &hole) == 0) {
		rc = cp_range(c, src, sfd, dst, dfd, data, hole, &end);
		if (rc < 0)
			return rc;
		pos = hole;
	}
	if (end >= size)
		return 0;
	rc = dst->side->ops->ftruncate(dst->side, dfd, size); /* a hole at the end */
	if (rc < 0)
		cp_fail(c, dst, rc);
	return rc;
}

static int cp_same_file(const struct cp_loc *src, const struct stat *sst, const struct cp_loc *dst)
{
	struct stat dst_st;

	if (src->side != dst->side || dst->side->ops->stat(dst->side, dst->path, &dst_st) < 0)
		return 0;
	return dst_st.st_ino == sst->st_ino && dst_st.st_dev == sst->st_dev;
}

/* Copies the data, then the mode bits, between open files; reports failures. */
static int cp_file_contents(struct cp_ctx *c, const struct cp_loc *src, int sfd,
			    const struct stat *st, const struct cp_loc *dst, int dfd)
{
	int rc = cp_data(c, src, sfd, dst, dfd, st->st_size);

	if (rc == 0 && (rc = dst->side->ops->fchmod(dst->side, dfd, st->st_mode & 07777)) < 0)
		cp_fail(c, dst, rc);
	return rc;
}

/* Inside a tree, is there a symlink at dst? (It is not written through.) */
static int cp_dst_is_link(const struct cp_ctx *c, const struct cp_loc *dst)
{
	struct stat st;

	return c->walk && dst->side->ops->lstat(dst->side, dst->path, &st) == 0 &&
	       S_ISLNK(st.st_mode);
}

static void cp_file(struct cp_ctx *c, const struct cp_loc *src, const struct stat *st,
		    const struct cp_loc *dst)
{
	const struct side *ss = src->side, *ds = dst->side;
	int sfd, dfd, rc, close_rc, nofollow = c->walk ? O_NOFOLLOW : 0;

	if (cp_same_file(src, st, dst)) {
		cp_fail_msg(c, dst, "is the same file as the source");
		return;
	}
	if (cp_dst_is_link(c, dst)) {
		cp_fail_msg(c, dst, "is a symlink; will not write through it");
		return;
	}
	sfd = ss->ops->open(ss, src->path, O_RDONLY, 0);
	if (sfd < 0) {
		cp_fail(c, src, sfd);
		return;
	}
	dfd = ds->ops->open(ds, dst->path, O_WRONLY | O_CREAT | O_TRUNC | nofollow,
			    st->st_mode & 07777);
	if (dfd < 0) {
		cp_fail(c, dst, dfd);
		ss->ops->close(ss, sfd);
		return;
	}
	rc = cp_file_contents(c, src, sfd, st, dst, dfd);
	close_rc = ds->ops->close(ds, dfd);
	if (rc == 0 && close_rc < 0)
		cp_fail(c, dst, close_rc);
	ss->ops->close(ss, sfd);
}

static void cp_symlink(struct cp_ctx *c, const struct cp_loc *src, const struct cp_loc *dst)
{
	const struct side *ds = dst->side;
	struct stat st;
	char *target;
	int rc;

	rc = side_readlink_alloc(src->side, src->path, &target);
	if (rc < 0) {
		cp_fail(c, src, rc);
		return;
	}
	rc = ds->ops->symlink(ds, target, dst->path);
	if (rc == -EEXIST && ds->ops->lstat(ds, dst->path, &st) == 0 && !S_ISDIR(st.st_mode)) {
		rc = ds->ops->unlink(ds, dst->path); /* replace a file or link, like cp */
		if (rc == 0)
			rc = ds->ops->symlink(ds, target, dst->path);
	}
	if (rc < 0)
		cp_fail(c, dst, rc);
	free(target);
}

static void cp_entry(struct cp_ctx *c, const struct cp_loc *src, const struct stat *st,
		     const struct cp_loc *dst);

/* Copies the entry NAME of directory src into directory dst. Returns
 * -ENOMEM (reported) when out of memory, else 0. */
static int cp_dir_child(struct cp_ctx *c, const struct cp_loc *src, const struct cp_loc *dst,
			const char *name)
{
	char *sp = side_path_join(src->path, name);
	char *dp = side_path_join(dst->path, name);
	struct cp_loc csrc = {src->side, sp}, cdst = {dst->side, dp};
	const struct side *s = src->side;
	struct stat st;
	int rc = 0;

	if (!sp || !dp) {
		cp_fail_msg(c, src, strerror(ENOMEM));
		rc = -ENOMEM;
	} else if ((rc = s->ops->lstat(s, csrc.path, &st)) < 0) {
		cp_fail(c, &csrc, rc);
		rc = 0; /* go on with the other entries */
	} else {
		cp_entry(c, &csrc, &st, &cdst);
	}
	free(sp);
	free(dp);
	return rc;
}

/* Copies the entries of directory src into directory dst. */
static void cp_dir_entries(struct cp_ctx *c, const struct cp_loc *src, const struct cp_loc *dst)
{
	struct side_list l = {0};
	size_t i;
	int rc;

	rc = src->side->ops->list(src->side, src->path, 0, &l);
	if (l.refused)
		c->failed = 1; /* names that are not names: reported, left out */
	if (rc < 0)
		cp_fail(c, src, rc);
	for (i = 0; rc == 0 && i < l.n; i++)
		rc = cp_dir_child(c, src, dst, l.v[i].name);
	side_list_free(&l);
}

/* Copies the entries of src into dst with src as the walk's innermost
 * directory. */
static void cp_dir_walk(struct cp_ctx *c, const struct cp_loc *src, const struct cli_walk *w,
			const struct cp_loc *dst)
{
	const struct cli_walk *outer = c->walk;

	c->walk = w;
	cp_dir_entries(c, src, dst);
	c->walk = outer;
}

static void cp_dir(struct cp_ctx *c, const struct cp_loc *src, const struct stat *st,
		   const struct cp_loc *dst)
{
	const struct side *ds = dst->side;
	mode_t mode = st->st_mode & 07777;
	char why[PATH_MAX + 128];
	struct stat dst_st;
	struct cli_walk w;
	int rc;

	if (cli_walk_enter(&w, c->walk, src->side->prefix, src->path, st, why, sizeof(why)) < 0) {
		cp_fail_msg(c, src, why);
		return;
	}
	rc = ds->ops->mkdir(ds, dst->path, mode | S_IRWXU); /* writable while filling */
	/* Below the operand a symlink at dst is not followed (cp_dst_is_link). */
	if (rc == -EEXIST && (c->walk ? ds->ops->lstat(ds, dst->path, &dst_st)
				      : ds->ops->stat(ds, dst->path, &dst_st)) == 0) {
		if (S_ISDIR(dst_st.st_mode))
			cp_dir_walk(c, src, &w, dst); /* merge into the existing directory */
		else
			cp_fail_msg(c, dst, "exists and is not a directory");
		return;
	}
	if (rc < 0) {
		cp_fail(c, dst, rc);
		return;
	}
	cp_dir_walk(c, src, &w, dst);
	rc = ds->ops->chmod(ds, dst->path, mode);
	if (rc < 0)
		cp_fail(c, dst, rc);
}

static void cp_entry(struct cp_ctx *c, const struct cp_loc *src, const struct stat *st,
		     const struct cp_loc *dst)
{
	if (S_ISREG(st->st_mode))
		cp_file(c, src, st, dst);
	else if (S_ISDIR(st->st_mode))
		cp_dir(c, src, st, dst);
	else if (S_ISLNK(st->st_mode))
		cp_symlink(c, src, dst);
	else
		cp_fail_msg(c, src, "not a regular file, directory or symlink; skipped");
}

/* Lexically normalised absolute pool path ("/a/b": no ".", "..", "//"). */
static char *pool_path_normalize(const char *path)
{
	char *out = malloc(strlen(path) + 2), *slash;
	size_t len = 0, n;

	if (!out)
		return NULL;
	while (*path) {
		path += strspn(path, "/");
		n = strcspn(path, "/");
		if (n == 2 && strncmp(path, "..", 2) == 0) {
			out[len] = '\0';
			slash = strrchr(out, '/');
			len = slash ? (size_t)(slash - out) : 0;
		} else if (n > 0 && !(n == 1 && path[0] == '.')) {
			out[len++] = '/';
			memcpy(out + len, path, n);
			len += n;
		}
		path += n;
	}
	if (len == 0)
		out[len++] = '/';
	out[len] = '\0';
	return out;
}

/* Would copying directory src to dst copy it into itself? (pool to pool) */
static int cp_into_itself(const struct cp_loc *src, const struct cp_loc *dst)
{
	char *s, *d;
	size_t n;
	int inside;

	if (src->side != dst->side)
		return 0;
	s = pool_path_normalize(src->path);
	d = pool_path_normalize(dst->path);
	n = s ? strlen(s) : 0;
	inside = !s || !d || strcmp(s, "/") == 0 ||
		 (strncmp(s, d, n) == 0 && (d[n] == '\0' || d[n] == '/'));
	free(s);
	free(d);
	return inside;
}

/* Last component of PATH, trailing slashes ignored; "" for "/". Malloc'ed. */
static char *path_last_component(const char *path)
{
	size_t end = strlen(path), start;

	while (end > 0 && path[end - 1] == '/')
		end--;
	start = end;
	while (start > 0 && path[start - 1] != '/')
		start--;
	return strndup(path + start, end - start);
}

/* Where SRC goes: inside DST when DST is a directory ("." and "/" merge). */
static char *cp_target_path(const struct cp_loc *src, const struct cp_loc *dst, int dst_is_dir)
{
	char *base, *path;

	if (!dst_is_dir)
		return strdup(dst->path);
	base = path_last_component(src->path);
	if (!base)
		return NULL;
	if (base[0] == '\0' || side_is_dot_name(base))
		path = strdup(dst->path);
	else
		path = side_path_join(dst->path, base);
	free(base);
	return path;
}

static int ends_with_slash(const char *path)
{
	size_t n = strlen(path);

	return n > 0 && path[n - 1] == '/';
}

/* Attributes of a SRC operand: with -r symlinks are copied as links, else followed. */
static int cp_operand_stat(const struct cp_ctx *c, const struct cp_loc *src, struct stat *st)
{
	const struct side *s = src->side;

	if (c->args->recursive)
		return s->ops->lstat(s, src->path, st);
	return s->ops->stat(s, src->path, st);
}

/* Copies one SRC operand to DST. */
static void cp_operand(struct cp_ctx *c, const struct cp_loc *src, const struct cp_loc *dst,
		       int dst_is_dir)
{
	struct cp_loc target = {dst->side, NULL};
	struct stat st;
	char *path;
	int rc;

	rc = cp_operand_stat(c, src, &st);
	if (rc < 0) {
		cp_fail(c, src, rc);
		return;
	}
	if (S_ISDIR(st.st_mode) && !c->args->recursive) {
		cp_fail_msg(c, src, "is a directory (use -r to copy it)");
		return;
	}
	if (!dst_is_dir && !S_ISDIR(st.st_mode) && ends_with_slash(dst->path)) {
		cp_fail_msg(c, dst, strerror(ENOTDIR));
		return;
	}
	path = cp_target_path(src, dst, dst_is_dir);
	target.path = path;
	if (!path)
		cp_fail_msg(c, dst, strerror(ENOMEM));
	else if (S_ISDIR(st.st_mode) && cp_into_itself(src, &target))
		cp_fail_msg(c, src, "cannot copy a directory into itself");
	else
		cp_entry(c, src, &st, &target);
	free(path);
}

static int cp_is_dir(const struct cp_loc *l)
{
	struct stat st;

	return l->side->ops->stat(l->side, l->path, &st) == 0 && S_ISDIR(st.st_mode);
}

static int cp_on_pool(const struct side *pool, void *arg)
{
	struct cp_ctx c = {.args = arg, .pool = pool};
	int i, nsrc = c.args->n - 1, dst_is_dir;
	struct cp_loc dst, src;

	side_init_host(&c.host);
	dst = cp_loc_of(&c, c.args->args[nsrc]);
	dst_is_dir = cp_is_dir(&dst);
	if (nsrc > 1 && !dst_is_dir) {
		cp_fail_msg(&c, &dst, "target is not a directory (several sources given)");
		return 1;
	}
	c.buf = malloc(CLI_CHUNK);
	if (!c.buf) {
		cp_fail_msg(&c, &dst, strerror(ENOMEM));
		return 1;
	}
	for (i = 0; i < nsrc; i++) {
		src = cp_loc_of(&c, c.args->args[i]);
		cp_operand(&c, &src, &dst, dst_is_dir);
	}
	free(c.buf);
	return c.failed;
}

static int cp_any_pool_arg(const struct files_args *a)
{
	int i;

	for (i = 0; i < a->n; i++)
		if (is_pool_arg(a->args[i]))
			return 1;
	return 0;
}

int cmd_cp(int argc, char **argv)
{
	struct files_args a = {0};
	int rc = files_parse("cp", ":rRh", cp_usage, argc, argv, &a);

	if (rc != CLI_CONTINUE)
		return rc;
	if (a.n < 2)
		return cli_usage_error("cp", CLI_EXIT_USAGE, a.n ? "missing DST after '%s'" : "%s",
				       a.n ? a.args[0] : "missing SRC and DST");
	if (!cp_any_pool_arg(&a))
		return cli_usage_error("cp", CLI_EXIT_USAGE,
				       "no pool path given (write pool paths as pool:/path)");
	return files_run("cp", a.pool, cp_on_pool, &a);
}
