/* SPDX-License-Identifier: MIT */
/* batchload: the chunks a batch of rows reads, loaded at once on the pool. */
#include "batchload.h"

#include <stdlib.h>
#include <string.h>

#include "format.h"

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
	else if (!tfs_version_piece_get(j->v, j->cache, j->col, j->k, j->off, j->want, &e, &base))
		tfs_cache_put(j->cache, e);
	return 0;
}

void tfs_batch_loads_init(struct tfs_batch_loads *b)
{
	memset(b, 0, sizeof(*b));
}

void tfs_batch_loads_start(struct tfs_batch_loads *b, struct tfs_workpool *pool,
			   struct tfs_version *v, struct tfs_cache *cache, size_t col,
			   const uint64_t *rows, size_t n, int frames)
{
	const struct tfs_column *c = &v->manifest.cols[col];
	const uint64_t chunk = tfs_column_max_chunk_bytes(c);
	const uint64_t fit = chunk ? tfs_cache_budget(cache) / 2 / chunk : 0;
	size_t *seen = NULL, mask = 0; /* whole chunks: a set of k + 1, open addressing */

	if (b->started || !pool || !n || !c->row_bytes)
		return;
	b->started = 1;
	if (!frames) {
		for (mask = 16; mask < 2 * n; mask *= 2)
			;
		seen = calloc(mask--, sizeof(*seen));
	}
	b->jobs = calloc(n, sizeof(*b->jobs));
	if (!b->jobs || (!frames && !seen)) {
		free(seen);
		return; /* the gather loads each chunk itself */
	}
	tfs_workgroup_init(&b->g, pool);
	for (size_t i = 0; i < n;) {
		const size_t k = tfs_column_chunk_of(c, rows[i]);
		const uint64_t in = rows[i] - tfs_column_chunk_first(c, k);
		size_t run = 1, h = (k * 0x9e3779b97f4a7c15ull) >> 7 & mask;

		if (!frames) {
			/* Each chunk once, in the order the gather meets them. */
			while (seen[h] && seen[h] != k + 1)
				h = (h + 1) & mask;
			i++;
			if (seen[h] || b->njobs >= fit)
				continue;
			seen[h] = k + 1;
			if (!tfs_cache_contains(cache, &c->chunks[k].id))
				b->jobs[b->njobs++] = (struct tfs_batch_load){
					.v = v, .cache = cache, .col = col, .k = k
				};
			continue;
		}
		/* A run of rows of one chunk: one load of the frames it reads. */
		while (i + run < n && rows[i + run] == rows[i] + run &&
		       in + run < tfs_column_chunk_rows(c, k))
			run++;
		b->jobs[b->njobs++] = (struct tfs_batch_load){ .v = v,
							       .cache = cache,
							       .col = col,
							       .k = k,
							       .off = in * c->row_bytes,
							       .want = run * c->row_bytes };
		i += run;
	}
	free(seen);
	for (size_t i = 0; i < b->njobs; i++) {
		b->jobs[i].w.run = load_run;
		tfs_workgroup_submit(&b->g, &b->jobs[i].w, TFS_WORK_NORMAL);
	}
}

void tfs_batch_loads_end(struct tfs_batch_loads *b)
{
	if (!b->started)
		return;
	if (b->jobs && b->g.pool) {
		tfs_workgroup_cancel(&b->g);
		tfs_workgroup_destroy(&b->g);
	}
	free(b->jobs);
	tfs_batch_loads_init(b);
}
