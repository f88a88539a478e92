/* SPDX-License-Identifier: MIT */
/* Unit tests for core/npy: NPY header parsing and synthesis, and shapes as text. */
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

#include "guard_fixture.h"
#include "dtype_fixture.h"

/* --- headers written by numpy ----------------------------------------------------------------
 * Produced with numpy 1.24.2: np.save() for v1.0, numpy.lib.format.write_array(version=(2, 0) or
 * (3, 0)) for the others; each is the file up to the first data byte. */

/* npy_v1_f4_5: v1.0, shape (5,), 128 header bytes */
static const char npy_v1_f4_5[] =
	"\x93NUMPY\x01\x00v\x00{'descr': '<f4', 'fortran_order': False, 'shape': (5,), } "
	"                                                           \x0a";

/* npy_v1_i2be_345: v1.0, shape (3, 4, 5), 128 header bytes */
static const char npy_v1_i2be_345[] =
	"\x93NUMPY\x01\x00v\x00{'descr': '>i2', 'fortran_order': False, 'shape': (3, 4, 5"
	"), }                                                       \x0a";

/* npy_v1_u1_empty: v1.0, shape (0,), 128 header bytes */
static const char npy_v1_u1_empty[] =
	"\x93NUMPY\x01\x00v\x00{'descr': '|u1', 'fortran_order': False, 'shape': (0,), } "
	"                                                           \x0a";

/* npy_v1_scalar: v1.0, shape (), 128 header bytes */
static const char npy_v1_scalar[] =
	"\x93NUMPY\x01\x00v\x00{'descr': '<f8', 'fortran_order': False, 'shape': (), }   "
	"                                                           \x0a";

/* npy_v1_fortran: v1.0, shape (3, 4), 128 header bytes */
static const char npy_v1_fortran[] =
	"\x93NUMPY\x01\x00v\x00{'descr': '<c8', 'fortran_order': True, 'shape': (3, 4), }"
	"                                                           \x0a";

/* npy_v1_bool: v1.0, shape (7, 2), 128 header bytes */
static const char npy_v1_bool[] =
	"\x93NUMPY\x01\x00v\x00{'descr': '|b1', 'fortran_order': False, 'shape': (7, 2), "
	"}                                                          \x0a";

/* npy_v1_32dims: v1.0, shape (2, 1 x 31), 192 header bytes */
static const char npy_v1_32dims[] =
	"\x93NUMPY\x01\x00\xb6\x00{'descr': '<u2', 'fortran_order': False, 'shape': (2, 1"
	", 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, "
	"1, 1, 1, 1), }                                \x0a";

/* npy_v2_f8: v2.0, shape (2, 3), 128 header bytes */
static const char npy_v2_f8[] =
	"\x93NUMPY\x02\x00t\x00\x00\x00{'descr': '<f8', 'fortran_order': False, 'shape': "
	"(2, 3), }                                                        \x0a";

/* npy_v3_i8: v3.0, shape (4,), 128 header bytes */
static const char npy_v3_i8[] =
	"\x93NUMPY\x03\x00t\x00\x00\x00{'descr': '<i8', 'fortran_order': False, 'shape': "
	"(4,), }                                                          \x0a";

/* npy_py2_long: v1.0, shape (3L, 4L), 80 header bytes: Python 2 numpy's style (16-byte
 * alignment, 'L' longs), assembled by hand; numpy 1.24 np.load reads it as (3, 4). */
static const char npy_py2_long[] =
	"\x93NUMPY\x01\x00"
	"F\x00{'descr': '<f8', 'fortran_order': False, 'shape': (3L, 4L), }        \x0a";
/* A numpy header with its length (the literal's NUL excluded) and what it must parse to. */
struct npy_case {
	const char *name;
	const char *bytes;
	size_t len;
	unsigned major, minor;
	const char *descr;
	char kind;
	uint32_t itemsize;
	int big_endian, fortran_order;
	unsigned ndim;
	uint64_t shape[4];
};

#define FIX(a) #a, a, sizeof(a) - 1

static const struct npy_case npy_cases[] = {
	{ FIX(npy_v1_f4_5), 1, 0, "<f4", 'f', 4, 0, 0, 1, { 5 } },
	{ FIX(npy_v1_i2be_345), 1, 0, "<i2", 'i', 2, 1, 0, 3, { 3, 4, 5 } },
	{ FIX(npy_v1_u1_empty), 1, 0, "|u1", 'u', 1, 0, 0, 1, { 0 } },
	{ FIX(npy_v1_fortran), 1, 0, "<c8", 'c', 8, 0, 1, 2, { 3, 4 } },
	{ FIX(npy_v1_bool), 1, 0, "|b1", 'b', 1, 0, 0, 2, { 7, 2 } },
	{ FIX(npy_v2_f8), 2, 0, "<f8", 'f', 8, 0, 0, 2, { 2, 3 } },
	{ FIX(npy_v3_i8), 3, 0, "<i8", 'i', 8, 0, 0, 1, { 4 } },
	{ FIX(npy_py2_long), 1, 0, "<f8", 'f', 8, 0, 0, 2, { 3, 4 } },
};

#define NCASES (sizeof(npy_cases) / sizeof(npy_cases[0]))

static int parse_exact(const void *p, size_t n, struct tfs_npy_info *info, size_t *need, char *err,
		       size_t err_cap)
{
	struct guarded g = guarded_copy(p, n);
	int rc = tfs_npy_parse(g.p, n, info, need, err, err_cap);

	guarded_free(&g);
	return rc;
}

/* Build a whole NPY header around a dict text: v1 uses a 2-byte length, v2/v3 a 4-byte one. The
 * dict is padded with spaces and a '\n' to a multiple of 64 bytes, as numpy does. Returns the
 * header length. */
static size_t make_npy(unsigned major, const char *dict, uint8_t *out, size_t cap)
{
	size_t pre = major == 1 ? 10 : 12, dl = strlen(dict), total, hl;

	total = (pre + dl + 1 + 63) / 64 * 64;
	assert_true(total <= cap);
	hl = total - pre;
	memcpy(out, "\x93NUMPY", 6);
	out[6] = (uint8_t)major;
	out[7] = 0;
	out[8] = (uint8_t)hl;
	out[9] = (uint8_t)(hl >> 8);
	if (major != 1) {
		out[10] = (uint8_t)(hl >> 16);
		out[11] = (uint8_t)(hl >> 24);
	}
	memcpy(out + pre, dict, dl);
	memset(out + pre + dl, ' ', total - pre - dl - 1);
	out[total - 1] = '\n';
	return total;
}

static int parse_dict(unsigned major, const char *dict, struct tfs_npy_info *info, char *err,
		      size_t err_cap)
{
	uint8_t buf[8192];
	size_t need = 0, n = make_npy(major, dict, buf, sizeof(buf));

	return parse_exact(buf, n, info, &need, err, err_cap);
}

/* --- tfs_npy_parse on numpy's own headers --------------------------------------------------- */

static void check_case(const struct npy_case *c, const struct tfs_npy_info *info)
{
	assert_int_equal(info->major, c->major);
	assert_int_equal(info->minor, c->minor);
	assert_string_equal(info->dtype.descr, c->descr);
	assert_int_equal(info->dtype.kind, c->kind);
	assert_int_equal(info->dtype.itemsize, c->itemsize);
	assert_int_equal(info->big_endian, c->big_endian);
	assert_int_equal(info->fortran_order, c->fortran_order);
	assert_int_equal(info->ndim, c->ndim);
	for (unsigned d = 0; d < c->ndim; d++)
		assert_int_equal(info->shape[d], c->shape[d]);
	assert_int_equal(info->data_offset, c->len);
}

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
		cmocka_unit_test(test_npy_read_header_numpy_files),
		cmocka_unit_test(test_npy_read_header_longer_than_first_read),
		cmocka_unit_test(test_npy_read_header_truncated_files),
		cmocka_unit_test(test_npy_read_header_not_npy),
		cmocka_unit_test(test_npy_read_header_bad_fd),
		cmocka_unit_test(test_npy_header_build_round_trip),
		cmocka_unit_test(test_npy_header_build_too_many_dims),
		cmocka_unit_test(test_shape_str),
		cmocka_unit_test(test_shape_str_truncates_safely),
		/* Reads past the end of the input (guard-page tests). */
		cmocka_unit_test(test_npy_parse_header_ending_in_digits_no_overread),
		cmocka_unit_test(test_npy_read_header_ending_in_digits_no_overread),
	};

	if (getenv("TFS_TEST_FILTER"))
		cmocka_set_test_filter(getenv("TFS_TEST_FILTER"));
	return cmocka_run_group_tests_name("npy", tests, setup_tmpdir, teardown_tmpdir);
}
