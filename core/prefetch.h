/* SPDX-License-Identifier: MIT */
/* prefetch: a thread pool that loads chunks into the cache ahead of readers. Each reader is a
 * stream over a sequence of chunks (a column in order, or an explicit order for views); the
 * stream follows the runs of its reads and keeps a growing window of upcoming chunks loading
 * ahead of each sequential one. */
#ifndef TFS_PREFETCH_H
#define TFS_PREFETCH_H

#include <stddef.h>
#include <stdint.h>

#include "cache.h"
#include "version.h"
#include "workpool.h"

struct tfs_prefetcher;
struct tfs_stream;

struct tfs_prefetch_stats {
	unsigned threads;
	uint64_t scheduled;	 /* chunks queued for loading ahead */
	uint64_t indexes;	 /* frame indexes queued, for columns read at random */
	uint64_t skipped_cached; /* queued chunks found cached or loading already */
	uint64_t throttled;	 /* chunks not queued because the ahead budget was used up */
	uint64_t errors;
	uint64_t sequential_streams, random_resets;
	uint64_t inflight_bytes; /* chunks queued or loading now */
};

/* Loads run on pool at read-ahead priority, as many at once as the pool lets them; nthreads is
 * how many loaders a sequential stream keeps busy. At most max_ahead bytes of chunks are queued,
 * loading, or loaded and not yet used (the memory cache's prefetch_pending) at any time, and no
 * more than fit the cache beside the chunks readers hold (tfs_cache_room_ahead). */
int tfs_prefetcher_create(struct tfs_cache *cache, struct tfs_workpool *pool, unsigned nthreads,
			  uint64_t max_ahead, struct tfs_prefetcher **out);
/* Drops queued loads and waits for those under way. */
void tfs_prefetcher_destroy(struct tfs_prefetcher *pf);
void tfs_prefetcher_stats(struct tfs_prefetcher *pf, struct tfs_prefetch_stats *st);

/* A stream over column col of version v (which it references until destroyed). order lists the
 * chunk indices in the order the reader will consume them (copied); NULL means 0..nchunks-1.
 * n is the length of the sequence. */
int tfs_stream_create(struct tfs_prefetcher *pf, struct tfs_version *v, size_t col,
		      const uint32_t *order, size_t n, struct tfs_stream **out);
void tfs_stream_destroy(struct tfs_stream *st);

/* The reader will go front to back (a view is made to be read that way): its first run loads
 * ahead from its first access on, instead of waiting for sequential progress to show. */
void tfs_stream_expect_sequential(struct tfs_stream *st);

/* The reader read rows first_row..last_row (its rows: a view's for a view), which lie at sequence
 * positions first..last (inclusive). The stream follows a few runs at once: reads that go on
 * where others ended, give or take a read's length, continue one; another read starts one. A run
 * is sequential once it spans half a chunk of rows and three of its widest reads, or from a first
 * access at position 0 (the start of a scan), or from a read over three positions or more of a
 * column in order (one at least whole: a scan's read, out of order); a sequential run keeps a
 * growing window of chunks ahead of it loading (before it, for a run that grows at its front: a
 * copy backwards), and a run that jumps loads nothing ahead. Returns whether this read's run is
 * sequential, so that whole chunks serve it best; a reader that jumps is served frames
 * (tfs_version_piece_get). */
int tfs_stream_access(struct tfs_stream *st, uint64_t first_row, uint64_t last_row, size_t first,
		      size_t last);

#endif
