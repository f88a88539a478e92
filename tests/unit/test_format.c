/* SPDX-License-Identifier: MIT */
/* Unit tests for core/format on a real file:// lake, plus tfs_url_split and util's size/names. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "format.h"
#include "object.h"
#include "store.h"
#include "util.h"
/* The group's scratch directory (tmpdir); each store test opens its own lake below it. */
#include "tmpdir_fixture.h"

/* --- helpers -------------------------------------------------------------------------------- */

static struct tfs_dtype dtype_of(const char *descr)
{
	struct tfs_dtype dt;
	int big;
	char err[128];

	assert_int_equal(tfs_dtype_parse(descr, &dt, &big, err, sizeof(err)), 0);
	return dt;
}

static struct tfs_id id_from_seed(unsigned seed)
{
	char text[32];
	struct tfs_id id;

	snprintf(text, sizeof(text), "chunk-%u", seed);
	tfs_id_of(text, strlen(text), &id);
	return id;
}

/* Fill in a column with consistent fields and ceil(rows / rows_per_chunk) chunk refs. */
static void make_column(struct tfs_column *c, const char *name, const char *descr, unsigned ndim,
			const uint64_t *shape, uint64_t rows, uint64_t rows_per_chunk,
			enum tfs_codec_id codec, int level)
{
	memset(c, 0, sizeof(*c));
	c->name = strdup(name);
	assert_non_null(c->name);
	c->dtype = dtype_of(descr);
	c->ndim = ndim;
	c->row_bytes = c->dtype.itemsize;
	for (unsigned d = 0; d < ndim; d++) {
		c->shape[d] = shape[d];
		c->row_bytes *= shape[d];
	}
	c->rows = rows;
	c->rows_per_chunk = rows_per_chunk;
	c->chunk_bytes = TFS_DEFAULT_CHUNK_BYTES;
	c->codec = codec;
	c->level = level;
	c->nchunks = (size_t)((rows + rows_per_chunk - 1) / rows_per_chunk);
	c->chunks = calloc(c->nchunks ? c->nchunks : 1, sizeof(*c->chunks));
	assert_non_null(c->chunks);
	for (size_t k = 0; k < c->nchunks; k++) {
		c->chunks[k].id = id_from_seed((unsigned)(k * 31 + strlen(name)));
		c->chunks[k].stored_size = 48 + k * 1000 + 7;
	}
}

/* A manifest of rows rows with ncols columns; cols allocated, to be filled by the caller. */
static void make_manifest(struct tfs_manifest *m, uint64_t rows, size_t ncols)
{
	memset(m, 0, sizeof(*m));
	m->rows = rows;
	m->ncols = ncols;
	m->cols = calloc(ncols ? ncols : 1, sizeof(*m->cols));
	assert_non_null(m->cols);
}

static void assert_columns_equal(const struct tfs_column *a, const struct tfs_column *b)
{
	assert_string_equal(a->name, b->name);
	assert_string_equal(a->dtype.descr, b->dtype.descr);
	assert_int_equal(a->dtype.kind, b->dtype.kind);
	assert_int_equal(a->dtype.itemsize, b->dtype.itemsize);
	assert_int_equal(a->ndim, b->ndim);
	for (unsigned d = 0; d < a->ndim; d++)
		assert_int_equal(a->shape[d], b->shape[d]);
	assert_int_equal(a->row_bytes, b->row_bytes);
	assert_int_equal(a->rows, b->rows);
	assert_int_equal(a->rows_per_chunk, b->rows_per_chunk);
	assert_int_equal(a->chunk_bytes, b->chunk_bytes);
	assert_int_equal(a->codec, b->codec);
	assert_int_equal(a->level, b->level);
	assert_int_equal(a->nchunks, b->nchunks);
	for (size_t k = 0; k < a->nchunks; k++) {
		assert_true(tfs_id_eq(&a->chunks[k].id, &b->chunks[k].id));
		assert_int_equal(a->chunks[k].stored_size, b->chunks[k].stored_size);
	}
}

static void assert_manifests_equal(const struct tfs_manifest *a, const struct tfs_manifest *b)
{
	assert_int_equal(a->rows, b->rows);
	assert_int_equal(a->ncols, b->ncols);
	for (size_t i = 0; i < a->ncols; i++)
		assert_columns_equal(&a->cols[i], &b->cols[i]);
}

static char *serialize_manifest(const struct tfs_manifest *m, size_t *len)
{
	struct tfs_buf b = { 0 };

	assert_int_equal(tfs_manifest_serialize(m, &b), 0);
	return (char *)tfs_buf_take(&b, len);
}

static int parse_text(const char *text, struct tfs_manifest *m, char *err, size_t err_cap)
{
	/* An exact-size copy without a terminator: the parser must honour len. */
	size_t n = strlen(text);
	char *copy = malloc(n ? n : 1);
	int rc;

	assert_non_null(copy);
	memcpy(copy, text, n);
	rc = tfs_manifest_parse(copy, n, m, err, err_cap);
	free(copy);
	return rc;
}

/* Replace the first occurrence of `from` in text by `to` (into a new string). */
static char *replace(const char *text, const char *from, const char *to)
{
	const char *at = strstr(text, from);
	size_t n;
	char *out;

	if (!at)
		fail_msg("'%s' not found in the text", from);
	n = strlen(text) - strlen(from) + strlen(to);
	out = malloc(n + 1);
	assert_non_null(out);
	snprintf(out, n + 1, "%.*s%s%s", (int)(at - text), text, to, at + strlen(from));
	return out;
}

/* Parse text expected to be rejected with -EIO and a message. */
static void assert_manifest_rejected(const char *text, const char *why)
{
	struct tfs_manifest m;
	char err[256] = "";
	int rc = parse_text(text, &m, err, sizeof(err));

	if (rc == 0)
		tfs_manifest_free(&m);
	if (rc != -EIO)
		fail_msg("%s: parse gave %d, want -EIO", why, rc);
	if (!err[0])
		fail_msg("%s: rejected without a message", why);
	assert_int_equal(m.ncols, 0);
	assert_null(m.cols);
}

/* Parse text and return the result, freeing whatever was parsed. */
static int manifest_parse_rc(const char *text)
{
	struct tfs_manifest m;
	char err[256] = "";
	int rc = parse_text(text, &m, err, sizeof(err));

	if (rc == 0)
		tfs_manifest_free(&m);
	return rc;
}

/* A small valid manifest: two columns, 10 rows, 4 rows per chunk. */
static char *sample_manifest_text(void)
{
	static const uint64_t shape[] = { 3 };
	struct tfs_manifest m;
	char *text;
	size_t len;

	make_manifest(&m, 10, 2);
	make_column(&m.cols[0], "x", "<f4", 1, shape, 10, 4, TFS_CODEC_ZSTD, 3);
	make_column(&m.cols[1], "y", "<i8", 0, NULL, 10, 4, TFS_CODEC_RAW, 0);
	text = serialize_manifest(&m, &len);
	tfs_manifest_free(&m);
	return text;
}

static void open_lake(const char *name, struct tfs_store **s, char *path, size_t cap)
{
	char url[256];

	snprintf(path, cap, "%s/%s", tmpdir, name);
	snprintf(url, sizeof(url), "file://%s", path);
	assert_int_equal(tfs_store_open(url, TFS_STORE_CREATE, s), 0);
	assert_non_null(*s);
}

static int log_contains(const char *needle)
{
	FILE *f = fopen(logpath, "r");
	char line[2048];
	int found = 0;

	assert_non_null(f);
	while (!found && fgets(line, sizeof(line), f))
		found = strstr(line, needle) != NULL;
	fclose(f);
	return found;
}

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

/* --- a real file:// lake -------------------------------------------------------------------- */

static void test_dataset_create_and_check(void **state)
{
	struct tfs_store *s;
	char path[256];
	struct tfs_id head;
	struct tfs_commit c;
	struct tfs_manifest m;

	(void)state;
	open_lake("create", &s, path, sizeof(path));
	assert_int_equal(tfs_dataset_check(s, "ds"), -ENOENT);
	assert_int_equal(tfs_dataset_create(s, "ds"), 0);
	assert_int_equal(tfs_dataset_check(s, "ds"), 0);
	assert_int_equal(tfs_dataset_create(s, "ds"), -EEXIST);
	assert_int_equal(tfs_dataset_check(s, "ds"), 0);

	assert_int_equal(tfs_ref_read(s, "ds", TFS_REF_BRANCH, "main", &head), 0);
	assert_false(tfs_id_is_zero(&head));
	assert_int_equal(tfs_ref_read(s, "ds", TFS_REF_TAG, "main", &head), -ENOENT);
	assert_int_equal(tfs_ref_read(s, "ds", TFS_REF_BRANCH, "main", &head), 0);
	assert_int_equal(tfs_commit_load(s, "ds", &head, &c), 0);
	assert_true(tfs_id_eq(&c.id, &head));
	assert_int_equal(c.nparents, 0);
	assert_int_equal(c.rows, 0);
	assert_int_equal(tfs_manifest_load(s, "ds", &c.manifest, &m), 0);
	assert_int_equal(m.ncols, 0);
	assert_int_equal(m.rows, 0);
	tfs_manifest_free(&m);
	tfs_commit_free(&c);

	/* The marker is what the spec says. */
	{
		struct tfs_buf b = { 0 };

		assert_int_equal(tfs_store_get(s, "ds/tensorfs-dataset", &b), 0);
		assert_string_equal((char *)b.data, "tensorfs-dataset 1\n");
		tfs_buf_free(&b);
	}
	tfs_store_close(s);
}

static void test_dataset_create_rejects_invalid_names(void **state)
{
	static const char *const bad[] = { "", ".hidden", "-x", "a/b", "a b", "../up" };
	struct tfs_store *s;
	char path[256];

	(void)state;
	open_lake("badnames", &s, path, sizeof(path));
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_int_equal(tfs_dataset_create(s, bad[i]), -EINVAL);
	tfs_store_close(s);
}

static void test_dataset_check_newer_and_damaged_marker(void **state)
{
	static const char newer[] = "tensorfs-dataset 2\n", junk[] = "hello\n";
	struct tfs_store *s;
	char path[256];

	(void)state;
	open_lake("markers", &s, path, sizeof(path));
	assert_int_equal(tfs_store_put(s, "future/tensorfs-dataset", newer, sizeof(newer) - 1), 0);
	assert_int_equal(tfs_dataset_check(s, "future"), -EPROTO);
	assert_int_equal(tfs_dataset_create(s, "future"), -EPROTO);
	assert_int_equal(tfs_store_put(s, "junk/tensorfs-dataset", junk, sizeof(junk) - 1), 0);
	assert_int_equal(tfs_dataset_check(s, "junk"), -EIO);
	tfs_store_close(s);
}

static void test_ref_update_compare_and_swap(void **state)
{
	struct tfs_store *s;
	char path[256];
	struct tfs_id a, b, c, got;
	struct tfs_manifest empty = { 0 };

	(void)state;
	open_lake("cas", &s, path, sizeof(path));
	assert_int_equal(tfs_dataset_create(s, "ds"), 0);
	assert_int_equal(tfs_ref_read(s, "ds", TFS_REF_BRANCH, "main", &a), 0);
	assert_int_equal(tfs_commit_write(s, "ds", &empty, &a, "second", &b), 0);
	assert_int_equal(tfs_commit_write(s, "ds", &empty, &b, "third", &c), 0);
	assert_false(tfs_id_eq(&a, &b));

	/* The right old value moves the branch. */
	assert_int_equal(tfs_ref_update(s, "ds", TFS_REF_BRANCH, "main", &a, &b), 0);
	assert_int_equal(tfs_ref_read(s, "ds", TFS_REF_BRANCH, "main", &got), 0);
	assert_true(tfs_id_eq(&got, &b));
	/* A stale old value does not. */
	assert_int_equal(tfs_ref_update(s, "ds", TFS_REF_BRANCH, "main", &a, &c), -EAGAIN);
	assert_int_equal(tfs_ref_read(s, "ds", TFS_REF_BRANCH, "main", &got), 0);
	assert_true(tfs_id_eq(&got, &b));
	/* NULL old means "must not exist". */
	assert_int_equal(tfs_ref_update(s, "ds", TFS_REF_BRANCH, "main", NULL, &c), -EAGAIN);
	assert_int_equal(tfs_ref_read(s, "ds", TFS_REF_BRANCH, "main", &got), 0);
	assert_true(tfs_id_eq(&got, &b));
	/* A new branch with NULL old; then its old value must be given. */
	assert_int_equal(tfs_ref_update(s, "ds", TFS_REF_BRANCH, "exp", NULL, &c), 0);
	assert_int_equal(tfs_ref_read(s, "ds", TFS_REF_BRANCH, "exp", &got), 0);
	assert_true(tfs_id_eq(&got, &c));
	assert_int_equal(tfs_ref_update(s, "ds", TFS_REF_BRANCH, "exp", NULL, &a), -EAGAIN);
	/* A missing branch with a non-NULL old. */
	assert_int_equal(tfs_ref_update(s, "ds", TFS_REF_BRANCH, "nope", &a, &b), -EAGAIN);
	assert_int_equal(tfs_ref_read(s, "ds", TFS_REF_BRANCH, "nope", &got), -ENOENT);
	/* Tags live apart from branches. */
	assert_int_equal(tfs_ref_update(s, "ds", TFS_REF_TAG, "v1", NULL, &a), 0);
	assert_int_equal(tfs_ref_read(s, "ds", TFS_REF_TAG, "v1", &got), 0);
	assert_true(tfs_id_eq(&got, &a));
	assert_int_equal(tfs_ref_read(s, "ds", TFS_REF_BRANCH, "v1", &got), -ENOENT);
	/* Bad names. */
	assert_int_equal(tfs_ref_update(s, "ds", TFS_REF_BRANCH, "a/b", NULL, &a), -EINVAL);
	assert_int_equal(tfs_ref_update(s, "ds", TFS_REF_BRANCH, ".x", NULL, &a), -EINVAL);

	/* The ref file is "<hex>\n". */
	{
		struct tfs_buf buf = { 0 };
		char hex[TFS_ID_HEX];

		tfs_id_hex(&b, hex);
		assert_int_equal(tfs_store_get(s, "ds/refs/heads/main", &buf), 0);
		assert_int_equal(buf.len, TFS_ID_HEX);
		assert_memory_equal(buf.data, hex, TFS_ID_HEX - 1);
		assert_int_equal(buf.data[TFS_ID_HEX - 1], '\n');
		tfs_buf_free(&buf);
	}
	tfs_store_close(s);
}

struct name_list {
	char names[16][160];
	int n;
};

static int collect_name(void *arg, const char *name, int is_dir)
{
	struct name_list *l = arg;

	assert_true(is_dir);
	assert_true(l->n < 16);
	snprintf(l->names[l->n++], sizeof(l->names[0]), "%s", name);
	return 0;
}

static int list_has(const struct name_list *l, const char *name)
{
	for (int i = 0; i < l->n; i++)
		if (!strcmp(l->names[i], name))
			return 1;
	return 0;
}

static int stop_at_first(void *arg, const char *name, int is_dir)
{
	(void)name;
	(void)is_dir;
	++*(int *)arg;
	return 42;
}

static void test_lake_list_lists_only_datasets(void **state)
{
	struct tfs_store *s;
	char path[256], p[512];
	struct name_list l = { .n = 0 };
	int calls = 0;
	FILE *f;

	(void)state;
	open_lake("listing", &s, path, sizeof(path));
	assert_int_equal(tfs_dataset_list(s, collect_name, &l), 0);
	assert_int_equal(l.n, 0);

	assert_int_equal(tfs_dataset_create(s, "alpha"), 0);
	assert_int_equal(tfs_dataset_create(s, "beta.v2"), 0);
	/* Things that are not datasets: a plain directory, a directory holding objects but no
	 * marker, a hidden directory, a regular file. */
	snprintf(p, sizeof(p), "%s/random_dir", path);
	assert_int_equal(mkdir(p, 0755), 0);
	snprintf(p, sizeof(p), "%s/.hidden", path);
	assert_int_equal(mkdir(p, 0755), 0);
	snprintf(p, sizeof(p), "%s/a_file", path);
	f = fopen(p, "w");
	assert_non_null(f);
	fputs("tensorfs-dataset 1\n", f);
	fclose(f);
	{
		struct tfs_id id;

		assert_int_equal(
			tfs_object_put(s, "halfmade", TFS_OBJ_CHUNK, TFS_CODEC_RAW, 0, "x", 1, &id),
			0);
	}

	assert_int_equal(tfs_dataset_list(s, collect_name, &l), 0);
	assert_int_equal(l.n, 2);
	assert_true(list_has(&l, "alpha"));
	assert_true(list_has(&l, "beta.v2"));

	/* A non-zero return from the callback stops the listing and is returned. */
	assert_int_equal(tfs_dataset_list(s, stop_at_first, &calls), 42);
	assert_int_equal(calls, 1);
	tfs_store_close(s);
}

static int collect_ref(void *arg, const char *name, int is_dir)
{
	struct name_list *l = arg;

	assert_false(is_dir);
	assert_true(l->n < 16);
	snprintf(l->names[l->n++], sizeof(l->names[0]), "%s", name);
	return 0;
}

static void test_ref_list(void **state)
{
	struct tfs_store *s;
	char path[256];
	struct tfs_id main_id;
	struct name_list heads = { .n = 0 }, tags = { .n = 0 };

	(void)state;
	open_lake("reflist", &s, path, sizeof(path));
	assert_int_equal(tfs_dataset_create(s, "ds"), 0);
	assert_int_equal(tfs_ref_read(s, "ds", TFS_REF_BRANCH, "main", &main_id), 0);
	assert_int_equal(tfs_ref_list(s, "ds", TFS_REF_BRANCH, collect_ref, &heads), 0);
	assert_int_equal(heads.n, 1);
	assert_true(list_has(&heads, "main"));
	assert_int_equal(tfs_ref_list(s, "ds", TFS_REF_TAG, collect_ref, &tags), 0);
	assert_int_equal(tags.n, 0); /* no tag yet: an empty list, not an error */

	assert_int_equal(tfs_ref_update(s, "ds", TFS_REF_BRANCH, "dev", NULL, &main_id), 0);
	assert_int_equal(tfs_ref_update(s, "ds", TFS_REF_TAG, "v1.0", NULL, &main_id), 0);
	heads.n = tags.n = 0;
	/* The writers' lock files are not refs. */
	assert_int_equal(tfs_ref_list(s, "ds", TFS_REF_BRANCH, collect_ref, &heads), 0);
	assert_int_equal(heads.n, 2);
	assert_true(list_has(&heads, "main"));
	assert_true(list_has(&heads, "dev"));
	assert_int_equal(tfs_ref_list(s, "ds", TFS_REF_TAG, collect_ref, &tags), 0);
	assert_int_equal(tags.n, 1);
	assert_true(list_has(&tags, "v1.0"));
	tfs_store_close(s);
}

static void test_object_put_get_round_trip(void **state)
{
	static const enum tfs_obj_type types[] = { TFS_OBJ_CHUNK, TFS_OBJ_MANIFEST,
						   TFS_OBJ_COMMIT };
	struct tfs_store *s;
	char path[256];
	uint8_t data[10000];

	(void)state;
	open_lake("objects", &s, path, sizeof(path));
	for (size_t i = 0; i < sizeof(data); i++)
		data[i] = (uint8_t)("abcdefgh"[i % 8] + (i / 1000));
	for (size_t t = 0; t < 3; t++) {
		for (int codec = TFS_CODEC_RAW; codec <= TFS_CODEC_ZSTD; codec++) {
			struct tfs_id id, id2, want;
			struct tfs_buf enc = { 0 };
			char key[TFS_KEY_MAX], hex[TFS_ID_HEX], file[800];
			uint8_t *raw = NULL;
			size_t len = 0;
			struct stat sb;

			assert_int_equal(tfs_object_put(s, "ds", types[t], (enum tfs_codec_id)codec,
							3, data, sizeof(data), &id),
					 0);
			/* The id is the SHA-256 of the encoded object. */
			assert_int_equal(tfs_object_encode(types[t], (enum tfs_codec_id)codec, 3,
							   data, sizeof(data), &enc),
					 0);
			tfs_id_of(enc.data, enc.len, &want);
			assert_true(tfs_id_eq(&id, &want));
			/* Its key is ds/objects/<2 hex>/<62 hex>. */
			tfs_object_key("ds", &id, key);
			tfs_id_hex(&id, hex);
			assert_memory_equal(key, "ds/objects/", 11);
			assert_memory_equal(key + 11, hex, 2);
			assert_int_equal(key[13], '/');
			assert_string_equal(key + 14, hex + 2);
			snprintf(file, sizeof(file), "%s/%s", path, key);
			assert_int_equal(stat(file, &sb), 0);
			assert_int_equal(sb.st_size, enc.len);

			assert_int_equal(tfs_object_get(s, "ds", &id, types[t], &raw, &len), 0);
			assert_int_equal(len, sizeof(data));
			assert_memory_equal(raw, data, sizeof(data));
			assert_int_equal(raw[len], 0);
			free(raw);

			/* Putting it again is harmless and gives the same id. */
			assert_int_equal(tfs_object_put(s, "ds", types[t], (enum tfs_codec_id)codec,
							3, data, sizeof(data), &id2),
					 0);
			assert_true(tfs_id_eq(&id, &id2));
			/* Asking for another type fails. */
			assert_int_equal(
				tfs_object_get(s, "ds", &id, types[(t + 1) % 3], &raw, &len), -EIO);
			tfs_buf_free(&enc);
		}
	}
	/* An object that is not there. */
	{
		struct tfs_id missing = id_from_seed(99);
		uint8_t *raw;
		size_t len;

		assert_int_equal(tfs_object_get(s, "ds", &missing, TFS_OBJ_CHUNK, &raw, &len),
				 -ENOENT);
	}
	tfs_store_close(s);
}

static void rewrite_file(const char *file, const void *data, size_t len)
{
	int fd = open(file, O_WRONLY | O_TRUNC | O_CLOEXEC);

	assert_true(fd >= 0);
	assert_int_equal(tfs_write_full(fd, data, len), 0);
	close(fd);
}

static void test_object_get_detects_corruption(void **state)
{
	struct tfs_store *s;
	char path[256], key[TFS_KEY_MAX], file[800], hex[TFS_ID_HEX];
	struct tfs_id id;
	struct tfs_buf orig = { 0 };
	uint8_t *raw = NULL;
	size_t len;
	static const char text[] = "a small manifest-like object, stored for the test\n";

	(void)state;
	open_lake("corrupt", &s, path, sizeof(path));
	assert_int_equal(tfs_object_put(s, "ds", TFS_OBJ_MANIFEST, TFS_CODEC_RAW, 0, text,
					sizeof(text) - 1, &id),
			 0);
	tfs_object_key("ds", &id, key);
	tfs_id_hex(&id, hex);
	snprintf(file, sizeof(file), "%s/%s", path, key);
	assert_int_equal(tfs_store_get(s, key, &orig), 0);
	/* Make sure the test may rewrite the stored file, whatever mode the store gave it. */
	assert_int_equal(chmod(file, 0644), 0);

	/* Flip one byte anywhere: header or payload. */
	for (size_t pos = 0; pos < orig.len; pos++) {
		uint8_t *bad = malloc(orig.len);

		assert_non_null(bad);
		memcpy(bad, orig.data, orig.len);
		bad[pos] ^= 0x04;
		rewrite_file(file, bad, orig.len);
		raw = NULL;
		if (tfs_object_get(s, "ds", &id, TFS_OBJ_MANIFEST, &raw, &len) != -EIO)
			fail_msg("flip at %zu not detected", pos);
		assert_null(raw);
		free(bad);
	}
	/* Truncated, empty and extended files. */
	rewrite_file(file, orig.data, orig.len - 1);
	assert_int_equal(tfs_object_get(s, "ds", &id, TFS_OBJ_MANIFEST, &raw, &len), -EIO);
	rewrite_file(file, orig.data, 0);
	assert_int_equal(tfs_object_get(s, "ds", &id, TFS_OBJ_MANIFEST, &raw, &len), -EIO);
	assert_int_equal(tfs_buf_append(&orig, "\n", 1), 0);
	rewrite_file(file, orig.data, orig.len);
	assert_int_equal(tfs_object_get(s, "ds", &id, TFS_OBJ_MANIFEST, &raw, &len), -EIO);
	/* The damage was logged, naming the object. */
	assert_true(log_contains(hex + 2));
	assert_true(log_contains("damaged"));

	/* Restored, it reads again. */
	rewrite_file(file, orig.data, orig.len - 1);
	assert_int_equal(tfs_object_get(s, "ds", &id, TFS_OBJ_MANIFEST, &raw, &len), 0);
	assert_memory_equal(raw, text, sizeof(text) - 1);
	free(raw);
	tfs_buf_free(&orig);
	tfs_store_close(s);
}

static void test_ref_resolve(void **state)
{
	struct tfs_store *s;
	char path[256], hex[TFS_ID_HEX], upper[TFS_ID_HEX];
	struct tfs_id main_id, got, other, chunk;
	struct tfs_manifest empty = { 0 };

	(void)state;
	open_lake("resolve", &s, path, sizeof(path));
	assert_int_equal(tfs_dataset_create(s, "ds"), 0);
	assert_int_equal(tfs_ref_read(s, "ds", TFS_REF_BRANCH, "main", &main_id), 0);
	assert_int_equal(tfs_commit_write(s, "ds", &empty, &main_id, "tagged", &other), 0);
	assert_int_equal(tfs_ref_update(s, "ds", TFS_REF_TAG, "v1", NULL, &other), 0);

	assert_int_equal(tfs_ref_resolve(s, "ds", "main", &got), 0);
	assert_true(tfs_id_eq(&got, &main_id));
	assert_int_equal(tfs_ref_resolve(s, "ds", "v1", &got), 0);
	assert_true(tfs_id_eq(&got, &other));

	/* A full commit id, in either case. */
	tfs_id_hex(&other, hex);
	assert_int_equal(tfs_ref_resolve(s, "ds", hex, &got), 0);
	assert_true(tfs_id_eq(&got, &other));
	for (int i = 0; i < TFS_ID_HEX; i++)
		upper[i] = (char)(hex[i] >= 'a' && hex[i] <= 'f' ? hex[i] - 'a' + 'A' : hex[i]);
	assert_int_equal(tfs_ref_resolve(s, "ds", upper, &got), 0);
	assert_true(tfs_id_eq(&got, &other));

	/* Unknown names, abbreviated ids and ids of nothing. */
	assert_int_equal(tfs_ref_resolve(s, "ds", "nope", &got), -ENOENT);
	assert_int_equal(tfs_ref_resolve(s, "ds", "a/b", &got), -ENOENT);
	assert_int_equal(tfs_ref_resolve(s, "ds", "", &got), -ENOENT);
	hex[12] = 0;
	assert_int_equal(tfs_ref_resolve(s, "ds", hex, &got), -ENOENT);
	chunk = id_from_seed(12345);
	tfs_id_hex(&chunk, hex);
	assert_int_equal(tfs_ref_resolve(s, "ds", hex, &got), -ENOENT);
	assert_int_equal(tfs_ref_resolve(s, "other", "main", &got), -ENOENT);
	tfs_store_close(s);
}

static void test_commit_write_and_load(void **state)
{
	static const uint64_t shape[] = { 2 };
	struct tfs_store *s;
	char path[256];
	struct tfs_id root, id;
	struct tfs_manifest m, back;
	struct tfs_commit c;

	(void)state;
	open_lake("commits", &s, path, sizeof(path));
	assert_int_equal(tfs_dataset_create(s, "ds"), 0);
	assert_int_equal(tfs_ref_read(s, "ds", TFS_REF_BRANCH, "main", &root), 0);
	make_manifest(&m, 9, 1);
	make_column(&m.cols[0], "v", "<f8", 1, shape, 9, 4, TFS_CODEC_ZSTD, 3);
	assert_int_equal(tfs_commit_write(s, "ds", &m, &root, "add v\n\nnine rows", &id), 0);
	assert_int_equal(tfs_commit_load(s, "ds", &id, &c), 0);
	assert_true(tfs_id_eq(&c.id, &id));
	assert_int_equal(c.nparents, 1);
	assert_true(tfs_id_eq(&c.parents[0], &root));
	assert_int_equal(c.rows, 9);
	assert_string_equal(c.message, "add v\n\nnine rows");
	assert_int_equal(tfs_manifest_load(s, "ds", &c.manifest, &back), 0);
	assert_manifests_equal(&m, &back);
	/* A manifest id is not a commit. */
	{
		struct tfs_commit not_commit;
		struct tfs_id mid = c.manifest;

		assert_int_equal(tfs_commit_load(s, "ds", &mid, &not_commit), -EIO);
	}
	tfs_commit_free(&c);
	tfs_manifest_free(&back);
	tfs_manifest_free(&m);
	tfs_store_close(s);
}

/* The spec allows any name of [A-Za-z0-9_.-] not starting with '.' or '-', so ".." inside a
 * name is legal and must work as a dataset and as a branch. */
static void test_names_with_double_dots_work(void **state)
{
	struct tfs_store *s;
	char path[256];
	struct tfs_id id, got;
	int create_rc, check_rc, update_rc, read_rc;

	(void)state;
	open_lake("dots", &s, path, sizeof(path));
	assert_true(tfs_name_valid("v1..2"));
	assert_true(tfs_name_valid("release..next"));
	create_rc = tfs_dataset_create(s, "v1..2");
	check_rc = tfs_dataset_check(s, "v1..2");
	assert_int_equal(tfs_dataset_create(s, "ds"), 0);
	assert_int_equal(tfs_ref_read(s, "ds", TFS_REF_BRANCH, "main", &id), 0);
	update_rc = tfs_ref_update(s, "ds", TFS_REF_BRANCH, "release..next", NULL, &id);
	read_rc = tfs_ref_read(s, "ds", TFS_REF_BRANCH, "release..next", &got);
	tfs_store_close(s);
	assert_int_equal(create_rc, 0);
	assert_int_equal(check_rc, 0);
	assert_int_equal(update_rc, 0);
	assert_int_equal(read_rc, 0);
	assert_true(tfs_id_eq(&got, &id));
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
		cmocka_unit_test(test_manifest_parse_newer_version_is_eproto),
		cmocka_unit_test(test_manifest_listed_fixed_is_v3),
		cmocka_unit_test(test_manifest_kinds_round_trip),
		cmocka_unit_test(test_manifest_kinds_rejected),
		cmocka_unit_test(test_manifest_eos),
		cmocka_unit_test(test_manifest_classes),
		cmocka_unit_test(test_column_copy_is_deep),
		cmocka_unit_test(test_commit_round_trip),
		cmocka_unit_test(test_commit_parse_negative_time),
		cmocka_unit_test(test_commit_parse_rejects_damage),
		cmocka_unit_test(test_dataset_create_and_check),
		cmocka_unit_test(test_dataset_create_rejects_invalid_names),
		cmocka_unit_test(test_dataset_check_newer_and_damaged_marker),
		cmocka_unit_test(test_ref_update_compare_and_swap),
		cmocka_unit_test(test_lake_list_lists_only_datasets),
		cmocka_unit_test(test_ref_list),
		cmocka_unit_test(test_object_put_get_round_trip),
		cmocka_unit_test(test_object_get_detects_corruption),
		cmocka_unit_test(test_ref_resolve),
		cmocka_unit_test(test_commit_write_and_load),
		cmocka_unit_test(test_names_with_double_dots_work),
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
