/* SPDX-License-Identifier: MIT */
/* Unit tests for core/object: content ids, codecs, round trips and the envelope's header. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <xxhash.h>
#define ZSTD_STATIC_LINKING_ONLY /* ZSTD_frameHeaderSize */
#include <zstd.h>

#include "object_fixture.h"

/* SHA-256("abc") from FIPS 180-2, appendix B.1. */
static const char abc_sha256[] = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad";

/* --- ids ------------------------------------------------------------------------------------ */

static void test_id_of_abc_is_sha256(void **state)
{
	struct tfs_id id;
	char hex[TFS_ID_HEX];

	(void)state;
	tfs_id_of("abc", 3, &id);
	tfs_id_hex(&id, hex);
	assert_string_equal(hex, abc_sha256);
	assert_int_equal(strlen(hex), TFS_ID_HEX - 1);
	assert_false(tfs_id_is_zero(&id));
}

static void test_id_of_empty_input(void **state)
{
	struct tfs_id id;
	char hex[TFS_ID_HEX];

	(void)state;
	tfs_id_of("", 0, &id);
	tfs_id_hex(&id, hex);
	assert_string_equal(hex,
			    "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
}

static void test_id_hex_parse_round_trip(void **state)
{
	uint8_t data[100];

	(void)state;
	for (unsigned seed = 1; seed <= 50; seed++) {
		struct tfs_id id, back;
		char hex[TFS_ID_HEX];

		fill_random(data, sizeof(data), seed);
		tfs_id_of(data, seed, &id);
		tfs_id_hex(&id, hex);
		for (int i = 0; i < TFS_ID_HEX - 1; i++)
			assert_non_null(strchr("0123456789abcdef", hex[i]));
		assert_int_equal(tfs_id_parse(hex, &back), 0);
		assert_true(tfs_id_eq(&id, &back));
	}
}

static void test_id_parse_accepts_uppercase(void **state)
{
	struct tfs_id lo, up;
	char upper[TFS_ID_HEX];

	(void)state;
	for (int i = 0; i < TFS_ID_HEX; i++)
		upper[i] = (char)(abc_sha256[i] >= 'a' && abc_sha256[i] <= 'f'
					  ? abc_sha256[i] - 'a' + 'A'
					  : abc_sha256[i]);
	assert_int_equal(tfs_id_parse(abc_sha256, &lo), 0);
	assert_int_equal(tfs_id_parse(upper, &up), 0);
	assert_true(tfs_id_eq(&lo, &up));
}

static void test_id_parse_rejects_bad_hex(void **state)
{
	char buf[TFS_ID_HEX + 8];
	struct tfs_id id;

	(void)state;
	assert_int_equal(tfs_id_parse("", &id), -EINVAL);
	assert_int_equal(tfs_id_parse("abc", &id), -EINVAL);
	assert_int_equal(tfs_id_parse("zz", &id), -EINVAL);

	/* Every length short of 64 digits. */
	for (size_t n = 0; n < TFS_ID_HEX - 1; n++) {
		memcpy(buf, abc_sha256, n);
		buf[n] = 0;
		assert_int_equal(tfs_id_parse(buf, &id), -EINVAL);
	}
	/* A non-hex character at every position. */
	for (size_t pos = 0; pos < TFS_ID_HEX - 1; pos++) {
		static const char bad[] = { 'g', 'G', 'x', ' ', '-', ':', '\n', '/' };

		for (size_t k = 0; k < sizeof(bad); k++) {
			memcpy(buf, abc_sha256, TFS_ID_HEX);
			buf[pos] = bad[k];
			assert_int_equal(tfs_id_parse(buf, &id), -EINVAL);
		}
	}
	/* 65 digits is not an id either. */
	memcpy(buf, abc_sha256, TFS_ID_HEX - 1);
	buf[TFS_ID_HEX - 1] = 'a';
	buf[TFS_ID_HEX] = 0;
	assert_int_equal(tfs_id_parse(buf, &id), -EINVAL);
	/* Trailing garbage glued to the digits. */
	memcpy(buf, abc_sha256, TFS_ID_HEX - 1);
	strcpy(buf + TFS_ID_HEX - 1, "x");
	assert_int_equal(tfs_id_parse(buf, &id), -EINVAL);
}

static void test_id_parse_allows_line_terminator(void **state)
{
	/* Refs are stored as "<hex>\n" and parsed in place. */
	char buf[TFS_ID_HEX + 1];
	struct tfs_id id, want;

	(void)state;
	assert_int_equal(tfs_id_parse(abc_sha256, &want), 0);
	memcpy(buf, abc_sha256, TFS_ID_HEX - 1);
	buf[TFS_ID_HEX - 1] = '\n';
	buf[TFS_ID_HEX] = 0;
	assert_int_equal(tfs_id_parse(buf, &id), 0);
	assert_true(tfs_id_eq(&id, &want));
}

static void test_id_eq_and_is_zero(void **state)
{
	struct tfs_id a, b, zero;

	(void)state;
	memset(&zero, 0, sizeof(zero));
	tfs_id_of("a", 1, &a);
	tfs_id_of("b", 1, &b);
	assert_true(tfs_id_is_zero(&zero));
	assert_false(tfs_id_is_zero(&a));
	assert_true(tfs_id_eq(&a, &a));
	assert_false(tfs_id_eq(&a, &b));
}

/* --- codecs --------------------------------------------------------------------------------- */

static void test_codec_lookup(void **state)
{
	(void)state;
	assert_non_null(tfs_codec_by_name("raw"));
	assert_non_null(tfs_codec_by_name("zstd"));
	assert_int_equal(tfs_codec_by_name("raw")->id, TFS_CODEC_RAW);
	assert_int_equal(tfs_codec_by_name("zstd")->id, TFS_CODEC_ZSTD);
	assert_ptr_equal(tfs_codec_by_id(TFS_CODEC_RAW), tfs_codec_by_name("raw"));
	assert_ptr_equal(tfs_codec_by_id(TFS_CODEC_ZSTD), tfs_codec_by_name("zstd"));
	assert_string_equal(tfs_codec_by_id(TFS_CODEC_ZSTD)->name, "zstd");
	assert_null(tfs_codec_by_name("lz4"));
	assert_null(tfs_codec_by_name(""));
	assert_null(tfs_codec_by_id(2));
	assert_null(tfs_codec_by_id(255));
	assert_null(tfs_codec_by_id(~0u));
}

static void test_encode_rejects_unknown_codec(void **state)
{
	struct tfs_buf out = { 0 };

	(void)state;
	assert_int_equal(tfs_object_encode(TFS_OBJ_CHUNK, (enum tfs_codec_id)7, 0, "x", 1, &out),
			 -EINVAL);
	tfs_buf_free(&out);
}

/* --- encode / decode round trips ------------------------------------------------------------ */

static void round_trip(enum tfs_codec_id codec, const uint8_t *raw, size_t len,
		       enum tfs_codec_id want_codec)
{
	struct tfs_buf obj = { 0 };
	struct tfs_obj_header h;
	uint8_t *dst = malloc(len ? len : 1), *alloc = NULL;
	size_t alloc_len = 12345;

	assert_non_null(dst);
	encode_ok(TFS_OBJ_CHUNK, codec, raw, len, &obj);
	assert_int_equal(tfs_object_header(obj.data, obj.len, &h), 0);
	assert_int_equal(h.version, 1); /* framed chunks alone need version 2 */
	assert_int_equal(h.type, TFS_OBJ_CHUNK);
	assert_int_equal(h.codec, want_codec);
	assert_int_equal(h.raw_size, len);
	assert_int_equal(h.stored_size, obj.len - TFS_OBJ_HEADER_SIZE);
	assert_int_equal(obj.data[7], want_codec);
	if (want_codec == TFS_CODEC_RAW)
		assert_int_equal(h.stored_size, len);
	else
		assert_true(h.stored_size + len / 32 < len);

	memset(dst, 0xa5, len ? len : 1);
	assert_int_equal(tfs_object_decode(obj.data, obj.len, TFS_OBJ_CHUNK, dst, len), 0);
	if (len)
		assert_memory_equal(dst, raw, len);

	assert_int_equal(
		tfs_object_decode_alloc(obj.data, obj.len, TFS_OBJ_CHUNK, &alloc, &alloc_len), 0);
	assert_non_null(alloc);
	assert_int_equal(alloc_len, len);
	if (len)
		assert_memory_equal(alloc, raw, len);
	assert_int_equal(alloc[len], 0); /* NUL-terminated for text objects */

	free(alloc);
	free(dst);
	tfs_buf_free(&obj);
}

static const size_t sizes[] = { 0, 1, 4095, MIB };

static void test_round_trip_raw_codec(void **state)
{
	uint8_t *buf = malloc(MIB);

	(void)state;
	assert_non_null(buf);
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		fill_compressible(buf, sizes[i]);
		round_trip(TFS_CODEC_RAW, buf, sizes[i], TFS_CODEC_RAW);
		fill_random(buf, sizes[i], 1000 + i);
		round_trip(TFS_CODEC_RAW, buf, sizes[i], TFS_CODEC_RAW);
	}
	free(buf);
}

static void test_round_trip_zstd_compressible(void **state)
{
	uint8_t *buf = malloc(MIB);

	(void)state;
	assert_non_null(buf);
	/* Sizes 0 and 1 cannot shrink by 1/32, so they are stored raw. */
	fill_compressible(buf, MIB);
	round_trip(TFS_CODEC_ZSTD, buf, 0, TFS_CODEC_RAW);
	round_trip(TFS_CODEC_ZSTD, buf, 1, TFS_CODEC_RAW);
	round_trip(TFS_CODEC_ZSTD, buf, 4095, TFS_CODEC_ZSTD);
	round_trip(TFS_CODEC_ZSTD, buf, MIB, TFS_CODEC_ZSTD);
	free(buf);
}

static void test_round_trip_zstd_random_falls_back_to_raw(void **state)
{
	uint8_t *buf = malloc(MIB);

	(void)state;
	assert_non_null(buf);
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		fill_random(buf, sizes[i], 2000 + i);
		round_trip(TFS_CODEC_ZSTD, buf, sizes[i], TFS_CODEC_RAW);
	}
	free(buf);
}

/* 16 KiB of bytes, each one 0 with probability zero_in_256 / 256 and else uniform, repeated
 * four times: matches take three quarters of it whatever the literals' entropy. */
static void fill_noisy_repeats(uint8_t *p, unsigned zero_in_256, uint64_t seed)
{
	fill_random(p, 16u << 10, seed);
	for (size_t i = 0; i + 1 < 16u << 10; i += 2)
		if (p[i + 1] < zero_in_256)
			p[i] = 0;
	for (int k = 1; k < 4; k++)
		memcpy(p + (size_t)k * (16u << 10), p, 16u << 10);
}

/* The type of the literals of a zstd chunk's first block: 0 raw, 2 Huffman-coded. */
static int literals_type(const struct tfs_buf *obj)
{
	const uint8_t *z = obj->data + TFS_OBJ_HEADER_SIZE;
	const size_t zlen = obj->len - TFS_OBJ_HEADER_SIZE;
	size_t fh = ZSTD_frameHeaderSize(z, zlen);

	assert_false(ZSTD_isError(fh));
	assert_int_equal((z[fh] >> 1) & 3, 2); /* a compressed block */
	return z[fh + 3] & 3;
}

/* Literals whose bytes carry over 7.75 bits each are not entropy-coded (that could save under
 * 1/32 of them): the frame is still compressed by its matches, and reads back the same. */
static void test_high_entropy_literals_are_not_entropy_coded(void **state)
{
	enum { LEN = 64u << 10 };
	struct tfs_buf obj = { 0 };
	uint8_t *buf = malloc(LEN), *back = malloc(LEN);

	(void)state;
	assert_non_null(buf);
	assert_non_null(back);
	/* Half the bytes 0 one time in 8 (about 7.8 bits a byte: Huffman would save 2 percent, and
	 * zstd alone spends it), then one time in 2 (about 6.8 bits: it is Huffman-coded). */
	for (int k = 0; k < 2; k++) {
		fill_noisy_repeats(buf, k ? 128 : 32, 77 + k);
		assert_int_equal(
			tfs_object_encode(TFS_OBJ_CHUNK, TFS_CODEC_ZSTD, 3, buf, LEN, &obj), 0);
		assert_int_equal(obj.data[7], TFS_CODEC_ZSTD);
		assert_true(obj.len < LEN / 2);
		assert_int_equal(literals_type(&obj), k ? 2 : 0);
		assert_int_equal(tfs_object_decode(obj.data, obj.len, TFS_OBJ_CHUNK, back, LEN), 0);
		assert_memory_equal(back, buf, LEN);
	}
	tfs_buf_free(&obj);
	free(buf);
	free(back);
}

/* The bytes of fixed-size values are sampled lane by lane alike: float32 noise, whose mantissas'
 * low bytes carry 8 bits but whose exponent bytes carry one, still has its literals
 * Huffman-coded. */
static void test_every_byte_of_a_value_counts(void **state)
{
	enum { N = 16384 };
	struct tfs_buf obj = { 0 };
	float *v = malloc(N * sizeof(float));
	uint8_t r[4 * N];

	(void)state;
	assert_non_null(v);
	fill_random(r, sizeof(r), 5);
	for (size_t i = 0; i < N; i++) {
		uint32_t u;

		memcpy(&u, r + 4 * i, 4);
		v[i] = (float)((double)u / 4294967296.0 * 2.0 + 1.0); /* [1, 3): 2 exponents */
	}
	assert_int_equal(
		tfs_object_encode(TFS_OBJ_CHUNK, TFS_CODEC_ZSTD, 3, v, N * sizeof(float), &obj), 0);
	assert_int_equal(obj.data[7], TFS_CODEC_ZSTD);
	assert_int_equal(literals_type(&obj), 2);
	tfs_buf_free(&obj);
	free(v);
}

static void test_incompressible_header_byte7_is_raw(void **state)
{
	struct tfs_buf obj = { 0 };
	uint8_t *buf = malloc(MIB);

	(void)state;
	assert_non_null(buf);
	fill_random(buf, MIB, 77);
	encode_ok(TFS_OBJ_CHUNK, TFS_CODEC_ZSTD, buf, MIB, &obj);
	assert_int_equal(obj.data[7], 0);
	assert_int_equal(obj.len, TFS_OBJ_HEADER_SIZE + MIB);
	assert_memory_equal(obj.data + TFS_OBJ_HEADER_SIZE, buf, MIB);

	/* Mostly random with a compressible tail that saves less than 1/32: still raw. */
	fill_compressible(buf + MIB - MIB / 64, MIB / 64);
	encode_ok(TFS_OBJ_CHUNK, TFS_CODEC_ZSTD, buf, MIB, &obj);
	assert_int_equal(obj.data[7], 0);

	/* Half compressible saves far more than 1/32: zstd. */
	fill_compressible(buf, MIB / 2);
	encode_ok(TFS_OBJ_CHUNK, TFS_CODEC_ZSTD, buf, MIB, &obj);
	assert_int_equal(obj.data[7], 1);
	tfs_buf_free(&obj);
	free(buf);
}

static void test_encode_resets_output_buffer(void **state)
{
	struct tfs_buf obj = { 0 };
	size_t first;

	(void)state;
	encode_ok(TFS_OBJ_COMMIT, TFS_CODEC_RAW, "hello", 5, &obj);
	first = obj.len;
	encode_ok(TFS_OBJ_COMMIT, TFS_CODEC_RAW, "hello", 5, &obj);
	assert_int_equal(obj.len, first);
	assert_int_equal(obj.len, TFS_OBJ_HEADER_SIZE + 5);
	assert_memory_equal(obj.data, "TFSO", 4);
	tfs_buf_free(&obj);
}

static void test_encode_is_deterministic(void **state)
{
	struct tfs_buf a = { 0 }, b = { 0 };
	uint8_t buf[8192];

	(void)state;
	fill_compressible(buf, sizeof(buf));
	encode_ok(TFS_OBJ_MANIFEST, TFS_CODEC_ZSTD, buf, sizeof(buf), &a);
	encode_ok(TFS_OBJ_MANIFEST, TFS_CODEC_ZSTD, buf, sizeof(buf), &b);
	assert_int_equal(a.len, b.len);
	assert_memory_equal(a.data, b.data, a.len);
	tfs_buf_free(&a);
	tfs_buf_free(&b);
}

/* --- header fields -------------------------------------------------------------------------- */

static void test_header_fields(void **state)
{
	static const enum tfs_obj_type types[] = { TFS_OBJ_CHUNK, TFS_OBJ_MANIFEST,
						   TFS_OBJ_COMMIT };
	struct tfs_buf obj = { 0 };
	uint8_t buf[4096];

	(void)state;
	fill_compressible(buf, sizeof(buf));
	for (size_t t = 0; t < sizeof(types) / sizeof(types[0]); t++) {
		for (int codec = TFS_CODEC_RAW; codec <= TFS_CODEC_ZSTD; codec++) {
			struct tfs_obj_header h;
			const uint8_t *p;

			encode_ok(types[t], (enum tfs_codec_id)codec, buf, sizeof(buf), &obj);
			p = obj.data;
			assert_memory_equal(p, "TFSO", 4);
			assert_int_equal(get_le(p + 4, 2), 1);
			assert_int_equal(p[6], types[t]);
			assert_int_equal(p[7], codec);
			assert_int_equal(get_le(p + 8, 4), TFS_OBJ_HEADER_SIZE);
			assert_int_equal(get_le(p + 12, 4), 0);
			assert_int_equal(get_le(p + 16, 8), sizeof(buf));
			assert_int_equal(get_le(p + 24, 8), obj.len - TFS_OBJ_HEADER_SIZE);
			assert_int_equal(get_le(p + 32, 8),
					 XXH3_64bits(p + TFS_OBJ_HEADER_SIZE,
						     obj.len - TFS_OBJ_HEADER_SIZE));
			assert_int_equal(get_le(p + 40, 8), XXH3_64bits(p, 40));

			assert_int_equal(tfs_object_header(p, obj.len, &h), 0);
			assert_int_equal(h.version, 1);
			assert_int_equal(h.type, types[t]);
			assert_int_equal(h.codec, codec);
			assert_int_equal(h.raw_size, sizeof(buf));
			assert_int_equal(h.stored_size, obj.len - TFS_OBJ_HEADER_SIZE);
			assert_int_equal(h.checksum, get_le(p + 32, 8));
			/* The header alone is enough to parse it. */
			assert_int_equal(tfs_object_header(p, TFS_OBJ_HEADER_SIZE, &h), 0);
		}
	}
	tfs_buf_free(&obj);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_id_of_abc_is_sha256),
		cmocka_unit_test(test_id_of_empty_input),
		cmocka_unit_test(test_id_hex_parse_round_trip),
		cmocka_unit_test(test_id_parse_accepts_uppercase),
		cmocka_unit_test(test_id_parse_rejects_bad_hex),
		cmocka_unit_test(test_id_parse_allows_line_terminator),
		cmocka_unit_test(test_id_eq_and_is_zero),
		cmocka_unit_test(test_codec_lookup),
		cmocka_unit_test(test_encode_rejects_unknown_codec),
		cmocka_unit_test(test_round_trip_raw_codec),
		cmocka_unit_test(test_round_trip_zstd_compressible),
		cmocka_unit_test(test_round_trip_zstd_random_falls_back_to_raw),
		cmocka_unit_test(test_high_entropy_literals_are_not_entropy_coded),
		cmocka_unit_test(test_every_byte_of_a_value_counts),
		cmocka_unit_test(test_incompressible_header_byte7_is_raw),
		cmocka_unit_test(test_encode_resets_output_buffer),
		cmocka_unit_test(test_encode_is_deterministic),
		cmocka_unit_test(test_header_fields),
	};

	if (getenv("TFS_TEST_FILTER"))
		cmocka_set_test_filter(getenv("TFS_TEST_FILTER"));
	return cmocka_run_group_tests_name("object", tests, NULL, NULL);
}
