/* SPDX-License-Identifier: MIT */
/* tier: a cache tier shared by many nodes on an S3-compatible store (S3 Express One Zone, MinIO,
 * Ceph RGW, any store tensorfs opens), in front of a lake's store. */
#ifndef TFS_TIER_H
#define TFS_TIER_H

#include <stdint.h>

#include "store.h"

#define TFS_TIER_QUEUE (64ull << 20) /* bytes queued for the tier at most, by default */

struct tfs_tier_stats {
	uint64_t hits;		/* object reads served by the tier */
	uint64_t misses;	/* object reads the tier did not have: from the origin */
	uint64_t bad;		/* tier objects that failed their check: ignored, origin read */
	uint64_t errors;	/* tier reads that failed otherwise: origin read */
	uint64_t hit_bytes;	/* bytes the tier served */
	uint64_t writes;	/* objects written to the tier */
	uint64_t write_bytes;	/* their bytes */
	uint64_t write_errors;	/* writes that failed (the object is simply not in the tier) */
	uint64_t dropped;	/* writes not queued: the queue was full */
	uint64_t pending_bytes; /* queued, not yet written */
};

/* Wrap origin with the tier store `tier`. Whole-object reads of object keys
 * ("<dataset>/objects/<hh>/<62 hex>") try the tier's "objects/<hh>/<62 hex>" first: an object
 * there is served only if its SHA-256 is its id and it passes tfs_object_check, so a stale,
 * truncated or forged one is counted, ignored and read from the origin; the tier makes reads
 * faster, never wrong. An object read from the origin is queued to be written to the tier by a
 * background thread (never on the reader's path; at most queue_bytes queued, beyond which
 * writes are dropped and counted). Everything else (ranges, refs, listings, writes) goes to
 * origin as it is: ranged reads cannot be checked against an id.
 *
 * The wrapper owns both stores: tfs_store_close on it closes them, after the writes under way
 * end (queued ones are dropped). */
int tfs_tier_wrap(struct tfs_store *origin, struct tfs_store *tier, uint64_t queue_bytes,
		  struct tfs_store **out);

/* Counters of a store returned by tfs_tier_wrap; -EINVAL for any other store. */
int tfs_tier_stats(struct tfs_store *s, struct tfs_tier_stats *st);

/* The origin of a tier wrapper (for its request counters); s itself otherwise. */
struct tfs_store *tfs_tier_origin(struct tfs_store *s);

/* The tier store of a tier wrapper, or NULL. */
struct tfs_store *tfs_tier_store(struct tfs_store *s);

/* Wait until no write is queued or under way (tests and benchmarks; a mount never waits). */
void tfs_tier_flush(struct tfs_store *s);

#endif
