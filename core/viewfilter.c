/* SPDX-License-Identifier: MIT */
/* viewfilter: a view's where= expression: parsed into a tree (comparisons, in-lists, and, or,
 * not) over scalar columns, and evaluated over the version's rows a batch at a time. */
#include "viewfilter.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SET_ERR(...) snprintf(err, err_cap, __VA_ARGS__)

enum node_kind { E_NUM, E_COL, E_CMP, E_IN, E_AND, E_OR, E_NOT };
enum cmp_op { OP_LT, OP_LE, OP_GT, OP_GE, OP_EQ, OP_NE };

struct expr {
	enum node_kind kind;
	enum cmp_op op;
	long double num;    /* E_NUM */
	int col;	    /* E_COL: index into the filter's column list */
	struct expr *a, *b; /* operands */
	long double *set;   /* E_IN */
	size_t nset;
	int negate; /* E_IN: not in */
};

struct parser {
	const char *p;
	char *err;
	size_t err_cap;
	const struct tfs_manifest *m;
	int cols[16]; /* manifest indices of the columns the expression names */
	int ncols;
	int depth; /* nesting of parentheses and `not`: bounded, the parser recurses */
};

#define MAX_NESTING 64

static int nest(struct parser *ps)
{
	if (++ps->depth > MAX_NESTING) {
		snprintf(ps->err, ps->err_cap, "where: nested deeper than %d levels", MAX_NESTING);
		return -1;
	}
	return 0;
}

static void expr_free(struct expr *e)
{
	if (!e)
		return;
	expr_free(e->a);
	expr_free(e->b);
	free(e->set);
	free(e);
}

static void ws(struct parser *ps)
{
	while (isspace((unsigned char)*ps->p))
		ps->p++;
}

/* Is the next token the word w (not a prefix of a longer name)? Consumes it if so. */
static int word(struct parser *ps, const char *w)
{
	size_t n = strlen(w);

	ws(ps);
	if (strncmp(ps->p, w, n) || isalnum((unsigned char)ps->p[n]) || ps->p[n] == '_')
		return 0;
	ps->p += n;
	return 1;
}

static struct expr *new_expr(enum node_kind k)
{
	struct expr *e = calloc(1, sizeof(*e));

	if (e)
		e->kind = k;
	return e;
}

static struct expr *parse_or(struct parser *ps);

static int parse_number(struct parser *ps, long double *out)
{
	char *end;

	ws(ps);
	errno = 0;
	*out = strtold(ps->p, &end);
	if (end == ps->p || errno)
		return -1;
	ps->p = end;
	return 0;
}

static struct expr *parse_primary(struct parser *ps)
{
	struct expr *e;

	ws(ps);
	if (*ps->p == '(') {
		ps->p++;
		if (nest(ps))
			return NULL;
		e = parse_or(ps);
		ps->depth--;
		ws(ps);
		if (!e || *ps->p != ')') {
			if (e)
				snprintf(ps->err, ps->err_cap, "missing ')'");
			expr_free(e);
			return NULL;
		}
		ps->p++;
		return e;
	}
	if (isalpha((unsigned char)*ps->p) || *ps->p == '_') {
		const char *s = ps->p;
		char name[129];
		size_t n;
		int idx = -1;

		while (isalnum((unsigned char)*ps->p) || *ps->p == '_' || *ps->p == '.' ||
		       *ps->p == '-')
			ps->p++;
		n = (size_t)(ps->p - s);
		if (n >= sizeof(name)) {
			snprintf(ps->err, ps->err_cap, "column name too long");
			return NULL;
		}
		memcpy(name, s, n);
		name[n] = 0;
		for (size_t i = 0; i < ps->m->ncols; i++)
			if (!strcmp(ps->m->cols[i].name, name))
				idx = (int)i;
		if (idx < 0) {
			snprintf(ps->err, ps->err_cap, "where: no column '%s'", name);
			return NULL;
		}
		if (ps->m->cols[idx].kind != TFS_COL_FIXED || ps->m->cols[idx].ndim != 0 ||
		    ps->m->cols[idx].dtype.kind == 'c') {
			snprintf(ps->err, ps->err_cap,
				 "where: column '%s' is not a real scalar per row", name);
			return NULL;
		}
		e = new_expr(E_COL);
		if (!e)
			return NULL;
		for (e->col = 0; e->col < ps->ncols && ps->cols[e->col] != idx; e->col++)
			;
		if (e->col == ps->ncols) {
			if (ps->ncols == (int)(sizeof(ps->cols) / sizeof(ps->cols[0]))) {
				snprintf(ps->err, ps->err_cap, "where: too many columns");
				free(e);
				return NULL;
			}
			ps->cols[ps->ncols++] = idx;
		}
		return e;
	}
	e = new_expr(E_NUM);
	if (!e)
		return NULL;
	if (parse_number(ps, &e->num)) {
		snprintf(ps->err, ps->err_cap,
			 "where: expected a number, a column or '(' at '%.20s'", ps->p);
		free(e);
		return NULL;
	}
	return e;
}

static struct expr *parse_cmp(struct parser *ps)
{
	static const struct {
		const char *tok;
		enum cmp_op op;
	} ops[] = { { "<=", OP_LE }, { ">=", OP_GE }, { "==", OP_EQ }, { "!=", OP_NE },
		    { "<", OP_LT },  { ">", OP_GT },  { "=", OP_EQ } };
	struct expr *a = parse_primary(ps), *e;
	int negate = 0;

	if (!a)
		return NULL;
	ws(ps);
	for (size_t i = 0; i < sizeof(ops) / sizeof(ops[0]); i++) {
		size_t n = strlen(ops[i].tok);

		if (strncmp(ps->p, ops[i].tok, n))
			continue;
		ps->p += n;
		e = new_expr(E_CMP);
		if (!e) {
			expr_free(a);
			return NULL;
		}
		e->op = ops[i].op;
		e->a = a;
		e->b = parse_primary(ps);
		if (!e->b) {
			expr_free(e);
			return NULL;
		}
		return e;
	}
	{
		const char *save = ps->p;

		if (word(ps, "not") && word(ps, "in"))
			negate = 1;
		else
			ps->p = save;
	}
	if (negate || word(ps, "in")) {
		e = new_expr(E_IN);
		if (!e) {
			expr_free(a);
			return NULL;
		}
		e->a = a;
		e->negate = negate;
		ws(ps);
		if (*ps->p != '(') {
			snprintf(ps->err, ps->err_cap, "where: expected '(' after in");
			expr_free(e);
			return NULL;
		}
		ps->p++;
		for (;;) {
			long double v, *set;

			if (parse_number(ps, &v)) {
				snprintf(ps->err, ps->err_cap,
					 "where: expected a number in the list");
				expr_free(e);
				return NULL;
			}
			set = realloc(e->set, (e->nset + 1) * sizeof(*set));
			if (!set) {
				expr_free(e);
				return NULL;
			}
			e->set = set;
			e->set[e->nset++] = v;
			ws(ps);
			if (*ps->p == ',') {
				ps->p++;
				continue;
			}
			if (*ps->p == ')') {
				ps->p++;
				break;
			}
			snprintf(ps->err, ps->err_cap, "where: expected ',' or ')' in the list");
			expr_free(e);
			return NULL;
		}
		return e;
	}
	return a;
}

static struct expr *parse_not(struct parser *ps)
{
	if (word(ps, "not")) {
		struct expr *e;

		if (nest(ps))
			return NULL;
		e = new_expr(E_NOT);
		if (!e)
			return NULL;
		e->a = parse_not(ps);
		ps->depth--;
		if (!e->a) {
			free(e);
			return NULL;
		}
		return e;
	}
	return parse_cmp(ps);
}

static struct expr *parse_binary(struct parser *ps, int is_or)
{
	struct expr *a = is_or ? parse_binary(ps, 0) : parse_not(ps);

	while (a && word(ps, is_or ? "or" : "and")) {
		struct expr *e = new_expr(is_or ? E_OR : E_AND);

		if (!e) {
			expr_free(a);
			return NULL;
		}
		e->a = a;
		e->b = is_or ? parse_binary(ps, 0) : parse_not(ps);
		if (!e->b) {
			expr_free(e);
			return NULL;
		}
		a = e;
	}
	return a;
}

static struct expr *parse_or(struct parser *ps)
{
	return parse_binary(ps, 1);
}

/* vals[c] holds the row's value of the c-th column named by the expression. */
static long double eval(const struct expr *e, const long double *vals)
{
	switch (e->kind) {
	case E_NUM:
		return e->num;
	case E_COL:
		return vals[e->col];
	case E_NOT:
		return eval(e->a, vals) == 0;
	case E_AND:
		return eval(e->a, vals) != 0 && eval(e->b, vals) != 0;
	case E_OR:
		return eval(e->a, vals) != 0 || eval(e->b, vals) != 0;
	case E_IN: {
		long double x = eval(e->a, vals);
		int found = 0;

		for (size_t i = 0; i < e->nset && !found; i++)
			found = x == e->set[i];
		return found != e->negate;
	}
	case E_CMP: {
		long double x = eval(e->a, vals), y = eval(e->b, vals);

		switch (e->op) {
		case OP_LT:
			return x < y;
		case OP_LE:
			return x <= y;
		case OP_GT:
			return x > y;
		case OP_GE:
			return x >= y;
		case OP_EQ:
			return x == y;
		case OP_NE:
			return x != y;
		}
	}
	}
	return 0;
}

/* One element of a scalar column as a long double (exact for every integer type). */
static long double element(const struct tfs_dtype *dt, const uint8_t *p)
{
	switch (dt->kind) {
	case 'b':
		return *p != 0;
	case 'i':
		switch (dt->itemsize) {
		case 1:
			return (int8_t)*p;
		case 2: {
			int16_t v;
			memcpy(&v, p, 2);
			return v;
		}
		case 4: {
			int32_t v;
			memcpy(&v, p, 4);
			return v;
		}
		default: {
			int64_t v;
			memcpy(&v, p, 8);
			return v;
		}
		}
	case 'u':
		switch (dt->itemsize) {
		case 1:
			return *p;
		case 2: {
			uint16_t v;
			memcpy(&v, p, 2);
			return v;
		}
		case 4: {
			uint32_t v;
			memcpy(&v, p, 4);
			return v;
		}
		default: {
			uint64_t v;
			memcpy(&v, p, 8);
			return v;
		}
		}
	default:
		switch (dt->itemsize) {
		case 2: {
			/* IEEE half to float, by hand: no _Float16 on every compiler we build with.
			 */
			uint16_t h;
			int exp;
			long double m;

			memcpy(&h, p, 2);
			exp = (h >> 10) & 31;
			m = h & 1023;
			if (exp == 0)
				m = m / 1024.0L * 0x1p-14L;
			else if (exp == 31)
				m = m ? __builtin_nanl("") : __builtin_infl();
			else
				m = (1 + m / 1024.0L) * __builtin_ldexpl(1, exp - 15);
			return h & 0x8000 ? -m : m;
		}
		case 4: {
			float v;
			memcpy(&v, p, 4);
			return v;
		}
		default: {
			double v;
			memcpy(&v, p, 8);
			return v;
		}
		}
	}
}

int tfs_view_filter_rows(struct tfs_version *v, struct tfs_cache *cache, const char *where,
			 uint64_t **rows, uint64_t *n, char *err, size_t err_cap)
{
	const struct tfs_manifest *m = &v->manifest;
	struct parser ps = { .p = where, .err = err, .err_cap = err_cap, .m = m };
	const uint64_t batch = 65536;
	uint8_t *buf[16] = { 0 };
	uint64_t *out = NULL, count = 0;
	struct expr *e;
	int rc = 0;

	err[0] = 0;
	e = parse_or(&ps);
	ws(&ps);
	if (e && *ps.p) {
		SET_ERR("where: unexpected '%.20s'", ps.p);
		rc = -EINVAL;
		goto out;
	}
	if (!e) {
		if (!err[0])
			SET_ERR("out of memory");
		rc = err[0] ? -EINVAL : -ENOMEM;
		goto out;
	}
	out = malloc((m->rows ? m->rows : 1) * sizeof(*out));
	for (int c = 0; c < ps.ncols && out; c++)
		if (!(buf[c] = malloc(batch * m->cols[ps.cols[c]].row_bytes)))
			rc = -ENOMEM;
	if (!out || rc) {
		rc = -ENOMEM;
		goto out;
	}
	for (uint64_t r0 = 0; r0 < m->rows; r0 += batch) {
		uint64_t nr = m->rows - r0 < batch ? m->rows - r0 : batch;
		long double vals[16];

		for (int c = 0; c < ps.ncols; c++) {
			const struct tfs_column *col = &m->cols[ps.cols[c]];
			ssize_t got =
				tfs_version_read(v, cache, (size_t)ps.cols[c], r0 * col->row_bytes,
						 buf[c], (size_t)(nr * col->row_bytes));

			if (got != (ssize_t)(nr * col->row_bytes)) {
				SET_ERR("where: cannot read column %s", col->name);
				rc = got < 0 ? (int)got : -EIO;
				goto out;
			}
		}
		for (uint64_t i = 0; i < nr; i++) {
			for (int c = 0; c < ps.ncols; c++) {
				const struct tfs_column *col = &m->cols[ps.cols[c]];

				vals[c] = element(&col->dtype, buf[c] + i * col->row_bytes);
			}
			if (eval(e, vals) != 0)
				out[count++] = r0 + i;
		}
	}
	*rows = out;
	*n = count;
	out = NULL;
out:
	for (int c = 0; c < 16; c++)
		free(buf[c]);
	free(out);
	expr_free(e);
	return rc;
}
