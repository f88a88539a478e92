/* SPDX-License-Identifier: MIT */
/* staging: the ring of slots, the gather from the chunk cache and the pool that fills ahead. */
#include "staging.h"

#include <assert.h>
#include <ctype.h>
#include <stddef.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pack.h"
#include "util.h"

enum slot_state { S_FREE, S_FILLING, S_READY, S_LEASED };

struct slot {
	enum slot_state state; /* protected by st->lock */
	int rc;		       /* the last fill's result; protected by st->lock */
	size_t nrows;	       /* protected by st->lock */
	uint64_t *rows;	       /* max_rows entries; owned by the filler while S_FILLING */
	/* Set by the filler while S_FILLING, read after: bytes of each column; the column that
	 * did not fit its room and the bytes it needed (rc -E2BIG). */
	uint64_t used[TFS_STAGING_MAX_COLS];
	size_t padded; /* bad rows gathered as zeros */
	size_t over_col;
	uint64_t over_need;
	/* The batch's runs of bytes and the chunks they read: built by the filler while
	 * S_FILLING, then the backend's until the batch is complete (begin waits for that). */
	struct tfs_gather_list list;
	struct tfs_staging *st;
	struct tfs_work work; /* its fill, when made ahead on the pool */
};

struct tfs_staging {
	struct tfs_workgroup fills;    /* fills made ahead; .pool NULL: every fill is inline */
	struct tfs_staging_config cfg; /* shm_dir and tag are not kept */
	const struct tfs_staging_backend *be;
	void *b;
	struct tfs_reader *reader; /* the fills' rows; bad rows */
	int own_reader;		   /* opened by the ring (cfg.reader was NULL) */
	uint64_t slot_bytes;
	/* Inside a slot, as in struct tfs_staging_loc. */
	uint64_t col_off[TFS_STAGING_MAX_COLS], data_off[TFS_STAGING_MAX_COLS];
	uint64_t shapes_off[TFS_STAGING_MAX_COLS];
	pthread_mutex_t lock;
	pthread_cond_t cond; /* a fill finished */
	struct slot *slots;
	unsigned leased; /* protected by lock */
};

/* Process-wide counters; atomic. */
static uint64_t n_rings, n_slots, n_leased, n_batches, n_rows, n_bytes, n_fill_ns, n_errors;

static void count(uint64_t *c, int64_t d)
{
	__atomic_add_fetch(c, (uint64_t)d, __ATOMIC_RELAXED);
}

void tfs_staging_stats(struct tfs_staging_stats *out)
{
	out->rings = __atomic_load_n(&n_rings, __ATOMIC_RELAXED);
	out->slots = __atomic_load_n(&n_slots, __ATOMIC_RELAXED);
	out->leased = __atomic_load_n(&n_leased, __ATOMIC_RELAXED);
	out->batches = __atomic_load_n(&n_batches, __ATOMIC_RELAXED);
	out->rows = __atomic_load_n(&n_rows, __ATOMIC_RELAXED);
	out->bytes = __atomic_load_n(&n_bytes, __ATOMIC_RELAXED);
	out->fill_ns = __atomic_load_n(&n_fill_ns, __ATOMIC_RELAXED);
	out->errors = __atomic_load_n(&n_errors, __ATOMIC_RELAXED);
	tfs_staging_cuda_cache_stats(&out->gpu);
}

/* [DOMAIN:]BUS:DEVICE.FUNCTION in hex digits, as CUDA and lspci write a PCI bus id. */
static int is_pci_bus_id(const char *s)
{
	size_t colons = 0, dots = 0, n = strlen(s);

	if (n < 7 || n > 16 || !isxdigit((unsigned char)s[0]) || s[n - 2] != '.')
		return 0;
	for (const char *p = s; *p; p++) {
		if (*p == ':')
			colons++;
		else if (*p == '.')
			dots++;
		else if (!isxdigit((unsigned char)*p))
			return 0;
		if ((*p == ':' || *p == '.') && !isxdigit((unsigned char)p[1]))
			return 0;
	}
	return (colons == 1 || colons == 2) && dots == 1;
}

int tfs_staging_parse_device(const char *s, int *device, char *err, size_t err_cap)
{
	char *end;
	long n;

	if (is_pci_bus_id(s)) {
		if (!tfs_staging_cuda || !tfs_staging_cuda->find_pci) {
			snprintf(err, err_cap, "%s: this tensorfs was built without CUDA support",
				 s);
			return -ENODEV;
		}
		return tfs_staging_cuda->find_pci(s, device, err, err_cap);
	}

	if (!strcmp(s, "host") || !strcmp(s, "cpu")) {
		*device = TFS_STAGING_HOST;
		return 0;
	}
	if (!strcmp(s, "cuda")) {
		*device = 0;
		return 0;
	}
	if (strncmp(s, "cuda:", 5) || s[5] < '0' || s[5] > '9')
		return -EINVAL;
	errno = 0;
	n = strtol(s + 5, &end, 10);
	if (errno || *end || n < 0 || n > 1024)
		return -EINVAL;
	*device = (int)n;
	return 0;
}

int tfs_staging_probe(int device, char *err, size_t err_cap)
{
	if (device == TFS_STAGING_HOST)
		return tfs_staging_host.probe(device, err, err_cap);
	if (!tfs_staging_cuda) {
		snprintf(err, err_cap, "cuda:%d: this tensorfs was built without CUDA support",
			 device);
		return -ENODEV;
	}
	return tfs_staging_cuda->probe(device, err, err_cap);
}

void tfs_staging_prepare(int device, struct tfs_cache *cache)
{
	char err[256];

	if (tfs_staging_probe(device, err, sizeof(err))) {
		tfs_warn("-o cuda_init=%d: %s: the device is set up when a stream opens", device,
			 err);
		return;
	}
	if (tfs_staging_cuda && tfs_staging_cuda->prepare)
		tfs_staging_cuda->prepare(device, cache);
}

/* Bytes of a slot that the last fill used: up to the end of the last column's rows. */
/* Column c of the ring: a version's column, or a pack file's description. */
static const struct tfs_column *ring_col(const struct tfs_staging_config *cfg, size_t c)
{
	return cfg->pack ? &cfg->pack_cols[c] : &cfg->ver->manifest.cols[cfg->cols[c]];
}

static uint64_t used_bytes(const struct tfs_staging *st, const struct slot *s)
{
	const size_t last = st->cfg.ncols - 1;

	if (ring_col(&st->cfg, last)->kind == TFS_COL_FIXED)
		return st->col_off[last] + s->used[last];
	return st->data_off[last] + s->used[last];
}

/* A pack file's samples, made on the host into the slot's layout (converted to the dtype
 * staged) and copied from there by one op. */
static int fill_pack_column(struct tfs_staging *st, struct slot *s, size_t c, uint8_t *mem)
{
	const struct tfs_column *col = &st->cfg.pack_cols[c];
	const enum tfs_pack_file f = (enum tfs_pack_file)st->cfg.cols[c];
	const uint64_t native = tfs_pack_row_bytes(st->cfg.pack, f);
	struct tfs_dtype dt;
	struct tfs_gather_list l;
	uint64_t len;
	uint8_t *tmp = malloc(native);
	int rc = tmp ? 0 : -ENOMEM, same;

	tfs_pack_file_type(st->cfg.pack, f, &dt, &len);
	same = dt.itemsize == col->dtype.itemsize && dt.kind == col->dtype.kind;
	tfs_gather_list_init(&l, st->cfg.cache);
	for (size_t i = 0; !rc && i < s->nrows; i++) {
		uint8_t *row = mem + st->col_off[c] + i * col->row_bytes;
		int padded;

		rc = tfs_pack_sample(st->cfg.pack, st->reader, s->rows[i], f, same ? row : tmp, &l,
				     &padded);
		s->padded += (size_t)padded;
		if (!rc && !same)
			rc = tfs_dtype_convert_ints(&dt, &col->dtype, tmp, row, len, NULL);
	}
	tfs_gather_list_free(&l);
	free(tmp);
	s->used[c] = s->nrows * col->row_bytes;
	if (!rc)
		rc = tfs_gather_list_add(&s->list, mem + st->col_off[c], st->col_off[c],
					 s->used[c]);
	return rc;
}

static void fill_slot(struct slot *s)
{
	struct tfs_staging *st = s->st;
	const unsigned i = (unsigned)(s - st->slots);
	const uint64_t t0 = tfs_now_ns();
	uint64_t bytes = 0;
	uint8_t *mem = NULL;
	int rc = st->be->begin(st->b, i, &mem);

	s->padded = 0;
	assert(!s->list.npins && !s->list.nops);
	for (size_t c = 0; !rc && st->cfg.pack && c < st->cfg.ncols; c++) {
		rc = fill_pack_column(st, s, c, mem);
		bytes += s->used[c];
	}
	for (size_t c = 0; !rc && !st->cfg.pack && c < st->cfg.ncols; c++) {
		const struct tfs_gather_place at = { st->col_off[c], st->data_off[c],
						     st->shapes_off[c], st->cfg.room[c] };
		struct tfs_gather_result res;

		rc = tfs_reader_gather(st->reader, st->cfg.cols[c], s->rows, s->nrows, &at, mem,
				       &s->list, &res);
		s->used[c] = res.used;
		s->padded += res.padded;
		if (rc == -E2BIG) {
			s->over_col = c;
			s->over_need = res.need;
		}
		bytes += s->used[c];
	}
	/* Only the used part of the slot is written: up to the last column's end. The backend
	 * releases the list once the batch is complete. */
	if (!rc)
		rc = st->be->submit(st->b, i, &s->list, (size_t)used_bytes(st, s));
	else
		tfs_gather_list_release(&s->list);
	if (rc) {
		count(&n_errors, 1);
	} else {
		count(&n_batches, 1);
		count(&n_rows, (int64_t)s->nrows);
		count(&n_bytes, (int64_t)bytes);
	}
	count(&n_fill_ns, (int64_t)(tfs_now_ns() - t0));
	pthread_mutex_lock(&st->lock);
	assert(s->state == S_FILLING);
	s->rc = rc;
	s->state = S_READY;
	pthread_cond_broadcast(&st->cond);
	pthread_mutex_unlock(&st->lock);
}

/* A fill made ahead, on the pool. */
static int fill_run(struct tfs_work *w)
{
	fill_slot((struct slot *)((char *)w - offsetof(struct slot, work)));
	return 0;
}

/* --- rings ---------------------------------------------------------------------------------- */

static uint64_t align_up(uint64_t x)
{
	return (x + TFS_STAGING_ALIGN - 1) / TFS_STAGING_ALIGN * TFS_STAGING_ALIGN;
}

/* Lay column c out in the slot from *off on (each region aligned), moving *off past it; -E2BIG
 * when the slot grows past TFS_STAGING_MAX_SLOT_BYTES. */
static int place_column(struct tfs_staging *st, const struct tfs_staging_config *cfg, size_t c,
			uint64_t *off)
{
	const struct tfs_column *col = ring_col(cfg, c);
	const uint64_t max = TFS_STAGING_MAX_SLOT_BYTES;
	uint64_t bytes;

	st->col_off[c] = st->data_off[c] = st->shapes_off[c] = *off;
	if (col->kind == TFS_COL_FIXED) {
		if (tfs_mul_u64(col->row_bytes, cfg->max_rows, &bytes) || bytes > max)
			return -E2BIG;
	} else {
		/* The offsets, the shapes (ragged), then the data. */
		bytes = align_up((cfg->max_rows + 1) * sizeof(uint64_t));
		st->shapes_off[c] = *off + bytes;
		if (col->kind == TFS_COL_RAGGED)
			bytes += align_up(cfg->max_rows * col->ndim * sizeof(int64_t));
		st->data_off[c] = *off + bytes;
		if (cfg->room[c] > max)
			return -E2BIG;
		bytes += cfg->room[c];
	}
	*off += align_up(bytes);
	return *off > max ? -E2BIG : 0;
}

static void ring_shape(const struct tfs_staging *st, struct tfs_ringkeep_shape *sh)
{
	*sh = (struct tfs_ringkeep_shape){ st->be,	  st->cfg.device, st->slot_bytes,
					   st->cfg.depth, st->cfg.uid,	  st->cfg.gid };
}

/* The backend's slots: kept ones of the ring's shape, else new. */
static int make_slots(struct tfs_staging *st, const struct tfs_staging_config *cfg, char *err,
		      size_t err_cap)
{
	struct tfs_ringkeep_shape sh;

	ring_shape(st, &sh);
	if (cfg->keep && st->be->reuse) {
		void *b = tfs_ringkeep_take(cfg->keep, &sh);

		if (b && !st->be->reuse(b, cfg, err, err_cap)) {
			st->b = b;
			return 0;
		}
		if (b) {
			tfs_warn("staging: kept slots not reused: %s", err);
			st->be->destroy(b);
			err[0] = 0;
		}
	}
	if (cfg->keep)
		tfs_ringkeep_fit(cfg->keep, cfg->keep_room);
	return st->be->create(cfg, st->slot_bytes, &st->b, err, err_cap);
}

/* The backend's slots kept for a later ring (every batch complete), else freed. */
static void free_slots(struct tfs_staging *st)
{
	struct tfs_ringkeep_shape sh;

	ring_shape(st, &sh);
	if (st->cfg.keep && st->be->keep && !st->be->keep(st->b) &&
	    !tfs_ringkeep_put(st->cfg.keep, &sh, st->b))
		return;
	st->be->destroy(st->b);
}

int tfs_staging_create(const struct tfs_staging_config *cfg, struct tfs_staging **out, char *err,
		       size_t err_cap)
{
	const struct tfs_staging_backend *be = cfg->backend			 ? cfg->backend
					       : cfg->device == TFS_STAGING_HOST ? &tfs_staging_host
										 : tfs_staging_cuda;
	struct tfs_staging *st = NULL;
	uint64_t off = 0;
	int rc;

	assert(cfg->ncols >= 1 && cfg->ncols <= TFS_STAGING_MAX_COLS);
	assert(cfg->depth >= 1 && cfg->depth <= TFS_STAGING_MAX_DEPTH && cfg->max_rows >= 1);
	rc = cfg->backend ? 0 : tfs_staging_probe(cfg->device, err, err_cap);
	if (rc)
		return rc;
	st = calloc(1, sizeof(*st));
	if (!st)
		return -ENOMEM;
	for (size_t c = 0; c < cfg->ncols; c++) {
		if (place_column(st, cfg, c, &off)) {
			snprintf(err, err_cap,
				 "a slot of %" PRIu64
				 " rows of these columns is larger than %llu MiB",
				 cfg->max_rows, TFS_STAGING_MAX_SLOT_BYTES >> 20);
			free(st);
			return -E2BIG;
		}
	}
	st->slot_bytes = off ? off : TFS_STAGING_ALIGN;
	if (cfg->pool)
		tfs_workgroup_init(&st->fills, cfg->pool);
	st->cfg = *cfg;
	st->cfg.shm_dir = NULL;
	st->cfg.tag = NULL;
	st->be = be;
	pthread_mutex_init(&st->lock, NULL);
	pthread_cond_init(&st->cond, NULL);
	st->slots = calloc(cfg->depth, sizeof(*st->slots));
	if (!st->slots) {
		rc = -ENOMEM;
		goto fail;
	}
	st->reader = cfg->reader;
	if (!st->reader) {
		rc = tfs_reader_open(cfg->ver, cfg->cache, cfg->pad_bad_rows, &st->reader);
		if (rc)
			goto fail;
		st->own_reader = 1;
	}
	for (unsigned i = 0; i < cfg->depth; i++) {
		st->slots[i].st = st;
		tfs_gather_list_init(&st->slots[i].list, cfg->cache);
		st->slots[i].work.run = fill_run;
		st->slots[i].rows = malloc(cfg->max_rows * sizeof(uint64_t));
		if (!st->slots[i].rows) {
			rc = -ENOMEM;
			goto fail;
		}
	}
	rc = make_slots(st, cfg, err, err_cap);
	if (rc)
		goto fail;
	tfs_version_get(cfg->ver);
	count(&n_rings, 1);
	count(&n_slots, cfg->depth);
	*out = st;
	return 0;
fail:
	if (rc == -ENOMEM && !err[0])
		snprintf(err, err_cap, "out of memory");
	for (unsigned i = 0; st->slots && i < cfg->depth; i++)
		free(st->slots[i].rows);
	free(st->slots);
	if (st->own_reader)
		tfs_reader_close(st->reader);
	if (cfg->pool)
		tfs_workgroup_destroy(&st->fills);
	pthread_cond_destroy(&st->cond);
	pthread_mutex_destroy(&st->lock);
	free(st);
	return rc;
}

void tfs_staging_destroy(struct tfs_staging *st)
{
	if (!st)
		return;
	if (st->fills.pool) {
		tfs_workgroup_wait(&st->fills);
		tfs_workgroup_destroy(&st->fills);
	}
	/* The backend completes every batch under way before it is gone (or kept): their lists
	 * are released by then. */
	free_slots(st);
	count(&n_leased, -(int64_t)st->leased);
	count(&n_rings, -1);
	count(&n_slots, -(int64_t)st->cfg.depth);
	for (unsigned i = 0; i < st->cfg.depth; i++) {
		free(st->slots[i].rows);
		tfs_gather_list_free(&st->slots[i].list);
	}
	free(st->slots);
	if (st->own_reader)
		tfs_reader_close(st->reader);
	tfs_version_put(st->cfg.ver);
	pthread_cond_destroy(&st->cond);
	pthread_mutex_destroy(&st->lock);
	free(st);
}

struct tfs_reader *tfs_staging_reader(struct tfs_staging *st)
{
	return st->reader;
}

uint64_t tfs_staging_slot_bytes(const struct tfs_staging *st)
{
	return st->slot_bytes;
}

unsigned tfs_staging_depth(const struct tfs_staging *st)
{
	return st->cfg.depth;
}

int tfs_staging_fill(struct tfs_staging *st, int slot, const uint64_t *rows, size_t n, int async)
{
	struct slot *s = NULL;

	assert(n <= st->cfg.max_rows);
	pthread_mutex_lock(&st->lock);
	if (slot >= 0) {
		if ((unsigned)slot < st->cfg.depth && st->slots[slot].state == S_FREE)
			s = &st->slots[slot];
	} else {
		for (unsigned i = 0; i < st->cfg.depth && !s; i++)
			if (st->slots[i].state == S_FREE)
				s = &st->slots[i];
	}
	if (!s) {
		pthread_mutex_unlock(&st->lock);
		return -EBUSY;
	}
	s->state = S_FILLING;
	s->nrows = n;
	pthread_mutex_unlock(&st->lock);
	if (n)
		memcpy(s->rows, rows, n * sizeof(*rows));
	if (async && st->fills.pool)
		tfs_workgroup_submit(&st->fills, &s->work, TFS_WORK_NORMAL);
	else
		fill_slot(s);
	return (int)(s - st->slots);
}

int tfs_staging_take(struct tfs_staging *st, unsigned slot)
{
	struct slot *s;
	int rc;

	if (slot >= st->cfg.depth)
		return -EINVAL;
	s = &st->slots[slot];
	pthread_mutex_lock(&st->lock);
	while (s->state == S_FILLING)
		pthread_cond_wait(&st->cond, &st->lock);
	if (s->state != S_READY) {
		pthread_mutex_unlock(&st->lock);
		return -EINVAL;
	}
	rc = s->rc;
	if (rc) {
		s->state = S_FREE;
	} else {
		s->state = S_LEASED;
		st->leased++;
		count(&n_leased, 1);
	}
	pthread_mutex_unlock(&st->lock);
	return rc;
}

int tfs_staging_release(struct tfs_staging *st, unsigned slot)
{
	int rc = -EINVAL;

	if (slot >= st->cfg.depth)
		return -EINVAL;
	pthread_mutex_lock(&st->lock);
	if (st->slots[slot].state == S_LEASED) {
		st->slots[slot].state = S_FREE;
		st->leased--;
		count(&n_leased, -1);
		rc = 0;
	}
	pthread_mutex_unlock(&st->lock);
	return rc;
}

void tfs_staging_discard(struct tfs_staging *st, unsigned slot)
{
	struct slot *s;

	if (slot >= st->cfg.depth)
		return;
	s = &st->slots[slot];
	pthread_mutex_lock(&st->lock);
	while (s->state == S_FILLING)
		pthread_cond_wait(&st->cond, &st->lock);
	if (s->state == S_READY)
		s->state = S_FREE;
	pthread_mutex_unlock(&st->lock);
}

unsigned tfs_staging_leased(struct tfs_staging *st)
{
	unsigned n;

	pthread_mutex_lock(&st->lock);
	n = st->leased;
	pthread_mutex_unlock(&st->lock);
	return n;
}

size_t tfs_staging_rows(struct tfs_staging *st, unsigned slot)
{
	size_t n;

	assert(slot < st->cfg.depth);
	pthread_mutex_lock(&st->lock);
	n = st->slots[slot].nrows;
	pthread_mutex_unlock(&st->lock);
	return n;
}

void tfs_staging_locate(const struct tfs_staging *st, unsigned slot, struct tfs_staging_loc *loc)
{
	assert(slot < st->cfg.depth);
	memset(loc, 0, sizeof(*loc));
	st->be->locate(st->b, slot, loc);
	for (size_t c = 0; c < st->cfg.ncols; c++) {
		loc->col_off[c] = loc->base + st->col_off[c];
		loc->data_off[c] = loc->base + st->data_off[c];
		loc->shapes_off[c] = loc->base + st->shapes_off[c];
	}
}

uint64_t tfs_staging_col_bytes(struct tfs_staging *st, unsigned slot, size_t c)
{
	uint64_t n;

	assert(slot < st->cfg.depth && c < st->cfg.ncols);
	pthread_mutex_lock(&st->lock);
	n = st->slots[slot].used[c];
	pthread_mutex_unlock(&st->lock);
	return n;
}

size_t tfs_staging_padded(struct tfs_staging *st, unsigned slot)
{
	size_t n;

	assert(slot < st->cfg.depth);
	pthread_mutex_lock(&st->lock);
	n = st->slots[slot].padded;
	pthread_mutex_unlock(&st->lock);
	return n;
}

void tfs_staging_overflow(struct tfs_staging *st, unsigned slot, size_t *c, uint64_t *need)
{
	assert(slot < st->cfg.depth);
	pthread_mutex_lock(&st->lock);
	*c = st->slots[slot].over_col;
	*need = st->slots[slot].over_need;
	pthread_mutex_unlock(&st->lock);
}
