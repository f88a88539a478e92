/* SPDX-License-Identifier: MIT */
/* tmpdir_fixture: a temporary directory for a unit test program, with the library's log sent to
 * a file in it, so that expected errors stay off the terminal and tests can read them. */
#ifndef TFS_TMPDIR_FIXTURE_H
#define TFS_TMPDIR_FIXTURE_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

static char tmpdir[64];	  /* /tmp/tfs-test-NAME-XXXXXX */
static char logpath[128]; /* tmpdir/tensorfs.log */

static int tmpdir_make(const char *name)
{
	snprintf(tmpdir, sizeof(tmpdir), "/tmp/tfs-test-%s-XXXXXX", name);
	if (!mkdtemp(tmpdir))
		return -1;
	snprintf(logpath, sizeof(logpath), "%s/tensorfs.log", tmpdir);
	return tfs_log_open(logpath);
}

/* Whether a line of the log holds needle. */
static inline int log_contains(const char *needle)
{
	FILE *f = fopen(logpath, "r");
	char line[2048];
	int found = 0;

	while (f && !found && fgets(line, sizeof(line), f))
		found = strstr(line, needle) != NULL;
	if (f)
		fclose(f);
	return found;
}

static int tmpdir_remove(void)
{
	char cmd[128];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
	return system(cmd) == 0 ? 0 : -1;
}

#endif
