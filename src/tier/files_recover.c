/*
 * files_recover.c -- file records after a crash (files.c F1-F5): settling
 * records a crash left DYING or ORPHAN, making lost files again, and, as a
 * last resort, finding backing files by inode number.
 * Crash argument: each record's state change is persisted before the
 * backing file system is asked (F3); recovery may itself be interrupted and
 * runs again from the states it left.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tier/sys.h"
#include "tier/tier.h"

/* ---- after a crash ------------------------------------------------------------------- */

static int lost_found_fd(struct tier *t)
{
	if (tsys_mkdirat(t->root_fd, ".ferrite-lost+found", 0700) != 0 && errno != EEXIST)
		return -errno;
	int fd =
	    tsys_openat(t->root_fd, ".ferrite-lost+found", O_PATH | O_DIRECTORY | O_CLOEXEC, 0);
	return fd < 0 ? -errno : fd;
}

/* A LIVE record whose file cannot be found: its data was acknowledged, so
 * the file is made again at its path if that is free, else in
 * .ferrite-lost+found (named after the record). */
static int rec_remake(struct tier *t, uint32_t fid, struct tier_file *tf)
{
	int held = tier_writeback_held(t, "making a lost file again");
	if (held)
		return held;
	struct tier_rec *r = &t->recs[fid];
	char path[TIER_PATH_MAX + 64];
	int fd = -1;
	if (tier_rec_path_ok(r)) {
		memcpy(path, r->r_path, r->r_pathlen);
		path[r->r_pathlen] = 0;
		fd = tier_open_beneath(t->root_fd, path, O_RDWR | O_CREAT | O_EXCL, 0600);
	}
	if (fd < 0) {
		int lf = lost_found_fd(t);
		if (lf < 0)
			return lf;
		snprintf(path, sizeof path, ".ferrite-lost+found/file-%u-%llu", fid,
			 (unsigned long long)r->r_ino);
		fd = tsys_openat(t->root_fd, path,
				 O_RDWR | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
		close(lf);
		if (fd < 0)
			return -errno;
		fprintf(stderr,
			"ferrite: a file with data in the cache was not found in %s; "
			"its data is in %s/%s\n",
			t->backing, t->backing, path);
	}
	struct stat st;
	if (fstat(fd, &st) != 0) {
		close(fd);
		return -errno;
	}
	pthread_mutex_lock(&t->files_lock);
	tf_hash_remove(t, tf); /* by identity: another record may share the number */
	tf->ino = (uint64_t)st.st_ino;
	tf_hash_insert(t, tf);
	pthread_mutex_unlock(&t->files_lock);
	pm_store8(&r->r_ino, (uint64_t)st.st_ino);
	pm_store8(&r->r_btime, (uint64_t)tier_btime(fd));
	pm_store4(&r->r_hlen, 0);
	pm_flush(r, 128);
	tier_rec_store_path(r, path);
	pm_store4(&r->r_flags, r->r_flags | REC_META_STALE);
	pm_flush(&r->r_flags, 4);
	pm_fence();
	tf->wfd = fd;
	t->nwfd++;
	/* The new file is empty: what the cache holds clean is now only there
	 * (C1), so it is written back like any dirty chunk. */
	tier_cache_redirty_file(t, tf);
	return 0;
}

/* ---- finding files by inode number (recovery's last resort) ------------------------- */

struct want {
	uint64_t ino;
	int64_t btime;
	uint32_t fid;
	char *found; /* relative path, once found */
};

static int want_cmp(const void *a, const void *b)
{
	uint64_t x = ((const struct want *)a)->ino, y = ((const struct want *)b)->ino;
	return x < y ? -1 : x > y;
}

/* The entry of record fid among those wanting inode ino (two records may
 * name one number: a damaged one, or one taken again), NULL if none. */
static struct want *want_of(struct want *w, size_t nw, uint64_t ino, uint32_t fid)
{
	struct want key = {.ino = ino};
	struct want *hit = bsearch(&key, w, nw, sizeof(*w), want_cmp);
	while (hit && hit > w && hit[-1].ino == ino)
		hit--;
	for (; hit && hit < w + nw && hit->ino == ino; hit++)
		if (hit->fid == fid)
			return hit;
	return NULL;
}

/* Walks the tree below dirfd (path rel, same file system) for the wanted
 * inodes; stops when none is left. */
static void walk_for(int dirfd, char *rel, size_t rlen, dev_t dev, struct want *w, size_t nw,
		     size_t *left, int depth)
{
	if (!*left || depth > 512)
		return;
	int fd = dup(dirfd);
	DIR *d = fd >= 0 ? tsys_fdopendir(fd) : NULL;
	if (!d) {
		if (fd >= 0)
			close(fd);
		return;
	}
	struct dirent *e;
	while (*left && (e = tsys_readdir(d))) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		size_t nl = strlen(e->d_name);
		if (rlen + nl + 2 >= 4096)
			continue;
		struct stat st;
		if (tsys_fstatat(dirfd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 ||
		    st.st_dev != dev)
			continue;
		char *end = rel + rlen;
		snprintf(end, 4096 - rlen, "%s%s", rlen ? "/" : "", e->d_name);
		if (S_ISDIR(st.st_mode)) {
			int sub = tsys_openat(dirfd, e->d_name,
					      O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC, 0);
			if (sub >= 0) {
				walk_for(sub, rel, strlen(rel), dev, w, nw, left, depth + 1);
				close(sub);
			}
		} else if (S_ISREG(st.st_mode)) {
			struct want key = {.ino = (uint64_t)st.st_ino};
			struct want *hit = bsearch(&key, w, nw, sizeof(*w), want_cmp);
			if (hit && !hit->found) {
				int f = tsys_openat(dirfd, e->d_name,
						    O_PATH | O_NOFOLLOW | O_CLOEXEC, 0);
				int64_t bt = f >= 0 ? tier_btime(f) : 0;
				if (f >= 0)
					close(f);
				if (!hit->btime || !bt || bt == hit->btime) {
					hit->found = strdup(rel);
					(*left)--;
				}
			}
		}
		*end = 0;
	}
	tsys_closedir(d);
}

/* Records that are LIVE but whose file neither handle nor path finds (a crash
 * between a rename and its record's update): look for their inodes. */
static void find_lost(struct tier *t, struct want *w, size_t nw)
{
	if (!nw)
		return;
	qsort(w, nw, sizeof(*w), want_cmp);
	struct stat st;
	if (fstat(t->root_fd, &st) != 0)
		return;
	char rel[4096] = "";
	size_t left = nw;
	walk_for(t->root_fd, rel, 0, st.st_dev, w, nw, &left, 0);
}

/* The record's path, made that of the file fd names if it is not. */
static void refresh_path(struct tier *t, struct tier_rec *r, int fd)
{
	char rel[4096 + 256];
	if (tier_relpath(t, fd, NULL, rel, sizeof rel) != 0 || strstr(rel, " (deleted)"))
		return;
	size_t n = strlen(rel);
	if (r->r_pathlen == n && tier_rec_path_ok(r) && !memcmp(r->r_path, rel, n))
		return;
	tier_rec_store_path(r, rel);
	pm_fence();
}

int tier_files_recover(struct tier *t)
{
	struct want *w = calloc(t->nrecs, sizeof(*w));
	size_t nw = 0;
	if (!w)
		return -ENOMEM;
	for (int pass = 0; pass < 2; pass++) {
		if (pass == 1) {
			find_lost(t, w, nw);
			if (!nw)
				break;
		}
		for (uint32_t fid = 1; fid < t->nrecs; fid++) {
			struct tier_rec *r = &t->recs[fid];
			struct tier_file *tf = t->files[fid];
			if (r->r_state == REC_FREE || !tf)
				continue;
			int fd = -ENOENT;
			if (pass == 0) {
				fd = tier_rec_open(t, fid, O_PATH);
			} else {
				struct want *hit = want_of(w, nw, r->r_ino, fid);
				if (!hit)
					continue; /* settled in the first pass */
				if (hit->found)
					fd = tsys_openat(t->root_fd, hit->found,
							 O_PATH | O_NOFOLLOW | O_CLOEXEC, 0);
				if (fd < 0)
					fd = -ENOENT;
			}
			struct stat st = {0};
			int present = fd >= 0 && fstat(fd, &st) == 0 && st.st_nlink > 0;
			if (present && r->r_state == REC_LIVE)
				refresh_path(t, r, fd);
			if (fd >= 0)
				close(fd);
			if (!present && pass == 0 && r->r_state == REC_LIVE) {
				w[nw++] = (struct want){r->r_ino, r->r_btime, fid, NULL};
				continue; /* the second pass looks for it */
			}
			if (r->r_state == REC_DYING || r->r_state == REC_ORPHAN) {
				if (present) { /* the removal did not happen, or did not last */
					rec_set_state(t, fid, REC_LIVE);
					pthread_mutex_lock(&t->files_lock);
					if (!tf_lookup(t, tf->ino))
						tf_hash_insert(t, tf);
					pthread_mutex_unlock(&t->files_lock);
				} else {
					tier_cache_drop_file(t, tf);
					pthread_mutex_lock(&t->files_lock);
					rec_free(t, tf);
					pthread_mutex_unlock(&t->files_lock);
				}
				continue;
			}
			if (!present) {
				if (__atomic_load_n(&tf->nvalid, __ATOMIC_RELAXED) == 0 &&
				    !r->r_size) {
					pthread_mutex_lock(&t->files_lock);
					rec_free(t, tf);
					pthread_mutex_unlock(&t->files_lock);
					continue;
				}
				int rc = rec_remake(t, fid, tf);
				if (rc) {
					for (size_t i = 0; i < nw; i++)
						free(w[i].found);
					free(w);
					return fr_err(
					    rc, "cannot recreate a file of the cache in %s: %s",
					    t->backing, strerror(-rc));
				}
				continue;
			}
			/* C3: nothing of the backing file beyond the record's size. */
			if ((uint64_t)st.st_size > r->r_size) {
				pm_store4(&r->r_flags, r->r_flags | REC_META_STALE);
				pm_persist(&r->r_flags, 4);
				int rc = tier_sync_meta(t, tf);
				if (rc) {
					for (size_t i = 0; i < nw; i++)
						free(w[i].found);
					free(w);
					return rc;
				}
			}
		}
	}
	for (size_t i = 0; i < nw; i++)
		free(w[i].found);
	free(w);
	return 0;
}
