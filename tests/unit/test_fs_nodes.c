/* SPDX-License-Identifier: MIT */
/* Unit tests of fs/nodetable's forget path: a node lives while the kernel knows it, a child of
 * it lives, or a caller holds it, and is freed (its parents after it) once none does; inode
 * numbers are never reused; a file node lets go of its commit when forgotten. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "fsnode.h"

static void counts(struct tfs_fs *fs, uint64_t alive, uint64_t made, uint64_t freed)
{
	uint64_t a, m, f;

	tfs_fs_node_counts(fs, &a, &m, &f);
	assert_int_equal(a, alive);
	assert_int_equal(m, made);
	assert_int_equal(f, freed);
}

static void test_forget_path(void **state)
{
	struct tfs_fs fs;
	struct tfs_fs_node *ds, *ref, *views, *v, *again;
	fuse_ino_t ino_ref, ino_v;

	(void)state;
	memset(&fs, 0, sizeof(fs));
	pthread_mutex_init(&fs.lock, NULL);
	assert_int_equal(tfs_fs_nodes_init(&fs), 0);
	counts(&fs, 1, 0, 0);
	assert_ptr_equal(tfs_fs_node_get(&fs, FUSE_ROOT_ID), fs.root);
	/* lookups of DATASET, DATASET/main, main/views, views/seed=1 */
	ds = tfs_fs_node_child(&fs, fs.root, "d", &tfs_fs_dataset_kind, NULL);
	tfs_fs_node_looked_up(&fs, ds);
	ref = tfs_fs_node_child(&fs, ds, "main", &tfs_fs_version_kind, NULL);
	tfs_fs_node_looked_up(&fs, ref);
	ino_ref = ref->ino;
	views = tfs_fs_node_child(&fs, ref, "views", &tfs_fs_views_kind, NULL);
	tfs_fs_node_looked_up(&fs, views);
	v = tfs_fs_node_child(&fs, views, "seed=1", &tfs_fs_view_kind, NULL);
	tfs_fs_node_looked_up(&fs, v);
	ino_v = v->ino;
	counts(&fs, 5, 4, 0);
	assert_ptr_equal(tfs_fs_node_get(&fs, ino_v), v);
	/* The same name again is the same node; a second lookup is a second reference. */
	again = tfs_fs_node_child(&fs, views, "seed=1", &tfs_fs_view_kind, NULL);
	assert_ptr_equal(again, v);
	tfs_fs_node_looked_up(&fs, again);
	/* The kernel forgets main: it stays while its child views lives. */
	tfs_fs_node_forget(&fs, ino_ref, 1);
	counts(&fs, 5, 4, 0);
	/* seed=1 forgotten once of twice: stays; then for good: it goes, and views (known to the
	 * kernel) stays. */
	tfs_fs_node_forget(&fs, ino_v, 1);
	counts(&fs, 5, 4, 0);
	tfs_fs_node_forget(&fs, ino_v, 1);
	counts(&fs, 4, 4, 1);
	assert_null(tfs_fs_node_get(&fs, ino_v));
	/* A listing's child lives only while held. */
	v = tfs_fs_node_child(&fs, views, "seed=2", &tfs_fs_view_kind, NULL);
	counts(&fs, 5, 5, 1);
	tfs_fs_node_put(&fs, v);
	counts(&fs, 4, 5, 2);
	/* Forgetting views frees it and main (whose kernel count is 0), not the dataset. */
	tfs_fs_node_forget(&fs, views->ino, 1);
	counts(&fs, 2, 5, 4);
	assert_null(tfs_fs_node_get(&fs, ino_ref));
	/* Made again: a new inode number. */
	ref = tfs_fs_node_child(&fs, ds, "main", &tfs_fs_version_kind, NULL);
	assert_true(ref->ino > ino_v);
	tfs_fs_node_looked_up(&fs, ref);
	/* Forgetting an unknown inode, or the root, changes nothing. */
	tfs_fs_node_forget(&fs, 999999, 5);
	tfs_fs_node_forget(&fs, FUSE_ROOT_ID, 5);
	counts(&fs, 3, 6, 4);
	/* Many names through one directory: each freed when forgotten; the tables stay sound as
	 * they grow. */
	for (int i = 0; i < 20000; i++) {
		char name[32];
		struct tfs_fs_node *n;

		snprintf(name, sizeof(name), "seed=%d", i);
		n = tfs_fs_node_child(&fs, ref, name, &tfs_fs_view_kind, NULL);
		assert_non_null(n);
		tfs_fs_node_looked_up(&fs, n);
		if (i % 2)
			tfs_fs_node_forget(&fs, n->ino, 1);
	}
	counts(&fs, 3 + 10000, 6 + 20000, 4 + 10000);
	tfs_fs_nodes_free(&fs);
	pthread_mutex_destroy(&fs.lock);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_forget_path),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
