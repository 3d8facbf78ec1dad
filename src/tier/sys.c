/*
 * sys.c -- the C library's system calls, as the tier engine's table starts
 * (sys.h). Each entry is a function of fixed arity over the library's own
 * (open's optional mode, the calls glibc has no wrapper for), so that a
 * replacement has one exact signature to match.
 * Invariants and crash argument: none of its own; it forwards.
 */
#include <fcntl.h>
#include <stdio.h>
#include <sys/syscall.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "tier/sys.h"

static long sys_openat2(int dirfd, const char *path, struct open_how *how, size_t size)
{
	return syscall(SYS_openat2, dirfd, path, how, size);
}

static int sys_renameat2(int olddirfd, const char *old, int newdirfd, const char *new,
			 unsigned flags)
{
	return (int)syscall(SYS_renameat2, olddirfd, old, newdirfd, new, flags);
}

#define openat2	  sys_openat2
#define renameat2 sys_renameat2
#define TIER_SYS_LIBC(ret, name, params, args)                                                     \
	static ret libc_##name params                                                              \
	{                                                                                          \
		return name args;                                                                  \
	}
TIER_SYSCALLS(TIER_SYS_LIBC)
TIER_SYSCALLS_DIR(TIER_SYS_LIBC)
#undef TIER_SYS_LIBC
#undef openat2
#undef renameat2

const struct tier_sys tier_sys_libc = {
#define TIER_SYS_INIT(ret, name, params, args) .name = libc_##name,
    TIER_SYSCALLS(TIER_SYS_INIT) TIER_SYSCALLS_DIR(TIER_SYS_INIT)
#undef TIER_SYS_INIT
};

struct tier_sys tier_sys = {
#define TIER_SYS_INIT(ret, name, params, args) .name = libc_##name,
    TIER_SYSCALLS(TIER_SYS_INIT) TIER_SYSCALLS_DIR(TIER_SYS_INIT)
#undef TIER_SYS_INIT
};
