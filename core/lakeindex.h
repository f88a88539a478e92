/* SPDX-License-Identifier: MIT */
/* lakeindex: listing files (".tensorfs-index") that let a static web server list a lake. */
#ifndef TFS_LAKEINDEX_H
#define TFS_LAKEINDEX_H

#include <stddef.h>

#include "store.h"

/* The file name of an index inside a listed prefix. It starts with '.', so readers and listings
 * of every backend ignore it. */
#define TFS_LAKEINDEX_NAME ".tensorfs-index"

/* Write an index into every prefix a read-only reader lists: the lake root (its datasets), each
 * dataset, its refs/, refs/heads/ and refs/tags/. Objects are never listed by readers, so
 * objects/ gets none. Returns the number of index files written or -errno. Run it again after
 * any write that adds a dataset, branch or tag. */
int tfs_lakeindex_write(struct tfs_store *s);

/* Parse an index ("tensorfs-index 1\n" then one name per line, directories with a trailing
 * '/') and call fn for each entry. Returns 0, fn's non-zero return, or -EINVAL for a text that
 * is not an index. */
int tfs_lakeindex_parse(const char *text, size_t len, tfs_store_list_fn fn, void *arg);

#endif
