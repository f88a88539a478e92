/* SPDX-License-Identifier: MIT */
/* Unit tests of the cuda staging backend: SKIPPED (loudly) without a CUDA device. */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "format.h"
#include "import.h"
#include "npy.h"
#include "staging.h"
#include "store.h"
#include "version.h"

#ifdef TFS_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

#define STAGING_TMPDIR "/tmp/tfs-staging-cuda-XXXXXX"
#include "staging_fixture.h"

/* Without a device: a clear -ENODEV, whatever the build. */
static void test_no_device_is_an_error(void **state)
{
	struct tfs_staging *st;
	char err[256] = "";
	int rc;

	(void)state;
	assert_int_equal(tfs_staging_probe(999, err, sizeof(err)), -ENODEV);
	assert_non_null(strstr(err, "cuda:999"));
	st = ring(999, 2, 8, &rc);
	assert_null(st);
	assert_int_equal(rc, -ENODEV);
}

/* Returns 1 when a device is there; otherwise says why the caller skips. */
static int have_device(void)
{
	char err[256] = "";

	if (tfs_staging_probe(0, err, sizeof(err))) {
		printf("SKIP: %s\n", err);
		return 0;
	}
	return 1;
}

/* Staged device slots hold what the host backend gathers, after the slot's event. */
static void test_cuda_equals_host(void **state)
{
	struct tfs_staging *dev, *host;
	uint64_t rows[256];
	int rc;

	(void)state;
	if (!have_device()) {
		skip();
		return;
	}
#ifdef TFS_HAVE_CUDA
	dev = ring(0, 3, 256, &rc);
	assert_int_equal(rc, 0);
	host = ring(TFS_STAGING_HOST, 1, 256, &rc);
	assert_int_equal(rc, 0);
	srand(9);
	for (int round = 0; round < 30; round++) {
		const size_t n = 1 + (size_t)rand() % 256;
		struct tfs_staging_loc dl, hl;
		uint8_t *want, *got;
		size_t bytes;
		int ds, hs, fd;

		for (size_t i = 0; i < n; i++)
			rows[i] = (uint64_t)rand() % N;
		ds = tfs_staging_fill(dev, -1, rows, n, round % 2);
		hs = tfs_staging_fill(host, -1, rows, n, 0);
		assert_true(ds >= 0 && hs >= 0);
		assert_int_equal(tfs_staging_take(dev, (unsigned)ds), 0);
		assert_int_equal(tfs_staging_take(host, (unsigned)hs), 0);
		tfs_staging_locate(dev, (unsigned)ds, &dl);
		tfs_staging_locate(host, (unsigned)hs, &hl);
		assert_int_equal(dl.device, 0);
		assert_int_equal(dl.col_off[1] - dl.base, hl.col_off[1] - hl.base);
		bytes = (size_t)(hl.col_off[1] - hl.base) + n * 8;
		want = malloc(bytes);
		got = malloc(bytes);
		assert_non_null(want);
		assert_non_null(got);
		fd = open(hl.path, O_RDONLY);
		assert_true(fd >= 0);
		assert_int_equal(pread(fd, want, bytes, (off_t)hl.base), (ssize_t)bytes);
		close(fd);
		/* Every copy of the ring's stream done, then the slot read back. */
		assert_int_equal(cudaDeviceSynchronize(), cudaSuccess);
		assert_int_equal(cudaMemcpy(got, (uint8_t *)dl.dev_mem + dl.base, bytes,
					    cudaMemcpyDeviceToHost),
				 cudaSuccess);
		/* Column a's rows, then column b's (the gap between them is alignment). */
		assert_memory_equal(got, want, n * 6);
		assert_memory_equal(got + (dl.col_off[1] - dl.base),
				    want + (hl.col_off[1] - hl.base), n * 8);
		free(want);
		free(got);
		assert_int_equal(tfs_staging_release(dev, (unsigned)ds), 0);
		assert_int_equal(tfs_staging_release(host, (unsigned)hs), 0);
	}
	tfs_staging_destroy(dev);
	tfs_staging_destroy(host);
#else
	(void)dev, (void)host, (void)rows, (void)rc;
#endif
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_no_device_is_an_error),
		cmocka_unit_test(test_cuda_equals_host),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
