/* SPDX-License-Identifier: MIT */
/* sql_cmd: `tensorfs sql URL[@REF] "SELECT ..." [--csv | --json] [--stats]`: SQL over a
 * version's columns (core/sql.h), printed as an aligned table, CSV or JSON Lines. */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
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
			printf("%.17g", sqlite3_column_double(st, i));
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
		{ NULL, 0, NULL, 0 },
	};
	enum fmt f = TABLE;
	int opt, stats = 0, rc = 0, ncols, step;
	const char *ref;
	char *url, *ds = NULL, err[512];
	struct tfs_store *s = NULL;
	struct tfs_version *v = NULL;
	struct tfs_cache *cache = NULL;
	struct tfs_sql *q = NULL;
	sqlite3_stmt *st = NULL;
	struct tfs_buf val = { 0 };
	struct table t = { 0 };
	uint64_t rows = 0;
	struct tfs_id id;

	while ((opt = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
		if (opt == 'c')
			f = CSV;
		else if (opt == 'j')
			f = JSONL;
		else if (opt == 's')
			stats = 1;
		else
			return tfs_cli_usage(2);
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
	if (!rc &&
	    sqlite3_prepare_v2(tfs_sql_db(q), argv[optind + 1], -1, &st, NULL) != SQLITE_OK) {
		tfs_err("sql: %s", sqlite3_errmsg(tfs_sql_db(q)));
		rc = -EINVAL;
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
	sqlite3_finalize(st);
	tfs_sql_close(q);
	tfs_version_put(v);
	tfs_cache_destroy(cache);
	tfs_buf_free(&val);
	tfs_buf_free(&t.cells);
	free(t.width);
	free(ds);
	free(url);
	tfs_store_close(s);
	return rc ? 1 : 0;
}
