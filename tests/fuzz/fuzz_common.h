/* SPDX-License-Identifier: MIT */
/* fuzz_common: shared by the fuzz targets: an invariant check NDEBUG leaves on, ASan defaults. */
#ifndef TFS_FUZZ_COMMON_H
#define TFS_FUZZ_COMMON_H

#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

/* An invariant the code under test promises: a violation is a finding, reported like a crash. */
#define FUZZ_CHECK(cond)                                                                       \
	do {                                                                                   \
		if (!(cond)) {                                                                 \
			fprintf(stderr, "%s:%d: invariant violated: %s\n", __FILE__, __LINE__, \
				#cond);                                                        \
			abort();                                                               \
		}                                                                              \
	} while (0)

/* Allocations above 256 MiB fail (NULL) instead of ending the run: parsers that allocate what
 * their input claims must cope with that, and libFuzzer's malloc limit (the RSS limit, 2 GiB)
 * would report them as out-of-memory crashes. ASAN_OPTIONS set at run time still win. */
const char *__asan_default_options(void);
const char *__asan_default_options(void)
{
	return "allocator_may_return_null=1:max_allocation_size_mb=256";
}

static int fuzz_rm_one(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
	(void)sb;
	(void)flag;
	(void)ftw;
	return remove(path);
}

/* rm -rf path: the scratch lakes targets build. */
static inline void fuzz_rm_tree(const char *path)
{
	nftw(path, fuzz_rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

#endif
