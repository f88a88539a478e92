/* SPDX-License-Identifier: MIT */
/* Unit tests for core/format's manifests: the column kinds (ragged, text, bytes, listed chunks),
 * their end-of-document tokens and classes, newer versions, and deep copies of columns. */
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

static const char kinds_text[] =
	"tensorfs-manifest 2\nrows 3\n"
	"column caption\nkind text\ndtype |u1\nndim 0\nrows 3\ntext_bytes 14\nend\n"
	"column caption/data\npart data\ndtype |u1\nshape\nrow_bytes 1\nrows 11\n"
	"rows_per_chunk 0\nchunk_bytes 8\ncodec zstd 3\nchunks 2\n"
	"1111111111111111111111111111111111111111111111111111111111111111 60 5\n"
	"2222222222222222222222222222222222222222222222222222222222222222 60 6\nend\n"
	"column caption/offsets\npart offsets\ndtype <u8\nshape\nrow_bytes 8\nrows 4\n"
	"rows_per_chunk 512\nchunk_bytes 4096\ncodec zstd 3\nchunks 1\n"
	"3333333333333333333333333333333333333333333333333333333333333333 80\nend\n"
	"column img\nkind ragged\ndtype |u1\nndim 3\nrows 3\nend\n"
	"column img/data\npart data\ndtype |u1\nshape\nrow_bytes 1\nrows 100\n"
	"rows_per_chunk 0\nchunk_bytes 64\ncodec raw 0\nchunks 1\n"
	"4444444444444444444444444444444444444444444444444444444444444444 148 100\nend\n"
	"column img/offsets\npart offsets\ndtype <u8\nshape\nrow_bytes 8\nrows 4\n"
	"rows_per_chunk 512\nchunk_bytes 4096\ncodec raw 0\nchunks 1\n"
	"5555555555555555555555555555555555555555555555555555555555555555 80\nend\n"
	"column img/shapes\npart shapes\ndtype <i8\nshape 3\nrow_bytes 24\nrows 3\n"
	"rows_per_chunk 170\nchunk_bytes 4096\ncodec raw 0\nchunks 1\n"
	"6666666666666666666666666666666666666666666666666666666666666666 120\nend\n"
	"column y\ndtype <i8\nshape\nrow_bytes 8\nrows 3\nrows_per_chunk 4\nchunk_bytes 32\n"
	"codec raw 0\nchunks 1\n"
	"7777777777777777777777777777777777777777777777777777777777777777 72\nend\n";

static void test_manifest_kinds_round_trip(void **state)
{
	struct tfs_manifest m;
	struct tfs_buf out = { 0 };
	char err[256];
	const struct tfs_column *cap, *data, *img;

	(void)state;
	assert_int_equal(parse_text(kinds_text, &m, err, sizeof(err)), 0);
	assert_int_equal(m.ncols, 8);
	cap = tfs_manifest_column(&m, "caption");
	img = tfs_manifest_column(&m, "img");
	assert_non_null(cap);
	assert_non_null(img);
	assert_int_equal(cap->kind, TFS_COL_TEXT);
	assert_int_equal(cap->text_bytes, 14);
	assert_int_equal(img->kind, TFS_COL_RAGGED);
	assert_int_equal(img->ndim, 3);
	assert_int_equal(img->shapes, 6);
	data = &m.cols[cap->data];
	assert_int_equal(data->part, TFS_PART_DATA);
	assert_string_equal(m.cols[cap->offsets].name, "caption/offsets");
	/* Listed chunks: rows 0-4 in chunk 0, 5-10 in chunk 1. */
	assert_int_equal(tfs_column_chunk_of(data, 0), 0);
	assert_int_equal(tfs_column_chunk_of(data, 4), 0);
	assert_int_equal(tfs_column_chunk_of(data, 5), 1);
	assert_int_equal(tfs_column_chunk_of(data, 10), 1);
	assert_int_equal(tfs_column_chunk_first(data, 1), 5);
	assert_int_equal(tfs_column_chunk_rows(data, 1), 6);
	assert_int_equal(tfs_column_max_chunk_bytes(data), 6);
	/* Uniform chunks answer the same questions. */
	assert_int_equal(tfs_column_chunk_of(&m.cols[7], 2), 0);
	assert_int_equal(tfs_column_chunk_rows(&m.cols[7], 0), 3);
	/* Written back byte for byte. */
	assert_int_equal(tfs_manifest_serialize(&m, &out), 0);
	assert_int_equal(out.len, strlen(kinds_text));
	assert_memory_equal(out.data, kinds_text, out.len);
	tfs_buf_free(&out);
	tfs_manifest_free(&m);
}

/* A version-4 token column: ragged uint16 of rank 1 with its end-of-document id. */
static const char eos_text[] =
	"tensorfs-manifest 4\nrows 2\n"
	"column tok\nkind ragged\ndtype <u2\nndim 1\nrows 2\neos 7\nend\n"
	"column tok/data\npart data\ndtype |u1\nshape\nrow_bytes 1\nrows 6\n"
	"rows_per_chunk 0\nchunk_bytes 64\ncodec raw 0\nchunks 1\n"
	"4444444444444444444444444444444444444444444444444444444444444444 54 6\nend\n"
	"column tok/offsets\npart offsets\ndtype <u8\nshape\nrow_bytes 8\nrows 3\n"
	"rows_per_chunk 512\nchunk_bytes 4096\ncodec raw 0\nchunks 1\n"
	"5555555555555555555555555555555555555555555555555555555555555555 72\nend\n"
	"column tok/shapes\npart shapes\ndtype <i8\nshape 1\nrow_bytes 8\nrows 2\n"
	"rows_per_chunk 512\nchunk_bytes 4096\ncodec raw 0\nchunks 1\n"
	"6666666666666666666666666666666666666666666666666666666666666666 64\nend\n";

static void test_manifest_eos(void **state)
{
	static const char *const bad[][2] = {
		{ "tensorfs-manifest 4", "tensorfs-manifest 3" }, /* eos needs version 4 */
		{ "eos 7", "eos 65536" },			  /* more than uint16 holds */
		{ "eos 7", "eos -1" },
		{ "eos 7", "eos 7 8" },
	};
	struct tfs_manifest m;
	struct tfs_buf out = { 0 };
	char err[256], *t;

	(void)state;
	assert_int_equal(parse_text(eos_text, &m, err, sizeof(err)), 0);
	assert_true(m.cols[0].has_eos);
	assert_int_equal(m.cols[0].eos, 7);
	/* Written back byte for byte; without the id, at the older version. */
	assert_int_equal(tfs_manifest_serialize(&m, &out), 0);
	assert_int_equal(out.len, strlen(eos_text));
	assert_memory_equal(out.data, eos_text, out.len);
	tfs_buf_free(&out);
	m.cols[0].has_eos = 0;
	assert_int_equal(tfs_manifest_serialize(&m, &out), 0);
	assert_non_null(strstr((char *)out.data, "tensorfs-manifest 2\n"));
	assert_null(strstr((char *)out.data, "eos"));
	tfs_buf_free(&out);
	tfs_manifest_free(&m);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		t = replace(eos_text, bad[i][0], bad[i][1]);
		if (parse_text(t, &m, err, sizeof(err)) != -EIO)
			fail_msg("'%s' for '%s' was taken", bad[i][1], bad[i][0]);
		free(t);
	}
	/* Only on a token column: not on text, nor on ragged tensors of rank 3. */
	t = replace(kinds_text, "text_bytes 14\nend", "text_bytes 14\neos 1\nend");
	t[strlen("tensorfs-manifest ")] = '4';
	assert_int_equal(parse_text(t, &m, err, sizeof(err)), -EIO);
	free(t);
	t = replace(kinds_text, "ndim 3\nrows 3\nend", "ndim 3\nrows 3\neos 1\nend");
	t[strlen("tensorfs-manifest ")] = '4';
	assert_int_equal(parse_text(t, &m, err, sizeof(err)), -EIO);
	free(t);
}

static void test_manifest_kinds_rejected(void **state)
{
	static const char *const bad[][2] = {
		/* kinds need version 2 */
		{ "tensorfs-manifest 2", "tensorfs-manifest 1" },
		/* a part missing: the ragged column's shapes */
		{ "column img/shapes\npart shapes", "column img/shapez\npart shapes" },
		/* listed chunks that do not add up to the rows */
		{ " 60 6\n", " 60 5\n" },
		/* an empty listed chunk */
		{ " 60 5\n", " 60 0\n" },
		/* listed chunks on a column that is no data part */
		{ "rows 4\nrows_per_chunk 512\nchunk_bytes 4096\ncodec zstd 3",
		  "rows 4\nrows_per_chunk 0\nchunk_bytes 4096\ncodec zstd 3" },
		/* offsets of another row count */
		{ "row_bytes 8\nrows 4\nrows_per_chunk 512\nchunk_bytes 4096\ncodec zstd",
		  "row_bytes 8\nrows 5\nrows_per_chunk 512\nchunk_bytes 4096\ncodec zstd" },
		/* an unknown kind, a text column of another dtype, a ragged one of rank 0 */
		{ "kind text", "kind video" },
		{ "kind text\ndtype |u1", "kind text\ndtype <i4" },
		{ "kind ragged\ndtype |u1\nndim 3", "kind ragged\ndtype |u1\nndim 0" },
		/* a part named for no column */
		{ "column caption/data\npart data", "column other/data\npart data" },
	};
	struct tfs_manifest m;
	char err[256];

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char *t = replace(kinds_text, bad[i][0], bad[i][1]);

		if (parse_text(t, &m, err, sizeof(err)) != -EIO)
			fail_msg("case %zu parsed: %s -> %s", i, bad[i][0], bad[i][1]);
		free(t);
	}
}

/* A fixed column whose chunks are listed (as a commit of parts makes them) is written as version
 * 3, round-trips with its geometry, and is malformed in a version 1 or 2 text. */
static void test_manifest_listed_fixed_is_v3(void **state)
{
	static const uint64_t shape[] = { 3 };
	struct tfs_manifest m, back;
	char *text, *t, err[256] = "";
	size_t len;

	(void)state;
	make_manifest(&m, 10, 1);
	make_column(&m.cols[0], "x", "<f4", 1, shape, 10, 4, TFS_CODEC_ZSTD, 3);
	text = serialize_manifest(&m, &len);
	assert_non_null(strstr(text, "tensorfs-manifest 1\n"));
	free(text);
	/* Chunks of 4, 3 and 3 rows: what uniform geometry cannot say. */
	m.cols[0].rows_per_chunk = 0;
	m.cols[0].chunk_end = calloc(3, sizeof(uint64_t));
	assert_non_null(m.cols[0].chunk_end);
	m.cols[0].chunk_end[0] = 4;
	m.cols[0].chunk_end[1] = 7;
	m.cols[0].chunk_end[2] = 10;
	text = serialize_manifest(&m, &len);
	assert_non_null(strstr(text, "tensorfs-manifest 3\n"));
	assert_int_equal(parse_text(text, &back, err, sizeof(err)), 0);
	assert_int_equal(back.cols[0].rows_per_chunk, 0);
	assert_int_equal(tfs_column_chunk_of(&back.cols[0], 6), 1);
	assert_int_equal(tfs_column_chunk_of(&back.cols[0], 7), 2);
	assert_int_equal(tfs_column_chunk_first(&back.cols[0], 2), 7);
	assert_int_equal(tfs_column_chunk_rows(&back.cols[0], 0), 4);
	tfs_manifest_free(&back);
	t = replace(text, "tensorfs-manifest 3", "tensorfs-manifest 1");
	assert_int_equal(parse_text(t, &back, err, sizeof(err)), -EIO);
	free(t);
	/* Listed counts must add up to the rows. */
	t = replace(text, " 3\nend", " 2\nend");
	assert_int_equal(parse_text(t, &back, err, sizeof(err)), -EIO);
	free(t);
	free(text);
	tfs_manifest_free(&m);
}

static void test_manifest_parse_newer_version_is_eproto(void **state)
{
	char *text = sample_manifest_text(), *t, err[256] = "";
	struct tfs_manifest m;

	(void)state;
	t = replace(text, "tensorfs-manifest 1", "tensorfs-manifest 5");
	assert_int_equal(parse_text(t, &m, err, sizeof(err)), -EPROTO);
	assert_true(err[0] != 0);
	free(t);
	t = replace(text, "tensorfs-manifest 1", "tensorfs-manifest 4000000000");
	assert_int_equal(parse_text(t, &m, err, sizeof(err)), -EPROTO);
	free(t);
	free(text);
}

static void test_manifest_classes(void **state)
{
	static const uint64_t shape[] = { 2 };
	char *const names[] = { "a b", "back\\slash", "two\nlines\r", "", "z" };
	char *const other[] = { "a b", "cat" };
	struct tfs_manifest m, back;
	struct tfs_column copy;
	char *text, *t, err[256] = "";
	size_t len;

	(void)state;
	make_manifest(&m, 10, 2);
	make_column(&m.cols[0], "label", "<i8", 0, NULL, 10, 4, TFS_CODEC_ZSTD, 3);
	make_column(&m.cols[1], "x", "<f4", 1, shape, 10, 4, TFS_CODEC_ZSTD, 3);
	/* A column that held no rows takes the names. */
	assert_int_equal(tfs_column_classes_merge(&m.cols[0], 0, names, 3, err, sizeof(err)), 0);
	assert_int_equal(m.cols[0].nclasses, 3);
	/* The same names again, or the column's followed by more: kept, extended. */
	assert_int_equal(tfs_column_classes_merge(&m.cols[0], 10, names, 3, err, sizeof(err)), 0);
	assert_int_equal(tfs_column_classes_merge(&m.cols[0], 10, names, 5, err, sizeof(err)), 0);
	assert_int_equal(m.cols[0].nclasses, 5);
	/* Others, or fewer: refused, the column unchanged. */
	assert_int_equal(tfs_column_classes_merge(&m.cols[0], 10, other, 2, err, sizeof(err)),
			 -EINVAL);
	assert_non_null(strstr(err, "'back\\slash' there, 'cat' here"));
	assert_int_equal(tfs_column_classes_merge(&m.cols[0], 10, names, 2, err, sizeof(err)),
			 -EINVAL);
	assert_int_equal(m.cols[0].nclasses, 5);
	/* A column that held rows without names keeps none. */
	assert_int_equal(tfs_column_classes_merge(&m.cols[1], 10, names, 2, err, sizeof(err)), 0);
	assert_int_equal(m.cols[1].nclasses, 0);

	/* Written as version 4, a name a line, escaped; read back the same. */
	text = serialize_manifest(&m, &len);
	assert_non_null(strstr(text, "tensorfs-manifest 4\n"));
	assert_non_null(strstr(text, "classes 5\na b\nback\\\\slash\ntwo\\nlines\\r\n\nz\nend\n"));
	assert_int_equal(parse_text(text, &back, err, sizeof(err)), 0);
	assert_manifests_equal(&m, &back);
	assert_int_equal(back.cols[0].nclasses, 5);
	for (size_t k = 0; k < 5; k++)
		assert_string_equal(back.cols[0].classes[k], names[k]);
	assert_int_equal(back.cols[1].nclasses, 0);
	/* A deep copy. */
	assert_int_equal(tfs_column_copy(&copy, &back.cols[0]), 0);
	tfs_manifest_free(&back);
	assert_int_equal(copy.nclasses, 5);
	assert_string_equal(copy.classes[2], "two\nlines\r");
	tfs_column_free(&copy);

	/* Damage: names in an older version, a bad escape, fewer lines than counted, none. */
	t = replace(text, "tensorfs-manifest 4", "tensorfs-manifest 3");
	assert_int_equal(parse_text(t, &back, err, sizeof(err)), -EIO);
	free(t);
	t = replace(text, "two\\nlines", "two\\tlines");
	assert_int_equal(parse_text(t, &back, err, sizeof(err)), -EIO);
	free(t);
	t = replace(text, "classes 5", "classes 6");
	assert_int_equal(parse_text(t, &back, err, sizeof(err)), -EIO);
	free(t);
	t = replace(text, "classes 5", "classes 0");
	assert_int_equal(parse_text(t, &back, err, sizeof(err)), -EIO);
	free(t);
	t = replace(text, "classes 5", "classes 99999999999999999999");
	assert_int_equal(parse_text(t, &back, err, sizeof(err)), -EIO);
	free(t);
	/* A bare carriage return is not how a name is written (it would come back longer). */
	t = replace(text, "\nz\nend", "\nz\rz\nend");
	assert_int_equal(parse_text(t, &back, err, sizeof(err)), -EIO);
	free(t);
	free(text);
	{
		/* A name whose escaped line would not fit a manifest line: refused. */
		char big[700], *const longer[] = { big };

		memset(big, '\n', sizeof(big) - 1);
		big[sizeof(big) - 1] = 0;
		assert_int_equal(
			tfs_column_classes_merge(&m.cols[1], 0, longer, 1, err, sizeof(err)),
			-EINVAL);
		assert_non_null(strstr(err, "a class name of 699 bytes"));
	}
	/* Only on an integer column of scalars. */
	tfs_column_free(&m.cols[0]);
	make_column(&m.cols[0], "label", "<f8", 0, NULL, 10, 4, TFS_CODEC_ZSTD, 3);
	assert_int_equal(tfs_column_classes_merge(&m.cols[0], 0, names, 1, err, sizeof(err)), 0);
	text = serialize_manifest(&m, &len);
	assert_int_equal(parse_text(text, &back, err, sizeof(err)), -EIO);
	free(text);
	tfs_manifest_free(&m);
}

static void test_column_copy_is_deep(void **state)
{
	static const uint64_t shape[] = { 4, 4 };
	struct tfs_column a, b;

	(void)state;
	make_column(&a, "orig", "<f4", 2, shape, 10, 3, TFS_CODEC_ZSTD, 5);
	assert_int_equal(tfs_column_copy(&b, &a), 0);
	assert_columns_equal(&a, &b);
	assert_ptr_not_equal(a.name, b.name);
	assert_ptr_not_equal(a.chunks, b.chunks);
	tfs_column_free(&a);
	/* The copy lives on after the original is gone. */
	assert_string_equal(b.name, "orig");
	assert_int_equal(b.nchunks, 4);
	tfs_column_free(&b);
	assert_null(b.name);
	assert_null(b.chunks);
}

/* --- main ----------------------------------------------------------------------------------- */

static int group_setup(void **state)
{
	(void)state;
	return tmpdir_make("manifest_kinds");
}

static int group_teardown(void **state)
{
	(void)state;
	return tmpdir_remove();
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_manifest_parse_newer_version_is_eproto),
		cmocka_unit_test(test_manifest_listed_fixed_is_v3),
		cmocka_unit_test(test_manifest_kinds_round_trip),
		cmocka_unit_test(test_manifest_kinds_rejected),
		cmocka_unit_test(test_manifest_eos),
		cmocka_unit_test(test_manifest_classes),
		cmocka_unit_test(test_column_copy_is_deep),
	};

	if (getenv("TFS_TEST_FILTER"))
		cmocka_set_test_filter(getenv("TFS_TEST_FILTER"));
	return cmocka_run_group_tests_name("manifest_kinds", tests, group_setup, group_teardown);
}
