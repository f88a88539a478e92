/* SPDX-License-Identifier: MIT */
/* knn: exact nearest neighbours over an embedding column (a fixed column of float32 vectors),
 * by blocked matrix products through BLAS (OpenBLAS from Debian) over the column's decoded
 * chunks, and a heap of the best k per query. */
#ifndef TFS_KNN_H
#define TFS_KNN_H

#include <stddef.h>
#include <stdint.h>

#include "cache.h"
#include "version.h"

enum tfs_knn_metric {
	TFS_KNN_IP,	/* inner product: larger is nearer */
	TFS_KNN_COSINE, /* cosine similarity: larger is nearer */
	TFS_KNN_L2,	/* squared euclidean distance: smaller is nearer */
};

/* "ip", "cosine", "l2": 0 with *m, or -EINVAL. */
int tfs_knn_metric_parse(const char *s, enum tfs_knn_metric *m);

struct tfs_knn_hit {
	uint64_t row;
	float score; /* the metric's value */
};

/* For each of the nq query vectors (nq x d float32, row-major), the k nearest of rows[0..n)
 * (NULL: every row) of column col, nearest first, ties by row number: out[q * k ..], found[q]
 * of them (fewer when there are fewer rows). A row holding NaN is never a neighbour. -EINVAL
 * with the reason in err: not a column of float32 vectors of d values, a query vector with NaN
 * or infinity, or (cosine) a query of norm 0; -EIO when a chunk cannot be read. */
int tfs_knn_search(struct tfs_version *v, struct tfs_cache *cache, size_t col, const float *qv,
		   size_t nq, size_t d, const uint64_t *rows, uint64_t n, size_t k,
		   enum tfs_knn_metric metric, struct tfs_knn_hit *out, size_t *found, char *err,
		   size_t err_cap);

/* The distance of two float32 vectors (blobs of d values each) by metric, as SQL's ORDER BY
 * wants it, smaller nearer: l2 the euclidean distance, cosine 1 - similarity, ip the negated
 * inner product. */
double tfs_knn_distance(const float *a, const float *b, size_t d, enum tfs_knn_metric metric);

#endif
