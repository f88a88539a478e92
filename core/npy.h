/* SPDX-License-Identifier: MIT */
/* npy: numpy dtypes and the NPY file header (parsing any version, synthesising page-aligned v1.0).
 */
#ifndef TFS_NPY_H
#define TFS_NPY_H

#include <stddef.h>
#include <stdint.h>

#define TFS_MAX_DIMS 32 /* numpy's own limit on ndim (rows included) */
#define TFS_NPY_ALIGN 4096

/* A numeric dtype, always as stored: little-endian ("<f4") or byte-order free ("|u1"). */
struct tfs_dtype {
	char descr[5];	   /* normalised numpy descr, e.g. "<i8", "|b1", "<c16" */
	char kind;	   /* 'b' bool, 'i' signed, 'u' unsigned, 'f' float, 'c' complex */
	uint32_t itemsize; /* bytes per element */
};

/* Parse a numpy descr string ("<f4", ">i2", "|u1", "=f8", "b1", ...). *big_endian is set when
 * the data so described is big-endian and must be swapped to be stored. Returns 0, or -EINVAL
 * with a message in err for anything that is not a plain numeric dtype. */
int tfs_dtype_parse(const char *descr, struct tfs_dtype *out, int *big_endian, char *err,
		    size_t err_cap);

/* Swap the bytes of every element in place (complex values swap each half). n is in bytes and
 * a multiple of the itemsize. */
void tfs_dtype_swap(const struct tfs_dtype *dt, void *buf, size_t n);

/* Whether integer dtype dt holds the non-negative value x (0 for other kinds). */
int tfs_dtype_holds(const struct tfs_dtype *dt, uint64_t x);
/* n integers of dtype from at in as dtype to at out (integer dtypes, little-endian as the
 * host), every value kept: 0, or -ERANGE when to cannot hold one (its index in *bad when bad is
 * given: the first such when to is no wider than from). in and out may be one buffer: the
 * conversion runs a block at a time from the end when to is wider, from the start otherwise,
 * each block read whole before it is written; into int32 or int64 out of place (staged token
 * batches), one loop a pair of dtypes. Typed loops: 0.4-1.3 ns a value, where assembling each
 * value from its bytes took 3-7. */
int tfs_dtype_convert_ints(const struct tfs_dtype *from, const struct tfs_dtype *to, const void *in,
			   void *out, uint64_t n, uint64_t *bad);

/* What an NPY header says. shape[0] is the row count. */
struct tfs_npy_info {
	unsigned major, minor;
	struct tfs_dtype dtype;
	int big_endian;
	int fortran_order;
	unsigned ndim; /* >= 1 */
	uint64_t shape[TFS_MAX_DIMS];
	uint64_t data_offset; /* where the array data starts in the file */
};

/* Parse an NPY header from the first len bytes of a file. Returns 0; -EAGAIN with *need set when
 * more bytes are required; -EINVAL with a message in err when the file is not a usable NPY. */
int tfs_npy_parse(const void *buf, size_t len, struct tfs_npy_info *out, size_t *need, char *err,
		  size_t err_cap);

/* Read and parse the header of an open NPY file. */
int tfs_npy_read_header(int fd, struct tfs_npy_info *out, char *err, size_t err_cap);

/* Build an NPY v1.0 header of exactly TFS_NPY_ALIGN bytes for a C-ordered array of `rows` rows
 * of the given per-row shape: the data that follows it starts page-aligned. */
int tfs_npy_header_build(const struct tfs_dtype *dt, uint64_t rows, unsigned row_ndim,
			 const uint64_t *row_shape, char out[TFS_NPY_ALIGN]);

/* Render a shape as a Python tuple: "(3, 32, 32)", "(5,)", "()". */
void tfs_shape_str(const uint64_t *shape, unsigned ndim, char *out, size_t cap);

#endif
