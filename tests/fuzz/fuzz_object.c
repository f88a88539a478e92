/* SPDX-License-Identifier: MIT */
/* Fuzz target for the object envelope: tfs_object_header, _check, _decode_alloc and encoding. */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <xxhash.h>
#include <zstd.h>

#include "fuzz_common.h"
#include "object.h"

/* The first input byte steers the harness; the rest is the object. Random bytes almost never
 * carry valid XXH3 checksums, so the harness can repair them to reach the code behind them. */
#define FIX_HEADER_SUM 0x01u /* recompute header bytes 40..47 */
#define FIX_PAYLOAD 0x02u    /* set stored size to the payload length and recompute its XXH3 */
#define FIX_RAW_SIZE 0x04u   /* set raw size to what the payload decodes to (raw, or the frame's) */
#define ENCODE_MODE 0x08u    /* instead: encode the rest as an object and decode it back */
#define EXPECT_SHIFT 4	     /* bits 4..5: the type the caller expects (0..3) */

static void put_le64(uint8_t *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static uint64_t get_le64(const uint8_t *p)
{
	uint64_t v = 0;

	for (int i = 7; i >= 0; i--)
		v = v << 8 | p[i];
	return v;
}

static void roundtrip(enum tfs_obj_type type, enum tfs_codec_id codec, const uint8_t *raw,
		      size_t len)
{
	struct tfs_buf obj = { 0 };
	struct tfs_obj_header h;
	uint8_t *back = NULL;
	size_t back_len = 0;

	FUZZ_CHECK(tfs_object_encode(type, codec, 1, raw, len, &obj) == 0);
	FUZZ_CHECK(obj.len >= TFS_OBJ_HEADER_SIZE);
	FUZZ_CHECK(tfs_object_header(obj.data, obj.len, &h) == 0);
	FUZZ_CHECK(h.type == type && h.raw_size == len);
	FUZZ_CHECK(h.stored_size == obj.len - TFS_OBJ_HEADER_SIZE);
	/* zstd is used only when it saves at least 1/32; otherwise the object is raw. */
	FUZZ_CHECK(h.codec == TFS_CODEC_RAW
			   ? h.stored_size == len
			   : codec == TFS_CODEC_ZSTD && h.stored_size + len / 32 < len);
	FUZZ_CHECK(tfs_object_check(obj.data, obj.len) == 0);
	FUZZ_CHECK(tfs_object_decode_alloc(obj.data, obj.len, type, &back, &back_len) == 0);
	FUZZ_CHECK(back_len == len && back[len] == 0);
	FUZZ_CHECK(len == 0 || !memcmp(back, raw, len));
	free(back);
	/* The wrong expected type is refused, and the check catches a flipped payload bit. */
	FUZZ_CHECK(tfs_object_decode_alloc(obj.data, obj.len,
					   type == TFS_OBJ_CHUNK ? TFS_OBJ_COMMIT : TFS_OBJ_CHUNK,
					   &back, &back_len) == -EIO);
	if (obj.len > TFS_OBJ_HEADER_SIZE) {
		obj.data[obj.len - 1] ^= 0x10;
		FUZZ_CHECK(tfs_object_check(obj.data, obj.len) == -EIO);
	}
	tfs_buf_free(&obj);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len)
{
	struct tfs_obj_header h;
	enum tfs_obj_type expect;
	uint8_t *obj, *out = NULL;
	size_t n, out_len = 0;
	unsigned mode;
	int rc, hrc, crc;

	if (len < 1)
		return 0;
	mode = data[0];
	expect = (enum tfs_obj_type)((mode >> EXPECT_SHIFT) & 3);
	data++;
	len--;
	if (mode & ENCODE_MODE) {
		const enum tfs_obj_type type = expect ? expect : TFS_OBJ_CHUNK;

		roundtrip(type, TFS_CODEC_RAW, data, len);
		roundtrip(type, TFS_CODEC_ZSTD, data, len);
		return 0;
	}

	/* An exact-size copy, so that ASan sees any read past the object. */
	n = len;
	obj = malloc(n ? n : 1);
	if (!obj)
		return 0;
	if (n)
		memcpy(obj, data, n);
	if (n >= TFS_OBJ_HEADER_SIZE) {
		const uint8_t *payload = obj + TFS_OBJ_HEADER_SIZE;
		const size_t plen = n - TFS_OBJ_HEADER_SIZE;

		if (mode & FIX_PAYLOAD) {
			put_le64(obj + 24, plen);
			put_le64(obj + 32, XXH3_64bits(payload, plen));
		}
		if (mode & FIX_RAW_SIZE) {
			const unsigned long long fcs = ZSTD_getFrameContentSize(payload, plen);

			/* Not for a payload that is no frame at all: decode_alloc would then
			 * attempt malloc(2^64 - 1) (ENOMEM, fine) and ASan warn on every run. */
			if (obj[7] == TFS_CODEC_RAW)
				put_le64(obj + 16, plen);
			else if (fcs != ZSTD_CONTENTSIZE_ERROR)
				put_le64(obj + 16, (uint64_t)fcs);
		}
		if (mode & FIX_HEADER_SUM)
			put_le64(obj + 40, XXH3_64bits(obj, 40));
	}

	hrc = tfs_object_header(obj, n, &h);
	FUZZ_CHECK(hrc == 0 || hrc == -EIO || hrc == -EPROTO);
	if (n < TFS_OBJ_HEADER_SIZE || memcmp(obj, "TFSO", 4))
		FUZZ_CHECK(hrc == -EIO);
	if (!hrc) {
		FUZZ_CHECK(h.version <= TFS_OBJ_VERSION);
		FUZZ_CHECK(tfs_codec_by_id(h.codec) != NULL || h.codec == TFS_CODEC_FRAMES);
		FUZZ_CHECK(get_le64(obj + 40) == XXH3_64bits(obj, 40));
		FUZZ_CHECK(h.raw_size == get_le64(obj + 16));
		FUZZ_CHECK(h.stored_size == get_le64(obj + 24));
	}

	crc = tfs_object_check(obj, n);
	FUZZ_CHECK(crc == 0 || crc == -EIO || crc == -EPROTO);
	if (hrc)
		FUZZ_CHECK(crc == hrc);
	if (!crc)
		FUZZ_CHECK(!hrc && h.stored_size == n - TFS_OBJ_HEADER_SIZE);

	/* Any raw size goes (a frame may declare any content size): fuzz_common.h makes huge
	 * allocations fail, as they may in production, instead of ending the run. */
	rc = tfs_object_decode_alloc(obj, n, expect, &out, &out_len);
	FUZZ_CHECK(rc == 0 || rc == -EIO || rc == -EPROTO || rc == -ENOMEM);
	if (hrc)
		FUZZ_CHECK(rc == hrc);
	if (!rc) {
		/* Everything decode checks held (the payload checksum is tfs_object_check's:
		 * readers decode only what passed it, but no input may make decode misbehave). */
		FUZZ_CHECK(!hrc && h.type == expect && out_len == h.raw_size);
		FUZZ_CHECK(h.stored_size == n - TFS_OBJ_HEADER_SIZE);
		FUZZ_CHECK(out[out_len] == 0);
		if (h.codec == TFS_CODEC_RAW)
			FUZZ_CHECK(
				out_len == h.stored_size &&
				(out_len == 0 || !memcmp(out, obj + TFS_OBJ_HEADER_SIZE, out_len)));
		/* decode into a caller buffer agrees, and refuses any other size. */
		{
			uint8_t *dst = malloc(out_len + 1);

			FUZZ_CHECK(dst);
			FUZZ_CHECK(tfs_object_decode(obj, n, expect, dst, out_len) == 0);
			FUZZ_CHECK(out_len == 0 || !memcmp(dst, out, out_len));
			FUZZ_CHECK(tfs_object_decode(obj, n, expect, dst, out_len + 1) == -EIO);
			free(dst);
		}
		free(out);
	}
	free(obj);
	return 0;
}
