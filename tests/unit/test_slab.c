/* SPDX-License-Identifier: MIT */
/* Unit tests of core/slab: buffers carved from regions, a spare region kept per size, and
 * threads that make regions at once (a new region is made outside the lock). */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "slab.h"

#define SIZE (64u << 10)
#define PER_REGION (TFS_SLAB_BYTES / SIZE - 1) /* buffer 0's place is the header's */

static void test_buffers_regions_and_spare(void **state)
{
	void *bufs[2 * PER_REGION];
	struct tfs_slabs *s;
	uint64_t held, used;

	(void)state;
	assert_int_equal(tfs_slab_size(1), TFS_SLAB_STEP);
	assert_int_equal(tfs_slab_size(SIZE - 1), SIZE);
	assert_int_equal(tfs_slab_size(TFS_SLAB_MAX + 1), 0);
	assert_int_equal(tfs_slabs_create(&s), 0);
	for (size_t i = 0; i < 2 * PER_REGION; i++) {
		bufs[i] = tfs_slab_alloc(s, SIZE);
		assert_non_null(bufs[i]);
		memset(bufs[i], (int)i, SIZE); /* every byte its own: an overlap shows below */
	}
	for (size_t i = 0; i < 2 * PER_REGION; i++)
		for (size_t j = 0; j < SIZE; j += 4096)
			assert_int_equal(((uint8_t *)bufs[i])[j], (uint8_t)i);
	tfs_slabs_usage(s, &held, &used);
	assert_int_equal(held, 2 * TFS_SLAB_BYTES);
	assert_int_equal(used, 2 * PER_REGION * SIZE);
	/* Both regions emptied: one is kept as the size's spare, the other freed. */
	for (size_t i = 0; i < 2 * PER_REGION; i++)
		tfs_slab_free(s, bufs[i]);
	tfs_slabs_usage(s, &held, &used);
	assert_int_equal(held, TFS_SLAB_BYTES);
	assert_int_equal(used, 0);
	/* The spare serves the next buffer: no new region. */
	bufs[0] = tfs_slab_alloc(s, SIZE);
	assert_non_null(bufs[0]);
	tfs_slabs_usage(s, &held, &used);
	assert_int_equal(held, TFS_SLAB_BYTES);
	tfs_slab_free(s, bufs[0]);
	tfs_slabs_destroy(s);
}

#define THREADS 4
#define ROUNDS 40

struct worker {
	struct tfs_slabs *s;
	unsigned id;
	int bad;
};

/* Fill a region's worth and more, check, give it all back: over and over, so that threads make
 * regions of one size at the same moments. */
static void *churn(void *arg)
{
	struct worker *w = arg;
	void *bufs[PER_REGION + 3];

	for (unsigned round = 0; round < ROUNDS; round++) {
		const uint8_t mark = (uint8_t)(w->id * ROUNDS + round);

		for (size_t i = 0; i < PER_REGION + 3; i++) {
			bufs[i] = tfs_slab_alloc(w->s, SIZE);
			if (!bufs[i]) {
				w->bad = 1;
				return NULL;
			}
			memset(bufs[i], mark, SIZE);
		}
		for (size_t i = 0; i < PER_REGION + 3; i++) {
			const uint8_t *b = bufs[i];

			w->bad |= b[0] != mark || b[SIZE - 1] != mark;
			tfs_slab_free(w->s, bufs[i]);
		}
	}
	return NULL;
}

static void test_threads_make_regions_at_once(void **state)
{
	struct worker w[THREADS];
	pthread_t t[THREADS];
	struct tfs_slabs *s;
	uint64_t held, used;

	(void)state;
	assert_int_equal(tfs_slabs_create(&s), 0);
	for (unsigned i = 0; i < THREADS; i++) {
		w[i] = (struct worker){ s, i, 0 };
		assert_int_equal(pthread_create(&t[i], NULL, churn, &w[i]), 0);
	}
	for (unsigned i = 0; i < THREADS; i++) {
		assert_int_equal(pthread_join(t[i], NULL), 0);
		assert_false(w[i].bad);
	}
	/* Everything back: the spare alone is held, and the counts agree with that. */
	tfs_slabs_usage(s, &held, &used);
	assert_int_equal(used, 0);
	assert_int_equal(held, TFS_SLAB_BYTES);
	tfs_slabs_destroy(s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_buffers_regions_and_spare),
		cmocka_unit_test(test_threads_make_regions_at_once),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
