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
 * the object at a URL fetched as ranged GETs of the [http] part size, as many at once as its
 * `parallel` setting says, into an unnamed file: in memory (a memfd) for an object of up to 64
 * MiB, else an unlinked file in $TMPDIR (default /var/tmp), its space reserved before the fetch,
 * so that memory does not grow with the source; in memory after all, with a warning, when no
 * such file can be had. Returns the descriptor, at offset 0, or -errno (logged, naming the
 * source). */
int tfs_source_open_file(const char *path);

/* A tree source (a directory, or a prefix under a URL) as a store rooted there: list it with
 * tfs_store_list, read its files with tfs_store_get. A local directory is opened through the
 * file backend. */
int tfs_source_open_tree(const char *path, struct tfs_store **out);

#endif
