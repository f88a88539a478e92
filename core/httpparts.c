/* SPDX-License-Identifier: MIT */
/* httpparts: whole objects fetched as ranges of one, many at once (tfs_parallel: an object store
 * caps what one connection brings). */
#include "httpparts.h"

#include <assert.h>
#include <errno.h>
#include <stdint.h>

#define SIZED_MIN (64u << 10) /* a smaller buffer says nothing of the object's size */

struct parts {
	tfs_http_range_fn fn;
	void *arg;
	uint8_t *base;
	uint64_t total, first, part; /* parts cover [first, total) */
};

static int fetch_part(void *arg, size_t i)
{
	const struct parts *p = arg;
	const uint64_t off = p->first + i * p->part;
	const size_t len = (size_t)(off + p->part > p->total ? p->total - off : p->part);
	int64_t total;
	ssize_t n = p->fn(p->arg, off, p->base + off, len, &total);

	if (n < 0)
		return (int)n;
	/* The object changed size under us, or a range came back short. */
	if ((size_t)n != len || (total >= 0 && (uint64_t)total != p->total))
		return -EIO;
	return 0;
}

/* Fetch p's parts [p->first, p->total) into out, which holds the bytes before p->first, up to
 * `parallel` at a time; out then holds the whole object, NUL-terminated. */
static int fetch_parts(struct tfs_workpool *pool, enum tfs_work_prio prio, struct parts *p,
		       unsigned parallel, struct tfs_buf *out)
{
	int rc;

	assert(out->len == p->first);
	if (p->total > SIZE_MAX / 2)
		return -EFBIG;
	rc = tfs_buf_reserve(out, (size_t)(p->total - p->first));
	if (rc)
		return rc;
	p->base = out->data;
	rc = tfs_parallel(pool, prio, (size_t)((p->total - p->first + p->part - 1) / p->part),
			  parallel, fetch_part, p);
	if (rc)
		return rc;
	out->len = (size_t)p->total;
	out->data[out->len] = 0;
	return 0;
}

int tfs_http_get_parts(struct tfs_workpool *pool, tfs_http_range_fn fn, void *arg,
		       uint64_t part_size, unsigned parallel, struct tfs_buf *out)
{
	struct parts p = { .fn = fn, .arg = arg, .part = part_size };
	int64_t total = -1;
	uint64_t first = part_size;
	ssize_t n;
	int rc;

	/* A buffer the caller sized for the object (it knew the size) takes it in one request, and
	 * is never reallocated: a pooled buffer stays in its pool's size class. */
	if (out->cap > SIZED_MIN && out->cap - 1 < first)
		first = out->cap - 1;
	out->len = 0;
	rc = tfs_buf_reserve(out, (size_t)first);
	if (rc)
		return rc;
	n = fn(arg, 0, out->data, (size_t)first, &total);
	if (n < 0)
		return (int)n;
	out->len = (size_t)n;
	out->data[out->len] = 0;
	if ((uint64_t)n < first || total <= (int64_t)n)
		return total >= 0 && total != n ? -EIO : 0;
	p.total = (uint64_t)total;
	p.first = first;
	return fetch_parts(pool, TFS_WORK_NORMAL, &p, parallel, out);
}

/* Below this a part's round trip costs more than what splitting saves of its transfer. */
#define SPLIT_PART_MIN (1u << 20)

int tfs_http_get_split(struct tfs_workpool *pool, tfs_http_range_fn fn, void *arg, uint64_t size,
		       unsigned parallel, struct tfs_buf *out)
{
	struct parts p = { .fn = fn, .arg = arg, .total = size, .first = 0 };

	if (parallel < 1)
		parallel = 1;
	p.part = (size + parallel - 1) / parallel;
	if (p.part < SPLIT_PART_MIN)
		p.part = SPLIT_PART_MIN;
	out->len = 0;
	return fetch_parts(pool, TFS_WORK_NORMAL, &p, parallel, out);
}

int tfs_http_get_whole(struct tfs_http *h, tfs_http_range_fn fn, void *arg, uint64_t size,
		       struct tfs_buf *out)
{
	const struct tfs_config_http *cfg = tfs_http_config(h);
	struct tfs_workpool *pool = tfs_http_pool(h);

	return size ? tfs_http_get_split(pool, fn, arg, size, cfg->parallel, out)
		    : tfs_http_get_parts(pool, fn, arg, cfg->part_size, cfg->parallel, out);
}
