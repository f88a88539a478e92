/* SPDX-License-Identifier: MIT */
/* resize: PIL's bilinear resize of RGB8 images, to the byte, and the fits of --size (resize,
 * centre crop, pad). */
#include "image.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* --- resize (PIL's Resample.c, bilinear, 8 bits a channel) --------------------------------- */

#define PRECISION_BITS (32 - 8 - 2)

/* The resize loops are built for AVX2 as well as the baseline, the better one picked at load
 * time (32-bit multiplies are one instruction there, emulated in SSE2). Not under a sanitizer:
 * the pick runs before its runtime is up. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && \
	!defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
#define TFS_RESIZE_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define TFS_RESIZE_CLONES
#endif

/* Per output pixel: the first input pixel, how many, and their fixed-point weights. */
struct coeffs {
	int *bounds; /* xmin, xmax pairs */
	int32_t *k;  /* ksize each */
	int ksize;
};

static double bilinear(double x)
{
	x = x < 0 ? -x : x;
	return x < 1.0 ? 1.0 - x : 0.0;
}

static int precompute(uint32_t in_size, uint32_t out_size, struct coeffs *c)
{
	const double scale = (double)in_size / out_size;
	const double filterscale = scale < 1.0 ? 1.0 : scale;
	const double support = 1.0 * filterscale;
	double *pre;

	c->ksize = (int)ceil(support) * 2 + 1;
	c->bounds = malloc(out_size * 2 * sizeof(int));
	c->k = malloc((size_t)out_size * (size_t)c->ksize * sizeof(int32_t));
	pre = malloc((size_t)c->ksize * sizeof(double));
	if (!c->bounds || !c->k || !pre) {
		free(pre);
		return -ENOMEM;
	}
	for (uint32_t xx = 0; xx < out_size; xx++) {
		const double center = (xx + 0.5) * scale, ss = 1.0 / filterscale;
		double ww = 0.0;
		int xmin = (int)(center - support + 0.5), xmax = (int)(center + support + 0.5), x;

		if (xmin < 0)
			xmin = 0;
		if (xmax > (int)in_size)
			xmax = (int)in_size;
		xmax -= xmin;
		for (x = 0; x < xmax; x++) {
			pre[x] = bilinear((x + xmin - center + 0.5) * ss);
			ww += pre[x];
		}
		for (x = 0; x < c->ksize; x++) {
			double k = x < xmax && ww != 0.0 ? pre[x] / ww : 0.0;

			c->k[(size_t)xx * c->ksize + x] =
				(int32_t)(k < 0 ? -0.5 + k * (1 << PRECISION_BITS)
						: 0.5 + k * (1 << PRECISION_BITS));
		}
		c->bounds[xx * 2] = xmin;
		c->bounds[xx * 2 + 1] = xmax;
	}
	free(pre);
	return 0;
}

static uint8_t clip8(int32_t ss)
{
	ss >>= PRECISION_BITS;
	ss = ss < 0 ? 0 : ss;
	return (uint8_t)(ss > 255 ? 255 : ss);
}

/* Output byte from the n values at p, p + stride, ... weighed by k: PIL's sum, one at a time
 * (the vector loops' ends). */
static uint8_t column_sum(const uint8_t *p, size_t stride, const int32_t *k, int n)
{
	int32_t acc = 1 << (PRECISION_BITS - 1);

	for (int t = 0; t < n; t++)
		acc += p[(size_t)t * stride] * k[t];
	return clip8(acc);
}

/* The passes compute exactly what PIL's do (its sums are 32-bit too: the weights of a pixel add
 * up to 1 << PRECISION_BITS, so no sum of 8-bit samples can overflow), in an order a compiler
 * vectorises: the three channels of a pixel together along x; whole rows at a time along y,
 * where a row of sums is accumulated tap by tap over contiguous memory. Integer sums do not
 * depend on their order, so the bytes are PIL's. */
/* Along y a row of sums is accumulated tap by tap, a block of values at a time so that the
 * block's sums stay in vector registers across the taps. */
TFS_RESIZE_CLONES
static void pass_y_plain(const struct tfs_image *in, const struct coeffs *c, struct tfs_image *out)
{
	enum { BLOCK = 32 };
	const size_t rowlen = (size_t)in->w * 3;

	for (uint32_t y = 0; y < out->h; y++) {
		const int ymin = c->bounds[y * 2], n = c->bounds[y * 2 + 1];
		const int32_t *k = &c->k[(size_t)y * c->ksize];
		const uint8_t *first = in->px + (size_t)ymin * rowlen;
		uint8_t *o = out->px + (size_t)y * rowlen;
		size_t i = 0;

		for (; i + BLOCK <= rowlen; i += BLOCK) {
			int32_t acc[BLOCK];

			for (int j = 0; j < BLOCK; j++)
				acc[j] = 1 << (PRECISION_BITS - 1);
			for (int t = 0; t < n; t++) {
				const uint8_t *r = first + (size_t)t * rowlen + i;

				for (int j = 0; j < BLOCK; j++)
					acc[j] += r[j] * k[t];
			}
			for (int j = 0; j < BLOCK; j++)
				o[i + j] = clip8(acc[j]);
		}
		for (; i < rowlen; i++)
			o[i] = column_sum(first + i, rowlen, k, n);
	}
}

/* dst (h x w pixels) = src (w x h pixels) transposed, in tiles that stay in the L1 cache. A
 * pixel moves as 4 bytes (images have a pad byte after their last pixel): the fourth lands on
 * the next pixel of dst's row, written right after, except at a row's end. */
TFS_RESIZE_CLONES
static void transpose_by_pixel(const uint8_t *src, uint32_t w, uint32_t h, uint8_t *dst)
{
	enum { TILE = 32 };

	for (uint32_t x0 = 0; x0 < w; x0 += TILE)
		for (uint32_t y0 = 0; y0 < h; y0 += TILE)
			for (uint32_t x = x0; x < x0 + TILE && x < w; x++) {
				const uint32_t end = y0 + TILE < h ? y0 + TILE : h - 1;
				uint8_t *d = dst + (size_t)x * h * 3;
				uint32_t y = y0;

				for (; y < end; y++) {
					uint32_t px;

					memcpy(&px, src + ((size_t)y * w + x) * 3, 4);
					memcpy(d + (size_t)y * 3, &px, 4);
				}
				if (y == h - 1)
					memcpy(d + (size_t)y * 3, src + ((size_t)y * w + x) * 3, 3);
			}
}

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

/* 8 pixels held as dwords, narrowed to 24 bytes at d: exactly those are written. */
__attribute__((target("avx2"))) static inline void store24(uint8_t *d, __m256i px, __m256i narrow)
{
	const __m256i col = _mm256_shuffle_epi8(px, narrow);
	const __m128i hi = _mm256_extracti128_si256(col, 1);
	const uint32_t last = (uint32_t)_mm_extract_epi32(hi, 2);

	_mm_storeu_si128((__m128i *)(void *)d, _mm256_castsi256_si128(col));
	_mm_storel_epi64((__m128i *)(void *)(d + 12), hi);
	memcpy(d + 20, &last, 4);
}

/* 8 x 8 pixels, AVX2: src's 8 rows (sstride bytes apart) to dst's 8 rows (dstride apart). Each
 * row's 8 pixels are widened to 8 dwords, the 8 x 8 dwords transposed in registers and each
 * column narrowed back to 24 bytes. A row is loaded as bytes 0-15 and 12-27: 4 bytes past its
 * 8 pixels are read (the caller keeps them inside the image); exactly 24 bytes are written. */
__attribute__((target("avx2"))) static void block8(const uint8_t *src, size_t sstride, uint8_t *dst,
						   size_t dstride)
{
	const __m128i widen = _mm_setr_epi8(0, 1, 2, -1, 3, 4, 5, -1, 6, 7, 8, -1, 9, 10, 11, -1);
	const __m256i narrow =
		_mm256_setr_epi8(0, 1, 2, 4, 5, 6, 8, 9, 10, 12, 13, 14, -1, -1, -1, -1, 0, 1, 2, 4,
				 5, 6, 8, 9, 10, 12, 13, 14, -1, -1, -1, -1);
	__m256i r[8], t[8];

	for (int i = 0; i < 8; i++) {
		const uint8_t *p = src + (size_t)i * sstride;

		r[i] = _mm256_set_m128i(
			_mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)(const void *)(p + 12)),
					 widen),
			_mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)(const void *)p), widen));
	}
	/* Per 128-bit lane: pairs of rows interleaved, then pairs of pairs: r[c] holds column c
	 * of rows 0-3 in its low lane and column c + 4 in its high one; r[c + 4] rows 4-7. */
	for (int i = 0; i < 8; i += 2) {
		t[i] = _mm256_unpacklo_epi32(r[i], r[i + 1]);
		t[i + 1] = _mm256_unpackhi_epi32(r[i], r[i + 1]);
	}
	for (int i = 0; i < 8; i += 4) {
		r[i] = _mm256_unpacklo_epi64(t[i], t[i + 2]);
		r[i + 1] = _mm256_unpackhi_epi64(t[i], t[i + 2]);
		r[i + 2] = _mm256_unpacklo_epi64(t[i + 1], t[i + 3]);
		r[i + 3] = _mm256_unpackhi_epi64(t[i + 1], t[i + 3]);
	}
	for (int c = 0; c < 4; c++) {
		store24(dst + (size_t)c * dstride, _mm256_permute2x128_si256(r[c], r[c + 4], 0x20),
			narrow);
		store24(dst + (size_t)(c + 4) * dstride,
			_mm256_permute2x128_si256(r[c], r[c + 4], 0x31), narrow);
	}
}

/* The same in blocks of 8 x 8 pixels. A block at an edge (fewer than 8 pixels a side, or
 * whose loads would pass the image's end) moves pixel by pixel. */
static void transpose_by_block(const uint8_t *src, uint32_t w, uint32_t h, uint8_t *dst)
{
	enum { TILE = 32 };

	for (uint32_t x0 = 0; x0 < w; x0 += TILE)
		for (uint32_t y0 = 0; y0 < h; y0 += TILE)
			for (uint32_t x = x0; x < x0 + TILE && x < w; x += 8)
				for (uint32_t y = y0; y < y0 + TILE && y < h; y += 8) {
					const uint32_t bw = w - x < 8 ? w - x : 8,
						       bh = h - y < 8 ? h - y : 8;

					if (bw == 8 && bh == 8 && (y + 8 < h || x + 9 <= w)) {
						block8(src + ((size_t)y * w + x) * 3, (size_t)w * 3,
						       dst + ((size_t)x * h + y) * 3,
						       (size_t)h * 3);
						continue;
					}
					for (uint32_t i = 0; i < bw; i++)
						for (uint32_t j = 0; j < bh; j++)
							memcpy(dst + ((size_t)(x + i) * h + y + j) *
									       3,
							       src + ((size_t)(y + j) * w + x + i) *
									       3,
							       3);
				}
}

#define MADD_TAPS 64

/* Along y with AVX2's multiply-add of 16-bit pairs: two taps an instruction where
 * pass_y_plain's 32-bit multiplies take one (of two micro-ops). A weight k (0 <= k <= 1 <<
 * PRECISION_BITS) is split k = kh << 11 | kl (kh at most 1 << 11, kl below it), so every
 * product and pair fits the instruction's signed 16-bit inputs and 32-bit sums, and
 * 1 << (PRECISION_BITS - 1) + (sum(p * kh) << 11) + sum(p * kl) is pass_y_plain's sum exactly:
 * the bytes are the same. */
__attribute__((target("avx2"))) static void
pass_y_madd(const struct tfs_image *in, const struct coeffs *c, struct tfs_image *out)
{
	const size_t rowlen = (size_t)in->w * 3;
	const __m256i half = _mm256_set1_epi32(1 << (PRECISION_BITS - 1));

	for (uint32_t y = 0; y < out->h; y++) {
		const int ymin = c->bounds[y * 2], n = c->bounds[y * 2 + 1];
		const int32_t *k = &c->k[(size_t)y * c->ksize];
		const uint8_t *first = in->px + (size_t)ymin * rowlen;
		uint8_t *o = out->px + (size_t)y * rowlen;
		__m256i kh[MADD_TAPS / 2], kl[MADD_TAPS / 2];
		size_t i = 0;

		for (int t = 0; t < n; t += 2) {
			const int32_t k0 = k[t], k1 = t + 1 < n ? k[t + 1] : 0;

			kh[t / 2] = _mm256_set1_epi32((k1 >> 11) << 16 | (k0 >> 11));
			kl[t / 2] = _mm256_set1_epi32((k1 & 0x7ff) << 16 | (k0 & 0x7ff));
		}
		for (; i + 16 <= rowlen; i += 16) {
			__m256i h0 = _mm256_setzero_si256(), h1 = h0, l0 = h0, l1 = h0;

			for (int t = 0; t < n; t += 2) {
				const uint8_t *r = first + (size_t)t * rowlen + i;
				const __m256i a = _mm256_cvtepu8_epi16(
					_mm_loadu_si128((const __m128i *)(const void *)r));
				const __m256i b =
					t + 1 < n ? _mm256_cvtepu8_epi16(_mm_loadu_si128((
							    const __m128i *)(const void *)(r +
											   rowlen)))
						  : _mm256_setzero_si256();
				/* Per 128-bit lane: bytes 0-3 (8-11) of both taps interleaved, and
				 * bytes 4-7 (12-15). */
				const __m256i lo = _mm256_unpacklo_epi16(a, b);
				const __m256i hi = _mm256_unpackhi_epi16(a, b);

				h0 = _mm256_add_epi32(h0, _mm256_madd_epi16(lo, kh[t / 2]));
				h1 = _mm256_add_epi32(h1, _mm256_madd_epi16(hi, kh[t / 2]));
				l0 = _mm256_add_epi32(l0, _mm256_madd_epi16(lo, kl[t / 2]));
				l1 = _mm256_add_epi32(l1, _mm256_madd_epi16(hi, kl[t / 2]));
			}
			h0 = _mm256_add_epi32(_mm256_add_epi32(half, _mm256_slli_epi32(h0, 11)),
					      l0);
			h1 = _mm256_add_epi32(_mm256_add_epi32(half, _mm256_slli_epi32(h1, 11)),
					      l1);
			/* clip8: shifted, then packed with saturation back into byte order (the
			 * packs undo the unpacks lane by lane). */
			h0 = _mm256_packs_epi32(_mm256_srai_epi32(h0, PRECISION_BITS),
						_mm256_srai_epi32(h1, PRECISION_BITS));
			h0 = _mm256_permute4x64_epi64(_mm256_packus_epi16(h0, h0), 0x08);
			_mm_storeu_si128((__m128i *)(void *)(o + i), _mm256_castsi256_si128(h0));
		}
		for (; i < rowlen; i++)
			o[i] = column_sum(first + i, rowlen, k, n);
	}
}

/* Whether pass_y_madd computes these weights exactly: each within 0 .. 1 << PRECISION_BITS
 * (bilinear's are), and few enough taps for its registers' copy of them. */
static int madd_fits(const struct coeffs *c, uint32_t out_n)
{
	if (c->ksize > MADD_TAPS)
		return 0;
	for (size_t i = 0; i < (size_t)out_n * (size_t)c->ksize; i++)
		if (c->k[i] < 0 || c->k[i] > 1 << PRECISION_BITS)
			return 0;
	return 1;
}
#endif

/* Along y: with AVX2's 16-bit multiply-adds where the machine has them and the weights fit,
 * else the plain loops (the same bytes either way). */
static void pass_y(const struct tfs_image *in, const struct coeffs *c, struct tfs_image *out)
{
#if defined(__x86_64__) && defined(__GNUC__)
	if (__builtin_cpu_supports("avx2") && madd_fits(c, out->h)) {
		pass_y_madd(in, c, out);
		return;
	}
#endif
	pass_y_plain(in, c, out);
}

static void transpose(const uint8_t *src, uint32_t w, uint32_t h, uint8_t *dst)
{
#if defined(__x86_64__) && defined(__GNUC__)
	if (__builtin_cpu_supports("avx2")) {
		transpose_by_block(src, w, h, dst);
		return;
	}
#endif
	transpose_by_pixel(src, w, h, dst);
}

/* Along x: the y pass over the image transposed, transposed back. The sums are the same ones,
 * so the bytes are too; rows of sums vectorise where a pixel's few taps do not. */
static int pass_x(const struct tfs_image *in, const struct coeffs *c, struct tfs_image *out)
{
	struct tfs_image t = { 0 }, u = { 0 };
	int rc = tfs_image_alloc(&t, in->h, in->w);

	if (!rc)
		rc = tfs_image_alloc(&u, in->h, out->w);
	if (!rc) {
		transpose(in->px, in->w, in->h, t.px);
		pass_y(&t, c, &u);
		transpose(u.px, u.w, u.h, out->px);
	}
	tfs_image_free(&t);
	tfs_image_free(&u);
	return rc;
}

/* One pass along x (horizontal) or y: in w x h -> out (out_w x h, or w x out_h). */
static int pass(const struct tfs_image *in, uint32_t out_n, int horizontal, struct tfs_image *out)
{
	struct coeffs c = { 0 };
	int rc = precompute(horizontal ? in->w : in->h, out_n, &c);

	if (!rc)
		rc = horizontal ? tfs_image_alloc(out, out_n, in->h)
				: tfs_image_alloc(out, in->w, out_n);
	if (!rc && horizontal)
		rc = pass_x(in, &c, out);
	else if (!rc)
		pass_y(in, &c, out);
	free(c.bounds);
	free(c.k);
	return rc;
}

int tfs_image_resize(const struct tfs_image *in, uint32_t w, uint32_t h, struct tfs_image *out)
{
	struct tfs_image mid = { 0 };
	const struct tfs_image *src = in;
	int rc = 0;

	memset(out, 0, sizeof(*out));
	if (!w || !h || !in->w || !in->h)
		return -EINVAL;
	/* As PIL: a pass only along a dimension that changes, horizontal first. */
	if (w != in->w) {
		rc = pass(in, w, 1, &mid);
		src = &mid;
	}
	if (!rc && h != src->h)
		rc = pass(src, h, 0, out);
	else if (!rc && src == &mid)
		*out = mid, mid.px = NULL;
	else if (!rc)
		rc = tfs_image_alloc(out, in->w, in->h)
			     ? -ENOMEM
			     : (memcpy(out->px, in->px, (size_t)in->w * in->h * 3), 0);
	tfs_image_free(&mid);
	return rc;
}

int tfs_image_fit(const struct tfs_image *in, uint32_t w, uint32_t h, enum tfs_image_fit how,
		  struct tfs_image *out)
{
	struct tfs_image big = { 0 };
	uint32_t rw, rh, top, left;
	int rc;

	if (how == TFS_FIT_RESIZE)
		return tfs_image_resize(in, w, h, out);
	if (how == TFS_FIT_PAD) {
		if (tfs_image_alloc(out, w, h))
			return -ENOMEM;
		memset(out->px, 0, (size_t)w * h * 3);
		for (uint32_t y = 0; y < h && y < in->h; y++)
			memcpy(out->px + (size_t)y * w * 3, in->px + (size_t)y * in->w * 3,
			       (size_t)(in->w < w ? in->w : w) * 3);
		return 0;
	}
	/* The side that limits is scaled to its target, the other as torchvision's int() does;
	 * then the centre, its offsets rounded half to even as Python's round(). */
	if ((uint64_t)w * in->h >= (uint64_t)h * in->w) {
		rw = w;
		rh = (uint32_t)((double)w * in->h / in->w);
	} else {
		rh = h;
		rw = (uint32_t)((double)h * in->w / in->h);
	}
	rc = tfs_image_resize(in, rw, rh, &big);
	if (rc)
		return rc;
	if (rw == w && rh == h) { /* nothing to crop */
		*out = big;
		return 0;
	}
	top = (uint32_t)nearbyint((rh - h) / 2.0);
	left = (uint32_t)nearbyint((rw - w) / 2.0);
	rc = tfs_image_alloc(out, w, h);
	for (uint32_t y = 0; !rc && y < h; y++)
		memcpy(out->px + (size_t)y * w * 3, big.px + ((size_t)(y + top) * rw + left) * 3,
		       (size_t)w * 3);
	tfs_image_free(&big);
	return rc;
}
