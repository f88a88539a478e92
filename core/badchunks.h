/* SPDX-License-Identifier: MIT */
/* badchunks: the chunks this process found damaged for good: an object that fails its checksum
 * again after a refetch, that does not decode, or that the store answers missing or forbidden.
 * Every node that reads the object finds the same, so readers that skip or pad bad rows
 * (a view's on_error) decide alike everywhere. Transient failures (timeouts, 5xx after the
 * retries) are not recorded. Process-wide; bounded. */
#ifndef TFS_BADCHUNKS_H
#define TFS_BADCHUNKS_H

#include <stdint.h>

#include "format.h"
#include "util.h"

#define TFS_BAD_CHUNKS_MAX 4096 /* kept; later ones are counted only */

struct tfs_bad_chunk {
	struct tfs_id id;
	char where[1024]; /* store URL and object key */
	char column[136];
	uint64_t chunk, first_row, last_row;
	char why[64];
};

/* Record b; returns 1 the first time its id is recorded (the caller logs it), else 0. */
int tfs_bad_chunk_note(const struct tfs_bad_chunk *b);
/* How many chunks have been recorded so far (a lock-free read): 0 while none is, and a reader
 * that keeps its own map of bad chunks rebuilds it when this moves. */
unsigned tfs_bad_chunks_generation(void);
/* The recorded ids, sorted, in a malloc'd array (n may be 0), for tfs_bad_chunks_search. */
int tfs_bad_chunks_ids(struct tfs_id **ids, size_t *n);
/* Whether id is among ids[0..n) from tfs_bad_chunks_ids: O(log n). */
int tfs_bad_chunks_search(const struct tfs_id *ids, size_t n, const struct tfs_id *id);
/* The record as text: a header line, then a line per chunk: "column chunk first_row last_row
 * object reason". */
int tfs_bad_chunks_text(struct tfs_buf *out);

#endif
