/* SPDX-License-Identifier: MIT */
/* session: parts recorded under <ds>/sessions/<session>/part-NNNNNNNN, a small text each naming
 * the part's manifest; the commit of them all; the sweep gc runs over them. */
#include "session.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "import.h"
#include "object.h"
#include "rowcol.h"
#include "util.h"

#define PART_MAGIC "tensorfs-part 1\n"

/* A session name: 1 to 100 of [A-Za-z0-9._-], not starting with '.'. */
static int session_dir(const char *ds, const char *session, char *out, size_t cap)
{
	size_t n = strlen(session);

	if (!n || n > 100 || session[0] == '.' ||
	    strspn(session, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") !=
		    n) {
		tfs_err("session '%s': a name is 1 to 100 letters, digits, '.', '_' or '-', not "
			"starting with '.'",
			session);
		return -EINVAL;
	}
	snprintf(out, cap, "%s/sessions/%s", ds, session);
	return 0;
}

int tfs_session_part_put(struct tfs_store *s, const char *ds, const char *session, uint32_t part,
			 const struct tfs_manifest *m, struct tfs_id *manifest_id)
{
	char dir[TFS_KEY_MAX], key[TFS_KEY_MAX + 16], hex[TFS_ID_HEX];
	struct tfs_buf mb = { 0 }, rec = { 0 };
	int rc = session_dir(ds, session, dir, sizeof(dir));

	if (rc)
		return rc;
	if (part >= TFS_SESSION_MAX_PARTS) {
		tfs_err("part %" PRIu32 ": parts are numbered 0 to %u", part,
			TFS_SESSION_MAX_PARTS - 1);
		return -EINVAL;
	}
	rc = tfs_manifest_serialize(m, &mb);
	if (!rc)
		rc = tfs_object_put(s, ds, TFS_OBJ_MANIFEST, TFS_CODEC_ZSTD, 3, mb.data, mb.len,
				    manifest_id);
	if (!rc) {
		tfs_id_hex(manifest_id, hex);
		rc = tfs_buf_printf(&rec, PART_MAGIC "manifest %s\nrows %" PRIu64 "\n", hex,
				    m->rows);
	}
	snprintf(key, sizeof(key), "%s/part-%08" PRIu32, dir, part);
	if (!rc)
		rc = tfs_store_put(s, key, rec.data, rec.len);
	if (rc)
		tfs_err("%s/%s: cannot record the part: %s", s->url, key, strerror(-rc));
	tfs_buf_free(&mb);
	tfs_buf_free(&rec);
	return rc;
}

/* --- the parts of a session ----------------------------------------------------------------- */

struct part {
	uint32_t n;
	struct tfs_id manifest;
	uint64_t rows;
	int64_t mtime;
};

struct parts {
	struct tfs_store *s;
	char dir[TFS_KEY_MAX];
	struct part *v;
	size_t n, cap;
	int err;
};

static int parse_record(const char *text, size_t len, struct part *p)
{
	char hex[TFS_ID_HEX + 1];

	if (len < strlen(PART_MAGIC) || memcmp(text, PART_MAGIC, strlen(PART_MAGIC)) ||
	    sscanf(text + strlen(PART_MAGIC), "manifest %64s\nrows %" SCNu64, hex, &p->rows) != 2)
		return -EINVAL;
	return tfs_id_parse(hex, &p->manifest) ? -EINVAL : 0;
}

static int collect_part(void *arg, const char *name, int is_dir)
{
	struct parts *ps = arg;
	char key[TFS_KEY_MAX + 16], *end;
	struct tfs_buf rec = { 0 };
	struct part p = { 0 };
	uint64_t size;
	unsigned long n;
	int rc;

	if (is_dir || strncmp(name, "part-", 5) || strlen(name) != 13)
		return 0;
	n = strtoul(name + 5, &end, 10);
	if (*end || n >= TFS_SESSION_MAX_PARTS)
		return 0;
	p.n = (uint32_t)n;
	snprintf(key, sizeof(key), "%s/%s", ps->dir, name);
	rc = tfs_store_get(ps->s, key, &rec);
	if (!rc)
		rc = tfs_buf_append(&rec, "", 1);
	if (!rc)
		rc = parse_record((char *)rec.data, rec.len - 1, &p);
	if (!rc)
		rc = tfs_store_stat(ps->s, key, &size, &p.mtime);
	tfs_buf_free(&rec);
	if (rc == -ENOENT)
		return 0; /* aborted meanwhile */
	if (rc) {
		tfs_err("%s/%s: %s", ps->s->url, key,
			rc == -EINVAL ? "not a part record" : strerror(-rc));
		ps->err = rc;
		return 0;
	}
	if (TFS_GROW(ps->v, &ps->cap, ps->n + 1))
		return -ENOMEM;
	ps->v[ps->n++] = p;
	return 0;
}

static int by_number(const void *a, const void *b)
{
	const struct part *x = a, *y = b;

	return x->n < y->n ? -1 : x->n > y->n;
}

/* The parts of a session, by number: -ENOENT for a session with none. */
static int load_parts(struct tfs_store *s, const char *ds, const char *session, struct parts *ps)
{
	int rc;

	memset(ps, 0, sizeof(*ps));
	ps->s = s;
	rc = session_dir(ds, session, ps->dir, sizeof(ps->dir));
	if (!rc)
		rc = tfs_store_list(s, ps->dir, collect_part, ps);
	if (!rc)
		rc = ps->err;
	if (!rc && !ps->n)
		rc = -ENOENT;
	if (!rc)
		qsort(ps->v, ps->n, sizeof(*ps->v), by_number);
	return rc;
}

struct list_ctx {
	struct tfs_store *s;
	const char *ds;
	tfs_session_fn fn;
	void *arg;
};

static int list_one(void *arg, const char *name, int is_dir)
{
	struct list_ctx *l = arg;
	struct tfs_session_info info = { 0 };
	struct parts ps;
	int rc;

	if (!is_dir || strlen(name) >= sizeof(info.name))
		return 0;
	rc = load_parts(l->s, l->ds, name, &ps);
	if (rc) {
		free(ps.v);
		return rc == -ENOENT || rc == -EINVAL ? 0 : rc;
	}
	snprintf(info.name, sizeof(info.name), "%s", name);
	info.parts = (uint32_t)ps.n;
	info.last = ps.v[ps.n - 1].n;
	for (size_t i = 0; i < ps.n; i++) {
		info.rows += ps.v[i].rows;
		if (ps.v[i].mtime > info.newest)
			info.newest = ps.v[i].mtime;
	}
	free(ps.v);
	return l->fn(l->arg, &info);
}

int tfs_session_list(struct tfs_store *s, const char *ds, tfs_session_fn fn, void *arg)
{
	struct list_ctx l = { s, ds, fn, arg };
	char dir[TFS_KEY_MAX];
	int rc = tfs_dataset_check(s, ds);

	if (rc)
		return rc;
	snprintf(dir, sizeof(dir), "%s/sessions", ds);
	rc = tfs_store_list(s, dir, list_one, &l);
	return rc == -ENOENT ? 0 : rc;
}

static int remove_parts(struct tfs_store *s, const struct parts *ps)
{
	int err = 0;

	for (size_t i = 0; i < ps->n; i++) {
		char key[TFS_KEY_MAX + 16];
		int rc;

		snprintf(key, sizeof(key), "%s/part-%08" PRIu32, ps->dir, ps->v[i].n);
		rc = tfs_store_del(s, key);
		if (rc && rc != -ENOENT) {
			tfs_err("%s/%s: cannot delete: %s", s->url, key, strerror(-rc));
			err = rc;
		}
	}
	return err;
}

int tfs_session_abort(struct tfs_store *s, const char *ds, const char *session)
{
	struct parts ps;
	int rc = load_parts(s, ds, session, &ps);

	if (rc == -ENOENT)
		tfs_err("%s/%s: no session '%s'", s->url, ds, session);
	if (!rc)
		rc = remove_parts(s, &ps);
	free(ps.v);
	return rc;
}

/* --- concatenation -------------------------------------------------------------------------- */

/* Columns a and b hold rows of the same kind, dtype and shape. */
static int same_columns(const struct tfs_manifest *a, const struct tfs_manifest *b,
			const char *what)
{
	size_t na = 0, nb = 0;

	for (size_t i = 0; i < b->ncols; i++)
		nb += b->cols[i].part == TFS_PART_NONE;
	for (size_t i = 0; i < a->ncols; i++) {
		const struct tfs_column *x = &a->cols[i], *y;

		if (x->part != TFS_PART_NONE)
			continue;
		na++;
		y = tfs_manifest_column(b, x->name);
		if (!y) {
			tfs_err("%s has no column %s", what, x->name);
			return -EINVAL;
		}
		if (x->kind != y->kind || strcmp(x->dtype.descr, y->dtype.descr) ||
		    x->ndim != y->ndim ||
		    (x->kind == TFS_COL_FIXED &&
		     memcmp(x->shape, y->shape, x->ndim * sizeof(*x->shape)))) {
			tfs_err("%s: column %s holds %s rows of %s, rank %u; expected %s rows of "
				"%s, "
				"rank %u, as the other parts",
				what, x->name, tfs_col_kind_name(y->kind), y->dtype.descr, y->ndim,
				tfs_col_kind_name(x->kind), x->dtype.descr, x->ndim);
			return -EINVAL;
		}
	}
	if (na != nb) {
		tfs_err("%s has %zu columns; the other parts have %zu", what, nb, na);
		return -EINVAL;
	}
	return 0;
}

/* List x's chunks (rows_per_chunk 0) if they are uniform. */
static int make_listed(struct tfs_column *x)
{
	uint64_t *end;

	if (!x->rows_per_chunk)
		return 0;
	end = malloc((x->nchunks ? x->nchunks : 1) * sizeof(*end));
	if (!end)
		return -ENOMEM;
	for (size_t k = 0; k < x->nchunks; k++)
		end[k] = tfs_column_chunk_first(x, k) + tfs_column_chunk_rows(x, k);
	free(x->chunk_end);
	x->chunk_end = end;
	x->rows_per_chunk = 0;
	return 0;
}

/* y's chunks after x's rows. The chunks stay uniform where they can (x's end on a full chunk
 * and y's are as large); otherwise they are listed. */
static int concat_chunks(struct tfs_column *x, const struct tfs_column *y)
{
	const size_t n = x->nchunks + y->nchunks;
	struct tfs_chunk_ref *chunks;
	int rc;

	if (!y->nchunks)
		return 0;
	if (!x->nchunks)
		x->rows_per_chunk = y->rows_per_chunk;
	else if (!x->rows_per_chunk || x->rows_per_chunk != y->rows_per_chunk ||
		 x->rows % x->rows_per_chunk) {
		rc = make_listed(x);
		if (rc)
			return rc;
	}
	chunks = realloc(x->chunks, n * sizeof(*chunks));
	if (!chunks)
		return -ENOMEM;
	x->chunks = chunks;
	memcpy(chunks + x->nchunks, y->chunks, y->nchunks * sizeof(*chunks));
	if (!x->rows_per_chunk) {
		uint64_t *end = realloc(x->chunk_end, n * sizeof(*end));

		if (!end)
			return -ENOMEM;
		x->chunk_end = end;
		for (size_t k = 0; k < y->nchunks; k++)
			end[x->nchunks + k] = x->rows + tfs_column_chunk_first(y, k) +
					      tfs_column_chunk_rows(y, k);
	}
	x->nchunks = n;
	x->rows += y->rows;
	return 0;
}

/* y's offsets after x's, each plus base (the bytes of x's data): written as new chunks. */
static int append_offsets(struct tfs_store *s, const char *ds, struct tfs_manifest *m, size_t xo,
			  const struct tfs_column *yo, uint64_t base)
{
	/* y's first offset (0) is x's last unless x has none yet. */
	const int skip_first = m->cols[xo].rows > 0;
	struct tfs_rowcol *w = NULL;
	int rc = tfs_rowcol_begin(s, ds, m, xo, &w);

	for (size_t k = 0; !rc && k < yo->nchunks; k++) {
		const uint64_t first = tfs_column_chunk_first(yo, k);
		uint8_t *raw = NULL;
		size_t len = 0;

		rc = tfs_object_get(s, ds, &yo->chunks[k].id, TFS_OBJ_CHUNK, &raw, &len);
		if (!rc && len != tfs_column_chunk_rows(yo, k) * sizeof(uint64_t))
			rc = -EIO;
		for (size_t j = !first && skip_first; !rc && j < len / sizeof(uint64_t); j++) {
			uint64_t v; /* little-endian, as the host */

			memcpy(&v, raw + j * sizeof(v), sizeof(v));
			v += base;
			rc = tfs_rowcol_add(w, &v, sizeof(v), NULL);
		}
		free(raw);
	}
	if (!rc)
		rc = tfs_rowcol_finish(w);
	tfs_rowcol_free(w);
	return rc;
}

/* Part p's rows after m's. */
static int append_part(struct tfs_store *s, const char *ds, struct tfs_manifest *m,
		       const struct tfs_manifest *p)
{
	int rc = 0;

	for (size_t i = 0; !rc && i < p->ncols; i++) {
		const struct tfs_column *y = &p->cols[i];
		struct tfs_column *x;
		char err[256];

		if (y->part != TFS_PART_NONE)
			continue;
		x = (struct tfs_column *)tfs_manifest_column(m, y->name);
		if (x->kind == TFS_COL_FIXED) {
			rc = tfs_import_classes(x, y->classes, y->nclasses, ds);
			if (!rc)
				rc = concat_chunks(x, y);
			continue;
		}
		if (y->has_eos && tfs_column_eos_merge(x, y->eos, err, sizeof(err))) {
			tfs_err("%s: %s (a part's)", ds, err);
			return -EINVAL;
		}
		rc = append_offsets(s, ds, m, x->offsets, &p->cols[y->offsets],
				    m->cols[x->data].rows);
		if (!rc)
			rc = concat_chunks(&m->cols[x->data], &p->cols[y->data]);
		if (!rc && x->kind == TFS_COL_RAGGED)
			rc = concat_chunks(&m->cols[x->shapes], &p->cols[y->shapes]);
		x->rows += y->rows;
		x->text_bytes += y->text_bytes;
	}
	m->rows += p->rows;
	return rc;
}

/* --- fixed parts of ragged columns --------------------------------------------------------- */

/* Write values into the fixed part m->cols[i], a row of row_len bytes at a time. */
static int fill_part(struct tfs_store *s, const char *ds, struct tfs_manifest *m, size_t i,
		     uint64_t rows, uint64_t row_bytes, const uint64_t *shape, size_t row_len)
{
	struct tfs_rowcol *w = NULL;
	int rc = tfs_rowcol_begin(s, ds, m, i, &w);

	for (uint64_t r = 0; !rc && r < rows; r++) {
		const uint64_t off = r * row_bytes;

		rc = tfs_rowcol_add(w, shape ? (const void *)shape : &off, row_len, NULL);
	}
	if (!rc)
		rc = tfs_rowcol_finish(w);
	tfs_rowcol_free(w);
	return rc;
}

/* Make the fixed column m->cols[i] ragged, as an import into a ragged column would have: its
 * chunks become the data part's as they are; offsets and shapes are written. */
static int to_ragged(struct tfs_store *s, const char *ds, struct tfs_manifest *m, size_t i)
{
	const struct tfs_column *x = &m->cols[i];
	struct tfs_manifest t = { 0 };
	struct tfs_column *cols, *data;
	uint64_t shape[TFS_MAX_DIMS];
	int rc;

	if (!(t.cols = calloc(4, sizeof(*t.cols))))
		return -ENOMEM;
	rc = tfs_rowcol_new(&t, x->name, TFS_COL_RAGGED, &x->dtype, x->ndim, NULL, x->chunk_bytes,
			    x->codec, x->level);
	for (unsigned d = 0; d < x->ndim; d++)
		shape[d] = x->shape[d];
	/* offsets: 0, row_bytes, ... rows x row_bytes; shapes: the one shape, a row each. */
	if (!rc)
		rc = fill_part(s, ds, &t, t.cols[0].offsets, x->rows + 1, x->row_bytes, NULL,
			       sizeof(uint64_t));
	if (!rc)
		rc = fill_part(s, ds, &t, t.cols[0].shapes, x->rows, 0, shape,
			       x->ndim * sizeof(*shape));
	data = &t.cols[t.cols[0].data];
	if (!rc && x->nchunks) {
		data->chunks = malloc(x->nchunks * sizeof(*data->chunks));
		data->chunk_end = malloc(x->nchunks * sizeof(*data->chunk_end));
		if (!data->chunks || !data->chunk_end)
			rc = -ENOMEM;
		for (size_t k = 0; !rc && k < x->nchunks; k++) {
			data->chunks[k] = x->chunks[k];
			data->chunk_end[k] =
				(tfs_column_chunk_first(x, k) + tfs_column_chunk_rows(x, k)) *
				x->row_bytes;
		}
		if (!rc) {
			data->nchunks = x->nchunks;
			data->rows = x->rows * x->row_bytes;
		}
	}
	t.cols[0].rows = x->rows;
	if (!rc && !(cols = calloc(m->ncols + t.ncols - 1, sizeof(*cols))))
		rc = -ENOMEM;
	if (rc) {
		tfs_manifest_free(&t);
		return rc;
	}
	/* Splice: m's columns before i, the four, the rest; then the headers' part indices. */
	memcpy(cols, m->cols, i * sizeof(*cols));
	memcpy(cols + i, t.cols, t.ncols * sizeof(*cols));
	memcpy(cols + i + t.ncols, m->cols + i + 1, (m->ncols - i - 1) * sizeof(*cols));
	tfs_column_free(&m->cols[i]);
	free(m->cols);
	free(t.cols);
	m->cols = cols;
	m->ncols += t.ncols - 1;
	for (size_t h = 0; h < m->ncols; h++)
		if (cols[h].part == TFS_PART_NONE && cols[h].kind != TFS_COL_FIXED) {
			cols[h].data = h + 1;
			cols[h].offsets = h + 2;
			cols[h].shapes = h + 3;
		}
	return 0;
}

/* Is column `name` ragged, with elements of dt and this rank, in m? */
static int ragged_in(const struct tfs_manifest *m, const struct tfs_column *y)
{
	const struct tfs_column *c = tfs_manifest_column(m, y->name);

	return c && c->kind == TFS_COL_RAGGED && c->ndim == y->ndim &&
	       !strcmp(c->dtype.descr, y->dtype.descr);
}

/* A part whose rows of a column all had one shape made it fixed where the others are ragged:
 * make it ragged too (one machine importing them all would have appended it to the ragged one). */
static int unify_kinds(struct tfs_store *s, const char *ds, struct tfs_manifest *pm, size_t n,
		       const struct tfs_manifest *branch)
{
	int rc = 0;

	for (size_t i = 0; !rc && i < n; i++)
		for (size_t c = 0; !rc && c < pm[i].ncols; c++) {
			const struct tfs_column *y = &pm[i].cols[c];
			int ragged = y->kind == TFS_COL_FIXED && y->part == TFS_PART_NONE &&
				     y->ndim > 0 && ragged_in(branch, y);

			for (size_t j = 0; !ragged && y->kind == TFS_COL_FIXED &&
					   y->part == TFS_PART_NONE && y->ndim > 0 && j < n;
			     j++)
				ragged = ragged_in(&pm[j], y);
			if (ragged)
				rc = to_ragged(s, ds, &pm[i], c);
		}
	return rc;
}

/* --- the commit ----------------------------------------------------------------------------- */

/* Every part there must be: 0 .. nparts - 1 (or .. the highest recorded), none beyond. */
static int parts_complete(const struct parts *ps, uint32_t nparts, const char *session)
{
	const uint32_t want = nparts ? nparts : ps->v[ps->n - 1].n + 1;

	for (size_t i = 0; i < ps->n; i++)
		if (ps->v[i].n != i) {
			tfs_err("session %s: part %zu is missing (%zu parts recorded, the highest "
				"%" PRIu32 ")",
				session, i, ps->n, ps->v[ps->n - 1].n);
			return -EINVAL;
		}
	if (ps->n != want) {
		tfs_err("session %s: %zu parts recorded, expected %" PRIu32, session, ps->n, want);
		return -EINVAL;
	}
	return 0;
}

/* One attempt: the parts onto the branch's head, -EAGAIN if another writer moved it. */
static int commit_once(struct tfs_store *s, const char *ds, const char *session,
		       struct tfs_manifest *pm, size_t n, const struct tfs_import_opts *o,
		       struct tfs_id *commit_id, uint64_t *rows)
{
	struct tfs_manifest m = { 0 };
	struct tfs_txn t;
	char what[200];
	size_t first = 0;
	int rc;

	rc = tfs_txn_begin(&t, s, ds, o);
	if (!rc)
		rc = unify_kinds(s, ds, pm, n, &t.old);
	if (rc) {
		tfs_txn_end(&t);
		return rc;
	}
	/* A branch with no columns takes the first part's as they are. */
	while (first < n && !pm[first].ncols)
		first++;
	if (!t.old.ncols && first < n) {
		rc = tfs_manifest_copy_extra(&pm[first], 0, &m);
		first++;
	} else {
		rc = tfs_manifest_copy_extra(&t.old, 0, &m);
		first = 0;
	}
	for (size_t i = first; !rc && i < n; i++) {
		if (!pm[i].ncols && !pm[i].rows)
			continue;
		snprintf(what, sizeof(what), "session %s part %zu", session, i);
		rc = same_columns(&m, &pm[i], what);
		if (!rc)
			rc = append_part(s, ds, &m, &pm[i]);
	}
	if (!rc)
		rc = tfs_import_same_rows(&m, m.rows, "the session");
	if (!rc)
		rc = tfs_txn_commit(&t, &m, o->message, commit_id);
	if (!rc)
		*rows = m.rows;
	tfs_manifest_free(&m);
	tfs_txn_end(&t);
	return rc;
}

int tfs_session_commit(struct tfs_store *s, const char *ds, const char *session, uint32_t nparts,
		       const char *branch, const char *message, struct tfs_id *commit_id,
		       uint64_t *rows)
{
	const struct tfs_import_opts o = { .branch = branch, .message = message };
	struct tfs_manifest *pm = NULL;
	struct parts ps;
	int rc = load_parts(s, ds, session, &ps);

	if (rc == -ENOENT)
		tfs_err("%s/%s: no session '%s' (no part recorded, or committed already)", s->url,
			ds, session);
	if (!rc)
		rc = parts_complete(&ps, nparts, session);
	if (!rc && !(pm = calloc(ps.n, sizeof(*pm))))
		rc = -ENOMEM;
	for (size_t i = 0; !rc && i < ps.n; i++) {
		rc = tfs_manifest_load(s, ds, &ps.v[i].manifest, &pm[i]);
		if (rc)
			tfs_err("session %s: cannot read the manifest of part %zu: %s", session, i,
				strerror(-rc));
	}
	/* The commit writes nothing a retry cannot write again: retry a moved branch. */
	for (int attempt = 0; !rc; attempt++) {
		rc = commit_once(s, ds, session, pm, ps.n, &o, commit_id, rows);
		if (rc != -EAGAIN || attempt == 4)
			break;
		rc = 0;
	}
	if (!rc && remove_parts(s, &ps))
		tfs_warn("session %s: committed; its part records stay until gc", session);
	for (size_t i = 0; pm && i < ps.n; i++)
		tfs_manifest_free(&pm[i]);
	free(pm);
	free(ps.v);
	return rc;
}

/* --- gc --------------------------------------------------------------------------------------- */

struct sweep_ctx {
	struct tfs_store *s;
	const char *ds;
	int64_t cutoff;
	int dry_run;
	int (*fn)(void *arg, const struct tfs_id *manifest);
	void *arg;
	uint64_t *removed;
};

static int sweep_one(void *arg, const char *name, int is_dir)
{
	struct sweep_ctx *g = arg;
	struct parts ps;
	int64_t newest = 0;
	int rc;

	if (!is_dir)
		return 0;
	rc = load_parts(g->s, g->ds, name, &ps);
	if (rc) {
		free(ps.v);
		return rc == -ENOENT || rc == -EINVAL ? 0 : rc;
	}
	for (size_t i = 0; i < ps.n; i++)
		newest = ps.v[i].mtime > newest ? ps.v[i].mtime : newest;
	if (newest > g->cutoff) {
		for (size_t i = 0; !rc && i < ps.n; i++)
			rc = g->fn(g->arg, &ps.v[i].manifest);
	} else {
		if (!g->dry_run)
			rc = remove_parts(g->s, &ps);
		if (!rc)
			(*g->removed)++;
	}
	free(ps.v);
	return rc;
}

int tfs_session_sweep(struct tfs_store *s, const char *ds, int64_t cutoff, int dry_run,
		      int (*fn)(void *arg, const struct tfs_id *manifest), void *arg,
		      uint64_t *removed)
{
	struct sweep_ctx g = { s, ds, cutoff, dry_run, fn, arg, removed };
	char dir[TFS_KEY_MAX];
	int rc;

	snprintf(dir, sizeof(dir), "%s/sessions", ds);
	rc = tfs_store_list(s, dir, sweep_one, &g);
	return rc == -ENOENT ? 0 : rc;
}
