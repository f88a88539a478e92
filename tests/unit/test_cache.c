/* SPDX-License-Identifier: MIT */
/* Unit tests of the chunk cache: budget, pinning, one load per key, errors, prefetch counters,
 * the time loads take. */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "cache.h"
#include "cacheplan.h"

#define CHUNK 4096

static struct tfs_id key_of(unsigned i)
{
	struct tfs_id id;

	tfs_id_of(&i, sizeof(i), &id);
	return id;
}

struct loader {
	unsigned loads; /* atomic */
	int fail;
	unsigned delay_us;
};

/* The bytes of entry i: its number repeated, so any mix-up shows. */
static int load(void *arg, const struct tfs_id *key, uint8_t **data, size_t *len, size_t *cap)
{
	struct loader *l = arg;
	uint8_t *p;

	__atomic_add_fetch(&l->loads, 1, __ATOMIC_RELAXED);
	if (l->delay_us) {
		struct timespec ts = { 0, (long)l->delay_us * 1000 };

		nanosleep(&ts, NULL);
	}
	if (l->fail)
		return -EIO;
	(void)cap; /* plain malloc: the cache frees it */
	p = malloc(CHUNK);
	if (!p)
		return -ENOMEM;
	memset(p, key->b[0], CHUNK);
	*data = p;
	*len = CHUNK;
	return 0;
}

static void check_entry(const struct tfs_cache_entry *e, const struct tfs_id *key)
{
	assert_int_equal(e->len, CHUNK);
	for (size_t i = 0; i < CHUNK; i++)
		if (e->data[i] != key->b[0])
			fail_msg("entry bytes differ at %zu", i);
}

static void test_hit_after_miss(void **state)
{
	struct tfs_cache *c;
	struct tfs_cache_entry *e;
	struct loader l = { .delay_us = 2000 };
	struct tfs_cache_stats st;
	struct tfs_id k = key_of(1);
	uint64_t load_ns;

	(void)state;
	assert_int_equal(tfs_cache_create(1 << 20, &c), 0);
	assert_int_equal(tfs_cache_get(c, &k, load, &l, &e), 0);
	check_entry(e, &k);
	tfs_cache_put(c, e);
	tfs_cache_stats(c, &st);
	load_ns = st.load_ns;
	assert_true(load_ns >= 2000000); /* the loader's time */
	assert_int_equal(tfs_cache_get(c, &k, load, &l, &e), 0);
	tfs_cache_put(c, e);
	tfs_cache_stats(c, &st);
	assert_int_equal(st.load_ns, load_ns); /* a hit loads nothing */
	assert_int_equal(l.loads, 1);
	assert_int_equal(st.hits, 1);
	assert_int_equal(st.misses, 1);
	assert_int_equal(st.bytes, CHUNK);
	tfs_cache_destroy(c);
}

/* The cache stays within its budget, and an entry in use is never freed by eviction. */
static void test_budget_and_pinned_entry_survives(void **state)
{
	struct tfs_cache *c;
	struct tfs_cache_entry *pinned, *e;
	struct loader l = { 0 };
	struct tfs_cache_stats st;
	struct tfs_id k0 = key_of(0);

	(void)state;
	assert_int_equal(tfs_cache_create(4 * CHUNK, &c), 0);
	assert_int_equal(tfs_cache_get(c, &k0, load, &l, &pinned), 0);
	for (unsigned i = 1; i < 200; i++) {
		struct tfs_id k = key_of(i);

		assert_int_equal(tfs_cache_get(c, &k, load, &l, &e), 0);
		check_entry(e, &k);
		tfs_cache_put(c, e);
		tfs_cache_stats(c, &st);
		/* Over budget only by what is pinned: the long-held entry. */
		assert_true(st.bytes <= 4 * CHUNK + CHUNK);
	}
	check_entry(pinned, &k0); /* under ASan a freed entry would be caught here */
	tfs_cache_stats(c, &st);
	assert_true(st.evictions >= 190);
	tfs_cache_put(c, pinned);
	tfs_cache_stats(c, &st);
	assert_true(st.bytes <= 4 * CHUNK);
	tfs_cache_destroy(c);
}

/* Eviction takes the least recently used entries of the whole cache, whatever shards they are
 * in: entries used again after others were loaded outlive those others. */
static void test_lru_across_shards(void **state)
{
	struct tfs_cache *c;
	struct tfs_cache_entry *e;
	struct loader l = { 0 };

	(void)state;
	assert_int_equal(tfs_cache_create(8 * CHUNK, &c), 0);
	for (unsigned i = 0; i < 8; i++) {
		struct tfs_id k = key_of(i);

		assert_int_equal(tfs_cache_get(c, &k, load, &l, &e), 0);
		tfs_cache_put(c, e);
	}
	for (unsigned i = 0; i < 4; i++) { /* used again: now the four newest */
		struct tfs_id k = key_of(i);

		assert_int_equal(tfs_cache_get_ready(c, &k, &e), 0);
		tfs_cache_put(c, e);
	}
	for (unsigned i = 8; i < 12; i++) {
		struct tfs_id k = key_of(i);

		assert_int_equal(tfs_cache_get(c, &k, load, &l, &e), 0);
		tfs_cache_put(c, e);
	}
	for (unsigned i = 0; i < 12; i++) {
		struct tfs_id k = key_of(i);
		const int rc = tfs_cache_get_ready(c, &k, &e);

		if (rc == 0)
			tfs_cache_put(c, e);
		if (i >= 4 && i < 8)
			assert_int_equal(rc, -ENOENT);
		else
			assert_int_equal(rc, 0);
	}
	tfs_cache_destroy(c);
}

static void test_load_error_not_cached(void **state)
{
	struct tfs_cache *c;
	struct tfs_cache_entry *e;
	struct loader l = { .fail = 1 };
	struct tfs_cache_stats st;
	struct tfs_id k = key_of(7);

	(void)state;
	assert_int_equal(tfs_cache_create(1 << 20, &c), 0);
	assert_int_equal(tfs_cache_get(c, &k, load, &l, &e), -EIO);
	assert_int_equal(tfs_cache_get(c, &k, load, &l, &e), -EIO);
	assert_int_equal(l.loads, 2);
	l.fail = 0;
	assert_int_equal(tfs_cache_get(c, &k, load, &l, &e), 0);
	check_entry(e, &k);
	tfs_cache_put(c, e);
	tfs_cache_stats(c, &st);
	assert_int_equal(st.load_errors, 2);
	tfs_cache_destroy(c);
}

struct race {
	struct tfs_cache *c;
	struct loader *l;
	unsigned seed;
	unsigned keys;
	int errors;
};

static void *reader(void *arg)
{
	struct race *r = arg;

	for (int i = 0; i < 3000; i++) {
		struct tfs_cache_entry *e;
		struct tfs_id k;

		r->seed = r->seed * 1103515245 + 12345;
		k = key_of((r->seed >> 8) % r->keys);
		if (tfs_cache_get(r->c, &k, load, r->l, &e)) {
			r->errors++;
			continue;
		}
		if (e->len != CHUNK || e->data[0] != k.b[0] || e->data[CHUNK - 1] != k.b[0])
			r->errors++;
		tfs_cache_put(r->c, e);
	}
	return NULL;
}

/* Many threads, random keys, a budget far below the working set. */
static void test_concurrent_readers_under_pressure(void **state)
{
	struct tfs_cache *c;
	struct loader l = { 0 };
	struct race r[8];
	pthread_t t[8];
	struct tfs_cache_stats st;

	(void)state;
	assert_int_equal(tfs_cache_create(8 * CHUNK, &c), 0);
	for (int i = 0; i < 8; i++) {
		r[i] = (struct race){ c, &l, (unsigned)i * 7919u + 1, 64, 0 };
		pthread_create(&t[i], NULL, reader, &r[i]);
	}
	for (int i = 0; i < 8; i++) {
		pthread_join(t[i], NULL);
		assert_int_equal(r[i].errors, 0);
	}
	tfs_cache_stats(c, &st);
	assert_true(st.bytes <= 8 * CHUNK);
	assert_true(st.evictions > 0);
	tfs_cache_destroy(c);
}

struct joiner {
	struct tfs_cache *c;
	struct loader *l;
	int rc;
};

static void *join_one(void *arg)
{
	struct joiner *j = arg;
	struct tfs_cache_entry *e;
	struct tfs_id k = key_of(42);

	j->rc = tfs_cache_get(j->c, &k, load, j->l, &e);
	if (!j->rc)
		tfs_cache_put(j->c, e);
	return NULL;
}

/* Readers missing on one key at once share a single load. */
static void test_one_load_per_key(void **state)
{
	struct tfs_cache *c;
	struct loader l = { .delay_us = 50000 };
	struct joiner j[6];
	pthread_t t[6];
	struct tfs_cache_stats st;

	(void)state;
	assert_int_equal(tfs_cache_create(1 << 20, &c), 0);
	for (int i = 0; i < 6; i++) {
		j[i] = (struct joiner){ c, &l, -1 };
		pthread_create(&t[i], NULL, join_one, &j[i]);
	}
	for (int i = 0; i < 6; i++) {
		pthread_join(t[i], NULL);
		assert_int_equal(j[i].rc, 0);
	}
	tfs_cache_stats(c, &st);
	assert_int_equal(l.loads, 1);
	assert_int_equal(st.misses, 1);
	assert_int_equal(st.hits + st.waits, 5);
	/* The one load's time, counted once however many waited for it: six would be 300 ms. */
	assert_true(st.load_ns >= 50000000 && st.load_ns < 250000000);
	tfs_cache_destroy(c);
}

static void test_prefetch_counters(void **state)
{
	struct tfs_cache *c;
	struct tfs_cache_entry *e;
	struct loader l = { 0 };
	struct tfs_cache_stats st;
	struct tfs_id k1 = key_of(1), k2 = key_of(2);

	(void)state;
	assert_int_equal(tfs_cache_create(2 * CHUNK, &c), 0);
	assert_int_equal(tfs_cache_prefetch(c, &k1, load, &l), 1);
	assert_int_equal(tfs_cache_prefetch(c, &k1, load, &l), 0); /* cached already */
	assert_true(tfs_cache_contains(c, &k1));
	tfs_cache_stats(c, &st);
	assert_int_equal(st.prefetch_loads, 1);
	assert_int_equal(st.prefetch_pending, CHUNK);
	assert_int_equal(tfs_cache_get(c, &k1, load, &l, &e), 0);
	tfs_cache_put(c, e);
	tfs_cache_stats(c, &st);
	assert_int_equal(st.prefetch_hits, 1);
	assert_int_equal(st.prefetch_pending, 0);
	assert_int_equal(l.loads, 1);
	/* Loaded ahead, then pushed out by other entries before any reader: wasted. */
	assert_int_equal(tfs_cache_prefetch(c, &k2, load, &l), 1);
	for (unsigned i = 10; i < 14; i++) {
		struct tfs_id k = key_of(i);

		assert_int_equal(tfs_cache_get(c, &k, load, &l, &e), 0);
		tfs_cache_put(c, e);
	}
	tfs_cache_stats(c, &st);
	assert_int_equal(st.prefetch_wasted, 1);
	assert_int_equal(st.prefetch_pending, 0);
	assert_false(tfs_cache_contains(c, &k2));
	tfs_cache_destroy(c);
}

/* Room ahead: the budget less the entries readers hold and those loaded ahead and not used yet.
 * A hold counts once however many readers hold the entry, a failed load adds nothing, and the
 * last put gives it back. The bytes cached, held or not, are tfs_cache_stats's. */
static void test_room_ahead(void **state)
{
	struct tfs_cache *c;
	struct tfs_cache_stats st;
	struct tfs_cache_entry *e1, *e2, *again;
	struct loader l = { 0 }, bad = { .fail = 1 };
	struct tfs_id k1 = key_of(1), k2 = key_of(2), k3 = key_of(3);

	(void)state;
	assert_int_equal(tfs_cache_create(4 * CHUNK, &c), 0);
	assert_true(tfs_cache_room_ahead(c, 4 * CHUNK));
	assert_false(tfs_cache_room_ahead(c, 4 * CHUNK + 1));
	assert_int_equal(tfs_cache_get(c, &k1, load, &l, &e1), 0);
	assert_true(tfs_cache_room_ahead(c, 3 * CHUNK));
	assert_false(tfs_cache_room_ahead(c, 3 * CHUNK + 1));
	assert_int_equal(tfs_cache_get(c, &k1, load, &l, &again), 0); /* a second hold */
	assert_false(tfs_cache_room_ahead(c, 3 * CHUNK + 1));
	assert_int_equal(tfs_cache_prefetch(c, &k2, load, &l), 1);
	assert_true(tfs_cache_room_ahead(c, 2 * CHUNK));
	assert_false(tfs_cache_room_ahead(c, 2 * CHUNK + 1));
	assert_int_equal(tfs_cache_get(c, &k3, load, &bad, &e2), -EIO);
	assert_true(tfs_cache_room_ahead(c, 2 * CHUNK));
	assert_int_equal(tfs_cache_bytes(c), 2 * CHUNK);
	tfs_cache_put(c, again);
	assert_false(tfs_cache_room_ahead(c, 2 * CHUNK + 1)); /* k1 is still held */
	tfs_cache_put(c, e1);
	assert_true(tfs_cache_room_ahead(c, 3 * CHUNK));
	/* Used at last: no longer ahead, held instead. */
	assert_int_equal(tfs_cache_get(c, &k2, load, &l, &e2), 0);
	assert_false(tfs_cache_room_ahead(c, 3 * CHUNK + 1));
	tfs_cache_put(c, e2);
	assert_true(tfs_cache_room_ahead(c, 4 * CHUNK));
	assert_int_equal(l.loads, 2);
	tfs_cache_stats(c, &st);
	assert_int_equal(tfs_cache_bytes(c), st.bytes);
	assert_int_equal(st.bytes, 2 * CHUNK); /* none held, both kept */
	tfs_cache_destroy(c);
}

/* Pool buffers are reused, bounded, and entries loaded into them go back on eviction. */
static void test_buffer_pool(void **state)
{
	struct tfs_cache *c;
	struct tfs_cache_stats st;
	size_t cap;
	void *a, *b;

	(void)state;
	assert_int_equal(tfs_cache_create(64 << 20, &c), 0); /* pool: 8 MiB */
	a = tfs_cache_alloc(c, 3000000, &cap);
	assert_non_null(a);
	assert_true(cap >= 3000000);
	memset(a, 1, 3000000);
	tfs_cache_release(c, a, cap);
	b = tfs_cache_alloc(c, 2900000, &cap);
	assert_ptr_equal(a, b); /* same size class: reused */
	tfs_cache_release(c, b, cap);
	tfs_cache_stats(c, &st);
	assert_int_equal(st.pool_reuses, 1);
	assert_int_equal(st.pool_bytes, cap);
	/* Bounded: many releases keep at most an eighth of the budget. */
	for (int i = 0; i < 10; i++) {
		void *p = tfs_cache_alloc(c, 4 << 20, &cap);

		tfs_cache_release(c, p, cap);
		(void)p;
	}
	{
		void *ps[10];

		for (int i = 0; i < 10; i++)
			ps[i] = tfs_cache_alloc(c, 4 << 20, &cap);
		for (int i = 0; i < 10; i++)
			tfs_cache_release(c, ps[i], cap);
	}
	tfs_cache_stats(c, &st);
	assert_true(st.pool_bytes <= (8u << 20));
	tfs_cache_destroy(c);
}

/* MIN: with a plan published, the entry needed furthest ahead goes first, one no plan needs
 * again before one no plan knows, and one in use or within the protected rows last; LRU
 * otherwise. */
static void test_evict_by_plan(void **state)
{
	struct tfs_cache *c;
	struct tfs_cache_plan *p;
	struct tfs_cache_entry *e;
	struct loader l = { 0 };
	struct tfs_id k[6];
	uint64_t dist;

	(void)state;
	for (unsigned i = 0; i < 6; i++)
		k[i] = key_of(i);
	assert_int_equal(tfs_cache_create(4 * CHUNK, &c), 0);
	tfs_cache_evict_by_plans(c, 1);
	p = tfs_cache_plan_new(5);
	assert_non_null(p);
	/* k0 at 100..110, k1 at 20, k2 at 50, k3 at 1 (within the protected 5); k4 unknown;
	 * k5 at 0 only (done once the cursor passes it). */
	assert_int_equal(tfs_cache_plan_use(p, &k[0], 110), 0);
	assert_int_equal(tfs_cache_plan_use(p, &k[0], 100), 0);
	assert_int_equal(tfs_cache_plan_use(p, &k[1], 20), 0);
	assert_int_equal(tfs_cache_plan_use(p, &k[2], 50), 0);
	assert_int_equal(tfs_cache_plan_use(p, &k[3], 1), 0);
	assert_int_equal(tfs_cache_plan_use(p, &k[5], 0), 0);
	tfs_cache_plan_start(c, p);
	tfs_cache_plan_at(p, 1);
	assert_int_equal(tfs_cache_plan_class(p, &k[0], &dist), 2);
	assert_int_equal(dist, 99);
	assert_int_equal(tfs_cache_plan_class(p, &k[3], &dist), 3);
	assert_int_equal(tfs_cache_plan_class(p, &k[4], &dist), 1);
	assert_int_equal(tfs_cache_plan_class(p, &k[5], &dist), 0);
	/* Fill 4 entries, k0..k3; each newcomer below is pinned while it loads, so one of the
	 * others goes. */
	for (unsigned i = 0; i < 4; i++) {
		assert_int_equal(tfs_cache_get(c, &k[i], load, &l, &e), 0);
		tfs_cache_put(c, e);
	}
	/* The furthest needed goes (k0, at 100), not the least recently used (also k0), ... */
	assert_int_equal(tfs_cache_get(c, &k[5], load, &l, &e), 0);
	tfs_cache_put(c, e);
	assert_int_equal(tfs_cache_contains(c, &k[0]), 0);
	assert_int_equal(tfs_cache_contains(c, &k[1]) + tfs_cache_contains(c, &k[2]), 2);
	/* ... one no plan needs again before any other (k5, passed) ... */
	assert_int_equal(tfs_cache_get(c, &k[4], load, &l, &e), 0);
	tfs_cache_put(c, e);
	assert_int_equal(tfs_cache_contains(c, &k[5]), 0);
	/* ... one no plan knows before a planned one (k4, though k1 is older) ... */
	assert_int_equal(tfs_cache_get(c, &k[0], load, &l, &e), 0);
	tfs_cache_put(c, e);
	assert_int_equal(tfs_cache_contains(c, &k[4]), 0);
	assert_int_equal(tfs_cache_contains(c, &k[1]), 1);
	/* ... and the protected one (k3, due within 5 rows) never while others can go. */
	for (unsigned i = 6; i < 9; i++) {
		struct tfs_id kx = key_of(i);

		assert_int_equal(tfs_cache_get(c, &kx, load, &l, &e), 0);
		tfs_cache_put(c, e);
		assert_int_equal(tfs_cache_contains(c, &k[3]), 1);
	}
	tfs_cache_plan_end(c, p);
	tfs_cache_destroy(c);
}

/* Small chunks: one pass of the plans' ranking evicts a slack's worth (1/64 of the budget), the
 * ones needed furthest ahead, not one chunk a pass. */
static void test_evict_by_plan_in_batches(void **state)
{
	enum { N = 256 };
	struct tfs_cache *c;
	struct tfs_cache_plan *p;
	struct tfs_cache_entry *e;
	struct loader l = { 0 };
	struct tfs_id extra = key_of(N);
	unsigned kept = 0;

	(void)state;
	assert_int_equal(tfs_cache_create(N * CHUNK, &c), 0);
	tfs_cache_evict_by_plans(c, 1);
	p = tfs_cache_plan_new(1);
	assert_non_null(p);
	for (unsigned i = 0; i < N; i++) {
		struct tfs_id k = key_of(i);

		assert_int_equal(tfs_cache_plan_use(p, &k, 10 + i), 0); /* key i needed at 10 + i */
	}
	tfs_cache_plan_start(c, p);
	for (unsigned i = 0; i < N; i++) {
		struct tfs_id k = key_of(i);

		assert_int_equal(tfs_cache_get(c, &k, load, &l, &e), 0);
		tfs_cache_put(c, e);
	}
	assert_int_equal(tfs_cache_get(c, &extra, load, &l, &e), 0);
	tfs_cache_put(c, e);
	/* The newcomer is unknown to the plan (LRU class): it was pinned while loading, so the four
	 * needed furthest ahead went in one pass, and nothing else. */
	for (unsigned i = 0; i < N; i++) {
		struct tfs_id k = key_of(i);

		kept += (unsigned)tfs_cache_contains(c, &k);
		if (i >= N - 4)
			assert_int_equal(tfs_cache_contains(c, &k), 0);
	}
	assert_int_equal(kept, N - 4);
	assert_int_equal(tfs_cache_contains(c, &extra), 1);
	tfs_cache_plan_end(c, p);
	tfs_cache_destroy(c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_hit_after_miss),
		cmocka_unit_test(test_budget_and_pinned_entry_survives),
		cmocka_unit_test(test_lru_across_shards),
		cmocka_unit_test(test_load_error_not_cached),
		cmocka_unit_test(test_concurrent_readers_under_pressure),
		cmocka_unit_test(test_one_load_per_key),
		cmocka_unit_test(test_prefetch_counters),
		cmocka_unit_test(test_room_ahead),
		cmocka_unit_test(test_buffer_pool),
		cmocka_unit_test(test_evict_by_plan),
		cmocka_unit_test(test_evict_by_plan_in_batches),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
