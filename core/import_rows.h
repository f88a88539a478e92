/* SPDX-License-Identifier: MIT */
/* import_rows: the import sources that come a row at a time (text files, directories of .npy
 * files), for import.c: scanned and checked whole first, then written through rowcol. */
#ifndef TFS_IMPORT_ROWS_H
#define TFS_IMPORT_ROWS_H

#include <stddef.h>
#include <stdint.h>

#include "import.h"
#include "rowcol.h"

/* What a row source holds, learned before anything is written. */
struct tfs_rows_scan {
	enum tfs_col_kind kind;
	struct tfs_dtype dtype;
	unsigned ndim;		      /* a row's rank */
	uint64_t shape[TFS_MAX_DIMS]; /* the first row's shape (a fixed column's row shape) */
	uint64_t rows, bytes;
	char **files; /* directory sources: the .npy files, sorted */
	size_t nfiles;
	/* A token directory: the files' dtype, narrowed to dtype as rows are written. */
	struct tfs_dtype from;
	int narrow;
	/* A text file, mapped by the scan and read again by the write: a URL's object is fetched
	 * once for both. */
	const uint8_t *text;
	size_t text_len;
};

/* Read the source through once: its rows, their kind, and every row checked (text: UTF-8; a
 * directory: one dtype and rank). -EINVAL (logged, naming the file and line) when it cannot be
 * imported. */
int tfs_rows_scan(const struct tfs_import_src *src, struct tfs_rows_scan *sc);
/* Add every row of the source to w, then finish w. */
int tfs_rows_write(const struct tfs_import_src *src, const struct tfs_rows_scan *sc,
		   struct tfs_rowcol *w, struct tfs_progress *progress);
void tfs_rows_scan_free(struct tfs_rows_scan *sc);

#endif
