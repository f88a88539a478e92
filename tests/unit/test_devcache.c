/* SPDX-License-Identifier: MIT */
/* Unit tests of core/devcache: hits after ready, misses before; LRU eviction of unused entries
 * only, each evicted entry's tag handed back once; a failed fill leaves nothing behind. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "arena.h"
#include "devcache.h"

static int evicted[16];

static void on_evict(void *arg, void *tag)
{
	(void)arg;
	evicted[(uintptr_t)tag]++;
}

static struct tfs_id key(int i)
{
	struct tfs_id id;

	memset(&id, 0, sizeof(id));
	id.b[0] = (uint8_t)i;
	id.b[9] = (uint8_t)(i * 7);
	return id;
}

static void test_policy(void **state)
{
	const uint64_t g = TFS_ARENA_GRANULE, base = 0x7f0000000000ull;
	struct tfs_devcache_entry *e[8], *x;
	struct tfs_devcache_stats st;
	struct tfs_devcache *d;
	struct tfs_id k;

	(void)state;
	memset(evicted, 0, sizeof(evicted));
	assert_int_equal(tfs_devcache_create(base, 4 * g, on_evict, NULL, &d), 0);
	k = key(1);
	assert_null(tfs_devcache_get(d, &k));
	e[1] = tfs_devcache_insert(d, &k, g);
	assert_non_null(e[1]);
	assert_true(e[1]->addr >= base && e[1]->addr + g <= base + 4 * g);
	assert_null(tfs_devcache_insert(d, &k, g)); /* being filled */
	assert_null(tfs_devcache_get(d, &k));	    /* not ready yet */
	tfs_devcache_ready(d, e[1], (void *)(uintptr_t)1);
	tfs_devcache_put(d, e[1]);
	x = tfs_devcache_get(d, &k);
	assert_ptr_equal(x, e[1]);
	/* Three more of one granule each fill it; 1 stays referenced. */
	for (int i = 2; i <= 4; i++) {
		k = key(i);
		e[i] = tfs_devcache_insert(d, &k, g);
		assert_non_null(e[i]);
		tfs_devcache_ready(d, e[i], (void *)(uintptr_t)i);
		tfs_devcache_put(d, e[i]);
	}
	for (int i = 1; i <= 4; i++)
		for (int j = i + 1; j <= 4; j++)
			assert_true(e[i]->addr != e[j]->addr);
	k = key(2);
	tfs_devcache_put(d, tfs_devcache_get(d, &k)); /* 2 used after 3 and 4 */
	/* Two granules: the least recently used unused ones go (3, then 4); 1 is referenced. */
	k = key(5);
	e[5] = tfs_devcache_insert(d, &k, 2 * g);
	assert_non_null(e[5]);
	assert_int_equal(evicted[3], 1);
	assert_int_equal(evicted[4], 1);
	assert_int_equal(evicted[1] + evicted[2], 0);
	/* No room while 1 and 5 are referenced and 2's granule is too small for 3 granules. */
	k = key(6);
	assert_null(tfs_devcache_insert(d, &k, 3 * g));
	assert_int_equal(evicted[2], 1); /* tried: 2 went, still no room */
	/* A failed fill: put without ready leaves no entry. */
	tfs_devcache_put(d, e[5]);
	k = key(5);
	assert_null(tfs_devcache_get(d, &k));
	tfs_devcache_stats(d, &st);
	assert_int_equal(st.entries, 1);
	assert_int_equal(st.bytes, g);
	assert_int_equal(st.evictions, 3);
	assert_int_equal(st.full, 1);
	tfs_devcache_put(d, x);
	tfs_devcache_destroy(d);
	assert_int_equal(evicted[1], 1); /* destroyed: its tag handed back */
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_policy),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
