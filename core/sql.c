/* SPDX-License-Identifier: MIT */
/* sql: the virtual table `t` over a version (SQLite's xBestIndex/xFilter/xColumn), reading
 * through the cache a chunk pinned per column and cursor. */
#include "sql.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "knn.h"
#include "util.h"

#define MAX_PUSHED 16 /* constraints pushed down at most */

/* What a table column shows. */
enum vkind {
	V_INT,	  /* a scalar integer or boolean column */
	V_REAL,	  /* a scalar float column */
	V_TENSOR, /* a fixed column of more than one value (or complex): its row's bytes */
	V_TEXT,
	V_BYTES,
	V_RAGGED, /* a ragged row's bytes */
	V_SHAPE,  /* NAME_shape: a JSON array */
	V_LEN,	  /* NAME_len: elements (text and bytes: bytes) */
};

struct vcol {
	enum vkind kind;
	size_t col; /* the version's column (the header of kinds other than fixed) */
};

struct tfs_sql {
	sqlite3 *db;
	struct tfs_version *v;
	struct tfs_cache *cache;
	struct vcol *cols;
	size_t ncols;
	struct tfs_sql_stats st;
};

struct vtab {
	sqlite3_vtab base;
	struct tfs_sql *q;
};

struct pin {
	size_t k;
	struct tfs_cache_entry *e;
};

struct cursor {
	sqlite3_vtab_cursor base;
	struct tfs_sql *q;
	uint64_t *rows; /* the rows a pushed filter kept; NULL: [lo, hi) */
	uint64_t n, lo, hi, i;
	struct pin *pins;	   /* per version column: the chunk of fixed rows in hand */
	struct tfs_spans *spans;   /* per version column: offsets of rows of any size */
	unsigned char *spans_init; /* which spans are started */
	struct tfs_buf buf;
};

/* --- reading ------------------------------------------------------------------------------------
 */

static int fixed_row(struct cursor *cu, size_t c, uint64_t r, const uint8_t **p)
{
	const struct tfs_column *col = &cu->q->v->manifest.cols[c];
	const size_t k = tfs_column_chunk_of(col, r);
	struct pin *pn = &cu->pins[c];
	uint64_t off;
	int rc;

	if (!pn->e || pn->k != k) {
		if (pn->e)
			tfs_cache_put(cu->q->cache, pn->e);
		pn->e = NULL;
		rc = tfs_version_chunk_get(cu->q->v, cu->q->cache, c, k, &pn->e);
		if (rc)
			return rc;
		pn->k = k;
	}
	off = (r - tfs_column_chunk_first(col, k)) * col->row_bytes;
	if (off + col->row_bytes > pn->e->len)
		return -EIO;
	*p = pn->e->data + off;
	return 0;
}

/* Row r's byte span in the data part of column h (another kind than fixed). */
static int span(struct cursor *cu, size_t h, uint64_t r, uint64_t *a, uint64_t *b)
{
	if (!cu->spans_init[h]) {
		tfs_spans_init(&cu->spans[h], cu->q->v, cu->q->cache, h);
		cu->spans_init[h] = 1;
	}
	return tfs_spans_get(&cu->spans[h], r, a, b);
}

static double half_to_double(uint16_t h)
{
	const int e = (h >> 10) & 31, m = h & 1023;
	const double s = h >> 15 ? -1.0 : 1.0;

	if (e == 0)
		return s * ldexp(m, -24);
	if (e == 31)
		return m ? NAN : s * INFINITY;
	return s * ldexp(m + 1024, e - 25);
}

/* A scalar's value: an integer (*is_int) or a double. */
static void scalar(const struct tfs_dtype *dt, const uint8_t *p, int *is_int, int64_t *i, double *d)
{
	union {
		int8_t i8;
		int16_t i16;
		int32_t i32;
		int64_t i64;
		uint16_t u16;
		uint32_t u32;
		uint64_t u64;
		float f;
		double g;
	} x;

	memcpy(&x, p, dt->itemsize);
	*is_int = 1;
	switch (dt->kind) {
	case 'b':
		*i = p[0] != 0;
		return;
	case 'i':
		*i = dt->itemsize == 1	 ? x.i8
		     : dt->itemsize == 2 ? x.i16
		     : dt->itemsize == 4 ? x.i32
					 : x.i64;
		return;
	case 'u':
		if (dt->itemsize == 8 && x.u64 > INT64_MAX) {
			*is_int = 0;
			*d = (double)x.u64;
			return;
		}
		*i = dt->itemsize == 1	 ? p[0]
		     : dt->itemsize == 2 ? x.u16
		     : dt->itemsize == 4 ? x.u32
					 : (int64_t)x.u64;
		return;
	default:
		*is_int = 0;
		*d = dt->itemsize == 2 ? half_to_double(x.u16) : dt->itemsize == 4 ? x.f : x.g;
	}
}

/* --- the module ---------------------------------------------------------------------------------
 */

static int append_decl(struct tfs_buf *b, const char *name, const char *suffix, const char *type)
{
	int rc = tfs_buf_printf(b, "%s\"", b->len > 16 ? ", " : "");

	for (const char *p = name; !rc && *p; p++)
		rc = *p == '"' ? tfs_buf_printf(b, "\"\"") : tfs_buf_append(b, p, 1);
	return rc ? rc : tfs_buf_printf(b, "%s\" %s", suffix, type);
}

static int has_column(const struct tfs_manifest *m, const char *name, const char *suffix)
{
	char full[512];

	snprintf(full, sizeof(full), "%s%s", name, suffix);
	for (size_t i = 0; i < m->ncols; i++)
		if (m->cols[i].part == TFS_PART_NONE && !strcmp(m->cols[i].name, full))
			return 1;
	return 0;
}

/* The table's columns and its CREATE TABLE text. */
static int build_schema(struct tfs_sql *q, struct tfs_buf *decl)
{
	const struct tfs_manifest *m = &q->v->manifest;
	int rc = tfs_buf_printf(decl, "CREATE TABLE x(");

	q->cols = calloc(3 * (m->ncols ? m->ncols : 1), sizeof(*q->cols));
	if (!q->cols)
		return -ENOMEM;
	for (size_t i = 0; !rc && i < m->ncols; i++) {
		const struct tfs_column *c = &m->cols[i];
		enum vkind k;
		int tensor;

		if (c->part != TFS_PART_NONE)
			continue;
		tensor = c->kind == TFS_COL_RAGGED ||
			 (c->kind == TFS_COL_FIXED && (c->ndim > 0 || c->dtype.kind == 'c'));
		k = c->kind == TFS_COL_TEXT	? V_TEXT
		    : c->kind == TFS_COL_BYTES	? V_BYTES
		    : c->kind == TFS_COL_RAGGED ? V_RAGGED
		    : tensor			? V_TENSOR
		    : c->dtype.kind == 'f'	? V_REAL
						: V_INT;
		rc = append_decl(decl, c->name, "",
				 k == V_INT    ? "INTEGER"
				 : k == V_REAL ? "REAL"
				 : k == V_TEXT ? "TEXT"
					       : "BLOB");
		q->cols[q->ncols++] = (struct vcol){ k, i };
		if (!rc && tensor && !has_column(m, c->name, "_shape")) {
			rc = append_decl(decl, c->name, "_shape", "TEXT");
			q->cols[q->ncols++] = (struct vcol){ V_SHAPE, i };
		}
		if (!rc && k != V_INT && k != V_REAL && !has_column(m, c->name, "_len")) {
			rc = append_decl(decl, c->name, "_len", "INTEGER");
			q->cols[q->ncols++] = (struct vcol){ V_LEN, i };
		}
	}
	if (!rc && !q->ncols)
		rc = tfs_buf_printf(decl, "\"(no columns)\" INTEGER");
	return rc ? rc : tfs_buf_printf(decl, ")");
}

static int x_connect(sqlite3 *db, void *aux, int argc, const char *const *argv, sqlite3_vtab **out,
		     char **errp)
{
	struct tfs_sql *q = aux;
	struct tfs_buf decl = { 0 };
	struct vtab *t;
	int rc;

	(void)argc, (void)argv;
	if (build_schema(q, &decl)) {
		tfs_buf_free(&decl);
		return SQLITE_NOMEM;
	}
	rc = sqlite3_declare_vtab(db, (const char *)decl.data);
	tfs_buf_free(&decl);
	if (rc != SQLITE_OK) {
		*errp = sqlite3_mprintf("%s", sqlite3_errmsg(db));
		return rc;
	}
	t = sqlite3_malloc(sizeof(*t));
	if (!t)
		return SQLITE_NOMEM;
	memset(t, 0, sizeof(*t));
	t->q = q;
	*out = &t->base;
	return SQLITE_OK;
}

static int x_disconnect(sqlite3_vtab *tab)
{
	sqlite3_free(tab);
	return SQLITE_OK;
}

static int pushable(const struct tfs_sql *q, int col, unsigned char op)
{
	if (op != SQLITE_INDEX_CONSTRAINT_EQ && op != SQLITE_INDEX_CONSTRAINT_GT &&
	    op != SQLITE_INDEX_CONSTRAINT_LE && op != SQLITE_INDEX_CONSTRAINT_LT &&
	    op != SQLITE_INDEX_CONSTRAINT_GE)
		return 0;
	return col < 0 || q->cols[col].kind == V_INT || q->cols[col].kind == V_REAL;
}

/* idxStr: "COL,OP;" per pushed constraint (COL -1: rowid), in argv order. */
static int x_best_index(sqlite3_vtab *tab, sqlite3_index_info *ii)
{
	struct tfs_sql *q = ((struct vtab *)tab)->q;
	const double rows = (double)q->v->manifest.rows + 1;
	double cost = rows;
	struct tfs_buf idx = { 0 };
	int n = 0, eq_used = 0;

	for (int i = 0; i < ii->nConstraint; i++) {
		const struct sqlite3_index_constraint *c = &ii->aConstraint[i];

		if (!c->usable || n == MAX_PUSHED || !pushable(q, c->iColumn, c->op))
			continue;
		if (tfs_buf_printf(&idx, "%d,%d;", c->iColumn, c->op)) {
			tfs_buf_free(&idx);
			return SQLITE_NOMEM;
		}
		ii->aConstraintUsage[i].argvIndex = ++n;
		eq_used |= c->op == SQLITE_INDEX_CONSTRAINT_EQ;
		cost /= c->iColumn < 0 && c->op == SQLITE_INDEX_CONSTRAINT_EQ ? rows : 4;
	}
	ii->idxNum = n;
	if (n) {
		ii->idxStr = sqlite3_mprintf("%s", (const char *)idx.data);
		ii->needToFreeIdxStr = 1;
		if (!ii->idxStr) {
			tfs_buf_free(&idx);
			return SQLITE_NOMEM;
		}
	}
	tfs_buf_free(&idx);
	/* Rows come in rowid order, unless an = constraint may stand for an IN list, whose values
	 * SQLite hands to xFilter one at a time. */
	if (ii->nOrderBy == 1 && ii->aOrderBy[0].iColumn < 0 && !ii->aOrderBy[0].desc && !eq_used)
		ii->orderByConsumed = 1;
	ii->estimatedCost = cost < 1 ? 1 : cost;
	ii->estimatedRows = (sqlite3_int64)(cost < 1 ? 1 : cost);
	return SQLITE_OK;
}

static int x_open(sqlite3_vtab *tab, sqlite3_vtab_cursor **out)
{
	struct tfs_sql *q = ((struct vtab *)tab)->q;
	const size_t n = q->v->manifest.ncols ? q->v->manifest.ncols : 1;
	struct cursor *cu = calloc(1, sizeof(*cu));

	if (!cu)
		return SQLITE_NOMEM;
	cu->q = q;
	cu->pins = calloc(n, sizeof(*cu->pins));
	cu->spans = calloc(n, sizeof(*cu->spans));
	cu->spans_init = calloc(n, 1);
	if (!cu->pins || !cu->spans || !cu->spans_init) {
		free(cu->pins);
		free(cu->spans);
		free(cu->spans_init);
		free(cu);
		return SQLITE_NOMEM;
	}
	*out = &cu->base;
	return SQLITE_OK;
}

static int x_close(sqlite3_vtab_cursor *cur)
{
	struct cursor *cu = (struct cursor *)cur;

	for (size_t i = 0; i < cu->q->v->manifest.ncols; i++) {
		if (cu->pins[i].e)
			tfs_cache_put(cu->q->cache, cu->pins[i].e);
		if (cu->spans_init[i])
			tfs_spans_done(&cu->spans[i]);
	}
	free(cu->pins);
	free(cu->spans);
	free(cu->spans_init);
	free(cu->rows);
	tfs_buf_free(&cu->buf);
	free(cu);
	return SQLITE_OK;
}

/* Whether value v (of column c) satisfies `v OP x` as far as can be told: 1 unless it surely
 * does not (x not a number: 1). */
static int holds(long double v, unsigned char op, sqlite3_value *x)
{
	long double w;

	if (sqlite3_value_type(x) == SQLITE_INTEGER)
		w = (long double)sqlite3_value_int64(x);
	else if (sqlite3_value_type(x) == SQLITE_FLOAT)
		w = (long double)sqlite3_value_double(x);
	else
		return 1;
	switch (op) {
	case SQLITE_INDEX_CONSTRAINT_EQ:
		return v == w;
	case SQLITE_INDEX_CONSTRAINT_GT:
		return v > w;
	case SQLITE_INDEX_CONSTRAINT_GE:
		return v >= w;
	case SQLITE_INDEX_CONSTRAINT_LT:
		return v < w;
	default:
		return v <= w;
	}
}

/* Narrow [lo, hi) by `rowid OP x`. */
static void rowid_bound(unsigned char op, sqlite3_value *x, uint64_t *lo, uint64_t *hi)
{
	long double w, a, b;

	if (sqlite3_value_type(x) == SQLITE_INTEGER)
		w = (long double)sqlite3_value_int64(x);
	else if (sqlite3_value_type(x) == SQLITE_FLOAT)
		w = (long double)sqlite3_value_double(x);
	else
		return;
	if (isnan(w))
		return;
	a = 0;
	b = (long double)*hi;
	switch (op) {
	case SQLITE_INDEX_CONSTRAINT_EQ:
		a = ceill(w), b = floorl(w) + 1;
		break;
	case SQLITE_INDEX_CONSTRAINT_GT:
		a = floorl(w) + 1;
		break;
	case SQLITE_INDEX_CONSTRAINT_GE:
		a = ceill(w);
		break;
	case SQLITE_INDEX_CONSTRAINT_LT:
		b = ceill(w);
		break;
	default:
		b = floorl(w) + 1;
	}
	if (a > (long double)*lo)
		*lo = a >= (long double)*hi ? *hi : (uint64_t)a;
	if (b < (long double)*hi)
		*hi = b <= (long double)*lo ? *lo : (uint64_t)b;
}

static int x_filter(sqlite3_vtab_cursor *cur, int idx_num, const char *idx_str, int argc,
		    sqlite3_value **argv)
{
	struct cursor *cu = (struct cursor *)cur;
	struct tfs_sql *q = cu->q;
	int cols[MAX_PUSHED], ops[MAX_PUSHED], n = 0, nscalar = 0;
	uint64_t cap = 0;
	int rc = 0;

	free(cu->rows);
	cu->rows = NULL;
	cu->lo = 0;
	cu->hi = q->v->manifest.rows;
	cu->i = 0;
	for (const char *p = idx_str; p && *p && n < idx_num && n < argc; n++) {
		if (sscanf(p, "%d,%d;", &cols[n], &ops[n]) != 2)
			break;
		p = strchr(p, ';');
		p = p ? p + 1 : NULL;
		if (cols[n] < 0)
			rowid_bound((unsigned char)ops[n], argv[n], &cu->lo, &cu->hi);
		else
			nscalar++;
	}
	cu->n = cu->hi - cu->lo;
	if (!nscalar) {
		q->st.returned += cu->n;
		return SQLITE_OK;
	}
	/* Scan the constrained columns alone over [lo, hi). */
	cu->n = 0;
	for (uint64_t r = cu->lo; r < cu->hi && !rc; r++) {
		int keep = 1;

		for (int j = 0; j < n && keep && !rc; j++) {
			const struct vcol *vc = cols[j] < 0 ? NULL : &q->cols[cols[j]];
			const uint8_t *p;
			int64_t iv = 0;
			double dv = 0;
			int is_int;

			if (!vc)
				continue;
			rc = fixed_row(cu, vc->col, r, &p);
			if (rc)
				break;
			scalar(&q->v->manifest.cols[vc->col].dtype, p, &is_int, &iv, &dv);
			keep = holds(is_int ? (long double)iv : (long double)dv,
				     (unsigned char)ops[j], argv[j]);
		}
		if (rc || !keep)
			continue;
		rc = TFS_GROW(cu->rows, &cap, cu->n + 1);
		if (rc)
			break;
		cu->rows[cu->n++] = r;
	}
	q->st.filtered += cu->hi - cu->lo;
	q->st.returned += cu->n;
	if (rc) {
		sqlite3_free(cur->pVtab->zErrMsg);
		cur->pVtab->zErrMsg = sqlite3_mprintf("reading the rows: %s", strerror(-rc));
		return rc == -ENOMEM ? SQLITE_NOMEM : SQLITE_IOERR;
	}
	if (!cu->rows) /* none kept: an empty list, not the whole range */
		cu->rows = malloc(sizeof(*cu->rows));
	return cu->rows ? SQLITE_OK : SQLITE_NOMEM;
}

static int x_next(sqlite3_vtab_cursor *cur)
{
	((struct cursor *)cur)->i++;
	return SQLITE_OK;
}

static int x_eof(sqlite3_vtab_cursor *cur)
{
	const struct cursor *cu = (const struct cursor *)cur;

	return cu->i >= cu->n;
}

static uint64_t current(const struct cursor *cu)
{
	return cu->rows ? cu->rows[cu->i] : cu->lo + cu->i;
}

static int x_rowid(sqlite3_vtab_cursor *cur, sqlite3_int64 *out)
{
	*out = (sqlite3_int64)current((const struct cursor *)cur);
	return SQLITE_OK;
}

static int json_shape(struct tfs_buf *b, const uint64_t *shape, unsigned n)
{
	int rc = tfs_buf_printf(b, "[");

	for (unsigned d = 0; !rc && d < n; d++)
		rc = tfs_buf_printf(b, "%s%" PRIu64, d ? "," : "", shape[d]);
	return rc ? rc : tfs_buf_printf(b, "]");
}

static int x_column(sqlite3_vtab_cursor *cur, sqlite3_context *ctx, int i)
{
	struct cursor *cu = (struct cursor *)cur;
	struct tfs_sql *q = cu->q;
	const struct vcol *vc = &q->cols[i];
	const struct tfs_column *c = &q->v->manifest.cols[vc->col];
	const uint64_t r = current(cu);
	const uint8_t *p;
	uint64_t a = 0, b = 0, dims[TFS_MAX_DIMS];
	int64_t iv;
	double dv;
	int is_int, rc = 0;

	cu->buf.len = 0;
	switch (vc->kind) {
	case V_INT:
	case V_REAL:
		rc = fixed_row(cu, vc->col, r, &p);
		if (rc)
			break;
		scalar(&c->dtype, p, &is_int, &iv, &dv);
		if (is_int)
			sqlite3_result_int64(ctx, iv);
		else if (isnan(dv))
			sqlite3_result_null(ctx);
		else
			sqlite3_result_double(ctx, dv);
		return SQLITE_OK;
	case V_TENSOR:
		rc = fixed_row(cu, vc->col, r, &p);
		if (!rc)
			sqlite3_result_blob64(ctx, p, c->row_bytes, SQLITE_TRANSIENT);
		break;
	case V_TEXT:
	case V_BYTES:
	case V_RAGGED:
		rc = span(cu, vc->col, r, &a, &b);
		if (!rc)
			rc = tfs_buf_reserve(&cu->buf, (size_t)(b - a) + 1);
		if (!rc && b > a &&
		    tfs_version_read(q->v, q->cache, c->data, a, cu->buf.data, (size_t)(b - a)) !=
			    (ssize_t)(b - a))
			rc = -EIO;
		if (rc)
			break;
		if (vc->kind == V_TEXT)
			sqlite3_result_text64(ctx, (const char *)cu->buf.data, b - a,
					      SQLITE_TRANSIENT, SQLITE_UTF8);
		else
			sqlite3_result_blob64(ctx, b > a ? cu->buf.data : (const uint8_t *)"",
					      b - a, SQLITE_TRANSIENT);
		break;
	case V_LEN:
		if (c->kind == TFS_COL_FIXED) {
			uint64_t n = 1;

			for (unsigned d = 0; d < c->ndim; d++)
				n *= c->shape[d];
			sqlite3_result_int64(ctx, (sqlite3_int64)n);
			break;
		}
		rc = span(cu, vc->col, r, &a, &b);
		if (!rc)
			sqlite3_result_int64(ctx,
					     (sqlite3_int64)((b - a) / (c->kind == TFS_COL_RAGGED
										? c->dtype.itemsize
										: 1)));
		break;
	case V_SHAPE:
		if (c->kind == TFS_COL_FIXED) {
			rc = json_shape(&cu->buf, c->shape, c->ndim);
		} else if (tfs_version_read(q->v, q->cache, c->shapes, r * c->ndim * 8, dims,
					    c->ndim * 8) != (ssize_t)(c->ndim * 8)) {
			rc = -EIO;
		} else {
			rc = json_shape(&cu->buf, dims, c->ndim);
		}
		if (!rc)
			sqlite3_result_text(ctx, (const char *)cu->buf.data, (int)cu->buf.len,
					    SQLITE_TRANSIENT);
		break;
	}
	if (rc) {
		char msg[256];

		snprintf(msg, sizeof(msg), "column %s, row %" PRIu64 ": %s", c->name, r,
			 rc == -EIO ? "damaged or unreadable (EIO)" : strerror(-rc));
		sqlite3_result_error(ctx, msg, -1);
	}
	return SQLITE_OK;
}

/* distance(a, b[, metric]): float32 vectors as blobs (a tensor column's rows, a bound query),
 * smaller nearer (knn.h); NULL when either is NULL or their lengths differ. */
static void sql_distance(sqlite3_context *ctx, int argc, sqlite3_value **argv)
{
	enum tfs_knn_metric m = TFS_KNN_L2;
	const int na = sqlite3_value_bytes(argv[0]), nb = sqlite3_value_bytes(argv[1]);
	const void *a = sqlite3_value_blob(argv[0]), *b = sqlite3_value_blob(argv[1]);
	float *x, *y;
	double d;

	if (argc == 3 && tfs_knn_metric_parse((const char *)sqlite3_value_text(argv[2]), &m)) {
		sqlite3_result_error(ctx, "distance: the metric is l2, cosine or ip", -1);
		return;
	}
	if (!a || !b || na != nb || na % 4) {
		sqlite3_result_null(ctx);
		return;
	}
	x = malloc((size_t)na);
	y = malloc((size_t)nb);
	if (!x || !y) {
		free(x);
		free(y);
		sqlite3_result_error_nomem(ctx);
		return;
	}
	memcpy(x, a, (size_t)na); /* blobs need not be aligned */
	memcpy(y, b, (size_t)nb);
	d = tfs_knn_distance(x, y, (size_t)na / 4, m);
	free(x);
	free(y);
	if (isnan(d))
		sqlite3_result_null(ctx);
	else
		sqlite3_result_double(ctx, d);
}

static const sqlite3_module module = {
	.iVersion = 0,
	.xCreate = x_connect,
	.xConnect = x_connect,
	.xBestIndex = x_best_index,
	.xDisconnect = x_disconnect,
	.xDestroy = x_disconnect,
	.xOpen = x_open,
	.xClose = x_close,
	.xFilter = x_filter,
	.xNext = x_next,
	.xEof = x_eof,
	.xColumn = x_column,
	.xRowid = x_rowid,
};

int tfs_sql_open(struct tfs_version *v, struct tfs_cache *cache, struct tfs_sql **out, char *err,
		 size_t err_cap)
{
	struct tfs_sql *q = calloc(1, sizeof(*q));
	char *msg = NULL;
	int rc;

	if (!q)
		return -ENOMEM;
	q->v = v;
	q->cache = cache;
	rc = sqlite3_open_v2(":memory:", &q->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, NULL);
	/* The version's columns and nothing else: ATTACH would open (or create) any file. */
	if (rc == SQLITE_OK)
		sqlite3_limit(q->db, SQLITE_LIMIT_ATTACHED, 0);
	if (rc == SQLITE_OK)
		rc = sqlite3_create_module_v2(q->db, "tensorfs", &module, q, NULL);
	if (rc == SQLITE_OK)
		rc = sqlite3_exec(q->db, "CREATE VIRTUAL TABLE temp.t USING tensorfs", NULL, NULL,
				  &msg);
	for (int n = 2; rc == SQLITE_OK && n <= 3; n++)
		rc = sqlite3_create_function(q->db, "distance", n,
					     SQLITE_UTF8 | SQLITE_DETERMINISTIC, NULL, sql_distance,
					     NULL, NULL);
	if (rc != SQLITE_OK) {
		snprintf(err, err_cap, "%s",
			 msg	 ? msg
			 : q->db ? sqlite3_errmsg(q->db)
				 : "no memory");
		sqlite3_free(msg);
		tfs_sql_close(q);
		return -EINVAL;
	}
	*out = q;
	return 0;
}

sqlite3 *tfs_sql_db(struct tfs_sql *q)
{
	return q->db;
}

void tfs_sql_close(struct tfs_sql *q)
{
	if (!q)
		return;
	sqlite3_close(q->db);
	free(q->cols);
	free(q);
}

void tfs_sql_stats(const struct tfs_sql *q, struct tfs_sql_stats *out)
{
	*out = q->st;
}
