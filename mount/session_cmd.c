/* SPDX-License-Identifier: MIT */
/* session_cmd: `tensorfs commit URL --session ID` (a write session's parts as one commit) and
 * `tensorfs session ls|abort URL` (the sessions being written). */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "session.h"
#include "store.h"
#include "util.h"

int tfs_cmd_commit(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "session", required_argument, NULL, 's' },
		{ "parts", required_argument, NULL, 'n' },
		{ "message", required_argument, NULL, 'm' },
		{ "branch", required_argument, NULL, 'b' },
		{ NULL, 0, NULL, 0 },
	};
	const char *session = NULL, *message = NULL, *branch = NULL;
	unsigned long nparts = 0;
	struct tfs_store *s = NULL;
	char *ds = NULL, *end, hex[TFS_ID_HEX];
	struct tfs_id commit;
	uint64_t rows = 0;
	int opt, rc;

	while ((opt = getopt_long(argc, argv, "m:b:", longopts, NULL)) != -1) {
		switch (opt) {
		case 's':
			session = optarg;
			break;
		case 'n':
			nparts = strtoul(optarg, &end, 10);
			if (*end || !nparts || nparts > TFS_SESSION_MAX_PARTS) {
				tfs_err("--parts %s: expected 1 to %u", optarg,
					TFS_SESSION_MAX_PARTS);
				return 2;
			}
			break;
		case 'm':
			message = optarg;
			break;
		case 'b':
			branch = optarg;
			break;
		default:
			return tfs_cli_usage(2);
		}
	}
	if (argc - optind != 1 || !session) {
		tfs_err("usage: tensorfs commit URL --session ID [--parts N] [-m MSG] [--branch "
			"B]");
		return 2;
	}
	if (tfs_cli_open_dataset(argv[optind], 0, &s, &ds))
		return 1;
	rc = tfs_session_commit(s, ds, session, (uint32_t)nparts, branch, message, &commit, &rows);
	if (rc) {
		tfs_err("commit of session %s into %s failed; the dataset is unchanged", session,
			argv[optind]);
		rc = rc == -EAGAIN ? TFS_EXIT_RETRY : 1;
	} else {
		tfs_id_hex(&commit, hex);
		printf("committed %s to %s/%s: session %s, %" PRIu64 " row%s\n", hex, ds,
		       branch ? branch : "main", session, rows, rows == 1 ? "" : "s");
	}
	free(ds);
	tfs_store_close(s);
	return rc;
}

static int print_session(void *arg, const struct tfs_session_info *info)
{
	const int64_t age = (int64_t)time(NULL) - info->newest;

	(void)arg;
	printf("%-24s %8" PRIu32 " %12" PRIu64 " %10" PRId64 "s\n", info->name, info->parts,
	       info->rows, age > 0 ? age : 0);
	return 0;
}

int tfs_cmd_session(int argc, char **argv)
{
	struct tfs_store *s = NULL;
	char *ds = NULL;
	int ls, rc;

	if (argc < 3 || (strcmp(argv[1], "ls") && strcmp(argv[1], "abort")))
		goto usage;
	ls = !strcmp(argv[1], "ls");
	if (argc != (ls ? 3 : 4))
		goto usage;
	if (tfs_cli_open_dataset(argv[2], 0, &s, &ds))
		return 1;
	if (ls) {
		printf("%-24s %8s %12s %11s\n", "SESSION", "PARTS", "ROWS", "LAST PART");
		rc = tfs_session_list(s, ds, print_session, NULL);
		if (rc)
			tfs_err("%s: cannot list sessions: %s", argv[2], strerror(-rc));
	} else {
		rc = tfs_session_abort(s, ds, argv[3]);
		if (!rc)
			printf("aborted session %s of %s; gc removes its chunks after the grace "
			       "period\n",
			       argv[3], ds);
	}
	free(ds);
	tfs_store_close(s);
	return rc ? 1 : 0;
usage:
	tfs_err("usage: tensorfs session ls URL | tensorfs session abort URL ID");
	return 2;
}
