/*
 * main.c -- ferrite-bench: options, the backends side by side, the four groups.
 *
 *   a) ctFS micro-benchmarks (micro.c)   ferrite | tmpfs | ext4 | raw | strict
 *   b) metadata operations (meta.c)      ferrite | tmpfs | ext4
 *   c) mount time and RSS (mount.c)      ferrite, pools of --mount-files files
 *   d) tiered pool (tier.c)              tier | ext4-disk | pm (= the ferrite pool)
 *
 * Why the comparison is fair: all backends live in the same process and the same
 * memory (/dev/shm), run the same workload code through the same operation table,
 * and are measured in the same run, interleaved; results are ratios of medians, never
 * absolute targets. One invocation runs everything; run-bench.sh prepares ext4. Group d)
 * compares a tiered pool with ext4 on the machine's disk (both under --disk-dir).
 */
#ifndef _GNU_SOURCE /* the top-level CMakeLists.txt defines it */
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <getopt.h>
#include <libgen.h>
#include <math.h>
#include <glob.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench.h"

/* What messages call the program: `ferrite bench` runs it as that. */
static const char *me = "ferrite-bench";

static const char *const bk_names[BK_COUNT] = {"ferrite", "tmpfs", "ext4",	"raw",
					       "strict",  "tier",  "ext4-disk", "aged"};

static void usage(FILE *f)
{
	fprintf(f, "Usage: %s [OPTIONS]\n", me); /* ferrite-bench when run as itself */
	fputs("\nMeasure Ferrite against the kernel's file systems, side by side in one\n"
	      "run: the public API on a pool (ferrite), POSIX calls on tmpfs and on ext4\n"
	      "(a loop device over a sparse file in /dev/shm, made and removed by the\n"
	      "bench when run as root), and a persisted memcpy into a pre-mapped file\n"
	      "(raw), the physical limit. Groups: a) the ctFS micro-benchmarks on one\n"
	      "file, b) metadata operations on many files in one directory, c) mount\n"
	      "time and memory of pools of many files, d) a tiered pool against ext4 on\n"
	      "the machine's disk. Every figure is the median of --runs runs, and the\n"
	      "workloads take turns, so the ratios compare measurements of the same run.\n"
	      "\nProgress goes to stderr and the tables to stdout. The results go to a\n"
	      "JSON file and to an SVG plot of Ferrite's throughput over each peer's,\n"
	      "drawn by gnuplot (apt-get install gnuplot-nox); without gnuplot the run\n"
	      "says so at its start and at its end and writes the JSON alone. Group c)\n"
	      "has no peer and is not drawn. --quick takes seconds, a full run many\n"
	      "minutes.\n"
	      "\nOutput:\n"
	      "  --out DIR               put ferrite-bench.json and ferrite-bench.svg in DIR\n"
	      "                          (default: the current directory)\n"
	      "  --json FILE             the JSON file (default: DIR/ferrite-bench.json)\n"
	      "  --svg FILE              the plot (default: the JSON file, .svg for .json)\n"
	      "  --no-plot               no plot, and no need for gnuplot\n"
	      "\nWhat to run:\n"
	      "  --quick                 a smoke run in seconds (small file, few files): it\n"
	      "                          proves the program runs; the numbers mean nothing\n"
	      "  --only GROUPS           comma list of micro (a), meta (b), mount (c),\n"
	      "                          tier (d); default all\n"
	      "  --backends LIST         comma list of ferrite, tmpfs, ext4, raw, strict,\n"
	      "                          aged, tier, ext4-disk; default all (strict: ferrite\n"
	      "                          in strict mode, a) only, on a second pool named\n"
	      "                          after --pool with -strict added; aged: ferrite on a\n"
	      "                          pool aged first (-aged), a) and b); tier and\n"
	      "                          ext4-disk: d) only, where ferrite is the pm column)\n"
	      "  --age N                 the aged pool: churn (create, append, truncate,\n"
	      "                          rename, delete) until N times its size is written,\n"
	      "                          then half of its files deleted (10; --quick: 1)\n"
	      "  --runs N                runs of each measurement; the median is shown (3)\n"
	      "  --no-ext4               no ext4 column (default: set one up when root)\n"
	      "  --ext4-dir DIR          a mounted ext4 to use instead of a loop device\n"
	      "  --ext4-skip REASON      no ext4 column, for REASON (printed)\n"
	      "\nSizes and places (a to c):\n"
	      "  --file-size SIZE        a) size of the file (1G)\n"
	      "  --ops N                 a) RR/RW operations (262144)\n"
	      "  --files N               b) files in the directory (100000)\n"
	      "  --mount-files LIST      c) pool populations (1000,1000000)\n"
	      "  --pool POOL             ferrite pool for a) and b)\n"
	      "                          (/dev/shm/ferrite/bench.pool); c) puts its pools\n"
	      "                          in the same directory\n"
	      "  --pool-size SIZE        size of that pool (derived from the sizes)\n"
	      "  --mount-pool-size SIZE  size of each c) pool (derived from the file count)\n"
	      "  --workdir DIR           directory of the tmpfs column\n"
	      "                          (/dev/shm/ferrite-bench)\n"
	      "  --raw-dir DIR           directory of the raw pool file (that of --pool)\n"
	      "  --no-drop-caches        do not drop the page cache before ext4 RW (nor\n"
	      "                          before each timed run of d)\n"
	      "  --keep                  keep the ferrite pools afterwards\n"
	      "  --seed N                seed of offsets and permutations (42)\n"
	      "  --cpu N                 pin the process (and the mount probes) to CPU N\n"
	      "\nGroup d), the tiered pool:\n"
	      "  --disk-dir DIR          on the machine's disk (ext4): ext4-disk works in\n"
	      "                          DIR/ext4, the tiered pool caches DIR/tier-backing\n"
	      "                          (/var/tmp/ferrite-bench)\n"
	      "  --tier-pool POOL        the tiered pool (default: X-tier.pool for --pool\n"
	      "                          X.pool)\n"
	      "  --tier-pool-size SIZE   its size (256M)\n"
	      "  --tier-flush-ms N       its background flush period (library default, 10)\n"
	      "  --tier-writeback W      cached (library default) or direct (O_DIRECT)\n"
	      "  --mix-data SIZE         synthetic mix: bytes in its five files (1G)\n"
	      "  --mix-ops N             synthetic mix: timed reads and writes (200000)\n"
	      "  --varmail-files N       varmail: files of ~16 KiB (40000)\n"
	      "  --varmail-loops N       varmail: timed loops of 13 operations (10000)\n"
	      "  --oltp-data SIZE        oltp: bytes in the data files (768M)\n"
	      "  --oltp-txns N           oltp: timed transactions (5000)\n"
	      "  --workloads LIST        comma list of mix, varmail, oltp (default all)\n"
	      "  -h, --help              show this help\n"
	      "\nThe ext4 image's size follows from the sizes above ($EXT4_IMAGE_SIZE sets\n"
	      "it). Ctrl-C or SIGTERM stops the run and removes what it made. The program\n"
	      "is LIBEXECDIR/ferrite/ferrite-bench; bench/README.md explains the groups\n"
	      "and the figures measured so far.\n"
	      "\nExit status: 0 done, 1 a measurement or an output failed (also --svg\n"
	      "without gnuplot), 2 usage or set-up error.\n",
	      f);
}

static int parse_count(const char *s, uint64_t *out)
{
	char *end;
	double v;

	errno = 0;
	v = strtod(s, &end);
	if (errno || end == s || *end || v < 0 || v != floor(v))
		return -EINVAL;
	*out = (uint64_t)v;
	return 0;
}

static int parse_groups(const char *s, unsigned *out)
{
	char buf[256];
	char *save = NULL;

	snprintf(buf, sizeof(buf), "%s", s);
	*out = 0;
	for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
		if (!strcmp(t, "micro") || !strcmp(t, "a"))
			*out |= G_MICRO;
		else if (!strcmp(t, "meta") || !strcmp(t, "b"))
			*out |= G_META;
		else if (!strcmp(t, "mount") || !strcmp(t, "c"))
			*out |= G_MOUNT;
		else if (!strcmp(t, "tier") || !strcmp(t, "d"))
			*out |= G_TIER;
		else
			return -EINVAL;
	}
	return *out ? 0 : -EINVAL;
}

static int parse_backends(const char *s, unsigned *out)
{
	char buf[256];
	char *save = NULL;

	snprintf(buf, sizeof(buf), "%s", s);
	*out = 0;
	for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
		int k;

		for (k = 0; k < BK_COUNT && strcmp(t, bk_names[k]); k++)
			;
		if (k == BK_COUNT)
			return -EINVAL;
		*out |= 1u << k;
	}
	return *out ? 0 : -EINVAL;
}

static int parse_workloads(const char *s, unsigned *out)
{
	static const char *const names[] = {"mix", "varmail", "oltp"}; /* rows of d) */
	char buf[256];
	char *save = NULL;

	snprintf(buf, sizeof(buf), "%s", s);
	*out = 0;
	for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
		int k;

		for (k = 0; k < TIER_ROWS && strcmp(t, names[k]); k++)
			;
		if (k == TIER_ROWS)
			return -EINVAL;
		*out |= 1u << k;
	}
	return *out ? 0 : -EINVAL;
}

static int parse_mount_files(const char *s, struct bench_opts *o)
{
	char buf[256];
	char *save = NULL;

	snprintf(buf, sizeof(buf), "%s", s);
	o->n_mount_files = 0;
	for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
		if (o->n_mount_files == BENCH_MAX_MOUNT_SIZES)
			return -EINVAL;
		if (parse_count(t, &o->mount_files[o->n_mount_files]) < 0 ||
		    o->mount_files[o->n_mount_files] == 0)
			return -EINVAL;
		o->n_mount_files++;
	}
	return o->n_mount_files ? 0 : -EINVAL;
}

enum {
	OPT_QUICK = 256,
	OPT_ONLY,
	OPT_BACKENDS,
	OPT_RUNS,
	OPT_JSON,
	OPT_FILE_SIZE,
	OPT_OPS,
	OPT_FILES,
	OPT_MOUNT_FILES,
	OPT_POOL,
	OPT_POOL_SIZE,
	OPT_MOUNT_POOL_SIZE,
	OPT_WORKDIR,
	OPT_RAW_DIR,
	OPT_EXT4_DIR,
	OPT_EXT4_SKIP,
	OPT_NO_DROP,
	OPT_KEEP,
	OPT_AGE,
	OPT_SEED,
	OPT_CPU,
	OPT_DISK_DIR,
	OPT_TIER_POOL,
	OPT_TIER_POOL_SIZE,
	OPT_TIER_FLUSH_MS,
	OPT_TIER_WRITEBACK,
	OPT_MIX_DATA,
	OPT_MIX_OPS,
	OPT_VARMAIL_FILES,
	OPT_VARMAIL_LOOPS,
	OPT_OLTP_DATA,
	OPT_OLTP_TXNS,
	OPT_WORKLOADS,
	OPT_OUT,
	OPT_SVG,
	OPT_NO_PLOT,
	OPT_NO_EXT4,
	OPT_HELP,
};

static const struct option long_opts[] = {
    {"quick", no_argument, NULL, OPT_QUICK},
    {"only", required_argument, NULL, OPT_ONLY},
    {"backends", required_argument, NULL, OPT_BACKENDS},
    {"runs", required_argument, NULL, OPT_RUNS},
    {"json", required_argument, NULL, OPT_JSON},
    {"file-size", required_argument, NULL, OPT_FILE_SIZE},
    {"ops", required_argument, NULL, OPT_OPS},
    {"files", required_argument, NULL, OPT_FILES},
    {"mount-files", required_argument, NULL, OPT_MOUNT_FILES},
    {"pool", required_argument, NULL, OPT_POOL},
    {"pool-size", required_argument, NULL, OPT_POOL_SIZE},
    {"mount-pool-size", required_argument, NULL, OPT_MOUNT_POOL_SIZE},
    {"workdir", required_argument, NULL, OPT_WORKDIR},
    {"raw-dir", required_argument, NULL, OPT_RAW_DIR},
    {"ext4-dir", required_argument, NULL, OPT_EXT4_DIR},
    {"ext4-skip", required_argument, NULL, OPT_EXT4_SKIP},
    {"no-drop-caches", no_argument, NULL, OPT_NO_DROP},
    {"keep", no_argument, NULL, OPT_KEEP},
    {"age", required_argument, NULL, OPT_AGE},
    {"seed", required_argument, NULL, OPT_SEED},
    {"cpu", required_argument, NULL, OPT_CPU},
    {"disk-dir", required_argument, NULL, OPT_DISK_DIR},
    {"tier-pool", required_argument, NULL, OPT_TIER_POOL},
    {"tier-pool-size", required_argument, NULL, OPT_TIER_POOL_SIZE},
    {"tier-flush-ms", required_argument, NULL, OPT_TIER_FLUSH_MS},
    {"tier-writeback", required_argument, NULL, OPT_TIER_WRITEBACK},
    {"mix-data", required_argument, NULL, OPT_MIX_DATA},
    {"mix-ops", required_argument, NULL, OPT_MIX_OPS},
    {"varmail-files", required_argument, NULL, OPT_VARMAIL_FILES},
    {"varmail-loops", required_argument, NULL, OPT_VARMAIL_LOOPS},
    {"oltp-data", required_argument, NULL, OPT_OLTP_DATA},
    {"oltp-txns", required_argument, NULL, OPT_OLTP_TXNS},
    {"workloads", required_argument, NULL, OPT_WORKLOADS},
    {"out", required_argument, NULL, OPT_OUT},
    {"svg", required_argument, NULL, OPT_SVG},
    {"no-plot", no_argument, NULL, OPT_NO_PLOT},
    {"no-ext4", no_argument, NULL, OPT_NO_EXT4},
    {"help", no_argument, NULL, OPT_HELP},
    {NULL, 0, NULL, 0},
};

/* 0 = not given on the command line; filled from the (quick) defaults afterwards. */
static int parse_opts(int argc, char **argv, struct bench_opts *o)
{
	uint64_t runs = 0, cpu = 0, flush_ms = 0;
	int c, rc = 0;

	memset(o, 0, sizeof(*o));
	o->groups = G_MICRO | G_META | G_MOUNT | G_TIER;
	o->backends = (1u << BK_COUNT) - 1;
	o->drop_caches = 1;
	o->seed = 42;
	o->cpu = -1;
	while ((c = getopt_long(argc, argv, "h", long_opts, NULL)) != -1) {
		switch (c) {
		case OPT_QUICK:
			o->quick = 1;
			break;
		case OPT_ONLY:
			rc = parse_groups(optarg, &o->groups);
			break;
		case OPT_BACKENDS:
			rc = parse_backends(optarg, &o->backends);
			break;
		case OPT_RUNS:
			rc = parse_count(optarg, &runs);
			if (rc == 0 && (runs < 1 || runs > BENCH_MAX_RUNS))
				rc = -EINVAL;
			o->runs = (int)runs;
			break;
		case OPT_JSON:
			o->json = optarg;
			break;
		case OPT_FILE_SIZE:
			rc = parse_size(optarg, &o->file_size);
			break;
		case OPT_OPS:
			rc = parse_count(optarg, &o->rand_ops);
			break;
		case OPT_FILES:
			rc = parse_count(optarg, &o->files);
			break;
		case OPT_MOUNT_FILES:
			rc = parse_mount_files(optarg, o);
			break;
		case OPT_POOL:
			o->pool = optarg;
			break;
		case OPT_POOL_SIZE:
			rc = parse_size(optarg, &o->pool_size);
			break;
		case OPT_MOUNT_POOL_SIZE:
			rc = parse_size(optarg, &o->mount_pool_size);
			break;
		case OPT_WORKDIR:
			o->workdir = optarg;
			break;
		case OPT_RAW_DIR:
			o->raw_dir = optarg;
			break;
		case OPT_EXT4_DIR:
			o->ext4_dir = optarg;
			break;
		case OPT_EXT4_SKIP:
			o->ext4_skip = optarg;
			break;
		case OPT_NO_DROP:
			o->drop_caches = 0;
			break;
		case OPT_AGE: {
			uint64_t n = 0;
			rc = parse_count(optarg, &n);
			if (rc == 0 && (n < 1 || n > 1000))
				rc = -EINVAL;
			o->age_times = (unsigned)n;
			break;
		}
		case OPT_KEEP:
			o->keep = 1;
			break;
		case OPT_SEED:
			rc = parse_count(optarg, &o->seed);
			break;
		case OPT_CPU:
			rc = parse_count(optarg, &cpu);
			if (rc == 0 && cpu >= CPU_SETSIZE)
				rc = -EINVAL;
			o->cpu = (int)cpu;
			break;
		case OPT_DISK_DIR:
			o->disk_dir = optarg;
			break;
		case OPT_TIER_POOL:
			o->tier_pool = optarg;
			break;
		case OPT_TIER_POOL_SIZE:
			rc = parse_size(optarg, &o->tier_pool_size);
			break;
		case OPT_TIER_FLUSH_MS:
			rc = parse_count(optarg, &flush_ms);
			if (rc == 0 && (flush_ms < 1 || flush_ms > 60000))
				rc = -EINVAL;
			o->tier_flush_ms = (unsigned)flush_ms;
			break;
		case OPT_TIER_WRITEBACK:
			if (!strcmp(optarg, "cached") || !strcmp(optarg, "direct"))
				o->tier_direct = !strcmp(optarg, "direct");
			else
				rc = -EINVAL;
			break;
		case OPT_MIX_DATA:
			rc = parse_size(optarg, &o->mix_data);
			break;
		case OPT_MIX_OPS:
			rc = parse_count(optarg, &o->mix_ops);
			break;
		case OPT_VARMAIL_FILES:
			rc = parse_count(optarg, &o->varmail_files);
			break;
		case OPT_VARMAIL_LOOPS:
			rc = parse_count(optarg, &o->varmail_loops);
			break;
		case OPT_OLTP_DATA:
			rc = parse_size(optarg, &o->oltp_data);
			break;
		case OPT_OLTP_TXNS:
			rc = parse_count(optarg, &o->oltp_txns);
			break;
		case OPT_WORKLOADS:
			rc = parse_workloads(optarg, &o->tier_workloads);
			break;
		case OPT_OUT:
			o->out_dir = optarg;
			break;
		case OPT_SVG:
			o->svg = optarg;
			break;
		case OPT_NO_PLOT:
			o->no_plot = 1;
			break;
		case OPT_NO_EXT4:
			o->no_ext4 = 1;
			break;
		case OPT_HELP:
		case 'h':
			usage(stdout);
			exit(0);
		default:
			return -EINVAL;
		}
		if (rc < 0) {
			fprintf(stderr, "%s: bad value for --%s: %s\n", me,
				long_opts[c - OPT_QUICK].name, optarg);
			return rc;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "%s: unexpected argument %s\n", me, argv[optind]);
		return -EINVAL;
	}
	if (o->no_plot && o->svg) {
		fprintf(stderr, "%s: --svg and --no-plot together\n", me);
		return -EINVAL;
	}
	if (!o->file_size)
		o->file_size = o->quick ? 16ull << 20 : 1ull << 30;
	if (!o->rand_ops)
		o->rand_ops = o->quick ? 4096 : 262144;
	if (!o->files)
		o->files = o->quick ? 500 : 100000;
	if (!o->n_mount_files) {
		o->mount_files[0] = o->quick ? 100 : 1000;
		o->mount_files[1] = o->quick ? 2000 : 1000000;
		o->n_mount_files = 2;
	}
	if (!o->runs)
		o->runs = o->quick ? 1 : 3;
	if (!o->age_times)
		o->age_times = o->quick ? 1 : 10;
	if (!o->disk_dir)
		o->disk_dir = "/var/tmp/ferrite-bench";
	if (!o->tier_pool_size)
		o->tier_pool_size = o->quick ? 32ull << 20 : 256ull << 20;
	if (!o->mix_data)
		o->mix_data = o->quick ? 80ull << 20 : 1ull << 30;
	if (!o->mix_ops)
		o->mix_ops = o->quick ? 4000 : 200000;
	if (!o->varmail_files)
		o->varmail_files = o->quick ? 1000 : 40000;
	if (!o->varmail_loops)
		o->varmail_loops = o->quick ? 100 : 10000;
	if (!o->oltp_data)
		o->oltp_data = o->quick ? 80ull << 20 : 768ull << 20;
	if (!o->oltp_txns)
		o->oltp_txns = o->quick ? 100 : 5000;
	if (!o->tier_workloads)
		o->tier_workloads = (1u << TIER_ROWS) - 1;
	if (!o->pool)
		o->pool = "/dev/shm/ferrite/bench.pool";
	if (!o->workdir)
		o->workdir = "/dev/shm/ferrite-bench";
	if (!o->raw_dir) { /* the same backing as the ferrite pool (huge pages if it has them) */
		static char pooldir[4096];

		snprintf(pooldir, sizeof(pooldir), "%s", o->pool);
		o->raw_dir = dirname(pooldir);
	}
	o->file_size &= ~4095ull;
	if (o->file_size < (64u << 10)) {
		fprintf(stderr, "%s: --file-size must be at least 64K\n", me);
		return -EINVAL;
	}
	return 0;
}

/* The JSON and SVG paths: --json and --svg, else in --out (default "."). */
static int outputs_resolve(struct bench_opts *o)
{
	static char json[4096], svg[4096];
	const char *dir = o->out_dir ? o->out_dir : ".";
	int rc;

	if (o->out_dir && (rc = mkdir_p(o->out_dir)) < 0) {
		fprintf(stderr, "%s: cannot create %s: %s\n", me, o->out_dir, strerror(-rc));
		return rc;
	}
	if (!o->json) {
		snprintf(json, sizeof(json), "%s/ferrite-bench.json", dir);
		o->json = json;
	}
	if (!o->no_plot && !o->svg) {
		size_t n = strlen(o->json);

		if (n > 5 && strcmp(o->json + n - 5, ".json") == 0)
			snprintf(svg, sizeof(svg), "%.*s.svg", (int)(n - 5), o->json);
		else
			snprintf(svg, sizeof(svg), "%s.svg", o->json);
		o->svg = svg;
	}
	/* said now, not after the measurements */
	for (int i = 0; i < 2; i++) {
		const char *file = i ? o->svg : o->json;
		char d[4096];

		if (!file)
			continue;
		snprintf(d, sizeof(d), "%s", file);
		if (access(dirname(d), W_OK) < 0) {
			rc = -errno;
			fprintf(stderr, "%s: cannot write %s: %s (--out DIR puts it elsewhere)\n",
				me, file, strerror(errno));
			return rc;
		}
	}
	return 0;
}

struct bench_state {
	struct bench_backend store[BK_COUNT];
	struct bench_backend *bk[BK_COUNT];
	const char *skip[BK_COUNT];
	char why[BK_COUNT][320];
};

static void backend_skip(struct bench_state *s, int k, const char *fmt, const char *arg)
{
	snprintf(s->why[k], sizeof(s->why[k]), fmt, arg);
	s->skip[k] = s->why[k];
	s->bk[k] = NULL;
}

static void backends_init(struct bench_state *s, const struct bench_opts *o)
{
	unsigned need = 0; /* backends the selected groups use */
	char dir[4096];
	char why[300];

	if (o->groups & G_MICRO)
		need |= MICRO_COLS;
	if (o->groups & G_META)
		need |= META_COLS;
	if (o->groups & G_TIER)
		need |= TIER_COLS;
	for (int k = 0; k < BK_COUNT; k++) {
		if (!(need & (1u << k)))
			continue;
		if (!(o->backends & (1u << k))) {
			backend_skip(s, k, "%s", "not selected (--backends)");
			continue;
		}
		why[0] = '\0';
		s->bk[k] = &s->store[k];
		if (k == BK_FERRITE || k == BK_STRICT || k == BK_AGED) {
			progress("setting up %s", bk_names[k]);
			if (ferrite_backend_init(s->bk[k], o, k, why, sizeof(why)) < 0)
				backend_skip(s, k, "%s", why);
		} else if (k == BK_TIER) {
			progress("setting up tier");
			if (ferrite_tier_backend_init(s->bk[k], o, why, sizeof(why)) < 0)
				backend_skip(s, k, "%s", why);
		} else if (k == BK_DISK) {
			snprintf(dir, sizeof(dir), "%s/ext4", o->disk_dir);
			if (posix_backend_init(s->bk[k], "ext4-disk", "ext4", dir, 0, why,
					       sizeof(why)) < 0) {
				backend_skip(s, k, "%s", why);
				continue;
			}
			snprintf(s->bk[k]->where, sizeof(s->bk[k]->where),
				 "%.250s on %.200s (POSIX system calls)", dir,
				 mount_source(dir, why, sizeof(why)));
		} else if (k == BK_TMPFS) {
			snprintf(dir, sizeof(dir), "%s/tmpfs", o->workdir);
			if (posix_backend_init(s->bk[k], "tmpfs", "tmpfs", dir, 0, why,
					       sizeof(why)) < 0)
				backend_skip(s, k, "%s", why);
		} else if (k == BK_EXT4) {
			int root = geteuid() == 0;

			if (o->ext4_skip) {
				backend_skip(s, k, "%s", o->ext4_skip);
				continue;
			}
			if (!o->ext4_dir) {
				backend_skip(s, k, "%s",
					     "no ext4 prepared (run through bench/run-bench.sh as "
					     "root, or pass --ext4-dir)");
				continue;
			}
			snprintf(dir, sizeof(dir), "%s/ferrite-bench", o->ext4_dir);
			if (posix_backend_init(s->bk[k], "ext4", "ext4", dir,
					       PX_TRIM |
						   (o->drop_caches && root ? PX_DROP_CACHES : 0),
					       why, sizeof(why)) < 0) {
				backend_skip(s, k, "%s", why);
				continue;
			}
			snprintf(s->bk[k]->where, sizeof(s->bk[k]->where),
				 "%.250s on %.200s (POSIX system calls)", dir,
				 mount_source(dir, why, sizeof(why)));
			if (o->drop_caches && !root)
				snprintf(s->bk[k]->notes, sizeof(s->bk[k]->notes),
					 "not root: page cache NOT dropped before RW (ext4 RW "
					 "pessimistic)");
		} else {
			progress("setting up raw (pre-faulting %llu MiB)",
				 (unsigned long long)(o->file_size >> 20));
			if (mkdir_p(o->raw_dir) < 0 ||
			    raw_backend_init(s->bk[k], o->raw_dir, o->file_size, why, sizeof(why)) <
				0)
				backend_skip(s, k, "%s",
					     why[0] ? why : "cannot create the raw dir");
		}
	}
}

/* Errors (not timings): a selected backend that could not be set up for a reason
 * other than missing privileges, a failed operation, data that did not read back. */
static int count_failures(const struct bench_state *s, const struct bench_opts *o,
			  const struct bench_row *micro, const struct bench_row *meta,
			  const struct mount_result *mnt, const char *mount_skip,
			  const struct tier_group *tier)
{
	int n = 0;

	for (int k = 0; k < BK_COUNT; k++) {
		if (s->skip[k] && k != BK_EXT4 && (o->backends & (1u << k)))
			n++;
		for (int i = 0; !s->skip[k] && i < TIER_ROWS && (o->groups & G_TIER); i++)
			n += tier->rows[i].cell[k].failed + !!tier->rows[i].cell[k].cleanup_err[0];
		for (int i = 0; !s->skip[k] && i < MICRO_ROWS && (o->groups & G_MICRO); i++)
			n += micro[i].cell[k].failed + !!micro[i].cell[k].cleanup_err[0];
		for (int i = 0; !s->skip[k] && i < META_ROWS && (o->groups & G_META); i++)
			n += meta[i].cell[k].failed + !!meta[i].cell[k].cleanup_err[0];
	}
	if ((o->groups & G_MOUNT) && (o->backends & (1u << BK_FERRITE))) {
		n += mount_skip != NULL;
		for (int i = 0; !mount_skip && i < o->n_mount_files; i++)
			n += mnt[i].failed;
	}
	return n;
}

static void backends_fini(struct bench_state *s)
{
	for (int k = 0; k < BK_COUNT; k++) {
		if (s->bk[k] && s->bk[k]->ctx) {
			s->bk[k]->fini(s->bk[k]->ctx);
			s->bk[k]->ctx = NULL; /* where/notes stay for the JSON */
		}
	}
}

/* "group 2 of 3: b) metadata, 7 workloads on 3 backends, 3 runs (63 measurements)" */
static void group_banner(const struct bench_state *s, const struct bench_opts *o, int *nth,
			 int ngroups, const char *label, int nrows, unsigned cols)
{
	int nb = 0;

	for (int k = 0; k < BK_COUNT; k++)
		nb += (cols & (1u << k)) && s->bk[k];
	progress("group %d of %d: %s, %d workloads on %d backend%s, %d run%s (%d measurements)",
		 ++*nth, ngroups, label, nrows, nb, nb == 1 ? "" : "s", o->runs,
		 o->runs == 1 ? "" : "s", nrows * nb * o->runs);
}

/* The measurements, the tables, the JSON and the plot (in the child). */
static int bench_run(struct bench_opts *o, const char *gnuplot)
{
	static struct bench_row micro[MICRO_ROWS], meta[META_ROWS];
	static struct mount_result mnt[BENCH_MAX_MOUNT_SIZES];
	static struct tier_group tier;
	static struct bench_state s;
	char mount_why[320], why[400];
	const char *mount_skip = NULL;
	double t0 = now_sec();
	int nfail, ngroups = 0, nth = 0, rc = 0;

	setvbuf(stdout, NULL, _IOLBF, 0);
	if (o->cpu >= 0) {
		cpu_set_t set;

		CPU_ZERO(&set);
		CPU_SET(o->cpu, &set);
		if (sched_setaffinity(0, sizeof(set), &set) < 0) {
			fprintf(stderr, "%s: cannot pin to CPU %d: %s\n", me, o->cpu,
				strerror(errno));
			return 2;
		}
	}
	for (unsigned g = o->groups; g; g &= g - 1)
		ngroups++;
	micro_rows_init(micro);
	meta_rows_init(meta);
	tier_rows_init(&tier, o);
	backends_init(&s, o);
	report_header(s.bk, s.skip, o);

	if (o->groups & G_MICRO) {
		group_banner(&s, o, &nth, ngroups, "a) micro", MICRO_ROWS, MICRO_COLS);
		micro_run(s.bk, o, micro);
		report_micro(micro, s.skip, o);
	}
	if (o->groups & G_META) {
		group_banner(&s, o, &nth, ngroups, "b) metadata", META_ROWS, META_COLS);
		meta_run(s.bk, o, meta);
		report_meta(meta, s.skip, o);
	}
	if (o->groups & G_TIER) {
		group_banner(&s, o, &nth, ngroups, "d) tier", TIER_ROWS, TIER_COLS);
		tier_run(s.bk, s.skip, o, &tier);
		report_tier(&tier, s.skip, o);
	}
	backends_fini(&s); /* the ferrite pool is unmounted before c) forks its probes */

	if (o->groups & G_MOUNT) {
		progress("group %d of %d: c) mount, pools of %d sizes, %d run%s", ++nth, ngroups,
			 o->n_mount_files, o->runs, o->runs == 1 ? "" : "s");
		if (!(o->backends & (1u << BK_FERRITE)))
			mount_skip = "ferrite not selected (--backends)";
		else if (mount_group_run(o, mnt, o->n_mount_files, mount_why, sizeof(mount_why)) <
			 0)
			mount_skip = mount_why;
		report_mount(mnt, o->n_mount_files, mount_skip, o);
	}
	if (report_json(o->json, s.bk, s.skip, o, (o->groups & G_MICRO) ? micro : NULL,
			(o->groups & G_META) ? meta : NULL, (o->groups & G_MOUNT) ? mnt : NULL,
			o->n_mount_files, mount_skip, (o->groups & G_TIER) ? &tier : NULL) != 0) {
		fprintf(stderr, "%s: cannot write %s: %s\n", me, o->json, strerror(errno));
		return 1;
	}
	progress("results written to %s", o->json);
	if (o->no_gnuplot)
		fprintf(stderr,
			"%s: no plot: gnuplot is not installed (apt-get install gnuplot-nox; "
			"--no-plot says no plot is wanted)\n",
			me);
	if (o->svg) {
		int p =
		    report_plot(o->svg, gnuplot, s.skip, o, (o->groups & G_MICRO) ? micro : NULL,
				(o->groups & G_META) ? meta : NULL,
				(o->groups & G_TIER) ? &tier : NULL, why, sizeof(why));

		if (p < 0) {
			fprintf(stderr, "%s: no plot: %s\n", me, why);
			rc = 1;
		} else if (p > 0) {
			progress("no plot: %s", why);
		} else {
			progress("plot written to %s", o->svg);
		}
	}
	rmdir(o->workdir);
	if (o->groups & G_TIER)
		rmdir(o->disk_dir); /* if empty: --keep leaves the tier's backing in it */
	nfail = count_failures(&s, o, micro, meta, mnt, mount_skip, &tier);
	progress("done in %.0f s", now_sec() - t0);
	if (nfail) {
		fprintf(stderr, "%s: %d error%s (see the tables above)\n", me, nfail,
			nfail == 1 ? "" : "s");
		return 1;
	}
	return rc;
}

/* POOL with SUFFIX before its ".pool", as backend_ferrite.c names them. */
static void pool_variant(char *out, size_t len, const char *pool, const char *suffix)
{
	size_t n = strlen(pool);
	int dot = n > 5 && strcmp(pool + n - 5, ".pool") == 0;

	snprintf(out, len, "%.*s%s%s", (int)(dot ? n - 5 : n), pool, suffix, dot ? ".pool" : "");
}

/* What a run stopped half-way leaves behind: its pools, the tmpfs column's
 * files and the tier's directories (they can hold GiB). */
static void leftovers(const struct bench_opts *o)
{
	char path[4200], dir[4096];
	glob_t g;

	snprintf(path, sizeof(path), "%s/tmpfs", o->workdir);
	rm_tree(path);
	rmdir(o->workdir);
	snprintf(path, sizeof(path), "%s/ferrite-bench-raw.pool", o->raw_dir);
	unlink(path);
	snprintf(dir, sizeof(dir), "%s", o->pool);
	snprintf(path, sizeof(path), "%s/ferrite-bench-mount-*.pool", dirname(dir));
	if (glob(path, 0, NULL, &g) == 0) {
		for (size_t i = 0; i < g.gl_pathc; i++)
			unlink(g.gl_pathv[i]);
		globfree(&g);
	}
	if (o->keep)
		return;
	unlink(o->pool);
	pool_variant(path, sizeof(path), o->pool, "-strict");
	unlink(path);
	if (!(o->groups & G_TIER))
		return;
	if (o->tier_pool)
		unlink(o->tier_pool);
	pool_variant(path, sizeof(path), o->pool, "-tier");
	unlink(path);
	snprintf(path, sizeof(path), "%s/tier-backing", o->disk_dir);
	rm_tree(path);
	snprintf(path, sizeof(path), "%s/ext4", o->disk_dir);
	rm_tree(path);
	rmdir(o->disk_dir);
}

/* "ferrite bench --only micro,meta" (as run, under the name it was run as). */
static const char *command_line(int argc, char **argv)
{
	static char buf[1024];
	size_t n = (size_t)snprintf(buf, sizeof(buf), "%s", me);

	for (int i = 1; i < argc && n < sizeof(buf); i++)
		n += (size_t)snprintf(buf + n, sizeof(buf) - n, " %s", argv[i]);
	return buf;
}

static void load_average(char *buf, size_t len)
{
	FILE *f = fopen("/proc/loadavg", "re");
	double a = 0, b = 0, c = 0;

	snprintf(buf, len, "?");
	if (f && fscanf(f, "%lf %lf %lf", &a, &b, &c) == 3)
		snprintf(buf, len, "%.2f %.2f %.2f", a, b, c);
	if (f)
		fclose(f);
}

static volatile sig_atomic_t stop_signal;
static volatile pid_t child_pid;

static void on_stop(int sig)
{
	stop_signal = sig;
	if (child_pid > 0)
		kill(child_pid, SIGTERM);
}

int main(int argc, char **argv)
{
	struct bench_opts o;
	struct ext4_loop e4 = {.loop_fd = -1};
	char gnuplot[4096] = "", e4why[320];
	int st, rc, svg_asked = 0;
	pid_t pid;

	if (argc == 3 && strcmp(argv[1], "--probe-mount") == 0)
		return mount_probe_main(argv[2]);
	if (getenv("FERRITE_BENCH_AS"))
		me = getenv("FERRITE_BENCH_AS");
	argv[0] = (char *)me; /* getopt's messages name the command as run */
	if (parse_opts(argc, argv, &o) < 0) {
		fprintf(stderr, "Try '%s --help' for more information.\n", me);
		return 2;
	}
	if (!o.no_plot && plot_find_gnuplot(gnuplot, sizeof(gnuplot)) < 0) {
		/* said now and again at the end; the measurements and the JSON go on */
		svg_asked = o.svg != NULL;
		fprintf(stderr,
			"%s: gnuplot is not installed, so there will be no plot, only the JSON: "
			"apt-get install gnuplot-nox (or run with --no-plot)\n",
			me);
		o.no_plot = 1;
		o.no_gnuplot = 1;
		o.svg = NULL;
	}
	if (outputs_resolve(&o) < 0)
		return 2;
	o.command = command_line(argc, argv);
	load_average(o.load, sizeof(o.load));
	progress("load average %s (1, 5, 15 min): the figures are only as quiet as the machine",
		 o.load);
	/* ext4 for a) and b), unless given or not wanted */
	if ((o.groups & (G_MICRO | G_META)) && (o.backends & (1u << BK_EXT4)) && !o.ext4_dir &&
	    !o.ext4_skip) {
		if (o.no_ext4)
			o.ext4_skip = "not wanted (--no-ext4)";
		else if (ext4_loop_setup(&e4, &o, e4why, sizeof(e4why)) < 0)
			o.ext4_skip = e4why;
		else
			o.ext4_dir = e4.mnt;
	}

	/* The run is a child: a signal stops it, and this process cleans up. */
	fflush(NULL);
	signal(SIGINT, on_stop);
	signal(SIGTERM, on_stop);
	signal(SIGHUP, on_stop);
	signal(SIGPIPE, SIG_IGN); /* a closed pipe ends the run, not the clean-up */
	pid = fork();
	if (pid < 0) {
		fprintf(stderr, "%s: fork: %s\n", me, strerror(errno));
		ext4_loop_teardown(&e4);
		return 2;
	}
	if (pid == 0) {
		signal(SIGINT, SIG_DFL);
		signal(SIGTERM, SIG_DFL);
		signal(SIGHUP, SIG_DFL);
		signal(SIGPIPE, SIG_DFL);
		_exit(bench_run(&o, gnuplot));
	}
	child_pid = pid;
	if (stop_signal) /* it came before child_pid was known */
		kill(pid, SIGTERM);
	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR) {
			st = 0;
			break;
		}
	if (WIFSIGNALED(st) || stop_signal) {
		if (!stop_signal)
			fprintf(stderr,
				"%s: the run was killed (%s; out of memory? see dmesg); removing "
				"its files\n",
				me, strsignal(WTERMSIG(st)));
		else
			progress("stopped (%s); removing what the run made",
				 strsignal(stop_signal));
		leftovers(&o);
	}
	ext4_loop_teardown(&e4);
	if (stop_signal)
		rc = 128 + stop_signal;
	else
		rc = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
	if (rc == 0 && svg_asked)
		rc = 1; /* --svg named a plot that could not be drawn */
	return rc;
}
