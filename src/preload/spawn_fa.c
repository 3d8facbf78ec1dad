/*
 * spawn_fa.c -- posix_spawn file actions that name pool files: a dup2 of a
 * pool descriptor onto stdout, an open of a pool path, a chdir into the pool.
 *
 * glibc runs file actions in the child before its exec, where the shim
 * cannot act: the kernel would dup2 a placeholder (S1), or fail to open a
 * path it cannot see. So the shim keeps, beside each actions object, the
 * list of actions the program added (the add functions are wrapped), and at
 * spawn time plays them here, in order, on a view of what the child will
 * hold: pool descriptors by number and the working directory. Actions on
 * the pool are done here (an open) or only recorded (a chdir); what the
 * kernel must do in the child is a new actions object -- the program's own
 * actions, with a pool open turned into a dup2 of a placeholder opened here.
 * The view becomes the state an exec passes (exec.c), so the child's shim
 * finds each descriptor at its number, on the same open file description.
 *
 * Invariants: F1 a spawn uses the recorded list only if it has as many
 *               actions as glibc's object (__used): an object filled some
 *               other way goes to glibc as it is (placeholders, as before);
 *             F2 an action's order is kept: the view after action k is what
 *               the child holds after it (a later dup2 over a pool
 *               descriptor drops it, a close closes it);
 *             F3 an open done here for the child lands above every number
 *               the actions name, so no action of the program's can
 *               disturb it before the dup2 that puts it in place;
 *             F4 a pool action that fails fails the spawn with its errno and
 *               no child, as glibc reports a failed action.
 * Limits: the program's path is resolved before the actions run (a relative
 *   program after a chdir action is looked up from the spawner's directory).
 */
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "preload/shim.h"

enum act_kind { ACT_CLOSE, ACT_DUP2, ACT_OPEN, ACT_CHDIR, ACT_FCHDIR, ACT_CLOSEFROM };

struct fa_act {
	enum act_kind kind;
	int fd, newfd; /* newfd: dup2's target */
	int oflag;
	mode_t mode;
	char *path; /* open, chdir */
};

struct fa_record {
	const posix_spawn_file_actions_t *fa;
	struct fa_act *acts;
	int n, cap;
	int broken; /* an action could not be recorded (F1 then fails) */
	struct fa_record *next;
};

static pthread_mutex_t rec_lock = PTHREAD_MUTEX_INITIALIZER;
static struct fa_record *records;

static struct fa_record **rec_slot(const posix_spawn_file_actions_t *fa)
{
	struct fa_record **r = &records;
	while (*r && (*r)->fa != fa)
		r = &(*r)->next;
	return r;
}

static void rec_free(struct fa_record *r)
{
	for (int i = 0; i < r->n; i++)
		free(r->acts[i].path);
	free(r->acts);
	free(r);
}

static void rec_forget(const posix_spawn_file_actions_t *fa)
{
	pthread_mutex_lock(&rec_lock);
	struct fa_record **s = rec_slot(fa), *r = *s;
	if (r)
		*s = r->next;
	pthread_mutex_unlock(&rec_lock);
	if (r)
		rec_free(r);
}

static void rec_add(const posix_spawn_file_actions_t *fa, struct fa_act a)
{
	pthread_mutex_lock(&rec_lock);
	struct fa_record **s = rec_slot(fa), *r = *s;
	if (!r && (r = calloc(1, sizeof(*r)))) {
		r->fa = fa;
		*s = r;
	}
	if (r && r->n == r->cap) {
		int cap = r->cap ? 2 * r->cap : 8;
		struct fa_act *na = realloc(r->acts, (size_t)cap * sizeof(*na));
		if (na) {
			r->acts = na;
			r->cap = cap;
		}
	}
	if (r && a.path && !(a.path = strdup(a.path)))
		r->broken = 1;
	if (r && r->n < r->cap && !r->broken)
		r->acts[r->n++] = a;
	else if (r) {
		r->broken = 1;
		free(a.path);
	}
	pthread_mutex_unlock(&rec_lock);
}

/* ---- the wrapped add functions ------------------------------------------------ */

SH_EXPORT int posix_spawn_file_actions_init(posix_spawn_file_actions_t *fa)
{
	rec_forget(fa); /* the address may have held an object never destroyed */
	return REAL(posix_spawn_file_actions_init)(fa);
}

SH_EXPORT int posix_spawn_file_actions_destroy(posix_spawn_file_actions_t *fa)
{
	rec_forget(fa);
	return REAL(posix_spawn_file_actions_destroy)(fa);
}

SH_EXPORT int posix_spawn_file_actions_addclose(posix_spawn_file_actions_t *fa, int fd)
{
	int rc = REAL(posix_spawn_file_actions_addclose)(fa, fd);
	if (!rc)
		rec_add(fa, (struct fa_act){.kind = ACT_CLOSE, .fd = fd});
	return rc;
}

SH_EXPORT int posix_spawn_file_actions_adddup2(posix_spawn_file_actions_t *fa, int fd, int newfd)
{
	int rc = REAL(posix_spawn_file_actions_adddup2)(fa, fd, newfd);
	if (!rc)
		rec_add(fa, (struct fa_act){.kind = ACT_DUP2, .fd = fd, .newfd = newfd});
	return rc;
}

SH_EXPORT int posix_spawn_file_actions_addopen(posix_spawn_file_actions_t *fa, int fd,
					       const char *path, int oflag, mode_t mode)
{
	int rc = REAL(posix_spawn_file_actions_addopen)(fa, fd, path, oflag, mode);
	if (!rc)
		rec_add(fa, (struct fa_act){.kind = ACT_OPEN,
					    .fd = fd,
					    .oflag = oflag,
					    .mode = mode,
					    .path = (char *)path});
	return rc;
}

SH_EXPORT int posix_spawn_file_actions_addchdir_np(posix_spawn_file_actions_t *fa, const char *path)
{
	int rc = REAL(posix_spawn_file_actions_addchdir_np)(fa, path);
	if (!rc)
		rec_add(fa, (struct fa_act){.kind = ACT_CHDIR, .fd = -1, .path = (char *)path});
	return rc;
}

SH_EXPORT int posix_spawn_file_actions_addfchdir_np(posix_spawn_file_actions_t *fa, int fd)
{
	int rc = REAL(posix_spawn_file_actions_addfchdir_np)(fa, fd);
	if (!rc)
		rec_add(fa, (struct fa_act){.kind = ACT_FCHDIR, .fd = fd});
	return rc;
}

SH_EXPORT int posix_spawn_file_actions_addclosefrom_np(posix_spawn_file_actions_t *fa, int from)
{
	int rc = REAL(posix_spawn_file_actions_addclosefrom_np)(fa, from);
	if (!rc)
		rec_add(fa, (struct fa_act){.kind = ACT_CLOSEFROM, .fd = from});
	return rc;
}

/* ---- the view ------------------------------------------------------------------- */

static int view_find(const struct sh_view *v, int fd)
{
	for (int i = 0; i < v->n; i++)
		if (v->fds[i].fd == fd)
			return i;
	return -1;
}

static void view_drop(struct sh_view *v, int fd)
{
	int i = view_find(v, fd);
	if (i < 0)
		return;
	sh_file_put(v->fds[i].f);
	v->fds[i] = v->fds[--v->n];
}

/* fd names f (the view takes a reference of its own); 0 or -ENOMEM. */
static int view_set(struct sh_view *v, int fd, struct sh_file *f, int inherit)
{
	__atomic_add_fetch(&f->refs, 1, __ATOMIC_RELAXED);
	view_drop(v, fd);
	if (v->n == v->cap) {
		int cap = v->cap ? 2 * v->cap : 16;
		struct sh_view_fd *nf = realloc(v->fds, (size_t)cap * sizeof(*nf));
		if (!nf) {
			sh_file_put(f);
			return -ENOMEM;
		}
		v->fds = nf;
		v->cap = cap;
	}
	v->fds[v->n++] = (struct sh_view_fd){fd, f, inherit};
	return 0;
}

static void note_fd(int fd, struct sh_file *f, void *arg)
{
	(void)f;
	struct sh_view *v = arg;
	if (v->n < v->cap)
		v->fds[v->n++].fd = fd;
}

/* The spawner's pool descriptors, each with a reference, as the child
 * starts with them. */
static int view_init(struct sh_view *v)
{
	memset(v, 0, sizeof(*v));
	v->cap = 64;
	for (;;) {
		v->fds = calloc((size_t)v->cap, sizeof(*v->fds));
		if (!v->fds)
			return -ENOMEM;
		v->n = 0;
		sh_for_each(note_fd, v);
		if (v->n < v->cap)
			break;
		free(v->fds);
		v->cap *= 4;
	}
	int k = 0;
	for (int i = 0; i < v->n; i++) {
		int fd = v->fds[i].fd;
		struct sh_file *f = sh_file_get(fd); /* closed meanwhile: not passed */
		int fl = REAL(fcntl)(fd, F_GETFD);
		if (f)
			v->fds[k++] = (struct sh_view_fd){fd, f, fl >= 0 && !(fl & FD_CLOEXEC)};
	}
	v->n = k;
	return 0;
}

/* The path an action names, as the child would resolve it after the
 * actions before it: NULL if it is the kernel's for sure (relative to a
 * host directory a chdir action chose). */
static const char *child_path(const struct sh_view *v, const char *path, char *buf, size_t cap)
{
	if (path[0] == '/' || v->cwd == SH_CWD_SAME)
		return path;
	if (v->cwd == SH_CWD_HOST)
		return NULL;
	char vis[PATH_MAX];
	if (sh_visible(v->cwd_path, vis, sizeof(vis)) ||
	    snprintf(buf, cap, "%s/%s", vis, path) >= (int)cap)
		return NULL;
	return buf;
}

/* What the kernel still does in the child, in order (paths borrowed from
 * the record, which outlives the plan's use of them). */
static int kop(struct sh_spawn_plan *p, struct fa_act a)
{
	if (p->nk == p->kcap) {
		int cap = p->kcap ? 2 * p->kcap : 16;
		struct fa_act *na = realloc(p->kops, (size_t)cap * sizeof(*na));
		if (!na)
			return -ENOMEM;
		p->kops = na;
		p->kcap = cap;
	}
	p->kops[p->nk++] = a;
	return 0;
}

/* An open for the child: done here, F3 for its number. */
static int play_open(struct sh_spawn_plan *p, const struct fa_act *a, int above, int *handled)
{
	char buf[PATH_MAX];
	const char *path = child_path(&p->view, a->path, buf, sizeof(buf));
	*handled = 0;
	if (!path)
		return 0;
	int q = sh_open_common(AT_FDCWD, &path, a->oflag | O_CLOEXEC, a->mode);
	if (q == SH_KERNEL)
		return 0;
	if (q < 0)
		return q;
	struct sh_file *f = sh_file_get(q);
	int h = f ? sh_dup_to(f, above, 1, -1) : -EBADF;
	close(q);
	if (h < 0) {
		if (f)
			sh_file_put(f);
		return h;
	}
	p->opened[p->nopened++] = h;
	int rc = view_set(&p->view, a->fd, f, !(a->oflag & O_CLOEXEC));
	sh_file_put(f);
	if (!rc)
		rc = kop(p, (struct fa_act){.kind = ACT_DUP2, .fd = h, .newfd = a->fd});
	*handled = 1;
	return rc;
}

static int play_chdir(struct sh_spawn_plan *p, const struct fa_act *a, int *handled)
{
	char buf[PATH_MAX];
	const char *path = child_path(&p->view, a->path, buf, sizeof(buf));
	*handled = 0;
	if (!path)
		return 0;
	int ffd, c = sh_dir_open(&path, p->view.cwd_path, sizeof(p->view.cwd_path), &ffd);
	if (c <= 0)
		return c;
	SH_CALL(ferrite_close(sh_fs_if_mounted(), ffd));
	p->view.cwd = SH_CWD_POOL;
	*handled = 1;
	return 0;
}

static int play_fchdir(struct sh_spawn_plan *p, const struct fa_act *a, int *handled)
{
	int i = view_find(&p->view, a->fd);
	*handled = i >= 0;
	if (i < 0)
		return 0;
	struct sh_file *f = p->view.fds[i].f;
	ferrite_fs *fs = sh_fs_if_mounted();
	struct stat st;
	int rc = fs ? SH_CALL(ferrite_fstat(fs, f->ffd, &st)) : -EBADF;
	if (!rc && !S_ISDIR(st.st_mode))
		rc = -ENOTDIR;
	if (!rc)
		rc = SH_CALL(ferrite_faccessat(fs, f->ffd, "", X_OK, AT_EMPTY_PATH));
	if (!rc)
		snprintf(p->view.cwd_path, sizeof(p->view.cwd_path), "%s", f->path ? f->path : "/");
	p->view.cwd = SH_CWD_POOL;
	return rc;
}

/* One action (F2): on the view, and what the kernel still has to do. */
static int play(struct sh_spawn_plan *p, const struct fa_act *a, int above)
{
	struct sh_view *v = &p->view;
	int handled = 0, rc = 0, i;
	switch (a->kind) {
	case ACT_CLOSE:
		view_drop(v, a->fd);
		break;
	case ACT_DUP2:
		i = view_find(v, a->fd);
		if (i >= 0 && a->fd == a->newfd)
			v->fds[i].inherit = 1; /* glibc clears close-on-exec then */
		else if (i >= 0)
			rc = view_set(v, a->newfd, v->fds[i].f, 1);
		else
			view_drop(v, a->newfd);
		break;
	case ACT_OPEN:
		rc = play_open(p, a, above, &handled);
		if (!rc && !handled)
			view_drop(v, a->fd);
		break;
	case ACT_CHDIR:
		rc = play_chdir(p, a, &handled);
		if (!rc && !handled)
			v->cwd = SH_CWD_HOST;
		break;
	case ACT_FCHDIR:
		rc = play_fchdir(p, a, &handled);
		if (!rc && !handled)
			v->cwd = SH_CWD_HOST;
		break;
	case ACT_CLOSEFROM:
		for (i = v->n - 1; i >= 0; i--)
			if (v->fds[i].fd >= a->fd)
				view_drop(v, v->fds[i].fd);
		break;
	}
	return rc || handled ? rc : kop(p, *a);
}

/* A copy of fa's record, if it is complete (F1). */
static struct fa_record *rec_copy(const posix_spawn_file_actions_t *fa)
{
	struct fa_record *c = NULL;
	pthread_mutex_lock(&rec_lock);
	struct fa_record *r = *rec_slot(fa);
	if (r && !r->broken && r->n == fa->__used && r->n > 0 && (c = calloc(1, sizeof(*c)))) {
		c->acts = calloc((size_t)r->n, sizeof(*c->acts));
		for (int i = 0; c->acts && i < r->n; i++) {
			c->acts[i] = r->acts[i];
			c->acts[i].path = r->acts[i].path ? strdup(r->acts[i].path) : NULL;
			c->broken |= r->acts[i].path && !c->acts[i].path;
			c->n = i + 1;
		}
		if (!c->acts || c->broken) {
			rec_free(c);
			c = NULL;
		}
	}
	pthread_mutex_unlock(&rec_lock);
	return c;
}

int sh_spawn_plan(const posix_spawn_file_actions_t *fa, struct sh_spawn_plan *p)
{
	memset(p, 0, sizeof(*p));
	struct fa_record *r = fa && !sh_depth ? rec_copy(fa) : NULL;
	if (!r)
		return 0;
	p->rec = r;
	int above = 3; /* F3 */
	for (int i = 0; i < r->n; i++) {
		const struct fa_act *a = &r->acts[i];
		int top = a->fd > a->newfd ? a->fd : a->newfd;
		above = top >= above ? top + 1 : above;
	}
	int rc = view_init(&p->view);
	if (!rc && !(p->opened = calloc((size_t)r->n, sizeof(int))))
		rc = -ENOMEM;
	for (int i = 0; !rc && i < r->n; i++)
		rc = play(p, &r->acts[i], above);
	if (rc) {
		sh_spawn_plan_done(p);
		return rc;
	}
	return 1;
}

/* closefrom(from) except the numbers in keep: close [from, k) one by one
 * below each kept k (glibc ignores a close of a number not open), then on
 * from k + 1. */
static int closefrom_keeping(posix_spawn_file_actions_t *k, int from, const int *keep, int nkeep)
{
	for (;;) {
		int next = -1;
		for (int i = 0; i < nkeep; i++)
			if (keep[i] >= from && (next < 0 || keep[i] < next))
				next = keep[i];
		if (next < 0)
			return REAL(posix_spawn_file_actions_addclosefrom_np)(k, from);
		if (next - from > 4096)
			return EMFILE;
		for (int fd = from; fd < next; fd++)
			if (REAL(posix_spawn_file_actions_addclose)(k, fd))
				return ENOMEM;
		from = next + 1;
	}
}

int sh_spawn_plan_actions(struct sh_spawn_plan *p, const int *keep, int nkeep)
{
	posix_spawn_file_actions_t *k = &p->fa;
	REAL(posix_spawn_file_actions_init)(k); /* zeroes it: cannot fail */
	p->fa_ready = 1;
	int rc = 0;
	for (int i = 0; !rc && i < p->nk; i++) {
		const struct fa_act *a = &p->kops[i];
		switch (a->kind) {
		case ACT_CLOSE:
			rc = REAL(posix_spawn_file_actions_addclose)(k, a->fd);
			break;
		case ACT_DUP2:
			rc = REAL(posix_spawn_file_actions_adddup2)(k, a->fd, a->newfd);
			break;
		case ACT_OPEN:
			rc = REAL(posix_spawn_file_actions_addopen)(k, a->fd, a->path, a->oflag,
								    a->mode);
			break;
		case ACT_CHDIR:
			rc = REAL(posix_spawn_file_actions_addchdir_np)(k, a->path);
			break;
		case ACT_FCHDIR:
			rc = REAL(posix_spawn_file_actions_addfchdir_np)(k, a->fd);
			break;
		case ACT_CLOSEFROM:
			rc = closefrom_keeping(k, a->fd, keep, nkeep);
			break;
		}
	}
	return -rc;
}

void sh_spawn_plan_done(struct sh_spawn_plan *p)
{
	for (int i = 0; i < p->nopened; i++)
		close(p->opened[i]);
	free(p->opened);
	for (int i = 0; i < p->view.n; i++)
		sh_file_put(p->view.fds[i].f);
	free(p->view.fds);
	free(p->kops);
	if (p->rec)
		rec_free(p->rec);
	if (p->fa_ready)
		REAL(posix_spawn_file_actions_destroy)(&p->fa);
	memset(p, 0, sizeof(*p));
}
