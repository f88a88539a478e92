/* SPDX-License-Identifier: MIT */
/* cli: what the tensorfs command's files share: the usage text and the mount command. */
#ifndef TFS_CLI_H
#define TFS_CLI_H

/* Print the usage text (to stdout for rc 0, else stderr); returns rc. */
int tfs_cli_usage(int rc);

/* `tensorfs mount LAKE_URL MOUNTPOINT ...`, also as mount.tensorfs and as mount.fuse runs it;
 * argv[0] is the command's name. Returns the exit status. */
int tfs_cmd_mount(int argc, char **argv);

#endif
