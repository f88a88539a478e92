/* SPDX-License-Identifier: MIT */
/* reader: bad rows from one map, and batches of rows as gather lists over pinned chunks. */
#include "reader.h"

#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "badchunks.h"
#include "util.h"

/* A chunk a list's ops read, pinned; (part, k) finds it again for the next row. */
struct tfs_gather_pin {
	struct tfs_cache_entry *e;
	size_t part, k;
};

struct tfs_reader {
	struct tfs_version *v;
	struct tfs_cache *cache;
	int pad;
	pthread_mutex_t lock;
	/* Per manifest column: a byte per chunk, set for chunks recorded damaged, and the record's
	 * generation it was built at (0: never); protected by lock. */
	uint8_t **bad;
	unsigned *bad_gen;
};

/* --- gather lists ---------------------------------------------------------------------------- */

void tfs_gather_list_init(struct tfs_gather_list *l, struct tfs_cache *cache)
{
	memset(l, 0, sizeof(*l));
	l->cache = cache;
}

void tfs_gather_list_release(struct tfs_gather_list *l)
{
	for (size_t i = 0; i < l->npins; i++)
		tfs_cache_put(l->cache, l->pins[i].e);
	l->npins = 0;
	l->nops = 0;
	l->bytes = 0;
}

void tfs_gather_list_free(struct tfs_gather_list *l)
{
	tfs_gather_list_release(l);
	free(l->ops);
	free(l->pins);
	l->ops = NULL;
	l->pins = NULL;
	l->ops_cap = l->pins_cap = 0;
}

void tfs_gather_list_run(const struct tfs_gather_list *l, uint8_t *dst)
{
	for (size_t i = 0; i < l->nops; i++) {
		const struct tfs_gather_op *o = &l->ops[i];
		uint8_t *to = dst + o->dst;

		if (!o->src)
			memset(to, 0, (size_t)o->bytes);
		else if ((uintptr_t)o->src != (uintptr_t)to)
			memcpy(to, (const void *)(uintptr_t)o->src, (size_t)o->bytes);
	}
}

/* Append an op, merged into the last one when it continues it on both sides. */
static int add_op(struct tfs_gather_list *l, const void *src, uint64_t dst, uint64_t bytes)
{
	const uint64_t s = (uint64_t)(uintptr_t)src;
	struct tfs_gather_op *last = l->nops ? &l->ops[l->nops - 1] : NULL;

	if (!bytes)
		return 0;
	l->bytes += bytes;
	if (last && last->dst + last->bytes == dst &&
	    ((!s && !last->src) || (s && last->src && last->src + last->bytes == s))) {
		last->bytes += bytes;
		return 0;
	}
	if (l->nops == l->ops_cap) {
		const size_t cap = l->ops_cap ? 2 * l->ops_cap : 256;
		struct tfs_gather_op *g = realloc(l->ops, cap * sizeof(*g));

		if (!g)
			return -ENOMEM;
		l->ops = g;
		l->ops_cap = cap;
	}
	l->ops[l->nops++] = (struct tfs_gather_op){ s, dst, bytes };
	return 0;
}

/* Chunk k of column part, pinned for as long as the list: found among the last pins the list
 * took (rows of a batch come from a few chunks at a time), else got from the cache. */
static int pin_chunk(struct tfs_reader *r, struct tfs_gather_list *l, size_t part, size_t k,
		     const struct tfs_cache_entry **out)
{
	const size_t look = l->npins < 32 ? l->npins : 32;
	struct tfs_cache_entry *e;
	int rc;

	for (size_t i = l->npins; i > l->npins - look; i--)
		if (l->pins[i - 1].part == part && l->pins[i - 1].k == k) {
			*out = l->pins[i - 1].e;
			return 0;
		}
	if (l->npins == l->pins_cap) {
		const size_t cap = l->pins_cap ? 2 * l->pins_cap : 32;
		struct tfs_gather_pin *g = realloc(l->pins, cap * sizeof(*g));

		if (!g)
			return -ENOMEM;
		l->pins = g;
		l->pins_cap = cap;
	}
	rc = tfs_version_chunk_get(r->v, r->cache, part, k, &e);
	if (rc)
		return rc;
	l->pins[l->npins++] = (struct tfs_gather_pin){ e, part, k };
	*out = e;
	return 0;
}

/* --- bad rows -------------------------------------------------------------------------------- */

int tfs_reader_open(struct tfs_version *v, struct tfs_cache *cache, int pad,
		    struct tfs_reader **out)
{
	struct tfs_reader *r = calloc(1, sizeof(*r));
	const size_t ncols = v->manifest.ncols ? v->manifest.ncols : 1;

	if (!r)
		return -ENOMEM;
	r->bad = calloc(ncols, sizeof(*r->bad));
	r->bad_gen = calloc(ncols, sizeof(*r->bad_gen));
	if (!r->bad || !r->bad_gen) {
		free(r->bad);
		free(r->bad_gen);
		free(r);
		return -ENOMEM;
	}
	r->v = v;
	r->cache = cache;
	r->pad = pad;
	pthread_mutex_init(&r->lock, NULL);
	*out = r;
	return 0;
}

void tfs_reader_close(struct tfs_reader *r)
{
	if (!r)
		return;
	for (size_t c = 0; c < r->v->manifest.ncols; c++)
		free(r->bad[c]);
	free(r->bad);
	free(r->bad_gen);
	pthread_mutex_destroy(&r->lock);
	free(r);
}

/* Rebuild part's map at generation gen; under r->lock. On failure to allocate, the chunk is
 * taken as good: the read itself then fails with EIO, never with wrong bytes. */
static void bad_map_build(struct tfs_reader *r, size_t part, unsigned gen)
{
	const struct tfs_column *c = &r->v->manifest.cols[part];
	struct tfs_id *ids;
	size_t n;

	if (tfs_bad_chunks_ids(&ids, &n))
		return;
	if (!r->bad[part])
		r->bad[part] = calloc(c->nchunks ? c->nchunks : 1, 1);
	if (r->bad[part]) {
		for (size_t k = 0; k < c->nchunks; k++)
			r->bad[part][k] = (uint8_t)tfs_bad_chunks_search(ids, n, &c->chunks[k].id);
		r->bad_gen[part] = gen;
	}
	free(ids);
}

int tfs_reader_chunk_bad(struct tfs_reader *r, size_t part, size_t k)
{
	const unsigned gen = tfs_bad_chunks_generation();
	int bad;

	if (!gen)
		return 0;
	assert(part < r->v->manifest.ncols && k < r->v->manifest.cols[part].nchunks);
	pthread_mutex_lock(&r->lock);
	if (r->bad_gen[part] != gen)
		bad_map_build(r, part, gen);
	bad = r->bad[part] ? r->bad[part][k] : 0;
	pthread_mutex_unlock(&r->lock);
	return bad;
}

static int part_row_bad(struct tfs_reader *r, size_t part, uint64_t row)
{
	return tfs_reader_chunk_bad(r, part,
				    tfs_column_chunk_of(&r->v->manifest.cols[part], row));
}

int tfs_reader_row_bad(struct tfs_reader *r, size_t col, uint64_t row)
{
	const struct tfs_column *c = &r->v->manifest.cols[col];

	if (!tfs_bad_chunks_generation())
		return 0;
	if (c->kind == TFS_COL_FIXED)
		return part_row_bad(r, col, row);
	if (part_row_bad(r, c->offsets, row) || part_row_bad(r, c->offsets, row + 1))
		return 1;
	return c->kind == TFS_COL_RAGGED && part_row_bad(r, c->shapes, row);
}

int tfs_reader_bytes_bad(struct tfs_reader *r, size_t part, uint64_t a, uint64_t b)
{
	const struct tfs_column *d = &r->v->manifest.cols[part];

	if (b <= a || !tfs_bad_chunks_generation())
		return 0;
	for (size_t k = tfs_column_chunk_of(d, a); k <= tfs_column_chunk_of(d, b - 1); k++)
		if (tfs_reader_chunk_bad(r, part, k))
			return 1;
	return 0;
}

/* --- gathers --------------------------------------------------------------------------------- */

/* Rows of a fixed column or part: row i to dst + i x row bytes. Runs of consecutive rows of one
 * chunk are one op. */
static int gather_fixed(struct tfs_reader *r, size_t col, const uint64_t *rows, size_t n,
			uint64_t dst, struct tfs_gather_list *l, size_t *padded)
{
	const struct tfs_column *c = &r->v->manifest.cols[col];
	const uint64_t rb = c->row_bytes;
	int rc = 0;

	if (!rb)
		return 0;
	for (size_t i = 0; i < n && !rc;) {
		const uint64_t src = rows[i];
		const size_t k = tfs_column_chunk_of(c, src);
		const uint64_t in = src - tfs_column_chunk_first(c, k);
		const uint64_t left = tfs_column_chunk_rows(c, k) - in; /* in this chunk from src */
		const struct tfs_cache_entry *e;
		size_t run = 1;

		assert(src < c->rows);
		while (i + run < n && rows[i + run] == src + run && run < left)
			run++;
		rc = r->pad && tfs_reader_chunk_bad(r, col, k) ? -EIO : pin_chunk(r, l, col, k, &e);
		if (rc == -EIO && r->pad && tfs_reader_chunk_bad(r, col, k)) {
			rc = add_op(l, NULL, dst + i * rb, run * rb);
			*padded += run;
		} else if (!rc && (in + run) * rb > e->len) {
			tfs_err("reader: chunk %zu of column %s holds %zu bytes, row %" PRIu64
				" needs more",
				k, c->name, e->len, src + run - 1);
			rc = -EIO;
		} else if (!rc) {
			rc = add_op(l, e->data + in * rb, dst + i * rb, run * rb);
		}
		i += run;
	}
	return rc;
}

/* Bytes [a, b) of data part `part` to dst. */
static int gather_bytes(struct tfs_reader *r, size_t part, uint64_t a, uint64_t b, uint64_t dst,
			struct tfs_gather_list *l)
{
	const struct tfs_column *d = &r->v->manifest.cols[part];
	int rc = 0;

	assert(d->row_bytes == 1);
	for (uint64_t pos = a; pos < b && !rc;) {
		const size_t k = tfs_column_chunk_of(d, pos);
		const uint64_t first = tfs_column_chunk_first(d, k);
		const uint64_t end = first + tfs_column_chunk_rows(d, k);
		const uint64_t take = (end < b ? end : b) - pos;
		const struct tfs_cache_entry *e;

		rc = pin_chunk(r, l, part, k, &e);
		if (!rc && pos - first + take > e->len)
			rc = -EIO;
		if (!rc)
			rc = add_op(l, e->data + (pos - first), dst + (pos - a), take);
		pos += take;
	}
	return rc;
}

/* Rows of a column of another kind than fixed (its header col). */
static int gather_spans(struct tfs_reader *r, size_t col, const uint64_t *rows, size_t n,
			const struct tfs_gather_place *at, uint8_t *meta,
			struct tfs_gather_list *l, struct tfs_gather_result *res)
{
	const struct tfs_column *h = &r->v->manifest.cols[col];
	uint64_t *offs = (uint64_t *)(void *)(meta + at->col_off), used = 0;
	struct tfs_spans sp;
	int rc = 0;

	tfs_spans_init(&sp, r->v, r->cache, col);
	offs[0] = 0;
	for (size_t i = 0; i < n && (!rc || rc == -E2BIG); i++) {
		const size_t mark_ops = l->nops;
		const uint64_t mark_bytes = l->bytes;
		uint64_t a, b;
		int got;

		assert(rows[i] < h->rows);
		got = tfs_spans_get(&sp, rows[i], &a, &b);
		if (got == -EIO && r->pad &&
		    (part_row_bad(r, h->offsets, rows[i]) ||
		     part_row_bad(r, h->offsets, rows[i] + 1))) {
			offs[i + 1] = used; /* a bad row, padded: empty */
			res->padded++;
			continue;
		}
		if (got) {
			rc = got;
			break;
		}
		if (used + (b - a) > at->room)
			rc = -E2BIG;
		if (!rc) {
			got = r->pad && tfs_reader_bytes_bad(r, h->data, a, b)
				      ? -EIO
				      : gather_bytes(r, h->data, a, b, at->data_off + used, l);
			if (got == -EIO && r->pad && tfs_reader_bytes_bad(r, h->data, a, b)) {
				l->nops = mark_ops; /* its pieces read so far go */
				l->bytes = mark_bytes;
				offs[i + 1] = used;
				res->padded++;
				continue;
			}
			if (got) {
				if (got == -EIO)
					tfs_err("reader: column %s: row %" PRIu64 " is cut short",
						h->name, rows[i]);
				rc = got;
				break;
			}
		}
		used += b - a;
		offs[i + 1] = used;
	}
	tfs_spans_done(&sp);
	res->used = used;
	if (rc == -E2BIG)
		res->need = used;
	if (!rc)
		rc = add_op(l, offs, at->col_off, (n + 1) * sizeof(uint64_t));
	if (!rc && h->kind == TFS_COL_RAGGED)
		rc = gather_fixed(r, h->shapes, rows, n, at->shapes_off, l, &res->padded);
	return rc;
}

int tfs_reader_gather(struct tfs_reader *r, size_t col, const uint64_t *rows, size_t n,
		      const struct tfs_gather_place *at, uint8_t *meta, struct tfs_gather_list *l,
		      struct tfs_gather_result *res)
{
	const struct tfs_column *c = &r->v->manifest.cols[col];

	memset(res, 0, sizeof(*res));
	assert(c->part == TFS_PART_NONE);
	if (c->kind == TFS_COL_FIXED) {
		res->used = n * c->row_bytes;
		return gather_fixed(r, col, rows, n, at->col_off, l, &res->padded);
	}
	return gather_spans(r, col, rows, n, at, meta, l, res);
}
