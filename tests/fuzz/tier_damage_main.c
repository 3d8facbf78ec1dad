/*
 * tier_damage_main.c -- the seeded damage loop over tiered pools
 * (tier_damage.h): builds one populated pool per consistency, then for each
 * trial copies it, damages one structure, and in a forked child with a
 * timeout runs fsck -n, mount + walk + read + write + unmount, fsck --repair
 * and fsck. A child that dies by a signal, exits with a sanitizer's status,
 * hangs, or breaks a contract (fsck -n wrote, or called clean a pool that
 * does not mount) is a failure, printed with the line that replays it.
 *
 *   tier_damage [-n TRIALS] [-s FIRST_SEED] [-m 0|1|2] [-t SECONDS] [-v]
 *   tier_damage -r SEED -m MODE [-k]    one trial, in this process (-k keeps
 *                                        the pool and directory)
 * -m: 0 per-write, 1 epoch, 2 both (alternating). -t: stop after this long.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "ferrite.h"
#include "tier_damage.h"

#define TRIAL_TIMEOUT_S 60

static char dir[256];

struct base {
	char pool[300], backing[300], pristine[300];
	uint8_t *img;
	size_t len;
};

static int sh(const char *fmt, const char *a, const char *b, const char *c)
{
	char cmd[9000];
	snprintf(cmd, sizeof cmd, fmt, a, b, c);
	return system(cmd);
}

static int read_all(const char *path, uint8_t **out, size_t *len)
{
	int fd = open(path, O_RDONLY);
	struct stat st;
	if (fd < 0 || fstat(fd, &st) != 0)
		return -1;
	*len = (size_t)st.st_size;
	*out = malloc(*len);
	size_t got = 0;
	while (*out && got < *len) {
		ssize_t n = read(fd, *out + got, *len - got);
		if (n <= 0)
			break;
		got += (size_t)n;
	}
	close(fd);
	return *out && got == *len ? 0 : -1;
}

static int write_all(const char *path, const uint8_t *p, size_t len)
{
	int fd = open(path, O_CREAT | O_RDWR | O_TRUNC, 0600);
	if (fd < 0)
		return -1;
	size_t done = 0;
	while (done < len) {
		ssize_t n = write(fd, p + done, len - done);
		if (n <= 0)
			break;
		done += (size_t)n;
	}
	close(fd);
	return done == len ? 0 : -1;
}

/* Puts the tree below dst back as it is below src, changing files in place:
 * the records name the backing files by inode number and handle, so a copy
 * (new inodes) would be a different directory to the pool. Returns 0. */
static int restore(const char *src, const char *dst)
{
	DIR *d = opendir(dst);
	struct dirent *e;
	char a[4200], b[4200];
	while (d && (e = readdir(d))) { /* what src does not have goes */
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		snprintf(a, sizeof a, "%s/%s", src, e->d_name);
		snprintf(b, sizeof b, "%s/%s", dst, e->d_name);
		struct stat sa, sb;
		if (lstat(a, &sa) != 0 || lstat(b, &sb) != 0 ||
		    (sa.st_mode & S_IFMT) != (sb.st_mode & S_IFMT))
			sh("rm -rf '%s'%s%s", b, "", "");
	}
	if (d)
		closedir(d);
	d = opendir(src);
	if (!d)
		return -1;
	static char buf[1 << 16];
	while ((e = readdir(d))) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		snprintf(a, sizeof a, "%s/%s", src, e->d_name);
		snprintf(b, sizeof b, "%s/%s", dst, e->d_name);
		struct stat sa;
		if (lstat(a, &sa) != 0)
			continue;
		if (S_ISDIR(sa.st_mode)) {
			mkdir(b, sa.st_mode & 07777);
			restore(a, b);
		} else if (S_ISLNK(sa.st_mode)) {
			char t[4096];
			ssize_t n = readlink(a, t, sizeof t - 1);
			if (n >= 0 && access(b, F_OK) != 0) {
				t[n] = 0;
				if (symlink(t, b) != 0)
					continue;
			}
		} else if (S_ISREG(sa.st_mode)) {
			int in = open(a, O_RDONLY), out = open(b, O_WRONLY | O_CREAT, 0600);
			ssize_t n;
			off_t at = 0;
			while (in >= 0 && out >= 0 && (n = read(in, buf, sizeof buf)) > 0)
				at += pwrite(out, buf, (size_t)n, at);
			if (out >= 0 && ftruncate(out, sa.st_size) == 0)
				fsync(out);
			if (in >= 0)
				close(in);
			if (out >= 0)
				close(out);
		} else {
			continue;
		}
		chmod(b, sa.st_mode & 07777);
		struct timespec ts[2] = {sa.st_atim, sa.st_mtim};
		utimensat(AT_FDCWD, b, ts, AT_SYMLINK_NOFOLLOW);
	}
	closedir(d);
	struct stat sd;
	if (stat(src, &sd) == 0) {
		struct timespec ts[2] = {sd.st_atim, sd.st_mtim};
		utimensat(AT_FDCWD, dst, ts, 0);
	}
	return 0;
}

static int base_make(struct base *b, int mode)
{
	const char *tag = mode ? "epoch" : "write";
	snprintf(b->pool, sizeof b->pool, "%s/base-%s.pool", dir, tag);
	snprintf(b->backing, sizeof b->backing, "%s/b-%s", dir, tag);
	snprintf(b->pristine, sizeof b->pristine, "%s/p-%s", dir, tag);
	if (sh("mkdir -p '%s' '%s'%s", b->backing, b->pristine, "") != 0)
		return -1;
	int rc = tier_fuzz_build_mode(b->pool, b->backing, mode);
	if (rc) {
		fprintf(stderr, "tier_damage: building the %s pool: %s (%s)\n", tag, strerror(-rc),
			ferrite_errmsg());
		return -1;
	}
	if (sh("cp -a '%s/.' '%s/'%s", b->backing, b->pristine, "") != 0)
		return -1;
	return read_all(b->pool, &b->img, &b->len);
}

/* One trial, in the calling process: the backing directory as built, the
 * image damaged by seed, then everything over it. */
static int trial(const struct base *b, uint64_t seed, char *what, size_t cap, char *why,
		 size_t wcap)
{
	if (restore(b->pristine, b->backing) != 0)
		return 99;
	uint8_t *img = malloc(b->len);
	if (!img)
		return 99;
	memcpy(img, b->img, b->len);
	tier_fuzz_damage(img, b->len, seed, what, cap);
	/* Told before the run: a crash must not take the description along. */
	char whatfile[300];
	snprintf(whatfile, sizeof whatfile, "%s/what", dir);
	FILE *f = fopen(whatfile, "w");
	if (f) {
		fputs(what, f);
		fclose(f);
	}
	char pool[300];
	snprintf(pool, sizeof pool, "%s/trial.pool", dir);
	int rc = write_all(pool, img, b->len);
	free(img);
	if (rc)
		return 99;
	return tier_fuzz_exercise(pool, b->backing, why, wcap);
}

static void usage(void)
{
	fprintf(stderr, "usage: tier_damage [-n TRIALS] [-s FIRST_SEED] [-m 0|1|2] [-t SECONDS] "
			"[-v]\n       tier_damage -r SEED -m 0|1 [-k]\n");
	exit(2);
}

int main(int argc, char **argv)
{
	uint64_t trials = 200, first = 1, replay = 0;
	int mode = 2, verbose = 0, keep = 0, do_replay = 0, opt;
	double budget = 0;
	while ((opt = getopt(argc, argv, "n:s:m:t:r:vk")) != -1) {
		if (opt == 'n')
			trials = strtoull(optarg, NULL, 0);
		else if (opt == 's')
			first = strtoull(optarg, NULL, 0);
		else if (opt == 'm')
			mode = atoi(optarg);
		else if (opt == 't')
			budget = atof(optarg);
		else if (opt == 'r')
			replay = strtoull(optarg, NULL, 0), do_replay = 1;
		else if (opt == 'v')
			verbose = 1;
		else if (opt == 'k')
			keep = 1;
		else
			usage();
	}
	if (mode < 0 || mode > 2 || (do_replay && mode == 2))
		usage();
	snprintf(dir, sizeof dir, "/dev/shm/ferrite-tierfuzz-%d", (int)getpid());
	if (sh("rm -rf '%s' && mkdir -p '%s'%s", dir, dir, "") != 0)
		return 2;
	struct base bases[2];
	memset(bases, 0, sizeof bases);
	for (int m = 0; m < 2; m++)
		if ((mode == 2 || mode == m) && base_make(&bases[m], m) != 0)
			return 2;
	char what[512], why[512];
	if (do_replay) {
		int rc = trial(&bases[mode], replay, what, sizeof what, why, sizeof why);
		printf("seed %llu mode %d: %s\n  -> %s\n", (unsigned long long)replay, mode, what,
		       rc ? why : "no contract broken");
		if (keep)
			printf("kept: %s\n", dir);
		else
			sh("rm -rf '%s'%s%s", dir, "", "");
		for (int m = 0; m < 2; m++)
			free(bases[m].img);
		return rc ? 1 : 0;
	}
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	uint64_t run = 0, failed = 0;
	char whatfile[300];
	snprintf(whatfile, sizeof whatfile, "%s/what", dir);
	for (uint64_t i = 0; i < trials; i++) {
		clock_gettime(CLOCK_MONOTONIC, &t1);
		if (budget > 0 && (double)(t1.tv_sec - t0.tv_sec) > budget)
			break;
		uint64_t seed = first + i;
		int m = mode == 2 ? (int)(seed & 1) : mode;
		fflush(stdout);
		pid_t pid = fork();
		if (pid == 0) {
			alarm(TRIAL_TIMEOUT_S);
			int rc = trial(&bases[m], seed, what, sizeof what, why, sizeof why);
			FILE *f = fopen(whatfile, "w");
			if (f) {
				fprintf(f, "%s%s%s", what, rc ? ": " : "", rc ? why : "");
				fclose(f);
			}
			_exit(rc ? 10 + rc : 0);
		}
		int st;
		waitpid(pid, &st, 0);
		run++;
		FILE *f = fopen(whatfile, "r");
		what[0] = 0;
		if (f) {
			if (!fgets(what, sizeof what, f))
				what[0] = 0;
			fclose(f);
			unlink(whatfile);
		}
		const char *kind = NULL;
		if (WIFSIGNALED(st))
			kind = WTERMSIG(st) == SIGALRM ? "HANG" : "CRASH";
		else if (WEXITSTATUS(st) == 11 || WEXITSTATUS(st) == 12)
			kind = "CONTRACT";
		else if (WEXITSTATUS(st) != 0)
			kind = "SANITIZER/EXIT";
		if (kind) {
			failed++;
			printf(
			    "%s seed %llu mode %d (status %#x): %s\n  replay: %s -r %llu -m %d\n",
			    kind, (unsigned long long)seed, m, st,
			    what[0] ? what : "(died before describing its damage)", argv[0],
			    (unsigned long long)seed, m);
		} else if (verbose) {
			printf("ok seed %llu mode %d\n", (unsigned long long)seed, m);
		}
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	printf("tier_damage: %llu damaged images, %llu failed, %.1f s\n", (unsigned long long)run,
	       (unsigned long long)failed,
	       (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9);
	sh("rm -rf '%s'%s%s", dir, "", "");
	for (int m = 0; m < 2; m++)
		free(bases[m].img);
	return failed ? 1 : 0;
}
