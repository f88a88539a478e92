/* SPDX-License-Identifier: MIT */
/* frames_fixture: a check of framed chunks for the unit test programs that encode them, which
 * include cmocka.h first. */
#ifndef TFS_FRAMES_FIXTURE_H
#define TFS_FRAMES_FIXTURE_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "object.h"
#include "util.h"

/* Every frame of t, decoded alone from obj, last first (as a reader that jumps), makes raw's len
 * bytes in dst. */
static inline void assert_frames_decode(const struct tfs_buf *obj, const struct tfs_frames *t,
					uint8_t *dst, const uint8_t *raw, size_t len)
{
	memset(dst, 0, len);
	for (uint32_t i = t->n; i-- > 0;)
		assert_int_equal(tfs_frame_decode(t, i, obj->data + t->f[i].off,
						  dst + (size_t)i * t->frame_raw),
				 0);
	assert_memory_equal(dst, raw, len);
}

#endif
