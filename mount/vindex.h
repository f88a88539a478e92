/* SPDX-License-Identifier: MIT */
/* vindex: an IVF (or IVF-PQ) index of an embedding column, built and searched with FAISS
 * (Debian's libfaiss-dev) through this one C++ file, for the tensorfs command. */
#ifndef TFS_VINDEX_H
#define TFS_VINDEX_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

struct tfs_vindex;

/* An untrained index of d-dimensional vectors: nlist inverted lists, vectors kept whole
 * (pq_m 0) or product-quantised into pq_m bytes; ip: inner product, else l2. */
int tfs_vindex_create(size_t d, size_t nlist, size_t pq_m, int ip, struct tfs_vindex **out,
		      char *err, size_t err_cap);
int tfs_vindex_train(struct tfs_vindex *ix, const float *x, size_t n, char *err, size_t err_cap);
/* Add n vectors x with row numbers ids. */
int tfs_vindex_add(struct tfs_vindex *ix, const float *x, size_t n, const int64_t *ids, char *err,
		   size_t err_cap);
/* The index as bytes (malloc'd), and back. */
int tfs_vindex_save(const struct tfs_vindex *ix, uint8_t **buf, size_t *len, char *err,
		    size_t err_cap);
int tfs_vindex_load(const uint8_t *buf, size_t len, struct tfs_vindex **out, char *err,
		    size_t err_cap);
/* The k nearest to each of nq queries, probing nprobe lists, among the rows allowed[0..nallowed)
 * (NULL: all): scores (inner product, or squared l2) and rows, -1 past what was found. */
int tfs_vindex_search(const struct tfs_vindex *ix, const float *q, size_t nq, size_t k,
		      size_t nprobe, const int64_t *allowed, size_t nallowed, float *scores,
		      int64_t *rows, char *err, size_t err_cap);
size_t tfs_vindex_dim(const struct tfs_vindex *ix);
size_t tfs_vindex_count(const struct tfs_vindex *ix);
void tfs_vindex_free(struct tfs_vindex *ix);

#ifdef __cplusplus
}
#endif

#endif
