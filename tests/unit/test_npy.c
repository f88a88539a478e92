/* SPDX-License-Identifier: MIT */
/* Unit tests for core/npy: NPY headers parsed from memory, numpy's own and damaged ones. */
#include <errno.h>
#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "npy.h"

#include "npy_fixture.h"

/* --- tfs_npy_parse on numpy's own headers --------------------------------------------------- */

static void test_npy_parse_numpy_headers(void **state)
{
	(void)state;
	for (size_t i = 0; i < NCASES; i++) {
		const struct npy_case *c = &npy_cases[i];
		struct tfs_npy_info info;
		size_t need = 0;
		char err[256] = "";

		if (parse_exact(c->bytes, c->len, &info, &need, err, sizeof(err)))
			fail_msg("%s: %s", c->name, err);
		check_case(c, &info);
	}
}

static void test_npy_parse_with_data_following(void **state)
{
	/* A reader hands over more than the header: the data must not matter. */
	(void)state;
	for (size_t i = 0; i < NCASES; i++) {
		const struct npy_case *c = &npy_cases[i];
		uint8_t buf[512];
		struct tfs_npy_info info;
		size_t need = 0;
		char err[256] = "";

		memcpy(buf, c->bytes, c->len);
		memset(buf + c->len, '7', sizeof(buf) - c->len);
		if (tfs_npy_parse(buf, sizeof(buf), &info, &need, err, sizeof(err)))
			fail_msg("%s: %s", c->name, err);
		check_case(c, &info);
	}
}

static void test_npy_parse_32_dims(void **state)
{
	struct tfs_npy_info info;
	size_t need = 0;
	char err[256] = "";

	(void)state;
	assert_int_equal(parse_exact(npy_v1_32dims, sizeof(npy_v1_32dims) - 1, &info, &need, err,
				     sizeof(err)),
			 0);
	assert_int_equal(info.ndim, TFS_MAX_DIMS);
	assert_int_equal(info.shape[0], 2);
	for (unsigned d = 1; d < TFS_MAX_DIMS; d++)
		assert_int_equal(info.shape[d], 1);
	assert_int_equal(info.data_offset, 192);
	assert_string_equal(info.dtype.descr, "<u2");
}

static void test_npy_parse_too_many_dims(void **state)
{
	char dict[512];
	size_t n;
	struct tfs_npy_info info;
	char err[256] = "";

	(void)state;
	n = (size_t)snprintf(dict, sizeof(dict),
			     "{'descr': '<u2', 'fortran_order': False, "
			     "'shape': (2");
	for (int d = 1; d < TFS_MAX_DIMS + 1; d++)
		n += (size_t)snprintf(dict + n, sizeof(dict) - n, ", 1");
	snprintf(dict + n, sizeof(dict) - n, "), }");
	assert_int_equal(parse_dict(1, dict, &info, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "dimensions"));
}

static void test_npy_parse_zero_d_array_rejected(void **state)
{
	struct tfs_npy_info info;
	size_t need = 0;
	char err[256] = "";

	(void)state;
	assert_int_equal(parse_exact(npy_v1_scalar, sizeof(npy_v1_scalar) - 1, &info, &need, err,
				     sizeof(err)),
			 -EINVAL);
	assert_non_null(strstr(err, "0-d"));
	assert_int_equal(parse_dict(1, "{'descr': '<i4', 'fortran_order': False, 'shape': ( ), }",
				    &info, err, sizeof(err)),
			 -EINVAL);
}

/* Feed a header the way a reader does: start small and grow the buffer to what *need says. */
static void test_npy_parse_partial_buffers_eagain(void **state)
{
	(void)state;
	for (size_t i = 0; i < NCASES; i++) {
		const struct npy_case *c = &npy_cases[i];
		size_t pre = c->major == 1 ? 10 : 12;

		for (size_t len = 0; len < c->len; len++) {
			struct tfs_npy_info info;
			size_t need = 0, want;
			char err[256] = "";
			int rc = parse_exact(c->bytes, len, &info, &need, err, sizeof(err));

			if (rc != -EAGAIN)
				fail_msg("%s: %zu of %zu bytes gave %d (%s)", c->name, len, c->len,
					 rc, err);
			want = len < 10 ? 10 : len < pre ? pre : c->len;
			if (need != want)
				fail_msg("%s: %zu bytes: need %zu, want %zu", c->name, len, need,
					 want);
			assert_true(need > len);
		}
	}
}

static void test_npy_parse_incremental_reader(void **state)
{
	(void)state;
	for (size_t i = 0; i < NCASES; i++) {
		const struct npy_case *c = &npy_cases[i];
		struct tfs_npy_info info;
		size_t have = 0, need = 0;
		char err[256] = "";
		int rc, rounds = 0;

		while ((rc = parse_exact(c->bytes, have, &info, &need, err, sizeof(err))) ==
		       -EAGAIN) {
			assert_true(need > have && need <= c->len);
			have = need;
			assert_true(++rounds < 5);
		}
		assert_int_equal(rc, 0);
		assert_int_equal(have, c->len);
		check_case(c, &info);
	}
}

static void test_npy_parse_bad_magic(void **state)
{
	uint8_t buf[256];
	struct tfs_npy_info info;
	size_t need;
	char err[256];

	(void)state;
	for (size_t pos = 0; pos < 6; pos++) {
		memcpy(buf, npy_v1_f4_5, sizeof(npy_v1_f4_5) - 1);
		buf[pos] ^= 0x20;
		err[0] = 0;
		assert_int_equal(
			parse_exact(buf, sizeof(npy_v1_f4_5) - 1, &info, &need, err, sizeof(err)),
			-EINVAL);
		assert_non_null(strstr(err, "magic"));
	}
	/* Ten bytes are enough to tell. */
	assert_int_equal(parse_exact("PK\x03\x04zipfile!", 10, &info, &need, err, sizeof(err)),
			 -EINVAL);
	assert_int_equal(
		parse_exact("\x93NUMPX\x01\x00\x10\x00", 10, &info, &need, err, sizeof(err)),
		-EINVAL);
}

static void test_npy_parse_unknown_version(void **state)
{
	static const uint8_t majors[] = { 0, 4, 9, 255 };
	uint8_t buf[256];
	struct tfs_npy_info info;
	size_t need;
	char err[256];

	(void)state;
	for (size_t i = 0; i < sizeof(majors); i++) {
		memcpy(buf, npy_v1_f4_5, sizeof(npy_v1_f4_5) - 1);
		buf[6] = majors[i];
		err[0] = 0;
		assert_int_equal(
			parse_exact(buf, sizeof(npy_v1_f4_5) - 1, &info, &need, err, sizeof(err)),
			-EINVAL);
		assert_non_null(strstr(err, "version"));
	}
}

static void test_npy_parse_huge_header_length(void **state)
{
	/* A v2 header claiming 2 GiB is garbage, not a reason to ask for 2 GiB. */
	uint8_t buf[12] = { 0x93, 'N', 'U', 'M', 'P', 'Y', 2, 0, 0, 0, 0, 0x80 };
	struct tfs_npy_info info;
	size_t need = 0;
	char err[256] = "";

	(void)state;
	assert_int_equal(parse_exact(buf, sizeof(buf), &info, &need, err, sizeof(err)), -EINVAL);
}

static void test_npy_parse_structured_dtype(void **state)
{
	struct tfs_npy_info info;
	char err[256] = "";

	(void)state;
	assert_int_equal(parse_dict(1,
				    "{'descr': [('a','<i4')], 'fortran_order': False, "
				    "'shape': (3,), }",
				    &info, err, sizeof(err)),
			 -EINVAL);
	assert_non_null(strstr(err, "structured"));
	assert_int_equal(parse_dict(1,
				    "{'descr': [('a', '<i4'), ('b', '<f8')], 'fortran_order': "
				    "False, 'shape': (3,), }",
				    &info, err, sizeof(err)),
			 -EINVAL);
}

static void test_npy_parse_unsupported_dtype_in_header(void **state)
{
	static const char *const dicts[] = {
		"{'descr': '<U5', 'fortran_order': False, 'shape': (3,), }",
		"{'descr': '|O', 'fortran_order': False, 'shape': (3,), }",
		"{'descr': '<M8[ns]', 'fortran_order': False, 'shape': (3,), }",
		"{'descr': '|V16', 'fortran_order': False, 'shape': (3,), }",
		"{'descr': '', 'fortran_order': False, 'shape': (3,), }",
	};

	(void)state;
	for (size_t i = 0; i < sizeof(dicts) / sizeof(dicts[0]); i++) {
		struct tfs_npy_info info;
		char err[256] = "";

		assert_int_equal(parse_dict(1, dicts[i], &info, err, sizeof(err)), -EINVAL);
		assert_true(err[0] != 0);
	}
}

static void test_npy_parse_malformed_dicts(void **state)
{
	static const char *const dicts[] = {
		"",
		"descr",
		"{",
		"{}",
		"[]",
		"{'descr': '<f4', 'fortran_order': False, 'shape': (3,), ",
		"{'descr': '<f4', 'fortran_order': False, 'shape': (3,)",
		"{'descr': '<f4' 'fortran_order': False, 'shape': (3,), }",
		"{'descr' '<f4', 'fortran_order': False, 'shape': (3,), }",
		"{'descr': '<f4, 'fortran_order': False, 'shape': (3,), }",
		"{'descr': <f4, 'fortran_order': False, 'shape': (3,), }",
		"{descr: '<f4', 'fortran_order': False, 'shape': (3,), }",
		"{'descr': '<f4', 'fortran_order': false, 'shape': (3,), }",
		"{'descr': '<f4', 'fortran_order': 0, 'shape': (3,), }",
		"{'descr': '<f4', 'fortran_order': Truth, 'shape': (3,), }",
		"{'descr': '<f4', 'fortran_order': False, 'shape': [3], }",
		"{'descr': '<f4', 'fortran_order': False, 'shape': 3, }",
		"{'descr': '<f4', 'fortran_order': False, 'shape': (3, }",
		"{'descr': '<f4', 'fortran_order': False, 'shape': (-3,), }",
		"{'descr': '<f4', 'fortran_order': False, 'shape': (3.5,), }",
		"{'descr': '<f4', 'fortran_order': False, 'shape': (3,,), }",
		"{'descr': '<f4', 'fortran_order': False, 'shape': (,), }",
		"{'descr': '<f4', 'fortran_order': False, 'shape': (a,), }",
		"{'descr': '<f4', 'fortran_order': False, 'shape': (3 4), }",
		"{'descr': '<f4', 'fortran_order': False, 'shape': (3,), 'extra': 1, }",
		"{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999999,), }",
		"{'a_key_much_longer_than_any_real_key_in_numpy': 1, 'descr': '<f4', }",
	};

	(void)state;
	for (size_t i = 0; i < sizeof(dicts) / sizeof(dicts[0]); i++) {
		struct tfs_npy_info info;
		char err[256] = "";
		int rc = parse_dict(1, dicts[i], &info, err, sizeof(err));

		if (rc != -EINVAL)
			fail_msg("dict %zu (%s) gave %d, want -EINVAL", i, dicts[i], rc);
		assert_true(err[0] != 0);
	}
}

static void test_npy_parse_missing_keys(void **state)
{
	static const char *const dicts[] = {
		"{'fortran_order': False, 'shape': (3,), }",
		"{'descr': '<f4', 'shape': (3,), }",
		"{'descr': '<f4', 'fortran_order': False, }",
		"{'descr': '<f4', }",
		"{'shape': (3,), }",
	};

	(void)state;
	for (size_t i = 0; i < sizeof(dicts) / sizeof(dicts[0]); i++) {
		struct tfs_npy_info info;
		char err[256] = "";

		assert_int_equal(parse_dict(1, dicts[i], &info, err, sizeof(err)), -EINVAL);
		assert_non_null(strstr(err, "malformed"));
	}
}

static void test_npy_parse_accepts_numpy_variants(void **state)
{
	/* Key order, quoting, spacing and the trailing comma vary between numpy versions. */
	static const char *const dicts[] = {
		"{'descr': '<f4', 'fortran_order': False, 'shape': (3, 2), }",
		"{'descr': '<f4', 'fortran_order': False, 'shape': (3, 2)}",
		"{'shape': (3, 2), 'fortran_order': False, 'descr': '<f4'}",
		"{\"descr\": \"<f4\", \"fortran_order\": False, \"shape\": (3, 2)}",
		"{ 'descr' : '<f4' , 'fortran_order' : False , 'shape' : ( 3 , 2 , ) , }",
		"{'descr':'<f4','fortran_order':False,'shape':(3,2)}",
		"{'descr': '<f4', 'fortran_order': False, 'shape': (3L, 2L), }",
	};

	(void)state;
	for (size_t i = 0; i < sizeof(dicts) / sizeof(dicts[0]); i++) {
		struct tfs_npy_info info;
		char err[256] = "";

		if (parse_dict(1, dicts[i], &info, err, sizeof(err)))
			fail_msg("dict %zu (%s): %s", i, dicts[i], err);
		assert_string_equal(info.dtype.descr, "<f4");
		assert_int_equal(info.ndim, 2);
		assert_int_equal(info.shape[0], 3);
		assert_int_equal(info.shape[1], 2);
		assert_int_equal(info.fortran_order, 0);
	}
}

static void test_npy_parse_size_overflow(void **state)
{
	struct tfs_npy_info info;
	char err[256] = "";

	(void)state;
	assert_int_equal(parse_dict(1,
				    "{'descr': '<f8', 'fortran_order': False, "
				    "'shape': (4294967296, 4294967296), }",
				    &info, err, sizeof(err)),
			 -EINVAL);
	assert_non_null(strstr(err, "overflow"));
	/* The largest count that fits is fine for bytes. */
	assert_int_equal(parse_dict(1,
				    "{'descr': '|u1', 'fortran_order': False, "
				    "'shape': (18446744073709551615,), }",
				    &info, err, sizeof(err)),
			 0);
	assert_int_equal(info.shape[0], UINT64_MAX);
}

static void test_npy_parse_v2_long_header(void **state)
{
	/* A v2 header longer than 65535 bytes (what v1 cannot express). */
	size_t dl = 70000, n;
	char *dict = malloc(dl + 1);
	uint8_t *buf = malloc(dl + 128);
	struct tfs_npy_info info;
	size_t need = 0;
	char err[256] = "";

	(void)state;
	assert_non_null(dict);
	assert_non_null(buf);
	n = (size_t)snprintf(dict, dl + 1,
			     "{'descr': '>f8', 'fortran_order': False, "
			     "'shape': (6, 7), }");
	memset(dict + n, ' ', dl - n);
	dict[dl] = 0;
	n = make_npy(2, dict, buf, dl + 128);
	assert_true(n > 65536);
	assert_int_equal(parse_exact(buf, n, &info, &need, err, sizeof(err)), 0);
	assert_int_equal(info.data_offset, n);
	assert_int_equal(info.big_endian, 1);
	assert_int_equal(parse_exact(buf, 100, &info, &need, err, sizeof(err)), -EAGAIN);
	assert_int_equal(need, n);
	free(dict);
	free(buf);
}

/* The header ends in the middle of a number and the buffer holds nothing more: the number must
 * be read within the header only. */
static void test_npy_parse_header_ending_in_digits_no_overread(void **state)
{
	static const char dict[] = "{'descr': '<f4', 'fortran_order': False, 'shape': (12";
	uint8_t buf[128];
	struct tfs_npy_info info;
	size_t need = 0, n = sizeof(dict) - 1;
	char err[256] = "";

	(void)state;
	memcpy(buf, "\x93NUMPY\x01\x00", 8);
	buf[8] = (uint8_t)n;
	buf[9] = 0;
	memcpy(buf + 10, dict, n);
	assert_int_equal(parse_exact(buf, 10 + n, &info, &need, err, sizeof(err)), -EINVAL);
}

/* --- integer conversion --------------------------------------------------------------------- */

static const struct tfs_dtype ints[] = {
	{ "|u1", 'u', 1 }, { "|i1", 'i', 1 }, { "<u2", 'u', 2 }, { "<i2", 'i', 2 },
	{ "<u4", 'u', 4 }, { "<i4", 'i', 4 }, { "<u8", 'u', 8 }, { "<i8", 'i', 8 },
};

/* The range of d, as [lo, hi] (u8's hi kept at INT64_MAX: the test's values stay below). */
static void range_of(const struct tfs_dtype *d, int64_t *lo, int64_t *hi)
{
	const unsigned bits = 8 * d->itemsize;

	*lo = d->kind == 'u' ? 0 : bits == 64 ? INT64_MIN : -(INT64_C(1) << (bits - 1));
	*hi = bits == 64       ? INT64_MAX
	      : d->kind == 'u' ? (INT64_C(1) << bits) - 1
			       : (INT64_C(1) << (bits - 1)) - 1;
}

static void put_int(const struct tfs_dtype *d, uint8_t *p, uint64_t k, int64_t x)
{
	memcpy(p + k * d->itemsize, &x, d->itemsize); /* little-endian host */
}

static int64_t get_int(const struct tfs_dtype *d, const uint8_t *p, uint64_t k)
{
	int64_t x = 0;

	memcpy(&x, p + k * d->itemsize, d->itemsize);
	if (d->kind == 'i' && d->itemsize < 8 && (x >> (8 * d->itemsize - 1)) & 1)
		x |= (int64_t)(~UINT64_C(0) << (8 * d->itemsize)); /* sign-extend */
	return x;
}

/* Every pair of integer dtypes, over more values than a block: each value both can hold comes
 * through exact, out of place and in place; one value only from can hold is -ERANGE at its
 * index, wherever the conversion starts. */
static void test_convert_ints_every_pair(void **state)
{
	enum { N = 1500 };
	static uint8_t in[N * 8], out[N * 8], both[N * 8];
	uint64_t seed = 88172645463325252ull;

	(void)state;
	for (size_t a = 0; a < sizeof(ints) / sizeof(ints[0]); a++)
		for (size_t b = 0; b < sizeof(ints) / sizeof(ints[0]); b++) {
			const struct tfs_dtype *f = &ints[a], *t = &ints[b];
			int64_t flo, fhi, tlo, thi, lo, hi, x;
			uint64_t bad = UINT64_MAX;

			range_of(f, &flo, &fhi);
			range_of(t, &tlo, &thi);
			lo = flo > tlo ? flo : tlo;
			hi = fhi < thi ? fhi : thi;
			for (uint64_t k = 0; k < N; k++) {
				seed ^= seed << 13, seed ^= seed >> 7, seed ^= seed << 17;
				x = k < 4 ? (k & 1 ? lo : hi)
					  : (int64_t)((uint64_t)lo +
						      seed % (((uint64_t)hi - (uint64_t)lo + 1)
								      ?: UINT64_MAX));
				put_int(f, in, k, x);
			}
			memset(out, 0xa5, sizeof(out));
			assert_int_equal(tfs_dtype_convert_ints(f, t, in, out, N, &bad), 0);
			memcpy(both, in, N * f->itemsize);
			assert_int_equal(tfs_dtype_convert_ints(f, t, both, both, N, NULL), 0);
			for (uint64_t k = 0; k < N; k++) {
				if (get_int(t, out, k) != get_int(f, in, k))
					fail_msg("%s -> %s: value %" PRIu64, f->descr, t->descr, k);
				assert_true(get_int(t, both, k) == get_int(f, in, k));
			}
			/* one value out of to's range, where from has one */
			x = flo < tlo ? tlo - 1 : fhi > thi ? thi + 1 : 0;
			if (flo < tlo || fhi > thi) {
				put_int(f, in, 1000, x);
				assert_int_equal(tfs_dtype_convert_ints(f, t, in, out, N, &bad),
						 -ERANGE);
				assert_int_equal(bad, 1000);
			}
		}
}

/* A uint64 past INT64_MAX fits no signed dtype, and only uint64 holds it. */
static void test_convert_ints_uint64_past_int64(void **state)
{
	const uint64_t big = (UINT64_C(1) << 63) + 5;
	uint8_t in[3 * 8], out[3 * 8];
	uint64_t bad = 0;

	(void)state;
	memset(in, 0, sizeof(in));
	memcpy(in + 8, &big, 8);
	for (size_t b = 0; b < sizeof(ints) / sizeof(ints[0]); b++) {
		const int rc = tfs_dtype_convert_ints(&ints[6], &ints[b], in, out, 3, &bad);

		if (b == 6) {
			assert_int_equal(rc, 0);
			assert_memory_equal(in, out, sizeof(in));
		} else {
			assert_int_equal(rc, -ERANGE);
			assert_int_equal(bad, 1);
		}
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_convert_ints_every_pair),
		cmocka_unit_test(test_convert_ints_uint64_past_int64),
		cmocka_unit_test(test_npy_parse_numpy_headers),
		cmocka_unit_test(test_npy_parse_with_data_following),
		cmocka_unit_test(test_npy_parse_32_dims),
		cmocka_unit_test(test_npy_parse_too_many_dims),
		cmocka_unit_test(test_npy_parse_zero_d_array_rejected),
		cmocka_unit_test(test_npy_parse_partial_buffers_eagain),
		cmocka_unit_test(test_npy_parse_incremental_reader),
		cmocka_unit_test(test_npy_parse_bad_magic),
		cmocka_unit_test(test_npy_parse_unknown_version),
		cmocka_unit_test(test_npy_parse_huge_header_length),
		cmocka_unit_test(test_npy_parse_structured_dtype),
		cmocka_unit_test(test_npy_parse_unsupported_dtype_in_header),
		cmocka_unit_test(test_npy_parse_malformed_dicts),
		cmocka_unit_test(test_npy_parse_missing_keys),
		cmocka_unit_test(test_npy_parse_accepts_numpy_variants),
		cmocka_unit_test(test_npy_parse_size_overflow),
		cmocka_unit_test(test_npy_parse_v2_long_header),
		cmocka_unit_test(test_npy_parse_header_ending_in_digits_no_overread),
	};

	if (getenv("TFS_TEST_FILTER"))
		cmocka_set_test_filter(getenv("TFS_TEST_FILTER"));
	return cmocka_run_group_tests_name("npy", tests, NULL, NULL);
}
