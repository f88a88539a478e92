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

/* The view's rows of a column: where each starts in the version's data, and where in the
 * view's data.bin (prefix sums; n + 1). */
struct vrows {
	uint64_t n;
	uint64_t *src; /* n: byte offset of view row i in the version's data part */
	uint64_t *at;  /* n + 1: byte offset of view row i in the view's data.bin */
	size_t data_col;
};

static void vrows_free(void *p)
{
	struct vrows *r = p;

	if (!r)
		return;
	free(r->src);
	free(r->at);
	free(r);
}

/* Build the view's rows of column name: reads the version's offsets once (O(rows)). */
static int vrows_build(struct tfs_fs *fs, struct tfs_version *v, const struct tfs_lake_view *f,
		       const char *name, struct vrows **out)
{
	const struct tfs_column *h = tfs_fs_column_header(v, name);
	const struct tfs_view *view = f->view;
	uint64_t *off = NULL;
	struct vrows *r;
	ssize_t got;
	int rc = 0;

	if (!h)
		return -ENOENT;
	r = calloc(1, sizeof(*r));
	off = malloc((h->rows + 1) * sizeof(*off));
	if (!r || !off || !(r->src = malloc((view->n + 1) * sizeof(*r->src))) ||
	    !(r->at = malloc((view->n + 1) * sizeof(*r->at)))) {
		rc = -ENOMEM;
		goto out;
	}
	got = tfs_version_read(v, fs->lake->cache, h->offsets, 0, off,
			       (size_t)(h->rows + 1) * sizeof(*off));
	if (got != (ssize_t)((h->rows + 1) * sizeof(*off))) {
		rc = got < 0 ? (int)got : -EIO;
		goto out;
	}
	r->n = view->n;
	r->data_col = h->data;
	r->at[0] = 0;
	for (uint64_t i = 0; i < view->n; i++) {
		const uint64_t s = view->rows[i];

		if (s >= h->rows || off[s + 1] < off[s]) {
			rc = -EIO;
			goto out;
		}
		r->src[i] = off[s];
		r->at[i + 1] = r->at[i] + (off[s + 1] - off[s]);
	}
out:
	free(off);
	if (rc) {
		vrows_free(r);
		return rc;
	}
	*out = r;
	return 0;
}

/* The view and version a file under views/PARAMS/COLUMN/ shows, and its rows. */
static int file_rows(struct tfs_fs *fs, struct tfs_fs_node *n, struct tfs_version **v,
		     struct tfs_lake_view **f, struct vrows **r)
{
	int rc = tfs_fs_node_view(fs, tfs_fs_view_dir_of(n), v, f);

	return rc ? rc : vrows_build(fs, *v, *f, n->parent->name, r);
}

/* --- views/PARAMS/COLUMN/data.bin ----------------------------------------------------------- */

static int getattr_common(struct tfs_fs *fs, struct tfs_fs_node *n, struct tfs_fs_attr *a,
			  int offsets)
{
	struct tfs_fs_node *dir = n->parent;
	struct tfs_lake_view *f = NULL;
	struct vrows *r = NULL;
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
		rc = file_rows(fs, n, &a->v, &f, &r);
		if (!rc) {
			rows = r->n;
			bytes = r->at[r->n];
			pthread_mutex_lock(&fs->lock);
			dir->view_sized = 1;
			dir->view_rows = rows;
			dir->view_bytes = bytes;
			pthread_mutex_unlock(&fs->lock);
		}
		vrows_free(r);
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

static int data_open(struct tfs_fs *fs, struct tfs_fs_node *n, const struct fuse_ctx *who,
		     struct tfs_fs_handle *h, struct fuse_file_info *fi)
{
	struct vrows *r = NULL;
	int rc;

	(void)who;
	rc = file_rows(fs, n, &h->ver, &h->view, &r);
	if (rc)
		return rc;
	h->priv = r;
	h->priv_free = vrows_free;
	h->size = r->at[r->n];
	fi->keep_cache = 1;
	return 0;
}

/* Bytes [off, off + size) of the view's data: the rows they fall in, each read from where the
 * version keeps it. */
static void data_read(fuse_req_t req, struct tfs_fs *fs, struct tfs_fs_handle *h, size_t size,
		      off_t off)
{
	const struct vrows *r = h->priv;
	uint64_t pos = (uint64_t)off, end = pos + size;
	size_t lo = 0, hi = r->n, done = 0;
	char *buf;
	int rc = 0;

	if (end > h->size)
		end = h->size;
	if (pos >= end) {
		fuse_reply_buf(req, NULL, 0);
		return;
	}
	buf = malloc((size_t)(end - pos));
	if (!buf) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	/* The last row starting at or before pos (empty rows skipped by the search). */
	while (hi - lo > 1) {
		size_t mid = lo + (hi - lo) / 2;

		if (r->at[mid] <= pos)
			lo = mid;
		else
			hi = mid;
	}
	for (size_t i = lo; !rc && i < r->n && pos < end; i++) {
		uint64_t in, take;
		ssize_t got;

		if (r->at[i + 1] <= pos)
			continue;
		in = pos - r->at[i];
		take = r->at[i + 1] - pos < end - pos ? r->at[i + 1] - pos : end - pos;
		got = tfs_version_read(h->ver, fs->lake->cache, r->data_col, r->src[i] + in,
				       buf + done, (size_t)take);
		if (got != (ssize_t)take)
			rc = got < 0 ? (int)got : -EIO;
		done += (size_t)take;
		pos += take;
	}
	if (rc)
		fuse_reply_err(req, rc == -ENOMEM ? ENOMEM : EIO);
	else
		fuse_reply_buf(req, buf, done);
	free(buf);
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
	struct tfs_dtype u8;
	struct vrows *r = NULL;
	char header[TFS_NPY_ALIGN], err[64];
	int big, rc;

	(void)who;
	rc = file_rows(fs, n, &h->ver, &h->view, &r);
	if (!rc)
		rc = tfs_dtype_parse("<u8", &u8, &big, err, sizeof(err));
	if (!rc)
		rc = tfs_npy_header_build(&u8, r->n + 1, 0, NULL, header);
	if (!rc)
		rc = tfs_buf_append(&h->text, header, sizeof(header));
	if (!rc)
		rc = tfs_buf_append(&h->text, r->at, (r->n + 1) * sizeof(*r->at));
	vrows_free(r);
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

/* --- views/PARAMS/COLUMN/ ------------------------------------------------------------------- */

static const struct tfs_fs_coldir_entry files[] = {
	{ "data.bin", "data", &data_kind,
	  1 << TFS_COL_RAGGED | 1 << TFS_COL_TEXT | 1 << TFS_COL_BYTES },
	{ "offsets.npy", "offsets", &offsets_kind,
	  1 << TFS_COL_RAGGED | 1 << TFS_COL_TEXT | 1 << TFS_COL_BYTES },
	{ "shapes.npy", "shapes", &tfs_fs_view_column_kind, 1 << TFS_COL_RAGGED },
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
