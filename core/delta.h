/* SPDX-License-Identifier: MIT */
/* delta: the line filter of framed chunks (FORMAT.md, `import --filter delta`): each byte stored
 * as its difference from the byte one image line before it, which zstd codes in far fewer bits
 * than pixels themselves; and its inverse. */
#ifndef TFS_DELTA_H
#define TFS_DELTA_H

#include <stddef.h>
#include <stdint.h>

/* dst[i] = src[i] - src[i - line] (mod 256), a byte before src[0] reading as 0, so that
 * nothing before src is needed to undo it. line >= 1; src and dst do not overlap. */
void tfs_delta_encode(const uint8_t *restrict src, uint8_t *restrict dst, size_t len, size_t line);

/* Undo tfs_delta_encode in place: buf becomes the bytes it was made from. */
void tfs_delta_decode(uint8_t *buf, size_t len, size_t line);

#endif
