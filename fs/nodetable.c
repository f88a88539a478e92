/* SPDX-License-Identifier: MIT */
/* nodetable: the file system's nodes by inode number and by (parent, name), directory listings
 * and open files. */
#include "fsnode.h"

#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NODE_BUCKETS 4096 /* initial; doubled as nodes grow */

static size_t hash_of(fuse_ino_t parent, const char *name)
{
	uint64_t h = 1469598103934665603ull ^ parent;

	for (; *name; name++)
		h = (h ^ (unsigned char)*name) * 1099511628211ull;
	return (size_t)h;
}

static size_t ino_bucket(const struct tfs_fs *fs, fuse_ino_t ino)
{
	return (size_t)((ino * 0x9E3779B97F4A7C15ull) >> 20) & (fs->hsize - 1);
}

int tfs_fs_nodes_init(struct tfs_fs *fs)
{
	struct tfs_fs_node *root;

	fs->hsize = NODE_BUCKETS;
	fs->itab = calloc(fs->hsize, sizeof(*fs->itab));
	fs->htab = calloc(fs->hsize, sizeof(*fs->htab));
	root = calloc(1, sizeof(*root));
	if (!fs->itab || !fs->htab || !root || !(root->name = strdup(""))) {
		free(root);
		return -ENOMEM;
	}
	root->kind = &tfs_fs_root_kind;
	root->ino = FUSE_ROOT_ID;
	root->refs = 1; /* the mount's, for good */
	fs->root = root;
	fs->itab[ino_bucket(fs, FUSE_ROOT_ID)] = root;
	fs->nnodes = 1;
	fs->next_ino = FUSE_ROOT_ID + 1;
	return 0;
}

static void node_free(struct tfs_fs_node *n)
{
	tfs_version_put(n->ver);
	tfs_buf_free(&n->log);
	free(n->name);
	free(n);
}

void tfs_fs_nodes_free(struct tfs_fs *fs)
{
	for (size_t b = 0; fs->itab && b < fs->hsize; b++)
		while (fs->itab[b]) {
			struct tfs_fs_node *n = fs->itab[b];

			fs->itab[b] = n->inext;
			node_free(n);
		}
	free(fs->itab);
	free(fs->htab);
}

/* Double both tables once there are as many nodes as buckets; lock held. Without memory for
 * it, the chains grow longer instead. */
static void grow(struct tfs_fs *fs)
{
	const size_t size = fs->hsize * 2;
	struct tfs_fs_node **it, **ht;

	if (fs->nnodes < fs->hsize)
		return;
	it = calloc(size, sizeof(*it));
	ht = calloc(size, sizeof(*ht));
	if (!it || !ht) {
		free(it);
		free(ht);
		return;
	}
	for (size_t b = 0; b < fs->hsize; b++) {
		while (fs->itab[b]) {
			struct tfs_fs_node *n = fs->itab[b];
			const size_t k =
				(size_t)((n->ino * 0x9E3779B97F4A7C15ull) >> 20) & (size - 1);

			fs->itab[b] = n->inext;
			n->inext = it[k];
			it[k] = n;
		}
		while (fs->htab[b]) {
			struct tfs_fs_node *n = fs->htab[b];
			const size_t k = hash_of(n->parent->ino, n->name) & (size - 1);

			fs->htab[b] = n->hnext;
			n->hnext = ht[k];
			ht[k] = n;
		}
	}
	free(fs->itab);
	free(fs->htab);
	fs->itab = it;
	fs->htab = ht;
	fs->hsize = size;
}

struct tfs_fs_node *tfs_fs_node_get(struct tfs_fs *fs, fuse_ino_t ino)
{
	struct tfs_fs_node *n;

	pthread_mutex_lock(&fs->lock);
	for (n = fs->itab[ino_bucket(fs, ino)]; n && n->ino != ino; n = n->inext)
		;
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
		    (!v || tfs_id_eq(&n->commit, &v->commit.id))) {
			n->refs++;
			goto out;
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
	n->refs = 1;
	parent->refs++; /* a child keeps its parent */
	n->ino = fs->next_ino++;
	n->hnext = fs->htab[b];
	fs->htab[b] = n;
	b = ino_bucket(fs, n->ino);
	n->inext = fs->itab[b];
	fs->itab[b] = n;
	fs->nnodes++;
	fs->nodes_made++;
	grow(fs);
out:
	if (n && v && !n->ver) {
		n->ver = v;
		tfs_version_get(v);
	}
	pthread_mutex_unlock(&fs->lock);
	return n;
}

/* Unlink n from the table it is in; lock held. */
static void unlink_node(struct tfs_fs *fs, struct tfs_fs_node *n)
{
	struct tfs_fs_node **p = &fs->htab[hash_of(n->parent->ino, n->name) & (fs->hsize - 1)];

	while (*p != n)
		p = &(*p)->hnext;
	*p = n->hnext;
	p = &fs->itab[ino_bucket(fs, n->ino)];
	while (*p != n)
		p = &(*p)->inext;
	*p = n->inext;
	fs->nnodes--;
	fs->nodes_freed++;
}

/* Free n if nobody holds it and the kernel does not know it, and its parents likewise; lock
 * held. The freed nodes are chained through inext for freeing once unlocked. */
static void release(struct tfs_fs *fs, struct tfs_fs_node *n, struct tfs_fs_node **freed)
{
	while (n && !n->refs && !n->nlookup) {
		struct tfs_fs_node *parent = n->parent;

		assert(n != fs->root && parent);
		unlink_node(fs, n);
		n->inext = *freed;
		*freed = n;
		assert(parent->refs);
		parent->refs--;
		n = parent;
	}
}

static void free_chain(struct tfs_fs_node *n)
{
	while (n) {
		struct tfs_fs_node *next = n->inext;

		node_free(n);
		n = next;
	}
}

void tfs_fs_node_put(struct tfs_fs *fs, struct tfs_fs_node *n)
{
	struct tfs_fs_node *freed = NULL;

	if (!n)
		return;
	pthread_mutex_lock(&fs->lock);
	assert(n->refs);
	n->refs--;
	release(fs, n, &freed);
	pthread_mutex_unlock(&fs->lock);
	free_chain(freed);
}

void tfs_fs_node_looked_up(struct tfs_fs *fs, struct tfs_fs_node *n)
{
	pthread_mutex_lock(&fs->lock);
	assert(n->refs);
	n->nlookup++;
	n->refs--;
	pthread_mutex_unlock(&fs->lock);
}

void tfs_fs_node_forget(struct tfs_fs *fs, fuse_ino_t ino, uint64_t nlookup)
{
	struct tfs_fs_node *n, *freed = NULL;
	struct tfs_version *drop = NULL;

	pthread_mutex_lock(&fs->lock);
	for (n = fs->itab[ino_bucket(fs, ino)]; n && n->ino != ino; n = n->inext)
		;
	if (n && n != fs->root) {
		n->nlookup = n->nlookup > nlookup ? n->nlookup - nlookup : 0;
		/* A file inode nobody knows any more lets go of its commit at once, even while a
		 * caller still holds the node. */
		if (!n->nlookup && n->kind->pins_version) {
			drop = n->ver;
			n->ver = NULL;
		}
		release(fs, n, &freed);
	}
	pthread_mutex_unlock(&fs->lock);
	tfs_version_put(drop);
	free_chain(freed);
}

void tfs_fs_node_counts(struct tfs_fs *fs, uint64_t *alive, uint64_t *made, uint64_t *freed)
{
	pthread_mutex_lock(&fs->lock);
	*alive = fs->nnodes;
	*made = fs->nodes_made;
	*freed = fs->nodes_freed;
	pthread_mutex_unlock(&fs->lock);
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
	int rc = c ? tfs_fs_dir_add(d, shown, c->ino, kind->mode & S_IFMT) : -ENOMEM;

	/* A listing's inode numbers are for show (readdir, not readdirplus): the kernel looks a
	 * name up before it uses it, so the node need not outlive the listing. */
	tfs_fs_node_put(fs, c);
	return rc;
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

void tfs_fs_reply_gather(fuse_req_t req, const char *head, size_t head_len,
			 const struct tfs_gather_list *l, uint64_t from, uint64_t to, int padded)
{
	struct iovec iov[TFS_FS_REPLY_IOV + 1];
	char hcopy[TFS_NPY_ALIGN];
	uint8_t *zeros = NULL, *buf = NULL;
	size_t n = 0;

	assert(head_len <= sizeof(hcopy));
	if (head_len) {
		memcpy(hcopy, head, head_len);
		iov[n].iov_base = hcopy;
		iov[n++].iov_len = head_len;
	}
	if (padded && from < to && !(zeros = calloc(1, (size_t)(to - from)))) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	if (from < to) {
		const size_t m = tfs_gather_list_iov(l, from, to, zeros, iov + n, TFS_FS_REPLY_IOV);

		if (!m) {
			/* Many small pieces: one buffer is cheaper than a huge iovec. */
			buf = malloc(head_len + (size_t)(to - from));
			if (buf) {
				memcpy(buf, hcopy, head_len);
				tfs_gather_list_copy(l, from, to, buf + head_len);
				fuse_reply_buf(req, (const char *)buf,
					       head_len + (size_t)(to - from));
			} else {
				fuse_reply_err(req, ENOMEM);
			}
			goto out;
		}
		n += m;
	}
	fuse_reply_iov(req, iov, (int)n);
out:
	free(zeros);
	free(buf);
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

void tfs_fs_reply_made_rows(fuse_req_t req, struct tfs_fs_handle *h, size_t size, off_t off,
			    uint64_t rb, int (*make)(void *arg, uint64_t r, uint8_t *out),
			    void *arg)
{
	uint64_t pos = (uint64_t)off, end = pos + size, r0, r1;
	const uint64_t hdr = h->hdr_len;
	uint8_t *buf;
	size_t hlen;
	int rc = 0;

	if (end > h->size)
		end = h->size;
	if (pos >= end) {
		fuse_reply_buf(req, NULL, 0);
		return;
	}
	hlen = pos < hdr ? (size_t)((end < hdr ? end : hdr) - pos) : 0;
	if (end <= hdr) {
		fuse_reply_buf(req, h->header + pos, hlen);
		return;
	}
	r0 = ((pos > hdr ? pos : hdr) - hdr) / rb;
	r1 = (end - hdr - 1) / rb;
	buf = malloc(hlen + (r1 - r0 + 1) * rb);
	if (!buf) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	memcpy(buf, h->header + (hlen ? pos : 0), hlen);
	for (uint64_t r = r0; r <= r1 && !rc; r++)
		rc = make(arg, r, buf + hlen + (r - r0) * rb);
	if (rc)
		fuse_reply_err(req, rc == -ENOMEM ? ENOMEM : EIO);
	else /* from the header's part, or from the first row's byte the read starts at */
		fuse_reply_buf(req, (const char *)buf + (hlen ? 0 : pos - hdr - r0 * rb),
			       (size_t)(end - pos));
	free(buf);
}

int tfs_fs_list_child(void *arg, const char *name, int is_dir)
{
	const struct tfs_fs_lister *l = arg;

	(void)is_dir;
	return tfs_fs_dir_add_child(l->fs, l->d, l->dir, name, name, l->kind, NULL);
}
