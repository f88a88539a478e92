/* SPDX-License-Identifier: MIT */
/* import_wds: WebDataset shards read through libarchive: tar files whose members, grouped by
 * key, are samples (`.jpg`/`.jpeg`/`.png` decoded images, `.cls` int64, `.txt` and `.json` text,
 * `.npy` tensors, anything else bytes, and the key a text `key` column). */
#include "import.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include <archive_entry.h>

#include "archread.h"
#include "image.h"
#include "pipeline.h"
#include "rowcol.h"
#include "source.h"
#include "workpool.h"

/* An NPY held in memory: its header, checked against its length. */
static int npy_in(const struct tfs_buf *b, const char *what, struct tfs_npy_info *info)
{
	char err[256];
	size_t need;
	uint64_t bytes;

	if (tfs_npy_parse(b->data, b->len, info, &need, err, sizeof(err))) {
		tfs_err("%s: %s", what, err[0] ? err : "not an NPY array");
		return -EINVAL;
	}
	bytes = info->dtype.itemsize;
	for (unsigned d = 0; d < info->ndim; d++)
		bytes *= info->shape[d];
	if (info->data_offset + bytes > b->len) {
		tfs_err("%s: shorter than its NPY header says", what);
		return -EINVAL;
	}
	if (info->fortran_order && info->ndim > 1) {
		tfs_err("%s: Fortran-ordered arrays are not taken from archives", what);
		return -EINVAL;
	}
	if (info->big_endian)
		tfs_dtype_swap(&info->dtype, b->data + info->data_offset, (size_t)bytes);
	return 0;
}

/* --- WebDataset ----------------------------------------------------------------------------- */

enum wkind { W_IMAGE, W_CLS, W_TEXT, W_NPY, W_BYTES };

/* A column of the shards: a field of the first sample. */
struct wfield {
	char ext[64]; /* the column's name */
	enum wkind kind;
	struct tfs_rowcol *w;
	size_t col;
	struct tfs_dtype dt; /* W_NPY: the column's dtype and rank */
	unsigned ndim;
};

/* A field's value in one sample, made ready (decoded, parsed) before any of it is added. */
struct wvalue {
	struct tfs_buf val;
	int have;
	struct tfs_image img;	  /* W_IMAGE */
	struct tfs_npy_info info; /* W_NPY */
	int64_t cls;		  /* W_CLS */
};

/* A sample: an item of the pipeline, read from the shard on the importer's thread, made ready
 * on the pool, added (or skipped) in order. */
struct wsample {
	const struct wfield *f;
	size_t nf;
	char key[1024];
	char why[200]; /* "": whole and good */
	struct wvalue v[TFS_ARCHIVE_MAX_COLS];
};

static enum wkind wkind_of(const char *ext)
{
	if (!strcasecmp(ext, "jpg") || !strcasecmp(ext, "jpeg") || !strcasecmp(ext, "png"))
		return W_IMAGE;
	if (!strcmp(ext, "cls"))
		return W_CLS;
	if (!strcmp(ext, "txt") || !strcmp(ext, "json"))
		return W_TEXT;
	if (!strcmp(ext, "npy"))
		return W_NPY;
	return W_BYTES;
}

/* Split a member name into key (path up to the first '.' of its last part) and extension. */
static int split_name(const char *name, char *key, size_t kcap, const char **ext)
{
	const char *base = strrchr(name, '/'), *dot;

	base = base ? base + 1 : name;
	dot = strchr(base, '.');
	if (!dot || dot == base || !dot[1] || (size_t)(dot - name) >= kcap)
		return 0;
	snprintf(key, kcap, "%.*s", (int)(dot - name), name);
	*ext = dot + 1;
	return 1;
}

/* Make field f's value v ready to add; a reason in why when it cannot be. */
static void prepare(const struct wfield *f, struct wvalue *v, const char *key, char *why,
		    size_t cap)
{
	char err[TFS_IMAGE_ERR], *end;

	switch (f->kind) {
	case W_IMAGE:
		if (tfs_image_decode(v->val.data, v->val.len, &v->img, err, sizeof(err)))
			snprintf(why, cap, ".%s: %.*s", f->ext, 120, err);
		break;
	case W_CLS:
		if (tfs_buf_append(&v->val, "", 1)) {
			snprintf(why, cap, "out of memory");
			break;
		}
		v->val.len--;
		v->cls = strtoll((char *)v->val.data, &end, 10);
		if (end == (char *)v->val.data || (*end && *end != '\n'))
			snprintf(why, cap, ".%s: not an integer", f->ext);
		break;
	case W_TEXT:
		if (!tfs_utf8_valid(v->val.data, v->val.len))
			snprintf(why, cap, ".%s: not UTF-8", f->ext);
		break;
	case W_NPY:
		if (npy_in(&v->val, key, &v->info) || strcmp(v->info.dtype.descr, f->dt.descr) ||
		    v->info.ndim != f->ndim)
			snprintf(why, cap, ".%s: not an NPY array of dtype %s and rank %u", f->ext,
				 f->dt.descr, f->ndim);
		break;
	default:
		break;
	}
}

static int add_value(const struct wfield *f, struct wvalue *v)
{
	uint64_t shape[3], bytes;
	uint8_t *px = v->img.px;

	switch (f->kind) {
	case W_IMAGE:
		/* The pixels go to their chunk as they are: copied into it on the pool. */
		shape[0] = v->img.h, shape[1] = v->img.w, shape[2] = 3;
		v->img.px = NULL;
		return tfs_rowcol_add_take(f->w, px, (size_t)v->img.w * v->img.h * 3, shape);
	case W_CLS:
		return tfs_rowcol_add(f->w, &v->cls, sizeof(v->cls), NULL);
	case W_NPY:
		bytes = v->info.dtype.itemsize;
		for (unsigned d = 0; d < v->info.ndim; d++)
			bytes *= v->info.shape[d];
		return tfs_rowcol_add(f->w, v->val.data + v->info.data_offset, (size_t)bytes,
				      v->info.shape);
	default:
		return tfs_rowcol_add(f->w, v->val.data, v->val.len, NULL);
	}
}

/* On the pool: every field present, and each one decoded and checked. */
static int sample_ready(void *item)
{
	struct wsample *sm = item;

	sm->why[0] = 0;
	for (size_t i = 0; i < sm->nf && !sm->why[0]; i++)
		if (!sm->v[i].have)
			snprintf(sm->why, sizeof(sm->why), "no .%s", sm->f[i].ext);
	for (size_t i = 0; i < sm->nf && !sm->why[0]; i++)
		prepare(&sm->f[i], &sm->v[i], sm->key, sm->why, sizeof(sm->why));
	return 0;
}

/* Where samples go, in order. */
struct wadder {
	struct tfs_rowcol *keyw;
	int strict;
	struct tfs_import_result *res;
};

/* Add one sample (every field present and good, else skipped); the key is its own column. */
static int add_sample(void *arg, void *item)
{
	struct wadder *a = arg;
	struct wsample *sm = item;
	struct tfs_import_result *res = a->res;
	int rc = 0;

	if (sm->why[0]) {
		tfs_warn("%s: %s%s", sm->key, sm->why, a->strict ? "" : "; skipped");
		if (a->strict)
			rc = -EINVAL;
		else if (res->skipped < TFS_IMPORT_SKIPS_KEPT)
			snprintf(res->skips[res->skipped], sizeof(res->skips[0]), "%.*s: %.*s", 80,
				 sm->key, 110, sm->why);
		res->skipped += !a->strict;
	} else {
		for (size_t i = 0; !rc && i < sm->nf; i++)
			rc = add_value(&sm->f[i], &sm->v[i]);
		if (!rc)
			rc = tfs_rowcol_add(a->keyw, sm->key, strlen(sm->key), NULL);
		res->rows += !rc;
	}
	for (size_t i = 0; i < sm->nf; i++)
		tfs_image_free(&sm->v[i].img);
	return rc;
}

static void sample_clear(void *item)
{
	struct wsample *sm = item;

	for (size_t i = 0; i < TFS_ARCHIVE_MAX_COLS; i++) {
		tfs_buf_free(&sm->v[i].val);
		tfs_image_free(&sm->v[i].img);
	}
}

static const struct tfs_pipeline_ops sample_ops = { sample_ready, add_sample, sample_clear };

/* The item the shard's next sample is read into, keyed `key`. NULL (rc) when the pipeline
 * ended in an error. */
static struct wsample *sample_start(struct tfs_pipeline *pipe, const struct wfield *f, size_t nf,
				    const char *key, int *rc)
{
	struct wsample *sm = tfs_pipeline_next(pipe, rc);

	if (!sm)
		return NULL;
	sm->f = f;
	sm->nf = nf;
	snprintf(sm->key, sizeof(sm->key), "%s", key);
	for (size_t i = 0; i < nf; i++) {
		sm->v[i].have = 0;
		sm->v[i].val.len = 0;
	}
	return sm;
}

/* Whether an uncompressed tar that libarchive read to its end has the end-of-archive blocks (two
 * of zeros) that every writer puts there: a file cut right after a member has none, and would
 * otherwise pass for whole. A compressed one is left to its filter's own checks. A source whose
 * last bytes could not be read is no answer: ar->err says why. */
static int tar_ends(struct tfs_archive *ar, const char *path)
{
	const uint64_t size = tfs_source_size(ar->src);
	uint8_t tail[1024];
	int ok = 1;

	if (archive_filter_code(ar->a, 0) != ARCHIVE_FILTER_NONE)
		return 1;
	if (size < sizeof(tail)) {
		ok = 0;
	} else if ((ar->err = tfs_source_pread(ar->src, tail, sizeof(tail), size - sizeof(tail)))) {
		return 0; /* not read: the fetch said why */
	}
	for (size_t i = 0; ok && i < sizeof(tail); i++)
		ok = !tail[i];
	if (!ok)
		tfs_err("%s: damaged or cut short: no end-of-archive blocks after its last member",
			path);
	return ok;
}

/* A shard damaged or cut short (logged): with strict the import fails; else what it held
 * after `after` (its last sample kept, or "" for none) is lost, and named in res->skips. */
static int damaged_tail(const char *shard, const char *after, int strict,
			struct tfs_import_result *res)
{
	if (strict)
		return -EIO;
	if (res->skipped < TFS_IMPORT_SKIPS_KEPT)
		snprintf(res->skips[res->skipped], sizeof(res->skips[0]),
			 "%.*s: damaged or cut short after %s%.*s; the rest of the shard is lost",
			 60, shard, after[0] ? "sample " : "its start", 60, after);
	res->skipped++;
	return 0;
}

/* Members whose extension is not a field of the first sample: left out of the rows, and named
 * once an extension when the import ends (a few extensions; the rest counted). */
#define EXTRAS_KEPT 8

struct extras {
	struct {
		char ext[64];
		char first[128]; /* the first sample that had it */
		uint64_t n;	 /* samples that had it */
	} x[EXTRAS_KEPT];
	size_t n;
	uint64_t more; /* members of other extensions yet */
};

static void extra_seen(struct extras *x, const char *ext, const char *key)
{
	size_t i = 0;

	while (i < x->n && strcmp(x->x[i].ext, ext))
		i++;
	if (i == x->n && x->n == EXTRAS_KEPT) {
		x->more++;
		return;
	}
	if (i == x->n) {
		snprintf(x->x[i].ext, sizeof(x->x[i].ext), "%s", ext);
		snprintf(x->x[i].first, sizeof(x->x[i].first), "%s", key);
		x->n++;
	}
	x->x[i].n++;
}

static void extras_report(const struct extras *x)
{
	for (size_t i = 0; i < x->n; i++)
		tfs_warn("field '%s' of %" PRIu64 " sample%s (the first: %s) is not a field of the "
			 "first sample: left out (--strict refuses it)",
			 x->x[i].ext, x->x[i].n, x->x[i].n == 1 ? "" : "s", x->x[i].first);
	if (x->more)
		tfs_warn("%" PRIu64 " members of other fields not in the first sample: left out",
			 x->more);
}

/* The fields of the first sample of the first shard (in, read from its start), and the kinds of
 * their columns. */
static int first_fields(struct tfs_source *in, const char *shard, struct wfield *f, size_t *nf)
{
	struct tfs_archive *ar;
	struct archive *a;
	struct archive_entry *e;
	char key[1024], first[1024] = "";
	const char *ext;
	int r = tfs_archive_open_from(in, TFS_ARCHIVE_TAR, &ar);

	*nf = 0;
	if (r)
		return r;
	a = ar->a;
	while ((r = tfs_archive_next(a, shard, &e)) == 1) {
		if (archive_entry_filetype(e) != AE_IFREG ||
		    !split_name(archive_entry_pathname(e), key, sizeof(key), &ext))
			continue;
		if (!first[0])
			snprintf(first, sizeof(first), "%s", key);
		if (strcmp(key, first))
			break;
		if (*nf == TFS_ARCHIVE_MAX_COLS || !tfs_name_valid(ext) ||
		    strlen(ext) >= sizeof(f->ext) || !strcmp(ext, "key"))
			continue;
		memset(&f[*nf], 0, sizeof(f[*nf]));
		snprintf(f[*nf].ext, sizeof(f[*nf].ext), "%s", ext);
		f[*nf].kind = wkind_of(ext);
		(*nf)++;
	}
	/* Damage after the first sample's members is the main pass's to name; bytes that could
	 * not be read are the source's. */
	r = *nf ? 0 : r < 0 && ar->err ? ar->err : r < 0 ? r : -EINVAL;
	tfs_archive_close(ar); /* the source's fetch goes on, for the import's own reading */
	return r;
}

int tfs_import_webdataset(struct tfs_store *s, const char *ds, const char *const *shards,
			  size_t nshards, int strict, const struct tfs_import_opts *o,
			  struct tfs_import_result *res, struct tfs_id *commit_id)
{
	static const char *const descr[] = { [W_IMAGE] = "|u1",
					     [W_CLS] = "<i8",
					     [W_TEXT] = "|u1",
					     [W_NPY] = NULL,
					     [W_BYTES] = "|u1" };
	struct wfield f[TFS_ARCHIVE_MAX_COLS];
	struct tfs_manifest m = { 0 };
	struct tfs_rowcol *keyw = NULL;
	struct tfs_dtype u1;
	size_t nf = 0, keycol = 0;
	struct tfs_workpool *pool = NULL;
	struct tfs_pipeline *pipe = NULL;
	struct wsample *cur = NULL;	/* the sample being read */
	struct tfs_source *next = NULL; /* the next shard, its fetch begun */
	int next_rc = 0;		/* its opening's error (logged) */
	struct wadder adder = { NULL, strict, res };
	struct extras extra = { 0 };
	char err[128], key[1024] = "";
	struct tfs_txn t;
	int big, rc;

	memset(res, 0, sizeof(*res));
	memset(f, 0, sizeof(f));
	tfs_dtype_parse("|u1", &u1, &big, err, sizeof(err));
	rc = tfs_txn_begin(&t, s, ds, o);
	/* The first shard is opened once: its fields are read from its start, and the import
	 * reads it again from the same fetch. */
	if (!rc && tfs_source_open(shards[0], TFS_SOURCE_ONCE, &next))
		rc = -EINVAL; /* logged, naming the shard */
	if (!rc && (rc = first_fields(next, shards[0], f, &nf)) == -EINVAL)
		tfs_err("%s: no sample (files named KEY.EXT) in it", shards[0]);
	if (!rc)
		rc = tfs_manifest_copy_extra(&t.old, 4 * (nf + 1), &m);
	/* .npy fields: their dtype and rank from the first sample's array. */
	for (size_t i = 0; !rc && i < nf; i++) {
		enum tfs_col_kind kind = f[i].kind == W_IMAGE || f[i].kind == W_NPY ? TFS_COL_RAGGED
					 : f[i].kind == W_CLS			    ? TFS_COL_FIXED
					 : f[i].kind == W_TEXT			    ? TFS_COL_TEXT
										    : TFS_COL_BYTES;
		struct tfs_dtype dt;

		if (f[i].kind == W_NPY) {
			struct tfs_archive *ar;
			struct archive_entry *e;
			struct tfs_buf b = { 0 };
			struct tfs_npy_info info;
			const char *ext;

			rc = tfs_archive_open_from(next, TFS_ARCHIVE_TAR, &ar);
			if (!rc)
				rc = -ENOENT;
			while (rc == -ENOENT && tfs_archive_next(ar->a, shards[0], &e) == 1)
				if (split_name(archive_entry_pathname(e), key, sizeof(key), &ext) &&
				    !strcmp(ext, f[i].ext))
					rc = tfs_archive_read_member(ar->a, shards[0], &b) ? -EIO
					     : npy_in(&b, shards[0], &info)		   ? -EINVAL
											   : 0;
			/* Not the shard's damage: its bytes could not be read. */
			if (ar && ar->err)
				rc = ar->err;
			tfs_archive_close(ar);
			tfs_buf_free(&b);
			if (rc)
				break;
			f[i].dt = info.dtype;
			f[i].ndim = info.ndim;
			dt = info.dtype;
		} else {
			tfs_dtype_parse(descr[f[i].kind], &dt, &big, err, sizeof(err));
		}
		rc = tfs_import_column(&m, f[i].ext, kind, &dt,
				       f[i].kind == W_IMAGE ? 3
				       : f[i].kind == W_NPY ? f[i].ndim
							    : 0,
				       NULL, o, shards[0], &f[i].col);
	}
	if (!rc)
		rc = tfs_import_column(&m, "key", TFS_COL_TEXT, &u1, 0, NULL, o, shards[0],
				       &keycol);
	for (size_t i = 0; !rc && i < nf; i++)
		rc = tfs_rowcol_begin(s, ds, &m, f[i].col, &f[i].w);
	if (!rc)
		rc = tfs_rowcol_begin(s, ds, &m, keycol, &keyw);
	adder.keyw = keyw;
	if (!rc)
		rc = tfs_import_pool(o, &pool);
	for (size_t i = 0; !rc && i < nf; i++)
		tfs_rowcol_use_pool(f[i].w, pool);
	if (!rc) {
		tfs_rowcol_use_pool(keyw, pool);
		/* 4 samples a thread ahead, as images without --size: the importer's thread,
		 * running a decode itself while it waits, leaves the workers that many to go on
		 * with. */
		rc = tfs_pipeline_create(pool, sizeof(struct wsample),
					 4 * tfs_workpool_threads(pool) + 4, &sample_ops, &adder,
					 &pipe);
	}
	/* Members of one sample follow each other: a new key ends the sample before it, which
	 * goes to the pool to be decoded while the next one is read. */
	for (size_t sh = 0; !rc && sh < nshards; sh++) {
		struct tfs_source *in = next;
		struct tfs_archive *ar;
		struct archive *a;
		struct archive_entry *e;
		char last[1024] = ""; /* the shard's sample before cur */
		const char *ext;
		int r = 0, cut = 0; /* cut: a member's data is cut short, so cur's sample is lost */

		next = NULL;
		if (next_rc || (!in && tfs_source_open(shards[sh], TFS_SOURCE_ONCE, &in))) {
			rc = -EINVAL; /* logged, naming the shard */
			break;
		}
		/* The next shard's fetch begins now, beside this one's import, so that the link is
		 * not idle between them (a local shard has nothing to fetch). */
		if (sh + 1 < nshards && tfs_source_is_url(shards[sh + 1]))
			next_rc = tfs_source_open(shards[sh + 1], TFS_SOURCE_ONCE, &next);
		rc = tfs_archive_open_from(in, TFS_ARCHIVE_TAR, &ar);
		if (rc) {
			tfs_source_close(in);
			break;
		}
		a = ar->a;
		ar->once = 1; /* the shard's last reading: its room is given back as read */
		while (!rc && (r = tfs_archive_next(a, shards[sh], &e)) == 1) {
			size_t i = 0;

			if (archive_entry_filetype(e) != AE_IFREG ||
			    !split_name(archive_entry_pathname(e), key, sizeof(key), &ext))
				continue;
			if (!cur || strcmp(key, cur->key)) {
				if (cur)
					tfs_pipeline_submit(pipe);
				snprintf(last, sizeof(last), "%s", cur ? cur->key : "");
				cur = sample_start(pipe, f, nf, key, &rc);
				if (!cur)
					break;
			}
			while (i < nf && strcmp(f[i].ext, ext))
				i++;
			if (i == nf && strict) {
				tfs_err("%s: sample %s: field '%s' is not a field of the first "
					"sample (--strict)",
					shards[sh], key, ext);
				rc = -EINVAL;
			} else if (i == nf) {
				extra_seen(&extra, ext, key);
			} else {
				rc = tfs_archive_read_member(a, shards[sh], &cur->v[i].val);
				cur->v[i].have = 1;
				tfs_progress_add(o->progress, cur->v[i].val.len, 0);
				if (rc == -EIO) {
					r = rc;
					rc = 0;
					cut = 1;
					break;
				}
			}
		}
		if (!rc && !r && !tar_ends(ar, shards[sh]))
			r = -EIO;
		if (!rc && r < 0 && ar->err)
			rc = ar->err; /* not the shard's damage: its bytes could not be read */
		if (!rc)
			rc = tfs_source_verify(in);
		tfs_archive_close(ar);
		tfs_source_close(in);
		/* Cut between members, cur's sample is whole if it has every field (sample_ready
		 * checks); cut inside one, it is lost with the rest (its item is made again). */
		if (!rc && r < 0)
			rc = damaged_tail(shards[sh],
					  cut	? last
					  : cur ? cur->key
						: "",
					  strict, res);
		if (!rc && r < 0 && cut)
			cur = NULL;
	}
	tfs_source_close(next); /* left by a failed shard: its fetch is cancelled */
	if (!rc && cur)
		tfs_pipeline_submit(pipe);
	if (!rc)
		rc = tfs_pipeline_drain(pipe);
	tfs_pipeline_free(pipe);
	if (pool)
		res->busy_peak = tfs_workpool_busy_peak(pool);
	for (size_t i = 0; !rc && i < nf; i++)
		rc = tfs_rowcol_finish(f[i].w);
	if (!rc)
		rc = tfs_rowcol_finish(keyw);
	if (!rc)
		extras_report(&extra);
	if (!rc && !res->rows) {
		tfs_err("no whole sample in the shards; nothing to commit");
		rc = -EINVAL;
	}
	if (!rc) {
		m.rows = t.old.rows + res->rows;
		rc = tfs_import_same_rows(&m, m.rows, "the shards");
	}
	if (!rc)
		rc = tfs_txn_commit(&t, &m, o->message, commit_id);
	for (size_t i = 0; i < nf; i++)
		tfs_rowcol_free(f[i].w);
	tfs_rowcol_free(keyw);
	tfs_workpool_destroy(pool);
	tfs_manifest_free(&m);
	tfs_txn_end(&t);
	return rc;
}
