/* SPDX-License-Identifier: MIT */
/* Fuzz target for tfs_npy_parse: arbitrary bytes as the start of an NPY file. */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "fuzz_common.h"
#include "npy.h"
#include "util.h"

static void same_info(const struct tfs_npy_info *a, const struct tfs_npy_info *b)
{
	FUZZ_CHECK(!strcmp(a->dtype.descr, b->dtype.descr));
	FUZZ_CHECK(a->dtype.kind == b->dtype.kind && a->dtype.itemsize == b->dtype.itemsize);
	FUZZ_CHECK(a->ndim == b->ndim);
	FUZZ_CHECK(!memcmp(a->shape, b->shape, a->ndim * sizeof(a->shape[0])));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len)
{
	struct tfs_npy_info info, again;
	char err[256], hdr[TFS_NPY_ALIGN];
	size_t need = 0, need2 = 0;
	uint64_t total;
	int rc;

	err[0] = 0;
	rc = tfs_npy_parse(data, len, &info, &need, err, sizeof(err));
	FUZZ_CHECK(rc == 0 || rc == -EAGAIN || rc == -EINVAL);
	FUZZ_CHECK(memchr(err, 0, sizeof(err)));
	if (rc == -EAGAIN) {
		/* The reader loops on need: it must promise progress, and a bounded amount. */
		FUZZ_CHECK(need > len);
		FUZZ_CHECK(need <= 12 + (1u << 24));
		return 0;
	}
	if (rc)
		return 0;

	FUZZ_CHECK(info.major >= 1 && info.major <= 3);
	FUZZ_CHECK(info.ndim >= 1 && info.ndim <= TFS_MAX_DIMS);
	FUZZ_CHECK(info.data_offset <= len);
	FUZZ_CHECK(info.data_offset >= (info.major == 1 ? 10u : 12u));
	FUZZ_CHECK(strchr("biufc", info.dtype.kind));
	FUZZ_CHECK(info.dtype.itemsize >= 1 && info.dtype.itemsize <= 16);
	FUZZ_CHECK(info.fortran_order == 0 || info.fortran_order == 1);
	FUZZ_CHECK(info.big_endian == 0 || (info.big_endian == 1 && info.dtype.itemsize > 1));
	total = info.dtype.itemsize;
	for (unsigned i = 0; i < info.ndim; i++)
		FUZZ_CHECK(!tfs_mul_u64(total, info.shape[i], &total));

	/* The header is self-contained: its own bytes parse to the same thing. */
	rc = tfs_npy_parse(data, (size_t)info.data_offset, &again, &need2, err, sizeof(err));
	FUZZ_CHECK(rc == 0);
	same_info(&info, &again);
	FUZZ_CHECK(again.data_offset == info.data_offset);

	/* What the mount synthesises for this array parses back to the same dtype and shape. */
	rc = tfs_npy_header_build(&info.dtype, info.shape[0], info.ndim - 1, info.shape + 1, hdr);
	FUZZ_CHECK(rc == 0);
	rc = tfs_npy_parse(hdr, sizeof(hdr), &again, &need2, err, sizeof(err));
	FUZZ_CHECK(rc == 0);
	same_info(&info, &again);
	FUZZ_CHECK(again.major == 1 && again.data_offset == TFS_NPY_ALIGN);
	FUZZ_CHECK(!again.fortran_order && !again.big_endian);
	return 0;
}
