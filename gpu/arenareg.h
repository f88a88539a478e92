/* SPDX-License-Identifier: MIT */
/* arenareg: an address range registered with a device driver in segments, each call short, so
 * that the driver is not held for the whole range (other threads' calls wait for the one under
 * way, not for all of them), then checked to be mapped for the device at one offset. The driver's
 * calls come in a table, so that the walk is the same with or without a device. */
#ifndef TFS_ARENAREG_H
#define TFS_ARENAREG_H

#include <stdint.h>

struct tfs_segment_ops {
	/* Optional: ready [p, p + n) for the reg that follows at once (commit its pages, so that
	 * the driver does not fault them in while it holds its lock). Nothing it meets is a
	 * refusal: reg comes next whatever it did. */
	void (*prepare)(void *ctx, uint8_t *p, uint64_t n);
	/* Register [p, p + n): 0, or the driver's nonzero refusal. */
	int (*reg)(void *ctx, uint8_t *p, uint64_t n);
	/* Undo reg of the range that starts at p. */
	void (*unreg)(void *ctx, uint8_t *p);
	/* *delta: the device's address of p minus p. 0, or the driver's refusal. */
	int (*delta)(void *ctx, uint8_t *p, intptr_t *delta);
};

/* Register [base, base + len) a segment of seg bytes at a time (the last one shorter). Returns
 * 0 with *delta the device's offset of every byte of it, or the first refusal with nothing left
 * registered. Segments the device maps at different offsets are unregistered and the range is
 * registered again in one call, which maps it at one. *calls: the registrations that stand
 * (1 for one call). */
int tfs_register_segments(const struct tfs_segment_ops *ops, void *ctx, uint8_t *base, uint64_t len,
			  uint64_t seg, intptr_t *delta, unsigned *calls);

#endif
