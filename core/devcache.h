/* SPDX-License-Identifier: MIT */
/* devcache: a chunk cache over memory this module never touches (a GPU's): which chunks are
 * where in a region the caller allocated, with references and LRU eviction. The policy lives
 * here, apart from the buffers (as SQLite's pcache from pcache1): gpu/ allocates the region,
 * moves the bytes in and records when they are there. Thread-safe. */
#ifndef TFS_DEVCACHE_H
#define TFS_DEVCACHE_H

#include <stddef.h>
#include <stdint.h>

#include "object.h"

struct tfs_devcache;

/* A cached chunk: its bytes at addr (in the region's address space). */
struct tfs_devcache_entry {
	uint64_t addr;
	uint64_t len;
	/* The caller's: what says the bytes are there (a CUDA event), set by tfs_devcache_ready
	 * and handed to the evict callback when the entry goes. */
	void *tag;
	/* The caller's, atomic: set once it knows the bytes are there (tag's work done). */
	int landed;
};

/* Runs of [base, base + bytes) (bytes: a multiple of 64 KiB). evict(arg, tag) is called for
 * each ready entry that is evicted or destroyed, on the thread that evicts (one inside
 * tfs_devcache_insert, or tfs_devcache_destroy). */
int tfs_devcache_create(uint64_t base, uint64_t bytes, void (*evict)(void *arg, void *tag),
			void *arg, struct tfs_devcache **out);
/* Every entry goes (none may be referenced). NULL is fine. */
void tfs_devcache_destroy(struct tfs_devcache *d);

/* The ready entry of key, referenced, or NULL (counted as a hit or a miss). */
struct tfs_devcache_entry *tfs_devcache_get(struct tfs_devcache *d, const struct tfs_id *key);
/* Room for key's len bytes, referenced, for the caller to fill and then mark ready; unused
 * entries are evicted, least recently used first, to make it. NULL when key is already there
 * (being filled by another caller) or when referenced entries leave no room. */
struct tfs_devcache_entry *tfs_devcache_insert(struct tfs_devcache *d, const struct tfs_id *key,
					       uint64_t len);
/* The caller filled e (its reference from tfs_devcache_insert): others may get it from now on. */
void tfs_devcache_ready(struct tfs_devcache *d, struct tfs_devcache_entry *e, void *tag);
/* Drop a reference. A failed fill drops its entry: put without ready. Safe on any thread (it
 * never evicts, so never calls evict). */
void tfs_devcache_put(struct tfs_devcache *d, struct tfs_devcache_entry *e);

struct tfs_devcache_stats {
	uint64_t budget, bytes, entries; /* now */
	uint64_t hits, misses, inserts, evictions, full;
};
void tfs_devcache_stats(struct tfs_devcache *d, struct tfs_devcache_stats *out);

#endif
