/*
 * tier_damage.h -- damage for tiered pools, for a fuzz loop: build a
 * populated tiered pool with what a crash leaves (dirty chunks, an
 * interrupted multi-chunk write, an open unlinked file, a file whose backing
 * file is gone), damage one tier structure of a copy of its image, and run
 * everything that reads a pool over it. tier_damage_main.c is the seeded
 * loop; the general fuzzer (tests/fuzz) can call the same three functions.
 */
#ifndef FERRITE_TIER_DAMAGE_H
#define FERRITE_TIER_DAMAGE_H

#include <stddef.h>
#include <stdint.h>

/* Makes pool (16 MiB) in front of backing_dir (which must exist, empty) and
 * fills it through the C API, leaving crash leftovers (a process killed with
 * dirty data). consistency: 0 per-write, 1 epoch. 0 or -errno. */
int tier_fuzz_build_mode(const char *pool, const char *backing_dir, int consistency);
int tier_fuzz_build(const char *pool, const char *backing_dir);

/* Damages one structure of the tiered pool image img[0, len) chosen by seed
 * (the tier header, a record, a chunk descriptor or tag, the epoch journal,
 * or the superblock): one field set to zero, all-ones, a boundary value, a
 * value just outside the pool or a random one -- with the checksum that
 * covers it recomputed most of the time, so the damage gets past it -- or
 * bytes flipped in one region. Describes it in what[cap]. */
void tier_fuzz_damage(uint8_t *img, size_t len, uint64_t seed, char *what, size_t cap);

/* Runs over a (damaged) pool what a user would: fsck -n (which must change
 * neither the pool nor backing_dir), mount + walk + read + write + unmount,
 * fsck --repair, fsck again, the statistics. Returns 0, or >0 for a broken
 * contract (fsck -n wrote, or called clean a pool that does not mount) with
 * a line in why; a crash or hang is the caller's to see. */
int tier_fuzz_exercise(const char *pool, const char *backing_dir, char *why, size_t cap);

#endif
