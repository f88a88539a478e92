/* SPDX-License-Identifier: MIT */
/* querydir: REF/queries/ (a dataset's saved queries: core/query.h) and queries/NAME/views/,
 * and what queries/NAME/ (the query's rows of every column, in its order, from the commit it
 * was saved against) and queries/NAME/views/PARAMS/ (those rows shuffled and sharded as any
 * view) show: views of the query's commit, named query=NAME@VERSION, of its newest version
 * (their kinds are views', in viewdir.c; their files are view files). */
#include "fsnode.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "query.h"
#include "view.h"

int tfs_fs_dataset_has_queries(struct tfs_fs *fs, struct tfs_fs_node *n)
{
	return tfs_query_any(tfs_lake_store(fs->lake), n->dataset->name);
}

int tfs_fs_query_view(struct tfs_fs *fs, struct tfs_fs_node *vn, struct tfs_version **vout,
		      struct tfs_lake_view **fout, char *err, size_t err_cap)
{
	const int sub = vn->kind == &tfs_fs_query_view_kind;
	struct tfs_fs_node *qn = sub ? vn->parent->parent : vn;
	struct tfs_query q;
	char commit[TFS_ID_HEX], id[TFS_ID_HEX], name[1024];
	int rc = tfs_query_head(tfs_lake_store(fs->lake), vn->dataset->name, qn->name, &q);

	*vout = NULL;
	*fout = NULL;
	if (rc) {
		snprintf(err, err_cap, "no query %s", qn->name);
		return rc == -ENOENT ? -EINVAL : rc;
	}
	tfs_id_hex(&q.commit, commit);
	tfs_id_hex(&q.id, id);
	snprintf(name, sizeof(name), "query=%s@%s%s%s", qn->name, id, sub ? "," : "",
		 sub ? vn->name : "");
	tfs_query_free(&q);
	rc = tfs_lake_version(fs->lake, vn->dataset->name, TFS_LAKE_COMMIT, commit, vout);
	if (rc) {
		snprintf(err, err_cap, "its commit %.12s cannot be read", commit);
		return rc == -ENOENT ? -EINVAL : rc;
	}
	rc = tfs_lake_view_get(fs->lake, *vout, name, fout, err, err_cap);
	if (rc) {
		tfs_version_put(*vout);
		*vout = NULL;
	}
	return rc;
}

/* --- queries/NAME/views/ ------------------------------------------------------------------- */

static int qviews_lookup(struct tfs_fs *fs, struct tfs_fs_node *dir, const char *name,
			 struct tfs_fs_node **child)
{
	return tfs_fs_views_child(fs, dir, name, &tfs_fs_query_view_kind, child);
}

const struct tfs_fs_kind tfs_fs_query_views_kind = {
	.name = "query views",
	.mode = S_IFDIR | 0555,
	.lookup = qviews_lookup,
	.list = tfs_fs_views_list,
};

/* --- REF/queries/ -------------------------------------------------------------------------- */

static int queries_lookup(struct tfs_fs *fs, struct tfs_fs_node *dir, const char *name,
			  struct tfs_fs_node **child)
{
	struct tfs_query q;
	int rc = tfs_query_head(tfs_lake_store(fs->lake), dir->dataset->name, name, &q);

	if (rc)
		return rc == -EIO ? -EIO : -ENOENT;
	tfs_query_free(&q);
	*child = tfs_fs_node_child(fs, dir, name, &tfs_fs_query_kind, NULL);
	return *child ? 0 : -ENOMEM;
}

static int queries_list(struct tfs_fs *fs, struct tfs_fs_node *dir, struct tfs_fs_dir *d)
{
	struct tfs_fs_lister l = { fs, dir, d, &tfs_fs_query_kind };

	return tfs_query_list(tfs_lake_store(fs->lake), dir->dataset->name, tfs_fs_list_child, &l);
}

const struct tfs_fs_kind tfs_fs_queries_kind = {
	.name = "queries",
	.mode = S_IFDIR | 0555,
	.lookup = queries_lookup,
	.list = queries_list,
};
