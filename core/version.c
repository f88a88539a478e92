/* SPDX-License-Identifier: MIT */
/* version: one commit of a dataset opened for reading: its manifest, schema and chunk reads through
 * the chunk cache. Refcounted; immutable once open. */
#include "version.h"
#include "badchunks.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int tfs_version_open(struct tfs_store *s, const char *ds, const struct tfs_id *id,
		     struct tfs_version **out)
{
	struct tfs_version *v = calloc(1, sizeof(*v));
	int rc;

	if (!v)
		return -ENOMEM;
	v->store = s;
	v->refs = 1;
	v->ds = strdup(ds);
	if (!v->ds) {
		rc = -ENOMEM;
		goto fail;
	}
	rc = tfs_commit_load(s, ds, id, &v->commit);
	if (rc)
		goto fail;
	rc = tfs_manifest_load(s, ds, &v->commit.manifest, &v->manifest);
	if (rc)
		goto fail;
	rc = tfs_schema_json(ds, &v->commit, &v->manifest, &v->schema);
	if (rc)
		goto fail;
	*out = v;
	return 0;
fail:
	tfs_version_put(v);
	return rc;
}

void tfs_version_get(struct tfs_version *v)
{
	__atomic_add_fetch(&v->refs, 1, __ATOMIC_RELAXED);
}

void tfs_version_put(struct tfs_version *v)
{
	if (!v || __atomic_sub_fetch(&v->refs, 1, __ATOMIC_ACQ_REL))
		return;
	tfs_manifest_free(&v->manifest);
	tfs_commit_free(&v->commit);
	tfs_buf_free(&v->schema);
	free(v->ds);
	free(v);
}

int tfs_version_column(const struct tfs_version *v, const char *name)
{
	for (size_t i = 0; i < v->manifest.ncols; i++)
		if (!strcmp(v->manifest.cols[i].name, name))
			return (int)i;
	return -1;
}

struct load_ctx {
	struct tfs_version *v;
	struct tfs_cache *cache;
	const struct tfs_column *col;
	size_t k;
	int urgent; /* a reader waits for the chunk (not read-ahead) */
};

/* Record a chunk damaged for good; 1 the first time (log it), so each is logged once. */
static int report_bad(const struct load_ctx *l, const struct tfs_id *id, const char *key,
		      const char *why)
{
	const uint64_t r0 = tfs_column_chunk_first(l->col, l->k);
	struct tfs_bad_chunk b = { .id = *id, .chunk = l->k, .first_row = r0 };

	b.last_row = r0 + tfs_column_chunk_rows(l->col, l->k) - 1;
	snprintf(b.where, sizeof(b.where), "%s/%s", l->v->store->url, key);
	snprintf(b.column, sizeof(b.column), "%s", l->col->name);
	snprintf(b.why, sizeof(b.why), "%s", why);
	for (char *p = b.why; *p; p++)
		*p = *p == ' ' ? '_' : *p; /* one field of the listing */
	return tfs_bad_chunk_note(&b);
}

static int load_chunk(void *arg, const struct tfs_id *id, uint8_t **data, size_t *len, size_t *cap)
{
	const struct load_ctx *l = arg;
	const struct tfs_column *c = l->col;
	const uint64_t r0 = tfs_column_chunk_first(c, l->k);
	const uint64_t nr = tfs_column_chunk_rows(c, l->k);
	const size_t raw = (size_t)(nr * c->row_bytes);
	struct tfs_buf obj = { 0 };
	char key[TFS_KEY_MAX];
	const char *why = NULL;
	uint8_t *p = NULL;
	size_t pcap = 0;
	int rc, bad = 0;

	tfs_object_key(l->v->ds, id, key); /* named in the log and the bad-rows listing */
	/* A manifest from a hostile store may claim any size: nothing over an object's 1 TiB cap
	 * is allocated, and rows x row_bytes must not wrap. */
	if (c->chunks[l->k].stored_size > TFS_OBJ_SIZE_MAX ||
	    (c->row_bytes && nr > TFS_OBJ_SIZE_MAX / c->row_bytes)) {
		why = "its manifest claims more than 1 TiB";
		bad = 1;
		rc = -EIO;
		goto out;
	}
	/* Both buffers come from the cache's pool: a steady scan reuses the same few. */
	p = tfs_cache_alloc_decoded(l->cache, raw ? raw : 1, &pcap);
	if (!p) {
		rc = -ENOMEM;
		goto out;
	}
	/* Frames a reader that jumped left cached are not read again (a cold shuffled epoch reads
	 * its first batches' rows as frames, and then their chunks whole). */
	rc = tfs_version_chunk_from_frames(l->v, l->cache, c, l->k, p, raw);
	if (!rc)
		goto done;
	obj.data = tfs_cache_alloc(l->cache, (size_t)c->chunks[l->k].stored_size + 1, &obj.cap);
	if (!obj.data) {
		rc = -ENOMEM;
		goto out;
	}
	rc = tfs_store_get_object(l->v->store, key, l->urgent ? c->chunks[l->k].stored_size : 0,
				  &obj);
	if (rc) {
		/* Missing, forbidden or failing its checksum twice: damaged for good. Other errors
		 * (the network, a 5xx after the retries) are reported as they come. */
		bad = rc == -ENOENT || rc == -EACCES || rc == -EBADMSG;
		why = rc == -ENOENT    ? "object is missing"
		      : rc == -EACCES  ? "access to the object is denied"
		      : rc == -EBADMSG ? "checksum mismatch"
		      : rc == -EPROTO  ? "written by a newer tensorfs"
				       : strerror(-rc);
		rc = rc == -ENOENT || rc == -EACCES || rc == -EBADMSG ? -EIO : rc;
		goto out;
	}
	rc = tfs_object_decode(obj.data, obj.len, TFS_OBJ_CHUNK, p, raw);
	if (rc) {
		why = rc == -EPROTO ? "written by a newer tensorfs"
				    : "size mismatch or bad encoding";
		bad = rc != -EPROTO;
		rc = -EIO;
		goto out;
	}
done:
	*data = p;
	*len = raw;
	*cap = pcap;
	p = NULL;
out:
	if (why && (!bad || report_bad(l, id, key, why))) {
		char hex[TFS_ID_HEX];

		tfs_id_hex(id, hex);
		tfs_err("%s/%s: object %s, chunk %zu of column %s (rows %" PRIu64 "..%" PRIu64
			"), %s: %s; reads of those rows fail with EIO (or, through a view with "
			"on_error=pad or skip, are bad rows)",
			l->v->store->url, key, hex, l->k, c->name, r0, r0 + nr - 1,
			bad ? "is damaged" : "cannot be read", why);
	}
	tfs_cache_release(l->cache, p, pcap);
	tfs_cache_release(l->cache, obj.data, obj.cap);
	return rc;
}

int tfs_version_chunk_get(struct tfs_version *v, struct tfs_cache *cache, size_t col, size_t k,
			  struct tfs_cache_entry **e)
{
	const struct tfs_column *c = &v->manifest.cols[col];
	struct load_ctx l = { v, cache, c, k, 1 };

	if (k >= c->nchunks)
		return -EINVAL;
	return tfs_cache_get(cache, &c->chunks[k].id, load_chunk, &l, e);
}

int tfs_version_chunk_prefetch(struct tfs_version *v, struct tfs_cache *cache, size_t col, size_t k)
{
	const struct tfs_column *c = &v->manifest.cols[col];
	struct load_ctx l = { v, cache, c, k, 0 };

	if (k >= c->nchunks)
		return -EINVAL;
	return tfs_cache_prefetch(cache, &c->chunks[k].id, load_chunk, &l);
}

ssize_t tfs_version_read(struct tfs_version *v, struct tfs_cache *cache, size_t col, uint64_t off,
			 void *buf, size_t len)
{
	const struct tfs_column *c = &v->manifest.cols[col];
	const uint64_t total = c->rows * c->row_bytes;
	size_t done = 0;

	if (off >= total || c->row_bytes == 0)
		return 0;
	if (len > total - off)
		len = (size_t)(total - off);
	while (done < len) {
		uint64_t pos = off + done;
		size_t k = tfs_column_chunk_of(c, pos / c->row_bytes), n;
		size_t in = (size_t)(pos - tfs_column_chunk_first(c, k) * c->row_bytes);
		struct tfs_cache_entry *e;
		int rc = tfs_version_chunk_get(v, cache, col, k, &e);

		if (rc)
			return rc;
		n = e->len - in;
		if (n > len - done)
			n = len - done;
		memcpy((uint8_t *)buf + done, e->data + in, n);
		tfs_cache_put(cache, e);
		done += n;
	}
	return (ssize_t)done;
}

/* --- spans of rows of any size -------------------------------------------------------------- */

void tfs_spans_init(struct tfs_spans *sp, struct tfs_version *v, struct tfs_cache *cache,
		    size_t header)
{
	memset(sp, 0, sizeof(*sp));
	sp->v = v;
	sp->cache = cache;
	sp->col = v->manifest.cols[header].offsets;
}

/* Offset number i (i <= rows of the header). */
static int span_offset(struct tfs_spans *sp, uint64_t i, uint64_t *out)
{
	const struct tfs_column *c = &sp->v->manifest.cols[sp->col];
	size_t k, in;
	int rc;

	if (i >= c->rows)
		return -EINVAL;
	k = tfs_column_chunk_of(c, i);
	if (!sp->e || sp->k != k) {
		tfs_spans_done(sp);
		rc = tfs_version_chunk_get(sp->v, sp->cache, sp->col, k, &sp->e);
		if (rc)
			return rc;
		sp->k = k;
	}
	in = (size_t)(i - tfs_column_chunk_first(c, k)) * sizeof(*out);
	if (in + sizeof(*out) > sp->e->len)
		return -EIO;
	memcpy(out, sp->e->data + in, sizeof(*out));
	return 0;
}

int tfs_spans_get(struct tfs_spans *sp, uint64_t r, uint64_t *start, uint64_t *end)
{
	int rc = span_offset(sp, r, start);

	if (!rc)
		rc = span_offset(sp, r + 1, end);
	if (!rc && *end < *start)
		rc = -EIO;
	return rc;
}

void tfs_spans_done(struct tfs_spans *sp)
{
	if (sp->e)
		tfs_cache_put(sp->cache, sp->e);
	sp->e = NULL;
}
