/* SPDX-License-Identifier: MIT */
/* ctlstage: a stream's batches: staged by rows or range, or `next` in stream order with batches
 * made ahead on the pool; rows of chunks damaged for good padded or (on_error=skip) left out. */
#include "ctlsession.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "lake.h"

void tfs_ctl_drop_ahead(struct tfs_ctl_stream *s, size_t keep)
{
	while (s->nahead > keep)
		tfs_staging_discard(s->ring, s->ahead[--s->nahead].slot);
}

/* The message of a failed tfs_staging_take of slot. */
static void take_error(struct tfs_ctl_stream *s, unsigned slot, int rc, char *err)
{
	size_t c;
	uint64_t need;

	if (rc == -ERANGE) {
		SET_ERR("a token id of the batch does not fit the dtype asked for (dtype=int64 "
			"holds every id)");
		return;
	}
	if (rc != -E2BIG) {
		SET_ERR("cannot gather the rows: %s", strerror(-rc));
		return;
	}
	tfs_staging_overflow(s->ring, slot, &c, &need);
	SET_ERR("the rows hold %" PRIu64 " bytes of column '%s', more than a slot's room for it "
		"(open with room=BYTES)",
		need, tfs_ctl_col(s, c)->name);
}

/* Whether the batch staged now reads single frames of the chunks not cached. A stream's first
 * batch, cold: its rows are a few of each chunk, which single frames serve for less than whole
 * chunks, from a local lake (a remote one pays a round trip a piece, and a frame takes two: its
 * chunk's index, then itself). Later batches read whole chunks. Not once half the cache is full
 * (a later epoch of data larger than the cache): the frames, which no reader's plan knows, would
 * be evicted before the chunks the view's next windows need, and read again whole by the batches
 * after. */
static int first_frames(const struct tfs_ctl_stream *s)
{
	struct tfs_cache *c;

	if (s->staged || !tfs_store_is_local(tfs_lake_store(s->lake)))
		return 0;
	c = tfs_lake_cache(s->lake);
	return tfs_cache_bytes(c) <= tfs_cache_budget(c) / 2;
}

/* Fill a slot with s->rows[0..n) synchronously and lease it. A slot taken by a batch made ahead
 * is reclaimed (youngest first) rather than refusing. */
static int stage_now(struct tfs_ctl_stream *s, int slot, size_t n, uint64_t pos, unsigned *out,
		     char *err)
{
	const int frames = first_frames(s);
	int rc;

	if (frames)
		tfs_reader_frames(s->reader, 1);
	for (;;) {
		rc = tfs_staging_fill(s->ring, slot, s->rows, n, 0);
		if (rc != -EBUSY || !s->nahead)
			break;
		tfs_ctl_drop_ahead(s, s->nahead - 1);
	}
	if (frames)
		tfs_reader_frames(s->reader, 0);
	s->staged = 1;
	if (rc == -EBUSY) {
		if (slot >= 0)
			SET_ERR("slot %d of stream %u is leased: release it first", slot, s->id);
		else
			SET_ERR("no free slot: all %u slots of stream %u are leased (release one)",
				s->depth, s->id);
		return rc;
	}
	*out = (unsigned)rc;
	s->slot_pos[*out] = pos;
	rc = tfs_staging_take(s->ring, *out);
	if (rc)
		take_error(s, *out, rc, err);
	return rc;
}

static void view_rows(const struct tfs_ctl_stream *s, uint64_t *rows, uint64_t first, size_t n)
{
	for (size_t i = 0; i < n; i++)
		rows[i] = s->view ? s->view->rows[first + i] : first + i;
}

/* Whether version row r is a bad row of a staged column, as far as is known before reading it
 * (its data is checked as it is read): the ring's reader answers. */
static int row_bad(const struct tfs_ctl_stream *s, uint64_t r)
{
	struct tfs_reader *rd = tfs_staging_reader(s->ring);

	for (size_t i = 0; i < s->ncols; i++)
		if (tfs_reader_row_bad(rd, s->cols[i], r))
			return 1;
	return 0;
}

/* The next rows of the stream from position p into s->rows, at most want: with on_error=skip,
 * rows known bad are passed over. Returns how many; *used: the positions they took. */
static size_t pick_rows(struct tfs_ctl_stream *s, uint64_t p, uint64_t want, uint64_t *used)
{
	size_t n = 0;
	uint64_t q = p;

	if (!s->skip) {
		n = (size_t)(s->n - p < want ? s->n - p : want);
		view_rows(s, s->rows, p, n);
		*used = n;
		return n;
	}
	for (; q < s->n && n < want; q++) {
		const uint64_t r = s->view ? s->view->rows[q] : q;

		if (!row_bad(s, r))
			s->rows[n++] = r;
	}
	*used = q - p;
	return n;
}

/* Queue the batches after the cursor (and after those already made ahead) on the pool. */
static void schedule_ahead(struct tfs_ctl_stream *s, uint64_t batch)
{
	uint64_t p = s->pos;

	for (size_t i = 0; i < s->nahead; i++)
		p = s->ahead[i].pos + s->ahead[i].used;
	while (s->nahead < s->ahead_max && p < s->n) {
		uint64_t used;
		const size_t n = pick_rows(s, p, batch, &used);
		int slot;

		if (!n)
			break;
		slot = tfs_staging_fill(s->ring, -1, s->rows, n, 1);
		if (slot < 0)
			break; /* the loader holds the other slots */
		s->slot_pos[slot] = p;
		s->ahead[s->nahead++] = (struct ahead){ (unsigned)slot, p, used, batch };
		p += used;
	}
}

/* The next batch of the stream's order, gathered now into a leased *slot; *used: the
 * positions it took. */
static int stage_next(struct tfs_ctl_stream *s, uint64_t batch, unsigned *slot, uint64_t *used,
		      char *err)
{
	const size_t n = pick_rows(s, s->pos, batch, used);

	if (!n) {
		s->pos = s->n;
		SET_ERR("end of stream %u: the rows left are bad rows (on_error=skip)", s->id);
		return -ENODATA;
	}
	return stage_now(s, -1, n, s->pos, slot, err);
}

/* The reader is at [first, last] of the stream's rows: the plan's cursor, and within the view's
 * last window the next epoch's warm-up. */
static void stream_at(struct tfs_ctl_stream *s, uint64_t first, uint64_t last)
{
	tfs_reader_at(s->reader, first, last, (s->n - (last + 1)) * s->row_bytes);
}

int tfs_ctl_stream_next(struct tfs_ctl_stream *s, int release, uint64_t batch, unsigned *slot,
			char *err)
{
	uint64_t used;
	int rc;

	if (release >= 0 && (rc = tfs_ctl_stream_release(s, release, err)))
		return rc;
	if (!batch) {
		SET_ERR("batch must be at least 1");
		return -EINVAL;
	}
	if (batch > s->asked_batch) {
		SET_ERR("batch=%" PRIu64 " is larger than the stream's slots (batch=%" PRIu64
			" at open)",
			batch, s->asked_batch);
		return -E2BIG;
	}
	if (batch > s->max_batch)
		batch = s->max_batch; /* the whole stream fits one slot */
	if (s->pos >= s->n) {
		tfs_ctl_drop_ahead(s, 0);
		SET_ERR("end of stream %u: all %" PRIu64 " rows were staged (seek stream=%u pos=0 "
			"starts over)",
			s->id, s->n, s->id);
		return -ENODATA;
	}
	if (s->nahead && (s->ahead[0].pos != s->pos || s->ahead[0].want != batch))
		tfs_ctl_drop_ahead(s, 0);
	if (s->nahead) {
		*slot = s->ahead[0].slot;
		used = s->ahead[0].used;
		memmove(s->ahead, s->ahead + 1, --s->nahead * sizeof(s->ahead[0]));
		rc = tfs_staging_take(s->ring, *slot);
		if (rc) {
			tfs_ctl_drop_ahead(s, 0);
			take_error(s, *slot, rc, err);
			return rc;
		}
	} else {
		rc = stage_next(s, batch, slot, &used, err);
		if (rc)
			return rc;
	}
	/* A chunk found bad while this batch was gathered: gather it again without its rows,
	 * which are now known (a few times at most: each pass learns at least one chunk). */
	for (int again = 0; s->skip && again < 16 && tfs_staging_padded(s->ring, *slot); again++) {
		tfs_ctl_drop_ahead(s, 0);
		tfs_staging_release(s->ring, *slot);
		rc = stage_next(s, batch, slot, &used, err);
		if (rc)
			return rc;
	}
	s->pos += used;
	stream_at(s, s->pos - used, s->pos - 1);
	schedule_ahead(s, batch);
	return 0;
}

int tfs_ctl_stream_stage(struct tfs_ctl_stream *s, const uint64_t *rows, uint64_t start, uint64_t n,
			 int slot, unsigned *out, char *err)
{
	if (!n) {
		SET_ERR("no rows to stage");
		return -EINVAL;
	}
	if (n > s->max_batch) {
		SET_ERR("%" PRIu64 " rows: more than the stream's slots hold (batch=%" PRIu64
			" at open)",
			n, s->max_batch);
		return -E2BIG;
	}
	if (slot >= 0 && (unsigned)slot >= s->depth) {
		SET_ERR("slot %d: stream %u has slots 0..%u", slot, s->id, s->depth - 1);
		return -EINVAL;
	}
	if (rows) {
		for (uint64_t i = 0; i < n; i++) {
			if (rows[i] >= s->n) {
				SET_ERR("row %" PRIu64 " out of range: stream %u has %" PRIu64
					" rows",
					rows[i], s->id, s->n);
				return -ERANGE;
			}
			s->rows[i] = s->view ? s->view->rows[rows[i]] : rows[i];
		}
		start = rows[0];
	} else {
		if (start > s->n || n > s->n - start) {
			SET_ERR("rows %" PRIu64 "..%" PRIu64 " out of range: stream %u has %" PRIu64
				" rows",
				start, start + n - 1, s->id, s->n);
			return -ERANGE;
		}
		view_rows(s, s->rows, start, (size_t)n);
	}
	return stage_now(s, slot, (size_t)n, start, out, err);
}

int tfs_ctl_stream_release(struct tfs_ctl_stream *s, int slot, char *err)
{
	if (slot < 0) {
		for (unsigned i = 0; i < s->depth; i++)
			tfs_staging_release(s->ring, i);
		return 0;
	}
	if ((unsigned)slot >= s->depth || tfs_staging_release(s->ring, (unsigned)slot)) {
		SET_ERR("slot %d of stream %u is not leased", slot, s->id);
		return -EINVAL;
	}
	return 0;
}

int tfs_ctl_stream_seek(struct tfs_ctl_stream *s, uint64_t pos, char *err)
{
	if (pos > s->n) {
		SET_ERR("pos %" PRIu64 " out of range: stream %u has %" PRIu64 " rows", pos, s->id,
			s->n);
		return -ERANGE;
	}
	tfs_ctl_drop_ahead(s, 0);
	s->pos = pos;
	if (pos < s->n)
		stream_at(s, pos, pos);
	return 0;
}
