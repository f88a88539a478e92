/* SPDX-License-Identifier: MIT */
/* query: saved query versions as text objects, their rows beside them, and the head that
 * names the newest. */
#include "query.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "format.h"
#include "verobj.h"
#include "util.h"

#define QUERY_MAGIC "tensorfs-query 1"

void tfs_query_free(struct tfs_query *q)
{
	free(q->name);
	free(q->sql);
	memset(q, 0, sizeof(*q));
}

/* Where a query's rows of id lie. */
static void rows_key(const char *ds, const char *name, const struct tfs_id *id, char *out)
{
	char hex[TFS_ID_HEX];

	tfs_id_hex(id, hex);
	snprintf(out, TFS_KEY_MAX, "%s/queries/%s/rows/%s", ds, name, hex);
}

/* The statement on one line: \\ and newline escaped. */
static int put_escaped(struct tfs_buf *b, const char *s)
{
	int rc = 0;

	for (; !rc && *s; s++)
		rc = *s == '\\'	  ? tfs_buf_append(b, "\\\\", 2)
		     : *s == '\n' ? tfs_buf_append(b, "\\n", 2)
				  : tfs_buf_append(b, s, 1);
	return rc;
}

static char *unescape(const char *s)
{
	char *out = malloc(strlen(s) + 1), *o = out;

	if (!out)
		return NULL;
	for (; *s; s++) {
		if (*s == '\\' && s[1]) {
			s++;
			*o++ = *s == 'n' ? '\n' : *s;
		} else {
			*o++ = *s;
		}
	}
	*o = 0;
	return out;
}

static int parse(const char *text, size_t len, const char *what, struct tfs_query *q)
{
	char *copy = malloc(len + 1), *save = NULL, *line;
	int rc = -EIO, head = 0, ended = 0, have_commit = 0, have_rows = 0;

	memset(q, 0, sizeof(*q));
	if (!copy)
		return -ENOMEM;
	memcpy(copy, text, len);
	copy[len] = 0;
	for (line = strtok_r(copy, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		char hex[TFS_ID_HEX + 1];

		if (ended)
			goto bad;
		if (!head) {
			if (strcmp(line, QUERY_MAGIC))
				goto bad;
			head = 1;
		} else if (!strncmp(line, "name ", 5) && !q->name) {
			if (!tfs_name_valid(line + 5) || !(q->name = strdup(line + 5)))
				goto bad;
		} else if (!strncmp(line, "parent ", 7)) {
			q->has_parent = strcmp(line + 7, "-") != 0;
			if (q->has_parent && tfs_id_parse(line + 7, &q->parent))
				goto bad;
		} else if (sscanf(line, "time %" SCNu64, &q->time) == 1) {
		} else if (!strncmp(line, "commit ", 7)) {
			if (tfs_id_parse(line + 7, &q->commit))
				goto bad;
			have_commit = 1;
		} else if (sscanf(line, "rows %" SCNu64 " %64s", &q->nrows, hex) == 2) {
			if (tfs_id_parse(hex, &q->rows_id))
				goto bad;
			have_rows = 1;
		} else if (!strncmp(line, "sql ", 4) && !q->sql) {
			if (!(q->sql = unescape(line + 4)))
				goto bad;
		} else if (!strcmp(line, "end")) {
			ended = 1;
		} else {
			goto bad;
		}
	}
	if (ended && q->name && q->sql && have_commit && have_rows)
		rc = 0;
bad:
	free(copy);
	if (rc) {
		tfs_err("%s: not a saved query", what);
		tfs_query_free(q);
	}
	return rc;
}

static int text(const struct tfs_query *q, struct tfs_buf *out)
{
	char parent[TFS_ID_HEX], commit[TFS_ID_HEX], rows[TFS_ID_HEX];
	int rc;

	if (q->has_parent)
		tfs_id_hex(&q->parent, parent);
	tfs_id_hex(&q->commit, commit);
	tfs_id_hex(&q->rows_id, rows);
	rc = tfs_buf_printf(out,
			    QUERY_MAGIC "\nname %s\nparent %s\ntime %" PRIu64
					"\ncommit %s\nrows %" PRIu64 " %s\nsql ",
			    q->name, q->has_parent ? parent : "-", q->time, commit, q->nrows, rows);
	return rc ? rc : put_escaped(out, q->sql) ?: tfs_buf_printf(out, "\nend\n");
}

static void prefix_of(const char *ds, const char *name, char *out)
{
	snprintf(out, TFS_KEY_MAX, "%s/queries/%s", ds, name);
}

int tfs_query_load(struct tfs_store *s, const char *ds, const char *name, const struct tfs_id *id,
		   struct tfs_query *out)
{
	char prefix[TFS_KEY_MAX];
	struct tfs_buf b = { 0 };
	int rc;

	if (!tfs_name_valid(name))
		return -ENOENT;
	prefix_of(ds, name, prefix);
	rc = tfs_verobj_load(s, prefix, id, &b);
	if (!rc)
		rc = parse((char *)b.data, b.len, prefix, out);
	if (!rc)
		out->id = *id;
	tfs_buf_free(&b);
	return rc;
}

int tfs_query_head(struct tfs_store *s, const char *ds, const char *name, struct tfs_query *out)
{
	char prefix[TFS_KEY_MAX];
	struct tfs_id id;
	int rc;

	if (!tfs_name_valid(name))
		return -ENOENT;
	prefix_of(ds, name, prefix);
	rc = tfs_verobj_head(s, prefix, &id);
	return rc ? rc : tfs_query_load(s, ds, name, &id, out);
}

int tfs_query_rows(struct tfs_store *s, const char *ds, const struct tfs_query *q, uint64_t **rows)
{
	char key[TFS_KEY_MAX];
	struct tfs_buf b = { 0 };
	struct tfs_id got;
	int rc;

	*rows = NULL;
	rows_key(ds, q->name, &q->rows_id, key);
	rc = tfs_store_get(s, key, &b);
	if (!rc) {
		tfs_id_of(b.data, b.len, &got);
		if (!tfs_id_eq(&got, &q->rows_id) || b.len != q->nrows * sizeof(uint64_t)) {
			tfs_err("%s: damaged", key);
			rc = -EIO;
		}
	}
	if (!rc) {
		*rows = malloc(b.len ? b.len : 1);
		if (*rows)
			memcpy(*rows, b.data, b.len);
		else
			rc = -ENOMEM;
	}
	tfs_buf_free(&b);
	return rc;
}

int tfs_query_save(struct tfs_store *s, const char *ds, struct tfs_query *q, const uint64_t *rows,
		   uint64_t n)
{
	char key[TFS_KEY_MAX], prefix[TFS_KEY_MAX];
	struct tfs_buf t = { 0 };
	struct tfs_id head;
	int rc, create;

	prefix_of(ds, q->name, prefix);
	rc = tfs_verobj_head(s, prefix, &head);
	if (rc && rc != -ENOENT)
		return rc;
	create = rc == -ENOENT;
	q->has_parent = !create;
	q->parent = head;
	q->time = (uint64_t)time(NULL);
	q->nrows = n;
	tfs_id_of(rows, n * sizeof(*rows), &q->rows_id);
	rows_key(ds, q->name, &q->rows_id, key);
	rc = tfs_store_put(s, key, rows, n * sizeof(*rows));
	if (!rc)
		rc = text(q, &t);
	if (!rc)
		rc = tfs_verobj_put(s, prefix, t.data, t.len, create ? NULL : &head, &q->id);
	tfs_buf_free(&t);
	return rc;
}

int tfs_query_remove(struct tfs_store *s, const char *ds, const char *name)
{
	char prefix[TFS_KEY_MAX];
	struct tfs_id id;
	int rc;

	if (!tfs_name_valid(name))
		return -ENOENT;
	prefix_of(ds, name, prefix);
	rc = tfs_verobj_head(s, prefix, &id);
	return rc ? rc : tfs_verobj_remove(s, prefix);
}

int tfs_query_list(struct tfs_store *s, const char *ds, tfs_store_list_fn fn, void *arg)
{
	char dir[TFS_KEY_MAX];

	snprintf(dir, sizeof(dir), "%s/queries", ds);
	return tfs_verobj_list(s, dir, fn, arg);
}

int tfs_query_any(struct tfs_store *s, const char *ds)
{
	char dir[TFS_KEY_MAX];

	snprintf(dir, sizeof(dir), "%s/queries", ds);
	return tfs_verobj_any(s, dir);
}
