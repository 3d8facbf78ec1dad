/*
 * metaproc.c -- metadata calls from one or more processes in one directory,
 * for bench/programs/run.sh (group procmeta): the processes are forked from
 * this one, as a shell or a server forks its workers, so under `ferrite run`
 * they share the pool the parent mounted.
 *
 *   metaproc DIR NFILES NPROC
 *
 * Each of NPROC processes takes NFILES/NPROC names: it creates them
 * (open O_CREAT|O_EXCL + close), opens and closes each, stats each; a pipe
 * starts every phase at once in all processes. Prints one line per phase,
 * "create|openclose|stat OPS_PER_SECOND", over the wall time from the start
 * of the phase to the end of its slowest process; the files are removed
 * afterwards (untimed).
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int phase(const char *dir, int p, long lo, long hi, int which)
{
	char path[4096];
	for (long i = lo; i < hi; i++) {
		snprintf(path, sizeof(path), "%s/f%d-%ld", dir, p, i);
		if (which == 0 || which == 1) {
			int fd =
			    open(path, which == 0 ? O_WRONLY | O_CREAT | O_EXCL : O_RDONLY, 0644);
			if (fd < 0 || close(fd))
				return -1;
		} else if (which == 2) {
			struct stat st;
			if (stat(path, &st))
				return -1;
		} else if (unlink(path)) {
			return -1;
		}
	}
	return 0;
}

int main(int argc, char **argv)
{
	if (argc != 4) {
		fprintf(stderr, "usage: metaproc DIR NFILES NPROC\n");
		return 2;
	}
	const char *dir = argv[1];
	long n = atol(argv[2]);
	int np = atoi(argv[3]);
	if (n <= 0 || np <= 0 || np > 64)
		return 2;
	int go[4][2], done[2];
	for (int k = 0; k < 4; k++)
		if (pipe(go[k]))
			return 2;
	if (pipe(done))
		return 2;
	pid_t pids[64];
	for (int p = 0; p < np; p++) {
		pids[p] = fork();
		if (pids[p] < 0)
			return 2;
		if (pids[p] == 0) {
			long lo = n * p / np, hi = n * (p + 1) / np;
			/* only the parent writes go: a worker that fails makes the
			 * others' next read end, not wait for good */
			for (int k = 0; k < 4; k++)
				close(go[k][1]);
			for (int k = 0; k < 4; k++) {
				char c;
				if (read(go[k][0], &c, 1) != 1)
					_exit(3);
				int rc = phase(dir, p, lo, hi, k);
				c = rc ? 'x' : 'o';
				if (write(done[1], &c, 1) != 1 || rc) {
					perror(k == 0	? "create"
					       : k == 1 ? "open"
					       : k == 2 ? "stat"
							: "unlink");
					_exit(1);
				}
			}
			_exit(0);
		}
	}
	close(done[1]); /* a worker that dies without a word ends the parent's read */
	static const char *names[] = {"create", "openclose", "stat"};
	int bad = 0;
	for (int k = 0; k < 4 && !bad; k++) {
		double t0 = now();
		char c = 'g';
		for (int p = 0; p < np; p++)
			if (write(go[k][1], &c, 1) != 1)
				return 2;
		for (int p = 0; p < np; p++)
			if (read(done[0], &c, 1) != 1 || c != 'o')
				bad = 1;
		double t = now() - t0;
		if (k < 3 && !bad)
			printf("%s %.0f\n", names[k], (double)n / t);
	}
	for (int k = 0; k < 4; k++)
		close(go[k][1]); /* a worker left waiting ends */
	for (int p = 0; p < np; p++) {
		int st;
		waitpid(pids[p], &st, 0);
		bad |= !WIFEXITED(st) || WEXITSTATUS(st) != 0;
	}
	return bad;
}
