/*
 * mount.c -- c) mount time and memory after mount, for pools holding --mount-files
 * files (default 1 000 and 1 000 000), ferrite only.
 *
 * Setup (untimed): format a pool per population, create the files through the API
 * (directories of 1 000 empty files: "m/d0000/f000" ...), unmount. Measurement: for
 * each run and population, fork+exec this program in the hidden --probe-mount mode;
 * the fresh child reads VmRSS (and RssAnon/RssFile/RssShmem) from /proc/self/status,
 * times ferrite_mount() with CLOCK_MONOTONIC, reads the counters again and times one
 * stat of a file (so a mount that defers all of its work shows up somewhere). A fresh
 * process is the fair setting: nothing of the pool is mapped or cached in it, as after
 * a reboot -- except the pool file's pages themselves, which stay resident in /dev/shm.
 * The claim under test (BRIEF.md) is that mount time and DRAM use do not grow with the
 * number of files, so the table compares the populations with each other.
 */
#ifndef _GNU_SOURCE /* the top-level CMakeLists.txt defines it */
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <ferrite.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench.h"

#define PER_DIR 1000u

static uint64_t mount_pool_size(const struct bench_opts *o, uint64_t files)
{
	const uint64_t gib = 1ull << 30;
	uint64_t need = files * 1024 + (256ull << 20); /* ~420 bytes per empty file today */

	if (o->mount_pool_size)
		return o->mount_pool_size;
	need = (need + gib - 1) / gib * gib;
	return need < gib ? gib : need;
}

static void mount_pool_path(const struct bench_opts *o, uint64_t files, char *buf, size_t len)
{
	char dir[4096];

	snprintf(dir, sizeof(dir), "%s", o->pool);
	snprintf(buf, len, "%s/ferrite-bench-mount-%llu.pool", dirname(dir),
		 (unsigned long long)files);
}

static int populate(const char *pool, uint64_t files, uint64_t size, char *why, size_t whylen)
{
	struct ferrite_mkfs_opts mo = {0};
	ferrite_fs *fs;
	char path[64];
	char sz[32];
	uint64_t step = files / 10 ? files / 10 : 1;
	double t0 = now_sec();
	int rc;

	mo.size = size;
	mo.mode = FERRITE_MODE_SYNC;
	mo.force = 1;
	progress("mount: creating %s (%s) with %llu files", pool, fmt_size(size, sz, sizeof(sz)),
		 (unsigned long long)files);
	rc = ferrite_mkfs(pool, &mo);
	if (rc < 0) {
		snprintf(why, whylen, "ferrite_mkfs(%.60s): %.120s", pool, ferrite_errmsg());
		return rc;
	}
	rc = ferrite_mount(pool, NULL, &fs);
	if (rc < 0) {
		snprintf(why, whylen, "ferrite_mount(%.60s): %.120s", pool, ferrite_errmsg());
		return rc;
	}
	rc = ferrite_mkdir(fs, "m", 0755);
	for (uint64_t i = 0; rc >= 0 && i < files; i++) {
		if (i % PER_DIR == 0) {
			snprintf(path, sizeof(path), "m/d%04llu",
				 (unsigned long long)(i / PER_DIR));
			rc = ferrite_mkdir(fs, path, 0755);
			if (rc < 0)
				break;
		}
		snprintf(path, sizeof(path), "m/d%04llu/f%03llu", (unsigned long long)(i / PER_DIR),
			 (unsigned long long)(i % PER_DIR));
		rc = ferrite_open(fs, path, O_CREAT | O_WRONLY, 0644);
		if (rc >= 0)
			rc = ferrite_close(fs, rc);
		if (files >= 100000 && (i + 1) % step == 0)
			progress("mount: %llu/%llu files (%.0f files/s)",
				 (unsigned long long)(i + 1), (unsigned long long)files,
				 (double)(i + 1) / (now_sec() - t0));
	}
	if (rc < 0)
		snprintf(why, whylen, "populating %.60s: %.40s (%.80s)", pool, strerror(-rc),
			 ferrite_errmsg());
	ferrite_unmount(fs);
	return rc < 0 ? rc : 0;
}

/* One fresh child: fork + exec of ourselves in --probe-mount mode. */
static int probe_once(const char *pool, struct mount_result *r)
{
	char out[1024];
	size_t got = 0;
	ssize_t n;
	int pfd[2];
	int status;
	pid_t pid;
	double ns, stat_ns;
	long rss0, rss1, anon0, anon1, shm0, shm1, file0, file1;
	int rc;

	if (pipe2(pfd, O_CLOEXEC) < 0)
		return -errno;
	fflush(NULL);
	pid = fork();
	if (pid < 0)
		return -errno;
	if (pid == 0) {
		dup2(pfd[1], STDOUT_FILENO);
		execl("/proc/self/exe", "ferrite-bench", "--probe-mount", pool, (char *)NULL);
		_exit(127);
	}
	close(pfd[1]);
	while (got < sizeof(out) - 1 && (n = read(pfd[0], out + got, sizeof(out) - 1 - got)) > 0)
		got += (size_t)n;
	out[got] = '\0';
	close(pfd[0]);
	if (waitpid(pid, &status, 0) < 0)
		return -errno;
	if (sscanf(out,
		   "rc=%d mount_ns=%lf stat_ns=%lf rss=%ld,%ld anon=%ld,%ld shmem=%ld,%ld "
		   "file=%ld,%ld",
		   &rc, &ns, &stat_ns, &rss0, &rss1, &anon0, &anon1, &shm0, &shm1, &file0,
		   &file1) != 11) {
		if (WIFSIGNALED(status))
			snprintf(r->err, sizeof(r->err), "probe child killed by signal %d (%s)",
				 WTERMSIG(status), strsignal(WTERMSIG(status)));
		else
			snprintf(r->err, sizeof(r->err), "probe child (exit %d): %.160s",
				 WEXITSTATUS(status), got ? out : "no output");
		return -EIO;
	}
	if (rc < 0) {
		char *msg = strstr(out, "err=");

		snprintf(r->err, sizeof(r->err), "ferrite_mount in child: %s",
			 msg ? msg + 4 : strerror(-rc));
		return rc;
	}
	if (r->n < BENCH_MAX_RUNS) {
		r->mount_ms[r->n] = ns / 1e6;
		r->stat_us[r->n] = stat_ns / 1e3;
		r->rss_kib[r->n] = (double)(rss1 - rss0);
		r->anon_kib[r->n] = (double)(anon1 - anon0);
		r->shmem_kib[r->n] = (double)((shm1 - shm0) + (file1 - file0));
		r->n++;
	}
	return 0;
}

int mount_group_run(const struct bench_opts *o, struct mount_result *res, int nres, char *why,
		    size_t whylen)
{
	char pool[4096];
	char dir[4096];
	int rc;

	snprintf(dir, sizeof(dir), "%s", o->pool);
	rc = mkdir_p(dirname(dir));
	if (rc < 0) {
		snprintf(why, whylen, "cannot create the directory of %s: %s", o->pool,
			 strerror(-rc));
		return rc;
	}
	/* One population at a time: the engine allocates a pool in full at mkfs. */
	for (int i = 0; i < nres; i++) {
		struct mount_result *r = &res[i];

		memset(r, 0, sizeof(*r));
		r->files = o->mount_files[i];
		r->pool_size = mount_pool_size(o, r->files);
		mount_pool_path(o, r->files, pool, sizeof(pool));
		rc = populate(pool, r->files, r->pool_size, r->err, sizeof(r->err));
		if (rc < 0)
			r->failed = 1;
		for (int run = 0; run < o->runs && !r->failed; run++) {
			rc = probe_once(pool, r);
			if (rc < 0) {
				r->failed = 1;
				progress("mount %d/%d %8llu files FAILED: %s", run + 1, o->runs,
					 (unsigned long long)r->files, r->err);
				break;
			}
			progress("mount %d/%d %8llu files: mount %.3f ms, RSS +%.0f KiB", run + 1,
				 o->runs, (unsigned long long)r->files, r->mount_ms[r->n - 1],
				 r->rss_kib[r->n - 1]);
		}
		if (r->failed || !o->keep)
			unlink(pool);
	}
	return 0;
}

/* Runs in the fresh child. Output: one line on stdout for probe_once(). */
int mount_probe_main(const char *pool)
{
	ferrite_fs *fs = NULL;
	struct stat st;
	long rss0, rss1, anon0, anon1, shm0, shm1, file0, file1;
	double t0, t1, t2 = 0, t3 = 0;
	int rc;

	rss0 = proc_status_kib("VmRSS");
	anon0 = proc_status_kib("RssAnon");
	shm0 = proc_status_kib("RssShmem");
	file0 = proc_status_kib("RssFile");
	t0 = now_sec();
	rc = ferrite_mount(pool, NULL, &fs);
	t1 = now_sec();
	rss1 = proc_status_kib("VmRSS");
	anon1 = proc_status_kib("RssAnon");
	shm1 = proc_status_kib("RssShmem");
	file1 = proc_status_kib("RssFile");
	if (rc == 0) {
		t2 = now_sec();
		ferrite_stat(fs, "m/d0000/f000", &st);
		t3 = now_sec();
	}
	printf("rc=%d mount_ns=%.0f stat_ns=%.0f rss=%ld,%ld anon=%ld,%ld shmem=%ld,%ld "
	       "file=%ld,%ld",
	       rc, (t1 - t0) * 1e9, (t3 - t2) * 1e9, rss0, rss1, anon0, anon1, shm0, shm1, file0,
	       file1);
	if (rc < 0)
		printf(" err=%s", ferrite_errmsg());
	printf("\n");
	fflush(stdout);
	if (rc == 0)
		ferrite_unmount(fs);
	return rc < 0 ? 1 : 0;
}
