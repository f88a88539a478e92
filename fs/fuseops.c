/* SPDX-License-Identifier: MIT */
/* fuseops: FUSE's requests answered through the table of the node each names (fsnode.h). The
 * mount is read-only, but for files whose kind takes writes (the control file). */
#include "fsnode.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

static struct tfs_fs *fs_of(fuse_req_t req)
{
	return fuse_req_userdata(req);
}

/* Attributes of n, from what its kind says (a: version, size, mode). */
static void fill_attr(struct tfs_fs *fs, const struct tfs_fs_node *n, const struct tfs_fs_attr *a,
		      struct stat *st)
{
	memset(st, 0, sizeof(*st));
	st->st_ino = n->ino;
	st->st_uid = fs->uid;
	st->st_gid = fs->gid;
	st->st_mtime = st->st_ctime = st->st_atime = a->v ? (time_t)a->v->commit.time : fs->started;
	st->st_blksize = TFS_FS_MAX_IO;
	st->st_mode = a->mode;
	st->st_nlink = S_ISDIR(a->mode) ? 2 : 1;
	st->st_size = S_ISDIR(a->mode) ? 0 : (off_t)a->size;
	st->st_blocks = (st->st_size + 511) / 512;
}

/* What n's kind says of its attributes; h: the open file the request names, or NULL. The caller
 * drops a->v, also on failure. */
static int node_attr(struct tfs_fs *fs, struct tfs_fs_node *n, const struct tfs_fs_handle *h,
		     struct tfs_fs_attr *a)
{
	memset(a, 0, sizeof(*a));
	a->mode = n->kind->mode;
	/* fstat on an open file pinned to a version describes what that file reads. */
	if (h && h->ver) {
		a->v = h->ver;
		tfs_version_get(a->v);
		a->size = h->size;
		return 0;
	}
	return n->kind->getattr ? n->kind->getattr(fs, n, a) : 0;
}

static void op_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct tfs_fs *fs = fs_of(req);
	struct tfs_fs_node *p = tfs_fs_node_get(fs, parent), *n = NULL;
	struct fuse_entry_param e;
	struct tfs_fs_attr a = { 0 };
	int rc;

	memset(&e, 0, sizeof(e));
	if (!p)
		rc = -ENOENT;
	else if (!p->kind->lookup)
		rc = -ENOTDIR;
	else
		rc = p->kind->lookup(fs, p, name, &n);
	if (!rc)
		rc = node_attr(fs, n, NULL, &a);
	if (rc == -ENOENT && p) {
		/* Negative entries expire like positive ones: a dataset or ref created later
		 * shows up within the TTL. */
		e.entry_timeout = tfs_fs_node_ttl(fs, p);
		fuse_reply_entry(req, &e);
		goto out;
	}
	if (rc) {
		fuse_reply_err(req, rc == -ENOMEM || rc == -EIO || rc == -ENOENT || rc == -ENOTDIR
					    ? -rc
					    : EIO);
		goto out;
	}
	e.ino = n->ino;
	fill_attr(fs, n, &a, &e.attr);
	e.attr_timeout = tfs_fs_node_ttl(fs, n);
	e.entry_timeout = e.attr_timeout;
	/* Counted before the reply: the kernel may forget the entry as soon as it has it. */
	tfs_fs_node_looked_up(fs, n);
	n = NULL;
	fuse_reply_entry(req, &e);
out:
	tfs_fs_node_put(fs, n); /* a child made for a lookup that failed */
	tfs_version_put(a.v);
}

static void op_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup)
{
	tfs_fs_node_forget(fs_of(req), ino, nlookup);
	fuse_reply_none(req);
}

static void op_forget_multi(fuse_req_t req, size_t count, struct fuse_forget_data *forgets)
{
	for (size_t i = 0; i < count; i++)
		tfs_fs_node_forget(fs_of(req), forgets[i].ino, forgets[i].nlookup);
	fuse_reply_none(req);
}

static void op_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct tfs_fs *fs = fs_of(req);
	struct tfs_fs_node *n = tfs_fs_node_get(fs, ino);
	const struct tfs_fs_handle *h = NULL;
	struct tfs_fs_attr a;
	struct stat st;
	int rc;

	if (!n) {
		fuse_reply_err(req, ENOENT);
		return;
	}
	/* fi->fh of a directory is its listing: only files' are handles. */
	if (fi && fi->fh && n->kind->open)
		h = (const struct tfs_fs_handle *)fi->fh;
	rc = node_attr(fs, n, h, &a);
	if (rc)
		fuse_reply_err(req, -rc);
	else {
		fill_attr(fs, n, &a, &st);
		fuse_reply_attr(req, &st, tfs_fs_node_ttl(fs, n));
	}
	tfs_version_put(a.v);
}

static void op_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct tfs_fs *fs = fs_of(req);
	struct tfs_fs_node *n = tfs_fs_node_get(fs, ino);
	struct tfs_fs_dir *d = calloc(1, sizeof(*d));
	int rc;

	if (!d) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	if (!n) {
		rc = -ENOENT;
		goto out;
	}
	if (!n->kind->list) {
		rc = -ENOTDIR;
		goto out;
	}
	rc = tfs_fs_dir_add(d, ".", n->ino, S_IFDIR);
	if (!rc)
		rc = tfs_fs_dir_add(d, "..", n->parent ? n->parent->ino : n->ino, S_IFDIR);
	if (!rc)
		rc = n->kind->list(fs, n, d);
out:
	if (rc) {
		tfs_fs_dir_free(d);
		fuse_reply_err(req, -rc);
		return;
	}
	tfs_fs_link_add(fs, &fs->open_dirs, &d->link);
	fi->fh = (uintptr_t)d;
	fi->cache_readdir = 0;
	fuse_reply_open(req, fi);
}

static void op_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		       struct fuse_file_info *fi)
{
	struct tfs_fs_dir *d = (struct tfs_fs_dir *)fi->fh;
	char *buf = malloc(size);
	size_t used = 0;

	(void)ino;
	if (!buf) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	for (size_t i = (size_t)off; i < d->n; i++) {
		struct stat st = { .st_ino = d->ents[i].ino, .st_mode = d->ents[i].mode };
		size_t need = fuse_add_direntry(req, buf + used, size - used,
						(const char *)d->names.data + d->ents[i].name_off,
						&st, (off_t)(i + 1));

		if (need > size - used)
			break;
		used += need;
	}
	fuse_reply_buf(req, buf, used);
	free(buf);
}

static void op_releasedir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct tfs_fs_dir *d = (struct tfs_fs_dir *)fi->fh;

	(void)ino;
	tfs_fs_link_del(fs_of(req), &d->link);
	tfs_fs_dir_free(d);
	fuse_reply_err(req, 0);
}

static void op_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct tfs_fs *fs = fs_of(req);
	struct tfs_fs_node *n = tfs_fs_node_get(fs, ino);
	struct tfs_fs_handle *h;
	int rc;

	if (!n) {
		fuse_reply_err(req, ENOENT);
		return;
	}
	if (!n->kind->open) {
		fuse_reply_err(req, EISDIR);
		return;
	}
	if (!n->kind->write && (fi->flags & O_ACCMODE) != O_RDONLY) {
		fuse_reply_err(req, EROFS);
		return;
	}
	h = calloc(1, sizeof(*h));
	if (!h) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	h->kind = n->kind;
	rc = n->kind->open(fs, n, fuse_req_ctx(req), h, fi);
	if (rc) {
		tfs_fs_handle_free(fs, h);
		fuse_reply_err(req, -rc);
		return;
	}
	/* From here on release (or the fs) frees it. */
	tfs_fs_link_add(fs, &fs->open_files, &h->link);
	fi->fh = (uintptr_t)h;
	fuse_reply_open(req, fi);
}

static void op_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct tfs_fs_handle *h = (struct tfs_fs_handle *)fi->fh;
	struct tfs_fs *fs = fs_of(req);

	(void)ino;
	tfs_fs_link_del(fs, &h->link);
	tfs_fs_handle_free(fs, h);
	fuse_reply_err(req, 0);
}

static void op_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		    struct fuse_file_info *fi)
{
	struct tfs_fs_handle *h = (struct tfs_fs_handle *)fi->fh;

	(void)ino;
	h->kind->read(req, fs_of(req), h, size, off);
}

/* Only files whose kind takes writes (the control file's requests) get here writable. */
static void op_write(fuse_req_t req, fuse_ino_t ino, const char *buf, size_t size, off_t off,
		     struct fuse_file_info *fi)
{
	struct tfs_fs_handle *h = (struct tfs_fs_handle *)fi->fh;
	ssize_t n;

	(void)ino;
	(void)off;
	if (!h->kind->write) {
		fuse_reply_err(req, EROFS);
		return;
	}
	n = h->kind->write(fs_of(req), h, buf, size);
	if (n < 0)
		fuse_reply_err(req, (int)-n);
	else
		fuse_reply_write(req, (size_t)n);
}

/* Restricted ioctls: the kernel sized the buffers from the command. */
static void op_ioctl(fuse_req_t req, fuse_ino_t ino, unsigned int cmd, void *arg,
		     struct fuse_file_info *fi, unsigned flags, const void *in_buf, size_t in_bufsz,
		     size_t out_bufsz)
{
	struct tfs_fs *fs = fs_of(req);
	struct tfs_fs_node *n = tfs_fs_node_get(fs, ino);
	struct tfs_fs_handle *h;
	void *out;
	int rc;

	(void)arg;
	/* Directories' fh is a listing; 32-bit callers would lay the structs out differently. */
	if (!fi || !n || !n->kind->ioctl || (flags & (FUSE_IOCTL_DIR | FUSE_IOCTL_COMPAT))) {
		fuse_reply_err(req, ENOTTY);
		return;
	}
	h = (struct tfs_fs_handle *)fi->fh;
	out = malloc(out_bufsz ? out_bufsz : 1);
	if (!out) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	rc = h->kind->ioctl(fs, h, cmd, in_buf, in_bufsz, out, out_bufsz);
	if (rc)
		fuse_reply_err(req, -rc);
	else
		fuse_reply_ioctl(req, 0, out, out_bufsz);
	free(out);
}

/* The mount is read-only (but for the control file, which only takes requests): the kernel is
 * not told so (a read-only mount would refuse the control file's writes), so every operation
 * that would change something is refused here. */
static void op_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr, int to_set,
		       struct fuse_file_info *fi)
{
	struct tfs_fs *fs = fs_of(req);
	struct tfs_fs_node *n = tfs_fs_node_get(fs, ino);
	struct tfs_fs_attr a = { 0 };
	struct stat st;

	(void)attr;
	(void)fi;
	/* `echo ... > control` truncates before it writes: a file that takes requests has nothing
	 * to truncate. */
	if (n && n->kind->write &&
	    !(to_set & ~(FUSE_SET_ATTR_SIZE | FUSE_SET_ATTR_ATIME | FUSE_SET_ATTR_MTIME |
			 FUSE_SET_ATTR_ATIME_NOW | FUSE_SET_ATTR_MTIME_NOW)) &&
	    !node_attr(fs, n, NULL, &a)) {
		fill_attr(fs, n, &a, &st);
		tfs_version_put(a.v);
		fuse_reply_attr(req, &st, 0);
		return;
	}
	tfs_version_put(a.v);
	fuse_reply_err(req, EROFS);
}

static void op_mknod(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode, dev_t rdev)
{
	(void)parent, (void)name, (void)mode, (void)rdev;
	fuse_reply_err(req, EROFS);
}

static void op_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode)
{
	(void)parent, (void)name, (void)mode;
	fuse_reply_err(req, EROFS);
}

static void op_unlink(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	(void)parent, (void)name;
	fuse_reply_err(req, EROFS);
}

static void op_symlink(fuse_req_t req, const char *link, fuse_ino_t parent, const char *name)
{
	(void)link, (void)parent, (void)name;
	fuse_reply_err(req, EROFS);
}

static void op_rename(fuse_req_t req, fuse_ino_t parent, const char *name, fuse_ino_t newparent,
		      const char *newname, unsigned int flags)
{
	(void)parent, (void)name, (void)newparent, (void)newname, (void)flags;
	fuse_reply_err(req, EROFS);
}

static void op_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent, const char *newname)
{
	(void)ino, (void)newparent, (void)newname;
	fuse_reply_err(req, EROFS);
}

static void op_create(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
		      struct fuse_file_info *fi)
{
	(void)parent, (void)name, (void)mode, (void)fi;
	fuse_reply_err(req, EROFS);
}

static void op_setxattr(fuse_req_t req, fuse_ino_t ino, const char *name, const char *value,
			size_t size, int flags)
{
	(void)ino, (void)name, (void)value, (void)size, (void)flags;
	fuse_reply_err(req, EROFS);
}

static void op_removexattr(fuse_req_t req, fuse_ino_t ino, const char *name)
{
	(void)ino, (void)name;
	fuse_reply_err(req, EROFS);
}

/* Extended attributes: which commit a directory or file shows and what a column holds. */
static int node_xattrs(struct tfs_fs *fs, struct tfs_fs_node *n, struct tfs_fs_xattrs *x)
{
	x->n = 0;
	return n->kind->xattrs ? n->kind->xattrs(fs, n, x) : 0;
}

/* The getxattr/listxattr protocol: size 0 asks for the length, a short buffer is ERANGE. */
static void reply_xattr(fuse_req_t req, size_t size, const void *data, size_t len)
{
	if (size == 0)
		fuse_reply_xattr(req, len);
	else if (size < len)
		fuse_reply_err(req, ERANGE);
	else
		fuse_reply_buf(req, data, len);
}

static void op_getxattr(fuse_req_t req, fuse_ino_t ino, const char *name, size_t size)
{
	struct tfs_fs *fs = fs_of(req);
	struct tfs_fs_node *n = tfs_fs_node_get(fs, ino);
	struct tfs_fs_xattrs x;
	int rc;

	if (!n) {
		fuse_reply_err(req, ENOENT);
		return;
	}
	rc = node_xattrs(fs, n, &x);
	if (rc) {
		fuse_reply_err(req, -rc);
		return;
	}
	for (size_t i = 0; i < x.n; i++) {
		if (strncmp(name, TFS_FS_XATTR_PREFIX, strlen(TFS_FS_XATTR_PREFIX)) ||
		    strcmp(name + strlen(TFS_FS_XATTR_PREFIX), x.names[i]))
			continue;
		reply_xattr(req, size, x.values[i], strlen(x.values[i]));
		return;
	}
	fuse_reply_err(req, ENODATA);
}

static void op_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size)
{
	struct tfs_fs *fs = fs_of(req);
	struct tfs_fs_node *n = tfs_fs_node_get(fs, ino);
	struct tfs_buf list = { 0 };
	struct tfs_fs_xattrs x;
	int rc;

	if (!n) {
		fuse_reply_err(req, ENOENT);
		return;
	}
	rc = node_xattrs(fs, n, &x);
	for (size_t i = 0; !rc && i < x.n; i++) {
		rc = tfs_buf_printf(&list, TFS_FS_XATTR_PREFIX "%s", x.names[i]);
		if (!rc)
			rc = tfs_buf_append(&list, "", 1); /* names are NUL-separated */
	}
	if (rc)
		fuse_reply_err(req, -rc);
	else
		reply_xattr(req, size, list.data, list.len);
	tfs_buf_free(&list);
}

static void op_init(void *userdata, struct fuse_conn_info *conn)
{
	const struct tfs_fs *fs = userdata;

	/* 1 MiB requests: libfuse derives max_pages from max_write. */
	conn->max_write = TFS_FS_MAX_IO;
	conn->max_readahead = TFS_FS_MAX_IO;
	/* Readahead and mmap faults arrive as background requests: let enough be in flight to
	 * keep the prefetcher's window busy (the kernel default is 12). */
	conn->max_background = 64;
	conn->congestion_threshold = 48;
	if (conn->capable & FUSE_CAP_ASYNC_READ)
		conn->want |= FUSE_CAP_ASYNC_READ;
	conn->want &= ~(unsigned)FUSE_CAP_AUTO_INVAL_DATA; /* we decide at open, see op_open */
	if (fs->cfg->splice && (conn->capable & FUSE_CAP_SPLICE_WRITE))
		conn->want |= FUSE_CAP_SPLICE_WRITE;
}

const struct fuse_lowlevel_ops tfs_fs_fuse_ops = {
	.init = op_init,
	.lookup = op_lookup,
	.forget = op_forget,
	.forget_multi = op_forget_multi,
	.getattr = op_getattr,
	.opendir = op_opendir,
	.readdir = op_readdir,
	.releasedir = op_releasedir,
	.open = op_open,
	.release = op_release,
	.read = op_read,
	.getxattr = op_getxattr,
	.listxattr = op_listxattr,
	.write = op_write,
	.ioctl = op_ioctl,
	.setattr = op_setattr,
	.mknod = op_mknod,
	.mkdir = op_mkdir,
	.unlink = op_unlink,
	.rmdir = op_unlink,
	.symlink = op_symlink,
	.rename = op_rename,
	.link = op_link,
	.create = op_create,
	.setxattr = op_setxattr,
	.removexattr = op_removexattr,
};
