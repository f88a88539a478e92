/* SPDX-License-Identifier: MIT */
/* import_images: a folder of JPEG and PNG files decoded once, in parallel, into an `image`
 * column (ragged, or fixed with a size), a `path` text column and, for an ImageFolder tree, an
 * int64 `label` column numbered as torchvision's ImageFolder numbers its classes. */
#include "import.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "fetchahead.h"
#include "filetree.h"
#include "image.h"
#include "pipeline.h"
#include "rowcol.h"
#include "source.h"
#include "workpool.h"

static int is_image_name(const char *name, const void *arg)
{
	const char *dot = strrchr(name, '.');

	(void)arg;
	return dot &&
	       (!strcasecmp(dot, ".jpg") || !strcasecmp(dot, ".jpeg") || !strcasecmp(dot, ".png"));
}

/* A decode job: an item of the pipeline. */
struct job {
	struct tfs_store *tree;
	struct tfs_fetchahead *fa; /* a URL's tree: file i fetched ahead (NULL: read here) */
	size_t i;
	const struct tfs_images_opts *io;
	const struct tfs_filetree_file *f;
	struct tfs_image img; /* the result */
	char err[TFS_IMAGE_ERR];
	int rc;
};

static int decode_run(void *item)
{
	struct job *j = item;
	struct tfs_buf file = { 0 };
	struct tfs_image raw = { 0 };

	tfs_image_free(&j->img);
	j->err[0] = 0;
	j->rc = j->fa ? tfs_fetchahead_take(j->fa, j->i, &file)
		      : tfs_store_get(j->tree, j->f->rel, &file);
	if (j->rc) {
		snprintf(j->err, sizeof(j->err), "%s", strerror(-j->rc));
		if (j->rc == -ENOENT)
			j->rc = -EINVAL; /* gone since the listing: as a file that does not decode
					  */
	} else
		j->rc = tfs_image_decode_draft(file.data, file.len,
					       j->io->draft && j->io->fit != TFS_FIT_PAD ? j->io->w
											 : 0,
					       j->io->h, &raw, j->err, sizeof(j->err));
	tfs_buf_free(&file);
	if (!j->rc && j->io->w) {
		j->rc = tfs_image_fit(&raw, j->io->w, j->io->h, j->io->fit, &j->img);
		tfs_image_free(&raw);
		if (j->rc)
			snprintf(j->err, sizeof(j->err), "cannot resize: %s", strerror(-j->rc));
	} else if (!j->rc) {
		j->img = raw;
	}
	return 0;
}

static void job_clear(void *item)
{
	tfs_image_free(&((struct job *)item)->img);
}

/* Images decoded ahead of the one added next. An image waiting to be added holds its rows: with
 * --size those are the target's, and up to 64 MiB of them keep the pool's threads from waiting
 * for the importer's to hand out the next file (2 threads, 224x224: the worker busy 83% of the
 * time with 12 ahead, 95% with 48); without, the decoded originals, of any size, 4 a thread. */
static unsigned window(const struct tfs_images_opts *io, unsigned threads)
{
	const uint64_t row = (uint64_t)io->w * io->h * 3, least = 4 * threads + 4,
		       most = 16 * threads + 16;
	const uint64_t fit = row ? (64u << 20) / row : 0;

	return (unsigned)(fit < least ? least : fit > most ? most : fit);
}

/* Where decoded images go, in order. */
struct adder {
	struct tfs_rowcol **w;
	int labels;
	const struct tfs_images_opts *io;
	struct tfs_import_result *res;
	struct tfs_progress *progress;
};

/* Add one decoded image's rows; a bad one is skipped (or, strict, the end of the import). */
static int add_image(void *arg, void *item)
{
	struct adder *a = arg;
	struct job *j = item;
	struct tfs_import_result *res = a->res;
	uint64_t shape[3] = { j->img.h, j->img.w, 3 };
	int rc;

	if (j->rc && j->rc != -EINVAL) {
		/* Not the image's bytes but reading them (a fetch that failed, memory): never a
		 * skip. */
		tfs_err("%s: cannot read: %s; nothing was committed", j->f->rel, j->err);
		return j->rc;
	}
	if (j->rc) {
		tfs_warn("%s: %s%s", j->f->rel, j->err, a->io->strict ? "" : "; skipped");
		if (a->io->strict) {
			tfs_err("--strict: an image failed; nothing was committed");
			return -EINVAL;
		}
		if (res->skipped < TFS_IMPORT_SKIPS_KEPT)
			snprintf(res->skips[res->skipped], sizeof(res->skips[0]), "%s: %s",
				 j->f->rel, j->err);
		res->skipped++;
		return 0;
	}
	/* The pixels go to their chunk as they are: copied into it on the pool. */
	rc = tfs_rowcol_add_take(a->w[0], j->img.px, (size_t)j->img.w * j->img.h * 3, shape);
	j->img.px = NULL;
	if (!rc)
		rc = tfs_rowcol_add(a->w[1], j->f->rel, strlen(j->f->rel), NULL);
	if (!rc && a->labels)
		rc = tfs_rowcol_add(a->w[2], &j->f->label, sizeof(j->f->label), NULL);
	if (rc == -EINVAL)
		tfs_err("%s: path is not valid UTF-8", j->f->rel);
	res->rows++;
	tfs_progress_add(a->progress, (uint64_t)j->img.w * j->img.h * 3, 1);
	tfs_image_free(&j->img);
	return rc;
}

static const struct tfs_pipeline_ops decode_ops = { decode_run, add_image, job_clear };

int tfs_import_images(struct tfs_store *s, const char *ds, const char *dir,
		      const struct tfs_images_opts *io, const struct tfs_import_opts *o,
		      struct tfs_import_result *res, struct tfs_id *commit_id)
{
	struct tfs_filetree ft = { 0 };
	struct tfs_manifest m = { 0 };
	struct tfs_workpool *pool = NULL;
	struct tfs_rowcol *w[3] = { NULL, NULL, NULL };
	struct tfs_pipeline *pipe = NULL;
	struct tfs_fetchahead *fa = NULL;
	size_t col[3];
	struct tfs_txn t;
	int rc;

	memset(res, 0, sizeof(*res));
	rc = tfs_txn_begin(&t, s, ds, o);
	if (rc)
		goto out;
	rc = tfs_filetree_list(dir, io->labels, is_image_name, NULL, &ft);
	if (!rc && io->shuffle)
		rc = tfs_filetree_shuffle(&ft, io->shuffle_seed);
	if (rc)
		goto out;
	if (!ft.n) {
		tfs_err("%s: no .jpg, .jpeg or .png files%s", dir,
			io->labels ? " in class directories" : "");
		rc = -EINVAL;
		goto out;
	}
	res->classes = ft.nclasses;

	/* The columns: found and checked, or added. */
	rc = tfs_manifest_copy_extra(&t.old, 12, &m);
	if (!rc) {
		const uint64_t shape[3] = { io->h, io->w, 3 };

		rc = io->w ? tfs_import_column_descr(&m, "image", TFS_COL_FIXED, "|u1", 3, shape, o,
						     dir, &col[0])
			   : tfs_import_column_descr(&m, "image", TFS_COL_RAGGED, "|u1", 3, NULL, o,
						     dir, &col[0]);
	}
	if (!rc)
		rc = tfs_import_column_descr(&m, "path", TFS_COL_TEXT, "|u1", 0, NULL, o, dir,
					     &col[1]);
	if (!rc && io->labels)
		rc = tfs_import_column_descr(&m, "label", TFS_COL_FIXED, "<i8", 0, NULL, o, dir,
					     &col[2]);
	if (!rc && io->labels)
		rc = tfs_import_classes(&m.cols[col[2]], ft.classes, ft.nclasses, dir);
	for (size_t i = 0; !rc && i < (io->labels ? 3u : 2u); i++)
		rc = tfs_rowcol_begin(s, ds, &m, col[i], &w[i]);
	if (rc)
		goto out;
	if (o->progress)
		__atomic_store_n(&o->progress->total_items, ft.n, __ATOMIC_RELAXED);

	/* Decoded on every thread, added in order. */
	rc = tfs_import_pool(o, &pool);
	if (rc)
		goto out;
	/* Chunks are encoded and written on the pool too. */
	for (size_t i = 0; i < (io->labels ? 3u : 2u); i++)
		tfs_rowcol_use_pool(w[i], pool);
	{
		struct adder a = { w, io->labels, io, res, o->progress };
		const unsigned threads = tfs_workpool_threads(pool), win = window(io, threads);

		rc = tfs_fetchahead_tree(&ft, NULL, win + threads, &fa);
		if (!rc)
			rc = tfs_pipeline_create(pool, sizeof(struct job), win, &decode_ops, &a,
						 &pipe);
		for (size_t i = 0; !rc && i < ft.n; i++) {
			struct job *j = tfs_pipeline_next(pipe, &rc);

			if (!j)
				break;
			j->tree = ft.tree;
			j->fa = fa;
			j->i = i;
			j->io = io;
			j->f = &ft.f[i];
			tfs_pipeline_submit(pipe);
		}
		if (!rc)
			rc = tfs_pipeline_drain(pipe);
		tfs_pipeline_free(pipe);
		pipe = NULL;
		if (rc && fa)
			tfs_store_cancel(ft.tree); /* the GETs in flight are of no use now */
		tfs_fetchahead_stop(fa); /* after the pipeline: no decoder waits on it any more */
	}
	res->busy_peak = tfs_workpool_busy_peak(pool);
	for (size_t i = 0; !rc && i < (io->labels ? 3u : 2u); i++)
		rc = tfs_rowcol_finish(w[i]);
	if (rc)
		goto out;
	if (!res->rows) {
		tfs_err("%s: every image failed; nothing to commit", dir);
		rc = -EINVAL;
		goto out;
	}
	/* Every column keeps the same number of rows. */
	m.rows = m.cols[col[0]].rows;
	rc = tfs_import_same_rows(&m, m.rows, dir);
	if (!rc)
		rc = tfs_txn_commit(&t, &m, o->message, commit_id);
out:
	for (size_t i = 0; i < 3; i++)
		tfs_rowcol_free(w[i]);
	tfs_workpool_destroy(pool);
	tfs_filetree_free(&ft);
	tfs_manifest_free(&m);
	tfs_txn_end(&t);
	return rc;
}
