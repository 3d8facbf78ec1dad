/*
 * cmd_info.c -- `ferrite info`: mounts a pool, reads ferrite_get_info() and
 * prints it as aligned text or as one JSON object. A pool another process
 * holds is described from ferrite_probe() instead (the superblock, the
 * holder, counts read word by word, and a tiered pool's live statistics),
 * and says that its counts are a moving snapshot.
 */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

static const char info_usage[] =
    "Usage: ferrite info [--json] [POOL]\n"
    "\nShow a pool's format version, UUID, mode, space use, file counts,\n"
    "partition and page-table statistics, log slots, backing memory and\n"
    "persistence instruction; for a tiered pool, its backing directory and\n"
    "the cache's statistics (as `ferrite stats`).\n"
    "\nA pool another process holds (mounted, or in `ferrite run`) is not\n"
    "mounted again: info names that process and its mount point and shows\n"
    "what the superblock says, with space and inode counts read from the\n"
    "pool as it changes (a tiered pool: that process's live statistics).\n"
    "\nOptions:\n"
    "  --json        print one JSON object instead of text\n"
    "  --pool POOL   same as the POOL argument\n"
    "  -h, --help    show this help\n"
    "\nPOOL defaults to $FERRITE_POOL, else /dev/shm/ferrite/default.pool.\n"
    "Exit status: 0 shown, 1 failed (e.g. not a pool), 2 usage error.\n";

#define INFO_MAX_LEVELS 16 /* entries of ferrite_info.partitions_allocated */
#define INFO_NO_HUGE	"no (4 KiB; `ferrite mkfs --help` says how to get 2 MiB pages)"

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

/* Used: neither free nor reserved-but-unwritten (which comes back on demand). */
static uint64_t info_used_bytes(const struct ferrite_info *in)
{
	uint64_t avail = in->free_bytes + in->prealloc_bytes;
	return avail < in->data_bytes ? in->data_bytes - avail : 0;
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
static void info_print_tier_text(const char *pool, const char *label, const struct ferrite_info *in,
				 const struct ferrite_tier_info *ti)
{
	text_line("pool:", "%s", pool);
	text_line("format version:", "%u", in->format_version);
	text_line("uuid:", "%s", in->uuid);
	if (label[0])
		text_line("label:", "%s", label);
	text_line("kind:", "tiered pool (a persistent cache)");
	text_bytes("pool size:", in->pool_bytes);
	text_bytes("cache space:", in->data_bytes);
	tier_info_print_text(ti);
	text_line("backing:", "%s", in->backing);
	text_line("huge pages:", "%s", in->huge_pages ? "yes (2 MiB)" : INFO_NO_HUGE);
	text_line("persistence:", "%s", in->persistence);
	text_line("protection:", "%s", in->protection);
}

static void info_print_tier_json(const char *pool, const char *label, const struct ferrite_info *in,
				 const struct ferrite_tier_info *ti)
{
	puts("{");
	json_key_string("pool", pool);
	json_key_u64("format_version", in->format_version);
	json_key_string("uuid", in->uuid);
	json_key_string("label", label);
	json_key_string("kind", "tiered");
	json_key_u64("pool_bytes", in->pool_bytes);
	json_key_u64("cache_bytes", in->data_bytes);
	json_key_string("backing", in->backing);
	printf("  \"huge_pages\": %s,\n", in->huge_pages ? "true" : "false");
	json_key_string("persistence", in->persistence);
	json_key_string("protection", in->protection);
	if (ti)
		tier_info_print_json_fields(ti);
	else
		printf("  \"tier\": null");
	puts("\n}");
}

static void info_print_text(const char *pool, const char *label, const struct ferrite_info *in)
{
	text_line("pool:", "%s", pool);
	text_line("format version:", "%u", in->format_version);
	text_line("uuid:", "%s", in->uuid);
	if (label[0])
		text_line("label:", "%s", label);
	text_line("mode:", "%s", cli_mode_name(in->mode));
	text_bytes("pool size:", in->pool_bytes);
	text_bytes("data space:", in->data_bytes);
	text_share("used:", info_used_bytes(in), in->data_bytes);
	text_share("free:", in->free_bytes, in->data_bytes);
	text_share("pre-allocated:", in->prealloc_bytes, in->data_bytes);
	text_line("files:", "%llu", (unsigned long long)in->files);
	text_line("directories:", "%llu", (unsigned long long)in->directories);
	text_line("symlinks:", "%llu", (unsigned long long)in->symlinks);
	text_line("inode slots:", "%llu (grows %llu KiB at a time)",
		  (unsigned long long)in->inode_capacity,
		  (unsigned long long)(in->inode_block_bytes >> 10));
	text_bytes("virtual space:", in->vspace_bytes);
	text_bytes("max file size:", in->max_file_size);
	text_partitions(in);
	text_line("page table:", "%llu huge windows, %llu table windows, %llu pages",
		  (unsigned long long)in->ppt_huge_windows,
		  (unsigned long long)in->ppt_table_windows, (unsigned long long)in->ppt_pages);
	text_line("log slots:", "%llu", (unsigned long long)in->log_slots);
	text_line("backing:", "%s", in->backing);
	text_line("huge pages:", "%s", in->huge_pages ? "yes (2 MiB)" : INFO_NO_HUGE);
	text_line("persistence:", "%s", in->persistence);
	text_line("protection:", "%s", in->protection);
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

static void info_print_json(const char *pool, const char *label, const struct ferrite_info *in)
{
	puts("{");
	json_key_string("pool", pool);
	json_key_u64("format_version", in->format_version);
	json_key_string("uuid", in->uuid);
	json_key_string("label", label);
	json_key_string("mode", cli_mode_name(in->mode));
	json_key_u64("pool_bytes", in->pool_bytes);
	json_key_u64("data_bytes", in->data_bytes);
	json_key_u64("used_bytes", info_used_bytes(in));
	json_key_u64("free_bytes", in->free_bytes);
	json_key_u64("prealloc_bytes", in->prealloc_bytes);
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
	json_key_string("persistence", in->persistence);
	printf("  \"protection\": ");
	json_print_string(in->protection);
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
	in->protection[sizeof(in->protection) - 1] = '\0';
	return rc;
}

/* ---- a pool another process holds -------------------------------------------- */

/* Undoes mountinfo's octal escapes (\040 for a space) in place. */
static void mountinfo_unescape(char *s)
{
	char *w = s;

	for (; *s; s++) {
		if (s[0] == '\\' && s[1] >= '0' && s[1] <= '3' && s[2] >= '0' && s[2] <= '7' &&
		    s[3] >= '0' && s[3] <= '7') {
			*w++ = (char)((s[1] - '0') * 64 + (s[2] - '0') * 8 + (s[3] - '0'));
			s += 3;
		} else {
			*w++ = *s;
		}
	}
	*w = '\0';
}

/* Where `ferrite mount` mounted POOL (its fsname is the pool's real path):
 * 0 with the mount point in out, or -ENOENT. */
static int info_mount_point(const char *pool, char *out, size_t cap)
{
	char real[PATH_MAX], line[2 * PATH_MAX + 512];
	FILE *f;
	int found = 0;

	if (!realpath(pool, real) || !(f = fopen("/proc/self/mountinfo", "re")))
		return -ENOENT;
	while (!found && fgets(line, sizeof(line), f)) {
		char point[PATH_MAX], type[64], source[PATH_MAX];
		char *dash = strstr(line, " - ");

		if (!dash || sscanf(line, "%*s %*s %*s %*s %4095s", point) != 1 ||
		    sscanf(dash + 3, "%63s %4095s", type, source) != 2)
			continue;
		mountinfo_unescape(point);
		mountinfo_unescape(source);
		if (strcmp(type, "fuse.ferrite") == 0 && strcmp(source, real) == 0) {
			snprintf(out, cap, "%s", point);
			found = 1;
		}
	}
	fclose(f);
	return found ? 0 : -ENOENT;
}

/* "process 1234 (ferrite), mounted on /mnt/pm" */
static void info_holder(const char *pool, const struct ferrite_probe *pr, char *out, size_t cap)
{
	char point[PATH_MAX];
	int mounted = info_mount_point(pool, point, sizeof(point)) == 0;

	if (pr->holder_pid > 0)
		snprintf(out, cap, "process %lld (%s)%s%s", (long long)pr->holder_pid,
			 pr->holder_comm[0] ? pr->holder_comm : "?", mounted ? ", mounted on " : "",
			 mounted ? point : "");
	else
		snprintf(out, cap, "another process%s%s", mounted ? ", mounted on " : "",
			 mounted ? point : "");
}

static const char held_note[] =
    "the pool is in use: space and inode counts were read from it while it may "
    "change, one word at a time; file counts, partitions and the page table need "
    "it unmounted";

static void info_held_text(const char *pool, const struct ferrite_probe *pr, const char *holder,
			   const struct ferrite_tier_info *ti)
{
	text_line("pool:", "%s", pool);
	text_line("in use by:", "%s", holder);
	text_line("format version:", "%u", pr->format_version);
	text_line("uuid:", "%s", pr->uuid);
	if (pr->label[0])
		text_line("label:", "%s", pr->label);
	if (pr->tiered) {
		text_line("kind:", "tiered pool (a persistent cache)");
		text_bytes("pool size:", pr->pool_bytes);
		if (ti)
			tier_info_print_text(ti);
		return;
	}
	text_line("mode:", "%s (the pool's; a mount may override it)", cli_mode_name(pr->mode));
	text_bytes("pool size:", pr->pool_bytes);
	if (pr->counts) {
		text_bytes("data space:", pr->data_bytes);
		text_share("used:", pr->data_bytes - pr->free_bytes, pr->data_bytes);
		text_share("free:", pr->free_bytes, pr->data_bytes);
		text_line("inodes:", "%llu in use of %llu slots (files, directories and links)",
			  (unsigned long long)pr->inodes_used,
			  (unsigned long long)pr->inode_capacity);
	}
	printf("note: %s\n", held_note);
}

static void info_held_json(const char *pool, const struct ferrite_probe *pr, const char *holder,
			   const struct ferrite_tier_info *ti)
{
	puts("{");
	json_key_string("pool", pool);
	printf("  \"in_use\": true,\n");
	printf("  \"holder_pid\": %lld,\n", (long long)pr->holder_pid);
	json_key_string("holder", holder);
	json_key_u64("format_version", pr->format_version);
	json_key_string("uuid", pr->uuid);
	json_key_string("label", pr->label);
	json_key_string("kind", pr->tiered ? "tiered" : "pm");
	json_key_u64("pool_bytes", pr->pool_bytes);
	if (!pr->tiered) {
		json_key_string("mode", cli_mode_name(pr->mode));
		if (pr->counts) {
			json_key_u64("data_bytes", pr->data_bytes);
			json_key_u64("used_bytes", pr->data_bytes - pr->free_bytes);
			json_key_u64("free_bytes", pr->free_bytes);
			json_key_u64("inodes_used", pr->inodes_used);
			json_key_u64("inode_capacity", pr->inode_capacity);
		}
		printf("  \"snapshot\": ");
		json_print_string(held_note);
		puts("\n}");
		return;
	}
	if (ti)
		tier_info_print_json_fields(ti);
	else
		printf("  \"tier\": null");
	puts("\n}");
}

static int info_held(const struct info_args *a, const struct ferrite_probe *pr)
{
	struct ferrite_tier_info ti;
	int tier = pr->tiered && ferrite_tier_stats(a->pool, &ti) == 0;
	char holder[PATH_MAX + 128];

	info_holder(a->pool, pr, holder, sizeof(holder));
	if (tier)
		ti.backing[sizeof(ti.backing) - 1] = '\0';
	if (a->json)
		info_held_json(a->pool, pr, holder, tier ? &ti : NULL);
	else
		info_held_text(a->pool, pr, holder, tier ? &ti : NULL);
	return CLI_EXIT_OK;
}

/* ---- command ----------------------------------------------------------------- */

int cmd_info(int argc, char **argv)
{
	struct info_args a;
	struct ferrite_info in;
	struct ferrite_probe pr;
	ferrite_fs *fs;
	int rc;

	memset(&a, 0, sizeof(a));
	rc = info_parse(argc, argv, &a);
	if (rc != CLI_CONTINUE)
		return rc;
	if (ferrite_probe(a.pool, &pr) < 0)
		memset(&pr, 0, sizeof(pr)); /* the mount below says what is wrong */
	pr.label[sizeof(pr.label) - 1] = '\0';
	rc = ferrite_mount(a.pool, NULL, &fs);
	if (rc == -EBUSY && pr.uuid[0])
		return info_held(&a, &pr);
	if (rc < 0) {
		cli_error("info", a.pool, rc);
		return CLI_EXIT_FAILURE;
	}
	memset(&in, 0, sizeof(in));
	rc = ferrite_get_info(fs, &in);
	if (rc < 0)
		cli_error("info", a.pool, rc);
	if (cli_unmount("info", a.pool, fs) < 0 || rc < 0)
		return CLI_EXIT_FAILURE;
	in.uuid[sizeof(in.uuid) - 1] = '\0';
	in.backing[sizeof(in.backing) - 1] = '\0';
	in.persistence[sizeof(in.persistence) - 1] = '\0';
	struct ferrite_tier_info ti;
	int tier = ferrite_tier_stats(a.pool, &ti) == 0;
	if (a.json)
		tier ? info_print_tier_json(a.pool, pr.label, &in, &ti)
		     : info_print_json(a.pool, pr.label, &in);
	else
		tier ? info_print_tier_text(a.pool, pr.label, &in, &ti)
		     : info_print_text(a.pool, pr.label, &in);
	return CLI_EXIT_OK;
}
