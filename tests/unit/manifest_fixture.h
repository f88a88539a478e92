/* SPDX-License-Identifier: MIT */
/* manifest_fixture: manifests, columns and ids made up for the format unit tests, and their
 * comparison, for programs that include cmocka.h first. Static inline: each test program uses
 * the part it needs. */
#ifndef TFS_MANIFEST_FIXTURE_H
#define TFS_MANIFEST_FIXTURE_H

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "format.h"
#include "util.h"
#include "dtype_fixture.h"

static inline struct tfs_id id_from_seed(unsigned seed)
{
	char text[32];
	struct tfs_id id;

	snprintf(text, sizeof(text), "chunk-%u", seed);
	tfs_id_of(text, strlen(text), &id);
	return id;
}

/* Fill in a column with consistent fields and ceil(rows / rows_per_chunk) chunk refs. */
static inline void make_column(struct tfs_column *c, const char *name, const char *descr,
			       unsigned ndim, const uint64_t *shape, uint64_t rows,
			       uint64_t rows_per_chunk, enum tfs_codec_id codec, int level)
{
	memset(c, 0, sizeof(*c));
	c->name = strdup(name);
	assert_non_null(c->name);
	c->dtype = dtype_of(descr);
	c->ndim = ndim;
	c->row_bytes = c->dtype.itemsize;
	for (unsigned d = 0; d < ndim; d++) {
		c->shape[d] = shape[d];
		c->row_bytes *= shape[d];
	}
	c->rows = rows;
	c->rows_per_chunk = rows_per_chunk;
	c->chunk_bytes = TFS_DEFAULT_CHUNK_BYTES;
	c->codec = codec;
	c->level = level;
	c->nchunks = (size_t)((rows + rows_per_chunk - 1) / rows_per_chunk);
	c->chunks = calloc(c->nchunks ? c->nchunks : 1, sizeof(*c->chunks));
	assert_non_null(c->chunks);
	for (size_t k = 0; k < c->nchunks; k++) {
		c->chunks[k].id = id_from_seed((unsigned)(k * 31 + strlen(name)));
		c->chunks[k].stored_size = 48 + k * 1000 + 7;
	}
}

/* A manifest of rows rows with ncols columns; cols allocated, to be filled by the caller. */
static inline void make_manifest(struct tfs_manifest *m, uint64_t rows, size_t ncols)
{
	memset(m, 0, sizeof(*m));
	m->rows = rows;
	m->ncols = ncols;
	m->cols = calloc(ncols ? ncols : 1, sizeof(*m->cols));
	assert_non_null(m->cols);
}

static inline void assert_columns_equal(const struct tfs_column *a, const struct tfs_column *b)
{
	assert_string_equal(a->name, b->name);
	assert_string_equal(a->dtype.descr, b->dtype.descr);
	assert_int_equal(a->dtype.kind, b->dtype.kind);
	assert_int_equal(a->dtype.itemsize, b->dtype.itemsize);
	assert_int_equal(a->ndim, b->ndim);
	for (unsigned d = 0; d < a->ndim; d++)
		assert_int_equal(a->shape[d], b->shape[d]);
	assert_int_equal(a->row_bytes, b->row_bytes);
	assert_int_equal(a->rows, b->rows);
	assert_int_equal(a->rows_per_chunk, b->rows_per_chunk);
	assert_int_equal(a->chunk_bytes, b->chunk_bytes);
	assert_int_equal(a->codec, b->codec);
	assert_int_equal(a->level, b->level);
	assert_int_equal(a->nchunks, b->nchunks);
	for (size_t k = 0; k < a->nchunks; k++) {
		assert_true(tfs_id_eq(&a->chunks[k].id, &b->chunks[k].id));
		assert_int_equal(a->chunks[k].stored_size, b->chunks[k].stored_size);
	}
}

static inline void assert_manifests_equal(const struct tfs_manifest *a,
					  const struct tfs_manifest *b)
{
	assert_int_equal(a->rows, b->rows);
	assert_int_equal(a->ncols, b->ncols);
	for (size_t i = 0; i < a->ncols; i++)
		assert_columns_equal(&a->cols[i], &b->cols[i]);
}

static inline char *serialize_manifest(const struct tfs_manifest *m, size_t *len)
{
	struct tfs_buf b = { 0 };

	assert_int_equal(tfs_manifest_serialize(m, &b), 0);
	return (char *)tfs_buf_take(&b, len);
}

/* Replace the first occurrence of `from` in text by `to` (into a new string). */
static inline char *replace(const char *text, const char *from, const char *to)
{
	const char *at = strstr(text, from);
	size_t n;
	char *out;

	if (!at)
		fail_msg("'%s' not found in the text", from);
	n = strlen(text) - strlen(from) + strlen(to);
	out = malloc(n + 1);
	assert_non_null(out);
	snprintf(out, n + 1, "%.*s%s%s", (int)(at - text), text, to, at + strlen(from));
	return out;
}

static inline int parse_text(const char *text, struct tfs_manifest *m, char *err, size_t err_cap)
{
	/* An exact-size copy without a terminator: the parser must honour len. */
	size_t n = strlen(text);
	char *copy = malloc(n ? n : 1);
	int rc;

	assert_non_null(copy);
	memcpy(copy, text, n);
	rc = tfs_manifest_parse(copy, n, m, err, err_cap);
	free(copy);
	return rc;
}

/* Parse text expected to be rejected with -EIO and a message. */
static inline void assert_manifest_rejected(const char *text, const char *why)
{
	struct tfs_manifest m;
	char err[256] = "";
	int rc = parse_text(text, &m, err, sizeof(err));

	if (rc == 0)
		tfs_manifest_free(&m);
	if (rc != -EIO)
		fail_msg("%s: parse gave %d, want -EIO", why, rc);
	if (!err[0])
		fail_msg("%s: rejected without a message", why);
	assert_int_equal(m.ncols, 0);
	assert_null(m.cols);
}

/* Parse text and return the result, freeing whatever was parsed. */
static inline int manifest_parse_rc(const char *text)
{
	struct tfs_manifest m;
	char err[256] = "";
	int rc = parse_text(text, &m, err, sizeof(err));

	if (rc == 0)
		tfs_manifest_free(&m);
	return rc;
}

/* A small valid manifest: two columns, 10 rows, 4 rows per chunk. */
static inline char *sample_manifest_text(void)
{
	static const uint64_t shape[] = { 3 };
	struct tfs_manifest m;
	char *text;
	size_t len;

	make_manifest(&m, 10, 2);
	make_column(&m.cols[0], "x", "<f4", 1, shape, 10, 4, TFS_CODEC_ZSTD, 3);
	make_column(&m.cols[1], "y", "<i8", 0, NULL, 10, 4, TFS_CODEC_RAW, 0);
	text = serialize_manifest(&m, &len);
	tfs_manifest_free(&m);
	return text;
}

#endif
