/*
 * probe.c -- ferrite_probe: a pool's superblock, its holder and a few counts,
 * read without mounting and without the single-opener lock, so that `ferrite
 * info` can describe a pool another process has mounted.
 *
 * Invariants: R1 nothing is written, and no lock is taken: a mount elsewhere
 *               never sees this reader;
 *             R2 the superblock is used only after meta_super_check_common()
 *               passes (it changes only under the lock, so it is read whole);
 *               the counts are single aligned 8-byte words, loaded atomically
 *               from a read-only mapping and clamped to the pool's geometry
 *               (the pool is untrusted input, docs/security.md);
 *             R3 a mapping touches only pages the file holds (checked with
 *               fstat first), so a short file gives an error, not SIGBUS.
 * Crash argument: writes nothing.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ferrite.h"
#include "meta/meta.h"

#define PROBE_MAP (3 * FR_PAGE_SIZE) /* superblock, space header, state page */

static uint64_t load8(const void *p)
{
	return __atomic_load_n((const uint64_t *)p, __ATOMIC_RELAXED);
}

/* R2: the counts of a pm pool, word by word (they change under a mount). */
static void probe_counts(int fd, const struct fr_super *sb, uint64_t file_size,
			 struct ferrite_probe *out)
{
	if (sb->sb_space_off != SB_SPACE_OFF || sb->sb_state_off != SB_STATE_OFF ||
	    file_size < PROBE_MAP)
		return;
	char *m = mmap(NULL, PROBE_MAP, PROT_READ, MAP_SHARED, fd, 0);
	if (m == MAP_FAILED)
		return;
	const struct sp_header *sph = (const struct sp_header *)(m + SB_SPACE_OFF);
	const struct fr_state *st = (const struct fr_state *)(m + SB_STATE_OFF);
	uint64_t pages = sb->sb_pool_size >> FR_PAGE_SHIFT;
	uint64_t data = load8(&sph->sph_data_npages), free_pages = load8(&sph->sph_free_pages);
	uint64_t live = load8(&st->st_pools[MP_INODE].mph_live);
	uint64_t total = load8(&st->st_pools[MP_INODE].mph_total);
	uint64_t most_inodes = sb->sb_pool_size / 256; /* inodes are 256 bytes */
	if (load8(&sph->sph_magic) == SPH_MAGIC && load8(&st->st_magic) == ST_MAGIC &&
	    data <= pages) {
		out->counts = 1;
		out->data_bytes = data << FR_PAGE_SHIFT;
		out->free_bytes = FR_MIN(free_pages, data) << FR_PAGE_SHIFT;
		out->inode_capacity = FR_MIN(total, most_inodes);
		out->inodes_used = FR_MIN(live, out->inode_capacity);
	}
	munmap(m, PROBE_MAP);
}

int meta_probe(const char *path, struct ferrite_probe *out)
{
	memset(out, 0, sizeof(*out));
	int fd = pool_open_peek(path); /* R1 */
	if (fd < 0)
		return fd;
	struct stat st;
	struct fr_super sb;
	const char *why;
	int rc = 0;
	memset(&sb, 0, sizeof(sb));
	if (fstat(fd, &st) != 0) {
		rc = fr_err(-errno, "%s: %s", path, strerror(errno));
		goto out;
	}
	if (!S_ISREG(st.st_mode)) {
		rc = fr_err(-EOPNOTSUPP,
			    "%s: not a regular file: use `ferrite info` on it unmounted", path);
		goto out;
	}
	if (pread(fd, &sb, sizeof(sb), SB_OFF) != (ssize_t)sizeof(sb)) {
		rc = fr_err(-EINVAL, "%s: too short to be a ferrite pool (%llu bytes)", path,
			    (unsigned long long)st.st_size);
		goto out;
	}
	rc = meta_super_check_common(&sb, (uint64_t)st.st_size, &why); /* R2 */
	if (rc) {
		rc = fr_err(rc, "%s: %s", path, why);
		goto out;
	}
	meta_uuid_str(sb.sb_uuid, out->uuid);
	meta_label_get(&sb, out->label);
	out->format_version = sb.sb_version;
	out->tiered = (sb.sb_incompat & SB_INCOMPAT_TIER) != 0;
	out->mode = out->tiered ? FERRITE_MODE_SYNC : (int)sb.sb_mode;
	out->pool_bytes = sb.sb_pool_size;
	out->mkfs_time = sb.sb_mkfs_time;
	char comm[sizeof(out->holder_comm)];
	out->holder_pid = pool_lock_holder(fd, comm, sizeof(comm));
	memcpy(out->holder_comm, comm, sizeof(comm));
	if (!out->tiered)
		probe_counts(fd, &sb, (uint64_t)st.st_size, out);
out:
	close(fd);
	return rc;
}
