/* SPDX-License-Identifier: MIT */
/* Unit tests for core/format's manifests: round trips, and the damage the parser refuses. */
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
#include "util.h"
/* The group's scratch directory, where the library's log goes. */
#include "tmpdir_fixture.h"
#include "manifest_fixture.h"

/* --- manifests ------------------------------------------------------------------------------ */

static void test_manifest_round_trip(void **state)
{
	static const uint64_t img[] = { 3, 32, 32 }, vol[] = { 2, 3, 4, 5 }, vec[] = { 768 };
	struct tfs_manifest m, back;
	char *text, *again, err[256] = "";
	size_t len, len2;

	(void)state;
	make_manifest(&m, 1000, 5);
	make_column(&m.cols[0], "label", "<i8", 0, NULL, 1000, 100, TFS_CODEC_RAW, 0);
	make_column(&m.cols[1], "image", "|u1", 3, img, 1000, 7, TFS_CODEC_ZSTD, 19);
	make_column(&m.cols[2], "volume.v2", "<f2", 4, vol, 1000, 1, TFS_CODEC_ZSTD, -5);
	make_column(&m.cols[3], "embedding-768", "<c16", 1, vec, 1000, 1000, TFS_CODEC_ZSTD, 3);
	make_column(&m.cols[4], "mask_", "|b1", 0, NULL, 1000, 999, TFS_CODEC_RAW, 0);
	assert_int_equal(m.cols[1].nchunks, 143);
	assert_int_equal(m.cols[2].nchunks, 1000);
	assert_int_equal(m.cols[3].nchunks, 1);
	assert_int_equal(m.cols[4].nchunks, 2);

	text = serialize_manifest(&m, &len);
	assert_int_equal(strlen(text), len);
	assert_memory_equal(text, "tensorfs-manifest 1\nrows 1000\ncolumn label\n", 42);
	assert_non_null(strstr(text, "\nshape\n"));	    /* a scalar column */
	assert_non_null(strstr(text, "\nshape 2 3 4 5\n")); /* ndim 4 */
	assert_non_null(strstr(text, "\ncodec zstd -5\n"));
	if (tfs_manifest_parse(text, len, &back, err, sizeof(err)))
		fail_msg("parse: %s", err);
	assert_manifests_equal(&m, &back);

	/* Serialising what was parsed gives the same bytes. */
	again = serialize_manifest(&back, &len2);
	assert_int_equal(len, len2);
	assert_memory_equal(text, again, len);

	assert_ptr_equal(tfs_manifest_column(&back, "image"), &back.cols[1]);
	assert_ptr_equal(tfs_manifest_column(&back, "mask_"), &back.cols[4]);
	assert_null(tfs_manifest_column(&back, "imag"));
	assert_null(tfs_manifest_column(&back, "images"));

	free(text);
	free(again);
	tfs_manifest_free(&m);
	tfs_manifest_free(&back);
	assert_int_equal(back.ncols, 0);
	assert_null(back.cols);
}

static void test_manifest_round_trip_empty_and_zero_rows(void **state)
{
	struct tfs_manifest m, back;
	char *text, err[256] = "";
	size_t len;

	(void)state;
	/* No columns at all: the root commit's manifest. */
	make_manifest(&m, 0, 0);
	text = serialize_manifest(&m, &len);
	assert_string_equal(text, "tensorfs-manifest 1\nrows 0\n");
	assert_int_equal(tfs_manifest_parse(text, len, &back, err, sizeof(err)), 0);
	assert_int_equal(back.rows, 0);
	assert_int_equal(back.ncols, 0);
	free(text);
	tfs_manifest_free(&m);
	tfs_manifest_free(&back);

	/* A column with no rows has no chunks. */
	make_manifest(&m, 0, 1);
	make_column(&m.cols[0], "empty", "<f8", 0, NULL, 0, 16, TFS_CODEC_ZSTD, 3);
	assert_int_equal(m.cols[0].nchunks, 0);
	text = serialize_manifest(&m, &len);
	assert_non_null(strstr(text, "\nchunks 0\nend\n"));
	assert_int_equal(tfs_manifest_parse(text, len, &back, err, sizeof(err)), 0);
	assert_manifests_equal(&m, &back);
	free(text);
	tfs_manifest_free(&m);
	tfs_manifest_free(&back);
}

static void test_manifest_round_trip_max_dims(void **state)
{
	uint64_t shape[TFS_MAX_DIMS - 1];
	struct tfs_manifest m, back;
	char *text, err[256] = "";
	size_t len;

	(void)state;
	for (unsigned d = 0; d < TFS_MAX_DIMS - 1; d++)
		shape[d] = d % 3 == 0 ? 2 : 1;
	make_manifest(&m, 5, 1);
	make_column(&m.cols[0], "deep", "<u2", TFS_MAX_DIMS - 1, shape, 5, 2, TFS_CODEC_RAW, 0);
	text = serialize_manifest(&m, &len);
	if (tfs_manifest_parse(text, len, &back, err, sizeof(err)))
		fail_msg("parse: %s", err);
	assert_manifests_equal(&m, &back);
	free(text);
	tfs_manifest_free(&m);
	tfs_manifest_free(&back);
}

static void test_manifest_parse_many_chunks(void **state)
{
	struct tfs_manifest m, back;
	char *text, err[256] = "";
	size_t len;

	(void)state;
	make_manifest(&m, 100000, 1);
	make_column(&m.cols[0], "tokens", "<u4", 0, NULL, 100000, 3, TFS_CODEC_ZSTD, 3);
	assert_int_equal(m.cols[0].nchunks, 33334);
	text = serialize_manifest(&m, &len);
	assert_int_equal(tfs_manifest_parse(text, len, &back, err, sizeof(err)), 0);
	assert_manifests_equal(&m, &back);
	free(text);
	tfs_manifest_free(&m);
	tfs_manifest_free(&back);
}

static void test_manifest_parse_rejects_wrong_chunk_count(void **state)
{
	struct tfs_manifest m;
	char *text;
	size_t len;

	(void)state;
	/* 10 rows at 4 per chunk is 3 chunks: try 2 and 4. */
	for (int delta = -1; delta <= 1; delta += 2) {
		struct tfs_manifest back;
		char err[256] = "";

		make_manifest(&m, 10, 1);
		make_column(&m.cols[0], "x", "<f4", 0, NULL, 10, 4, TFS_CODEC_RAW, 0);
		assert_int_equal(m.cols[0].nchunks, 3);
		m.cols[0].nchunks = (size_t)(3 + delta); /* the array holds 3; 4 would overrun */
		if (delta > 0) {
			struct tfs_chunk_ref *n = realloc(m.cols[0].chunks, 4 * sizeof(*n));

			assert_non_null(n);
			n[3] = n[2];
			m.cols[0].chunks = n;
		}
		text = serialize_manifest(&m, &len);
		assert_int_equal(tfs_manifest_parse(text, len, &back, err, sizeof(err)), -EIO);
		assert_non_null(strstr(err, "chunks"));
		free(text);
		tfs_manifest_free(&m);
	}
	/* Chunk count right, but the second chunk line missing before "end". */
	text = sample_manifest_text();
	{
		char *first = strstr(text, "chunks 3\n") + 9;
		char *second = strchr(first, '\n') + 1, *third = strchr(second, '\n') + 1;
		char *cut = malloc(strlen(text) + 1);

		assert_non_null(cut);
		snprintf(cut, strlen(text) + 1, "%.*s%s", (int)(second - text), text, third);
		assert_manifest_rejected(cut, "a chunk line missing");
		free(cut);
	}
	free(text);
}

static void test_manifest_parse_rejects_column_rows_mismatch(void **state)
{
	struct tfs_manifest m, back;
	char *text, err[256] = "";
	size_t len;

	(void)state;
	make_manifest(&m, 10, 2);
	make_column(&m.cols[0], "a", "<f4", 0, NULL, 10, 4, TFS_CODEC_RAW, 0);
	make_column(&m.cols[1], "b", "<f4", 0, NULL, 9, 4, TFS_CODEC_RAW, 0);
	text = serialize_manifest(&m, &len);
	assert_int_equal(tfs_manifest_parse(text, len, &back, err, sizeof(err)), -EIO);
	assert_non_null(strstr(err, "rows"));
	free(text);
	tfs_manifest_free(&m);

	/* The manifest row count disagreeing with its only column. */
	text = sample_manifest_text();
	{
		char *bad = replace(text, "rows 10\ncolumn", "rows 11\ncolumn");

		assert_manifest_rejected(bad, "manifest rows 11, columns 10");
		free(bad);
	}
	free(text);
}

static void test_manifest_parse_rejects_bad_dtype(void **state)
{
	static const char *const bad[] = {
		"dtype <U5", "dtype |O", "dtype >f4", /* stored dtypes are never big-endian */
		"dtype =f4", "dtype f4", "dtype <i3", "dtype <f16",
		"dtype ",    "dtype",	 "dtipe <f4", "dtype |f4",
	};
	char *text = sample_manifest_text();

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char *t = replace(text, "dtype <f4", bad[i]);

		assert_manifest_rejected(t, bad[i]);
		free(t);
	}
	free(text);
}

static void test_manifest_parse_rejects_duplicate_columns(void **state)
{
	struct tfs_manifest m;
	char *text;
	size_t len;

	(void)state;
	make_manifest(&m, 10, 3);
	make_column(&m.cols[0], "a", "<f4", 0, NULL, 10, 4, TFS_CODEC_RAW, 0);
	make_column(&m.cols[1], "b", "<f4", 0, NULL, 10, 4, TFS_CODEC_RAW, 0);
	make_column(&m.cols[2], "a", "<i4", 0, NULL, 10, 5, TFS_CODEC_RAW, 0);
	text = serialize_manifest(&m, &len);
	assert_manifest_rejected(text, "duplicate column a");
	free(text);
	tfs_manifest_free(&m);
}

static void test_manifest_parse_rejects_invalid_column_names(void **state)
{
	static const char *const bad[] = {
		"column .hidden", "column -x", "column a/b",  "column a b", "column ",
		"column",	  "columnx",   "column x\tx", "Column x",   "column ../x",
	};
	char *text = sample_manifest_text();

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char *t = replace(text, "column x", bad[i]);

		assert_manifest_rejected(t, bad[i]);
		free(t);
	}
	free(text);
}

static void test_manifest_parse_rejects_truncated_text(void **state)
{
	struct tfs_manifest m;
	char *text;
	size_t len, body;

	(void)state;
	make_manifest(&m, 50, 1);
	make_column(&m.cols[0], "x", "<f8", 0, NULL, 50, 7, TFS_CODEC_ZSTD, 3);
	text = serialize_manifest(&m, &len);
	tfs_manifest_free(&m);
	/* Any cut inside the column, short of its complete "end", is rejected. */
	body = (size_t)(strstr(text, "column x") - text);
	for (size_t n = body + 1; n < len - 1; n++) {
		struct tfs_manifest back;
		char *copy = malloc(n), err[256] = "";
		int rc;

		assert_non_null(copy);
		memcpy(copy, text, n);
		rc = tfs_manifest_parse(copy, n, &back, err, sizeof(err));
		if (rc != -EIO)
			fail_msg("cut at %zu of %zu gave %d", n, len, rc);
		free(copy);
	}
	/* Header lines cut short. */
	assert_manifest_rejected("", "empty text");
	assert_manifest_rejected("tensorfs-manifest 1\n", "no rows line");
	assert_manifest_rejected("tensorfs-manifest 1\nro", "cut rows line");
	assert_manifest_rejected("tensorfs-manif", "cut magic");
	free(text);
}

static void test_manifest_parse_rejects_other_damage(void **state)
{
	static const struct {
		const char *from, *to;
	} edits[] = {
		{ "tensorfs-manifest 1", "tensorfs-manifesto 1" },
		{ "tensorfs-manifest 1", "tensorfs-commit 1" },
		{ "row_bytes 12", "row_bytes 13" },
		{ "row_bytes 12", "row_bytes 12 x" },
		{ "rows_per_chunk 4", "rows_per_chunk 0" },
		{ "rows_per_chunk 4", "rows_per_chunk four" },
		{ "shape 3", "shape 3x" },
		{ "codec zstd 3", "codec lz4 3" },
		{ "codec zstd 3", "codec zstd" },
		{ "chunks 3", "chunks" },
		{ "\nend\n", "\nfin\n" },
		{ "\nend\n", "\n" },
	};
	char *text = sample_manifest_text();

	(void)state;
	for (size_t i = 0; i < sizeof(edits) / sizeof(edits[0]); i++) {
		char *t = replace(text, edits[i].from, edits[i].to), why[128];

		snprintf(why, sizeof(why), "'%s' -> '%s'", edits[i].from, edits[i].to);
		assert_manifest_rejected(t, why);
		free(t);
	}
	/* A chunk id that is not 64 hex digits. */
	{
		char *p = strstr(text, "chunks 3\n") + 9, *t = strdup(text);

		assert_non_null(t);
		t[p - text + 10] = 'g';
		assert_manifest_rejected(t, "non-hex chunk id");
		memcpy(t, text, strlen(text) + 1);
		t[p - text + 63] = ' '; /* 63 digits */
		assert_manifest_rejected(t, "short chunk id");
		free(t);
	}
	free(text);
}

/* A line too long for the parser's line buffer is damage, not the end of the text: nothing after
 * it may be silently dropped. */
static void test_manifest_parse_rejects_overlong_line(void **state)
{
	char *text = sample_manifest_text(), big[600], *t, *u;
	int rc[3];

	(void)state;
	memset(big, 'a', sizeof(big) - 1);
	big[sizeof(big) - 1] = 0;
	memcpy(big, "column ", 7);
	/* In place of the first column line: the whole manifest would read as no columns. */
	t = replace(text, "column x", big);
	rc[0] = manifest_parse_rc(t);
	free(t);
	/* Between the columns: column y would be dropped. */
	u = malloc(sizeof(big) + 16);
	assert_non_null(u);
	snprintf(u, sizeof(big) + 16, "end\n%s\ncolumn y", big);
	t = replace(text, "end\ncolumn y", u);
	free(u);
	rc[1] = manifest_parse_rc(t);
	free(t);
	/* After the last column. */
	t = malloc(strlen(text) + sizeof(big) + 1);
	assert_non_null(t);
	snprintf(t, strlen(text) + sizeof(big) + 1, "%s%s\n", text, big);
	rc[2] = manifest_parse_rc(t);
	free(t);
	free(text);
	if (rc[0] != -EIO || rc[1] != -EIO || rc[2] != -EIO)
		fail_msg("over-long line as first column line / between columns / at the end: "
			 "%d / %d / %d, want -EIO each",
			 rc[0], rc[1], rc[2]);
}

/* A version-2 manifest: a text column (3 rows, 11 data bytes in two listed chunks), a ragged
 * uint8 rank-3 column (2 rows) and a fixed one. */

/* --- main ----------------------------------------------------------------------------------- */

static int group_setup(void **state)
{
	(void)state;
	return tmpdir_make("manifest");
}

static int group_teardown(void **state)
{
	(void)state;
	return tmpdir_remove();
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_manifest_round_trip),
		cmocka_unit_test(test_manifest_round_trip_empty_and_zero_rows),
		cmocka_unit_test(test_manifest_round_trip_max_dims),
		cmocka_unit_test(test_manifest_parse_many_chunks),
		cmocka_unit_test(test_manifest_parse_rejects_wrong_chunk_count),
		cmocka_unit_test(test_manifest_parse_rejects_column_rows_mismatch),
		cmocka_unit_test(test_manifest_parse_rejects_bad_dtype),
		cmocka_unit_test(test_manifest_parse_rejects_duplicate_columns),
		cmocka_unit_test(test_manifest_parse_rejects_invalid_column_names),
		cmocka_unit_test(test_manifest_parse_rejects_truncated_text),
		cmocka_unit_test(test_manifest_parse_rejects_other_damage),
		cmocka_unit_test(test_manifest_parse_rejects_overlong_line),
	};

	if (getenv("TFS_TEST_FILTER"))
		cmocka_set_test_filter(getenv("TFS_TEST_FILTER"));
	return cmocka_run_group_tests_name("manifest", tests, group_setup, group_teardown);
}
