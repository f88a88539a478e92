/* SPDX-License-Identifier: MIT */
/* mountpoint: what is at a mount point before tensorfs mounts there. */
#ifndef TFS_MOUNTPOINT_H
#define TFS_MOUNTPOINT_H

#include <limits.h>

/* Make path ready to mount on and write its absolute form to abs. Refused, with a message that
 * says what to do: a path that is already a tensorfs mount (a second daemon would stack on the
 * first); a dead FUSE mount left by a killed daemon ("Transport endpoint is not connected"),
 * unless force, which unmounts it first; a directory that is not empty, unless nonempty (the
 * mount would hide its files). Returns 0 or -errno. */
int tfs_mountpoint_prepare(const char *path, int force, int nonempty, char abs[PATH_MAX]);

#endif
