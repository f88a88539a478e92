/* SPDX-License-Identifier: MIT */
/* Unit tests for core/refspec over a real file:// lake: names, abbreviated commit ids (unique,
 * ambiguous, of objects that are no commits) and ~N / ^ suffixes. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "format.h"
#include "object.h"
#include "refspec.h"
#include "store.h"
#include "util.h"
#include "tmpdir_fixture.h"

#define CHAIN 4

struct lake {
	struct tfs_store *s;
	struct tfs_id c[CHAIN]; /* c[0] the root, c[CHAIN - 1] main's head */
};

static void make_lake(const char *name, struct lake *l)
{
	struct tfs_manifest empty = { 0 };
	char url[256];

	snprintf(url, sizeof(url), "file://%s/%s", tmpdir, name);
	assert_int_equal(tfs_store_open(url, TFS_STORE_CREATE, &l->s), 0);
	assert_int_equal(tfs_dataset_create(l->s, "ds"), 0);
	assert_int_equal(tfs_ref_read(l->s, "ds", TFS_REF_BRANCH, "main", &l->c[0]), 0);
	for (int i = 1; i < CHAIN; i++) {
		char msg[32];

		snprintf(msg, sizeof(msg), "commit %d", i);
		assert_int_equal(tfs_commit_write(l->s, "ds", &empty, &l->c[i - 1], msg, &l->c[i]),
				 0);
	}
	assert_int_equal(
		tfs_ref_update(l->s, "ds", TFS_REF_BRANCH, "main", &l->c[0], &l->c[CHAIN - 1]), 0);
	assert_int_equal(tfs_ref_update(l->s, "ds", TFS_REF_TAG, "v1", NULL, &l->c[1]), 0);
}

/* spec resolves to want. */
static void resolves(struct lake *l, const char *spec, const struct tfs_id *want)
{
	char err[256] = "";
	struct tfs_id got;
	int rc = tfs_refspec_resolve(l->s, "ds", spec, &got, err, sizeof(err));

	if (rc)
		fail_msg("%s: %d %s", spec, rc, err);
	assert_true(tfs_id_eq(&got, want));
}

/* spec fails with rc and a reason holding why. */
static void refused(struct lake *l, const char *spec, int rc, const char *why)
{
	char err[256] = "";
	struct tfs_id got;

	assert_int_equal(tfs_refspec_resolve(l->s, "ds", spec, &got, err, sizeof(err)), rc);
	if (!strstr(err, why))
		fail_msg("%s: '%s' lacks '%s'", spec, err, why);
}

static void test_names_and_suffixes(void **state)
{
	struct lake l;
	char hex[TFS_ID_HEX], spec[TFS_ID_HEX + 8];

	(void)state;
	make_lake("suffixes", &l);
	resolves(&l, "main", &l.c[3]);
	resolves(&l, "main~0", &l.c[3]);
	resolves(&l, "main~1", &l.c[2]);
	resolves(&l, "main~", &l.c[2]);
	resolves(&l, "main^", &l.c[2]);
	resolves(&l, "main^^", &l.c[1]);
	resolves(&l, "main~2^", &l.c[0]);
	resolves(&l, "main~3", &l.c[0]);
	resolves(&l, "v1", &l.c[1]);
	resolves(&l, "v1^", &l.c[0]);
	tfs_id_hex(&l.c[2], hex);
	resolves(&l, hex, &l.c[2]);
	snprintf(spec, sizeof(spec), "%s~2", hex);
	resolves(&l, spec, &l.c[0]);

	refused(&l, "main~4", -ENOENT, "main has only 3 ancestors");
	refused(&l, "v1^^", -ENOENT, "v1 has only 1 ancestor");
	refused(&l, "main~3^", -ENOENT, "has only 3 ancestors");
	refused(&l, "main~x", -ENOENT, "expected ~N or ^");
	refused(&l, "main~1q", -ENOENT, "expected ~N or ^");
	refused(&l, "main~99999999999999999999", -ENOENT, "main~9");
	refused(&l, "nope~1", -ENOENT, "no branch, tag or commit 'nope'");
	refused(&l, "~1", -ENOENT, "no branch, tag or commit");
	refused(&l, "", -ENOENT, "no branch, tag or commit");
	tfs_store_close(l.s);
}

static void test_abbreviated_ids(void **state)
{
	struct lake l;
	struct tfs_id chunk;
	char hex[TFS_ID_HEX], spec[TFS_ID_HEX + 8], upper[16];
	struct tfs_buf obj = { 0 };
	char key[TFS_KEY_MAX];

	(void)state;
	make_lake("prefix", &l);
	for (int i = 0; i < CHAIN; i++) {
		tfs_id_hex(&l.c[i], hex);
		for (size_t n = 4; n < TFS_ID_HEX - 1; n += 9) {
			snprintf(spec, sizeof(spec), "%.*s", (int)n, hex);
			resolves(&l, spec, &l.c[i]);
		}
		/* in upper case, and with a suffix */
		for (int k = 0; k < 12; k++)
			upper[k] = (char)(hex[k] >= 'a' ? hex[k] - 'a' + 'A' : hex[k]);
		upper[12] = 0;
		resolves(&l, upper, &l.c[i]);
		if (i) {
			snprintf(spec, sizeof(spec), "%.12s^", hex);
			resolves(&l, spec, &l.c[i - 1]);
		}
	}
	/* Too short, and the prefix of an object that is no commit (a chunk): nothing. */
	tfs_id_hex(&l.c[1], hex);
	snprintf(spec, sizeof(spec), "%.3s", hex);
	refused(&l, spec, -ENOENT, "no branch, tag or commit");
	assert_int_equal(tfs_object_encode(TFS_OBJ_CHUNK, TFS_CODEC_RAW, 0, "rows", 4, &obj), 0);
	tfs_id_of(obj.data, obj.len, &chunk);
	tfs_object_key("ds", &chunk, key);
	assert_int_equal(tfs_store_put(l.s, key, obj.data, obj.len), 0);
	tfs_id_hex(&chunk, hex);
	snprintf(spec, sizeof(spec), "%.12s", hex);
	refused(&l, spec, -ENOENT, "no branch, tag or commit");
	refused(&l, hex, -ENOENT, "is an object of the dataset but not a commit");
	refused(&l, "00000000000000000000000000000000000000000000000000000000000000ff", -ENOENT,
		"no branch, tag or commit");
	tfs_buf_free(&obj);
	tfs_store_close(l.s);
}

static void test_ambiguous_prefix(void **state)
{
	struct tfs_manifest empty = { 0 };
	static struct tfs_id seen[65536];
	static uint8_t have[65536];
	struct lake l;
	struct tfs_id id, prev;
	char hex[TFS_ID_HEX], spec[8];
	unsigned key = 0;

	(void)state;
	make_lake("ambiguous", &l);
	/* Commits until two share their first 4 hex digits (a few hundred, by the birthday
	 * bound). */
	prev = l.c[CHAIN - 1];
	for (int i = 0;; i++) {
		char msg[32];

		assert_true(i < 20000);
		snprintf(msg, sizeof(msg), "more %d", i);
		assert_int_equal(tfs_commit_write(l.s, "ds", &empty, &prev, msg, &id), 0);
		prev = id;
		key = (unsigned)id.b[0] << 8 | id.b[1];
		if (have[key])
			break;
		have[key] = 1;
		seen[key] = id;
	}
	tfs_id_hex(&id, hex);
	snprintf(spec, sizeof(spec), "%.4s", hex);
	refused(&l, spec, -EINVAL, "is ambiguous: 2 commits start with it");
	/* More digits tell them apart (unless 5 are shared too: then 6). */
	{
		char a[TFS_ID_HEX], b[TFS_ID_HEX], longer[TFS_ID_HEX];
		size_t n = 4;

		tfs_id_hex(&seen[key], a);
		tfs_id_hex(&id, b);
		while (a[n] == b[n])
			n++;
		snprintf(longer, sizeof(longer), "%.*s", (int)n + 1, b);
		resolves(&l, longer, &id);
		snprintf(longer, sizeof(longer), "%.*s", (int)n + 1, a);
		resolves(&l, longer, &seen[key]);
	}
	tfs_store_close(l.s);
}

static int group_setup(void **state)
{
	(void)state;
	return tmpdir_make("refspec");
}

static int group_teardown(void **state)
{
	(void)state;
	return tmpdir_remove();
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_names_and_suffixes),
		cmocka_unit_test(test_abbreviated_ids),
		cmocka_unit_test(test_ambiguous_prefix),
	};

	if (getenv("TFS_TEST_FILTER"))
		cmocka_set_test_filter(getenv("TFS_TEST_FILTER"));
	return cmocka_run_group_tests_name("refspec", tests, group_setup, group_teardown);
}
