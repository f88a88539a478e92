/* SPDX-License-Identifier: MIT */
/* sql: SQL over a version's columns, through SQLite. A virtual table `t` has a row for every
 * row of the version (rowid: the row number) and a column for every column: scalar integer and
 * boolean columns as INTEGER, scalar floats as REAL, text as TEXT, bytes as BLOB, and tensors
 * (fixed rows of more than one value, ragged rows) as BLOBs of their bytes, with NAME_shape (a
 * JSON array of the row's shape) and NAME_len (its element count, from the offsets alone: what
 * length() would read the row for) beside them. Values are read through the cache as asked for:
 * a column no part of a query names is not read at all.
 *
 * Constraints (=, <, <=, >, >=) on rowid and on scalar numeric columns are pushed down: the
 * rows are found by reading only the columns constrained (SQLite still checks every row it is
 * given, so a pushed constraint never changes a result, only what is read).
 *
 * distance(a, b[, 'l2'|'cosine'|'ip']) takes two float32 vectors as blobs (a tensor column's
 * rows, a vector bound as a parameter) and gives their distance, smaller nearer (knn.h), for
 * ORDER BY distance(emb, :q) LIMIT k. */
#ifndef TFS_SQL_H
#define TFS_SQL_H

#include <sqlite3.h>

#include "cache.h"
#include "version.h"

struct tfs_sql;

/* An in-memory SQLite database with the virtual table t over v (both borrowed: they outlive
 * it). -EINVAL with SQLite's message in err. */
int tfs_sql_open(struct tfs_version *v, struct tfs_cache *cache, struct tfs_sql **out, char *err,
		 size_t err_cap);
sqlite3 *tfs_sql_db(struct tfs_sql *q);
void tfs_sql_close(struct tfs_sql *q);

/* Rows read so far by pushed-down filters (a scan of constrained columns), and rows handed
 * to SQLite. */
struct tfs_sql_stats {
	uint64_t filtered, returned;
};
void tfs_sql_stats(const struct tfs_sql *q, struct tfs_sql_stats *out);

#endif
