/*
 * age.h -- Geriatrix-style aging of a pool through the public API, shared by
 * the benchmark's "aged" column and the fill tests (tests/scale/fill_test.c).
 */
#ifndef FERRITE_BENCH_AGE_H
#define FERRITE_BENCH_AGE_H

#include <stdint.h>

#include "ferrite.h"

struct age_stats {
	uint64_t ops, written, kept; /* operations, bytes written, bytes left in files */
};

/* The next value of a splitmix64 stream (*r is its state). */
uint64_t age_rnd(uint64_t *r);
/* A file size drawn from a source tree (most a few KiB, some tens, a few
 * MiB) mixed with a mail spool (2-60 KiB messages). */
uint64_t age_tree_size(uint64_t *r);
/* Churns files DIR/gNNNNN (create, append, truncate, rename over, delete;
 * the tree's sizes) until target bytes were written while keeping the files
 * between a half and nine tenths of pool_bytes, then deletes half of them at
 * random, leaving holes all over the pool. progress (may be NULL) is called
 * now and then with the bytes written so far. 0, or -errno if DIR cannot be
 * made. */
int age_pool(ferrite_fs *fs, const char *dir, uint64_t target, uint64_t pool_bytes, uint64_t *r,
	     void (*progress)(uint64_t written, uint64_t target), struct age_stats *st);

#endif
