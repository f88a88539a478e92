/* SPDX-License-Identifier: MIT */
/* Fuzz target for tfs_dtype_parse (and tfs_dtype_swap): arbitrary numpy descr strings. */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_common.h"
#include "npy.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len)
{
	struct tfs_dtype dt, again;
	char err[128], *descr;
	uint8_t buf[64], orig[64];
	int big, big2, rc;

	/* A descr is a C string (it comes out of an NPY header or a manifest line). */
	descr = malloc(len + 1);
	if (!descr)
		return 0;
	memcpy(descr, data, len);
	descr[len] = 0;
	err[0] = 0;
	rc = tfs_dtype_parse(descr, &dt, &big, err, sizeof(err));
	FUZZ_CHECK(rc == 0 || rc == -EINVAL);
	FUZZ_CHECK(memchr(err, 0, sizeof(err)));
	if (rc) {
		FUZZ_CHECK(err[0]);
		goto out;
	}
	FUZZ_CHECK(strchr("biufc", dt.kind) && dt.kind);
	FUZZ_CHECK(dt.itemsize == 1 || dt.itemsize == 2 || dt.itemsize == 4 || dt.itemsize == 8 ||
		   dt.itemsize == 16);
	FUZZ_CHECK(big == 0 || big == 1);
	FUZZ_CHECK(!big || dt.itemsize > 1);
	FUZZ_CHECK(dt.descr[0] == (dt.itemsize == 1 ? '|' : '<'));
	FUZZ_CHECK(dt.descr[1] == dt.kind);

	/* The normalised descr is a fixed point: it parses to itself, little-endian. */
	rc = tfs_dtype_parse(dt.descr, &again, &big2, err, sizeof(err));
	FUZZ_CHECK(rc == 0 && !big2);
	FUZZ_CHECK(!strcmp(again.descr, dt.descr) && again.kind == dt.kind &&
		   again.itemsize == dt.itemsize);

	/* Swapping twice is the identity. */
	for (size_t i = 0; i < sizeof(buf); i++)
		buf[i] = (uint8_t)(i * 37 + len);
	memcpy(orig, buf, sizeof(buf));
	tfs_dtype_swap(&dt, buf, sizeof(buf));
	if (dt.itemsize > 1)
		FUZZ_CHECK(memcmp(buf, orig, sizeof(buf)));
	tfs_dtype_swap(&dt, buf, sizeof(buf));
	FUZZ_CHECK(!memcmp(buf, orig, sizeof(buf)));
out:
	free(descr);
	return 0;
}
