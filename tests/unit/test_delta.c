/* SPDX-License-Identifier: MIT */
/* Unit tests for core/delta (the line filter and its inverse) and the framed chunks that use it
 * (object versions 3 and 4): round trips whole and a frame at a time, frames the filter does not
 * help, frames of rows of several lines, the lines writers choose, and damage to a filtered
 * frame or to the index's filter fields. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <xxhash.h>

#include "delta.h"
#include "fill_fixture.h"
#include "frames_fixture.h"
#include "format.h"
#include "object.h"
#include "util.h"

#define KIB 1024u

/* Rows of h lines of w pixels of 3 bytes, each a photograph's worth of detail: ramps that change
 * slowly down the image and a little noise. */
static void fill_images(uint8_t *p, size_t rows, size_t h, size_t w, uint64_t seed)
{
	uint8_t *noise = malloc(rows * h * w * 3);

	fill_random(noise, rows * h * w * 3, seed);
	for (size_t r = 0; r < rows; r++)
		for (size_t y = 0; y < h; y++)
			for (size_t x = 0; x < w; x++)
				for (size_t c = 0; c < 3; c++) {
					const size_t i = ((r * h + y) * w + x) * 3 + c;

					p[i] = (uint8_t)(x * (c + 1) + y / 3 + r * 17 +
							 (noise[i] & 7));
				}
	free(noise);
}

static void test_delta_is_its_formula_and_inverts(void **state)
{
	static const size_t lines[] = { 1, 2, 3, 15, 16, 17, 31, 672, 4096 };
	static const size_t lens[] = { 0, 1, 15, 16, 17, 100, 1000, 65536 + 5 };
	uint8_t *src = malloc(70000), *dst = malloc(70000);

	(void)state;
	fill_random(src, 70000, 3);
	for (size_t a = 0; a < sizeof(lines) / sizeof(lines[0]); a++)
		for (size_t b = 0; b < sizeof(lens) / sizeof(lens[0]); b++) {
			const size_t line = lines[a], len = lens[b];

			memset(dst, 0xa5, 70000);
			tfs_delta_encode(src, dst, len, line);
			for (size_t i = 0; i < len; i++)
				assert_int_equal(
					dst[i],
					(uint8_t)(src[i] - (i >= line ? src[i - line] : 0)));
			assert_int_equal(dst[len], 0xa5); /* nothing past len */
			tfs_delta_decode(dst, len, line);
			assert_memory_equal(dst, src, len);
		}
	free(src);
	free(dst);
}

/* Encode raw as a framed chunk with the filter: version 3, checked whole. */
static struct tfs_frames *encode_delta(const uint8_t *raw, size_t len, size_t frame, size_t line,
				       struct tfs_buf *obj)
{
	struct tfs_frames *t = NULL;
	struct tfs_obj_header h;
	size_t ilen;

	assert_int_equal(tfs_chunk_encode(TFS_CODEC_ZSTD, 3, frame, line, raw, len, obj), 0);
	assert_int_equal(tfs_object_check(obj->data, obj->len), 0);
	assert_int_equal(tfs_object_header(obj->data, obj->len, &h), 0);
	assert_int_equal(h.version, 3);
	assert_int_equal(h.codec, TFS_CODEC_FRAMES);
	assert_int_equal(tfs_frames_index_len(obj->data, TFS_FRAMES_PROBE, &ilen), 0);
	assert_int_equal(tfs_frames_parse(obj->data, ilen, obj->len, &t), 0);
	assert_int_equal(t->line, line);
	return t;
}

static void test_filtered_chunk_is_smaller_and_reads_back(void **state)
{
	/* 10 rows of 64x96x3: a line is 288 bytes, and 16 KiB frames start mid-line. */
	const size_t line = 96 * 3, len = 10 * 64 * line;
	uint8_t *raw = malloc(len), *dst = malloc(len);
	struct tfs_buf obj = { 0 }, plain = { 0 };
	struct tfs_frames *t;

	(void)state;
	fill_images(raw, 10, 64, 96, 1);
	t = encode_delta(raw, len, 16 * KIB, line, &obj);
	assert_int_equal(tfs_chunk_encode(TFS_CODEC_ZSTD, 3, 16 * KIB, 0, raw, len, &plain), 0);
	/* The noise costs 3 bits a byte either way; the ramps cost nothing once filtered. */
	assert_true(obj.len * 4 < plain.len * 3);
	for (uint32_t i = 0; i < t->n; i++)
		assert_true(t->f[i].delta && !t->f[i].stored);

	assert_int_equal(tfs_object_decode(obj.data, obj.len, TFS_OBJ_CHUNK, dst, len), 0);
	assert_memory_equal(dst, raw, len);
	assert_frames_decode(&obj, t, dst, raw, len);
	free(t);
	tfs_buf_free(&obj);
	tfs_buf_free(&plain);
	free(raw);
	free(dst);
}

/* Frames the filter does not shrink by 1/32 are written unfiltered: compressed where zstd
 * shrinks their bytes as they are, kept as they are where it does not either. */
static void test_frames_the_filter_cannot_shrink_are_written_unfiltered(void **state)
{
	const size_t len = 250 * KIB;
	uint8_t *raw = malloc(len), *dst = malloc(len);
	struct tfs_buf obj = { 0 };
	struct tfs_frames *t;

	(void)state;
	fill_random(raw, len, 2);
	memset(raw + 64 * KIB, 7, 64 * KIB); /* frame 1 compresses; 0 and 2 do not */
	/* Frame 3: bytes of 7 random bits. zstd stores them in 7/8 of their size, but their
	 * differences take all 8 bits. */
	for (size_t i = 192 * KIB; i < len; i++)
		raw[i] &= 0x7f;
	t = encode_delta(raw, len, 64 * KIB, 300, &obj);
	assert_true(t->f[0].stored && !t->f[0].delta);
	assert_true(!t->f[1].stored && t->f[1].delta);
	assert_true(t->f[2].stored && !t->f[2].delta);
	assert_true(!t->f[3].stored && !t->f[3].delta);
	assert_true(t->f[3].len * 16 < t->f[3].raw * 15);
	/* A frame kept as it is holds the bytes themselves, not their differences. */
	assert_memory_equal(obj.data + t->f[0].off, raw, 64 * KIB);
	assert_int_equal(tfs_frame_check(t, 0, obj.data + t->f[0].off), 0);
	assert_int_equal(tfs_frame_decode(t, 3, obj.data + t->f[3].off, dst), 0);
	assert_memory_equal(dst, raw + 192 * KIB, t->f[3].raw);
	assert_int_equal(tfs_object_decode(obj.data, obj.len, TFS_OBJ_CHUNK, dst, len), 0);
	assert_memory_equal(dst, raw, len);
	free(t);
	tfs_buf_free(&obj);
	free(raw);
	free(dst);
}

static void test_no_filter_without_frames_or_zstd(void **state)
{
	const size_t len = 700 * 300; /* an image of 700 lines of 100 pixels: over two frames */
	uint8_t *raw = malloc(len);
	struct tfs_buf obj = { 0 };
	struct tfs_obj_header h;

	(void)state;
	fill_images(raw, 1, 700, 100, 4);
	/* One frame a chunk: version 1, as readers before frames take it. */
	assert_int_equal(tfs_chunk_encode(TFS_CODEC_ZSTD, 3, 0, 300, raw, len, &obj), 0);
	assert_int_equal(tfs_object_header(obj.data, obj.len, &h), 0);
	assert_int_equal(h.version, 1);
	/* The raw codec keeps every frame as it is: nothing to filter, version 2. */
	assert_int_equal(tfs_chunk_encode(TFS_CODEC_RAW, 0, 64 * KIB, 300, raw, len, &obj), 0);
	assert_int_equal(tfs_object_header(obj.data, obj.len, &h), 0);
	assert_int_equal(h.version, 2);
	tfs_buf_free(&obj);
	free(raw);
}

/* Reseal the index's own checksum after a change to it (head: 8 or 16 bytes). */
static void reseal(struct tfs_buf *obj, size_t head, uint32_t n)
{
	uint8_t *ix = obj->data + TFS_OBJ_HEADER_SIZE;
	const uint64_t h = XXH3_64bits(ix, head + 16 * (size_t)n);

	memcpy(ix + head + 16 * (size_t)n, &h, 8);
}

static void test_damage_to_a_filtered_chunk_is_eio(void **state)
{
	const size_t line = 96 * 3, len = 10 * 64 * line;
	uint8_t *raw = malloc(len), *dst = malloc(len);
	struct tfs_buf obj = { 0 };
	struct tfs_frames *t, *u = NULL;
	size_t ilen;
	uint8_t *ix;
	uint32_t flags;

	(void)state;
	fill_images(raw, 10, 64, 96, 5);
	t = encode_delta(raw, len, 16 * KIB, line, &obj);
	assert_int_equal(tfs_frames_index_len(obj.data, obj.len, &ilen), 0);
	ix = obj.data + TFS_OBJ_HEADER_SIZE;

	/* A flipped byte in a filtered frame fails that frame, whatever the byte. */
	for (size_t b = 0; b < t->f[2].len; b += 97) {
		obj.data[t->f[2].off + b] ^= 0x10;
		assert_int_equal(tfs_frame_decode(t, 2, obj.data + t->f[2].off, dst), -EIO);
		obj.data[t->f[2].off + b] ^= 0x10;
	}
	assert_int_equal(tfs_frame_decode(t, 2, obj.data + t->f[2].off, dst), 0);
	/* Any index byte, the filter's fields among them. */
	for (size_t b = TFS_OBJ_HEADER_SIZE; b < ilen; b++) {
		obj.data[b] ^= 1;
		assert_int_equal(tfs_frames_parse(obj.data, ilen, obj.len, &u), -EIO);
		obj.data[b] ^= 1;
	}
	/* Fields out of range with the index resealed: an unknown filter, a line of 0, a frame
	 * kept as it is said to be filtered, a flag no version defines. */
	ix[8] = 2;
	reseal(&obj, 16, t->n);
	assert_int_equal(tfs_frames_parse(obj.data, ilen, obj.len, &u), -EIO);
	ix[8] = 1;
	memset(ix + 12, 0, 4);
	reseal(&obj, 16, t->n);
	assert_int_equal(tfs_frames_parse(obj.data, ilen, obj.len, &u), -EIO);
	memcpy(ix + 12, &(uint32_t){ (uint32_t)line }, 4);
	reseal(&obj, 16, t->n);
	assert_int_equal(tfs_frames_parse(obj.data, ilen, obj.len, &u), 0);
	free(u);
	flags = 3;
	memcpy(ix + 16 + 4, &flags, 4);
	reseal(&obj, 16, t->n);
	assert_int_equal(tfs_frames_parse(obj.data, ilen, obj.len, &u), -EIO);
	flags = 6;
	memcpy(ix + 16 + 4, &flags, 4);
	reseal(&obj, 16, t->n);
	assert_int_equal(tfs_frames_parse(obj.data, ilen, obj.len, &u), -EIO);
	free(t);

	/* A version 2 chunk has no filter: a frame flagged filtered there is damage. */
	assert_int_equal(tfs_chunk_encode(TFS_CODEC_ZSTD, 3, 16 * KIB, 0, raw, len, &obj), 0);
	assert_int_equal(tfs_frames_index_len(obj.data, obj.len, &ilen), 0);
	ix = obj.data + TFS_OBJ_HEADER_SIZE;
	flags = 2;
	memcpy(ix + 8 + 4, &flags, 4);
	reseal(&obj, 8, (uint32_t)(ix[0] | ix[1] << 8));
	assert_int_equal(tfs_frames_parse(obj.data, ilen, obj.len, &u), -EIO);
	tfs_buf_free(&obj);
	free(raw);
	free(dst);
}

/* Rows of several widths (a ragged column's chunk): each frame is filtered with the line of
 * the rows that hold most of it, the chunk's line or (version 4) its own; rows of no line are
 * not filtered. Every frame decodes alone; a frame's own line where no version or flag has one
 * is damage. */
static void test_frames_take_their_rows_lines(void **state)
{
	const size_t a = 6 * 64 * 288, b = 8 * 40 * 216, c = 20000, d = 3 * 64 * 288;
	const size_t len = a + b + c + d, frame = 16 * KIB;
	const struct tfs_line_run runs[] = {
		{ a, 288 }, { a + b, 216 }, { a + b + c, 0 }, { len, 288 }
	};
	const struct tfs_line_run same[] = { { a, 288 }, { len, 288 } }, none[] = { { len, 0 } };
	uint8_t *raw = malloc(len), *dst = malloc(len), *ix;
	struct tfs_buf obj = { 0 };
	struct tfs_obj_header h;
	struct tfs_frames *t, *u = NULL;
	uint32_t flags, seen216 = 0;
	size_t ilen;

	(void)state;
	fill_images(raw, 6, 64, 96, 1);
	fill_images(raw + a, 8, 40, 72, 2);
	fill_random(raw + a + b, c, 3);
	for (size_t i = a + b; i < a + b + c; i++)
		raw[i] &= 0x3f; /* compresses as it is */
	fill_images(raw + a + b + c, 3, 64, 96, 4);
	assert_int_equal(tfs_chunk_encode_runs(TFS_CODEC_ZSTD, 1, frame, runs, 4, raw, len, &obj),
			 0);
	assert_int_equal(tfs_object_check(obj.data, obj.len), 0);
	assert_int_equal(tfs_object_header(obj.data, obj.len, &h), 0);
	assert_int_equal(h.version, 4);
	assert_int_equal(tfs_frames_index_len(obj.data, TFS_FRAMES_PROBE, &ilen), 0);
	assert_int_equal(tfs_frames_parse(obj.data, ilen, obj.len, &t), 0);
	assert_int_equal(t->line, 288);
	for (uint32_t i = 0; i < t->n; i++) {
		/* The run that holds most of the frame, by a plain count. */
		size_t most = 0, want = 0;

		for (size_t r = 0; r < 4; r++) {
			const size_t from = r ? runs[r - 1].end : 0, lo = i * frame,
				     hi = lo + frame < len ? lo + frame : len;
			const size_t s0 = from > lo ? from : lo,
				     s1 = runs[r].end < hi ? runs[r].end : hi;

			if (s1 > s0 && s1 - s0 > most) {
				most = s1 - s0;
				want = runs[r].line;
			}
		}
		assert_int_equal(t->f[i].delta ? t->f[i].line : 0, want);
		assert_false(t->f[i].stored);
		seen216 += t->f[i].line == 216;
	}
	assert_true(seen216 >= 3);
	assert_int_equal(tfs_object_decode(obj.data, obj.len, TFS_OBJ_CHUNK, dst, len), 0);
	assert_memory_equal(dst, raw, len);
	assert_frames_decode(&obj, t, dst, raw, len);

	/* Damage, the index resealed: a frame's own line on a frame not filtered, and a flag
	 * bit no version defines. */
	ix = obj.data + TFS_OBJ_HEADER_SIZE;
	for (uint32_t i = 0; i < t->n; i++) {
		uint32_t was;

		memcpy(&was, ix + 16 + 16 * i + 4, 4);
		flags = t->f[i].delta ? was | 4 : was | 216u << 8;
		memcpy(ix + 16 + 16 * i + 4, &flags, 4);
		reseal(&obj, 16, t->n);
		assert_int_equal(tfs_frames_parse(obj.data, ilen, obj.len, &u), -EIO);
		memcpy(ix + 16 + 16 * i + 4, &was, 4);
	}
	reseal(&obj, 16, t->n);
	assert_int_equal(tfs_frames_parse(obj.data, ilen, obj.len, &u), 0);
	free(u);
	free(t);

	/* One line throughout: version 3, as readers before version 4 read; no line: version 2.
	 * A frame's own line in a version 3 chunk is damage. */
	assert_int_equal(tfs_chunk_encode_runs(TFS_CODEC_ZSTD, 1, frame, same, 2, raw, a + b, &obj),
			 0);
	assert_int_equal(tfs_object_header(obj.data, obj.len, &h), 0);
	assert_int_equal(h.version, 3);
	assert_int_equal(tfs_frames_index_len(obj.data, TFS_FRAMES_PROBE, &ilen), 0);
	assert_int_equal(tfs_frames_parse(obj.data, ilen, obj.len, &t), 0);
	assert_true(t->f[0].delta && t->f[0].line == 288);
	ix = obj.data + TFS_OBJ_HEADER_SIZE;
	flags = 2 | 216u << 8;
	memcpy(ix + 16 + 4, &flags, 4);
	reseal(&obj, 16, t->n);
	assert_int_equal(tfs_frames_parse(obj.data, ilen, obj.len, &u), -EIO);
	free(t);
	assert_int_equal(tfs_chunk_encode_runs(TFS_CODEC_ZSTD, 1, frame, none, 1, raw, len, &obj),
			 0);
	assert_int_equal(tfs_object_header(obj.data, obj.len, &h), 0);
	assert_int_equal(h.version, 2);
	tfs_buf_free(&obj);
	free(raw);
	free(dst);
}

/* The line of a column of rows of the given shape, uint8, zstd, as writers would filter it. */
static uint64_t line_of(enum tfs_col_kind kind, enum tfs_codec_id codec, unsigned ndim,
			const uint64_t *shape, uint32_t itemsize)
{
	struct tfs_column c = { .kind = kind, .codec = codec, .level = 3, .ndim = ndim };
	struct tfs_chunk_form f;

	c.dtype.itemsize = itemsize;
	c.row_bytes = itemsize;
	for (unsigned i = 0; i < ndim; i++) {
		c.shape[i] = shape[i];
		c.row_bytes *= shape[i];
	}
	tfs_chunk_form_of(&c, &f);
	assert_int_equal(f.codec, codec);
	assert_int_equal(f.row_bytes, c.row_bytes);
	return f.line;
}

/* The line of a ragged uint8 row of that shape, as writers would filter its chunk with. */
static uint64_t row_line(enum tfs_col_kind kind, enum tfs_codec_id codec, unsigned ndim,
			 const uint64_t *shape, uint32_t itemsize)
{
	struct tfs_column h = { .kind = kind, .codec = codec, .level = 3, .ndim = ndim };
	uint64_t len = itemsize;

	h.dtype.itemsize = itemsize;
	for (unsigned i = 0; i < ndim; i++)
		len *= shape[i];
	return tfs_chunk_row_line(&h, shape, len);
}

/* A fixed column's rows (tfs_chunk_form_of) and a ragged column's row (tfs_chunk_row_line) have
 * the same line: the last two dimensions' bytes of rows of three or more, the last one's of rows
 * of two. Elements of 2 bytes and more (audio's float32, 16-bit images) are left alone, and so
 * are rows with no line above another, no lines at all, no zstd; and nothing while the filter is
 * off. Each function answers for its own kind only. */
static void test_writers_filter_image_lines_when_told(void **state)
{
	static const uint64_t hwc[] = { 224, 200, 3 }, hw[] = { 28, 30 },
			      thwc[] = { 16, 112, 100, 3 }, one_line[] = { 1, 200, 3 },
			      empty[] = { 0, 200, 3 }, flat[] = { 4096 };
	static const struct {
		enum tfs_codec_id codec;
		unsigned ndim;
		const uint64_t *shape;
		uint32_t itemsize;
		uint64_t line;
	} cases[] = {
		{ TFS_CODEC_ZSTD, 3, hwc, 1, 600 },  { TFS_CODEC_ZSTD, 2, hw, 1, 30 },
		{ TFS_CODEC_ZSTD, 4, thwc, 1, 300 }, { TFS_CODEC_ZSTD, 2, hw, 2, 0 },
		{ TFS_CODEC_ZSTD, 2, hw, 4, 0 },     { TFS_CODEC_ZSTD, 3, one_line, 1, 0 },
		{ TFS_CODEC_ZSTD, 3, empty, 1, 0 },  { TFS_CODEC_ZSTD, 1, flat, 1, 0 },
		{ TFS_CODEC_RAW, 3, hwc, 1, 0 },
	};

	(void)state;
	assert_int_equal(tfs_chunk_delta_get(), 0);
	for (int on = 1; on >= 0; on--) {
		tfs_chunk_delta_set(on);
		for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
			const uint64_t want = on ? cases[i].line : 0;

			if (cases[i].shape != empty) /* a fixed column has no empty rows */
				assert_int_equal(line_of(TFS_COL_FIXED, cases[i].codec,
							 cases[i].ndim, cases[i].shape,
							 cases[i].itemsize),
						 want);
			assert_int_equal(row_line(TFS_COL_RAGGED, cases[i].codec, cases[i].ndim,
						  cases[i].shape, cases[i].itemsize),
					 want);
		}
		assert_int_equal(line_of(TFS_COL_RAGGED, TFS_CODEC_ZSTD, 3, hwc, 1), 0);
		assert_int_equal(row_line(TFS_COL_FIXED, TFS_CODEC_ZSTD, 3, hwc, 1), 0);
		assert_int_equal(row_line(TFS_COL_TEXT, TFS_CODEC_ZSTD, 2, hw, 1), 0);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_delta_is_its_formula_and_inverts),
		cmocka_unit_test(test_filtered_chunk_is_smaller_and_reads_back),
		cmocka_unit_test(test_frames_the_filter_cannot_shrink_are_written_unfiltered),
		cmocka_unit_test(test_no_filter_without_frames_or_zstd),
		cmocka_unit_test(test_damage_to_a_filtered_chunk_is_eio),
		cmocka_unit_test(test_frames_take_their_rows_lines),
		cmocka_unit_test(test_writers_filter_image_lines_when_told),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
