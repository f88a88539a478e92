/* SPDX-License-Identifier: MIT */
/* prefetch: loads chunks into the cache ahead of readers, as tasks on the lake's worker pool. */
#include "prefetch.h"

#include <assert.h>
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define MIN_WINDOW 2   /* chunks ahead once a stream looks sequential */
#define FIRST_WINDOW 8 /* at most, ahead of a first read at the start (which may be np.load's) */
#define MAX_WINDOW 64  /* chunks ahead at most, whatever the budget */
#define SEQ_STREAK 2   /* chunk-to-chunk advances before a stream counts as sequential */
/* A column read at random has the frame indexes of its chunks loaded together, as its chunk
 * list was, so that a cold row costs one read (its frames) instead of two: up to this many
 * chunks (a 256 GiB column at the default chunk size); a larger one loads each as it is met. */
#define INDEX_WARM_MAX 65536
#define INDEX_BYTES 4096 /* what an index load counts against the ahead budget: its read */

struct job {
	struct tfs_work work;
	struct tfs_prefetcher *pf;
	struct tfs_version *v; /* referenced by the job */
	size_t col, k;
	uint64_t bytes;
	int index; /* the chunk's frame index, not the chunk */
};

struct tfs_prefetcher {
	struct tfs_cache *cache;
	uint64_t max_ahead;
	struct tfs_workgroup jobs; /* loads queued or under way */
	pthread_mutex_t lock;
	uint64_t queued_bytes;	      /* queued or loading; protected by lock */
	unsigned nthreads;	      /* loaders it keeps busy: the window of a sequential stream */
	struct tfs_prefetch_stats st; /* protected by lock */
};

struct tfs_stream {
	struct tfs_prefetcher *pf;
	struct tfs_version *v;
	size_t col;
	uint32_t *order; /* NULL: identity */
	size_t n;
	pthread_mutex_t lock;
	size_t pos;	      /* last position seen; protected by lock */
	int seen;	      /* protected by lock */
	unsigned streak;      /* consecutive forward advances; protected by lock */
	size_t window;	      /* chunks kept ahead; protected by lock */
	size_t scheduled_end; /* positions below this were scheduled; protected by lock */
	int indexes;	      /* the column's frame indexes were asked for; protected by lock */
};

static void job_done(struct job *j, int rc)
{
	struct tfs_prefetcher *pf = j->pf;

	pthread_mutex_lock(&pf->lock);
	pf->queued_bytes -= j->bytes;
	if (rc == 0)
		pf->st.skipped_cached++;
	else if (rc < 0)
		pf->st.errors++;
	pthread_mutex_unlock(&pf->lock);
	tfs_version_put(j->v);
	free(j);
}

static int job_run(struct tfs_work *w)
{
	struct job *j = (struct job *)w;

	job_done(j, j->index ? tfs_version_index_prefetch(j->v, j->pf->cache, j->col, j->k)
			     : tfs_version_chunk_prefetch(j->v, j->pf->cache, j->col, j->k));
	return 0;
}

/* Cancelled before it started. */
static void job_drop(struct tfs_work *w)
{
	job_done((struct job *)w, 1);
}

int tfs_prefetcher_create(struct tfs_cache *cache, struct tfs_workpool *pool, unsigned nthreads,
			  uint64_t max_ahead, struct tfs_prefetcher **out)
{
	struct tfs_prefetcher *pf = calloc(1, sizeof(*pf));

	if (!pf)
		return -ENOMEM;
	pf->cache = cache;
	pf->max_ahead = max_ahead;
	pf->nthreads = nthreads;
	pthread_mutex_init(&pf->lock, NULL);
	tfs_workgroup_init(&pf->jobs, pool);
	pf->st.threads = nthreads;
	*out = pf;
	return 0;
}

void tfs_prefetcher_destroy(struct tfs_prefetcher *pf)
{
	if (!pf)
		return;
	tfs_workgroup_cancel(&pf->jobs);
	tfs_workgroup_destroy(&pf->jobs);
	pthread_mutex_destroy(&pf->lock);
	free(pf);
}

void tfs_prefetcher_stats(struct tfs_prefetcher *pf, struct tfs_prefetch_stats *st)
{
	pthread_mutex_lock(&pf->lock);
	*st = pf->st;
	st->inflight_bytes = pf->queued_bytes;
	pthread_mutex_unlock(&pf->lock);
}

int tfs_stream_create(struct tfs_prefetcher *pf, struct tfs_version *v, size_t col,
		      const uint32_t *order, size_t n, struct tfs_stream **out)
{
	struct tfs_stream *st = calloc(1, sizeof(*st));

	if (!st)
		return -ENOMEM;
	if (order) {
		st->order = malloc((n ? n : 1) * sizeof(*order));
		if (!st->order) {
			free(st);
			return -ENOMEM;
		}
		memcpy(st->order, order, n * sizeof(*order));
	}
	st->pf = pf;
	st->v = v;
	tfs_version_get(v);
	st->col = col;
	st->n = n;
	pthread_mutex_init(&st->lock, NULL);
	*out = st;
	return 0;
}

/* The window of a stream known to be sequential: a chunk for every loader, so that all of them
 * (and, on a remote store, all their connections) are busy. */
static size_t start_window(const struct tfs_prefetcher *pf)
{
	return pf->nthreads > MIN_WINDOW ? pf->nthreads : MIN_WINDOW;
}

void tfs_stream_expect_sequential(struct tfs_stream *st)
{
	pthread_mutex_lock(&st->lock);
	st->streak = SEQ_STREAK;
	st->window = start_window(st->pf);
	pthread_mutex_unlock(&st->lock);
	pthread_mutex_lock(&st->pf->lock);
	st->pf->st.sequential_streams++;
	pthread_mutex_unlock(&st->pf->lock);
}

void tfs_stream_destroy(struct tfs_stream *st)
{
	if (!st)
		return;
	tfs_version_put(st->v);
	free(st->order);
	pthread_mutex_destroy(&st->lock);
	free(st);
}

static size_t chunk_at(const struct tfs_stream *st, size_t pos)
{
	return st->order ? st->order[pos] : pos;
}

/* Queue chunk k (or its frame index) unless that would exceed the ahead budget. Returns 0, or
 * -ENOSPC when throttled. */
static int schedule(struct tfs_stream *st, size_t k, int index)
{
	struct tfs_prefetcher *pf = st->pf;
	const struct tfs_column *c = &st->v->manifest.cols[st->col];
	const uint64_t pending = tfs_cache_prefetch_pending(pf->cache);
	const uint64_t bytes = index ? INDEX_BYTES : tfs_column_chunk_rows(c, k) * c->row_bytes;
	struct job *j;

	pthread_mutex_lock(&pf->lock);
	if (pf->queued_bytes + pending + bytes > pf->max_ahead) {
		pf->st.throttled++;
		pthread_mutex_unlock(&pf->lock);
		return -ENOSPC;
	}
	j = calloc(1, sizeof(*j));
	if (!j) {
		pthread_mutex_unlock(&pf->lock);
		return -ENOMEM;
	}
	j->work.run = job_run;
	j->work.drop = job_drop;
	j->pf = pf;
	j->v = st->v;
	tfs_version_get(j->v);
	j->col = st->col;
	j->k = k;
	j->bytes = bytes;
	j->index = index;
	pf->queued_bytes += bytes;
	if (index)
		pf->st.indexes++;
	else
		pf->st.scheduled++;
	pthread_mutex_unlock(&pf->lock);
	tfs_workgroup_submit(&pf->jobs, &j->work, TFS_WORK_AHEAD);
	return 0;
}

/* A version column read at random: its chunks' frame indexes, loaded together on the pool.
 * Called with st->lock. */
static void warm_indexes(struct tfs_stream *st)
{
	const struct tfs_column *c = &st->v->manifest.cols[st->col];

	if (st->indexes)
		return;
	st->indexes = 1;
	/* Views are read front to back, in whole chunks; only zstd chunks are framed. */
	if (st->order || c->codec != TFS_CODEC_ZSTD || c->nchunks > INDEX_WARM_MAX)
		return;
	for (size_t k = 0; k < c->nchunks; k++)
		if (schedule(st, k, 1))
			break;
}

int tfs_stream_sequential(struct tfs_stream *st)
{
	int seq;

	pthread_mutex_lock(&st->lock);
	seq = st->streak >= SEQ_STREAK;
	pthread_mutex_unlock(&st->lock);
	return seq;
}

void tfs_stream_access(struct tfs_stream *st, size_t first, size_t last)
{
	const struct tfs_column *c = &st->v->manifest.cols[st->col];
	/* Listed chunks (data parts) are filled up to their target. */
	uint64_t chunk_bytes =
		c->rows_per_chunk ? c->rows_per_chunk * c->row_bytes : c->chunk_bytes;
	size_t max_window, end, span;

	if (!st->pf->nthreads || st->n == 0 || chunk_bytes == 0)
		return;
	max_window = (size_t)(st->pf->max_ahead / chunk_bytes);
	if (max_window > MAX_WINDOW)
		max_window = MAX_WINDOW;
	if (max_window == 0)
		return;
	if (last >= st->n)
		last = st->n - 1;

	pthread_mutex_lock(&st->lock);
	span = last - first + 1;
	if (!st->seen) {
		st->seen = 1;
		st->pos = last;
		if (first != 0)
			warm_indexes(st);
		/* A first access at the very start is how np.load, cat, dd and every scan begin:
		 * load ahead at once rather than after SEQ_STREAK on-demand loads (each a full
		 * round trip on a remote store), a chunk per loader but at most FIRST_WINDOW: a
		 * random reader that opened the file with np.load (which reads here first) costs
		 * no more than that, and its next jump resets the window. */
		if (first == 0 && st->streak < SEQ_STREAK) {
			st->streak = SEQ_STREAK;
			st->window = start_window(st->pf) < FIRST_WINDOW ? start_window(st->pf)
									 : FIRST_WINDOW;
			pthread_mutex_lock(&st->pf->lock);
			st->pf->st.sequential_streams++;
			pthread_mutex_unlock(&st->pf->lock);
		}
	} else if (first > st->pos + 1 + st->window || last + span + st->window + 1 < st->pos) {
		/* A jump: random access. Load nothing ahead until progress is sequential again.
		 * Reads a little behind are tolerated: page faults and readahead arrive out of
		 * order from several threads, and one read of a view spans several positions. */
		if (st->streak >= SEQ_STREAK) {
			pthread_mutex_lock(&st->pf->lock);
			st->pf->st.random_resets++;
			pthread_mutex_unlock(&st->pf->lock);
		}
		st->streak = 0;
		st->window = 0;
		st->scheduled_end = 0;
		st->pos = last;
		warm_indexes(st);
	} else if (last > st->pos) {
		st->streak++;
		if (st->streak == SEQ_STREAK) {
			pthread_mutex_lock(&st->pf->lock);
			st->pf->st.sequential_streams++;
			pthread_mutex_unlock(&st->pf->lock);
		}
		/* The reader keeps up: widen the window, to a chunk per loader at least, up to
		 * what the budget allows. */
		if (st->streak >= SEQ_STREAK) {
			st->window = st->window ? st->window * 2 : MIN_WINDOW;
			if (st->window < start_window(st->pf))
				st->window = start_window(st->pf);
		}
		if (st->window > max_window)
			st->window = max_window;
		st->pos = last;
	}
	end = st->pos + 1 + st->window;
	if (end > st->n)
		end = st->n;
	/* Positions after the first that this read touches are needed now too: a read of a view
	 * spans rows of every chunk in its shuffle window. The loaders take those in parallel
	 * while the reader's thread loads the first itself. */
	if (st->scheduled_end < first + 1)
		st->scheduled_end = first + 1;
	while (st->window && st->scheduled_end < end) {
		if (schedule(st, chunk_at(st, st->scheduled_end), 0))
			break;
		st->scheduled_end++;
	}
	pthread_mutex_unlock(&st->lock);
}
