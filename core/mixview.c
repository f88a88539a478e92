/* SPDX-License-Identifier: MIT */
/* mixview: the blend of a mixture's sources' packed samples, and its shard. */
#include "mixview.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "view.h"

const char tfs_mixview_readme[] =
	"Mixture views: the sources' packed samples blended by their weights, as a directory\n"
	"name.\n"
	"\n"
	"  mixes/NAME/views/pack=S,<key>=<value>,.../<file>.npy\n"
	"\n"
	"  pack=S       tokens a sample, and one more (required)\n"
	"  eos=ID       a token after every document (default: the one each source column\n"
	"               records, or none)\n"
	"  epoch=N      the mixture epoch (default 0): each source goes on in its own pack\n"
	"               order from where the epoch before left it\n"
	"  rank=R, world=W, stride=B, start=N, drop_last=1, on_error=fail|pad|skip\n"
	"               shard the mixed order as they shard any view's rows (views/README of\n"
	"               a dataset version)\n"
	"\n"
	"The mixture holds its seed and each source's dataset, commit, column and weight\n"
	"(mix.txt; tensorfs mix create|update): seed=, col=, where= and block= are refused.\n"
	"\n"
	"  tokens.npy    (N, S+1) the samples' tokens, in the dtype that holds every source's\n"
	"                (numpy's promotion: uint16 and uint32 make uint32)\n"
	"  segments.npy  (N, S+1) each token's document within its sample, from 0\n"
	"  doc.npy       (N, 2) int64: the document (row of its source) and token offset the\n"
	"                sample starts at\n"
	"  source.npy    (N,) uint8: the sample's source, numbered as in mix.txt\n"
	"\n"
	"Each source is packed as its own views/pack=S,seed=<the mixture's>/ is. Mixed sample\n"
	"j comes from the source i whose w_i * max(j, 1) - c_i is largest (w_i: its weight over\n"
	"the sum of the weights; c_i: samples taken from it so far; the first on a tie), which is\n"
	"Megatron-LM's blending rule: at every prefix each source's count is within one sample of\n"
	"its share. An epoch is as many samples as the sources hold together; a small source with\n"
	"a large weight is read several times in it. Unknown keys or bad values make the\n"
	"directory not exist (ENOENT); the daemon's log and .tensorfs/errors say why.\n";

const struct tfs_pack *tfs_mixview_pack(const struct tfs_mixview *mv, size_t i)
{
	return mv->pv[i]->view->pack;
}

void tfs_mixview_file_type(const struct tfs_mixview *mv, enum tfs_pack_file f, struct tfs_dtype *dt,
			   uint64_t *row_len)
{
	tfs_pack_file_type(tfs_mixview_pack(mv, 0), f, dt, row_len);
	if (f == TFS_PACK_TOKENS)
		*dt = mv->dtype;
}

/* The dtype that holds every source's tokens, into mv->dtype (mixview.h). */
static int common_dtype(struct tfs_mixview *mv, char *err, size_t err_cap)
{
	unsigned u = 0, i = 0, size;
	struct tfs_dtype dt;
	uint64_t len;

	for (size_t k = 0; k < mv->nsrc; k++) {
		tfs_pack_file_type(tfs_mixview_pack(mv, k), TFS_PACK_TOKENS, &dt, &len);
		if (dt.kind == 'u')
			u = dt.itemsize > u ? dt.itemsize : u;
		else
			i = dt.itemsize > i ? dt.itemsize : i;
	}
	if (u == 8 && i) {
		snprintf(err, err_cap,
			 "the sources' tokens are uint64 and int%u: no integer dtype holds both",
			 8 * i);
		return -EINVAL;
	}
	size = !i ? u : !u ? i : 2 * u > i ? 2 * u : i;
	mv->dtype.kind = i ? 'i' : 'u';
	mv->dtype.itemsize = size;
	snprintf(mv->dtype.descr, sizeof(mv->dtype.descr), "%c%c%u", size == 1 ? '|' : '<',
		 mv->dtype.kind, size);
	return 0;
}

int tfs_mixview_sample(const struct tfs_mixview *mv, struct tfs_reader **r, uint64_t j,
		       enum tfs_pack_file f, uint8_t *out, struct tfs_gather_list *l)
{
	const struct tfs_pack *p = tfs_mixview_pack(mv, mv->src[j]);
	struct tfs_dtype dt;
	uint64_t len;
	int padded, rc;

	rc = tfs_pack_sample(p, r[mv->src[j]], tfs_pack_order(p)[mv->at[j]], f, out, l, &padded);
	if (rc || f != TFS_PACK_TOKENS)
		return rc;
	tfs_pack_file_type(p, f, &dt, &len);
	/* In place: mv->dtype is as wide or wider, and holds every value (common_dtype). */
	return tfs_dtype_convert_ints(&dt, &mv->dtype, out, out, len, NULL);
}

void tfs_mixview_free(struct tfs_lake *l, struct tfs_mixview *mv)
{
	if (!mv)
		return;
	for (size_t i = 0; i < mv->nsrc; i++) {
		tfs_lake_view_put(l, mv->pv[i]);
		tfs_version_put(mv->ver[i]);
	}
	free(mv->pv);
	free(mv->ver);
	free(mv->src);
	free(mv->at);
	tfs_view_free(mv->view);
	free(mv);
}

/* Megatron-LM's build_blending_indices, over a mixture epoch of mv->n samples, epoch e: the
 * source and its sample of every mixed sample. */
static int blend(struct tfs_mixview *mv, const double *w, uint64_t e)
{
	const size_t k = mv->nsrc;
	uint64_t *count = calloc(k, sizeof(*count)), *per = calloc(k, sizeof(*per));
	int rc = 0;

	mv->src = malloc(mv->n ? mv->n : 1);
	mv->at = malloc((mv->n ? mv->n : 1) * sizeof(*mv->at));
	if (!count || !per || !mv->src || !mv->at) {
		rc = -ENOMEM;
		goto out;
	}
	for (int pass = 0; pass < 2; pass++) {
		/* Pass 0 counts each source's samples an epoch, for where epoch e starts. */
		memset(count, 0, k * sizeof(*count));
		for (uint64_t j = 0; j < mv->n; j++) {
			const double x = j > 1 ? (double)j : 1.0;
			size_t best = 0;
			double top = w[0] * x - (double)count[0];

			for (size_t i = 1; i < k; i++) {
				const double err = w[i] * x - (double)count[i];

				if (err > top) {
					top = err;
					best = i;
				}
			}
			if (pass) {
				const uint64_t have = tfs_pack_rows(tfs_mixview_pack(mv, best));

				mv->src[j] = (uint8_t)best;
				mv->at[j] = (uint64_t)(((unsigned __int128)e * per[best] +
							count[best]) %
						       have);
			}
			count[best]++;
		}
		if (!pass)
			memcpy(per, count, k * sizeof(*per));
	}
out:
	free(count);
	free(per);
	return rc;
}

int tfs_mixview_build(struct tfs_lake *l, const struct tfs_mix *m, const char *name,
		      struct tfs_mixview **out, char *err, size_t err_cap)
{
	struct tfs_view_params p;
	struct tfs_mixview *mv = NULL;
	uint64_t *rows = NULL;
	double *w = NULL, total = 0;
	int rc = tfs_view_parse(name, &p, err, err_cap);

	if (rc)
		return rc;
	if (!p.pack) {
		snprintf(err, err_cap, "a mixture's views are pack= views");
		rc = -EINVAL;
		goto out;
	}
	if (p.col) {
		snprintf(err, err_cap, "col=: a mixture names each source's column itself");
		rc = -EINVAL;
		goto out;
	}
	if (p.where) {
		snprintf(err, err_cap, "where=: a mixture packs every document of its sources");
		rc = -EINVAL;
		goto out;
	}
	if (p.has_seed) {
		snprintf(err, err_cap, "seed=: the mixture holds its seed (epoch= is the view's)");
		rc = -EINVAL;
		goto out;
	}
	mv = calloc(1, sizeof(*mv));
	if (mv) {
		mv->ver = calloc(m->n, sizeof(*mv->ver));
		mv->pv = calloc(m->n, sizeof(*mv->pv));
	}
	w = calloc(m->n, sizeof(*w));
	if (!mv || !mv->ver || !mv->pv || !w) {
		rc = -ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < m->n && !rc; i++) {
		const struct tfs_mix_source *s = &m->src[i];
		char hex[TFS_ID_HEX], pname[512];

		tfs_id_hex(&s->commit, hex);
		rc = tfs_lake_version(l, s->dataset, TFS_LAKE_COMMIT, hex, &mv->ver[i]);
		if (rc) {
			snprintf(err, err_cap, "source %zu: %s@%.12s cannot be read: %s", i,
				 s->dataset, hex, strerror(-rc));
			rc = rc == -ENOENT ? -EINVAL : rc;
			break;
		}
		mv->nsrc = i + 1;
		/* The source's own pack view, unsharded: shared through the lake's views. */
		snprintf(pname, sizeof(pname), "pack=%" PRIu64 "%s%s,seed=%" PRIu64, p.pack,
			 s->column ? ",col=" : "", s->column ? s->column : "", m->seed);
		if (p.has_eos)
			snprintf(pname + strlen(pname), sizeof(pname) - strlen(pname),
				 ",eos=%" PRIu64, p.eos);
		rc = tfs_lake_view_get(l, mv->ver[i], pname, &mv->pv[i], err, err_cap);
		if (!rc && !tfs_pack_rows(mv->pv[i]->view->pack)) {
			snprintf(err, err_cap,
				 "source %zu (%s) makes no sample of %" PRIu64 " tokens", i,
				 s->dataset, p.pack);
			rc = -EINVAL;
		}
		if (!rc) {
			mv->n += tfs_pack_rows(mv->pv[i]->view->pack);
			total += s->w;
		}
	}
	for (size_t i = 0; !rc && i < m->n; i++)
		w[i] = m->src[i].w / total;
	if (!rc)
		rc = common_dtype(mv, err, err_cap);
	if (!rc)
		rc = blend(mv, w, p.epoch);
	if (!rc) {
		struct tfs_view_params shard = p;

		rows = malloc((mv->n ? mv->n : 1) * sizeof(*rows));
		rc = rows ? 0 : -ENOMEM;
		for (uint64_t j = 0; !rc && j < mv->n; j++)
			rows[j] = j;
		shard.pack = 0;
		shard.shuffle = 0;
		shard.has_eos = 0;
		if (!rc)
			rc = tfs_view_shard(&shard, rows, mv->n, &mv->view);
	}
out:
	free(rows);
	free(w);
	tfs_view_params_free(&p);
	if (rc) {
		tfs_mixview_free(l, mv);
		return rc;
	}
	*out = mv;
	return 0;
}
