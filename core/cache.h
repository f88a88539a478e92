/* SPDX-License-Identifier: MIT */
/* cache: a byte-budgeted memory cache of decoded chunks with refcounted get/put, sharded locking,
 * LRU eviction, one load per key however many readers miss on it at once, and prefetch loads. */
#ifndef TFS_CACHE_H
#define TFS_CACHE_H

#include <stddef.h>
#include <stdint.h>

#include "object.h"

struct tfs_cache;

/* A cached chunk. data/len are valid from get until the matching put. */
struct tfs_cache_entry {
	const uint8_t *data;
	size_t len;
};

/* Fill a missing entry: allocate the decoded bytes and hand them over through data and len, or
 * return -errno (nothing is cached then; the next get tries again). Bytes from tfs_cache_alloc
 * set *cap to the capacity it gave (the buffer goes back to the pool when evicted); bytes from
 * malloc leave *cap at 0. */
typedef int (*tfs_cache_load_fn)(void *arg, const struct tfs_id *key, uint8_t **data, size_t *len,
				 size_t *cap);

struct tfs_cache_stats {
	uint64_t hits, misses;
	uint64_t waits;	  /* misses that joined a load already under way */
	uint64_t wait_ns; /* time tfs_cache_get callers spent blocked on a load (data stall) */
	/* Time in loaders (fetch, checks, decode), summed over the threads that ran them: readers'
	 * and prefetch loads alike. */
	uint64_t load_ns;
	uint64_t load_errors;
	uint64_t evictions;
	uint64_t bytes_loaded;	   /* decoded bytes loaded, by readers and prefetch */
	uint64_t prefetch_loads;   /* entries loaded ahead of readers */
	uint64_t prefetch_hits;	   /* of those, ones a reader then used */
	uint64_t prefetch_wasted;  /* of those, ones evicted before any reader used them */
	uint64_t prefetch_pending; /* bytes loaded ahead and not used yet (now) */
	uint64_t bytes, entries;   /* now */
	uint64_t budget;
	uint64_t pool_bytes, pool_reuses; /* buffer pool: bytes kept now, allocations it served */
	uint64_t plans;			  /* readers' plans published now (cacheplan.h) */
	/* The arena (tfs_cache_arena_start): its size, bytes in buffers now, and decoded chunks
	 * that found it full and went elsewhere. 0 until started. */
	uint64_t arena_bytes, arena_used, arena_full;
};

/* budget: bytes of decoded data kept once no reader holds them. Entries in use are never freed,
 * so the cache may exceed the budget by what readers hold at that moment. */
int tfs_cache_create(uint64_t budget, struct tfs_cache **out);
void tfs_cache_destroy(struct tfs_cache *c);

/* Get the entry for key, loading it with load(arg, ...) on a miss. Returns 0 with *e pinned, or
 * the loader's error. */
int tfs_cache_get(struct tfs_cache *c, const struct tfs_id *key, tfs_cache_load_fn load, void *arg,
		  struct tfs_cache_entry **e);
void tfs_cache_put(struct tfs_cache *c, struct tfs_cache_entry *e);
/* tfs_cache_get of an entry that is cached or loading (waiting for the load), and -ENOENT, with
 * nothing loaded or counted as a miss, when it is neither. */
int tfs_cache_get_ready(struct tfs_cache *c, const struct tfs_id *key, struct tfs_cache_entry **e);

/* Load key ahead of any reader unless it is cached or loading already. Returns 1 if it loaded
 * the entry, 0 if there was nothing to do, or the loader's error. Nothing stays pinned. */
int tfs_cache_prefetch(struct tfs_cache *c, const struct tfs_id *key, tfs_cache_load_fn load,
		       void *arg);
int tfs_cache_contains(struct tfs_cache *c, const struct tfs_id *key);

void tfs_cache_stats(struct tfs_cache *c, struct tfs_cache_stats *st);
/* The budget the cache was created with. */
uint64_t tfs_cache_budget(const struct tfs_cache *c);
/* Bytes of the entries cached (tfs_cache_stats's bytes) without the shard locks. */
uint64_t tfs_cache_bytes(struct tfs_cache *c);

/* Evict by the readers' plans (cacheplan.h: MIN) while any is published, instead of LRU. */
void tfs_cache_evict_by_plans(struct tfs_cache *c, int on);
/* Readers' plans (cacheplan.h, built there): publish p to the eviction (it does nothing unless
 * the cache evicts by MIN); withdraw it if published, and free it (NULL is fine). */
struct tfs_cache_plan;
void tfs_cache_plan_start(struct tfs_cache *c, struct tfs_cache_plan *p);
void tfs_cache_plan_end(struct tfs_cache *c, struct tfs_cache_plan *p);
/* Bytes loaded ahead and not used yet (tfs_cache_stats's prefetch_pending) without the shard
 * locks tfs_cache_stats takes to count entries: cheap enough for every prefetch decision. */
uint64_t tfs_cache_prefetch_pending(struct tfs_cache *c);
/* Whether bytes more loaded ahead fit beside the entries readers hold (pinned) and those loaded
 * ahead and not used yet; likewise without the shard locks. Past that, a load ahead can only make
 * room by evicting what a reader holds next or another load ahead, to be loaded again: a view's
 * reader holds a chunk of every row of its window, and at a window's end those of two. */
int tfs_cache_room_ahead(struct tfs_cache *c, uint64_t bytes);

/* Buffers for decoded chunks and fetched objects. Freed buffers are kept in a small bounded pool
 * (an eighth of the budget, at most 32 MiB) and handed out again, so steady-state loads neither
 * fault in nor zero fresh pages. Buffers come from malloc: realloc and free work on them too.
 * tfs_cache_alloc returns a buffer of at least len bytes and its capacity in *cap (may be NULL). */
void *tfs_cache_alloc(struct tfs_cache *c, size_t len, size_t *cap);
/* A buffer of at most TFS_SLAB_MAX bytes (slab.h: a chunk's frame) from huge-page slabs, larger
 * ones as tfs_cache_alloc; unlike those, not for realloc or free: tfs_cache_release only. */
void *tfs_cache_alloc_small(struct tfs_cache *c, size_t len, size_t *cap);
/* A buffer for decoded bytes that an entry will hold: from the arena once started (below), else
 * (and when the arena is full) as tfs_cache_alloc_small. tfs_cache_release only. */
void *tfs_cache_alloc_decoded(struct tfs_cache *c, size_t len, size_t *cap);
/* From now on, decoded chunks are kept in one region of address space (arena.h) of bytes (0: the
 * budget and a quarter, plus 64 MiB: what readers may hold over the budget), which a front end
 * may register with a device once; its span in base and len. The first call makes it, later
 * ones give the same. Buffers allocated before stay where they are. */
int tfs_cache_arena_start(struct tfs_cache *c, uint64_t bytes, uint8_t **base, uint64_t *len);
/* Whether p lies in the arena (0 before it is started). */
int tfs_cache_in_arena(const struct tfs_cache *c, const void *p);
/* Give a buffer of capacity cap back (NULL is fine). */
void tfs_cache_release(struct tfs_cache *c, void *p, size_t cap);

#endif
