/*
 * space_fixture.h -- a formatted pool with only the space layer attached,
 * for the allocator, partition and page-table tests. Changes are staged in
 * a transaction and applied without the log (tx_apply_unlogged), which is
 * what these tests need: the log is tested on its own in log_test.
 */
#ifndef FERRITE_SPACE_FIXTURE_H
#define FERRITE_SPACE_FIXTURE_H

#include "space/space.h"
#include <errno.h>

#include "unit.h"

struct sfix {
	struct pool p;
	struct space sp;
	struct tx *tx;
	char path[128];
};

static inline int sfix_open(struct sfix *f, const char *tag, uint64_t size)
{
	memset(f, 0, sizeof(*f));
	snprintf(f->path, sizeof(f->path), "%s", unit_pool_path(tag));
	unlink(f->path);
	uint64_t end;
	if (pool_open(&f->p, f->path, 1) || pool_populate(&f->p, size, NULL, NULL) ||
	    pool_map(&f->p, size) || sp_format(&f->p, 4096, 2 * FR_MIB, &end) ||
	    sp_attach(&f->sp, &f->p, 4096) || vs_init(&f->sp))
		return 1;
	f->tx = malloc(sizeof(*f->tx));
	if (!f->tx)
		return 1;
	tx_init(f->tx, &f->sp, f->p.base, &f->sp.alloc_lock);
	tx_begin(f->tx);
	return 0;
}

/* Applies what is staged and starts the next transaction. */
static inline void sfix_apply(struct sfix *f)
{
	tx_apply_unlogged(f->tx);
	tx_begin(f->tx);
}

static inline void sfix_close(struct sfix *f)
{
	tx_abort(f->tx);
	free(f->tx);
	sp_detach(&f->sp);
	pool_close(&f->p);
	unlink(f->path);
}

#endif
