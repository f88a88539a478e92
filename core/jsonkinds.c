/* SPDX-License-Identifier: MIT */
/* jsonkinds: what the fields of a JSON Lines file's rows hold: kinds, lines, blocks, pass 1. */
#include "jsonkinds.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jsonalloc.h"
#include "pipeline.h"
#include "spool.h"
#include "util.h"

enum tfs_jkind tfs_jkind_of(const json_t *v)
{
	size_t i;
	const json_t *e;
	int floats = 0;

	if (json_is_integer(v))
		return TFS_JK_INT;
	if (json_is_real(v))
		return TFS_JK_FLOAT;
	if (json_is_boolean(v))
		return TFS_JK_BOOL;
	if (json_is_string(v))
		return TFS_JK_TEXT;
	if (json_is_array(v)) {
		json_array_foreach(v, i, e)
		{
			if (json_is_real(e))
				floats = 1;
			else if (!json_is_integer(e))
				return TFS_JK_JSON;
		}
		return floats ? TFS_JK_LIST_FLOAT : TFS_JK_LIST_INT;
	}
	return TFS_JK_JSON;
}

int tfs_jkind_fits(enum tfs_jkind f, enum tfs_jkind k)
{
	return f == k || (f == TFS_JK_FLOAT && k == TFS_JK_INT) ||
	       (f == TFS_JK_LIST_FLOAT && k == TFS_JK_LIST_INT) || f == TFS_JK_JSON;
}

int tfs_jfield_widen(struct tfs_jfield *f, enum tfs_jkind k)
{
	if (tfs_jkind_fits(f->kind, k))
		return 1;
	if ((f->kind == TFS_JK_INT && k == TFS_JK_FLOAT) ||
	    (f->kind == TFS_JK_LIST_INT && k == TFS_JK_LIST_FLOAT)) {
		f->kind = k;
		return 1;
	}
	return 0;
}

int tfs_jlines_next(struct tfs_jlines *l, const char **line, size_t *len)
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

int tfs_jline_blank(const char *p, size_t n)
{
	while (n && (*p == ' ' || *p == '\t' || *p == '\r'))
		p++, n--;
	return n == 0;
}

json_t *tfs_jline_parse(const char *line, size_t len, char *why, size_t cap)
{
	json_error_t e;
	json_t *v = json_loadb(line, len, JSON_DECODE_ANY | JSON_ALLOW_NUL, &e);

	if (!v)
		snprintf(why, cap, "%s", e.text);
	return v;
}

int tfs_jlines_block(const char **at, const char *end, const char **bp, const char **be)
{
	return tfs_jlines_block_of(at, end, TFS_JLINES_BLOCK, bp, be);
}

int tfs_jlines_block_of(const char **at, const char *end, size_t size, const char **bp,
			const char **be)
{
	const char *e, *nl;

	if (*at >= end)
		return 0;
	e = (size_t)(end - *at) > size ? *at + size : end;
	nl = e < end ? memchr(e, '\n', (size_t)(end - e)) : NULL;
	e = nl ? nl + 1 : end;
	*bp = *at;
	*be = e;
	*at = e;
	return 1;
}

/* --- what rows widen the fields to ---------------------------------------------------------- */

void tfs_jtally_init(struct tfs_jtally *t, const struct tfs_jfield *f, size_t nf)
{
	memcpy(t->f, f, nf * sizeof(*f));
	t->nf = nf;
	t->tok_min = INT64_MAX;
	t->tok_max = INT64_MIN;
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

void tfs_jtally_row(struct tfs_jtally *t, const json_t *o)
{
	for (size_t i = 0; json_is_object(o) && i < t->nf; i++) { /* NULL is not one */
		const json_t *x = json_object_get(o, t->f[i].name);

		if (x)
			tfs_jfield_widen(&t->f[i], tfs_jkind_of(x));
		if (x && t->f[i].tokens)
			token_range(x, &t->tok_min, &t->tok_max);
	}
}

void tfs_jtally_widen(const struct tfs_jtally *t, struct tfs_jfield *f)
{
	for (size_t i = 0; i < t->nf; i++)
		tfs_jfield_widen(&f[i], t->f[i].kind);
}

void tfs_jtally_merge(struct tfs_jtally *t, const struct tfs_jtally *u)
{
	tfs_jtally_widen(u, t->f);
	t->tok_min = u->tok_min < t->tok_min ? u->tok_min : t->tok_min;
	t->tok_max = u->tok_max > t->tok_max ? u->tok_max : t->tok_max;
}

int tfs_jsonl_first(const char *data, size_t len, const char *tokens, struct tfs_jfield *f,
		    size_t *nf, json_t **first, struct tfs_jtally *t, const char **rest)
{
	struct tfs_jlines l = { data, data ? data + len : NULL, 0 }; /* an empty file: NULL */
	const char *line, *key;
	char why[160];
	json_t *v;
	size_t n;

	*first = NULL;
	*nf = 0;
	while (!*first && tfs_jlines_next(&l, &line, &n)) {
		json_t *o;

		if (tfs_jline_blank(line, n) || !(o = tfs_jline_parse(line, n, why, sizeof(why))))
			continue;
		if (!json_is_object(o) || json_object_size(o) == 0 ||
		    json_object_size(o) > TFS_JSONL_MAX_FIELDS) {
			json_decref(o);
			continue;
		}
		*first = o;
		json_object_foreach(o, key, v)
		{
			f[*nf] = (struct tfs_jfield){ .name = key,
						      .kind = tfs_jkind_of(v),
						      .tokens = tokens && !strcmp(key, tokens) };
			(*nf)++;
		}
	}
	if (!*first)
		return -EINVAL;
	tfs_jtally_init(t, f, *nf);
	tfs_jtally_row(t, *first);
	*rest = l.p;
	return 0;
}

/* --- pass 1: blocks counted on the pool ----------------------------------------------------- */

struct scan_block {
	const char *p, *end;
	const struct tfs_jtally *from; /* the fields as the pass began with them */
	struct tfs_jtally t;	       /* what this block's rows widen them to */
};

static int scan_block(void *item)
{
	struct scan_block *b = item;
	struct tfs_jlines l = { b->p, b->end, 0 };
	const char *line;
	char why[160];
	json_t *o;
	size_t n;

	tfs_jtally_init(&b->t, b->from->f, b->from->nf);
	while (tfs_jlines_next(&l, &line, &n)) {
		if (tfs_jline_blank(line, n))
			continue;
		tfs_jsonalloc_begin(); /* the line's values go with it */
		o = tfs_jline_parse(line, n, why, sizeof(why));
		tfs_jtally_row(&b->t, o);
		json_decref(o);
		tfs_jsonalloc_end();
	}
	return 0;
}

/* What pass 1's blocks are used for, in order. */
struct scan {
	struct tfs_jtally *t;
	const uint8_t *done; /* the lines' pages read up to here */
};

static int scan_use(void *arg, void *item)
{
	struct scan *s = arg;
	const struct scan_block *b = item;

	tfs_jtally_merge(s->t, &b->t);
	tfs_spool_map_done(&s->done, (const uint8_t *)b->end);
	return 0;
}

static const struct tfs_pipeline_ops scan_ops = { scan_block, scan_use, NULL }; /* nothing kept */

int tfs_jsonl_scan(struct tfs_workpool *pool, const char *from, const char *end,
		   struct tfs_jtally *t)
{
	/* The blocks start from the kinds t had, a copy of their own: t is widened by their
	 * results as they come in, while later blocks are counted. */
	struct tfs_jtally *t0 = malloc(sizeof(*t0));
	struct scan sc = { t, (const uint8_t *)from };
	struct tfs_pipeline *pipe = NULL;
	int rc;

	if (!t0)
		return -ENOMEM;
	*t0 = *t;
	rc = tfs_pipeline_create(pool, sizeof(struct scan_block),
				 2 * tfs_workpool_threads(pool) + 2, &scan_ops, &sc, &pipe);
	while (!rc) {
		struct scan_block *b = tfs_pipeline_next(pipe, &rc);

		if (!b || !tfs_jlines_block(&from, end, &b->p, &b->end))
			break;
		b->from = t0;
		tfs_pipeline_submit(pipe);
	}
	if (!rc)
		rc = tfs_pipeline_drain(pipe);
	tfs_pipeline_free(pipe);
	free(t0);
	return rc;
}

int tfs_jsonl_settle(struct tfs_jfield *f, size_t nf, const json_t *first,
		     const struct tfs_jtally *t, const char *tokens, unsigned tsize,
		     const char *const *fixed, size_t nfixed)
{
	tfs_jtally_widen(t, f);
	for (size_t i = 0; tokens && i < nf; i++) {
		const int64_t top = tsize == 2 ? UINT16_MAX : UINT32_MAX;

		if (!f[i].tokens)
			continue;
		if (f[i].kind != TFS_JK_LIST_INT) {
			tfs_err("--tokens %s: the field is not a list of integers", tokens);
			return -EINVAL;
		}
		if (t->tok_min < 0 || (t->tok_max >= 0 && t->tok_max > top)) {
			tfs_err("--tokens %s: id %" PRId64 " is not a token id (0 to %" PRId64 ")",
				tokens, t->tok_min < 0 ? t->tok_min : t->tok_max, top);
			return -EINVAL;
		}
		f[i].tsize = tsize ? tsize : t->tok_max <= UINT16_MAX ? 2 : 4;
		tokens = NULL;
	}
	if (tokens) {
		tfs_err("--tokens %s: the first object has no such field", tokens);
		return -EINVAL;
	}
	for (size_t k = 0; k < nfixed; k++) {
		size_t i = 0;

		while (i < nf && strcmp(f[i].name, fixed[k]))
			i++;
		if (i == nf || (f[i].kind != TFS_JK_LIST_INT && f[i].kind != TFS_JK_LIST_FLOAT)) {
			tfs_err("--fixed %s: no field of lists of numbers by that name", fixed[k]);
			return -EINVAL;
		}
		f[i].fixed = 1;
		f[i].len = json_array_size(json_object_get(first, f[i].name));
	}
	return 0;
}
