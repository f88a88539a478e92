/* SPDX-License-Identifier: MIT */
/* cache: a byte-budgeted memory cache of decoded chunks with refcounted get/put, sharded locking,
 * LRU eviction, one load per key however many readers miss on it at once, and prefetch loads.
 * What stays is decided here; the buffers come from cachebuf.c. */
#include "cache.h"

#include <assert.h>
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "cachebuf.h"
#include "cacheplan.h"
#include "idmap.h"

#define NSHARDS 16

enum state { LOADING, READY, FAILED };

struct entry {
	struct tfs_cache_entry pub; /* first: tfs_cache_entry pointers are entry pointers */
	struct tfs_idmap_node node; /* the key, in the shard's map; protected by shard->lock */
	unsigned shard;
	enum state state;	  /* protected by shard->lock */
	int err;		  /* protected by shard->lock; set when FAILED */
	unsigned refs;		  /* protected by shard->lock */
	int prefetched;		  /* loaded ahead, no reader yet; protected by shard->lock */
	uint64_t tick;		  /* the cache's clock when last used; protected by shard->lock */
	size_t cap;		  /* capacity of pub.data if it came from tfs_cache_alloc, else 0 */
	struct entry *freed_next; /* evicted or failed: the list to free once unlocked */
	struct entry *lru_prev, *lru_next; /* protected by shard->lock; READY entries only */
};

/* Keys are SHA-256 digests, uniformly distributed: byte 0 picks the shard, bytes 8.. the bucket.
 * Readers of different chunks rarely share a lock. */
struct shard {
	pthread_mutex_t lock;
	pthread_cond_t loaded; /* broadcast when a load in this shard finishes */
	struct tfs_idmap map;  /* protected by lock */
	struct entry lru;      /* sentinel: lru.lru_next is the most recently used */
	uint64_t bytes;	       /* protected by lock */
	uint64_t cold; /* tick of its least recently used entry, UINT64_MAX for none; written
			* under lock, read without (atomic) */
};

/* Counters, updated with relaxed atomics outside any lock. */
struct counters {
	uint64_t hits, misses, waits, wait_ns, load_ns, load_errors, evictions, bytes_loaded;
	uint64_t prefetch_loads, prefetch_hits, prefetch_wasted, prefetch_pending;
};

struct tfs_cache {
	struct shard shards[NSHARDS];
	struct tfs_cachebuf *buf; /* the entries' buffers; locks itself */
	uint64_t budget;
	uint64_t total;	   /* bytes over all shards; atomic */
	uint64_t pinned;   /* bytes of loaded entries a reader holds; atomic */
	uint64_t clock;	   /* twice the loads finished: entries' time of last use; atomic */
	struct counters n; /* atomic */
	/* Eviction by readers' plans (cacheplan.c). Lock order: a shard's lock, then plans_lock. */
	int by_plans; /* atomic */
	pthread_mutex_t plans_lock;
	struct tfs_cache_plan *plans; /* published plans; protected by plans_lock */
};

#define COUNT(c, f, v) __atomic_add_fetch(&(c)->n.f, (v), __ATOMIC_RELAXED)

int tfs_cache_create(uint64_t budget, struct tfs_cache **out)
{
	struct tfs_cache *c = calloc(1, sizeof(*c));

	if (!c)
		return -ENOMEM;
	for (unsigned i = 0; i < NSHARDS; i++) {
		struct shard *s = &c->shards[i];

		if (tfs_idmap_init(&s->map, 64)) {
			while (i--)
				tfs_idmap_free(&c->shards[i].map);
			free(c);
			return -ENOMEM;
		}
		pthread_mutex_init(&s->lock, NULL);
		pthread_cond_init(&s->loaded, NULL);
		s->lru.lru_next = s->lru.lru_prev = &s->lru;
		s->cold = UINT64_MAX;
	}
	if (tfs_cachebuf_create(budget, &c->buf)) {
		for (unsigned i = 0; i < NSHARDS; i++)
			tfs_idmap_free(&c->shards[i].map);
		free(c);
		return -ENOMEM;
	}
	c->budget = budget;
	pthread_mutex_init(&c->plans_lock, NULL);
	*out = c;
	return 0;
}

void *tfs_cache_alloc(struct tfs_cache *c, size_t len, size_t *cap)
{
	return tfs_cachebuf_alloc(c->buf, len, cap);
}

void *tfs_cache_alloc_small(struct tfs_cache *c, size_t len, size_t *cap)
{
	return tfs_cachebuf_alloc_small(c->buf, len, cap);
}

void *tfs_cache_alloc_decoded(struct tfs_cache *c, size_t len, size_t *cap)
{
	return tfs_cachebuf_alloc_decoded(c->buf, len, cap);
}

int tfs_cache_arena_start(struct tfs_cache *c, uint64_t bytes, uint8_t **base, uint64_t *len)
{
	return tfs_cachebuf_arena_start(c->buf, bytes, base, len);
}

int tfs_cache_in_arena(const struct tfs_cache *c, const void *p)
{
	return tfs_cachebuf_in_arena(c->buf, p);
}

void tfs_cache_release(struct tfs_cache *c, void *p, size_t cap)
{
	tfs_cachebuf_release(c->buf, p, cap);
}

static void free_entry(struct tfs_cache *c, struct entry *e)
{
	/* Entry data may come from the pool or from plain malloc: the pool only takes back what
	 * has a size class's exact capacity, which malloc'd data of another size never claims. */
	if (e->pub.data)
		tfs_cache_release(c, (void *)e->pub.data, e->cap);
	free(e);
}

void tfs_cache_destroy(struct tfs_cache *c)
{
	if (!c)
		return;
	for (unsigned i = 0; i < NSHARDS; i++) {
		struct shard *s = &c->shards[i];
		struct tfs_idmap_node *n = tfs_idmap_drain(&s->map), *next;

		for (; n; n = next) {
			struct entry *e = tfs_idmap_entry(n, struct entry, node);

			next = n->next;
			assert(e->refs == 0);
			free_entry(c, e);
		}
		tfs_idmap_free(&s->map);
		pthread_mutex_destroy(&s->lock);
		pthread_cond_destroy(&s->loaded);
	}
	tfs_cachebuf_destroy(c->buf); /* after the entries, whose buffers go back to it */
	pthread_mutex_destroy(&c->plans_lock);
	free(c);
}

/* Eviction is LRU over the whole cache, not shard by shard: an entry's tick is when it was last
 * used on a clock that only loads advance (by 2: a load's entry gets the new even time, a hit
 * the odd one after it, newer than the load before and older than the next), and each shard
 * publishes its coldest tick, so that shrinking takes from the shard that holds the coldest
 * entry. Called with s->lock held. */
static void lru_cold(struct shard *s)
{
	__atomic_store_n(&s->cold, s->lru.lru_prev == &s->lru ? UINT64_MAX : s->lru.lru_prev->tick,
			 __ATOMIC_RELAXED);
}

static void lru_unlink(struct shard *s, struct entry *e)
{
	e->lru_prev->lru_next = e->lru_next;
	e->lru_next->lru_prev = e->lru_prev;
	e->lru_prev = e->lru_next = NULL;
	lru_cold(s);
}

static void lru_push_front(struct shard *s, struct entry *e, uint64_t tick)
{
	e->tick = tick;
	e->lru_next = s->lru.lru_next;
	e->lru_prev = &s->lru;
	s->lru.lru_next->lru_prev = e;
	s->lru.lru_next = e;
	lru_cold(s);
}

static struct entry *lookup(struct shard *s, const struct tfs_id *key)
{
	struct tfs_idmap_node *n = tfs_idmap_find(&s->map, key);

	return n ? tfs_idmap_entry(n, struct entry, node) : NULL;
}

static void unhash(struct shard *s, struct entry *e)
{
	tfs_idmap_remove(&s->map, &e->node);
}

/* A new LOADING entry with one reference, hashed into s. Called with s->lock held. */
static struct entry *insert_loading(struct shard *s, unsigned idx, const struct tfs_id *key)
{
	struct entry *e = calloc(1, sizeof(*e));

	if (!e)
		return NULL;
	e->node.id = *key;
	e->shard = idx;
	e->state = LOADING;
	e->refs = 1;
	tfs_idmap_insert(&s->map, &e->node);
	return e;
}

/* Take e (READY, unused) out of shard s onto the freed list. s->lock held. */
static void evict_one(struct tfs_cache *c, struct shard *s, struct entry *e, struct entry **freed)
{
	lru_unlink(s, e);
	unhash(s, e);
	s->bytes -= e->pub.len;
	__atomic_sub_fetch(&c->total, e->pub.len, __ATOMIC_RELAXED);
	COUNT(c, evictions, 1);
	if (e->prefetched) {
		COUNT(c, prefetch_wasted, 1);
		__atomic_sub_fetch(&c->n.prefetch_pending, e->pub.len, __ATOMIC_RELAXED);
	}
	e->freed_next = *freed;
	*freed = e;
}

/* Evict unused entries last used at tick upto or before from the cold end of shard s while the
 * cache is over budget. Called with s->lock held; the evicted entries are chained through
 * freed_next for freeing after unlocking. Returns how many. */
static unsigned evict_shard(struct tfs_cache *c, struct shard *s, uint64_t upto,
			    struct entry **freed)
{
	struct entry *e = s->lru.lru_prev;
	unsigned n = 0;

	while (__atomic_load_n(&c->total, __ATOMIC_RELAXED) > c->budget && e != &s->lru &&
	       e->tick <= upto) {
		struct entry *prev = e->lru_prev;

		if (e->refs == 0) {
			evict_one(c, s, e, freed);
			n++;
		}
		e = prev;
	}
	return n;
}

static int plans_published(struct tfs_cache *c)
{
	int any;

	pthread_mutex_lock(&c->plans_lock);
	any = c->plans != NULL;
	pthread_mutex_unlock(&c->plans_lock);
	return any;
}

static void free_list(struct tfs_cache *c, struct entry *e)
{
	while (e) {
		struct entry *next = e->freed_next;

		free_entry(c, e);
		e = next;
	}
}

/* An unused entry as MIN ranks it, for shrink_by_plans. */
struct victim {
	struct tfs_id id;
	unsigned shard;
	int cls;       /* tfs_cache_plan_class */
	uint64_t dist; /* class 2: positions until its next use */
	size_t seq;    /* scan order: coldest first within a shard */
};

/* Evicted first: the lower class; in class 2, the use furthest ahead; then the scan order. */
static int victim_cmp(const void *a, const void *b)
{
	const struct victim *x = a, *y = b;

	if (x->cls != y->cls)
		return x->cls < y->cls ? -1 : 1;
	if (x->cls == 2 && x->dist != y->dist)
		return x->dist > y->dist ? -1 : 1;
	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/* One pass evicts at least this fraction of the budget (and gets under it), so that the scan of
 * every entry is paid once for many small chunks, not once per chunk; with chunks larger than
 * that, one pass evicts what getting under budget takes, as a pass per chunk would. */
#define PLAN_SLACK 64

/* MIN: rank every unused entry by the plans (tfs_cache_plan_class), then evict in that order
 * until the cache is under budget and a slack's worth is gone. Each pass scans every shard (one
 * lock at a time). Returns 0 when there was nothing to rank (or no memory to rank it): LRU
 * then. */
static int shrink_by_plans(struct tfs_cache *c, struct entry **freed)
{
	const uint64_t slack = c->budget / PLAN_SLACK;
	uint64_t before;
	struct victim *v = NULL;
	size_t n = 0, cap = 0;
	int oom = 0;

	for (unsigned i = 0; i < NSHARDS && !oom; i++) {
		struct shard *s = &c->shards[i];

		pthread_mutex_lock(&s->lock);
		pthread_mutex_lock(&c->plans_lock);
		for (struct entry *e = s->lru.lru_prev; e != &s->lru; e = e->lru_prev) {
			if (e->refs)
				continue;
			if (TFS_GROW(v, &cap, n + 1)) {
				oom = 1;
				break;
			}
			v[n].id = e->node.id;
			v[n].shard = i;
			v[n].dist = 0;
			v[n].cls = tfs_cache_plan_class(c->plans, &e->node.id, &v[n].dist);
			v[n].seq = n;
			n++;
		}
		pthread_mutex_unlock(&c->plans_lock);
		pthread_mutex_unlock(&s->lock);
	}
	if (oom || !n) {
		free(v);
		return 0;
	}
	qsort(v, n, sizeof(*v), victim_cmp);
	before = __atomic_load_n(&c->total, __ATOMIC_RELAXED);
	for (size_t k = 0; k < n; k++) {
		const uint64_t now = __atomic_load_n(&c->total, __ATOMIC_RELAXED);
		struct shard *s = &c->shards[v[k].shard];
		struct entry *e;

		if (now <= c->budget && now + slack <= before)
			break;
		pthread_mutex_lock(&s->lock);
		e = lookup(s, &v[k].id);
		if (e && e->refs == 0 && e->state == READY)
			evict_one(c, s, e, freed);
		pthread_mutex_unlock(&s->lock);
	}
	free(v);
	return 1;
}

void tfs_cache_evict_by_plans(struct tfs_cache *c, int on)
{
	__atomic_store_n(&c->by_plans, on, __ATOMIC_RELAXED);
}

void tfs_cache_plan_start(struct tfs_cache *c, struct tfs_cache_plan *p)
{
	pthread_mutex_lock(&c->plans_lock);
	tfs_cache_plan_set_next(p, c->plans);
	c->plans = p;
	pthread_mutex_unlock(&c->plans_lock);
}

void tfs_cache_plan_end(struct tfs_cache *c, struct tfs_cache_plan *p)
{
	struct tfs_cache_plan *prev = NULL, *q;

	if (!p)
		return;
	/* Withdrawn if it was published (started), then freed. */
	pthread_mutex_lock(&c->plans_lock);
	for (q = c->plans; q && q != p; q = tfs_cache_plan_next(q))
		prev = q;
	if (q && prev)
		tfs_cache_plan_set_next(prev, tfs_cache_plan_next(q));
	else if (q)
		c->plans = tfs_cache_plan_next(q);
	pthread_mutex_unlock(&c->plans_lock);
	tfs_cache_plan_free(p);
}

/* Bring the cache back under budget, coldest entries first: from the shard whose coldest entry is
 * the coldest, those up to the next shard's coldest, and again. A shard whose cold entries are
 * all in use is passed over. Takes one shard lock at a time. */
static void shrink(struct tfs_cache *c)
{
	struct entry *freed = NULL;
	unsigned passed = 0; /* a bit per shard */

	if (__atomic_load_n(&c->by_plans, __ATOMIC_RELAXED) && plans_published(c) &&
	    shrink_by_plans(c, &freed)) {
		free_list(c, freed);
		return;
	}
	while (__atomic_load_n(&c->total, __ATOMIC_RELAXED) > c->budget) {
		uint64_t min = UINT64_MAX, next = UINT64_MAX;
		unsigned idx = NSHARDS;

		for (unsigned i = 0; i < NSHARDS; i++) {
			const uint64_t t = __atomic_load_n(&c->shards[i].cold, __ATOMIC_RELAXED);

			if ((passed >> i) & 1 || t == UINT64_MAX)
				continue;
			if (t < min) {
				next = min;
				min = t;
				idx = i;
			} else if (t < next) {
				next = t;
			}
		}
		if (idx == NSHARDS)
			break;
		pthread_mutex_lock(&c->shards[idx].lock);
		if (!evict_shard(c, &c->shards[idx], next, &freed))
			passed |= 1u << idx;
		pthread_mutex_unlock(&c->shards[idx].lock);
	}
	free_list(c, freed);
}

/* A reference to e dropped, under its shard's lock. */
static void unref(struct tfs_cache *c, struct entry *e)
{
	if (--e->refs == 0 && e->state == READY)
		__atomic_sub_fetch(&c->pinned, e->pub.len, __ATOMIC_RELAXED);
}

/* Mark a reader's first use of an entry; called with its shard lock held. */
static void first_use(struct tfs_cache *c, struct entry *e)
{
	if (!e->prefetched)
		return;
	e->prefetched = 0;
	COUNT(c, prefetch_hits, 1);
	if (e->state == READY)
		__atomic_sub_fetch(&c->n.prefetch_pending, e->pub.len, __ATOMIC_RELAXED);
}

/* Finish a load: publish the data or the error. Returns 1 when the caller should shrink. */
static int finish_load(struct tfs_cache *c, struct shard *s, struct entry *e, int rc, uint8_t *data,
		       size_t len, size_t cap, struct entry **freed)
{
	if (rc) {
		/* Waiters see the error; the entry leaves the table so the next get retries. */
		e->state = FAILED;
		e->err = rc;
		unhash(s, e);
		COUNT(c, load_errors, 1);
		if (--e->refs == 0)
			*freed = e;
		pthread_cond_broadcast(&s->loaded);
		return 0;
	}
	e->pub.data = data;
	e->pub.len = len;
	e->cap = cap;
	e->state = READY;
	s->bytes += len;
	__atomic_add_fetch(&c->total, len, __ATOMIC_RELAXED);
	__atomic_add_fetch(&c->pinned, len, __ATOMIC_RELAXED); /* the loader's reference */
	COUNT(c, bytes_loaded, len);
	if (e->prefetched)
		__atomic_add_fetch(&c->n.prefetch_pending, len, __ATOMIC_RELAXED);
	lru_push_front(s, e, __atomic_add_fetch(&c->clock, 2, __ATOMIC_RELAXED));
	pthread_cond_broadcast(&s->loaded);
	return __atomic_load_n(&c->total, __ATOMIC_RELAXED) > c->budget;
}

/* Fill e, just inserted LOADING into shard idx with the caller's reference, outside the lock.
 * With keep_ref the caller keeps that reference (and e) on success; without, it is dropped and e
 * may be evicted and freed by another thread as soon as this returns. */
static int run_load(struct tfs_cache *c, unsigned idx, struct entry *e, tfs_cache_load_fn load,
		    void *arg, int keep_ref)
{
	struct shard *s = &c->shards[idx];
	struct entry *freed = NULL;
	uint8_t *data = NULL;
	size_t len = 0, cap = 0;
	const uint64_t t0 = tfs_now_ns();
	int rc = load(arg, &e->node.id, &data, &len, &cap), over;

	COUNT(c, load_ns, tfs_now_ns() - t0);
	pthread_mutex_lock(&s->lock);
	over = finish_load(c, s, e, rc, data, len, cap, &freed);
	if (!rc && !keep_ref)
		unref(c, e); /* readers that joined the load hold their own */
	pthread_mutex_unlock(&s->lock);
	if (freed)
		free_entry(c, freed);
	if (!rc && over)
		shrink(c);
	return rc;
}

/* Pin e, found in s (whose lock the caller holds and this releases), once it is loaded. */
static int pin_found(struct tfs_cache *c, struct shard *s, struct entry *e,
		     struct tfs_cache_entry **out)
{
	struct entry *freed = NULL;
	int rc;

	if (e->refs++ == 0 && e->state == READY)
		__atomic_add_fetch(&c->pinned, e->pub.len, __ATOMIC_RELAXED);
	first_use(c, e);
	if (e->state == LOADING) {
		const uint64_t w0 = tfs_now_ns();

		COUNT(c, waits, 1);
		while (e->state == LOADING)
			pthread_cond_wait(&s->loaded, &s->lock);
		COUNT(c, wait_ns, tfs_now_ns() - w0);
	} else {
		COUNT(c, hits, 1);
	}
	if (e->state == FAILED) {
		rc = e->err;
		if (--e->refs == 0)
			freed = e;
		pthread_mutex_unlock(&s->lock);
		if (freed)
			free_entry(c, freed);
		return rc;
	}
	lru_unlink(s, e);
	lru_push_front(s, e, __atomic_load_n(&c->clock, __ATOMIC_RELAXED) + 1);
	pthread_mutex_unlock(&s->lock);
	*out = &e->pub;
	return 0;
}

int tfs_cache_get_ready(struct tfs_cache *c, const struct tfs_id *key, struct tfs_cache_entry **out)
{
	struct shard *s = &c->shards[key->b[0] % NSHARDS];
	struct entry *e;

	pthread_mutex_lock(&s->lock);
	e = lookup(s, key);
	if (!e) {
		pthread_mutex_unlock(&s->lock);
		return -ENOENT;
	}
	return pin_found(c, s, e, out);
}

int tfs_cache_get(struct tfs_cache *c, const struct tfs_id *key, tfs_cache_load_fn load, void *arg,
		  struct tfs_cache_entry **out)
{
	const unsigned idx = key->b[0] % NSHARDS;
	struct shard *s = &c->shards[idx];
	struct entry *e;
	uint64_t t0;
	int rc;

	pthread_mutex_lock(&s->lock);
	e = lookup(s, key);
	if (e)
		return pin_found(c, s, e, out);
	COUNT(c, misses, 1);
	e = insert_loading(s, idx, key);
	pthread_mutex_unlock(&s->lock);
	if (!e)
		return -ENOMEM;
	t0 = tfs_now_ns();
	rc = run_load(c, idx, e, load, arg, 1);
	COUNT(c, wait_ns, tfs_now_ns() - t0);
	if (!rc)
		*out = &e->pub;
	return rc;
}

void tfs_cache_put(struct tfs_cache *c, struct tfs_cache_entry *pub)
{
	struct entry *e = (struct entry *)pub;
	const unsigned idx = e->shard;
	struct shard *s = &c->shards[idx];
	int over;

	pthread_mutex_lock(&s->lock);
	assert(e->refs > 0 && e->state == READY);
	unref(c, e);
	over = e->refs == 0 && __atomic_load_n(&c->total, __ATOMIC_RELAXED) > c->budget;
	pthread_mutex_unlock(&s->lock);
	/* e may be evicted and freed by another thread from here on. */
	if (over)
		shrink(c);
}

int tfs_cache_prefetch(struct tfs_cache *c, const struct tfs_id *key, tfs_cache_load_fn load,
		       void *arg)
{
	const unsigned idx = key->b[0] % NSHARDS;
	struct shard *s = &c->shards[idx];
	struct entry *e;
	int rc;

	pthread_mutex_lock(&s->lock);
	if (lookup(s, key)) {
		pthread_mutex_unlock(&s->lock);
		return 0;
	}
	e = insert_loading(s, idx, key);
	if (e) {
		e->prefetched = 1;
		COUNT(c, prefetch_loads, 1);
	}
	pthread_mutex_unlock(&s->lock);
	if (!e)
		return -ENOMEM;
	rc = run_load(c, idx, e, load, arg, 0);
	return rc ? rc : 1;
}

int tfs_cache_contains(struct tfs_cache *c, const struct tfs_id *key)
{
	struct shard *s = &c->shards[key->b[0] % NSHARDS];
	int found;

	pthread_mutex_lock(&s->lock);
	found = lookup(s, key) != NULL;
	pthread_mutex_unlock(&s->lock);
	return found;
}

uint64_t tfs_cache_prefetch_pending(struct tfs_cache *c)
{
	return __atomic_load_n(&c->n.prefetch_pending, __ATOMIC_RELAXED);
}

int tfs_cache_room_ahead(struct tfs_cache *c, uint64_t bytes)
{
	return __atomic_load_n(&c->pinned, __ATOMIC_RELAXED) +
		       __atomic_load_n(&c->n.prefetch_pending, __ATOMIC_RELAXED) + bytes <=
	       c->budget;
}

uint64_t tfs_cache_budget(const struct tfs_cache *c)
{
	return c->budget;
}

uint64_t tfs_cache_bytes(struct tfs_cache *c)
{
	return __atomic_load_n(&c->total, __ATOMIC_RELAXED);
}

void tfs_cache_stats(struct tfs_cache *c, struct tfs_cache_stats *st)
{
	struct tfs_cachebuf_stats bs;

	memset(st, 0, sizeof(*st));
	st->hits = __atomic_load_n(&c->n.hits, __ATOMIC_RELAXED);
	st->misses = __atomic_load_n(&c->n.misses, __ATOMIC_RELAXED);
	st->waits = __atomic_load_n(&c->n.waits, __ATOMIC_RELAXED);
	st->wait_ns = __atomic_load_n(&c->n.wait_ns, __ATOMIC_RELAXED);
	st->load_ns = __atomic_load_n(&c->n.load_ns, __ATOMIC_RELAXED);
	st->load_errors = __atomic_load_n(&c->n.load_errors, __ATOMIC_RELAXED);
	st->evictions = __atomic_load_n(&c->n.evictions, __ATOMIC_RELAXED);
	st->bytes_loaded = __atomic_load_n(&c->n.bytes_loaded, __ATOMIC_RELAXED);
	st->prefetch_loads = __atomic_load_n(&c->n.prefetch_loads, __ATOMIC_RELAXED);
	st->prefetch_hits = __atomic_load_n(&c->n.prefetch_hits, __ATOMIC_RELAXED);
	st->prefetch_wasted = __atomic_load_n(&c->n.prefetch_wasted, __ATOMIC_RELAXED);
	st->prefetch_pending = __atomic_load_n(&c->n.prefetch_pending, __ATOMIC_RELAXED);
	st->bytes = __atomic_load_n(&c->total, __ATOMIC_RELAXED);
	for (unsigned i = 0; i < NSHARDS; i++) {
		pthread_mutex_lock(&c->shards[i].lock);
		st->entries += c->shards[i].map.n;
		pthread_mutex_unlock(&c->shards[i].lock);
	}
	st->budget = c->budget;
	pthread_mutex_lock(&c->plans_lock);
	for (struct tfs_cache_plan *p = c->plans; p; p = tfs_cache_plan_next(p))
		st->plans++;
	pthread_mutex_unlock(&c->plans_lock);
	tfs_cachebuf_stats(c->buf, &bs);
	st->pool_bytes = bs.pool_bytes;
	st->pool_reuses = bs.pool_reuses;
	st->arena_bytes = bs.arena_bytes;
	st->arena_used = bs.arena_used;
	st->arena_full = bs.arena_full;
}
