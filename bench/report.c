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

static const char *const bk_label[BK_COUNT] = {"ferrite", "tmpfs", "ext4", "raw", "strict"};

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

	if (skip) {
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

static void ratio_text(const struct bench_row *r, int other, char *buf, size_t len)
{
	/* s/f: strict mode over sync mode, both ferrite */
	double f = cell_median(&r->cell[other == BK_FERRITE ? BK_STRICT : BK_FERRITE], 0);
	double p = cell_median(&r->cell[other], 0);

	if (f > 0 && p > 0)
		snprintf(buf, len, "%.2fx", f / p);
	else
		snprintf(buf, len, "-");
}

static void target_text(const struct bench_row *r, char *buf, size_t len)
{
	double f = cell_median(&r->cell[BK_FERRITE], 0);
	double t = cell_median(&r->cell[BK_TMPFS], 0);
	double w = cell_median(&r->cell[BK_RAW], 0);
	const char *verdict = "ok";

	if (!r->target) {
		snprintf(buf, len, "%s", "");
		return;
	}
	if (f <= 0 || (r->min_tmpfs > 0 && t <= 0) || (r->min_raw > 0 && w <= 0))
		verdict = "n/a";
	else if ((r->min_tmpfs > 0 && f / t < r->min_tmpfs) ||
		 (r->min_raw > 0 && f / w < r->min_raw))
		verdict = "BELOW";
	snprintf(buf, len, "%s: %s", r->target, verdict);
}

static void print_failures(const struct bench_row *rows, int nrows, const char *skip[BK_COUNT])
{
	for (int i = 0; i < nrows; i++) {
		for (int k = 0; k < BK_COUNT; k++) {
			if (!skip[k] && rows[i].cell[k].failed)
				printf("  failed: %s on %s: %s\n", rows[i].name, bk_label[k],
				       rows[i].cell[k].err);
			if (!skip[k] && rows[i].cell[k].cleanup_err[0])
				printf("  error after %s on %s: %s\n", rows[i].name, bk_label[k],
				       rows[i].cell[k].cleanup_err);
		}
	}
}

static void print_table(const struct bench_row *rows, int nrows, const char *skip[BK_COUNT],
			int ncols, int micro, int runs)
{
	char cell[40], tgt[80];

	printf("%-10s %-19s %-7s", "workload", "one call", "");
	for (int k = 0; k < ncols; k++)
		printf(" %13s", bk_label[k]);
	printf(" %8s %8s", "f/tmpfs", "f/ext4");
	if (ncols > BK_RAW)
		printf(" %8s", "f/raw");
	if (ncols > BK_STRICT)
		printf(" %8s", "s/f");
	printf("  target\n");
	for (int i = 0; i < nrows; i++) {
		const struct bench_row *r = &rows[i];
		/* micro: GB/s, ops/s, spread of GB/s; meta: ops/s, spread (if several runs) */
		int lines = (micro ? 2 : 1) + (runs > 1);

		for (int l = 0; l < lines; l++) {
			int bytes = micro && l != 1;
			int spread = runs > 1 && l == lines - 1;
			const char *metric = spread ? "min-max" : bytes ? "GB/s" : "ops/s";

			printf("%-10s %-19s %-7s", l == 0 ? r->name : "", l == 0 ? r->unit : "",
			       metric);
			for (int k = 0; k < ncols; k++) {
				cell_text(&r->cell[k], skip[k], bytes, spread, cell, sizeof(cell));
				printf(" %13s", cell);
			}
			if (l == 0) {
				ratio_text(r, BK_TMPFS, cell, sizeof(cell));
				printf(" %8s", cell);
				ratio_text(r, BK_EXT4, cell, sizeof(cell));
				printf(" %8s", cell);
				if (ncols > BK_RAW) {
					ratio_text(r, BK_RAW, cell, sizeof(cell));
					printf(" %8s", cell);
				}
				if (ncols > BK_STRICT) {
					ratio_text(r, BK_FERRITE, cell, sizeof(cell));
					printf(" %8s", cell);
				}
				target_text(r, tgt, sizeof(tgt));
				printf("  %s", tgt);
			}
			printf("\n");
		}
	}
	print_failures(rows, nrows, skip);
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
			printf("  %-7s SKIPPED: %s\n", bk_label[k], skip[k]);
		else if (bk[k])
			printf("  %-7s %s%s%s\n", bk_label[k], bk[k]->where,
			       bk[k]->notes[0] ? "; " : "", bk[k]->notes);
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
	print_table(rows, MICRO_ROWS, skip, BK_COUNT, 1, o->runs);
	fflush(stdout);
}

void report_meta(const struct bench_row rows[META_ROWS], const char *skip[BK_COUNT],
		 const struct bench_opts *o)
{
	printf("\nb) metadata: %llu files in one directory; ops/s, %s%d run%s%s\n",
	       (unsigned long long)o->files, o->runs == 1 ? "" : "median of ", o->runs,
	       o->runs == 1 ? "" : "s", o->runs == 1 ? "" : " (min-max below)");
	print_table(rows, META_ROWS, skip, BK_RAW, 0, o->runs);
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
		      const char *skip[BK_COUNT], int *first)
{
	for (int i = 0; rows && i < nrows; i++) {
		for (int k = 0; k < BK_COUNT; k++) {
			const struct bench_cell *c = &rows[i].cell[k];
			double v[BENCH_MAX_RUNS];
			int n;

			if (skip[k] || (c->n == 0 && !c->failed))
				continue;
			fprintf(f, "%s\n    {\"group\": \"%s\", \"workload\": ", *first ? "" : ",",
				group);
			*first = 0;
			json_str(f, rows[i].name);
			fprintf(f, ", \"call\": ");
			json_str(f, rows[i].unit);
			fprintf(f, ", \"backend\": \"%s\"", bk_label[k]);
			if (c->cleanup_err[0]) {
				fprintf(f, ", \"cleanup_error\": ");
				json_str(f, c->cleanup_err);
			}
			if (c->failed) {
				fprintf(f, ", \"error\": ");
				json_str(f, c->err);
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
			if (k != BK_FERRITE && cell_median(&rows[i].cell[BK_FERRITE], 0) > 0)
				fprintf(f, ", \"ferrite_ratio\": %.4f",
					cell_median(&rows[i].cell[BK_FERRITE], 0) /
					    cell_median(c, 0));
			fprintf(f, "}");
		}
	}
}

int report_json(const char *path, struct bench_backend *bk[BK_COUNT], const char *skip[BK_COUNT],
		const struct bench_opts *o, const struct bench_row *micro,
		const struct bench_row *meta, const struct mount_result *mnt, int nmnt,
		const char *mount_skip)
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
	fprintf(f, ", \"cpus\": %ld, \"time\": %lld},\n", sysconf(_SC_NPROCESSORS_ONLN),
		(long long)time(NULL));
	fprintf(f,
		"  \"options\": {\"file_size\": %llu, \"rand_ops\": %llu, \"files\": %llu, "
		"\"runs\": %d, \"cpu\": %d, \"quick\": %s},\n",
		(unsigned long long)o->file_size, (unsigned long long)o->rand_ops,
		(unsigned long long)o->files, o->runs, o->cpu, o->quick ? "true" : "false");
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
	json_rows(f, "micro", micro, MICRO_ROWS, skip, &first);
	json_rows(f, "meta", meta, META_ROWS, skip, &first);
	fprintf(f, "\n  ],\n  \"mount\": ");
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
