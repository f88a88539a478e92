/* SPDX-License-Identifier: MIT */
/* lake: the store, disk cache, chunk cache and prefetcher of one mounted lake. */
#include "lake.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "diskcache.h"
#include "util.h"

int tfs_lake_open(const struct tfs_lake_config *cfg, struct tfs_lake **out)
{
	struct tfs_lake *l = calloc(1, sizeof(*l));
	int rc;

	if (!l || (cfg->cache_dir && !(l->cache_dir = strdup(cfg->cache_dir)))) {
		rc = -ENOMEM;
		tfs_err("out of memory");
		goto fail;
	}
	l->cache_mem = cfg->cache_mem;
	l->prefetch_threads = cfg->prefetch_threads;
	rc = tfs_store_open(cfg->url, 0, &l->store);
	if (rc)
		goto fail; /* the backend said why */
	if (cfg->cache_dir) {
		struct tfs_store *cached;

		rc = tfs_diskcache_wrap(l->store, cfg->cache_dir, cfg->cache_disk, &cached);
		if (rc) {
			tfs_err("cannot set up the disk cache in %s", cfg->cache_dir);
			goto fail;
		}
		l->store = cached;
	}
	rc = tfs_cache_create(cfg->cache_mem, &l->cache);
	if (rc) {
		tfs_err("out of memory");
		goto fail;
	}
	*out = l;
	return 0;
fail:
	tfs_lake_close(l);
	return rc;
}

int tfs_lake_start(struct tfs_lake *l)
{
	int rc;

	if (!l->prefetch_threads || l->prefetch)
		return 0;
	rc = tfs_prefetcher_create(l->cache, l->prefetch_threads, l->cache_mem / 2, &l->prefetch);
	if (rc)
		tfs_err("cannot start %u chunk loaders: %s", l->prefetch_threads, strerror(-rc));
	return rc;
}

void tfs_lake_stop(struct tfs_lake *l)
{
	if (!l)
		return;
	if (l->store)
		tfs_store_cancel(l->store);
	tfs_prefetcher_destroy(l->prefetch);
	l->prefetch = NULL;
}

void tfs_lake_close(struct tfs_lake *l)
{
	if (!l)
		return;
	tfs_lake_stop(l);
	tfs_cache_destroy(l->cache);
	tfs_store_close(l->store);
	free(l->cache_dir);
	free(l);
}
