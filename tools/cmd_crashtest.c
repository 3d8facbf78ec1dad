/*
 * cmd_crashtest.c -- `ferrite crashtest`: runs the crash-state explorer,
 * ferrite-crashtest, a program of its own because it links the tracing build
 * of the library (tools/crashtest). It lives next to this binary in a build
 * tree and in libexec/ferrite of an installation; $FERRITE_CRASHTEST
 * overrides both. Every argument is passed on.
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
#define EXPLORER_NAME "ferrite-crashtest"

int cmd_crashtest(int argc, char **argv)
{
	char path[PATH_MAX];
	const char *const beside[] = {"", "/../" FERRITE_LIBEXECDIR "/ferrite",
				      "/../libexec/ferrite"};
	int rc = cli_find_beside("FERRITE_CRASHTEST", EXPLORER_NAME, beside, 3, X_OK, path,
				 sizeof(path));
	if (rc) {
		fprintf(stderr,
			"ferrite crashtest: cannot find %s next to ferrite or in libexec/ferrite "
			"(set $FERRITE_CRASHTEST): %s\n",
			EXPLORER_NAME, strerror(-rc));
		return 1;
	}
	/* Replay lines the explorer prints then read `ferrite crashtest ...`. */
	setenv("FERRITE_CRASHTEST_AS", "ferrite crashtest", 1);
	argv[0] = path;
	(void)argc;
	execv(path, argv);
	fprintf(stderr, "ferrite crashtest: cannot run %s: %s\n", path, strerror(errno));
	return 1;
}
