/* SPDX-License-Identifier: MIT */
/* session: a write split into parts that any machine writes, in any order, and one commit of them
 * all. A part is an import whose manifest is recorded under the session instead of becoming a
 * commit (import.h: tfs_import_opts.session); the commit concatenates the parts' columns in part
 * order onto a branch and moves it once. Parts write chunks; the commit writes manifests and the
 * offsets of columns of other kinds than fixed (8 bytes a row, rebased past the rows before). */
#ifndef TFS_SESSION_H
#define TFS_SESSION_H

#include <stdint.h>

#include "format.h"
#include "store.h"

#define TFS_SESSION_MAX_PARTS 1000000u

/* Record m (already written) as part `part` of session `session`: a later write of the same part
 * (a retried one) replaces it. */
int tfs_session_part_put(struct tfs_store *s, const char *ds, const char *session, uint32_t part,
			 const struct tfs_manifest *m, struct tfs_id *manifest_id);

struct tfs_session_info {
	char name[128];
	uint32_t parts; /* parts recorded */
	uint32_t last;	/* the highest part number recorded */
	uint64_t rows;	/* rows in all of them */
	int64_t newest; /* when the last part was recorded (seconds since the epoch) */
};

typedef int (*tfs_session_fn)(void *arg, const struct tfs_session_info *info);
/* Every session of ds, in the order the store lists them. */
int tfs_session_list(struct tfs_store *s, const char *ds, tfs_session_fn fn, void *arg);

/* Commit the parts of a session on branch (NULL: main) as one commit, then forget the session.
 * nparts: the parts there must be (0: 0 .. the highest recorded, all present). Every part must
 * have the same columns (names, kinds, dtypes, shapes) as each other and as the branch, if it
 * has any; a missing or incompatible part is -EINVAL, logged, and nothing is committed. */
int tfs_session_commit(struct tfs_store *s, const char *ds, const char *session, uint32_t nparts,
		       const char *branch, const char *message, struct tfs_id *commit_id,
		       uint64_t *rows);

/* Forget a session: its part records go; its chunks are garbage for gc. */
int tfs_session_abort(struct tfs_store *s, const char *ds, const char *session);

/* For gc: call fn with every manifest of the sessions recorded after cutoff (those still being
 * written: their chunks are kept), and remove the part records of the older ones (unless
 * dry_run), counting them in *removed. */
int tfs_session_sweep(struct tfs_store *s, const char *ds, int64_t cutoff, int dry_run,
		      int (*fn)(void *arg, const struct tfs_id *manifest), void *arg,
		      uint64_t *removed);

#endif
