/* SPDX-License-Identifier: MIT */
/* fsnode: the file system's nodes, open files and node kinds, shared by fs/'s files. Internal to
 * fs/: the module's interface is fs.h.
 *
 * Every node has a kind, a const table of what it does (lookup, list, getattr, open, read, ...);
 * fuseops.c answers FUSE by calling the table of the node a request names, and never asks which
 * kind it is. The kinds live in files named for the part of the tree they serve:
 *
 *   rootdir.c   /, DATASET/, DATASET/commits/ and DATASET/log
 *   refdir.c    the version directories (REF/, commits/ID/) and their schema.json
 *   colfile.c   COLUMN.npy, of a version or of a view; COLUMN/data.bin
 *   coldir.c    COLUMN/ of a ragged, text or bytes column, and its lines.txt
 *   viewcoldir.c  views/PARAMS/COLUMN/ of such a column: its rows in view order
 *   viewdir.c   REF/views/, REF/views/PARAMS/ and views/README
 *   packfile.c  views/pack=S,.../ files: tokens.npy, segments.npy, doc.npy
 *   mixdir.c    mixes/, a mixture's directory, its views and their files
 *   querydir.c  REF/queries/, a saved query's directory and its views (view files)
 *   admindir.c  .tensorfs/ and its files: stats, metrics, errors, control
 *
 * nodetable.c keeps the nodes, directory listings and open files; fuseops.c answers FUSE with
 * them; fsmain.c runs the session. */
#ifndef TFS_FSNODE_H
#define TFS_FSNODE_H

#ifndef FUSE_USE_VERSION
#define FUSE_USE_VERSION 314
#endif

#include <fuse_lowlevel.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <sys/types.h>

#include "fs.h"
#include "format.h"
#include "lake.h"
#include "reader.h"
#include "stats.h"
#include "util.h"
#include "version.h"

#define TFS_FS_MAX_IO (1u << 20)
#define TFS_FS_IMMUTABLE_TTL 86400.0 /* commits and tags never change: let the kernel keep them */

struct tfs_fs_kind;

/* What a version directory names: a branch moves, a tag or a commit never does. */
enum tfs_fs_vkind { TFS_FS_BRANCH, TFS_FS_TAG, TFS_FS_COMMIT };

/* A node lives while the kernel knows its inode (nlookup: the lookups answered, less those it
 * forgot), while a child node of it lives, and while a caller holds it (refs). Then it is freed
 * (libfuse's passthrough_ll forget path): however many names a long mount meets, it keeps the
 * ones the kernel keeps. Inode numbers are never reused. Fields set when the node is made never
 * change. */
struct tfs_fs_node {
	fuse_ino_t ino;
	const struct tfs_fs_kind *kind;
	struct tfs_fs_node *parent;
	struct tfs_fs_node *dataset; /* the dataset directory this is, or is under; or NULL */
	struct tfs_fs_node *vdir;    /* the version directory this is, or is under; or NULL */
	char *name;
	struct tfs_fs_node *hnext; /* (parent, name) hash chain; protected by fs->lock */
	struct tfs_fs_node *inext; /* inode number hash chain; protected by fs->lock */
	unsigned refs;		   /* children and callers' references; protected by fs->lock */
	enum tfs_fs_vkind vkind;   /* version directories; protected by fs->lock */
	struct tfs_version *ver;   /* files: their version (below); protected by fs->lock */
	struct tfs_buf log;	   /* log: the log text of log_head; by fs->lock */
	struct tfs_id log_head;	   /* protected by fs->lock */
	/* Files are one inode per commit: a branch file whose branch moved is a new inode, so the
	 * kernel never mixes two commits' pages, and an open file or mapping keeps its own. */
	struct tfs_id commit; /* files: the commit this inode shows (part of its key) */
	uint64_t nlookup;     /* kernel references; protected by fs->lock */
	/* A view's COLUMN/ (one commit, one view: never changes): its rows and data bytes, once
	 * counted. Protected by fs->lock. */
	int view_sized;
	uint64_t view_rows, view_bytes;
};

/* Open files and directories are linked into the fs: the kernel does not send every release
 * before an unmount (requests still queued when the connection goes are dropped), so whatever
 * is still open when the loop ends is freed with the fs. */
struct tfs_fs_link {
	struct tfs_fs_link *prev, *next;
};

struct tfs_fs {
	const struct tfs_fs_config *cfg;
	struct tfs_fs_link open_files; /* struct tfs_fs_handle; protected by lock */
	struct tfs_fs_link open_dirs;  /* struct tfs_fs_dir; protected by lock */
	struct tfs_lake *lake;	       /* the engine (cfg->lake): store, caches, prefetcher */
	void *ctl;		       /* .tensorfs/control (cfg->control's object); or NULL */
	int allow_other;	       /* -o allow_other: anyone may use the control file */
	pthread_mutex_t lock;
	struct tfs_fs_node *root;
	struct tfs_fs_node **itab;	  /* by inode number; protected by lock */
	struct tfs_fs_node **htab;	  /* by (parent, name); protected by lock */
	size_t hsize;			  /* buckets of both; protected by lock */
	size_t nnodes;			  /* alive; protected by lock */
	uint64_t next_ino;		  /* protected by lock */
	uint64_t nodes_made, nodes_freed; /* protected by lock */
	uid_t uid;
	gid_t gid;
	time_t started;
	uint64_t started_ns;
	uint64_t reads, read_bytes;	  /* FUSE read requests of column files; atomic */
	struct tfs_fs_stats *stats;	  /* version accounts and the error log */
	struct tfs_fs_mixviews *mixviews; /* mixdir.c: the last mixture views used */
};

/* An open file: pinned to the version it was opened at, whatever the branch does later. */
struct tfs_fs_handle {
	struct tfs_fs_link link; /* in fs->open_files while open */
	const struct tfs_fs_kind *kind;
	struct tfs_version *ver;    /* NULL for generated files (log, stats) */
	struct tfs_lake_view *view; /* view column files: the rows, in view order */
	/* Column and view files: the read (core/reader.h): prefetch, the cache's plan, the next
	 * epoch's warm-up, bad rows, gathers from pinned chunks. */
	struct tfs_reader *reader;
	void *ctl;			      /* the control file: this open's session */
	const struct tfs_fs_control *ctl_ops; /* and what serves it */
	struct tfs_fs_acct *acct;	      /* column files: the version's read counters */
	struct tfs_buf text;		      /* generated files' content, taken at open */
	void *priv;			      /* the kind's own state (lines.txt: its cursor) */
	void (*priv_free)(void *priv);
	size_t col;
	uint64_t size;
	uint32_t hdr_len; /* column files: bytes of header before the rows (NPY: TFS_NPY_ALIGN) */
	char header[TFS_NPY_ALIGN];
};

/* An open directory: its listing, taken at opendir. */
struct tfs_fs_dir {
	struct tfs_fs_link link; /* in fs->open_dirs while open */
	struct tfs_buf names;	 /* NUL-separated */
	size_t n;
	struct tfs_fs_dirent {
		size_t name_off;
		fuse_ino_t ino;
		mode_t mode;
	} * ents;
};

/* What a node's attributes come from; getattr fills it. */
struct tfs_fs_attr {
	struct tfs_version *v; /* a reference the caller drops; NULL: times are the mount's */
	uint64_t size;
	mode_t mode; /* preset to the kind's */
};

/* Extended attributes: user.tensorfs.NAME. */
#define TFS_FS_XATTR_PREFIX "user.tensorfs."
#define TFS_FS_MAX_XATTRS 6
struct tfs_fs_xattrs {
	size_t n;
	const char *names[TFS_FS_MAX_XATTRS];
	char values[TFS_FS_MAX_XATTRS][TFS_MAX_DIMS * 22];
};

/* What a node kind does. A NULL operation is what the kind is not: without lookup and list it
 * is no directory (ENOTDIR), without open no file (EISDIR), without write read-only (EROFS),
 * without ioctl ENOTTY, without getattr a node with no version and no size, without xattrs
 * one with none. Operations return 0 or -errno; read replies itself. */
struct tfs_fs_kind {
	const char *name; /* for messages */
	mode_t mode;	  /* S_IFDIR | 0555, S_IFREG | 0444, ... */
	/* Files whose inode holds its commit's version while the kernel knows the inode. */
	int pins_version;
	/* The node opens a dataset or version scope for the nodes under it (node->dataset and
	 * node->vdir). */
	int is_dataset, is_version;
	int (*lookup)(struct tfs_fs *fs, struct tfs_fs_node *dir, const char *name,
		      struct tfs_fs_node **child);
	int (*list)(struct tfs_fs *fs, struct tfs_fs_node *dir, struct tfs_fs_dir *d);
	/* The node's attributes from the lake. (An fstat of an open file pinned to a version is
	 * answered from its handle by fuseops.c, without asking the kind.) */
	int (*getattr)(struct tfs_fs *fs, struct tfs_fs_node *n, struct tfs_fs_attr *a);
	/* Fill h (zeroed, h->kind set); fi's caching flags are the kind's to set. */
	int (*open)(struct tfs_fs *fs, struct tfs_fs_node *n, const struct fuse_ctx *who,
		    struct tfs_fs_handle *h, struct fuse_file_info *fi);
	void (*read)(fuse_req_t req, struct tfs_fs *fs, struct tfs_fs_handle *h, size_t size,
		     off_t off);
	ssize_t (*write)(struct tfs_fs *fs, struct tfs_fs_handle *h, const char *buf, size_t len);
	int (*ioctl)(struct tfs_fs *fs, struct tfs_fs_handle *h, unsigned cmd, const void *in,
		     size_t in_len, void *out, size_t out_len);
	int (*xattrs)(struct tfs_fs *fs, struct tfs_fs_node *n, struct tfs_fs_xattrs *x);
};

/* rootdir.c */
extern const struct tfs_fs_kind tfs_fs_root_kind, tfs_fs_dataset_kind, tfs_fs_commits_kind,
	tfs_fs_log_kind;
/* refdir.c */
extern const struct tfs_fs_kind tfs_fs_version_kind, tfs_fs_schema_kind;
/* colfile.c */
extern const struct tfs_fs_kind tfs_fs_column_kind, tfs_fs_view_column_kind, tfs_fs_data_kind;
/* coldir.c, viewcoldir.c */
extern const struct tfs_fs_kind tfs_fs_coldir_kind, tfs_fs_view_coldir_kind;
/* viewdir.c */
extern const struct tfs_fs_kind tfs_fs_views_kind, tfs_fs_view_kind, tfs_fs_view_readme_kind;
/* A views/ directory's child: README, or a node of kind whose name must make a view (checked
 * by opening it); and its listing, README alone (views are named by their parameters). */
int tfs_fs_views_child(struct tfs_fs *fs, struct tfs_fs_node *dir, const char *name,
		       const struct tfs_fs_kind *kind, struct tfs_fs_node **child);
int tfs_fs_views_list(struct tfs_fs *fs, struct tfs_fs_node *dir, struct tfs_fs_dir *d);
/* admindir.c */
extern const struct tfs_fs_kind tfs_fs_admin_kind;
/* mixdir.c */
extern const struct tfs_fs_kind tfs_fs_mixes_kind;
/* querydir.c */
extern const struct tfs_fs_kind tfs_fs_queries_kind, tfs_fs_query_kind, tfs_fs_query_views_kind,
	tfs_fs_query_view_kind;

/* fuseops.c: the handlers of every FUSE request. */
extern const struct fuse_lowlevel_ops tfs_fs_fuse_ops;

/* --- nodetable.c ---------------------------------------------------------------------------- */

int tfs_fs_nodes_init(struct tfs_fs *fs);
void tfs_fs_nodes_free(struct tfs_fs *fs);
/* The node of an inode number the kernel knows (a request's), or NULL. The kernel sends no
 * forget for an inode while a request on it is under way, so the node outlives the request. */
struct tfs_fs_node *tfs_fs_node_get(struct tfs_fs *fs, fuse_ino_t ino);
/* Find or make parent's child `name` of that kind, referenced: the caller hands it to the
 * kernel (tfs_fs_node_looked_up) or drops it (tfs_fs_node_put). File nodes (v != NULL) also
 * match on v's commit, and hold a reference on v while the kernel knows them. NULL: out of
 * memory. */
struct tfs_fs_node *tfs_fs_node_child(struct tfs_fs *fs, struct tfs_fs_node *parent,
				      const char *name, const struct tfs_fs_kind *kind,
				      struct tfs_version *v);
/* Drop a reference; a node nobody holds and the kernel does not know is freed (and its parent
 * after it, likewise). NULL is fine. */
void tfs_fs_node_put(struct tfs_fs *fs, struct tfs_fs_node *n);
/* n's entry went to the kernel: one lookup more, the caller's reference dropped. */
void tfs_fs_node_looked_up(struct tfs_fs *fs, struct tfs_fs_node *n);
/* The kernel dropped nlookup references to ino. */
void tfs_fs_node_forget(struct tfs_fs *fs, fuse_ino_t ino, uint64_t nlookup);
/* Nodes alive now, and made and freed since the mount. */
void tfs_fs_node_counts(struct tfs_fs *fs, uint64_t *alive, uint64_t *made, uint64_t *freed);
/* How long the kernel may trust what it learns about n. */
double tfs_fs_node_ttl(struct tfs_fs *fs, const struct tfs_fs_node *n);
/* A version directory's path under its dataset: main, v1.0, commits/<id>. */
void tfs_fs_version_name(const struct tfs_fs_node *vdir, char *buf, size_t cap);

int tfs_fs_dir_add(struct tfs_fs_dir *d, const char *name, fuse_ino_t ino, mode_t mode);
/* Add parent's child `name` (made as by tfs_fs_node_child) to d under the name shown. */
int tfs_fs_dir_add_child(struct tfs_fs *fs, struct tfs_fs_dir *d, struct tfs_fs_node *parent,
			 const char *shown, const char *name, const struct tfs_fs_kind *kind,
			 struct tfs_version *v);
void tfs_fs_dir_free(struct tfs_fs_dir *d);
/* A listing of names from the store (tfs_store_list_fn): each a child of dir of one kind. */
struct tfs_fs_lister {
	struct tfs_fs *fs;
	struct tfs_fs_node *dir;
	struct tfs_fs_dir *d;
	const struct tfs_fs_kind *kind;
};
int tfs_fs_list_child(void *arg, const char *name, int is_dir);

void tfs_fs_link_add(struct tfs_fs *fs, struct tfs_fs_link *list, struct tfs_fs_link *l);
void tfs_fs_link_del(struct tfs_fs *fs, struct tfs_fs_link *l);
void tfs_fs_handle_free(struct tfs_fs *fs, struct tfs_fs_handle *h);

/* Reply with bytes [off, off + size) of data (a small file held whole), from a copy. */
void tfs_fs_reply_bytes(fuse_req_t req, const void *data, uint64_t len, size_t size, off_t off);
/* Reply with head (head_len bytes, copied: the handle it may come from can go during the reply)
 * then bytes [from, to) of what the gather list l puts in its destination, straight from its
 * pinned chunks (one writev; zero runs: padded bad rows) or, past TFS_FS_REPLY_IOV pieces, from
 * one buffer. Replies an error itself when it cannot. */
#define TFS_FS_REPLY_IOV 512
void tfs_fs_reply_gather(fuse_req_t req, const char *head, size_t head_len,
			 const struct tfs_gather_list *l, uint64_t from, uint64_t to, int padded);
/* Reply with bytes [off, off + size) of a file of h->size bytes whose first h->hdr_len are
 * h->header and whose rows of rb bytes make(arg, r, out) writes when read (pack views,
 * mixtures): only the rows the read takes are made. */
void tfs_fs_reply_made_rows(fuse_req_t req, struct tfs_fs_handle *h, size_t size, off_t off,
			    uint64_t rb, int (*make)(void *arg, uint64_t r, uint8_t *out),
			    void *arg);
/* read for files whose bytes are h->text, taken at open. */
void tfs_fs_read_text(fuse_req_t req, struct tfs_fs *fs, struct tfs_fs_handle *h, size_t size,
		      off_t off);
int tfs_fs_xattr_add(struct tfs_fs_xattrs *x, const char *name, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* user.tensorfs.commit: the commit a version directory or file shows. */
int tfs_fs_xattr_commit(struct tfs_fs_xattrs *x, const struct tfs_version *v);

/* --- refdir.c ------------------------------------------------------------------------------- */

/* The version a version directory names now (the lake keeps the ref-refresh rule). */
int tfs_fs_ref_version(struct tfs_fs *fs, struct tfs_fs_node *vdir, struct tfs_version **out);
/* The version a file node shows: the commit it was made for, whatever its branch does. */
int tfs_fs_file_version(struct tfs_fs *fs, struct tfs_fs_node *n, struct tfs_version **out);

/* --- colfile.c ------------------------------------------------------------------------------ */

/* A directory's column files (kind: column or view column), which show v's columns. */
int tfs_fs_columns_lookup(struct tfs_fs *fs, struct tfs_fs_node *dir, struct tfs_version *v,
			  const char *name, const struct tfs_fs_kind *kind,
			  struct tfs_fs_node **child);
int tfs_fs_columns_list(struct tfs_fs *fs, struct tfs_fs_node *dir, struct tfs_version *v,
			const struct tfs_fs_kind *kind, struct tfs_fs_dir *d);
/* A read of a column file, counted in the fs's and its version's read counters. */
void tfs_fs_count_read(struct tfs_fs *fs, struct tfs_fs_handle *h, size_t size);
/* The read account of a file's version directory. */
struct tfs_fs_acct *tfs_fs_version_acct(struct tfs_fs *fs, const struct tfs_fs_node *n);

/* --- packfile.c ----------------------------------------------------------------------------- */

/* A pack view's directory (views/pack=S,...): its files, to look up or list. */
int tfs_fs_pack_lookup(struct tfs_fs *fs, struct tfs_fs_node *dir, struct tfs_version *v,
		       const char *name, struct tfs_fs_node **child);
int tfs_fs_pack_list(struct tfs_fs *fs, struct tfs_fs_node *dir, struct tfs_version *v,
		     struct tfs_fs_dir *d);

/* --- viewdir.c ------------------------------------------------------------------------------ */

/* The version and view a views/PARAMS directory shows: built once per commit of its version
 * (two references for the caller). A bad name is ENOENT, with the reason in .tensorfs/errors. */
int tfs_fs_node_view(struct tfs_fs *fs, struct tfs_fs_node *vn, struct tfs_version **vout,
		     struct tfs_lake_view **fout);
/* Opening file n under a views/PARAMS directory: the handle takes the version and view (and
 * the version's accounting); -ESTALE when the branch moved since n was looked up (the kernel
 * looks it up again). */
int tfs_fs_view_file_open(struct tfs_fs *fs, struct tfs_fs_node *n, struct tfs_fs_handle *h);

/* --- coldir.c ------------------------------------------------------------------------------- */

/* The header of column name in v when it is of another kind than fixed; else NULL. */
const struct tfs_column *tfs_fs_column_header(const struct tfs_version *v, const char *name);

/* A file of a COLUMN/ directory: a part's file (its node is the part's column) or, part NULL,
 * one of the column's own (lines.txt). */
struct tfs_fs_coldir_entry {
	const char *file, *part;
	const struct tfs_fs_kind *kind;
	int kinds; /* bit set of the column kinds that have it */
};

/* A COLUMN/ directory's lookup (d NULL: the entry named name into *child) or listing (into d),
 * from its table of n entries. */
int tfs_fs_coldir_entries(struct tfs_fs *fs, struct tfs_fs_node *dir,
			  const struct tfs_fs_coldir_entry *table, size_t n, const char *name,
			  struct tfs_fs_dir *d, struct tfs_fs_node **child);
/* A text row as its line of lines.txt, appended to out: \\ as \\\\, newline as \\n, carriage
 * return as \\r, then a newline. */
int tfs_fs_escape_line(const uint8_t *p, size_t n, struct tfs_buf *out);
/* getattr of a COLUMN/ directory: its version. */
int tfs_fs_coldir_getattr(struct tfs_fs *fs, struct tfs_fs_node *n, struct tfs_fs_attr *a);

/* The views/PARAMS/ directory n is in (or is). */
struct tfs_fs_node *tfs_fs_view_dir_of(struct tfs_fs_node *n);

/* --- querydir.c ----------------------------------------------------------------------------- */

/* Whether n's dataset has a saved query: its version directories list queries/ then. */
int tfs_fs_dataset_has_queries(struct tfs_fs *fs, struct tfs_fs_node *n);
/* The version and view a queries/NAME/ or queries/NAME/views/PARAMS/ node shows (the query's
 * newest version, of its commit); -EINVAL with the reason in err. */
int tfs_fs_query_view(struct tfs_fs *fs, struct tfs_fs_node *vn, struct tfs_version **vout,
		      struct tfs_lake_view **fout, char *err, size_t err_cap);

/* --- mixdir.c ------------------------------------------------------------------------------- */

int tfs_fs_mixviews_init(struct tfs_fs *fs);
void tfs_fs_mixviews_free(struct tfs_fs *fs);
/* Whether the lake holds a mixture: the root lists mixes/ then. */
int tfs_fs_lake_has_mixes(struct tfs_fs *fs);

/* --- admindir.c ----------------------------------------------------------------------------- */

/* .tensorfs/stats's JSON now. */
int tfs_fs_stats_text(struct tfs_fs *fs, struct tfs_buf *out);

#endif
