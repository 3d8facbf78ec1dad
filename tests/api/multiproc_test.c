/*
 * multiproc_test.c -- one pm pool mounted by several processes at once
 * (docs/contracts.md#processes, src/space/share.c): each sees the others'
 * changes on return, a forked child goes on with what it inherited, an
 * unlinked file lives while any process holds it, the first mount's
 * recovery runs before any other process's call, and what every process
 * of a pool leaves when all are killed goes with the next check (the kill
 * test of many processes is multiproc_kill_test.c).
 *
 *   ./multiproc_test [CASE...]
 */
#include "ft_test.h"

#include <pthread.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/prctl.h>

#include "fs/fs.h"
#include "space/share_impl.h"

#define MiB (1024ull * 1024)

static const char *pool;

/* one byte through a pipe: the two processes' steps in order */
static void step_send(int fd)
{
	char c = 1;
	(void)!write(fd, &c, 1);
}

static int step_wait(int fd)
{
	char c;
	return read(fd, &c, 1) == 1 ? 0 : -1;
}

/* ---- two mounts see each other at once ------------------------------------------ */

struct pingpong {
	int to_child[2], to_parent[2];
};

/* A child running fn with its ends of the pipes (child_mount closes the
 * others); the parent keeps its own. The child's pid, or -1 without pipes. */
static pid_t spawn_paired(int (*fn)(void *), struct pingpong *pp)
{
	if (pipe(pp->to_child) || pipe(pp->to_parent))
		return -1;
	pid_t pid = ft_spawn(fn, pp);
	close(pp->to_child[0]);
	close(pp->to_parent[1]);
	return pid;
}

/* A child's side of the pipes, and a mount of its own. */
static ferrite_fs *child_mount(struct pingpong *pp)
{
	close(pp->to_child[1]);
	close(pp->to_parent[0]);
	ferrite_fs *fs;
	return ferrite_mount(pool, NULL, &fs) ? NULL : fs;
}

static int pingpong_child(void *arg)
{
	struct pingpong *pp = arg;
	ferrite_fs *fs = child_mount(pp);
	if (!fs)
		return -1;
	for (int i = 0; i < 50; i++) {
		char a[64], b[64];
		if (step_wait(pp->to_child[0]))
			return -1;
		snprintf(a, sizeof(a), "/pp/p%d", i);
		snprintf(b, sizeof(b), "/pp/c%d", i);
		/* the parent's file, grown across windows: every byte as written */
		if (ft_read_check(fs, a, (uint64_t)i, (size_t)(i + 1) * 64 * 1024))
			return -1;
		if (ft_write_file(fs, b, 1000 + (uint64_t)i, (size_t)(i + 1) * 48 * 1024, 0))
			return -1;
		step_send(pp->to_parent[1]);
	}
	return ferrite_unmount(fs) ? -1 : 0;
}

static int c_pingpong(void)
{
	/* the child first: one that forks a mounted process inherits its mount */
	struct pingpong pp;
	pid_t pid = spawn_paired(pingpong_child, &pp);
	FT_CHECK(pid > 0, "pipe or fork failed");
	ferrite_fs *fs;
	FT_OK(ferrite_mount(pool, NULL, &fs));
	FT_OK(ferrite_mkdir(fs, "/pp", 0755));
	for (int i = 0; i < 50; i++) {
		char a[64], b[64];
		snprintf(a, sizeof(a), "/pp/p%d", i);
		snprintf(b, sizeof(b), "/pp/c%d", i);
		FT_OK(ft_write_file(fs, a, (uint64_t)i, (size_t)(i + 1) * 64 * 1024, 0));
		step_send(pp.to_child[1]);
		FT_CHECK(step_wait(pp.to_parent[0]) == 0, "child gave up at step %d", i);
		FT_RUN(ft_read_check(fs, b, 1000 + (uint64_t)i, (size_t)(i + 1) * 48 * 1024));
	}
	FT_EQ(ft_reap(pid), 0);
	FT_UNMOUNT_CLEAN(&fs, pool);
	return 0;
}

/* ---- a forked child goes on with what it inherited --------------------------------- */

static int c_fork_inherits(void)
{
	ferrite_fs *fs;
	FT_OK(ferrite_mount(pool, NULL, &fs));
	int fd = FT_OK(ferrite_open(fs, "/inherit", O_RDWR | O_CREAT | O_TRUNC, 0644));
	FT_OK(ft_write_file(fs, "/before", 7, 8192, 0));
	fflush(NULL);
	pid_t pid = fork();
	if (pid == 0) {
		ft_npools = 0;
		/* the parent's descriptor and mount, 5 MiB through it (grows past
		 * several windows, so pages move while the parent has them mapped) */
		char *buf = malloc(5 * MiB);
		ft_fill(buf, 5 * MiB, 42, 0);
		int bad = ferrite_pwrite(fs, fd, buf, 5 * MiB, 0) != (ssize_t)(5 * MiB);
		bad |= ft_read_check(fs, "/before", 7, 8192) != 0;
		bad |= ft_write_file(fs, "/child", 43, 100000, 0) != 0;
		_exit(bad);
	}
	FT_EQ(ft_reap(pid), 0);
	char *buf = malloc(5 * MiB + 1);
	FT_EQ(ferrite_pread(fs, fd, buf, 5 * MiB + 1, 0), (long long)(5 * MiB));
	FT_CHECK(ft_verify(buf, 5 * MiB, 42, 0) < 0, "the child's writes read back wrong");
	free(buf);
	FT_RUN(ft_read_check(fs, "/child", 43, 100000));
	/* the inherited descriptor counted once more while the child lived:
	 * an unlinked file must be released when the parent closes it */
	struct statvfs a, b;
	FT_OK(ferrite_unlink(fs, "/inherit"));
	FT_OK(ferrite_statvfs(fs, &a));
	FT_OK(ferrite_close(fs, fd));
	FT_OK(ferrite_statvfs(fs, &b));
	FT_CHECK((b.f_bfree - a.f_bfree) * b.f_frsize >= 5 * MiB,
		 "closing the unlinked 5 MiB file freed %lld bytes",
		 (long long)((b.f_bfree - a.f_bfree) * b.f_frsize));
	FT_UNMOUNT_CLEAN(&fs, pool);
	return 0;
}

/* ---- a description is one, in every process that holds it ------------------------ */

static int expect_file(ferrite_fs *fs, const char *path, const char *want)
{
	char got[64] = "";
	int fd = ferrite_open(fs, path, O_RDONLY, 0);
	ssize_t n = fd >= 0 ? ferrite_pread(fs, fd, got, sizeof(got) - 1, 0) : fd;
	if (fd >= 0)
		ferrite_close(fs, fd);
	if (n != (ssize_t)strlen(want) || memcmp(got, want, strlen(want))) {
		fprintf(stderr, "%s holds \"%.*s\", not \"%s\"\n", path, n > 0 ? (int)n : 0, got,
			want);
		return -1;
	}
	return 0;
}

/* A spawned process that mounts the pool itself and imports a description
 * by token: its writes move the exporter's offset. */
static int import_child(void *arg)
{
	struct pingpong *pp = arg;
	close(pp->to_child[1]);
	close(pp->to_parent[0]);
	uint32_t token;
	if (read(pp->to_child[0], &token, sizeof(token)) != sizeof(token))
		return 1;
	ferrite_fs *fs;
	if (ferrite_mount(pool, NULL, &fs))
		return 1;
	int fd = ferrite_open(fs, "/log", O_WRONLY, 0);
	int bad = fd < 0 || ferrite_fd_share(fs, fd, FERRITE_FD_IMPORT, &token) != 0;
	bad |= !bad && ferrite_lseek(fs, fd, 0, SEEK_CUR) != 8;
	bad |= !bad && ferrite_write(fs, fd, "ee", 2) != 2;
	ferrite_close(fs, fd);
	bad |= ferrite_unmount(fs) != 0;
	step_send(pp->to_parent[1]);
	return bad;
}

static int c_shared_offsets(void)
{
	struct pingpong pp;
	pid_t importer = spawn_paired(import_child, &pp); /* before the parent mounts */
	FT_CHECK(importer > 0, "pipe or fork failed");
	ferrite_fs *fs;
	FT_OK(ferrite_mount(pool, NULL, &fs));
	int fd = FT_OK(ferrite_open(fs, "/log", O_WRONLY | O_CREAT | O_TRUNC, 0644));
	FT_EQ(ferrite_write(fs, fd, "a", 1), 1);
	FT_OK(ferrite_flock(fs, fd, LOCK_EX));
	/* a child writes through the description it inherited, and sets
	 * O_APPEND on it: the parent's next write lands after the child's */
	fflush(NULL);
	pid_t pid = fork();
	if (pid == 0) {
		ft_npools = 0;
		int bad = ferrite_write(fs, fd, "bb", 2) != 2;
		bad |= ferrite_lseek(fs, fd, 0, SEEK_CUR) != 3;
		bad |= ferrite_setfl(fs, fd, O_APPEND) != 0;
		bad |= ferrite_close(fs, fd) != 0; /* the parent still holds it */
		_exit(bad);
	}
	FT_EQ(ft_reap(pid), 0);
	FT_EQ(ferrite_lseek(fs, fd, 0, SEEK_CUR), 3);
	FT_CHECK(ferrite_getfl(fs, fd) & O_APPEND, "O_APPEND set by the child is not seen");
	FT_EQ(ferrite_write(fs, fd, "ccc", 3), 3);
	/* the child's close left the description's flock in place */
	int other = FT_OK(ferrite_open(fs, "/log", O_RDONLY, 0));
	FT_EQ(ferrite_flock(fs, other, LOCK_EX | LOCK_NB), -EWOULDBLOCK);
	/* the parent closes at once; the child goes on with it alone */
	int go[2];
	FT_OK(pipe(go));
	fflush(NULL);
	pid = fork();
	if (pid == 0) {
		ft_npools = 0;
		close(go[1]);
		int bad = step_wait(go[0]) != 0;
		bad |= ferrite_lseek(fs, fd, 0, SEEK_CUR) != 6;
		bad |= ferrite_write(fs, fd, "dd", 2) != 2;
		bad |= ferrite_flock(fs, fd, LOCK_UN) != 0;
		_exit(bad);
	}
	close(go[0]);
	FT_OK(ferrite_close(fs, fd));
	step_send(go[1]);
	close(go[1]);
	FT_EQ(ft_reap(pid), 0);
	FT_OK(ferrite_flock(fs, other, LOCK_EX | LOCK_NB)); /* the last holder let go */
	FT_OK(ferrite_close(fs, other));
	FT_RUN(expect_file(fs, "/log", "abbcccdd"));
	/* a description passed by token to a process with a mount of its own */
	fd = FT_OK(ferrite_open(fs, "/log", O_WRONLY, 0));
	FT_EQ(ferrite_lseek(fs, fd, 8, SEEK_SET), 8);
	uint32_t token = 0;
	FT_OK(ferrite_fd_share(fs, fd, FERRITE_FD_EXPORT, &token));
	FT_CHECK(token != 0, "a token of 0");
	FT_EQ(write(pp.to_child[1], &token, sizeof(token)), (long long)sizeof(token));
	FT_OK(step_wait(pp.to_parent[0]));
	FT_EQ(ft_reap(importer), 0);
	FT_EQ(ferrite_lseek(fs, fd, 0, SEEK_CUR), 10);
	FT_EQ(ferrite_write(fs, fd, "f", 1), 1);
	FT_OK(ferrite_close(fs, fd));
	FT_RUN(expect_file(fs, "/log", "abbcccddeef"));
	/* a token whose description ended is refused */
	fd = FT_OK(ferrite_open(fs, "/log", O_WRONLY, 0));
	FT_EQ(ferrite_fd_share(fs, fd, FERRITE_FD_IMPORT, &token), -ESTALE);
	FT_OK(ferrite_close(fs, fd));
	close(pp.to_child[1]);
	close(pp.to_parent[0]);
	FT_UNMOUNT_CLEAN(&fs, pool);
	return 0;
}

/* ---- an unlinked file lives while any process holds it --------------------------- */

#define ORPHAN_LEN (3 * 1024 * 1024)

static int orphan_child(void *arg)
{
	struct pingpong *pp = arg;
	ferrite_fs *fs = child_mount(pp);
	if (!fs || ft_write_file(fs, "/orphan", 9, ORPHAN_LEN, 0))
		return -1;
	int fd = ferrite_open(fs, "/orphan", O_RDONLY, 0);
	if (fd < 0)
		return -1;
	step_send(pp->to_parent[1]); /* the parent unlinks it now */
	if (step_wait(pp->to_child[0]))
		return -1;
	char *buf = malloc(ORPHAN_LEN);
	int bad = ferrite_pread(fs, fd, buf, ORPHAN_LEN, 0) != ORPHAN_LEN ||
		  ft_verify(buf, ORPHAN_LEN, 9, 0) >= 0;
	free(buf);
	bad |= ferrite_close(fs, fd) != 0;
	step_send(pp->to_parent[1]);
	return bad | (ferrite_unmount(fs) != 0);
}

static int c_orphan_shared(void)
{
	struct pingpong pp;
	pid_t pid = spawn_paired(orphan_child, &pp);
	FT_CHECK(pid > 0, "pipe or fork failed");
	FT_CHECK(step_wait(pp.to_parent[0]) == 0, "child failed to open");
	ferrite_fs *fs;
	FT_OK(ferrite_mount(pool, NULL, &fs));
	struct statvfs mid, after;
	FT_OK(ferrite_unlink(fs, "/orphan"));
	/* the name is free again for a new file */
	FT_OK(ft_write_file(fs, "/orphan", 10, 5000, 0));
	/* checked while in use: the other process's orphan is no damage */
	FT_EQ(ferrite_check(fs, NULL, NULL), FERRITE_FSCK_CLEAN);
	FT_OK(ferrite_statvfs(fs, &mid));
	step_send(pp.to_child[1]);
	FT_CHECK(step_wait(pp.to_parent[0]) == 0, "child failed to read the unlinked file");
	FT_EQ(ft_reap(pid), 0);
	FT_OK(ferrite_statvfs(fs, &after));
	FT_CHECK((after.f_bfree - mid.f_bfree) * after.f_frsize >= ORPHAN_LEN,
		 "the other process's last close freed %lld bytes",
		 (long long)((after.f_bfree - mid.f_bfree) * after.f_frsize));
	FT_RUN(ft_read_check(fs, "/orphan", 10, 5000));
	FT_UNMOUNT_CLEAN(&fs, pool);
	return 0;
}

/* ---- the first mount recovers before anyone else runs ---------------------------- */

#define ORPHANS	   2000
#define RACE_FILES 400

/* Dies holding ORPHANS unlinked files open: the next first mount releases
 * them, a transaction each. */
static int orphans_left_child(void *arg)
{
	(void)arg;
	ferrite_fs *fs;
	if (ferrite_mount(pool, NULL, &fs) || ferrite_mkdir(fs, "/o", 0755))
		return -1;
	char path[64];
	for (int i = 0; i < ORPHANS; i++) {
		snprintf(path, sizeof(path), "/o/%d", i);
		int fd = ferrite_open(fs, path, O_CREAT | O_RDWR, 0644);
		if (fd < 0 || ferrite_pwrite(fs, fd, "x", 1, 0) != 1 || ferrite_unlink(fs, path))
			return -1;
	}
	kill(getpid(), SIGKILL);
	return -1;
}

struct racer {
	int go[2];
	int id;
};

/* Mounts at the same moment as another racer and creates, checks and
 * removes files at once: whichever mounts second must not run a call
 * beside the first one's orphan release (share.c H5). */
static int racer_child(void *arg)
{
	struct racer *r = arg;
	close(r->go[1]);
	char c;
	if (read(r->go[0], &c, 1) != 1)
		return -1;
	ferrite_fs *fs;
	if (ferrite_mount(pool, NULL, &fs))
		return -1;
	char path[64];
	struct stat st;
	for (int i = 0; i < RACE_FILES; i++) {
		snprintf(path, sizeof(path), "/r/%d-%d", r->id, i);
		int fd = ferrite_open(fs, path, O_CREAT | O_EXCL | O_WRONLY, 0644);
		if (fd < 0 || ferrite_close(fs, fd) || ferrite_stat(fs, path, &st))
			return -1;
		if (i % 2 && ferrite_unlink(fs, path))
			return -1;
	}
	return ferrite_unmount(fs) != 0;
}

static int c_recovery_first(void)
{
	ferrite_fs *fs;
	FT_OK(ferrite_mount(pool, NULL, &fs));
	FT_OK(ferrite_mkdir(fs, "/r", 0755));
	FT_OK(ferrite_unmount(fs));
	pid_t dier = ft_spawn(orphans_left_child, NULL);
	FT_CHECK(dier > 0, "fork failed");
	int st;
	FT_CHECK(waitpid(dier, &st, 0) == dier && WIFSIGNALED(st),
		 "the child leaving orphans did not die by its signal");
	struct racer r[2];
	pid_t pid[2];
	int go[2];
	FT_CHECK(pipe(go) == 0, "pipe");
	for (int k = 0; k < 2; k++) {
		r[k] = (struct racer){.go = {go[0], go[1]}, .id = k};
		pid[k] = ft_spawn(racer_child, &r[k]);
		FT_CHECK(pid[k] > 0, "fork failed");
	}
	close(go[0]);
	FT_CHECK(write(go[1], "gg", 2) == 2, "pipe");
	close(go[1]);
	for (int k = 0; k < 2; k++)
		FT_EQ(ft_reap(pid[k]), 0);
	FT_OK(ferrite_mount(pool, NULL, &fs));
	struct stat sb;
	char path[64];
	for (int k = 0; k < 2; k++)
		for (int i = 0; i < RACE_FILES; i++) {
			snprintf(path, sizeof(path), "/r/%d-%d", k, i);
			int rc = ferrite_stat(fs, path, &sb);
			FT_CHECK(i % 2 ? rc == -ENOENT : rc == 0, "%s: %s", path, ft_errname(rc));
		}
	FT_UNMOUNT_CLEAN(&fs, pool);
	FT_EQ(ferrite_fsck(pool, 0, NULL, NULL, NULL, NULL), FERRITE_FSCK_CLEAN);
	return 0;
}

/* ---- mounts and unmounts at once never refuse each other --------------------------- */

#define CHURN_ROUNDS 300

static int churn_child(void *arg)
{
	(void)arg;
	for (int i = 0; i < CHURN_ROUNDS; i++) {
		ferrite_fs *fs;
		int rc = ferrite_mount(pool, NULL, &fs);
		if (rc) {
			fprintf(stderr, "mount %d: %s: %s\n", i, ft_errname(rc), ferrite_errmsg());
			return -1;
		}
		if (ferrite_unmount(fs))
			return -1;
	}
	return 0;
}

/* Four processes mount and unmount the pool over and over: whoever is
 * last out removes the coordination file while others attach, and none
 * may take another for a process that holds the pool alone (EBUSY). */
static int c_mount_churn(void)
{
	pid_t pid[4];
	for (int k = 0; k < 4; k++) {
		pid[k] = ft_spawn(churn_child, NULL);
		FT_CHECK(pid[k] > 0, "fork failed");
	}
	for (int k = 0; k < 4; k++)
		FT_EQ(ft_reap(pid[k]), 0);
	FT_EQ(ferrite_fsck(pool, 0, NULL, NULL, NULL, NULL), FERRITE_FSCK_CLEAN);
	return 0;
}

/* ---- the check of a pool in use ------------------------------------------------- */

struct problems {
	int n, link_count;
};

static void note_problem(void *arg, const char *line)
{
	struct problems *p = arg;
	p->n++;
	p->link_count |= strstr(line, "link count") != NULL;
}

static int held_child(void *arg)
{
	struct pingpong *pp = arg;
	ferrite_fs *fs = child_mount(pp);
	if (!fs || ft_write_file(fs, "/held", 5, 70000, 0))
		return -1;
	step_send(pp->to_parent[1]); /* the parent checks while this mount lasts */
	if (step_wait(pp->to_child[0]))
		return -1;
	return ft_read_check(fs, "/held", 5, 70000) | (ferrite_unmount(fs) != 0);
}

/* ferrite_check through one process's mount while another holds the pool:
 * clean, and damage planted by hand is found (the check can fail). */
static int c_online_check(void)
{
	struct pingpong pp;
	pid_t pid = spawn_paired(held_child, &pp);
	FT_CHECK(pid > 0, "pipe or fork failed");
	FT_CHECK(step_wait(pp.to_parent[0]) == 0, "child failed to write /held");
	FT_ERR(ferrite_fsck(pool, 0, NULL, NULL, NULL, NULL), EBUSY);
	ferrite_fs *fs;
	FT_OK(ferrite_mount(pool, NULL, &fs));
	struct problems seen = {0};
	FT_EQ(ferrite_check(fs, note_problem, &seen), FERRITE_FSCK_CLEAN);
	FT_EQ(seen.n, 0);
	struct stat st;
	FT_OK(ferrite_stat(fs, "/held", &st));
	struct fr_inode *ip = ino_ptr(fs, st.st_ino);
	ip->i_nlink += 1; /* a stray store, as a bug would make it */
	FT_EQ(ferrite_check(fs, note_problem, &seen), FERRITE_FSCK_UNCORRECTED);
	FT_CHECK(seen.link_count, "the wrong link count was not reported (%d lines)", seen.n);
	ip->i_nlink -= 1;
	FT_EQ(ferrite_check(fs, NULL, NULL), FERRITE_FSCK_CLEAN);
	step_send(pp.to_child[1]);
	FT_EQ(ft_reap(pid), 0);
	FT_UNMOUNT_CLEAN(&fs, pool);
	return 0;
}

/* ---- advisory locks between processes --------------------------------------------- */

static int locks_child(void *arg)
{
	struct pingpong *pp = arg;
	ferrite_fs *fs = child_mount(pp);
	if (!fs)
		return 10;
	int fd = ferrite_open(fs, "/locked", O_RDWR, 0);
	if (fd < 0)
		return 11;
	/* 1: the parent holds a write lock on [0, 100) and a flock */
	if (step_wait(pp->to_child[0]))
		return 12;
	struct flock fl = {.l_type = F_RDLCK, .l_whence = SEEK_SET, .l_start = 50, .l_len = 10};
	if (ferrite_fcntl_lock(fs, fd, F_SETLK, &fl) != -EAGAIN)
		return 13;
	fl = (struct flock){.l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = 0, .l_len = 1};
	if (ferrite_fcntl_lock(fs, fd, F_GETLK, &fl) || fl.l_type != F_WRLCK || fl.l_start != 0 ||
	    fl.l_len != 100 || fl.l_pid != getppid())
		return 14;
	fl = (struct flock){.l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = 100, .l_len = 10};
	if (ferrite_fcntl_lock(fs, fd, F_SETLK, &fl)) /* beside it: free */
		return 15;
	if (ferrite_flock(fs, fd, LOCK_SH | LOCK_NB) != -EWOULDBLOCK)
		return 16;
	step_send(pp->to_parent[1]);
	/* 2: waits until the parent's close drops its record lock */
	fl = (struct flock){.l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = 0, .l_len = 100};
	if (ferrite_fcntl_lock(fs, fd, F_SETLKW, &fl))
		return 17;
	if (ferrite_flock(fs, fd, LOCK_EX)) /* and the flock, once its description closed */
		return 18;
	step_send(pp->to_parent[1]);
	/* 3: dies holding both; the parent must get them */
	if (step_wait(pp->to_child[0]))
		return 19;
	_exit(0);
}

static int c_locks(void)
{
	struct pingpong pp;
	ferrite_fs *fs;
	{ /* the file exists before the child opens it */
		FT_OK(ferrite_mount(pool, NULL, &fs));
		FT_OK(ft_write_file(fs, "/locked", 3, 4096, 0));
		FT_OK(ferrite_unmount(fs));
	}
	pid_t pid = spawn_paired(locks_child, &pp);
	FT_CHECK(pid > 0, "pipe or fork failed");
	FT_OK(ferrite_mount(pool, NULL, &fs));
	int fd = FT_OK(ferrite_open(fs, "/locked", O_RDWR, 0));
	int fd2 = FT_OK(ferrite_open(fs, "/locked", O_RDONLY, 0));
	struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = 0, .l_len = 100};
	FT_OK(ferrite_fcntl_lock(fs, fd, F_SETLK, &fl));
	FT_OK(ferrite_flock(fs, fd, LOCK_EX | LOCK_NB));
	step_send(pp.to_child[1]);
	FT_CHECK(step_wait(pp.to_parent[0]) == 0, "child: step 1 failed (status %d)", ft_reap(pid));
	/* POSIX: closing another descriptor of the file drops the record lock;
	 * the flock goes with the last descriptor of its description */
	FT_OK(ferrite_close(fs, fd2));
	FT_OK(ferrite_close(fs, fd));
	FT_CHECK(step_wait(pp.to_parent[0]) == 0, "child: step 2 failed (status %d)", ft_reap(pid));
	fd = FT_OK(ferrite_open(fs, "/locked", O_RDWR, 0));
	fl = (struct flock){.l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = 0, .l_len = 100};
	FT_EQ(ferrite_fcntl_lock(fs, fd, F_SETLK, &fl), -EAGAIN);
	FT_EQ(ferrite_flock(fs, fd, LOCK_EX | LOCK_NB), -EWOULDBLOCK);
	step_send(pp.to_child[1]);
	FT_EQ(ft_reap(pid), 0);
	/* the child is gone: its locks are given back when the wait finds it so */
	fl = (struct flock){.l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = 0, .l_len = 100};
	FT_OK(ferrite_fcntl_lock(fs, fd, F_SETLKW, &fl));
	FT_OK(ferrite_flock(fs, fd, LOCK_EX));
	FT_OK(ferrite_close(fs, fd));
	FT_UNMOUNT_CLEAN(&fs, pool);
	return 0;
}

/* ---- a file mapped by another process is never freed under its mapping ----------- */

#define MAP_LEN (4 * 1024 * 1024)

static int mapper_child(void *arg)
{
	struct pingpong *pp = arg;
	ferrite_fs *fs = child_mount(pp);
	if (!fs)
		return 10;
	int fd = ferrite_open(fs, "/mapped", O_RDWR, 0);
	void *m = NULL;
	if (fd < 0 ||
	    ferrite_mmap(fs, fd, NULL, MAP_LEN, PROT_READ | PROT_WRITE, MAP_SHARED, 0, &m))
		return 11;
	memset(m, 0x11, MAP_LEN);
	step_send(pp->to_parent[1]); /* the parent shrinks the file and fills another */
	if (step_wait(pp->to_child[0]))
		return 12;
	/* stores through the whole old mapping: they must land in pages that
	 * are still this file's, never in the parent's new file */
	memset(m, 0xee, MAP_LEN);
	ferrite_msync(fs, m, MAP_LEN, MS_SYNC);
	step_send(pp->to_parent[1]);
	if (step_wait(pp->to_child[0]))
		return 13;
	ferrite_munmap(fs, m, MAP_LEN);
	ferrite_close(fs, fd);
	return ferrite_unmount(fs) ? 14 : 0;
}

static int c_mapped_elsewhere(void)
{
	ferrite_fs *fs;
	FT_OK(ferrite_mount(pool, NULL, &fs));
	FT_OK(ft_write_file(fs, "/mapped", 5, MAP_LEN, 0));
	FT_OK(ferrite_unmount(fs));
	struct pingpong pp;
	pid_t pid = spawn_paired(mapper_child, &pp);
	FT_CHECK(pid > 0, "pipe or fork failed");
	FT_CHECK(step_wait(pp.to_parent[0]) == 0, "child failed to map (status %d)", ft_reap(pid));
	FT_OK(ferrite_mount(pool, NULL, &fs));
	FT_OK(ferrite_truncate(fs, "/mapped", 4096));
	/* free space taken by a new file, as much as the shrink would have freed */
	FT_OK(ft_write_file(fs, "/other", 77, MAP_LEN, 0));
	step_send(pp.to_child[1]);
	FT_CHECK(step_wait(pp.to_parent[0]) == 0, "child failed to store (status %d)",
		 ft_reap(pid));
	FT_RUN(ft_read_check(fs, "/other", 77, MAP_LEN));
	struct stat st;
	FT_OK(ferrite_stat(fs, "/mapped", &st));
	FT_EQ(st.st_size, 4096);
	step_send(pp.to_child[1]);
	FT_EQ(ft_reap(pid), 0);
	/* grown again: what lay past the size reads as zeros */
	FT_OK(ferrite_truncate(fs, "/mapped", 65536));
	char buf[8192];
	int fd = FT_OK(ferrite_open(fs, "/mapped", O_RDONLY, 0));
	FT_EQ(ferrite_pread(fs, fd, buf, sizeof(buf), 8192), (long long)sizeof(buf));
	FT_CHECK(ft_all_zero(buf, sizeof(buf)), "bytes past the old size are not zeros");
	FT_OK(ferrite_close(fs, fd));
	FT_UNMOUNT_CLEAN(&fs, pool);
	return 0;
}

/* ---- a check or a lone mount still needs the pool alone -------------------------- */

static int c_alone(void)
{
	ferrite_fs *fs, *other;
	FT_OK(ferrite_mount(pool, NULL, &fs));
	FT_ERR(ferrite_fsck(pool, 1, NULL, NULL, NULL, NULL), EBUSY);
	FT_ERR(ferrite_fsck(pool, 0, NULL, NULL, NULL, NULL), EBUSY);
	struct ferrite_mount_opts alone = {.mode = FERRITE_MOUNT_EXCLUSIVE};
	FT_ERR(ferrite_mount(pool, &alone, &other), EBUSY);
	FT_ERRMSG_ONE_LINE();
	FT_OK(ferrite_unmount(fs));
	FT_OK(ferrite_mount(pool, &alone, &fs));
	pid_t pid = fork();
	if (pid == 0) {
		/* a process that did not inherit the mount: exec ourselves */
		execl("/proc/self/exe", "multiproc_test", "--probe-busy", pool, (char *)NULL);
		_exit(99);
	}
	FT_EQ(ft_reap(pid), 0);
	FT_OK(ferrite_unmount(fs));
	return 0;
}

/* The pool's coordination file in /dev/shm (src/space/share.c). */
static int share_name(char *name, size_t n)
{
	struct stat pst;
	FT_CHECK(stat(pool, &pst) == 0, "stat %s", pool);
	snprintf(name, n, "/dev/shm/ferrite-%llx-%llx-%u.share", (unsigned long long)pst.st_dev,
		 (unsigned long long)pst.st_ino, (unsigned)pst.st_uid);
	return 0;
}

/* A parent that unmounts while the child it forked goes on: the child
 * shares the parent's pool descriptor and flock, so the coordination file
 * must stay for it, and a process that mounts the pool afterwards shares
 * it with the child -- neither shut out nor coordinated apart. */
static int c_parent_leaves_first(void)
{
	char name[128];
	FT_RUN(share_name(name, sizeof(name)));
	ferrite_fs *fs;
	FT_OK(ferrite_mount(pool, NULL, &fs));
	FT_OK(ferrite_mkdir(fs, "/d", 0755));
	struct pingpong pp;
	FT_CHECK(pipe(pp.to_child) == 0 && pipe(pp.to_parent) == 0, "pipe");
	fflush(NULL);
	pid_t pid = fork();
	if (pid == 0) {
		ft_npools = 0;
		close(pp.to_child[1]); /* a parent that gives up ends its waits */
		int bad = step_wait(pp.to_child[0]) != 0;
		bad |= ft_write_file(fs, "/d/child", 5, 70000, 0) != 0;
		step_send(pp.to_parent[1]);
		bad |= step_wait(pp.to_child[0]) != 0;
		bad |= ft_read_check(fs, "/d/later", 6, 50000) != 0;
		_exit(bad);
	}
	FT_OK(ferrite_unmount(fs));
	struct stat st;
	FT_CHECK(stat(name, &st) == 0, "%s went while the forked child holds the pool", name);
	step_send(pp.to_child[1]);
	FT_CHECK(step_wait(pp.to_parent[0]) == 0, "the child's write failed (status %d)",
		 ft_reap(pid));
	/* a mount of its own (another open file description), beside the child */
	FT_OK(ferrite_mount(pool, NULL, &fs));
	FT_RUN(ft_read_check(fs, "/d/child", 5, 70000));
	FT_OK(ft_write_file(fs, "/d/later", 6, 50000, 0));
	step_send(pp.to_child[1]);
	FT_EQ(ft_reap(pid), 0);
	for (int k = 0; k < 2; k++) {
		close(pp.to_child[k]);
		close(pp.to_parent[k]);
	}
	FT_UNMOUNT_CLEAN(&fs, pool);
	return 0;
}

/* Every process of a pool killed: the coordination file they leave in
 * /dev/shm (3 MiB) goes when the pool is next held alone (fsck here). */
static int c_stale_share(void)
{
	char name[128];
	FT_RUN(share_name(name, sizeof(name)));
	int go[2];
	FT_CHECK(pipe(go) == 0, "pipe");
	fflush(NULL);
	pid_t pid = fork();
	if (pid == 0) {
		ferrite_fs *fs;
		char c = ferrite_mount(pool, NULL, &fs) == 0 && ferrite_mkdir(fs, "/s", 0755) == 0;
		(void)!write(go[1], &c, 1);
		pause();
		_exit(0);
	}
	char ok = 0;
	FT_CHECK(read(go[0], &ok, 1) == 1 && ok, "the child's mount");
	struct stat st;
	FT_CHECK(stat(name, &st) == 0, "%s is not there while the pool is mounted", name);
	kill(pid, SIGKILL);
	FT_EQ(ft_reap(pid), 128 + SIGKILL);
	FT_CHECK(stat(name, &st) == 0, "%s went with the killed process", name);
	FT_EQ(ferrite_fsck(pool, 0, NULL, NULL, NULL, NULL), FERRITE_FSCK_CLEAN);
	FT_CHECK(stat(name, &st) == -1 && errno == ENOENT, "fsck left %s behind", name);
	close(go[0]);
	close(go[1]);
	return 0;
}

static const struct ft_case cases[] = {
    {"pingpong", c_pingpong, 0},
    {"fork_inherits", c_fork_inherits, 0},
    {"shared_offsets", c_shared_offsets, 0},
    {"orphan_shared", c_orphan_shared, 0},
    {"locks", c_locks, 0},
    {"mapped_elsewhere", c_mapped_elsewhere, 0},
    {"alone", c_alone, 0},
    {"online_check", c_online_check, 0},
    {"parent_leaves_first", c_parent_leaves_first, 0},
    {"stale_share", c_stale_share, 0},
    {"recovery_first", c_recovery_first, 0},
    {"mount_churn", c_mount_churn, 0},
};

int main(int argc, char **argv)
{
	if (argc == 3 && strcmp(argv[1], "--probe-busy") == 0) {
		ferrite_fs *fs;
		int rc = ferrite_mount(argv[2], NULL, &fs);
		if (rc != -EBUSY)
			fprintf(stderr, "a shared mount of a pool held alone: %s\n",
				ft_errname(rc));
		return rc == -EBUSY ? 0 : 1;
	}
	pool = ft_pool_path("multiproc", "main");
	return ft_run_fresh(cases, sizeof(cases) / sizeof(cases[0]), argc, argv, pool, 256 * MiB);
}
