/* SPDX-License-Identifier: MIT */
/* arena: a fixed region carved into runs of granules, first-fit from a rotating hint. */
#include "arena.h"

#include <assert.h>
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include "workpool.h"

#define REGION_ALIGN (2u << 20)

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23 /* Linux 5.14; older C libraries lack the name */
#endif

struct tfs_arena {
	uint8_t *base;
	uint64_t bytes;
	int owned; /* the region is ours to unmap */
	size_t ngran;
	pthread_mutex_t lock;
	uint64_t *used_bits; /* a bit a granule, set while in a buffer; protected by lock */
	uint32_t *run;	     /* at a buffer's first granule: its granules; protected by lock */
	size_t hint;	     /* where the next search starts; protected by lock */
	uint64_t used, allocs, full; /* protected by lock */
};

static int arena_new(uint64_t bytes, struct tfs_arena **out)
{
	struct tfs_arena *a;

	if (!bytes || bytes % TFS_ARENA_GRANULE || bytes / TFS_ARENA_GRANULE > UINT32_MAX)
		return -EINVAL;
	a = calloc(1, sizeof(*a));
	if (!a)
		return -ENOMEM;
	a->bytes = bytes;
	a->ngran = (size_t)(bytes / TFS_ARENA_GRANULE);
	a->used_bits = calloc((a->ngran + 63) / 64, sizeof(uint64_t));
	a->run = calloc(a->ngran, sizeof(uint32_t));
	if (!a->used_bits || !a->run) {
		free(a->used_bits);
		free(a->run);
		free(a);
		return -ENOMEM;
	}
	pthread_mutex_init(&a->lock, NULL);
	*out = a;
	return 0;
}

int tfs_arena_create(uint64_t bytes, struct tfs_arena **out)
{
	void *p;
	int rc;

	bytes = (bytes + REGION_ALIGN - 1) / REGION_ALIGN * REGION_ALIGN;
	rc = arena_new(bytes, out);
	if (rc)
		return rc;
	p = mmap(NULL, (size_t)bytes, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (p == MAP_FAILED) {
		(*out)->base = NULL;
		tfs_arena_destroy(*out);
		return -ENOMEM;
	}
	(void)madvise(p, (size_t)bytes, MADV_HUGEPAGE);
	(*out)->base = p;
	(*out)->owned = 1;
	return 0;
}

int tfs_arena_create_over(uint8_t *base, uint64_t bytes, struct tfs_arena **out)
{
	int rc = arena_new(bytes, out);

	if (!rc)
		(*out)->base = base;
	return rc;
}

void tfs_arena_destroy(struct tfs_arena *a)
{
	if (!a)
		return;
	if (a->owned)
		munmap(a->base, (size_t)a->bytes);
	pthread_mutex_destroy(&a->lock);
	free(a->used_bits);
	free(a->run);
	free(a);
}

static int bit(const struct tfs_arena *a, size_t g)
{
	return (int)((a->used_bits[g / 64] >> (g % 64)) & 1);
}

static void mark(struct tfs_arena *a, size_t g, size_t n, int on)
{
	for (size_t i = g; i < g + n; i++) {
		if (on)
			a->used_bits[i / 64] |= (uint64_t)1 << (i % 64);
		else
			a->used_bits[i / 64] &= ~((uint64_t)1 << (i % 64));
	}
}

/* The first run of n free granules in [from, to), or SIZE_MAX. Whole used words are skipped. */
static size_t find_run(const struct tfs_arena *a, size_t from, size_t to, size_t n)
{
	size_t start = from, len = 0;

	for (size_t g = from; g < to;) {
		if (g % 64 == 0 && a->used_bits[g / 64] == UINT64_MAX) {
			g += 64;
			start = g;
			len = 0;
			continue;
		}
		if (bit(a, g)) {
			start = g + 1;
			len = 0;
		} else if (++len == n) {
			return start;
		}
		g++;
	}
	return SIZE_MAX;
}

void *tfs_arena_alloc(struct tfs_arena *a, size_t len, size_t *cap)
{
	const uint64_t want = len ? len : 1;
	const size_t n = (size_t)((want + TFS_ARENA_GRANULE - 1) / TFS_ARENA_GRANULE);
	size_t g = SIZE_MAX;

	if (n > a->ngran)
		return NULL;
	pthread_mutex_lock(&a->lock);
	/* From the hint to the end, then from the start: a run that straddles the hint is found
	 * by the second pass, which reads up to hint + n - 1. */
	g = find_run(a, a->hint, a->ngran, n);
	if (g == SIZE_MAX)
		g = find_run(a, 0, a->hint + n - 1 < a->ngran ? a->hint + n - 1 : a->ngran, n);
	if (g == SIZE_MAX) {
		a->full++;
		pthread_mutex_unlock(&a->lock);
		return NULL;
	}
	mark(a, g, n, 1);
	a->run[g] = (uint32_t)n;
	a->hint = g + n < a->ngran ? g + n : 0;
	a->used += (uint64_t)n * TFS_ARENA_GRANULE;
	a->allocs++;
	pthread_mutex_unlock(&a->lock);
	if (cap)
		*cap = (size_t)n * TFS_ARENA_GRANULE;
	return a->base + (uint64_t)g * TFS_ARENA_GRANULE;
}

void tfs_arena_free(struct tfs_arena *a, void *p)
{
	const uint64_t off = (uint64_t)((uint8_t *)p - a->base);
	const size_t g = (size_t)(off / TFS_ARENA_GRANULE);

	assert(tfs_arena_owns(a, p) && off % TFS_ARENA_GRANULE == 0);
	pthread_mutex_lock(&a->lock);
	assert(a->run[g] && bit(a, g));
	mark(a, g, a->run[g], 0);
	a->used -= (uint64_t)a->run[g] * TFS_ARENA_GRANULE;
	a->run[g] = 0;
	pthread_mutex_unlock(&a->lock);
}

int tfs_arena_owns(const struct tfs_arena *a, const void *p)
{
	const uint8_t *q = p;

	return a && q >= a->base && q < a->base + a->bytes;
}

void tfs_arena_span(const struct tfs_arena *a, uint8_t **base, uint64_t *bytes)
{
	*base = a->base;
	*bytes = a->bytes;
}

void tfs_arena_stats(struct tfs_arena *a, struct tfs_arena_stats *out)
{
	pthread_mutex_lock(&a->lock);
	out->bytes = a->bytes;
	out->used = a->used;
	out->allocs = a->allocs;
	out->full = a->full;
	pthread_mutex_unlock(&a->lock);
}

/* A populate: shares of [from, from + bytes), one a task. */
struct populate {
	uint8_t *from;
	uint64_t bytes, share;
};

static int populate_share(void *arg, size_t i)
{
	const struct populate *p = arg;
	const uint64_t off = i * p->share;
	const uint64_t n = p->bytes - off < p->share ? p->bytes - off : p->share;

	/* Faults each page in as a write would, without writing: bytes there stay. */
	return madvise(p->from + off, (size_t)n, MADV_POPULATE_WRITE) ? -errno : 0;
}

int tfs_arena_populate(uint8_t *p, uint64_t len, unsigned threads)
{
	const uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
	const uintptr_t from = (uintptr_t)p / page * page;
	struct populate pp = { (uint8_t *)from, (uint64_t)((uintptr_t)p - from) + len, 0 };

	if (!len)
		return 0;
	if (threads < 1)
		threads = 1;
	if (threads > TFS_ARENA_POPULATE_THREADS)
		threads = TFS_ARENA_POPULATE_THREADS;
	/* Shares of whole huge pages where the range starts on one (a region does, when the
	 * kernel aligns it): a transparent huge page is then faulted in by one thread. */
	pp.share = (pp.bytes + threads - 1) / threads;
	pp.share = (pp.share + REGION_ALIGN - 1) / REGION_ALIGN * REGION_ALIGN;
	return tfs_parallel(NULL, TFS_WORK_NORMAL, (size_t)((pp.bytes + pp.share - 1) / pp.share),
			    threads, populate_share, &pp);
}
