/* SPDX-License-Identifier: MIT */
/* importtxn: what the import module's writers share: a write against a branch (begin, commit
 * unless another writer moved it, end), and finding or adding the column rows go to. */
#include "import.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rowcol.h"
#include "session.h"

/* A write against a branch: its head when the write began, and the manifest there. */

int tfs_txn_begin(struct tfs_txn *t, struct tfs_store *s, const char *ds,
		  const struct tfs_import_opts *o)
{
	int rc;

	memset(t, 0, sizeof(*t));
	t->s = s;
	t->ds = ds;
	t->branch = o->branch ? o->branch : "main";
	t->session = o->session;
	t->part = o->part;
	t->eos_column = o->eos_column;
	t->eos = o->eos;
	rc = tfs_dataset_check(s, ds);
	if (rc) {
		if (rc == -ENOENT)
			tfs_err("%s/%s: no such dataset (create it with `tensorfs create`)", s->url,
				ds);
		return rc;
	}
	if (t->session)
		return 0;
	rc = tfs_ref_read(s, ds, TFS_REF_BRANCH, t->branch, &t->head_id);
	if (rc) {
		if (rc == -ENOENT)
			tfs_err("%s/%s: no branch '%s'", s->url, ds, t->branch);
		return rc;
	}
	rc = tfs_commit_load(s, ds, &t->head_id, &t->head);
	if (!rc)
		rc = tfs_manifest_load(s, ds, &t->head.manifest, &t->old);
	if (!rc && t->eos_column) {
		/* Another id on the column is refused before any work. */
		const struct tfs_column *c = tfs_manifest_column(&t->old, t->eos_column);
		char err[256];

		if (c && (rc = tfs_column_eos_check(c, t->eos, err, sizeof(err))))
			tfs_err("%s/%s: %s", s->url, ds, err);
	}
	return rc;
}

/* Record the options' eos on its column of m. */
static int record_eos(const struct tfs_txn *t, struct tfs_manifest *m)
{
	struct tfs_column *c = (struct tfs_column *)tfs_manifest_column(m, t->eos_column);
	char err[256];

	if (!c || c->kind != TFS_COL_RAGGED || c->ndim != 1 ||
	    (c->dtype.kind != 'i' && c->dtype.kind != 'u')) {
		tfs_err("%s/%s: --eos: %s is no token column (ragged integers of rank 1)",
			t->s->url, t->ds, t->eos_column);
		return -EINVAL;
	}
	if (!tfs_dtype_holds(&c->dtype, t->eos)) {
		tfs_err("%s/%s: --eos %" PRIu64 " does not fit column %s's dtype %s", t->s->url,
			t->ds, t->eos, c->name, c->dtype.descr);
		return -EINVAL;
	}
	if (tfs_column_eos_merge(c, t->eos, err, sizeof(err))) {
		tfs_err("%s/%s: %s", t->s->url, t->ds, err);
		return -EINVAL;
	}
	return 0;
}

/* Write the commit of manifest m on top of the head and move the branch to it, unless another
 * writer moved it first (-EAGAIN: then nothing is committed). */
int tfs_txn_commit(struct tfs_txn *t, struct tfs_manifest *m, const char *message,
		   struct tfs_id *commit_id)
{
	int rc = t->eos_column ? record_eos(t, m) : 0;

	if (rc)
		return rc;
	if (t->session)
		return tfs_session_part_put(t->s, t->ds, t->session, t->part, m, commit_id);
	rc = tfs_commit_write(t->s, t->ds, m, &t->head_id, message, commit_id);
	if (rc)
		return rc;
	rc = tfs_ref_update(t->s, t->ds, TFS_REF_BRANCH, t->branch, &t->head_id, commit_id);
	if (rc == -EAGAIN)
		tfs_err("%s/%s: branch %s moved while writing (another writer committed); "
			"branch moved, retry: nothing was committed",
			t->s->url, t->ds, t->branch);
	return rc;
}

void tfs_txn_end(struct tfs_txn *t)
{
	tfs_manifest_free(&t->old);
	tfs_commit_free(&t->head);
}

/* A copy of the head's manifest to modify; room for `extra` more columns. */
int tfs_manifest_copy_extra(const struct tfs_manifest *old, size_t extra, struct tfs_manifest *m)
{
	memset(m, 0, sizeof(*m));
	m->rows = old->rows;
	m->cols = calloc(old->ncols + extra + 1, sizeof(*m->cols));
	if (!m->cols)
		return -ENOMEM;
	for (size_t i = 0; i < old->ncols; i++) {
		int rc = tfs_column_copy(&m->cols[m->ncols], &old->cols[i]);

		if (rc)
			return rc;
		m->ncols++;
	}
	return 0;
}

/* "fixed rows of <i8, shape 3" / "ragged rows of |u1, rank 3", for an error. */
static void rows_said(char *out, size_t cap, enum tfs_col_kind kind, const char *descr,
		      unsigned ndim, const uint64_t *shape)
{
	int n = snprintf(out, cap, "%s rows of %s", tfs_col_kind_name(kind), descr);

	if (kind != TFS_COL_FIXED || !ndim || !shape) {
		snprintf(out + n, cap - (size_t)n, ", rank %u", ndim);
		return;
	}
	for (unsigned d = 0; d < ndim && (size_t)n < cap; d++)
		n += snprintf(out + n, cap - (size_t)n, "%s%" PRIu64, d ? "x" : ", shape ",
			      shape[d]);
}

int tfs_import_column(struct tfs_manifest *m, const char *name, enum tfs_col_kind kind,
		      const struct tfs_dtype *dt, unsigned ndim, const uint64_t *shape,
		      const struct tfs_import_opts *o, const char *what, size_t *at)
{
	const struct tfs_column *c = tfs_manifest_column(m, name);
	char held[128], given[128];

	if (!c) {
		*at = m->ncols;
		return tfs_rowcol_new(m, name, kind, dt, ndim, shape, o->chunk_bytes, o->codec,
				      tfs_import_level(o, o->codec, dt, ndim));
	}
	/* Rows of one shape go into a ragged column too. */
	if (kind == TFS_COL_FIXED && c->kind == TFS_COL_RAGGED)
		kind = TFS_COL_RAGGED;
	if (c->part != TFS_PART_NONE || c->kind != kind || strcmp(c->dtype.descr, dt->descr) ||
	    c->ndim != ndim ||
	    (kind == TFS_COL_FIXED && ndim && memcmp(c->shape, shape, ndim * sizeof(*shape)))) {
		rows_said(held, sizeof(held), c->kind, c->dtype.descr, c->ndim, c->shape);
		rows_said(given, sizeof(given), kind, dt->descr, ndim, shape);
		tfs_err("column %s holds %s; %s has %s", name, held, what, given);
		return -EINVAL;
	}
	*at = (size_t)(c - m->cols);
	return 0;
}

int tfs_import_column_descr(struct tfs_manifest *m, const char *name, enum tfs_col_kind kind,
			    const char *descr, unsigned ndim, const uint64_t *shape,
			    const struct tfs_import_opts *o, const char *what, size_t *at)
{
	struct tfs_dtype dt;
	char err[128];
	int big;

	if (tfs_dtype_parse(descr, &dt, &big, err, sizeof(err)))
		return -EINVAL;
	return tfs_import_column(m, name, kind, &dt, ndim, shape, o, what, at);
}

int tfs_import_classes(struct tfs_column *c, char *const *names, size_t n, const char *what)
{
	char err[512];
	int rc = tfs_column_classes_merge(c, c->rows, names, n, err, sizeof(err));

	if (rc == -EINVAL)
		tfs_err("%s: %s", what, err);
	else if (!rc && n && c->rows && !c->nclasses)
		tfs_warn("%s: column %s holds rows labelled without class names; none are recorded",
			 what, c->name);
	return rc;
}

int tfs_import_same_rows(const struct tfs_manifest *m, uint64_t rows, const char *what)
{
	for (size_t i = 0; i < m->ncols; i++)
		if (m->cols[i].part == TFS_PART_NONE && m->cols[i].rows != rows) {
			tfs_err("column %s would have %" PRIu64 " rows and those from %s %" PRIu64
				"; import %s into a dataset whose columns all come from it",
				m->cols[i].name, m->cols[i].rows, what, rows, what);
			return -EINVAL;
		}
	return 0;
}
