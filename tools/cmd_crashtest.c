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

static int find_explorer(char *out, size_t cap)
{
	const char *env = getenv("FERRITE_CRASHTEST");
	if (env && *env) {
		if (access(env, X_OK) != 0 || !realpath(env, out))
			return -errno;
		return 0;
	}
	char exe[PATH_MAX - 64];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (n < 0)
		return -errno;
	exe[n] = 0;
	char *slash = strrchr(exe, '/');
	if (slash)
		*slash = 0;
	const char *rel[] = {"", "/../" FERRITE_LIBEXECDIR "/ferrite", "/../libexec/ferrite"};
	for (size_t i = 0; i < sizeof(rel) / sizeof(rel[0]); i++) {
		char cand[PATH_MAX + 64];
		int m = snprintf(cand, sizeof(cand), "%s%s/" EXPLORER_NAME, exe, rel[i]);
		if (m > 0 && (size_t)m < sizeof(cand) && access(cand, X_OK) == 0 &&
		    realpath(cand, out) && strlen(out) < cap)
			return 0;
	}
	return -ENOENT;
}

int cmd_crashtest(int argc, char **argv)
{
	char path[PATH_MAX];
	int rc = find_explorer(path, sizeof(path));
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
