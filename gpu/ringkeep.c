/* SPDX-License-Identifier: MIT */
/* ringkeep: kept rings in a list, most recently kept first; a put that goes past the budget
 * frees from the end, and a thread of the keep's own frees the rings kept longer than its time
 * (the end of the list too).
 *
 * Locking: a backend's destroy runs outside k->lock. */
#include "ringkeep.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "staging.h"
#include "util.h"

struct kept {
	struct tfs_ringkeep_shape shape;
	void *b;
	uint64_t at; /* tfs_now_ns() when kept */
	struct kept *next;
};

struct tfs_ringkeep {
	pthread_mutex_t lock;
	pthread_cond_t cond; /* the reaper's: a ring kept, or stop */
	pthread_t reaper;
	int stop;		      /* protected by lock */
	uint64_t budget, ttl_ns;      /* immutable */
	struct kept *head;	      /* most recently kept first; protected by lock */
	struct tfs_ringkeep_stats st; /* protected by lock */
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

static void free_list(struct kept *e)
{
	while (e) {
		struct kept *next = e->next;

		e->shape.be->destroy(e->b);
		free(e);
		e = next;
	}
}

/* Cut the list at *p: the rings from there on are no longer kept (k->lock held). */
static struct kept *cut(struct tfs_ringkeep *k, struct kept **p)
{
	struct kept *out = *p;

	*p = NULL;
	for (struct kept *x = out; x; x = x->next) {
		k->st.rings--;
		k->st.bytes -= shape_bytes(&x->shape);
		k->st.dropped++;
	}
	return out;
}

/* The least recently kept rings past limit bytes, cut off the list to be freed unlocked (k->lock
 * held). */
static struct kept *cut_past(struct tfs_ringkeep *k, uint64_t limit)
{
	struct kept **p;
	uint64_t total = 0;

	for (p = &k->head; *p; p = &(*p)->next) {
		total += shape_bytes(&(*p)->shape);
		if (total > limit)
			break;
	}
	return cut(k, p);
}

/* Frees the rings kept longer than the keep's time. */
static void *reap(void *arg)
{
	struct tfs_ringkeep *k = arg;

	pthread_mutex_lock(&k->lock);
	while (!k->stop) {
		const uint64_t now = tfs_now_ns();
		uint64_t oldest = UINT64_MAX;
		struct kept **p = &k->head;

		while (*p && (*p)->at + k->ttl_ns > now)
			p = &(*p)->next;
		if (*p) { /* expired, and every one kept before it */
			struct kept *out = cut(k, p);

			pthread_mutex_unlock(&k->lock);
			free_list(out);
			pthread_mutex_lock(&k->lock);
			continue;
		}
		for (struct kept *e = k->head; e; e = e->next)
			oldest = e->at;
		if (oldest == UINT64_MAX) {
			pthread_cond_wait(&k->cond, &k->lock);
		} else {
			tfs_cond_wait_until(&k->cond, &k->lock, oldest + k->ttl_ns);
		}
	}
	pthread_mutex_unlock(&k->lock);
	return NULL;
}

int tfs_ringkeep_create(uint64_t budget, unsigned ttl_ms, struct tfs_ringkeep **out)
{
	struct tfs_ringkeep *k = calloc(1, sizeof(*k));
	int rc;

	if (!k)
		return -ENOMEM;
	pthread_mutex_init(&k->lock, NULL);
	tfs_cond_init_monotonic(&k->cond);
	k->budget = budget;
	k->ttl_ns = (uint64_t)ttl_ms * 1000000u;
	k->st.budget = budget;
	rc = pthread_create(&k->reaper, NULL, reap, k);
	if (rc) {
		pthread_cond_destroy(&k->cond);
		pthread_mutex_destroy(&k->lock);
		free(k);
		return -rc;
	}
	*out = k;
	return 0;
}

void tfs_ringkeep_free(struct tfs_ringkeep *k)
{
	if (!k)
		return;
	pthread_mutex_lock(&k->lock);
	k->stop = 1;
	pthread_cond_signal(&k->cond);
	pthread_mutex_unlock(&k->lock);
	pthread_join(k->reaper, NULL);
	free_list(k->head);
	pthread_cond_destroy(&k->cond);
	pthread_mutex_destroy(&k->lock);
	free(k);
}

int tfs_ringkeep_put(struct tfs_ringkeep *k, const struct tfs_ringkeep_shape *shape, void *b)
{
	const uint64_t bytes = shape_bytes(shape);
	struct kept *e, *out;

	if (bytes > k->budget)
		return -ENOSPC;
	e = calloc(1, sizeof(*e));
	if (!e)
		return -ENOMEM;
	e->shape = *shape;
	e->b = b;
	e->at = tfs_now_ns();
	pthread_mutex_lock(&k->lock);
	e->next = k->head;
	k->head = e;
	k->st.rings++;
	k->st.bytes += bytes;
	out = cut_past(k, k->budget);
	pthread_cond_signal(&k->cond); /* the reaper times the oldest */
	pthread_mutex_unlock(&k->lock);
	free_list(out);
	return 0;
}

void tfs_ringkeep_fit(struct tfs_ringkeep *k, uint64_t bytes)
{
	struct kept *out;

	pthread_mutex_lock(&k->lock);
	out = cut_past(k, bytes);
	pthread_mutex_unlock(&k->lock);
	free_list(out);
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
