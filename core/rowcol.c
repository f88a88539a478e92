/* SPDX-License-Identifier: MIT */
/* rowcol: columns written a row at a time, chunks written as they fill. */
#include "rowcol.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Rows taken (tfs_rowcol_add_take) whose room in a chunk's buffer is kept for them: they are
 * copied there with the rest of the chunk's work, on the pool, and freed. */
struct hole {
	size_t off;
	uint8_t *row; /* owned */
	size_t len;
};

struct holes {
	struct hole *v;
	size_t n, cap;
};

/* A fixed column (or part) being appended to: whole chunks of rows_per_chunk rows. */
struct fixed_w {
	struct tfs_column *c;
	uint64_t rpc;  /* rows of a full chunk: rows_per_chunk, or the target's for listed chunks */
	uint8_t *buf;  /* rpc rows */
	uint64_t have; /* rows in buf, not yet in a chunk */
	struct holes holes; /* of buf */
};

/* A data part: chunks of whole rows, up to the target, ending on row boundaries. */
struct data_w {
	struct tfs_column *c;
	struct tfs_buf buf;
	struct holes holes; /* of buf */
	/* The delta filter's lines of the rows in buf (tfs_chunk_row_line), a run of rows of one
	 * line an entry: each frame is filtered with the line of the row that holds most of it. */
	struct tfs_line_run *runs;
	size_t nruns, runs_cap;
};

/* A chunk being encoded and written on the pool; its ref is copied in by settle(). */
struct put_job {
	struct tfs_work work;
	struct tfs_rowcol *w;
	struct tfs_column *c;
	size_t k;     /* its index in c->chunks */
	uint8_t *raw; /* owned */
	size_t len;
	/* A data part's chunk: its rows' lines (owned), nruns of them; NULL: the form's. */
	struct tfs_line_run *runs;
	size_t nruns;
	struct holes holes;	  /* of raw: filled first */
	struct tfs_chunk_ref ref; /* the result */
	struct tfs_store_put *put; /* begun on the pool, ended by settle() */
	atomic_int done;	   /* put_run has ended: the fields above are settle()'s */
	struct put_job *next;	  /* pending list; the writer's thread only */
};

struct tfs_rowcol {
	struct tfs_store *s;
	const char *ds;
	struct tfs_workgroup puts; /* .pool NULL: chunks are written on the caller's thread */
	struct put_job *pending;   /* submitted, refs not yet copied in */
	unsigned npending;
	struct tfs_put_ender ender; /* the last batch of their puts, being ended */
	struct tfs_column *h; /* the column (a header for other kinds than fixed) */
	struct fixed_w fixed; /* fixed columns: the column; others: the offsets part */
	struct fixed_w shapes;
	struct data_w data;
	uint64_t end; /* other kinds: bytes of data so far (the last offset) */
};

static int holes_add(struct holes *h, size_t off, uint8_t *row, size_t len)
{
	if (TFS_GROW(h->v, &h->cap, h->n + 1))
		return -ENOMEM;
	h->v[h->n++] = (struct hole){ off, row, len };
	return 0;
}

/* The taken rows into buf, and freed. */
static void holes_fill(struct holes *h, uint8_t *buf)
{
	for (size_t i = 0; i < h->n; i++) {
		memcpy(buf + h->v[i].off, h->v[i].row, h->v[i].len);
		free(h->v[i].row);
	}
	h->n = 0;
}

static void holes_free(struct holes *h)
{
	for (size_t i = 0; i < h->n; i++)
		free(h->v[i].row);
	free(h->v);
	memset(h, 0, sizeof(*h));
}

/* Chunk raw of column c, encoded with c's form or, for a data part's, its rows' lines. */
static int put_begin(struct tfs_rowcol *w, const struct tfs_column *c,
		     const struct tfs_line_run *runs, size_t nruns, const void *raw, size_t len,
		     struct tfs_chunk_ref *ref, struct tfs_store_put **put)
{
	struct tfs_chunk_form form;

	tfs_chunk_form_of(c, &form);
	form.runs = runs;
	form.nruns = nruns;
	return tfs_chunk_put_begin(w->s, w->ds, &form, raw, len, ref, put);
}

static int put_run(struct tfs_work *work)
{
	struct put_job *j = (struct put_job *)work;
	int rc;

	holes_fill(&j->holes, j->raw);
	rc = put_begin(j->w, j->c, j->runs, j->nruns, j->raw, j->len, &j->ref, &j->put);

	free(j->raw);
	j->raw = NULL;
	free(j->runs);
	j->runs = NULL;
	atomic_store_explicit(&j->done, 1, memory_order_release);
	return rc;
}

/* Wait until at most keep puts are under way (0: none), start ending those that have ended as
 * one batch (durable, then at their keys: tfs_rowcol_finish waits for it) and copy their refs
 * in. The writer goes on while the last keep run: no barrier on the slowest chunk of a batch.
 * Returns the first error met. */
static int settle(struct tfs_rowcol *w, unsigned keep)
{
	struct tfs_store_put **puts;
	size_t n = 0;
	int rc, rc2;

	if (!w->puts.pool)
		return 0;
	rc = tfs_workgroup_wait_below(&w->puts, keep);
	puts = calloc(w->npending ? w->npending : 1, sizeof(*puts));
	for (struct put_job **at = &w->pending, *j; (j = *at);) {
		if (!atomic_load_explicit(&j->done, memory_order_acquire)) {
			at = &j->next;
			continue;
		}
		if (puts) {
			puts[n++] = j->put;
		} else {
			rc2 = tfs_store_put_new_end(w->s, &j->put, 1); /* no room for a batch */
			rc = rc ? rc : rc2;
		}
		*at = j->next;
		w->npending--;
		j->c->chunks[j->k] = j->ref;
		free(j->raw);
		free(j->runs);
		holes_free(&j->holes);
		free(j);
	}
	rc2 = tfs_put_ender_start(&w->ender, w->s, puts, n);
	return rc ? rc : rc2;
}

/* give: NULL, or where the caller keeps raw, which it hands to a put on the pool instead of a copy
 * (*give is NULL after; it stays the caller's where the chunk is written on this thread).
 * holes: NULL, or raw's (given), which go with it. runs: a data part's chunk's rows' lines
 * (copied), or none (c's form says). */
static int put_chunk(struct tfs_rowcol *w, struct tfs_column *c, const void *raw, size_t len,
		     uint64_t rows, uint8_t **give, struct holes *holes,
		     const struct tfs_line_run *runs, size_t nruns)
{
	struct tfs_chunk_ref *chunks = realloc(c->chunks, (c->nchunks + 1) * sizeof(*chunks));
	int rc;

	if (!chunks)
		return -ENOMEM;
	c->chunks = chunks;
	if (!c->rows_per_chunk) {
		uint64_t *end = realloc(c->chunk_end, (c->nchunks + 1) * sizeof(*end));

		if (!end)
			return -ENOMEM;
		c->chunk_end = end;
		end[c->nchunks] = (c->nchunks ? end[c->nchunks - 1] : 0) + rows;
	}
	if (w->puts.pool) {
		/* Encoded and written on the pool from the bytes given or a copy; the ref is copied
		 * in later. */
		struct put_job *j = calloc(1, sizeof(*j));
		uint8_t *copy = give ? *give : malloc(len ? len : 1);
		struct tfs_line_run *lines = nruns ? malloc(nruns * sizeof(*lines)) : NULL;

		if (!j || !copy || (nruns && !lines)) {
			free(j);
			free(lines);
			if (!give)
				free(copy);
			return -ENOMEM;
		}
		if (nruns)
			memcpy(lines, runs, nruns * sizeof(*lines));
		if (give)
			*give = NULL;
		else
			memcpy(copy, raw, len);
		*j = (struct put_job){ .work = { .run = put_run },
				       .w = w,
				       .c = c,
				       .k = c->nchunks,
				       .raw = copy,
				       .len = len,
				       .runs = lines,
				       .nruns = nruns,
				       .next = w->pending };
		if (holes) {
			j->holes = *holes;
			memset(holes, 0, sizeof(*holes));
		}
		w->pending = j;
		c->nchunks++;
		tfs_workgroup_submit(&w->puts, &j->work, TFS_WORK_NORMAL);
		/* A bounded number of chunks in memory at once. */
		return ++w->npending >= 2 * tfs_workpool_threads(w->puts.pool) + 2
			       ? settle(w, tfs_workpool_threads(w->puts.pool))
			       : 0;
	}
	if (holes)
		holes_fill(holes, *give);
	rc = put_begin(w, c, runs, nruns, raw, len, &chunks[c->nchunks], NULL);
	if (!rc)
		c->nchunks++;
	return rc;
}

/* --- fixed columns and parts ---------------------------------------------------------------- */

static int fixed_begin(struct tfs_rowcol *w, struct fixed_w *f, struct tfs_column *c)
{
	/* Listed chunks (a commit of parts made them) stay as they are: new rows go to new ones. */
	const uint64_t tail = c->rows_per_chunk ? c->rows % c->rows_per_chunk : 0;
	struct tfs_buf obj = { 0 };
	char key[TFS_KEY_MAX];
	int rc = 0;

	f->c = c;
	f->rpc = c->rows_per_chunk ? c->rows_per_chunk
				   : tfs_fixed_rows_per_chunk(c->chunk_bytes, c->row_bytes);
	f->buf = malloc(f->rpc * c->row_bytes + 1);
	if (!f->buf)
		return -ENOMEM;
	if (!tail)
		return 0;
	/* A partial last chunk is written again with the new rows after its old ones. */
	tfs_object_key(w->ds, &c->chunks[c->nchunks - 1].id, key);
	rc = tfs_store_get_object(w->s, key, 0, &obj);
	rc = rc == -EBADMSG ? -EIO : rc; /* fails its checksum: not a source's bytes (source.h) */
	if (!rc)
		rc = tfs_object_decode(obj.data, obj.len, TFS_OBJ_CHUNK, f->buf,
				       tail * c->row_bytes);
	tfs_buf_free(&obj);
	if (rc) {
		tfs_err("%s/%s: cannot read the last chunk of column %s: %s", w->s->url, key,
			c->name, strerror(-rc));
		return rc;
	}
	c->nchunks--;
	f->have = tail;
	return 0;
}

/* f's buffer, there to fill. */
static int fixed_buf(struct fixed_w *f)
{
	if (!f->buf && !(f->buf = malloc(f->rpc * f->c->row_bytes + 1)))
		return -ENOMEM;
	return 0;
}

/* A full chunk's buffer goes to its put on the pool: the next rows start a new one. */
static int fixed_full(struct tfs_rowcol *w, struct fixed_w *f)
{
	if (f->have < f->rpc)
		return 0;
	f->have = 0;
	return put_chunk(w, f->c, f->buf, f->rpc * f->c->row_bytes, f->rpc, &f->buf, &f->holes,
			 NULL, 0);
}

/* n rows at once, copied a chunk's room at a time. */
static int fixed_add_rows(struct tfs_rowcol *w, struct fixed_w *f, const uint8_t *rows, size_t n)
{
	const uint64_t rb = f->c->row_bytes;
	int rc = 0;

	while (!rc && n) {
		const uint64_t room = f->rpc - f->have, k = n < room ? n : room;

		rc = fixed_buf(f);
		if (rc)
			return rc;
		memcpy(f->buf + f->have * rb, rows, k * rb);
		f->c->rows += k;
		f->have += k;
		rows += k * rb;
		n -= k;
		rc = fixed_full(w, f);
	}
	return rc;
}

/* take: row is the caller's to give (malloc'd): its room is kept and the copy made on the pool. */
static int fixed_add(struct tfs_rowcol *w, struct fixed_w *f, const void *row, int take)
{
	if (!take)
		return fixed_add_rows(w, f, row, 1);
	if (fixed_buf(f) || holes_add(&f->holes, f->have * f->c->row_bytes, (uint8_t *)row,
				      f->c->row_bytes)) {
		free((void *)row);
		return -ENOMEM;
	}
	f->c->rows++;
	f->have++;
	return fixed_full(w, f);
}

static int fixed_flush(struct tfs_rowcol *w, struct fixed_w *f)
{
	int rc = 0;

	if (f->c && f->have)
		rc = put_chunk(w, f->c, f->buf, f->have * f->c->row_bytes, f->have, &f->buf,
			       &f->holes, NULL, 0);
	if (!rc)
		f->have = 0;
	return rc;
}

/* --- data parts ----------------------------------------------------------------------------- */

/* The row that ends d's chunk so far has filter line (0: none). */
static int run_add(struct data_w *d, uint64_t line)
{
	if (d->nruns && d->runs[d->nruns - 1].line == line) {
		d->runs[d->nruns - 1].end = d->buf.len;
		return 0;
	}
	if (TFS_GROW(d->runs, &d->runs_cap, d->nruns + 1))
		return -ENOMEM;
	d->runs[d->nruns++] = (struct tfs_line_run){ d->buf.len, line };
	return 0;
}

static int data_flush(struct tfs_rowcol *w)
{
	struct data_w *d = &w->data;
	int rc = 0;

	/* Equal lines are one run: a chunk whose rows have none (text, bytes, wider elements)
	 * has one run of line 0, and goes as one with no runs. */
	const size_t nruns = d->nruns > 1 || (d->nruns && d->runs[0].line) ? d->nruns : 0;

	if (d->buf.len)
		rc = put_chunk(w, d->c, d->buf.data, d->buf.len, d->buf.len, &d->buf.data,
			       &d->holes, d->runs, nruns);
	if (!d->buf.data) /* given to its put on the pool: the next rows start a new one */
		d->buf = (struct tfs_buf){ 0 };
	d->buf.len = 0;
	d->nruns = 0;
	return rc;
}

/* take: as fixed_add's. line: the row's filter line (tfs_chunk_row_line), 0 when none. */
static int data_add(struct tfs_rowcol *w, const void *row, size_t len, int take, uint64_t line)
{
	struct data_w *d = &w->data;
	uint8_t *given = take ? (uint8_t *)row : NULL;
	int rc = 0;

	if (!len) {
		free(given);
		return 0;
	}
	/* Whole rows up to the target; a row larger than the target is a chunk of its own. */
	if (d->buf.len && d->buf.len + len > d->c->chunk_bytes)
		rc = data_flush(w);
	if (!rc && len >= d->c->chunk_bytes) {
		const struct tfs_line_run one = { len, line };

		rc = put_chunk(w, d->c, row, len, len, take ? &given : NULL, NULL, &one, line ? 1 : 0);
	} else if (!rc) {
		/* Room for a whole chunk at once: no copies as it grows. */
		if (!d->buf.cap)
			rc = tfs_buf_reserve(&d->buf, d->c->chunk_bytes);
		if (!rc && !take) {
			rc = tfs_buf_append(&d->buf, row, len);
		} else if (!rc && !(rc = holes_add(&d->holes, d->buf.len, given, len))) {
			/* Its room is in the chunk's reserve; the bytes come on the pool. */
			given = NULL;
			d->buf.len += len;
		}
		if (!rc)
			rc = run_add(d, line);
	}
	free(given); /* not taken after all: an error, or a chunk written on this thread */
	if (!rc)
		d->c->rows += len;
	return rc;
}

/* --- the column ----------------------------------------------------------------------------- */

static int init_part(struct tfs_column *p, const char *head, const char *part,
		     enum tfs_col_part which, const char *descr, unsigned ndim, uint64_t dim,
		     const struct tfs_column *h)
{
	int big;
	char err[128];

	memset(p, 0, sizeof(*p));
	if (asprintf(&p->name, "%s/%s", head, part) < 0) {
		p->name = NULL;
		return -ENOMEM;
	}
	p->part = which;
	tfs_dtype_parse(descr, &p->dtype, &big, err, sizeof(err));
	p->ndim = ndim;
	p->shape[0] = dim;
	p->row_bytes = p->dtype.itemsize * (ndim ? dim : 1);
	p->chunk_bytes = h->chunk_bytes;
	p->rows_per_chunk = which == TFS_PART_DATA	    ? 0
			    : h->chunk_bytes / p->row_bytes ? h->chunk_bytes / p->row_bytes
							    : 1;
	p->codec = h->codec;
	p->level = h->level;
	return 0;
}

int tfs_rowcol_new(struct tfs_manifest *m, const char *name, enum tfs_col_kind kind,
		   const struct tfs_dtype *dt, unsigned ndim, const uint64_t *shape,
		   uint64_t chunk_bytes, enum tfs_codec_id codec, int level)
{
	const size_t i = m->ncols;
	struct tfs_column *h = &m->cols[i];
	int rc;

	memset(h, 0, sizeof(*h));
	if (!(h->name = strdup(name)))
		return -ENOMEM;
	h->kind = kind;
	h->dtype = *dt;
	h->ndim = ndim;
	h->rows = 0;
	h->chunk_bytes = chunk_bytes ? chunk_bytes : TFS_DEFAULT_CHUNK_BYTES;
	h->codec = codec;
	h->level = level;
	m->ncols++;
	if (kind == TFS_COL_FIXED) {
		h->row_bytes = dt->itemsize;
		for (unsigned d = 0; d < ndim; d++) {
			h->shape[d] = shape[d];
			h->row_bytes *= shape[d];
		}
		h->rows_per_chunk = tfs_fixed_rows_per_chunk(h->chunk_bytes, h->row_bytes);
		return 0;
	}
	h->data = i + 1;
	h->offsets = i + 2;
	rc = init_part(&m->cols[i + 1], name, "data", TFS_PART_DATA, "|u1", 0, 0, h);
	if (!rc) {
		m->ncols++;
		rc = init_part(&m->cols[i + 2], name, "offsets", TFS_PART_OFFSETS, "<u8", 0, 0, h);
	}
	if (!rc)
		m->ncols++;
	if (!rc && kind == TFS_COL_RAGGED) {
		h->shapes = i + 3;
		rc = init_part(&m->cols[i + 3], name, "shapes", TFS_PART_SHAPES, "<i8", 1, ndim, h);
		if (!rc)
			m->ncols++;
	}
	return rc;
}

int tfs_rowcol_begin(struct tfs_store *s, const char *ds, struct tfs_manifest *m, size_t i,
		     struct tfs_rowcol **out)
{
	struct tfs_rowcol *w = calloc(1, sizeof(*w));
	struct tfs_column *h = &m->cols[i];
	int rc;

	if (!w)
		return -ENOMEM;
	w->s = s;
	w->ds = ds;
	w->h = h;
	if (h->kind == TFS_COL_FIXED) {
		rc = fixed_begin(w, &w->fixed, h);
	} else {
		struct tfs_column *offs = &m->cols[h->offsets];

		w->data.c = &m->cols[h->data];
		w->end = w->data.c->rows;
		rc = fixed_begin(w, &w->fixed, offs);
		if (!rc && h->kind == TFS_COL_RAGGED)
			rc = fixed_begin(w, &w->shapes, &m->cols[h->shapes]);
		/* A new column starts with the offset of its first row. */
		if (!rc && offs->rows == 0)
			rc = fixed_add(w, &w->fixed, &w->end, 0);
	}
	if (rc) {
		tfs_rowcol_free(w);
		return rc;
	}
	*out = w;
	return 0;
}

/* Bytes of w equal to the byte c repeated in rep: the high bit of each such byte. Exact, unlike
 * the usual zero-byte test (no borrow crosses from one byte into the next). */
static uint64_t bytes_equal(uint64_t w, uint64_t rep)
{
	const uint64_t x = w ^ rep, low7 = 0x7f7f7f7f7f7f7f7full;

	return ~(((x & low7) + low7) | x) & ~low7;
}

uint64_t tfs_text_line_bytes(const char *row, size_t len)
{
	const uint64_t ones = 0x0101010101010101ull;
	uint64_t n = len + 1;
	size_t i = 0;

	/* Eight bytes at a time: each escape costs one more byte. */
	for (; i + 8 <= len; i += 8) {
		uint64_t w;

		memcpy(&w, row + i, 8);
		w = bytes_equal(w, '\\' * ones) | bytes_equal(w, '\n' * ones) |
		    bytes_equal(w, '\r' * ones);
		n += ((w >> 7) * ones) >> 56; /* the bytes' high bits summed in the top byte */
	}
	for (; i < len; i++)
		n += row[i] == '\\' || row[i] == '\n' || row[i] == '\r';
	return n;
}

/* take: row is the caller's to give (malloc'd), and the rowcol's from here on, added or not. */
static int add(struct tfs_rowcol *w, const void *row, size_t len, const uint64_t *shape, int take)
{
	struct tfs_column *h = w->h;
	uint64_t line = 0;
	int rc = 0;

	if (h->kind == TFS_COL_FIXED) {
		if (len == h->row_bytes)
			return fixed_add(w, &w->fixed, row, take);
		rc = -EINVAL;
	} else if (h->kind == TFS_COL_RAGGED) {
		uint64_t want = h->dtype.itemsize;
		int64_t dims[TFS_MAX_DIMS];

		line = tfs_chunk_row_line(h, shape, len);
		for (unsigned d = 0; !rc && d < h->ndim; d++) {
			if (tfs_mul_u64(want, shape[d], &want) || shape[d] > INT64_MAX)
				rc = -EINVAL;
			else
				dims[d] = (int64_t)shape[d];
		}
		if (!rc && want != len)
			rc = -EINVAL;
		if (!rc)
			rc = fixed_add(w, &w->shapes, dims, 0);
	} else if (h->kind == TFS_COL_TEXT) {
		if (!tfs_utf8_valid(row, len))
			rc = -EINVAL;
		else
			h->text_bytes += tfs_text_line_bytes(row, len);
	}
	if (rc) {
		if (take)
			free((void *)row);
		return rc;
	}
	rc = data_add(w, row, len, take, line);
	w->end += len;
	if (!rc)
		rc = fixed_add(w, &w->fixed, &w->end, 0);
	if (!rc)
		h->rows++;
	return rc;
}

int tfs_rowcol_add(struct tfs_rowcol *w, const void *row, size_t len, const uint64_t *shape)
{
	return add(w, row, len, shape, 0);
}

int tfs_rowcol_add_rows(struct tfs_rowcol *w, const void *rows, size_t n, size_t len)
{
	uint64_t want;

	if (w->h->kind != TFS_COL_FIXED || tfs_mul_u64(n, w->h->row_bytes, &want) || want != len)
		return -EINVAL;
	return fixed_add_rows(w, &w->fixed, rows, n);
}

int tfs_rowcol_add_take(struct tfs_rowcol *w, uint8_t *row, size_t len, const uint64_t *shape)
{
	/* Without a pool a chunk is made on this thread: the copy costs the same here. */
	if (!w->puts.pool) {
		int rc = add(w, row, len, shape, 0);

		free(row);
		return rc;
	}
	return add(w, row, len, shape, 1);
}

int tfs_rowcol_finish(struct tfs_rowcol *w)
{
	int rc = fixed_flush(w, &w->fixed), rc2;

	if (!rc)
		rc = fixed_flush(w, &w->shapes);
	if (!rc && w->data.c)
		rc = data_flush(w);
	rc2 = settle(w, 0);
	rc = rc ? rc : rc2;
	rc2 = tfs_put_ender_wait(&w->ender);
	return rc ? rc : rc2;
}

void tfs_rowcol_use_pool(struct tfs_rowcol *w, struct tfs_workpool *pool)
{
	settle(w, 0);
	tfs_put_ender_wait(&w->ender);
	if (w->puts.pool)
		tfs_workgroup_destroy(&w->puts);
	memset(&w->puts, 0, sizeof(w->puts));
	if (pool)
		tfs_workgroup_init(&w->puts, pool);
}

void tfs_rowcol_free(struct tfs_rowcol *w)
{
	if (!w)
		return;
	tfs_rowcol_use_pool(w, NULL); /* puts under way end first */
	free(w->fixed.buf);
	free(w->shapes.buf);
	tfs_buf_free(&w->data.buf);
	holes_free(&w->fixed.holes);
	holes_free(&w->shapes.holes);
	holes_free(&w->data.holes);
	free(w->data.runs);
	free(w);
}
