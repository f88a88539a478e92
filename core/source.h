/* SPDX-License-Identifier: MIT */
/* source: what `tensorfs import` reads its sources from: a local path, or an object or a prefix
 * under a URL the lake stores read (s3://[REMOTE@]BUCKET/KEY, http(s)://HOST/PATH), so that a
 * dataset on object storage converts without being copied to a local disk first. */
#ifndef TFS_SOURCE_H
#define TFS_SOURCE_H

#include "store.h"

/* Whether path names an object through a store (s3://, http://, https://), not a local file. */
int tfs_source_is_url(const char *path);

/* A file source as a readable, seekable, mappable descriptor: a local file opened read-only, or
 * the object at a URL fetched in pieces into an anonymous memory file (memfd; the object is
 * held in memory while it is imported, never written to disk). Returns the descriptor or
 * -errno (logged, naming the source). */
int tfs_source_open_file(const char *path);

/* A tree source (a directory, or a prefix under a URL) as a store rooted there: list it with
 * tfs_store_list, read its files with tfs_store_get. A local directory is opened through the
 * file backend. */
int tfs_source_open_tree(const char *path, struct tfs_store **out);

#endif
