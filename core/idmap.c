/* SPDX-License-Identifier: MIT */
/* idmap: chained hashing of id-keyed entries that embed their own links. */
#include "idmap.h"

#include <assert.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static size_t hash_of(const struct tfs_id *id)
{
	uint64_t h;

	/* A SHA-256 digest: any 8 bytes are uniformly distributed. */
	memcpy(&h, id->b + 8, sizeof(h));
	return (size_t)h;
}

static struct tfs_idmap_node **bucket(const struct tfs_idmap *m, const struct tfs_id *id)
{
	return &m->table[hash_of(id) & (m->nbuckets - 1)];
}

int tfs_idmap_init(struct tfs_idmap *m, size_t nbuckets)
{
	assert(nbuckets && !(nbuckets & (nbuckets - 1)));
	m->table = calloc(nbuckets, sizeof(*m->table));
	m->nbuckets = m->table ? nbuckets : 0;
	m->n = 0;
	return m->table ? 0 : -ENOMEM;
}

void tfs_idmap_free(struct tfs_idmap *m)
{
	free(m->table);
	memset(m, 0, sizeof(*m));
}

struct tfs_idmap_node *tfs_idmap_find(const struct tfs_idmap *m, const struct tfs_id *id)
{
	struct tfs_idmap_node *e = *bucket(m, id);

	while (e && !tfs_id_eq(&e->id, id))
		e = e->next;
	return e;
}

static void grow(struct tfs_idmap *m)
{
	const size_t n = m->nbuckets * 2;
	struct tfs_idmap_node **t = calloc(n, sizeof(*t));

	if (!t)
		return; /* longer chains, still correct */
	for (size_t i = 0; i < m->nbuckets; i++) {
		struct tfs_idmap_node *e = m->table[i], *next;

		for (; e; e = next) {
			const size_t b = hash_of(&e->id) & (n - 1);

			next = e->next;
			e->next = t[b];
			t[b] = e;
		}
	}
	free(m->table);
	m->table = t;
	m->nbuckets = n;
}

void tfs_idmap_insert(struct tfs_idmap *m, struct tfs_idmap_node *e)
{
	struct tfs_idmap_node **b;

	assert(!tfs_idmap_find(m, &e->id));
	if (m->n >= m->nbuckets)
		grow(m);
	b = bucket(m, &e->id);
	e->next = *b;
	*b = e;
	m->n++;
}

void tfs_idmap_remove(struct tfs_idmap *m, struct tfs_idmap_node *e)
{
	struct tfs_idmap_node **pp = bucket(m, &e->id);

	while (*pp != e) {
		assert(*pp);
		pp = &(*pp)->next;
	}
	*pp = e->next;
	e->next = NULL;
	m->n--;
}

struct tfs_idmap_node *tfs_idmap_drain(struct tfs_idmap *m)
{
	struct tfs_idmap_node *all = NULL;

	for (size_t i = 0; i < m->nbuckets; i++) {
		struct tfs_idmap_node *e = m->table[i], *next;

		for (; e; e = next) {
			next = e->next;
			e->next = all;
			all = e;
		}
		m->table[i] = NULL;
	}
	m->n = 0;
	return all;
}

int tfs_idset_add(struct tfs_idset *set, const struct tfs_id *id)
{
	const size_t in = set->n % TFS_IDSET_BLOCK;
	struct tfs_idmap_node *node;

	/* The zero id is never the SHA-256 of anything stored: a caller's bug. */
	if (tfs_id_is_zero(id))
		return -EINVAL;
	if (!set->map.table && tfs_idmap_init(&set->map, 64))
		return -ENOMEM;
	if (tfs_idmap_find(&set->map, id))
		return 0;
	if (!in) {
		/* A new block, and room for its pointer (grown by doubling). */
		size_t nblocks = set->n / TFS_IDSET_BLOCK;

		if (!(nblocks & (nblocks - 1))) {
			struct tfs_idmap_node **b =
				realloc(set->blocks, (nblocks ? 2 * nblocks : 1) * sizeof(*b));

			if (!b)
				return -ENOMEM;
			set->blocks = b;
		}
		set->blocks[nblocks] = malloc(TFS_IDSET_BLOCK * sizeof(**set->blocks));
		if (!set->blocks[nblocks])
			return -ENOMEM;
	}
	node = &set->blocks[set->n / TFS_IDSET_BLOCK][in];
	node->id = *id;
	tfs_idmap_insert(&set->map, node);
	set->n++;
	return 1;
}

int tfs_idset_has(const struct tfs_idset *set, const struct tfs_id *id)
{
	return set->n && tfs_idmap_find(&set->map, id) != NULL;
}

const struct tfs_id *tfs_idset_at(const struct tfs_idset *set, size_t i)
{
	assert(i < set->n);
	return &set->blocks[i / TFS_IDSET_BLOCK][i % TFS_IDSET_BLOCK].id;
}

void tfs_idset_free(struct tfs_idset *set)
{
	for (size_t b = 0; b * TFS_IDSET_BLOCK < set->n; b++)
		free(set->blocks[b]);
	free(set->blocks);
	tfs_idmap_free(&set->map);
	memset(set, 0, sizeof(*set));
}
