/* SPDX-License-Identifier: MIT */
/* rng: xoshiro256** from splitmix64, as the header says. */
#include "rng.h"

uint64_t tfs_rng_mix(uint64_t z)
{
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static uint64_t splitmix64(uint64_t *x)
{
	return tfs_rng_mix(*x += 0x9e3779b97f4a7c15ull);
}

void tfs_rng_seed(struct tfs_rng *r, uint64_t seed, uint64_t epoch)
{
	uint64_t x = seed ^ splitmix64(&epoch);

	for (int i = 0; i < 4; i++)
		r->s[i] = splitmix64(&x);
}

static uint64_t rotl(uint64_t x, int k)
{
	return (x << k) | (x >> (64 - k));
}

uint64_t tfs_rng_next(struct tfs_rng *r)
{
	uint64_t *s = r->s, result = rotl(s[1] * 5, 7) * 9, t = s[1] << 17;

	s[2] ^= s[0];
	s[3] ^= s[1];
	s[1] ^= s[2];
	s[0] ^= s[3];
	s[2] ^= t;
	s[3] = rotl(s[3], 45);
	return result;
}

/* Uniform in [0, n) without modulo bias (Lemire). */
uint64_t tfs_rng_below(struct tfs_rng *r, uint64_t n)
{
	unsigned __int128 m = (unsigned __int128)tfs_rng_next(r) * n;
	uint64_t low = (uint64_t)m;

	if (low < n) {
		uint64_t t = -n % n;

		while (low < t) {
			m = (unsigned __int128)tfs_rng_next(r) * n;
			low = (uint64_t)m;
		}
	}
	return (uint64_t)(m >> 64);
}

void tfs_rng_shuffle(struct tfs_rng *r, uint64_t *a, uint64_t n)
{
	for (uint64_t i = n; i > 1; i--) {
		uint64_t j = tfs_rng_below(r, i), t = a[i - 1];

		a[i - 1] = a[j];
		a[j] = t;
	}
}
