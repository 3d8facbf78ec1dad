/*
 * park.c -- placeholders kept open for the next open (S4 in shim.h): when the
 * program closes a pool descriptor, its placeholder is parked instead of
 * closed, and the next open of a pool file takes it back, so an open and a
 * close of a pool file make no system call in the common case: a number
 * keeps the close-on-exec flag its last open gave it, so a program that
 * opens its files alike (with O_CLOEXEC or without) never changes it.
 *
 * Invariants: P1 a parked number is open in the kernel, an O_PATH handle of
 *               /dev/null, in no table slot (S2), so nothing else can be
 *               given its number; its FD_CLOEXEC is as cloexec_bits says,
 *               and every exec the shim makes or sees sets it first
 *               (sh_park_before_exec), so no new image inherits one;
 *             P2 open_below: every number below it was open when last
 *               checked -- it rises to t + 1 when the kernel gives the
 *               placeholder t (its lowest free number) and falls to any
 *               number the shim sees freed. A parked number is handed out
 *               only if it is at most open_below, so an open still returns
 *               the lowest free number as POSIX says, unless a number was
 *               freed where the shim does not see it (fclose of a host
 *               stream inside libc, a raw system call): then a pool open may
 *               return a higher number than the kernel would. A parked
 *               number is open, so while one is, the kernel gives a host
 *               open (or socket, pipe) the next number above it;
 *             P3 only the process whose descriptors they are changes the set
 *               from the paths a vfork child takes (close_range, closefrom,
 *               close and dup2 onto a parked number): a vfork child shares
 *               this memory but not the descriptor table.
 * Locking: park_lock guards the set; open_below is one atomic word.
 */
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <unistd.h>

#include "preload/shim.h"

#define PARK_MAX 16    /* numbers kept at most */
#define PARK_FDS 65536 /* numbers whose close-on-exec flag the shim follows */

static pthread_mutex_t park_lock = PTHREAD_MUTEX_INITIALIZER;
static int parked[PARK_MAX];
static int nparked;
static int open_below;
static pid_t park_pid;
/* a set bit: placeholder n has FD_CLOEXEC (as the shim last set it) */
static uint64_t cloexec_bits[PARK_FDS / 64];
/* a set bit: n is parked (the program's calls on it fail with EBADF) */
uint64_t sh_parked_bits[PARK_FDS / 64];

static void mark(int fd, int on)
{
	uint64_t bit = 1ULL << (fd % 64);
	if (on)
		__atomic_fetch_or(&sh_parked_bits[fd / 64], bit, __ATOMIC_RELEASE);
	else
		__atomic_fetch_and(&sh_parked_bits[fd / 64], ~bit, __ATOMIC_RELEASE);
}

/* Under park_lock: drops entry i. */
static void drop(int i)
{
	mark(parked[i], 0);
	parked[i] = parked[--nparked];
}

static int is_owner(void)
{
	return getpid() == __atomic_load_n(&park_pid, __ATOMIC_RELAXED);
}

void sh_park_start(void)
{
	__atomic_store_n(&park_pid, getpid(), __ATOMIC_RELAXED);
}

void sh_park_cloexec(int fd, int on)
{
	if (fd < 0 || fd >= PARK_FDS)
		return;
	uint64_t bit = 1ULL << (fd % 64);
	if (on)
		__atomic_fetch_or(&cloexec_bits[fd / 64], bit, __ATOMIC_RELAXED);
	else
		__atomic_fetch_and(&cloexec_bits[fd / 64], ~bit, __ATOMIC_RELAXED);
}

void sh_park_opened(int fd)
{
	__atomic_store_n(&open_below, fd + 1, __ATOMIC_RELAXED);
}

void sh_park_freed(int fd)
{
	int v = __atomic_load_n(&open_below, __ATOMIC_RELAXED);
	while (fd < v && !__atomic_compare_exchange_n(&open_below, &v, fd, 1, __ATOMIC_RELAXED,
						      __ATOMIC_RELAXED))
		;
}

void sh_kclose(int fd)
{
	if (REAL(close)(fd) == 0)
		sh_park_freed(fd);
}

/* Under park_lock: index of fd in the set, -1 if not parked. */
static int find(int fd)
{
	for (int i = 0; i < nparked; i++)
		if (parked[i] == fd)
			return i;
	return -1;
}

int sh_park_take(int minfd, int cloexec)
{
	if (!__atomic_load_n(&nparked, __ATOMIC_RELAXED))
		return -1;
	pthread_mutex_lock(&park_lock);
	int best = -1;
	for (int i = 0; i < nparked; i++)
		if (parked[i] >= minfd && (best < 0 || parked[i] < parked[best]))
			best = i;
	int fd = -1;
	if (best >= 0 && parked[best] <= __atomic_load_n(&open_below, __ATOMIC_RELAXED)) {
		fd = parked[best]; /* P2: nothing below it is free */
		drop(best);
	}
	pthread_mutex_unlock(&park_lock);
	if (fd >= 0 && sh_park_set_cloexec(fd, cloexec)) {
		sh_kclose(fd);
		return -1;
	}
	return fd;
}

static int cloexec_is(int fd)
{
	return fd >= 0 && fd < PARK_FDS &&
	       (__atomic_load_n(&cloexec_bits[fd / 64], __ATOMIC_RELAXED) >> (fd % 64) & 1);
}

int sh_park_set_cloexec(int fd, int on)
{
	if (cloexec_is(fd) == !!on)
		return 0; /* as it is: no system call (P1) */
	if (REAL(fcntl)(fd, F_SETFD, on ? FD_CLOEXEC : 0))
		return -errno;
	sh_park_cloexec(fd, on);
	return 0;
}

void sh_park_before_exec(void)
{
	if (!__atomic_load_n(&nparked, __ATOMIC_RELAXED))
		return;
	int owner = is_owner();
	pthread_mutex_lock(&park_lock);
	/* all of them, whatever the bits say: an exec is rare and dear, and a
	 * leaked number would be the new image's for good */
	for (int i = 0; i < nparked; i++) {
		int fd = parked[i];
		/* a vfork child sets it in its own table only: the bits are
		 * its parent's (P3) */
		if (!REAL(fcntl)(fd, F_SETFD, FD_CLOEXEC) && owner)
			sh_park_cloexec(fd, 1);
	}
	pthread_mutex_unlock(&park_lock);
}

int sh_park_put(int fd)
{
	/* 0-2 never: the program may close one to have open() give it back */
	if (fd < 3 || fd >= PARK_FDS || __atomic_load_n(&nparked, __ATOMIC_RELAXED) >= PARK_MAX)
		return 0;
	pthread_mutex_lock(&park_lock);
	int ok = nparked < PARK_MAX;
	if (ok) {
		parked[nparked++] = fd;
		mark(fd, 1);
	}
	pthread_mutex_unlock(&park_lock);
	return ok;
}

/* Takes fd out of the set if it is there (P3: only the owner). */
static int unpark(int fd)
{
	if (!__atomic_load_n(&nparked, __ATOMIC_RELAXED))
		return 0;
	pthread_mutex_lock(&park_lock);
	int i = find(fd);
	if (i >= 0 && is_owner())
		drop(i);
	else
		i = -1;
	pthread_mutex_unlock(&park_lock);
	return i >= 0;
}

int sh_park_claim(int fd)
{
	return unpark(fd);
}

int sh_park_close(int fd)
{
	if (!unpark(fd))
		return 0;
	sh_kclose(fd);
	return 1;
}

void sh_park_closed_range(unsigned first, unsigned last)
{
	if (!is_owner())
		return;
	pthread_mutex_lock(&park_lock);
	for (int i = 0; i < nparked;)
		if ((unsigned)parked[i] >= first && (unsigned)parked[i] <= last)
			drop(i);
		else
			i++;
	pthread_mutex_unlock(&park_lock);
	if (first <= INT32_MAX)
		sh_park_freed((int)first);
}

int sh_park_release(void)
{
	if (!is_owner())
		return 0;
	pthread_mutex_lock(&park_lock);
	int n = nparked;
	while (nparked) {
		int fd = parked[0];
		drop(0);
		sh_kclose(fd);
	}
	pthread_mutex_unlock(&park_lock);
	return n > 0;
}

/* fork: the set is copied whole, with the descriptors it names */
void sh_park_fork_prepare(void)
{
	pthread_mutex_lock(&park_lock);
}

void sh_park_fork_parent(void)
{
	pthread_mutex_unlock(&park_lock);
}

void sh_park_fork_child(void)
{
	pthread_mutex_t fresh = PTHREAD_MUTEX_INITIALIZER;
	park_lock = fresh; /* locked by a thread the child does not have */
	sh_park_start();
}
