/* SPDX-License-Identifier: MIT */
/* Unit tests for util's tfs_grow: an array kept when it fits, doubled from 16 when it does not
 * (past a need that doubling alone would not reach), its elements kept, and an impossible size
 * refused with the array and its capacity as they were. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "util.h"

static void test_grow_doubles_and_keeps(void **state)
{
	size_t cap = 0;
	uint32_t *v = NULL, *g;

	(void)state;
	g = tfs_grow(v, &cap, 1, sizeof(*v));
	assert_non_null(g);
	assert_int_equal(cap, 16);
	v = g;
	for (uint32_t i = 0; i < 16; i++)
		v[i] = i * 7;
	assert_ptr_equal(tfs_grow(v, &cap, 16, sizeof(*v)), v); /* fits: as it was */
	assert_int_equal(cap, 16);
	g = tfs_grow(v, &cap, 17, sizeof(*v));
	assert_non_null(g);
	assert_int_equal(cap, 32);
	v = g;
	g = tfs_grow(v, &cap, 100, sizeof(*v)); /* more than one doubling */
	assert_non_null(g);
	assert_int_equal(cap, 128);
	v = g;
	for (uint32_t i = 0; i < 16; i++)
		assert_int_equal(v[i], i * 7);
	v[127] = 1; /* all of it is there (ASan and valgrind would say otherwise) */
	free(v);
}

static void test_grow_refuses_an_impossible_size(void **state)
{
	size_t cap = 16;
	uint64_t *v = calloc(cap, sizeof(*v));

	(void)state;
	assert_non_null(v);
	v[3] = 42;
	assert_null(tfs_grow(v, &cap, SIZE_MAX / 4, sizeof(*v)));
	assert_int_equal(cap, 16);
	assert_int_equal(v[3], 42);
	free(v);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_grow_doubles_and_keeps),
		cmocka_unit_test(test_grow_refuses_an_impossible_size),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
