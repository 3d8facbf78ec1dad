/*
 * protect_test.c -- a program run through `ferrite run [--protect]`
 * (protect_test.sh) that looks at the pool's mappings in its own address
 * space and stores into them where it should not.
 *
 *   protect_test DIR POOL maps   a file in DIR mapped and written through its
 *                                mapping (must work); then prints how many
 *                                of the process's mappings of POOL are
 *                                writable, read-only and inaccessible
 *   protect_test DIR POOL stray  stores into the first readable mapping of
 *                                POOL the byte that is already there (no
 *                                harm done where it is allowed); prints
 *                                "stored" if the store went through
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static int own_mapping(const char *dir)
{
	char path[4096];
	snprintf(path, sizeof(path), "%s/mapped", dir);
	int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
	if (fd < 0 || ftruncate(fd, 8192)) {
		perror(path);
		return -1;
	}
	char *m = mmap(NULL, 8192, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (m == MAP_FAILED) {
		perror("mmap");
		return -1;
	}
	memcpy(m + 4000, "through my own mapping", 22);
	if (msync(m, 8192, MS_SYNC) || munmap(m, 8192)) {
		perror("msync");
		return -1;
	}
	char buf[22];
	if (pread(fd, buf, sizeof(buf), 4000) != sizeof(buf) ||
	    memcmp(buf, "through my own mapping", 22)) {
		fprintf(stderr, "protect_test: a store through the file's mapping was lost\n");
		return -1;
	}
	return close(fd);
}

/* Calls fn for each mapping of pool in /proc/self/maps. */
static int each_mapping(const char *pool, int (*fn)(char *start, char *end, const char *perms))
{
	FILE *f = fopen("/proc/self/maps", "r");
	if (!f)
		return -1;
	char line[4096];
	int rc = 0;
	while (!rc && fgets(line, sizeof(line), f)) {
		unsigned long start, end;
		char perms[8];
		int path_at = 0;
		if (sscanf(line, "%lx-%lx %7s %*s %*s %*s %n", &start, &end, perms, &path_at) < 3 ||
		    !path_at)
			continue;
		char *path = line + path_at;
		path[strcspn(path, "\n")] = '\0';
		if (!strcmp(path, pool))
			rc = fn((char *)start, (char *)end, perms);
	}
	fclose(f);
	return rc;
}

static int writable, readonly, none;

static int count(char *start, char *end, const char *perms)
{
	(void)start, (void)end;
	if (perms[1] == 'w')
		writable++;
	else if (perms[0] == 'r')
		readonly++;
	else
		none++;
	return 0;
}

static int store(char *start, char *end, const char *perms)
{
	(void)end;
	if (perms[0] != 'r')
		return 0;
	volatile char *p = start;
	*p = *p; /* faults where the pool is protected */
	printf("stored\n");
	return 1;
}

int main(int argc, char **argv)
{
	if (argc != 4) {
		fprintf(stderr, "usage: protect_test DIR POOL maps|stray\n");
		return 2;
	}
	if (own_mapping(argv[1]))
		return 1;
	if (!strcmp(argv[3], "maps")) {
		if (each_mapping(argv[2], count))
			return 1;
		printf("writable %d readonly %d none %d\n", writable, readonly, none);
		return 0;
	}
	if (!strcmp(argv[3], "stray"))
		return each_mapping(argv[2], store) == 1 ? 0 : 1;
	return 2;
}
