/* SPDX-License-Identifier: MIT */
/* Unit tests for core/object's framed chunks: encoding, the frame index, one frame decoded alone,
 * and damage found in the index, in one frame, or in the whole. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <xxhash.h>

#include "fill_fixture.h"
#include "frames_fixture.h"
#include "object.h"
#include "util.h"

#define KIB 1024u

/* Image-like bytes: smooth ramps with a little noise, which zstd shrinks about 2-3x. */
static void fill_image_like(uint8_t *p, size_t n, uint64_t seed)
{
	uint64_t x = seed | 1;

	for (size_t i = 0; i < n; i++) {
		x ^= x >> 12;
		x ^= x << 25;
		x ^= x >> 27;
		p[i] = (uint8_t)((i / 7) % 200 + ((x * 0x2545F4914F6CDD1Dull) >> 63));
	}
}

/* The index of a framed object, parsed as a reader does: the probe, then the index. */
static struct tfs_frames *index_of(const struct tfs_buf *obj)
{
	struct tfs_frames *t = NULL;
	size_t ilen = 0;

	assert_int_equal(tfs_frames_index_len(obj->data, TFS_FRAMES_PROBE, &ilen), 0);
	assert_true(ilen <= obj->len);
	assert_int_equal(tfs_frames_parse(obj->data, ilen, obj->len, &t), 0);
	return t;
}

/* Encode raw as a chunk that must come out framed: its whole-object check passes and its header
 * says object version 2, codec frames, raw_len bytes. */
static void encode_framed(enum tfs_codec_id codec, size_t frame, const uint8_t *raw, size_t raw_len,
			  struct tfs_buf *obj)
{
	struct tfs_obj_header h;

	assert_int_equal(tfs_chunk_encode(codec, 3, frame, 0, raw, raw_len, obj), 0);
	assert_int_equal(tfs_object_check(obj->data, obj->len), 0);
	assert_int_equal(tfs_object_header(obj->data, obj->len, &h), 0);
	assert_int_equal(h.version, 2);
	assert_int_equal(h.codec, TFS_CODEC_FRAMES);
	assert_int_equal(h.raw_size, raw_len);
}

static void test_large_zstd_chunk_is_framed(void **state)
{
	const size_t len = 1000 * KIB + 123;
	uint8_t *raw = malloc(len), *dst = malloc(len);
	struct tfs_buf obj = { 0 };
	struct tfs_frames *t;

	(void)state;
	fill_image_like(raw, len, 1);
	encode_framed(TFS_CODEC_ZSTD, 64 * KIB, raw, len, &obj);
	assert_true(obj.len < len * 2 / 3); /* it did compress */

	/* Whole, as a sequential reader takes it. */
	assert_int_equal(tfs_object_decode(obj.data, obj.len, TFS_OBJ_CHUNK, dst, len), 0);
	assert_memory_equal(dst, raw, len);

	/* Frame by frame, as a reader of a few rows takes it. */
	t = index_of(&obj);
	assert_int_equal(t->n, (len + 64 * KIB - 1) / (64 * KIB));
	assert_int_equal(t->frame_raw, 64 * KIB);
	assert_int_equal(t->raw_size, len);
	assert_int_equal(t->f[t->n - 1].raw, len - (t->n - 1) * 64 * KIB);
	assert_frames_decode(&obj, t, dst, raw, len);
	assert_int_equal(tfs_frame_decode(t, t->n, obj.data, dst), -EIO);
	free(t);
	tfs_buf_free(&obj);
	free(raw);
	free(dst);
}

static void test_small_or_unframed_chunks_stay_version_1(void **state)
{
	const size_t len = 256 * KIB;
	uint8_t *raw = malloc(len);
	struct tfs_buf obj = { 0 };
	struct tfs_obj_header h;
	size_t ilen;

	(void)state;
	fill_image_like(raw, len, 2);
	/* Two frames' worth or less: one zstd frame, as before. */
	assert_int_equal(tfs_chunk_encode(TFS_CODEC_ZSTD, 3, 128 * KIB, 0, raw, len, &obj), 0);
	assert_int_equal(tfs_object_header(obj.data, obj.len, &h), 0);
	assert_int_equal(h.version, 1);
	assert_int_equal(h.codec, TFS_CODEC_ZSTD);
	assert_int_equal(tfs_frames_index_len(obj.data, obj.len, &ilen), 1);
	/* Frame size 0: never framed. */
	assert_int_equal(tfs_chunk_encode(TFS_CODEC_ZSTD, 3, 0, 0, raw, len, &obj), 0);
	assert_int_equal(tfs_object_header(obj.data, obj.len, &h), 0);
	assert_int_equal(h.codec, TFS_CODEC_ZSTD);
	/* The raw codec: two frames' worth or less, and frame size 0, are one raw payload. */
	assert_int_equal(tfs_chunk_encode(TFS_CODEC_RAW, 0, 128 * KIB, 0, raw, len, &obj), 0);
	assert_int_equal(tfs_object_header(obj.data, obj.len, &h), 0);
	assert_int_equal(h.codec, TFS_CODEC_RAW);
	assert_int_equal(tfs_chunk_encode(TFS_CODEC_RAW, 0, 0, 0, raw, len, &obj), 0);
	assert_int_equal(tfs_object_header(obj.data, obj.len, &h), 0);
	assert_int_equal(h.codec, TFS_CODEC_RAW);
	tfs_buf_free(&obj);
	free(raw);
}

static void test_incompressible_frames_are_kept_as_they_are(void **state)
{
	const size_t len = 512 * KIB;
	uint8_t *raw = malloc(len), *dst = malloc(len);
	struct tfs_buf obj = { 0 };
	struct tfs_frames *t;

	(void)state;
	fill_image_like(raw, len, 3);
	fill_random(raw + 128 * KIB, 128 * KIB, 4); /* frame 1 does not compress */
	assert_int_equal(tfs_chunk_encode(TFS_CODEC_ZSTD, 3, 128 * KIB, 0, raw, len, &obj), 0);
	t = index_of(&obj);
	assert_int_equal(t->n, 4);
	assert_false(t->f[0].stored);
	assert_true(t->f[1].stored);
	assert_int_equal(t->f[1].len, 128 * KIB);
	assert_false(t->f[2].stored);
	assert_int_equal(tfs_frame_decode(t, 1, obj.data + t->f[1].off, dst), 0);
	assert_memory_equal(dst, raw + 128 * KIB, 128 * KIB);
	assert_int_equal(tfs_object_decode(obj.data, obj.len, TFS_OBJ_CHUNK, dst, len), 0);
	assert_memory_equal(dst, raw, len);
	free(t);
	tfs_buf_free(&obj);
	free(raw);
	free(dst);
}

/* A raw column's chunk is framed too, every frame kept as it is and checked in place; a byte
 * flipped in one fails that frame's check alone. */
static void test_raw_chunk_is_framed_and_checked_in_place(void **state)
{
	const size_t len = 300 * KIB;
	uint8_t *raw = malloc(len), *dst = malloc(len);
	struct tfs_buf obj = { 0 };
	struct tfs_frames *t;

	(void)state;
	fill_image_like(raw, len, 9);
	encode_framed(TFS_CODEC_RAW, 64 * KIB, raw, len, &obj);
	t = index_of(&obj);
	assert_int_equal(t->n, 5);
	for (uint32_t i = 0; i < t->n; i++) {
		assert_true(t->f[i].stored);
		assert_int_equal(t->f[i].len, t->f[i].raw);
		assert_memory_equal(obj.data + t->f[i].off, raw + (size_t)i * 64 * KIB,
				    t->f[i].raw);
		assert_int_equal(tfs_frame_check(t, i, obj.data + t->f[i].off), 0);
	}
	assert_int_equal(t->f[4].raw, len - 4 * 64 * KIB);
	assert_int_equal(tfs_object_decode(obj.data, obj.len, TFS_OBJ_CHUNK, dst, len), 0);
	assert_memory_equal(dst, raw, len);
	obj.data[t->f[2].off + 100] ^= 1;
	assert_int_equal(tfs_frame_check(t, 2, obj.data + t->f[2].off), -EIO);
	assert_int_equal(tfs_frame_check(t, 3, obj.data + t->f[3].off), 0);
	assert_int_equal(tfs_frame_check(t, t->n, obj.data), -EIO);
	assert_int_equal(tfs_object_check(obj.data, obj.len), -EIO);
	free(t);
	tfs_buf_free(&obj);
	free(raw);
	free(dst);
}

/* A byte flipped in one frame fails that frame alone (and the whole object's check). */
static void test_damaged_frame_fails_alone(void **state)
{
	const size_t len = 512 * KIB;
	uint8_t *raw = malloc(len), *dst = malloc(len);
	struct tfs_buf obj = { 0 };
	struct tfs_frames *t;

	(void)state;
	fill_image_like(raw, len, 5);
	assert_int_equal(tfs_chunk_encode(TFS_CODEC_ZSTD, 3, 64 * KIB, 0, raw, len, &obj), 0);
	t = index_of(&obj);
	obj.data[t->f[3].off + t->f[3].len / 2] ^= 0x10;
	assert_int_equal(tfs_object_check(obj.data, obj.len), -EIO);
	for (uint32_t i = 0; i < t->n; i++)
		assert_int_equal(tfs_frame_decode(t, i, obj.data + t->f[i].off,
						  dst + (size_t)i * t->frame_raw),
				 i == 3 ? -EIO : 0);
	assert_memory_equal(dst + 4 * 64 * KIB, raw + 4 * 64 * KIB, len - 4 * 64 * KIB);
	free(t);
	tfs_buf_free(&obj);
	free(raw);
	free(dst);
}

/* Any byte of the index changed is caught by its own checksum, and lengths that do not add up to
 * the object's size are damage even when the checksum is made to match. */
static void test_damaged_index_is_refused(void **state)
{
	const size_t len = 300 * KIB;
	uint8_t *raw = malloc(len);
	struct tfs_buf obj = { 0 };
	struct tfs_frames *t = NULL;
	size_t ilen;
	uint8_t *ix;

	(void)state;
	fill_image_like(raw, len, 6);
	assert_int_equal(tfs_chunk_encode(TFS_CODEC_ZSTD, 3, 64 * KIB, 0, raw, len, &obj), 0);
	assert_int_equal(tfs_frames_index_len(obj.data, obj.len, &ilen), 0);
	ix = obj.data + TFS_OBJ_HEADER_SIZE;
	for (size_t b = TFS_OBJ_HEADER_SIZE; b < ilen; b++) {
		obj.data[b] ^= 1;
		assert_int_equal(tfs_frames_parse(obj.data, ilen, obj.len, &t), -EIO);
		obj.data[b] ^= 1;
	}
	/* The wrong object size, and a short read of the index. */
	assert_int_equal(tfs_frames_parse(obj.data, ilen, obj.len + 1, &t), -EIO);
	assert_int_equal(tfs_frames_parse(obj.data, ilen - 1, obj.len, &t), -EIO);
	/* Frame 0 made one byte longer, frame 1 one shorter, checksum resealed: still adds up, but
	 * every frame's bytes are now elsewhere, which the frames' hashes catch. */
	{
		uint32_t l0, l1;
		uint64_t h;
		const size_t n = ix[0] | ix[1] << 8;

		memcpy(&l0, ix + 8, 4);
		memcpy(&l1, ix + 8 + 16, 4);
		l0++;
		l1--;
		memcpy(ix + 8, &l0, 4);
		memcpy(ix + 8 + 16, &l1, 4);
		h = XXH3_64bits(ix, 8 + 16 * n);
		memcpy(ix + 8 + 16 * n, &h, 8);
		assert_int_equal(tfs_frames_parse(obj.data, ilen, obj.len, &t), 0);
		assert_int_equal(tfs_frame_decode(t, 0, obj.data + t->f[0].off, raw), -EIO);
		free(t);
	}
	/* A frame count past the limit. */
	ix[0] = ix[1] = ix[2] = 0xff;
	assert_int_equal(tfs_frames_index_len(obj.data, obj.len, &ilen), -EIO);
	tfs_buf_free(&obj);
	free(raw);
}

static void test_frame_size_is_bounded(void **state)
{
	const size_t len = 512 * KIB;
	uint8_t *raw = malloc(len);
	struct tfs_buf obj = { 0 };
	struct tfs_frames *t;

	(void)state;
	fill_image_like(raw, len, 7);
	/* Under TFS_FRAME_MIN is taken as TFS_FRAME_MIN. */
	assert_int_equal(tfs_chunk_encode(TFS_CODEC_ZSTD, 1, 100, 0, raw, len, &obj), 0);
	t = index_of(&obj);
	assert_int_equal(t->frame_raw, TFS_FRAME_MIN);
	assert_int_equal(t->n, len / TFS_FRAME_MIN);
	free(t);
	tfs_buf_free(&obj);
	free(raw);
}

static void test_frames_hold_whole_rows(void **state)
{
	(void)state;
	/* The most whole rows a frame holds. */
	assert_int_equal(tfs_chunk_frame_rows(64 * KIB, 12288), 5 * 12288);
	assert_int_equal(tfs_chunk_frame_rows(16 * KIB, 1000), 16000);
	assert_int_equal(tfs_chunk_frame_rows(64 * KIB, 3072), 21 * 3072);
	assert_int_equal(tfs_chunk_frame_rows(64 * KIB, 4096), 64 * KIB);
	assert_int_equal(tfs_chunk_frame_rows(64 * KIB, 20000), 60000);
	/* Rows that fill under 7/8 of the frame leave it as it is: its buffer would be mostly
	 * slack (33,000-byte rows: one a frame, in a buffer of 48 or 64 KiB). */
	assert_int_equal(tfs_chunk_frame_rows(64 * KIB, 33000), 64 * KIB);
	assert_int_equal(tfs_chunk_frame_rows(64 * KIB, 17000), 64 * KIB);
	assert_int_equal(tfs_chunk_frame_rows(TFS_FRAME_MIN, 3000), TFS_FRAME_MIN);
	assert_int_equal(tfs_chunk_frame_rows(100, 3000), TFS_FRAME_MIN);
	assert_int_equal(tfs_chunk_frame_rows(TFS_FRAME_MIN, 1000), TFS_FRAME_MIN);
	/* Rows larger than a frame, rows of no fixed size, and one frame a chunk keep theirs. */
	assert_int_equal(tfs_chunk_frame_rows(64 * KIB, 150528), 64 * KIB);
	assert_int_equal(tfs_chunk_frame_rows(64 * KIB, 1), 64 * KIB);
	assert_int_equal(tfs_chunk_frame_rows(64 * KIB, 0), 64 * KIB);
	assert_int_equal(tfs_chunk_frame_rows(0, 12288), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_large_zstd_chunk_is_framed),
		cmocka_unit_test(test_small_or_unframed_chunks_stay_version_1),
		cmocka_unit_test(test_incompressible_frames_are_kept_as_they_are),
		cmocka_unit_test(test_raw_chunk_is_framed_and_checked_in_place),
		cmocka_unit_test(test_damaged_frame_fails_alone),
		cmocka_unit_test(test_damaged_index_is_refused),
		cmocka_unit_test(test_frame_size_is_bounded),
		cmocka_unit_test(test_frames_hold_whole_rows),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
