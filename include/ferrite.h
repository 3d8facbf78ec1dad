/*
 * ferrite.h -- public C API of Ferrite, a user-space persistent-memory file system.
 *
 * Conventions (every function):
 *   - returns 0 (or a count / descriptor >= 0) on success and -errno on failure;
 *     errno itself is never consulted or set by the library;
 *   - a readable explanation of the calling thread's most recent failure is
 *     available from ferrite_errmsg();
 *   - every call that changes state is durable when it returns (sync mode);
 *     ferrite_fsync() has nothing left to do;
 *   - paths are resolved inside the pool: "/" is the pool's root directory and
 *     relative paths are resolved from the root as well;
 *   - permission checks use the calling thread's credentials: the process's
 *     effective uid/gid and supplementary groups, unless ferrite_set_creds()
 *     installed others for this thread (the FUSE daemon does so per request).
 *
 * Thread safety: a mounted ferrite_fs may be used by any number of threads at
 * once. Operations on different files proceed in parallel; see
 * docs/contracts.md for the locks each operation takes.
 */
#ifndef FERRITE_H
#define FERRITE_H

#include <fcntl.h> /* O_* and AT_* flags the calls take (ferrite_open, the *at family) */
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <time.h>

#ifdef __cplusplus
extern "C" {
#endif

#define FERRITE_API __attribute__((visibility("default")))

#define FERRITE_VERSION_MAJOR 0
#define FERRITE_VERSION_MINOR 1

/* An open flag of ours beside O_*: open to execute. The caller needs
 * execute permission, not read, and the file must be regular; the
 * descriptor reads. It is the value of Linux's __FMODE_EXEC, which the
 * kernel's exec sets on the open a FUSE daemon receives, and which open(2)
 * ignores from a program. */
#define FERRITE_O_EXEC 040

/* Flags for ferrite_rename() (same values as Linux renameat2). */
#ifndef RENAME_NOREPLACE
#define RENAME_NOREPLACE (1u << 0)
#endif
#ifndef RENAME_EXCHANGE
#define RENAME_EXCHANGE (1u << 1)
#endif

/* Modes for ferrite_fallocate() (same values as Linux fallocate). */
#ifndef FALLOC_FL_KEEP_SIZE
#define FALLOC_FL_KEEP_SIZE 0x01
#endif
#ifndef FALLOC_FL_PUNCH_HOLE
#define FALLOC_FL_PUNCH_HOLE 0x02
#endif

/* Consistency mode of a pool (chosen at mkfs, stored in the superblock; a
 * mount may override it, see struct ferrite_mount_opts). Both modes make
 * every call durable on return and metadata operations atomic. */
enum ferrite_mode {
	FERRITE_MODE_SYNC = 0,	 /* appends atomic; an overwrite interrupted by a crash
				  * may be partly visible */
	FERRITE_MODE_STRICT = 1, /* every write/pwrite/writev/pwritev atomic: after a
				  * crash the file shows wholly the old or wholly the
				  * new bytes and size (ctFS write-and-swap) */
};

typedef struct ferrite_fs ferrite_fs;	/* a mounted pool */
typedef struct ferrite_dir ferrite_dir; /* an open directory stream */

/* ---- pools --------------------------------------------------------------- */

struct ferrite_mkfs_opts {
	uint64_t size;	  /* bytes; 0 = 1 GiB for a new file, the device size for DAX */
	int mode;	  /* enum ferrite_mode */
	int force;	  /* overwrite an existing ferrite pool or non-empty file */
	int no_hugepages; /* do not try to give the default pool 2 MiB pages */
	/* progress: called now and then with done/total in [0, total]; may be NULL */
	void (*progress)(void *arg, uint64_t done, uint64_t total);
	void *progress_arg;
	/* Tiered pools (First Responder / HasFS): a backing directory makes the
	 * pool a persistent cache in front of it (NULL: a pm-engine pool). */
	const char *tier_backing;
	int tier_consistency;	/* enum ferrite_tier_consistency */
	unsigned tier_flush_ms; /* background flush period; 0 = 10 ms */
	unsigned tier_epoch_ms; /* epoch mode: epoch length; 0 = 10 ms */
	int tier_writeback;	/* enum ferrite_tier_writeback */
};

/* How writes to a tiered pool become durable. */
enum ferrite_tier_consistency {
	FERRITE_TIER_PER_WRITE = 0, /* each write durable and atomic when it returns
				     * (First Responder; the default) */
	FERRITE_TIER_EPOCH = 1,	    /* writes durable together at the end of an epoch:
				     * fsync, or every tier_epoch_ms (HasFS) */
};

/* How a tiered pool's flusher writes back to the backing files. Either way
 * it syncs the backing file system before it counts a chunk clean. */
enum ferrite_tier_writeback {
	FERRITE_TIER_WB_CACHED = 0, /* through the page cache (the default): data the
				     * pool no longer holds is read back from DRAM */
	FERRITE_TIER_WB_DIRECT = 1, /* O_DIRECT where the file system takes it: the
				     * page cache keeps none of it (First Responder) */
};

/* ferrite_mount_opts.mode: 0 keeps the pool's own mode. */
enum ferrite_mount_mode {
	FERRITE_MOUNT_POOL_MODE = 0, /* the mode the pool was formatted with */
	FERRITE_MOUNT_SYNC = 1,	     /* sync mode for this mount */
	FERRITE_MOUNT_STRICT = 2,    /* strict mode for this mount */
};
/* Or'ed into ferrite_mount_opts.mode: hold the pool alone. By default a pm
 * pool is shared: every process that mounts it maps it and they take turns
 * (docs/contracts.md#processes); a mount made alone is refused while another
 * process has the pool, and refuses others while it lasts (fsck --repair
 * and the FUSE daemon mount so). Tiered pools are always held alone. */
#define FERRITE_MOUNT_EXCLUSIVE 0x100

struct ferrite_mount_opts {
	int read_only;		/* not supported yet: 1 gives -EOPNOTSUPP */
	int mode;		/* enum ferrite_mount_mode; the pool is not changed */
	unsigned tier_flush_ms; /* tiered pools: flush period for this mount (0: the pool's) */
	/* Tiered pools: write nothing back to the backing directory -- no
	 * flusher, no draining at mount or unmount, no sizes or times set --
	 * so a pool can be looked at, e.g. after a crash, without changing its
	 * backing files (the crash explorer's checkers do). Dirty data stays in
	 * the pool for the next ordinary mount. A call that would have to
	 * write back (the cache full of dirty data, a file without a record)
	 * fails with -EROFS. */
	int tier_no_writeback;
};

/* The pool used when none is named (a NULL pool argument to mkfs, mount and
 * fsck): $FERRITE_POOL, else /dev/shm/ferrite/default.pool. */
FERRITE_API const char *ferrite_default_pool(void);

/* Formats POOL (a regular file, created if missing; a device-DAX node; or a
 * file on a DAX file system). opts may be NULL for defaults. */
FERRITE_API int ferrite_mkfs(const char *pool, const struct ferrite_mkfs_opts *opts);

/* Opens and recovers POOL. A pool is used by one process at a time: a second
 * opener gets -EBUSY. A foreign, damaged, truncated or newer-format pool gets
 * -EUCLEAN, -EINVAL or -EPROTONOSUPPORT with a one-line ferrite_errmsg(). */
FERRITE_API int ferrite_mount(const char *pool, const struct ferrite_mount_opts *opts,
			      ferrite_fs **out);

/* Closes every descriptor and stream still open and releases the pool. */
FERRITE_API int ferrite_unmount(ferrite_fs *fs);

/* Explanation of the calling thread's last failure ("" if none). */
FERRITE_API const char *ferrite_errmsg(void);

/* Credentials used for permission checks by the calling thread. ngroups may
 * be 0, at most 64 (-EINVAL beyond). ferrite_reset_creds() returns to the
 * process's own credentials. */
FERRITE_API int ferrite_set_creds(uid_t uid, gid_t gid, size_t ngroups, const gid_t *groups);
FERRITE_API void ferrite_reset_creds(void);

/* ---- files ---------------------------------------------------------------- */

/* flags: O_RDONLY/O_WRONLY/O_RDWR | O_CREAT | O_EXCL | O_TRUNC | O_APPEND |
 * O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC (accepted, no meaning here). Other
 * flags are ignored, as Linux ignores flags it does not know; O_CREAT with
 * O_DIRECTORY is -EINVAL. mode is used as given (no umask is applied: front
 * ends apply theirs). Returns a descriptor >= 0, private to this ferrite_fs. */
FERRITE_API int ferrite_open(ferrite_fs *fs, const char *path, int flags, mode_t mode);
FERRITE_API int ferrite_close(ferrite_fs *fs, int fd);
/* A second descriptor for the same open file (shared offset and flags). */
FERRITE_API int ferrite_dup(ferrite_fs *fs, int fd);

/* Writes are durable on return. In strict mode (enum ferrite_mode) each
 * write, pwrite, writev and pwritev is also atomic: after a crash the file
 * holds all of its bytes and its size, or none (docs/contracts.md#strict;
 * one call covers at most 256 MiB of an existing file, a longer one returns
 * a short count). */
FERRITE_API ssize_t ferrite_read(ferrite_fs *fs, int fd, void *buf, size_t count);
FERRITE_API ssize_t ferrite_write(ferrite_fs *fs, int fd, const void *buf, size_t count);
FERRITE_API ssize_t ferrite_pread(ferrite_fs *fs, int fd, void *buf, size_t count, off_t offset);
FERRITE_API ssize_t ferrite_pwrite(ferrite_fs *fs, int fd, const void *buf, size_t count,
				   off_t offset);
FERRITE_API ssize_t ferrite_readv(ferrite_fs *fs, int fd, const struct iovec *iov, int iovcnt);
FERRITE_API ssize_t ferrite_writev(ferrite_fs *fs, int fd, const struct iovec *iov, int iovcnt);
FERRITE_API ssize_t ferrite_preadv(ferrite_fs *fs, int fd, const struct iovec *iov, int iovcnt,
				   off_t offset);
FERRITE_API ssize_t ferrite_pwritev(ferrite_fs *fs, int fd, const struct iovec *iov, int iovcnt,
				    off_t offset);

/* whence: SEEK_SET, SEEK_CUR, SEEK_END, SEEK_DATA, SEEK_HOLE. Holes are
 * reported at the granularity space is allocated in: files below 256 KiB
 * have none, larger files have holes in whole 2 MiB windows. */
FERRITE_API off_t ferrite_lseek(ferrite_fs *fs, int fd, off_t offset, int whence);

FERRITE_API int ferrite_ftruncate(ferrite_fs *fs, int fd, off_t length);
FERRITE_API int ferrite_truncate(ferrite_fs *fs, const char *path, off_t length);
/* mode: 0, FALLOC_FL_KEEP_SIZE, or FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE. */
FERRITE_API int ferrite_fallocate(ferrite_fs *fs, int fd, int mode, off_t offset, off_t len);
FERRITE_API int ferrite_fsync(ferrite_fs *fs, int fd);
FERRITE_API int ferrite_fdatasync(ferrite_fs *fs, int fd);

/* ---- attributes ------------------------------------------------------------ */

FERRITE_API int ferrite_stat(ferrite_fs *fs, const char *path, struct stat *st);
FERRITE_API int ferrite_lstat(ferrite_fs *fs, const char *path, struct stat *st);
FERRITE_API int ferrite_fstat(ferrite_fs *fs, int fd, struct stat *st);
FERRITE_API int ferrite_statvfs(ferrite_fs *fs, struct statvfs *sv);
FERRITE_API int ferrite_chmod(ferrite_fs *fs, const char *path, mode_t mode);
FERRITE_API int ferrite_fchmod(ferrite_fs *fs, int fd, mode_t mode);
/* uid/gid of (uid_t)-1 / (gid_t)-1 leave that id unchanged. */
FERRITE_API int ferrite_chown(ferrite_fs *fs, const char *path, uid_t uid, gid_t gid);
FERRITE_API int ferrite_lchown(ferrite_fs *fs, const char *path, uid_t uid, gid_t gid);
FERRITE_API int ferrite_fchown(ferrite_fs *fs, int fd, uid_t uid, gid_t gid);
/* times[0] = atime, times[1] = mtime; NULL = now; UTIME_NOW / UTIME_OMIT
 * honoured. flags: 0 or AT_SYMLINK_NOFOLLOW. */
FERRITE_API int ferrite_utimens(ferrite_fs *fs, const char *path, const struct timespec times[2],
				int flags);
FERRITE_API int ferrite_futimens(ferrite_fs *fs, int fd, const struct timespec times[2]);
/* mode: F_OK or a combination of R_OK, W_OK, X_OK. */
FERRITE_API int ferrite_access(ferrite_fs *fs, const char *path, int mode);

/* ---- namespace ------------------------------------------------------------- */

FERRITE_API int ferrite_mkdir(ferrite_fs *fs, const char *path, mode_t mode);
FERRITE_API int ferrite_rmdir(ferrite_fs *fs, const char *path);
FERRITE_API int ferrite_unlink(ferrite_fs *fs, const char *path);
/* flags: 0, RENAME_NOREPLACE or RENAME_EXCHANGE. */
FERRITE_API int ferrite_rename(ferrite_fs *fs, const char *oldpath, const char *newpath,
			       unsigned flags);
FERRITE_API int ferrite_link(ferrite_fs *fs, const char *oldpath, const char *newpath);
FERRITE_API int ferrite_symlink(ferrite_fs *fs, const char *target, const char *linkpath);
/* Like readlink(2): no terminating NUL; returns the number of bytes placed. */
FERRITE_API ssize_t ferrite_readlink(ferrite_fs *fs, const char *path, char *buf, size_t size);

/* ---- relative to an open directory (the *at family) ----------------------- *
 *
 * dirfd is a ferrite descriptor of a directory (opened with O_DIRECTORY or
 * O_PATH), or FERRITE_AT_ROOT: relative paths then start at the pool's root,
 * as absolute paths always do (the library has no working directory; front
 * ends keep theirs as a directory descriptor). An open directory descriptor
 * keeps its inode alive: paths below a directory removed meanwhile fail with
 * -ENOENT, as on Linux. flags take the Linux AT_* values where Linux has them:
 * AT_SYMLINK_NOFOLLOW, AT_SYMLINK_FOLLOW (linkat), AT_REMOVEDIR (unlinkat),
 * AT_EMPTY_PATH (operate on dirfd itself; path "" or NULL), AT_EACCESS. */
#define FERRITE_AT_ROOT (-100) /* == AT_FDCWD */

/* O_PATH descriptors name an inode without opening it for I/O: fstat,
 * f*xattr, the *at calls with AT_EMPTY_PATH, ferrite_reopen and use as a
 * dirfd work; read/write/ftruncate give -EBADF. O_PATH|O_NOFOLLOW may name a
 * symbolic link itself. */
FERRITE_API int ferrite_openat(ferrite_fs *fs, int dirfd, const char *path, int flags, mode_t mode);
/* Opens the inode fd names again with new flags (access checked against the
 * caller's credentials), like open("/proc/self/fd/N"). O_CREAT/O_EXCL are
 * -EINVAL; O_TRUNC truncates. */
FERRITE_API int ferrite_reopen(ferrite_fs *fs, int fd, int flags);
FERRITE_API int ferrite_fstatat(ferrite_fs *fs, int dirfd, const char *path, struct stat *st,
				int flags);
FERRITE_API int ferrite_faccessat(ferrite_fs *fs, int dirfd, const char *path, int mode, int flags);
FERRITE_API int ferrite_fchmodat(ferrite_fs *fs, int dirfd, const char *path, mode_t mode,
				 int flags);
FERRITE_API int ferrite_fchownat(ferrite_fs *fs, int dirfd, const char *path, uid_t uid, gid_t gid,
				 int flags);
FERRITE_API int ferrite_utimensat(ferrite_fs *fs, int dirfd, const char *path,
				  const struct timespec times[2], int flags);
FERRITE_API int ferrite_mkdirat(ferrite_fs *fs, int dirfd, const char *path, mode_t mode);
FERRITE_API int ferrite_unlinkat(ferrite_fs *fs, int dirfd, const char *path, int flags);
FERRITE_API int ferrite_renameat2(ferrite_fs *fs, int olddirfd, const char *oldpath, int newdirfd,
				  const char *newpath, unsigned flags);
FERRITE_API int ferrite_linkat(ferrite_fs *fs, int olddirfd, const char *oldpath, int newdirfd,
			       const char *newpath, int flags);
FERRITE_API int ferrite_symlinkat(ferrite_fs *fs, const char *target, int newdirfd,
				  const char *linkpath);
FERRITE_API ssize_t ferrite_readlinkat(ferrite_fs *fs, int dirfd, const char *path, char *buf,
				       size_t size);
/* mknod for regular files (S_IFREG) and FIFOs/sockets/devices: the inode is
 * created with the type and rdev given; ferrite stores special files but does
 * not open them. */
FERRITE_API int ferrite_mknodat(ferrite_fs *fs, int dirfd, const char *path, mode_t mode,
				dev_t rdev);
/* A stream over the directory fd names; the stream does not consume fd. */
FERRITE_API int ferrite_fdopendir(ferrite_fs *fs, int fd, ferrite_dir **out);

/* Status flags of an open file: the access mode and O_APPEND, O_NONBLOCK,
 * O_PATH, O_DIRECTORY as opened. setfl changes only O_APPEND (others are
 * ignored, as Linux ignores those it cannot change). */
FERRITE_API int ferrite_getfl(ferrite_fs *fs, int fd);
FERRITE_API int ferrite_setfl(ferrite_fs *fs, int fd, int flags);

/* An open file description passed to another process across exec or spawn
 * (docs/contracts.md "Processes"); what fork passes needs none of this.
 * FERRITE_FD_EXPORT: *token names fd's description, which stays shareable
 * while this process holds it. FERRITE_FD_IMPORT, in the other process (the
 * new image after exec, or a spawned child): fd, just opened on the same
 * file, becomes that description -- one offset, status flags and flock/OFD
 * locks with every process holding it; -ESTALE if no process holds it any
 * more (fd keeps its own). FERRITE_FD_PRUNE (fd -1), after the imports of a
 * new image: descriptions its image before exec held that no descriptor
 * names now are let go. -EOPNOTSUPP on a pool held alone (tiered pools). */
#define FERRITE_FD_EXPORT 1
#define FERRITE_FD_IMPORT 2
#define FERRITE_FD_PRUNE  3
FERRITE_API int ferrite_fd_share(ferrite_fs *fs, int fd, int op, uint32_t *token);

/* Advisory locks, as fcntl(2) and flock(2) give them, seen by every process
 * that has the pool mounted: cmd is F_GETLK, F_SETLK, F_SETLKW or an F_OFD_
 * form. A record lock belongs to the process (a forked child does not
 * inherit it) and goes when the process closes any descriptor of the file;
 * an OFD or flock lock belongs to the open file description (shared with a
 * forked child) and goes with its last descriptor. The locks of a process
 * that dies go when another process next finds it gone. F_SETLKW and flock
 * without LOCK_NB wait; a signal ends the wait with -EINTR. */
FERRITE_API int ferrite_fcntl_lock(ferrite_fs *fs, int fd, int cmd, struct flock *fl);
FERRITE_API int ferrite_flock(ferrite_fs *fs, int fd, int op);

/* Where the pool appears on the host (the preload shim's prefix, e.g. "/pm";
 * NULL: nowhere, the default). Absolute symlink targets are then host paths:
 * those under the prefix lead back into the pool; any other makes the call
 * fail with -EXDEV and ferrite_escaped_path() gives the host path to go on
 * with (target plus the rest of the path; valid until the thread's next
 * call). Without a prefix, absolute targets start at the pool's root. */
FERRITE_API int ferrite_set_link_prefix(ferrite_fs *fs, const char *prefix);
FERRITE_API const char *ferrite_escaped_path(void);

/* Copies len bytes between two ferrite descriptors inside the library. A
 * NULL offset pointer uses and advances the descriptor's position. Returns
 * the bytes copied (short at end of input), like copy_file_range(2). */
FERRITE_API ssize_t ferrite_copy_file_range(ferrite_fs *fs, int fd_in, off_t *off_in, int fd_out,
					    off_t *off_out, size_t len, unsigned flags);

/* ---- directories ----------------------------------------------------------- */

struct ferrite_dirent {
	uint64_t ino;
	int64_t off;	    /* cookie of the entry after this one (for seekdir) */
	unsigned char type; /* DT_REG, DT_DIR, DT_LNK, ... */
	char name[256];
};

FERRITE_API int ferrite_opendir(ferrite_fs *fs, const char *path, ferrite_dir **out);
/* Returns 1 with *ent filled, 0 at the end, or -errno. "." and ".." come
 * first. Entries present for the whole life of the stream are returned exactly
 * once even while others are added and removed. */
FERRITE_API int ferrite_readdir(ferrite_dir *dir, struct ferrite_dirent *ent);
FERRITE_API int64_t ferrite_telldir(ferrite_dir *dir);
FERRITE_API int ferrite_seekdir(ferrite_dir *dir, int64_t cookie);
FERRITE_API int ferrite_rewinddir(ferrite_dir *dir);
FERRITE_API int ferrite_closedir(ferrite_dir *dir);

/* ---- inspection (used by the ferrite command) ------------------------------ */

struct ferrite_info {
	char uuid[37];
	uint32_t format_version;
	int mode;	     /* enum ferrite_mode the pool was formatted with */
	uint64_t pool_bytes; /* size of the pool */
	uint64_t data_bytes; /* bytes the allocator manages */
	uint64_t free_bytes;
	uint64_t files, directories, symlinks;
	uint64_t inode_capacity; /* inodes that fit in allocated inode blocks */
	uint64_t vspace_bytes;	 /* size of the virtual partition space */
	int top_level;		 /* highest partition level */
	uint64_t max_file_size;
	uint64_t partitions_allocated[16]; /* by level */
	uint64_t ppt_huge_windows;	   /* 2 MiB windows mapped by a single entry */
	uint64_t ppt_table_windows;	   /* windows mapped page by page */
	uint64_t ppt_pages;		   /* pages used by the page table itself */
	uint64_t log_slots;
	char backing[160];    /* where the pool lives and its page size */
	int huge_pages;	      /* 1 if the pool is backed by 2 MiB pages */
	char persistence[64]; /* flush instruction chosen at run time */
	int mount_mode;	      /* enum ferrite_mode in force for this mount */
	/* Format 4: bytes large files' windows reserved and have not written
	 * (SCMFS pre-allocation); format 5 adds the pages of null files (ready
	 * files a create takes) and of empty files made from them. Counted in
	 * neither free_bytes nor the files, given back whenever an allocation
	 * would otherwise fail. */
	uint64_t prealloc_bytes;
	uint64_t inode_block_bytes; /* inode slots come in blocks of this size */
	/* This process's kernel mappings of the files' windows (an upper bound),
	 * the number past which they are all dropped between two calls and
	 * mapped again as used (an eighth of vm.max_map_count), and how often
	 * that happened. */
	uint64_t window_mappings, window_mapping_budget, window_evictions;
	/* Units this process emptied so that a large window could have one
	 * (online compaction: file pages moved, the files unaware), and the
	 * pages it moved. */
	uint64_t compactions, compacted_pages;
	/* Whether a stray store of the program into pool memory is caught:
	 * protection keys where the CPU has them, the read-only mappings of
	 * `ferrite run --protect`, or neither. */
	char protection[128];
};

FERRITE_API int ferrite_get_info(ferrite_fs *fs, struct ferrite_info *info);

/* A tiered pool: its backing directory, its cache and what the cache did
 * (counters add up over every mount of the pool). */
struct ferrite_tier_info {
	char backing[1024];
	int consistency; /* enum ferrite_tier_consistency */
	unsigned flush_ms, epoch_ms;
	int writeback; /* enum ferrite_tier_writeback */
	/* Per-write consistency: a write of up to this many bytes is atomic
	 * wherever it starts; a longer one may return a short count (each call
	 * atomic). */
	uint64_t atomic_write_max;
	uint64_t chunk_size, slots, chunks;
	uint64_t valid_chunks, dirty_chunks;
	uint64_t records, records_used;
	uint64_t read_hits, read_misses;   /* chunks read from the cache / the backing file */
	uint64_t write_hits, write_misses; /* chunks written that were cached / were not */
	uint64_t collisions;		   /* another file's chunk had to leave a slot */
	uint64_t flushes_periodic;	   /* chunks drained by the background flusher */
	uint64_t flushes_forced;	   /* chunks flushed synchronously to make room */
	uint64_t wraparounds;		   /* the key counter went round the cache */
	uint64_t flush_rounds, epochs, recovered, flush_errors;
	int live;	   /* the counters come from a mount in progress ... */
	int64_t pid;	   /* ... in this process */
	int backing_errno; /* last error writing to the backing directory (0: none, or
			    * everything written back since) */
};
/* -EINVAL if fs is not a tiered pool. */
FERRITE_API int ferrite_get_tier_info(ferrite_fs *fs, struct ferrite_tier_info *info);
/* The same without mounting: the live counters of the process that holds the
 * pool, or those saved at the last unmount. -EINVAL: not a tiered pool. */
FERRITE_API int ferrite_tier_stats(const char *pool, struct ferrite_tier_info *info);

/* Consistency check of an unmounted pool. Prints a line per problem through
 * report (may be NULL). repair: fix what can be fixed without guessing.
 * Returns a bit set like e2fsck: 0 clean, 1 errors corrected, 4 errors left
 * uncorrected, 8 operational error (pool unreadable); negative -errno when the
 * pool could not be opened at all. */
#define FERRITE_FSCK_CLEAN	 0
#define FERRITE_FSCK_CORRECTED	 1
#define FERRITE_FSCK_UNCORRECTED 4
#define FERRITE_FSCK_OPERROR	 8
FERRITE_API int ferrite_fsck(const char *pool, int repair,
			     void (*report)(void *arg, const char *line), void *report_arg,
			     void (*progress)(void *arg, uint64_t done, uint64_t total),
			     void *progress_arg);

/* The same check of a pool in use, through this process's mount, while
 * other processes keep it mounted: for the duration of the call no other
 * process and no other thread of this one runs a call on the pool (they
 * wait), so it sees the pool between calls. Changes nothing (as repair 0),
 * except what taking the pool's turn does anyway: replaying the log entry of
 * a process that died inside a call. Returns the FERRITE_FSCK_* bits (0 or
 * 4); -EBUSY if another thread of this process stays inside a call (waiting
 * for a lock); -EOPNOTSUPP for a tiered pool. */
FERRITE_API int ferrite_check(ferrite_fs *fs, void (*report)(void *arg, const char *line),
			      void *report_arg);

/* ---- operator commands: probe, tune, inode inspection ----------------------- */

#define FERRITE_LABEL_MAX 63 /* bytes of a pool label (docs/format.md, sb_label) */

/* What a pool's superblock says, and who holds the pool, read without
 * mounting and without the single-opener lock: it works on a pool another
 * process has mounted. The superblock changes only under the lock (mkfs,
 * tune), so it is read whole; a damaged one gives -EUCLEAN. */
struct ferrite_probe {
	char uuid[37];
	char label[FERRITE_LABEL_MAX + 1]; /* "" if none; control characters as '?' */
	uint32_t format_version;
	int tiered;	     /* 1: a tiered pool (see ferrite_tier_stats) */
	int mode;	     /* enum ferrite_mode (pm pools) */
	uint64_t pool_bytes; /* size of the pool */
	int64_t mkfs_time;   /* seconds since the epoch */
	/* The process holding the pool (from /proc/locks): its pid, 0 if the
	 * pool is free, -1 if the holder lives in another pid namespace. */
	int64_t holder_pid;
	char holder_comm[32];
	/* pm pools: space and inode counts read from the pool one 8-byte word at
	 * a time (counts = 1 if they were read). While another process changes
	 * the pool each is a value it held, not necessarily at the same instant. */
	int counts;
	uint64_t data_bytes, free_bytes;
	uint64_t inodes_used, inode_capacity;
	uint64_t reserved[8];
};
FERRITE_API int ferrite_probe(const char *pool, struct ferrite_probe *out);

/* Changes of an unmounted pool's superblock (ferrite tune). Zero fields
 * change nothing. */
struct ferrite_tune_opts {
	const char *label; /* new label, at most FERRITE_LABEL_MAX bytes without control
			    * characters; "" removes it; NULL: unchanged */
	int mode;	   /* enum ferrite_mount_mode: FERRITE_MOUNT_SYNC or
			    * FERRITE_MOUNT_STRICT become the pool's mode (pm pools);
			    * FERRITE_MOUNT_POOL_MODE (0): unchanged */
	/* Tiered pools: the directory the backing directory moved to. It must
	 * carry this pool's UUID in its user.ferrite.pool attribute; without
	 * it (attributes lost or unsupported) or with another pool's, only
	 * force re-points the pool, and then sets the attribute. */
	const char *tier_backing;
	int force;
	int forced;    /* out: 1 if tier_backing was taken only because of force */
	int other_dir; /* out: 1 if tier_backing is not the original directory renamed
			* but another (a copy): the cache's records know files by
			* inode number, so the next mount cannot match those it holds
			* data for and puts that data in DIR/.ferrite-lost+found */
	uint64_t reserved[4];
};
/* Writes the changes crash-safely (backup copy first, then the primary; see
 * docs/format.md). -EBUSY while the pool is in use; -EINVAL for a bad
 * label, a mode on a tiered pool, or a backing directory on a pm pool;
 * -EUCLEAN for a damaged superblock (run fsck --repair first); -EPERM for a
 * backing directory that does not prove it holds the pool's data. */
FERRITE_API int ferrite_tune(const char *pool, struct ferrite_tune_opts *opts);

/* An inode of a mounted pm pool as it is stored (debugfs's `stat`). */
struct ferrite_inode_info {
	uint64_t ino, generation;
	uint64_t pool_off; /* where the inode lives in the pool */
	uint32_t mode, nlink, uid, gid;
	uint64_t size;	 /* bytes */
	uint64_t blocks; /* 4 KiB pages backing the data */
	struct timespec atime, mtime, ctime, btime;
	uint64_t rdev;		       /* character and block devices */
	int level;		       /* partition level (L0 4 KiB .. ), -1: no partition */
	uint64_t part_off, part_bytes; /* the partition: vspace offset and size */
	uint64_t parent;	       /* directories: the parent's inode number */
	int dir_hashed;		       /* directories: 1 hashed pages in the partition,
					* 0 a small array in a dentry pool */
	uint64_t dir_entries;	       /* directories: entries besides . and .. */
	uint64_t dents_off;	       /* small directories: pool offset of the array */
	uint64_t xattr_off;	       /* extended attribute block: pool offset, 0 none */
	uint64_t xattr_bytes;	       /* ... and its size */
	int orphan;		       /* unlinked while open, released at the next mount */
	int inline_target;	       /* symbolic links: the target lives in the inode */
	uint64_t reserved[8];
};
/* ino: an inode number (st_ino). -ENOENT if no live inode has it; -EUCLEAN
 * if it is damaged (the fields then hold what the inode holds, unchecked);
 * -EOPNOTSUPP on a tiered pool (its inodes are the backing directory's). */
FERRITE_API int ferrite_inode_info(ferrite_fs *fs, uint64_t ino, struct ferrite_inode_info *out);

/* A run of a file's storage: file bytes [file_off, file_off + len) are pool
 * bytes [pool_off, pool_off + len). */
struct ferrite_extent {
	uint64_t file_off, pool_off, len;
	int unit; /* 1: whole 2 MiB units (a window mapped by one entry); 0: pages
		   * of a window's page table */
};
/* Calls cb for each run of the inode's backed storage in file order (holes
 * are skipped); a nonzero return of cb stops the walk and is returned. */
FERRITE_API int ferrite_inode_extents(ferrite_fs *fs, uint64_t ino,
				      int (*cb)(void *arg, const struct ferrite_extent *ext),
				      void *arg);

/* ---- extended attributes ---------------------------------------------------- *
 *
 * Names carry their namespace: "user.*" (regular files and directories only,
 * as on Linux; reading needs read and writing needs write permission, and in
 * a sticky directory writing needs ownership) and "trusted.*" (uid 0 only;
 * invisible to others). "security.*", "system.*" and unknown prefixes give
 * -EOPNOTSUPP. Linux limits: a name of 1..255 bytes (-ERANGE otherwise), a
 * value of at most 64 KiB (-E2BIG); all attributes of one inode together at
 * most about 2 MiB (-ENOSPC). get/list with size 0 return the size needed;
 * a buffer too small gives -ERANGE. A missing attribute is -ENODATA. Every
 * change is atomic and durable on return. Pools of format 1 read as having
 * no attributes and refuse changes with -EOPNOTSUPP.
 *
 * The f* calls take any descriptor, O_PATH ones included (Linux gives
 * -EBADF for those; front ends that need that check do it themselves). The
 * *at calls take AT_SYMLINK_NOFOLLOW (act on a final symbolic link itself,
 * like lgetxattr) and AT_EMPTY_PATH. */
/* setxattr flags: the values of Linux XATTR_CREATE / XATTR_REPLACE (not
 * defined under those names here: <sys/xattr.h> declares them as an enum). */
#define FERRITE_XATTR_CREATE   0x1 /* fail with -EEXIST if the attribute exists */
#define FERRITE_XATTR_REPLACE  0x2 /* fail with -ENODATA if it does not */
#define FERRITE_XATTR_NAME_MAX 255
#define FERRITE_XATTR_SIZE_MAX 65536

FERRITE_API ssize_t ferrite_fgetxattr(ferrite_fs *fs, int fd, const char *name, void *value,
				      size_t size);
FERRITE_API int ferrite_fsetxattr(ferrite_fs *fs, int fd, const char *name, const void *value,
				  size_t size, int flags);
/* Fills list with the NUL-terminated names, returns the bytes used. */
FERRITE_API ssize_t ferrite_flistxattr(ferrite_fs *fs, int fd, char *list, size_t size);
FERRITE_API int ferrite_fremovexattr(ferrite_fs *fs, int fd, const char *name);

FERRITE_API ssize_t ferrite_getxattrat(ferrite_fs *fs, int dirfd, const char *path, int flags,
				       const char *name, void *value, size_t size);
FERRITE_API int ferrite_setxattrat(ferrite_fs *fs, int dirfd, const char *path, int flags,
				   const char *name, const void *value, size_t size,
				   int xattr_flags);
FERRITE_API ssize_t ferrite_listxattrat(ferrite_fs *fs, int dirfd, const char *path, int flags,
					char *list, size_t size);
FERRITE_API int ferrite_removexattrat(ferrite_fs *fs, int dirfd, const char *path, int flags,
				      const char *name);

/* ---- memory mapping (preload shim) ---------------------------------------- *
 *
 * ferrite_mmap maps a file's own pool pages into the process: loads and
 * stores reach persistent memory with no copy. Stores are durable after
 * ferrite_msync or ferrite_munmap of their range (they flush and fence).
 * flags: MAP_SHARED (or MAP_SHARED_VALIDATE) or MAP_PRIVATE (copy-on-write),
 * optionally MAP_FIXED / MAP_FIXED_NOREPLACE; other flags are ignored.
 *
 * While mapped, a file is kept in a large partition (its pages never move when
 * it grows; a small file is moved into one at ferrite_mmap, which backs at
 * least 2 MiB) and its inode stays allocated even if unlinked. Holes inside
 * EOF are backed at ferrite_mmap; pages of the range beyond EOF are left
 * inaccessible (a SIGSEGV on access, where Linux raises SIGBUS) until
 * ferrite_mmap_refresh maps those that entered the file since. Truncation
 * cuts the mappings at the new end of file, zeroes the rest of its last page
 * and leaves the pages below it in place (the file stays in a large
 * partition); punching a hole in a mapped range stores zeros there instead
 * of freeing its pages. Neither is refused. See docs/contracts.md#mmap. */

/* Maps [offset, offset+len) of fd at addr (a hint unless MAP_FIXED); the
 * address goes to *out. offset must be page aligned. */
FERRITE_API int ferrite_mmap(ferrite_fs *fs, int fd, void *addr, size_t len, int prot, int flags,
			     off_t offset, void **out);
/* Ends the ferrite mappings inside [addr, addr+len) (after flushing shared
 * ones). Their pages are replaced by an inaccessible reservation, so no other
 * mapping can slip into the range before the caller munmap(2)s it. Returns
 * the number of bytes that were ferrite mappings (0: none). */
FERRITE_API ssize_t ferrite_munmap(ferrite_fs *fs, void *addr, size_t len);
/* Makes stores to the shared ferrite mappings in [addr, addr+len) durable.
 * Returns the bytes covered (0: no ferrite mapping there). */
FERRITE_API ssize_t ferrite_msync(ferrite_fs *fs, void *addr, size_t len, int flags);
/* To call after mprotect(2) of [addr, addr+len): records prot for the
 * ferrite mappings there and keeps their pages beyond EOF inaccessible.
 * Returns the bytes covered. */
FERRITE_API ssize_t ferrite_mprotect(ferrite_fs *fs, void *addr, size_t len, int prot);
/* 1 if a mapping shows a page of fd in [from, from+len) (len 0: to the
 * end), else 0. */
FERRITE_API int ferrite_mmap_pinned(ferrite_fs *fs, int fd, off_t from, off_t len);
/* Cuts fd's mappings at newsize: pages beyond it become inaccessible again
 * (they come back when the file grows). Truncation does this itself; a
 * front end need not call it. */
FERRITE_API int ferrite_mmap_shrink(ferrite_fs *fs, int fd, off_t newsize);
/* Maps the pages of fd's mappings that entered the file since they were
 * made (after it grew). Returns 0 or -errno. */
FERRITE_API int ferrite_mmap_refresh(ferrite_fs *fs, int fd);

#ifdef __cplusplus
}
#endif
#endif /* FERRITE_H */
