/* SPDX-License-Identifier: MIT */
/* dtype_fixture: a dtype parsed from numpy's type string, for programs that include cmocka.h
 * first; a string the parser refuses fails the test. */
#ifndef TFS_DTYPE_FIXTURE_H
#define TFS_DTYPE_FIXTURE_H

#include "npy.h"

static inline struct tfs_dtype dtype_of(const char *descr)
{
	struct tfs_dtype dt;
	int big;
	char err[128];

	assert_int_equal(tfs_dtype_parse(descr, &dt, &big, err, sizeof(err)), 0);
	return dt;
}

#endif
