/* SPDX-License-Identifier: MIT */
/* cacheplan: readers' plans for the cache's MIN eviction. */
#include "cacheplan.h"

#include <errno.h>
#include <stdlib.h>

struct use {
	struct tfs_idmap_node node;
	uint64_t first, last;
};

struct tfs_cache_plan {
	struct tfs_idmap map; /* struct use by chunk id; fixed once started */
	struct use **uses;    /* to free them */
	size_t nuses, cap;
	uint64_t cursor;  /* atomic */
	uint64_t protect; /* positions after the cursor whose chunks are never evicted first */
	struct tfs_cache_plan *next; /* the cache's published plans; under its plan lock */
};

struct tfs_cache_plan *tfs_cache_plan_new(uint64_t protect)
{
	struct tfs_cache_plan *p = calloc(1, sizeof(*p));

	if (!p || tfs_idmap_init(&p->map, 64)) {
		free(p);
		return NULL;
	}
	p->protect = protect;
	return p;
}

int tfs_cache_plan_use(struct tfs_cache_plan *p, const struct tfs_id *id, uint64_t pos)
{
	struct tfs_idmap_node *n = tfs_idmap_find(&p->map, id);
	struct use *u;

	if (n) {
		u = tfs_idmap_entry(n, struct use, node);
		u->first = pos < u->first ? pos : u->first;
		u->last = pos > u->last ? pos : u->last;
		return 0;
	}
	if (TFS_GROW(p->uses, &p->cap, p->nuses + 1))
		return -ENOMEM;
	u = calloc(1, sizeof(*u));
	if (!u)
		return -ENOMEM;
	u->node.id = *id;
	u->first = u->last = pos;
	tfs_idmap_insert(&p->map, &u->node);
	p->uses[p->nuses++] = u;
	return 0;
}

void tfs_cache_plan_at(struct tfs_cache_plan *p, uint64_t pos)
{
	__atomic_store_n(&p->cursor, pos, __ATOMIC_RELAXED);
}

struct tfs_cache_plan *tfs_cache_plan_next(struct tfs_cache_plan *p)
{
	return p->next;
}

int tfs_cache_plan_class(struct tfs_cache_plan *plans, const struct tfs_id *id, uint64_t *dist)
{
	int known = 0, later = 0;
	uint64_t best = UINT64_MAX;

	for (struct tfs_cache_plan *p = plans; p; p = p->next) {
		struct tfs_idmap_node *n = tfs_idmap_find(&p->map, id);
		const uint64_t cur = __atomic_load_n(&p->cursor, __ATOMIC_RELAXED);
		const struct use *u;

		if (!n)
			continue;
		known = 1;
		u = tfs_idmap_entry(n, struct use, node);
		if (cur > u->last)
			continue; /* this reader is done with it */
		if (cur >= u->first || u->first - cur <= p->protect)
			return 3;
		later = 1;
		best = u->first - cur < best ? u->first - cur : best;
	}
	*dist = best;
	return later ? 2 : known ? 0 : 1;
}

void tfs_cache_plan_free(struct tfs_cache_plan *p)
{
	for (size_t i = 0; i < p->nuses; i++)
		free(p->uses[i]);
	free(p->uses);
	tfs_idmap_free(&p->map);
	free(p);
}

void tfs_cache_plan_set_next(struct tfs_cache_plan *p, struct tfs_cache_plan *next)
{
	p->next = next;
}
