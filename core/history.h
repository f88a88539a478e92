/* SPDX-License-Identifier: MIT */
/* history: what a dataset's commits say and hold: log, diff, reachability, verify and gc. */
#ifndef TFS_HISTORY_H
#define TFS_HISTORY_H

#include <stdint.h>

#include "cache.h"
#include "format.h"
#include "idmap.h"

/* The first-parent history from commit head as text, newest first (`tensorfs log` and the
 * mount's log file). At most max commits (0: all). */
int tfs_log_text(struct tfs_store *s, const char *ds, const struct tfs_id *head, size_t max,
		 struct tfs_buf *out);

/* What differs between two manifests: columns added, removed or replaced (dtype or shape
 * changed), and for the others the row ranges whose chunks differ, as text lines:
 *   + column NAME (DTYPE, SHAPE, N rows)
 *   - column NAME
 *   ~ column NAME rows A..B changed | added | removed
 * Nothing for identical versions. Chunks are compared by id; where an append rewrote a partial
 * tail chunk, its old rows are compared by content. */
int tfs_diff_text(struct tfs_store *s, const char *ds, const struct tfs_manifest *a,
		  const struct tfs_manifest *b, struct tfs_buf *out);

/* Every commit reachable from any branch or tag, through all parents. With cache (may be NULL),
 * each commit's parents are kept there (keyed by the commit's id), so a walk again loads only
 * the commits it has not met. */
int tfs_reachable_commits(struct tfs_store *s, struct tfs_cache *cache, const char *ds,
			  struct tfs_idset *commits);

struct tfs_verify_report {
	uint64_t commits, manifests, chunks, bytes;
	uint64_t problems;
	struct tfs_progress progress; /* while it runs: object bytes and objects checked; the
				       * caller zeroes it, a watcher may read it meanwhile */
};

/* Re-read every object reachable from every ref, checking content ids, checksums, sizes and the
 * cross-references between commits, manifests and chunks. Each problem is logged with the
 * object it concerns. Returns 0 when the walk completed (problems are counted in r) or -errno. */
int tfs_verify(struct tfs_store *s, const char *ds, struct tfs_verify_report *r);

struct tfs_gc_report {
	uint64_t kept, deleted, deleted_bytes, young;
	uint64_t temp_removed;	      /* writers' leftovers removed (a dry run: found) */
	uint64_t sessions_removed;    /* write sessions older than the grace period, forgotten */
	struct tfs_progress progress; /* while it runs: objects looked at (zeroed by the caller) */
};

/* Delete the objects of ds that no ref reaches and that were last written grace_s or more
 * seconds ago, in whole seconds, so 0 means everything unreachable (younger
 * ones may belong to a writer that has not moved its ref yet), and writers' temporary files
 * older than that. With dry_run nothing is deleted. If anything reachable cannot be read the
 * collection stops before deleting anything (-EIO). The parts of write sessions recorded within
 * the grace period are kept; older sessions are forgotten (session.h). */
int tfs_gc(struct tfs_store *s, const char *ds, int64_t grace_s, int dry_run,
	   struct tfs_gc_report *r);

#endif
