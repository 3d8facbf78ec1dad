/*
 * cmd_crashtest.c -- `ferrite crashtest`: runs the crash-state explorer,
 * ferrite-crashtest, a program of its own because it links the tracing build
 * of the library (tools/crashtest). It lives next to this binary in a build
 * tree and in libexec/ferrite of an installation; $FERRITE_CRASHTEST
 * overrides both. Every argument is passed on.
 */
#include "cli.h"

#ifndef FERRITE_LIBEXECDIR
#define FERRITE_LIBEXECDIR "libexec"
#endif
#define EXPLORER_NAME "ferrite-crashtest"

int cmd_crashtest(int argc, char **argv)
{
	const char *const beside[] = {"", "/../" FERRITE_LIBEXECDIR "/ferrite",
				      "/../libexec/ferrite"};
	(void)argc;
	/* replay lines the explorer prints then read `ferrite crashtest ...` */
	return cli_exec_beside("crashtest", "FERRITE_CRASHTEST", EXPLORER_NAME, beside, 3,
			       "next to ferrite or in libexec/ferrite (set $FERRITE_CRASHTEST)",
			       argv);
}
