/* SPDX-License-Identifier: MIT */
/* view: a version's rows in another order: a row filter, a deterministic block shuffle and a DDP
 * shard, named by a parameter string such as "seed=7,epoch=3,rank=0,world=8". */
#ifndef TFS_VIEW_H
#define TFS_VIEW_H

#include <stddef.h>
#include <stdint.h>

#include "cache.h"
#include "version.h"

/* Default shuffle window: as many chunks of the widest column as fit in
 * tfs_view_default_window(cache budget) bytes, within these bounds. */
#define TFS_VIEW_WINDOW_BYTES (64ull << 20) /* the default window without a cache budget */
#define TFS_VIEW_MIN_BLOCK 4
#define TFS_VIEW_MAX_BLOCK 65536

/* The default shuffle window for a cache of cache_budget bytes: half of it, rounded down to a
 * power of two (mounts whose budgets differ a little agree); TFS_VIEW_WINDOW_BYTES without a
 * budget. A front-to-back reader of a view needs the window's chunks in memory at once. */
uint64_t tfs_view_default_window(uint64_t cache_budget);

/* What readers of a view do with rows of chunks damaged for good (badchunks.h). */
enum tfs_view_on_error {
	TFS_ON_ERROR_FAIL, /* EIO */
	TFS_ON_ERROR_PAD,  /* zeros in files */
	TFS_ON_ERROR_SKIP, /* zeros in files; left out of control-file batches */
};

struct tfs_view_params {
	int shuffle;  /* seed= or epoch= given */
	int has_seed; /* seed= given */
	uint64_t seed, epoch;
	uint64_t rank, world; /* world 1: no sharding */
	uint64_t block;	      /* shuffle window in chunks; 0: the default for the dataset */
	uint64_t start;	      /* rows of the shard to skip (resume mid-epoch); with stride: rows
				 of the whole order */
	uint64_t stride;      /* interleaved shards of this many rows; 0: contiguous shards */
	int drop_last;	      /* 1: drop the tail that does not divide by world; 0: pad (default) */
	char *where;	      /* filter expression, decoded; NULL: every row */
	enum tfs_view_on_error on_error;
	/* pack=S: rows are samples of S + 1 tokens packed from a token column's documents
	 * (pack.h), which the other keys shuffle and shard as they do a version's rows. */
	uint64_t pack; /* 0: a view of the version's rows */
	char *col;     /* col=: the token column; NULL: the version's only one */
	int has_eos;   /* eos= given */
	uint64_t eos;  /* the token that ends every document in the stream */
	/* query=NAME@ID: the rows are a saved query's (query.h), version ID, in its order; the
	 * mount's queries/NAME/ directories name their views so. */
	char *query;
	struct tfs_id query_id;
};

/* Parse a view directory name: comma-separated key=value pairs (commas inside parentheses
 * belong to the value), values %-decoded. Keys: seed, epoch, rank, world, block, start,
 * drop_last, stride, where, on_error; pack, col and eos. Returns 0, or -EINVAL with the reason
 * in err. */
int tfs_view_parse(const char *name, struct tfs_view_params *p, char *err, size_t err_cap);
void tfs_view_params_free(struct tfs_view_params *p);

struct tfs_pack;

/* A built view: row i of the view is row rows[i] of the version (of a pack view: packed sample
 * rows[i] of pack). */
struct tfs_view {
	uint64_t n;
	uint64_t *rows;
	struct tfs_pack *pack; /* owned; NULL but for pack= */
	uint64_t matched;      /* rows the filter kept, before sharding */
	enum tfs_view_on_error on_error;
};

/* Evaluate the filter (reading the scalar columns it names through the cache), shuffle and shard.
 * Returns 0, or -EINVAL with the reason in err (a bad expression, an unknown or non-scalar
 * column, rank >= world), or -EIO if a column cannot be read. */
int tfs_view_build(struct tfs_version *v, struct tfs_cache *cache, const struct tfs_view_params *p,
		   struct tfs_view **out, char *err, size_t err_cap);
void tfs_view_free(struct tfs_view *view);
/* A view whose rows are the shard of order rows[0..n) that p's rank, world, start, stride and
 * drop_last name (its other keys are not looked at). */
int tfs_view_shard(const struct tfs_view_params *p, const uint64_t *rows, uint64_t n,
		   struct tfs_view **out);

/* The chunks of column col in the order a front-to-back reader of the view first needs them,
 * and for each chunk its position in that order (UINT32_MAX for chunks the view never reads).
 * Both arrays are allocated for the caller; pos has one entry per chunk of the column. */
int tfs_view_chunk_order(const struct tfs_view *view, const struct tfs_column *c, uint32_t **order,
			 size_t *n, uint32_t **pos);

/* The text of views/README: the grammar and the algorithms. */
extern const char tfs_view_readme[];

#endif
