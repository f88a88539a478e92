/* SPDX-License-Identifier: MIT */
/* image: JPEG (libjpeg-turbo) and PNG (libpng) decoded to 8-bit RGB, and resized as PIL resizes
 * (bilinear with antialiasing), for the image importer.
 *
 * The channel rule: every image becomes H x W x 3 RGB, as PIL's convert("RGB") makes it, which
 * is what torchvision's image loader does: grey is repeated into the three channels, alpha is
 * dropped (not composited), a palette is expanded, 16-bit samples keep their high byte, and a
 * JPEG's EXIF orientation is applied. */
#ifndef TFS_IMAGE_H
#define TFS_IMAGE_H

#include <stddef.h>
#include <stdint.h>

/* Pixels, row-major, 3 bytes a pixel. */
struct tfs_image {
	uint8_t *px;
	uint32_t w, h;
};

#define TFS_IMAGE_ERR 160
/* The most pixels a decoded image may have: PIL's decompression-bomb limit (2 x
 * Image.MAX_IMAGE_PIXELS), beyond which PIL refuses to open an image too. */
#define TFS_IMAGE_MAX_PIXELS 178956970u

/* Decode a JPEG or PNG file's bytes. -EINVAL with the reason in err (as the decoder says it:
 * "Premature end of JPEG file") for anything that is not a whole, valid image of those kinds, or
 * one of more than TFS_IMAGE_MAX_PIXELS pixels. */
int tfs_image_decode(const uint8_t *data, size_t len, struct tfs_image *out, char *err,
		     size_t err_cap);
/* tfs_image_decode, but a JPEG at least twice w x h is decoded smaller in the DCT domain, as
 * PIL's Image.draft("RGB", (w, h)) decodes it: at the largest of 1/8, 1/4 and 1/2 of its stored
 * size that stays at least w x h (rounded up). Several times faster for large photographs; the
 * pixels are not those of the full decode (a later resize to w x h differs by a few levels).
 * w or h 0: as tfs_image_decode. PNG: always as tfs_image_decode. */
int tfs_image_decode_draft(const uint8_t *data, size_t len, uint32_t w, uint32_t h,
			   struct tfs_image *out, char *err, size_t err_cap);
void tfs_image_free(struct tfs_image *img);
/* Room for w x h pixels (and a byte more: a pixel may be moved as 4 bytes); -ENOMEM. */
int tfs_image_alloc(struct tfs_image *img, uint32_t w, uint32_t h);

/* Resize to w x h, bilinear with the filter widened by the scale when shrinking (PIL's
 * Image.resize(..., BILINEAR), with its fixed-point rounding). */
int tfs_image_resize(const struct tfs_image *in, uint32_t w, uint32_t h, struct tfs_image *out);

/* How --size HxW is met. */
enum tfs_image_fit {
	TFS_FIT_RESIZE, /* resize to exactly HxW (aspect not kept) */
	TFS_FIT_CROP,	/* resize the shorter side to fit, then take the centre (torchvision's
			 * Resize(min(H, W)) + CenterCrop((H, W))) */
	TFS_FIT_PAD,	/* place the image top-left on zeros, cut what passes HxW */
};

/* in made exactly w x h. */
int tfs_image_fit(const struct tfs_image *in, uint32_t w, uint32_t h, enum tfs_image_fit how,
		  struct tfs_image *out);

#endif
