/* SPDX-License-Identifier: MIT */
/* colfile: COLUMN.npy, a column as an NPY file: of a version (its rows in order, served straight
 * from the chunk cache) or of a view (the view's rows, in view order). */
#include "fsnode.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>

#include "cache.h"
#include "view.h"
#include "viewspans.h"

#define MAX_IOV 320 /* pieces per reply (a MiB of 4 KiB frames and change); under UIO_MAXIOV */

static uint64_t column_size(const struct tfs_column *c)
{
	return TFS_NPY_ALIGN + c->rows * c->row_bytes;
}

static uint64_t view_file_size(const struct tfs_lake_view *f, const struct tfs_column *c)
{
	return TFS_NPY_ALIGN + f->view->n * c->row_bytes;
}

/* Column name of a "<col>.npy" file name, into buf; NULL if it is not one. */
static const char *column_of(const char *name, char *buf, size_t cap)
{
	size_t n = strlen(name);

	if (n <= 4 || n - 4 >= cap || strcmp(name + n - 4, ".npy"))
		return NULL;
	memcpy(buf, name, n - 4);
	buf[n - 4] = 0;
	return buf;
}

int tfs_fs_columns_lookup(struct tfs_fs *fs, struct tfs_fs_node *dir, struct tfs_version *v,
			  const char *name, const struct tfs_fs_kind *kind,
			  struct tfs_fs_node **child)
{
	char col[256];
	int i;

	/* COLUMN.npy for a fixed column; COLUMN/ for the others (not in views yet). */
	if (column_of(name, col, sizeof(col))) {
		i = tfs_version_column(v, col);
		if (i < 0 || v->manifest.cols[i].kind != TFS_COL_FIXED ||
		    v->manifest.cols[i].part != TFS_PART_NONE)
			return -ENOENT;
		*child = tfs_fs_node_child(fs, dir, col, kind, v);
	} else {
		i = tfs_version_column(v, name);
		if (i < 0 || v->manifest.cols[i].kind == TFS_COL_FIXED)
			return -ENOENT;
		*child = tfs_fs_node_child(fs, dir, name,
					   kind == &tfs_fs_view_column_kind
						   ? &tfs_fs_view_coldir_kind
						   : &tfs_fs_coldir_kind,
					   v);
	}
	return *child ? 0 : -ENOMEM;
}

int tfs_fs_columns_list(struct tfs_fs *fs, struct tfs_fs_node *dir, struct tfs_version *v,
			const struct tfs_fs_kind *kind, struct tfs_fs_dir *d)
{
	int rc = 0;

	for (size_t i = 0; !rc && i < v->manifest.ncols; i++) {
		const struct tfs_column *c = &v->manifest.cols[i];
		char file[160];

		if (c->part != TFS_PART_NONE)
			continue; /* in their column's directory */
		if (c->kind != TFS_COL_FIXED) {
			rc = tfs_fs_dir_add_child(fs, d, dir, c->name, c->name,
						  kind == &tfs_fs_view_column_kind
							  ? &tfs_fs_view_coldir_kind
							  : &tfs_fs_coldir_kind,
						  v);
			continue;
		}
		snprintf(file, sizeof(file), "%s.npy", c->name);
		rc = tfs_fs_dir_add_child(fs, d, dir, file, c->name, kind, v);
	}
	return rc;
}

/* Reads of a column file count towards the mount's and the version's totals. */
void tfs_fs_count_read(struct tfs_fs *fs, struct tfs_fs_handle *h, size_t size)
{
	__atomic_add_fetch(&fs->reads, 1, __ATOMIC_RELAXED);
	__atomic_add_fetch(&fs->read_bytes, size, __ATOMIC_RELAXED);
	if (h->acct)
		tfs_fs_acct_read(h->acct, size);
}

/* The read account of the file's version directory. */
struct tfs_fs_acct *tfs_fs_version_acct(struct tfs_fs *fs, const struct tfs_fs_node *n)
{
	char ver[160];

	tfs_fs_version_name(n->vdir, ver, sizeof(ver));
	return tfs_fs_stats_acct(fs->stats, n->dataset->name, ver);
}

static int column_xattrs(struct tfs_fs *fs, struct tfs_fs_node *n, struct tfs_fs_xattrs *x)
{
	const struct tfs_column *c;
	struct tfs_version *v;
	char shape[TFS_MAX_DIMS * 22];
	size_t len = 0;
	int rc = tfs_fs_file_version(fs, n, &v);

	if (rc)
		return rc;
	if (tfs_version_column(v, n->name) < 0) {
		rc = -ENOENT;
		goto out;
	}
	c = &v->manifest.cols[tfs_version_column(v, n->name)];
	/* The shape of one row, as in schema.json. */
	len += (size_t)snprintf(shape, sizeof(shape), "[");
	for (unsigned d = 0; d < c->ndim && len < sizeof(shape); d++)
		len += (size_t)snprintf(shape + len, sizeof(shape) - len, "%s%" PRIu64,
					d ? ", " : "", c->shape[d]);
	if (len < sizeof(shape))
		snprintf(shape + len, sizeof(shape) - len, "]");
	rc = tfs_fs_xattr_commit(x, v);
	if (!rc)
		rc = tfs_fs_xattr_add(x, "dtype", "%s", c->dtype.descr);
	if (!rc)
		rc = tfs_fs_xattr_add(x, "shape", "%s", shape);
	if (!rc)
		rc = tfs_fs_xattr_add(x, "rows", "%" PRIu64, c->rows);
	if (!rc)
		rc = tfs_fs_xattr_add(x, "chunk_bytes", "%" PRIu64,
				      c->rows_per_chunk ? c->rows_per_chunk * c->row_bytes
							: c->chunk_bytes);
	if (!rc)
		rc = tfs_fs_xattr_add(x, "codec", "%s", tfs_codec_by_id(c->codec)->name);
out:
	tfs_version_put(v);
	return rc;
}

/* --- a version's COLUMN.npy ----------------------------------------------------------------- */

static int column_getattr(struct tfs_fs *fs, struct tfs_fs_node *n, struct tfs_fs_attr *a)
{
	int col, rc = 0;

	rc = tfs_fs_file_version(fs, n, &a->v);
	if (rc)
		return rc;
	col = tfs_version_column(a->v, n->name);
	if (col >= 0)
		a->size = n->kind == &tfs_fs_data_kind ? a->v->manifest.cols[col].rows
						       : column_size(&a->v->manifest.cols[col]);
	return 0;
}

/* A version's COLUMN.npy, or a part's data.bin (its bytes, no header). */
static int column_open(struct tfs_fs *fs, struct tfs_fs_node *n, const struct fuse_ctx *who,
		       struct tfs_fs_handle *h, struct fuse_file_info *fi)
{
	const struct tfs_column *c;
	int rc;

	(void)who;
	h->acct = tfs_fs_version_acct(fs, n);
	rc = tfs_fs_file_version(fs, n, &h->ver);
	if (rc)
		return rc;
	if (tfs_version_column(h->ver, n->name) < 0)
		return -ENOENT;
	h->col = (size_t)tfs_version_column(h->ver, n->name);
	c = &h->ver->manifest.cols[h->col];
	if (n->kind == &tfs_fs_data_kind) {
		h->size = c->rows * c->row_bytes;
		h->hdr_len = 0;
	} else {
		h->size = column_size(c);
		h->hdr_len = TFS_NPY_ALIGN;
		rc = tfs_npy_header_build(&c->dtype, c->rows, c->ndim, c->shape, h->header);
	}
	if (!rc)
		rc = tfs_reader_open_lake(fs->lake, h->ver, NULL, 0, &h->reader);
	if (!rc)
		rc = tfs_reader_prefetch(h->reader, h->col, NULL);
	/* One inode per commit: what the kernel cached for it stays true. */
	fi->keep_cache = 1;
	return rc;
}

/* -o splice: the same reply through libfuse's splice path (vmsplice of the pieces into a pipe,
 * splice into /dev/fuse). Measured against writev for the README; writev is the default. */
static void reply_spliced(fuse_req_t req, const struct iovec *iov, size_t count)
{
	struct fuse_bufvec *bv = calloc(1, sizeof(*bv) + count * sizeof(bv->buf[0]));

	if (!bv) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	bv->count = count;
	for (size_t i = 0; i < count; i++) {
		bv->buf[i].mem = iov[i].iov_base;
		bv->buf[i].size = iov[i].iov_len;
	}
	fuse_reply_data(req, bv, FUSE_BUF_SPLICE_NONBLOCK);
	free(bv);
}

/* Tiny chunks would need more iovecs than writev takes: assemble the reply in one buffer. */
static void read_column_copy(fuse_req_t req, struct tfs_fs *fs, struct tfs_fs_handle *h,
			     uint64_t pos, uint64_t end)
{
	size_t len = (size_t)(end - pos), hdr = 0;
	char *buf = malloc(len);
	ssize_t r;

	if (!buf) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	if (pos < h->hdr_len) {
		hdr = (size_t)((end < h->hdr_len ? end : h->hdr_len) - pos);
		memcpy(buf, h->header + pos, hdr);
	}
	r = tfs_version_read(h->ver, tfs_lake_cache(fs->lake), h->col, pos + hdr - h->hdr_len,
			     buf + hdr, len - hdr);
	if (r < 0 || (size_t)r != len - hdr)
		fuse_reply_err(req, r == -ENOMEM ? ENOMEM : EIO);
	else
		fuse_reply_buf(req, buf, len);
	free(buf);
}

static void column_read(fuse_req_t req, struct tfs_fs *fs, struct tfs_fs_handle *h, size_t size,
			off_t off)
{
	const struct tfs_column *c = &h->ver->manifest.cols[h->col];
	const uint64_t hdr = h->hdr_len, rb = c->row_bytes;
	uint64_t pos = (uint64_t)off, end = (uint64_t)off + size;
	struct tfs_cache_entry **pinned = NULL;
	struct iovec *iov = NULL;
	size_t npinned = 0, maxbufs, count = 0, k0 = 0, k1 = 0;
	char header[TFS_NPY_ALIGN];
	int rc = 0, whole = 1;

	tfs_fs_count_read(fs, h, size);
	if (end > h->size)
		end = h->size;
	if (pos >= end) {
		fuse_reply_buf(req, NULL, 0);
		return;
	}
	/* The chunks the data part of the range touches. */
	if (end > hdr && rb) {
		const uint64_t r0 = (pos > hdr ? pos - hdr : 0) / rb, r1 = (end - 1 - hdr) / rb;

		k0 = tfs_column_chunk_of(c, r0);
		k1 = tfs_column_chunk_of(c, r1);
		whole = tfs_reader_at(h->reader, r0, r1, h->size - end);
	}
	/* One buffer for the header part plus one per chunk touched; a reader that jumps is served
	 * frames of chunks not cached whole (at least TFS_FRAME_MIN bytes each), when they fit. */
	maxbufs = 2 + (end > hdr && rb ? k1 - k0 + 1 : 0);
	if (!whole && maxbufs + (maxbufs - 2) + (end - pos) / TFS_FRAME_MIN <= MAX_IOV)
		maxbufs += (maxbufs - 2) + (size_t)((end - pos) / TFS_FRAME_MIN);
	else
		whole = 1;
	if (maxbufs > MAX_IOV) {
		read_column_copy(req, fs, h, pos, end);
		return;
	}
	iov = calloc(maxbufs, sizeof(*iov));
	pinned = calloc(maxbufs, sizeof(*pinned));
	if (!iov || !pinned) {
		rc = -ENOMEM;
		goto out;
	}
	if (pos < hdr) {
		size_t n = (size_t)((end < hdr ? end : hdr) - pos);

		/* A copy: once the reply is written the reader may close the file, and its release
		 * (on another thread) frees the handle while writev is still returning. */
		memcpy(header, h->header + pos, n);
		iov[count].iov_base = header;
		iov[count].iov_len = n;
		count++;
		pos += n;
	}
	while (pos < end) {
		const uint64_t dpos = pos - hdr;
		const size_t k = tfs_column_chunk_of(c, dpos / rb);
		size_t in = (size_t)(dpos - tfs_column_chunk_first(c, k) * rb), n;
		struct tfs_cache_entry *e;
		uint64_t base = 0;

		assert(count < maxbufs);
		rc = whole ? tfs_version_chunk_get(h->ver, tfs_lake_cache(fs->lake), h->col, k, &e)
			   : tfs_version_piece_get(h->ver, tfs_lake_cache(fs->lake),
						   tfs_lake_pool(fs->lake), h->col, k, in,
						   end - pos, &e, &base);
		if (rc)
			goto out;
		pinned[npinned++] = e;
		in -= (size_t)base;
		n = e->len - in;
		if (n > end - pos)
			n = (size_t)(end - pos);
		iov[count].iov_base = (void *)(e->data + in);
		iov[count].iov_len = n;
		count++;
		pos += n;
	}
	/* The reply is written straight from the cache entries (one writev), which stay pinned
	 * until it returns. */
	if (fs->cfg->splice)
		reply_spliced(req, iov, count);
	else
		fuse_reply_iov(req, iov, (int)count);
out:
	for (size_t i = 0; i < npinned; i++)
		tfs_cache_put(tfs_lake_cache(fs->lake), pinned[i]);
	free(pinned);
	free(iov);
	if (rc)
		fuse_reply_err(req, rc == -ENOMEM ? ENOMEM : EIO);
}

/* Reads of a view column: the reader gathers the rows from wherever the view order puts them,
 * and the reply is written straight from the pinned chunks. */
static void view_column_read(fuse_req_t req, struct tfs_fs *fs, struct tfs_fs_handle *h,
			     size_t size, off_t off)
{
	const struct tfs_column *c = &h->ver->manifest.cols[h->col];
	const struct tfs_view *view = h->view->view;
	const uint64_t rb = c->row_bytes;
	uint64_t pos = (uint64_t)off, end = pos + size, from = 0, to = 0, r0 = 0;
	struct tfs_gather_result res = { 0 };
	size_t hlen; /* bytes of the header the read takes */
	struct tfs_gather_list l;
	int rc = 0;

	tfs_fs_count_read(fs, h, size);
	if (end > h->size)
		end = h->size;
	if (pos >= end) {
		fuse_reply_buf(req, NULL, 0);
		return;
	}
	hlen = pos < TFS_NPY_ALIGN ? (size_t)((end < TFS_NPY_ALIGN ? end : TFS_NPY_ALIGN) - pos)
				   : 0;
	tfs_gather_list_init(&l, tfs_lake_cache(fs->lake));
	if (end > TFS_NPY_ALIGN && rb) {
		const struct tfs_gather_place at = { 0, 0, 0, 0 };
		uint64_t r1;

		from = (pos > TFS_NPY_ALIGN ? pos : TFS_NPY_ALIGN) - TFS_NPY_ALIGN;
		to = end - TFS_NPY_ALIGN;
		r0 = from / rb;
		r1 = (to - 1) / rb;
		tfs_reader_at(h->reader, r0, r1, h->size - end);
		rc = tfs_reader_gather(h->reader, h->col, view->rows + r0, (size_t)(r1 - r0 + 1),
				       &at, NULL, &l, &res);
	}
	/* Offsets in the list are from row r0's first byte. The kernel copies each row once,
	 * from the chunks pinned until the reply returns. */
	if (rc)
		fuse_reply_err(req, rc == -ENOMEM ? ENOMEM : EIO);
	else
		tfs_fs_reply_gather(req, h->header + (hlen ? pos : 0), hlen, &l, from - r0 * rb,
				    to - r0 * rb, res.padded > 0);
	tfs_gather_list_free(&l);
}

/* --- a view's COLUMN.npy -------------------------------------------------------------------- */

static int view_column_getattr(struct tfs_fs *fs, struct tfs_fs_node *n, struct tfs_fs_attr *a)
{
	struct tfs_lake_view *f;
	int col, rc;

	rc = tfs_fs_node_view(fs, tfs_fs_view_dir_of(n), &a->v, &f);
	if (rc)
		return rc;
	col = tfs_version_column(a->v, n->name);
	if (col >= 0)
		a->size = view_file_size(f, &a->v->manifest.cols[col]);
	tfs_lake_view_put(fs->lake, f);
	return col >= 0 ? 0 : -ENOENT;
}

/* The reader prefetches in the order the view first needs each chunk, publishes that order to
 * the cache (MIN eviction) and warms the next epoch near the end. */
static int view_column_open(struct tfs_fs *fs, struct tfs_fs_node *n, const struct fuse_ctx *who,
			    struct tfs_fs_handle *h, struct fuse_file_info *fi)
{
	const struct tfs_column *c;
	int rc;

	(void)who;
	rc = tfs_fs_view_file_open(fs, n, h);
	if (rc)
		return rc;
	if (tfs_version_column(h->ver, n->name) < 0)
		return -ENOENT;
	h->col = (size_t)tfs_version_column(h->ver, n->name);
	c = &h->ver->manifest.cols[h->col];
	h->size = view_file_size(h->view, c);
	h->hdr_len = TFS_NPY_ALIGN;
	rc = tfs_npy_header_build(&c->dtype, h->view->view->n, c->ndim, c->shape, h->header);
	if (!rc)
		rc = tfs_reader_open_lake(fs->lake, h->ver, h->view,
					  h->view->view->on_error != TFS_ON_ERROR_FAIL, &h->reader);
	if (!rc)
		rc = tfs_reader_prefetch(h->reader, h->col, NULL);
	if (!rc)
		rc = tfs_reader_plan(h->reader, &h->col, NULL, 1, c->row_bytes, 0);
	if (!rc)
		tfs_reader_warm_columns(h->reader, &h->col, 1);
	/* One inode per commit: what the kernel cached for it stays true. */
	fi->keep_cache = 1;
	return rc;
}

const struct tfs_fs_kind tfs_fs_column_kind = {
	.name = "column",
	.mode = S_IFREG | 0444,
	.pins_version = 1,
	.getattr = column_getattr,
	.open = column_open,
	.read = column_read,
	.xattrs = column_xattrs,
};

const struct tfs_fs_kind tfs_fs_view_column_kind = {
	.name = "view column",
	.mode = S_IFREG | 0444,
	.pins_version = 1,
	.getattr = view_column_getattr,
	.open = view_column_open,
	.read = view_column_read,
	.xattrs = column_xattrs,
};

/* --- COLUMN/data.bin: a data part's bytes, with no header ----------------------------------- */

const struct tfs_fs_kind tfs_fs_data_kind = {
	.name = "data.bin",
	.mode = S_IFREG | 0444,
	.pins_version = 1,
	.getattr = column_getattr,
	.open = column_open,
	.read = column_read,
	.xattrs = column_xattrs,
};
