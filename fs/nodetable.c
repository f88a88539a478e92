/* SPDX-License-Identifier: MIT */
/* nodetable: the file system's nodes by inode number and by (parent, name), directory listings
 * and open files. */
#include "fsnode.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int tfs_fs_nodes_init(struct tfs_fs *fs)
{
	struct tfs_fs_node *root;

	fs->cap = 1024;
	fs->hsize = 4096;
	fs->nodes = calloc(fs->cap, sizeof(*fs->nodes));
	fs->htab = calloc(fs->hsize, sizeof(*fs->htab));
	root = calloc(1, sizeof(*root));
	if (!fs->nodes || !fs->htab || !root || !(root->name = strdup(""))) {
		free(root);
		return -ENOMEM;
	}
	root->kind = &tfs_fs_root_kind;
	root->ino = FUSE_ROOT_ID;
	fs->nodes[fs->nnodes++] = root;
	return 0;
}

void tfs_fs_nodes_free(struct tfs_fs *fs)
{
	for (size_t i = 0; i < fs->nnodes; i++) {
		tfs_version_put(fs->nodes[i]->ver);
		tfs_buf_free(&fs->nodes[i]->log);
		free(fs->nodes[i]->name);
		free(fs->nodes[i]);
	}
	free(fs->nodes);
	free(fs->htab);
}

static size_t hash_of(fuse_ino_t parent, const char *name)
{
	uint64_t h = 1469598103934665603ull ^ parent;

	for (; *name; name++)
		h = (h ^ (unsigned char)*name) * 1099511628211ull;
	return (size_t)h;
}

struct tfs_fs_node *tfs_fs_node_get(struct tfs_fs *fs, fuse_ino_t ino)
{
	struct tfs_fs_node *n = NULL;

	pthread_mutex_lock(&fs->lock);
	if (ino >= 1 && ino <= fs->nnodes)
		n = fs->nodes[ino - 1];
	pthread_mutex_unlock(&fs->lock);
	return n;
}

struct tfs_fs_node *tfs_fs_node_child(struct tfs_fs *fs, struct tfs_fs_node *parent,
				      const char *name, const struct tfs_fs_kind *kind,
				      struct tfs_version *v)
{
	struct tfs_fs_node *n;
	size_t b;

	pthread_mutex_lock(&fs->lock);
	b = hash_of(parent->ino, name) & (fs->hsize - 1);
	for (n = fs->htab[b]; n; n = n->hnext)
		if (n->parent == parent && !strcmp(n->name, name) && n->kind == kind &&
		    (!v || tfs_id_eq(&n->commit, &v->commit.id)))
			goto out;
	if (fs->nnodes == fs->cap) {
		size_t cap = fs->cap * 2;
		struct tfs_fs_node **nn = realloc(fs->nodes, cap * sizeof(*nn));

		if (!nn)
			goto out;
		fs->nodes = nn;
		fs->cap = cap;
	}
	n = calloc(1, sizeof(*n));
	if (!n || !(n->name = strdup(name))) {
		free(n);
		n = NULL;
		goto out;
	}
	n->kind = kind;
	n->parent = parent;
	n->dataset = kind->is_dataset ? n : parent->dataset;
	n->vdir = kind->is_version ? n : parent->vdir;
	if (v)
		n->commit = v->commit.id;
	fs->nodes[fs->nnodes++] = n;
	n->ino = fs->nnodes;
	n->hnext = fs->htab[b];
	fs->htab[b] = n;
out:
	if (n && v && !n->ver) {
		n->ver = v;
		tfs_version_get(v);
	}
	pthread_mutex_unlock(&fs->lock);
	return n;
}

/* A file inode nobody knows any more lets go of its commit (the node itself stays: inode
 * numbers are never reused). */
void tfs_fs_node_forget(struct tfs_fs *fs, fuse_ino_t ino, uint64_t nlookup)
{
	struct tfs_version *drop = NULL;
	struct tfs_fs_node *n;

	pthread_mutex_lock(&fs->lock);
	n = ino >= 1 && ino <= fs->nnodes ? fs->nodes[ino - 1] : NULL;
	if (n && n->kind->pins_version) {
		n->nlookup = n->nlookup > nlookup ? n->nlookup - nlookup : 0;
		if (n->nlookup == 0) {
			drop = n->ver;
			n->ver = NULL;
		}
	}
	pthread_mutex_unlock(&fs->lock);
	tfs_version_put(drop);
}

double tfs_fs_node_ttl(struct tfs_fs *fs, const struct tfs_fs_node *n)
{
	enum tfs_fs_vkind k;

	if (!n->vdir)
		return fs->cfg->ref_ttl;
	pthread_mutex_lock(&fs->lock);
	k = n->vdir->vkind;
	pthread_mutex_unlock(&fs->lock);
	return k == TFS_FS_BRANCH ? fs->cfg->ref_ttl : TFS_FS_IMMUTABLE_TTL;
}

void tfs_fs_version_name(const struct tfs_fs_node *vdir, char *buf, size_t cap)
{
	snprintf(buf, cap, "%s%s", vdir->parent->kind == &tfs_fs_commits_kind ? "commits/" : "",
		 vdir->name);
}

int tfs_fs_dir_add(struct tfs_fs_dir *d, const char *name, fuse_ino_t ino, mode_t mode)
{
	struct tfs_fs_dirent *e = realloc(d->ents, (d->n + 1) * sizeof(*e));
	int rc;

	if (!e)
		return -ENOMEM;
	d->ents = e;
	e[d->n].name_off = d->names.len;
	e[d->n].ino = ino;
	e[d->n].mode = mode;
	rc = tfs_buf_append(&d->names, name, strlen(name) + 1);
	if (rc)
		return rc;
	d->n++;
	return 0;
}

int tfs_fs_dir_add_child(struct tfs_fs *fs, struct tfs_fs_dir *d, struct tfs_fs_node *parent,
			 const char *shown, const char *name, const struct tfs_fs_kind *kind,
			 struct tfs_version *v)
{
	struct tfs_fs_node *c = tfs_fs_node_child(fs, parent, name, kind, v);

	return c ? tfs_fs_dir_add(d, shown, c->ino, kind->mode & S_IFMT) : -ENOMEM;
}

void tfs_fs_dir_free(struct tfs_fs_dir *d)
{
	if (!d)
		return;
	tfs_buf_free(&d->names);
	free(d->ents);
	free(d);
}

void tfs_fs_link_add(struct tfs_fs *fs, struct tfs_fs_link *list, struct tfs_fs_link *l)
{
	pthread_mutex_lock(&fs->lock);
	l->next = list->next;
	l->prev = list;
	list->next->prev = l;
	list->next = l;
	pthread_mutex_unlock(&fs->lock);
}

void tfs_fs_link_del(struct tfs_fs *fs, struct tfs_fs_link *l)
{
	pthread_mutex_lock(&fs->lock);
	l->prev->next = l->next;
	l->next->prev = l->prev;
	l->prev = l->next = l;
	pthread_mutex_unlock(&fs->lock);
}

void tfs_fs_handle_free(struct tfs_fs *fs, struct tfs_fs_handle *h)
{
	if (h->ctl)
		h->ctl_ops->close(h->ctl);
	tfs_reader_close(h->reader); /* before the version and view it reads */
	tfs_version_put(h->ver);
	tfs_lake_view_put(fs->lake, h->view);
	tfs_buf_free(&h->text);
	if (h->priv_free)
		h->priv_free(h->priv);
	free(h);
}

void tfs_fs_reply_bytes(fuse_req_t req, const void *data, uint64_t len, size_t size, off_t off)
{
	char *copy;

	if ((uint64_t)off >= len) {
		fuse_reply_buf(req, NULL, 0);
		return;
	}
	if (size > len - (uint64_t)off)
		size = (size_t)(len - (uint64_t)off);
	/* A copy: once the reply is written the reader may close the file, and its release (on
	 * another thread) frees what data points into while the reply is still returning. */
	copy = malloc(size ? size : 1);
	if (!copy) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	memcpy(copy, (const char *)data + off, size);
	fuse_reply_buf(req, copy, size);
	free(copy);
}

void tfs_fs_read_text(fuse_req_t req, struct tfs_fs *fs, struct tfs_fs_handle *h, size_t size,
		      off_t off)
{
	(void)fs;
	tfs_fs_reply_bytes(req, h->text.data, h->text.len, size, off);
}

int tfs_fs_xattr_add(struct tfs_fs_xattrs *x, const char *name, const char *fmt, ...)
{
	va_list ap;

	if (x->n == TFS_FS_MAX_XATTRS)
		return -ENOSPC;
	x->names[x->n] = name;
	va_start(ap, fmt);
	vsnprintf(x->values[x->n++], sizeof(x->values[0]), fmt, ap);
	va_end(ap);
	return 0;
}

int tfs_fs_xattr_commit(struct tfs_fs_xattrs *x, const struct tfs_version *v)
{
	char hex[TFS_ID_HEX];

	tfs_id_hex(&v->commit.id, hex);
	return tfs_fs_xattr_add(x, "commit", "%s", hex);
}
