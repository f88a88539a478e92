/* SPDX-License-Identifier: MIT */
/* stats: the daemon's counters as JSON and as Prometheus text, version accounts, the error log. */
#include "stats.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Enough for every version a job reads; more share the "other" account. */
#define MAX_ACCTS 256

struct error {
	struct timespec when;
	char path[256];
	char reason[256];
};

struct tfs_fs_stats {
	pthread_mutex_t lock;
	struct tfs_fs_acct *accts[MAX_ACCTS]; /* protected by lock; never freed before destroy */
	size_t naccts;			      /* protected by lock */
	struct tfs_fs_acct other;
	struct error errors[TFS_FS_ERRORS_KEPT]; /* a ring; protected by lock */
	uint64_t nerrors;			 /* ever kept; protected by lock */
};

int tfs_fs_stats_create(struct tfs_fs_stats **out)
{
	struct tfs_fs_stats *st = calloc(1, sizeof(*st));

	if (!st)
		return -ENOMEM;
	pthread_mutex_init(&st->lock, NULL);
	strcpy(st->other.dataset, "other");
	strcpy(st->other.version, "other");
	*out = st;
	return 0;
}

void tfs_fs_stats_destroy(struct tfs_fs_stats *st)
{
	if (!st)
		return;
	for (size_t i = 0; i < st->naccts; i++)
		free(st->accts[i]);
	pthread_mutex_destroy(&st->lock);
	free(st);
}

struct tfs_fs_acct *tfs_fs_stats_acct(struct tfs_fs_stats *st, const char *dataset,
				      const char *version)
{
	struct tfs_fs_acct *a = NULL;

	pthread_mutex_lock(&st->lock);
	for (size_t i = 0; i < st->naccts && !a; i++)
		if (!strcmp(st->accts[i]->dataset, dataset) &&
		    !strcmp(st->accts[i]->version, version))
			a = st->accts[i];
	if (!a && st->naccts < MAX_ACCTS && (a = calloc(1, sizeof(*a)))) {
		snprintf(a->dataset, sizeof(a->dataset), "%s", dataset);
		snprintf(a->version, sizeof(a->version), "%s", version);
		st->accts[st->naccts++] = a;
	}
	pthread_mutex_unlock(&st->lock);
	return a ? a : &st->other;
}

void tfs_fs_stats_error(struct tfs_fs_stats *st, const char *path, const char *fmt, ...)
{
	struct error *e;
	va_list ap;

	pthread_mutex_lock(&st->lock);
	e = &st->errors[st->nerrors++ % TFS_FS_ERRORS_KEPT];
	clock_gettime(CLOCK_REALTIME, &e->when);
	snprintf(e->path, sizeof(e->path), "%s", path);
	va_start(ap, fmt);
	vsnprintf(e->reason, sizeof(e->reason), fmt, ap);
	va_end(ap);
	tfs_warn("%s%s%s", e->path, *e->path ? ": " : "", e->reason);
	pthread_mutex_unlock(&st->lock);
}

int tfs_fs_errors_text(struct tfs_fs_stats *st, struct tfs_buf *out)
{
	int rc = 0;

	pthread_mutex_lock(&st->lock);
	uint64_t first = st->nerrors > TFS_FS_ERRORS_KEPT ? st->nerrors - TFS_FS_ERRORS_KEPT : 0;

	for (uint64_t i = first; i < st->nerrors && !rc; i++) {
		const struct error *e = &st->errors[i % TFS_FS_ERRORS_KEPT];
		struct tm tm;
		char when[32];

		gmtime_r(&e->when.tv_sec, &tm);
		strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%S", &tm);
		rc = tfs_buf_printf(out, "%s.%03ldZ %s%s%s\n", when, e->when.tv_nsec / 1000000,
				    e->path, *e->path ? ": " : "", e->reason);
	}
	pthread_mutex_unlock(&st->lock);
	return rc;
}

/* The accounts in use, copied under the lock (their counters are read atomically after). */
static size_t accts_now(struct tfs_fs_stats *st, struct tfs_fs_acct **v, size_t cap)
{
	size_t n;

	pthread_mutex_lock(&st->lock);
	n = st->naccts < cap ? st->naccts : cap;
	memcpy(v, st->accts, n * sizeof(*v));
	pthread_mutex_unlock(&st->lock);
	if (n < cap && __atomic_load_n(&st->other.reads, __ATOMIC_RELAXED))
		v[n++] = &st->other;
	return n;
}

static uint64_t nerrors(struct tfs_fs_stats *st)
{
	uint64_t n;

	pthread_mutex_lock(&st->lock);
	n = st->nerrors;
	pthread_mutex_unlock(&st->lock);
	return n;
}

#define LOAD(x) __atomic_load_n(&(x), __ATOMIC_RELAXED)

int tfs_fs_stats_json(struct tfs_fs_stats *st, const struct tfs_fs_snapshot *s, struct tfs_buf *out)
{
	const struct tfs_cache_stats *c = &s->cache;
	const struct tfs_prefetch_stats *p = &s->prefetch;
	const struct tfs_store_counters *sc = &s->store;
	struct tfs_fs_acct *accts[MAX_ACCTS + 1];
	size_t n = accts_now(st, accts, MAX_ACCTS + 1);
	int rc;

	rc = tfs_buf_printf(
		out,
		"{\n  \"uptime_s\": %.3f,\n"
		"  \"cache\": {\"budget\": %" PRIu64 ", \"bytes\": %" PRIu64
		", \"entries\": %" PRIu64 ", \"hits\": %" PRIu64 ", \"misses\": %" PRIu64
		", \"joined_loads\": %" PRIu64 ", \"load_errors\": %" PRIu64
		", \"evictions\": %" PRIu64 ", \"bytes_decompressed\": %" PRIu64
		", \"reader_wait_s\": %.6f, \"load_s\": %.6f, \"plans\": %" PRIu64
		", \"arena_bytes\": %" PRIu64 ", \"arena_used\": %" PRIu64
		", \"arena_full\": %" PRIu64 "},\n"
		"  \"views\": {\"built\": %" PRIu64 ", \"idle\": %" PRIu64
		", \"idle_bytes\": %" PRIu64 ", \"view_mem\": %" PRIu64
		", \"built_total\": %" PRIu64 ", \"dropped_total\": %" PRIu64 "},\n"
		"  \"nodes\": {\"alive\": %" PRIu64 ", \"made_total\": %" PRIu64
		", \"freed_total\": %" PRIu64 "},\n"
		"  \"prefetch\": {\"threads\": %u, \"scheduled\": %" PRIu64 ", \"loaded\": %" PRIu64
		", \"hits\": %" PRIu64 ", \"wasted\": %" PRIu64 ", \"pending_bytes\": %" PRIu64
		", \"inflight_bytes\": %" PRIu64 ", \"already_cached\": %" PRIu64
		", \"throttled\": %" PRIu64 ", \"errors\": %" PRIu64
		", \"sequential_streams\": %" PRIu64 ", \"random_resets\": %" PRIu64
		", \"frame_indexes\": %" PRIu64 "},\n"
		"  \"fuse\": {\"reads\": %" PRIu64 ", \"read_bytes_requested\": %" PRIu64 "},\n"
		"  \"store\": {\"url\": \"%s\", \"gets\": %" PRIu64 ", \"urgent_gets\": %" PRIu64
		", \"ranged_gets\": %" PRIu64 ", \"heads\": %" PRIu64 ", \"lists\": %" PRIu64
		", \"bytes_fetched\": %" PRIu64 ", \"read_s\": %.6f, \"retries\": %" PRIu64 "},\n",
		s->uptime_s, c->budget, c->bytes, c->entries, c->hits, c->misses, c->waits,
		c->load_errors, c->evictions, c->bytes_loaded, (double)c->wait_ns / 1e9,
		(double)c->load_ns / 1e9, c->plans, c->arena_bytes, c->arena_used, c->arena_full,
		s->lake.views, s->lake.views_idle, s->lake.views_idle_bytes, s->lake.view_mem,
		s->lake.views_built, s->lake.views_dropped, s->nodes, s->nodes_made, s->nodes_freed,
		p->threads, p->scheduled, c->prefetch_loads, c->prefetch_hits, c->prefetch_wasted,
		c->prefetch_pending, p->inflight_bytes, p->skipped_cached, p->throttled, p->errors,
		p->sequential_streams, p->random_resets, p->indexes, s->reads, s->read_bytes,
		s->store_url, sc->gets, sc->urgent_gets, sc->ranged_gets, sc->heads, sc->lists,
		sc->bytes_read, (double)sc->read_ns / 1e9, sc->retries);
	if (!rc && s->control_json)
		rc = tfs_buf_printf(out, "%s", s->control_json);
	if (!rc)
		rc = tfs_buf_printf(out, "  \"versions\": [");
	for (size_t i = 0; i < n && !rc; i++)
		rc = tfs_buf_printf(
			out,
			"%s\n    {\"dataset\": \"%s\", \"version\": \"%s\", \"reads\": %" PRIu64
			", \"bytes\": %" PRIu64 "}",
			i ? "," : "", accts[i]->dataset, accts[i]->version, LOAD(accts[i]->reads),
			LOAD(accts[i]->bytes));
	if (!rc)
		rc = tfs_buf_printf(out, "%s],\n  \"errors\": %" PRIu64 ",\n", n ? "\n  " : "",
				    nerrors(st));
	if (!rc && s->has_tier)
		rc = tfs_buf_printf(out,
				    "  \"cache_tier\": {\"url\": \"%s\", \"hits\": %" PRIu64
				    ", \"misses\": %" PRIu64 ", \"bad\": %" PRIu64
				    ", \"errors\": %" PRIu64 ", \"hit_bytes\": %" PRIu64
				    ", \"writes\": %" PRIu64 ", \"write_bytes\": %" PRIu64
				    ", \"write_errors\": %" PRIu64 ", \"dropped\": %" PRIu64
				    ", \"pending_bytes\": %" PRIu64 ", \"gets\": %" PRIu64
				    ", \"puts\": %" PRIu64 "},\n",
				    s->tier_url, s->tier.hits, s->tier.misses, s->tier.bad,
				    s->tier.errors, s->tier.hit_bytes, s->tier.writes,
				    s->tier.write_bytes, s->tier.write_errors, s->tier.dropped,
				    s->tier.pending_bytes, s->tier_gets, s->tier_puts);
	else if (!rc)
		rc = tfs_buf_printf(out, "  \"cache_tier\": null,\n");
	if (rc)
		return rc;
	if (!s->has_disk_cache)
		return tfs_buf_printf(out, "  \"disk_cache\": null\n}\n");
	return tfs_buf_printf(out,
			      "  \"disk_cache\": {\"dir\": \"%s\", \"budget\": %" PRIu64
			      ", \"bytes\": %" PRIu64 ", \"hits\": %" PRIu64
			      ", \"misses\": %" PRIu64 ", \"fills\": %" PRIu64
			      ", \"evictions\": %" PRIu64 ", \"bad_files\": %" PRIu64
			      ", \"bypassed\": %" PRIu64 ", \"range_hits\": %" PRIu64 "}\n}\n",
			      s->cache_dir, s->disk.budget, s->disk.bytes_used, s->disk.hits,
			      s->disk.misses, s->disk.fills, s->disk.evictions, s->disk.bad_files,
			      s->disk.bypassed, s->disk.range_hits);
}

/* Prometheus' text exposition format, version 0.0.4: a family is "# HELP", "# TYPE" and its
 * samples; counters end in _total; sizes are _bytes and times _seconds. */
static int family(struct tfs_buf *o, const char *name, const char *type, const char *help)
{
	return tfs_buf_printf(o, "# HELP tensorfs_%s %s\n# TYPE tensorfs_%s %s\n", name, help, name,
			      type);
}

static int metric(struct tfs_buf *o, const char *name, const char *type, const char *help,
		  uint64_t v)
{
	return family(o, name, type, help)
		       ?: tfs_buf_printf(o, "tensorfs_%s %" PRIu64 "\n", name, v);
}

/* A label value, escaped as the format wants (\\, \" and \n). */
static int label(struct tfs_buf *o, const char *v)
{
	int rc = 0;

	for (; *v && !rc; v++)
		rc = *v == '\\'	  ? tfs_buf_printf(o, "\\\\")
		     : *v == '"'  ? tfs_buf_printf(o, "\\\"")
		     : *v == '\n' ? tfs_buf_printf(o, "\\n")
				  : tfs_buf_append(o, v, 1);
	return rc;
}

static int version_samples(struct tfs_buf *o, const char *name, struct tfs_fs_acct **a, size_t n,
			   int bytes)
{
	int rc = 0;

	for (size_t i = 0; i < n && !rc; i++) {
		rc = tfs_buf_printf(o, "tensorfs_%s{dataset=\"", name) ?: label(o, a[i]->dataset)
			?: tfs_buf_printf(o, "\",version=\"") ?: label(o, a[i]->version)
			?: tfs_buf_printf(o, "\"} %" PRIu64 "\n",
					  bytes ? LOAD(a[i]->bytes) : LOAD(a[i]->reads));
	}
	return rc;
}

int tfs_fs_metrics_text(struct tfs_fs_stats *st, const struct tfs_fs_snapshot *s, struct tfs_buf *o)
{
	const struct tfs_cache_stats *c = &s->cache;
	const struct tfs_prefetch_stats *p = &s->prefetch;
	const struct tfs_store_counters *sc = &s->store;
	struct tfs_fs_acct *accts[MAX_ACCTS + 1];
	size_t n = accts_now(st, accts, MAX_ACCTS + 1);
	int rc;

	rc = family(o, "uptime_seconds", "gauge", "Seconds since the mount started.") ?:
		tfs_buf_printf(o, "tensorfs_uptime_seconds %.3f\n", s->uptime_s) ?:
		metric(o, "read_requests_total", "counter", "FUSE reads of column files.",
		       s->reads) ?:
		metric(o, "read_bytes_total", "counter", "Bytes FUSE reads of column files asked for.",
		       s->read_bytes) ?:
		family(o, "version_read_requests_total", "counter",
		       "FUSE reads of a dataset version's column files (its views included).") ?:
		version_samples(o, "version_read_requests_total", accts, n, 0) ?:
		family(o, "version_read_bytes_total", "counter",
		       "Bytes reads of a dataset version's column files asked for.") ?:
		version_samples(o, "version_read_bytes_total", accts, n, 1) ?:
		family(o, "reader_wait_seconds_total", "counter",
		       "Time readers spent blocked waiting for a chunk to load (data stall).") ?:
		tfs_buf_printf(o, "tensorfs_reader_wait_seconds_total %.6f\n",
			       (double)c->wait_ns / 1e9) ?:
		family(o, "cache_load_seconds_total", "counter",
		       "Time in chunk loads (fetch, checks, decode), summed over the threads.") ?:
		tfs_buf_printf(o, "tensorfs_cache_load_seconds_total %.6f\n",
			       (double)c->load_ns / 1e9) ?:
		metric(o, "cache_budget_bytes", "gauge", "Memory cache budget.", c->budget) ?:
		metric(o, "views", "gauge", "Views built now (held and idle).", s->lake.views) ?:
		metric(o, "views_idle_bytes", "gauge", "Bytes of built views nobody holds.",
		       s->lake.views_idle_bytes) ?:
		metric(o, "view_mem_bytes", "gauge", "The bound on idle views' bytes (view_mem).",
		       s->lake.view_mem) ?:
		metric(o, "views_built_total", "counter", "Views built.", s->lake.views_built) ?:
		metric(o, "nodes", "gauge", "File system nodes the daemon keeps.", s->nodes) ?:
		metric(o, "cache_bytes", "gauge", "Decoded chunk bytes in the memory cache.",
		       c->bytes) ?:
		metric(o, "cache_entries", "gauge", "Chunks in the memory cache.", c->entries) ?:
		metric(o, "cache_hits_total", "counter", "Chunk lookups served from memory.",
		       c->hits) ?:
		metric(o, "cache_misses_total", "counter", "Chunk lookups that loaded the chunk.",
		       c->misses) ?:
		metric(o, "cache_joined_loads_total", "counter",
		       "Chunk lookups that waited for a load already under way.", c->waits) ?:
		metric(o, "cache_evictions_total", "counter", "Chunks evicted from memory.",
		       c->evictions) ?:
		metric(o, "cache_decoded_bytes_total", "counter",
		       "Bytes of chunks loaded and decoded, by readers and prefetch.",
		       c->bytes_loaded) ?:
		metric(o, "chunk_load_errors_total", "counter",
		       "Chunk loads that failed (unreadable, damaged or failing their checksum).",
		       c->load_errors) ?:
		metric(o, "prefetch_threads", "gauge", "Chunk loaders working ahead of readers.",
		       p->threads) ?:
		metric(o, "prefetch_scheduled_total", "counter", "Chunks queued for loading ahead.",
		       p->scheduled) ?:
		metric(o, "prefetch_loaded_total", "counter", "Chunks loaded ahead of readers.",
		       c->prefetch_loads) ?:
		metric(o, "prefetch_hits_total", "counter",
		       "Chunks loaded ahead that a reader then used.", c->prefetch_hits) ?:
		metric(o, "prefetch_wasted_total", "counter",
		       "Chunks loaded ahead and evicted before any reader used them.",
		       c->prefetch_wasted) ?:
		metric(o, "prefetch_inflight_bytes", "gauge", "Chunk bytes queued or loading ahead.",
		       p->inflight_bytes) ?:
		metric(o, "prefetch_ahead_bytes", "gauge",
		       "Chunk bytes loaded ahead of readers and not used yet.", c->prefetch_pending) ?:
		metric(o, "prefetch_errors_total", "counter", "Read-ahead loads that failed.",
		       p->errors) ?:
		family(o, "store_requests_total", "counter", "Requests to the lake's store.") ?:
		tfs_buf_printf(o,
			       "tensorfs_store_requests_total{op=\"get\"} %" PRIu64 "\n"
			       "tensorfs_store_requests_total{op=\"urgent_get\"} %" PRIu64 "\n"
			       "tensorfs_store_requests_total{op=\"ranged_get\"} %" PRIu64 "\n"
			       "tensorfs_store_requests_total{op=\"head\"} %" PRIu64 "\n"
			       "tensorfs_store_requests_total{op=\"list\"} %" PRIu64 "\n",
			       sc->gets, sc->urgent_gets, sc->ranged_gets, sc->heads, sc->lists) ?:
		metric(o, "store_fetched_bytes_total", "counter", "Bytes fetched from the store.",
		       sc->bytes_read) ?:
		family(o, "store_read_seconds_total", "counter",
		       "Time in store reads (the disk or the network), summed over the threads.") ?:
		tfs_buf_printf(o, "tensorfs_store_read_seconds_total %.6f\n",
			       (double)sc->read_ns / 1e9) ?:
		metric(o, "store_retries_total", "counter",
		       "Store requests repeated after a transport error, 5xx or damaged body.",
		       sc->retries) ?:
		metric(o, "lookup_errors_total", "counter",
		       "Errors lookups met (the last are in .tensorfs/errors).", nerrors(st));
	if (!rc && s->has_disk_cache)
		rc = metric(o, "disk_cache_budget_bytes", "gauge", "Disk cache budget.",
			    s->disk.budget) ?:
			metric(o, "disk_cache_bytes", "gauge", "Bytes of disk cache files.",
			       s->disk.bytes_used) ?:
			metric(o, "disk_cache_hits_total", "counter",
			       "Object reads served from the disk cache.", s->disk.hits) ?:
			metric(o, "disk_cache_misses_total", "counter",
			       "Object reads that went to the store.", s->disk.misses) ?:
			metric(o, "disk_cache_range_hits_total", "counter",
			       "Ranged reads (frames of chunks) served from the disk cache.",
			       s->disk.range_hits) ?:
			metric(o, "disk_cache_fills_total", "counter", "Disk cache files written.",
			       s->disk.fills) ?:
			metric(o, "disk_cache_evictions_total", "counter",
			       "Disk cache files removed to stay within the budget.",
			       s->disk.evictions) ?:
			metric(o, "disk_cache_bad_files_total", "counter",
			       "Disk cache files that failed their check.", s->disk.bad_files) ?:
			metric(o, "disk_cache_bypassed_total", "counter",
			       "Disk cache fills skipped (disk full or unusable).", s->disk.bypassed);
	if (!rc && s->has_tier)
		rc = metric(o, "cache_tier_hits_total", "counter",
			    "Object reads served by the shared cache tier.", s->tier.hits) ?:
			metric(o, "cache_tier_misses_total", "counter",
			       "Object reads the cache tier did not have.", s->tier.misses) ?:
			metric(o, "cache_tier_bad_total", "counter",
			       "Cache tier objects that failed their check (ignored).", s->tier.bad) ?:
			metric(o, "cache_tier_errors_total", "counter",
			       "Cache tier reads that failed (the origin was read).", s->tier.errors) ?:
			metric(o, "cache_tier_hit_bytes_total", "counter",
			       "Bytes the cache tier served.", s->tier.hit_bytes) ?:
			metric(o, "cache_tier_writes_total", "counter",
			       "Objects written to the cache tier.", s->tier.writes) ?:
			metric(o, "cache_tier_write_bytes_total", "counter",
			       "Bytes written to the cache tier.", s->tier.write_bytes) ?:
			metric(o, "cache_tier_write_errors_total", "counter",
			       "Cache tier writes that failed.", s->tier.write_errors) ?:
			metric(o, "cache_tier_dropped_total", "counter",
			       "Cache tier writes dropped (queue full).", s->tier.dropped) ?:
			metric(o, "cache_tier_pending_bytes", "gauge",
			       "Bytes queued for the cache tier.", s->tier.pending_bytes);
	if (!rc && s->control_metrics)
		rc = tfs_buf_printf(o, "%s", s->control_metrics);
	return rc;
}
