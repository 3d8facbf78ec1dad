/*
 * fuzz_cli.c -- damaged images through the command-line tools, each in its
 * own process with a timeout, as an operator would run them: fsck -n (the
 * image must stay byte-identical), info, ls -lR, cat of every file, cp -r
 * out of the pool (nothing may be written outside the target), fsck --repair
 * then fsck (if the repair corrected everything, the next fsck is clean), and
 * on a pool fsck then calls clean, ls -R must succeed.
 *
 * A crash is a signal, a sanitizer report (exit status FZ_SANITIZER_EXIT,
 * set through ASAN_OPTIONS and UBSAN_OPTIONS) or a timeout.
 */
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

#include "fuzz.h"

#define FZ_SANITIZER_EXIT 99

struct cli_run {
	const char *ferrite;
	const char *pool;
	unsigned timeout;
	char scratch[256];
	char log[300];
};

/* Runs argv with stdout/stderr to the log; returns the exit status, or -1
 * for a timeout, or -(128 + signal) for a crash by signal. */
static int run(struct cli_run *r, char *const argv[])
{
	pid_t pid = fork();
	if (pid == 0) {
		int fd = open(r->log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
		if (fd >= 0) {
			dup2(fd, 1);
			dup2(fd, 2);
		}
		setenv("ASAN_OPTIONS", "exitcode=99:detect_leaks=1:abort_on_error=0", 1);
		setenv("UBSAN_OPTIONS", "halt_on_error=1:exitcode=99:print_stacktrace=1", 1);
		execv(argv[0], argv);
		_exit(127);
	}
	int st;
	for (unsigned waited = 0;; waited++) {
		if (waitpid(pid, &st, WNOHANG) == pid)
			break;
		if (waited > r->timeout * 100) {
			kill(pid, SIGKILL);
			waitpid(pid, &st, 0);
			return -1;
		}
		usleep(10000);
	}
	if (WIFSIGNALED(st))
		return -(128 + WTERMSIG(st));
	return WEXITSTATUS(st);
}

/* Did anything appear in the scratch directory besides "out"? */
static int scratch_clean(struct cli_run *r)
{
	DIR *d = opendir(r->scratch);
	int ok = 1;
	struct dirent *e;
	while (d && (e = readdir(d)))
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..") && strcmp(e->d_name, "out"))
			ok = 0;
	if (d)
		closedir(d);
	return ok;
}

static int crashed(int rc)
{
	return rc == -1 || rc <= -128 || rc == FZ_SANITIZER_EXIT;
}

static const char *why_crashed(int rc, char *buf, size_t cap)
{
	if (rc == -1)
		return "hang (timeout)";
	if (rc == FZ_SANITIZER_EXIT)
		return "sanitizer report";
	snprintf(buf, cap, "signal %d", -rc - 128);
	return buf;
}

int fz_cli_trial(const char *ferrite, const char *pool, unsigned timeout, char **files, int nfiles,
		 int (*unchanged)(void), char *why, size_t cap)
{
	struct cli_run r = {.ferrite = ferrite, .pool = pool, .timeout = timeout};
	snprintf(r.scratch, sizeof r.scratch, "%s.cli", pool);
	snprintf(r.log, sizeof r.log, "%s.cli.log", pool);
	unlink(r.log);
	char out[300], rm[400], buf[32];
	snprintf(out, sizeof out, "%s/out", r.scratch);
	snprintf(rm, sizeof rm, "rm -rf '%s'", r.scratch);
	if (system(rm) != 0 || mkdir(r.scratch, 0700))
		return snprintf(why, cap, "cannot make %s", r.scratch), 1;
	char *P = (char *)pool, *F = (char *)ferrite;
	struct {
		const char *name;
		char *argv[8];
	} steps[] = {
	    {"fsck -n", {F, "fsck", "-n", P, NULL}},
	    {"info", {F, "info", P, NULL}},
	    {"ls -lR", {F, "ls", "-l", "-R", "-a", "--pool", P, NULL}},
	    {"cp -r", {F, "cp", "-r", "--pool", P, "pool:/", out, NULL}},
	};
	int fail = 0, rc;
	for (size_t i = 0; i < sizeof steps / sizeof steps[0] && !fail; i++) {
		rc = run(&r, steps[i].argv);
		if (crashed(rc))
			fail = snprintf(why, cap, "%s: %s", steps[i].name,
					why_crashed(rc, buf, sizeof buf));
		else if (i == 0 && !unchanged())
			fail = snprintf(why, cap, "fsck -n changed the pool image");
	}
	if (!fail && !scratch_clean(&r))
		fail = snprintf(why, cap, "cp -r wrote outside its target directory");
	if (!fail && nfiles) {
		char **argv = calloc((size_t)nfiles + 5, sizeof *argv);
		argv[0] = F;
		argv[1] = "cat";
		argv[2] = "--pool";
		argv[3] = P;
		memcpy(argv + 4, files, (size_t)nfiles * sizeof *argv);
		rc = run(&r, argv);
		free(argv);
		if (crashed(rc))
			fail = snprintf(why, cap, "cat: %s", why_crashed(rc, buf, sizeof buf));
	}
	if (!fail) {
		char *repair[] = {F, "fsck", "--repair", P, NULL};
		char *check[] = {F, "fsck", P, NULL};
		int a = run(&r, repair);
		int b = crashed(a) ? 0 : run(&r, check);
		if (crashed(a) || crashed(b))
			fail = snprintf(why, cap, "fsck %s: %s", crashed(a) ? "--repair" : "after repair",
					why_crashed(crashed(a) ? a : b, buf, sizeof buf));
		else if (a == 1 && b != 0)
			fail = snprintf(why, cap, "fsck --repair corrected everything, the next fsck "
						  "exits %d",
					b);
		else if (b == 0) {
			char *ls[] = {F, "ls", "-R", "--pool", P, NULL};
			rc = run(&r, ls);
			if (rc)
				fail = snprintf(why, cap, "fsck calls the pool clean, ls -R exits %d", rc);
		}
	}
	if (fail) {
		/* keep the tools' output next to the verdict */
		FILE *f = fopen(r.log, "r");
		char line[512];
		int n = 0;
		while (f && fgets(line, sizeof line, f) && n++ < 40)
			fprintf(stderr, "    | %s", line);
		if (f)
			fclose(f);
	}
	if (system(rm) != 0)
		fail = fail ? fail : snprintf(why, cap, "cannot remove %s", r.scratch);
	unlink(r.log);
	return fail != 0;
}
