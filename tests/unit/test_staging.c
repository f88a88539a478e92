/* SPDX-License-Identifier: MIT */
/* Unit tests of gpu/staging with the host backend: gathers against a real lake, slot states. */
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

#define STAGING_TMPDIR "/tmp/tfs-staging-XXXXXX"
#include "staging_fixture.h"

/* The slot's bytes, through the file as a loader sees it. */
static void check_slot(struct tfs_staging *st, unsigned slot, const uint64_t *rows, size_t n)
{
	struct tfs_staging_loc loc;
	const uint8_t *map;
	int fd;

	tfs_staging_locate(st, slot, &loc);
	assert_int_equal(tfs_staging_rows(st, slot), n);
	fd = open(loc.path, O_RDONLY);
	assert_true(fd >= 0);
	map = mmap(NULL, loc.file_bytes, PROT_READ, MAP_SHARED, fd, 0);
	close(fd);
	assert_true(map != MAP_FAILED);
	for (size_t i = 0; i < n; i++) {
		const uint16_t *a = (const uint16_t *)(map + loc.col_off[0]) + i * 3;
		const int64_t *b = (const int64_t *)(map + loc.col_off[1]) + i;

		for (int j = 0; j < 3; j++)
			assert_int_equal(a[j], rows[i] * 3 + (uint64_t)j);
		assert_int_equal(*b, (int64_t)rows[i] * 7);
	}
	munmap((void *)map, loc.file_bytes);
}

static void test_gather_rows(void **state)
{
	uint64_t rows[200];
	struct tfs_staging *st;
	int rc, slot;

	(void)state;
	st = ring(TFS_STAGING_HOST, 3, 200, &rc);
	assert_int_equal(rc, 0);
	srand(5);
	for (int round = 0; round < 20; round++) {
		size_t n = 1 + (size_t)rand() % 200;

		for (size_t i = 0; i < n; i++)
			rows[i] = round % 2 ? (uint64_t)rand() % N : (uint64_t)(round * 40 + i) % N;
		slot = tfs_staging_fill(st, -1, rows, n, round % 3 == 0);
		assert_true(slot >= 0);
		assert_int_equal(tfs_staging_take(st, (unsigned)slot), 0);
		check_slot(st, (unsigned)slot, rows, n);
		assert_int_equal(tfs_staging_release(st, (unsigned)slot), 0);
	}
	tfs_staging_destroy(st);
}

static void test_slot_states(void **state)
{
	const uint64_t rows[] = { 1, 2, 3 };
	struct tfs_staging_loc loc;
	struct tfs_staging *st;
	char path[512];
	int rc;

	(void)state;
	st = ring(TFS_STAGING_HOST, 2, 8, &rc);
	assert_int_equal(rc, 0);
	assert_int_equal(tfs_staging_fill(st, 1, rows, 3, 1), 1);
	assert_int_equal(tfs_staging_fill(st, 1, rows, 3, 0), -EBUSY); /* filling or ready */
	assert_int_equal(tfs_staging_fill(st, -1, rows, 3, 0), 0);
	assert_int_equal(tfs_staging_fill(st, -1, rows, 3, 0), -EBUSY); /* none free */
	assert_int_equal(tfs_staging_release(st, 0), -EINVAL);		/* ready, not leased */
	assert_int_equal(tfs_staging_take(st, 0), 0);
	assert_int_equal(tfs_staging_take(st, 0), -EINVAL); /* leased already */
	assert_int_equal(tfs_staging_leased(st), 1);
	tfs_staging_discard(st, 1); /* made ahead, never taken */
	assert_int_equal(tfs_staging_take(st, 1), -EINVAL);
	assert_int_equal(tfs_staging_fill(st, 1, rows, 3, 0), 1);
	assert_int_equal(tfs_staging_release(st, 0), 0);
	assert_int_equal(tfs_staging_release(st, 0), -EINVAL);
	assert_int_equal(tfs_staging_release(st, 7), -EINVAL);
	tfs_staging_locate(st, 0, &loc);
	snprintf(path, sizeof(path), "%s", loc.path);
	assert_int_equal(access(path, R_OK), 0);
	tfs_staging_destroy(st); /* a ready slot and a leased one: both go */
	assert_int_equal(access(path, F_OK), -1);
}

static void test_limits_and_devices(void **state)
{
	struct tfs_staging *st;
	char err[256] = "";
	int rc, dev;

	(void)state;
	st = ring(TFS_STAGING_HOST, 2, 1ull << 40, &rc); /* a slot of 2^40 rows */
	assert_null(st);
	assert_int_equal(rc, -E2BIG);
	assert_int_equal(tfs_staging_parse_device("host", &dev), 0);
	assert_int_equal(dev, TFS_STAGING_HOST);
	assert_int_equal(tfs_staging_parse_device("cuda:3", &dev), 0);
	assert_int_equal(dev, 3);
	assert_int_equal(tfs_staging_parse_device("cuda", &dev), 0);
	assert_int_equal(dev, 0);
	assert_int_equal(tfs_staging_parse_device("cuda:", &dev), -EINVAL);
	assert_int_equal(tfs_staging_parse_device("cuda:x", &dev), -EINVAL);
	assert_int_equal(tfs_staging_parse_device("tpu", &dev), -EINVAL);
	assert_int_equal(tfs_staging_probe(TFS_STAGING_HOST, err, sizeof(err)), 0);
	/* A device number no machine has: a clear error, never a crash. */
	assert_int_equal(tfs_staging_probe(1000, err, sizeof(err)), -ENODEV);
	assert_non_null(strstr(err, "cuda:1000"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_gather_rows),
		cmocka_unit_test(test_slot_states),
		cmocka_unit_test(test_limits_and_devices),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
