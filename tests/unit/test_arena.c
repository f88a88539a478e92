/* SPDX-License-Identifier: MIT */
/* Unit tests of core/arena and the cache's use of it: runs found first-fit and given back,
 * a full arena said so, decoded buffers taken from it once started and elsewhere when full,
 * and a range's pages committed on several threads with its bytes kept. */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cmocka.h>

#include "arena.h"
#include "cache.h"

static void test_runs(void **state)
{
	struct tfs_arena *a;
	struct tfs_arena_stats st;
	uint8_t *p[32], *base;
	uint64_t bytes;
	size_t cap;

	(void)state;
	assert_int_equal(tfs_arena_create(2u << 20, &a), 0); /* 32 granules */
	tfs_arena_span(a, &base, &bytes);
	assert_int_equal(bytes, 2u << 20);
	for (int i = 0; i < 32; i++) {
		p[i] = tfs_arena_alloc(a, TFS_ARENA_GRANULE - 5, &cap);
		assert_non_null(p[i]);
		assert_int_equal(cap, TFS_ARENA_GRANULE);
		assert_true(tfs_arena_owns(a, p[i]));
		memset(p[i], i, cap); /* writable, and no two overlap (checked below) */
	}
	assert_null(tfs_arena_alloc(a, 1, &cap));
	for (int i = 0; i < 32; i++)
		assert_int_equal(p[i][TFS_ARENA_GRANULE - 1], i);
	/* Free two apart and two together: a 2-granule run fits only where they were together. */
	tfs_arena_free(a, p[3]);
	tfs_arena_free(a, p[10]);
	tfs_arena_free(a, p[11]);
	assert_ptr_equal(tfs_arena_alloc(a, 2 * TFS_ARENA_GRANULE, &cap), p[10]);
	assert_int_equal(cap, 2 * TFS_ARENA_GRANULE);
	assert_null(tfs_arena_alloc(a, 2 * TFS_ARENA_GRANULE, &cap));
	assert_ptr_equal(tfs_arena_alloc(a, 100, &cap), p[3]);
	tfs_arena_stats(a, &st);
	assert_int_equal(st.used, st.bytes);
	assert_int_equal(st.full, 2);
	assert_false(tfs_arena_owns(a, base + bytes));
	assert_false(tfs_arena_owns(a, &cap));
	for (int i = 0; i < 32; i++)
		if (i != 11)
			tfs_arena_free(a, p[i]);
	tfs_arena_stats(a, &st);
	assert_int_equal(st.used, 0);
	assert_non_null(tfs_arena_alloc(a, 2u << 20, &cap)); /* the whole region again */
	tfs_arena_destroy(a);
}

static void test_cache_arena(void **state)
{
	struct tfs_cache *c;
	struct tfs_cache_stats st;
	uint8_t *base, *base2, *p, *q, *r;
	uint64_t len, len2;
	size_t cp, cq, cr;

	(void)state;
	assert_int_equal(tfs_cache_create(1 << 20, &c), 0);
	p = tfs_cache_alloc_decoded(c, 5000, &cp); /* before the arena: elsewhere */
	assert_non_null(p);
	assert_false(tfs_cache_in_arena(c, p));
	assert_int_equal(tfs_cache_arena_start(c, 4u << 20, &base, &len), 0);
	assert_int_equal(tfs_cache_arena_start(c, 0, &base2, &len2), 0); /* the same one */
	assert_ptr_equal(base, base2);
	assert_int_equal(len, len2);
	q = tfs_cache_alloc_decoded(c, 3u << 20, &cq);
	assert_true(tfs_cache_in_arena(c, q));
	r = tfs_cache_alloc_decoded(c, 3u << 20, &cr); /* does not fit: elsewhere */
	assert_non_null(r);
	assert_false(tfs_cache_in_arena(c, r));
	tfs_cache_stats(c, &st);
	assert_int_equal(st.arena_bytes, 4u << 20);
	assert_int_equal(st.arena_used, 3u << 20);
	assert_int_equal(st.arena_full, 1);
	tfs_cache_release(c, p, cp);
	tfs_cache_release(c, q, cq);
	tfs_cache_release(c, r, cr);
	tfs_cache_stats(c, &st);
	assert_int_equal(st.arena_used, 0);
	tfs_cache_destroy(c);
}

#define HUGE (2u << 20)

/* Pages of [p, p + len) the process has committed (mincore: resident). */
static size_t resident_pages(uint8_t *p, size_t len)
{
	const size_t page = (size_t)sysconf(_SC_PAGESIZE), n = (len + page - 1) / page;
	unsigned char *vec = malloc(n);
	size_t in = 0;

	assert_non_null(vec);
	assert_int_equal(mincore(p, len, vec), 0);
	for (size_t i = 0; i < n; i++)
		in += vec[i] & 1;
	free(vec);
	return in;
}

/* A writer of one buffer, busy while the region around it is committed. */
struct writer {
	uint8_t *p;
	size_t len;
	int stop; /* atomic */
	uint8_t last;
};

static void *write_on(void *arg)
{
	struct writer *w = arg;

	while (!__atomic_load_n(&w->stop, __ATOMIC_RELAXED))
		memset(w->p, ++w->last, w->len);
	return NULL;
}

static void test_populate_commits_pages_and_keeps_bytes(void **state)
{
	const size_t page = (size_t)sysconf(_SC_PAGESIZE);
	const uint64_t len = 24u << 20;
	struct writer w = { 0 };
	struct tfs_arena *a;
	pthread_t t;
	uint8_t *base, *kept;
	uint64_t bytes;
	size_t cap;
	int rc;

	(void)state;
	assert_int_equal(tfs_arena_create(len, &a), 0);
	tfs_arena_span(a, &base, &bytes);
	kept = tfs_arena_alloc(a, 3 * TFS_ARENA_GRANULE, &cap);
	w.p = tfs_arena_alloc(a, TFS_ARENA_GRANULE, &cap);
	assert_non_null(kept);
	assert_non_null(w.p);
	for (size_t i = 0; i < 3 * TFS_ARENA_GRANULE; i++)
		kept[i] = (uint8_t)(i * 7 + 1);
	w.len = TFS_ARENA_GRANULE;
	assert_int_equal(pthread_create(&t, NULL, write_on, &w), 0);
	/* The last 2 MiB, never written: not committed yet. */
	assert_int_equal(resident_pages(base + bytes - HUGE, HUGE), 0);
	/* An unaligned start and length, on 5 threads; the last 4 MiB left out: a transparent huge
	 * page is committed whole, and the region need not start on one (under valgrind it does
	 * not), so the last 2 MiB are past any huge page the range touches. */
	rc = tfs_arena_populate(base + 100, bytes - 2 * HUGE - 3 * page, 5);
	__atomic_store_n(&w.stop, 1, __ATOMIC_RELAXED);
	pthread_join(t, NULL);
	if (rc == -EINVAL) {
		tfs_arena_destroy(a);
		skip(); /* a kernel before Linux 5.14: no MADV_POPULATE_WRITE */
	}
	assert_int_equal(rc, 0);
	/* Every page of the range is committed, the last 2 MiB are not. */
	assert_int_equal(resident_pages(base, bytes - 2 * HUGE - 3 * page),
			 (bytes - 2 * HUGE - 3 * page) / page);
	assert_int_equal(resident_pages(base + bytes - HUGE, HUGE), 0);
	for (size_t i = 0; i < 3 * TFS_ARENA_GRANULE; i++)
		assert_int_equal(kept[i], (uint8_t)(i * 7 + 1));
	/* The buffer written meanwhile holds its last write, whole: nothing was put back. */
	for (size_t i = 0; i < w.len; i++)
		assert_int_equal(w.p[i], w.last);
	/* The rest, and the threads clamped: 0 is one thread, and at most the maximum. */
	assert_int_equal(tfs_arena_populate(base + bytes - 2 * HUGE, 2 * HUGE, 0), 0);
	assert_int_equal(tfs_arena_populate(base, bytes, 1000), 0);
	assert_int_equal(tfs_arena_populate(base, 0, 4), 0);
	assert_int_equal(resident_pages(base, bytes), bytes / page);
	tfs_arena_destroy(a);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_runs),
		cmocka_unit_test(test_cache_arena),
		cmocka_unit_test(test_populate_commits_pages_and_keeps_bytes),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
