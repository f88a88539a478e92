/* SPDX-License-Identifier: MIT */
/* object: content ids and the envelope (header, codec, checksum) every stored object carries. */
#ifndef TFS_OBJECT_H
#define TFS_OBJECT_H

#include <stddef.h>
#include <stdint.h>

#include "util.h"

#define TFS_ID_LEN 32 /* SHA-256 of the stored object bytes */
#define TFS_ID_HEX (TFS_ID_LEN * 2 + 1)

struct tfs_id {
	uint8_t b[TFS_ID_LEN];
};

void tfs_id_of(const void *data, size_t len, struct tfs_id *out);
void tfs_id_hex(const struct tfs_id *id, char out[TFS_ID_HEX]);
/* Parses exactly 64 lowercase/uppercase hex digits. Returns 0 or -EINVAL. */
int tfs_id_parse(const char *hex, struct tfs_id *out);
int tfs_id_eq(const struct tfs_id *a, const struct tfs_id *b);
int tfs_id_is_zero(const struct tfs_id *id);

enum tfs_obj_type { TFS_OBJ_CHUNK = 1, TFS_OBJ_MANIFEST = 2, TFS_OBJ_COMMIT = 3 };

enum tfs_codec_id { TFS_CODEC_RAW = 0, TFS_CODEC_ZSTD = 1 };

#define TFS_OBJ_VERSION 1
#define TFS_OBJ_HEADER_SIZE 48

/* A codec: a const operation table (see object.c for raw and zstd). */
struct tfs_codec {
	const char *name;
	enum tfs_codec_id id;
	size_t (*bound)(size_t raw_len);
	/* Returns the stored length, or -errno. */
	long long (*compress)(void *dst, size_t cap, const void *src, size_t len, int level);
	/* Must produce exactly raw_len bytes; anything else is -EIO. */
	int (*decompress)(void *dst, size_t raw_len, const void *src, size_t len);
};

const struct tfs_codec *tfs_codec_by_name(const char *name);
const struct tfs_codec *tfs_codec_by_id(unsigned id);

/* A parsed object header. */
struct tfs_obj_header {
	unsigned version;
	enum tfs_obj_type type;
	enum tfs_codec_id codec;
	uint64_t raw_size;
	uint64_t stored_size; /* payload bytes after the header */
	uint64_t checksum;    /* XXH3-64 of the payload */
};

/* Encode raw bytes as an object: header + payload. With codec zstd the payload is one zstd frame,
 * unless that does not save at least 1/32 of the size, in which case the object is stored raw.
 * The encoded object is appended to *out (which is reset first). */
int tfs_object_encode(enum tfs_obj_type type, enum tfs_codec_id codec, int level, const void *raw,
		      size_t raw_len, struct tfs_buf *out);

/* Parse and check the header of an object (at least TFS_OBJ_HEADER_SIZE bytes).
 * Returns 0, or -EIO for a damaged header, -EPROTO for a newer format version. */
int tfs_object_header(const void *obj, size_t len, struct tfs_obj_header *h);

/* Check an encoded object's header, length and payload checksum without decoding it. Objects
 * read from a store are checked once, by tfs_store_get_object (or the disk cache, as it reads
 * its file). Returns 0, -EIO or -EPROTO. */
int tfs_object_check(const void *obj, size_t len);

/* Decode the payload of a whole object into dst (raw_size bytes, which the caller learns from
 * tfs_object_header). `expect` is the type the caller wants. The payload checksum is not
 * computed again: obj has passed tfs_object_check (tfs_store_get_object does it); the header,
 * sizes and encoding are checked, so that no input makes it read or write out of bounds.
 * Returns 0 or -EIO (any damage found, or the wrong type). */
int tfs_object_decode(const void *obj, size_t len, enum tfs_obj_type expect, void *dst,
		      size_t dst_len);

/* Decode a whole object (checked, as for tfs_object_decode) into a freshly allocated buffer
 * (NUL-terminated for text objects). The buffer is handed to the caller. */
int tfs_object_decode_alloc(const void *obj, size_t len, enum tfs_obj_type expect, uint8_t **out,
			    size_t *out_len);

#endif
