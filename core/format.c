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

int tfs_object_put_encoded_begin(struct tfs_store *s, const char *ds, const void *obj, size_t len,
				 struct tfs_id *id, struct tfs_store_put **put)
{
	char key[TFS_KEY_MAX];
	int rc;

	tfs_id_of(obj, len, id);
	tfs_object_key(ds, id, key);
	rc = put ? tfs_store_put_new_begin(s, key, obj, len, put)
		 : tfs_store_put_new(s, key, obj, len);
	if (rc == -EEXIST)
		rc = 0; /* content-addressed: same key, same bytes */
	if (rc)
		tfs_err("%s/%s: cannot write object: %s", s->url, key, strerror(-rc));
	return rc;
}

int tfs_chunk_filterable(enum tfs_codec_id codec, const struct tfs_dtype *dt, unsigned ndim)
{
	return tfs_chunk_delta_get() && codec == TFS_CODEC_ZSTD && ndim >= 2 && dt->itemsize == 1;
}

/* The line of rows of a column like c of that shape and bytes, when the column is of the kind
 * given and filterable: 0 when none. */
static uint64_t line_of(const struct tfs_column *c, enum tfs_col_kind kind, const uint64_t *shape,
			uint64_t bytes)
{
	uint64_t line;

	if (c->kind != kind || !tfs_chunk_filterable(c->codec, &c->dtype, c->ndim))
		return 0;
	line = shape[c->ndim - 1];
	if (c->ndim >= 3)
		line *= shape[c->ndim - 2];
	return !line || bytes / line < 2 || line > UINT32_MAX ? 0 : line;
}

uint64_t tfs_chunk_row_line(const struct tfs_column *h, const uint64_t *shape, uint64_t len)
{
	return line_of(h, TFS_COL_RAGGED, shape, len);
}

void tfs_chunk_form_of(const struct tfs_column *c, struct tfs_chunk_form *out)
{
	const uint64_t line = line_of(c, TFS_COL_FIXED, c->shape, c->row_bytes);

	*out = (struct tfs_chunk_form){
		.codec = c->codec, .level = c->level, .row_bytes = c->row_bytes, .line = line
	};
}

int tfs_chunk_put_begin(struct tfs_store *s, const char *ds, const struct tfs_chunk_form *form,
			const void *raw, size_t len, struct tfs_chunk_ref *ref,
			struct tfs_store_put **put)
{
	const size_t frame = tfs_chunk_frame_rows(tfs_chunk_frame_get(), form->row_bytes);
	struct tfs_buf obj = { 0 };
	int rc = form->nruns ? tfs_chunk_encode_runs(form->codec, form->level, frame, form->runs,
						     form->nruns, raw, len, &obj)
			     : tfs_chunk_encode(form->codec, form->level, frame, (size_t)form->line,
						raw, len, &obj);

	if (!rc)
		rc = tfs_object_put_encoded_begin(s, ds, obj.data, obj.len, &ref->id, put);
	ref->stored_size = obj.len;
	tfs_buf_free(&obj);
	return rc;
}

int tfs_object_put_encoded(struct tfs_store *s, const char *ds, const void *obj, size_t len,
			   struct tfs_id *id)
{
	return tfs_object_put_encoded_begin(s, ds, obj, len, id, NULL);
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

/* Whether obj is a whole object of another type than want; its type's name and want's in
 * names[0] and names[1]. */
static int wrong_type(const struct tfs_buf *obj, enum tfs_obj_type want, const char *names[2])
{
	static const char *const kinds[] = { "?", "chunk", "manifest", "commit" };
	struct tfs_obj_header h;

	if (tfs_object_header(obj->data, obj->len, &h) || h.type == want || h.type < 1 ||
	    h.type > 3)
		return 0;
	names[0] = kinds[h.type];
	names[1] = kinds[want];
	return 1;
}

int tfs_object_get(struct tfs_store *s, const char *ds, const struct tfs_id *id,
		   enum tfs_obj_type type, uint8_t **raw, size_t *len)
{
	const char *names[2];
	struct tfs_buf obj = { 0 };
	char key[TFS_KEY_MAX];
	struct tfs_id got;
	int rc;

	tfs_object_key(ds, id, key);
	rc = tfs_store_get_object(s, key, 0, &obj);
	if (rc) {
		if (rc == -ENOENT)
			tfs_err("%s/%s: object is missing", s->url, key);
		rc = rc == -EBADMSG ? -EIO : rc; /* damaged: logged by the store */
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
	else if (rc && wrong_type(&obj, type, names))
		/* intact (its id matched), but another kind of object */
		tfs_err("%s/%s: a %s, not a %s", s->url, key, names[0], names[1]);
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

int tfs_id_line_read(struct tfs_store *s, const char *key, struct tfs_id *id)
{
	struct tfs_buf b = { 0 };
	int rc = tfs_store_get(s, key, &b);

	if (!rc && (b.len < TFS_ID_HEX - 1 || tfs_id_parse((char *)b.data, id))) {
		tfs_err("%s/%s: damaged (it holds no object id)", s->url, key);
		rc = -EIO;
	}
	tfs_buf_free(&b);
	return rc;
}

int tfs_id_line_swap(struct tfs_store *s, const char *key, const struct tfs_id *old,
		     const struct tfs_id *new_id)
{
	char oldhex[TFS_ID_HEX], newhex[TFS_ID_HEX];

	tfs_id_hex(new_id, newhex);
	newhex[TFS_ID_HEX - 1] = '\n';
	if (old) {
		tfs_id_hex(old, oldhex);
		oldhex[TFS_ID_HEX - 1] = '\n';
	}
	return tfs_store_cas(s, key, old ? oldhex : NULL, TFS_ID_HEX, newhex, TFS_ID_HEX);
}

int tfs_ref_read(struct tfs_store *s, const char *ds, enum tfs_ref_kind kind, const char *name,
		 struct tfs_id *id)
{
	char key[TFS_KEY_MAX];

	if (!tfs_name_valid(name))
		return -ENOENT;
	ref_key(ds, kind, name, key);
	return tfs_id_line_read(s, key, id);
}

int tfs_ref_update(struct tfs_store *s, const char *ds, enum tfs_ref_kind kind, const char *name,
		   const struct tfs_id *old, const struct tfs_id *new_id)
{
	char key[TFS_KEY_MAX];

	if (!tfs_name_valid(name))
		return -EINVAL;
	ref_key(ds, kind, name, key);
	return tfs_id_line_swap(s, key, old, new_id);
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
