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

/* TFS_CODEC_FRAMES is not a codec a column names: it is how chunks of a zstd or raw column larger
 * than two frames are stored (tfs_chunk_encode), independently readable frames behind an index. */
enum tfs_codec_id { TFS_CODEC_RAW = 0, TFS_CODEC_ZSTD = 1, TFS_CODEC_FRAMES = 2 };

/* Objects of codecs raw and zstd are written as version 1, which every reader takes; framed
 * chunks need version 2, and framed chunks with a delta filter version 3. */
#define TFS_OBJ_VERSION 4
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

/* raw and zstd; NULL for anything else (TFS_CODEC_FRAMES included). */
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

/* No object of ours is over a TiB, stored or decoded: a size claimed beyond it (a frame without
 * a stated size reads as 2^64 - 1, a hostile manifest may say anything) is -EIO. */
#define TFS_OBJ_SIZE_MAX ((uint64_t)1 << 40)
/* Manifests and commits above TFS_META_FREE bytes decode only if they expand at most
 * TFS_META_RATIO times (their hex ids compress about 2x): a bomb is -EIO, not an allocation. */
#define TFS_META_FREE (16u << 20)
#define TFS_META_RATIO 64
/* Decode a whole object (checked, as for tfs_object_decode) into a freshly allocated buffer
 * (NUL-terminated for text objects). The buffer is handed to the caller. */
int tfs_object_decode_alloc(const void *obj, size_t len, enum tfs_obj_type expect, uint8_t **out,
			    size_t *out_len);

/* --- framed chunks ----------------------------------------------------------------------------
 * A chunk of raw size over two frames is stored as frames of `frame` raw bytes (the last one
 * shorter), each an independent zstd frame, or the bytes as they are where compression does not
 * pay, behind an index that says where each frame lies and its XXH3-64. A reader that wants a
 * few rows reads the index and one frame by ranged reads, checks the frame and decodes it alone.
 */

#define TFS_FRAME_DEFAULT (64u << 10) /* raw bytes a frame, unless the writer says otherwise */
#define TFS_FRAME_MIN 4096u
#define TFS_FRAMES_MAX 65536u /* frames a chunk; more and the writer makes them larger */

/* Encode a chunk: framed when codec is zstd or raw (every frame then kept as it is) and raw_len
 * is over two frames of `frame` bytes (at least TFS_FRAME_MIN), otherwise as tfs_object_encode
 * (frame 0: always). A framed zstd chunk with `line` (bytes an image line; 0: none) has its
 * frames delta-filtered (delta.h) before zstd, each that compresses; it is then version 3. */
int tfs_chunk_encode(enum tfs_codec_id codec, int level, size_t frame, size_t line, const void *raw,
		     size_t raw_len, struct tfs_buf *out);

/* Bytes of a chunk whose rows have one image line, [the previous run's end, end): line 0 for
 * rows that have none. */
struct tfs_line_run {
	uint64_t end;
	uint64_t line;
};
#define TFS_FRAME_LINE_MAX ((1u << 24) - 1) /* a frame's own line (version 4) */
/* The same with rows of several lines (images of several widths): runs cover [0, raw_len) in
 * order. Each frame is filtered with the line of the run that holds most of its bytes; a chunk
 * whose frames have more than one line is version 4 (each frame's line in its index entry). */
int tfs_chunk_encode_runs(enum tfs_codec_id codec, int level, size_t frame,
			  const struct tfs_line_run *runs, size_t nruns, const void *raw,
			  size_t raw_len, struct tfs_buf *out);

/* The frame size this process's writers use (import --frame-size): TFS_FRAME_DEFAULT until set;
 * 0 writes every chunk as one frame, which readers older than framed chunks take. */
void tfs_chunk_frame_set(size_t frame);
size_t tfs_chunk_frame_get(void);
/* The frame size a chunk of rows of row_bytes each is written with, for a writer's frame: the
 * most whole rows that fit it, so that no row is split between two frames and a reader of one
 * row decodes one frame, where they fill 7/8 of it at least (and TFS_FRAME_MIN). Otherwise, and
 * for rows larger than frame or of no fixed size (row_bytes 0 or 1), frame; frame 0 stays 0. */
size_t tfs_chunk_frame_rows(size_t frame, uint64_t row_bytes);

/* Whether this process's writers delta-filter the chunks of columns that have image lines
 * (import --filter delta; tfs_chunk_form_of, format.h): off until set. */
void tfs_chunk_delta_set(int on);
int tfs_chunk_delta_get(void);

struct tfs_frame {
	uint64_t off;  /* in the object, header included */
	uint32_t len;  /* stored bytes */
	uint32_t raw;  /* decoded bytes */
	int stored;    /* bytes kept as they are (no zstd) */
	int delta;     /* decoded bytes delta-filtered, with line */
	uint32_t line; /* the chunk's line, or (version 4) the frame's own; 0 when not filtered */
	uint64_t hash; /* XXH3-64 of the stored bytes */
};

/* A framed chunk's index, parsed and checked. Frame i decodes to raw bytes
 * [i * frame_raw, i * frame_raw + f[i].raw) of the chunk. */
struct tfs_frames {
	uint64_t raw_size;
	uint32_t frame_raw;
	uint32_t n;
	uint32_t line; /* the delta filter's line (version 3 and 4), 0 for none */
	struct tfs_frame f[];
};

/* Bytes at the start of an object that tfs_frames_index_len needs. */
#define TFS_FRAMES_PROBE (TFS_OBJ_HEADER_SIZE + 8)

/* From the first TFS_FRAMES_PROBE bytes of an object (the header checked): 0 with *index_len the
 * bytes from the object's start to its first frame, or 1 when the object is not framed (a reader
 * then takes it whole); -EIO or -EPROTO for a bad header. */
int tfs_frames_index_len(const void *obj, size_t len, size_t *index_len);

/* Parse the index from the object's first index_len bytes (tfs_frames_index_len) into a
 * freshly allocated struct handed to the caller (free). obj_len is the whole object's size (the
 * manifest's stored size), which the frames must add up to. Returns 0 or -EIO (damaged). */
int tfs_frames_parse(const void *obj, size_t index_len, uint64_t obj_len, struct tfs_frames **out);

/* Check frame i's stored bytes (src, f[i].len of them) against its hash and decode them into
 * dst (f[i].raw bytes), undoing its delta filter if it has one. Returns 0 or -EIO. */
int tfs_frame_decode(const struct tfs_frames *t, uint32_t i, const void *src, void *dst);
/* For a frame kept as it is (f[i].stored), whose stored bytes are its raw bytes: check them in
 * place against its hash. Returns 0 or -EIO. */
int tfs_frame_check(const struct tfs_frames *t, uint32_t i, const void *bytes);

#endif
