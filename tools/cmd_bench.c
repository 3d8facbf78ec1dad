/*
 * cmd_bench.c -- `ferrite bench`: runs the benchmark, ferrite-bench, a
 * program of its own (bench/: it links libpmem2 for its raw column and
 * re-executes itself for the mount probes). It lives in bench/ of a build
 * tree and in libexec/ferrite of an installation; $FERRITE_BENCH overrides
 * both. Every argument is passed on; it names itself `ferrite bench`.
 */
#include "cli.h"

#ifndef FERRITE_LIBEXECDIR
#define FERRITE_LIBEXECDIR "libexec"
#endif
#define BENCH_NAME "ferrite-bench"

int cmd_bench(int argc, char **argv)
{
	const char *const beside[] = {"/../bench", "/../" FERRITE_LIBEXECDIR "/ferrite",
				      "/../libexec/ferrite"};
	(void)argc;
	return cli_exec_beside("bench", "FERRITE_BENCH", BENCH_NAME, beside, 3,
			       "in libexec/ferrite (or bench/ of a build tree; set $FERRITE_BENCH)",
			       argv);
}
