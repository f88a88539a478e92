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
 * large weight is read several times an epoch, a large one with a small weight over several. */
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
};

/* Build the view `name` (pack=S and the view keys; seed= overrides the mixture's) of mixture m
 * on lake l: -EINVAL with the reason in err for a name that is not a pack view, a source
 * without samples or without its dataset's commit. */
int tfs_mixview_build(struct tfs_lake *l, const struct tfs_mix *m, const char *name,
		      struct tfs_mixview **out, char *err, size_t err_cap);
void tfs_mixview_free(struct tfs_lake *l, struct tfs_mixview *mv);
/* The pack of source i. */
const struct tfs_pack *tfs_mixview_pack(const struct tfs_mixview *mv, size_t i);

#endif
