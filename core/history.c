/* SPDX-License-Identifier: MIT */
/* history: what a dataset's commits say and hold: log, diff, reachability, verify and gc. */
#include "history.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "session.h"

int tfs_log_text(struct tfs_store *s, const char *ds, const struct tfs_id *head, size_t max,
		 struct tfs_buf *out)
{
	struct tfs_id id = *head;
	int rc = 0;

	for (size_t n = 0; !max || n < max; n++) {
		struct tfs_commit c;
		char hex[TFS_ID_HEX], when[40];

		rc = tfs_commit_load(s, ds, &id, &c);
		if (rc)
			break;
		tfs_id_hex(&id, hex);
		tfs_format_utc(c.time, "%Y-%m-%d %H:%M:%S UTC", when, sizeof(when));
		rc = tfs_buf_printf(out, "commit %s\n", hex);
		for (size_t i = 0; !rc && i < c.nparents; i++) {
			tfs_id_hex(&c.parents[i], hex);
			rc = tfs_buf_printf(out, "parent %s\n", hex);
		}
		if (!rc)
			rc = tfs_buf_printf(out, "date   %s\nrows   %" PRIu64 "\n\n", when, c.rows);
		/* Indent every line of the message, as git does. */
		for (const char *p = c.message; !rc && *p;) {
			const char *nl = strchr(p, '\n');
			int len = nl ? (int)(nl - p) : (int)strlen(p);

			rc = tfs_buf_printf(out, "    %.*s\n", len, p);
			p += len + (nl ? 1 : 0);
		}
		if (!rc)
			rc = tfs_buf_printf(out, "\n");
		if (c.nparents == 0) {
			tfs_commit_free(&c);
			break;
		}
		id = c.parents[0];
		tfs_commit_free(&c);
		if (rc)
			break;
	}
	return rc;
}

static int same_layout(const struct tfs_column *a, const struct tfs_column *b)
{
	if (a->kind != b->kind || strcmp(a->dtype.descr, b->dtype.descr) || a->ndim != b->ndim)
		return 0;
	if (a->kind != TFS_COL_FIXED)
		return 1; /* ragged rows have no shape to compare */
	for (unsigned d = 0; d < a->ndim; d++)
		if (a->shape[d] != b->shape[d])
			return 0;
	return 1;
}

static int describe_column(struct tfs_buf *out, char sign, const struct tfs_column *c)
{
	char shape[TFS_MAX_DIMS * 22];

	if (c->kind == TFS_COL_RAGGED)
		snprintf(shape, sizeof(shape), "ragged, rank %u", c->ndim);
	else if (c->kind != TFS_COL_FIXED)
		snprintf(shape, sizeof(shape), "%s", tfs_col_kind_name(c->kind));
	else
		tfs_shape_str(c->shape, c->ndim, shape, sizeof(shape));
	return tfs_buf_printf(out, "%c column %s (%s, %s, %" PRIu64 " rows)\n", sign, c->name,
			      c->dtype.descr, shape, c->rows);
}

/* Do the first `rows` rows of chunk k agree in both columns? Used where an append rewrote a
 * partial tail chunk: its id changed although its old rows may not have. */
static int prefix_equal(struct tfs_store *s, const char *ds, const struct tfs_column *a,
			const struct tfs_column *b, size_t k, uint64_t rows)
{
	const struct tfs_column *cols[2] = { a, b };
	uint8_t *raw[2] = { NULL, NULL };
	int equal = 0;

	for (int i = 0; i < 2; i++) {
		const struct tfs_column *c = cols[i];
		uint64_t nr = tfs_column_chunk_rows(c, k);
		struct tfs_buf obj = { 0 };
		char key[TFS_KEY_MAX];

		raw[i] = malloc(nr * c->row_bytes + 1);
		tfs_object_key(ds, &c->chunks[k].id, key);
		if (!raw[i] || tfs_store_get_object(s, key, 0, &obj) ||
		    tfs_object_decode(obj.data, obj.len, TFS_OBJ_CHUNK, raw[i],
				      nr * c->row_bytes)) {
			tfs_buf_free(&obj);
			goto out;
		}
		tfs_buf_free(&obj);
	}
	equal = !memcmp(raw[0], raw[1], rows * a->row_bytes);
out:
	free(raw[0]);
	free(raw[1]);
	return equal;
}

/* Row ranges whose chunks differ between two columns of the same layout. Chunk k is compared
 * where it starts on the same row in both. */
static int diff_rows(struct tfs_store *s, const char *ds, const struct tfs_column *a,
		     const struct tfs_column *b, struct tfs_buf *out)
{
	const uint64_t common = a->rows < b->rows ? a->rows : b->rows;
	uint64_t start = UINT64_MAX, end = 0;
	int rc = 0;

	for (size_t k = 0; k < a->nchunks && tfs_column_chunk_first(a, k) < common; k++) {
		const uint64_t r0 = tfs_column_chunk_first(a, k), na = tfs_column_chunk_rows(a, k);
		const uint64_t r1 = r0 + na < common ? r0 + na : common;
		const int aligned = k < b->nchunks && tfs_column_chunk_first(b, k) == r0;
		int differ = !aligned || !tfs_id_eq(&a->chunks[k].id, &b->chunks[k].id);

		/* An append rewrote a partial tail chunk: its old rows may be the same. */
		if (differ && aligned && r1 == common && a->rows != b->rows &&
		    na != tfs_column_chunk_rows(b, k))
			differ = !prefix_equal(s, ds, a, b, k, r1 - r0);
		if (differ) {
			if (start == UINT64_MAX)
				start = r0;
			end = r1;
			continue;
		}
		if (start != UINT64_MAX) {
			rc = tfs_buf_printf(out,
					    "~ column %s rows %" PRIu64 "..%" PRIu64 " changed\n",
					    a->name, start, end - 1);
			start = UINT64_MAX;
			if (rc)
				return rc;
		}
	}
	if (start != UINT64_MAX)
		rc = tfs_buf_printf(out, "~ column %s rows %" PRIu64 "..%" PRIu64 " changed\n",
				    a->name, start, end - 1);
	if (!rc && b->rows > a->rows)
		rc = tfs_buf_printf(out, "~ column %s rows %" PRIu64 "..%" PRIu64 " added\n",
				    a->name, a->rows, b->rows - 1);
	else if (!rc && b->rows < a->rows)
		rc = tfs_buf_printf(out, "~ column %s rows %" PRIu64 "..%" PRIu64 " removed\n",
				    a->name, b->rows, a->rows - 1);
	return rc;
}

/* Columns of other kinds than fixed: whether any part's chunks differ (no row ranges yet). */
static int diff_parts(const struct tfs_manifest *ma, const struct tfs_column *a,
		      const struct tfs_manifest *mb, const struct tfs_column *b,
		      struct tfs_buf *out)
{
	const size_t pa[] = { a->data, a->offsets }, pb[] = { b->data, b->offsets };

	for (size_t p = 0; p < 2; p++) {
		const struct tfs_column *x = &ma->cols[pa[p]], *y = &mb->cols[pb[p]];
		int same = x->nchunks == y->nchunks;

		for (size_t k = 0; same && k < x->nchunks; k++)
			same = tfs_id_eq(&x->chunks[k].id, &y->chunks[k].id);
		if (!same)
			return tfs_buf_printf(
				out,
				"~ column %s (%s) changed: %" PRIu64 " rows, now %" PRIu64 "\n",
				a->name, tfs_col_kind_name(a->kind), a->rows, b->rows);
	}
	return 0;
}

int tfs_diff_text(struct tfs_store *s, const char *ds, const struct tfs_manifest *a,
		  const struct tfs_manifest *b, struct tfs_buf *out)
{
	int rc = 0;

	/* Parts are described with their column. */
	for (size_t i = 0; !rc && i < a->ncols; i++)
		if (a->cols[i].part == TFS_PART_NONE && !tfs_manifest_column(b, a->cols[i].name))
			rc = tfs_buf_printf(out, "- column %s\n", a->cols[i].name);
	for (size_t i = 0; !rc && i < b->ncols; i++) {
		const struct tfs_column *cb = &b->cols[i], *ca = tfs_manifest_column(a, cb->name);

		if (cb->part != TFS_PART_NONE)
			continue;
		if (!ca) {
			rc = describe_column(out, '+', cb);
		} else if (!same_layout(ca, cb)) {
			rc = tfs_buf_printf(out, "- column %s\n", ca->name);
			if (!rc)
				rc = describe_column(out, '+', cb);
		} else if (ca->kind != TFS_COL_FIXED) {
			rc = diff_parts(a, ca, b, cb, out);
		} else {
			rc = diff_rows(s, ds, ca, cb, out);
		}
	}
	return rc;
}

struct ref_walk {
	struct tfs_store *s;
	const char *ds;
	enum tfs_ref_kind kind;
	struct tfs_id *heads;
	size_t n;
	int err;
};

static int collect_ref(void *arg, const char *name, int is_dir)
{
	struct ref_walk *w = arg;
	struct tfs_id id, *h;
	int rc;

	if (is_dir || !tfs_name_valid(name))
		return 0;
	rc = tfs_ref_read(w->s, w->ds, w->kind, name, &id);
	if (rc) {
		tfs_err("%s/%s: ref %s %s cannot be read", w->s->url, w->ds,
			w->kind == TFS_REF_TAG ? "tag" : "branch", name);
		w->err = rc;
		return 0;
	}
	h = realloc(w->heads, (w->n + 1) * sizeof(*h));
	if (!h)
		return -ENOMEM;
	w->heads = h;
	h[w->n++] = id;
	return 0;
}

/* The commits every ref points at. */
static int ref_heads(struct tfs_store *s, const char *ds, struct tfs_id **heads, size_t *n)
{
	struct ref_walk w = { .s = s, .ds = ds, .kind = TFS_REF_BRANCH };
	int rc = tfs_ref_list(s, ds, TFS_REF_BRANCH, collect_ref, &w);

	if (!rc) {
		w.kind = TFS_REF_TAG;
		rc = tfs_ref_list(s, ds, TFS_REF_TAG, collect_ref, &w);
	}
	if (!rc)
		rc = w.err;
	if (rc) {
		free(w.heads);
		return rc;
	}
	*heads = w.heads;
	*n = w.n;
	return 0;
}

struct parents_ctx {
	struct tfs_store *s;
	const char *ds;
};

/* A commit's parents as a cache entry: its parent ids, one after another. */
static int load_parents(void *arg, const struct tfs_id *key, uint8_t **data, size_t *len,
			size_t *cap)
{
	const struct parents_ctx *p = arg;
	struct tfs_commit c;
	int rc = tfs_commit_load(p->s, p->ds, key, &c);

	if (rc)
		return rc;
	*len = c.nparents * sizeof(struct tfs_id);
	*data = malloc(*len ? *len : 1);
	if (*data && *len)
		memcpy(*data, c.parents, *len);
	*cap = 0;
	tfs_commit_free(&c);
	return *data ? 0 : -ENOMEM;
}

/* Depth-first over commits from every ref; calls fn on each commit once. Without fn, and with
 * cache, each commit's parents are kept in the cache (a commit never changes): a walk again
 * loads only the commits it has not met. */
typedef int (*commit_fn)(void *arg, const struct tfs_commit *c);

static int walk_commits(struct tfs_store *s, struct tfs_cache *cache, const char *ds,
			struct tfs_idset *seen, commit_fn fn, void *arg)
{
	struct parents_ctx pc = { s, ds };
	struct tfs_id *stack = NULL;
	size_t n = 0, cap = 0;
	int rc = ref_heads(s, ds, &stack, &n);

	if (rc)
		return rc;
	cap = n;
	while (!rc && n) {
		struct tfs_id id = stack[--n];
		struct tfs_cache_entry *e = NULL;
		struct tfs_commit c = { 0 };
		const struct tfs_id *parents;
		size_t np;

		rc = tfs_idset_add(seen, &id);
		if (rc <= 0)
			continue; /* seen already (0) or out of memory (rc < 0 ends the loop) */
		if (cache && !fn) {
			rc = tfs_cache_get(cache, &id, load_parents, &pc, &e);
			parents = rc ? NULL : (const struct tfs_id *)(const void *)e->data;
			np = rc ? 0 : e->len / sizeof(struct tfs_id);
		} else {
			rc = tfs_commit_load(s, ds, &id, &c);
			if (!rc && fn)
				rc = fn(arg, &c);
			parents = c.parents;
			np = c.nparents;
		}
		if (!rc && n + np > cap) {
			struct tfs_id *ns;

			cap = (n + np) * 2;
			ns = realloc(stack, cap * sizeof(*ns));
			if (!ns)
				rc = -ENOMEM;
			else
				stack = ns;
		}
		for (size_t i = 0; !rc && i < np; i++)
			stack[n++] = parents[i];
		if (e)
			tfs_cache_put(cache, e);
		else
			tfs_commit_free(&c);
	}
	free(stack);
	return rc;
}

int tfs_reachable_commits(struct tfs_store *s, struct tfs_cache *cache, const char *ds,
			  struct tfs_idset *commits)
{
	return walk_commits(s, cache, ds, commits, NULL, NULL);
}

/* --- verify --------------------------------------------------------------------------------- */

struct verify_ctx {
	struct tfs_store *s;
	const char *ds;
	struct tfs_idset manifests, chunks;
	struct tfs_verify_report *r;
};

static void problem(struct verify_ctx *v, const struct tfs_id *id, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static void problem(struct verify_ctx *v, const struct tfs_id *id, const char *fmt, ...)
{
	char key[TFS_KEY_MAX], msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	tfs_object_key(v->ds, id, key);
	tfs_err("%s/%s: %s", v->s->url, key, msg);
	v->r->problems++;
}

static void verify_chunk(struct verify_ctx *v, const struct tfs_id *cid, const struct tfs_column *c,
			 size_t k, const struct tfs_id *commit)
{
	const uint64_t nr = tfs_column_chunk_rows(c, k);
	const size_t raw = (size_t)(nr * c->row_bytes);
	struct tfs_buf obj = { 0 };
	char key[TFS_KEY_MAX], chex[TFS_ID_HEX];
	struct tfs_id got;
	uint8_t *p;
	int rc;

	if (tfs_idset_add(&v->chunks, cid) == 0)
		return;
	tfs_id_hex(commit, chex);
	tfs_object_key(v->ds, cid, key);
	rc = tfs_store_get_object(v->s, key, 0, &obj);
	if (rc) {
		problem(v, cid, "chunk %zu of column %s (commit %.12s) %s", k, c->name, chex,
			rc == -ENOENT ? "is missing" : strerror(-rc));
		goto out;
	}
	v->r->chunks++;
	v->r->bytes += obj.len;
	tfs_progress_add(&v->r->progress, obj.len, 1);
	tfs_id_of(obj.data, obj.len, &got);
	if (!tfs_id_eq(&got, cid)) {
		problem(v, cid,
			"chunk %zu of column %s (commit %.12s): content does not match its id", k,
			c->name, chex);
		goto out;
	}
	if (obj.len != c->chunks[k].stored_size)
		problem(v, cid, "chunk %zu of column %s: %zu bytes, the manifest says %" PRIu64, k,
			c->name, obj.len, c->chunks[k].stored_size);
	p = malloc(raw ? raw : 1);
	if (!p) {
		v->r->problems++;
		goto out;
	}
	rc = tfs_object_decode(obj.data, obj.len, TFS_OBJ_CHUNK, p, raw);
	free(p);
	if (rc)
		problem(v, cid,
			"chunk %zu of column %s (commit %.12s) does not decode to %" PRIu64
			" rows of %" PRIu64 " bytes",
			k, c->name, chex, nr, c->row_bytes);
out:
	tfs_buf_free(&obj);
}

static int verify_commit(void *arg, const struct tfs_commit *c)
{
	struct verify_ctx *v = arg;
	struct tfs_manifest m;
	int rc;

	v->r->commits++;
	tfs_progress_add(&v->r->progress, 0, 1);
	if (tfs_idset_add(&v->manifests, &c->manifest) == 0)
		return 0;
	rc = tfs_manifest_load(v->s, v->ds, &c->manifest, &m);
	if (rc) {
		problem(v, &c->manifest, "manifest of commit cannot be read");
		return 0;
	}
	v->r->manifests++;
	tfs_progress_add(&v->r->progress, 0, 1);
	if (m.rows != c->rows)
		problem(v, &c->id, "commit says %" PRIu64 " rows, its manifest %" PRIu64, c->rows,
			m.rows);
	for (size_t i = 0; i < m.ncols; i++)
		for (size_t k = 0; k < m.cols[i].nchunks; k++)
			verify_chunk(v, &m.cols[i].chunks[k].id, &m.cols[i], k, &c->id);
	tfs_manifest_free(&m);
	return 0;
}

int tfs_verify(struct tfs_store *s, const char *ds, struct tfs_verify_report *r)
{
	struct verify_ctx v = { .s = s, .ds = ds, .r = r };
	struct tfs_idset seen = { 0 };
	int rc;

	/* Not progress: a watcher may be reading it already (the caller zeroes it). */
	r->commits = r->manifests = r->chunks = r->bytes = r->problems = 0;
	rc = tfs_dataset_check(s, ds);
	if (rc)
		return rc;
	rc = walk_commits(s, NULL, ds, &seen, verify_commit, &v);
	if (rc == -EIO || rc == -ENOENT) {
		/* A commit that cannot be read ends its branch of the walk: a problem, not a
		 * failure of verify itself. tfs_commit_load logged which. */
		r->problems++;
		rc = 0;
	}
	tfs_idset_free(&seen);
	tfs_idset_free(&v.manifests);
	tfs_idset_free(&v.chunks);
	return rc;
}

/* --- gc ------------------------------------------------------------------------------------- */

struct gc_ctx {
	struct tfs_store *s;
	const char *ds;
	struct tfs_idset live;
	int64_t cutoff;
	int dry_run;
	struct tfs_gc_report *r;
	char dir[TFS_KEY_MAX];
	int err;
};

/* A manifest and its chunks are live. */
static int mark_manifest(void *arg, const struct tfs_id *id)
{
	struct gc_ctx *g = arg;
	struct tfs_manifest m;
	int rc;

	if (tfs_idset_add(&g->live, id) < 0)
		return -ENOMEM;
	rc = tfs_manifest_load(g->s, g->ds, id, &m);
	if (rc)
		return rc;
	for (size_t i = 0; !rc && i < m.ncols; i++)
		for (size_t k = 0; !rc && k < m.cols[i].nchunks; k++)
			if (tfs_idset_add(&g->live, &m.cols[i].chunks[k].id) < 0)
				rc = -ENOMEM;
	tfs_manifest_free(&m);
	return rc;
}

static int mark_commit(void *arg, const struct tfs_commit *c)
{
	struct gc_ctx *g = arg;

	if (tfs_idset_add(&g->live, &c->id) < 0)
		return -ENOMEM;
	return mark_manifest(g, &c->manifest);
}

static int sweep_object(void *arg, const char *name, int is_dir)
{
	struct gc_ctx *g = arg;
	char key[TFS_KEY_MAX], hex[TFS_ID_HEX];
	struct tfs_id id;
	uint64_t size;
	int64_t mtime;
	int rc;

	if (is_dir)
		return 0;
	snprintf(hex, sizeof(hex), "%.2s%s", g->dir + strlen(g->dir) - 2, name);
	if (strlen(hex) != TFS_ID_HEX - 1 || tfs_id_parse(hex, &id))
		return 0; /* not an object */
	if (tfs_idset_has(&g->live, &id)) {
		g->r->kept++;
		tfs_progress_add(&g->r->progress, 0, 1);
		return 0;
	}
	snprintf(key, sizeof(key), "%s/%s", g->dir, name);
	rc = tfs_store_stat(g->s, key, &size, &mtime);
	if (rc)
		return rc == -ENOENT ? 0 : rc;
	if (mtime > g->cutoff) {
		g->r->young++;
		tfs_progress_add(&g->r->progress, 0, 1);
		return 0;
	}
	if (!g->dry_run) {
		rc = tfs_store_del(g->s, key);
		if (rc && rc != -ENOENT) {
			tfs_err("%s/%s: cannot delete: %s", g->s->url, key, strerror(-rc));
			g->err = rc;
			return 0;
		}
	}
	g->r->deleted++;
	tfs_progress_add(&g->r->progress, size, 1);
	g->r->deleted_bytes += size;
	return 0;
}

static int sweep_fanout(void *arg, const char *name, int is_dir)
{
	struct gc_ctx *g = arg;

	if (!is_dir || strlen(name) != 2)
		return 0;
	snprintf(g->dir, sizeof(g->dir), "%s/objects/%s", g->ds, name);
	return tfs_store_list(g->s, g->dir, sweep_object, g);
}

int tfs_gc(struct tfs_store *s, const char *ds, int64_t grace_s, int dry_run,
	   struct tfs_gc_report *r)
{
	struct gc_ctx g = { .s = s, .ds = ds, .dry_run = dry_run, .r = r };
	struct tfs_idset seen = { 0 };
	char key[TFS_KEY_MAX];
	int rc;

	r->kept = r->deleted = r->deleted_bytes = r->young = r->temp_removed = 0; /* not progress */
	r->sessions_removed = 0;
	g.cutoff = (int64_t)time(NULL) - grace_s;
	rc = tfs_dataset_check(s, ds);
	if (rc)
		return rc;
	/* Mark: everything reachable. Any read failure stops gc before it deletes anything. */
	rc = walk_commits(s, NULL, ds, &seen, mark_commit, &g);
	/* Sessions still being written keep their parts' chunks; older ones are forgotten. */
	if (!rc)
		rc = tfs_session_sweep(s, ds, g.cutoff, dry_run, mark_manifest, &g,
				       &r->sessions_removed);
	if (rc) {
		tfs_err("%s/%s: gc stopped before deleting anything: the objects reachable from "
			"the "
			"refs cannot all be read (%s); run tensorfs verify",
			s->url, ds, strerror(-rc));
		goto out;
	}
	snprintf(key, sizeof(key), "%s/objects", ds);
	rc = tfs_store_list(s, key, sweep_fanout, &g);
	if (rc == -ENOENT)
		rc = 0;
	if (!rc)
		rc = g.err;
	if (!rc) {
		int n = tfs_store_sweep(s, ds, g.cutoff, dry_run);

		if (n > 0)
			r->temp_removed = (uint64_t)n;
	}
out:
	tfs_idset_free(&seen);
	tfs_idset_free(&g.live);
	return rc;
}
