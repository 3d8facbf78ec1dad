/*
 * enospc_msg_test.c -- every way a full pool fails a call through the C API
 * says so in ferrite_errmsg(), read right after the failing call: creates of
 * empty files (inodes), of files with long names (name blocks), mkdir,
 * symlinks with long targets, appends, pwrite and fallocate growing one
 * file, ftruncate plus writes, extended attributes. Each case formats a
 * 16 MiB pool (sync and strict mode), repeats its call until it fails, and
 * checks the failure is -ENOSPC with a message of the library's own ("no
 * space left ...", not empty, not just strerror's text).
 *
 * Usage: enospc_msg_test [POOL]   (default /dev/shm/ferrite-enospc-PID.pool)
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ferrite.h"

#define POOL_SIZE (16u << 20)
#define MAX_STEPS 1000000L /* a case that never fails is a failure too */

static ferrite_fs *fs;
static char buf[1 << 20];

/* One step of a case: 0 done, < 0 the call failed (its -errno); *call names
 * the call that failed. The message is taken right after it. */
typedef long (*step_fn)(long i, const char **call, char *msg, size_t cap);

static void take_msg(char *msg, size_t cap)
{
	const char *m = ferrite_errmsg();
	snprintf(msg, cap, "%s", m ? m : "");
}

static long create_file(const char *path, size_t size, const char **call, char *msg, size_t cap)
{
	int fd = ferrite_open(fs, path, O_CREAT | O_WRONLY, 0644);
	if (fd < 0) {
		take_msg(msg, cap);
		*call = "ferrite_open";
		return fd;
	}
	long rc = 0;
	for (size_t done = 0; done < size;) {
		size_t n = size - done < sizeof buf ? size - done : sizeof buf;
		ssize_t w = ferrite_write(fs, fd, buf, n);
		if (w < 0) {
			take_msg(msg, cap);
			*call = "ferrite_write";
			rc = w;
			break;
		}
		done += (size_t)w;
	}
	ferrite_close(fs, fd);
	return rc;
}

static long step_empty(long i, const char **call, char *msg, size_t cap)
{
	char path[64];
	snprintf(path, sizeof path, "/e%ld", i);
	return create_file(path, 0, call, msg, cap);
}

static long step_longname(long i, const char **call, char *msg, size_t cap)
{
	char path[160];
	snprintf(path, sizeof path, "/%0120ld", i);
	return create_file(path, 0, call, msg, cap);
}

static long step_small(long i, const char **call, char *msg, size_t cap)
{
	char path[64];
	snprintf(path, sizeof path, "/s%ld", i);
	return create_file(path, 6000, call, msg, cap);
}

static long step_large(long i, const char **call, char *msg, size_t cap)
{
	char path[64];
	snprintf(path, sizeof path, "/l%ld", i);
	return create_file(path, 3u << 20, call, msg, cap);
}

static long step_mkdir(long i, const char **call, char *msg, size_t cap)
{
	char path[64];
	snprintf(path, sizeof path, "/d%ld", i);
	long rc = ferrite_mkdir(fs, path, 0755);
	take_msg(msg, cap);
	*call = "ferrite_mkdir";
	return rc;
}

static long step_symlink(long i, const char **call, char *msg, size_t cap)
{
	char path[64], target[501];
	snprintf(path, sizeof path, "/y%ld", i);
	memset(target, 'a', sizeof target - 1);
	target[sizeof target - 1] = '\0';
	long rc = ferrite_symlink(fs, target, path);
	take_msg(msg, cap);
	*call = "ferrite_symlink";
	return rc;
}

/* One file grown by 1 MiB per step, by pwrite or by fallocate. */
static int grown_fd = -1;

static long step_pwrite(long i, const char **call, char *msg, size_t cap)
{
	if (grown_fd < 0 && (grown_fd = ferrite_open(fs, "/grown", O_CREAT | O_WRONLY, 0644)) < 0)
		return grown_fd;
	long rc = ferrite_pwrite(fs, grown_fd, buf, sizeof buf, (off_t)i * (off_t)sizeof buf);
	take_msg(msg, cap);
	*call = "ferrite_pwrite";
	return rc < 0 ? rc : 0;
}

static long step_fallocate(long i, const char **call, char *msg, size_t cap)
{
	if (grown_fd < 0 && (grown_fd = ferrite_open(fs, "/grown", O_CREAT | O_WRONLY, 0644)) < 0)
		return grown_fd;
	long rc = ferrite_fallocate(fs, grown_fd, 0, (off_t)i * (off_t)sizeof buf, sizeof buf);
	take_msg(msg, cap);
	*call = "ferrite_fallocate";
	return rc;
}

static long step_truncate(long i, const char **call, char *msg, size_t cap)
{
	char path[64];
	snprintf(path, sizeof path, "/t%ld", i);
	int fd = ferrite_open(fs, path, O_CREAT | O_WRONLY, 0644);
	if (fd < 0) {
		take_msg(msg, cap);
		*call = "ferrite_open";
		return fd;
	}
	long rc = ferrite_ftruncate(fs, fd, sizeof buf);
	take_msg(msg, cap);
	*call = "ferrite_ftruncate";
	if (!rc) {
		rc = ferrite_pwrite(fs, fd, buf, sizeof buf, 0);
		take_msg(msg, cap);
		*call = "ferrite_pwrite";
		rc = rc < 0 ? rc : 0;
	}
	ferrite_close(fs, fd);
	return rc;
}

static long step_xattr(long i, const char **call, char *msg, size_t cap)
{
	char path[64];
	snprintf(path, sizeof path, "/x%ld", i);
	int fd = ferrite_open(fs, path, O_CREAT | O_WRONLY, 0644);
	if (fd < 0) {
		take_msg(msg, cap);
		*call = "ferrite_open";
		return fd;
	}
	long rc = ferrite_fsetxattr(fs, fd, "user.blob", buf, 3000, 0);
	take_msg(msg, cap);
	*call = "ferrite_fsetxattr";
	ferrite_close(fs, fd);
	return rc;
}

static const struct {
	const char *name;
	step_fn step;
} cases[] = {
    {"create-empty", step_empty},
    {"create-long-name", step_longname},
    {"create-6000", step_small},
    {"create-3m", step_large},
    {"mkdir", step_mkdir},
    {"symlink", step_symlink},
    {"pwrite-grow", step_pwrite},
    {"fallocate-grow", step_fallocate},
    {"ftruncate-write", step_truncate},
    {"setxattr", step_xattr},
};

static int run_case(const char *pool, int c, int mode)
{
	const char *mname = mode == FERRITE_MODE_STRICT ? "strict" : "sync";
	struct ferrite_mkfs_opts mo = {.size = POOL_SIZE, .force = 1, .mode = mode};
	if (ferrite_mkfs(pool, &mo) || ferrite_mount(pool, NULL, &fs)) {
		printf("FAIL %s/%s: setting up %s: %s\n", cases[c].name, mname, pool,
		       ferrite_errmsg());
		return 1;
	}
	grown_fd = -1;
	char msg[512] = "";
	const char *call = "?";
	long rc = 0, i;
	for (i = 0; i < MAX_STEPS && rc == 0; i++)
		rc = cases[c].step(i, &call, msg, sizeof msg);
	if (grown_fd >= 0)
		ferrite_close(fs, grown_fd);
	ferrite_unmount(fs);
	int ok = rc == -ENOSPC && strstr(msg, "no space left") != NULL;
	printf("%s %s/%s: %s failed after %ld steps: %s; ferrite_errmsg() \"%s\"\n",
	       ok ? "ok  " : "FAIL", cases[c].name, mname, call, i - 1,
	       rc ? strerror((int)-rc) : "never", msg);
	return !ok;
}

int main(int argc, char **argv)
{
	char def[64];
	snprintf(def, sizeof def, "/dev/shm/ferrite-enospc-%d.pool", (int)getpid());
	const char *pool = argc > 1 ? argv[1] : def;
	int failed = 0;
	memset(buf, 'x', sizeof buf);
	for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
		failed += run_case(pool, (int)c, FERRITE_MODE_SYNC);
		failed += run_case(pool, (int)c, FERRITE_MODE_STRICT);
	}
	unlink(pool);
	printf("enospc_msg: %d failed\n", failed);
	return failed != 0;
}
