/*
 * pool.c -- the pool file or device: opening, the single-opener lock,
 * population with (huge) pages, and the direct mapping.
 *
 * Invariants: P1 while a struct pool is open, this process holds an
 *               exclusive flock on the pool, so no other process maps it --
 *               or, opened POOL_SHARED, a shared one, and every process
 *               that maps the pool follows share.c's turn;
 *             P2 base maps [0, size) of the pool, 2 MiB aligned, with the
 *               same flags (MAP_SYNC on DAX file systems) as every other
 *               shared mapping of the pool (pool->map_flags);
 *             P3 the default pool (POOL_DEFAULT_PATH, in a place every user
 *               can write) and its directory are used only if they are no
 *               symlinks, belong to root or to the caller, and no other
 *               user can write them (a directory: unless sticky); a pool
 *               mkfs formats is left mode 0600 (docs/security.md).
 * Crash argument: nothing here writes pool contents; a crash releases the
 *   flock with the process. pool_open_peek() opens read-only without the
 *   lock: what it reads may be changing under its holder.
 */
#include "space/space.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/magic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

#include "persist/pm.h"
#include "util/util.h"

#ifndef MAP_SHARED_VALIDATE
#define MAP_SHARED_VALIDATE 0x03
#endif
#ifndef MAP_SYNC
#define MAP_SYNC 0x80000
#endif

static int devdax_size(dev_t rdev, uint64_t *size)
{
	char path[128];
	snprintf(path, sizeof(path), "/sys/dev/char/%u:%u/size", major(rdev), minor(rdev));
	FILE *f = fopen(path, "r");
	if (!f)
		return -ENODEV;
	unsigned long long s = 0;
	int ok = fscanf(f, "%llu", &s) == 1;
	fclose(f);
	if (!ok)
		return -ENODEV;
	*size = s;
	return 0;
}

/* The option string of the mount holding path, from /proc/self/mountinfo. */
static int mount_options_of(const char *path, char *fstype, size_t ftlen, char *opts, size_t olen)
{
	char real[PATH_MAX];
	if (!realpath(path, real))
		return -errno;
	FILE *f = fopen("/proc/self/mountinfo", "r");
	if (!f)
		return -errno;
	char line[4096];
	size_t best = 0;
	int found = 0;
	while (fgets(line, sizeof(line), f)) {
		/* id parent maj:min root mountpoint opts ... - fstype source superopts */
		char mnt[PATH_MAX], type[64], sopts[1024];
		char *dash = strstr(line, " - ");
		if (!dash || sscanf(line, "%*s %*s %*s %*s %4095s", mnt) != 1)
			continue;
		if (sscanf(dash + 3, "%63s %*s %1023s", type, sopts) != 2)
			continue;
		size_t ml = strlen(mnt);
		int prefix = strncmp(real, mnt, ml) == 0 &&
			     (real[ml] == '/' || real[ml] == 0 || (ml == 1 && mnt[0] == '/'));
		if (prefix && ml >= best) {
			best = ml;
			snprintf(fstype, ftlen, "%s", type);
			snprintf(opts, olen, "%s", sopts);
			found = 1;
		}
	}
	fclose(f);
	return found ? 0 : -ENOENT;
}

static void shmem_thp_setting(char *buf, size_t len)
{
	snprintf(buf, len, "unknown");
	FILE *f = fopen("/sys/kernel/mm/transparent_hugepage/shmem_enabled", "r");
	if (!f)
		return;
	char line[256];
	if (fgets(line, sizeof(line), f)) {
		char *l = strchr(line, '['), *r = l ? strchr(l, ']') : NULL;
		if (l && r) {
			*r = 0;
			snprintf(buf, len, "%s", l + 1);
		}
	}
	fclose(f);
}

/* Does a tmpfs at path give 2 MiB pages to a file mapped with MADV_HUGEPAGE? */
static int tmpfs_is_huge(const char *path, char *why, size_t wlen)
{
	char type[64], opts[1024], thp[32];
	shmem_thp_setting(thp, sizeof(thp));
	if (!strcmp(thp, "force"))
		return 1;
	if (!strcmp(thp, "deny")) {
		snprintf(why, wlen, "shmem huge pages denied system-wide");
		return 0;
	}
	if (mount_options_of(path, type, sizeof(type), opts, sizeof(opts)) == 0) {
		if (strstr(opts, "huge=always") || strstr(opts, "huge=within_size") ||
		    strstr(opts, "huge=advise"))
			return 1;
	}
	snprintf(why, wlen, "its tmpfs is not mounted with huge=; shmem_enabled=%s", thp);
	return 0;
}

int pool_missing(const char *path)
{
	return fr_err(-ENOENT, "%s: no such pool (create it with `ferrite mkfs %s`)", path, path);
}

/* ---- the default pool in /dev/shm (P3) -------------------------------------------- */

/* Refuses a directory or pool in a shared place that another user could
 * have put there or can change: its owner decides where the pool is and
 * who reads it. path names it in the message. */
static int shared_check(const char *path, const struct stat *st, int is_dir)
{
	uid_t me = geteuid();
	mode_t m = st->st_mode;
	if (is_dir && !S_ISDIR(m))
		return fr_err(-ENOTDIR, "%s: not a directory; the default pool cannot go there",
			      path);
	if (st->st_uid != 0 && st->st_uid != me)
		return fr_err(-EPERM,
			      "%s: owned by uid %u, another user, who could read or replace the "
			      "default pool: refusing it (remove it, or name another pool with "
			      "FERRITE_POOL or --pool)",
			      path, (unsigned)st->st_uid);
	if ((m & (S_IWGRP | S_IWOTH)) && !(is_dir && (m & S_ISVTX)))
		return fr_err(-EPERM,
			      "%s: writable by other users (mode %04o), who could replace the "
			      "default pool: refusing it (chmod go-w it, or remove it)",
			      path, (unsigned)(m & 07777));
	return 0;
}

/* path is a symlink (or else not what O_NOFOLLOW|O_DIRECTORY wanted)? */
static int shared_open_failed(const char *path, int e, const char *what)
{
	struct stat st;
	if ((e == ELOOP || e == ENOTDIR) && lstat(path, &st) == 0 && S_ISLNK(st.st_mode))
		return fr_err(-ELOOP,
			      "%s: is a symlink, which another user may have planted: refusing "
			      "it as the default pool's %s (remove it)",
			      path, what);
	if (e == ENOENT)
		return pool_missing(path);
	if (e == EACCES || e == EPERM)
		return fr_err(-e,
			      "%s: cannot open: %s (the default pool is another user's or in "
			      "a directory you cannot write: use a pool of your own, with "
			      "--pool POOL or FERRITE_POOL=POOL)",
			      path, strerror(e));
	return fr_err(-e, "%s: cannot open: %s", path, strerror(e));
}

/* The default pool's directory, made if create and missing, opened without
 * following a symlink and checked (P3). Returns its descriptor or -errno. */
static int default_dir_open(const char *dir, int create)
{
	if (create && mkdir(dir, 0755) && errno != EEXIST)
		return fr_err(-errno, "%s: cannot create: %s", dir, strerror(errno));
	int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (dfd < 0)
		return shared_open_failed(dir, errno, "directory");
	struct stat st;
	int rc = fstat(dfd, &st) ? fr_err(-errno, "%s: %s", dir, strerror(errno))
				 : shared_check(dir, &st, 1);
	if (rc) {
		close(dfd);
		return rc;
	}
	return dfd;
}

/* Opens the default pool path under P3 with access mode acc: the
 * directory checked, the pool opened (created with mode 0600 if create)
 * without following a symlink, then checked. Nobody else can rename the
 * checked directory away in the sticky /dev/shm, and the pool is opened
 * relative to it. */
static int default_pool_open(const char *path, int create, int acc, int *created)
{
	char dir[PATH_MAX];
	snprintf(dir, sizeof(dir), "%s", path);
	char *slash = strrchr(dir, '/');
	*slash = 0;
	int dfd = default_dir_open(dir, create);
	if (dfd < 0)
		return dfd;
	int flags = acc | O_NOFOLLOW | O_CLOEXEC;
	int fd = create ? openat(dfd, slash + 1, flags | O_CREAT | O_EXCL, 0600) : -1;
	*created = fd >= 0;
	if (fd < 0 && (!create || errno == EEXIST))
		fd = openat(dfd, slash + 1, flags, 0600);
	int e = errno;
	close(dfd);
	if (fd < 0)
		return shared_open_failed(path, e, "file");
	struct stat st;
	int rc = fstat(fd, &st) ? fr_err(-errno, "%s: %s", path, strerror(errno))
				: shared_check(path, &st, 0);
	if (rc) {
		close(fd);
		return rc;
	}
	return fd;
}

void pool_prepare_default_dir(const char *pool_path)
{
	char dir[PATH_MAX];
	snprintf(dir, sizeof(dir), "%s", pool_path);
	char *slash = strrchr(dir, '/');
	if (!slash || slash == dir)
		return;
	*slash = 0;
	/* P3 first: a tmpfs is mounted only on a directory that passed (the
	 * pool's own open reports a refusal). */
	int dfd = default_dir_open(dir, 1);
	if (dfd < 0)
		return;
	close(dfd);
	char why[128];
	if (tmpfs_is_huge(dir, why, sizeof(why)))
		return;
	/* Only a tmpfs can be mounted here, and only by a privileged user; if
	 * that fails the pool lives on 4 KiB pages and `ferrite info` says so. */
	char type[64], opts[1024];
	if (mount_options_of(dir, type, sizeof(type), opts, sizeof(opts)) == 0) {
		char real[PATH_MAX];
		if (realpath(dir, real) && strcmp(type, "tmpfs") == 0) {
			/* dir itself might already be a (non-huge) mount: leave it. */
			struct stat a, b;
			char parent[PATH_MAX + 4];
			snprintf(parent, sizeof(parent), "%s/..", real);
			if (stat(real, &a) == 0 && stat(parent, &b) == 0 && a.st_dev != b.st_dev)
				return;
		}
	}
	/* Refuse to hide existing files under a new mount. */
	int nonempty = 0;
	dfd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (dfd >= 0) {
		char buf[1024];
		long n = syscall(SYS_getdents64, dfd, buf, sizeof(buf));
		nonempty = n > 48; /* "." and ".." take 48 bytes; more means entries */
		close(dfd);
	}
	if (nonempty || dfd < 0)
		return;
	mount("ferrite", dir, "tmpfs", MS_NOSUID | MS_NODEV, "huge=within_size,mode=0755");
}

/* ---- who holds a pool (P1) ------------------------------------------------------------ */

pid_t pool_lock_holder(int fd, char *comm, size_t cap)
{
	struct stat st;
	char line[256];
	pid_t found = 0;
	if (comm && cap)
		comm[0] = '\0';
	FILE *f = fstat(fd, &st) ? NULL : fopen("/proc/locks", "re");
	if (!f)
		return 0;
	/* "1: FLOCK  ADVISORY  WRITE 1234 00:1a:5678 0 EOF"; waiters ("1: -> FLOCK
	 * ...") do not hold the lock. A holder outside our pid namespace is
	 * listed with pid 0. */
	while (!found && fgets(line, sizeof(line), f)) {
		unsigned maj, min;
		unsigned long long ino;
		int pid;
		char *p = strstr(line, "FLOCK");
		if (!p || strstr(line, "->"))
			continue;
		if (sscanf(p, "FLOCK %*s %*s %d %x:%x:%llu", &pid, &maj, &min, &ino) == 4 &&
		    ino == (unsigned long long)st.st_ino && makedev(maj, min) == st.st_dev)
			found = pid > 0 ? pid : -1;
	}
	fclose(f);
	if (found > 0 && comm && cap) {
		char path[64];
		snprintf(path, sizeof(path), "/proc/%d/comm", (int)found);
		FILE *c = fopen(path, "re");
		if (c) {
			if (fgets(comm, (int)cap, c))
				comm[strcspn(comm, "\n")] = '\0';
			fclose(c);
		}
	}
	return found;
}

void pool_holder_describe(int fd, char *buf, size_t cap)
{
	char comm[32];
	pid_t pid = pool_lock_holder(fd, comm, sizeof(comm));
	if (pid > 0)
		snprintf(buf, cap, "process %d (%s)", (int)pid, comm[0] ? comm : "?");
	else if (pid < 0)
		snprintf(buf, cap, "a process of another pid namespace");
	else
		snprintf(buf, cap, "another process or mount");
}

int pool_open_peek(const char *path)
{
	if (!path || !*path)
		return fr_err(-ENOENT, "no pool path given");
	int created;
	int fd = strcmp(path, POOL_DEFAULT_PATH) == 0
		     ? default_pool_open(path, 0, O_RDONLY, &created)
		     : open(path, O_RDONLY | O_CLOEXEC);
	if (fd >= 0 || strcmp(path, POOL_DEFAULT_PATH) == 0)
		return fd;
	int e = errno;
	if (e == ENOENT)
		return pool_missing(path);
	return fr_err(-e, "%s: cannot open: %s", path, strerror(e));
}

/* mkfs of a pool whose directory is missing: say which directory. */
static int missing_dir(const char *path)
{
	char dir[PATH_MAX];
	snprintf(dir, sizeof(dir), "%s", path);
	char *slash = strrchr(dir, '/');
	if (!slash)
		return fr_err(-ENOENT, "%s: cannot create the pool file", path);
	slash[slash == dir] = '\0'; /* "/x" -> "/" */
	return fr_err(-ENOENT, "%s: cannot create the pool: directory %s does not exist", path,
		      dir);
}

int pool_open(struct pool *p, const char *path, int flags)
{
	int create = flags & POOL_CREATE, priv = flags & POOL_PRIVATE;
	memset(p, 0, sizeof(*p));
	p->fd = -1;
	if (!path)
		return fr_err(-EINVAL, "no pool path given");
	if (!*path)
		return fr_err(-ENOENT, "empty pool path");
	int fd, acc = priv ? O_RDONLY : O_RDWR, created = 0;
	if (strcmp(path, POOL_DEFAULT_PATH) == 0) { /* P3 */
		fd = default_pool_open(path, create, acc, &created);
		if (fd < 0)
			return fd;
	} else {
		/* mkfs removes a file it made if formatting fails (pool_mkfs_undo) */
		fd = create ? open(path, acc | O_CLOEXEC | O_CREAT | O_EXCL, 0600) : -1;
		created = fd >= 0;
		if (fd < 0 && (!create || errno == EEXIST)) /* (or a dangling symlink) */
			fd = open(path, acc | O_CLOEXEC | (create ? O_CREAT : 0), 0600);
	}
	if (fd < 0) {
		int e = errno;
		if (e == ENOENT && create)
			return missing_dir(path);
		if (e == ENOENT)
			return pool_missing(path);
		if (e == EISDIR)
			return fr_err(-EISDIR, "%s: is a directory, not a pool", path);
		return fr_err(-e, "%s: cannot open: %s", path, strerror(e));
	}
	struct stat st;
	if (fstat(fd, &st)) {
		int e = errno;
		close(fd);
		return fr_err(-e, "%s: cannot stat: %s", path, strerror(e));
	}
	if (flags & POOL_SHARED) {
		p->fd = fd;
		p->path = strdup(path);
		int rc = p->path ? share_attach(p, &st) : -ENOMEM;
		if (rc) {
			pool_close(p);
			return rc;
		}
	} else if (flock(fd, LOCK_EX | LOCK_NB)) {
		char who[96];
		pool_holder_describe(fd, who, sizeof(who));
		close(fd);
		return fr_err(
		    -EBUSY,
		    "%s: pool is in use by %s "
		    "(a check, mkfs, tune, `ferrite mount` and tiered pools need it alone)",
		    path, who);
	} else {
		share_remove_stale(&st);
	}
	p->fd = fd;
	if (!p->path)
		p->path = strdup(path);
	p->map_flags = priv ? MAP_PRIVATE : MAP_SHARED;
	p->created = created;
	p->old_mode = st.st_mode & 07777;
	p->old_size = S_ISREG(st.st_mode) ? (uint64_t)st.st_size : 0;
	if (S_ISCHR(st.st_mode)) {
		p->kind = POOL_DEVDAX;
		int rc = devdax_size(st.st_rdev, &p->file_size);
		if (rc) {
			pool_close(p);
			return fr_err(-ENODEV, "%s: character device is not a device-DAX node",
				      path);
		}
		snprintf(p->backing, sizeof(p->backing), "device-DAX %s", path);
		p->huge = 1;
		return 0;
	}
	if (!S_ISREG(st.st_mode)) {
		pool_close(p);
		return fr_err(-EINVAL, "%s: not a regular file or device-DAX node", path);
	}
	p->file_size = (uint64_t)st.st_size;
	struct statfs sfs;
	if (fstatfs(fd, &sfs) == 0 && (unsigned long)sfs.f_type == TMPFS_MAGIC) {
		char why[110] = "";
		p->kind = POOL_TMPFS;
		p->huge = tmpfs_is_huge(path, why, sizeof(why));
		if (p->huge)
			snprintf(p->backing, sizeof(p->backing),
				 "emulated PM: tmpfs file with 2 MiB pages");
		else
			snprintf(p->backing, sizeof(p->backing),
				 "emulated PM: tmpfs file with 4 KiB pages (%s)", why);
		return 0;
	}
	/* A file on some other file system: DAX if MAP_SYNC is accepted (a
	 * private view never writes back, so it needs no MAP_SYNC). */
	if (p->file_size >= FR_PAGE_SIZE && !priv) {
		void *m = mmap(NULL, FR_PAGE_SIZE, PROT_READ | PROT_WRITE,
			       MAP_SHARED_VALIDATE | MAP_SYNC, fd, 0);
		if (m != MAP_FAILED) {
			munmap(m, FR_PAGE_SIZE);
			p->kind = POOL_FSDAX;
			p->map_flags = MAP_SHARED_VALIDATE | MAP_SYNC;
			p->huge = 1;
			snprintf(p->backing, sizeof(p->backing), "file on a DAX file system");
			return 0;
		}
	}
	p->kind = POOL_FILE;
	snprintf(p->backing, sizeof(p->backing),
		 "emulated PM: file on a non-DAX file system (durable only with the page cache)");
	return 0;
}

/* mkfs reports progress over two passes (allocating, then touching every
 * page), each in steps of about 1/128 of the pool (2 to 64 MiB): often
 * enough for a smooth display of a large pool, few enough to cost nothing. */
struct populate_progress {
	void (*fn)(void *, uint64_t, uint64_t);
	void *arg;
	uint64_t total; /* both passes: twice the pool size */
};

static uint64_t populate_step(uint64_t size)
{
	uint64_t step = FR_ALIGN_UP(size / 128, FR_UNIT_SIZE);
	return FR_MIN(FR_MAX(step, FR_UNIT_SIZE), 64 * FR_MIB);
}

static void populate_report(const struct populate_progress *pp, uint64_t done)
{
	if (pp->fn)
		pp->fn(pp->arg, done, pp->total);
}

void pool_prefault(void *addr, size_t len)
{
	uintptr_t a = (uintptr_t)addr & ~(uintptr_t)(FR_PAGE_SIZE - 1);
	madvise((void *)a, len + ((uintptr_t)addr - a), MADV_POPULATE_WRITE);
}

/* fallocate leaves tmpfs pages to be zeroed on first touch (1 us per 4 KiB,
 * machine-limits.md); touch them all now so writes never pay for it. */
static int pool_touch(struct pool *p, uint64_t size, const struct populate_progress *pp)
{
	const uint64_t step = populate_step(size);
	for (uint64_t off = 0; off < size; off += step) {
		uint64_t len = FR_MIN(step, size - off);
		char *m = mmap(NULL, len, PROT_READ | PROT_WRITE, p->map_flags, p->fd, (off_t)off);
		if (m == MAP_FAILED)
			return fr_err(-errno, "%s: cannot map the pool to populate it: %s", p->path,
				      strerror(errno));
		if (p->kind == POOL_TMPFS)
			madvise(m, len, MADV_HUGEPAGE);
		if (madvise(m, len, MADV_POPULATE_WRITE)) {
			/* Older kernels: a write per page does the same (fresh pool). */
			for (uint64_t o = 0; o < len; o += FR_PAGE_SIZE)
				((volatile char *)m)[o] = 0;
		}
		munmap(m, len);
		populate_report(pp, size + off + len);
	}
	return 0;
}

/* Is there room for size bytes where the pool file lives? Checked before
 * anything is changed, so a pool that cannot fit leaves an existing file as
 * it was. The file's own blocks count as free (they are given back first);
 * a file system that states no limit (f_blocks 0) is not checked. */
static int pool_space_check(struct pool *p, uint64_t size)
{
	struct statfs sfs;
	struct stat st;
	if (fstatfs(p->fd, &sfs) || fstat(p->fd, &st) || sfs.f_blocks == 0)
		return 0;
	uint64_t blocks = geteuid() == 0 ? (uint64_t)sfs.f_bfree : (uint64_t)sfs.f_bavail;
	uint64_t avail = blocks * (uint64_t)sfs.f_bsize + (uint64_t)st.st_blocks * 512;
	if (avail >= size)
		return 0;
	return fr_err(-ENOSPC,
		      "%s: no room for a %llu MiB pool: its file system has %llu MiB free "
		      "(choose a smaller --size or another place)",
		      p->path, (unsigned long long)(size >> 20), (unsigned long long)(avail >> 20));
}

int pool_populate(struct pool *p, uint64_t size, void (*progress)(void *, uint64_t, uint64_t),
		  void *arg)
{
	if (p->kind == POOL_DEVDAX)
		return 0;
	int rc = pool_space_check(p, size);
	if (rc)
		return rc;
	/* P3: whoever can read the pool file reads every file in it, whatever
	 * their modes in the pool; mkfs over an existing file changes its mode
	 * before the old contents go and the new ones are written. */
	if (fchmod(p->fd, 0600))
		return fr_err(-errno, "%s: cannot make the pool private (mode 0600): %s", p->path,
			      strerror(errno));
	p->resized = 1; /* from here on a failure leaves the file empty */
	if (ftruncate(p->fd, 0) || ftruncate(p->fd, (off_t)size))
		return fr_err(-errno, "%s: cannot size the pool to %llu bytes: %s", p->path,
			      (unsigned long long)size, strerror(errno));
	/* Allocate every page now so that first writes do not fault in new
	 * memory (3.4 us per 4 KiB on /dev/shm, see machine-limits.md). */
	struct populate_progress pp = {progress, arg, 2 * size};
	const uint64_t step = populate_step(size);
	for (uint64_t off = 0; off < size; off += step) {
		uint64_t len = FR_MIN(step, size - off);
		if (fallocate(p->fd, 0, (off_t)off, (off_t)len)) {
			int e = errno;
			if (e == EOPNOTSUPP)
				break;
			return fr_err(e == ENOSPC ? -ENOSPC : -e,
				      "%s: cannot allocate %llu bytes for the pool: %s", p->path,
				      (unsigned long long)size, strerror(e));
		}
		populate_report(&pp, off + len);
	}
	p->file_size = size;
	return pool_touch(p, size, &pp);
}

int pool_mkfs_undo(struct pool *p, int rc)
{
	if (p->fd < 0 || p->kind == POOL_DEVDAX)
		return rc;
	if (p->created) {
		/* Still the file this mkfs made (it holds the flock)? */
		struct stat mine, now;
		if (fstat(p->fd, &mine) == 0 && stat(p->path, &now) == 0 &&
		    mine.st_dev == now.st_dev && mine.st_ino == now.st_ino)
			unlink(p->path);
		return rc;
	}
	if (!p->resized)
		return rc; /* nothing was changed */
	/* The space goes back; an empty file stays as it was, a non-empty one
	 * cannot: say so. */
	int had_data = p->old_size > 0;
	if (ftruncate(p->fd, 0) == 0)
		p->file_size = 0;
	if (fchmod(p->fd, p->old_mode)) {
		/* stays 0600: the safer of the two */
	}
	if (had_data)
		return fr_err(rc,
			      "%s; %s is left empty: its old contents were discarded before "
			      "the format failed",
			      fr_err_isset() ? fr_err_get() : strerror(-rc), p->path);
	return rc;
}

int pool_map(struct pool *p, uint64_t size)
{
	if (p->kind == POOL_DEVDAX && p->map_flags == MAP_PRIVATE)
		return -EOPNOTSUPP; /* device DAX cannot be mapped copy-on-write */
	size_t resv = size + FR_UNIT_SIZE;
	void *r = mmap(NULL, resv, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (r == MAP_FAILED)
		return fr_err(-ENOMEM, "cannot reserve %zu bytes of address space", resv);
	char *base = (char *)FR_ALIGN_UP((uintptr_t)r, FR_UNIT_SIZE);
	int prot = PROT_READ | PROT_WRITE;
#ifdef FERRITE_PM_TRACE
	int guard = pm_guard_wanted();
	if (guard) {
		/* Guarded (pm.h): read-only everywhere, one alias, writable
		 * (the explorer) or only while a store is made (protection) */
		int aprot = guard == PM_GUARD_PROTECT ? PROT_NONE : PROT_READ | PROT_WRITE;
		void *a = mmap(NULL, size, aprot, p->map_flags, p->fd, 0);
		if (a == MAP_FAILED) {
			int e = errno;
			munmap(r, resv);
			return fr_err(-e, "%s: cannot map the pool's alias: %s", p->path,
				      strerror(e));
		}
		p->alias = a;
		p->guarded = 1;
		prot = PROT_READ;
	}
#endif
	void *m = mmap(base, size, prot, p->map_flags | MAP_FIXED, p->fd, 0);
	if (m == MAP_FAILED) {
		int e = errno;
		munmap(r, resv);
		if (p->alias)
			munmap(p->alias, size);
		p->alias = NULL;
		p->guarded = 0;
		return fr_err(-e, "%s: cannot map the pool: %s", p->path, strerror(e));
	}
	if (p->kind == POOL_TMPFS)
		madvise(base, size, MADV_HUGEPAGE);
	p->base = base;
	p->size = size;
	p->map_reserve = r;
	p->map_reserve_len = resv;
	int gran = (p->kind == POOL_TMPFS || p->kind == POOL_FILE) ? PM_GRAN_CACHE_LINE : -1;
	int rc = pm_setup(p->fd, base, size, gran, &p->pm_handle);
	if (rc) {
		munmap(r, resv);
		if (p->alias)
			munmap(p->alias, size);
		p->alias = NULL;
		p->guarded = 0;
		p->base = NULL;
		return rc;
	}
#ifdef FERRITE_PM_TRACE
	p->pm = pm_pool_register(p->path, base, size, p->alias, guard == PM_GUARD_PROTECT);
#endif
	return 0;
}

void pool_close(struct pool *p)
{
#ifdef FERRITE_PM_TRACE
	pm_pool_unregister(p->pm);
#endif
	p->pm = NULL;
	if (p->alias)
		munmap(p->alias, p->size);
	p->alias = NULL;
	p->guarded = 0;
	if (p->pm_handle)
		pm_teardown(p->pm_handle);
	p->pm_handle = NULL;
	if (p->map_reserve)
		munmap(p->map_reserve, p->map_reserve_len);
	p->map_reserve = NULL;
	p->base = NULL;
	share_detach(p);
	if (p->fd >= 0)
		close(p->fd); /* releases the flock */
	p->fd = -1;
	free(p->path);
	p->path = NULL;
}
