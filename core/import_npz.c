/* SPDX-License-Identifier: MIT */
/* import_npz: an .npz file (a zip of .npy members, each a column of its rows) read through
 * libarchive, an array a piece of rows at a time. */
#include "import.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <archive_entry.h>

#include "archread.h"
#include "npy.h"
#include "rowcol.h"
#include "workpool.h"

/* An .npz array is read a piece of whole rows of about this many bytes at a time. */
#define NPZ_PIECE (4u << 20)

/* The current member's NPY header, read into b as far as it goes (b then holds the header and
 * perhaps the data's first bytes) and parsed. */
static int npy_head(struct archive *a, const char *what, struct tfs_buf *b,
		    struct tfs_npy_info *info)
{
	size_t need = 64;
	char err[256] = "";
	int rc;

	b->len = 0;
	for (;;) {
		const size_t want = need - b->len;
		la_ssize_t n;

		if (tfs_buf_reserve(b, want))
			return -ENOMEM;
		n = tfs_archive_read_upto(a, what, b->data + b->len, want);
		if (n < 0)
			return -EIO;
		b->len += (size_t)n;
		rc = tfs_npy_parse(b->data, b->len, info, &need, err, sizeof(err));
		if (rc != -EAGAIN)
			break;
		if ((size_t)n < want || need <= b->len) { /* the member ended first */
			tfs_err("%s: ends inside its NPY header", what);
			return -EINVAL;
		}
	}
	if (rc) {
		tfs_err("%s: %s", what, err[0] ? err : "not an NPY array");
		return -EINVAL;
	}
	if (info->fortran_order && info->ndim > 1) {
		tfs_err("%s: Fortran-ordered arrays are not taken from archives", what);
		return -EINVAL;
	}
	return 0;
}

/* The rows (of row_bytes each) of the current member, its header read into b by npy_head, added
 * to w a piece of whole rows at a time: an array is never in memory whole. */
static int npy_rows(struct archive *a, const char *what, struct tfs_buf *b,
		    const struct tfs_npy_info *info, uint64_t row_bytes, struct tfs_rowcol *w)
{
	uint64_t per, left = info->shape[0];
	size_t have = b->len - (size_t)info->data_offset; /* data read with the header */
	struct tfs_buf piece = { 0 };
	int rc = 0;

	if (!row_bytes) { /* rows of no bytes: nothing to read */
		for (; !rc && left; left--)
			rc = tfs_rowcol_add(w, "", 0, info->shape + 1);
		return rc;
	}
	per = NPZ_PIECE / row_bytes ? NPZ_PIECE / row_bytes : 1;
	if (tfs_buf_reserve(&piece, (size_t)(per * row_bytes)))
		return -ENOMEM;
	if (have > per * row_bytes)
		have = (size_t)(per * row_bytes);
	memcpy(piece.data, b->data + info->data_offset, have);
	while (!rc && left) {
		const uint64_t k = left < per ? left : per;
		const la_ssize_t n = tfs_archive_read_upto(a, what, piece.data + have,
							   (size_t)(k * row_bytes) - have);

		if (n < 0) {
			rc = -EIO;
			break;
		}
		if ((uint64_t)n + have < k * row_bytes) {
			tfs_err("%s: shorter than its NPY header says", what);
			rc = -EINVAL;
			break;
		}
		if (info->big_endian)
			tfs_dtype_swap(&info->dtype, piece.data, (size_t)(k * row_bytes));
		rc = tfs_rowcol_add_rows(w, piece.data, (size_t)k, (size_t)(k * row_bytes));
		left -= k;
		have = 0;
	}
	tfs_buf_free(&piece);
	return rc;
}

int tfs_import_npz(struct tfs_store *s, const char *ds, const char *path,
		   const struct tfs_import_opts *o, struct tfs_import_result *res,
		   struct tfs_id *commit_id)
{
	struct tfs_manifest m = { 0 };
	struct tfs_workpool *pool = NULL;
	struct tfs_buf b = { 0 };
	struct tfs_archive *ar = NULL;
	struct archive *a = NULL;
	struct archive_entry *e;
	uint64_t rows = UINT64_MAX;
	size_t ncols = 0;
	struct tfs_txn t;
	int rc;

	memset(res, 0, sizeof(*res));
	rc = tfs_txn_begin(&t, s, ds, o);
	if (!rc)
		rc = tfs_manifest_copy_extra(&t.old, TFS_ARCHIVE_MAX_COLS, &m);
	/* Members are read and split into rows on this thread, chunks encoded on the pool. */
	if (!rc)
		rc = tfs_import_pool(o, &pool);
	if (!rc)
		rc = tfs_archive_open(path, TFS_ARCHIVE_ZIP, &ar);
	if (ar)
		a = ar->a;
	/* One pass: each member's rows go to its column as they are read. A damaged archive
	 * fails the import whatever was read before: an array missing is no partial result. */
	while (!rc && (rc = tfs_archive_next(a, path, &e)) == 1) {
		const char *name = archive_entry_pathname(e);
		char col[160], what[512];
		size_t n = strlen(name);
		struct tfs_npy_info info;
		struct tfs_column *c = NULL;
		struct tfs_rowcol *w = NULL;
		uint64_t row_bytes;
		size_t at;

		rc = 0;
		if (n <= 4 || strcmp(name + n - 4, ".npy") || n - 4 >= sizeof(col))
			continue;
		snprintf(col, sizeof(col), "%.*s", (int)(n - 4), name);
		snprintf(what, sizeof(what), "%s: %s", path, name);
		if (!tfs_name_valid(col)) {
			tfs_err("%s: '%s' is not a valid column name", what, col);
			rc = -EINVAL;
			break;
		}
		rc = npy_head(a, what, &b, &info);
		if (rc)
			break;
		if (rows == UINT64_MAX)
			rows = info.shape[0];
		if (info.shape[0] != rows) {
			tfs_err("%s has %" PRIu64 " rows, the archive's first array %" PRIu64, what,
				info.shape[0], rows);
			rc = -EINVAL;
			break;
		}
		if (!tfs_manifest_column(&m, col) && ++ncols > TFS_ARCHIVE_MAX_COLS) {
			rc = -E2BIG;
			break;
		}
		rc = tfs_import_column(&m, col, TFS_COL_FIXED, &info.dtype, info.ndim - 1,
				       info.shape + 1, o, what, &at);
		c = rc ? NULL : &m.cols[at];
		if (!rc)
			rc = tfs_rowcol_begin(s, ds, &m, (size_t)(c - m.cols), &w);
		if (!rc)
			tfs_rowcol_use_pool(w, pool);
		/* The source's rows (a ragged column takes them with their shape). */
		row_bytes = info.dtype.itemsize;
		for (unsigned d = 1; d < info.ndim; d++)
			row_bytes *= info.shape[d];
		if (!rc)
			rc = npy_rows(a, what, &b, &info, row_bytes, w);
		if (!rc)
			rc = tfs_rowcol_finish(w);
		tfs_rowcol_free(w);
		tfs_progress_add(o->progress, rows * row_bytes, 0);
	}
	if (!rc && rows == UINT64_MAX) {
		tfs_err("%s: no .npy arrays in it", path);
		rc = -EINVAL;
	}
	/* A URL's bytes damaged on the way: that, not the archive, is to blame. */
	if (ar && (!rc || rc == -EINVAL || rc == -EIO)) {
		const int v = tfs_source_verify(ar->src);

		rc = v ? v : rc;
	}
	/* Every column of the dataset keeps the same number of rows. */
	if (!rc) {
		m.rows = t.old.rows + rows;
		rc = tfs_import_same_rows(&m, m.rows, path);
	}
	if (!rc) {
		res->rows = rows;
		rc = tfs_txn_commit(&t, &m, o->message, commit_id);
	}
	if (pool)
		res->busy_peak = tfs_workpool_busy_peak(pool);
	tfs_workpool_destroy(pool);
	tfs_archive_close(ar);
	tfs_buf_free(&b);
	tfs_manifest_free(&m);
	tfs_txn_end(&t);
	return rc;
}
