/* SPDX-License-Identifier: MIT */
/* query: saved queries of a dataset, as versioned objects: a query's text, the commit it was
 * evaluated against and the rows it selected, in its order.
 *
 * A version is a text object at DATASET/queries/NAME/versions/<id> (id: the SHA-256 of its
 * bytes) naming the version before it; DATASET/queries/NAME/HEAD names the newest and moves by
 * compare-and-swap. The rows are uint64 little-endian at DATASET/queries/NAME/rows/<id> (id:
 * the SHA-256 of those bytes, checked when read). The text:
 *
 *   tensorfs-query 1
 *   name NAME
 *   parent <id or ->
 *   time <unix seconds>
 *   commit <commit id>
 *   rows <count> <rows id>
 *   sql <the statement, a backslash written as two and a newline as a backslash and n>
 *   end
 */
#ifndef TFS_QUERY_H
#define TFS_QUERY_H

#include <stddef.h>
#include <stdint.h>

#include "object.h"
#include "store.h"

struct tfs_query {
	struct tfs_id id; /* this version's */
	char *name;
	int has_parent;
	struct tfs_id parent;
	uint64_t time;
	struct tfs_id commit;
	uint64_t nrows;
	struct tfs_id rows_id;
	char *sql;
};

void tfs_query_free(struct tfs_query *q);
/* The newest version of query name of dataset ds: -ENOENT when there is none. */
int tfs_query_head(struct tfs_store *s, const char *ds, const char *name, struct tfs_query *out);
int tfs_query_load(struct tfs_store *s, const char *ds, const char *name, const struct tfs_id *id,
		   struct tfs_query *out);
/* The rows of q (q->nrows of them), checked against their id: -EIO when damaged. */
int tfs_query_rows(struct tfs_store *s, const char *ds, const struct tfs_query *q, uint64_t **rows);
/* Save q (name, commit, sql) with rows[0..n) as the query's new version on top of its head:
 * q->id, parent, time, nrows and rows_id are set. -EAGAIN when another writer moved it. */
int tfs_query_save(struct tfs_store *s, const char *ds, struct tfs_query *q, const uint64_t *rows,
		   uint64_t n);
/* Remove the query's name (its versions stay, unnamed). -ENOENT when there is none. */
int tfs_query_remove(struct tfs_store *s, const char *ds, const char *name);
/* The dataset's queries, by name; whether it has any. */
int tfs_query_list(struct tfs_store *s, const char *ds, tfs_store_list_fn fn, void *arg);
int tfs_query_any(struct tfs_store *s, const char *ds);

#endif
