/* SPDX-License-Identifier: MIT */
/* arenareg: a range registered a segment at a time, then checked for one device offset. */
#include "arenareg.h"

/* Unregister the first n segments of [base, ...). */
static void undo(const struct tfs_segment_ops *ops, void *ctx, uint8_t *base, uint64_t seg,
		 uint64_t n)
{
	for (uint64_t i = 0; i < n; i++)
		ops->unreg(ctx, base + i * seg);
}

/* Register [p, p + n), prepared first where the driver's table says how. */
static int reg(const struct tfs_segment_ops *ops, void *ctx, uint8_t *p, uint64_t n)
{
	if (ops->prepare)
		ops->prepare(ctx, p, n);
	return ops->reg(ctx, p, n);
}

/* The whole range in one call, and its offset. */
static int whole(const struct tfs_segment_ops *ops, void *ctx, uint8_t *base, uint64_t len,
		 intptr_t *delta, unsigned *calls)
{
	int rc = reg(ops, ctx, base, len);

	if (rc)
		return rc;
	rc = ops->delta(ctx, base, delta);
	if (rc) {
		ops->unreg(ctx, base);
		return rc;
	}
	*calls = 1;
	return 0;
}

int tfs_register_segments(const struct tfs_segment_ops *ops, void *ctx, uint8_t *base, uint64_t len,
			  uint64_t seg, intptr_t *delta, unsigned *calls)
{
	const uint64_t n = seg && len > seg ? (len + seg - 1) / seg : 1;
	intptr_t first = 0, d = 0;
	uint64_t i;
	int rc = 0, apart = 0;

	*calls = 0;
	if (n == 1)
		return whole(ops, ctx, base, len, delta, calls);
	for (i = 0; i < n; i++) {
		const uint64_t at = i * seg, take = len - at < seg ? len - at : seg;

		rc = reg(ops, ctx, base + at, take);
		if (rc)
			break;
		rc = ops->delta(ctx, base + at, &d);
		if (i == 0)
			first = d;
		if (rc || d != first) {
			apart = !rc;
			i++; /* registered: undone with the rest */
			break;
		}
	}
	if (rc || apart)
		undo(ops, ctx, base, seg, i);
	if (rc)
		return rc;
	if (apart)
		return whole(ops, ctx, base, len, delta, calls);
	*delta = first;
	*calls = (unsigned)n;
	return 0;
}
