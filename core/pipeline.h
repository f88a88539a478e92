/* SPDX-License-Identifier: MIT */
/* pipeline: items of work done on a pool in parallel and used in the order they were made, at
 * most `window` of them made and not yet used (so that what is in memory is bounded). An
 * importer makes an item on its own thread (reads a sample or a block of lines into it), the
 * pool works on it (decodes, parses), and the importer uses it (adds its rows) in order.
 *
 * Items are slots that are reused: what an item holds (buffers, images) may be kept from one use
 * to the next, and `clear` frees it at the end. */
#ifndef TFS_PIPELINE_H
#define TFS_PIPELINE_H

#include <stddef.h>

#include "workpool.h"

struct tfs_pipeline_ops {
	/* On the pool (or on the thread waiting for the item): the item's work. Problems with the
	 * item's data are the item's to record for `use`; a non-zero return ends the pipeline. */
	int (*work)(void *item);
	/* On the owner's thread, in the order the items were made; non-zero ends the pipeline
	 * and is what tfs_pipeline_next and _drain return from then on. */
	int (*use)(void *arg, void *item);
	/* Free what an item holds (may be NULL). */
	void (*clear)(void *item);
};

struct tfs_pipeline;

/* item_size bytes an item (zeroed at first), window items at most (at least 1). */
int tfs_pipeline_create(struct tfs_workpool *pool, size_t item_size, unsigned window,
			const struct tfs_pipeline_ops *ops, void *arg, struct tfs_pipeline **out);
/* The next item to fill: a free slot, or the oldest one after its work ended and it was used.
 * NULL, with *rc the error, once the pipeline has ended in an error. */
void *tfs_pipeline_next(struct tfs_pipeline *p, int *rc);
/* Queue the item tfs_pipeline_next gave for its work. */
void tfs_pipeline_submit(struct tfs_pipeline *p);
/* Use every item made, in order. Returns the first error (0: none). */
int tfs_pipeline_drain(struct tfs_pipeline *p);
/* Stop (items not started are not worked on nor used) and free every item. */
void tfs_pipeline_free(struct tfs_pipeline *p);

#endif
