/* SPDX-License-Identifier: MIT */
/* Unit tests for core/pipeline.c over core/workpool.c: items used in the order they were made
 * whatever order their work ends in, no more than the window made and not used, an error in
 * `use` ending the pipeline; and a pool made with its caller: no worker at one thread (every
 * task on the caller), several busy at once with more. */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "pipeline.h"
#include "workpool.h"

struct item {
	unsigned seq, squared;
	pthread_t ran_on;
	int *buf; /* kept from one use to the next, freed by clear */
};

struct run {
	unsigned next_used, made, max_ahead, fail_at;
	unsigned clears;
};

static int item_work(void *p)
{
	struct item *it = p;
	struct timespec ts = { 0, (long)(it->seq * 7919 % 5) * 200000 };

	nanosleep(&ts, NULL); /* items end out of order */
	it->squared = it->seq * it->seq;
	it->ran_on = pthread_self();
	return 0;
}

static struct run *g_run;

static int item_use(void *arg, void *p)
{
	struct run *r = arg;
	struct item *it = p;

	assert_int_equal(it->seq, r->next_used);
	assert_int_equal(it->squared, it->seq * it->seq);
	if (r->made - r->next_used > r->max_ahead)
		r->max_ahead = r->made - r->next_used;
	r->next_used++;
	return it->seq == r->fail_at ? -EPIPE : 0;
}

static void item_clear(void *p)
{
	struct item *it = p;

	free(it->buf);
	it->buf = NULL;
	g_run->clears++;
}

static const struct tfs_pipeline_ops ops = { item_work, item_use, item_clear };

static void run_items(unsigned threads, unsigned window, unsigned n, struct run *r, int *rc)
{
	struct tfs_workpool *pool;
	struct tfs_pipeline *p;

	g_run = r;
	assert_int_equal(tfs_workpool_create_with_caller(threads, &pool), 0);
	assert_int_equal(tfs_workpool_threads(pool), threads);
	assert_int_equal(tfs_pipeline_create(pool, sizeof(struct item), window, &ops, r, &p), 0);
	*rc = 0;
	for (unsigned i = 0; i < n; i++) {
		struct item *it = tfs_pipeline_next(p, rc);

		if (!it)
			break;
		if (!it->buf)
			it->buf = malloc(64);
		it->seq = i;
		r->made = i + 1;
		tfs_pipeline_submit(p);
	}
	if (!*rc)
		*rc = tfs_pipeline_drain(p);
	tfs_pipeline_free(p);
	tfs_workpool_destroy(pool);
}

static void test_order_and_window(void **state)
{
	(void)state;
	for (unsigned threads = 1; threads <= 4; threads++) {
		struct run r = { .fail_at = UINT32_MAX };
		int rc;

		run_items(threads, 5, 200, &r, &rc);
		assert_int_equal(rc, 0);
		assert_int_equal(r.next_used, 200);
		assert_true(r.max_ahead <= 5);
		assert_int_equal(r.clears, 5); /* every slot cleared once, at the end */
	}
}

static void test_error_in_use_ends_it(void **state)
{
	struct run r = { .fail_at = 17 };
	int rc;

	(void)state;
	run_items(3, 4, 100, &r, &rc);
	assert_int_equal(rc, -EPIPE);
	assert_int_equal(r.next_used, 18); /* nothing used after the error */
	assert_true(r.made <= 18 + 4);	   /* nor made more than a window past it */
}

/* A task that waits (up to a second) for another to be running at the same time. */
struct meet {
	struct tfs_work w;
	pthread_t ran_on;
};

static unsigned running;

static int meet_run(struct tfs_work *w)
{
	struct meet *m = (struct meet *)w;

	m->ran_on = pthread_self();
	__atomic_add_fetch(&running, 1, __ATOMIC_SEQ_CST);
	for (int i = 0; i < 1000 && __atomic_load_n(&running, __ATOMIC_SEQ_CST) < 2; i++)
		usleep(1000);
	return 0;
}

static void test_pool_with_caller(void **state)
{
	struct tfs_workpool *pool;
	struct tfs_workgroup g;
	struct meet m[4];

	(void)state;
	/* One thread: no worker; the caller runs every task while it waits. */
	running = 0;
	assert_int_equal(tfs_workpool_create_with_caller(1, &pool), 0);
	tfs_workgroup_init(&g, pool);
	for (int i = 0; i < 4; i++) {
		m[i] = (struct meet){ .w = { .run = meet_run } };
		tfs_workgroup_submit(&g, &m[i].w, TFS_WORK_NORMAL);
	}
	assert_int_equal(tfs_workgroup_wait(&g), 0);
	for (int i = 0; i < 4; i++)
		assert_true(pthread_equal(m[i].ran_on, pthread_self()));
	assert_int_equal(tfs_workpool_busy_peak(pool), 1);
	tfs_workgroup_destroy(&g);
	tfs_workpool_destroy(pool);

	/* Two threads: the worker and the waiting caller run tasks at once. */
	running = 0;
	assert_int_equal(tfs_workpool_create_with_caller(2, &pool), 0);
	tfs_workgroup_init(&g, pool);
	for (int i = 0; i < 2; i++) {
		m[i] = (struct meet){ .w = { .run = meet_run } };
		tfs_workgroup_submit(&g, &m[i].w, TFS_WORK_NORMAL);
	}
	assert_int_equal(tfs_workgroup_wait(&g), 0);
	assert_int_equal(tfs_workpool_busy_peak(pool), 2);
	assert_false(pthread_equal(m[0].ran_on, m[1].ran_on));
	tfs_workgroup_destroy(&g);
	tfs_workpool_destroy(pool);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_order_and_window),
		cmocka_unit_test(test_error_in_use_ends_it),
		cmocka_unit_test(test_pool_with_caller),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
