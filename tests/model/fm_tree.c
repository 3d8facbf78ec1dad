/*
 * fm_tree.c -- whole-tree comparison of two backends.
 *
 * Walks both trees in the same (sorted) order and requires the same names,
 * types, permission bits, owners, link counts, sizes (all but directories),
 * symlink targets and file bytes, and the same hard-link structure: two names
 * share an inode on one side exactly when they do on the other. Because the
 * reference tree is the kernel's, equality means Ferrite holds exactly the
 * state the same operations produce under POSIX.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "fm.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct inomap {
	uint64_t *ino;
	char **path;
	int n, cap;
};

static const char *ino_first(struct inomap *m, uint64_t ino, const char *path)
{
	for (int i = 0; i < m->n; i++)
		if (m->ino[i] == ino)
			return m->path[i];
	if (m->n == m->cap) {
		m->cap = m->cap ? m->cap * 2 : 64;
		m->ino = realloc(m->ino, sizeof *m->ino * (size_t)m->cap);
		m->path = realloc(m->path, sizeof *m->path * (size_t)m->cap);
	}
	m->ino[m->n] = ino;
	m->path[m->n] = strdup(path);
	m->n++;
	return path;
}

static void ino_free(struct inomap *m)
{
	for (int i = 0; i < m->n; i++)
		free(m->path[i]);
	free(m->ino);
	free(m->path);
}

static int dent_cmp(const void *a, const void *b)
{
	return strcmp(((const struct fm_dent *)a)->name, ((const struct fm_dent *)b)->name);
}

int fm_tree_list(struct fm_backend *be, const char *path, struct fm_dent **out, int *n)
{
	void *h;
	*out = NULL;
	*n = 0;
	int r = be->dopen(be->ctx, path, &h);
	if (r < 0)
		return r;
	int cap = 0;
	for (;;) {
		struct fm_dent e;
		memset(&e, 0, sizeof e);
		r = be->dread(h, &e);
		if (r <= 0)
			break;
		if (!strcmp(e.name, ".") || !strcmp(e.name, ".."))
			continue;
		if (*n == cap) {
			cap = cap ? cap * 2 : 16;
			*out = realloc(*out, sizeof **out * (size_t)cap);
		}
		(*out)[(*n)++] = e;
	}
	be->dclose(h);
	if (r < 0)
		return r;
	if (*n)
		qsort(*out, (size_t)*n, sizeof **out, dent_cmp);
	return 0;
}

/* Whole content of a file (size from st). Returns 0 or -errno. */
static int slurp(struct fm_backend *be, const char *path, size_t size, uint8_t **out)
{
	*out = malloc(size ? size : 1);
	int fd = be->open(be->ctx, path, O_RDONLY | O_NOFOLLOW, 0);
	if (fd < 0)
		return fd;
	size_t got = 0;
	while (got < size) {
		size_t want = size - got > (4u << 20) ? (4u << 20) : size - got;
		ssize_t r = be->pread(be->ctx, fd, *out + got, want, (off_t)got);
		if (r < 0) {
			be->close(be->ctx, fd);
			return (int)r;
		}
		if (r == 0)
			break;
		got += (size_t)r;
	}
	be->close(be->ctx, fd);
	return got == size ? 0 : -EIO;
}

static int lenient_ok(const struct fm_lenient *l, const uint8_t *a, size_t sa, const uint8_t *nw,
		      size_t sn, char *why, size_t whylen, const char *path)
{
	size_t so = l->oldlen;
	size_t lo = so < sn ? so : sn, hi = so < sn ? sn : so;
	if (l->strict_append ? (sa != so && sa != sn) : (sa < lo || sa > hi)) {
		snprintf(why, whylen,
			 "%s: size %zu after the interrupted op, want old %zu or new %zu", path, sa,
			 so, sn);
		return 0;
	}
	for (size_t i = 0; i < sa; i++) {
		uint8_t o = i < so ? l->old[i] : 0, n = i < sn ? nw[i] : 0;
		int ok = a[i] == n ||
			 (a[i] == o && !(l->strict_append && sa == sn && i >= so && sn > so));
		if (!ok) {
			snprintf(why, whylen,
				 "%s: byte %zu is 0x%02x after the interrupted op; old 0x%02x, new "
				 "0x%02x "
				 "(old size %zu, new size %zu%s)",
				 path, i, a[i], o, n, so, sn,
				 l->strict_append ? ", appended bytes must be all new" : "");
			return 0;
		}
	}
	return 1;
}

static int cmp_file(struct fm_backend *a, struct fm_backend *b, const char *path,
		    const struct stat *sa, const struct stat *sb, struct fm_lenient *len, char *why,
		    size_t whylen)
{
	uint8_t *da = NULL, *db = NULL;
	int rc = 1;
	int ra = slurp(a, path, (size_t)sa->st_size, &da);
	int rb = slurp(b, path, (size_t)sb->st_size, &db);
	if (ra < 0 || rb < 0) {
		snprintf(why, whylen, "%s: reading: %s vs %s", path, fm_errname(ra),
			 fm_errname(rb));
		goto out;
	}
	int lenient = len && len->active && sb->st_ino == len->ino;
	if (!lenient) {
		if (sa->st_size != sb->st_size) {
			snprintf(why, whylen, "%s: size %lld vs %lld", path, (long long)sa->st_size,
				 (long long)sb->st_size);
			goto out;
		}
		if (memcmp(da, db, (size_t)sa->st_size)) {
			size_t i = 0;
			while (da[i] == db[i])
				i++;
			size_t j = i;
			while (j < (size_t)sa->st_size && da[j] != db[j])
				j++;
			snprintf(why, whylen,
				 "%s: data differs from byte %zu (0x%02x vs 0x%02x), first run of "
				 "differing bytes ends "
				 "at %zu, size %lld",
				 path, i, da[i], db[i], j, (long long)sa->st_size);
			goto out;
		}
		rc = 0;
		goto out;
	}
	if (sa->st_size == sb->st_size && !memcmp(da, db, (size_t)sa->st_size)) {
		rc = 0;
		goto out;
	}
	if (!lenient_ok(len, da, (size_t)sa->st_size, db, (size_t)sb->st_size, why, whylen, path))
		goto out;
	/* a torn but legal result: make b equal to a */
	len->used = 1;
	int fd = b->open(b->ctx, path, O_WRONLY | O_NOFOLLOW, 0);
	if (fd < 0 || b->pwrite(b->ctx, fd, da, (size_t)sa->st_size, 0) != sa->st_size ||
	    b->ftruncate(b->ctx, fd, sa->st_size) < 0) {
		snprintf(why, whylen, "%s: cannot adopt torn content into the reference", path);
		if (fd >= 0)
			b->close(b->ctx, fd);
		goto out;
	}
	b->close(b->ctx, fd);
	rc = 0;
out:
	free(da);
	free(db);
	return rc;
}

/* The user.* and trusted.* attributes of path (not following a final
 * symlink), sorted: "name\0<len><value>" records in *out. 1 if the backend
 * has no attributes to compare, 0, or -errno. */
#define FM_XATTR_VALUE_MAX 65536

static int xattr_image(struct fm_backend *be, const char *path, char **out, size_t *outlen)
{
	*out = NULL;
	*outlen = 0;
	if (!be->llistxattr || !be->lgetxattr)
		return 1;
	char list[65536];
	ssize_t n = be->llistxattr(be->ctx, path, list, sizeof list);
	if (n < 0)
		return n == -EOPNOTSUPP || n == -ENOTSUP ? 1 : (int)n;
	const char *names[1024];
	int k = 0;
	for (ssize_t i = 0; i < n && k < 1024; i += (ssize_t)strlen(list + i) + 1)
		if (!strncmp(list + i, "user.", 5) || !strncmp(list + i, "trusted.", 8))
			names[k++] = list + i;
	for (int a = 1; a < k; a++) /* insertion sort: few names */
		for (int b = a; b > 0 && strcmp(names[b - 1], names[b]) > 0; b--) {
			const char *t = names[b];
			names[b] = names[b - 1];
			names[b - 1] = t;
		}
	size_t cap = 0;
	char *val = malloc(FM_XATTR_VALUE_MAX); /* comparisons run in several threads */
	if (!val)
		return -ENOMEM;
	for (int a = 0; a < k; a++) {
		ssize_t vl = be->lgetxattr(be->ctx, path, names[a], val, FM_XATTR_VALUE_MAX);
		if (vl < 0) {
			free(val);
			return (int)vl;
		}
		size_t need = strlen(names[a]) + 1 + sizeof(ssize_t) + (size_t)vl;
		if (*outlen + need > cap) {
			cap = 2 * (*outlen + need);
			*out = realloc(*out, cap);
		}
		memcpy(*out + *outlen, names[a], strlen(names[a]) + 1);
		*outlen += strlen(names[a]) + 1;
		memcpy(*out + *outlen, &vl, sizeof vl);
		*outlen += sizeof vl;
		memcpy(*out + *outlen, val, (size_t)vl);
		*outlen += (size_t)vl;
	}
	free(val);
	return 0;
}

static int xattr_cmp(struct fm_backend *a, struct fm_backend *b, const char *path, char *why,
		     size_t whylen)
{
	char *xa, *xb;
	size_t la, lb;
	int ra = xattr_image(a, path, &xa, &la);
	int rb = xattr_image(b, path, &xb, &lb);
	int rc = 0;
	if (ra == 1 || rb == 1) {
		rc = 0; /* one side has no attributes to compare */
	} else if (ra < 0 || rb < 0) {
		snprintf(why, whylen, "%s: listing extended attributes: %s vs %s", path,
			 fm_errname(ra), fm_errname(rb));
		rc = 1;
	} else if (la != lb || (la && memcmp(xa, xb, la))) {
		snprintf(why, whylen,
			 "%s: extended attributes differ (%zu vs %zu bytes of names and values)",
			 path, la, lb);
		rc = 1;
	}
	free(xa);
	free(xb);
	return rc;
}

static int st_cmp(const char *path, const struct stat *a, const struct stat *b, int skip_size,
		  char *why, size_t whylen)
{
	if (a->st_mode != b->st_mode) {
		snprintf(why, whylen, "%s: mode 0%o vs 0%o", path, a->st_mode, b->st_mode);
		return 1;
	}
	if (a->st_uid != b->st_uid || a->st_gid != b->st_gid) {
		snprintf(why, whylen, "%s: owner %u:%u vs %u:%u", path, a->st_uid, a->st_gid,
			 b->st_uid, b->st_gid);
		return 1;
	}
	if (a->st_nlink != b->st_nlink) {
		snprintf(why, whylen, "%s: nlink %lu vs %lu", path, (unsigned long)a->st_nlink,
			 (unsigned long)b->st_nlink);
		return 1;
	}
	if (!skip_size && !S_ISDIR(b->st_mode) && a->st_size != b->st_size) {
		snprintf(why, whylen, "%s: size %lld vs %lld", path, (long long)a->st_size,
			 (long long)b->st_size);
		return 1;
	}
	return 0;
}

struct walk {
	struct fm_backend *a, *b;
	struct fm_lenient *len;
	struct inomap ma, mb;
	char *why;
	size_t whylen;
};

static void join(char *out, size_t n, const char *dir, const char *name)
{
	size_t l = strlen(dir);
	snprintf(out, n, "%s%s%s", dir, l && dir[l - 1] == '/' ? "" : "/", name);
}

static int cmp_entry(struct walk *w, const char *path);

static int cmp_dir(struct walk *w, const char *path)
{
	struct fm_dent *ea, *eb;
	int na, nb, rc = 1;
	int ra = fm_tree_list(w->a, path, &ea, &na);
	int rb = fm_tree_list(w->b, path, &eb, &nb);
	if (ra < 0 || rb < 0) {
		snprintf(w->why, w->whylen, "%s: listing: %s vs %s", path, fm_errname(ra),
			 fm_errname(rb));
		goto out;
	}
	for (int i = 0, j = 0; i < na || j < nb;) {
		int c = i >= na ? 1 : j >= nb ? -1 : strcmp(ea[i].name, eb[j].name);
		if (c) {
			snprintf(w->why, w->whylen, "%s: entry \"%s\" only in %s", path,
				 c < 0 ? ea[i].name : eb[j].name, c < 0 ? w->a->name : w->b->name);
			goto out;
		}
		if (i + 1 < na && !strcmp(ea[i].name, ea[i + 1].name)) {
			snprintf(w->why, w->whylen, "%s: %s lists \"%s\" twice", path, w->a->name,
				 ea[i].name);
			goto out;
		}
		if (ea[i].type != eb[j].type && ea[i].type != 0) {
			snprintf(w->why, w->whylen, "%s: d_type of \"%s\" %d vs %d", path,
				 ea[i].name, ea[i].type, eb[j].type);
			goto out;
		}
		char child[4096];
		join(child, sizeof child, path, ea[i].name);
		/* readdir's d_ino is the file's serial number (POSIX) */
		struct stat sa;
		if (w->a->lstat(w->a->ctx, child, &sa) == 0 && ea[i].ino != (uint64_t)sa.st_ino) {
			snprintf(w->why, w->whylen,
				 "%s: %s readdir d_ino %llu but lstat st_ino %llu", child,
				 w->a->name, (unsigned long long)ea[i].ino,
				 (unsigned long long)sa.st_ino);
			goto out;
		}
		if (cmp_entry(w, child))
			goto out;
		i++;
		j++;
	}
	rc = 0;
out:
	free(ea);
	free(eb);
	return rc;
}

static int cmp_entry(struct walk *w, const char *path)
{
	struct stat sa, sb;
	int ra = w->a->lstat(w->a->ctx, path, &sa);
	int rb = w->b->lstat(w->b->ctx, path, &sb);
	if (ra < 0 || rb < 0) {
		snprintf(w->why, w->whylen, "%s: lstat %s vs %s", path, fm_errname(ra),
			 fm_errname(rb));
		return 1;
	}
	int lenient = w->len && w->len->active && sb.st_ino == w->len->ino && S_ISREG(sb.st_mode);
	if (st_cmp(path, &sa, &sb, lenient, w->why, w->whylen))
		return 1;
	const char *fa = ino_first(&w->ma, sa.st_ino, path);
	const char *fb = ino_first(&w->mb, sb.st_ino, path);
	if (strcmp(fa, fb)) {
		snprintf(
		    w->why, w->whylen,
		    "%s: hard-link structure differs: same inode as \"%s\" in %s, as \"%s\" in %s",
		    path, fa, w->a->name, fb, w->b->name);
		return 1;
	}
	if (strcmp(fa, path))
		return 0; /* another name of an inode already compared */
	if (xattr_cmp(w->a, w->b, path, w->why, w->whylen))
		return 1;
	if (S_ISDIR(sb.st_mode))
		return cmp_dir(w, path);
	if (S_ISLNK(sb.st_mode)) {
		char ta[4200], tb[4200];
		ssize_t la = w->a->readlink(w->a->ctx, path, ta, sizeof ta);
		ssize_t lb = w->b->readlink(w->b->ctx, path, tb, sizeof tb);
		if (la != lb || (la > 0 && memcmp(ta, tb, (size_t)la))) {
			snprintf(w->why, w->whylen, "%s: symlink target \"%.*s\" vs \"%.*s\"", path,
				 la > 0 ? (int)(la > 200 ? 200 : la) : 0, ta,
				 lb > 0 ? (int)(lb > 200 ? 200 : lb) : 0, tb);
			return 1;
		}
		return 0;
	}
	if (S_ISREG(sb.st_mode))
		return cmp_file(w->a, w->b, path, &sa, &sb, w->len, w->why, w->whylen);
	return 0;
}

int fm_tree_compare(struct fm_backend *a, struct fm_backend *b, const char *root,
		    struct fm_lenient *len, char *why, size_t whylen)
{
	struct walk w;
	memset(&w, 0, sizeof w);
	w.a = a;
	w.b = b;
	w.len = len;
	w.why = why;
	w.whylen = whylen;
	why[0] = 0;
	int rc = cmp_entry(&w, root);
	ino_free(&w.ma);
	ino_free(&w.mb);
	return rc;
}

static void count_walk(struct fm_backend *be, const char *path, struct fm_counts *c,
		       struct inomap *m)
{
	struct stat st;
	if (be->lstat(be->ctx, path, &st) < 0)
		return;
	if (strcmp(ino_first(m, st.st_ino, path), path))
		return;
	if (S_ISREG(st.st_mode)) {
		c->files++;
		c->bytes += (uint64_t)st.st_size;
	} else if (S_ISLNK(st.st_mode)) {
		c->symlinks++;
	} else if (S_ISDIR(st.st_mode)) {
		c->dirs++;
		struct fm_dent *e;
		int n;
		if (fm_tree_list(be, path, &e, &n) < 0)
			return;
		for (int i = 0; i < n; i++) {
			char child[4096];
			join(child, sizeof child, path, e[i].name);
			count_walk(be, child, c, m);
		}
		free(e);
	}
}

int fm_tree_count(struct fm_backend *be, const char *root, struct fm_counts *c)
{
	struct inomap m;
	memset(&m, 0, sizeof m);
	memset(c, 0, sizeof *c);
	count_walk(be, root, c, &m);
	ino_free(&m);
	return 0;
}
