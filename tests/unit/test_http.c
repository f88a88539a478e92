/* SPDX-License-Identifier: MIT */
/* Unit tests for core/http's whole-object assembly from ranges (get_parts, get_split), over a
 * fake range source in memory. */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

#include <cmocka.h>

#include "http.h"
#include "httpparts.h"
#include "util.h"

#define MIB (1024u * 1024u)

/* An object in memory served by ranges, as a server would: short at the end, 0 past it. */
struct fake {
	const uint8_t *data;
	size_t size;
	pthread_mutex_t lock;
	unsigned calls;
	unsigned max_len; /* largest range asked for */
	uint64_t offs[64];
	int fail_at; /* a range starting here fails with -EIO; -1: none */
};

static ssize_t fake_range(void *arg, uint64_t off, void *dst, size_t len, int64_t *total)
{
	struct fake *f = arg;
	size_t n = off >= f->size ? 0 : (f->size - off < len ? f->size - off : len);

	pthread_mutex_lock(&f->lock);
	if (f->calls < 64)
		f->offs[f->calls] = off;
	f->calls++;
	if (len > f->max_len)
		f->max_len = (unsigned)len;
	pthread_mutex_unlock(&f->lock);
	*total = (int64_t)f->size;
	if (f->fail_at >= 0 && off == (uint64_t)f->fail_at)
		return -EIO;
	memcpy(dst, f->data + off, n);
	return (ssize_t)n;
}

static uint8_t *pattern(size_t n)
{
	uint8_t *p = malloc(n ? n : 1);

	assert_non_null(p);
	for (size_t i = 0; i < n; i++)
		p[i] = (uint8_t)(i * 2654435761u >> 13);
	return p;
}

static void fake_init(struct fake *f, const uint8_t *data, size_t size)
{
	memset(f, 0, sizeof(*f));
	f->data = data;
	f->size = size;
	f->fail_at = -1;
	pthread_mutex_init(&f->lock, NULL);
}

/* A 3.5 MiB object a reader waits for: 4 ranges (of 1 MiB: 3.5 / 4 is under the minimum), all
 * bytes in place, NUL-terminated. */
static void test_split_fetches_parallel_ranges(void **state)
{
	const size_t size = 3 * MIB + MIB / 2;
	uint8_t *src = pattern(size);
	struct tfs_buf out = { 0 };
	struct fake f;

	(void)state;
	fake_init(&f, src, size);
	assert_int_equal(tfs_http_get_split(NULL, fake_range, &f, size, 4, &out), 0);
	assert_int_equal(out.len, size);
	assert_memory_equal(out.data, src, size);
	assert_int_equal(out.data[size], 0);
	assert_int_equal(f.calls, 4);
	assert_int_equal(f.max_len, MIB);
	tfs_buf_free(&out);
	free(src);
}

/* A task that holds a pool's worker until released. */
struct hold {
	struct tfs_work work;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	int held, released;
};

static int hold_run(struct tfs_work *w)
{
	struct hold *h = (struct hold *)w;

	pthread_mutex_lock(&h->lock);
	h->held = 1;
	pthread_cond_broadcast(&h->cond);
	while (!h->released)
		pthread_cond_wait(&h->cond, &h->lock);
	pthread_mutex_unlock(&h->lock);
	return 0;
}

/* Ranges as tasks on a worker pool: on an idle one, and on one whose only worker is busy (the
 * caller then fetches every range itself, and nothing waits on the pool). */
static void test_split_on_a_pool(void **state)
{
	const size_t size = 3 * MIB + MIB / 2;
	uint8_t *src = pattern(size);
	struct tfs_buf out = { 0 };
	struct tfs_workpool *pool;
	struct tfs_workgroup g;
	struct hold h = { .work = { .run = hold_run } };
	struct fake f;

	(void)state;
	assert_int_equal(tfs_workpool_create(3, &pool), 0);
	fake_init(&f, src, size);
	assert_int_equal(tfs_http_get_split(pool, fake_range, &f, size, 4, &out), 0);
	assert_int_equal(out.len, size);
	assert_memory_equal(out.data, src, size);
	assert_int_equal(f.calls, 4);
	tfs_workpool_destroy(pool);

	assert_int_equal(tfs_workpool_create(1, &pool), 0);
	pthread_mutex_init(&h.lock, NULL);
	pthread_cond_init(&h.cond, NULL);
	tfs_workgroup_init(&g, pool);
	tfs_workgroup_submit(&g, &h.work, TFS_WORK_NORMAL);
	pthread_mutex_lock(&h.lock);
	while (!h.held)
		pthread_cond_wait(&h.cond, &h.lock);
	pthread_mutex_unlock(&h.lock);
	fake_init(&f, src, size);
	memset(out.data, 0, out.len);
	assert_int_equal(tfs_http_get_split(pool, fake_range, &f, size, 4, &out), 0);
	assert_memory_equal(out.data, src, size);
	assert_int_equal(f.calls, 4);
	pthread_mutex_lock(&h.lock);
	h.released = 1;
	pthread_cond_broadcast(&h.cond);
	pthread_mutex_unlock(&h.lock);
	assert_int_equal(tfs_workgroup_wait(&g), 0);
	tfs_workgroup_destroy(&g);
	tfs_workpool_destroy(pool);
	tfs_buf_free(&out);
	free(src);
}

/* Parts are at least 1 MiB: a 12 MiB object with parallel 4 goes in 4 parts of 3 MiB; an object
 * under 1 MiB is one request. */
static void test_split_part_sizes(void **state)
{
	const size_t big = 12 * MIB, small = MIB / 2;
	uint8_t *src = pattern(big);
	struct tfs_buf out = { 0 };
	struct fake f;

	(void)state;
	fake_init(&f, src, big);
	assert_int_equal(tfs_http_get_split(NULL, fake_range, &f, big, 4, &out), 0);
	assert_int_equal(f.calls, 4);
	assert_int_equal(f.max_len, 3 * MIB);
	assert_memory_equal(out.data, src, big);
	fake_init(&f, src, small);
	assert_int_equal(tfs_http_get_split(NULL, fake_range, &f, small, 4, &out), 0);
	assert_int_equal(f.calls, 1);
	assert_int_equal(out.len, small);
	assert_memory_equal(out.data, src, small);
	tfs_buf_free(&out);
	free(src);
}

/* The object is not the size the caller expects: larger or smaller, -EIO, never a mix. */
static void test_split_size_mismatch_is_eio(void **state)
{
	const size_t size = 2 * MIB + 10;
	uint8_t *src = pattern(size);
	struct tfs_buf out = { 0 };
	struct fake f;

	(void)state;
	fake_init(&f, src, size);
	assert_int_equal(tfs_http_get_split(NULL, fake_range, &f, size - 5, 4, &out), -EIO);
	fake_init(&f, src, size);
	assert_int_equal(tfs_http_get_split(NULL, fake_range, &f, size + MIB, 4, &out), -EIO);
	tfs_buf_free(&out);
	free(src);
}

/* A failed range fails the whole object with its error. */
static void test_split_range_error(void **state)
{
	const size_t size = 4 * MIB;
	uint8_t *src = pattern(size);
	struct tfs_buf out = { 0 };
	struct fake f;

	(void)state;
	fake_init(&f, src, size);
	f.fail_at = 2 * MIB;
	assert_int_equal(tfs_http_get_split(NULL, fake_range, &f, size, 4, &out), -EIO);
	tfs_buf_free(&out);
	free(src);
}

/* get_parts: an unknown size starts with one part_size request and fetches the rest in parts. */
static void test_parts_unknown_size(void **state)
{
	const size_t size = 5 * MIB + 3;
	uint8_t *src = pattern(size);
	struct tfs_buf out = { 0 };
	struct fake f;

	(void)state;
	fake_init(&f, src, size);
	assert_int_equal(tfs_http_get_parts(NULL, fake_range, &f, 2 * MIB, 4, &out), 0);
	assert_int_equal(out.len, size);
	assert_memory_equal(out.data, src, size);
	assert_int_equal(f.calls, 3);
	assert_int_equal(f.offs[0], 0);
	tfs_buf_free(&out);
	free(src);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_split_fetches_parallel_ranges),
		cmocka_unit_test(test_split_on_a_pool),
		cmocka_unit_test(test_split_part_sizes),
		cmocka_unit_test(test_split_size_mismatch_is_eio),
		cmocka_unit_test(test_split_range_error),
		cmocka_unit_test(test_parts_unknown_size),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
