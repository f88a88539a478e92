/* SPDX-License-Identifier: MIT */
/* workpool: worker threads serving prioritised queues of intrusive tasks, in groups; and
 * tfs_parallel, n calls side by side on a pool or on threads of their own. */
#include "workpool.h"

#include <assert.h>
#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>

struct queue {
	struct tfs_work *head, *tail;
};

struct tfs_workpool {
	pthread_mutex_t lock;
	pthread_cond_t work;		/* a task was queued, or stop */
	struct queue q[TFS_WORK_NPRIO]; /* protected by lock */
	size_t nqueued;			/* protected by lock */
	int stop;			/* protected by lock */
	unsigned busy, busy_peak; /* tasks running now, and at most so far: protected by lock */
	int caller_works;	  /* constant: a waiting owner runs any queued task */
	unsigned nthreads;	  /* constant once created */
	pthread_t *threads;
};

/* Take the first queued task of priority upto or more urgent, of g only when g is given (NULL:
 * any). Called with p->lock. */
static struct tfs_work *take_upto(struct tfs_workpool *p, const struct tfs_workgroup *g, int upto)
{
	for (int i = 0; i <= upto; i++) {
		struct queue *q = &p->q[i];

		for (struct tfs_work **at = &q->head, *prev = NULL; *at;
		     prev = *at, at = &(*at)->next) {
			struct tfs_work *w = *at;

			if (g && w->group != g)
				continue;
			*at = w->next;
			if (q->tail == w)
				q->tail = prev;
			w->next = NULL;
			p->nqueued--;
			return w;
		}
	}
	return NULL;
}

static struct tfs_work *take(struct tfs_workpool *p, const struct tfs_workgroup *g)
{
	return take_upto(p, g, TFS_WORK_NPRIO - 1);
}

/* Run w without the lock, then account for it in its group. Called and returns with p->lock. */
static void run_one(struct tfs_workpool *p, struct tfs_work *w)
{
	struct tfs_workgroup *g = w->group;
	int rc;

	if (++p->busy > p->busy_peak)
		p->busy_peak = p->busy;
	pthread_mutex_unlock(&p->lock);
	rc = w->run(w); /* w may be freed by now: only g is used below */
	pthread_mutex_lock(&p->lock);
	p->busy--;
	if (rc && !g->err)
		g->err = rc;
	assert(g->pending > 0);
	g->pending--;
	pthread_cond_broadcast(&g->changed);
}

static void *worker(void *arg)
{
	struct tfs_workpool *p = arg;

	pthread_mutex_lock(&p->lock);
	for (;;) {
		struct tfs_work *w = take(p, NULL);

		if (w) {
			run_one(p, w);
			continue;
		}
		if (p->stop)
			break;
		pthread_cond_wait(&p->work, &p->lock);
	}
	pthread_mutex_unlock(&p->lock);
	return NULL;
}

/* nthreads workers (0: none, the waiting owners run every task). */
static int create(unsigned nthreads, int caller_works, struct tfs_workpool **out)
{
	struct tfs_workpool *p = calloc(1, sizeof(*p));
	int rc = 0;

	if (!p)
		return -ENOMEM;
	p->caller_works = caller_works;
	p->threads = calloc(nthreads ? nthreads : 1, sizeof(*p->threads));
	if (!p->threads) {
		free(p);
		return -ENOMEM;
	}
	pthread_mutex_init(&p->lock, NULL);
	pthread_cond_init(&p->work, NULL);
	for (; p->nthreads < nthreads; p->nthreads++) {
		rc = -pthread_create(&p->threads[p->nthreads], NULL, worker, p);
		if (rc)
			break;
	}
	if (!p->nthreads && nthreads) {
		tfs_workpool_destroy(p);
		return rc;
	}
	*out = p;
	return 0;
}

int tfs_workpool_create(unsigned nthreads, struct tfs_workpool **out)
{
	return create(nthreads ? nthreads : 1, 0, out);
}

int tfs_workpool_create_with_caller(unsigned nthreads, struct tfs_workpool **out)
{
	return create(nthreads > 1 ? nthreads - 1 : 0, 1, out);
}

void tfs_workpool_destroy(struct tfs_workpool *p)
{
	if (!p)
		return;
	pthread_mutex_lock(&p->lock);
	p->stop = 1;
	pthread_cond_broadcast(&p->work);
	pthread_mutex_unlock(&p->lock);
	for (unsigned i = 0; i < p->nthreads; i++)
		pthread_join(p->threads[i], NULL);
	assert(!p->nqueued);
	pthread_cond_destroy(&p->work);
	pthread_mutex_destroy(&p->lock);
	free(p->threads);
	free(p);
}

unsigned tfs_workpool_threads(const struct tfs_workpool *p)
{
	return p->nthreads + (unsigned)p->caller_works;
}

unsigned tfs_workpool_busy_peak(struct tfs_workpool *p)
{
	unsigned n;

	pthread_mutex_lock(&p->lock);
	n = p->busy_peak;
	pthread_mutex_unlock(&p->lock);
	return n;
}

size_t tfs_workpool_queued(struct tfs_workpool *p)
{
	size_t n;

	pthread_mutex_lock(&p->lock);
	n = p->nqueued;
	pthread_mutex_unlock(&p->lock);
	return n;
}

void tfs_workgroup_init(struct tfs_workgroup *g, struct tfs_workpool *p)
{
	g->pool = p;
	g->pending = 0;
	g->err = 0;
	pthread_cond_init(&g->changed, NULL);
}

void tfs_workgroup_destroy(struct tfs_workgroup *g)
{
	assert(!g->pending);
	pthread_cond_destroy(&g->changed);
}

void tfs_workgroup_submit(struct tfs_workgroup *g, struct tfs_work *w, enum tfs_work_prio prio)
{
	struct tfs_workpool *p = g->pool;
	struct queue *q = &p->q[prio];

	assert(prio >= 0 && prio < TFS_WORK_NPRIO);
	w->group = g;
	w->next = NULL;
	pthread_mutex_lock(&p->lock);
	if (q->tail)
		q->tail->next = w;
	else
		q->head = w;
	q->tail = w;
	p->nqueued++;
	g->pending++;
	g->prio = (int)prio;
	pthread_cond_signal(&p->work);
	pthread_mutex_unlock(&p->lock);
}

/* others: a pool made with_caller lets this thread run other groups' tasks while it waits. */
static int wait_below(struct tfs_workgroup *g, unsigned left, int others)
{
	struct tfs_workpool *p = g->pool;
	int rc;

	pthread_mutex_lock(&p->lock);
	while (g->pending > left) {
		struct tfs_work *w = take(p, g);

		if (!w && others && p->caller_works)
			w = take_upto(p, NULL, g->prio);
		if (w)
			run_one(p, w);
		else
			pthread_cond_wait(&g->changed, &p->lock);
	}
	rc = g->err;
	pthread_mutex_unlock(&p->lock);
	return rc;
}

int tfs_workgroup_wait_below(struct tfs_workgroup *g, unsigned left)
{
	return wait_below(g, left, 1);
}

int tfs_workgroup_wait(struct tfs_workgroup *g)
{
	return wait_below(g, 0, 1);
}

int tfs_workgroup_wait_own(struct tfs_workgroup *g)
{
	return wait_below(g, 0, 0);
}

void tfs_workgroup_cancel(struct tfs_workgroup *g)
{
	struct tfs_workpool *p = g->pool;
	struct tfs_work *w;

	pthread_mutex_lock(&p->lock);
	while ((w = take(p, g))) {
		g->pending--;
		pthread_mutex_unlock(&p->lock);
		if (w->drop)
			w->drop(w);
		pthread_mutex_lock(&p->lock);
	}
	while (g->pending)
		pthread_cond_wait(&g->changed, &p->lock);
	pthread_mutex_unlock(&p->lock);
}

/* tfs_parallel's shared state. */
struct tasks {
	int (*fn)(void *arg, size_t i);
	void *arg;
	size_t n;
	atomic_size_t next; /* the next task to hand out */
	atomic_int err;	    /* the first failure, 0 while none */
};

static void tasks_loop(struct tasks *t)
{
	size_t i;

	while ((i = atomic_fetch_add(&t->next, 1)) < t->n && !atomic_load(&t->err)) {
		int rc = t->fn(t->arg, i), zero = 0;

		if (rc)
			atomic_compare_exchange_strong(&t->err, &zero, rc);
	}
}

static void *tasks_thread(void *arg)
{
	tasks_loop(arg);
	return NULL;
}

/* One helper on the pool: it takes tasks from the same counter as the caller. */
struct helper {
	struct tfs_work work;
	struct tasks *t;
};

static int helper_run(struct tfs_work *w)
{
	tasks_loop(((struct helper *)w)->t);
	return 0;
}

int tfs_parallel(struct tfs_workpool *pool, enum tfs_work_prio prio, size_t n, unsigned parallel,
		 int (*fn)(void *arg, size_t i), void *arg)
{
	struct tasks t = { .fn = fn, .arg = arg, .n = n };
	struct helper helpers[64];
	struct tfs_workgroup g;
	pthread_t tids[64];
	unsigned nt = 0;

	atomic_init(&t.next, 0);
	atomic_init(&t.err, 0);
	if (parallel > 64)
		parallel = 64;
	if (pool) {
		/* Helpers that a busy pool has not started by the time the caller is done find
		 * nothing left, and are run (empty) by the caller's wait. */
		tfs_workgroup_init(&g, pool);
		for (unsigned i = 1; i < parallel && i < n; i++, nt++) {
			helpers[nt] = (struct helper){ .work = { .run = helper_run }, .t = &t };
			tfs_workgroup_submit(&g, &helpers[nt].work, prio);
		}
		tasks_loop(&t);
		tfs_workgroup_wait(&g);
		tfs_workgroup_destroy(&g);
		return atomic_load(&t.err);
	}
	for (unsigned i = 1; i < parallel && i < n; i++)
		if (!pthread_create(&tids[nt], NULL, tasks_thread, &t))
			nt++;
	tasks_loop(&t);
	for (unsigned i = 0; i < nt; i++)
		pthread_join(tids[i], NULL);
	return atomic_load(&t.err);
}
