/* SPDX-License-Identifier: MIT */
/* batchload: the chunks a batch of rows reads, loaded at once on the pool. A gather pins its
 * chunks one after the other; on a cold cache each miss would be a load of its own, one at a
 * time. At its first miss the gather starts loads of every chunk the rest of its rows read (whole
 * chunks; pieces when it reads frames) on the pool, and waits for the slowest instead of their sum.
 * The gather pins each chunk itself: a load not started yet by then is made by the gather, and the
 * load finds it cached; one under way is joined. */
#ifndef TFS_BATCHLOAD_H
#define TFS_BATCHLOAD_H

#include <stddef.h>
#include <stdint.h>

#include "cache.h"
#include "version.h"
#include "workpool.h"

struct tfs_batch_load;

/* One gather's loads: its thread's alone (the loads read only their own job). */
struct tfs_batch_loads {
	struct tfs_workgroup g;	     /* the loads submitted */
	struct tfs_batch_load *jobs; /* njobs of them, freed by tfs_batch_loads_end */
	size_t njobs;
	int started; /* tfs_batch_loads_start was called: it lists once per gather */
};

/* Nothing started: tfs_batch_loads_end does nothing. */
void tfs_batch_loads_init(struct tfs_batch_loads *b);
/* Start loading on pool the chunks of fixed column col that rows[0..n) lie in and the cache lacks:
 * whole chunks, as many as half the cache's budget holds; with frames, each run of rows' frames
 * (tfs_version_piece_get), runs of up to half the budget's bytes. Once per b: later calls do
 * nothing. A load's failure is left for the gather to meet when it reads the same bytes. */
void tfs_batch_loads_start(struct tfs_batch_loads *b, struct tfs_workpool *pool,
			   struct tfs_version *v, struct tfs_cache *cache, size_t col,
			   const uint64_t *rows, size_t n, int frames);
/* The same for the rows of a column of another kind than fixed (its header column): the chunks
 * of its data part that the rows' bytes lie in (read through their offsets). */
void tfs_batch_loads_start_spans(struct tfs_batch_loads *b, struct tfs_workpool *pool,
				 struct tfs_version *v, struct tfs_cache *cache, size_t header,
				 const uint64_t *rows, size_t n);
/* Drop the loads not started (the gather has made them) and wait for those under way. */
void tfs_batch_loads_end(struct tfs_batch_loads *b);

#endif
