/* SPDX-License-Identifier: MIT */
/* arena: one fixed region of address space that the chunk cache's buffers come from once it is
 * started, so that a front end can hand the whole region to a device driver once (gpu/: CUDA
 * registers it and its kernels read cached chunks in place) instead of a buffer at a time.
 * Buffers are runs of TFS_ARENA_GRANULE bytes found first-fit in a bitmap; a full arena is the
 * caller's cue to allocate elsewhere. Pages are reserved, not committed, until first written. */
#ifndef TFS_ARENA_H
#define TFS_ARENA_H

#include <stddef.h>
#include <stdint.h>

#define TFS_ARENA_GRANULE (64u << 10)

struct tfs_arena;

/* A region of at least bytes (rounded up to 2 MiB, marked for transparent huge pages). */
int tfs_arena_create(uint64_t bytes, struct tfs_arena **out);
/* Runs of a region the caller owns, [base, base + bytes) (bytes a multiple of the granule),
 * which may be in another address space (device memory): never touched here. */
int tfs_arena_create_over(uint8_t *base, uint64_t bytes, struct tfs_arena **out);
/* Unmaps the region it made, whether or not its buffers were given back. NULL is fine. */
void tfs_arena_destroy(struct tfs_arena *a);

/* A buffer of at least len bytes (its capacity, granules, in *cap), or NULL when no run of free
 * granules is long enough. */
void *tfs_arena_alloc(struct tfs_arena *a, size_t len, size_t *cap);
/* Give back a buffer tfs_arena_alloc returned. */
void tfs_arena_free(struct tfs_arena *a, void *p);
/* Whether p lies in the region. */
int tfs_arena_owns(const struct tfs_arena *a, const void *p);
/* The region. */
void tfs_arena_span(const struct tfs_arena *a, uint8_t **base, uint64_t *bytes);

/* Commit the pages of [p, p + len), part of a region tfs_arena_create made, on up to threads
 * threads at once (at most TFS_ARENA_POPULATE_THREADS): each page not yet committed is faulted in
 * (zeroed by the kernel), and bytes already there are left as they are, so buffers in use may be
 * written meanwhile. For a driver about to pin the range, which would fault every page in itself,
 * one after another, while other callers of the driver wait. 0, or -errno (-EINVAL from a kernel
 * before Linux 5.14): then nothing is wrong, only not committed ahead. */
#define TFS_ARENA_POPULATE_THREADS 16
int tfs_arena_populate(uint8_t *p, uint64_t len, unsigned threads);

struct tfs_arena_stats {
	uint64_t bytes;	 /* the region */
	uint64_t used;	 /* in buffers handed out, now */
	uint64_t allocs; /* buffers handed out */
	uint64_t full;	 /* requests it could not serve */
};
void tfs_arena_stats(struct tfs_arena *a, struct tfs_arena_stats *out);

#endif
