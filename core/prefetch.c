/* SPDX-License-Identifier: MIT */
/* prefetch: loads chunks into the cache ahead of readers, as tasks on the lake's worker pool. */
#include "prefetch.h"

#include <assert.h>
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define MIN_WINDOW 2   /* chunks ahead once a run is sequential */
#define FIRST_WINDOW 8 /* at most, ahead of a first read at the start (which may be np.load's) */
#define MAX_WINDOW 64  /* chunks ahead at most, whatever the budget */
/* Runs a stream follows at once. One reader makes several: memcpy of a whole mapping touches its
 * last page first, and the kernel reads ahead around every fault, while the scan goes on. */
#define RUNS 4
/* A column read at random has the frame indexes of its chunks loaded together, as its chunk
 * list was, so that a cold row costs one read (its frames) instead of two: up to this many
 * chunks (a 256 GiB column at the default chunk size); a larger one loads each as it is met. */
#define INDEX_WARM_MAX 65536
/* ... once this many runs apart are followed at once, none of them sequential: a reader at
 * random. A scan's large reads, sent in parallel, may arrive out of order and start a run or two
 * that join again when the reads between them arrive; those load no index. */
#define INDEX_WARM_RUNS 3
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

/* A run: reads that follow one another, each starting where the ones before it ended (or a
 * read's length away, before or after: the kernel sends read-ahead out of order and skips
 * pages it has). Rows are the reader's (a view's rows for a view); positions are chunks in
 * the stream's order. */
struct run {
	uint64_t first, next; /* rows [first, next) were read in this run */
	uint64_t widest;      /* rows of its widest read */
	size_t lo, pos;	      /* the nearest and furthest positions read */
	size_t window;	      /* chunks kept ahead; 0 until the run is sequential */
	size_t scheduled_end; /* positions below this were scheduled */
	size_t scheduled_lo;  /* backwards: positions from this on were scheduled */
	uint64_t used;	      /* the stream's access count when it last grew; 0: a free slot */
	int sequential;
	int backward; /* it grows at its front: chunks ahead are those before lo */
};

struct tfs_stream {
	struct tfs_prefetcher *pf;
	struct tfs_version *v;
	size_t col;
	uint32_t *order; /* NULL: identity */
	size_t n;
	uint64_t run_rows; /* a run this long is sequential: half a chunk's rows, 2 at least */
	pthread_mutex_t lock;
	uint64_t accesses;     /* protected by lock */
	struct run runs[RUNS]; /* protected by lock */
	int expect;	       /* the next new run is sequential from its start; protected by lock */
	int indexes;	       /* the column's frame indexes were asked for; protected by lock */
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
	const struct tfs_column *c;
	uint64_t per_chunk;

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
	c = &v->manifest.cols[col];
	per_chunk = c->rows_per_chunk ? c->rows_per_chunk
				      : (c->nchunks ? (c->rows + c->nchunks - 1) / c->nchunks : 1);
	st->run_rows = per_chunk / 2 > 2 ? per_chunk / 2 : 2;
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
	st->expect = 1;
	pthread_mutex_unlock(&st->lock);
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
	if (pf->queued_bytes + pending + bytes > pf->max_ahead ||
	    !tfs_cache_room_ahead(pf->cache, pf->queued_bytes + bytes)) {
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
	/* Views are read front to back, in whole chunks. (A chunk written before frames, or of
	 * two frames or less, has an empty index: one small read.) */
	if (st->order || c->nchunks > INDEX_WARM_MAX)
		return;
	for (size_t k = 0; k < c->nchunks; k++)
		if (schedule(st, k, 1))
			break;
}

/* Runs followed now that are not sequential (a new run, not used yet, is not counted). Called
 * with st->lock. */
static unsigned random_runs(const struct tfs_stream *st)
{
	unsigned n = 0;

	for (const struct run *r = st->runs; r < st->runs + RUNS; r++)
		n += r->used && !r->sequential;
	return n;
}

/* The run an access of rows [first, last] continues: one whose rows it meets, give or take its
 * own length (and half a chunk more for a sequential run: a scan that goes backwards reads each
 * block front to back, a block before the last, and one through a mapping skips the pages the
 * kernel has); NULL when it starts a new one. An access that meets several joins them into
 * one. Called with st->lock. */
static struct run *run_of(struct tfs_stream *st, uint64_t first, uint64_t last)
{
	struct run *into = NULL;

	for (struct run *r = st->runs; r < st->runs + RUNS; r++) {
		const uint64_t slack = last - first + 2 + (r->sequential ? st->run_rows : 0);

		if (!r->used || first > r->next + slack || last + slack < r->first)
			continue;
		if (!into) {
			into = r;
			continue;
		}
		/* Two runs joined: backwards when the shorter was before the longer. */
		if (r->next - r->first != into->next - into->first)
			into->backward = (r->next - r->first < into->next - into->first) ==
					 (r->first < into->first);
		into->first = r->first < into->first ? r->first : into->first;
		into->next = r->next > into->next ? r->next : into->next;
		into->widest = r->widest > into->widest ? r->widest : into->widest;
		into->lo = r->lo < into->lo ? r->lo : into->lo;
		into->pos = r->pos > into->pos ? r->pos : into->pos;
		into->window = r->window > into->window ? r->window : into->window;
		into->scheduled_end =
			r->scheduled_end > into->scheduled_end ? r->scheduled_end : into->scheduled_end;
		into->scheduled_lo =
			r->scheduled_lo < into->scheduled_lo ? r->scheduled_lo : into->scheduled_lo;
		into->sequential |= r->sequential;
		r->used = 0;
	}
	return into;
}

/* A slot for a new run: a free one, else the one used longest ago. Called with st->lock. */
static struct run *run_new(struct tfs_stream *st)
{
	struct run *r = st->runs;

	for (struct run *q = st->runs; q < st->runs + RUNS && r->used; q++)
		if (q->used < r->used)
			r = q;
	if (r->used && r->sequential) { /* a scan given up */
		pthread_mutex_lock(&st->pf->lock);
		st->pf->st.random_resets++;
		pthread_mutex_unlock(&st->pf->lock);
	}
	memset(r, 0, sizeof(*r));
	return r;
}

/* Chunks to keep loading ahead of a run at most window, and for a view as many as fit the cache
 * beside those its read holds: a read of a view takes rows of every chunk of its shuffle window,
 * first to last, and at a window's end of two windows. Loads past that would evict chunks the
 * reader needs before them (one chunk is left for frame indexes and other columns). */
static size_t ahead_of(const struct tfs_stream *st, size_t window, size_t first, size_t last,
		       uint64_t chunk_bytes)
{
	uint64_t fit, held;

	if (!st->order || last < first || !chunk_bytes)
		return window;
	fit = tfs_cache_budget(st->pf->cache) / chunk_bytes;
	held = last - first + 2;
	return fit <= held ? 0 : fit - held < window ? (size_t)(fit - held) : window;
}

/* Run r is sequential: whole chunks serve it. window chunks ahead load from now on (0: from its
 * next chunk on). */
static void run_sequential(struct tfs_stream *st, struct run *r, size_t window)
{
	r->sequential = 1;
	r->window = window;
	pthread_mutex_lock(&st->pf->lock);
	st->pf->st.sequential_streams++;
	pthread_mutex_unlock(&st->pf->lock);
}

int tfs_stream_access(struct tfs_stream *st, uint64_t first_row, uint64_t last_row, size_t first,
		      size_t last)
{
	const struct tfs_column *c = &st->v->manifest.cols[st->col];
	/* Listed chunks (data parts) are filled up to their target. */
	uint64_t chunk_bytes =
		c->rows_per_chunk ? c->rows_per_chunk * c->row_bytes : c->chunk_bytes;
	size_t max_window = 0, end;
	struct run *r;
	int seq;

	if (st->pf->nthreads && st->n && chunk_bytes)
		max_window = (size_t)(st->pf->max_ahead / chunk_bytes);
	if (max_window > MAX_WINDOW)
		max_window = MAX_WINDOW;
	if (st->n && last >= st->n)
		last = st->n - 1;

	pthread_mutex_lock(&st->lock);
	st->accesses++;
	r = run_of(st, first_row, last_row);
	if (!r) {
		const int start = st->accesses == 1 && first == 0;

		r = run_new(st);
		r->first = first_row;
		r->next = last_row + 1;
		r->widest = last_row - first_row + 1;
		r->lo = r->scheduled_lo = first;
		r->pos = last;
		/* A first access at the very start is how np.load, cat, dd and every scan begin:
		 * load ahead at once rather than after half a chunk of on-demand reads (each a
		 * round trip on a remote store), a chunk per loader but at most FIRST_WINDOW: a
		 * random reader that opened the file with np.load (which reads here first) costs
		 * no more than that, and its next jump starts a run of its own. A view is read
		 * front to back from wherever its reader starts. A read over three chunks of a
		 * column or more (one at least whole) is a scan's, one of its parallel reads that
		 * arrived before those it follows: whole chunks serve it, and its run loads ahead
		 * once it goes on. */
		if (st->expect)
			run_sequential(st, r, start_window(st->pf));
		else if (start)
			run_sequential(st, r,
				       start_window(st->pf) < FIRST_WINDOW ? start_window(st->pf)
								   : FIRST_WINDOW);
		else if (!st->order && last >= first + 2) /* a scan's read, out of order */
			run_sequential(st, r, 0);
		else if (st->pf->nthreads && random_runs(st) + 1 >= INDEX_WARM_RUNS)
			warm_indexes(st);
		st->expect = 0;
	} else {
		const int front = first_row < r->first, back = last_row + 1 > r->next;

		/* A scan backwards (memmove from a mapping's end) reads each block before the
		 * last, front to back: the run grows at its front. */
		if (front != back)
			r->backward = front;
		if (front)
			r->first = first_row;
		if (back)
			r->next = last_row + 1;
		if (last_row - first_row + 1 > r->widest)
			r->widest = last_row - first_row + 1;
		/* Half a chunk read in order, and three reads' worth at least (the kernel reads a
		 * MiB around every page fault of a mapping read at random, and two such reads may
		 * meet): whole chunks from now on, and chunks ahead once the run goes on to the next
		 * (a reader of blocks that jumps loads nothing ahead). */
		if (!r->sequential && r->next - r->first >= st->run_rows &&
		    r->next - r->first >= 3 * r->widest)
			run_sequential(st, r, 0);
		/* The reader keeps up: widen the window, to a chunk per loader at least, up to what
		 * the budget allows. */
		if (r->sequential && (last > r->pos || first < r->lo))
			r->window = r->window * 2 > start_window(st->pf) ? r->window * 2
									 : start_window(st->pf);
		if (last > r->pos)
			r->pos = last;
		if (first < r->lo)
			r->lo = first;
	}
	r->used = st->accesses;
	seq = r->sequential;
	if (r->window > max_window)
		r->window = max_window;
	if (r->backward) { /* the chunks before its front */
		const size_t stop = r->lo > r->window ? r->lo - r->window : 0;

		if (r->scheduled_lo > r->lo)
			r->scheduled_lo = r->lo;
		while (r->window && r->scheduled_lo > stop &&
		       !schedule(st, chunk_at(st, r->scheduled_lo - 1), 0))
			r->scheduled_lo--;
	} else {
		end = r->pos + 1 + ahead_of(st, r->window, first, last, chunk_bytes);
		if (end > st->n)
			end = st->n;
		/* Positions after the first that this read touches are needed now too: a read of
		 * a view spans rows of every chunk in its shuffle window. The loaders take those in
		 * parallel while the reader's thread loads the first itself. */
		if (r->scheduled_end < first + 1)
			r->scheduled_end = first + 1;
		while (r->window && r->scheduled_end < end &&
		       !schedule(st, chunk_at(st, r->scheduled_end), 0))
			r->scheduled_end++;
	}
	pthread_mutex_unlock(&st->lock);
	return seq;
}
