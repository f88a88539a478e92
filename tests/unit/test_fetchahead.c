/* SPDX-License-Identifier: MIT */
/* Unit tests for core/fetchahead.c, over a store of this file's own whose GETs take a few
 * milliseconds (a round trip): files come whole and right to two takers, many GETs are in flight
 * at once and never more than asked, the files fetched and not yet taken stay within `ahead` and
 * the byte budget, a failed GET is its file's error alone, files taken out of order, and a stop
 * with files left untaken returns (at once when the store was cancelled). */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "fetchahead.h"

/* A store whose file "k" holds `size` bytes of k's value, after a GET of 3 ms; file `bad` fails. */
struct slow_store {
	struct tfs_store s;
	size_t size;
	long bad;
	int in_flight, most;   /* GETs at once; atomic */
	int gets, taken, lead; /* gets begun, files taken, most begun and not yet taken; atomic */
	int cancelled;
};

static int slow_get(struct tfs_store *st, const char *key, struct tfs_buf *out)
{
	struct slow_store *s = (struct slow_store *)st;
	const long k = strtol(key, NULL, 10);
	const int now = __atomic_add_fetch(&s->in_flight, 1, __ATOMIC_SEQ_CST);
	const int lead = __atomic_add_fetch(&s->gets, 1, __ATOMIC_SEQ_CST) -
			 __atomic_load_n(&s->taken, __ATOMIC_SEQ_CST);
	int rc = 0;

	for (int m = __atomic_load_n(&s->most, __ATOMIC_SEQ_CST);
	     now > m && !__atomic_compare_exchange_n(&s->most, &m, now, 0, __ATOMIC_SEQ_CST,
						     __ATOMIC_SEQ_CST);)
		;
	for (int m = __atomic_load_n(&s->lead, __ATOMIC_SEQ_CST);
	     lead > m && !__atomic_compare_exchange_n(&s->lead, &m, lead, 0, __ATOMIC_SEQ_CST,
						      __ATOMIC_SEQ_CST);)
		;
	usleep(3000);
	out->len = 0;
	if (k == s->bad)
		rc = -EIO;
	else if (tfs_buf_reserve(out, s->size) == 0) {
		memset(out->data, (int)(k & 0xff), s->size);
		out->len = s->size;
	} else
		rc = -ENOMEM;
	__atomic_sub_fetch(&s->in_flight, 1, __ATOMIC_SEQ_CST);
	return rc;
}

static void slow_cancel(struct tfs_store *st)
{
	((struct slow_store *)st)->cancelled = 1;
}

static const struct tfs_store_ops slow_ops = {
	.scheme = "slow",
	.get = slow_get,
	.cancel = slow_cancel,
};

static char names[1000][8];

static const char *name_of(void *arg, size_t i)
{
	(void)arg;
	return names[i];
}

static void slow_init(struct slow_store *s, size_t size, long bad)
{
	memset(s, 0, sizeof(*s));
	s->s.ops = &slow_ops;
	s->s.url = "slow://";
	s->size = size;
	s->bad = bad;
	for (int i = 0; i < 1000; i++)
		snprintf(names[i], sizeof(names[i]), "%d", i);
}

struct taker {
	struct tfs_fetchahead *fa;
	struct slow_store *s;
	size_t from, step, n;
	int wrong;
};

/* Take files from, from + step, ... checking each. */
static void *take_all(void *arg)
{
	struct taker *t = arg;
	struct tfs_buf b = { 0 };

	for (size_t i = t->from; i < t->n; i += t->step) {
		const int rc = tfs_fetchahead_take(t->fa, i, &b);

		__atomic_add_fetch(&t->s->taken, 1, __ATOMIC_SEQ_CST);
		if ((long)i == t->s->bad) {
			t->wrong += rc != -EIO;
			continue;
		}
		t->wrong += rc != 0 || b.len != t->s->size ||
			    (b.len && (b.data[0] != (uint8_t)(i & 0xff) ||
				       b.data[b.len - 1] != (uint8_t)(i & 0xff)));
		usleep(200); /* a decode */
	}
	tfs_buf_free(&b);
	return NULL;
}

static void test_files_come_right_many_at_once(void **state)
{
	struct slow_store s;
	struct tfs_fetchahead *fa;
	struct taker t[2];
	pthread_t th[2];

	(void)state;
	slow_init(&s, 100, 37);
	assert_int_equal(tfs_fetchahead_start(&s.s, 400, name_of, NULL, NULL, 8, 24, 1u << 20, &fa),
			 0);
	for (int k = 0; k < 2; k++) {
		t[k] = (struct taker){ .fa = fa, .s = &s, .from = (size_t)k, .step = 2, .n = 400 };
		assert_int_equal(pthread_create(&th[k], NULL, take_all, &t[k]), 0);
	}
	for (int k = 0; k < 2; k++)
		pthread_join(th[k], NULL);
	tfs_fetchahead_stop(fa);
	assert_int_equal(t[0].wrong + t[1].wrong, 0);
	assert_int_equal(s.gets, 400);
	/* 3 ms a GET against 0.1 ms a take: the fetchers are the bottleneck, all busy at once. */
	assert_true(s.most >= 4);
	assert_true(s.most <= 8);
	/* Begun and not yet taken: the ring's files, and the takers' own (a take counts after). */
	assert_true(s.lead <= 24 + 2);
	assert_false(s.cancelled);
}

static void test_bytes_held_are_bounded(void **state)
{
	struct slow_store s;
	struct tfs_fetchahead *fa;
	struct taker t;

	(void)state;
	/* 1 MiB files, 3 MiB held at most: about 4 fetched ahead, not the 32 the ring allows. */
	slow_init(&s, 1u << 20, -1);
	assert_int_equal(tfs_fetchahead_start(&s.s, 60, name_of, NULL, NULL, 8, 32, 3u << 20, &fa),
			 0);
	usleep(50000); /* the fetchers run ahead as far as they may */
	t = (struct taker){ .fa = fa, .s = &s, .from = 0, .step = 1, .n = 60 };
	take_all(&t);
	tfs_fetchahead_stop(fa);
	assert_int_equal(t.wrong, 0);
	/* Past the budget no fetch begins: at most budget / size + the fetches in flight. */
	assert_true(s.lead <= 3 + 1 + 8);
	assert_true(s.lead < 32);
}

static void test_stop_with_files_left_cancels(void **state)
{
	struct slow_store s;
	struct tfs_fetchahead *fa;
	struct tfs_buf b = { 0 };

	(void)state;
	slow_init(&s, 10, -1);
	assert_int_equal(tfs_fetchahead_start(&s.s, 1000, name_of, NULL, NULL, 4, 8, 1u << 20, &fa),
			 0);
	for (size_t i = 0; i < 10; i++)
		assert_int_equal(tfs_fetchahead_take(fa, i, &b), 0);
	tfs_store_cancel(&s.s);	 /* as an import that ends early does */
	tfs_fetchahead_stop(fa); /* returns: the fetchers wait for room, not for takers */
	assert_true(s.cancelled);
	assert_true(s.gets < 10 + 8 + 4 + 1);
	tfs_buf_free(&b);
	/* Not cancelled: the fetches in flight end, and none begins after. */
	slow_init(&s, 10, -1);
	assert_int_equal(tfs_fetchahead_start(&s.s, 1000, name_of, NULL, NULL, 4, 8, 1u << 20, &fa),
			 0);
	assert_int_equal(tfs_fetchahead_take(fa, 0, &b), 0);
	tfs_fetchahead_stop(fa);
	assert_false(s.cancelled);
	assert_true(s.gets <= 1 + 8 + 4);
	assert_int_equal(s.in_flight, 0);
	tfs_buf_free(&b);
}

static void test_taken_out_of_order(void **state)
{
	struct slow_store s;
	struct tfs_fetchahead *fa;
	struct tfs_buf b = { 0 };
	static const size_t order[] = { 1, 0, 3, 2, 5, 4, 7, 6 };

	(void)state;
	/* A slot is not reused before the files below it are taken: file 3 waits for file 0, not
	 * only for file 1, whose slot it shares, so the lowest file not taken stays known. */
	slow_init(&s, 10, -1);
	assert_int_equal(tfs_fetchahead_start(&s.s, 8, name_of, NULL, NULL, 2, 2, 1u << 20, &fa),
			 0);
	for (size_t k = 0; k < 8; k++) {
		assert_int_equal(tfs_fetchahead_take(fa, order[k], &b), 0);
		assert_int_equal(b.data[0], (uint8_t)order[k]);
		if (k == 0) {
			usleep(30000);		     /* the fetchers go as far as they may */
			assert_int_equal(s.gets, 2); /* files 0 and 1: not 3, with 0 not taken */
		}
	}
	tfs_fetchahead_stop(fa);
	tfs_buf_free(&b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_files_come_right_many_at_once),
		cmocka_unit_test(test_bytes_held_are_bounded),
		cmocka_unit_test(test_stop_with_files_left_cancels),
		cmocka_unit_test(test_taken_out_of_order),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
