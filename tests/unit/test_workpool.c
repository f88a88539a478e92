/* SPDX-License-Identifier: MIT */
/* Unit tests for core/workpool.c: priority order, group waits and errors, cancellation, a task
 * that waits on a group of its own in a pool with one worker, and what a waiting owner runs (any
 * task as urgent, or its own group's alone). */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "workpool.h"

/* A gate: a task that holds the only worker until opened. */
struct gate {
	struct tfs_work w;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	int open, entered;
};

static int gate_run(struct tfs_work *w)
{
	struct gate *g = (struct gate *)w;

	pthread_mutex_lock(&g->lock);
	g->entered = 1;
	pthread_cond_broadcast(&g->cond);
	while (!g->open)
		pthread_cond_wait(&g->cond, &g->lock);
	pthread_mutex_unlock(&g->lock);
	return 0;
}

static void gate_init(struct gate *g)
{
	memset(g, 0, sizeof(*g));
	g->w.run = gate_run;
	pthread_mutex_init(&g->lock, NULL);
	pthread_cond_init(&g->cond, NULL);
}

static void gate_wait_entered(struct gate *g)
{
	pthread_mutex_lock(&g->lock);
	while (!g->entered)
		pthread_cond_wait(&g->cond, &g->lock);
	pthread_mutex_unlock(&g->lock);
}

static void gate_open(struct gate *g)
{
	pthread_mutex_lock(&g->lock);
	g->open = 1;
	pthread_cond_broadcast(&g->cond);
	pthread_mutex_unlock(&g->lock);
}

/* A task that records the order it ran in, and returns rc. */
struct rec {
	struct tfs_work w;
	int id, rc;
	int *log, *nlog; /* only touched by the one worker, or after the waits */
	int dropped;
};

static int rec_run(struct tfs_work *w)
{
	struct rec *r = (struct rec *)w;

	r->log[(*r->nlog)++] = r->id;
	return r->rc;
}

static void rec_drop(struct tfs_work *w)
{
	((struct rec *)w)->dropped = 1;
}

static void test_priorities_then_fifo(void **state)
{
	static const enum tfs_work_prio prio[] = {
		TFS_WORK_AHEAD,	 TFS_WORK_NORMAL, TFS_WORK_AHEAD,
		TFS_WORK_WAITED, TFS_WORK_NORMAL, TFS_WORK_WAITED
	};
	static const int want[] = { 3, 5, 1, 4, 0, 2 };
	enum { N = sizeof(prio) / sizeof(prio[0]) };
	struct tfs_workpool *p;
	struct tfs_workgroup g;
	struct gate gate;
	struct rec r[N];
	int log[N], nlog = 0;

	(void)state;
	assert_int_equal(tfs_workpool_create(1, &p), 0);
	tfs_workgroup_init(&g, p);
	gate_init(&gate);
	tfs_workgroup_submit(&g, &gate.w, TFS_WORK_NORMAL);
	gate_wait_entered(&gate);
	for (int i = 0; i < N; i++) {
		r[i] = (struct rec){ .w = { .run = rec_run }, .id = i, .log = log, .nlog = &nlog };
		tfs_workgroup_submit(&g, &r[i].w, prio[i]);
	}
	assert_int_equal(tfs_workpool_queued(p), N);
	gate_open(&gate);
	/* Wait without taking tasks ourselves: the order is the worker's. */
	while (tfs_workpool_queued(p))
		usleep(1000);
	assert_int_equal(tfs_workgroup_wait(&g), 0);
	assert_int_equal(nlog, N);
	assert_memory_equal(log, want, sizeof(want));
	tfs_workgroup_destroy(&g);
	tfs_workpool_destroy(p);
}

static void *cancel_main(void *arg)
{
	tfs_workgroup_cancel(arg);
	return NULL;
}

static void test_group_error_wait_below_and_cancel(void **state)
{
	enum { N = 8 };
	struct tfs_workpool *p;
	struct tfs_workgroup g;
	struct gate gate;
	struct rec r[N];
	int log[N], nlog = 0, ran = 0, dropped = 0;
	pthread_t canceller;

	(void)state;
	assert_int_equal(tfs_workpool_create(1, &p), 0);
	tfs_workgroup_init(&g, p);
	gate_init(&gate);
	tfs_workgroup_submit(&g, &gate.w, TFS_WORK_NORMAL);
	gate_wait_entered(&gate);
	for (int i = 0; i < N; i++) {
		r[i] = (struct rec){ .w = { .run = rec_run, .drop = rec_drop },
				     .id = i,
				     .rc = i == 2   ? -EIO
					   : i == 5 ? -ENOSPC
						    : 0,
				     .log = log,
				     .nlog = &nlog };
		tfs_workgroup_submit(&g, &r[i].w, TFS_WORK_NORMAL);
	}
	/* The worker is held: the waiter runs the group's tasks itself, down to 1 + 5 pending. */
	assert_int_equal(tfs_workgroup_wait_below(&g, 6), -EIO);
	assert_int_equal(nlog, 3);
	/* The rest never start: dropped while the gate holds the worker, and cancel waits for the
	 * gate, which still counts, to end. */
	assert_int_equal(pthread_create(&canceller, NULL, cancel_main, &g), 0);
	while (tfs_workpool_queued(p))
		usleep(1000);
	gate_open(&gate);
	pthread_join(canceller, NULL);
	for (int i = 0; i < N; i++) {
		ran += i < nlog;
		dropped += r[i].dropped;
	}
	assert_int_equal(ran, 3);
	assert_int_equal(dropped, N - 3);
	assert_int_equal(g.pending, 0);
	assert_int_equal(g.err, -EIO); /* the first error stays */
	tfs_workgroup_destroy(&g);
	tfs_workpool_destroy(p);
}

/* A task that splits itself into parts on a group of its own and waits for them. */
struct outer {
	struct tfs_work w;
	struct tfs_workpool *p;
	int parts_done;
	pthread_mutex_t lock;
};

struct part {
	struct tfs_work w;
	struct outer *o;
};

static int part_run(struct tfs_work *w)
{
	struct part *pt = (struct part *)w;

	pthread_mutex_lock(&pt->o->lock);
	pt->o->parts_done++;
	pthread_mutex_unlock(&pt->o->lock);
	return 0;
}

static int outer_run(struct tfs_work *w)
{
	struct outer *o = (struct outer *)w;
	struct tfs_workgroup g;
	struct part parts[4];
	int rc;

	tfs_workgroup_init(&g, o->p);
	for (int i = 0; i < 4; i++) {
		parts[i] = (struct part){ .w = { .run = part_run }, .o = o };
		tfs_workgroup_submit(&g, &parts[i].w, TFS_WORK_NORMAL);
	}
	rc = tfs_workgroup_wait(&g);
	tfs_workgroup_destroy(&g);
	return rc;
}

static void test_nested_groups_on_one_worker(void **state)
{
	enum { N = 6 };
	struct tfs_workpool *p;
	struct tfs_workgroup g;
	struct outer o[N];

	(void)state;
	/* Every worker busy with a task that waits on its parts: no deadlock. */
	assert_int_equal(tfs_workpool_create(1, &p), 0);
	tfs_workgroup_init(&g, p);
	for (int i = 0; i < N; i++) {
		o[i] = (struct outer){ .w = { .run = outer_run }, .p = p };
		pthread_mutex_init(&o[i].lock, NULL);
		tfs_workgroup_submit(&g, &o[i].w, TFS_WORK_AHEAD);
	}
	assert_int_equal(tfs_workgroup_wait(&g), 0);
	for (int i = 0; i < N; i++)
		assert_int_equal(o[i].parts_done, 4);
	tfs_workgroup_destroy(&g);
	tfs_workpool_destroy(p);
}

/* Where a task ran: on the owner while it waited for a group of waited tasks, or not. */
struct where {
	struct tfs_work w;
	pthread_t owner;
	int *owner_waits_items;
	int ran, ran_in_items_wait;
};

static int where_run(struct tfs_work *w)
{
	struct where *t = (struct where *)w;

	t->ran = 1;
	t->ran_in_items_wait = pthread_equal(pthread_self(), t->owner) &&
			       __atomic_load_n(t->owner_waits_items, __ATOMIC_SEQ_CST);
	return 0;
}

static void *open_later(void *arg)
{
	usleep(50 * 1000);
	gate_open(arg);
	return NULL;
}

/* A pool made with_caller, of two threads (one worker): the owner waiting for a group of waited
 * tasks, whose task the worker holds, runs another waited task meanwhile, and leaves a task of a
 * lower priority (a chunk's encoding, in an import) to the workers or to the wait on its group. */
static void test_owner_runs_as_urgent_tasks_only(void **state)
{
	struct tfs_workpool *p;
	struct tfs_workgroup items, other, puts;
	struct gate gate;
	int waiting = 0;
	struct where item = { .w = { .run = where_run },
			      .owner = pthread_self(),
			      .owner_waits_items = &waiting };
	struct where put = item;
	pthread_t opener;

	(void)state;
	assert_int_equal(tfs_workpool_create_with_caller(2, &p), 0);
	tfs_workgroup_init(&items, p);
	tfs_workgroup_init(&other, p);
	tfs_workgroup_init(&puts, p);
	gate_init(&gate);
	tfs_workgroup_submit(&items, &gate.w, TFS_WORK_WAITED);
	gate_wait_entered(&gate); /* the worker holds it */
	tfs_workgroup_submit(&puts, &put.w, TFS_WORK_NORMAL);
	tfs_workgroup_submit(&other, &item.w, TFS_WORK_WAITED);
	assert_int_equal(pthread_create(&opener, NULL, open_later, &gate), 0);
	__atomic_store_n(&waiting, 1, __ATOMIC_SEQ_CST);
	assert_int_equal(tfs_workgroup_wait(&items), 0);
	__atomic_store_n(&waiting, 0, __ATOMIC_SEQ_CST);
	pthread_join(opener, NULL);
	assert_true(item.ran && item.ran_in_items_wait);
	/* put's fields only once its group is done: a worker may be running it now. */
	assert_int_equal(tfs_workgroup_wait(&puts), 0);
	assert_true(put.ran);
	assert_false(put.ran_in_items_wait);
	assert_int_equal(tfs_workgroup_wait(&other), 0);
	tfs_workgroup_destroy(&items);
	tfs_workgroup_destroy(&other);
	tfs_workgroup_destroy(&puts);
	tfs_workpool_destroy(p);
}

/* The same pool: an owner waiting for its group with tfs_workgroup_wait_own runs none of another
 * group's tasks meanwhile, however urgent (a block's parse, in an import, held up every row);
 * only its group's own queued tasks, when no worker has them. */
static void test_wait_own_runs_the_group_only(void **state)
{
	struct tfs_workpool *p;
	struct tfs_workgroup fields, other;
	struct gate gate;
	int waiting = 0, log[2], nlog = 0;
	struct where item = { .w = { .run = where_run },
			      .owner = pthread_self(),
			      .owner_waits_items = &waiting };
	struct rec own = { .w = { .run = rec_run }, .id = 7, .log = log, .nlog = &nlog };
	pthread_t opener;

	(void)state;
	assert_int_equal(tfs_workpool_create_with_caller(2, &p), 0);
	tfs_workgroup_init(&fields, p);
	tfs_workgroup_init(&other, p);
	gate_init(&gate);
	tfs_workgroup_submit(&fields, &gate.w, TFS_WORK_WAITED);
	gate_wait_entered(&gate); /* the worker holds it */
	tfs_workgroup_submit(&other, &item.w, TFS_WORK_WAITED);
	tfs_workgroup_submit(&fields, &own.w, TFS_WORK_WAITED);
	assert_int_equal(pthread_create(&opener, NULL, open_later, &gate), 0);
	__atomic_store_n(&waiting, 1, __ATOMIC_SEQ_CST);
	assert_int_equal(tfs_workgroup_wait_own(&fields), 0);
	__atomic_store_n(&waiting, 0, __ATOMIC_SEQ_CST);
	pthread_join(opener, NULL);
	assert_int_equal(nlog, 1); /* its own queued task: run (on this thread; the worker held) */
	assert_int_equal(log[0], 7);
	/* item's fields only once its group is done: the worker may be running it now. */
	assert_int_equal(tfs_workgroup_wait(&other), 0);
	assert_true(item.ran);
	assert_false(item.ran_in_items_wait);
	tfs_workgroup_destroy(&fields);
	tfs_workgroup_destroy(&other);
	tfs_workpool_destroy(p);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_priorities_then_fifo),
		cmocka_unit_test(test_group_error_wait_below_and_cancel),
		cmocka_unit_test(test_nested_groups_on_one_worker),
		cmocka_unit_test(test_owner_runs_as_urgent_tasks_only),
		cmocka_unit_test(test_wait_own_runs_the_group_only),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
