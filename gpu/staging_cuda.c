/* SPDX-License-Identifier: MIT */
/* staging_cuda: the cuda backend: device slots filled by a gather kernel that reads the rows
 * where the chunk cache keeps them (its arena, registered with the driver once), IPC handles for
 * the allocation and an interprocess event per slot. Where the arena cannot be registered, the
 * CPU gathers into a pinned ring and the copy engine moves it. Built with -DTFS_HAVE_CUDA. */
#include "staging.h"

#ifdef TFS_HAVE_CUDA

#include <assert.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "cudacache.h"
#include "cudareg.h"
#include "gather_kernel.h"
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
	cudaEvent_t *ev; /* per slot: recorded after its kernel (or host-to-device copy) */
	/* Releases lists: a host function on the stream itself would hold the stream's next
	 * batch until the driver ran it. Per slot, evd is recorded here after the release. */
	cudaStream_t done;
	cudaEvent_t *evd;	   /* per slot: made once; the stream is thread-safe */
	struct tfs_workpool *pool; /* the CPU's copies (arena not registered): borrowed */
	cudaIpcMemHandle_t mh;
	cudaIpcEventHandle_t *eh;
	/* The kernel path, when the cache's arena is registered: device address minus host
	 * address of the arena and of the pinned ring, and per slot the list as the kernel reads
	 * it (pinned; rewritten only after begin waited for the slot's last batch). */
	struct tfs_cache *cache;
	pthread_mutex_t lock; /* the switch to the kernel */
	struct reg *reg;      /* the arena's registration; NULL: none (by lock) */
	int kernel;	      /* atomic; arena_delta is set before it */
	intptr_t arena_delta, pinned_delta;
	struct tfs_kernel_op **kops;
	size_t *kops_cap;
	intptr_t *kops_delta; /* per slot: device address minus host address of kops[slot] */
	/* Per slot: the runs the CPU copies into the pinned slot first (outside the arena); the
	 * slot's fill alone uses them, as it does kops[slot]. */
	struct tfs_gather_op **cpu_ops;
	size_t *cpu_cap;
	struct tfs_devcache *dc; /* the device's chunk cache (cache_gpu), or NULL */
	struct inflight *fl;	 /* per slot: the batch the kernel gathers */
};

/* A slot's batch on the device: its list and the device cache's entries it reads, released by
 * a host function on the done stream once the kernel has run. dev: per pin, its chunk's device
 * address (0: read from host memory). Arrays of cap pins. */
struct inflight {
	struct tfs_gather_list *l;
	struct tfs_devcache *dc;
	struct tfs_devcache_entry **held;
	size_t nheld;
	uint64_t *dev;
	size_t cap;
};

/* CUDA errors become -errno here, at the module boundary, with the cause logged. */
int tfs_cuda_errno(cudaError_t e, const char *what)
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

#define CK(call)                                        \
	do {                                            \
		cudaError_t e_ = (call);                \
		if (e_ != cudaSuccess) {                \
			rc = tfs_cuda_errno(e_, #call); \
			goto out;                       \
		}                                       \
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

static int cuda_find_pci(const char *pci, int *device, char *err, size_t err_cap)
{
	int d = -1;
	cudaError_t e = cudaDeviceGetByPCIBusId(&d, pci);

	if (e != cudaSuccess) {
		(void)cudaGetLastError();
		snprintf(err, err_cap, "%s: no CUDA device at that PCI bus id (%s)", pci,
			 cudaGetErrorString(e));
		return -ENODEV;
	}
	*device = d;
	return 0;
}

/* --- the cache's arena, registered once a process -------------------------------------------
 * Registering pins every page of the arena (cache_mem and a quarter): a second or more for tens
 * of GiB. It runs on a thread of its own, started by the first CUDA ring; until it is done,
 * rings gather on the CPU and copy (correct, slower), then switch to the kernel. It goes a
 * segment at a time (cudareg.h): the driver serves one call at a time, and a batch's copy
 * made meanwhile then waits for a segment's registration, not for the whole arena's. */

#define MAX_ARENAS 8

enum reg_state { REG_BUSY = 1, REG_OK, REG_FAILED };

static pthread_mutex_t reg_lock = PTHREAD_MUTEX_INITIALIZER;
/* Arenas being registered, registered, or refused (not tried again); base and len are set
 * under reg_lock before the thread starts, state is atomic. */
static struct reg {
	uint8_t *base;
	uint64_t len;
	int dev;
	int state;
} regs[MAX_ARENAS];
static unsigned nregs; /* protected by reg_lock */

static void *register_arena(void *arg)
{
	struct reg *g = arg;
	const uint64_t t0 = tfs_now_ns();
	struct tfs_cuda_reg r = { .threads = tfs_cuda_commit_threads() };
	cudaError_t e = cudaSetDevice(g->dev);

	if (e == cudaSuccess)
		e = (cudaError_t)tfs_cuda_register(g->base, g->len, &r);
	if (e == cudaSuccess && !r.commit_rc)
		tfs_info("staging: the chunk cache's arena (%llu MiB) is registered with the CUDA "
			 "driver in %.3f s, %.3f s of it committing its pages on %u threads (%u "
			 "calls): kernels gather rows from it in place",
			 (unsigned long long)(g->len >> 20), (double)(tfs_now_ns() - t0) / 1e9,
			 (double)r.commit_ns / 1e9, r.threads, r.calls);
	else if (e == cudaSuccess)
		tfs_info("staging: the chunk cache's arena (%llu MiB) is registered with the CUDA "
			 "driver in %.3f s, which faulted its pages in (committing them ahead: %s) "
			 "(%u calls): kernels gather rows from it in place",
			 (unsigned long long)(g->len >> 20), (double)(tfs_now_ns() - t0) / 1e9,
			 strerror(-r.commit_rc), r.calls);
	else
		tfs_warn("staging: cuda:%d: the driver refuses to register the chunk cache's arena "
			 "(%s): rows are gathered by the CPU and copied",
			 g->dev, cudaGetErrorString(e));
	(void)cudaGetLastError();
	__atomic_store_n(&g->state, e == cudaSuccess ? REG_OK : REG_FAILED, __ATOMIC_RELEASE);
	return NULL;
}

/* The registration of cache's arena, started if it is not (by the first ring of the process):
 * NULL when there is no arena or no thread to register it (logged). */
static struct reg *arena_register(struct tfs_cache *cache, int dev)
{
	struct reg *g = NULL;
	uint8_t *base;
	uint64_t len;
	pthread_t t;
	unsigned i;
	int rc = tfs_cache_arena_start(cache, 0, &base, &len);

	if (rc) {
		tfs_warn(
			"staging: cuda:%d: no arena for the chunk cache (%s): rows are gathered by "
			"the CPU and copied",
			dev, strerror(-rc));
		return NULL;
	}
	pthread_mutex_lock(&reg_lock);
	for (i = 0; i < nregs && regs[i].base != base; i++)
		;
	if (i < nregs) {
		g = &regs[i];
	} else if (nregs < MAX_ARENAS) {
		g = &regs[nregs];
		*g = (struct reg){ base, len, dev, REG_BUSY };
		if (pthread_create(&t, NULL, register_arena, g)) {
			tfs_warn("staging: cannot start a thread to register the chunk cache's "
				 "arena: rows are gathered by the CPU and copied");
			g = NULL;
		} else {
			pthread_detach(t);
			nregs++;
		}
	}
	pthread_mutex_unlock(&reg_lock);
	return g;
}

/* Whether c gathers with the kernel: once its arena is registered (then for good). */
static int use_kernel(struct cuda *c)
{
	void *dptr = NULL;
	int state, on;

	if (__atomic_load_n(&c->kernel, __ATOMIC_ACQUIRE))
		return 1;
	if (!c->reg)
		return 0;
	state = __atomic_load_n(&c->reg->state, __ATOMIC_ACQUIRE);
	if (state == REG_BUSY)
		return 0;
	pthread_mutex_lock(&c->lock);
	if (state == REG_OK && !c->kernel &&
	    cudaHostGetDevicePointer(&dptr, c->reg->base, 0) == cudaSuccess) {
		c->arena_delta = (intptr_t)dptr - (intptr_t)c->reg->base;
		__atomic_store_n(&c->kernel, 1, __ATOMIC_RELEASE);
	} else if (!c->kernel) {
		(void)cudaGetLastError();
		c->reg = NULL; /* refused: the CPU gathers for good */
	}
	on = c->kernel;
	pthread_mutex_unlock(&c->lock);
	return on;
}

/* Wait for every batch under way to complete and its list to be released (each step tried,
 * whatever the one before gave): 0, or -EIO when a step failed. */
static int settle(struct cuda *c)
{
	int bad = cudaSetDevice(c->dev) != cudaSuccess;

	bad |= c->stream && cudaStreamSynchronize(c->stream) != cudaSuccess;
	bad |= c->done && cudaStreamSynchronize(c->done) != cudaSuccess;
	if (bad)
		(void)cudaGetLastError();
	return bad ? -EIO : 0;
}

static void cuda_destroy(void *b)
{
	struct cuda *c = b;

	if (!c)
		return;
	(void)settle(c);
	for (unsigned i = 0; c->ev && i < c->depth; i++)
		if (c->ev[i])
			cudaEventDestroy(c->ev[i]);
	for (unsigned i = 0; c->evd && i < c->depth; i++)
		if (c->evd[i])
			cudaEventDestroy(c->evd[i]);
	if (c->stream)
		cudaStreamDestroy(c->stream);
	if (c->done)
		cudaStreamDestroy(c->done);
	if (c->dmem)
		cudaFree(c->dmem);
	if (c->pinned)
		cudaFreeHost(c->pinned);
	for (unsigned i = 0; c->kops && i < c->depth; i++)
		if (c->kops[i])
			cudaFreeHost(c->kops[i]);
	(void)cudaGetLastError();
	free(c->kops);
	free(c->kops_cap);
	free(c->kops_delta);
	for (unsigned i = 0; c->cpu_ops && i < c->depth; i++)
		free(c->cpu_ops[i]);
	free(c->cpu_ops);
	free(c->cpu_cap);
	for (unsigned i = 0; c->fl && i < c->depth; i++) {
		free(c->fl[i].held);
		free(c->fl[i].dev);
	}
	free(c->fl);
	free(c->ev);
	free(c->evd);
	free(c->eh);
	pthread_mutex_destroy(&c->lock);
	free(c);
}

/* Kept: every batch complete (their lists released); the memory, events and IPC handles stay
 * as they are for the next ring. */
static int cuda_keep(void *b)
{
	return settle(b);
}

static int cuda_reuse(void *b, const struct tfs_staging_config *cfg, char *err, size_t err_cap)
{
	struct cuda *c = b;

	(void)err;
	(void)err_cap;
	c->pool = cfg->pool;
	return 0;
}

static int cuda_create(const struct tfs_staging_config *cfg, uint64_t slot_bytes, void **out,
		       char *err, size_t err_cap)
{
	struct cuda *c = calloc(1, sizeof(*c));
	const uint64_t t0 = tfs_now_ns();
	uint64_t t_ctx = 0, t_pin = 0;
	int rc = 0;

	if (!c)
		return -ENOMEM;
	c->dev = cfg->device;
	c->depth = cfg->depth;
	c->slot_bytes = slot_bytes;
	c->size = slot_bytes * cfg->depth;
	c->cache = cfg->cache;
	pthread_mutex_init(&c->lock, NULL);
	c->pool = cfg->pool;
	c->ev = calloc(cfg->depth, sizeof(*c->ev));
	c->evd = calloc(cfg->depth, sizeof(*c->evd));
	c->eh = calloc(cfg->depth, sizeof(*c->eh));
	c->kops = calloc(cfg->depth, sizeof(*c->kops));
	c->kops_cap = calloc(cfg->depth, sizeof(*c->kops_cap));
	c->kops_delta = calloc(cfg->depth, sizeof(*c->kops_delta));
	c->fl = calloc(cfg->depth, sizeof(*c->fl));
	c->cpu_ops = calloc(cfg->depth, sizeof(*c->cpu_ops));
	c->cpu_cap = calloc(cfg->depth, sizeof(*c->cpu_cap));
	if (!c->ev || !c->evd || !c->eh || !c->kops || !c->kops_cap || !c->kops_delta || !c->fl ||
	    !c->cpu_ops || !c->cpu_cap) {
		rc = -ENOMEM;
		goto out;
	}
	CK(cudaSetDevice(c->dev));
	CK(cudaFree(NULL)); /* the device's context, made by the process's first ring */
	t_ctx = tfs_now_ns();
	CK(cudaHostAlloc((void **)&c->pinned, c->size,
			 cudaHostAllocPortable | cudaHostAllocMapped));
	t_pin = tfs_now_ns();
	CK(cudaMalloc(&c->dmem, c->size));
	CK(cudaIpcGetMemHandle(&c->mh, c->dmem));
	CK(cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking));
	CK(cudaStreamCreateWithFlags(&c->done, cudaStreamNonBlocking));
	for (unsigned i = 0; i < c->depth; i++) {
		CK(cudaEventCreateWithFlags(&c->ev[i],
					    cudaEventInterprocess | cudaEventDisableTiming));
		CK(cudaIpcGetEventHandle(&c->eh[i], c->ev[i]));
		CK(cudaEventCreateWithFlags(&c->evd[i], cudaEventDisableTiming));
	}
	{
		void *dp = NULL;

		CK(cudaHostGetDevicePointer(&dp, c->pinned, 0));
		c->pinned_delta = (intptr_t)dp - (intptr_t)c->pinned;
	}
	c->reg = arena_register(c->cache, c->dev);
	c->dc = tfs_cudacache_get(c->dev, cfg->cache_gpu, cfg->cache_gpu_headroom);
	tfs_info("staging: cuda:%d: %u slots of %.1f MiB set up in %.1f ms (context %.1f ms, "
		 "pinned slots %.1f ms)",
		 c->dev, c->depth, (double)slot_bytes / 1048576.0,
		 (double)(tfs_now_ns() - t0) / 1e6, (double)(t_ctx - t0) / 1e6,
		 (double)(t_pin - t_ctx) / 1e6);
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

	/* The slot's last batch may still be running: its list, its kernel's ops and the pinned
	 * slot are the batch's until its event completes. */
	CK(cudaSetDevice(c->dev));
	CK(cudaEventSynchronize(c->evd[slot])); /* after ev[slot], and the list's release */
	*mem = c->pinned + (uint64_t)slot * c->slot_bytes;
out:
	return rc;
}

/* A host function on the done stream: the kernel that read the list's chunks is done, so they
 * may go. Runs on a driver thread and makes no CUDA call. */
static void CUDART_CB list_done(void *arg)
{
	struct inflight *f = arg;

	tfs_gather_list_release(f->l);
	for (size_t i = 0; i < f->nheld; i++)
		tfs_devcache_put(f->dc, f->held[i]); /* never evicts: no CUDA call here */
	f->nheld = 0;
}

/* The list's ops for the kernel into c->kops[slot], split into pieces of at most
 * TFS_GATHER_PIECE bytes, sources as device addresses. A run in host memory the device cannot
 * read (a chunk cached before the arena existed, or when it was full) is copied by the CPU into
 * the pinned slot (on the pool's threads, as the host backend copies), and read from there.
 * Returns the ops' count, or -errno. */
static ssize_t kernel_ops(struct cuda *c, unsigned slot, const struct tfs_gather_list *l,
			  const uint64_t *dev)
{
	uint8_t *pin = c->pinned + (uint64_t)slot * c->slot_bytes;
	const int registered = __atomic_load_n(&c->kernel, __ATOMIC_ACQUIRE);
	struct tfs_gather_list cpu = { 0 };
	size_t n = 0, want = 0;
	void *dp = NULL;
	int rc = 0;

	for (size_t i = 0; i < l->nops; i++)
		want += (size_t)((l->ops[i].bytes + TFS_GATHER_PIECE - 1) / TFS_GATHER_PIECE);
	if (want > c->kops_cap[slot]) {
		const size_t cap = want + want / 2 + 64;

		if (c->kops[slot])
			cudaFreeHost(c->kops[slot]);
		c->kops[slot] = NULL;
		c->kops_cap[slot] = 0;
		CK(cudaHostAlloc((void **)&c->kops[slot], cap * sizeof(struct tfs_kernel_op),
				 cudaHostAllocPortable | cudaHostAllocMapped));
		CK(cudaHostGetDevicePointer(&dp, c->kops[slot], 0));
		c->kops_delta[slot] = (intptr_t)dp - (intptr_t)(uintptr_t)c->kops[slot];
		c->kops_cap[slot] = cap;
	}
	if (l->nops > c->cpu_cap[slot]) {
		const size_t cap = l->nops + l->nops / 2 + 64;
		struct tfs_gather_op *ops = realloc(c->cpu_ops[slot], cap * sizeof(*ops));

		if (!ops) {
			rc = -ENOMEM;
			goto out;
		}
		c->cpu_ops[slot] = ops;
		c->cpu_cap[slot] = cap;
	}
	cpu.ops = c->cpu_ops[slot];
	for (size_t i = 0; i < l->nops; i++) {
		const struct tfs_gather_op *o = &l->ops[i];
		const uint8_t *host = (const uint8_t *)(uintptr_t)o->src;
		uint64_t src = o->src;

		if (!host) {
			src = 0;
		} else if (o->pin != TFS_GATHER_NO_PIN && dev && dev[o->pin]) {
			src = dev[o->pin] + (o->src - (uint64_t)(uintptr_t)l->pins[o->pin].e->data);
		} else if (registered && tfs_cache_in_arena(c->cache, host)) {
			src = (uint64_t)((intptr_t)src + c->arena_delta);
		} else {
			if (host != pin + o->dst) {
				cpu.ops[cpu.nops++] = *o;
				cpu.bytes += o->bytes;
			}
			src = (uint64_t)((intptr_t)(uintptr_t)(pin + o->dst) + c->pinned_delta);
		}
		for (uint64_t at = 0; at < o->bytes; at += TFS_GATHER_PIECE) {
			const uint64_t left = o->bytes - at;

			c->kops[slot][n++] = (struct tfs_kernel_op){
				src ? src + at : 0, o->dst + at,
				left < TFS_GATHER_PIECE ? left : TFS_GATHER_PIECE
			};
		}
	}
	if (cpu.nops)
		tfs_gather_list_run_on(&cpu, pin, c->pool, 1);
out:
	return rc ? rc : (ssize_t)n;
}

/* The device cache's part of slot's batch: f->dev per pin, the entries held. */
static int map_device_cache(struct cuda *c, struct inflight *f, const struct tfs_gather_list *l)
{
	if (l->npins > f->cap) {
		const size_t cap = l->npins + l->npins / 2 + 16;
		struct tfs_devcache_entry **h = realloc(f->held, cap * sizeof(*h));
		uint64_t *d;

		if (!h)
			return -ENOMEM;
		f->held = h;
		d = realloc(f->dev, cap * sizeof(*d));
		if (!d)
			return -ENOMEM;
		f->dev = d;
		f->cap = cap;
	}
	f->dc = c->dc;
	return tfs_cudacache_map(c->dc, l, c->stream, f->dev, f->held, &f->nheld);
}

static int cuda_submit(void *b, unsigned slot, struct tfs_gather_list *l, size_t bytes)
{
	struct cuda *c = b;
	struct inflight *f = &c->fl[slot];
	const uint64_t base = (uint64_t)slot * c->slot_bytes;
	int rc = 0, owned = 1; /* the list (and f) still ours to release */
	ssize_t n = 0;

	assert(!f->nheld);
	f->l = l;
	CK(cudaSetDevice(c->dev));
	/* The kernel gathers once the arena is registered, or with a device cache (runs from
	 * host memory it cannot read are first copied into the pinned slot). */
	if (use_kernel(c) || c->dc) {
		if (c->dc && (rc = map_device_cache(c, f, l)))
			goto out;
		n = kernel_ops(c, slot, l, c->dc ? f->dev : NULL);
		if (n < 0) {
			rc = (int)n;
			goto out;
		}
		if (n) {
			const cudaError_t e = (cudaError_t)tfs_gather_kernel_launch(
				(const void *)((intptr_t)(uintptr_t)c->kops[slot] +
					       c->kops_delta[slot]),
				(size_t)n, (uint8_t *)c->dmem + base, c->stream);

			if (e != cudaSuccess) {
				rc = tfs_cuda_errno(e, "the gather kernel's launch");
				goto out;
			}
		}
	} else {
		/* cold: the copy engine reads the slot next, not this CPU. */
		tfs_gather_list_run_on(l, c->pinned + base, c->pool, 1);
		if (bytes)
			CK(cudaMemcpyAsync((uint8_t *)c->dmem + base, c->pinned + base, bytes,
					   cudaMemcpyHostToDevice, c->stream));
	}
	/* The loader waits on this event (cudaStreamWaitEvent) before it reads the slot. */
	CK(cudaEventRecord(c->ev[slot], c->stream));
	CK(cudaStreamWaitEvent(c->done, c->ev[slot], 0));
	if (n) {
		/* From here the list is released on the done stream, after the kernel. */
		CK(cudaLaunchHostFunc(c->done, list_done, f));
		owned = 0;
	}
	CK(cudaEventRecord(c->evd[slot], c->done));
out:
	if (rc) {
		/* Uploads, a kernel or the release may still be under way: wait for them first. */
		(void)settle(c);
	}
	if (owned)
		list_done(f);
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

/* The arena's registration makes the device's context, on its thread. */
static void cuda_prepare(int device, struct tfs_cache *cache)
{
	(void)arena_register(cache, device);
}

static const struct tfs_staging_backend cuda_backend = {
	.name = "cuda",
	.probe = cuda_probe,
	.create = cuda_create,
	.destroy = cuda_destroy,
	.begin = cuda_begin,
	.submit = cuda_submit,
	.locate = cuda_locate,
	.prepare = cuda_prepare,
	.find_pci = cuda_find_pci,
	.keep = cuda_keep,
	.reuse = cuda_reuse,
};

const struct tfs_staging_backend *const tfs_staging_cuda = &cuda_backend;

#else /* !TFS_HAVE_CUDA */

const struct tfs_staging_backend *const tfs_staging_cuda = NULL;

#endif
