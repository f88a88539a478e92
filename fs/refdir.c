/* SPDX-License-Identifier: MIT */
/* refdir: a version directory (a branch or tag, DATASET/REF/, or a commit, DATASET/commits/ID/)
 * with its column files, schema.json and views/; and the versions they show. */
#include "fsnode.h"

#include <assert.h>
#include <errno.h>
#include <string.h>

int tfs_fs_ref_version(struct tfs_fs *fs, struct tfs_fs_node *vdir, struct tfs_version **out)
{
	static const enum tfs_lake_ref_kind kinds[] = {
		[TFS_FS_BRANCH] = TFS_LAKE_BRANCH,
		[TFS_FS_TAG] = TFS_LAKE_TAG,
		[TFS_FS_COMMIT] = TFS_LAKE_COMMIT,
	};
	enum tfs_fs_vkind kind;
	int rc;

	assert(vdir->kind->is_version);
	pthread_mutex_lock(&fs->lock);
	kind = vdir->vkind;
	pthread_mutex_unlock(&fs->lock);
	rc = tfs_lake_version(fs->lake, vdir->dataset->name, kinds[kind], vdir->name, out);
	if (rc)
		*out = NULL;
	return rc == -EIO || rc == -ENOMEM ? rc : rc ? -ENOENT : 0;
}

int tfs_fs_file_version(struct tfs_fs *fs, struct tfs_fs_node *n, struct tfs_version **v)
{
	struct tfs_version *nv;
	int rc;

	pthread_mutex_lock(&fs->lock);
	*v = n->ver;
	if (*v)
		tfs_version_get(*v);
	pthread_mutex_unlock(&fs->lock);
	if (*v)
		return 0;
	/* Forgotten by the kernel and named again (by inode number, e.g. through NFS-style
	 * handles): open its commit afresh. */
	rc = tfs_version_open(tfs_lake_store(fs->lake), n->dataset->name, &n->commit, &nv);
	if (rc)
		return rc == -EIO ? -EIO : -ENOENT;
	pthread_mutex_lock(&fs->lock);
	if (!n->ver) {
		n->ver = nv;
		tfs_version_get(nv);
	}
	pthread_mutex_unlock(&fs->lock);
	*v = nv;
	return 0;
}

/* --- REF/, commits/ID/ ---------------------------------------------------------------------- */

static int version_lookup(struct tfs_fs *fs, struct tfs_fs_node *dir, const char *name,
			  struct tfs_fs_node **child)
{
	struct tfs_version *v;
	int rc = tfs_fs_ref_version(fs, dir, &v);

	if (rc)
		return rc;
	if (!strcmp(name, "schema.json")) {
		*child = tfs_fs_node_child(fs, dir, name, &tfs_fs_schema_kind, v);
		rc = *child ? 0 : -ENOMEM;
	} else if (!strcmp(name, "views")) {
		*child = tfs_fs_node_child(fs, dir, name, &tfs_fs_views_kind, NULL);
		rc = *child ? 0 : -ENOMEM;
	} else if (!strcmp(name, "queries") && tfs_version_column(v, name) < 0) {
		*child = tfs_fs_node_child(fs, dir, name, &tfs_fs_queries_kind, NULL);
		rc = *child ? 0 : -ENOMEM;
	} else {
		rc = tfs_fs_columns_lookup(fs, dir, v, name, &tfs_fs_column_kind, child);
	}
	tfs_version_put(v);
	return rc;
}

static int version_list(struct tfs_fs *fs, struct tfs_fs_node *dir, struct tfs_fs_dir *d)
{
	struct tfs_version *v;
	int rc = tfs_fs_ref_version(fs, dir, &v);

	if (!rc)
		rc = tfs_fs_columns_list(fs, dir, v, &tfs_fs_column_kind, d);
	if (!rc)
		rc = tfs_fs_dir_add_child(fs, d, dir, "schema.json", "schema.json",
					  &tfs_fs_schema_kind, v);
	if (!rc)
		rc = tfs_fs_dir_add_child(fs, d, dir, "views", "views", &tfs_fs_views_kind, NULL);
	if (!rc && tfs_version_column(v, "queries") < 0 && tfs_fs_dataset_has_queries(fs, dir))
		rc = tfs_fs_dir_add_child(fs, d, dir, "queries", "queries", &tfs_fs_queries_kind,
					  NULL);
	tfs_version_put(v);
	return rc;
}

static int version_getattr(struct tfs_fs *fs, struct tfs_fs_node *n, struct tfs_fs_attr *a)
{
	return tfs_fs_ref_version(fs, n, &a->v);
}

static int version_xattrs(struct tfs_fs *fs, struct tfs_fs_node *n, struct tfs_fs_xattrs *x)
{
	struct tfs_version *v;
	int rc = tfs_fs_ref_version(fs, n, &v);

	if (!rc)
		rc = tfs_fs_xattr_commit(x, v);
	tfs_version_put(v);
	return rc;
}

const struct tfs_fs_kind tfs_fs_version_kind = {
	.name = "version",
	.mode = S_IFDIR | 0555,
	.is_version = 1,
	.lookup = version_lookup,
	.list = version_list,
	.getattr = version_getattr,
	.xattrs = version_xattrs,
};

/* --- schema.json ---------------------------------------------------------------------------- */

static int schema_getattr(struct tfs_fs *fs, struct tfs_fs_node *n, struct tfs_fs_attr *a)
{
	int rc = 0;

	rc = tfs_fs_file_version(fs, n, &a->v);
	if (!rc)
		a->size = a->v->schema.len;
	return rc;
}

static int schema_open(struct tfs_fs *fs, struct tfs_fs_node *n, const struct fuse_ctx *who,
		       struct tfs_fs_handle *h, struct fuse_file_info *fi)
{
	int rc = tfs_fs_file_version(fs, n, &h->ver);

	(void)who;
	if (rc)
		return rc;
	h->size = h->ver->schema.len;
	/* One inode per commit: what the kernel cached for it stays true. */
	fi->keep_cache = 1;
	return 0;
}

static void schema_read(fuse_req_t req, struct tfs_fs *fs, struct tfs_fs_handle *h, size_t size,
			off_t off)
{
	(void)fs;
	tfs_fs_reply_bytes(req, h->ver->schema.data, h->ver->schema.len, size, off);
}

static int schema_xattrs(struct tfs_fs *fs, struct tfs_fs_node *n, struct tfs_fs_xattrs *x)
{
	struct tfs_version *v;
	int rc = tfs_fs_file_version(fs, n, &v);

	if (!rc)
		rc = tfs_fs_xattr_commit(x, v);
	tfs_version_put(v);
	return rc;
}

const struct tfs_fs_kind tfs_fs_schema_kind = {
	.name = "schema",
	.mode = S_IFREG | 0444,
	.pins_version = 1,
	.getattr = schema_getattr,
	.open = schema_open,
	.read = schema_read,
	.xattrs = schema_xattrs,
};
