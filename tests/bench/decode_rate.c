/* SPDX-License-Identifier: MIT */
/* decode_rate: decode image files with core/image.c on one thread, as the image importer does,
 * and print images per second (bench.py case 9 sets it against PIL). Files read first, so the
 * figure is the decoder's. Usage: decode_rate FILE... */
#include <stdio.h>
#include <stdlib.h>

#include "image.h"
#include "util.h"

int main(int argc, char **argv)
{
	struct tfs_buf *files = calloc((size_t)argc, sizeof(*files));
	char err[TFS_IMAGE_ERR];
	uint64_t t0;
	int bad = 0;

	if (!files || argc < 2) {
		fprintf(stderr, "usage: decode_rate FILE...\n");
		return 2;
	}
	for (int i = 1; i < argc; i++) {
		FILE *f = fopen(argv[i], "rb");

		if (!f || tfs_read_fd(fileno(f), &files[i])) {
			fprintf(stderr, "%s: cannot read\n", argv[i]);
			return 1;
		}
		fclose(f);
	}
	t0 = tfs_now_ns();
	for (int i = 1; i < argc; i++) {
		struct tfs_image img;

		if (tfs_image_decode(files[i].data, files[i].len, &img, err, sizeof(err)))
			bad++;
		else
			tfs_image_free(&img);
	}
	printf("%.1f images/s (%d failed)\n", (argc - 1) / ((double)(tfs_now_ns() - t0) / 1e9),
	       bad);
	for (int i = 1; i < argc; i++)
		tfs_buf_free(&files[i]);
	free(files);
	return 0;
}
