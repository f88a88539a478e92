/* SPDX-License-Identifier: MIT */
/* column: a manifest's columns in memory: chunk geometry (which chunk holds a row), copies and
 * frees, lookup by name, and a label column's class names. Part of the format module
 * (format.h); manifest.c writes and parses them. */
#include "format.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A class name is a manifest line of at most this many bytes, escaped: it fits the parser's
 * line. */
#define MAX_CLASS_LINE 1000

/* --- chunk geometry ------------------------------------------------------------------------- */

size_t tfs_column_chunk_of(const struct tfs_column *c, uint64_t r)
{
	size_t lo = 0, hi = c->nchunks, k;

	if (c->rows_per_chunk)
		return (size_t)(r / c->rows_per_chunk);
	if (!hi || r >= c->rows)
		return hi;
	/* The first chunk whose end is past r. A data part's chunks are cut at about the same size:
	 * start where r would be were they all alike and look at its neighbours (a random row
	 * then costs one or two lookups, not a dozen mispredicted ones), then search. */
	k = (size_t)((double)r / (double)c->rows * (double)hi);
	k = k < hi ? k : hi - 1;
	for (int step = 0; step < 2; step++) {
		if (c->chunk_end[k] <= r) {
			lo = k + 1;
			k = lo < hi ? lo : k;
		} else if (k > lo && c->chunk_end[k - 1] > r) {
			hi = k;
			k--;
		} else {
			return k;
		}
	}
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (c->chunk_end[mid] <= r)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

uint64_t tfs_column_chunk_first(const struct tfs_column *c, size_t k)
{
	if (c->rows_per_chunk)
		return (uint64_t)k * c->rows_per_chunk;
	return k ? c->chunk_end[k - 1] : 0;
}

uint64_t tfs_column_chunk_rows(const struct tfs_column *c, size_t k)
{
	uint64_t r0 = tfs_column_chunk_first(c, k);

	if (c->rows_per_chunk)
		return c->rows - r0 < c->rows_per_chunk ? c->rows - r0 : c->rows_per_chunk;
	return c->chunk_end[k] - r0;
}

uint64_t tfs_fixed_rows_per_chunk(uint64_t chunk_bytes, uint64_t row_bytes)
{
	if (!row_bytes)
		return (uint64_t)1 << 32;
	return chunk_bytes / row_bytes ? chunk_bytes / row_bytes : 1;
}

uint64_t tfs_column_max_chunk_bytes(const struct tfs_column *c)
{
	uint64_t most = 0;

	if (c->rows_per_chunk)
		return (c->rows < c->rows_per_chunk ? c->rows : c->rows_per_chunk) * c->row_bytes;
	for (size_t k = 0; k < c->nchunks; k++)
		if (tfs_column_chunk_rows(c, k) > most)
			most = tfs_column_chunk_rows(c, k);
	return most * c->row_bytes;
}

/* --- copies, frees, lookup and class names ------------------------------------------------- */

static void free_classes(char **names, size_t n)
{
	for (size_t k = 0; k < n; k++)
		free(names[k]);
	free(names);
}

/* A copy of n names (NULL for none). */
static int copy_classes(char *const *names, size_t n, char ***out)
{
	char **c = n ? calloc(n, sizeof(*c)) : NULL;

	*out = NULL;
	if (n && !c)
		return -ENOMEM;
	for (size_t k = 0; k < n; k++)
		if (!(c[k] = strdup(names[k]))) {
			free_classes(c, n);
			return -ENOMEM;
		}
	*out = c;
	return 0;
}

int tfs_column_classes_merge(struct tfs_column *c, uint64_t rows_before, char *const *names,
			     size_t n, char *err, size_t err_cap)
{
	size_t k = 0;

	if (!n)
		return 0;
	for (size_t i = 0; i < n; i++) {
		size_t esc = 0;

		for (const char *p = names[i]; *p; p++)
			esc += *p == '\\' || *p == '\n' || *p == '\r' ? 2 : 1;
		if (esc > MAX_CLASS_LINE) {
			snprintf(err, err_cap, "column %s: a class name of %zu bytes, over %d",
				 c->name, strlen(names[i]), MAX_CLASS_LINE);
			return -EINVAL;
		}
	}
	if (!c->nclasses) {
		if (rows_before)
			return 0;
		if (copy_classes(names, n, &c->classes))
			return -ENOMEM;
		c->nclasses = n;
		return 0;
	}
	while (k < n && k < c->nclasses && !strcmp(names[k], c->classes[k]))
		k++;
	if (k == n && k == c->nclasses)
		return 0;
	if (k == c->nclasses) {
		/* New classes after the column's: its labels keep their meaning. */
		char **more = realloc(c->classes, n * sizeof(*more));

		if (!more)
			return -ENOMEM;
		c->classes = more;
		for (; k < n; k++) {
			if (!(c->classes[k] = strdup(names[k])))
				return -ENOMEM;
			c->nclasses = k + 1;
		}
		return 0;
	}
	if (k < n && k < c->nclasses)
		snprintf(err, err_cap,
			 "column %s: label %zu is class '%s' there, '%s' here; the classes must be "
			 "the same, or the column's followed by new ones",
			 c->name, k, c->classes[k], names[k]);
	else
		snprintf(err, err_cap,
			 "column %s has %zu classes, here there are %zu, the first %zu of them its "
			 "own; the classes must be the same, or the column's followed by new ones",
			 c->name, c->nclasses, n, k);
	return -EINVAL;
}

void tfs_column_free(struct tfs_column *c)
{
	free_classes(c->classes, c->nclasses);
	free(c->name);
	free(c->chunks);
	free(c->chunk_end);
	memset(c, 0, sizeof(*c));
}

void tfs_manifest_free(struct tfs_manifest *m)
{
	for (size_t i = 0; i < m->ncols; i++)
		tfs_column_free(&m->cols[i]);
	free(m->cols);
	memset(m, 0, sizeof(*m));
}

int tfs_column_copy(struct tfs_column *dst, const struct tfs_column *src)
{
	const size_t n = src->nchunks ? src->nchunks : 1;

	*dst = *src;
	dst->name = strdup(src->name);
	dst->chunks = malloc(n * sizeof(*src->chunks));
	dst->chunk_end = src->chunk_end ? malloc(n * sizeof(*src->chunk_end)) : NULL;
	if (!dst->name || !dst->chunks || (src->chunk_end && !dst->chunk_end) ||
	    copy_classes(src->classes, src->nclasses, &dst->classes)) {
		free(dst->name);
		free(dst->chunks);
		free(dst->chunk_end);
		memset(dst, 0, sizeof(*dst));
		return -ENOMEM;
	}
	if (src->nchunks)
		memcpy(dst->chunks, src->chunks, src->nchunks * sizeof(*src->chunks));
	if (src->chunk_end && src->nchunks)
		memcpy(dst->chunk_end, src->chunk_end, src->nchunks * sizeof(*src->chunk_end));
	return 0;
}

const struct tfs_column *tfs_manifest_column(const struct tfs_manifest *m, const char *name)
{
	for (size_t i = 0; i < m->ncols; i++)
		if (!strcmp(m->cols[i].name, name))
			return &m->cols[i];
	return NULL;
}

int tfs_column_eos_check(const struct tfs_column *c, uint64_t eos, char *err, size_t err_cap)
{
	if (!c->has_eos || c->eos == eos)
		return 0;
	snprintf(err, err_cap, "token column %s has eos %" PRIu64 ", not %" PRIu64, c->name, c->eos,
		 eos);
	return -EINVAL;
}

int tfs_column_eos_merge(struct tfs_column *c, uint64_t eos, char *err, size_t err_cap)
{
	int rc = tfs_column_eos_check(c, eos, err, err_cap);

	if (!rc) {
		c->has_eos = 1;
		c->eos = eos;
	}
	return rc;
}
