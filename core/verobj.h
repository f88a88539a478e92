/* SPDX-License-Identifier: MIT */
/* verobj: named, versioned text objects in a lake, the way mixtures (.mixes/NAME) and saved
 * queries (DATASET/queries/NAME) are kept: each version stored once under PREFIX/versions/<id>,
 * id the SHA-256 of its bytes (checked when read), and PREFIX/HEAD naming the newest, moved by
 * compare-and-swap as a branch is. */
#ifndef TFS_VEROBJ_H
#define TFS_VEROBJ_H

#include <stddef.h>

#include "object.h"
#include "store.h"

/* The newest version's id: -ENOENT when the name has none, -EIO when HEAD is damaged. */
int tfs_verobj_head(struct tfs_store *s, const char *prefix, struct tfs_id *id);
/* Version id's bytes, checked against it (-EIO, logged, when they do not hash to it). */
int tfs_verobj_load(struct tfs_store *s, const char *prefix, const struct tfs_id *id,
		    struct tfs_buf *out);
/* Store text as a version (*id set) and move HEAD to it from old (NULL: HEAD must not exist
 * yet). -EAGAIN when HEAD is not old any more (nothing named; the version stays unnamed). */
int tfs_verobj_put(struct tfs_store *s, const char *prefix, const void *text, size_t len,
		   const struct tfs_id *old, struct tfs_id *id);
/* Drop the name (HEAD); the versions stay. */
int tfs_verobj_remove(struct tfs_store *s, const char *prefix);
/* The names under dir (dir/NAME/HEAD exists), each to fn (is_dir 1). */
int tfs_verobj_list(struct tfs_store *s, const char *dir, tfs_store_list_fn fn, void *arg);
/* Whether dir holds a name. */
int tfs_verobj_any(struct tfs_store *s, const char *dir);

#endif
