/*
 * fuse_nodes.c -- the inodes the kernel knows: FUSE node id -> a ferrite
 * O_PATH descriptor and the kernel's lookup count (libfuse passthrough_ll).
 *
 * Invariants: F1 a node is in the table exactly while the kernel holds
 *               lookups on it (nlookup > 0), and then holds one O_PATH
 *               descriptor of its inode;
 *             F2 that descriptor keeps the inode alive in the library even
 *               after its last name is removed, so the node id (= inode
 *               number) cannot be reused for another file while the kernel
 *               may still send requests for it;
 *             F3 handles counts the node's open files (opened, not yet
 *               released); when the last one is released from a regular
 *               file that has no name left, its space comes back only at the
 *               kernel's forget, which follows the release's reply: the
 *               release's count in fuse_frees.c stays pending until then
 *               (awaits_forget), so no call sees the pool fuller than it is
 *               in between.
 * Crash argument: nothing here is persistent; after a crash the kernel's
 *   node ids die with the mount, and the library's orphan list releases
 *   inodes that were only kept by a descriptor.
 * Locking: one mutex per shard of the hash; a request's node stays valid
 *   while it runs because the kernel sends no forget for an inode it is
 *   still using.
 */
#include <errno.h>
#include <fuse_lowlevel.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/stat.h>

#include "fuse_front.h"

#define FN_SHARDS 64

struct fnode {
	uint64_t id;
	int fd;
	uint64_t nlookup;
	struct fnode *next;
	uint32_t handles;  /* F3 */
	int awaits_forget; /* F3: holds one count of fuse_frees.c */
};

struct fn_shard {
	pthread_mutex_t lock;
	struct fnode **slots;
	size_t cap, count;
};

struct fnode_table {
	struct fn_shard shard[FN_SHARDS];
};

uint64_t fnode_id(const struct ffront *ff, uint64_t ino)
{
	return ino == ff->root_ino ? FUSE_ROOT_ID : ino;
}

static uint64_t fn_hash(uint64_t id)
{
	return id * 0x9e3779b97f4a7c15ULL;
}

static struct fn_shard *fn_shard(struct fnode_table *t, uint64_t id)
{
	return &t->shard[fn_hash(id) >> 58];
}

static struct fnode **fn_slot(struct fn_shard *s, uint64_t id)
{
	struct fnode **pp = &s->slots[(fn_hash(id) >> 20) & (s->cap - 1)];
	while (*pp && (*pp)->id != id)
		pp = &(*pp)->next;
	return pp;
}

static void fn_grow(struct fn_shard *s)
{
	size_t ncap = s->cap * 2;
	struct fnode **ns = calloc(ncap, sizeof(*ns));
	if (!ns)
		return; /* longer chains, still correct */
	for (size_t i = 0; i < s->cap; i++) {
		for (struct fnode *n = s->slots[i], *next; n; n = next) {
			next = n->next;
			struct fnode **pp = &ns[(fn_hash(n->id) >> 20) & (ncap - 1)];
			n->next = *pp;
			*pp = n;
		}
	}
	free(s->slots);
	s->slots = ns;
	s->cap = ncap;
}

struct fnode_table *fnode_table_new(void)
{
	struct fnode_table *t = calloc(1, sizeof(*t));
	if (!t)
		return NULL;
	for (int i = 0; i < FN_SHARDS; i++) {
		pthread_mutex_init(&t->shard[i].lock, NULL);
		t->shard[i].cap = 64;
		t->shard[i].slots = calloc(64, sizeof(struct fnode *));
		if (!t->shard[i].slots) {
			fnode_table_free(NULL, t);
			return NULL;
		}
	}
	return t;
}

void fnode_table_free(struct ffront *ff, struct fnode_table *t)
{
	for (int i = 0; i < FN_SHARDS; i++) {
		struct fn_shard *s = &t->shard[i];
		for (size_t j = 0; s->slots && j < s->cap; j++) {
			for (struct fnode *n = s->slots[j], *next; n; n = next) {
				next = n->next;
				if (ff)
					ferrite_close(ff->fs, n->fd);
				free(n);
			}
		}
		free(s->slots);
		pthread_mutex_destroy(&s->lock);
	}
	free(t);
}

int fnode_fd(struct ffront *ff, uint64_t id)
{
	struct fn_shard *s = fn_shard(ff->nodes, id);
	pthread_mutex_lock(&s->lock);
	struct fnode *n = *fn_slot(s, id);
	int fd = n ? n->fd : -ESTALE;
	pthread_mutex_unlock(&s->lock);
	return fd;
}

void fnode_ref(struct ffront *ff, uint64_t ino, int fd)
{
	uint64_t id = fnode_id(ff, ino);
	struct fn_shard *s = fn_shard(ff->nodes, id);
	pthread_mutex_lock(&s->lock);
	struct fnode **pp = fn_slot(s, id);
	if (*pp) {
		(*pp)->nlookup++;
		pthread_mutex_unlock(&s->lock);
		ferrite_close(ff->fs, fd);
		return;
	}
	struct fnode *n = malloc(sizeof(*n));
	if (!n) {
		/* Cannot remember it: the kernel will still send requests for
		 * this id, which then fail with ESTALE rather than reach the
		 * wrong inode. */
		pthread_mutex_unlock(&s->lock);
		ferrite_close(ff->fs, fd);
		return;
	}
	*n = (struct fnode){.id = id, .fd = fd, .nlookup = 1};
	*pp = n;
	if (++s->count > s->cap * 2)
		fn_grow(s);
	pthread_mutex_unlock(&s->lock);
}

void fnode_unref(struct ffront *ff, uint64_t id, uint64_t nlookup)
{
	if (id == FUSE_ROOT_ID)
		return; /* the root's descriptor lives as long as the session */
	struct fn_shard *s = fn_shard(ff->nodes, id);
	pthread_mutex_lock(&s->lock);
	struct fnode **pp = fn_slot(s, id), *n = *pp;
	if (!n || n->nlookup > nlookup) {
		if (n)
			n->nlookup -= nlookup;
		pthread_mutex_unlock(&s->lock);
		return;
	}
	*pp = n->next;
	s->count--;
	pthread_mutex_unlock(&s->lock);
	ferrite_close(ff->fs, n->fd);
	if (n->awaits_forget)
		frees_done(ff); /* F3: the space is back */
	free(n);
}

void fnode_handle_opened(struct ffront *ff, uint64_t id)
{
	struct fn_shard *s = fn_shard(ff->nodes, id);
	pthread_mutex_lock(&s->lock);
	struct fnode *n = *fn_slot(s, id);
	if (n)
		n->handles++;
	pthread_mutex_unlock(&s->lock);
}

int fnode_handle_closed(struct ffront *ff, uint64_t id, int released)
{
	struct fn_shard *s = fn_shard(ff->nodes, id);
	pthread_mutex_lock(&s->lock);
	struct fnode *n = *fn_slot(s, id);
	if (n && n->handles)
		n->handles--;
	int last = n && !n->handles && !n->awaits_forget;
	int fd = n ? n->fd : -1;
	pthread_mutex_unlock(&s->lock);
	/* The node outlives this call: the kernel holds the inode until the
	 * release is answered, so its forget cannot come meanwhile. */
	struct stat st;
	if (!released || !last || ferrite_fstat(ff->fs, fd, &st) != 0 || st.st_nlink != 0 ||
	    !S_ISREG(st.st_mode))
		return 0;
	pthread_mutex_lock(&s->lock);
	n = *fn_slot(s, id);
	int awaits = n && !n->handles && !n->awaits_forget;
	if (awaits)
		n->awaits_forget = 1;
	pthread_mutex_unlock(&s->lock);
	return awaits;
}
