/* SPDX-License-Identifier: MIT */
/* guard_fixture: a copy of test input that ends where an inaccessible page begins, for tests of
 * parsers that must not read past their input. For programs that include cmocka.h first. */
#ifndef TFS_GUARD_FIXTURE_H
#define TFS_GUARD_FIXTURE_H

#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* A copy of n bytes that ends exactly where an inaccessible page begins: a read past the end
 * faults at once, with or without ASan (cmocka reports the fault as a failed test). */
struct guarded {
	void *map;
	size_t map_len;
	uint8_t *p;
};

static inline struct guarded guarded_copy(const void *data, size_t n)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	size_t pages = (n + page - 1) / page + 1;
	struct guarded g;

	g.map_len = pages * page;
	g.map = mmap(NULL, g.map_len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	assert_true(g.map != MAP_FAILED);
	assert_int_equal(mprotect((uint8_t *)g.map + (pages - 1) * page, page, PROT_NONE), 0);
	g.p = (uint8_t *)g.map + (pages - 1) * page - n;
	if (n)
		memcpy(g.p, data, n);
	return g;
}

static inline void guarded_free(struct guarded *g)
{
	munmap(g->map, g->map_len);
}

#endif
