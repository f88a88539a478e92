/* SPDX-License-Identifier: MIT */
/* Unit tests for core/mix: a weight is read back as it was written or refused on both sides, a
 * mixture's text parses into what made it, and a version the reader would refuse is never
 * written. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "mix.h"
#include "store.h"
#include "util.h"
#include "tmpdir_fixture.h"

static struct tfs_store *st;

static int setup(void **state)
{
	char url[160];

	(void)state;
	if (tmpdir_make("mix"))
		return -1;
	snprintf(url, sizeof(url), "file://%s/lake", tmpdir);
	return tfs_store_open(url, TFS_STORE_CREATE, &st);
}

static int teardown(void **state)
{
	(void)state;
	tfs_store_close(st);
	return tmpdir_remove();
}

static void test_weights(void **state)
{
	static const char *const good[] = { "1", "0.25", "2.5e3", "1e300", "1e-300", "+3" };
	static const char *const bad[] = { "",	  "0",	 "-1",	 "1e301", "1e999",
					   "inf", "nan", "0x10", "1.5x",  "1e" };
	double w;

	(void)state;
	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		assert_int_equal(tfs_mix_weight(good[i], &w), 0);
		assert_true(w > 0 && w <= 1e300);
	}
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_int_equal(tfs_mix_weight(bad[i], &w), -EINVAL);
}

static struct tfs_mix_source source(const char *weight)
{
	struct tfs_mix_source src = { .dataset = strdup("web"), .weight = strdup(weight) };

	assert_non_null(src.dataset);
	assert_non_null(src.weight);
	memset(src.commit.b, 0x5a, sizeof(src.commit.b));
	return src;
}

static void test_text_round_trip(void **state)
{
	struct tfs_mix m = { .name = strdup("m"), .seed = 7, .n = 2 }, back;
	struct tfs_buf text = { 0 };

	(void)state;
	m.src = calloc(2, sizeof(*m.src));
	assert_non_null(m.src);
	m.src[0] = source("0.75");
	m.src[1] = source("3");
	m.src[1].column = strdup("tokens");
	assert_int_equal(tfs_mix_text(&m, &text), 0);
	assert_int_equal(tfs_mix_parse((const char *)text.data, text.len, "m", &back), 0);
	assert_string_equal(back.name, "m");
	assert_int_equal(back.seed, 7);
	assert_int_equal(back.n, 2);
	assert_string_equal(back.src[0].weight, "0.75");
	assert_true(back.src[0].w == 0.75);
	assert_null(back.src[0].column);
	assert_string_equal(back.src[1].column, "tokens");
	assert_memory_equal(back.src[1].commit.b, m.src[1].commit.b, sizeof(m.src[1].commit.b));
	tfs_mix_free(&back);
	tfs_buf_free(&text);
	tfs_mix_free(&m);
}

/* A weight past a double's range was once written as it was given, and the mixture then failed
 * to load ("not a mixture version"): the commit refuses it and writes nothing. */
static void test_commit_refuses_what_it_would_not_read(void **state)
{
	struct tfs_mix m = { .name = strdup("bad"), .n = 1 }, head;

	(void)state;
	m.src = calloc(1, sizeof(*m.src));
	assert_non_null(m.src);
	m.src[0] = source("1e999");
	assert_int_equal(tfs_mix_commit(st, &m, 1), -EINVAL);
	assert_int_equal(tfs_mix_head(st, "bad", &head), -ENOENT);
	assert_int_equal(tfs_mix_any(st), 0);
	free(m.src[0].weight);
	m.src[0].weight = strdup("2");
	assert_int_equal(tfs_mix_commit(st, &m, 1), 0);
	assert_int_equal(tfs_mix_head(st, "bad", &head), 0);
	assert_true(head.n == 1 && head.src[0].w == 2);
	tfs_mix_free(&head);
	tfs_mix_free(&m);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_weights),
		cmocka_unit_test(test_text_round_trip),
		cmocka_unit_test(test_commit_refuses_what_it_would_not_read),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
