/*
 * fuse_main.c -- the daemon's life: mount the pool, mount the file system,
 * serve requests on a multi-threaded loop, and on unmount or a signal
 * unmount both.
 *
 * Invariants: M1 the pool is mounted (and so locked against every other
 *               process) for as long as the kernel can send requests;
 *             M2 ferrite_unmount runs only after the loop has stopped, so
 *               no request is in flight when the pool is released.
 * Crash argument: if the daemon dies, the kernel's mount becomes
 *   unreachable (ENOTCONN) and the pool's flock is released with the
 *   process; every acknowledged request was durable (fuse_ops.c R1), and
 *   the next mount replays the log and releases orphans. `ferrite umount`
 *   detaches the dead mount.
 */
#include <errno.h>
#include <sys/file.h>
#include <fcntl.h>
#include <fuse_lowlevel.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fuse_front.h"

static void say(const struct fuse_front_opts *o, int rc, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void say(const struct fuse_front_opts *o, int rc, const char *fmt, ...)
{
	char msg[1024] = "";
	if (fmt) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(msg, sizeof(msg), fmt, ap);
		va_end(ap);
	}
	if (o->ready)
		o->ready(o->ready_arg, rc, msg);
}

/* libfuse's argument vector: our fixed options, then the user's. */
static int build_args(const struct fuse_front_opts *o, struct fuse_args *args)
{
	char opts[4096];
	/* default_permissions: the kernel checks mode bits (the library checks
	 * again with the same credentials); allow_other when root, so every
	 * user and process can use the mount as with any other file system */
	int n =
	    snprintf(opts, sizeof(opts), "default_permissions,fsname=%s,subtype=ferrite%s%s%s",
		     o->pool, geteuid() == 0 ? ",allow_other" : "",
		     o->fuse_opts && o->fuse_opts[0] ? "," : "", o->fuse_opts ? o->fuse_opts : "");
	if (n < 0 || (size_t)n >= sizeof(opts))
		return -ENAMETOOLONG;
	if (fuse_opt_add_arg(args, "ferrite") || fuse_opt_add_arg(args, "-o") ||
	    fuse_opt_add_arg(args, opts) || (o->debug && fuse_opt_add_arg(args, "-d")))
		return -ENOMEM;
	return 0;
}

static int serve(struct fuse_session *se, const struct fuse_front_opts *o)
{
	struct fuse_loop_config *cfg = fuse_loop_cfg_create();
	if (!cfg)
		return -ENOMEM;
	/* several threads block in the kernel on a request each; one
	 * /dev/fuse descriptor per thread avoids their contention */
	fuse_loop_cfg_set_clone_fd(cfg, 1);
	fuse_loop_cfg_set_max_threads(cfg, (unsigned)o->threads);
	fuse_loop_cfg_set_idle_threads(cfg, (unsigned)(o->threads / 2 > 4 ? o->threads / 2 : 4));
	int rc = fuse_session_loop_mt(se, cfg);
	fuse_loop_cfg_destroy(cfg);
	/* > 0: the signal (SIGINT, SIGTERM, SIGHUP) that ended the loop, a
	 * stop asked for like an unmount: not an error */
	return rc < 0 ? rc : 0;
}

int fuse_front_run(const struct fuse_front_opts *o)
{
	/* shared: another process may change any file at any moment, so the
	 * kernel caches nothing (names, attributes, data) */
	struct ffront ff = {
	    .attr_timeout = o->shared ? 0 : o->attr_timeout,
	    .entry_timeout = o->shared ? 0 : o->entry_timeout,
	    .shared = o->shared,
	};
	struct fuse_args args = FUSE_ARGS_INIT(0, NULL);
	struct fuse_session *se = NULL;
	/* alone, unless shared: the kernel caches what the daemon answers, and
	 * would not see another process's changes */
	struct ferrite_mount_opts mo = {.mode =
					    o->mode | (o->shared ? 0 : FERRITE_MOUNT_EXCLUSIVE)};
	int rc = frees_init(&ff);
	if (rc < 0) {
		say(o, rc, "cannot start: %s", strerror(-rc));
		return rc;
	}
	/* `ferrite umount` knows the daemon is gone when this lock on the
	 * directory under the mount is free (a shared pool's flock is not) */
	int dirlock = open(o->mountpoint, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dirlock >= 0 && flock(dirlock, LOCK_EX | LOCK_NB) != 0) {
		close(dirlock);
		dirlock = -1;
	}
	rc = ferrite_mount(o->pool, &mo, &ff.fs);
	if (rc < 0) {
		say(o, rc, "%s", ferrite_errmsg());
		if (dirlock >= 0)
			close(dirlock);
		frees_fini(&ff);
		return rc;
	}
	struct stat st;
	int rootfd = ferrite_openat(ff.fs, FERRITE_AT_ROOT, "/", O_PATH | O_DIRECTORY, 0);
	rc = rootfd < 0 ? rootfd : ferrite_fstat(ff.fs, rootfd, &st);
	ff.nodes = rc < 0 ? NULL : fnode_table_new();
	if (rc < 0 || !ff.nodes) {
		rc = rc < 0 ? rc : -ENOMEM;
		say(o, rc, "%s: cannot open the root directory: %s", o->pool, strerror(-rc));
		goto out_pool;
	}
	ff.root_ino = (uint64_t)st.st_ino;
	fnode_ref(&ff, ff.root_ino, rootfd);

	rc = build_args(o, &args);
	if (!rc) {
		se = fuse_session_new(&args, &fuse_front_ops, sizeof(fuse_front_ops), &ff);
		ff.se = se;
		if (!se)
			rc = -EINVAL;
	}
	if (rc < 0) {
		say(o, rc, "cannot start the FUSE session (bad -o option?)");
		goto out_nodes;
	}
	if (fuse_set_signal_handlers(se) != 0) {
		rc = -EIO;
		say(o, rc, "cannot install signal handlers");
		goto out_session;
	}
	if (fuse_session_mount(se, o->mountpoint) != 0) {
		rc = -EIO;
		say(o, rc, "%s: the kernel refused the mount (see the message above)",
		    o->mountpoint);
		goto out_signals;
	}
	if (fuse_wire_install(se, &ff) != 0) {
		rc = -EIO;
		say(o, rc, "cannot take over the session's I/O");
		fuse_session_unmount(se);
		goto out_signals;
	}
	say(o, 0, NULL);
	rc = serve(se, o);
	fuse_session_unmount(se);
out_signals:
	fuse_remove_signal_handlers(se);
out_session:
	fuse_session_destroy(se);
out_nodes:
	fuse_opt_free_args(&args);
	if (ff.nodes)
		fnode_table_free(&ff, ff.nodes);
out_pool:
	/* M2: the loop has stopped; unlinked files the kernel still held are
	 * released here (or, after a crash, by the next mount) */
	{
		int urc = ferrite_unmount(ff.fs);
		if (!rc)
			rc = urc;
	}
	if (dirlock >= 0)
		close(dirlock);
	frees_fini(&ff);
	return rc;
}
