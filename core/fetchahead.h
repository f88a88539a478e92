/* SPDX-License-Identifier: MIT */
/* fetchahead: the files of a tree source under a URL (an image tree on S3) fetched ahead of the
 * decoders that read them, many GETs in flight at once, so that each file's round trip is
 * hidden behind the work on the others: a decoder that fetched its own files one at a time
 * waited a round trip (tens of milliseconds on S3) for every file it decoded in one. */
#ifndef TFS_FETCHAHEAD_H
#define TFS_FETCHAHEAD_H

#include <stddef.h>
#include <stdint.h>

#include "filetree.h"
#include "store.h"

struct tfs_fetchahead;

/* How a file is fetched: tfs_store_get, or one of the caller's (a file's first bytes only). */
typedef int (*tfs_fetchahead_get_fn)(struct tfs_store *tree, const char *key, struct tfs_buf *out);

/* A file of up to TFS_FETCHAHEAD_SMALL bytes whole, in one ranged GET; -EFBIG for a larger one
 * (for a reader that takes such a file another way: as it arrives). */
#define TFS_FETCHAHEAD_SMALL (4u << 20)
int tfs_fetchahead_get_small(struct tfs_store *tree, const char *key, struct tfs_buf *out);

/* Fetch the n files name(arg, i) of tree (names stay valid until stop) with get (NULL:
 * tfs_store_get), in order, `inflight` GETs at once on threads of their own, at most `ahead`
 * (>= inflight) files fetched and not yet taken, and no further fetch begins past `hold` bytes
 * of those, except the one that the lowest file not yet taken waits for. Returns 0 or -errno. */
int tfs_fetchahead_start(struct tfs_store *tree, size_t n, const char *(*name)(void *arg, size_t i),
			 void *arg, tfs_fetchahead_get_fn get, unsigned inflight, unsigned ahead,
			 uint64_t hold, struct tfs_fetchahead **out);
/* A tree's files (tfs_filetree_list) fetched ahead with get, as many GETs at once as its store
 * takes ([http] max_inflight), up to 64 MiB of them not yet taken, and never fewer ahead than
 * `least` (a pipeline's window and its threads, so that a file decoded ahead never waits for
 * room behind one not yet begun). *out is NULL for a local tree: a file there is read in
 * microseconds, no round trip to hide. */
int tfs_fetchahead_tree(const struct tfs_filetree *ft, tfs_fetchahead_get_fn get, unsigned least,
			struct tfs_fetchahead **out);
/* File i's bytes, once they are there, moved to out (reset first): 0, or its GET's -errno. Each
 * file is taken once, by any thread, in about the order of i. */
int tfs_fetchahead_take(struct tfs_fetchahead *fa, size_t i, struct tfs_buf *out);
/* End the fetches (no further one begins; those in flight end, or fail at once after a
 * tfs_store_cancel of the tree, which an import that ends early calls first) and free fa: files
 * not taken are dropped. NULL is fine. */
void tfs_fetchahead_stop(struct tfs_fetchahead *fa);

#endif
