/*
 * cmd_info.c -- `ferrite info`: mounts a pool, reads ferrite_get_info() and
 * prints it as aligned text or as one JSON object.
 */
#include <getopt.h>
#include <stdarg.h>
#include <string.h>

#include "cli.h"

static const char info_usage[] =
    "Usage: ferrite info [--json] [POOL]\n"
    "\nShow a pool's format version, UUID, mode, space use, file counts,\n"
    "partition and page-table statistics, log slots, backing memory and\n"
    "persistence instruction; for a tiered pool, its backing directory and\n"
    "the cache's statistics (as `ferrite stats`).\n"
    "\nOptions:\n"
    "  --json        print one JSON object instead of text\n"
    "  --pool POOL   same as the POOL argument\n"
    "  -h, --help    show this help\n"
    "\nPOOL defaults to $FERRITE_POOL, else /dev/shm/ferrite/default.pool.\n"
    "Exit status: 0 shown, 1 failed (e.g. not a pool), 2 usage error.\n";

#define INFO_MAX_LEVELS 16 /* entries of ferrite_info.partitions_allocated */

struct info_args {
	const char *pool;
	int json;
};

/* Returns CLI_CONTINUE or the exit status. */
static int info_parse(int argc, char **argv, struct info_args *a)
{
	static const struct option longopts[] = {
	    {"json", no_argument, NULL, 'j'},
	    {"pool", required_argument, NULL, CLI_OPT_POOL},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	int opt;

	cli_getopt_begin();
	while ((opt = getopt_long(argc, argv, ":h", longopts, NULL)) != -1) {
		if (opt == 'j') {
			a->json = 1;
		} else if (opt == CLI_OPT_POOL) {
			a->pool = optarg;
		} else if (opt == 'h') {
			fputs(info_usage, stdout);
			return CLI_EXIT_OK;
		} else {
			return cli_bad_option("info", opt, argv, CLI_EXIT_USAGE);
		}
	}
	return cli_take_pool_operand("info", argc - optind, argv + optind, &a->pool,
				     CLI_EXIT_USAGE);
}

/* ---- shared derived values --------------------------------------------------- */

static uint64_t info_used_bytes(const struct ferrite_info *in)
{
	return in->free_bytes < in->data_bytes ? in->data_bytes - in->free_bytes : 0;
}

static double info_percent(uint64_t part, uint64_t whole)
{
	return whole ? 100.0 * (double)part / (double)whole : 0.0;
}

/* Levels to show: 0 .. top_level, within the array. */
static int info_level_count(const struct ferrite_info *in)
{
	if (in->top_level < 0)
		return 0;
	return in->top_level < INFO_MAX_LEVELS ? in->top_level + 1 : INFO_MAX_LEVELS;
}

/* Partition size of a level: L0 is 4 KiB, each level 8 times the one below. */
static uint64_t info_level_bytes(int level)
{
	return (uint64_t)4096 << (3 * level);
}

void info_print_backing_note(FILE *out, const struct ferrite_info *info)
{
	if (!info->huge_pages)
		fprintf(out, "note: pool is backed by 4 KiB pages (%s)\n", info->backing);
}

/* ---- text -------------------------------------------------------------------- */

static void text_line(const char *label, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void text_line(const char *label, const char *fmt, ...)
{
	va_list ap;

	printf("%-18s", label);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	putchar('\n');
}

/* "1.0 GiB (1073741824 bytes)" */
static void text_bytes(const char *label, uint64_t bytes)
{
	char h[32];

	text_line(label, "%s (%llu bytes)", cli_format_size(bytes, h, sizeof(h)),
		  (unsigned long long)bytes);
}

static void text_share(const char *label, uint64_t part, uint64_t whole)
{
	char h[32];

	text_line(label, "%s (%llu bytes, %.1f%%)", cli_format_size(part, h, sizeof(h)),
		  (unsigned long long)part, info_percent(part, whole));
}

static void text_partitions(const struct ferrite_info *in)
{
	char h[32];
	int level;

	text_line("partitions:", "top level L%d", in->top_level);
	for (level = 0; level < info_level_count(in); level++)
		printf("  L%-2d %9s  %llu allocated\n", level,
		       cli_format_size(info_level_bytes(level), h, sizeof(h)),
		       (unsigned long long)in->partitions_allocated[level]);
}

static void json_key_string(const char *key, const char *value);
static void json_key_u64(const char *key, uint64_t value);

/* A tiered pool: its own layout; the tree is the backing directory's. */
static void info_print_tier_text(const char *pool, const struct ferrite_info *in,
				 const struct ferrite_tier_info *ti)
{
	text_line("pool:", "%s", pool);
	text_line("format version:", "%u", in->format_version);
	text_line("uuid:", "%s", in->uuid);
	text_line("kind:", "tiered pool (a persistent cache)");
	text_bytes("pool size:", in->pool_bytes);
	text_bytes("cache space:", in->data_bytes);
	tier_info_print_text(ti);
	text_line("backing:", "%s", in->backing);
	text_line("huge pages:", "%s", in->huge_pages ? "yes (2 MiB)" : "no");
	text_line("persistence:", "%s", in->persistence);
	info_print_backing_note(stdout, in);
}

static void info_print_tier_json(const char *pool, const struct ferrite_info *in,
				 const struct ferrite_tier_info *ti)
{
	puts("{");
	json_key_string("pool", pool);
	json_key_u64("format_version", in->format_version);
	json_key_string("uuid", in->uuid);
	json_key_string("kind", "tiered");
	json_key_u64("pool_bytes", in->pool_bytes);
	json_key_u64("cache_bytes", in->data_bytes);
	json_key_string("backing", in->backing);
	printf("  \"huge_pages\": %s,\n", in->huge_pages ? "true" : "false");
	json_key_string("persistence", in->persistence);
	tier_info_print_json_fields(ti);
	puts("\n}");
}

static void info_print_text(const char *pool, const struct ferrite_info *in)
{
	text_line("pool:", "%s", pool);
	text_line("format version:", "%u", in->format_version);
	text_line("uuid:", "%s", in->uuid);
	text_line("mode:", "%s", cli_mode_name(in->mode));
	text_bytes("pool size:", in->pool_bytes);
	text_bytes("data space:", in->data_bytes);
	text_share("used:", info_used_bytes(in), in->data_bytes);
	text_share("free:", in->free_bytes, in->data_bytes);
	text_line("files:", "%llu", (unsigned long long)in->files);
	text_line("directories:", "%llu", (unsigned long long)in->directories);
	text_line("symlinks:", "%llu", (unsigned long long)in->symlinks);
	text_line("inode slots:", "%llu (grows 2 MiB at a time)",
		  (unsigned long long)in->inode_capacity);
	text_bytes("virtual space:", in->vspace_bytes);
	text_bytes("max file size:", in->max_file_size);
	text_partitions(in);
	text_line("page table:", "%llu huge windows, %llu table windows, %llu pages",
		  (unsigned long long)in->ppt_huge_windows,
		  (unsigned long long)in->ppt_table_windows, (unsigned long long)in->ppt_pages);
	text_line("log slots:", "%llu", (unsigned long long)in->log_slots);
	text_line("backing:", "%s", in->backing);
	text_line("huge pages:", "%s", in->huge_pages ? "yes (2 MiB)" : "no");
	text_line("persistence:", "%s", in->persistence);
	info_print_backing_note(stdout, in);
}

/* ---- JSON -------------------------------------------------------------------- */

static void json_key_string(const char *key, const char *value)
{
	printf("  \"%s\": ", key);
	json_print_string(value);
	puts(",");
}

static void json_key_u64(const char *key, uint64_t value)
{
	printf("  \"%s\": %llu,\n", key, (unsigned long long)value);
}

static void json_partitions(const struct ferrite_info *in)
{
	int level, n = info_level_count(in);

	printf("  \"top_level\": %d,\n  \"partitions\": [", in->top_level);
	for (level = 0; level < n; level++)
		printf("%s\n    {\"level\": %d, \"bytes\": %llu, \"allocated\": %llu}",
		       level ? "," : "", level, (unsigned long long)info_level_bytes(level),
		       (unsigned long long)in->partitions_allocated[level]);
	printf("%s],\n", n ? "\n  " : "");
}

static void info_print_json(const char *pool, const struct ferrite_info *in)
{
	puts("{");
	json_key_string("pool", pool);
	json_key_u64("format_version", in->format_version);
	json_key_string("uuid", in->uuid);
	json_key_string("mode", cli_mode_name(in->mode));
	json_key_u64("pool_bytes", in->pool_bytes);
	json_key_u64("data_bytes", in->data_bytes);
	json_key_u64("used_bytes", info_used_bytes(in));
	json_key_u64("free_bytes", in->free_bytes);
	printf("  \"used_percent\": %.2f,\n", info_percent(info_used_bytes(in), in->data_bytes));
	json_key_u64("files", in->files);
	json_key_u64("directories", in->directories);
	json_key_u64("symlinks", in->symlinks);
	json_key_u64("inode_capacity", in->inode_capacity);
	json_key_u64("vspace_bytes", in->vspace_bytes);
	json_key_u64("max_file_size", in->max_file_size);
	json_partitions(in);
	printf("  \"ppt\": {\"huge_windows\": %llu, \"table_windows\": %llu, \"pages\": %llu},\n",
	       (unsigned long long)in->ppt_huge_windows, (unsigned long long)in->ppt_table_windows,
	       (unsigned long long)in->ppt_pages);
	json_key_u64("log_slots", in->log_slots);
	json_key_string("backing", in->backing);
	printf("  \"huge_pages\": %s,\n", in->huge_pages ? "true" : "false");
	printf("  \"persistence\": ");
	json_print_string(in->persistence);
	puts("\n}");
}

/* ---- command ----------------------------------------------------------------- */

int info_load(const char *cmd, const char *pool, struct ferrite_info *in)
{
	ferrite_fs *fs;
	int rc;

	memset(in, 0, sizeof(*in));
	rc = cli_mount(cmd, pool, &fs);
	if (rc < 0)
		return rc;
	rc = ferrite_get_info(fs, in);
	if (rc < 0)
		cli_error(cmd, pool, rc);
	if (cli_unmount(cmd, pool, fs) < 0 && rc == 0)
		rc = -1;
	/* fixed-size text fields: never trust them to be terminated */
	in->uuid[sizeof(in->uuid) - 1] = '\0';
	in->backing[sizeof(in->backing) - 1] = '\0';
	in->persistence[sizeof(in->persistence) - 1] = '\0';
	return rc;
}

int cmd_info(int argc, char **argv)
{
	struct info_args a;
	struct ferrite_info in;
	int rc;

	memset(&a, 0, sizeof(a));
	rc = info_parse(argc, argv, &a);
	if (rc != CLI_CONTINUE)
		return rc;
	if (info_load("info", a.pool, &in) < 0)
		return CLI_EXIT_FAILURE;
	struct ferrite_tier_info ti;
	int tier = ferrite_tier_stats(a.pool, &ti) == 0;
	if (a.json)
		tier ? info_print_tier_json(a.pool, &in, &ti) : info_print_json(a.pool, &in);
	else
		tier ? info_print_tier_text(a.pool, &in, &ti) : info_print_text(a.pool, &in);
	return CLI_EXIT_OK;
}
