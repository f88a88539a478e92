/* SPDX-License-Identifier: MIT */
/* pack: the index arrays of a packed view, built from a token column's offsets, and its samples
 * made from them. */
#include "pack.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "reader.h"
#include "rng.h"

const char *const tfs_pack_file_names[TFS_PACK_NFILES] = { "tokens.npy", "segments.npy",
							   "doc.npy" };

struct tfs_pack {
	size_t col, data; /* the token column (its header) and its data part */
	struct tfs_dtype dtype;
	uint64_t seq; /* S */
	int has_eos;
	uint64_t eos;
	uint64_t nrows;	 /* the column's rows */
	uint64_t ndocs;	 /* documents packed */
	uint64_t *offs;	 /* nrows + 1 byte offsets into the data part */
	uint64_t *docs;	 /* the documents (rows) in stream order */
	uint64_t n;	 /* samples */
	uint64_t *first; /* per sample: the position in docs of its first document */
	uint64_t *skip;	 /* per sample: its first token's offset in that document */
	uint64_t *order; /* the samples in view order */
};

static void set_err(char *err, size_t cap, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static void set_err(char *err, size_t cap, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(err, cap, fmt, ap);
	va_end(ap);
}

static int is_token_column(const struct tfs_column *c)
{
	return c->part == TFS_PART_NONE && c->kind == TFS_COL_RAGGED && c->ndim == 1 &&
	       (c->dtype.kind == 'i' || c->dtype.kind == 'u');
}

int tfs_pack_find_column(const struct tfs_manifest *m, const char *name, size_t *at, char *err,
			 size_t cap)
{
	size_t found = SIZE_MAX, n = 0;

	for (size_t i = 0; i < m->ncols; i++) {
		const struct tfs_column *c = &m->cols[i];

		if (name && !strcmp(c->name, name)) {
			if (!is_token_column(c)) {
				set_err(err, cap,
					"pack: column %s is not a token column (documents as a "
					"ragged column of rank 1 and integer dtype)",
					name);
				return -EINVAL;
			}
			*at = i;
			return 0;
		}
		if (!name && is_token_column(c)) {
			found = i;
			n++;
		}
	}
	if (name) {
		set_err(err, cap, "pack: no column %s", name);
		return -EINVAL;
	}
	if (n > 1) {
		set_err(err, cap, "pack: %zu token columns; name one with col=", n);
		return -EINVAL;
	}
	if (!n) {
		set_err(err, cap,
			"pack: no token column (documents as a ragged column of rank 1 "
			"and integer dtype)");
		return -EINVAL;
	}
	*at = found;
	return 0;
}

/* Tokens document d puts in the stream (its own, and the eos). */
static uint64_t doc_tokens(const struct tfs_pack *p, uint64_t d)
{
	return (p->offs[d + 1] - p->offs[d]) / p->dtype.itemsize + (p->has_eos ? 1 : 0);
}

static int alloc_u64(uint64_t **a, uint64_t n)
{
	*a = malloc((n ? n : 1) * sizeof(**a));
	return *a ? 0 : -ENOMEM;
}

int tfs_pack_build(struct tfs_version *v, struct tfs_cache *cache, const struct tfs_pack_params *pp,
		   struct tfs_pack **out, char *err, size_t err_cap)
{
	const struct tfs_manifest *m = &v->manifest;
	struct tfs_pack *p = calloc(1, sizeof(*p));
	const struct tfs_column *c;
	uint64_t total = 0, before = 0, pos = 0;
	ssize_t got;
	int rc;

	if (!p)
		return -ENOMEM;
	rc = tfs_pack_find_column(m, pp->col, &p->col, err, err_cap);
	if (rc)
		goto fail;
	c = &m->cols[p->col];
	p->data = c->data;
	p->dtype = c->dtype;
	p->seq = pp->seq;
	/* The view's eos=, else the one recorded on the column at import. */
	p->has_eos = pp->has_eos || c->has_eos;
	p->eos = pp->has_eos ? pp->eos : c->eos;
	p->nrows = c->rows;
	p->ndocs = pp->docs ? pp->ndocs : c->rows;
	if (p->has_eos && !tfs_dtype_holds(&p->dtype, p->eos)) {
		set_err(err, err_cap, "pack: eos=%" PRIu64 " does not fit column %s's dtype %s",
			p->eos, c->name, p->dtype.descr);
		rc = -EINVAL;
		goto fail;
	}
	/* The documents' offsets, read whole: 8 bytes a document. */
	rc = alloc_u64(&p->offs, p->nrows + 1);
	if (!rc)
		rc = alloc_u64(&p->docs, p->ndocs);
	if (rc)
		goto fail;
	got = tfs_version_read(v, cache, c->offsets, 0, p->offs, (p->nrows + 1) * sizeof(uint64_t));
	if (got != (ssize_t)((p->nrows + 1) * sizeof(uint64_t))) {
		set_err(err, err_cap, "pack: the offsets of column %s cannot be read", c->name);
		rc = got < 0 ? (int)got : -EIO;
		goto fail;
	}
	for (uint64_t d = 0; d < p->nrows; d++)
		if (p->offs[d + 1] < p->offs[d] ||
		    (p->offs[d + 1] - p->offs[d]) % p->dtype.itemsize) {
			set_err(err, err_cap, "pack: column %s's offsets are damaged", c->name);
			rc = -EIO;
			goto fail;
		}
	for (uint64_t i = 0; i < p->ndocs; i++) {
		const uint64_t d = pp->docs ? pp->docs[i] : i;

		if (d >= p->nrows) {
			set_err(err, err_cap,
				"pack: document %" PRIu64 " is not a row of column %s", d, c->name);
			rc = -EINVAL;
			goto fail;
		}
		p->docs[i] = d;
		total += doc_tokens(p, d);
	}
	/* The document order, then the samples' starts: one walk over both. */
	{
		struct tfs_rng g;

		tfs_rng_seed(&g, pp->seed, pp->epoch);
		if (pp->shuffle)
			tfs_rng_shuffle(&g, p->docs, p->ndocs);
		p->n = total ? (total - 1) / p->seq : 0;
		rc = alloc_u64(&p->first, p->n);
		if (!rc)
			rc = alloc_u64(&p->skip, p->n);
		if (!rc)
			rc = alloc_u64(&p->order, p->n);
		if (rc)
			goto fail;
		for (uint64_t k = 0; k < p->n; k++) {
			const uint64_t start = k * p->seq;

			while (before + doc_tokens(p, p->docs[pos]) <= start)
				before += doc_tokens(p, p->docs[pos++]);
			p->first[k] = pos;
			p->skip[k] = start - before;
			p->order[k] = k;
		}
		if (pp->shuffle)
			tfs_rng_shuffle(&g, p->order, p->n);
	}
	*out = p;
	return 0;
fail:
	tfs_pack_free(p);
	return rc;
}

void tfs_pack_free(struct tfs_pack *p)
{
	if (!p)
		return;
	free(p->offs);
	free(p->docs);
	free(p->first);
	free(p->skip);
	free(p->order);
	free(p);
}

uint64_t tfs_pack_rows(const struct tfs_pack *p)
{
	return p->n;
}

const uint64_t *tfs_pack_order(const struct tfs_pack *p)
{
	return p->order;
}

uint64_t tfs_pack_bytes(const struct tfs_pack *p)
{
	return sizeof(*p) + (p->nrows + 1 + p->ndocs + 3 * p->n) * sizeof(uint64_t);
}

size_t tfs_pack_column(const struct tfs_pack *p)
{
	return p->col;
}

void tfs_pack_file_type(const struct tfs_pack *p, enum tfs_pack_file f, struct tfs_dtype *dt,
			uint64_t *row_len)
{
	static const struct tfs_dtype u16 = { "<u2", 'u', 2 }, u32 = { "<u4", 'u', 4 },
				      i64 = { "<i8", 'i', 8 };

	switch (f) {
	case TFS_PACK_TOKENS:
		*dt = p->dtype;
		*row_len = p->seq + 1;
		break;
	case TFS_PACK_SEGMENTS:
		*dt = p->seq + 1 > 65536 ? u32 : u16;
		*row_len = p->seq + 1;
		break;
	default:
		*dt = i64;
		*row_len = 2;
		break;
	}
}

uint64_t tfs_pack_row_bytes(const struct tfs_pack *p, enum tfs_pack_file f)
{
	struct tfs_dtype dt;
	uint64_t n;

	tfs_pack_file_type(p, f, &dt, &n);
	return n * dt.itemsize;
}

/* Little-endian x in size bytes at out. */
static void put_le(uint8_t *out, uint64_t x, unsigned size)
{
	for (unsigned i = 0; i < size; i++)
		out[i] = (uint8_t)(x >> (8 * i));
}

int tfs_pack_sample(const struct tfs_pack *p, struct tfs_reader *r, uint64_t s,
		    enum tfs_pack_file f, uint8_t *out, struct tfs_gather_list *l, int *padded)
{
	const unsigned isz = p->dtype.itemsize;
	const unsigned ssz = p->seq + 1 > 65536 ? 4 : 2;
	uint64_t pos = p->first[s], off = p->skip[s], t = 0, seg = 0;
	int rc = 0;

	*padded = 0;
	if (f == TFS_PACK_DOC) {
		put_le(out, p->docs[pos], 8);
		put_le(out + 8, off, 8);
		return 0;
	}
	/* The walk the samples' starts came from, on from this sample's. */
	while (t < p->seq + 1 && !rc) {
		const uint64_t d = p->docs[pos], a = p->offs[d], b = p->offs[d + 1];
		const uint64_t own = (b - a) / isz, total = own + (p->has_eos ? 1 : 0);
		uint64_t take = total - off;

		if (take > p->seq + 1 - t)
			take = p->seq + 1 - t;
		if (f == TFS_PACK_SEGMENTS) {
			for (uint64_t i = 0; i < take; i++)
				put_le(out + (t + i) * ssz, seg, ssz);
		} else {
			const uint64_t real = off < own ? (own - off < take ? own - off : take) : 0;
			int bad = 0;

			if (real)
				rc = tfs_reader_gather_bytes(r, p->data, a, b, a + off * isz,
							     a + (off + real) * isz, t * isz, l,
							     &bad);
			if (real < take) /* the eos */
				put_le(out + (t + real) * isz, p->eos, isz);
			*padded |= bad;
		}
		t += take;
		seg += take != 0;
		off = 0;
		if (t < p->seq + 1 && ++pos >= p->ndocs)
			rc = -EIO; /* cannot be: the samples end before the stream does */
	}
	if (!rc && f == TFS_PACK_TOKENS)
		tfs_gather_list_copy(l, 0, (p->seq + 1) * isz, out);
	tfs_gather_list_release(l);
	return rc;
}
