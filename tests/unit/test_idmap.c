/* SPDX-License-Identifier: MIT */
/* Unit tests for core/idmap.c: find, insert, remove and drain across growth; the id set. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "idmap.h"

struct item {
	int value;
	struct tfs_idmap_node node; /* not first: tfs_idmap_entry must do the offset */
};

/* Ids that differ in the hashed bytes, and some only outside them (chains). */
static struct tfs_id id_of(unsigned i)
{
	struct tfs_id id;

	memset(&id, 0, sizeof(id));
	memcpy(id.b + (i % 3 == 0 ? 24 : 8), &i, sizeof(i));
	return id;
}

static void test_insert_find_remove_drain(void **state)
{
	enum { N = 5000 };
	struct item *items = calloc(N, sizeof(*items));
	struct tfs_idmap m;
	struct tfs_idmap_node *n;
	size_t drained = 0;

	(void)state;
	assert_non_null(items);
	assert_int_equal(tfs_idmap_init(&m, 4), 0);
	for (unsigned i = 0; i < N; i++) {
		items[i].value = (int)i;
		items[i].node.id = id_of(i);
		tfs_idmap_insert(&m, &items[i].node);
	}
	assert_int_equal(m.n, N);
	assert_true(m.nbuckets >= N / 2); /* it grew */
	for (unsigned i = 0; i < N; i++) {
		struct tfs_id id = id_of(i);

		n = tfs_idmap_find(&m, &id);
		assert_non_null(n);
		assert_int_equal(tfs_idmap_entry(n, struct item, node)->value, (int)i);
	}
	for (unsigned i = 0; i < N; i += 2)
		tfs_idmap_remove(&m, &items[i].node);
	assert_int_equal(m.n, N / 2);
	for (unsigned i = 0; i < N; i++) {
		struct tfs_id id = id_of(i);

		assert_true((tfs_idmap_find(&m, &id) != NULL) == (i % 2 == 1));
	}
	for (n = tfs_idmap_drain(&m); n; n = n->next) {
		assert_int_equal(tfs_idmap_entry(n, struct item, node)->value % 2, 1);
		drained++;
	}
	assert_int_equal(drained, N / 2);
	assert_int_equal(m.n, 0);
	tfs_idmap_free(&m);
	free(items);
}

/* A set across several blocks: each id once, in the order added; the zero id is refused. */
static void test_idset(void **state)
{
	enum { N = 3 * TFS_IDSET_BLOCK + 7 };
	struct tfs_idset set = { 0 };
	struct tfs_id zero;

	(void)state;
	memset(&zero, 0, sizeof(zero));
	assert_false(tfs_idset_has(&set, &zero));
	for (unsigned i = 1; i <= N; i++) {
		struct tfs_id id = id_of(i);

		assert_int_equal(tfs_idset_add(&set, &id), 1);
		assert_int_equal(tfs_idset_add(&set, &id), 0);
	}
	assert_int_equal(set.n, N);
	for (unsigned i = 1; i <= N; i++) {
		struct tfs_id id = id_of(i);

		assert_true(tfs_idset_has(&set, &id));
		assert_true(tfs_id_eq(tfs_idset_at(&set, i - 1), &id));
	}
	{
		struct tfs_id absent = id_of(N + 1);

		assert_false(tfs_idset_has(&set, &absent));
	}
	assert_int_equal(tfs_idset_add(&set, &zero), -EINVAL);
	tfs_idset_free(&set);
	assert_int_equal(set.n, 0);
	tfs_idset_free(&set); /* freeing twice is harmless */
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_insert_find_remove_drain),
		cmocka_unit_test(test_idset),
	};

	return cmocka_run_group_tests_name("idmap", tests, NULL, NULL);
}
