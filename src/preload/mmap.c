/*
 * mmap.c -- mmap, munmap, msync and mprotect: mappings of pool files go to
 * ferrite_mmap (the file's own persistent pages, src/fs/mmap.c); everything
 * else to the kernel. munmap and MAP_FIXED over a ferrite mapping end it in
 * the library first, so the library never believes in a mapping the kernel
 * has replaced.
 *
 * Invariant: P1 mm_used is set before the first ferrite mapping exists and
 *   never cleared: while it is 0 no call here or in io.c needs to ask the
 *   library about mappings (the common case costs one load).
 */
#include <stdint.h>
#include <sys/mman.h>

#include "preload/shim.h"

static int mm_used; /* P1 */

int sh_mm_active(void)
{
	return __atomic_load_n(&mm_used, __ATOMIC_ACQUIRE);
}

static void *do_mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
	struct sh_file *f;
	if (sh_depth || (flags & MAP_ANONYMOUS) || !(f = sh_file_get(fd))) {
		if (!sh_depth && (flags & MAP_FIXED) && sh_mm_active() && sh_fs_if_mounted() &&
		    !sh_forked)
			SH_CALL(ferrite_munmap(FS, addr, len));
		return REAL(mmap)(addr, len, prot, flags, fd, off);
	}
	void *out = MAP_FAILED;
	int rc;
	if (sh_forked) {
		rc = sh_fork_denied();
	} else {
		__atomic_store_n(&mm_used, 1, __ATOMIC_RELEASE);
		rc = SH_CALL(ferrite_mmap(FS, f->ffd, addr, len, prot, flags, off, &out));
	}
	sh_file_put(f);
	if (rc) {
		errno = -rc;
		return MAP_FAILED;
	}
	return out;
}

SH_EXPORT void *mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
	return do_mmap(addr, len, prot, flags, fd, off);
}

SH_EXPORT void *mmap64(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
	return do_mmap(addr, len, prot, flags, fd, off);
}

SH_EXPORT int munmap(void *addr, size_t len)
{
	if (!sh_depth && sh_mm_active() && sh_fs_if_mounted() && !sh_forked)
		SH_CALL(ferrite_munmap(FS, addr, len));
	return REAL(munmap)(addr, len);
}

SH_EXPORT int msync(void *addr, size_t len, int flags)
{
	if (sh_depth || !sh_mm_active() || !sh_fs_if_mounted() || sh_forked)
		return REAL(msync)(addr, len, flags);
	ssize_t rc = SH_CALL(ferrite_msync(FS, addr, len, flags));
	if (rc < 0) {
		errno = (int)-rc;
		return -1;
	}
	return rc > 0 ? 0 : REAL(msync)(addr, len, flags);
}

SH_EXPORT int mprotect(void *addr, size_t len, int prot)
{
	int rc = REAL(mprotect)(addr, len, prot);
	if (!rc && !sh_depth && sh_mm_active() && sh_fs_if_mounted() && !sh_forked)
		SH_CALL(ferrite_mprotect(FS, addr, len, prot));
	return rc;
}
