/* SPDX-License-Identifier: MIT */
/* maint_cmd: a lake's upkeep from the command line: `tensorfs verify` (every object of a
 * dataset checked), `gc` (unreachable objects and stale writers' leftovers removed after their
 * grace period) and `index` (the listing files an HTTP lake is browsed by). */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "history.h"
#include "lakeindex.h"
#include "progress.h"
#include "store.h"
#include "util.h"

/* Drop --progress/--quiet/-q from argv (they may come anywhere) into *mode; returns the new
 * argc. */
static int take_progress_flags(int argc, char **argv, enum tfs_progress_mode *mode)
{
	int n = 0;

	for (int i = 0; i < argc; i++) {
		const int m = i ? tfs_progress_flag(argv[i]) : -1;

		if (m >= 0)
			*mode = (enum tfs_progress_mode)m;
		else
			argv[n++] = argv[i];
	}
	argv[n] = NULL;
	return n;
}

int tfs_cmd_verify(int argc, char **argv)
{
	enum tfs_progress_mode pmode = TFS_PROGRESS_AUTO;
	struct tfs_verify_report r = { 0 };
	struct tfs_progress_line *pl;
	struct tfs_store *s;
	char *ds;
	int rc;

	argc = take_progress_flags(argc, argv, &pmode);
	if (argc != 2)
		return tfs_cli_usage(2);
	if (tfs_cli_open_dataset(argv[1], 0, &s, &ds))
		return 1;
	pl = tfs_progress_line_start("verify", "objects", &r.progress, pmode);
	rc = tfs_verify(s, ds, &r);
	tfs_progress_line_stop(pl);
	if (rc == -ENOENT)
		tfs_err("%s: no such dataset", argv[1]);
	else if (rc)
		tfs_err("%s: verify could not complete: %s", argv[1], strerror(-rc));
	else
		printf("%s: %" PRIu64 " commits, %" PRIu64 " manifests, %" PRIu64
		       " chunks (%" PRIu64 " bytes) checked: %" PRIu64 " problem%s\n",
		       argv[1], r.commits, r.manifests, r.chunks, r.bytes, r.problems,
		       r.problems == 1 ? "" : "s");
	free(ds);
	tfs_store_close(s);
	return rc || r.problems ? 1 : 0;
}

int tfs_cmd_gc(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "grace", required_argument, NULL, 'g' },
		{ "dry-run", no_argument, NULL, 'n' },
		{ NULL, 0, NULL, 0 },
	};
	enum tfs_progress_mode pmode = TFS_PROGRESS_AUTO;
	struct tfs_gc_report r = { 0 };
	struct tfs_progress_line *pl;
	struct tfs_store *s;
	long long grace = 86400;
	int opt, dry = 0, rc;
	char *ds, *end;

	argc = take_progress_flags(argc, argv, &pmode);
	while ((opt = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
		if (opt == 'g') {
			grace = strtoll(optarg, &end, 10);
			if (*end || grace < 0) {
				tfs_err("--grace %s: expected seconds", optarg);
				return 2;
			}
		} else if (opt == 'n') {
			dry = 1;
		} else {
			return tfs_cli_usage(2);
		}
	}
	if (argc - optind != 1)
		return tfs_cli_usage(2);
	if (tfs_cli_open_dataset(argv[optind], 0, &s, &ds))
		return 1;
	pl = tfs_progress_line_start("gc", "objects", &r.progress, pmode);
	rc = tfs_gc(s, ds, grace, dry, &r);
	tfs_progress_line_stop(pl);
	if (rc == -ENOENT)
		tfs_err("%s: no such dataset", argv[optind]);
	else if (!rc && dry)
		printf("%s: would delete %" PRIu64 " unreachable objects (%" PRIu64
		       " bytes), kept %" PRIu64 " reachable and %" PRIu64
		       " younger than %llds; would remove %" PRIu64 " temporary files and %" PRIu64
		       " abandoned write sessions; nothing was removed (--dry-run)\n",
		       argv[optind], r.deleted, r.deleted_bytes, r.kept, r.young, grace,
		       r.temp_removed, r.sessions_removed);
	else if (!rc)
		printf("%s: deleted %" PRIu64 " unreachable objects (%" PRIu64
		       " bytes), kept %" PRIu64 " reachable and %" PRIu64
		       " younger than %llds; removed %" PRIu64 " temporary files and %" PRIu64
		       " abandoned write sessions\n",
		       argv[optind], r.deleted, r.deleted_bytes, r.kept, r.young, grace,
		       r.temp_removed, r.sessions_removed);
	free(ds);
	tfs_store_close(s);
	return rc ? 1 : 0;
}

int tfs_cmd_index(int argc, char **argv)
{
	struct tfs_store *s;
	int rc;

	if (argc != 2)
		return tfs_cli_usage(2);
	if (tfs_store_open(argv[1], 0, &s))
		return 1;
	rc = tfs_lakeindex_write(s);
	if (rc < 0)
		tfs_err("%s: cannot write the index: %s", argv[1], strerror(-rc));
	else
		printf("%s: wrote %d index files\n", s->url, rc);
	tfs_store_close(s);
	return rc < 0 ? 1 : 0;
}
