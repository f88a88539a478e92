/* SPDX-License-Identifier: MIT */
/* cacheplan: what readers of views will read, for the chunk cache's eviction (MIN, Belady's
 * rule): a view fixes its order before the epoch starts, so a reader's plan holds, for each chunk
 * it needs, the first and last positions (view rows) that need it, and the reader's cursor. The
 * cache then evicts the chunk used furthest in the future, never one the reader is in or is about
 * to need, and chunks no plan knows by LRU. */
#ifndef TFS_CACHEPLAN_H
#define TFS_CACHEPLAN_H

#include <stdint.h>

#include "idmap.h"

struct tfs_cache_plan;

/* A plan of a reader; add its chunks with tfs_cache_plan_use, then publish it to a cache with
 * tfs_cache_plan_start and withdraw it with tfs_cache_plan_end (cache.h: the cache keeps the
 * published list; this module knows no cache). */
struct tfs_cache_plan *tfs_cache_plan_new(uint64_t protect);
/* The reader needs chunk id at position pos (call in any order; first and last are kept). */
int tfs_cache_plan_use(struct tfs_cache_plan *p, const struct tfs_id *id, uint64_t pos);
/* The reader is at position pos. */
void tfs_cache_plan_at(struct tfs_cache_plan *p, uint64_t pos);
/* Free a plan that no cache holds (tfs_cache_plan_end withdraws, then calls this). */
void tfs_cache_plan_free(struct tfs_cache_plan *p);

/* For cache.c: how much an unused entry is worth keeping, under the cache's plan lock. Classes,
 * evicted in this order: 0 no plan will use it again, 1 no plan knows it (LRU among them), 2 a
 * plan uses it later (*dist: positions until the nearest use; the furthest goes first), 3 a plan
 * is using it or will within its protected window. */
int tfs_cache_plan_class(struct tfs_cache_plan *plans, const struct tfs_id *id, uint64_t *dist);
/* The list of published plans, threaded through the plans (cache.c keeps its head). */
struct tfs_cache_plan *tfs_cache_plan_next(struct tfs_cache_plan *p);
void tfs_cache_plan_set_next(struct tfs_cache_plan *p, struct tfs_cache_plan *next);

#endif
