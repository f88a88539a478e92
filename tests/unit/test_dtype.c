/* SPDX-License-Identifier: MIT */
/* Unit tests for core/npy's dtypes: parsing numpy's type strings and swapping byte order. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "npy.h"
#include "util.h"

#include "guard_fixture.h"
#include "dtype_fixture.h"

/* --- tfs_dtype_parse ------------------------------------------------------------------------ */

static void test_dtype_parse_supported(void **state)
{
	static const struct {
		const char *in, *descr;
		char kind;
		uint32_t itemsize;
		int big;
	} cases[] = {
		{ "|b1", "|b1", 'b', 1, 0 },	{ "<i1", "|i1", 'i', 1, 0 },
		{ "|u1", "|u1", 'u', 1, 0 },	{ "<i2", "<i2", 'i', 2, 0 },
		{ ">i2", "<i2", 'i', 2, 1 },	{ "<u4", "<u4", 'u', 4, 0 },
		{ ">u8", "<u8", 'u', 8, 1 },	{ "<f2", "<f2", 'f', 2, 0 },
		{ "<f4", "<f4", 'f', 4, 0 },	{ ">f8", "<f8", 'f', 8, 1 },
		{ "<c8", "<c8", 'c', 8, 0 },	{ ">c16", "<c16", 'c', 16, 1 },
		{ "=f4", "<f4", 'f', 4, 0 },	{ "b1", "|b1", 'b', 1, 0 },
		{ "|i1", "|i1", 'i', 1, 0 },	{ ">i1", "|i1", 'i', 1, 0 },
		{ ">b1", "|b1", 'b', 1, 0 },	{ "<i8", "<i8", 'i', 8, 0 },
		{ ">i4", "<i4", 'i', 4, 1 },	{ "<u2", "<u2", 'u', 2, 0 },
		{ ">f2", "<f2", 'f', 2, 1 },	{ ">c8", "<c8", 'c', 8, 1 },
		{ "<c16", "<c16", 'c', 16, 0 }, { "f8", "<f8", 'f', 8, 0 },
		{ "=i8", "<i8", 'i', 8, 0 },	{ "u1", "|u1", 'u', 1, 0 },
	};

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct tfs_dtype dt;
		int big = -1;
		char err[256] = "";

		memset(&dt, 0x55, sizeof(dt));
		if (tfs_dtype_parse(cases[i].in, &dt, &big, err, sizeof(err)))
			fail_msg("'%s' rejected: %s", cases[i].in, err);
		assert_string_equal(dt.descr, cases[i].descr);
		assert_int_equal(dt.kind, cases[i].kind);
		assert_int_equal(dt.itemsize, cases[i].itemsize);
		if (big != cases[i].big)
			fail_msg("'%s': big_endian %d, want %d", cases[i].in, big, cases[i].big);
	}
}

static void test_dtype_parse_normalised_descr_is_fixed_point(void **state)
{
	static const char *const in[] = { ">i2", "=f4", "b1", "<i1", ">c16", "|u1" };

	(void)state;
	for (size_t i = 0; i < sizeof(in) / sizeof(in[0]); i++) {
		struct tfs_dtype a, b;
		int big;
		char err[128];
		char copy[sizeof(a.descr)];

		assert_int_equal(tfs_dtype_parse(in[i], &a, &big, err, sizeof(err)), 0);
		memcpy(copy, a.descr, sizeof(copy));
		assert_int_equal(tfs_dtype_parse(copy, &b, &big, err, sizeof(err)), 0);
		assert_string_equal(b.descr, a.descr);
		assert_int_equal(big, 0);
	}
}

static void test_dtype_parse_rejects_unsupported(void **state)
{
	static const char *const bad[] = {
		"<U5",	"|O",  "<M8[ns]", "<f16", "<V8", "<i3",	 "|S5",	 "<m8",	 "O",	 "<f1",
		"<b2",	"<c4", "<c32",	  "<i16", "<u3", "<f4x", "<f 4", "<f-4", "<f+4", "x4",
		"<<f4", "<f",  "f",	  "<i",	  "?",	 "<i4 ", " <i4", "<i0",	 "<f0",	 "<c0",
	};

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct tfs_dtype dt;
		int big = 0;
		char err[256] = "";
		/* The string ends at an inaccessible page: no reading past its NUL. */
		struct guarded g = guarded_copy(bad[i], strlen(bad[i]) + 1);
		int rc;

		rc = tfs_dtype_parse((const char *)g.p, &dt, &big, err, sizeof(err));
		if (rc != -EINVAL)
			fail_msg("'%s' gave %d, want -EINVAL", bad[i], rc);
		if (!err[0])
			fail_msg("'%s' rejected without a message", bad[i]);
		guarded_free(&g);
	}
}

/* Descriptors too short to hold a kind and a size: the parser must stop at the terminator. */
static void test_dtype_parse_short_descr_no_overread(void **state)
{
	static const char *const bad[] = { "", "<", ">", "|", "=" };

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct tfs_dtype dt;
		int big = 0;
		char err[256] = "";
		/* The string ends at an inaccessible page: no reading past its NUL. */
		struct guarded g = guarded_copy(bad[i], strlen(bad[i]) + 1);

		assert_int_equal(tfs_dtype_parse((const char *)g.p, &dt, &big, err, sizeof(err)),
				 -EINVAL);
		guarded_free(&g);
	}
}

static void test_dtype_parse_error_message_is_bounded(void **state)
{
	struct tfs_dtype dt;
	int big;
	char err[8];

	(void)state;
	memset(err, 'x', sizeof(err));
	assert_int_equal(tfs_dtype_parse("<U5", &dt, &big, err, sizeof(err)), -EINVAL);
	assert_non_null(memchr(err, 0, sizeof(err)));
}

/* --- tfs_dtype_swap ------------------------------------------------------------------------- */

static void test_dtype_swap_int16(void **state)
{
	struct tfs_dtype dt = dtype_of(">i2");
	uint8_t buf[] = { 0x01, 0x02, 0x03, 0x04, 0xff, 0x00 };
	const uint8_t want[] = { 0x02, 0x01, 0x04, 0x03, 0x00, 0xff };
	int16_t v;

	(void)state;
	tfs_dtype_swap(&dt, buf, sizeof(buf));
	assert_memory_equal(buf, want, sizeof(want));
	/* Big-endian -2 becomes little-endian -2. */
	memcpy(buf, "\xff\xfe", 2);
	tfs_dtype_swap(&dt, buf, 2);
	memcpy(&v, buf, 2);
	assert_int_equal(v, -2);
}

static void test_dtype_swap_int32(void **state)
{
	struct tfs_dtype dt = dtype_of(">i4");
	uint8_t buf[] = { 1, 2, 3, 4, 5, 6, 7, 8 };
	const uint8_t want[] = { 4, 3, 2, 1, 8, 7, 6, 5 };
	uint32_t v;

	(void)state;
	tfs_dtype_swap(&dt, buf, sizeof(buf));
	assert_memory_equal(buf, want, sizeof(want));
	memcpy(buf, "\x12\x34\x56\x78", 4);
	tfs_dtype_swap(&dt, buf, 4);
	memcpy(&v, buf, 4);
	assert_int_equal(v, 0x12345678u);
}

static void test_dtype_swap_int64(void **state)
{
	struct tfs_dtype dt = dtype_of(">u8");
	uint8_t buf[16];
	uint64_t v[2];

	(void)state;
	for (int i = 0; i < 16; i++)
		buf[i] = (uint8_t)(i + 1);
	tfs_dtype_swap(&dt, buf, sizeof(buf));
	for (int i = 0; i < 8; i++) {
		assert_int_equal(buf[i], 8 - i);
		assert_int_equal(buf[8 + i], 16 - i);
	}
	memcpy(buf, "\x01\x02\x03\x04\x05\x06\x07\x08\xff\xff\xff\xff\xff\xff\xff\xfe", 16);
	tfs_dtype_swap(&dt, buf, 16);
	memcpy(v, buf, 16);
	assert_int_equal(v[0], 0x0102030405060708ull);
	assert_int_equal(v[1], 0xfffffffffffffffeull);
}

static void test_dtype_swap_complex64_swaps_each_half(void **state)
{
	struct tfs_dtype dt = dtype_of(">c8");
	/* Two complex64 values, big-endian: (1.5 + -2j), (0.25 + 8j). */
	uint8_t buf[] = { 0x3f, 0xc0, 0x00, 0x00, 0xc0, 0x00, 0x00, 0x00,
			  0x3e, 0x80, 0x00, 0x00, 0x41, 0x00, 0x00, 0x00 };
	float f[4];

	(void)state;
	tfs_dtype_swap(&dt, buf, sizeof(buf));
	memcpy(f, buf, sizeof(f));
	assert_true(f[0] == 1.5f);
	assert_true(f[1] == -2.0f);
	assert_true(f[2] == 0.25f);
	assert_true(f[3] == 8.0f);
}

static void test_dtype_swap_complex128_swaps_each_half(void **state)
{
	struct tfs_dtype dt = dtype_of(">c16");
	/* One complex128, big-endian: (1.0 + -0.5j). */
	uint8_t buf[] = { 0x3f, 0xf0, 0, 0, 0, 0, 0, 0, 0xbf, 0xe0, 0, 0, 0, 0, 0, 0 };
	uint8_t seq[32];
	double d[2];

	(void)state;
	tfs_dtype_swap(&dt, buf, sizeof(buf));
	memcpy(d, buf, sizeof(d));
	assert_true(d[0] == 1.0);
	assert_true(d[1] == -0.5);

	/* Byte-level: each 8-byte half reversed in place, halves not exchanged. */
	for (int i = 0; i < 32; i++)
		seq[i] = (uint8_t)i;
	tfs_dtype_swap(&dt, seq, sizeof(seq));
	for (int half = 0; half < 4; half++)
		for (int i = 0; i < 8; i++)
			assert_int_equal(seq[half * 8 + i], half * 8 + 7 - i);
}

static void test_dtype_swap_twice_is_identity(void **state)
{
	static const char *const descrs[] = { ">i2", ">u4", ">i8",  ">f2", ">f4",
					      ">f8", ">c8", ">c16", "|u1", "|b1" };
	uint8_t buf[64], orig[64];

	(void)state;
	for (int i = 0; i < 64; i++)
		orig[i] = (uint8_t)(i * 37 + 11);
	for (size_t k = 0; k < sizeof(descrs) / sizeof(descrs[0]); k++) {
		struct tfs_dtype dt = dtype_of(descrs[k]);

		memcpy(buf, orig, sizeof(buf));
		tfs_dtype_swap(&dt, buf, sizeof(buf));
		if (dt.itemsize == 1)
			assert_memory_equal(buf, orig, sizeof(buf)); /* nothing to swap */
		else
			assert_memory_not_equal(buf, orig, sizeof(buf));
		tfs_dtype_swap(&dt, buf, sizeof(buf));
		assert_memory_equal(buf, orig, sizeof(buf));
	}
}

static void test_dtype_swap_zero_length(void **state)
{
	struct tfs_dtype dt = dtype_of(">f8");
	uint8_t b = 0x42;

	(void)state;
	tfs_dtype_swap(&dt, &b, 0);
	assert_int_equal(b, 0x42);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_dtype_parse_supported),
		cmocka_unit_test(test_dtype_parse_normalised_descr_is_fixed_point),
		cmocka_unit_test(test_dtype_parse_rejects_unsupported),
		cmocka_unit_test(test_dtype_parse_error_message_is_bounded),
		cmocka_unit_test(test_dtype_swap_int16),
		cmocka_unit_test(test_dtype_swap_int32),
		cmocka_unit_test(test_dtype_swap_int64),
		cmocka_unit_test(test_dtype_swap_complex64_swaps_each_half),
		cmocka_unit_test(test_dtype_swap_complex128_swaps_each_half),
		cmocka_unit_test(test_dtype_swap_twice_is_identity),
		cmocka_unit_test(test_dtype_swap_zero_length),
		cmocka_unit_test(test_dtype_parse_short_descr_no_overread),
	};

	if (getenv("TFS_TEST_FILTER"))
		cmocka_set_test_filter(getenv("TFS_TEST_FILTER"));
	return cmocka_run_group_tests_name("dtype", tests, NULL, NULL);
}
