/* SPDX-License-Identifier: MIT */
/* npy_fixture: numpy's own NPY headers and what each must parse to, and headers built around a
 * dict's text, for the NPY unit test programs, which include cmocka.h first. Static inline: each
 * program uses the part it needs. */
#ifndef TFS_NPY_FIXTURE_H
#define TFS_NPY_FIXTURE_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "guard_fixture.h"
#include "npy.h"

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

static inline int parse_exact(const void *p, size_t n, struct tfs_npy_info *info, size_t *need,
			      char *err, size_t err_cap)
{
	struct guarded g = guarded_copy(p, n);
	int rc = tfs_npy_parse(g.p, n, info, need, err, err_cap);

	guarded_free(&g);
	return rc;
}

/* Build a whole NPY header around a dict text: v1 uses a 2-byte length, v2/v3 a 4-byte one. The
 * dict is padded with spaces and a '\n' to a multiple of 64 bytes, as numpy does. Returns the
 * header length. */
static inline size_t make_npy(unsigned major, const char *dict, uint8_t *out, size_t cap)
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

static inline int parse_dict(unsigned major, const char *dict, struct tfs_npy_info *info, char *err,
			     size_t err_cap)
{
	uint8_t buf[8192];
	size_t need = 0, n = make_npy(major, dict, buf, sizeof(buf));

	return parse_exact(buf, n, info, &need, err, err_cap);
}

static inline void check_case(const struct npy_case *c, const struct tfs_npy_info *info)
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

#endif
