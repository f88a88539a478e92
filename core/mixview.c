/* SPDX-License-Identifier: MIT */
/* mixview: the blend of a mixture's sources' packed samples, and its shard. */
#include "mixview.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "view.h"

const struct tfs_pack *tfs_mixview_pack(const struct tfs_mixview *mv, size_t i)
{
	return mv->pv[i]->view->pack;
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
	if (p.shuffle && (p.seed || !p.epoch)) {
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
