/* SPDX-License-Identifier: MIT */
/* import_json: JSON Lines (jansson), one object a line, each field a column: integers int64,
 * other numbers float64, booleans bool, strings text, lists of numbers ragged (fixed with
 * --fixed COL when every row has one length), anything else its JSON text. The fields are the
 * first object's; a row that lacks one, has another, or has one of another kind is a bad row:
 * skipped and named, or with --strict the end of the import. */
#include "import.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include <jansson.h>

#include "jsonalloc.h"
#include "pipeline.h"
#include "rowcol.h"
#include "workpool.h"

#define MAX_FIELDS 64

/* What a field holds, as its column will. */
enum fkind { F_INT, F_FLOAT, F_BOOL, F_TEXT, F_LIST_INT, F_LIST_FLOAT, F_JSON };

struct field {
	const char *name; /* the first object's key (kept alive by it) */
	enum fkind kind;
	int fixed; /* --fixed: a list column of one length */
	/* --tokens: a list of token ids, stored as uint16 when every id fits, else uint32 */
	int tokens;
	unsigned tsize; /* 2 or 4, once the ids are known */
	char media;	/* --media: 'i', 'v' or 'a': a path to a file decoded into the row */
	size_t len;	/* that length (lists), set by the first row */
	size_t col;	/* its column in the manifest */
	struct tfs_rowcol *w;
};

static enum fkind kind_of(const json_t *v)
{
	size_t i;
	const json_t *e;
	int floats = 0;

	if (json_is_integer(v))
		return F_INT;
	if (json_is_real(v))
		return F_FLOAT;
	if (json_is_boolean(v))
		return F_BOOL;
	if (json_is_string(v))
		return F_TEXT;
	if (json_is_array(v)) {
		json_array_foreach(v, i, e)
		{
			if (json_is_real(e))
				floats = 1;
			else if (!json_is_integer(e))
				return F_JSON;
		}
		return floats ? F_LIST_FLOAT : F_LIST_INT;
	}
	return F_JSON;
}

/* May a value of kind k go into a field of kind f? (Integers go where floats go.) */
static int fits(enum fkind f, enum fkind k)
{
	return f == k || (f == F_FLOAT && k == F_INT) || (f == F_LIST_FLOAT && k == F_LIST_INT) ||
	       f == F_JSON;
}

/* Widen a field to take a value of kind k, where a column can: ints to floats. */
static int widen(struct field *f, enum fkind k)
{
	if (fits(f->kind, k))
		return 1;
	if ((f->kind == F_INT && k == F_FLOAT) || (f->kind == F_LIST_INT && k == F_LIST_FLOAT)) {
		f->kind = k;
		return 1;
	}
	return 0;
}

/* The lines of a mapped file, one at a time. */
struct lines {
	const char *p, *end;
	uint64_t lineno;
};

static int next_line(struct lines *l, const char **line, size_t *len)
{
	const char *nl;

	if (l->p >= l->end)
		return 0;
	nl = memchr(l->p, '\n', (size_t)(l->end - l->p));
	*line = l->p;
	*len = (size_t)((nl ? nl : l->end) - l->p);
	l->p = nl ? nl + 1 : l->end;
	l->lineno++;
	return 1;
}

/* Why row obj does not fit the fields (NULL: it does). */
static const char *bad_row(const json_t *obj, struct field *f, size_t nf, char *why, size_t cap)
{
	if (!json_is_object(obj))
		return "not a JSON object";
	if (json_object_size(obj) != nf) {
		snprintf(why, cap, "%zu fields, the first row has %zu", json_object_size(obj), nf);
		return why;
	}
	for (size_t i = 0; i < nf; i++) {
		const json_t *v = json_object_get(obj, f[i].name);

		if (!v) {
			snprintf(why, cap, "no field '%s'", f[i].name);
			return why;
		}
		if (!fits(f[i].kind, kind_of(v))) {
			snprintf(why, cap, "field '%s' holds another kind of value", f[i].name);
			return why;
		}
		if (f[i].fixed && json_array_size(v) != f[i].len) {
			snprintf(why, cap, "field '%s' has %zu values, --fixed wants %zu",
				 f[i].name, json_array_size(v), f[i].len);
			return why;
		}
	}
	return NULL;
}

static int dump_to_buf(const char *p, size_t n, void *out)
{
	return tfs_buf_append(out, p, n) ? -1 : 0;
}

/* Field f's value v of one row, as the bytes its column takes, appended to out. */
static int encode_value(const struct field *f, const json_t *v, struct tfs_buf *out)
{
	union {
		int64_t i;
		double d;
		uint8_t b;
	} x;
	int rc;

	switch (f->kind) {
	case F_INT:
		x.i = json_integer_value(v);
		return tfs_buf_append(out, &x.i, 8);
	case F_FLOAT:
		x.d = json_number_value(v);
		return tfs_buf_append(out, &x.d, 8);
	case F_BOOL:
		x.b = json_is_true(v);
		return tfs_buf_append(out, &x.b, 1);
	case F_TEXT:
		return tfs_buf_append(out, json_string_value(v), json_string_length(v));
	case F_LIST_INT:
	case F_LIST_FLOAT: {
		const size_t n = json_array_size(v);

		if (f->tokens) { /* ids checked to fit by pass 1 */
			rc = tfs_buf_reserve(out, n * f->tsize);
			for (size_t i = 0; !rc && i < n; i++) {
				const uint64_t id =
					(uint64_t)json_integer_value(json_array_get(v, i));
				const uint16_t s16 = (uint16_t)id;
				const uint32_t s32 = (uint32_t)id;

				rc = tfs_buf_append(out,
						    f->tsize == 2 ? (const void *)&s16
								  : (const void *)&s32,
						    f->tsize);
			}
			return rc;
		}
		rc = tfs_buf_reserve(out, n * 8);
		for (size_t i = 0; !rc && i < n; i++) {
			if (f->kind == F_LIST_INT)
				x.i = json_integer_value(json_array_get(v, i));
			else
				x.d = json_number_value(json_array_get(v, i));
			rc = tfs_buf_append(out, &x, 8);
		}
		return rc;
	}
	default:
		/* Its JSON text straight into out: no string of jansson's to free (inside a
		 * jsonalloc scope, jansson's memory is not malloc's). */
		return json_dump_callback(v, dump_to_buf, out, JSON_COMPACT | JSON_ENCODE_ANY)
			       ? -ENOMEM
			       : 0;
	}
}

static json_t *parse(const char *line, size_t len, char *why, size_t cap)
{
	json_error_t e;
	json_t *v = json_loadb(line, len, JSON_DECODE_ANY | JSON_ALLOW_NUL, &e);

	if (!v)
		snprintf(why, cap, "%s", e.text);
	return v;
}

static int is_blank(const char *p, size_t n)
{
	while (n && (*p == ' ' || *p == '\t' || *p == '\r'))
		p++, n--;
	return n == 0;
}

static void skip(struct tfs_import_result *res, uint64_t lineno, const char *why, int strict)
{
	tfs_warn("line %" PRIu64 ": %s%s", lineno, why, strict ? "" : "; skipped");
	if (res->skipped < TFS_IMPORT_SKIPS_KEPT)
		snprintf(res->skips[res->skipped], sizeof(res->skips[0]), "line %" PRIu64 ": %s",
			 lineno, why);
	res->skipped++;
}

/* --- blocks of lines, parsed on the pool --------------------------------------------------- */

#define BLOCK_BYTES (1u << 20) /* input a block: a megabyte, to the end of its last line */

/* A row of a block: its line within the block and, bad, why. */
struct brow {
	uint64_t line; /* 1: the block's first line */
	size_t len;    /* the line's bytes */
	int bad;       /* index into the block's reasons, or -1 */
};

/* A block of lines: an item of the pipeline. */
struct block {
	const char *p, *end;
	const struct field *f; /* the fields as the pass knows them */
	size_t nf;
	const struct tfs_media_fields *mf; /* pass 2: what media fields decode with */
	const char *base;		   /* the directory media paths are under */
	struct tfs_buf media[MAX_FIELDS];  /* pass 2: a row's decoded media, before it is taken */
	uint64_t lines;			   /* lines in the block */
	/* pass 1: the kinds the block's rows widen the fields to, and the range of the --tokens
	 * field's ids */
	enum fkind kind[MAX_FIELDS];
	int64_t tok_min, tok_max;
	/* pass 2: each row, each field's values back to back, and the reasons of bad rows */
	struct brow *rows;
	size_t nrows, rows_cap;
	struct tfs_buf vals[MAX_FIELDS];
	size_t *lens; /* nrows x nf value lengths */
	size_t lens_cap;
	char (*why)[160];
	size_t nwhy, why_cap;
	int rc; /* out of memory */
};

/* The next block of [*at, end): a megabyte, to the end of its last line. */
static int next_block(const char **at, const char *end, const char **bp, const char **be)
{
	const char *e, *nl;

	if (*at >= end)
		return 0;
	e = end - *at > BLOCK_BYTES ? *at + BLOCK_BYTES : end;
	nl = e < end ? memchr(e, '\n', (size_t)(end - e)) : NULL;
	e = nl ? nl + 1 : end;
	*bp = *at;
	*be = e;
	*at = e;
	return 1;
}

/* Widen [*lo, *hi] to the integers of list v. */
static void token_range(const json_t *v, int64_t *lo, int64_t *hi)
{
	size_t i;
	const json_t *e;

	json_array_foreach(v, i, e)
	{
		const int64_t x = json_is_integer(e) ? json_integer_value(e) : 0;

		*lo = x < *lo ? x : *lo;
		*hi = x > *hi ? x : *hi;
	}
}

/* Pass 1 on a block: the kinds its rows widen the fields to. */
static int scan_block(void *item)
{
	struct block *b = item;
	struct lines l = { b->p, b->end, 0 };
	struct field f[MAX_FIELDS];
	const char *line;
	char why[160];
	size_t n;

	memcpy(f, b->f, b->nf * sizeof(*f));
	b->tok_min = INT64_MAX;
	b->tok_max = INT64_MIN;
	while (next_line(&l, &line, &n)) {
		json_t *o;

		if (is_blank(line, n))
			continue;
		tfs_jsonalloc_begin(); /* the line's values go with it */
		o = parse(line, n, why, sizeof(why));
		for (size_t i = 0; json_is_object(o) && i < b->nf; i++) { /* NULL is not one */
			const json_t *x = json_object_get(o, f[i].name);

			if (x)
				widen(&f[i], kind_of(x));
			if (x && f[i].tokens)
				token_range(x, &b->tok_min, &b->tok_max);
		}
		json_decref(o);
		tfs_jsonalloc_end();
	}
	for (size_t i = 0; i < b->nf; i++)
		b->kind[i] = f[i].kind;
	return 0;
}

/* Pass 1's result: the fields, and the --tokens field's id range. */
struct scanned {
	struct field *f;
	int64_t tok_min, tok_max;
};

static int scan_use(void *arg, void *item)
{
	struct scanned *sc = arg;
	const struct block *b = item;

	for (size_t i = 0; i < b->nf; i++)
		widen(&sc->f[i], b->kind[i]);
	sc->tok_min = b->tok_min < sc->tok_min ? b->tok_min : sc->tok_min;
	sc->tok_max = b->tok_max > sc->tok_max ? b->tok_max : sc->tok_max;
	return 0;
}

static void block_clear(void *item)
{
	struct block *b = item;

	for (size_t i = 0; i < MAX_FIELDS; i++) {
		tfs_buf_free(&b->vals[i]);
		tfs_buf_free(&b->media[i]);
	}
	free(b->rows);
	free(b->lens);
	free(b->why);
}

static const struct tfs_pipeline_ops scan_ops = { scan_block, scan_use, block_clear };

/* Pass 1: the fields (from the first object) and their kinds (widened by the later rows, a
 * block at a time on the pool). */
static int scan(struct tfs_workpool *pool, const char *data, size_t len, struct field *f,
		size_t *nf, json_t **first, const char *const *fixed, size_t nfixed,
		const char *tokens, unsigned tsize)
{
	struct scanned sc = { f, INT64_MAX, INT64_MIN };
	struct field f0[MAX_FIELDS];
	struct lines l = { data, data ? data + len : NULL, 0 }; /* an empty file: NULL */
	struct tfs_pipeline *pipe = NULL;
	const char *line, *key, *at;
	size_t n;
	json_t *v;
	char why[160];
	int rc;

	*first = NULL;
	while (!*first && next_line(&l, &line, &n)) {
		json_t *o;

		if (is_blank(line, n) || !(o = parse(line, n, why, sizeof(why))))
			continue;
		if (!json_is_object(o) || json_object_size(o) == 0 ||
		    json_object_size(o) > MAX_FIELDS) {
			json_decref(o);
			continue;
		}
		*first = o;
		*nf = 0;
		json_object_foreach(o, key, v)
		{
			f[*nf] = (struct field){ .name = key,
						 .kind = kind_of(v),
						 .tokens = tokens && !strcmp(key, tokens) };
			if (f[*nf].tokens)
				token_range(v, &sc.tok_min, &sc.tok_max);
			(*nf)++;
		}
	}
	if (!*first)
		return -EINVAL;
	/* The blocks start from the first object's kinds, a copy of their own: f is widened by
	 * their results as they come in, while later blocks are scanned. */
	memcpy(f0, f, *nf * sizeof(*f));
	rc = tfs_pipeline_create(pool, sizeof(struct block), 2 * tfs_workpool_threads(pool) + 2,
				 &scan_ops, &sc, &pipe);
	at = l.p;
	while (!rc) {
		struct block *b = tfs_pipeline_next(pipe, &rc);

		if (!b || !next_block(&at, l.end, &b->p, &b->end))
			break;
		b->f = f0;
		b->nf = *nf;
		tfs_pipeline_submit(pipe);
	}
	if (!rc)
		rc = tfs_pipeline_drain(pipe);
	tfs_pipeline_free(pipe);
	if (rc)
		return rc;
	for (size_t i = 0; tokens && i < *nf; i++) {
		const int64_t top = tsize == 2 ? UINT16_MAX : UINT32_MAX;

		if (!f[i].tokens)
			continue;
		if (f[i].kind != F_LIST_INT) {
			tfs_err("--tokens %s: the field is not a list of integers", tokens);
			return -EINVAL;
		}
		if (sc.tok_min < 0 || (sc.tok_max >= 0 && sc.tok_max > top)) {
			tfs_err("--tokens %s: id %" PRId64 " is not a token id (0 to %" PRId64 ")",
				tokens, sc.tok_min < 0 ? sc.tok_min : sc.tok_max, top);
			return -EINVAL;
		}
		f[i].tsize = tsize ? tsize : sc.tok_max <= UINT16_MAX ? 2 : 4;
		tokens = NULL;
	}
	if (tokens) {
		tfs_err("--tokens %s: the first object has no such field", tokens);
		return -EINVAL;
	}
	for (size_t k = 0; k < nfixed; k++) {
		size_t i = 0;

		while (i < *nf && strcmp(f[i].name, fixed[k]))
			i++;
		if (i == *nf || (f[i].kind != F_LIST_INT && f[i].kind != F_LIST_FLOAT)) {
			tfs_err("--fixed %s: no field of lists of numbers by that name", fixed[k]);
			return -EINVAL;
		}
		f[i].fixed = 1;
		f[i].len = json_array_size(json_object_get(*first, f[i].name));
	}
	return 0;
}

/* --media FIELD=KIND: fields of paths to decode (text fields of the first object). */
static int mark_media(struct field *f, size_t nf, const struct tfs_media_fields *media)
{
	for (size_t k = 0; media && k < media->n; k++) {
		size_t i = 0;

		while (i < nf && strcmp(f[i].name, media->name[k]))
			i++;
		if (i == nf || f[i].kind != F_TEXT) {
			tfs_err("--media %s: no text field of that name (a path a record)",
				media->name[k]);
			return -EINVAL;
		}
		f[i].media = media->kind[k];
	}
	return 0;
}

/* Pass 2 on a block: each row's values encoded as their columns take them, or why it is bad. */
static int parse_block(void *item)
{
	struct block *b = item;
	struct lines l = { b->p, b->end, 0 };
	const char *line;
	char why[160];
	size_t n;
	int rc = 0;

	b->nrows = b->nwhy = 0;
	for (size_t i = 0; i < b->nf; i++)
		b->vals[i].len = 0;
	while (!rc && next_line(&l, &line, &n)) {
		struct field *f = (struct field *)b->f;
		json_t *obj;
		const char *bad;
		struct brow *r;

		if (is_blank(line, n))
			continue;
		tfs_jsonalloc_begin(); /* the line's values go with it */
		obj = parse(line, n, why, sizeof(why));
		bad = obj ? bad_row(obj, f, b->nf, why, sizeof(why)) : why;
		/* A media file that does not decode makes the record a bad row. */
		for (size_t i = 0; !bad && i < b->nf; i++) {
			if (!f[i].media)
				continue;
			b->media[i].len = 0;
			rc = tfs_media_value(b->base,
					     json_string_value(json_object_get(obj, f[i].name)),
					     f[i].media, b->mf, &b->media[i], why, sizeof(why));
			if (rc == -ENOMEM || rc == -ELIBACC)
				break; /* not the record's fault: the import ends */
			bad = rc ? why : NULL;
			rc = 0;
		}
		if (!rc)
			rc = TFS_GROW(b->rows, &b->rows_cap, b->nrows + 1);
		if (!rc && bad)
			rc = TFS_GROW(b->why, &b->why_cap, b->nwhy + 1);
		if (!rc && !bad)
			rc = TFS_GROW(b->lens, &b->lens_cap, (b->nrows + 1) * b->nf);
		if (!rc) {
			r = &b->rows[b->nrows++];
			*r = (struct brow){ .line = l.lineno, .len = n, .bad = -1 };
			if (bad) {
				snprintf(b->why[b->nwhy], sizeof(b->why[0]), "%s", bad);
				r->bad = (int)b->nwhy++;
			}
		}
		for (size_t i = 0; !rc && !bad && i < b->nf; i++) {
			const size_t before = b->vals[i].len;

			rc = f[i].media ? tfs_buf_append(&b->vals[i], b->media[i].data,
							 b->media[i].len)
					: encode_value(&f[i], json_object_get(obj, f[i].name),
						       &b->vals[i]);
			b->lens[(b->nrows - 1) * b->nf + i] = b->vals[i].len - before;
		}
		json_decref(obj);
		tfs_jsonalloc_end();
	}
	b->lines = l.lineno;
	b->rc = rc;
	return 0;
}

/* Where pass 2's rows go, in order. */
struct adder {
	struct field *f;
	size_t nf;
	const char *path;
	int strict;
	uint64_t lineno; /* lines before the block */
	struct tfs_import_result *res;
	struct tfs_progress *progress;
};

/* The kind of field f's column: media and lists of any length ragged, text and JSON text,
 * numbers, booleans and --fixed lists fixed. */
static enum tfs_col_kind column_kind(const struct field *f)
{
	if (f->media)
		return TFS_COL_RAGGED;
	if (f->kind == F_TEXT || f->kind == F_JSON)
		return TFS_COL_TEXT;
	if ((f->kind == F_LIST_INT || f->kind == F_LIST_FLOAT) && !f->fixed)
		return TFS_COL_RAGGED;
	return TFS_COL_FIXED;
}

/* A block's rows, in order: bad ones skipped (or the end, strict), the others' values added to
 * their columns; a fixed column's all at once (this thread is the one every row goes through). */
static int parse_use(void *arg, void *item)
{
	struct adder *a = arg;
	const struct block *b = item;
	uint64_t good = 0, bytes = 0;
	int rc = b->rc;

	for (size_t k = 0; !rc && k < b->nrows; k++) {
		const struct brow *r = &b->rows[k];
		const uint64_t lineno = a->lineno + r->line;

		if (r->bad < 0) {
			good++;
			bytes += r->len;
			continue;
		}
		skip(a->res, lineno, b->why[r->bad], a->strict);
		if (a->strict) {
			tfs_err("--strict: line %" PRIu64 " is bad; nothing was committed", lineno);
			rc = -EINVAL;
		}
	}
	for (size_t i = 0; !rc && i < a->nf; i++) {
		size_t off = 0;

		/* A fixed column's values, a row's each the same size: the block's at once. */
		if (column_kind(&a->f[i]) == TFS_COL_FIXED) {
			rc = tfs_rowcol_add_rows(a->f[i].w, b->vals[i].data, good, b->vals[i].len);
			if (rc == -EINVAL)
				tfs_err("%s: field %s: values of another size than its column's",
					a->path, a->f[i].name);
			continue;
		}
		for (size_t k = 0; !rc && k < b->nrows; k++) {
			size_t len;

			if (b->rows[k].bad >= 0)
				continue; /* no lengths: a bad row's may lie past lens */
			len = b->lens[k * b->nf + i];
			if (a->f[i].media) { /* rank, shape, then the bytes */
				uint64_t shape[4];
				const uint8_t *data;
				size_t dlen;
				unsigned nd;

				rc = tfs_media_value_parse(b->vals[i].data + off, len, &nd, shape,
							   &data, &dlen);
				if (!rc)
					rc = tfs_rowcol_add(a->f[i].w, data, dlen, shape);
			} else {
				const uint64_t shape = len / (a->f[i].tokens ? a->f[i].tsize : 8);
				const int ragged = column_kind(&a->f[i]) == TFS_COL_RAGGED;

				rc = tfs_rowcol_add(a->f[i].w, b->vals[i].data + off, len,
						    ragged ? &shape : NULL);
				if (rc == -EINVAL)
					tfs_err("%s: line %" PRIu64
						": a text field is not valid UTF-8",
						a->path, a->lineno + b->rows[k].line);
			}
			off += len;
		}
	}
	if (!rc) {
		a->res->rows += good;
		tfs_progress_add(a->progress, bytes, good);
	}
	a->lineno += b->lines;
	return rc;
}

static const struct tfs_pipeline_ops parse_ops = { parse_block, parse_use, block_clear };

/* The column field f's values go to: found and checked (appending to a dataset made from JSON
 * Lines before), or added. */
static int add_column(struct tfs_manifest *m, struct field *f, const struct tfs_import_opts *o,
		      const char *path)
{
	static const char *const descr[] = {
		[F_INT] = "<i8",      [F_FLOAT] = "<f8",      [F_BOOL] = "|b1", [F_TEXT] = "|u1",
		[F_LIST_INT] = "<i8", [F_LIST_FLOAT] = "<f8", [F_JSON] = "|u1"
	};
	const enum tfs_col_kind kind = column_kind(f);
	const uint64_t shape = f->len;
	struct tfs_dtype dt;
	char err[128];
	int big;

	if (!tfs_name_valid(f->name)) {
		tfs_err("field '%s' is not a valid column name", f->name);
		return -EINVAL;
	}
	if (f->media) {
		tfs_dtype_parse(f->media == 'a' ? "<f4" : "|u1", &dt, &big, err, sizeof(err));
		return tfs_import_column(m, f->name, kind, &dt,
					 f->media == 'i'   ? 3
					 : f->media == 'v' ? 4
							   : 2,
					 NULL, o, path, &f->col);
	}
	tfs_dtype_parse(f->tokens ? (f->tsize == 2 ? "<u2" : "<u4") : descr[f->kind], &dt, &big,
			err, sizeof(err));
	return tfs_import_column(m, f->name, kind, &dt, kind == TFS_COL_RAGGED || f->fixed ? 1 : 0,
				 f->fixed ? &shape : NULL, o, path, &f->col);
}

int tfs_import_jsonl(struct tfs_store *s, const char *ds, const char *path,
		     const char *const *fixed, size_t nfixed, const char *tokens,
		     const struct tfs_media_fields *media, int strict,
		     const struct tfs_import_opts *o, struct tfs_import_result *res,
		     struct tfs_id *commit_id)
{
	char base[4096];
	const char *slash = strrchr(path, '/');
	struct field f[MAX_FIELDS];
	struct tfs_manifest m = { 0 };
	struct tfs_workpool *pool = NULL;
	struct tfs_pipeline *pipe = NULL;
	char tokname[256] = "";
	unsigned tsize = 0;
	json_t *first = NULL;
	const uint8_t *mapped = NULL;
	const char *data = NULL, *at;
	size_t len = 0, nf = 0;
	struct tfs_txn t;
	int rc;

	memset(res, 0, sizeof(*res));
	/* Media paths are under the JSON Lines file's directory. */
	snprintf(base, sizeof(base), "%.*s", slash ? (int)(slash - path) : 1, slash ? path : ".");
	/* FIELD or FIELD:uint16 / FIELD:uint32 (a dtype every part of a session agrees on). */
	if (tokens) {
		const char *colon = strchr(tokens, ':');

		snprintf(tokname, sizeof(tokname), "%.*s",
			 (int)(colon ? (size_t)(colon - tokens) : strlen(tokens)), tokens);
		if (colon && strcmp(colon + 1, "uint16") && strcmp(colon + 1, "uint32")) {
			tfs_err("--tokens %s: the dtype is uint16 or uint32", tokens);
			return -EINVAL;
		}
		tsize = !colon ? 0 : !strcmp(colon + 1, "uint16") ? 2 : 4;
		tokens = tokname;
	}
	tfs_jsonalloc_install(); /* before the pool's threads parse */
	rc = tfs_txn_begin(&t, s, ds, o);
	if (!rc)
		rc = tfs_import_map_file(path, &mapped, &len);
	data = (const char *)mapped;
	if (!rc)
		rc = tfs_import_pool(o, &pool);
	if (!rc &&
	    (rc = scan(pool, data, len, f, &nf, &first, fixed, nfixed, tokens, tsize)) == -EINVAL &&
	    !first)
		tfs_err("%s: no line holds a JSON object with fields", path);
	if (!rc)
		rc = mark_media(f, nf, media);
	if (!rc)
		rc = tfs_manifest_copy_extra(&t.old, 4 * nf, &m);
	for (size_t i = 0; !rc && i < nf; i++)
		rc = add_column(&m, &f[i], o, path);
	for (size_t i = 0; !rc && i < nf; i++) {
		rc = tfs_rowcol_begin(s, ds, &m, f[i].col, &f[i].w);
		if (!rc)
			tfs_rowcol_use_pool(f[i].w, pool);
	}
	/* Pass 2: blocks parsed on the pool, their rows added in order. */
	if (!rc) {
		struct adder a = { f, nf, path, strict, 0, res, o->progress };

		rc = tfs_pipeline_create(pool, sizeof(struct block),
					 2 * tfs_workpool_threads(pool) + 2, &parse_ops, &a, &pipe);
		at = data;
		while (!rc) {
			struct block *b = tfs_pipeline_next(pipe, &rc);

			if (!b || !next_block(&at, data + len, &b->p, &b->end))
				break;
			b->f = f;
			b->mf = media;
			b->base = base;
			b->nf = nf;
			tfs_pipeline_submit(pipe);
		}
		if (!rc)
			rc = tfs_pipeline_drain(pipe);
		tfs_pipeline_free(pipe);
	}
	for (size_t i = 0; !rc && i < nf; i++)
		rc = tfs_rowcol_finish(f[i].w);
	if (!rc) {
		m.rows = t.old.rows + res->rows;
		rc = tfs_import_same_rows(&m, m.rows, path);
	}
	if (!rc)
		rc = tfs_txn_commit(&t, &m, o->message, commit_id);
	if (pool)
		res->busy_peak = tfs_workpool_busy_peak(pool);
	for (size_t i = 0; i < nf; i++)
		tfs_rowcol_free(f[i].w);
	tfs_workpool_destroy(pool);
	json_decref(first);
	if (data)
		munmap((void *)data, len);
	tfs_manifest_free(&m);
	tfs_txn_end(&t);
	return rc;
}
