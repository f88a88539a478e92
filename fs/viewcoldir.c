/* SPDX-License-Identifier: MIT */
/* viewcoldir: views/PARAMS/COLUMN/ of a ragged, text or bytes column: the view's rows in view
 * order. data.bin holds their bytes one after another, offsets.npy the offsets rebuilt for that
 * order, shapes.npy (ragged) their shapes (a view file of the shapes part). */
#include "fsnode.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cache.h"

/* The rows of the column a file under views/PARAMS/COLUMN/ belongs to, in view v of version ver
 * (kept with the view: valid while it is held). */
static int column_rows(struct tfs_fs *fs, struct tfs_fs_node *n, struct tfs_version *ver,
		       struct tfs_lake_view *v, int lines, const struct tfs_view_spans **r)
{
	const struct tfs_column *c = tfs_fs_column_header(ver, n->parent->name);

	if (!c)
		return -ENOENT;
	return tfs_lake_view_spans(fs->lake, v, (size_t)(c - ver->manifest.cols), lines, r);
}

/* The view and version a file under views/PARAMS/COLUMN/ shows, and its rows. */
static int file_rows(struct tfs_fs *fs, struct tfs_fs_node *n, struct tfs_version **ver,
		     struct tfs_lake_view **v, const struct tfs_view_spans **r, int lines)
{
	int rc = tfs_fs_node_view(fs, tfs_fs_view_dir_of(n), ver, v);

	return rc ? rc : column_rows(fs, n, *ver, *v, lines, r);
}

/* The same for an open handle, which holds the view and so its rows (h->priv). A file of a
 * commit its branch has left is stale, as every view file is (tfs_fs_view_file_open). */
static int open_rows(struct tfs_fs *fs, struct tfs_fs_node *n, struct tfs_fs_handle *h, int lines,
		     const struct tfs_view_spans **r)
{
	int rc = tfs_fs_view_file_open(fs, n, h);

	if (!rc)
		rc = column_rows(fs, n, h->ver, h->view, lines, r);
	if (!rc)
		h->priv = (void *)*r;
	return rc;
}

/* --- views/PARAMS/COLUMN/data.bin ----------------------------------------------------------- */

static int getattr_common(struct tfs_fs *fs, struct tfs_fs_node *n, struct tfs_fs_attr *a,
			  int offsets)
{
	struct tfs_fs_node *dir = n->parent;
	struct tfs_lake_view *f = NULL;
	const struct tfs_view_spans *r = NULL;
	uint64_t rows = 0, bytes = 0;
	int rc = 0, sized;

	/* Counted once per directory: it shows one commit through one view. */
	pthread_mutex_lock(&fs->lock);
	sized = dir->view_sized;
	rows = dir->view_rows;
	bytes = dir->view_bytes;
	pthread_mutex_unlock(&fs->lock);
	if (sized) {
		rc = tfs_fs_file_version(fs, n, &a->v);
	} else {
		rc = file_rows(fs, n, &a->v, &f, &r, 0);
		if (!rc) {
			rows = r->n;
			bytes = r->at[r->n];
			pthread_mutex_lock(&fs->lock);
			dir->view_sized = 1;
			dir->view_rows = rows;
			dir->view_bytes = bytes;
			pthread_mutex_unlock(&fs->lock);
		}
		tfs_lake_view_put(fs->lake, f);
	}
	if (!rc)
		a->size = offsets ? TFS_NPY_ALIGN + (rows + 1) * 8 : bytes;
	return rc;
}

static int data_getattr(struct tfs_fs *fs, struct tfs_fs_node *n, struct tfs_fs_attr *a)
{
	return getattr_common(fs, n, a, 0);
}

/* The prefetcher follows the order in which data.bin front to back needs the data chunks. */
static int data_open(struct tfs_fs *fs, struct tfs_fs_node *n, const struct fuse_ctx *who,
		     struct tfs_fs_handle *h, struct fuse_file_info *fi)
{
	const struct tfs_view_spans *r = NULL;
	int rc;

	(void)who;
	rc = open_rows(fs, n, h, 0, &r);
	if (rc)
		return rc;
	h->size = r->at[r->n];
	/* The reader prefetches the data chunks in the order data.bin needs them, publishes it to
	 * the cache (MIN eviction) and warms the next epoch near the end. */
	rc = tfs_reader_open_lake(fs->lake, h->ver, h->view,
				  h->view->view->on_error != TFS_ON_ERROR_FAIL, &h->reader);
	if (!rc)
		rc = tfs_reader_prefetch(h->reader, r->data_col, r);
	if (!rc)
		rc = tfs_reader_plan(h->reader, &r->data_col, &r, 1, tfs_view_spans_row_bytes(r),
				     0);
	if (!rc)
		tfs_reader_warm_columns(h->reader, &r->data_col, 1);
	fi->keep_cache = 1;
	return rc;
}

/* Bytes [off, off + size) of the view's data: the rows they fall in, gathered by the reader
 * from where the version keeps them, and replied straight from the pinned chunks. */
static void data_read(fuse_req_t req, struct tfs_fs *fs, struct tfs_fs_handle *h, size_t size,
		      off_t off)
{
	const struct tfs_view_spans *r = h->priv;
	uint64_t pos = (uint64_t)off, end = pos + size, first, last, done = 0;
	struct tfs_gather_list l;
	int rc = 0, any_pad = 0;

	if (end > h->size)
		end = h->size;
	if (pos >= end) {
		fuse_reply_buf(req, NULL, 0);
		return;
	}
	tfs_gather_list_init(&l, tfs_lake_cache(fs->lake));
	tfs_view_spans_rows(r, pos, end, &first, &last);
	tfs_reader_at(h->reader, first, last, h->size - end);
	for (uint64_t i = first; !rc && i <= last && pos + done < end; i++) {
		const uint64_t a = r->src[i], len = r->at[i + 1] - r->at[i];
		uint64_t in, take;
		int padded;

		if (r->at[i + 1] <= pos + done)
			continue;
		in = pos + done - r->at[i];
		take = len - in < end - pos - done ? len - in : end - pos - done;
		rc = tfs_reader_gather_bytes(h->reader, r->data_col, a, a + len, a + in,
					     a + in + take, done, &l, &padded);
		any_pad |= padded;
		done += take;
	}
	if (rc)
		fuse_reply_err(req, rc == -ENOMEM ? ENOMEM : EIO);
	else
		tfs_fs_reply_gather(req, NULL, 0, &l, 0, end - pos, any_pad);
	tfs_gather_list_free(&l);
}

static const struct tfs_fs_kind data_kind = {
	.name = "view data.bin",
	.mode = S_IFREG | 0444,
	.pins_version = 1,
	.getattr = data_getattr,
	.open = data_open,
	.read = data_read,
};

/* --- views/PARAMS/COLUMN/offsets.npy -------------------------------------------------------- */

static int offsets_getattr(struct tfs_fs *fs, struct tfs_fs_node *n, struct tfs_fs_attr *a)
{
	return getattr_common(fs, n, a, 1);
}

/* Made whole at open: the NPY header and the rebuilt offsets. */
static int offsets_open(struct tfs_fs *fs, struct tfs_fs_node *n, const struct fuse_ctx *who,
			struct tfs_fs_handle *h, struct fuse_file_info *fi)
{
	const struct tfs_view_spans *r = NULL;
	struct tfs_dtype u8;
	char header[TFS_NPY_ALIGN], err[64];
	int big, rc;

	(void)who;
	rc = open_rows(fs, n, h, 0, &r);
	if (!rc)
		rc = tfs_dtype_parse("<u8", &u8, &big, err, sizeof(err));
	if (!rc)
		rc = tfs_npy_header_build(&u8, r->n + 1, 0, NULL, header);
	if (!rc)
		rc = tfs_buf_append(&h->text, header, sizeof(header));
	if (!rc)
		rc = tfs_buf_append(&h->text, r->at, (r->n + 1) * sizeof(*r->at));
	h->size = h->text.len;
	fi->keep_cache = 1;
	return rc;
}

static const struct tfs_fs_kind offsets_kind = {
	.name = "view offsets.npy",
	.mode = S_IFREG | 0444,
	.pins_version = 1,
	.getattr = offsets_getattr,
	.open = offsets_open,
	.read = tfs_fs_read_text,
};

/* --- views/PARAMS/COLUMN/lines.txt --------------------------------------------------------- */

/* Its size needs every row's escaped length: one pass over the column, kept with the view. */
static int lines_getattr(struct tfs_fs *fs, struct tfs_fs_node *n, struct tfs_fs_attr *a)
{
	struct tfs_lake_view *f = NULL;
	const struct tfs_view_spans *r = NULL;
	int rc = file_rows(fs, n, &a->v, &f, &r, 1);

	if (!rc)
		a->size = r->lat[r->n];
	tfs_lake_view_put(fs->lake, f);
	return rc;
}

static int lines_open(struct tfs_fs *fs, struct tfs_fs_node *n, const struct fuse_ctx *who,
		      struct tfs_fs_handle *h, struct fuse_file_info *fi)
{
	const struct tfs_view_spans *r = NULL;
	int rc;

	(void)who;
	rc = open_rows(fs, n, h, 1, &r);
	if (rc)
		return rc;
	h->size = r->lat[r->n];
	fi->keep_cache = 1;
	return 0;
}

/* Bytes [off, off + size): the lines of the view rows they fall in, escaped. */
static void lines_read(fuse_req_t req, struct tfs_fs *fs, struct tfs_fs_handle *h, size_t size,
		       off_t off)
{
	const struct tfs_view_spans *r = h->priv;
	uint64_t pos = (uint64_t)off, end = pos + size, lo = 0, hi = r->n;
	struct tfs_buf out = { 0 }, row = { 0 }, line = { 0 };
	int rc = 0;

	if (end > h->size)
		end = h->size;
	if (pos >= end) {
		fuse_reply_buf(req, NULL, 0);
		return;
	}
	while (hi - lo > 1) {
		const uint64_t mid = lo + (hi - lo) / 2;

		if (r->lat[mid] <= pos)
			lo = mid;
		else
			hi = mid;
	}
	for (uint64_t i = lo; !rc && i < r->n && r->lat[i] < end; i++) {
		const size_t n = (size_t)(r->at[i + 1] - r->at[i]);
		uint64_t from, to;
		ssize_t got;

		row.len = line.len = 0;
		rc = tfs_buf_reserve(&row, n ? n : 1);
		if (rc)
			break;
		got = n ? tfs_version_read(h->ver, tfs_lake_cache(fs->lake), r->data_col, r->src[i],
					   row.data, n)
			: 0;
		if (got != (ssize_t)n) {
			rc = got < 0 ? (int)got : -EIO;
			break;
		}
		rc = tfs_fs_escape_line(row.data, n, &line);
		if (!rc && line.len != r->lat[i + 1] - r->lat[i])
			rc = -EIO; /* the data changed under a committed version: never serve it */
		from = pos > r->lat[i] ? pos - r->lat[i] : 0;
		to = end < r->lat[i + 1] ? end - r->lat[i] : line.len;
		if (!rc)
			rc = tfs_buf_append(&out, line.data + from, (size_t)(to - from));
	}
	if (rc)
		fuse_reply_err(req, rc == -ENOMEM ? ENOMEM : EIO);
	else
		fuse_reply_buf(req, (const char *)out.data, out.len);
	tfs_buf_free(&out);
	tfs_buf_free(&row);
	tfs_buf_free(&line);
}

static const struct tfs_fs_kind lines_kind = {
	.name = "view lines.txt",
	.mode = S_IFREG | 0444,
	.pins_version = 1,
	.getattr = lines_getattr,
	.open = lines_open,
	.read = lines_read,
};

/* --- views/PARAMS/COLUMN/ ------------------------------------------------------------------- */

static const struct tfs_fs_coldir_entry files[] = {
	{ "data.bin", "data", &data_kind,
	  1 << TFS_COL_RAGGED | 1 << TFS_COL_TEXT | 1 << TFS_COL_BYTES },
	{ "offsets.npy", "offsets", &offsets_kind,
	  1 << TFS_COL_RAGGED | 1 << TFS_COL_TEXT | 1 << TFS_COL_BYTES },
	{ "shapes.npy", "shapes", &tfs_fs_view_column_kind, 1 << TFS_COL_RAGGED },
	{ "lines.txt", NULL, &lines_kind, 1 << TFS_COL_TEXT },
};

static int vcoldir_lookup(struct tfs_fs *fs, struct tfs_fs_node *dir, const char *name,
			  struct tfs_fs_node **child)
{
	return tfs_fs_coldir_entries(fs, dir, files, sizeof(files) / sizeof(files[0]), name, NULL,
				     child);
}

static int vcoldir_list(struct tfs_fs *fs, struct tfs_fs_node *dir, struct tfs_fs_dir *d)
{
	return tfs_fs_coldir_entries(fs, dir, files, sizeof(files) / sizeof(files[0]), NULL, d,
				     NULL);
}

const struct tfs_fs_kind tfs_fs_view_coldir_kind = {
	.name = "view column directory",
	.mode = S_IFDIR | 0555,
	.pins_version = 1,
	.lookup = vcoldir_lookup,
	.list = vcoldir_list,
	.getattr = tfs_fs_coldir_getattr,
};
