/* SPDX-License-Identifier: MIT */
/* cudareg: a host range registered with the CUDA driver a segment at a time, its pages
 * committed first. Built with -DTFS_HAVE_CUDA. */
#ifdef TFS_HAVE_CUDA

#include "cudareg.h"

#include <unistd.h>

#include <cuda_runtime_api.h>

#include "arena.h"
#include "arenareg.h"
#include "util.h"

/* One registration's walk over the range (only its thread uses it). */
struct seg_ctx {
	unsigned flags; /* cudaHostRegister's */
	struct tfs_cuda_reg *r;
};

/* A segment's pages committed on every core (at most TFS_ARENA_POPULATE_THREADS) before the
 * driver pins them: faulting in a fresh page is most of what pinning it costs, and the driver
 * does it one page after another while every other call to it waits (0.85-1.43 s for an
 * untouched arena of 5 GiB on an H200 machine, against 52 ms a GiB for touched memory). */
static void seg_prepare(void *ctx, uint8_t *p, uint64_t n)
{
	struct tfs_cuda_reg *r = ((struct seg_ctx *)ctx)->r;
	const uint64_t t0 = tfs_now_ns();

	if (r->threads && !r->commit_rc)
		r->commit_rc = tfs_arena_populate(p, n, r->threads);
	r->commit_ns += tfs_now_ns() - t0;
}

static int seg_reg(void *ctx, uint8_t *p, uint64_t n)
{
	return (int)cudaHostRegister(p, n, ((const struct seg_ctx *)ctx)->flags);
}

static void seg_unreg(void *ctx, uint8_t *p)
{
	(void)ctx;
	(void)cudaHostUnregister(p);
	(void)cudaGetLastError();
}

static int seg_delta(void *ctx, uint8_t *p, intptr_t *delta)
{
	void *d = NULL;
	const cudaError_t e = cudaHostGetDevicePointer(&d, p, 0);

	(void)ctx;
	*delta = (intptr_t)d - (intptr_t)p;
	return (int)e;
}

static const struct tfs_segment_ops seg_ops = {
	.prepare = seg_prepare,
	.reg = seg_reg,
	.unreg = seg_unreg,
	.delta = seg_delta,
};

unsigned tfs_cuda_commit_threads(void)
{
	const long cpus = sysconf(_SC_NPROCESSORS_ONLN);

	return cpus >= 1 && cpus < TFS_ARENA_POPULATE_THREADS ? (unsigned)cpus
							      : TFS_ARENA_POPULATE_THREADS;
}

int tfs_cuda_register(uint8_t *base, uint64_t len, struct tfs_cuda_reg *r)
{
	/* Read-only where the driver offers it: the device never writes the range. */
	struct seg_ctx c = {
		.flags = cudaHostRegisterPortable | cudaHostRegisterMapped |
			 cudaHostRegisterReadOnly,
		.r = r,
	};
	intptr_t delta;
	cudaError_t e;

	r->calls = 0;
	r->commit_rc = 0;
	r->commit_ns = 0;
	e = (cudaError_t)tfs_register_segments(&seg_ops, &c, base, len, TFS_CUDA_REG_SEGMENT,
					       &delta, &r->calls);
	if (e != cudaSuccess && e != cudaErrorInvalidDevice) {
		(void)cudaGetLastError();
		c.flags = cudaHostRegisterPortable | cudaHostRegisterMapped;
		e = (cudaError_t)tfs_register_segments(&seg_ops, &c, base, len,
						       TFS_CUDA_REG_SEGMENT, &delta, &r->calls);
	}
	return (int)e;
}

void tfs_cuda_unregister(uint8_t *base, uint64_t len, const struct tfs_cuda_reg *r)
{
	for (uint64_t off = 0; off < len; off += r->calls == 1 ? len : TFS_CUDA_REG_SEGMENT)
		seg_unreg(NULL, base + off);
}

#endif
