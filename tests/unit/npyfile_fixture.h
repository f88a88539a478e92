/* SPDX-License-Identifier: MIT */
/* npyfile_fixture: a .npy file of uint8 rows in a known pattern, written for an import, for the
 * unit tests that build a lake. */
#ifndef TFS_NPYFILE_FIXTURE_H
#define TFS_NPYFILE_FIXTURE_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "npy.h"

/* Byte j of row i. */
static inline uint8_t npyfile_byte(uint64_t i, uint64_t j)
{
	return (uint8_t)(i * 31 + j * 7 + (i * j) % 13);
}

/* path: rows rows of rb uint8 each, byte j of row i npyfile_byte(i, j). Returns 0, or -1. */
static inline int npyfile_write_u1(const char *path, uint64_t rows, uint64_t rb)
{
	const uint64_t shape[] = { rb };
	char hdr[TFS_NPY_ALIGN], err[64];
	struct tfs_dtype u1;
	uint8_t *row = malloc(rb ? rb : 1);
	int big, rc = -1;
	FILE *f;

	if (!row || tfs_dtype_parse("|u1", &u1, &big, err, sizeof(err)) ||
	    tfs_npy_header_build(&u1, rows, 1, shape, hdr) || !(f = fopen(path, "w"))) {
		free(row);
		return -1;
	}
	if (fwrite(hdr, 1, sizeof(hdr), f) == sizeof(hdr))
		rc = 0;
	for (uint64_t i = 0; i < rows && !rc; i++) {
		for (uint64_t j = 0; j < rb; j++)
			row[j] = npyfile_byte(i, j);
		if (fwrite(row, 1, rb, f) != rb)
			rc = -1;
	}
	free(row);
	return fclose(f) || rc ? -1 : 0;
}

#endif
