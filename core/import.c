/* SPDX-License-Identifier: MIT */
/* import: append rows from NPY files to a branch's columns and commit, streaming any size. */
#include "import.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* One NPY source, opened and checked. */
struct source {
	const struct tfs_import_src *src;
	int fd;
	struct tfs_npy_info info;
	uint64_t row_bytes;
	struct tfs_column *col; /* the column in the new manifest */
};

/* Chunks are encoded and written by a small pool while the main thread reads ahead. */
struct job {
	struct job *next;
	uint8_t *raw;
	size_t len;
	struct tfs_chunk_ref *dst;
};

struct pool {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	struct job *head, *tail; /* protected by lock */
	unsigned queued;	 /* jobs queued or running; protected by lock */
	unsigned max_queued;
	int closing;		 /* protected by lock */
	int err;		 /* first error; protected by lock */
	struct tfs_store *s;
	const char *ds;
	enum tfs_codec_id codec;
	int level;
	unsigned nthreads;
	pthread_t *threads;
};

static void *worker(void *arg)
{
	struct pool *p = arg;

	for (;;) {
		struct job *j;
		int rc;

		pthread_mutex_lock(&p->lock);
		while (!p->head && !p->closing)
			pthread_cond_wait(&p->cond, &p->lock);
		j = p->head;
		if (!j) {
			pthread_mutex_unlock(&p->lock);
			return NULL;
		}
		p->head = j->next;
		if (!p->head)
			p->tail = NULL;
		pthread_mutex_unlock(&p->lock);

		rc = 0;
		{
			struct tfs_buf obj = { 0 };

			rc = tfs_object_encode(TFS_OBJ_CHUNK, p->codec, p->level, j->raw, j->len,
					       &obj);
			if (!rc)
				rc = tfs_object_put_encoded(p->s, p->ds, obj.data, obj.len,
							    &j->dst->id);
			j->dst->stored_size = obj.len;
			tfs_buf_free(&obj);
		}
		free(j->raw);
		free(j);

		pthread_mutex_lock(&p->lock);
		if (rc && !p->err)
			p->err = rc;
		p->queued--;
		pthread_cond_broadcast(&p->cond);
		pthread_mutex_unlock(&p->lock);
	}
}

static int pool_start(struct pool *p, unsigned nthreads)
{
	pthread_mutex_init(&p->lock, NULL);
	pthread_cond_init(&p->cond, NULL);
	p->threads = calloc(nthreads, sizeof(*p->threads));
	if (!p->threads)
		return -ENOMEM;
	p->max_queued = nthreads + 1;
	for (p->nthreads = 0; p->nthreads < nthreads; p->nthreads++)
		if (pthread_create(&p->threads[p->nthreads], NULL, worker, p))
			break;
	return p->nthreads ? 0 : -EAGAIN;
}

/* Queue a chunk (the pool takes raw); blocks while the pool is full. */
static int pool_submit(struct pool *p, uint8_t *raw, size_t len, enum tfs_codec_id codec, int level,
		       struct tfs_chunk_ref *dst)
{
	struct job *j = calloc(1, sizeof(*j));
	int rc;

	if (!j) {
		free(raw);
		return -ENOMEM;
	}
	j->raw = raw;
	j->len = len;
	j->dst = dst;
	pthread_mutex_lock(&p->lock);
	while (p->queued >= p->max_queued && !p->err)
		pthread_cond_wait(&p->cond, &p->lock);
	rc = p->err;
	if (rc) {
		pthread_mutex_unlock(&p->lock);
		free(raw);
		free(j);
		return rc;
	}
	/* Codec and level are per column; all jobs of one column are drained before the next. */
	p->codec = codec;
	p->level = level;
	if (p->tail)
		p->tail->next = j;
	else
		p->head = j;
	p->tail = j;
	p->queued++;
	pthread_cond_signal(&p->cond);
	pthread_mutex_unlock(&p->lock);
	return 0;
}

static int pool_drain(struct pool *p)
{
	int rc;

	pthread_mutex_lock(&p->lock);
	while (p->queued)
		pthread_cond_wait(&p->cond, &p->lock);
	rc = p->err;
	pthread_mutex_unlock(&p->lock);
	return rc;
}

static void pool_stop(struct pool *p)
{
	pthread_mutex_lock(&p->lock);
	p->closing = 1;
	pthread_cond_broadcast(&p->cond);
	pthread_mutex_unlock(&p->lock);
	for (unsigned i = 0; i < p->nthreads; i++)
		pthread_join(p->threads[i], NULL);
	free(p->threads);
	while (p->head) {
		struct job *j = p->head;

		p->head = j->next;
		free(j->raw);
		free(j);
	}
	pthread_mutex_destroy(&p->lock);
	pthread_cond_destroy(&p->cond);
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

/* Fetch and decode the last (partial) chunk of a column so new rows can fill it up. */
static int load_tail(struct tfs_store *s, const char *ds, const struct tfs_column *c, uint8_t *dst,
		     uint64_t rows)
{
	struct tfs_buf obj = { 0 };
	char key[TFS_KEY_MAX];
	int rc;

	tfs_object_key(ds, &c->chunks[c->nchunks - 1].id, key);
	rc = tfs_store_get(s, key, &obj);
	if (!rc)
		rc = tfs_object_decode(obj.data, obj.len, TFS_OBJ_CHUNK, dst, rows * c->row_bytes);
	if (rc)
		tfs_err("%s/%s: cannot read the last chunk of column %s to append to it: %s", s->url,
			key, c->name, strerror(-rc));
	tfs_buf_free(&obj);
	return rc;
}

static int append_source(struct tfs_store *s, const char *ds, struct source *src, struct pool *pool)
{
	struct tfs_column *c = src->col;
	const struct tfs_npy_info *in = &src->info;
	const uint64_t rpc = c->rows_per_chunk, add = in->shape[0];
	uint64_t tail = c->rows % rpc, total, done = 0, nchunks, k;
	uint8_t *map = NULL;
	size_t map_len = 0;
	struct tfs_chunk_ref *chunks;
	int rc = 0;

	if (add == 0)
		return 0;
	total = c->rows + add;
	nchunks = total / rpc + (total % rpc ? 1 : 0);
	chunks = realloc(c->chunks, nchunks * sizeof(*chunks));
	if (!chunks)
		return -ENOMEM;
	c->chunks = chunks;
	k = c->nchunks - (tail ? 1 : 0); /* the partial tail chunk gets rewritten */

	if (in->fortran_order && in->ndim > 1) {
		map_len = (size_t)(in->data_offset + add * src->row_bytes);
		map = mmap(NULL, map_len, PROT_READ, MAP_PRIVATE, src->fd, 0);
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
			rc = load_tail(s, ds, c, raw, have);
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
			rc = tfs_pread_full(src->fd, raw + have * c->row_bytes,
					    (size_t)(take * c->row_bytes),
					    in->data_offset + done * c->row_bytes);
		if (rc) {
			tfs_err("%s: %s", src->src->path,
				rc == -EIO ? "file is shorter than its NPY header says"
					   : strerror(-rc));
			free(raw);
			break;
		}
		if (in->big_endian)
			tfs_dtype_swap(&c->dtype, raw + have * c->row_bytes,
				       (size_t)(take * c->row_bytes));
		rc = pool_submit(pool, raw, len, c->codec, c->level, &c->chunks[k]);
		if (rc)
			break;
		k++;
		done += take;
	}
	{
		int rc2 = pool_drain(pool);

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

static int open_source(struct source *src)
{
	char err[256];
	struct stat sb;
	uint64_t need;
	int rc;

	src->fd = open(src->src->path, O_RDONLY | O_CLOEXEC);
	if (src->fd < 0) {
		rc = -errno;
		tfs_err("%s: %s", src->src->path, strerror(errno));
		return rc;
	}
	rc = tfs_npy_read_header(src->fd, &src->info, err, sizeof(err));
	if (rc) {
		tfs_err("%s: %s", src->src->path, err);
		return -EINVAL;
	}
	src->row_bytes = src->info.dtype.itemsize;
	for (unsigned d = 1; d < src->info.ndim; d++)
		src->row_bytes *= src->info.shape[d];
	/* Overflow was ruled out by the parser, which multiplied the whole shape. */
	need = src->info.data_offset + src->info.shape[0] * src->row_bytes;
	if (fstat(src->fd, &sb) < 0 || (uint64_t)sb.st_size < need) {
		tfs_err("%s: file is shorter (%lld bytes) than its NPY header says (%" PRIu64
			" bytes)",
			src->src->path, (long long)sb.st_size, need);
		return -EINVAL;
	}
	posix_fadvise(src->fd, 0, 0, POSIX_FADV_SEQUENTIAL);
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
	if (c->row_bytes == 0)
		c->rows_per_chunk = (uint64_t)1 << 32; /* empty rows: one chunk holds them all */
	else
		c->rows_per_chunk = target / c->row_bytes ? target / c->row_bytes : 1;
	c->codec = o->codec;
	c->level = o->level;
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

int tfs_import(struct tfs_store *s, const char *ds, const struct tfs_import_src *srcs, size_t n,
	       const struct tfs_import_opts *o, struct tfs_id *commit_id)
{
	const char *branch = o->branch ? o->branch : "main";
	struct tfs_manifest old = { 0 }, m = { 0 };
	struct tfs_commit head = { 0 };
	struct source *src = NULL;
	struct pool pool = { .s = s, .ds = ds };
	struct tfs_id head_id;
	uint64_t add = 0;
	int rc, pool_up = 0;
	long ncpu;

	if (n == 0) {
		tfs_err("nothing to import (give COLUMN=FILE.npy)");
		return -EINVAL;
	}
	rc = tfs_dataset_check(s, ds);
	if (rc) {
		if (rc == -ENOENT)
			tfs_err("%s/%s: no such dataset (create it with `tensorfs create`)", s->url,
				ds);
		return rc;
	}
	rc = tfs_ref_read(s, ds, TFS_REF_BRANCH, branch, &head_id);
	if (rc) {
		if (rc == -ENOENT)
			tfs_err("%s/%s: no branch '%s'", s->url, ds, branch);
		return rc;
	}
	rc = tfs_commit_load(s, ds, &head_id, &head);
	if (rc)
		return rc;
	rc = tfs_manifest_load(s, ds, &head.manifest, &old);
	if (rc)
		goto out;

	src = calloc(n, sizeof(*src));
	m.cols = calloc(old.ncols + n, sizeof(*m.cols));
	if (!src || !m.cols) {
		rc = -ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < n; i++)
		src[i].fd = -1;
	for (size_t i = 0; i < old.ncols; i++) {
		rc = tfs_column_copy(&m.cols[m.ncols], &old.cols[i]);
		if (rc)
			goto out;
		m.ncols++;
	}

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
		rc = open_source(&src[i]);
		if (rc)
			goto out;
		if (i == 0)
			add = src[i].info.shape[0];
		if (src[i].info.shape[0] != add) {
			tfs_err("%s has %" PRIu64 " rows but %s has %" PRIu64
				"; every file of one import must have the same number of rows",
				srcs[i].path, src[i].info.shape[0], srcs[0].path, add);
			rc = -EINVAL;
			goto out;
		}
		for (size_t k = 0; k < m.ncols; k++)
			if (!strcmp(m.cols[k].name, name))
				c = &m.cols[k];
		if (c) {
			char have[TFS_MAX_DIMS * 22], got[TFS_MAX_DIMS * 22];

			tfs_shape_str(c->shape, c->ndim, have, sizeof(have));
			tfs_shape_str(src[i].info.shape + 1, src[i].info.ndim - 1, got, sizeof(got));
			if (strcmp(c->dtype.descr, src[i].info.dtype.descr) ||
			    !same_row_shape(c, &src[i].info)) {
				tfs_err("column %s holds rows of dtype %s and shape %s; %s has dtype "
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
					m.cols[0].name, rows, m.cols[k].name, r, old.rows);
				rc = -EINVAL;
				goto out;
			}
		}
		m.rows = rows == UINT64_MAX ? 0 : rows;
	}

	ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	rc = pool_start(&pool, o->threads ? o->threads : (unsigned)(ncpu > 0 ? ncpu : 1));
	pool_up = 1;
	if (rc)
		goto out;
	for (size_t i = 0; i < n; i++) {
		rc = append_source(s, ds, &src[i], &pool);
		if (rc)
			goto out;
	}
	rc = tfs_commit_write(s, ds, &m, &head_id, o->message, commit_id);
	if (rc)
		goto out;
	rc = tfs_ref_update(s, ds, TFS_REF_BRANCH, branch, &head_id, commit_id);
	if (rc == -EAGAIN)
		tfs_err("%s/%s: branch %s moved while importing (another writer committed); "
			"nothing was committed, retry",
			s->url, ds, branch);
out:
	if (pool_up)
		pool_stop(&pool);
	for (size_t i = 0; src && i < n; i++)
		if (src[i].fd >= 0)
			close(src[i].fd);
	free(src);
	tfs_manifest_free(&m);
	tfs_manifest_free(&old);
	tfs_commit_free(&head);
	return rc;
}
