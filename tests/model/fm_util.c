/*
 * fm_util.c -- deterministic random numbers and data, recursive removal,
 * errno names and the kill loop of the targeted crash tests. Determinism here is what makes a
 * failing seed replayable: the same seed yields the same ops and the same bytes.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "fm.h"

#include "ferrite.h"

#include <errno.h>
#include <ftw.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

uint64_t fm_rand(struct fm_rng *r)
{
	uint64_t z = (r->s += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

uint64_t fm_below(struct fm_rng *r, uint64_t n)
{
	if (n == 0)
		return 0;
	return fm_rand(r) % n;
}

int64_t fm_range(struct fm_rng *r, int64_t lo, int64_t hi)
{
	if (hi <= lo)
		return lo;
	return lo + (int64_t)fm_below(r, (uint64_t)(hi - lo) + 1);
}

uint64_t fm_mix(uint64_t a, uint64_t b)
{
	struct fm_rng r = {a * 0x2545f4914f6cdd1dull ^ b};
	fm_rand(&r);
	return fm_rand(&r);
}

void fm_fill(void *buf, size_t len, uint64_t seed)
{
	uint8_t *p = buf;
	if (seed % 10 == 0) {
		memset(buf, 0, len);
		return;
	}
	struct fm_rng r = {seed};
	size_t i = 0;
	for (; i + 8 <= len; i += 8) {
		uint64_t v = fm_rand(&r);
		memcpy(p + i, &v, 8);
	}
	if (i < len) {
		uint64_t v = fm_rand(&r);
		memcpy(p + i, &v, len - i);
	}
}

static int rm_one(const char *p, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)ftw;
	if (flag == FTW_DP || flag == FTW_D)
		return rmdir(p) < 0 && errno != ENOENT ? -1 : 0;
	return unlink(p) < 0 && errno != ENOENT ? -1 : 0;
}

int fm_rm_rf(const char *path)
{
	if (access(path, F_OK) != 0)
		return 0;
	return nftw(path, rm_one, 32, FTW_DEPTH | FTW_PHYS);
}

const char *fm_errname(int64_t ret)
{
	static __thread char buf[32];
	if (ret >= 0) {
		snprintf(buf, sizeof buf, "%lld", (long long)ret);
		return buf;
	}
	const char *n = strerrorname_np((int)-ret);
	if (n)
		return n;
	snprintf(buf, sizeof buf, "-%lld", (long long)-ret);
	return buf;
}

int fm_kill_fsck_mount(const char *pool, int round, long delay, void **fs)
{
	char why[4096];
	int r = fm_ferrite_fsck(pool, why, sizeof why);
	if (r != FERRITE_FSCK_CLEAN) {
		fprintf(stderr, "round %d (kill after %ld us): fsck not clean:\n%s\n", round, delay,
			why);
		return 1;
	}
	r = ferrite_mount(pool, NULL, (ferrite_fs **)fs);
	if (r < 0) {
		fprintf(stderr, "round %d: ferrite_mount = %s: %s\n", round, fm_errname(r),
			ferrite_errmsg());
		return 1;
	}
	return 0;
}

static int kill_rounds(const struct fm_kill_test *kt, const char *pool, int rounds, uint64_t seed)
{
	volatile int *flag =
	    mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (flag == MAP_FAILED)
		return 2;
	struct fm_rng rng = {fm_mix(seed, 0x401e)};
	int rc = 0;
	for (int round = 0; round < rounds && !rc; round++) {
		*flag = 0;
		long delay = (long)fm_below(&rng, (uint64_t)kt->max_delay_us);
		fflush(stderr);
		pid_t pid = fork();
		if (pid < 0) {
			rc = 2;
			break;
		}
		if (pid == 0) {
			kt->child(pool, flag);
			_exit(0);
		}
		int st;
		while (!rc && !__atomic_load_n(flag, __ATOMIC_ACQUIRE)) {
			if (waitpid(pid, &st, WNOHANG) == pid) {
				fprintf(stderr,
					"%s: round %d: the child ended early (status 0x%x)\n",
					kt->name, round, st);
				rc = 1;
			}
		}
		if (rc)
			break;
		struct timespec ts = {0, delay * 1000};
		nanosleep(&ts, NULL);
		kill(pid, SIGKILL);
		waitpid(pid, &st, 0);
		if (kt->check(pool, round, delay)) {
			fprintf(stderr, "%s: FAILED in round %d (seed %llu); kept %s\n", kt->name,
				round, (unsigned long long)seed, pool);
			rc = 1;
		}
	}
	munmap((void *)flag, 4096);
	return rc;
}

int fm_kill_main(int argc, char **argv, const struct fm_kill_test *kt)
{
	int rounds = kt->rounds;
	uint64_t seed = 1;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--rounds") && i + 1 < argc) {
			rounds = atoi(argv[++i]);
		} else if (!strcmp(argv[i], "--seed") && i + 1 < argc) {
			seed = strtoull(argv[++i], NULL, 0);
		} else {
			fprintf(stderr, "usage: %s [--rounds N] [--seed S]\n", kt->name);
			return 2;
		}
	}
	char pool[160], why[1024];
	snprintf(pool, sizeof pool, "/dev/shm/ferrite-%s-%d.pool", kt->name, (int)getpid());
	if (fm_ferrite_mkfs(pool, kt->pool_mib << 20, kt->mode, why, sizeof why) < 0) {
		fprintf(stderr, "%s\n", why);
		fm_pool_remove(pool);
		return 2;
	}
	int rc = kill_rounds(kt, pool, rounds, seed);
	if (rc)
		return rc;
	printf("%s passed: %d %s\n", kt->name, rounds, kt->passed);
	fm_pool_remove(pool);
	return 0;
}
