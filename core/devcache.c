/* SPDX-License-Identifier: MIT */
/* devcache: keys to runs of segments (an arena.h each, over memory not ours), LRU among unused
 * entries.
 *
 * Locking: d->lock guards everything here; the caller's callbacks (grow, release, evict,
 * short_by) run with it dropped. One grow at a time: an insert that needs room while another
 * grows waits for it (d->grown) rather than evict. The watcher (mem.short_by) sleeps on d->wake
 * and shrinks through the API like any caller. */
#include "devcache.h"

#include <assert.h>
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>

#include "arena.h"
#include "idmap.h"
#include "util.h"

/* An arena hands out offsets dressed as addresses from this one: never dereferenced. */
#define FAKE_BASE ((uint8_t *)(uintptr_t)TFS_ARENA_GRANULE)

struct seg {
	uint64_t addr;		/* the caller's memory, seg_bytes of it */
	struct tfs_arena *runs; /* over FAKE_BASE */
	size_t entries;		/* entries whose run lies here */
	int draining;		/* takes no new runs; released once empty */
	struct seg *next;
};

struct dentry {
	struct tfs_devcache_entry pub; /* first: entry pointers are dentry pointers */
	struct tfs_idmap_node node;
	struct seg *seg;
	uint8_t *run; /* from seg->runs */
	unsigned refs;
	int ready;
	struct dentry *prev, *next; /* LRU of ready entries, most recent first */
};

struct tfs_devcache {
	pthread_mutex_t lock;
	pthread_cond_t grown; /* a grow ended */
	int growing;
	struct seg *segs;
	struct tfs_idmap map;
	struct dentry lru; /* sentinel */
	struct tfs_devcache_mem mem;
	uint64_t budget, seg_bytes; /* immutable */
	uint64_t bytes, held, hits, misses, inserts, evictions, full, given_back;
	pthread_cond_t wake; /* the watcher's sleep, cut short by stop */
	pthread_t watcher;   /* when mem.short_by */
	int stop;
};

/* Every mem.watch_ms while the cache holds memory: shrink by what the memory is short of. A
 * shrink also releases segments an earlier one left draining once their entries are put, so
 * those go back too without an insert. */
static void *watch(void *arg)
{
	struct tfs_devcache *d = arg;

	pthread_mutex_lock(&d->lock);
	while (!d->stop) {
		uint64_t need, got;

		tfs_cond_wait_until(&d->wake, &d->lock,
				    tfs_now_ns() + (uint64_t)d->mem.watch_ms * 1000000u);
		if (d->stop || !d->held)
			continue;
		pthread_mutex_unlock(&d->lock);
		need = d->mem.short_by(d->mem.arg);
		got = tfs_devcache_shrink(d, need);
		if (got)
			tfs_info("%s: %llu MiB of the chunk cache given back (%llu MiB short)",
				 d->mem.name ? d->mem.name : "devcache",
				 (unsigned long long)(got >> 20), (unsigned long long)(need >> 20));
		pthread_mutex_lock(&d->lock);
	}
	pthread_mutex_unlock(&d->lock);
	return NULL;
}

int tfs_devcache_create(uint64_t budget, uint64_t seg_bytes, const struct tfs_devcache_mem *mem,
			struct tfs_devcache **out)
{
	struct tfs_devcache *d;
	int rc;

	if (!seg_bytes || seg_bytes % TFS_ARENA_GRANULE)
		return -EINVAL;
	d = calloc(1, sizeof(*d));
	if (!d)
		return -ENOMEM;
	rc = tfs_idmap_init(&d->map, 256);
	if (rc) {
		free(d);
		return rc;
	}
	pthread_mutex_init(&d->lock, NULL);
	pthread_cond_init(&d->grown, NULL);
	d->lru.next = d->lru.prev = &d->lru;
	d->mem = *mem;
	d->seg_bytes = seg_bytes;
	d->budget = budget < seg_bytes ? seg_bytes : budget / seg_bytes * seg_bytes;
	if (mem->short_by) {
		tfs_cond_init_monotonic(&d->wake);
		d->mem.watch_ms = mem->watch_ms ? mem->watch_ms : 100;
		rc = pthread_create(&d->watcher, NULL, watch, d);
		if (rc) {
			pthread_cond_destroy(&d->wake);
			pthread_cond_destroy(&d->grown);
			pthread_mutex_destroy(&d->lock);
			tfs_idmap_free(&d->map);
			free(d);
			return -rc;
		}
	}
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
	tfs_arena_free(e->seg->runs, e->run);
	e->seg->entries--;
	d->bytes -= e->pub.len;
}

/* Evict e (unused, ready) onto *victims, whose callbacks run once unlocked; under d->lock. */
static void evict(struct tfs_devcache *d, struct dentry *e, struct dentry **victims)
{
	drop(d, e);
	e->next = *victims;
	*victims = e;
	d->evictions++;
}

/* Segments draining and empty, off the list onto *out to be released unlocked (counted as
 * given back); under d->lock. Returns their bytes. */
static uint64_t take_empty(struct tfs_devcache *d, struct seg **out)
{
	uint64_t bytes = 0;

	for (struct seg **p = &d->segs; *p;) {
		struct seg *s = *p;

		if (s->draining && !s->entries) {
			*p = s->next;
			s->next = *out;
			*out = s;
			d->held -= d->seg_bytes;
			d->given_back++;
			bytes += d->seg_bytes;
		} else {
			p = &s->next;
		}
	}
	return bytes;
}

/* The callbacks for what went while locked. */
static void call_back(struct tfs_devcache *d, struct dentry *victims, struct seg *segs)
{
	while (victims) {
		struct dentry *v = victims;

		victims = v->next;
		if (d->mem.evict)
			d->mem.evict(d->mem.arg, v->pub.tag);
		free(v);
	}
	while (segs) {
		struct seg *s = segs;

		segs = s->next;
		if (d->mem.release)
			d->mem.release(d->mem.arg, s->addr, d->seg_bytes);
		tfs_arena_destroy(s->runs);
		free(s);
	}
}

void tfs_devcache_destroy(struct tfs_devcache *d)
{
	struct tfs_idmap_node *n;
	struct dentry *victims = NULL;
	struct seg *segs;

	if (!d)
		return;
	if (d->mem.short_by) {
		pthread_mutex_lock(&d->lock);
		d->stop = 1;
		pthread_cond_signal(&d->wake);
		pthread_mutex_unlock(&d->lock);
		pthread_join(d->watcher, NULL);
		pthread_cond_destroy(&d->wake);
	}
	n = tfs_idmap_drain(&d->map);
	while (n) {
		struct dentry *e = tfs_idmap_entry(n, struct dentry, node);

		n = n->next;
		assert(!e->refs);
		if (e->ready) {
			e->next = victims;
			victims = e;
		} else {
			free(e);
		}
	}
	segs = d->segs;
	d->segs = NULL;
	call_back(d, victims, segs);
	tfs_idmap_free(&d->map);
	pthread_cond_destroy(&d->grown);
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

/* A run of len in a segment that takes new ones (e->seg, e->run), or 0; under d->lock. */
static int place(struct tfs_devcache *d, struct dentry *e, uint64_t len)
{
	size_t cap;

	for (struct seg *s = d->segs; s; s = s->next) {
		if (s->draining || !(e->run = tfs_arena_alloc(s->runs, len, &cap)))
			continue;
		e->seg = s;
		s->entries++;
		return 1;
	}
	return 0;
}

/* One more segment from the caller, if the budget allows and it gives one: 1 when one was
 * added (or another thread's grow ended meanwhile: worth another look), 0 when not. Under
 * d->lock, dropped around the call. */
static int grow(struct tfs_devcache *d)
{
	struct seg *s;

	if (d->growing) {
		pthread_cond_wait(&d->grown, &d->lock);
		return 1;
	}
	if (!d->mem.grow || d->held + d->seg_bytes > d->budget)
		return 0;
	s = calloc(1, sizeof(*s));
	if (!s || tfs_arena_create_over(FAKE_BASE, d->seg_bytes, &s->runs)) {
		free(s);
		return 0;
	}
	d->growing = 1;
	pthread_mutex_unlock(&d->lock);
	s->addr = d->mem.grow(d->mem.arg, d->seg_bytes);
	pthread_mutex_lock(&d->lock);
	d->growing = 0;
	pthread_cond_broadcast(&d->grown);
	if (!s->addr) {
		tfs_arena_destroy(s->runs);
		free(s);
		return 0;
	}
	s->next = d->segs;
	d->segs = s;
	d->held += d->seg_bytes;
	return 1;
}

struct tfs_devcache_entry *tfs_devcache_insert(struct tfs_devcache *d, const struct tfs_id *key,
					       uint64_t len)
{
	struct dentry *e = calloc(1, sizeof(*e)), *victims = NULL, *v;
	struct seg *empty = NULL;
	int placed = 0;

	if (!e)
		return NULL;
	pthread_mutex_lock(&d->lock);
	if (tfs_idmap_find(&d->map, key) || len > d->seg_bytes) {
		pthread_mutex_unlock(&d->lock);
		free(e);
		return NULL;
	}
	/* A segment's free run, else a new segment, else evictions from the cold end (unused,
	 * ready entries only) until a run fits. */
	while (!(placed = place(d, e, len)) && grow(d))
		if (tfs_idmap_find(&d->map, key))
			break; /* inserted by another thread meanwhile */
	for (v = d->lru.prev; !placed && !tfs_idmap_find(&d->map, key);) {
		while (v != &d->lru && v->refs)
			v = v->prev;
		if (v == &d->lru)
			break;
		struct dentry *prev = v->prev;

		evict(d, v, &victims);
		v = prev;
		placed = place(d, e, len);
	}
	if (!placed) {
		if (!tfs_idmap_find(&d->map, key))
			d->full++;
		free(e);
		e = NULL;
	} else {
		e->node.id = *key;
		e->pub.addr = e->seg->addr + (uint64_t)(e->run - FAKE_BASE);
		e->pub.len = len;
		e->refs = 1;
		e->prev = e->next = e;
		tfs_idmap_insert(&d->map, &e->node);
		d->bytes += len;
		d->inserts++;
	}
	take_empty(d, &empty);
	pthread_mutex_unlock(&d->lock);
	call_back(d, victims, empty);
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

/* The segment to give back next: an empty one that takes runs, else the one holding the least
 * recently used entry of those that do; NULL when every segment drains. Under d->lock. */
static struct seg *coldest(struct tfs_devcache *d)
{
	for (struct seg *s = d->segs; s; s = s->next)
		if (!s->draining && !s->entries)
			return s;
	for (struct dentry *e = d->lru.prev; e != &d->lru; e = e->prev)
		if (!e->seg->draining)
			return e->seg;
	for (struct seg *s = d->segs; s; s = s->next)
		if (!s->draining)
			return s; /* its entries are all being filled */
	return NULL;
}

uint64_t tfs_devcache_shrink(struct tfs_devcache *d, uint64_t bytes)
{
	struct dentry *victims = NULL;
	struct seg *out = NULL, *s;
	uint64_t draining = 0, now;

	pthread_mutex_lock(&d->lock);
	/* Segments already draining count towards what is asked. */
	for (s = d->segs; s; s = s->next)
		draining += s->draining ? d->seg_bytes : 0;
	if (!bytes && !draining) { /* nothing asked, nothing left to release */
		pthread_mutex_unlock(&d->lock);
		return 0;
	}
	while (draining < bytes && (s = coldest(d))) {
		s->draining = 1;
		draining += d->seg_bytes;
	}
	/* The unused entries of every draining segment go (those put since an earlier shrink
	 * too), and each segment once empty. */
	for (struct dentry *e = d->lru.prev, *prev; e != &d->lru; e = prev) {
		prev = e->prev;
		if (e->seg->draining && !e->refs)
			evict(d, e, &victims);
	}
	now = take_empty(d, &out);
	pthread_mutex_unlock(&d->lock);
	call_back(d, victims, out);
	return now;
}

void tfs_devcache_stats(struct tfs_devcache *d, struct tfs_devcache_stats *out)
{
	pthread_mutex_lock(&d->lock);
	out->budget = d->budget;
	out->bytes = d->bytes;
	out->entries = d->map.n;
	out->held = d->held;
	out->hits = d->hits;
	out->misses = d->misses;
	out->inserts = d->inserts;
	out->evictions = d->evictions;
	out->full = d->full;
	out->given_back = d->given_back;
	pthread_mutex_unlock(&d->lock);
}
