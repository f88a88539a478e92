/* SPDX-License-Identifier: MIT */
/* lakeimpl: the lake's state, for the files of the lake module alone (lake.c, epochwarm.c);
 * everyone else goes through lake.h. */
#ifndef TFS_LAKEIMPL_H
#define TFS_LAKEIMPL_H

#include "lake.h"

struct tfs_lake {
	struct tfs_store *store; /* with the disk cache in front when there is one */
	struct tfs_cache *cache; /* decoded chunks */
	/* The one pool of workers (prefetch_threads + gather_threads of them): chunk loads ahead,
	 * staging gathers. NULL until started. */
	struct tfs_workpool *pool;
	struct tfs_prefetcher *prefetch; /* NULL until started, and without loaders */
	uint64_t cache_mem;
	char *cache_dir; /* NULL: none */
	unsigned prefetch_threads, gather_threads;
	int epoch_warm;
	int evict_min;		   /* view readers publish plans; the cache evicts by them */
	struct tfs_workgroup warm; /* next-epoch loads (epochwarm.c); .pool NULL until started */
	uint64_t ttl_ns;	   /* ref_ttl */
	pthread_mutex_t lock;
	struct tfs_lake_ref *refs;   /* resolved refs; protected by lock */
	struct tfs_lake_view *views; /* built views, most recently used first; protected by lock */
	unsigned nviews;	     /* built now; protected by lock */
	unsigned idle_views;	     /* of those, ones nobody holds; protected by lock */
	uint64_t idle_bytes;	     /* their bytes; protected by lock */
	uint64_t view_mem;	     /* the bound on idle_bytes */
	uint64_t views_built, views_dropped; /* protected by lock */
};

#endif
