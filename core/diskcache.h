/* SPDX-License-Identifier: MIT */
/* diskcache: a bounded on-disk cache of immutable objects in front of any store. */
#ifndef TFS_DISKCACHE_H
#define TFS_DISKCACHE_H

#include <stdint.h>

#include "store.h"

struct tfs_diskcache_stats {
	uint64_t hits;	     /* object reads served from a cache file */
	uint64_t misses;     /* object reads that went to the inner store */
	uint64_t range_hits; /* ranged reads (frames of chunks) served from a cache file */
	uint64_t fills;	     /* cache files written */
	uint64_t evictions;  /* cache files removed to stay within the budget */
	uint64_t bad_files;  /* cache files that failed their check and were removed */
	uint64_t bypassed;   /* fills skipped because the disk was full or the directory unusable */
	uint64_t bytes_used; /* bytes of cache files, as this process last counted them */
	uint64_t budget;
};

/* Wrap a store with a disk cache in directory dir (created if missing) holding at most budget
 * bytes. The returned store serves whole-object reads of object keys
 * ("<dataset>/objects/<hh>/<62 hex>") from files named by the object id, filling the cache on a
 * miss; everything else (refs, markers, listings, writes, deletes) goes to the inner store
 * unchanged, so the cache never serves stale data: object content never changes for its id.
 *
 * A cache file is checked (object header and payload checksum, tfs_object_check) before it is
 * served; a damaged or truncated one is removed and the object fetched again. Least recently
 * used files are evicted to stay within the budget. The cache survives remounts and may be
 * shared by several processes at once (fills are written to a temporary file and renamed;
 * eviction tolerates files that vanish). When the directory cannot be used or the disk is full,
 * the cache is bypassed with a logged warning: reads still succeed from the inner store.
 *
 * The wrapper owns inner: tfs_store_close on the wrapper closes inner too. */
int tfs_diskcache_wrap(struct tfs_store *inner, const char *dir, uint64_t budget,
		       struct tfs_store **out);

/* Counters of a store returned by tfs_diskcache_wrap; -EINVAL for any other store. */
int tfs_diskcache_stats(struct tfs_store *s, struct tfs_diskcache_stats *st);

/* The inner store of a disk cache wrapper (for its request counters); s itself otherwise. */
struct tfs_store *tfs_diskcache_inner(struct tfs_store *s);

#endif
