/*
 * util.c -- small helpers of ferrite-bench: the clock, progress lines, size parsing,
 * the shared pseudo-random generator, /proc/self/status, directory clean-up, dropping
 * the page cache and naming the file system a path is on.
 *
 * Measures nothing itself. Every workload takes its time stamps from now_sec()
 * (CLOCK_MONOTONIC) and draws its random offsets from rng_next() with the same
 * seed for every backend, so all columns see the identical operation sequence.
 */
#ifndef _GNU_SOURCE /* the top-level CMakeLists.txt defines it */
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"

static double t_start = -1.0;

double now_sec(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void progress(const char *fmt, ...)
{
	va_list ap;

	if (t_start < 0)
		t_start = now_sec();
	fprintf(stderr, "[%7.1fs] ", now_sec() - t_start);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

/* "4096", "64K", "1M", "1G", "1.5G" (binary multiples). */
int parse_size(const char *s, uint64_t *out)
{
	char *end;
	double v;
	double mul = 1;

	errno = 0;
	v = strtod(s, &end);
	if (errno || end == s || v < 0)
		return -EINVAL;
	switch (*end) {
	case 'k':
	case 'K':
		mul = 1024.0;
		end++;
		break;
	case 'm':
	case 'M':
		mul = 1024.0 * 1024;
		end++;
		break;
	case 'g':
	case 'G':
		mul = 1024.0 * 1024 * 1024;
		end++;
		break;
	case 't':
	case 'T':
		mul = 1024.0 * 1024 * 1024 * 1024;
		end++;
		break;
	default:
		break;
	}
	if (*end == 'i' && end[1] == 'B')
		end += 2;
	else if (*end == 'B')
		end++;
	if (*end != '\0')
		return -EINVAL;
	*out = (uint64_t)(v * mul);
	return 0;
}

const char *fmt_size(uint64_t bytes, char *buf, size_t len)
{
	static const char *const unit[] = {"B", "KiB", "MiB", "GiB", "TiB"};
	double v = (double)bytes;
	int u = 0;

	while (v >= 1024 && u < 4) {
		v /= 1024;
		u++;
	}
	if (u == 0)
		snprintf(buf, len, "%llu B", (unsigned long long)bytes);
	else if (v == (double)(uint64_t)v)
		snprintf(buf, len, "%.0f %s", v, unit[u]);
	else
		snprintf(buf, len, "%.2f %s", v, unit[u]);
	return buf;
}

void cell_fail(struct bench_cell *c, const char *what, long rc)
{
	c->failed = 1;
	if (rc < 0)
		snprintf(c->err, sizeof(c->err), "%s: %s", what, strerror((int)-rc));
	else
		snprintf(c->err, sizeof(c->err), "%s: short transfer (%ld)", what, rc);
}

void cell_cleanup(struct bench_backend *b, struct bench_cell *c, int fd, const char *path)
{
	int rc = fd >= 0 ? b->close(b->ctx, fd) : 0;

	if (rc < 0 && !c->cleanup_err[0])
		snprintf(c->cleanup_err, sizeof(c->cleanup_err), "close afterwards: %s",
			 strerror(-rc));
	rc = b->unlink(b->ctx, path);
	if (rc < 0 && !c->cleanup_err[0])
		snprintf(c->cleanup_err, sizeof(c->cleanup_err), "unlink %.40s afterwards: %s",
			 path, strerror(-rc));
	if (rc < 0)
		progress("%s: unlink %s failed: %s", b->name, path, strerror(-rc));
}

void cell_add(struct bench_cell *c, double secs, double ops, double bytes)
{
	if (c->n >= BENCH_MAX_RUNS)
		return;
	c->ops = ops;
	c->bytes = bytes;
	c->secs[c->n++] = secs;
}

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)ftw;
	if (flag == FTW_DP)
		return rmdir(path) < 0 ? -1 : 0;
	return unlink(path) < 0 ? -1 : 0;
}

/* Removes PATH and everything below it; a missing PATH is not an error. */
int rm_tree(const char *path)
{
	struct stat st;

	if (lstat(path, &st) < 0)
		return errno == ENOENT ? 0 : -errno;
	if (nftw(path, rm_one, 64, FTW_DEPTH | FTW_PHYS) < 0)
		return -errno;
	return 0;
}

int mkdir_p(const char *path)
{
	char tmp[4096];
	size_t len = strlen(path);

	if (len == 0 || len >= sizeof(tmp))
		return -ENAMETOOLONG;
	memcpy(tmp, path, len + 1);
	for (char *p = tmp + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdir(tmp, 0755) < 0 && errno != EEXIST)
			return -errno;
		*p = '/';
	}
	if (mkdir(tmp, 0755) < 0 && errno != EEXIST)
		return -errno;
	return 0;
}

/* xorshift64*: cheap, deterministic, good enough to spread offsets. */
uint64_t rng_next(uint64_t *state)
{
	uint64_t x = *state;

	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	*state = x;
	return x * 0x2545F4914F6CDD1DULL;
}

int bench_order(int run, int k)
{
	return run % 2 ? (BK_COUNT - 1 - k + run) % BK_COUNT : (k + run) % BK_COUNT;
}

/* read() into a stack buffer: no stdio buffer is allocated, so calling this right
 * before and after ferrite_mount() does not itself move the RSS. */
long proc_status_kib(const char *key)
{
	char buf[8192];
	size_t klen = strlen(key);
	ssize_t len;
	int fd = open("/proc/self/status", O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return -1;
	len = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (len <= 0)
		return -1;
	buf[len] = '\0';
	for (char *line = buf; line != NULL;) {
		if (strncmp(line, key, klen) == 0 && line[klen] == ':')
			return strtol(line + klen + 1, NULL, 10);
		line = strchr(line, '\n');
		if (line)
			line++;
	}
	return -1;
}

int drop_page_cache(void)
{
	int fd = open("/proc/sys/vm/drop_caches", O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (write(fd, "3\n", 2) != 2) {
		int e = errno;

		close(fd);
		return -e;
	}
	close(fd);
	return 0;
}

/* mountinfo line: ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTS [TAGS...] - FSTYPE SOURCE SUPER */
const char *mount_source(const char *path, char *buf, size_t len)
{
	char line[4096], want[32];
	struct stat st;
	FILE *f;

	snprintf(buf, len, "?");
	if (stat(path, &st) < 0)
		return buf;
	snprintf(want, sizeof(want), "%u:%u", major(st.st_dev), minor(st.st_dev));
	f = fopen("/proc/self/mountinfo", "re");
	if (!f)
		return buf;
	while (fgets(line, sizeof(line), f)) {
		char dev[32], mnt[1024], fstype[64], src[1024];
		char *dash = strstr(line, " - ");

		if (!dash || sscanf(line, "%*s %*s %31s %*s %1023s", dev, mnt) != 2 ||
		    sscanf(dash + 3, "%63s %1023s", fstype, src) != 2 || strcmp(dev, want) != 0)
			continue;
		snprintf(buf, len, "%s (%s) on %s", src, fstype, mnt);
	}
	fclose(f);
	return buf;
}
