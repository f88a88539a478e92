/* SPDX-License-Identifier: MIT */
/* ringkeep: the slots of rings whose streams closed, kept for the next ring of the same shape.
 * A loader opens a stream an epoch (a view is an epoch's order); making its slots costs their
 * memory's allocation each time (the host backend's shared memory: 50 ms for 231 MB on a
 * 2-core VM; the cuda backend's pinned and device memory and events), and freeing them. A ring
 * of the same backend, device, slots, slot bytes and loader takes kept slots instead. Bounded
 * in bytes (the least recently kept go first) and in time: slots a stream an epoch reuses are
 * kept for the milliseconds between a stream's close and the next one's open, and need not
 * hold memory (the device's, for a CUDA ring) long after the last. Kept slots count against the
 * staging limit with the live ones: a ring that makes slots of its own first frees kept ones
 * past what the limit leaves (tfs_ringkeep_fit). Thread-safe. */
#ifndef TFS_RINGKEEP_H
#define TFS_RINGKEEP_H

#include <stdint.h>
#include <sys/types.h>

struct tfs_staging_backend;

struct tfs_ringkeep_shape {
	const struct tfs_staging_backend *be;
	int device;
	uint64_t slot_bytes;
	unsigned depth;
	uid_t uid; /* the loader: kept slots hold its batches, and only it may read them */
	gid_t gid;
};

struct tfs_ringkeep;

/* Up to budget bytes of slots kept (slot bytes x slots, over every ring kept), each for at most
 * ttl_ms milliseconds (a thread of the keep's own frees them then). */
int tfs_ringkeep_create(uint64_t budget, unsigned ttl_ms, struct tfs_ringkeep **out);
/* Frees every ring kept (the backend's destroy). NULL is fine. */
void tfs_ringkeep_free(struct tfs_ringkeep *k);

/* Keep b, the backend state of a ring of that shape, whose batches are all complete and that
 * the backend's keep accepted. Returns 0, or -ENOSPC when it alone exceeds the budget (the
 * caller frees it). Rings kept before it are freed while the bytes exceed the budget. */
int tfs_ringkeep_put(struct tfs_ringkeep *k, const struct tfs_ringkeep_shape *shape, void *b);
/* Free the least recently kept rings until at most bytes are kept: what a ring about to make
 * slots of its own leaves of the staging limit (staging.h keep_room). */
void tfs_ringkeep_fit(struct tfs_ringkeep *k, uint64_t bytes);
/* A ring kept with exactly that shape, no longer kept (the most recently kept), or NULL. */
void *tfs_ringkeep_take(struct tfs_ringkeep *k, const struct tfs_ringkeep_shape *shape);

struct tfs_ringkeep_stats {
	uint64_t budget;
	uint64_t rings, bytes; /* kept now */
	uint64_t reused;       /* rings made of kept slots */
	uint64_t dropped;      /* kept slots freed to stay in the budget or past their time */
};
void tfs_ringkeep_stats(struct tfs_ringkeep *k, struct tfs_ringkeep_stats *out);

#endif
