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

#include <sys/uio.h>

#include "cache.h"
#include "lake.h"
#include "version.h"
#include "viewspans.h"
#include "workpool.h"

/* One run of bytes: bytes at address src (in this process: a cached chunk, or the host memory
 * the reader wrote offsets into; 0: zeros) go to offset dst of the destination. */
struct tfs_gather_op {
	uint64_t src;
	uint64_t dst;
	uint64_t bytes;
	uint32_t pin; /* the list's pin src lies in; TFS_GATHER_NO_PIN for zeros and offsets */
};
#define TFS_GATHER_NO_PIN UINT32_MAX

/* A chunk, or a frame of it (bytes [base, base + e->len) of the chunk), that ops read. */
struct tfs_gather_pin {
	struct tfs_cache_entry *e;
	const struct tfs_id *id; /* the chunk's (in the version's manifest) */
	size_t part, k;
	uint64_t base;
	int whole; /* the whole chunk */
};

/* What a batch reads. The pins are chunks the ops read from, held until release. */
struct tfs_gather_list {
	struct tfs_cache *cache;
	struct tfs_gather_op *ops;
	size_t nops, ops_cap;
	struct tfs_gather_pin *pins;
	size_t npins, pins_cap;
	uint64_t bytes; /* the ops' bytes */
	/* The whole chunks among the pins, by chunk: open addressing, map_cap slots (a power of
	 * two, at least twice map_used), each a pin's index + 1 or 0 (free). A chunk is pinned
	 * once a list however many of the batch's rows it holds. */
	uint32_t *map;
	size_t map_cap, map_used;
};

void tfs_gather_list_init(struct tfs_gather_list *l, struct tfs_cache *cache);
/* Unpins the chunks and empties the list; its arrays stay for the next batch. */
void tfs_gather_list_release(struct tfs_gather_list *l);
/* tfs_gather_list_release, then frees the arrays. */
void tfs_gather_list_free(struct tfs_gather_list *l);
/* The ops covering [from, to) of the destination (ops in destination order, covering it without
 * gaps: what tfs_reader_gather gives for a fixed column or a part), as at most max iovecs
 * pointing into the pinned chunks (zeros: into zeros, of to - from bytes at least): a reply
 * written straight from the cache. Returns the count, or 0 when max would not do. */
size_t tfs_gather_list_iov(const struct tfs_gather_list *l, uint64_t from, uint64_t to,
			   const uint8_t *zeros, struct iovec *iov, size_t max);
/* Copy what the ops put in [from, to) of the destination to out (under the same conditions). */
void tfs_gather_list_copy(const struct tfs_gather_list *l, uint64_t from, uint64_t to,
			  uint8_t *out);
/* Add an op copying bytes at host address src (memory the caller keeps until the list is
 * run: a slot's host layout) to offset dst of the destination. */
int tfs_gather_list_add(struct tfs_gather_list *l, const void *src, uint64_t dst, uint64_t bytes);
/* Run the ops on the CPU into dst (an op whose source is already at its place is skipped). The
 * reference for every other executor of a list (gatherrun.c). */
void tfs_gather_list_run(const struct tfs_gather_list *l, uint8_t *dst);
/* The same, a large list split by bytes over threads of pool (NULL: this thread alone; this
 * thread runs its share and waits, running parts no worker has started). cold: dst was not
 * written lately (a ring of slots in turn), so a large list is written past the caches rather
 * than reading each line of dst in before overwriting it; else (a slot filled again at once, its
 * lines still cached) through them, unless it is too large to stay cached anyway. */
void tfs_gather_list_run_on(const struct tfs_gather_list *l, uint8_t *dst,
			    struct tfs_workpool *pool, int cold);

struct tfs_reader;

/* A reader of v's rows through cache (both borrowed: they outlive it). With pad, rows in chunks
 * damaged for good are bad rows, gathered as zeros (another kind than fixed: as empty rows) and
 * counted; without, reading them fails with -EIO. */
int tfs_reader_open(struct tfs_version *v, struct tfs_cache *cache, int pad,
		    struct tfs_reader **out);
void tfs_reader_close(struct tfs_reader *r);

/* --- where the reader is: the prefetcher, the cache's plan, the next epoch's warm-up ---------
 * A reader opened on a lake follows its reader's position for every front end alike: the
 * mount's files, whose reads arrive in any order, and the control file's streams. Rows are the
 * reader's rows: view rows through a view, else version rows (a data part's: its bytes). */

/* tfs_reader_open, for lake l, through view lv (NULL: in version order; borrowed: outlives the
 * reader). */
int tfs_reader_open_lake(struct tfs_lake *l, struct tfs_version *v, struct tfs_lake_view *lv,
			 int pad, struct tfs_reader **out);
/* Prefetch the chunks of column or part `part` in the order a front-to-back reader needs them:
 * version order, the view's order (a fixed column), or for a view's data part the order its
 * spans sp give. Nothing when the lake has no prefetcher. */
int tfs_reader_prefetch(struct tfs_reader *r, size_t part, const struct tfs_view_spans *sp);
/* Through a view, on a lake that evicts by plans: publish where the reader needs the chunks of
 * cols[0..n) (columns, with sp[i] their spans for another kind than fixed, or data parts with
 * theirs), protecting max(one warm-up window of row_bytes rows, protect_min) rows ahead. */
int tfs_reader_plan(struct tfs_reader *r, const size_t *cols,
		    const struct tfs_view_spans *const *sp, size_t n, uint64_t row_bytes,
		    uint64_t protect_min);
/* The next epoch's first window is warmed for these columns once the reader nears its end. */
void tfs_reader_warm_columns(struct tfs_reader *r, const size_t *cols, size_t n);
/* The reader reads rows [first, last] now, with bytes_left bytes after them: moves the prefetch
 * stream and the plan's cursor, and near the end asks for the next epoch's warm-up (once).
 * Returns whether this read goes on a sequential run (the prefetch stream's judgement; 1
 * without a stream), which whole chunks serve best. */
int tfs_reader_at(struct tfs_reader *r, uint64_t first, uint64_t last, uint64_t bytes_left);

/* With on, fixed columns' rows of chunks not cached whole are gathered from the single frames
 * that hold them (tfs_version_piece_get): for a first batch, whose rows are a few of each chunk,
 * that loads less than whole chunks. Off by default. */
void tfs_reader_frames(struct tfs_reader *r, int on);

/* Whether chunk k of column part is recorded damaged for good (badchunks.h). The record is
 * looked up in a map the reader rebuilds when the record grows: nothing while it is empty. */
int tfs_reader_chunk_bad(struct tfs_reader *r, size_t part, size_t k);
/* Whether any chunk of column part is recorded damaged. */
int tfs_reader_part_bad(struct tfs_reader *r, size_t part);
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
	uint64_t used; /* bytes of the rows: a fixed column's, another kind's data */
	size_t padded; /* bad rows, padded */
	uint64_t need; /* -E2BIG: the bytes the rows needed, more than room */
};

/* Add to l the ops that gather version rows rows[0..n) of column col (a column or a fixed part) to
 * place at. Offsets, which are computed, are written into meta (host memory laid out as the
 * destination) and copied from there by an op. Returns 0; -E2BIG when the rows do not fit
 * room (res->need); -EIO for damaged rows without pad; other -errno. On failure the list may
 * hold some of the ops and pins: release it. */
int tfs_reader_gather(struct tfs_reader *r, size_t col, const uint64_t *rows, size_t n,
		      const struct tfs_gather_place *at, uint8_t *meta, struct tfs_gather_list *l,
		      struct tfs_gather_result *res);
/* Add to l the ops for bytes [a, b) of data part `part`, to dst; with pad, bytes of a row in a
 * chunk recorded damaged (the row's [row_a, row_b)) come as zeros and *padded is set. */
int tfs_reader_gather_bytes(struct tfs_reader *r, size_t part, uint64_t row_a, uint64_t row_b,
			    uint64_t a, uint64_t b, uint64_t dst, struct tfs_gather_list *l,
			    int *padded);

#endif
