/* SPDX-License-Identifier: MIT */
/* lake: the engine behind a mount, one object: the store (with its disk cache), the chunk cache
 * and the prefetcher, opened from a lake URL and the settings. mount/ makes it; fs/ and gpu/
 * are front ends over it and build no engine part themselves. */
#ifndef TFS_LAKE_H
#define TFS_LAKE_H

#include <stdint.h>

#include "cache.h"
#include "prefetch.h"
#include "store.h"

struct tfs_lake_config {
	const char *url;	   /* the lake: file://, s3://, http(s):// */
	uint64_t cache_mem;	   /* bytes of decoded chunks kept in memory */
	const char *cache_dir;	   /* disk cache of fetched objects; NULL: none */
	uint64_t cache_disk;	   /* its budget in bytes */
	unsigned prefetch_threads; /* chunk loaders working ahead of readers; 0: none */
};

struct tfs_lake {
	struct tfs_store *store;	 /* with the disk cache in front when there is one */
	struct tfs_cache *cache;	 /* decoded chunks */
	struct tfs_prefetcher *prefetch; /* NULL until started, and without loaders */
	uint64_t cache_mem;
	char *cache_dir; /* NULL: none */
	unsigned prefetch_threads;
};

/* Open the store (and its disk cache) and make the chunk cache; no thread is started, so a
 * process may still fork (daemonise) afterwards. Logs why it fails. */
int tfs_lake_open(const struct tfs_lake_config *cfg, struct tfs_lake **out);
/* Start the prefetcher's loaders. Half the cache may hold chunks loaded ahead; the rest stays
 * for chunks readers are using. */
int tfs_lake_start(struct tfs_lake *l);
/* Stop the loaders without letting them wait out retries against a remote store: in-flight
 * requests are cancelled. Versions and views may still be released afterwards. */
void tfs_lake_stop(struct tfs_lake *l);
/* Stops the lake if needed, then frees the cache and closes the store. NULL is fine. */
void tfs_lake_close(struct tfs_lake *l);

#endif
