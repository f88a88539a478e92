/* SPDX-License-Identifier: MIT */
/* import: append rows from NPY files to a branch's columns and commit, streaming any size. */
#ifndef TFS_IMPORT_H
#define TFS_IMPORT_H

#include <stddef.h>
#include <stdint.h>

#include "format.h"

/* What a source is. */
enum tfs_import_form {
	TFS_SRC_NPY,	 /* an NPY file: its rows (axis 0) */
	TFS_SRC_TEXT,	 /* a UTF-8 text file: a text column, a row a line */
	TFS_SRC_NPY_DIR, /* a directory of .npy files, a row each in name order: fixed or ragged */
};

struct tfs_import_src {
	const char *column;
	const char *path;
	enum tfs_import_form form;
	/* A directory of 1-D integer arrays that are documents of token ids: a ragged token column
	 * of uint16 when every id fits, else uint32 (a negative id, or one past 2^32 - 1, is an
	 * error). */
	int tokens;
};

struct tfs_import_opts {
	const char *branch;	 /* NULL: "main" */
	const char *message;	 /* NULL: "" */
	uint64_t chunk_bytes;	 /* chunk target for columns this import creates; 0: default */
	enum tfs_codec_id codec; /* for columns this import creates */
	int level;		 /* zstd level */
	unsigned threads;	 /* threads of work, the caller's included; 0: one per CPU */
	struct tfs_progress *progress; /* bytes and rows read from the sources, or NULL */
	/* The zstd level of the columns this import creates whose rows are filtered
	 * (tfs_chunk_filterable): pixels, which the filter leaves for zstd's entropy coder. */
	int filter_level;
	/* A part of a write session (session.h): the import starts from no columns and records
	 * its manifest as part `part` of `session` instead of committing; NULL: a commit. */
	const char *session;
	uint32_t part;
	/* A token column this import writes (--tokens, --megatron) and its end-of-document id,
	 * recorded on the column (the default eos of its pack views); NULL: none. */
	const char *eos_column;
	uint64_t eos;
};
/* The threads an import works on: o->threads, or one per CPU. */
unsigned tfs_import_threads(const struct tfs_import_opts *o);
/* The zstd level of a column this import creates, of that codec, dtype and row rank:
 * o->filter_level where its rows are filtered, else o->level. */
int tfs_import_level(const struct tfs_import_opts *o, enum tfs_codec_id codec,
		     const struct tfs_dtype *dt, unsigned ndim);

/* Append the rows of every source to its column (creating it with the source's kind, dtype and
 * row shape if the branch has no such column) and commit the result on the branch.
 *
 * Every check happens before anything is written: sources of differing row counts, a dtype or
 * row shape that differs from the column's, an unsupported NPY, or a result in which columns
 * would have different row counts are errors (-EINVAL, logged) that leave the dataset as it
 * was. Objects are written before the branch moves; -EAGAIN means another writer moved the
 * branch meanwhile and nothing was committed. Sources with no rows for columns that all exist
 * are -ENODATA: nothing to commit, and nothing was written. */
int tfs_import(struct tfs_store *s, const char *ds, const struct tfs_import_src *src, size_t n,
	       const struct tfs_import_opts *opts, struct tfs_id *commit);

/* Overwrite rows [row_start, row_start + rows of path) of an existing column with the rows of an
 * NPY file of the same dtype and row shape, and commit. Only the chunks the range touches are
 * rewritten (copy-on-write); the others are shared with the parent commit. */
int tfs_update(struct tfs_store *s, const char *ds, const char *column, uint64_t row_start,
	       const char *path, const struct tfs_import_opts *opts, struct tfs_id *commit);

/* Remove a column from the branch and commit. Its chunks stay for older commits. */
int tfs_drop(struct tfs_store *s, const char *ds, const char *column,
	     const struct tfs_import_opts *opts, struct tfs_id *commit);

/* --- images ---------------------------------------------------------------------------------- */

#include "image.h"

struct tfs_images_opts {
	uint32_t w, h;		/* --size: every image made w x h; 0: as they are (ragged) */
	enum tfs_image_fit fit; /* how */
	int labels;		/* an ImageFolder tree: a label column from the class directories */
	int strict;		/* a bad image fails the import instead of being skipped */
	/* With w and a fit other than pad: a large JPEG is decoded smaller in the DCT domain, as
	 * PIL's draft("RGB", (w, h)) (tfs_image_decode_draft). Faster; not the exact pixels. */
	int draft;
	/* Rows in a random order of the files fixed by shuffle_seed (tfs_filetree_shuffle), not
	 * sorted: an ImageFolder tree's classes then mix in every chunk, so a view's block shuffle
	 * mixes them whatever its window. */
	int shuffle;
	uint64_t shuffle_seed;
};

#define TFS_IMPORT_SKIPS_KEPT 8
struct tfs_import_result {
	uint64_t rows, skipped;
	size_t classes;
	unsigned busy_peak;			/* the most threads that worked at once */
	char skips[TFS_IMPORT_SKIPS_KEPT][200]; /* the first skipped files: "cat/7.jpg: why" */
};

/* Import every .jpg, .jpeg and .png file under dir (recursively, in torchvision's ImageFolder
 * order: class directories sorted, then directories and files sorted) as rows of `image`
 * (uint8 H x W x 3: ragged, or fixed w x h with io->w), `path` (text, relative to dir) and,
 * with io->labels, `label` (int64: the index of the file's class directory among dir's sorted
 * subdirectories, as ImageFolder's class_to_idx). Decoded on o->threads workers (0: every
 * core). A file that fails to decode is skipped and reported (res->skips), or with io->strict
 * fails the import; either way nothing half-written reaches the branch. */
int tfs_import_images(struct tfs_store *s, const char *ds, const char *dir,
		      const struct tfs_images_opts *io, const struct tfs_import_opts *o,
		      struct tfs_import_result *res, struct tfs_id *commit_id);

/* Import JSON Lines: one object a line, each field a column (integers int64, other numbers
 * float64, booleans bool, strings text, lists of numbers ragged rank 1, or fixed for the fields
 * named in `fixed`, anything else its JSON text). The fields are the first object's; a line that
 * is not an object with exactly those fields, of those kinds, is skipped and reported
 * (res->skips), or with strict fails the import. Into a dataset with no columns yet. Fields in
 * media (or NULL) name files decoded into the row (tfs_media_value). The field
 * `tokens` (or NULL) is a list of token ids: a token column of uint16 when every id fits, else
 * uint32 (an id below 0 or past 2^32 - 1 is an error); "FIELD:uint16" or "FIELD:uint32" fixes
 * the dtype (the parts of a session must agree), an id it cannot hold an error. */
struct tfs_media_fields;
int tfs_import_jsonl(struct tfs_store *s, const char *ds, const char *path,
		     const char *const *fixed, size_t nfixed, const char *tokens,
		     const struct tfs_media_fields *media, int strict,
		     const struct tfs_import_opts *o, struct tfs_import_result *res,
		     struct tfs_id *commit_id);

/* Import an .npz file: each NAME.npy member is column NAME, its rows (axis 0); all members
 * have the same rows. Into new columns or existing fixed ones of that dtype and row shape. */
int tfs_import_npz(struct tfs_store *s, const char *ds, const char *path,
		   const struct tfs_import_opts *o, struct tfs_import_result *res,
		   struct tfs_id *commit_id);

/* Import WebDataset shards (tar files, in order), into a dataset with no columns yet. Members
 * named KEY.EXT are grouped by KEY (the path up to the first dot of the file name) into
 * samples; the first sample's extensions are the columns: jpg/jpeg/png decoded images (ragged
 * uint8 H x W x 3, as --images), cls int64, txt and json text, npy ragged tensors (the first
 * one's dtype and rank), anything else bytes; KEY is a text `key` column. A sample without
 * every field, or with one that does not decode, is skipped and named (res->skips), or with
 * strict fails the import. */
int tfs_import_webdataset(struct tfs_store *s, const char *ds, const char *const *shards,
			  size_t nshards, int strict, const struct tfs_import_opts *o,
			  struct tfs_import_result *res, struct tfs_id *commit_id);

/* --- video and audio ------------------------------------------------------------------------ */

#include "media.h"

struct tfs_media_opts {
	int video;		  /* else audio */
	struct tfs_video_opts vo; /* --size, --fps */
	uint64_t clip, stride;	  /* video: frames a clip (0: a video a row), frames between */
	struct tfs_audio_opts ao; /* --rate, --mono */
	double clip_s, stride_s;  /* audio: seconds a clip (0: a file a row), seconds between */
	int labels;		  /* one tree of class directories: a label column */
	int strict;
	/* One tree's files in a random order fixed by shuffle_seed (tfs_filetree_shuffle), as
	 * tfs_images_opts's: each file's rows (its clips) stay together. */
	int shuffle;
	uint64_t shuffle_seed;
};

/* Import video (or audio) files: the sources are files or directories walked in sorted order
 * (with labels: one directory whose sorted class directories number the labels, as
 * torchvision's DatasetFolder). Each file is decoded once on o->threads threads (media.h) and
 * cut into rows: `video` (clip x H x W x 3 uint8: fixed with a clip and a size, else ragged;
 * without a clip, a video a row) or `audio` (samples x channels float32, ragged), `path`,
 * `start_s`, `fps` (video) or `rate` (audio), and `label`. A file that fails to decode is
 * skipped and named (res->skips), or with strict fails the import. */
int tfs_import_media(struct tfs_store *s, const char *ds, const char *const *sources,
		     size_t nsources, const struct tfs_media_opts *mo,
		     const struct tfs_import_opts *o, struct tfs_import_result *res,
		     struct tfs_id *commit_id);

/* JSON Lines fields that name media files (--media FIELD=image|video|audio): each record's
 * file, relative to the JSON Lines file's directory unless absolute, is decoded into a ragged
 * column of that name: image (H, W, 3) uint8 (io: --size and its fit), video (frames, H, W, 3)
 * uint8 (mo->vo), audio (samples, channels) float32 (mo->ao). A file that does not decode makes
 * its record a bad row. */
#define TFS_MEDIA_FIELDS_MAX 8
struct tfs_media_fields {
	size_t n;
	const char *name[TFS_MEDIA_FIELDS_MAX];
	char kind[TFS_MEDIA_FIELDS_MAX]; /* 'i', 'v' or 'a' */
	const struct tfs_images_opts *io;
	const struct tfs_media_opts *mo;
};

/* A media field's value: file rel (under base, a directory or a URL), decoded, appended to out
 * as a u32 rank, the shape (u64 each), then the bytes. An image's bytes may be given (file, read
 * already; NULL: rel is read). -EINVAL with the reason in why when the record is to blame: no
 * such file, or it does not decode. Else the import cannot go on (logged): -ELIBACC when no video
 * or audio can be decoded (FFmpeg's libraries do not load: fflib.h), another -errno when a fetch
 * failed or memory or room ran out. */
int tfs_media_value(const char *base, const char *rel, char kind, const struct tfs_media_fields *mf,
		    const struct tfs_buf *file, struct tfs_buf *out, char *why, size_t why_cap);
/* Such a value's shape and bytes. */
int tfs_media_value_parse(const uint8_t *p, size_t len, unsigned *ndim, uint64_t *shape,
			  const uint8_t **data, size_t *dlen);

/* --- within the import module (import.c, import_rows.c, import_images.c, importtxn.c) ----- */

/* A write against a branch: its head when the write began, and the manifest there. Or a part of
 * a session: no head, and no columns to start from. */
struct tfs_txn {
	struct tfs_store *s;
	const char *ds;
	const char *branch;
	const char *session; /* or NULL */
	uint32_t part;
	const char *eos_column; /* the options' */
	uint64_t eos;
	struct tfs_id head_id;
	struct tfs_commit head;
	struct tfs_manifest old;
};

int tfs_txn_begin(struct tfs_txn *t, struct tfs_store *s, const char *ds,
		  const struct tfs_import_opts *o);
/* Write the commit of manifest m on top of the head and move the branch to it, unless another
 * writer moved it first (-EAGAIN: then nothing is committed). A session's part: record m as the
 * part (commit_id: its manifest). The options' eos is recorded on its column of m first (-EINVAL,
 * logged, when that is no token column, the id does not fit it, or it has another). */
int tfs_txn_commit(struct tfs_txn *t, struct tfs_manifest *m, const char *message,
		   struct tfs_id *commit_id);
void tfs_txn_end(struct tfs_txn *t);
/* The column rows of this kind, dtype and shape (ndim values, for fixed rows) go to: m's column
 * name, which must hold such rows (ragged ones take rows of one shape too; -EINVAL, logged
 * naming the source `what`, otherwise), or a new one added to m. *at: its index. */
int tfs_import_column(struct tfs_manifest *m, const char *name, enum tfs_col_kind kind,
		      const struct tfs_dtype *dt, unsigned ndim, const uint64_t *shape,
		      const struct tfs_import_opts *o, const char *what, size_t *at);
/* tfs_import_column with the dtype as numpy's descr ("|u1", "<i8", ...). */
int tfs_import_column_descr(struct tfs_manifest *m, const char *name, enum tfs_col_kind kind,
			    const char *descr, unsigned ndim, const uint64_t *shape,
			    const struct tfs_import_opts *o, const char *what, size_t *at);
/* The class names of the rows an import adds to label column c (before any are added):
 * tfs_column_classes_merge, its refusal logged naming `what`. */
int tfs_import_classes(struct tfs_column *c, char *const *names, size_t n, const char *what);
/* Every column of m has rows rows (the dataset's before and those `what` added), else -EINVAL
 * with a message naming the first that does not. */
int tfs_import_same_rows(const struct tfs_manifest *m, uint64_t rows, const char *what);
/* A source file mapped read-only whole (*data NULL for an empty one; munmap when done), a URL's
 * object once all of it is there; a file that cannot be is an error logged with its path. */
int tfs_import_map_file(const char *path, const uint8_t **data, size_t *len);
/* The same, read as it arrives: *src says which of its bytes are there (source.h: wait before
 * touching them; flags as tfs_source_open's); tfs_source_close it after the munmap. */
struct tfs_source;
int tfs_import_map_source(const char *path, unsigned flags, struct tfs_source **src,
			  const uint8_t **data, size_t *len);
/* An open source mapped read-only whole (*data NULL for an empty one). 0 or -errno, logged. */
int tfs_import_map(struct tfs_source *src, const uint8_t **data, size_t *len);
/* The pool an import works on: o->threads threads (0: one per CPU), the caller one of them
 * (tfs_workpool_create_with_caller). */
struct tfs_workpool;
int tfs_import_pool(const struct tfs_import_opts *o, struct tfs_workpool **out);
/* A copy of the head's manifest to modify; room for `extra` more columns. */
int tfs_manifest_copy_extra(const struct tfs_manifest *old, size_t extra, struct tfs_manifest *m);

#endif
