/*
 * cmd_mkfs.c -- `ferrite mkfs`: formats a pool through ferrite_mkfs() with a
 * progress display, sets its label with ferrite_tune() (ferrite_mkfs_opts
 * keeps its layout: programs built against it keep working), then mounts it
 * once to print a summary.
 */
#include <errno.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

static const char mkfs_usage[] =
    "Usage: ferrite mkfs [--size N] [--mode sync|strict] [--label LABEL] [--force]\n"
    "                    [--no-hugepages] [POOL]\n"
    "       ferrite mkfs --tier BACKING_DIR [--consistency write|epoch]\n"
    "                    [--flush-ms N] [--epoch-ms N] [--writeback cached|direct]\n"
    "                    [--size N] [--label LABEL] [--force] [POOL]\n"
    "\nFormat POOL as an empty Ferrite pool. POOL is a regular file (created if\n"
    "missing), a device-DAX node, or a file on a DAX file system.\n"
    "\nWith --tier, POOL becomes a persistent cache in front of BACKING_DIR, a\n"
    "directory of an ordinary file system: mounting the pool shows that\n"
    "directory's tree; writes are durable once in the pool and drain to the\n"
    "directory in the background; data sets larger than the pool work.\n"
    "\nOptions:\n"
    "  --size N         pool size in bytes, or with a K, M, G or T suffix (powers\n"
    "                   of 1024), from 16M to 16T; default: 1 GiB for a new file,\n"
    "                   the device size for device DAX\n"
    "  --mode MODE      sync (default): metadata atomic, writes durable;\n"
    "                   strict: every write atomic as well (a mount may override\n"
    "                   it: ferrite mount -o mode=, ferrite run --mode)\n"
    "  -L, --label L    the pool's label (at most 63 bytes, no control\n"
    "                   characters; `ferrite tune --label` changes it)\n"
    "  --force          overwrite an existing pool or a non-empty file (with\n"
    "                   --tier: also bind a directory another pool used)\n"
    "  --tier DIR       a tiered pool caching the directory DIR\n"
    "  --consistency C  write (default): each write durable and atomic on return\n"
    "                   (First Responder); epoch: writes durable together at\n"
    "                   fsync or every --epoch-ms (HasFS)\n"
    "  --flush-ms N     how often dirty data drains to DIR (default 10)\n"
    "  --epoch-ms N     epoch length in epoch consistency (default 10)\n"
    "  --writeback W    cached (default): drain through the page cache, so data\n"
    "                   the pool let go is read back from DRAM; direct: O_DIRECT\n"
    "                   where DIR's file system takes it, no page cache used\n"
    "  --no-hugepages   do not try to back the pool with 2 MiB pages (and say\n"
    "                   nothing about them)\n"
    "  --pool POOL      same as the POOL argument\n"
    "  -h, --help       show this help\n"
    "\nPOOL defaults to $FERRITE_POOL, else /dev/shm/ferrite/default.pool.\n"
    "A failed mkfs leaves no new file behind, and an existing file as it was\n"
    "unless it says otherwise (a file whose old contents were already\n"
    "discarded is left empty).\n"
    "\nHuge pages: a pool on a tmpfs mounted with huge=within_size is backed by\n"
    "2 MiB pages, where a page fault costs 0.04 us instead of 1.6 us. For the\n"
    "default pool, mkfs run as root mounts such a tmpfs on /dev/shm/ferrite\n"
    "itself (when that directory is empty). Elsewhere, as root, run\n"
    "`mount -t tmpfs -o huge=within_size,size=SIZE tmpfs DIR` and make the pool\n"
    "in DIR. Without root, ask for such a mount, or use 4 KiB pages: everything\n"
    "works the same, page faults just cost more.\n"
    "\nExit status: 0 formatted, 1 failed, 2 usage error.\n";

struct mkfs_args {
	const char *pool;
	const char *label; /* set with ferrite_tune() once the pool is made */
	struct ferrite_mkfs_opts opts;
};

/* What ferrite_tune() takes as a label (checked before anything is formatted). */
static int mkfs_label_ok(const char *label)
{
	size_t n = strlen(label), i;

	for (i = 0; i < n; i++)
		if ((unsigned char)label[i] < 0x20 || label[i] == 0x7f)
			return 0;
	return n <= FERRITE_LABEL_MAX;
}

/* Applies one parsed option; returns CLI_CONTINUE or the exit status. */
static int mkfs_apply_option(struct mkfs_args *a, int opt, char **argv)
{
	switch (opt) {
	case 's':
		if (cli_parse_size(optarg, &a->opts.size) < 0 || a->opts.size == 0)
			return cli_usage_error("mkfs", CLI_EXIT_USAGE,
					       "invalid size '%s' (16M to 16T, e.g. 64M, 1G, 2T)",
					       optarg);
		return CLI_CONTINUE;
	case 'm':
		if (cli_parse_mode(optarg, &a->opts.mode) < 0)
			return cli_usage_error("mkfs", CLI_EXIT_USAGE,
					       "invalid mode '%s' (sync or strict)", optarg);
		return CLI_CONTINUE;
	case 'L':
		if (!mkfs_label_ok(optarg))
			return cli_usage_error("mkfs", CLI_EXIT_USAGE,
					       "invalid label '%s' (at most %d bytes, no control "
					       "characters)",
					       optarg, FERRITE_LABEL_MAX);
		a->label = optarg;
		return CLI_CONTINUE;
	case 'f':
		a->opts.force = 1;
		return CLI_CONTINUE;
	case 'H':
		a->opts.no_hugepages = 1;
		return CLI_CONTINUE;
	case 'T':
		a->opts.tier_backing = optarg;
		return CLI_CONTINUE;
	case 'C':
		if (!strcmp(optarg, "write") || !strcmp(optarg, "per-write"))
			a->opts.tier_consistency = FERRITE_TIER_PER_WRITE;
		else if (!strcmp(optarg, "epoch"))
			a->opts.tier_consistency = FERRITE_TIER_EPOCH;
		else
			return cli_usage_error("mkfs", CLI_EXIT_USAGE,
					       "invalid consistency '%s' (write or epoch)", optarg);
		return CLI_CONTINUE;
	case 'W':
		if (!strcmp(optarg, "cached"))
			a->opts.tier_writeback = FERRITE_TIER_WB_CACHED;
		else if (!strcmp(optarg, "direct"))
			a->opts.tier_writeback = FERRITE_TIER_WB_DIRECT;
		else
			return cli_usage_error("mkfs", CLI_EXIT_USAGE,
					       "invalid write-back '%s' (cached or direct)",
					       optarg);
		return CLI_CONTINUE;
	case 'F':
	case 'E': {
		char *end;
		unsigned long v = strtoul(optarg, &end, 10);
		if (*end || !*optarg || v == 0 || v > 60000)
			return cli_usage_error("mkfs", CLI_EXIT_USAGE,
					       "invalid period '%s' (1 to 60000 ms)", optarg);
		if (opt == 'F')
			a->opts.tier_flush_ms = (unsigned)v;
		else
			a->opts.tier_epoch_ms = (unsigned)v;
		return CLI_CONTINUE;
	}
	case CLI_OPT_POOL:
		a->pool = optarg;
		return CLI_CONTINUE;
	case 'h':
		fputs(mkfs_usage, stdout);
		return CLI_EXIT_OK;
	default:
		return cli_bad_option("mkfs", opt, argv, CLI_EXIT_USAGE);
	}
}

/* Returns CLI_CONTINUE or the exit status. */
static int mkfs_parse(int argc, char **argv, struct mkfs_args *a)
{
	static const struct option longopts[] = {
	    {"size", required_argument, NULL, 's'},
	    {"mode", required_argument, NULL, 'm'},
	    {"label", required_argument, NULL, 'L'},
	    {"force", no_argument, NULL, 'f'},
	    {"no-hugepages", no_argument, NULL, 'H'},
	    {"tier", required_argument, NULL, 'T'},
	    {"consistency", required_argument, NULL, 'C'},
	    {"flush-ms", required_argument, NULL, 'F'},
	    {"epoch-ms", required_argument, NULL, 'E'},
	    {"writeback", required_argument, NULL, 'W'},
	    {"pool", required_argument, NULL, CLI_OPT_POOL},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	int opt, rc;

	cli_getopt_begin();
	while ((opt = getopt_long(argc, argv, ":L:h", longopts, NULL)) != -1) {
		rc = mkfs_apply_option(a, opt, argv);
		if (rc != CLI_CONTINUE)
			return rc;
	}
	if (!a->opts.tier_backing && (a->opts.tier_consistency || a->opts.tier_flush_ms ||
				      a->opts.tier_epoch_ms || a->opts.tier_writeback))
		return cli_usage_error("mkfs", CLI_EXIT_USAGE,
				       "--consistency, --flush-ms, --epoch-ms and --writeback "
				       "need --tier");
	return cli_take_pool_operand("mkfs", argc - optind, argv + optind, &a->pool,
				     CLI_EXIT_USAGE);
}

static void mkfs_report_failure(const struct mkfs_args *a, int rc)
{
	cli_error("mkfs", a->pool, rc);
}

/* Mounts the new pool and prints what was made. */
static int mkfs_print_summary(const char *pool, const char *label, int no_hugepages)
{
	struct ferrite_info info;
	char size[32];

	if (info_load("mkfs", pool, &info) < 0)
		return CLI_EXIT_FAILURE;
	printf("Formatted %s\n", pool);
	printf("  size:    %s (%llu bytes)\n", cli_format_size(info.pool_bytes, size, sizeof(size)),
	       (unsigned long long)info.pool_bytes);
	struct ferrite_tier_info ti;
	if (ferrite_tier_stats(pool, &ti) == 0) {
		printf("  tiered:  cache in front of %s\n", ti.backing);
		printf("  cache:   %llu slots of two %llu-byte chunks; %s consistency\n",
		       (unsigned long long)ti.slots, (unsigned long long)ti.chunk_size,
		       ti.consistency == FERRITE_TIER_EPOCH ? "epoch" : "per-write");
		printf("  drains:  every %u ms, %s\n", ti.flush_ms,
		       ti.writeback == FERRITE_TIER_WB_DIRECT ? "with O_DIRECT where taken"
							      : "through the page cache");
	} else {
		printf("  mode:    %s\n", cli_mode_name(info.mode));
	}
	printf("  uuid:    %s\n", info.uuid);
	if (label && label[0])
		printf("  label:   %s\n", label);
	printf("  backing: %s\n", info.backing);
	if (!no_hugepages)
		cli_hugepage_hint(stdout, &info);
	return CLI_EXIT_OK;
}

int cmd_mkfs(int argc, char **argv)
{
	struct mkfs_args a;
	struct cli_progress progress;
	int rc;

	memset(&a, 0, sizeof(a));
	rc = mkfs_parse(argc, argv, &a);
	if (rc != CLI_CONTINUE)
		return rc;
	cli_progress_begin(&progress, "ferrite mkfs: formatting");
	a.opts.progress = cli_progress_update;
	a.opts.progress_arg = &progress;
	rc = ferrite_mkfs(a.pool, &a.opts);
	cli_progress_end(&progress);
	if (rc < 0) {
		mkfs_report_failure(&a, rc);
		return CLI_EXIT_FAILURE;
	}
	if (a.label) {
		/* The superblock of the new pool, written once more (backup first). */
		struct ferrite_tune_opts t = {.label = a.label};

		rc = ferrite_tune(a.pool, &t);
		if (rc < 0) {
			mkfs_report_failure(&a, rc);
			return CLI_EXIT_FAILURE;
		}
	}
	return mkfs_print_summary(a.pool, a.label, a.opts.no_hugepages);
}
