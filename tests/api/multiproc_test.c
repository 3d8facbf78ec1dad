/*
 * multiproc_test.c -- one pm pool mounted by several processes at once
 * (docs/contracts.md#processes, src/space/share.c): each sees the others'
 * changes on return, a forked child goes on with what it inherited, an
 * unlinked file lives while any process holds it, and a process killed at
 * any moment blocks no one and loses nothing another acknowledged.
 *
 *   ./multiproc_test [CASE...]     FT_KILLS=N: kills in the kill case (300)
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

static int read_check(ferrite_fs *fs, const char *path, uint64_t key, size_t len)
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
		if (read_check(fs, a, (uint64_t)i, (size_t)(i + 1) * 64 * 1024))
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
		FT_RUN(read_check(fs, b, 1000 + (uint64_t)i, (size_t)(i + 1) * 48 * 1024));
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
		bad |= read_check(fs, "/before", 7, 8192) != 0;
		bad |= ft_write_file(fs, "/child", 43, 100000, 0) != 0;
		_exit(bad);
	}
	FT_EQ(ft_reap(pid), 0);
	char *buf = malloc(5 * MiB + 1);
	FT_EQ(ferrite_pread(fs, fd, buf, 5 * MiB + 1, 0), (long long)(5 * MiB));
	FT_CHECK(ft_verify(buf, 5 * MiB, 42, 0) < 0, "the child's writes read back wrong");
	free(buf);
	FT_RUN(read_check(fs, "/child", 43, 100000));
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
	FT_RUN(read_check(fs, "/orphan", 10, 5000));
	FT_UNMOUNT_CLEAN(&fs, pool);
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
	return read_check(fs, "/held", 5, 70000) | (ferrite_unmount(fs) != 0);
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
	FT_RUN(read_check(fs, "/other", 77, MAP_LEN));
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

/* ---- many processes on one tree, one killed at random moments ---------------------- */

#define WORKERS 4
#define SLOTS	64

/* Where a worker was when it died: which of the locks that guard the pool
 * it held. The turn and the shared calls' counts (share.c H9) are the
 * locks between processes; the others are its own threads' locks, which
 * order the changes it makes under the turn, so a kill while one is held is
 * a kill in the middle of that kind of change. */
enum lock_class {
	LC_OUTSIDE,   /* no call running and no lock held */
	LC_TURN,      /* inside a call: the pool's turn */
	LC_TURN_WAIT, /* inside a call, another process has the turn */
	LC_INODE,     /* an inode's lock (fs->locks) */
	LC_RENAME,    /* a move across directories */
	LC_VNODE,     /* open counts (vn_lock) */
	LC_ALLOC,     /* the allocator */
	LC_MAP,	      /* the window map (remaps) */
	LC_LOG_SLOT,  /* a log slot: a transaction under way */
	LC_LOG,	      /* the log slots' free list */
	LC_ADVISORY,  /* the advisory lock table */
	LC_TABLES,    /* the coordination tables (holders, descriptions) */
	LC_RECORD,    /* a record or flock lock of its own */
	LC_SHARED,    /* inside a shared call (share.c H9): counted in reading[] */
	LC_N
};

static const char *const lc_name[LC_N] = {
    "outside a call",
    "the turn",
    "waiting for the turn",
    "an inode lock",
    "the rename lock",
    "the open counts",
    "the allocator",
    "the window map",
    "a log slot",
    "the log's free list",
    "the advisory lock table",
    "the coordination tables",
    "a record/flock lock",
    "a shared call",
};

/* What a worker acknowledged, in memory the parent reads after a kill:
 * for each of its slots, the key of the file that must be there (0 none). */
struct ack {
	volatile uint64_t key[WORKERS][SLOTS];
	volatile uint64_t pending[WORKERS][SLOTS]; /* a call on the slot is running */
	volatile uint64_t started[WORKERS][SLOTS]; /* calls on the slot begun so far */
	volatile uint64_t ops[WORKERS];
	volatile uint32_t want;		 /* classes a SIGUSR1 kills in (0: any) */
	volatile uint32_t died[WORKERS]; /* classes held when it killed itself */
};

static struct ack *acks;
static ferrite_fs *worker_fs; /* a worker's mount, for held_classes */
static int worker_id;
static volatile sig_atomic_t worker_in_op;

/* The lock words as glibc keeps them: a worker has one thread, so a lock
 * held is a lock it holds. */
static int mutex_held(pthread_mutex_t *m)
{
	return __atomic_load_n(&m->__data.__lock, __ATOMIC_RELAXED) != 0;
}

static int rwlock_held(pthread_rwlock_t *l)
{
	unsigned r = __atomic_load_n(&l->__data.__readers, __ATOMIC_RELAXED);
	return (r >> 3) != 0 || (r & 2) != 0; /* readers, or the write-locked bit */
}

static uint32_t held_classes(void)
{
	ferrite_fs *fs = worker_fs;
	if (!fs)
		return 1u << LC_OUTSIDE;
	struct pool_share *s = fs->m.pool.share;
	uint32_t m = 0;
	uint32_t turn = __atomic_load_n(&s->f->turn, __ATOMIC_RELAXED);
	if (TURN_PID(turn) == (uint32_t)getpid() && TURN_CALLS(turn))
		m |= 1u << LC_TURN;
	if (s->slot >= 0 && __atomic_load_n(&s->f->reading[s->slot].n, __ATOMIC_RELAXED))
		m |= 1u << LC_SHARED;
	else if (worker_in_op && __atomic_load_n(&s->f->waiters, __ATOMIC_RELAXED))
		m |= 1u << LC_TURN_WAIT;
	for (int i = 0; i < FS_LOCK_STRIPES; i++)
		if (rwlock_held(&fs->locks[i])) {
			m |= 1u << LC_INODE;
			break;
		}
	m |= (uint32_t)mutex_held(&fs->rename_lock) << LC_RENAME;
	m |= (uint32_t)mutex_held(&fs->vn_lock) << LC_VNODE;
	m |= (uint32_t)mutex_held(&fs->m.sp.alloc_lock) << LC_ALLOC;
	m |= (uint32_t)mutex_held(&fs->m.sp.map_lock) << LC_MAP;
	m |= (uint32_t)mutex_held(&fs->m.log_lock) << LC_LOG;
	m |= (uint32_t)mutex_held(&fs->lk_mutex) << LC_ADVISORY;
	m |= (uint32_t)mutex_held(&s->tab_lock) << LC_TABLES;
	uint32_t nfree = 0; /* fewer free log slots than slots: one is in use */
	for (int64_t i = fs->m.log_free_head; i >= 0 && i < fs->m.nlogs && nfree <= fs->m.nlogs;
	     nfree++)
		i = fs->m.logs[i].next_free < fs->m.nlogs ? (int64_t)fs->m.logs[i].next_free : -1;
	if (nfree < fs->m.nlogs)
		m |= 1u << LC_LOG_SLOT;
	const struct lk_table *t = share_locks(s);
	for (uint32_t i = 0; i < t->n && i < LK_MAX && s->slot >= 0; i++)
		if (t->e[i].slot == s->slot) {
			m |= 1u << LC_RECORD;
			break;
		}
	if (!(m & ~(1u << LC_RECORD)))
		m |= 1u << LC_OUTSIDE;
	return m;
}

/* SIGUSR1: die here if the worker holds a class the parent wants, noting
 * which it held (the parent then knows where the kill landed). */
static void on_kill_request(int sig)
{
	(void)sig;
	uint32_t m = held_classes();
	uint32_t want = acks->want;
	if (want && !(m & want))
		return;
	acks->died[worker_id] = m;
	kill(getpid(), SIGKILL);
}

static size_t slot_len(uint64_t key)
{
	return 1 + (size_t)(ft_mix64(key) % (3 * 65536));
}

/* A lock to hold across a few steps: a record lock on a range others want
 * too, or a flock; one at a time, so the workers cannot deadlock. */
struct held_lock {
	int rec_fd, flock_fd;
	int kind; /* 0 none, 1 record, 2 flock */
	int steps;
};

static int advisory_step(ferrite_fs *fs, struct held_lock *h, uint64_t *seed)
{
	int rc;
	if (h->kind) {
		if (--h->steps > 0)
			return 0;
		struct flock fl = {.l_type = F_UNLCK, .l_whence = SEEK_SET};
		rc = h->kind == 1 ? ferrite_fcntl_lock(fs, h->rec_fd, F_SETLK, &fl)
				  : ferrite_flock(fs, h->flock_fd, LOCK_UN);
		h->kind = 0;
		return rc;
	}
	int kind = 1 + (int)(ft_rand(seed) % 2);
	do { /* F_SETLKW and flock wait: a SIGUSR1 that did not kill ends the wait */
		if (kind == 1) {
			int64_t at = (int64_t)(ft_rand(seed) % 16) * 64;
			struct flock fl = {
			    .l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = at, .l_len = 128};
			rc = ferrite_fcntl_lock(fs, h->rec_fd, F_SETLKW, &fl);
		} else {
			rc = ferrite_flock(fs, h->flock_fd, LOCK_EX);
		}
	} while (rc == -EINTR);
	if (!rc) {
		h->kind = kind;
		h->steps = 1 + (int)(ft_rand(seed) % 8);
	}
	return rc;
}

/* A directory moved between two parents, back and forth (the rename lock) */
static int move_step(ferrite_fs *fs, int w)
{
	char a[64], b[64];
	snprintf(a, sizeof(a), "/w/a-%d/d", w);
	snprintf(b, sizeof(b), "/w/b-%d/d", w);
	int rc = ferrite_rename(fs, a, b, 0);
	return rc == -ENOENT ? ferrite_rename(fs, b, a, 0) : rc;
}

static int list_step(ferrite_fs *fs)
{
	ferrite_dir *d;
	int rc = ferrite_opendir(fs, "/w", &d);
	if (rc)
		return rc;
	struct ferrite_dirent ent;
	while ((rc = ferrite_readdir(d, &ent)) > 0)
		;
	ferrite_closedir(d);
	return rc;
}

static int worker(void *arg)
{
	int w = (int)(intptr_t)arg;
	if (prctl(PR_SET_PDEATHSIG, SIGKILL) || getppid() == 1)
		return -1; /* never outlive a test that failed */
	ferrite_fs *fs;
	if (ferrite_mount(pool, NULL, &fs)) {
		fprintf(stderr, "worker %d: mount: %s\n", w, ferrite_errmsg());
		return -1;
	}
	struct held_lock h = {.rec_fd = ferrite_open(fs, "/w/locks", O_RDWR | O_CREAT, 0644),
			      .flock_fd = ferrite_open(fs, "/w/locks", O_RDONLY, 0)};
	if (h.rec_fd < 0 || h.flock_fd < 0) {
		fprintf(stderr, "worker %d: open /w/locks: %s\n", w, ferrite_errmsg());
		return -1;
	}
	worker_id = w;
	worker_fs = fs;
	uint64_t seed = (uint64_t)getpid() * 7919 + (uint64_t)w;
	for (;;) {
		int s = (int)(ft_rand(&seed) % SLOTS);
		char path[64], tmp[64];
		snprintf(path, sizeof(path), "/w/%d-%d", w, s);
		snprintf(tmp, sizeof(tmp), "/w/tmp-%d", w);
		uint64_t key = ft_rand(&seed) | 1;
		int op = (int)(ft_rand(&seed) % 7);
		int rc = 0;
		int changes = op == 0 || (op == 1 && acks->key[w][s]);
		if (changes) { /* pending first: see verify_slot */
			acks->pending[w][s] = key;
			acks->started[w][s]++;
		}
		worker_in_op = 1;
		if (op == 0) { /* replace through a rename: old or new after a kill */
			rc = ft_write_file(fs, tmp, key, slot_len(key), O_TRUNC);
			if (!rc)
				rc = ferrite_rename(fs, tmp, path, 0);
		} else if (op == 1 && acks->key[w][s]) {
			rc = ferrite_unlink(fs, path);
			key = 0;
		} else if (op == 2 && acks->key[w][s] && !acks->pending[w][s]) {
			rc = read_check(fs, path, acks->key[w][s], slot_len(acks->key[w][s]));
		} else if (op == 4) {
			rc = advisory_step(fs, &h, &seed);
		} else if (op == 5) {
			rc = move_step(fs, w);
		} else if (op == 6) {
			rc = list_step(fs);
		} else { /* a file of another worker's slot: read whatever is there */
			char other[64];
			snprintf(other, sizeof(other), "/w/%d-%d", (w + 1) % WORKERS, s);
			struct stat st;
			rc = ferrite_stat(fs, other, &st);
			rc = rc == -ENOENT ? 0 : rc;
		}
		worker_in_op = 0;
		if (rc) {
			fprintf(stderr, "worker %d: op %d on %s: %s (%s)\n", w, op, path,
				ft_errname(rc), ferrite_errmsg());
			return -1;
		}
		if (changes) {
			acks->key[w][s] = key;
			acks->pending[w][s] = 0;
		}
		acks->ops[w]++;
	}
}

/* Whether slot s of worker w holds what its last acknowledged operation
 * left. With the workers running (live), a mismatch counts only if no
 * operation on the slot began while it was read (started unchanged; the
 * acknowledgement alone could change and change back: a create then an
 * unlink). Read started, then pending: a worker sets pending, then started. */
static int verify_slot(ferrite_fs *fs, int w, int s, int live)
{
	char path[64];
	snprintf(path, sizeof(path), "/w/%d-%d", w, s);
	uint64_t seq = acks->started[w][s];
	uint64_t p = acks->pending[w][s], k = acks->key[w][s];
	if (p) /* killed inside, or running: the old state or the new one */
		return 0;
	struct stat st;
	int rc = ferrite_stat(fs, path, &st);
	char *buf = NULL;
	long long n = rc;
	int ok = k ? rc == 0 : rc == -ENOENT;
	if (ok && k) {
		size_t len = slot_len(k);
		buf = malloc(len + 1);
		int fd = buf ? ferrite_open(fs, path, O_RDONLY, 0) : -ENOMEM;
		n = fd;
		if (fd >= 0) {
			n = ferrite_pread(fs, fd, buf, len + 1, 0);
			ferrite_close(fs, fd);
		}
		ok = n == (long long)len && ft_verify(buf, len, k, 0) < 0;
	}
	free(buf);
	if (ok || (live && acks->started[w][s] != seq))
		return 0;
	if (!k)
		fprintf(stderr, "  %s: present, but its unlink was acknowledged\n", path);
	else
		fprintf(stderr, "  %s: read %lld, want %zu bytes of key %llu\n", path, n,
			slot_len(k), (unsigned long long)k);
	return -1;
}

static int verify_tree(ferrite_fs *fs, int live)
{
	int bad = 0;
	for (int w = 0; w < WORKERS; w++) {
		for (int s = 0; s < SLOTS; s++)
			bad |= verify_slot(fs, w, s, live);
		if (live) /* a worker may move it between the two looks */
			continue;
		char a[64], b[64];
		struct stat st;
		snprintf(a, sizeof(a), "/w/a-%d/d", w);
		snprintf(b, sizeof(b), "/w/b-%d/d", w);
		if ((ferrite_stat(fs, a, &st) == 0) == (ferrite_stat(fs, b, &st) == 0)) {
			fprintf(stderr, "  %s and %s: the moved directory is not in one place\n", a,
				b);
			bad = 1;
		}
	}
	return bad ? -1 : 0;
}

static void print_problem(void *arg, const char *line)
{
	fprintf(stderr, "  check after kill %d: %s\n", *(int *)arg, line);
}

/* After a kill, with the other workers running: the pool checks clean
 * between their calls (ferrite_check), and every acknowledged operation is
 * there. A mount of this process's own, gone before the next fork. */
static int check_live(int k)
{
	ferrite_fs *fs;
	FT_OK(ferrite_mount(pool, NULL, &fs));
	int rc = ferrite_check(fs, print_problem, &k);
	int tree = verify_tree(fs, 1);
	FT_OK(ferrite_unmount(fs));
	FT_CHECK(rc == FERRITE_FSCK_CLEAN, "after kill %d: the check returned %d (%s)", k, rc,
		 rc < 0 ? ferrite_errmsg() : "problems above");
	FT_CHECK(tree == 0, "after kill %d: acknowledged operations missing (above)", k);
	return 0;
}

/* After worker w died: what it was doing is over, the old state or the new
 * one (unknown until written again); its lock classes are counted. */
static void worker_died(int w, uint64_t kills[LC_N])
{
	for (int s = 0; s < SLOTS; s++)
		if (acks->pending[w][s]) {
			acks->key[w][s] = 0;
			acks->pending[w][s] = 1;
		}
	for (int c = 0; c < LC_N; c++)
		if (acks->died[w] & (1u << c))
			kills[c]++;
	acks->died[w] = 0;
}

static int others_running(const pid_t pids[WORKERS], int k)
{
	for (int v = 0; v < WORKERS; v++) {
		int st;
		if (waitpid(pids[v], &st, WNOHANG) == pids[v])
			FT_CHECK(0, "worker %d stopped by itself (status %#x) after %d kills", v,
				 st, k);
	}
	return 0;
}

/* The kills, random then aimed; the workers run until the caller stops them. */
static int kill_rounds(pid_t pids[WORKERS], int kills, uint64_t in_class[LC_N],
		       uint64_t aimed[LC_N])
{
	uint64_t seed = 12345;
	/* at random moments: wherever the worker is */
	for (int k = 0; k < kills; k++) {
		/* 1-20 ms of work, then one worker dies wherever it is */
		struct timespec ts = {0, 1000000 + (long)(ft_rand(&seed) % 19000000)};
		nanosleep(&ts, NULL);
		int w = (int)(ft_rand(&seed) % WORKERS);
		FT_RUN(others_running(pids, k));
		kill(pids[w], SIGUSR1);
		FT_EQ(ft_reap(pids[w]), 128 + SIGKILL);
		pids[w] = 0;
		worker_died(w, in_class);
		FT_RUN(check_live(k));
		pids[w] = ft_spawn(worker, (void *)(intptr_t)w);
	}
	/* then inside each class the random ones missed: one worker alone (the
	 * others killed, so it does not just wait for the turn) gets requests
	 * every 0.3 ms until it takes one holding that class */
	for (int c = LC_TURN; c < LC_N; c++) {
		if (in_class[c] || aimed[c])
			continue;
		int w = c % WORKERS, died = 0;
		for (int v = 0; v < WORKERS; v++)
			if (v != w) {
				kill(pids[v], SIGUSR1);
				FT_EQ(ft_reap(pids[v]), 128 + SIGKILL);
				pids[v] = 0;
				worker_died(v, in_class);
			}
		acks->want = 1u << c;
		for (int tries = 0; tries < 20000 && !died; tries++) {
			kill(pids[w], SIGUSR1);
			struct timespec ts = {0, 300000};
			nanosleep(&ts, NULL);
			int st = 0;
			pid_t r = waitpid(pids[w], &st, WNOHANG);
			FT_CHECK(r == 0 ||
				     (r == pids[w] && WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL),
				 "worker %d ended with status %#x", w, st);
			died = r == pids[w];
		}
		FT_CHECK(died, "no kill inside %s after 20 000 requests", lc_name[c]);
		pids[w] = 0;
		worker_died(w, aimed);
		FT_RUN(check_live(kills + c));
		acks->want = 0;
		for (int v = 0; v < WORKERS; v++)
			pids[v] = ft_spawn(worker, (void *)(intptr_t)v);
		nanosleep(&(struct timespec){0, 5000000}, NULL);
		FT_RUN(others_running(pids, kills));
	}
	return 0;
}

static int c_kill_workers(void)
{
	int kills = getenv("FT_KILLS") ? atoi(getenv("FT_KILLS")) : 300;
	acks = mmap(NULL, sizeof(*acks), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	FT_CHECK(acks != MAP_FAILED, "mmap");
	memset((void *)acks, 0, sizeof(*acks));
	ferrite_fs *fs;
	FT_OK(ferrite_mount(pool, NULL, &fs));
	FT_OK(ferrite_mkdir(fs, "/w", 0755));
	for (int w = 0; w < WORKERS; w++) {
		char d[64];
		snprintf(d, sizeof(d), "/w/a-%d", w);
		FT_OK(ferrite_mkdir(fs, d, 0755));
		snprintf(d, sizeof(d), "/w/a-%d/d", w);
		FT_OK(ferrite_mkdir(fs, d, 0755));
		snprintf(d, sizeof(d), "/w/b-%d", w);
		FT_OK(ferrite_mkdir(fs, d, 0755));
	}
	FT_OK(ferrite_unmount(fs));
	/* the workers inherit it: a request never finds one without it */
	struct sigaction sa = {.sa_handler = on_kill_request, .sa_flags = SA_RESTART};
	sigemptyset(&sa.sa_mask);
	FT_CHECK(sigaction(SIGUSR1, &sa, NULL) == 0, "sigaction");
	pid_t pids[WORKERS];
	for (int w = 0; w < WORKERS; w++)
		pids[w] = ft_spawn(worker, (void *)(intptr_t)w);
	uint64_t in_class[LC_N] = {0}, aimed[LC_N] = {0};
	int rc = kill_rounds(pids, kills, in_class, aimed);
	for (int w = 0; w < WORKERS; w++)
		if (pids[w] > 0) {
			kill(pids[w], SIGKILL);
			ft_reap(pids[w]);
		}
	uint64_t ops = 0;
	for (int w = 0; w < WORKERS; w++)
		ops += acks->ops[w];
	printf("  %d random kills, %llu operations acknowledged; kills by what the worker held:\n"
	       "    %-26s %6s %6s\n",
	       kills, (unsigned long long)ops, "", "random", "aimed");
	for (int c = 0; c < LC_N; c++)
		printf("    %-26s %6llu %6llu\n", lc_name[c], (unsigned long long)in_class[c],
		       (unsigned long long)aimed[c]);
	FT_RUN(rc);
	FT_CHECK(ops > (uint64_t)kills, "the workers made little progress: %llu operations",
		 (unsigned long long)ops);
	FT_OK(ferrite_mount(pool, NULL, &fs));
	FT_RUN(verify_tree(fs, 0));
	FT_UNMOUNT_CLEAN(&fs, pool);
	munmap((void *)acks, sizeof(*acks));
	return 0;
}

/* Every process of a pool killed: the coordination file they leave in
 * /dev/shm (3 MiB) goes when the pool is next held alone (fsck here). */
static int c_stale_share(void)
{
	struct stat pst;
	FT_CHECK(stat(pool, &pst) == 0, "stat %s", pool);
	char name[128];
	snprintf(name, sizeof(name), "/dev/shm/ferrite-%llx-%llx-%u.share",
		 (unsigned long long)pst.st_dev, (unsigned long long)pst.st_ino,
		 (unsigned)pst.st_uid);
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
    {"kill_workers", c_kill_workers, 0},
    {"stale_share", c_stale_share, 0},
};

static int before(const struct ft_case *c)
{
	(void)c;
	struct ferrite_mkfs_opts o = {.size = 256 * MiB, .force = 1};
	FT_OK(ferrite_mkfs(pool, &o));
	return 0;
}

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
	return ft_run(cases, sizeof(cases) / sizeof(cases[0]), argc, argv, before, NULL);
}
