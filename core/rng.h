/* SPDX-License-Identifier: MIT */
/* rng: the one random generator of views and packs: xoshiro256** seeded from (seed, epoch)
 * through splitmix64, integer arithmetic only, so that the same parameters give the same order
 * on every machine (and a reference written in any language can follow it). */
#ifndef TFS_RNG_H
#define TFS_RNG_H

#include <stdint.h>

struct tfs_rng {
	uint64_t s[4];
};

/* splitmix64's output function: a bijection of 64-bit integers, 0 to 0, that spreads every bit of
 * its input over its output (splitmix64 is mix(x += 0x9e3779b97f4a7c15)). */
uint64_t tfs_rng_mix(uint64_t z);
/* x = seed ^ splitmix64(epoch); s[i] = splitmix64(x) four times (splitmix64 advances its
 * argument by 0x9e3779b97f4a7c15 before mixing). */
void tfs_rng_seed(struct tfs_rng *r, uint64_t seed, uint64_t epoch);
uint64_t tfs_rng_next(struct tfs_rng *r);
/* Uniform in [0, n) without modulo bias: the high half of next() x n, drawn again while the low
 * half is below 2^64 mod n (Lemire). */
uint64_t tfs_rng_below(struct tfs_rng *r, uint64_t n);
/* Fisher-Yates: for i from n down to 2, swap a[i - 1] with a[below(i)]. */
void tfs_rng_shuffle(struct tfs_rng *r, uint64_t *a, uint64_t n);

#endif
