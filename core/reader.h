/* SPDX-License-Identifier: MIT */
/* reader: the one owner of a read of a version's rows for every front end: which rows are bad
 * (in a chunk damaged for good), and a batch of rows turned into a gather list: where each run of
 * bytes lies in the chunk cache and where it goes in the destination, with the chunks pinned
 * until the list is released. The host runs a list with tfs_gather_list_run; gpu/ hands the same
 * list to a kernel that reads the cached chunks in place (cache.h: tfs_cache_arena_start). */
#ifndef TFS_READER_H
#define TFS_READER_H

#include <stddef.h>
#include <stdint.h>

#include "cache.h"
#include "version.h"

/* One run of bytes: bytes at address src (in this process: a cached chunk, or the host memory
 * the reader wrote offsets into; 0: zeros) go to offset dst of the destination. */
struct tfs_gather_op {
	uint64_t src;
	uint64_t dst;
	uint64_t bytes;
};

/* What a batch reads. The pins are chunks the ops read from, held until release. */
struct tfs_gather_list {
	struct tfs_cache *cache;
	struct tfs_gather_op *ops;
	size_t nops, ops_cap;
	struct tfs_gather_pin *pins;
	size_t npins, pins_cap;
	uint64_t bytes; /* the ops' bytes */
};

void tfs_gather_list_init(struct tfs_gather_list *l, struct tfs_cache *cache);
/* Unpins the chunks and empties the list; its arrays stay for the next batch. */
void tfs_gather_list_release(struct tfs_gather_list *l);
/* tfs_gather_list_release, then frees the arrays. */
void tfs_gather_list_free(struct tfs_gather_list *l);
/* Run the ops on the CPU into dst (an op whose source is already at its place is skipped). The
 * reference for every other executor of a list. */
void tfs_gather_list_run(const struct tfs_gather_list *l, uint8_t *dst);

struct tfs_reader;

/* A reader of v's rows through cache (both borrowed: they outlive it). With pad, rows in chunks
 * damaged for good are bad rows, gathered as zeros (another kind than fixed: as empty rows) and
 * counted; without, reading them fails with -EIO. */
int tfs_reader_open(struct tfs_version *v, struct tfs_cache *cache, int pad,
		    struct tfs_reader **out);
void tfs_reader_close(struct tfs_reader *r);

/* Whether chunk k of column part is recorded damaged for good (badchunks.h). The record is
 * looked up in a map the reader rebuilds when the record grows: nothing while it is empty. */
int tfs_reader_chunk_bad(struct tfs_reader *r, size_t part, size_t k);
/* Whether version row row of column col is a bad row as far as is known without reading its
 * data: a fixed column's chunk of the row; another kind's offsets (rows row and row + 1) and
 * shapes. A row's data is checked as it is read. */
int tfs_reader_row_bad(struct tfs_reader *r, size_t col, uint64_t row);
/* Whether bytes [a, b) of data part `part` touch a chunk recorded damaged for good. */
int tfs_reader_bytes_bad(struct tfs_reader *r, size_t part, uint64_t a, uint64_t b);

/* Where a column's rows go in the destination: a fixed column's at col_off (row i at col_off +
 * i x row bytes); another kind's bytes one after another at data_off (room bytes at most), the
 * rows + 1 offsets into them (uint64, from 0) at col_off and, ragged, rows x rank int64 shapes
 * at shapes_off. */
struct tfs_gather_place {
	uint64_t col_off, data_off, shapes_off, room;
};

struct tfs_gather_result {
	uint64_t used;	/* bytes of the rows: a fixed column's, another kind's data */
	size_t padded;	/* bad rows, padded */
	uint64_t need;	/* -E2BIG: the bytes the rows needed, more than room */
};

/* Add to l the ops that gather version rows rows[0..n) of column col (a column, not a part) to
 * place at. Offsets, which are computed, are written into meta (host memory laid out as the
 * destination) and copied from there by an op. Returns 0; -E2BIG when the rows do not fit
 * room (res->need); -EIO for damaged rows without pad; other -errno. On failure the list may
 * hold some of the ops and pins: release it. */
int tfs_reader_gather(struct tfs_reader *r, size_t col, const uint64_t *rows, size_t n,
		      const struct tfs_gather_place *at, uint8_t *meta, struct tfs_gather_list *l,
		      struct tfs_gather_result *res);

#endif
