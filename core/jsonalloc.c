/* SPDX-License-Identifier: MIT */
/* jsonalloc: a bump arena a thread, behind jansson's allocation functions. */
#include "jsonalloc.h"

#include <assert.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>

#include <jansson.h>

/* A line of JSON Lines and its values fit many times over; a larger one spills to malloc. */
#define ARENA_BYTES (256u << 10)

struct arena {
	uint8_t *base;
	size_t used;
};

static pthread_once_t once = PTHREAD_ONCE_INIT;
static pthread_key_t key; /* the thread's arena, freed when the thread exits */
/* Key made and jansson's functions set: by tfs_jsonalloc_install, before the threads that open
 * scopes exist or are handed work. */
static int ready;
/* The arena of this thread's open scope: NULL outside one. */
static __thread struct arena *cur;

static void *arena_malloc(size_t n)
{
	struct arena *a = cur;

	if (a && n <= ARENA_BYTES - a->used) {
		void *p = a->base + a->used;

		a->used += (n + 15) & ~(size_t)15;
		if (a->used > ARENA_BYTES)
			a->used = ARENA_BYTES;
		return p;
	}
	return malloc(n);
}

int tfs_jsonalloc_holds(const void *p)
{
	const struct arena *a = cur;

	return a && (const uint8_t *)p >= a->base && (const uint8_t *)p < a->base + ARENA_BYTES;
}

static void arena_free(void *p)
{
	if (!tfs_jsonalloc_holds(p))
		free(p); /* an arena's values all go at its scope's end */
}

static void arena_drop(void *p)
{
	struct arena *a = p;

	free(a->base);
	free(a);
}

static void setup(void)
{
	/* Without a key, no arena: every scope uses malloc. */
	if (pthread_key_create(&key, arena_drop))
		return;
	json_set_alloc_funcs(arena_malloc, arena_free);
	ready = 1;
}

void tfs_jsonalloc_install(void)
{
	pthread_once(&once, setup);
}

void tfs_jsonalloc_begin(void)
{
	struct arena *a;

	assert(!cur);
	if (!ready)
		return; /* not installed (or it failed): malloc */
	a = pthread_getspecific(key);
	if (!a) {
		a = calloc(1, sizeof(*a));
		if (a && !(a->base = malloc(ARENA_BYTES))) {
			free(a);
			a = NULL;
		}
		if (!a || pthread_setspecific(key, a)) {
			if (a)
				arena_drop(a);
			return; /* this scope allocates with malloc */
		}
	}
	a->used = 0;
	cur = a;
}

void tfs_jsonalloc_end(void)
{
	if (cur)
		cur->used = 0;
	cur = NULL;
}
