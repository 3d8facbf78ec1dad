/*
 * cmd_stats.c -- `ferrite stats`: what the cache of a tiered pool does: hit
 * rates, dirty chunks, periodic and forced flushes, collisions and
 * wrap-arounds. Reads ferrite_tier_stats(), which needs no mount: for a pool
 * another process holds (a `ferrite mount` daemon, a `ferrite run` program)
 * it shows that process's live counters. `ferrite info` prints the same
 * section for a tiered pool.
 */
#include <getopt.h>
#include <string.h>

#include "cli.h"

static const char stats_usage[] =
    "Usage: ferrite stats [--json] [POOL]\n"
    "\nShow the cache statistics of a tiered pool (ferrite mkfs --tier): chunks\n"
    "valid and dirty, read and write hit rates, periodic and forced flushes,\n"
    "collisions and wrap-arounds. Counters add up over every mount of the\n"
    "pool; while a process holds the pool they are that process's live ones.\n"
    "\nOptions:\n"
    "  --json        print one JSON object instead of text\n"
    "  --pool POOL   same as the POOL argument\n"
    "  -h, --help    show this help\n"
    "\nPOOL defaults to $FERRITE_POOL, else /dev/shm/ferrite/default.pool.\n"
    "Exit status: 0 shown, 1 failed (e.g. not a tiered pool), 2 usage error.\n";

static double pct(uint64_t part, uint64_t whole)
{
	return whole ? 100.0 * (double)part / (double)whole : 0.0;
}

void tier_info_print_text(const struct ferrite_tier_info *ti)
{
	uint64_t acc = ti->read_hits + ti->read_misses + ti->write_hits + ti->write_misses;
	printf("%-18s%s\n", "tiered cache of:", ti->backing);
	printf("%-18s%s%s\n", "consistency:",
	       ti->consistency == FERRITE_TIER_EPOCH ? "epoch (durable at fsync and every "
						       "epoch)"
						     : "per-write (every write durable and atomic)",
	       "");
	if (ti->consistency == FERRITE_TIER_EPOCH)
		printf("%-18s%u ms\n", "epoch length:", ti->epoch_ms);
	printf("%-18s%u ms\n", "flush period:", ti->flush_ms);
	if (ti->consistency != FERRITE_TIER_EPOCH)
		printf("%-18s%llu bytes\n",
		       "atomic write:", (unsigned long long)ti->atomic_write_max);
	printf("%-18s%s\n", "write-back:",
	       ti->writeback == FERRITE_TIER_WB_DIRECT ? "direct (O_DIRECT where taken)"
						       : "cached (through the page cache)");
	printf("%-18s%llu slots x 2 chunks of %llu bytes\n",
	       "cache:", (unsigned long long)ti->slots, (unsigned long long)ti->chunk_size);
	printf("%-18s%llu (%.1f%%), dirty %llu (%.1f%%)\n",
	       "chunks valid:", (unsigned long long)ti->valid_chunks,
	       pct(ti->valid_chunks, ti->chunks), (unsigned long long)ti->dirty_chunks,
	       pct(ti->dirty_chunks, ti->chunks));
	printf("%-18s%llu of %llu\n", "file records:", (unsigned long long)ti->records_used,
	       (unsigned long long)ti->records);
	printf("%-18s%llu hits, %llu misses (hit rate %.1f%%)\n",
	       "chunk reads:", (unsigned long long)ti->read_hits,
	       (unsigned long long)ti->read_misses,
	       pct(ti->read_hits, ti->read_hits + ti->read_misses));
	printf("%-18s%llu hits, %llu misses (hit rate %.1f%%)\n",
	       "chunk writes:", (unsigned long long)ti->write_hits,
	       (unsigned long long)ti->write_misses,
	       pct(ti->write_hits, ti->write_hits + ti->write_misses));
	printf("%-18s%llu periodic, %llu forced (%.2f%% of %llu accesses), %llu rounds\n",
	       "flushes:", (unsigned long long)ti->flushes_periodic,
	       (unsigned long long)ti->flushes_forced, pct(ti->flushes_forced, acc),
	       (unsigned long long)acc, (unsigned long long)ti->flush_rounds);
	printf("%-18s%llu\n", "collisions:", (unsigned long long)ti->collisions);
	printf("%-18s%llu\n", "wrap-arounds:", (unsigned long long)ti->wraparounds);
	if (ti->consistency == FERRITE_TIER_EPOCH)
		printf("%-18s%llu\n", "epochs:", (unsigned long long)ti->epochs);
	printf("%-18s%llu\n", "recovered:", (unsigned long long)ti->recovered);
	if (ti->flush_errors || ti->backing_errno)
		printf("%-18s%llu (last: %s)\n",
		       "flush errors:", (unsigned long long)ti->flush_errors,
		       ti->backing_errno ? strerror(ti->backing_errno) : "none");
	if (ti->live)
		printf("%-18sprocess %lld holds the pool (live counters)\n",
		       "state:", (long long)ti->pid);
	else
		printf("%-18snot in use (counters saved at the last unmount)\n", "state:");
}

void tier_info_print_json_fields(const struct ferrite_tier_info *ti)
{
	printf("  \"tier\": {\n    \"backing\": ");
	json_print_string(ti->backing);
	printf(",\n    \"consistency\": \"%s\",\n",
	       ti->consistency == FERRITE_TIER_EPOCH ? "epoch" : "per-write");
	printf("    \"flush_ms\": %u, \"epoch_ms\": %u, \"writeback\": \"%s\",\n", ti->flush_ms,
	       ti->epoch_ms, ti->writeback == FERRITE_TIER_WB_DIRECT ? "direct" : "cached");
	printf("    \"atomic_write_max\": %llu,\n", (unsigned long long)ti->atomic_write_max);
	printf("    \"chunk_size\": %llu, \"slots\": %llu, \"chunks\": %llu,\n",
	       (unsigned long long)ti->chunk_size, (unsigned long long)ti->slots,
	       (unsigned long long)ti->chunks);
	printf("    \"valid_chunks\": %llu, \"dirty_chunks\": %llu,\n",
	       (unsigned long long)ti->valid_chunks, (unsigned long long)ti->dirty_chunks);
	printf("    \"records\": %llu, \"records_used\": %llu,\n", (unsigned long long)ti->records,
	       (unsigned long long)ti->records_used);
	printf("    \"read_hits\": %llu, \"read_misses\": %llu,\n",
	       (unsigned long long)ti->read_hits, (unsigned long long)ti->read_misses);
	printf("    \"write_hits\": %llu, \"write_misses\": %llu,\n",
	       (unsigned long long)ti->write_hits, (unsigned long long)ti->write_misses);
	printf("    \"flushes_periodic\": %llu, \"flushes_forced\": %llu, \"flush_rounds\": "
	       "%llu,\n",
	       (unsigned long long)ti->flushes_periodic, (unsigned long long)ti->flushes_forced,
	       (unsigned long long)ti->flush_rounds);
	printf("    \"collisions\": %llu, \"wraparounds\": %llu, \"epochs\": %llu,\n",
	       (unsigned long long)ti->collisions, (unsigned long long)ti->wraparounds,
	       (unsigned long long)ti->epochs);
	printf("    \"recovered\": %llu, \"flush_errors\": %llu, \"backing_errno\": %d,\n",
	       (unsigned long long)ti->recovered, (unsigned long long)ti->flush_errors,
	       ti->backing_errno);
	printf("    \"live\": %s, \"pid\": %lld\n  }", ti->live ? "true" : "false",
	       (long long)ti->pid);
}

int cmd_stats(int argc, char **argv)
{
	static const struct option longopts[] = {
	    {"json", no_argument, NULL, 'j'},
	    {"pool", required_argument, NULL, CLI_OPT_POOL},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	const char *pool = NULL;
	int json = 0, opt;
	cli_getopt_begin();
	while ((opt = getopt_long(argc, argv, ":h", longopts, NULL)) != -1) {
		if (opt == 'j') {
			json = 1;
		} else if (opt == CLI_OPT_POOL) {
			pool = optarg;
		} else if (opt == 'h') {
			fputs(stats_usage, stdout);
			return CLI_EXIT_OK;
		} else {
			return cli_bad_option("stats", opt, argv, CLI_EXIT_USAGE);
		}
	}
	int rc =
	    cli_take_pool_operand("stats", argc - optind, argv + optind, &pool, CLI_EXIT_USAGE);
	if (rc != CLI_CONTINUE)
		return rc;
	struct ferrite_tier_info ti;
	rc = ferrite_tier_stats(pool, &ti);
	if (rc < 0) {
		cli_error("stats", pool, rc);
		return CLI_EXIT_FAILURE;
	}
	if (json) {
		puts("{");
		printf("  \"pool\": ");
		json_print_string(pool);
		puts(",");
		tier_info_print_json_fields(&ti);
		puts("\n}");
	} else {
		printf("%-18s%s\n", "pool:", pool);
		tier_info_print_text(&ti);
	}
	return CLI_EXIT_OK;
}
