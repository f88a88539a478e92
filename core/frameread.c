/* SPDX-License-Identifier: MIT */
/* frameread: the frames of a chunk, for readers that jump (tfs_version_piece_get): a chunk's
 * frame index and its frames, each its own cache entry, read by ranged reads. Part of the version
 * module (version.h). */
#include "version.h"
#include "rng.h"
#include "workpool.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

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

/* Frame p->i from its stored bytes src (read already, or read here when src is NULL: straight
 * into the entry's buffer for a frame kept as it is). */
static int frame_from(const struct piece_ctx *p, const uint8_t *src, uint8_t **data, size_t *len,
		      size_t *cap)
{
	const struct tfs_frame *f = &p->t->f[p->i];
	const int in_place = !src && f->stored;
	size_t scap = 0, dcap = 0;
	uint8_t *own = src || in_place ? NULL : tfs_cache_alloc_small(p->cache, f->len, &scap);
	uint8_t *dst = tfs_cache_alloc_decoded(p->cache, f->raw, &dcap);
	ssize_t got = 0;
	int rc;

	if ((!src && !in_place && !own) || !dst) {
		rc = -ENOMEM;
		goto out;
	}
	if (!src)
		got = read_range(p, f->off, in_place ? dst : own, f->len);
	if (got < 0)
		rc = (int)got;
	else if (in_place)
		rc = tfs_frame_check(p->t, p->i, dst);
	else
		rc = tfs_frame_decode(p->t, p->i, src ? src : own, dst);
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
	/* A read of the whole chunk reads it whole: one request, and no index. */
	if (in == 0 && want >= tfs_column_chunk_rows(c, k) * c->row_bytes)
		goto whole;
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

/* Copy the cached frames of p's chunk into dst, marking each in have; returns how many. */
static uint32_t copy_cached_frames(const struct piece_ctx *p, uint8_t *dst, uint8_t *have)
{
	const struct tfs_frames *t = p->t;
	uint32_t held = 0;

	for (uint32_t i = 0; i < t->n; i++) {
		struct tfs_cache_entry *e;
		struct tfs_id key;

		piece_key(&p->c->chunks[p->k].id, i, &key);
		if (tfs_cache_get_ready(p->cache, &key, &e))
			continue;
		if (e->len == t->f[i].raw) {
			memcpy(dst + (uint64_t)i * t->frame_raw, e->data, e->len);
			have[i] = 1;
			held++;
		}
		tfs_cache_put(p->cache, e);
	}
	return held;
}

int tfs_version_chunk_from_frames(struct tfs_version *v, struct tfs_cache *cache,
				  const struct tfs_column *c, size_t k, uint8_t *dst, size_t raw)
{
	struct piece_ctx p = { v, cache, c, k, NULL, 0 };
	struct tfs_cache_entry *ix;
	uint8_t *have = NULL, *run = NULL;
	size_t cap = 0;
	struct tfs_id key;
	int rc = 1;

	if (!tfs_store_is_local(v->store))
		return 1;
	piece_key(&c->chunks[k].id, INDEX_PIECE, &key);
	if (tfs_cache_get_ready(cache, &key, &ix))
		return 1;
	p.t = (const struct tfs_frames *)ix->data;
	if (!p.t->n || p.t->raw_size != raw || !(have = calloc(p.t->n, 1)) ||
	    !copy_cached_frames(&p, dst, have))
		goto out;
	rc = 0;
	for (uint32_t i = 0, j; !rc && i < p.t->n; i = j + 1) {
		const struct tfs_frame *f = p.t->f;
		size_t bytes;
		ssize_t got;

		j = i;
		if (have[i])
			continue;
		while (j + 1 < p.t->n && !have[j + 1] &&
		       f[j + 1].off + f[j + 1].len - f[i].off <= RUN_MAX_BYTES)
			j++;
		bytes = (size_t)(f[j].off + f[j].len - f[i].off);
		if (bytes > cap) {
			tfs_cache_release(cache, run, cap);
			cap = 0;
			if (!(run = tfs_cache_alloc(cache, bytes, &cap))) {
				rc = -ENOMEM;
				break;
			}
		}
		got = read_range(&p, f[i].off, run, bytes);
		rc = got < 0 ? (int)got : 0;
		for (uint32_t m = i; !rc && m <= j; m++)
			rc = tfs_frame_decode(p.t, m, run + (f[m].off - f[i].off),
					      dst + (uint64_t)m * p.t->frame_raw);
	}
out:
	tfs_cache_release(cache, run, cap);
	free(have);
	tfs_cache_put(cache, ix);
	return rc;
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
