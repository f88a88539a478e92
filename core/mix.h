/* SPDX-License-Identifier: MIT */
/* mix: weighted mixtures of token columns, recorded in the lake as versioned objects.
 *
 * A mixture names sources (a dataset's token column at one commit, with a weight) and a seed.
 * Each version is an immutable text object, stored under the SHA-256 of its bytes at
 * .mixes/NAME/versions/<id>, naming the version before it; .mixes/NAME/HEAD names the newest
 * and moves by compare-and-swap, as a branch does. The text:
 *
 *   tensorfs-mix 1
 *   name NAME
 *   parent <id or ->
 *   time <unix seconds>
 *   seed <N>
 *   source <dataset> <commit id> <column or -> <weight>     one line a source, in order
 *   end
 *
 * Weights are positive decimal numbers kept as written; readers normalise them to sum to 1. */
#ifndef TFS_MIX_H
#define TFS_MIX_H

#include <stddef.h>
#include <stdint.h>

#include "object.h"
#include "store.h"

#define TFS_MIX_MAX_SOURCES 255 /* a source number fits source.npy's uint8 */

struct tfs_mix_source {
	char *dataset;
	struct tfs_id commit;
	char *column; /* NULL: the dataset's only token column */
	char *weight; /* as written */
	double w;     /* its value */
};

struct tfs_mix {
	struct tfs_id id; /* this version's */
	char *name;
	int has_parent;
	struct tfs_id parent;
	uint64_t time, seed;
	size_t n;
	struct tfs_mix_source *src;
};

/* A source's weight as written, *w its value: a positive decimal number, at most 1e300 (no
 * infinity, no NaN, no hexadecimal); -EINVAL otherwise. */
int tfs_mix_weight(const char *s, double *w);
/* Parse text (len bytes) into m; -EIO with a message logged (naming what) for anything else. */
int tfs_mix_parse(const char *text, size_t len, const char *what, struct tfs_mix *m);
/* m's text (id, time and parent as they are). */
int tfs_mix_text(const struct tfs_mix *m, struct tfs_buf *out);
void tfs_mix_free(struct tfs_mix *m);

/* The newest version of mixture name: -ENOENT when there is none. */
int tfs_mix_head(struct tfs_store *s, const char *name, struct tfs_mix *out);
/* Version id of mixture name. */
int tfs_mix_load(struct tfs_store *s, const char *name, const struct tfs_id *id,
		 struct tfs_mix *out);
/* Write m (name, seed, sources) as the mixture's new version on top of its head (m->parent
 * is set here): -EEXIST when create and the mixture exists, -ENOENT when not create and it
 * does not, -EAGAIN when another writer moved it meanwhile. m->id is set. */
int tfs_mix_commit(struct tfs_store *s, struct tfs_mix *m, int create);
/* The mixtures of the lake, by name (fn's is_dir 1); whether it has any. */
int tfs_mix_list(struct tfs_store *s, tfs_store_list_fn fn, void *arg);
int tfs_mix_any(struct tfs_store *s);

#endif
