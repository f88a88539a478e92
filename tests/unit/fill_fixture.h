/* SPDX-License-Identifier: MIT */
/* fill_fixture: deterministic pseudo-random bytes for the unit tests, so that failures
 * reproduce. */
#ifndef TFS_FILL_FIXTURE_H
#define TFS_FILL_FIXTURE_H

#include <stddef.h>
#include <stdint.h>

/* xorshift64* from seed (made odd, so never the all-zero state), a byte a step. */
static inline void fill_random(uint8_t *p, size_t n, uint64_t seed)
{
	uint64_t x = seed | 1;

	for (size_t i = 0; i < n; i++) {
		x ^= x >> 12;
		x ^= x << 25;
		x ^= x >> 27;
		p[i] = (uint8_t)((x * 0x2545F4914F6CDD1Dull) >> 56);
	}
}

#endif
