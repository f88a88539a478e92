/* SPDX-License-Identifier: MIT */
/* mixview: a mixture's packed samples (mixes/NAME/views/pack=S,.../): each source's pack view
 * (pack.h, through the lake's view cache), interleaved by Megatron-LM's blending rule and then
 * sharded as a view's rows.
 *
 * With weights w_i normalised to sum to 1, mixed sample j comes from the source whose error
 * w_i * max(j, 1) - c_i (c_i: the samples taken from it so far) is largest, the first such
 * source on a tie, so that at every prefix each source's count is within one sample of its
 * share. A mixture epoch is as many samples as all the sources hold together; a source's
 * samples are taken in its pack order (seeded by the mixture's seed), continuing from where the
 * previous epoch of the mixture left off and starting over at its end: a small source with a
 * large weight is read several times an epoch, a large one with a small weight over several.
 *
 * Sources may store their tokens in different integer dtypes (uint16 where every id fits,
 * uint32 or int32 elsewhere): the mixture's tokens are in the narrowest dtype that holds every
 * source's, as numpy promotes them (uint16 and uint32: uint32; uint16 and int32: int32; uint32
 * and int16: int64), each sample widened as it is made. */
#ifndef TFS_MIXVIEW_H
#define TFS_MIXVIEW_H

#include <stdint.h>

#include "lake.h"
#include "mix.h"
#include "pack.h"

struct tfs_mixview {
	size_t nsrc;
	struct tfs_version **ver;  /* per source, referenced */
	struct tfs_lake_view **pv; /* per source, its pack view (unsharded), referenced */
	uint64_t n;		   /* mixed samples an epoch */
	uint8_t *src;		   /* per mixed sample: its source */
	uint64_t *at;		   /* per mixed sample: the source's sample number */
	struct tfs_view *view;	   /* the shard: rows are mixed sample numbers */
	struct tfs_dtype dtype;	   /* tokens.npy's: holds every source's tokens */
};

/* Build the view `name` (pack=S and the view keys but seed=, col=, where= and block=) of
 * mixture m on lake l: -EINVAL with the reason in err for a name that is not such a view, a
 * source without samples or without its dataset's commit, sources whose token dtypes no
 * integer dtype holds together (uint64 and a signed one). */
int tfs_mixview_build(struct tfs_lake *l, const struct tfs_mix *m, const char *name,
		      struct tfs_mixview **out, char *err, size_t err_cap);
void tfs_mixview_free(struct tfs_lake *l, struct tfs_mixview *mv);
/* The pack of source i. */
const struct tfs_pack *tfs_mixview_pack(const struct tfs_mixview *mv, size_t i);
/* File f's dtype and row length (tfs_pack_file_type, but tokens in mv->dtype). */
void tfs_mixview_file_type(const struct tfs_mixview *mv, enum tfs_pack_file f,
			   struct tfs_dtype *dt, uint64_t *row_len);
/* Mixed sample j's row of file f into out (tfs_mixview_file_type's row of it) through the
 * readers of its source (r: one per source), as tfs_pack_sample makes its source's. */
int tfs_mixview_sample(const struct tfs_mixview *mv, struct tfs_reader **r, uint64_t j,
		       enum tfs_pack_file f, uint8_t *out, struct tfs_gather_list *l);

/* The text of mixes/NAME/views/README. */
extern const char tfs_mixview_readme[];

#endif
