/* SPDX-License-Identifier: MIT */
/* Unit tests for core/format over a real file:// lake: datasets, refs, objects and commits. */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "format.h"
#include "store.h"
#include "util.h"
/* The group's scratch directory (tmpdir); each test opens its own lake below it. */
#include "tmpdir_fixture.h"
#include "manifest_fixture.h"

/* --- helpers -------------------------------------------------------------------------------- */

static void open_lake(const char *name, struct tfs_store **s, char *path, size_t cap)
{
	char url[256];

	snprintf(path, cap, "%s/%s", tmpdir, name);
	snprintf(url, sizeof(url), "file://%s", path);
	assert_int_equal(tfs_store_open(url, TFS_STORE_CREATE, s), 0);
	assert_non_null(*s);
}

/* --- a real file:// lake -------------------------------------------------------------------- */

static void test_dataset_create_and_check(void **state)
{
	struct tfs_store *s;
	char path[256];
	struct tfs_id head;
	struct tfs_commit c;
	struct tfs_manifest m;

	(void)state;
	open_lake("create", &s, path, sizeof(path));
	assert_int_equal(tfs_dataset_check(s, "ds"), -ENOENT);
	assert_int_equal(tfs_dataset_create(s, "ds"), 0);
	assert_int_equal(tfs_dataset_check(s, "ds"), 0);
	assert_int_equal(tfs_dataset_create(s, "ds"), -EEXIST);
	assert_int_equal(tfs_dataset_check(s, "ds"), 0);

	assert_int_equal(tfs_ref_read(s, "ds", TFS_REF_BRANCH, "main", &head), 0);
	assert_false(tfs_id_is_zero(&head));
	assert_int_equal(tfs_ref_read(s, "ds", TFS_REF_TAG, "main", &head), -ENOENT);
	assert_int_equal(tfs_ref_read(s, "ds", TFS_REF_BRANCH, "main", &head), 0);
	assert_int_equal(tfs_commit_load(s, "ds", &head, &c), 0);
	assert_true(tfs_id_eq(&c.id, &head));
	assert_int_equal(c.nparents, 0);
	assert_int_equal(c.rows, 0);
	assert_int_equal(tfs_manifest_load(s, "ds", &c.manifest, &m), 0);
	assert_int_equal(m.ncols, 0);
	assert_int_equal(m.rows, 0);
	tfs_manifest_free(&m);
	tfs_commit_free(&c);

	/* The marker is what the spec says. */
	{
		struct tfs_buf b = { 0 };

		assert_int_equal(tfs_store_get(s, "ds/tensorfs-dataset", &b), 0);
		assert_string_equal((char *)b.data, "tensorfs-dataset 1\n");
		tfs_buf_free(&b);
	}
	tfs_store_close(s);
}

static void test_dataset_create_rejects_invalid_names(void **state)
{
	static const char *const bad[] = { "", ".hidden", "-x", "a/b", "a b", "../up" };
	struct tfs_store *s;
	char path[256];

	(void)state;
	open_lake("badnames", &s, path, sizeof(path));
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_int_equal(tfs_dataset_create(s, bad[i]), -EINVAL);
	tfs_store_close(s);
}

static void test_dataset_check_newer_and_damaged_marker(void **state)
{
	static const char newer[] = "tensorfs-dataset 2\n", junk[] = "hello\n";
	struct tfs_store *s;
	char path[256];

	(void)state;
	open_lake("markers", &s, path, sizeof(path));
	assert_int_equal(tfs_store_put(s, "future/tensorfs-dataset", newer, sizeof(newer) - 1), 0);
	assert_int_equal(tfs_dataset_check(s, "future"), -EPROTO);
	assert_int_equal(tfs_dataset_create(s, "future"), -EPROTO);
	assert_int_equal(tfs_store_put(s, "junk/tensorfs-dataset", junk, sizeof(junk) - 1), 0);
	assert_int_equal(tfs_dataset_check(s, "junk"), -EIO);
	tfs_store_close(s);
}

static void test_ref_update_compare_and_swap(void **state)
{
	struct tfs_store *s;
	char path[256];
	struct tfs_id a, b, c, got;
	struct tfs_manifest empty = { 0 };

	(void)state;
	open_lake("cas", &s, path, sizeof(path));
	assert_int_equal(tfs_dataset_create(s, "ds"), 0);
	assert_int_equal(tfs_ref_read(s, "ds", TFS_REF_BRANCH, "main", &a), 0);
	assert_int_equal(tfs_commit_write(s, "ds", &empty, &a, "second", &b), 0);
	assert_int_equal(tfs_commit_write(s, "ds", &empty, &b, "third", &c), 0);
	assert_false(tfs_id_eq(&a, &b));

	/* The right old value moves the branch. */
	assert_int_equal(tfs_ref_update(s, "ds", TFS_REF_BRANCH, "main", &a, &b), 0);
	assert_int_equal(tfs_ref_read(s, "ds", TFS_REF_BRANCH, "main", &got), 0);
	assert_true(tfs_id_eq(&got, &b));
	/* A stale old value does not. */
	assert_int_equal(tfs_ref_update(s, "ds", TFS_REF_BRANCH, "main", &a, &c), -EAGAIN);
	assert_int_equal(tfs_ref_read(s, "ds", TFS_REF_BRANCH, "main", &got), 0);
	assert_true(tfs_id_eq(&got, &b));
	/* NULL old means "must not exist". */
	assert_int_equal(tfs_ref_update(s, "ds", TFS_REF_BRANCH, "main", NULL, &c), -EAGAIN);
	assert_int_equal(tfs_ref_read(s, "ds", TFS_REF_BRANCH, "main", &got), 0);
	assert_true(tfs_id_eq(&got, &b));
	/* A new branch with NULL old; then its old value must be given. */
	assert_int_equal(tfs_ref_update(s, "ds", TFS_REF_BRANCH, "exp", NULL, &c), 0);
	assert_int_equal(tfs_ref_read(s, "ds", TFS_REF_BRANCH, "exp", &got), 0);
	assert_true(tfs_id_eq(&got, &c));
	assert_int_equal(tfs_ref_update(s, "ds", TFS_REF_BRANCH, "exp", NULL, &a), -EAGAIN);
	/* A missing branch with a non-NULL old. */
	assert_int_equal(tfs_ref_update(s, "ds", TFS_REF_BRANCH, "nope", &a, &b), -EAGAIN);
	assert_int_equal(tfs_ref_read(s, "ds", TFS_REF_BRANCH, "nope", &got), -ENOENT);
	/* Tags live apart from branches. */
	assert_int_equal(tfs_ref_update(s, "ds", TFS_REF_TAG, "v1", NULL, &a), 0);
	assert_int_equal(tfs_ref_read(s, "ds", TFS_REF_TAG, "v1", &got), 0);
	assert_true(tfs_id_eq(&got, &a));
	assert_int_equal(tfs_ref_read(s, "ds", TFS_REF_BRANCH, "v1", &got), -ENOENT);
	/* Bad names. */
	assert_int_equal(tfs_ref_update(s, "ds", TFS_REF_BRANCH, "a/b", NULL, &a), -EINVAL);
	assert_int_equal(tfs_ref_update(s, "ds", TFS_REF_BRANCH, ".x", NULL, &a), -EINVAL);

	/* The ref file is "<hex>\n". */
	{
		struct tfs_buf buf = { 0 };
		char hex[TFS_ID_HEX];

		tfs_id_hex(&b, hex);
		assert_int_equal(tfs_store_get(s, "ds/refs/heads/main", &buf), 0);
		assert_int_equal(buf.len, TFS_ID_HEX);
		assert_memory_equal(buf.data, hex, TFS_ID_HEX - 1);
		assert_int_equal(buf.data[TFS_ID_HEX - 1], '\n');
		tfs_buf_free(&buf);
	}
	tfs_store_close(s);
}

struct name_list {
	char names[16][160];
	int n;
};

static int collect_name(void *arg, const char *name, int is_dir)
{
	struct name_list *l = arg;

	assert_true(is_dir);
	assert_true(l->n < 16);
	snprintf(l->names[l->n++], sizeof(l->names[0]), "%s", name);
	return 0;
}

static int list_has(const struct name_list *l, const char *name)
{
	for (int i = 0; i < l->n; i++)
		if (!strcmp(l->names[i], name))
			return 1;
	return 0;
}

static int stop_at_first(void *arg, const char *name, int is_dir)
{
	(void)name;
	(void)is_dir;
	++*(int *)arg;
	return 42;
}

static void test_lake_list_lists_only_datasets(void **state)
{
	struct tfs_store *s;
	char path[256], p[512];
	struct name_list l = { .n = 0 };
	int calls = 0;
	FILE *f;

	(void)state;
	open_lake("listing", &s, path, sizeof(path));
	assert_int_equal(tfs_dataset_list(s, collect_name, &l), 0);
	assert_int_equal(l.n, 0);

	assert_int_equal(tfs_dataset_create(s, "alpha"), 0);
	assert_int_equal(tfs_dataset_create(s, "beta.v2"), 0);
	/* Things that are not datasets: a plain directory, a directory holding objects but no
	 * marker, a hidden directory, a regular file. */
	snprintf(p, sizeof(p), "%s/random_dir", path);
	assert_int_equal(mkdir(p, 0755), 0);
	snprintf(p, sizeof(p), "%s/.hidden", path);
	assert_int_equal(mkdir(p, 0755), 0);
	snprintf(p, sizeof(p), "%s/a_file", path);
	f = fopen(p, "w");
	assert_non_null(f);
	fputs("tensorfs-dataset 1\n", f);
	fclose(f);
	{
		struct tfs_id id;

		assert_int_equal(
			tfs_object_put(s, "halfmade", TFS_OBJ_CHUNK, TFS_CODEC_RAW, 0, "x", 1, &id),
			0);
	}

	assert_int_equal(tfs_dataset_list(s, collect_name, &l), 0);
	assert_int_equal(l.n, 2);
	assert_true(list_has(&l, "alpha"));
	assert_true(list_has(&l, "beta.v2"));

	/* A non-zero return from the callback stops the listing and is returned. */
	assert_int_equal(tfs_dataset_list(s, stop_at_first, &calls), 42);
	assert_int_equal(calls, 1);
	tfs_store_close(s);
}

static int collect_ref(void *arg, const char *name, int is_dir)
{
	struct name_list *l = arg;

	assert_false(is_dir);
	assert_true(l->n < 16);
	snprintf(l->names[l->n++], sizeof(l->names[0]), "%s", name);
	return 0;
}

static void test_ref_list(void **state)
{
	struct tfs_store *s;
	char path[256];
	struct tfs_id main_id;
	struct name_list heads = { .n = 0 }, tags = { .n = 0 };

	(void)state;
	open_lake("reflist", &s, path, sizeof(path));
	assert_int_equal(tfs_dataset_create(s, "ds"), 0);
	assert_int_equal(tfs_ref_read(s, "ds", TFS_REF_BRANCH, "main", &main_id), 0);
	assert_int_equal(tfs_ref_list(s, "ds", TFS_REF_BRANCH, collect_ref, &heads), 0);
	assert_int_equal(heads.n, 1);
	assert_true(list_has(&heads, "main"));
	assert_int_equal(tfs_ref_list(s, "ds", TFS_REF_TAG, collect_ref, &tags), 0);
	assert_int_equal(tags.n, 0); /* no tag yet: an empty list, not an error */

	assert_int_equal(tfs_ref_update(s, "ds", TFS_REF_BRANCH, "dev", NULL, &main_id), 0);
	assert_int_equal(tfs_ref_update(s, "ds", TFS_REF_TAG, "v1.0", NULL, &main_id), 0);
	heads.n = tags.n = 0;
	/* The writers' lock files are not refs. */
	assert_int_equal(tfs_ref_list(s, "ds", TFS_REF_BRANCH, collect_ref, &heads), 0);
	assert_int_equal(heads.n, 2);
	assert_true(list_has(&heads, "main"));
	assert_true(list_has(&heads, "dev"));
	assert_int_equal(tfs_ref_list(s, "ds", TFS_REF_TAG, collect_ref, &tags), 0);
	assert_int_equal(tags.n, 1);
	assert_true(list_has(&tags, "v1.0"));
	tfs_store_close(s);
}

static void test_object_put_get_round_trip(void **state)
{
	static const enum tfs_obj_type types[] = { TFS_OBJ_CHUNK, TFS_OBJ_MANIFEST,
						   TFS_OBJ_COMMIT };
	struct tfs_store *s;
	char path[256];
	uint8_t data[10000];

	(void)state;
	open_lake("objects", &s, path, sizeof(path));
	for (size_t i = 0; i < sizeof(data); i++)
		data[i] = (uint8_t)("abcdefgh"[i % 8] + (i / 1000));
	for (size_t t = 0; t < 3; t++) {
		for (int codec = TFS_CODEC_RAW; codec <= TFS_CODEC_ZSTD; codec++) {
			struct tfs_id id, id2, want;
			struct tfs_buf enc = { 0 };
			char key[TFS_KEY_MAX], hex[TFS_ID_HEX], file[800];
			uint8_t *raw = NULL;
			size_t len = 0;
			struct stat sb;

			assert_int_equal(tfs_object_put(s, "ds", types[t], (enum tfs_codec_id)codec,
							3, data, sizeof(data), &id),
					 0);
			/* The id is the SHA-256 of the encoded object. */
			assert_int_equal(tfs_object_encode(types[t], (enum tfs_codec_id)codec, 3,
							   data, sizeof(data), &enc),
					 0);
			tfs_id_of(enc.data, enc.len, &want);
			assert_true(tfs_id_eq(&id, &want));
			/* Its key is ds/objects/<2 hex>/<62 hex>. */
			tfs_object_key("ds", &id, key);
			tfs_id_hex(&id, hex);
			assert_memory_equal(key, "ds/objects/", 11);
			assert_memory_equal(key + 11, hex, 2);
			assert_int_equal(key[13], '/');
			assert_string_equal(key + 14, hex + 2);
			snprintf(file, sizeof(file), "%s/%s", path, key);
			assert_int_equal(stat(file, &sb), 0);
			assert_int_equal(sb.st_size, enc.len);

			assert_int_equal(tfs_object_get(s, "ds", &id, types[t], &raw, &len), 0);
			assert_int_equal(len, sizeof(data));
			assert_memory_equal(raw, data, sizeof(data));
			assert_int_equal(raw[len], 0);
			free(raw);

			/* Putting it again is harmless and gives the same id. */
			assert_int_equal(tfs_object_put(s, "ds", types[t], (enum tfs_codec_id)codec,
							3, data, sizeof(data), &id2),
					 0);
			assert_true(tfs_id_eq(&id, &id2));
			/* Asking for another type fails. */
			assert_int_equal(
				tfs_object_get(s, "ds", &id, types[(t + 1) % 3], &raw, &len), -EIO);
			tfs_buf_free(&enc);
		}
	}
	/* An object that is not there. */
	{
		struct tfs_id missing = id_from_seed(99);
		uint8_t *raw;
		size_t len;

		assert_int_equal(tfs_object_get(s, "ds", &missing, TFS_OBJ_CHUNK, &raw, &len),
				 -ENOENT);
	}
	tfs_store_close(s);
}

static void rewrite_file(const char *file, const void *data, size_t len)
{
	int fd = open(file, O_WRONLY | O_TRUNC | O_CLOEXEC);

	assert_true(fd >= 0);
	assert_int_equal(tfs_write_full(fd, data, len), 0);
	close(fd);
}

static void test_object_get_detects_corruption(void **state)
{
	struct tfs_store *s;
	char path[256], key[TFS_KEY_MAX], file[800], hex[TFS_ID_HEX];
	struct tfs_id id;
	struct tfs_buf orig = { 0 };
	uint8_t *raw = NULL;
	size_t len;
	static const char text[] = "a small manifest-like object, stored for the test\n";

	(void)state;
	open_lake("corrupt", &s, path, sizeof(path));
	assert_int_equal(tfs_object_put(s, "ds", TFS_OBJ_MANIFEST, TFS_CODEC_RAW, 0, text,
					sizeof(text) - 1, &id),
			 0);
	tfs_object_key("ds", &id, key);
	tfs_id_hex(&id, hex);
	snprintf(file, sizeof(file), "%s/%s", path, key);
	assert_int_equal(tfs_store_get(s, key, &orig), 0);
	/* Make sure the test may rewrite the stored file, whatever mode the store gave it. */
	assert_int_equal(chmod(file, 0644), 0);

	/* Flip one byte anywhere: header or payload. */
	for (size_t pos = 0; pos < orig.len; pos++) {
		uint8_t *bad = malloc(orig.len);

		assert_non_null(bad);
		memcpy(bad, orig.data, orig.len);
		bad[pos] ^= 0x04;
		rewrite_file(file, bad, orig.len);
		raw = NULL;
		if (tfs_object_get(s, "ds", &id, TFS_OBJ_MANIFEST, &raw, &len) != -EIO)
			fail_msg("flip at %zu not detected", pos);
		assert_null(raw);
		free(bad);
	}
	/* Truncated, empty and extended files. */
	rewrite_file(file, orig.data, orig.len - 1);
	assert_int_equal(tfs_object_get(s, "ds", &id, TFS_OBJ_MANIFEST, &raw, &len), -EIO);
	rewrite_file(file, orig.data, 0);
	assert_int_equal(tfs_object_get(s, "ds", &id, TFS_OBJ_MANIFEST, &raw, &len), -EIO);
	assert_int_equal(tfs_buf_append(&orig, "\n", 1), 0);
	rewrite_file(file, orig.data, orig.len);
	assert_int_equal(tfs_object_get(s, "ds", &id, TFS_OBJ_MANIFEST, &raw, &len), -EIO);
	/* The damage was logged, naming the object (the store's check finds every case). */
	assert_true(log_contains(hex + 2));
	assert_true(log_contains("fails its checksum again after a refetch"));

	/* Restored, it reads again. */
	rewrite_file(file, orig.data, orig.len - 1);
	assert_int_equal(tfs_object_get(s, "ds", &id, TFS_OBJ_MANIFEST, &raw, &len), 0);
	assert_memory_equal(raw, text, sizeof(text) - 1);
	free(raw);
	tfs_buf_free(&orig);
	tfs_store_close(s);
}

static void test_ref_resolve(void **state)
{
	struct tfs_store *s;
	char path[256], hex[TFS_ID_HEX], upper[TFS_ID_HEX];
	struct tfs_id main_id, got, other, chunk;
	struct tfs_manifest empty = { 0 };

	(void)state;
	open_lake("resolve", &s, path, sizeof(path));
	assert_int_equal(tfs_dataset_create(s, "ds"), 0);
	assert_int_equal(tfs_ref_read(s, "ds", TFS_REF_BRANCH, "main", &main_id), 0);
	assert_int_equal(tfs_commit_write(s, "ds", &empty, &main_id, "tagged", &other), 0);
	assert_int_equal(tfs_ref_update(s, "ds", TFS_REF_TAG, "v1", NULL, &other), 0);

	assert_int_equal(tfs_ref_resolve(s, "ds", "main", &got), 0);
	assert_true(tfs_id_eq(&got, &main_id));
	assert_int_equal(tfs_ref_resolve(s, "ds", "v1", &got), 0);
	assert_true(tfs_id_eq(&got, &other));

	/* A full commit id, in either case. */
	tfs_id_hex(&other, hex);
	assert_int_equal(tfs_ref_resolve(s, "ds", hex, &got), 0);
	assert_true(tfs_id_eq(&got, &other));
	for (int i = 0; i < TFS_ID_HEX; i++)
		upper[i] = (char)(hex[i] >= 'a' && hex[i] <= 'f' ? hex[i] - 'a' + 'A' : hex[i]);
	assert_int_equal(tfs_ref_resolve(s, "ds", upper, &got), 0);
	assert_true(tfs_id_eq(&got, &other));

	/* Unknown names, abbreviated ids and ids of nothing. */
	assert_int_equal(tfs_ref_resolve(s, "ds", "nope", &got), -ENOENT);
	assert_int_equal(tfs_ref_resolve(s, "ds", "a/b", &got), -ENOENT);
	assert_int_equal(tfs_ref_resolve(s, "ds", "", &got), -ENOENT);
	hex[12] = 0;
	assert_int_equal(tfs_ref_resolve(s, "ds", hex, &got), -ENOENT);
	chunk = id_from_seed(12345);
	tfs_id_hex(&chunk, hex);
	assert_int_equal(tfs_ref_resolve(s, "ds", hex, &got), -ENOENT);
	assert_int_equal(tfs_ref_resolve(s, "other", "main", &got), -ENOENT);
	tfs_store_close(s);
}

static void test_commit_write_and_load(void **state)
{
	static const uint64_t shape[] = { 2 };
	struct tfs_store *s;
	char path[256];
	struct tfs_id root, id;
	struct tfs_manifest m, back;
	struct tfs_commit c;

	(void)state;
	open_lake("commits", &s, path, sizeof(path));
	assert_int_equal(tfs_dataset_create(s, "ds"), 0);
	assert_int_equal(tfs_ref_read(s, "ds", TFS_REF_BRANCH, "main", &root), 0);
	make_manifest(&m, 9, 1);
	make_column(&m.cols[0], "v", "<f8", 1, shape, 9, 4, TFS_CODEC_ZSTD, 3);
	assert_int_equal(tfs_commit_write(s, "ds", &m, &root, "add v\n\nnine rows", &id), 0);
	assert_int_equal(tfs_commit_load(s, "ds", &id, &c), 0);
	assert_true(tfs_id_eq(&c.id, &id));
	assert_int_equal(c.nparents, 1);
	assert_true(tfs_id_eq(&c.parents[0], &root));
	assert_int_equal(c.rows, 9);
	assert_string_equal(c.message, "add v\n\nnine rows");
	assert_int_equal(tfs_manifest_load(s, "ds", &c.manifest, &back), 0);
	assert_manifests_equal(&m, &back);
	/* A manifest id is not a commit. */
	{
		struct tfs_commit not_commit;
		struct tfs_id mid = c.manifest;

		assert_int_equal(tfs_commit_load(s, "ds", &mid, &not_commit), -EIO);
		assert_true(log_contains("a manifest, not a commit"));
	}
	tfs_commit_free(&c);
	tfs_manifest_free(&back);
	tfs_manifest_free(&m);
	tfs_store_close(s);
}

/* The spec allows any name of [A-Za-z0-9_.-] not starting with '.' or '-', so ".." inside a
 * name is legal and must work as a dataset and as a branch. */
static void test_names_with_double_dots_work(void **state)
{
	struct tfs_store *s;
	char path[256];
	struct tfs_id id, got;
	int create_rc, check_rc, update_rc, read_rc;

	(void)state;
	open_lake("dots", &s, path, sizeof(path));
	assert_true(tfs_name_valid("v1..2"));
	assert_true(tfs_name_valid("release..next"));
	create_rc = tfs_dataset_create(s, "v1..2");
	check_rc = tfs_dataset_check(s, "v1..2");
	assert_int_equal(tfs_dataset_create(s, "ds"), 0);
	assert_int_equal(tfs_ref_read(s, "ds", TFS_REF_BRANCH, "main", &id), 0);
	update_rc = tfs_ref_update(s, "ds", TFS_REF_BRANCH, "release..next", NULL, &id);
	read_rc = tfs_ref_read(s, "ds", TFS_REF_BRANCH, "release..next", &got);
	tfs_store_close(s);
	assert_int_equal(create_rc, 0);
	assert_int_equal(check_rc, 0);
	assert_int_equal(update_rc, 0);
	assert_int_equal(read_rc, 0);
	assert_true(tfs_id_eq(&got, &id));
}

/* --- main ----------------------------------------------------------------------------------- */

static int group_setup(void **state)
{
	(void)state;
	return tmpdir_make("format_store");
}

static int group_teardown(void **state)
{
	(void)state;
	return tmpdir_remove();
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_dataset_create_and_check),
		cmocka_unit_test(test_dataset_create_rejects_invalid_names),
		cmocka_unit_test(test_dataset_check_newer_and_damaged_marker),
		cmocka_unit_test(test_ref_update_compare_and_swap),
		cmocka_unit_test(test_lake_list_lists_only_datasets),
		cmocka_unit_test(test_ref_list),
		cmocka_unit_test(test_object_put_get_round_trip),
		cmocka_unit_test(test_object_get_detects_corruption),
		cmocka_unit_test(test_ref_resolve),
		cmocka_unit_test(test_commit_write_and_load),
		cmocka_unit_test(test_names_with_double_dots_work),
	};

	if (getenv("TFS_TEST_FILTER"))
		cmocka_set_test_filter(getenv("TFS_TEST_FILTER"));
	return cmocka_run_group_tests_name("format_store", tests, group_setup, group_teardown);
}
