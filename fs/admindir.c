/* SPDX-License-Identifier: MIT */
/* admindir: .tensorfs/, the daemon's own files: stats (JSON), metrics (Prometheus), errors (the
 * last errors users met), bad_rows (chunks damaged for good) and control (batched staging,
 * served by cfg->control). */
#include "fsnode.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "badchunks.h"
#include "cache.h"
#include "diskcache.h"
#include "prefetch.h"
#include "store.h"

/* Every counter the daemon keeps, at one moment. The control file's part is rendered into ctl,
 * which the caller frees: as JSON (json) for stats, as metric families for metrics. */
static int snapshot(struct tfs_fs *fs, int json, struct tfs_fs_snapshot *s, struct tfs_buf *ctl)
{
	const struct tfs_fs_control *co = fs->cfg->control;
	struct tfs_lake_stats ls;
	int rc = 0;

	memset(s, 0, sizeof(*s));
	s->uptime_s = (double)(tfs_now_ns() - fs->started_ns) / 1e9;
	tfs_lake_stats(fs->lake, &ls);
	s->cache = ls.cache;
	s->lake = ls;
	tfs_fs_node_counts(fs, &s->nodes, &s->nodes_made, &s->nodes_freed);
	if (ls.has_prefetch)
		s->prefetch = ls.prefetch;
	s->has_disk_cache = tfs_diskcache_stats(tfs_lake_store(fs->lake), &s->disk) == 0;
	s->cache_dir = ls.cache_dir;
	/* The backend's own counters: with a disk cache or a tier, what the origin served. */
	tfs_store_counters(tfs_tier_origin(tfs_diskcache_inner(tfs_lake_store(fs->lake))),
			   &s->store);
	s->has_tier = tfs_tier_stats(tfs_diskcache_inner(tfs_lake_store(fs->lake)), &s->tier) == 0;
	if (s->has_tier) {
		struct tfs_store *tier =
			tfs_tier_store(tfs_diskcache_inner(tfs_lake_store(fs->lake)));
		struct tfs_store_counters tc;

		tfs_store_counters(tier, &tc);
		s->tier_url = tier->url;
		s->tier_gets = tc.gets;
		s->tier_puts = tc.puts;
	}
	s->store_url = tfs_lake_store(fs->lake)->url;
	s->reads = __atomic_load_n(&fs->reads, __ATOMIC_RELAXED);
	s->read_bytes = __atomic_load_n(&fs->read_bytes, __ATOMIC_RELAXED);
	if (fs->ctl && json) {
		rc = co->stats_json(fs->ctl, ctl);
		s->control_json = ctl->len ? (const char *)ctl->data : NULL;
	} else if (fs->ctl && co->metrics) {
		rc = co->metrics(fs->ctl, ctl);
		s->control_metrics = ctl->len ? (const char *)ctl->data : NULL;
	}
	return rc;
}

int tfs_fs_stats_text(struct tfs_fs *fs, struct tfs_buf *out)
{
	struct tfs_buf ctl = { 0 };
	struct tfs_fs_snapshot s;
	int rc = snapshot(fs, 1, &s, &ctl);

	if (!rc)
		rc = tfs_fs_stats_json(fs->stats, &s, out);
	tfs_buf_free(&ctl);
	return rc;
}

static int metrics_text(struct tfs_fs *fs, struct tfs_buf *out)
{
	struct tfs_buf ctl = { 0 };
	struct tfs_fs_snapshot s;
	int rc = snapshot(fs, 0, &s, &ctl);

	if (!rc)
		rc = tfs_fs_metrics_text(fs->stats, &s, out);
	tfs_buf_free(&ctl);
	return rc;
}

static int errors_text(struct tfs_fs *fs, struct tfs_buf *out)
{
	return tfs_fs_errors_text(fs->stats, out);
}

/* The generated files, by name: their text is made when they are opened or stat'ed. */
static int bad_rows_text(struct tfs_fs *fs, struct tfs_buf *out)
{
	(void)fs;
	return tfs_bad_chunks_text(out);
}

static const struct {
	const char *name;
	int (*text)(struct tfs_fs *fs, struct tfs_buf *out);
} gen_files[] = {
	{ "stats", tfs_fs_stats_text },
	{ "metrics", metrics_text },
	{ "errors", errors_text },
	{ "bad_rows", bad_rows_text },
};

#define NGEN (sizeof(gen_files) / sizeof(gen_files[0]))

static size_t gen_index(const char *name)
{
	size_t i = 0;

	while (i < NGEN && strcmp(gen_files[i].name, name))
		i++;
	return i;
}

static int gen_getattr(struct tfs_fs *fs, struct tfs_fs_node *n, struct tfs_fs_attr *a)
{
	struct tfs_buf b = { 0 };

	/* A file whose text cannot be made now looks empty; its open says why. */
	a->size = gen_files[gen_index(n->name)].text(fs, &b) ? 0 : b.len;
	tfs_buf_free(&b);
	return 0;
}

/* Generated text whose size may change between stat and read: no page cache. */
static int gen_open(struct tfs_fs *fs, struct tfs_fs_node *n, const struct fuse_ctx *who,
		    struct tfs_fs_handle *h, struct fuse_file_info *fi)
{
	int rc = gen_files[gen_index(n->name)].text(fs, &h->text);

	(void)who;
	h->size = h->text.len;
	fi->direct_io = 1;
	return rc;
}

static const struct tfs_fs_kind gen_kind = {
	.name = "counters",
	.mode = S_IFREG | 0444,
	.getattr = gen_getattr,
	.open = gen_open,
	.read = tfs_fs_read_text,
};

/* --- .tensorfs/control ---------------------------------------------------------------------- */

static int control_getattr(struct tfs_fs *fs, struct tfs_fs_node *n, struct tfs_fs_attr *a)
{
	(void)n;
	/* For the user who mounted (and root); for anyone with allow_other. */
	a->mode = S_IFREG | (fs->allow_other ? 0666 : 0600);
	return 0;
}

/* Each open is a staging session. Replies are a stream, not a file: no page cache, and offsets
 * are ignored. It stays seekable so that `head -1 <&3` can seek back over what it read past the
 * reply's newline (a no-op) without complaining. */
static int control_open(struct tfs_fs *fs, struct tfs_fs_node *n, const struct fuse_ctx *who,
			struct tfs_fs_handle *h, struct fuse_file_info *fi)
{
	(void)n;
	if (who->uid != fs->uid && who->uid != 0 && !fs->allow_other)
		return -EACCES;
	h->ctl_ops = fs->cfg->control;
	fi->direct_io = 1;
	return fs->cfg->control->open(fs->ctl, who->uid, who->gid, &h->ctl);
}

static void control_read(fuse_req_t req, struct tfs_fs *fs, struct tfs_fs_handle *h, size_t size,
			 off_t off)
{
	char *buf = malloc(size ? size : 1);
	ssize_t n;

	(void)off;
	if (!buf) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	n = fs->cfg->control->read(h->ctl, buf, size);
	if (n < 0)
		fuse_reply_err(req, (int)-n);
	else
		fuse_reply_buf(req, buf, (size_t)n);
	free(buf);
}

static ssize_t control_write(struct tfs_fs *fs, struct tfs_fs_handle *h, const char *buf,
			     size_t len)
{
	return fs->cfg->control->write(h->ctl, buf, len);
}

static int control_ioctl(struct tfs_fs *fs, struct tfs_fs_handle *h, unsigned cmd, const void *in,
			 size_t in_len, void *out, size_t out_len)
{
	return fs->cfg->control->ioctl(h->ctl, cmd, in, in_len, out, out_len);
}

static const struct tfs_fs_kind control_kind = {
	.name = "control",
	.mode = S_IFREG | 0600,
	.getattr = control_getattr,
	.open = control_open,
	.read = control_read,
	.write = control_write,
	.ioctl = control_ioctl,
};

/* --- .tensorfs/ ----------------------------------------------------------------------------- */

static int admin_lookup(struct tfs_fs *fs, struct tfs_fs_node *dir, const char *name,
			struct tfs_fs_node **child)
{
	const struct tfs_fs_kind *kind = gen_index(name) < NGEN ? &gen_kind : NULL;

	if (!strcmp(name, "control") && fs->ctl)
		kind = &control_kind;
	if (!kind)
		return -ENOENT;
	*child = tfs_fs_node_child(fs, dir, name, kind, NULL);
	return *child ? 0 : -ENOMEM;
}

static int admin_list(struct tfs_fs *fs, struct tfs_fs_node *dir, struct tfs_fs_dir *d)
{
	int rc = 0;

	for (size_t i = 0; i < NGEN && !rc; i++)
		rc = tfs_fs_dir_add_child(fs, d, dir, gen_files[i].name, gen_files[i].name,
					  &gen_kind, NULL);
	if (!rc && fs->ctl)
		rc = tfs_fs_dir_add_child(fs, d, dir, "control", "control", &control_kind, NULL);
	return rc;
}

const struct tfs_fs_kind tfs_fs_admin_kind = {
	.name = ".tensorfs",
	.mode = S_IFDIR | 0555,
	.lookup = admin_lookup,
	.list = admin_list,
};
