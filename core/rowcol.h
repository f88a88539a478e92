/* SPDX-License-Identifier: MIT */
/* rowcol: columns written a row at a time: any kind (fixed, ragged, text, bytes), new or
 * appended to, their chunks written as they fill. The importers of sources that come in rows
 * (text files, folders of .npy files) use it. */
#ifndef TFS_ROWCOL_H
#define TFS_ROWCOL_H

#include <stddef.h>
#include <stdint.h>

#include "format.h"
#include "workpool.h"

/* Add an empty column `name` of kind to m, at its end (a header and its parts for kinds other
 * than fixed): m->cols must have room for 4 more entries. dt: the elements' dtype (|u1 for text
 * and bytes); shape: a fixed column's row shape (ndim values), NULL otherwise; ndim: the rank of
 * a fixed row or of every ragged row. */
int tfs_rowcol_new(struct tfs_manifest *m, const char *name, enum tfs_col_kind kind,
		   const struct tfs_dtype *dt, unsigned ndim, const uint64_t *shape,
		   uint64_t chunk_bytes, enum tfs_codec_id codec, int level);

struct tfs_rowcol;

/* Begin appending rows to column m->cols[i] (a fixed column or a header). The manifest's columns
 * must stay where they are until tfs_rowcol_finish. */
int tfs_rowcol_begin(struct tfs_store *s, const char *ds, struct tfs_manifest *m, size_t i,
		     struct tfs_rowcol **out);
/* One row: its len bytes (a fixed column's row_bytes; a text row valid UTF-8) and, for a ragged
 * column, its shape (ndim values whose product times the itemsize is len). -EINVAL (logged by
 * the caller) when the row does not fit the column. */
int tfs_rowcol_add(struct tfs_rowcol *w, const void *row, size_t len, const uint64_t *shape);
/* n rows of a fixed column, one after another in rows (len bytes): as n calls of
 * tfs_rowcol_add, copied a chunk's room at a time. -EINVAL for a column of another kind, or
 * when len is not n rows. */
int tfs_rowcol_add_rows(struct tfs_rowcol *w, const void *rows, size_t n, size_t len);
/* tfs_rowcol_add of a row the caller gives up (malloc'd; the rowcol frees it, added or not):
 * with a pool its room in the chunk is kept, and it is copied there on the pool with the rest of
 * the chunk's work, so that the thread adding rows does not copy large ones. */
int tfs_rowcol_add_take(struct tfs_rowcol *w, uint8_t *row, size_t len, const uint64_t *shape);
/* Encode and write chunks as tasks on pool from now on (NULL: on the caller's thread), a bounded
 * number at a time; their refs reach the manifest by tfs_rowcol_finish. */
void tfs_rowcol_use_pool(struct tfs_rowcol *w, struct tfs_workpool *pool);
/* Write what is buffered and bring the manifest's column (and parts) up to date. */
int tfs_rowcol_finish(struct tfs_rowcol *w);
void tfs_rowcol_free(struct tfs_rowcol *w);

/* Bytes a row takes in a text column's lines.txt: escaped, with its newline. */
uint64_t tfs_text_line_bytes(const char *row, size_t len);

#endif
