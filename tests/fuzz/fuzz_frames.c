/* SPDX-License-Identifier: MIT */
/* Fuzz target for framed chunks: the frame index parser and one-frame decoding (what a reader of
 * random rows runs on bytes fetched by ranged reads), and the framed encoder's round trip. */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <xxhash.h>

#include "fuzz_common.h"
#include "object.h"

/* The first input byte steers the harness; the rest is the object (or, encoding, raw bytes). */
#define FIX_HEADER_SUM 0x01u /* recompute header bytes 40..47 */
#define FIX_INDEX_SUM 0x02u  /* recompute the index's own XXH3, so its fields get parsed */
#define FIX_SIZES 0x04u	     /* stored size = what follows the header */
/* Encode the rest as a framed chunk and read it back; bits 0..2 then pick the filter's line. */
#define ENCODE_MODE 0x08u

static void put_le64(uint8_t *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

/* Every frame of t decoded alone into back, which then holds raw. */
static void decode_by_frame(const struct tfs_buf *obj, const struct tfs_frames *t, uint8_t *back,
			    const uint8_t *raw, size_t len)
{
	memset(back, 0, len);
	for (uint32_t i = 0; i < t->n; i++)
		FUZZ_CHECK(tfs_frame_decode(t, i, obj->data + t->f[i].off,
					    back + (size_t)i * t->frame_raw) == 0);
	FUZZ_CHECK(!memcmp(back, raw, len));
}

static void roundtrip(const uint8_t *raw, size_t len, int level, size_t line)
{
	struct tfs_buf obj = { 0 };
	struct tfs_frames *t = NULL;
	struct tfs_obj_header h;
	uint8_t *back = malloc(len ? len : 1);
	size_t ilen;
	int rc;

	FUZZ_CHECK(back);
	FUZZ_CHECK(tfs_chunk_encode(TFS_CODEC_ZSTD, level, TFS_FRAME_MIN, line, raw, len, &obj) ==
		   0);
	FUZZ_CHECK(tfs_object_check(obj.data, obj.len) == 0);
	FUZZ_CHECK(tfs_object_header(obj.data, obj.len, &h) == 0 && h.raw_size == len);
	/* Version 3 exactly when framed with a filter. */
	FUZZ_CHECK(h.version == (h.codec == TFS_CODEC_FRAMES ? (line ? 3u : 2u) : 1u));
	FUZZ_CHECK(tfs_object_decode(obj.data, obj.len, TFS_OBJ_CHUNK, back, len) == 0);
	FUZZ_CHECK(len == 0 || !memcmp(back, raw, len));
	rc = tfs_frames_index_len(obj.data, obj.len, &ilen);
	/* Framed exactly when over two frames. */
	FUZZ_CHECK(rc == (len > 2 * TFS_FRAME_MIN ? 0 : 1));
	if (rc == 0) {
		FUZZ_CHECK(tfs_frames_parse(obj.data, ilen, obj.len, &t) == 0);
		FUZZ_CHECK(t->line == line);
		/* Filtered only with the line, and not a frame kept as it is (a frame the filter
		 * does not help is compressed as it is instead). */
		for (uint32_t i = 0; i < t->n; i++)
			FUZZ_CHECK(!t->f[i].delta ||
				   (line && !t->f[i].stored && t->f[i].line == line));
		decode_by_frame(&obj, t, back, raw, len);
		free(t);
	}
	tfs_buf_free(&obj);
	free(back);
}

/* Rows of several lines (a ragged chunk): runs cut where the input says, each frame filtered
 * with its own line where it is not the chunk's (version 4), read back whole and by frame. */
static void roundtrip_runs(const uint8_t *raw, size_t len, const struct tfs_line_run *runs,
			   size_t nruns)
{
	struct tfs_buf obj = { 0 };
	struct tfs_frames *t = NULL;
	struct tfs_obj_header h;
	uint8_t *back = malloc(len ? len : 1);
	size_t ilen;
	int own = 0;

	FUZZ_CHECK(back);
	FUZZ_CHECK(tfs_chunk_encode_runs(TFS_CODEC_ZSTD, 1, TFS_FRAME_MIN, runs, nruns, raw, len,
					 &obj) == 0);
	FUZZ_CHECK(tfs_object_check(obj.data, obj.len) == 0);
	FUZZ_CHECK(tfs_object_header(obj.data, obj.len, &h) == 0 && h.raw_size == len);
	FUZZ_CHECK(tfs_object_decode(obj.data, obj.len, TFS_OBJ_CHUNK, back, len) == 0);
	FUZZ_CHECK(len == 0 || !memcmp(back, raw, len));
	if (tfs_frames_index_len(obj.data, obj.len, &ilen) == 0) {
		FUZZ_CHECK(tfs_frames_parse(obj.data, ilen, obj.len, &t) == 0);
		for (uint32_t i = 0; i < t->n; i++) {
			FUZZ_CHECK(!t->f[i].delta || (t->f[i].line && h.version >= 3));
			own |= t->f[i].delta && t->f[i].line != t->line;
		}
		FUZZ_CHECK(!own || h.version == 4);
		decode_by_frame(&obj, t, back, raw, len);
		free(t);
	}
	tfs_buf_free(&obj);
	free(back);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len)
{
	struct tfs_frames *t = NULL;
	uint8_t *obj, *dst;
	size_t ilen = 0, n;
	unsigned mode;
	int rc;

	if (len < 1)
		return 0;
	mode = data[0];
	data++;
	len--;
	if (mode & ENCODE_MODE) {
		/* Short inputs stretched past two frames, so that they are framed. */
		uint8_t *raw = calloc(1, 3 * TFS_FRAME_MIN + len);

		FUZZ_CHECK(raw);
		for (size_t i = 0; i < 3 * TFS_FRAME_MIN + len; i++)
			raw[i] = len ? data[i % len] : (uint8_t)i;
		static const size_t lines[8] = { 0, 1, 3, 15, 16, 17, 672, 5000 };
		const size_t line = lines[mode & 7];

		roundtrip(raw, 3 * TFS_FRAME_MIN + len, (mode >> 4) - 3, line);
		roundtrip(data, len, 1, line);
		{
			/* Three runs of three lines, cut where the first two bytes say. */
			const size_t all = 3 * TFS_FRAME_MIN + len;
			const size_t cut1 = all * (len ? data[0] : 85) / 256,
				     cut2 = cut1 + (all - cut1) * (len > 1 ? data[1] : 128) / 256;
			const struct tfs_line_run runs[3] = { { cut1, line },
							      { cut2, lines[(mode >> 3) & 7] },
							      { all, lines[(mode >> 5) & 7] } };

			roundtrip_runs(raw, all, runs, 3);
		}
		free(raw);
		return 0;
	}

	/* An exact-size copy, so that ASan sees any read past the object. */
	n = len;
	obj = malloc(n ? n : 1);
	FUZZ_CHECK(obj);
	if (n)
		memcpy(obj, data, n);
	if (n >= TFS_FRAMES_PROBE) {
		if (mode & FIX_SIZES)
			put_le64(obj + 24, n - TFS_OBJ_HEADER_SIZE);
		if (mode & FIX_HEADER_SUM)
			put_le64(obj + 40, XXH3_64bits(obj, 40));
	}
	rc = tfs_frames_index_len(obj, n, &ilen);
	FUZZ_CHECK(rc == 0 || rc == 1 || rc == -EIO || rc == -EPROTO);
	if (rc == 0 && ilen <= n) {
		if (mode & FIX_INDEX_SUM)
			put_le64(obj + ilen - 8, XXH3_64bits(obj + TFS_OBJ_HEADER_SIZE,
							     ilen - 8 - TFS_OBJ_HEADER_SIZE));
		rc = tfs_frames_parse(obj, ilen, n, &t);
		FUZZ_CHECK(rc == 0 || rc == -EIO || rc == -ENOMEM);
		if (rc == 0) {
			uint64_t raw = 0;

			/* Every frame lies inside the object, and they add up to its raw size. */
			for (uint32_t i = 0; i < t->n; i++) {
				FUZZ_CHECK(t->f[i].off >= ilen && t->f[i].off + t->f[i].len <= n);
				FUZZ_CHECK(i + 1 == t->n || t->f[i].raw == t->frame_raw);
				raw += t->f[i].raw;
				dst = malloc(t->f[i].raw ? t->f[i].raw : 1);
				if (!dst)
					continue;
				rc = tfs_frame_decode(t, i, obj + t->f[i].off, dst);
				FUZZ_CHECK(rc == 0 || rc == -EIO || rc == -ENOMEM);
				free(dst);
			}
			FUZZ_CHECK(raw == t->raw_size);
			free(t);
		}
	}
	free(obj);
	return 0;
}
