/* SPDX-License-Identifier: MIT */
/* filetree: the files of a tree of directories (a local directory, or a prefix under an s3:// or
 * http(s):// URL, listed through source.h's tree store) that an importer takes, in the order
 * torchvision's make_dataset visits them: directories in sorted order of their paths (os.walk,
 * sorted), the files of each sorted by name. With classes, the tree's top directories are the
 * classes, sorted, class i labelled i (DatasetFolder), and only the files under them count.
 * Names starting with '.' are left out. */
#ifndef TFS_FILETREE_H
#define TFS_FILETREE_H

#include <stddef.h>
#include <stdint.h>

#include "store.h"

struct tfs_filetree_file {
	char *rel;     /* the path under the tree's top */
	int64_t label; /* with classes; else 0 */
};

struct tfs_filetree {
	struct tfs_store *tree; /* the tree, which reads a file by its rel (tfs_store_get) */
	struct tfs_filetree_file *f;
	size_t n;
	char **classes; /* with classes: their names, by label */
	size_t nclasses;
};

/* List top's files whose names want(name, arg) takes, into out (free it with tfs_filetree_free
 * whatever this returns). A listing that fails is logged, naming the directory. */
int tfs_filetree_list(const char *top, int classes, int (*want)(const char *name, const void *arg),
		      const void *arg, struct tfs_filetree *out);
void tfs_filetree_free(struct tfs_filetree *t);
/* Put the files in a random order fixed by seed (tfs_rng_shuffle of their sorted order, epoch 0):
 * the same tree and seed give the same order on every machine. 0, or -ENOMEM (order unchanged). */
int tfs_filetree_shuffle(struct tfs_filetree *t, uint64_t seed);

#endif
