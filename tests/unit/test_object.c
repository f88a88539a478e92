/* SPDX-License-Identifier: MIT */
/* Unit tests for core/object: content ids, codecs and the checksummed object envelope. */
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

#include "object.h"
#include "util.h"

#define MIB (1024u * 1024u)

/* SHA-256("abc") from FIPS 180-2, appendix B.1. */
static const char abc_sha256[] = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad";

/* Deterministic pseudo-random bytes (xorshift64*), so failures reproduce. */
static void fill_random(uint8_t *p, size_t n, uint64_t seed)
{
	uint64_t x = seed | 1;

	for (size_t i = 0; i < n; i++) {
		x ^= x >> 12;
		x ^= x << 25;
		x ^= x >> 27;
		p[i] = (uint8_t)((x * 0x2545F4914F6CDD1Dull) >> 56);
	}
}

/* Text-like data that zstd shrinks a lot. */
static void fill_compressible(uint8_t *p, size_t n)
{
	static const char words[] = "tensor lake chunk manifest commit column row shape dtype ";

	for (size_t i = 0; i < n; i++)
		p[i] = (uint8_t)words[(i * 7 / 5) % (sizeof(words) - 1)];
}

static uint64_t get_le(const uint8_t *p, int n)
{
	uint64_t v = 0;

	for (int i = n - 1; i >= 0; i--)
		v = v << 8 | p[i];
	return v;
}

static void put_le64(uint8_t *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

/* Recompute the header checksum after a deliberate header edit. */
static void reseal_header(uint8_t *obj)
{
	put_le64(obj + 40, XXH3_64bits(obj, 40));
}

static void encode_ok(enum tfs_obj_type type, enum tfs_codec_id codec, const void *raw, size_t len,
		      struct tfs_buf *out)
{
	assert_int_equal(tfs_object_encode(type, codec, 3, raw, len, out), 0);
	assert_true(out->len >= TFS_OBJ_HEADER_SIZE);
}

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
		assert_int_equal(tfs_object_encode(TFS_OBJ_CHUNK, TFS_CODEC_ZSTD, 3, buf, LEN, &obj),
				 0);
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
	assert_int_equal(tfs_object_encode(TFS_OBJ_CHUNK, TFS_CODEC_ZSTD, 3, v, N * sizeof(float),
					   &obj),
			 0);
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
	return cmocka_run_group_tests_name("object", tests, NULL, NULL);
}
