/* SPDX-License-Identifier: MIT */
/* gather_kernel: the CUDA kernel that executes a gather list (reader.h) into device memory,
 * reading each run where it lies in host memory the driver can reach (the cache's registered
 * arena, a pinned slot). Built by nvcc when the toolkit is present. */
#ifndef TFS_GATHER_KERNEL_H
#define TFS_GATHER_KERNEL_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* A run for the kernel: bytes at device address src (0: zeros) to offset dst of the slot. */
struct tfs_kernel_op {
	uint64_t src, dst, bytes;
};

/* The bytes a block copies at most: longer runs are split into pieces of this size before a
 * launch, so that blocks share the work evenly. */
#define TFS_GATHER_PIECE (256u << 10)

/* Launch the kernel on stream (a cudaStream_t): ops[0..nops) (struct tfs_kernel_op, every run
 * at most TFS_GATHER_PIECE bytes), in memory the device reads, into dst (device memory). Returns
 * the launch's cudaError_t (0: launched). */
int tfs_gather_kernel_launch(const void *ops, size_t nops, uint8_t *dst, void *stream);

#ifdef __cplusplus
}
#endif

#endif
