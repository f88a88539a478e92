/* SPDX-License-Identifier: MIT */
/* epochwarm: when a reader nears the end of epoch E of a shuffled view, the first window of epoch
 * E+1 (same parameters otherwise) is built and loaded ahead, so that the next epoch starts
 * without a cold stall. Runs as one task per view and column on the lake's pool. */
#include "lakeimpl.h"

#include "cacheplan.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct warm {
	struct tfs_work work;
	struct tfs_lake *l;
	struct tfs_version *v; /* referenced */
	char *name;	       /* the next epoch's view */
	size_t col;
};

char *tfs_view_name_next_epoch(const char *name)
{
	size_t depth = 0, at = SIZE_MAX;
	char *out = NULL;

	/* The epoch= key at the top level (commas inside where=(...) belong to the value). */
	for (size_t i = 0; name[i]; i++) {
		if (name[i] == '(')
			depth++;
		else if (name[i] == ')' && depth)
			depth--;
		if ((i == 0 || (name[i - 1] == ',' && !depth)) && !strncmp(name + i, "epoch=", 6))
			at = i + 6;
	}
	if (at == SIZE_MAX)
		return asprintf(&out, "%s,epoch=1", name) < 0 ? NULL : out;
	{
		char *end;
		unsigned long long e = strtoull(name + at, &end, 10);

		if (end == name + at || e == UINT64_MAX)
			return NULL;
		if (asprintf(&out, "%.*s%llu%s", (int)at, name, e + 1, end) < 0)
			return NULL;
	}
	return out;
}

uint64_t tfs_lake_warm_bytes(const struct tfs_lake *l)
{
	return tfs_view_default_window(l->cache_mem);
}

uint64_t tfs_lake_warm_rows(const struct tfs_lake *l, uint64_t row_bytes)
{
	return tfs_lake_warm_bytes(l) / (row_bytes ? row_bytes : 1);
}

static void warm_free(struct warm *w)
{
	tfs_version_put(w->v);
	free(w->name);
	free(w);
}

static void warm_drop(struct tfs_work *work)
{
	warm_free((struct warm *)work);
}

/* The column whose data part col is, or SIZE_MAX when col is not a data part. */
static size_t data_header(const struct tfs_version *v, size_t col)
{
	if (v->manifest.cols[col].part != TFS_PART_DATA)
		return SIZE_MAX;
	for (size_t i = 0; i < v->manifest.ncols; i++)
		if (v->manifest.cols[i].part == TFS_PART_NONE &&
		    v->manifest.cols[i].kind != TFS_COL_FIXED && v->manifest.cols[i].data == col)
			return i;
	return SIZE_MAX;
}

/* With evict=min, the next epoch's order of column col goes to the cache as a plan before any of
 * it is loaded: its first window is then kept through the end of this epoch, and chunks this epoch
 * is done with but the next one needs go after those no epoch needs. The rows of the first window
 * (bytes: one warm-up window) are protected; the plan stands until a reader of the next epoch
 * publishes its own (tfs_lake_view_plan_start). */
static void warm_plan(struct warm *w, struct tfs_lake_view *lv, const struct tfs_view_spans *sp)
{
	/* A data part's positions are view rows of its column: bytes per row on average. */
	const uint64_t rb =
		sp ? tfs_view_spans_row_bytes(sp) : w->v->manifest.cols[w->col].row_bytes;
	struct tfs_cache_plan *p = tfs_cache_plan_new(tfs_lake_warm_rows(w->l, rb));
	struct tfs_cache_plan **grown = NULL;

	if (!p || tfs_view_plan_add(p, lv->view, w->v, w->col, sp)) {
		tfs_cache_plan_end(w->l->cache, p);
		return;
	}
	pthread_mutex_lock(&lv->spans_lock);
	if (!lv->read)
		grown = realloc(lv->warm_plans, (lv->nwarm_plans + 1) * sizeof(*grown));
	if (grown) {
		lv->warm_plans = grown;
		lv->warm_plans[lv->nwarm_plans++] = p;
		tfs_cache_plan_start(w->l->cache, p);
		p = NULL;
	}
	pthread_mutex_unlock(&lv->spans_lock);
	tfs_cache_plan_end(w->l->cache, p); /* a reader came first: its plan says it all */
}

/* Build the view, then load its column's chunks in the order it first needs them (a data part's
 * from the view's spans of its column), up to one default window (half the cache; the reader's
 * last window holds the other half). */
static int warm_run(struct tfs_work *work)
{
	struct warm *w = (struct warm *)work;
	const struct tfs_column *c = &w->v->manifest.cols[w->col];
	const size_t header = data_header(w->v, w->col);
	const uint64_t budget = tfs_lake_warm_bytes(w->l);
	const struct tfs_view_spans *sp;
	struct tfs_lake_view *lv = NULL;
	uint32_t *order = NULL, *pos = NULL;
	const uint32_t *ks = NULL;
	uint64_t bytes = 0, loaded = 0;
	size_t n = 0;
	char err[256];
	int rc;

	rc = tfs_lake_view_get(w->l, w->v, w->name, &lv, err, sizeof(err));
	if (!rc && header != SIZE_MAX) {
		rc = tfs_lake_view_spans(w->l, lv, header, 0, &sp);
		ks = rc ? NULL : sp->order;
		n = rc ? 0 : sp->norder;
	} else if (!rc) {
		rc = tfs_view_chunk_order(lv->view, c, &order, &n, &pos);
		ks = order;
	}
	if (!rc && w->l->evict_min)
		warm_plan(w, lv, header != SIZE_MAX ? sp : NULL);
	for (size_t i = 0; !rc && i < n && bytes < budget && w->l->prefetch; i++) {
		const uint64_t chunk = tfs_column_chunk_rows(c, ks[i]) * c->row_bytes;

		/* This epoch's reader holds its last window: the next one's loads stop where they
		 * would evict it. */
		if (!tfs_cache_room_ahead(w->l->cache, chunk))
			break;
		bytes += chunk;
		if (tfs_version_chunk_prefetch(w->v, w->l->cache, w->col, ks[i]) == 1)
			loaded++;
	}
	if (!rc)
		tfs_info("epoch_warm: %s: column %s: %" PRIu64 " chunks loaded ahead", w->name,
			 c->name, loaded);
	free(order);
	free(pos);
	tfs_lake_view_put(w->l, lv);
	warm_free(w);
	return 0;
}

void tfs_lake_view_warm_next(struct tfs_lake *l, struct tfs_lake_view *lv, size_t col)
{
	struct tfs_view_params p;
	struct warm *w;
	char err[128];
	int first;

	if (!l->epoch_warm || !l->warm.pool || !l->prefetch || col >= 256 ||
	    col >= lv->ver->manifest.ncols)
		return;
	pthread_mutex_lock(&lv->spans_lock);
	first = !(lv->warmed[col / 64] & 1ull << (col % 64));
	lv->warmed[col / 64] |= 1ull << (col % 64);
	pthread_mutex_unlock(&lv->spans_lock);
	if (!first || tfs_view_parse(lv->name, &p, err, sizeof(err)))
		return;
	first = p.shuffle;
	tfs_view_params_free(&p);
	if (!first || !(w = calloc(1, sizeof(*w))))
		return;
	w->name = tfs_view_name_next_epoch(lv->name);
	if (!w->name) {
		free(w);
		return;
	}
	w->work.run = warm_run;
	w->work.drop = warm_drop;
	w->l = l;
	w->v = lv->ver;
	tfs_version_get(w->v);
	w->col = col;
	tfs_workgroup_submit(&l->warm, &w->work, TFS_WORK_AHEAD);
}
