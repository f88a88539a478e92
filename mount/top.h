/* SPDX-License-Identifier: MIT */
/* top: watching a mount: `tensorfs top` (live, curses) and `tensorfs stats` (once). */
#ifndef TFS_TOP_H
#define TFS_TOP_H

/* argv[0] is the command's name. Return the process exit status. */
int tfs_cmd_top(int argc, char **argv);
int tfs_cmd_stats(int argc, char **argv);

#endif
