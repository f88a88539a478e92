/* SPDX-License-Identifier: MIT */
/* object_fixture: made-up bytes and object encoding for the object unit test programs, which
 * include cmocka.h first. Static inline: each program uses the part it needs. */
#ifndef TFS_OBJECT_FIXTURE_H
#define TFS_OBJECT_FIXTURE_H

#include <stddef.h>
#include <stdint.h>

#include <xxhash.h>

#include "fill_fixture.h"
#include "object.h"
#include "util.h"

#define MIB (1024u * 1024u)

/* Text-like data that zstd shrinks a lot. */
static inline void fill_compressible(uint8_t *p, size_t n)
{
	static const char words[] = "tensor lake chunk manifest commit column row shape dtype ";

	for (size_t i = 0; i < n; i++)
		p[i] = (uint8_t)words[(i * 7 / 5) % (sizeof(words) - 1)];
}

static inline uint64_t get_le(const uint8_t *p, int n)
{
	uint64_t v = 0;

	for (int i = n - 1; i >= 0; i--)
		v = v << 8 | p[i];
	return v;
}

static inline void put_le64(uint8_t *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

/* Recompute the header checksum after a deliberate header edit. */
static inline void reseal_header(uint8_t *obj)
{
	put_le64(obj + 40, XXH3_64bits(obj, 40));
}

static inline void encode_ok(enum tfs_obj_type type, enum tfs_codec_id codec, const void *raw,
			     size_t len, struct tfs_buf *out)
{
	assert_int_equal(tfs_object_encode(type, codec, 3, raw, len, out), 0);
	assert_true(out->len >= TFS_OBJ_HEADER_SIZE);
}

#endif
