/* SPDX-License-Identifier: MIT */
/* gather_kernel: one block a run: head bytes until the destination is 16-byte aligned, then
 * 16-byte loads where the source is aligned alike (4-byte or single bytes where it is not). */
#include "gather_kernel.h"

#include <cuda_runtime.h>

#define THREADS 256
#define UNROLL 4

__global__ void __launch_bounds__(THREADS) gather(const struct tfs_kernel_op *ops, uint8_t *dst)
{
	const struct tfs_kernel_op o = ops[blockIdx.x];
	uint8_t *d = dst + o.dst;
	const uint8_t *s = (const uint8_t *)(uintptr_t)o.src;
	uint64_t n = o.bytes, head = (16 - ((uintptr_t)d & 15)) & 15;

	if (head > n)
		head = n;
	for (uint64_t t = threadIdx.x; t < head; t += THREADS)
		d[t] = s ? s[t] : 0;
	d += head;
	n -= head;
	if (s)
		s += head;
	if (!s || ((uintptr_t)s & 15) == 0) {
		const uint64_t nv = n / 16;
		uint4 *dv = (uint4 *)d;
		const uint4 *sv = (const uint4 *)s;
		uint64_t i = threadIdx.x;

		/* UNROLL loads in flight a thread: reads from host memory wait on the link. */
		for (; i + (UNROLL - 1) * THREADS < nv; i += UNROLL * THREADS) {
			uint4 v[UNROLL];

#pragma unroll
			for (int u = 0; u < UNROLL; u++)
				v[u] = s ? sv[i + u * THREADS] : make_uint4(0, 0, 0, 0);
#pragma unroll
			for (int u = 0; u < UNROLL; u++)
				dv[i + u * THREADS] = v[u];
		}
		for (; i < nv; i += THREADS)
			dv[i] = s ? sv[i] : make_uint4(0, 0, 0, 0);
		for (uint64_t t = nv * 16 + threadIdx.x; t < n; t += THREADS)
			d[t] = s ? s[t] : 0;
	} else if (((uintptr_t)s & 3) == 0) {
		const uint64_t nw = n / 4;
		uint32_t *dw = (uint32_t *)d;
		const uint32_t *sw = (const uint32_t *)s;

		for (uint64_t i = threadIdx.x; i < nw; i += THREADS)
			dw[i] = sw[i];
		for (uint64_t t = nw * 4 + threadIdx.x; t < n; t += THREADS)
			d[t] = s[t];
	} else {
		/* Neighbouring threads read neighbouring bytes: the loads of a warp coalesce. */
		for (uint64_t t = threadIdx.x; t < n; t += THREADS)
			d[t] = s[t];
	}
}

extern "C" int tfs_gather_kernel_launch(const void *ops, size_t nops, uint8_t *dst, void *stream)
{
	/* Grids are at most 2^31 - 1 blocks wide: a larger list goes in several launches. */
	const size_t max_blocks = 0x7fffffff;

	for (size_t i = 0; i < nops; i += max_blocks) {
		const size_t n = nops - i < max_blocks ? nops - i : max_blocks;

		gather<<<(unsigned)n, THREADS, 0, (cudaStream_t)stream>>>(
			(const struct tfs_kernel_op *)ops + i, dst);
	}
	return (int)cudaGetLastError();
}
