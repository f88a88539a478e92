/* SPDX-License-Identifier: MIT */
/* staging_cuda: the cuda backend: pinned host ring, device slots filled by the copy engine, IPC
 * handles for the allocation and an interprocess event per slot. Built with -DTFS_HAVE_CUDA. */
#include "staging.h"

#ifdef TFS_HAVE_CUDA

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "util.h"

_Static_assert(sizeof(cudaIpcMemHandle_t) == TFS_STAGING_IPC_BYTES, "IPC handle size");
_Static_assert(sizeof(cudaIpcEventHandle_t) == TFS_STAGING_IPC_BYTES, "IPC event handle size");

struct cuda {
	int dev;
	unsigned depth;
	uint64_t slot_bytes, size;
	uint8_t *pinned; /* depth slots, where the gather writes */
	void *dmem;	 /* depth slots on the device, exported as one IPC allocation */
	cudaStream_t stream;
	cudaEvent_t *ev; /* per slot: recorded after its host-to-device copy */
	cudaIpcMemHandle_t mh;
	cudaIpcEventHandle_t *eh;
};

/* CUDA errors become -errno here, at the module boundary, with the cause logged. */
static int cuda_errno(cudaError_t e, const char *what)
{
	tfs_err("staging: %s: %s (%s)", what, cudaGetErrorString(e), cudaGetErrorName(e));
	(void)cudaGetLastError(); /* clear it for the next call on this thread */
	switch (e) {
	case cudaErrorMemoryAllocation:
		return -ENOMEM;
	case cudaErrorNoDevice:
	case cudaErrorInsufficientDriver:
	case cudaErrorInvalidDevice:
		return -ENODEV;
	default:
		return -EIO;
	}
}

#define CK(call)                                    \
	do {                                        \
		cudaError_t e_ = (call);            \
		if (e_ != cudaSuccess) {            \
			rc = cuda_errno(e_, #call); \
			goto out;                   \
		}                                   \
	} while (0)

static int cuda_probe(int device, char *err, size_t err_cap)
{
	static int logged; /* atomic */
	int n = 0;
	cudaError_t e = cudaGetDeviceCount(&n);

	if (e != cudaSuccess) {
		(void)cudaGetLastError();
		if (!__atomic_exchange_n(&logged, 1, __ATOMIC_RELAXED))
			tfs_warn("staging: CUDA is not usable here: %s", cudaGetErrorString(e));
		snprintf(err, err_cap, "cuda:%d: no usable CUDA device (%s)", device,
			 cudaGetErrorString(e));
		return -ENODEV;
	}
	if (device < 0 || device >= n) {
		snprintf(err, err_cap, "cuda:%d: no such device (%d CUDA device%s)", device, n,
			 n == 1 ? "" : "s");
		return -ENODEV;
	}
	return 0;
}

static void cuda_destroy(void *b)
{
	struct cuda *c = b;

	if (!c)
		return;
	if (cudaSetDevice(c->dev) != cudaSuccess)
		(void)cudaGetLastError();
	if (c->stream)
		cudaStreamSynchronize(c->stream);
	for (unsigned i = 0; c->ev && i < c->depth; i++)
		if (c->ev[i])
			cudaEventDestroy(c->ev[i]);
	if (c->stream)
		cudaStreamDestroy(c->stream);
	if (c->dmem)
		cudaFree(c->dmem);
	if (c->pinned)
		cudaFreeHost(c->pinned);
	(void)cudaGetLastError();
	free(c->ev);
	free(c->eh);
	free(c);
}

static int cuda_create(const struct tfs_staging_config *cfg, uint64_t slot_bytes, void **out,
		       char *err, size_t err_cap)
{
	struct cuda *c = calloc(1, sizeof(*c));
	int rc = 0;

	if (!c)
		return -ENOMEM;
	c->dev = cfg->device;
	c->depth = cfg->depth;
	c->slot_bytes = slot_bytes;
	c->size = slot_bytes * cfg->depth;
	c->ev = calloc(cfg->depth, sizeof(*c->ev));
	c->eh = calloc(cfg->depth, sizeof(*c->eh));
	if (!c->ev || !c->eh) {
		rc = -ENOMEM;
		goto out;
	}
	CK(cudaSetDevice(c->dev));
	CK(cudaHostAlloc((void **)&c->pinned, c->size, cudaHostAllocPortable));
	CK(cudaMalloc(&c->dmem, c->size));
	CK(cudaIpcGetMemHandle(&c->mh, c->dmem));
	CK(cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking));
	for (unsigned i = 0; i < c->depth; i++) {
		CK(cudaEventCreateWithFlags(&c->ev[i],
					    cudaEventInterprocess | cudaEventDisableTiming));
		CK(cudaIpcGetEventHandle(&c->eh[i], c->ev[i]));
	}
out:
	if (rc) {
		snprintf(err, err_cap,
			 "cuda:%d: cannot set up %u slots of %llu bytes (%s; see the log)",
			 cfg->device, cfg->depth, (unsigned long long)slot_bytes,
			 rc == -ENOMEM ? "out of memory" : "CUDA error");
		cuda_destroy(c);
		return rc;
	}
	*out = c;
	return 0;
}

static int cuda_begin(void *b, unsigned slot, uint8_t **mem)
{
	struct cuda *c = b;
	int rc = 0;

	/* The pinned slot may still be the source of the copy of its previous batch. */
	CK(cudaSetDevice(c->dev));
	CK(cudaEventSynchronize(c->ev[slot]));
	*mem = c->pinned + (uint64_t)slot * c->slot_bytes;
out:
	return rc;
}

static int cuda_finish(void *b, unsigned slot, size_t bytes)
{
	struct cuda *c = b;
	const uint64_t base = (uint64_t)slot * c->slot_bytes;
	int rc = 0;

	CK(cudaSetDevice(c->dev));
	if (bytes)
		CK(cudaMemcpyAsync((uint8_t *)c->dmem + base, c->pinned + base, bytes,
				   cudaMemcpyHostToDevice, c->stream));
	/* The loader waits on this event (cudaStreamWaitEvent) before it reads the slot. */
	CK(cudaEventRecord(c->ev[slot], c->stream));
out:
	return rc;
}

static void cuda_locate(const void *b, unsigned slot, struct tfs_staging_loc *loc)
{
	const struct cuda *c = b;

	loc->device = c->dev;
	loc->base = (uint64_t)slot * c->slot_bytes;
	memcpy(loc->ipc_mem, &c->mh, sizeof(c->mh));
	memcpy(loc->ipc_event, &c->eh[slot], sizeof(c->eh[slot]));
	loc->dev_mem = c->dmem;
}

static const struct tfs_staging_backend cuda_backend = {
	.name = "cuda",
	.probe = cuda_probe,
	.create = cuda_create,
	.destroy = cuda_destroy,
	.begin = cuda_begin,
	.finish = cuda_finish,
	.locate = cuda_locate,
};

const struct tfs_staging_backend *const tfs_staging_cuda = &cuda_backend;

#else /* !TFS_HAVE_CUDA */

const struct tfs_staging_backend *const tfs_staging_cuda = NULL;

#endif
