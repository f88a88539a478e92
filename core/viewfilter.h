/* SPDX-License-Identifier: MIT */
/* viewfilter: the rows of a version that a view's where= expression keeps. */
#ifndef TFS_VIEWFILTER_H
#define TFS_VIEWFILTER_H

#include <stddef.h>
#include <stdint.h>

#include "cache.h"
#include "version.h"

/* Rows of v for which the expression `where` (decoded) holds, ascending, into *rows (malloc'd,
 * *n of them). -EINVAL with the reason in err for an expression that does not parse or names a
 * column that is not a real scalar per row; -EIO when a column cannot be read. */
int tfs_view_filter_rows(struct tfs_version *v, struct tfs_cache *cache, const char *where,
			 uint64_t **rows, uint64_t *n, char *err, size_t err_cap);

#endif
