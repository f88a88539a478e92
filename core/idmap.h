/* SPDX-License-Identifier: MIT */
/* idmap: a hash table of entries keyed by object id, shared by the chunk cache and the disk
 * cache. Intrusive: an entry embeds a struct tfs_idmap_node, and the table never allocates or
 * frees entries. Ids are SHA-256 digests, so any of their bytes hash well. Not thread-safe:
 * its owner locks around it. */
#ifndef TFS_IDMAP_H
#define TFS_IDMAP_H

#include <stddef.h>

#include "object.h"

struct tfs_idmap_node {
	struct tfs_idmap_node *next; /* the bucket's chain; the owner's to use once removed */
	struct tfs_id id;
};

struct tfs_idmap {
	struct tfs_idmap_node **table;
	size_t nbuckets; /* a power of two */
	size_t n;	 /* entries */
};

/* The entry a node is embedded in. */
#define tfs_idmap_entry(node, type, member) ((type *)((char *)(node)-offsetof(type, member)))

/* nbuckets: the initial size, a power of two. Returns 0 or -ENOMEM. */
int tfs_idmap_init(struct tfs_idmap *m, size_t nbuckets);
/* Frees the table, not the entries. */
void tfs_idmap_free(struct tfs_idmap *m);

struct tfs_idmap_node *tfs_idmap_find(const struct tfs_idmap *m, const struct tfs_id *id);
/* Add e (its id set, not in the map yet). The table doubles once it holds as many entries as
 * buckets; when that allocation fails the chains grow longer instead. */
void tfs_idmap_insert(struct tfs_idmap *m, struct tfs_idmap_node *e);
/* Take e (in the map) out; e->next is then the caller's. */
void tfs_idmap_remove(struct tfs_idmap *m, struct tfs_idmap_node *e);

/* Take every entry out, as a list through next (for freeing them). */
struct tfs_idmap_node *tfs_idmap_drain(struct tfs_idmap *m);

/* A set of ids (the commits a walk has seen, the objects gc keeps), on an idmap whose nodes it
 * allocates in blocks that never move. Zero-initialise; tfs_idset_free when done. */
struct tfs_idset {
	struct tfs_idmap map;		/* empty until the first add */
	struct tfs_idmap_node **blocks; /* the n ids in the order added, TFS_IDSET_BLOCK a block */
	size_t n;
};
#define TFS_IDSET_BLOCK 512

/* Returns 1 if added, 0 if it was there, -ENOMEM. */
int tfs_idset_add(struct tfs_idset *set, const struct tfs_id *id);
int tfs_idset_has(const struct tfs_idset *set, const struct tfs_id *id);
/* The i-th id added, i < set->n. */
const struct tfs_id *tfs_idset_at(const struct tfs_idset *set, size_t i);
void tfs_idset_free(struct tfs_idset *set);

#endif
