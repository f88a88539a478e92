/* SPDX-License-Identifier: MIT */
/* npy: numpy dtypes and the NPY file header (parsing any version, synthesising page-aligned v1.0).
 */
#include "npy.h"

#include <byteswap.h>
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util.h"

static const char npy_magic[6] = { '\x93', 'N', 'U', 'M', 'P', 'Y' };

#define SET_ERR(...) snprintf(err, err_cap, __VA_ARGS__)

int tfs_dtype_parse(const char *descr, struct tfs_dtype *out, int *big_endian, char *err,
		    size_t err_cap)
{
	char order = '=', kind;
	const char *p = descr;
	char *end;
	unsigned long size;
	int ok;

	if (*p == '<' || *p == '>' || *p == '|' || *p == '=')
		order = *p++;
	if (!*p) {
		SET_ERR("dtype '%s' is not supported", descr);
		return -EINVAL;
	}
	kind = *p++;
	if (!isdigit((unsigned char)*p)) {
		SET_ERR("dtype '%s' is not supported (only bool, integer, float and complex)",
			descr);
		return -EINVAL;
	}
	size = strtoul(p, &end, 10);
	if (*end) {
		SET_ERR("dtype '%s' is not supported", descr);
		return -EINVAL;
	}
	switch (kind) {
	case 'b':
		ok = size == 1;
		break;
	case 'i':
	case 'u':
		ok = size == 1 || size == 2 || size == 4 || size == 8;
		break;
	case 'f':
		ok = size == 2 || size == 4 || size == 8;
		break;
	case 'c':
		ok = size == 8 || size == 16;
		break;
	default:
		ok = 0;
	}
	if (!ok) {
		SET_ERR("dtype '%s' is not supported (only bool, int8..int64, uint8..uint64, "
			"float16/32/64, complex64/128)",
			descr);
		return -EINVAL;
	}
	out->kind = kind;
	out->itemsize = (uint32_t)size;
	*big_endian = order == '>' && size > 1;
	snprintf(out->descr, sizeof(out->descr), "%c%c%lu", size == 1 ? '|' : '<', kind, size);
	return 0;
}

int tfs_dtype_holds(const struct tfs_dtype *dt, uint64_t x)
{
	const unsigned bits = 8 * dt->itemsize;

	if (dt->kind != 'u' && dt->kind != 'i')
		return 0;
	if (bits >= 64)
		return dt->kind == 'u' || x <= (uint64_t)INT64_MAX;
	return dt->kind == 'u' ? x < (1ull << bits) : x < (1ull << (bits - 1));
}

void tfs_dtype_swap(const struct tfs_dtype *dt, void *buf, size_t n)
{
	/* Complex numbers are two floats, each swapped on its own. */
	unsigned w = dt->kind == 'c' ? dt->itemsize / 2 : dt->itemsize;
	uint8_t *p = buf;

	switch (w) {
	case 2:
		for (size_t i = 0; i + 2 <= n; i += 2) {
			uint16_t v;
			memcpy(&v, p + i, 2);
			v = bswap_16(v);
			memcpy(p + i, &v, 2);
		}
		break;
	case 4:
		for (size_t i = 0; i + 4 <= n; i += 4) {
			uint32_t v;
			memcpy(&v, p + i, 4);
			v = bswap_32(v);
			memcpy(p + i, &v, 4);
		}
		break;
	case 8:
		for (size_t i = 0; i + 8 <= n; i += 8) {
			uint64_t v;
			memcpy(&v, p + i, 8);
			v = bswap_64(v);
			memcpy(p + i, &v, 8);
		}
		break;
	default:
		break;
	}
}

/* A tiny reader for the Python dict literal numpy writes in the header. */
struct lit {
	const char *p, *end;
};

static void skip_ws(struct lit *l)
{
	while (l->p < l->end && isspace((unsigned char)*l->p))
		l->p++;
}

static int expect(struct lit *l, char c)
{
	skip_ws(l);
	if (l->p < l->end && *l->p == c) {
		l->p++;
		return 1;
	}
	return 0;
}

static int read_str(struct lit *l, char *out, size_t cap)
{
	char q;
	size_t n = 0;

	skip_ws(l);
	if (l->p >= l->end || (*l->p != '\'' && *l->p != '"'))
		return -EINVAL;
	q = *l->p++;
	while (l->p < l->end && *l->p != q) {
		if (n + 1 >= cap)
			return -EINVAL;
		out[n++] = *l->p++;
	}
	if (l->p >= l->end)
		return -EINVAL;
	l->p++;
	out[n] = 0;
	return 0;
}

int tfs_npy_parse(const void *buf, size_t len, struct tfs_npy_info *out, size_t *need, char *err,
		  size_t err_cap)
{
	const uint8_t *b = buf;
	uint64_t hlen, hstart;
	struct lit l;
	int have_descr = 0, have_order = 0, have_shape = 0;
	char descr[64] = "";

	memset(out, 0, sizeof(*out));
	if (len < 10) {
		*need = 10;
		return -EAGAIN;
	}
	if (memcmp(b, npy_magic, 6)) {
		SET_ERR("not an NPY file (bad magic)");
		return -EINVAL;
	}
	out->major = b[6];
	out->minor = b[7];
	if (out->major == 1) {
		hlen = (uint64_t)b[8] | (uint64_t)b[9] << 8;
		hstart = 10;
	} else if (out->major == 2 || out->major == 3) {
		if (len < 12) {
			*need = 12;
			return -EAGAIN;
		}
		hlen = (uint64_t)b[8] | (uint64_t)b[9] << 8 | (uint64_t)b[10] << 16 |
		       (uint64_t)b[11] << 24;
		hstart = 12;
	} else {
		SET_ERR("NPY format version %u.%u is not supported", out->major, out->minor);
		return -EINVAL;
	}
	if (hlen > (1u << 24)) {
		SET_ERR("NPY header is implausibly large (%llu bytes)", (unsigned long long)hlen);
		return -EINVAL;
	}
	if (len < hstart + hlen) {
		*need = (size_t)(hstart + hlen);
		return -EAGAIN;
	}
	out->data_offset = hstart + hlen;
	l.p = (const char *)b + hstart;
	l.end = l.p + hlen;
	if (!expect(&l, '{'))
		goto bad;
	for (;;) {
		char key[32];

		if (expect(&l, '}'))
			break;
		if (read_str(&l, key, sizeof(key)) || !expect(&l, ':'))
			goto bad;
		skip_ws(&l);
		if (!strcmp(key, "descr")) {
			if (l.p < l.end && *l.p == '[') {
				SET_ERR("structured dtypes are not supported");
				return -EINVAL;
			}
			if (read_str(&l, descr, sizeof(descr)))
				goto bad;
			have_descr = 1;
		} else if (!strcmp(key, "fortran_order")) {
			if ((size_t)(l.end - l.p) >= 4 && !strncmp(l.p, "True", 4)) {
				out->fortran_order = 1;
				l.p += 4;
			} else if ((size_t)(l.end - l.p) >= 5 && !strncmp(l.p, "False", 5)) {
				l.p += 5;
			} else {
				goto bad;
			}
			have_order = 1;
		} else if (!strcmp(key, "shape")) {
			if (!expect(&l, '('))
				goto bad;
			out->ndim = 0;
			for (;;) {
				uint64_t v = 0;

				if (expect(&l, ')'))
					break;
				skip_ws(&l);
				if (l.p >= l.end || !isdigit((unsigned char)*l.p))
					goto bad;
				/* The header is not NUL-terminated: parse within its bounds. */
				while (l.p < l.end && isdigit((unsigned char)*l.p)) {
					const uint64_t digit = (uint64_t)(*l.p++ - '0');

					if (v > (UINT64_MAX - digit) / 10)
						goto bad;
					v = v * 10 + digit;
				}
				if (l.p < l.end && *l.p == 'L') /* Python 2 longs */
					l.p++;
				if (out->ndim >= TFS_MAX_DIMS) {
					SET_ERR("too many dimensions");
					return -EINVAL;
				}
				out->shape[out->ndim++] = v;
				if (!expect(&l, ',')) {
					if (!expect(&l, ')'))
						goto bad;
					break;
				}
			}
			have_shape = 1;
		} else {
			goto bad;
		}
		if (!expect(&l, ',')) {
			if (!expect(&l, '}'))
				goto bad;
			break;
		}
	}
	if (!have_descr || !have_order || !have_shape)
		goto bad;
	if (out->ndim == 0) {
		SET_ERR("a 0-d array has no rows; import arrays with at least one dimension");
		return -EINVAL;
	}
	{
		int rc = tfs_dtype_parse(descr, &out->dtype, &out->big_endian, err, err_cap);

		if (rc)
			return rc;
	}
	{
		uint64_t total = out->dtype.itemsize;

		for (unsigned i = 0; i < out->ndim; i++)
			if (tfs_mul_u64(total, out->shape[i], &total)) {
				SET_ERR("array size overflows");
				return -EINVAL;
			}
	}
	return 0;
bad:
	SET_ERR("malformed NPY header");
	return -EINVAL;
}

int tfs_npy_read_header(int fd, struct tfs_npy_info *out, char *err, size_t err_cap)
{
	size_t have = 0, need = 128;
	uint8_t *buf = NULL;
	int rc, eof = 0;

	for (;;) {
		uint8_t *nb = realloc(buf, need);

		if (!nb) {
			rc = -ENOMEM;
			break;
		}
		buf = nb;
		while (have < need && !eof) {
			ssize_t r = pread(fd, buf + have, need - have, (off_t)have);

			if (r < 0 && errno == EINTR)
				continue;
			if (r < 0) {
				rc = -errno;
				SET_ERR("read error: %s", strerror(errno));
				goto out;
			}
			if (r == 0)
				eof = 1;
			have += (size_t)r;
		}
		rc = tfs_npy_parse(buf, have, out, &need, err, err_cap);
		if (rc != -EAGAIN)
			break;
		if (need <= have || eof) {
			SET_ERR("truncated NPY header");
			rc = -EINVAL;
			break;
		}
	}
out:
	free(buf);
	return rc;
}

void tfs_shape_str(const uint64_t *shape, unsigned ndim, char *out, size_t cap)
{
	size_t n = 0;

	n += (size_t)snprintf(out + n, cap - n, "(");
	for (unsigned i = 0; i < ndim && n < cap; i++)
		n += (size_t)snprintf(out + n, cap - n, "%s%llu", i ? ", " : "",
				      (unsigned long long)shape[i]);
	if (n < cap)
		snprintf(out + n, cap - n, ndim == 1 ? ",)" : ")");
}

int tfs_npy_header_build(const struct tfs_dtype *dt, uint64_t rows, unsigned row_ndim,
			 const uint64_t *row_shape, char out[TFS_NPY_ALIGN])
{
	uint64_t shape[TFS_MAX_DIMS];
	char shp[TFS_MAX_DIMS * 22 + 8];
	int n;

	if (row_ndim + 1 > TFS_MAX_DIMS)
		return -EINVAL;
	shape[0] = rows;
	for (unsigned i = 0; i < row_ndim; i++)
		shape[i + 1] = row_shape[i];
	tfs_shape_str(shape, row_ndim + 1, shp, sizeof(shp));
	memcpy(out, npy_magic, 6);
	out[6] = 1;
	out[7] = 0;
	out[8] = (char)((TFS_NPY_ALIGN - 10) & 0xff);
	out[9] = (char)((TFS_NPY_ALIGN - 10) >> 8);
	n = snprintf(out + 10, TFS_NPY_ALIGN - 10,
		     "{'descr': '%s', 'fortran_order': False, 'shape': %s, }", dt->descr, shp);
	if (n < 0 || n >= TFS_NPY_ALIGN - 11)
		return -EINVAL;
	memset(out + 10 + n, ' ', (size_t)(TFS_NPY_ALIGN - 11 - n));
	out[TFS_NPY_ALIGN - 1] = '\n';
	return 0;
}

/* Typed loops over n values: into x[] as int64 (a uint64 past INT64_MAX comes out negative),
 * and back out of it, converted by the cast. */
#define LOAD(T)                                           \
	for (size_t k = 0; k < n; k++) {                  \
		T v;                                      \
                                                          \
		memcpy(&v, p + k * sizeof(T), sizeof(T)); \
		x[k] = (int64_t)v;                        \
		out |= (x[k] < lo) | (x[k] > hi);         \
	}                                                 \
	return out

#define STORE(T)                                          \
	for (size_t k = 0; k < n; k++) {                  \
		const T v = (T)x[k];                      \
                                                          \
		memcpy(p + k * sizeof(T), &v, sizeof(T)); \
	}                                                 \
	return

/* Whether any value loaded lies outside [lo, hi]. */
static int load_ints(const struct tfs_dtype *d, const uint8_t *p, int64_t *x, size_t n, int64_t lo,
		     int64_t hi)
{
	const int u = d->kind == 'u';
	int out = 0;

	switch (d->itemsize) {
	case 1:
		if (u) {
			LOAD(uint8_t);
		}
		LOAD(int8_t);
	case 2:
		if (u) {
			LOAD(uint16_t);
		}
		LOAD(int16_t);
	case 4:
		if (u) {
			LOAD(uint32_t);
		}
		LOAD(int32_t);
	default:
		LOAD(int64_t);
	}
}

static void store_ints(const struct tfs_dtype *d, const int64_t *x, uint8_t *p, size_t n)
{
	switch (d->itemsize) {
	case 1:
		STORE(uint8_t);
	case 2:
		STORE(uint16_t);
	case 4:
		STORE(uint32_t);
	default:
		STORE(uint64_t);
	}
}

#undef LOAD
#undef STORE

/* The same, fused into one loop a pair for the conversions token batches are staged with
 * (into int32 or int64), out of place or narrowing: n values of TI into TO, -ERANGE (the index
 * in *bad) at the first for which BAD(v) holds. */
#define CONVERT(TI, TO, BAD)                                         \
	do {                                                         \
		for (uint64_t k = 0; k < n; k++) {                   \
			TI v;                                        \
			TO o;                                        \
                                                                     \
			memcpy(&v, pi + k * sizeof(TI), sizeof(TI)); \
			if (BAD) {                                   \
				if (bad)                             \
					*bad = k;                    \
				return -ERANGE;                      \
			}                                            \
			o = (TO)v;                                   \
			memcpy(po + k * sizeof(TO), &o, sizeof(TO)); \
		}                                                    \
		return 0;                                            \
	} while (0)

static int to_int32(const struct tfs_dtype *from, const uint8_t *pi, uint8_t *po, uint64_t n,
		    uint64_t *bad)
{
	const int u = from->kind == 'u';

	switch (from->itemsize) {
	case 1:
		if (u)
			CONVERT(uint8_t, int32_t, 0);
		CONVERT(int8_t, int32_t, 0);
	case 2:
		if (u)
			CONVERT(uint16_t, int32_t, 0);
		CONVERT(int16_t, int32_t, 0);
	case 4:
		if (u)
			CONVERT(uint32_t, int32_t, v > INT32_MAX);
		CONVERT(int32_t, int32_t, 0);
	default:
		if (u)
			CONVERT(uint64_t, int32_t, v > INT32_MAX);
		CONVERT(int64_t, int32_t, v < INT32_MIN || v > INT32_MAX);
	}
}

static int to_int64(const struct tfs_dtype *from, const uint8_t *pi, uint8_t *po, uint64_t n,
		    uint64_t *bad)
{
	const int u = from->kind == 'u';

	switch (from->itemsize) {
	case 1:
		if (u)
			CONVERT(uint8_t, int64_t, 0);
		CONVERT(int8_t, int64_t, 0);
	case 2:
		if (u)
			CONVERT(uint16_t, int64_t, 0);
		CONVERT(int16_t, int64_t, 0);
	case 4:
		if (u)
			CONVERT(uint32_t, int64_t, 0);
		CONVERT(int32_t, int64_t, 0);
	default:
		if (u)
			CONVERT(uint64_t, int64_t, v > INT64_MAX);
		CONVERT(int64_t, int64_t, 0);
	}
}

#undef CONVERT

int tfs_dtype_convert_ints(const struct tfs_dtype *from, const struct tfs_dtype *to, const void *in,
			   void *out, uint64_t n, uint64_t *bad)
{
	enum { BLOCK = 512 };
	const unsigned bits = 8 * to->itemsize;
	/* A uint64 is never negative: one that loads as negative is past INT64_MAX. */
	const int64_t lo = to->kind == 'u' || (from->kind == 'u' && from->itemsize == 8) ? 0
			   : bits == 64							 ? INT64_MIN
					: -(INT64_C(1) << (bits - 1));
	const int64_t hi = bits == 64	     ? INT64_MAX
			   : to->kind == 'u' ? (INT64_C(1) << bits) - 1
					     : (INT64_C(1) << (bits - 1)) - 1;
	const int backward = to->itemsize > from->itemsize;
	int64_t x[BLOCK];

	if (from->kind == to->kind && from->itemsize == to->itemsize) {
		memmove(out, in, n * from->itemsize);
		return 0;
	}
	/* One pass where a front-to-back loop cannot overwrite a value it has yet to read. */
	if (to->kind == 'i' && (to->itemsize == 4 || to->itemsize == 8) && (in != out || !backward))
		return to->itemsize == 4 ? to_int32(from, in, out, n, bad)
					 : to_int64(from, in, out, n, bad);
	for (uint64_t done = 0; done < n;) {
		const size_t m = n - done < BLOCK ? (size_t)(n - done) : BLOCK;
		const uint64_t at = backward ? n - done - m : done;

		if (load_ints(from, (const uint8_t *)in + at * from->itemsize, x, m, lo, hi)) {
			size_t k = 0;

			while (x[k] >= lo && x[k] <= hi)
				k++;
			if (bad)
				*bad = at + k;
			return -ERANGE;
		}
		store_ints(to, x, (uint8_t *)out + at * to->itemsize, m);
		done += m;
	}
	return 0;
}
