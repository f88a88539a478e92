/* SPDX-License-Identifier: MIT */
/* packfile: the files of a pack view (views/pack=S,.../): tokens.npy, segments.npy and doc.npy,
 * a row a sample in the view's order, made from the token column when read (core/pack.h). */
#include "fsnode.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "pack.h"
#include "view.h"

static int file_of(const char *name)
{
	for (int f = 0; f < TFS_PACK_NFILES; f++)
		if (!strcmp(name, tfs_pack_file_names[f]))
			return f;
	return -1;
}

static uint64_t file_size(const struct tfs_lake_view *lv, enum tfs_pack_file f)
{
	return TFS_NPY_ALIGN + lv->view->n * tfs_pack_row_bytes(lv->view->pack, f);
}

static int pack_getattr(struct tfs_fs *fs, struct tfs_fs_node *n, struct tfs_fs_attr *a)
{
	struct tfs_lake_view *lv;
	int rc = tfs_fs_node_view(fs, tfs_fs_view_dir_of(n), &a->v, &lv);

	if (rc)
		return rc;
	if (lv->view->pack && file_of(n->name) >= 0)
		a->size = file_size(lv, (enum tfs_pack_file)file_of(n->name));
	else
		rc = -ENOENT;
	tfs_lake_view_put(fs->lake, lv);
	return rc;
}

static int pack_open(struct tfs_fs *fs, struct tfs_fs_node *n, const struct fuse_ctx *who,
		     struct tfs_fs_handle *h, struct fuse_file_info *fi)
{
	const struct tfs_pack *p;
	struct tfs_dtype dt;
	uint64_t len;
	int rc;

	(void)who;
	h->acct = tfs_fs_version_acct(fs, n);
	rc = tfs_fs_node_view(fs, tfs_fs_view_dir_of(n), &h->ver, &h->view);
	if (rc)
		return rc;
	if (!tfs_id_eq(&h->ver->commit.id, &n->commit))
		return -ESTALE;
	p = h->view->view->pack;
	if (!p || file_of(n->name) < 0)
		return -ENOENT;
	h->col = (size_t)file_of(n->name);
	h->size = file_size(h->view, (enum tfs_pack_file)h->col);
	h->hdr_len = TFS_NPY_ALIGN;
	tfs_pack_file_type(p, (enum tfs_pack_file)h->col, &dt, &len);
	rc = tfs_npy_header_build(&dt, h->view->view->n, 1, &len, h->header);
	if (!rc)
		rc = tfs_reader_open(h->ver, tfs_lake_cache(fs->lake),
				     h->view->view->on_error != TFS_ON_ERROR_FAIL, &h->reader);
	fi->keep_cache = 1;
	return rc;
}

/* The samples a read covers, made into one buffer, and the part asked for replied. */
static void pack_read(fuse_req_t req, struct tfs_fs *fs, struct tfs_fs_handle *h, size_t size,
		      off_t off)
{
	const enum tfs_pack_file f = (enum tfs_pack_file)h->col;
	const struct tfs_view *view = h->view->view;
	const uint64_t rb = tfs_pack_row_bytes(view->pack, f);
	uint64_t pos = (uint64_t)off, end = pos + size, r0, r1;
	struct tfs_gather_list l;
	uint8_t *buf = NULL;
	size_t hlen;
	int rc = 0, padded;

	tfs_fs_count_read(fs, h, size);
	if (end > h->size)
		end = h->size;
	if (pos >= end) {
		fuse_reply_buf(req, NULL, 0);
		return;
	}
	hlen = pos < TFS_NPY_ALIGN ? (size_t)((end < TFS_NPY_ALIGN ? end : TFS_NPY_ALIGN) - pos)
				   : 0;
	if (end <= TFS_NPY_ALIGN) {
		fuse_reply_buf(req, h->header + pos, hlen);
		return;
	}
	r0 = ((pos > TFS_NPY_ALIGN ? pos : TFS_NPY_ALIGN) - TFS_NPY_ALIGN) / rb;
	r1 = (end - TFS_NPY_ALIGN - 1) / rb;
	buf = malloc(hlen + (r1 - r0 + 1) * rb);
	if (!buf) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	memcpy(buf, h->header + (hlen ? pos : 0), hlen);
	tfs_gather_list_init(&l, tfs_lake_cache(fs->lake));
	for (uint64_t r = r0; r <= r1 && !rc; r++)
		rc = tfs_pack_sample(view->pack, h->reader, view->rows[r], f,
				     buf + hlen + (r - r0) * rb, &l, &padded);
	tfs_gather_list_free(&l);
	if (rc) {
		fuse_reply_err(req, rc == -ENOMEM ? ENOMEM : EIO);
	} else {
		/* The samples' bytes from the first one the read takes. */
		const uint64_t skip = (pos > TFS_NPY_ALIGN ? pos - TFS_NPY_ALIGN : 0) - r0 * rb;

		if (hlen)
			fuse_reply_buf(req, (const char *)buf, (size_t)(end - pos));
		else
			fuse_reply_buf(req, (const char *)buf + skip, (size_t)(end - pos));
	}
	free(buf);
}

static const struct tfs_fs_kind pack_file_kind = {
	.name = "pack file",
	.mode = S_IFREG | 0444,
	.pins_version = 1,
	.getattr = pack_getattr,
	.open = pack_open,
	.read = pack_read,
};

int tfs_fs_pack_lookup(struct tfs_fs *fs, struct tfs_fs_node *dir, struct tfs_version *v,
		       const char *name, struct tfs_fs_node **child)
{
	if (file_of(name) < 0)
		return -ENOENT;
	*child = tfs_fs_node_child(fs, dir, name, &pack_file_kind, v);
	return *child ? 0 : -ENOMEM;
}

int tfs_fs_pack_list(struct tfs_fs *fs, struct tfs_fs_node *dir, struct tfs_version *v,
		     struct tfs_fs_dir *d)
{
	int rc = 0;

	for (int f = 0; f < TFS_PACK_NFILES && !rc; f++)
		rc = tfs_fs_dir_add_child(fs, d, dir, tfs_pack_file_names[f],
					  tfs_pack_file_names[f], &pack_file_kind, v);
	return rc;
}
