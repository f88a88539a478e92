/* SPDX-License-Identifier: MIT */
/* Unit tests for core/jsonkinds: a value's kind and how a field's widens, lines and megabyte
 * blocks, the first object's fields, what rows widen the fields to (one row at a time and over
 * the pool alike), and the options checked against it. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "jsonkinds.h"
#include "util.h"
#include "tmpdir_fixture.h"

static json_t *val(const char *text)
{
	json_t *v = json_loads(text, JSON_DECODE_ANY, NULL);

	assert_non_null(v);
	return v;
}

static enum tfs_jkind kind(const char *text)
{
	json_t *v = val(text);
	enum tfs_jkind k = tfs_jkind_of(v);

	json_decref(v);
	return k;
}

static void test_kinds_and_widening(void **state)
{
	struct tfs_jfield f = { .kind = TFS_JK_INT };

	(void)state;
	assert_int_equal(kind("3"), TFS_JK_INT);
	assert_int_equal(kind("3.0"), TFS_JK_FLOAT);
	assert_int_equal(kind("true"), TFS_JK_BOOL);
	assert_int_equal(kind("\"s\""), TFS_JK_TEXT);
	assert_int_equal(kind("[1, 2]"), TFS_JK_LIST_INT);
	assert_int_equal(kind("[]"), TFS_JK_LIST_INT);
	assert_int_equal(kind("[1, 2.5]"), TFS_JK_LIST_FLOAT);
	assert_int_equal(kind("[1, \"a\"]"), TFS_JK_JSON);
	assert_int_equal(kind("{\"a\": 1}"), TFS_JK_JSON);
	assert_int_equal(kind("null"), TFS_JK_JSON);
	/* Integers go where floats go, anything where JSON text goes, nothing else. */
	assert_true(tfs_jkind_fits(TFS_JK_FLOAT, TFS_JK_INT));
	assert_true(tfs_jkind_fits(TFS_JK_LIST_FLOAT, TFS_JK_LIST_INT));
	assert_true(tfs_jkind_fits(TFS_JK_JSON, TFS_JK_BOOL));
	assert_false(tfs_jkind_fits(TFS_JK_INT, TFS_JK_FLOAT));
	assert_false(tfs_jkind_fits(TFS_JK_TEXT, TFS_JK_INT));
	assert_false(tfs_jkind_fits(TFS_JK_LIST_INT, TFS_JK_INT));
	/* A field widens once, integers to floats, and never back or sideways. */
	assert_true(tfs_jfield_widen(&f, TFS_JK_INT));
	assert_int_equal(f.kind, TFS_JK_INT);
	assert_true(tfs_jfield_widen(&f, TFS_JK_FLOAT));
	assert_int_equal(f.kind, TFS_JK_FLOAT);
	assert_true(tfs_jfield_widen(&f, TFS_JK_INT));
	assert_int_equal(f.kind, TFS_JK_FLOAT);
	assert_false(tfs_jfield_widen(&f, TFS_JK_TEXT));
	assert_int_equal(f.kind, TFS_JK_FLOAT);
	f.kind = TFS_JK_LIST_INT;
	assert_true(tfs_jfield_widen(&f, TFS_JK_LIST_FLOAT));
	assert_int_equal(f.kind, TFS_JK_LIST_FLOAT);
	f.kind = TFS_JK_BOOL;
	assert_false(tfs_jfield_widen(&f, TFS_JK_INT));
	assert_int_equal(f.kind, TFS_JK_BOOL);
}

static void test_lines_and_blocks(void **state)
{
	static const char text[] = "a\n\nbb\r\n  \nlast";
	struct tfs_jlines l = { text, text + sizeof(text) - 1, 0 };
	const char *line, *at, *bp, *be, *prev;
	size_t n, big = 3u << 20, lines = 0;
	char *data = malloc(big);

	(void)state;
	assert_true(tfs_jlines_next(&l, &line, &n) && n == 1 && line[0] == 'a');
	assert_true(tfs_jlines_next(&l, &line, &n) && n == 0 && tfs_jline_blank(line, n));
	assert_true(tfs_jlines_next(&l, &line, &n) && n == 3 && !tfs_jline_blank(line, n));
	assert_true(tfs_jlines_next(&l, &line, &n) && tfs_jline_blank(line, n));
	assert_true(tfs_jlines_next(&l, &line, &n) && n == 4 && !memcmp(line, "last", 4));
	assert_false(tfs_jlines_next(&l, &line, &n));
	assert_int_equal(l.lineno, 5);

	/* Blocks of about a megabyte, each ending at the end of a line, cover the data once. */
	assert_non_null(data);
	for (size_t i = 0; i < big; i++)
		data[i] = i % 1000 == 999 ? '\n' : 'x';
	data[big - 1] = 'y'; /* no newline at the end */
	at = prev = data;
	while (tfs_jlines_block(&at, data + big, &bp, &be)) {
		assert_ptr_equal(bp, prev);
		prev = be;
		assert_true(be == data + big || be[-1] == '\n');
		assert_true((size_t)(be - bp) >= (be == data + big ? 1 : 1u << 20));
		assert_true((size_t)(be - bp) < (1u << 20) + 1000);
		lines++;
	}
	assert_ptr_equal(at, data + big);
	assert_int_equal(lines, 3);
	free(data);
}

static void test_parse_names_why(void **state)
{
	char why[160] = "";
	json_t *v = tfs_jline_parse("{\"a\": 1", 7, why, sizeof(why));

	(void)state;
	assert_null(v);
	assert_true(why[0] != 0);
	v = tfs_jline_parse("{\"a\": 1}", 8, why, sizeof(why));
	assert_non_null(v);
	json_decref(v);
}

static const char rows[] = "not json\n"
			   "[1, 2]\n"
			   "{}\n"
			   "{\"id\": 1, \"s\": 0.5, \"tok\": [1, 2], \"t\": \"a\"}\n"
			   "{\"id\": 2.5, \"s\": 1, \"tok\": [70000], \"t\": \"b\", \"extra\": 1}\n"
			   "{\"id\": 3, \"tok\": [-4]}\n"
			   "{\"id\": \"x\", \"s\": 2, \"tok\": [], \"t\": 7}\n";

static void test_first_object_and_tally(void **state)
{
	struct tfs_jfield f[TFS_JSONL_MAX_FIELDS];
	struct tfs_jtally t;
	const char *rest;
	json_t *first;
	size_t nf;

	(void)state;
	assert_int_equal(tfs_jsonl_first(rows, strlen(rows), "tok", f, &nf, &first, &t, &rest), 0);
	assert_int_equal(nf, 4);
	assert_string_equal(f[0].name, "id");
	assert_int_equal(f[0].kind, TFS_JK_INT);
	assert_int_equal(f[1].kind, TFS_JK_FLOAT);
	assert_true(f[2].tokens && f[2].kind == TFS_JK_LIST_INT && !f[0].tokens);
	assert_int_equal(f[3].kind, TFS_JK_TEXT);
	assert_ptr_equal(rest, strstr(rows, "{\"id\": 2.5"));
	assert_int_equal(t.tok_min, 1);
	assert_int_equal(t.tok_max, 2);
	/* Every object counts for the fields it has, bad rows too (an extra field, a missing one,
	 * a kind no field takes): id widens to float, text stays text, ids range over all. */
	while (*rest) {
		const char *nl = strchr(rest, '\n');
		char why[160];
		json_t *o = tfs_jline_parse(rest, (size_t)(nl - rest), why, sizeof(why));

		assert_non_null(o);
		tfs_jtally_row(&t, o);
		json_decref(o);
		rest = nl + 1;
	}
	assert_int_equal(t.f[0].kind, TFS_JK_FLOAT);
	assert_int_equal(t.f[1].kind, TFS_JK_FLOAT);
	assert_int_equal(t.f[3].kind, TFS_JK_TEXT);
	assert_int_equal(t.tok_min, -4);
	assert_int_equal(t.tok_max, 70000);
	tfs_jtally_row(&t, NULL); /* an unparsable line: nothing */
	assert_int_equal(t.tok_min, -4);
	json_decref(first);

	/* No object with fields: -EINVAL. */
	assert_int_equal(tfs_jsonl_first("1\n[]\n{}\n", 8, NULL, f, &nf, &first, &t, &rest),
			 -EINVAL);
	assert_null(first);
	assert_int_equal(tfs_jsonl_first(NULL, 0, NULL, f, &nf, &first, &t, &rest), -EINVAL);
}

/* Lines of rows, `n` of them, with a float in field "x" at row float_at and a token id past
 * 2^16 at row big_at. */
static char *many_rows(size_t n, size_t float_at, size_t big_at, size_t *len)
{
	struct tfs_buf b = { 0 };
	char line[128];

	for (size_t i = 0; i < n; i++) {
		int k = i == float_at
				? snprintf(line, sizeof(line),
					   "{\"x\": %zu.5, \"tok\": [%zu, 3]}\n", i, i % 60000)
				: snprintf(line, sizeof(line), "{\"x\": %zu, \"tok\": [%zu]}\n", i,
					   i == big_at ? (size_t)70000 : i % 60000);

		assert_int_equal(tfs_buf_append(&b, line, (size_t)k), 0);
	}
	*len = b.len;
	return (char *)b.data;
}

static void test_scan_on_the_pool_equals_row_by_row(void **state)
{
	static const unsigned threads[] = { 1, 3 };
	size_t len;
	char *data = many_rows(200000, 150000, 190000, &len);

	(void)state;
	assert_true(len > (3u << 20)); /* several blocks */
	for (size_t k = 0; k < 2; k++) {
		struct tfs_jfield f[TFS_JSONL_MAX_FIELDS];
		struct tfs_workpool *pool;
		struct tfs_jtally t;
		const char *rest;
		json_t *first;
		size_t nf;

		assert_int_equal(tfs_workpool_create_with_caller(threads[k], &pool), 0);
		assert_int_equal(tfs_jsonl_first(data, len, "tok", f, &nf, &first, &t, &rest), 0);
		assert_int_equal(tfs_jsonl_scan(pool, rest, data + len, &t), 0);
		assert_int_equal(t.f[0].kind, TFS_JK_FLOAT);
		assert_int_equal(t.tok_min, 0);
		assert_int_equal(t.tok_max, 70000);
		/* Before the float's block, the kinds are the first object's. */
		tfs_jtally_init(&t, f, nf);
		assert_int_equal(tfs_jsonl_scan(pool, rest, data + len / 2, &t), 0);
		assert_int_equal(t.f[0].kind, TFS_JK_INT);
		assert_int_equal(t.tok_max, 59999);
		json_decref(first);
		tfs_workpool_destroy(pool);
	}
	free(data);
}

static void test_settle_checks_the_options(void **state)
{
	struct tfs_jfield f0[TFS_JSONL_MAX_FIELDS], f[TFS_JSONL_MAX_FIELDS];
	static const char one[] = "{\"v\": [1, 2, 3], \"tok\": [5, 6], \"s\": \"t\"}\n";
	const char *const fixed_v[] = { "v" }, *const fixed_s[] = { "s" };
	struct tfs_jtally t;
	const char *rest;
	json_t *first;
	size_t nf;

	(void)state;
	assert_int_equal(tfs_jsonl_first(one, strlen(one), "tok", f0, &nf, &first, &t, &rest), 0);
	/* Ids under 2^16: uint16 unless asked otherwise; --fixed takes the first row's length. */
	memcpy(f, f0, sizeof(f));
	assert_int_equal(tfs_jsonl_settle(f, nf, first, &t, "tok", 0, fixed_v, 1), 0);
	assert_int_equal(f[1].tsize, 2);
	assert_true(f[0].fixed && f[0].len == 3);
	memcpy(f, f0, sizeof(f));
	assert_int_equal(tfs_jsonl_settle(f, nf, first, &t, "tok", 4, NULL, 0), 0);
	assert_int_equal(f[1].tsize, 4);
	/* Past 2^16: uint32, or an error where uint16 was asked for; negative: an error. */
	t.tok_max = 70000;
	memcpy(f, f0, sizeof(f));
	assert_int_equal(tfs_jsonl_settle(f, nf, first, &t, "tok", 0, NULL, 0), 0);
	assert_int_equal(f[1].tsize, 4);
	memcpy(f, f0, sizeof(f));
	assert_int_equal(tfs_jsonl_settle(f, nf, first, &t, "tok", 2, NULL, 0), -EINVAL);
	assert_true(log_contains("--tokens tok: id 70000 is not a token id (0 to 65535)"));
	t.tok_max = 6;
	t.tok_min = -1;
	memcpy(f, f0, sizeof(f));
	assert_int_equal(tfs_jsonl_settle(f, nf, first, &t, "tok", 0, NULL, 0), -EINVAL);
	assert_true(log_contains("--tokens tok: id -1 is not a token id"));
	t.tok_min = 5;
	/* Token ids that are floats somewhere, a --tokens or --fixed field that is not there or
	 * not a list of numbers: errors. */
	t.f[1].kind = TFS_JK_LIST_FLOAT;
	memcpy(f, f0, sizeof(f));
	assert_int_equal(tfs_jsonl_settle(f, nf, first, &t, "tok", 0, NULL, 0), -EINVAL);
	assert_true(log_contains("--tokens tok: the field is not a list of integers"));
	t.f[1].kind = TFS_JK_LIST_INT;
	memcpy(f, f0, sizeof(f));
	assert_int_equal(tfs_jsonl_settle(f, nf, first, &t, NULL, 0, fixed_s, 1), -EINVAL);
	assert_true(log_contains("--fixed s: no field of lists of numbers"));
	json_decref(first);
	assert_int_equal(tfs_jsonl_first(one, strlen(one), "nope", f, &nf, &first, &t, &rest), 0);
	assert_int_equal(tfs_jsonl_settle(f, nf, first, &t, "nope", 0, NULL, 0), -EINVAL);
	assert_true(log_contains("--tokens nope: the first object has no such field"));
	json_decref(first);
}

static int group_setup(void **state)
{
	(void)state;
	return tmpdir_make("jsonkinds");
}

static int group_teardown(void **state)
{
	(void)state;
	return tmpdir_remove();
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_kinds_and_widening),
		cmocka_unit_test(test_lines_and_blocks),
		cmocka_unit_test(test_parse_names_why),
		cmocka_unit_test(test_first_object_and_tally),
		cmocka_unit_test(test_scan_on_the_pool_equals_row_by_row),
		cmocka_unit_test(test_settle_checks_the_options),
	};

	if (getenv("TFS_TEST_FILTER"))
		cmocka_set_test_filter(getenv("TFS_TEST_FILTER"));
	return cmocka_run_group_tests_name("jsonkinds", tests, group_setup, group_teardown);
}
