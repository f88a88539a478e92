/* SPDX-License-Identifier: MIT */
/* slab: small buffers carved from 2 MiB huge-page regions, one size per region. */
#include "slab.h"

#include <assert.h>
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/mman.h>

#define NSIZES (TFS_SLAB_MAX / TFS_SLAB_STEP)

/* The header of a region, in its first buffer's place: a buffer's region is its address rounded
 * down to TFS_SLAB_BYTES. */
struct region {
	struct region *prev, *next; /* in the size's list of regions with a free buffer */
	void *free;		    /* buffers given back, linked through their first word */
	size_t size;
	unsigned nbufs; /* buffers 1..nbufs-1 (0 is this header) */
	unsigned fresh; /* buffers from here on were never handed out */
	unsigned used;
	int listed;
};

struct tfs_slabs {
	pthread_mutex_t lock;
	struct region *open[NSIZES];  /* regions with a free buffer; protected by lock */
	struct region *spare[NSIZES]; /* an empty region kept per size; protected by lock */
	uint64_t held, used;	      /* bytes; protected by lock */
};

int tfs_slabs_create(struct tfs_slabs **out)
{
	struct tfs_slabs *s = calloc(1, sizeof(*s));

	if (!s)
		return -ENOMEM;
	pthread_mutex_init(&s->lock, NULL);
	*out = s;
	return 0;
}

static void region_release(struct tfs_slabs *s, struct region *r)
{
	s->held -= TFS_SLAB_BYTES;
	free(r);
}

void tfs_slabs_destroy(struct tfs_slabs *s)
{
	if (!s)
		return;
	for (unsigned i = 0; i < NSIZES; i++) {
		while (s->open[i]) {
			struct region *r = s->open[i];

			s->open[i] = r->next;
			region_release(s, r);
		}
		if (s->spare[i])
			region_release(s, s->spare[i]);
	}
	/* Full regions are on no list: the cache frees every buffer before destroying us. */
	pthread_mutex_destroy(&s->lock);
	free(s);
}

size_t tfs_slab_size(size_t len)
{
	if (len > TFS_SLAB_MAX)
		return 0;
	return len ? (len + TFS_SLAB_STEP - 1) / TFS_SLAB_STEP * TFS_SLAB_STEP : TFS_SLAB_STEP;
}

static void link_open(struct tfs_slabs *s, struct region *r)
{
	struct region **head = &s->open[r->size / TFS_SLAB_STEP - 1];

	r->prev = NULL;
	r->next = *head;
	if (*head)
		(*head)->prev = r;
	*head = r;
	r->listed = 1;
}

static void unlink_open(struct tfs_slabs *s, struct region *r)
{
	if (r->prev)
		r->prev->next = r->next;
	else
		s->open[r->size / TFS_SLAB_STEP - 1] = r->next;
	if (r->next)
		r->next->prev = r->prev;
	r->listed = 0;
}

/* A region for buffers of size. Writing its header is the first touch of its huge page, which
 * the kernel zeroes then (a millisecond or more on some virtual machines): not under s->lock,
 * which every frame's buffer takes. */
static struct region *region_new(size_t size)
{
	struct region *r;

	if (posix_memalign((void **)&r, TFS_SLAB_BYTES, TFS_SLAB_BYTES))
		return NULL;
	(void)madvise(r, TFS_SLAB_BYTES, MADV_HUGEPAGE);
	*r = (struct region){ .size = size,
			      .nbufs = (unsigned)(TFS_SLAB_BYTES / size),
			      .fresh = 1 };
	return r;
}

void *tfs_slab_alloc(struct tfs_slabs *s, size_t size)
{
	const unsigned i = (unsigned)(size / TFS_SLAB_STEP) - 1;
	struct region *r, *extra = NULL;
	void *p;

	assert(size && size == tfs_slab_size(size));
	pthread_mutex_lock(&s->lock);
	if (!s->open[i] && !s->spare[i]) {
		/* Made unlocked, it becomes the size's spare; one another thread left there
		 * meanwhile serves as well, and ours goes. */
		pthread_mutex_unlock(&s->lock);
		r = region_new(size);
		pthread_mutex_lock(&s->lock);
		if (r && s->spare[i]) {
			extra = r;
		} else if (r) {
			s->held += TFS_SLAB_BYTES;
			s->spare[i] = r;
		}
	}
	r = s->open[i];
	if (!r) {
		r = s->spare[i];
		s->spare[i] = NULL;
		if (!r) {
			pthread_mutex_unlock(&s->lock);
			return NULL;
		}
		link_open(s, r);
	}
	if (r->free) {
		p = r->free;
		r->free = *(void **)p;
	} else {
		p = (uint8_t *)r + (size_t)r->fresh++ * size;
	}
	if (++r->used == r->nbufs - 1)
		unlink_open(s, r);
	s->used += size;
	pthread_mutex_unlock(&s->lock);
	free(extra);
	return p;
}

void tfs_slab_free(struct tfs_slabs *s, void *p)
{
	struct region *r = (struct region *)((uintptr_t)p & ~((uintptr_t)TFS_SLAB_BYTES - 1));
	const unsigned i = (unsigned)(r->size / TFS_SLAB_STEP) - 1;

	assert((void *)r != p && ((uint8_t *)p - (uint8_t *)r) % r->size == 0);
	pthread_mutex_lock(&s->lock);
	*(void **)p = r->free;
	r->free = p;
	s->used -= r->size;
	if (!r->listed)
		link_open(s, r);
	if (--r->used == 0) {
		/* Empty: keep one a size, so that a buffer taken and given back over and over does
		 * not make and free a region (and fault in its huge page) each time. */
		unlink_open(s, r);
		if (s->spare[i]) {
			region_release(s, r);
		} else {
			r->free = NULL;
			r->fresh = 1;
			s->spare[i] = r;
		}
	}
	pthread_mutex_unlock(&s->lock);
}

void tfs_slabs_usage(struct tfs_slabs *s, uint64_t *held, uint64_t *used)
{
	pthread_mutex_lock(&s->lock);
	*held = s->held;
	*used = s->used;
	pthread_mutex_unlock(&s->lock);
}
