/* SPDX-License-Identifier: MIT */
/* mixdir: mixes/ (the lake's mixtures), mixes/NAME/ (its mix.txt and views/), its views/PARAMS/
 * (pack= views of the mixture: core/mixview.h) and their files: tokens.npy, segments.npy,
 * doc.npy and source.npy. A mixture's directories show its newest version; an open file keeps
 * the version and view it was opened at. */
#include "fsnode.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mix.h"
#include "mixview.h"
#include "reader.h"
#include "view.h"

#define SOURCE_FILE TFS_PACK_NFILES /* source.npy, after the pack's own files */
static const char *const file_names[] = { "tokens.npy", "segments.npy", "doc.npy", "source.npy" };

/* --- the mount's last few mixture views, shared by lookups, stats and opens ------------------- */

#define KEPT 4

struct kept {
	struct tfs_id id; /* the mixture version */
	char *name;	  /* the view's */
	struct tfs_mixview *mv;
	unsigned refs; /* the cache's and its users'; protected by the cache's lock */
	uint64_t used; /* protected by the cache's lock */
};

struct tfs_fs_mixviews {
	pthread_mutex_t lock;
	struct kept *k[KEPT];
	uint64_t clock;
};

int tfs_fs_mixviews_init(struct tfs_fs *fs)
{
	fs->mixviews = calloc(1, sizeof(*fs->mixviews));
	if (!fs->mixviews)
		return -ENOMEM;
	pthread_mutex_init(&fs->mixviews->lock, NULL);
	return 0;
}

static void kept_free(struct tfs_fs *fs, struct kept *k)
{
	tfs_mixview_free(fs->lake, k->mv);
	free(k->name);
	free(k);
}

static void kept_put(struct tfs_fs *fs, struct kept *k)
{
	unsigned left;

	pthread_mutex_lock(&fs->mixviews->lock);
	left = --k->refs;
	pthread_mutex_unlock(&fs->mixviews->lock);
	if (!left)
		kept_free(fs, k);
}

void tfs_fs_mixviews_free(struct tfs_fs *fs)
{
	if (!fs->mixviews)
		return;
	for (size_t i = 0; i < KEPT; i++)
		if (fs->mixviews->k[i])
			kept_put(fs, fs->mixviews->k[i]);
	pthread_mutex_destroy(&fs->mixviews->lock);
	free(fs->mixviews);
	fs->mixviews = NULL;
}

/* The view `name` of mixture version m, referenced (kept_put): built once, kept among the
 * last KEPT used. */
static int kept_get(struct tfs_fs *fs, const struct tfs_mix *m, const char *name, struct kept **out,
		    char *err, size_t err_cap)
{
	struct tfs_fs_mixviews *c = fs->mixviews;
	struct kept *k, *evicted = NULL;
	size_t slot = 0;
	int rc;

	pthread_mutex_lock(&c->lock);
	for (size_t i = 0; i < KEPT; i++) {
		k = c->k[i];
		if (k && tfs_id_eq(&k->id, &m->id) && !strcmp(k->name, name)) {
			k->refs++;
			k->used = ++c->clock;
			pthread_mutex_unlock(&c->lock);
			*out = k;
			return 0;
		}
	}
	pthread_mutex_unlock(&c->lock);
	k = calloc(1, sizeof(*k));
	if (!k || !(k->name = strdup(name))) {
		free(k);
		return -ENOMEM;
	}
	rc = tfs_mixview_build(fs->lake, m, name, &k->mv, err, err_cap);
	if (rc) {
		free(k->name);
		free(k);
		return rc;
	}
	k->id = m->id;
	k->refs = 2; /* the cache's and the caller's */
	pthread_mutex_lock(&c->lock);
	for (size_t i = 0; i < KEPT; i++) {
		if (!c->k[i]) {
			slot = i;
			break;
		}
		if (c->k[i]->used < c->k[slot]->used)
			slot = i;
	}
	if (c->k[slot] && --c->k[slot]->refs == 0)
		evicted = c->k[slot];
	c->k[slot] = k;
	k->used = ++c->clock;
	pthread_mutex_unlock(&c->lock);
	if (evicted)
		kept_free(fs, evicted);
	*out = k;
	return 0;
}

/* --- resolving a node ------------------------------------------------------------------------ */

/* The mixture a mixes/NAME node (or one under it) shows: its newest version. */
static struct tfs_fs_node *mix_node_of(struct tfs_fs_node *n);

static int node_mix(struct tfs_fs *fs, struct tfs_fs_node *n, struct tfs_mix *m)
{
	return tfs_mix_head(tfs_lake_store(fs->lake), mix_node_of(n)->name, m);
}

/* The mixture view a views/PARAMS node (or a file in it) shows. A bad name is ENOENT with the
 * reason in .tensorfs/errors. */
static int node_view(struct tfs_fs *fs, struct tfs_fs_node *vdir, struct kept **out)
{
	struct tfs_mix m;
	char err[256] = "";
	int rc = node_mix(fs, vdir, &m);

	if (!rc)
		rc = kept_get(fs, &m, vdir->name, out, err, sizeof(err));
	if (rc == -EINVAL) {
		char path[512];

		snprintf(path, sizeof(path), "mixes/%s/views/%s", m.name, vdir->name);
		tfs_fs_stats_error(fs->stats, path, "%s", err);
		rc = -ENOENT;
	}
	tfs_mix_free(&m);
	return rc;
}

/* --- the files ---------------------------------------------------------------------------------
 */

static int file_of(const char *name)
{
	for (int f = 0; f <= SOURCE_FILE; f++)
		if (!strcmp(name, file_names[f]))
			return f;
	return -1;
}

static uint64_t row_bytes(const struct tfs_mixview *mv, int f)
{
	struct tfs_dtype dt;
	uint64_t len;

	if (f == SOURCE_FILE)
		return 1;
	tfs_mixview_file_type(mv, (enum tfs_pack_file)f, &dt, &len);
	return len * dt.itemsize;
}

static uint64_t file_size(const struct tfs_mixview *mv, int f)
{
	return TFS_NPY_ALIGN + mv->view->n * row_bytes(mv, f);
}

static int mixfile_getattr(struct tfs_fs *fs, struct tfs_fs_node *n, struct tfs_fs_attr *a)
{
	struct kept *k;
	int rc = node_view(fs, n->parent, &k);

	if (rc)
		return rc;
	a->size = file_size(k->mv, file_of(n->name));
	kept_put(fs, k);
	return 0;
}

/* An open file: its view, and a reader for each source. */
struct mixopen {
	struct tfs_fs *fs;
	struct kept *k;
	struct tfs_reader **r;
};

static void mixopen_free(void *priv)
{
	struct mixopen *o = priv;

	for (size_t i = 0; o->r && i < o->k->mv->nsrc; i++)
		tfs_reader_close(o->r[i]);
	free(o->r);
	kept_put(o->fs, o->k);
	free(o);
}

static int mixfile_open(struct tfs_fs *fs, struct tfs_fs_node *n, const struct fuse_ctx *who,
			struct tfs_fs_handle *h, struct fuse_file_info *fi)
{
	static const struct tfs_dtype u8 = { "|u1", 'u', 1 };
	struct mixopen *o = calloc(1, sizeof(*o));
	const struct tfs_mixview *mv;
	struct tfs_dtype dt = u8;
	uint64_t len = 0;
	int rc;

	(void)who;
	if (!o)
		return -ENOMEM;
	o->fs = fs;
	rc = node_view(fs, n->parent, &o->k);
	if (rc) {
		free(o);
		return rc;
	}
	h->priv = o;
	h->priv_free = mixopen_free;
	mv = o->k->mv;
	h->col = (size_t)file_of(n->name);
	h->size = file_size(mv, (int)h->col);
	h->hdr_len = TFS_NPY_ALIGN;
	if (h->col != SOURCE_FILE)
		tfs_mixview_file_type(mv, (enum tfs_pack_file)h->col, &dt, &len);
	rc = tfs_npy_header_build(&dt, mv->view->n, len ? 1 : 0, &len, h->header);
	o->r = calloc(mv->nsrc, sizeof(*o->r));
	if (!rc && !o->r)
		rc = -ENOMEM;
	for (size_t i = 0; !rc && i < mv->nsrc; i++)
		rc = tfs_reader_open(mv->ver[i], tfs_lake_cache(fs->lake),
				     mv->view->on_error != TFS_ON_ERROR_FAIL, &o->r[i]);
	fi->keep_cache = 1;
	return rc;
}

struct made {
	struct mixopen *o;
	int f;
	struct tfs_gather_list l;
};

static int make_row(void *arg, uint64_t r, uint8_t *out)
{
	struct made *m = arg;
	const struct tfs_mixview *mv = m->o->k->mv;
	const uint64_t j = mv->view->rows[r];

	if (m->f == SOURCE_FILE) {
		*out = mv->src[j];
		return 0;
	}
	return tfs_mixview_sample(mv, m->o->r, j, (enum tfs_pack_file)m->f, out, &m->l);
}

static void mixfile_read(fuse_req_t req, struct tfs_fs *fs, struct tfs_fs_handle *h, size_t size,
			 off_t off)
{
	struct made m = { .o = h->priv, .f = (int)h->col };

	tfs_fs_count_read(fs, h, size);
	tfs_gather_list_init(&m.l, tfs_lake_cache(fs->lake));
	tfs_fs_reply_made_rows(req, h, size, off, row_bytes(m.o->k->mv, m.f), make_row, &m);
	tfs_gather_list_free(&m.l);
}

static const struct tfs_fs_kind mixfile_kind = {
	.name = "mixture view file",
	.mode = S_IFREG | 0444,
	.getattr = mixfile_getattr,
	.open = mixfile_open,
	.read = mixfile_read,
};

/* --- mixes/NAME/views/PARAMS/ ------------------------------------------------------------------
 */

static int mixview_lookup(struct tfs_fs *fs, struct tfs_fs_node *dir, const char *name,
			  struct tfs_fs_node **child)
{
	struct kept *k;
	int rc = node_view(fs, dir, &k);

	if (rc)
		return rc;
	kept_put(fs, k);
	if (file_of(name) < 0)
		return -ENOENT;
	*child = tfs_fs_node_child(fs, dir, name, &mixfile_kind, NULL);
	return *child ? 0 : -ENOMEM;
}

static int mixview_list(struct tfs_fs *fs, struct tfs_fs_node *dir, struct tfs_fs_dir *d)
{
	struct kept *k;
	int rc = node_view(fs, dir, &k);

	if (rc)
		return rc;
	kept_put(fs, k);
	for (int f = 0; f <= SOURCE_FILE && !rc; f++)
		rc = tfs_fs_dir_add_child(fs, d, dir, file_names[f], file_names[f], &mixfile_kind,
					  NULL);
	return rc;
}

static int mixview_getattr(struct tfs_fs *fs, struct tfs_fs_node *n, struct tfs_fs_attr *a)
{
	struct kept *k;
	int rc = node_view(fs, n, &k);

	(void)a;
	if (!rc)
		kept_put(fs, k);
	return rc;
}

static const struct tfs_fs_kind mixview_kind = {
	.name = "mixture view",
	.mode = S_IFDIR | 0555,
	.lookup = mixview_lookup,
	.list = mixview_list,
	.getattr = mixview_getattr,
};

/* --- mixes/NAME/views/README ------------------------------------------------------------------
 */

static int mixreadme_getattr(struct tfs_fs *fs, struct tfs_fs_node *n, struct tfs_fs_attr *a)
{
	(void)fs, (void)n;
	a->size = strlen(tfs_mixview_readme);
	return 0;
}

static int mixreadme_open(struct tfs_fs *fs, struct tfs_fs_node *n, const struct fuse_ctx *who,
			  struct tfs_fs_handle *h, struct fuse_file_info *fi)
{
	(void)fs, (void)n, (void)who;
	fi->direct_io = 1;
	h->size = strlen(tfs_mixview_readme);
	return tfs_buf_append(&h->text, tfs_mixview_readme, h->size);
}

static const struct tfs_fs_kind mixreadme_kind = {
	.name = "mixture views README",
	.mode = S_IFREG | 0444,
	.getattr = mixreadme_getattr,
	.open = mixreadme_open,
	.read = tfs_fs_read_text,
};

/* --- mixes/NAME/views/ -------------------------------------------------------------------------
 */

static int mixviews_lookup(struct tfs_fs *fs, struct tfs_fs_node *dir, const char *name,
			   struct tfs_fs_node **child)
{
	struct kept *k;
	int rc;

	if (!strcmp(name, "README")) {
		*child = tfs_fs_node_child(fs, dir, name, &mixreadme_kind, NULL);
		return *child ? 0 : -ENOMEM;
	}
	*child = tfs_fs_node_child(fs, dir, name, &mixview_kind, NULL);
	if (!*child)
		return -ENOMEM;
	rc = node_view(fs, *child, &k);
	if (!rc)
		kept_put(fs, k);
	return rc;
}

static int mixviews_list(struct tfs_fs *fs, struct tfs_fs_node *dir, struct tfs_fs_dir *d)
{
	return tfs_fs_dir_add_child(fs, d, dir, "README", "README", &mixreadme_kind, NULL);
}

static const struct tfs_fs_kind mixviews_kind = {
	.name = "mixture views",
	.mode = S_IFDIR | 0555,
	.lookup = mixviews_lookup,
	.list = mixviews_list,
};

/* --- mixes/NAME/mix.txt: the newest version's text ---------------------------------------------
 */

static int mixtext(struct tfs_fs *fs, struct tfs_fs_node *n, struct tfs_buf *out)
{
	struct tfs_mix m;
	char hex[TFS_ID_HEX];
	int rc = node_mix(fs, n, &m);

	if (rc)
		return rc;
	tfs_id_hex(&m.id, hex);
	rc = tfs_buf_printf(out, "version %s\n", hex) ?: tfs_mix_text(&m, out);
	tfs_mix_free(&m);
	return rc;
}

static int mixtext_getattr(struct tfs_fs *fs, struct tfs_fs_node *n, struct tfs_fs_attr *a)
{
	struct tfs_buf b = { 0 };
	int rc = mixtext(fs, n, &b);

	a->size = b.len;
	tfs_buf_free(&b);
	return rc;
}

static int mixtext_open(struct tfs_fs *fs, struct tfs_fs_node *n, const struct fuse_ctx *who,
			struct tfs_fs_handle *h, struct fuse_file_info *fi)
{
	int rc = mixtext(fs, n, &h->text);

	(void)who;
	h->size = h->text.len;
	fi->direct_io = 1;
	return rc;
}

static const struct tfs_fs_kind mixtext_kind = {
	.name = "mix.txt",
	.mode = S_IFREG | 0444,
	.getattr = mixtext_getattr,
	.open = mixtext_open,
	.read = tfs_fs_read_text,
};

/* --- mixes/NAME/ -------------------------------------------------------------------------------
 */

static int mix_lookup(struct tfs_fs *fs, struct tfs_fs_node *dir, const char *name,
		      struct tfs_fs_node **child)
{
	const struct tfs_fs_kind *kind = !strcmp(name, "views")	    ? &mixviews_kind
					 : !strcmp(name, "mix.txt") ? &mixtext_kind
								    : NULL;

	if (!kind)
		return -ENOENT;
	*child = tfs_fs_node_child(fs, dir, name, kind, NULL);
	return *child ? 0 : -ENOMEM;
}

static int mix_list(struct tfs_fs *fs, struct tfs_fs_node *dir, struct tfs_fs_dir *d)
{
	int rc = tfs_fs_dir_add_child(fs, d, dir, "mix.txt", "mix.txt", &mixtext_kind, NULL);

	return rc ? rc : tfs_fs_dir_add_child(fs, d, dir, "views", "views", &mixviews_kind, NULL);
}

static const struct tfs_fs_kind mix_kind = {
	.name = "mixture",
	.mode = S_IFDIR | 0555,
	.lookup = mix_lookup,
	.list = mix_list,
};

static struct tfs_fs_node *mix_node_of(struct tfs_fs_node *n)
{
	while (n && n->kind != &mix_kind)
		n = n->parent;
	return n;
}

/* --- mixes/ ------------------------------------------------------------------------------------
 */

static int mixes_lookup(struct tfs_fs *fs, struct tfs_fs_node *dir, const char *name,
			struct tfs_fs_node **child)
{
	struct tfs_mix m;
	int rc = tfs_mix_head(tfs_lake_store(fs->lake), name, &m);

	if (rc)
		return rc == -EIO ? -EIO : -ENOENT;
	tfs_mix_free(&m);
	*child = tfs_fs_node_child(fs, dir, name, &mix_kind, NULL);
	return *child ? 0 : -ENOMEM;
}

static int mixes_list(struct tfs_fs *fs, struct tfs_fs_node *dir, struct tfs_fs_dir *d)
{
	struct tfs_fs_lister l = { fs, dir, d, &mix_kind };

	return tfs_mix_list(tfs_lake_store(fs->lake), tfs_fs_list_child, &l);
}

const struct tfs_fs_kind tfs_fs_mixes_kind = {
	.name = "mixes",
	.mode = S_IFDIR | 0555,
	.lookup = mixes_lookup,
	.list = mixes_list,
};

int tfs_fs_lake_has_mixes(struct tfs_fs *fs)
{
	return tfs_mix_any(tfs_lake_store(fs->lake));
}
