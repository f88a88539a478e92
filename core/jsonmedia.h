/* SPDX-License-Identifier: MIT */
/* jsonmedia: the media fields of a JSON Lines import (--media FIELD=KIND): which fields they are,
 * and each record's files decoded into its row. Under a URL, a block's files (those of up to
 * TFS_FETCHAHEAD_SMALL bytes) are fetched ahead of the rows that decode them, many GETs at once
 * (fetchahead.h): one at a time, each record waited two round trips (a HEAD and a GET) for a
 * decode of a millisecond or two. */
#ifndef TFS_JSONMEDIA_H
#define TFS_JSONMEDIA_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "import.h"
#include "jsonkinds.h"

/* A block's lines when records name media: its decodes, not its lines' parse, are the work, so
 * that even a small manifest makes a block for every thread. */
#define TFS_JMEDIA_BLOCK (16u << 10)

/* Mark f's fields that media names (NULL: none) with their kind. -EINVAL (logged) when one is
 * not a text field of the first object. */
int tfs_jmedia_mark(struct tfs_jfield *f, size_t nf, const struct tfs_media_fields *media);

/* The tree under base that a block's files are fetched from, when there is one: base is a URL
 * and f has a media field; else *out is NULL. tfs_store_close it after the import. *inflight:
 * the GETs a block's fetch runs at once, up to 32 of the store's max_inflight (the blocks share
 * the store's; the blocks queued behind those parsed stop at their share of the bytes held,
 * so that those parsed have the connections). */
int tfs_jmedia_tree(const char *base, const struct tfs_jfield *f, size_t nf, struct tfs_store **out,
		    unsigned *inflight);

/* A block's media files being fetched ahead of its rows. */
struct tfs_jmedia;

/* Begin fetching the files that the lines of [p, end) name in f's media fields (relative paths:
 * an absolute one is a local file), in the order of the lines, from tree (NULL: nothing
 * is fetched ahead; *out NULL), `inflight` at once (tfs_jmedia_tree's), holding up to `hold`
 * bytes of them not yet used. */
int tfs_jmedia_begin(struct tfs_store *tree, unsigned inflight, const char *p, const char *end,
		     const struct tfs_jfield *f, size_t nf, uint64_t hold, struct tfs_jmedia **out);
/* Record obj's media fields (line `line` of the block, as tfs_jlines numbers it), each decoded
 * into media[i] (tfs_media_value's encoding), from jm's fetch where it fetched the file (jm may
 * be NULL). 0 and *bad NULL; 0 and *bad = why, the record's fault (a file missing or not
 * decoding); or -errno, the import's end (logged). */
int tfs_jmedia_row(struct tfs_jmedia *jm, uint64_t line, json_t *obj, const struct tfs_jfield *f,
		   size_t nf, const char *base, const struct tfs_media_fields *mf,
		   struct tfs_buf *media, char *why, size_t why_cap, const char **bad);
/* End the block's fetch (files fetched and not used are dropped). NULL is fine. */
void tfs_jmedia_end(struct tfs_jmedia *jm);

#endif
