/* SPDX-License-Identifier: MIT */
/* cudacache: a device's chunk cache: the region, uploads and the events that say they are done. */
#include "staging.h"

#ifdef TFS_HAVE_CUDA

#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "arena.h"
#include "cudacache.h"
#include "util.h"

#define MAX_DEVICES 64

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
/* Per device: its cache, or tried and failed; protected by lock (then read-only). */
static struct {
	struct tfs_devcache *dc;
	void *mem;
	int tried;
} devs[MAX_DEVICES];

/* An entry goes: the event of its upload goes with it (a CUDA call: this runs inside
 * tfs_devcache_insert, on a thread that stages, never in a stream callback). */
static void evicted(void *arg, void *tag)
{
	(void)arg;
	if (tag && cudaEventDestroy((cudaEvent_t)tag) != cudaSuccess)
		(void)cudaGetLastError();
}

struct tfs_devcache *tfs_cudacache_get(int dev, uint64_t bytes)
{
	struct tfs_devcache *dc;

	if (dev < 0 || dev >= MAX_DEVICES)
		return NULL;
	pthread_mutex_lock(&lock);
	if (!devs[dev].tried && bytes) {
		const uint64_t len = bytes / TFS_ARENA_GRANULE * TFS_ARENA_GRANULE;
		cudaError_t e;

		devs[dev].tried = 1;
		e = len ? cudaMalloc(&devs[dev].mem, len) : cudaErrorInvalidValue;
		if (e != cudaSuccess || tfs_devcache_create((uint64_t)(uintptr_t)devs[dev].mem, len,
							    evicted, NULL, &devs[dev].dc)) {
			if (e != cudaSuccess)
				tfs_cuda_errno(e, "cache_gpu: cudaMalloc");
			else
				cudaFree(devs[dev].mem);
			tfs_warn("staging: cuda:%d: no chunk cache in GPU memory (%llu bytes asked "
				 "for): batches read host memory",
				 dev, (unsigned long long)bytes);
			devs[dev].mem = NULL;
		} else {
			tfs_info("staging: cuda:%d: a chunk cache of %llu MiB in GPU memory", dev,
				 (unsigned long long)(len >> 20));
		}
	}
	dc = devs[dev].dc;
	pthread_mutex_unlock(&lock);
	return dc;
}

/* Upload pin p's chunk into a new entry; NULL when there is no room (or it is being uploaded
 * by another stream). */
static struct tfs_devcache_entry *upload(struct tfs_devcache *dc, const struct tfs_gather_pin *p,
					 cudaStream_t stream, int *rc)
{
	struct tfs_devcache_entry *e = tfs_devcache_insert(dc, p->id, p->e->len);
	cudaEvent_t ev = NULL;
	cudaError_t ce;

	if (!e)
		return NULL;
	ce = cudaMemcpyAsync((void *)(uintptr_t)e->addr, p->e->data, p->e->len,
			     cudaMemcpyHostToDevice, stream);
	if (ce == cudaSuccess)
		ce = cudaEventCreateWithFlags(&ev, cudaEventDisableTiming);
	if (ce == cudaSuccess)
		ce = cudaEventRecord(ev, stream);
	if (ce != cudaSuccess) {
		*rc = tfs_cuda_errno(ce, "cache_gpu: an upload");
		if (ev)
			cudaEventDestroy(ev);
		/* The copy may be under way: once it stopped, the entry goes unused. */
		if (cudaStreamSynchronize(stream) != cudaSuccess)
			(void)cudaGetLastError();
		tfs_devcache_put(dc, e);
		return NULL;
	}
	tfs_devcache_ready(dc, e, ev);
	return e;
}

int tfs_cudacache_map(struct tfs_devcache *dc, const struct tfs_gather_list *l, cudaStream_t stream,
		      uint64_t *dev, struct tfs_devcache_entry **held, size_t *nheld)
{
	int rc = 0;

	*nheld = 0;
	for (size_t i = 0; i < l->npins && !rc; i++) {
		const struct tfs_gather_pin *p = &l->pins[i];
		struct tfs_devcache_entry *e;
		cudaError_t ce;

		dev[i] = 0;
		if (!p->whole)
			continue; /* a frame: read from host memory */
		e = tfs_devcache_get(dc, p->id);
		if (e && e->len != p->e->len) {
			tfs_devcache_put(dc, e); /* not the bytes this pin holds: never trust it */
			continue;
		}
		if (!e) {
			e = upload(dc, p, stream, &rc);
		} else if (!__atomic_load_n(&e->landed, __ATOMIC_ACQUIRE)) {
			/* Uploaded on this or another stream: wait for it, unless it is done (then
			 * for good: no batch asks again). */
			ce = cudaEventQuery((cudaEvent_t)e->tag);
			if (ce == cudaSuccess)
				__atomic_store_n(&e->landed, 1, __ATOMIC_RELEASE);
			else if (ce == cudaErrorNotReady)
				ce = cudaStreamWaitEvent(stream, (cudaEvent_t)e->tag, 0);
			if (ce != cudaSuccess) {
				rc = tfs_cuda_errno(ce, "cache_gpu: cudaStreamWaitEvent");
				tfs_devcache_put(dc, e);
				break;
			}
		}
		if (e) {
			dev[i] = e->addr;
			held[(*nheld)++] = e;
		}
	}
	return rc;
}

void tfs_staging_cuda_cache_stats(struct tfs_devcache_stats *out)
{
	memset(out, 0, sizeof(*out));
	pthread_mutex_lock(&lock);
	for (int i = 0; i < MAX_DEVICES; i++) {
		struct tfs_devcache_stats s;

		if (!devs[i].dc)
			continue;
		tfs_devcache_stats(devs[i].dc, &s);
		out->budget += s.budget;
		out->bytes += s.bytes;
		out->entries += s.entries;
		out->hits += s.hits;
		out->misses += s.misses;
		out->inserts += s.inserts;
		out->evictions += s.evictions;
		out->full += s.full;
	}
	pthread_mutex_unlock(&lock);
}

#else /* !TFS_HAVE_CUDA */

#include <string.h>

void tfs_staging_cuda_cache_stats(struct tfs_devcache_stats *out)
{
	memset(out, 0, sizeof(*out));
}

#endif
