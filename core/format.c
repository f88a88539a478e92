/* SPDX-License-Identifier: MIT */
/* format: the on-store layout of a lake (datasets, objects, refs) and the manifest and commit
 * objects. The specification is core/FORMAT.md; this module is its only implementation. */
#include "format.h"

#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define DATASET_MARKER "tensorfs-dataset"

void tfs_object_key(const char *ds, const struct tfs_id *id, char out[TFS_KEY_MAX])
{
	char hex[TFS_ID_HEX];

	tfs_id_hex(id, hex);
	snprintf(out, TFS_KEY_MAX, "%s/objects/%.2s/%s", ds, hex, hex + 2);
}

int tfs_object_key_parse(const char *key, struct tfs_id *id)
{
	static const char mid[] = "/objects/";
	const size_t tail = sizeof(mid) - 1 + 2 + 1 + TFS_ID_HEX - 3;
	size_t len = strlen(key), ds_len;
	char ds[130], hex[TFS_ID_HEX]; /* names are at most 128 characters */
	const char *p;

	if (len <= tail)
		return 0;
	ds_len = len - tail;
	p = key + ds_len;
	if (ds_len >= sizeof(ds) || memcmp(p, mid, sizeof(mid) - 1))
		return 0;
	p += sizeof(mid) - 1;
	if (!tfs_is_lower_hex(p, 2) || p[2] != '/' || !tfs_is_lower_hex(p + 3, TFS_ID_HEX - 3))
		return 0;
	memcpy(ds, key, ds_len);
	ds[ds_len] = 0;
	if (!tfs_name_valid(ds))
		return 0;
	memcpy(hex, p, 2);
	memcpy(hex + 2, p + 3, TFS_ID_HEX - 3);
	hex[TFS_ID_HEX - 1] = 0;
	return tfs_id_parse(hex, id) == 0;
}

int tfs_object_put_encoded(struct tfs_store *s, const char *ds, const void *obj, size_t len,
			   struct tfs_id *id)
{
	char key[TFS_KEY_MAX];
	int rc;

	tfs_id_of(obj, len, id);
	tfs_object_key(ds, id, key);
	rc = tfs_store_put_new(s, key, obj, len);
	if (rc == -EEXIST)
		rc = 0; /* content-addressed: same key, same bytes */
	if (rc)
		tfs_err("%s/%s: cannot write object: %s", s->url, key, strerror(-rc));
	return rc;
}

int tfs_object_put(struct tfs_store *s, const char *ds, enum tfs_obj_type type,
		   enum tfs_codec_id codec, int level, const void *raw, size_t len,
		   struct tfs_id *id)
{
	struct tfs_buf obj = { 0 };
	int rc = tfs_object_encode(type, codec, level, raw, len, &obj);

	if (!rc)
		rc = tfs_object_put_encoded(s, ds, obj.data, obj.len, id);
	tfs_buf_free(&obj);
	return rc;
}

int tfs_object_get(struct tfs_store *s, const char *ds, const struct tfs_id *id,
		   enum tfs_obj_type type, uint8_t **raw, size_t *len)
{
	struct tfs_buf obj = { 0 };
	char key[TFS_KEY_MAX];
	struct tfs_id got;
	int rc;

	tfs_object_key(ds, id, key);
	rc = tfs_store_get_object(s, key, 0, &obj);
	if (rc) {
		if (rc == -ENOENT)
			tfs_err("%s/%s: object is missing", s->url, key);
		goto out;
	}
	/* Metadata objects are small: check the full content address, not just the checksum. */
	tfs_id_of(obj.data, obj.len, &got);
	if (!tfs_id_eq(&got, id)) {
		tfs_err("%s/%s: object is damaged (content does not match its id)", s->url, key);
		rc = -EIO;
		goto out;
	}
	rc = tfs_object_decode_alloc(obj.data, obj.len, type, raw, len);
	if (rc == -EPROTO)
		tfs_err("%s/%s: object written by a newer tensorfs (format version too new)",
			s->url, key);
	else if (rc)
		tfs_err("%s/%s: object is damaged (%s)", s->url, key, strerror(-rc));
out:
	tfs_buf_free(&obj);
	return rc;
}

/* --- datasets and refs ---------------------------------------------------------------------- */

static void ref_key(const char *ds, enum tfs_ref_kind kind, const char *name, char *out)
{
	snprintf(out, TFS_KEY_MAX, "%s/refs/%s/%s", ds, kind == TFS_REF_TAG ? "tags" : "heads",
		 name);
}

int tfs_dataset_check(struct tfs_store *s, const char *ds)
{
	char key[TFS_KEY_MAX];
	struct tfs_buf b = { 0 };
	unsigned v = 0;
	int rc;

	snprintf(key, sizeof(key), "%s/%s", ds, DATASET_MARKER);
	rc = tfs_store_get(s, key, &b);
	if (rc)
		goto out;
	if (sscanf((char *)b.data, DATASET_MARKER " %u", &v) != 1) {
		tfs_err("%s/%s: not a tensorfs dataset marker", s->url, key);
		rc = -EIO;
	} else if (v > TFS_FORMAT_VERSION) {
		tfs_err("%s/%s: dataset uses format version %u; this tensorfs reads up to %u",
			s->url, ds, v, TFS_FORMAT_VERSION);
		rc = -EPROTO;
	}
out:
	tfs_buf_free(&b);
	return rc;
}

int tfs_dataset_create(struct tfs_store *s, const char *ds)
{
	struct tfs_manifest empty = { 0 };
	char key[TFS_KEY_MAX], marker[64];
	struct tfs_id commit;
	int rc, n;

	if (!tfs_name_valid(ds))
		return -EINVAL;
	rc = tfs_dataset_check(s, ds);
	if (rc != -ENOENT)
		return rc ? rc : -EEXIST;
	rc = tfs_commit_write(s, ds, &empty, NULL, "create dataset", &commit);
	if (rc)
		return rc;
	rc = tfs_ref_update(s, ds, TFS_REF_BRANCH, "main", NULL, &commit);
	if (rc)
		return rc == -EAGAIN ? -EEXIST : rc;
	/* The marker goes last: a dataset is visible only once it has a valid main. */
	n = snprintf(marker, sizeof(marker), DATASET_MARKER " %d\n", TFS_FORMAT_VERSION);
	snprintf(key, sizeof(key), "%s/%s", ds, DATASET_MARKER);
	return tfs_store_put_new(s, key, marker, (size_t)n);
}

struct lake_list_ctx {
	struct tfs_store *s;
	tfs_store_list_fn fn;
	void *arg;
};

static int lake_list_one(void *arg, const char *name, int is_dir)
{
	struct lake_list_ctx *c = arg;

	if (!is_dir || !tfs_name_valid(name))
		return 0;
	if (tfs_dataset_check(c->s, name))
		return 0;
	return c->fn(c->arg, name, 1);
}

int tfs_dataset_list(struct tfs_store *s, tfs_store_list_fn fn, void *arg)
{
	struct lake_list_ctx c = { s, fn, arg };

	return tfs_store_list(s, "", lake_list_one, &c);
}

int tfs_ref_read(struct tfs_store *s, const char *ds, enum tfs_ref_kind kind, const char *name,
		 struct tfs_id *id)
{
	char key[TFS_KEY_MAX];
	struct tfs_buf b = { 0 };
	int rc;

	if (!tfs_name_valid(name))
		return -ENOENT;
	ref_key(ds, kind, name, key);
	rc = tfs_store_get(s, key, &b);
	if (rc)
		goto out;
	if (b.len < TFS_ID_HEX - 1 || tfs_id_parse((char *)b.data, id)) {
		tfs_err("%s/%s: ref is damaged", s->url, key);
		rc = -EIO;
	}
out:
	tfs_buf_free(&b);
	return rc;
}

int tfs_ref_update(struct tfs_store *s, const char *ds, enum tfs_ref_kind kind, const char *name,
		   const struct tfs_id *old, const struct tfs_id *new_id)
{
	char key[TFS_KEY_MAX], oldhex[TFS_ID_HEX + 1], newhex[TFS_ID_HEX + 1];

	if (!tfs_name_valid(name))
		return -EINVAL;
	ref_key(ds, kind, name, key);
	tfs_id_hex(new_id, newhex);
	newhex[TFS_ID_HEX - 1] = '\n';
	if (old) {
		tfs_id_hex(old, oldhex);
		oldhex[TFS_ID_HEX - 1] = '\n';
	}
	return tfs_store_cas(s, key, old ? oldhex : NULL, TFS_ID_HEX, newhex, TFS_ID_HEX);
}

int tfs_ref_list(struct tfs_store *s, const char *ds, enum tfs_ref_kind kind, tfs_store_list_fn fn,
		 void *arg)
{
	char key[TFS_KEY_MAX];
	int rc;

	snprintf(key, sizeof(key), "%s/refs/%s", ds, kind == TFS_REF_TAG ? "tags" : "heads");
	rc = tfs_store_list(s, key, fn, arg);
	return rc == -ENOENT ? 0 : rc;
}

int tfs_ref_resolve(struct tfs_store *s, const char *ds, const char *ref, struct tfs_id *id)
{
	int rc = tfs_ref_read(s, ds, TFS_REF_BRANCH, ref, id);

	if (rc != -ENOENT)
		return rc;
	rc = tfs_ref_read(s, ds, TFS_REF_TAG, ref, id);
	if (rc != -ENOENT)
		return rc;
	if (strlen(ref) == TFS_ID_HEX - 1 && !tfs_id_parse(ref, id)) {
		char key[TFS_KEY_MAX];
		uint64_t size;

		tfs_object_key(ds, id, key);
		return tfs_store_head(s, key, &size);
	}
	return -ENOENT;
}

int tfs_ref_lookup(struct tfs_store *s, const char *ds, const char *name, enum tfs_ref_kind *kind,
		   struct tfs_id *id)
{
	int rc = tfs_ref_read(s, ds, TFS_REF_BRANCH, name, id);

	*kind = TFS_REF_BRANCH;
	if (rc != -ENOENT)
		return rc;
	*kind = TFS_REF_TAG;
	return tfs_ref_read(s, ds, TFS_REF_TAG, name, id);
}

int tfs_ref_name_ok(const char *name)
{
	struct tfs_id id;

	if (!tfs_name_valid(name) || !strcmp(name, "commits") || !strcmp(name, "log"))
		return 0;
	return !(strlen(name) == TFS_ID_HEX - 1 && tfs_id_parse(name, &id) == 0);
}

int tfs_ref_create(struct tfs_store *s, const char *ds, enum tfs_ref_kind kind, const char *name,
		   const struct tfs_id *id)
{
	struct tfs_commit c;
	struct tfs_id other;
	int rc;

	if (!tfs_ref_name_ok(name))
		return -EINVAL;
	rc = tfs_ref_read(s, ds, kind == TFS_REF_TAG ? TFS_REF_BRANCH : TFS_REF_TAG, name, &other);
	if (rc == 0)
		return -EEXIST;
	if (rc != -ENOENT)
		return rc;
	rc = tfs_commit_load(s, ds, id, &c);
	if (rc)
		return rc;
	tfs_commit_free(&c);
	rc = tfs_ref_update(s, ds, kind, name, NULL, id);
	return rc == -EAGAIN ? -EEXIST : rc;
}

/* --- manifests ------------------------------------------------------------------------------ */

int tfs_manifest_serialize(const struct tfs_manifest *m, struct tfs_buf *out)
{
	int rc = tfs_buf_printf(out, "tensorfs-manifest %d\nrows %" PRIu64 "\n", TFS_FORMAT_VERSION,
				m->rows);

	for (size_t i = 0; !rc && i < m->ncols; i++) {
		const struct tfs_column *c = &m->cols[i];

		rc = tfs_buf_printf(out, "column %s\ndtype %s\nshape", c->name, c->dtype.descr);
		for (unsigned d = 0; !rc && d < c->ndim; d++)
			rc = tfs_buf_printf(out, " %" PRIu64, c->shape[d]);
		if (!rc)
			rc = tfs_buf_printf(
				out,
				"\nrow_bytes %" PRIu64 "\nrows %" PRIu64 "\nrows_per_chunk %" PRIu64
				"\nchunk_bytes %" PRIu64 "\ncodec %s %d\nchunks %zu\n",
				c->row_bytes, c->rows, c->rows_per_chunk, c->chunk_bytes,
				tfs_codec_by_id(c->codec)->name, c->level, c->nchunks);
		for (size_t k = 0; !rc && k < c->nchunks; k++) {
			char hex[TFS_ID_HEX];

			tfs_id_hex(&c->chunks[k].id, hex);
			rc = tfs_buf_printf(out, "%s %" PRIu64 "\n", hex, c->chunks[k].stored_size);
		}
		if (!rc)
			rc = tfs_buf_printf(out, "end\n");
	}
	return rc;
}

struct cursor {
	const char *p, *end;
	int lineno;
	int overlong;	 /* set when a line did not fit: the text is malformed */
	char line[1024]; /* a shape line of 31 dimensions of 20 digits fits */
};

/* Next line into c->line (without '\n'); -1 at the end or for an over-long line (which also
 * sets c->overlong so that callers treating -1 as the end can tell). */
static int next_line(struct cursor *c)
{
	const char *nl;
	size_t n;

	if (c->p >= c->end)
		return -1;
	nl = memchr(c->p, '\n', (size_t)(c->end - c->p));
	n = nl ? (size_t)(nl - c->p) : (size_t)(c->end - c->p);
	if (n >= sizeof(c->line)) {
		c->overlong = 1;
		return -1;
	}
	memcpy(c->line, c->p, n);
	c->line[n] = 0;
	c->p += n + (nl ? 1 : 0);
	c->lineno++;
	return 0;
}

static int line_u64(struct cursor *c, const char *key, uint64_t *v)
{
	char fmt[48];
	char extra;
	unsigned long long x;

	if (next_line(c))
		return -1;
	snprintf(fmt, sizeof(fmt), "%s %%llu %%c", key);
	if (sscanf(c->line, fmt, &x, &extra) != 1)
		return -1;
	*v = x;
	return 0;
}

void tfs_column_free(struct tfs_column *c)
{
	free(c->name);
	free(c->chunks);
	memset(c, 0, sizeof(*c));
}

void tfs_manifest_free(struct tfs_manifest *m)
{
	for (size_t i = 0; i < m->ncols; i++)
		tfs_column_free(&m->cols[i]);
	free(m->cols);
	memset(m, 0, sizeof(*m));
}

int tfs_column_copy(struct tfs_column *dst, const struct tfs_column *src)
{
	*dst = *src;
	dst->name = strdup(src->name);
	dst->chunks = malloc((src->nchunks ? src->nchunks : 1) * sizeof(*src->chunks));
	if (!dst->name || !dst->chunks) {
		free(dst->name);
		free(dst->chunks);
		memset(dst, 0, sizeof(*dst));
		return -ENOMEM;
	}
	if (src->nchunks)
		memcpy(dst->chunks, src->chunks, src->nchunks * sizeof(*src->chunks));
	return 0;
}

const struct tfs_column *tfs_manifest_column(const struct tfs_manifest *m, const char *name)
{
	for (size_t i = 0; i < m->ncols; i++)
		if (!strcmp(m->cols[i].name, name))
			return &m->cols[i];
	return NULL;
}

static int parse_column(struct cursor *cur, struct tfs_column *c, char *err, size_t err_cap)
{
	char dtype[16], codec[16], *tok, *save;
	int big, level;
	uint64_t nchunks, expect_bytes, want_chunks;

	if (next_line(cur) || sscanf(cur->line, "dtype %15s", dtype) != 1)
		return -1;
	if (tfs_dtype_parse(dtype, &c->dtype, &big, err, err_cap) || big ||
	    strcmp(dtype, c->dtype.descr))
		return -1;
	if (next_line(cur) || strncmp(cur->line, "shape", 5))
		return -1;
	c->ndim = 0;
	expect_bytes = c->dtype.itemsize;
	for (tok = strtok_r(cur->line + 5, " ", &save); tok; tok = strtok_r(NULL, " ", &save)) {
		char *end;

		if (c->ndim >= TFS_MAX_DIMS - 1)
			return -1;
		c->shape[c->ndim] = strtoull(tok, &end, 10);
		if (*end || tfs_mul_u64(expect_bytes, c->shape[c->ndim], &expect_bytes))
			return -1;
		c->ndim++;
	}
	if (line_u64(cur, "row_bytes", &c->row_bytes) || c->row_bytes != expect_bytes)
		return -1;
	if (line_u64(cur, "rows", &c->rows) ||
	    line_u64(cur, "rows_per_chunk", &c->rows_per_chunk) || c->rows_per_chunk == 0 ||
	    line_u64(cur, "chunk_bytes", &c->chunk_bytes))
		return -1;
	if (next_line(cur) || sscanf(cur->line, "codec %15s %d", codec, &level) != 2 ||
	    !tfs_codec_by_name(codec))
		return -1;
	c->codec = tfs_codec_by_name(codec)->id;
	c->level = level;
	if (line_u64(cur, "chunks", &nchunks))
		return -1;
	want_chunks = c->rows / c->rows_per_chunk + (c->rows % c->rows_per_chunk ? 1 : 0);
	if (nchunks != want_chunks) {
		snprintf(err, err_cap, "column %s: %" PRIu64 " chunks for %" PRIu64 " rows",
			 c->name, nchunks, c->rows);
		return -1;
	}
	c->nchunks = (size_t)nchunks;
	c->chunks = calloc(nchunks ? nchunks : 1, sizeof(*c->chunks));
	if (!c->chunks)
		return -1;
	for (size_t k = 0; k < c->nchunks; k++) {
		unsigned long long size;
		char hex[80];

		if (next_line(cur) || sscanf(cur->line, "%79s %llu", hex, &size) != 2 ||
		    strlen(hex) != TFS_ID_HEX - 1 || tfs_id_parse(hex, &c->chunks[k].id))
			return -1;
		c->chunks[k].stored_size = size;
	}
	if (next_line(cur) || strcmp(cur->line, "end"))
		return -1;
	return 0;
}

int tfs_manifest_parse(const char *text, size_t len, struct tfs_manifest *m, char *err,
		       size_t err_cap)
{
	struct cursor cur = { .p = text, .end = text + len };
	unsigned version;
	size_t cap = 0;

	memset(m, 0, sizeof(*m));
	err[0] = 0;
	if (next_line(&cur) || sscanf(cur.line, "tensorfs-manifest %u", &version) != 1)
		goto bad;
	if (version > TFS_FORMAT_VERSION) {
		snprintf(err, err_cap, "manifest format version %u is newer than this tensorfs",
			 version);
		return -EPROTO;
	}
	if (line_u64(&cur, "rows", &m->rows))
		goto bad;
	while (!next_line(&cur)) {
		struct tfs_column *c;

		if (strncmp(cur.line, "column ", 7) || !tfs_name_valid(cur.line + 7) ||
		    tfs_manifest_column(m, cur.line + 7))
			goto bad;
		if (m->ncols == cap) {
			struct tfs_column *n;

			cap = cap ? cap * 2 : 8;
			n = realloc(m->cols, cap * sizeof(*n));
			if (!n)
				goto bad;
			m->cols = n;
		}
		c = &m->cols[m->ncols++];
		memset(c, 0, sizeof(*c));
		c->name = strdup(cur.line + 7);
		if (!c->name || parse_column(&cur, c, err, err_cap))
			goto bad;
		if (c->rows != m->rows) {
			snprintf(err, err_cap,
				 "column %s has %" PRIu64 " rows, the version %" PRIu64, c->name,
				 c->rows, m->rows);
			goto bad;
		}
	}
	if (cur.overlong)
		goto bad;
	if (m->ncols == 0 && m->rows != 0) {
		snprintf(err, err_cap, "%" PRIu64 " rows but no columns", m->rows);
		goto bad;
	}
	return 0;
bad:
	if (!err[0])
		snprintf(err, err_cap, "malformed manifest at line %d", cur.lineno);
	tfs_manifest_free(m);
	return -EIO;
}

int tfs_manifest_load(struct tfs_store *s, const char *ds, const struct tfs_id *id,
		      struct tfs_manifest *m)
{
	uint8_t *raw;
	size_t len;
	char err[256];
	int rc = tfs_object_get(s, ds, id, TFS_OBJ_MANIFEST, &raw, &len);

	if (rc)
		return rc;
	rc = tfs_manifest_parse((const char *)raw, len, m, err, sizeof(err));
	if (rc) {
		char key[TFS_KEY_MAX];

		tfs_object_key(ds, id, key);
		tfs_err("%s/%s: %s", s->url, key, err);
	}
	free(raw);
	return rc;
}

/* --- commits -------------------------------------------------------------------------------- */

int tfs_commit_serialize(const struct tfs_commit *c, struct tfs_buf *out)
{
	char hex[TFS_ID_HEX];
	int rc;

	tfs_id_hex(&c->manifest, hex);
	rc = tfs_buf_printf(out, "tensorfs-commit %d\nmanifest %s\n", TFS_FORMAT_VERSION, hex);
	for (size_t i = 0; !rc && i < c->nparents; i++) {
		tfs_id_hex(&c->parents[i], hex);
		rc = tfs_buf_printf(out, "parent %s\n", hex);
	}
	if (!rc)
		rc = tfs_buf_printf(out, "time %" PRId64 "\nrows %" PRIu64 "\n\n%s", c->time,
				    c->rows, c->message ? c->message : "");
	return rc;
}

void tfs_commit_free(struct tfs_commit *c)
{
	free(c->parents);
	free(c->message);
	memset(c, 0, sizeof(*c));
}

int tfs_commit_parse(const char *text, size_t len, struct tfs_commit *c)
{
	struct cursor cur = { .p = text, .end = text + len };
	unsigned version;
	long long t;
	unsigned long long rows;
	char hex[80];

	memset(c, 0, sizeof(*c));
	if (next_line(&cur) || sscanf(cur.line, "tensorfs-commit %u", &version) != 1)
		goto bad;
	if (version > TFS_FORMAT_VERSION)
		return -EPROTO;
	if (next_line(&cur) || sscanf(cur.line, "manifest %79s", hex) != 1 ||
	    tfs_id_parse(hex, &c->manifest))
		goto bad;
	for (;;) {
		if (next_line(&cur))
			goto bad;
		if (strncmp(cur.line, "parent ", 7))
			break;
		struct tfs_id *n = realloc(c->parents, (c->nparents + 1) * sizeof(*n));

		if (!n || sscanf(cur.line, "parent %79s", hex) != 1 ||
		    tfs_id_parse(hex, &n[c->nparents])) {
			if (n)
				c->parents = n;
			goto bad;
		}
		c->parents = n;
		c->nparents++;
	}
	if (sscanf(cur.line, "time %lld", &t) != 1)
		goto bad;
	c->time = t;
	if (next_line(&cur) || sscanf(cur.line, "rows %llu", &rows) != 1)
		goto bad;
	c->rows = rows;
	if (next_line(&cur) || cur.line[0])
		goto bad;
	c->message = strndup(cur.p, (size_t)(cur.end - cur.p));
	if (!c->message)
		goto bad;
	return 0;
bad:
	tfs_commit_free(c);
	return -EIO;
}

int tfs_commit_load(struct tfs_store *s, const char *ds, const struct tfs_id *id,
		    struct tfs_commit *c)
{
	uint8_t *raw;
	size_t len;
	int rc = tfs_object_get(s, ds, id, TFS_OBJ_COMMIT, &raw, &len);

	if (rc)
		return rc;
	rc = tfs_commit_parse((const char *)raw, len, c);
	if (rc) {
		char key[TFS_KEY_MAX];

		tfs_object_key(ds, id, key);
		tfs_err("%s/%s: %s", s->url, key,
			rc == -EPROTO ? "commit format is newer than this tensorfs"
				      : "malformed commit");
	} else {
		c->id = *id;
	}
	free(raw);
	return rc;
}

int tfs_commit_write(struct tfs_store *s, const char *ds, const struct tfs_manifest *m,
		     const struct tfs_id *parent, const char *message, struct tfs_id *commit_id)
{
	struct tfs_buf mb = { 0 }, cb = { 0 };
	struct tfs_commit c = { 0 };
	struct tfs_id parents[1];
	int rc;

	rc = tfs_manifest_serialize(m, &mb);
	if (rc)
		goto out;
	rc = tfs_object_put(s, ds, TFS_OBJ_MANIFEST, TFS_CODEC_ZSTD, 3, mb.data, mb.len,
			    &c.manifest);
	if (rc)
		goto out;
	if (parent) {
		parents[0] = *parent;
		c.parents = parents;
		c.nparents = 1;
	}
	c.time = (int64_t)time(NULL);
	c.rows = m->rows;
	c.message = (char *)(message ? message : "");
	rc = tfs_commit_serialize(&c, &cb);
	if (rc)
		goto out;
	rc = tfs_object_put(s, ds, TFS_OBJ_COMMIT, TFS_CODEC_RAW, 0, cb.data, cb.len, commit_id);
out:
	tfs_buf_free(&mb);
	tfs_buf_free(&cb);
	return rc;
}

/* --- schema.json ---------------------------------------------------------------------------- */

static int json_str(struct tfs_buf *b, const char *s)
{
	int rc = tfs_buf_append(b, "\"", 1);

	for (; !rc && *s; s++) {
		unsigned char ch = (unsigned char)*s;

		if (ch == '"' || ch == '\\')
			rc = tfs_buf_printf(b, "\\%c", ch);
		else if (ch == '\n')
			rc = tfs_buf_printf(b, "\\n");
		else if (ch < 0x20)
			rc = tfs_buf_printf(b, "\\u%04x", ch);
		else
			rc = tfs_buf_append(b, s, 1);
	}
	return rc ? rc : tfs_buf_append(b, "\"", 1);
}

static const char *dtype_name(const struct tfs_dtype *dt)
{
	static const char *const names[][4] = {
		/* 1, 2, 4, 8 bytes */
		{ "int8", "int16", "int32", "int64" },
		{ "uint8", "uint16", "uint32", "uint64" },
		{ NULL, "float16", "float32", "float64" },
	};
	int row = dt->kind == 'i' ? 0 : dt->kind == 'u' ? 1 : 2;
	int col = dt->itemsize == 1 ? 0 : dt->itemsize == 2 ? 1 : dt->itemsize == 4 ? 2 : 3;

	if (dt->kind == 'b')
		return "bool";
	if (dt->kind == 'c')
		return dt->itemsize == 8 ? "complex64" : "complex128";
	return names[row][col];
}

int tfs_schema_json(const char *ds, const struct tfs_commit *c, const struct tfs_manifest *m,
		    struct tfs_buf *out)
{
	char hex[TFS_ID_HEX], when[32];
	int rc;

	tfs_format_utc(c->time, "%Y-%m-%dT%H:%M:%SZ", when, sizeof(when));
	tfs_id_hex(&c->id, hex);
	rc = tfs_buf_printf(out,
			    "{\n  \"format_version\": %d,\n  \"dataset\": ", TFS_FORMAT_VERSION);
	if (!rc)
		rc = json_str(out, ds);
	if (!rc)
		rc = tfs_buf_printf(out, ",\n  \"commit\": \"%s\",\n  \"parents\": [", hex);
	for (size_t i = 0; !rc && i < c->nparents; i++) {
		tfs_id_hex(&c->parents[i], hex);
		rc = tfs_buf_printf(out, "%s\"%s\"", i ? ", " : "", hex);
	}
	if (!rc)
		rc = tfs_buf_printf(out, "],\n  \"time\": \"%s\",\n  \"message\": ", when);
	if (!rc)
		rc = json_str(out, c->message ? c->message : "");
	if (!rc)
		rc = tfs_buf_printf(out, ",\n  \"rows\": %" PRIu64 ",\n  \"columns\": [", m->rows);
	for (size_t i = 0; !rc && i < m->ncols; i++) {
		const struct tfs_column *col = &m->cols[i];
		uint64_t stored = 0;

		for (size_t k = 0; k < col->nchunks; k++)
			stored += col->chunks[k].stored_size;
		rc = tfs_buf_printf(out,
				    "%s\n    {\"name\": \"%s\", \"file\": \"%s.npy\", \"dtype\": "
				    "\"%s\", \"type\": \"%s\", \"shape\": [",
				    i ? "," : "", col->name, col->name, col->dtype.descr,
				    dtype_name(&col->dtype));
		for (unsigned d = 0; !rc && d < col->ndim; d++)
			rc = tfs_buf_printf(out, "%s%" PRIu64, d ? ", " : "", col->shape[d]);
		if (!rc)
			rc = tfs_buf_printf(out,
					    "], \"rows\": %" PRIu64 ", \"row_bytes\": %" PRIu64
					    ", \"rows_per_chunk\": %" PRIu64
					    ", \"chunk_bytes\": %" PRIu64
					    ", \"chunks\": %zu, \"codec\": \"%s\", \"level\": %d, "
					    "\"stored_bytes\": %" PRIu64 "}",
					    col->rows, col->row_bytes, col->rows_per_chunk,
					    col->rows_per_chunk * col->row_bytes, col->nchunks,
					    tfs_codec_by_id(col->codec)->name, col->level, stored);
	}
	if (!rc)
		rc = tfs_buf_printf(out, "%s]\n}\n", m->ncols ? "\n  " : "");
	return rc;
}
