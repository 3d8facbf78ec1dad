/*
 * fuse_front.h -- the FUSE front end: serves a mounted pool to the kernel
 * through libfuse's low-level API (ferrite mount runs it).
 *
 * The daemon holds no file-system logic: every request becomes one call of
 * include/ferrite.h made with the requesting process's credentials, and the
 * reply is sent when that call has returned (so a write is acknowledged only
 * once it is durable). Files: fuse_nodes.c (FUSE node ids <-> O_PATH
 * descriptors), fuse_ops.c (the operation table), fuse_main.c (session,
 * mount, loop, shutdown).
 */
#ifndef FERRITE_FUSE_FRONT_H
#define FERRITE_FUSE_FRONT_H

#include <pthread.h>
#include <stdint.h>

#include "ferrite.h"

struct fuse_session;

struct fuse_front_opts {
	const char *pool;	/* absolute path of the pool */
	const char *mountpoint; /* absolute path of the mount point */
	const char *fuse_opts;	/* extra -o options for libfuse and the kernel, or NULL */
	double attr_timeout;	/* seconds the kernel may cache attributes */
	double entry_timeout;	/* ... and names (positive and negative) */
	int threads;		/* most worker threads */
	int mode;		/* enum ferrite_mount_mode (0: the pool's own) */
	int shared;		/* share the pool with other processes: nothing cached */
	int debug;		/* libfuse's request trace on stderr */
	/* Called once: the file system is mounted (rc 0), or the mount failed
	 * (rc < 0 with a one-line message). May be NULL. */
	void (*ready)(void *arg, int rc, const char *msg);
	void *ready_arg;
};

/* Mounts the pool, mounts the file system and serves requests until it is
 * unmounted or a SIGINT/SIGTERM/SIGHUP arrives; then unmounts both. Returns
 * 0 or -errno. */
int fuse_front_run(const struct fuse_front_opts *o);

/* ---- internal to src/fuse ----------------------------------------------------- */

struct fuse_lowlevel_ops;
extern const struct fuse_lowlevel_ops fuse_front_ops;

/* The daemon's state, the session's userdata. */
struct ffront {
	ferrite_fs *fs;
	uint64_t root_ino; /* ferrite inode number of the root (FUSE_ROOT_ID) */
	double attr_timeout, entry_timeout;
	int shared; /* other processes change the pool: the kernel caches no data */
	struct fnode_table *nodes;
	struct fuse_session *se;
	/* fuse_wire.c: the kernel offered / the daemon took FUSE_HANDLE_KILLPRIV_V2
	 * (then the daemon clears set-id bits on write and truncate) */
	int kernel_killpriv_v2, init_replied, killpriv_v2;
	/* fuse_frees.c: forgets and releases read but not yet carried out */
	pthread_mutex_t frees_lock;
	pthread_cond_t frees_cv;
	uint64_t frees_pending, frees_finished;
	int frees_slow_ms;
};

/* Hooks the session's /dev/fuse I/O (after fuse_session_mount). */

int fuse_wire_install(struct fuse_session *se, struct ffront *ff);

/* ---- space coming back (fuse_frees.c) --------------------------------------------- */

int frees_init(struct ffront *ff);
void frees_fini(struct ffront *ff);
/* A FORGET, BATCH_FORGET, RELEASE or RELEASEDIR was read from the kernel;
 * its handler calls frees_slow first and frees_done when it has finished. */
void frees_started(struct ffront *ff);
void frees_slow(const struct ffront *ff);
void frees_done(struct ffront *ff);
/* How many have finished; taken before a call that may need space. */
struct frees_mark {
	uint64_t seen;
	unsigned tries;
};
struct frees_mark frees_mark(struct ffront *ff);
/* After that call failed with -ENOSPC: waits for the ones in flight;
 * 1 if any finished since *m (try the call again, a bounded number of
 * times), else 0. */
int frees_settle(struct ffront *ff, struct frees_mark *m);

/* call, tried again while it fails with -ENOSPC and space came back */
#define FF_UNTIL_FULL(ff, call)                                                                    \
	({                                                                                         \
		struct ffront *ff_full_ = (ff);                                                    \
		struct frees_mark ff_mark_ = frees_mark(ff_full_);                                 \
		__typeof__(call) ff_rc_ = (call);                                                  \
		while ((long long)ff_rc_ == -ENOSPC && frees_settle(ff_full_, &ff_mark_))          \
			ff_rc_ = (call);                                                           \
		ff_rc_;                                                                            \
	})

/* ---- node table (fuse_nodes.c) ---------------------------------------------------- */

/* FUSE node id of a ferrite inode number and back: the inode number itself
 * (stable across mounts), except that the root is FUSE_ROOT_ID (1, never a
 * ferrite inode number: that would be pool offset 64, in the superblock). */
uint64_t fnode_id(const struct ffront *ff, uint64_t ino);

struct fnode_table *fnode_table_new(void);
/* Closes every descriptor still held (the kernel forgets nothing at unmount). */
void fnode_table_free(struct ffront *ff, struct fnode_table *t);
/* The O_PATH descriptor of node id, or -ESTALE if the kernel never learnt it. */
int fnode_fd(struct ffront *ff, uint64_t id);
/* Counts one more kernel reference to the inode fd (an O_PATH descriptor)
 * names, whose number is ino: keeps fd as the node's descriptor if the node
 * is new, closes it otherwise. */
void fnode_ref(struct ffront *ff, uint64_t ino, int fd);
/* The kernel dropped n references; the last closes the descriptor. */
void fnode_unref(struct ffront *ff, uint64_t id, uint64_t n);
/* An open file of node id was opened, or closed (released: by the kernel's
 * RELEASE, whose count in fuse_frees.c then stays pending until the node's
 * forget if the function returns 1: see fuse_nodes.c F3). */
void fnode_handle_opened(struct ffront *ff, uint64_t id);
int fnode_handle_closed(struct ffront *ff, uint64_t id, int released);

#endif
