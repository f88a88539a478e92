/* SPDX-License-Identifier: MIT */
/* chunkpool: an import's chunks encoded and put on a worker pool while its thread reads ahead:
 * a bounded number queued (the submitter waits, helping with the work, when it is full), their
 * puts begun on the pool and ended (durable, at their keys) a batch at a time by the submitting
 * thread. Used by one thread: the one that reads the sources. */
#ifndef TFS_CHUNKPOOL_H
#define TFS_CHUNKPOOL_H

#include <stddef.h>
#include <stdint.h>

#include "format.h"
#include "store.h"
#include "util.h"
#include "workpool.h"

/* Zero-initialise with s, ds and progress set, then tfs_chunk_pool_start. */
struct tfs_chunk_pool {
	struct tfs_workpool *wp; /* NULL until started */
	struct tfs_workgroup jobs;
	unsigned max_queued; /* jobs queued or running at most */
	struct tfs_store *s;
	const char *ds;
	struct tfs_progress *progress; /* source bytes submitted */
	/* Objects the jobs have begun to put, ended (durable, at their keys) a batch at a time by
	 * the submitting thread once max_queued have gathered: fewer than 2 * max_queued at once
	 * (those and the jobs under way). */
	pthread_mutex_t lock;
	struct tfs_store_put **begun; /* 2 * max_queued; protected by lock */
	size_t nbegun;		      /* protected by lock */
	struct tfs_put_ender ender;   /* the last batch, being ended */
};

/* Start on wp's workers (an import's --threads: tfs_import_pool), which the pool owns from here
 * on, whatever this returns: tfs_chunk_pool_stop destroys it. */
int tfs_chunk_pool_start(struct tfs_chunk_pool *p, struct tfs_workpool *wp);
/* Queue raw (len bytes, rows of c; the pool takes it and frees it, also on failure) to be
 * encoded with c's codec and put, its reference written to dst once the put has begun. Waits
 * while the pool is full. */
int tfs_chunk_pool_submit(struct tfs_chunk_pool *p, uint8_t *raw, size_t len,
			  const struct tfs_column *c, struct tfs_chunk_ref *dst);
/* Wait for every chunk queued and end every put: 0 or the first error. */
int tfs_chunk_pool_drain(struct tfs_chunk_pool *p);
/* Cancel what has not started, end what was begun (never left as temporaries), free. */
void tfs_chunk_pool_stop(struct tfs_chunk_pool *p);

#endif
