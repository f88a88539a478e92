/* SPDX-License-Identifier: MIT */
/* version: one commit of a dataset opened for reading: its manifest, schema and chunk reads through
 * the chunk cache. Refcounted; immutable once open. */
#include "version.h"
#include "badchunks.h"
#include "rng.h"
#include "workpool.h"

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
	p = tfs_cache_alloc_decoded(l->cache, raw ? raw : 1, &pcap);
	if (!p) {
		rc = -ENOMEM;
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

/* --- frames of a chunk, for readers that jump --------------------------------------------- */

#define INDEX_PIECE UINT32_MAX /* the frame index's key; frames are 0..n-1 */
#define PROBE_BYTES 4096       /* a first read that holds the index of up to 250 frames */

struct piece_ctx {
	struct tfs_version *v;
	struct tfs_cache *cache;
	const struct tfs_column *c;
	size_t k;
	const struct tfs_frames *t; /* frame loads */
	uint32_t i;
};

/* Cache keys of a chunk's frame index and frames: the chunk's id with its first 16 bytes (the
 * cache's shard and bucket) XORed with two mixes of piece + 1. A mix is a bijection that maps
 * only 0 to 0, so each piece has its own key and none is the chunk's id; another object's key
 * would need two SHA-256 ids that differ by a given 16-byte mask and agree in 16 bytes. (A
 * SHA-256 of the chunk's id and the piece took 0.9 us, twice or more a frame read.) */
static void piece_key(const struct tfs_id *chunk, uint32_t piece, struct tfs_id *out)
{
	const uint64_t p = (uint64_t)piece + 1;
	const uint64_t mask[2] = { tfs_rng_mix(p), tfs_rng_mix(p + 0x9e3779b97f4a7c15ull) };
	uint64_t w[2];

	*out = *chunk;
	memcpy(w, out->b, sizeof(w));
	w[0] ^= mask[0];
	w[1] ^= mask[1];
	memcpy(out->b, w, sizeof(w));
}

static ssize_t read_range(const struct piece_ctx *p, uint64_t off, void *buf, size_t len)
{
	char key[TFS_KEY_MAX];
	ssize_t got;

	tfs_object_key(p->v->ds, &p->c->chunks[p->k].id, key);
	got = tfs_store_get_range(p->v->store, key, off, buf, len);
	return got >= 0 && (size_t)got != len ? -EIO : got;
}

/* The index entry: a struct tfs_frames, with n 0 for a chunk that is not framed. */
static int load_index(void *arg, const struct tfs_id *key, uint8_t **data, size_t *len, size_t *cap)
{
	const struct piece_ctx *p = arg;
	const uint64_t obj_len = p->c->chunks[p->k].stored_size;
	struct tfs_frames *t = NULL;
	size_t ilen, have = obj_len < PROBE_BYTES ? (size_t)obj_len : PROBE_BYTES;
	uint8_t *buf = malloc(PROBE_BYTES);
	ssize_t got;
	int rc;

	(void)key;
	if (!buf)
		return -ENOMEM;
	got = read_range(p, 0, buf, have);
	rc = got < 0 ? (int)got : tfs_frames_index_len(buf, have, &ilen);
	if (rc == 1) {
		rc = (t = calloc(1, sizeof(*t))) ? 0 : -ENOMEM;
		goto out;
	}
	if (!rc && ilen > have) {
		uint8_t *more = realloc(buf, ilen);

		rc = !more ? -ENOMEM : (got = read_range(p, 0, more, ilen)) < 0 ? (int)got : 0;
		buf = more ? more : buf;
	}
	if (!rc)
		rc = tfs_frames_parse(buf, ilen, obj_len, &t);
out:
	free(buf);
	if (rc)
		return rc;
	*data = (uint8_t *)t;
	*len = sizeof(*t) + t->n * sizeof(t->f[0]);
	*cap = 0;
	return 0;
}

/* Frame p->i from its stored bytes src (read already, or read here when src is NULL). */
static int frame_from(const struct piece_ctx *p, const uint8_t *src, uint8_t **data, size_t *len,
		      size_t *cap)
{
	const struct tfs_frame *f = &p->t->f[p->i];
	size_t scap = 0, dcap = 0;
	uint8_t *own = src ? NULL : tfs_cache_alloc_small(p->cache, f->len, &scap);
	uint8_t *dst = tfs_cache_alloc_decoded(p->cache, f->raw, &dcap);
	ssize_t got = 0;
	int rc;

	if ((!src && !own) || !dst) {
		rc = -ENOMEM;
		goto out;
	}
	if (!src)
		got = read_range(p, f->off, own, f->len);
	rc = got < 0 ? (int)got : tfs_frame_decode(p->t, p->i, src ? src : own, dst);
	if (!rc) {
		*data = dst;
		*len = f->raw;
		*cap = dcap;
		dst = NULL;
	}
out:
	tfs_cache_release(p->cache, own, scap);
	tfs_cache_release(p->cache, dst, dcap);
	return rc;
}

static int load_frame(void *arg, const struct tfs_id *key, uint8_t **data, size_t *len, size_t *cap)
{
	(void)key;
	return frame_from(arg, NULL, data, len, cap);
}

/* A run of frames read with one request: frame p->i decoded from its place in the run. */
struct run_ctx {
	struct piece_ctx p;
	const uint8_t *run;
	uint64_t run_off; /* the object offset of run[0] */
};

static int load_frame_in_run(void *arg, const struct tfs_id *key, uint8_t **data, size_t *len,
			     size_t *cap)
{
	const struct run_ctx *r = arg;

	(void)key;
	return frame_from(&r->p, r->run + (r->p.t->f[r->p.i].off - r->run_off), data, len, cap);
}

#define RUN_MAX_BYTES (4u << 20) /* stored bytes one request reads for a run of frames */

/* A frame of a run after the first, decoded into the cache on the pool while the reader decodes
 * the first: the 16 frames of 64 KiB of a page fault's 1 MiB read-around are decoded side by
 * side, not one after another while the fault waits. */
struct frame_job {
	struct tfs_work w; /* first: the task is the job */
	struct run_ctx r;
	struct tfs_id key;
};

/* Frame r->p.i of the run, kept in the cache for the reads that follow; a failure here is
 * theirs to meet. */
static void cache_run_frame(struct run_ctx *r, const struct tfs_id *key)
{
	struct tfs_cache_entry *e;

	if (!tfs_cache_get(r->p.cache, key, load_frame_in_run, r, &e))
		tfs_cache_put(r->p.cache, e);
}

static int frame_job_run(struct tfs_work *w)
{
	struct frame_job *j = (struct frame_job *)w;

	cache_run_frame(&j->r, &j->key);
	return 0;
}

/* Frames i..j of the chunk (all wanted by one read) with one request when frame i is not cached:
 * each decoded into its own cache entry, those after i on pool (when given) while this thread
 * decodes i; *e: frame i's, pinned. Frames after i that do not fit RUN_MAX_BYTES are left to
 * their own loads. Returns once every frame of the run is decoded: they read the run's buffer. */
static int get_frame_run(struct piece_ctx *p, struct tfs_workpool *pool, uint32_t i, uint32_t j,
			 struct tfs_cache_entry **e)
{
	const struct tfs_column *c = p->c;
	struct run_ctx r = { *p, NULL, p->t->f[i].off };
	struct frame_job *jobs = NULL;
	struct tfs_workgroup g;
	struct tfs_id key;
	uint8_t *run = NULL;
	size_t cap = 0, bytes;
	ssize_t got;
	int rc;

	while (j > i && p->t->f[j].off + p->t->f[j].len - r.run_off > RUN_MAX_BYTES)
		j--;
	piece_key(&c->chunks[p->k].id, i, &key);
	if (j == i || tfs_cache_contains(p->cache, &key)) {
		p->i = i;
		return tfs_cache_get(p->cache, &key, load_frame, p, e);
	}
	bytes = (size_t)(p->t->f[j].off + p->t->f[j].len - r.run_off);
	run = tfs_cache_alloc(p->cache, bytes, &cap);
	if (!run)
		return -ENOMEM;
	got = read_range(p, r.run_off, run, bytes);
	rc = got < 0 ? (int)got : 0;
	r.run = run;
	if (!rc && pool)
		jobs = calloc(j - i, sizeof(*jobs));
	if (jobs) {
		tfs_workgroup_init(&g, pool);
		for (uint32_t m = i + 1; m <= j; m++) {
			struct frame_job *fj = &jobs[m - i - 1];

			fj->w.run = frame_job_run;
			fj->r = r;
			fj->r.p.i = m;
			piece_key(&c->chunks[p->k].id, m, &fj->key);
			tfs_workgroup_submit(&g, &fj->w, TFS_WORK_WAITED);
		}
	} else {
		for (uint32_t m = j; !rc && m > i; m--) {
			r.p.i = m;
			piece_key(&c->chunks[p->k].id, m, &key);
			cache_run_frame(&r, &key);
		}
	}
	if (!rc) {
		r.p.i = i;
		piece_key(&c->chunks[p->k].id, i, &key);
		rc = tfs_cache_get(p->cache, &key, load_frame_in_run, &r, e);
	}
	if (jobs) {
		(void)tfs_workgroup_wait(&g); /* the jobs report nothing: see cache_run_frame */
		tfs_workgroup_destroy(&g);
		free(jobs);
	}
	tfs_cache_release(p->cache, run, cap);
	return rc;
}

int tfs_version_piece_get(struct tfs_version *v, struct tfs_cache *cache, struct tfs_workpool *pool,
			  size_t col, size_t k, uint64_t in, uint64_t want,
			  struct tfs_cache_entry **e, uint64_t *base)
{
	const struct tfs_column *c = &v->manifest.cols[col];
	struct piece_ctx p = { v, cache, c, k, NULL, 0 };
	struct tfs_cache_entry *ix;
	struct tfs_id key;
	uint64_t last;
	uint32_t i;
	int rc;

	if (k >= c->nchunks)
		return -EINVAL;
	*base = 0;
	if (!tfs_cache_get_ready(cache, &c->chunks[k].id, e))
		return 0;
	piece_key(&c->chunks[k].id, INDEX_PIECE, &key);
	rc = tfs_cache_get(cache, &key, load_index, &p, &ix);
	if (rc)
		goto whole;
	p.t = (const struct tfs_frames *)ix->data;
	if (p.t->n == 0 || in >= p.t->raw_size) {
		tfs_cache_put(cache, ix);
		goto whole;
	}
	i = (uint32_t)(in / p.t->frame_raw);
	last = want > p.t->raw_size - in ? p.t->raw_size - 1 : in + (want ? want : 1) - 1;
	*base = (uint64_t)i * p.t->frame_raw;
	rc = get_frame_run(&p, pool, i, (uint32_t)(last / p.t->frame_raw), e);
	tfs_cache_put(cache, ix); /* p.t is gone from here on */
	if (!rc)
		return 0;
whole:
	*base = 0;
	return tfs_version_chunk_get(v, cache, col, k, e);
}

int tfs_version_index_prefetch(struct tfs_version *v, struct tfs_cache *cache, size_t col, size_t k)
{
	const struct tfs_column *c = &v->manifest.cols[col];
	struct piece_ctx p = { v, cache, c, k, NULL, 0 };
	struct tfs_cache_entry *e;
	struct tfs_id key;
	int rc;

	if (k >= c->nchunks)
		return -EINVAL;
	if (tfs_cache_contains(cache, &c->chunks[k].id))
		return 0;
	piece_key(&c->chunks[k].id, INDEX_PIECE, &key);
	if (tfs_cache_contains(cache, &key))
		return 0;
	/* A plain load, not a prefetch: an index is the reader's own metadata, not chunk data
	 * read ahead (the cache's read-ahead counters stay the chunks'). */
	rc = tfs_cache_get(cache, &key, load_index, &p, &e);
	if (rc)
		return rc;
	tfs_cache_put(cache, e);
	return 1;
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
