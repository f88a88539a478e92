/* SPDX-License-Identifier: MIT */
/* image: JPEG and PNG decoded to RGB8 by libjpeg-turbo and libpng (resize.c resizes them). */
#include "image.h"

#include <errno.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jpeglib.h>
#include <png.h>

void tfs_image_free(struct tfs_image *img)
{
	free(img->px);
	memset(img, 0, sizeof(*img));
}

int tfs_image_alloc(struct tfs_image *img, uint32_t w, uint32_t h)
{
	img->w = w;
	img->h = h;
	img->px = malloc((size_t)w * h * 3 + 1);
	return img->px ? 0 : -ENOMEM;
}

/* Room for a decoded image of w x h pixels; one larger than the limit is refused before a byte
 * is decoded (a small file can claim a huge image that compresses to almost nothing): -EINVAL,
 * with the reason in err. */
static int decoded_alloc(struct tfs_image *img, uint32_t w, uint32_t h, char *err, size_t err_cap)
{
	if ((uint64_t)w * h > TFS_IMAGE_MAX_PIXELS) {
		snprintf(err, err_cap, "%ux%u pixels, more than the limit of %u", w, h,
			 TFS_IMAGE_MAX_PIXELS);
		return -EINVAL;
	}
	return tfs_image_alloc(img, w, h);
}

/* --- EXIF orientation ----------------------------------------------------------------------- */

static unsigned get16(const uint8_t *p, int big)
{
	return big ? (unsigned)p[0] << 8 | p[1] : (unsigned)p[1] << 8 | p[0];
}

static uint32_t get32(const uint8_t *p, int big)
{
	return big ? (uint32_t)get16(p, 1) << 16 | get16(p + 2, 1)
		   : (uint32_t)get16(p + 2, 0) << 16 | get16(p, 0);
}

/* The orientation tag (1..8) of an APP1 EXIF payload; 1 when absent or unreadable. */
static unsigned exif_orientation(const uint8_t *p, size_t n)
{
	const uint8_t *t = p + 6; /* the TIFF header, after "Exif\0\0" */
	size_t tn, ifd, count;
	int big;

	if (n < 14 || memcmp(p, "Exif\0\0", 6))
		return 1;
	tn = n - 6;
	if (!memcmp(t, "MM", 2))
		big = 1;
	else if (!memcmp(t, "II", 2))
		big = 0;
	else
		return 1;
	ifd = get32(t + 4, big);
	if (ifd + 2 > tn)
		return 1;
	count = get16(t + ifd, big);
	for (size_t i = 0; i < count && ifd + 2 + 12 * (i + 1) <= tn; i++) {
		const uint8_t *e = t + ifd + 2 + 12 * i;

		if (get16(e, big) == 0x0112) {
			unsigned v = get16(e + 8, big);

			return v >= 1 && v <= 8 ? v : 1;
		}
	}
	return 1;
}

/* Apply an EXIF orientation, as PIL's ImageOps.exif_transpose does. */
static int orient(struct tfs_image *img, unsigned o)
{
	const uint32_t w = img->w, h = img->h;
	struct tfs_image out;
	int rc;

	if (o <= 1)
		return 0;
	rc = o >= 5 ? tfs_image_alloc(&out, h, w) : tfs_image_alloc(&out, w, h);
	if (rc)
		return rc;
	for (uint32_t y = 0; y < out.h; y++)
		for (uint32_t x = 0; x < out.w; x++) {
			uint32_t sx, sy;

			switch (o) {
			case 2:
				sx = w - 1 - x, sy = y;
				break;
			case 3:
				sx = w - 1 - x, sy = h - 1 - y;
				break;
			case 4:
				sx = x, sy = h - 1 - y;
				break;
			case 5:
				sx = y, sy = x;
				break;
			case 6:
				sx = y, sy = h - 1 - x;
				break;
			case 7:
				sx = w - 1 - y, sy = h - 1 - x;
				break;
			default:
				sx = w - 1 - y, sy = x;
				break;
			}
			memcpy(out.px + ((size_t)y * out.w + x) * 3,
			       img->px + ((size_t)sy * w + sx) * 3, 3);
		}
	tfs_image_free(img);
	*img = out;
	return 0;
}

/* --- JPEG ----------------------------------------------------------------------------------- */

struct jerr {
	struct jpeg_error_mgr mgr;
	jmp_buf jump;
	char msg[JMSG_LENGTH_MAX];
	int warned; /* corrupt data: the image is not whole */
};

static void jerr_exit(j_common_ptr cinfo)
{
	struct jerr *e = (struct jerr *)cinfo->err;

	e->mgr.format_message(cinfo, e->msg);
	longjmp(e->jump, 1);
}

/* Warnings (level -1) are data the decoder had to make up: a truncated or damaged file. */
static void jerr_emit(j_common_ptr cinfo, int level)
{
	struct jerr *e = (struct jerr *)cinfo->err;

	if (level < 0 && !e->warned) {
		e->warned = 1;
		e->mgr.format_message(cinfo, e->msg);
	}
}

/* draft_w, draft_h: 0, or the size PIL's Image.draft("RGB", (w, h)) asks for: the largest of
 * 1/8, 1/4 and 1/2 that leaves the image at least that size is applied in the DCT domain. */
static int decode_jpeg(const uint8_t *data, size_t len, uint32_t draft_w, uint32_t draft_h,
		       struct tfs_image *out, char *err, size_t err_cap)
{
	struct jpeg_decompress_struct cinfo;
	struct jerr e = { 0 };
	volatile unsigned orientation = 1;
	volatile int rc = 0;

	memset(out, 0, sizeof(*out));
	cinfo.err = jpeg_std_error(&e.mgr);
	e.mgr.error_exit = jerr_exit;
	e.mgr.emit_message = jerr_emit;
	if (setjmp(e.jump)) {
		snprintf(err, err_cap, "%s", e.msg);
		rc = -EINVAL;
		goto out;
	}
	jpeg_create_decompress(&cinfo);
	jpeg_mem_src(&cinfo, data, (unsigned long)len);
	jpeg_save_markers(&cinfo, JPEG_APP0 + 1, 0xffff);
	jpeg_read_header(&cinfo, TRUE);
	for (jpeg_saved_marker_ptr m = cinfo.marker_list; m; m = m->next)
		if (m->marker == JPEG_APP0 + 1)
			orientation = exif_orientation(m->data, m->data_length);
	if (cinfo.jpeg_color_space == JCS_CMYK || cinfo.jpeg_color_space == JCS_YCCK) {
		snprintf(err, err_cap, "CMYK JPEG images are not taken");
		rc = -EINVAL;
		goto out;
	}
	cinfo.out_color_space = JCS_RGB;
	/* PIL's defaults (libjpeg's): islow DCT, fancy upsampling. */
	cinfo.dct_method = JDCT_ISLOW;
	if (draft_w && draft_h) {
		/* As PIL's JpegImagePlugin.draft, on the stored size (before any orientation). */
		const uint32_t sx = cinfo.image_width / draft_w, sy = cinfo.image_height / draft_h;
		const uint32_t scale = sx < sy ? sx : sy;

		cinfo.scale_num = 1;
		cinfo.scale_denom = scale >= 8 ? 8 : scale >= 4 ? 4 : scale >= 2 ? 2 : 1;
	}
	jpeg_start_decompress(&cinfo);
	rc = decoded_alloc(out, cinfo.output_width, cinfo.output_height, err, err_cap);
	if (rc)
		goto out;
	while (cinfo.output_scanline < cinfo.output_height) {
		JSAMPROW row = out->px + (size_t)cinfo.output_scanline * out->w * 3;

		jpeg_read_scanlines(&cinfo, &row, 1);
	}
	jpeg_finish_decompress(&cinfo);
	if (e.warned) {
		snprintf(err, err_cap, "%s", e.msg);
		rc = -EINVAL;
		goto out;
	}
	rc = orient(out, orientation);
out:
	jpeg_destroy_decompress(&cinfo);
	if (rc)
		tfs_image_free(out);
	return rc;
}

/* --- PNG ------------------------------------------------------------------------------------ */

struct pngsrc {
	const uint8_t *p;
	size_t left;
	char *err;
	size_t err_cap;
};

static void png_read_mem(png_structp png, png_bytep dst, size_t n)
{
	struct pngsrc *s = png_get_io_ptr(png);

	if (n > s->left)
		png_error(png, "Premature end of PNG file");
	memcpy(dst, s->p, n);
	s->p += n;
	s->left -= n;
}

static void png_err(png_structp png, png_const_charp msg)
{
	struct pngsrc *s = png_get_error_ptr(png);

	snprintf(s->err, s->err_cap, "%s", msg);
	png_longjmp(png, 1);
}

static void png_warn(png_structp png, png_const_charp msg)
{
	(void)png, (void)msg; /* ancillary chunk trouble: the pixels are still whole */
}

static int decode_png(const uint8_t *data, size_t len, struct tfs_image *out, char *err,
		      size_t err_cap)
{
	struct pngsrc src = { data, len, err, err_cap };
	png_structp png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &src, png_err, png_warn);
	png_infop info = png ? png_create_info_struct(png) : NULL;
	/* volatile: set after setjmp and read after a longjmp (an error mid-image). */
	png_bytep *volatile rows = NULL;
	volatile int rc = 0;

	memset(out, 0, sizeof(*out));
	if (!png || !info) {
		png_destroy_read_struct(&png, &info, NULL);
		return -ENOMEM;
	}
	if (setjmp(png_jmpbuf(png))) {
		rc = -EINVAL;
		goto out;
	}
	png_set_read_fn(png, &src, png_read_mem);
	png_read_info(png, info);
	/* To RGB8 as PIL's convert("RGB"): high bytes, palettes and grey expanded, alpha
	 * dropped. */
	png_set_strip_16(png);
	png_set_packing(png);
	png_set_palette_to_rgb(png);
	png_set_expand_gray_1_2_4_to_8(png);
	png_set_gray_to_rgb(png);
	png_set_strip_alpha(png);
	png_set_interlace_handling(png);
	png_read_update_info(png, info);
	if (png_get_rowbytes(png, info) != (size_t)png_get_image_width(png, info) * 3) {
		snprintf(err, err_cap, "PNG does not convert to 8-bit RGB");
		rc = -EINVAL;
		goto out;
	}
	rc = decoded_alloc(out, png_get_image_width(png, info), png_get_image_height(png, info),
			   err, err_cap);
	if (!rc && !(rows = malloc(out->h * sizeof(*rows))))
		rc = -ENOMEM;
	if (rc)
		goto out;
	for (uint32_t y = 0; y < out->h; y++)
		rows[y] = out->px + (size_t)y * out->w * 3;
	png_read_image(png, rows);
	png_read_end(png, NULL);
out:
	free(rows);
	png_destroy_read_struct(&png, &info, NULL);
	if (rc)
		tfs_image_free(out);
	return rc;
}

int tfs_image_decode(const uint8_t *data, size_t len, struct tfs_image *out, char *err,
		     size_t err_cap)
{
	return tfs_image_decode_draft(data, len, 0, 0, out, err, err_cap);
}

int tfs_image_decode_draft(const uint8_t *data, size_t len, uint32_t w, uint32_t h,
			   struct tfs_image *out, char *err, size_t err_cap)
{
	static const uint8_t png_sig[8] = { 0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n' };

	err[0] = 0;
	if (len >= 3 && data[0] == 0xff && data[1] == 0xd8 && data[2] == 0xff)
		return decode_jpeg(data, len, w, h, out, err, err_cap);
	if (len >= 8 && !memcmp(data, png_sig, 8))
		return decode_png(data, len, out, err, err_cap);
	snprintf(err, err_cap, "not a JPEG or PNG image");
	return -EINVAL;
}
