/* SPDX-License-Identifier: MIT */
/* import_media: videos and audio files decoded once (media.h), in parallel across files, into
 * rows: a clip (or a whole file) a row, with its path, start time, rate and, for a tree of
 * class directories, its label. */
#include "import.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <fcntl.h>
#include <unistd.h>

#include "fetchahead.h"
#include "filetree.h"
#include "media.h"
#include "pipeline.h"
#include "source.h"
#include "rowcol.h"
#include "workpool.h"

static const char *const video_ext[] = { ".mp4", ".mkv", ".webm", ".avi", ".mov", ".m4v", NULL };
static const char *const audio_ext[] = { ".wav", ".flac", ".mp3", ".ogg", ".opus", ".m4a", NULL };

struct file {
	char *path;
	int64_t label;
};

struct files {
	struct file *f;
	size_t n, cap;
};

static int is_media(const char *name, int video)
{
	const char *dot = strrchr(name, '.');

	for (const char *const *e = video ? video_ext : audio_ext; dot && *e; e++)
		if (!strcasecmp(dot, *e))
			return 1;
	return 0;
}

static int add_file(struct files *fs, const char *path, int64_t label)
{
	if (TFS_GROW(fs->f, &fs->cap, fs->n + 1))
		return -ENOMEM;
	fs->f[fs->n].path = strdup(path);
	fs->f[fs->n].label = label;
	return fs->f[fs->n].path ? (fs->n++, 0) : -ENOMEM;
}

static int wanted(const char *name, const void *video)
{
	return is_media(name, *(const int *)video);
}

/* dir/name, without doubling a '/' that ends dir. */
static char *join(const char *dir, const char *name)
{
	size_t n = strlen(dir);
	char *out = NULL;

	while (n > 1 && dir[n - 1] == '/')
		n--;
	return asprintf(&out, "%.*s/%s", (int)n, dir, name) < 0 ? NULL : out;
}

/* Whether source names a directory (a URL: a prefix, unless it ends in a media file's name). */
static int is_tree(const char *source, int video)
{
	struct stat st;

	if (tfs_source_is_url(source))
		return !is_media(source, video);
	return !stat(source, &st) && S_ISDIR(st.st_mode);
}

/* The media files of tree, added to fs by their paths (filetree.h's order and labels). */
static int add_tree(const struct tfs_filetree *tree, const char *top, struct files *fs)
{
	int rc = 0;

	for (size_t i = 0; !rc && i < tree->n; i++) {
		char *path = join(top, tree->f[i].rel);

		rc = path ? add_file(fs, path, tree->f[i].label) : -ENOMEM;
		free(path);
	}
	return rc;
}

/* Every media file of source: the file itself, or a tree's. */
static int walk(const char *source, int video, struct files *fs)
{
	struct tfs_filetree tree;
	int rc;

	if (!tfs_source_is_url(source)) {
		struct stat st;

		if (stat(source, &st)) {
			rc = -errno;
			tfs_err("%s: %s", source, strerror(-rc));
			return rc;
		}
	}
	if (!is_tree(source, video))
		return add_file(fs, source, 0);
	rc = tfs_filetree_list(source, 0, wanted, &video, &tree);
	if (!rc)
		rc = add_tree(&tree, source, fs);
	tfs_filetree_free(&tree);
	return rc;
}

/* A file's decode: an item of the pipeline. */
struct job {
	const struct tfs_media_opts *mo;
	const struct file *f;
	struct tfs_fetchahead *fa; /* file i fetched ahead (NULL: read by its path) */
	size_t i;
	struct tfs_buf file; /* its bytes, when they were */
	struct tfs_video v;
	struct tfs_audio a;
	char err[256];
	int rc;
};

static int decode_run(void *item)
{
	struct job *j = item;
	const struct tfs_buf *file = NULL;

	j->err[0] = 0;
	j->rc = j->fa ? tfs_fetchahead_take(j->fa, j->i, &j->file) : -EFBIG;
	if (!j->rc) {
		file = &j->file;
	} else if (j->rc == -ENOENT) { /* gone since the listing: as a file that does not open */
		snprintf(j->err, sizeof(j->err), "cannot open: %s", strerror(ENOENT));
		j->rc = -EINVAL;
		return 0;
	} else if (j->rc != -EFBIG) {
		snprintf(j->err, sizeof(j->err), "cannot fetch: %s", strerror(-j->rc));
		return 0;
	}
	/* Else a URL's object is demuxed as it arrives (media.c). */
	j->rc = j->mo->video ? tfs_video_decode(j->f->path, file, &j->mo->vo, &j->v, j->err,
						sizeof(j->err))
			     : tfs_audio_decode(j->f->path, file, &j->mo->ao, &j->a, j->err,
						sizeof(j->err));
	j->file.len = 0;
	return 0;
}

static void job_clear(void *item)
{
	struct job *j = item;

	tfs_video_free(&j->v);
	tfs_audio_free(&j->a);
	tfs_buf_free(&j->file);
}

/* Where rows go, in order. */
struct adder {
	const struct tfs_media_opts *mo;
	struct tfs_rowcol *w[5]; /* media, path, start_s, rate, label */
	struct tfs_import_result *res;
	struct tfs_progress *progress;
	const char *root;
};

/* One row: bytes of n units (frames or samples) of unit bytes, starting at time t. */
static int add_row(struct adder *ad, const struct job *j, const uint8_t *p, uint64_t n,
		   uint64_t unit, const uint64_t *shape, double t, double rate)
{
	const char *rel = j->f->path;
	int rc;

	if (ad->root && !strncmp(rel, ad->root, strlen(ad->root)))
		rel += strlen(ad->root) + (rel[strlen(ad->root)] == '/');
	rc = tfs_rowcol_add(ad->w[0], p, (size_t)(n * unit), shape);
	if (!rc)
		rc = tfs_rowcol_add(ad->w[1], rel, strlen(rel), NULL);
	if (!rc)
		rc = tfs_rowcol_add(ad->w[2], &t, sizeof(t), NULL);
	if (!rc)
		rc = tfs_rowcol_add(ad->w[3], &rate, sizeof(rate), NULL);
	if (!rc && ad->w[4])
		rc = tfs_rowcol_add(ad->w[4], &j->f->label, sizeof(j->f->label), NULL);
	ad->res->rows += !rc;
	return rc;
}

static int use_file(void *arg, void *item)
{
	struct adder *ad = arg;
	struct job *j = item;
	const struct tfs_media_opts *mo = ad->mo;
	struct tfs_import_result *res = ad->res;
	int rc = 0;

	if (j->rc == -ELIBACC)
		return j->rc; /* nothing can be decoded, no file is to blame: fflib logged why */
	if (j->rc && j->rc != -EINVAL) {
		/* Not the file's bytes but reading them (a fetch that failed): never a skip. */
		tfs_err("%s: %s; nothing was committed", j->f->path, j->err);
		return j->rc;
	}
	if (j->rc) {
		tfs_warn("%s: %s%s", j->f->path, j->err, mo->strict ? "" : "; skipped");
		if (mo->strict) {
			tfs_err("--strict: a file failed; nothing was committed");
			return -EINVAL;
		}
		if (res->skipped < TFS_IMPORT_SKIPS_KEPT)
			snprintf(res->skips[res->skipped], sizeof(res->skips[0]), "%.*s: %.*s", 100,
				 j->f->path, 90, j->err);
		res->skipped++;
		return 0;
	}
	if (mo->video) {
		const struct tfs_video *v = &j->v;
		const uint64_t fb = (uint64_t)v->w * v->h * 3;

		if (!mo->clip) {
			const uint64_t shape[4] = { v->n, v->h, v->w, 3 };

			rc = add_row(ad, j, v->px, v->n, fb, shape, v->t[0], v->fps);
		}
		for (uint64_t s = 0; mo->clip && !rc && s + mo->clip <= v->n; s += mo->stride) {
			const uint64_t shape[4] = { mo->clip, v->h, v->w, 3 };

			rc = add_row(ad, j, v->px + s * fb, mo->clip, fb, shape, v->t[s], v->fps);
			/* frames before the next clip's first were read: out of memory with them */
			tfs_spool_done(&j->v.held,
				       v->px + (s + mo->stride < v->n ? s + mo->stride : v->n) *
						       fb);
		}
		tfs_progress_add(ad->progress, v->n * fb, 1);
	} else {
		const struct tfs_audio *a = &j->a;
		const uint64_t sb = (uint64_t)a->channels * sizeof(float);
		const uint64_t clip = (uint64_t)llround(mo->clip_s * a->rate);
		const uint64_t stride = (uint64_t)llround(mo->stride_s * a->rate);

		if (!mo->clip_s) {
			const uint64_t shape[2] = { a->n, a->channels };

			rc = add_row(ad, j, (const uint8_t *)a->s, a->n, sb, shape, 0, a->rate);
		}
		for (uint64_t s = 0; mo->clip_s && clip && !rc && s + clip <= a->n;
		     s += stride ? stride : clip) {
			const uint64_t shape[2] = { clip, a->channels };

			rc = add_row(ad, j, (const uint8_t *)(a->s + s * a->channels), clip, sb,
				     shape, (double)s / a->rate, a->rate);
			const uint64_t next = s + (stride ? stride : clip);

			tfs_spool_done(&j->a.held,
				       (const uint8_t *)(a->s + (next < a->n ? next : a->n) *
									a->channels));
		}
		tfs_progress_add(ad->progress, a->n * sb, 1);
	}
	job_clear(j);
	return rc;
}

static const struct tfs_pipeline_ops decode_ops = { decode_run, use_file, job_clear };

int tfs_import_media(struct tfs_store *s, const char *ds, const char *const *sources,
		     size_t nsources, const struct tfs_media_opts *mo,
		     const struct tfs_import_opts *o, struct tfs_import_result *res,
		     struct tfs_id *commit_id)
{
	struct files fs = { 0 };
	struct tfs_manifest m = { 0 };
	struct tfs_workpool *pool = NULL;
	struct tfs_pipeline *pipe = NULL;
	struct adder ad = { .mo = mo, .res = res, .progress = o->progress };
	struct tfs_filetree ft = { 0 }; /* a single tree source's files */
	struct tfs_fetchahead *fa = NULL;
	size_t col[5], ncols = mo->labels ? 5 : 4;
	const char *what = nsources ? sources[0] : "";
	struct tfs_txn t;
	int rc;

	memset(res, 0, sizeof(*res));
	rc = tfs_txn_begin(&t, s, ds, o);
	if (rc)
		goto out;
	if (mo->labels && nsources != 1) {
		tfs_err("--labels-from-dirs takes one directory of class directories");
		rc = -EINVAL;
		goto out;
	}
	if (mo->labels || (nsources == 1 && is_tree(sources[0], mo->video))) {
		/* One tree; with labels, of class directories numbered as torchvision's
		 * DatasetFolder does. */
		ad.root = sources[0];
		rc = tfs_filetree_list(sources[0], mo->labels, wanted, &mo->video, &ft);
		if (!rc && mo->shuffle)
			rc = tfs_filetree_shuffle(&ft, mo->shuffle_seed);
		if (!rc)
			rc = add_tree(&ft, sources[0], &fs);
		res->classes = ft.nclasses;
	} else if (mo->shuffle) {
		tfs_err("--shuffle orders one directory's files: give one directory");
		rc = -EINVAL;
	} else {
		for (size_t i = 0; !rc && i < nsources; i++)
			rc = walk(sources[i], mo->video, &fs);
	}
	if (rc)
		goto out;
	if (!fs.n) {
		tfs_err("%s: no %s files", what, mo->video ? "video" : "audio");
		rc = -EINVAL;
		goto out;
	}
	rc = tfs_manifest_copy_extra(&t.old, 24, &m);
	if (!rc && mo->video && mo->clip && mo->vo.w) {
		const uint64_t shape[4] = { mo->clip, mo->vo.h, mo->vo.w, 3 };

		rc = tfs_import_column_descr(&m, "video", TFS_COL_FIXED, "|u1", 4, shape, o, what,
					     &col[0]);
	} else if (!rc && mo->video) {
		rc = tfs_import_column_descr(&m, "video", TFS_COL_RAGGED, "|u1", 4, NULL, o, what,
					     &col[0]);
	} else if (!rc && mo->clip_s && mo->ao.mono && mo->ao.rate) {
		/* Clips of a known size: (samples, 1) at the rate asked for. */
		const uint64_t shape[2] = { (uint64_t)llround(mo->clip_s * mo->ao.rate), 1 };

		rc = tfs_import_column_descr(&m, "audio", TFS_COL_FIXED, "<f4", 2, shape, o, what,
					     &col[0]);
	} else if (!rc) {
		rc = tfs_import_column_descr(&m, "audio", TFS_COL_RAGGED, "<f4", 2, NULL, o, what,
					     &col[0]);
	}
	if (!rc)
		rc = tfs_import_column_descr(&m, "path", TFS_COL_TEXT, "|u1", 0, NULL, o, what,
					     &col[1]);
	if (!rc)
		rc = tfs_import_column_descr(&m, "start_s", TFS_COL_FIXED, "<f8", 0, NULL, o, what,
					     &col[2]);
	if (!rc)
		rc = tfs_import_column_descr(&m, mo->video ? "fps" : "rate", TFS_COL_FIXED, "<f8",
					     0, NULL, o, what, &col[3]);
	if (!rc && mo->labels)
		rc = tfs_import_column_descr(&m, "label", TFS_COL_FIXED, "<i8", 0, NULL, o, what,
					     &col[4]);
	if (!rc && mo->labels)
		rc = tfs_import_classes(&m.cols[col[4]], ft.classes, ft.nclasses, what);
	for (size_t i = 0; !rc && i < ncols; i++)
		rc = tfs_rowcol_begin(s, ds, &m, col[i], &ad.w[i]);
	if (!rc)
		rc = tfs_import_pool(o, &pool);
	for (size_t i = 0; !rc && i < ncols; i++)
		tfs_rowcol_use_pool(ad.w[i], pool);
	if (!rc) {
		const unsigned threads = tfs_workpool_threads(pool), win = 2 * threads + 2;

		/* A URL tree's files: fetched ahead (each costs a round trip), those over 4 MiB
		 * as they arrive instead; fs.f[i] is ft.f[i]. */
		rc = tfs_fetchahead_tree(&ft, tfs_fetchahead_get_small, win + threads, &fa);
		if (!rc)
			rc = tfs_pipeline_create(pool, sizeof(struct job), win, &decode_ops, &ad,
						 &pipe);
	}
	for (size_t i = 0; !rc && i < fs.n; i++) {
		struct job *j = tfs_pipeline_next(pipe, &rc);

		if (!j)
			break;
		j->mo = mo;
		j->f = &fs.f[i];
		j->fa = fa;
		j->i = i;
		tfs_pipeline_submit(pipe);
	}
	if (!rc)
		rc = tfs_pipeline_drain(pipe);
	tfs_pipeline_free(pipe);
	pipe = NULL;
	if (rc && fa)
		tfs_store_cancel(ft.tree); /* the GETs in flight are of no use now */
	tfs_fetchahead_stop(fa);
	fa = NULL;
	for (size_t i = 0; !rc && i < ncols; i++)
		rc = tfs_rowcol_finish(ad.w[i]);
	if (!rc && !res->rows) {
		tfs_err("%s: no row: every file failed or was shorter than a clip", what);
		rc = -EINVAL;
	}
	if (!rc) {
		m.rows = t.old.rows + res->rows;
		rc = tfs_import_same_rows(&m, m.rows, what);
	}
	if (!rc)
		rc = tfs_txn_commit(&t, &m, o->message, commit_id);
	if (pool)
		res->busy_peak = tfs_workpool_busy_peak(pool);
out:
	tfs_pipeline_free(pipe);
	tfs_fetchahead_stop(fa);
	for (size_t i = 0; i < 5; i++)
		tfs_rowcol_free(ad.w[i]);
	tfs_workpool_destroy(pool);
	for (size_t i = 0; i < fs.n; i++)
		free(fs.f[i].path);
	free(fs.f);
	tfs_filetree_free(&ft);
	tfs_manifest_free(&m);
	tfs_txn_end(&t);
	return rc;
}

/* --- media named by JSON Lines records ------------------------------------------------------- */

int tfs_media_value(const char *base, const char *rel, char kind, const struct tfs_media_fields *mf,
		    const struct tfs_buf *file, struct tfs_buf *out, char *why, size_t why_cap)
{
	char *path = NULL;
	uint64_t shape[4];
	uint32_t ndim = 0;
	const void *data = NULL;
	size_t bytes = 0;
	struct tfs_image img = { 0 }, fit = { 0 };
	struct tfs_video v = { 0 };
	struct tfs_audio a = { 0 };
	int rc, url_fd = -1;

	if (asprintf(&path, "%s%s%s", rel[0] == '/' ? "" : base, rel[0] == '/' ? "" : "/", rel) < 0)
		return -ENOMEM;
	if (kind == 'i' && !file && tfs_source_is_url(path)) {
		/* An image beside a manifest read from a URL: fetched whole, read from there. A
		 * video or audio file is demuxed as it arrives (media.c). */
		char *url = path;

		url_fd = tfs_source_open_file(url);
		path = NULL;
		if (url_fd < 0 || asprintf(&path, "/proc/self/fd/%d", url_fd) < 0) {
			rc = url_fd < 0 ? url_fd : -ENOMEM;
			snprintf(why, why_cap, "%.100s: %s", rel, strerror(-rc));
			free(url);
			if (url_fd >= 0)
				close(url_fd);
			/* No such object: the record's fault. A fetch that failed: not. */
			return rc == -ENOENT ? -EINVAL : rc;
		}
		free(url);
	}
	if (kind == 'i') {
		struct tfs_buf read = { 0 };
		int fd = file ? -1 : open(path, O_RDONLY | O_CLOEXEC);

		rc = file ? 0 : fd < 0 ? -errno : tfs_read_fd(fd, &read);
		if (fd >= 0)
			close(fd);
		if (rc) {
			snprintf(why, why_cap, "%.100s: %s", rel, strerror(-rc));
			rc = rc == -ENOMEM ? rc : -EINVAL; /* a file the record names wrongly */
		} else {
			file = file ? file : &read;
			rc = tfs_image_decode(file->data, file->len, &img, why, why_cap);
		}
		tfs_buf_free(&read);
		if (!rc && mf->io && mf->io->w) {
			rc = tfs_image_fit(&img, mf->io->w, mf->io->h, mf->io->fit, &fit);
			tfs_image_free(&img);
			img = fit;
		}
		ndim = 3, shape[0] = img.h, shape[1] = img.w, shape[2] = 3;
		data = img.px, bytes = (size_t)img.w * img.h * 3;
	} else if (kind == 'v') {
		/* media.h: -EINVAL, the file's fault; another -errno, its fetch's or the machine's
		 */
		rc = tfs_video_decode(path, file, &mf->mo->vo, &v, why, why_cap);
		ndim = 4, shape[0] = v.n, shape[1] = v.h, shape[2] = v.w, shape[3] = 3;
		data = v.px, bytes = (size_t)(v.n * v.w * v.h * 3);
	} else {
		rc = tfs_audio_decode(path, file, &mf->mo->ao, &a, why, why_cap);
		ndim = 2, shape[0] = a.n, shape[1] = a.channels;
		data = a.s, bytes = (size_t)(a.n * a.channels * sizeof(float));
	}
	if (rc && rc != -EINVAL && rc != -ELIBACC) /* fflib logged -ELIBACC */
		tfs_err("%s: %s", rel, rc == -ENOMEM ? strerror(ENOMEM) : why);
	if (!rc)
		rc = tfs_buf_append(out, &ndim, sizeof(ndim)) ?:
		     tfs_buf_append(out, shape, ndim * sizeof(*shape)) ?:
		     tfs_buf_append(out, data ? data : "", bytes);
	tfs_image_free(&img);
	tfs_video_free(&v);
	tfs_audio_free(&a);
	free(path);
	if (url_fd >= 0)
		close(url_fd);
	return rc;
}

int tfs_media_value_parse(const uint8_t *p, size_t len, unsigned *ndim, uint64_t *shape,
			  const uint8_t **data, size_t *dlen)
{
	uint32_t n;

	if (len < sizeof(n))
		return -EIO;
	memcpy(&n, p, sizeof(n));
	if (n > 4 || len < sizeof(n) + n * sizeof(*shape))
		return -EIO;
	memcpy(shape, p + sizeof(n), n * sizeof(*shape));
	*ndim = n;
	*data = p + sizeof(n) + n * sizeof(*shape);
	*dlen = len - sizeof(n) - n * sizeof(*shape);
	return 0;
}
