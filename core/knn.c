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

struct search {
	const float *q; /* nq x d, normalised for cosine */
	float *qn;	/* squared norms (l2) */
	size_t nq, d;
	enum tfs_knn_metric metric;
	struct heap *heaps;
	float *scores; /* nq x BLOCK */
};

/* Offer the m rows of block x (m x d), numbered rows[0..m) (or first + i), to every query. */
static void block(struct search *s, const float *x, size_t m, const uint64_t *rows, uint64_t first)
{
	cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)s->nq, (int)m, (int)s->d, 1.0f,
		    s->q, (int)s->d, x, (int)s->d, 0.0f, s->scores, (int)m);
	for (size_t i = 0; i < m; i++) {
		const float *row = x + i * s->d;
		float norm2 = 0;
		int bad = 0;

		for (size_t j = 0; j < s->d; j++) {
			norm2 += row[j] * row[j];
			bad |= isnan(row[j]);
		}
		if (bad)
			continue;
		for (size_t qi = 0; qi < s->nq; qi++) {
			float sc = s->scores[qi * m + i];

			if (s->metric == TFS_KNN_COSINE)
				sc = norm2 > 0 ? sc / sqrtf(norm2) : 0;
			else if (s->metric == TFS_KNN_L2)
				sc = s->qn[qi] - 2 * sc + norm2;
			if (isnan(sc))
				continue;
			offer(&s->heaps[qi], rows ? rows[i] : first + i, sc);
		}
	}
}

int tfs_knn_search(struct tfs_version *v, struct tfs_cache *cache, size_t col, const float *qv,
		   size_t nq, size_t d, const uint64_t *rows, uint64_t n, size_t k,
		   enum tfs_knn_metric metric, struct tfs_knn_hit *out, size_t *found, char *err,
		   size_t err_cap)
{
	const struct tfs_column *c = &v->manifest.cols[col];
	struct search s = { NULL, NULL, nq, d, metric, NULL, NULL };
	float *q = NULL, *gather = NULL;
	uint64_t *grows = NULL;
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
	q = malloc(nq * d * sizeof(*q));
	s.qn = calloc(nq ? nq : 1, sizeof(*s.qn));
	s.heaps = calloc(nq ? nq : 1, sizeof(*s.heaps));
	s.scores = malloc(nq * BLOCK * sizeof(*s.scores) + 1);
	gather = malloc(BLOCK * d * sizeof(*gather) + 1);
	grows = malloc(BLOCK * sizeof(*grows));
	if (!q || !s.qn || !s.heaps || !s.scores || !gather || !grows) {
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
		s.qn[qi] = norm2;
		s.heaps[qi] = (struct heap){ out + qi * k, 0, k, metric == TFS_KNN_L2 };
	}
	if (rc)
		goto out;
	s.q = q;
	if (!rows) {
		/* Every row: each chunk's rows in place, a block at a time. */
		for (size_t ck = 0; ck < c->nchunks && !rc; ck++) {
			struct tfs_cache_entry *e;
			const uint64_t first = tfs_column_chunk_first(c, ck);
			const uint64_t m = tfs_column_chunk_rows(c, ck);

			rc = tfs_version_chunk_get(v, cache, col, ck, &e);
			if (rc)
				break;
			if (e->len < m * c->row_bytes)
				rc = -EIO;
			for (uint64_t at = 0; !rc && at < m; at += BLOCK)
				block(&s,
				      (const float *)(const void *)(e->data + at * c->row_bytes),
				      m - at < BLOCK ? (size_t)(m - at) : BLOCK, NULL, first + at);
			tfs_cache_put(cache, e);
		}
	} else {
		/* A set of rows: gathered from their chunks into blocks. */
		struct tfs_cache_entry *e = NULL;
		size_t ek = SIZE_MAX, m = 0;

		for (uint64_t i = 0; i < n && !rc; i++) {
			const uint64_t r = rows[i];
			const size_t ck = tfs_column_chunk_of(c, r);
			uint64_t off;

			if (r >= c->rows) {
				rc = -ERANGE;
				break;
			}
			if (ck != ek) {
				if (e)
					tfs_cache_put(cache, e);
				e = NULL;
				rc = tfs_version_chunk_get(v, cache, col, ck, &e);
				if (rc)
					break;
				ek = ck;
			}
			off = (r - tfs_column_chunk_first(c, ck)) * c->row_bytes;
			if (off + c->row_bytes > e->len) {
				rc = -EIO;
				break;
			}
			memcpy(gather + m * d, e->data + off, c->row_bytes);
			grows[m++] = r;
			if (m == BLOCK || i + 1 == n) {
				block(&s, gather, m, grows, 0);
				m = 0;
			}
		}
		if (e)
			tfs_cache_put(cache, e);
	}
	if (rc == -EIO)
		snprintf(err, err_cap, "column %s cannot be read (EIO)", c->name);
	for (size_t qi = 0; !rc && qi < nq; qi++) {
		int sm = metric == TFS_KNN_L2;

		qsort_r(s.heaps[qi].h, s.heaps[qi].n, sizeof(*s.heaps[qi].h), by_nearness, &sm);
		found[qi] = s.heaps[qi].n;
	}
out:
	free(q);
	free(s.qn);
	free(s.heaps);
	free(s.scores);
	free(gather);
	free(grows);
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
