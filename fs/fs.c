/* SPDX-License-Identifier: MIT */
/* fs: the FUSE file system that shows a lake as directories of datasets, refs and NPY files. */
#define FUSE_USE_VERSION 314
#include "fs.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <fuse_lowlevel.h>
#include <inttypes.h>
#include <limits.h>
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "cache.h"
#include "diskcache.h"
#include "format.h"
#include "store.h"
#include "history.h"
#include "lake.h"
#include "prefetch.h"
#include "stats.h"
#include "version.h"
#include "view.h"

#define MAX_IO (1u << 20)
#define CTL_DIR ".tensorfs"
#define MAX_IOV 256	 /* chunk pieces per reply; well under writev's UIO_MAXIOV (1024) */
#define MAX_VIEW_IOV 512 /* view rows per reply sent as separate pieces */

#define IMMUTABLE_TTL 86400.0 /* commits and tags never change: let the kernel keep them */

enum ntype {
	N_ROOT,
	N_DATASET,
	N_VERSION,
	N_COMMITS,
	N_LOG,
	N_COLUMN,
	N_SCHEMA,
	N_CTLDIR,
	N_STATS,
	N_METRICS,
	N_ERRORS,
	N_VIEWS,
	N_VIEW,
	N_README,
	N_CONTROL
};

/* What a version directory names: a branch moves, a tag or a commit never does. */
enum vkind { V_BRANCH, V_TAG, V_COMMIT };

/* Nodes live as long as the mount: the kernel may name an inode number long after it forgot
 * the path, and the set of names grows only with what users look at. */
struct node {
	fuse_ino_t ino;
	enum ntype type;
	struct node *parent;
	char *name;
	struct node *hnext;	    /* (parent, name) hash chain; protected by fs->lock */
	enum vkind kind;	    /* N_VERSION; protected by fs->lock */
	struct tfs_version *ver;    /* files: their version (below); protected by fs->lock */
	struct tfs_lake_view *view; /* N_VIEW: the view last built for it; protected by fs->lock */
	struct tfs_buf log;	    /* N_LOG: the log text of log_head; protected by fs->lock */
	struct tfs_id log_head;	    /* protected by fs->lock */
	/* Files are one inode per commit: a branch file whose branch moved is a new inode, so the
	 * kernel never mixes two commits' pages, and an open file or mapping keeps its own. */
	struct tfs_id commit; /* files: the commit this inode shows (part of its key) */
	uint64_t nlookup;     /* files: kernel references; protected by fs->lock */
};

/* Open files and directories are linked into the fs: the kernel does not send every release
 * before an unmount (requests still queued when the connection goes are dropped), so whatever
 * is still open when the loop ends is freed with the fs. */
struct link {
	struct link *prev, *next;
};

struct fs {
	const struct tfs_fs_config *cfg;
	struct link open_files; /* struct handle; protected by lock */
	struct link open_dirs;	/* struct dirlist; protected by lock */
	struct tfs_lake *lake;	/* the engine (cfg->lake): store, caches, prefetcher */
	void *ctl;		/* .tensorfs/control (cfg->control's object); NULL without one */
	int allow_other;	/* -o allow_other: anyone may use the control file */
	pthread_mutex_t lock;
	struct node **nodes; /* by ino - 1; protected by lock */
	size_t nnodes, cap;  /* protected by lock */
	struct node **htab;  /* protected by lock */
	size_t hsize;	     /* protected by lock */
	uid_t uid;
	gid_t gid;
	time_t started;
	uint64_t started_ns;
	uint64_t reads, read_bytes; /* FUSE read requests of column files; atomic */
	struct tfs_fs_stats *stats; /* version accounts and the error log */
};

/* An open file: pinned to the version it was opened at, whatever the branch does later. */
struct handle {
	struct link link;	    /* in fs->open_files while open */
	struct tfs_version *ver;    /* NULL for generated files (log, stats) */
	struct tfs_lake_view *view; /* view column files: the rows, in view order */
	uint32_t *chunk_pos;	    /* view column files: chunk -> position in the stream's order */
	struct tfs_stream *stream;  /* column files: drives the prefetcher */
	void *ctl;		    /* the control file: this open's session */
	const struct tfs_fs_control *ctl_ops; /* and what serves it */
	struct tfs_fs_acct *acct;	      /* column files: the version's read counters */
	struct tfs_buf text;		      /* generated files' content, taken at open */
	enum ntype type;
	size_t col;
	uint64_t size;
	char header[TFS_NPY_ALIGN];
};

/* An open directory: its listing, taken at opendir. */
struct dirlist {
	struct link link;     /* in fs->open_dirs while open */
	struct tfs_buf names; /* NUL-separated */
	size_t n;
	struct entry {
		size_t name_off;
		fuse_ino_t ino;
		mode_t mode;
	} * ents;
};

static struct fs *fs_of(fuse_req_t req)
{
	return fuse_req_userdata(req);
}

static void link_add(struct fs *fs, struct link *list, struct link *l)
{
	pthread_mutex_lock(&fs->lock);
	l->next = list->next;
	l->prev = list;
	list->next->prev = l;
	list->next = l;
	pthread_mutex_unlock(&fs->lock);
}

static void link_del(struct fs *fs, struct link *l)
{
	pthread_mutex_lock(&fs->lock);
	l->prev->next = l->next;
	l->next->prev = l->prev;
	l->prev = l->next = l;
	pthread_mutex_unlock(&fs->lock);
}

/* Hand an open file to the kernel: from here on release (or the fs) frees it. */
static void handle_publish(struct fs *fs, struct handle *h, struct fuse_file_info *fi)
{
	link_add(fs, &fs->open_files, &h->link);
	fi->fh = (uintptr_t)h;
}

static size_t hash_of(fuse_ino_t parent, const char *name)
{
	uint64_t h = 1469598103934665603ull ^ parent;

	for (; *name; name++)
		h = (h ^ (unsigned char)*name) * 1099511628211ull;
	return (size_t)h;
}

static struct node *node_get(struct fs *fs, fuse_ino_t ino)
{
	struct node *n = NULL;

	pthread_mutex_lock(&fs->lock);
	if (ino >= 1 && ino <= fs->nnodes)
		n = fs->nodes[ino - 1];
	pthread_mutex_unlock(&fs->lock);
	return n;
}

/* Find or make the child node `name` of parent; file nodes also match on the commit of v (NULL
 * for other nodes), and hold a reference on v while the kernel knows them. */
static struct node *node_child_at(struct fs *fs, struct node *parent, const char *name,
				  enum ntype type, struct tfs_version *v)
{
	size_t b;
	struct node *n;

	pthread_mutex_lock(&fs->lock);
	b = hash_of(parent->ino, name) & (fs->hsize - 1);
	for (n = fs->htab[b]; n; n = n->hnext)
		if (n->parent == parent && !strcmp(n->name, name) && n->type == type &&
		    (!v || tfs_id_eq(&n->commit, &v->commit.id)))
			goto out;
	if (fs->nnodes == fs->cap) {
		size_t cap = fs->cap * 2;
		struct node **nn = realloc(fs->nodes, cap * sizeof(*nn));

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
	n->type = type;
	n->parent = parent;
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

static struct node *node_child(struct fs *fs, struct node *parent, const char *name,
			       enum ntype type)
{
	return node_child_at(fs, parent, name, type, NULL);
}

static const char *node_dataset(const struct node *n)
{
	while (n && n->type != N_DATASET)
		n = n->parent;
	return n ? n->name : NULL;
}

static int is_immutable(const struct fs *fs, const struct node *vn)
{
	int imm;

	pthread_mutex_lock((pthread_mutex_t *)&fs->lock);
	imm = vn->kind != V_BRANCH;
	pthread_mutex_unlock((pthread_mutex_t *)&fs->lock);
	return imm;
}

/* The version a version directory names now (the lake keeps the ref-refresh rule). */
static int ref_version(struct fs *fs, struct node *vn, struct tfs_version **out)
{
	static const enum tfs_lake_ref_kind kinds[] = {
		[V_BRANCH] = TFS_LAKE_BRANCH,
		[V_TAG] = TFS_LAKE_TAG,
		[V_COMMIT] = TFS_LAKE_COMMIT,
	};
	enum vkind kind;
	int rc;

	assert(vn->type == N_VERSION);
	pthread_mutex_lock(&fs->lock);
	kind = vn->kind;
	pthread_mutex_unlock(&fs->lock);
	rc = tfs_lake_version(fs->lake, node_dataset(vn), kinds[kind], vn->name, out);
	return rc == -EIO || rc == -ENOMEM ? rc : rc ? -ENOENT : 0;
}

/* The dataset's log file: the history of main, regenerated when main moves. */
static int log_text(struct fs *fs, struct node *ln, struct tfs_buf *copy, uint64_t *size)
{
	const char *ds = node_dataset(ln);
	struct tfs_buf text = { 0 };
	struct tfs_id head;
	int rc = tfs_ref_read(fs->lake->store, ds, TFS_REF_BRANCH, "main", &head);

	if (rc)
		return rc;
	pthread_mutex_lock(&fs->lock);
	if (!ln->log.data || !tfs_id_eq(&ln->log_head, &head)) {
		pthread_mutex_unlock(&fs->lock);
		rc = tfs_log_text(fs->lake->store, ds, &head, 0, &text);
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

/* How long the kernel may trust what it learns about n. */
static double node_ttl(struct fs *fs, const struct node *n)
{
	for (const struct node *p = n; p; p = p->parent)
		if (p->type == N_VERSION)
			return is_immutable(fs, p) ? IMMUTABLE_TTL : fs->cfg->ref_ttl;
	return fs->cfg->ref_ttl;
}

static uint64_t column_size(const struct tfs_column *c)
{
	return TFS_NPY_ALIGN + c->rows * c->row_bytes;
}

/* Attributes of a node; for files, those of the version v (which the caller resolved). */
static void fill_attr(struct fs *fs, const struct node *n, const struct tfs_version *v,
		      uint64_t log_size, struct stat *st)
{
	memset(st, 0, sizeof(*st));
	st->st_ino = n->ino;
	st->st_uid = fs->uid;
	st->st_gid = fs->gid;
	st->st_mtime = st->st_ctime = st->st_atime = v ? (time_t)v->commit.time : fs->started;
	st->st_blksize = MAX_IO;
	switch (n->type) {
	case N_ROOT:
	case N_DATASET:
	case N_VERSION:
	case N_COMMITS:
	case N_CTLDIR:
	case N_VIEWS:
	case N_VIEW:
		st->st_mode = S_IFDIR | 0555;
		st->st_nlink = 2;
		break;
	case N_CONTROL:
		/* For the user who mounted (and root); for anyone with allow_other. */
		st->st_mode = S_IFREG | (fs->allow_other ? 0666 : 0600);
		st->st_nlink = 1;
		break;
	case N_LOG:
	case N_STATS:
	case N_METRICS:
	case N_ERRORS:
	case N_README:
		st->st_mode = S_IFREG | 0444;
		st->st_nlink = 1;
		st->st_size = (off_t)log_size;
		break;
	case N_COLUMN: {
		int col = tfs_version_column(v, n->name);

		st->st_mode = S_IFREG | 0444;
		st->st_nlink = 1;
		if (n->parent->type == N_VIEW)
			st->st_size = (off_t)log_size; /* the caller knows the view's size */
		else
			st->st_size = col >= 0 ? (off_t)column_size(&v->manifest.cols[col]) : 0;
		break;
	}
	case N_SCHEMA:
		st->st_mode = S_IFREG | 0444;
		st->st_nlink = 1;
		st->st_size = (off_t)v->schema.len;
		break;
	}
	st->st_blocks = (st->st_size + 511) / 512;
}

/* Column name of a "<col>.npy" file name, into buf; NULL if it is not one. */
static const char *column_of(const char *name, char *buf, size_t cap)
{
	size_t n = strlen(name);

	if (n <= 4 || n - 4 >= cap || strcmp(name + n - 4, ".npy"))
		return NULL;
	memcpy(buf, name, n - 4);
	buf[n - 4] = 0;
	return buf;
}

/* For a file node: the version of its ref directory. */
/* The version directory a node lives under. */
static struct node *version_dir(const struct node *n)
{
	while (n && n->type != N_VERSION)
		n = n->parent;
	return (struct node *)n;
}

/* The version a file node shows: the commit it was made for, whatever its branch does. */
static int file_version(struct fs *fs, struct node *n, struct tfs_version **v)
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
	rc = tfs_version_open(fs->lake->store, node_dataset(n), &n->commit, &nv);
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

/* The view a views/<params> directory shows: built once per commit of its version. A bad name
 * is ENOENT, with the reason in the log. */
/* A version directory's path under its dataset: main, v1.0, commits/<id>. */
static void version_name(const struct node *vd, char *buf, size_t cap)
{
	snprintf(buf, cap, "%s%s", vd->parent->type == N_COMMITS ? "commits/" : "", vd->name);
}

static int node_view(struct fs *fs, struct node *vn, struct tfs_version **vout,
		     struct tfs_lake_view **fout)
{
	struct tfs_lake_view *f = NULL, *old;
	struct tfs_version *v;
	char err[256];
	int rc = ref_version(fs, version_dir(vn), &v);

	if (rc)
		return rc;
	pthread_mutex_lock(&fs->lock);
	if (vn->view && tfs_id_eq(&vn->view->ver->commit.id, &v->commit.id)) {
		f = vn->view;
		tfs_lake_view_ref(fs->lake, f);
	}
	pthread_mutex_unlock(&fs->lock);
	if (f)
		goto done;
	/* Built once per commit and name in the lake, and shared with the control file. */
	rc = tfs_lake_view_get(fs->lake, v, vn->name, &f, err, sizeof(err));
	if (rc) {
		tfs_version_put(v);
		if (rc == -EINVAL) {
			char ver[160], path[512];

			/* The lookup fails with ENOENT; the reason goes to .tensorfs/errors. */
			version_name(version_dir(vn), ver, sizeof(ver));
			snprintf(path, sizeof(path), "%s/%s/views/%s", node_dataset(vn), ver,
				 vn->name);
			tfs_fs_stats_error(fs->stats, path, "%s", err);
			rc = -ENOENT;
		}
		return rc;
	}
	tfs_lake_view_ref(fs->lake, f); /* the node's, besides the caller's */
	pthread_mutex_lock(&fs->lock);
	old = vn->view;
	vn->view = f;
	pthread_mutex_unlock(&fs->lock);
	tfs_lake_view_put(fs->lake, old);
done:
	*vout = v;
	*fout = f;
	return 0;
}

static uint64_t view_file_size(const struct tfs_lake_view *f, const struct tfs_column *c)
{
	return TFS_NPY_ALIGN + f->view->n * c->row_bytes;
}

/* Every counter the daemon keeps, at one moment. The control file's part is rendered into ctl,
 * which the caller frees: as JSON for stats, as metric families for metrics. */
static int snapshot(struct fs *fs, enum ntype type, struct tfs_fs_snapshot *s, struct tfs_buf *ctl)
{
	const struct tfs_fs_control *co = fs->cfg->control;
	int rc = 0;

	memset(s, 0, sizeof(*s));
	s->uptime_s = (double)(tfs_now_ns() - fs->started_ns) / 1e9;
	tfs_cache_stats(fs->lake->cache, &s->cache);
	if (fs->lake->prefetch)
		tfs_prefetcher_stats(fs->lake->prefetch, &s->prefetch);
	s->has_disk_cache = tfs_diskcache_stats(fs->lake->store, &s->disk) == 0;
	s->cache_dir = fs->lake->cache_dir;
	/* The backend's own counters: with a disk cache, what really went over the wire. */
	tfs_store_counters(tfs_diskcache_inner(fs->lake->store), &s->store);
	s->store_url = fs->lake->store->url;
	s->reads = __atomic_load_n(&fs->reads, __ATOMIC_RELAXED);
	s->read_bytes = __atomic_load_n(&fs->read_bytes, __ATOMIC_RELAXED);
	if (fs->ctl && type == N_STATS) {
		rc = co->stats_json(fs->ctl, ctl);
		s->control_json = ctl->len ? (const char *)ctl->data : NULL;
	} else if (fs->ctl && co->metrics) {
		rc = co->metrics(fs->ctl, ctl);
		s->control_metrics = ctl->len ? (const char *)ctl->data : NULL;
	}
	return rc;
}

/* The content of a generated .tensorfs/ file: stats (JSON), metrics (Prometheus), errors. */
static int gen_text(struct fs *fs, enum ntype type, struct tfs_buf *out)
{
	struct tfs_buf ctl = { 0 };
	struct tfs_fs_snapshot s;
	int rc;

	if (type == N_ERRORS)
		return tfs_fs_errors_text(fs->stats, out);
	rc = snapshot(fs, type, &s, &ctl);
	if (!rc)
		rc = type == N_STATS ? tfs_fs_stats_json(fs->stats, &s, out)
				     : tfs_fs_metrics_text(fs->stats, &s, out);
	tfs_buf_free(&ctl);
	return rc;
}

static uint64_t gen_size(struct fs *fs, enum ntype type)
{
	struct tfs_buf b = { 0 };
	uint64_t n = gen_text(fs, type, &b) ? 0 : b.len;

	tfs_buf_free(&b);
	return n;
}

static const struct {
	const char *name;
	enum ntype type;
} gen_files[] = { { "stats", N_STATS }, { "metrics", N_METRICS }, { "errors", N_ERRORS } };

static int is_gen(enum ntype t)
{
	return t == N_STATS || t == N_METRICS || t == N_ERRORS;
}

static void op_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct fs *fs = fs_of(req);
	struct node *p = node_get(fs, parent), *n = NULL;
	struct tfs_version *v = NULL;
	struct fuse_entry_param e;
	struct tfs_lake_view *fv = NULL;
	uint64_t log_size = 0;
	enum tfs_ref_kind kind;
	struct tfs_id id;
	char col[256];
	int rc = -ENOENT;

	memset(&e, 0, sizeof(e));
	if (!p)
		goto out;
	switch (p->type) {
	case N_ROOT:
		if (!strcmp(name, CTL_DIR))
			n = node_child(fs, p, name, N_CTLDIR);
		else if (tfs_name_valid(name) && !(rc = tfs_dataset_check(fs->lake->store, name)))
			n = node_child(fs, p, name, N_DATASET);
		break;
	case N_CTLDIR:
		for (size_t i = 0; i < sizeof(gen_files) / sizeof(gen_files[0]); i++)
			if (!strcmp(name, gen_files[i].name)) {
				n = node_child(fs, p, name, gen_files[i].type);
				log_size = gen_size(fs, gen_files[i].type);
			}
		if (!strcmp(name, "control") && fs->ctl) {
			n = node_child(fs, p, name, N_CONTROL);
		}
		break;
	case N_DATASET:
		if (!strcmp(name, "commits")) {
			n = node_child(fs, p, name, N_COMMITS);
			break;
		}
		if (!strcmp(name, "log")) {
			n = node_child(fs, p, name, N_LOG);
			if (n && (rc = log_text(fs, n, NULL, &log_size)))
				n = NULL;
			break;
		}
		if (!tfs_name_valid(name) ||
		    (rc = tfs_ref_lookup(fs->lake->store, p->name, name, &kind, &id)))
			break;
		n = node_child(fs, p, name, N_VERSION);
		if (!n)
			break;
		pthread_mutex_lock(&fs->lock);
		n->kind = kind == TFS_REF_TAG ? V_TAG : V_BRANCH;
		pthread_mutex_unlock(&fs->lock);
		if ((rc = ref_version(fs, n, &v)))
			n = NULL;
		break;
	case N_COMMITS:
		if (strlen(name) != TFS_ID_HEX - 1 || tfs_id_parse(name, &id))
			break;
		n = node_child(fs, p, name, N_VERSION);
		if (!n)
			break;
		pthread_mutex_lock(&fs->lock);
		n->kind = V_COMMIT;
		pthread_mutex_unlock(&fs->lock);
		if ((rc = ref_version(fs, n, &v)))
			n = NULL;
		break;
	case N_VERSION:
		rc = ref_version(fs, p, &v);
		if (rc)
			break;
		rc = -ENOENT;
		if (!strcmp(name, "schema.json"))
			n = node_child_at(fs, p, name, N_SCHEMA, v);
		else if (!strcmp(name, "views"))
			n = node_child(fs, p, name, N_VIEWS);
		else if (column_of(name, col, sizeof(col)) && tfs_version_column(v, col) >= 0)
			n = node_child_at(fs, p, col, N_COLUMN, v);
		break;
	case N_VIEWS:
		if (!strcmp(name, "README")) {
			n = node_child(fs, p, name, N_README);
			log_size = strlen(tfs_view_readme);
			break;
		}
		n = node_child(fs, p, name, N_VIEW);
		if (n && (rc = node_view(fs, n, &v, &fv)))
			n = NULL;
		break;
	case N_VIEW:
		rc = node_view(fs, p, &v, &fv);
		if (rc)
			break;
		rc = -ENOENT;
		if (column_of(name, col, sizeof(col)) && tfs_version_column(v, col) >= 0) {
			n = node_child_at(fs, p, col, N_COLUMN, v);
			log_size =
				view_file_size(fv, &v->manifest.cols[tfs_version_column(v, col)]);
		}
		break;
	default:
		rc = -ENOTDIR;
	}
	tfs_lake_view_put(fs->lake, fv);
	if (!n) {
		if (rc == -ENOENT) {
			/* Negative entries expire like positive ones: a dataset or ref created
			 * later shows up within the TTL. */
			e.entry_timeout = node_ttl(fs, p);
			fuse_reply_entry(req, &e);
			tfs_version_put(v);
			return;
		}
		goto out;
	}
	e.ino = n->ino;
	fill_attr(fs, n,
		  n->type == N_VERSION || n->type == N_COLUMN || n->type == N_SCHEMA ||
				  n->type == N_VIEW
			  ? v
			  : NULL,
		  log_size, &e.attr);
	e.attr_timeout = node_ttl(fs, n);
	e.entry_timeout = node_ttl(fs, n);
	tfs_version_put(v);
	if (n->type == N_COLUMN || n->type == N_SCHEMA) {
		pthread_mutex_lock(&fs->lock);
		n->nlookup++;
		pthread_mutex_unlock(&fs->lock);
	}
	fuse_reply_entry(req, &e);
	return;
out:
	tfs_version_put(v);
	fuse_reply_err(req,
		       rc == -ENOMEM || rc == -EIO || rc == -ENOENT || rc == -ENOTDIR ? -rc : EIO);
}

/* The kernel dropped nlookup references to ino. A file inode nobody knows any more lets go of
 * its commit (the node itself stays: inode numbers are never reused). */
static void forget_one(struct fs *fs, fuse_ino_t ino, uint64_t nlookup)
{
	struct tfs_version *drop = NULL;
	struct node *n;

	pthread_mutex_lock(&fs->lock);
	n = ino >= 1 && ino <= fs->nnodes ? fs->nodes[ino - 1] : NULL;
	if (n && (n->type == N_COLUMN || n->type == N_SCHEMA)) {
		n->nlookup = n->nlookup > nlookup ? n->nlookup - nlookup : 0;
		if (n->nlookup == 0) {
			drop = n->ver;
			n->ver = NULL;
		}
	}
	pthread_mutex_unlock(&fs->lock);
	tfs_version_put(drop);
}

static void op_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup)
{
	forget_one(fs_of(req), ino, nlookup);
	fuse_reply_none(req);
}

static void op_forget_multi(fuse_req_t req, size_t count, struct fuse_forget_data *forgets)
{
	for (size_t i = 0; i < count; i++)
		forget_one(fs_of(req), forgets[i].ino, forgets[i].nlookup);
	fuse_reply_none(req);
}

static void op_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct fs *fs = fs_of(req);
	struct node *n = node_get(fs, ino);
	struct tfs_version *v = NULL;
	uint64_t log_size = 0;
	struct stat st;
	int rc = 0;

	if (!n) {
		fuse_reply_err(req, ENOENT);
		return;
	}
	if (fi && fi->fh && (n->type == N_COLUMN || n->type == N_SCHEMA)) {
		/* fstat on an open file describes what that file reads. */
		v = ((struct handle *)fi->fh)->ver;
		log_size = ((struct handle *)fi->fh)->size;
		tfs_version_get(v);
	} else if (n->type == N_VERSION) {
		rc = ref_version(fs, n, &v);
	} else if (n->type == N_VIEW) {
		struct tfs_lake_view *fv;

		rc = node_view(fs, n, &v, &fv);
		if (!rc)
			tfs_lake_view_put(fs->lake, fv);
	} else if (n->type == N_COLUMN && n->parent->type == N_VIEW) {
		struct tfs_lake_view *fv;

		rc = node_view(fs, n->parent, &v, &fv);
		if (!rc && tfs_version_column(v, n->name) < 0) {
			tfs_lake_view_put(fs->lake, fv);
			tfs_version_put(v);
			v = NULL;
			rc = -ENOENT;
		} else if (!rc) {
			log_size = view_file_size(
				fv, &v->manifest.cols[tfs_version_column(v, n->name)]);
			tfs_lake_view_put(fs->lake, fv);
		}
	} else if (n->type == N_COLUMN || n->type == N_SCHEMA) {
		rc = file_version(fs, n, &v);
	} else if (n->type == N_README) {
		log_size = strlen(tfs_view_readme);
	} else if (n->type == N_LOG) {
		rc = log_text(fs, n, NULL, &log_size);
	} else if (is_gen(n->type)) {
		log_size = gen_size(fs, n->type);
	}
	if (rc) {
		fuse_reply_err(req, -rc);
		return;
	}
	fill_attr(fs, n, v, log_size, &st);
	tfs_version_put(v);
	fuse_reply_attr(req, &st, node_ttl(fs, n));
}

static int dir_add(struct dirlist *d, const char *name, fuse_ino_t ino, mode_t mode)
{
	struct entry *e = realloc(d->ents, (d->n + 1) * sizeof(*e));
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

struct list_ctx {
	struct fs *fs;
	struct node *parent;
	struct dirlist *d;
	enum ntype type;
	enum vkind kind; /* for N_VERSION children */
};

static int list_child(void *arg, const char *name, int is_dir)
{
	struct list_ctx *l = arg;
	struct node *n;

	(void)is_dir;
	if (!tfs_name_valid(name))
		return 0;
	n = node_child(l->fs, l->parent, name, l->type);
	if (!n)
		return -ENOMEM;
	if (l->type == N_VERSION) {
		pthread_mutex_lock(&l->fs->lock);
		n->kind = l->kind;
		pthread_mutex_unlock(&l->fs->lock);
	}
	return dir_add(l->d, name, n->ino, S_IFDIR);
}

static void dirlist_free(struct dirlist *d)
{
	if (!d)
		return;
	tfs_buf_free(&d->names);
	free(d->ents);
	free(d);
}

static void op_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct fs *fs = fs_of(req);
	struct node *n = node_get(fs, ino);
	struct dirlist *d = calloc(1, sizeof(*d));
	struct tfs_version *v = NULL;
	struct list_ctx l = { fs, n, d, N_DATASET, V_BRANCH };
	int rc;

	if (!d) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	if (!n) {
		rc = -ENOENT;
		goto out;
	}
	rc = dir_add(d, ".", n->ino, S_IFDIR);
	if (!rc)
		rc = dir_add(d, "..", n->parent ? n->parent->ino : n->ino, S_IFDIR);
	if (rc)
		goto out;
	switch (n->type) {
	case N_ROOT: {
		struct node *c = node_child(fs, n, CTL_DIR, N_CTLDIR);

		rc = c ? dir_add(d, CTL_DIR, c->ino, S_IFDIR) : -ENOMEM;
		if (!rc)
			rc = tfs_dataset_list(fs->lake->store, list_child, &l);
		break;
	}
	case N_CTLDIR: {
		struct node *c;

		for (size_t i = 0; i < sizeof(gen_files) / sizeof(gen_files[0]) && !rc; i++) {
			c = node_child(fs, n, gen_files[i].name, gen_files[i].type);
			rc = c ? dir_add(d, gen_files[i].name, c->ino, S_IFREG) : -ENOMEM;
		}
		if (!rc && fs->ctl) {
			c = node_child(fs, n, "control", N_CONTROL);
			rc = c ? dir_add(d, "control", c->ino, S_IFREG) : -ENOMEM;
		}
		break;
	}
	case N_DATASET: {
		struct node *c = node_child(fs, n, "commits", N_COMMITS);
		struct node *lg = node_child(fs, n, "log", N_LOG);

		rc = c && lg ? dir_add(d, "commits", c->ino, S_IFDIR) : -ENOMEM;
		if (!rc)
			rc = dir_add(d, "log", lg->ino, S_IFREG);
		l.type = N_VERSION;
		l.kind = V_BRANCH;
		if (!rc)
			rc = tfs_ref_list(fs->lake->store, n->name, TFS_REF_BRANCH, list_child, &l);
		l.kind = V_TAG;
		if (!rc)
			rc = tfs_ref_list(fs->lake->store, n->name, TFS_REF_TAG, list_child, &l);
		break;
	}
	case N_COMMITS: {
		struct tfs_idset all = { 0 };

		l.type = N_VERSION;
		l.kind = V_COMMIT;
		rc = tfs_reachable_commits(fs->lake->store, node_dataset(n), &all);
		for (size_t i = 0; !rc && i < all.cap; i++) {
			char hex[TFS_ID_HEX];

			if (tfs_id_is_zero(&all.slots[i]))
				continue;
			tfs_id_hex(&all.slots[i], hex);
			rc = list_child(&l, hex, 1);
		}
		tfs_idset_free(&all);
		break;
	}
	case N_VERSION:
		rc = ref_version(fs, n, &v);
		for (size_t i = 0; !rc && i < v->manifest.ncols; i++) {
			const char *name = v->manifest.cols[i].name;
			struct node *c = node_child_at(fs, n, name, N_COLUMN, v);
			char file[160];

			snprintf(file, sizeof(file), "%s.npy", name);
			rc = c ? dir_add(d, file, c->ino, S_IFREG) : -ENOMEM;
		}
		if (!rc) {
			struct node *c = node_child_at(fs, n, "schema.json", N_SCHEMA, v);

			rc = c ? dir_add(d, "schema.json", c->ino, S_IFREG) : -ENOMEM;
		}
		if (!rc) {
			struct node *c = node_child(fs, n, "views", N_VIEWS);

			rc = c ? dir_add(d, "views", c->ino, S_IFDIR) : -ENOMEM;
		}
		break;
	case N_VIEWS: {
		/* Views are named by their parameters: nothing to list but the grammar. */
		struct node *c = node_child(fs, n, "README", N_README);

		rc = c ? dir_add(d, "README", c->ino, S_IFREG) : -ENOMEM;
		break;
	}
	case N_VIEW: {
		struct tfs_lake_view *fv;

		rc = node_view(fs, n, &v, &fv);
		if (!rc)
			tfs_lake_view_put(fs->lake, fv);
		for (size_t i = 0; !rc && i < v->manifest.ncols; i++) {
			const char *name = v->manifest.cols[i].name;
			struct node *c = node_child_at(fs, n, name, N_COLUMN, v);
			char file[160];

			snprintf(file, sizeof(file), "%s.npy", name);
			rc = c ? dir_add(d, file, c->ino, S_IFREG) : -ENOMEM;
		}
		break;
	}
	default:
		rc = -ENOTDIR;
	}
out:
	tfs_version_put(v);
	if (rc) {
		dirlist_free(d);
		fuse_reply_err(req, -rc);
		return;
	}
	link_add(fs, &fs->open_dirs, &d->link);
	fi->fh = (uintptr_t)d;
	fi->cache_readdir = 0;
	fuse_reply_open(req, fi);
}

static void op_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		       struct fuse_file_info *fi)
{
	struct dirlist *d = (struct dirlist *)fi->fh;
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
	struct dirlist *d = (struct dirlist *)fi->fh;

	(void)ino;
	link_del(fs_of(req), &d->link);
	dirlist_free(d);
	fuse_reply_err(req, 0);
}

static void handle_free(struct fs *fs, struct handle *h)
{
	if (h->ctl)
		h->ctl_ops->close(h->ctl);
	tfs_stream_destroy(h->stream);
	tfs_version_put(h->ver);
	tfs_lake_view_put(fs->lake, h->view);
	free(h->chunk_pos);
	tfs_buf_free(&h->text);
	free(h);
}

/* End an open: reply with the error (freeing whatever h holds by then) or hand h to the kernel. */
static void open_finish(fuse_req_t req, struct fs *fs, struct handle *h, struct fuse_file_info *fi,
			int rc)
{
	if (rc) {
		handle_free(fs, h);
		fuse_reply_err(req, -rc);
		return;
	}
	handle_publish(fs, h, fi);
	fuse_reply_open(req, fi);
}

/* A column file of a view: the view's rows in view order; the prefetcher follows the order in
 * which the view first needs each chunk. */
static void open_view_column(fuse_req_t req, struct fs *fs, struct node *n, struct handle *h,
			     struct fuse_file_info *fi)
{
	const struct tfs_column *c;
	uint32_t *order = NULL;
	size_t norder;
	int rc = node_view(fs, n->parent, &h->ver, &h->view);

	if (rc) {
		open_finish(req, fs, h, fi, rc);
		return;
	}
	if (!tfs_id_eq(&h->ver->commit.id, &n->commit)) {
		/* The branch moved since this name was looked up: look it up again. */
		open_finish(req, fs, h, fi, -ESTALE);
		return;
	}
	if (tfs_version_column(h->ver, n->name) < 0) {
		open_finish(req, fs, h, fi, -ENOENT);
		return;
	}
	h->col = (size_t)tfs_version_column(h->ver, n->name);
	c = &h->ver->manifest.cols[h->col];
	h->size = view_file_size(h->view, c);
	rc = tfs_npy_header_build(&c->dtype, h->view->view->n, c->ndim, c->shape, h->header);
	if (!rc)
		rc = tfs_view_chunk_order(h->view->view, c, &order, &norder, &h->chunk_pos);
	if (!rc && fs->lake->prefetch) {
		rc = tfs_stream_create(fs->lake->prefetch, h->ver, h->col, order, norder,
				       &h->stream);
		if (!rc)
			tfs_stream_expect_sequential(h->stream);
	}
	free(order);
	/* One inode per commit: what the kernel cached for it stays true. */
	fi->keep_cache = 1;
	open_finish(req, fs, h, fi, rc);
}

/* The control file: each open is a staging session. Replies are a stream, not a file: no page
 * cache, and offsets are ignored. It stays seekable so that `head -1 <&3` can seek back over
 * what it read past the reply's newline (a no-op) without complaining. */
static void open_control(fuse_req_t req, struct fs *fs, struct fuse_file_info *fi)
{
	const struct fuse_ctx *ctx = fuse_req_ctx(req);
	struct handle *h;
	int rc;

	if (ctx->uid != fs->uid && ctx->uid != 0 && !fs->allow_other) {
		fuse_reply_err(req, EACCES);
		return;
	}
	h = calloc(1, sizeof(*h));
	if (!h) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	h->type = N_CONTROL;
	h->ctl_ops = fs->cfg->control;
	rc = fs->cfg->control->open(fs->ctl, ctx->uid, ctx->gid, &h->ctl);
	fi->direct_io = 1;
	open_finish(req, fs, h, fi, rc);
}

static void op_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct fs *fs = fs_of(req);
	struct node *n = node_get(fs, ino);
	struct handle *h;
	int rc;

	if (!n) {
		fuse_reply_err(req, ENOENT);
		return;
	}
	if (n->type == N_CONTROL) {
		open_control(req, fs, fi);
		return;
	}
	if (n->type != N_COLUMN && n->type != N_SCHEMA && n->type != N_LOG && !is_gen(n->type) &&
	    n->type != N_README) {
		fuse_reply_err(req, EISDIR);
		return;
	}
	if ((fi->flags & O_ACCMODE) != O_RDONLY) {
		fuse_reply_err(req, EROFS);
		return;
	}
	h = calloc(1, sizeof(*h));
	if (!h) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	h->type = n->type;
	if (n->type == N_LOG || is_gen(n->type) || n->type == N_README) {
		/* Generated text whose size may change between stat and read: no page cache. */
		if (is_gen(n->type)) {
			rc = gen_text(fs, n->type, &h->text);
			h->size = h->text.len;
		} else if (n->type == N_README) {
			rc = tfs_buf_append(&h->text, tfs_view_readme, strlen(tfs_view_readme));
			h->size = h->text.len;
		} else {
			rc = log_text(fs, n, &h->text, &h->size);
		}
		fi->direct_io = 1;
		open_finish(req, fs, h, fi, rc);
		return;
	}
	if (n->type == N_COLUMN) {
		char ver[160];

		version_name(version_dir(n), ver, sizeof(ver));
		h->acct = tfs_fs_stats_acct(fs->stats, node_dataset(n), ver);
	}
	if (n->type == N_COLUMN && n->parent->type == N_VIEW) {
		open_view_column(req, fs, n, h, fi);
		return;
	}
	rc = file_version(fs, n, &h->ver);
	if (rc) {
		open_finish(req, fs, h, fi, rc);
		return;
	}
	if (n->type == N_COLUMN) {
		const struct tfs_column *c;

		h->col = (size_t)tfs_version_column(h->ver, n->name);
		c = &h->ver->manifest.cols[h->col];
		h->size = column_size(c);
		rc = tfs_npy_header_build(&c->dtype, c->rows, c->ndim, c->shape, h->header);
		if (!rc && fs->lake->prefetch)
			rc = tfs_stream_create(fs->lake->prefetch, h->ver, h->col, NULL, c->nchunks,
					       &h->stream);
	} else {
		h->size = h->ver->schema.len;
	}
	/* One inode per commit: what the kernel cached for it stays true. */
	fi->keep_cache = 1;
	open_finish(req, fs, h, fi, rc);
}

static void op_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct handle *h = (struct handle *)fi->fh;
	struct fs *fs = fs_of(req);

	(void)ino;
	link_del(fs, &h->link);
	handle_free(fs, h);
	fuse_reply_err(req, 0);
}

/* -o splice: the same reply through libfuse's splice path (vmsplice of the pieces into a pipe,
 * splice into /dev/fuse). Measured against writev for the README; writev is the default. */
static void reply_spliced(fuse_req_t req, const struct iovec *iov, size_t count)
{
	struct fuse_bufvec *bv = calloc(1, sizeof(*bv) + count * sizeof(bv->buf[0]));

	if (!bv) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	bv->count = count;
	for (size_t i = 0; i < count; i++) {
		bv->buf[i].mem = iov[i].iov_base;
		bv->buf[i].size = iov[i].iov_len;
	}
	fuse_reply_data(req, bv, FUSE_BUF_SPLICE_NONBLOCK);
	free(bv);
}

/* Tiny chunks would need more iovecs than writev takes: assemble the reply in one buffer. */
static void read_column_copy(fuse_req_t req, struct fs *fs, struct handle *h, uint64_t pos,
			     uint64_t end)
{
	size_t len = (size_t)(end - pos), hdr = 0;
	char *buf = malloc(len);
	ssize_t r;

	if (!buf) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	if (pos < TFS_NPY_ALIGN) {
		hdr = (size_t)((end < TFS_NPY_ALIGN ? end : TFS_NPY_ALIGN) - pos);
		memcpy(buf, h->header + pos, hdr);
	}
	r = tfs_version_read(h->ver, fs->lake->cache, h->col, pos + hdr - TFS_NPY_ALIGN, buf + hdr,
			     len - hdr);
	if (r < 0 || (size_t)r != len - hdr)
		fuse_reply_err(req, r == -ENOMEM ? ENOMEM : EIO);
	else
		fuse_reply_buf(req, buf, len);
	free(buf);
}

static void read_column(fuse_req_t req, struct fs *fs, struct handle *h, size_t size, off_t off)
{
	const struct tfs_column *c = &h->ver->manifest.cols[h->col];
	const uint64_t chunk_bytes = c->rows_per_chunk * c->row_bytes;
	uint64_t pos = (uint64_t)off, end = (uint64_t)off + size;
	struct tfs_cache_entry **pinned = NULL;
	struct iovec *iov = NULL;
	size_t npinned = 0, maxbufs, count = 0;
	char header[TFS_NPY_ALIGN];
	int rc = 0;

	if (end > h->size)
		end = h->size;
	if (pos >= end) {
		fuse_reply_buf(req, NULL, 0);
		return;
	}
	/* One buffer for the header part plus one per chunk touched. */
	maxbufs = 2 + (chunk_bytes ? (size_t)((end - pos) / chunk_bytes) + 1 : 0);
	if (maxbufs > MAX_IOV) {
		read_column_copy(req, fs, h, pos, end);
		return;
	}
	iov = calloc(maxbufs, sizeof(*iov));
	pinned = calloc(maxbufs, sizeof(*pinned));
	if (!iov || !pinned) {
		rc = -ENOMEM;
		goto out;
	}
	if (h->stream && end > TFS_NPY_ALIGN && chunk_bytes) {
		uint64_t d0 = pos > TFS_NPY_ALIGN ? pos - TFS_NPY_ALIGN : 0;

		tfs_stream_access(h->stream, (size_t)(d0 / chunk_bytes),
				  (size_t)((end - 1 - TFS_NPY_ALIGN) / chunk_bytes));
	}
	if (pos < TFS_NPY_ALIGN) {
		size_t n = (size_t)((end < TFS_NPY_ALIGN ? end : TFS_NPY_ALIGN) - pos);

		/* A copy: once the reply is written the reader may close the file, and its release
		 * (on another thread) frees the handle while writev is still returning. */
		memcpy(header, h->header + pos, n);
		iov[count].iov_base = header;
		iov[count].iov_len = n;
		count++;
		pos += n;
	}
	while (pos < end) {
		uint64_t dpos = pos - TFS_NPY_ALIGN;
		size_t k = (size_t)(dpos / chunk_bytes), in = (size_t)(dpos % chunk_bytes), n;
		struct tfs_cache_entry *e;

		assert(count < maxbufs);
		rc = tfs_version_chunk_get(h->ver, fs->lake->cache, h->col, k, &e);
		if (rc)
			goto out;
		pinned[npinned++] = e;
		n = e->len - in;
		if (n > end - pos)
			n = (size_t)(end - pos);
		iov[count].iov_base = (void *)(e->data + in);
		iov[count].iov_len = n;
		count++;
		pos += n;
	}
	/* The reply is written straight from the cache entries (one writev), which stay pinned
	 * until it returns. */
	if (fs->cfg->splice)
		reply_spliced(req, iov, count);
	else
		fuse_reply_iov(req, iov, (int)count);
out:
	for (size_t i = 0; i < npinned; i++)
		tfs_cache_put(fs->lake->cache, pinned[i]);
	free(pinned);
	free(iov);
	if (rc)
		fuse_reply_err(req, rc == -ENOMEM ? ENOMEM : EIO);
}

/* Reads of a view column: rows gathered from wherever the view order puts them. */
static void read_view_column(fuse_req_t req, struct fs *fs, struct handle *h, size_t size,
			     uint64_t pos)
{
	const struct tfs_column *c = &h->ver->manifest.cols[h->col];
	const struct tfs_view *view = h->view->view;
	const uint64_t rb = c->row_bytes;
	uint64_t end = pos + size;
	struct tfs_cache_entry **pinned = NULL;
	size_t *pinned_k = NULL, npinned = 0, maxpieces, count = 0;
	struct iovec *iov = NULL;
	char header[TFS_NPY_ALIGN], *buf = NULL;
	int rc = 0;

	if (end > h->size)
		end = h->size;
	if (pos >= end) {
		fuse_reply_buf(req, NULL, 0);
		return;
	}
	if (h->stream && end > TFS_NPY_ALIGN && rb) {
		uint64_t r0 = (pos > TFS_NPY_ALIGN ? pos - TFS_NPY_ALIGN : 0) / rb;
		uint64_t r1 = (end - 1 - TFS_NPY_ALIGN) / rb;
		size_t lo = SIZE_MAX, hi = 0;

		for (uint64_t r = r0; r <= r1; r++) {
			size_t p = h->chunk_pos[view->rows[r] / c->rows_per_chunk];

			lo = p < lo ? p : lo;
			hi = p > hi ? p : hi;
		}
		tfs_stream_access(h->stream, lo, hi);
	}
	/* One piece per row (rows that follow each other in one chunk merge) plus the header. */
	maxpieces = 2 + (rb ? (size_t)((end - pos) / rb) + 1 : 0);
	iov = calloc(maxpieces, sizeof(*iov));
	pinned = calloc(maxpieces, sizeof(*pinned));
	pinned_k = calloc(maxpieces, sizeof(*pinned_k));
	if (!iov || !pinned || !pinned_k) {
		rc = -ENOMEM;
		goto out;
	}
	for (uint64_t at = pos; at < end;) {
		uint64_t d, row, in, src, n;
		const uint8_t *from;
		struct tfs_cache_entry *e = NULL;
		size_t k;

		if (at < TFS_NPY_ALIGN) {
			n = (end < TFS_NPY_ALIGN ? end : TFS_NPY_ALIGN) - at;
			/* A copy, as in read_column: release may free the handle during writev. */
			memcpy(header, h->header + at, (size_t)n);
			iov[count].iov_base = header;
			iov[count++].iov_len = (size_t)n;
			at += n;
			continue;
		}
		d = at - TFS_NPY_ALIGN;
		row = d / rb;
		in = d % rb;
		src = view->rows[row];
		k = (size_t)(src / c->rows_per_chunk);
		n = rb - in < end - at ? rb - in : end - at;
		/* A view's rows come from a window of a few chunks: pin each once per read. */
		for (size_t i = npinned; i-- > 0;)
			if (pinned_k[i] == k) {
				e = pinned[i];
				break;
			}
		if (!e) {
			rc = tfs_version_chunk_get(h->ver, fs->lake->cache, h->col, k, &e);
			if (rc)
				goto out;
			pinned[npinned] = e;
			pinned_k[npinned++] = k;
		}
		from = e->data + (src % c->rows_per_chunk) * rb + in;
		if (count &&
		    (const uint8_t *)iov[count - 1].iov_base + iov[count - 1].iov_len == from)
			iov[count - 1].iov_len += (size_t)n;
		else {
			iov[count].iov_base = (void *)from;
			iov[count++].iov_len = (size_t)n;
		}
		at += n;
	}
	if (count <= MAX_VIEW_IOV) {
		/* Straight from the pinned chunks: the kernel copies each row once. */
		fuse_reply_iov(req, iov, (int)count);
	} else {
		/* Many small rows: one buffer is cheaper than a huge iovec (and writev's limit). */
		size_t len = (size_t)(end - pos), at = 0;

		buf = malloc(len);
		if (!buf) {
			rc = -ENOMEM;
			goto out;
		}
		for (size_t i = 0; i < count; i++) {
			memcpy(buf + at, iov[i].iov_base, iov[i].iov_len);
			at += iov[i].iov_len;
		}
		fuse_reply_buf(req, buf, len);
	}
out:
	for (size_t i = 0; i < npinned; i++)
		tfs_cache_put(fs->lake->cache, pinned[i]);
	free(pinned);
	free(pinned_k);
	free(iov);
	free(buf);
	if (rc)
		fuse_reply_err(req, rc == -ENOMEM ? ENOMEM : EIO);
}

static void op_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		    struct fuse_file_info *fi)
{
	struct handle *h = (struct handle *)fi->fh;
	struct fs *fs = fs_of(req);
	char *copy;

	(void)ino;
	if (h->type == N_CONTROL) {
		ssize_t n;

		copy = malloc(size ? size : 1);
		if (!copy) {
			fuse_reply_err(req, ENOMEM);
			return;
		}
		n = fs->cfg->control->read(h->ctl, copy, size);
		fuse_reply_buf(req, copy, (size_t)n);
		free(copy);
		return;
	}
	if (h->type == N_COLUMN) {
		__atomic_add_fetch(&fs->reads, 1, __ATOMIC_RELAXED);
		__atomic_add_fetch(&fs->read_bytes, size, __ATOMIC_RELAXED);
		if (h->acct)
			tfs_fs_acct_read(h->acct, size);
	}
	if (h->type == N_COLUMN && h->view) {
		read_view_column(req, fs_of(req), h, size, (uint64_t)off);
		return;
	}
	if (h->type == N_COLUMN) {
		read_column(req, fs_of(req), h, size, off);
		return;
	}
	if ((uint64_t)off >= h->size) {
		fuse_reply_buf(req, NULL, 0);
		return;
	}
	if (size > h->size - (uint64_t)off)
		size = (size_t)(h->size - (uint64_t)off);
	/* Small generated files: reply from a copy, for the same reason as the NPY header. */
	copy = malloc(size ? size : 1);
	if (!copy) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	memcpy(copy, (const char *)(h->ver ? h->ver->schema.data : h->text.data) + off, size);
	fuse_reply_buf(req, copy, size);
	free(copy);
}

/* Requests to the control file; every other file is opened read-only and never gets here. */
static void op_write(fuse_req_t req, fuse_ino_t ino, const char *buf, size_t size, off_t off,
		     struct fuse_file_info *fi)
{
	struct handle *h = (struct handle *)fi->fh;
	ssize_t n;

	(void)ino;
	(void)off;
	if (h->type != N_CONTROL) {
		fuse_reply_err(req, EROFS);
		return;
	}
	n = fs_of(req)->cfg->control->write(h->ctl, buf, size);
	if (n < 0)
		fuse_reply_err(req, (int)-n);
	else
		fuse_reply_write(req, (size_t)n);
}

/* The control file's ioctls: restricted (the kernel sized the buffers from the command). */
static void op_ioctl(fuse_req_t req, fuse_ino_t ino, unsigned int cmd, void *arg,
		     struct fuse_file_info *fi, unsigned flags, const void *in_buf, size_t in_bufsz,
		     size_t out_bufsz)
{
	struct handle *h = fi ? (struct handle *)fi->fh : NULL;
	void *out;
	int rc;

	(void)ino;
	(void)arg;
	/* 32-bit callers would lay the structs out differently. */
	if (!h || h->type != N_CONTROL || (flags & (FUSE_IOCTL_DIR | FUSE_IOCTL_COMPAT))) {
		fuse_reply_err(req, ENOTTY);
		return;
	}
	out = malloc(out_bufsz ? out_bufsz : 1);
	if (!out) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	rc = fs_of(req)->cfg->control->ioctl(h->ctl, cmd, in_buf, in_bufsz, out, out_bufsz);
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
	struct fs *fs = fs_of(req);
	struct node *n = node_get(fs, ino);
	struct stat st;

	(void)attr;
	(void)fi;
	/* `echo ... > control` truncates before it writes: there is nothing to truncate. */
	if (n && n->type == N_CONTROL &&
	    !(to_set & ~(FUSE_SET_ATTR_SIZE | FUSE_SET_ATTR_ATIME | FUSE_SET_ATTR_MTIME |
			 FUSE_SET_ATTR_ATIME_NOW | FUSE_SET_ATTR_MTIME_NOW))) {
		fill_attr(fs, n, NULL, 0, &st);
		fuse_reply_attr(req, &st, 0);
		return;
	}
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
#define XATTR_PREFIX "user.tensorfs."
#define MAX_XATTRS 6

struct xattrs {
	size_t n;
	const char *names[MAX_XATTRS];
	char values[MAX_XATTRS][TFS_MAX_DIMS * 22];
};

static int node_xattrs(struct fs *fs, struct node *n, struct xattrs *x)
{
	struct tfs_version *v = NULL;
	char hex[TFS_ID_HEX];
	int rc;

	x->n = 0;
	if (n->type == N_VERSION)
		rc = ref_version(fs, n, &v);
	else if (n->type == N_COLUMN || n->type == N_SCHEMA)
		rc = file_version(fs, n, &v);
	else
		return 0;
	if (rc)
		return rc;
	tfs_id_hex(&v->commit.id, hex);
	x->names[x->n] = "commit";
	snprintf(x->values[x->n++], sizeof(x->values[0]), "%s", hex);
	if (n->type == N_COLUMN) {
		const struct tfs_column *c = &v->manifest.cols[tfs_version_column(v, n->name)];
		char *shape = x->values[x->n + 1];
		size_t len = 0;

		x->names[x->n] = "dtype";
		snprintf(x->values[x->n++], sizeof(x->values[0]), "%s", c->dtype.descr);
		/* The shape of one row, as in schema.json. */
		len += (size_t)snprintf(shape, sizeof(x->values[0]), "[");
		for (unsigned d = 0; d < c->ndim && len < sizeof(x->values[0]); d++)
			len += (size_t)snprintf(shape + len, sizeof(x->values[0]) - len,
						"%s%" PRIu64, d ? ", " : "", c->shape[d]);
		if (len < sizeof(x->values[0]))
			snprintf(shape + len, sizeof(x->values[0]) - len, "]");
		x->names[x->n++] = "shape";
		x->names[x->n] = "rows";
		snprintf(x->values[x->n++], sizeof(x->values[0]), "%" PRIu64, c->rows);
		x->names[x->n] = "chunk_bytes";
		snprintf(x->values[x->n++], sizeof(x->values[0]), "%" PRIu64,
			 c->rows_per_chunk * c->row_bytes);
		x->names[x->n] = "codec";
		snprintf(x->values[x->n++], sizeof(x->values[0]), "%s",
			 tfs_codec_by_id(c->codec)->name);
	}
	tfs_version_put(v);
	return 0;
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
	struct fs *fs = fs_of(req);
	struct node *n = node_get(fs, ino);
	struct xattrs x;
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
		if (strncmp(name, XATTR_PREFIX, strlen(XATTR_PREFIX)) ||
		    strcmp(name + strlen(XATTR_PREFIX), x.names[i]))
			continue;
		reply_xattr(req, size, x.values[i], strlen(x.values[i]));
		return;
	}
	fuse_reply_err(req, ENODATA);
}

static void op_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size)
{
	struct fs *fs = fs_of(req);
	struct node *n = node_get(fs, ino);
	struct tfs_buf list = { 0 };
	struct xattrs x;
	int rc;

	if (!n) {
		fuse_reply_err(req, ENOENT);
		return;
	}
	rc = node_xattrs(fs, n, &x);
	for (size_t i = 0; !rc && i < x.n; i++) {
		rc = tfs_buf_printf(&list, XATTR_PREFIX "%s", x.names[i]);
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
	const struct fs *fs = userdata;

	/* 1 MiB requests: libfuse derives max_pages from max_write. */
	conn->max_write = MAX_IO;
	conn->max_readahead = MAX_IO;
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

static const struct fuse_lowlevel_ops ops = {
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

static void fs_free(struct fs *fs)
{
	/* What the kernel never released: control sessions first, while their staging lives. */
	while (fs->open_files.next && fs->open_files.next != &fs->open_files) {
		struct handle *h = (struct handle *)fs->open_files.next;

		link_del(fs, &h->link);
		handle_free(fs, h);
	}
	while (fs->open_dirs.next && fs->open_dirs.next != &fs->open_dirs) {
		struct dirlist *d = (struct dirlist *)fs->open_dirs.next;

		link_del(fs, &d->link);
		dirlist_free(d);
	}
	/* Staging rings hold versions and read through the cache. */
	if (fs->ctl)
		fs->cfg->control->destroy(fs->ctl);
	/* Loaders reference versions and the cache: stop them first, without letting them wait out
	 * retries against a remote store (the unmount already happened). */
	tfs_lake_stop(fs->lake);
	for (size_t i = 0; i < fs->nnodes; i++) {
		tfs_version_put(fs->nodes[i]->ver);
		tfs_lake_view_put(fs->lake, fs->nodes[i]->view);
		tfs_buf_free(&fs->nodes[i]->log);
		free(fs->nodes[i]->name);
		free(fs->nodes[i]);
	}
	free(fs->nodes);
	free(fs->htab);
	tfs_fs_stats_destroy(fs->stats);
	pthread_mutex_destroy(&fs->lock);
}

static void log_stats(struct fs *fs)
{
	struct tfs_buf b = { 0 };

	if (gen_text(fs, N_STATS, &b))
		return;
	/* One line: the JSON of .tensorfs/stats without its newlines. */
	for (size_t i = 0; i < b.len; i++)
		if (b.data[i] == '\n')
			b.data[i] = ' ';
	tfs_info("stats at exit: %s", (char *)b.data);
	tfs_buf_free(&b);
}

/* The kernel reads ahead at most the mount's bdi read_ahead_kb (128 by default for FUSE),
 * whatever max_readahead says. Raise it when we may (root); found through mountinfo, since a
 * stat of the mount point would wait for the INIT we have not answered yet. */
static void set_readahead(const char *mountpoint, unsigned kb)
{
	struct tfs_mountinfo mi;
	char path[128];
	FILE *f;

	if (!tfs_mountinfo_find(mountpoint, &mi) || !mi.dev[0])
		return;
	snprintf(path, sizeof(path), "/sys/class/bdi/%s/read_ahead_kb", mi.dev);
	f = fopen(path, "we");
	if (!f) {
		tfs_debug("cannot set %s: %s", path, strerror(errno));
		return;
	}
	fprintf(f, "%u\n", kb);
	if (fclose(f))
		tfs_debug("cannot set %s: %s", path, strerror(errno));
}

/* Whether a comma-separated option list holds opt. */
static int has_option(const char *list, const char *opt)
{
	const size_t n = strlen(opt);

	for (const char *p = list; p && *p; p = strchr(p, ',') ? strchr(p, ',') + 1 : NULL)
		if (!strncmp(p, opt, n) && (p[n] == ',' || !p[n]))
			return 1;
	return 0;
}

/* When the session ends (unmount), requests still running may be waiting on chunk loads that
 * wait on a remote store: cancel its requests so that they, and the loop, end now rather than
 * after the store's retries. */
struct exit_watch {
	struct fuse_session *se;
	struct tfs_store *store;
	int done; /* atomic: the loop returned */
};

static void *watch_exit(void *arg)
{
	struct exit_watch *w = arg;
	const struct timespec tick = { 0, 100 * 1000 * 1000 };

	while (!__atomic_load_n(&w->done, __ATOMIC_ACQUIRE)) {
		if (fuse_session_exited(w->se)) {
			tfs_store_cancel(w->store);
			break;
		}
		nanosleep(&tick, NULL);
	}
	return NULL;
}

int tfs_fs_main(const struct tfs_fs_config *cfg)
{
	struct exit_watch watch = { 0 };
	pthread_t watcher;
	int watching = 0, loop_rc;
	struct fs fs = { .cfg = cfg, .lake = cfg->lake };
	struct fuse_args args = FUSE_ARGS_INIT(0, NULL);
	struct fuse_session *se = NULL;
	struct fuse_loop_config *loop = NULL;
	struct node *root;
	char opts[4096];
	int rc = 1, mounted = 0, handlers = 0;

	/* Chunk buffers are MiB-sized and short-lived. With glibc's adaptive threshold they would
	 * come from per-thread heaps that keep freed memory; mapped, they go back to the system
	 * when freed and the daemon's RSS follows the cache budget. */
	mallopt(M_MMAP_THRESHOLD, 256 << 10);
	pthread_mutex_init(&fs.lock, NULL);
	fs.open_files.next = fs.open_files.prev = &fs.open_files;
	fs.open_dirs.next = fs.open_dirs.prev = &fs.open_dirs;
	fs.uid = getuid();
	fs.allow_other = has_option(cfg->fuse_opts, "allow_other");
	fs.gid = getgid();
	fs.started = time(NULL);
	fs.started_ns = tfs_now_ns();
	fs.cap = 1024;
	fs.hsize = 4096;
	fs.nodes = calloc(fs.cap, sizeof(*fs.nodes));
	fs.htab = calloc(fs.hsize, sizeof(*fs.htab));
	root = calloc(1, sizeof(*root));
	if (!fs.nodes || !fs.htab || !root || !(root->name = strdup("")) ||
	    tfs_fs_stats_create(&fs.stats)) {
		free(root);
		tfs_err("out of memory");
		goto out;
	}
	root->type = N_ROOT;
	root->ino = FUSE_ROOT_ID;
	fs.nodes[fs.nnodes++] = root;

	/* fsname shows the lake in mount(8) and df; commas would split the option list. */
	snprintf(opts, sizeof(opts), "default_permissions,fsname=%s,subtype=tensorfs%s%s",
		 strchr(cfg->lake_url, ',') ? "tensorfs" : cfg->lake_url, cfg->fuse_opts ? "," : "",
		 cfg->fuse_opts ? cfg->fuse_opts : "");
	if (fuse_opt_add_arg(&args, "tensorfs") || fuse_opt_add_arg(&args, "-o") ||
	    fuse_opt_add_arg(&args, opts) || (cfg->debug && fuse_opt_add_arg(&args, "-d"))) {
		tfs_err("out of memory");
		goto out;
	}
	se = fuse_session_new(&args, &ops, sizeof(ops), &fs);
	if (!se) {
		tfs_err("cannot set up the FUSE session (bad mount options: %s?)", opts);
		goto out;
	}
	if (fuse_set_signal_handlers(se)) {
		tfs_err("cannot install signal handlers");
		goto out;
	}
	handlers = 1;
	if (fuse_session_mount(se, cfg->mountpoint)) {
		tfs_err("cannot mount %s on %s (see the message above)", cfg->lake_url,
			cfg->mountpoint);
		goto out;
	}
	mounted = 1;
	if (cfg->readahead_kb)
		set_readahead(cfg->mountpoint, cfg->readahead_kb);
	if (!cfg->foreground) {
		if (!cfg->log_path)
			tfs_log_use_syslog(1);
		if (fuse_daemonize(0)) {
			tfs_err("cannot become a daemon");
			goto out;
		}
	}
	tfs_info("mounted %s on %s", cfg->lake_url, cfg->mountpoint);
	/* After fuse_daemonize: its fork would not carry the loader threads along. */
	if (tfs_lake_start(fs.lake))
		goto out;
	/* After fuse_daemonize: slot files are named after the daemon's pid. */
	if (cfg->control && cfg->control->create(fs.lake, cfg->mountpoint, &fs.ctl)) {
		tfs_err("cannot set up the control file");
		goto out;
	}
	loop = fuse_loop_cfg_create();
	if (!loop) {
		tfs_err("out of memory");
		goto out;
	}
	fuse_loop_cfg_set_clone_fd(loop, 1);
	fuse_loop_cfg_set_max_threads(loop, cfg->max_threads ? cfg->max_threads : 16);
	watch.se = se;
	watch.store = fs.lake->store;
	watching = !pthread_create(&watcher, NULL, watch_exit, &watch);
	loop_rc = fuse_session_loop_mt(se, loop);
	/* libfuse reports the signal that ended the loop; stopping on SIGTERM/INT/HUP is a clean
	 * shutdown, not a failure. */
	rc = loop_rc == 0 || loop_rc == SIGTERM || loop_rc == SIGINT || loop_rc == SIGHUP ? 0 : 1;
	if (watching) {
		__atomic_store_n(&watch.done, 1, __ATOMIC_RELEASE);
		pthread_join(watcher, NULL);
	}
	log_stats(&fs);
	tfs_info("unmounted %s", cfg->mountpoint);
out:
	if (loop)
		fuse_loop_cfg_destroy(loop);
	if (mounted)
		fuse_session_unmount(se);
	if (handlers)
		fuse_remove_signal_handlers(se);
	if (se)
		fuse_session_destroy(se);
	fuse_opt_free_args(&args);
	fs_free(&fs);
	return rc;
}
