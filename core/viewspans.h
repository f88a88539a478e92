/* SPDX-License-Identifier: MIT */
/* viewspans: a view's rows of a ragged, text or bytes column: where each lies in the version's
 * data part and where in the view's data.bin, and the order in which reading data.bin front to
 * back needs the data part's chunks (for the prefetcher). Built once per view and column
 * (tfs_lake_view_spans keeps them with the view), in O(rows). */
#ifndef TFS_VIEWSPANS_H
#define TFS_VIEWSPANS_H

#include <stddef.h>
#include <stdint.h>

#include "cache.h"
#include "version.h"
#include "view.h"

struct tfs_view_spans {
	size_t header;	 /* the column: its header in the manifest */
	size_t data_col; /* its data part */
	uint64_t n;	 /* rows of the view */
	uint64_t *src;	 /* n: byte offset of view row i in the data part */
	uint64_t *at;	 /* n + 1: byte offset of view row i in the view's data.bin */
	/* n: where the data part's chunk that view row i starts in comes in order (UINT32_MAX for
	 * an empty row); order: those chunks in the order the view first needs them. */
	uint32_t *kpos;
	uint32_t *order;
	size_t norder;
	/* n + 1, text columns: byte offset of view row i in the view's lines.txt (a row a line,
	 * escaped as the version's); NULL until tfs_view_spans_lines. */
	uint64_t *lat;
	struct tfs_view_spans *next; /* the view's other columns */
};

/* The spans of column header (not fixed) of v through view: reads the column's offsets once.
 * -EIO for offsets that go backwards or past the data. */
int tfs_view_spans_build(const struct tfs_view *view, struct tfs_version *v,
			 struct tfs_cache *cache, size_t header, struct tfs_view_spans **out);
void tfs_view_spans_free(struct tfs_view_spans *s);
/* Fill s->lat: one pass over the column's data in version order, counting the bytes that
 * lines.txt escapes (\\, newline, carriage return) in each row. */
int tfs_view_spans_lines(struct tfs_view_spans *s, const struct tfs_view *view,
			 struct tfs_version *v, struct tfs_cache *cache);

/* Bytes of a view row of the column on average (at least 1). */
uint64_t tfs_view_spans_row_bytes(const struct tfs_view_spans *s);

/* The view rows holding bytes [pos, end) of the view's data.bin: [*first, *last]. */
void tfs_view_spans_rows(const struct tfs_view_spans *s, uint64_t pos, uint64_t end,
			 uint64_t *first, uint64_t *last);

struct tfs_cache_plan;
/* Add to plan (cacheplan.h, MIN eviction) where a front-to-back reader of view needs the chunks
 * of column col of v, by view row: a fixed column's (or part's) chunk of each row; for a column
 * of another kind, its offsets' and shapes' chunks of each row and, with sp (its spans), the data
 * chunk each non-empty row starts in; for a data part (sp required), that data chunk alone. */
int tfs_view_plan_add(struct tfs_cache_plan *plan, const struct tfs_view *view,
		      struct tfs_version *v, size_t col, const struct tfs_view_spans *sp);

/* The view rows (a decimal number a line, in view order) with bytes in a chunk of v recorded as
 * damaged for good (badchunks.h), in any column: what a reader that skips bad rows leaves out.
 * Empty, at no cost beyond a lookup a chunk, while no chunk of v is recorded. */
int tfs_view_bad_rows(const struct tfs_view *view, struct tfs_version *v, struct tfs_cache *cache,
		      struct tfs_buf *out);

#endif
