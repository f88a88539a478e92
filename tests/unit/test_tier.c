/* SPDX-License-Identifier: MIT */
/* Unit tests for core/tier: a miss reads the origin and writes the tier; the next node hits the
 * tier; stale, truncated and forged tier objects are ignored; a full queue drops writes. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "format.h"
#include "object.h"
#include "store.h"
#include "tier.h"
#include "util.h"
#include "tmpdir_fixture.h"

#define NOBJ 4

struct rig {
	char origin[300], tier[300];
	struct tfs_id id[NOBJ];
	char key[NOBJ][TFS_KEY_MAX];
	struct tfs_buf bytes[NOBJ];
};

static void make_rig(const char *name, struct rig *r)
{
	struct tfs_store *s;

	snprintf(r->origin, sizeof(r->origin), "file://%s/%s-origin", tmpdir, name);
	snprintf(r->tier, sizeof(r->tier), "file://%s/%s-tier", tmpdir, name);
	assert_int_equal(tfs_store_open(r->tier, TFS_STORE_CREATE, &s), 0);
	tfs_store_close(s);
	assert_int_equal(tfs_store_open(r->origin, TFS_STORE_CREATE, &s), 0);
	assert_int_equal(tfs_dataset_create(s, "ds"), 0);
	for (int i = 0; i < NOBJ; i++) {
		uint8_t raw[3000];

		for (size_t j = 0; j < sizeof(raw); j++)
			raw[j] = (uint8_t)(j * 31 + i * 7 + j / 11);
		memset(&r->bytes[i], 0, sizeof(r->bytes[i]));
		assert_int_equal(tfs_object_encode(TFS_OBJ_CHUNK, TFS_CODEC_RAW, 0, raw,
						   sizeof(raw), &r->bytes[i]),
				 0);
		assert_int_equal(tfs_object_put_encoded(s, "ds", r->bytes[i].data, r->bytes[i].len,
							&r->id[i]),
				 0);
		tfs_object_key("ds", &r->id[i], r->key[i]);
	}
	tfs_store_close(s);
}

static void free_rig(struct rig *r)
{
	for (int i = 0; i < NOBJ; i++)
		tfs_buf_free(&r->bytes[i]);
}

static struct tfs_store *node(const struct rig *r, uint64_t queue)
{
	struct tfs_store *origin, *tier, *s;

	assert_int_equal(tfs_store_open(r->origin, 0, &origin), 0);
	assert_int_equal(tfs_store_open(r->tier, 0, &tier), 0);
	assert_int_equal(tfs_tier_wrap(origin, tier, queue, &s), 0);
	return s;
}

static void read_all(struct tfs_store *s, const struct rig *r)
{
	for (int i = 0; i < NOBJ; i++) {
		struct tfs_buf b = { 0 };

		assert_int_equal(tfs_store_get_object(s, r->key[i], 0, &b), 0);
		assert_int_equal(b.len, r->bytes[i].len);
		assert_memory_equal(b.data, r->bytes[i].data, b.len);
		tfs_buf_free(&b);
	}
}

static void tier_put(const struct rig *r, int i, const void *data, size_t len)
{
	struct tfs_store *t;
	char hex[TFS_ID_HEX], key[TFS_KEY_MAX];

	tfs_id_hex(&r->id[i], hex);
	snprintf(key, sizeof(key), "objects/%.2s/%s", hex, hex + 2);
	assert_int_equal(tfs_store_open(r->tier, 0, &t), 0);
	assert_int_equal(tfs_store_put(t, key, data, len), 0);
	tfs_store_close(t);
}

static void test_second_node_hits(void **state)
{
	struct tfs_tier_stats st;
	struct tfs_store_counters oc;
	struct tfs_store *a, *b;
	struct rig r;

	(void)state;
	make_rig("hits", &r);
	a = node(&r, 1 << 20);
	read_all(a, &r);
	tfs_tier_flush(a);
	assert_int_equal(tfs_tier_stats(a, &st), 0);
	assert_int_equal(st.misses, NOBJ);
	assert_int_equal(st.hits, 0);
	assert_int_equal(st.writes, NOBJ);
	assert_int_equal(st.pending_bytes, 0);
	tfs_store_close(a);

	b = node(&r, 1 << 20);
	read_all(b, &r);
	assert_int_equal(tfs_tier_stats(b, &st), 0);
	assert_int_equal(st.hits, NOBJ);
	assert_int_equal(st.misses, 0);
	tfs_store_counters(tfs_tier_origin(b), &oc);
	assert_int_equal(oc.gets, 0); /* nothing from the origin */
	/* Refs and markers are never the tier's. */
	{
		struct tfs_buf m = { 0 };

		assert_int_equal(tfs_store_get(b, "ds/tensorfs-dataset", &m), 0);
		tfs_buf_free(&m);
	}
	tfs_store_counters(tfs_tier_origin(b), &oc);
	assert_int_equal(oc.gets, 1);
	tfs_store_close(b);
	free_rig(&r);
}

static void test_bad_tier_objects_ignored(void **state)
{
	struct tfs_tier_stats st;
	struct tfs_store *a, *b;
	struct rig r;

	(void)state;
	make_rig("bad", &r);
	a = node(&r, 1 << 20);
	read_all(a, &r);
	tfs_tier_flush(a);
	tfs_store_close(a);
	/* Truncated; forged (a valid object under another id); garbage of the right size. */
	tier_put(&r, 0, r.bytes[0].data, r.bytes[0].len / 2);
	tier_put(&r, 1, r.bytes[2].data, r.bytes[2].len);
	{
		uint8_t junk[4000];

		memset(junk, 0x5A, sizeof(junk));
		tier_put(&r, 3, junk, r.bytes[3].len);
	}
	b = node(&r, 1 << 20);
	read_all(b, &r); /* exact bytes: the bad ones came from the origin */
	tfs_tier_flush(b);
	assert_int_equal(tfs_tier_stats(b, &st), 0);
	assert_int_equal(st.bad, 3);
	assert_int_equal(st.hits, 1);
	assert_int_equal(st.writes, 3); /* the origin's copies written back */
	tfs_store_close(b);
	/* Whole again: a third node hits everything. */
	b = node(&r, 1 << 20);
	read_all(b, &r);
	assert_int_equal(tfs_tier_stats(b, &st), 0);
	assert_int_equal(st.hits, NOBJ);
	assert_int_equal(st.bad, 0);
	tfs_store_close(b);
	free_rig(&r);
}

static void test_full_queue_drops(void **state)
{
	struct tfs_tier_stats st;
	struct tfs_store *a;
	struct rig r;

	(void)state;
	make_rig("drop", &r);
	a = node(&r, 100); /* smaller than any object */
	read_all(a, &r);
	tfs_tier_flush(a);
	assert_int_equal(tfs_tier_stats(a, &st), 0);
	assert_int_equal(st.dropped, NOBJ);
	assert_int_equal(st.writes, 0);
	tfs_store_close(a);
	free_rig(&r);
}

static void test_not_a_tier(void **state)
{
	struct tfs_tier_stats st;
	struct tfs_store *s;
	struct rig r;

	(void)state;
	make_rig("plain", &r);
	assert_int_equal(tfs_store_open(r.origin, 0, &s), 0);
	assert_int_equal(tfs_tier_stats(s, &st), -EINVAL);
	assert_ptr_equal(tfs_tier_origin(s), s);
	assert_null(tfs_tier_store(s));
	tfs_store_close(s);
	free_rig(&r);
}

static int group_setup(void **state)
{
	(void)state;
	return tmpdir_make("tier");
}

static int group_teardown(void **state)
{
	(void)state;
	return tmpdir_remove();
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_second_node_hits),
		cmocka_unit_test(test_bad_tier_objects_ignored),
		cmocka_unit_test(test_full_queue_drops),
		cmocka_unit_test(test_not_a_tier),
	};

	if (getenv("TFS_TEST_FILTER"))
		cmocka_set_test_filter(getenv("TFS_TEST_FILTER"));
	return cmocka_run_group_tests_name("tier", tests, group_setup, group_teardown);
}
