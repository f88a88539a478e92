/* SPDX-License-Identifier: MIT */
/* Unit tests for core/rowcol.c: data chunks end on row boundaries (a row over the target alone),
 * offsets and shapes, text checks, appending after a partial chunk, rows given (copied into
 * their chunks on the pool) written as copied ones are, fixed rows added many at a time as one
 * at a time, UTF-8 validation and text line sizes. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "rowcol.h"
#include "tmpdir_fixture.h"

static struct tfs_store *store;

static int setup(void **state)
{
	char url[128];

	(void)state;
	if (tmpdir_make("rowcol"))
		return -1;
	snprintf(url, sizeof(url), "file://%s/lake", tmpdir);
	return tfs_store_open(url, TFS_STORE_CREATE, &store);
}

static int teardown(void **state)
{
	(void)state;
	tfs_store_close(store);
	return tmpdir_remove();
}

/* Read all of column i's rows (bytes) back through its chunks. */
static void read_col(const struct tfs_manifest *m, size_t i, struct tfs_buf *out)
{
	const struct tfs_column *c = &m->cols[i];

	out->len = 0;
	for (size_t k = 0; k < c->nchunks; k++) {
		uint64_t n = tfs_column_chunk_rows(c, k) * c->row_bytes;
		char key[TFS_KEY_MAX];
		struct tfs_buf obj = { 0 };

		tfs_object_key("ds", &c->chunks[k].id, key);
		assert_int_equal(tfs_store_get_object(store, key, 0, &obj), 0);
		assert_int_equal(tfs_buf_reserve(out, (size_t)n), 0);
		assert_int_equal(tfs_object_decode(obj.data, obj.len, TFS_OBJ_CHUNK,
						   out->data + out->len, (size_t)n),
				 0);
		out->len += (size_t)n;
		tfs_buf_free(&obj);
	}
}

static void test_text_chunks_end_on_rows(void **state)
{
	static const char *const rows[] = { "abc", "0123456789", "", "hello", "w\\rld", "é" };
	static const uint64_t want_end[] = { 3, 13, 18, 25 },
			      want_off[] = { 0, 3, 13, 13, 18, 23, 25 };
	struct tfs_manifest m = { .cols = calloc(8, sizeof(*m.cols)) };
	struct tfs_dtype u1;
	struct tfs_rowcol *w;
	struct tfs_buf b = { 0 };
	char err[64];
	int big;

	(void)state;
	assert_non_null(m.cols);
	assert_int_equal(tfs_dtype_parse("|u1", &u1, &big, err, sizeof(err)), 0);
	assert_int_equal(tfs_rowcol_new(&m, "t", TFS_COL_TEXT, &u1, 0, NULL, 8, TFS_CODEC_ZSTD, 3),
			 0);
	assert_int_equal(m.ncols, 3);
	assert_string_equal(m.cols[1].name, "t/data");
	assert_string_equal(m.cols[2].name, "t/offsets");
	assert_int_equal(tfs_rowcol_begin(store, "ds", &m, 0, &w), 0);
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++)
		assert_int_equal(tfs_rowcol_add(w, rows[i], strlen(rows[i]), NULL), 0);
	/* Not UTF-8: refused, and nothing of it kept. */
	assert_int_equal(tfs_rowcol_add(w, "\xc3\x28", 2, NULL), -EINVAL);
	assert_int_equal(tfs_rowcol_finish(w), 0);
	tfs_rowcol_free(w);

	assert_int_equal(m.cols[0].rows, 6);
	/* Lines: each row escaped ("\\" doubles) plus a newline. */
	assert_int_equal(m.cols[0].text_bytes, 25 + 1 + 6);
	assert_int_equal(m.cols[1].nchunks, 4);
	assert_memory_equal(m.cols[1].chunk_end, want_end, sizeof(want_end));
	read_col(&m, 1, &b);
	assert_int_equal(b.len, 25);
	assert_memory_equal(b.data, "abc0123456789hellow\\rld\xc3\xa9", 25);
	assert_int_equal(m.cols[2].rows, 7);
	read_col(&m, 2, &b);
	assert_memory_equal(b.data, want_off, sizeof(want_off));

	/* Appending: new data chunks after the old ones, the partial offsets chunk rewritten. */
	assert_int_equal(tfs_rowcol_begin(store, "ds", &m, 0, &w), 0);
	assert_int_equal(tfs_rowcol_add(w, "zz", 2, NULL), 0);
	assert_int_equal(tfs_rowcol_finish(w), 0);
	tfs_rowcol_free(w);
	assert_int_equal(m.cols[0].rows, 7);
	assert_int_equal(m.cols[1].chunk_end[m.cols[1].nchunks - 1], 27);
	read_col(&m, 2, &b);
	assert_int_equal(b.len, 8 * 8);
	assert_int_equal(((const uint64_t *)b.data)[7], 27);
	assert_int_equal(((const uint64_t *)b.data)[6], 25);
	tfs_buf_free(&b);
	tfs_manifest_free(&m);
}

static void test_ragged_shapes(void **state)
{
	struct tfs_manifest m = { .cols = calloc(8, sizeof(*m.cols)) };
	struct tfs_dtype i2;
	struct tfs_rowcol *w;
	struct tfs_buf b = { 0 };
	const int16_t row[6] = { 1, 2, 3, 4, 5, 6 };
	const uint64_t s23[] = { 2, 3 }, s05[] = { 0, 5 }, s31[] = { 3, 1 };
	char err[64];
	int big;

	(void)state;
	assert_non_null(m.cols);
	assert_int_equal(tfs_dtype_parse("<i2", &i2, &big, err, sizeof(err)), 0);
	assert_int_equal(
		tfs_rowcol_new(&m, "r", TFS_COL_RAGGED, &i2, 2, NULL, 4096, TFS_CODEC_RAW, 0), 0);
	assert_int_equal(m.ncols, 4);
	assert_int_equal(tfs_rowcol_begin(store, "ds", &m, 0, &w), 0);
	assert_int_equal(tfs_rowcol_add(w, row, 12, s23), 0);
	assert_int_equal(tfs_rowcol_add(w, row, 0, s05), 0);
	/* A shape that does not match the bytes is refused. */
	assert_int_equal(tfs_rowcol_add(w, row, 8, s31), -EINVAL);
	assert_int_equal(tfs_rowcol_add(w, row, 6, s31), 0);
	assert_int_equal(tfs_rowcol_finish(w), 0);
	tfs_rowcol_free(w);
	assert_int_equal(m.cols[0].rows, 3);
	assert_int_equal(m.cols[3].rows, 3);
	read_col(&m, 3, &b);
	{
		const int64_t want[] = { 2, 3, 0, 5, 3, 1 };

		assert_int_equal(b.len, sizeof(want));
		assert_memory_equal(b.data, want, sizeof(want));
	}
	/* Appending rewrites the partial offsets and shapes chunks with the old rows first. */
	assert_int_equal(m.cols[2].nchunks, 1);
	assert_int_equal(tfs_rowcol_begin(store, "ds", &m, 0, &w), 0);
	assert_int_equal(tfs_rowcol_add(w, row, 4, (const uint64_t[]){ 1, 2 }), 0);
	assert_int_equal(tfs_rowcol_finish(w), 0);
	tfs_rowcol_free(w);
	assert_int_equal(m.cols[2].nchunks, 1);
	read_col(&m, 2, &b);
	{
		const uint64_t want[] = { 0, 12, 12, 18, 22 };

		assert_int_equal(b.len, sizeof(want));
		assert_memory_equal(b.data, want, sizeof(want));
	}
	read_col(&m, 1, &b);
	assert_int_equal(b.len, 22);
	assert_memory_equal(b.data + 18, row, 4);
	tfs_buf_free(&b);
	tfs_manifest_free(&m);
}

/* Row i of the taken-rows test: i * 37 % 300 bytes (one over the chunk target), of i. */
static size_t taken_row(unsigned i, uint8_t **out)
{
	const size_t len = i == 20 ? 1500 : i * 37 % 300;

	*out = malloc(len ? len : 1);
	assert_non_null(*out);
	memset(*out, (int)i, len);
	return len;
}

/* Two uint8 columns of 1,000-byte chunks begun in m: "f", fixed rows of shape, and "r", ragged. */
static void fixed_and_ragged(struct tfs_manifest *m, const uint64_t *shape, struct tfs_rowcol **f,
			     struct tfs_rowcol **r)
{
	struct tfs_dtype u1;
	char err[64];
	int big;

	assert_non_null(m->cols);
	assert_int_equal(tfs_dtype_parse("|u1", &u1, &big, err, sizeof(err)), 0);
	assert_int_equal(
		tfs_rowcol_new(m, "f", TFS_COL_FIXED, &u1, 1, shape, 1000, TFS_CODEC_ZSTD, 3), 0);
	assert_int_equal(
		tfs_rowcol_new(m, "r", TFS_COL_RAGGED, &u1, 1, NULL, 1000, TFS_CODEC_ZSTD, 3), 0);
	assert_int_equal(tfs_rowcol_begin(store, "ds", m, 0, f), 0);
	assert_int_equal(tfs_rowcol_begin(store, "ds", m, 1, r), 0);
}

/* A fixed and a ragged column written with rows given up and rows copied, on a pool, and the
 * same rows all copied on this thread: the same chunks. */
static void test_taken_rows_land_where_copied_ones_do(void **state)
{
	struct tfs_manifest m[2] = { { .cols = calloc(8, sizeof(*m[0].cols)) },
				     { .cols = calloc(8, sizeof(*m[1].cols)) } };
	const uint64_t fixed_shape[] = { 96 };
	struct tfs_workpool *pool;

	(void)state;
	assert_int_equal(tfs_workpool_create(2, &pool), 0);
	for (int k = 0; k < 2; k++) {
		struct tfs_rowcol *f, *r;

		fixed_and_ragged(&m[k], fixed_shape, &f, &r);
		if (k == 0) {
			tfs_rowcol_use_pool(f, pool);
			tfs_rowcol_use_pool(r, pool);
		}
		for (unsigned i = 0; i < 40; i++) {
			uint8_t fixed_row[96], *row;
			const uint64_t len = taken_row(i, &row);

			memset(fixed_row, (int)(255 - i), sizeof(fixed_row));
			if (k == 0 && i % 3) { /* given up: freed by the rowcol */
				uint8_t *copy = malloc(sizeof(fixed_row));

				assert_non_null(copy);
				memcpy(copy, fixed_row, sizeof(fixed_row));
				assert_int_equal(tfs_rowcol_add_take(f, copy, 96, NULL), 0);
				assert_int_equal(tfs_rowcol_add_take(r, row, len, &len), 0);
				continue;
			}
			assert_int_equal(tfs_rowcol_add(f, fixed_row, 96, NULL), 0);
			assert_int_equal(tfs_rowcol_add(r, row, len, &len), 0);
			free(row);
		}
		if (k == 0) { /* a row refused is freed all the same */
			uint8_t *row = malloc(8);
			const uint64_t wrong = 9;

			assert_non_null(row);
			assert_int_equal(tfs_rowcol_add_take(r, row, 8, &wrong), -EINVAL);
		}
		assert_int_equal(tfs_rowcol_finish(f), 0);
		assert_int_equal(tfs_rowcol_finish(r), 0);
		tfs_rowcol_free(f);
		tfs_rowcol_free(r);
	}
	assert_int_equal(m[0].ncols, m[1].ncols);
	for (size_t i = 0; i < m[0].ncols; i++) {
		assert_int_equal(m[0].cols[i].rows, m[1].cols[i].rows);
		assert_int_equal(m[0].cols[i].nchunks, m[1].cols[i].nchunks);
		for (size_t c = 0; c < m[0].cols[i].nchunks; c++)
			assert_true(tfs_id_eq(&m[0].cols[i].chunks[c].id, &m[1].cols[i].chunks[c].id));
	}
	assert_int_equal(m[0].cols[0].rows, 40);
	assert_true(m[0].cols[0].nchunks > 3 && m[0].cols[2].nchunks > 3);
	tfs_workpool_destroy(pool);
	tfs_manifest_free(&m[0]);
	tfs_manifest_free(&m[1]);
}

/* Rows added n at a time land in the chunks they land in one at a time (runs that end inside a
 * chunk, fill one, and cross several); a count that does not match the bytes, or a column that
 * is not fixed, is refused. */
static void test_rows_added_at_once_land_as_one_by_one(void **state)
{
	static const size_t runs[] = { 3, 7, 1, 25, 4 }; /* 40 rows; 10 a chunk */
	struct tfs_manifest m[2] = { { .cols = calloc(8, sizeof(*m[0].cols)) },
				     { .cols = calloc(8, sizeof(*m[1].cols)) } };
	const uint64_t shape[] = { 100 };
	uint8_t rows[40][100];

	(void)state;
	for (unsigned i = 0; i < 40; i++)
		for (unsigned j = 0; j < 100; j++)
			rows[i][j] = (uint8_t)(i * 31 + j);
	for (int k = 0; k < 2; k++) {
		struct tfs_rowcol *f, *r;
		size_t at = 0;

		fixed_and_ragged(&m[k], shape, &f, &r);
		for (size_t i = 0; k == 0 && i < sizeof(runs) / sizeof(runs[0]); i++) {
			assert_int_equal(tfs_rowcol_add_rows(f, rows[at], runs[i], runs[i] * 100), 0);
			at += runs[i];
		}
		for (unsigned i = 0; k == 1 && i < 40; i++)
			assert_int_equal(tfs_rowcol_add(f, rows[i], 100, NULL), 0);
		assert_int_equal(tfs_rowcol_add_rows(f, rows[0], 2, 199), -EINVAL);
		assert_int_equal(tfs_rowcol_add_rows(r, rows[0], 2, 200), -EINVAL);
		assert_int_equal(tfs_rowcol_finish(f), 0);
		assert_int_equal(tfs_rowcol_finish(r), 0);
		tfs_rowcol_free(f);
		tfs_rowcol_free(r);
	}
	assert_int_equal(m[0].cols[0].rows, 40);
	assert_int_equal(m[0].cols[0].nchunks, 4);
	assert_int_equal(m[0].cols[0].nchunks, m[1].cols[0].nchunks);
	for (size_t c = 0; c < m[0].cols[0].nchunks; c++)
		assert_true(tfs_id_eq(&m[0].cols[0].chunks[c].id, &m[1].cols[0].chunks[c].id));
	tfs_manifest_free(&m[0]);
	tfs_manifest_free(&m[1]);
}

/* UTF-8 as text columns take it: well-formed only. */
static void test_utf8(void **state)
{
	static const struct {
		const char *s;
		size_t n;
		int ok;
	} cases[] = {
		{ "", 0, 1 },
		{ "plain ascii", 11, 1 },
		{ "\xc3\xa9", 2, 1 },	      /* é */
		{ "\xe6\x97\xa5", 3, 1 },     /* 日 */
		{ "\xf0\x9f\x8e\x89", 4, 1 }, /* U+1F389 */
		{ "\xf4\x8f\xbf\xbf", 4, 1 }, /* U+10FFFF, the last */
		{ "a\0b", 3, 1 },	      /* NUL is a character */
		{ "\xc3", 1, 0 },	      /* cut short */
		{ "\xe6\x97", 2, 0 },	      /* cut short */
		{ "\xc0\xaf", 2, 0 },	      /* overlong '/' */
		{ "\xe0\x80\xaf", 3, 0 },     /* overlong */
		{ "\xf0\x80\x80\xaf", 4, 0 }, /* overlong */
		{ "\xed\xa0\x80", 3, 0 },     /* a surrogate */
		{ "\xf4\x90\x80\x80", 4, 0 }, /* past U+10FFFF */
		{ "\xff", 1, 0 },
		{ "\x80", 1, 0 },     /* a continuation byte alone */
		{ "\xc3\x28", 2, 0 }, /* not a continuation */
	};

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		if (tfs_utf8_valid(cases[i].s, cases[i].n) != cases[i].ok)
			fail_msg("case %zu: expected %d", i, cases[i].ok);
}

static void test_text_line_bytes(void **state)
{
	(void)state;
	assert_int_equal(tfs_text_line_bytes("", 0), 1);
	assert_int_equal(tfs_text_line_bytes("a\\b\nc\r", 7), 7 + 3 + 1);
}

/* The word-at-a-time paths of tfs_utf8_valid and tfs_text_line_bytes against a byte-by-byte
 * reading, on strings of every length up to 40 with any of a few bytes at every place: ASCII,
 * the three escapes, bytes next to them, high bytes and parts of well- and ill-formed
 * sequences. */
static void test_word_paths_match_bytes(void **state)
{
	static const uint8_t alphabet[] = { 'a', '\\', '\n', '\r', '\t', 0x0b, 0x0c, 0x5b, 0x5d,
					    0,   0x7f, 0x80, 0xc3, 0xa9, 0xe6, 0x97, 0xff, 0x8a,
					    0x8d, 0xdc };
	uint64_t seed = 12345;
	uint8_t s[40];

	(void)state;
	for (unsigned round = 0; round < 20000; round++) {
		const size_t n = round % (sizeof(s) + 1);
		uint64_t want = n + 1;
		int ascii = 1;

		for (size_t i = 0; i < n; i++) {
			seed = seed * 6364136223846793005ull + 1442695040888963407ull;
			/* Mostly 'a': runs of eight clean bytes, then one odd byte among them. */
			s[i] = (seed >> 60) < 12 ? 'a' : alphabet[(seed >> 33) % sizeof(alphabet)];
			want += s[i] == '\\' || s[i] == '\n' || s[i] == '\r';
			ascii &= s[i] < 0x80;
		}
		assert_int_equal(tfs_text_line_bytes((const char *)s, n), want);
		if (ascii)
			assert_true(tfs_utf8_valid(s, n));
	}
	/* A bad byte after eight good ones, at every offset of a longer string. */
	for (size_t at = 0; at < sizeof(s); at++) {
		memset(s, 'a', sizeof(s));
		s[at] = 0xff;
		assert_false(tfs_utf8_valid(s, sizeof(s)));
		s[at] = 0xc3; /* cut short by the 'a' after it, or by the end */
		assert_false(tfs_utf8_valid(s, sizeof(s)));
		if (at + 1 < sizeof(s)) {
			s[at + 1] = 0xa9;
			assert_true(tfs_utf8_valid(s, sizeof(s)));
		}
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_text_chunks_end_on_rows),
		cmocka_unit_test(test_ragged_shapes),
		cmocka_unit_test(test_taken_rows_land_where_copied_ones_do),
		cmocka_unit_test(test_rows_added_at_once_land_as_one_by_one),
		cmocka_unit_test(test_utf8),
		cmocka_unit_test(test_text_line_bytes),
		cmocka_unit_test(test_word_paths_match_bytes),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
