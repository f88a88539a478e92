/* SPDX-License-Identifier: MIT */
/* cachebuf: the chunk cache's buffers. Lock notes: pool_lock guards the pool's list and counts;
 * the slabs and the arena lock themselves; the arena pointer is set once under arena_lock and
 * read without it (acquire). */
#include "cachebuf.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/mman.h>

#include "arena.h"
#include "slab.h"

/* A free buffer in the pool; the header lives in the buffer itself. */
struct pbuf {
	struct pbuf *next;
	size_t cap;
};

struct tfs_cachebuf {
	uint64_t budget;
	pthread_mutex_t pool_lock;
	struct pbuf *pool;   /* protected by pool_lock */
	uint64_t pool_bytes; /* protected by pool_lock */
	uint64_t pool_max;
	uint64_t pool_reuses;	 /* protected by pool_lock */
	struct tfs_slabs *slabs; /* buffers of tfs_cachebuf_alloc_small; locks itself */
	/* Decoded chunks' buffers once started (tfs_cachebuf_arena_start); set once, then read
	 * without a lock (atomic); locks itself. */
	struct tfs_arena *arena;
	pthread_mutex_t arena_lock; /* serialises tfs_cachebuf_arena_start */
};

int tfs_cachebuf_create(uint64_t budget, struct tfs_cachebuf **out)
{
	struct tfs_cachebuf *c = calloc(1, sizeof(*c));

	if (!c)
		return -ENOMEM;
	if (tfs_slabs_create(&c->slabs)) {
		free(c);
		return -ENOMEM;
	}
	c->budget = budget;
	c->pool_max = budget / 8 < (32u << 20) ? budget / 8 : (32u << 20);
	pthread_mutex_init(&c->pool_lock, NULL);
	pthread_mutex_init(&c->arena_lock, NULL);
	*out = c;
	return 0;
}

void tfs_cachebuf_destroy(struct tfs_cachebuf *c)
{
	if (!c)
		return;
	while (c->pool) {
		struct pbuf *b = c->pool;

		c->pool = b->next;
		free(b);
	}
	tfs_slabs_destroy(c->slabs);
	tfs_arena_destroy(c->arena);
	pthread_mutex_destroy(&c->arena_lock);
	pthread_mutex_destroy(&c->pool_lock);
	free(c);
}

/* Size classes: 64 KiB steps below 1 MiB, 1 MiB steps above, so chunks of one column (and their
 * compressed objects, give or take) share buffers. */
static size_t size_class(size_t len)
{
	size_t step = len < (1u << 20) ? (64u << 10) : (1u << 20);

	return (len + step - 1) / step * step;
}

#define HUGE_PAGE (2u << 20)

/* Buffers of whole huge pages are aligned and marked for transparent huge pages: a cold scan
 * faults in every chunk buffer once, and 2 MiB pages take 512 times fewer faults than 4 KiB. */
static void *alloc_huge(size_t len)
{
	void *p;

	if (len < HUGE_PAGE)
		return malloc(len);
	if (posix_memalign(&p, HUGE_PAGE, len))
		return NULL;
	(void)madvise(p, len & ~((size_t)HUGE_PAGE - 1), MADV_HUGEPAGE);
	return p;
}

void *tfs_cachebuf_alloc(struct tfs_cachebuf *c, size_t len, size_t *cap)
{
	const size_t want = size_class(len ? len : 1);
	struct pbuf **pp, *b = NULL;

	pthread_mutex_lock(&c->pool_lock);
	for (pp = &c->pool; *pp; pp = &(*pp)->next)
		if ((*pp)->cap == want) {
			b = *pp;
			*pp = b->next;
			c->pool_bytes -= b->cap;
			c->pool_reuses++;
			break;
		}
	pthread_mutex_unlock(&c->pool_lock);
	if (!b)
		b = alloc_huge(want);
	if (b && cap)
		*cap = want;
	return b;
}

/* The capacity tfs_cache_alloc_small reports for a slab buffer: its size with this bit set. */
#define CAP_SLAB ((size_t)1 << (sizeof(size_t) * 8 - 1))

void *tfs_cachebuf_alloc_small(struct tfs_cachebuf *c, size_t len, size_t *cap)
{
	const size_t size = tfs_slab_size(len);
	void *p;

	if (!size)
		return tfs_cachebuf_alloc(c, len, cap);
	p = tfs_slab_alloc(c->slabs, size);
	if (p && cap)
		*cap = size | CAP_SLAB;
	return p;
}

void *tfs_cachebuf_alloc_decoded(struct tfs_cachebuf *c, size_t len, size_t *cap)
{
	struct tfs_arena *a = __atomic_load_n(&c->arena, __ATOMIC_ACQUIRE);
	void *p = a ? tfs_arena_alloc(a, len, cap) : NULL;

	return p ? p : tfs_cachebuf_alloc_small(c, len, cap);
}

int tfs_cachebuf_arena_start(struct tfs_cachebuf *c, uint64_t bytes, uint8_t **base, uint64_t *len)
{
	struct tfs_arena *a;
	int rc = 0;

	pthread_mutex_lock(&c->arena_lock);
	a = __atomic_load_n(&c->arena, __ATOMIC_ACQUIRE);
	if (!a) {
		if (!bytes)
			bytes = c->budget + c->budget / 4 + (64u << 20);
		rc = tfs_arena_create(bytes, &a);
		if (!rc)
			__atomic_store_n(&c->arena, a, __ATOMIC_RELEASE);
	}
	pthread_mutex_unlock(&c->arena_lock);
	if (!rc)
		tfs_arena_span(a, base, len);
	return rc;
}

int tfs_cachebuf_in_arena(const struct tfs_cachebuf *c, const void *p)
{
	return tfs_arena_owns(__atomic_load_n(&c->arena, __ATOMIC_ACQUIRE), p);
}

void tfs_cachebuf_release(struct tfs_cachebuf *c, void *p, size_t cap)
{
	struct tfs_arena *a = __atomic_load_n(&c->arena, __ATOMIC_ACQUIRE);
	struct pbuf *b = p;

	if (!p)
		return;
	if (tfs_arena_owns(a, p)) {
		tfs_arena_free(a, p);
		return;
	}
	if (cap & CAP_SLAB) {
		tfs_slab_free(c->slabs, p);
		return;
	}
	/* Only whole size classes go back: anything else came from elsewhere. */
	if (cap < sizeof(*b) || cap != size_class(cap)) {
		free(p);
		return;
	}
	pthread_mutex_lock(&c->pool_lock);
	if (c->pool_bytes + cap <= c->pool_max) {
		b->cap = cap;
		b->next = c->pool;
		c->pool = b;
		c->pool_bytes += cap;
		b = NULL;
	}
	pthread_mutex_unlock(&c->pool_lock);
	free(b);
}

void tfs_cachebuf_stats(struct tfs_cachebuf *c, struct tfs_cachebuf_stats *st)
{
	struct tfs_arena *a = __atomic_load_n(&c->arena, __ATOMIC_ACQUIRE);

	pthread_mutex_lock(&c->pool_lock);
	st->pool_bytes = c->pool_bytes;
	st->pool_reuses = c->pool_reuses;
	pthread_mutex_unlock(&c->pool_lock);
	st->arena_bytes = st->arena_used = st->arena_full = 0;
	if (a) {
		struct tfs_arena_stats as;

		tfs_arena_stats(a, &as);
		st->arena_bytes = as.bytes;
		st->arena_used = as.used;
		st->arena_full = as.full;
	}
}
