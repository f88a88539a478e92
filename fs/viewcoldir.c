/* SPDX-License-Identifier: MIT */
/* viewcoldir: views/PARAMS/COLUMN/ of a ragged, text or bytes column: the view's rows in view
 * order. data.bin holds their bytes one after another, offsets.npy the offsets rebuilt for that
 * order, shapes.npy (ragged) their shapes (a view file of the shapes part). */
#include "fsnode.h"

#include <errno.h>
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

/* The column header (named name) of version v, of another kind than fixed; or NULL. */
static const struct tfs_column *header_of(const struct tfs_version *v, const char *name)
{
	int i = tfs_version_column(v, name);

	return i >= 0 && v->manifest.cols[i].kind != TFS_COL_FIXED ? &v->manifest.cols[i] : NULL;
}

/* Build the view's rows of column name: reads the version's offsets once (O(rows)). */
static int vrows_build(struct tfs_fs *fs, struct tfs_version *v, const struct tfs_lake_view *f,
		       const char *name, struct vrows **out)
{
	const struct tfs_column *h = header_of(v, name);
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

static int getattr_common(struct tfs_fs *fs, struct tfs_fs_node *n, const struct tfs_fs_handle *h,
			  struct tfs_fs_attr *a, int offsets)
{
	struct tfs_lake_view *f = NULL;
	struct vrows *r = NULL;
	int rc;

	if (h) {
		a->v = h->ver;
		tfs_version_get(a->v);
		a->size = h->size;
		return 0;
	}
	rc = file_rows(fs, n, &a->v, &f, &r);
	if (!rc)
		a->size = offsets ? TFS_NPY_ALIGN + (r->n + 1) * 8 : r->at[r->n];
	vrows_free(r);
	tfs_lake_view_put(fs->lake, f);
	return rc;
}

static int data_getattr(struct tfs_fs *fs, struct tfs_fs_node *n, const struct tfs_fs_handle *h,
			struct tfs_fs_attr *a)
{
	return getattr_common(fs, n, h, a, 0);
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

static int offsets_getattr(struct tfs_fs *fs, struct tfs_fs_node *n, const struct tfs_fs_handle *h,
			   struct tfs_fs_attr *a)
{
	return getattr_common(fs, n, h, a, 1);
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

/* Add (d != NULL) or find (named name) the directory's files. */
static int entries(struct tfs_fs *fs, struct tfs_fs_node *dir, const char *name,
		   struct tfs_fs_dir *d, struct tfs_fs_node **child)
{
	static const struct {
		const char *file, *part;
		const struct tfs_fs_kind *kind;
		int ragged_only;
	} files[] = {
		{ "data.bin", "data", &data_kind, 0 },
		{ "offsets.npy", "offsets", &offsets_kind, 0 },
		{ "shapes.npy", "shapes", &tfs_fs_view_column_kind, 1 },
	};
	const struct tfs_column *h;
	struct tfs_version *v;
	int rc = tfs_fs_file_version(fs, dir, &v);

	if (rc)
		return rc;
	h = header_of(v, dir->name);
	rc = h && d ? 0 : -ENOENT;
	for (size_t i = 0; h && i < sizeof(files) / sizeof(files[0]); i++) {
		char col[300];

		if ((files[i].ragged_only && h->kind != TFS_COL_RAGGED) ||
		    (!d && strcmp(name, files[i].file)))
			continue;
		snprintf(col, sizeof(col), "%s/%s", h->name, files[i].part);
		if (d) {
			rc = tfs_fs_dir_add_child(fs, d, dir, files[i].file, col, files[i].kind, v);
			if (rc)
				break;
		} else {
			*child = tfs_fs_node_child(fs, dir, col, files[i].kind, v);
			rc = *child ? 0 : -ENOMEM;
		}
	}
	tfs_version_put(v);
	return rc;
}

static int vcoldir_lookup(struct tfs_fs *fs, struct tfs_fs_node *dir, const char *name,
			  struct tfs_fs_node **child)
{
	return entries(fs, dir, name, NULL, child);
}

static int vcoldir_list(struct tfs_fs *fs, struct tfs_fs_node *dir, struct tfs_fs_dir *d)
{
	return entries(fs, dir, NULL, d, NULL);
}

static int vcoldir_getattr(struct tfs_fs *fs, struct tfs_fs_node *n, const struct tfs_fs_handle *h,
			   struct tfs_fs_attr *a)
{
	(void)h;
	return tfs_fs_file_version(fs, n, &a->v);
}

const struct tfs_fs_kind tfs_fs_view_coldir_kind = {
	.name = "view column directory",
	.mode = S_IFDIR | 0555,
	.pins_version = 1,
	.lookup = vcoldir_lookup,
	.list = vcoldir_list,
	.getattr = vcoldir_getattr,
};
