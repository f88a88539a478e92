/* SPDX-License-Identifier: MIT */
/* rootdir: the mount's root (the lake's datasets), a dataset's directory (its branches, tags,
 * commits/ and log) and the log file. */
#include "fsnode.h"

#include <errno.h>
#include <string.h>

#include "history.h"
#include "store.h"

#define ADMIN_DIR ".tensorfs"
#define MIXES_DIR "mixes"

/* --- / -------------------------------------------------------------------------------------- */

static int root_lookup(struct tfs_fs *fs, struct tfs_fs_node *dir, const char *name,
		       struct tfs_fs_node **child)
{
	const struct tfs_fs_kind *kind = &tfs_fs_admin_kind;
	int rc;

	if (strcmp(name, ADMIN_DIR)) {
		if (!tfs_name_valid(name))
			return -ENOENT;
		rc = tfs_dataset_check(tfs_lake_store(fs->lake), name);
		/* mixes/: the lake's mixtures (a dataset of that name, from before, wins). */
		if (rc == -ENOENT && !strcmp(name, MIXES_DIR) && tfs_fs_lake_has_mixes(fs))
			rc = 0, kind = &tfs_fs_mixes_kind;
		else if (!rc)
			kind = &tfs_fs_dataset_kind;
		if (rc)
			return rc;
	}
	*child = tfs_fs_node_child(fs, dir, name, kind, NULL);
	return *child ? 0 : -ENOMEM;
}

struct list_ctx {
	struct tfs_fs *fs;
	struct tfs_fs_node *dir;
	struct tfs_fs_dir *d;
	const struct tfs_fs_kind *kind;
	enum tfs_fs_vkind vkind; /* for version directories */
};

static int list_child(void *arg, const char *name, int is_dir)
{
	struct list_ctx *l = arg;
	struct tfs_fs_node *n;
	int rc;

	(void)is_dir;
	if (!tfs_name_valid(name))
		return 0;
	n = tfs_fs_node_child(l->fs, l->dir, name, l->kind, NULL);
	if (!n)
		return -ENOMEM;
	if (l->kind->is_version) {
		pthread_mutex_lock(&l->fs->lock);
		n->vkind = l->vkind;
		pthread_mutex_unlock(&l->fs->lock);
	}
	rc = tfs_fs_dir_add(l->d, name, n->ino, S_IFDIR);
	tfs_fs_node_put(l->fs, n);
	return rc;
}

static int root_list(struct tfs_fs *fs, struct tfs_fs_node *dir, struct tfs_fs_dir *d)
{
	struct list_ctx l = { fs, dir, d, &tfs_fs_dataset_kind, TFS_FS_BRANCH };
	int rc = tfs_fs_dir_add_child(fs, d, dir, ADMIN_DIR, ADMIN_DIR, &tfs_fs_admin_kind, NULL);

	if (!rc && tfs_fs_lake_has_mixes(fs) &&
	    tfs_dataset_check(tfs_lake_store(fs->lake), MIXES_DIR) == -ENOENT)
		rc = tfs_fs_dir_add_child(fs, d, dir, MIXES_DIR, MIXES_DIR, &tfs_fs_mixes_kind,
					  NULL);
	return rc ? rc : tfs_dataset_list(tfs_lake_store(fs->lake), list_child, &l);
}

const struct tfs_fs_kind tfs_fs_root_kind = {
	.name = "root",
	.mode = S_IFDIR | 0555,
	.lookup = root_lookup,
	.list = root_list,
};

/* --- DATASET/ ------------------------------------------------------------------------------- */

static int dataset_lookup(struct tfs_fs *fs, struct tfs_fs_node *dir, const char *name,
			  struct tfs_fs_node **child)
{
	enum tfs_ref_kind kind;
	struct tfs_version *v;
	struct tfs_id id;
	int rc;

	if (!strcmp(name, "commits") || !strcmp(name, "log")) {
		*child = tfs_fs_node_child(fs, dir, name,
					   name[0] == 'c' ? &tfs_fs_commits_kind : &tfs_fs_log_kind,
					   NULL);
		return *child ? 0 : -ENOMEM;
	}
	if (!tfs_name_valid(name))
		return -ENOENT;
	rc = tfs_ref_lookup(tfs_lake_store(fs->lake), dir->name, name, &kind, &id);
	if (rc)
		return rc;
	*child = tfs_fs_node_child(fs, dir, name, &tfs_fs_version_kind, NULL);
	if (!*child)
		return -ENOMEM;
	pthread_mutex_lock(&fs->lock);
	(*child)->vkind = kind == TFS_REF_TAG ? TFS_FS_TAG : TFS_FS_BRANCH;
	pthread_mutex_unlock(&fs->lock);
	/* The ref must name a version that opens. */
	rc = tfs_fs_ref_version(fs, *child, &v);
	tfs_version_put(v);
	return rc;
}

static int dataset_list(struct tfs_fs *fs, struct tfs_fs_node *dir, struct tfs_fs_dir *d)
{
	struct list_ctx l = { fs, dir, d, &tfs_fs_version_kind, TFS_FS_BRANCH };
	int rc = tfs_fs_dir_add_child(fs, d, dir, "commits", "commits", &tfs_fs_commits_kind, NULL);

	if (!rc)
		rc = tfs_fs_dir_add_child(fs, d, dir, "log", "log", &tfs_fs_log_kind, NULL);
	if (!rc)
		rc = tfs_ref_list(tfs_lake_store(fs->lake), dir->name, TFS_REF_BRANCH, list_child,
				  &l);
	l.vkind = TFS_FS_TAG;
	if (!rc)
		rc = tfs_ref_list(tfs_lake_store(fs->lake), dir->name, TFS_REF_TAG, list_child, &l);
	return rc;
}

const struct tfs_fs_kind tfs_fs_dataset_kind = {
	.name = "dataset",
	.mode = S_IFDIR | 0555,
	.is_dataset = 1,
	.lookup = dataset_lookup,
	.list = dataset_list,
};

/* --- DATASET/commits/ ----------------------------------------------------------------------- */

static int commits_lookup(struct tfs_fs *fs, struct tfs_fs_node *dir, const char *name,
			  struct tfs_fs_node **child)
{
	struct tfs_version *v;
	struct tfs_id id;
	int rc;

	if (strlen(name) != TFS_ID_HEX - 1 || tfs_id_parse(name, &id))
		return -ENOENT;
	*child = tfs_fs_node_child(fs, dir, name, &tfs_fs_version_kind, NULL);
	if (!*child)
		return -ENOMEM;
	pthread_mutex_lock(&fs->lock);
	(*child)->vkind = TFS_FS_COMMIT;
	pthread_mutex_unlock(&fs->lock);
	rc = tfs_fs_ref_version(fs, *child, &v);
	tfs_version_put(v);
	return rc;
}

/* Every commit reachable from a ref: the directory lists each once. */
static int commits_list(struct tfs_fs *fs, struct tfs_fs_node *dir, struct tfs_fs_dir *d)
{
	struct list_ctx l = { fs, dir, d, &tfs_fs_version_kind, TFS_FS_COMMIT };
	struct tfs_idset all = { 0 };
	int rc = tfs_reachable_commits(tfs_lake_store(fs->lake), tfs_lake_cache(fs->lake),
				       dir->dataset->name, &all);

	for (size_t i = 0; !rc && i < all.n; i++) {
		char hex[TFS_ID_HEX];

		tfs_id_hex(tfs_idset_at(&all, i), hex);
		rc = list_child(&l, hex, 1);
	}
	tfs_idset_free(&all);
	return rc;
}

const struct tfs_fs_kind tfs_fs_commits_kind = {
	.name = "commits",
	.mode = S_IFDIR | 0555,
	.lookup = commits_lookup,
	.list = commits_list,
};

/* --- DATASET/log ---------------------------------------------------------------------------- */

/* The history of main, regenerated when main moves: its size (and a copy into copy). */
static int log_text(struct tfs_fs *fs, struct tfs_fs_node *ln, struct tfs_buf *copy, uint64_t *size)
{
	const char *ds = ln->dataset->name;
	struct tfs_buf text = { 0 };
	struct tfs_id head;
	int rc = tfs_ref_read(tfs_lake_store(fs->lake), ds, TFS_REF_BRANCH, "main", &head);

	if (rc)
		return rc;
	pthread_mutex_lock(&fs->lock);
	if (!ln->log.data || !tfs_id_eq(&ln->log_head, &head)) {
		pthread_mutex_unlock(&fs->lock);
		rc = tfs_log_text(tfs_lake_store(fs->lake), ds, &head, 0, &text);
		if (rc) {
			tfs_buf_free(&text);
			return rc;
		}
		pthread_mutex_lock(&fs->lock);
		tfs_buf_free(&ln->log);
		ln->log = text;
		ln->log_head = head;
	}
	*size = ln->log.len;
	if (copy)
		rc = tfs_buf_append(copy, ln->log.data, ln->log.len);
	pthread_mutex_unlock(&fs->lock);
	return rc;
}

static int log_getattr(struct tfs_fs *fs, struct tfs_fs_node *n, struct tfs_fs_attr *a)
{
	return log_text(fs, n, NULL, &a->size);
}

/* Generated text whose size may change between stat and read: no page cache. */
static int log_open(struct tfs_fs *fs, struct tfs_fs_node *n, const struct fuse_ctx *who,
		    struct tfs_fs_handle *h, struct fuse_file_info *fi)
{
	(void)who;
	fi->direct_io = 1;
	return log_text(fs, n, &h->text, &h->size);
}

const struct tfs_fs_kind tfs_fs_log_kind = {
	.name = "log",
	.mode = S_IFREG | 0444,
	.getattr = log_getattr,
	.open = log_open,
	.read = tfs_fs_read_text,
};
