/* SPDX-License-Identifier: MIT */
/* importtxn: a write against a branch (begin, commit unless another writer moved it, end), for
 * the import module's writers: import.c, import_images.c. */
#include "import.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* A write against a branch: its head when the write began, and the manifest there. */

int tfs_txn_begin(struct tfs_txn *t, struct tfs_store *s, const char *ds, const char *branch)
{
	int rc;

	memset(t, 0, sizeof(*t));
	t->s = s;
	t->ds = ds;
	t->branch = branch ? branch : "main";
	rc = tfs_dataset_check(s, ds);
	if (rc) {
		if (rc == -ENOENT)
			tfs_err("%s/%s: no such dataset (create it with `tensorfs create`)", s->url,
				ds);
		return rc;
	}
	rc = tfs_ref_read(s, ds, TFS_REF_BRANCH, t->branch, &t->head_id);
	if (rc) {
		if (rc == -ENOENT)
			tfs_err("%s/%s: no branch '%s'", s->url, ds, t->branch);
		return rc;
	}
	rc = tfs_commit_load(s, ds, &t->head_id, &t->head);
	if (!rc)
		rc = tfs_manifest_load(s, ds, &t->head.manifest, &t->old);
	return rc;
}

/* Write the commit of manifest m on top of the head and move the branch to it, unless another
 * writer moved it first (-EAGAIN: then nothing is committed). */
int tfs_txn_commit(struct tfs_txn *t, const struct tfs_manifest *m, const char *message,
		   struct tfs_id *commit_id)
{
	int rc = tfs_commit_write(t->s, t->ds, m, &t->head_id, message, commit_id);

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
