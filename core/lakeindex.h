/* SPDX-License-Identifier: MIT */
/* lakeindex: how a lake on a static web server is listed: the index files (".tensorfs-index")
 * tensorfs writes, and the HTML directory listings such servers make. */
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

/* The children named by the href="..." links of an HTML directory listing (nginx autoindex,
 * Apache, python3 -m http.server): relative links only (no scheme, no leading '/', no '?', '#'
 * or '.'), %XX and &amp; decoded; a trailing '/' marks a directory. Names handed to fn are never
 * empty, hidden or deeper than one level. Returns 0 or fn's non-zero return. */
int tfs_lakeindex_parse_html(const char *html, size_t len, tfs_store_list_fn fn, void *arg);

#endif
