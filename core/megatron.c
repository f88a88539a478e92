/* SPDX-License-Identifier: MIT */
/* megatron: an indexed dataset (.bin + .idx), its index checked whole, then its sequences
 * added as rows as .bin arrives; and a token column written back as one. */
#include "megatron.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "rowcol.h"
#include "source.h"
#include "spool.h"
#include "workpool.h"

#define IDX_MAGIC "MMIDIDX\0\0"
#define IDX_HEAD 34 /* magic 9, version 8, code 1, sequences 8, documents 8 */

/* A dtype code's descr, itemsize and whether it holds token ids at all. */
static const struct {
	const char *descr;
	unsigned size;
	int ids;
} codes[] = {
	[1] = { "|u1", 1, 1 }, [2] = { "|i1", 1, 1 }, [3] = { "<i2", 2, 1 }, [4] = { "<i4", 4, 1 },
	[5] = { "<i8", 8, 1 }, [6] = { "<f8", 8, 0 }, [7] = { "<f4", 4, 0 }, [8] = { "<u2", 2, 1 },
};

static uint64_t le64(const uint8_t *p)
{
	uint64_t x;

	memcpy(&x, p, 8);
	return x;
}

/* An id of `size` bytes at p (code's signedness); -1 for a negative one. */
static int64_t id_at(const uint8_t *p, unsigned code)
{
	switch (code) {
	case 1:
		return p[0];
	case 2:
		return (int8_t)p[0];
	case 3: {
		int16_t x;
		memcpy(&x, p, 2);
		return x < 0 ? -1 : x;
	}
	case 4: {
		int32_t x;
		memcpy(&x, p, 4);
		return x < 0 ? -1 : x;
	}
	case 8: {
		uint16_t x;
		memcpy(&x, p, 2);
		return x;
	}
	default: {
		int64_t x;
		memcpy(&x, p, 8);
		return x < 0 ? -1 : x;
	}
	}
}

struct mfile {
	const uint8_t *idx, *bin;
	size_t idx_len, bin_len;
	struct tfs_source *bsrc; /* .bin's: a URL's is read as it arrives */
	int ordered;		 /* every sequence lies at or after the one before it */
	unsigned code, isz;
	uint64_t nseq, ndoc;
	const uint8_t *lens, *ptrs, *docs; /* int32, int64, int64 arrays (unaligned) */
};

static int32_t len_of(const struct mfile *f, uint64_t i)
{
	int32_t x;

	memcpy(&x, f->lens + 4 * i, 4);
	return x;
}

/* The index checked whole, against .bin's size: the import writes nothing unless this passes.
 * The ids, in .bin, are checked as they are read (ids_check). */
static int check(struct mfile *f, const char *prefix, int *identity_docs)
{
	uint64_t need, prev = 0;

	if (f->idx_len < IDX_HEAD || memcmp(f->idx, IDX_MAGIC, 9)) {
		tfs_err("%s.idx: not a Megatron-LM index (no MMIDIDX header)", prefix);
		return -EINVAL;
	}
	if (le64(f->idx + 9) != 1) {
		tfs_err("%s.idx: index version %" PRIu64 "; version 1 is read", prefix,
			le64(f->idx + 9));
		return -EINVAL;
	}
	f->code = f->idx[17];
	f->nseq = le64(f->idx + 18);
	f->ndoc = le64(f->idx + 26);
	if (f->code >= sizeof(codes) / sizeof(codes[0]) || !codes[f->code].descr) {
		tfs_err("%s.idx: unknown dtype code %u", prefix, f->code);
		return -EINVAL;
	}
	if (!codes[f->code].ids) {
		tfs_err("%s.idx: dtype %s holds no token ids", prefix, codes[f->code].descr);
		return -EINVAL;
	}
	f->isz = codes[f->code].size;
	if (f->nseq > (f->idx_len - IDX_HEAD) / 12 || f->ndoc > (f->idx_len - IDX_HEAD) / 8) {
		tfs_err("%s.idx: %" PRIu64 " sequences and %" PRIu64
			" documents do not fit its %zu "
			"bytes",
			prefix, f->nseq, f->ndoc, f->idx_len);
		return -EINVAL;
	}
	need = IDX_HEAD + 12 * f->nseq + 8 * f->ndoc;
	if (f->idx_len == need + f->nseq && f->nseq) {
		tfs_err("%s.idx: a multimodal dataset (sequence modes): not a token corpus",
			prefix);
		return -EINVAL;
	}
	if (f->idx_len != need) {
		tfs_err("%s.idx: %zu bytes where its counts make %" PRIu64, prefix, f->idx_len,
			need);
		return -EINVAL;
	}
	f->lens = f->idx + IDX_HEAD;
	f->ptrs = f->lens + 4 * f->nseq;
	f->docs = f->ptrs + 8 * f->nseq;
	*identity_docs = f->ndoc == f->nseq + 1;
	for (uint64_t d = 0; d < f->ndoc; d++) {
		const uint64_t x = le64(f->docs + 8 * d),
			       prev_doc = d ? le64(f->docs + 8 * (d - 1)) : 0;

		if ((d == 0 && x != 0) || x < prev_doc || x > f->nseq ||
		    (d + 1 == f->ndoc && x != f->nseq)) {
			tfs_err("%s.idx: document index %" PRIu64 " (%" PRIu64 ") is out of order "
				"or range",
				prefix, d, x);
			return -EINVAL;
		}
		*identity_docs &= x == d;
	}
	if (!f->ndoc && f->nseq) {
		tfs_err("%s.idx: sequences but no document index", prefix);
		return -EINVAL;
	}
	f->ordered = 1;
	for (uint64_t i = 0; i < f->nseq; i++) {
		const int32_t n = len_of(f, i);
		const uint64_t p = le64(f->ptrs + 8 * i);

		if (n < 0 || p > f->bin_len || (uint64_t)n * f->isz > f->bin_len - p) {
			tfs_err("%s: sequence %" PRIu64 " (%" PRId32 " tokens at byte %" PRIu64
				") lies outside the %zu bytes of .bin",
				prefix, i, n, p, f->bin_len);
			return -EINVAL;
		}
		f->ordered &= p >= prev;
		prev = p;
	}
	return 0;
}

/* The bits of mask that any of n little-endian ids of size bytes at row has (inlined with a
 * constant size: a plain load each). */
static inline uint64_t high_bits(const uint8_t *row, uint64_t n, const unsigned size,
				 const uint64_t mask)
{
	uint64_t high = 0;

	for (uint64_t t = 0; t < n; t++) {
		uint64_t x = 0;

		memcpy(&x, row + size * t, size); /* the low bytes: a little-endian host */
		high |= x & mask;
	}
	return high;
}

/* Sequence i's n ids at row: none negative, and (int64 ids) each below 2^32, the uint32 they
 * are kept as. A sequence that fails this fails the import, before its commit. */
static int ids_check(const struct mfile *f, const char *prefix, uint64_t i, const uint8_t *row,
		     uint64_t n)
{
	uint64_t high = 0; /* the bits an id may not have, ORed over the sequence */

	/* The bits first, a branch-free pass (ids are in .bin's cache lines already). */
	switch (f->code) {
	case 1:
	case 8:
		return 0; /* unsigned: every id is one */
	case 2:
		high = high_bits(row, n, 1, 0x80u);
		break;
	case 3:
		high = high_bits(row, n, 2, 0x8000u);
		break;
	case 4:
		high = high_bits(row, n, 4, 0x80000000u);
		break;
	default: /* negative, or past uint32 */
		high = high_bits(row, n, 8, 0xffffffff00000000u);
		break;
	}
	if (!high)
		return 0;
	for (uint64_t t = 0; t < n; t++) {
		const int64_t id = id_at(row + t * f->isz, f->code);

		if (id < 0) {
			tfs_err("%s: sequence %" PRIu64 " holds a negative token id", prefix, i);
			return -EINVAL;
		}
		if (f->code == 5 && (uint64_t)id > UINT32_MAX) {
			tfs_err("%s: token id %" PRId64 " (sequence %" PRIu64
				") does not fit uint32",
				prefix, id, i);
			return -EINVAL;
		}
	}
	return 0;
}

static int map_part(const char *prefix, const char *ext, const uint8_t **data, size_t *len)
{
	char path[4096];

	if ((size_t)snprintf(path, sizeof(path), "%s%s", prefix, ext) >= sizeof(path))
		return -ENAMETOOLONG;
	return tfs_import_map_file(path, data, len);
}

/* PREFIX.bin, mapped, as a source read once: a URL's fetch runs from now on, and its bytes
 * are read as they arrive (tfs_source_wait) and given back once read (tfs_source_release). */
static int open_bin(const char *prefix, struct mfile *f)
{
	char path[4096];

	if ((size_t)snprintf(path, sizeof(path), "%s.bin", prefix) >= sizeof(path))
		return -ENAMETOOLONG;
	return tfs_import_map_source(path, TFS_SOURCE_ONCE, &f->bsrc, &f->bin, &f->bin_len);
}

int tfs_import_megatron(struct tfs_store *s, const char *ds, const char *prefix, const char *column,
			const struct tfs_import_opts *o, struct tfs_import_result *res,
			struct tfs_id *commit_id)
{
	static const char *const stored[] = {
		[1] = "|u1", [2] = "|u1", [3] = "<u2", [4] = "<u4", [5] = "<u4", [8] = "<u2"
	};
	struct mfile f = { 0 };
	struct tfs_manifest m = { 0 };
	struct tfs_workpool *pool = NULL;
	struct tfs_rowcol *w = NULL, *dw = NULL;
	const uint8_t *done; /* .bin's pages read up to here */
	struct tfs_dtype dt, i8;
	struct tfs_txn t;
	uint8_t *narrow = NULL;
	size_t col, dcol = 0;
	char err[128], docname[256];
	uint64_t avail = 0, released = 0; /* .bin's bytes there, and given back */
	int big, identity, rc;

	memset(res, 0, sizeof(*res));
	snprintf(docname, sizeof(docname), "%s_document", column);
	rc = tfs_txn_begin(&t, s, ds, o);
	/* .bin's fetch (a URL's) runs while the index is fetched and checked. */
	if (!rc)
		rc = open_bin(prefix, &f);
	if (!rc)
		rc = map_part(prefix, ".idx", &f.idx, &f.idx_len);
	if (!rc)
		rc = check(&f, prefix, &identity);
	if (!rc && !f.ordered) /* read in the index's order, not the file's: all of it at once */
		rc = tfs_source_keep_all(f.bsrc);
	if (!rc)
		rc = tfs_manifest_copy_extra(&t.old, 8, &m);
	if (rc)
		goto out;
	tfs_dtype_parse(stored[f.code], &dt, &big, err, sizeof(err));
	tfs_dtype_parse("<i8", &i8, &big, err, sizeof(err));
	rc = tfs_import_column(&m, column, TFS_COL_RAGGED, &dt, 1, NULL, o, prefix, &col);
	if (!rc && !identity)
		rc = tfs_import_column(&m, docname, TFS_COL_FIXED, &i8, 0, NULL, o, prefix, &dcol);
	if (!rc)
		rc = tfs_import_pool(o, &pool);
	if (!rc)
		rc = tfs_rowcol_begin(s, ds, &m, col, &w);
	if (!rc && !identity)
		rc = tfs_rowcol_begin(s, ds, &m, dcol, &dw);
	if (rc)
		goto out;
	tfs_rowcol_use_pool(w, pool);
	if (dw)
		tfs_rowcol_use_pool(dw, pool);
	done = f.bin;
	for (uint64_t i = 0, d = 0; !rc && i < f.nseq; i++) {
		const uint64_t n = (uint64_t)len_of(&f, i), p = le64(f.ptrs + 8 * i);
		const uint8_t *row = f.bin + p;

		if (p + n * f.isz > avail) {
			rc = tfs_source_wait(f.bsrc, p + n * f.isz); /* a fetch's error is logged */
			if (rc)
				break;
			avail = tfs_source_ready(f.bsrc);
		}
		if (f.ordered && p - released >= (1u << 20)) {
			tfs_source_release(f.bsrc, p); /* no later sequence lies before this one */
			released = p;
		}
		tfs_spool_map_done(&done, row);
		rc = ids_check(&f, prefix, i, row, n);
		if (rc)
			break;

		if (f.code == 5) { /* int64 ids below 2^32: as uint32 */
			uint8_t *g = realloc(narrow, n * 4 + 1);

			if (!g) {
				rc = -ENOMEM;
				break;
			}
			narrow = g;
			for (uint64_t k = 0; k < n; k++) {
				const uint32_t x = (uint32_t)le64(row + 8 * k);

				memcpy(narrow + 4 * k, &x, 4);
			}
			row = narrow;
		}
		rc = tfs_rowcol_add(w, row, (size_t)(n * dt.itemsize), &n);
		while (!rc && dw && d + 1 < f.ndoc && le64(f.docs + 8 * (d + 1)) <= i)
			d++;
		if (!rc && dw) {
			const int64_t doc = (int64_t)d;

			rc = tfs_rowcol_add(dw, &doc, 8, NULL);
		}
		res->rows++;
		tfs_progress_add(o->progress, n * f.isz, 1);
	}
	if (!rc)
		rc = tfs_rowcol_finish(w);
	if (!rc && dw)
		rc = tfs_rowcol_finish(dw);
	if (!rc)
		rc = tfs_source_verify(f.bsrc);
	if (!rc) {
		m.rows = t.old.rows + res->rows;
		rc = tfs_import_same_rows(&m, m.rows, prefix);
	}
	if (!rc)
		rc = tfs_txn_commit(&t, &m, o->message, commit_id);
	if (pool)
		res->busy_peak = tfs_workpool_busy_peak(pool);
out:
	tfs_rowcol_free(w);
	tfs_rowcol_free(dw);
	tfs_workpool_destroy(pool);
	free(narrow);
	if (f.idx)
		munmap((void *)f.idx, f.idx_len);
	if (f.bin)
		munmap((void *)f.bin, f.bin_len);
	tfs_source_close(f.bsrc);
	tfs_manifest_free(&m);
	tfs_txn_end(&t);
	return rc;
}

/* --- export ----------------------------------------------------------------------------------- */

static int write_all(int fd, const void *p, size_t n)
{
	const uint8_t *b = p;

	while (n) {
		ssize_t w = write(fd, b, n);

		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0)
			return -errno;
		b += w;
		n -= (size_t)w;
	}
	return 0;
}

/* Copy column part `part`'s bytes [0, n) to fd, a MiB at a time. With as_int32 (uint32 ids,
 * which Megatron-LM reads as its int32), an id past INT32_MAX is -EINVAL, logged: it would read
 * as a negative id. */
static int copy_part(struct tfs_version *v, struct tfs_cache *cache, size_t part, uint64_t n,
		     int as_int32, int fd)
{
	static const struct tfs_dtype u4 = { "<u4", 'u', 4 }, i4 = { "<i4", 'i', 4 };
	enum { STEP = 1 << 20 };
	uint8_t *buf = malloc(STEP);
	uint64_t bad;
	int rc = buf ? 0 : -ENOMEM;

	for (uint64_t at = 0; !rc && at < n;) {
		const size_t want = n - at < STEP ? (size_t)(n - at) : STEP;
		const ssize_t got = tfs_version_read(v, cache, part, at, buf, want);

		rc = got < 0 ? (int)got : got != (ssize_t)want ? -EIO : 0;
		/* uint32 to int32 in place: the bytes of every id that fits stay as they are */
		if (!rc && as_int32 &&
		    tfs_dtype_convert_ints(&u4, &i4, buf, buf, want / 4, &bad) == -ERANGE) {
			uint32_t id;

			memcpy(&id, buf + bad * 4, 4);
			tfs_err("token id %" PRIu32 " (token %" PRIu64 ") does not fit "
				"Megatron-LM's int32 ids",
				id, at / 4 + bad);
			rc = -EINVAL;
		}
		if (!rc)
			rc = write_all(fd, buf, want);
		at += want;
	}
	free(buf);
	return rc;
}

static int open_tmp(const char *prefix, const char *ext, char *path, size_t cap)
{
	int fd;

	if ((size_t)snprintf(path, cap, "%s%s.tmp%d", prefix, ext, (int)getpid()) >= cap)
		return -ENAMETOOLONG;
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0) {
		tfs_err("%s: %s", path, strerror(errno));
		return -errno;
	}
	return fd;
}

static int put_u64(struct tfs_buf *b, uint64_t x)
{
	return tfs_buf_append(b, &x, 8);
}

int tfs_export_megatron(struct tfs_version *v, struct tfs_cache *cache, const char *column,
			const char *prefix)
{
	const struct tfs_manifest *m = &v->manifest;
	const int at = tfs_version_column(v, column);
	const struct tfs_column *c = at < 0 ? NULL : &m->cols[at];
	char docname[256], tmp_bin[4096], tmp_idx[4096], dst[4096];
	struct tfs_buf idx = { 0 };
	uint64_t *offs = NULL, nseq, ndocs = 0, maxlen = 0;
	int64_t *docs = NULL;
	unsigned code;
	int fb = -1, fi = -1, dcol, rc = 0;

	if (!c || c->kind != TFS_COL_RAGGED || c->ndim != 1 ||
	    (c->dtype.kind != 'u' && c->dtype.kind != 'i')) {
		tfs_err("%s: no token column %s (a ragged column of rank 1 and integer dtype)",
			prefix, column);
		return -EINVAL;
	}
	code = !strcmp(c->dtype.descr, "|u1")	? 1
	       : !strcmp(c->dtype.descr, "|i1") ? 2
	       : !strcmp(c->dtype.descr, "<i2") ? 3
	       : !strcmp(c->dtype.descr, "<u2") ? 8
	       : !strcmp(c->dtype.descr, "<u4") ? 4
	       : !strcmp(c->dtype.descr, "<i4") ? 4
	       : !strcmp(c->dtype.descr, "<i8") ? 5
						: 0;
	if (!code) {
		tfs_err("column %s: dtype %s has no Megatron-LM code", column, c->dtype.descr);
		return -EINVAL;
	}
	nseq = c->rows;
	offs = malloc((nseq + 1) * sizeof(*offs));
	if (!offs)
		return -ENOMEM;
	if (tfs_version_read(v, cache, c->offsets, 0, offs, (nseq + 1) * 8) !=
	    (ssize_t)((nseq + 1) * 8)) {
		tfs_err("column %s: its offsets cannot be read", column);
		rc = -EIO;
		goto out;
	}
	for (uint64_t i = 0; i < nseq; i++) {
		const uint64_t len = (offs[i + 1] - offs[i]) / c->dtype.itemsize;

		maxlen = len > maxlen ? len : maxlen;
	}
	if (maxlen > INT32_MAX) {
		tfs_err("column %s: a row of %" PRIu64 " tokens; Megatron-LM's lengths are int32",
			column, maxlen);
		rc = -EINVAL;
		goto out;
	}
	/* The document index: from COLUMN_document, else a document a sequence. */
	snprintf(docname, sizeof(docname), "%s_document", column);
	dcol = tfs_version_column(v, docname);
	if (dcol >= 0 && !strcmp(m->cols[dcol].dtype.descr, "<i8") && m->cols[dcol].ndim == 0) {
		docs = malloc((nseq ? nseq : 1) * sizeof(*docs));
		rc = docs ? 0 : -ENOMEM;
		if (!rc && tfs_version_read(v, cache, (size_t)dcol, 0, docs, nseq * 8) !=
				   (ssize_t)(nseq * 8))
			rc = -EIO;
		if (rc)
			goto out;
	}
	/* The index, in memory: 20 bytes a sequence. */
	rc = tfs_buf_append(&idx, IDX_MAGIC, 9) ?: put_u64(&idx, 1) ?: tfs_buf_append(&idx, &code, 1);
	if (!rc) {
		ndocs = docs ? (nseq ? (uint64_t)docs[nseq - 1] + 2 : 1) : nseq + 1;
		rc = put_u64(&idx, nseq) ?: put_u64(&idx, ndocs);
	}
	for (uint64_t i = 0; !rc && i < nseq; i++) {
		const int32_t len = (int32_t)((offs[i + 1] - offs[i]) / c->dtype.itemsize);

		rc = tfs_buf_append(&idx, &len, 4);
	}
	for (uint64_t i = 0; !rc && i < nseq; i++)
		rc = put_u64(&idx, offs[i] - offs[0]);
	if (!rc && docs) {
		uint64_t i = 0;

		for (uint64_t d = 0; !rc && d + 1 < ndocs; d++) {
			while (i < nseq && docs[i] < (int64_t)d)
				i++;
			rc = put_u64(&idx, i);
		}
		if (!rc)
			rc = put_u64(&idx, nseq);
	} else {
		for (uint64_t d = 0; !rc && d <= nseq; d++)
			rc = put_u64(&idx, d);
	}
	if (rc)
		goto out;
	fb = open_tmp(prefix, ".bin", tmp_bin, sizeof(tmp_bin));
	fi = fb < 0 ? -1 : open_tmp(prefix, ".idx", tmp_idx, sizeof(tmp_idx));
	if (fb < 0 || fi < 0) {
		rc = fb < 0 ? fb : fi;
		goto out;
	}
	rc = copy_part(v, cache, c->data, offs[nseq] - offs[0], !strcmp(c->dtype.descr, "<u4"), fb);
	if (!rc)
		rc = write_all(fi, idx.data, idx.len);
	if (!rc && (fsync(fb) || fsync(fi)))
		rc = -errno;
	if (!rc) {
		snprintf(dst, sizeof(dst), "%s.bin", prefix);
		rc = rename(tmp_bin, dst) ? -errno : 0;
	}
	if (!rc) {
		snprintf(dst, sizeof(dst), "%s.idx", prefix);
		rc = rename(tmp_idx, dst) ? -errno : 0;
	}
	if (rc)
		tfs_err("%s: cannot write: %s", prefix, strerror(-rc));
out:
	if (fb >= 0) {
		close(fb);
		if (rc)
			unlink(tmp_bin);
	}
	if (fi >= 0) {
		close(fi);
		if (rc)
			unlink(tmp_idx);
	}
	tfs_buf_free(&idx);
	free(offs);
	free(docs);
	return rc;
}
