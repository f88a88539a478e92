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
#include "batchload.h"
#include "cacheplan.h"
#include "prefetch.h"
#include "util.h"

#define WARM_COLS 16

struct tfs_reader {
	struct tfs_version *v;
	struct tfs_cache *cache;
	int pad;
	pthread_mutex_t lock;
	/* Per manifest column: a byte per chunk, set for chunks recorded damaged, and the record's
	 * generation it was built at (0: never); protected by lock. */
	uint8_t **bad;
	unsigned *bad_gen;
	/* Following the position (tfs_reader_open_lake); set up before the first read, then
	 * read-only but for warmed (atomic). */
	struct tfs_lake *lake;	   /* NULL: nothing to follow */
	struct tfs_lake_view *lv;  /* NULL: version order */
	struct tfs_stream *stream; /* prefetch of stream_part's chunks */
	size_t stream_part;
	uint32_t *chunk_pos;		 /* a view's fixed column: chunk -> position in the order */
	const struct tfs_view_spans *sp; /* a view's data part: kpos */
	struct tfs_cache_plan *plan;
	size_t warm_cols[WARM_COLS], nwarm;
	int warmed;
	int frames; /* fixed columns' rows from single frames of chunks not cached (atomic) */
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
	if (l->map_used)
		memset(l->map, 0, l->map_cap * sizeof(*l->map));
	l->map_used = 0;
	l->npins = 0;
	l->nops = 0;
	l->bytes = 0;
}

void tfs_gather_list_free(struct tfs_gather_list *l)
{
	tfs_gather_list_release(l);
	free(l->ops);
	free(l->pins);
	free(l->map);
	l->map = NULL;
	l->map_cap = 0;
	l->ops = NULL;
	l->pins = NULL;
	l->ops_cap = l->pins_cap = 0;
}

/* Append an op, merged into the last one when it continues it on both sides. */
static int add_op(struct tfs_gather_list *l, const void *src, uint64_t dst, uint64_t bytes,
		  uint32_t pin)
{
	const uint64_t s = (uint64_t)(uintptr_t)src;
	struct tfs_gather_op *last = l->nops ? &l->ops[l->nops - 1] : NULL;

	if (!bytes)
		return 0;
	l->bytes += bytes;
	if (last && last->dst + last->bytes == dst && last->pin == pin &&
	    ((!s && !last->src) || (s && last->src && last->src + last->bytes == s))) {
		last->bytes += bytes;
		return 0;
	}
	if (l->nops == l->ops_cap && TFS_GROW(l->ops, &l->ops_cap, l->nops + 1))
		return -ENOMEM;
	l->ops[l->nops++] = (struct tfs_gather_op){ s, dst, bytes, pin };
	return 0;
}

int tfs_gather_list_add(struct tfs_gather_list *l, const void *src, uint64_t dst, uint64_t bytes)
{
	return add_op(l, src, dst, bytes, TFS_GATHER_NO_PIN);
}

/* Drop the ops added since the list had nops ops of bytes bytes (their pins stay: released
 * with the list). */
static void list_truncate(struct tfs_gather_list *l, size_t nops, uint64_t bytes)
{
	l->nops = nops;
	l->bytes = bytes;
}

static int pins_grow(struct tfs_gather_list *l)
{
	if (l->npins + 1 >= TFS_GATHER_NO_PIN)
		return -E2BIG; /* a pin's index must stay below the mark of no pin */
	return TFS_GROW(l->pins, &l->pins_cap, l->npins + 1);
}

static size_t map_slot(const struct tfs_gather_list *l, size_t part, size_t k)
{
	uint64_t h = ((uint64_t)part << 40 ^ (uint64_t)k) * 0x9e3779b97f4a7c15ull;

	return (size_t)(h >> 17) & (l->map_cap - 1);
}

/* The pin of the whole chunk k of column part, or -1. */
static long map_find(const struct tfs_gather_list *l, size_t part, size_t k)
{
	if (!l->map_used)
		return -1;
	for (size_t s = map_slot(l, part, k);; s = (s + 1) & (l->map_cap - 1)) {
		const uint32_t v = l->map[s];

		if (!v)
			return -1;
		if (l->pins[v - 1].part == part && l->pins[v - 1].k == k)
			return (long)v - 1;
	}
}

static void map_put(struct tfs_gather_list *l, uint32_t pin)
{
	const struct tfs_gather_pin *p = &l->pins[pin];
	size_t s = map_slot(l, p->part, p->k);

	while (l->map[s])
		s = (s + 1) & (l->map_cap - 1);
	l->map[s] = pin + 1;
	l->map_used++;
}

/* Room in the map for one more whole chunk: doubled (and refilled) at half full. */
static int map_grow(struct tfs_gather_list *l)
{
	size_t cap = l->map_cap ? l->map_cap : 64;
	uint32_t *m;

	if (2 * (l->map_used + 1) <= l->map_cap)
		return 0;
	while (2 * (l->map_used + 1) > cap)
		cap *= 2;
	m = calloc(cap, sizeof(*m));
	if (!m)
		return -ENOMEM;
	free(l->map);
	l->map = m;
	l->map_cap = cap;
	l->map_used = 0;
	for (size_t i = 0; i < l->npins; i++)
		if (l->pins[i].whole && map_find(l, l->pins[i].part, l->pins[i].k) < 0)
			map_put(l, (uint32_t)i);
	return 0;
}

/* Keep e, read by the list's ops, pinned until the list is released; *pin: its index. Room
 * for it was made (pins_grow, and map_grow for a whole chunk). */
static void pin_add(struct tfs_reader *r, struct tfs_gather_list *l, struct tfs_cache_entry *e,
		    size_t part, size_t k, uint64_t base, uint32_t *pin)
{
	const struct tfs_column *c = &r->v->manifest.cols[part];

	assert(l->npins < l->pins_cap);
	*pin = (uint32_t)l->npins;
	l->pins[l->npins++] = (struct tfs_gather_pin){
		e,    &c->chunks[k].id,
		part, k,
		base, !base && e->len >= tfs_column_chunk_rows(c, k) * c->row_bytes
	};
	if (l->pins[*pin].whole && map_find(l, part, k) < 0) {
		assert(2 * (l->map_used + 1) <= l->map_cap);
		map_put(l, *pin);
	}
}

/* The list's pin of chunk k of column part that holds byte off of the chunk (whole: a whole
 * chunk), or -1: a whole chunk from the map (which holds every one), a frame among the last pins
 * the list took (rows of a batch come from a few frames at a time). */
static long recent_pin(const struct tfs_gather_list *l, size_t part, size_t k, uint64_t off,
		       int whole)
{
	const size_t look = l->npins < 32 ? l->npins : 32;
	const long m = map_find(l, part, k);

	if (m >= 0 || whole)
		return m;

	for (size_t i = l->npins; i > l->npins - look; i--) {
		const struct tfs_gather_pin *p = &l->pins[i - 1];

		if (p->part == part && p->k == k && off >= p->base && off < p->base + p->e->len)
			return (long)(i - 1);
	}
	return -1;
}

/* A gather's loads ahead: at its first chunk not cached, the chunks of the rows after the run
 * being gathered start loading on the pool (batchload.h). */
struct ahead {
	struct tfs_batch_loads loads;
	struct tfs_workpool *pool;
	const uint64_t *rows; /* the rows after the run being gathered */
	size_t n;
	int spans;     /* rows of a column of another kind than fixed: its data part's chunks */
	size_t header; /* that column */
};

/* The piece of chunk k of column part holding byte off of the chunk, pinned for as long as the
 * list: with frames, the whole chunk when it is cached, else the frame that holds it
 * (tfs_version_piece_get); without, the whole chunk. *base: where the piece starts. ah: the
 * gather's loads ahead (NULL: none). */
static int pin_piece(struct tfs_reader *r, struct tfs_gather_list *l, size_t part, size_t k,
		     uint64_t off, uint64_t want, int frames, struct ahead *ah,
		     const struct tfs_cache_entry **out, uint64_t *base, uint32_t *pin)
{
	const long found = recent_pin(l, part, k, off, !frames);
	struct tfs_cache_entry *e;
	int rc;

	if (found >= 0) {
		*out = l->pins[found].e;
		*base = l->pins[found].base;
		*pin = (uint32_t)found;
		return 0;
	}
	*base = 0;
	rc = pins_grow(l);
	if (!rc)
		rc = map_grow(l);
	if (rc)
		return rc;
	/* Until the loads ahead start, a chunk is looked up first (one lookup, as a get's): the
	 * first one missing starts them. */
	if (ah && !ah->loads.started) {
		rc = tfs_cache_get_ready(r->cache, &r->v->manifest.cols[part].chunks[k].id, &e);
		if (rc == -ENOENT && ah->spans)
			tfs_batch_loads_start_spans(&ah->loads, ah->pool, r->v, r->cache,
						    ah->header, ah->rows, ah->n);
		else if (rc == -ENOENT)
			tfs_batch_loads_start(&ah->loads, ah->pool, r->v, r->cache, part, ah->rows,
					      ah->n, frames);
	} else {
		rc = -ENOENT;
	}
	if (rc == -ENOENT)
		rc = frames ? tfs_version_piece_get(r->v, r->cache,
						    r->lake ? tfs_lake_pool(r->lake) : NULL, part,
						    k, off, want, &e, base)
			    : tfs_version_chunk_get(r->v, r->cache, part, k, &e);
	if (rc)
		return rc;
	pin_add(r, l, e, part, k, *base, pin);
	*out = e;
	return 0;
}

void tfs_reader_frames(struct tfs_reader *r, int on)
{
	__atomic_store_n(&r->frames, on, __ATOMIC_RELAXED);
}

/* Bytes [off, off + len) of chunk k of column or part col to dst, piece by piece (frames: from
 * single frames of a chunk not cached whole). */
static int gather_chunk_bytes(struct tfs_reader *r, size_t col, size_t k, uint64_t off,
			      uint64_t len, uint64_t dst, int frames, struct ahead *ah,
			      struct tfs_gather_list *l)
{
	int rc = 0;

	for (uint64_t done = 0; done < len && !rc;) {
		const struct tfs_cache_entry *e;
		uint64_t base, take;
		uint32_t pin;

		rc = pin_piece(r, l, col, k, off + done, len - done, frames, ah, &e, &base, &pin);
		if (rc)
			break;
		if (off + done < base || off + done >= base + e->len) {
			tfs_err("reader: chunk %zu of column %s: byte %" PRIu64 " is not where its "
				"manifest says",
				k, r->v->manifest.cols[col].name, off + done);
			rc = -EIO;
			break;
		}
		take = base + e->len - (off + done);
		if (take > len - done)
			take = len - done;
		rc = add_op(l, e->data + (off + done - base), dst + done, take, pin);
		done += take;
	}
	return rc;
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
	tfs_stream_destroy(r->stream);
	if (r->plan)
		tfs_cache_plan_end(r->cache, r->plan);
	free(r->chunk_pos);
	for (size_t c = 0; c < r->v->manifest.ncols; c++)
		free(r->bad[c]);
	free(r->bad);
	free(r->bad_gen);
	pthread_mutex_destroy(&r->lock);
	free(r);
}

/* --- following the position ------------------------------------------------------------------ */

int tfs_reader_open_lake(struct tfs_lake *l, struct tfs_version *v, struct tfs_lake_view *lv,
			 int pad, struct tfs_reader **out)
{
	int rc = tfs_reader_open(v, tfs_lake_cache(l), pad, out);

	if (!rc) {
		(*out)->lake = l;
		(*out)->lv = lv;
	}
	return rc;
}

int tfs_reader_prefetch(struct tfs_reader *r, size_t part, const struct tfs_view_spans *sp)
{
	const struct tfs_column *c = &r->v->manifest.cols[part];
	struct tfs_prefetcher *pf;
	uint32_t *order = NULL;
	size_t norder;
	int rc = 0;

	assert(r->lake && !r->stream);
	pf = tfs_lake_prefetcher(r->lake);
	if (!pf)
		return 0;
	r->stream_part = part;
	if (!r->lv)
		return tfs_stream_create(pf, r->v, part, NULL, c->nchunks, &r->stream);
	if (sp) {
		r->sp = sp;
		rc = tfs_stream_create(pf, r->v, part, sp->order, sp->norder, &r->stream);
	} else {
		rc = tfs_view_chunk_order(r->lv->view, c, &order, &norder, &r->chunk_pos);
		if (!rc)
			rc = tfs_stream_create(pf, r->v, part, order, norder, &r->stream);
		free(order);
	}
	/* A view is read front to back: whole chunks, not the frames a jumping reader gets. */
	if (!rc)
		tfs_stream_expect_sequential(r->stream);
	return rc;
}

int tfs_reader_plan(struct tfs_reader *r, const size_t *cols,
		    const struct tfs_view_spans *const *sp, size_t n, uint64_t row_bytes,
		    uint64_t protect_min)
{
	uint64_t protect;
	int rc = 0;

	assert(r->lake && !r->plan);
	if (!r->lv || !tfs_lake_evicts_by_plans(r->lake) || !r->lv->view->n)
		return 0;
	protect = tfs_lake_warm_rows(r->lake, row_bytes);
	r->plan = tfs_cache_plan_new(protect > protect_min ? protect : protect_min);
	if (!r->plan)
		return -ENOMEM;
	for (size_t i = 0; !rc && i < n; i++)
		rc = tfs_view_plan_add(r->plan, r->lv->view, r->v, cols[i], sp ? sp[i] : NULL);
	if (!rc)
		tfs_lake_view_plan_start(r->lake, r->lv, r->plan);
	return rc;
}

void tfs_reader_warm_columns(struct tfs_reader *r, const size_t *cols, size_t n)
{
	for (size_t i = 0; i < n && r->nwarm < WARM_COLS; i++)
		r->warm_cols[r->nwarm++] = cols[i];
}

int tfs_reader_at(struct tfs_reader *r, uint64_t first, uint64_t last, uint64_t bytes_left)
{
	int seq = 1;

	if (!r->lake)
		return 1;
	if (r->stream) {
		const struct tfs_column *c = &r->v->manifest.cols[r->stream_part];
		size_t lo = SIZE_MAX, hi = 0;

		for (uint64_t i = first; i <= last; i++) {
			size_t p;

			if (!r->lv) { /* chunks in version order: the first and last rows suffice */
				lo = tfs_column_chunk_of(c, first);
				hi = tfs_column_chunk_of(c, last);
				break;
			}
			p = r->sp ? r->sp->kpos[i]
				  : r->chunk_pos[tfs_column_chunk_of(c, r->lv->view->rows[i])];
			if (p == UINT32_MAX)
				continue; /* an empty row */
			lo = p < lo ? p : lo;
			hi = p > hi ? p : hi;
		}
		if (lo != SIZE_MAX)
			seq = tfs_stream_access(r->stream, first, last, lo, hi);
	}
	if (r->plan)
		tfs_cache_plan_at(r->plan, first);
	if (!r->nwarm || !r->lv || !tfs_lake_epoch_warm(r->lake) ||
	    bytes_left >= tfs_lake_warm_bytes(r->lake) ||
	    __atomic_exchange_n(&r->warmed, 1, __ATOMIC_RELAXED))
		return seq;
	for (size_t i = 0; i < r->nwarm; i++)
		tfs_lake_view_warm_next(r->lake, r->lv, r->warm_cols[i]);
	return seq;
}

/* --- bad rows: the map ----------------------------------------------------------------------- */

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

int tfs_reader_part_bad(struct tfs_reader *r, size_t part)
{
	const size_t n = r->v->manifest.cols[part].nchunks;

	for (size_t k = 0; k < n && tfs_bad_chunks_generation(); k++)
		if (tfs_reader_chunk_bad(r, part, k))
			return 1;
	return 0;
}

static int part_row_bad(struct tfs_reader *r, size_t part, uint64_t row)
{
	return tfs_reader_chunk_bad(r, part, tfs_column_chunk_of(&r->v->manifest.cols[part], row));
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

/* Whole chunks a gather has pinned, by chunk number modulo NEAR: a row of one is an op at once,
 * without the map and checks its chunk's first row went through (a fixed column's bad-chunk
 * test too). Pins stay until the list's release: an entry holds however its ops are cut. */
#define NEAR 64
struct near {
	size_t k1; /* the chunk's number + 1; 0: none */
	const uint8_t *data;
	uint64_t len;
	uint32_t pin;
};

/* Bytes [off, off + len) of chunk k, as an op to dst, when the table holds it whole: 1, or the
 * op's error; 0 when it does not. */
static int near_op(struct near *near, struct tfs_gather_list *l, size_t k, uint64_t off,
		   uint64_t len, uint64_t dst, int *rc)
{
	const struct near *nb = &near[k % NEAR];

	if (nb->k1 != k + 1 || off + len > nb->len)
		return 0;
	*rc = add_op(l, nb->data + off, dst, len, nb->pin);
	return 1;
}

/* Chunk k of part into the table, if the list pinned it whole. */
static void near_keep(struct near *near, const struct tfs_gather_list *l, size_t part, size_t k)
{
	const long whole = map_find(l, part, k);

	if (whole >= 0)
		near[k % NEAR] = (struct near){ k + 1, l->pins[whole].e->data,
						l->pins[whole].e->len, (uint32_t)whole };
}

/* Rows of a fixed column or part: row i to dst + i x row bytes. Runs of consecutive rows of one
 * chunk are one op. */
static int gather_fixed(struct tfs_reader *r, size_t col, const uint64_t *rows, size_t n,
			uint64_t dst, struct tfs_gather_list *l, size_t *padded)
{
	const struct tfs_column *c = &r->v->manifest.cols[col];
	const uint64_t rb = c->row_bytes;
	const int frames = __atomic_load_n(&r->frames, __ATOMIC_RELAXED);
	struct ahead ah = { .pool = r->lake ? tfs_lake_pool(r->lake) : NULL };
	struct near near[NEAR] = { { 0 } };
	int rc = 0;

	if (!rb)
		return 0;
	tfs_batch_loads_init(&ah.loads);
	for (size_t i = 0; i < n && !rc;) {
		const uint64_t src = rows[i];
		const size_t k = tfs_column_chunk_of(c, src);
		const uint64_t in = src - tfs_column_chunk_first(c, k);
		const uint64_t left = tfs_column_chunk_rows(c, k) - in; /* in this chunk from src */
		const size_t mark_ops = l->nops;
		const uint64_t mark_bytes = l->bytes;
		size_t run = 1;

		assert(src < c->rows);
		while (i + run < n && rows[i + run] == src + run && run < left)
			run++;
		if (near_op(near, l, k, in * rb, run * rb, dst + i * rb, &rc)) {
			i += run;
			continue;
		}
		ah.rows = rows + i + run;
		ah.n = n - i - run;
		/* A chunk known bad is not fetched again. */
		rc = r->pad && tfs_reader_chunk_bad(r, col, k)
			     ? -EIO
			     : gather_chunk_bytes(r, col, k, in * rb, run * rb, dst + i * rb,
						  frames, ah.pool ? &ah : NULL, l);
		if (rc == -EIO && r->pad && tfs_reader_chunk_bad(r, col, k)) {
			list_truncate(l, mark_ops, mark_bytes); /* pieces read before the damage */
			rc = add_op(l, NULL, dst + i * rb, run * rb, TFS_GATHER_NO_PIN);
			*padded += run;
		} else if (!rc) {
			near_keep(near, l, col, k);
		}
		i += run;
	}
	tfs_batch_loads_end(&ah.loads);
	return rc;
}

/* Bytes [a, b) of data part `part` to dst; near: the gather's whole chunks of it (NULL: none). */
static int gather_bytes(struct tfs_reader *r, size_t part, uint64_t a, uint64_t b, uint64_t dst,
			struct ahead *ah, struct near *near, struct tfs_gather_list *l)
{
	const struct tfs_column *d = &r->v->manifest.cols[part];
	int rc = 0;

	assert(d->row_bytes == 1);
	for (uint64_t pos = a; pos < b && !rc;) {
		const size_t k = tfs_column_chunk_of(d, pos);
		const uint64_t first = tfs_column_chunk_first(d, k);
		const uint64_t end = first + tfs_column_chunk_rows(d, k);
		const uint64_t take = (end < b ? end : b) - pos;

		if (!near || !near_op(near, l, k, pos - first, take, dst + (pos - a), &rc)) {
			rc = gather_chunk_bytes(r, part, k, pos - first, take, dst + (pos - a), 0,
						ah, l);
			if (!rc && near)
				near_keep(near, l, part, k);
		}
		pos += take;
	}
	return rc;
}

/* Bytes [a, b) of data part `part`, within a row's [row_a, row_b), to dst: 0; 1 when the row
 * lies in a chunk damaged for good and the reader pads (then nothing was added); or -errno. A
 * row of a chunk known bad is not fetched again. */
static int row_bytes(struct tfs_reader *r, size_t part, uint64_t row_a, uint64_t row_b, uint64_t a,
		     uint64_t b, uint64_t dst, struct ahead *ah, struct near *near,
		     struct tfs_gather_list *l)
{
	const size_t mark_ops = l->nops;
	const uint64_t mark_bytes = l->bytes;
	int rc = r->pad && tfs_reader_bytes_bad(r, part, row_a, row_b)
			 ? -EIO
			 : gather_bytes(r, part, a, b, dst, ah, near, l);

	if (rc == -EIO && r->pad && tfs_reader_bytes_bad(r, part, row_a, row_b)) {
		list_truncate(l, mark_ops, mark_bytes); /* its pieces read so far go */
		return 1;
	}
	return rc;
}

int tfs_reader_gather_bytes(struct tfs_reader *r, size_t part, uint64_t row_a, uint64_t row_b,
			    uint64_t a, uint64_t b, uint64_t dst, struct tfs_gather_list *l,
			    int *padded)
{
	int rc = row_bytes(r, part, row_a, row_b, a, b, dst, NULL, NULL, l);

	*padded = rc == 1;
	return rc == 1 ? add_op(l, NULL, dst, b - a, TFS_GATHER_NO_PIN) : rc;
}

/* Rows of a column of another kind than fixed (its header col). */
static int gather_spans(struct tfs_reader *r, size_t col, const uint64_t *rows, size_t n,
			const struct tfs_gather_place *at, uint8_t *meta, struct tfs_gather_list *l,
			struct tfs_gather_result *res)
{
	const struct tfs_column *h = &r->v->manifest.cols[col];
	uint64_t *offs = (uint64_t *)(void *)(meta + at->col_off), used = 0;
	struct ahead ah = { .pool = r->lake ? tfs_lake_pool(r->lake) : NULL,
			    .spans = 1,
			    .header = col };
	struct near near[NEAR] = { { 0 } };
	struct tfs_spans sp;
	int rc = 0;

	tfs_batch_loads_init(&ah.loads);
	tfs_spans_init(&sp, r->v, r->cache, col);
	offs[0] = 0;
	for (size_t i = 0; i < n && (!rc || rc == -E2BIG); i++) {
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
			ah.rows = rows + i + 1;
			ah.n = n - i - 1;
			got = row_bytes(r, h->data, a, b, a, b, at->data_off + used,
					ah.pool ? &ah : NULL, near, l);
			if (got == 1) {
				offs[i + 1] = used; /* a bad row, padded: empty */
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
	tfs_batch_loads_end(&ah.loads);
	res->used = used;
	if (rc == -E2BIG)
		res->need = used;
	if (!rc)
		rc = add_op(l, offs, at->col_off, (n + 1) * sizeof(uint64_t), TFS_GATHER_NO_PIN);
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
	assert(c->part == TFS_PART_NONE ||
	       c->kind == TFS_COL_FIXED); /* a column, or a fixed part */
	if (c->kind == TFS_COL_FIXED) {
		res->used = n * c->row_bytes;
		return gather_fixed(r, col, rows, n, at->col_off, l, &res->padded);
	}
	return gather_spans(r, col, rows, n, at, meta, l, res);
}
