/*
 * cmd_bench.c -- `ferrite bench`: runs the benchmark, ferrite-bench, a
 * program of its own (bench/: it links libpmem2 for its raw column and
 * re-executes itself for the mount probes). It lives in bench/ of a build
 * tree and in libexec/ferrite of an installation; $FERRITE_BENCH overrides
 * both. Every argument is passed on; it names itself `ferrite bench`.
 */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"

#ifndef FERRITE_LIBEXECDIR
#define FERRITE_LIBEXECDIR "libexec"
#endif
#define BENCH_NAME "ferrite-bench"

int cmd_bench(int argc, char **argv)
{
	char path[PATH_MAX];
	const char *const beside[] = {"/../bench", "/../" FERRITE_LIBEXECDIR "/ferrite",
				      "/../libexec/ferrite"};
	int rc = cli_find_beside("FERRITE_BENCH", BENCH_NAME, beside, 3, X_OK, path, sizeof(path));
	if (rc) {
		fprintf(stderr,
			"ferrite bench: cannot find %s in libexec/ferrite (or bench/ of a build "
			"tree; set $FERRITE_BENCH): %s\n",
			BENCH_NAME, strerror(-rc));
		return 1;
	}
	setenv("FERRITE_BENCH_AS", "ferrite bench", 1);
	argv[0] = path;
	(void)argc;
	execv(path, argv);
	fprintf(stderr, "ferrite bench: cannot run %s: %s\n", path, strerror(errno));
	return 1;
}
