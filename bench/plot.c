/*
 * plot.c -- the SVG plot of a run, drawn by gnuplot: for every workload of
 * groups a), b) and d), the ratio of Ferrite's median throughput to each
 * peer's median in the same run (ferrite/tmpfs, ferrite/ext4, ferrite/raw;
 * tier/ext4-disk in d), as bars up or down from 1 on a log scale, with the
 * value written at the end of each bar. Group c) has no peer and is not drawn.
 *
 * Measures nothing: it reads the rows report.c prints, and hands gnuplot a
 * script with the data inline (no temporary files). gnuplot is looked up in
 * PATH before the run starts (plot_find_gnuplot), so a missing one is said at
 * once, not after the measurements.
 */
#ifndef _GNU_SOURCE /* the top-level CMakeLists.txt defines it */
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"

int plot_find_gnuplot(char *path, size_t len)
{
	const char *env = getenv("PATH");
	char dirs[4096];
	char *save = NULL;

	snprintf(dirs, sizeof(dirs), "%s", env && *env ? env : "/usr/bin:/bin");
	for (char *d = strtok_r(dirs, ":", &save); d; d = strtok_r(NULL, ":", &save)) {
		snprintf(path, len, "%s/gnuplot", *d ? d : ".");
		if (access(path, X_OK) == 0)
			return 0;
	}
	path[0] = '\0';
	return -ENOENT;
}

/* One series of bars: num's throughput over den's, in the rows of groups. */
struct series {
	int num, den;
	const char *title, *color;
};

static const struct series series[] = {
    {BK_FERRITE, BK_TMPFS, "ferrite / tmpfs", "#4878cf"},
    {BK_FERRITE, BK_EXT4, "ferrite / ext4 (loop device)", "#d65f5f"},
    {BK_FERRITE, BK_RAW, "ferrite / raw persisted memcpy", "#6acc65"},
    {BK_TIER, BK_DISK, "tier / ext4 on the disk (group d)", "#956cb4"},
};
#define NSERIES (int)(sizeof(series) / sizeof(series[0]))

struct plot_group {
	const char *label;
	const struct bench_row *rows;
	int nrows;
};

static double median_ops(const struct bench_cell *c)
{
	double v[BENCH_MAX_RUNS];

	if (c->failed || c->n == 0)
		return 0;
	for (int i = 0; i < c->n; i++)
		v[i] = c->ops / c->secs[i];
	return stat_median(v, c->n);
}

/* The ratio of series s in row r, 0 if either side has no figure. */
static double ratio(const struct bench_row *r, const struct series *s, const char *skip[BK_COUNT])
{
	double a, b;

	if (skip[s->num] || skip[s->den])
		return 0;
	a = median_ops(&r->cell[s->num]);
	b = median_ops(&r->cell[s->den]);
	return a > 0 && b > 0 ? a / b : 0;
}

/* A gnuplot single-quoted string ('' stands for '). */
static void gp_str(FILE *f, const char *s)
{
	fputc('\'', f);
	for (; *s; s++) {
		if (*s == '\'')
			fputc('\'', f);
		fputc(*s, f);
	}
	fputc('\'', f);
}

static void title_lines(FILE *f, const struct bench_opts *o)
{
	struct utsname u;
	char cpu[256] = "unknown CPU", line[1024], sz[32], when[64];
	time_t now = time(NULL);
	FILE *ci = fopen("/proc/cpuinfo", "re");

	while (ci && fgets(line, sizeof(line), ci)) {
		char *colon = strchr(line, ':');

		if (strncmp(line, "model name", 10) == 0 && colon) {
			snprintf(cpu, sizeof(cpu), "%s", colon + 2);
			cpu[strcspn(cpu, "\n")] = '\0';
			break;
		}
	}
	if (ci)
		fclose(ci);
	uname(&u);
	strftime(when, sizeof(when), "%Y-%m-%d %H:%M", localtime(&now));
	snprintf(line, sizeof(line),
		 "Ferrite's throughput over each peer's, same run (> 1: Ferrite faster; log "
		 "scale)\\n%s, %ld CPUs, Linux %s, %s; median of %d run%s; a) one %s file, b) "
		 "%llu files%s",
		 cpu, sysconf(_SC_NPROCESSORS_ONLN), u.release, when, o->runs,
		 o->runs == 1 ? "" : "s", fmt_size(o->file_size, sz, sizeof(sz)),
		 (unsigned long long)o->files,
		 o->quick ? " (--quick: the numbers mean little)" : "");
	if (o->command && o->load[0]) {
		size_t n = strlen(line);

		snprintf(line + n, sizeof(line) - n, "\\n%.200s; load average before: %s",
			 o->command, o->load);
	}
	fputs("set title \"", f);
	for (const char *p = line; *p; p++) { /* a double-quoted string keeps the \n */
		if (*p == '"')
			fputc('\\', f);
		fputc(*p, f);
	}
	fputs("\"\n", f);
}

int report_plot(const char *svg, const char *gnuplot, const char *skip[BK_COUNT],
		const struct bench_opts *o, const struct bench_row *micro,
		const struct bench_row *meta, const struct tier_group *tier, char *why,
		size_t whylen)
{
	const struct plot_group groups[] = {
	    {"a) ctFS micro-benchmarks", micro, micro ? MICRO_ROWS : 0},
	    {"b) metadata", meta, meta ? META_ROWS : 0},
	    {"d) tiered pool", tier ? tier->rows : NULL, tier ? TIER_ROWS : 0},
	};
	const double w = 0.2; /* a bar's width, in workloads */
	double lo = 1, hi = 1;
	int nbars = 0, x = 0;
	char cmd[4200];
	FILE *f;
	int st;

	/* the range first: bars and labels must fit */
	for (size_t g = 0; g < sizeof(groups) / sizeof(groups[0]); g++)
		for (int i = 0; i < groups[g].nrows; i++)
			for (int s = 0; s < NSERIES; s++) {
				double r = ratio(&groups[g].rows[i], &series[s], skip);

				if (r > 0) {
					lo = fmin(lo, r);
					hi = fmax(hi, r);
					nbars++;
				}
			}
	if (nbars == 0) {
		snprintf(why, whylen,
			 "nothing to plot: no workload has both Ferrite's and a "
			 "peer's figure");
		return 1;
	}
	snprintf(cmd, sizeof(cmd), "'%s'", gnuplot);
	f = popen(cmd, "we");
	if (!f) {
		snprintf(why, whylen, "cannot run %s: %s", gnuplot, strerror(errno));
		return -1;
	}
	fputs("set terminal svg size 1280,600 dynamic noenhanced font 'sans,11' background "
	      "rgb 'white'\n",
	      f);
	fputs("set output ", f);
	gp_str(f, svg);
	fputc('\n', f);
	title_lines(f, o);
	fprintf(f, "set logscale y\nset yrange [%g:%g]\n", lo / 2.5, hi * 2.5);
	fputs("set ytics (", f);
	{
		static const double tics[] = {0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2,
					      0.5,   1,	    2,	   5,	 10,   20,   50,  100,
					      200,   500,   1000,  2000, 5000, 10000};
		int first = 1;

		for (size_t t = 0; t < sizeof(tics) / sizeof(tics[0]); t++)
			if (tics[t] >= lo / 2.5 && tics[t] <= hi * 2.5) {
				fprintf(f, "%s'%gx' %g", first ? "" : ", ", tics[t], tics[t]);
				first = 0;
			}
	}
	fputs(")\nset grid ytics lc rgb '#dddddd'\n", f);
	fputs("set ylabel 'throughput ratio (median over median)'\n", f);
	fputs("set key outside bottom center horizontal\nset border 3\nset tics nomirror\n", f);
	fputs("set arrow from graph 0, first 1 to graph 1, first 1 nohead lw 1.5 lc rgb "
	      "'#333333'\n",
	      f);
	/* workloads along x, a dotted line between groups, each group named */
	fputs("set xtics scale 0 (", f);
	for (size_t g = 0, first = 1; g < sizeof(groups) / sizeof(groups[0]); g++)
		for (int i = 0; i < groups[g].nrows; i++, first = 0)
			fprintf(f, "%s'%s' %d", first ? "" : ", ", groups[g].rows[i].name, x++);
	fputs(")\n", f);
	x = 0;
	for (size_t g = 0; g < sizeof(groups) / sizeof(groups[0]); g++) {
		if (!groups[g].nrows)
			continue;
		if (x > 0)
			fprintf(f,
				"set arrow from %g, graph 0 to %g, graph 1 nohead dt 3 lc rgb "
				"'#888888'\n",
				x - 0.5, x - 0.5);
		fprintf(f, "set label '%s' at %g, graph 0.97 center font 'sans,11'\n",
			groups[g].label, x + (groups[g].nrows - 1) / 2.0);
		x += groups[g].nrows;
	}
	fprintf(f, "set xrange [-0.6:%g]\n", x - 0.4);
	fputs("set style fill solid 0.85 noborder\n", f);

	/* the data: one block per series, bars centred on their workload */
	for (int s = 0; s < NSERIES; s++) {
		fprintf(f, "$s%d << EOD\n", s);
		x = 0;
		for (size_t g = 0; g < sizeof(groups) / sizeof(groups[0]); g++)
			for (int i = 0; i < groups[g].nrows; i++, x++) {
				const struct bench_row *r = &groups[g].rows[i];
				int m = 0, j = 0;

				for (int t = 0; t < NSERIES; t++) {
					m += ratio(r, &series[t], skip) > 0;
					j += t < s && ratio(r, &series[t], skip) > 0;
				}
				double v = ratio(r, &series[s], skip);
				if (v <= 0)
					continue;
				double c = x + (j - (m - 1) / 2.0) * w;
				/* x y xlow xhigh ylow yhigh label-y label */
				fprintf(f, "%g %g %g %g %g %g %g \"%.*fx\"\n", c, v, c - w / 2,
					c + w / 2, fmin(v, 1), fmax(v, 1),
					v >= 1 ? v * 1.06 : v / 1.06,
					v < 10	  ? 2
					: v < 100 ? 1
						  : 0,
					v);
			}
		fputs("EOD\n", f);
	}
	fputs("plot ", f);
	for (int s = 0, first = 1; s < NSERIES; s++) {
		int any = 0;

		x = 0;
		for (size_t g = 0; g < sizeof(groups) / sizeof(groups[0]); g++)
			for (int i = 0; i < groups[g].nrows; i++)
				any |= ratio(&groups[g].rows[i], &series[s], skip) > 0;
		if (!any)
			continue;
		/* the values written along the bars' ends, upwards or downwards */
		fprintf(f,
			"%s$s%d using 1:2:3:4:5:6 with boxxyerror lc rgb '%s' title '%s', "
			"$s%d using 1:($2 >= 1 ? $7 : NaN):8 with labels rotate by 90 left font "
			"'sans,8' notitle, "
			"$s%d using 1:($2 < 1 ? $7 : NaN):8 with labels rotate by 90 right font "
			"'sans,8' notitle",
			first ? "" : ", ", s, series[s].color, series[s].title, s, s);
		first = 0;
	}
	fputs("\n", f);
	st = pclose(f);
	if (st != 0) {
		snprintf(why, whylen, "%s failed (exit %d) drawing %s", gnuplot,
			 WIFEXITED(st) ? WEXITSTATUS(st) : -1, svg);
		return -1;
	}
	return 0;
}
