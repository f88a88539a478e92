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
	rc = tfs_fs_view_file_open(fs, n, h);
	if (rc)
		return rc;
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

struct made {
	struct tfs_fs_handle *h;
	struct tfs_gather_list l;
};

static int make_sample(void *arg, uint64_t r, uint8_t *out)
{
	struct made *m = arg;
	const struct tfs_view *view = m->h->view->view;
	int padded;

	return tfs_pack_sample(view->pack, m->h->reader, view->rows[r],
			       (enum tfs_pack_file)m->h->col, out, &m->l, &padded);
}

static void pack_read(fuse_req_t req, struct tfs_fs *fs, struct tfs_fs_handle *h, size_t size,
		      off_t off)
{
	struct made m = { .h = h };

	tfs_fs_count_read(fs, h, size);
	tfs_gather_list_init(&m.l, tfs_lake_cache(fs->lake));
	tfs_fs_reply_made_rows(req, h, size, off,
			       tfs_pack_row_bytes(h->view->view->pack, (enum tfs_pack_file)h->col),
			       make_sample, &m);
	tfs_gather_list_free(&m.l);
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
