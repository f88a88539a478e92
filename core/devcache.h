/* SPDX-License-Identifier: MIT */
/* devcache: a chunk cache over memory this module never touches (a GPU's): which chunks are
 * where in segments of memory the caller allocates as the cache grows and frees when asked to
 * give memory back, with references and LRU eviction. The policy lives here, apart from the
 * buffers (as SQLite's pcache from pcache1): gpu/ allocates and frees the segments, moves the
 * bytes in and records when they are there. Thread-safe. */
#ifndef TFS_DEVCACHE_H
#define TFS_DEVCACHE_H

#include <stddef.h>
#include <stdint.h>

#include "object.h"

struct tfs_devcache;

/* A cached chunk: its bytes at addr (in the segments' address space). */
struct tfs_devcache_entry {
	uint64_t addr;
	uint64_t len;
	/* The caller's: what says the bytes are there (a CUDA event), set by tfs_devcache_ready
	 * and handed to the evict callback when the entry goes. */
	void *tag;
	/* The caller's, atomic: set once it knows the bytes are there (tag's work done). */
	int landed;
};

/* The caller's memory. Each runs on a thread that inserts, shrinks or destroys, never under the
 * cache's lock, never inside tfs_devcache_put. */
struct tfs_devcache_mem {
	/* A new segment of bytes: its address, or 0 when it cannot be spared now (the cache then
	 * makes room by eviction within the segments it has). */
	uint64_t (*grow)(void *arg, uint64_t bytes);
	/* A segment given back: no entry lies in it any more. */
	void (*release)(void *arg, uint64_t addr, uint64_t bytes);
	/* A ready entry evicted or destroyed: its tag. */
	void (*evict)(void *arg, void *tag);
	void *arg;
	/* Optional: how many bytes the memory is short of now (0: none). With it, a thread of the
	 * cache's own asks every watch_ms while the cache holds a segment and shrinks by the
	 * answer (tfs_devcache_shrink), so memory goes back while nothing inserts: a loader that
	 * is idle, or blocked on its consumer, while another program allocates. release and evict
	 * then run on that thread too. */
	uint64_t (*short_by)(void *arg);
	unsigned watch_ms;
	const char *name; /* the memory's, for the log line of what went back ("cuda:0") */
};

/* Up to budget bytes in segments of seg_bytes (a multiple of 64 KiB; the budget is rounded down
 * to whole segments, at least one), none allocated until an insert needs one. */
int tfs_devcache_create(uint64_t budget, uint64_t seg_bytes, const struct tfs_devcache_mem *mem,
			struct tfs_devcache **out);
/* The watcher stops (joined), every entry goes (none may be referenced), every segment is
 * released. NULL is fine. */
void tfs_devcache_destroy(struct tfs_devcache *d);

/* The ready entry of key, referenced, or NULL (counted as a hit or a miss). */
struct tfs_devcache_entry *tfs_devcache_get(struct tfs_devcache *d, const struct tfs_id *key);
/* Room for key's len bytes, referenced, for the caller to fill and then mark ready: in a segment
 * it has, else in a new one while the budget allows and grow gives one, else by evicting unused
 * entries, least recently used first. NULL when key is already there (being filled by another
 * caller), when len exceeds a segment, or when referenced entries leave no room. */
struct tfs_devcache_entry *tfs_devcache_insert(struct tfs_devcache *d, const struct tfs_id *key,
					       uint64_t len);
/* The caller filled e (its reference from tfs_devcache_insert): others may get it from now on. */
void tfs_devcache_ready(struct tfs_devcache *d, struct tfs_devcache_entry *e, void *tag);
/* Drop a reference. A failed fill drops its entry: put without ready. Safe on any thread (it
 * never evicts nor releases, so never calls back). */
void tfs_devcache_put(struct tfs_devcache *d, struct tfs_devcache_entry *e);

/* Give back at least bytes of memory, whole segments, those holding the least recently used
 * entries first: their unused entries are evicted and each segment is released once no entry
 * lies in it; a segment with referenced entries takes no new ones and is released by a later
 * insert or shrink after they are put. Returns the bytes released now. */
uint64_t tfs_devcache_shrink(struct tfs_devcache *d, uint64_t bytes);

struct tfs_devcache_stats {
	uint64_t budget, bytes, entries; /* now */
	uint64_t held;			 /* bytes of segments allocated now */
	uint64_t hits, misses, inserts, evictions, full;
	uint64_t given_back; /* segments given back (tfs_devcache_shrink) */
};
void tfs_devcache_stats(struct tfs_devcache *d, struct tfs_devcache_stats *out);

#endif
