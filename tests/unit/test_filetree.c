/* SPDX-License-Identifier: MIT */
/* Unit tests for core/filetree.c: a tree's files in the order torchvision's make_dataset visits
 * them (directories sorted by path, so "a-c" before "a/sub"; files sorted within each), hidden
 * names and unwanted files left out, class directories numbered in sorted order with only
 * their files counted, and a tree that is not there an error. */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "filetree.h"
#include "tmpdir_fixture.h"

static char top[128];

static void touch(const char *rel)
{
	char path[256];
	int fd;

	snprintf(path, sizeof(path), "%s/%s", top, rel);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, "x", 1), 1);
	close(fd);
}

static void dir(const char *rel)
{
	char path[256];

	snprintf(path, sizeof(path), "%s/%s", top, rel);
	assert_int_equal(mkdir(path, 0755), 0);
}

static int setup(void **state)
{
	(void)state;
	if (tmpdir_make("filetree"))
		return -1;
	snprintf(top, sizeof(top), "%s/tree", tmpdir);
	return mkdir(top, 0755);
}

static int teardown(void **state)
{
	(void)state;
	return tmpdir_remove();
}

static int jpg(const char *name, const void *arg)
{
	const char *dot = strrchr(name, '.');

	(void)arg;
	return dot && !strcmp(dot, ".jpg");
}

/* The tree: b/ after a-c/ after a/ (and a/sub/ after a-c/, as '/' sorts after '-'), files
 * written out of order, a hidden directory and file, a file of another kind, a file on top. */
static void make_tree(void)
{
	dir("b");
	dir("a");
	dir("a/sub");
	dir("a-c");
	dir(".hidden");
	touch("b/x.jpg");
	touch("a/z.jpg");
	touch("a/m.jpg");
	touch("a/sub/y.jpg");
	touch("a-c/w.jpg");
	touch(".hidden/q.jpg");
	touch("a/.h.jpg");
	touch("a/n.txt");
	touch("top.jpg");
}

static void test_files_in_make_dataset_order(void **state)
{
	static const char *const want[] = { "top.jpg", "a/m.jpg", "a/z.jpg", "a-c/w.jpg",
					    "a/sub/y.jpg", "b/x.jpg" };
	struct tfs_filetree t;

	(void)state;
	make_tree();
	assert_int_equal(tfs_filetree_list(top, 0, jpg, NULL, &t), 0);
	assert_int_equal(t.n, sizeof(want) / sizeof(want[0]));
	for (size_t i = 0; i < t.n; i++) {
		assert_string_equal(t.f[i].rel, want[i]);
		assert_int_equal(t.f[i].label, 0);
	}
	assert_int_equal(t.nclasses, 0);
	tfs_filetree_free(&t);
}

static void test_classes_numbered_in_sorted_order(void **state)
{
	static const char *const want[] = { "a/m.jpg", "a/z.jpg", "a/sub/y.jpg", "a-c/w.jpg",
					    "b/x.jpg" };
	static const int64_t label[] = { 0, 0, 0, 1, 2 };
	struct tfs_filetree t;

	(void)state;
	assert_int_equal(tfs_filetree_list(top, 1, jpg, NULL, &t), 0);
	assert_int_equal(t.nclasses, 3);
	assert_string_equal(t.classes[0], "a");
	assert_string_equal(t.classes[1], "a-c");
	assert_string_equal(t.classes[2], "b");
	assert_int_equal(t.n, sizeof(want) / sizeof(want[0]));
	for (size_t i = 0; i < t.n; i++) {
		assert_string_equal(t.f[i].rel, want[i]);
		assert_int_equal(t.f[i].label, label[i]);
	}
	tfs_filetree_free(&t);
}

static void test_missing_tree_is_an_error(void **state)
{
	char path[256];
	struct tfs_filetree t;

	(void)state;
	snprintf(path, sizeof(path), "%s/none", tmpdir);
	assert_true(tfs_filetree_list(path, 0, jpg, NULL, &t) < 0);
	tfs_filetree_free(&t);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_files_in_make_dataset_order),
		cmocka_unit_test(test_classes_numbered_in_sorted_order),
		cmocka_unit_test(test_missing_tree_is_an_error),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
