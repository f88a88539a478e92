/* SPDX-License-Identifier: MIT */
/* megatron: Megatron-LM's indexed dataset (PREFIX.bin + PREFIX.idx) in and out of a token
 * column.
 *
 * The index, as megatron/core/datasets/indexed_dataset.py writes and reads it: the 9 bytes
 * "MMIDIDX\0\0", u64 version 1, u8 dtype code (1 uint8, 2 int8, 3 int16, 4 int32, 5 int64,
 * 6 float64, 7 float32, 8 uint16), u64 sequence count S, u64 document count D (the length of
 * the document index: documents + 1), then S int32 sequence lengths (tokens), S int64 sequence
 * pointers (byte offsets into .bin), D int64 document indices (the sequence each document starts
 * at, from 0, the last one S) and, for a multimodal dataset only, S int8 modes. All
 * little-endian. The .bin is the sequences' tokens back to back.
 *
 * A sequence is a row of the token column (a ragged column of rank 1). Token ids are kept
 * unsigned: uint8 and uint16 as they are, int16 and int32 as uint16 and uint32 (the same bytes:
 * an id is never negative; a negative one is an error), int64 as uint32 when every id fits
 * (else an error). A document index other than one document a sequence is kept as an int64
 * column COL_document (each sequence's document number). Export writes uint8 as code 1, uint16
 * as 8, uint32 as int32 (code 4: ids below 2^31), int32 and int64 columns as 4 and 5, pointers
 * back to back, and the document index from COL_document or one document a sequence: a file
 * that Megatron's writer made (uint16 or int32) comes back byte for byte. */
#ifndef TFS_MEGATRON_H
#define TFS_MEGATRON_H

#include "import.h"
#include "store.h"
#include "version.h"

/* Import PREFIX.bin and PREFIX.idx into column `column` (and column_document) of a dataset with
 * no columns of those names, and commit. The index's checks (header, counts, pointers inside
 * .bin, lengths, document index) are made before anything is written; each sequence's ids as it
 * is read, .bin once, front to back (a URL's as it arrives, holding a window of it: source.h):
 * -EINVAL, logged, and nothing committed. */
int tfs_import_megatron(struct tfs_store *s, const char *ds, const char *prefix, const char *column,
			const struct tfs_import_opts *o, struct tfs_import_result *res,
			struct tfs_id *commit_id);

/* Write column `column` of v (a token column) as PREFIX.bin and PREFIX.idx; both are written
 * under temporary names and renamed into place when whole. */
int tfs_export_megatron(struct tfs_version *v, struct tfs_cache *cache, const char *column,
			const char *prefix);

#endif
