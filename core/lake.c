/* SPDX-License-Identifier: MIT */
/* lake: the store, disk cache, chunk cache and prefetcher of one mounted lake. */
#include "lakeimpl.h"
#include "pack.h"
#include "query.h"

#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cacheplan.h"
#include "diskcache.h"
#include "tier.h"
#include "format.h"
#include "util.h"

/* A ref as some path named it, and the version it named when last confirmed. Entries are made
 * for refs that resolved, and live as long as the lake (refs are few; a ref removed later
 * keeps its last version until the lake closes). */
struct tfs_lake_ref {
	struct tfs_lake_ref *next; /* protected by the lake's lock */
	enum tfs_lake_ref_kind kind;
	char *ds, *name;
	struct tfs_version *ver; /* protected by the lake's lock */
	uint64_t resolved_ns;	 /* when ver was last confirmed; protected by the lake's lock */
};

/* The warm-up's plans of lv, withdrawn from the cache and freed. spans_lock held, or lv unshared.
 */
static void warm_plans_end(struct tfs_cache *cache, struct tfs_lake_view *lv)
{
	for (size_t i = 0; i < lv->nwarm_plans; i++)
		tfs_cache_plan_end(cache, lv->warm_plans[i]);
	free(lv->warm_plans);
	lv->warm_plans = NULL;
	lv->nwarm_plans = 0;
}

static void view_free(struct tfs_cache *cache, struct tfs_lake_view *lv)
{
	warm_plans_end(cache, lv);
	while (lv->spans) {
		struct tfs_view_spans *s = lv->spans;

		lv->spans = s->next;
		tfs_view_spans_free(s);
	}
	pthread_mutex_destroy(&lv->spans_lock);
	tfs_view_free(lv->view);
	tfs_version_put(lv->ver);
	free(lv->name);
	free(lv);
}

int tfs_lake_open(const struct tfs_lake_config *cfg, struct tfs_lake **out)
{
	struct tfs_lake *l = calloc(1, sizeof(*l));
	int rc;

	if (!l || (cfg->cache_dir && !(l->cache_dir = strdup(cfg->cache_dir)))) {
		free(l);
		tfs_err("out of memory");
		return -ENOMEM;
	}
	pthread_mutex_init(&l->lock, NULL);
	l->cache_mem = cfg->cache_mem;
	l->prefetch_threads = cfg->prefetch_threads;
	l->epoch_warm = cfg->epoch_warm;
	l->view_mem = cfg->view_mem ? cfg->view_mem : TFS_LAKE_VIEW_MEM_DEFAULT;
	l->gather_threads = cfg->gather_threads;
	if (!l->gather_threads) {
		long ncpu = sysconf(_SC_NPROCESSORS_ONLN);

		l->gather_threads = ncpu < 2 ? 2 : ncpu > 4 ? 4 : (unsigned)ncpu;
	}
	l->ttl_ns = (uint64_t)(cfg->ref_ttl * 1e9);
	rc = tfs_store_open(cfg->url, 0, &l->store);
	if (rc)
		goto fail; /* the backend said why */
	if (cfg->cache_tier) {
		struct tfs_store *tier, *tiered;

		rc = tfs_store_open(cfg->cache_tier, 0, &tier);
		if (rc) {
			tfs_err("cannot open the cache tier %s", cfg->cache_tier);
			goto fail;
		}
		rc = tfs_tier_wrap(l->store, tier,
				   cfg->cache_tier_queue ? cfg->cache_tier_queue : TFS_TIER_QUEUE,
				   &tiered);
		if (rc) {
			tfs_store_close(tier);
			goto fail;
		}
		l->store = tiered;
	}
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
	l->evict_min = cfg->evict_min;
	tfs_cache_evict_by_plans(l->cache, cfg->evict_min);
	*out = l;
	return 0;
fail:
	tfs_lake_close(l);
	return rc;
}

int tfs_lake_start(struct tfs_lake *l)
{
	int rc;

	if (l->pool)
		return 0;
	rc = tfs_workpool_create(l->prefetch_threads + l->gather_threads, &l->pool);
	if (rc) {
		tfs_err("cannot start %u worker threads: %s",
			l->prefetch_threads + l->gather_threads, strerror(-rc));
		return rc;
	}
	tfs_store_use_pool(l->store, l->pool);
	tfs_workgroup_init(&l->warm, l->pool);
	if (!l->prefetch_threads)
		return 0;
	rc = tfs_prefetcher_create(l->cache, l->pool, l->prefetch_threads, l->cache_mem / 2,
				   &l->prefetch);
	if (rc)
		tfs_err("cannot start the prefetcher: %s", strerror(-rc));
	return rc;
}

void tfs_lake_stop(struct tfs_lake *l)
{
	if (!l)
		return;
	if (l->store)
		tfs_store_cancel(l->store);
	if (l->warm.pool)
		tfs_workgroup_cancel(&l->warm);
	tfs_prefetcher_destroy(l->prefetch);
	l->prefetch = NULL;
}

void tfs_lake_close(struct tfs_lake *l)
{
	if (!l)
		return;
	tfs_lake_stop(l);
	/* Its users (the prefetcher, the control file's rings, readers) are gone by now. */
	if (l->store)
		tfs_store_use_pool(l->store, NULL);
	if (l->warm.pool)
		tfs_workgroup_destroy(&l->warm);
	tfs_workpool_destroy(l->pool);
	while (l->refs) {
		struct tfs_lake_ref *r = l->refs;

		l->refs = r->next;
		tfs_version_put(r->ver);
		free(r->ds);
		free(r->name);
		free(r);
	}
	while (l->views) {
		struct tfs_lake_view *lv = l->views;

		/* Every holder has let go by now (the front ends are gone). */
		assert(lv->refs == 0);
		l->views = lv->next;
		view_free(l->cache, lv);
	}
	pthread_mutex_destroy(&l->lock);
	tfs_cache_destroy(l->cache);
	tfs_store_close(l->store);
	free(l->cache_dir);
	free(l);
}

/* Called with the lake's lock held. */
static struct tfs_lake_ref *ref_find(struct tfs_lake *l, const char *ds,
				     enum tfs_lake_ref_kind kind, const char *name)
{
	for (struct tfs_lake_ref *r = l->refs; r; r = r->next)
		if (r->kind == kind && !strcmp(r->name, name) && !strcmp(r->ds, ds))
			return r;
	return NULL;
}

/* A version of ds at commit id some ref already holds, referenced; or NULL. Lock held. */
static struct tfs_version *shared_version(struct tfs_lake *l, const char *ds,
					  const struct tfs_id *id)
{
	for (struct tfs_lake_ref *r = l->refs; r; r = r->next)
		if (r->ver && tfs_id_eq(&r->ver->commit.id, id) && !strcmp(r->ds, ds)) {
			tfs_version_get(r->ver);
			return r->ver;
		}
	return NULL;
}

static int resolve_id(struct tfs_lake *l, const char *ds, enum tfs_lake_ref_kind kind,
		      const char *name, struct tfs_id *id)
{
	if (kind == TFS_LAKE_COMMIT)
		return strlen(name) == TFS_ID_HEX - 1 && !tfs_id_parse(name, id) ? 0 : -ENOENT;
	return tfs_ref_read(l->store, ds, kind == TFS_LAKE_TAG ? TFS_REF_TAG : TFS_REF_BRANCH, name,
			    id);
}

/* The version a ref's entry holds, referenced, when it may still be trusted (a branch within
 * ref_ttl of its last confirmation, a tag or commit for good); else NULL. */
static struct tfs_version *cached_version(struct tfs_lake *l, const char *ds,
					  enum tfs_lake_ref_kind kind, const char *name,
					  uint64_t now)
{
	struct tfs_version *v = NULL;
	struct tfs_lake_ref *r;

	pthread_mutex_lock(&l->lock);
	r = ref_find(l, ds, kind, name);
	if (r && r->ver && (kind != TFS_LAKE_BRANCH || now - r->resolved_ns < l->ttl_ns)) {
		v = r->ver;
		tfs_version_get(v);
	}
	pthread_mutex_unlock(&l->lock);
	return v;
}

/* The ref was just read and names commit id: the version of id (shared when another ref holds
 * it, else opened), recorded as the ref's, confirmed now. */
static int settle(struct tfs_lake *l, const char *ds, enum tfs_lake_ref_kind kind, const char *name,
		  const struct tfs_id *id, uint64_t now, struct tfs_version **out)
{
	struct tfs_version *v, *old = NULL;
	struct tfs_lake_ref *r;
	int rc;

	pthread_mutex_lock(&l->lock);
	v = shared_version(l, ds, id);
	pthread_mutex_unlock(&l->lock);
	if (!v) {
		rc = tfs_version_open(l->store, ds, id, &v);
		if (rc)
			return rc;
	}

	pthread_mutex_lock(&l->lock);
	r = ref_find(l, ds, kind, name);
	if (!r && (r = calloc(1, sizeof(*r)))) {
		r->kind = kind;
		r->ds = strdup(ds);
		r->name = strdup(name);
		if (r->ds && r->name) {
			r->next = l->refs;
			l->refs = r;
		} else {
			free(r->ds);
			free(r->name);
			free(r);
			r = NULL;
		}
	}
	if (r) {
		/* Keep whichever version a racing caller stored for the same commit. */
		if (r->ver && tfs_id_eq(&r->ver->commit.id, id)) {
			tfs_version_put(v);
			v = r->ver;
		} else {
			old = r->ver;
			r->ver = v;
		}
		r->resolved_ns = now;
		tfs_version_get(v);
	}
	pthread_mutex_unlock(&l->lock);
	tfs_version_put(old);
	*out = v; /* without an entry (out of memory) the caller still gets its version */
	return 0;
}

int tfs_lake_version(struct tfs_lake *l, const char *ds, enum tfs_lake_ref_kind kind,
		     const char *name, struct tfs_version **out)
{
	const uint64_t now = tfs_now_ns();
	struct tfs_id id;
	int rc;

	*out = cached_version(l, ds, kind, name, now);
	if (*out)
		return 0;
	/* Read the ref (or parse the id) without the lock: it may be a request to a remote store.
	 */
	rc = resolve_id(l, ds, kind, name, &id);
	return rc ? rc : settle(l, ds, kind, name, &id, now, out);
}

/* A name where a ref goes: a branch, a tag, or else a commit id. A trusted entry answers with no
 * I/O, and a ref read here is not read a second time. */
static int named_version(struct tfs_lake *l, const char *ds, const char *name,
			 struct tfs_version **out)
{
	const uint64_t now = tfs_now_ns();
	enum tfs_ref_kind rk;
	struct tfs_id id;
	int rc;

	*out = cached_version(l, ds, TFS_LAKE_BRANCH, name, now);
	if (!*out)
		*out = cached_version(l, ds, TFS_LAKE_TAG, name, now);
	if (*out)
		return 0;
	rc = tfs_name_valid(name) ? tfs_ref_lookup(l->store, ds, name, &rk, &id) : -ENOENT;
	if (rc == -ENOENT)
		return tfs_lake_version(l, ds, TFS_LAKE_COMMIT, name, out);
	if (rc)
		return rc;
	return settle(l, ds, rk == TFS_REF_TAG ? TFS_LAKE_TAG : TFS_LAKE_BRANCH, name, &id, now,
		      out);
}

#define SET_ERR(...) snprintf(err, err_cap, __VA_ARGS__)

int tfs_lake_resolve(struct tfs_lake *l, const char *path, struct tfs_version **out,
		     char **view_params, char *err, size_t err_cap)
{
	char *copy = strdup(path), *parts[8], *save = NULL;
	struct tfs_version *v = NULL;
	const char *name;
	size_t n = 0, vi;
	int rc = -EINVAL, query;

	*view_params = NULL;
	if (!copy)
		return -ENOMEM;
	for (char *p = strtok_r(copy, "/", &save); p; p = strtok_r(NULL, "/", &save)) {
		if (n == 8)
			goto bad;
		parts[n++] = p;
	}
	/* ds ref | ds commits id, then optionally views params, queries name, or queries name
	 * views params */
	vi = n >= 3 && !strcmp(parts[1], "commits") ? 3 : 2;
	query = n > vi && !strcmp(parts[vi], "queries");
	if (n < 2 || !tfs_name_valid(parts[0]) ||
	    (query ? !(n == vi + 2 || (n == vi + 4 && !strcmp(parts[vi + 2], "views")))
		   : (n != vi && !(n == vi + 2 && !strcmp(parts[vi], "views")))))
		goto bad;
	rc = tfs_dataset_check(l->store, parts[0]);
	if (rc) {
		SET_ERR("no dataset '%s'%s", parts[0],
			rc == -EPROTO ? " this tensorfs can read (newer format)" : "");
		goto out;
	}
	name = parts[vi - 1];
	if (vi == 3) {
		struct tfs_id id;

		if (strlen(name) != TFS_ID_HEX - 1 || tfs_id_parse(name, &id)) {
			SET_ERR("'%s' is not a commit id (64 hex digits)", name);
			rc = -EINVAL;
			goto out;
		}
	}
	rc = vi == 3 ? tfs_lake_version(l, parts[0], TFS_LAKE_COMMIT, name, &v)
		     : named_version(l, parts[0], name, &v);
	if (rc == -ENOENT) {
		SET_ERR("dataset '%s' has no branch, tag or commit '%s'", parts[0], name);
		goto out;
	}
	if (rc)
		goto unreadable;
	if (query) {
		/* A saved query: a view of its commit, named by its newest version. */
		struct tfs_query q;
		char id[TFS_ID_HEX], commit[TFS_ID_HEX];

		rc = tfs_query_head(l->store, parts[0], parts[vi + 1], &q);
		if (rc == -ENOENT) {
			SET_ERR("dataset '%s' has no query '%s'", parts[0], parts[vi + 1]);
			goto out;
		}
		if (rc)
			goto unreadable;
		tfs_id_hex(&q.id, id);
		tfs_id_hex(&q.commit, commit);
		tfs_query_free(&q);
		tfs_version_put(v);
		v = NULL;
		rc = tfs_lake_version(l, parts[0], TFS_LAKE_COMMIT, commit, &v);
		if (rc)
			goto unreadable;
		if (asprintf(view_params, "query=%s@%s%s%s", parts[vi + 1], id,
			     n == vi + 4 ? "," : "", n == vi + 4 ? parts[vi + 3] : "") < 0) {
			*view_params = NULL;
			rc = -ENOMEM;
			goto out;
		}
	} else if (n == vi + 2 && !(*view_params = strdup(parts[vi + 1]))) {
		rc = -ENOMEM;
		goto out;
	}
	*out = v;
	v = NULL;
	rc = 0;
	goto out;
unreadable:
	SET_ERR("cannot open %s: %s", path, strerror(-rc));
	goto out;
bad:
	SET_ERR("target '%s': expected DATASET/REF or DATASET/commits/ID, optionally followed by "
		"/views/PARAMS, /queries/NAME or /queries/NAME/views/PARAMS",
		path);
	rc = -EINVAL;
out:
	tfs_version_put(v);
	free(copy);
	return rc;
}

/* --- views ----------------------------------------------------------------------------------- */

/* Lock held for all three. */
static void view_unlink(struct tfs_lake *l, struct tfs_lake_view *lv)
{
	if (lv->prev)
		lv->prev->next = lv->next;
	else
		l->views = lv->next;
	if (lv->next)
		lv->next->prev = lv->prev;
	lv->next = lv->prev = NULL;
}

static void view_push(struct tfs_lake *l, struct tfs_lake_view *lv)
{
	lv->prev = NULL;
	lv->next = l->views;
	if (l->views)
		l->views->prev = lv;
	l->views = lv;
}

/* Unlink the least recently used idle views while their bytes exceed the bound; returns them
 * as a list. Lock held. */
static struct tfs_lake_view *trim_idle(struct tfs_lake *l)
{
	struct tfs_lake_view *lv = l->views, *last = NULL, *freed = NULL;

	for (; lv; lv = lv->next)
		last = lv;
	for (lv = last; lv && l->idle_bytes > l->view_mem;) {
		struct tfs_lake_view *prev = lv->prev;

		if (!lv->refs) {
			view_unlink(l, lv);
			lv->next = freed;
			freed = lv;
			l->idle_views--;
			l->idle_bytes -= lv->charged;
			l->nviews--;
			l->views_dropped++;
		}
		lv = prev;
	}
	return freed;
}

/* What a built view holds: its rows and the spans of its columns read so far. */
static uint64_t view_bytes(struct tfs_lake_view *lv)
{
	uint64_t b = sizeof(*lv) + strlen(lv->name) + 1 + sizeof(*lv->view) +
		     lv->view->n * sizeof(uint64_t) +
		     (lv->view->pack ? tfs_pack_bytes(lv->view->pack) : 0);

	pthread_mutex_lock(&lv->spans_lock);
	for (const struct tfs_view_spans *s = lv->spans; s; s = s->next)
		b += sizeof(*s) + s->n * (2 * sizeof(uint64_t) + sizeof(uint32_t)) +
		     sizeof(uint64_t) + s->norder * sizeof(uint32_t) +
		     (s->lat ? (s->n + 1) * sizeof(uint64_t) : 0);
	pthread_mutex_unlock(&lv->spans_lock);
	return b;
}

static void free_list(struct tfs_lake *l, struct tfs_lake_view *lv)
{
	while (lv) {
		struct tfs_lake_view *next = lv->next;

		view_free(l->cache, lv);
		lv = next;
	}
}

static struct tfs_lake_view *view_find(struct tfs_lake *l, const struct tfs_version *v,
				       const char *name)
{
	for (struct tfs_lake_view *lv = l->views; lv; lv = lv->next)
		if (tfs_id_eq(&lv->ver->commit.id, &v->commit.id) && !strcmp(lv->name, name) &&
		    !strcmp(lv->ver->ds, v->ds))
			return lv;
	return NULL;
}

/* Take a reference on lv, found in the list. Lock held. */
static void view_take(struct tfs_lake *l, struct tfs_lake_view *lv)
{
	if (lv->refs++ == 0) {
		l->idle_views--;
		l->idle_bytes -= lv->charged;
	}
	view_unlink(l, lv);
	view_push(l, lv);
}

int tfs_lake_view_get(struct tfs_lake *l, struct tfs_version *v, const char *name,
		      struct tfs_lake_view **out, char *err, size_t err_cap)
{
	struct tfs_view_params params;
	struct tfs_lake_view *lv, *nv;
	int rc;

	pthread_mutex_lock(&l->lock);
	lv = view_find(l, v, name);
	if (lv)
		view_take(l, lv);
	pthread_mutex_unlock(&l->lock);
	if (lv) {
		*out = lv;
		return 0;
	}

	/* Build without the lock: a shuffle of many rows takes a while. */
	nv = calloc(1, sizeof(*nv));
	if (!nv || !(nv->name = strdup(name))) {
		free(nv);
		return -ENOMEM;
	}
	pthread_mutex_init(&nv->spans_lock, NULL);
	rc = tfs_view_parse(name, &params, err, err_cap);
	if (!rc) {
		rc = tfs_view_build(v, l->cache, &params, &nv->view, err, err_cap);
		tfs_view_params_free(&params);
	}
	if (rc) {
		pthread_mutex_destroy(&nv->spans_lock);
		free(nv->name);
		free(nv);
		return rc;
	}
	nv->ver = v;
	tfs_version_get(v);
	nv->refs = 1;

	pthread_mutex_lock(&l->lock);
	lv = view_find(l, v, name); /* another caller may have built it meanwhile */
	if (lv)
		view_take(l, lv);
	else
		view_push(l, nv);
	if (!lv) {
		l->nviews++;
		l->views_built++;
	}
	pthread_mutex_unlock(&l->lock);
	if (lv) {
		view_free(l->cache, nv);
		nv = lv;
	}
	*out = nv;
	return 0;
}

void tfs_lake_view_ref(struct tfs_lake *l, struct tfs_lake_view *lv)
{
	pthread_mutex_lock(&l->lock);
	assert(lv->refs > 0);
	lv->refs++;
	pthread_mutex_unlock(&l->lock);
}

void tfs_lake_view_put(struct tfs_lake *l, struct tfs_lake_view *lv)
{
	struct tfs_lake_view *freed = NULL;
	uint64_t bytes;

	if (!lv)
		return;
	bytes = view_bytes(lv); /* while this reference keeps it */
	pthread_mutex_lock(&l->lock);
	assert(lv->refs > 0);
	if (--lv->refs == 0) {
		l->idle_views++;
		lv->charged = bytes;
		l->idle_bytes += bytes;
		freed = trim_idle(l);
	}
	pthread_mutex_unlock(&l->lock);
	free_list(l, freed);
}

void tfs_lake_view_plan_start(struct tfs_lake *l, struct tfs_lake_view *lv,
			      struct tfs_cache_plan *p)
{
	pthread_mutex_lock(&lv->spans_lock);
	lv->read = 1;
	warm_plans_end(l->cache, lv);
	pthread_mutex_unlock(&lv->spans_lock);
	tfs_cache_plan_start(l->cache, p);
}

int tfs_lake_view_spans(struct tfs_lake *l, struct tfs_lake_view *lv, size_t header, int lines,
			const struct tfs_view_spans **out)
{
	struct tfs_view_spans *s;
	int rc = 0;

	/* Held while building: a second reader of the column waits for the first's pass. */
	pthread_mutex_lock(&lv->spans_lock);
	for (s = lv->spans; s && s->header != header; s = s->next)
		;
	if (!s) {
		rc = tfs_view_spans_build(lv->view, lv->ver, l->cache, header, &s);
		if (!rc) {
			s->next = lv->spans;
			lv->spans = s;
		}
	}
	if (!rc && lines && !s->lat)
		rc = tfs_view_spans_lines(s, lv->view, lv->ver, l->cache);
	pthread_mutex_unlock(&lv->spans_lock);
	*out = s;
	return rc;
}

struct tfs_cache *tfs_lake_cache(const struct tfs_lake *l)
{
	return l->cache;
}

struct tfs_store *tfs_lake_store(const struct tfs_lake *l)
{
	return l->store;
}

struct tfs_workpool *tfs_lake_pool(const struct tfs_lake *l)
{
	return l->pool;
}

struct tfs_prefetcher *tfs_lake_prefetcher(const struct tfs_lake *l)
{
	return l->prefetch;
}

int tfs_lake_epoch_warm(const struct tfs_lake *l)
{
	return l->epoch_warm;
}

int tfs_lake_evicts_by_plans(const struct tfs_lake *l)
{
	return l->evict_min;
}

void tfs_lake_stats(struct tfs_lake *l, struct tfs_lake_stats *out)
{
	memset(out, 0, sizeof(*out));
	tfs_cache_stats(l->cache, &out->cache);
	out->has_prefetch = l->prefetch != NULL;
	if (l->prefetch)
		tfs_prefetcher_stats(l->prefetch, &out->prefetch);
	out->cache_dir = l->cache_dir;
	pthread_mutex_lock(&l->lock);
	out->views = l->nviews;
	out->views_idle = l->idle_views;
	out->views_idle_bytes = l->idle_bytes;
	out->view_mem = l->view_mem;
	out->views_built = l->views_built;
	out->views_dropped = l->views_dropped;
	pthread_mutex_unlock(&l->lock);
}
