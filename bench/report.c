/*
 * report.c -- tables on stdout and the --json file.
 *
 * Measures nothing. Every figure is the median over --runs samples of the throughput
 * of one series (min and max printed under it); a ratio column is the ratio of two
 * medians measured in the same process, interleaved in time (see micro.c, meta.c).
 * The target column only annotates ("ok" / "BELOW"): nothing here fails the program on
 * timing.
 */
#ifndef _GNU_SOURCE /* the top-level CMakeLists.txt defines it */
#define _GNU_SOURCE
#endif
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"

static const char *const bk_label[BK_COUNT] = {"ferrite", "tmpfs", "ext4",	"raw",
					       "strict",  "tier",  "ext4-disk", "aged"};

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

double stat_median(const double *v, int n)
{
	double s[BENCH_MAX_RUNS];

	if (n <= 0)
		return 0;
	memcpy(s, v, sizeof(double) * (size_t)n);
	qsort(s, (size_t)n, sizeof(double), cmp_double);
	return n % 2 ? s[n / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
}

double stat_min(const double *v, int n)
{
	double m = n > 0 ? v[0] : 0;

	for (int i = 1; i < n; i++)
		m = v[i] < m ? v[i] : m;
	return m;
}

double stat_max(const double *v, int n)
{
	double m = n > 0 ? v[0] : 0;

	for (int i = 1; i < n; i++)
		m = v[i] > m ? v[i] : m;
	return m;
}

/* Throughput samples of a cell: GB/s (bytes != 0) or ops/s. */
static int cell_rates(const struct bench_cell *c, int bytes, double *out)
{
	if (c->failed || c->n == 0)
		return 0;
	for (int i = 0; i < c->n; i++)
		out[i] = (bytes ? c->bytes / 1e9 : c->ops) / c->secs[i];
	return c->n;
}

static double cell_median(const struct bench_cell *c, int bytes)
{
	double v[BENCH_MAX_RUNS];
	int n = cell_rates(c, bytes, v);

	return n ? stat_median(v, n) : 0;
}

/* 4 significant digits with k/M/G. */
static const char *fmt_num(double v, char *buf, size_t len)
{
	static const char sfx[] = {'\0', 'k', 'M', 'G'};
	int u = 0;

	while (v >= 1000 && u < 3) {
		v /= 1000;
		u++;
	}
	if (v < 10)
		snprintf(buf, len, "%.3f", v);
	else if (v < 100)
		snprintf(buf, len, "%.2f", v);
	else
		snprintf(buf, len, "%.1f", v);
	if (sfx[u]) {
		size_t l = strlen(buf);

		if (l + 1 < len) {
			buf[l] = sfx[u];
			buf[l + 1] = '\0';
		}
	}
	return buf;
}

static void cell_text(const struct bench_cell *c, const char *skip, int bytes, int line, char *buf,
		      size_t len)
{
	double v[BENCH_MAX_RUNS];
	char a[24], b[24];
	int n;

	if (skip || (c->skipped[0] && !c->failed && c->n == 0)) {
		snprintf(buf, len, "%s", line == 0 ? "skipped" : "");
		return;
	}
	if (c->failed) {
		snprintf(buf, len, "%s", line == 0 ? "FAILED" : "");
		return;
	}
	n = cell_rates(c, bytes, v);
	if (n == 0) {
		snprintf(buf, len, "%s", line == 0 ? "-" : "");
		return;
	}
	if (line == 0)
		snprintf(buf, len, "%s", fmt_num(stat_median(v, n), a, sizeof(a)));
	else
		snprintf(buf, len, "%s-%s", fmt_num(stat_min(v, n), a, sizeof(a)),
			 fmt_num(stat_max(v, n), b, sizeof(b)));
}

/* A table: its columns (with their labels) and its ratio columns. */
struct table_col {
	int id;
	const char *label;
};

struct table_ratio {
	int num, den; /* median throughput of num / that of den */
	const char *label;
};

struct table_spec {
	const struct table_col *cols;
	int ncols;
	const struct table_ratio *ratios;
	int nratios;
	int micro; /* GB/s and ops/s lines (else ops/s only) */
};

/* aged: the same pool after aging (age.c); a/f is the share of the fresh
 * pool's throughput it keeps (issue 15: >= 0.9 on every row). */
static const struct table_col micro_cols[] = {{BK_FERRITE, "ferrite"}, {BK_TMPFS, "tmpfs"},
					      {BK_EXT4, "ext4"},       {BK_RAW, "raw"},
					      {BK_STRICT, "strict"},   {BK_AGED, "aged"}};
static const struct table_ratio micro_ratios[] = {{BK_FERRITE, BK_TMPFS, "f/tmpfs"},
						  {BK_FERRITE, BK_EXT4, "f/ext4"},
						  {BK_FERRITE, BK_RAW, "f/raw"},
						  {BK_STRICT, BK_FERRITE, "s/f"},
						  {BK_AGED, BK_FERRITE, "a/f"}};
static const struct table_col meta_cols[] = {
    {BK_FERRITE, "ferrite"}, {BK_TMPFS, "tmpfs"}, {BK_EXT4, "ext4"}, {BK_AGED, "aged"}};
static const struct table_ratio meta_ratios[] = {{BK_FERRITE, BK_TMPFS, "f/tmpfs"},
						 {BK_FERRITE, BK_EXT4, "f/ext4"},
						 {BK_AGED, BK_FERRITE, "a/f"}};
static const struct table_spec micro_spec = {micro_cols, 6, micro_ratios, 5, 1};
static const struct table_spec meta_spec = {meta_cols, 4, meta_ratios, 3, 0};

static const struct table_col tier_cols[] = {
    {BK_TIER, "tier"}, {BK_DISK, "ext4-disk"}, {BK_FERRITE, "pm"}};
static const struct table_ratio tier_ratios[] = {{BK_TIER, BK_DISK, "t/ext4-disk"},
						 {BK_TIER, BK_FERRITE, "t/pm"}};
static const struct table_spec tier_spec = {tier_cols, 3, tier_ratios, 2, 0};

static const char *col_label(const struct table_spec *t, int id)
{
	for (int i = 0; i < t->ncols; i++)
		if (t->cols[i].id == id)
			return t->cols[i].label;
	return bk_label[id];
}

static int ratio_width(const struct table_ratio *q)
{
	int n = (int)strlen(q->label);

	return n > 8 ? n : 8;
}

static void ratio_text(const struct bench_row *r, const struct table_ratio *q, char *buf,
		       size_t len)
{
	double f = cell_median(&r->cell[q->num], 0);
	double p = cell_median(&r->cell[q->den], 0);

	if (f > 0 && p > 0)
		snprintf(buf, len, "%.2fx", f / p);
	else
		snprintf(buf, len, "-");
}

static void target_text(const struct bench_row *r, char *buf, size_t len)
{
	double f = cell_median(&r->cell[r->subject], 0);
	const char *verdict = "ok";

	if (!r->target) {
		snprintf(buf, len, "%s", "");
		return;
	}
	for (int k = 0; k < BK_COUNT; k++) {
		double p = cell_median(&r->cell[k], 0);

		if (r->min_vs[k] <= 0)
			continue;
		if (f <= 0 || p <= 0) {
			verdict = "n/a";
			break;
		}
		if (f / p < r->min_vs[k])
			verdict = "BELOW";
	}
	snprintf(buf, len, "%s: %s", r->target, verdict);
}

static void print_failures(const struct bench_row *rows, int nrows, const char *skip[BK_COUNT],
			   const struct table_spec *t)
{
	for (int i = 0; i < nrows; i++) {
		for (int j = 0; j < t->ncols; j++) {
			int k = t->cols[j].id;
			const struct bench_cell *c = &rows[i].cell[k];

			if (skip[k])
				continue;
			if (c->failed)
				printf("  failed: %s on %s: %s\n", rows[i].name, t->cols[j].label,
				       c->err);
			else if (c->skipped[0])
				printf("  skipped: %s on %s: %s\n", rows[i].name, t->cols[j].label,
				       c->skipped);
			if (c->cleanup_err[0])
				printf("  error after %s on %s: %s\n", rows[i].name,
				       t->cols[j].label, c->cleanup_err);
		}
	}
}

static void print_table(const struct bench_row *rows, int nrows, const char *skip[BK_COUNT],
			const struct table_spec *t, int runs)
{
	char cell[40], tgt[80];

	printf("%-10s %-19s %-7s", "workload", "one call", "");
	for (int j = 0; j < t->ncols; j++)
		printf(" %13s", t->cols[j].label);
	for (int q = 0; q < t->nratios; q++)
		printf(" %*s", ratio_width(&t->ratios[q]), t->ratios[q].label);
	printf("  target\n");
	for (int i = 0; i < nrows; i++) {
		const struct bench_row *r = &rows[i];
		/* micro: GB/s, ops/s, spread of GB/s; others: ops/s, spread (if several runs) */
		int lines = (t->micro ? 2 : 1) + (runs > 1);

		for (int l = 0; l < lines; l++) {
			int bytes = t->micro && l != 1;
			int spread = runs > 1 && l == lines - 1;
			const char *metric = spread ? "min-max" : bytes ? "GB/s" : "ops/s";

			printf("%-10s %-19s %-7s", l == 0 ? r->name : "", l == 0 ? r->unit : "",
			       metric);
			for (int j = 0; j < t->ncols; j++) {
				int k = t->cols[j].id;

				cell_text(&r->cell[k], skip[k], bytes, spread, cell, sizeof(cell));
				printf(" %13s", cell);
			}
			if (l == 0) {
				for (int q = 0; q < t->nratios; q++) {
					ratio_text(r, &t->ratios[q], cell, sizeof(cell));
					printf(" %*s", ratio_width(&t->ratios[q]), cell);
				}
				target_text(r, tgt, sizeof(tgt));
				printf("  %s", tgt);
			}
			printf("\n");
		}
	}
	print_failures(rows, nrows, skip, t);
}

static void cpu_model(char *buf, size_t len)
{
	char line[512];
	FILE *f = fopen("/proc/cpuinfo", "re");

	snprintf(buf, len, "unknown CPU");
	if (!f)
		return;
	while (fgets(line, sizeof(line), f)) {
		char *colon = strchr(line, ':');

		if (strncmp(line, "model name", 10) == 0 && colon) {
			snprintf(buf, len, "%s", colon + 2);
			buf[strcspn(buf, "\n")] = '\0';
			break;
		}
	}
	fclose(f);
}

void report_header(struct bench_backend *bk[BK_COUNT], const char *skip[BK_COUNT],
		   const struct bench_opts *o)
{
	struct utsname u;
	char cpu[256], sz[32];
	time_t now = time(NULL);

	uname(&u);
	cpu_model(cpu, sizeof(cpu));
	printf("ferrite-bench: %s %s, %s, %ld CPUs, %s", u.sysname, u.release, cpu,
	       sysconf(_SC_NPROCESSORS_ONLN), ctime(&now));
	printf("options: file %s, %llu random ops, %llu files, runs %d",
	       fmt_size(o->file_size, sz, sizeof(sz)), (unsigned long long)o->rand_ops,
	       (unsigned long long)o->files, o->runs);
	if (o->cpu >= 0)
		printf(", pinned to CPU %d", o->cpu);
	printf("%s\n", o->quick ? " (--quick: smoke run only)" : "");
	for (int k = 0; k < BK_COUNT; k++) {
		if (skip[k])
			printf("  %-9s SKIPPED: %s\n", bk_label[k], skip[k]);
		else if (bk[k])
			printf("  %-9s %s%s%s%s\n", bk_label[k], bk[k]->where,
			       bk[k]->notes[0] ? "; " : "", bk[k]->notes,
			       k == BK_FERRITE && (o->groups & G_TIER) ? " (the pm column of d)"
								       : "");
	}
	fflush(stdout);
}

void report_micro(const struct bench_row rows[MICRO_ROWS], const char *skip[BK_COUNT],
		  const struct bench_opts *o)
{
	char sz[32];

	printf("\na) ctFS micro-benchmarks: one %s file, %llu random 4 KiB ops; %s%d run%s%s\n",
	       fmt_size(o->file_size, sz, sizeof(sz)), (unsigned long long)o->rand_ops,
	       o->runs == 1 ? "" : "median of ", o->runs, o->runs == 1 ? "" : "s",
	       o->runs == 1 ? "" : " (min-max of GB/s below)");
	print_table(rows, MICRO_ROWS, skip, &micro_spec, o->runs);
	fflush(stdout);
}

void report_meta(const struct bench_row rows[META_ROWS], const char *skip[BK_COUNT],
		 const struct bench_opts *o)
{
	printf("\nb) metadata: %llu files in one directory; ops/s, %s%d run%s%s\n",
	       (unsigned long long)o->files, o->runs == 1 ? "" : "median of ", o->runs,
	       o->runs == 1 ? "" : "s", o->runs == 1 ? "" : " (min-max below)");
	print_table(rows, META_ROWS, skip, &meta_spec, o->runs);
	fflush(stdout);
}

void report_mount(const struct mount_result *res, int nres, const char *skip,
		  const struct bench_opts *o)
{
	const struct mount_result *lo = NULL, *hi = NULL;
	char sz[32];

	printf("\nc) mount (ferrite only, a fresh process per probe): median of %d run%s "
	       "[min max]\n",
	       o->runs, o->runs == 1 ? "" : "s");
	if (skip) {
		printf("  skipped: %s\n", skip);
		return;
	}
	printf("%9s %8s  %-28s %-24s %10s %10s %12s\n", "files", "pool", "mount ms",
	       "RSS after - before, KiB", "anon KiB", "file KiB", "1st stat us");
	for (int i = 0; i < nres; i++) {
		const struct mount_result *r = &res[i];
		char a[64], b[64];

		if (r->failed || r->n == 0) {
			printf("%9llu %8s  FAILED: %s\n", (unsigned long long)r->files,
			       fmt_size(r->pool_size, sz, sizeof(sz)), r->err);
			continue;
		}
		snprintf(a, sizeof(a), "%.3f [%.3f %.3f]", stat_median(r->mount_ms, r->n),
			 stat_min(r->mount_ms, r->n), stat_max(r->mount_ms, r->n));
		snprintf(b, sizeof(b), "%.0f [%.0f %.0f]", stat_median(r->rss_kib, r->n),
			 stat_min(r->rss_kib, r->n), stat_max(r->rss_kib, r->n));
		printf("%9llu %8s  %-28s %-24s %10.0f %10.0f %12.1f\n",
		       (unsigned long long)r->files, fmt_size(r->pool_size, sz, sizeof(sz)), a, b,
		       stat_median(r->anon_kib, r->n), stat_median(r->shmem_kib, r->n),
		       stat_median(r->stat_us, r->n));
		if (!lo || r->files < lo->files)
			lo = r;
		if (!hi || r->files > hi->files)
			hi = r;
	}
	for (int i = 0; i < nres; i++) {
		const struct mount_result *r = &res[i];

		if (r->failed || r->n == 0)
			continue;
		printf("  target mount < 1 ms, %llu files: %s\n", (unsigned long long)r->files,
		       stat_median(r->mount_ms, r->n) < 1.0 ? "ok" : "BELOW");
	}
	if (lo && hi && lo != hi) {
		double d = stat_median(hi->rss_kib, hi->n) - stat_median(lo->rss_kib, lo->n);

		printf("  target RSS(%llu files) - RSS(%llu files) <= 2048 KiB: %+.0f KiB: %s\n",
		       (unsigned long long)hi->files, (unsigned long long)lo->files, d,
		       d <= 2048 ? "ok" : "BELOW");
	}
	fflush(stdout);
}

static uint64_t cache_accesses(const struct tier_cache_sample *c)
{
	return c->read_hits + c->read_misses + c->write_hits + c->write_misses;
}

static double pct(uint64_t part, uint64_t whole)
{
	return whole ? 100.0 * (double)part / (double)whole : 0.0;
}

void report_tier(const struct tier_group *g, const char *skip[BK_COUNT], const struct bench_opts *o)
{
	char sz[32];
	int full = 0;

	printf("\nd) tier: the tiered pool (%s, flush period %u ms, %s write-back) against ext4 on "
	       "the disk and the pm engine; ops/s, %s%d run%s%s\n",
	       fmt_size(o->tier_pool_size, sz, sizeof(sz)),
	       o->tier_flush_ms ? o->tier_flush_ms : 10, o->tier_direct ? "direct" : "cached",
	       o->runs == 1 ? "" : "median of ", o->runs, o->runs == 1 ? "" : "s",
	       o->runs == 1 ? "" : " (min-max below)");
	printf("page cache %s before each timed run; every column makes the same fsync and "
	       "fdatasync calls\n",
	       g->cache_dropped ? "dropped"
	       : o->drop_caches ? "NOT dropped (not root, or --quick)"
				: "NOT dropped (--no-drop-caches)");
	for (int i = 0; i < TIER_ROWS; i++)
		printf("  %-10s %s\n", g->rows[i].name, g->data[i]);
	print_table(g->rows, TIER_ROWS, skip, &tier_spec, o->runs);
	if (skip[BK_TIER]) {
		fflush(stdout);
		return;
	}
	printf("tier cache during the timed runs (sum over the runs; 4 KiB chunks; accesses = "
	       "chunk reads + writes):\n");
	printf("%-10s %10s %9s %9s %10s %9s %9s %10s %9s %11s\n", "workload", "accesses",
	       "read hit", "write hit", "collisions", "forced", "periodic", "forced/acc",
	       "dirty end", "records");
	for (int i = 0; i < TIER_ROWS; i++) {
		struct tier_cache_sample t = {0};
		const struct tier_cache_sample *last;
		char rec[32];

		if (g->ncache[i] == 0)
			continue;
		for (int r = 0; r < g->ncache[i]; r++) {
			const struct tier_cache_sample *c = &g->cache[i][r];

			t.read_hits += c->read_hits;
			t.read_misses += c->read_misses;
			t.write_hits += c->write_hits;
			t.write_misses += c->write_misses;
			t.collisions += c->collisions;
			t.forced += c->forced;
			t.periodic += c->periodic;
		}
		last = &g->cache[i][g->ncache[i] - 1];
		snprintf(rec, sizeof(rec), "%llu/%llu", (unsigned long long)last->records_used,
			 (unsigned long long)last->records);
		full |= last->records_used >= last->records;
		printf("%-10s %10llu %8.1f%% %8.1f%% %10llu %9llu %9llu %9.3f%% %9llu %11s\n",
		       g->rows[i].name, (unsigned long long)cache_accesses(&t),
		       pct(t.read_hits, t.read_hits + t.read_misses),
		       pct(t.write_hits, t.write_hits + t.write_misses),
		       (unsigned long long)t.collisions, (unsigned long long)t.forced,
		       (unsigned long long)t.periodic, pct(t.forced, cache_accesses(&t)),
		       (unsigned long long)last->dirty_end, rec);
	}
	printf("  target: forced flushes < 2%% of accesses (annotation only)\n");
	if (full)
		printf("  records used = all: the record table was full; a closed file with only "
		       "clean chunks gives its record to the next file opened, and only when "
		       "none can is a file read and written uncached (each write followed by "
		       "fdatasync)\n");
	fflush(stdout);
}

/* ---- JSON ------------------------------------------------------------------------ */

static void json_str(FILE *f, const char *s)
{
	fputc('"', f);
	for (; s && *s; s++) {
		unsigned char ch = (unsigned char)*s;

		if (ch == '"' || ch == '\\')
			fprintf(f, "\\%c", ch);
		else if (ch < 0x20)
			fprintf(f, "\\u%04x", ch);
		else
			fputc(ch, f);
	}
	fputc('"', f);
}

static void json_series(FILE *f, const char *key, const double *v, int n)
{
	fprintf(f, "\"%s\": {\"median\": %.6g, \"min\": %.6g, \"max\": %.6g, \"samples\": [", key,
		stat_median(v, n), stat_min(v, n), stat_max(v, n));
	for (int i = 0; i < n; i++)
		fprintf(f, "%s%.6g", i ? ", " : "", v[i]);
	fprintf(f, "]}");
}

static void json_rows(FILE *f, const char *group, const struct bench_row *rows, int nrows,
		      const char *skip[BK_COUNT], const struct table_spec *t, int *first)
{
	for (int i = 0; rows && i < nrows; i++) {
		int subj = rows[i].subject;
		double s = cell_median(&rows[i].cell[subj], 0);

		for (int j = 0; j < t->ncols; j++) {
			int k = t->cols[j].id;
			const struct bench_cell *c = &rows[i].cell[k];
			double v[BENCH_MAX_RUNS];
			int n;

			if (skip[k] || (c->n == 0 && !c->failed && !c->skipped[0]))
				continue;
			fprintf(f, "%s\n    {\"group\": \"%s\", \"workload\": ", *first ? "" : ",",
				group);
			*first = 0;
			json_str(f, rows[i].name);
			fprintf(f, ", \"call\": ");
			json_str(f, rows[i].unit);
			fprintf(f, ", \"backend\": \"%s\"", t->cols[j].label);
			if (c->cleanup_err[0]) {
				fprintf(f, ", \"cleanup_error\": ");
				json_str(f, c->cleanup_err);
			}
			if (c->failed || c->n == 0) {
				fprintf(f, ", \"%s\": ", c->failed ? "error" : "skipped");
				json_str(f, c->failed ? c->err : c->skipped);
				fprintf(f, "}");
				continue;
			}
			fprintf(f, ", \"ops_per_run\": %.0f, \"bytes_per_run\": %.0f, ", c->ops,
				c->bytes);
			json_series(f, "seconds", c->secs, c->n);
			n = cell_rates(c, 0, v);
			fprintf(f, ", ");
			json_series(f, "ops_per_s", v, n);
			if (c->bytes > 0) {
				n = cell_rates(c, 1, v);
				fprintf(f, ", ");
				json_series(f, "GB_per_s", v, n);
			}
			if (k != subj && s > 0)
				fprintf(f, ", \"%s_ratio\": %.4f", col_label(t, subj),
					s / cell_median(c, 0));
			fprintf(f, "}");
		}
	}
}

static void json_tier_cache(FILE *f, const struct tier_group *g)
{
	fprintf(f, "  \"tier_cache\": [");
	for (int i = 0; i < TIER_ROWS; i++) {
		fprintf(f, "%s\n    {\"workload\": ", i ? "," : "");
		json_str(f, g->rows[i].name);
		fprintf(f, ", \"data\": ");
		json_str(f, g->data[i]);
		fprintf(f, ", \"runs\": [");
		for (int r = 0; r < g->ncache[i]; r++) {
			const struct tier_cache_sample *c = &g->cache[i][r];

			fprintf(
			    f,
			    "%s\n      {\"read_hits\": %llu, \"read_misses\": %llu, "
			    "\"write_hits\": %llu, \"write_misses\": %llu, \"collisions\": "
			    "%llu, \"flushes_forced\": %llu, \"flushes_periodic\": %llu, "
			    "\"wraparounds\": %llu, \"forced_pct_of_accesses\": %.4f, "
			    "\"valid_chunks_end\": %llu, \"dirty_chunks_end\": %llu, \"chunks\": "
			    "%llu, \"records_used\": %llu, \"records\": %llu}",
			    r ? "," : "", (unsigned long long)c->read_hits,
			    (unsigned long long)c->read_misses, (unsigned long long)c->write_hits,
			    (unsigned long long)c->write_misses, (unsigned long long)c->collisions,
			    (unsigned long long)c->forced, (unsigned long long)c->periodic,
			    (unsigned long long)c->wraps, pct(c->forced, cache_accesses(c)),
			    (unsigned long long)c->valid_end, (unsigned long long)c->dirty_end,
			    (unsigned long long)c->chunks, (unsigned long long)c->records_used,
			    (unsigned long long)c->records);
		}
		fprintf(f, "]}");
	}
	fprintf(f, "\n  ],\n");
}

int report_json(const char *path, struct bench_backend *bk[BK_COUNT], const char *skip[BK_COUNT],
		const struct bench_opts *o, const struct bench_row *micro,
		const struct bench_row *meta, const struct mount_result *mnt, int nmnt,
		const char *mount_skip, const struct tier_group *tier)
{
	struct utsname u;
	char cpu[256];
	int first = 1;
	FILE *f = fopen(path, "we");

	if (!f)
		return -1;
	uname(&u);
	cpu_model(cpu, sizeof(cpu));
	fprintf(f, "{\n  \"machine\": {\"kernel\": ");
	json_str(f, u.release);
	fprintf(f, ", \"cpu\": ");
	json_str(f, cpu);
	fprintf(f,
		", \"cpus\": %ld, \"time\": %lld, \"load_before\": ", sysconf(_SC_NPROCESSORS_ONLN),
		(long long)time(NULL));
	json_str(f, o->load[0] ? o->load : "?");
	fprintf(f, "},\n  \"command\": ");
	json_str(f, o->command ? o->command : "");
	fprintf(f, ",\n");
	fprintf(f,
		"  \"options\": {\"file_size\": %llu, \"rand_ops\": %llu, \"files\": %llu, "
		"\"runs\": %d, \"cpu\": %d, \"quick\": %s},\n",
		(unsigned long long)o->file_size, (unsigned long long)o->rand_ops,
		(unsigned long long)o->files, o->runs, o->cpu, o->quick ? "true" : "false");
	if (tier)
		fprintf(f,
			"  \"tier_options\": {\"tier_pool_size\": %llu, \"tier_flush_ms\": %u, "
			"\"tier_writeback\": \"%s\", "
			"\"mix_data\": %llu, \"mix_ops\": %llu, \"varmail_files\": %llu, "
			"\"varmail_loops\": %llu, \"oltp_data\": %llu, \"oltp_txns\": %llu, "
			"\"page_cache_dropped\": %s},\n",
			(unsigned long long)o->tier_pool_size, o->tier_flush_ms,
			o->tier_direct ? "direct" : "cached", (unsigned long long)o->mix_data,
			(unsigned long long)o->mix_ops, (unsigned long long)o->varmail_files,
			(unsigned long long)o->varmail_loops, (unsigned long long)o->oltp_data,
			(unsigned long long)o->oltp_txns, tier->cache_dropped ? "true" : "false");
	fprintf(f, "  \"mount_files\": [");
	for (int i = 0; i < o->n_mount_files; i++)
		fprintf(f, "%s%llu", i ? ", " : "", (unsigned long long)o->mount_files[i]);
	fprintf(f, "],\n");
	fprintf(f, "  \"backends\": {");
	for (int k = 0; k < BK_COUNT; k++) {
		fprintf(f, "%s\n    \"%s\": {", k ? "," : "", bk_label[k]);
		if (skip[k]) {
			fprintf(f, "\"skipped\": ");
			json_str(f, skip[k]);
		} else if (bk[k]) {
			fprintf(f, "\"where\": ");
			json_str(f, bk[k]->where);
			fprintf(f, ", \"notes\": ");
			json_str(f, bk[k]->notes);
		} else {
			fprintf(f, "\"skipped\": \"not selected\"");
		}
		fprintf(f, "}");
	}
	fprintf(f, "\n  },\n  \"results\": [");
	json_rows(f, "micro", micro, MICRO_ROWS, skip, &micro_spec, &first);
	json_rows(f, "meta", meta, META_ROWS, skip, &meta_spec, &first);
	json_rows(f, "tier", tier ? tier->rows : NULL, TIER_ROWS, skip, &tier_spec, &first);
	fprintf(f, "\n  ],\n");
	if (tier)
		json_tier_cache(f, tier);
	fprintf(f, "  \"mount\": ");
	if (mount_skip || !mnt) {
		fprintf(f, "{\"skipped\": ");
		json_str(f, mount_skip ? mount_skip : "not selected");
		fprintf(f, "}\n}\n");
		return fclose(f);
	}
	fprintf(f, "[");
	for (int i = 0; i < nmnt; i++) {
		const struct mount_result *r = &mnt[i];

		fprintf(f, "%s\n    {\"files\": %llu, \"pool_size\": %llu", i ? "," : "",
			(unsigned long long)r->files, (unsigned long long)r->pool_size);
		if (r->failed) {
			fprintf(f, ", \"error\": ");
			json_str(f, r->err);
		}
		if (r->n > 0) {
			fprintf(f, ", ");
			json_series(f, "mount_ms", r->mount_ms, r->n);
			fprintf(f, ", ");
			json_series(f, "rss_delta_kib", r->rss_kib, r->n);
			fprintf(f, ", ");
			json_series(f, "anon_delta_kib", r->anon_kib, r->n);
			fprintf(f, ", ");
			json_series(f, "file_shmem_delta_kib", r->shmem_kib, r->n);
			fprintf(f, ", ");
			json_series(f, "first_stat_us", r->stat_us, r->n);
		}
		fprintf(f, "}");
	}
	fprintf(f, "\n  ]\n}\n");
	return fclose(f);
}
