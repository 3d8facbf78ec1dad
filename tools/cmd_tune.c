/*
 * cmd_tune.c -- `ferrite tune`: changes an unmounted pool's label, its
 * default mode, or (tiered pools) the backing directory it caches, through
 * ferrite_tune(), which writes them crash-safely (backup copy first).
 */
#include <getopt.h>
#include <string.h>

#include "cli.h"

static const char tune_usage[] =
    "Usage: ferrite tune [--label LABEL] [--mode sync|strict] [POOL]\n"
    "       ferrite tune --backing DIR [--force] [--label LABEL] [POOL]\n"
    "\nChange settings of an unmounted pool, like tune2fs: its label, the mode\n"
    "mounts use by default, or where a tiered pool's backing directory now is.\n"
    "The superblock is written crash-safely: its backup first, then the primary\n"
    "(after a crash, `ferrite fsck --repair` completes or undoes the change).\n"
    "\nOptions:\n"
    "  -L, --label LABEL  set the pool's label (at most 63 bytes, no control\n"
    "                     characters; \"\" removes it); `ferrite info` shows it\n"
    "  --mode MODE        the pool's default mode: sync or strict (pm pools; a\n"
    "                     mount may still override it)\n"
    "  --backing DIR      tiered pools: the backing directory moved to DIR; DIR\n"
    "                     must carry this pool's UUID in its user.ferrite.pool\n"
    "                     attribute, or be the original directory renamed\n"
    "  --force            with --backing: re-point even if nothing shows that\n"
    "                     DIR holds the pool's data (its attributes were lost),\n"
    "                     and bind DIR to the pool; dirty data in the cache is\n"
    "                     written into DIR at the next mount\n"
    "  --pool POOL        same as the POOL argument\n"
    "  -h, --help         show this help\n"
    "\nPOOL defaults to $FERRITE_POOL, else /dev/shm/ferrite/default.pool.\n"
    "Exit status: 0 changed, 1 failed (e.g. the pool is in use), 2 usage error.\n";

struct tune_args {
	const char *pool;
	struct ferrite_tune_opts opts;
};

static int tune_apply_option(struct tune_args *a, int opt, char **argv)
{
	int mode;

	switch (opt) {
	case 'L':
		a->opts.label = optarg;
		return CLI_CONTINUE;
	case 'm':
		if (cli_parse_mode(optarg, &mode) < 0)
			return cli_usage_error("tune", CLI_EXIT_USAGE,
					       "invalid mode '%s' (sync or strict)", optarg);
		a->opts.mode =
		    mode == FERRITE_MODE_STRICT ? FERRITE_MOUNT_STRICT : FERRITE_MOUNT_SYNC;
		return CLI_CONTINUE;
	case 'b':
		a->opts.tier_backing = optarg;
		return CLI_CONTINUE;
	case 'f':
		a->opts.force = 1;
		return CLI_CONTINUE;
	case CLI_OPT_POOL:
		a->pool = optarg;
		return CLI_CONTINUE;
	case 'h':
		fputs(tune_usage, stdout);
		return CLI_EXIT_OK;
	default:
		return cli_bad_option("tune", opt, argv, CLI_EXIT_USAGE);
	}
}

/* Returns CLI_CONTINUE or the exit status. */
static int tune_parse(int argc, char **argv, struct tune_args *a)
{
	static const struct option longopts[] = {
	    {"label", required_argument, NULL, 'L'},
	    {"mode", required_argument, NULL, 'm'},
	    {"backing", required_argument, NULL, 'b'},
	    {"tier", required_argument, NULL, 'b'}, /* as mkfs --tier names it */
	    {"force", no_argument, NULL, 'f'},
	    {"pool", required_argument, NULL, CLI_OPT_POOL},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	int opt, rc;

	cli_getopt_begin();
	while ((opt = getopt_long(argc, argv, ":L:h", longopts, NULL)) != -1) {
		rc = tune_apply_option(a, opt, argv);
		if (rc != CLI_CONTINUE)
			return rc;
	}
	if (!a->opts.label && !a->opts.mode && !a->opts.tier_backing)
		return cli_usage_error("tune", CLI_EXIT_USAGE,
				       "nothing to change (give --label, --mode or --backing)");
	if (a->opts.force && !a->opts.tier_backing)
		return cli_usage_error("tune", CLI_EXIT_USAGE, "--force goes with --backing");
	return cli_take_pool_operand("tune", argc - optind, argv + optind, &a->pool,
				     CLI_EXIT_USAGE);
}

static void tune_print(const struct tune_args *a)
{
	const struct ferrite_tune_opts *o = &a->opts;
	struct ferrite_tier_info ti;

	printf("Tuned %s\n", a->pool);
	if (o->label && o->label[0])
		printf("  label:   %s\n", o->label);
	else if (o->label)
		printf("  label:   (removed)\n");
	if (o->mode)
		printf("  mode:    %s\n", o->mode == FERRITE_MOUNT_STRICT ? "strict" : "sync");
	if (!o->tier_backing)
		return;
	if (ferrite_tier_stats(a->pool, &ti) != 0)
		return;
	ti.backing[sizeof(ti.backing) - 1] = '\0';
	printf("  backing: %s (%s)\n", ti.backing,
	       o->forced ? "forced: nothing showed it holds the pool's data"
			 : "it holds this pool's data");
	if (o->other_dir && ti.records_used)
		printf("  note:    %s is another directory than the one the pool was made for "
		       "(a copy?): the cache knows its %llu files by inode number, so the next "
		       "mount puts the data it holds for them in %s/.ferrite-lost+found\n",
		       ti.backing, (unsigned long long)ti.records_used, ti.backing);
	if (ti.dirty_chunks)
		printf("  note:    the cache holds %llu chunks not yet in the directory; the "
		       "next mount writes them there\n",
		       (unsigned long long)ti.dirty_chunks);
}

int cmd_tune(int argc, char **argv)
{
	struct tune_args a;
	int rc;

	memset(&a, 0, sizeof(a));
	rc = tune_parse(argc, argv, &a);
	if (rc != CLI_CONTINUE)
		return rc;
	rc = ferrite_tune(a.pool, &a.opts);
	if (rc < 0) {
		cli_error("tune", a.pool, rc);
		return CLI_EXIT_FAILURE;
	}
	if (a.opts.forced)
		fprintf(stderr,
			"ferrite tune: warning: %s: re-pointed at %s without proof that it holds "
			"the pool's data (--force); the directory is now bound to this pool\n",
			a.pool, a.opts.tier_backing);
	tune_print(&a);
	return CLI_EXIT_OK;
}
