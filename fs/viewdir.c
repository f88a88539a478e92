/* SPDX-License-Identifier: MIT */
/* viewdir: REF/views/ (named by parameters, listing only its README) and REF/views/PARAMS/, a
 * view's directory of column files. */
#include "fsnode.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "view.h"
#include "viewspans.h"

int tfs_fs_node_view(struct tfs_fs *fs, struct tfs_fs_node *vn, struct tfs_version **vout,
		     struct tfs_lake_view **fout)
{
	struct tfs_lake_view *f = NULL;
	struct tfs_version *v = NULL;
	char err[256] = "";
	int rc;

	*vout = NULL;
	*fout = NULL;
	/* A saved query's directories are views of the query's commit. */
	if (vn->kind == &tfs_fs_query_kind || vn->kind == &tfs_fs_query_view_kind) {
		rc = tfs_fs_query_view(fs, vn, &v, &f, err, sizeof(err));
		goto made;
	}
	rc = tfs_fs_ref_version(fs, vn->vdir, &v);
	if (rc)
		return rc;
	/* Built once per commit and name in the lake, and shared with the control file; the node
	 * keeps none, so the views a mount has met take no more than view_mem once let go. */
	rc = tfs_lake_view_get(fs->lake, v, vn->name, &f, err, sizeof(err));
made:
	if (rc) {
		tfs_version_put(v);
		if (rc == -EINVAL) {
			char ver[160], path[512];

			/* The lookup fails with ENOENT; the reason goes to .tensorfs/errors. */
			tfs_fs_version_name(vn->vdir, ver, sizeof(ver));
			snprintf(path, sizeof(path), "%s/%s/%s%s", vn->dataset->name, ver,
				 vn->kind == &tfs_fs_view_kind ? "views/" : "queries/...",
				 vn->name);
			tfs_fs_stats_error(fs->stats, path, "%s", err);
			rc = -ENOENT;
		}
		return rc;
	}
	*vout = v;
	*fout = f;
	return 0;
}

int tfs_fs_view_file_open(struct tfs_fs *fs, struct tfs_fs_node *n, struct tfs_fs_handle *h)
{
	int rc;

	h->acct = tfs_fs_version_acct(fs, n);
	rc = tfs_fs_node_view(fs, tfs_fs_view_dir_of(n), &h->ver, &h->view);
	if (!rc && !tfs_id_eq(&h->ver->commit.id, &n->commit))
		rc = -ESTALE;
	return rc;
}

struct tfs_fs_node *tfs_fs_view_dir_of(struct tfs_fs_node *n)
{
	while (n && n->kind != &tfs_fs_view_kind && n->kind != &tfs_fs_query_kind &&
	       n->kind != &tfs_fs_query_view_kind)
		n = n->parent;
	return n;
}

/* --- REF/views/ ----------------------------------------------------------------------------- */

int tfs_fs_views_child(struct tfs_fs *fs, struct tfs_fs_node *dir, const char *name,
		       const struct tfs_fs_kind *kind, struct tfs_fs_node **child)
{
	struct tfs_lake_view *f;
	struct tfs_version *v;
	int rc;

	if (!strcmp(name, "README")) {
		*child = tfs_fs_node_child(fs, dir, name, &tfs_fs_view_readme_kind, NULL);
		return *child ? 0 : -ENOMEM;
	}
	*child = tfs_fs_node_child(fs, dir, name, kind, NULL);
	if (!*child)
		return -ENOMEM;
	/* The name must make a view. */
	rc = tfs_fs_node_view(fs, *child, &v, &f);
	tfs_lake_view_put(fs->lake, f);
	tfs_version_put(v);
	return rc;
}

static int views_lookup(struct tfs_fs *fs, struct tfs_fs_node *dir, const char *name,
			struct tfs_fs_node **child)
{
	return tfs_fs_views_child(fs, dir, name, &tfs_fs_view_kind, child);
}

/* Views are named by their parameters: nothing to list but the grammar. */
int tfs_fs_views_list(struct tfs_fs *fs, struct tfs_fs_node *dir, struct tfs_fs_dir *d)
{
	return tfs_fs_dir_add_child(fs, d, dir, "README", "README", &tfs_fs_view_readme_kind, NULL);
}

const struct tfs_fs_kind tfs_fs_views_kind = {
	.name = "views",
	.mode = S_IFDIR | 0555,
	.lookup = views_lookup,
	.list = tfs_fs_views_list,
};

/* --- REF/views/PARAMS/ ---------------------------------------------------------------------- */

/* .bad_rows: the view rows in chunks found damaged for good, a number a line (a name no column
 * can take); made when opened or stat'ed, so that a reader that skips bad rows (the Python
 * Dataset with on_error=skip) asks when a row comes back as zeros. */
static int bad_rows_text(struct tfs_fs *fs, struct tfs_fs_node *n, struct tfs_buf *out)
{
	struct tfs_lake_view *f;
	struct tfs_version *v;
	int rc = tfs_fs_node_view(fs, n->parent, &v, &f);

	if (!rc)
		rc = tfs_view_bad_rows(f->view, v, tfs_lake_cache(fs->lake), out);
	tfs_lake_view_put(fs->lake, f);
	tfs_version_put(v);
	return rc;
}

static int bad_rows_getattr(struct tfs_fs *fs, struct tfs_fs_node *n, struct tfs_fs_attr *a)
{
	struct tfs_buf b = { 0 };
	int rc = bad_rows_text(fs, n, &b);

	a->size = b.len;
	tfs_buf_free(&b);
	return rc;
}

static int bad_rows_open(struct tfs_fs *fs, struct tfs_fs_node *n, const struct fuse_ctx *who,
			 struct tfs_fs_handle *h, struct fuse_file_info *fi)
{
	int rc = bad_rows_text(fs, n, &h->text);

	(void)who;
	h->size = h->text.len;
	fi->direct_io = 1;
	return rc;
}

static const struct tfs_fs_kind bad_rows_kind = {
	.name = "view bad rows",
	.mode = S_IFREG | 0444,
	.getattr = bad_rows_getattr,
	.open = bad_rows_open,
	.read = tfs_fs_read_text,
};

static int view_lookup(struct tfs_fs *fs, struct tfs_fs_node *dir, const char *name,
		       struct tfs_fs_node **child)
{
	struct tfs_lake_view *f;
	struct tfs_version *v;
	int rc;

	if (dir->kind == &tfs_fs_query_kind && !strcmp(name, "views")) {
		*child = tfs_fs_node_child(fs, dir, name, &tfs_fs_query_views_kind, NULL);
		return *child ? 0 : -ENOMEM;
	}
	rc = tfs_fs_node_view(fs, dir, &v, &f);
	if (!rc && f->view->pack)
		rc = tfs_fs_pack_lookup(fs, dir, v, name, child);
	else if (!rc && !strcmp(name, ".bad_rows"))
		rc = (*child = tfs_fs_node_child(fs, dir, name, &bad_rows_kind, NULL)) ? 0
										       : -ENOMEM;
	else if (!rc)
		rc = tfs_fs_columns_lookup(fs, dir, v, name, &tfs_fs_view_column_kind, child);
	tfs_lake_view_put(fs->lake, f);
	tfs_version_put(v);
	return rc;
}

static int view_list(struct tfs_fs *fs, struct tfs_fs_node *dir, struct tfs_fs_dir *d)
{
	struct tfs_lake_view *f;
	struct tfs_version *v;
	int rc = tfs_fs_node_view(fs, dir, &v, &f);

	if (!rc && f->view->pack) {
		rc = tfs_fs_pack_list(fs, dir, v, d);
		goto out;
	}
	if (!rc)
		rc = tfs_fs_columns_list(fs, dir, v, &tfs_fs_view_column_kind, d);
	if (!rc)
		rc = tfs_fs_dir_add_child(fs, d, dir, ".bad_rows", ".bad_rows", &bad_rows_kind,
					  NULL);
	if (!rc && dir->kind == &tfs_fs_query_kind)
		rc = tfs_fs_dir_add_child(fs, d, dir, "views", "views", &tfs_fs_query_views_kind,
					  NULL);
out:
	tfs_lake_view_put(fs->lake, f);
	tfs_version_put(v);
	return rc;
}

static int view_getattr(struct tfs_fs *fs, struct tfs_fs_node *n, struct tfs_fs_attr *a)
{
	struct tfs_lake_view *f;
	int rc = tfs_fs_node_view(fs, n, &a->v, &f);

	tfs_lake_view_put(fs->lake, f);
	return rc;
}

const struct tfs_fs_kind tfs_fs_view_kind = {
	.name = "view",
	.mode = S_IFDIR | 0555,
	.lookup = view_lookup,
	.list = view_list,
	.getattr = view_getattr,
};

/* A saved query's directories (querydir.c) are views of the query's commit: REF/queries/NAME/
 * (with its views/) and REF/queries/NAME/views/PARAMS/. */
const struct tfs_fs_kind tfs_fs_query_kind = {
	.name = "query",
	.mode = S_IFDIR | 0555,
	.lookup = view_lookup,
	.list = view_list,
	.getattr = view_getattr,
};

const struct tfs_fs_kind tfs_fs_query_view_kind = {
	.name = "query view",
	.mode = S_IFDIR | 0555,
	.lookup = view_lookup,
	.list = view_list,
	.getattr = view_getattr,
};

/* --- views/README --------------------------------------------------------------------------- */

static int readme_getattr(struct tfs_fs *fs, struct tfs_fs_node *n, struct tfs_fs_attr *a)
{
	(void)fs, (void)n;
	a->size = strlen(tfs_view_readme);
	return 0;
}

static int readme_open(struct tfs_fs *fs, struct tfs_fs_node *n, const struct fuse_ctx *who,
		       struct tfs_fs_handle *h, struct fuse_file_info *fi)
{
	(void)fs, (void)n, (void)who;
	fi->direct_io = 1;
	h->size = strlen(tfs_view_readme);
	return tfs_buf_append(&h->text, tfs_view_readme, h->size);
}

const struct tfs_fs_kind tfs_fs_view_readme_kind = {
	.name = "views README",
	.mode = S_IFREG | 0444,
	.getattr = readme_getattr,
	.open = readme_open,
	.read = tfs_fs_read_text,
};
