/* SPDX-License-Identifier: MIT */
/* knn: queries x a block of rows through cblas_sgemm, then each score offered to its query's
 * heap. A block is a chunk's rows in place (every row asked for) or rows gathered from their
 * chunks (a filtered set). */
#include "knn.h"

#include <cblas.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "workpool.h"

#define BLOCK 2048 /* rows a product takes at most */

int tfs_knn_metric_parse(const char *s, enum tfs_knn_metric *m)
{
	if (!strcmp(s, "ip"))
		*m = TFS_KNN_IP;
	else if (!strcmp(s, "cosine"))
		*m = TFS_KNN_COSINE;
	else if (!strcmp(s, "l2"))
		*m = TFS_KNN_L2;
	else
		return -EINVAL;
	return 0;
}

/* Whether hit a is nearer than b. */
static int nearer(const struct tfs_knn_hit *a, const struct tfs_knn_hit *b, int small)
{
	if (a->score != b->score)
		return small ? a->score < b->score : a->score > b->score;
	return a->row < b->row;
}

/* A heap of the k nearest so far, the farthest at its root. */
struct heap {
	struct tfs_knn_hit *h;
	size_t n, k;
	int small;
};

static void offer(struct heap *hp, uint64_t row, float score)
{
	const struct tfs_knn_hit x = { row, score };
	size_t i;

	if (hp->n < hp->k) {
		i = hp->n++;
		while (i && nearer(&hp->h[(i - 1) / 2], &x, hp->small)) {
			hp->h[i] = hp->h[(i - 1) / 2];
			i = (i - 1) / 2;
		}
		hp->h[i] = x;
		return;
	}
	if (!hp->k || !nearer(&x, &hp->h[0], hp->small))
		return;
	i = 0;
	for (;;) { /* sift the new root down */
		size_t c = 2 * i + 1;

		if (c >= hp->n)
			break;
		if (c + 1 < hp->n && nearer(&hp->h[c], &hp->h[c + 1], hp->small))
			c++;
		if (!nearer(&x, &hp->h[c], hp->small))
			break;
		hp->h[i] = hp->h[c];
		i = c;
	}
	hp->h[i] = x;
}

static int by_nearness(const void *a, const void *b, void *small)
{
	const struct tfs_knn_hit *x = a, *y = b;
	const int sm = *(const int *)small;

	return nearer(x, y, sm) ? -1 : nearer(y, x, sm) ? 1 : 0;
}

/* The queries, as every part of a search reads them. */
struct queries {
	const float *q;	 /* nq x d, normalised for cosine */
	const float *qn; /* squared norms (l2) */
	size_t nq, d, k;
	enum tfs_knn_metric metric;
};

/* A part of a search: chunks [c0, c1) in place, or rows[r0, r1) gathered; heaps of its own. */
struct part {
	struct tfs_work work;
	const struct queries *qs;
	struct tfs_version *v;
	struct tfs_cache *cache;
	size_t col;
	size_t c0, c1;
	const uint64_t *rows;
	uint64_t r0, r1;
	struct heap *heaps;	  /* nq */
	struct tfs_knn_hit *hits; /* nq x k */
	float *scores;		  /* nq x BLOCK */
	float *gather;		  /* BLOCK x d */
	uint64_t *grows;	  /* BLOCK */
};

/* Offer the m rows of block x (m x d), numbered rows[0..m) (or first + i), to every query. */
static void block(struct part *pt, const float *x, size_t m, const uint64_t *rows, uint64_t first)
{
	const struct queries *qs = pt->qs;

	cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)qs->nq, (int)m, (int)qs->d, 1.0f,
		    qs->q, (int)qs->d, x, (int)qs->d, 0.0f, pt->scores, (int)m);
	for (size_t i = 0; i < m; i++) {
		const float *row = x + i * qs->d;
		float norm2 = 0;

		for (size_t j = 0; j < qs->d; j++)
			norm2 += row[j] * row[j];
		if (isnan(norm2)) /* a NaN anywhere in the row */
			continue;
		for (size_t qi = 0; qi < qs->nq; qi++) {
			float sc = pt->scores[qi * m + i];

			if (qs->metric == TFS_KNN_COSINE)
				sc = norm2 > 0 ? sc / sqrtf(norm2) : 0;
			else if (qs->metric == TFS_KNN_L2)
				sc = qs->qn[qi] - 2 * sc + norm2;
			if (isnan(sc))
				continue;
			offer(&pt->heaps[qi], rows ? rows[i] : first + i, sc);
		}
	}
}

static int part_run(struct tfs_work *w)
{
	struct part *pt = (struct part *)w;
	const struct tfs_column *c = &pt->v->manifest.cols[pt->col];
	const size_t d = pt->qs->d;
	int rc = 0;

	if (!pt->rows) {
		/* Every row: each chunk's rows in place, a block at a time. */
		for (size_t ck = pt->c0; ck < pt->c1 && !rc; ck++) {
			struct tfs_cache_entry *e;
			const uint64_t first = tfs_column_chunk_first(c, ck);
			const uint64_t m = tfs_column_chunk_rows(c, ck);

			rc = tfs_version_chunk_get(pt->v, pt->cache, pt->col, ck, &e);
			if (rc)
				break;
			if (e->len < m * c->row_bytes)
				rc = -EIO;
			for (uint64_t at = 0; !rc && at < m; at += BLOCK)
				block(pt,
				      (const float *)(const void *)(e->data + at * c->row_bytes),
				      m - at < BLOCK ? (size_t)(m - at) : BLOCK, NULL, first + at);
			tfs_cache_put(pt->cache, e);
		}
		return rc;
	}
	/* A set of rows: gathered from their chunks into blocks. */
	{
		struct tfs_cache_entry *e = NULL;
		size_t ek = SIZE_MAX, m = 0;

		for (uint64_t i = pt->r0; i < pt->r1 && !rc; i++) {
			const uint64_t r = pt->rows[i];
			const size_t ck = r < c->rows ? tfs_column_chunk_of(c, r) : 0;
			uint64_t off;

			if (r >= c->rows) {
				rc = -ERANGE;
				break;
			}
			if (ck != ek) {
				if (e)
					tfs_cache_put(pt->cache, e);
				e = NULL;
				rc = tfs_version_chunk_get(pt->v, pt->cache, pt->col, ck, &e);
				if (rc)
					break;
				ek = ck;
			}
			off = (r - tfs_column_chunk_first(c, ck)) * c->row_bytes;
			if (off + c->row_bytes > e->len) {
				rc = -EIO;
				break;
			}
			memcpy(pt->gather + m * d, e->data + off, c->row_bytes);
			pt->grows[m++] = r;
			if (m == BLOCK || i + 1 == pt->r1) {
				block(pt, pt->gather, m, pt->grows, 0);
				m = 0;
			}
		}
		if (e)
			tfs_cache_put(pt->cache, e);
	}
	return rc;
}

static void part_free(struct part *pt)
{
	free(pt->heaps);
	free(pt->hits);
	free(pt->scores);
	free(pt->gather);
	free(pt->grows);
}

int tfs_knn_search(struct tfs_version *v, struct tfs_cache *cache, size_t col, const float *qv,
		   size_t nq, size_t d, const uint64_t *rows, uint64_t n, size_t k,
		   enum tfs_knn_metric metric, struct tfs_knn_hit *out, size_t *found, char *err,
		   size_t err_cap)
{
	const struct tfs_column *c = &v->manifest.cols[col];
	const long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	struct queries qs = { NULL, NULL, nq, d, k, metric };
	struct tfs_workpool *pool = NULL;
	struct tfs_workgroup g;
	struct part *parts = NULL;
	size_t nparts = 0;
	float *q = NULL, *qn = NULL;
	int rc = 0;

	if (c->kind != TFS_COL_FIXED || strcmp(c->dtype.descr, "<f4") || c->ndim != 1 ||
	    c->shape[0] != d) {
		snprintf(err, err_cap,
			 "column %s is not one of float32 vectors of %zu values (dtype %s, %u "
			 "dimensions%s)",
			 c->name, d, c->dtype.descr, c->ndim,
			 c->ndim == 1 ? ", another length" : "");
		return -EINVAL;
	}
	q = malloc(nq * d * sizeof(*q) + 1);
	qn = calloc(nq ? nq : 1, sizeof(*qn));
	if (!q || !qn) {
		rc = -ENOMEM;
		goto out;
	}
	for (size_t qi = 0; qi < nq && !rc; qi++) {
		float norm2 = 0;

		for (size_t j = 0; j < d; j++) {
			const float x = qv[qi * d + j];

			if (!isfinite(x)) {
				snprintf(err, err_cap, "query vector %zu holds NaN or infinity",
					 qi);
				rc = -EINVAL;
				break;
			}
			norm2 += x * x;
		}
		if (!rc && metric == TFS_KNN_COSINE && norm2 == 0) {
			snprintf(err, err_cap, "query vector %zu is zero: no cosine", qi);
			rc = -EINVAL;
		}
		for (size_t j = 0; j < d; j++)
			q[qi * d + j] = metric == TFS_KNN_COSINE ? qv[qi * d + j] / sqrtf(norm2)
								 : qv[qi * d + j];
		qn[qi] = norm2;
	}
	if (rc)
		goto out;
	qs.q = q;
	qs.qn = qn;
	/* Parts on every core, each its own heaps: a few chunks (or 64 blocks of rows) apiece. A
	 * query block against a row block is a skinny product, so OpenBLAS runs one thread in
	 * each (its own threads would spend more in handing it out than in it). */
	openblas_set_num_threads(1);
	nparts = rows ? (size_t)((n + 64 * BLOCK - 1) / (64 * BLOCK)) : c->nchunks;
	nparts = nparts > (size_t)(ncpu > 0 ? ncpu : 1) * 4 ? (size_t)(ncpu > 0 ? ncpu : 1) * 4
							    : nparts;
	parts = calloc(nparts ? nparts : 1, sizeof(*parts));
	if (!parts || tfs_workpool_create_with_caller(ncpu > 0 ? (unsigned)ncpu : 1, &pool)) {
		rc = -ENOMEM;
		goto out;
	}
	tfs_workgroup_init(&g, pool);
	for (size_t i = 0; i < nparts && !rc; i++) {
		struct part *pt = &parts[i];

		*pt = (struct part){ .work = { .run = part_run },
				     .qs = &qs,
				     .v = v,
				     .cache = cache,
				     .col = col,
				     .rows = rows };
		if (rows) {
			pt->r0 = n * i / nparts;
			pt->r1 = n * (i + 1) / nparts;
		} else {
			pt->c0 = c->nchunks * i / nparts;
			pt->c1 = c->nchunks * (i + 1) / nparts;
		}
		pt->heaps = calloc(nq ? nq : 1, sizeof(*pt->heaps));
		pt->hits = calloc(nq * k + 1, sizeof(*pt->hits));
		pt->scores = malloc(nq * BLOCK * sizeof(*pt->scores) + 1);
		pt->gather = rows ? malloc(BLOCK * d * sizeof(*pt->gather) + 1) : NULL;
		pt->grows = rows ? malloc(BLOCK * sizeof(*pt->grows)) : NULL;
		if (!pt->heaps || !pt->hits || !pt->scores ||
		    (rows && (!pt->gather || !pt->grows))) {
			rc = -ENOMEM;
			break;
		}
		for (size_t qi = 0; qi < nq; qi++)
			pt->heaps[qi] =
				(struct heap){ pt->hits + qi * k, 0, k, metric == TFS_KNN_L2 };
		tfs_workgroup_submit(&g, &pt->work, TFS_WORK_NORMAL);
	}
	rc = rc ? (tfs_workgroup_wait(&g), rc) : tfs_workgroup_wait(&g);
	tfs_workgroup_destroy(&g);
	if (rc == -EIO)
		snprintf(err, err_cap, "column %s cannot be read (EIO)", c->name);
	/* The parts' best, merged: the k nearest of all. */
	for (size_t qi = 0; !rc && qi < nq; qi++) {
		struct heap all = { out + qi * k, 0, k, metric == TFS_KNN_L2 };
		int sm = metric == TFS_KNN_L2;

		for (size_t i = 0; i < nparts; i++)
			for (size_t j = 0; j < parts[i].heaps[qi].n; j++)
				offer(&all, parts[i].heaps[qi].h[j].row,
				      parts[i].heaps[qi].h[j].score);
		qsort_r(all.h, all.n, sizeof(*all.h), by_nearness, &sm);
		found[qi] = all.n;
	}
out:
	for (size_t i = 0; parts && i < nparts; i++)
		part_free(&parts[i]);
	free(parts);
	tfs_workpool_destroy(pool);
	free(q);
	free(qn);
	return rc;
}

double tfs_knn_distance(const float *a, const float *b, size_t d, enum tfs_knn_metric metric)
{
	double dot = 0, na = 0, nb = 0, l2 = 0;

	for (size_t i = 0; i < d; i++) {
		dot += (double)a[i] * b[i];
		na += (double)a[i] * a[i];
		nb += (double)b[i] * b[i];
		l2 += ((double)a[i] - b[i]) * ((double)a[i] - b[i]);
	}
	switch (metric) {
	case TFS_KNN_IP:
		return -dot;
	case TFS_KNN_COSINE:
		return na > 0 && nb > 0 ? 1 - dot / sqrt(na * nb) : NAN;
	default:
		return sqrt(l2);
	}
}
