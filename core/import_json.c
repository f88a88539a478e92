/* SPDX-License-Identifier: MIT */
/* import_json: JSON Lines (jansson), one object a line, each field a column: integers int64,
 * other numbers float64, booleans bool, strings text, lists of numbers ragged (fixed with
 * --fixed COL when every row has one length), anything else its JSON text. The fields are the
 * first object's; a row that lacks one, has another, or has one of another kind is a bad row:
 * skipped and named, or with --strict the end of the import.
 *
 * A field's kind is what every row makes it (a float anywhere makes an integer field float),
 * which no row can be encoded before. The rows are read once on a guess: the kinds of the first
 * object and the megabyte of lines after it. A row that widens a field past the guess ends that
 * reading before its block's rows are added, and the rows are read again with the guess
 * widened; a row past that guess too, and every line is read for the kinds first (jsonkinds.c's
 * pass 1). The chunks the readings that ended wrote no commit reaches (gc takes them). */
#include "import.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include <jansson.h>

#include "jsonalloc.h"
#include "jsonkinds.h"
#include "jsonmedia.h"
#include "pipeline.h"
#include "rowcol.h"
#include "source.h"
#include "spool.h"
#include "workpool.h"

/* What a block's use returns when a row widened a field past the guessed kinds. */
#define WIDENED 1

/* Why row obj does not fit the fields (NULL: it does). */
static const char *bad_row(const json_t *obj, struct tfs_jfield *f, size_t nf, char *why,
			   size_t cap)
{
	if (!json_is_object(obj))
		return "not a JSON object";
	if (json_object_size(obj) > nf) {
		json_t *o = (json_t *)obj; /* jansson's iterators take no const */

		for (void *it = json_object_iter(o); it; it = json_object_iter_next(o, it)) {
			const char *key = json_object_iter_key(it);
			size_t i = 0;

			while (i < nf && strcmp(f[i].name, key))
				i++;
			if (i == nf) {
				snprintf(why, cap, "field '%s' is not one of the first row's", key);
				return why;
			}
		}
	}
	for (size_t i = 0; i < nf; i++) {
		const json_t *v = json_object_get(obj, f[i].name);

		if (!v) {
			snprintf(why, cap, "no field '%s'", f[i].name);
			return why;
		}
		if (!tfs_jkind_fits(f[i].kind, tfs_jkind_of(v))) {
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
static int encode_value(const struct tfs_jfield *f, const json_t *v, struct tfs_buf *out)
{
	union {
		int64_t i;
		double d;
		uint8_t b;
	} x;
	int rc;

	switch (f->kind) {
	case TFS_JK_INT:
		x.i = json_integer_value(v);
		return tfs_buf_append(out, &x.i, 8);
	case TFS_JK_FLOAT:
		x.d = json_number_value(v);
		return tfs_buf_append(out, &x.d, 8);
	case TFS_JK_BOOL:
		x.b = json_is_true(v);
		return tfs_buf_append(out, &x.b, 1);
	case TFS_JK_TEXT:
		return tfs_buf_append(out, json_string_value(v), json_string_length(v));
	case TFS_JK_LIST_INT:
	case TFS_JK_LIST_FLOAT: {
		const size_t n = json_array_size(v);

		if (f->tokens) { /* ids checked to fit (a guess checks each row) */
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
			if (f->kind == TFS_JK_LIST_INT)
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

/* quiet: the row was named already, by a reading that ended on a widened field. */
static void skip(struct tfs_import_result *res, uint64_t lineno, const char *why, int strict,
		 int quiet)
{
	if (!quiet)
		tfs_warn("line %" PRIu64 ": %s%s", lineno, why, strict ? "" : "; skipped");
	if (res->skipped < TFS_IMPORT_SKIPS_KEPT)
		snprintf(res->skips[res->skipped], sizeof(res->skips[0]), "line %" PRIu64 ": %s",
			 lineno, why);
	res->skipped++;
}

/* --- blocks of lines, encoded on the pool ------------------------------------------------- */

/* A row of a block: its line within the block and, bad, why. */
struct brow {
	uint64_t line; /* 1: the block's first line */
	size_t len;    /* the line's bytes */
	int bad;       /* index into the block's reasons, or -1 */
};

/* A block of lines: an item of the pipeline. */
struct block {
	const char *p, *end;
	const struct tfs_jfield *f; /* the fields, their kinds those rows are encoded to */
	size_t nf;
	int guess;			   /* f's kinds are a guess: check each row against it */
	const struct tfs_media_fields *mf; /* what media fields decode with */
	const char *base;		   /* the directory media paths are under */
	struct tfs_jmedia *jm; /* its media files, fetched from a URL's tree since it was made */
	struct tfs_buf media[TFS_JSONL_MAX_FIELDS]; /* a row's decoded media, before it is taken */
	uint64_t lines;				    /* lines in the block */
	/* guess: what the rows widen the fields to, and the first line that widened one past
	 * the guess (0: none) and that field */
	struct tfs_jtally t;
	uint64_t widened;
	size_t widened_field;
	/* each row, each field's values back to back, and the reasons of bad rows */
	struct brow *rows;
	size_t nrows, rows_cap;
	struct tfs_buf vals[TFS_JSONL_MAX_FIELDS];
	size_t *lens; /* nrows x nf value lengths */
	size_t lens_cap;
	char (*why)[160];
	size_t nwhy, why_cap;
	int rc; /* out of memory */
};

static void block_clear(void *item)
{
	struct block *b = item;

	for (size_t i = 0; i < TFS_JSONL_MAX_FIELDS; i++) {
		tfs_buf_free(&b->vals[i]);
		tfs_buf_free(&b->media[i]);
	}
	free(b->rows);
	free(b->lens);
	free(b->why);
	tfs_jmedia_end(b->jm); /* made, never parsed: the import ended first */
}

/* Does what t counted widen a field of f past its kind, or take the --tokens ids past what
 * f's size holds? The field, or -1. */
static long widens(const struct tfs_jtally *t, const struct tfs_jfield *f)
{
	for (size_t i = 0; i < t->nf; i++) {
		const int64_t top = f[i].tsize == 2 ? UINT16_MAX : UINT32_MAX;

		if (t->f[i].kind != f[i].kind || (f[i].tokens && t->tok_max != INT64_MIN &&
						  (t->tok_min < 0 || t->tok_max > top)))
			return (long)i;
	}
	return -1;
}

/* Pass 2 on a block: each row's values encoded as their columns take them, or why it is bad. */
static int parse_block(void *item)
{
	struct block *b = item;
	struct tfs_jlines l = { b->p, b->end, 0 };
	const char *line;
	char why[160];
	size_t n;
	int rc = 0;

	b->nrows = b->nwhy = 0;
	b->widened = 0;
	for (size_t i = 0; i < b->nf; i++)
		b->vals[i].len = 0;
	if (b->guess)
		tfs_jtally_init(&b->t, b->f, b->nf);
	while (!rc && !b->widened && tfs_jlines_next(&l, &line, &n)) {
		struct tfs_jfield *f = (struct tfs_jfield *)b->f;
		json_t *obj;
		const char *bad;
		struct brow *r;
		long w;

		if (tfs_jline_blank(line, n))
			continue;
		tfs_jsonalloc_begin(); /* the line's values go with it */
		obj = tfs_jline_parse(line, n, why, sizeof(why));
		if (b->guess) { /* a row past the guess: the block is not used, nor the rest read */
			tfs_jtally_row(&b->t, obj);
			if ((w = widens(&b->t, f)) >= 0) {
				b->widened = l.lineno;
				b->widened_field = (size_t)w;
				json_decref(obj);
				tfs_jsonalloc_end();
				break;
			}
		}
		bad = obj ? bad_row(obj, f, b->nf, why, sizeof(why)) : why;
		/* A media file missing or not decoding makes the record a bad row. */
		if (!bad && b->mf)
			rc = tfs_jmedia_row(b->jm, l.lineno, obj, f, b->nf, b->base, b->mf,
					    b->media, why, sizeof(why), &bad);
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
	tfs_jmedia_end(b->jm);
	b->jm = NULL;
	b->lines = l.lineno;
	b->rc = rc;
	return 0;
}

/* Where pass 2's rows go, in order. */
struct adder {
	struct tfs_jfield *f;
	size_t nf;
	const char *path;
	int strict;
	uint64_t lineno;  /* lines before the block */
	uint64_t quiet;	  /* the bad rows of lines up to this one were named already */
	uint64_t bytes;	  /* progress: the rows' bytes added */
	uint64_t widened; /* the line that widened a field past the guess (0: none) */
	size_t widened_field;
	struct tfs_jtally seen; /* what that block's lines widened the fields to, up to it */
	struct tfs_import_result *res;
	struct tfs_progress *progress;
	struct tfs_workgroup fields; /* .pool NULL: the fields are added one after another */
	const uint8_t *done;	     /* the lines' pages read up to here */
	/* The file's source (read once: the lines added are given back) and first byte. */
	struct tfs_source *src;
	const uint8_t *data;
};

/* The kind of field f's column: media and lists of any length ragged, text and JSON text,
 * numbers, booleans and --fixed lists fixed. */
static enum tfs_col_kind column_kind(const struct tfs_jfield *f)
{
	if (f->media)
		return TFS_COL_RAGGED;
	if (f->kind == TFS_JK_TEXT || f->kind == TFS_JK_JSON)
		return TFS_COL_TEXT;
	if ((f->kind == TFS_JK_LIST_INT || f->kind == TFS_JK_LIST_FLOAT) && !f->fixed)
		return TFS_COL_RAGGED;
	return TFS_COL_FIXED;
}

/* Field i's values of block b (its good rows') added to the field's column. -EINVAL, with *line
 * the line of a text value that is not valid UTF-8 (0: another cause), when they do not fit. */
static int add_field(const struct adder *a, const struct block *b, size_t i, uint64_t good,
		     uint64_t *line)
{
	const struct tfs_jfield *f = &a->f[i];
	size_t off = 0;
	int rc = 0;

	/* A fixed column's values, a row's each the same size: the block's at once. */
	if (column_kind(f) == TFS_COL_FIXED)
		return tfs_rowcol_add_rows(f->w, b->vals[i].data, good, b->vals[i].len);
	for (size_t k = 0; !rc && k < b->nrows; k++) {
		size_t len;

		if (b->rows[k].bad >= 0)
			continue; /* no lengths: a bad row's may lie past lens */
		len = b->lens[k * b->nf + i];
		if (f->media) { /* rank, shape, then the bytes */
			uint64_t shape[4];
			const uint8_t *data;
			size_t dlen;
			unsigned nd;

			rc = tfs_media_value_parse(b->vals[i].data + off, len, &nd, shape, &data,
						   &dlen);
			if (!rc)
				rc = tfs_rowcol_add(f->w, data, dlen, shape);
		} else {
			const uint64_t shape = len / (f->tokens ? f->tsize : 8);

			rc = tfs_rowcol_add(f->w, b->vals[i].data + off, len,
					    column_kind(f) == TFS_COL_RAGGED ? &shape : NULL);
			if (rc == -EINVAL)
				*line = a->lineno + b->rows[k].line;
		}
		off += len;
	}
	return rc;
}

/* A field's part of a block's use: a task on the pool. */
struct field_add {
	struct tfs_work work;
	const struct adder *a;
	const struct block *b;
	size_t i;
	uint64_t good, line; /* add_field's */
	int rc;
};

static int field_add_run(struct tfs_work *w)
{
	struct field_add *t = (struct field_add *)w;

	t->rc = add_field(t->a, t->b, t->i, t->good, &t->line);
	return t->rc;
}

/* Every field's values of block b added. This is the one step every row goes through in order,
 * so with threads to spare the fields are added side by side on the pool (each column's writer
 * is its own, and b stays until they end); else one after another. The first field in order
 * that failed is the one said. */
static int add_fields(struct adder *a, const struct block *b, uint64_t good)
{
	struct field_add t[TFS_JSONL_MAX_FIELDS];
	const int side_by_side = a->fields.pool && a->nf > 1;

	for (size_t i = 0; i < a->nf; i++)
		t[i] = (struct field_add){
			.work = { .run = field_add_run }, .a = a, .b = b, .i = i, .good = good
		};
	for (size_t i = 0; i < a->nf; i++) {
		if (side_by_side)
			tfs_workgroup_submit(&a->fields, &t[i].work, TFS_WORK_WAITED);
		else if (field_add_run(&t[i].work))
			break;
	}
	if (side_by_side) /* a block's parse, run meanwhile, would hold every row up */
		tfs_workgroup_wait_own(&a->fields);
	for (size_t i = 0; i < a->nf; i++) {
		if (!t[i].rc)
			continue;
		if (t[i].rc == -EINVAL && column_kind(&a->f[i]) == TFS_COL_FIXED)
			tfs_err("%s: field %s: values of another size than its column's", a->path,
				a->f[i].name);
		else if (t[i].rc == -EINVAL && t[i].line)
			tfs_err("%s: line %" PRIu64 ": a text field is not valid UTF-8", a->path,
				t[i].line);
		return t[i].rc;
	}
	return 0;
}

/* A block's rows, in order: bad ones skipped (or the end, strict), the others' values added to
 * their columns. */
static int parse_use(void *arg, void *item)
{
	struct adder *a = arg;
	const struct block *b = item;
	uint64_t good = 0, bytes = 0;
	int rc = b->rc;

	if (!rc && b->widened) { /* before any of its rows is added or named */
		a->widened = a->lineno + b->widened;
		a->widened_field = b->widened_field;
		a->seen = b->t;
		return WIDENED;
	}
	for (size_t k = 0; !rc && k < b->nrows; k++) {
		const struct brow *r = &b->rows[k];
		const uint64_t lineno = a->lineno + r->line;

		if (r->bad < 0) {
			good++;
			bytes += r->len;
			continue;
		}
		skip(a->res, lineno, b->why[r->bad], a->strict, lineno <= a->quiet);
		if (a->strict) {
			tfs_err("--strict: line %" PRIu64 " is bad; nothing was committed", lineno);
			rc = -EINVAL;
		}
	}
	if (!rc)
		rc = add_fields(a, b, good);
	if (!rc) {
		a->res->rows += good;
		a->bytes += bytes;
		tfs_progress_add(a->progress, bytes, good);
	}
	a->lineno += b->lines;
	tfs_spool_map_done(&a->done, (const uint8_t *)b->end);
	tfs_source_release(a->src, (uint64_t)((const uint8_t *)b->end - a->data));
	return rc;
}

static const struct tfs_pipeline_ops parse_ops = { parse_block, parse_use, block_clear };

/* The column field f's values go to: found and checked (appending to a dataset made from JSON
 * Lines before), or added. */
static int add_column(struct tfs_manifest *m, struct tfs_jfield *f, const struct tfs_import_opts *o,
		      const char *path)
{
	static const char *const descr[] = {
		[TFS_JK_INT] = "<i8",  [TFS_JK_FLOAT] = "<f8",	  [TFS_JK_BOOL] = "|b1",
		[TFS_JK_TEXT] = "|u1", [TFS_JK_LIST_INT] = "<i8", [TFS_JK_LIST_FLOAT] = "<f8",
		[TFS_JK_JSON] = "|u1"
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

/* A kind that widens, or was widened to, in a log line. */
static const char *kind_name(enum tfs_jkind k)
{
	return k == TFS_JK_INT	      ? "integers"
	       : k == TFS_JK_FLOAT    ? "floats"
	       : k == TFS_JK_LIST_INT ? "lists of integers"
				      : "lists of floats";
}

/* What a reading that ended on a widened field does next, in a log line. */
static void say_widened(const char *path, const struct adder *a, const struct tfs_jfield *w,
			int reading)
{
	const enum tfs_jkind to = a->seen.f[a->widened_field].kind; /* w's kind after it */
	const char *next = reading ? "every line is read for the columns' kinds, then the rows "
				     "again"
				   : "the rows are read again with it widened";

	if (to != w->kind)
		tfs_info("%s: line %" PRIu64 ": field '%s' holds %s where the lines before it held "
			 "%s: %s",
			 path, a->widened, w->name, kind_name(to), kind_name(w->kind), next);
	else
		tfs_info("%s: line %" PRIu64
			 ": field '%s' holds a token id past 0 to %u, which the "
			 "lines before it kept to: %s",
			 path, a->widened, w->name, w->tsize == 2 ? UINT16_MAX : UINT32_MAX, next);
}

/* An import's reading of the rows: where they come from and go to. */
struct reading {
	struct tfs_store *s;
	const char *ds, *path, *base;
	struct tfs_source *src; /* data's: a URL's object is read as it arrives */
	const char *data;
	size_t len;
	struct tfs_txn *t;
	struct tfs_workpool *pool;
	const struct tfs_import_opts *o;
	const struct tfs_media_fields *media;
	struct tfs_store *tree; /* media's files under a URL (jsonmedia.h) */
	unsigned inflight;	/* GETs at once a block's fetch of them runs */
};

/* Wait until the block tfs_jlines_block takes at `at` is there: TFS_JLINES_BLOCK bytes and the
 * rest of its last line, which is looked for only in bytes already there. */
static int block_wait(const struct reading *j, const char *at)
{
	const uint64_t from = (uint64_t)(at - j->data) + TFS_JLINES_BLOCK;
	uint64_t ready;
	int rc = tfs_source_wait(j->src, from);

	while (!rc && (ready = tfs_source_ready(j->src)) < j->len &&
	       !memchr(j->data + from, '\n', (size_t)(ready - from)))
		rc = tfs_source_wait(j->src, ready + TFS_JLINES_BLOCK);
	return rc;
}

/* The first object of the file, and its fields (tfs_jsonl_first), from the lines there so far:
 * more come until one holds an object. */
static int first_object(const struct reading *j, const char *tokens, struct tfs_jfield *f,
			size_t *nf, json_t **first, struct tfs_jtally *t, const char **rest)
{
	for (uint64_t want = 2 * TFS_JLINES_BLOCK;; want *= 2) {
		const int rc = tfs_source_wait(j->src, want);
		const char *nl;
		size_t lines;

		if (rc)
			return rc;
		if (want >= j->len) /* all of it: its last line needs no newline */
			return tfs_jsonl_first(j->data, j->len, tokens, f, nf, first, t, rest);
		nl = memrchr(j->data, '\n', (size_t)want);
		lines = nl ? (size_t)(nl + 1 - j->data) : 0;
		if (tfs_jsonl_first(j->data, lines, tokens, f, nf, first, t, rest) == 0)
			return 0;
	}
}

/* Pass 2: the columns of f begun in m, every row encoded on the pool a block at a time and
 * added in order by a, the columns finished. guess: f's kinds are a guess; WIDENED, with a's
 * widened line and field, when a row widens past it (its block's rows not added: m and the
 * columns are then the caller's to free, and nothing they wrote is reachable). */
static int read_rows(const struct reading *j, struct tfs_manifest *m, struct tfs_jfield *f,
		     size_t nf, int guess, struct adder *a)
{
	struct tfs_pipeline *pipe = NULL;
	const char *at = j->data;
	int rc = tfs_manifest_copy_extra(&j->t->old, 4 * nf, m);

	for (size_t i = 0; !rc && i < nf; i++)
		rc = add_column(m, &f[i], j->o, j->path);
	for (size_t i = 0; !rc && i < nf; i++) {
		rc = tfs_rowcol_begin(j->s, j->ds, m, f[i].col, &f[i].w);
		if (!rc)
			tfs_rowcol_use_pool(f[i].w, j->pool);
	}
	a->done = a->data = (const uint8_t *)j->data;
	a->src = j->src;
	if (tfs_workpool_threads(j->pool) > 1)
		tfs_workgroup_init(&a->fields, j->pool);
	if (!rc)
		rc = tfs_pipeline_create(j->pool, sizeof(struct block),
					 2 * tfs_workpool_threads(j->pool) + 2, &parse_ops, a,
					 &pipe);
	while (!rc) {
		struct block *b = tfs_pipeline_next(pipe, &rc);

		if (b && at < j->data + j->len)
			rc = block_wait(j, at);
		if (rc || !b ||
		    !tfs_jlines_block_of(&at, j->data + j->len,
					 j->media && j->media->n ? TFS_JMEDIA_BLOCK
								 : TFS_JLINES_BLOCK,
					 &b->p, &b->end))
			break;
		b->f = f;
		b->nf = nf;
		b->guess = guess;
		b->mf = j->media;
		b->base = j->base;
		/* Its files' fetch begins now, while the blocks before it are parsed: of the
		 * files the pipeline's blocks wait to use, 64 MiB at most. */
		rc = tfs_jmedia_begin(j->tree, j->inflight, b->p, b->end, f, nf,
				      (64u << 20) / (2 * tfs_workpool_threads(j->pool) + 2),
				      &b->jm);
		if (rc)
			break;
		tfs_pipeline_submit(pipe);
	}
	if (!rc)
		rc = tfs_pipeline_drain(pipe);
	if (rc < 0 && j->tree)
		tfs_store_cancel(j->tree); /* the import ends: the files in flight are of no use */
	tfs_pipeline_free(pipe);
	if (a->fields.pool)
		tfs_workgroup_destroy(&a->fields);
	for (size_t i = 0; !rc && i < nf; i++)
		rc = tfs_rowcol_finish(f[i].w);
	return rc;
}

/* Forget a reading that ended on a widened field: its columns, its manifest, and what it
 * added to the result and the progress line. */
static void drop_reading(struct tfs_jfield *f, size_t nf, struct tfs_manifest *m,
			 const struct adder *a, struct tfs_import_result *res,
			 struct tfs_progress *progress)
{
	for (size_t i = 0; i < nf; i++) {
		tfs_rowcol_free(f[i].w);
		f[i].w = NULL;
	}
	tfs_manifest_free(m);
	tfs_progress_add(progress, 0 - a->bytes, 0 - res->rows); /* back by what it added */
	memset(res, 0, sizeof(*res));
}

int tfs_import_jsonl(struct tfs_store *s, const char *ds, const char *path,
		     const char *const *fixed, size_t nfixed, const char *tokens,
		     const struct tfs_media_fields *media, int strict,
		     const struct tfs_import_opts *o, struct tfs_import_result *res,
		     struct tfs_id *commit_id)
{
	char base[4096];
	const char *slash = strrchr(path, '/');
	struct tfs_jfield f0[TFS_JSONL_MAX_FIELDS], f[TFS_JSONL_MAX_FIELDS] = { { 0 } };
	struct tfs_jtally t;
	struct tfs_manifest m = { 0 };
	struct tfs_workpool *pool = NULL;
	char tokname[256] = "";
	unsigned tsize = 0;
	json_t *first = NULL;
	const uint8_t *mapped = NULL;
	const char *data = NULL, *rest = NULL, *after = NULL;
	size_t len = 0, nf = 0;
	struct adder a;
	uint64_t named = 0; /* the bad rows up to this line were named */
	struct reading j = { s, ds, path, base, NULL, NULL, 0, NULL, NULL, o, media, NULL, 0 };
	struct tfs_txn txn;
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
	rc = tfs_txn_begin(&txn, s, ds, o);
	if (!rc)
		rc = tfs_import_map_source(path, TFS_SOURCE_ONCE, &j.src, &mapped, &len);
	data = (const char *)mapped;
	j.data = data;
	j.len = len;
	if (!rc)
		rc = tfs_import_pool(o, &pool);
	if (!rc && (rc = first_object(&j, tokens, f0, &nf, &first, &t, &rest)) == -EINVAL)
		tfs_err("%s: no line holds a JSON object with fields", path);
	/* The guess: the kinds of the first object and of the megabyte of lines after it. */
	if (!rc) {
		const char *at = rest, *bp;

		after = rest;
		rc = at < data + len ? block_wait(&j, at) : 0;
		if (!rc && tfs_jlines_block(&at, data + len, &bp, &after))
			rc = tfs_jsonl_scan(pool, bp, after, &t);
	}
	if (!rc) {
		memcpy(f, f0, nf * sizeof(*f));
		rc = tfs_jsonl_settle(f, nf, first, &t, tokens, tsize, fixed, nfixed);
	}
	if (!rc)
		rc = tfs_jmedia_mark(f, nf, media);
	if (!rc)
		rc = tfs_jmedia_tree(base, f, nf, &j.tree, &j.inflight);
	j.t = &txn;
	j.pool = pool;
	/* Past that megabyte the kinds are a guess. A row past it widens the guess, and the rows
	 * are read again; a row past that guess too, and every line is read for the kinds
	 * first. (A field widens once at most: integers to floats, token ids to uint32.) */
	for (int reading = 0; !rc; reading++) {
		a = (struct adder){ .f = f,
				    .nf = nf,
				    .path = path,
				    .strict = strict,
				    .quiet = named,
				    .res = res,
				    .progress = o->progress };
		rc = read_rows(&j, &m, f, nf, reading < 2 && after < data + len, &a);
		if (rc != WIDENED)
			break;
		say_widened(path, &a, &f[a.widened_field], reading);
		/* The bad rows of the blocks added were named: the same rows are bad again. */
		named = a.lineno > named ? a.lineno : named;
		drop_reading(f, nf, &m, &a, res, o->progress);
		tfs_jtally_merge(&t, &a.seen);
		/* A URL's lines added were given back: it is fetched again, read once again for
		 * the rows' second reading; held whole for a third, whose kinds are read from
		 * every line before its rows are. */
		if (!tfs_source_whole(j.src)) {
			const size_t after_at = (size_t)(after - data);

			munmap((void *)data, len);
			data = j.data = NULL;
			rc = tfs_source_again(&j.src, reading ? 0 : TFS_SOURCE_ONCE);
			if (!rc)
				rc = tfs_import_map(j.src, &mapped, &len);
			if (rc)
				break;
			data = j.data = (const char *)mapped;
			after = data + after_at;
		} else if (reading) {
			rc = tfs_source_keep_all(j.src);
			if (rc)
				break;
		}
		rc = reading ? tfs_source_wait(j.src, len) : 0; /* every line, for the kinds */
		if (reading && !rc)
			rc = tfs_jsonl_scan(pool, after, data + len, &t);
		if (!rc) {
			memcpy(f, f0, nf * sizeof(*f));
			rc = tfs_jsonl_settle(f, nf, first, &t, tokens, tsize, fixed, nfixed);
		}
		if (!rc)
			rc = tfs_jmedia_mark(f, nf, media);
	}
	if (!rc)
		rc = tfs_source_verify(j.src);
	if (!rc) {
		m.rows = txn.old.rows + res->rows;
		rc = tfs_import_same_rows(&m, m.rows, path);
	}
	if (!rc)
		rc = tfs_txn_commit(&txn, &m, o->message, commit_id);
	if (pool)
		res->busy_peak = tfs_workpool_busy_peak(pool);
	for (size_t i = 0; i < nf; i++)
		tfs_rowcol_free(f[i].w);
	tfs_workpool_destroy(pool);
	json_decref(first);
	if (data)
		munmap((void *)data, len);
	tfs_source_close(j.src);
	if (j.tree)
		tfs_store_close(j.tree);
	tfs_manifest_free(&m);
	tfs_txn_end(&txn);
	return rc;
}
