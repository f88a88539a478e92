/* SPDX-License-Identifier: MIT */
/* import: append rows from NPY files to a branch's columns and commit, streaming any size. */
#include "import.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "chunkpool.h"
#include "import_rows.h"
#include "source.h"
#include "workpool.h"

/* One NPY source, opened and checked. */
struct source {
	const struct tfs_import_src *src;
	struct tfs_source *in;	   /* NPY files, read as they arrive */
	struct tfs_npy_info info;  /* NPY files */
	struct tfs_rows_scan scan; /* sources that come a row at a time */
	uint64_t rows;
	uint64_t row_bytes;
	struct tfs_column *col; /* the column in the new manifest */
};

/* The chunk pool on the workers of o's --threads. */
static int pool_start(struct tfs_chunk_pool *p, const struct tfs_import_opts *o)
{
	struct tfs_workpool *wp;
	int rc = tfs_import_pool(o, &wp);

	return rc ? rc : tfs_chunk_pool_start(p, wp);
}

/* Copy rows [r0, r0+nr) of a Fortran-ordered array into dst in C order. In Fortran order the row
 * index varies fastest, so each element position of a row is one contiguous run over rows. */
static void gather_fortran(const uint8_t *data, const struct tfs_npy_info *in, uint64_t r0,
			   uint64_t nr, uint8_t *dst)
{
	const size_t isz = in->dtype.itemsize;
	const uint64_t rows = in->shape[0];
	uint64_t inner = 1, idx[TFS_MAX_DIMS] = { 0 };

	for (unsigned d = 1; d < in->ndim; d++)
		inner *= in->shape[d];
	/* Walk the element positions in Fortran order (first row dimension fastest), keeping the
	 * matching C-order position alongside. */
	for (uint64_t pf = 0; pf < inner; pf++) {
		uint64_t pc = 0;
		const uint8_t *run = data + isz * (r0 + rows * pf);

		for (unsigned d = 1; d < in->ndim; d++)
			pc = pc * in->shape[d] + idx[d];
		for (uint64_t t = 0; t < nr; t++)
			memcpy(dst + (t * inner + pc) * isz, run + t * isz, isz);
		for (unsigned d = 1; d < in->ndim; d++) {
			if (++idx[d] < in->shape[d])
				break;
			idx[d] = 0;
		}
	}
}

/* Fetch and decode chunk k of a column (rows of it) into dst. */
static int load_chunk(struct tfs_store *s, const char *ds, const struct tfs_column *c, size_t k,
		      uint8_t *dst, uint64_t rows)
{
	struct tfs_buf obj = { 0 };
	char key[TFS_KEY_MAX];
	int rc;

	tfs_object_key(ds, &c->chunks[k].id, key);
	rc = tfs_store_get_object(s, key, 0, &obj);
	if (!rc)
		rc = tfs_object_decode(obj.data, obj.len, TFS_OBJ_CHUNK, dst, rows * c->row_bytes);
	rc = rc == -EBADMSG ? -EIO : rc; /* fails its checksum */
	if (rc)
		tfs_err("%s/%s: cannot read chunk %zu of column %s: %s", s->url, key, k, c->name,
			rc == -EIO ? "damaged" : strerror(-rc));
	tfs_buf_free(&obj);
	return rc;
}

static int append_source(struct tfs_store *s, const char *ds, struct source *src,
			 struct tfs_chunk_pool *pool)
{
	struct tfs_column *c = src->col;
	const struct tfs_npy_info *in = &src->info;
	/* A column whose chunks are listed (a commit of parts made it) keeps them and gets new
	 * chunks of its target's rows; a uniform one has its partial tail chunk rewritten. */
	const int listed = !c->rows_per_chunk;
	const uint64_t rpc =
		listed ? tfs_fixed_rows_per_chunk(c->chunk_bytes, c->row_bytes) : c->rows_per_chunk;
	const uint64_t add = in->shape[0];
	uint64_t tail = listed ? 0 : c->rows % rpc, total, done = 0, nchunks, k;
	uint8_t *map = NULL;
	size_t map_len = 0;
	struct tfs_chunk_ref *chunks;
	int rc = 0;

	if (add == 0)
		return 0;
	total = c->rows + add;
	nchunks = listed ? c->nchunks + add / rpc + (add % rpc ? 1 : 0)
			 : total / rpc + (total % rpc ? 1 : 0);
	chunks = realloc(c->chunks, nchunks * sizeof(*chunks));
	if (!chunks)
		return -ENOMEM;
	c->chunks = chunks;
	if (listed) {
		uint64_t *ends = realloc(c->chunk_end, nchunks * sizeof(*ends));

		if (!ends)
			return -ENOMEM;
		c->chunk_end = ends;
		for (k = c->nchunks; k < nchunks; k++) {
			const uint64_t r0 = k ? ends[k - 1] : 0;

			ends[k] = total - r0 < rpc ? total : r0 + rpc;
		}
	}
	k = c->nchunks - (tail ? 1 : 0); /* the partial tail chunk gets rewritten */

	if (in->fortran_order && in->ndim > 1) {
		map_len = (size_t)(in->data_offset + add * src->row_bytes);
		rc = tfs_source_keep_all(src->in); /* read in column order: all of it at once */
		if (!rc)
			rc = tfs_source_wait(src->in, map_len);
		if (rc)
			return rc;
		map = mmap(NULL, map_len, PROT_READ, MAP_PRIVATE, tfs_source_fd(src->in), 0);
		if (map == MAP_FAILED) {
			rc = -errno;
			tfs_err("%s: cannot map Fortran-ordered input: %s", src->src->path,
				strerror(errno));
			return rc;
		}
		madvise(map, map_len, MADV_SEQUENTIAL);
	}

	while (done < add) {
		uint64_t have = tail, take = rpc - tail;
		size_t len;
		uint8_t *raw;

		if (take > add - done)
			take = add - done;
		len = (size_t)((have + take) * c->row_bytes);
		raw = malloc(len ? len : 1);
		if (!raw) {
			rc = -ENOMEM;
			break;
		}
		if (have) {
			rc = load_chunk(s, ds, c, c->nchunks - 1, raw, have);
			if (rc) {
				free(raw);
				break;
			}
			tail = 0;
		}
		if (map)
			gather_fortran(map + in->data_offset, in, done, take,
				       raw + have * c->row_bytes);
		else
			rc = tfs_source_pread(src->in, raw + have * c->row_bytes,
					      (size_t)(take * c->row_bytes),
					      in->data_offset + done * c->row_bytes);
		if (rc) {
			/* Its size was checked: a disk's error, or a fetch's (logged). */
			tfs_err("%s: cannot read its rows: %s", src->src->path, strerror(-rc));
			free(raw);
			break;
		}
		if (!map)
			tfs_source_release(src->in, in->data_offset + (done + take) * c->row_bytes);
		if (in->big_endian)
			tfs_dtype_swap(&c->dtype, raw + have * c->row_bytes,
				       (size_t)(take * c->row_bytes));
		rc = tfs_chunk_pool_submit(pool, raw, len, c, &c->chunks[k]);
		if (rc)
			break;
		tfs_progress_add(pool->progress, take * c->row_bytes, 0);
		k++;
		done += take;
	}
	{
		int rc2 = tfs_chunk_pool_drain(pool);

		if (!rc)
			rc = rc2;
	}
	if (map)
		munmap(map, map_len);
	if (rc)
		return rc;
	assert(k == nchunks);
	c->nchunks = (size_t)nchunks;
	c->rows = total;
	return 0;
}

/* The bytes an NPY header is read from first: a URL's object is read as it arrives, and a
 * header is a few hundred bytes (numpy writes over 64 KiB only for vast structured dtypes). */
#define HEADER_WAIT (1u << 20)

static int open_source(struct source *src)
{
	char err[256];
	uint64_t need, size;
	int rc;

	rc = tfs_source_open(src->src->path, TFS_SOURCE_ONCE, &src->in);
	if (rc)
		return rc;
	size = tfs_source_size(src->in);
	rc = tfs_source_wait(src->in, HEADER_WAIT); /* a fetch that fails says why itself */
	if (rc)
		return rc;
	rc = tfs_npy_read_header(tfs_source_fd(src->in), &src->info, err, sizeof(err));
	if (rc == -EINVAL && size > HEADER_WAIT) { /* perhaps a header longer than that */
		rc = tfs_source_keep_all(src->in);
		if (!rc)
			rc = tfs_source_wait(src->in, size);
		if (rc)
			return rc;
		rc = tfs_npy_read_header(tfs_source_fd(src->in), &src->info, err, sizeof(err));
	}
	if (rc) {
		tfs_err("%s: %s", src->src->path, err);
		return -EINVAL;
	}
	src->row_bytes = src->info.dtype.itemsize;
	for (unsigned d = 1; d < src->info.ndim; d++)
		src->row_bytes *= src->info.shape[d];
	/* Overflow was ruled out by the parser, which multiplied the whole shape. */
	need = src->info.data_offset + src->info.shape[0] * src->row_bytes;
	if (size < need) {
		tfs_err("%s: file is shorter (%" PRIu64 " bytes) than its NPY header says (%" PRIu64
			" bytes)",
			src->src->path, size, need);
		return -EINVAL;
	}
	posix_fadvise(tfs_source_fd(src->in), 0, 0, POSIX_FADV_SEQUENTIAL);
	return 0;
}

static int new_column(struct tfs_column *c, const struct source *src,
		      const struct tfs_import_opts *o)
{
	uint64_t target = o->chunk_bytes ? o->chunk_bytes : TFS_DEFAULT_CHUNK_BYTES;

	memset(c, 0, sizeof(*c));
	c->name = strdup(src->src->column);
	if (!c->name)
		return -ENOMEM;
	c->dtype = src->info.dtype;
	c->ndim = src->info.ndim - 1;
	for (unsigned d = 0; d < c->ndim; d++)
		c->shape[d] = src->info.shape[d + 1];
	c->row_bytes = src->row_bytes;
	c->chunk_bytes = target;
	c->rows_per_chunk = tfs_fixed_rows_per_chunk(target, c->row_bytes);
	c->codec = o->codec;
	c->level = tfs_import_level(o, c->codec, &c->dtype, c->ndim);
	return 0;
}

static int same_row_shape(const struct tfs_column *c, const struct tfs_npy_info *in)
{
	if (c->ndim != in->ndim - 1)
		return 0;
	for (unsigned d = 0; d < c->ndim; d++)
		if (c->shape[d] != in->shape[d + 1])
			return 0;
	return 1;
}

int tfs_import_level(const struct tfs_import_opts *o, enum tfs_codec_id codec,
		     const struct tfs_dtype *dt, unsigned ndim)
{
	return tfs_chunk_filterable(codec, dt, ndim) ? o->filter_level : o->level;
}

unsigned tfs_import_threads(const struct tfs_import_opts *o)
{
	const long ncpu = sysconf(_SC_NPROCESSORS_ONLN);

	return o->threads ? o->threads : ncpu > 0 ? (unsigned)ncpu : 1;
}

int tfs_import_pool(const struct tfs_import_opts *o, struct tfs_workpool **out)
{
	return tfs_workpool_create_with_caller(tfs_import_threads(o), out);
}

/* A source that comes a row at a time: scan it, and find its column in m (which must hold rows
 * of its kind) or add one. */
static int check_rows_source(struct source *src, struct tfs_manifest *m,
			     const struct tfs_import_opts *o)
{
	const char *name = src->src->column;
	struct tfs_rows_scan *sc = &src->scan;
	size_t at;
	int rc = tfs_rows_scan(src->src, sc);

	if (rc)
		return rc;
	src->rows = sc->rows;
	rc = tfs_import_column(m, name, sc->kind, &sc->dtype, sc->ndim, sc->shape, o,
			       src->src->path, &at);
	if (!rc)
		src->col = &m->cols[at];
	return rc;
}

/* Write a row source's rows onto its column. */
static int append_rows_source(struct tfs_store *s, const char *ds, struct source *src,
			      struct tfs_manifest *m, struct tfs_chunk_pool *pool,
			      struct tfs_progress *progress)
{
	struct tfs_rowcol *w;
	int rc = tfs_rowcol_begin(s, ds, m, (size_t)(src->col - m->cols), &w);

	if (rc)
		return rc;
	/* Rows are read on this thread; chunks are encoded and written on the pool. */
	tfs_rowcol_use_pool(w, pool->wp);
	rc = tfs_rows_write(src->src, &src->scan, w, progress);
	if (rc == -EINVAL)
		tfs_err("%s: a row does not fit column %s", src->src->path, src->col->name);
	tfs_rowcol_free(w);
	return rc;
}

int tfs_import(struct tfs_store *s, const char *ds, const struct tfs_import_src *srcs, size_t n,
	       const struct tfs_import_opts *o, struct tfs_id *commit_id)
{
	struct tfs_manifest m = { 0 };
	struct source *src = NULL;
	struct tfs_chunk_pool pool = { .s = s, .ds = ds };
	struct tfs_txn t;
	uint64_t add = 0;
	int rc, pool_up = 0;

	if (n == 0) {
		tfs_err("nothing to import (give COLUMN=FILE.npy)");
		return -EINVAL;
	}
	rc = tfs_txn_begin(&t, s, ds, o);
	if (rc)
		goto out;
	src = calloc(n, sizeof(*src));
	if (!src) {
		rc = -ENOMEM;
		goto out;
	}
	rc = tfs_manifest_copy_extra(&t.old, 4 * n, &m); /* a column of another kind adds up to 4 */
	if (rc)
		goto out;

	/* Check everything before writing anything. */
	for (size_t i = 0; i < n; i++) {
		const char *name = srcs[i].column;
		struct tfs_column *c = NULL;

		src[i].src = &srcs[i];
		if (!tfs_name_valid(name)) {
			tfs_err("'%s' is not a valid column name (use letters, digits, '_', '.', "
				"'-'; up to 128)",
				name);
			rc = -EINVAL;
			goto out;
		}
		for (size_t j = 0; j < i; j++)
			if (!strcmp(srcs[j].column, name)) {
				tfs_err("column %s is named twice", name);
				rc = -EINVAL;
				goto out;
			}
		if (srcs[i].form != TFS_SRC_NPY) {
			rc = check_rows_source(&src[i], &m, o);
		} else {
			rc = open_source(&src[i]);
			src[i].rows = src[i].info.shape[0];
		}
		if (rc)
			goto out;
		if (i == 0)
			add = src[i].rows;
		if (src[i].rows != add) {
			tfs_err("%s has %" PRIu64 " rows but %s has %" PRIu64
				"; every source of one import must have the same number of rows",
				srcs[i].path, src[i].rows, srcs[0].path, add);
			rc = -EINVAL;
			goto out;
		}
		if (srcs[i].form != TFS_SRC_NPY)
			continue;
		for (size_t k = 0; k < m.ncols; k++)
			if (!strcmp(m.cols[k].name, name))
				c = &m.cols[k];
		if (c && c->kind != TFS_COL_FIXED) {
			tfs_err("column %s holds %s rows; %s is an NPY file of fixed rows", name,
				tfs_col_kind_name(c->kind), srcs[i].path);
			rc = -EINVAL;
			goto out;
		}
		if (c) {
			char have[TFS_MAX_DIMS * 22], got[TFS_MAX_DIMS * 22];

			tfs_shape_str(c->shape, c->ndim, have, sizeof(have));
			tfs_shape_str(src[i].info.shape + 1, src[i].info.ndim - 1, got,
				      sizeof(got));
			if (strcmp(c->dtype.descr, src[i].info.dtype.descr) ||
			    !same_row_shape(c, &src[i].info)) {
				tfs_err("column %s holds rows of dtype %s and shape %s; %s has "
					"dtype "
					"%s and row shape %s",
					name, c->dtype.descr, have, srcs[i].path,
					src[i].info.dtype.descr, got);
				rc = -EINVAL;
				goto out;
			}
		} else {
			c = &m.cols[m.ncols];
			rc = new_column(c, &src[i], o);
			if (rc)
				goto out;
			m.ncols++;
		}
		src[i].col = c;
	}
	/* Source columns point into m.cols, which no longer grows: the pointers stay valid. */
	{
		uint64_t rows = UINT64_MAX;

		for (size_t k = 0; k < m.ncols; k++) {
			uint64_t r = m.cols[k].rows;

			if (m.cols[k].part != TFS_PART_NONE)
				continue; /* parts count bytes and offsets, not rows */

			for (size_t i = 0; i < n; i++)
				if (src[i].col == &m.cols[k])
					r += add;
			if (rows == UINT64_MAX) {
				rows = r;
			} else if (r != rows) {
				tfs_err("after this import column %s would have %" PRIu64
					" rows and column %s %" PRIu64
					"; a dataset's columns always have the same number of rows "
					"(import them together, or add a new column with exactly "
					"%" PRIu64 " rows)",
					m.cols[0].name, rows, m.cols[k].name, r, t.old.rows);
				rc = -EINVAL;
				goto out;
			}
		}
		m.rows = rows == UINT64_MAX ? 0 : rows;
	}
	/* No rows and no new column: a commit would say nothing. (A new, empty column is a
	 * change of schema, and commits.) */
	if (add == 0 && m.ncols == t.old.ncols) {
		rc = -ENODATA;
		goto out;
	}
	if (o->progress) {
		uint64_t bytes = 0;

		for (size_t i = 0; i < n; i++)
			bytes += srcs[i].form == TFS_SRC_NPY ? add * src[i].row_bytes
							     : src[i].scan.bytes;
		/* A watcher may be reading the progress already. */
		__atomic_store_n(&o->progress->total, bytes, __ATOMIC_RELAXED);
		__atomic_store_n(&o->progress->total_items, add, __ATOMIC_RELAXED);
	}
	pool.progress = o->progress;
	rc = pool_start(&pool, o);
	pool_up = 1;
	if (rc)
		goto out;
	for (size_t i = 0; i < n; i++) {
		rc = srcs[i].form == TFS_SRC_NPY
			     ? append_source(s, ds, &src[i], &pool)
			     : append_rows_source(s, ds, &src[i], &m, &pool, o->progress);
		if (!rc)
			rc = tfs_source_verify(src[i].in);
		if (rc)
			goto out;
	}
	rc = tfs_txn_commit(&t, &m, o->message, commit_id);
out:
	if (pool_up)
		tfs_chunk_pool_stop(&pool);
	for (size_t i = 0; src && i < n; i++) {
		tfs_source_close(src[i].in);
		tfs_rows_scan_free(&src[i].scan);
	}
	free(src);
	tfs_manifest_free(&m);
	tfs_txn_end(&t);
	return rc;
}

int tfs_update(struct tfs_store *s, const char *ds, const char *column, uint64_t row_start,
	       const char *path, const struct tfs_import_opts *o, struct tfs_id *commit_id)
{
	struct tfs_import_src isrc = { column, path, TFS_SRC_NPY, 0 };
	struct source src = { .src = &isrc };
	struct tfs_chunk_pool pool = { .s = s, .ds = ds };
	struct tfs_manifest m = { 0 };
	struct tfs_column *c = NULL;
	struct tfs_txn t;
	uint64_t nrows, k0, k1;
	int rc, pool_up = 0;

	rc = tfs_txn_begin(&t, s, ds, o);
	if (rc)
		goto out;
	rc = tfs_manifest_copy_extra(&t.old, 0, &m);
	if (rc)
		goto out;
	for (size_t i = 0; i < m.ncols; i++)
		if (!strcmp(m.cols[i].name, column) && m.cols[i].part == TFS_PART_NONE)
			c = &m.cols[i];
	if (!c) {
		tfs_err("%s/%s: branch %s has no column '%s'", s->url, ds, t.branch, column);
		rc = -EINVAL;
		goto out;
	}
	if (c->kind != TFS_COL_FIXED) {
		tfs_err("%s/%s: column %s holds %s rows; update rewrites fixed columns only (drop "
			"and import it again)",
			s->url, ds, column, tfs_col_kind_name(c->kind));
		rc = -EINVAL;
		goto out;
	}
	rc = open_source(&src);
	if (rc)
		goto out;
	if (strcmp(c->dtype.descr, src.info.dtype.descr) || !same_row_shape(c, &src.info)) {
		tfs_err("column %s holds rows of dtype %s; %s has dtype %s or another row shape",
			column, c->dtype.descr, path, src.info.dtype.descr);
		rc = -EINVAL;
		goto out;
	}
	nrows = src.info.shape[0];
	if (row_start > c->rows || nrows > c->rows - row_start) {
		tfs_err("rows %" PRIu64 "..%" PRIu64 " are outside column %s (%" PRIu64
			" rows); update overwrites existing rows, import appends",
			row_start, row_start + nrows - 1, column, c->rows);
		rc = -EINVAL;
		goto out;
	}
	if (nrows == 0)
		goto commit;
	if (src.info.fortran_order && src.info.ndim > 1) {
		tfs_err("%s: Fortran-ordered input is not supported by update; save it in C order",
			path);
		rc = -EINVAL;
		goto out;
	}
	rc = pool_start(&pool, o);
	pool_up = 1;
	if (rc)
		goto out;
	/* Copy-on-write at chunk granularity: only the chunks the range touches are rewritten. */
	k0 = tfs_column_chunk_of(c, row_start);
	k1 = tfs_column_chunk_of(c, row_start + nrows - 1);
	for (uint64_t k = k0; k <= k1; k++) {
		const uint64_t r0 = tfs_column_chunk_first(c, (size_t)k);
		const uint64_t nr = tfs_column_chunk_rows(c, (size_t)k);
		const uint64_t lo = row_start > r0 ? row_start : r0;
		const uint64_t hi = row_start + nrows < r0 + nr ? row_start + nrows : r0 + nr;
		uint8_t *raw = malloc((size_t)(nr * c->row_bytes));

		if (!raw) {
			rc = -ENOMEM;
			break;
		}
		rc = load_chunk(s, ds, c, (size_t)k, raw, nr);
		if (!rc) {
			rc = tfs_source_pread(src.in, raw + (lo - r0) * c->row_bytes,
					      (size_t)((hi - lo) * c->row_bytes),
					      src.info.data_offset +
						      (lo - row_start) * c->row_bytes);
			if (rc)
				tfs_err("%s: %s", path, strerror(-rc));
			else
				tfs_source_release(src.in, src.info.data_offset +
								   (hi - row_start) * c->row_bytes);
		}
		if (rc) {
			free(raw);
			break;
		}
		if (src.info.big_endian)
			tfs_dtype_swap(&c->dtype, raw + (lo - r0) * c->row_bytes,
				       (size_t)((hi - lo) * c->row_bytes));
		rc = tfs_chunk_pool_submit(&pool, raw, (size_t)(nr * c->row_bytes), c,
					   &c->chunks[k]);
		if (rc)
			break;
	}
	{
		int rc2 = tfs_chunk_pool_drain(&pool);

		if (!rc)
			rc = rc2;
	}
	if (!rc)
		rc = tfs_source_verify(src.in);
	if (rc)
		goto out;
commit:
	rc = tfs_txn_commit(&t, &m, o->message, commit_id);
out:
	if (pool_up)
		tfs_chunk_pool_stop(&pool);
	tfs_source_close(src.in);
	tfs_manifest_free(&m);
	tfs_txn_end(&t);
	return rc;
}

int tfs_drop(struct tfs_store *s, const char *ds, const char *column,
	     const struct tfs_import_opts *o, struct tfs_id *commit_id)
{
	struct tfs_manifest m = { 0 };
	struct tfs_txn t;
	int rc, found = 0;

	rc = tfs_txn_begin(&t, s, ds, o);
	if (rc)
		goto out;
	rc = tfs_manifest_copy_extra(&t.old, 0, &m);
	if (rc)
		goto out;
	for (size_t i = 0; i < m.ncols; i++) {
		/* A column goes with its parts, which follow it (the headers' part indices are
		 * stale afterwards: m is only written out). */
		size_t n = m.cols[i].kind == TFS_COL_RAGGED  ? 4
			   : m.cols[i].kind != TFS_COL_FIXED ? 3
							     : 1;

		if (strcmp(m.cols[i].name, column) || m.cols[i].part != TFS_PART_NONE)
			continue;
		for (size_t j = i; j < i + n; j++)
			tfs_column_free(&m.cols[j]);
		memmove(&m.cols[i], &m.cols[i + n], (m.ncols - i - n) * sizeof(m.cols[0]));
		m.ncols -= n;
		found = 1;
		break;
	}
	if (!found) {
		tfs_err("%s/%s: branch %s has no column '%s'", s->url, ds, t.branch, column);
		rc = -EINVAL;
		goto out;
	}
	if (m.ncols == 0)
		m.rows = 0; /* no columns, no rows: the next import starts afresh */
	rc = tfs_txn_commit(&t, &m, o->message, commit_id);
out:
	tfs_manifest_free(&m);
	tfs_txn_end(&t);
	return rc;
}
