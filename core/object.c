/* SPDX-License-Identifier: MIT */
/* object: content ids and the envelope (header, codec, checksum) every stored object carries. */
#include "object.h"
#include "delta.h"

#include <assert.h>
#include <errno.h>
#include <math.h>
#include <openssl/evp.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>
#if defined(__x86_64__)
#include <xxh_x86dispatch.h>
#endif
/* For ZSTD_c_literalCompressionMode: an experimental parameter of the stable setParameter, which
 * a libzstd that does not know it refuses (then literals are compressed as usual). */
#define ZSTD_STATIC_LINKING_ONLY
#include <zstd.h>

/* XXH3-64 of every payload read and written. On x86-64 libxxhash picks the widest vector unit
 * the CPU has at run time (AVX2/AVX-512: about 2.5x the SSE2 build's speed here); the value is
 * the same either way. */
static inline uint64_t obj_hash(const void *p, size_t n)
{
#if defined(__x86_64__)
	return XXH3_64bits_dispatch(p, n);
#else
	return XXH3_64bits(p, n);
#endif
}

static const char obj_magic[4] = { 'T', 'F', 'S', 'O' };

void tfs_id_of(const void *data, size_t len, struct tfs_id *out)
{
	unsigned int n = TFS_ID_LEN;

	/* EVP_Digest with SHA-256 cannot fail for in-memory input short of allocation failure;
	 * a zero id is never valid so a failure is caught at the next lookup. */
	if (!EVP_Digest(data, len, out->b, &n, EVP_sha256(), NULL))
		memset(out->b, 0, sizeof(out->b));
}

void tfs_id_hex(const struct tfs_id *id, char out[TFS_ID_HEX])
{
	static const char digits[] = "0123456789abcdef";

	for (int i = 0; i < TFS_ID_LEN; i++) {
		out[2 * i] = digits[id->b[i] >> 4];
		out[2 * i + 1] = digits[id->b[i] & 15];
	}
	out[TFS_ID_HEX - 1] = 0;
}

int tfs_id_parse(const char *hex, struct tfs_id *out)
{
	for (int i = 0; i < TFS_ID_LEN; i++) {
		int hi = tfs_hex_digit(hex[2 * i]), lo;

		if (hi < 0)
			return -EINVAL;
		lo = tfs_hex_digit(hex[2 * i + 1]);
		if (lo < 0)
			return -EINVAL;
		out->b[i] = (uint8_t)(hi << 4 | lo);
	}
	if (hex[2 * TFS_ID_LEN] && hex[2 * TFS_ID_LEN] != '\n' && hex[2 * TFS_ID_LEN] != ' ')
		return -EINVAL;
	return 0;
}

int tfs_id_eq(const struct tfs_id *a, const struct tfs_id *b)
{
	return !memcmp(a->b, b->b, TFS_ID_LEN);
}

int tfs_id_is_zero(const struct tfs_id *id)
{
	static const struct tfs_id zero;

	return tfs_id_eq(id, &zero);
}

/* --- codecs --------------------------------------------------------------------------------- */

static size_t raw_bound(size_t n)
{
	return n;
}

static long long raw_compress(void *dst, size_t cap, const void *src, size_t len, int level)
{
	(void)level;
	if (cap < len)
		return -ENOSPC;
	if (len)
		memcpy(dst, src, len);
	return (long long)len;
}

static int raw_decompress(void *dst, size_t raw_len, const void *src, size_t len)
{
	if (len != raw_len)
		return -EIO;
	if (len)
		memcpy(dst, src, len);
	return 0;
}

static size_t zstd_bound(size_t n)
{
	return ZSTD_compressBound(n);
}

/* Contexts are per thread and live as long as the thread (freed by the key destructors): creating
 * one per call costs more than decompressing a small chunk. */
static pthread_once_t zstd_once = PTHREAD_ONCE_INIT;
static pthread_key_t zstd_ckey, zstd_dkey;

static void free_cctx(void *p)
{
	ZSTD_freeCCtx(p);
}

static void free_dctx(void *p)
{
	ZSTD_freeDCtx(p);
}

static void zstd_keys(void)
{
	pthread_key_create(&zstd_ckey, free_cctx);
	pthread_key_create(&zstd_dkey, free_dctx);
}

/* Bits of information a byte of p's n bytes carries (the Shannon entropy of their histogram),
 * from at most ENTROPY_SAMPLES of them evenly spaced: enough to tell 7.75 bits from 8 (the
 * estimate is low by about 0.04 bits at most, which errs towards compressing). The spacing is
 * prime to 2 and 3, so that every byte of a value of 2, 3, 4, 6 or 8 bytes (an exponent byte
 * as well as a mantissa's, each channel of a pixel) is sampled as often as the others. */
#define ENTROPY_SAMPLES 4096
static float clogc[ENTROPY_SAMPLES + 1]; /* c log2 c */
static pthread_once_t clogc_once = PTHREAD_ONCE_INIT;

static void clogc_init(void)
{
	for (int c = 1; c <= ENTROPY_SAMPLES; c++)
		clogc[c] = (float)(c * log2(c));
}

static double byte_entropy(const uint8_t *p, size_t n)
{
	size_t step = (n + ENTROPY_SAMPLES - 1) / ENTROPY_SAMPLES | 1, k = 0, i = 0;
	uint32_t count[4][256] = { { 0 } };
	double sum = 0;

	if (step % 3 == 0)
		step += 2;
	pthread_once(&clogc_once, clogc_init);
	/* Four tables: a run of one byte value does not wait on its own increments. */
	for (; i + 3 * step < n; i += 4 * step, k += 4) {
		count[0][p[i]]++;
		count[1][p[i + step]]++;
		count[2][p[i + 2 * step]]++;
		count[3][p[i + 3 * step]]++;
	}
	for (; i < n; i += step, k++)
		count[0][p[i]]++;
	for (int b = 0; b < 256; b++)
		sum += clogc[count[0][b] + count[1][b] + count[2][b] + count[3][b]];
	return k ? log2((double)k) - sum / (double)k : 0;
}

/* Entropy-coding literals of H bits a byte saves at most (8 - H) / 8 of them: over this, under
 * 1/32, what a frame must save to be kept compressed. Such bytes (sensor noise in pixels,
 * bytes compressed already) cost zstd most of its time in Huffman tables that then go unused;
 * they are compressed with matches only, several times faster and as small to within that
 * 1/32. */
#define LITERALS_NOT_WORTH_BITS (8.0 - 8.0 / 32)

static long long zstd_compress(void *dst, size_t cap, const void *src, size_t len, int level)
{
	const int plain = len < 4096 || byte_entropy(src, len) < LITERALS_NOT_WORTH_BITS;
	ZSTD_CCtx *zstd_cctx;
	size_t r;

	pthread_once(&zstd_once, zstd_keys);
	zstd_cctx = pthread_getspecific(zstd_ckey);
	if (!zstd_cctx) {
		zstd_cctx = ZSTD_createCCtx();
		if (!zstd_cctx)
			return -ENOMEM;
		pthread_setspecific(zstd_ckey, zstd_cctx);
	}
	if (plain) {
		r = ZSTD_compressCCtx(zstd_cctx, dst, cap, src, len, level);
	} else {
		ZSTD_CCtx_reset(zstd_cctx, ZSTD_reset_session_and_parameters);
		r = ZSTD_CCtx_setParameter(zstd_cctx, ZSTD_c_compressionLevel, level);
		if (!ZSTD_isError(r))
			(void)ZSTD_CCtx_setParameter(zstd_cctx, ZSTD_c_literalCompressionMode,
						     ZSTD_ps_disable);
		if (!ZSTD_isError(r))
			r = ZSTD_compress2(zstd_cctx, dst, cap, src, len);
	}
	if (ZSTD_isError(r))
		return -EIO;
	return (long long)r;
}

static int zstd_decompress(void *dst, size_t raw_len, const void *src, size_t len)
{
	ZSTD_DCtx *zstd_dctx;
	size_t r;

	pthread_once(&zstd_once, zstd_keys);
	zstd_dctx = pthread_getspecific(zstd_dkey);
	if (!zstd_dctx) {
		zstd_dctx = ZSTD_createDCtx();
		if (!zstd_dctx)
			return -ENOMEM;
		pthread_setspecific(zstd_dkey, zstd_dctx);
	}
	r = ZSTD_decompressDCtx(zstd_dctx, dst, raw_len, src, len);
	if (ZSTD_isError(r) || r != raw_len)
		return -EIO;
	return 0;
}

static const struct tfs_codec codecs[] = {
	[TFS_CODEC_RAW] = {
		.name = "raw",
		.id = TFS_CODEC_RAW,
		.bound = raw_bound,
		.compress = raw_compress,
		.decompress = raw_decompress,
	},
	[TFS_CODEC_ZSTD] = {
		.name = "zstd",
		.id = TFS_CODEC_ZSTD,
		.bound = zstd_bound,
		.compress = zstd_compress,
		.decompress = zstd_decompress,
	},
};

const struct tfs_codec *tfs_codec_by_name(const char *name)
{
	for (size_t i = 0; i < sizeof(codecs) / sizeof(codecs[0]); i++)
		if (!strcmp(codecs[i].name, name))
			return &codecs[i];
	return NULL;
}

const struct tfs_codec *tfs_codec_by_id(unsigned id)
{
	if (id >= sizeof(codecs) / sizeof(codecs[0]))
		return NULL;
	return &codecs[id];
}

/* --- envelope ------------------------------------------------------------------------------- */

static void put_le16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
}

static void put_le32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static void put_le64(uint8_t *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static uint64_t get_le(const uint8_t *p, int n)
{
	uint64_t v = 0;

	for (int i = n - 1; i >= 0; i--)
		v = v << 8 | p[i];
	return v;
}

static void put_header(uint8_t *h, unsigned version, enum tfs_obj_type type,
		       enum tfs_codec_id codec, uint64_t raw_len, uint64_t stored)
{
	memcpy(h, obj_magic, 4);
	put_le16(h + 4, (uint16_t)version);
	h[6] = (uint8_t)type;
	h[7] = (uint8_t)codec;
	put_le32(h + 8, TFS_OBJ_HEADER_SIZE);
	put_le32(h + 12, 0);
	put_le64(h + 16, raw_len);
	put_le64(h + 24, stored);
	put_le64(h + 32, obj_hash(h + TFS_OBJ_HEADER_SIZE, (size_t)stored));
	put_le64(h + 40, obj_hash(h, 40));
}

int tfs_object_encode(enum tfs_obj_type type, enum tfs_codec_id codec, int level, const void *raw,
		      size_t raw_len, struct tfs_buf *out)
{
	const struct tfs_codec *c = tfs_codec_by_id(codec);
	uint8_t *h;
	long long stored;
	int rc;

	if (!c)
		return -EINVAL;
	out->len = 0;
	rc = tfs_buf_reserve(out, TFS_OBJ_HEADER_SIZE + c->bound(raw_len));
	if (rc)
		return rc;
	stored = c->compress(out->data + TFS_OBJ_HEADER_SIZE, out->cap - 1 - TFS_OBJ_HEADER_SIZE,
			     raw, raw_len, level);
	if (stored < 0)
		return (int)stored;
	/* Compression that saves under 1/32 is not worth a decompression on every read. */
	if (codec != TFS_CODEC_RAW && (size_t)stored + raw_len / 32 >= raw_len) {
		c = tfs_codec_by_id(TFS_CODEC_RAW);
		rc = tfs_buf_reserve(out, TFS_OBJ_HEADER_SIZE + raw_len);
		if (rc)
			return rc;
		if (raw_len)
			memcpy(out->data + TFS_OBJ_HEADER_SIZE, raw, raw_len);
		stored = (long long)raw_len;
	}
	h = out->data;
	put_header(h, 1, type, c->id, raw_len, (uint64_t)stored);
	out->len = TFS_OBJ_HEADER_SIZE + (size_t)stored;
	out->data[out->len] = 0;
	return 0;
}

int tfs_object_header(const void *obj, size_t len, struct tfs_obj_header *hdr)
{
	const uint8_t *h = obj;

	if (len < TFS_OBJ_HEADER_SIZE || memcmp(h, obj_magic, 4))
		return -EIO;
	if (get_le(h + 40, 8) != obj_hash(h, 40))
		return -EIO;
	hdr->version = (unsigned)get_le(h + 4, 2);
	if (hdr->version > TFS_OBJ_VERSION)
		return -EPROTO;
	if (get_le(h + 8, 4) != TFS_OBJ_HEADER_SIZE)
		return -EIO;
	hdr->type = (enum tfs_obj_type)h[6];
	hdr->codec = (enum tfs_codec_id)h[7];
	if (!tfs_codec_by_id(hdr->codec) && hdr->codec != TFS_CODEC_FRAMES)
		return -EPROTO;
	hdr->raw_size = get_le(h + 16, 8);
	hdr->stored_size = get_le(h + 24, 8);
	hdr->checksum = get_le(h + 32, 8);
	return 0;
}

int tfs_object_check(const void *obj, size_t len)
{
	struct tfs_obj_header h;
	int rc = tfs_object_header(obj, len, &h);

	if (rc)
		return rc;
	if (h.stored_size != len - TFS_OBJ_HEADER_SIZE ||
	    obj_hash((const uint8_t *)obj + TFS_OBJ_HEADER_SIZE, h.stored_size) != h.checksum)
		return -EIO;
	return 0;
}

/* --- framed chunks -------------------------------------------------------------------------
 * Payload: u32 frame count n, u32 raw bytes a frame, from version 3 u32 filter (1: delta) and
 * u32 its line, n entries of {u32 stored length, u32 flags (bit 0: stored as is, bit 1: delta,
 * in version 4 bits 8-31: the frame's own line, 0 for the chunk's), u64 XXH3-64 of the stored
 * bytes}, the XXH3-64 of all that, then the frames back to back. */

#define FRAMES_HEAD(version) ((version) >= 3 ? 16u : 8u)
#define FRAME_ENTRY 16
#define FRAME_STORED 1u
#define FRAME_DELTA 2u
#define FILTER_DELTA 1u
#define FRAME_LINE_SHIFT 8 /* version 4: a frame's own line, in its flags' bits 8-31 */

static size_t index_len_of(unsigned version, uint32_t n)
{
	return TFS_OBJ_HEADER_SIZE + FRAMES_HEAD(version) + (size_t)n * FRAME_ENTRY + 8;
}

/* The line frame [from, to) is filtered with: that of the run holding most of its bytes (the
 * first such). Runs before *r end at or before from; *r moves on to the first that does not. */
static uint64_t frame_line(const struct tfs_line_run *runs, size_t nruns, size_t *r, uint64_t from,
			   uint64_t to)
{
	uint64_t best = 0, most = 0;

	while (*r < nruns && runs[*r].end <= from)
		(*r)++;
	for (size_t k = *r; k < nruns; k++) {
		const uint64_t start = k ? runs[k - 1].end : 0;
		const uint64_t a = start > from ? start : from,
			       b = runs[k].end < to ? runs[k].end : to;

		if (b > a && b - a > most) {
			most = b - a;
			best = runs[k].line;
		}
		if (runs[k].end >= to)
			break;
	}
	return best;
}

int tfs_chunk_encode(enum tfs_codec_id codec, int level, size_t frame, size_t line, const void *raw,
		     size_t raw_len, struct tfs_buf *out)
{
	const struct tfs_line_run one = { raw_len, line };

	return tfs_chunk_encode_runs(codec, level, frame, &one, line ? 1 : 0, raw, raw_len, out);
}

int tfs_chunk_encode_runs(enum tfs_codec_id codec, int level, size_t frame,
			  const struct tfs_line_run *runs, size_t nruns, const void *raw,
			  size_t raw_len, struct tfs_buf *out)
{
	const struct tfs_codec *z = tfs_codec_by_id(TFS_CODEC_ZSTD);
	unsigned version;
	size_t n, pos, ilen, head, r = 0;
	uint64_t line = 0; /* the chunk's: its first filtered frame's */
	uint32_t *lines = NULL;
	int own = 0;
	uint8_t *ix, *filtered = NULL;
	int rc;

	if (frame && frame < TFS_FRAME_MIN)
		frame = TFS_FRAME_MIN;
	if ((codec != TFS_CODEC_ZSTD && codec != TFS_CODEC_RAW) || !frame || raw_len <= 2 * frame)
		return tfs_object_encode(TFS_OBJ_CHUNK, codec, level, raw, raw_len, out);
	if (raw_len / frame >= TFS_FRAMES_MAX)
		frame = raw_len / (TFS_FRAMES_MAX - 1);
	n = (raw_len + frame - 1) / frame;
	assert(n >= 2 && n <= TFS_FRAMES_MAX && frame <= UINT32_MAX);
	/* Each frame's line; a frame of another line than the chunk's carries its own. */
	if (codec == TFS_CODEC_ZSTD && nruns && !(lines = calloc(n, sizeof(*lines))))
		return -ENOMEM;
	for (size_t i = 0; lines && i < n; i++) {
		const uint64_t to = (i + 1) * frame < raw_len ? (i + 1) * frame : raw_len;
		uint64_t l = frame_line(runs, nruns, &r, i * frame, to);

		if (l > UINT32_MAX || (line && l != line && l > TFS_FRAME_LINE_MAX))
			l = 0;
		line = line ? line : l;
		own |= l && l != line;
		lines[i] = (uint32_t)l;
	}
	version = own ? 4 : line ? 3 : 2;
	head = FRAMES_HEAD(version);
	ilen = index_len_of(version, (uint32_t)n);
	out->len = 0;
	rc = tfs_buf_reserve(out, ilen + (codec == TFS_CODEC_RAW ? raw_len : n * z->bound(frame)));
	if (!rc && line && !(filtered = malloc(frame)))
		rc = -ENOMEM;
	if (rc)
		goto out;
	ix = out->data + TFS_OBJ_HEADER_SIZE;
	put_le32(ix, (uint32_t)n);
	put_le32(ix + 4, (uint32_t)frame);
	if (line) {
		put_le32(ix + 8, FILTER_DELTA);
		put_le32(ix + 12, (uint32_t)line);
	}
	pos = ilen;
	for (size_t i = 0; i < n; i++) {
		const uint8_t *src = (const uint8_t *)raw + i * frame;
		const size_t fl = i + 1 < n ? frame : raw_len - i * frame;
		const uint32_t fline = lines ? lines[i] : 0;
		uint8_t *e = ix + head + i * FRAME_ENTRY;
		long long st = (long long)fl;
		uint32_t flags = !fline		 ? 0
				 : fline == line ? FRAME_DELTA
						 : FRAME_DELTA | fline << FRAME_LINE_SHIFT;

		if (fline)
			tfs_delta_encode(src, filtered, fl, fline);
		if (codec != TFS_CODEC_RAW)
			st = z->compress(out->data + pos, out->cap - 1 - pos,
					 fline ? filtered : src, fl, level);
		/* Bytes the filter does not help (not an image's, or lines of another width in a
		 * ragged chunk) may compress as they are. */
		if (fline && st >= 0 && (size_t)st + fl / 32 >= fl) {
			st = z->compress(out->data + pos, out->cap - 1 - pos, src, fl, level);
			flags = 0;
		}
		if (st < 0) {
			rc = (int)st;
			goto out;
		}
		/* As for whole objects: a frame that saves under 1/32 is kept as it is (every frame
		 * of the raw codec), not filtered. */
		if ((size_t)st + fl / 32 >= fl) {
			memcpy(out->data + pos, src, fl);
			st = (long long)fl;
			flags = FRAME_STORED;
		}
		put_le32(e, (uint32_t)st);
		put_le32(e + 4, flags);
		put_le64(e + 8, obj_hash(out->data + pos, (size_t)st));
		pos += (size_t)st;
	}
	put_le64(ix + head + n * FRAME_ENTRY, obj_hash(ix, head + n * FRAME_ENTRY));
	put_header(out->data, version, TFS_OBJ_CHUNK, TFS_CODEC_FRAMES, raw_len,
		   pos - TFS_OBJ_HEADER_SIZE);
	out->len = pos;
	out->data[out->len] = 0;
out:
	free(filtered);
	free(lines);
	return rc;
}

static size_t writer_frame = TFS_FRAME_DEFAULT; /* set once, before writers start */

void tfs_chunk_frame_set(size_t frame)
{
	writer_frame = frame;
}

size_t tfs_chunk_frame_get(void)
{
	return writer_frame;
}

static int writer_delta; /* set once, before writers start */

void tfs_chunk_delta_set(int on)
{
	writer_delta = on;
}

int tfs_chunk_delta_get(void)
{
	return writer_delta;
}

size_t tfs_chunk_frame_rows(size_t frame, uint64_t row_bytes)
{
	size_t f;

	if (frame < TFS_FRAME_MIN)
		frame = frame ? TFS_FRAME_MIN : 0;
	if (row_bytes <= 1 || row_bytes > frame)
		return frame;
	f = frame / (size_t)row_bytes * (size_t)row_bytes;
	/* A frame's buffer is rounded up to the frame size or so (slab.h, arena.h): rows that
	 * fill under 7/8 of the frame would leave over an eighth of their buffer empty, so the
	 * frame stays as given and some rows are split. */
	return f < frame - frame / 8 || f < TFS_FRAME_MIN ? frame : f;
}

int tfs_frames_index_len(const void *obj, size_t len, size_t *index_len)
{
	struct tfs_obj_header h;
	uint64_t n;
	int rc = tfs_object_header(obj, len, &h);

	if (rc)
		return rc;
	if (h.codec != TFS_CODEC_FRAMES)
		return 1;
	if (len < TFS_FRAMES_PROBE)
		return -EIO;
	n = get_le((const uint8_t *)obj + TFS_OBJ_HEADER_SIZE, 4);
	if (n < 2 || n > TFS_FRAMES_MAX)
		return -EIO;
	*index_len = index_len_of(h.version, (uint32_t)n);
	return 0;
}

int tfs_frames_parse(const void *obj, size_t index_len, uint64_t obj_len, struct tfs_frames **out)
{
	const uint8_t *ix = (const uint8_t *)obj + TFS_OBJ_HEADER_SIZE;
	struct tfs_obj_header h;
	struct tfs_frames *t;
	size_t want, head;
	uint64_t n, frame, pos, line = 0;
	int rc = tfs_frames_index_len(obj, index_len, &want);

	if (rc)
		return rc < 0 ? rc : -EIO;
	if (want != index_len)
		return -EIO;
	tfs_object_header(obj, index_len, &h);
	head = FRAMES_HEAD(h.version);
	n = get_le(ix, 4);
	frame = get_le(ix + 4, 4);
	if (h.version >= 3) {
		line = get_le(ix + 12, 4);
		if (get_le(ix + 8, 4) != FILTER_DELTA || !line)
			return -EIO;
	}
	if (h.type != TFS_OBJ_CHUNK || frame < TFS_FRAME_MIN ||
	    obj_len != TFS_OBJ_HEADER_SIZE + h.stored_size ||
	    get_le(ix + head + n * FRAME_ENTRY, 8) != obj_hash(ix, head + n * FRAME_ENTRY) ||
	    h.raw_size <= (n - 1) * frame || h.raw_size > n * frame)
		return -EIO;
	t = malloc(sizeof(*t) + n * sizeof(t->f[0]));
	if (!t)
		return -ENOMEM;
	t->raw_size = h.raw_size;
	t->frame_raw = (uint32_t)frame;
	t->n = (uint32_t)n;
	t->line = (uint32_t)line;
	pos = index_len;
	for (uint32_t i = 0; i < n; i++) {
		const uint8_t *e = ix + head + (size_t)i * FRAME_ENTRY;
		const uint64_t flags = get_le(e + 4, 4);
		/* Version 4: a filtered frame's own line, where it is not the chunk's. */
		const uint64_t own = h.version >= 4 ? flags >> FRAME_LINE_SHIFT : 0;
		const uint64_t known = FRAME_STORED | FRAME_DELTA | (own << FRAME_LINE_SHIFT);
		struct tfs_frame *f = &t->f[i];

		f->off = pos;
		f->len = (uint32_t)get_le(e, 4);
		f->stored = (flags & FRAME_STORED) != 0;
		f->delta = (flags & FRAME_DELTA) != 0;
		f->line = !f->delta ? 0 : own ? (uint32_t)own : (uint32_t)line;
		f->hash = get_le(e + 8, 8);
		f->raw = (uint32_t)(i + 1 < n ? frame : h.raw_size - (n - 1) * frame);
		pos += f->len;
		/* A frame may not claim more than zstd could make of its bytes, and every one but
		 * those kept as they are is a zstd frame of exactly its raw size; only a zstd frame
		 * of a chunk with a filter is filtered. */
		if (flags & ~known || (own && !f->delta) || (f->delta && (f->stored || !line)) ||
		    (f->stored && f->len != f->raw) || f->len > ZSTD_compressBound(f->raw) ||
		    pos > obj_len) {
			free(t);
			return -EIO;
		}
	}
	if (pos != obj_len) {
		free(t);
		return -EIO;
	}
	*out = t;
	return 0;
}

static int frame_decode(const struct tfs_frames *t, uint32_t i, const void *src, void *dst)
{
	const struct tfs_frame *f = &t->f[i];
	const int rc = tfs_codec_by_id(f->stored ? TFS_CODEC_RAW : TFS_CODEC_ZSTD)
			       ->decompress(dst, f->raw, src, f->len);

	if (!rc && f->delta)
		tfs_delta_decode(dst, f->raw, f->line);
	return rc;
}

/* Whether frame i's stored bytes are those its index entry hashed. */
static int frame_intact(const struct tfs_frames *t, uint32_t i, const void *src)
{
	return i < t->n && obj_hash(src, t->f[i].len) == t->f[i].hash;
}

int tfs_frame_decode(const struct tfs_frames *t, uint32_t i, const void *src, void *dst)
{
	return frame_intact(t, i, src) ? frame_decode(t, i, src, dst) : -EIO;
}

int tfs_frame_check(const struct tfs_frames *t, uint32_t i, const void *bytes)
{
	return i < t->n && t->f[i].stored && frame_intact(t, i, bytes) ? 0 : -EIO;
}

/* A whole framed chunk whose payload checksum has been checked: the frames are not hashed again. */
static int frames_decode_all(const void *obj, size_t len, void *dst, size_t dst_len)
{
	struct tfs_frames *t = NULL;
	size_t ilen;
	int rc = tfs_frames_index_len(obj, len, &ilen);

	if (rc)
		return rc < 0 ? rc : -EIO;
	if (ilen > len)
		return -EIO;
	rc = tfs_frames_parse(obj, ilen, len, &t);
	if (rc)
		return rc;
	if (t->raw_size != dst_len)
		rc = -EIO;
	for (uint32_t i = 0; !rc && i < t->n; i++)
		rc = frame_decode(t, i, (const uint8_t *)obj + t->f[i].off,
				  (uint8_t *)dst + (size_t)i * t->frame_raw);
	free(t);
	return rc;
}

int tfs_object_decode(const void *obj, size_t len, enum tfs_obj_type expect, void *dst,
		      size_t dst_len)
{
	struct tfs_obj_header h;
	const uint8_t *payload = (const uint8_t *)obj + TFS_OBJ_HEADER_SIZE;
	int rc = tfs_object_header(obj, len, &h);

	if (rc)
		return rc;
	if (h.type != expect || h.raw_size != dst_len || h.stored_size != len - TFS_OBJ_HEADER_SIZE)
		return -EIO;
	if (h.codec == TFS_CODEC_FRAMES)
		return frames_decode_all(obj, len, dst, dst_len);
	return tfs_codec_by_id(h.codec)->decompress(dst, dst_len, payload, h.stored_size);
}

int tfs_object_decode_alloc(const void *obj, size_t len, enum tfs_obj_type expect, uint8_t **out,
			    size_t *out_len)
{
	struct tfs_obj_header h;
	uint8_t *p;
	int rc = tfs_object_header(obj, len, &h);

	if (rc)
		return rc;
	/* Check everything that costs no allocation first: a damaged header must not make us
	 * allocate whatever raw size it claims. */
	if (h.type != expect || h.stored_size != len - TFS_OBJ_HEADER_SIZE)
		return -EIO;
	if (h.raw_size > TFS_OBJ_SIZE_MAX)
		return -EIO;
	/* Manifests and commits are text full of hex ids: they compress a few times, never by
	 * 64x and more unless they are a decompression bomb from a hostile store. */
	if (h.type != TFS_OBJ_CHUNK && h.raw_size > TFS_META_FREE &&
	    h.raw_size / TFS_META_RATIO > h.stored_size)
		return -EIO;
	if (h.codec == TFS_CODEC_RAW ? h.raw_size != h.stored_size
	    : h.codec == TFS_CODEC_ZSTD
		    ? ZSTD_getFrameContentSize((const uint8_t *)obj + TFS_OBJ_HEADER_SIZE,
					       h.stored_size) != h.raw_size
		    : h.type != TFS_OBJ_CHUNK)
		return -EIO;
	p = malloc(h.raw_size + 1);
	if (!p)
		return -ENOMEM;
	rc = tfs_object_decode(obj, len, expect, p, h.raw_size);
	if (rc) {
		free(p);
		return rc;
	}
	p[h.raw_size] = 0;
	*out = p;
	*out_len = h.raw_size;
	return 0;
}
