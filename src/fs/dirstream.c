/*
 * dirstream.c -- directory streams (opendir/readdir/telldir/seekdir).
 *
 * The position is a cookie: 0 before ".", 1 before "..", otherwise the hash
 * of the next entry (dir.c returns entries in hash order). Entries are read
 * a batch at a time under the directory's read lock, so an entry present for
 * the whole life of the stream is returned exactly once however others come
 * and go, and a stream survives the directory growing from a small array to
 * a hashed index.
 *
 * Termination: the cookie strictly increases from one batch to the next
 * (dir_read checks that every bucket it reads serves the cookie, so the next
 * cookie is past it, and that no two entries share a hash); a refill that
 * would not move the position is reported as damage, never retried.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fs/fs.h"

#define BATCH	   64
#define POS_DOT	   0
#define POS_DOTDOT 1
#define POS_END	   ((int64_t)FR_HASH_END)

struct ferrite_dir {
	ferrite_fs *fs; /* first: the C API dispatches on it (util.h) */
	struct vnode *vn;
	int64_t pos;	   /* cookie of the next entry to return */
	int nbuf, ibuf;	   /* buffered entries and the next one to hand out */
	uint64_t buf_next; /* cookie after the buffer */
	struct ferrite_dir *next_stream;
	struct dir_batch_ent buf[BATCH];
	struct dir_batch_ent scratch[BATCH];
};

static int opendir_ino(ferrite_fs *fs, uint64_t ino, ferrite_dir **out);

int pmfs_opendir(ferrite_fs *fs, const char *path, ferrite_dir **out)
{
	fr_err_clear();
	if (!fs || !out)
		return api_end(-EINVAL);
	struct nameidata nd;
	int rc = path_walk(fs, 0, path, LOOKUP_FOLLOW, &nd);
	return api_end(rc ? rc : opendir_ino(fs, nd.ino, out));
}

int pmfs_fdopendir(ferrite_fs *fs, int fd, ferrite_dir **out)
{
	fr_err_clear();
	if (!fs || !out)
		return api_end(-EINVAL);
	struct ofile *of = fd_get(fs, fd);
	if (!of)
		return api_end(-EBADF);
	int rc = (of->f.flags & O_PATH) ? -EBADF : opendir_ino(fs, of->vn->ino, out);
	of_put(fs, of);
	return api_end(rc);
}

static int opendir_ino(ferrite_fs *fs, uint64_t ino, ferrite_dir **out)
{
	struct fr_inode *ip = ino_ptr(fs, ino);
	int rc;
	if (!S_ISDIR(ip->i_mode))
		return -ENOTDIR;
	rc = perm_check(cred_get(), NULL, ip, 4);
	if (rc)
		return rc;
	ferrite_dir *d = calloc(1, sizeof(*d));
	if (!d)
		return -ENOMEM;
	pthread_rwlock_t *lk = ino_lock(fs, ino);
	pthread_rwlock_rdlock(lk);
	/* A removed directory someone holds open still lists (as empty). */
	if (ip->i_nlink > 0 || vn_is_open(fs, ino))
		d->vn = vn_get(fs, ino, ip->i_generation);
	pthread_rwlock_unlock(lk);
	if (!d->vn) {
		free(d);
		return -ENOENT;
	}
	d->fs = fs;
	pthread_mutex_lock(&fs->dir_lock);
	d->next_stream = fs->streams;
	fs->streams = d;
	pthread_mutex_unlock(&fs->dir_lock);
	*out = d;
	return 0;
}

static int refill(ferrite_dir *d)
{
	ferrite_fs *fs = d->fs;
	uint64_t ino = d->vn->ino;
	struct fr_inode *ip = ino_ptr(fs, ino);
	pthread_rwlock_t *lk = ino_lock(fs, ino);
	pthread_rwlock_rdlock(lk);
	int n = 0;
	uint64_t next = FR_HASH_END;
	if (ip->i_nlink > 0)
		n = dir_read(fs, ip, (uint64_t)d->pos, d->buf, BATCH, &next, d->scratch);
	pthread_rwlock_unlock(lk);
	if (n < 0)
		return n;
	d->nbuf = n;
	d->ibuf = 0;
	d->buf_next = next;
	return 0;
}

int pmfs_readdir(ferrite_dir *d, struct ferrite_dirent *ent)
{
	fr_err_clear();
	if (!d || !ent)
		return api_end(-EINVAL);
	ferrite_fs *fs = d->fs;
	uint64_t ino = d->vn->ino;
	struct fr_inode *ip = ino_ptr(fs, ino);
	if (d->pos == POS_DOT || d->pos == POS_DOTDOT) {
		if (ip->i_nlink == 0)
			return 0; /* removed: no entries at all */
		int dot = d->pos == POS_DOT;
		ent->ino = dot ? ino : (ino == fs->root_ino ? ino : ip->i_parent);
		ent->type = DT_DIR;
		strcpy(ent->name, dot ? "." : "..");
		d->pos = dot ? POS_DOTDOT : (int64_t)FR_HASH_MIN;
		ent->off = d->pos;
		d->nbuf = d->ibuf = 0;
		return 1;
	}
	while (d->ibuf >= d->nbuf) {
		if (d->pos >= POS_END)
			return 0;
		int rc = refill(d);
		if (rc)
			return api_end(rc);
		if (d->nbuf)
			break;
		/* An empty stretch of buckets: go on after it. dir_read's cookie
		 * only grows (dir.c); a stream that would not move is damage. */
		if (d->buf_next <= (uint64_t)d->pos)
			return api_end(fr_err(-EUCLEAN,
					      "directory %llu: readdir does not advance (run "
					      "`ferrite fsck`)",
					      (unsigned long long)ino));
		d->pos = (int64_t)d->buf_next;
	}
	struct dir_batch_ent *e = &d->buf[d->ibuf++];
	ent->ino = e->ino;
	ent->type = e->type;
	memcpy(ent->name, e->name, (size_t)e->len + 1);
	d->pos = d->ibuf < d->nbuf ? (int64_t)d->buf[d->ibuf].hash : (int64_t)d->buf_next;
	ent->off = d->pos;
	return 1;
}

int64_t pmfs_telldir(ferrite_dir *d)
{
	fr_err_clear();
	return d ? d->pos : api_end(-EINVAL);
}

int pmfs_seekdir(ferrite_dir *d, int64_t cookie)
{
	fr_err_clear();
	if (!d || cookie < 0)
		return api_end(-EINVAL);
	d->pos = cookie;
	d->nbuf = d->ibuf = 0;
	return 0;
}

int pmfs_rewinddir(ferrite_dir *d)
{
	return pmfs_seekdir(d, 0);
}

int pmfs_closedir(ferrite_dir *d)
{
	fr_err_clear();
	if (!d)
		return api_end(-EINVAL);
	ferrite_fs *fs = d->fs;
	pthread_mutex_lock(&fs->dir_lock);
	ferrite_dir **pp = &fs->streams;
	while (*pp && *pp != d)
		pp = &(*pp)->next_stream;
	if (*pp)
		*pp = d->next_stream;
	pthread_mutex_unlock(&fs->dir_lock);
	vn_put(fs, d->vn);
	free(d);
	return 0;
}

void dirstream_close_all(ferrite_fs *fs)
{
	while (fs->streams)
		pmfs_closedir(fs->streams);
}
