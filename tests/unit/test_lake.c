/* SPDX-License-Identifier: MIT */
/* Unit tests for core/lake.c: opening the engine, the ref-refresh rule, shared versions and the
 * path grammar, over a file:// lake made in a temporary directory. */
#include <setjmp.h>
#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "badchunks.h"
#include "format.h"
#include "import.h"
#include "lakeimpl.h" /* a white-box test of the lake module */
#include "npy.h"
#include "tmpdir_fixture.h"

static char url[128];

/* An .npy of n int32 rows holding first..first+n-1. */
static void write_npy(const char *path, int32_t first, size_t n)
{
	char header[TFS_NPY_ALIGN];
	const uint64_t shape[1] = { n };
	struct tfs_dtype dt;
	FILE *f = fopen(path, "wb");

	assert_non_null(f);
	char msg[128];
	int big = 0;

	assert_int_equal(tfs_dtype_parse("<i4", &dt, &big, msg, sizeof(msg)), 0);
	assert_int_equal(tfs_npy_header_build(&dt, n, 0, shape + 1, header), 0);
	assert_int_equal(fwrite(header, 1, sizeof(header), f), sizeof(header));
	for (size_t i = 0; i < n; i++) {
		int32_t v = first + (int32_t)i;

		assert_int_equal(fwrite(&v, 4, 1, f), 1);
	}
	fclose(f);
}

/* Import n more rows into ds's branch; returns the commit. */
static struct tfs_id import_rows(struct tfs_store *s, const char *ds, const char *branch, size_t n)
{
	struct tfs_import_opts o = { .codec = TFS_CODEC_RAW, .branch = branch, .message = "t" };
	char npy[160];
	struct tfs_import_src src = { "x", npy, TFS_SRC_NPY, 0 };
	struct tfs_id id;

	snprintf(npy, sizeof(npy), "%s/in.npy", tmpdir);
	write_npy(npy, 0, n);
	assert_int_equal(tfs_import(s, ds, &src, 1, &o, &id), 0);
	return id;
}

static struct tfs_lake *open_lake(double ttl)
{
	const struct tfs_lake_config cfg = { .url = url, .cache_mem = 8 << 20, .ref_ttl = ttl };
	struct tfs_lake *l;

	assert_int_equal(tfs_lake_open(&cfg, &l), 0);
	assert_non_null(l->store);
	assert_non_null(l->cache);
	assert_null(l->prefetch);
	return l;
}

static void test_open_start_stop(void **state)
{
	const struct tfs_lake_config bad = { .url = "file:///nonexistent/dir/x",
					     .cache_mem = 1 << 20 };
	struct tfs_lake *l = open_lake(5);

	(void)state;
	l->prefetch_threads = 2;
	assert_int_equal(tfs_lake_start(l), 0);
	assert_non_null(l->prefetch);
	tfs_lake_stop(l);
	assert_null(l->prefetch);
	tfs_lake_close(l);
	tfs_lake_close(NULL);
	assert_int_not_equal(tfs_lake_open(&bad, &l), 0);
}

static void test_branch_refresh_follows_ttl(void **state)
{
	struct tfs_lake *slow = open_lake(3600), *fast = open_lake(0);
	struct tfs_version *a, *b, *c;
	struct tfs_id first, second;

	(void)state;
	assert_int_equal(tfs_dataset_create(slow->store, "ttl"), 0);
	first = import_rows(slow->store, "ttl", NULL, 10);
	assert_int_equal(tfs_lake_version(slow, "ttl", TFS_LAKE_BRANCH, "main", &a), 0);
	assert_int_equal(tfs_lake_version(fast, "ttl", TFS_LAKE_BRANCH, "main", &b), 0);
	assert_true(tfs_id_eq(&a->commit.id, &first));
	second = import_rows(slow->store, "ttl", NULL, 5);
	/* Within the TTL the branch keeps its head; with a TTL of 0 it moves at once. */
	assert_int_equal(tfs_lake_version(slow, "ttl", TFS_LAKE_BRANCH, "main", &c), 0);
	assert_ptr_equal(c, a);
	tfs_version_put(c);
	assert_int_equal(tfs_lake_version(fast, "ttl", TFS_LAKE_BRANCH, "main", &c), 0);
	assert_true(tfs_id_eq(&c->commit.id, &second));
	assert_int_equal(c->manifest.rows, 15);
	/* The version handed out earlier stays whole: pinned to its commit. */
	assert_int_equal(b->manifest.rows, 10);
	tfs_version_put(a);
	tfs_version_put(b);
	tfs_version_put(c);
	tfs_lake_close(slow);
	tfs_lake_close(fast);
}

static void test_tags_and_commits_share_versions(void **state)
{
	struct tfs_lake *l = open_lake(0);
	struct tfs_version *br, *tag, *com, *again;
	struct tfs_id id;
	char hex[TFS_ID_HEX];

	(void)state;
	assert_int_equal(tfs_dataset_create(l->store, "share"), 0);
	id = import_rows(l->store, "share", NULL, 4);
	assert_int_equal(tfs_ref_create(l->store, "share", TFS_REF_TAG, "v1", &id), 0);
	tfs_id_hex(&id, hex);
	assert_int_equal(tfs_lake_version(l, "share", TFS_LAKE_BRANCH, "main", &br), 0);
	assert_int_equal(tfs_lake_version(l, "share", TFS_LAKE_TAG, "v1", &tag), 0);
	assert_int_equal(tfs_lake_version(l, "share", TFS_LAKE_COMMIT, hex, &com), 0);
	/* One commit, one version, whichever ref named it. */
	assert_ptr_equal(br, tag);
	assert_ptr_equal(tag, com);
	/* A tag is resolved for good: moving main does not move it. */
	import_rows(l->store, "share", NULL, 1);
	assert_int_equal(tfs_lake_version(l, "share", TFS_LAKE_TAG, "v1", &again), 0);
	assert_ptr_equal(again, tag);
	tfs_version_put(again);
	assert_int_equal(tfs_lake_version(l, "share", TFS_LAKE_TAG, "nosuch", &again), -ENOENT);
	assert_int_equal(tfs_lake_version(l, "share", TFS_LAKE_COMMIT, "abc", &again), -ENOENT);
	tfs_version_put(br);
	tfs_version_put(tag);
	tfs_version_put(com);
	tfs_lake_close(l);
}

static void test_resolve_grammar(void **state)
{
	struct tfs_lake *l = open_lake(5);
	struct tfs_version *v = NULL;
	char *params = NULL, err[256], path[256], hex[TFS_ID_HEX];
	struct tfs_id id;

	(void)state;
	assert_int_equal(tfs_dataset_create(l->store, "g"), 0);
	id = import_rows(l->store, "g", NULL, 3);
	assert_int_equal(tfs_ref_create(l->store, "g", TFS_REF_TAG, "t1", &id), 0);
	tfs_id_hex(&id, hex);

	assert_int_equal(tfs_lake_resolve(l, "g/main", &v, &params, err, sizeof(err)), 0);
	assert_null(params);
	assert_true(tfs_id_eq(&v->commit.id, &id));
	tfs_version_put(v);
	assert_int_equal(
		tfs_lake_resolve(l, "g/t1/views/seed=1,epoch=2", &v, &params, err, sizeof(err)), 0);
	assert_string_equal(params, "seed=1,epoch=2");
	free(params);
	tfs_version_put(v);
	snprintf(path, sizeof(path), "g/commits/%s/views/rank=0,world=2/", hex);
	assert_int_equal(tfs_lake_resolve(l, path, &v, &params, err, sizeof(err)), 0);
	assert_string_equal(params, "rank=0,world=2");
	free(params);
	tfs_version_put(v);
	snprintf(path, sizeof(path), "g/%s", hex); /* a commit id where a ref goes */
	assert_int_equal(tfs_lake_resolve(l, path, &v, &params, err, sizeof(err)), 0);
	tfs_version_put(v);

	assert_int_equal(tfs_lake_resolve(l, "nope/main", &v, &params, err, sizeof(err)), -ENOENT);
	assert_non_null(strstr(err, "no dataset 'nope'"));
	assert_int_equal(tfs_lake_resolve(l, "g/dev", &v, &params, err, sizeof(err)), -ENOENT);
	assert_non_null(strstr(err, "has no branch, tag or commit 'dev'"));
	assert_int_equal(tfs_lake_resolve(l, "g/commits/xyz", &v, &params, err, sizeof(err)),
			 -EINVAL);
	assert_non_null(strstr(err, "not a commit id"));
	static const char *const bad[] = { "g", "g/main/x", "g/main/views",
					   "",	"..",	    "g/main/views/a/b" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		assert_int_equal(tfs_lake_resolve(l, bad[i], &v, &params, err, sizeof(err)),
				 -EINVAL);
		assert_non_null(strstr(err, "expected DATASET/REF"));
	}
	tfs_lake_close(l);
}

static void test_views_are_shared_and_bounded(void **state)
{
	struct tfs_lake *l = open_lake(0);
	struct tfs_lake_view *a, *b, *c, *held[12];
	struct tfs_lake_stats st;
	uint64_t built;
	struct tfs_version *v, *v2;
	char err[256], name[32];

	(void)state;
	assert_int_equal(tfs_dataset_create(l->store, "vw"), 0);
	import_rows(l->store, "vw", NULL, 100);
	assert_int_equal(tfs_lake_version(l, "vw", TFS_LAKE_BRANCH, "main", &v), 0);
	assert_int_equal(tfs_lake_view_get(l, v, "seed=3", &a, err, sizeof(err)), 0);
	assert_int_equal(tfs_lake_view_get(l, v, "seed=3", &b, err, sizeof(err)), 0);
	assert_ptr_equal(a, b); /* built once, shared */
	assert_int_equal(a->view->n, 100);
	assert_int_equal(tfs_lake_view_get(l, v, "seed=4", &c, err, sizeof(err)), 0);
	assert_ptr_not_equal(a, c);
	tfs_lake_view_put(l, c);
	assert_int_equal(tfs_lake_view_get(l, v, "seed=1,seed=2", &c, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "given twice"));
	tfs_lake_view_put(l, a);
	tfs_lake_view_put(l, b);
	/* Idle views stay built, the most recently used first, while their bytes fit view_mem
	 * (here about four views of 100 rows). */
	assert_int_equal(tfs_lake_view_get(l, v, "seed=3", &b, err, sizeof(err)), 0);
	assert_ptr_equal(a, b);
	tfs_lake_view_put(l, b);
	l->view_mem = 4 * (100 * sizeof(uint64_t) + sizeof(*a) + 64);
	for (int i = 0; i < 12; i++) {
		snprintf(name, sizeof(name), "seed=%d", 100 + i);
		assert_int_equal(tfs_lake_view_get(l, v, name, &held[i], err, sizeof(err)), 0);
	}
	tfs_lake_stats(l, &st);
	assert_true(st.views >= 12); /* held: none goes */
	for (int i = 0; i < 12; i++)
		tfs_lake_view_put(l, held[i]);
	tfs_lake_stats(l, &st);
	assert_true(st.views_idle >= 3 && st.views_idle <= 4);
	assert_true(st.views_idle_bytes <= st.view_mem);
	assert_true(st.views_dropped >= 8);
	assert_int_equal(st.views, st.views_idle);
	/* The most recently let go stayed; the first ones went and are built again. */
	assert_int_equal(tfs_lake_view_get(l, v, "seed=111", &b, err, sizeof(err)), 0);
	assert_ptr_equal(b, held[11]);
	tfs_lake_view_put(l, b);
	tfs_lake_stats(l, &st);
	built = st.views_built;
	assert_int_equal(tfs_lake_view_get(l, v, "seed=100", &b, err, sizeof(err)), 0);
	tfs_lake_view_put(l, b);
	tfs_lake_stats(l, &st);
	assert_int_equal(st.views_built, built + 1);
	/* A new commit makes a new view of the same name. */
	import_rows(l->store, "vw", NULL, 20);
	assert_int_equal(tfs_lake_version(l, "vw", TFS_LAKE_BRANCH, "main", &v2), 0);
	assert_int_equal(tfs_lake_view_get(l, v2, "seed=3", &c, err, sizeof(err)), 0);
	assert_int_equal(c->view->n, 120);
	tfs_lake_view_put(l, c);
	tfs_version_put(v);
	tfs_version_put(v2);
	tfs_lake_close(l);
}

static void test_next_epoch_name(void **state)
{
	static const char *const cases[][2] = {
		{ "seed=7", "seed=7,epoch=1" },
		{ "seed=7,epoch=3,rank=1", "seed=7,epoch=4,rank=1" },
		{ "epoch=0,seed=1", "epoch=1,seed=1" },
		{ "seed=1,where=(x,epoch=5)", "seed=1,where=(x,epoch=5),epoch=1" },
		{ "seed=1,myepoch=2", "seed=1,myepoch=2,epoch=1" },
		{ "seed=1,epoch=99", "seed=1,epoch=100" },
	};

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char *got = tfs_view_name_next_epoch(cases[i][0]);

		assert_non_null(got);
		assert_string_equal(got, cases[i][1]);
		free(got);
	}
	assert_null(tfs_view_name_next_epoch("seed=1,epoch=18446744073709551615"));
}

/* epoch_warm: the next epoch's view is built and the first chunks it needs are cached; a view
 * without a shuffle, or a lake without epoch_warm, warms nothing. */
static void test_epoch_warm_loads_next_epoch(void **state)
{
	struct tfs_lake *l = open_lake(0);
	struct tfs_lake_view *lv, *next;
	struct tfs_cache_stats before, after;
	struct tfs_version *v;
	char err[256];

	(void)state;
	l->prefetch_threads = 2;
	l->epoch_warm = 1;
	assert_int_equal(tfs_lake_start(l), 0);
	assert_int_equal(tfs_dataset_create(l->store, "ew"), 0);
	import_rows(l->store, "ew", NULL, 100);
	assert_int_equal(tfs_lake_version(l, "ew", TFS_LAKE_BRANCH, "main", &v), 0);
	assert_int_equal(tfs_lake_view_get(l, v, "seed=5,epoch=2", &lv, err, sizeof(err)), 0);
	tfs_cache_stats(l->cache, &before);
	tfs_lake_view_warm_next(l, lv, 0);
	tfs_lake_view_warm_next(l, lv, 0); /* once per view and column */
	assert_int_equal(tfs_workgroup_wait(&l->warm), 0);
	tfs_cache_stats(l->cache, &after);
	assert_true(after.entries > before.entries);
	/* The next epoch's view is built and kept (idle): getting it again finds it. */
	assert_int_equal(tfs_lake_view_get(l, v, "seed=5,epoch=3", &next, err, sizeof(err)), 0);
	assert_int_equal(next->view->n, 100);
	tfs_lake_view_put(l, next);
	tfs_lake_view_put(l, lv);
	/* No shuffle: nothing to warm. */
	assert_int_equal(tfs_lake_view_get(l, v, "rank=0,world=2", &lv, err, sizeof(err)), 0);
	tfs_cache_stats(l->cache, &before);
	tfs_lake_view_warm_next(l, lv, 0);
	assert_int_equal(tfs_workgroup_wait(&l->warm), 0);
	tfs_cache_stats(l->cache, &after);
	assert_int_equal(after.entries, before.entries);
	tfs_lake_view_put(l, lv);
	tfs_version_put(v);
	tfs_lake_close(l);
}

/* A manifest (from a hostile store) claiming a chunk of 2^41 rows: reading it is EIO at once,
 * with nothing of that size allocated. */
static void test_hostile_chunk_claim_is_eio(void **state)
{
	struct tfs_store *s;
	struct tfs_commit c;
	struct tfs_manifest m;
	struct tfs_version *v;
	struct tfs_cache *cache;
	struct tfs_cache_entry *e = NULL;
	struct tfs_id head, cid;

	(void)state;
	assert_int_equal(tfs_store_open(url, 0, &s), 0);
	assert_int_equal(tfs_dataset_create(s, "hostile"), 0);
	head = import_rows(s, "hostile", NULL, 10);
	assert_int_equal(tfs_commit_load(s, "hostile", &head, &c), 0);
	assert_int_equal(tfs_manifest_load(s, "hostile", &c.manifest, &m), 0);
	m.rows = m.cols[0].rows = m.cols[0].rows_per_chunk = (uint64_t)1 << 41;
	assert_int_equal(tfs_commit_write(s, "hostile", &m, &head, "hostile", &cid), 0);
	assert_int_equal(tfs_version_open(s, "hostile", &cid, &v), 0);
	assert_int_equal(tfs_cache_create(8 << 20, &cache), 0);
	assert_int_equal(tfs_version_chunk_get(v, cache, 0, 0, &e), -EIO);
	assert_null(e);
	/* Recorded as damaged, with the chunk object named (its key: the dataset's objects/). */
	{
		struct tfs_buf text = { 0 };
		char hex[TFS_ID_HEX];

		tfs_id_hex(&m.cols[0].chunks[0].id, hex);
		assert_int_equal(tfs_bad_chunks_text(&text), 0);
		assert_non_null(memmem(text.data, text.len, "hostile/objects/", 16));
		assert_non_null(memmem(text.data, text.len, hex + 2, 16));
		assert_non_null(memmem(text.data, text.len, "claims_more_than_1_TiB", 22));
		tfs_buf_free(&text);
	}
	tfs_cache_destroy(cache);
	tfs_version_put(v);
	tfs_manifest_free(&m);
	tfs_commit_free(&c);
	tfs_store_close(s);
}

static int group_setup(void **state)
{
	(void)state;
	if (tmpdir_make("lake"))
		return -1;
	snprintf(url, sizeof(url), "%s/lake", tmpdir);
	if (mkdir(url, 0755))
		return -1;
	snprintf(url, sizeof(url), "file://%s/lake", tmpdir);
	return 0;
}

static int group_teardown(void **state)
{
	(void)state;
	return tmpdir_remove();
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_open_start_stop),
		cmocka_unit_test(test_branch_refresh_follows_ttl),
		cmocka_unit_test(test_tags_and_commits_share_versions),
		cmocka_unit_test(test_resolve_grammar),
		cmocka_unit_test(test_views_are_shared_and_bounded),
		cmocka_unit_test(test_next_epoch_name),
		cmocka_unit_test(test_epoch_warm_loads_next_epoch),
		cmocka_unit_test(test_hostile_chunk_claim_is_eio),
	};

	return cmocka_run_group_tests_name("lake", tests, group_setup, group_teardown);
}
