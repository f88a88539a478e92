/* SPDX-License-Identifier: MIT */
/* gatherrun: the host's executors of gather lists. A list's ops run on the CPU, a large list's
 * split by bytes over threads of a pool and written past the CPU's caches (a batch larger than
 * the cache is not read back from it: fetching each destination line before overwriting it would
 * add a third of the memory traffic); a part of the destination as iovecs into the pinned
 * chunks (a reply written straight from the cache), or copied out. */
#include "reader.h"

#include <assert.h>
#include <stdint.h>
#include <string.h>

#if defined(__x86_64__) || defined(__SSE2__)
#include <emmintrin.h>
#define HAVE_STREAM 1
#else
#define HAVE_STREAM 0
#endif

/* A part is at least this many bytes: a smaller one costs more in handing it over. */
#define PART_MIN (2u << 20)
#define MAX_PARTS 16
/* A list of at least this many bytes, into a destination not written lately, is written past
 * the caches: more than a core's share of the last-level cache on current servers (glibc's
 * memcpy goes past the caches from 3/4 of that share; the ops of a batch are each far smaller
 * than the batch). A smaller list stays in the caches, where whoever reads the batch next finds
 * it. The size the system reports for the last-level cache is not used: under a hypervisor it
 * may be the whole host's. */
#define STREAM_MIN (8u << 20)

/* Copy n bytes without bringing the destination into the caches. The stores are weakly ordered:
 * stream_end before anything that tells another thread they are done. */
static void copy_stream(uint8_t *d, const uint8_t *s, size_t n)
{
#if HAVE_STREAM
	size_t head = (16 - ((uintptr_t)d & 15)) & 15, i = 0;

	if (head > n)
		head = n;
	memcpy(d, s, head);
	d += head;
	s += head;
	n -= head;
	for (; i + 64 <= n; i += 64) {
		const __m128i a = _mm_loadu_si128((const __m128i *)(const void *)(s + i));
		const __m128i b = _mm_loadu_si128((const __m128i *)(const void *)(s + i + 16));
		const __m128i c = _mm_loadu_si128((const __m128i *)(const void *)(s + i + 32));
		const __m128i e = _mm_loadu_si128((const __m128i *)(const void *)(s + i + 48));

		_mm_stream_si128((__m128i *)(void *)(d + i), a);
		_mm_stream_si128((__m128i *)(void *)(d + i + 16), b);
		_mm_stream_si128((__m128i *)(void *)(d + i + 32), c);
		_mm_stream_si128((__m128i *)(void *)(d + i + 48), e);
	}
	memcpy(d + i, s + i, n - i);
#else
	memcpy(d, s, n);
#endif
}

static void stream_end(void)
{
#if HAVE_STREAM
	_mm_sfence();
#endif
}

/* n bytes from s to d: a column's row of 4 to 16 bytes (a label, a few numbers) by two loads and
 * two stores each, not a call of memcpy (a shuffled batch of 2,048 int64 labels is 2,048 ops). */
static inline void copy_row(uint8_t *d, const uint8_t *s, size_t n)
{
	if (n >= 8 && n <= 16) {
		uint64_t a, b;

		memcpy(&a, s, 8);
		memcpy(&b, s + n - 8, 8);
		memcpy(d, &a, 8);
		memcpy(d + n - 8, &b, 8);
	} else if (n >= 4 && n < 8) {
		uint32_t a, b;

		memcpy(&a, s, 4);
		memcpy(&b, s + n - 4, 4);
		memcpy(d, &a, 4);
		memcpy(d + n - 4, &b, 4);
	} else {
		memcpy(d, s, n);
	}
}

/* The ops' bytes [lo, hi), counted in list order, into dst. */
static void run_bytes(const struct tfs_gather_list *l, uint8_t *dst, uint64_t lo, uint64_t hi,
		      int stream)
{
	uint64_t at = 0;

	for (size_t i = 0; i < l->nops && at < hi; i++) {
		const struct tfs_gather_op *o = &l->ops[i];
		const uint64_t a = lo > at ? lo - at : 0;
		const uint64_t b = hi - at < o->bytes ? hi - at : o->bytes;
		uint8_t *to = dst + o->dst + a;

		at += o->bytes;
		if (a >= b)
			continue;
		if (!o->src)
			memset(to, 0, (size_t)(b - a));
		else if ((uintptr_t)o->src == (uintptr_t)(dst + o->dst))
			continue; /* already in place */
		else if (stream)
			copy_stream(to, (const uint8_t *)(uintptr_t)(o->src + a), (size_t)(b - a));
		else
			copy_row(to, (const uint8_t *)(uintptr_t)(o->src + a), (size_t)(b - a));
	}
	if (stream)
		stream_end();
}

void tfs_gather_list_run(const struct tfs_gather_list *l, uint8_t *dst)
{
	run_bytes(l, dst, 0, l->bytes, 0);
}

struct part {
	struct tfs_work w;
	const struct tfs_gather_list *l;
	uint8_t *dst;
	uint64_t lo, hi;
	int stream;
};

static int part_run(struct tfs_work *w)
{
	struct part *p = (struct part *)(void *)((char *)w - offsetof(struct part, w));

	run_bytes(p->l, p->dst, p->lo, p->hi, p->stream);
	return 0;
}

void tfs_gather_list_run_on(const struct tfs_gather_list *l, uint8_t *dst,
			    struct tfs_workpool *pool, int cold)
{
	/* Twice STREAM_MIN does not stay in the cache whole, lately written or not. */
	const int stream = HAVE_STREAM && l->bytes >= STREAM_MIN &&
			   (cold || l->bytes >= 2 * (uint64_t)STREAM_MIN);
	uint64_t n = pool ? l->bytes / PART_MIN : 0;
	struct part parts[MAX_PARTS];
	struct tfs_workgroup g = { 0 };

	if (pool && n > tfs_workpool_threads(pool) + 1)
		n = tfs_workpool_threads(pool) + 1; /* + 1: this thread */
	if (n > MAX_PARTS)
		n = MAX_PARTS;
	if (n < 2) {
		run_bytes(l, dst, 0, l->bytes, stream);
		return;
	}
	tfs_workgroup_init(&g, pool);
	for (uint64_t k = 0; k < n; k++) {
		parts[k] = (struct part){ .l = l, .dst = dst, .stream = stream };
		parts[k].w.run = part_run;
		parts[k].lo = l->bytes * k / n;
		parts[k].hi = l->bytes * (k + 1) / n;
		if (k)
			tfs_workgroup_submit(&g, &parts[k].w, TFS_WORK_WAITED);
	}
	/* This thread takes the first part, then any the workers have not started. */
	part_run(&parts[0].w);
	tfs_workgroup_wait(&g);
	tfs_workgroup_destroy(&g);
}

/* The part of op o that falls in [from, to) of the destination: [*lo, *hi), empty when
 * *hi <= *lo. */
static void clip(const struct tfs_gather_op *o, uint64_t from, uint64_t to, uint64_t *lo,
		 uint64_t *hi)
{
	*lo = o->dst > from ? o->dst : from;
	*hi = o->dst + o->bytes < to ? o->dst + o->bytes : to;
}

size_t tfs_gather_list_iov(const struct tfs_gather_list *l, uint64_t from, uint64_t to,
			   const uint8_t *zeros, struct iovec *iov, size_t max)
{
	size_t n = 0;
	uint64_t at = from;

	for (size_t i = 0; i < l->nops && at < to; i++) {
		const struct tfs_gather_op *o = &l->ops[i];
		uint64_t lo, hi;

		clip(o, from, to, &lo, &hi);
		if (hi <= lo)
			continue;
		assert(lo == at); /* in order, without gaps */
		if (n == max)
			return 0;
		iov[n].iov_base = o->src ? (void *)(uintptr_t)(o->src + (lo - o->dst))
					 : (void *)(uintptr_t)zeros;
		iov[n++].iov_len = (size_t)(hi - lo);
		at = hi;
	}
	assert(at == to);
	return n;
}

void tfs_gather_list_copy(const struct tfs_gather_list *l, uint64_t from, uint64_t to, uint8_t *out)
{
	for (size_t i = 0; i < l->nops; i++) {
		const struct tfs_gather_op *o = &l->ops[i];
		uint64_t lo, hi;

		clip(o, from, to, &lo, &hi);
		if (hi <= lo)
			continue;
		if (o->src)
			memcpy(out + (lo - from), (const void *)(uintptr_t)(o->src + (lo - o->dst)),
			       (size_t)(hi - lo));
		else
			memset(out + (lo - from), 0, (size_t)(hi - lo));
	}
}
