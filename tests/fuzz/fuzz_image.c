/* SPDX-License-Identifier: MIT */
/* Fuzz target for the image decoders (core/image.c over libjpeg-turbo and libpng): any bytes as
 * a JPEG or PNG file, then resized and fitted as the importer does with --size. */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "fuzz_common.h"
#include "image.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len)
{
	struct tfs_image img, out;
	char err[TFS_IMAGE_ERR] = "";
	int rc = tfs_image_decode(data, len, &img, err, sizeof(err));

	FUZZ_CHECK(rc == 0 || rc == -EINVAL || rc == -ENOMEM);
	FUZZ_CHECK(memchr(err, 0, sizeof(err)) != NULL);
	if (rc) {
		FUZZ_CHECK(rc == -ENOMEM || err[0] != 0); /* a refusal says why */
		return 0;
	}
	FUZZ_CHECK(img.w > 0 && img.h > 0 && img.px != NULL);
	FUZZ_CHECK((uint64_t)img.w * img.h <= TFS_IMAGE_MAX_PIXELS);
	/* Every pixel is there: reading them all must stay in bounds. */
	{
		unsigned sum = 0;

		for (size_t i = 0; i < (size_t)img.w * img.h * 3; i++)
			sum += img.px[i];
		(void)sum;
	}
	if ((uint64_t)img.w * img.h <= 1u << 20) {
		for (int how = TFS_FIT_RESIZE; how <= TFS_FIT_PAD; how++)
			if (!tfs_image_fit(&img, 7, 5, (enum tfs_image_fit)how, &out)) {
				FUZZ_CHECK(out.w == 7 && out.h == 5);
				tfs_image_free(&out);
			}
	}
	tfs_image_free(&img);
	return 0;
}
