/*
 * cmd_fsck.c -- `ferrite fsck`: runs ferrite_fsck() on an unmounted pool,
 * prints each problem it reports and a summary, and exits with its
 * e2fsck-style status (0 clean, 1 corrected, 4 uncorrected, 8 operational).
 */
#include <getopt.h>
#include <string.h>

#include "cli.h"

static const char fsck_usage[] =
    "Usage: ferrite fsck [--repair|-y] [-n] [POOL]\n"
    "\nCheck the consistency of an unmounted pool; with --repair, fix what can\n"
    "be fixed without guessing.\n"
    "\nOptions:\n"
    "  -y, --repair  repair the problems found\n"
    "  -n            check only, change nothing (the default)\n"
    "  --pool POOL   same as the POOL argument\n"
    "  -h, --help    show this help\n"
    "\nPOOL defaults to $FERRITE_POOL, else /dev/shm/ferrite/default.pool.\n"
    "Exit status (bits, like e2fsck): 0 clean, 1 errors corrected, 4 errors left\n"
    "uncorrected, 8 operational error, 16 usage error.\n";

struct fsck_args {
	const char *pool;
	int repair;
	int check_only;
};

/* State shared with the report callback. */
struct fsck_run {
	struct cli_progress progress;
	unsigned long problems;
};

/* Returns CLI_CONTINUE or the exit status. */
static int fsck_parse(int argc, char **argv, struct fsck_args *a)
{
	static const struct option longopts[] = {
	    {"repair", no_argument, NULL, 'y'},
	    {"pool", required_argument, NULL, CLI_OPT_POOL},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	int opt;

	cli_getopt_begin();
	while ((opt = getopt_long(argc, argv, ":ynh", longopts, NULL)) != -1) {
		if (opt == 'y') {
			a->repair = 1;
		} else if (opt == 'n') {
			a->check_only = 1;
		} else if (opt == CLI_OPT_POOL) {
			a->pool = optarg;
		} else if (opt == 'h') {
			fputs(fsck_usage, stdout);
			return CLI_EXIT_OK;
		} else {
			return cli_bad_option("fsck", opt, argv, CLI_EXIT_FSCK_USAGE);
		}
	}
	if (a->repair && a->check_only)
		return cli_usage_error("fsck", CLI_EXIT_FSCK_USAGE,
				       "--repair (-y) and -n exclude each other");
	return cli_take_pool_operand("fsck", argc - optind, argv + optind, &a->pool,
				     CLI_EXIT_FSCK_USAGE);
}

static void fsck_report_line(void *arg, const char *line)
{
	struct fsck_run *run = arg;

	cli_progress_clear(&run->progress);
	printf("%s\n", line);
	fflush(stdout);
	run->problems++;
}

static void fsck_print_summary(const struct fsck_args *a, const struct fsck_run *run, int rc)
{
	const char *plural = run->problems == 1 ? "" : "s";

	if (rc & FERRITE_FSCK_OPERROR)
		printf("%s: not checked (operational error)\n", a->pool);
	else if (rc & FERRITE_FSCK_UNCORRECTED)
		printf("%s: %lu problem%s found, errors left uncorrected%s\n", a->pool,
		       run->problems, plural, a->repair ? "" : " (run with --repair to fix)");
	else if (rc & FERRITE_FSCK_CORRECTED)
		printf("%s: %lu problem%s found, all corrected\n", a->pool, run->problems, plural);
	else
		printf("%s: clean\n", a->pool);
}

int cmd_fsck(int argc, char **argv)
{
	struct fsck_args a;
	struct fsck_run run;
	int rc;

	memset(&a, 0, sizeof(a));
	rc = fsck_parse(argc, argv, &a);
	if (rc != CLI_CONTINUE)
		return rc;
	memset(&run, 0, sizeof(run));
	cli_progress_begin(&run.progress, "ferrite fsck: checking");
	rc = ferrite_fsck(a.pool, a.repair, fsck_report_line, &run, cli_progress_update,
			  &run.progress);
	cli_progress_end(&run.progress);
	if (rc < 0)
		cli_error("fsck", a.pool, rc); /* could not be opened at all */
	else if ((rc & FERRITE_FSCK_OPERROR) && ferrite_errmsg()[0])
		cli_fail("fsck", "", a.pool, ferrite_errmsg());
	if (rc < 0 || rc > 15)
		rc = FERRITE_FSCK_OPERROR; /* not an e2fsck-style status */
	fsck_print_summary(&a, &run, rc);
	return rc;
}
