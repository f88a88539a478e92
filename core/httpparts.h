/* SPDX-License-Identifier: MIT */
/* httpparts: a whole object fetched as ranges of it, many at once (tfs_parallel). The ranges'
 * requests are the caller's (tfs_http_range_fn): a store signs its own. */
#ifndef TFS_HTTPPARTS_H
#define TFS_HTTPPARTS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "http.h"
#include "util.h"
#include "workpool.h"

/* Fetch one range [off, off + len) into dst; returns the bytes placed (short only at the end of
 * the object) and sets *total to the object size when the reply says it (-1 otherwise). */
typedef ssize_t (*tfs_http_range_fn)(void *arg, uint64_t off, void *dst, size_t len,
				     int64_t *total);

/* A whole object by ranges: the first part_size bytes first (or out's capacity less one, when
 * the caller sized out for the object and that is smaller); when the object is larger, the rest
 * in part_size ranges, `parallel` at a time. out is reset first. Returns 0 or -errno. */
int tfs_http_get_parts(struct tfs_workpool *pool, tfs_http_range_fn fn, void *arg,
		       uint64_t part_size, unsigned parallel, struct tfs_buf *out);

/* A whole object of exactly `size` bytes that a reader is waiting for, as up to `parallel`
 * ranges of 1 MiB or more, all requested at once, so that it arrives in a fraction of what one
 * connection takes (each connection's rate is capped on S3, and a new one starts TCP's slow
 * start). An object no larger than that is one request. out is reset first. Returns 0, -EIO
 * when the object is not `size` bytes, or another -errno. */
int tfs_http_get_split(struct tfs_workpool *pool, tfs_http_range_fn fn, void *arg, uint64_t size,
		       unsigned parallel, struct tfs_buf *out);

/* A whole object: by tfs_http_get_split when its size is known (size > 0: a reader waits for
 * it), else by tfs_http_get_parts in h's part size. Bytes only: what they are is the caller's
 * business (tfs_store_get_object checks objects). */
int tfs_http_get_whole(struct tfs_http *h, tfs_http_range_fn fn, void *arg, uint64_t size,
		       struct tfs_buf *out);

#endif
