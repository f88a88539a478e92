/* SPDX-License-Identifier: MIT */
/* cudacache: the chunk cache in GPU memory (-o cache_gpu), one a device for the process: its
 * policy is core/devcache.c's, its memory and the bytes' moves are here. A batch's chunks that
 * are there are gathered device to device; the others are uploaded whole as a batch first needs
 * them (once, while room can be made) or read from host memory. Built with -DTFS_HAVE_CUDA
 * only: the header names CUDA types. */
#ifndef TFS_CUDACACHE_H
#define TFS_CUDACACHE_H

#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime_api.h>

#include "devcache.h"
#include "reader.h"

/* CUDA errors become -errno, with the cause logged once here (staging_cuda.c). */
int tfs_cuda_errno(cudaError_t e, const char *what);

/* Device dev's cache (dev current), made by the first call with bytes > 0: up to bytes of
 * device memory, taken a segment at a time (cudaMalloc) as chunks need room while the device
 * keeps headroom bytes free (0: a 32nd of its memory, at least 2 GiB), and given back a segment
 * at a time (cudaFree, the least recently used chunks' first) once less than that is free:
 * the cache's watcher looks every 100 ms while it holds memory, whether batches are being made
 * or not. NULL where there is none (bytes 0, or it could not be made: logged once). */
struct tfs_devcache *tfs_cudacache_get(int dev, uint64_t bytes, uint64_t headroom);

/* For each whole chunk the list's pins hold: its device address in addr[pin] (0: not
 * there), the entry referenced in held (*nheld of them; the caller puts them with
 * tfs_devcache_put once the batch's kernel has run). Chunks not there are uploaded on stream
 * while unused entries can make room; the stream waits for uploads other streams made. Returns
 * 0 or -errno. */
int tfs_cudacache_map(struct tfs_devcache *dc, const struct tfs_gather_list *l, cudaStream_t stream,
		      uint64_t *addr, struct tfs_devcache_entry **held, size_t *nheld);

#endif
