/*
 * fdtable.c -- the descriptor table both engines use: numbers to open file
 * descriptions, the lowest free number first (V4), descriptions kept alive
 * by references (V3). Invariants V3, V4: vfs.h. Nothing persistent.
 * Locking: the table's lock guards the array; a description's position has
 * its own lock; refs is atomic.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>

#include "space/space.h"
#include "util/util.h"
#include "vfs/vfs.h"

#define VFS_FD_MAX (1 << 20)

void vfs_file_init(struct vfs_file *f, int flags)
{
	f->flags = flags;
	f->refs = 1;
	f->pos = 0;
	f->lock_id = 0;
	f->sd = NULL;
	pthread_mutex_init(&f->pos_lock, NULL);
}

int64_t vfs_file_pos(const struct vfs_file *f)
{
	return f->sd ? f->sd->pos : f->pos;
}

void vfs_file_set_pos(struct vfs_file *f, int64_t pos)
{
	if (f->sd)
		f->sd->pos = pos;
	f->pos = pos;
}

#define STATUS_FLAGS (O_APPEND | O_NONBLOCK)

int vfs_file_flags(const struct vfs_file *f)
{
	int fl = __atomic_load_n(&f->flags, __ATOMIC_RELAXED);
	return f->sd ? (fl & ~STATUS_FLAGS) | (f->sd->flags & STATUS_FLAGS) : fl;
}

void vfs_file_set_flags(struct vfs_file *f, int flags)
{
	__atomic_store_n(&f->flags, flags, __ATOMIC_RELAXED);
	if (f->sd)
		f->sd->flags = flags;
}

uint64_t vfs_file_lock_id(struct vfs_file *f, uint64_t *next_id)
{
	if (!f->lock_id && f->sd)
		f->lock_id = f->sd->lock_id; /* set by another holder */
	if (!f->lock_id) {
		f->lock_id = ++*next_id;
		if (f->sd)
			f->sd->lock_id = f->lock_id;
	}
	return f->lock_id;
}

int vfs_file_unref(struct vfs_file *f)
{
	return __atomic_sub_fetch(&f->refs, 1, __ATOMIC_ACQ_REL) == 0;
}

void vfs_file_fini(struct vfs_file *f)
{
	pthread_mutex_destroy(&f->pos_lock);
}

void vfs_fdt_init(struct vfs_fdtable *t)
{
	memset(t, 0, sizeof(*t));
	pthread_mutex_init(&t->lock, NULL);
}

void vfs_fdt_fini(struct vfs_fdtable *t)
{
	free(t->fds);
	t->fds = NULL;
	t->cap = t->count = t->free_hint = 0;
	pthread_mutex_destroy(&t->lock);
}

int vfs_fd_install(struct vfs_fdtable *t, struct vfs_file *f)
{
	pthread_mutex_lock(&t->lock);
	int fd = -1;
	for (int i = t->free_hint; i < t->cap; i++)
		if (!t->fds[i]) {
			fd = i;
			break;
		}
	if (fd < 0) {
		int ncap = t->cap ? t->cap * 2 : 64;
		if (ncap > VFS_FD_MAX) {
			pthread_mutex_unlock(&t->lock);
			return fr_err(-EMFILE, "too many open ferrite descriptors");
		}
		struct vfs_file **n = realloc(t->fds, (size_t)ncap * sizeof(*n));
		if (!n) {
			pthread_mutex_unlock(&t->lock);
			return -ENOMEM;
		}
		memset(n + t->cap, 0, (size_t)(ncap - t->cap) * sizeof(*n));
		fd = t->cap;
		t->fds = n;
		t->cap = ncap;
	}
	t->fds[fd] = f;
	t->count++;
	t->free_hint = fd + 1;
	pthread_mutex_unlock(&t->lock);
	return fd;
}

struct vfs_file *vfs_fd_get(struct vfs_fdtable *t, int fd)
{
	pthread_mutex_lock(&t->lock);
	struct vfs_file *f = fd >= 0 && fd < t->cap ? t->fds[fd] : NULL;
	if (f)
		__atomic_add_fetch(&f->refs, 1, __ATOMIC_RELAXED);
	pthread_mutex_unlock(&t->lock);
	return f;
}

struct vfs_file *vfs_fd_take(struct vfs_fdtable *t, int fd)
{
	pthread_mutex_lock(&t->lock);
	struct vfs_file *f = fd >= 0 && fd < t->cap ? t->fds[fd] : NULL;
	if (f) {
		t->fds[fd] = NULL;
		t->count--;
		if (fd < t->free_hint)
			t->free_hint = fd;
	}
	pthread_mutex_unlock(&t->lock);
	return f;
}

int vfs_fd_limit(struct vfs_fdtable *t)
{
	pthread_mutex_lock(&t->lock);
	int n = t->cap;
	while (n > 0 && !t->fds[n - 1])
		n--;
	pthread_mutex_unlock(&t->lock);
	return n;
}
