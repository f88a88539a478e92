/* SPDX-License-Identifier: MIT */
/* stats: what the .tensorfs/ files say: the daemon's counters as JSON (stats) and in Prometheus'
 * text format (metrics), reads per dataset version, and the last errors lookups met (errors). */
#ifndef TFS_FS_STATS_H
#define TFS_FS_STATS_H

#include <stdint.h>

#include "cache.h"
#include "diskcache.h"
#include "lake.h"
#include "tier.h"
#include "prefetch.h"
#include "store.h"
#include "util.h"

/* Read counters of one dataset version (a branch, tag or commit directory, its views included). */
struct tfs_fs_acct {
	char dataset[128];
	char version[128]; /* the directory's name: main, v1.0, commits/<id> */
	uint64_t reads;	   /* FUSE reads of its column files; atomic */
	uint64_t bytes;	   /* bytes those reads asked for; atomic */
};

/* Accounts and the error log; safe to use from any thread. */
struct tfs_fs_stats;

int tfs_fs_stats_create(struct tfs_fs_stats **out);
void tfs_fs_stats_destroy(struct tfs_fs_stats *st);

/* The account of dataset/version, added on first use. Never NULL: past a bounded number of
 * versions, the rest share one whose version is "other". Valid until the stats are destroyed. */
struct tfs_fs_acct *tfs_fs_stats_acct(struct tfs_fs_stats *st, const char *dataset,
				      const char *version);

static inline void tfs_fs_acct_read(struct tfs_fs_acct *a, uint64_t bytes)
{
	__atomic_add_fetch(&a->reads, 1, __ATOMIC_RELAXED);
	__atomic_add_fetch(&a->bytes, bytes, __ATOMIC_RELAXED);
}

/* Keep an error a user met on path (relative to the mount), for .tensorfs/errors; the last
 * TFS_FS_ERRORS_KEPT are kept. Also logged as a warning. */
#define TFS_FS_ERRORS_KEPT 64
void tfs_fs_stats_error(struct tfs_fs_stats *st, const char *path, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* .tensorfs/errors: one line an error, oldest first: "TIME PATH: REASON". */
int tfs_fs_errors_text(struct tfs_fs_stats *st, struct tfs_buf *out);

/* Every counter at one moment, gathered by admindir.c from the engine's parts. */
struct tfs_fs_snapshot {
	double uptime_s;
	struct tfs_cache_stats cache;
	struct tfs_lake_stats lake;		 /* its views */
	uint64_t nodes, nodes_made, nodes_freed; /* the node table: alive, made, freed */
	struct tfs_prefetch_stats prefetch;
	struct tfs_store_counters store; /* the backend's own: what went over the wire */
	const char *store_url;
	int has_disk_cache;
	struct tfs_diskcache_stats disk;
	const char *cache_dir;
	int has_tier;
	struct tfs_tier_stats tier;
	const char *tier_url;
	uint64_t tier_gets, tier_puts; /* requests to the tier store */
	uint64_t reads, read_bytes;    /* FUSE reads of column files */
	const char *control_json; /* the control file's member of stats ("  \"staging\": ...,\n") */
	const char *control_metrics; /* and its metric families; NULL without a control file */
};

int tfs_fs_stats_json(struct tfs_fs_stats *st, const struct tfs_fs_snapshot *s,
		      struct tfs_buf *out);
int tfs_fs_metrics_text(struct tfs_fs_stats *st, const struct tfs_fs_snapshot *s,
			struct tfs_buf *out);

#endif
