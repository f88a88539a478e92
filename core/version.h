/* SPDX-License-Identifier: MIT */
/* version: one commit of a dataset opened for reading: its manifest, schema and chunk reads through
 * the chunk cache. Refcounted; immutable once open. */
#ifndef TFS_VERSION_H
#define TFS_VERSION_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "cache.h"
#include "format.h"

struct tfs_workpool;

struct tfs_version {
	struct tfs_store *store; /* borrowed: outlives every version */
	char *ds;
	struct tfs_commit commit;
	struct tfs_manifest manifest;
	struct tfs_buf schema; /* schema.json */
	unsigned refs;	       /* atomic */
};

/* Open commit `id` of dataset ds; the version starts with one reference. */
int tfs_version_open(struct tfs_store *s, const char *ds, const struct tfs_id *id,
		     struct tfs_version **out);
void tfs_version_get(struct tfs_version *v);
void tfs_version_put(struct tfs_version *v);

/* Index of a column by name, or -1. */
int tfs_version_column(const struct tfs_version *v, const char *name);

/* Pin chunk k of column col in the cache, fetching and verifying it on a miss. A damaged chunk is
 * -EIO (logged once per object, naming it and the rows it covers). */
int tfs_version_chunk_get(struct tfs_version *v, struct tfs_cache *cache, size_t col, size_t k,
			  struct tfs_cache_entry **e);

/* Pin the cache entry holding byte `in` of chunk k of column col, for a reader that jumps (a few
 * rows here and there): the whole chunk when it is cached or loading; otherwise, for a framed
 * chunk, only the frame holding `in`, found through the chunk's frame index (itself cached) and
 * read and checked by ranged reads, so that a row costs a frame's decode, not the chunk's. A chunk
 * that is not framed, and any failure on the frame path, goes to tfs_version_chunk_get, whose
 * error (and log line) is this one's. *base is the chunk offset of (*e)->data[0]. */
int tfs_version_piece_get(struct tfs_version *v, struct tfs_cache *cache, struct tfs_workpool *pool,
			  size_t col, size_t k, uint64_t in, uint64_t want,
			  struct tfs_cache_entry **e, uint64_t *base);
/* want: the bytes from in on that the caller is about to read (0: just byte in). When they cover
 * the whole chunk, the chunk is read whole. When they span frames none of which is cached, the
 * run is read with one request and each frame cached; pool (NULL: none) decodes the frames after
 * the first meanwhile, at TFS_WORK_WAITED. */

/* Chunk k of column c whole, raw bytes into dst, from the frames of it that readers who jump
 * left in the cache (copied, not read and decoded again) and ranged reads of the others, a run
 * of them a request, each frame checked as tfs_version_piece_get checks it. For the chunk's
 * loader (tfs_version_chunk_get), before it reads the object whole. Local stores only: on a
 * remote one a request costs a round trip, and a disk cache in front of it keeps whole objects.
 * Returns 0 done, 1 where it does not apply (not local, the chunk's index or every frame of it
 * not cached, not framed), or -errno (the caller then reads the object whole, which finds and
 * reports any damage). */
int tfs_version_chunk_from_frames(struct tfs_version *v, struct tfs_cache *cache,
				  const struct tfs_column *c, size_t k, uint8_t *dst, size_t raw);

/* Load the frame index of chunk k of column col into the cache ahead of a reader that jumps
 * (a column's indexes are loaded together when it starts to), unless the chunk or its index is
 * cached. Returns 1 if it loaded, 0 if not needed, or -errno. */
int tfs_version_index_prefetch(struct tfs_version *v, struct tfs_cache *cache, size_t col,
			       size_t k);

/* Load chunk k of column col into the cache ahead of readers (tfs_cache_prefetch). Returns 1 if
 * it loaded the chunk, 0 if it was cached or loading already, or -errno. */
int tfs_version_chunk_prefetch(struct tfs_version *v, struct tfs_cache *cache, size_t col,
			       size_t k);

/* Copy len bytes of column col's row-major data starting at data offset off into buf. Returns the
 * byte count (short at the end of the data) or -errno. */
ssize_t tfs_version_read(struct tfs_version *v, struct tfs_cache *cache, size_t col, uint64_t off,
			 void *buf, size_t len);

/* Where rows of a ragged, text or bytes column lie in its data part, read through the cache from
 * its offsets part with the chunk last used kept pinned: rows in order cost one lookup a chunk. */
struct tfs_spans {
	struct tfs_version *v;
	struct tfs_cache *cache;
	size_t col; /* the offsets part */
	size_t k;   /* the pinned chunk, when e */
	struct tfs_cache_entry *e;
};

/* Spans of the column whose header is column header of v (not fixed). */
void tfs_spans_init(struct tfs_spans *sp, struct tfs_version *v, struct tfs_cache *cache,
		    size_t header);
/* Row r's bytes are data[*start, *end). -EIO when the offsets go backwards or the chunk is short;
 * -EINVAL for a row out of range. */
int tfs_spans_get(struct tfs_spans *sp, uint64_t r, uint64_t *start, uint64_t *end);
/* Unpin; sp may be used again. */
void tfs_spans_done(struct tfs_spans *sp);

#endif
