/* SPDX-License-Identifier: MIT */
/* lake: the engine behind a mount, one object: the store (with its disk cache), the chunk cache
 * and the prefetcher, opened from a lake URL and the settings. mount/ makes it; fs/ and gpu/
 * are front ends over it and build no engine part themselves. */
#ifndef TFS_LAKE_H
#define TFS_LAKE_H

#include <stdint.h>

#include <pthread.h>

#include "cache.h"
#include "prefetch.h"
#include "store.h"
#include "version.h"
#include "view.h"
#include "viewspans.h"
#include "workpool.h"

struct tfs_lake_config {
	const char *url;	   /* the lake: file://, s3://, http(s):// */
	uint64_t cache_mem;	   /* bytes of decoded chunks kept in memory */
	const char *cache_dir;	   /* disk cache of fetched objects; NULL: none */
	uint64_t cache_disk;	   /* its budget in bytes */
	const char *cache_tier;	   /* a cache tier shared by nodes (tier.h); NULL: none */
	uint64_t cache_tier_queue; /* bytes queued for the tier at most; 0: the default */
	unsigned prefetch_threads; /* chunk loaders working ahead of readers; 0: none */
	unsigned gather_threads;   /* staging gathers of the control file; 0: from the CPU count */
	double ref_ttl;		   /* seconds a branch head is trusted before it is read again */
	int epoch_warm;	   /* load the next epoch's first window ahead (tfs_lake_view_warm_next) */
	int evict_min;	   /* the chunk cache evicts by the view readers' plans (cacheplan.h) */
	uint64_t view_mem; /* bytes of built views nobody holds kept for reuse; 0: the default */
};

#define TFS_LAKE_VIEW_MEM_DEFAULT (256ull << 20)

struct tfs_lake_ref; /* a resolved ref, cached (lake.c) */

/* A view of a version, built once per (commit, view name) and shared by whoever reads it: the
 * mount's view directories and open files, and the control file's streams. */
struct tfs_lake_view {
	struct tfs_view *view;	 /* the rows, in view order; never changes */
	struct tfs_version *ver; /* the version it was built on (referenced) */
	char *name;		 /* the view's name: its directory, "seed=7,epoch=3" */
	unsigned refs;		 /* protected by the lake's lock */
	/* Columns of rows of any size read through the view, built on first use
	 * (tfs_lake_view_spans), and the columns whose next epoch is being warmed (a bit each,
	 * for the first 256); protected by spans_lock. */
	pthread_mutex_t spans_lock;
	struct tfs_view_spans *spans;
	uint64_t warmed[4];
	/* The cache's plans (MIN eviction) for this view: the warm-up's, published for the view as
	 * the next epoch before anyone reads it, stand until a reader publishes its own
	 * (tfs_lake_view_plan_start sets read) or the view is freed; protected by spans_lock. */
	struct tfs_cache_plan **warm_plans;
	size_t nwarm_plans;
	int read;
	uint64_t charged; /* its bytes, counted in the lake's idle bytes while idle; lake lock */
	struct tfs_lake_view *next,
		*prev; /* most recently used first; protected by the lake's lock */
};

/* The lake's state is its own (lakeimpl.h, for the lake's files alone); front ends ask. */
struct tfs_lake;

struct tfs_cache *tfs_lake_cache(const struct tfs_lake *l);
struct tfs_store *tfs_lake_store(const struct tfs_lake *l);
/* The worker pool (NULL until started) and the prefetcher (NULL until started, or without
 * loaders). */
struct tfs_workpool *tfs_lake_pool(const struct tfs_lake *l);
struct tfs_prefetcher *tfs_lake_prefetcher(const struct tfs_lake *l);
/* Whether readers warm the next epoch (epoch_warm), and publish plans the cache evicts by. */
int tfs_lake_epoch_warm(const struct tfs_lake *l);
int tfs_lake_evicts_by_plans(const struct tfs_lake *l);

/* What .tensorfs/stats shows of the lake. */
struct tfs_lake_stats {
	struct tfs_cache_stats cache;
	int has_prefetch;
	struct tfs_prefetch_stats prefetch;
	const char *cache_dir; /* NULL: none; valid with the lake */
	/* Built views: held by readers, idle (and their bytes), the budget, and views built and
	 * let go since the start. */
	uint64_t views, views_idle, views_idle_bytes, view_mem, views_built, views_dropped;
};
void tfs_lake_stats(struct tfs_lake *l, struct tfs_lake_stats *out);

/* How a name under a dataset is meant: a branch (moves), a tag or a commit id (never move). */
enum tfs_lake_ref_kind { TFS_LAKE_BRANCH, TFS_LAKE_TAG, TFS_LAKE_COMMIT };

/* Open the store (and its disk cache) and make the chunk cache; no thread is started, so a
 * process may still fork (daemonise) afterwards. Logs why it fails. */
int tfs_lake_open(const struct tfs_lake_config *cfg, struct tfs_lake **out);
/* Start the worker pool and the prefetcher on it. Half the cache may hold chunks loaded ahead;
 * the rest stays for chunks readers are using. */
int tfs_lake_start(struct tfs_lake *l);
/* Stop the loaders without letting them wait out retries against a remote store: in-flight
 * requests are cancelled. Versions and views may still be released afterwards. */
void tfs_lake_stop(struct tfs_lake *l);
/* Stops the lake if needed, then frees the cache and closes the store. NULL is fine. */
void tfs_lake_close(struct tfs_lake *l);

/* The version that branch, tag or commit `name` of dataset ds names now, referenced (release it
 * with tfs_version_put). The ref-refresh rule lives here alone: a branch's head is read again
 * once ref_ttl has passed since it was last confirmed; a tag or a commit is resolved once, for
 * good. Versions are shared: callers asking for the same commit get the same one. -ENOENT for
 * a ref or commit that is not there, -EIO when it cannot be read, -EPROTO for a newer format. */
int tfs_lake_version(struct tfs_lake *l, const char *ds, enum tfs_lake_ref_kind kind,
		     const char *name, struct tfs_version **out);

/* A path in the mount's grammar: "DATASET/REF" (a branch, a tag or a commit id) or
 * "DATASET/commits/ID", either followed by "/views/PARAMS", "/queries/NAME" (a saved query: the
 * version of its commit, and the view query=NAME@VERSION) or "/queries/NAME/views/PARAMS" or
 * not. Gives the version (as
 * tfs_lake_version) and, for a view, its PARAMS in *view_params (malloc'd; NULL for none). On
 * failure, a message for the user in err. */
int tfs_lake_resolve(struct tfs_lake *l, const char *path, struct tfs_version **out,
		     char **view_params, char *err, size_t err_cap);

/* The view `name` (a views/ directory name) of version v, referenced: built on first use,
 * then shared. Views nobody holds stay built, the most recently used first, while their bytes
 * (rows and spans) fit view_mem, so that an epoch's files opened one after another build their
 * view once; past it the least recently used go, and are built again when asked for. -EINVAL
 * with a message in err for a name that is not a view. */
int tfs_lake_view_get(struct tfs_lake *l, struct tfs_version *v, const char *name,
		      struct tfs_lake_view **out, char *err, size_t err_cap);
/* Another reference to a view one already holds. */
void tfs_lake_view_ref(struct tfs_lake *l, struct tfs_lake_view *lv);
/* Drop a reference. NULL is fine. */
void tfs_lake_view_put(struct tfs_lake *l, struct tfs_lake_view *lv);
/* epochwarm.c. A reader of view lv is within its last window of column col: with epoch_warm,
 * build the next epoch's view of the same parameters (epoch=E+1) and load the chunks of col that
 * its first window needs (one default window: half the cache), on the pool at read-ahead priority,
 * once per view and column. Nothing for views without a shuffle (every epoch is the same). */
void tfs_lake_view_warm_next(struct tfs_lake *l, struct tfs_lake_view *lv, size_t col);
/* The bytes of a view's last window that tfs_lake_view_warm_next is for: readers call it once
 * fewer than this many bytes of col are left to read. */
uint64_t tfs_lake_warm_bytes(const struct tfs_lake *l);
/* Rows of row_bytes each (0: taken as 1) in one such window: what a reader's plan (MIN eviction)
 * protects ahead of its cursor. */
uint64_t tfs_lake_warm_rows(const struct tfs_lake *l, uint64_t row_bytes);
/* Publish a reader's plan p of view lv to the cache (MIN eviction). The warm-up's plans of lv end:
 * the reader's own plan says what it will read, and where it is. */
void tfs_lake_view_plan_start(struct tfs_lake *l, struct tfs_lake_view *lv,
			      struct tfs_cache_plan *p);
/* "seed=7,epoch=3,rank=1" -> "seed=7,epoch=4,rank=1" (",epoch=1" added when there is none);
 * malloc'd, NULL when out of memory or the epoch would overflow. */
char *tfs_view_name_next_epoch(const char *name);

/* The view's spans of column header (a ragged, text or bytes column of lv->ver), built once and
 * kept while the view stays built; with lines, their lines.txt offsets too (text columns). */
int tfs_lake_view_spans(struct tfs_lake *l, struct tfs_lake_view *lv, size_t header, int lines,
			const struct tfs_view_spans **out);

#endif
