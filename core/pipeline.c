/* SPDX-License-Identifier: MIT */
/* pipeline: a ring of item slots over the work pool; each slot its own group, so that the owner
 * waits for exactly the item it uses next (running it itself if no worker has started it). */
#include "pipeline.h"

#include <errno.h>
#include <stdalign.h>
#include <stdint.h>
#include <stdlib.h>

struct slot {
	struct tfs_work work; /* first: the task is the slot */
	struct tfs_workgroup g;
	struct tfs_pipeline *p;
	alignas(max_align_t) unsigned char item[];
};

struct tfs_pipeline {
	struct tfs_workpool *pool;
	const struct tfs_pipeline_ops *ops;
	void *arg;
	size_t slot_size;
	unsigned window;
	unsigned long long made, used; /* items submitted, and used, so far */
	int err;		       /* the first error: the pipeline has ended */
	unsigned char *slots;
};

static struct slot *slot_at(struct tfs_pipeline *p, unsigned long long seq)
{
	return (struct slot *)(void *)(p->slots + (size_t)(seq % p->window) * p->slot_size);
}

static int slot_run(struct tfs_work *w)
{
	struct slot *s = (struct slot *)w;

	return s->p->ops->work(s->item);
}

int tfs_pipeline_create(struct tfs_workpool *pool, size_t item_size, unsigned window,
			const struct tfs_pipeline_ops *ops, void *arg, struct tfs_pipeline **out)
{
	struct tfs_pipeline *p = calloc(1, sizeof(*p));
	const size_t a = alignof(max_align_t);

	if (!p)
		return -ENOMEM;
	p->pool = pool;
	p->ops = ops;
	p->arg = arg;
	p->window = window ? window : 1;
	p->slot_size = (sizeof(struct slot) + item_size + a - 1) / a * a;
	p->slots = calloc(p->window, p->slot_size);
	if (!p->slots) {
		free(p);
		return -ENOMEM;
	}
	for (unsigned i = 0; i < p->window; i++) {
		struct slot *s = slot_at(p, i);

		s->p = p;
		tfs_workgroup_init(&s->g, pool);
	}
	*out = p;
	return 0;
}

/* Wait for the oldest item's work and use it. */
static int use_oldest(struct tfs_pipeline *p)
{
	struct slot *s = slot_at(p, p->used);
	int rc = tfs_workgroup_wait(&s->g);

	p->used++;
	if (!rc)
		rc = p->ops->use(p->arg, s->item);
	if (rc && !p->err)
		p->err = rc;
	return p->err;
}

void *tfs_pipeline_next(struct tfs_pipeline *p, int *rc)
{
	if (!p->err && p->made - p->used == p->window)
		use_oldest(p);
	*rc = p->err;
	return p->err ? NULL : slot_at(p, p->made)->item;
}

void tfs_pipeline_submit(struct tfs_pipeline *p)
{
	struct slot *s = slot_at(p, p->made++);

	s->work = (struct tfs_work){ .run = slot_run };
	/* Waited for: the owner, waiting for its oldest item, runs others, and not the
	 * chunk encodings its rows make (TFS_WORK_NORMAL), which would keep it from making
	 * the next items. */
	tfs_workgroup_submit(&s->g, &s->work, TFS_WORK_WAITED);
}

int tfs_pipeline_drain(struct tfs_pipeline *p)
{
	while (!p->err && p->used < p->made)
		use_oldest(p);
	return p->err;
}

void tfs_pipeline_free(struct tfs_pipeline *p)
{
	if (!p)
		return;
	for (unsigned i = 0; i < p->window; i++) {
		struct slot *s = slot_at(p, i);

		tfs_workgroup_cancel(&s->g);
		tfs_workgroup_destroy(&s->g);
		if (p->ops->clear)
			p->ops->clear(s->item);
	}
	free(p->slots);
	free(p);
}
