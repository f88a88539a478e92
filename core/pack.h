/* SPDX-License-Identifier: MIT */
/* pack: a token column's documents packed into samples of S + 1 tokens, Megatron-LM's way, as
 * the rows of a view (views/pack=S,...).
 *
 * The documents are the rows of a ragged column of rank 1 and integer dtype: all of them, or
 * those a where= filter or a saved query selects. Their order is the column's (the query's), or
 * with seed= (or epoch=) a Fisher-Yates shuffle by rng.h's generator seeded from (seed, epoch). The stream is every document in that order, each followed by the eos token when
 * one is given. Sample k is stream tokens [k S, k S + S + 1): consecutive samples share one
 * token, so x = row[:-1] and y = row[1:]. There are (T - 1) / S samples of a stream of T >= 1
 * tokens (none of an empty one): the tail too short for a sample is left out. With seed= the
 * samples are then put in an order of their own by the same generator (continuing where the
 * document shuffle left it); the view's other keys shard that order as they shard a version's
 * rows.
 *
 * The index arrays (the document order, each sample's first document and offset, the sample
 * order) are built once per view in O(documents + samples) time and memory; a sample's tokens
 * are read through the core reader when asked for. */
#ifndef TFS_PACK_H
#define TFS_PACK_H

#include <stddef.h>
#include <stdint.h>

#include "cache.h"
#include "npy.h"
#include "version.h"

struct tfs_pack_params {
	uint64_t seq;	 /* S: tokens a sample, and one more */
	const char *col; /* the token column; NULL: the version's only one */
	int has_eos;
	uint64_t eos;
	int shuffle;
	uint64_t seed, epoch;
	/* The documents to pack, in this order (rows of the column, each below its row count; a
	 * row given twice is packed twice); NULL: every row, in the column's order. */
	const uint64_t *docs;
	uint64_t ndocs;
};

struct tfs_pack;

/* The token column `name` of m (NULL: its only one): -EINVAL with the reason in err when there
 * is no such column, it holds no documents of token ids, or there is not exactly one. */
int tfs_pack_find_column(const struct tfs_manifest *m, const char *name, size_t *at, char *err,
			 size_t cap);
/* -EINVAL with the reason in err: no such column, not a token column, or no single one; an eos
 * the dtype cannot hold; a document past the column's rows. -EIO: the offsets cannot be read. */
int tfs_pack_build(struct tfs_version *v, struct tfs_cache *cache, const struct tfs_pack_params *p,
		   struct tfs_pack **out, char *err, size_t err_cap);
void tfs_pack_free(struct tfs_pack *p);
/* The samples (N), and their order (N sample numbers). */
uint64_t tfs_pack_rows(const struct tfs_pack *p);
const uint64_t *tfs_pack_order(const struct tfs_pack *p);
/* Bytes the pack holds (for the lake's view budget). */
uint64_t tfs_pack_bytes(const struct tfs_pack *p);
/* The token column's index in the manifest. */
size_t tfs_pack_column(const struct tfs_pack *p);

/* What a pack view shows: tokens.npy (N, S + 1) of the column's dtype; segments.npy (N, S + 1)
 * uint16 (uint32 when S + 1 > 65536): each token's document number within its sample, from 0;
 * doc.npy (N, 2) int64: the document (row of the column) and token offset the sample starts at. */
enum tfs_pack_file { TFS_PACK_TOKENS, TFS_PACK_SEGMENTS, TFS_PACK_DOC, TFS_PACK_NFILES };
extern const char *const tfs_pack_file_names[TFS_PACK_NFILES];
/* File f's dtype, and its row shape (one dimension). */
void tfs_pack_file_type(const struct tfs_pack *p, enum tfs_pack_file f, struct tfs_dtype *dt,
			uint64_t *row_len);
uint64_t tfs_pack_row_bytes(const struct tfs_pack *p, enum tfs_pack_file f);

struct tfs_reader;
struct tfs_gather_list;
/* Sample s (below tfs_pack_rows) of file f into out (tfs_pack_row_bytes of it). Tokens are read
 * through r with l (the caller's, empty, and left empty: a list kept from one sample to the
 * next); bytes of chunks damaged for good are EIO or, with a reader that pads, zeros (*padded
 * set). */
int tfs_pack_sample(const struct tfs_pack *p, struct tfs_reader *r, uint64_t s,
		    enum tfs_pack_file f, uint8_t *out, struct tfs_gather_list *l, int *padded);

#endif
