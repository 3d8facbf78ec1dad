/*
 * cmd_fsck.c -- `ferrite fsck` (also run as `fsck.ferrite`, the helper
 * fsck(8) calls for `fsck -t ferrite`): runs ferrite_fsck() on an unmounted
 * pool (with --online, ferrite_check() on one in use), prints each problem
 * it reports and a summary, and exits with its e2fsck-style status (0 clean,
 * 1 corrected, 4 uncorrected, 8 operational, 16 usage). Takes e2fsck's
 * options: -p/-a (preen), -y, -n, -f, -C FD, -v, -V.
 */
#include <errno.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"

#ifndef FERRITE_TOOL_VERSION
#define FERRITE_TOOL_VERSION "unknown"
#endif

static const char fsck_usage[] =
    "Usage: ferrite fsck [-p|-a|-y|--repair|-n|--online] [-f] [-C FD] [-v] [POOL]\n"
    "       fsck.ferrite [options] POOL        (what `fsck -t ferrite POOL` runs)\n"
    "\nCheck the consistency of an unmounted pool; with --repair or -p, fix what\n"
    "can be fixed without guessing. Every check is a full one: a pool keeps no\n"
    "\"clean\" flag to skip it by (a mount recovers by itself, and the check\n"
    "runs the same recovery on a private view first).\n"
    "\nOptions:\n"
    "  -y, --repair  repair the problems found\n"
    "  -p, -a        preen, as e2fsck -p: repair what is safe without asking (the\n"
    "                same repairs as --repair), prefix each line with POOL, and\n"
    "                exit 4 when something needs a human\n"
    "  -n            check only, change nothing (the default)\n"
    "  --online      check a pool that other processes have mounted, through a\n"
    "                mount of its own: their calls wait while it runs, and it\n"
    "                changes nothing but what any mount may (replaying the log\n"
    "                entry of a process that died inside a call); no repair\n"
    "  -f            force a full check: accepted for e2fsck compatibility; every\n"
    "                check is full\n"
    "  -C FD         progress: 0 shows it on the terminal; another FD gets\n"
    "                e2fsck's completion lines (\"PASS DONE TOTAL POOL\") for\n"
    "                fsck(8)'s progress bar\n"
    "  -v            verbose: accepted (every problem is always listed)\n"
    "  -V            print the version and exit\n"
    "  --pool POOL   same as the POOL argument\n"
    "  -h, --help    show this help\n"
    "\nPOOL defaults to $FERRITE_POOL, else /dev/shm/ferrite/default.pool.\n"
    "Exit status (bits, like e2fsck and fsck(8)): 0 clean, 1 errors corrected,\n"
    "4 errors left uncorrected, 8 operational error (e.g. the pool is in use),\n"
    "16 usage error.\n";

struct fsck_args {
	const char *pool;
	int repair;
	int check_only;
	int preen;	 /* -p / -a */
	int online;	 /* --online: a pool in use, through a mount */
	int progress_fd; /* -C FD: -1 none */
};

/* State shared with the report and progress callbacks. */
struct fsck_run {
	const struct fsck_args *a;
	struct cli_progress progress;
	unsigned long problems;
};

static int fsck_set_progress(struct fsck_args *a, const char *text)
{
	char *end;
	long fd = strtol(text, &end, 10);

	if (!*text || *end || fd < 0 || fd > 1 << 20)
		return cli_usage_error("fsck", CLI_EXIT_FSCK_USAGE,
				       "invalid file descriptor '%s' for -C", text);
	a->progress_fd = (int)fd;
	return CLI_CONTINUE;
}

/* Returns CLI_CONTINUE or the exit status. */
static int fsck_parse(int argc, char **argv, struct fsck_args *a)
{
	static const struct option longopts[] = {
	    {"repair", no_argument, NULL, 'y'},
	    {"online", no_argument, NULL, 'O'},
	    {"pool", required_argument, NULL, CLI_OPT_POOL},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	int opt, rc;

	cli_getopt_begin();
	while ((opt = getopt_long(argc, argv, ":ynpafvVC:h", longopts, NULL)) != -1) {
		switch (opt) {
		case 'y':
			a->repair = 1;
			break;
		case 'n':
			a->check_only = 1;
			break;
		case 'O':
			a->online = 1;
			break;
		case 'p':
		case 'a':
			a->preen = 1;
			break;
		case 'f': /* every check is full */
		case 'v': /* every problem is listed */
			break;
		case 'V':
			printf("ferrite fsck %s (API %d.%d)\n", FERRITE_TOOL_VERSION,
			       FERRITE_VERSION_MAJOR, FERRITE_VERSION_MINOR);
			return CLI_EXIT_OK;
		case 'C':
			rc = fsck_set_progress(a, optarg);
			if (rc != CLI_CONTINUE)
				return rc;
			break;
		case CLI_OPT_POOL:
			a->pool = optarg;
			break;
		case 'h':
			fputs(fsck_usage, stdout);
			return CLI_EXIT_OK;
		default:
			return cli_bad_option("fsck", opt, argv, CLI_EXIT_FSCK_USAGE);
		}
	}
	if (a->repair + a->check_only + a->preen + a->online > 1)
		return cli_usage_error(
		    "fsck", CLI_EXIT_FSCK_USAGE,
		    "only one of -p/-a, -n, -y/--repair and --online may be given");
	if (a->preen)
		a->repair = 1; /* the safe repairs are the only ones there are */
	return cli_take_pool_operand("fsck", argc - optind, argv + optind, &a->pool,
				     CLI_EXIT_FSCK_USAGE);
}

static void fsck_report_line(void *arg, const char *line)
{
	struct fsck_run *run = arg;

	cli_progress_clear(&run->progress);
	if (run->a->preen) /* fsck(8) runs several checkers at once */
		printf("%s: ", run->a->pool);
	printf("%s\n", line);
	fflush(stdout);
	run->problems++;
}

/* The progress callback: the display, or e2fsck's completion lines on -C FD. */
static void fsck_progress(void *arg, uint64_t done, uint64_t total)
{
	struct fsck_run *run = arg;
	char line[512];
	int n;

	if (run->a->progress_fd < 0 && run->a->preen)
		return; /* preening (at boot): only what needs saying, as e2fsck -p */
	if (run->a->progress_fd <= 0) {
		cli_progress_update(&run->progress, done, total);
		return;
	}
	n = snprintf(line, sizeof(line), "1 %llu %llu %s\n", (unsigned long long)done,
		     (unsigned long long)total, run->a->pool);
	if (n > 0 && (size_t)n < sizeof(line) && write(run->a->progress_fd, line, (size_t)n) < 0) {
		/* fsck(8) went away: nobody to tell */
	}
}

static void fsck_print_summary(const struct fsck_args *a, const struct fsck_run *run, int rc)
{
	const char *plural = run->problems == 1 ? "" : "s";

	if (rc & FERRITE_FSCK_OPERROR)
		printf("%s: not checked (operational error)\n", a->pool);
	else if ((rc & FERRITE_FSCK_UNCORRECTED) && a->preen)
		printf("%s: UNEXPECTED INCONSISTENCY; run `ferrite fsck %s` by hand (without "
		       "-p or -a)\n",
		       a->pool, a->pool);
	else if (rc & FERRITE_FSCK_UNCORRECTED)
		printf("%s: %lu problem%s found, errors left uncorrected%s\n", a->pool,
		       run->problems, plural,
		       a->repair ? "" : " (--repair fixes what it can without guessing)");
	else if (rc & FERRITE_FSCK_CORRECTED)
		printf("%s: %lu problem%s found, all corrected\n", a->pool, run->problems, plural);
	else
		printf("%s: clean\n", a->pool);
}

/* --online: ferrite_check through a mount of this process's own. */
static int fsck_online(const struct fsck_args *a, struct fsck_run *run)
{
	ferrite_fs *fs;
	int rc = ferrite_mount(a->pool, NULL, &fs);
	if (rc)
		return rc;
	rc = ferrite_check(fs, fsck_report_line, run);
	if (rc < 0) {
		cli_error("fsck", a->pool, rc);
		rc = FERRITE_FSCK_OPERROR;
	}
	if (cli_unmount("fsck", a->pool, fs))
		rc |= FERRITE_FSCK_OPERROR;
	return rc;
}

int cmd_fsck(int argc, char **argv)
{
	struct fsck_args a;
	struct fsck_run run;
	int rc;

	memset(&a, 0, sizeof(a));
	a.progress_fd = -1;
	rc = fsck_parse(argc, argv, &a);
	if (rc != CLI_CONTINUE)
		return rc;
	memset(&run, 0, sizeof(run));
	run.a = &a;
	if (a.online) {
		rc = fsck_online(&a, &run);
	} else {
		cli_progress_begin(&run.progress, "ferrite fsck: checking");
		rc = ferrite_fsck(a.pool, a.repair, fsck_report_line, &run, fsck_progress, &run);
		cli_progress_end(&run.progress);
	}
	if (rc < 0) {
		cli_error("fsck", a.pool, rc); /* could not be opened at all */
		if (rc == -EBUSY && !a.online)
			fprintf(stderr,
				"ferrite fsck: --online checks a pool that programs share "
				"while they use it; a repair needs it unmounted everywhere\n");
	} else if ((rc & FERRITE_FSCK_OPERROR) && !a.online && ferrite_errmsg()[0]) {
		cli_fail("fsck", "", a.pool, ferrite_errmsg());
	}
	if (rc < 0 || rc > 15)
		rc = FERRITE_FSCK_OPERROR; /* not an e2fsck-style status */
	fsck_print_summary(&a, &run, rc);
	return rc;
}
