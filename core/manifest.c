/* SPDX-License-Identifier: MIT */
/* manifest: the text objects of the format (core/FORMAT.md): manifests (a version's columns and
 * their chunk geometry) and commits, written and parsed. A column's own operations are
 * column.c's, schema.json is schema.c's. Part of the format module (format.h). */
#include "format.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Manifests holding only fixed columns are written as version 1, which older readers take;
 * column kinds need version 2; fixed columns (or parts) whose chunks are listed, as a commit of
 * parts makes them, need version 3; class names on a label column, version 4. */
#define MANIFEST_V1 1
#define MANIFEST_V2 2
#define MANIFEST_V3 3
#define MANIFEST_V4 4
/* More class names than this in one column is a malformed manifest. */
#define MAX_CLASSES (1u << 24)

static const char *const kind_names[TFS_COL_NKINDS] = {
	[TFS_COL_FIXED] = "fixed",
	[TFS_COL_RAGGED] = "ragged",
	[TFS_COL_TEXT] = "text",
	[TFS_COL_BYTES] = "bytes",
};

static const char *const part_names[] = {
	[TFS_PART_NONE] = NULL,
	[TFS_PART_DATA] = "data",
	[TFS_PART_OFFSETS] = "offsets",
	[TFS_PART_SHAPES] = "shapes",
};

const char *tfs_col_kind_name(enum tfs_col_kind k)
{
	return k < TFS_COL_NKINDS ? kind_names[k] : "?";
}

int tfs_col_kind_parse(const char *name)
{
	for (int k = 0; k < TFS_COL_NKINDS; k++)
		if (!strcmp(name, kind_names[k]))
			return k;
	return -1;
}

/* --- text ----------------------------------------------------------------------------------- */

/* The oldest version that can hold m. */
static int manifest_version(const struct tfs_manifest *m)
{
	int v = MANIFEST_V1;

	for (size_t i = 0; i < m->ncols; i++) {
		const struct tfs_column *c = &m->cols[i];

		if (c->nclasses || c->has_eos)
			return MANIFEST_V4;
		if (c->kind == TFS_COL_FIXED && c->part != TFS_PART_DATA && !c->rows_per_chunk)
			v = MANIFEST_V3;
		else if ((c->kind != TFS_COL_FIXED || c->part != TFS_PART_NONE) && v < MANIFEST_V2)
			v = MANIFEST_V2;
	}
	return v;
}

/* A class name as a line: '\\' as "\\\\", newline as "\\n", carriage return as "\\r". */
static int put_escaped(struct tfs_buf *out, const char *s)
{
	int rc = 0;

	for (; !rc && *s; s++)
		rc = *s == '\\'	  ? tfs_buf_append(out, "\\\\", 2)
		     : *s == '\n' ? tfs_buf_append(out, "\\n", 2)
		     : *s == '\r' ? tfs_buf_append(out, "\\r", 2)
				  : tfs_buf_append(out, s, 1);
	return rc ? rc : tfs_buf_append(out, "\n", 1);
}

/* The line back into a name, in place; -1 for an escape that is not one of those. */
static int unescape(char *s)
{
	char *w = s;

	for (; *s; s++) {
		if (*s != '\\') {
			*w++ = *s;
			continue;
		}
		s++;
		if (*s == '\\')
			*w++ = '\\';
		else if (*s == 'n')
			*w++ = '\n';
		else if (*s == 'r')
			*w++ = '\r';
		else
			return -1;
	}
	*w = 0;
	return 0;
}

static int serialize_column(const struct tfs_column *c, struct tfs_buf *out)
{
	int rc = tfs_buf_printf(out, "column %s\n", c->name);

	if (!rc && c->kind != TFS_COL_FIXED) {
		/* A header: its rows live in the parts that follow. */
		rc = tfs_buf_printf(out, "kind %s\ndtype %s\nndim %u\nrows %" PRIu64 "\n",
				    kind_names[c->kind], c->dtype.descr, c->ndim, c->rows);
		if (!rc && c->kind == TFS_COL_TEXT)
			rc = tfs_buf_printf(out, "text_bytes %" PRIu64 "\n", c->text_bytes);
		if (!rc && c->has_eos)
			rc = tfs_buf_printf(out, "eos %" PRIu64 "\n", c->eos);
		return rc ? rc : tfs_buf_printf(out, "end\n");
	}
	if (!rc && c->part != TFS_PART_NONE)
		rc = tfs_buf_printf(out, "part %s\n", part_names[c->part]);
	if (!rc)
		rc = tfs_buf_printf(out, "dtype %s\nshape", c->dtype.descr);
	for (unsigned d = 0; !rc && d < c->ndim; d++)
		rc = tfs_buf_printf(out, " %" PRIu64, c->shape[d]);
	if (!rc)
		rc = tfs_buf_printf(out,
				    "\nrow_bytes %" PRIu64 "\nrows %" PRIu64
				    "\nrows_per_chunk %" PRIu64 "\nchunk_bytes %" PRIu64
				    "\ncodec %s %d\nchunks %zu\n",
				    c->row_bytes, c->rows, c->rows_per_chunk, c->chunk_bytes,
				    tfs_codec_by_id(c->codec)->name, c->level, c->nchunks);
	for (size_t k = 0; !rc && k < c->nchunks; k++) {
		char hex[TFS_ID_HEX];

		tfs_id_hex(&c->chunks[k].id, hex);
		rc = tfs_buf_printf(out, "%s %" PRIu64, hex, c->chunks[k].stored_size);
		if (!rc && !c->rows_per_chunk)
			rc = tfs_buf_printf(out, " %" PRIu64, tfs_column_chunk_rows(c, k));
		if (!rc)
			rc = tfs_buf_append(out, "\n", 1);
	}
	if (!rc && c->nclasses)
		rc = tfs_buf_printf(out, "classes %zu\n", c->nclasses);
	for (size_t k = 0; !rc && k < c->nclasses; k++)
		rc = put_escaped(out, c->classes[k]);
	return rc ? rc : tfs_buf_printf(out, "end\n");
}

int tfs_manifest_serialize(const struct tfs_manifest *m, struct tfs_buf *out)
{
	int rc = tfs_buf_printf(out, "tensorfs-manifest %d\nrows %" PRIu64 "\n",
				manifest_version(m), m->rows);

	for (size_t i = 0; !rc && i < m->ncols; i++)
		rc = serialize_column(&m->cols[i], out);
	return rc;
}

struct cursor {
	const char *p, *end;
	int lineno;
	int overlong;	 /* set when a line did not fit: the text is malformed */
	size_t len;	 /* of the line, which may hold a NUL */
	char line[1024]; /* a shape line of 31 dimensions of 20 digits fits */
};

/* Next line into c->line (without '\n'); -1 at the end or for an over-long line (which also
 * sets c->overlong so that callers treating -1 as the end can tell). */
static int next_line(struct cursor *c)
{
	const char *nl;
	size_t n;

	if (c->p >= c->end)
		return -1;
	nl = memchr(c->p, '\n', (size_t)(c->end - c->p));
	n = nl ? (size_t)(nl - c->p) : (size_t)(c->end - c->p);
	if (n >= sizeof(c->line)) {
		c->overlong = 1;
		return -1;
	}
	memcpy(c->line, c->p, n);
	c->line[n] = 0;
	c->len = n;
	c->p += n + (nl ? 1 : 0);
	c->lineno++;
	return 0;
}

static int line_u64(struct cursor *c, const char *key, uint64_t *v)
{
	char fmt[48];
	char extra;
	unsigned long long x;

	if (next_line(c))
		return -1;
	snprintf(fmt, sizeof(fmt), "%s %%llu %%c", key);
	if (sscanf(c->line, fmt, &x, &extra) != 1)
		return -1;
	*v = x;
	return 0;
}

/* A header's lines after its kind: dtype, ndim, rows, [text_bytes], [eos], end. */
static int parse_header(struct cursor *cur, unsigned version, struct tfs_column *c, char *err,
			size_t err_cap)
{
	char dtype[16];
	uint64_t ndim;
	int big;

	if (next_line(cur) || sscanf(cur->line, "dtype %15s", dtype) != 1 ||
	    tfs_dtype_parse(dtype, &c->dtype, &big, err, err_cap) || big ||
	    strcmp(dtype, c->dtype.descr))
		return -1;
	if (line_u64(cur, "ndim", &ndim) || ndim > TFS_MAX_DIMS - 1 ||
	    (c->kind == TFS_COL_RAGGED) != (ndim > 0) ||
	    (c->kind != TFS_COL_RAGGED && strcmp(dtype, "|u1")))
		return -1;
	c->ndim = (unsigned)ndim;
	if (line_u64(cur, "rows", &c->rows) ||
	    (c->kind == TFS_COL_TEXT && line_u64(cur, "text_bytes", &c->text_bytes)))
		return -1;
	if (version >= MANIFEST_V4 && cur->end - cur->p >= 4 && !memcmp(cur->p, "eos ", 4)) {
		/* A token column's: ragged integers of rank 1, the id one of them. */
		if (line_u64(cur, "eos", &c->eos) || c->kind != TFS_COL_RAGGED || c->ndim != 1 ||
		    !tfs_dtype_holds(&c->dtype, c->eos))
			return -1;
		c->has_eos = 1;
	}
	return next_line(cur) || strcmp(cur->line, "end") ? -1 : 0;
}

/* "classes K" (the cursor's line), K names a line each, and "end": an integer scalar column's. */
static int parse_classes(struct cursor *cur, struct tfs_column *c)
{
	uint64_t n;
	char extra;

	if (sscanf(cur->line, "classes %" SCNu64 " %c", &n, &extra) != 1 || !n || n > MAX_CLASSES ||
	    c->part != TFS_PART_NONE || c->ndim || (c->dtype.kind != 'i' && c->dtype.kind != 'u'))
		return -1;
	if (!(c->classes = calloc((size_t)n, sizeof(*c->classes))))
		return -1;
	for (size_t k = 0; k < n; k++) {
		/* As written: no NUL, no bare carriage return (written as "\\r"). */
		if (next_line(cur) || strlen(cur->line) != cur->len || strchr(cur->line, '\r') ||
		    unescape(cur->line) || !(c->classes[k] = strdup(cur->line)))
			return -1;
		c->nclasses = k + 1;
	}
	return next_line(cur) || strcmp(cur->line, "end") ? -1 : 0;
}

/* A fixed column's (or a part's) lines after its name (and part line): dtype ... end. */
static int parse_fixed(struct cursor *cur, unsigned version, struct tfs_column *c, char *err,
		       size_t err_cap)
{
	char dtype[16], codec[16], *tok, *save;
	int big, level;
	uint64_t nchunks, expect_bytes, want_chunks;

	if (next_line(cur) || sscanf(cur->line, "dtype %15s", dtype) != 1)
		return -1;
	if (tfs_dtype_parse(dtype, &c->dtype, &big, err, err_cap) || big ||
	    strcmp(dtype, c->dtype.descr))
		return -1;
	if (next_line(cur) || strncmp(cur->line, "shape", 5))
		return -1;
	c->ndim = 0;
	expect_bytes = c->dtype.itemsize;
	for (tok = strtok_r(cur->line + 5, " ", &save); tok; tok = strtok_r(NULL, " ", &save)) {
		char *end;

		if (c->ndim >= TFS_MAX_DIMS - 1)
			return -1;
		c->shape[c->ndim] = strtoull(tok, &end, 10);
		if (*end || tfs_mul_u64(expect_bytes, c->shape[c->ndim], &expect_bytes))
			return -1;
		c->ndim++;
	}
	if (line_u64(cur, "row_bytes", &c->row_bytes) || c->row_bytes != expect_bytes)
		return -1;
	/* Data parts list their chunks (rows_per_chunk 0); from version 3 any column may. */
	if (line_u64(cur, "rows", &c->rows) ||
	    line_u64(cur, "rows_per_chunk", &c->rows_per_chunk) ||
	    (c->part == TFS_PART_DATA && c->rows_per_chunk) ||
	    (version < MANIFEST_V3 && c->part != TFS_PART_DATA && !c->rows_per_chunk) ||
	    line_u64(cur, "chunk_bytes", &c->chunk_bytes))
		return -1;
	if (next_line(cur) || sscanf(cur->line, "codec %15s %d", codec, &level) != 2 ||
	    !tfs_codec_by_name(codec))
		return -1;
	c->codec = tfs_codec_by_name(codec)->id;
	c->level = level;
	if (line_u64(cur, "chunks", &nchunks))
		return -1;
	want_chunks = c->rows_per_chunk
			      ? c->rows / c->rows_per_chunk + (c->rows % c->rows_per_chunk ? 1 : 0)
			      : nchunks;
	if (nchunks != want_chunks || nchunks > c->rows + 1) {
		snprintf(err, err_cap, "column %s: %" PRIu64 " chunks for %" PRIu64 " rows",
			 c->name, nchunks, c->rows);
		return -1;
	}
	c->nchunks = (size_t)nchunks;
	c->chunks = calloc(nchunks ? nchunks : 1, sizeof(*c->chunks));
	if (!c->chunks || (!c->rows_per_chunk &&
			   !(c->chunk_end = calloc(nchunks ? nchunks : 1, sizeof(*c->chunk_end)))))
		return -1;
	for (size_t k = 0; k < c->nchunks; k++) {
		unsigned long long size, rows = 0;
		char hex[80], extra;
		int n = sscanf(next_line(cur) ? "" : cur->line, "%79s %llu %llu %c", hex, &size,
			       &rows, &extra);

		if (n != (c->rows_per_chunk ? 2 : 3) || strlen(hex) != TFS_ID_HEX - 1 ||
		    tfs_id_parse(hex, &c->chunks[k].id))
			return -1;
		c->chunks[k].stored_size = size;
		if (!c->rows_per_chunk) {
			/* Listed chunks are never empty and add up to the rows. */
			uint64_t r0 = k ? c->chunk_end[k - 1] : 0;

			if (rows == 0 || rows > c->rows - r0)
				return -1;
			c->chunk_end[k] = r0 + rows;
		}
	}
	if (!c->rows_per_chunk && (c->nchunks ? c->chunk_end[c->nchunks - 1] : 0) != c->rows)
		return -1;
	if (next_line(cur))
		return -1;
	if (version >= MANIFEST_V4 && !strncmp(cur->line, "classes ", 8))
		return parse_classes(cur, c);
	return strcmp(cur->line, "end") ? -1 : 0;
}

/* The parts of header h (at index i) follow it, each as its kind wants them. */
static int check_parts(struct tfs_manifest *m, size_t i, char *err, size_t err_cap)
{
	struct tfs_column *h = &m->cols[i];
	const size_t nparts = h->kind == TFS_COL_RAGGED ? 3 : 2;
	char name[160];

	for (size_t p = 1; p <= nparts; p++) {
		const struct tfs_column *c = i + p < m->ncols ? &m->cols[i + p] : NULL;
		int ok;

		snprintf(name, sizeof(name), "%s/%s", h->name, part_names[p]);
		if (!c || c->part != p || strcmp(c->name, name)) {
			snprintf(err, err_cap, "column %s: part %s missing", h->name, name);
			return -1;
		}
		switch ((enum tfs_col_part)p) {
		case TFS_PART_DATA:
			ok = !strcmp(c->dtype.descr, "|u1") && c->ndim == 0;
			h->data = i + p;
			break;
		case TFS_PART_OFFSETS:
			ok = !strcmp(c->dtype.descr, "<u8") && c->ndim == 0 &&
			     c->rows == h->rows + 1;
			h->offsets = i + p;
			break;
		default:
			ok = !strcmp(c->dtype.descr, "<i8") && c->ndim == 1 &&
			     c->shape[0] == h->ndim && c->rows == h->rows;
			h->shapes = i + p;
			break;
		}
		if (!ok) {
			snprintf(err, err_cap, "column %s: part %s does not fit it", h->name, name);
			return -1;
		}
	}
	return 0;
}

/* "NAME/PART" of the header before: the part, or NONE when the name is not one. */
static enum tfs_col_part part_of_name(const char *name)
{
	const char *slash = strchr(name, '/');

	if (!slash)
		return TFS_PART_NONE;
	for (int p = TFS_PART_DATA; p <= TFS_PART_SHAPES; p++)
		if (!strcmp(slash + 1, part_names[p]))
			return (enum tfs_col_part)p;
	return TFS_PART_NONE;
}

static int parse_entry(struct cursor *cur, unsigned version, struct tfs_column *c, char *err,
		       size_t err_cap)
{
	const char *name = cur->line + 7;
	const char *slash = strchr(name, '/');
	char head[160];
	int k;

	if (!slash && !tfs_name_valid(name))
		return -1;
	if (slash) {
		/* A part: "NAME/PART", of a header named NAME. */
		snprintf(head, sizeof(head), "%.*s", (int)(slash - name), name);
		if (!tfs_name_valid(head) || part_of_name(name) == TFS_PART_NONE)
			return -1;
	}
	/* The cursor's line is overwritten below: go on with the copy. */
	if (!(c->name = strdup(name)))
		return -1;
	name = c->name;
	slash = strchr(name, '/');
	if (version < MANIFEST_V2)
		return slash ? -1 : parse_fixed(cur, version, c, err, err_cap);
	/* Version 2: "kind K" (a header), "part P", or a fixed column's dtype line. */
	if (cur->end - cur->p >= 5 && !memcmp(cur->p, "kind ", 5)) {
		if (next_line(cur) || slash || (k = tfs_col_kind_parse(cur->line + 5)) <= 0)
			return -1;
		c->kind = (enum tfs_col_kind)k;
		return parse_header(cur, version, c, err, err_cap);
	}
	if (cur->end - cur->p >= 5 && !memcmp(cur->p, "part ", 5)) {
		if (next_line(cur) || !slash || strcmp(cur->line + 5, slash + 1))
			return -1;
		c->part = part_of_name(name);
	} else if (slash) {
		return -1;
	}
	return parse_fixed(cur, version, c, err, err_cap);
}

int tfs_manifest_parse(const char *text, size_t len, struct tfs_manifest *m, char *err,
		       size_t err_cap)
{
	struct cursor cur = { .p = text, .end = text + len };
	unsigned version;
	size_t cap = 0;

	memset(m, 0, sizeof(*m));
	err[0] = 0;
	if (next_line(&cur) || sscanf(cur.line, "tensorfs-manifest %u", &version) != 1)
		goto bad;
	if (version > MANIFEST_V4) {
		snprintf(err, err_cap, "manifest format version %u is newer than this tensorfs",
			 version);
		return -EPROTO;
	}
	if (line_u64(&cur, "rows", &m->rows))
		goto bad;
	while (!next_line(&cur)) {
		struct tfs_column *c;

		if (strncmp(cur.line, "column ", 7) || tfs_manifest_column(m, cur.line + 7))
			goto bad;
		if (TFS_GROW(m->cols, &cap, m->ncols + 1))
			goto bad;
		c = &m->cols[m->ncols++];
		memset(c, 0, sizeof(*c));
		if (parse_entry(&cur, version, c, err, err_cap))
			goto bad;
		if (c->part == TFS_PART_NONE && c->rows != m->rows) {
			snprintf(err, err_cap,
				 "column %s has %" PRIu64 " rows, the version %" PRIu64, c->name,
				 c->rows, m->rows);
			goto bad;
		}
	}
	if (cur.overlong)
		goto bad;
	/* Every header is followed by its parts, and every part follows its header. */
	for (size_t i = 0; i < m->ncols; i++) {
		const struct tfs_column *c = &m->cols[i];

		if (c->kind != TFS_COL_FIXED) {
			if (check_parts(m, i, err, err_cap))
				goto bad;
			i = c->kind == TFS_COL_RAGGED ? c->shapes : c->offsets;
		} else if (c->part != TFS_PART_NONE) {
			snprintf(err, err_cap, "part %s has no column", c->name);
			goto bad;
		}
	}
	if (m->ncols == 0 && m->rows != 0) {
		snprintf(err, err_cap, "%" PRIu64 " rows but no columns", m->rows);
		goto bad;
	}
	return 0;
bad:
	if (!err[0])
		snprintf(err, err_cap, "malformed manifest at line %d", cur.lineno);
	tfs_manifest_free(m);
	return -EIO;
}

int tfs_manifest_load(struct tfs_store *s, const char *ds, const struct tfs_id *id,
		      struct tfs_manifest *m)
{
	uint8_t *raw;
	size_t len;
	char err[256];
	int rc = tfs_object_get(s, ds, id, TFS_OBJ_MANIFEST, &raw, &len);

	if (rc)
		return rc;
	rc = tfs_manifest_parse((const char *)raw, len, m, err, sizeof(err));
	if (rc) {
		char key[TFS_KEY_MAX];

		tfs_object_key(ds, id, key);
		tfs_err("%s/%s: %s", s->url, key, err);
	}
	free(raw);
	return rc;
}

/* --- commits -------------------------------------------------------------------------------- */

int tfs_commit_serialize(const struct tfs_commit *c, struct tfs_buf *out)
{
	char hex[TFS_ID_HEX];
	int rc;

	tfs_id_hex(&c->manifest, hex);
	rc = tfs_buf_printf(out, "tensorfs-commit %d\nmanifest %s\n", TFS_FORMAT_VERSION, hex);
	for (size_t i = 0; !rc && i < c->nparents; i++) {
		tfs_id_hex(&c->parents[i], hex);
		rc = tfs_buf_printf(out, "parent %s\n", hex);
	}
	if (!rc)
		rc = tfs_buf_printf(out, "time %" PRId64 "\nrows %" PRIu64 "\n\n%s", c->time,
				    c->rows, c->message ? c->message : "");
	return rc;
}

void tfs_commit_free(struct tfs_commit *c)
{
	free(c->parents);
	free(c->message);
	memset(c, 0, sizeof(*c));
}

int tfs_commit_parse(const char *text, size_t len, struct tfs_commit *c)
{
	struct cursor cur = { .p = text, .end = text + len };
	unsigned version;
	long long t;
	unsigned long long rows;
	char hex[80];

	memset(c, 0, sizeof(*c));
	if (next_line(&cur) || sscanf(cur.line, "tensorfs-commit %u", &version) != 1)
		goto bad;
	if (version > TFS_FORMAT_VERSION)
		return -EPROTO;
	if (next_line(&cur) || sscanf(cur.line, "manifest %79s", hex) != 1 ||
	    tfs_id_parse(hex, &c->manifest))
		goto bad;
	for (;;) {
		if (next_line(&cur))
			goto bad;
		if (strncmp(cur.line, "parent ", 7))
			break;
		struct tfs_id *n = realloc(c->parents, (c->nparents + 1) * sizeof(*n));

		if (!n || sscanf(cur.line, "parent %79s", hex) != 1 ||
		    tfs_id_parse(hex, &n[c->nparents])) {
			if (n)
				c->parents = n;
			goto bad;
		}
		c->parents = n;
		c->nparents++;
	}
	if (sscanf(cur.line, "time %lld", &t) != 1)
		goto bad;
	c->time = t;
	if (next_line(&cur) || sscanf(cur.line, "rows %llu", &rows) != 1)
		goto bad;
	c->rows = rows;
	if (next_line(&cur) || cur.line[0])
		goto bad;
	c->message = strndup(cur.p, (size_t)(cur.end - cur.p));
	if (!c->message)
		goto bad;
	return 0;
bad:
	tfs_commit_free(c);
	return -EIO;
}

int tfs_commit_load(struct tfs_store *s, const char *ds, const struct tfs_id *id,
		    struct tfs_commit *c)
{
	uint8_t *raw;
	size_t len;
	int rc = tfs_object_get(s, ds, id, TFS_OBJ_COMMIT, &raw, &len);

	if (rc)
		return rc;
	rc = tfs_commit_parse((const char *)raw, len, c);
	if (rc) {
		char key[TFS_KEY_MAX];

		tfs_object_key(ds, id, key);
		tfs_err("%s/%s: %s", s->url, key,
			rc == -EPROTO ? "commit format is newer than this tensorfs"
				      : "malformed commit");
	} else {
		c->id = *id;
	}
	free(raw);
	return rc;
}

int tfs_commit_write(struct tfs_store *s, const char *ds, const struct tfs_manifest *m,
		     const struct tfs_id *parent, const char *message, struct tfs_id *commit_id)
{
	struct tfs_buf mb = { 0 }, cb = { 0 };
	struct tfs_commit c = { 0 };
	struct tfs_id parents[1];
	int rc;

	rc = tfs_manifest_serialize(m, &mb);
	if (rc)
		goto out;
	rc = tfs_object_put(s, ds, TFS_OBJ_MANIFEST, TFS_CODEC_ZSTD, 3, mb.data, mb.len,
			    &c.manifest);
	if (rc)
		goto out;
	if (parent) {
		parents[0] = *parent;
		c.parents = parents;
		c.nparents = 1;
	}
	c.time = (int64_t)time(NULL);
	c.rows = m->rows;
	c.message = (char *)(message ? message : "");
	rc = tfs_commit_serialize(&c, &cb);
	if (rc)
		goto out;
	rc = tfs_object_put(s, ds, TFS_OBJ_COMMIT, TFS_CODEC_RAW, 0, cb.data, cb.len, commit_id);
out:
	tfs_buf_free(&mb);
	tfs_buf_free(&cb);
	return rc;
}
