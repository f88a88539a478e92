/* SPDX-License-Identifier: MIT */
/* refspec: a version as a user names one on the command line. A base, then any number of
 * suffixes, as git reads them:
 *
 *   base     a branch, a tag, a commit id, or the first 4 to 63 hex digits of one commit's id
 *            (a prefix two commits share is refused, naming how many do)
 *   ~N       the N-th first-parent ancestor (~ alone: ~1)
 *   ^        the first parent (^^ is ~2)
 *
 * e.g. main~2, v1^, 3fa9c2e1~1. Branch and tag names cannot hold '~' or '^', so the base ends at
 * the first of them. The mount's directories take names as tfs_ref_resolve does (branches, tags,
 * full commit ids): one name a version, never an abbreviation that a later commit could make
 * ambiguous. */
#ifndef TFS_REFSPEC_H
#define TFS_REFSPEC_H

#include <stddef.h>

#include "format.h"

/* Resolve spec in dataset ds into *id. 0; -ENOENT with the reason in err when nothing is so
 * named (no such ref or commit, the id of an object that is no commit, an ancestor past the
 * first commit, a malformed suffix);
 * -EINVAL with the reason in err for an ambiguous prefix; another -errno when the store fails. */
int tfs_refspec_resolve(struct tfs_store *s, const char *ds, const char *spec, struct tfs_id *id,
			char *err, size_t err_cap);

#endif
