/*
 * proc_fence_test.c -- two processes on one pool, the first killed after
 * every store and at every fence of its operation, the second going on at
 * once (docs/contracts.md, "A process that dies").
 *
 * For each operation A (create, mkdir, rename, rename over a file, rename of
 * a directory across parents, unlink, link, symlink, rmdir, append,
 * truncate): a fresh pool gets a small tree, the test process (B) mounts it
 * and forks; the child goes on with B's mount, as a PostgreSQL backend does,
 * counts the stores and fences the persist layer makes (the tracing build's
 * hooks) and kills itself with SIGKILL at the k-th (a store is seen by the
 * other process at once, fenced or not). B, still mounted, then reads the
 * tree, which must be exactly as before A or as after it (taking the turn
 * from a dead holder replays its log first), makes its own change (a new
 * file with data) and reads it back; after B unmounts, fsck must be clean.
 * k runs from 1 until A finishes first, so every store and fence of every
 * operation is a kill point. Most metadata operations commit with their
 * first store (a fingerprinted log entry), so B finds them done at every
 * point; two planted bugs (pm.h) show that a half-made change is caught.
 *
 *   proc_fence_test [OP...]     (-l lists them)
 */
#include "../api/ft_test.h"

#include <sys/wait.h>

#include "persist/pm.h"

#define MiB (1024ull * 1024)

static const char *pool;

/* ---- the child's fence counter --------------------------------------------------- */

static long events, kill_at;

/* A store the process made is seen by every other process at once, fenced or
 * not: a kill after any store is a state another process can find. */
static void on_event(void)
{
	if (++events == kill_at)
		kill(getpid(), SIGKILL);
}

static void on_fence(void *ctx)
{
	(void)ctx;
	on_event();
}

static void on_store(void *ctx, struct pm_pool *p, uint64_t off, size_t len, uint64_t copy)
{
	(void)ctx, (void)p, (void)off, (void)len, (void)copy;
	on_event();
}

static void no_flush(void *ctx, struct pm_pool *p, uint64_t off, size_t len)
{
	(void)ctx, (void)p, (void)off, (void)len;
}

static const struct pm_trace_ops counter = {
    .store = on_store,
    .flush = no_flush,
    .fence = on_fence,
};

/* ---- the operations ---------------------------------------------------------------- */

static int setup(ferrite_fs *fs)
{
	int rc = ferrite_mkdir(fs, "/d", 0755);
	rc = rc ? rc : ferrite_mkdir(fs, "/d/e", 0755);
	rc = rc ? rc : ferrite_mkdir(fs, "/x", 0755);
	rc = rc ? rc : ft_write_file(fs, "/d/f0", 1, 6000, 0);
	rc = rc ? rc : ft_write_file(fs, "/d/f1", 2, 300, 0);
	return rc;
}

static int op_create(ferrite_fs *fs)
{
	int fd = ferrite_open(fs, "/d/new", O_WRONLY | O_CREAT | O_EXCL, 0644);
	return fd < 0 ? fd : ferrite_close(fs, fd);
}
static int op_mkdir(ferrite_fs *fs)
{
	return ferrite_mkdir(fs, "/d/sub", 0755);
}
static int op_rename(ferrite_fs *fs)
{
	return ferrite_rename(fs, "/d/f0", "/d/f2", 0);
}
static int op_rename_over(ferrite_fs *fs)
{
	return ferrite_rename(fs, "/d/f0", "/d/f1", 0);
}
static int op_move_dir(ferrite_fs *fs)
{
	return ferrite_rename(fs, "/d/e", "/x/e2", 0);
}
static int op_unlink(ferrite_fs *fs)
{
	return ferrite_unlink(fs, "/d/f0");
}
static int op_link(ferrite_fs *fs)
{
	return ferrite_link(fs, "/d/f0", "/x/l");
}
static int op_symlink(ferrite_fs *fs)
{
	return ferrite_symlink(fs, "/d/f1", "/d/s");
}
static int op_rmdir(ferrite_fs *fs)
{
	return ferrite_rmdir(fs, "/d/e");
}
static int op_append(ferrite_fs *fs)
{
	return ft_write_file(fs, "/d/f1", 3, 9000, O_APPEND);
}
static int op_truncate(ferrite_fs *fs)
{
	return ferrite_truncate(fs, "/d/f0", 100);
}

/* ---- the tree, as one string: names, kinds, sizes, links, bytes ------------------- */

struct sig {
	char *s;
	size_t n, cap;
};

static void sig_add(struct sig *g, const char *fmt, ...)
{
	char line[512];
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	if (g->n + (size_t)n + 1 > g->cap) {
		g->cap = (g->n + (size_t)n + 1) * 2;
		g->s = realloc(g->s, g->cap);
	}
	memcpy(g->s + g->n, line, (size_t)n + 1);
	g->n += (size_t)n;
}

static int sig_tree(ferrite_fs *fs, const char *dir, struct sig *g)
{
	ferrite_dir *d;
	int rc = ferrite_opendir(fs, dir, &d);
	if (rc)
		return rc;
	/* sorted: the order of a directory's entries is the hash's */
	char names[64][64];
	int n = 0;
	struct ferrite_dirent ent;
	while ((rc = ferrite_readdir(d, &ent)) > 0)
		if (strcmp(ent.name, ".") && strcmp(ent.name, "..") && n < 64 &&
		    strlen(ent.name) < sizeof(names[0]))
			memcpy(names[n++], ent.name, strlen(ent.name) + 1);
	ferrite_closedir(d);
	if (rc < 0)
		return rc;
	qsort(names, (size_t)n, sizeof(names[0]), (int (*)(const void *, const void *))strcmp);
	for (int i = 0; i < n; i++) {
		char path[512];
		if (strlen(dir) > 256)
			return -ENAMETOOLONG;
		snprintf(path, sizeof(path), "%.256s/%.63s", strcmp(dir, "/") ? dir : "", names[i]);
		struct stat st;
		if ((rc = ferrite_lstat(fs, path, &st)))
			return rc;
		uint64_t h = 0;
		if (S_ISREG(st.st_mode)) {
			char *buf = malloc((size_t)st.st_size + 1);
			int fd = ferrite_open(fs, path, O_RDONLY, 0);
			long long got =
			    fd < 0 ? fd : ferrite_pread(fs, fd, buf, (size_t)st.st_size, 0);
			if (fd >= 0)
				ferrite_close(fs, fd);
			for (long long j = 0; j < got; j++)
				h = ft_mix64(h ^ (uint8_t)buf[j]);
			free(buf);
			if (got != st.st_size)
				return got < 0 ? (int)got : -EIO;
		}
		sig_add(g, "%s %o %lld %lu %llx\n", path, (unsigned)st.st_mode,
			(long long)st.st_size, (unsigned long)st.st_nlink, (unsigned long long)h);
		if (S_ISDIR(st.st_mode) && (rc = sig_tree(fs, path, g)))
			return rc;
	}
	return 0;
}

static char *signature(ferrite_fs *fs)
{
	struct sig g = {0};
	sig_add(&g, "");
	if (sig_tree(fs, "/", &g)) {
		free(g.s);
		return NULL;
	}
	return g.s;
}

/* ---- one operation, killed at each of its fences ----------------------------------- */

static int fresh(ferrite_fs **fs)
{
	struct ferrite_mkfs_opts o = {.size = 64 * MiB, .force = 1};
	FT_OK(ferrite_mkfs(pool, &o));
	FT_OK(ferrite_mount(pool, NULL, fs));
	FT_OK(setup(*fs));
	return 0;
}

/* The tree after op ran whole, from a pool set up the same way. */
static int tree_after(int (*op)(ferrite_fs *), char **after)
{
	ferrite_fs *fs;
	FT_RUN(fresh(&fs));
	FT_OK(op(fs));
	*after = signature(fs);
	FT_CHECK(*after, "reading the tree");
	FT_UNMOUNT_CLEAN(&fs, pool);
	return 0;
}

/* A planted bug (pm.h) the test must catch: the first kill point that shows
 * a tree neither before nor after ends the case, as a success. */
static int expect_bad;

static int killed_at_each_point(int (*op)(ferrite_fs *))
{
	char *after;
	FT_RUN(tree_after(op, &after));
	long kills = 0, killed_after = 0;
	for (long k = 1;; k++) {
		ferrite_fs *fs;
		FT_RUN(fresh(&fs));
		char *before = signature(fs);
		FT_CHECK(before, "reading the tree");
		fflush(NULL);
		pid_t pid = fork();
		if (pid == 0) {
			events = 0;
			kill_at = k;
			pm_trace_set(&counter);
			int rc = op(fs);
			pm_trace_set(NULL);
			_exit(rc ? 1 : 0);
		}
		int st;
		FT_CHECK(pid > 0 && waitpid(pid, &st, 0) == pid, "fork");
		int died = WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL;
		FT_CHECK(died || (WIFEXITED(st) && WEXITSTATUS(st) == 0),
			 "the operation failed in the child (status %#x)", st);
		/* B, mounted all along: the dead child's operation is whole or
		 * not there at all */
		char *now = signature(fs);
		FT_CHECK(now, "reading the tree after the child %s at point %ld",
			 died ? "died" : "ended", k);
		int is_after = !strcmp(now, after), neither = strcmp(now, before) && !is_after;
		if (neither && expect_bad) {
			printf("  the planted bug is caught at kill point %ld\n", k);
			ferrite_unmount(fs);
			free(before), free(now), free(after);
			return 0;
		}
		if (neither) {
			fprintf(stderr, "  before:\n%s  after:\n%s  found:\n%s", before, after,
				now);
			FT_CHECK(0,
				 "killed at point %ld: the tree is neither as before nor as after",
				 k);
		}
		killed_after += died && is_after;
		free(before);
		free(now);
		FT_OK(ft_write_file(fs, "/b", 77, 5000, 0));
		static char want[5000], got[5000];
		ft_fill(want, sizeof(want), 77, 0);
		int fd = ferrite_open(fs, "/b", O_RDONLY, 0);
		FT_CHECK(fd >= 0 && ferrite_pread(fs, fd, got, sizeof(got), 0) == sizeof(got) &&
			     !memcmp(got, want, sizeof(got)),
			 "B's own file after the child died at point %ld", k);
		ferrite_close(fs, fd);
		FT_UNMOUNT_CLEAN(&fs, pool);
		if (!died)
			break; /* the operation made fewer than k stores and fences */
		kills++;
	}
	printf("  %ld kill points (after each store, at each fence); %ld showed the operation "
	       "done\n",
	       kills, killed_after);
	FT_CHECK(kills > 0, "the operation made no store");
	FT_CHECK(!expect_bad, "the planted bug went unseen through %ld kill points", kills);
	free(after);
	return 0;
}

#define OP_CASE(name)                                                                              \
	static int c_##name(void)                                                                  \
	{                                                                                          \
		return killed_at_each_point(op_##name);                                            \
	}
OP_CASE(create)
OP_CASE(mkdir)
OP_CASE(rename)
OP_CASE(rename_over)
OP_CASE(move_dir)
OP_CASE(unlink)
OP_CASE(link)
OP_CASE(symlink)
OP_CASE(rmdir)
OP_CASE(append)
OP_CASE(truncate)

/* The test's test: a bug planted in the tracing build is caught. */
static int planted(const char *bug, int (*op)(ferrite_fs *))
{
	FT_OK(pm_plant(bug));
	expect_bad = 1;
	int rc = killed_at_each_point(op);
	expect_bad = 0;
	pm_plant(NULL);
	return rc;
}

static int c_catches_rename_in_place(void)
{
	return planted("rename-in-place", op_rename_over);
}

static int c_catches_size_before_data(void)
{
	return planted("size-before-data", op_append);
}

static const struct ft_case cases[] = {
    {"create", c_create, 0},
    {"mkdir", c_mkdir, 0},
    {"rename", c_rename, 0},
    {"rename_over", c_rename_over, 0},
    {"move_dir", c_move_dir, 0},
    {"unlink", c_unlink, 0},
    {"link", c_link, 0},
    {"symlink", c_symlink, 0},
    {"rmdir", c_rmdir, 0},
    {"append", c_append, 0},
    {"truncate", c_truncate, 0},
    {"catches_rename_in_place", c_catches_rename_in_place, 0},
    {"catches_size_before_data", c_catches_size_before_data, 0},
};

int main(int argc, char **argv)
{
	pool = ft_pool_path("procfence", "main");
	return ft_run(cases, sizeof(cases) / sizeof(cases[0]), argc, argv, NULL, NULL);
}
