/* SPDX-License-Identifier: MIT */
/* devcache: keys to runs of a region (arena.h over memory not ours), LRU among unused entries. */
#include "devcache.h"

#include <assert.h>
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>

#include "arena.h"
#include "idmap.h"

/* The arena hands out offsets dressed as addresses from this one: never dereferenced. */
#define FAKE_BASE ((uint8_t *)(uintptr_t)TFS_ARENA_GRANULE)

struct dentry {
	struct tfs_devcache_entry pub; /* first: entry pointers are dentry pointers */
	struct tfs_idmap_node node;    /* protected by d->lock */
	uint8_t *run;		       /* from d->runs */
	unsigned refs;		       /* protected by d->lock */
	int ready;		       /* protected by d->lock */
	struct dentry *prev, *next;    /* LRU of ready entries, most recent first; by d->lock */
};

struct tfs_devcache {
	pthread_mutex_t lock;
	struct tfs_arena *runs; /* taken only under lock here */
	struct tfs_idmap map;	/* protected by lock */
	struct dentry lru;	/* sentinel; protected by lock */
	void (*evict)(void *arg, void *tag);
	void *arg;
	uint64_t base, budget;
	uint64_t bytes, hits, misses, inserts, evictions, full; /* protected by lock */
};

int tfs_devcache_create(uint64_t base, uint64_t bytes, void (*evict)(void *arg, void *tag),
			void *arg, struct tfs_devcache **out)
{
	struct tfs_devcache *d = calloc(1, sizeof(*d));
	int rc;

	if (!d)
		return -ENOMEM;
	rc = tfs_arena_create_over(FAKE_BASE, bytes, &d->runs);
	if (!rc && (rc = tfs_idmap_init(&d->map, 256)))
		tfs_arena_destroy(d->runs);
	if (rc) {
		free(d);
		return rc;
	}
	pthread_mutex_init(&d->lock, NULL);
	d->lru.next = d->lru.prev = &d->lru;
	d->evict = evict;
	d->arg = arg;
	d->base = base;
	d->budget = bytes;
	*out = d;
	return 0;
}

static void lru_unlink(struct dentry *e)
{
	e->prev->next = e->next;
	e->next->prev = e->prev;
	e->prev = e->next = e;
}

static void lru_front(struct tfs_devcache *d, struct dentry *e)
{
	e->next = d->lru.next;
	e->prev = &d->lru;
	d->lru.next->prev = e;
	d->lru.next = e;
}

/* Take e out of the map and give its run back; under d->lock. */
static void drop(struct tfs_devcache *d, struct dentry *e)
{
	tfs_idmap_remove(&d->map, &e->node);
	if (e->ready)
		lru_unlink(e);
	tfs_arena_free(d->runs, e->run);
	d->bytes -= e->pub.len;
}

void tfs_devcache_destroy(struct tfs_devcache *d)
{
	struct tfs_idmap_node *n;

	if (!d)
		return;
	n = tfs_idmap_drain(&d->map);
	while (n) {
		struct dentry *e = tfs_idmap_entry(n, struct dentry, node);

		n = n->next;
		assert(!e->refs);
		if (e->ready && d->evict)
			d->evict(d->arg, e->pub.tag);
		free(e);
	}
	tfs_idmap_free(&d->map);
	tfs_arena_destroy(d->runs);
	pthread_mutex_destroy(&d->lock);
	free(d);
}

struct tfs_devcache_entry *tfs_devcache_get(struct tfs_devcache *d, const struct tfs_id *key)
{
	struct tfs_idmap_node *n;
	struct dentry *e = NULL;

	pthread_mutex_lock(&d->lock);
	n = tfs_idmap_find(&d->map, key);
	if (n && tfs_idmap_entry(n, struct dentry, node)->ready) {
		e = tfs_idmap_entry(n, struct dentry, node);
		e->refs++;
		lru_unlink(e);
		lru_front(d, e);
		d->hits++;
	} else {
		d->misses++;
	}
	pthread_mutex_unlock(&d->lock);
	return e ? &e->pub : NULL;
}

struct tfs_devcache_entry *tfs_devcache_insert(struct tfs_devcache *d, const struct tfs_id *key,
					       uint64_t len)
{
	struct dentry *e = calloc(1, sizeof(*e)), *victims = NULL;
	size_t cap;

	if (!e)
		return NULL;
	pthread_mutex_lock(&d->lock);
	if (tfs_idmap_find(&d->map, key) || len > d->budget) {
		pthread_mutex_unlock(&d->lock);
		free(e);
		return NULL;
	}
	/* Evict from the cold end until a run fits: unused, ready entries only. */
	for (struct dentry *v = d->lru.prev; !(e->run = tfs_arena_alloc(d->runs, len, &cap));) {
		while (v != &d->lru && v->refs)
			v = v->prev;
		if (v == &d->lru)
			break;
		struct dentry *prev = v->prev;

		drop(d, v);
		v->next = victims; /* the callback runs once unlocked */
		victims = v;
		d->evictions++;
		v = prev;
	}
	if (!e->run) {
		d->full++;
		free(e);
		e = NULL;
	} else {
		e->node.id = *key;
		e->pub.addr = d->base + (uint64_t)(e->run - FAKE_BASE);
		e->pub.len = len;
		e->refs = 1;
		e->prev = e->next = e;
		tfs_idmap_insert(&d->map, &e->node);
		d->bytes += len;
		d->inserts++;
	}
	pthread_mutex_unlock(&d->lock);
	while (victims) {
		struct dentry *v = victims;

		victims = v->next;
		if (d->evict)
			d->evict(d->arg, v->pub.tag);
		free(v);
	}
	return e ? &e->pub : NULL;
}

void tfs_devcache_ready(struct tfs_devcache *d, struct tfs_devcache_entry *pe, void *tag)
{
	struct dentry *e = (struct dentry *)pe;

	pthread_mutex_lock(&d->lock);
	assert(!e->ready && e->refs);
	e->pub.tag = tag;
	e->ready = 1;
	lru_front(d, e);
	pthread_mutex_unlock(&d->lock);
}

void tfs_devcache_put(struct tfs_devcache *d, struct tfs_devcache_entry *pe)
{
	struct dentry *e = (struct dentry *)pe;
	int gone = 0;

	pthread_mutex_lock(&d->lock);
	assert(e->refs);
	if (!--e->refs && !e->ready) {
		drop(d, e); /* a fill that failed: nothing there to evict */
		gone = 1;
	}
	pthread_mutex_unlock(&d->lock);
	if (gone)
		free(e);
}

void tfs_devcache_stats(struct tfs_devcache *d, struct tfs_devcache_stats *out)
{
	pthread_mutex_lock(&d->lock);
	out->budget = d->budget;
	out->bytes = d->bytes;
	out->entries = d->map.n;
	out->hits = d->hits;
	out->misses = d->misses;
	out->inserts = d->inserts;
	out->evictions = d->evictions;
	out->full = d->full;
	pthread_mutex_unlock(&d->lock);
}
