/* SPDX-License-Identifier: MIT */
/* progress: the CLI's progress line for long work (rows, bytes, rate, ETA), like pv or rsync. */
#ifndef TFS_PROGRESS_H
#define TFS_PROGRESS_H

#include "util.h"

enum tfs_progress_mode {
	TFS_PROGRESS_AUTO, /* on when stderr is a terminal */
	TFS_PROGRESS_ON,  /* --progress: on a terminal a line redrawn in place, else a line a second
			   */
	TFS_PROGRESS_OFF, /* --quiet */
};

struct tfs_progress_line;

/* Show p's progress on stderr, from a thread of its own, until stopped. what names the work
 * ("import"), unit the items ("rows", "objects"). Returns NULL when the line is off. */
struct tfs_progress_line *tfs_progress_line_start(const char *what, const char *unit,
						  const struct tfs_progress *p,
						  enum tfs_progress_mode mode);
/* Stop the thread, draw the last figures and end the line. NULL is fine. */
void tfs_progress_line_stop(struct tfs_progress_line *pl);

/* --progress, --quiet (or -q): the mode it sets, or -1 for any other argument. */
int tfs_progress_flag(const char *arg);

#endif
