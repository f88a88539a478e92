/* SPDX-License-Identifier: MIT */
/* Unit tests for core/object: damaged, cut, extended and edited objects are refused, never
 * decoded to wrong bytes. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "object_fixture.h"

/* --- corruption ----------------------------------------------------------------------------- */

static const uint8_t flip_masks[] = { 0x01, 0x02, 0x10, 0x80, 0xff, 0x5a };

/* What a reader does with fetched bytes: check (tfs_store_get_object), then decode. */
static int check_and_decode(const struct tfs_buf *obj, uint8_t *dst, size_t raw_len)
{
	int rc = tfs_object_check(obj->data, obj->len);

	return rc ? rc : tfs_object_decode(obj->data, obj->len, TFS_OBJ_CHUNK, dst, raw_len);
}

/* Flip bytes at every position in [from, to) with every mask; the check or the decode must fail
 * with -EIO. */
static void check_flips(struct tfs_buf *obj, size_t raw_len, size_t from, size_t to, size_t step)
{
	uint8_t *dst = malloc(raw_len ? raw_len : 1);

	assert_non_null(dst);
	for (size_t pos = from; pos < to; pos += step) {
		for (size_t m = 0; m < sizeof(flip_masks); m++) {
			int rc;

			obj->data[pos] ^= flip_masks[m];
			rc = check_and_decode(obj, dst, raw_len);
			if (rc != -EIO)
				fail_msg("flip 0x%02x at byte %zu of %zu: decode returned %d",
					 flip_masks[m], pos, obj->len, rc);
			obj->data[pos] ^= flip_masks[m];
		}
	}
	/* Restored, it decodes again. */
	assert_int_equal(tfs_object_decode(obj->data, obj->len, TFS_OBJ_CHUNK, dst, raw_len), 0);
	free(dst);
}

static void test_payload_flip_detected(void **state)
{
	struct tfs_buf obj = { 0 };
	uint8_t *buf = malloc(MIB);

	(void)state;
	assert_non_null(buf);
	/* A zstd payload: every byte. */
	fill_compressible(buf, 4095);
	encode_ok(TFS_OBJ_CHUNK, TFS_CODEC_ZSTD, buf, 4095, &obj);
	assert_int_equal(obj.data[7], TFS_CODEC_ZSTD);
	check_flips(&obj, 4095, TFS_OBJ_HEADER_SIZE, obj.len, 1);
	/* A raw payload: every byte. */
	fill_random(buf, 4095, 5);
	encode_ok(TFS_OBJ_CHUNK, TFS_CODEC_RAW, buf, 4095, &obj);
	check_flips(&obj, 4095, TFS_OBJ_HEADER_SIZE, obj.len, 1);
	/* One byte of payload. */
	encode_ok(TFS_OBJ_CHUNK, TFS_CODEC_RAW, "q", 1, &obj);
	check_flips(&obj, 1, TFS_OBJ_HEADER_SIZE, obj.len, 1);
	/* A 1 MiB zstd payload and a 1 MiB raw payload: spread-out positions, both ends. */
	fill_compressible(buf, MIB);
	encode_ok(TFS_OBJ_CHUNK, TFS_CODEC_ZSTD, buf, MIB, &obj);
	check_flips(&obj, MIB, TFS_OBJ_HEADER_SIZE, obj.len, 97);
	check_flips(&obj, MIB, obj.len - 1, obj.len, 1);
	fill_random(buf, MIB, 6);
	encode_ok(TFS_OBJ_CHUNK, TFS_CODEC_RAW, buf, MIB, &obj);
	check_flips(&obj, MIB, TFS_OBJ_HEADER_SIZE, obj.len, 65537);
	check_flips(&obj, MIB, obj.len - 1, obj.len, 1);
	tfs_buf_free(&obj);
	free(buf);
}

static void test_header_flip_detected(void **state)
{
	struct tfs_buf obj = { 0 };
	uint8_t buf[4095];

	(void)state;
	for (int codec = TFS_CODEC_RAW; codec <= TFS_CODEC_ZSTD; codec++) {
		fill_compressible(buf, sizeof(buf));
		encode_ok(TFS_OBJ_CHUNK, (enum tfs_codec_id)codec, buf, sizeof(buf), &obj);
		check_flips(&obj, sizeof(buf), 0, TFS_OBJ_HEADER_SIZE, 1);
	}
	/* The empty object is all header. */
	encode_ok(TFS_OBJ_CHUNK, TFS_CODEC_RAW, "", 0, &obj);
	assert_int_equal(obj.len, TFS_OBJ_HEADER_SIZE);
	check_flips(&obj, 0, 0, TFS_OBJ_HEADER_SIZE, 1);
	tfs_buf_free(&obj);
}

static void test_header_flip_rejected_by_header_parse(void **state)
{
	struct tfs_buf obj = { 0 };
	struct tfs_obj_header h;

	(void)state;
	encode_ok(TFS_OBJ_MANIFEST, TFS_CODEC_RAW, "manifest", 8, &obj);
	for (size_t pos = 0; pos < TFS_OBJ_HEADER_SIZE; pos++) {
		obj.data[pos] ^= 0x01;
		assert_int_equal(tfs_object_header(obj.data, obj.len, &h), -EIO);
		obj.data[pos] ^= 0x01;
	}
	tfs_buf_free(&obj);
}

static void test_truncated_object(void **state)
{
	struct tfs_buf obj = { 0 };
	struct tfs_obj_header h;
	uint8_t buf[4095], dst[4095];

	(void)state;
	for (int codec = TFS_CODEC_RAW; codec <= TFS_CODEC_ZSTD; codec++) {
		fill_compressible(buf, sizeof(buf));
		encode_ok(TFS_OBJ_CHUNK, (enum tfs_codec_id)codec, buf, sizeof(buf), &obj);
		for (size_t n = 0; n < obj.len; n++) {
			/* A copy of exactly n bytes, so a read past the end is caught. */
			uint8_t *cut = malloc(n ? n : 1);

			assert_non_null(cut);
			memcpy(cut, obj.data, n);
			assert_int_equal(tfs_object_decode(cut, n, TFS_OBJ_CHUNK, dst, sizeof(dst)),
					 -EIO);
			if (n < TFS_OBJ_HEADER_SIZE)
				assert_int_equal(tfs_object_header(cut, n, &h), -EIO);
			free(cut);
		}
	}
	tfs_buf_free(&obj);
}

static void test_extended_object(void **state)
{
	struct tfs_buf obj = { 0 };
	uint8_t dst[5];

	(void)state;
	encode_ok(TFS_OBJ_CHUNK, TFS_CODEC_RAW, "hello", 5, &obj);
	assert_int_equal(tfs_buf_append(&obj, "!", 1), 0);
	assert_int_equal(tfs_object_decode(obj.data, obj.len, TFS_OBJ_CHUNK, dst, 5), -EIO);
	tfs_buf_free(&obj);
}

static void test_wrong_expected_type(void **state)
{
	static const enum tfs_obj_type types[] = { TFS_OBJ_CHUNK, TFS_OBJ_MANIFEST,
						   TFS_OBJ_COMMIT };
	struct tfs_buf obj = { 0 };
	uint8_t dst[5], *alloc = NULL;
	size_t alloc_len;

	(void)state;
	for (size_t t = 0; t < 3; t++) {
		encode_ok(types[t], TFS_CODEC_RAW, "hello", 5, &obj);
		for (size_t e = 0; e < 3; e++) {
			int want = t == e ? 0 : -EIO;

			assert_int_equal(tfs_object_decode(obj.data, obj.len, types[e], dst, 5),
					 want);
			assert_int_equal(tfs_object_decode_alloc(obj.data, obj.len, types[e],
								 &alloc, &alloc_len),
					 want);
			if (!want)
				free(alloc);
		}
	}
	tfs_buf_free(&obj);
}

static void test_wrong_destination_size(void **state)
{
	struct tfs_buf obj = { 0 };
	uint8_t dst[16];

	(void)state;
	encode_ok(TFS_OBJ_CHUNK, TFS_CODEC_RAW, "hello", 5, &obj);
	assert_int_equal(tfs_object_decode(obj.data, obj.len, TFS_OBJ_CHUNK, dst, 4), -EIO);
	assert_int_equal(tfs_object_decode(obj.data, obj.len, TFS_OBJ_CHUNK, dst, 6), -EIO);
	tfs_buf_free(&obj);
}

static void test_future_version_is_eproto(void **state)
{
	struct tfs_buf obj = { 0 };
	struct tfs_obj_header h;
	uint8_t dst[5];

	(void)state;
	encode_ok(TFS_OBJ_CHUNK, TFS_CODEC_RAW, "hello", 5, &obj);
	obj.data[4] = TFS_OBJ_VERSION + 1;
	obj.data[5] = 0;
	reseal_header(obj.data);
	assert_int_equal(tfs_object_header(obj.data, obj.len, &h), -EPROTO);
	assert_int_not_equal(tfs_object_decode(obj.data, obj.len, TFS_OBJ_CHUNK, dst, 5), 0);

	/* A much newer version, high byte set. */
	obj.data[4] = 0;
	obj.data[5] = 1;
	reseal_header(obj.data);
	assert_int_equal(tfs_object_header(obj.data, obj.len, &h), -EPROTO);

	/* Without resealing, the same edit is plain damage. */
	obj.data[4] = TFS_OBJ_VERSION + 1;
	obj.data[5] = 0;
	assert_int_equal(tfs_object_header(obj.data, obj.len, &h), -EIO);
	tfs_buf_free(&obj);
}

static void test_resealed_header_edits(void **state)
{
	struct tfs_buf obj = { 0 };
	struct tfs_obj_header h;
	uint8_t dst[5];

	(void)state;
	/* A header-size field other than 48, with a valid header checksum. */
	encode_ok(TFS_OBJ_CHUNK, TFS_CODEC_RAW, "hello", 5, &obj);
	obj.data[8] = 64;
	reseal_header(obj.data);
	assert_int_equal(tfs_object_header(obj.data, obj.len, &h), -EIO);

	/* An unknown codec, with a valid header checksum: not decodable. */
	encode_ok(TFS_OBJ_CHUNK, TFS_CODEC_RAW, "hello", 5, &obj);
	obj.data[7] = 9;
	reseal_header(obj.data);
	assert_int_not_equal(tfs_object_header(obj.data, obj.len, &h), 0);
	assert_int_not_equal(tfs_object_decode(obj.data, obj.len, TFS_OBJ_CHUNK, dst, 5), 0);

	/* A payload checksum that no longer matches, with a valid header checksum. */
	encode_ok(TFS_OBJ_CHUNK, TFS_CODEC_RAW, "hello", 5, &obj);
	obj.data[32] ^= 1;
	reseal_header(obj.data);
	assert_int_equal(tfs_object_header(obj.data, obj.len, &h), 0);
	assert_int_equal(tfs_object_check(obj.data, obj.len), -EIO);
	assert_int_equal(check_and_decode(&obj, dst, 5), -EIO);

	/* A stored size that disagrees with the object length. */
	encode_ok(TFS_OBJ_CHUNK, TFS_CODEC_RAW, "hello", 5, &obj);
	obj.data[24] = 4;
	reseal_header(obj.data);
	assert_int_equal(tfs_object_decode(obj.data, obj.len, TFS_OBJ_CHUNK, dst, 5), -EIO);
	tfs_buf_free(&obj);
}

static void test_zstd_payload_with_wrong_raw_size(void **state)
{
	/* A valid zstd frame whose header claims a different raw size must not decode. */
	struct tfs_buf obj = { 0 };
	uint8_t buf[4096], dst[4096];

	(void)state;
	fill_compressible(buf, sizeof(buf));
	encode_ok(TFS_OBJ_CHUNK, TFS_CODEC_ZSTD, buf, sizeof(buf), &obj);
	assert_int_equal(obj.data[7], TFS_CODEC_ZSTD);
	put_le64(obj.data + 16, sizeof(buf) - 1);
	reseal_header(obj.data);
	assert_int_equal(tfs_object_decode(obj.data, obj.len, TFS_OBJ_CHUNK, dst, sizeof(buf) - 1),
			 -EIO);
	put_le64(obj.data + 16, sizeof(buf) + 0);
	obj.data[7] = TFS_CODEC_RAW; /* zstd bytes labelled raw: sizes disagree */
	reseal_header(obj.data);
	assert_int_equal(tfs_object_decode(obj.data, obj.len, TFS_OBJ_CHUNK, dst, sizeof(buf)),
			 -EIO);
	tfs_buf_free(&obj);
}

/* A manifest that would expand 64x and more past 16 MiB is a bomb: refused before the
 * allocation. A chunk may expand as it likes (a tensor of zeros does). */
static void test_metadata_bomb_refused(void **state)
{
	const size_t n = 64u << 20;
	char *text = malloc(n);
	struct tfs_buf obj = { 0 }, chunk = { 0 };
	uint8_t *out = NULL;
	size_t out_len = 0;

	(void)state;
	assert_non_null(text);
	memset(text, ' ', n);
	assert_int_equal(tfs_object_encode(TFS_OBJ_MANIFEST, TFS_CODEC_ZSTD, 3, text, n, &obj), 0);
	assert_true(obj.len < n / 1000);
	assert_int_equal(
		tfs_object_decode_alloc(obj.data, obj.len, TFS_OBJ_MANIFEST, &out, &out_len), -EIO);
	assert_null(out);
	assert_int_equal(tfs_object_encode(TFS_OBJ_CHUNK, TFS_CODEC_ZSTD, 3, text, n, &chunk), 0);
	assert_int_equal(
		tfs_object_decode_alloc(chunk.data, chunk.len, TFS_OBJ_CHUNK, &out, &out_len), 0);
	assert_int_equal(out_len, n);
	free(out);
	/* Under 16 MiB any ratio is taken: small manifests stay readable. */
	tfs_buf_free(&obj);
	assert_int_equal(
		tfs_object_encode(TFS_OBJ_MANIFEST, TFS_CODEC_ZSTD, 3, text, 1u << 20, &obj), 0);
	assert_int_equal(
		tfs_object_decode_alloc(obj.data, obj.len, TFS_OBJ_MANIFEST, &out, &out_len), 0);
	free(out);
	tfs_buf_free(&obj);
	tfs_buf_free(&chunk);
	free(text);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_payload_flip_detected),
		cmocka_unit_test(test_header_flip_detected),
		cmocka_unit_test(test_header_flip_rejected_by_header_parse),
		cmocka_unit_test(test_truncated_object),
		cmocka_unit_test(test_extended_object),
		cmocka_unit_test(test_wrong_expected_type),
		cmocka_unit_test(test_wrong_destination_size),
		cmocka_unit_test(test_future_version_is_eproto),
		cmocka_unit_test(test_resealed_header_edits),
		cmocka_unit_test(test_zstd_payload_with_wrong_raw_size),
		cmocka_unit_test(test_metadata_bomb_refused),
	};

	if (getenv("TFS_TEST_FILTER"))
		cmocka_set_test_filter(getenv("TFS_TEST_FILTER"));
	return cmocka_run_group_tests_name("object_damage", tests, NULL, NULL);
}
