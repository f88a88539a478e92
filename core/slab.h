/* SPDX-License-Identifier: MIT */
/* slab: small buffers (frames of chunks) carved from 2 MiB regions backed by transparent huge
 * pages, so that filling a cache with them faults in one page per 2 MiB rather than one per
 * 4 KiB. On some virtual machines a page fault costs over 10 us: filling 256 MiB of 4 KiB pages
 * then takes a second of faults alone. */
#ifndef TFS_SLAB_H
#define TFS_SLAB_H

#include <stddef.h>
#include <stdint.h>

#define TFS_SLAB_BYTES (2u << 20)
#define TFS_SLAB_STEP (16u << 10) /* buffer sizes are multiples of this */
#define TFS_SLAB_MAX (256u << 10) /* and at most this */

struct tfs_slabs;

int tfs_slabs_create(struct tfs_slabs **out);
/* Frees every region, whether or not its buffers were given back. */
void tfs_slabs_destroy(struct tfs_slabs *s);

/* The buffer size that holds len bytes, or 0 when len is over TFS_SLAB_MAX. */
size_t tfs_slab_size(size_t len);
/* A buffer of size bytes (a tfs_slab_size), or NULL. Not for free() or realloc(). */
void *tfs_slab_alloc(struct tfs_slabs *s, size_t size);
/* Give a buffer back. A region whose buffers are all back is freed, but for one kept per size. */
void tfs_slab_free(struct tfs_slabs *s, void *p);

/* Bytes of regions held, and of those, bytes in buffers handed out. */
void tfs_slabs_usage(struct tfs_slabs *s, uint64_t *held, uint64_t *used);

#endif
