/*
 * dirstream.c -- the tier engine's C API: directory streams.
 * Invariants, crash argument and credentials: ns.h.
 */
#include "tier/ns.h"

/* ---- directory streams ---------------------------------------------------------------- */

struct tier_dir {
	ferrite_fs *fs; /* first (util.h) */
	DIR *d;
	int is_root;
	uint64_t root_ino;
	struct tier_dir *next; /* in tier.streams, so unmount can close it */
};

int tier_fdopendir(ferrite_fs *fs, int fd, ferrite_dir **out)
{
	BEGIN(fs);
	if (!out)
		return TIER_END(-EINVAL);
	struct tier_ofile *of = tfd_get(t, fd);
	if (!of)
		return TIER_END(-EBADF);
	int rc = 0;
	int kfd = -1;
	if (!S_ISDIR(of->type)) {
		rc = -ENOTDIR;
	} else {
		char pp[64];
		tier_proc_path(pp, sizeof pp, of->kfd);
		kfd = tsys_openat(AT_FDCWD, pp, O_RDONLY | O_DIRECTORY | O_CLOEXEC, 0);
		if (kfd < 0)
			rc = -errno;
	}
	tfd_put(t, of);
	if (rc)
		return TIER_END(rc);
	struct tier_dir *d = calloc(1, sizeof(*d));
	DIR *dir = d ? tsys_fdopendir(kfd) : NULL;
	if (!dir) {
		close(kfd);
		free(d);
		return TIER_END(-ENOMEM);
	}
	d->fs = fs;
	d->d = dir;
	struct stat a, b;
	if (fstat(kfd, &a) == 0 && fstat(t->root_fd, &b) == 0 && a.st_ino == b.st_ino &&
	    a.st_dev == b.st_dev) {
		d->is_root = 1;
		d->root_ino = (uint64_t)b.st_ino;
	}
	pthread_mutex_lock(&t->streams_lock);
	d->next = t->streams;
	t->streams = d;
	pthread_mutex_unlock(&t->streams_lock);
	*out = (ferrite_dir *)d;
	return TIER_END(0);
}

int tier_opendir(ferrite_fs *fs, const char *path, ferrite_dir **out)
{
	int fd = tier_openat(fs, FERRITE_AT_ROOT, path, O_RDONLY | O_DIRECTORY, 0);
	if (fd < 0)
		return fd;
	int rc = tier_fdopendir(fs, fd, out);
	tfd_close(TIER(fs), fd);
	return rc;
}

int tier_readdir(ferrite_dir *dir, struct ferrite_dirent *ent)
{
	struct tier_dir *d = (struct tier_dir *)dir;
	fr_err_clear();
	if (!d || !ent)
		return TIER_END(-EINVAL);
	for (;;) {
		errno = 0;
		struct dirent *e = tsys_readdir(d->d);
		if (!e)
			return TIER_END(errno ? -errno : 0);
		ent->ino = e->d_ino;
		ent->off = e->d_off;
		ent->type = e->d_type;
		snprintf(ent->name, sizeof ent->name, "%s", e->d_name);
		if (d->is_root && !strcmp(e->d_name, ".."))
			ent->ino = d->root_ino; /* the tree's root is its own parent */
		return TIER_END(1);
	}
}

int64_t tier_telldir(ferrite_dir *dir)
{
	struct tier_dir *d = (struct tier_dir *)dir;
	if (!d)
		return -EINVAL;
	long p = telldir(d->d);
	return p < 0 ? -errno : p;
}

int tier_seekdir(ferrite_dir *dir, int64_t cookie)
{
	struct tier_dir *d = (struct tier_dir *)dir;
	if (!d || cookie < 0)
		return -EINVAL;
	seekdir(d->d, (long)cookie);
	return 0;
}

int tier_rewinddir(ferrite_dir *dir)
{
	struct tier_dir *d = (struct tier_dir *)dir;
	if (!d)
		return -EINVAL;
	rewinddir(d->d);
	return 0;
}

int tier_closedir(ferrite_dir *dir)
{
	struct tier_dir *d = (struct tier_dir *)dir;
	if (!d)
		return -EINVAL;
	struct tier *t = TIER(d->fs);
	pthread_mutex_lock(&t->streams_lock);
	struct tier_dir **pp = &t->streams;
	while (*pp && *pp != d)
		pp = &(*pp)->next;
	if (*pp)
		*pp = d->next;
	pthread_mutex_unlock(&t->streams_lock);
	tsys_closedir(d->d);
	free(d);
	return 0;
}

void tier_streams_close_all(struct tier *t)
{
	while (t->streams)
		tier_closedir((ferrite_dir *)t->streams);
}
