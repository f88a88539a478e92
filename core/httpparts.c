/* SPDX-License-Identifier: MIT */
/* httpparts: requests run side by side, and whole objects fetched as ranges of one, many at
 * once (an object store caps what one connection brings). */
#include "httpparts.h"

#include <assert.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#define SIZED_MIN (64u << 10) /* a smaller buffer says nothing of the object's size */

/* tfs_http_parallel's shared state. */
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

int tfs_http_parallel(struct tfs_workpool *pool, enum tfs_work_prio prio, size_t n,
		      unsigned parallel, int (*fn)(void *arg, size_t i), void *arg)
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

struct parts {
	tfs_http_range_fn fn;
	void *arg;
	uint8_t *base;
	uint64_t total, first, part; /* parts cover [first, total) */
};

static int fetch_part(void *arg, size_t i)
{
	const struct parts *p = arg;
	const uint64_t off = p->first + i * p->part;
	const size_t len = (size_t)(off + p->part > p->total ? p->total - off : p->part);
	int64_t total;
	ssize_t n = p->fn(p->arg, off, p->base + off, len, &total);

	if (n < 0)
		return (int)n;
	/* The object changed size under us, or a range came back short. */
	if ((size_t)n != len || (total >= 0 && (uint64_t)total != p->total))
		return -EIO;
	return 0;
}

/* Fetch p's parts [p->first, p->total) into out, which holds the bytes before p->first, up to
 * `parallel` at a time; out then holds the whole object, NUL-terminated. */
static int fetch_parts(struct tfs_workpool *pool, enum tfs_work_prio prio, struct parts *p,
		       unsigned parallel, struct tfs_buf *out)
{
	int rc;

	assert(out->len == p->first);
	if (p->total > SIZE_MAX / 2)
		return -EFBIG;
	rc = tfs_buf_reserve(out, (size_t)(p->total - p->first));
	if (rc)
		return rc;
	p->base = out->data;
	rc = tfs_http_parallel(pool, prio, (size_t)((p->total - p->first + p->part - 1) / p->part),
			       parallel, fetch_part, p);
	if (rc)
		return rc;
	out->len = (size_t)p->total;
	out->data[out->len] = 0;
	return 0;
}

int tfs_http_get_parts(struct tfs_workpool *pool, tfs_http_range_fn fn, void *arg,
		       uint64_t part_size, unsigned parallel, struct tfs_buf *out)
{
	struct parts p = { .fn = fn, .arg = arg, .part = part_size };
	int64_t total = -1;
	uint64_t first = part_size;
	ssize_t n;
	int rc;

	/* A buffer the caller sized for the object (it knew the size) takes it in one request, and
	 * is never reallocated: a pooled buffer stays in its pool's size class. */
	if (out->cap > SIZED_MIN && out->cap - 1 < first)
		first = out->cap - 1;
	out->len = 0;
	rc = tfs_buf_reserve(out, (size_t)first);
	if (rc)
		return rc;
	n = fn(arg, 0, out->data, (size_t)first, &total);
	if (n < 0)
		return (int)n;
	out->len = (size_t)n;
	out->data[out->len] = 0;
	if ((uint64_t)n < first || total <= (int64_t)n)
		return total >= 0 && total != n ? -EIO : 0;
	p.total = (uint64_t)total;
	p.first = first;
	return fetch_parts(pool, TFS_WORK_NORMAL, &p, parallel, out);
}

/* Below this a part's round trip costs more than what splitting saves of its transfer. */
#define SPLIT_PART_MIN (1u << 20)

int tfs_http_get_split(struct tfs_workpool *pool, tfs_http_range_fn fn, void *arg, uint64_t size,
		       unsigned parallel, struct tfs_buf *out)
{
	struct parts p = { .fn = fn, .arg = arg, .total = size, .first = 0 };

	if (parallel < 1)
		parallel = 1;
	p.part = (size + parallel - 1) / parallel;
	if (p.part < SPLIT_PART_MIN)
		p.part = SPLIT_PART_MIN;
	out->len = 0;
	return fetch_parts(pool, TFS_WORK_NORMAL, &p, parallel, out);
}

int tfs_http_get_whole(struct tfs_http *h, tfs_http_range_fn fn, void *arg, uint64_t size,
		       struct tfs_buf *out)
{
	const struct tfs_config_http *cfg = tfs_http_config(h);
	struct tfs_workpool *pool = tfs_http_pool(h);

	return size ? tfs_http_get_split(pool, fn, arg, size, cfg->parallel, out)
		    : tfs_http_get_parts(pool, fn, arg, cfg->part_size, cfg->parallel, out);
}
