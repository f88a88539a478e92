/* SPDX-License-Identifier: MIT */
/* Unit tests of core/devcache: hits after ready, misses before; LRU eviction of unused entries
 * only, each evicted entry's tag handed back once; a failed fill leaves nothing behind; memory
 * taken a segment at a time as entries need it, within the budget and only when the caller
 * gives it; given back under pressure, a segment at a time, the coldest first, never under a
 * referenced entry, and by the cache's own watcher when the memory is short. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "arena.h"
#include "devcache.h"

#define G ((uint64_t)TFS_ARENA_GRANULE)

static int evicted[32];

/* The caller's memory, stood in for: segments at made addresses, recorded. */
static struct {
	int refuse;		  /* grow gives nothing */
	unsigned grown, released; /* calls */
	uint64_t live[16];	  /* segments given out and not released (0: free slot) */
	uint64_t next;
} mem;

/* The callbacks run on several threads at once in test_threads. */
static pthread_mutex_t mem_lock = PTHREAD_MUTEX_INITIALIZER;
static int slow; /* grow takes a while */

static uint64_t on_grow(void *arg, uint64_t bytes)
{
	uint64_t at = 0;

	(void)arg;
	if (slow)
		usleep(500);
	pthread_mutex_lock(&mem_lock);
	if (!mem.refuse) {
		mem.grown++;
		for (int i = 0; i < 16 && !at; i++)
			if (!mem.live[i])
				at = mem.live[i] = 0x7f0000000000ull + (mem.next++) * (bytes + G);
	}
	pthread_mutex_unlock(&mem_lock);
	assert_true(at || mem.refuse);
	return at;
}

static void on_release(void *arg, uint64_t addr, uint64_t bytes)
{
	int found = 0;

	(void)arg;
	(void)bytes;
	pthread_mutex_lock(&mem_lock);
	mem.released++;
	for (int i = 0; i < 16 && !found; i++)
		if (mem.live[i] == addr) {
			mem.live[i] = 0;
			found = 1;
		}
	pthread_mutex_unlock(&mem_lock);
	assert_true(found); /* one of ours, released once */
}

static void on_evict(void *arg, void *tag)
{
	(void)arg;
	__atomic_add_fetch(&evicted[(uintptr_t)tag % 32], 1, __ATOMIC_RELAXED);
}

static const struct tfs_devcache_mem callbacks = { .grow = on_grow,
						   .release = on_release,
						   .evict = on_evict };

static void reset(void)
{
	memset(evicted, 0, sizeof(evicted));
	memset(&mem, 0, sizeof(mem));
}

static struct tfs_id key(int i)
{
	struct tfs_id id;

	memset(&id, 0, sizeof(id));
	id.b[0] = (uint8_t)i;
	id.b[9] = (uint8_t)(i * 7);
	return id;
}

/* The segment given out that holds [addr, addr + len) (len 1: addr), or -1. */
static int seg_holding(uint64_t addr, uint64_t len, uint64_t seg)
{
	int at = -1;

	pthread_mutex_lock(&mem_lock);
	for (int i = 0; i < 16 && at < 0; i++)
		if (mem.live[i] && addr >= mem.live[i] && addr + len <= mem.live[i] + seg)
			at = i;
	pthread_mutex_unlock(&mem_lock);
	return at;
}

static int seg_of(uint64_t addr, uint64_t seg)
{
	return seg_holding(addr, 1, seg);
}

/* Insert key i of len bytes, ready (tag i), unreferenced. */
static struct tfs_devcache_entry *put_ready(struct tfs_devcache *d, int i, uint64_t len)
{
	struct tfs_id k = key(i);
	struct tfs_devcache_entry *e = tfs_devcache_insert(d, &k, len);

	assert_non_null(e);
	tfs_devcache_ready(d, e, (void *)(uintptr_t)i);
	tfs_devcache_put(d, e);
	return e;
}

static int cached(struct tfs_devcache *d, int i)
{
	struct tfs_id k = key(i);
	struct tfs_devcache_entry *e = tfs_devcache_get(d, &k);

	if (e)
		tfs_devcache_put(d, e);
	return e != NULL;
}

static void test_policy(void **state)
{
	struct tfs_devcache_entry *e[8], *x;
	struct tfs_devcache_stats st;
	struct tfs_devcache *d;
	struct tfs_id k;

	(void)state;
	reset();
	/* One segment of four granules. */
	assert_int_equal(tfs_devcache_create(4 * G, 4 * G, &callbacks, &d), 0);
	k = key(1);
	assert_null(tfs_devcache_get(d, &k));
	e[1] = tfs_devcache_insert(d, &k, G);
	assert_non_null(e[1]);
	assert_int_equal(seg_of(e[1]->addr, 4 * G), 0);
	assert_true(e[1]->addr + G <= mem.live[0] + 4 * G);
	assert_null(tfs_devcache_insert(d, &k, G)); /* being filled */
	assert_null(tfs_devcache_get(d, &k));	    /* not ready yet */
	tfs_devcache_ready(d, e[1], (void *)(uintptr_t)1);
	tfs_devcache_put(d, e[1]);
	x = tfs_devcache_get(d, &k);
	assert_ptr_equal(x, e[1]);
	/* Three more of one granule each fill it; 1 stays referenced. */
	for (int i = 2; i <= 4; i++)
		e[i] = put_ready(d, i, G);
	for (int i = 1; i <= 4; i++)
		for (int j = i + 1; j <= 4; j++)
			assert_true(e[i]->addr != e[j]->addr);
	k = key(2);
	tfs_devcache_put(d, tfs_devcache_get(d, &k)); /* 2 used after 3 and 4 */
	/* Two granules: the least recently used unused ones go (3, then 4); 1 is referenced. */
	k = key(5);
	e[5] = tfs_devcache_insert(d, &k, 2 * G);
	assert_non_null(e[5]);
	assert_int_equal(evicted[3], 1);
	assert_int_equal(evicted[4], 1);
	assert_int_equal(evicted[1] + evicted[2], 0);
	/* No room while 1 and 5 are referenced and 2's granule is too small for 3 granules. */
	k = key(6);
	assert_null(tfs_devcache_insert(d, &k, 3 * G));
	assert_int_equal(evicted[2], 1); /* tried: 2 went, still no room */
	k = key(7);
	assert_null(tfs_devcache_insert(d, &k, 5 * G)); /* larger than a segment */
	/* A failed fill: put without ready leaves no entry. */
	tfs_devcache_put(d, e[5]);
	k = key(5);
	assert_null(tfs_devcache_get(d, &k));
	tfs_devcache_stats(d, &st);
	assert_int_equal(st.entries, 1);
	assert_int_equal(st.bytes, G);
	assert_int_equal(st.held, 4 * G);
	assert_int_equal(st.evictions, 3);
	assert_int_equal(st.full, 1);
	assert_int_equal(mem.grown, 1); /* the budget is one segment */
	tfs_devcache_put(d, x);
	tfs_devcache_destroy(d);
	assert_int_equal(evicted[1], 1); /* destroyed: its tag handed back */
	assert_int_equal(mem.released, 1);
}

/* Memory is taken a segment at a time as entries need it, up to the budget; a segment the
 * caller cannot give now means eviction within the ones it has. */
static void test_segments_grow(void **state)
{
	struct tfs_devcache_entry *e[12];
	struct tfs_devcache_stats st;
	struct tfs_devcache *d;
	uint64_t first;

	(void)state;
	reset();
	/* Three segments of two granules (the budget rounded down to whole segments). */
	assert_int_equal(tfs_devcache_create(7 * G, 2 * G, &callbacks, &d), 0);
	tfs_devcache_stats(d, &st);
	assert_int_equal(st.budget, 6 * G);
	assert_int_equal(st.held, 0); /* nothing until an entry needs it */
	assert_int_equal(mem.grown, 0);
	for (int i = 1; i <= 6; i++) {
		e[i] = put_ready(d, i, G);
		if (i == 1)
			first = e[1]->addr; /* e[1] is freed when evicted */
		assert_int_equal(mem.grown, (unsigned)(i + 1) / 2);
		assert_true(seg_of(e[i]->addr, 2 * G) >= 0);
	}
	tfs_devcache_stats(d, &st);
	assert_int_equal(st.held, 6 * G);
	assert_int_equal(st.evictions, 0);
	/* The budget is reached: the least recently used goes, no new segment. */
	e[7] = put_ready(d, 7, G);
	assert_int_equal(mem.grown, 3);
	assert_int_equal(evicted[1], 1);
	assert_int_equal(e[7]->addr, first);
	tfs_devcache_destroy(d);
	assert_int_equal(mem.released, 3);

	/* The caller refuses a second segment: the cache lives within its first. */
	reset();
	assert_int_equal(tfs_devcache_create(6 * G, 2 * G, &callbacks, &d), 0);
	put_ready(d, 1, G);
	put_ready(d, 2, G);
	mem.refuse = 1;
	put_ready(d, 3, G);
	assert_int_equal(mem.grown, 1);
	assert_int_equal(evicted[1], 1);
	assert_true(cached(d, 2) && cached(d, 3) && !cached(d, 1));
	mem.refuse = 0;
	put_ready(d, 4, G); /* given now */
	assert_int_equal(mem.grown, 2);
	assert_true(cached(d, 2) && cached(d, 3) && cached(d, 4));
	tfs_devcache_destroy(d);
	assert_int_equal(mem.released, 2);
}

/* Memory given back: whole segments, the one holding the least recently used entry first (an
 * empty one before any); a segment under a referenced entry takes no new entries and goes once
 * that entry is put, at the next insert or shrink. */
static void test_shrink(void **state)
{
	struct tfs_devcache_entry *e[12], *held;
	struct tfs_devcache_stats st;
	struct tfs_devcache *d;
	struct tfs_id k;
	int s1, s3;

	(void)state;
	reset();
	assert_int_equal(tfs_devcache_create(8 * G, 2 * G, &callbacks, &d), 0);
	for (int i = 1; i <= 6; i++)
		e[i] = put_ready(d, i, G); /* 1, 2 | 3, 4 | 5, 6 */
	s1 = seg_of(e[1]->addr, 2 * G);
	s3 = seg_of(e[3]->addr, 2 * G);
	assert_int_equal(seg_of(e[2]->addr, 2 * G), s1);
	assert_true(s3 != s1);
	/* 1 and 2 used lately: the coldest entry is 3, and its segment goes with 4. */
	assert_true(cached(d, 1) && cached(d, 2));
	assert_int_equal(tfs_devcache_shrink(d, 1), 2 * G);
	assert_int_equal(mem.released, 1);
	assert_int_equal(mem.live[s3], 0);
	assert_int_equal(evicted[3] + evicted[4], 2);
	assert_true(!cached(d, 3) && !cached(d, 4));
	assert_true(cached(d, 1) && cached(d, 2) && cached(d, 5) && cached(d, 6));
	tfs_devcache_stats(d, &st);
	assert_int_equal(st.held, 4 * G);
	assert_int_equal(st.given_back, 1);
	assert_int_equal(st.entries, 4);

	/* 5 is the coldest now, and referenced: its segment drains. */
	k = key(5);
	held = tfs_devcache_get(d, &k);
	assert_non_null(held);
	assert_true(cached(d, 1) && cached(d, 2)); /* 1, 2 warmer than 6 */
	assert_int_equal(tfs_devcache_shrink(d, 2 * G), 0);
	assert_int_equal(evicted[6], 1); /* its unused entry went */
	assert_int_equal(evicted[5], 0);
	tfs_devcache_stats(d, &st);
	assert_int_equal(st.held, 4 * G); /* not yet given back */
	/* A new entry does not go where 5 is; a segment is grown for it (the budget allows). */
	e[7] = put_ready(d, 7, G);
	assert_true(seg_of(e[7]->addr, 2 * G) != seg_of(held->addr, 2 * G));
	assert_int_equal(mem.grown, 4);
	/* Once 5 is put, the next shrink gives its segment back, whatever it asks. */
	tfs_devcache_put(d, held);
	assert_int_equal(tfs_devcache_shrink(d, 0), 2 * G);
	assert_int_equal(evicted[5], 1);
	assert_int_equal(mem.released, 2);
	assert_true(cached(d, 1) && cached(d, 2) && cached(d, 7));

	/* More than it holds: everything goes, and the cache grows again when asked. */
	assert_int_equal(tfs_devcache_shrink(d, 100 * G), 4 * G);
	tfs_devcache_stats(d, &st);
	assert_int_equal(st.held, 0);
	assert_int_equal(st.entries, 0);
	assert_int_equal(st.bytes, 0);
	for (int i = 0; i < 16; i++)
		assert_int_equal(mem.live[i], 0);
	e[8] = put_ready(d, 8, G);
	assert_true(cached(d, 8));
	tfs_devcache_destroy(d);
	assert_int_equal(mem.grown, mem.released);
}

/* Inserts, gets, puts and shrinks on several threads: a referenced entry always lies in a
 * segment given out and not released, the budget holds, and every segment taken is given back
 * once. */
#define TSEG (4 * G)
static struct tfs_devcache *shared;

static void *worker(void *arg)
{
	unsigned seed = (unsigned)(uintptr_t)arg;

	for (int n = 0; n < 3000; n++) {
		const int i = (int)(rand_r(&seed) % 40);
		const uint64_t len = G * (1 + (uint64_t)i % 3);
		struct tfs_id k = key(i);
		struct tfs_devcache_entry *e = tfs_devcache_get(shared, &k);

		if ((uintptr_t)arg == 1 && n % 50 == 0)
			tfs_devcache_shrink(shared, (rand_r(&seed) % 3) * TSEG);
		if (!e && (e = tfs_devcache_insert(shared, &k, len)) != NULL) {
			assert_true(seg_holding(e->addr, len, TSEG) >= 0);
			if (rand_r(&seed) % 8) {
				tfs_devcache_ready(shared, e, (void *)(uintptr_t)i);
			} else {
				tfs_devcache_put(shared, e); /* a fill that failed */
				continue;
			}
		}
		if (e) {
			assert_int_equal(e->len, len);
			assert_true(seg_holding(e->addr, len, TSEG) >= 0);
			tfs_devcache_put(shared, e);
		}
	}
	return NULL;
}

static void test_threads(void **state)
{
	struct tfs_devcache_stats st;
	pthread_t t[4];

	(void)state;
	reset();
	slow = 1;
	assert_int_equal(tfs_devcache_create(3 * TSEG, TSEG, &callbacks, &shared), 0);
	for (uintptr_t i = 0; i < 4; i++)
		assert_int_equal(pthread_create(&t[i], NULL, worker, (void *)(i + 1)), 0);
	for (int i = 0; i < 4; i++)
		pthread_join(t[i], NULL);
	tfs_devcache_stats(shared, &st);
	assert_true(st.held <= 3 * TSEG);
	assert_true(st.bytes <= st.held);
	assert_true(st.given_back > 0 && st.evictions > 0);
	tfs_devcache_destroy(shared);
	slow = 0;
	assert_int_equal(mem.grown, mem.released);
}

/* The watcher: memory the stand-in says is short goes back with no call from the test, and
 * the segment of a referenced entry once it is put. */
static uint64_t shortage;    /* atomic: what on_short answers */
static unsigned short_calls; /* atomic */

static uint64_t on_short(void *arg)
{
	(void)arg;
	__atomic_add_fetch(&short_calls, 1, __ATOMIC_RELAXED);
	return __atomic_load_n(&shortage, __ATOMIC_RELAXED);
}

static uint64_t held_now(struct tfs_devcache *d)
{
	struct tfs_devcache_stats st;

	tfs_devcache_stats(d, &st);
	return st.held;
}

/* Until the watcher has asked n more times (10 s at most). */
static void rounds(unsigned n)
{
	const unsigned want = __atomic_load_n(&short_calls, __ATOMIC_RELAXED) + n;

	for (int i = 0; i < 10000 && __atomic_load_n(&short_calls, __ATOMIC_RELAXED) < want; i++)
		usleep(1000);
	assert_true(__atomic_load_n(&short_calls, __ATOMIC_RELAXED) >= want);
}

static void test_watcher(void **state)
{
	struct tfs_devcache_mem m = callbacks;
	struct tfs_devcache_entry *e[8], *held;
	struct tfs_devcache_stats st;
	struct tfs_devcache *d;
	struct tfs_id k = key(3);
	unsigned calls;

	(void)state;
	reset();
	m.short_by = on_short;
	m.watch_ms = 2;
	m.name = "stand-in";
	shortage = 0;
	assert_int_equal(tfs_devcache_create(8 * G, 2 * G, &m, &d), 0);
	/* Nothing held: never asked. */
	calls = __atomic_load_n(&short_calls, __ATOMIC_RELAXED);
	usleep(20000);
	assert_int_equal(__atomic_load_n(&short_calls, __ATOMIC_RELAXED), calls);
	for (int i = 1; i <= 6; i++)
		e[i] = put_ready(d, i, G); /* 1, 2 | 3, 4 | 5, 6 */
	held = tfs_devcache_get(d, &k);
	assert_ptr_equal(held, e[3]);
	assert_true(cached(d, 1) && cached(d, 2)); /* coldest: 4, then 5, 6 */
	rounds(2);
	assert_int_equal(held_now(d), 6 * G); /* not short: all kept */

	/* Short by a byte: 4's segment drains; 4 goes, 3 is referenced and stays. */
	__atomic_store_n(&shortage, 1, __ATOMIC_RELAXED);
	rounds(3);
	assert_int_equal(__atomic_load_n(&evicted[4], __ATOMIC_RELAXED), 1);
	assert_int_equal(__atomic_load_n(&evicted[3], __ATOMIC_RELAXED), 0);
	assert_int_equal(held_now(d), 6 * G);
	/* The draining segment answers the shortage: nothing more goes while it lasts. */
	assert_true(cached(d, 5) && cached(d, 6) && cached(d, 1) && cached(d, 2));
	assert_int_equal(mem.released, 0);

	/* 3 put, no longer short: its segment goes back all the same, with no call from here. */
	__atomic_store_n(&shortage, 0, __ATOMIC_RELAXED);
	tfs_devcache_put(d, held);
	rounds(3);
	tfs_devcache_stats(d, &st);
	assert_int_equal(st.held, 4 * G);
	assert_int_equal(st.given_back, 1);
	assert_int_equal(__atomic_load_n(&evicted[3], __ATOMIC_RELAXED), 1);
	assert_int_equal(mem.released, 1);
	assert_true(cached(d, 1) && cached(d, 2) && cached(d, 5) && cached(d, 6));

	/* Short by more than it holds: everything goes; then it grows again. */
	__atomic_store_n(&shortage, 100 * G, __ATOMIC_RELAXED);
	for (int i = 0; i < 10000 && held_now(d); i++)
		usleep(1000);
	assert_int_equal(held_now(d), 0);
	/* Nothing held: no more asking. */
	calls = __atomic_load_n(&short_calls, __ATOMIC_RELAXED);
	usleep(20000);
	assert_int_equal(__atomic_load_n(&short_calls, __ATOMIC_RELAXED), calls);
	__atomic_store_n(&shortage, 0, __ATOMIC_RELAXED);
	e[7] = put_ready(d, 7, G);
	assert_true(cached(d, 7));
	assert_int_equal(held_now(d), 2 * G);
	tfs_devcache_destroy(d); /* joins the watcher */
	assert_int_equal(mem.grown, mem.released);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_policy),	cmocka_unit_test(test_segments_grow),
		cmocka_unit_test(test_shrink),	cmocka_unit_test(test_threads),
		cmocka_unit_test(test_watcher),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
