/* SPDX-License-Identifier: MIT */
/* batchload: the chunks a batch of rows reads, loaded at once on the pool. */
#include "batchload.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "format.h"
#include "util.h"

struct tfs_batch_load {
	struct tfs_work w;
	struct tfs_version *v;
	struct tfs_cache *cache;
	size_t col, k;
	uint64_t off, want; /* frames: the bytes of chunk k its rows read; else 0 */
};

static int load_run(struct tfs_work *w)
{
	struct tfs_batch_load *j =
		(struct tfs_batch_load *)(void *)((char *)w - offsetof(struct tfs_batch_load, w));
	struct tfs_cache_entry *e;
	uint64_t base;

	/* Errors are the gather's to meet: it reads the same bytes and says which. */
	if (!j->want)
		tfs_version_chunk_prefetch(j->v, j->cache, j->col, j->k);
	else if (!tfs_version_piece_get(j->v, j->cache, NULL, j->col, j->k, j->off, j->want, &e,
					&base)) /* the loads of a batch run side by side already */
		tfs_cache_put(j->cache, e);
	return 0;
}

void tfs_batch_loads_init(struct tfs_batch_loads *b)
{
	memset(b, 0, sizeof(*b));
}

/* The loads being listed: each whole chunk once (a set of k + 1, open addressing), in the order
 * the gather meets them, as many as fit in room, half the cache's budget. */
struct listing {
	struct tfs_batch_loads *b;
	size_t cap;
	size_t *seen, mask;
	uint64_t room, fit; /* bytes; whole chunks */
};

static int listing_init(struct listing *ls, struct tfs_batch_loads *b, struct tfs_cache *cache,
			const struct tfs_column *c, size_t n)
{
	const uint64_t chunk = tfs_column_max_chunk_bytes(c);
	/* The set holds each chunk once: no more than the column has (a read of many small rows
	 * has many rows, and few chunks). */
	const size_t keys = n < c->nchunks ? n : c->nchunks;

	*ls = (struct listing){ .b = b, .room = tfs_cache_budget(cache) / 2 };
	ls->fit = chunk ? ls->room / chunk : 0;
	for (ls->mask = 16; ls->mask < 2 * keys; ls->mask *= 2)
		;
	ls->seen = calloc(ls->mask--, sizeof(*ls->seen));
	return ls->seen ? 0 : -ENOMEM;
}

static int add(struct listing *ls, const struct tfs_batch_load *j)
{
	struct tfs_batch_loads *b = ls->b;

	if (TFS_GROW(b->jobs, &ls->cap, b->njobs + 1))
		return -ENOMEM;
	b->jobs[b->njobs++] = *j;
	return 0;
}

static int add_chunk(struct listing *ls, struct tfs_version *v, struct tfs_cache *cache, size_t col,
		     size_t k)
{
	const struct tfs_column *c = &v->manifest.cols[col];
	size_t h = (k * 0x9e3779b97f4a7c15ull) >> 7 & ls->mask;

	while (ls->seen[h] && ls->seen[h] != k + 1)
		h = (h + 1) & ls->mask;
	if (ls->seen[h] || ls->b->njobs >= ls->fit)
		return 0;
	ls->seen[h] = k + 1;
	if (tfs_cache_contains(cache, &c->chunks[k].id))
		return 0;
	return add(ls, &(struct tfs_batch_load){ .v = v, .cache = cache, .col = col, .k = k });
}

/* Submit what was listed; on failure to list, nothing (the gather loads each chunk itself). */
static void submit(struct listing *ls, struct tfs_workpool *pool, int rc)
{
	struct tfs_batch_loads *b = ls->b;

	free(ls->seen);
	if (rc || !b->njobs) {
		free(b->jobs);
		b->jobs = NULL;
		b->njobs = 0;
		return;
	}
	tfs_workgroup_init(&b->g, pool);
	for (size_t i = 0; i < b->njobs; i++) {
		b->jobs[i].w.run = load_run;
		tfs_workgroup_submit(&b->g, &b->jobs[i].w, TFS_WORK_NORMAL);
	}
}

void tfs_batch_loads_start(struct tfs_batch_loads *b, struct tfs_workpool *pool,
			   struct tfs_version *v, struct tfs_cache *cache, size_t col,
			   const uint64_t *rows, size_t n, int frames)
{
	const struct tfs_column *c = &v->manifest.cols[col];
	uint64_t frame_bytes = 0; /* frames: the bytes the loads listed read */
	struct listing ls;
	int rc;

	if (b->started || !pool || !n || !c->row_bytes)
		return;
	b->started = 1;
	rc = listing_init(&ls, b, cache, c, n);
	for (size_t i = 0; !rc && i < n && frame_bytes <= ls.room;) {
		const size_t k = tfs_column_chunk_of(c, rows[i]);
		const uint64_t in = rows[i] - tfs_column_chunk_first(c, k);
		size_t run = 1;

		if (!frames) {
			rc = add_chunk(&ls, v, cache, col, k);
			i++;
			continue;
		}
		/* A run of rows of one chunk: one load of the frames it reads. */
		while (i + run < n && rows[i + run] == rows[i] + run &&
		       in + run < tfs_column_chunk_rows(c, k))
			run++;
		rc = add(&ls, &(struct tfs_batch_load){ .v = v,
							.cache = cache,
							.col = col,
							.k = k,
							.off = in * c->row_bytes,
							.want = run * c->row_bytes });
		frame_bytes += run * c->row_bytes;
		i += run;
	}
	submit(&ls, pool, rc);
}

void tfs_batch_loads_start_spans(struct tfs_batch_loads *b, struct tfs_workpool *pool,
				 struct tfs_version *v, struct tfs_cache *cache, size_t header,
				 const uint64_t *rows, size_t n)
{
	const size_t part = v->manifest.cols[header].data;
	const struct tfs_column *d = &v->manifest.cols[part];
	struct tfs_spans sp;
	struct listing ls;
	int rc;

	if (b->started || !pool || !n)
		return;
	b->started = 1;
	rc = listing_init(&ls, b, cache, d, n);
	tfs_spans_init(&sp, v, cache, header);
	for (size_t i = 0; !rc && i < n; i++) {
		uint64_t a, e;

		/* A row whose offsets cannot be read is the gather's to report. */
		if (tfs_spans_get(&sp, rows[i], &a, &e) || e <= a)
			continue;
		for (size_t k = tfs_column_chunk_of(d, a);
		     !rc && k <= tfs_column_chunk_of(d, e - 1); k++)
			rc = add_chunk(&ls, v, cache, part, k);
	}
	tfs_spans_done(&sp);
	submit(&ls, pool, rc);
}

void tfs_batch_loads_end(struct tfs_batch_loads *b)
{
	if (!b->started)
		return;
	if (b->jobs) { /* listed and submitted: submit frees them otherwise */
		tfs_workgroup_cancel(&b->g);
		tfs_workgroup_destroy(&b->g);
	}
	free(b->jobs);
	tfs_batch_loads_init(b);
}
