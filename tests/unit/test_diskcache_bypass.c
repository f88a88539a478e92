/* SPDX-License-Identifier: MIT */
/* Unit tests for core/diskcache: what goes past the cache (keys it does not keep, a directory it
 * cannot use, a full disk) and files in its directory it did not write. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>

#include <cmocka.h>

#include "tmpdir_fixture.h"
#include "diskcache_fixture.h"

static char tmpfs_mnt[300]; /* non-empty while a test's tmpfs may be mounted */

static int count_entries(void *arg, const char *name, int is_dir)
{
	(void)name;
	(void)is_dir;
	(*(int *)arg)++;
	return 0;
}

/* --- tests ------------------------------------------------------------------------------------ */

static void test_other_keys_go_to_inner(void **state)
{
	struct lake l;
	struct obj o;
	struct tfs_store *s;
	struct tfs_buf b = { 0 };
	char bad_key[TFS_KEY_MAX + 8];
	uint64_t gets;
	size_t files;
	int n = 0;
	static const char head1[] =
		"1111111111111111111111111111111111111111111111111111111111111111\n";

	(void)state;
	make_lake("keys", &l);
	put_obj(&l, 5, 1000, &o);
	s = wrap(&l, 1 << 20);

	/* Markers and refs: every read is a request, and a ref change is seen at once. */
	for (int i = 1; i <= 3; i++) {
		assert_int_equal(tfs_store_get(s, "ds/tensorfs-dataset", &b), 0);
		assert_int_equal(tfs_store_get(s, "ds/refs/heads/main", &b), 0);
		assert_int_equal(inner_gets(s), 2 * (uint64_t)i);
	}
	assert_int_equal(tfs_store_put(s, "ds/refs/heads/main", head1, sizeof(head1) - 1), 0);
	assert_int_equal(tfs_store_get(s, "ds/refs/heads/main", &b), 0);
	assert_int_equal(b.len, sizeof(head1) - 1);
	assert_memory_equal(b.data, head1, b.len);

	/* Keys that only look like object keys. */
	gets = inner_gets(s);
	{
		const char *fmts[] = {
			"ds/objects/%.2s/%s/x", /* deeper */
			"ds/objects/%.2s%s",	/* no slash */
			"ds/object/%.2s/%s",	/* wrong directory */
			"/objects/%.2s/%s",	/* no dataset */
			".ds/objects/%.2s/%s",	/* invalid dataset name */
			"a/b/objects/%.2s/%s",	/* dataset with a slash */
		};

		for (size_t i = 0; i < sizeof(fmts) / sizeof(fmts[0]); i++) {
			snprintf(bad_key, sizeof(bad_key), fmts[i], o.hex, o.hex + 2);
			assert_true(tfs_store_get(s, bad_key, &b) < 0);
		}
		/* Upper-case hex and a short id. */
		snprintf(bad_key, sizeof(bad_key), "%s", o.key);
		for (char *p = bad_key + strlen("ds/objects/"); *p; p++)
			if (*p >= 'a' && *p <= 'f')
				*p = (char)(*p - 'a' + 'A');
		assert_true(tfs_store_get(s, bad_key, &b) < 0);
		snprintf(bad_key, sizeof(bad_key), "%s", o.key);
		bad_key[strlen(bad_key) - 1] = 0;
		assert_true(tfs_store_get(s, bad_key, &b) < 0);
		assert_int_equal(inner_gets(s), gets + sizeof(fmts) / sizeof(fmts[0]) + 2);
		/* Asked for as objects, they are refused without a request. */
		assert_int_equal(tfs_store_get_object(s, bad_key, 0, &b), -EINVAL);
		assert_int_equal(inner_gets(s), gets + sizeof(fmts) / sizeof(fmts[0]) + 2);
	}
	dir_bytes(l.cache, &files);
	assert_int_equal(files, 0);
	assert_int_equal(stats_of(s).misses, 0);

	/* Everything else is forwarded too. */
	{
		struct tfs_store_counters c;
		uint8_t part[16];
		uint64_t size;

		assert_int_equal(tfs_store_get_range(s, o.key, 48, part, sizeof(part)), 16);
		assert_memory_equal(part, o.bytes.data + 48, sizeof(part));
		assert_int_equal(tfs_store_head(s, o.key, &size), 0);
		assert_int_equal(size, o.bytes.len);
		snprintf(bad_key, sizeof(bad_key), "ds/objects/%.2s", o.hex);
		assert_int_equal(tfs_store_list(s, bad_key, count_entries, &n), 0);
		assert_true(n >= 1);
		assert_int_equal(tfs_store_put_new(s, "ds/extra", "x", 1), 0);
		assert_int_equal(tfs_store_put_new(s, "ds/extra", "x", 1), -EEXIST);
		assert_int_equal(tfs_store_del(s, "ds/extra"), 0);
		assert_int_equal(tfs_store_del(s, "ds/extra"), -ENOENT);
		tfs_store_counters(tfs_diskcache_inner(s), &c);
		assert_int_equal(c.ranged_gets, 1);
		assert_int_equal(c.heads, 1);
		assert_int_equal(c.lists, 1);
		assert_int_equal(c.deletes, 2);
	}
	assert_false(is_cached(&l, &o));
	tfs_buf_free(&b);
	tfs_store_close(s);
	free_objs(&o, 1);
}

static void test_not_a_wrapper(void **state)
{
	struct lake l;
	struct tfs_store *s;
	struct tfs_diskcache_stats st;

	(void)state;
	make_lake("plain", &l);
	assert_int_equal(tfs_store_open(l.url, 0, &s), 0);
	assert_int_equal(tfs_diskcache_stats(s, &st), -EINVAL);
	assert_ptr_equal(tfs_diskcache_inner(s), s);
	assert_int_equal(tfs_diskcache_wrap(NULL, l.cache, 1, &s), -EINVAL);
	tfs_store_close(s);
}

static void test_unusable_dir_bypasses(void **state)
{
	struct lake l;
	struct obj o[3];
	struct tfs_store *s;
	struct tfs_diskcache_stats st;
	char file[512], dir[600];
	int fd;

	(void)state;
	make_lake("unusable", &l);
	put_objs(&l, o, 3, 2000, 60);
	snprintf(file, sizeof(file), "%s/a-regular-file", tmpdir);
	fd = open(file, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	assert_true(fd >= 0);
	close(fd);
	snprintf(dir, sizeof(dir), "%s/cache", file);

	s = wrap_dir(&l, dir, 1 << 20);
	for (int round = 1; round <= 2; round++)
		for (int i = 0; i < 3; i++)
			assert_get(s, &o[i]);
	st = stats_of(s);
	assert_int_equal(st.misses, 6);
	assert_int_equal(st.bypassed, 6);
	assert_int_equal(st.fills, 0);
	assert_int_equal(st.hits, 0);
	assert_int_equal(inner_gets(s), 6);
	tfs_store_close(s);
	free_objs(o, 3);
}

static void test_disk_full_bypasses(void **state)
{
	struct lake l;
	struct obj o[6];
	struct tfs_store *s;
	struct tfs_diskcache_stats st;
	size_t files;

	(void)state;
	make_lake("full", &l);
	put_objs(&l, o, 6, 20 * 1024, 70);
	assert_int_equal(mkdir(l.cache, 0700), 0);
	if (mount("tmpfs", l.cache, "tmpfs", 0, "size=64k") < 0) {
		print_message("cannot mount a tmpfs (%s): disk-full test skipped\n",
			      strerror(errno));
		free_objs(o, 6);
		skip();
	}
	snprintf(tmpfs_mnt, sizeof(tmpfs_mnt), "%s", l.cache);

	/* A budget far above what the filesystem holds: fills hit ENOSPC. */
	s = wrap(&l, 1 << 24);
	for (int round = 0; round < 2; round++)
		for (int i = 0; i < 6; i++)
			assert_get(s, &o[i]);
	st = stats_of(s);
	assert_true(st.fills >= 1);
	assert_true(st.bypassed >= 1);
	assert_int_equal(st.hits + st.misses, 12);
	assert_int_equal(st.misses, inner_gets(s));
	/* No temporary file is left behind, and what is there is exactly what is counted. */
	assert_int_equal(dir_bytes(l.cache, &files), st.bytes_used);
	assert_int_equal(files, st.fills);
	tfs_store_close(s);

	assert_int_equal(umount2(l.cache, MNT_DETACH), 0);
	tmpfs_mnt[0] = 0;
	free_objs(o, 6);
}

static void test_leftovers_and_foreign_files(void **state)
{
	struct lake l;
	struct obj o;
	struct tfs_store *s;
	char f[512];
	struct stat sb;
	int fd;

	(void)state;
	make_lake("leftovers", &l);
	put_obj(&l, 8, 1000, &o);
	assert_int_equal(mkdir(l.cache, 0700), 0);
	/* A crashed writer's old temporary, a fresh one (maybe another process's) and a stranger.
	 */
	static const char *names[] = { ".tmp-1-1", ".tmp-2-2", "README" };
	for (int i = 0; i < 3; i++) {
		snprintf(f, sizeof(f), "%s/%s", l.cache, names[i]);
		fd = open(f, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
		assert_true(fd >= 0);
		assert_int_equal(tfs_write_full(fd, "0123456789", 10), 0);
		close(fd);
	}
	snprintf(f, sizeof(f), "%s/%s", l.cache, names[0]);
	set_mtime(f, 1000);

	s = wrap(&l, 1 << 20);
	assert_int_equal(stat(f, &sb), -1);
	snprintf(f, sizeof(f), "%s/%s", l.cache, names[1]);
	assert_int_equal(stat(f, &sb), 0);
	snprintf(f, sizeof(f), "%s/%s", l.cache, names[2]);
	assert_int_equal(stat(f, &sb), 0);
	assert_int_equal(stats_of(s).bytes_used, 0);
	assert_get(s, &o);
	assert_get(s, &o);
	assert_int_equal(inner_gets(s), 1);
	tfs_store_close(s);
	free_objs(&o, 1);
}

/* --- main ------------------------------------------------------------------------------------- */

static int group_setup(void **state)
{
	(void)state;
	return tmpdir_make("diskcache_bypass");
}

static int group_teardown(void **state)
{
	(void)state;
	if (tmpfs_mnt[0])
		umount2(tmpfs_mnt, MNT_DETACH);
	return tmpdir_remove();
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_other_keys_go_to_inner),
		cmocka_unit_test(test_not_a_wrapper),
		cmocka_unit_test(test_unusable_dir_bypasses),
		cmocka_unit_test(test_disk_full_bypasses),
		cmocka_unit_test(test_leftovers_and_foreign_files),
	};

	if (getenv("TFS_TEST_FILTER"))
		cmocka_set_test_filter(getenv("TFS_TEST_FILTER"));
	return cmocka_run_group_tests_name("diskcache_bypass", tests, group_setup, group_teardown);
}
