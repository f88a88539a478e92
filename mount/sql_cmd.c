/* SPDX-License-Identifier: MIT */
/* sql_cmd: `tensorfs sql URL[@REF] "SELECT ..." [--csv | --json] [--stats]
 * [--near COL=VECTORS.npy [--k K] [--metric cosine|l2|ip] [--per-query]]`: SQL over a version's
 * columns (core/sql.h), printed as an aligned table, CSV or JSON Lines; with --near, the rows
 * of the query ranked by nearness to the vectors (core/knn.h). */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "cli.h"
#include "knn.h"
#include "npy.h"
#include "query.h"
#include "sql.h"
#include "store.h"
#include "util.h"
#include "version.h"

enum fmt { TABLE, CSV, JSONL };

/* A value as text: NULL as "" (table: NULL), a blob as hex (table: <blob N bytes>). */
static int value_text(sqlite3_stmt *st, int i, enum fmt f, struct tfs_buf *out)
{
	const int t = sqlite3_column_type(st, i);
	const unsigned char *p;
	int n, rc = 0;

	out->len = 0;
	switch (t) {
	case SQLITE_NULL:
		return f == TABLE ? tfs_buf_printf(out, "NULL") : 0;
	case SQLITE_BLOB:
		p = sqlite3_column_blob(st, i);
		n = sqlite3_column_bytes(st, i);
		if (f == TABLE)
			return tfs_buf_printf(out, "<blob %d bytes>", n);
		for (int k = 0; !rc && k < n; k++)
			rc = tfs_buf_printf(out, "%02x", p[k]);
		return rc;
	default:
		p = sqlite3_column_text(st, i);
		n = sqlite3_column_bytes(st, i);
		return tfs_buf_append(out, p ? p : (const unsigned char *)"", (size_t)n);
	}
}

static void put_csv(const struct tfs_buf *v)
{
	int quote = 0;

	for (size_t k = 0; k < v->len; k++)
		quote |= v->data[k] == ',' || v->data[k] == '"' || v->data[k] == '\n' ||
			 v->data[k] == '\r';
	if (!quote) {
		fwrite(v->data, 1, v->len, stdout);
		return;
	}
	putchar('"');
	for (size_t k = 0; k < v->len; k++) {
		if (v->data[k] == '"')
			putchar('"');
		putchar(v->data[k]);
	}
	putchar('"');
}

static void put_json_string(const unsigned char *p, size_t n)
{
	putchar('"');
	for (size_t k = 0; k < n; k++) {
		const unsigned char ch = p[k];

		if (ch == '"' || ch == '\\')
			printf("\\%c", ch);
		else if (ch < 0x20)
			printf("\\u%04x", ch);
		else
			putchar(ch);
	}
	putchar('"');
}

/* A float as JSON: the shortest text that reads back as the same double; infinities as
 * +-9e999 (JSON has no infinity; every JSON reader reads that as one, as SQLite's json()
 * writes it), NaN as null. */
static void put_json_double(double x)
{
	char b[40];

	if (isnan(x)) {
		printf("null");
		return;
	}
	if (isinf(x)) {
		printf("%s9e999", x < 0 ? "-" : "");
		return;
	}
	for (int prec = 15; prec <= 17; prec++) {
		snprintf(b, sizeof(b), "%.*g", prec, x);
		if (strtod(b, NULL) == x)
			break;
	}
	printf("%s", b);
}

static void put_json_row(sqlite3_stmt *st, int ncols, struct tfs_buf *v)
{
	putchar('{');
	for (int i = 0; i < ncols; i++) {
		const char *name = sqlite3_column_name(st, i);
		const int t = sqlite3_column_type(st, i);

		if (i)
			putchar(',');
		put_json_string((const unsigned char *)name, strlen(name));
		putchar(':');
		if (t == SQLITE_NULL) {
			printf("null");
		} else if (t == SQLITE_INTEGER) {
			printf("%lld", (long long)sqlite3_column_int64(st, i));
		} else if (t == SQLITE_FLOAT) {
			put_json_double(sqlite3_column_double(st, i));
		} else {
			value_text(st, i, JSONL, v);
			put_json_string(v->data ? v->data : (const unsigned char *)"", v->len);
		}
	}
	printf("}\n");
}

/* The table: every cell kept, then printed with each column as wide as its widest. */
struct table {
	struct tfs_buf cells; /* NUL-separated */
	size_t n;
	size_t *width;
};

static int table_add(struct table *t, const struct tfs_buf *v, int col)
{
	size_t w = 0;

	for (size_t k = 0; k < v->len; k++)
		w += (v->data[k] & 0xc0) != 0x80; /* characters, not bytes */
	if (w > t->width[col])
		t->width[col] = w;
	t->n++;
	return tfs_buf_append(&t->cells, v->data ? v->data : (const uint8_t *)"", v->len)
		       ?: tfs_buf_append(&t->cells, "", 1);
}

static void table_print(const struct table *t, int ncols)
{
	const char *p = (const char *)t->cells.data;

	for (size_t i = 0; i < t->n; i++) {
		const int col = (int)(i % (size_t)ncols);
		size_t w = 0;

		for (const char *q = p; *q; q++)
			w += (*q & 0xc0) != 0x80;
		printf("%s%s", col ? "  " : "", p);
		if (col + 1 < ncols)
			printf("%*s", (int)(t->width[col] - w), "");
		else
			putchar('\n');
		p += strlen(p) + 1;
	}
}

/* --near's vectors: a (D,) or (Q, D) float32 (or float64) .npy. */
static int load_vectors(const char *path, float **out, size_t *nq, size_t *d)
{
	struct tfs_npy_info info;
	char err[256];
	uint64_t n, bytes;
	void *raw = NULL;
	int rc = 0, fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0) {
		tfs_err("--near %s: %s", path, strerror(errno));
		return -errno;
	}
	if (tfs_npy_read_header(fd, &info, err, sizeof(err))) {
		tfs_err("--near %s: %s", path, err);
		close(fd);
		return -EINVAL;
	}
	if ((info.ndim != 1 && info.ndim != 2) || info.fortran_order ||
	    (strcmp(info.dtype.descr, "<f4") && strcmp(info.dtype.descr, "<f8"))) {
		tfs_err("--near %s: expected a (D,) or (Q, D) array of float32 or float64 vectors",
			path);
		close(fd);
		return -EINVAL;
	}
	*nq = info.ndim == 1 ? 1 : (size_t)info.shape[0];
	*d = (size_t)info.shape[info.ndim - 1];
	n = (uint64_t)*nq * *d;
	bytes = n * info.dtype.itemsize;
	raw = malloc(bytes + 1);
	*out = malloc(n * sizeof(float) + 1);
	if (!raw || !*out)
		rc = -ENOMEM;
	if (!rc)
		rc = tfs_pread_full(fd, raw, (size_t)bytes, info.data_offset);
	close(fd);
	if (rc == -EIO)
		tfs_err("--near %s: shorter than its header says", path);
	for (uint64_t i = 0; !rc && i < n; i++) {
		double x;

		if (info.dtype.itemsize == 4) {
			float f;

			memcpy(&f, (uint8_t *)raw + 4 * i, 4);
			x = f;
		} else {
			memcpy(&x, (uint8_t *)raw + 8 * i, 8);
		}
		(*out)[i] = (float)x;
	}
	free(raw);
	if (rc) {
		free(*out);
		*out = NULL;
	}
	return rc;
}

/* --vector NAME=FILE.npy: :NAME bound to the file's (first) vector as a float32 blob. */
static int bind_vector(sqlite3_stmt *st, const char *arg)
{
	const char *eq = strchr(arg, '=');
	char name[130];
	float *vec = NULL;
	size_t nq, d;
	int rc, at;

	if (!eq || eq == arg || (size_t)(eq - arg) > 128) {
		tfs_err("--vector %s: expected NAME=VECTOR.npy", arg);
		return -EINVAL;
	}
	snprintf(name, sizeof(name), ":%.*s", (int)(eq - arg), arg);
	at = sqlite3_bind_parameter_index(st, name);
	if (!at) {
		tfs_err("--vector %s: the query has no parameter %s", arg, name);
		return -EINVAL;
	}
	rc = load_vectors(eq + 1, &vec, &nq, &d);
	if (!rc && sqlite3_bind_blob(st, at, vec, (int)(d * sizeof(float)), SQLITE_TRANSIENT))
		rc = -ENOMEM;
	free(vec);
	return rc;
}

/* The user's SQL, prepared: exactly one statement, and one that reads; *len: its text's length
 * (what follows it is whitespace and comments). A second statement would otherwise go unrun
 * without a word, and one that writes (DROP TABLE t, CREATE ...) would change nothing but this
 * process's in-memory database and print "(0 rows)". */
static int prepare_query(sqlite3 *db, const char *sql, sqlite3_stmt **st, size_t *len)
{
	const char *tail = NULL;
	sqlite3_stmt *more = NULL;
	int rc = -EINVAL;

	if (sqlite3_prepare_v2(db, sql, -1, st, &tail) != SQLITE_OK) {
		tfs_err("sql: %s", sqlite3_errmsg(db));
		goto out;
	}
	if (!*st) {
		tfs_err("sql: no statement to run");
		goto out;
	}
	if (sqlite3_prepare_v2(db, tail, -1, &more, NULL) != SQLITE_OK || more) {
		tail += strspn(tail, " \t\r\n;");
		tfs_err("sql: one statement at a time: \"%.60s%s\" follows the first", tail,
			strlen(tail) > 60 ? "..." : "");
		goto out;
	}
	if (!sqlite3_stmt_readonly(*st)) {
		tfs_err("sql: a statement that reads (SELECT, WITH, VALUES): this one writes");
		goto out;
	}
	*len = (size_t)(tail - sql);
	rc = 0;
out:
	sqlite3_finalize(more);
	if (rc) {
		sqlite3_finalize(*st);
		*st = NULL;
	}
	return rc;
}

/* The user's statement as a subquery: no trailing semicolons. */
static char *as_subquery(const char *sql)
{
	size_t n = strlen(sql);

	while (n &&
	       (sql[n - 1] == ';' || sql[n - 1] == ' ' || sql[n - 1] == '\n' || sql[n - 1] == '\t'))
		n--;
	return strndup(sql, n);
}

/* --near: the rows of the user's statement ranked by nearness to each vector. Runs it once
 * for its rowids, searches them, keeps the hits in temp.knn and leaves *st the statement that
 * prints the hit rows with their query and score, nearest first. */
static int near_statement(sqlite3 *db, struct tfs_store *s, const char *ds, struct tfs_version *v,
			  struct tfs_cache *cache, const char *sql, const char *near, size_t k,
			  enum tfs_knn_metric metric, int per_query, size_t nprobe,
			  sqlite3_stmt **st)
{
	const char *eq = strchr(near, '=');
	char colname[256], err[512], *sub = NULL, *text = NULL;
	float *vec = NULL;
	size_t nq = 0, d = 0, *found = NULL, ncand = 0, cap = 0;
	uint64_t *cand = NULL;
	struct tfs_knn_hit *hits = NULL;
	sqlite3_stmt *ins = NULL;
	int col, rowid_col = -1, rc = 0, step;

	if (!eq || eq == near || (size_t)(eq - near) >= sizeof(colname)) {
		tfs_err("--near %s: expected COLUMN=VECTORS.npy", near);
		return -EINVAL;
	}
	snprintf(colname, sizeof(colname), "%.*s", (int)(eq - near), near);
	col = tfs_version_column(v, colname);
	if (col < 0) {
		tfs_err("--near: no column %s", colname);
		return -EINVAL;
	}
	rc = load_vectors(eq + 1, &vec, &nq, &d);
	if (rc)
		return rc;
	/* Bind :q to the first vector if the statement names it. */
	{
		const int qi = sqlite3_bind_parameter_index(*st, ":q");

		if (qi > 0)
			sqlite3_bind_blob(*st, qi, vec, (int)(d * sizeof(float)), SQLITE_TRANSIENT);
	}
	for (int i = 0; i < sqlite3_column_count(*st); i++)
		if (!strcasecmp(sqlite3_column_name(*st, i), "rowid"))
			rowid_col = i;
	if (rowid_col < 0) {
		tfs_err("--near: the query must select rowid (SELECT rowid, ... FROM t ...)");
		rc = -EINVAL;
		goto out;
	}
	while ((step = sqlite3_step(*st)) == SQLITE_ROW) {
		rc = TFS_GROW(cand, &cap, ncand + 1);
		if (rc)
			goto out;
		cand[ncand++] = (uint64_t)sqlite3_column_int64(*st, rowid_col);
	}
	if (step != SQLITE_DONE) {
		tfs_err("sql: %s", sqlite3_errmsg(db));
		rc = -EIO;
		goto out;
	}
	hits = calloc(nq * k + 1, sizeof(*hits));
	found = calloc(nq + 1, sizeof(*found));
	if (!hits || !found) {
		rc = -ENOMEM;
		goto out;
	}
	{
		int every = ncand == v->manifest.rows;

		for (size_t i = 0; every && i < ncand; i++)
			every = cand[i] == i;
		if (nprobe) { /* the column's IVF index (FAISS), probing nprobe lists */
			rc = tfs_cli_vindex_search(s, ds, v, colname, vec, nq, d, metric, k, nprobe,
						   every ? NULL : cand, ncand, hits, found);
			goto searched;
		}
		rc = tfs_knn_search(v, cache, (size_t)col, vec, nq, d, every ? NULL : cand, ncand,
				    k, metric, hits, found, err, sizeof(err));
	}
	if (rc) {
		tfs_err("--near: %s", rc == -ENOMEM ? "out of memory" : err);
		goto out;
	}
searched:
	if (rc)
		goto out;
	rc = sqlite3_exec(db,
			  "CREATE TEMP TABLE knn(query INTEGER, rank INTEGER, rowid_ INTEGER, "
			  "score REAL)",
			  NULL, NULL, NULL) == SQLITE_OK
		     ? 0
		     : -EIO;
	if (!rc && sqlite3_prepare_v2(db, "INSERT INTO knn VALUES (?, ?, ?, ?)", -1, &ins, NULL) !=
			   SQLITE_OK)
		rc = -EIO;
	for (size_t qi = 0, rank = 0; !rc && qi < nq; qi++)
		for (size_t j = 0; !rc && j < found[qi]; j++) {
			sqlite3_bind_int64(ins, 1, (sqlite3_int64)qi);
			sqlite3_bind_int64(ins, 2, (sqlite3_int64)(per_query ? j : rank++));
			sqlite3_bind_int64(ins, 3, (sqlite3_int64)hits[qi * k + j].row);
			sqlite3_bind_double(ins, 4, hits[qi * k + j].score);
			rc = sqlite3_step(ins) == SQLITE_DONE ? 0 : -EIO;
			sqlite3_reset(ins);
		}
	sub = as_subquery(sql);
	if (!rc && sub) {
		/* Without --per-query: every row once, at its best score of all the queries. The
		 * statement ends its line: a line comment at its end cannot take the ")". */
		const char *fmt =
			per_query ? "SELECT k.query AS query, k.score AS score, r.* FROM knn AS k "
				    "JOIN (%s\n) AS r ON r.rowid = k.rowid_ "
				    "ORDER BY k.query, k.rank"
			: metric == TFS_KNN_L2
				? "SELECT k.query AS query, min(k.score) AS score, r.* FROM knn AS "
				  "k JOIN (%s\n) AS r ON r.rowid = k.rowid_ GROUP BY k.rowid_ "
				  "ORDER BY score, k.rowid_"
				: "SELECT k.query AS query, max(k.score) AS score, r.* FROM knn AS "
				  "k JOIN (%s\n) AS r ON r.rowid = k.rowid_ GROUP BY k.rowid_ "
				  "ORDER BY score DESC, k.rowid_";

		text = sqlite3_mprintf(fmt, sub);
	}
	if (!rc && (!sub || !text))
		rc = -ENOMEM;
	if (!rc) {
		sqlite3_stmt *next = NULL;

		if (sqlite3_prepare_v2(db, text, -1, &next, NULL) != SQLITE_OK) {
			tfs_err("sql: %s", sqlite3_errmsg(db));
			rc = -EINVAL;
		} else {
			const int qi = sqlite3_bind_parameter_index(next, ":q");

			if (qi > 0)
				sqlite3_bind_blob(next, qi, vec, (int)(d * sizeof(float)),
						  SQLITE_TRANSIENT);
			sqlite3_finalize(*st);
			*st = next;
		}
	}
out:
	sqlite3_finalize(ins);
	sqlite3_free(text);
	free(sub);
	free(vec);
	free(cand);
	free(hits);
	free(found);
	return rc;
}

/* query save: the rows the statement selects (its rowid column, in its order), checked, saved
 * as the query's new version against v's commit. Nothing is saved on any error. */
static int save_query(struct tfs_store *s, const char *ds, struct tfs_version *v, sqlite3_stmt *st,
		      sqlite3 *db, const char *name, const char *sql, const char *near, size_t k,
		      enum tfs_knn_metric metric, int per_query)
{
	static const char *const metrics[] = { "ip", "cosine", "l2" };
	struct tfs_query qr = { 0 };
	uint64_t *rows = NULL, n = 0, cap = 0;
	char hex[TFS_ID_HEX], *text = NULL;
	int col = -1, rc = 0, step;

	if (!tfs_name_valid(name)) {
		tfs_err("query save: '%s' is not a valid query name", name);
		return -EINVAL;
	}
	for (int i = 0; i < sqlite3_column_count(st); i++)
		if (!strcasecmp(sqlite3_column_name(st, i), "rowid"))
			col = i;
	if (col < 0) {
		tfs_err("query save: the query must select rowid (SELECT rowid FROM t WHERE ...)");
		return -EINVAL;
	}
	while (!rc && (step = sqlite3_step(st)) == SQLITE_ROW) {
		const sqlite3_int64 r = sqlite3_column_int64(st, col);

		if (sqlite3_column_type(st, col) != SQLITE_INTEGER || r < 0 ||
		    (uint64_t)r >= v->manifest.rows) {
			tfs_err("query save: result row %" PRIu64 " has rowid %s, not a row of the "
				"version (0 to %" PRIu64 "); nothing was saved",
				n, (const char *)sqlite3_column_text(st, col),
				v->manifest.rows ? v->manifest.rows - 1 : 0);
			rc = -EINVAL;
			break;
		}
		rc = TFS_GROW(rows, &cap, n + 1);
		if (rc)
			break;
		rows[n++] = (uint64_t)r;
	}
	if (!rc && step != SQLITE_DONE) {
		tfs_err("sql: %s", sqlite3_errmsg(db));
		rc = -EIO;
	}
	/* The record names how the rows were ranked, with --near. */
	if (!rc && near)
		text = sqlite3_mprintf("%s -- --near %s --k %zu --metric %s%s", sql, near, k,
				       metrics[metric], per_query ? " --per-query" : "");
	qr.name = (char *)name;
	qr.sql = (char *)(text ? text : sql);
	qr.commit = v->commit.id;
	if (!rc)
		rc = tfs_query_save(s, ds, &qr, rows ? rows : (uint64_t *)"", n);
	if (rc == -EAGAIN)
		tfs_err("query %s moved meanwhile: nothing was saved; run again", name);
	if (!rc) {
		char commit[TFS_ID_HEX];

		tfs_id_hex(&qr.id, hex);
		tfs_id_hex(&v->commit.id, commit);
		printf("saved query %s of %s: version %s, %" PRIu64 " row%s at commit %.12s\n",
		       name, ds, hex, n, n == 1 ? "" : "s", commit);
	}
	sqlite3_free(text);
	free(rows);
	return rc;
}

/* URL@REF: the ref after the last '@' of the path's last segment. */
static char *split_ref(const char *arg, const char **ref)
{
	char *url = strdup(arg), *slash, *at;

	*ref = "main";
	if (!url)
		return NULL;
	slash = strrchr(url, '/');
	at = strrchr(slash ? slash : url, '@');
	if (at) {
		*at = 0;
		*ref = at + 1;
	}
	return url;
}

int tfs_cmd_sql(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "csv", no_argument, NULL, 'c' },
		{ "json", no_argument, NULL, 'j' },
		{ "stats", no_argument, NULL, 's' },
		{ "near", required_argument, NULL, 'n' },
		{ "k", required_argument, NULL, 'k' },
		{ "metric", required_argument, NULL, 'm' },
		{ "per-query", no_argument, NULL, 'p' },
		{ "vector", required_argument, NULL, 'v' },
		{ "save", required_argument, NULL, 'S' },
		{ "nprobe", required_argument, NULL, 'P' },
		{ NULL, 0, NULL, 0 },
	};
	const char *save = NULL;
	size_t nprobe = 0;
	const char *vectors[8];
	size_t nvectors = 0;
	const char *near = NULL;
	size_t k = 10;
	enum tfs_knn_metric metric = TFS_KNN_COSINE;
	int per_query = 0;
	enum fmt f = TABLE;
	int opt, stats = 0, rc = 0, ncols, step;
	const char *ref;
	char *url, *ds = NULL, *text = NULL, err[512];
	size_t len = 0;
	struct tfs_store *s = NULL;
	struct tfs_version *v = NULL;
	struct tfs_cache *cache = NULL;
	struct tfs_sql *q = NULL;
	sqlite3_stmt *st = NULL;
	struct tfs_buf val = { 0 };
	struct table t = { 0 };
	uint64_t rows = 0;
	struct tfs_id id;

	tfs_cli_keep_freed_memory();
	while ((opt = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
		if (opt == 'c')
			f = CSV;
		else if (opt == 'j')
			f = JSONL;
		else if (opt == 's')
			stats = 1;
		else if (opt == 'n')
			near = optarg;
		else if (opt == 'k')
			k = (size_t)strtoull(optarg, NULL, 10);
		else if (opt == 'm' && tfs_knn_metric_parse(optarg, &metric)) {
			tfs_err("--metric %s: cosine, l2 or ip", optarg);
			return 2;
		} else if (opt == 'p')
			per_query = 1;
		else if (opt == 'v' && nvectors < 8)
			vectors[nvectors++] = optarg;
		else if (opt == 'S')
			save = optarg;
		else if (opt == 'P')
			nprobe = (size_t)strtoull(optarg, NULL, 10);
		else if (opt != 'm')
			return tfs_cli_usage(2);
	}
	if (!near && (per_query || k != 10 || nprobe)) {
		tfs_err("--k, --per-query and --nprobe go with --near COL=VECTORS.npy");
		return 2;
	}
	if (near && (!k || k > 100000)) {
		tfs_err("--k: 1 to 100000");
		return 2;
	}
	if (argc - optind != 2)
		return tfs_cli_usage(2);
	url = split_ref(argv[optind], &ref);
	if (!url || tfs_cli_open_dataset(url, 0, &s, &ds)) {
		free(url);
		return 1;
	}
	rc = tfs_cli_resolve(s, url, ds, ref, &id);
	if (!rc)
		rc = tfs_version_open(s, ds, &id, &v);
	if (!rc)
		rc = tfs_cache_create(256ull << 20, &cache);
	if (!rc && tfs_sql_open(v, cache, &q, err, sizeof(err))) {
		tfs_err("sql: %s", err);
		rc = -EINVAL;
	}
	if (!rc)
		rc = prepare_query(tfs_sql_db(q), argv[optind + 1], &st, &len);
	if (!rc && !(text = strndup(argv[optind + 1], len)))
		rc = -ENOMEM;
	for (size_t i = 0; !rc && i < nvectors; i++)
		rc = bind_vector(st, vectors[i]);
	if (!rc && near)
		rc = near_statement(tfs_sql_db(q), s, ds, v, cache, text, near, k, metric,
				    per_query, nprobe, &st);
	if (!rc && save) {
		rc = save_query(s, ds, v, st, tfs_sql_db(q), save, text, near, k, metric,
				per_query);
		goto done;
	}
	ncols = st ? sqlite3_column_count(st) : 0;
	if (!rc && f == TABLE) {
		t.width = calloc((size_t)(ncols ? ncols : 1), sizeof(*t.width));
		rc = t.width ? 0 : -ENOMEM;
		for (int i = 0; !rc && i < ncols; i++) {
			val.len = 0;
			rc = tfs_buf_printf(&val, "%s", sqlite3_column_name(st, i))
				     ?: table_add(&t, &val, i);
		}
	} else if (!rc && f == CSV) {
		for (int i = 0; i < ncols; i++) {
			val.len = 0;
			tfs_buf_printf(&val, "%s", sqlite3_column_name(st, i));
			if (i)
				putchar(',');
			put_csv(&val);
		}
		if (ncols)
			putchar('\n');
	}
	while (!rc && (step = sqlite3_step(st)) == SQLITE_ROW) {
		rows++;
		if (f == JSONL) {
			put_json_row(st, ncols, &val);
			continue;
		}
		for (int i = 0; !rc && i < ncols; i++) {
			rc = value_text(st, i, f, &val);
			if (!rc && f == TABLE) {
				rc = table_add(&t, &val, i);
			} else if (!rc) {
				if (i)
					putchar(',');
				put_csv(&val);
			}
		}
		if (f == CSV)
			putchar('\n');
	}
	if (!rc && step != SQLITE_DONE) {
		tfs_err("sql: %s", sqlite3_errmsg(tfs_sql_db(q)));
		rc = -EIO;
	}
	if (!rc && f == TABLE) {
		table_print(&t, ncols);
		printf("(%" PRIu64 " row%s)\n", rows, rows == 1 ? "" : "s");
	}
	if (!rc && stats) {
		struct tfs_sql_stats ss;

		tfs_sql_stats(q, &ss);
		fprintf(stderr,
			"sql: %" PRIu64 " rows scanned by pushed-down filters, %" PRIu64
			" handed to SQLite; store: %" PRIu64 " gets, %" PRIu64 " ranged, %" PRIu64
			" bytes\n",
			ss.filtered, ss.returned, s->count.gets, s->count.ranged_gets,
			s->count.bytes_read);
	}
done:
	sqlite3_finalize(st);
	tfs_sql_close(q);
	tfs_version_put(v);
	tfs_cache_destroy(cache);
	tfs_buf_free(&val);
	tfs_buf_free(&t.cells);
	free(t.width);
	free(text);
	free(ds);
	free(url);
	tfs_store_close(s);
	return rc ? 1 : 0;
}
