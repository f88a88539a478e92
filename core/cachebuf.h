/* SPDX-License-Identifier: MIT */
/* cachebuf: the chunk cache's buffers, apart from its policy (cache.c decides what stays; this
 * hands out and takes back memory): a pool of freed buffers by size class, slabs for small
 * buffers, and, once started, one arena for decoded chunks that a device reads. cache.h's
 * tfs_cache_alloc* and tfs_cache_release describe each call; these are what they forward to. */
#ifndef TFS_CACHEBUF_H
#define TFS_CACHEBUF_H

#include <stddef.h>
#include <stdint.h>

struct tfs_cachebuf;

struct tfs_cachebuf_stats {
	uint64_t pool_bytes, pool_reuses; /* the pool: bytes kept now, allocations served */
	uint64_t arena_bytes, arena_used, arena_full; /* the arena, once started (0 before) */
};

/* Buffers for a cache of budget bytes: its pool keeps an eighth of that, 32 MiB at most. */
int tfs_cachebuf_create(uint64_t budget, struct tfs_cachebuf **out);
/* After every buffer went back (or is no longer used). */
void tfs_cachebuf_destroy(struct tfs_cachebuf *b);
void *tfs_cachebuf_alloc(struct tfs_cachebuf *b, size_t len, size_t *cap);
void *tfs_cachebuf_alloc_small(struct tfs_cachebuf *b, size_t len, size_t *cap);
void *tfs_cachebuf_alloc_decoded(struct tfs_cachebuf *b, size_t len, size_t *cap);
/* bytes 0: the budget, a quarter more and 64 MiB. */
int tfs_cachebuf_arena_start(struct tfs_cachebuf *b, uint64_t bytes, uint8_t **base, uint64_t *len);
int tfs_cachebuf_in_arena(const struct tfs_cachebuf *b, const void *p);
void tfs_cachebuf_release(struct tfs_cachebuf *b, void *p, size_t cap);
void tfs_cachebuf_stats(struct tfs_cachebuf *b, struct tfs_cachebuf_stats *st);

#endif
