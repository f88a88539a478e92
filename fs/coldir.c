/* SPDX-License-Identifier: MIT */
/* coldir: COLUMN/, the directory of a ragged, text or bytes column: data.bin (every row's bytes),
 * offsets.npy (N + 1 byte offsets), shapes.npy (ragged: a shape a row) and, for text, lines.txt
 * (a row a line, escaped: \\ as \\\\, newline as \n, carriage return as \r). */
#include "fsnode.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cache.h"

#define LINES_CHECKPOINT (64u << 10) /* lines.txt bytes between remembered row starts */
#define OFFSETS_BATCH 1024	     /* offsets read at once */

const struct tfs_column *tfs_fs_column_header(const struct tfs_version *v, const char *name)
{
	int i = tfs_version_column(v, name);

	return i >= 0 && v->manifest.cols[i].kind != TFS_COL_FIXED ? &v->manifest.cols[i] : NULL;
}

/* --- COLUMN/ -------------------------------------------------------------------------------- */

static const struct tfs_fs_kind lines_kind;

static const struct tfs_fs_coldir_entry entries[] = {
	{ "data.bin", "data", &tfs_fs_data_kind,
	  1 << TFS_COL_RAGGED | 1 << TFS_COL_TEXT | 1 << TFS_COL_BYTES },
	{ "offsets.npy", "offsets", &tfs_fs_column_kind,
	  1 << TFS_COL_RAGGED | 1 << TFS_COL_TEXT | 1 << TFS_COL_BYTES },
	{ "shapes.npy", "shapes", &tfs_fs_column_kind, 1 << TFS_COL_RAGGED },
	{ "lines.txt", NULL, &lines_kind, 1 << TFS_COL_TEXT },
};

int tfs_fs_coldir_entries(struct tfs_fs *fs, struct tfs_fs_node *dir,
			  const struct tfs_fs_coldir_entry *table, size_t ntable, const char *name,
			  struct tfs_fs_dir *d, struct tfs_fs_node **child)
{
	const struct tfs_column *h;
	struct tfs_version *v;
	int rc = tfs_fs_file_version(fs, dir, &v);

	if (rc)
		return rc;
	h = tfs_fs_column_header(v, dir->name);
	rc = h ? (d ? 0 : -ENOENT) : -ENOENT;
	for (size_t i = 0; h && i < ntable; i++) {
		const struct tfs_fs_coldir_entry *e = &table[i];
		char col[300];

		if (!(e->kinds & 1 << h->kind) || (!d && strcmp(name, e->file)))
			continue;
		/* Part files are their part's column; lines.txt is the column's. */
		snprintf(col, sizeof(col), "%s%s%s", h->name, e->part ? "/" : "",
			 e->part ? e->part : "");
		if (d) {
			rc = tfs_fs_dir_add_child(fs, d, dir, e->file, col, e->kind, v);
			if (rc)
				break;
		} else {
			*child = tfs_fs_node_child(fs, dir, col, e->kind, v);
			rc = *child ? 0 : -ENOMEM;
		}
	}
	tfs_version_put(v);
	return rc;
}

static int coldir_lookup(struct tfs_fs *fs, struct tfs_fs_node *dir, const char *name,
			 struct tfs_fs_node **child)
{
	return tfs_fs_coldir_entries(fs, dir, entries, sizeof(entries) / sizeof(entries[0]), name,
				     NULL, child);
}

static int coldir_list(struct tfs_fs *fs, struct tfs_fs_node *dir, struct tfs_fs_dir *d)
{
	return tfs_fs_coldir_entries(fs, dir, entries, sizeof(entries) / sizeof(entries[0]), NULL,
				     d, NULL);
}

int tfs_fs_coldir_getattr(struct tfs_fs *fs, struct tfs_fs_node *n, struct tfs_fs_attr *a)
{
	return tfs_fs_file_version(fs, n, &a->v);
}

static int coldir_xattrs(struct tfs_fs *fs, struct tfs_fs_node *n, struct tfs_fs_xattrs *x)
{
	const struct tfs_column *h;
	struct tfs_version *v;
	int rc = tfs_fs_file_version(fs, n, &v);

	if (rc)
		return rc;
	h = tfs_fs_column_header(v, n->name);
	rc = h ? tfs_fs_xattr_commit(x, v) : -ENOENT;
	if (!rc)
		rc = tfs_fs_xattr_add(x, "kind", "%s", tfs_col_kind_name(h->kind));
	if (!rc)
		rc = tfs_fs_xattr_add(x, "dtype", "%s", h->dtype.descr);
	if (!rc)
		rc = tfs_fs_xattr_add(x, "rows", "%" PRIu64, h->rows);
	if (!rc && h->kind == TFS_COL_RAGGED)
		rc = tfs_fs_xattr_add(x, "ndim", "%u", h->ndim);
	tfs_version_put(v);
	return rc;
}

const struct tfs_fs_kind tfs_fs_coldir_kind = {
	.name = "column directory",
	.mode = S_IFDIR | 0555,
	.pins_version = 1,
	.lookup = coldir_lookup,
	.list = coldir_list,
	.getattr = tfs_fs_coldir_getattr,
	.xattrs = coldir_xattrs,
};

/* --- COLUMN/lines.txt ----------------------------------------------------------------------- */

/* Where a row starts in lines.txt. */
struct mark {
	uint64_t row, at;
};

/* An open lines.txt: row starts met so far, one every LINES_CHECKPOINT bytes, so that a read
 * starts at the last row start before it and sequential reads cost one pass. */
struct lines {
	pthread_mutex_t lock;
	const struct tfs_column *h, *data, *offsets; /* in the handle's version */
	size_t data_col, offsets_col;
	struct mark *marks; /* protected by lock */
	size_t nmarks;	    /* protected by lock */
	struct tfs_buf row; /* a row's bytes, scratch; protected by lock */
};

static void lines_free(void *p)
{
	struct lines *l = p;

	if (!l)
		return;
	pthread_mutex_destroy(&l->lock);
	free(l->marks);
	tfs_buf_free(&l->row);
	free(l);
}

static int lines_getattr(struct tfs_fs *fs, struct tfs_fs_node *n, struct tfs_fs_attr *a)
{
	const struct tfs_column *c;
	int rc;

	rc = tfs_fs_file_version(fs, n, &a->v);
	if (rc)
		return rc;
	c = tfs_fs_column_header(a->v, n->name);
	a->size = c ? c->text_bytes : 0;
	return c ? 0 : -ENOENT;
}

static int lines_open(struct tfs_fs *fs, struct tfs_fs_node *n, const struct fuse_ctx *who,
		      struct tfs_fs_handle *h, struct fuse_file_info *fi)
{
	struct lines *l;
	int rc;

	(void)who;
	rc = tfs_fs_file_version(fs, n, &h->ver);
	if (rc)
		return rc;
	l = calloc(1, sizeof(*l));
	if (!l)
		return -ENOMEM;
	pthread_mutex_init(&l->lock, NULL);
	h->priv = l;
	h->priv_free = lines_free;
	l->h = tfs_fs_column_header(h->ver, n->name);
	if (!l->h || l->h->kind != TFS_COL_TEXT)
		return -ENOENT;
	l->data_col = l->h->data;
	l->offsets_col = l->h->offsets;
	l->data = &h->ver->manifest.cols[l->data_col];
	l->offsets = &h->ver->manifest.cols[l->offsets_col];
	l->marks = calloc(1, sizeof(*l->marks)); /* row 0 starts at 0 */
	if (!l->marks)
		return -ENOMEM;
	l->nmarks = 1;
	h->size = l->h->text_bytes;
	fi->keep_cache = 1;
	return 0;
}

int tfs_fs_escape_line(const uint8_t *p, size_t n, struct tfs_buf *out)
{
	int rc = tfs_buf_reserve(out, 2 * n + 1);

	for (size_t i = 0; !rc && i < n; i++) {
		char c = (char)p[i];

		if (c == '\\' || c == '\n' || c == '\r') {
			out->data[out->len++] = '\\';
			c = c == '\n' ? 'n' : c == '\r' ? 'r' : '\\';
		}
		out->data[out->len++] = (uint8_t)c;
	}
	if (!rc)
		out->data[out->len++] = '\n';
	return rc;
}

/* Bytes [off, off + size) of lines.txt into out, from the last row start at or before off. */
static int lines_range(struct tfs_fs *fs, struct tfs_fs_handle *h, struct lines *l, uint64_t off,
		       size_t size, struct tfs_buf *out)
{
	struct tfs_cache *cache = tfs_lake_cache(fs->lake);
	uint64_t offs[OFFSETS_BATCH + 1], first = UINT64_MAX, row, at;
	size_t lo = 0, hi = l->nmarks;
	int rc = 0;

	while (hi - lo > 1) {
		size_t mid = lo + (hi - lo) / 2;

		if (l->marks[mid].at <= off)
			lo = mid;
		else
			hi = mid;
	}
	row = l->marks[lo].row;
	at = l->marks[lo].at;
	while (!rc && row < l->h->rows && out->len < size) {
		uint64_t b0, b1;
		ssize_t got;

		if (first == UINT64_MAX || row >= first + OFFSETS_BATCH) {
			uint64_t n =
				l->h->rows - row < OFFSETS_BATCH ? l->h->rows - row : OFFSETS_BATCH;

			got = tfs_version_read(h->ver, cache, l->offsets_col, row * 8, offs,
					       (size_t)(n + 1) * 8);
			if (got != (ssize_t)((n + 1) * 8))
				return got < 0 ? (int)got : -EIO;
			first = row;
		}
		b0 = offs[row - first];
		b1 = offs[row - first + 1];
		if (b1 < b0 || b1 > l->data->rows)
			return -EIO;
		l->row.len = 0;
		rc = tfs_buf_reserve(&l->row, (size_t)(b1 - b0));
		if (!rc && b1 > b0) {
			got = tfs_version_read(h->ver, cache, l->data_col, b0, l->row.data,
					       (size_t)(b1 - b0));
			if (got != (ssize_t)(b1 - b0))
				return got < 0 ? (int)got : -EIO;
		}
		if (rc)
			break;
		{
			struct tfs_buf line = { 0 };
			uint64_t end;

			rc = tfs_fs_escape_line(l->row.data, (size_t)(b1 - b0), &line);
			end = at + line.len;
			/* The part of this line inside the range. */
			if (!rc && end > off) {
				uint64_t from = at < off ? off - at : 0;
				size_t take = (size_t)(line.len - from);

				if (take > size - out->len)
					take = size - out->len;
				rc = tfs_buf_append(out, line.data + from, take);
			}
			tfs_buf_free(&line);
			at = end;
		}
		row++;
		/* Remember a row start now and then, for reads that come later. */
		if (!rc && at >= l->marks[l->nmarks - 1].at + LINES_CHECKPOINT &&
		    row > l->marks[l->nmarks - 1].row) {
			struct mark *m = realloc(l->marks, (l->nmarks + 1) * sizeof(*m));

			if (m) {
				l->marks = m;
				l->marks[l->nmarks++] = (struct mark){ row, at };
			}
		}
	}
	return rc;
}

static void lines_read(fuse_req_t req, struct tfs_fs *fs, struct tfs_fs_handle *h, size_t size,
		       off_t off)
{
	struct lines *l = h->priv;
	struct tfs_buf out = { 0 };
	int rc;

	if ((uint64_t)off >= h->size) {
		fuse_reply_buf(req, NULL, 0);
		return;
	}
	if (size > h->size - (uint64_t)off)
		size = (size_t)(h->size - (uint64_t)off);
	pthread_mutex_lock(&l->lock);
	rc = tfs_buf_reserve(&out, size);
	if (!rc)
		rc = lines_range(fs, h, l, (uint64_t)off, size, &out);
	pthread_mutex_unlock(&l->lock);
	if (rc)
		fuse_reply_err(req, rc == -ENOMEM ? ENOMEM : EIO);
	else
		fuse_reply_buf(req, (const char *)out.data, out.len);
	tfs_buf_free(&out);
}

static const struct tfs_fs_kind lines_kind = {
	.name = "lines.txt",
	.mode = S_IFREG | 0444,
	.pins_version = 1,
	.getattr = lines_getattr,
	.open = lines_open,
	.read = lines_read,
};
