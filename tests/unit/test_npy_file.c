/* SPDX-License-Identifier: MIT */
/* Unit tests for core/npy: NPY headers read from files, headers built for rows, and shapes as
 * text. */
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
#include <unistd.h>

#include <cmocka.h>

#include "npy.h"
#include "util.h"

#include "dtype_fixture.h"
#include "npy_fixture.h"

/* --- tfs_npy_read_header -------------------------------------------------------------------- */

static char tmpdir[64];

static int setup_tmpdir(void **state)
{
	(void)state;
	snprintf(tmpdir, sizeof(tmpdir), "/tmp/tfs-test-npy-XXXXXX");
	return mkdtemp(tmpdir) ? 0 : -1;
}

static int teardown_tmpdir(void **state)
{
	char cmd[128];

	(void)state;
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
	return system(cmd) == 0 ? 0 : -1;
}

/* Write bytes to a fresh file in tmpdir and return an fd open for reading. */
static int temp_file(const void *data, size_t len)
{
	static unsigned counter;
	char path[128];
	int fd;

	snprintf(path, sizeof(path), "%s/f%u.npy", tmpdir, counter++);
	fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	assert_true(fd >= 0);
	assert_int_equal(tfs_write_full(fd, data, len), 0);
	return fd;
}

static void test_npy_read_header_numpy_files(void **state)
{
	(void)state;
	for (size_t i = 0; i < NCASES; i++) {
		const struct npy_case *c = &npy_cases[i];
		uint8_t file[1024];
		struct tfs_npy_info info;
		char err[256] = "";
		int fd;

		/* Header plus some data, as a real file has. */
		memcpy(file, c->bytes, c->len);
		memset(file + c->len, 0x3c, sizeof(file) - c->len);
		fd = temp_file(file, sizeof(file));
		if (tfs_npy_read_header(fd, &info, err, sizeof(err)))
			fail_msg("%s: %s", c->name, err);
		check_case(c, &info);
		close(fd);

		/* Just the header: an empty array's file, or one of zero rows. */
		fd = temp_file(c->bytes, c->len);
		assert_int_equal(tfs_npy_read_header(fd, &info, err, sizeof(err)), 0);
		check_case(c, &info);
		close(fd);
	}
}

static void test_npy_read_header_longer_than_first_read(void **state)
{
	struct tfs_npy_info info;
	char hdr[TFS_NPY_ALIGN], err[256] = "";
	struct tfs_dtype dt = dtype_of("<f4");
	const uint64_t row[] = { 3, 4 };
	int fd;

	(void)state;
	/* 192 bytes of header: more than a first 128-byte read. */
	fd = temp_file(npy_v1_32dims, sizeof(npy_v1_32dims) - 1);
	assert_int_equal(tfs_npy_read_header(fd, &info, err, sizeof(err)), 0);
	assert_int_equal(info.ndim, 32);
	assert_int_equal(info.data_offset, 192);
	close(fd);

	/* A whole page of header. */
	assert_int_equal(tfs_npy_header_build(&dt, 10, 2, row, hdr), 0);
	fd = temp_file(hdr, sizeof(hdr));
	assert_int_equal(tfs_npy_read_header(fd, &info, err, sizeof(err)), 0);
	assert_int_equal(info.data_offset, TFS_NPY_ALIGN);
	assert_int_equal(info.ndim, 3);
	close(fd);
}

static void test_npy_read_header_truncated_files(void **state)
{
	(void)state;
	for (size_t i = 0; i < NCASES; i++) {
		const struct npy_case *c = &npy_cases[i];

		for (size_t len = 0; len < c->len; len += (len < 16 ? 1 : 13)) {
			struct tfs_npy_info info;
			char err[256] = "";
			int fd = temp_file(c->bytes, len);

			assert_int_equal(tfs_npy_read_header(fd, &info, err, sizeof(err)), -EINVAL);
			assert_true(err[0] != 0);
			close(fd);
		}
	}
}

static void test_npy_read_header_not_npy(void **state)
{
	static const char text[] = "this is a text file, not an NPY file at all\n";
	struct tfs_npy_info info;
	char err[256] = "";
	int fd = temp_file(text, sizeof(text) - 1);

	(void)state;
	assert_int_equal(tfs_npy_read_header(fd, &info, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "magic"));
	close(fd);
}

static void test_npy_read_header_bad_fd(void **state)
{
	struct tfs_npy_info info;
	char err[256] = "";

	(void)state;
	assert_int_equal(tfs_npy_read_header(-1, &info, err, sizeof(err)), -EBADF);
}

/* A header that ends in the middle of a number, followed in the file by data that happens to be
 * digits: the reader's buffer ends with the header. */
static void test_npy_read_header_ending_in_digits_no_overread(void **state)
{
	static const char dict[] = "{'descr': '<f4', 'fortran_order': False, 'shape': (12";
	uint8_t file[256];
	size_t n = sizeof(dict) - 1;
	struct tfs_npy_info info;
	char err[256] = "";
	int fd;

	(void)state;
	memcpy(file, "\x93NUMPY\x01\x00", 8);
	file[8] = (uint8_t)n;
	file[9] = 0;
	memcpy(file + 10, dict, n);
	memset(file + 10 + n, '3', sizeof(file) - 10 - n);
	fd = temp_file(file, sizeof(file));
	assert_int_equal(tfs_npy_read_header(fd, &info, err, sizeof(err)), -EINVAL);
	close(fd);
}

/* --- tfs_npy_header_build ------------------------------------------------------------------- */

static void check_built_header(const char *descr, uint64_t rows, unsigned row_ndim,
			       const uint64_t *row_shape)
{
	struct tfs_dtype dt = dtype_of(descr);
	char hdr[TFS_NPY_ALIGN + 1], want_prefix[1200], shp[1024];
	uint64_t full[TFS_MAX_DIMS];
	struct tfs_npy_info info;
	size_t need = 0;
	char err[256] = "";

	hdr[TFS_NPY_ALIGN] = 0x7f; /* canary: the header is exactly one page */
	assert_int_equal(tfs_npy_header_build(&dt, rows, row_ndim, row_shape, hdr), 0);
	assert_int_equal(hdr[TFS_NPY_ALIGN], 0x7f);
	assert_memory_equal(hdr, "\x93NUMPY\x01\x00", 8);
	assert_int_equal((uint8_t)hdr[8] | (uint8_t)hdr[9] << 8, 4086);
	assert_int_equal(hdr[TFS_NPY_ALIGN - 1], '\n');
	for (size_t i = 10; i < TFS_NPY_ALIGN - 1; i++)
		if ((uint8_t)hdr[i] < 0x20 || (uint8_t)hdr[i] > 0x7e)
			fail_msg("byte %zu of the header is 0x%02x", i, (uint8_t)hdr[i]);

	full[0] = rows;
	for (unsigned d = 0; d < row_ndim; d++)
		full[d + 1] = row_shape[d];
	tfs_shape_str(full, row_ndim + 1, shp, sizeof(shp));
	snprintf(want_prefix, sizeof(want_prefix),
		 "{'descr': '%s', 'fortran_order': False, 'shape': %s, }", dt.descr, shp);
	assert_memory_equal(hdr + 10, want_prefix, strlen(want_prefix));

	assert_int_equal(parse_exact(hdr, TFS_NPY_ALIGN, &info, &need, err, sizeof(err)), 0);
	assert_int_equal(info.major, 1);
	assert_int_equal(info.minor, 0);
	assert_string_equal(info.dtype.descr, dt.descr);
	assert_int_equal(info.dtype.itemsize, dt.itemsize);
	assert_int_equal(info.big_endian, 0);
	assert_int_equal(info.fortran_order, 0);
	assert_int_equal(info.ndim, row_ndim + 1);
	for (unsigned d = 0; d <= row_ndim; d++)
		assert_int_equal(info.shape[d], full[d]);
	assert_int_equal(info.data_offset, TFS_NPY_ALIGN);
}

static void test_npy_header_build_round_trip(void **state)
{
	static const uint64_t img[] = { 3, 32, 32 }, vec[] = { 768 }, one[] = { 1 };
	uint64_t big[TFS_MAX_DIMS - 1];

	(void)state;
	check_built_header("<f4", 5, 0, NULL);
	check_built_header("<f4", 0, 0, NULL);
	check_built_header("|u1", 60000, 3, img);
	check_built_header("|b1", 1, 1, one);
	check_built_header("<c16", 2, 1, vec);
	check_built_header(">i8", 123456789, 1, vec); /* stored little-endian */
	check_built_header("|u1", UINT64_MAX, 0, NULL);
	for (unsigned d = 0; d < TFS_MAX_DIMS - 1; d++)
		big[d] = d % 2 ? 18446744073709551615ull : 0;
	check_built_header("<u8", 7, TFS_MAX_DIMS - 1, big);
}

static void test_npy_header_build_too_many_dims(void **state)
{
	uint64_t shape[TFS_MAX_DIMS] = { 0 };
	struct tfs_dtype dt = dtype_of("<f4");
	char hdr[TFS_NPY_ALIGN];

	(void)state;
	assert_int_equal(tfs_npy_header_build(&dt, 1, TFS_MAX_DIMS, shape, hdr), -EINVAL);
}

/* --- tfs_shape_str -------------------------------------------------------------------------- */

static void test_shape_str(void **state)
{
	static const uint64_t s5[] = { 5 }, s34[] = { 3, 4 }, s33232[] = { 3, 32, 32 },
			      smax[] = { UINT64_MAX, 0 };
	char out[128];

	(void)state;
	tfs_shape_str(s5, 1, out, sizeof(out));
	assert_string_equal(out, "(5,)");
	tfs_shape_str(s34, 2, out, sizeof(out));
	assert_string_equal(out, "(3, 4)");
	tfs_shape_str(NULL, 0, out, sizeof(out));
	assert_string_equal(out, "()");
	tfs_shape_str(s33232, 3, out, sizeof(out));
	assert_string_equal(out, "(3, 32, 32)");
	tfs_shape_str(smax, 2, out, sizeof(out));
	assert_string_equal(out, "(18446744073709551615, 0)");
	tfs_shape_str(smax + 1, 1, out, sizeof(out));
	assert_string_equal(out, "(0,)");
}

static void test_shape_str_truncates_safely(void **state)
{
	static const uint64_t s[] = { 123456, 7, 8 };
	char out[32];

	(void)state;
	for (size_t cap = 1; cap < 20; cap++) {
		memset(out, 'Z', sizeof(out));
		tfs_shape_str(s, 3, out, cap);
		assert_non_null(memchr(out, 0, cap));
		assert_int_equal(out[cap], 'Z');
		assert_memory_equal(out, "(123456, 7, 8)", strlen(out));
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_npy_read_header_numpy_files),
		cmocka_unit_test(test_npy_read_header_longer_than_first_read),
		cmocka_unit_test(test_npy_read_header_truncated_files),
		cmocka_unit_test(test_npy_read_header_not_npy),
		cmocka_unit_test(test_npy_read_header_bad_fd),
		cmocka_unit_test(test_npy_header_build_round_trip),
		cmocka_unit_test(test_npy_header_build_too_many_dims),
		cmocka_unit_test(test_shape_str),
		cmocka_unit_test(test_shape_str_truncates_safely),
		cmocka_unit_test(test_npy_read_header_ending_in_digits_no_overread),
	};

	if (getenv("TFS_TEST_FILTER"))
		cmocka_set_test_filter(getenv("TFS_TEST_FILTER"));
	return cmocka_run_group_tests_name("npy_file", tests, setup_tmpdir, teardown_tmpdir);
}
