/*
 * unit.h -- a tiny harness for the per-module unit tests: each test file
 * lists named cases in a table (STYLE.md); main runs them all or the ones
 * named on the command line and prints the first failed check of each.
 */
#ifndef FERRITE_UNIT_H
#define FERRITE_UNIT_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct unit_case {
	const char *name;
	int (*fn)(void);
};

#define CHECK(cond)                                                                                \
	do {                                                                                       \
		if (!(cond)) {                                                                     \
			fprintf(stderr, "  check failed at %s:%d: %s\n", __FILE__, __LINE__,       \
				#cond);                                                            \
			return 1;                                                                  \
		}                                                                                  \
	} while (0)

#define CHECK_EQ(a, b)                                                                             \
	do {                                                                                       \
		long long _a = (long long)(a), _b = (long long)(b);                                \
		if (_a != _b) {                                                                    \
			fprintf(stderr, "  check failed at %s:%d: %s == %s (%lld vs %lld)\n",      \
				__FILE__, __LINE__, #a, #b, _a, _b);                               \
			return 1;                                                                  \
		}                                                                                  \
	} while (0)

static inline int unit_run(const struct unit_case *cases, size_t n, int argc, char **argv)
{
	int failed = 0, ran = 0;
	for (size_t i = 0; i < n; i++) {
		int want = argc <= 1;
		for (int a = 1; a < argc; a++)
			want |= strcmp(argv[a], cases[i].name) == 0;
		if (!want)
			continue;
		ran++;
		int rc = cases[i].fn();
		printf("%-40s %s\n", cases[i].name, rc ? "FAIL" : "ok");
		failed += rc != 0;
	}
	printf("%d of %d cases failed\n", failed, ran);
	return failed ? 1 : 0;
}

#define UNIT_MAIN(cases)                                                                           \
	int main(int argc, char **argv)                                                            \
	{                                                                                          \
		return unit_run(cases, sizeof(cases) / sizeof(cases[0]), argc, argv);              \
	}

/* A pool file name unique to this process. */
static inline const char *unit_pool_path(const char *tag)
{
	static char path[128];
	snprintf(path, sizeof(path), "/dev/shm/ferrite-unit-%s-%d.pool", tag, (int)getpid());
	return path;
}

#endif
