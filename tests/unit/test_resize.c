/* SPDX-License-Identifier: MIT */
/* tfs_image_resize against PIL's bilinear resize written plainly (a pixel at a time, both passes
 * in PIL's order and rounding), for sizes around the 8 x 8 blocks the passes move pixels in:
 * every edge case of those blocks, shrinking and growing, one side or both. */
#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "image.h"

#define PRECISION_BITS (32 - 8 - 2)

/* One pass of PIL's ImagingResample (bilinear): n input pixels of 3 channels, `stride` bytes
 * apart along the pass, to out_n; rows of the other side `rstride` apart, `rows` of them. */
static void ref_pass(const uint8_t *in, uint32_t n, size_t stride, uint8_t *out, uint32_t out_n,
		     size_t ostride, uint32_t rows, size_t rstride, size_t orstride)
{
	const double scale = (double)n / out_n, fs = scale < 1.0 ? 1.0 : scale, support = fs;

	for (uint32_t xx = 0; xx < out_n; xx++) {
		const double center = (xx + 0.5) * scale;
		int xmin = (int)(center - support + 0.5), xmax = (int)(center + support + 0.5);
		double w[64], ww = 0.0;
		int32_t k[64];

		xmin = xmin < 0 ? 0 : xmin;
		xmax = (xmax > (int)n ? (int)n : xmax) - xmin;
		assert_true(xmax <= 64);
		for (int x = 0; x < xmax; x++) {
			double d = fabs((x + xmin - center + 0.5) / fs);

			w[x] = d < 1.0 ? 1.0 - d : 0.0;
			ww += w[x];
		}
		for (int x = 0; x < xmax; x++) {
			double v = ww != 0.0 ? w[x] / ww : 0.0;

			k[x] = (int32_t)(v < 0 ? -0.5 + v * (1 << PRECISION_BITS)
					       : 0.5 + v * (1 << PRECISION_BITS));
		}
		for (uint32_t r = 0; r < rows; r++)
			for (int c = 0; c < 3; c++) {
				int32_t ss = 1 << (PRECISION_BITS - 1);

				for (int x = 0; x < xmax; x++)
					ss += in[r * rstride + (size_t)(xmin + x) * stride + c] * k[x];
				ss >>= PRECISION_BITS;
				out[r * orstride + xx * ostride + c] =
					(uint8_t)(ss < 0 ? 0 : ss > 255 ? 255 : ss);
			}
	}
}

/* PIL: a pass only along a side that changes, horizontal first. */
static void ref_resize(const struct tfs_image *in, uint32_t w, uint32_t h, uint8_t *out)
{
	uint8_t *mid = malloc((size_t)w * in->h * 3 + 1);
	const uint8_t *src = in->px;

	assert_non_null(mid);
	if (w != in->w) {
		ref_pass(in->px, in->w, 3, mid, w, 3, in->h, (size_t)in->w * 3, (size_t)w * 3);
		src = mid;
	}
	if (h != in->h)
		ref_pass(src, in->h, (size_t)w * 3, out, h, (size_t)w * 3, w, 3, 3);
	else
		memcpy(out, src, (size_t)w * h * 3);
	free(mid);
}

static void check(uint32_t iw, uint32_t ih, uint32_t w, uint32_t h, unsigned seed)
{
	struct tfs_image in, out;
	uint8_t *want = malloc((size_t)w * h * 3 + 1);

	assert_non_null(want);
	assert_int_equal(tfs_image_alloc(&in, iw, ih), 0);
	srand(seed);
	for (size_t i = 0; i < (size_t)iw * ih * 3; i++)
		in.px[i] = (uint8_t)rand();
	in.px[(size_t)iw * ih * 3] = 0xa5; /* the pad byte: read past, never used */
	assert_int_equal(tfs_image_resize(&in, w, h, &out), 0);
	assert_int_equal(out.w, w);
	assert_int_equal(out.h, h);
	ref_resize(&in, w, h, want);
	if (memcmp(out.px, want, (size_t)w * h * 3))
		fail_msg("%ux%u -> %ux%u differs from PIL's rule", iw, ih, w, h);
	tfs_image_free(&in);
	tfs_image_free(&out);
	free(want);
}

static void test_sizes_around_blocks(void **state)
{
	static const uint32_t sides[] = { 1, 2, 7, 8, 9, 15, 16, 17, 23, 24, 25, 31, 32, 33, 40, 57 };
	const size_t n = sizeof(sides) / sizeof(sides[0]);
	unsigned seed = 1;

	(void)state;
	for (size_t a = 0; a < n; a++)
		for (size_t b = 0; b < n; b++) {
			const uint32_t iw = sides[a], ih = sides[b];

			check(iw, ih, iw > 3 ? iw * 3 / 4 : iw + 1, ih, seed++); /* x pass alone */
			check(iw, ih, iw, ih > 3 ? ih * 3 / 4 : ih + 2, seed++); /* y pass alone */
			check(iw, ih, (iw + 1) / 2, ih * 2 + 1, seed++);	 /* both */
			check(iw, ih, iw * 2, (ih + 2) / 3, seed++);
		}
}

static void test_the_import_sizes(void **state)
{
	(void)state;
	check(256, 256, 224, 224, 7);
	check(320, 240, 298, 224, 8);
	check(500, 375, 298, 224, 9);
	check(640, 427, 335, 224, 10);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_sizes_around_blocks),
		cmocka_unit_test(test_the_import_sizes),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
