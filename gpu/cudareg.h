/* SPDX-License-Identifier: MIT */
/* cudareg: a host range registered with the CUDA driver (mapped, read-only where the driver
 * offers it) 128 MiB a call (arenareg.h), each segment's pages committed first on several threads
 * (tfs_arena_populate): the chunk cache's arena (staging_cuda.c), and what register_rate
 * measures. Built with -DTFS_HAVE_CUDA only. */
#ifndef TFS_CUDAREG_H
#define TFS_CUDAREG_H

#include <stdint.h>

#define TFS_CUDA_REG_SEGMENT (128ull << 20) /* a call; about 20-35 ms of the driver's time */

struct tfs_cuda_reg {
	unsigned threads;   /* in: threads that commit a segment's pages first; 0: none */
	unsigned calls;	    /* out: the registrations that stand */
	int commit_rc;	    /* out: the first commit's failure (-errno): later ones not tried */
	uint64_t commit_ns; /* out: time in commits */
};

/* Threads that commit pages: every CPU, at most TFS_ARENA_POPULATE_THREADS. */
unsigned tfs_cuda_commit_threads(void);

/* Register [base, base + len) with the current device's driver: 0, or its refusal (a
 * cudaError_t) with nothing left registered. */
int tfs_cuda_register(uint8_t *base, uint64_t len, struct tfs_cuda_reg *r);

/* Undo a tfs_cuda_register that returned 0. */
void tfs_cuda_unregister(uint8_t *base, uint64_t len, const struct tfs_cuda_reg *r);

#endif
