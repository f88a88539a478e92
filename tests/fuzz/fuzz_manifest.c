/* SPDX-License-Identifier: MIT */
/* Fuzz target for tfs_manifest_parse: parse, serialize, parse again, and compare. */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "format.h"
#include "fuzz_common.h"

static void same_manifest(const struct tfs_manifest *a, const struct tfs_manifest *b)
{
	FUZZ_CHECK(a->rows == b->rows && a->ncols == b->ncols);
	for (size_t i = 0; i < a->ncols; i++) {
		const struct tfs_column *x = &a->cols[i], *y = &b->cols[i];

		FUZZ_CHECK(!strcmp(x->name, y->name));
		FUZZ_CHECK(!strcmp(x->dtype.descr, y->dtype.descr));
		FUZZ_CHECK(x->dtype.kind == y->dtype.kind &&
			   x->dtype.itemsize == y->dtype.itemsize);
		FUZZ_CHECK(x->ndim == y->ndim);
		FUZZ_CHECK(!memcmp(x->shape, y->shape, x->ndim * sizeof(x->shape[0])));
		FUZZ_CHECK(x->row_bytes == y->row_bytes && x->rows == y->rows);
		FUZZ_CHECK(x->rows_per_chunk == y->rows_per_chunk);
		FUZZ_CHECK(x->chunk_bytes == y->chunk_bytes);
		FUZZ_CHECK(x->codec == y->codec && x->level == y->level);
		FUZZ_CHECK(x->nchunks == y->nchunks);
		FUZZ_CHECK(x->kind == y->kind && x->part == y->part);
		FUZZ_CHECK(x->text_bytes == y->text_bytes);
		for (size_t k = 0; k < x->nchunks; k++) {
			FUZZ_CHECK(tfs_id_eq(&x->chunks[k].id, &y->chunks[k].id));
			FUZZ_CHECK(x->chunks[k].stored_size == y->chunks[k].stored_size);
			FUZZ_CHECK(tfs_column_chunk_rows(x, k) == tfs_column_chunk_rows(y, k));
		}
	}
}

/* What FORMAT.md promises of every manifest the parser accepts. */
static void check_manifest(const struct tfs_manifest *m)
{
	FUZZ_CHECK(m->ncols > 0 || m->rows == 0);
	for (size_t i = 0; i < m->ncols; i++) {
		const struct tfs_column *c = &m->cols[i];
		uint64_t bytes = c->dtype.itemsize, rows = 0;

		FUZZ_CHECK(tfs_manifest_column(m, c->name) == c); /* names are unique */
		FUZZ_CHECK(c->ndim < TFS_MAX_DIMS);
		if (c->kind != TFS_COL_FIXED) {
			/* A header: no chunks, its parts right after it, of its rows. */
			FUZZ_CHECK(tfs_name_valid(c->name) && c->part == TFS_PART_NONE);
			FUZZ_CHECK(c->rows == m->rows && c->nchunks == 0);
			FUZZ_CHECK(c->data == i + 1 && c->offsets == i + 2);
			FUZZ_CHECK(m->cols[c->offsets].rows == c->rows + 1);
			FUZZ_CHECK(c->kind != TFS_COL_RAGGED ||
				   (c->shapes == i + 3 && m->cols[c->shapes].rows == c->rows));
			continue;
		}
		if (c->part == TFS_PART_NONE) {
			FUZZ_CHECK(tfs_name_valid(c->name));
			FUZZ_CHECK(c->rows == m->rows);
		}
		FUZZ_CHECK(c->rows_per_chunk >= 1 || c->part == TFS_PART_DATA);
		if (c->rows_per_chunk)
			FUZZ_CHECK(c->nchunks == c->rows / c->rows_per_chunk +
							 (c->rows % c->rows_per_chunk ? 1 : 0));
		for (size_t k = 0; k < c->nchunks; k++) {
			FUZZ_CHECK(tfs_column_chunk_first(c, k) == rows);
			FUZZ_CHECK(c->rows_per_chunk || tfs_column_chunk_rows(c, k) > 0);
			rows += tfs_column_chunk_rows(c, k);
			FUZZ_CHECK(!rows || tfs_column_chunk_of(c, rows - 1) == k);
		}
		FUZZ_CHECK(rows == c->rows);
		for (unsigned d = 0; d < c->ndim; d++)
			FUZZ_CHECK(!tfs_mul_u64(bytes, c->shape[d], &bytes));
		FUZZ_CHECK(bytes == c->row_bytes);
		FUZZ_CHECK(tfs_codec_by_id(c->codec) != NULL);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len)
{
	struct tfs_manifest m, m2, m3;
	struct tfs_buf out = { 0 }, out2 = { 0 };
	char err[256];
	int rc;

	/* The text is not NUL-terminated (an object's payload): the parser must stay in bounds. */
	rc = tfs_manifest_parse((const char *)data, len, &m, err, sizeof(err));
	FUZZ_CHECK(rc == 0 || rc == -EIO || rc == -EPROTO);
	FUZZ_CHECK(memchr(err, 0, sizeof(err)));
	if (rc) {
		FUZZ_CHECK(m.ncols == 0 && m.cols == NULL);
		return 0;
	}
	check_manifest(&m);

	FUZZ_CHECK(tfs_manifest_serialize(&m, &out) == 0);
	rc = tfs_manifest_parse((const char *)out.data, out.len, &m2, err, sizeof(err));
	if (rc)
		fprintf(stderr, "re-parse failed: %s\n%.*s", err, (int)out.len, out.data);
	FUZZ_CHECK(rc == 0);
	same_manifest(&m, &m2);

	/* Serialization is canonical: serializing the re-parsed manifest gives the same bytes. */
	FUZZ_CHECK(tfs_manifest_serialize(&m2, &out2) == 0);
	FUZZ_CHECK(out.len == out2.len && !memcmp(out.data, out2.data, out.len));

	/* A deep copy of each column is the column. */
	for (size_t i = 0; i < m.ncols; i++) {
		struct tfs_column c;

		FUZZ_CHECK(tfs_column_copy(&c, &m.cols[i]) == 0);
		m3 = (struct tfs_manifest){ .rows = m.rows, .ncols = 1, .cols = &c };
		same_manifest(
			&(struct tfs_manifest){ .rows = m.rows, .ncols = 1, .cols = &m.cols[i] },
			&m3);
		tfs_column_free(&c);
	}

	/* schema.json renders any parsed manifest. */
	tfs_buf_free(&out2);
	FUZZ_CHECK(tfs_schema_json("ds", &(struct tfs_commit){ .rows = m.rows }, &m, &out2) == 0);
	FUZZ_CHECK(out2.len > 0 && out2.data[out2.len - 1] == '\n');

	tfs_buf_free(&out);
	tfs_buf_free(&out2);
	tfs_manifest_free(&m);
	tfs_manifest_free(&m2);
	return 0;
}
