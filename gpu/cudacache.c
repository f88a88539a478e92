/* SPDX-License-Identifier: MIT */
/* cudacache: a device's chunk cache: its segments of device memory, taken and given back, the
 * uploads and the events that say they are done. */
#include "staging.h"

#ifdef TFS_HAVE_CUDA

#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "arena.h"
#include "cudacache.h"
#include "util.h"

#define MAX_DEVICES 64
/* The cache's memory comes in segments of this (at most its budget): taken as chunks need
 * room, given back a segment at a time when the device runs short. */
#define SEG_BYTES (256ull << 20)
/* How often the cache's watcher looks at the device's free memory (cudaMemGetInfo). */
#define WATCH_MS 100

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
/* Per device (its number: the index): its cache, or tried and failed; protected by lock (then
 * read-only). */
static struct dev {
	struct tfs_devcache *dc;
	uint64_t headroom; /* bytes of the device the cache leaves free */
	char name[16];	   /* "cuda:N" */
	int tried;
} devs[MAX_DEVICES];

/* An entry goes: the event of its upload goes with it (a CUDA call: this runs inside
 * tfs_devcache_insert or _shrink, on a thread that stages or the cache's watcher, never in a
 * stream callback). */
static void evicted(void *arg, void *tag)
{
	(void)arg;
	if (tag && cudaEventDestroy((cudaEvent_t)tag) != cudaSuccess)
		(void)cudaGetLastError();
}

/* The current device's free and total memory; 0, or -1 when they cannot be told. */
static int mem_now(uint64_t *free_b, uint64_t *total)
{
	size_t f = 0, t = 0;

	if (cudaMemGetInfo(&f, &t) != cudaSuccess) {
		(void)cudaGetLastError();
		return -1;
	}
	*free_b = f;
	*total = t;
	return 0;
}

/* A segment, if the device keeps its headroom free after it (the device is current: a thread
 * that stages to it inserts). */
static uint64_t grow(void *arg, uint64_t bytes)
{
	const struct dev *d = arg;
	uint64_t free_b, total;
	void *p = NULL;

	if (mem_now(&free_b, &total) || free_b < bytes + d->headroom)
		return 0;
	if (cudaMalloc(&p, bytes) != cudaSuccess) {
		(void)cudaGetLastError();
		return 0;
	}
	return (uint64_t)(uintptr_t)p;
}

/* How far the device's free memory is below the headroom (other processes' allocations grew),
 * asked by the cache's watcher on a thread of its own: the device is made current there, for
 * this and for the cudaFree and cudaEventDestroy of what the cache then gives back. */
static uint64_t short_by(void *arg)
{
	const struct dev *d = arg;
	uint64_t free_b, total;

	if (cudaSetDevice((int)(d - devs)) != cudaSuccess) {
		(void)cudaGetLastError();
		return 0;
	}
	if (mem_now(&free_b, &total) || free_b >= d->headroom)
		return 0;
	return d->headroom - free_b;
}

static void release(void *arg, uint64_t addr, uint64_t bytes)
{
	(void)arg;
	(void)bytes;
	if (cudaFree((void *)(uintptr_t)addr) != cudaSuccess)
		(void)cudaGetLastError();
}

struct tfs_devcache *tfs_cudacache_get(int dev, uint64_t bytes, uint64_t headroom)
{
	struct tfs_devcache *dc;

	if (dev < 0 || dev >= MAX_DEVICES)
		return NULL;
	pthread_mutex_lock(&lock);
	if (!devs[dev].tried && bytes) {
		struct dev *d = &devs[dev];
		const uint64_t seg = bytes < SEG_BYTES
					     ? bytes / TFS_ARENA_GRANULE * TFS_ARENA_GRANULE
					     : SEG_BYTES;
		const struct tfs_devcache_mem mem = { .grow = grow,
						      .release = release,
						      .evict = evicted,
						      .arg = d,
						      .short_by = short_by,
						      .watch_ms = WATCH_MS,
						      .name = d->name };
		uint64_t free_b, total = 0;

		d->tried = 1;
		snprintf(d->name, sizeof(d->name), "cuda:%d", dev);
		mem_now(&free_b, &total);
		/* Default: a 32nd of the device, at least 2 GiB. */
		d->headroom = headroom			  ? headroom
			      : total / 32 > (2ull << 30) ? total / 32
							  : 2ull << 30;
		if (!seg || tfs_devcache_create(bytes, seg, &mem, &d->dc)) {
			tfs_warn("staging: cuda:%d: no chunk cache in GPU memory (%llu bytes asked "
				 "for): batches read host memory",
				 dev, (unsigned long long)bytes);
			d->dc = NULL;
		} else {
			tfs_info("staging: cuda:%d: a chunk cache of up to %llu MiB in GPU memory, "
				 "taken as chunks need it, given back while less than %llu MiB of "
				 "the device is free",
				 dev, (unsigned long long)(bytes >> 20),
				 (unsigned long long)(d->headroom >> 20));
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
		      uint64_t *addr, struct tfs_devcache_entry **held, size_t *nheld)
{
	int rc = 0;

	*nheld = 0;
	for (size_t i = 0; i < l->npins && !rc; i++) {
		const struct tfs_gather_pin *p = &l->pins[i];
		struct tfs_devcache_entry *e;
		cudaError_t ce;

		addr[i] = 0;
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
			addr[i] = e->addr;
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
		out->held += s.held;
		out->given_back += s.given_back;
	}
	pthread_mutex_unlock(&lock);
}

void tfs_staging_cuda_cache_close(void)
{
	pthread_mutex_lock(&lock);
	for (int i = 0; i < MAX_DEVICES; i++) {
		tfs_devcache_destroy(devs[i].dc); /* its watcher first */
		memset(&devs[i], 0, sizeof(devs[i]));
	}
	pthread_mutex_unlock(&lock);
}

#else /* !TFS_HAVE_CUDA */

#include <string.h>

void tfs_staging_cuda_cache_stats(struct tfs_devcache_stats *out)
{
	memset(out, 0, sizeof(*out));
}

void tfs_staging_cuda_cache_close(void)
{
}

#endif
