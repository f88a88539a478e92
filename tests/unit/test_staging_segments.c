/* SPDX-License-Identifier: MIT */
/* Unit tests of gpu/arenareg: a range registered a segment at a time, against a fake driver
 * that records what is registered, refuses where told and maps where told. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "arenareg.h"

#define MAX_SEGS 64

struct fake {
	uint8_t *base;
	struct {
		uint8_t *p;
		uint64_t n;
	} live[MAX_SEGS]; /* registered now */
	unsigned nlive, calls;
	unsigned refuse_at; /* the call (1-based) refused; 0: none */
	unsigned delta_fails_at;
	uint8_t *apart_from; /* segments at or after this map at another offset (a first call's
			      * range is mapped at one) */
	unsigned delta_calls;
	/* The range prepare was last called on, until a reg takes it (prepare_ops only). */
	uint8_t *prepared_p;
	uint64_t prepared_n;
	unsigned prepares;
};

static void fake_prepare(void *ctx, uint8_t *p, uint64_t n)
{
	struct fake *f = ctx;

	f->prepared_p = p;
	f->prepared_n = n;
	f->prepares++;
}

static int fake_reg(void *ctx, uint8_t *p, uint64_t n)
{
	struct fake *f = ctx;

	if (f->prepares) { /* prepare_ops: this very range was prepared just before */
		assert_ptr_equal(f->prepared_p, p);
		assert_int_equal(f->prepared_n, n);
		f->prepared_p = NULL;
	}
	if (++f->calls == f->refuse_at)
		return 2;			/* as cudaErrorMemoryAllocation */
	for (unsigned i = 0; i < f->nlive; i++) /* no overlap with what stands */
		assert_true(p + n <= f->live[i].p || p >= f->live[i].p + f->live[i].n);
	assert_true(f->nlive < MAX_SEGS);
	f->live[f->nlive].p = p;
	f->live[f->nlive].n = n;
	f->nlive++;
	return 0;
}

static void fake_unreg(void *ctx, uint8_t *p)
{
	struct fake *f = ctx;

	for (unsigned i = 0; i < f->nlive; i++)
		if (f->live[i].p == p) {
			f->live[i] = f->live[--f->nlive];
			return;
		}
	fail_msg("unregistered a range never registered");
}

static int fake_delta(void *ctx, uint8_t *p, intptr_t *delta)
{
	struct fake *f = ctx;

	if (++f->delta_calls == f->delta_fails_at)
		return 1;
	for (unsigned i = 0; i < f->nlive; i++)
		if (p >= f->live[i].p && p < f->live[i].p + f->live[i].n) {
			/* A range registered in one call is mapped at one offset. */
			*delta = f->apart_from && f->live[i].p >= f->apart_from ? 8192 : 4096;
			return 0;
		}
	fail_msg("asked the device address of memory not registered");
	return 1;
}

static const struct tfs_segment_ops ops = {
	.reg = fake_reg,
	.unreg = fake_unreg,
	.delta = fake_delta,
};

static const struct tfs_segment_ops prepare_ops = {
	.prepare = fake_prepare,
	.reg = fake_reg,
	.unreg = fake_unreg,
	.delta = fake_delta,
};

/* The ranges registered: addresses only, never read or written. */
static uint8_t mem[2048];

/* What stands covers [base, base + len) exactly. */
static void assert_covers(const struct fake *f, uint8_t *base, uint64_t len)
{
	uint64_t sum = 0;

	for (unsigned i = 0; i < f->nlive; i++) {
		assert_true(f->live[i].p >= base && f->live[i].p + f->live[i].n <= base + len);
		sum += f->live[i].n;
	}
	assert_int_equal(sum, len);
}

static void test_segments_cover_the_range(void **state)
{
	uint8_t *base = mem;
	struct fake f = { 0 };
	intptr_t delta = 0;
	unsigned calls;

	(void)state;
	/* 10 segments of 128 and a last one of 40. */
	assert_int_equal(tfs_register_segments(&ops, &f, base, 1320, 128, &delta, &calls), 0);
	assert_int_equal(calls, 11);
	assert_int_equal(f.nlive, 11);
	assert_int_equal(delta, 4096);
	assert_covers(&f, base, 1320);
	/* A range of one segment or less, or no segment size: one call. */
	memset(&f, 0, sizeof(f));
	assert_int_equal(tfs_register_segments(&ops, &f, base, 128, 128, &delta, &calls), 0);
	assert_int_equal(calls, 1);
	assert_covers(&f, base, 128);
	memset(&f, 0, sizeof(f));
	assert_int_equal(tfs_register_segments(&ops, &f, base, 1000, 0, &delta, &calls), 0);
	assert_int_equal(calls, 1);
	assert_covers(&f, base, 1000);
}

static void test_a_refusal_leaves_nothing_registered(void **state)
{
	intptr_t delta = 7;
	unsigned calls = 9;

	(void)state;
	for (unsigned at = 1; at <= 4; at++) {
		struct fake f = { .refuse_at = at };

		assert_int_equal(tfs_register_segments(&ops, &f, mem, 512, 128, &delta, &calls), 2);
		assert_int_equal(f.nlive, 0);
		assert_int_equal(calls, 0);
		assert_int_equal(delta, 7); /* untouched */
	}
	for (unsigned at = 1; at <= 4; at++) {
		struct fake f = { .delta_fails_at = at };

		assert_int_equal(tfs_register_segments(&ops, &f, mem, 512, 128, &delta, &calls), 1);
		assert_int_equal(f.nlive, 0);
	}
	{
		struct fake f = { .refuse_at = 1 };

		assert_int_equal(tfs_register_segments(&ops, &f, mem, 100, 128, &delta, &calls), 2);
		assert_int_equal(f.nlive, 0);
	}
}

static void test_segments_mapped_apart_are_registered_whole(void **state)
{
	struct fake f = { 0 };
	intptr_t delta = 0;
	unsigned calls;

	(void)state;
	/* From the third segment on the device maps at another offset: the segments go, and the
	 * range is registered in one call (mapped at one offset). */
	f.apart_from = mem + 256;
	assert_int_equal(tfs_register_segments(&ops, &f, mem, 640, 128, &delta, &calls), 0);
	assert_int_equal(calls, 1);
	assert_int_equal(f.nlive, 1);
	assert_int_equal(delta, 4096);
	assert_covers(&f, mem, 640);
	assert_int_equal(f.calls, 3 + 1); /* stopped at the first segment mapped apart */
	/* The whole range refused after segments were undone: nothing stands. */
	memset(&f, 0, sizeof(f));
	f.apart_from = mem + 128;
	f.refuse_at = 3;
	assert_int_equal(tfs_register_segments(&ops, &f, mem, 640, 128, &delta, &calls), 2);
	assert_int_equal(f.nlive, 0);
}

/* Each registration, of a segment or of the whole range, is of a range prepared just before it
 * (its pages committed, in the driver's table), also the one a refusal ends. */
static void test_each_range_is_prepared_before_it_is_registered(void **state)
{
	struct fake f = { 0 };
	intptr_t delta = 0;
	unsigned calls;

	(void)state;
	assert_int_equal(tfs_register_segments(&prepare_ops, &f, mem, 1320, 128, &delta, &calls),
			 0);
	assert_int_equal(calls, 11);
	assert_int_equal(f.prepares, 11);
	assert_covers(&f, mem, 1320);
	memset(&f, 0, sizeof(f));
	assert_int_equal(tfs_register_segments(&prepare_ops, &f, mem, 100, 128, &delta, &calls), 0);
	assert_int_equal(f.prepares, 1);
	/* Mapped apart from the third segment: three prepared, then the whole range. */
	memset(&f, 0, sizeof(f));
	f.apart_from = mem + 256;
	assert_int_equal(tfs_register_segments(&prepare_ops, &f, mem, 640, 128, &delta, &calls), 0);
	assert_int_equal(calls, 1);
	assert_int_equal(f.prepares, 3 + 1);
	assert_covers(&f, mem, 640);
	/* A refusal of the second segment: it was prepared, the third never is. */
	memset(&f, 0, sizeof(f));
	f.refuse_at = 2;
	assert_int_equal(tfs_register_segments(&prepare_ops, &f, mem, 512, 128, &delta, &calls), 2);
	assert_int_equal(f.prepares, 2);
	assert_int_equal(f.nlive, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_segments_cover_the_range),
		cmocka_unit_test(test_a_refusal_leaves_nothing_registered),
		cmocka_unit_test(test_segments_mapped_apart_are_registered_whole),
		cmocka_unit_test(test_each_range_is_prepared_before_it_is_registered),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
