/* SPDX-License-Identifier: MIT */
/* delta: the line filter of framed chunks and its inverse, 16 bytes a step. */
#include "delta.h"

#include <assert.h>
#include <string.h>

/* GCC and clang vector types: -O2 does not vectorise loops of unknown length by itself, and a
 * decode runs on every frame a reader misses. memcpy keeps the loads and stores unaligned. */
typedef uint8_t v16 __attribute__((vector_size(16)));

static v16 load16(const uint8_t *p)
{
	v16 v;

	memcpy(&v, p, sizeof(v));
	return v;
}

static void store16(uint8_t *p, v16 v)
{
	memcpy(p, &v, sizeof(v));
}

void tfs_delta_encode(const uint8_t *restrict src, uint8_t *restrict dst, size_t len, size_t line)
{
	size_t i = line < len ? line : len;

	assert(line >= 1);
	memcpy(dst, src, i);
	for (; i + 16 <= len; i += 16)
		store16(dst + i, load16(src + i) - load16(src + i - line));
	for (; i < len; i++)
		dst[i] = (uint8_t)(src[i] - src[i - line]);
}

void tfs_delta_decode(uint8_t *buf, size_t len, size_t line)
{
	size_t i = line;

	assert(line >= 1);
	/* Step by step, bytes i..i+15 read i-line..i-line+15, all decoded already when line >= 16;
	 * a shorter line has its bytes depend on each other within a step. */
	if (line >= 16)
		for (; i + 16 <= len; i += 16)
			store16(buf + i, load16(buf + i) + load16(buf + i - line));
	for (; i < len; i++)
		buf[i] = (uint8_t)(buf[i] + buf[i - line]);
}
