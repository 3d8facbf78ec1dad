/*
 * libfuzz_pool.c -- a libFuzzer target for longer runs outside CI: the input
 * is a list of byte patches, each aimed at one structure of the populated
 * pool (the same pool and structure list as pool_fuzz); the patched image is
 * mounted, walked, read, changed a little and checked by fsck -n. Coverage
 * guides the search toward checks not yet exercised.
 *
 *   cmake -S . -B build-fuzz -DCMAKE_C_COMPILER=clang -DFERRITE_LIBFUZZER=ON
 *   cmake --build build-fuzz --target libfuzz_pool
 *   build-fuzz/tests/fuzz/libfuzz_pool -max_total_time=3600 corpus-dir/
 *
 * Input layout, repeated: u16 structure (modulo the number of structures),
 * u16 offset in it (modulo its length), u8 length (1-8), that many bytes.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "ferrite.h"
#include "fuzz.h"

static char pool[256];
static uint8_t *pristine, *with_orphan, *map_addr;
static size_t len;
static struct fz_map map;

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	snprintf(pool, sizeof pool, "/dev/shm/ferrite-libfuzz-%d.pool", (int)getpid());
	if (fz_build(pool, 32ULL << 20, &pristine, &with_orphan, &len) ||
	    fz_map_image(with_orphan, len, &map))
		abort();
	int fd = open(pool, O_RDWR | O_CLOEXEC);
	map_addr = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	if (map_addr == MAP_FAILED)
		abort();
	return 0;
}

static void quiet(void *arg, const char *line)
{
	(void)arg;
	(void)line;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const uint8_t *base = size && (data[0] & 1) ? with_orphan : pristine;
	for (size_t off = 0; off < len; off += 4096)
		if (memcmp(map_addr + off, base + off, 4096))
			memcpy(map_addr + off, base + off, 4096);
	for (size_t p = 1; p + 5 <= size;) {
		uint16_t which, at;
		memcpy(&which, data + p, 2);
		memcpy(&at, data + p + 2, 2);
		size_t n = 1 + data[p + 4] % 8;
		p += 5;
		if (p + n > size || !map.n)
			break;
		const struct fz_obj *o = &map.objs[which % map.n];
		size_t o_at = at % o->len;
		if (n > o->len - o_at)
			n = o->len - o_at;
		memcpy(map_addr + o->off + o_at, data + p, n);
		p += n;
	}
	ferrite_fsck(pool, 0, quiet, NULL, NULL, NULL);
	ferrite_fs *fs;
	if (ferrite_mount(pool, NULL, &fs) == 0) {
		struct fz_walk w = {0};
		fz_walk_tree(fs, &w);
		fz_scribble(fs, size);
		ferrite_unmount(fs);
	}
	return 0;
}
