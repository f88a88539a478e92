/* SPDX-License-Identifier: MIT */
/* Unit tests of core/prefetch's runs against a real lake: a scan's parallel reads that arrive out
 * of order are served whole chunks and load no frame index; a column's frame indexes are asked
 * for, once, when its reader reads at random; a view's loads ahead fit the cache beside what its
 * read holds. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <cmocka.h>

#include "cache.h"
#include "import.h"
#include "prefetch.h"
#include "store.h"
#include "version.h"
#include "workpool.h"

#include "npyfile_fixture.h"
#include "tmpdir_fixture.h"

#define ROWS 16384
#define RB 256 /* bytes a row: 512 rows a 128 KiB chunk, 32 chunks */

static struct tfs_store *store;
static struct tfs_version *v;
static struct tfs_cache *cache;
static struct tfs_workpool *pool;
static struct tfs_prefetcher *pf;
static uint64_t per; /* rows a chunk */

static int setup(void **state)
{
	const struct tfs_import_opts o = { .codec = TFS_CODEC_ZSTD,
					   .level = 1,
					   .chunk_bytes = 128 << 10 };
	char path[256], url[256];
	struct tfs_import_src src = { "x", path, TFS_SRC_NPY, 0 };
	struct tfs_id id;

	(void)state;
	if (tmpdir_make("prefetch"))
		return -1;
	snprintf(path, sizeof(path), "%s/x.npy", tmpdir);
	if (npyfile_write_u1(path, ROWS, RB))
		return -1;
	snprintf(url, sizeof(url), "file://%s/lake", tmpdir);
	if (tfs_store_open(url, TFS_STORE_CREATE, &store) || tfs_dataset_create(store, "d") ||
	    tfs_import(store, "d", &src, 1, &o, &id) || tfs_version_open(store, "d", &id, &v))
		return -1;
	per = v->manifest.cols[0].rows_per_chunk;
	if (!per || v->manifest.cols[0].nchunks < 16)
		return -1;
	return tfs_cache_create(64 << 20, &cache) || tfs_workpool_create(2, &pool) ? -1 : 0;
}

static int teardown(void **state)
{
	(void)state;
	tfs_version_put(v);
	tfs_workpool_destroy(pool);
	tfs_cache_destroy(cache);
	tfs_store_close(store);
	return tmpdir_remove();
}

static int pf_setup(void **state)
{
	(void)state;
	return tfs_prefetcher_create(cache, pool, 4, 64 << 20, &pf);
}

static int pf_teardown(void **state)
{
	(void)state;
	tfs_prefetcher_destroy(pf);
	return 0;
}

/* The reader read rows [first, last]: whether whole chunks serve it. */
static int access_rows(struct tfs_stream *st, uint64_t first, uint64_t last)
{
	return tfs_stream_access(st, first, last, first / per, last / per);
}

static uint64_t indexes_asked(void)
{
	struct tfs_prefetch_stats s;

	tfs_prefetcher_stats(pf, &s);
	return s.indexes;
}

/* One large read split into parts, served by several threads: the second part arrives first,
 * the fourth before the third. That is a scan: whole chunks serve every part, and it loads no
 * index. */
static void test_scan_read_out_of_order_loads_no_index(void **state)
{
	const uint64_t part = ROWS / 8 + 100; /* four chunks and more, across chunk edges */
	struct tfs_stream *st;

	(void)state;
	assert_int_equal(tfs_stream_create(pf, v, 0, NULL, v->manifest.cols[0].nchunks, &st), 0);
	assert_int_equal(access_rows(st, part, 2 * part - 1), 1);
	assert_int_equal(access_rows(st, 0, part - 1), 1);
	assert_int_equal(access_rows(st, 3 * part, 4 * part - 1), 1);
	assert_int_equal(access_rows(st, 2 * part, 3 * part - 1), 1);
	assert_int_equal(indexes_asked(), 0);
	tfs_stream_destroy(st);
}

/* np.load's header read at the start, then rows far apart: the third jump is a reader at
 * random, and every chunk's index is asked for, once. */
static void test_reader_at_random_loads_every_index_once(void **state)
{
	const size_t nchunks = v->manifest.cols[0].nchunks;
	const uint64_t jumps[] = { 9 * per + 3, 2 * per + 100, 13 * per + 7, 5 * per, 11 * per };
	struct tfs_stream *st;

	(void)state;
	assert_int_equal(tfs_stream_create(pf, v, 0, NULL, nchunks, &st), 0);
	assert_int_equal(access_rows(st, 0, 15), 1);
	assert_int_equal(access_rows(st, jumps[0], jumps[0]), 0); /* frames serve a jump */
	assert_int_equal(access_rows(st, jumps[1], jumps[1]), 0);
	assert_int_equal(indexes_asked(), 0);
	assert_int_equal(access_rows(st, jumps[2], jumps[2]), 0);
	assert_int_equal(indexes_asked(), nchunks);
	access_rows(st, jumps[3], jumps[3]);
	access_rows(st, jumps[4], jumps[4]);
	assert_int_equal(indexes_asked(), nchunks);
	tfs_stream_destroy(st);
}

static uint64_t scheduled(struct tfs_prefetcher *p)
{
	struct tfs_prefetch_stats s;

	tfs_prefetcher_stats(p, &s);
	return s.scheduled;
}

/* A view's read takes rows of every chunk of its window (two at a window's end): on a cache of 8
 * chunks, a read over 7 loads nothing past them, which could only evict a chunk it needs before;
 * a read over 2 loads 5 ahead (one chunk left over); a scan's read loads its whole window. */
static void test_view_loads_ahead_what_fits_beside_its_read(void **state)
{
	const size_t nchunks = v->manifest.cols[0].nchunks;
	const uint64_t chunk = per * RB;
	uint32_t *order = calloc(nchunks, sizeof(*order));
	struct tfs_cache *small;
	struct tfs_prefetcher *p;
	struct tfs_stream *st;

	(void)state;
	assert_non_null(order);
	for (size_t i = 0; i < nchunks; i++)
		order[i] = (uint32_t)(nchunks - 1 - i); /* a view's order of the chunks */
	for (int held = 7; held >= 2; held -= 5) {
		assert_int_equal(tfs_cache_create(8 * chunk, &small), 0);
		assert_int_equal(tfs_prefetcher_create(small, pool, 8, 64 << 20, &p), 0);
		assert_int_equal(tfs_stream_create(p, v, 0, order, nchunks, &st), 0);
		tfs_stream_expect_sequential(st);
		tfs_stream_access(st, 0, (uint64_t)held * per - 1, 0, (size_t)held - 1);
		/* The read's own chunks after its first, and what fits past them. */
		assert_int_equal(scheduled(p), (uint64_t)(held - 1) + (held == 7 ? 0 : 5));
		tfs_stream_destroy(st);
		tfs_prefetcher_destroy(p);
		tfs_cache_destroy(small);
	}
	/* The same read of a scan (no order): its window of 8 ahead. */
	assert_int_equal(tfs_cache_create(64 * chunk, &small), 0);
	assert_int_equal(tfs_prefetcher_create(small, pool, 8, 64 << 20, &p), 0);
	assert_int_equal(tfs_stream_create(p, v, 0, NULL, nchunks, &st), 0);
	tfs_stream_expect_sequential(st);
	tfs_stream_access(st, 0, 2 * per - 1, 0, 1);
	assert_int_equal(scheduled(p), 1 + 8);
	tfs_stream_destroy(st);
	tfs_prefetcher_destroy(p);
	tfs_cache_destroy(small);
	free(order);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_scan_read_out_of_order_loads_no_index,
						pf_setup, pf_teardown),
		cmocka_unit_test_setup_teardown(test_reader_at_random_loads_every_index_once,
						pf_setup, pf_teardown),
		cmocka_unit_test(test_view_loads_ahead_what_fits_beside_its_read),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
