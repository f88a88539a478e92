/* SPDX-License-Identifier: MIT */
/* viewspans: a view's rows of a column of rows of any size. */
#include "viewspans.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>

#include "badchunks.h"
#include "reader.h"
#include "cacheplan.h"
#include "rowcol.h"

void tfs_view_spans_free(struct tfs_view_spans *s)
{
	if (!s)
		return;
	free(s->src);
	free(s->at);
	free(s->kpos);
	free(s->order);
	free(s->lat);
	free(s);
}

/* The chunk order: each data chunk where the view first needs it. */
static int chunk_order(struct tfs_view_spans *s, const struct tfs_column *d)
{
	uint32_t *pos = malloc((d->nchunks ? d->nchunks : 1) * sizeof(*pos));

	s->order = malloc((d->nchunks ? d->nchunks : 1) * sizeof(*s->order));
	if (!pos || !s->order) {
		free(pos);
		return -ENOMEM;
	}
	for (size_t k = 0; k < d->nchunks; k++)
		pos[k] = UINT32_MAX;
	for (uint64_t i = 0; i < s->n; i++) {
		size_t k;

		s->kpos[i] = UINT32_MAX;
		if (s->at[i + 1] == s->at[i])
			continue;
		k = tfs_column_chunk_of(d, s->src[i]);
		if (pos[k] == UINT32_MAX) {
			pos[k] = (uint32_t)s->norder;
			s->order[s->norder++] = (uint32_t)k;
		}
		s->kpos[i] = pos[k];
	}
	free(pos);
	return 0;
}

int tfs_view_spans_build(const struct tfs_view *view, struct tfs_version *v,
			 struct tfs_cache *cache, size_t header, struct tfs_view_spans **out)
{
	const struct tfs_column *h = &v->manifest.cols[header];
	const struct tfs_column *d = &v->manifest.cols[h->data];
	const size_t bytes = (size_t)(h->rows + 1) * sizeof(uint64_t);
	struct tfs_view_spans *s = calloc(1, sizeof(*s));
	uint64_t *off = malloc(bytes);
	ssize_t got;
	int rc = 0;

	if (!s || !off || !(s->src = malloc((view->n + 1) * sizeof(*s->src))) ||
	    !(s->at = malloc((view->n + 1) * sizeof(*s->at))) ||
	    !(s->kpos = malloc((view->n + 1) * sizeof(*s->kpos)))) {
		rc = -ENOMEM;
		goto out;
	}
	s->header = header;
	s->data_col = h->data;
	s->n = view->n;
	got = tfs_version_read(v, cache, h->offsets, 0, off, bytes);
	if (got != (ssize_t)bytes) {
		rc = got < 0 ? (int)got : -EIO;
		goto out;
	}
	s->at[0] = 0;
	for (uint64_t i = 0; i < view->n; i++) {
		const uint64_t r = view->rows[i];

		if (r >= h->rows || off[r + 1] < off[r] || off[r + 1] > d->rows) {
			rc = -EIO;
			goto out;
		}
		s->src[i] = off[r];
		s->at[i + 1] = s->at[i] + (off[r + 1] - off[r]);
	}
	rc = chunk_order(s, d);
out:
	free(off);
	if (rc) {
		tfs_view_spans_free(s);
		return rc;
	}
	*out = s;
	return 0;
}

void tfs_view_spans_rows(const struct tfs_view_spans *s, uint64_t pos, uint64_t end,
			 uint64_t *first, uint64_t *last)
{
	uint64_t lo = 0, hi = s->n;

	/* The last row starting at or before pos (empty rows before it skipped by the reader). */
	while (hi - lo > 1) {
		const uint64_t mid = lo + (hi - lo) / 2;

		if (s->at[mid] <= pos)
			lo = mid;
		else
			hi = mid;
	}
	*first = lo;
	hi = lo;
	while (hi + 1 < s->n && s->at[hi + 1] < end)
		hi++;
	*last = hi;
}

#define BLOCK (1u << 20) /* data bytes read at a time */

int tfs_view_spans_lines(struct tfs_view_spans *s, const struct tfs_view *view,
			 struct tfs_version *v, struct tfs_cache *cache)
{
	const struct tfs_column *h = &v->manifest.cols[s->header];
	const uint64_t total = v->manifest.cols[s->data_col].rows;
	uint64_t *off = malloc((size_t)(h->rows + 1) * sizeof(*off));
	uint64_t *len = calloc((size_t)(h->rows ? h->rows : 1), sizeof(*len)); /* lines, by row */
	uint8_t *buf = malloc(BLOCK);
	uint64_t r = 0;
	ssize_t got;
	int rc = 0;

	if (!off || !len || !buf || !(s->lat = malloc((s->n + 1) * sizeof(*s->lat)))) {
		rc = -ENOMEM;
		goto out;
	}
	got = tfs_version_read(v, cache, h->offsets, 0, off, (size_t)(h->rows + 1) * 8);
	if (got != (ssize_t)((h->rows + 1) * 8)) {
		rc = got < 0 ? (int)got : -EIO;
		goto out;
	}
	/* Each block: the rows it holds (a row may span blocks), counted as they pass. */
	for (uint64_t at = 0; at < total && !rc; at += BLOCK) {
		const size_t n = total - at < BLOCK ? (size_t)(total - at) : BLOCK;

		got = tfs_version_read(v, cache, s->data_col, at, buf, n);
		if (got != (ssize_t)n) {
			rc = got < 0 ? (int)got : -EIO;
			break;
		}
		for (; r < h->rows && off[r] < at + n; r++) {
			const uint64_t a = off[r] > at ? off[r] : at;
			const uint64_t b = off[r + 1] < at + n ? off[r + 1] : at + n;

			if (off[r + 1] < off[r] || off[r + 1] > total) {
				rc = -EIO;
				break;
			}
			/* The newline is counted once a row, in its first block. */
			len[r] +=
				tfs_text_line_bytes((const char *)buf + (a - at), (size_t)(b - a)) -
				(a != off[r]);
			if (off[r + 1] > at + n)
				break; /* the row goes on in the next block */
		}
	}
	for (; !rc && r < h->rows; r++)
		len[r] = 1; /* empty rows at the end */
	s->lat[0] = 0;
	for (uint64_t i = 0; !rc && i < s->n; i++)
		s->lat[i + 1] = s->lat[i] + len[view->rows[i]];
out:
	free(off);
	free(len);
	free(buf);
	if (rc) {
		free(s->lat);
		s->lat = NULL;
	}
	return rc;
}

/* --- bad rows -------------------------------------------------------------------------------- */

/* Whether the bytes of version row r of column col (of another kind than fixed) touch a chunk of
 * its data part recorded damaged; rows whose offsets cannot be read are bad too. */
static int data_bad(struct tfs_reader *rd, struct tfs_spans *sp, const struct tfs_column *col,
		    uint64_t r)
{
	uint64_t start, end;

	if (tfs_spans_get(sp, r, &start, &end))
		return 1;
	return tfs_reader_bytes_bad(rd, col->data, start, end);
}

int tfs_view_bad_rows(const struct tfs_view *view, struct tfs_version *v, struct tfs_cache *cache,
		      struct tfs_buf *out)
{
	const struct tfs_manifest *m = &v->manifest;
	struct tfs_spans *sp = NULL;
	struct tfs_reader *rd = NULL;
	uint8_t *data = NULL; /* per column: its data part has a damaged chunk */
	int rc = 0;

	out->len = 0;
	if (!tfs_bad_chunks_generation())
		return 0;
	rc = tfs_reader_open(v, cache, 1, &rd);
	if (!rc && (!(data = calloc(m->ncols ? m->ncols : 1, 1)) ||
		    !(sp = calloc(m->ncols ? m->ncols : 1, sizeof(*sp)))))
		rc = -ENOMEM;
	for (size_t c = 0; !rc && c < m->ncols; c++)
		if (m->cols[c].part == TFS_PART_NONE && m->cols[c].kind != TFS_COL_FIXED) {
			data[c] = (uint8_t)tfs_reader_part_bad(rd, m->cols[c].data);
			tfs_spans_init(&sp[c], v, cache, c);
		}
	for (uint64_t i = 0; !rc && i < view->n; i++)
		for (size_t c = 0; c < m->ncols; c++) {
			const uint64_t r = view->rows[i];

			if (m->cols[c].part != TFS_PART_NONE)
				continue;
			if (tfs_reader_row_bad(rd, c, r) ||
			    (data[c] && data_bad(rd, &sp[c], &m->cols[c], r))) {
				rc = tfs_buf_printf(out, "%" PRIu64 "\n", i);
				break;
			}
		}
	for (size_t c = 0; sp && c < m->ncols; c++)
		if (sp[c].v)
			tfs_spans_done(&sp[c]);
	free(sp);
	free(data);
	tfs_reader_close(rd);
	return rc;
}

uint64_t tfs_view_spans_row_bytes(const struct tfs_view_spans *s)
{
	const uint64_t avg = s->n ? s->at[s->n] / s->n : 0;

	return avg ? avg : 1;
}

/* --- the view's order as the cache's plan ------------------------------------------------------
 */

/* The first and last view rows needing each chunk of c, by chunk number (UINT64_MAX: none), in
 * one pass without hashing; then a use each for the plan. */
struct chunk_span {
	uint64_t first, last;
};

static int chunk_spans_new(const struct tfs_column *c, struct chunk_span **out)
{
	struct chunk_span *s = malloc((c->nchunks ? c->nchunks : 1) * sizeof(*s));

	if (!s)
		return -ENOMEM;
	for (size_t k = 0; k < c->nchunks; k++)
		s[k].first = s[k].last = UINT64_MAX;
	*out = s;
	return 0;
}

static void chunk_span_use(struct chunk_span *s, uint64_t pos)
{
	if (s->first == UINT64_MAX)
		s->first = pos;
	s->last = pos; /* positions come in order */
}

static int chunk_spans_plan(struct tfs_cache_plan *plan, const struct tfs_column *c,
			    struct chunk_span *s)
{
	int rc = 0;

	for (size_t k = 0; !rc && k < c->nchunks; k++)
		if (s[k].first != UINT64_MAX) {
			rc = tfs_cache_plan_use(plan, &c->chunks[k].id, s[k].first);
			if (!rc && s[k].last != s[k].first)
				rc = tfs_cache_plan_use(plan, &c->chunks[k].id, s[k].last);
		}
	free(s);
	return rc;
}

static int plan_rows(struct tfs_cache_plan *plan, const struct tfs_view *view,
		     const struct tfs_column *c)
{
	struct chunk_span *s;
	int rc = chunk_spans_new(c, &s);

	if (rc)
		return rc;
	for (uint64_t i = 0; i < view->n; i++)
		chunk_span_use(&s[tfs_column_chunk_of(c, view->rows[i])], i);
	return chunk_spans_plan(plan, c, s);
}

int tfs_view_plan_add(struct tfs_cache_plan *plan, const struct tfs_view *view,
		      struct tfs_version *v, size_t col, const struct tfs_view_spans *sp)
{
	const struct tfs_column *c = &v->manifest.cols[col];
	const struct tfs_column *data;
	int rc = 0;

	if (c->part == TFS_PART_DATA) {
		data = c;
		goto data;
	}
	if (c->kind == TFS_COL_FIXED)
		return c->nchunks ? plan_rows(plan, view, c) : 0;
	rc = plan_rows(plan, view, &v->manifest.cols[c->offsets]);
	if (!rc && c->kind == TFS_COL_RAGGED)
		rc = plan_rows(plan, view, &v->manifest.cols[c->shapes]);
	data = &v->manifest.cols[c->data];
data:
	if (rc || !sp)
		return rc;
	{
		struct chunk_span *s;

		rc = chunk_spans_new(data, &s);
		if (rc)
			return rc;
		for (uint64_t i = 0; i < view->n; i++)
			if (sp->at[i + 1] > sp->at[i])
				chunk_span_use(&s[tfs_column_chunk_of(data, sp->src[i])], i);
		return chunk_spans_plan(plan, data, s);
	}
}
