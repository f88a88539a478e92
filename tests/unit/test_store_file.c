/* SPDX-License-Identifier: MIT */
/* The file backend's put_new in two steps: nothing at a key before its batch ends, every object
 * there (and no temporary left) after, an object already there refused at begin, two writers of
 * one key both fine, a put that cannot be made durable failing alone, and a batch's pages out
 * of the page cache once it has ended. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <cmocka.h>

#include "store.h"
#include "util.h"

#include "tmpdir_fixture.h"

static struct tfs_store *st;
static char root[128];

static int setup(void **state)
{
	char url[160];

	(void)state;
	if (tmpdir_make("store_file"))
		return -1;
	snprintf(root, sizeof(root), "%s/lake", tmpdir);
	snprintf(url, sizeof(url), "file://%s", root);
	return tfs_store_open(url, TFS_STORE_CREATE, &st);
}

static int teardown(void **state)
{
	(void)state;
	tfs_store_close(st);
	return tmpdir_remove();
}

/* Temporaries in root/dir: their count, and the name of the last one met. */
static int temps(const char *dir, char *name, size_t cap)
{
	char path[256];
	struct dirent *de;
	int n = 0;
	DIR *d;

	snprintf(path, sizeof(path), "%s/%s", root, dir);
	d = opendir(path);
	if (!d)
		return 0;
	while ((de = readdir(d)))
		if (!strncmp(de->d_name, ".tmp-", 5)) {
			n++;
			if (name)
				snprintf(name, cap, "%s/%s", path, de->d_name);
		}
	closedir(d);
	return n;
}

static void assert_holds(const char *key, const char *want)
{
	struct tfs_buf got = { 0 };

	assert_int_equal(tfs_store_get(st, key, &got), 0);
	assert_int_equal(got.len, strlen(want));
	assert_memory_equal(got.data, want, got.len);
	tfs_buf_free(&got);
}

static void test_batch_shows_nothing_until_it_ends(void **state)
{
	static const char *const keys[] = { "b/o/aa/1", "b/o/aa/2", "b/o/bb/1", "b/o/aa/3",
					    "b/o/cc/9" };
	struct tfs_store_put *puts[5];
	uint64_t size;

	(void)state;
	for (size_t i = 0; i < 5; i++) {
		assert_int_equal(
			tfs_store_put_new_begin(st, keys[i], keys[i], strlen(keys[i]), &puts[i]),
			0);
		assert_non_null(puts[i]);
		assert_int_equal(tfs_store_head(st, keys[i], &size), -ENOENT);
	}
	assert_int_equal(temps("b/o/aa", NULL, 0), 3);
	assert_int_equal(temps("b/o/bb", NULL, 0), 1);
	assert_int_equal(tfs_store_put_new_end(st, puts, 5), 0);
	for (size_t i = 0; i < 5; i++) {
		assert_null(puts[i]);
		assert_holds(keys[i], keys[i]);
	}
	assert_int_equal(
		temps("b/o/aa", NULL, 0) + temps("b/o/bb", NULL, 0) + temps("b/o/cc", NULL, 0), 0);
	/* There now: refused at begin, as put_new refuses it, with nothing begun. */
	assert_int_equal(tfs_store_put_new_begin(st, keys[0], "x", 1, &puts[0]), -EEXIST);
	assert_null(puts[0]);
	assert_holds(keys[0], keys[0]);
	assert_int_equal(tfs_store_put_new_end(st, puts, 1), 0);
}

static void test_two_writers_of_one_key(void **state)
{
	struct tfs_store_put *puts[2];

	(void)state;
	/* Content-addressed: the same bytes under one key, begun twice before either ends. */
	assert_int_equal(tfs_store_put_new_begin(st, "t/o/k", "same", 4, &puts[0]), 0);
	assert_int_equal(tfs_store_put_new_begin(st, "t/o/k", "same", 4, &puts[1]), 0);
	assert_int_equal(tfs_store_put_new_end(st, puts, 2), 0);
	assert_holds("t/o/k", "same");
	assert_int_equal(temps("t/o", NULL, 0), 0);
}

static void test_a_put_that_fails_fails_alone(void **state)
{
	struct tfs_store_put *puts[2];
	char tmp[512];
	uint64_t size;

	(void)state;
	assert_int_equal(tfs_store_put_new_begin(st, "f/o/good", "good", 4, &puts[0]), 0);
	assert_int_equal(tfs_store_put_new_begin(st, "f/p/lost", "lost", 4, &puts[1]), 0);
	/* The second's bytes vanish before they are durable. */
	assert_int_equal(temps("f/p", tmp, sizeof(tmp)), 1);
	assert_int_equal(unlink(tmp), 0);
	assert_int_equal(tfs_store_put_new_end(st, puts, 2), -ENOENT);
	assert_null(puts[0]);
	assert_null(puts[1]);
	assert_holds("f/o/good", "good");
	assert_int_equal(tfs_store_head(st, "f/p/lost", &size), -ENOENT);
	assert_true(log_contains("f/p/lost: cannot write object"));
	assert_int_equal(temps("f/o", NULL, 0) + temps("f/p", NULL, 0), 0);
}

/* Pages of root/key in the page cache. */
static size_t resident(const char *key)
{
	const long page = sysconf(_SC_PAGESIZE);
	size_t len, n = 0;
	unsigned char *vec;
	char path[256];
	struct stat sb;
	void *map;
	int fd;

	snprintf(path, sizeof(path), "%s/%s", root, key);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	assert_true(fd >= 0);
	assert_int_equal(fstat(fd, &sb), 0);
	len = (size_t)sb.st_size;
	map = mmap(NULL, len, PROT_READ, MAP_SHARED, fd, 0);
	assert_true(map != MAP_FAILED);
	vec = malloc((len + (size_t)page - 1) / (size_t)page);
	assert_non_null(vec);
	assert_int_equal(mincore(map, len, vec), 0);
	for (size_t i = 0; i < (len + (size_t)page - 1) / (size_t)page; i++)
		n += vec[i] & 1;
	free(vec);
	munmap(map, len);
	close(fd);
	return n;
}

static void test_a_batch_leaves_the_page_cache(void **state)
{
	enum { LEN = 1 << 20 };
	struct tfs_store_put *puts[1];
	struct tfs_buf got = { 0 };
	struct statfs fs;
	char *data = malloc(LEN);

	(void)state;
	assert_non_null(data);
	memset(data, 'p', LEN);
	/* tmpfs keeps its files in the page cache: there is nowhere else for them to be. */
	assert_int_equal(statfs(root, &fs), 0);
	if (fs.f_type == TMPFS_MAGIC) {
		free(data);
		skip();
	}
	assert_int_equal(tfs_store_put_new_begin(st, "c/a/big", data, LEN, &puts[0]), 0);
	assert_int_equal(tfs_store_put_new_end(st, puts, 1), 0);
	/* Advice, which the kernel takes for what it can drop at once: written through the page
	 * cache, all 256 pages would be there; a folio still referenced may stay a moment. */
	assert_true(resident("c/a/big") <= LEN / 4096 / 8);
	/* and the bytes are there, read back from the disk */
	assert_int_equal(tfs_store_put_new_begin(st, "c/a/big", data, LEN, &puts[0]), -EEXIST);
	assert_int_equal(tfs_store_get(st, "c/a/big", &got), 0);
	assert_int_equal(got.len, LEN);
	assert_memory_equal(got.data, data, LEN);
	tfs_buf_free(&got);
	free(data);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_batch_shows_nothing_until_it_ends),
		cmocka_unit_test(test_two_writers_of_one_key),
		cmocka_unit_test(test_a_put_that_fails_fails_alone),
		cmocka_unit_test(test_a_batch_leaves_the_page_cache),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
