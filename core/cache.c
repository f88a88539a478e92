/* SPDX-License-Identifier: MIT */
/* cache: a byte-budgeted memory cache of decoded chunks with refcounted get/put, LRU eviction and
 * one load per key however many readers miss on it at once. */
#include "cache.h"

#include <assert.h>
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

enum state { LOADING, READY, FAILED };

struct entry {
	struct tfs_cache_entry pub; /* first: tfs_cache_entry pointers are entry pointers */
	struct tfs_id key;
	enum state state; /* protected by cache->lock */
	int err;	  /* protected by cache->lock; set when FAILED */
	unsigned refs;	  /* protected by cache->lock */
	int hashed;	  /* in the table; protected by cache->lock */
	struct entry *hnext;		/* hash chain; protected by cache->lock */
	struct entry *lru_prev, *lru_next; /* protected by cache->lock; READY entries only */
};

struct tfs_cache {
	pthread_mutex_t lock;
	pthread_cond_t loaded; /* broadcast when a load finishes */
	struct entry **table;  /* protected by lock */
	size_t nbuckets;       /* protected by lock */
	struct entry lru;      /* sentinel: lru.lru_next is the most recently used */
	struct tfs_cache_stats st; /* protected by lock */
};

static size_t bucket_of(const struct tfs_cache *c, const struct tfs_id *key)
{
	uint64_t h;

	/* Keys are SHA-256 digests: any 8 bytes are uniformly distributed. */
	memcpy(&h, key->b, sizeof(h));
	return (size_t)(h & (c->nbuckets - 1));
}

int tfs_cache_create(uint64_t budget, struct tfs_cache **out)
{
	struct tfs_cache *c = calloc(1, sizeof(*c));

	if (!c)
		return -ENOMEM;
	c->nbuckets = 1024;
	c->table = calloc(c->nbuckets, sizeof(*c->table));
	if (!c->table) {
		free(c);
		return -ENOMEM;
	}
	pthread_mutex_init(&c->lock, NULL);
	pthread_cond_init(&c->loaded, NULL);
	c->lru.lru_next = c->lru.lru_prev = &c->lru;
	c->st.budget = budget;
	*out = c;
	return 0;
}

static void free_entry(struct entry *e)
{
	free((void *)e->pub.data);
	free(e);
}

void tfs_cache_destroy(struct tfs_cache *c)
{
	if (!c)
		return;
	for (size_t i = 0; i < c->nbuckets; i++) {
		struct entry *e = c->table[i], *next;

		for (; e; e = next) {
			next = e->hnext;
			assert(e->refs == 0);
			free_entry(e);
		}
	}
	free(c->table);
	pthread_mutex_destroy(&c->lock);
	pthread_cond_destroy(&c->loaded);
	free(c);
}

static void lru_unlink(struct entry *e)
{
	e->lru_prev->lru_next = e->lru_next;
	e->lru_next->lru_prev = e->lru_prev;
	e->lru_prev = e->lru_next = NULL;
}

static void lru_push_front(struct tfs_cache *c, struct entry *e)
{
	e->lru_next = c->lru.lru_next;
	e->lru_prev = &c->lru;
	c->lru.lru_next->lru_prev = e;
	c->lru.lru_next = e;
}

static void unhash(struct tfs_cache *c, struct entry *e)
{
	struct entry **pp = &c->table[bucket_of(c, &e->key)];

	while (*pp != e)
		pp = &(*pp)->hnext;
	*pp = e->hnext;
	e->hashed = 0;
	c->st.entries--;
}

static void grow(struct tfs_cache *c)
{
	size_t n = c->nbuckets * 2;
	struct entry **t = calloc(n, sizeof(*t));

	if (!t)
		return; /* longer chains, still correct */
	for (size_t i = 0; i < c->nbuckets; i++) {
		struct entry *e = c->table[i], *next;

		for (; e; e = next) {
			size_t b;
			uint64_t h;

			next = e->hnext;
			memcpy(&h, e->key.b, sizeof(h));
			b = (size_t)(h & (n - 1));
			e->hnext = t[b];
			t[b] = e;
		}
	}
	free(c->table);
	c->table = t;
	c->nbuckets = n;
}

/* Evict unused entries from the cold end until the cache fits its budget. Called with the lock
 * held; returns the evicted entries as a list (through hnext) to be freed after unlocking. */
static struct entry *evict(struct tfs_cache *c)
{
	struct entry *e = c->lru.lru_prev, *freed = NULL;

	while (c->st.bytes > c->st.budget && e != &c->lru) {
		struct entry *prev = e->lru_prev;

		if (e->refs == 0) {
			lru_unlink(e);
			unhash(c, e);
			c->st.bytes -= e->pub.len;
			c->st.evictions++;
			e->hnext = freed;
			freed = e;
		}
		e = prev;
	}
	return freed;
}

static void free_list(struct entry *e)
{
	while (e) {
		struct entry *next = e->hnext;

		free_entry(e);
		e = next;
	}
}

int tfs_cache_get(struct tfs_cache *c, const struct tfs_id *key, tfs_cache_load_fn load,
		  void *arg, struct tfs_cache_entry **out)
{
	struct entry *e, *freed = NULL;
	uint8_t *data = NULL;
	size_t len = 0;
	int rc;

	pthread_mutex_lock(&c->lock);
	for (e = c->table[bucket_of(c, key)]; e; e = e->hnext)
		if (tfs_id_eq(&e->key, key))
			break;
	if (e) {
		e->refs++;
		if (e->state == LOADING) {
			c->st.waits++;
			while (e->state == LOADING)
				pthread_cond_wait(&c->loaded, &c->lock);
		} else {
			c->st.hits++;
		}
		if (e->state == FAILED) {
			rc = e->err;
			if (--e->refs == 0)
				freed = e;
			pthread_mutex_unlock(&c->lock);
			if (freed)
				free_entry(freed);
			return rc;
		}
		lru_unlink(e);
		lru_push_front(c, e);
		pthread_mutex_unlock(&c->lock);
		*out = &e->pub;
		return 0;
	}

	c->st.misses++;
	e = calloc(1, sizeof(*e));
	if (!e) {
		pthread_mutex_unlock(&c->lock);
		return -ENOMEM;
	}
	e->key = *key;
	e->state = LOADING;
	e->refs = 1;
	e->hashed = 1;
	if (c->st.entries >= c->nbuckets)
		grow(c);
	e->hnext = c->table[bucket_of(c, key)];
	c->table[bucket_of(c, key)] = e;
	c->st.entries++;
	pthread_mutex_unlock(&c->lock);

	rc = load(arg, key, &data, &len);

	pthread_mutex_lock(&c->lock);
	if (rc) {
		/* Waiters see the error; the entry leaves the table so the next get retries. */
		e->state = FAILED;
		e->err = rc;
		unhash(c, e);
		e->hnext = NULL;
		c->st.load_errors++;
		if (--e->refs == 0)
			freed = e;
	} else {
		e->pub.data = data;
		e->pub.len = len;
		e->state = READY;
		c->st.bytes += len;
		c->st.bytes_loaded += len;
		lru_push_front(c, e);
		freed = evict(c);
		*out = &e->pub;
	}
	pthread_cond_broadcast(&c->loaded);
	pthread_mutex_unlock(&c->lock);
	free_list(freed);
	return rc;
}

void tfs_cache_put(struct tfs_cache *c, struct tfs_cache_entry *pub)
{
	struct entry *e = (struct entry *)pub, *freed;

	pthread_mutex_lock(&c->lock);
	assert(e->refs > 0 && e->state == READY);
	e->refs--;
	freed = e->refs == 0 ? evict(c) : NULL;
	pthread_mutex_unlock(&c->lock);
	free_list(freed);
}

void tfs_cache_stats(struct tfs_cache *c, struct tfs_cache_stats *st)
{
	pthread_mutex_lock(&c->lock);
	*st = c->st;
	pthread_mutex_unlock(&c->lock);
}
