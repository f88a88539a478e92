/* SPDX-License-Identifier: MIT */
/* Unit tests for core/diskcache: hits, remounts, damage, the budget, and many threads. */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "tmpdir_fixture.h"
#include "diskcache_fixture.h"

/* --- tests ------------------------------------------------------------------------------------ */

static void test_miss_then_hit(void **state)
{
	struct lake l;
	struct obj o;
	struct tfs_store *s;
	struct tfs_diskcache_stats st;
	char other[TFS_KEY_MAX];

	(void)state;
	make_lake("hit", &l);
	put_obj(&l, 1, 100000, &o);
	s = wrap(&l, 1 << 20);
	st = stats_of(s);
	assert_int_equal(st.budget, 1 << 20);
	assert_int_equal(st.bytes_used, 0);

	assert_get(s, &o);
	assert_int_equal(inner_gets(s), 1);
	st = stats_of(s);
	assert_int_equal(st.misses, 1);
	assert_int_equal(st.fills, 1);
	assert_int_equal(st.hits, 0);
	assert_int_equal(st.bytes_used, o.bytes.len);
	assert_true(is_cached(&l, &o));

	/* Second read: from the file, identical bytes, no request to the store. */
	assert_get(s, &o);
	assert_get(s, &o);
	assert_int_equal(inner_gets(s), 1);
	st = stats_of(s);
	assert_int_equal(st.hits, 2);
	assert_int_equal(st.misses, 1);
	assert_int_equal(st.fills, 1);

	/* Content addressing: the same id under another dataset is served from the same file. */
	tfs_object_key("other-ds", &o.id, other);
	assert_true(get_matches(s, other, &o.bytes));
	assert_int_equal(inner_gets(s), 1);

	/* A missing object is the inner store's answer. */
	{
		struct tfs_buf b = { 0 };
		struct tfs_id missing;
		char key[TFS_KEY_MAX];

		tfs_id_of("nothing", 7, &missing);
		tfs_object_key("ds", &missing, key);
		assert_int_equal(tfs_store_get_object(s, key, 0, &b), -ENOENT);
		assert_int_equal(stats_of(s).misses, 2);
		tfs_buf_free(&b);
	}
	tfs_store_close(s);
	free_objs(&o, 1);
}

static void test_survives_remount(void **state)
{
	struct lake l;
	struct obj o[3];
	struct tfs_store *s;
	struct tfs_diskcache_stats st;

	(void)state;
	make_lake("remount", &l);
	put_objs(&l, o, 3, 5000, 10);
	s = wrap(&l, 1 << 20);
	for (int i = 0; i < 3; i++)
		assert_get(s, &o[i]);
	assert_int_equal(inner_gets(s), 3);
	tfs_store_close(s);

	/* A fresh inner store and wrapper over the same directory: everything is a hit. */
	s = wrap(&l, 1 << 20);
	st = stats_of(s);
	assert_int_equal(st.bytes_used, 3 * o[0].bytes.len);
	for (int i = 0; i < 3; i++)
		assert_get(s, &o[i]);
	assert_int_equal(inner_gets(s), 0);
	st = stats_of(s);
	assert_int_equal(st.hits, 3);
	assert_int_equal(st.misses, 0);
	assert_int_equal(st.fills, 0);
	tfs_store_close(s);
	free_objs(o, 3);
}

static void test_remount_orders_by_mtime(void **state)
{
	struct lake l;
	struct obj o[4];
	struct tfs_store *s;
	struct tfs_diskcache_stats st;
	static const time_t when[4] = { 1000000, 3000000, 2000000, 4000000 };
	char f[512];

	(void)state;
	make_lake("mtime", &l);
	put_objs(&l, o, 4, 4000, 20);
	s = wrap(&l, 1 << 20);
	for (int i = 0; i < 4; i++)
		assert_get(s, &o[i]);
	tfs_store_close(s);
	for (int i = 0; i < 4; i++) {
		cache_file(&l, &o[i], f, sizeof(f));
		set_mtime(f, when[i]);
	}

	/* A smaller budget at the next mount: the two oldest by mtime (0, then 2) go at once. */
	s = wrap(&l, 2 * o[0].bytes.len + 100);
	st = stats_of(s);
	assert_int_equal(st.evictions, 2);
	assert_int_equal(st.bytes_used, 2 * o[0].bytes.len);
	assert_false(is_cached(&l, &o[0]));
	assert_true(is_cached(&l, &o[1]));
	assert_false(is_cached(&l, &o[2]));
	assert_true(is_cached(&l, &o[3]));

	/* A hit refreshes the file's mtime, so the order survives the next remount too. */
	assert_get(s, &o[1]);
	assert_int_equal(inner_gets(s), 0);
	{
		struct stat sb;

		cache_file(&l, &o[1], f, sizeof(f));
		assert_int_equal(stat(f, &sb), 0);
		assert_true(sb.st_mtime > when[3]);
	}
	tfs_store_close(s);
	free_objs(o, 4);
}

static void test_damaged_file_refetched(void **state)
{
	struct lake l;
	struct obj o;
	struct tfs_store *s;
	struct tfs_buf now = { 0 };
	char f[512];
	uint64_t gets, bad = 0;

	(void)state;
	make_lake("damage", &l);
	put_obj(&l, 3, 20000, &o);
	s = wrap(&l, 1 << 20);
	assert_get(s, &o);
	cache_file(&l, &o, f, sizeof(f));

	/* Each kind of damage: flips in the header and the payload, truncations, an extension. */
	for (int kind = 0; kind < 7; kind++) {
		int fd = open(f, O_RDWR | O_CLOEXEC);
		uint8_t byte;

		assert_true(fd >= 0);
		switch (kind) {
		case 0: /* payload byte */
		case 1: /* header byte */
		case 2: /* last byte */
		{
			off_t at = kind == 0 ? 5000 : kind == 1 ? 3 : (off_t)o.bytes.len - 1;

			assert_int_equal(pread(fd, &byte, 1, at), 1);
			byte ^= 0x10;
			assert_int_equal(pwrite(fd, &byte, 1, at), 1);
			break;
		}
		case 3:
			assert_int_equal(ftruncate(fd, (off_t)o.bytes.len / 2), 0);
			break;
		case 4:
			assert_int_equal(ftruncate(fd, 20), 0); /* shorter than a header */
			break;
		case 5:
			assert_int_equal(ftruncate(fd, 0), 0);
			break;
		case 6:
			assert_int_equal(pwrite(fd, "x", 1, (off_t)o.bytes.len), 1);
			break;
		}
		close(fd);
		gets = inner_gets(s);
		assert_get(s, &o);
		assert_int_equal(inner_gets(s), gets + 1);
		assert_int_equal(stats_of(s).bad_files, ++bad);
		/* Repaired: the file is the object again, and served without a request. */
		read_whole(f, &now);
		assert_int_equal(now.len, o.bytes.len);
		assert_memory_equal(now.data, o.bytes.data, o.bytes.len);
		assert_get(s, &o);
		assert_int_equal(inner_gets(s), gets + 1);
	}
	assert_int_equal(stats_of(s).bytes_used, o.bytes.len);
	tfs_buf_free(&now);
	tfs_store_close(s);
	free_objs(&o, 1);
}

static void test_damaged_at_source_not_cached(void **state)
{
	struct lake l;
	struct obj o;
	struct tfs_store *s;
	struct tfs_buf b = { 0 };
	static const char junk[] = "not an object at all";

	(void)state;
	make_lake("source", &l);
	put_obj(&l, 4, 3000, &o);
	s = wrap(&l, 1 << 20);
	/* Replace the stored object with junk behind the cache's back. */
	assert_int_equal(tfs_store_put(tfs_diskcache_inner(s), o.key, junk, sizeof(junk) - 1), 0);
	for (int i = 1; i <= 2; i++) {
		/* Checked as it arrives: fetched again once, then EIO, and never kept. */
		struct tfs_store_counters c;

		assert_int_equal(tfs_store_get_object(s, o.key, 0, &b), -EBADMSG);
		tfs_store_counters(tfs_diskcache_inner(s), &c);
		assert_int_equal(c.gets, (uint64_t)i);
		assert_int_equal(c.retries, (uint64_t)i); /* the refetch */
		assert_int_equal(c.bytes_read, 2 * (uint64_t)i * (sizeof(junk) - 1));
		assert_false(is_cached(&l, &o));
	}
	/* A plain get hands over what is there, unchecked and not kept. */
	assert_int_equal(tfs_store_get(s, o.key, &b), 0);
	assert_int_equal(b.len, sizeof(junk) - 1);
	assert_memory_equal(b.data, junk, b.len);
	assert_false(is_cached(&l, &o));
	assert_int_equal(stats_of(s).fills, 0);
	assert_int_equal(stats_of(s).bytes_used, 0);
	tfs_buf_free(&b);
	tfs_store_close(s);
	free_objs(&o, 1);
}

static void test_budget_evicts_least_recent(void **state)
{
	struct lake l;
	struct obj o[12];
	struct tfs_store *s;
	struct tfs_diskcache_stats st;
	uint64_t one, budget;
	size_t files;

	(void)state;
	make_lake("budget", &l);
	put_objs(&l, o, 12, 4000, 40);
	one = o[0].bytes.len;
	budget = 3 * one + one / 2; /* room for three */
	s = wrap(&l, budget);

	assert_get(s, &o[0]);
	assert_get(s, &o[1]);
	assert_get(s, &o[2]);
	assert_get(s, &o[0]); /* 0 is now more recent than 1 */
	assert_get(s, &o[3]); /* evicts 1 */
	assert_false(is_cached(&l, &o[1]));
	assert_true(is_cached(&l, &o[0]));
	assert_true(is_cached(&l, &o[2]));
	assert_true(is_cached(&l, &o[3]));
	st = stats_of(s);
	assert_int_equal(st.evictions, 1);
	assert_int_equal(st.hits, 1);
	assert_int_equal(st.bytes_used, 3 * one);

	/* Stream through everything: the directory never holds more than the budget. */
	for (int round = 0; round < 3; round++)
		for (int i = 0; i < 12; i++) {
			assert_get(s, &o[i]);
			assert_true(dir_bytes(l.cache, NULL) <= budget);
		}
	st = stats_of(s);
	assert_true(st.bytes_used <= budget);
	assert_int_equal(dir_bytes(l.cache, &files), st.bytes_used);
	assert_int_equal(files, 3);
	assert_true(st.evictions >= 30);
	assert_int_equal(st.evictions + 3, st.fills);

	/* An object larger than the whole budget is served but never cached. */
	{
		struct obj big;

		put_obj(&l, 99, (size_t)budget, &big);
		assert_get(s, &big);
		assert_get(s, &big);
		assert_false(is_cached(&l, &big));
		assert_int_equal(stats_of(s).bypassed, 0);
		assert_true(is_cached(&l, &o[11]));
		free_objs(&big, 1);
	}
	tfs_store_close(s);
	free_objs(o, 12);
}

/* --- concurrency ------------------------------------------------------------------------------ */

struct worker {
	pthread_t thread;
	struct tfs_store *s;
	const struct obj *objs;
	size_t nobjs;
	unsigned seed;
	int iters;
	int errors;
};

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	struct tfs_buf b = { 0 };

	for (int i = 0; i < w->iters; i++) {
		const struct obj *o = &w->objs[(size_t)rand_r(&w->seed) % w->nobjs];

		if (tfs_store_get_object(w->s, o->key, 0, &b) || b.len != o->bytes.len ||
		    memcmp(b.data, o->bytes.data, b.len))
			w->errors++;
	}
	tfs_buf_free(&b);
	return NULL;
}

static void run_workers(struct worker *w, size_t n)
{
	for (size_t i = 0; i < n; i++)
		assert_int_equal(pthread_create(&w[i].thread, NULL, worker_main, &w[i]), 0);
	for (size_t i = 0; i < n; i++)
		pthread_join(w[i].thread, NULL);
	for (size_t i = 0; i < n; i++)
		assert_int_equal(w[i].errors, 0);
}

static void test_concurrent_small_budget(void **state)
{
	enum { NOBJ = 50, NTHREADS = 8, ITERS = 400 };
	struct lake l;
	struct obj *o = calloc(NOBJ, sizeof(*o));
	struct worker w[NTHREADS];
	struct tfs_store *s;
	struct tfs_diskcache_stats st;
	uint64_t budget = 200 * 1024;

	(void)state;
	assert_non_null(o);
	make_lake("threads", &l);
	put_objs(&l, o, NOBJ, 0, 100);
	s = wrap(&l, budget);
	for (unsigned i = 0; i < NTHREADS; i++)
		w[i] = (struct worker){
			.s = s, .objs = o, .nobjs = NOBJ, .seed = i + 1, .iters = ITERS
		};
	run_workers(w, NTHREADS);
	st = stats_of(s);
	assert_int_equal(st.hits + st.misses, NTHREADS * ITERS);
	assert_int_equal(st.misses, inner_gets(s));
	assert_true(st.hits > 0);
	assert_true(st.evictions > 0);
	assert_int_equal(st.bad_files, 0);
	assert_int_equal(st.bypassed, 0);
	assert_true(st.bytes_used <= budget);
	assert_true(dir_bytes(l.cache, NULL) <= budget);
	tfs_store_close(s);

	/* And again after a remount, with the same files. */
	s = wrap(&l, budget);
	for (unsigned i = 0; i < NTHREADS; i++)
		w[i] = (struct worker){
			.s = s, .objs = o, .nobjs = NOBJ, .seed = 100 + i, .iters = ITERS / 4
		};
	run_workers(w, NTHREADS);
	assert_true(stats_of(s).bytes_used <= budget);
	tfs_store_close(s);
	free_objs(o, NOBJ);
	free(o);
}

static void test_two_wrappers_share_a_dir(void **state)
{
	enum { NOBJ = 30, PER = 4, ITERS = 300 };
	struct lake l;
	struct obj *o = calloc(NOBJ, sizeof(*o));
	struct worker w[2 * PER];
	struct tfs_store *s[2];
	struct tfs_diskcache_stats st[2];
	uint64_t budget = 150 * 1024;

	(void)state;
	assert_non_null(o);
	make_lake("shared", &l);
	put_objs(&l, o, NOBJ, 0, 200);
	s[0] = wrap(&l, budget);
	s[1] = wrap(&l, budget);
	for (unsigned i = 0; i < 2 * PER; i++)
		w[i] = (struct worker){ .s = s[i % 2],
					.objs = o + (i % 2) * (NOBJ / 3), /* overlapping */
					.nobjs = 2 * NOBJ / 3,
					.seed = 7 * i + 3,
					.iters = ITERS };
	run_workers(w, 2 * PER);
	for (int k = 0; k < 2; k++) {
		st[k] = stats_of(s[k]);
		assert_int_equal(st[k].hits + st[k].misses, PER * ITERS);
		assert_int_equal(st[k].misses, inner_gets(s[k]));
		assert_true(st[k].bytes_used <= budget);
	}
	assert_true(st[0].hits + st[1].hits > 0);
	/* Each accounts for what it knows; together they never hold more than both budgets. */
	assert_true(dir_bytes(l.cache, NULL) <= 2 * budget);

	/* Files one wrapper filled are hits for the other. */
	{
		uint64_t gets = inner_gets(s[1]);

		assert_get(s[0], &o[0]);
		assert_get(s[1], &o[0]);
		assert_int_equal(inner_gets(s[1]), gets);
	}
	tfs_store_close(s[0]);
	tfs_store_close(s[1]);
	free_objs(o, NOBJ);
	free(o);
}

/* --- main ------------------------------------------------------------------------------------- */

static int group_setup(void **state)
{
	(void)state;
	return tmpdir_make("diskcache");
}

static int group_teardown(void **state)
{
	(void)state;
	return tmpdir_remove();
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_miss_then_hit),
		cmocka_unit_test(test_survives_remount),
		cmocka_unit_test(test_remount_orders_by_mtime),
		cmocka_unit_test(test_damaged_file_refetched),
		cmocka_unit_test(test_damaged_at_source_not_cached),
		cmocka_unit_test(test_budget_evicts_least_recent),
		cmocka_unit_test(test_concurrent_small_budget),
		cmocka_unit_test(test_two_wrappers_share_a_dir),
	};

	if (getenv("TFS_TEST_FILTER"))
		cmocka_set_test_filter(getenv("TFS_TEST_FILTER"));
	return cmocka_run_group_tests_name("diskcache", tests, group_setup, group_teardown);
}
