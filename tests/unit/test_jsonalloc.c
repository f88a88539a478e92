/* SPDX-License-Identifier: MIT */
/* Unit tests of core/jsonalloc: values parsed in a scope come from the thread's arena and read
 * right; the arena is reused scope after scope; what does not fit, and values made outside a
 * scope, are plain malloc and freed with free (the sanitizers and valgrind check the pairing);
 * threads each have their own arena. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>

#include "jsonalloc.h"

static const char line[] = "{\"id\": 7, \"score\": 0.5, \"ok\": true, \"text\": \"a row of text\","
			   " \"vec\": [1, 2, 3, 4, 5, 6, 7, 8]}";

/* line parsed and checked value by value; returns its root. */
static json_t *parse_checked(void)
{
	json_error_t e;
	json_t *o = json_loadb(line, sizeof(line) - 1, 0, &e), *v;

	assert_non_null(o);
	assert_int_equal(json_integer_value(json_object_get(o, "id")), 7);
	assert_true(json_real_value(json_object_get(o, "score")) == 0.5);
	assert_true(json_is_true(json_object_get(o, "ok")));
	assert_string_equal(json_string_value(json_object_get(o, "text")), "a row of text");
	v = json_object_get(o, "vec");
	assert_int_equal(json_array_size(v), 8);
	for (size_t i = 0; i < 8; i++)
		assert_int_equal(json_integer_value(json_array_get(v, i)), (json_int_t)i + 1);
	return o;
}

static void test_scopes(void **state)
{
	json_t *kept, *o;
	const void *first = NULL;

	(void)state;
	tfs_jsonalloc_install();
	kept = parse_checked(); /* outside a scope: malloc */
	assert_false(tfs_jsonalloc_holds(kept));
	for (int i = 0; i < 1000; i++) {
		tfs_jsonalloc_begin();
		o = parse_checked();
		assert_true(tfs_jsonalloc_holds(o));
		assert_true(tfs_jsonalloc_holds(json_object_get(o, "text")));
		if (!first)
			first = o;
		assert_ptr_equal(o, first); /* the arena empties at each end */
		json_decref(o);
		tfs_jsonalloc_end();
		assert_false(tfs_jsonalloc_holds(first));
	}
	/* A value made outside a scope and dropped inside one: free()d, not kept. */
	tfs_jsonalloc_begin();
	json_decref(kept);
	tfs_jsonalloc_end();
}

static void test_spills(void **state)
{
	const size_t big = 1u << 20; /* larger than an arena */
	char *text = malloc(big + 3);
	json_error_t e;
	json_t *o;

	(void)state;
	assert_non_null(text);
	text[0] = '"';
	memset(text + 1, 'x', big);
	text[big + 1] = '"';
	text[big + 2] = 0;
	tfs_jsonalloc_install();
	for (int i = 0; i < 3; i++) {
		tfs_jsonalloc_begin();
		o = json_loadb(text, big + 2, JSON_DECODE_ANY, &e);
		assert_non_null(o);
		assert_int_equal(json_string_length(o), big);
		assert_false(tfs_jsonalloc_holds(json_string_value(o))); /* malloc'd */
		json_decref(o);
		o = parse_checked(); /* right wherever it went (the string filled the arena) */
		json_decref(o);
		tfs_jsonalloc_end();
		/* The next scope has the whole arena again. */
		tfs_jsonalloc_begin();
		o = parse_checked();
		assert_true(tfs_jsonalloc_holds(o));
		json_decref(o);
		tfs_jsonalloc_end();
	}
	free(text);
}

static pthread_barrier_t all_parsed; /* the threads live, arenas and all, until each parsed */

static void *parser(void *arg)
{
	const void **root = arg;

	for (int i = 0; i < 2000; i++) {
		json_t *o;

		tfs_jsonalloc_begin();
		o = parse_checked();
		if (!*root)
			*root = o;
		assert_ptr_equal(o, *root);
		json_decref(o);
		tfs_jsonalloc_end();
	}
	pthread_barrier_wait(&all_parsed);
	return NULL;
}

static void test_threads(void **state)
{
	const void *root[4] = { 0 };
	pthread_t t[4];

	(void)state;
	tfs_jsonalloc_install();
	pthread_barrier_init(&all_parsed, NULL, 4);
	for (int i = 0; i < 4; i++)
		assert_int_equal(pthread_create(&t[i], NULL, parser, &root[i]), 0);
	for (int i = 0; i < 4; i++)
		pthread_join(t[i], NULL);
	pthread_barrier_destroy(&all_parsed);
	for (int i = 0; i < 4; i++)
		for (int j = i + 1; j < 4; j++)
			assert_ptr_not_equal(root[i], root[j]); /* an arena each */
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_scopes),
		cmocka_unit_test(test_spills),
		cmocka_unit_test(test_threads),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
