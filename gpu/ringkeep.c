/* SPDX-License-Identifier: MIT */
/* ringkeep: kept rings in a list, most recently kept first; a put that goes past the budget
 * frees from the end.
 *
 * Locking: k->lock guards the list and the counters; a backend's destroy runs outside it. */
#include "ringkeep.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "staging.h"

struct kept {
	struct tfs_ringkeep_shape shape;
	void *b;
	struct kept *next;
};

struct tfs_ringkeep {
	pthread_mutex_t lock;
	uint64_t budget;
	struct kept *head; /* most recently kept first */
	struct tfs_ringkeep_stats st;
};

static uint64_t shape_bytes(const struct tfs_ringkeep_shape *s)
{
	return s->slot_bytes * s->depth;
}

static int same(const struct tfs_ringkeep_shape *a, const struct tfs_ringkeep_shape *b)
{
	return a->be == b->be && a->device == b->device && a->slot_bytes == b->slot_bytes &&
	       a->depth == b->depth && a->uid == b->uid && a->gid == b->gid;
}

int tfs_ringkeep_create(uint64_t budget, struct tfs_ringkeep **out)
{
	struct tfs_ringkeep *k = calloc(1, sizeof(*k));

	if (!k)
		return -ENOMEM;
	pthread_mutex_init(&k->lock, NULL);
	k->budget = budget;
	k->st.budget = budget;
	*out = k;
	return 0;
}

static void free_list(struct kept *e)
{
	while (e) {
		struct kept *next = e->next;

		e->shape.be->destroy(e->b);
		free(e);
		e = next;
	}
}

void tfs_ringkeep_free(struct tfs_ringkeep *k)
{
	if (!k)
		return;
	free_list(k->head);
	pthread_mutex_destroy(&k->lock);
	free(k);
}

int tfs_ringkeep_put(struct tfs_ringkeep *k, const struct tfs_ringkeep_shape *shape, void *b)
{
	const uint64_t bytes = shape_bytes(shape);
	struct kept *e, **p, *out = NULL;
	uint64_t total;

	if (bytes > k->budget)
		return -ENOSPC;
	e = calloc(1, sizeof(*e));
	if (!e)
		return -ENOMEM;
	e->shape = *shape;
	e->b = b;
	pthread_mutex_lock(&k->lock);
	e->next = k->head;
	k->head = e;
	k->st.rings++;
	k->st.bytes += bytes;
	/* The least recently kept past the budget are cut off the list, to be freed unlocked. */
	for (p = &k->head, total = 0; *p; p = &(*p)->next) {
		total += shape_bytes(&(*p)->shape);
		if (total > k->budget)
			break;
	}
	out = *p;
	*p = NULL;
	for (struct kept *x = out; x; x = x->next) {
		k->st.rings--;
		k->st.bytes -= shape_bytes(&x->shape);
		k->st.dropped++;
	}
	pthread_mutex_unlock(&k->lock);
	free_list(out);
	return 0;
}

void *tfs_ringkeep_take(struct tfs_ringkeep *k, const struct tfs_ringkeep_shape *shape)
{
	struct kept *e = NULL;
	void *b = NULL;

	pthread_mutex_lock(&k->lock);
	for (struct kept **p = &k->head; *p; p = &(*p)->next) {
		if (same(&(*p)->shape, shape)) {
			e = *p;
			*p = e->next;
			k->st.rings--;
			k->st.bytes -= shape_bytes(&e->shape);
			k->st.reused++;
			break;
		}
	}
	pthread_mutex_unlock(&k->lock);
	if (e) {
		b = e->b;
		free(e);
	}
	return b;
}

void tfs_ringkeep_stats(struct tfs_ringkeep *k, struct tfs_ringkeep_stats *out)
{
	memset(out, 0, sizeof(*out));
	if (!k)
		return;
	pthread_mutex_lock(&k->lock);
	*out = k->st;
	pthread_mutex_unlock(&k->lock);
}
