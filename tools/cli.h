/*
 * cli.h -- shared pieces of the `ferrite` command: subcommand entry points,
 * option and usage handling, error lines, sizes, progress display, and the
 * "side" table through which ls/cat/cp reach either the host or a pool.
 * The command is a translator over ferrite.h: it holds no file-system logic.
 * Files: ferrite.c (dispatch), cli_util.c (shared helpers), side.c (host and
 * pool behind one table), cmd_mkfs.c, cmd_info.c, cmd_fsck.c, cmd_files.c
 * (ls, cat), cmd_cp.c (cp), cmd_mount.c (mount, umount: the FUSE daemon of
 * src/fuse), cmd_tune.c (tune), cmd_stat.c (stat, inode), cmd_ns.c (rm,
 * mkdir, mv).
 */
#ifndef FERRITE_CLI_H
#define FERRITE_CLI_H

#include <stdint.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "ferrite.h"

/* Exit statuses shared by the subcommands (fsck returns ferrite_fsck's bits). */
#define CLI_EXIT_OK	    0
#define CLI_EXIT_FAILURE    1  /* an operation failed */
#define CLI_EXIT_USAGE	    2  /* bad command line */
#define CLI_EXIT_FSCK_USAGE 16 /* bad command line, e2fsck's code */

/* Returned by option parsers when the command should go on (any other value
 * is the exit status to stop with, e.g. after --help). */
#define CLI_CONTINUE (-1)

/* Value getopt_long returns for --pool in every subcommand. */
#define CLI_OPT_POOL 0x100

/* ---- subcommands (one file per family) ------------------------------------ */

/* Each takes argv[0] = the subcommand's name and returns the exit status. */
int cmd_mkfs(int argc, char **argv);
int cmd_info(int argc, char **argv);
int cmd_fsck(int argc, char **argv);
int cmd_ls(int argc, char **argv);
int cmd_cat(int argc, char **argv);
int cmd_cp(int argc, char **argv);
int cmd_mount(int argc, char **argv);	  /* cmd_mount.c */
int cmd_umount(int argc, char **argv);	  /* cmd_mount.c */
int cmd_run(int argc, char **argv);	  /* cmd_run.c: the preload shim */
int cmd_crashtest(int argc, char **argv); /* cmd_crashtest.c: runs ferrite-crashtest */
int cmd_bench(int argc, char **argv);	  /* cmd_bench.c: runs ferrite-bench */
int cmd_stats(int argc, char **argv);	  /* cmd_stats.c: a tiered pool's cache */
int cmd_tune(int argc, char **argv);	  /* cmd_tune.c: label, mode, backing directory */
int cmd_stat(int argc, char **argv);	  /* cmd_stat.c: the inode view */
int cmd_inode(int argc, char **argv);	  /* cmd_stat.c: the same by number */
int cmd_rm(int argc, char **argv);	  /* cmd_ns.c */
int cmd_mkdir(int argc, char **argv);	  /* cmd_ns.c */
int cmd_mv(int argc, char **argv);	  /* cmd_ns.c */

/* The tier section of `ferrite stats` and `ferrite info` (cmd_stats.c). */
void tier_info_print_text(const struct ferrite_tier_info *ti);
/* "  \"tier\": {...}" without a trailing comma or newline. */
void tier_info_print_json_fields(const struct ferrite_tier_info *ti);
/* s as a JSON string literal on stdout. */
void json_print_string(const char *s);

/* Mounts POOL, reads ferrite_get_info() into *in and unmounts; prints the
 * error line (as "ferrite CMD: ...") and returns -errno on failure. */
int info_load(const char *cmd, const char *pool, struct ferrite_info *in);
/* After mkfs: when the pool is not backed by 2 MiB pages, why that costs and
 * how to get them (nothing otherwise). */
void cli_hugepage_hint(FILE *out, const struct ferrite_info *info);

/* ---- command line ---------------------------------------------------------- */

/* `ferrite POOL DIR -o OPTS`, as mount.fuse3 runs it for type fuse.ferrite
 * (mount_helper.c): is argv such a call (argv[0] a pool, not a command)? */
int cli_mount_helper_call(int argc, char **argv);
/* Runs it as `ferrite mount`, without fstab's options; the exit status. */
int cli_mount_helper(int argc, char **argv);

/* Pool named before the subcommand (`ferrite --pool P CMD`); NULL = none. */
/* A file NAME that ships with the ferrite command: $ENV if set, else the
 * first of the ferrite binary's directory plus each of rel[] that holds NAME
 * with access MODE. Its real path goes to out; -errno if none. */
int cli_find_beside(const char *env, const char *name, const char *const rel[], int nrel, int mode,
		    char *out, size_t cap);
/* Runs the companion program NAME (found as cli_find_beside does) with
 * argv[1..], $ENV_AS set to "ferrite CMD"; returns 1 with a message naming
 * WHERE it was looked for if it cannot. */
int cli_exec_beside(const char *cmd, const char *env, const char *name, const char *const rel[],
		    int nrel, const char *where, char **argv);
void cli_set_global_pool(const char *pool);
const char *cli_global_pool(void); /* NULL: none given */
/* given if non-NULL, else the global --pool, else ferrite_default_pool(). */
const char *cli_pool(const char *given);
/* A pool path as typed for ls/cat: an optional "pool:" prefix is dropped,
 * and an empty path means the root. */
const char *cli_pool_path(const char *arg);

/* Resets getopt_long for a subcommand (reports errors ourselves). */
void cli_getopt_begin(void);
/* Reports the option getopt_long rejected ('?' or ':') and returns exit_code. */
int cli_bad_option(const char *cmd, int got, char **argv, int exit_code);
/* Prints "ferrite CMD: <message>" and a pointer to --help; returns exit_code. */
int cli_usage_error(const char *cmd, int exit_code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Takes the optional positional POOL of mkfs/info/fsck, args[0..n), and
 * resolves *pool with cli_pool(). Returns CLI_CONTINUE or exit_code. */
int cli_take_pool_operand(const char *cmd, int n, char **args, const char **pool, int exit_code);

/* ---- errors ---------------------------------------------------------------- */

/* Message for a failed ferrite call: ferrite_errmsg(), else strerror(-rc). */
const char *cli_api_msg(int rc);
/* Prints the one-line error "ferrite CMD: PREFIXSUBJECT: MSG" (newlines in
 * MSG become spaces; a "SUBJECT: " that MSG starts with is not repeated). */
void cli_fail(const char *cmd, const char *prefix, const char *subject, const char *msg);
/* cli_fail() with the message of a failed ferrite call. */
void cli_error(const char *cmd, const char *subject, int rc);
/* The one line for a pool that does not exist (the library says the same). */
void cli_no_pool(const char *cmd, const char *pool);

/* Mounts POOL; on failure prints the error line and returns -errno. */
int cli_mount(const char *cmd, const char *pool, ferrite_fs **fs);
/* Unmounts; on failure prints the error line and returns -errno. */
int cli_unmount(const char *cmd, const char *pool, ferrite_fs *fs);

/* ---- sizes and modes -------------------------------------------------------- */

/* Parses "4096", "64K", "512M", "1G", "2T" (binary; "KiB"/"KB" also taken). */
int cli_parse_size(const char *text, uint64_t *bytes);
/* "1.5 GiB" style; buf needs 32 bytes. Returns buf. */
const char *cli_format_size(uint64_t bytes, char *buf, size_t len);
int cli_parse_mode(const char *text, int *mode);
const char *cli_mode_name(int mode);

/* ---- progress --------------------------------------------------------------- */

/* A percentage on stderr: redrawn in place on a TTY at every percent; else a
 * line per 10 %, and between them a line for a new percentage once 30 s
 * passed since the last (a large pool on a log). */
struct cli_progress {
	const char *label;
	int tty;
	int shown;	  /* last percentage printed; -1 none */
	double last_line; /* not a TTY: when the last line was printed */
};

void cli_progress_begin(struct cli_progress *p, const char *label);
/* Matches the progress callback of ferrite_mkfs() and ferrite_fsck(). */
void cli_progress_update(void *arg, uint64_t done, uint64_t total);
/* Erases an in-place line so other output can be printed. */
void cli_progress_clear(struct cli_progress *p);
/* Ends the line on a TTY. */
void cli_progress_end(struct cli_progress *p);

/* ---- ls, cat and cp (cmd_files.c) -------------------------------------------- */

#define CLI_CHUNK (1u << 20) /* cat and cp stream in 1 MiB chunks */

struct side;

struct files_args {
	const char *pool;
	int longfmt, all, recursive; /* -l, -a, -R/-r */
	int numeric;		     /* ls -n: numeric owner and group */
	int n;			     /* operands */
	char **args;
};

/* Parses the options of ls/cat/cp (shortopts says which apply) and resolves
 * the pool. Returns CLI_CONTINUE or the exit status. */
int files_parse(const char *cmd, const char *shortopts, const char *usage, int argc, char **argv,
		struct files_args *a);
/* Mounts POOL, runs fn over it (fn returns nonzero if anything failed),
 * unmounts. Returns the exit status. */
int files_run(const char *cmd, const char *pool, int (*fn)(const struct side *pool, void *arg),
	      void *arg);

/* ---- walking trees (ls -R, cp -r) ---------------------------------------------- */

#define CLI_MAX_DEPTH 1024 /* directories below an operand that a walk enters */

/* A directory a walk is in, and the ones it is inside. A walk refuses to
 * enter a directory that is also one of its ancestors (a hard-linked
 * directory loop, which only a damaged or crafted pool holds) or that lies
 * deeper than CLI_MAX_DEPTH, so neither recurses without end. */
struct cli_walk {
	dev_t dev;
	ino_t ino;
	const char *prefix, *path; /* for messages */
	const struct cli_walk *up;
	int depth;
};

/* Fills w for directory PATH (attributes st) below up (NULL at the top).
 * Returns 0, or -ELOOP with the reason in why when it must not be entered. */
int cli_walk_enter(struct cli_walk *w, const struct cli_walk *up, const char *prefix,
		   const char *path, const struct stat *st, char *why, size_t cap);

/* ---- sides: where ls, cat and cp read and write ----------------------------- */

/* One directory entry of a listing. */
struct side_entry {
	char *name;
	unsigned char type; /* DT_* or DT_UNKNOWN */
};

/* A directory listing sorted by name (strcmp). */
struct side_list {
	struct side_entry *v;
	size_t n, cap;
	size_t refused; /* entries left out because their names are not names
			 * (pool side, reported): the command must fail */
};

/* Operations of one side; all return -errno on failure. */
struct side_ops {
	int (*stat)(const struct side *s, const char *path, struct stat *st);
	int (*lstat)(const struct side *s, const char *path, struct stat *st);
	int (*open)(const struct side *s, const char *path, int flags, mode_t mode);
	int (*close)(const struct side *s, int fd);
	ssize_t (*pread)(const struct side *s, int fd, void *buf, size_t n, off_t off);
	ssize_t (*pwrite)(const struct side *s, int fd, const void *buf, size_t n, off_t off);
	off_t (*lseek)(const struct side *s, int fd, off_t off, int whence);
	int (*ftruncate)(const struct side *s, int fd, off_t len);
	int (*fchmod)(const struct side *s, int fd, mode_t mode);
	int (*chmod)(const struct side *s, const char *path, mode_t mode);
	int (*mkdir)(const struct side *s, const char *path, mode_t mode);
	int (*symlink)(const struct side *s, const char *target, const char *path);
	ssize_t (*readlink)(const struct side *s, const char *path, char *buf, size_t size);
	int (*unlink)(const struct side *s, const char *path);
	/* with_dots: include "." and "..". The pool side leaves out (and
	 * reports, counting them in out->refused) entries whose names are
	 * empty, contain '/' or NUL, a second "." or "..", or a name already
	 * listed: a damaged or crafted pool must not make ls or cp leave the
	 * directory they work in (src/util/entname.h). */
	int (*list)(const struct side *s, const char *path, int with_dots, struct side_list *out);
	/* message for a failure of this side's last call */
	const char *(*errmsg)(int rc);
};

struct side {
	const struct side_ops *ops;
	ferrite_fs *fs;	    /* pool side only */
	const char *prefix; /* shown before paths in messages: "" or "pool:" */
	const char *cmd;    /* pool side: the command named in its messages */
};

void side_init_host(struct side *s);
void side_init_pool(struct side *s, ferrite_fs *fs, const char *cmd);
void side_list_free(struct side_list *l);
int side_is_dot_name(const char *name); /* "." or ".." */
/* "dir/name" ("/name" under "/"); malloc'ed, NULL when out of memory. */
char *side_path_join(const char *dir, const char *name);
/* Reads a symlink's whole target into a malloc'ed string; -errno on failure. */
int side_readlink_alloc(const struct side *s, const char *path, char **target);

#endif /* FERRITE_CLI_H */
