/* SPDX-License-Identifier: MIT */
/* Unit tests for core/format's commits and schema.json, tfs_url_split and util's sizes and
 * names. */
#include <errno.h>
#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "format.h"
#include "util.h"
/* The group's scratch directory, where the library's log goes. */
#include "tmpdir_fixture.h"
#include "manifest_fixture.h"

/* --- commits -------------------------------------------------------------------------------- */

static void commit_round_trip(size_t nparents, const char *message)
{
	struct tfs_commit c, back;
	struct tfs_buf b = { 0 }, again = { 0 };
	struct tfs_id parents[2];
	char hex[TFS_ID_HEX];

	memset(&c, 0, sizeof(c));
	c.manifest = id_from_seed(1);
	parents[0] = id_from_seed(2);
	parents[1] = id_from_seed(3);
	c.parents = nparents ? parents : NULL;
	c.nparents = nparents;
	c.time = 1700000000;
	c.rows = 123456789012ull;
	c.message = (char *)message;
	assert_int_equal(tfs_commit_serialize(&c, &b), 0);
	assert_memory_equal(b.data, "tensorfs-commit 1\nmanifest ", 27);
	tfs_id_hex(&c.manifest, hex);
	assert_non_null(strstr((char *)b.data, hex));

	assert_int_equal(tfs_commit_parse((char *)b.data, b.len, &back), 0);
	assert_true(tfs_id_eq(&back.manifest, &c.manifest));
	assert_int_equal(back.nparents, nparents);
	for (size_t i = 0; i < nparents; i++)
		assert_true(tfs_id_eq(&back.parents[i], &parents[i]));
	assert_int_equal(back.time, c.time);
	assert_int_equal(back.rows, c.rows);
	assert_string_equal(back.message, message ? message : "");

	assert_int_equal(tfs_commit_serialize(&back, &again), 0);
	assert_int_equal(again.len, b.len);
	assert_memory_equal(again.data, b.data, b.len);
	tfs_commit_free(&back);
	assert_null(back.parents);
	assert_null(back.message);
	tfs_buf_free(&b);
	tfs_buf_free(&again);
}

static void test_commit_round_trip(void **state)
{
	(void)state;
	commit_round_trip(0, "create dataset");
	commit_round_trip(1, "append 100 rows");
	commit_round_trip(2, "merge branch 'exp'\n\nThis merge brings in:\n - column x\n"
			     " - column y\n\nand a line with trailing spaces   \n");
	commit_round_trip(1, "");
	commit_round_trip(0, NULL);
	commit_round_trip(1, "tensorfs-commit 1\nmanifest looks like a header\nparent x\n");
	commit_round_trip(0, "no newline at the end");
}

static void test_commit_parse_negative_time(void **state)
{
	static const char text[] =
		"tensorfs-commit 1\n"
		"manifest ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad\n"
		"time -86400\nrows 0\n\nbefore the epoch";
	struct tfs_commit c;

	(void)state;
	assert_int_equal(tfs_commit_parse(text, sizeof(text) - 1, &c), 0);
	assert_int_equal(c.time, -86400);
	assert_int_equal(c.nparents, 0);
	assert_string_equal(c.message, "before the epoch");
	tfs_commit_free(&c);
}

static void test_commit_parse_rejects_damage(void **state)
{
	static const char good[] =
		"tensorfs-commit 1\n"
		"manifest ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad\n"
		"parent e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855\n"
		"time 1700000000\nrows 5\n\nmessage";
	static const struct {
		const char *from, *to;
	} edits[] = {
		{ "tensorfs-commit 1", "tensorfs-manifest 1" },
		{ "manifest ba78", "manifest zz78" },
		{ "manifest ba78", "manifst ba78" },
		{ "20015ad\n", "20015a\n" },
		{ "parent e3b0", "parent x3b0" },
		{ "time 1700000000", "time soon" },
		{ "time 1700000000\n", "" },
		{ "rows 5", "rows many" },
		{ "rows 5\n", "" },
		{ "\n\nmessage", "\nmessage" },
	};
	struct tfs_commit c;

	(void)state;
	assert_int_equal(tfs_commit_parse(good, sizeof(good) - 1, &c), 0);
	tfs_commit_free(&c);
	for (size_t i = 0; i < sizeof(edits) / sizeof(edits[0]); i++) {
		char *t = replace(good, edits[i].from, edits[i].to);
		int rc = tfs_commit_parse(t, strlen(t), &c);

		if (rc != -EIO)
			fail_msg("'%s' -> '%s' gave %d, want -EIO", edits[i].from, edits[i].to, rc);
		free(t);
	}
	/* Cut anywhere before the blank line. */
	for (size_t n = 0; n < sizeof(good) - 1 - strlen("\nmessage"); n++) {
		char *copy = malloc(n ? n : 1);

		assert_non_null(copy);
		memcpy(copy, good, n);
		if (tfs_commit_parse(copy, n, &c) != -EIO)
			fail_msg("commit cut at %zu parsed", n);
		free(copy);
	}
	/* A newer version. */
	{
		char *t = replace(good, "tensorfs-commit 1", "tensorfs-commit 2");

		assert_int_equal(tfs_commit_parse(t, strlen(t), &c), -EPROTO);
		free(t);
	}
}

/* --- tfs_url_split -------------------------------------------------------------------------- */

static void test_url_split(void **state)
{
	static const struct {
		const char *url, *lake, *ds;
	} good[] = {
		{ "file:///tmp/lake/ds", "file:///tmp/lake", "ds" },
		{ "file:///tmp/lake/ds/", "file:///tmp/lake", "ds" },
		{ "file:///tmp/lake/ds//", "file:///tmp/lake", "ds" },
		{ "file:///ds", "file:///", "ds" },
		{ "file:///ds/", "file:///", "ds" },
		{ "file:///a/b/c/d/imagenet-1k_v2.0", "file:///a/b/c/d", "imagenet-1k_v2.0" },
		{ "/tmp/lake/ds", "/tmp/lake", "ds" },
		{ "/ds", "/", "ds" },
	};
	static const char *const bad[] = {
		"file:///tmp/lake/.hidden",
		"file:///tmp/lake/-x",
		"file:///tmp/lake/a b",
		"file://",
		"file:///",
		"file:////",
		"",
		"ds",
		"/",
		"file:///tmp/lake/ds\n",
	};

	(void)state;
	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		char *lake = NULL, *ds = NULL;

		if (tfs_url_split(good[i].url, &lake, &ds))
			fail_msg("'%s' rejected", good[i].url);
		assert_string_equal(lake, good[i].lake);
		assert_string_equal(ds, good[i].ds);
		free(lake);
		free(ds);
	}
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char *lake = NULL, *ds = NULL;
		int rc = tfs_url_split(bad[i], &lake, &ds);

		if (rc != -EINVAL)
			fail_msg("'%s' gave %d, want -EINVAL", bad[i], rc);
	}
}

/* --- util: sizes and names ------------------------------------------------------------------ */

static void test_parse_size(void **state)
{
	static const struct {
		const char *in;
		uint64_t want;
	} good[] = {
		{ "12", 12 },
		{ "0", 0 },
		{ "4k", 4096 },
		{ "4K", 4096 },
		{ "4kb", 4096 },
		{ "4KiB", 4096 },
		{ "8M", 8u << 20 },
		{ "8m", 8u << 20 },
		{ "8MiB", 8u << 20 },
		{ "1G", 1ull << 30 },
		{ "1GiB", 1ull << 30 },
		{ "2GiB", 2ull << 30 },
		{ "3t", 3ull << 40 },
		{ "16777215T", 16777215ull << 40 },
		{ "18446744073709551615", UINT64_MAX },
	};
	static const char *const bad[] = {
		"x",
		"-1",
		"4q",
		"",
		"k",
		"4 k",
		" 4",
		"+4",
		"4.5M",
		"4kk",
		"4ib",
		"4kib2",
		"4MB ",
		"0x10",
		"1e3",
		"16777216T",
		"18446744073709551616",
		"17179869184G",
	};

	(void)state;
	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		uint64_t v = 0;

		if (tfs_parse_size(good[i].in, &v))
			fail_msg("'%s' rejected", good[i].in);
		if (v != good[i].want)
			fail_msg("'%s' gave %" PRIu64 ", want %" PRIu64, good[i].in, v,
				 good[i].want);
	}
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		uint64_t v = 77;

		if (tfs_parse_size(bad[i], &v) != -EINVAL)
			fail_msg("'%s' accepted", bad[i]);
	}
	{
		uint64_t v;

		assert_int_equal(tfs_parse_size(NULL, &v), -EINVAL);
	}
}

static void test_name_valid(void **state)
{
	static const char *const good[] = {
		"a", "Z", "0", "ds", "imagenet-1k", "v1.2.3", "a_b", "x.", "x-", "a..b", "_private",
	};
	static const char *const bad[] = {
		"",	".",   "..",	      ".hidden", "-x", "a/b",  "a b",
		"a\tb", "a\n", "caf\xc3\xa9", "a:b",	 "a*", "a\\b", "$x",
	};
	char longest[130];

	(void)state;
	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++)
		if (!tfs_name_valid(good[i]))
			fail_msg("'%s' rejected", good[i]);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		if (tfs_name_valid(bad[i]))
			fail_msg("'%s' accepted", bad[i]);
	assert_false(tfs_name_valid(NULL));

	memset(longest, 'n', 128);
	longest[128] = 0;
	assert_true(tfs_name_valid(longest));
	longest[128] = 'n';
	longest[129] = 0;
	assert_false(tfs_name_valid(longest));
}

/* --- schema.json ---------------------------------------------------------------------------- */

/* Listed chunks (a data part's): the chunk of every row equals the first chunk whose end is
 * past it, for chunks alike, of wildly different sizes, and with empty ones, and r >= rows gives
 * nchunks. */
static void test_chunk_of_listed(void **state)
{
	static const uint64_t alike[] = { 100, 200, 300, 400, 500, 600, 700, 800 };
	static const uint64_t skewed[] = { 1, 2, 3, 700, 701, 702, 703, 800 };
	static const uint64_t empties[] = { 0, 0, 90, 90, 90, 500, 500, 800 };
	static const uint64_t one[] = { 800 };
	const struct {
		const uint64_t *end;
		size_t n;
	} layouts[] = { { alike, 8 }, { skewed, 8 }, { empties, 8 }, { one, 1 } };

	(void)state;
	for (size_t l = 0; l < sizeof(layouts) / sizeof(layouts[0]); l++) {
		struct tfs_column c = { .rows = 800,
					.chunk_end = (uint64_t *)layouts[l].end,
					.nchunks = layouts[l].n };

		for (uint64_t r = 0; r <= 801; r++) {
			size_t want = 0;

			while (want < c.nchunks && c.chunk_end[want] <= r)
				want++;
			assert_int_equal(tfs_column_chunk_of(&c, r), want);
		}
	}
}

static void test_schema_json(void **state)
{
	static const uint64_t img[] = { 3, 32, 32 };
	struct tfs_manifest m;
	struct tfs_commit c;
	struct tfs_id parent = id_from_seed(7);
	struct tfs_buf out = { 0 };
	char hex[TFS_ID_HEX], phex[TFS_ID_HEX];
	const char *j;

	(void)state;
	make_manifest(&m, 50, 3);
	make_column(&m.cols[0], "image", "|u1", 3, img, 50, 16, TFS_CODEC_ZSTD, 3);
	make_column(&m.cols[1], "label", "<i8", 0, NULL, 50, 50, TFS_CODEC_RAW, 0);
	make_column(&m.cols[2], "score", "<f2", 0, NULL, 50, 50, TFS_CODEC_RAW, 0);
	memset(&c, 0, sizeof(c));
	c.id = id_from_seed(42);
	c.manifest = id_from_seed(43);
	c.parents = &parent;
	c.nparents = 1;
	c.time = 0;
	c.rows = 50;
	c.message = (char *)"say \"hi\"\nback\\slash";
	assert_int_equal(tfs_schema_json("my-ds", &c, &m, &out), 0);
	j = (const char *)out.data;
	tfs_id_hex(&c.id, hex);
	tfs_id_hex(&parent, phex);
	assert_non_null(strstr(j, hex));
	assert_non_null(strstr(j, phex));
	assert_non_null(strstr(j, "\"my-ds\""));
	assert_non_null(strstr(j, "\"image\""));
	assert_non_null(strstr(j, "\"image.npy\""));
	assert_non_null(strstr(j, "\"label\""));
	assert_non_null(strstr(j, "\"score\""));
	assert_non_null(strstr(j, "\"uint8\""));
	assert_non_null(strstr(j, "\"int64\""));
	assert_non_null(strstr(j, "\"float16\""));
	assert_non_null(strstr(j, "[3, 32, 32]"));
	assert_non_null(strstr(j, "1970-01-01T00:00:00Z"));
	assert_non_null(strstr(j, "say \\\"hi\\\"\\nback\\\\slash"));
	assert_int_equal(j[0], '{');
	assert_int_equal(j[out.len - 2], '}');
	assert_null(memchr(j, 0, out.len));
	tfs_buf_free(&out);

	/* No columns. */
	m.ncols = 0;
	assert_int_equal(tfs_schema_json("e", &c, &m, &out), 0);
	assert_non_null(strstr((char *)out.data, "\"columns\": []"));
	m.ncols = 3;
	tfs_buf_free(&out);
	tfs_manifest_free(&m);
}

/* --- main ----------------------------------------------------------------------------------- */

static int group_setup(void **state)
{
	(void)state;
	return tmpdir_make("format");
}

static int group_teardown(void **state)
{
	(void)state;
	return tmpdir_remove();
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_commit_round_trip),
		cmocka_unit_test(test_commit_parse_negative_time),
		cmocka_unit_test(test_commit_parse_rejects_damage),
		cmocka_unit_test(test_url_split),
		cmocka_unit_test(test_parse_size),
		cmocka_unit_test(test_name_valid),
		cmocka_unit_test(test_schema_json),
		cmocka_unit_test(test_chunk_of_listed),
	};

	if (getenv("TFS_TEST_FILTER"))
		cmocka_set_test_filter(getenv("TFS_TEST_FILTER"));
	return cmocka_run_group_tests_name("format", tests, group_setup, group_teardown);
}
