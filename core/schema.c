/* SPDX-License-Identifier: MIT */
/* schema: a version's schema.json, what `cat schema.json` shows of a commit and its manifest (the
 * columns' kinds, files, dtypes and chunk geometry). Part of the format module (format.h). */
#include "format.h"

#include <inttypes.h>
#include <stdint.h>

static int json_str(struct tfs_buf *b, const char *s)
{
	int rc = tfs_buf_append(b, "\"", 1);

	for (; !rc && *s; s++) {
		unsigned char ch = (unsigned char)*s;

		if (ch == '"' || ch == '\\')
			rc = tfs_buf_printf(b, "\\%c", ch);
		else if (ch == '\n')
			rc = tfs_buf_printf(b, "\\n");
		else if (ch < 0x20)
			rc = tfs_buf_printf(b, "\\u%04x", ch);
		else
			rc = tfs_buf_append(b, s, 1);
	}
	return rc ? rc : tfs_buf_append(b, "\"", 1);
}

static const char *dtype_name(const struct tfs_dtype *dt)
{
	static const char *const names[][4] = {
		/* 1, 2, 4, 8 bytes */
		{ "int8", "int16", "int32", "int64" },
		{ "uint8", "uint16", "uint32", "uint64" },
		{ NULL, "float16", "float32", "float64" },
	};
	int row = dt->kind == 'i' ? 0 : dt->kind == 'u' ? 1 : 2;
	int col = dt->itemsize == 1 ? 0 : dt->itemsize == 2 ? 1 : dt->itemsize == 4 ? 2 : 3;

	if (dt->kind == 'b')
		return "bool";
	if (dt->kind == 'c')
		return dt->itemsize == 8 ? "complex64" : "complex128";
	return names[row][col];
}

/* Stored bytes of a column, its parts' included. */
static uint64_t stored_bytes(const struct tfs_manifest *m, size_t i)
{
	const size_t last = m->cols[i].kind == TFS_COL_FIXED	? i
			    : m->cols[i].kind == TFS_COL_RAGGED ? m->cols[i].shapes
								: m->cols[i].offsets;
	uint64_t stored = 0;

	for (size_t j = i; j <= last; j++)
		for (size_t k = 0; k < m->cols[j].nchunks; k++)
			stored += m->cols[j].chunks[k].stored_size;
	return stored;
}

static int column_json(const struct tfs_manifest *m, size_t i, struct tfs_buf *out)
{
	const struct tfs_column *col = &m->cols[i];
	const struct tfs_column *data = col->kind != TFS_COL_FIXED ? &m->cols[col->data] : col;
	int rc;

	rc = tfs_buf_printf(out, "\n    {\"name\": \"%s\", \"kind\": \"%s\", ", col->name,
			    tfs_col_kind_name(col->kind));
	if (!rc && col->kind == TFS_COL_FIXED)
		rc = tfs_buf_printf(out, "\"file\": \"%s.npy\", ", col->name);
	else if (!rc)
		rc = tfs_buf_printf(
			out, "\"dir\": \"%s/\", \"files\": [\"data.bin\", \"offsets.npy\"%s], ",
			col->name,
			col->kind == TFS_COL_RAGGED ? ", \"shapes.npy\""
			: col->kind == TFS_COL_TEXT ? ", \"lines.txt\""
						    : "");
	if (!rc)
		rc = tfs_buf_printf(out, "\"dtype\": \"%s\", \"type\": \"%s\", ", col->dtype.descr,
				    col->kind == TFS_COL_TEXT	 ? "str"
				    : col->kind == TFS_COL_BYTES ? "bytes"
								 : dtype_name(&col->dtype));
	if (!rc && col->kind == TFS_COL_RAGGED)
		rc = tfs_buf_printf(out, "\"ndim\": %u, ", col->ndim);
	if (!rc && col->has_eos)
		rc = tfs_buf_printf(out, "\"eos\": %" PRIu64 ", ", col->eos);
	if (!rc && col->kind == TFS_COL_FIXED) {
		rc = tfs_buf_printf(out, "\"shape\": [");
		for (unsigned d = 0; !rc && d < col->ndim; d++)
			rc = tfs_buf_printf(out, "%s%" PRIu64, d ? ", " : "", col->shape[d]);
		if (!rc)
			rc = tfs_buf_printf(out,
					    "], \"rows\": %" PRIu64 ", \"row_bytes\": %" PRIu64
					    ", \"rows_per_chunk\": %" PRIu64 ", ",
					    col->rows, col->row_bytes, col->rows_per_chunk);
	} else if (!rc) {
		rc = tfs_buf_printf(out, "\"rows\": %" PRIu64 ", \"data_bytes\": %" PRIu64 ", ",
				    col->rows, data->rows);
		if (!rc && col->kind == TFS_COL_TEXT)
			rc = tfs_buf_printf(out, "\"text_bytes\": %" PRIu64 ", ", col->text_bytes);
	}
	if (!rc && col->nclasses) {
		rc = tfs_buf_printf(out, "\"classes\": [");
		for (size_t k = 0; !rc && k < col->nclasses; k++) {
			rc = k ? tfs_buf_printf(out, ", ") : 0;
			if (!rc)
				rc = json_str(out, col->classes[k]);
		}
		if (!rc)
			rc = tfs_buf_printf(out, "], ");
	}
	if (!rc)
		rc = tfs_buf_printf(out,
				    "\"chunk_bytes\": %" PRIu64
				    ", \"chunks\": %zu, \"codec\": \"%s\", "
				    "\"level\": %d, \"stored_bytes\": %" PRIu64 "}",
				    data->rows_per_chunk ? data->rows_per_chunk * data->row_bytes
							 : data->chunk_bytes,
				    data->nchunks, tfs_codec_by_id(data->codec)->name, data->level,
				    stored_bytes(m, i));
	return rc;
}

int tfs_schema_json(const char *ds, const struct tfs_commit *c, const struct tfs_manifest *m,
		    struct tfs_buf *out)
{
	char hex[TFS_ID_HEX], when[32];
	int rc, first = 1;

	tfs_format_utc(c->time, "%Y-%m-%dT%H:%M:%SZ", when, sizeof(when));
	tfs_id_hex(&c->id, hex);
	rc = tfs_buf_printf(out,
			    "{\n  \"format_version\": %d,\n  \"dataset\": ", TFS_FORMAT_VERSION);
	if (!rc)
		rc = json_str(out, ds);
	if (!rc)
		rc = tfs_buf_printf(out, ",\n  \"commit\": \"%s\",\n  \"parents\": [", hex);
	for (size_t i = 0; !rc && i < c->nparents; i++) {
		tfs_id_hex(&c->parents[i], hex);
		rc = tfs_buf_printf(out, "%s\"%s\"", i ? ", " : "", hex);
	}
	if (!rc)
		rc = tfs_buf_printf(out, "],\n  \"time\": \"%s\",\n  \"message\": ", when);
	if (!rc)
		rc = json_str(out, c->message ? c->message : "");
	if (!rc)
		rc = tfs_buf_printf(out, ",\n  \"rows\": %" PRIu64 ",\n  \"columns\": [", m->rows);
	for (size_t i = 0; !rc && i < m->ncols; i++) {
		if (m->cols[i].part != TFS_PART_NONE)
			continue; /* described with their column */
		rc = tfs_buf_printf(out, "%s", first ? "" : ",");
		if (!rc)
			rc = column_json(m, i, out);
		first = 0;
	}
	if (!rc)
		rc = tfs_buf_printf(out, "%s]\n}\n", first ? "" : "\n  ");
	return rc;
}
