/* SPDX-License-Identifier: MIT */
/* format: the on-store layout of a lake (datasets, objects, refs) and the manifest and commit
 * objects. The specification is core/FORMAT.md; this module is its only implementation. */
#ifndef TFS_FORMAT_H
#define TFS_FORMAT_H

#include <stddef.h>
#include <stdint.h>

#include "npy.h"
#include "object.h"
#include "store.h"

#define TFS_FORMAT_VERSION 1
#define TFS_DEFAULT_CHUNK_BYTES (4u << 20)
#define TFS_KEY_MAX 512

/* One chunk as a manifest names it. Its row range follows from its position. */
struct tfs_chunk_ref {
	struct tfs_id id;
	uint64_t stored_size; /* bytes of the whole object, header included */
};

/* What a column holds. A fixed column is stored as itself; the others (rows of any size) as a
 * header entry with no chunks of its own, followed by its parts: fixed columns named
 * "<name>/data" (every row's bytes in row order, a uint8 row a byte, chunks ending on row
 * boundaries), "<name>/offsets" (rows + 1 uint64 byte offsets into data) and, for ragged
 * tensors, "<name>/shapes" (a row's shape: rows x ndim int64). */
enum tfs_col_kind {
	TFS_COL_FIXED,	/* one shape for every row */
	TFS_COL_RAGGED, /* tensors of one dtype and rank, any shape */
	TFS_COL_TEXT,	/* UTF-8 strings */
	TFS_COL_BYTES,	/* byte strings */
	TFS_COL_NKINDS
};
enum tfs_col_part { TFS_PART_NONE, TFS_PART_DATA, TFS_PART_OFFSETS, TFS_PART_SHAPES };

/* A column of a version. */
struct tfs_column {
	char *name;
	enum tfs_col_kind kind;
	enum tfs_col_part part; /* a part of the column before it (its header), or NONE */
	struct tfs_dtype dtype; /* of the elements, for ragged columns; |u1 for text and bytes */
	unsigned ndim;		/* dimensions of one row (0: a scalar per row); ragged: the rank */
	uint64_t shape[TFS_MAX_DIMS - 1]; /* fixed columns */
	uint64_t row_bytes;		  /* fixed columns */
	uint64_t rows;
	/* Every chunk but the last holds exactly this many rows; 0: chunk k ends before row
	 * chunk_end[k] (data parts, whose chunks end on the parent's row boundaries). */
	uint64_t rows_per_chunk;
	uint64_t *chunk_end;
	uint64_t chunk_bytes; /* the chunk target the column was created with */
	enum tfs_codec_id codec;
	int level;
	size_t nchunks;
	struct tfs_chunk_ref *chunks;
	uint64_t text_bytes; /* text columns: bytes of the escaped one-row-a-line text */
	/* Columns of another kind than fixed: the indices of their parts in the manifest. */
	size_t data, offsets, shapes;
	/* A label column's class names: label i is classes[i] (integer scalar columns only). */
	char **classes;
	size_t nclasses;
	/* A token column's end-of-document id (ragged integer columns of rank 1), when has_eos. */
	int has_eos;
	uint64_t eos;
};

/* Chunk geometry, for uniform and listed chunks alike: the chunk holding row r (r < rows; O(1),
 * or O(log chunks) for listed ones), a chunk's first row and its row count. */
size_t tfs_column_chunk_of(const struct tfs_column *c, uint64_t r);
uint64_t tfs_column_chunk_first(const struct tfs_column *c, size_t k);
uint64_t tfs_column_chunk_rows(const struct tfs_column *c, size_t k);
/* Bytes of the largest chunk's rows: a buffer for any chunk. */
uint64_t tfs_column_max_chunk_bytes(const struct tfs_column *c);
/* The rows of a fixed column's full chunk for a chunk target (at least 1; rows of no bytes all
 * in one chunk). */
uint64_t tfs_fixed_rows_per_chunk(uint64_t chunk_bytes, uint64_t row_bytes);
/* "fixed", "ragged", "text", "bytes"; and back (-1 for none). */
const char *tfs_col_kind_name(enum tfs_col_kind k);
int tfs_col_kind_parse(const char *name);

/* Everything a version holds: its row count and columns. Every column has `rows` rows. */
struct tfs_manifest {
	uint64_t rows;
	size_t ncols;
	struct tfs_column *cols;
};

struct tfs_commit {
	struct tfs_id id;
	struct tfs_id manifest;
	size_t nparents;
	struct tfs_id *parents;
	int64_t time; /* seconds since the epoch */
	uint64_t rows;
	char *message;
};

/* Object keys: "<ds>/objects/ab/cdef...". */
void tfs_object_key(const char *ds, const struct tfs_id *id, char out[TFS_KEY_MAX]);
/* The id of an object key (as tfs_object_key makes them, of a valid dataset name); 0 when key is
 * not one. */
int tfs_object_key_parse(const char *key, struct tfs_id *id);

/* Encode raw bytes as an object of the given type, store it (skipping objects already there)
 * and return its id. */
int tfs_object_put(struct tfs_store *s, const char *ds, enum tfs_obj_type type,
		   enum tfs_codec_id codec, int level, const void *raw, size_t len,
		   struct tfs_id *id);
/* Put an already encoded object. */
int tfs_object_put_encoded(struct tfs_store *s, const char *ds, const void *obj, size_t len,
			   struct tfs_id *id);
/* The same in two steps (tfs_store_put_new_begin): *put, when not NULL, is to be ended with
 * tfs_store_put_new_end, in a batch, before anything refers to the object. put NULL: as
 * tfs_object_put_encoded. */
int tfs_object_put_encoded_begin(struct tfs_store *s, const char *ds, const void *obj, size_t len,
				 struct tfs_id *id, struct tfs_store_put **put);
/* How a column's chunks are written: its codec and level, its rows' bytes (frames of whole
 * rows) and the delta filter's line (0: none), or for rows of several lines (a ragged column's
 * data part) the runs of rows of each (nruns > 0: they rule, line aside). */
struct tfs_chunk_form {
	enum tfs_codec_id codec;
	int level;
	uint64_t row_bytes;
	uint64_t line;
	const struct tfs_line_run *runs;
	size_t nruns;
};
/* Whether this process's writers filter the rows of a column of that codec, dtype and row rank:
 * tfs_chunk_delta_get is on, chunks are zstd, elements are 1 byte (pixels: the filter is
 * bytewise) and rows have two dimensions or more. */
int tfs_chunk_filterable(enum tfs_codec_id codec, const struct tfs_dtype *dt, unsigned ndim);
/* Column c's form for this process's writers. Its line is an image line of its rows (the last
 * two dimensions' bytes of rows of three or more, the last one's of rows of two) when
 * tfs_chunk_delta_get is on and c is a fixed zstd column of 1-byte elements (pixels: the
 * filter is bytewise) and rows of two lines or more. */
void tfs_chunk_form_of(const struct tfs_column *c, struct tfs_chunk_form *out);
/* The line a ragged row of column h, of that shape and len bytes, would be filtered with, by the
 * same rules (a ragged zstd column of 1-byte elements, rows of two lines or more): 0 when none.
 * A ragged column's data part is filtered a frame at a time, each frame with the line of the
 * row that holds most of it (tfs_chunk_encode_runs). */
uint64_t tfs_chunk_row_line(const struct tfs_column *h, const uint64_t *shape, uint64_t len);
/* Encode raw bytes, rows of form->row_bytes each, as a chunk (framed at tfs_chunk_frame_get,
 * made whole rows by tfs_chunk_frame_rows, delta-filtered with form->line) and put it as above:
 * ref gets its id and stored size. */
int tfs_chunk_put_begin(struct tfs_store *s, const char *ds, const struct tfs_chunk_form *form,
			const void *raw, size_t len, struct tfs_chunk_ref *ref,
			struct tfs_store_put **put);
/* Fetch and decode a whole object; the buffer (NUL-terminated) is handed to the caller. A
 * damaged object is -EIO with a log line naming it. */
int tfs_object_get(struct tfs_store *s, const char *ds, const struct tfs_id *id,
		   enum tfs_obj_type type, uint8_t **raw, size_t *len);

/* Datasets. create writes an empty root commit and points `main` at it; -EEXIST if the dataset
 * exists. check returns 0 for a dataset this code can read, -ENOENT for none, -EPROTO for a
 * newer format. */
int tfs_dataset_create(struct tfs_store *s, const char *ds);
int tfs_dataset_check(struct tfs_store *s, const char *ds);
/* Calls fn for every dataset in the lake, in no particular order. */
int tfs_dataset_list(struct tfs_store *s, tfs_store_list_fn fn, void *arg);

/* An id kept under key as a line of hex, as refs and the HEAD of a versioned object are: read
 * (-ENOENT for none; -EIO, logged naming the key, when it holds no id), and moved from old
 * (NULL: key must not exist) to new_id by compare-and-swap (-EAGAIN when it moved meanwhile). */
int tfs_id_line_read(struct tfs_store *s, const char *key, struct tfs_id *id);
int tfs_id_line_swap(struct tfs_store *s, const char *key, const struct tfs_id *old,
		     const struct tfs_id *new_id);

/* Refs. Branches live under refs/heads, tags under refs/tags. */
enum tfs_ref_kind { TFS_REF_BRANCH, TFS_REF_TAG };
int tfs_ref_read(struct tfs_store *s, const char *ds, enum tfs_ref_kind kind, const char *name,
		 struct tfs_id *id);
/* Move a branch from old (NULL: it must not exist) to new. -EAGAIN when it moved meanwhile. */
int tfs_ref_update(struct tfs_store *s, const char *ds, enum tfs_ref_kind kind, const char *name,
		   const struct tfs_id *old, const struct tfs_id *new_id);
int tfs_ref_list(struct tfs_store *s, const char *ds, enum tfs_ref_kind kind, tfs_store_list_fn fn,
		 void *arg);
/* Resolve a branch, a tag or a full commit id. */
int tfs_ref_resolve(struct tfs_store *s, const char *ds, const char *ref, struct tfs_id *id);
/* Resolve a branch or a tag (not a commit id) and say which it is. */
int tfs_ref_lookup(struct tfs_store *s, const char *ds, const char *name, enum tfs_ref_kind *kind,
		   struct tfs_id *id);
/* A name a new branch or tag may take: a valid name that is not reserved for the mount
 * ("commits", "log") and not 64 hex digits (which would read as a commit id). */
int tfs_ref_name_ok(const char *name);
/* Create branch or tag `name` at commit id. -EEXIST if a branch or a tag of that name exists
 * (tags never move), -EINVAL for a bad name, -ENOENT if id is not a commit of ds. */
int tfs_ref_create(struct tfs_store *s, const char *ds, enum tfs_ref_kind kind, const char *name,
		   const struct tfs_id *id);

/* Manifests. */
int tfs_manifest_serialize(const struct tfs_manifest *m, struct tfs_buf *out);
/* Returns -EIO with a message in err when the text is not a valid manifest. */
int tfs_manifest_parse(const char *text, size_t len, struct tfs_manifest *m, char *err,
		       size_t err_cap);
int tfs_manifest_load(struct tfs_store *s, const char *ds, const struct tfs_id *id,
		      struct tfs_manifest *m);
void tfs_manifest_free(struct tfs_manifest *m);
const struct tfs_column *tfs_manifest_column(const struct tfs_manifest *m, const char *name);
/* Deep copy of a column (for building a new manifest from an old one). */
int tfs_column_copy(struct tfs_column *dst, const struct tfs_column *src);
void tfs_column_free(struct tfs_column *c);
/* Rows labelled with these n class names go to label column c, which held rows_before rows:
 * the column takes the names when it has none and held no rows, keeps its own when they are
 * the same, takes the new ones when its own come first (its labels keep their meaning), and
 * refuses otherwise (-EINVAL, the reason in err). A column that held rows without names keeps
 * none. */
int tfs_column_classes_merge(struct tfs_column *c, uint64_t rows_before, char *const *names,
			     size_t n, char *err, size_t err_cap);
/* Token column c's end-of-document id: -EINVAL (the reason in err) when it has another than eos;
 * _merge then records eos on it. */
int tfs_column_eos_check(const struct tfs_column *c, uint64_t eos, char *err, size_t err_cap);
int tfs_column_eos_merge(struct tfs_column *c, uint64_t eos, char *err, size_t err_cap);

/* Commits. */
int tfs_commit_serialize(const struct tfs_commit *c, struct tfs_buf *out);
int tfs_commit_parse(const char *text, size_t len, struct tfs_commit *c);
int tfs_commit_load(struct tfs_store *s, const char *ds, const struct tfs_id *id,
		    struct tfs_commit *c);
void tfs_commit_free(struct tfs_commit *c);
/* Store a manifest and a commit naming it, with the given parent (NULL for a root commit). */
int tfs_commit_write(struct tfs_store *s, const char *ds, const struct tfs_manifest *m,
		     const struct tfs_id *parent, const char *message, struct tfs_id *commit_id);

/* Write the schema of a version as JSON (the mount's schema.json and `tensorfs info`). */
int tfs_schema_json(const char *ds, const struct tfs_commit *c, const struct tfs_manifest *m,
		    struct tfs_buf *out);

#endif
