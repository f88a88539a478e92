/* SPDX-License-Identifier: MIT */
/* chunkpool: an import's chunks encoded and put on a worker pool while its thread reads ahead. */
#include "chunkpool.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/* A chunk queued: encoded and its put begun on the pool. */
struct job {
	struct tfs_work work;
	struct tfs_chunk_pool *p;
	uint8_t *raw;
	size_t len;
	struct tfs_chunk_form form;
	struct tfs_chunk_ref *dst;
};

static int job_run(struct tfs_work *w)
{
	struct job *j = (struct job *)w;
	struct tfs_chunk_pool *p = j->p;
	struct tfs_store_put *put = NULL;
	int rc = tfs_chunk_put_begin(p->s, p->ds, &j->form, j->raw, j->len, j->dst, &put);

	free(j->raw);
	free(j);
	if (put) {
		pthread_mutex_lock(&p->lock);
		if (p->nbegun < 2 * (size_t)p->max_queued) {
			p->begun[p->nbegun++] = put;
			put = NULL;
		}
		pthread_mutex_unlock(&p->lock);
	}
	/* Not reached while tfs_chunk_pool_submit keeps to the bound; ended alone if it ever is. */
	return put ? tfs_store_put_new_end(p->s, &put, 1) : rc;
}

/* Start ending the puts the jobs have begun, as one batch (tfs_chunk_pool_drain waits for
 * it). The submitting thread's. */
static int end_begun(struct tfs_chunk_pool *p)
{
	struct tfs_store_put **batch;
	size_t n;

	batch = calloc(2 * (size_t)p->max_queued, sizeof(*batch));
	if (!batch)
		return -ENOMEM;
	pthread_mutex_lock(&p->lock);
	n = p->nbegun;
	memcpy(batch, p->begun, n * sizeof(*batch));
	p->nbegun = 0;
	pthread_mutex_unlock(&p->lock);
	return tfs_put_ender_start(&p->ender, p->s, batch, n);
}

static void job_drop(struct tfs_work *w)
{
	struct job *j = (struct job *)w;

	free(j->raw);
	free(j);
}

int tfs_chunk_pool_start(struct tfs_chunk_pool *p, struct tfs_workpool *wp)
{
	p->wp = wp;
	tfs_workgroup_init(&p->jobs, p->wp);
	p->max_queued = tfs_workpool_threads(p->wp) + 1;
	p->begun = calloc(2 * (size_t)p->max_queued, sizeof(*p->begun));
	pthread_mutex_init(&p->lock, NULL);
	return p->begun ? 0 : -ENOMEM;
}

int tfs_chunk_pool_submit(struct tfs_chunk_pool *p, uint8_t *raw, size_t len,
			  const struct tfs_column *c, struct tfs_chunk_ref *dst)
{
	struct job *j = calloc(1, sizeof(*j));
	int rc = j ? tfs_workgroup_wait_below(&p->jobs, p->max_queued - 1) : -ENOMEM;
	size_t begun;

	pthread_mutex_lock(&p->lock);
	begun = p->nbegun;
	pthread_mutex_unlock(&p->lock);
	if (!rc && begun >= p->max_queued)
		rc = end_begun(p);
	if (rc) {
		free(raw);
		free(j);
		return rc;
	}
	*j = (struct job){ .work = { .run = job_run, .drop = job_drop },
			   .p = p,
			   .raw = raw,
			   .len = len,
			   .dst = dst };
	tfs_chunk_form_of(c, &j->form);
	tfs_workgroup_submit(&p->jobs, &j->work, TFS_WORK_NORMAL);
	return 0;
}

int tfs_chunk_pool_drain(struct tfs_chunk_pool *p)
{
	int rc = tfs_workgroup_wait(&p->jobs), rc2 = end_begun(p);

	rc = rc ? rc : rc2;
	rc2 = tfs_put_ender_wait(&p->ender);
	return rc ? rc : rc2;
}

void tfs_chunk_pool_stop(struct tfs_chunk_pool *p)
{
	if (!p->wp)
		return;
	tfs_workgroup_cancel(&p->jobs);
	tfs_workgroup_destroy(&p->jobs);
	tfs_workpool_destroy(p->wp);
	p->wp = NULL;
	if (p->begun)
		end_begun(p); /* what was begun is ended, never left as temporaries */
	tfs_put_ender_wait(&p->ender);
	free(p->begun);
	p->begun = NULL;
	pthread_mutex_destroy(&p->lock);
}
