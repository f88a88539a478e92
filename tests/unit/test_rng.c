/* SPDX-License-Identifier: MIT */
/* Unit tests for core/rng's mix: splitmix64's published output, and a bijection that maps only
 * 0 to 0 (what frame cache keys rely on). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include "rng.h"

static int cmp_u64(const void *a, const void *b)
{
	const uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return (x > y) - (x < y);
}

static void test_mix_is_splitmix64s_output(void **state)
{
	(void)state;
	assert_int_equal(tfs_rng_mix(0), 0);
	/* splitmix64 seeded with 0: its first output, as published with the generator. */
	assert_true(tfs_rng_mix(0x9e3779b97f4a7c15ull) == 0xe220a8397b1dcdafull);
}

static void test_mix_is_one_to_one_and_never_zero(void **state)
{
	enum { N = 1 << 20 };
	uint64_t *v = malloc(N * sizeof(*v));

	(void)state;
	assert_non_null(v);
	/* The piece numbers a frame key mixes (piece + 1, small), and a high range. */
	for (uint64_t i = 0; i < N / 2; i++) {
		v[i] = tfs_rng_mix(i + 1);
		v[N / 2 + i] = tfs_rng_mix(UINT64_MAX - i);
	}
	qsort(v, N, sizeof(*v), cmp_u64);
	for (size_t i = 0; i < N; i++) {
		assert_true(v[i] != 0);
		if (i)
			assert_true(v[i] != v[i - 1]);
	}
	free(v);
}

static void test_seeded_streams_differ_by_epoch(void **state)
{
	struct tfs_rng a, b, c;

	(void)state;
	tfs_rng_seed(&a, 7, 0);
	tfs_rng_seed(&b, 7, 0);
	tfs_rng_seed(&c, 7, 1);
	for (int i = 0; i < 100; i++) {
		const uint64_t x = tfs_rng_next(&a);

		assert_true(x == tfs_rng_next(&b));
		assert_true(x != tfs_rng_next(&c));
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_mix_is_splitmix64s_output),
		cmocka_unit_test(test_mix_is_one_to_one_and_never_zero),
		cmocka_unit_test(test_seeded_streams_differ_by_epoch),
	};

	if (getenv("TFS_TEST_FILTER"))
		cmocka_set_test_filter(getenv("TFS_TEST_FILTER"));
	return cmocka_run_group_tests_name("rng", tests, NULL, NULL);
}
